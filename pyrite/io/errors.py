"""The errors of pyrite.save / pyrite.load."""

from __future__ import annotations

import pickle

from ..errors import PyriteError


class CheckpointError(PyriteError):
    """A checkpoint that cannot be read: truncated, corrupt, of a format pyrite does not know,
    or holding values pyrite cannot store. The message names the file."""


class UnpicklingError(PyriteError, pickle.UnpicklingError):
    """A PyTorch checkpoint's pickle asked for a class or function outside what pyrite.load
    admits (torch.load(weights_only=True) raises pickle.UnpicklingError here too)."""
