"""Bit operations on integer and bool tensors: shifts (`<<`, `>>`, `bitwise_left_shift`,
`bitwise_right_shift`, reflected and in-place forms), the in-place `bitwise_and_/or_/xor_/not_`,
and `gcd`/`lcm` (and `gcd_`/`lcm_`). `&`, `|`, `^`, `~` themselves are in ops/elementwise.py's
tables.

PyTorch's shift semantics, which differ from C's (undefined) and WGSL's (shift mod 32):
- a left shift by a negative amount or by >= the bit width gives 0;
- a right shift is arithmetic on signed types; by a negative amount or >= the width it gives
  the sign fill (0 or -1);
- bool shifted by bool is refused (PyTorch: "lshift_cpu" not implemented for 'Bool'); a bool
  tensor shifted by an int promotes to int, as every binary op.
Floats are refused with a TypeError naming the dtype (PyTorch raises NotImplementedError).

Everything is computed in i32 (the compute type of every integer dtype); the bit width is the
result dtype's. Narrower integer types (uint8, int8, int16) hold their values sign- or
zero-extended in i32, so `>>` by up to 31 is already right for them, and a left shift wraps when
the result is stored.
"""

from __future__ import annotations

from ..dtypes import wrap_array
from ..errors import DtypeError, ShapeError
from .core import broadcast_shapes, empty, run_map
from .elementwise import (
    _cast_0d,
    _is_scalar,
    as_tensor_arg,
    binary,
    is_operand,
    result_dtype,
    unary,
)


def _bits(dt) -> int:
    return getattr(dt, "bits", None) or dt.itemsize * 8


# A = the value, B = the shift (i32), W = the result's bit width
_SHIFT = {
    "bitwise_left_shift": "select(0, A << u32(B), B >= 0 && B < W)",
    "bitwise_right_shift": "A >> u32(select(min(B, 31), 31, B < 0))",
}


def _shift_dtype(name, a, b):
    if _is_scalar(a) and _is_scalar(b):
        raise TypeError(f"pyrite: {name} needs at least one tensor")
    rt = result_dtype(a, b)
    if rt.kind != "i":
        what = "two bool operands (pyrite.bool)" if rt.is_bool else f"{rt!r}"
        raise DtypeError(
            f"pyrite: {name} is only defined for integer and bool tensors, not for {what}"
        )
    return rt


def _clamp_scalar(s):
    # PyTorch's answer is the same for every shift < 0 and every shift >= 64, so a Python int
    # of any size fits the i32 info word after clamping
    return max(-1, min(int(s), 64))


def _int_map(name, expr, a, b, out=None, shift=False):
    """out = expr(A, B) in i32 over tensors or Python ints A, B (broadcast), result dtype the
    promotion of both; `shift`: B is a shift amount (clamped on the host when a scalar)."""
    if not _is_scalar(a):
        a = as_tensor_arg(a)
    if not _is_scalar(b):
        b = as_tensor_arg(b)
    rt = _shift_dtype(name, a, b)
    if rt.is_small_int:  # a wider 0-d int tensor is cast to the result type first, as torch
        a, b = (_cast_0d(x, rt) for x in (a, b))
    expr = expr.replace("W", str(_bits(rt)))
    tensors, scalars, names = [], [], {}
    for letter, x in (("A", a), ("B", b)):
        if _is_scalar(x):
            names[letter] = f"s{len(scalars)}"
            if shift and letter == "B":
                scalars.append(_clamp_scalar(x))
            elif rt.is_small_int:  # torch casts a Python int to the result type first:
                scalars.append(int(wrap_array(int(x), rt)))  # -2 >> uint8 shifts 254
            else:
                scalars.append(int(x))
        else:
            names[letter] = f"x{len(tensors)}"
            tensors.append(x)
    for k, v in names.items():
        expr = expr.replace(k, v)
    shape = broadcast_shapes(*(t._shape for t in tensors))
    if out is None:
        out = empty(shape, rt)
    elif out._shape != shape:
        raise ShapeError(f"pyrite: {name}: out has shape {tuple(out._shape)}, the result {shape}")
    return run_map(
        expr, tensors, ("i32",) * len(tensors), out, "i32", scalars, ("i32",) * len(scalars)
    )


def _shift(name, a, b, out=None):
    return _int_map(name, _SHIFT[name], a, b, out, shift=True)


def bitwise_left_shift(input, other, *, out=None):
    """input << other, elementwise: 0 when other < 0 or other >= the bit width."""
    return _shift("bitwise_left_shift", input, other, out)


def bitwise_right_shift(input, other, *, out=None):
    """input >> other, arithmetic: the sign fill when other < 0 or other >= the bit width."""
    return _shift("bitwise_right_shift", input, other, out)


def _check_inplace(name, self, other):
    rt = result_dtype(self, other if _is_scalar(other) else as_tensor_arg(other))
    if rt is not self.dtype and "bif".index(rt.kind) > "bif".index(self.dtype.kind):
        raise DtypeError(
            f"pyrite: result type {rt!r} of {name} can't be cast to the desired output "
            f"type {self.dtype!r}"
        )
    if not _is_scalar(other):
        shape = broadcast_shapes(self._shape, as_tensor_arg(other)._shape)
        if shape != self._shape:
            raise ShapeError(
                f"pyrite: in-place {name}: shape {tuple(as_tensor_arg(other)._shape)} does not "
                f"broadcast to the tensor's {tuple(self._shape)}"
            )


def _inplace_of(name, op):
    """Tensor.<name>_: op(name, self, other) written into self."""

    def fn(self, other):
        _check_inplace(name, self, other)
        return op(name, self, other, out=self)

    fn.__name__ = f"{name}_"
    return fn


def _shift_inplace(name):
    return _inplace_of(name, _shift)


def _bitwise_inplace(name):
    return _inplace_of(name, binary)


def _bitwise_not_(self):
    return unary("bitwise_not", self, out=self)


# ---- gcd / lcm --------------------------------------------------------------------------------
# p_gcd_i: Euclid (kernels/mathlib.py), at most 46 steps for 32-bit values
_GCD = "p_gcd_i(A, B)"
_LCM = "select(abs((A / max(p_gcd_i(A, B), 1)) * B), 0, p_gcd_i(A, B) == 0)"


def _gcd_like(name, expr, a, b, out=None):
    return _int_map(name, expr, a, b, out)


def gcd(input, other, *, out=None):
    """Greatest common divisor of |input| and |other| (gcd(0, 0) = 0)."""
    return _gcd_like("gcd", _GCD, input, other, out)


def lcm(input, other, *, out=None):
    """Least common multiple, non-negative (0 when either is 0)."""
    return _gcd_like("lcm", _LCM, input, other, out)


def _gcd_inplace(name, expr):
    def fn(self, other):
        _check_inplace(name, self, other)
        return _gcd_like(name, expr, self, other, out=self)

    fn.__name__ = f"{name}_"
    return fn


def _operator(fn):
    return lambda self, other: fn(self, other) if is_operand(other) else NotImplemented


def _reflected(fn):
    return lambda self, other: fn(other, self) if is_operand(other) else NotImplemented


__all__ = ["bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"]

METHODS = {
    "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift,
    "bitwise_left_shift_": _shift_inplace("bitwise_left_shift"),
    "bitwise_right_shift_": _shift_inplace("bitwise_right_shift"),
    "__lshift__": _operator(bitwise_left_shift),
    "__rshift__": _operator(bitwise_right_shift),
    "__rlshift__": _reflected(bitwise_left_shift),
    "__rrshift__": _reflected(bitwise_right_shift),
    "__ilshift__": _operator(_shift_inplace("bitwise_left_shift")),
    "__irshift__": _operator(_shift_inplace("bitwise_right_shift")),
    "bitwise_and_": _bitwise_inplace("bitwise_and"),
    "bitwise_or_": _bitwise_inplace("bitwise_or"),
    "bitwise_xor_": _bitwise_inplace("bitwise_xor"),
    "bitwise_not_": _bitwise_not_,
    "gcd": gcd,
    "lcm": lcm,
    "gcd_": _gcd_inplace("gcd", _GCD),
    "lcm_": _gcd_inplace("lcm", _LCM),
}
