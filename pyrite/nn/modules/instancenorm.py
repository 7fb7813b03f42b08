"""torch.nn.modules.instancenorm's names (the layers live in norm.py)."""

from __future__ import annotations

from .norm import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, _InstanceNorm, _NormBase  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
