"""Casts and copies: dtype conversion (`to_dtype`, `x.to(...)`, `x.type(...)`, `x.float()`,
`x.half()`, `x.int()`, `x.long()`, `x.bool()`, `x.double()`, `x.type_as(other)`) and copying
(`clone`, `copy_`, `fill_`, `zero_`).

No kernel of its own: each is the strided map (ops/core.py `run_map`) with the identity
expression `x0` (or the scalar `s0` for a fill), which loads in the source's compute type and
stores in the destination's storage type, so the copy and the cast are one pass. `copy_`,
`fill_` and `zero_` write into the tensor itself (through its strides, so a view writes into its
base); the others return a new contiguous tensor.
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import ShapeError
from ..tensor import Tensor
from .core import broadcast_shapes, empty, run_map
from .elementwise import _is_scalar, as_tensor_arg


def to_dtype(x: Tensor, dtype) -> Tensor:
    """x cast to `dtype`: x itself when it already has that dtype, else a new tensor."""
    dtype = D.from_any(dtype)
    if dtype is x.dtype:
        return x
    return run_map("x0", (x,), (x.dtype.ctype,), empty(x._shape, dtype), x.dtype.ctype)


def clone(x: Tensor, *, memory_format=None) -> Tensor:
    return run_map("x0", (x,), (x.dtype.ctype,), empty(x._shape, x.dtype), x.dtype.ctype)


def copy_(self: Tensor, src, non_blocking=False) -> Tensor:
    """Copy `src` (broadcast, cast) into this tensor's elements, in place."""
    src = as_tensor_arg(src) if not _is_scalar(src) else src
    if _is_scalar(src):
        return fill_(self, src)
    shape = broadcast_shapes(self._shape, src._shape)
    if shape != self._shape:
        raise ShapeError(
            f"pyrite: copy_: source shape {tuple(src._shape)} does not broadcast "
            f"to {tuple(self._shape)}"
        )
    return run_map("x0", (src,), (src.dtype.ctype,), self, src.dtype.ctype)


def fill_(self: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        return copy_(self, value)
    ct = self.dtype.ctype if self.dtype.ctype != "bool" else "i32"
    return run_map("s0", (), (), self, ct, (value,), (ct,))


def zero_(self: Tensor) -> Tensor:
    return fill_(self, 0)


def _method_to(self, *args, **kwargs):
    """`x.to(dtype)`, `x.to(device)`, `x.to(other)`: only the dtype changes anything here."""
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif (
            isinstance(a, D.dtype)
            or (not isinstance(a, str) and a is not None and "dtype" in type(a).__name__)
            or isinstance(a, str)
            and a in D._ALL
        ):
            dtype = a
    if dtype is None:
        return self
    return to_dtype(self, dtype)


def _method_type(self, dtype=None):
    """`x.type()` names the dtype; `x.type(dtype)` casts."""
    return self.dtype if dtype is None else to_dtype(self, dtype)


def _type_method(dt):
    """`x.float()` and friends: a cast to `dt` (float64 is stored as float32, int64 as int32)."""

    def fn(self, memory_format=None):
        return to_dtype(self, dt)

    return fn


def type_as(self: Tensor, other: Tensor) -> Tensor:
    return to_dtype(self, other.dtype)


__all__ = ["clone"]

METHODS = {
    "clone": clone,
    "to": _method_to,
    "type": _method_type,
    "type_as": type_as,
    "float": _type_method(D.float32),
    "half": _type_method(D.float16),
    "double": _type_method(D.float32),
    "int": _type_method(D.int32),
    "long": _type_method(D.int32),
    "bool": _type_method(D.bool_),
    "copy_": copy_,
    "fill_": fill_,
    "zero_": zero_,
}
