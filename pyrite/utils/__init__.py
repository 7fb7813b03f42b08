"""torch.utils's counterpart: `pyrite.utils.data` (datasets, samplers, DataLoader),
`pyrite.utils.checkpoint` (activation checkpointing) and `pyrite.utils.hooks` (RemovableHandle)."""

from . import checkpoint, data, hooks

__all__ = ["checkpoint", "data", "hooks"]
