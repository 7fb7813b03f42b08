"""torch.utils.data._utils's counterpart (scripts import `default_collate` from here too)."""

from . import collate

__all__ = ["collate"]
