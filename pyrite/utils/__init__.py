"""torch.utils's counterpart: `pyrite.utils.data` (datasets, samplers, DataLoader) and
`pyrite.utils.checkpoint` (activation checkpointing)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
