"""Backward rules of the elementwise engine (ops/elementwise.py `binary` and `unary`).

`binary(name, a, b)` and `unary(name, x)` record here when an operand requires grad, so every
spelling that reaches them — functions, methods, operators, in-place methods, and composites
built on them (addcmul, lerp, hardswish, ...) — gets its gradient from one rule per name. A
rule is `rule(ctx, g)`: `ctx.args` the operands (a Python scalar stays a number), `ctx.out` an
alias of the result; it returns the operands' gradients (None where there is none), written with
pyrite ops so double backward records them too. The engine sums broadcast gradients back to
each operand's shape. Formulas and their conventions at non-differentiable points (relu'(0) = 0,
abs'(0) = 0, maximum's ties split evenly, round/floor/sign give zeros) are PyTorch's
(tools/autograd/derivatives.yaml).
"""

from __future__ import annotations

import math

from .. import autograd
from ..autograd import saves
from ..tensor import Tensor

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


_ew_module = None


def _ew():
    """ops/elementwise, imported on first use (it imports this module lazily too)."""
    global _ew_module
    if _ew_module is None:
        from . import elementwise

        _ew_module = elementwise
    return _ew_module


def _t(x):
    return isinstance(x, Tensor)


def _o(ctx):
    """The op's output for a rule: the saved alias, or — while recording a double backward — a
    tensor of the new graph: for a rule whose PyTorch formula reads the result, the saved
    output tied to this node (torch's saved result: its gradient goes back through this node,
    so a hook or retain_grad on the output sees it, and the inputs may have been written in
    place since); for one whose formula reads the inputs (div, pow: `out` soft, it may have
    been written since), the output recomputed from them."""
    if not autograd.is_grad_enabled():
        return ctx.out
    soft = getattr(ctx.rule, "soft", ())
    if "out" not in soft:  # (the engine checked it unchanged)
        return autograd.output_of(ctx)
    autograd._check_versions(ctx, only=[k for k in soft if k != "out"])
    return _recompute(ctx)


def _recompute(ctx):
    a = ctx.args
    name = _map_name(ctx)
    ew = _ew()
    return ew.unary(name, a[0]) if len(a) == 1 else ew.binary(name, a[0], a[1])


def _map_name(ctx):
    """The map a node ran: an in-place op's node is named `div_` (_record_map), its map `div`."""
    name = ctx.name
    return name[:-1] if name.endswith("_") else name


def _floats(*xs):
    """Integer tensor operands as float32 (a rule's arithmetic on them must not wrap)."""
    return tuple(x.float() if _t(x) and not x.dtype.is_floating_point else x for x in xs)


# ---- binary: rule(ctx, g) -> (grad a, grad b) -----------------------------------------------
@saves()
def _add(ctx, g):
    return g, g


@saves()
def _sub(ctx, g):
    return g, -g


@saves(0, 1)
def _mul(ctx, g):
    a, b = ctx.args
    return (g * b if ctx.needs[0] else None), (g * a if ctx.needs[1] else None)


# mul where one operand needs no gradient: the other operand's value is never read, so it is not
# kept (nor version-checked: `y = x * 2; x.add_(1); y.backward()` works, as in torch, which saves
# self only when other requires grad)
_mul_keep_b = saves(1)(lambda ctx, g: _mul(ctx, g))
_mul_keep_a = saves(0)(lambda ctx, g: _mul(ctx, g))


def _o_or_inputs(ctx):
    """_o, for a rule whose PyTorch formula reads the inputs rather than the output (div, pow,
    and sqrt, which pow(x, 0.5) runs): an output written in place after the forward is
    recomputed from the inputs (checked unchanged) instead of raising, as torch does not raise
    there."""
    if not autograd.is_grad_enabled():
        for key, t, v in ctx.versions:
            if key == "out" and t._storage.version != v:
                autograd._check_versions(ctx, only=frozenset((0, 1)))
                with autograd.no_grad():
                    return _recompute(ctx)
        return ctx.out
    return _o(ctx)


@saves(0, 1, "out")
def _div(ctx, g):  # (a is read only to recompute out: soft)
    _, b = ctx.args
    ga = g / b if ctx.needs[0] else None
    gb = -g * _o_or_inputs(ctx) / b if ctx.needs[1] else None
    return ga, gb


_div.soft = frozenset((0, "out"))


@saves(0, 1, "out")
def _pow(ctx, g):
    from .elementwise import log, where

    a, b = ctx.args
    ga = gb = None
    if ctx.needs[0]:
        # b * a^(b-1); 0 where b == 0 (torch: the exponent-0 term's gradient is 0, also at a = 0)
        ga = g * b * (a ** (b - 1))
        if _t(b):
            ga = where(b == 0, 0.0, ga)
        elif b == 0:
            ga = g * 0.0
    if ctx.needs[1]:
        # out * log(a), 0 where a == 0 and b >= 0 (torch's mask)
        gb = g * _o_or_inputs(ctx) * log(a)
        if _t(a):
            gb = where((a == 0) & (b >= 0), 0.0, gb)
        elif a == 0:  # 0 ** b, a Python zero: the same mask
            gb = where(b >= 0, 0.0, gb)
    return ga, gb


_pow.soft = frozenset(("out",))  # (torch reads the inputs: see _o_or_inputs)


def _minmax(a_loses, b_loses):
    """torch's maximum/minimum rule: ties split g evenly; each operand gets g except where it
    loses (a NaN loses nowhere: both operands get g, as torch)."""

    @saves(0, 1)
    def rule(ctx, g):
        from .elementwise import where

        a, b = ctx.args
        gs = where(a == b, g * 0.5, g)
        ga = where(a_loses(a, b), 0.0, gs) if ctx.needs[0] else None
        gb = where(b_loses(a, b), 0.0, gs) if ctx.needs[1] else None
        return ga, gb

    return rule


def _isnan(x):
    return x.isnan() if isinstance(x, Tensor) else math.isnan(float(x))


def _fminmax(a_wins):
    """torch's fmax/fmin rule: all of g to a where it wins or ties or b is NaN, else to b."""

    @saves(0, 1)
    def rule(ctx, g):
        from .elementwise import where

        a, b = ctx.args
        keep_a = a_wins(a, b) | _isnan(b)
        ga = where(keep_a, g, 0.0) if ctx.needs[0] else None
        gb = where(keep_a, 0.0, g) if ctx.needs[1] else None
        return ga, gb

    return rule


@saves(0, 1)
def _atan2(ctx, g):
    a, b = _floats(*ctx.args)  # an integer operand squared in its own dtype would wrap
    # 1 / (a² + b²), 0 at the origin (torch 2.13 gives 0 there, not 0 · inf = nan)
    from .elementwise import where

    den = a * a + b * b
    recip = where(den == 0, 0.0, 1.0 / den)
    return (g * b * recip if ctx.needs[0] else None), (-g * a * recip if ctx.needs[1] else None)


@saves(0, 1, "out")
def _hypot(ctx, g):
    a, b = ctx.args
    o = _o(ctx)
    return (g * a / o if ctx.needs[0] else None), (g * b / o if ctx.needs[1] else None)


@saves(0, 1)
def _fmod(ctx, g):
    # torch's rule, -g · div(a, b, rounding_mode="trunc"): the rounded quotient as the forward
    # computes it (exact), not trunc of the rounded a / b (off by one near integer quotients)
    from .division import div

    a, b = ctx.args
    return g, (-g * div(a, b, rounding_mode="trunc") if ctx.needs[1] else None)


@saves(0, 1)
def _remainder(ctx, g):
    from .division import div

    a, b = ctx.args
    return g, (-g * div(a, b, rounding_mode="floor") if ctx.needs[1] else None)


# torch's forms, g / (1 + exp(b - a)): exp(a - out) is NaN where a and out are the same
# infinity (logaddexp(inf, 1.5): d/da is 1)
@saves(0, 1)
def _logaddexp(ctx, g):
    from .elementwise import exp

    a, b = ctx.args
    ga = g / (1 + exp(b - a)) if ctx.needs[0] else None
    return ga, (g / (1 + exp(a - b)) if ctx.needs[1] else None)


@saves(0, 1)
def _logaddexp2(ctx, g):
    from .elementwise import exp2

    a, b = ctx.args
    ga = g / (1 + exp2(b - a)) if ctx.needs[0] else None
    return ga, (g / (1 + exp2(a - b)) if ctx.needs[1] else None)


@saves(0, 1, "out")
def _copysign(ctx, g):
    from .creation import zeros_like
    from .elementwise import sign

    a = ctx.args[0]
    # d/da |a|·sign(b) = sign(a)·sign(out) (0 at a = 0, as torch); b gets zeros, as torch's
    ga = g * (sign(a) * sign(ctx.out)) if ctx.needs[0] else None
    return ga, zeros_like(g) if len(ctx.needs) > 1 and ctx.needs[1] else None


@saves()
def _zero_grads(ctx, g):
    """Zero gradients (tensors, as torch's zeros_like(grad), not absent ones)."""
    from .creation import zeros_like

    return tuple(zeros_like(g) if n else None for n in ctx.needs)


@saves()
def _nextafter(ctx, g):
    """torch: self gets grad unchanged, other zeros."""
    from .creation import zeros_like

    return (g if ctx.needs[0] else None), (zeros_like(g) if ctx.needs[1] else None)


BINARY_RULES = {
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "pow": _pow,
    "maximum": _minmax(lambda a, b: a < b, lambda a, b: a > b),
    "minimum": _minmax(lambda a, b: a > b, lambda a, b: a < b),
    "fmax": _fminmax(lambda a, b: a >= b),
    "fmin": _fminmax(lambda a, b: a <= b),
    "atan2": _atan2,
    "hypot": _hypot,
    "fmod": _fmod,
    "remainder": _remainder,
    "logaddexp": _logaddexp,
    "logaddexp2": _logaddexp2,
    # piecewise constant in both operands: zero gradients, as torch
    "div_floor": _zero_grads,
    "div_trunc": _zero_grads,
    "nextafter": _nextafter,
}
BINARY_RULES["copysign"] = _copysign


@saves(0, 1)
def _xlogy(ctx, g):
    """torch: d/dx = xlogy(g, y) (0 where g is, even where log(y) is NaN or inf), 0 where x == 0
    and y <= 0; d/dy = x / y."""
    from .elementwise import where
    from .special import xlogy

    a, b = _floats(*ctx.args)
    ga = gb = None
    if ctx.needs[0]:
        ga = where((a == 0) & (b <= 0), 0.0, xlogy(g, b))
    if ctx.needs[1]:
        gb = g * a / b
    return ga, gb


BINARY_RULES["xlogy"] = _xlogy


@saves(0, 1)
def _xlog1py(ctx, g):
    """torch: d/dx = xlog1py(g, y), 0 where x == 0 and y <= -1; d/dy = x / (1 + y)."""
    from .elementwise import where
    from .special import xlog1py

    a, b = _floats(*ctx.args)
    ga = gb = None
    if ctx.needs[0]:
        ga = where((a == 0) & (b <= -1), 0.0, xlog1py(g, b))
    if ctx.needs[1]:
        gb = g * a / (1.0 + b)
    return ga, gb


BINARY_RULES["xlog1py"] = _xlog1py


# ---- unary: rule(ctx, g) -> grad x ----------------------------------------------------------
@saves(0, "out")
def _sqrt(ctx, g):
    # (pow(x, 0.5) runs as sqrt, and torch's pow reads x: writing the output is allowed)
    return g / (2.0 * _o_or_inputs(ctx))


_sqrt.soft = frozenset((0, "out"))


def _u(fn, *what):
    """A unary rule from fn(g, x, out) (a rule reading out also keeps x, soft: _o ties the saved
    output to the node for a double backward, so x is no longer read there)."""

    @saves(*what, *((0,) if "out" in what else ()))
    def rule(ctx, g):
        return fn(g, ctx.args[0], _o(ctx) if "out" in what else None)

    if "out" in what and 0 not in what:
        rule.soft = frozenset((0,))  # kept for _o's recomputation only
    return rule


# One-kernel first-order gradients of the activations a training step meets: `x0` the incoming
# gradient, `x1` the operand (or the output, for rules reading it). When no double backward is
# being recorded (grad mode off inside the engine) the rule is this one map — the composite
# below it costs 2-9 dispatches (gelu's) for the same value — else the composite, whose ops
# record. Formulas as the composites (PyTorch's), the masks as torch's threshold_backward.
_FUSED = {
    "relu": ("select(x0, 0.0, x1 <= 0.0)", "out"),  # (NaN passes g, as torch's)
    "sigmoid": ("x0 * x1 * (1.0 - x1)", "out"),
    "tanh": ("x0 * (1.0 - x1 * x1)", "out"),
    "gelu": (
        "x0 * (p_gelu_cdf(x1) + x1 * exp(-0.5 * x1 * x1) * 0.3989422804014327)",
        0,
    ),
    "gelu_tanh": (
        "x0 * (0.5 * (1.0 + p_tanh(0.7978845608028654 * (x1 + 0.044715 * x1 * x1 * x1))) "
        "+ 0.5 * x1 * (1.0 - p_tanh(0.7978845608028654 * (x1 + 0.044715 * x1 * x1 * x1)) "
        "* p_tanh(0.7978845608028654 * (x1 + 0.044715 * x1 * x1 * x1))) "
        "* 0.7978845608028654 * (1.0 + 0.134145 * x1 * x1))",
        0,
    ),
    "silu": ("x0 * (p_sigmoid(x1) * (1.0 + x1 * (1.0 - p_sigmoid(x1))))", 0),
}


def _fused_u(name, fn, what):
    expr, _ = _FUSED[name]
    composite = _u(fn, what)

    @saves(what, *((0,) if what == "out" else ()))
    def rule(ctx, g):
        x = ctx.args[0]
        if autograd.is_grad_enabled() or not (
            _t(g) and g.dtype is x.dtype and g._shape == x._shape
        ):
            return composite(ctx, g)
        from .core import empty, run_map

        v = ctx.out if what == "out" else x
        return run_map(expr, (g, v), ("f32", "f32"), empty(x._shape, x.dtype), "f32")

    if what == "out":
        rule.soft = frozenset((0,))
    return rule


def _sign(x):
    from .elementwise import sign

    return sign(x)


def _gelu_erf(g, x, _):
    from .elementwise import erf, exp

    cdf = 0.5 * (1.0 + erf(x * _INV_SQRT_2))
    pdf = exp(-0.5 * x * x) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


def _gelu_tanh(g, x, _):
    from .elementwise import tanh

    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    t = tanh(inner)
    dinner = _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner)


def _silu(g, x, _):
    from .elementwise import sigmoid

    s = sigmoid(x)
    return g * (s * (1.0 + x * (1.0 - s)))


def _mish(g, x, _):
    from .elementwise import exp, log1p, sigmoid, tanh, where

    tsp = tanh(where(x > 20.0, x, log1p(exp(x.clamp(max=20.0)))))
    return g * (tsp + x * sigmoid(x) * (1.0 - tsp * tsp))


def _zeros(g, x, _):
    """torch's zeros_like(grad): 0 also where the incoming gradient is inf or NaN (g * 0 made
    those NaN: lp_pool's sign(out) at a window of zeros gave NaN gradients, torch 0)."""
    from .creation import zeros_like

    return zeros_like(g)


def _special(name, x):
    from . import special

    return getattr(special, name)(x)


_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _i1_grad(g, x, o):
    """i1' = i0(x) - i1(x)/x, 1/2 at 0."""
    from .elementwise import where

    safe = where(x == 0, 1.0, x)
    return g * where(x == 0, 0.5, _special("i0", x) - o / safe)


def _i1e_grad(g, x, o):
    """i1e' = i0e(x) - i1e(x)·(sign(x) + 1/x), 1/2 at 0."""
    from .elementwise import where

    safe = where(x == 0, 1.0, x)
    return g * where(x == 0, 0.5, _special("i0e", x) - o * (x.sign() + 1.0 / safe))


def _trigamma(x):
    """polygamma(1, x), digamma's derivative: the trigamma kernel (its own rule, below,
    differentiates it again)."""
    from .elementwise import unary

    return unary("trigamma", x)


def _tetragamma(x):
    """polygamma(2, x), trigamma's derivative (Hurwitz zeta, differentiable in x)."""
    from . import series

    return series.polygamma(2, x)


def _logit(g, x, o):
    """g / (x (1 - x)); NaN outside [0, 1] (torch's logit_backward without eps: the forward is
    NaN there; with eps, x arrives clamped and never lies outside)."""
    from .elementwise import where

    return where((x < 0.0) | (x > 1.0), float("nan"), g / (x * (1.0 - x)))


def _sinc(g, x, o):
    """d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, 0 at x = 0 (torch)."""
    from .elementwise import where

    small = x.abs() < 0.25
    safe = where(small, 1.0, x)
    d = ((math.pi * safe).cos() - _special("sinc", safe)) / safe
    # near 0 the difference cancels: the series -π²x/3 + π⁴x³/30 - π⁶x⁵/840 + π⁸x⁷/45360
    p2, x2 = math.pi**2, x * x
    series = x * (-p2 / 3 + x2 * (p2**2 / 30 + x2 * (-(p2**3) / 840 + x2 * (p2**4 / 45360))))
    return g * where(small, series, d)


UNARY_RULES = {
    "neg": _u(lambda g, x, o: -g),
    "abs": _u(lambda g, x, o: g * _sign(x), 0),
    "exp": _u(lambda g, x, o: g * o, "out"),
    "exp2": _u(lambda g, x, o: g * o * math.log(2.0), "out"),
    "expm1": _u(lambda g, x, o: g * (o + 1.0), "out"),
    "log": _u(lambda g, x, o: g / x, 0),
    "log2": _u(lambda g, x, o: g / (x * math.log(2.0)), 0),
    "log10": _u(lambda g, x, o: g / (x * math.log(10.0)), 0),
    "log1p": _u(lambda g, x, o: g / (x + 1.0), 0),
    "sqrt": _sqrt,
    "rsqrt": _u(lambda g, x, o: -0.5 * g * o * o * o, "out"),
    "sin": _u(lambda g, x, o: g * x.cos(), 0),
    "cos": _u(lambda g, x, o: -g * x.sin(), 0),
    "tan": _u(lambda g, x, o: g * (1.0 + o * o), "out"),
    "asin": _u(lambda g, x, o: g * (1.0 - x * x).rsqrt(), 0),
    "acos": _u(lambda g, x, o: -g * (1.0 - x * x).rsqrt(), 0),
    "atan": _u(lambda g, x, o: g / (1.0 + x * x), 0),
    "sinh": _u(lambda g, x, o: g * x.cosh(), 0),
    "cosh": _u(lambda g, x, o: g * x.sinh(), 0),
    "tanh": _fused_u("tanh", lambda g, x, o: g * (1.0 - o * o), "out"),
    "asinh": _u(lambda g, x, o: g * (x * x + 1.0).rsqrt(), 0),
    "acosh": _u(lambda g, x, o: g * (x * x - 1.0).rsqrt(), 0),
    "atanh": _u(lambda g, x, o: g / (1.0 - x * x), 0),
    "sigmoid": _fused_u("sigmoid", lambda g, x, o: g * o * (1.0 - o), "out"),
    "relu": _fused_u("relu", lambda g, x, o: g * ~(o <= 0), "out"),
    "gelu": _fused_u("gelu", _gelu_erf, 0),
    "gelu_tanh": _fused_u("gelu_tanh", _gelu_tanh, 0),
    "silu": _fused_u("silu", _silu, 0),
    "mish": _u(_mish, 0),
    "erf": _u(lambda g, x, o: g * (2.0 / math.sqrt(math.pi)) * (-x * x).exp(), 0),
    "square": _u(lambda g, x, o: 2.0 * g * x, 0),
    "reciprocal": _u(lambda g, x, o: -g * o * o, "out"),
    "frac": _u(lambda g, x, o: g),
    "deg2rad": _u(lambda g, x, o: g * (math.pi / 180.0)),
    "rad2deg": _u(lambda g, x, o: g * (180.0 / math.pi)),
    "erfc": _u(lambda g, x, o: g * (-2.0 / math.sqrt(math.pi)) * (-x * x).exp(), 0),
    # erfinv' = sqrt(pi)/2 · exp(erfinv(x)²)
    "erfinv": _u(lambda g, x, o: g * (math.sqrt(math.pi) / 2.0) * (o * o).exp(), "out"),
    "lgamma": _u(lambda g, x, o: g * _special("digamma", x), 0),
    "digamma": _u(lambda g, x, o: g * _trigamma(x), 0),
    "trigamma": _u(lambda g, x, o: g * _tetragamma(x), 0),
    "i0": _u(lambda g, x, o: g * _special("i1", x), 0),
    "i0e": _u(lambda g, x, o: g * (_special("i1e", x) - x.sign() * o), 0, "out"),
    "i1": _u(_i1_grad, 0, "out"),
    "i1e": _u(_i1e_grad, 0, "out"),
    # entr = -x log x: -(1 + log x)
    "entr": _u(lambda g, x, o: g * -(1.0 + x.log()), 0),
    # the normal pdf φ(x) = exp(-x²/2)/√(2π); ndtri' = 1/φ(ndtri(x)); log_ndtr' = φ(x)/ndtr(x)
    "ndtr": _u(lambda g, x, o: g * (-0.5 * x * x).exp() * _INV_SQRT_2PI, 0),
    "ndtri": _u(lambda g, x, o: g * (0.5 * o * o).exp() * math.sqrt(2.0 * math.pi), "out"),
    "log_ndtr": _u(lambda g, x, o: g * (-(0.5 * x * x) - o).exp() * _INV_SQRT_2PI, 0, "out"),
    "logit": _u(_logit, 0),
    "sinc": _u(_sinc, 0),
    # piecewise constant: zero gradients (torch)
    "sign": _u(_zeros),
    "floor": _u(_zeros),
    "ceil": _u(_zeros),
    "round": _u(_zeros),
    "trunc": _u(_zeros),
}


# ---- recording ------------------------------------------------------------------------------
_NO_KW: dict = {}  # shared: rules never write kwargs


def _not_implemented(name):
    return autograd._not_implemented(name)


def _record_map(name, rule, a, b, kw, compute, out):
    """Run the map `compute(a, b, **kw, out=...)` unrecorded and record it under `rule`: out=None
    as a new node, out=a as the in-place op `name_`; any other out= refuses autograd."""
    if out is None:
        state = autograd._state
        state.enabled = False  # (no_grad() without the context manager: this runs per op)
        try:
            r = compute(a, b, **kw)
        finally:
            state.enabled = True
        return autograd.record(name, rule, (a, b), kw, r)
    if out is a:
        return autograd._inplace_call(
            lambda x, y, **k: compute(x, y, **k, out=x), name + "_", rule, (a, b), kw
        )
    raise RuntimeError(
        f"pyrite: {name}(): functions with out=... arguments don't support automatic "
        "differentiation, but one of the arguments requires grad."
    )


def recorded_binary(name, a, b, out):
    binary = _ew().binary

    rule = BINARY_RULES.get(name) or _not_implemented(name)
    if name == "mul":
        if not autograd._requires(b):  # (refreshes a view of a rebased base: fresh_view)
            rule = _mul_keep_b
        elif not autograd._requires(a):
            rule = _mul_keep_a
    return _record_map(name, rule, a, b, _NO_KW, lambda x, y, **k: binary(name, x, y, **k), out)


@saves()
def _scaled(ctx, g):
    """input + alpha·other (add and sub with alpha: ops/elementwise.py `_scaled`; sub's alpha
    comes negated)."""
    return g, (g * ctx.kwargs["alpha"] if ctx.needs[1] else None)


def recorded_scaled(name, a, b, alpha, out):
    """add/sub with alpha and a float result, recorded."""
    return _record_map(name, _scaled, a, b, {"alpha": alpha}, _ew()._scaled_map, out)


def recorded_unary(name, x, scalars, s_ctypes, out):
    unary = _ew().unary

    rule = UNARY_RULES.get(name) or _not_implemented(name)
    if out is None:
        state = autograd._state
        state.enabled = False
        try:
            r = unary(name, x, scalars, s_ctypes)
        finally:
            state.enabled = True
        return autograd.record(name, rule, (x,), _NO_KW, r)
    if out is x:
        return autograd._inplace_call(
            lambda t: unary(name, t, scalars, s_ctypes, out=t), name + "_", rule, (x,), {}
        )
    raise RuntimeError(
        f"pyrite: {name}(): functions with out=... arguments don't support automatic "
        "differentiation, but one of the arguments requires grad."
    )
