"""What the functional modules share: the one-kernel map over float operands (`fmap`), the float
dtype rules, reduction names, and argument checks with torch's messages."""

from __future__ import annotations

from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..ops import elementwise as _ew
from ..ops.core import broadcast_shapes, empty, run_map
from ..tensor import Tensor


def float_dtype(*tensors):
    """f16 (or bf16) when every tensor is f16 (bf16), else f32 (pyrite's float promotion)."""
    for d in (D.float16, D.bfloat16):
        if all(t.dtype is d for t in tensors):
            return d
    return D.float32


def fdt(x: Tensor):
    """x's dtype when it is floating point, else float32 (an op that computes in floats)."""
    return x.dtype if x.dtype.is_floating_point else D.float32


def fmap(expr: str, tensors, scalars=(), dtype=None, ctypes=None, out_ctype="f32", s_ctypes=None):
    """One kernel: out = expr(x0.., s0..) over the broadcast of `tensors` (f32 unless told)."""
    tensors = [_ew.as_tensor_arg(t) for t in tensors]
    shape = tensors[0]._shape
    for t in tensors[1:]:
        if t._shape != shape:
            shape = broadcast_shapes(shape, t._shape)
    out = empty(shape, dtype or float_dtype(*tensors))
    return run_map(
        expr,
        tensors,
        tuple(ctypes or ("f32",) * len(tensors)),
        out,
        out_ctype,
        tuple(scalars),
        tuple(s_ctypes or ("f32",) * len(scalars)),
    )


def need_tensor(name: str, what: str, x):
    if not isinstance(x, Tensor):
        raise TypeError(
            f"pyrite: {name}(): argument '{what}' must be Tensor, not {type(x).__name__}"
        )
    return x


def need_float(name: str, x: Tensor, what: str = "input"):
    """torch's "not implemented for 'Long'": these ops are defined on floating inputs only."""
    need_tensor(name, what, x)
    if not x.dtype.is_floating_point:
        raise DtypeError(
            f"pyrite: {name}: {what} must be a floating point tensor, not {x.dtype!r} "
            "(torch: not implemented for that dtype)"
        )
    return x


# ---- reductions of losses ------------------------------------------------------------------
REDUCTIONS = ("none", "mean", "sum")
_ENUM = {0: "none", 1: "mean", 2: "sum"}  # torch's at::Reduction, used by the torch.* forms


def reduction_name(reduction):
    """A reduction given as torch.* functions take it (0/1/2) or as F takes it (a name)."""
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        return reduction
    if reduction not in _ENUM:
        raise ValueError(f"pyrite: {reduction} is not a valid value for reduction")
    return _ENUM[reduction]


def legacy_reduction(size_average, reduce, reduction):
    """torch's size_average/reduce (deprecated) override `reduction` when given."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def check_reduction(reduction, allowed=REDUCTIONS):
    if reduction not in allowed:
        raise ValueError(f"pyrite: {reduction!r} is not a valid value for reduction")


def reduce_loss(loss: Tensor, reduction):
    """The elementwise loss reduced as asked ('none' returns it as it is)."""
    check_reduction(reduction)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean()


def same_shape(name: str, what: str, a: Tensor, b: Tensor, other="input"):
    if tuple(a._shape) != tuple(b._shape):
        raise ShapeError(
            f"pyrite: {name}: {what} size {tuple(a._shape)} must be the same as "
            f"{other} size {tuple(b._shape)}"
        )
