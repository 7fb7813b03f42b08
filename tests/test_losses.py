"""nn.functional's distance, margin and likelihood losses against torch CPU (float64).

Each case draws fresh inputs of awkward sizes, runs every reduction, and compares with torch on
the same f32-rounded values. Tolerance (Higham §4.2): a loss of n terms, each within a few ULP
(`t` ULP: the map's exp/log/sqrt), reduced in f32, is within (n + t)·u·Σ|terms| absolute; a
'none' result is the terms themselves, t·u relative. Distances are norms of D terms: D·u·‖·‖.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from tests.optable import EPS32, assert_close

U = EPS32
REDUCTIONS = ("none", "mean", "sum")


def _t(a):
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return torch.from_numpy(a.astype(np.float64))
    return torch.from_numpy(a.astype(np.int64))


def _p(a):
    a = np.asarray(a)
    return pr.tensor(a.astype(np.float32) if a.dtype.kind == "f" else a.astype(np.int32))


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def check(got, want, n, ulps=16, what=""):
    """got vs torch's `want`, a loss of n terms each within `ulps` ULP."""
    w = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    g = got.numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    atol = (n + ulps) * U * float(np.abs(w).sum()) + 2.0**-120
    assert_close(g.astype(np.float64), w.astype(np.float64), atol, 2 * ulps * U, what)


def both(fn, *arrays, **kw):
    """(pyrite's, torch's) results of F.<fn> on the same arrays (None passes through)."""
    pa = [(_p(a) if isinstance(a, np.ndarray) else a) for a in arrays]
    ta = [(_t(a) if isinstance(a, np.ndarray) else a) for a in arrays]
    pkw = {k: (_p(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    tkw = {k: (_t(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    return getattr(F, fn)(*pa, **pkw), getattr(TF, fn)(*ta, **tkw)


# ---- distances -----------------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf, 0.0])
@pytest.mark.parametrize(
    "shapes", [((7, 13), (7, 13)), ((5, 1, 17), (3, 17)), ((13,), (13,)), ((), ())], ids=str
)
def test_pairwise_distance(p, shapes, rng):
    a, b = (_f32(rng.standard_normal(s)) for s in shapes)
    for keepdim in (False, True):
        got, want = both("pairwise_distance", a, b, p=p, keepdim=keepdim)
        D = max(1, a.shape[-1] if a.ndim else 1)
        check(got, want, D, 16, f"pairwise_distance p={p} keepdim={keepdim}")
    got = pr.pairwise_distance(_p(a), _p(b), p)
    check(got, torch.pairwise_distance(_t(a), _t(b), p), 17, 16, "pr.pairwise_distance")


def test_pairwise_distance_strided_and_errors(rng):
    a = _f32(rng.standard_normal((11, 6)))
    b = _f32(rng.standard_normal((6, 11)))
    got = F.pairwise_distance(_p(a), _p(b).T)
    check(got, TF.pairwise_distance(_t(a), _t(b).T), 6, 16, "transposed")
    with pytest.raises(pr.ShapeError, match="do not broadcast"):
        F.pairwise_distance(pr.ones(4, 5), pr.ones(4, 6))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_losses(reduction, rng):
    a, pos, neg = (_f32(rng.standard_normal((9, 7))) for _ in range(3))
    for kw in ({}, {"margin": 0.5, "p": 1.0}, {"swap": True}, {"p": 3.0, "eps": 1e-3}):
        got, want = both("triplet_margin_loss", a, pos, neg, reduction=reduction, **kw)
        check(got, want, 9 * 7, 32, f"triplet {kw}")
    for x in (a[0], a[:, :1]):  # unbatched, and D = 1
        got, want = both("triplet_margin_loss", x, x * 0.5, -x, reduction=reduction)
        check(got, want, x.size, 32, f"triplet shape {x.shape}")
    got, want = both("triplet_margin_with_distance_loss", a, pos, neg, reduction=reduction)
    check(got, want, 9 * 7, 32, "triplet_with_distance default")

    def cos_dist(x, y):
        return 1.0 - (F if isinstance(x, pr.Tensor) else TF).cosine_similarity(x, y)

    got = F.triplet_margin_with_distance_loss(
        _p(a), _p(pos), _p(neg), distance_function=cos_dist, swap=True, reduction=reduction
    )
    want = TF.triplet_margin_with_distance_loss(
        _t(a), _t(pos), _t(neg), distance_function=cos_dist, swap=True, reduction=reduction
    )
    check(got, want, 9 * 7, 64, "triplet_with_distance cosine")


def test_triplet_errors():
    x = pr.ones(4, 5)
    with pytest.raises(pr.ShapeError, match="same number of dimensions"):
        F.triplet_margin_loss(x, x[0], x)
    with pytest.raises(pr.ShapeError, match="same number of dimensions"):
        F.triplet_margin_with_distance_loss(x, x, x[0])
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(x, x, x, margin=0.0)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=-1.0)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.triplet_margin_with_distance_loss(x, x, x, reduction="avg")


# ---- pairs and margins ---------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_ranking_hinge_soft_margin(reduction, rng):
    x1, x2 = _f32(rng.standard_normal((13, 5)) * 2), _f32(rng.standard_normal((13, 5)) * 2)
    y = np.sign(rng.standard_normal((13, 5)))
    for margin in (0.0, 0.7):
        got, want = both("margin_ranking_loss", x1, x2, y, margin=margin, reduction=reduction)
        check(got, want, 65, 8, f"margin_ranking margin={margin}")
        got, want = both("hinge_embedding_loss", x1, y, margin=margin + 0.5, reduction=reduction)
        check(got, want, 65, 8, "hinge_embedding")
    got, want = both("hinge_embedding_loss", x1[0], y, reduction=reduction)  # broadcast
    check(got, want, 65, 8, "hinge_embedding broadcast")
    yz = y.copy()
    yz[0, :3] = [0.0, 2.0, -2.0]  # torch adds both terms for targets other than ±1
    got, want = both("hinge_embedding_loss", x1, yz, reduction=reduction)
    check(got, want, 65, 8, "hinge_embedding other targets")
    big = np.concatenate([x1, [[100.0, -100.0, 60.0, 0.0, -0.5]]])
    yb = np.concatenate([y, [[-1.0, 1.0, -1.0, 1.0, 1.0]]])
    got, want = both("soft_margin_loss", x1, y, reduction=reduction)
    check(got, want, 65, 24, "soft_margin")
    got = F.soft_margin_loss(_p(big), _p(yb), reduction="none").numpy()
    # the stable form: softplus(-y·x) exactly, where torch's log1p(exp(100)) is inf
    want = np.logaddexp(0.0, -yb * big)
    assert_close(got.astype(np.float64), want, 2.0**-120, 24 * U, "soft_margin large |x|")


def test_margin_ranking_errors_and_nan():
    x = pr.ones(4, 5)
    with pytest.raises(pr.ShapeError, match="All input tensors should have same dimension"):
        F.margin_ranking_loss(x, x[:, 0], x[:, 0])
    nan = F.margin_ranking_loss(
        pr.tensor([float("nan")]), pr.tensor([1.0]), pr.tensor([1.0]), reduction="none"
    )
    assert math.isnan(nan.item())  # torch's clamp_min keeps NaN


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding_loss(reduction, rng):
    a, b = _f32(rng.standard_normal((17, 6))), _f32(rng.standard_normal((17, 6)))
    y = np.where(rng.random(17) < 0.5, 1.0, -1.0)
    y[:3] = [0.0, 2.0, -1.0]
    for margin in (0.0, 0.3, -0.2):
        got, want = both("cosine_embedding_loss", a, b, y, margin=margin, reduction=reduction)
        check(got, want, 17 * 6, 16, f"cosine_embedding margin={margin}")
    got, want = both("cosine_embedding_loss", a[0], b[0], np.array(1.0), reduction=reduction)
    check(got, want, 6, 16, "unbatched")
    got, want = both("cosine_embedding_loss", a, b, y.astype(np.int64), reduction=reduction)
    check(got, want, 17 * 6, 16, "int target")
    with pytest.raises(pr.ShapeError, match="1D target tensor expects 2D input"):
        F.cosine_embedding_loss(_p(a[0]), _p(b[0]), _p(y))
    with pytest.raises(pr.ShapeError, match="0D target tensor expects 1D input"):
        F.cosine_embedding_loss(_p(a), _p(b), pr.tensor(1.0))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin(reduction, rng):
    x = _f32(rng.standard_normal((7, 13)) * 4)
    y = (rng.random((7, 13)) < 0.4).astype(np.float64)
    w = _f32(rng.random(13) + 0.5)
    for kw in ({}, {"weight": w}):
        got, want = both("multilabel_soft_margin_loss", x, y, reduction=reduction, **kw)
        check(got, want, 91, 32, f"multilabel_soft_margin {list(kw)}")
    got, want = both("multilabel_soft_margin_loss", x[0], y[0], reduction=reduction)
    check(got, want, 13, 32, "unbatched")
    got, want = both("multilabel_soft_margin_loss", x, y.astype(np.int64), reduction=reduction)
    check(got, want, 91, 32, "int target")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multi_margin(reduction, rng):
    x = _f32(rng.standard_normal((11, 7)))
    t = rng.integers(0, 7, 11)
    w = _f32(rng.random(7) + 0.5)
    for kw in ({}, {"p": 2}, {"margin": 0.3}, {"weight": w}, {"p": 2, "weight": w, "margin": 2.0}):
        got, want = both("multi_margin_loss", x, t, reduction=reduction, **kw)
        check(got, want, 77, 8, f"multi_margin {kw}")
    got, want = both("multi_margin_loss", x[0], np.array(3), reduction=reduction)
    check(got, want, 7, 8, "unbatched, 0-d target")
    got, want = both("multi_margin_loss", x[0], np.array([3]), reduction=reduction)
    check(got, want, 7, 8, "unbatched, (1,) target")
    xs = pr.tensor(np.ascontiguousarray(x.T)).T  # strided input
    got = F.multi_margin_loss(xs, _p(t), reduction=reduction)
    check(got, TF.multi_margin_loss(_t(x), _t(t), reduction=reduction), 77, 8, "strided")


def test_multi_margin_errors():
    x = pr.randn(4, 5)
    with pytest.raises(IndexError, match="target out of range"):
        F.multi_margin_loss(x, pr.tensor([0, 5, 2, 1]))
    with pytest.raises(IndexError, match="target out of range"):
        F.multi_margin_loss(x, pr.tensor([0, -1, 2, 1]))
    with pytest.raises(pr.ShapeError, match="Expected target size \\[4\\], but got \\[3\\]"):
        F.multi_margin_loss(x, pr.tensor([0, 1, 2]))
    with pytest.raises(pr.ShapeError, match="inconsistent weight size"):
        F.multi_margin_loss(x, pr.tensor([0, 1, 2, 3]), weight=pr.ones(4))
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, pr.tensor([0, 1, 2, 3]), p=3)
    with pytest.raises(TypeError, match="integer"):
        F.multi_margin_loss(x, pr.tensor([0.0, 1, 2, 3]))
    with pytest.raises(pr.ShapeError, match="non-empty vector or matrix"):
        F.multi_margin_loss(pr.ones(2, 3, 4), pr.tensor([0, 1]))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin(reduction, rng):
    x = _f32(rng.standard_normal((6, 9)))
    t = rng.integers(0, 9, (6, 9))
    t[0, 3] = -1  # targets end at the first -1
    t[1, 0] = -1  # no targets: loss 0
    t[2, 5:] = -1
    t[3, :] = t[3, 0]  # one target listed many times (counted each time, as torch)
    got, want = both("multilabel_margin_loss", x, t, reduction=reduction)
    check(got, want, 81 * 6, 8, "multilabel_margin")
    got, want = both("multilabel_margin_loss", x[0], t[0], reduction=reduction)
    check(got, want, 81, 8, "unbatched")
    with pytest.raises(IndexError, match="target out of range"):
        F.multilabel_margin_loss(_p(x), _p(t + 1))
    with pytest.raises(pr.ShapeError, match="inconsistent target size"):
        F.multilabel_margin_loss(_p(x), _p(t[:, :3]))


# ---- likelihoods ---------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_poisson_nll(reduction, rng):
    x = _f32(rng.standard_normal((5, 11)))
    t = _f32(rng.poisson(2.0, (5, 11)).astype(np.float64))
    xp = _f32(np.abs(x) + 0.05)
    for kw in ({}, {"full": True}):
        got, want = both("poisson_nll_loss", x, t, reduction=reduction, **kw)
        check(got, want, 55, 16, f"poisson log_input {kw}")
        got, want = both("poisson_nll_loss", xp, t, log_input=False, reduction=reduction, **kw)
        check(got, want, 55, 16, f"poisson rates {kw}")
    got, want = both("poisson_nll_loss", x, t[0], reduction=reduction)  # broadcast target
    check(got, want, 55, 16, "poisson broadcast")
    got = pr.poisson_nll_loss(
        _p(x), _p(t), True, True, 1e-8, {"none": 0, "mean": 1, "sum": 2}[reduction]
    )
    check(
        got,
        torch.poisson_nll_loss(
            _t(x), _t(t), True, True, 1e-8, {"none": 0, "mean": 1, "sum": 2}[reduction]
        ),
        55,
        16,
        "pr.poisson_nll_loss",
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gaussian_nll(reduction, rng):
    x, t = _f32(rng.standard_normal((4, 3, 5))), _f32(rng.standard_normal((4, 3, 5)))
    var_full = _f32(rng.random((4, 3, 5)) + 0.1)
    var_full[0, 0, 0] = 1e-9  # clamped to eps
    for var in (var_full, var_full[..., 0], var_full[..., :1], var_full[:, :1, :], 0.7):
        for kw in ({}, {"full": True}, {"eps": 1e-2}):
            got, want = both("gaussian_nll_loss", x, t, var, reduction=reduction, **kw)
            check(got, want, 60, 16, f"gaussian var {getattr(var, 'shape', var)} {kw}")


def test_gaussian_nll_errors():
    x = pr.randn(4, 5)
    with pytest.raises(pr.ShapeError, match="var is of incorrect size"):
        F.gaussian_nll_loss(x, x, pr.ones(5))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -pr.ones(4, 5))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -1.0)
    with pytest.raises(ValueError, match="x is not valid"):
        F.gaussian_nll_loss(x, x, pr.ones(4, 5), reduction="x")


# ---- gaps in the existing losses -----------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_regression_losses(reduction, rng):
    x, y = _f32(rng.standard_normal((6, 7))), _f32(rng.standard_normal((6, 7)))
    w = _f32(rng.random((6, 7)) + 0.1)
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        got, want = both(name, x, y, reduction=reduction, weight=w)
        check(got, want, 42, 8, f"{name} weight")
    with pytest.raises(pr.ShapeError, match="Weights and input must have the same size"):
        F.mse_loss(_p(x), _p(y), weight=pr.ones(7))


def test_legacy_size_average_and_reduce(rng):
    x, y = _f32(rng.standard_normal((3, 4))), _f32(rng.standard_normal((3, 4)))
    t = rng.integers(0, 4, 3)
    for sa, rd in ((None, False), (False, None), (True, True), (False, True)):
        for name, args in (
            ("mse_loss", (x, y)),
            ("l1_loss", (x, y)),
            ("soft_margin_loss", (x, np.sign(y))),
            ("multi_margin_loss", (x, t)),
            ("cross_entropy", (x, t)),
        ):
            got, want = both(name, *args, size_average=sa, reduce=rd)
            check(got, want, 12, 32, f"{name} size_average={sa} reduce={rd}")


def test_toplevel_loss_spellings(rng):
    """torch.* forms take reduction as an int (0 none, 1 mean, 2 sum) and their own order."""
    a, b = _f32(rng.standard_normal((5, 4))), _f32(rng.standard_normal((5, 4)))
    y = np.sign(rng.standard_normal(5))
    for red in (0, 1, 2):
        check(
            pr.margin_ranking_loss(_p(a[:, 0]), _p(b[:, 0]), _p(y), 0.1, red),
            torch.margin_ranking_loss(_t(a[:, 0]), _t(b[:, 0]), _t(y), 0.1, red),
            5,
            8,
            "mrl",
        )
        check(
            pr.hinge_embedding_loss(_p(a), _p(np.sign(b)), 1.0, red),
            torch.hinge_embedding_loss(_t(a), _t(np.sign(b)), 1.0, red),
            20,
            8,
            "hinge",
        )
        check(
            pr.cosine_embedding_loss(_p(a), _p(b), _p(y), 0.0, red),
            torch.cosine_embedding_loss(_t(a), _t(b), _t(y), 0.0, red),
            20,
            16,
            "cos",
        )
        check(
            pr.triplet_margin_loss(_p(a), _p(b), _p(-a), 1.0, 2.0, 1e-6, False, red),
            torch.triplet_margin_loss(_t(a), _t(b), _t(-a), 1.0, 2.0, 1e-6, False, red),
            20,
            32,
            "triplet",
        )
        check(
            pr.kl_div(_p(a), _p(np.abs(b)), red),
            torch.kl_div(_t(a), _t(np.abs(b)), red),
            20,
            16,
            "kl_div",
        )
        check(
            pr.binary_cross_entropy_with_logits(_p(a), _p(np.abs(b) / 3), None, None, red),
            torch.binary_cross_entropy_with_logits(_t(a), _t(np.abs(b) / 3), None, None, red),
            20,
            16,
            "bce logits",
        )
    check(pr.cosine_similarity(_p(a), _p(b)), torch.cosine_similarity(_t(a), _t(b)), 4, 16, "cs")


# ---- pdist, bilinear -----------------------------------------------------------------------
@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, math.inf, 0.0])
@pytest.mark.parametrize("shape", [(7, 5), (1, 3), (2, 1), (17, 33)], ids=str)
def test_pdist(p, shape, rng):
    x = _f32(rng.standard_normal(shape))
    got, want = F.pdist(_p(x), p), TF.pdist(_t(x), p)
    check(got, want, shape[1], 16, f"pdist p={p}")
    check(pr.pdist(_p(x), p), torch.pdist(_t(x), p), shape[1], 16, "pr.pdist")
    xt = pr.tensor(np.ascontiguousarray(x.T).astype(np.float32)).T
    check(F.pdist(xt, p), want, shape[1], 16, "strided")


def test_pdist_errors():
    with pytest.raises(pr.ShapeError, match="pdist only supports 2D tensors"):
        F.pdist(pr.ones(2, 3, 4))
    with pytest.raises(ValueError, match="non-negative p"):
        F.pdist(pr.ones(3, 2), -1.0)
    with pytest.raises(TypeError, match="floating-point"):
        F.pdist(pr.ones(3, 2, dtype=pr.int32))


@pytest.mark.parametrize("lead", [(4,), (2, 3), ()], ids=str)
def test_bilinear(lead, rng):
    x1, x2 = _f32(rng.standard_normal((*lead, 5))), _f32(rng.standard_normal((*lead, 7)))
    w, b = _f32(rng.standard_normal((3, 5, 7))), _f32(rng.standard_normal(3))
    for bias in (None, b):
        got = F.bilinear(_p(x1), _p(x2), _p(w), None if bias is None else _p(bias))
        want = TF.bilinear(_t(x1), _t(x2), _t(w), None if bias is None else _t(bias))
        check(got, want, 35, 16, f"bilinear bias={bias is not None}")
    check(
        pr.bilinear(_p(x1), _p(x2), _p(w)),
        torch.bilinear(_t(x1), _t(x2), _t(w), None),
        35,
        16,
        "pr.bilinear",
    )
    with pytest.raises(pr.ShapeError, match="input2 size does not match weight size"):
        F.bilinear(_p(x1), _p(x2), pr.ones(3, 5, 6))
    with pytest.raises(pr.ShapeError, match="bias size does not match weight size"):
        F.bilinear(_p(x1), _p(x2), _p(w), pr.ones(4))


# ---- special values ------------------------------------------------------------------------
SPECIAL_X = np.array(
    [0.0, -0.0, 1e-30, 3.0, -3.0, 50.0, -50.0, 100.0, -100.0, np.nan, np.inf, -np.inf]
)


@pytest.mark.parametrize(
    "name,make",
    [
        ("margin_ranking_loss", lambda x, y: (x, np.flip(x).copy(), y)),
        ("hinge_embedding_loss", lambda x, y: (x, y)),
        ("multilabel_soft_margin_loss", lambda x, y: (x[None], (y[None] > 0).astype(np.float64))),
        ("poisson_nll_loss", lambda x, y: (x, np.abs(y) * 3)),
        ("gaussian_nll_loss", lambda x, y: (x, y, np.abs(y) + 0.5)),
        ("triplet_margin_loss", lambda x, y: (x[:, None], y[:, None], -x[:, None])),
        ("cosine_embedding_loss", lambda x, y: (x.reshape(3, 4), np.ones((3, 4)), y[:3])),
        ("smooth_l1_loss", lambda x, y: (x, y)),
        ("huber_loss", lambda x, y: (x, y)),
    ],
)
def test_special_values_as_torch(name, make):
    """±0, tiny, large, NaN and ±inf inputs: the same NaN/inf pattern as torch's, and the same
    finite values ('none' reduction, so each element is compared)."""
    y = np.where(np.arange(SPECIAL_X.size) % 2 == 0, 1.0, -1.0)
    args = make(SPECIAL_X.copy(), y)
    got, want = both(name, *args, reduction="none")
    g = got.numpy().astype(np.float64)
    with np.errstate(over="ignore"):  # the exact value rounded to f32: exp(100) overflows
        w = want.numpy().astype(np.float32).astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: NaNs {g} vs {w}"
    assert np.array_equal(np.isposinf(g), np.isposinf(w)), f"{name}: +inf {g} vs {w}"
    assert np.array_equal(np.isneginf(g), np.isneginf(w)), f"{name}: -inf {g} vs {w}"
    fin = np.isfinite(w)
    assert_close(g[fin], w[fin], 2.0**-120, 64 * U, name)


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_loss_shape_checks():
    with pytest.raises(IndexError, match="no dimensions"):
        F.multilabel_soft_margin_loss(pr.tensor(0.5), pr.tensor(1.0))
    x, t = pr.zeros(3), pr.ones(3)
    with pytest.raises(RuntimeError, match="does not broadcast"):  # torch multiplies in place
        F.binary_cross_entropy_with_logits(x, t, weight=pr.ones(3, 3))
    with pytest.raises(RuntimeError, match="does not broadcast"):
        F.binary_cross_entropy(x + 0.5, t, weight=pr.ones(2, 3))
