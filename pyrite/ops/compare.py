"""Comparisons that answer "are these the same?": isclose, allclose, equal.

`isclose` is one strided map (ops/core.py `run_map`) in f32 arithmetic: |a - b| <= atol + rtol·|b|
for finite values, exact equality for infinities, NaN == NaN only with equal_nan. NaN and inf
tests are bit tests (`p_isnan`, `p_isinf`): a compiler may fold `x != x` away. `allclose` and
`equal` reduce that mask to one bool on the device and read back one element (one round trip).
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import DtypeError
from ..tensor import Tensor
from .core import broadcast_shapes, empty, run_map
from .elementwise import as_tensor_arg

# x0 = input, x1 = other, s0 = rtol, s1 = atol, s2 = equal_nan (1.0 / 0.0); all f32.
_ISCLOSE = (
    "select("
    "select(false, x0 == x1 || abs(x0 - x1) <= s1 + s0 * abs(x1), "
    "!p_isinf(x0) && !p_isinf(x1)) || (x0 == x1 && !p_isnan(x0)), "
    "s2 != 0.0 && p_isnan(x0) && p_isnan(x1), "
    "p_isnan(x0) || p_isnan(x1))"
)
_EQUAL_I = "x0 == x1"


def _pair(input, other, name):
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if a.dtype is not b.dtype:
        raise DtypeError(
            f"pyrite: {name}: {a.dtype} did not match {b.dtype} (both tensors must have the "
            "same dtype, as in PyTorch)"
        )
    return a, b


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> Tensor:
    a, b = _pair(input, other, "isclose")
    if rtol < 0 or atol < 0:
        raise ValueError(f"pyrite: isclose: rtol ({rtol}) and atol ({atol}) must be >= 0")
    shape = broadcast_shapes(a._shape, b._shape)
    out = empty(shape, D.bool_)
    if a.dtype.is_bool:
        return run_map(_EQUAL_I, (a, b), ("i32", "i32"), out, "bool")
    # ints are compared in f32 too (exact below 2**24), as torch casts them for the tolerance
    return run_map(
        _ISCLOSE,
        (a, b),
        ("f32", "f32"),
        out,
        "bool",
        (float(rtol), float(atol), 1.0 if equal_nan else 0.0),
        ("f32", "f32", "f32"),
    )


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """True when every broadcast pair is close (one readback)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other) -> bool:
    """True when both have the same shape and every element is equal (NaN != NaN)."""
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if a._shape != b._shape:
        return False
    if a.numel() == 0:
        return True
    ct = "f32" if "f" in (a.dtype.kind, b.dtype.kind) else "i32"
    same = run_map(_EQUAL_I, (a, b), (ct, ct), empty(a._shape, D.bool_), "bool")
    return bool(same.all().item())


__all__ = ["allclose", "equal", "isclose"]

METHODS = {"allclose": allclose, "isclose": isclose, "equal": equal}
