"""The sweep's op list: every public name it compares, each with a generator of random arguments.

Generators take (rng, i): categorical choices that must all be covered (dtype pairs, flags) cycle
with the case number i, so a small CI run still visits each; shapes, layouts and values are drawn.
`fn(L, ...)` is called with L = torch and L = pyrite (tests/sweep_harness.py).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from tests.sweep_harness import (
    DTYPES,
    FLOATS,
    INTS,
    Arg,
    Dom,
    Dt,
    Op,
    Tol,
    arg,
    broadcast_partner,
    check_index_ties,
    compare,
    pick,
    shape,
    values,
)

OPS: list[Op] = []


def add(name, fn, gen, **kw):
    OPS.append(Op(name, fn, gen, **kw))


def F(L):
    return L.nn.functional


# ---- elementwise unary ----------------------------------------------------------------------
def unary_gen(dom=Dom(), dtypes=DTYPES, kw=None):
    def gen(rng, i):
        dt = dtypes[i % len(dtypes)]
        a = arg(rng, shape(rng), dt, dom)
        return [a], (kw(rng, i) if kw else {})

    return gen


EXACT = Tol(exact=True)
U = Tol(ulps=4)
TRANS = Tol(ulps=16, atol=2.0**-21)  # transcendental built on exp/log: WGSL's 3 + 2|x| ULP
SINCOS = Tol(ulps=8, atol=2.0**-11)  # WGSL sin/cos: 2^-11 absolute on [-pi, pi]

UNARY = [
    # name, domain, tol
    ("abs", Dom(), EXACT),
    ("neg", Dom(), EXACT),
    ("positive", Dom(), EXACT),
    ("exp", Dom(-10, 10), Tol(ulps=24, atol=2.0**-21)),
    ("exp2", Dom(-10, 10), Tol(ulps=24, atol=2.0**-21)),
    ("expm1", Dom(-3, 3), Tol(ulps=24, atol=2.0**-21)),
    ("log", Dom(-1, 30), TRANS),
    ("log2", Dom(-1, 30), TRANS),
    ("log10", Dom(-1, 30), TRANS),
    ("log1p", Dom(-1.5, 10), TRANS),
    ("sqrt", Dom(-1, 30), U),
    ("rsqrt", Dom(-1, 30), U),
    ("sin", Dom(-3, 3), SINCOS),
    ("cos", Dom(-3, 3), SINCOS),
    ("tan", Dom(-1, 1), Tol(ulps=16, atol=2.0**-9)),
    ("asin", Dom(-1.2, 1.2), TRANS),
    ("acos", Dom(-1.2, 1.2), TRANS),
    ("atan", Dom(-10, 10), TRANS),
    ("sinh", Dom(-5, 5), TRANS),
    ("cosh", Dom(-5, 5), TRANS),
    ("tanh", Dom(-5, 5), TRANS),
    ("asinh", Dom(-10, 10), TRANS),
    ("acosh", Dom(0, 10), TRANS),
    ("atanh", Dom(-1.2, 1.2), TRANS),
    ("sigmoid", Dom(-10, 10), TRANS),
    ("erf", Dom(-4, 4), TRANS),
    ("erfc", Dom(-4, 4), TRANS),
    ("erfinv", Dom(-1.1, 1.1), Tol(ulps=16, atol=2.0**-18)),
    ("floor", Dom(-20, 20), EXACT),
    ("ceil", Dom(-20, 20), EXACT),
    ("round", Dom(-20, 20), EXACT),
    ("trunc", Dom(-20, 20), EXACT),
    ("fix", Dom(-20, 20), EXACT),
    ("frac", Dom(-20, 20), U),
    ("sign", Dom(), EXACT),
    ("sgn", Dom(), EXACT),
    ("signbit", Dom(nan=False), EXACT),  # a NaN's sign: torch's f64 -> bf16 cast gives -NaN
    ("reciprocal", Dom(-5, 5), U),
    ("square", Dom(), U),
    ("relu", Dom(), EXACT),
    ("logit", Dom(-0.2, 1.2), TRANS),
    ("lgamma", Dom(0.1, 10), Tol(ulps=64, atol=2.0**-18)),
    ("digamma", Dom(0.1, 10), Tol(ulps=64, atol=2.0**-18)),
    ("i0", Dom(-5, 5), Tol(ulps=32, atol=2.0**-20)),
    ("sinc", Dom(-5, 5), Tol(ulps=16, atol=2.0**-18)),
    ("deg2rad", Dom(-360, 360), U),
    ("rad2deg", Dom(), U),
    ("isnan", Dom(), EXACT),
    ("isinf", Dom(), EXACT),
    ("isfinite", Dom(), EXACT),
    ("isposinf", Dom(), EXACT),
    ("isneginf", Dom(), EXACT),
    ("isreal", Dom(), EXACT),
    ("logical_not", Dom(), EXACT),
    ("bitwise_not", Dom(), EXACT),
    ("nan_to_num", Dom(), U),
    ("angle", Dom(), U),
]
for _name, _dom, _tol in UNARY:
    add(_name, lambda L, x, _n=_name: getattr(L, _n)(x), unary_gen(_dom), tol=_tol)
    # the method form on a few layouts, and the in-place form where both have it
    add(
        f"Tensor.{_name}",
        lambda L, x, _n=_name: getattr(x, _n)(),
        unary_gen(_dom),
        tol=_tol,
    )

INPLACE_UNARY = [
    "abs",
    "neg",
    "exp",
    "log",
    "sqrt",
    "sin",
    "floor",
    "round",
    "sigmoid",
    "relu",
    "reciprocal",
    "trunc",
    "sign",
    "tanh",
    "clamp_min_",
]


def _inplace(L, x, n):
    y = x.clone() if n.endswith("_c") else x
    r = (
        getattr(y, n.rstrip("c").rstrip("_") + "_")()
        if not n.startswith("clamp")
        else y.clamp_min_(0.5)
    )
    return r is y, y


for _name in INPLACE_UNARY:
    add(
        f"Tensor.{_name}_",
        lambda L, x, _n=_name: _inplace(L, x, _n),
        unary_gen(Dom(0.1, 5)),
        tol=TRANS,
    )

add(
    "round(decimals)",
    lambda L, x, d: L.round(x, decimals=d),
    lambda rng, i: (
        ([arg(rng, shape(rng), pick(rng, FLOATS), Dom(-100, 100))], {})
        if False
        else ([arg(rng, shape(rng), FLOATS[i % 4], Dom(-100, 100)), int(rng.integers(-2, 4))], {})
    ),
    tol=Tol(ulps=8, atol=2.0**-14),
)
add(
    "nan_to_num(kw)",
    lambda L, x, **kw: L.nan_to_num(x, **kw),
    lambda rng, i: (
        [arg(rng, shape(rng), FLOATS[i % 4], Dom(specials=0.3))],
        {"nan": 1.5, "posinf": float(rng.integers(-5, 5)), "neginf": -7.0},
    ),
    tol=U,
)

# ---- nn.functional activations ----------------------------------------------------------
ACTS = [
    ("relu", {}, EXACT),
    ("relu6", {}, EXACT),
    ("elu", {"alpha": 0.7}, TRANS),
    ("selu", {}, TRANS),
    ("celu", {"alpha": 1.3}, TRANS),
    ("gelu", {}, Tol(ulps=16, atol=2.0**-20)),
    ("gelu", {"approximate": "tanh"}, Tol(ulps=16, atol=2.0**-20)),
    ("silu", {}, TRANS),
    ("mish", {}, TRANS),
    ("softplus", {"beta": 2.0, "threshold": 5.0}, Tol(ulps=64, atol=2.0**-20)),
    ("softplus", {}, Tol(ulps=64, atol=2.0**-20)),
    ("softsign", {}, U),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}, EXACT),
    ("hardswish", {}, U),
    ("hardsigmoid", {}, U),
    ("leaky_relu", {"negative_slope": 0.2}, U),
    ("logsigmoid", {}, TRANS),
    ("tanhshrink", {}, Tol(ulps=16, atol=2.0**-20)),
    ("softshrink", {"lambd": 0.7}, U),
    ("hardshrink", {"lambd": 0.7}, EXACT),
    ("threshold", {"threshold": 0.3, "value": -2.0}, EXACT),
    ("sigmoid", {}, TRANS),
    ("tanh", {}, TRANS),
    ("rrelu", {"training": False}, U),
]
for _name, _kw, _tol in ACTS:
    add(
        f"F.{_name}{_kw or ''}",
        lambda L, x, _n=_name, _k=_kw: getattr(F(L), _n)(x, **_k),
        unary_gen(Dom(-6, 6)),
        tol=_tol,
    )


def _softmax_gen(rng, i):
    dt = ("float32", "float16", "bfloat16", "float64", "int32")[i % 5]
    s = shape(rng, max_ndim=4)
    nd = max(1, len(s))
    dim = int(rng.integers(-nd, nd))
    kw = {"dim": dim}
    if i % 7 == 3:
        kw["dtype"] = Dt(pick(rng, ("float32", "float64", "float16")))
    return [arg(rng, s, dt, Dom(-8, 8, specials=0.01))], kw


# log_softmax is x - max - log Σ: absolute error ~ n·u·max|x| (its relative error near 0 is not)
SOFTMAX_TOL = Tol(ulps=16, atol=2.0**-21, sum_terms=True)


def _softmax_terms(args, kwargs):
    s = args[0].a.shape
    return s[kwargs["dim"]] if s else 1


for _name in ("softmax", "log_softmax", "softmin"):
    add(
        f"F.{_name}",
        lambda L, x, _n=_name, **kw: getattr(F(L), _n)(x, **kw),
        _softmax_gen,
        tol=SOFTMAX_TOL,
        n_terms=_softmax_terms,
    )
add(
    "Tensor.softmax",
    lambda L, x, **kw: x.softmax(**kw),
    _softmax_gen,
    tol=SOFTMAX_TOL,
    n_terms=_softmax_terms,
)


def _glu_gen(rng, i):
    s = list(shape(rng, ndim=int(rng.integers(1, 4))))
    d = int(rng.integers(0, len(s)))
    s[d] = s[d] * 2 if i % 5 else s[d] * 2 + 1  # odd: an error
    return [arg(rng, tuple(s), FLOATS[i % 4])], {"dim": d - len(s) if i % 2 else d}


add("F.glu", lambda L, x, **kw: F(L).glu(x, **kw), _glu_gen, tol=TRANS)


def _prelu_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    c = s[1] if len(s) >= 2 else 1
    w = arg(rng, (c if i % 3 else 1,), "float32", Dom(0, 0.5, specials=0), lay=False)
    return [arg(rng, s, FLOATS[i % 4]), w], {}


add("F.prelu", lambda L, x, w: F(L).prelu(x, w.to(x.dtype)), _prelu_gen, tol=U)


# ---- elementwise binary ---------------------------------------------------------------------
# the second operand: a tensor of any dtype, a 0-d tensor, or a Python scalar
SCALARS = ("py-int", "py-float", "py-bool")
PAIRS = list(itertools.product(DTYPES, DTYPES + SCALARS + ("0d-float32", "0d-int64", "0d-bool")))


def _scalar(rng, kind, dom):
    if kind == "py-int":
        return int(rng.integers(max(dom.ilo, -5), min(dom.ihi, 5) + 1))
    if kind == "py-float":
        return float(np.round(rng.uniform(dom.lo, dom.hi), 3))
    return bool(rng.random() < 0.5)


def binary_args(rng, i, dom=Dom(), dom2=None, pairs=PAIRS, swap=True):
    da, db = pairs[i % len(pairs)]
    s = shape(rng)
    a = arg(rng, s, da, dom)
    dom2 = dom2 or dom
    if db in SCALARS:
        b = _scalar(rng, db, dom2)
    elif db.startswith("0d-"):
        b = arg(rng, (), db[3:], dom2)
    else:
        b = arg(rng, broadcast_partner(rng, s), db, dom2)
    if swap and rng.random() < 0.3 and not isinstance(b, (int, float)):
        a, b = b, a
    return a, b


def binary_gen(dom=Dom(), dom2=None, pairs=PAIRS, kw=None):
    def gen(rng, i):
        a, b = binary_args(rng, i, dom, dom2, pairs)
        return [a, b], (kw(rng, i) if kw else {})

    return gen


BINARY = [
    ("add", Dom(), U),
    ("sub", Dom(), U),
    ("mul", Dom(), U),
    ("div", Dom(), U),
    ("true_divide", Dom(), U),
    ("floor_divide", Dom(-20, 20), Tol(ulps=4, atol=1e-6)),
    ("remainder", Dom(-20, 20), Tol(ulps=8, atol=2.0**-18)),
    ("fmod", Dom(-20, 20), Tol(ulps=8, atol=2.0**-18)),
    ("pow", Dom(-3, 3, ilo=-3, ihi=6), Tol(ulps=32, atol=2.0**-20)),
    ("float_power", Dom(0, 3, ilo=0, ihi=5), Tol(ulps=32, atol=2.0**-20)),
    ("atan2", Dom(), TRANS),
    ("hypot", Dom(), U),
    ("maximum", Dom(), EXACT),
    ("minimum", Dom(), EXACT),
    ("fmax", Dom(), EXACT),
    ("fmin", Dom(), EXACT),
    ("eq", Dom(-2, 2), EXACT),
    ("ne", Dom(-2, 2), EXACT),
    ("lt", Dom(-2, 2), EXACT),
    ("le", Dom(-2, 2), EXACT),
    ("gt", Dom(-2, 2), EXACT),
    ("ge", Dom(-2, 2), EXACT),
    ("logical_and", Dom(-1, 1), EXACT),
    ("logical_or", Dom(-1, 1), EXACT),
    ("logical_xor", Dom(-1, 1), EXACT),
    ("bitwise_and", Dom(), EXACT),
    ("bitwise_or", Dom(), EXACT),
    ("bitwise_xor", Dom(), EXACT),
    ("bitwise_left_shift", Dom(ilo=0, ihi=9), EXACT),
    ("bitwise_right_shift", Dom(ilo=0, ihi=9), EXACT),
    ("copysign", Dom(nan=False), EXACT),  # a NaN's sign: torch's f64 -> bf16 cast gives -NaN
    ("nextafter", Dom(), EXACT),
    (
        "xlogy",
        Dom(-1, 5),
        Tol(ulps=16, atol=2.0**-16),
    ),  # x·log y: log's 2^-21 absolute, times |x| <= 20
    ("ldexp", Dom(-3, 3, ilo=-5, ihi=5), U),
    ("heaviside", Dom(-1, 1), EXACT),
    ("gcd", Dom(ilo=-30, ihi=30), EXACT),
    ("lcm", Dom(ilo=-30, ihi=30), EXACT),
    ("logaddexp", Dom(-10, 10), TRANS),
    ("logaddexp2", Dom(-10, 10), TRANS),
    ("isclose", Dom(-1, 1), EXACT),
    ("rsub", Dom(), U),
]


def _f64_values_differ(args, kwargs, t_exc, p_exc, mismatch):
    if mismatch and any(isinstance(a, Arg) and a.dtype == "float64" for a in args):
        return "float64 is float32 here: nextafter steps by a float32 ulp"
    return None


def _heaviside_allow(args, kwargs, t_exc, p_exc, mismatch):
    kinds = {a.dtype for a in args if isinstance(a, Arg)}
    if (
        t_exc is not None
        and p_exc is None
        and "bfloat16" in kinds
        and "different dtypes" in str(t_exc)
    ):
        return "pyrite's heaviside sees a bfloat16 operand widened to float32 (ops/fallback.py), so bf16 with f32 passes its one-dtype check"
    return None


for _name, _dom, _tol in BINARY:
    add(
        _name,
        lambda L, a, b, _n=_name: getattr(L, _n)(a, b),
        binary_gen(_dom),
        tol=_tol,
        allow={"nextafter": _f64_values_differ, "heaviside": _heaviside_allow}.get(_name),
    )

METHOD_BINARY = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "remainder",
    "maximum",
    "eq",
    "lt",
    "bitwise_and",
    "fmod",
    "floor_divide",
]
for _name in METHOD_BINARY:
    _dom = dict((n, d) for n, d, _ in BINARY)[_name]
    _tol = dict((n, t) for n, _, t in BINARY)[_name]
    add(
        f"Tensor.{_name}",
        lambda L, a, b, _n=_name: getattr(a, _n)(b) if hasattr(a, _n) else getattr(L, _n)(a, b),
        binary_gen(_dom),
        tol=_tol,
    )

OPERATORS = [
    ("+", lambda a, b: a + b, Dom(), U),
    ("-", lambda a, b: a - b, Dom(), U),
    ("*", lambda a, b: a * b, Dom(), U),
    ("/", lambda a, b: a / b, Dom(), U),
    ("//", lambda a, b: a // b, Dom(-20, 20), Tol(ulps=4, atol=1e-6)),
    ("%", lambda a, b: a % b, Dom(-20, 20), Tol(ulps=8, atol=2.0**-18)),
    ("**", lambda a, b: a**b, Dom(0, 3, ilo=0, ihi=5), Tol(ulps=32, atol=2.0**-20)),
    ("&", lambda a, b: a & b, Dom(), EXACT),
    ("|", lambda a, b: a | b, Dom(), EXACT),
    ("^", lambda a, b: a ^ b, Dom(), EXACT),
    ("<<", lambda a, b: a << b, Dom(ilo=0, ihi=9), EXACT),
    (">>", lambda a, b: a >> b, Dom(ilo=0, ihi=9), EXACT),
    ("==", lambda a, b: a == b, Dom(-2, 2), EXACT),
    ("!=", lambda a, b: a != b, Dom(-2, 2), EXACT),
    ("<", lambda a, b: a < b, Dom(-2, 2), EXACT),
    ("<=", lambda a, b: a <= b, Dom(-2, 2), EXACT),
    (">", lambda a, b: a > b, Dom(-2, 2), EXACT),
    (">=", lambda a, b: a >= b, Dom(-2, 2), EXACT),
]
for _name, _f, _dom, _tol in OPERATORS:
    add(f"a{_name}b", lambda L, a, b, _f=_f: _f(a, b), binary_gen(_dom), tol=_tol)
    # the scalar on the left: Python's reflected operators
    add(
        f"scalar{_name}b",
        lambda L, a, b, _f=_f: _f(b, a),
        binary_gen(_dom, pairs=[p for p in PAIRS if p[1] in SCALARS]),
        tol=_tol,
    )

INPLACE_BINARY = [
    ("+=", lambda a, b: a.__iadd__(b), Dom(), U),
    ("-=", lambda a, b: a.__isub__(b), Dom(), U),
    ("*=", lambda a, b: a.__imul__(b), Dom(), U),
    ("/=", lambda a, b: a.__itruediv__(b), Dom(), U),
    ("add_", lambda a, b: a.add_(b), Dom(), U),
    ("mul_", lambda a, b: a.mul_(b), Dom(), U),
    ("div_", lambda a, b: a.div_(b), Dom(), U),
    ("sub_", lambda a, b: a.sub_(b), Dom(), U),
    ("pow_", lambda a, b: a.pow_(b), Dom(0, 2, ilo=0, ihi=4), Tol(ulps=32, atol=2.0**-20)),
    ("clamp_", lambda a, b: a.clamp_(min=b), Dom(), EXACT),
    ("copy_", lambda a, b: a.copy_(b), Dom(), EXACT),
    (
        "masked_fill_",
        lambda a, b: a.masked_fill_(a.bool(), b) if not hasattr(b, "shape") or b.dim() == 0 else a,
        Dom(),
        EXACT,
    ),
    ("&=", lambda a, b: a.__iand__(b), Dom(), EXACT),
    ("|=", lambda a, b: a.__ior__(b), Dom(), EXACT),
    ("//=", lambda a, b: a.__ifloordiv__(b), Dom(-9, 9), Tol(ulps=4, atol=1e-6)),
    ("%=", lambda a, b: a.__imod__(b), Dom(-9, 9), Tol(ulps=8, atol=2.0**-18)),
]


def _inplace_binary(f):
    def run(L, a, b):
        a0 = a.clone()
        r = f(a, b)
        return r is a, a, a0

    return run


def _bool_pow_allow(args, kwargs, t_exc, p_exc, mismatch):
    a, b = args
    if isinstance(a, Arg) and a.dtype == "bool" and isinstance(b, bool) and p_exc is not None:
        return "torch's pow shortcut for exponents 0/1 runs before its bool check (bool.pow_(True))"
    return None


def _masked_fill_allow(args, kwargs, t_exc, p_exc, mismatch):
    if (
        p_exc is not None
        and t_exc is None
        and "more than one element of the written-to tensor" in str(p_exc)
    ):
        # torch writes the aliases of an expanded view in an unspecified order; pyrite
        # refuses it as it refuses every computed write into one (ops/core.check_writable)
        return "pyrite refuses masked_fill_ into an expanded view (torch writes its aliases)"
    return None


for _name, _f, _dom, _tol in INPLACE_BINARY:
    add(
        f"a{_name}",
        _inplace_binary(_f),
        binary_gen(_dom),
        tol=_tol,
        allow={"pow_": _bool_pow_allow, "masked_fill_": _masked_fill_allow}.get(_name),
    )


def _alpha_gen(rng, i):
    a, b = binary_args(rng, i, pairs=[p for p in PAIRS if p[1] not in SCALARS])
    alpha = pick(rng, (2, -1, 0.5, True))
    return [a, b], {"alpha": alpha}


add("add(alpha)", lambda L, a, b, **kw: L.add(a, b, **kw), _alpha_gen, tol=U)
add("sub(alpha)", lambda L, a, b, **kw: L.sub(a, b, **kw), _alpha_gen, tol=U)


def _div_mode_gen(rng, i):
    a, b = binary_args(rng, i // 3, Dom(-20, 20))
    return [a, b], {"rounding_mode": (None, "trunc", "floor")[i % 3]}


add(
    "div(rounding_mode)",
    lambda L, a, b, **kw: L.div(a, b, **kw),
    _div_mode_gen,
    tol=Tol(ulps=4, atol=1e-6),
)


def ternary_gen(dom=Dom(), dtypes=FLOATS + ("int32", "bool", "uint8")):
    def gen(rng, i):
        s = shape(rng)
        d = dtypes[i % len(dtypes)]
        d2 = dtypes[(i // len(dtypes)) % len(dtypes)]
        return [
            arg(rng, s, d, dom),
            arg(rng, broadcast_partner(rng, s), d2, dom),
            arg(rng, broadcast_partner(rng, s), d, dom),
        ], {}

    return gen


add("lerp", lambda L, a, b, w: L.lerp(a, b, w), ternary_gen(), tol=Tol(ulps=8, atol=2.0**-20))
add(
    "lerp(scalar)",
    lambda L, a, b, w: L.lerp(a, b, 0.3),
    ternary_gen(),
    tol=Tol(ulps=8, atol=2.0**-20),
)
add(
    "addcmul",
    lambda L, a, b, c: L.addcmul(a, b, c, value=0.5),
    ternary_gen(),
    tol=Tol(ulps=8, atol=2.0**-20),
)
add(
    "addcdiv",
    lambda L, a, b, c: L.addcdiv(a, b, c, value=-2),
    ternary_gen(),
    tol=Tol(ulps=8, atol=2.0**-20),
)


def _where_gen(rng, i):
    s = shape(rng)
    pairs = list(itertools.product(DTYPES, DTYPES + SCALARS))
    da, db = pairs[i % len(pairs)]
    c = arg(rng, broadcast_partner(rng, s), "bool" if i % 11 else pick(rng, ("uint8", "float32")))
    a = arg(rng, s, da)
    b = _scalar(rng, db, Dom()) if db in SCALARS else arg(rng, broadcast_partner(rng, s), db)
    if rng.random() < 0.3:  # the scalar (or the other tensor) first: where(c, 1.0, x)
        a, b = b, a
    return [c, a, b], {}


def _where_allow(args, kwargs, t_exc, p_exc, mismatch):
    if t_exc is not None and p_exc is None and "expected condition to be a boolean" in str(t_exc):
        # tests/test_elementwise.py::test_where: pyrite reads a non-bool condition as != 0
        return "pyrite's where takes a non-bool condition as condition != 0 (an extension)"
    return None


add("where", lambda L, c, a, b: L.where(c, a, b), _where_gen, tol=EXACT, allow=_where_allow)
add(
    "Tensor.where",
    lambda L, c, a, b: a.where(c, b) if hasattr(a, "where") else L.where(c, a, b),
    _where_gen,
    tol=EXACT,
    allow=_where_allow,
)
add("where(cond)", lambda L, c, a, b: L.where(c), _where_gen, tol=EXACT)


def _clamp_gen(rng, i):
    dt = DTYPES[i % len(DTYPES)]
    s = shape(rng)
    forms = ("scalar", "tensor", "min-only", "max-only", "none", "crossed")
    form = forms[(i // len(DTYPES)) % len(forms)]
    x = arg(rng, s, dt, Dom(-5, 5))
    if form == "scalar":
        return [x], {"min": pick(rng, (-1, -0.5, 0)), "max": pick(rng, (1, 2.5, 3))}
    if form == "tensor":
        lo = arg(rng, broadcast_partner(rng, s), pick(rng, DTYPES[1:]), Dom(-3, 0))
        hi = arg(rng, broadcast_partner(rng, s), pick(rng, DTYPES[1:]), Dom(0, 3))
        return [x], {"min": lo, "max": hi}
    if form == "min-only":
        return [x], {"min": 0.5}
    if form == "max-only":
        return [x], {"max": 1}
    if form == "crossed":
        return [x], {"min": 2, "max": -1}
    return [x], {}


add("clamp", lambda L, x, **kw: L.clamp(x, **kw), _clamp_gen, tol=EXACT)
add("Tensor.clip", lambda L, x, **kw: x.clip(**kw), _clamp_gen, tol=EXACT)


# ---- casts ----------------------------------------------------------------------------------
def _cast_gen(rng, i):
    src = DTYPES[i % len(DTYPES)]
    dst = DTYPES[(i // len(DTYPES)) % len(DTYPES)]
    big = Dom(-300, 300, specials=0.05 if dst not in INTS else 0.0, ilo=-300, ihi=300)
    return [arg(rng, shape(rng), src, big), Dt(dst)], {}


add("Tensor.to(dtype)", lambda L, x, d: x.to(d), _cast_gen, tol=EXACT)
add("Tensor.type(dtype)", lambda L, x, d: x.type(d), _cast_gen, tol=EXACT)
for _m in ("float", "half", "bfloat16", "int", "long", "bool", "byte", "char", "short", "double"):
    add(
        f"Tensor.{_m}()",
        lambda L, x, _m=_m: getattr(x, _m)(),
        unary_gen(Dom(-100, 100, specials=0, ilo=-100, ihi=100)),
        tol=EXACT,
    )


# ---- reductions -----------------------------------------------------------------------------
def _numel(s):
    return math.prod(s)


def _dims_kw(rng, s, allow_tuple=True, allow_none=True):
    """dim: None, an int (maybe negative, maybe out of range), or a tuple of distinct dims."""
    nd = len(s)
    r = rng.random()
    if allow_none and r < 0.2:
        return None
    if r < 0.03:
        return nd + 1 if nd else 2  # out of range: IndexError
    if allow_tuple and r < 0.45 and nd >= 1:
        k = int(rng.integers(0, nd + 1))
        dims = [int(d) for d in rng.choice(nd, size=k, replace=False)]
        return tuple(d - nd if rng.random() < 0.3 else d for d in dims)
    if nd == 0:
        return pick(rng, (0, -1))
    d = int(rng.integers(-nd, nd))
    return d


def _red_terms(args, kwargs):
    x = args[0]
    if not isinstance(x, Arg):
        return 1
    s = x.a.shape
    d = kwargs.get("dim", None)
    if d is None:
        return max(1, _numel(s))
    dims = d if isinstance(d, tuple) else (d,)
    try:
        return max(1, _numel(s[i] for i in dims)) if dims else max(1, _numel(s))
    except IndexError:
        return 1


def red_gen(
    dtypes=DTYPES,
    dom=Dom(-2, 2),
    tuple_ok=True,
    none_ok=True,
    keepdim=True,
    dtype_kw=False,
    extra=None,
):
    def gen(rng, i):
        dt = dtypes[i % len(dtypes)]
        s = shape(rng, max_ndim=4)
        x = arg(rng, s, dt, dom)
        kw = {}
        d = _dims_kw(rng, s, tuple_ok, none_ok)
        if d is not None or rng.random() < 0.5:
            kw["dim"] = d
        if keepdim and "dim" in kw and rng.random() < 0.5:
            kw["keepdim"] = bool(rng.random() < 0.5)
        if dtype_kw and rng.random() < 0.3:
            kw["dtype"] = Dt(pick(rng, DTYPES[1:]))
            if kw["dtype"].name in INTS and dt in FLOATS:  # NaN/inf cast to an int: undefined
                x = arg(rng, s, dt, Dom(dom.lo, dom.hi, specials=0))
        if extra:
            kw.update(extra(rng, i))
        return [x], kw

    return gen


SUMT = Tol(ulps=8, sum_terms=True)
REDUCE = [
    # name, generator, tol
    ("sum", red_gen(dtype_kw=True), SUMT),
    ("nansum", red_gen(dtype_kw=True, dom=Dom(-2, 2, specials=0.1)), SUMT),
    ("mean", red_gen(dtype_kw=True), SUMT),
    ("nanmean", red_gen(FLOATS, dom=Dom(-2, 2, specials=0.1), dtype_kw=True), SUMT),
    (
        "prod",
        red_gen(dom=Dom(0.5, 1.5, ilo=-3, ihi=3), tuple_ok=False, dtype_kw=True),
        Tol(ulps=64, sum_terms=True),
    ),
    ("amax", red_gen(), EXACT),
    ("amin", red_gen(), EXACT),
    ("max", red_gen(tuple_ok=False), EXACT),
    ("min", red_gen(tuple_ok=False), EXACT),
    ("argmax", red_gen(tuple_ok=False, dom=Dom(-2, 2, specials=0)), EXACT),
    ("argmin", red_gen(tuple_ok=False, dom=Dom(-2, 2, specials=0)), EXACT),
    ("all", red_gen(), EXACT),
    ("any", red_gen(), EXACT),
    ("count_nonzero", red_gen(keepdim=False), EXACT),
    ("aminmax", red_gen(tuple_ok=False), EXACT),
    (
        "logsumexp",
        red_gen(FLOATS + ("int32",), dom=Dom(-5, 5), none_ok=False),
        Tol(ulps=32, sum_terms=True),
    ),
    ("median", red_gen(tuple_ok=False, dom=Dom(-2, 2, specials=0)), EXACT),
    ("nanmedian", red_gen(FLOATS, tuple_ok=False, dom=Dom(-2, 2, specials=0.2)), EXACT),
    # a row holding NaN has no defined mode (torch picks NaN or the smallest, by length)
    (
        "mode",
        red_gen(
            INTS + ("bool", "float32"),
            tuple_ok=False,
            none_ok=False,
            dom=Dom(-2, 2, ilo=-2, ihi=2, nan=False),
        ),
        EXACT,
    ),
    (
        "std",
        red_gen(
            FLOATS,
            extra=lambda rng, i: (
                {"correction": pick(rng, (0, 1, 2))} if i % 2 else {"unbiased": bool(i % 4)}
            ),
        ),
        Tol(ulps=32, sum_terms=True),
    ),
    (
        "var",
        red_gen(FLOATS, extra=lambda rng, i: {"correction": pick(rng, (0, 1, 2))} if i % 2 else {}),
        Tol(ulps=32, sum_terms=True),
    ),
    ("std_mean", red_gen(FLOATS), Tol(ulps=32, sum_terms=True)),
    ("var_mean", red_gen(FLOATS), Tol(ulps=32, sum_terms=True)),
    (
        "norm",
        red_gen(FLOATS, extra=lambda rng, i: {"p": pick(rng, (1, 2, 3, float("inf"), 0.5, "fro"))}),
        Tol(ulps=32, sum_terms=True),
    ),
]


def _red(L, x, _n, **kw):
    f = getattr(L, _n)
    if (
        "dim" in kw
        and kw["dim"] is None
        and _n in ("max", "min", "median", "nanmedian", "mode", "argmax", "argmin", "aminmax")
    ):
        kw.pop("dim")
        if _n in ("max", "min", "median", "nanmedian"):
            kw.pop("keepdim", None)
    return f(x, **kw)


def _red_allow(args, kwargs, t_exc, p_exc, mismatch):
    if (
        t_exc is not None
        and p_exc is None
        and ("must be int, not NoneType" in str(t_exc) or "dim=NoneType" in str(t_exc))
    ):
        return "pyrite takes dim=None (all dims) where torch's overload wants an int (prod)"
    if (
        t_exc is not None
        and "doesn't match the broadcast shape" in str(t_exc)
        and kwargs.get("dim") == ()
    ):
        return "torch's logsumexp(dim=()) fails on its own output shape (a torch bug)"
    return None


TIES = ("median", "nanmedian", "mode")
for _name, _gen, _tol in REDUCE:
    _chk = check_index_ties if _name in TIES else None
    add(
        _name,
        lambda L, x, _n=_name, **kw: _red(L, x, _n, **kw),
        _gen,
        tol=_tol,
        n_terms=_red_terms,
        allow=_red_allow,
        check=_chk,
    )
    add(
        f"Tensor.{_name}",
        lambda L, x, _n=_name, **kw: _red(
            type("M", (), {_n: staticmethod(lambda x, **k: getattr(x, _n)(**k))}), x, _n, **kw
        ),
        _gen,
        tol=_tol,
        n_terms=_red_terms,
        allow=_red_allow,
        check=_chk,
    )


def _positional_red(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    d = int(rng.integers(-len(s), len(s)))
    return [arg(rng, s, DTYPES[i % len(DTYPES)]), d, bool(i % 2)], {}


add(
    "sum(x, d, keepdim)",
    lambda L, x, d, k: L.sum(x, d, k),
    _positional_red,
    tol=SUMT,
    n_terms=lambda a, k: max(1, a[0].a.shape[a[1]]),
)
add("x.max(d) positional", lambda L, x, d, k: x.max(d, k), _positional_red, tol=EXACT)


def scan_gen(dtypes=DTYPES, dom=Dom(-2, 2)):
    def gen(rng, i):
        s = shape(rng, max_ndim=3)
        nd = max(1, len(s))
        kw = {"dim": int(rng.integers(-nd, nd))}
        d = dom
        if i % 5 == 1:
            kw["dtype"] = Dt(pick(rng, ("float32", "int64", "int32", "float16")))
            if kw["dtype"].name in INTS:  # a NaN or inf cast to an integer is undefined
                d = Dom(dom.lo, dom.hi, specials=0, ilo=dom.ilo, ihi=dom.ihi)
        return [arg(rng, s, dtypes[i % len(dtypes)], d)], kw

    return gen


def _scan_terms(args, kwargs):
    s = args[0].a.shape
    return s[kwargs["dim"]] if s else 1


for _name, _dom, _tol in [
    ("cumsum", Dom(-2, 2), SUMT),
    ("cumprod", Dom(0.5, 1.5, ilo=-2, ihi=2), Tol(ulps=64, sum_terms=True)),
    ("cummax", Dom(-2, 2), EXACT),
    ("cummin", Dom(-2, 2), EXACT),
    ("logcumsumexp", Dom(-3, 3), Tol(ulps=64, sum_terms=True)),
]:
    _g = scan_gen(dom=_dom) if _name in ("cumsum", "cumprod") else scan_gen(dom=_dom)
    if _name in ("cummax", "cummin", "logcumsumexp"):
        _g0 = _g
        _g = lambda rng, i, _g0=_g0: (lambda a, k: (a, {"dim": k["dim"]}))(*_g0(rng, i))
    add(
        _name,
        lambda L, x, _n=_name, **kw: getattr(L, _n)(x, **kw),
        _g,
        tol=_tol,
        n_terms=_scan_terms,
    )
    add(
        f"Tensor.{_name}",
        lambda L, x, _n=_name, **kw: getattr(x, _n)(**kw),
        _g,
        tol=_tol,
        n_terms=_scan_terms,
    )


def _quantile_gen(rng, i):
    s = shape(rng, max_ndim=3)
    x = arg(
        rng,
        s,
        ("float32", "float64", "float16", "int32")[i % 4],
        Dom(-2, 2, specials=0.05 if i % 3 == 0 else 0),
    )
    q = pick(rng, (0.5, 0.0, 1.0, 0.25, "tensor", 1.5))
    if q == "tensor":
        q = Arg(np.sort(rng.random(int(rng.integers(1, 4)))), "float32")
    kw = {}
    nd = len(s)
    if rng.random() < 0.6 and nd:
        kw["dim"] = int(rng.integers(-nd, nd))
        kw["keepdim"] = bool(rng.random() < 0.5)
    kw["interpolation"] = pick(rng, ("linear", "lower", "higher", "midpoint", "nearest"))
    return [x, q], kw


def _quantile_allow(args, kwargs, t_exc, p_exc, mismatch):
    if t_exc is not None and p_exc is None and "must be either float or double" in str(t_exc):
        if args[0].dtype in ("float16", "bfloat16"):
            return "pyrite's quantile takes float16/bfloat16 (computed in f32); torch only float/double"
    return None


add(
    "quantile",
    lambda L, x, q, **kw: L.quantile(x, q.to(x.dtype) if hasattr(q, "to") else q, **kw),
    _quantile_gen,
    tol=Tol(ulps=16, atol=2.0**-20),
    allow=_quantile_allow,
)
add(
    "nanquantile",
    lambda L, x, q, **kw: L.nanquantile(x, q.to(x.dtype) if hasattr(q, "to") else q, **kw),
    _quantile_gen,
    tol=Tol(ulps=16, atol=2.0**-20),
    allow=_quantile_allow,
)


# ---- views and rearrangements -----------------------------------------------------------------
def view_gen(make_kw, dtypes=DTYPES, ndim=None, max_ndim=4):
    def gen(rng, i):
        s = shape(rng, ndim=ndim, max_ndim=max_ndim)
        x = arg(rng, s, dtypes[i % len(dtypes)])
        a, kw = make_kw(rng, s)
        return [x] + a, kw

    return gen


def _reshape_target(rng, s):
    n = _numel(s)
    if rng.random() < 0.05:
        return (n + 1,)
    # factor n into a random shape, maybe with a -1
    dims = []
    rest = n
    for _ in range(int(rng.integers(0, 4))):
        divs = [d for d in range(1, min(rest, 17) + 1) if rest % d == 0] if rest else [0, 1]
        d = pick(rng, divs)
        dims.append(d)
        rest = rest // d if d else 0
    dims.append(rest if n else 0)
    if rng.random() < 0.4 and n:
        dims[int(rng.integers(0, len(dims)))] = -1
    rng.shuffle(dims)
    return tuple(int(d) for d in dims)


def _perm(rng, s):
    return tuple(int(i) for i in rng.permutation(len(s)))


def _dim(rng, s, extra=0):
    nd = len(s) + extra
    if nd == 0:
        return 0
    if rng.random() < 0.04:
        return nd + 1
    return int(rng.integers(-nd, nd))


VIEWS = [
    ("reshape", lambda L, x, t: x.reshape(t), lambda rng, s: ([_reshape_target(rng, s)], {})),
    (
        "reshape(*)",
        lambda L, x, t: x.reshape(*t) if t else x.reshape(()),
        lambda rng, s: ([_reshape_target(rng, s)], {}),
    ),
    ("L.reshape", lambda L, x, t: L.reshape(x, t), lambda rng, s: ([_reshape_target(rng, s)], {})),
    ("view", lambda L, x, t: x.view(t), lambda rng, s: ([_reshape_target(rng, s)], {})),
    ("view(dtype)", lambda L, x, d: x.view(d), lambda rng, s: ([Dt(pick(rng, DTYPES))], {})),
    (
        "flatten",
        lambda L, x, a, b: x.flatten(a, b),
        lambda rng, s: ([0 if not s else int(rng.integers(0, len(s))), -1], {}),
    ),
    ("flatten(start)", lambda L, x, a: L.flatten(x, a), lambda rng, s: ([_dim(rng, s)], {})),
    (
        "unflatten",
        lambda L, x, d, sz: x.unflatten(d, sz),
        lambda rng, s: ([0, (1, -1)] if s else [0, (1,)], {}),
    ),
    ("permute", lambda L, x, p: x.permute(p), lambda rng, s: ([_perm(rng, s)], {})),
    ("permute(*)", lambda L, x, p: x.permute(*p), lambda rng, s: ([_perm(rng, s)], {})),
    ("L.permute", lambda L, x, p: L.permute(x, p), lambda rng, s: ([_perm(rng, s)], {})),
    (
        "transpose",
        lambda L, x, a, b: x.transpose(a, b),
        lambda rng, s: ([_dim(rng, s), _dim(rng, s)], {}),
    ),
    (
        "swapaxes",
        lambda L, x, a, b: L.swapaxes(x, a, b),
        lambda rng, s: ([_dim(rng, s), _dim(rng, s)], {}),
    ),
    ("t", lambda L, x: x.t(), lambda rng, s: ([], {})),
    ("T", lambda L, x: x.T, lambda rng, s: ([], {})),
    ("mT", lambda L, x: x.mT, lambda rng, s: ([], {})),
    ("H/mH", lambda L, x: x.mH, lambda rng, s: ([], {})),
    (
        "expand",
        lambda L, x, t: x.expand(*t),
        lambda rng, s: (
            [
                tuple(pick(rng, (-1, d, 3)) if d == 1 else pick(rng, (-1, d, d, d + 1)) for d in s)
                if rng.random() < 0.8
                else (2,) + tuple(s)
            ],
            {},
        ),
    ),
    (
        "expand_as",
        lambda L, x, y: x.expand_as(y),
        lambda rng, s: (
            [Arg(np.zeros((2,) + tuple(d if d != 1 else 3 for d in s)), "float32")],
            {},
        ),
    ),
    ("broadcast_to", lambda L, x, t: L.broadcast_to(x, t), lambda rng, s: ([(3,) + tuple(s)], {})),
    (
        "flip",
        lambda L, x, d: x.flip(d),
        lambda rng, s: (
            [
                tuple(
                    int(i)
                    for i in rng.choice(
                        len(s), size=int(rng.integers(0, len(s) + 1)), replace=False
                    )
                )
                if s
                else ()
            ],
            {},
        ),
    ),
    (
        "flip(*)",
        lambda L, x, d: x.flip(*d) if d else x.flip(()),
        lambda rng, s: (
            [
                tuple(
                    int(i)
                    for i in rng.choice(
                        len(s), size=int(rng.integers(1, len(s) + 1)), replace=False
                    )
                )
                if s
                else ()
            ],
            {},
        ),
    ),
    ("fliplr", lambda L, x: L.fliplr(x), lambda rng, s: ([], {})),
    ("flipud", lambda L, x: L.flipud(x), lambda rng, s: ([], {})),
    (
        "roll",
        lambda L, x, sh, d: L.roll(x, sh, d),
        lambda rng, s: (
            [int(rng.integers(-20, 20)), None if not s or rng.random() < 0.3 else _dim(rng, s)],
            {},
        ),
    ),
    (
        "roll(tuple)",
        lambda L, x, sh, d: x.roll(sh, d),
        lambda rng, s: ([(1, -2), (0, -1)] if len(s) >= 2 else [(1,), (0,)], {}),
    ),
    (
        "narrow",
        lambda L, x, d, st, n: x.narrow(d, st, n),
        lambda rng, s: ([0, int(rng.integers(-2, 3)), int(rng.integers(0, 3))], {}),
    ),
    (
        "unfold",
        lambda L, x, d, sz, st: x.unfold(d, sz, st),
        lambda rng, s: ([_dim(rng, s), int(rng.integers(0, 4)), int(rng.integers(1, 3))], {}),
    ),
    (
        "movedim",
        lambda L, x, a, b: x.movedim(a, b),
        lambda rng, s: ([_dim(rng, s), _dim(rng, s)], {}),
    ),
    (
        "movedim(tuple)",
        lambda L, x, a, b: L.movedim(x, a, b),
        lambda rng, s: ([(0, 1), (1, 0)] if len(s) >= 2 else [(0,), (0,)], {}),
    ),
    ("moveaxis", lambda L, x, a, b: L.moveaxis(x, a, b), lambda rng, s: ([_dim(rng, s), -1], {})),
    ("squeeze", lambda L, x: x.squeeze(), lambda rng, s: ([], {})),
    ("squeeze(d)", lambda L, x, d: x.squeeze(d), lambda rng, s: ([_dim(rng, s)], {})),
    (
        "squeeze(tuple)",
        lambda L, x, d: L.squeeze(x, d),
        lambda rng, s: ([tuple(range(len(s)))], {}),
    ),
    ("unsqueeze", lambda L, x, d: x.unsqueeze(d), lambda rng, s: ([_dim(rng, s, extra=1)], {})),
    (
        "chunk",
        lambda L, x, c, d: x.chunk(c, d),
        lambda rng, s: ([int(rng.integers(1, 5)), _dim(rng, s)], {}),
    ),
    (
        "split(int)",
        lambda L, x, c, d: x.split(c, d),
        lambda rng, s: ([int(rng.integers(1, 5)), _dim(rng, s)], {}),
    ),
    (
        "split(list)",
        lambda L, x, c, d: L.split(x, c, d),
        lambda rng, s: ([_split_sizes(rng, s[0] if s else 0), 0], {}),
    ),
    (
        "tensor_split",
        lambda L, x, c, d: L.tensor_split(x, c, dim=d),
        lambda rng, s: ([pick(rng, (1, 2, 3, (1, 3), [0, 2, 5])), _dim(rng, s)], {}),
    ),
    ("unbind", lambda L, x, d: x.unbind(d), lambda rng, s: ([_dim(rng, s)], {})),
    (
        "repeat",
        lambda L, x, r: x.repeat(*r),
        lambda rng, s: (
            [tuple(int(rng.integers(0, 3)) for _ in range(len(s) + int(rng.integers(0, 2))))],
            {},
        ),
    ),
    (
        "tile",
        lambda L, x, r: L.tile(x, r),
        lambda rng, s: (
            [tuple(int(rng.integers(0, 3)) for _ in range(int(rng.integers(0, len(s) + 2))))],
            {},
        ),
    ),
    (
        "repeat_interleave",
        lambda L, x, r, d: L.repeat_interleave(x, r, dim=d),
        lambda rng, s: (
            [int(rng.integers(0, 3)), None if rng.random() < 0.3 or not s else _dim(rng, s)],
            {},
        ),
    ),
    (
        "diagonal",
        lambda L, x, o, a, b: x.diagonal(o, a, b),
        lambda rng, s: ([int(rng.integers(-2, 3)), 0, -1], {}),
    ),
    ("diag", lambda L, x, o: L.diag(x, o), lambda rng, s: ([int(rng.integers(-2, 3))], {})),
    (
        "diag_embed",
        lambda L, x, o: L.diag_embed(x, o),
        lambda rng, s: ([int(rng.integers(-2, 3))], {}),
    ),
    ("tril", lambda L, x, o: x.tril(o), lambda rng, s: ([int(rng.integers(-3, 4))], {})),
    ("triu", lambda L, x, o: L.triu(x, o), lambda rng, s: ([int(rng.integers(-3, 4))], {})),
    (
        "rot90",
        lambda L, x, k: L.rot90(x, k, [0, 1]),
        lambda rng, s: ([int(rng.integers(-2, 5))], {}),
    ),
    (
        "contiguous",
        lambda L, x: (x.contiguous(), x.contiguous().is_contiguous()),
        lambda rng, s: ([], {}),
    ),
    ("clone", lambda L, x: x.clone(), lambda rng, s: ([], {})),
    (
        "select",
        lambda L, x, d, j: x.select(d, j),
        lambda rng, s: ([_dim(rng, s), int(rng.integers(-3, 3))], {}),
    ),
    (
        "stride/is_contiguous",
        lambda L, x: (
            x.stride(),
            x.is_contiguous(),
            x.storage_offset(),
            x.dim(),
            x.numel(),
            x.size(),
            x.shape,
        ),
        lambda rng, s: ([], {}),
    ),
    ("atleast_2d", lambda L, x: L.atleast_2d(x), lambda rng, s: ([], {})),
    ("ravel", lambda L, x: x.ravel(), lambda rng, s: ([], {})),
    (
        "view_as",
        lambda L, x: x.view_as(x.reshape(-1)) if x.dim() else x.view_as(x),
        lambda rng, s: ([], {}),
    ),
]


def _split_sizes(rng, n):
    out = []
    rest = n
    while rest > 0:
        k = int(rng.integers(0, rest + 1))
        out.append(k)
        rest -= k
    if rng.random() < 0.1:
        out.append(1)  # sums past n: an error
    return out


def _view_allow(args, kwargs, t_exc, p_exc, mismatch):
    if (
        len(args) == 2
        and isinstance(args[1], Dt)
        and {args[0].dtype, args[1].name} & {"int64", "float64"}
    ):
        return "int64/float64 are 4-byte int32/float32 here: view(dtype) reinterprets 4 bytes"
    if t_exc is not None and p_exc is None and isinstance(args[-1], Dt) and args[0].a.size == 0:
        return "torch checks an empty tensor's strides for view(dtype); pyrite's empty result needs none"
    if (
        mismatch
        and len(args) == 2
        and isinstance(args[1], Dt)
        and args[0].dtype in FLOATS
        and np.isnan(args[0].a).any()
    ):
        # torch's float64 -> bf16 cast made 0xFFFF NaNs, pyrite stores 0x7FC0: the bits differ
        return "a NaN's bit pattern is not kept (pyrite stores the canonical NaN)"
    if t_exc is not None and p_exc is None and "missing 1 required positional" in str(t_exc):
        # x.permute() / x.expand() / x.repeat() of a 0-d tensor: the identity here (internal
        # callers spread a 0-d tensor's empty shape), torch wants an argument
        return "pyrite takes no sizes for a 0-d tensor's permute/expand/repeat (the identity)"
    return None


for _name, _f, _kw in VIEWS:
    add(_name, _f, view_gen(_kw), tol=EXACT, allow=_view_allow)


# ---- indexing -------------------------------------------------------------------------------
def _index_expr(rng, s, allow_adv=True, allow_bool=True):
    """A random index tuple for shape s (basic, advanced, boolean, None, Ellipsis) and the
    numpy index it means (to find the result's shape)."""
    items, np_items = [], []
    d = 0
    used_ellipsis = False
    n_items = int(rng.integers(1, len(s) + 2))
    for _ in range(n_items):
        r = rng.random()
        if d >= len(s):
            if r < 0.3:
                items.append(None)
                np_items.append(None)
            elif r < 0.4 and not used_ellipsis:
                items.append(Ellipsis)
                np_items.append(Ellipsis)
                used_ellipsis = True
            break
        size = s[d]
        if r < 0.25:  # an int, maybe negative, rarely out of range
            lo, hi = (-size, size) if rng.random() > 0.03 else (size, size + 2)
            v = int(rng.integers(lo, hi)) if hi > lo else 0
            items.append(v)
            np_items.append(v)
            d += 1
        elif r < 0.5:  # a slice with a positive step
            a = pick(rng, (None, 0, 1, -1, -3, 2, size))
            b = pick(rng, (None, -1, size, 1, 3, size + 5))
            st = pick(rng, (None, 1, 2, 3))
            items.append(slice(a, b, st))
            np_items.append(slice(a, b, st))
            d += 1
        elif r < 0.58:
            items.append(None)
            np_items.append(None)
        elif r < 0.63 and not used_ellipsis:
            items.append(Ellipsis)
            np_items.append(Ellipsis)
            used_ellipsis = True
            d = max(d, len(s) - (n_items - len(items)))
        elif r < 0.8 and allow_adv:  # an integer tensor (or a list) of indices
            k = int(rng.integers(0, 4))
            bad = rng.random() < 0.03
            vals = (
                rng.integers(-size, size + (2 if bad else 0), size=(k,))
                if size
                else np.zeros((0,), np.int64)
            )
            if rng.random() < 0.3:
                items.append([int(v) for v in vals])
            else:
                items.append(Arg(vals.astype(np.int64), pick(rng, ("int64", "int32"))))
            np_items.append(np.clip(vals, -max(size, 1), max(size - 1, 0)))
            d += 1
        elif allow_bool:  # a boolean mask over the next dims
            k = min(len(s) - d, int(rng.integers(1, 3)))
            m = rng.random(s[d : d + k]) < 0.5
            items.append(Arg(m, "bool"))
            np_items.append(m)
            d += k
        else:
            items.append(slice(None))
            np_items.append(slice(None))
            d += 1
    return tuple(items), tuple(np_items)


def _np_index_shape(s, np_idx):
    try:
        return np.empty(s)[np_idx].shape
    except Exception:  # noqa: BLE001 - an error case: the shape does not matter
        return ()


def _getitem_gen(rng, i):
    s = shape(rng, max_ndim=4)
    x = arg(rng, s, DTYPES[i % len(DTYPES)])
    idx, _ = _index_expr(rng, s)
    if len(idx) == 1 and rng.random() < 0.5:
        idx = idx[0]
    return [x, idx], {}


add("x[idx]", lambda L, x, idx: x[idx], _getitem_gen, tol=EXACT)


def _setitem_gen(rng, i):
    s = shape(rng, max_ndim=4)
    x = arg(rng, s, DTYPES[i % len(DTYPES)], lay=False)
    idx, np_idx = _index_expr(rng, s)
    out_shape = _np_index_shape(s, np_idx)
    r = rng.random()
    if r < 0.3:
        v = _scalar(rng, pick(rng, SCALARS), Dom())
    else:
        vs = broadcast_partner(rng, out_shape, bad=0.03)
        if rng.random() < 0.2:
            vs = (1,) + tuple(vs)  # leading 1s, which torch drops
        vdt = pick(rng, DTYPES)
        # NaN/inf into an integer tensor: an undefined cast
        v = arg(rng, vs, vdt, Dom(specials=0) if x.dtype in INTS + ("bool",) else Dom())
    return [x, idx, v, bool(rng.random() < 0.3)], {}


def _setitem(L, x, idx, v, through_view):
    base = x.clone()
    target = base.transpose(0, -1) if through_view and base.dim() >= 2 else base
    if through_view and base.dim() >= 2:
        target = base.transpose(0, -1).transpose(0, -1)  # a view of base with base's shape
    target[idx] = v
    return base


def _setitem_allow(args, kwargs, t_exc, p_exc, mismatch):
    if (
        t_exc is not None
        and p_exc is None
        and "Index put requires the source and destination dtypes match" in str(t_exc)
    ):
        return "pyrite casts the value of an advanced-index assignment, as basic indexing does (torch requires one dtype there)"
    return None


add("x[idx] = v", _setitem, _setitem_gen, tol=EXACT, allow=_setitem_allow)


def _index_fn_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    x = arg(rng, s, DTYPES[i % len(DTYPES)])
    d = int(rng.integers(-len(s), len(s)))
    n = s[d]
    k = int(rng.integers(0, 6))
    bad = rng.random() < 0.04
    idx = (
        rng.integers(0, max(n, 1) + (3 if bad else 0), size=(k,))
        if n or bad
        else np.zeros((0,), np.int64)
    )
    return [x, d, Arg(idx.astype(np.int64), pick(rng, ("int64", "int32")))], {}


add("index_select", lambda L, x, d, idx: L.index_select(x, d, idx), _index_fn_gen, tol=EXACT)


def _gather_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    x = arg(rng, s, DTYPES[i % len(DTYPES)])
    d = int(rng.integers(-len(s), len(s)))
    ishape = tuple(
        int(rng.integers(0, k + 1)) if j != d % len(s) else int(rng.integers(0, 5))
        for j, k in enumerate(s)
    )
    n = s[d]
    bad = rng.random() < 0.04
    idx = (
        rng.integers(0, max(n, 1) + (2 if bad else 0), size=ishape)
        if (n or bad)
        else np.zeros(ishape, np.int64)
    )
    return [x, d, Arg(idx.astype(np.int64), "int64")], {}


add("gather", lambda L, x, d, idx: L.gather(x, d, idx), _gather_gen, tol=EXACT)


def _take_along_allow(args, kwargs, t_exc, p_exc, mismatch):
    x, d, idx = args
    n = x.a.shape[d] if x.a.ndim else 1
    if p_exc is not None and t_exc is None and idx.a.size and int(idx.a.max()) >= n:
        return (
            "torch's take_along_dim does not bound-check (it read past the tensor); pyrite raises"
        )
    return None


add(
    "take_along_dim",
    lambda L, x, d, idx: L.take_along_dim(x, idx, dim=d),
    _gather_gen,
    tol=EXACT,
    allow=_take_along_allow,
)


def _scatter(L, x, d, idx, reduce=None, form="src"):
    y = x.clone()
    src = (
        x.flatten()[: idx.numel()].reshape(idx.shape)
        if x.numel() >= idx.numel()
        else L.ones(idx.shape, dtype=x.dtype)
    )
    if form == "value":
        return y.scatter_(d, idx, 2) if reduce is None else y.scatter_(d, idx, 2, reduce=reduce)
    if form == "add":
        return y.scatter_add_(d, idx, src)
    if form == "reduce":
        return y.scatter_reduce_(d, idx, src, reduce=reduce, include_self=bool(idx.numel() % 2))
    return y.scatter_(d, idx, src)


def _scatter_gen(form):
    def gen(rng, i):
        (x, d, idx), _ = _gather_gen(rng, i)
        # unique target positions for plain scatter (duplicates leave the winner unspecified)
        if form in ("src", "value"):
            a = idx.a
            if a.size and a.ndim:
                dd = d % a.ndim
                n = max(1, x.a.shape[dd])
                m = np.moveaxis(a, dd, -1)
                k = m.shape[-1]
                # the first min(k, n) of a permutation of range(n) along the dim: distinct
                m = np.argsort(rng.random(m.shape[:-1] + (n,)), axis=-1)[..., : min(k, n)]
                idx = Arg(np.moveaxis(m, -1, dd).astype(np.int64), "int64")
        red = {
            "reduce": pick(rng, ("sum", "prod", "mean", "amax", "amin")),
            "value": pick(rng, (None, "add", "multiply")),
        }.get(form)
        return [x, d, idx], {"reduce": red, "form": form}

    return gen


for _form in ("src", "value", "add", "reduce"):
    add(
        f"scatter({_form})",
        lambda L, x, d, idx, **kw: _scatter(L, x, d, idx, **kw),
        _scatter_gen(_form),
        tol=Tol(ulps=8, sum_terms=True),
    )


def _mask_gen(rng, i):
    s = shape(rng)
    x = arg(rng, s, DTYPES[i % len(DTYPES)])
    m = arg(rng, broadcast_partner(rng, s), "bool" if i % 13 else "uint8", Dom(ilo=0, ihi=1))
    return [x, m, _scalar(rng, pick(rng, SCALARS), Dom())], {}


add("masked_fill", lambda L, x, m, v: x.masked_fill(m, v), _mask_gen, tol=EXACT)
add("masked_select", lambda L, x, m, v: L.masked_select(x, m), _mask_gen, tol=EXACT)
add(
    "x[mask]",
    lambda L, x, m, v: (
        x[m] if tuple(m.shape) == tuple(x.shape) else x[m.expand_as(x) if m.dim() <= x.dim() else m]
    ),
    _mask_gen,
    tol=EXACT,
)
add("nonzero", lambda L, x, m, v: L.nonzero(x), _mask_gen, tol=EXACT)
add("nonzero(as_tuple)", lambda L, x, m, v: L.nonzero(x, as_tuple=True), _mask_gen, tol=EXACT)
add("argwhere", lambda L, x, m, v: L.argwhere(x), _mask_gen, tol=EXACT)
add(
    "take",
    lambda L, x, m, v: L.take(x, L.arange(x.numel()).flip(0)[: max(0, x.numel() - 1)]),
    _mask_gen,
    tol=EXACT,
)


def _index_put_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    x = arg(rng, s, DTYPES[i % len(DTYPES)], lay=False)
    n = s[0]
    k = int(rng.integers(0, 5))
    idx = rng.integers(-n, n, size=(k,)) if n else np.zeros((0,), np.int64)
    if i % 3 == 0 and n:
        idx = rng.permutation(n)[: min(k, n)]  # unique: no duplicate winner question
    v = arg(rng, (len(idx),) + tuple(s[1:]), DTYPES[i % len(DTYPES)])
    return [x, Arg(idx.astype(np.int64), "int64"), v, bool(i % 3 != 0)], {}


def _index_put(L, x, idx, v, accumulate):
    y = x.clone()
    return y.index_put_((idx,), v, accumulate=accumulate)


add("index_put_", _index_put, _index_put_gen, tol=Tol(ulps=8, sum_terms=True))
add(
    "index_add",
    lambda L, x, idx, v, acc: x.index_add(0, idx.remainder(max(1, x.shape[0])), v, alpha=2),
    _index_put_gen,
    tol=Tol(ulps=8, sum_terms=True),
)
add(
    "index_copy",
    lambda L, x, idx, v, acc: x.index_copy(
        0,
        idx.remainder(max(1, x.shape[0])).unique(),
        v[: idx.remainder(max(1, x.shape[0])).unique().numel()],
    ),
    _index_put_gen,
    tol=EXACT,
)
add("index_fill", lambda L, x, idx, v, acc: x.index_fill(0, idx, -1), _index_put_gen, tol=EXACT)


# ---- sort / topk / unique / searchsorted ------------------------------------------------------
def _sort_gen(rng, i):
    s = shape(rng, max_ndim=3)
    dt = DTYPES[i % len(DTYPES)]
    x = arg(rng, s, dt, Dom(-3, 3, specials=0.05, ilo=-5, ihi=5))
    nd = max(1, len(s))
    return [x], {
        "dim": int(rng.integers(-nd, nd)),
        "descending": bool(i % 2),
        "stable": bool((i // 2) % 2),
    }


add(
    "sort",
    lambda L, x, **kw: L.sort(x, **kw),
    _sort_gen,
    tol=EXACT,
    check=lambda t, p, a, k, tol, inp: (
        compare(t, p, tol, inp) if k["stable"] else check_index_ties(t, p, a, k, tol, inp)
    ),
)
add(
    "Tensor.sort",
    lambda L, x, **kw: x.sort(kw["dim"], kw["descending"]),
    _sort_gen,
    tol=EXACT,
    check=check_index_ties,
)
add(
    "argsort(stable)",
    lambda L, x, **kw: L.argsort(x, dim=kw["dim"], descending=kw["descending"], stable=True),
    _sort_gen,
    tol=EXACT,
)
add("msort", lambda L, x, **kw: L.msort(x), _sort_gen, tol=EXACT)


def _topk_gen(rng, i):
    s = shape(rng, max_ndim=3, zero=0.02)
    dt = DTYPES[i % len(DTYPES)]
    x = arg(rng, s, dt, Dom(-3, 3, specials=0.05, ilo=-5, ihi=5))
    nd = max(1, len(s))
    d = int(rng.integers(-nd, nd))
    n = s[d] if s else 1
    k = int(rng.integers(0, n + 1)) if rng.random() > 0.05 else n + 1
    return [x, k, d], {"largest": bool(i % 2)}


def _topk_check(t, p, a, k, tol, inp):
    check_index_ties(t, p, a, {"dim": a[2]}, tol, inp)


def _topk_allow(args, kwargs, t_exc, p_exc, mismatch):
    if t_exc is not None and p_exc is None and "does not support bool dtypes on CPU" in str(t_exc):
        return "torch CPU's topk lacks bool (CUDA's has it); so does pyrite"
    return None


add(
    "topk",
    lambda L, x, k, d, **kw: L.topk(x, k, d, **kw),
    _topk_gen,
    tol=EXACT,
    check=_topk_check,
    allow=_topk_allow,
)
add(
    "kthvalue",
    lambda L, x, k, d, **kw: L.kthvalue(x, max(k, 1), d, keepdim=kw["largest"]),
    _topk_gen,
    tol=EXACT,
    check=lambda t, p, a, k, tol, inp: check_index_ties(t, p, a, {"dim": a[2]}, tol, inp),
)


def _unique_gen(rng, i):
    s = shape(rng, max_ndim=3)
    x = arg(rng, s, DTYPES[i % len(DTYPES)], Dom(-2, 2, specials=0, ilo=-3, ihi=3))
    if x.dtype in FLOATS:
        x = Arg(np.round(x.a), x.dtype, x.layout)
    kw = {"return_inverse": bool(i % 2), "return_counts": bool((i // 2) % 2)}
    if i % 5 == 4 and s:
        kw["dim"] = int(rng.integers(-len(s), len(s)))
    return [x], kw


add("unique", lambda L, x, **kw: L.unique(x, **kw), _unique_gen, tol=EXACT)
add("Tensor.unique(sorted)", lambda L, x, **kw: x.unique(sorted=True, **kw), _unique_gen, tol=EXACT)
add("unique_consecutive", lambda L, x, **kw: L.unique_consecutive(x, **kw), _unique_gen, tol=EXACT)


def _searchsorted_gen(rng, i):
    n = int(rng.integers(0, 9))
    dt = ("float32", "int64", "int32", "float16", "uint8", "bfloat16")[i % 6]
    lead = shape(rng, max_ndim=2) if i % 3 == 0 else ()
    seq = np.sort(values(rng, lead + (n,), dt, Dom(-3, 3, specials=0, ilo=0, ihi=9)), axis=-1)
    vshape = lead + (int(rng.integers(0, 6)),) if lead else shape(rng, max_ndim=2)
    v = arg(rng, vshape, dt, Dom(-4, 4, specials=0, ilo=0, ihi=10))
    if i % 4 == 1:
        v = float(rng.integers(-3, 4))
    kw = {"right": bool(i % 2)}
    if i % 7 == 3:
        kw = {"side": pick(rng, ("left", "right"))}
    if i % 5 == 2:
        kw["out_int32"] = True
    return [Arg(seq, dt), v], kw


add("searchsorted", lambda L, s, v, **kw: L.searchsorted(s, v, **kw), _searchsorted_gen, tol=EXACT)
add(
    "bucketize",
    lambda L, s, v, **kw: (
        L.bucketize(v, s.flatten() if s.dim() > 1 else s, right=kw.get("right", False))
        if hasattr(v, "shape")
        else L.bucketize(L.tensor(v), s.flatten(), right=kw.get("right", False))
    ),
    _searchsorted_gen,
    tol=EXACT,
)


def _bincount_gen(rng, i):
    n = int(rng.integers(0, 20))
    x = rng.integers(0, 8, size=(n,))
    kw = {}
    if i % 2:
        kw["weights"] = arg(
            rng, (n,), pick(rng, ("float32", "float64", "int64")), Dom(0, 3, specials=0)
        )
    if i % 3 == 0:
        kw["minlength"] = int(rng.integers(0, 12))
    if i % 17 == 5:
        x = x - 3  # negative: an error
    return [
        Arg(
            x.astype(np.int64),
            pick(rng, ("int64", "int32", "uint8") if (x >= 0).all() else ("int64",)),
        )
    ], kw


def _bincount_allow(args, kwargs, t_exc, p_exc, mismatch):
    if mismatch and "dtype" in mismatch and args[0].a.size == 0:
        return "torch's bincount of an empty input is int64 whatever the weights' dtype (a torch quirk)"
    return None


add(
    "bincount",
    lambda L, x, **kw: L.bincount(x, **kw),
    _bincount_gen,
    tol=Tol(ulps=8, sum_terms=True),
    allow=_bincount_allow,
)


def _histc_gen(rng, i):
    x = arg(rng, shape(rng, max_ndim=2), pick(rng, ("float32", "float64")), Dom(-3, 3, specials=0))
    return [x], {
        "bins": int(rng.integers(1, 9)),
        "min": pick(rng, (0, -2, -3)),
        "max": pick(rng, (0, 2, 3)),
    }


add("histc", lambda L, x, **kw: L.histc(x, **kw), _histc_gen, tol=EXACT)


# ---- cat / stack and friends ------------------------------------------------------------------
def _cat_gen(rng, i):
    nd = int(rng.integers(1, 4))
    s = shape(rng, ndim=nd)
    d = int(rng.integers(-nd, nd))
    k = int(rng.integers(1, 4))
    ts = []
    for j in range(k):
        t = list(s)
        t[d] = int(rng.integers(0, 4))
        if rng.random() < 0.04:
            t[(d + 1) % nd] += 1  # mismatched: an error (unless nd == 1)
        dt = pick(rng, DTYPES) if i % 2 else DTYPES[i % len(DTYPES)]
        ts.append(arg(rng, tuple(t), dt))
    if rng.random() < 0.1:
        ts.append(arg(rng, (0,), pick(rng, DTYPES)))  # torch's legacy: a 1-d empty joins anything
    return [ts, d], {}


add("cat", lambda L, ts, d: L.cat(ts, d), _cat_gen, tol=EXACT)
add("cat(dim=)", lambda L, ts, d: L.cat(tuple(ts), dim=d), _cat_gen, tol=EXACT)
add("concatenate", lambda L, ts, d: L.concatenate(ts, axis=d), _cat_gen, tol=EXACT)


def _stack_gen(rng, i):
    s = shape(rng, max_ndim=3)
    k = int(rng.integers(1, 4))
    ts = [
        arg(
            rng,
            s if rng.random() > 0.04 else s + (1,),
            pick(rng, DTYPES) if i % 2 else DTYPES[i % len(DTYPES)],
        )
        for _ in range(k)
    ]
    nd = len(s) + 1
    return [ts, int(rng.integers(-nd, nd))], {}


add("stack", lambda L, ts, d: L.stack(ts, d), _stack_gen, tol=EXACT)
add("hstack", lambda L, ts, d: L.hstack(ts), _stack_gen, tol=EXACT)
add("vstack", lambda L, ts, d: L.vstack(ts), _stack_gen, tol=EXACT)
add("dstack", lambda L, ts, d: L.dstack(ts), _stack_gen, tol=EXACT)
add("column_stack", lambda L, ts, d: L.column_stack(ts), _stack_gen, tol=EXACT)
add("broadcast_tensors", lambda L, ts, d: L.broadcast_tensors(*ts), _stack_gen, tol=EXACT)
add(
    "meshgrid",
    lambda L, ts, d: L.meshgrid(*[t.flatten()[:7] for t in ts], indexing=pick_indexing(d)),
    _stack_gen,
    tol=EXACT,
)


def pick_indexing(d):
    return "ij" if d % 2 else "xy"


# ---- matmul family ----------------------------------------------------------------------------
def _dot_scale(inputs, want):
    m = [float(np.abs(a[np.isfinite(a)]).max(initial=0.0)) for a in inputs[:2]] + [1.0, 1.0]
    return max(1.0, m[0] * m[1])


DOT = Tol(ulps=8, sum_terms=True, scale=_dot_scale)
MM_DTYPES = (
    "float32",
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int32",
    "int64",
    "uint8",
    "int8",
    "bool",
)
MM_DOM = Dom(-2, 2, specials=0.0, ilo=-4, ihi=4)


def _mm_dt(rng, i):
    da = MM_DTYPES[i % len(MM_DTYPES)]
    db = da if rng.random() < 0.85 else pick(rng, MM_DTYPES)
    return da, db


def _matmul_gen(rng, i):
    da, db = _mm_dt(rng, i)
    m, k, n = (int(rng.choice((0, 1, 2, 3, 5, 7, 13, 17))) for _ in range(3))
    form = i % 6
    if rng.random() < 0.04:
        k2 = k + 1
    else:
        k2 = k
    batch = shape(rng, max_ndim=2, zero=0.02, max_numel=12)
    b2 = broadcast_partner(rng, batch, bad=0.02)
    if form == 0:
        sa, sb = (k,), (k2,)
    elif form == 1:
        sa, sb = (k,), batch + (k2, n)
    elif form == 2:
        sa, sb = batch + (m, k), (k2,)
    else:
        sa, sb = batch + (m, k), b2 + (k2, n)
    return [arg(rng, sa, da, MM_DOM), arg(rng, sb, db, MM_DOM)], {}


def _k_terms(args, kwargs):
    a = args[0].a
    return max(1, a.shape[-1]) if a.ndim else 1


def _mm_allow(args, kwargs, t_exc, p_exc, mismatch):
    kinds = {a.dtype for a in args if isinstance(a, Arg)}
    if (
        "bfloat16" in kinds
        and len(kinds) > 1
        and (t_exc is not None and p_exc is None or mismatch and "dtype" in mismatch)
    ):
        # ops/fallback.py widens bf16 to f32 before the kernel's dtype check sees it
        return "pyrite's matmul takes bfloat16 with float32 (the bf16 operand is widened)"
    if (
        p_exc is not None
        and t_exc is None
        and "same dtype" in str(p_exc)
        and any(isinstance(a, Arg) and 0 in a.a.shape for a in args)
    ):
        return "torch checks the operands' dtypes only when the product has terms (K = 0 here)"
    if p_exc is not None and t_exc is None and kinds == {"bool"}:
        return "pyrite's matmul family has no bool kernel (torch CPU runs a few bool cases: inner, K=0)"
    return None


add(
    "matmul",
    lambda L, a, b: L.matmul(a, b),
    _matmul_gen,
    tol=DOT,
    n_terms=_k_terms,
    allow=_mm_allow,
)
add("a@b", lambda L, a, b: a @ b, _matmul_gen, tol=DOT, n_terms=_k_terms, allow=_mm_allow)


def _mm2_gen(nd_a, nd_b, batch=False):
    def gen(rng, i):
        da, db = _mm_dt(rng, i)
        m, k, n, bt = (int(rng.choice((0, 1, 2, 3, 5, 7, 13))) for _ in range(4))
        k2 = k + 1 if rng.random() < 0.04 else k
        sa = {1: (k,), 2: (m, k), 3: (bt, m, k)}[nd_a]
        sb = {1: (k2,), 2: (k2, n), 3: (bt, k2, n)}[nd_b]
        return [arg(rng, sa, da, MM_DOM), arg(rng, sb, db, MM_DOM)], {}

    return gen


add("mm", lambda L, a, b: L.mm(a, b), _mm2_gen(2, 2), tol=DOT, n_terms=_k_terms, allow=_mm_allow)
add("bmm", lambda L, a, b: L.bmm(a, b), _mm2_gen(3, 3), tol=DOT, n_terms=_k_terms, allow=_mm_allow)
add("mv", lambda L, a, b: L.mv(a, b), _mm2_gen(2, 1), tol=DOT, n_terms=_k_terms, allow=_mm_allow)
add("dot", lambda L, a, b: L.dot(a, b), _mm2_gen(1, 1), tol=DOT, n_terms=_k_terms, allow=_mm_allow)
add(
    "vdot", lambda L, a, b: L.vdot(a, b), _mm2_gen(1, 1), tol=DOT, n_terms=_k_terms, allow=_mm_allow
)
add(
    "inner",
    lambda L, a, b: L.inner(a, b),
    _mm2_gen(2, 1),
    tol=DOT,
    n_terms=_k_terms,
    allow=_mm_allow,
)
add("outer", lambda L, a, b: L.outer(a, b), _mm2_gen(1, 1), tol=U)
add("kron", lambda L, a, b: L.kron(a, b), _mm2_gen(2, 2), tol=U)


def _addmm_gen(rng, i):
    (a, b), _ = _mm2_gen(2, 2)(rng, i)
    m, n = a.a.shape[0], b.a.shape[1]
    c = arg(rng, broadcast_partner(rng, (m, n), bad=0.02), a.dtype, MM_DOM)
    kw = {}
    if i % 3:
        kw = {"beta": pick(rng, (0, 0.5, 1, 2)), "alpha": pick(rng, (1, -1, 0.25))}
        if a.dtype not in FLOATS:
            kw = {"beta": int(kw["beta"]), "alpha": int(kw["alpha"])}
    return [c, a, b], kw


add(
    "addmm",
    lambda L, c, a, b, **kw: L.addmm(c, a, b, **kw),
    _addmm_gen,
    tol=DOT,
    n_terms=lambda a, k: max(1, a[1].a.shape[1]),
    allow=_mm_allow,
)


def _baddbmm_gen(rng, i):
    (a, b), _ = _mm2_gen(3, 3)(rng, i)
    c = arg(rng, (a.a.shape[0], a.a.shape[1], b.a.shape[2]), a.dtype, MM_DOM)
    return [c, a, b], {"beta": 0.5 if a.dtype in FLOATS else 1, "alpha": 2}


add(
    "baddbmm",
    lambda L, c, a, b, **kw: L.baddbmm(c, a, b, **kw),
    _baddbmm_gen,
    tol=DOT,
    n_terms=lambda a, k: max(1, a[1].a.shape[2]),
    allow=_mm_allow,
)


def _einsum_gen(rng, i):
    eqs = [
        ("ij,jk->ik", [(0, 1), (1, 2)]),
        ("bij,bjk->bik", [(3, 0, 1), (3, 1, 2)]),
        ("i,i->", [(0,), (0,)]),
        ("ii->i", [(0, 0)]),
        ("ij->ji", [(0, 1)]),
        ("bhqd,bhkd->bhqk", [(3, 4, 0, 1), (3, 4, 2, 1)]),
        ("i,j->ij", [(0,), (1,)]),
        ("...ij,...jk->...ik", [(3, 0, 1), (1, 2)]),
        ("ijk->", [(0, 1, 2)]),
        ("ij,ij->i", [(0, 1), (0, 1)]),
    ]
    eq, dims = eqs[i % len(eqs)]
    sizes = [int(rng.choice((1, 2, 3, 5, 7))) for _ in range(5)]
    dt = pick(rng, ("float32", "float32", "float16", "float64"))
    ops = [arg(rng, tuple(sizes[d] for d in ds), dt, MM_DOM) for ds in dims]
    return [eq, ops], {}


add(
    "einsum",
    lambda L, eq, ops: L.einsum(eq, *ops),
    _einsum_gen,
    tol=Tol(
        ulps=16,
        sum_terms=True,
        scale=lambda inp, w: max([1.0] + [float(np.abs(a).max(initial=0)) ** 2 for a in inp]),
    ),
    n_terms=lambda a, k: 64,
)


def _cdist_gen(rng, i):
    b, m, n, d = (int(rng.choice((1, 2, 3, 5))) for _ in range(4))
    return [arg(rng, (b, m, d), "float32", MM_DOM), arg(rng, (b, n, d), "float32", MM_DOM)], {
        "p": pick(rng, (1.0, 2.0, 3.0, float("inf"), 0.0))
    }


add(
    "cdist",
    lambda L, a, b, **kw: L.cdist(a, b, **kw),
    _cdist_gen,
    tol=Tol(ulps=64, atol=2.0**-16, sum_terms=True),
    n_terms=lambda a, k: a[0].a.shape[-1],
)


# ---- nn.functional: losses ------------------------------------------------------------------
# u_out=8: a loss of differences (triplet: d(a, p) - d(a, n) + margin) stores each step in a
# float16 result, so its roundings are of the intermediate magnitudes
LOSS_TOL = Tol(ulps=64, atol=2.0**-18, sum_terms=True, u_out=8)
REDUCTIONS = ("mean", "sum", "none")


def _loss_terms(args, kwargs):
    return max(1, args[0].a.size) if isinstance(args[0], Arg) else 1


def _pair_loss_gen(
    dom_in=Dom(-3, 3, specials=0.01),
    dom_t=Dom(-3, 3, specials=0.01),
    tdt=None,
    extra=None,
    bshape=True,
):
    def gen(rng, i):
        s = shape(rng, max_ndim=3, zero=0.02)
        dt = ("float32", "float32", "float16", "bfloat16", "float64")[i % 5]
        ts = broadcast_partner(rng, s, bad=0.02) if bshape and rng.random() < 0.2 else s
        kw = {"reduction": REDUCTIONS[(i // 5) % 3]}
        if extra:
            kw.update(extra(rng, i))
        return [arg(rng, s, dt, dom_in), arg(rng, ts, tdt or dt, dom_t)], kw

    return gen


PAIR_LOSSES = [
    ("mse_loss", _pair_loss_gen(), {}),
    ("l1_loss", _pair_loss_gen(), {}),
    (
        "smooth_l1_loss",
        _pair_loss_gen(extra=lambda rng, i: {"beta": pick(rng, (1.0, 0.5, 0.0))}),
        {},
    ),
    ("huber_loss", _pair_loss_gen(extra=lambda rng, i: {"delta": pick(rng, (1.0, 0.5, 2.0))}), {}),
    (
        "binary_cross_entropy",
        _pair_loss_gen(Dom(0, 1, specials=0), Dom(0, 1, specials=0), bshape=False),
        {},
    ),
    (
        "binary_cross_entropy_with_logits",
        _pair_loss_gen(Dom(-5, 5, specials=0), Dom(0, 1, specials=0), bshape=False),
        {},
    ),
    (
        "soft_margin_loss",
        _pair_loss_gen(Dom(-3, 3, specials=0), Dom(-1, 1, specials=0), bshape=False),
        {},
    ),
    (
        "kl_div",
        _pair_loss_gen(
            Dom(-3, 0, specials=0),
            Dom(0, 1, specials=0),
            extra=lambda rng, i: {
                "log_target": bool(i % 2),
                "reduction": pick(rng, ("mean", "sum", "none", "batchmean")),
            },
            bshape=False,
        ),
        {},
    ),
    (
        "poisson_nll_loss",
        _pair_loss_gen(
            Dom(0.1, 3, specials=0),
            Dom(0, 3, specials=0),
            extra=lambda rng, i: {"log_input": bool(i % 2), "full": bool((i // 2) % 2)},
            bshape=False,
        ),
        {},
    ),
    (
        "hinge_embedding_loss",
        _pair_loss_gen(
            Dom(-2, 2, specials=0),
            Dom(-1, 1, specials=0),
            extra=lambda rng, i: {"margin": pick(rng, (1.0, 0.5))},
            bshape=False,
        ),
        {},
    ),
    (
        "multilabel_soft_margin_loss",
        _pair_loss_gen(Dom(-3, 3, specials=0), Dom(0, 1, specials=0), bshape=False),
        {},
    ),
]


def _signs(L, t):
    return L.where(t > 0, L.ones_like(t), -L.ones_like(t))


for _name, _gen, _ in PAIR_LOSSES:
    if _name in ("hinge_embedding_loss", "soft_margin_loss"):
        _f = lambda L, x, t, _n=_name, **kw: getattr(F(L), _n)(x, _signs(L, t), **kw)
    elif _name == "multilabel_soft_margin_loss":
        _f = lambda L, x, t, _n=_name, **kw: getattr(F(L), _n)(x, (t > 0.5).to(x.dtype), **kw)
    else:
        _f = lambda L, x, t, _n=_name, **kw: getattr(F(L), _n)(x, t, **kw)
    add(f"F.{_name}", _f, _gen, tol=LOSS_TOL, n_terms=_loss_terms)


def _ce_gen(rng, i):
    n = int(rng.choice((1, 2, 3, 5, 7)))
    c = int(rng.choice((1, 2, 3, 5, 11)))
    form = i % 4
    extra = shape(rng, max_ndim=2, max_numel=30) if form == 2 else ()
    dt = pick(rng, ("float32", "float32", "float16", "bfloat16", "float64"))
    if form == 3:  # unbatched
        x = arg(rng, (c,), dt, Dom(-4, 4, specials=0))
    else:
        x = arg(rng, (n, c) + extra, dt, Dom(-4, 4, specials=0))
    kw = {"reduction": REDUCTIONS[(i // 4) % 3]}
    if rng.random() < 0.3:
        kw["label_smoothing"] = pick(rng, (0.1, 0.0, 0.5))
    if rng.random() < 0.3:
        kw["weight"] = Arg(rng.uniform(0.1, 2, size=(c,)), dt if dt != "bfloat16" else "float32")
    if rng.random() < 0.4:  # class probabilities
        p = rng.random(x.a.shape)
        t = Arg(p / p.sum(axis=0 if form == 3 else 1, keepdims=True), x.dtype)
    else:
        tshape = () if form == 3 else (n,) + extra
        cls = rng.integers(0, c, size=tshape)
        if rng.random() < 0.3:
            kw["ignore_index"] = int(cls.flat[0]) if cls.size else -100
        if rng.random() < 0.03:
            cls = cls + c  # a class out of range: an error
        t = Arg(cls.astype(np.int64), "int64")
    return [x, t], kw


add(
    "F.cross_entropy",
    lambda L, x, t, **kw: F(L).cross_entropy(
        x, t, **{k: (v.to(x.dtype) if k == "weight" else v) for k, v in kw.items()}
    ),
    _ce_gen,
    tol=LOSS_TOL,
    n_terms=_loss_terms,
)


def _nll_gen(rng, i):
    args, kw = _ce_gen(rng, i)
    kw.pop("label_smoothing", None)
    if args[1].dtype != "int64":
        c = args[0].a.shape[0 if args[0].a.ndim == 1 else 1]
        tshape = () if args[0].a.ndim == 1 else (args[0].a.shape[0],) + args[0].a.shape[2:]
        args[1] = Arg(rng.integers(0, c, size=tshape).astype(np.int64), "int64")
    return args, kw


add(
    "F.nll_loss",
    lambda L, x, t, **kw: F(L).nll_loss(
        F(L).log_softmax(x, 0 if x.dim() == 1 else 1),
        t,
        **{k: (v.to(x.dtype) if k == "weight" else v) for k, v in kw.items()},
    ),
    _nll_gen,
    tol=LOSS_TOL,
    n_terms=_loss_terms,
)


def _bce_w_gen(rng, i):
    (x, t), kw = _pair_loss_gen(Dom(-5, 5, specials=0), Dom(0, 1, specials=0), bshape=False)(rng, i)
    s = x.a.shape
    if s and i % 2:
        kw["pos_weight"] = Arg(rng.uniform(0.5, 2, size=s[-1:]), x.dtype)
    if i % 3 == 0:
        kw["weight"] = Arg(rng.uniform(0.5, 2, size=broadcast_partner(rng, s, bad=0)), x.dtype)
    return [x, t], kw


add(
    "F.bce_with_logits(weights)",
    lambda L, x, t, **kw: F(L).binary_cross_entropy_with_logits(x, t, **kw),
    _bce_w_gen,
    tol=LOSS_TOL,
    n_terms=_loss_terms,
)


def _triple_gen(rng, i):
    n, d = int(rng.choice((1, 2, 5))), int(rng.choice((1, 3, 7)))
    dt = pick(rng, ("float32", "float64", "float16"))
    return [arg(rng, (n, d), dt, Dom(-2, 2, specials=0)) for _ in range(3)], {
        "reduction": REDUCTIONS[i % 3]
    }


add(
    "F.triplet_margin_loss",
    lambda L, a, p, n, **kw: F(L).triplet_margin_loss(a, p, n, margin=0.5, p=2, **kw),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)
add(
    "F.margin_ranking_loss",
    lambda L, a, p, n, **kw: F(L).margin_ranking_loss(
        a[:, 0], p[:, 0], _signs(L, n[:, 0]), margin=0.2, **kw
    ),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)
add(
    "F.cosine_embedding_loss",
    lambda L, a, p, n, **kw: F(L).cosine_embedding_loss(a, p, _signs(L, n[:, 0]), margin=0.1, **kw),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)
add(
    "F.gaussian_nll_loss",
    lambda L, a, p, n, **kw: F(L).gaussian_nll_loss(a, p, n.abs() + 0.1, full=True, **kw),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)
add(
    "F.pairwise_distance",
    lambda L, a, p, n, **kw: F(L).pairwise_distance(
        a, p, p=pick_p(kw), keepdim=kw["reduction"] == "sum"
    ),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.shape[-1],
)
add(
    "F.cosine_similarity",
    lambda L, a, p, n, **kw: F(L).cosine_similarity(
        a, p, dim=-1 if kw["reduction"] != "sum" else 0
    ),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)
add(
    "F.multi_margin_loss",
    lambda L, a, p, n, **kw: F(L).multi_margin_loss(
        a, (p[:, 0].abs() * 10).long() % a.shape[1], **kw
    ),
    _triple_gen,
    tol=LOSS_TOL,
    n_terms=lambda a, k: a[0].a.size,
)


def pick_p(kw):
    return {"mean": 2.0, "sum": 1.0, "none": 3.0}[kw["reduction"]]


# ---- nn.functional: normalisation -------------------------------------------------------------
NORM_TOL = Tol(ulps=64, atol=2.0**-16, sum_terms=True)
NORM_DTYPES = ("float32", "float32", "float16", "bfloat16", "float64")


def _ln_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)), zero=0.02)
    dt = NORM_DTYPES[i % 5]
    k = int(rng.integers(1, len(s) + 1))
    ns = s[len(s) - k :]
    if rng.random() < 0.03:
        ns = ns[:-1] + (ns[-1] + 1,)
    kw = {"eps": pick(rng, (1e-5, 1e-3))}
    args = [arg(rng, s, dt, Dom(-3, 3, specials=0.0)), tuple(ns)]
    if i % 2:
        args += [
            arg(rng, ns, dt, Dom(0.5, 2, specials=0)),
            arg(rng, ns, dt, Dom(-1, 1, specials=0)),
        ]
    return args, kw


add(
    "F.layer_norm",
    lambda L, x, ns, w=None, b=None, **kw: F(L).layer_norm(x, ns, w, b, **kw),
    _ln_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: math.prod(a[1]) if a[1] else 1,
)
add(
    "F.rms_norm",
    lambda L, x, ns, w=None, b=None, **kw: F(L).rms_norm(x, ns, w, **kw),
    _ln_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: math.prod(a[1]) if a[1] else 1,
)


def _gn_gen(rng, i):
    n = int(rng.choice((1, 2, 3)))
    g = int(rng.choice((1, 2, 3)))
    c = g * int(rng.choice((1, 2))) + (1 if rng.random() < 0.04 else 0)
    sp = shape(rng, max_ndim=2, max_numel=40, zero=0)
    dt = NORM_DTYPES[i % 5]
    args = [arg(rng, (n, c) + sp, dt, Dom(-3, 3, specials=0)), g]
    if i % 2:
        args += [
            arg(rng, (c,), dt, Dom(0.5, 2, specials=0)),
            arg(rng, (c,), dt, Dom(-1, 1, specials=0)),
        ]
    return args, {}


add(
    "F.group_norm",
    lambda L, x, g, w=None, b=None: F(L).group_norm(x, g, w, b),
    _gn_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: a[0].a.size,
)


def _bn_gen(rng, i):
    n = int(rng.choice((1, 2, 3, 5)))
    c = int(rng.choice((1, 2, 3)))
    sp = shape(rng, max_ndim=2, max_numel=30, zero=0)
    dt = ("float32", "float32", "float64", "float16")[i % 4]
    x = arg(rng, (n, c) + sp, dt, Dom(-3, 3, specials=0))
    rm = arg(rng, (c,), "float32" if dt == "float16" else dt, Dom(-1, 1, specials=0), lay=False)
    rv = arg(rng, (c,), "float32" if dt == "float16" else dt, Dom(0.5, 2, specials=0), lay=False)
    w = arg(rng, (c,), "float32" if dt == "float16" else dt, Dom(0.5, 2, specials=0), lay=False)
    b = arg(rng, (c,), "float32" if dt == "float16" else dt, Dom(-1, 1, specials=0), lay=False)
    return [x, rm, rv, w, b], {
        "training": bool(i % 2),
        "momentum": pick(rng, (0.1, 0.5, None)),
        "eps": 1e-5,
    }


def _batch_norm(L, x, rm, rv, w, b, **kw):
    rm, rv = rm.clone(), rv.clone()
    y = F(L).batch_norm(x, rm, rv, w, b, **kw)
    return y, rm, rv  # running statistics updated in place in training


add("F.batch_norm", _batch_norm, _bn_gen, tol=NORM_TOL, n_terms=lambda a, k: a[0].a.size)
add(
    "F.instance_norm",
    lambda L, x, rm, rv, w, b, **kw: F(L).instance_norm(x, None, None, w, b, eps=1e-5),
    _bn_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: a[0].a.size,
)


def _lrn_gen(rng, i):
    n, c = int(rng.choice((1, 2))), int(rng.choice((1, 3, 5, 7)))
    sp = shape(rng, max_ndim=2, max_numel=30, zero=0)
    return [arg(rng, (n, c) + sp, pick(rng, ("float32", "float64")), Dom(-3, 3, specials=0))], {
        "size": int(rng.integers(1, 6)),
        "alpha": 1e-2,
        "beta": 0.75,
        "k": 1.0,
    }


add(
    "F.local_response_norm",
    lambda L, x, **kw: F(L).local_response_norm(x, **kw),
    _lrn_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: 8,
)


def _normalize_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)), zero=0.02)
    return [arg(rng, s, NORM_DTYPES[i % 5], Dom(-3, 3, specials=0))], {
        "p": pick(rng, (2.0, 1.0, 3.0, float("inf"))),
        "dim": int(rng.integers(-len(s), len(s))),
        "eps": 1e-12,
    }


add(
    "F.normalize",
    lambda L, x, **kw: F(L).normalize(x, **kw),
    _normalize_gen,
    tol=NORM_TOL,
    n_terms=lambda a, k: a[0].a.shape[k["dim"]],
)


# ---- nn.functional: convolution and pooling ------------------------------------------------------
CONV_DTYPES = ("float32", "float32", "float16", "bfloat16", "float64")


def _conv_scale(inputs, want):
    m = [float(np.abs(a).max(initial=0.0)) for a in inputs[:2]] + [1.0, 1.0]
    return max(1.0, m[0] * m[1])


CONV_TOL = Tol(ulps=16, atol=2.0**-18, sum_terms=True, scale=_conv_scale)


def _conv_gen(nd, transpose=False):
    def gen(rng, i):
        dt = CONV_DTYPES[i % 5]
        groups = int(rng.choice((1, 1, 2, 3)))
        cin = groups * int(rng.choice((1, 2)))
        cout = groups * int(rng.choice((1, 2)))
        n = int(rng.choice((1, 2)))
        k = tuple(int(rng.choice((1, 2, 3))) for _ in range(nd))
        sp = tuple(int(rng.choice((1, 3, 5, 7, 8))) for _ in range(nd))
        stride = tuple(int(rng.choice((1, 1, 2, 3))) for _ in range(nd))
        dil = tuple(int(rng.choice((1, 1, 2))) for _ in range(nd))
        pad = tuple(int(rng.integers(0, 2)) for _ in range(nd))
        unbatched = rng.random() < 0.1
        xs = ((cin,) if unbatched else (n, cin)) + sp
        if transpose:
            w = arg(rng, (cin, cout // groups) + k, dt, Dom(-1, 1, specials=0), lay=False)
            opad = tuple(int(rng.integers(0, max(s, d))) for s, d in zip(stride, dil))
            kw = {
                "stride": stride,
                "padding": pad,
                "output_padding": opad,
                "groups": groups,
                "dilation": dil,
            }
        else:
            w = arg(rng, (cout, cin // groups) + k, dt, Dom(-1, 1, specials=0), lay=False)
            padding = pad if rng.random() < 0.7 else pick(rng, ("same", "valid"))
            if padding == "same":
                stride = 1
            kw = {"stride": stride, "padding": padding, "dilation": dil, "groups": groups}
        b = arg(rng, (cout,), dt, Dom(-1, 1, specials=0), lay=False) if i % 2 else None
        return [arg(rng, xs, dt, Dom(-2, 2, specials=0)), w, b], kw

    return gen


def _conv_terms(args, kwargs):
    w = args[1].a
    return max(
        1,
        int(np.prod(w.shape[1:])) * (w.shape[0] if kwargs.get("output_padding") is not None else 1),
    )


def _conv_allow(args, kwargs, t_exc, p_exc, mismatch):
    if p_exc is not None and t_exc is None and "Output size is too small" in str(p_exc):
        # a zero output size: torch raises on some paths (float16, float64, groups=1) and
        # returns an empty tensor on others (bfloat16, grouped); pyrite always raises
        return "torch's conv_transpose checks a zero output size on some paths only"
    return None


for _nd in (1, 2, 3):
    add(
        f"F.conv{_nd}d",
        lambda L, x, w, b, _nd=_nd, **kw: getattr(F(L), f"conv{_nd}d")(x, w, b, **kw),
        _conv_gen(_nd),
        tol=CONV_TOL,
        n_terms=_conv_terms,
    )
    add(
        f"F.conv_transpose{_nd}d",
        lambda L, x, w, b, _nd=_nd, **kw: getattr(F(L), f"conv_transpose{_nd}d")(x, w, b, **kw),
        _conv_gen(_nd, True),
        tol=CONV_TOL,
        n_terms=_conv_terms,
        allow=_conv_allow,
    )


def _pool_gen(nd, kind):
    def gen(rng, i):
        dt = (
            ("float32", "float32", "float16", "bfloat16", "float64", "int64")[i % 6]
            if kind == "max"
            else CONV_DTYPES[i % 5]
        )
        c = int(rng.choice((1, 2, 3)))
        n = int(rng.choice((1, 2)))
        sp = tuple(int(rng.choice((1, 2, 3, 5, 7, 8))) for _ in range(nd))
        k = tuple(int(rng.choice((1, 2, 3))) for _ in range(nd))
        stride = (
            tuple(int(rng.choice((1, 2, 3))) for _ in range(nd)) if rng.random() < 0.7 else None
        )
        pad = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
        if rng.random() < 0.03:
            pad = tuple(kk for kk in k)  # more than half the window: an error
        xs = ((c,) if rng.random() < 0.1 else (n, c)) + sp
        kw = {"kernel_size": k, "stride": stride, "padding": pad, "ceil_mode": bool(i % 2)}
        if kind == "max":
            kw["dilation"] = tuple(int(rng.choice((1, 1, 2))) for _ in range(nd))
            kw["return_indices"] = bool((i // 2) % 2)
        else:
            kw["count_include_pad"] = bool((i // 2) % 2)
            if nd > 1 and i % 5 == 0:
                kw["divisor_override"] = int(rng.integers(1, 5))
        return [arg(rng, xs, dt, Dom(-3, 3, specials=0.02, ilo=-9, ihi=9))], kw

    return gen


def _pool_allow(args, kwargs, t_exc, p_exc, mismatch):
    if t_exc is not None and p_exc is None and "not implemented for 'Long'" in str(t_exc):
        return "pyrite's max pools take integer tensors (torch CPU has no kernel for them)"
    if mismatch and args[0].dtype == "int64" and "-9223372036854775808" in mismatch:
        return "a window wholly in the padding holds int64's minimum in torch, int32's here"
    return None


for _nd in (1, 2, 3):
    add(
        f"F.max_pool{_nd}d",
        lambda L, x, _nd=_nd, **kw: getattr(F(L), f"max_pool{_nd}d")(x, **kw),
        _pool_gen(_nd, "max"),
        tol=EXACT,
        allow=_pool_allow,
    )
    add(
        f"F.avg_pool{_nd}d",
        lambda L, x, _nd=_nd, **kw: getattr(F(L), f"avg_pool{_nd}d")(x, **kw),
        _pool_gen(_nd, "avg"),
        tol=Tol(ulps=16, sum_terms=True),
        n_terms=lambda a, k: math.prod(k["kernel_size"]),
    )


def _adaptive_gen(nd):
    def gen(rng, i):
        dt = CONV_DTYPES[i % 5]
        c = int(rng.choice((1, 2, 3)))
        sp = tuple(int(rng.choice((1, 2, 3, 5, 7, 8, 13))) for _ in range(nd))
        out = tuple(
            int(rng.choice((1, 2, 3, 4, 5))) if rng.random() > 0.1 else None for _ in range(nd)
        )
        xs = ((c,) if rng.random() < 0.1 else (2, c)) + sp
        return [arg(rng, xs, dt, Dom(-3, 3, specials=0.01)), out if nd > 1 else out[0] or 1], {}

    return gen


for _nd in (1, 2, 3):
    add(
        f"F.adaptive_avg_pool{_nd}d",
        lambda L, x, o, _nd=_nd: getattr(F(L), f"adaptive_avg_pool{_nd}d")(x, o),
        _adaptive_gen(_nd),
        tol=Tol(ulps=16, sum_terms=True),
        n_terms=lambda a, k: 64,
    )
    add(
        f"F.adaptive_max_pool{_nd}d",
        lambda L, x, o, _nd=_nd: getattr(F(L), f"adaptive_max_pool{_nd}d")(
            x, o, return_indices=True
        ),
        _adaptive_gen(_nd),
        tol=EXACT,
    )


def _lp_gen(rng, i):
    (x,), kw = _pool_gen(2, "avg")(rng, i)
    return [Arg(np.abs(x.a), x.dtype, x.layout)], {
        "norm_type": pick(rng, (1.0, 2.0, 3.0)),
        "kernel_size": kw["kernel_size"],
        "stride": kw["stride"],
        "ceil_mode": kw["ceil_mode"],
    }


add(
    "F.lp_pool2d",
    lambda L, x, **kw: F(L).lp_pool2d(x, **kw),
    _lp_gen,
    tol=Tol(ulps=64, atol=2.0**-16, sum_terms=True),
    n_terms=lambda a, k: 9,
)


# ---- nn.functional: resampling, padding and the rest ------------------------------------------
def _interp_gen(rng, i):
    modes = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    mode = modes[i % len(modes)]
    nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(
        mode, int(rng.integers(1, 4))
    )
    if rng.random() < 0.03:
        nd = nd % 3 + 1  # the wrong rank for the mode: an error
    dt = CONV_DTYPES[(i // 7) % 5]
    sp = tuple(int(rng.choice((1, 2, 3, 5, 7))) for _ in range(nd))
    x = arg(
        rng, (int(rng.choice((1, 2))), int(rng.choice((1, 3)))) + sp, dt, Dom(-2, 2, specials=0)
    )
    kw = {"mode": mode}
    if rng.random() < 0.5:
        kw["size"] = tuple(int(rng.choice((1, 2, 4, 6, 9))) for _ in range(nd))
    else:
        kw["scale_factor"] = pick(rng, (2, 0.5, 1.5, 3, (2.0,) * nd, 0.7))
        if rng.random() < 0.3:
            kw["recompute_scale_factor"] = True
    if mode in ("linear", "bilinear", "bicubic", "trilinear") and rng.random() < 0.5:
        kw["align_corners"] = bool(rng.random() < 0.5)
    return [x], kw


add(
    "F.interpolate",
    lambda L, x, **kw: F(L).interpolate(x, **kw),
    _interp_gen,
    tol=Tol(ulps=64, atol=2.0**-16, sum_terms=True),
    n_terms=lambda a, k: 16,
)


def _pad_gen(rng, i):
    mode = ("constant", "reflect", "replicate", "circular")[i % 4]
    nd = int(rng.integers(1, 4))
    s = (int(rng.choice((1, 2))),) * (1 + int(rng.integers(0, 2))) + tuple(
        int(rng.choice((1, 2, 3, 5, 7))) for _ in range(nd)
    )
    if mode == "constant":
        pads = tuple(int(rng.integers(-1, 3)) for _ in range(2 * int(rng.integers(1, len(s) + 1))))
        return [arg(rng, s, pick(rng, DTYPES), Dom(-2, 2))], {
            "pad": pads,
            "mode": mode,
            "value": pick(rng, (0.0, 1.5, -2)),
        }
    k = int(rng.integers(1, nd + 1))
    pads = tuple(int(rng.integers(0, 4)) for _ in range(2 * k))
    return [arg(rng, s, pick(rng, FLOATS), Dom(-2, 2))], {"pad": pads, "mode": mode}


def _pad_allow(args, kwargs, t_exc, p_exc, mismatch):
    if isinstance(t_exc, NotImplementedError) and "is not supported for" in str(t_exc):
        return "pyrite's reflect/replicate/circular pad any number of trailing dims (torch: 1-3 by rank)"
    return None


add("F.pad", lambda L, x, **kw: F(L).pad(x, **kw), _pad_gen, tol=EXACT, allow=_pad_allow)


def _embedding_gen(rng, i):
    v, d = int(rng.choice((1, 3, 7, 13))), int(rng.choice((1, 2, 5)))
    idx = rng.integers(
        0, v + (2 if rng.random() < 0.03 else 0), size=shape(rng, max_ndim=2, zero=0.02)
    )
    kw = {}
    if i % 3 == 1:
        kw["padding_idx"] = int(rng.integers(-v, v))
    if i % 4 == 2:
        kw["max_norm"] = pick(rng, (1.0, 0.5))
    return [
        Arg(idx.astype(np.int64), pick(rng, ("int64", "int32"))),
        arg(rng, (v, d), pick(rng, FLOATS), Dom(-2, 2, specials=0), lay=False),
    ], kw


def _embedding(L, idx, w, **kw):
    w = w.clone()
    return F(L).embedding(idx, w, **kw), w  # max_norm renormalises the weight rows in place


add("F.embedding", _embedding, _embedding_gen, tol=Tol(ulps=16, atol=2.0**-18))


def _one_hot_gen(rng, i):
    x = rng.integers(0, 5, size=shape(rng, max_ndim=3, zero=0.02))
    nc = pick(rng, (-1, 5, 7, 3))
    return [Arg(x.astype(np.int64), "int64")], {"num_classes": nc}


add("F.one_hot", lambda L, x, **kw: F(L).one_hot(x, **kw), _one_hot_gen, tol=EXACT)


def _linear_gen(rng, i):
    dt = CONV_DTYPES[i % 5]
    k, n = int(rng.choice((1, 3, 7, 16))), int(rng.choice((1, 2, 5)))
    x = arg(
        rng,
        shape(rng, max_ndim=2, zero=0.02) + (k if rng.random() > 0.03 else k + 1,),
        dt,
        Dom(-2, 2, specials=0),
    )
    return [
        x,
        arg(rng, (n, k), dt, Dom(-1, 1, specials=0)),
        arg(rng, (n,), dt, Dom(-1, 1, specials=0)) if i % 2 else None,
    ], {}


add(
    "F.linear",
    lambda L, x, w, b: F(L).linear(x, w, b),
    _linear_gen,
    tol=CONV_TOL,
    n_terms=lambda a, k: a[1].a.shape[1],
)


def _bilinear_gen(rng, i):
    n, a, b, o = (int(rng.choice((1, 2, 3))) for _ in range(4))
    return [
        arg(rng, (n, a), "float32", Dom(-1, 1, specials=0)),
        arg(rng, (n, b), "float32", Dom(-1, 1, specials=0)),
        arg(rng, (o, a, b), "float32", Dom(-1, 1, specials=0)),
        arg(rng, (o,), "float32", Dom(-1, 1, specials=0)),
    ], {}


add(
    "F.bilinear",
    lambda L, x1, x2, w, b: F(L).bilinear(x1, x2, w, b),
    _bilinear_gen,
    tol=CONV_TOL,
    n_terms=lambda a, k: 9,
)


def _shuffle_gen(rng, i):
    r = int(rng.choice((1, 2, 3)))
    c = int(rng.choice((1, 2))) * (r * r if i % 2 == 0 else 1)
    h, w = (
        int(rng.choice((1, 2, 3))) * (r if i % 2 else 1),
        int(rng.choice((1, 2))) * (r if i % 2 else 1),
    )
    return [arg(rng, (int(rng.choice((1, 2))), c, h, w), pick(rng, DTYPES)), r], {}


add("F.pixel_shuffle", lambda L, x, r: F(L).pixel_shuffle(x, r), _shuffle_gen, tol=EXACT)
add("F.pixel_unshuffle", lambda L, x, r: F(L).pixel_unshuffle(x, r), _shuffle_gen, tol=EXACT)


def _unfold_gen(rng, i):
    n, c = int(rng.choice((1, 2))), int(rng.choice((1, 3)))
    h, w = int(rng.choice((2, 3, 5, 7))), int(rng.choice((2, 3, 5)))
    kw = {
        "kernel_size": (int(rng.integers(1, 3)), int(rng.integers(1, 3))),
        "dilation": int(rng.integers(1, 3)),
        "padding": int(rng.integers(0, 2)),
        "stride": int(rng.integers(1, 3)),
    }
    return [arg(rng, (n, c, h, w), pick(rng, FLOATS), Dom(-2, 2, specials=0))], kw


add("F.unfold", lambda L, x, **kw: F(L).unfold(x, **kw), _unfold_gen, tol=EXACT)
add(
    "F.fold(unfold)",
    lambda L, x, **kw: F(L).fold(F(L).unfold(x, **kw), x.shape[-2:], **kw),
    _unfold_gen,
    tol=Tol(ulps=16, sum_terms=True),
    n_terms=lambda a, k: 4,
)


def _sdpa_gen(rng, i):
    b, h, lq, lk, d = (int(rng.choice((1, 2, 3, 5))) for _ in range(5))
    dt = ("float32", "float32", "float16", "bfloat16", "float64")[i % 5]
    q = arg(rng, (b, h, lq, d), dt, Dom(-2, 2, specials=0))
    k = arg(rng, (b, h, lk, d), dt, Dom(-2, 2, specials=0))
    v = arg(rng, (b, h, lk, d), dt, Dom(-2, 2, specials=0))
    kw = {}
    form = (i // 5) % 4
    if form == 1:
        kw["is_causal"] = True
    elif form == 2:
        kw["attn_mask"] = Arg(rng.random((lq, lk)) < 0.8, "bool")
    elif form == 3:
        kw["attn_mask"] = arg(rng, (lq, lk), dt, Dom(-1, 0, specials=0))
    if i % 7 == 0:
        kw["scale"] = 0.3
    return [q, k, v], kw


# scores, weights and output each stored in a float16/bfloat16 result: the weights' rounding
# grows by |score| through exp (u·|s|·max|v| per key), hence u_out=16
add(
    "F.scaled_dot_product_attention",
    lambda L, q, k, v, **kw: F(L).scaled_dot_product_attention(q, k, v, **kw),
    _sdpa_gen,
    tol=Tol(ulps=64, atol=2.0**-14, sum_terms=True, u_out=16),
    n_terms=lambda a, k: 16,
)


def _dropout_gen(rng, i):
    return [arg(rng, shape(rng), pick(rng, FLOATS))], {
        "p": pick(rng, (0.0, 1.0, 0.5)),
        "training": bool(i % 2),
    }


add(
    "F.dropout(identity cases)",
    lambda L, x, **kw: (
        F(L).dropout(x, **kw)
        if kw["p"] in (0.0, 1.0) or not kw["training"]
        else (F(L).dropout(x, **kw) != 0).shape
    ),
    _dropout_gen,
    tol=EXACT,
)


# ---- creation ---------------------------------------------------------------------------------
def _arange_gen(rng, i):
    start = pick(rng, (0, 1, -3, 0.5, 2.5, -1.25))
    end = pick(rng, (5, 10, -2, 3.7, 0, 17))
    step = pick(rng, (1, 2, -1, 0.5, -0.75, 3, 0))
    kw = {}
    if i % 3 == 1:
        kw["dtype"] = Dt(
            pick(rng, ("float32", "int64", "float16", "int32", "uint8", "bfloat16", "float64"))
        )
    form = i % 3
    args = [end] if form == 0 else ([start, end] if form == 1 else [start, end, step])
    return args, kw


add("arange", lambda L, *a, **kw: L.arange(*a, **kw), _arange_gen, tol=Tol(ulps=8, atol=2.0**-20))


def _linspace_gen(rng, i):
    start, end = pick(rng, (0, -1.5, 3, 10)), pick(rng, (1, 7.25, -4, 0))
    steps = pick(rng, (0, 1, 2, 5, 17, -1))
    kw = {}
    if i % 3 == 1:
        kw["dtype"] = Dt(pick(rng, ("float32", "int64", "float16", "bfloat16")))
    return [start, end, steps], kw


add(
    "linspace",
    lambda L, *a, **kw: L.linspace(*a, **kw),
    _linspace_gen,
    tol=Tol(ulps=8, atol=2.0**-18),
)
add(
    "logspace",
    lambda L, *a, **kw: L.logspace(*a, base=2.0, **kw),
    _linspace_gen,
    tol=Tol(ulps=32, atol=2.0**-18),
)


def _full_gen(rng, i):
    s = shape(rng, max_ndim=3)
    v = pick(rng, (0, 1, -1, 2.5, True, 300, -129, float("inf"), float("nan")))
    kw = {}
    if i % 2:
        kw["dtype"] = Dt(DTYPES[(i // 2) % len(DTYPES)])
    return [s, v], kw


add("full", lambda L, s, v, **kw: L.full(s, v, **kw), _full_gen, tol=EXACT)
add(
    "zeros/ones/empty.shape",
    lambda L, s, v, **kw: (
        L.zeros(s, **kw),
        L.ones(*s, **kw) if s else L.ones((), **kw),
        L.empty(s, **kw).shape,
        L.zeros_like(L.ones(s), **kw),
        L.full_like(L.ones(s, dtype=L.int32), 3, **kw),
    ),
    _full_gen,
    tol=EXACT,
)


def _eye_gen(rng, i):
    n, m = int(rng.integers(-1, 6)), int(rng.integers(0, 6))
    kw = {"dtype": Dt(DTYPES[i % len(DTYPES)])} if i % 2 else {}
    return ([n] if i % 3 == 0 else [n, m]), kw


add("eye", lambda L, *a, **kw: L.eye(*a, **kw), _eye_gen, tol=EXACT)


def _tri_idx_gen(rng, i):
    return [int(rng.integers(0, 6)), int(rng.integers(0, 6)), int(rng.integers(-3, 4))], {}


add("tril_indices", lambda L, r, c, o: L.tril_indices(r, c, o), _tri_idx_gen, tol=EXACT)
add("triu_indices", lambda L, r, c, o: L.triu_indices(r, c, o), _tri_idx_gen, tol=EXACT)


# ---- misc tensor functions ----------------------------------------------------------------------
def _diff_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)))
    d = int(rng.integers(-len(s), len(s)))
    kw = {"n": int(rng.integers(0, 3)), "dim": d}
    if i % 3 == 1:
        ps = list(s)
        ps[d] = int(rng.integers(1, 3))
        kw["prepend"] = arg(rng, tuple(ps), DTYPES[i % len(DTYPES)])
    return [arg(rng, s, DTYPES[i % len(DTYPES)])], kw


add("diff", lambda L, x, **kw: L.diff(x, **kw), _diff_gen, tol=Tol(ulps=8, atol=2.0**-20))


def _square_gen(rng, i):
    s = (int(rng.integers(0, 6)), int(rng.integers(0, 6)))
    return [arg(rng, s, DTYPES[i % len(DTYPES)], Dom(-2, 2, specials=0))], {}


add("trace", lambda L, x: L.trace(x), _square_gen, tol=SUMT, n_terms=lambda a, k: 8)
add("block_diag", lambda L, x: L.block_diag(x, x[:1]), _square_gen, tol=EXACT)
add("isin", lambda L, x: L.isin(x, x.flatten()[:3]), _square_gen, tol=EXACT)
add(
    "cov",
    lambda L, x: L.cov(x),
    _square_gen,
    tol=Tol(ulps=64, atol=2.0**-16, sum_terms=True),
    n_terms=lambda a, k: 8,
)
add(
    "corrcoef",
    lambda L, x: L.corrcoef(x),
    _square_gen,
    tol=Tol(ulps=64, atol=2.0**-14, sum_terms=True),
    n_terms=lambda a, k: 8,
)
add(
    "vander",
    lambda L, x: L.vander(x.flatten()[:4], N=3),
    _square_gen,
    tol=Tol(ulps=8, atol=2.0**-20),
)
add(
    "cartesian_prod",
    lambda L, x: L.cartesian_prod(x.flatten()[:3], x.flatten()[:2]),
    _square_gen,
    tol=EXACT,
)
add("combinations", lambda L, x: L.combinations(x.flatten()[:4], r=2), _square_gen, tol=EXACT)
add("atleast_3d", lambda L, x: L.atleast_3d(x), _square_gen, tol=EXACT)
add("count_nonzero(dims)", lambda L, x: L.count_nonzero(x, dim=(0, 1)), _square_gen, tol=EXACT)
add("renorm", lambda L, x: L.renorm(x, 2, 0, 1.0), _square_gen, tol=Tol(ulps=32, atol=2.0**-18))


def _trapezoid_allow(args, kwargs, t_exc, p_exc, mismatch):
    if mismatch and "dtype" in mismatch and args[0].a.size == 0:
        return "torch's trapezoid of an empty integer tensor keeps the integer dtype (its non-empty result is float)"
    return None


add(
    "trapezoid",
    lambda L, x: L.trapezoid(x),
    _square_gen,
    tol=SUMT,
    n_terms=lambda a, k: 8,
    allow=_trapezoid_allow,
)
add(
    "cumulative_trapezoid",
    lambda L, x: L.cumulative_trapezoid(x),
    _square_gen,
    tol=SUMT,
    n_terms=lambda a, k: 8,
)
add(
    "histogram",
    lambda L, x: L.histogram(x.float().flatten(), bins=4),
    _square_gen,
    tol=Tol(ulps=8, atol=2.0**-18),
)


# ---- more nn.functional: ctc, grid sampling, unpooling ------------------------------------------
def _ctc_gen(rng, i):
    t, n, c = int(rng.choice((1, 3, 6, 9))), int(rng.choice((1, 2, 3))), int(rng.choice((2, 3, 5)))
    logits = rng.standard_normal((t, n, c))
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    s = int(rng.integers(0, max(1, t // 2) + 1))
    targets = rng.integers(1, c, size=(n, s))
    in_len = rng.integers(max(1, s), t + 1, size=(n,)) if t >= max(1, s) else np.full((n,), t)
    tg_len = rng.integers(0, s + 1, size=(n,))
    kw = {"reduction": REDUCTIONS[i % 3], "zero_infinity": bool((i // 3) % 2), "blank": 0}
    dt = pick(rng, ("float32", "float64"))
    return [
        Arg(lp, dt),
        Arg(targets.astype(np.int64), "int64"),
        Arg(in_len.astype(np.int64), "int64"),
        Arg(tg_len.astype(np.int64), "int64"),
    ], kw


add(
    "F.ctc_loss",
    lambda L, lp, tg, il, tl, **kw: F(L).ctc_loss(lp, tg, il, tl, **kw),
    _ctc_gen,
    tol=Tol(ulps=256, atol=2.0**-14, sum_terms=True),
    n_terms=lambda a, k: 16,
)


def _grid_gen(rng, i):
    nd = 2 if i % 3 else 3
    n, c = int(rng.choice((1, 2))), int(rng.choice((1, 3)))
    sp = tuple(int(rng.choice((1, 2, 4, 5))) for _ in range(nd))
    out = tuple(int(rng.choice((1, 2, 3))) for _ in range(nd))
    x = arg(rng, (n, c) + sp, pick(rng, ("float32", "float64")), Dom(-2, 2, specials=0))
    grid = Arg(rng.uniform(-1.2, 1.2, size=(n,) + out + (nd,)), "float32")
    modes = ("bilinear", "nearest", "bicubic") if nd == 2 else ("bilinear", "nearest")
    kw = {
        "mode": modes[i % len(modes)],
        "padding_mode": ("zeros", "border", "reflection")[(i // 3) % 3],
        "align_corners": bool((i // 9) % 2),
    }
    return [x, grid], kw


add(
    "F.grid_sample",
    lambda L, x, g, **kw: F(L).grid_sample(x, g.to(x.dtype), **kw),
    _grid_gen,
    tol=Tol(ulps=256, atol=2.0**-14, sum_terms=True),
    n_terms=lambda a, k: 16,
)


def _affine_gen(rng, i):
    nd = 2 if i % 2 else 3
    n = int(rng.choice((1, 2)))
    theta = Arg(rng.uniform(-1, 1, size=(n, nd, nd + 1)), "float32")
    size = (n, int(rng.choice((1, 3)))) + tuple(int(rng.choice((1, 2, 4))) for _ in range(nd))
    return [theta, size], {"align_corners": bool((i // 2) % 2)}


add(
    "F.affine_grid",
    lambda L, th, s, **kw: F(L).affine_grid(th, s, **kw),
    _affine_gen,
    tol=Tol(ulps=16, atol=2.0**-18, sum_terms=True),
    n_terms=lambda a, k: 4,
)


def _unpool_gen(rng, i):
    n, c = int(rng.choice((1, 2))), int(rng.choice((1, 3)))
    h, w = int(rng.choice((2, 4, 5))), int(rng.choice((2, 4, 6)))
    return [
        arg(rng, (n, c, h, w), pick(rng, ("float32", "float64")), Dom(-2, 2, specials=0)),
        int(rng.choice((2, 3))),
    ], {}


def _unpool(L, x, k):
    y, idx = F(L).max_pool2d(x, k, return_indices=True)
    return F(L).max_unpool2d(y, idx, k, output_size=x.shape[-2:])


add("F.max_unpool2d(max_pool2d)", _unpool, _unpool_gen, tol=EXACT)
add(
    "F.channel_shuffle",
    lambda L, x, k: F(L).channel_shuffle(x.repeat(1, k, 1, 1), k),
    _unpool_gen,
    tol=EXACT,
)


# ---- in-place and accumulation forms --------------------------------------------------------------
def _acc_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)), zero=0.02)
    dt = DTYPES[i % len(DTYPES)]
    x = arg(rng, s, dt, lay=False)
    n = s[0]
    k = int(rng.integers(0, 6))
    idx = rng.integers(0, max(n, 1), size=(k,)) if n else np.zeros((0,), np.int64)
    src = arg(rng, (k,) + s[1:], dt)
    return [x, Arg(idx.astype(np.int64), "int64"), src], {}


add(
    "index_add_",
    lambda L, x, i, s: (lambda y: (y.index_add_(0, i, s, alpha=2) is y, y))(x.clone()),
    _acc_gen,
    tol=Tol(ulps=8, sum_terms=True),
)
add(
    "scatter_add_(1-D index)",
    lambda L, x, i, s: (
        lambda y: y.scatter_add_(
            0,
            i.reshape((-1,) + (1,) * (x.dim() - 1)).expand(i.shape[0], *x.shape[1:])
            if x.dim() > 1
            else i,
            s,
        )
    )(x.clone()),
    _acc_gen,
    tol=Tol(ulps=8, sum_terms=True),
)
add(
    "index_put_(accumulate)",
    lambda L, x, i, s: x.clone().index_put_((i,), s, accumulate=True),
    _acc_gen,
    tol=Tol(ulps=8, sum_terms=True),
)
add(
    "masked_scatter_",
    lambda L, x, i, s: x.clone().masked_scatter_(
        x.clone().bool() if x.dtype != L.bool else x.clone(), L.ones(x.numel(), dtype=x.dtype)
    ),
    _acc_gen,
    tol=EXACT,
)


# ---- keyword and NumPy spellings ------------------------------------------------------------
def _kw_gen(rng, i):
    s = shape(rng, ndim=int(rng.integers(1, 4)), zero=0.02)
    return [arg(rng, s, DTYPES[i % len(DTYPES)]), int(rng.integers(-len(s), len(s)))], {}


KW_FORMS = [
    ("x.sum(dim=, keepdim=)", lambda L, x, d: x.sum(dim=d, keepdim=True)),
    ("x.sum(axis=, keepdims=)", lambda L, x, d: x.sum(axis=d, keepdims=True)),
    ("x.mean(axis=)", lambda L, x, d: x.float().mean(axis=d)),
    ("x.max(dim=)", lambda L, x, d: x.max(dim=d)),
    ("x.argmax(axis=)", lambda L, x, d: x.float().argmax(axis=d)),
    ("x.transpose(dim0=, dim1=)", lambda L, x, d: x.transpose(dim0=d, dim1=0)),
    ("x.flip(dims=)", lambda L, x, d: x.flip(dims=(d,))),
    ("x.permute(dims=)", lambda L, x, d: x.permute(dims=tuple(reversed(range(x.dim()))))),
    ("x.reshape(shape=)", lambda L, x, d: x.reshape(shape=(-1,))),
    ("x.view(-1)", lambda L, x, d: x.contiguous().view(-1)),
    ("x.view(size=)", lambda L, x, d: x.contiguous().view(size=(x.numel(),))),
    ("x.repeat(sizes)", lambda L, x, d: x.repeat((2,) * x.dim())),
    ("x.unsqueeze(dim=)", lambda L, x, d: x.unsqueeze(dim=d)),
    ("x.squeeze(dim=)", lambda L, x, d: x.squeeze(dim=d)),
    ("x.cumsum(dim=)", lambda L, x, d: x.cumsum(dim=d)),
    ("x.softmax(dim=)", lambda L, x, d: x.float().softmax(dim=d)),
    ("x.std(dim=, unbiased=)", lambda L, x, d: x.float().std(dim=d, unbiased=False)),
    ("x.var(d, True)", lambda L, x, d: x.float().var(d, True)),
    ("x.topk(k=, dim=)", lambda L, x, d: x.float().topk(k=min(1, x.shape[d]), dim=d)),
    (
        "x.sort(dim=, descending=)",
        lambda L, x, d: x.float().sort(dim=d, descending=True, stable=True),
    ),
    ("x.split(split_size=, dim=)", lambda L, x, d: x.split(split_size=2, dim=d)),
    ("x.chunk(chunks=, dim=)", lambda L, x, d: x.chunk(chunks=2, dim=d)),
    (
        "x.narrow(dim=, start=, length=)",
        lambda L, x, d: x.narrow(dim=d, start=0, length=min(1, x.shape[d])),
    ),
    (
        "x.index_select(dim=, index=)",
        lambda L, x, d: x.index_select(dim=d, index=L.zeros(1, dtype=L.long)) if x.shape[d] else x,
    ),
    ("x.masked_fill(mask=, value=)", lambda L, x, d: x.masked_fill(mask=x != 0, value=1)),
    ("x.clamp(min=, max=)", lambda L, x, d: x.float().clamp(min=-1, max=1)),
    ("x.to(dtype=)", lambda L, x, d: x.to(dtype=L.float16)),
    ("x.type_as(y)", lambda L, x, d: x.type_as(L.ones(1, dtype=L.int8))),
    (
        "x.new_zeros/new_full",
        lambda L, x, d: (x.new_zeros((2, d + 3)), x.new_full((2,), 3), x.new_ones(3)),
    ),
    (
        "L.zeros_like(dtype=)",
        lambda L, x, d: (
            L.zeros_like(x, dtype=L.float16),
            L.ones_like(x),
            L.full_like(x, 2),
            L.empty_like(x).shape,
        ),
    ),
    ("x.expand(*size)", lambda L, x, d: x.expand(2, *x.shape)),
    ("x.size(dim=)", lambda L, x, d: x.size(dim=d)),
    ("x.stride(dim=)", lambda L, x, d: x.contiguous().stride(dim=d)),
]
for _name, _f in KW_FORMS:
    add(
        _name,
        _f,
        _kw_gen,
        tol=Tol(ulps=32, atol=2.0**-18, sum_terms=True),
        n_terms=lambda a, k: max(1, a[0].a.size),
        check=(lambda t, p, a, k, tol, inp: check_index_ties(t, p, a, {"dim": a[1]}, tol, inp))
        if "topk" in _name
        else None,
    )


def _full_infer_gen(rng, i):
    return [
        pick(rng, ((2,), (3, 1), ())),
        pick(rng, (1, 2.5, True, -7, 0.0, np.float32(1.5), np.int64(3))),
    ], {}


add("full() infers the fill's dtype", lambda L, s, v: L.full(s, v), _full_infer_gen, tol=EXACT)
add(
    "tensor() infers",
    lambda L, s, v: (
        L.tensor(v),
        L.tensor([v, v]),
        L.as_tensor([v]),
        L.scalar_tensor(v) if hasattr(L, "scalar_tensor") else None,
    ),
    _full_infer_gen,
    tol=EXACT,
)


def _rand_gen(rng, i):
    return [pick(rng, ((2, 3), (0,), (5,), ())), i], {}


add(
    "randn/rand/randint shapes and dtypes",
    lambda L, s, i: (
        [
            (t.dtype, t.shape)
            for t in (
                L.randn(s),
                L.rand(*s) if s else L.rand(()),
                L.randint(0, 5, s),
                L.randint(3, s, dtype=L.int8),
                L.randn(s, dtype=L.float16),
                L.randperm(4),
                L.rand_like(L.ones(s)),
                L.randint_like(L.ones(s), 4),
                L.normal(0.0, 1.0, size=s),
            )
        ]
        + [bool((L.randint(2, 7, (50,)) >= 2).all()), bool((L.rand(50) < 1).all())]
    ),
    _rand_gen,
    tol=EXACT,
)
