"""Host-side random streams for samplers, driven by a `pyrite.Generator`.

Samplers yield Python ints, so their permutations are drawn on the host (numpy's Philox, keyed
by the pyrite generator's seed and started at its counter offset): no device sort and no
readback per epoch. Each draw advances the generator's offset, so `pr.manual_seed(s)` makes a
run's shuffles reproducible and two epochs (or two loaders on one generator) differ.
"""

from __future__ import annotations

import numpy as np

from ...ops.random import Generator, default_generator


def host_rng(generator: Generator | None, n: int) -> np.random.Generator:
    """A numpy Generator for a draw of about `n` values from `generator` (the default one if
    None), advancing it past them."""
    gen = default_generator if generator is None else generator
    if not isinstance(gen, Generator):
        raise TypeError(
            f"pyrite: generator must be a pyrite.Generator, not {type(generator).__name__}"
        )
    offset = gen.take(4 * max(int(n), 1))
    return np.random.Generator(np.random.Philox(key=gen.initial_seed(), counter=offset))


def randperm(n: int, generator: Generator | None = None) -> list:
    """A random permutation of range(n) as a list of Python ints (torch.randperm(n).tolist())."""
    return host_rng(generator, n).permutation(n).tolist()


def randint(high: int, size: int, generator: Generator | None = None) -> list:
    """`size` ints uniform on [0, high) (torch.randint(high=high, size=(size,)).tolist())."""
    return host_rng(generator, size).integers(0, high, size=size).tolist()
