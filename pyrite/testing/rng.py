"""Reproducible random generators: one seed per test, taken from the test's name.

The seed is a stable hash of the name (zlib.crc32; Python's `hash` changes per process), so a
test sees the same inputs on every run and machine, and different tests see different inputs.
`PYRITE_SEED=N` overrides it for every test: a failing test prints its seed (tests/conftest.py),
and rerunning with that value reproduces the failure.
"""

from __future__ import annotations

import os
import zlib

import numpy as np

SEED_ENV = "PYRITE_SEED"


def seed_for(test_name: str) -> int:
    """The seed for `test_name`: $PYRITE_SEED when set, else crc32 of the name (0 <= seed < 2**32)."""
    override = os.environ.get(SEED_ENV, "").strip()
    if override:
        try:
            return int(override, 0)
        except ValueError:
            raise ValueError(f"{SEED_ENV}={override!r} is not an integer") from None
    return zlib.crc32(test_name.encode("utf-8"))


def rng_for(test_name: str) -> tuple[np.random.Generator, int]:
    """(generator, seed) for `test_name`; print or record the seed so a failure can be rerun."""
    seed = seed_for(test_name)
    return np.random.default_rng(seed), seed
