"""Helpers the layer files share: new parameter storage and n-tuples of arguments."""

from __future__ import annotations

import collections.abc
from itertools import repeat

from ... import dtypes as D
from ...ops.core import empty


def new_empty(*shape, dtype=None):
    """Uninitialised storage for a parameter or buffer (reset_parameters fills it)."""
    for n in shape:  # (nn.Linear(-1, 3), nn.Bilinear(2, 2, -1): torch's check and words)
        if n < 0:
            raise RuntimeError(
                f"pyrite: Trying to create tensor with negative dimension {n}: {list(shape)}"
            )
    return empty(tuple(shape), D.float32 if dtype is None else D.from_any(dtype))


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t, n):
    """(a, b) -> (b, b, a, a) for n=2: F.pad's order, last dim first."""
    return tuple(x for x in reversed(t) for _ in range(n))
