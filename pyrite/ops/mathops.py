"""More elementwise math that ported scripts meet: hypot, fmax/fmin, copysign, nextafter, ldexp,
frexp, heaviside, logaddexp2, asinh/acosh/atanh (and the arc* spellings), deg2rad/rad2deg,
isneginf/isposinf/isreal, positive, and their in-place forms (rsub: ops/elementwise.py).

Each op is a row added to ops/elementwise.py's UNARY/BINARY tables (so promotion, scalars,
broadcasting and strided views behave as every other elementwise op) or, where the operands
have different compute types (ldexp, frexp), one strided map. The WGSL helpers (p_asinh,
p_nextafter, p_ldexpf, ...) and their accuracy notes are in kernels/mathlib.py.
"""

from __future__ import annotations

import math
from collections import namedtuple

from .. import dtypes as D
from ..errors import DtypeError
from ..tensor import Tensor
from .core import broadcast_shapes, empty, run_map
from .elementwise import BINARY, UNARY, _is_scalar, as_tensor_arg, binary, result_dtype, unary

# zero by its bits: lavapipe folds `x == 0.0` to true for a NaN x (see p_powf)
_ZERO = "((bitcast<u32>(A) & 0x7fffffffu) == 0u)"

UNARY.update(
    {
        "asinh": ("p_asinh(A)", None, "float"),
        "acosh": ("p_acosh(A)", None, "float"),
        "atanh": ("p_atanh(A)", None, "float"),
        "deg2rad": ("A * 0.017453292519943295", None, "float"),
        "rad2deg": ("A * 57.295779513082323", None, "float"),
        "isneginf": ("p_isinf(A) && A < 0.0", "false", "bool"),
        "isposinf": ("p_isinf(A) && A > 0.0", "false", "bool"),
        "isreal": ("true", "true", "bool"),
    }
)

BINARY.update(
    {
        # NaN-ignoring max/min: the other operand wins over a NaN
        # (the first operand on ties, as PyTorch's: fmax(0.0, -0.0) is 0.0)
        "fmax": ("select(select(select(A, B, B > A), A, p_isnan(B)), B, p_isnan(A))", "max(A, B)", "A || B", "promote"),
        "fmin": ("select(select(select(A, B, B < A), A, p_isnan(B)), B, p_isnan(A))", "min(A, B)", "A && B", "promote"),
        "hypot": ("p_hypot(A, B)", None, None, "promote"),
        "copysign": ("bitcast<f32>((bitcast<u32>(A) & 0x7fffffffu) | (bitcast<u32>(B) & 0x80000000u))", None, None, "float"),
        "nextafter": ("p_nextafter(A, B)", None, None, "promote"),
        # PyTorch: values where input == 0, else input > 0 (so NaN gives 0)
        "heaviside": (f"select(select(0.0, 1.0, A > 0.0), B, {_ZERO})", "select(select(0, 1, A > 0), B, A == 0)", "A || B", "promote"),
        # max + log2(1 + 2^-|a-b|); equal infinities give themselves
        "logaddexp2": ("select(p_maxf(A, B) + p_log1p(exp2(-abs(A - B))) * 1.4426950408889634, A, A == B && p_isinf(A))", None, None, "float"),
    }
)  # fmt: skip


def _floats_only(name, *xs):
    # the promoted dtype decides, as torch's: hypot(float16, bool) is a float16 hypot
    a, b = (xs[0], xs[0]) if len(xs) == 1 else xs
    dt = result_dtype(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else None
    if dt is not None and dt.kind != "f":
        raise DtypeError(
            f"pyrite: {name} is only implemented for floating-point tensors, not {dt!r}"
        )


def _tensors(*xs):
    return [x if _is_scalar(x) else as_tensor_arg(x) for x in xs]


def hypot(input, other, *, out=None):
    """sqrt(input² + other²) without intermediate overflow."""
    input, other = _tensors(input, other)
    _floats_only("hypot", input, other)
    return binary("hypot", input, other, out)


def fmax(input, other, *, out=None):
    """Elementwise maximum that ignores NaN (NaN only where both are NaN)."""
    return binary("fmax", input, other, out)


def fmin(input, other, *, out=None):
    """Elementwise minimum that ignores NaN (NaN only where both are NaN)."""
    return binary("fmin", input, other, out)


def copysign(input, other, *, out=None):
    """|input| with the sign of other (signed zeros included); the result is floating."""
    return binary("copysign", input, other, out)


def nextafter(input, other, *, out=None):
    """The next floating-point value after input towards other."""
    input, other = _tensors(input, other)
    _floats_only("nextafter", input, other)
    return binary("nextafter", input, other, out)


def heaviside(input, values, *, out=None):
    """0 where input < 0, values where input == 0, 1 where input > 0 (and 0 for NaN)."""
    input, values = _tensors(input, values)
    if isinstance(values, Tensor) and isinstance(input, Tensor) and input.dtype is not values.dtype:
        raise RuntimeError(
            "pyrite: heaviside is not yet implemented for tensors with different dtypes "
            f"(input {input.dtype!r}, values {values.dtype!r}), as in PyTorch"
        )
    return binary("heaviside", input, values, out)


def logaddexp2(input, other, *, out=None):
    """log2(2^input + 2^other), without overflow."""
    input, other = _tensors(input, other)
    _floats_only("logaddexp2", input, other)  # torch: "logaddexp2_cpu" not implemented for 'Long'
    return binary("logaddexp2", input, other, out)


def ldexp(input, other, *, out=None):
    """input · 2^other (exact for integer exponents until the result overflows or underflows)."""
    x, e = _tensors(input, other)
    if isinstance(e, Tensor) and e.dtype.is_bool and not _is_scalar(x) and x.dtype.kind == "f":
        # torch's float kernel: "ldexp_cpu_exp" not implemented for 'Bool' (int inputs go
        # through mul and pow, which take it)
        raise DtypeError("pyrite: ldexp of a float tensor is not implemented for a bool exponent")
    if _is_scalar(x):
        x = as_tensor_arg(float(x))
    dt = x.dtype if x.dtype.kind == "f" else D.float32
    int_exp = (D.scalar_kind(e) in "ib") if _is_scalar(e) else e.dtype.kind in "ib"
    if isinstance(e, Tensor) and e.dtype.kind == "f":
        dt = result_dtype(x, e) if x.dtype.kind == "f" else e.dtype
    if int_exp:
        expr, ect = "p_ldexpf(x0, E)", "i32"
    else:
        expr, ect = "x0 * exp2(E)", "f32"
    if _is_scalar(e):
        ev = max(-1000, min(int(e), 1000)) if int_exp else float(e)
        expr = expr.replace("E", "s0")
        shape, tens, ct, sc = x._shape, (x,), ("f32",), ((ev,), (ect,))
    else:
        expr = expr.replace("E", "x1")
        shape = broadcast_shapes(x._shape, e._shape)
        tens, ct, sc = (x, e), ("f32", ect), ((), ())
    o = empty(shape, dt) if out is None else out
    return run_map(expr, tens, ct, o, "f32", *sc)


FrexpResult = namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input):
    """(mantissa, exponent) with input = mantissa · 2^exponent, |mantissa| in [0.5, 1)."""
    x = as_tensor_arg(input)
    _floats_only("frexp", x)
    m = run_map("p_frexp_m(x0)", (x,), ("f32",), empty(x._shape, x.dtype), "f32")
    e = run_map("p_frexp_e(x0)", (x,), ("f32",), empty(x._shape, D.int32), "i32")
    return FrexpResult(m, e)


# this module's own factory, not elementwise's: ops/fallback.py wraps the functions whose
# __module__ is this (non-native) module, so that other dtypes are widened for them
def _make_unary(name, doc):
    def fn(input, *, out=None):
        return unary(name, input, out=out)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


asinh = arcsinh = _make_unary("asinh", "Inverse hyperbolic sine, elementwise.")
acosh = arccosh = _make_unary("acosh", "Inverse hyperbolic cosine (nan below 1).")
atanh = arctanh = _make_unary("atanh", "Inverse hyperbolic tangent (±inf at ±1, nan beyond).")
deg2rad = _make_unary("deg2rad", "Degrees to radians.")
rad2deg = _make_unary("rad2deg", "Radians to degrees.")


def isneginf(input):
    return unary("isneginf", input)


def isposinf(input):
    return unary("isposinf", input)


def isreal(input):
    """True everywhere: pyrite has no complex dtypes."""
    return unary("isreal", input)


def is_complex(input) -> bool:
    return False


def is_conj(input) -> bool:
    return False


def is_neg(input) -> bool:
    return False


def positive(input):
    """input itself, as torch.positive; refused for bool, as PyTorch's unary `+`."""
    if input.dtype.is_bool:
        raise DtypeError("pyrite: The `+` operator, on a bool tensor is not supported.")
    return input


# ---- in place -----------------------------------------------------------------------------------
def inplace_of(fn, name):
    """`x.<name>_(...)`: fn(x, ...) written back into x, refused (as PyTorch) when the result's
    category (bool < int < float) is above x's (e.g. an int tensor's float result)."""

    def method(self, *args, **kwargs):
        from .. import autograd

        # fn's backward may read self's old value, which copy_ then overwrites: give it a copy
        # (x.abs_() on a tensor that requires grad; without one it would fail its version check)
        src = self.clone() if autograd.needs_grad(self) else self
        r = fn(src, *args, **kwargs)
        if "bif".index(r.dtype.kind) > "bif".index(self.dtype.kind):
            raise DtypeError(
                f"pyrite: result type {r.dtype!r} of {name} can't be cast to the desired "
                f"output type {self.dtype!r}"
            )
        if r._shape != self._shape:
            from ..errors import ShapeError

            raise ShapeError(
                f"pyrite: in-place {name}: the result's shape {tuple(r._shape)} is not the "
                f"tensor's {tuple(self._shape)}"
            )
        return self.copy_(r)

    method.__name__ = f"{name}_"
    return method


FUNCS = {
    "hypot": hypot,
    "fmax": fmax,
    "fmin": fmin,
    "copysign": copysign,
    "nextafter": nextafter,
    "heaviside": heaviside,
    "logaddexp2": logaddexp2,
    "ldexp": ldexp,
    "frexp": frexp,
    "asinh": asinh,
    "arcsinh": asinh,
    "acosh": acosh,
    "arccosh": acosh,
    "atanh": atanh,
    "arctanh": atanh,
    "deg2rad": deg2rad,
    "rad2deg": rad2deg,
    "isneginf": isneginf,
    "isposinf": isposinf,
    "isreal": isreal,
    "is_complex": is_complex,
    "is_conj": is_conj,
    "is_neg": is_neg,
    "positive": positive,
}
_INPLACE = (
    "hypot copysign nextafter heaviside ldexp asinh arcsinh acosh arccosh atanh arctanh "
    "deg2rad rad2deg"
).split()

__all__ = sorted(FUNCS)

METHODS = dict(FUNCS)
METHODS.update({f"{name}_": inplace_of(FUNCS[name], name) for name in _INPLACE})
METHODS["__pos__"] = positive


# ---- gradients ------------------------------------------------------------------------------
def _g_ldexp(ctx, g):
    """torch: d/dinput = 2^other, d/dother = grad · input · 2^other · ln 2 (float other)."""
    from .elementwise import exp2

    x, e = ctx.args[0], ctx.args[1]
    if isinstance(e, Tensor):
        scale = exp2(e if e.dtype.kind == "f" else e.float())
    else:
        scale = 2.0 ** float(e)
    gx = g * scale if ctx.needs[0] else None
    ge = None
    if len(ctx.needs) > 1 and ctx.needs[1]:
        ge = g * x * scale * math.log(2.0)
    return gx, ge


_g_ldexp.saves = frozenset((0, 1))

GRADS = {"ldexp": _g_ldexp}
