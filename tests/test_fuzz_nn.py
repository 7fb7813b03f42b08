"""A second differential fuzzer: unary float math and torch.nn.functional against torch (CPU).

tests/test_fuzz_random_shapes.py covers the binary, in-place, reduction, scan, softmax, matmul,
indexing, combine and sort families; this file draws, with the same machinery (its `Arg` view
recipes and its `check`, which runs each program in torch's drawn dtypes, in torch float64 and in
pyrite, forward and gradient), the families it leaves out:

  unary      float math at NaN, +-inf, +-0, poles and domain edges (clamp, nan_to_num, round...)
  act        the activations of torch.nn.functional, their parameters drawn
  norm       layer/group/batch/instance/rms/local-response norm, normalize (running stats too)
  conv       conv1d/2d/3d and conv_transpose1d/2d: kernel, stride, padding (and 'same'/'valid'),
             dilation, groups, bias
  pool       max/avg/lp pools 1d-3d (ceil_mode, count_include_pad, divisor_override, indices),
             adaptive pools
  resample   pad in every mode, interpolate in every mode, unfold/fold
  loss       the losses of torch.nn.functional, reductions and options drawn
  embed      embedding (padding_idx, max_norm), embedding_bag, one_hot,
             scaled_dot_product_attention (masks, causal, scale, GQA)

Tolerances are `check`'s (see the first file's docstring): "ew" for elementwise ops (a ULP count
relative to the value), "sum" for the products (conv, attention: the same op on |inputs| bounds
the f32 summation error), "scale" for ops whose error is relative to the output's scale (norms,
losses, pools that average). Gradients are judged against the largest |gradient|.

Not drawn, torch's own quirks rather than pyrite's: f16/bf16 where torch has no CPU kernel
(erfcx, log_ndtr, ndtri, multi_margin_loss, avg_pool3d and the local_response_norm built on it,
antialiased interpolate), NaN gradients that differ between torch's vector lanes and its scalar
tail (LANE_NAN_GRAD), antialias to a width of 1 (torch skips the height's pass), strided
max_pool3d inputs (torch's backward aborts), 1-D attention masks (torch's math path indexes
dim -2). BN_STRIDES: torch 2.13's CPU batch_norm backward gives a wrong bias gradient (every
dtype, float64 too) for a view whose size-1 dim has a stride that is neither layout's, as
(1, 13, 1, 2) strided (26, 1, 13, 13) (test_norm[714] at PYRITE_FUZZ_DRAWS=900; pyrite right):
batch_norm's torch operand is made contiguous. DIGAMMA_POLE: torch's trigamma (digamma's
gradient) at a negative integer is finite, pi^2/sin^2(pi·n) of a rounded sin (1.29e15 at -1 in
float32, 6.58e32 in float64), pyrite's the pole's inf: digamma's gradient is not judged there
(PYRITE_FUZZ_SEED=101 test_unary[440]). Also seen: polygamma(1, +inf) is NaN in pyrite
(its Hurwitz-zeta path), 0 in torch (its trigamma).

PYRITE_FUZZ_DRAWS=n runs n seeds per family instead of the defaults in DRAWS (a longer hunt).
The defaults, 630 cases, take 35 s on the 2-core lavapipe machine.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from test_fuzz_random_shapes import Arg, _case_rng, check, draw_shape

# Draws per family by default; PYRITE_FUZZ_DRAWS overrides every family's count.
DRAWS = {
    "unary": 100,  # (and as many clamp draws with tensor bounds)
    "act": 80,
    "norm": 50,
    "conv": 50,
    "pool": 60,
    "resample": 50,
    "loss": 80,
    "embed": 60,
}
_ENV = os.environ.get("PYRITE_FUZZ_DRAWS")


def _seeds(family):
    return range(int(_ENV) if _ENV else DRAWS[family])


def F(T):
    return T.nn.functional


# ---- values ---------------------------------------------------------------------------------
# edges: zeros of both signs, +-1 (asin/atanh/erfinv/acosh's edges), poles of lgamma/digamma
# (non-positive integers), halves (round's ties), exp's overflow, NaN and the infinities
EDGES = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 2.0, -2.0, -3.0, 0.25, 0.9375, -0.9375,
         10.0, -10.0, 89.0, -104.0, 12.0, 1000.0, 2.0**-10)  # fmt: skip
SPECIAL = (np.nan, np.inf, -np.inf)


def _exact(v, dtype):
    """v rounded to 7 significant bits inside f16's range where dtype is a half type, so every
    dtype holds the same numbers and float64's reference starts from the drawn value."""
    if dtype == "float32":
        return v.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        m, e = np.frexp(np.where(np.isfinite(v), v, 0.0))
        r = np.ldexp(np.round(m * 128) / 128, np.clip(e, -13, 15))
        r = np.where(np.abs(v) < 2.0**-14, 0.0 * v, r)
    return np.where(np.isfinite(v), r, v).astype(np.float32)


def values(rng, shape, dtype, scale=None, edges=0.2, special=0.0):
    """Normals times a drawn scale, some elements replaced by EDGES, some by NaN/inf."""
    scale = float(rng.choice((0.25, 1.0, 1.0, 3.0, 20.0))) if scale is None else scale
    v = rng.standard_normal(shape) * scale
    pick = rng.random(shape)
    v = np.where(pick < edges, rng.choice(EDGES, shape), v)
    v = np.where(pick > 1 - special, rng.choice(SPECIAL, shape), v)
    return _exact(v, dtype)


def farg(
    rng, shape, dtype=None, *, scale=1.0, edges=0.0, special=0.0, view=True, grad=None, expand=True
):
    """A float operand with values()."""
    dtype = dtype or _fdtype(rng)
    a = Arg(rng, shape, dtype, view=view, expand=view and expand, grad=grad)
    a.base = values(rng, a.view["base"], dtype, scale, edges, special)
    return a


def iarg(rng, shape, low, high, view=False):
    """An int64 operand with values in [low, high)."""
    a = Arg(rng, shape, "int64", view=view, expand=view)
    a.base = rng.integers(low, max(high, low + 1), a.view["base"]).astype(np.int64)
    return a


def _fdtype(rng, p_half=0.3):
    return "float32" if rng.random() >= p_half else str(rng.choice(("float16", "bfloat16")))


# ---- unary float math -----------------------------------------------------------------------
# name: (program, ULP count, grad); the tolerance is the value's ULPs (kind "ew")
UNARY = {
    "exp": (lambda T, x: T.exp(x), 8, True),
    "exp2": (lambda T, x: T.exp2(x), 8, True),
    "log": (lambda T, x: T.log(x), 4, True),
    "log2": (lambda T, x: x.log2(), 4, True),
    "log10": (lambda T, x: T.log10(x), 6, True),
    "log1p": (lambda T, x: T.log1p(x), 8, True),
    "expm1": (lambda T, x: T.expm1(x), 16, True),
    "sqrt": (lambda T, x: x.sqrt(), 4, True),
    "rsqrt": (lambda T, x: T.rsqrt(x), 4, True),
    "sin": (lambda T, x: T.sin(x), 8, True),
    "cos": (lambda T, x: x.cos(), 8, True),
    "tan": (lambda T, x: T.tan(x), 16, True),
    "asin": (lambda T, x: T.asin(x), 8, True),
    "acos": (lambda T, x: x.acos(), 8, True),
    "atan": (lambda T, x: T.atan(x), 8, True),
    "sinh": (lambda T, x: T.sinh(x), 16, True),
    "cosh": (lambda T, x: x.cosh(), 16, True),
    "tanh": (lambda T, x: T.tanh(x), 8, True),
    "asinh": (lambda T, x: T.asinh(x), 8, True),
    "acosh": (lambda T, x: T.acosh(x), 8, True),
    "atanh": (lambda T, x: x.atanh(), 8, True),
    "erf": (lambda T, x: T.erf(x), 8, True),
    "erfc": (lambda T, x: T.erfc(x), 16, True),
    "erfinv": (lambda T, x: T.erfinv(x), 16, True),
    "lgamma": (lambda T, x: T.lgamma(x), 64, True),
    "digamma": (lambda T, x: T.digamma(x), 64, True),
    "sigmoid": (lambda T, x: T.sigmoid(x), 8, True),
    "logit": (lambda T, x: T.logit(x), 8, True),
    "logit_eps": (lambda T, x: T.logit(x, eps=0.125), 8, True),
    "sign": (lambda T, x: T.sign(x), 0, True),
    "sgn": (lambda T, x: x.sgn(), 0, False),  # (torch's gradient is a ZeroTensor: no numpy)
    "signbit": (lambda T, x: T.signbit(x), 0, False),
    "round": (lambda T, x: T.round(x), 0, True),
    "round_decimals": (lambda T, x: T.round(x, decimals=1), 4, True),
    "floor": (lambda T, x: x.floor(), 0, True),
    "ceil": (lambda T, x: T.ceil(x), 0, True),
    "trunc": (lambda T, x: T.trunc(x), 0, True),
    "frac": (lambda T, x: T.frac(x), 0, True),
    "abs": (lambda T, x: T.abs(x), 0, True),
    "neg": (lambda T, x: -x, 0, True),
    "reciprocal": (lambda T, x: T.reciprocal(x), 4, True),
    "square": (lambda T, x: T.square(x), 2, True),
    "sinc": (lambda T, x: T.sinc(x), 16, True),
    "deg2rad": (lambda T, x: T.deg2rad(x), 4, True),
    "nan_to_num": (lambda T, x: T.nan_to_num(x), 0, True),
    "nan_to_num_args": (lambda T, x: T.nan_to_num(x, nan=1.5, posinf=2.0, neginf=-3.0), 0, True),
    "clamp": (lambda T, x: T.clamp(x, -0.5, 0.75), 0, True),
    "clamp_min": (lambda T, x: x.clamp(min=-1.0), 0, True),
    "clamp_max": (lambda T, x: T.clamp(x, max=2.5), 0, True),
    "clamp_inverted": (lambda T, x: T.clamp(x, 1.0, -1.0), 0, True),
    "clip": (lambda T, x: T.clip(x, -2, 2), 0, True),
    "isfinite": (lambda T, x: T.isfinite(x), 0, False),
    "isnan": (lambda T, x: x.isnan(), 0, False),
    "isposinf": (lambda T, x: T.isposinf(x), 0, False),
    "i0": (lambda T, x: T.i0(x), 16, True),
    "erfcx": (lambda T, x: T.special.erfcx(x), 32, False),
    "log_ndtr": (lambda T, x: T.special.log_ndtr(x), 32, False),
    "ndtri": (lambda T, x: T.special.ndtri(x), 32, False),
    "expit": (lambda T, x: T.special.expit(x), 8, True),
    "xlog1py0": (lambda T, x: T.special.xlog1py(x, 0.5), 8, True),
}


# torch has no f16/bf16 kernel for these on the CPU: f32 only
F32_ONLY = {"erfcx", "log_ndtr", "ndtri"}


@pytest.mark.parametrize("seed", _seeds("unary"))
def test_unary(seed):
    rng = _case_rng("nn_unary", seed)
    name = str(rng.choice(sorted(UNARY)))
    fn, c, grad = UNARY[name]
    shape = draw_shape(rng, max_numel=256)
    special = 0.3 if rng.random() < 0.3 else 0.0
    dtype = "float32" if name in F32_ONLY else _fdtype(rng)
    x = farg(rng, shape, dtype, scale=None, edges=0.25, special=special)
    # (logit(eps)'s gradient at NaN is 0 in torch's vector lanes, NaN in its scalar tail)
    grad = grad and not (special and name == "logit_eps")
    if name == "digamma":  # DIGAMMA_POLE
        with np.errstate(invalid="ignore"):
            grad = grad and not np.any((x.base < 0) & (x.base == np.floor(x.base)))
    check(fn, [x], kind="ew", c=c, grad=grad, info=name)


# clamp with tensor bounds (broadcast against x), None on one side, min > max
@pytest.mark.parametrize("seed", _seeds("unary"))
def test_clamp_tensor(seed):
    rng = _case_rng("nn_clamp", seed)
    shape = draw_shape(rng, max_numel=256)
    dtype = _fdtype(rng)
    special = 0.2 if rng.random() < 0.3 else 0.0
    x = farg(rng, shape, dtype, edges=0.2, special=special)

    def bound():
        r = rng.random()
        if r < 0.25:
            return None
        if r < 0.45:
            return float(_exact(np.array(rng.standard_normal()), "bfloat16"))
        sub = shape[len(shape) - int(rng.integers(0, len(shape) + 1)) :]
        sub = tuple(1 if rng.random() < 0.3 else n for n in sub)
        return farg(rng, sub, dtype, edges=0.1, special=special / 2)

    lo, hi = bound(), bound()
    if lo is None and hi is None:
        lo = -0.5
    if isinstance(lo, Arg) or isinstance(hi, Arg):  # torch refuses a number with a tensor
        lo, hi = (farg(rng, (), dtype, scale=float(b), view=False) if isinstance(b, float) else b
                  for b in (lo, hi))  # fmt: skip
    args = [x] + [b for b in (lo, hi) if isinstance(b, Arg)]
    kinds = [isinstance(b, Arg) for b in (lo, hi)]

    def fn(T, v, *bs):
        it = iter(bs)
        lo_, hi_ = (next(it) if k else b for k, b in zip(kinds, (lo, hi)))
        return T.clamp(v, lo_, hi_) if rng_form else v.clamp(min=lo_, max=hi_)

    rng_form = bool(rng.random() < 0.5)
    check(fn, args, kind="ew", c=0, info=f"clamp lo={lo} hi={hi}")


# ---- activations ----------------------------------------------------------------------------
def _act(rng):
    """(name, program(T, x), ULP count, extra operands)."""
    name = str(
        rng.choice(
            ["relu", "relu6", "gelu", "gelu_tanh", "silu", "mish", "elu", "selu", "celu",
             "softplus", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "prelu", "glu",
             "logsigmoid", "softsign", "tanhshrink", "softshrink", "hardshrink", "threshold",
             "rrelu_eval", "softmin"]
        )
    )  # fmt: skip
    a = float(rng.choice((0.5, 1.0, 1.5, 2.0, 0.25)))
    if name == "relu":
        return name, lambda T, x: F(T).relu(x), 0, []
    if name == "relu6":
        return name, lambda T, x: F(T).relu6(x), 0, []
    if name == "gelu":
        return name, _gelu, 16, []
    if name == "gelu_tanh":
        return name, lambda T, x: F(T).gelu(x, approximate="tanh"), 16, []
    if name == "silu":
        return name, lambda T, x: F(T).silu(x), 16, []
    if name == "mish":
        return name, lambda T, x: F(T).mish(x), 16, []
    if name == "elu":
        return f"elu {a}", lambda T, x: F(T).elu(x, alpha=a), 16, []
    if name == "selu":
        return name, lambda T, x: F(T).selu(x), 16, []
    if name == "celu":
        return f"celu {a}", lambda T, x: F(T).celu(x, alpha=a), 16, []
    if name == "softplus":
        beta = float(rng.choice((1.0, 0.5, 2.0, -1.0)))
        th = float(rng.choice((20.0, 1.0, 5.0)))
        return (
            f"softplus beta={beta} th={th}",
            lambda T, x: F(T).softplus(x, beta=beta, threshold=th),
            16,
            [],
        )
    if name == "hardtanh":
        lo, hi = sorted(float(v) for v in rng.choice((-2.0, -1.0, -0.5, 0.0, 0.5, 1.0), 2))
        return f"hardtanh {lo} {hi}", lambda T, x: F(T).hardtanh(x, lo, hi), 0, []
    if name == "hardswish":
        return name, lambda T, x: F(T).hardswish(x), 4, []
    if name == "hardsigmoid":
        return name, lambda T, x: F(T).hardsigmoid(x), 4, []
    if name == "leaky_relu":
        s = float(rng.choice((0.01, 0.2, -0.5, 1.5)))
        return f"leaky_relu {s}", lambda T, x: F(T).leaky_relu(x, s), 2, []
    if name == "logsigmoid":
        return name, lambda T, x: F(T).logsigmoid(x), 16, []
    if name == "softsign":
        return name, lambda T, x: F(T).softsign(x), 8, []
    if name == "tanhshrink":
        return name, lambda T, x: F(T).tanhshrink(x), 16, []
    if name == "softshrink":
        return f"softshrink {a}", lambda T, x: F(T).softshrink(x, a), 2, []
    if name == "hardshrink":
        return f"hardshrink {a}", lambda T, x: F(T).hardshrink(x, a), 0, []
    if name == "threshold":
        v = float(rng.choice((0.0, -1.0, 2.5)))
        return f"threshold {a} {v}", lambda T, x: F(T).threshold(x, a, v), 0, []
    if name == "rrelu_eval":
        return name, lambda T, x: F(T).rrelu(x, 0.125, 0.25, training=False), 4, []
    return name, None, 0, []  # prelu, glu, softmin: shaped below


@pytest.mark.parametrize("seed", _seeds("act"))
def test_activation(seed):
    rng = _case_rng("nn_act", seed)
    name, fn, c, _ = _act(rng)
    shape = draw_shape(rng, max_numel=512)
    dtype = _fdtype(rng)
    special = 0.2 if rng.random() < 0.2 else 0.0
    scale = float(rng.choice((1.0, 3.0, 30.0)))
    if name == "prelu":  # weight of C (= shape[1]) or 1 elements
        if len(shape) == 0:
            shape = (3,)
        ch = shape[1] if len(shape) > 1 and rng.random() < 0.6 else 1
        x = farg(rng, shape, dtype, scale=scale, edges=0.2, special=special)
        w = farg(rng, (ch,), dtype, scale=0.5, view=False)
        return check(lambda T, v, wt: F(T).prelu(v, wt), [x, w], kind="ew", c=4, info=name)
    if name == "glu":
        if len(shape) == 0:
            shape = (4,)
        d = int(rng.integers(len(shape)))
        shape = tuple(2 * n if i == d else n for i, n in enumerate(shape))
        x = farg(rng, shape, dtype, scale=scale, edges=0.2, special=special)
        dn = d - len(shape) if rng.random() < 0.5 else d
        return check(lambda T, v: F(T).glu(v, dn), [x], kind="ew", c=16, info=f"glu {dn}")
    if name == "softmin":
        d = int(rng.integers(len(shape))) if shape else 0
        x = farg(rng, shape, dtype, scale=scale, edges=0.2, special=special)
        n = shape[d] if shape else 1
        return check(
            lambda T, v: F(T).softmin(v, d), [x], kind="scale", c=4, reduce_len=n, info=name
        )
    x = farg(rng, shape, dtype, scale=scale, edges=0.2, special=special)
    # x - tanh(x) cancels near 0; torch's float64 gelu is 0 where erf(x/sqrt2) rounds to -1
    # (gelu(-10) = -7.6e-23): their error is relative to the output's scale
    kind = "scale" if name.startswith(("gelu", "tanhshrink")) else "ew"
    # torch's gradient at NaN differs between its vector lanes and the scalar tail for these
    # (softshrink(NaN)' is 0 in a lane, g in the tail); softsign's at +-inf is its composite's
    # 0 * inf = NaN: not followed
    grad = not (special and name.split()[0] in LANE_NAN_GRAD)
    check(fn, [x], kind=kind, c=c, grad=grad, info=name)


def _gelu(T, x):
    """F.gelu; torch's float64 oracle written through erfc, exact where its own form, x/2·(1 +
    erf(x/√2)), is 0 because erf rounds to -1 (x < -8.3 in float64: gelu(-10.9) is -1e-25
    in pyrite's float32, which is right, and -0.0 in torch's float64)."""
    if T is torch and x.dtype == torch.float64:
        return 0.5 * x * torch.special.erfc(-x / math.sqrt(2.0))
    return F(T).gelu(x)


LANE_NAN_GRAD = {"softshrink", "hardshrink", "hardswish", "hardtanh", "elu", "selu", "celu",
                 "relu6", "softsign"}  # fmt: skip


# ---- normalization --------------------------------------------------------------------------
def _norm_grad_scale(name, x, w, k, eps):
    """The size of layer_norm's and rms_norm's input-gradient terms, 1/std·|w| (|g| <= 1): over
    a row of equal values 1/sqrt(eps), 316, which the outputs (|x̂·w + b| <= a few) understate.
    An expanded input sums them into one element, each rounded into the dtype: torch bfloat16's
    dx of float64's -301.2 is -300, pyrite's -302 (the nearer), and their sums over 13 equal
    values -0.25 and -2.25 for 0 (test_norm[879] at PYRITE_FUZZ_DRAWS=900)."""
    v = x.make(torch, True, False)[1].detach().numpy()
    n = math.prod(v.shape[v.ndim - k :])
    if v.size == 0 or n == 0:
        return 0.0
    rows = v.reshape(-1, n)
    if eps is None:
        eps = float(np.finfo(np.float32).eps)
    with np.errstate(invalid="ignore", over="ignore"):
        spread = (rows * rows).mean(1) if name == "rms_norm" else rows.var(1)
        r = 1.0 / np.sqrt(spread + eps)
    r = r[np.isfinite(r)]
    wmax = 1.0 if w is None else float(np.abs(w.base).max(initial=0.0))
    return float(r.max(initial=0.0)) * max(wmax, 1.0)


@pytest.mark.parametrize("seed", _seeds("norm"))
def test_norm(seed):
    rng = _case_rng("nn_norm", seed)
    name = str(
        rng.choice(
            ["layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm",
             "local_response_norm", "normalize"]
        )
    )  # fmt: skip
    dtype = _fdtype(rng, 0.2)
    special = 0.05 if rng.random() < 0.1 else 0.0
    eps = float(rng.choice((1e-5, 1e-3, 0.5)))
    aff = bool(rng.random() < 0.6)
    info = f"{name} eps={eps} affine={aff}"
    if name in ("layer_norm", "rms_norm"):
        shape = draw_shape(rng, rank=int(rng.integers(1, 5)), max_numel=512)
        k = int(rng.integers(1, len(shape) + 1))
        ns = shape[len(shape) - k :]
        x = farg(rng, shape, dtype, scale=float(rng.choice((1.0, 10.0))), special=special)
        args = [x]
        if aff:
            args.append(farg(rng, ns, dtype, view=False))
            if name == "layer_norm" and rng.random() < 0.7:
                args.append(farg(rng, ns, dtype, view=False))
        e = None if name == "rms_norm" and rng.random() < 0.3 else eps

        def fn(T, v, *wb):
            if name == "rms_norm":
                return F(T).rms_norm(v, ns, *wb, eps=e)
            return F(T).layer_norm(v, ns, *wb, eps=e)

        return check(
            fn,
            args,
            kind="scale",
            c=8,
            reduce_len=max(math.prod(ns), 1),
            info=f"{info} {ns}",
            grad_scale=_norm_grad_scale(name, x, args[1] if aff else None, len(ns), e),
        )
    if name == "normalize":
        shape = draw_shape(rng, rank=int(rng.integers(1, 5)), max_numel=512)
        d = int(rng.integers(len(shape)))
        p = float(rng.choice((2.0, 1.0, 3.0, math.inf)))
        x = farg(rng, shape, dtype, special=special)
        return check(
            lambda T, v: F(T).normalize(v, p, d, eps),
            [x],
            kind="scale",
            c=8,
            reduce_len=shape[d],
            info=f"{info} p={p} dim={d}",
        )
    # (N, C, *spatial)
    rank = int(rng.integers(2 if name == "batch_norm" else 3, 6))
    shape = list(draw_shape(rng, rank=rank, max_numel=512, zero=False))
    if name == "group_norm":
        g = int(rng.choice((1, 2, 3)))
        shape[1] = g * int(rng.choice((1, 2, 3)))
    shape = tuple(shape)
    c_ = shape[1]
    x = farg(rng, shape, dtype, scale=float(rng.choice((1.0, 10.0))), special=special)
    per_ch = math.prod(shape) // c_
    if name == "group_norm":
        args = [x] + ([farg(rng, (c_,), dtype, view=False)] * 1 if aff else [])
        if aff:
            args.append(farg(rng, (c_,), dtype, view=False))
        return check(
            lambda T, v, *wb: F(T).group_norm(v, g, *wb, eps=eps),
            args,
            kind="scale",
            c=8,
            reduce_len=per_ch * c_ // g,
            info=f"{info} groups={g}",
        )
    if name == "local_response_norm":
        if len(shape) >= 4:
            dtype = "float32"  # (torch's avg_pool3d under it has no bf16/f16 CPU kernel)
        x = farg(rng, shape, dtype, view=False)  # (torch's .view refuses strided inputs)
        size = int(rng.integers(1, 6))
        alpha, beta, k = float(rng.choice((1e-4, 0.5))), float(rng.choice((0.75, 1.5))), 1.0
        return check(
            lambda T, v: F(T).local_response_norm(v, size, alpha, beta, k),
            [x],
            kind="scale",
            c=16,
            reduce_len=size,
            info=f"{info} size={size} alpha={alpha} beta={beta}",
        )
    training = bool(rng.random() < 0.6) if name == "batch_norm" else bool(rng.random() < 0.8)
    if name == "batch_norm" and training and per_ch == 1:
        training = False  # (torch refuses one value a channel in training; checked elsewhere)
    momentum = float(rng.choice((0.1, 0.5, 1.0)))
    stats = name == "batch_norm" or rng.random() < 0.5
    args = [x]
    if stats:  # running stats, updated in place in training: compared after the call
        # (torch takes f32 stats with a half input only where the weights are f32 too)
        sdt = "float32" if rng.random() < 0.5 and not aff else dtype
        args.append(farg(rng, (c_,), sdt, view=False, grad=False))
        rv = farg(rng, (c_,), args[-1].dtype, view=False, grad=False)
        rv.base = np.abs(rv.base) + 0.5
        args.append(rv)
    if aff:
        args.append(farg(rng, (c_,), dtype, view=False))
        args.append(farg(rng, (c_,), dtype, view=False))

    def fn(T, v, *rest):
        rm, rvar = (rest[0], rest[1]) if stats else (None, None)
        w, b = (rest[-2], rest[-1]) if aff else (None, None)
        if name == "batch_norm":
            if T is torch:  # (torch's CPU backward misreads a channels-last-like view: BN_STRIDES)
                v = v.contiguous()
            out = F(T).batch_norm(v, rm, rvar, w, b, training, momentum, eps)
        else:
            out = F(T).instance_norm(v, rm, rvar, w, b, training, momentum, eps)
        return (out, rm, rvar) if stats else out

    n = (
        per_ch
        * (shape[0] if name == "batch_norm" else 1)
        // (1 if name == "batch_norm" else shape[0])
    )
    check(
        fn,
        args,
        kind="scale",
        c=8,
        reduce_len=max(n, 1),
        info=f"{info} training={training} momentum={momentum} stats={stats}",
    )


# ---- convolutions ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", _seeds("conv"))
def test_conv(seed):
    rng = _case_rng("nn_conv", seed)
    name = str(rng.choice(["conv1d", "conv2d", "conv2d", "conv3d", "convt1d", "convt2d"]))
    nd = int(name[-2])
    transpose = name.startswith("convt")
    dtype = _fdtype(rng, 0.15)
    groups = int(rng.choice((1, 1, 1, 2, 3)))
    cin_g, cout_g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    n = int(rng.choice((1, 2, 3)))
    small = nd == 3
    k = tuple(int(rng.choice((1, 2, 3) if small else (1, 2, 3, 4, 5))) for _ in range(nd))
    stride = tuple(int(rng.choice((1, 1, 2, 3))) for _ in range(nd))
    dil = tuple(int(rng.choice((1, 1, 2))) for _ in range(nd))
    pad = tuple(int(rng.integers(0, 3)) for _ in range(nd))
    size = tuple(
        int(rng.choice((1, 2, 3, 5, 7, 8) if small else (1, 3, 5, 7, 8, 11, 16))) for _ in range(nd)
    )
    bias = bool(rng.random() < 0.6)
    # weight: (Cout, Cin/g, *k) for conv; (Cin, Cout/g, *k) for the transpose
    x = farg(rng, (n, groups * cin_g) + size, dtype)
    wshape = (groups * cin_g, cout_g) + k if transpose else (groups * cout_g, cin_g) + k
    w = farg(rng, wshape, dtype, view=rng.random() < 0.3)
    args = [x, w] + ([farg(rng, (groups * cout_g,), dtype, view=False)] if bias else [])
    if transpose:
        outpad = tuple(int(rng.integers(0, max(s, d))) for s, d in zip(stride, dil))
        info = f"{name} k={k} stride={stride} pad={pad} outpad={outpad} dil={dil} groups={groups}"
        osz = [(i - 1) * s - 2 * p + d * (kk - 1) + o + 1
               for i, s, p, d, kk, o in zip(size, stride, pad, dil, k, outpad)]  # fmt: skip
        if min(osz) <= 0:
            return  # (torch's float64 kernel refuses the empty output its float32 one gives)
        fname = f"conv_transpose{nd}d"

        def fn(T, v, wt, *b):
            return getattr(F(T), fname)(
                v, wt, b[0] if b else None, stride, pad, outpad, groups, dil
            )
    else:
        r = rng.random()
        padding = "same" if r < 0.15 else "valid" if r < 0.25 else (pad[0] if r < 0.4 else pad)
        if padding == "same" and rng.random() < 0.8:
            stride = (1,) * nd  # (torch refuses 'same' with a stride)
        info = f"{name} k={k} stride={stride} pad={padding} dil={dil} groups={groups}"
        fname = f"conv{nd}d"

        def fn(T, v, wt, *b):
            return getattr(F(T), fname)(v, wt, b[0] if b else None, stride, padding, dil, groups)

    check(
        fn,
        args,
        kind="sum",
        reduce_len=cin_g * math.prod(k) + 1,
        abs_fn=fn,
        info=f"{info} bias={bias}",
    )


# ---- pooling --------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", _seeds("pool"))
def test_pool(seed):
    rng = _case_rng("nn_pool", seed)
    name = str(
        rng.choice(["max_pool", "max_pool", "avg_pool", "avg_pool", "lp_pool",
                    "adaptive_max_pool", "adaptive_avg_pool"])
    )  # fmt: skip
    nd = int(rng.integers(1, 4))
    if name == "lp_pool":
        nd = int(rng.integers(1, 3))
    batched = bool(rng.random() < 0.8)
    lead = (
        (int(rng.choice((1, 2))), int(rng.choice((1, 2, 3))))
        if batched
        else (int(rng.choice((1, 3))),)
    )
    size = tuple(
        int(rng.choice((1, 2, 3, 4, 5, 7, 9) if nd == 3 else (1, 2, 3, 5, 7, 8, 11)))
        for _ in range(nd)
    )
    shape = lead + size
    # ties move max's gradient and indices: distinct f32 values (no expanded view) there
    is_max = "max" in name
    dtype = "float32" if is_max and rng.random() < 0.7 else _fdtype(rng, 0.3)
    if name == "avg_pool" and nd == 3:
        dtype = "float32"  # (torch has no f16/bf16 avg_pool3d on the CPU)
    distinct = is_max and dtype == "float32"
    special = 0.1 if rng.random() < 0.1 else 0.0
    # (torch's max_pool3d backward aborts the process on some strided inputs: contiguous there)
    x = farg(rng, shape, dtype, special=special, view=not (is_max and nd == 3), expand=not is_max)
    if distinct:
        x.base = rng.permutation(x.base.size).reshape(x.base.shape).astype(np.float32) / 7 - 3
    grad = not is_max or (distinct and special == 0.0)
    if name.startswith("adaptive"):
        out = tuple(None if rng.random() < 0.15 else int(rng.integers(1, s + 3)) for s in size)
        osz = out[0] if nd == 1 else out
        kind = name.split("_")[1]
        fname = f"adaptive_{kind}_pool{nd}d"
        ret = kind == "max" and rng.random() < 0.4
        fn = (
            (lambda T, v: getattr(F(T), fname)(v, osz, return_indices=True))
            if ret
            else (lambda T, v: getattr(F(T), fname)(v, osz))
        )
        red = math.prod(-(-s // (o or s)) + 1 for s, o in zip(size, out))
        return check(
            fn, [x], kind="scale", c=4, reduce_len=red, grad=grad, info=f"{fname} {osz} ret={ret}"
        )
    k = tuple(int(rng.integers(1, min(s, 4) + 1)) for s in size)
    stride = None if rng.random() < 0.3 else tuple(int(rng.integers(1, 4)) for _ in range(nd))
    pad = tuple(int(rng.integers(0, kk // 2 + 1)) for kk in k)
    ceil = bool(rng.random() < 0.4)
    one = rng.random() < 0.3 or (name == "lp_pool" and nd == 1)  # ints (torch's lp_pool1d)
    ks = k[0] if one else k
    st = stride if stride is None or not one else stride[0]
    pd = pad[0] if one else pad
    if one:
        k, pad = (k[0],) * nd, (pad[0],) * nd
        if k[0] > min(size):
            k = (min(size),) * nd
            ks = k[0]
        if pad[0] > k[0] // 2:
            pad = (k[0] // 2,) * nd
            pd = pad[0]
    info = f"{name}{nd}d k={ks} stride={st} pad={pd} ceil={ceil}"
    if name == "max_pool":
        dil = tuple(int(rng.choice((1, 1, 2))) for _ in range(nd))
        ret = bool(rng.random() < 0.4)
        fname = f"max_pool{nd}d"

        def fn(T, v):
            return getattr(F(T), fname)(v, ks, st, pd, dil, ceil_mode=ceil, return_indices=ret)

        return check(fn, [x], kind="exact", grad=grad, info=f"{info} dil={dil} ret={ret}")
    if name == "lp_pool":
        p = float(rng.choice((1.0, 2.0, 3.0)))
        fname = f"lp_pool{nd}d"
        xp = farg(rng, shape, dtype, special=special)
        return check(
            lambda T, v: getattr(F(T), fname)(v, p, ks, st, ceil),
            [xp],
            kind="scale",
            c=16,
            reduce_len=math.prod(k),
            info=f"{info} p={p}",
        )
    cip = bool(rng.random() < 0.5)
    div = int(rng.integers(1, 6)) if nd > 1 and rng.random() < 0.25 else None
    fname = f"avg_pool{nd}d"

    def fn(T, v):
        if nd == 1:
            return F(T).avg_pool1d(v, ks, st, pd, ceil, cip)
        return getattr(F(T), fname)(v, ks, st, pd, ceil, cip, div)

    check(
        fn,
        [x],
        kind="scale",
        c=4,
        reduce_len=math.prod(k),
        grad=grad,
        info=f"{info} count_include_pad={cip} divisor={div}",
    )


# ---- pad, interpolate, unfold/fold ----------------------------------------------------------
@pytest.mark.parametrize("seed", _seeds("resample"))
def test_resample(seed):
    rng = _case_rng("nn_resample", seed)
    name = str(rng.choice(["pad", "pad", "interpolate", "interpolate", "unfold", "fold"]))
    dtype = _fdtype(rng, 0.2)
    if name == "pad":
        mode = str(rng.choice(["constant", "reflect", "replicate", "circular"]))
        if mode == "constant":
            shape = draw_shape(rng, rank=int(rng.integers(1, 5)), max_numel=512)
            npd = int(rng.integers(1, len(shape) + 1))
            pads = []
            for d in range(npd):
                n = shape[len(shape) - 1 - d]
                pads += [int(rng.integers(-min(n, 2), 4)) for _ in range(2)]
            value = float(rng.choice((0.0, 1.5, -2.0)))
        else:
            npd = int(rng.integers(1, 4))
            nlead = int(rng.integers(1, 3))
            shape = tuple(int(rng.choice((1, 2, 3))) for _ in range(nlead)) + tuple(
                int(rng.choice((1, 2, 3, 5, 7))) for _ in range(npd)
            )
            if mode == "circular" and npd == 1 and nlead == 1:
                shape = (1,) + shape
            pads = []
            for d in range(npd):
                n = shape[len(shape) - 1 - d]
                hi = {"reflect": n - 1, "replicate": 3, "circular": n - 1}[mode]
                pads += [int(rng.integers(0 if mode != "circular" else -min(n - 1, 1), hi + 1))
                         for _ in range(2)]  # fmt: skip
            value = None
        x = farg(rng, shape, dtype, special=0.1 if rng.random() < 0.1 else 0.0)
        pads = tuple(pads)
        return check(
            lambda T, v: F(T).pad(v, pads, mode=mode, value=value),
            [x],
            kind="exact",
            info=f"pad {mode} {pads} value={value}",
        )
    if name == "interpolate":
        mode = str(
            rng.choice(["nearest", "nearest-exact", "linear", "bilinear", "bicubic",
                        "trilinear", "area", "bilinear_aa", "bicubic_aa"])
        )  # fmt: skip
        aa = mode.endswith("_aa")
        mode = mode.removesuffix("_aa")
        nd = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(
            mode, int(rng.integers(1, 4))
        )
        size = tuple(
            int(rng.choice((1, 2, 3, 5, 8) if nd == 3 else (1, 2, 3, 5, 7, 8))) for _ in range(nd)
        )
        shape = (int(rng.choice((1, 2))), int(rng.choice((1, 3)))) + size
        x = farg(rng, shape, dtype)
        if rng.random() < 0.5:
            out = tuple(int(rng.integers(1, 2 * s + 3)) for s in size)
            kw = {"size": out[0] if nd == 1 and rng.random() < 0.5 else out}
        else:
            sf = tuple(float(rng.choice((0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 0.75))) for _ in range(nd))
            kw = {"scale_factor": sf[0] if rng.random() < 0.5 else sf}
            if rng.random() < 0.3:
                kw["recompute_scale_factor"] = True
        if mode in ("linear", "bilinear", "bicubic", "trilinear"):
            kw["align_corners"] = bool(rng.random() < 0.4)
        if "size" in kw:
            osz = kw["size"] if isinstance(kw["size"], tuple) else (kw["size"],) * nd
        else:
            sfs = kw["scale_factor"] if isinstance(kw["scale_factor"], tuple) else (sf[0],) * nd
            osz = tuple(int(i * f) for i, f in zip(size, sfs))
        if aa and min(osz) > 1:  # (torch's antialias to a width of 1 ignores the height's pass:
            kw["antialias"] = True  # (3, 1) -> (8, 1) of [1, 2, 4] gives eight 1s)
            x = farg(rng, shape, "float32")  # (torch has no f16/bf16 antialias on the CPU)
        return check(
            lambda T, v: F(T).interpolate(v, mode=mode, **kw),
            [x],
            kind="scale",
            c=16,
            reduce_len=16,
            info=f"interpolate {mode} {kw}",
        )
    k = tuple(int(rng.integers(1, 4)) for _ in range(2))
    dil = tuple(int(rng.choice((1, 1, 2))) for _ in range(2))
    pad = tuple(int(rng.integers(0, 2)) for _ in range(2))
    st = tuple(int(rng.integers(1, 3)) for _ in range(2))
    info = f"{name} k={k} dil={dil} pad={pad} stride={st}"
    if name == "unfold":
        shape = (int(rng.choice((1, 2))), int(rng.choice((1, 3)))) + tuple(
            int(rng.choice((3, 4, 5, 7))) for _ in range(2)
        )
        if rng.random() < 0.2:
            shape = shape[1:]
        x = farg(rng, shape, dtype)
        return check(lambda T, v: F(T).unfold(v, k, dil, pad, st), [x], kind="exact", info=info)
    osize = tuple(int(rng.choice((3, 4, 5, 7))) for _ in range(2))
    blocks = [
        (o + 2 * p - d * (kk - 1) - 1) // s + 1 for o, p, d, kk, s in zip(osize, pad, dil, k, st)
    ]
    if min(blocks) < 1:
        return
    c_ = int(rng.choice((1, 2)))
    shape = (int(rng.choice((1, 2))), c_ * math.prod(k), math.prod(blocks))
    x = farg(rng, shape, dtype)
    fn = lambda T, v: F(T).fold(v, osize, k, dil, pad, st)  # noqa: E731
    check(
        fn,
        [x],
        kind="sum",
        reduce_len=math.prod(k),
        abs_fn=fn,
        info=f"{info} output_size={osize}",
    )


# ---- losses ---------------------------------------------------------------------------------
LOSSES = ["cross_entropy", "cross_entropy", "cross_entropy_probs", "nll_loss", "bce",
          "bce_logits", "mse", "l1", "smooth_l1", "huber", "kl_div", "margin_ranking",
          "hinge_embedding", "multi_margin", "multilabel_margin", "soft_margin",
          "multilabel_soft_margin", "cosine_embedding", "triplet", "poisson_nll",
          "gaussian_nll", "ctc"]  # fmt: skip


@pytest.mark.parametrize("seed", _seeds("loss"))
def test_loss(seed):
    rng = _case_rng("nn_loss", seed)
    name = str(rng.choice(LOSSES))
    red = str(rng.choice(("mean", "sum", "none")))
    dtype = _fdtype(rng, 0.15)
    info = f"{name} reduction={red}"
    if name in ("multi_margin", "multilabel_margin"):
        dtype = "float32"  # (torch has no f16/bf16 kernel on the CPU)
    if name in ("cross_entropy", "cross_entropy_probs", "nll_loss", "multi_margin"):
        return _class_loss(rng, name, red, dtype, info)
    if name == "ctc":
        return _ctc(rng, red, info)
    shape = draw_shape(rng, rank=int(rng.integers(1, 4)), max_numel=256)
    n = max(math.prod(shape), 1)
    x = farg(rng, shape, dtype)
    y = farg(rng, shape, dtype)
    c = 8
    if name in ("mse", "l1"):
        fn = getattr(F(torch), f"{name}_loss").__name__
        return check(
            lambda T, a, b: getattr(F(T), fn)(a, b, reduction=red),
            [x, y],
            kind="scale",
            c=c,
            reduce_len=n,
            info=info,
        )
    if name in ("smooth_l1", "huber"):
        beta = float(rng.choice((1.0, 0.5, 0.0, 2.0)))
        if name == "huber" and beta == 0.0:
            beta = 0.25
        kw = {"beta": beta} if name == "smooth_l1" else {"delta": beta}
        fname = f"{name}_loss"
        return check(
            lambda T, a, b: getattr(F(T), fname)(a, b, reduction=red, **kw),
            [x, y],
            kind="scale",
            c=c,
            reduce_len=n,
            info=f"{info} {kw}",
        )
    if name in ("bce", "bce_logits"):
        t = farg(rng, shape, dtype, grad=rng.random() < 0.3)
        t.base = np.round(1 / (1 + np.exp(-t.base)) * 8) / 8  # targets in [0, 1]
        wt = (
            farg(rng, _suffix(rng, shape), dtype, view=False, grad=False)
            if rng.random() < 0.3
            else None
        )
        if name == "bce":
            p = farg(rng, shape, dtype)
            p.base = np.clip(np.round(1 / (1 + np.exp(-p.base)) * 64) / 64, 0, 1).astype(np.float32)
            args = [p, t] + ([wt] if wt else [])
            return check(
                lambda T, a, b, *w: F(T).binary_cross_entropy(a, b, *w, reduction=red),
                args,
                kind="scale",
                c=c,
                reduce_len=n,
                info=f"{info} weight={wt is not None}",
            )
        pw = (
            farg(rng, shape[-1:] if shape else (), dtype, view=False, grad=False)
            if rng.random() < 0.4
            else None
        )
        if pw is not None:
            pw.base = np.abs(pw.base) + 0.25
        args = [x, t] + [a for a in (wt, pw) if a is not None]

        def fn(T, a, b, *rest):
            it = iter(rest)
            w = next(it) if wt is not None else None
            p = next(it) if pw is not None else None
            return F(T).binary_cross_entropy_with_logits(a, b, w, reduction=red, pos_weight=p)

        return check(
            fn, args, kind="scale", c=c, reduce_len=n,
            info=f"{info} weight={wt is not None} pos_weight={pw is not None}",
        )  # fmt: skip
    if name == "kl_div":
        log_target = bool(rng.random() < 0.5)
        red_kl = str(rng.choice(("mean", "sum", "none", "batchmean")))
        if not log_target:
            y.base = np.abs(y.base)
            y.base[rng.random(y.base.shape) < 0.2] = 0.0
        return check(
            lambda T, a, b: F(T).kl_div(a, b, reduction=red_kl, log_target=log_target),
            [x, y],
            kind="scale",
            c=c,
            reduce_len=n,
            info=f"kl_div {red_kl} log_target={log_target}",
        )
    if name in ("margin_ranking", "hinge_embedding", "soft_margin"):
        sign = Arg(rng, shape, dtype, grad=False)
        sign.base = rng.choice((-1.0, 1.0), sign.view["base"]).astype(np.float32)
        m = float(rng.choice((0.0, 0.5, 1.0)))
        if name == "margin_ranking":
            return check(
                lambda T, a, b, s: F(T).margin_ranking_loss(a, b, s, margin=m, reduction=red),
                [x, y, sign], kind="scale", c=c, reduce_len=n, info=f"{info} margin={m}",
            )  # fmt: skip
        if name == "hinge_embedding":
            return check(
                lambda T, a, s: F(T).hinge_embedding_loss(a, s, margin=m, reduction=red),
                [x, sign], kind="scale", c=c, reduce_len=n, info=f"{info} margin={m}",
            )  # fmt: skip
        return check(
            lambda T, a, s: F(T).soft_margin_loss(a, s, reduction=red),
            [x, sign], kind="scale", c=c, reduce_len=n, info=info,
        )  # fmt: skip
    if name in ("multilabel_margin", "multilabel_soft_margin"):
        nb, cc = int(rng.choice((1, 2, 3, 5))), int(rng.choice((1, 2, 4, 7)))
        x = farg(rng, (nb, cc), dtype)
        if name == "multilabel_soft_margin":
            t = Arg(rng, (nb, cc), dtype, grad=False)
            t.base = rng.choice((0.0, 1.0), t.view["base"]).astype(np.float32)
            wt = farg(rng, (cc,), dtype, view=False, grad=False) if rng.random() < 0.3 else None
            return check(
                lambda T, a, b, *w: F(T).multilabel_soft_margin_loss(a, b, *w, reduction=red),
                [x, t] + ([wt] if wt else []), kind="scale", c=c, reduce_len=nb * cc, info=info,
            )  # fmt: skip
        t = Arg(rng, (nb, cc), "int64", view=False)
        t.base = rng.integers(-1, cc, (nb, cc)).astype(np.int64)
        return check(
            lambda T, a, b: F(T).multilabel_margin_loss(a, b, reduction=red),
            [x, t], kind="scale", c=c, reduce_len=nb * cc * cc, info=info,
        )  # fmt: skip
    if name in ("cosine_embedding", "triplet"):
        nb, d = int(rng.choice((1, 2, 3, 5))), int(rng.choice((1, 2, 4, 7, 16)))
        shp = (nb, d) if rng.random() < 0.85 else (d,)
        a, b = farg(rng, shp, dtype), farg(rng, shp, dtype)
        m = float(rng.choice((0.0, 0.5, 1.0)))
        if name == "cosine_embedding":
            s = Arg(rng, shp[:-1], "int64", view=False)
            s.base = rng.choice((-1, 1), shp[:-1]).astype(np.int64)
            return check(
                lambda T, u, v, w: F(T).cosine_embedding_loss(u, v, w, margin=m, reduction=red),
                [a, b, s], kind="scale", c=c, reduce_len=d * nb, info=f"{info} margin={m}",
            )  # fmt: skip
        cn = farg(rng, shp, dtype)
        p = float(rng.choice((2.0, 1.0, 3.0)))
        sw = bool(rng.random() < 0.3)
        return check(
            lambda T, u, v, w: F(T).triplet_margin_loss(
                u, v, w, margin=m + 0.5, p=p, swap=sw, reduction=red
            ),
            [a, b, cn], kind="scale", c=c, reduce_len=d * nb, info=f"{info} p={p} swap={sw}",
        )  # fmt: skip
    if name == "poisson_nll":
        log_input = bool(rng.random() < 0.5)
        full = bool(rng.random() < 0.5)
        t = farg(rng, shape, dtype, grad=False)
        t.base = np.abs(np.round(t.base * 4))
        if not log_input:
            x.base = np.abs(x.base)
        return check(
            lambda T, a, b: F(T).poisson_nll_loss(a, b, log_input, full, reduction=red),
            [x, t], kind="scale", c=c, reduce_len=n, info=f"{info} log_input={log_input} full={full}",
        )  # fmt: skip
    # gaussian_nll: var of the input's shape, or one less trailing dim, or a trailing 1
    full = bool(rng.random() < 0.5)
    r = rng.random()
    vshape = shape if r < 0.6 or not shape else shape[:-1] + (1,) if r < 0.8 else shape[:-1]
    var = farg(rng, vshape, dtype)
    var.base = np.abs(var.base) + 0.125
    return check(
        lambda T, a, b, v: F(T).gaussian_nll_loss(a, b, v, full=full, eps=1e-6, reduction=red),
        [x, y, var], kind="scale", c=c, reduce_len=n, info=f"{info} full={full} var={vshape}",
    )  # fmt: skip


def _suffix(rng, shape):
    """A shape that broadcasts to shape: a suffix, some dims 1."""
    sub = shape[len(shape) - int(rng.integers(0, len(shape) + 1)) :]
    return tuple(1 if rng.random() < 0.3 else n for n in sub)


def _class_loss(rng, name, red, dtype, info):
    """cross_entropy (class indices or probabilities), nll_loss, multi_margin: input (N, C, *d)
    or (C,); weights, ignore_index, label_smoothing."""
    c_ = int(rng.choice((1, 2, 3, 5, 8)))
    r = rng.random()
    if r < 0.15 and name != "multi_margin":
        shape = (c_,)
    elif r < 0.7 or name == "multi_margin":
        shape = (int(rng.choice((1, 2, 3, 7))), c_)
    else:
        shape = (int(rng.choice((1, 2))), c_) + draw_shape(
            rng, rank=int(rng.integers(1, 3)), max_numel=12, zero=False
        )
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    x = farg(rng, shape, dtype, scale=float(rng.choice((1.0, 5.0))))
    wt = None
    if rng.random() < 0.35:
        wt = farg(rng, (c_,), dtype, view=False, grad=False)
        wt.base = np.abs(wt.base) + 0.125
    if name == "cross_entropy_probs":
        t = farg(rng, shape, dtype, grad=rng.random() < 0.3)
        t.base = np.abs(t.base)  # (torch takes any values; not normalized)
        ls = float(rng.choice((0.0, 0.0, 0.1, 0.5)))
        return check(
            lambda T, a, b, *w: F(T).cross_entropy(a, b, *w, reduction=red, label_smoothing=ls),
            [x, t] + ([wt] if wt else []), kind="scale", c=8, reduce_len=max(math.prod(shape), 1),
            info=f"{info} label_smoothing={ls} weight={wt is not None}",
        )  # fmt: skip
    t = iarg(rng, tshape, 0, c_)
    ign = -100
    if rng.random() < 0.4:
        ign = int(rng.choice((-100, 0, c_ - 1, -1)))
        mask = rng.random(t.base.shape) < 0.3
        t.base = np.where(mask, ign, t.base).astype(np.int64)
    n = max(math.prod(shape), 1)
    if name == "multi_margin":
        p = int(rng.choice((1, 2)))
        m = float(rng.choice((1.0, 0.5)))
        return check(
            lambda T, a, b, *w: F(T).multi_margin_loss(a, b, p, m, *w, reduction=red),
            [x, t] + ([wt] if wt else []), kind="scale", c=8, reduce_len=n,
            info=f"{info} p={p} margin={m} weight={wt is not None}",
        )  # fmt: skip
    if name == "nll_loss":
        return check(
            lambda T, a, b, *w: F(T).nll_loss(
                a.log_softmax(1 if a.dim() > 1 else 0), b, *w, ignore_index=ign, reduction=red
            ),
            [x, t] + ([wt] if wt else []), kind="scale", c=8, reduce_len=n,
            info=f"{info} ignore_index={ign} weight={wt is not None}",
        )  # fmt: skip
    ls = float(rng.choice((0.0, 0.0, 0.1, 0.5)))
    return check(
        lambda T, a, b, *w: F(T).cross_entropy(
            a, b, *w, ignore_index=ign, reduction=red, label_smoothing=ls
        ),
        [x, t] + ([wt] if wt else []), kind="scale", c=8, reduce_len=n,
        info=f"{info} ignore_index={ign} label_smoothing={ls} weight={wt is not None}",
    )  # fmt: skip


def _ctc(rng, red, info):
    """ctc_loss on log_softmax of drawn logits; padded (N, S) or concatenated targets."""
    tlen, nb, c_ = int(rng.integers(1, 12)), int(rng.integers(1, 4)), int(rng.integers(2, 6))
    blank = int(rng.choice((0, c_ - 1)))
    x = farg(rng, (tlen, nb, c_), "float32")
    in_len = [int(rng.integers(max(1, tlen - 3), tlen + 1)) for _ in range(nb)]
    tg_len = [int(rng.integers(0, min(il, 5) + 1)) for il in in_len]
    labels = [l for l in range(c_) if l != blank]
    smax = max(max(tg_len), 1)
    tg = np.array(
        [[int(rng.choice(labels)) for _ in range(smax)] for _ in range(nb)], dtype=np.int64
    )
    concat = bool(rng.random() < 0.3)
    targets = Arg(rng, (sum(tg_len),) if concat else (nb, smax), "int64", view=False)
    targets.base = (
        np.concatenate([tg[i, : tg_len[i]] for i in range(nb)]).astype(np.int64) if concat else tg
    )
    zi = bool(rng.random() < 0.5)

    def fn(T, v, tt):
        il = T.tensor(in_len)
        tl = T.tensor(tg_len)
        return F(T).ctc_loss(
            v.log_softmax(2), tt, il, tl, blank=blank, reduction=red, zero_infinity=zi
        )

    check(
        fn, [x, targets], kind="scale", c=16, reduce_len=tlen * c_ * 4,
        info=f"ctc {info} blank={blank} in={in_len} tg={tg_len} concat={concat} zero_inf={zi}",
    )  # fmt: skip


# ---- embedding, embedding_bag, one_hot, scaled_dot_product_attention ------------------------
@pytest.mark.parametrize("seed", _seeds("embed"))
def test_embed(seed):
    rng = _case_rng("nn_embed", seed)
    name = str(rng.choice(["embedding", "embedding_bag", "one_hot", "sdpa", "sdpa"]))
    dtype = _fdtype(rng, 0.2)
    if name == "one_hot":
        shape = draw_shape(rng, rank=int(rng.integers(0, 4)), max_numel=64)
        nc = int(rng.integers(1, 7))
        idx = iarg(rng, shape, 0, nc, view=True)
        k = -1 if rng.random() < 0.3 else nc + int(rng.integers(0, 3))
        return check(lambda T, i: F(T).one_hot(i, k), [idx], kind="exact", info=f"one_hot {k}")
    if name == "embedding":
        num, dim = int(rng.choice((1, 3, 5, 11))), int(rng.choice((1, 2, 4, 7)))
        w = farg(rng, (num, dim), dtype, view=rng.random() < 0.4)
        idx = iarg(rng, draw_shape(rng, rank=int(rng.integers(0, 4)), max_numel=32), 0, num)
        pi = int(rng.integers(-num, num)) if rng.random() < 0.4 else None
        mn = float(rng.choice((0.5, 1.0, 2.0))) if rng.random() < 0.3 else None
        nt = float(rng.choice((1.0, 2.0, 3.0)))
        if mn is not None:  # the renorm writes the weight in place: a contiguous leaf
            w = farg(rng, (num, dim), "float32", view=False)

        def fn(T, wt, i):
            if mn is None:
                return F(T).embedding(i, wt, pi)
            with T.no_grad():  # (torch's renorm is an in-place write on the weight)
                F(T).embedding(i, wt, pi, mn, nt)
            return F(T).embedding(i, wt, pi), wt * 1

        return check(
            fn, [w, idx], kind="scale", c=4, info=f"embedding padding_idx={pi} max_norm={mn} {nt}"
        )
    if name == "embedding_bag":
        num, dim = int(rng.choice((2, 5, 11))), int(rng.choice((1, 3, 4)))
        w = farg(rng, (num, dim), "float32", view=rng.random() < 0.4)
        mode = str(rng.choice(("sum", "mean", "max")))
        pi = int(rng.integers(0, num)) if rng.random() < 0.3 else None
        if rng.random() < 0.4:  # 2-D input: bags of equal size
            nb, bs = int(rng.integers(1, 4)), int(rng.integers(1, 5))
            idx = iarg(rng, (nb, bs), 0, num)
            psw = (
                farg(rng, (nb, bs), "float32", view=False)
                if mode == "sum" and rng.random() < 0.4
                else None
            )
            args = [w, idx] + ([psw] if psw else [])
            fn = lambda T, wt, i, *p: F(T).embedding_bag(  # noqa: E731
                i, wt, mode=mode, per_sample_weights=p[0] if p else None, padding_idx=pi
            )
            return check(
                fn, args, kind="scale", c=4, reduce_len=bs,
                grad=mode != "max", info=f"embedding_bag 2d {mode} pi={pi} psw={psw is not None}",
            )  # fmt: skip
        total = int(rng.integers(0, 9))
        idx = iarg(rng, (total,), 0, num)
        nbag = int(rng.integers(1, 4))
        offs = sorted(int(o) for o in rng.integers(0, total + 1, nbag - 1))
        last = bool(rng.random() < 0.3)
        offs = [0] + offs + ([total] if last else [])
        off = Arg(rng, (len(offs),), "int64", view=False)
        off.base = np.array(offs, dtype=np.int64)
        psw = (
            farg(rng, (total,), "float32", view=False)
            if mode == "sum" and rng.random() < 0.4
            else None
        )
        args = [w, idx, off] + ([psw] if psw else [])

        def fn(T, wt, i, o, *p):
            return F(T).embedding_bag(
                i, wt, o, mode=mode, per_sample_weights=p[0] if p else None,
                include_last_offset=last, padding_idx=pi,
            )  # fmt: skip

        return check(
            fn, args, kind="scale", c=4, reduce_len=max(total, 1), grad=mode != "max",
            info=f"embedding_bag {mode} offsets={offs} last={last} pi={pi} psw={psw is not None}",
        )  # fmt: skip
    return _sdpa(rng, dtype)


def _sdpa(rng, dtype):
    """scaled_dot_product_attention: (B, H, L, E) with batch dims drawn, masks bool or float
    (broadcast), is_causal, scale, GQA (H a multiple of the key/value heads)."""
    b = draw_shape(rng, rank=int(rng.integers(0, 2)), max_numel=3, zero=False)
    hkv = int(rng.choice((1, 2)))
    gqa = bool(rng.random() < 0.25)
    hq = hkv * int(rng.choice((1, 2, 3))) if gqa else hkv
    lq, s = int(rng.choice((1, 2, 3, 5, 8, 13))), int(rng.choice((1, 2, 3, 5, 8, 13)))
    e, ev = int(rng.choice((1, 2, 4, 8, 16))), int(rng.choice((1, 2, 4, 8)))
    q = farg(rng, b + (hq, lq, e), dtype)
    k = farg(rng, b + (hkv, s, e), dtype)
    v = farg(rng, b + (hkv, s, ev), dtype)
    args = [q, k, v]
    r = rng.random()
    mask, causal = None, False
    if r < 0.3:
        causal = True
    elif r < 0.6:
        mshape = _suffix(rng, b + (hq, lq, s))
        while len(mshape) < 2:  # (torch's math path indexes dim -2 of the mask)
            mshape = (1,) + mshape
        if rng.random() < 0.5 and mshape:
            mask = Arg(rng, mshape, "bool", view=False, grad=False)
            if mshape[-1] == s:  # (a row with no key is NaN in torch's math)
                mask.base[..., 0] = True
            else:
                mask.base[...] = True
        else:
            mask = farg(rng, mshape, dtype, grad=rng.random() < 0.3)
        args.append(mask)
    scale = None if rng.random() < 0.6 else float(rng.choice((0.5, 1.0, 0.125)))

    def fn(T, qq, kk, vv, *m):
        kw = {"enable_gqa": True} if gqa else {}
        return F(T).scaled_dot_product_attention(
            qq, kk, vv, m[0] if m else None, 0.0, causal, scale=scale, **kw
        )

    mname = None if mask is None else mask.dtype
    check(
        fn, args, kind="scale", c=8, reduce_len=max(s, e),
        info=f"sdpa hq={hq} hkv={hkv} gqa={gqa} causal={causal} mask={mname} scale={scale}",
    )  # fmt: skip
