"""nn.functional's activations against torch CPU (float64), through the op table.

Inputs: awkward shapes laid out contiguous, transposed, strided and expanded, plus special
values (±0, ±inf, NaN, ±1e30, ±88, ±100) where torch's answer is defined. Tolerances, from
the WGSL accuracy table (tests/test_elementwise.py's header) and the helpers' measured bounds:
  selects, clamps, +, *, / (hardtanh .. hardswish, softsign, shrinks)   4 ULP
  expm1-based (elu, selu, celu): exp's 3 + 2·|x| ULP, +16 ULP for the series near 0
  log1p(exp(-|x|)) (logsigmoid, softplus, mish): exp's error, then log1p's 16 ULP; mish adds
    tanh's 16 ULP; torch's own f32-style formula for softplus is the reference, as in
    test_elementwise.py
  tanhshrink: x - tanh(x) cancels for small |x| (x³/3 left of x): 16 ULP of tanh relative to
    |x|, so an absolute floor of 16 ULP·|x| ≤ 16 ULP·5 on [-5, 5]
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from tests.optable import OpInfo, assert_close, check_row
from tests.test_elementwise import ULP, exp_tol, tol, uni

SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 88.0, -88.0, 100.0, -100.0, 3.0, -3.0)
SHAPES = ((1,), (13,), (257,), (13, 17))


def T(fn, **kw):
    """torch's function on float64 tensors, rounded once to f32 (what a correct kernel stores)."""

    def ref(*arrays, **kws):
        r = fn(*[torch.from_numpy(np.asarray(a)) for a in arrays], **kw, **kws).numpy()
        with np.errstate(over="ignore"):
            return r.astype(np.float32).astype(np.float64)

    return ref


def row(name, fn_kw, lo, hi, tolf, specials=SPECIAL, ref=None):
    kw = dict(fn_kw)
    label = name + ("" if not kw else str(kw))
    return OpInfo(
        label,
        lambda x, **k: getattr(F, name)(x, **k),
        ref or T(getattr(TF, name)),
        uni(lo, hi, specials, SHAPES, kw=kw),
        tolf,
    )


ROWS = [
    row("relu", {}, -5, 5, tol(0)),
    row("relu6", {}, -8, 8, tol(0)),
    row("hardtanh", {}, -3, 3, tol(0)),
    row("hardtanh", {"min_val": -0.5, "max_val": 2.0}, -3, 3, tol(0)),
    row("leaky_relu", {}, -5, 5, tol(1)),
    row("leaky_relu", {"negative_slope": 0.2}, -5, 5, tol(1)),
    row("elu", {}, -10, 10, exp_tol(16)),
    row("elu", {"alpha": 0.5}, -10, 10, exp_tol(17)),
    row("selu", {}, -10, 10, exp_tol(18)),
    row("celu", {}, -10, 10, exp_tol(17)),
    row("celu", {"alpha": 2.5}, -10, 10, exp_tol(18)),
    row("silu", {}, -20, 20, exp_tol(4)),
    row("mish", {}, -20, 20, exp_tol(40), specials=(0.0, np.inf, np.nan, 30.0, -30.0, 3.0)),
    row("gelu", {}, -8, 8, lambda i, e: (2.0**-21, 8 * ULP)),
    row("hardswish", {}, -5, 5, tol(4)),
    row("hardsigmoid", {}, -5, 5, tol(4)),
    row("logsigmoid", {}, -30, 30, exp_tol(24, cap=30.0)),
    row("softsign", {}, -10, 10, tol(4)),
    row(
        "softplus",
        {},
        -30,
        30,
        lambda i, e: (2.0**-21, (24 + 60) * ULP),
        specials=(0.0, np.inf, -np.inf, np.nan, 30.0, -30.0, 3.0),
    ),
    row("softplus", {"beta": 2.0, "threshold": 5.0}, -10, 10, lambda i, e: (2.0**-21, 84 * ULP)),
    row("tanhshrink", {}, -5, 5, tol(16, 16 * ULP * 5)),
    row("softshrink", {}, -3, 3, tol(1)),
    row("softshrink", {"lambd": 1.5}, -3, 3, tol(1)),
    row("hardshrink", {}, -3, 3, tol(0)),
    row("hardshrink", {"lambd": 1.5}, -3, 3, tol(0)),
    row("threshold", {"threshold": 0.5, "value": -2.0}, -3, 3, tol(0)),
    row("sigmoid", {}, -20, 20, exp_tol(4)),
    row("tanh", {}, -10, 10, tol(16)),
]


@pytest.mark.parametrize("r", ROWS, ids=lambda r: r.name)
def test_activation(r, rng):
    check_row(r, rng)


F16_ROWS = [r for r in ROWS if r.name in ("hardswish", "selu", "logsigmoid", "softshrink", "glu")]


@pytest.mark.parametrize("r", F16_ROWS, ids=lambda r: r.name)
def test_activation_float16(r, rng):
    """f16 storage, f32 compute: within one f16 rounding (check_row's f16 floor)."""
    r = OpInfo(r.name, r.op, r.ref, [s for s in r.samples if s.name != "specials"], r.tol)
    check_row(r, rng, "float16")


# ---- along a dim, and weights ----------------------------------------------------------------
def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64))


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu(dim, rng):
    x = _f32(rng.standard_normal((6, 10, 4)) * 4)
    want = TF.glu(_t(x), dim)
    assert_close(
        F.glu(pr.tensor(x), dim).numpy(),
        want.numpy(),
        2.0**-126,
        exp_tol(4)([x], None)[1],
        f"glu dim={dim}",
    )
    xt = pr.tensor(np.ascontiguousarray(x.transpose(2, 1, 0))).permute(2, 1, 0)
    assert_close(F.glu(xt, dim).numpy(), want.numpy(), 2.0**-126, 30 * ULP, "glu strided")
    with pytest.raises(pr.ShapeError, match="Halving dimension must be even"):
        F.glu(pr.ones(3, 5), 1)
    with pytest.raises(ValueError, match="glu does not support scalars"):
        F.glu(pr.tensor(1.0))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin_and_stacklevel(dim, rng):
    x = _f32(rng.standard_normal((5, 7, 3)) * 3)
    want = TF.softmin(_t(x), dim)
    assert_close(F.softmin(pr.tensor(x), dim).numpy(), want.numpy(), 1e-7, 32 * ULP, "softmin")
    # F.softmax(input, dim, _stacklevel, dtype): positional _stacklevel, then dtype
    got = F.softmax(pr.tensor(x), dim, 3, pr.float32)
    assert_close(got.numpy(), TF.softmax(_t(x), dim).numpy(), 1e-7, 32 * ULP, "softmax positional")
    got = F.log_softmax(pr.tensor(x).half(), dim, dtype=pr.float32)
    assert got.dtype is pr.float32
    got = F.softmin(pr.tensor(x).half(), dim, dtype=pr.float32)
    assert got.dtype is pr.float32


@pytest.mark.parametrize("wshape", [(1,), (), (7,)])
def test_prelu(wshape, rng):
    x = _f32(rng.standard_normal((3, 7, 5)) * 3)
    w = _f32(rng.standard_normal(wshape))
    want = TF.prelu(_t(x), _t(w))
    assert_close(F.prelu(pr.tensor(x), pr.tensor(w)).numpy(), want.numpy(), 0, ULP, "prelu")
    assert_close(pr.prelu(pr.tensor(x), pr.tensor(w)).numpy(), want.numpy(), 0, ULP, "pr.prelu")
    assert_close(pr.tensor(x).prelu(pr.tensor(w)).numpy(), want.numpy(), 0, ULP, "x.prelu")


def test_prelu_shapes_and_errors():
    x0 = pr.tensor(-2.0)
    assert F.prelu(x0, pr.tensor([0.25])).item() == -0.5
    assert F.prelu(pr.tensor([-1.0, 2.0]), pr.tensor([0.5])).tolist() == [-0.5, 2.0]
    with pytest.raises(pr.ShapeError, match="Mismatch of parameter numbers and input channel"):
        F.prelu(pr.ones(2, 3, 4), pr.ones(4))
    with pytest.raises(pr.ShapeError, match="channel size = 1"):
        F.prelu(pr.ones(5), pr.ones(5))  # a 1-D input has one channel, as in torch
    with pytest.raises(ValueError, match="scalar or 1D tensor"):
        F.prelu(pr.ones(2, 3), pr.ones(3, 1))
    with pytest.raises(TypeError, match="Type promoting not supported"):
        F.prelu(pr.ones(2, 3), pr.ones(3).half())


# ---- rrelu ---------------------------------------------------------------------------------
def test_rrelu_eval_is_mean_slope(rng):
    x = _f32(rng.standard_normal((4, 9)) * 3)
    for lo, up in ((1 / 8, 1 / 3), (0.1, 0.1), (0.0, 1.0)):
        want = TF.rrelu(_t(x), lo, up, training=False)
        assert_close(F.rrelu(pr.tensor(x), lo, up).numpy(), want.numpy(), 0, ULP, "rrelu eval")
    with pytest.raises(ValueError, match="Lower bound"):
        F.rrelu(pr.ones(2), 0.5, 0.1)
    with pytest.raises(ValueError, match="Lower bound"):
        F.rrelu(pr.ones(2), 0.5, 0.1, training=True)


def test_rrelu_training_samples_per_element():
    """Each negative element gets its own slope in [lower, upper): the slopes fill the range
    uniformly (mean (l+u)/2, variance (u-l)²/12), positives pass, a seed repeats the draw."""
    n, lo, up = 100_003, 0.1, 0.4
    x = pr.full((n,), -1.0)
    pr.manual_seed(7)
    y = F.rrelu(x, lo, up, training=True).numpy().astype(np.float64)
    pr.manual_seed(7)
    y2 = F.rrelu(x, lo, up, training=True).numpy()
    np.testing.assert_array_equal(y, y2)
    slopes = -y
    assert slopes.min() >= lo and slopes.max() <= up
    sd = (up - lo) / math.sqrt(12)
    assert abs(slopes.mean() - (lo + up) / 2) < 6 * sd / math.sqrt(n)
    assert abs(slopes.std() - sd) < 0.01 * sd * 10
    assert len(np.unique(slopes)) > n // 2, "one slope per element"
    pos = pr.tensor([0.0, 2.0, 3.5, float("nan")])
    got = F.rrelu(pos, lo, up, training=True).numpy()
    np.testing.assert_array_equal(got[:3], [0.0, 2.0, 3.5])
    assert math.isnan(got[3])
    z = pr.full((5,), -2.0)
    assert F.rrelu_(z, lo, up, training=True) is z and (z.numpy() < 0).all()


# ---- in place ------------------------------------------------------------------------------
INPLACE = [
    ("relu_", "relu", {}),
    ("elu_", "elu", {"alpha": 0.7}),
    ("leaky_relu_", "leaky_relu", {"negative_slope": 0.3}),
    ("hardtanh_", "hardtanh", {"min_val": -0.5, "max_val": 0.5}),
    ("threshold_", "threshold", {"threshold": 0.2, "value": 9.0}),
    ("celu_", "celu", {"alpha": 1.5}),
    ("selu_", "selu", {}),
    ("rrelu_", "rrelu", {}),
]


@pytest.mark.parametrize("fname,name,kw", INPLACE, ids=[i[0] for i in INPLACE])
def test_inplace_forms(fname, name, kw, rng):
    """F.<name>_ and F.<name>(inplace=True) write into the input's own buffer (a strided view
    here: only its elements change) and return it."""
    base = _f32(rng.standard_normal((6, 10)) * 3)
    want = getattr(TF, name)(_t(base[:, ::2]), **kw).numpy()
    for call in ("underscore", "flag"):
        full = pr.tensor(base)
        view = full[:, ::2]
        if call == "underscore":
            got = getattr(F, fname)(view, **kw)
        else:
            got = getattr(F, name)(view, **kw, inplace=True)
        assert got is view
        assert_close(view.numpy(), want, 2.0**-126, 64 * ULP, f"{fname} {call}")
        np.testing.assert_array_equal(full.numpy()[:, 1::2], base[:, 1::2].astype(np.float32))


def test_inplace_flag_on_other_activations(rng):
    x = _f32(rng.standard_normal((4, 5)) * 3)
    for name in ("relu6", "silu", "mish", "hardswish", "hardsigmoid", "dropout"):
        t = pr.tensor(x)
        kw = {"training": False} if name == "dropout" else {}
        out = getattr(F, name)(t, inplace=True, **kw)
        assert out is t
        want = getattr(TF, name)(_t(x), **kw).numpy()
        assert_close(t.numpy(), want, 2.0**-126, 64 * ULP, f"{name} inplace")


def test_toplevel_and_method_spellings(rng):
    x = _f32(rng.standard_normal((3, 8)) * 3)
    cases = [
        (pr.selu, torch.selu, ()),
        (pr.celu, torch.celu, (0.5,)),
        (pr.threshold, torch.threshold, (0.1, 5.0)),
        (pr.hardshrink, torch.hardshrink, (0.7,)),
        (pr.rrelu, torch.rrelu, (0.2, 0.3)),
    ]
    for mine, theirs, args in cases:
        assert_close(
            mine(pr.tensor(x), *args).numpy(),
            theirs(_t(x), *args).numpy(),
            2.0**-126,
            64 * ULP,
            mine.__name__,
        )
    assert_close(pr.tensor(x).hardshrink(0.3).numpy(), _t(x).hardshrink(0.3).numpy(), 0, 0)
    for name in ("relu_", "selu_", "celu_", "sigmoid_", "tanh_"):
        t = pr.tensor(x)
        assert getattr(pr, name)(t) is t
        want = getattr(torch, name)(_t(x)).numpy()
        assert_close(t.numpy(), want, 2.0**-126, 64 * ULP, f"pr.{name}")
    t = pr.tensor(x)
    assert pr.threshold_(t, 0.0, -1.0) is t
    assert pr.rrelu_(t) is t


# ---- dtypes and errors ---------------------------------------------------------------------
def test_integer_inputs_as_torch():
    xi = pr.tensor([1, -2, 3])
    assert F.relu(xi).dtype is pr.int32 and F.relu(xi).tolist() == [1, 0, 3]
    assert F.relu6(pr.tensor([1, 7, -3])).tolist() == [1, 6, 0]
    assert F.hardtanh(xi).tolist() == [1, -1, 1]
    assert F.threshold(xi, 0.5, 2.0).tolist() == [1, 2, 3]
    assert F.threshold(xi, 0.5, 2.0).dtype is pr.int32
    assert F.softsign(pr.tensor([1, 2])).dtype is pr.float32
    assert F.tanhshrink(pr.tensor([1, 2])).dtype is pr.float32
    for name in (
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "gelu",
        "silu",
        "mish",
        "hardswish",
        "hardsigmoid",
        "logsigmoid",
        "softplus",
        "softshrink",
        "hardshrink",
        "glu",
    ):
        with pytest.raises(TypeError, match="floating point"):
            getattr(F, name)(pr.tensor([2, -2]))
    for name in ("relu", "hardtanh", "threshold"):
        args = (0.0, 1.0) if name == "threshold" else ()
        with pytest.raises(TypeError, match="bool"):
            getattr(F, name)(pr.tensor([True, False]), *args)
    with pytest.raises(TypeError, match="argument 'input' must be Tensor"):
        F.selu([1.0, 2.0])


def test_argument_errors():
    x = pr.ones(3)
    with pytest.raises(ValueError, match="lambda must be in range"):
        F.softshrink(x, -1.0)
    with pytest.raises(RuntimeError, match="alpha cannot be 0 for CELU"):
        F.celu(x, 0.0)
    with pytest.raises(ValueError, match="min_val .* cannot be greater than max_val"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="gelu approximate"):
        F.gelu(x, approximate="fast")


def test_nan_propagates_through_branches():
    """A NaN input is NaN out for every activation with a comparison in it (torch's)."""
    nan = pr.tensor([float("nan"), 1.0])
    for name in (
        "relu",
        "relu6",
        "hardtanh",
        "leaky_relu",
        "elu",
        "selu",
        "celu",
        "hardsigmoid",
        "hardswish",
        "logsigmoid",
        "softshrink",
        "hardshrink",
        "rrelu",
    ):
        assert math.isnan(getattr(F, name)(nan).numpy()[0]), name
    assert math.isnan(F.threshold(nan, 0.0, 5.0).numpy()[0])


def test_gumbel_softmax(rng):
    """Rows sum to 1; hard gives one-hot rows; the argmax of logits + Gumbel noise picks class
    k with probability softmax(logits)_k (the Gumbel-max trick), checked on 20,000 rows."""
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    n = 20_000
    x = pr.tensor(np.tile(logits, (n, 1)).astype(np.float32))
    pr.manual_seed(3)
    y = F.gumbel_softmax(x, tau=0.5).numpy().astype(np.float64)
    np.testing.assert_allclose(y.sum(1), 1.0, atol=1e-5)
    h = F.gumbel_softmax(x, hard=True).numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and (h.sum(1) == 1).all()
    freq = h.mean(0)
    sd = np.sqrt(np.exp(logits) * (1 - np.exp(logits)) / n)
    assert (np.abs(freq - np.exp(logits)) < 6 * sd).all(), freq
    hd = F.gumbel_softmax(x.T, hard=True, dim=0).numpy()
    assert (hd.sum(0) == 1).all()


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_integer_hardtanh_and_threshold():
    import torch

    x = [-3, -1, 0, 1, 2, 3]
    for f in (
        lambda F, t: F.hardtanh(t, -0.5, 2.5),  # bounds cast to int first: -0.5 -> 0, 2.5 -> 2
        lambda F, t: F.hardtanh(t, -1.5, 1.5),
        lambda F, t: F.relu6(t),
    ):
        want = f(torch.nn.functional, torch.tensor(x, dtype=torch.int8))
        got = f(pr.nn.functional, pr.tensor(x, dtype=pr.int8))
        assert got.dtype is pr.int8 and got.tolist() == want.tolist()
    with pytest.raises(RuntimeError, match="overflow"):  # -2.0 does not fit a uint8
        pr.nn.functional.threshold(pr.tensor([1, 2], dtype=pr.uint8), 0.3, -2.0)


def test_sweep_softmax_dtype_by_position_on_bfloat16():
    # ops/fallback.py missed a dtype passed by position and narrowed the float32 result
    x = pr.tensor([1.5, 2.0], dtype=pr.bfloat16)
    assert pr.nn.functional.softmax(x, dim=-1, dtype=pr.float32).dtype is pr.float32
    assert pr.softmax(x.float(), -1, pr.bfloat16).dtype is pr.bfloat16
