"""torch.random: the default generator's seed and state (one Philox generator serves every
device), and `fork_rng`, which restores that state when its block ends."""

from __future__ import annotations

import contextlib

from .ops.misc import get_rng_state, set_rng_state
from .ops.random import Generator, default_generator, initial_seed, manual_seed, seed

__all__ = [
    "Generator",
    "default_generator",
    "fork_rng",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "seed",
    "set_rng_state",
]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):  # fmt: skip
    """Draws inside the block leave the default generator as it was before: its state is saved
    on entry and set back on exit (`devices` and `device_type` name the one generator here)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
