"""Model families built from `pyrite.nn`, loadable from real checkpoints (Hugging Face folders
of safetensors, llama.cpp's GGUF files), with generation."""

from __future__ import annotations

from .llama import KVCache, LlamaConfig, LlamaForCausalLM
from .tokenizer import GGUFTokenizer

__all__ = ["GGUFTokenizer", "KVCache", "LlamaConfig", "LlamaForCausalLM"]
