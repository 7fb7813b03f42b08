"""The third wave of pyrite.distributions (Weibull, Pareto, InverseGamma, Kumaraswamy,
FisherSnedecor, VonMises, OneHotCategoricalStraightThrough, Wishart, LKJCholesky, Pareto's
kl_divergence pairs, and the constraint registries biject_to / transform_to with the matrix
transforms they return) against torch.distributions (CPU, float64) on the same f32 values.

Tolerances as in test_distributions.py: pyrite computes in f32, so a quantity of a few
exp/log/pow/lgamma terms is within `ulps` ULP of (|result| + the case's largest |result| + 1).
A case's allowance counts its terms and what magnifies them: each lgamma/digamma is 4 ULP
(README), a power x^k carries k times x's relative error, an inverse transform's error reaches
log_prob through the log-Jacobian and the base's log-density; the matrix families (Wishart)
get n·u·κ for their Cholesky solves, with κ the case's condition number. Gradients add a
factor for the sum over the value's elements. Sample statistics: the mean and variance of N
draws within 5 standard errors estimated from the draws (fixed seed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD
from torch.distributions import constraint_registry as TCR

import pyrite as pr
import pyrite.distributions as D
from tests.optable import EPS32, assert_close  # noqa: F401
from tests.test_distributions_more import (  # noqa: F401
    _check_statistics,
    _conv,
    _f32,
    _np,
    _torch_has,
    _unif,
    build,
    check,
)

N_SAMPLES = 20000


@pytest.fixture(autouse=True)
def _torch_without_validation():
    """torch's oracle unvalidated (its TransformedDistribution cdf validates against the base's
    support and rejects values that rounding put on its edge); pyrite's validation is tested
    below."""
    TD.Distribution.set_default_validate_args(False)
    yield
    TD.Distribution.set_default_validate_args(True)


def _one_hot(rng, shape, k):
    return _f32(np.eye(k)[rng.integers(0, k, shape)])


def _spd(rng, shape, n):
    """Well-conditioned symmetric positive-definite matrices (A A^T / n + I / 2), exactly
    symmetric in f32."""
    a = rng.standard_normal(shape + (n, n))
    m = a @ np.swapaxes(a, -1, -2) / n + 0.5 * np.eye(n)
    return _f32((m + np.swapaxes(m, -1, -2)) / 2)


def _tril(rng, shape, n):
    L = np.tril(rng.standard_normal(shape + (n, n)) * 0.5, -1)
    return _f32(L + np.eye(n) * rng.uniform(0.6, 1.6, shape + (n,))[..., None])


def _corr_cholesky(rng, shape, n):
    """Cholesky factors of correlation matrices: lower rows of unit length, positive diagonal
    (normalized in f64, then rounded: row norms stay within the constraint's 10 n eps)."""
    L = np.tril(rng.standard_normal(shape + (n, n)))
    d = np.abs(np.diagonal(L, axis1=-2, axis2=-1)) + 0.3
    L = L - np.diagonal(L, axis1=-2, axis2=-1)[..., None] * np.eye(n) + d[..., None] * np.eye(n)
    return _f32(L / np.linalg.norm(L, axis=-1, keepdims=True))


def _family(name, **fixed):
    def make(lib, P):
        return getattr(lib.distributions, name)(**fixed, **P)

    return make


# ---- cases: name -> (make(lib, params), params, a value in the support, ULP allowance) ------
def case(name, rng):
    u = lambda lo, hi, shape: _unif(rng, lo, hi, shape)  # noqa: E731
    n = lambda shape, s=1.0: _f32(rng.standard_normal(shape) * s)  # noqa: E731
    if name == "weibull":
        # x = (y / scale)^k with k up to 3: k + 2 ULP relative, entering log_prob as -x
        P = dict(scale=u(0.3, 3, (3, 1)), concentration=u(0.5, 3, (4,)))
        return _family("Weibull"), P, _f32(rng.lognormal(0, 0.7, (2, 3, 4))), 16
    if name == "weibull_scalar":
        P = dict(scale=1.5, concentration=u(0.5, 3, (5,)))
        return _family("Weibull"), P, _f32(rng.lognormal(0, 0.7, (5,))), 16
    if name == "pareto":
        # log(y / scale) * alpha and the Jacobian's log y: a few ULP of each
        P = dict(scale=u(0.3, 2, (3, 1)), alpha=u(0.5, 5, (4,)))
        return _family("Pareto"), P, _f32(2.0 + rng.lognormal(0, 1, (2, 3, 4))), 16
    if name == "inverse_gamma":
        # Gamma's log_prob at 1 / y (lgamma: 4 ULP) plus 2 log y
        P = dict(concentration=u(0.5, 6, (2, 1, 3)), rate=u(0.3, 3, (4, 3)))
        return _family("InverseGamma"), P, _f32(rng.lognormal(0, 0.7, (2, 4, 3))), 32
    if name == "kumaraswamy":
        # three transforms inverted: y^a, 1 - ., ^b (each a few ULP, the powers' scaled by
        # their exponents); the variance is E[X^2] - E[X]^2, whose cancellation is at most
        # E[X^2] / Var ~ 4 for these concentrations
        P = dict(concentration1=u(0.4, 4, (3, 1)), concentration0=u(0.4, 4, (5,)))
        return _family("Kumaraswamy"), P, u(0.02, 0.98, (2, 3, 5)), 32
    if name == "fisher":
        # df around 2 and 4 to exercise the NaN branches of mean, mode and variance
        P = dict(df1=u(0.5, 10, (4, 1)), df2=u(0.5, 12, (3,)))
        return _family("FisherSnedecor"), P, _f32(rng.lognormal(0, 1, (2, 4, 3))), 32
    if name == "von_mises":
        # concentrations either side of the Bessel approximation's switch at 3.75
        P = dict(loc=n((3, 1), 2), concentration=_f32([0.05, 0.8, 3.7, 3.8, 12.0]))
        return _family("VonMises"), P, n((2, 3, 5), 3), 16
    if name == "onehot_st":
        P = dict(logits=n((2, 3, 5), 1.5))
        return _family("OneHotCategoricalStraightThrough"), P, _one_hot(rng, (4, 1, 3), 5), 8
    if name == "onehot_st_probs":
        P = dict(probs=u(0.05, 1, (3, 4)))
        return _family("OneHotCategoricalStraightThrough"), P, _one_hot(rng, (2, 3), 4), 8
    if name == "lkj3":
        P = dict(concentration=u(0.3, 3, (2, 1)))
        return _family("LKJCholesky", dim=3), P, _corr_cholesky(rng, (4, 2, 3), 3), 16
    if name == "lkj2":
        P = dict(concentration=u(0.3, 3, (3,)))
        return _family("LKJCholesky", dim=2), P, _corr_cholesky(rng, (2, 3), 2), 16
    if name == "lkj5_scalar":
        return (
            _family("LKJCholesky", dim=5),
            dict(concentration=1.7),
            _corr_cholesky(rng, (3,), 5),
            16,
        )
    if name in ("wishart_cov", "wishart_prec", "wishart_tril"):
        # Cholesky solves of the scale and the value: n u kappa (n = 3, kappa < ~20) per term
        key, mat = {
            "wishart_cov": ("covariance_matrix", _spd(rng, (3,), 3)),
            "wishart_prec": ("precision_matrix", _spd(rng, (3,), 3)),
            "wishart_tril": ("scale_tril", _tril(rng, (3,), 3)),
        }[name]
        P = {"df": u(3.2, 8, (2, 1)), key: mat}
        return _family("Wishart"), P, _spd(rng, (4, 2, 3), 3) * 2, 64
    raise KeyError(name)


CASES = [
    "weibull",
    "weibull_scalar",
    "pareto",
    "inverse_gamma",
    "kumaraswamy",
    "fisher",
    "von_mises",
    "onehot_st",
    "onehot_st_probs",
    "lkj3",
    "lkj2",
    "lkj5_scalar",
    "wishart_cov",
    "wishart_prec",
    "wishart_tril",
]


def _kumaraswamy_mode(a, b):
    """((a - 1) / (a b - 1))^(1 / a) where both concentrations are >= 1, NaN elsewhere (torch
    2.13's formula is NaN everywhere: see Kumaraswamy.mode)."""
    a, b = np.broadcast_arrays(_np(a), _np(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        mode = ((a - 1) / (a * b - 1)) ** (1 / a)
    return np.where((a < 1) | (b < 1), np.nan, mode)


@pytest.mark.parametrize("name", CASES)
def test_densities_and_moments(name, rng):
    make, P, value, ulps = case(name, rng)
    p, _ = build(pr, make, P)
    t, _ = build(torch, make, P)
    assert p.batch_shape == tuple(t.batch_shape) and p.event_shape == tuple(t.event_shape)
    check(p.log_prob(_conv(pr, value)), t.log_prob(_conv(torch, value)), ulps, "log_prob")
    want = _torch_has(t.entropy)
    if want is not None:
        check(p.entropy(), want, ulps, "entropy")
    for attr in ("mean", "variance", "mode"):
        want = _torch_has(lambda: getattr(t, attr))  # noqa: B023
        if attr == "mode" and name == "kumaraswamy":
            want = _kumaraswamy_mode(P["concentration1"], P["concentration0"])
        if want is not None:
            check(getattr(p, attr), want, ulps, attr)
        else:
            with pytest.raises(NotImplementedError):
                getattr(p, attr)
    want = _torch_has(lambda: t.cdf(_conv(torch, value)))
    if want is not None:
        check(p.cdf(_conv(pr, value)), want, ulps, "cdf")
    else:
        with pytest.raises(NotImplementedError):
            p.cdf(_conv(pr, value))
    q = _unif(rng, 0.02, 0.98, tuple(t.batch_shape))
    want = _torch_has(lambda: t.icdf(_conv(torch, q)))
    if want is not None:
        # icdf's condition number grows like 1 / density in the tails
        check(p.icdf(_conv(pr, q)), want, 16 * ulps, "icdf")
    else:
        with pytest.raises(NotImplementedError):
            p.icdf(_conv(pr, q))
    if t.has_enumerate_support:
        assert_close(_np(p.enumerate_support()), _np(t.enumerate_support()))
    # pyrite has no differentiable gamma sampler: the families drawn from Gamma don't rsample
    no_gamma_gradient = name in ("inverse_gamma", "fisher")
    assert p.has_rsample == (t.has_rsample and not no_gamma_gradient)


def test_kumaraswamy_mode_where_torch_is_nan():
    """torch 2.13 computes Kumaraswamy's mode as NaN for every b > 1 (it writes log1p(-b));
    pyrite's is the closed form, the maximizer of the density (checked on a grid here)."""
    a, b = _f32([2.0, 1.0, 5.0, 3.0]), _f32([3.0, 2.0, 1.0, 0.5])
    mode = _np(D.Kumaraswamy(pr.tensor(a), pr.tensor(b)).mode)
    assert bool(torch.isnan(TD.Kumaraswamy(torch.tensor(a), torch.tensor(b)).mode).all())
    grid = np.linspace(1e-4, 1 - 1e-4, 200001)
    for i in range(3):
        dens = (a[i] - 1) * np.log(grid) + (b[i] - 1) * np.log1p(-(grid ** a[i]))
        assert abs(mode[i] - grid[np.argmax(dens)]) < 1e-3, (i, mode[i])
    assert np.isnan(mode[3])


def test_support_attributes():
    assert D.Weibull(1.0, 2.0).support is D.constraints.positive
    assert D.InverseGamma(1.0, 2.0).support is D.constraints.positive
    assert D.Kumaraswamy(1.0, 2.0).support is D.constraints.unit_interval
    assert D.FisherSnedecor(1.0, 2.0).support is D.constraints.positive
    assert D.VonMises(0.0, 1.0).support is D.constraints.real
    assert D.LKJCholesky(3).support is D.constraints.corr_cholesky
    assert D.Wishart(4.0, pr.eye(3)).support is D.constraints.positive_definite
    assert D.OneHotCategoricalStraightThrough(logits=pr.zeros(3)).support is D.constraints.one_hot
    pa = D.Pareto(pr.tensor([1.0, 2.0]), pr.tensor([1.0, 3.0]))
    assert bool(pa.support.check(pr.tensor([1.0, 2.5])).all())
    assert not bool(pa.support.check(pr.tensor([0.5, 1.5])).any())
    assert D.constraints.is_dependent(D.Pareto.support)
    w = D.Wishart(pr.tensor([4.0]), pr.eye(3))
    assert repr(w.arg_constraints["df"]) == "GreaterThan(lower_bound=2)"


@pytest.mark.parametrize("name", [c for c in CASES if c != "lkj5_scalar"])  # a number: no grad
def test_log_prob_gradients(name, rng):
    make, P, value, ulps = case(name, rng)
    p, pp = build(pr, make, P, grad=True)
    t, tp = build(torch, make, P, grad=True)
    w = _f32(rng.standard_normal(tuple(t.batch_shape)))
    lp = (p.log_prob(_conv(pr, value)) * _conv(pr, w)).sum()
    lt = (t.log_prob(_conv(torch, value)) * _conv(torch, w)).sum()
    if _torch_has(t.entropy) is not None:
        lp = lp + (p.entropy() * _conv(pr, w)).sum()
        lt = lt + (t.entropy() * _conv(torch, w)).sum()
    lp.backward()
    lt.backward()
    for k, v in pp.items():
        if not isinstance(v, pr.Tensor):
            continue
        got, want = _np(v.grad), _np(tp[k].grad)
        if k in ("covariance_matrix", "precision_matrix"):
            # a function of a symmetric matrix: only the symmetric part of its gradient is
            # determined (torch's Cholesky backward returns it symmetrized)
            got = (got + np.swapaxes(got, -1, -2)) / 2
            want = (want + np.swapaxes(want, -1, -2)) / 2
        # each gradient element sums the terms of the value elements its parameter reaches
        terms = max(1, value.size // v.numel())
        check(got, want, 4 * ulps * terms, f"d/d{k}")


# ---- rsample: the pathwise derivative of a loss of the draws --------------------------------
def _pathwise_loss(x, w):
    return (x * w).sum() + (x * x).sum()


def _rsample_noise(name, P, x):
    """torch's value of the same draw `x`, rebuilt from its noise with torch's parameters (so
    torch's autograd gives the pathwise derivative independently of pyrite)."""
    tp = {k: _conv(torch, v, grad=True) for k, v in P.items()}
    det = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in tp.items()}
    x = torch.from_numpy(x)
    if name.startswith("weibull"):
        e = (x / det["scale"]).pow(det["concentration"])  # the exponential draw
        return tp["scale"] * e.pow(1 / tp["concentration"]), tp
    if name == "pareto":
        e = (x / det["scale"]).log() * det["alpha"]  # the standard exponential draw
        return tp["scale"] * (e / tp["alpha"]).exp(), tp
    if name == "kumaraswamy":
        a, b = det["concentration1"], det["concentration0"]
        u = (1 - x.pow(a)).pow(b)  # the uniform draw
        return (1 - u.pow(1 / tp["concentration0"])).pow(1 / tp["concentration1"]), tp
    raise KeyError(name)


RSAMPLE_CASES = ["weibull", "weibull_scalar", "pareto", "kumaraswamy"]


@pytest.mark.parametrize("name", RSAMPLE_CASES)
def test_rsample_gradients(name, rng):
    make, P, _, ulps = case(name, rng)
    p, pp = build(pr, make, P, grad=True)
    x = p.rsample((6,))
    t = make(torch, {k: _conv(torch, v) for k, v in P.items()})
    assert x.shape == (6,) + tuple(t.batch_shape) + tuple(t.event_shape)
    w = _f32(rng.standard_normal(tuple(x.shape)))
    _pathwise_loss(x, _conv(pr, w)).backward()
    xt, tp = _rsample_noise(name, P, x.detach().numpy().astype(np.float64))
    _pathwise_loss(xt, _conv(torch, w)).backward()
    for k, v in pp.items():
        if isinstance(v, pr.Tensor):
            assert v.grad is not None, k
            terms = max(1, x.numel() // v.numel())
            check(v.grad, tp[k].grad, 4 * ulps * terms, f"d/d{k}")


def test_straight_through_rsample(rng):
    logits = _f32(rng.standard_normal((3, 5)))
    lp = pr.tensor(logits, requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(logits=lp)
    x = d.rsample((4,))
    assert x.shape == (4, 3, 5) and x.requires_grad
    # the forward value is a one-hot draw ...
    assert bool(D.constraints.one_hot.check(x.detach()).all())
    w = _f32(rng.standard_normal((4, 3, 5)))
    (x * pr.tensor(w)).sum().backward()
    # ... and the backward pass is that of probs (torch's estimator, on torch's softmax)
    lt = torch.from_numpy(logits.astype(np.float64)).requires_grad_()
    probs = TD.OneHotCategoricalStraightThrough(logits=lt).probs
    (probs * torch.from_numpy(w.astype(np.float64))).sum().backward()
    check(lp.grad, lt.grad, 8 * 4, "d/dlogits")


def _wishart_pathwise(P, x):
    """torch's value of pyrite's Wishart draws x = (L A)(L A)^T, rebuilt from A = L^-1 chol(x)
    with torch's L (needing a gradient)."""
    tp = {k: _conv(torch, v, grad=True) for k, v in P.items()}
    L = tp["scale_tril"] if "scale_tril" in tp else torch.linalg.cholesky(tp["covariance_matrix"])
    a = torch.linalg.solve_triangular(
        L.detach(), torch.linalg.cholesky(torch.from_numpy(x)), upper=False
    )
    m = L @ a
    return m @ m.mT, tp


@pytest.mark.parametrize("key", ["scale_tril", "covariance_matrix"])
def test_wishart_rsample_gradients(key, rng):
    mat = _tril(rng, (2,), 3) if key == "scale_tril" else _spd(rng, (2,), 3)
    P = {key: mat}
    df = _f32([4.5, 7.0])
    pm = pr.tensor(mat, requires_grad=True)
    p = D.Wishart(pr.tensor(df), **{key: pm})
    x = p.rsample((5,))
    assert x.shape == (5, 2, 3, 3)
    w = _f32(rng.standard_normal((5, 2, 3, 3)))
    ((x * pr.tensor(w)).sum() + (x * x).sum() / 50).backward()
    xt, tp = _wishart_pathwise(P, _np(x))
    ((xt * _conv(torch, w)).sum() + (xt * xt).sum() / 50).backward()
    got, want = _np(pm.grad), _np(tp[key].grad)
    if key == "covariance_matrix":
        got, want = (got + np.swapaxes(got, -1, -2)) / 2, (want + np.swapaxes(want, -1, -2)) / 2
    # Wishart's allowance (n u kappa) through the chain, over the 5 draws of each matrix
    check(got, want, 4 * 64 * 5, f"d/d{key}")
    with pytest.raises(NotImplementedError, match="df"):
        D.Wishart(pr.tensor(df, requires_grad=True), scale_tril=pr.eye(3)).rsample()


def test_no_rsample_where_pyrite_has_no_gamma_gradient():
    for d in (D.InverseGamma(pr.tensor([2.0]), 1.0), D.FisherSnedecor(pr.tensor([3.0]), 4.0)):
        assert d.has_rsample is False
        with pytest.raises(NotImplementedError):
            d.rsample()
    for d in (D.VonMises(0.0, 1.0), D.LKJCholesky(3)):
        assert d.has_rsample is False
    for d in (D.Weibull(1.0, 2.0), D.Pareto(1.0, 2.0), D.Kumaraswamy(1.0, 2.0)):
        assert d.has_rsample is True


# ---- sampling: shapes, support and statistics -----------------------------------------------
def _stat_case(family):
    f = _f32
    return {
        "Weibull": dict(scale=f([0.5, 1.0, 3.0]), concentration=f([0.8, 1.5, 4.0])),
        # alpha > 4: a finite fourth moment, so the variance has a standard error
        "Pareto": dict(scale=f([0.5, 1.0, 2.0]), alpha=f([4.5, 6.0, 9.0])),
        "InverseGamma": dict(concentration=f([4.5, 6.0, 10.0]), rate=f([0.5, 1.0, 3.0])),
        "Kumaraswamy": dict(concentration1=f([0.5, 1.0, 3.0]), concentration0=f([0.7, 2.0, 5.0])),
        "FisherSnedecor": dict(df1=f([1.0, 5.0, 20.0]), df2=f([9.0, 12.0, 30.0])),
        "OneHotCategoricalStraightThrough": dict(logits=f([[0.0, 1.0, -1.0, 2.0]])),
    }[family]


STAT_FAMILIES = [
    "Weibull",
    "Pareto",
    "InverseGamma",
    "Kumaraswamy",
    "FisherSnedecor",
    "OneHotCategoricalStraightThrough",
]


@pytest.mark.parametrize("family", STAT_FAMILIES)
def test_sample_statistics(family):
    pr.manual_seed(1234)
    P = _stat_case(family)
    p, _ = build(pr, _family(family), P)
    t, _ = build(torch, _family(family), P)
    s = p.sample((2, 3))
    assert s.shape == (2, 3) + tuple(t.batch_shape) + tuple(t.event_shape)
    assert tuple(p.sample().shape) == tuple(t.sample().shape)
    assert not s.requires_grad
    x = _np(p.sample((N_SAMPLES,)))
    assert bool(t.support.check(torch.from_numpy(x)).all()), "a draw outside the support"
    assert bool(p.support.check(pr.tensor(_f32(x))).all())
    _check_statistics(x, _np(t.mean), _np(t.variance))


def test_von_mises_sample_statistics():
    """Circular moments: E[cos(x - loc)] = I1(k) / I0(k) = 1 - variance, E[sin(x - loc)] = 0;
    draws in [-pi, pi). Concentrations from nearly uniform (1e-4, where torch's float32
    proposal cancels) to sharply peaked."""
    pr.manual_seed(99)
    loc = _f32([0.5, -3.0, 2.5, 0.0, 10.0])
    k = _f32([1e-4, 0.5, 2.0, 8.0, 60.0])
    p = D.VonMises(pr.tensor(loc), pr.tensor(k))
    t = TD.VonMises(_conv(torch, loc), _conv(torch, k))
    x = _np(p.sample((N_SAMPLES,)))
    assert x.shape == (N_SAMPLES, 5)
    assert ((x >= -math.pi) & (x < math.pi)).all()
    c, s = np.cos(x - loc), np.sin(x - loc)
    _check_statistics(c, 1 - _np(t.variance), None)
    _check_statistics(s, 0.0, None)
    assert p.sample((3, 2)).shape == (3, 2, 5)


def test_lkj_sample_statistics():
    """Samples are Cholesky factors of correlation matrices; under LKJ(eta) in dimension d every
    off-diagonal correlation has mean 0 and variance 1 / (2 eta + d - 1) (its (r + 1) / 2 is
    Beta(eta - 1 + d / 2) on both sides). torch 2.13's onion sampler meets that only for row 1
    (it draws row i's squared length from Beta(i - 1/2, .) where the method has Beta(i / 2, .)):
    pyrite's meets it for every pair, and in dimension 2, where torch's is right, the draws
    match torch's (two-sample test of means and variances)."""
    pr.manual_seed(5)
    eta = _f32([0.5, 1.0, 4.0])
    d = 4
    p = D.LKJCholesky(d, pr.tensor(eta))
    L = p.sample((N_SAMPLES // 2,))
    assert L.shape == (N_SAMPLES // 2, 3, d, d) and not L.requires_grad
    assert bool(D.constraints.corr_cholesky.check(L).all())
    assert bool(TD.constraints.corr_cholesky.check(torch.from_numpy(_np(L)).float()).all())
    Ln = _np(L)
    corr = Ln @ np.swapaxes(Ln, -1, -2)
    for i, j in [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2)]:
        _check_statistics(corr[..., i, j], 0.0, 1 / (2 * eta.astype(np.float64) + d - 1))
    x = _np(D.LKJCholesky(2, pr.tensor(eta)).sample((N_SAMPLES,)))[..., 1, 0]
    y = _np(TD.LKJCholesky(2, torch.from_numpy(eta.astype(np.float64))).sample((N_SAMPLES,)))
    y = y[..., 1, 0]
    se = np.sqrt((x.var(0) + y.var(0)) / N_SAMPLES)
    assert (np.abs(x.mean(0) - y.mean(0)) <= 5 * se).all()
    _check_statistics(x, 0.0, 1 / (2 * eta.astype(np.float64) + 1))


def test_wishart_sample_statistics():
    pr.manual_seed(21)
    cov = _f32([[[2.0, 0.5, 0.0], [0.5, 1.0, -0.3], [0.0, -0.3, 0.5]]])
    df = _f32([3.5, 6.0])  # 3.5 > p - 1 = 2 but below p + 1: a fractional Bartlett draw
    p = D.Wishart(pr.tensor(df), covariance_matrix=pr.tensor(cov))
    t = TD.Wishart(_conv(torch, df), covariance_matrix=_conv(torch, cov))
    n = 4000
    x = p.sample((n,))
    assert x.shape == (n, 2, 3, 3) and not x.requires_grad
    assert bool(D.constraints.positive_definite.check(x).all())
    xn = _np(x)
    assert np.allclose(xn, np.swapaxes(xn, -1, -2), rtol=1e-5, atol=1e-6)
    _check_statistics(xn, _np(t.mean), _np(t.variance))


# ---- expand ---------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Singular sample detected")  # torch's Wishart warns each draw
@pytest.mark.parametrize("name", CASES)
def test_expand(name, rng):
    make, P, value, ulps = case(name, rng)
    p, _ = build(pr, make, P)
    t, _ = build(torch, make, P)
    shape = (2,) + tuple(t.batch_shape)
    pe, te = p.expand(shape), t.expand(shape)
    assert type(pe) is type(p) and pe.batch_shape == shape and pe.event_shape == p.event_shape
    assert pe._validate_args == p._validate_args
    assert pe.sample((3,)).shape == tuple(te.sample((3,)).shape)
    k = value.ndim - len(t.batch_shape) - len(t.event_shape)
    if k >= 0:
        value = value.reshape(value.shape[:k] + (1,) + value.shape[k:])
    check(pe.log_prob(_conv(pr, value)), te.log_prob(_conv(torch, value)), ulps, "log_prob")
    want = _torch_has(lambda: te.mean)
    if want is not None:
        check(pe.mean, want, ulps, "mean")


# ---- kl_divergence --------------------------------------------------------------------------
def _kl_pair(name, rng):
    u = lambda lo, hi, shape: _unif(rng, lo, hi, shape)  # noqa: E731
    pareto = dict(scale=u(0.3, 2, (3,)), alpha=u(0.5, 5, (2, 3)))
    if name == "pareto_pareto":
        # q's scale above p's in column 0 (KL infinite), below in column 1, random in 2
        q_scale = _f32(pareto["scale"] * np.array([1.5, 0.6, rng.uniform(0.5, 1.5)]))
        return ("Pareto", pareto), ("Pareto", dict(scale=q_scale, alpha=u(0.5, 5, (3,))))
    if name == "pareto_exponential":
        return ("Pareto", pareto), ("Exponential", dict(rate=u(0.3, 3, (3,))))
    if name == "pareto_gamma":
        return ("Pareto", pareto), (
            "Gamma",
            dict(concentration=u(0.5, 4, (3,)), rate=u(0.3, 3, (3,))),
        )
    if name == "pareto_normal":
        q = dict(loc=_f32(rng.standard_normal(3)), scale=u(0.5, 3, (3,)))
        return ("Pareto", pareto), ("Normal", q)
    if name == "uniform_pareto":
        low = u(0.2, 2, (2, 3))
        p = dict(low=low, high=_f32(low + rng.uniform(0.5, 2, (2, 3))))
        # q's scale below every low in columns 0 and 1 (finite), above one in column 2
        q_scale = _f32(low.min(0) * np.array([0.5, 0.9, 3.0]))
        return ("Uniform", p), ("Pareto", dict(scale=q_scale, alpha=u(0.5, 5, (3,))))
    if name == "inverse_gamma":
        p = dict(concentration=u(0.5, 5, (2, 3)), rate=u(0.3, 3, (3,)))
        q = dict(concentration=u(0.5, 5, (3,)), rate=u(0.3, 3, (2, 1)))
        return ("InverseGamma", p), ("InverseGamma", q)
    if name == "onehot_st":
        p = dict(logits=_f32(rng.standard_normal((2, 4))))
        q = dict(logits=_f32(rng.standard_normal((4,))))
        return ("OneHotCategoricalStraightThrough", p), ("OneHotCategoricalStraightThrough", q)
    raise KeyError(name)


KL_CASES = [
    "pareto_pareto",
    "pareto_exponential",
    "pareto_gamma",
    "pareto_normal",
    "uniform_pareto",
    "inverse_gamma",
    "onehot_st",
]


@pytest.mark.parametrize("name", KL_CASES)
def test_kl_divergence(name, rng):
    (fp, P), (fq, Q) = _kl_pair(name, rng)
    pp, ptp = build(pr, _family(fp), P, grad=True)
    pq, pqp = build(pr, _family(fq), Q, grad=True)
    tp, ttp = build(torch, _family(fp), P, grad=True)
    tq, tqp = build(torch, _family(fq), Q, grad=True)
    got, want = D.kl_divergence(pp, pq), TD.kl_divergence(tp, tq)
    wn = _np(want)
    if name in ("pareto_pareto", "uniform_pareto"):
        assert np.isinf(wn).any() and np.isfinite(wn).any(), "both branches drawn"
    # a few logs, lgamma (4 ULP) and the power scale^alpha: 16 ULP of the largest term
    check(got, want, 16, "kl")
    # gradients where the divergence is finite
    w = np.where(np.isfinite(wn), rng.standard_normal(wn.shape), 0.0).astype(np.float32)
    (pr.where(pr.tensor(np.isfinite(wn)), got, 0.0) * _conv(pr, w)).sum().backward()
    (torch.where(torch.from_numpy(np.isfinite(wn)), want, 0.0) * _conv(torch, w)).sum().backward()
    for mine, theirs in ((ptp, ttp), (pqp, tqp)):
        for k, v in mine.items():
            if isinstance(v, pr.Tensor) and theirs[k].grad is not None:
                terms = max(1, w.size // v.numel())
                check(v.grad, theirs[k].grad, 4 * 16 * terms, f"d/d{k}")


def test_kl_transformed_families_as_torch():
    """Weibull and Kumaraswamy pairs reach torch's TransformedDistribution rule, which answers
    only where the transforms (so every parameter) are equal: 0 there, NotImplementedError
    elsewhere; pyrite's pairs answer the same."""
    for family, a, b in [
        ("Weibull", ([1.0, 2.0], [2.0, 3.0]), ([1.0, 2.0], [2.0, 4.0])),
        ("Kumaraswamy", ([2.0, 3.0], [1.0, 2.0]), ([2.0, 3.0], [1.5, 2.0])),
    ]:
        P, Q = getattr(D, family), getattr(TD, family)
        same = D.kl_divergence(P(*map(pr.tensor, a)), P(*map(pr.tensor, a)))
        want = TD.kl_divergence(Q(*map(torch.tensor, a)), Q(*map(torch.tensor, a)))
        assert_close(_np(same), _np(want), 0, 0, family)
        with pytest.raises(NotImplementedError):
            TD.kl_divergence(Q(*map(torch.tensor, a)), Q(*map(torch.tensor, b)))
        with pytest.raises(NotImplementedError):
            D.kl_divergence(P(*map(pr.tensor, a)), P(*map(pr.tensor, b)))
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Weibull(1.0, 2.0), D.InverseGamma(1.0, 2.0))


def test_kl_infinite_pairs():
    pa = (pr.tensor([1.0, 2.0]), pr.tensor([3.0, 0.5]))
    ta = tuple(torch.from_numpy(_np(t)) for t in pa)
    others = [
        ("Beta", (pr.tensor([2.0, 1.0]), pr.tensor([1.0, 3.0]))),
        ("ContinuousBernoulli", (pr.tensor([0.3, 0.8]),)),
        ("Exponential", (pr.tensor([1.0, 2.0]),)),
        ("Gamma", (pr.tensor([2.0, 1.0]), pr.tensor([1.0, 3.0]))),
        ("Gumbel", (pr.tensor([0.0, 1.0]), pr.tensor([1.0, 3.0]))),
        ("Laplace", (pr.tensor([0.0, 1.0]), pr.tensor([1.0, 3.0]))),
        ("Normal", (pr.tensor([0.0, 1.0]), pr.tensor([1.0, 3.0]))),
        ("Uniform", (pr.tensor([0.0, 1.0]), pr.tensor([1.0, 3.0]))),
    ]
    for family, args in others:
        o = getattr(D, family)(*args)
        to = getattr(TD, family)(*(torch.from_numpy(_np(a)) for a in args))
        pairs = [(o, D.Pareto(*pa), to, TD.Pareto(*ta))]
        if family in ("Beta", "ContinuousBernoulli", "Uniform"):
            pairs.append((D.Pareto(*pa), o, TD.Pareto(*ta), to))
        for a, b, ta_, tb in pairs:
            want = _torch_has(lambda: TD.kl_divergence(ta_, tb))  # noqa: B023
            if want is None:
                continue
            assert_close(_np(D.kl_divergence(a, b)), _np(want), 0, 0, f"{family}")


# ---- biject_to / transform_to ---------------------------------------------------------------
def _constraints(C):
    """(name, constraint, input shape) for each registered family, built from module C."""
    return [
        ("real", C.real, (3, 4)),
        ("real_vector", C.real_vector, (3, 4)),
        ("positive", C.positive, (3, 4)),
        ("nonnegative", C.nonnegative, (5,)),
        ("greater_than", C.greater_than(1.5), (5,)),
        ("greater_than_eq", C.greater_than_eq(-2.0), (5,)),
        ("less_than", C.less_than(3.0), (2, 5)),
        ("unit_interval", C.unit_interval, (2, 5)),
        ("interval", C.interval(-1.0, 2.0), (2, 5)),
        ("half_open_interval", C.half_open_interval(0.5, 4.0), (7,)),
        ("independent_positive", C.independent(C.positive, 1), (3, 4)),
        ("simplex", C.simplex, (3, 4)),
        ("lower_cholesky", C.lower_cholesky, (2, 3, 3)),
        ("positive_definite", C.positive_definite, (2, 3, 3)),
        ("positive_semidefinite", C.positive_semidefinite, (3, 3)),
        ("corr_cholesky", C.corr_cholesky, (2, 6)),
        ("cat", C.cat([C.positive, C.real, C.unit_interval], 1, [2, 1, 2]), (3, 5)),
        ("stack", C.stack([C.positive, C.interval(-2.0, 1.0)], -1), (4, 2)),
    ]


REGISTRY_CASES = [c[0] for c in _constraints(D.constraints)]


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("name", REGISTRY_CASES)
def test_constraint_registry(registry, name, rng):
    (_, cp, shape) = next(c for c in _constraints(D.constraints) if c[0] == name)
    (_, ct, _) = next(c for c in _constraints(TD.constraints) if c[0] == name)
    reg_p, reg_t = getattr(D, registry), getattr(TCR, registry)
    want_t = _torch_has(lambda: reg_t(ct))
    if want_t is None:
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            reg_p(cp)
        return
    tp = reg_p(cp)
    assert type(tp).__name__ == type(want_t).__name__
    assert tp.bijective == want_t.bijective
    if registry == "biject_to":
        assert tp.bijective
    x = _f32(rng.standard_normal(shape))
    xp, xt = _conv(pr, x), _conv(torch, x)
    yp, yt = tp(xp), want_t(xt)
    check(yp, yt, 8, "forward")
    assert bool(cp.check(yp).all()), "the image lies outside the constraint"
    if tp.bijective:
        # the inverse of the image: the condition of each map's inverse (log, atanh, ...)
        # atanh (inside CorrCholesky's inverse) has condition cosh(x)^2 at the pre-image
        cond = float(np.cosh(np.abs(x).max()) ** 2) if name == "corr_cholesky" else 1.0
        check(tp.inv(yp), xt, 32 * cond, "inverse")
        check(tp.log_abs_det_jacobian(xp, yp), want_t.log_abs_det_jacobian(xt, yt), 16, "ladj")
        assert tp.domain.event_dim == want_t.domain.event_dim
        assert tp.codomain.event_dim == want_t.codomain.event_dim


def test_registry_register_and_errors():
    reg = D.constraint_registry.ConstraintRegistry()
    with pytest.raises(NotImplementedError, match="Cannot transform _Real constraints"):
        reg(D.constraints.real)

    @reg.register(D.constraints.greater_than)
    def _shifted(c):
        return D.transforms.AffineTransform(c.lower_bound, 1.0)

    t = reg(D.constraints.greater_than(2.0))
    assert float(t(pr.tensor([1.0])).item()) == 3.0
    reg.register(D.constraints.real, lambda c: D.transforms.ExpTransform())
    assert isinstance(reg(D.constraints.real), D.transforms.ExpTransform)
    with pytest.raises(TypeError, match="Expected constraint"):
        reg.register(3.0, lambda c: None)
    with pytest.raises(NotImplementedError):
        D.biject_to(D.constraints.boolean)
    # the registries the distributions' constraints are meant for: optimize unconstrained
    raw = pr.zeros(3, requires_grad=True)
    scale = D.transform_to(D.Normal.arg_constraints["scale"])(raw)
    (-D.Normal(pr.zeros(3), scale).log_prob(pr.tensor([0.5, 1.0, 2.0])).sum()).backward()
    assert raw.grad is not None and bool((scale > 0).all())


def test_matrix_transforms_against_torch(rng):
    x = _f32(rng.standard_normal((2, 3, 3)))
    v = _f32(rng.standard_normal((4, 10)))  # 10 = 5 * 4 / 2: a 5 x 5 correlation factor
    for make, arg in [
        (lambda T: T.LowerCholeskyTransform(), x),
        (lambda T: T.PositiveDefiniteTransform(), x),
        (lambda T: T.CorrCholeskyTransform(), v),
    ]:
        tp, tt = make(D.transforms), make(TD.transforms)
        xp, xt = _conv(pr, arg), _conv(torch, arg)
        yp, yt = tp(xp), tt(xt)
        check(yp, yt, 8, f"{tt} forward")
        if isinstance(tt, TD.transforms.CorrCholeskyTransform):
            cond = float(np.cosh(np.abs(arg).max()) ** 2)  # atanh's, at the pre-image
            check(tp.inv(yp), xt, 32 * cond, "corr inverse")
            check(tp.log_abs_det_jacobian(xp, yp), tt.log_abs_det_jacobian(xt, yt), 16, "ladj")
            assert tp.forward_shape((4, 10)) == (4, 5, 5) and tp.inverse_shape((5, 5)) == (10,)
            with pytest.raises(ValueError, match="flattened lower-diagonal"):
                tp.forward_shape((7,))
        else:
            # the inverse recovers the part the forward map keeps (lower triangle)
            # PositiveDefinite's goes through a Cholesky factorization: its factor's
            # condition, sqrt(kappa(y))
            cond = 1.0
            if isinstance(tt, TD.transforms.PositiveDefiniteTransform):
                cond = float(np.sqrt(np.linalg.cond(_np(yt)).max()))
            check(tp.inv(yp), tt.inv(yt), 32 * cond, f"{tt} inverse")
    # a correlation factor's log-Jacobian drives LKJ densities in unconstrained space: the
    # gradient through forward, inverse and log-Jacobian matches torch's
    vp = pr.tensor(v, requires_grad=True)
    vt = torch.from_numpy(v.astype(np.float64)).requires_grad_()
    for lib, vv, T, d in ((pr, vp, D.transforms, D), (torch, vt, TD.transforms, TD)):
        t = T.CorrCholeskyTransform()
        y = t(vv)
        (d.LKJCholesky(5, 2.0).log_prob(y) + t.log_abs_det_jacobian(vv, y)).sum().backward()
    # the factor's diagonal sqrt(1 - sum of squares) loses what atanh's condition says
    check(vp.grad, vt.grad, 64 * float(np.cosh(np.abs(v).max()) ** 2), "d/dx")


def test_cat_stack_reshape_softplus_transforms(rng):
    x = _f32(rng.standard_normal((3, 5)))
    for make in (
        lambda T: T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], 1, [3, 2]),
        lambda T: T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], 0, [1, 2]),
        lambda T: T.StackTransform(
            [T.ExpTransform(), T.TanhTransform()] * 2 + [T.ExpTransform()], 1
        ),
        lambda T: T.ReshapeTransform((5,), (5, 1)),
        lambda T: T.SoftplusTransform(),
    ):
        tp, tt = make(D.transforms), make(TD.transforms)
        xp, xt = _conv(pr, x), _conv(torch, x)
        yp, yt = tp(xp), tt(xt)
        check(yp, yt, 8, "forward")
        check(tp.inv(yp), xt, 16, "inverse")
        check(tp.log_abs_det_jacobian(xp, yp), tt.log_abs_det_jacobian(xt, yt), 8, "ladj")
        assert tp.bijective and bool(tp.codomain.check(yp).all())
    r = D.transforms.ReshapeTransform((2, 3), (6,))
    assert r.forward_shape((4, 2, 3)) == (4, 6) and r.inverse_shape((6,)) == (2, 3)
    with pytest.raises(ValueError, match="different numbers of elements"):
        D.transforms.ReshapeTransform((2, 3), (5,))
    with pytest.raises(AssertionError, match="must equal length"):
        D.transforms.CatTransform([D.transforms.ExpTransform()], 0, [2])(pr.ones(3))


# ---- validate_args and constructor errors: torch's exception types --------------------------
def _invalid_constructions(lib):
    d = lib.distributions
    T = lambda *a: lib.tensor(*a)  # noqa: E731
    return [
        ("weibull scale", lambda: d.Weibull(T([-1.0]), T([1.0]))),
        ("weibull concentration", lambda: d.Weibull(T([1.0]), T([0.0]))),
        ("pareto alpha", lambda: d.Pareto(T([1.0]), T([-2.0]))),
        ("pareto scale", lambda: d.Pareto(T([0.0]), T([2.0]))),
        ("inverse_gamma", lambda: d.InverseGamma(T([-1.0]), T([1.0]))),
        ("kumaraswamy", lambda: d.Kumaraswamy(T([1.0]), T([-1.0]))),
        ("fisher", lambda: d.FisherSnedecor(T([1.0]), T([-1.0]))),
        ("von_mises", lambda: d.VonMises(T([0.0]), T([-1.0]))),
        ("lkj concentration", lambda: d.LKJCholesky(3, T([-1.0]))),
        ("lkj dim", lambda: d.LKJCholesky(1, 1.0)),
        ("onehot_st", lambda: d.OneHotCategoricalStraightThrough(probs=T([0.5, -0.5]))),
        ("wishart none", lambda: d.Wishart(T(4.0))),
        ("wishart two", lambda: d.Wishart(T(4.0), lib.eye(2), scale_tril=lib.eye(2))),
        ("wishart df", lambda: d.Wishart(T([1.5]), lib.eye(3))),
        ("wishart dim", lambda: d.Wishart(T(4.0), T([1.0, 2.0]))),
        ("wishart tril", lambda: d.Wishart(T(4.0), scale_tril=T([[1.0, 1.0], [0.0, 1.0]]))),
        ("wishart cov", lambda: d.Wishart(T(4.0), T([[1.0, 2.0], [2.0, 1.0]]))),
    ]


@pytest.mark.parametrize("which", range(len(_invalid_constructions(torch))))
def test_invalid_parameters_raise_as_torch(which):
    TD.Distribution.set_default_validate_args(True)  # (the fixture turns it off again)
    name, make_t = _invalid_constructions(torch)[which]
    _, make_p = _invalid_constructions(pr)[which]
    with pytest.raises(Exception) as et:
        make_t()
    with pytest.raises(Exception) as ep:
        make_p()
    assert type(ep.value) is type(et.value), (name, ep.value, et.value)
    # (torch's FisherSnedecor builds its Gammas first, so its message names their
    # `concentration`; pyrite's names df2 itself)
    if "Expected parameter" in str(et.value) and name != "fisher":
        param = str(et.value).split()[2]
        assert f"Expected parameter {param}" in str(ep.value), (name, ep.value)


def test_invalid_values_raise():
    for d, bad in [
        (D.Weibull(1.0, 2.0), pr.tensor([-1.0])),
        (D.Pareto(pr.tensor([2.0]), pr.tensor([1.0])), pr.tensor([1.5])),
        (D.InverseGamma(2.0, 1.0), pr.tensor([0.0])),
        (D.Kumaraswamy(2.0, 1.0), pr.tensor([1.5])),
        (D.FisherSnedecor(2.0, 1.0), pr.tensor([-0.5])),
        (D.VonMises(0.0, 1.0), pr.tensor([math.nan])),
        (D.OneHotCategoricalStraightThrough(logits=pr.zeros(3)), pr.tensor([1.0, 1.0, 0.0])),
        (D.LKJCholesky(2), pr.tensor([[1.0, 0.0], [0.6, 0.6]])),
        (D.Wishart(4.0, pr.eye(2)), pr.tensor([[1.0, 2.0], [2.0, 1.0]])),
    ]:
        with pytest.raises(ValueError, match="to be within the support"):
            d.log_prob(bad)
    with pytest.raises(ValueError, match="to be within the support"):
        D.InverseGamma(2.0, 1.0).cdf(pr.tensor([-1.0]))
    # validate_args=False checks nothing
    D.Pareto(pr.tensor([2.0]), pr.tensor([1.0]), validate_args=False).log_prob(pr.tensor([1.5]))
    D.VonMises(0.0, -1.0, validate_args=False)
    with pytest.warns(UserWarning, match="Low df"):
        D.Wishart(pr.tensor(2.5), pr.eye(3))
    with pytest.raises(AssertionError, match="Wrong domain"):
        D.wishart._mvdigamma(pr.tensor([0.5]), 3)


def test_gamma_cdf_and_its_gradients(rng):
    """Gamma.cdf is gammainc(concentration, rate·value), as torch's: values and the gradients
    to the value and the rate (torch has none to the concentration, and neither has pyrite)."""
    a, r = _unif(rng, 0.3, 6.0, (4, 1)), _unif(rng, 0.2, 3.0, (1, 5))
    x = _unif(rng, 0.05, 8.0, (4, 5))
    pr_r, pr_x = _conv(pr, r, grad=True), _conv(pr, x, grad=True)
    t_r, t_x = _conv(torch, r, grad=True), _conv(torch, x, grad=True)
    got = D.Gamma(_conv(pr, a), pr_r).cdf(pr_x)
    want = TD.Gamma(_conv(torch, a), t_r).cdf(t_x)
    check(got, want, 64, "cdf")
    got.sum().backward()
    want.sum().backward()
    check(pr_x.grad, t_x.grad, 256, "d cdf / d value")
    check(pr_r.grad, t_r.grad, 256 * 4, "d cdf / d rate")
