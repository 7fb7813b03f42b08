"""Awkward sizes and shapes for parity tests, and small helpers to build inputs from them.

Kernels go wrong at the edges: a size of 1 (a broadcast or a stride of 0), sizes that no tile
divides (primes), one past a tile or workgroup (tile + 1 leaves a lone element in the last
workgroup), and views whose last dimension is not the contiguous one. These sets cover those edges
while staying small enough for lavapipe on a 2-core CI machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

PRIMES = (7, 13, 17, 31, 257)
# One past the usual tile and workgroup sizes (64, 256, 1024 invocations).
TILE_PLUS_ONE = (65, 257, 1025)
AWKWARD_SIZES = (1, 7, 13, 17, 31, 65, 257, 1025)

# The smallest 1-D size whose 256-wide workgroups pass WebGPU's 65,535 per grid dimension
# (maxComputeWorkgroupsPerDimension), so the grid must fold into y. 64 MiB in f32: use sparingly.
GRID_FOLD_SIZE = 256 * 65535 + 1

SHAPES_0D = ((),)
SHAPES_1D = tuple((n,) for n in AWKWARD_SIZES)
SHAPES_2D = (
    (1, 1),
    (1, 7),
    (7, 1),
    (13, 17),
    (17, 13),
    (31, 65),
    (65, 31),
    (1, 1025),
    (257, 13),
)
SHAPES_ND = (
    (2, 3, 5),
    (1, 7, 1),
    (17, 1, 31),
    (3, 1, 13, 2),
    (2, 3, 1, 5, 7),
    (2, 1, 3, 1, 2, 5),
)
EMPTY_SHAPES = ((0,), (3, 0), (0, 5, 2))

# (a, b) pairs that broadcast under numpy/PyTorch rules, each probing a different rule:
# scalar with tensor, 1 against n, missing leading dims, 1s on both sides, identical shapes.
BROADCAST_PAIRS = (
    ((), (7,)),
    ((7,), ()),
    ((1,), (13,)),
    ((13,), (1,)),
    ((17, 1), (1, 31)),
    ((65,), (31, 65)),
    ((31, 1), (65,)),
    ((3, 1, 5), (7, 1)),
    ((2, 1, 13), (1, 17, 1)),
    ((1, 1, 1), (7,)),
    ((5, 1, 7, 1), (3, 1, 2)),
    ((31, 65), (31, 65)),
)
# Pairs that must raise a shape error naming both shapes.
NON_BROADCASTABLE_PAIRS = (
    ((3,), (4,)),
    ((2, 3), (3, 2)),
    ((7, 1), (13, 2)),
    ((65,), (64,)),
)

# (M, K, N) for matmul: degenerate, primes, tile + 1, GEMV-like, and one aligned case.
MATMUL_SHAPES = (
    (1, 1, 1),
    (1, 7, 1),
    (7, 1, 13),
    (13, 17, 31),
    (31, 13, 17),
    (65, 31, 257),
    (1, 1025, 13),
    (257, 65, 1),
    (64, 64, 64),
    (65, 65, 65),
)
# ((batch..., M, K), (batch..., K, N)) pairs whose batch dimensions broadcast.
BATCHED_MATMUL_PAIRS = (
    ((2, 13, 17), (17, 7)),
    ((13, 17), (3, 17, 7)),
    ((3, 1, 7, 5), (2, 5, 13)),
    ((2, 1, 65), (2, 65, 1)),
)


def numel(shape: Iterable[int]) -> int:
    return math.prod(shape)


def broadcast_shape(a: tuple, b: tuple) -> tuple:
    """The shape `a` and `b` broadcast to (numpy's rule, which PyTorch shares)."""
    return tuple(np.broadcast_shapes(tuple(a), tuple(b)))


def all_shapes(max_numel: int | None = None, scalar: bool = True, empty: bool = False) -> list:
    """Every shape above (0-d to 6-d), optionally capped in element count."""
    shapes = list(SHAPES_1D) + list(SHAPES_2D) + list(SHAPES_ND)
    if scalar:
        shapes = list(SHAPES_0D) + shapes
    if empty:
        shapes += list(EMPTY_SHAPES)
    if max_numel is not None:
        shapes = [s for s in shapes if numel(s) <= max_numel]
    return shapes


def matmul_shapes(max_flops: int | None = None) -> list:
    """(M, K, N) triples, optionally capped at `max_flops` = 2*M*K*N."""
    return [s for s in MATMUL_SHAPES if max_flops is None or 2 * numel(s) <= max_flops]


def reduction_cases(shapes: Iterable[tuple] | None = None) -> Iterator[tuple]:
    """(shape, dim, keepdim) for every dimension of each shape, the last one negative-indexed,
    and dim=None (reduce all)."""
    for shape in shapes if shapes is not None else SHAPES_1D[:4] + SHAPES_2D + SHAPES_ND:
        dims = list(range(len(shape) - 1)) + ([-1] if shape else []) + [None]
        for dim in dims:
            for keepdim in (False, True):
                yield shape, dim, keepdim


def random_array(rng: np.random.Generator, shape, dtype="float32", low=None, high=None):
    """A numpy array of `shape` and `dtype` (a numpy or pyrite dtype, or its name).

    Floats are uniform in [low, high) (default [-1, 1)), drawn in float64 and rounded once to
    `dtype`: compute the reference from the returned array, not from the draw. Ints are uniform
    in [low, high) (default [-100, 100)); bools are True with probability 1/2.
    """
    shape = tuple(shape)
    if getattr(dtype, "is_bool", False) or np.dtype(getattr(dtype, "np", dtype)) == np.bool_:
        return rng.random(shape) < 0.5
    dt = np.dtype(getattr(dtype, "np", dtype))
    if dt.kind in "iu":
        lo = -100 if low is None else int(low)
        hi = 100 if high is None else int(high)
        return rng.integers(lo, hi, size=shape, dtype=np.int64).astype(dt)
    lo = -1.0 if low is None else low
    hi = 1.0 if high is None else high
    return np.asarray(rng.uniform(lo, hi, size=shape)).astype(dt)
