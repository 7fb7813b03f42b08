"""Model families built from `pyrite.nn`, loadable from real checkpoints (Hugging Face folders
of safetensors, llama.cpp's GGUF files), with generation."""

from __future__ import annotations

from .llama import KVCache, LlamaConfig, LlamaForCausalLM

__all__ = ["KVCache", "LlamaConfig", "LlamaForCausalLM"]
