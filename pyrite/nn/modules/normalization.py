"""torch.nn.modules.normalization's names (the layers live in norm.py)."""

from __future__ import annotations

from .norm import GroupNorm, LayerNorm, LocalResponseNorm, RMSNorm

__all__ = ["GroupNorm", "LayerNorm", "LocalResponseNorm", "RMSNorm"]
