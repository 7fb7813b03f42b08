"""Casts and copies: dtype conversion (`to_dtype`, `x.to(...)`, `x.type(...)`, `x.float()`,
`x.half()`, `x.bfloat16()`, `x.int()`, `x.long()`, `x.short()`, `x.char()`, `x.byte()`,
`x.bool()`, `x.double()`, `x.type_as(other)`) and copying (`clone`, `copy_`, `fill_`, `zero_`).

PyTorch's cast rules (CPU, x86), which the map's stores implement (kernels/common.store/p_*):
  float → int     truncate toward zero through int32; NaN, ±inf and |x| >= 2^31 give INT32_MIN,
                  then wrap to the width (so float → uint8 of -1.0 is 255, of 300.0 is 44, of NaN
                  is 0). C++ leaves these undefined; this is what PyTorch CPU returns on x86
                  (cvttss2si), checked against torch 2.13 in tests/test_dtypes.py.
  int → int       wrap to the width, two's complement (int32 300 → uint8 44, int8 44).
  float → bool    nonzero by the bits: NaN is True, -0.0 False.
  → float16       round to nearest even; |x| >= 65520 becomes ±inf.
  → bfloat16      round to nearest even from f32; NaN stays NaN (0x7fc0; PyTorch CPU's
                  vectorised path gives 0xffff, also NaN).

No kernel of its own: each is the strided map (ops/core.py `run_map`) with the identity
expression `x0` (or the scalar `s0` for a fill), which loads in the source's compute type and
stores in the destination's storage type, so the copy and the cast are one pass. `copy_`,
`fill_` and `zero_` write into the tensor itself (through its strides, so a view writes into its
base); the others return a new contiguous tensor.
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import ShapeError
from ..tensor import Tensor, check_device
from . import range_rules, ranges
from .core import broadcast_shapes, empty, keep_bounds, run_map
from .elementwise import as_tensor_arg


def to_dtype(x: Tensor, dtype) -> Tensor:
    """x cast to `dtype`: x itself when it already has that dtype, else a new tensor."""
    dtype = D.from_any(dtype)
    if dtype is x.dtype:
        return x
    out = run_map("x0", (x,), (x.dtype.ctype,), empty(x._shape, dtype), x.dtype.ctype)
    if dtype.kind == "i":
        range_rules.after_cast(x, out)
    return out


def clone(x: Tensor, *, memory_format=None) -> Tensor:
    out = run_map("x0", (x,), (x.dtype.ctype,), empty(x._shape, x.dtype), x.dtype.ctype)
    return keep_bounds(out, x)


def copy_(self: Tensor, src, non_blocking=False) -> Tensor:
    """Copy `src` (broadcast, cast) into this tensor's elements, in place."""
    # a Python number is copied as a 0-d tensor of its type (cast, as torch's copy_: -2.97
    # into uint8 is 254), not checked as a fill value
    src = as_tensor_arg(src)
    shape = broadcast_shapes(self._shape, src._shape)
    if shape != self._shape:
        raise ShapeError(
            f"pyrite: copy_: source shape {tuple(src._shape)} does not broadcast "
            f"to {tuple(self._shape)}"
        )
    if self.dtype.kind != "i":
        return run_map("x0", (src,), (src.dtype.ctype,), self, src.dtype.ctype)
    # (taken before the kernel: the rest of a storage a view writes into keeps its range, and
    # src may be a view of it: `x[:2] += 1` copies the view into itself)
    before, ksrc = ranges.known(self), ranges.known(src)
    run_map("x0", (src,), (src.dtype.ctype,), self, src.dtype.ctype)
    range_rules.after_cast(src, self, before, ksrc)
    return self


def fill_(self: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(
                "pyrite: fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.ndim} dimensions."
            )
        if value._storage is self._storage:  # torch reads value.item(): x.fill_(x[0]) is no overlap
            value = value.clone()
        return copy_(self, value)
    value = fill_value(value, self.dtype)
    ct = self.dtype.ctype if self.dtype.ctype != "bool" else "i32"
    if self.dtype.kind != "i":
        return run_map("s0", (), (), self, ct, (value,), (ct,))
    before = ranges.known(self)
    run_map("s0", (), (), self, ct, (value,), (ct,))
    ranges.settle(self, ranges.const_rule(value), before=before)
    return self


# c10's names for the types in its overflow message
_C10_NAMES = {
    "uint8": "uint8_t",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int",
    "float32": "float",
    "float16": "c10::Half",
    "bfloat16": "c10::BFloat16",
}


def fill_value(value, dt):
    """A Python scalar checked as PyTorch checks a fill value (c10::overflows) and converted to
    what the map's scalar word carries: an int for integer dtypes (wrapped: uint8 takes -255 ..
    255, so fill_(-1) gives 255 as in PyTorch), a float for floats, 0/1 for bool."""
    import math

    import numpy as np

    if isinstance(value, (bool, np.bool_)):
        return int(value) if dt.kind != "f" else float(value)
    if dt.is_bool:
        return int(value != 0)
    bad = False
    if dt.kind == "i":
        if isinstance(value, (int, np.integer)):
            v = int(value)
            lo = -dt.max if not dt.is_signed else dt.min  # negatives wrap into unsigned types
            bad = not lo <= v <= dt.max
            value = D.wrap_int(v, dt) if not bad else v
        else:
            f = float(value)
            bad = math.isnan(f) or not dt.min <= f <= dt.max
            value = int(f) if not bad else f
    else:
        f = float(value)
        top = {"float16": 65504.0, "bfloat16": D.bf16_value(0x7F7F)}.get(
            dt.name, 3.4028234663852886e38
        )
        bad = math.isfinite(f) and abs(f) > top
        value = f
    if bad:
        raise RuntimeError(
            f"value cannot be converted to type {_C10_NAMES.get(dt.name, dt.name)} without "
            f"overflow (pyrite: {value!r} into {dt!r})"
        )
    return value


def check_fill_tensor(value: Tensor, dt) -> None:
    """PyTorch fills from a one-element tensor through `value.item()` (masked_fill, and
    index_put_ with a single mask): fill_value's overflow check on that number. Only a value of
    another dtype can overflow, and float32 holds every value (float64 is float32 here): those
    cases need no readback."""
    if value.dtype is dt or (dt.kind == "f" and dt.itemsize == 4):
        return
    fill_value(value.item(), dt)


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
        elif isinstance(a, str):
            check_device(a)  # checked as torch checks it ("Expected one of ...")
    if dtype is None:
        return self
    return to_dtype(self, dtype)


# torch's legacy tensor type names (x.type() -> 'torch.FloatTensor')
_LEGACY = {
    "float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
    "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
    "bool": "BoolTensor",
}  # fmt: skip
_FROM_LEGACY = {v: k for k, v in _LEGACY.items()} | {
    "DoubleTensor": "float32",
    "LongTensor": "int32",
}


class _LegacyTensorType(type):
    """torch.FloatTensor and kin: calling one builds a tensor of its dtype as Tensor's legacy
    constructor does (sizes: uninitialized; a sequence: its data), and isinstance asks the
    tensor's dtype (isinstance(torch.zeros(2), torch.FloatTensor) is True)."""

    def __call__(cls, *args, **kwargs):
        return Tensor(*args, dtype=cls.dtype)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __repr__(cls):
        return f"<class 'pyrite.{cls.__name__}'>"


def _legacy_types():
    out = {}
    for name, dt in _FROM_LEGACY.items():
        out[name] = _LegacyTensorType(name, (), {"dtype": D.from_any(dt)})
    return out


LEGACY_TYPES = _legacy_types()


def _method_type(self, dtype=None, non_blocking=False, **kwargs):
    """`x.type()` names the tensor type as torch's does ('pyrite.FloatTensor'); `x.type(dtype)`
    casts, the dtype given as a dtype or a legacy name ('torch.cuda.LongTensor')."""
    if dtype is None:
        return f"pyrite.{_LEGACY[self.dtype.name]}"
    if isinstance(dtype, str) and dtype.rsplit(".", 1)[-1] in _FROM_LEGACY:
        dtype = _FROM_LEGACY[dtype.rsplit(".", 1)[-1]]
    elif isinstance(dtype, _LegacyTensorType):
        dtype = dtype.dtype
    return to_dtype(self, dtype)


def _type_method(dt):
    """`x.float()` and friends: a cast to `dt` (float64 is stored as float32, int64 as int32)."""

    def fn(self, memory_format=None):
        return to_dtype(self, dt)

    return fn


def type_as(self: Tensor, other: Tensor) -> Tensor:
    return to_dtype(self, other.dtype)


__all__ = ["clone"]


def _new(self, *args, **kwargs):
    """`x.new(2, 3)`: an uninitialized tensor of x's dtype (sizes), `x.new(data)` a copy of
    data in x's dtype, `x.new()` an empty one (torch's legacy Tensor.new)."""
    return Tensor(*args, dtype=kwargs.get("dtype", self.dtype))


METHODS = {
    "new": _new,
    "clone": clone,
    "to": _method_to,
    "type": _method_type,
    "type_as": type_as,
    "float": _type_method(D.float32),
    "half": _type_method(D.float16),
    "bfloat16": _type_method(D.bfloat16),
    "short": _type_method(D.int16),
    "char": _type_method(D.int8),
    "byte": _type_method(D.uint8),
    "double": _type_method(D.float32),
    "int": _type_method(D.int32),
    "long": _type_method(D.int32),
    "bool": _type_method(D.bool_),
    "copy_": copy_,
    "fill_": fill_,
    "zero_": zero_,
}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
from ..autograd import saves as _saves  # noqa: E402


@_saves()
def _g_identity(ctx, g):
    return (g,)  # the engine casts g back to the input's dtype


@_saves()
def _g_copy_(ctx, g):
    """self's old value is overwritten: its gradient is zeros (as torch's CopyBackwards, so
    the tensors it came from get a zero .grad, not None); src gets g (summed/cast to its
    shape)."""
    from .creation import zeros_like

    return (zeros_like(g) if ctx.needs[0] else None), g


@_saves()
def _g_fill_(ctx, g):
    """self's old values are overwritten (no gradient); a tensor value gets the sum of g."""
    from .creation import zeros_like

    meta = ctx.meta[1] if len(ctx.meta) > 1 else None  # ((shape, dtype) of a tensor value)
    gv = g.sum().reshape(meta[0]) if meta is not None and ctx.needs[1] else None
    return zeros_like(g), gv


@_saves()
def _g_zero_(ctx, g):
    from .creation import zeros_like

    return (zeros_like(g),)


GRADS = {
    "clone": _g_identity,
    "copy_": _g_copy_,
    "fill_": _g_fill_,
    "zero_": _g_zero_,
    "to": _g_identity,
    "float": _g_identity,
    "half": _g_identity,
    "bfloat16": _g_identity,
    "double": _g_identity,
    "type_as": _g_identity,
    "type": _g_identity,
}
