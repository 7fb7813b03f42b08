"""Division in all its PyTorch spellings: `div`/`divide`/`true_divide` (with `rounding_mode`),
`floor_divide`, `remainder`, `fmod`, the operators `/ // %` with their reflected and in-place
forms, and the in-place methods (`div_`, `floor_divide_`, ...).

Floats follow IEEE and PyTorch's CPU formulas (x / 0 is ±inf or nan; // and % from an exact
fmod, kernels/mathlib.py). Integer division by zero raises, as PyTorch's CPU does
(`RuntimeError: ZeroDivisionError`): the error type here is both a RuntimeError and a Python
ZeroDivisionError. A zero scalar divisor is seen on the host for free; a tensor divisor costs
one flag kernel over the divisor and a readback of one word (ops/flags.py), i.e. one sync of
the pending batch per integer division by a tensor. Measured on lavapipe (2 cores, 2026-12,
`a // b` for int32, mean of 200 calls): (1000,): 0.08 ms unchecked, 0.36 ms unchecked plus a
sync, 0.47 ms checked — the round trip, not the extra pass over b; (1,000,000,): 5.0 ms
unchecked, 6.9 ms checked. Float division never checks, nor does a divisor whose range is
known to leave out 0 (ops/ranges.py: `lengths.clamp(min=1)`, `arange(1, n)`).
"""

from __future__ import annotations

from ..errors import ArgumentError, DtypeError
from . import ranges
from .elementwise import _inplace, _is_scalar, as_tensor_arg, binary, is_operand, result_dtype


class IntegerDivisionByZero(RuntimeError, ZeroDivisionError):
    """PyTorch raises RuntimeError('ZeroDivisionError') for integer division by zero; this is
    that RuntimeError and a ZeroDivisionError too, so either `except` catches it."""


_ZERO = {"i32": "v == 0", "bool": "!v"}  # a zero divisor element, by compute type


def check_divisor(name: str, input, other):
    """Raise IntegerDivisionByZero when `input <name> other` is an integer division and `other`
    holds a zero (a readback of one flag when `other` is a tensor)."""
    if _is_scalar(input) and _is_scalar(other):
        return
    rt = result_dtype(input, other)
    if rt.kind == "f":
        return
    if rt.is_bool:  # before the zero check: torch refuses the dtype ("not implemented for 'Bool'")
        raise DtypeError(f"pyrite: {name} is not implemented for two bool operands (pyrite.bool)")
    if any(not _is_scalar(t) and t.numel() == 0 for t in (input, other)):
        return  # an empty result divides nothing (torch: no error)
    if _is_scalar(other):
        zero = other == 0
    elif other.dtype.kind == "i" and (
        ranges.within(other, 1, ranges.I32_MAX) or ranges.within(other, ranges.I32_MIN, -1)
    ):
        return  # a divisor whose known range leaves out 0 (ops/ranges.py): no readback
    else:
        from .flags import any_where

        cond = _ZERO.get(other.dtype.ctype)
        zero = cond is not None and any_where([(other, cond)])[0]
    if zero:
        raise IntegerDivisionByZero(
            f"pyrite: ZeroDivisionError: integer division by zero in {name} "
            f"(the divisor holds a 0; float division gives inf or nan instead)"
        )


def _operands(input, other):
    """Lists and arrays as tensors; Python scalars and tensors as they are."""
    if not _is_scalar(input):
        input = as_tensor_arg(input)
    if not _is_scalar(other):
        other = as_tensor_arg(other)
    return input, other


def _int_div(name: str, input, other, out=None):
    input, other = _operands(input, other)
    check_divisor(name, input, other)
    return binary(name, input, other, out)


def div(input, other, *, rounding_mode=None, out=None):
    """input / other; rounding_mode None (true division, always float), 'trunc' (towards zero)
    or 'floor' (towards -inf, as Python's //). Integer division by zero raises."""
    if rounding_mode is None:
        return binary("div", input, other, out)
    if rounding_mode == "floor":
        return _int_div("div_floor", input, other, out)
    if rounding_mode == "trunc":
        return _int_div("div_trunc", input, other, out)
    raise ArgumentError(
        f"pyrite: div expected rounding_mode to be one of None, 'trunc', or "
        f"'floor' but found {rounding_mode!r}"
    )


divide = div


def true_divide(input, other, *, out=None):
    return binary("div", input, other, out)


def floor_divide(input, other, *, out=None):
    """input // other, rounding towards -inf (PyTorch >= 1.13, and Python)."""
    return _int_div("floor_divide", input, other, out)


def remainder(input, other, *, out=None):
    """Python's %: the result has the divisor's sign."""
    return _int_div("remainder", input, other, out)


def fmod(input, other, *, out=None):
    """C's fmod: the result has the dividend's sign."""
    return _int_div("fmod", input, other, out)


# ---- in place and operators ------------------------------------------------------------------
def _inplace_div(name):
    def fn(self, other):
        other = other if _is_scalar(other) else as_tensor_arg(other)
        if name != "div":
            check_divisor(name, self, other)
        return _inplace(name, self, other)

    fn.__name__ = f"{name}_"
    return fn


def _div_(self, other, *, rounding_mode=None):
    name = {None: "div", "floor": "div_floor", "trunc": "div_trunc"}.get(rounding_mode)
    if name is None:
        div(self, other, rounding_mode=rounding_mode)  # raises the ValueError
    return _inplace_div(name)(self, other)


def _operator(fn):
    return lambda self, other: fn(self, other) if is_operand(other) else NotImplemented


def _reflected(fn):
    return lambda self, other: fn(other, self) if is_operand(other) else NotImplemented


__all__ = ["div", "divide", "floor_divide", "fmod", "remainder", "true_divide"]

METHODS = {
    "div": div,
    "divide": div,
    "true_divide": true_divide,
    "floor_divide": floor_divide,
    "remainder": remainder,
    "fmod": fmod,
    "div_": _div_,
    "divide_": _div_,
    "true_divide_": _inplace_div("div"),
    "floor_divide_": _inplace_div("floor_divide"),
    "remainder_": _inplace_div("remainder"),
    "fmod_": _inplace_div("fmod"),
    "__floordiv__": _operator(floor_divide),
    "__rfloordiv__": _reflected(floor_divide),
    "__ifloordiv__": _operator(_inplace_div("floor_divide")),
    "__mod__": _operator(remainder),
    "__rmod__": _reflected(remainder),
    "__imod__": _operator(_inplace_div("remainder")),
}
