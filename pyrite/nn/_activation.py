"""Activations of torch.nn.functional: each elementwise one is a single strided-map kernel
(ops/core.run_map) reading the input through its strides; `inplace=True` and the `_` forms write
into the input's own buffer (the same view is bound once, read-write), so they cost one kernel
too. softmax-like ones are the fused row kernels of ops/rowops.py.

NaN: every expression returns NaN for a NaN input, as torch's CPU kernels do, testing NaN by its
bits (p_isnan) where a comparison decides the branch: WGSL lets a compiler assume finite math, and
`max(NaN, 0)` may give 0.

Dtypes: torch defines most of these on floating inputs only ("not implemented for 'Long'");
those raise TypeError here. relu, relu6/hardtanh and threshold keep an integer dtype; softsign,
tanhshrink, sigmoid and tanh turn integers into float32, as torch does.
"""

from __future__ import annotations

from pyrite.errors import warn as _warn

from .. import dtypes as D
from ..autograd import forwards
from ..errors import DtypeError, ShapeError
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import reduce as _reduce
from ..ops import rowops as _rowops
from ..ops import scatter as _scatter
from ..ops.core import empty, run_map
from ._common import fdt, fmap, need_float, need_tensor

# SELU's constants (Klambauer et al. 2017), as torch spells them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _act(name, expr, input, scalars=(), inplace=False, floats_only=True):
    """out = expr(x0, s0..) in f32, stored in input's float dtype, or into input (in place)."""
    need_tensor(name, "input", input)
    if floats_only:
        need_float(name, input)
    elif input.dtype.is_bool:
        raise DtypeError(f"pyrite: {name}: bool inputs are not supported")
    if inplace:
        if not input.dtype.is_floating_point:
            raise DtypeError(
                f"pyrite: {name}_: result type float32 can't be cast to the desired output "
                f"type {input.dtype!r}"
            )
        out = input
    else:
        out = empty(input._shape, fdt(input))
    return run_map(expr, (input,), ("f32",), out, "f32", tuple(scalars), ("f32",) * len(scalars))


def _nan_kept(expr):
    """expr, or x0 itself where x0 is NaN."""
    return f"select({expr}, x0, p_isnan(x0))"


# ---- the ReLU family -----------------------------------------------------------------------
def relu(input, inplace=False):
    """max(x, 0), keeping integer dtypes; NaN stays NaN."""
    need_tensor("relu", "input", input)
    if input.dtype.is_bool:
        raise DtypeError("pyrite: relu: bool inputs are not supported")
    return _ew.unary("relu", input, out=input if inplace else None)


def relu_(input):
    return relu(input, inplace=True)


def relu_squared(input, inplace=False):
    """relu(x)² in one dispatch (and its gradient, 2·relu(x)·g, in one): the squared ReLU of
    Primer and BitNet's feed-forward layers (transformers' `ACT2FN["relu2"]`,
    `ReLUSquaredActivation`). Not a torch function: `F.relu(x) ** 2` there, two kernels each way.
    NaN stays NaN; float inputs only."""
    return (_relu_squared_ if inplace else _relu_squared)(input)


def relu_squared_(input):
    return relu_squared(input, inplace=True)


def _relu_squared(input, inplace=False):
    return _act("relu_squared", _nan_kept("select(0.0, x0 * x0, x0 > 0.0)"), input, (), inplace)


def _relu_squared_(input):
    return _relu_squared(input, True)


def _relu_squared_backward(x, g):
    """2·relu(x)·g (a recorded op: its own gradient serves the double backward); NaN where x
    is NaN, as torch's relu backward passes g where its output is not <= 0."""
    out = empty(g._shape, fdt(g))
    return run_map("select(2.0 * x0 * x1, 0.0, x0 <= 0.0)", (x, g), ("f32", "f32"), out, "f32")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp(x, min_val, max_val); integer inputs stay integer."""
    need_tensor("hardtanh", "input", input)
    if min_val > max_val:
        raise ValueError(
            f"pyrite: hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    if input.dtype.is_bool:
        raise DtypeError("pyrite: hardtanh: bool inputs are not supported")
    if not input.dtype.is_floating_point:
        # torch casts the bounds to the integer type first (truncating: -0.5 -> 0, 2.5 -> 2)
        y = _ew.clamp(input, int(min_val), int(max_val))
        return input.copy_(y) if inplace else y
    return (_hardtanh_ if inplace else _hardtanh)(input, min_val, max_val)


# The in-place spellings are their own recorded ops (`name_`: autograd.install records them as
# in-place, with torch's leaf and view checks); the public functions pick one by `inplace`.
def _hardtanh(input, min_val, max_val, inplace=False):
    expr = _nan_kept("select(select(x0, s0, x0 < s0), s1, x0 > s1)")
    return _act("hardtanh", expr, input, (min_val, max_val), inplace)


def _hardtanh_(input, min_val, max_val):
    return _hardtanh(input, min_val, max_val, True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x for x > 0, else negative_slope·x."""
    return (_leaky_relu_ if inplace else _leaky_relu)(input, negative_slope)


def _leaky_relu(input, negative_slope, inplace=False):
    return _act("leaky_relu", "select(x0 * s0, x0, x0 > 0.0)", input, (negative_slope,), inplace)


def _leaky_relu_(input, negative_slope):
    return _leaky_relu(input, negative_slope, True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input, alpha=1.0, inplace=False):
    """x for x > 0, else alpha·(exp(x) - 1)."""
    return (_elu_ if inplace else _elu)(input, alpha)


def _elu(input, alpha, inplace=False):
    return _act("elu", "select(s0 * p_expm1(x0), x0, x0 > 0.0)", input, (alpha,), inplace)


def _elu_(input, alpha):
    return _elu(input, alpha, True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def selu(input, inplace=False):
    """scale·(x for x > 0, else alpha·(exp(x) - 1)), torch's alpha and scale."""
    return (_selu_ if inplace else _selu)(input)


def _selu(input, inplace=False):
    expr = "s1 * select(s0 * p_expm1(x0), x0, x0 > 0.0)"
    return _act("selu", expr, input, (SELU_ALPHA, SELU_SCALE), inplace)


def _selu_(input):
    return _selu(input, True)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """x for x > 0, else alpha·(exp(x/alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("pyrite: celu: ZeroDivisionError: alpha cannot be 0 for CELU")
    return (_celu_ if inplace else _celu)(input, alpha)


def _celu(input, alpha, inplace=False):
    expr = "select(s0 * p_expm1(x0 * s1), x0, x0 > 0.0)"
    return _act("celu", expr, input, (alpha, 1.0 / alpha), inplace)


def _celu_(input, alpha):
    return _celu(input, alpha, True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value (NaN stays NaN); integer inputs stay integer."""
    return (_threshold_ if inplace else _threshold)(input, threshold, value)


def _threshold_(input, threshold, value):
    return _threshold(input, threshold, value, True)


def _threshold(input, threshold, value, inplace=False):
    need_tensor("threshold", "input", input)
    if input.dtype.is_bool:
        raise DtypeError("pyrite: threshold: bool inputs are not supported")
    if input.dtype.is_floating_point:
        expr = "select(s1, x0, x0 > s0 || p_isnan(x0))"
        return _act("threshold", expr, input, (threshold, value), inplace)
    # integers: compare in f32 (the threshold may be fractional), keep the integer; torch
    # refuses a value the type cannot hold ("value cannot be converted to type uint8_t without
    # overflow")
    from ..ops.casts import fill_value

    fill_value(value, input.dtype)
    out = input if inplace else empty(input._shape, input.dtype)
    return run_map(
        "select(s1, x0, f32(x0) > s0)",
        (input,),
        ("i32",),
        out,
        "i32",
        (threshold, int(value)),
        ("f32", "i32"),
    )


def threshold_(input, threshold, value):
    return _threshold_(input, threshold, value)


def _rrelu_check(lower, upper):
    if lower > upper:
        raise ValueError(
            f"pyrite: rrelu: Lower bound ({lower}) should be less than or equal to the "
            f"upper bound ({upper})"
        )


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, generator=None):
    """Randomized leaky ReLU: in training each negative element is scaled by its own slope drawn
    from U(lower, upper) (the device's Philox stream, `pr.manual_seed`), in eval by the mean
    slope (lower + upper) / 2, as torch."""
    _rrelu_check(lower, upper)
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0, inplace)
    return (_rrelu_train_ if inplace else _rrelu_train)(input, lower, upper, generator)


def _rrelu_train(input, lower, upper, generator, inplace=False):
    need_float("rrelu", input)
    u = _creation.rand(input._shape, generator=generator)  # one uniform draw per element
    out = input if inplace else empty(input._shape, input.dtype)
    return run_map(
        "select(x0 * (s0 + x1 * s1), x0, x0 >= 0.0 || p_isnan(x0))",
        (input, u),
        ("f32", "f32"),
        out,
        "f32",
        (lower, upper - lower),
        ("f32", "f32"),
    )


def _rrelu_train_(input, lower, upper, generator):
    return _rrelu_train(input, lower, upper, generator, True)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return rrelu(input, lower, upper, training, inplace=True, generator=generator)


def prelu(input, weight):
    """x for x > 0, else weight·x, weight of one element or one per channel (dim 1)."""
    need_float("prelu", input)
    need_float("prelu", weight, "weight")
    if weight.ndim > 1:
        raise ValueError(
            f"pyrite: prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
            f"ndim = {weight.ndim}"
        )
    if weight.dtype is not input.dtype:
        raise DtypeError(
            f"pyrite: prelu: Type promoting not supported. Got {input.dtype!r} and {weight.dtype!r}"
        )
    channels = input._shape[1] if input.ndim >= 2 else 1
    k = weight.numel()
    if k != 1 and k != channels:
        raise ShapeError(
            f"pyrite: prelu: Mismatch of parameter numbers and input channel size. Found "
            f"parameter numbers = {k} and channel size = {channels}."
        )
    # (C, 1, ..., 1): broadcasts along dim 1; one weight broadcasts everywhere
    w = weight.reshape(()) if k == 1 else weight.reshape(channels, *([1] * (input.ndim - 2)))
    out = empty(input._shape, input.dtype)
    return run_map("select(x0 * x1, x0, x0 > 0.0)", (input, w), ("f32", "f32"), out, "f32")


# ---- smooth activations --------------------------------------------------------------------
def gelu(input, approximate="none"):
    """x·Φ(x) (approximate='tanh': x·σ(2·√(2/π)·(x + 0.044715·x³)))."""
    need_float("gelu", input)
    return _ew.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    """x·σ(x)."""
    need_float("silu", input)
    return _ew.unary("silu", input, out=input if inplace else None)


def mish(input, inplace=False):
    """x·tanh(softplus(x))."""
    need_float("mish", input)
    return _ew.unary("mish", input, out=input if inplace else None)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(β·x))/β, or x where β·x > threshold."""
    need_float("softplus", input)
    return _ew.softplus(input, beta, threshold)


def hardswish(input, inplace=False):
    """x·relu6(x + 3)/6."""
    return (_hardswish_ if inplace else _hardswish)(input)


def _hardswish(input, inplace=False):
    return _act("hardswish", "x0 * min(max(x0 + 3.0, 0.0), 6.0) / 6.0", input, (), inplace)


def _hardswish_(input):
    return _hardswish(input, True)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3)/6."""
    return (_hardsigmoid_ if inplace else _hardsigmoid)(input)


def _hardsigmoid(input, inplace=False):
    expr = _nan_kept("min(max(x0 + 3.0, 0.0), 6.0) / 6.0")
    return _act("hardsigmoid", expr, input, (), inplace)


def _hardsigmoid_(input):
    return _hardsigmoid(input, True)


def logsigmoid(input):
    """log(σ(x)) = min(x, 0) - log1p(exp(-|x|)): never exp of a large positive number."""
    expr = _nan_kept("min(x0, 0.0) - p_log1p(p_expf(-abs(x0)))")
    return _act("logsigmoid", expr, input)


def softsign(input):
    """x / (1 + |x|)."""
    return _act("softsign", "p_divf(x0, 1.0 + abs(x0))", input, floats_only=False)


def tanhshrink(input):
    """x - tanh(x)."""
    return _act("tanhshrink", "p_tanhshrink(x0)", input, floats_only=False)


@forwards
def sigmoid(input):
    return _ew.sigmoid(input)


@forwards
def tanh(input):
    return _ew.tanh(input)


def softshrink(input, lambd=0.5):
    """x - λ for x > λ, x + λ for x < -λ, else 0."""
    if lambd < 0:
        raise ValueError(
            f"pyrite: softshrink: lambda must be in range [0, 3.40282e+38] for input "
            f"dtype Float, but found {lambd}"
        )
    expr = _nan_kept("select(select(0.0, x0 + s0, x0 < -s0), x0 - s0, x0 > s0)")
    return _act("softshrink", expr, input, (lambd,))


def hardshrink(input, lambd=0.5):
    """x where |x| > λ, else 0."""
    expr = _nan_kept("select(x0, 0.0, x0 >= -s0 && x0 <= s0)")
    return _act("hardshrink", expr, input, (lambd,))


# ---- along a dim: glu, softmax, softmin, log_softmax ----------------------------------------
def glu(input, dim=-1):
    """a·σ(b), a and b the two halves of input along dim."""
    need_float("glu", input)
    if input.ndim == 0:
        raise ValueError("pyrite: glu does not support scalars because halving size must be even")
    d = input._dim(dim)
    n = input._shape[d]
    if n % 2:
        raise ShapeError(
            f"pyrite: glu: Halving dimension must be even, but dimension {d} is size {n}"
        )
    a = input.narrow(d, 0, n // 2)
    b = input.narrow(d, n // 2, n // 2)
    out = empty(a._shape, input.dtype)
    return run_map("x0 * p_sigmoid(x1)", (a, b), ("f32", "f32"), out, "f32")


@forwards
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x - max) / Σ exp(x - max) along dim (torch's implicit dim when None)."""
    return _rowops.softmax(input, dim, dtype)


@forwards
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - max - log Σ exp(x - max) along dim."""
    return _rowops.log_softmax(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along dim."""
    need_tensor("softmin", "input", input)
    if dtype is not None:
        input = input.to(D.from_any(dtype))
    return _rowops.softmax(-input, dim)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + g) / tau) along dim, g ~ Gumbel(0, 1) drawn on the device as
    -log(-log(1 - u)), u ~ U[0, 1); hard: the one-hot of its argmax (torch's straight-through
    y_hard - y_soft + y_soft, whose value is the one-hot)."""
    if eps != 1e-10:
        _warn("pyrite: `eps` parameter is deprecated and has no effect.", stacklevel=2)
    need_float("gumbel_softmax", logits)
    u = _creation.rand(logits._shape)
    # (recorded ops: the gradient flows to logits, straight through for hard, as torch's)
    gumbels = fmap("-log(-log(1.0 - x0))", [u], dtype=logits.dtype)
    y = _rowops.softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y
    d = y._dim(dim)
    index = _reduce.argmax(y, d, keepdim=True)
    y_hard = _scatter.scatter(_creation.zeros_like(y), d, index, value=1.0)
    return y_hard - y.detach() + y


# ---- backward rules (autograd.install records these; torch's formulas, derivatives.yaml) -------
# relu, gelu, silu, mish, sigmoid, tanh record inside the elementwise engine, softplus in
# ops/elementwise.py, softmax/log_softmax in ops/rowops.py. The rules read the input (an in-place
# call saves a copy of the old value), so they are right for any slope or alpha and
# differentiable again.
def _arg(ctx, i, name, default):
    a = ctx.args
    return a[i] if len(a) > i else ctx.kwargs.get(name, default)


def _g_leaky_relu(ctx, g):
    x = ctx.args[0]
    return (_ew.where(x > 0, g, g * _arg(ctx, 1, "negative_slope", 0.01)),)


def _elu_rule(alpha_of, scale, input_scale_of):
    # torch's elu_backward: x > 0: g·scale, else g·input_scale·alpha·scale·exp(x·input_scale)
    def rule(ctx, g):
        x = ctx.args[0]
        alpha, s = alpha_of(ctx), input_scale_of(ctx)
        neg = g * (s * alpha * scale) * _ew.exp(x * s)
        return (_ew.where(x > 0, g * scale, neg),)

    rule.saves = frozenset({0})
    return rule


_g_elu = _elu_rule(lambda c: _arg(c, 1, "alpha", 1.0), 1.0, lambda c: 1.0)
_g_selu = _elu_rule(lambda c: SELU_ALPHA, SELU_SCALE, lambda c: 1.0)
_g_celu = _elu_rule(
    lambda c: _arg(c, 1, "alpha", 1.0), 1.0, lambda c: 1.0 / _arg(c, 1, "alpha", 1.0)
)


def _g_hardtanh(ctx, g):
    # g where min_val < x < max_val (bounds excluded, as torch); the output is strictly inside
    # exactly where the input is, so the rule reads it and an in-place call saves nothing
    o = ctx.out
    lo, hi = ctx.args[1], ctx.args[2]
    return (_ew.where((o > lo) & (o < hi), g, 0.0),)


def _g_threshold(ctx, g):
    # torch's threshold_backward: 0 where x <= threshold, else g (NaN passes g)
    x = ctx.args[0]
    return (_ew.where(x <= ctx.args[1], 0.0, g),)


def _g_rrelu(ctx, g):
    # the slope each negative element drew is out / x there (a constant: x detached, so a
    # second derivative through it is 0, as torch's)
    x, o = ctx.args[0], ctx.out
    return (_ew.where(x >= 0, g, g * (o / _ew.where(x >= 0, 1.0, x.detach()))),)


def _g_relu_squared(ctx, g):
    return (_relu_squared_backward(ctx.args[0], g),)


def _g_relu_squared_backward(ctx, gg):
    x, g = ctx.args
    off = x <= 0
    gx = _ew.where(off, 0.0, 2.0 * g * gg) if ctx.needs[0] else None
    gg_ = _ew.where(off, 0.0, 2.0 * x * gg) if ctx.needs[1] else None
    return gx, gg_


def _g_hardswish(ctx, g):
    # torch 2.13's hardswish_backward: 0 for x <= -3, g·(x/3 + 1/2) inside, g for x >= 3 (at
    # exactly -3 and 3 it gives 0 and g, not -g/2 and 3g/2)
    x = ctx.args[0]
    inner = _ew.where(x < 3.0, g * (x / 3.0 + 0.5), g)
    return (_ew.where(x <= -3.0, 0.0, inner),)


def _g_hardsigmoid(ctx, g):
    x = ctx.args[0]
    return (_ew.where((x > -3.0) & (x < 3.0), g / 6.0, 0.0),)


def _g_logsigmoid(ctx, g):
    return (g * _ew.sigmoid(-ctx.args[0]),)


def _g_softsign(ctx, g):
    d = 1.0 + _ew.abs(ctx.args[0])
    return (g / (d * d),)


def _g_tanhshrink(ctx, g):
    t = _ew.tanh(ctx.args[0])
    return (g * (t * t),)


def _g_shrink(ctx, g):
    x = ctx.args[0]
    lambd = _arg(ctx, 1, "lambd", 0.5)
    return (_ew.where((x >= -lambd) & (x <= lambd), 0.0, g),)


def _g_glu(ctx, g):
    from ..ops.combine import cat

    x = ctx.args[0]
    d = x._dim(_arg(ctx, 1, "dim", -1))
    n = x._shape[d] // 2
    a, b = x.narrow(d, 0, n), x.narrow(d, n, n)
    sb = _ew.sigmoid(b)
    return (cat([g * sb, g * a * sb * (1.0 - sb)], d),)


def _g_prelu(ctx, g):
    x, w = ctx.args
    k = w.numel()
    wb = w.reshape(()) if k == 1 else w.reshape(w.numel(), *([1] * (x.ndim - 2)))
    gx = _ew.where(x > 0, g, g * wb) if ctx.needs[0] else None
    gw = None
    if ctx.needs[1]:
        gw = _ew.where(x > 0, 0.0, g * x)
        if k == 1:
            gw = _reduce.sum(gw).reshape(w._shape)
        else:  # one weight per channel (dim 1): the sum over every other dim
            gw = _reduce.sum(gw, dim=[i for i in range(x.ndim) if i != 1]).reshape(w._shape)
    return gx, gw


for _r, _s in (
    (_g_leaky_relu, {0}),
    (_g_hardtanh, {"out"}),
    (_g_threshold, {0}),
    (_g_rrelu, {0, "out"}),
    (_g_relu_squared, {0}),
    (_g_relu_squared_backward, {0, 1}),
    (_g_hardswish, {0}),
    (_g_hardsigmoid, {0}),
    (_g_logsigmoid, {0}),
    (_g_softsign, {0}),
    (_g_tanhshrink, {0}),
    (_g_shrink, {0}),
    (_g_glu, {0}),
    (_g_prelu, {0, 1}),
):
    _r.saves = frozenset(_s)

GRADS = {
    "_leaky_relu": _g_leaky_relu,
    "_leaky_relu_": _g_leaky_relu,
    "_elu": _g_elu,
    "_elu_": _g_elu,
    "_selu": _g_selu,
    "_selu_": _g_selu,
    "_celu": _g_celu,
    "_celu_": _g_celu,
    "_hardtanh": _g_hardtanh,
    "_hardtanh_": _g_hardtanh,
    "_threshold": _g_threshold,
    "_threshold_": _g_threshold,
    "_rrelu_train": _g_rrelu,
    "_rrelu_train_": _g_rrelu,
    "_relu_squared": _g_relu_squared,
    "_relu_squared_": _g_relu_squared,
    "_relu_squared_backward": _g_relu_squared_backward,
    "_hardswish": _g_hardswish,
    "_hardswish_": _g_hardswish,
    "_hardsigmoid": _g_hardsigmoid,
    "_hardsigmoid_": _g_hardsigmoid,
    "logsigmoid": _g_logsigmoid,
    "softsign": _g_softsign,
    "tanhshrink": _g_tanhshrink,
    "softshrink": _g_shrink,
    "hardshrink": _g_shrink,
    "glu": _g_glu,
    "prelu": _g_prelu,
}


__all__ = [
    "celu",
    "celu_",
    "elu",
    "elu_",
    "gelu",
    "glu",
    "gumbel_softmax",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "leaky_relu",
    "leaky_relu_",
    "log_softmax",
    "logsigmoid",
    "mish",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "relu_squared",
    "relu_squared_",
    "rrelu",
    "rrelu_",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
]
