"""torch.utils's counterpart: `pyrite.utils.data` (datasets, samplers, DataLoader)."""

from . import data

__all__ = ["data"]
