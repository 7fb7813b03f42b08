"""Normalisation of torch.nn.functional: batch_norm, instance_norm, group_norm,
local_response_norm, normalize; layer_norm and rms_norm are ops/rowops.py's fused row kernels.

batch/instance/group norm are two steps: Welford statistics from ops/reduce.py's var_mean (one
kernel per output group, reading the input through its strides; long groups split into chunks
merged by Chan's formula, so a channel of N·H·W elements stays within the device's loop budget
however large), then one map kernel (x - mean)·rsqrt(var + eps)·weight + bias, with the
(1, C, 1, ...) statistics and parameters broadcast in the kernel. Statistics are f32 (a float16
input is read as float32 for them: a mean rounded to f16 would shift every output by up to
|mean|·2⁻¹¹). Running statistics are updated in place in their own buffers, as torch's, with
the unbiased variance (n/(n - 1)) for the running estimate.

Why reductions and not ops/rowops.py's fused layer_norm row kernel for group_norm: on lavapipe
(2 cores, f32, weight and bias, min of 5, ms) var_mean + map vs row kernel + affine map:
(8, 256, 32, 32) G=32: 104 / 108; (2, 64, 64, 64) G=32: 11.2 / 9.9; (32, 128, 16, 16) G=8:
21 / 19; (1, 32, 256, 256) G=32: 25 / 27 (batch_norm training on the same inputs: 56, 11, 21,
25). About even, and the reductions read any strides and split long groups; not yet timed on
the H200.
"""

from __future__ import annotations

import math

from .. import autograd as _autograd
from .. import dtypes as D
from ..errors import ShapeError
from ..ops import conv as _conv
from ..ops import pad as _pad
from ..ops import reduce as _reduce
from ..ops import rowops as _rowops
from ..ops.core import empty, run_map
from ..tensor import Tensor
from ._common import fdt, fmap, need_float, need_tensor

layer_norm = _rowops.layer_norm
rms_norm = _rowops.rms_norm


def _channel_view(t: Tensor, ndim: int, at: int = 1) -> Tensor:
    """A (C,) tensor as (1, .., C, 1, ..) with C at dim `at` of `ndim` dims."""
    shape = [1] * ndim
    shape[at] = t.numel()
    return t.reshape(*shape)


def _stats(x: Tensor, dims):
    """(biased var, mean) over `dims`, keepdim, in f32."""
    if x.dtype is not D.float32:
        x = x.float()
    var, mean = _reduce.var_mean(x, dims, correction=0, keepdim=True)
    return var, mean


def _affine(x, mean, var, weight, bias, eps, out_shape=None):
    """(x - mean)·rsqrt(var + eps)·weight + bias in one kernel, every operand broadcast."""
    tens = [x, mean, var]
    expr = "(x0 - x1) * inverseSqrt(x2 + s0)"
    if weight is not None:
        expr = f"{expr} * x{len(tens)}"
        tens.append(weight)
    if bias is not None:
        expr = f"{expr} + x{len(tens)}"
        tens.append(bias)
    out = empty(out_shape or x._shape, x.dtype)
    return run_map(expr, tens, ("f32",) * len(tens), out, "f32", (eps,), ("f32",))


def _update_running(running, batch_stat, momentum, factor=1.0):
    """running ← (1 - momentum)·running + momentum·factor·batch_stat, in running's buffer."""
    stat = batch_stat.reshape(running._shape)
    return run_map(
        "(1.0 - s0) * x0 + s1 * x1",
        (running, stat),
        ("f32", "f32"),
        running,
        "f32",
        (momentum, momentum * factor),
        ("f32", "f32"),
    )


def _check_param(name, what, t, C):
    if t is None:
        return None
    need_tensor(name, what, t)
    if t.numel() != C:
        raise ShapeError(f"pyrite: {name}: {what} should contain {C} elements not {t.numel()}")
    if not t.dtype.is_floating_point:
        raise TypeError(f"pyrite: {name}: {what} must be floating point, not {t.dtype!r}")
    return t


def _channel_params(name, C, nd, running_mean, running_var, weight, bias):
    """batch_norm's and instance_norm's (C,) parameters checked; weight and bias (when given)
    as (1, C, 1, ...) views of an nd-dim input, the running statistics as given."""
    rm = _check_param(name, "running_mean", running_mean, C)
    rv = _check_param(name, "running_var", running_var, C)
    w = _check_param(name, "weight", weight, C)
    b = _check_param(name, "bias", bias, C)
    w = _channel_view(w, nd) if w is not None else None
    b = _channel_view(b, nd) if b is not None else None
    return rm, rv, w, b


def _verify_batch_size(size):
    if math.prod(size[2:]) * size[0] == 1:
        raise ValueError(
            f"pyrite: Expected more than 1 value per channel when training, got input size "
            f"{list(size)}"
        )


def _batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    """batch_norm's fused forward (the public batch_norm below says what it computes)."""
    name = "batch_norm"
    need_float(name, input)
    if input.ndim < 2:
        raise ShapeError(
            f"pyrite: batch_norm: expected an (N, C, *) input of 2 or more dims, got shape "
            f"{tuple(input._shape)}"
        )
    C = input._shape[1]
    if training:
        _verify_batch_size(input._shape)  # (before momentum's type, as torch checks them)
    if momentum is None:
        raise TypeError("pyrite: batch_norm(): argument 'momentum' must be float, not NoneType")
    if training:
        if eps <= 0.0:
            raise ValueError(
                f"pyrite: batch_norm eps must be positive during training, but got {eps}"
            )
    elif eps < 0.0:
        raise ValueError(f"pyrite: batch_norm eps must be non-negative, but got {eps}")
    if (running_mean is None) != (running_var is None):
        if not training:
            missing = "running_mean" if running_mean is None else "running_var"
            raise RuntimeError(f"pyrite: {missing} must be defined in evaluation mode")
        raise ValueError(
            "pyrite: running_mean and running_var must either both be None or neither be None"
        )
    nd = input.ndim
    rm, rv, w, b = _channel_params(name, C, nd, running_mean, running_var, weight, bias)
    if not training:
        if rm is None:
            raise RuntimeError("pyrite: running_mean must be defined in evaluation mode")
        return _affine(input, _channel_view(rm, nd), _channel_view(rv, nd), w, b, eps)
    if input.numel() == 0:
        return empty(input._shape, input.dtype)
    dims = (0, *range(2, nd))
    var, mean = _stats(input, dims)  # (1, C, 1, ...)
    if rm is not None:
        n = input.numel() // C
        _update_running(rm, mean, momentum)
        _update_running(rv, var, momentum, n / (n - 1))
    return _affine(input, mean, var, w, b, eps)


def _instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """instance_norm's fused forward (the public instance_norm below says what it computes)."""
    name = "instance_norm"
    need_float(name, input)
    if input.ndim < 2:
        raise ShapeError(
            f"pyrite: instance_norm: expected an (N, C, *) input, got shape {tuple(input._shape)}"
        )
    if use_input_stats and math.prod(input._shape[2:]) == 1:
        raise ValueError(
            f"pyrite: Expected more than 1 spatial element when training, got input size "
            f"{list(input._shape)}"
        )
    N, C = input._shape[0], input._shape[1]
    nd = input.ndim
    rm, rv, w, b = _channel_params(name, C, nd, running_mean, running_var, weight, bias)
    if not use_input_stats:
        if rm is None or rv is None:
            raise RuntimeError(
                "pyrite: instance_norm: Expected running_mean and running_var to be defined "
                "when use_input_stats is false"
            )
        return _affine(input, _channel_view(rm, nd), _channel_view(rv, nd), w, b, eps)
    if input.numel() == 0:
        return empty(input._shape, input.dtype)
    var, mean = _stats(input, tuple(range(2, nd)))  # (N, C, 1, ...)
    if rm is not None and rv is not None:
        n = input.numel() // (N * C)
        _update_running(rm, mean.reshape(N, C).mean(0), momentum)
        _update_running(rv, var.reshape(N, C).mean(0), momentum, n / (n - 1))
    return _affine(input, mean, var, w, b, eps)


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """group_norm's fused forward (the public group_norm below says what it computes)."""
    name = "group_norm"
    need_tensor(name, "input", input)
    if input.ndim < 2:
        raise ShapeError(
            f"pyrite: group_norm: Expected at least 2 dimensions for input tensor but "
            f"received {input.ndim}"
        )
    need_float(name, input)
    N, C = input._shape[0], input._shape[1]
    G = int(num_groups)
    if G <= 0 or C % G:
        raise ShapeError(
            f"pyrite: group_norm: Expected number of channels in input to be divisible by "
            f"num_groups, but got input of shape {list(input._shape)} and num_groups={G}"
        )
    _verify_batch_size([N * C // G, G, *input._shape[2:]])
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != C):
            raise ShapeError(
                f"pyrite: group_norm: Expected {what} to be a vector of size equal to the number "
                f"of channels in input, but got {what} of shape {list(t._shape)} and input of "
                f"shape {list(input._shape)}"
            )
    S = math.prod(input._shape[2:])
    x = input.reshape(N, G, C // G, S)  # a view when input's dims allow it
    if input.numel() == 0:
        return empty(input._shape, input.dtype)
    var, mean = _stats(x, (2, 3))  # (N, G, 1, 1)
    w = weight.reshape(G, C // G, 1) if weight is not None else None
    b = bias.reshape(G, C // G, 1) if bias is not None else None
    return _affine(x, mean, var, w, b, eps).reshape(*input._shape)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha·mean of x² over `size` neighbouring channels)^beta (the window zero-padded
    at the channel ends, the mean always over `size`: torch's avg_pool with count_include_pad)."""
    need_float("local_response_norm", input)
    if input.ndim < 3:
        raise ValueError(
            f"pyrite: local_response_norm: Expected 3D or higher dimensionality input (got "
            f"{input.ndim} dimensions)"
        )
    if input.numel() == 0:
        return input
    N, C = input._shape[0], input._shape[1]
    S = math.prod(input._shape[2:])
    if _autograd.needs_grad(input):  # recorded ops: differentiable as a composite (torch's)
        sq = (input * input).reshape(N, 1, C, S)
        lo, hi = size // 2, (size - 1) // 2
        div = _conv.avg_pool2d(_pad.pad(sq, (0, 0, lo, hi)), (size, 1), stride=1)
        return input / (div.reshape(*input._shape) * alpha + k) ** beta
    sq = fmap("x0 * x0", [input.reshape(N, 1, C, S)], dtype=D.float32)  # (N, 1, C, S)
    lo, hi = size // 2, (size - 1) // 2
    if lo == hi:
        div = _conv.avg_pool2d(sq, (size, 1), stride=1, padding=(lo, 0))
    else:
        div = _conv.avg_pool2d(_pad.pad(sq, (0, 0, lo, hi)), (size, 1), stride=1)
    return fmap(
        "p_divf(x0, p_powf(s1 + s0 * x1, s2))",
        [input, div.reshape(*input._shape)],
        [alpha, k, beta],
        dtype=fdt(input),
    )


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(‖input‖_p along dim, eps)."""
    need_float("normalize", input)
    if p != 0 and input.dim() > 0 and input.shape[dim] == 1:
        # the p-norm of one element is |x| for every p != 0 (torch's is exactly |x|); the norm
        # kernel's pow through exp2/log2 left it 4-11 ulp off for p = 3, 0.5, -1, and the
        # gradient (0 in exact arithmetic) a residue of 7e-6 where torch's f32 has 1e-6
        n = input.abs()
    else:
        n = _reduce.norm(input, p, dim, keepdim=True)
    if _autograd.needs_grad(input):  # recorded ops: differentiable as a composite
        y = input / n.clamp_min(eps)
    else:
        y = fmap("x0 / p_maxf(x1, s0)", [input, n], [eps], fdt(input))  # (NaN norm: NaN)
    return y if out is None else out.copy_(y)


# ---- gradients (pyrite/autograd.py) --------------------------------------------------------
# The forwards are fused kernels that also update running statistics in place, so they run
# unrecorded inside an autograd.Function whose backward recomputes the statistics from the
# input (as layer_norm's rule does) rather than saving them: x̂ = (x - μ)·r, r = 1/√(σ² + ε),
# dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w over each normalised group; with running
# statistics (eval) dx = g·w·r. dw = Σ g·x̂, db = Σ g over all but the channel. The running
# buffers are not version-checked: a second forward through the layer before the backward
# (two batches through one discriminator) updates them and is fine, as in torch.
class _Normalization(_autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, run, spec):
        ctx.input, ctx.weight, ctx.spec = input, weight, spec
        return run()

    @staticmethod
    def backward(ctx, g):
        gx, gw, gb = _norm_backward(ctx, g, **ctx.spec)
        return gx, gw, gb, None, None


def _norm_backward(ctx, g, group_shape, stat_dims, w_dims, w_view, eps, stats=None):
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    x, weight = ctx.input, ctx.weight
    shape = x._shape
    if group_shape is not None:
        x, g = x.reshape(*group_shape), g.reshape(*group_shape)
    # (all in float32, rounded once at the end, as torch's accumulate type: a half-precision
    # g·w, its mean and their difference each rounded to bf16 magnified by r = 1/σ; constant
    # bf16 groups gave gradients 3x torch's noise)
    xf = x if x.dtype is D.float32 else x.float()
    gdt = g.dtype
    g = g if gdt is D.float32 else g.float()
    if stats is None:
        mu = xf.mean(stat_dims, keepdim=True)
        xc = xf - mu
        r = ((xc * xc).mean(stat_dims, keepdim=True) + eps).rsqrt()
    else:
        mu, var = stats
        xc = xf - mu
        r = (var + eps).rsqrt()
    xh = xc * r
    if weight is not None:
        wdt = weight.dtype
        wv = (weight if wdt is D.float32 else weight.float()).reshape(*w_view)
    else:
        wv = None
    gx = gw = gb = None
    if need_x:
        gh = g * wv if wv is not None else g
        if stats is None:
            gm = gh.mean(stat_dims, keepdim=True)
            gx = r * (gh - gm - xh * (gh * xh).mean(stat_dims, keepdim=True))
        else:
            gx = gh * r
        gx = gx.reshape(*shape)
        gx = gx if gx.dtype is ctx.input.dtype else gx.to(ctx.input.dtype)
    if need_w and weight is not None:
        gw = (g * xh).sum(w_dims).reshape(-1)
        gw = gw if gw.dtype is wdt else gw.to(wdt)
    if need_b:
        gb = g.sum(w_dims).reshape(-1)
        bias_dt = gdt if weight is None else wdt
        gb = gb if gb.dtype is bias_dt else gb.to(bias_dt)
    return gx, gw, gb


def _recorded(input, weight, bias, run, spec):
    if _autograd.needs_grad(input, weight, bias):
        return _Normalization.apply(input, weight, bias, run, spec)
    return run()


def _cview(nd):
    return (1, -1) + (1,) * (nd - 2)


def batch_norm(
    input,
    running_mean,
    running_var,
    weight=None,
    bias=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    """Normalise each channel (dim 1) of an (N, C, *) input over N and the spatial dims.

    training: batch statistics (biased variance), and running_mean/running_var (when given)
    updated in place: r ← (1 - momentum)·r + momentum·stat, with the unbiased variance.
    Otherwise the running statistics normalise."""

    def run():
        return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)

    if not isinstance(input, Tensor) or input.ndim < 2:
        return run()
    nd = input.ndim
    dims = (0, *range(2, nd))
    stats = None
    if not training and running_mean is not None and running_var is not None:
        stats = (running_mean.reshape(*_cview(nd)), running_var.reshape(*_cview(nd)))
    spec = dict(
        group_shape=None, stat_dims=dims, w_dims=dims, w_view=_cview(nd), eps=eps, stats=stats
    )
    return _recorded(input, weight, bias, run, spec)


def instance_norm(
    input,
    running_mean=None,
    running_var=None,
    weight=None,
    bias=None,
    use_input_stats=True,
    momentum=0.1,
    eps=1e-5,
):
    """Normalise each (sample, channel) of an (N, C, *) input over its spatial dims.

    use_input_stats: each instance's own statistics, and running_mean/running_var (when given)
    updated in place with their batch mean (torch's: the running statistics are repeated over
    the batch, updated as batch_norm's, then averaged back). Otherwise the running statistics
    (C,) normalise."""

    def run():
        return _instance_norm(
            input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
        )

    if not isinstance(input, Tensor) or input.ndim < 2:
        return run()
    nd = input.ndim
    stats = None
    if not use_input_stats and running_mean is not None and running_var is not None:
        stats = (running_mean.reshape(*_cview(nd)), running_var.reshape(*_cview(nd)))
    spec = dict(
        group_shape=None,
        stat_dims=tuple(range(2, nd)),
        w_dims=(0, *range(2, nd)),
        w_view=_cview(nd),
        eps=eps,
        stats=stats,
    )
    return _recorded(input, weight, bias, run, spec)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each group of C/num_groups channels of each sample of an (N, C, *) input over
    its channels and spatial dims, then scale and shift per channel."""

    def run():
        return _group_norm(input, num_groups, weight, bias, eps)

    if not isinstance(input, Tensor) or input.ndim < 2 or not isinstance(num_groups, int):
        return run()
    N, C = input._shape[0], input._shape[1]
    G = num_groups
    if G <= 0 or C % G:
        return run()  # its error
    gs = (N, G, C // G, math.prod(input._shape[2:]))
    spec = dict(group_shape=gs, stat_dims=(2, 3), w_dims=(0, 3), w_view=(G, C // G, 1), eps=eps)
    return _recorded(input, weight, bias, run, spec)


__all__ = [
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "local_response_norm",
    "normalize",
    "rms_norm",
]
