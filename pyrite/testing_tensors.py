"""`pr.testing.make_tensor`: torch.testing.make_tensor, random test inputs of any shape and
dtype, as ported test suites use it.

It lives outside `pyrite/testing/` because it makes pyrite tensors, and that package imports
only numpy, the standard library and `pyrite.dtypes` (its references must not share a bug with
what they check); pyrite/__init__.py attaches it to `pr.testing`.

The values follow torch's rules — uniform in [low, high), the bounds defaulting by dtype (bool
[0, 2), unsigned [0, 10), signed integers [-9, 10), floating and complex [-9, 9)), clamped to
the dtype's finite range, an integer range's bounds rounded up — but come from pyrite's
generator (`pr.manual_seed`), so they are not torch's numbers for the same seed.
"""

from __future__ import annotations

import math
import numbers
import warnings

from . import dtypes as D
from .errors import ArgumentError, DtypeError

__all__ = ["make_tensor"]

_INTEGRAL = (D.uint8, D.int8, D.int16, D.int32)  # (int64 is int32 here)
_FLOATING = (D.float16, D.bfloat16, D.float32)  # (float64 is float32)
_COMPLEX = (D.complex64,)


def _bounds(dtype, low, high, lowest, highest, default_low, default_high):
    """torch's low/high handling: defaults, NaN and order checks, clamping into the dtype's
    range [lowest, highest); integer bounds rounded up (randint's high is exclusive)."""
    low = default_low if low is None else low
    high = default_high if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise ArgumentError(
            f"pyrite: `low` and `high` cannot be NaN, but got low={low} and high={high}"
        )
    if low == high and dtype.kind in "fc":
        warnings.warn(
            "Passing `low==high` to `torch.testing.make_tensor` for floating or complex types "
            "is deprecated since 2.1 and will be removed in 2.3. Use `torch.full(...)` instead.",
            FutureWarning,
            stacklevel=3,
        )
    elif low >= high:
        raise ArgumentError(f"pyrite: `low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise ArgumentError(
            f"pyrite: The value interval specified by `low` and `high` is [{low}, {high}), "
            f"but {dtype} only supports [{lowest}, {highest})"
        )
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if dtype.kind in "biu":
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(
    *shape,
    dtype,
    device=None,
    low=None,
    high=None,
    requires_grad: bool = False,
    noncontiguous: bool = False,
    exclude_zero: bool = False,
    memory_format=None,
):
    """torch.testing.make_tensor(*shape, dtype, device, low=None, high=None,
    requires_grad=False, noncontiguous=False, exclude_zero=False, memory_format=None): a tensor
    of `shape` (ints, or one sequence) drawn uniformly from [low, high). `noncontiguous` gives
    every other element of a tensor twice as wide in its last dimension (from the second, so
    the offset is tested too); `exclude_zero` replaces zeros by 1 (bool, integers) or the
    dtype's smallest normal number (`finfo.tiny`; both parts for complex)."""
    from .ops.complex import view_as_real
    from .ops.creation import empty
    from .ops.random import randint
    from .runtime import finfo, iinfo

    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = shape[0]
    shape = tuple(int(s) for s in shape)
    if noncontiguous and memory_format is not None:
        raise ArgumentError(
            "pyrite: The parameters `noncontiguous` and `memory_format` are mutually exclusive, "
            f"but got noncontiguous={noncontiguous} and memory_format={memory_format}"
        )
    if not isinstance(dtype, D.dtype) or dtype not in (D.bool_, *_INTEGRAL, *_FLOATING, *_COMPLEX):
        raise DtypeError(
            f"pyrite: The requested dtype '{dtype}' is not supported by "
            "torch.testing.make_tensor()."
        )
    if requires_grad and dtype.kind in "biu":
        raise ArgumentError(
            "pyrite: `requires_grad=True` is not supported for boolean and integral dtypes, but "
            f"got dtype={dtype}"
        )
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:  # twice as wide in the last dimension; every other element kept (below)
        shape = (*shape[:-1], 2 * shape[-1])
    if dtype is D.bool_:
        low, high = _bounds(dtype, low, high, 0, 2, 0, 2)
        result = randint(low, high, shape, dtype=dtype)
    elif dtype.kind in "iu":
        info = iinfo(dtype)
        low, high = _bounds(dtype, low, high, info.min, info.max + 1, -9, 10)
        result = randint(low, high, shape, dtype=dtype)
    else:
        info = finfo(dtype)
        low, high = _bounds(dtype, low, high, info.min, info.max, -9, 9)
        result = empty(shape, dtype=dtype)
        target = view_as_real(result) if dtype.kind == "c" else result
        if high - low >= info.max:  # (uniform_ needs high - low finite: draw half, double)
            target.uniform_(low / 2, high / 2).mul_(2)
        else:
            target.uniform_(low, high)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        result[result == 0] = 1 if dtype.kind in "biu" else finfo(dtype).tiny
    if dtype.kind in "fc":
        result.requires_grad = requires_grad
    return result
