"""torch.signal's counterpart: `pyrite.signal.windows` (the window functions of
torch.signal.windows)."""

from . import windows

__all__ = ["windows"]
