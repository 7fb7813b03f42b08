"""Python's operators and PyTorch's in-place methods on Tensor (`a + b`, `a += b`, `x.add_(y)`,
`x.exp_()`), all spelled through the elementwise ops in ops/elementwise.py."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DtypeError
from .elementwise import (
    FUNCS,
    _inplace,
    abs,
    binary,
    bitwise_not,
    is_operand,
    neg,
    pow,
)


def _inplace_method(name):
    def fn(self, other, **kw):
        # torch's alpha rules (a scalar other too: x.add_(1, alpha=2) is x + 2)
        return _inplace(name, self, other, kw.get("alpha", 1))

    return fn


def _inplace_operator(name):
    method = _inplace_method(name)

    def fn(self, other):
        if not is_operand(other):
            return NotImplemented
        return method(self, other)

    return fn


def _unary_inplace(name):
    def fn(self, *args, **kwargs):
        from .. import autograd

        # the op reads self's old value (saved for its backward) before copy_ overwrites self
        src = self.clone() if autograd.needs_grad(self) else self
        r = FUNCS[name](src, *args, **kwargs)
        if "bif".index(r.dtype.kind) > "bif".index(self.dtype.kind):
            # torch: x_int.exp_() "result type Float can't be cast to the desired output type"
            raise DtypeError(
                f"pyrite: result type {r.dtype!r} of {name}_ can't be cast to the desired "
                f"output type {self.dtype!r}"
            )
        return self.copy_(r)  # Tensor.copy_ is ops/casts.py's

    return fn


def _rbinary(name):
    def fn(self, other):
        if not is_operand(other):
            return NotImplemented
        return binary(name, other, self)

    return fn


def _binary_method(name):
    def fn(self, other):
        if not is_operand(other):
            return NotImplemented
        if type(other) is complex and name in ("eq", "ne"):
            return _complex_compare(name, self, other)
        return binary(name, self, other)

    return fn


def _complex_compare(name, self, c):
    """x == c for a complex scalar c: x is real, so equal only where c is real and x == c.real
    (PyTorch compares elementwise; pyrite has no complex dtypes)."""
    if c.imag != 0:
        from .creation import full

        return full(self._shape, name == "ne", dtype=D.bool_)
    return binary(name, self, c.real)


def _contains(self, element):
    """`element in x`: (x == element).any(), as PyTorch's (one readback)."""
    if not is_operand(element) or isinstance(element, np.ndarray):
        raise RuntimeError(
            "pyrite: Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
            f"{type(element)}."
        )
    return bool(binary("eq", self, element).any().item())


# dunder stem -> op; each gets __op__, __rop__ (reflected) and __iop__ (in place)
_ARITHMETIC = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor",
}  # fmt: skip
# // and % (integer division by zero raises), <<, >>: ops/division.py and ops/bitwise.py
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_INPLACE_BINARY = ("add", "sub", "mul", "pow", "maximum", "minimum")
_INPLACE_UNARY = (
    "neg abs exp log sqrt rsqrt sin cos tan tanh sigmoid relu silu floor ceil round trunc clamp "
    "clamp_min clamp_max sign reciprocal square exp2 log2 log1p expm1 erf lerp addcmul addcdiv "
    "nan_to_num gelu logical_not frac"
).split()

METHODS = {
    "__pow__": lambda self, other: pow(self, other) if is_operand(other) else NotImplemented,
    "__rpow__": _rbinary("pow"),
    "__ipow__": _inplace_operator("pow"),
    "__invert__": bitwise_not,
    "__neg__": neg,
    "__pos__": lambda self: self,
    "__abs__": abs,
    "__contains__": _contains,
    "__reversed__": lambda self: self.flip(0) if self.ndim else self,
}
for _stem, _op in _ARITHMETIC.items():
    METHODS[f"__{_stem}__"] = _binary_method(_op)
    METHODS[f"__r{_stem}__"] = _rbinary(_op)
    METHODS[f"__i{_stem}__"] = _inplace_operator(_op)
for _op in _COMPARISONS:
    METHODS[f"__{_op}__"] = _binary_method(_op)
for _op in _INPLACE_BINARY:
    METHODS[f"{_op}_"] = _inplace_method(_op)
for _op in _INPLACE_UNARY:
    METHODS[f"{_op}_"] = _unary_inplace(_op)
METHODS["clip_"] = METHODS["clamp_"]


def _name_methods():
    """Each method made above is named for what it is (`Tensor.__mul__`, not
    `_binary_method.<locals>.fn`): in tracebacks, and for the ops pr.compile's graph and
    pr.profiler name from the stack."""
    for meth, f in METHODS.items():
        if getattr(f, "__module__", None) != __name__ or not hasattr(f, "__code__"):
            continue
        if f.__name__ not in ("fn", "<lambda>"):
            continue
        name_method(f, meth)


def name_method(f, meth: str):
    """Name function `f` Tensor.`meth`, its code object too (which the stack shows)."""
    f.__name__, f.__qualname__ = meth, f"Tensor.{meth}"
    try:
        f.__code__ = f.__code__.replace(co_name=meth, co_qualname=f"Tensor.{meth}")
    except TypeError:  # (Python < 3.11: no co_qualname)
        f.__code__ = f.__code__.replace(co_name=meth)


_name_methods()

__all__: list[str] = []
