"""pyrite.nn.functional against torch.nn.functional (CPU, float64) on random awkward shapes.

Tolerances: elementwise activations a few ULP (WGSL exp/log/erf: a few ULP each, relative);
losses reduce n terms, so n·u·Σ|terms| absolute (Higham §4.2) on top; attention is two dot
products of length E and S around a softmax: (E + S + 8)·u relative to the magnitudes involved.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F

U = 2.0**-24


def _t(a):
    return (
        torch.from_numpy(np.asarray(a)).to(torch.float64)
        if np.asarray(a).dtype.kind == "f"
        else torch.from_numpy(np.asarray(a).astype(np.int64))
    )


def _p(a):
    a = np.asarray(a)
    return pr.tensor(a.astype(np.float32) if a.dtype.kind == "f" else a.astype(np.int32))


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def close(got, want, atol, rtol=8 * U, what=""):
    got = got.numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    np.testing.assert_allclose(
        got.astype(np.float64), want, atol=atol, rtol=rtol, err_msg=what, equal_nan=True
    )


# ---- activations ---------------------------------------------------------------------------
ACTS = [
    ("relu", {}),
    ("relu6", {}),
    ("leaky_relu", {}),
    ("leaky_relu", {"negative_slope": 0.2}),
    ("elu", {}),
    ("elu", {"alpha": 0.5}),
    ("gelu", {}),
    ("gelu", {"approximate": "tanh"}),
    ("silu", {}),
    ("softplus", {}),
    ("softplus", {"beta": 2.0, "threshold": 5.0}),
    ("sigmoid", {}),
    ("tanh", {}),
    ("hardtanh", {}),
    ("hardtanh", {"min_val": -0.5, "max_val": 2.0}),
]


@pytest.mark.parametrize("name,kw", ACTS, ids=lambda v: str(v))
def test_activation(name, kw, rng):
    x = _f32(rng.standard_normal((3, 7, 5)) * 4)
    want = getattr(TF, name)(_t(x), **kw)
    close(getattr(F, name)(_p(x), **kw), want, 8 * U, 16 * U, name)
    close(
        getattr(F, name)(_p(x).transpose(0, 2), **kw),
        want.transpose(0, 2),
        8 * U,
        16 * U,
        f"{name} transposed",
    )


def test_activation_inplace():
    x = pr.tensor([-1.0, 2.0, -3.0])
    y = F.relu(x, inplace=True)
    assert y is x and x.tolist() == [0.0, 2.0, 0.0]


def test_linear(rng):
    x, w, b = rng.standard_normal((2, 3, 17)), rng.standard_normal((5, 17)), rng.standard_normal(5)
    x, w, b = _f32(x), _f32(w), _f32(b)
    want = TF.linear(_t(x), _t(w), _t(b))
    close(F.linear(_p(x), _p(w), _p(b)), want, 17 * 4 * U * 10, 0, "linear")
    close(F.linear(_p(x), _p(w)), TF.linear(_t(x), _t(w)), 17 * 4 * U * 10, 0, "linear nobias")


def test_norms_and_softmax(rng):
    x = _f32(rng.standard_normal((4, 6, 9)))
    close(F.softmax(_p(x), 1), TF.softmax(_t(x), 1), 1e-7, 32 * U)
    close(F.log_softmax(_p(x), -1), TF.log_softmax(_t(x), -1), 1e-6, 8 * U)
    close(F.layer_norm(_p(x), (6, 9)), TF.layer_norm(_t(x), (6, 9)), 200 * U * 4)
    close(F.rms_norm(_p(x), (9,), eps=1e-6), TF.rms_norm(_t(x), (9,), eps=1e-6), 40 * U * 4)
    for p, dim in ((2.0, 1), (1.0, -1), (3.0, 0)):
        close(
            F.normalize(_p(x), p, dim),
            TF.normalize(_t(x), p, dim),
            64 * U,
            64 * U,
            f"normalize p={p}",
        )
    close(F.normalize(pr.zeros(2, 3)), np.zeros((2, 3)), 0, 0, "normalize zeros (eps)")


def test_cosine_similarity(rng):
    a, b = _f32(rng.standard_normal((5, 1, 7))), _f32(rng.standard_normal((3, 7)))
    close(
        F.cosine_similarity(_p(a), _p(b), dim=-1),
        TF.cosine_similarity(_t(a), _t(b), dim=-1),
        64 * U,
        64 * U,
    )
    a, b = _f32(rng.standard_normal((4, 11))), _f32(rng.standard_normal((4, 11)))
    close(F.cosine_similarity(_p(a), _p(b)), TF.cosine_similarity(_t(a), _t(b)), 64 * U, 64 * U)


def test_embedding_one_hot_pad(rng):
    w = _f32(rng.standard_normal((11, 5)))
    idx = rng.integers(0, 11, (3, 4))
    close(F.embedding(_p(idx), _p(w)), TF.embedding(_t(idx), _t(w)), 0, 0, "embedding")
    close(F.one_hot(_p(idx), 13), TF.one_hot(_t(idx), 13), 0, 0, "one_hot")
    assert F.one_hot(_p(idx)).shape == tuple(TF.one_hot(_t(idx)).shape)
    x = _f32(rng.standard_normal((2, 3, 5)))
    close(F.pad(_p(x), (1, 2, 0, 1), value=3.0), TF.pad(_t(x), (1, 2, 0, 1), value=3.0), 0, 0)


# ---- dropout -------------------------------------------------------------------------------
def test_dropout_identity_and_edges():
    x = pr.randn(7, 9)
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 1.0).numpy().tolist() == np.zeros((7, 9)).tolist()
    with pytest.raises(ValueError, match="pyrite: dropout probability"):
        F.dropout(x, 1.5)
    assert F.dropout(x, 0.5, training=False).shape == (7, 9)


def test_dropout_statistics_and_seed():
    n, p = 200_003, 0.3
    x = pr.ones(n)
    pr.manual_seed(1234)
    y = F.dropout(x, p).numpy()
    pr.manual_seed(1234)
    y2 = F.dropout(x, p).numpy()
    np.testing.assert_array_equal(y, y2)
    zeros = float((y == 0).mean())
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(zeros - p) < 6 * sd, f"fraction of zeros {zeros}, expected {p} ± {6 * sd}"
    kept = y[y != 0]
    np.testing.assert_allclose(kept, 1 / (1 - p), rtol=4 * U)
    # the mean is preserved: E[y] = 1, sd of the mean sqrt(p / ((1 - p) n))
    assert abs(y.mean() - 1.0) < 6 * math.sqrt(p / ((1 - p) * n))
    y3 = F.dropout(x, p).numpy()
    assert (y3 != y).any(), "a second call without reseeding draws a new mask"


# ---- losses --------------------------------------------------------------------------------
REDUCTIONS = ("none", "mean", "sum")


def loss_tol(n, terms):
    return n * U * float(np.abs(terms).sum()) + 16 * U * float(np.abs(terms).max(initial=1.0))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses(reduction, rng):
    a, b = _f32(rng.standard_normal((3, 1, 7)) * 2), _f32(rng.standard_normal((3, 5, 7)))
    n = a.size * 5
    cases = [
        ("mse_loss", {}),
        ("l1_loss", {}),
        ("smooth_l1_loss", {}),
        ("smooth_l1_loss", {"beta": 0.5}),
        ("smooth_l1_loss", {"beta": 0.0}),
        ("huber_loss", {}),
        ("huber_loss", {"delta": 0.3}),
    ]
    for name, kw in cases:
        if a.shape != b.shape:
            ta, pa = _t(np.broadcast_to(a, b.shape).copy()), _p(a)
        want = getattr(TF, name)(ta, _t(b), reduction=reduction, **kw)
        close(
            getattr(F, name)(pa, _p(b), reduction=reduction, **kw),
            want,
            loss_tol(n, want.numpy()),
            16 * U,
            f"{name} {kw}",
        )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_losses(reduction, rng):
    x = _f32(rng.standard_normal((4, 6)) * 5)
    prob = _f32(1 / (1 + np.exp(-x)))
    t = _f32(rng.random((4, 6)))
    w = _f32(rng.random((6,)) + 0.5)
    pw = _f32(rng.random((6,)) * 3)
    want = TF.binary_cross_entropy(_t(prob), _t(t), reduction=reduction)
    close(
        F.binary_cross_entropy(_p(prob), _p(t), reduction=reduction),
        want,
        loss_tol(24, want.numpy()),
        64 * U,
        "bce",
    )
    want = TF.binary_cross_entropy(_t(prob), _t(t), _t(w), reduction=reduction)
    close(
        F.binary_cross_entropy(_p(prob), _p(t), _p(w), reduction=reduction),
        want,
        loss_tol(24, want.numpy()),
        64 * U,
        "bce weight",
    )
    for kw in ({}, {"weight": w}, {"pos_weight": pw}, {"weight": w, "pos_weight": pw}):
        want = TF.binary_cross_entropy_with_logits(
            _t(x), _t(t), reduction=reduction, **{k: _t(v) for k, v in kw.items()}
        )
        got = F.binary_cross_entropy_with_logits(
            _p(x), _p(t), reduction=reduction, **{k: _p(v) for k, v in kw.items()}
        )
        close(got, want, loss_tol(24, want.numpy()), 16 * U, f"bce logits {list(kw)}")
    big = pr.tensor([100.0, -100.0])
    close(
        F.binary_cross_entropy_with_logits(big, pr.tensor([0.0, 1.0]), reduction="none"),
        np.array([100.0, 100.0]),
        0,
        4 * U,
        "bce logits stable",
    )


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
def test_kl_div(reduction, rng):
    inp = _f32(np.log(rng.random((3, 5)) + 0.01))
    tgt = _f32(rng.random((3, 5)))
    tgt[0, 0] = 0.0
    for log_target in (False, True):
        t = _f32(np.log(tgt + 0.1)) if log_target else tgt
        want = TF.kl_div(_t(inp), _t(t), reduction=reduction, log_target=log_target)
        close(
            F.kl_div(_p(inp), _p(t), reduction=reduction, log_target=log_target),
            want,
            loss_tol(15, want.numpy()),
            32 * U,
            f"kl_div log_target={log_target}",
        )


CE_SHAPES = [((7, 5), (7,)), ((3, 4, 2, 5), (3, 2, 5)), ((6,), ())]


@pytest.mark.parametrize("shapes", CE_SHAPES, ids=str)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_indices(shapes, reduction, rng):
    ishape, tshape = shapes
    C = ishape[0] if len(ishape) == 1 else ishape[1]
    x = _f32(rng.standard_normal(ishape) * 3)
    t = rng.integers(0, C, tshape)
    if t.ndim:
        t.reshape(-1)[::3] = -100  # some ignored targets
    w = _f32(rng.random(C) + 0.2)
    for kw in (
        {},
        {"weight": w},
        {"label_smoothing": 0.15},
        {"weight": w, "label_smoothing": 0.3},
        {"ignore_index": 1},
    ):
        tt = t
        if "ignore_index" in kw and t.ndim:
            tt = np.where(t == -100, 1, t)
        tkw = {k: (_t(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        pkw = {k: (_p(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        want = TF.cross_entropy(_t(x), _t(tt), reduction=reduction, **tkw)
        got = F.cross_entropy(_p(x), _p(tt), reduction=reduction, **pkw)
        close(got, want, loss_tol(x.size, want.numpy()) + 1e-6, 64 * U, f"ce {list(kw)}")
        if "label_smoothing" not in kw:
            lp = TF.log_softmax(_t(x), 0 if x.ndim == 1 else 1)
            want = TF.nll_loss(lp, _t(tt), reduction=reduction, **{k: v for k, v in tkw.items()})
            got = F.nll_loss(_p(lp.numpy()), _p(tt), reduction=reduction, **pkw)
            close(got, want, loss_tol(x.size, want.numpy()) + 1e-6, 64 * U, f"nll {list(kw)}")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_probabilities(reduction, rng):
    x = _f32(rng.standard_normal((3, 4, 5)))
    p = rng.random((3, 4, 5))
    p = _f32(p / p.sum(1, keepdims=True))
    w = _f32(rng.random(4) + 0.5)
    for kw in ({}, {"weight": w}, {"label_smoothing": 0.2}):
        tkw = {k: (_t(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        pkw = {k: (_p(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        want = TF.cross_entropy(_t(x), _t(p), reduction=reduction, **tkw)
        got = F.cross_entropy(_p(x), _p(p), reduction=reduction, **pkw)
        close(got, want, loss_tol(x.size, want.numpy()) + 1e-6, 64 * U, f"ce prob {list(kw)}")


def test_cross_entropy_all_ignored_is_nan_and_errors():
    x = pr.randn(3, 4)
    t = pr.tensor([-100, -100, -100])
    assert math.isnan(F.cross_entropy(x, t).item())
    with pytest.raises(
        pr.ShapeError,
        match=r"cross_entropy: Expected input batch_size \(3\) to match target batch_size \(2\)",
    ):
        F.cross_entropy(x, pr.tensor([0, 1]))
    with pytest.raises(ValueError, match="pyrite: 'avg' is not a valid value for reduction"):
        F.cross_entropy(x, pr.tensor([0, 1, 2]), reduction="avg")
    assert F.cross_entropy(x, pr.tensor([0, 1, 2])).shape == ()


# ---- attention -----------------------------------------------------------------------------
def _sdpa_case(rng, B, Hq, Hk, L, S, E, **kw):
    q = _f32(rng.standard_normal((B, Hq, L, E)))
    k = _f32(rng.standard_normal((B, Hk, S, E)))
    v = _f32(rng.standard_normal((B, Hk, S, E)))
    tkw, pkw = {}, {}
    for key, val in kw.items():
        if isinstance(val, np.ndarray):
            tkw[key] = torch.from_numpy(val) if val.dtype == bool else _t(val)
            pkw[key] = pr.tensor(val) if val.dtype == bool else _p(val)
        else:
            tkw[key] = pkw[key] = val
    want = TF.scaled_dot_product_attention(_t(q), _t(k), _t(v), **tkw)
    got = F.scaled_dot_product_attention(_p(q), _p(k), _p(v), **pkw)
    scale = kw.get("scale") or 1 / math.sqrt(E)
    tol = (E + S + 16) * U * (1 + scale * E * 16) * float(np.abs(v).max())
    close(got, want, tol, 0, str({k: getattr(v, "shape", v) for k, v in kw.items()}))


def test_sdpa_plain_and_scale(rng):
    _sdpa_case(rng, 2, 3, 3, 5, 7, 8)
    _sdpa_case(rng, 1, 2, 2, 1, 1, 3, scale=0.3)


def test_sdpa_masks(rng):
    bool_mask = rng.random((5, 7)) < 0.7
    bool_mask[:, 0] = True  # no fully masked row (torch's answer there is NaN or 0 by kernel)
    _sdpa_case(rng, 2, 3, 3, 5, 7, 8, attn_mask=bool_mask)
    _sdpa_case(rng, 2, 3, 3, 5, 7, 8, attn_mask=_f32(rng.standard_normal((2, 1, 5, 7))))


def test_sdpa_causal_and_gqa(rng):
    _sdpa_case(rng, 1, 2, 2, 4, 9, 8, is_causal=True)  # L < S: top-left aligned triangle
    _sdpa_case(rng, 1, 2, 2, 9, 9, 5, is_causal=True)
    _sdpa_case(rng, 2, 6, 2, 5, 5, 4, enable_gqa=True, is_causal=True)
    with pytest.raises(ValueError, match="pyrite: scaled_dot_product_attention"):
        F.scaled_dot_product_attention(
            pr.ones(1, 2, 3),
            pr.ones(1, 2, 3),
            pr.ones(1, 2, 3),
            attn_mask=pr.ones(2, 2, dtype=pr.bool),
            is_causal=True,
        )


def test_sdpa_dropout_keeps_shape():
    q = pr.randn(1, 2, 4, 8)
    out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert out.shape == (1, 2, 4, 8)


# ---- convolution wrappers ------------------------------------------------------------------
def test_conv_and_pool_wrappers(rng):
    x = _f32(rng.standard_normal((2, 3, 9, 7)))
    w = _f32(rng.standard_normal((4, 3, 3, 2)))
    b = _f32(rng.standard_normal(4))
    want = TF.conv2d(_t(x), _t(w), _t(b), stride=(2, 1), padding=1)
    close(
        F.conv2d(_p(x), _p(w), _p(b), stride=(2, 1), padding=1),
        want,
        18 * U * 4 * float(np.abs(want.numpy()).max() + 10),
        0,
        "conv2d",
    )
    x1, w1 = _f32(rng.standard_normal((2, 3, 11))), _f32(rng.standard_normal((5, 3, 3)))
    want = TF.conv1d(_t(x1), _t(w1), padding=2, dilation=2)
    close(
        F.conv1d(_p(x1), _p(w1), padding=2, dilation=2),
        want,
        9 * U * 4 * float(np.abs(want.numpy()).max() + 10),
        0,
        "conv1d",
    )
    close(F.max_pool2d(_p(x), 2), TF.max_pool2d(_t(x), 2), 0, 0, "max_pool2d")
    close(F.avg_pool2d(_p(x), 3, 2, 1), TF.avg_pool2d(_t(x), 3, 2, 1), 16 * U, 16 * U)
    close(
        F.adaptive_avg_pool2d(_p(x), (4, 3)),
        TF.adaptive_avg_pool2d(_t(x), (4, 3)),
        16 * U,
        16 * U,
        "adaptive_avg_pool2d",
    )


# ---- dropout forms -------------------------------------------------------------------------
def test_alpha_dropout_keeps_selu_statistics():
    """alpha_dropout of a standard normal keeps mean 0 and variance 1 (its purpose), with kept
    values a·x + a·α·p and dropped ones a·α·(p - 1), torch's constants."""
    n, p = 200_003, 0.3
    x = pr.randn(n)
    xs = x.numpy().astype(np.float64)
    y = F.alpha_dropout(x, p, training=True).numpy().astype(np.float64)
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    dropped = np.isclose(y, a * alpha * (p - 1), rtol=0, atol=1e-6)
    np.testing.assert_allclose(
        y[~dropped], a * xs[~dropped] + a * alpha * p, rtol=8 * U, atol=8 * U
    )
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(dropped.mean() - p) < 6 * sd
    assert abs(y.mean()) < 6 / math.sqrt(n) * 2 and abs(y.var() - 1) < 0.02
    assert F.alpha_dropout(x, p) is x  # training=False by default, as torch
    assert F.feature_alpha_dropout(x.reshape(1, n), p) is not None


@pytest.mark.parametrize(
    "fn,shape,kept_dims",
    [
        ("dropout1d", (4, 6, 50), 2),
        ("dropout1d", (40, 50), 1),
        ("dropout2d", (4, 6, 7, 8), 2),
        ("dropout3d", (3, 5, 4, 3, 4), 2),
        ("dropout3d", (30, 4, 3, 4), 1),
        ("feature_alpha_dropout", (8, 16, 9), 2),
    ],
)
def test_channel_dropout_drops_whole_channels(fn, shape, kept_dims):
    pr.manual_seed(99)  # >= 24 channels: all kept or all dropped has probability <= 2^-23
    x = pr.ones(*shape)
    kw = {"training": True}
    y = getattr(F, fn)(x, 0.5, **kw).numpy()
    assert y.shape == shape
    lead = y.reshape(*shape[:kept_dims], -1)
    # every (sample, channel) is all kept or all dropped
    assert (lead.max(-1) == lead.min(-1)).all(), f"{fn}: a channel was partly dropped"
    vals = np.unique(lead[..., 0])
    assert len(vals) == 2, f"{fn}: expected both kept and dropped channels, got {vals}"


def test_dropout_inplace_and_toplevel():
    x = pr.ones(1000)
    assert F.dropout(x, 0.5, inplace=True) is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}
    y = pr.ones(7, 9)
    assert pr.dropout(y, 0.3, False) is y
    assert pr.dropout(y, 0.3, True).shape == (7, 9)
    assert pr.feature_dropout(pr.ones(2, 3, 4), 0.5, True).shape == (2, 3, 4)
    z = pr.ones(2, 3)
    assert pr.dropout_(z, 0.5, True) is z
    with pytest.raises(ValueError, match="dropout probability"):
        F.dropout1d(pr.ones(2, 3), -0.1)
    with pytest.raises(pr.ShapeError, match="Expected 2D or 3D input"):
        F.dropout1d(pr.ones(2, 3, 4, 5))
    nan = pr.tensor([float("nan")] * 4)
    assert np.isnan(F.dropout(nan, 1.0).numpy()).all()  # torch: input · 0


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_sdpa_fully_masked_query_gives_zero():
    # torch's _safe_softmax: a query whose keys are all masked attends to nothing (0, not NaN)
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    for mask in (
        np.array([[False, False, False], [True, False, True], [True, True, True]]),
        np.array([[-np.inf] * 3, [0.0, -1.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32),
    ):
        want = TF.scaled_dot_product_attention(
            *map(torch.from_numpy, (q, k, v)), attn_mask=torch.from_numpy(mask)
        )
        got = F.scaled_dot_product_attention(*map(pr.tensor, (q, k, v)), attn_mask=pr.tensor(mask))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
