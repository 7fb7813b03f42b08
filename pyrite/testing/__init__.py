"""Test helpers: reproducible random inputs, awkward shapes, tolerances derived from the operation.

This package imports only numpy and the standard library (and may use `pyrite.dtypes`), so a
reference computed here cannot share a bug with the code it checks (tests/test_layering.py
keeps that honest).

`assert_close` here is torch.testing's (keyword tolerances defaulting by dtype, `msg=`,
nested containers), so `pr.testing.assert_close` serves ported tests; called with positional
tolerances it is `tolerance.assert_close`, the suite's own.
"""

from ._comparison import assert_close
from .rng import rng_for, seed_for
from .shapes import (
    AWKWARD_SIZES,
    BROADCAST_PAIRS,
    NON_BROADCASTABLE_PAIRS,
    PRIMES,
    SHAPES_1D,
    SHAPES_2D,
    SHAPES_ND,
    TILE_PLUS_ONE,
    all_shapes,
    broadcast_shape,
    matmul_shapes,
    numel,
    random_array,
    reduction_cases,
)
from .tolerance import (
    Tol,
    dot_tol,
    elementwise_tol,
    matmul_tol,
    sum_tol,
    unit_roundoff,
)

__all__ = [
    "AWKWARD_SIZES",
    "BROADCAST_PAIRS",
    "NON_BROADCASTABLE_PAIRS",
    "PRIMES",
    "SHAPES_1D",
    "SHAPES_2D",
    "SHAPES_ND",
    "TILE_PLUS_ONE",
    "Tol",
    "all_shapes",
    "assert_close",
    "broadcast_shape",
    "dot_tol",
    "elementwise_tol",
    "matmul_shapes",
    "matmul_tol",
    "numel",
    "random_array",
    "reduction_cases",
    "rng_for",
    "seed_for",
    "sum_tol",
    "unit_roundoff",
]
