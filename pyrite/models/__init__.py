"""Model families built from `pyrite.nn`, loadable from real checkpoints (Hugging Face folders
of safetensors, llama.cpp's GGUF files), with generation."""

from __future__ import annotations

from ._generate import KVCache
from .bert import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertModel
from .gpt2 import GPT2Config, GPT2LMHeadModel, GPT2Model
from .llama import LlamaConfig, LlamaForCausalLM
from .tokenizer import GGUFTokenizer

__all__ = [
    "BertConfig",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "BertModel",
    "GGUFTokenizer",
    "GPT2Config",
    "GPT2LMHeadModel",
    "GPT2Model",
    "KVCache",
    "LlamaConfig",
    "LlamaForCausalLM",
]
