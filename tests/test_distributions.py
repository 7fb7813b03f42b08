"""pyrite.distributions against torch.distributions (CPU, float64) on the same f32 values.

Each case draws fresh parameters of awkward, broadcasting batch shapes. Tolerances: pyrite
computes in f32, so a quantity made of a few exp/log/erf terms is within `ulps` ULP of the sum of
its terms' magnitudes (Higham §4.2; we bound that sum by |result| + the case's largest result);
lgamma/digamma (4 ULP each, README) and triangular solves (n·u·κ) get more. Sample statistics:
means of 20k draws within 5 standard errors (estimated from the draws themselves).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.distributions as TD

import pyrite as pr
import pyrite.distributions as D
from tests.optable import EPS32, assert_close

U = EPS32
N_SAMPLES = 20000


def _f32(a):
    return np.asarray(a, dtype=np.float32)


def _p(a, grad=False):
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype.kind in "iu":
        return pr.tensor(a.astype(np.int32))
    t = pr.tensor(_f32(a))
    return t.requires_grad_() if grad else t


def _t(a, grad=False):
    if not isinstance(a, np.ndarray):
        return a
    if a.dtype.kind in "iu":
        return torch.from_numpy(a.astype(np.int64))
    t = torch.from_numpy(_f32(a).astype(np.float64))
    return t.requires_grad_() if grad else t


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().numpy().astype(np.float64)
    if isinstance(x, pr.Tensor):
        return x.detach().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def check(got, want, ulps, what=""):
    """got within `ulps` ULP of (|want| + max|want| + 1): see the module's docstring."""
    g, w = _np(got), _np(want)
    finite = w[np.isfinite(w)]
    scale = (float(np.abs(finite).max()) if finite.size else 0.0) + 1.0
    assert_close(g, w, ulps * U * (np.abs(np.nan_to_num(w, posinf=0, neginf=0)) + scale), 0, what)


def build(lib, name, kwargs, grad=False):
    conv = _p if lib is pr else _t
    tensors = {k: conv(v, grad) for k, v in kwargs.items()}
    return getattr(lib.distributions, name)(**tensors), tensors


# ---- cases: (family, parameters, a value in the support, ULP allowance) ---------------------
def _unif(rng, lo, hi, shape):
    return _f32(rng.uniform(lo, hi, shape))


def _tril(rng, shape, n):
    L = np.tril(rng.standard_normal(shape + (n, n)) * 0.5, -1)
    return _f32(L + np.eye(n) * rng.uniform(0.5, 2.0, shape + (n,))[..., None])


def case(name, rng):
    if name == "normal":
        loc, scale = _f32(rng.standard_normal((3, 1, 5)) * 2), _unif(rng, 0.3, 3, (4, 5))
        return "Normal", dict(loc=loc, scale=scale), _f32(rng.standard_normal((2, 3, 4, 5)) * 3), 8
    if name == "normal_scalar":
        return "Normal", dict(loc=0.5, scale=_unif(rng, 0.3, 3, (7,))), _f32(rng.normal(size=7)), 8
    if name == "laplace":
        loc, scale = _f32(rng.standard_normal((5, 1))), _unif(rng, 0.3, 3, (1, 3))
        return "Laplace", dict(loc=loc, scale=scale), _f32(rng.standard_normal((2, 5, 3)) * 2), 8
    if name == "exponential":
        rate = _unif(rng, 0.2, 3, (3, 1))
        return "Exponential", dict(rate=rate), _f32(rng.exponential(1.0, (2, 3, 4))), 8
    if name == "uniform":
        low = _f32(rng.standard_normal((4, 3)))
        high = _f32(low + rng.uniform(0.5, 3, (4, 3)))
        value = _f32(low + rng.uniform(0, 0.999, (2, 4, 3)) * (high - low))
        return "Uniform", dict(low=low, high=high), value, 8
    if name == "gamma":
        conc, rate = _unif(rng, 0.3, 6, (3, 4)), _unif(rng, 0.2, 3, (4,))
        return (
            "Gamma",
            dict(concentration=conc, rate=rate),
            _f32(rng.gamma(2.0, 1.0, (2, 3, 4))),
            64,
        )
    if name == "beta":
        c1, c0 = _unif(rng, 0.3, 5, (5, 1)), _unif(rng, 0.3, 5, (1, 3))
        value = _unif(rng, 0.02, 0.98, (5, 3))
        return "Beta", dict(concentration1=c1, concentration0=c0), value, 64
    if name == "bernoulli_probs":
        value = _f32(rng.integers(0, 2, (2, 3, 5)))
        return "Bernoulli", dict(probs=_unif(rng, 0.05, 0.95, (3, 5))), value, 8
    if name == "bernoulli_logits":
        value = _f32(rng.integers(0, 2, (7,)))
        return "Bernoulli", dict(logits=_f32(rng.standard_normal(7) * 3)), value, 8
    if name == "categorical_probs":
        value = rng.integers(0, 6, (4, 3, 2))
        return "Categorical", dict(probs=_unif(rng, 0.05, 1, (3, 2, 6))), value, 16
    if name == "categorical_logits":
        value = rng.integers(0, 4, (2, 5))
        return "Categorical", dict(logits=_f32(rng.standard_normal((5, 4)) * 2)), value, 16
    if name == "onehot":
        value = _f32(np.eye(4)[rng.integers(0, 4, (2, 3))])
        return "OneHotCategorical", dict(probs=_unif(rng, 0.05, 1, (3, 4))), value, 16
    if name.startswith("mvn"):
        loc = _f32(rng.standard_normal((4, 3)))
        L = _tril(rng, (2, 1), 3)
        matrix = {
            "mvn_tril": ("scale_tril", L),
            "mvn_cov": ("covariance_matrix", _f32(L @ np.swapaxes(L, -1, -2))),
            "mvn_prec": ("precision_matrix", _f32(L @ np.swapaxes(L, -1, -2))),
        }[name]
        value = _f32(rng.standard_normal((5, 2, 4, 3)) * 2)
        return "MultivariateNormal", {"loc": loc, matrix[0]: matrix[1]}, value, 256
    raise KeyError(name)


CASES = [
    "normal",
    "normal_scalar",
    "laplace",
    "exponential",
    "uniform",
    "gamma",
    "beta",
    "bernoulli_probs",
    "bernoulli_logits",
    "categorical_probs",
    "categorical_logits",
    "onehot",
    "mvn_tril",
    "mvn_cov",
    "mvn_prec",
]
HAS_CDF = {"Normal", "Laplace", "Exponential", "Uniform"}


@pytest.mark.parametrize("name", CASES)
def test_densities_and_moments(name, rng):
    family, kwargs, value, ulps = case(name, rng)
    p, _ = build(pr, family, kwargs)
    t, _ = build(torch, family, kwargs)
    assert p.batch_shape == tuple(t.batch_shape) and p.event_shape == tuple(t.event_shape)
    assert p.has_rsample == (t.has_rsample and family not in ("Gamma", "Beta"))
    check(p.log_prob(_p(value)), t.log_prob(_t(value)), ulps, "log_prob")
    check(p.entropy(), t.entropy(), ulps, "entropy")
    for attr in ("mean", "variance", "stddev", "mode"):
        if family in ("Categorical",) and attr != "mode" or family == "Uniform" and attr == "mode":
            assert np.isnan(_np(getattr(p, attr))).all()
            continue
        check(getattr(p, attr), getattr(t, attr), ulps, attr)
    if family in HAS_CDF:
        check(p.cdf(_p(value)), t.cdf(_t(value)), ulps, "cdf")
        q = _unif(rng, 0.01, 0.99, tuple(t.batch_shape))
        # icdf's condition number near the tails: d icdf / dq * q, a few ULP of that
        check(p.icdf(_p(q)), t.icdf(_t(q)), 4 * ulps, "icdf")
    if t.has_enumerate_support:
        assert_close(_np(p.enumerate_support()), _np(t.enumerate_support()))
        assert_close(_np(p.enumerate_support(False)), _np(t.enumerate_support(False)))


@pytest.mark.parametrize("name", CASES)
def test_log_prob_gradients(name, rng):
    family, kwargs, value, ulps = case(name, rng)
    p, pp = build(pr, family, kwargs, grad=True)
    t, tp = build(torch, family, kwargs, grad=True)
    w = _f32(rng.standard_normal(tuple(t.batch_shape)))
    lp = (p.log_prob(_p(value)) * _p(w)).sum() + (p.entropy() * _p(w)).sum()
    lt = (t.log_prob(_t(value)) * _t(w)).sum() + (t.entropy() * _t(w)).sum()
    lp.backward()
    lt.backward()
    for k, v in pp.items():
        if isinstance(v, pr.Tensor):
            check(v.grad, tp[k].grad, 4 * ulps * value.size, f"d/d{k}")


# ---- reparameterized samples: the draw is a differentiable function of the parameters ----------
def _torch_reparam(family, tp, x):
    """torch's value of the same draw `x`, rebuilt from its noise with torch's parameters, so
    autograd gives the pathwise derivative independently of pyrite."""
    x = torch.from_numpy(x)
    if family in ("Normal", "Laplace"):
        loc, scale = (t.detach() for t in torch.broadcast_tensors(tp["loc"], tp["scale"]))
        noise = (x - loc) / scale
        return tp["loc"] + noise * tp["scale"]
    if family == "Exponential":
        return (x * tp["rate"].detach()) / tp["rate"]
    if family == "Uniform":
        low, high = (t.detach() for t in (tp["low"], tp["high"]))
        u = (x - low) / (high - low)
        return tp["low"] + u * (tp["high"] - tp["low"])
    dist = TD.MultivariateNormal(**tp)
    L = dist.scale_tril
    eps = torch.linalg.solve_triangular(
        L.detach(), (x - dist.loc.detach()).unsqueeze(-1), upper=False
    )
    return dist.loc + (L @ eps).squeeze(-1)


@pytest.mark.parametrize(
    "name", ["normal", "laplace", "exponential", "uniform", "mvn_tril", "mvn_cov", "mvn_prec"]
)
def test_rsample_gradients(name, rng):
    family, kwargs, _, ulps = case(name, rng)
    p, pp = build(pr, family, kwargs, grad=True)
    t, tp = build(torch, family, kwargs, grad=True)
    x = p.rsample((6,))
    assert x.shape == (6,) + tuple(t.batch_shape) + tuple(t.event_shape)
    w = _f32(rng.standard_normal(tuple(x.shape)))
    ((x * _p(w)).sum() + (x * x).sum()).backward()
    xt = _torch_reparam(family, tp, x.detach().numpy().astype(np.float64))
    ((xt * _t(w)).sum() + (xt * xt).sum()).backward()
    for k, v in pp.items():
        check(v.grad, tp[k].grad, 4 * ulps * x.numel(), f"d/d{k}")


def test_gamma_beta_have_no_rsample():
    for d in (D.Gamma(pr.tensor([2.0]), pr.tensor([1.0])), D.Beta(2.0, 3.0)):
        assert d.has_rsample is False
        with pytest.raises(NotImplementedError):
            d.rsample()


# ---- sampling: shapes and statistics --------------------------------------------------------
def _stat_params(family, rng):
    if family == "Normal":
        return dict(loc=_f32([-1.0, 0.5, 3.0]), scale=_f32([0.5, 1.0, 2.0]))
    if family == "Laplace":
        return dict(loc=_f32([-1.0, 0.5, 3.0]), scale=_f32([0.5, 1.0, 2.0]))
    if family == "Exponential":
        return dict(rate=_f32([0.5, 1.0, 4.0]))
    if family == "Uniform":
        return dict(low=_f32([-1.0, 0.0, 2.0]), high=_f32([0.0, 3.0, 2.5]))
    if family == "Gamma":
        return dict(concentration=_f32([0.2, 1.0, 4.5]), rate=_f32([1.0, 2.0, 0.5]))
    if family == "Beta":
        return dict(concentration1=_f32([0.3, 2.0, 5.0]), concentration0=_f32([0.7, 2.0, 0.4]))
    if family == "Bernoulli":
        return dict(probs=_f32([0.05, 0.5, 0.9]))
    if family in ("Categorical", "OneHotCategorical"):
        return dict(probs=_unif(rng, 0.05, 1, (3, 4)))
    loc = _f32([1.0, -2.0, 0.5])
    return dict(loc=loc, scale_tril=_tril(rng, (2,), 3))


@pytest.mark.parametrize(
    "family",
    [
        "Normal",
        "Laplace",
        "Exponential",
        "Uniform",
        "Gamma",
        "Beta",
        "Bernoulli",
        "Categorical",
        "OneHotCategorical",
        "MultivariateNormal",
    ],
)
def test_sample_statistics(family, rng):
    kwargs = _stat_params(family, rng)
    p, _ = build(pr, family, kwargs)
    t, _ = build(torch, family, kwargs)
    s = p.sample((2, 3))
    assert s.shape == (2, 3) + tuple(t.batch_shape) + tuple(t.event_shape)
    assert tuple(p.sample().shape) == tuple(t.sample().shape)
    x = _np(p.sample((N_SAMPLES,)))
    if family == "Categorical":
        assert ((x >= 0) & (x < 4) & (x % 1 == 0)).all()
        x = np.eye(4)[x.astype(int)]  # frequencies of each class
        mean = _np(t.probs)
    else:
        assert bool(t.support.check(torch.from_numpy(x)).all()), "a draw outside the support"
        mean = _np(t.mean)
    se = x.std(0) / math.sqrt(N_SAMPLES)
    assert (np.abs(x.mean(0) - mean) <= 5 * se + 1e-6).all(), (x.mean(0), mean, se)
    if family not in ("Categorical", "OneHotCategorical", "Bernoulli"):
        # sample variance: its standard error is sqrt((m4 - var^2) / N)
        var, dev = _np(t.variance), x - x.mean(0)
        se_var = np.sqrt(((dev**4).mean(0) - x.var(0) ** 2) / N_SAMPLES)
        assert (np.abs(x.var(0) - var) <= 5 * se_var + 1e-6).all(), (x.var(0), var, se_var)


def test_samples_follow_the_seed():
    d = D.Normal(pr.zeros(4), pr.ones(4))
    pr.manual_seed(3)
    a = d.sample((2,)).numpy()
    pr.manual_seed(3)
    np.testing.assert_array_equal(a, d.sample((2,)).numpy())
    assert not d.sample().requires_grad


# ---- shapes: broadcasting, expand, Independent -------------------------------------------------
def test_parameter_broadcasting():
    d = D.Normal(pr.zeros(3, 1), pr.ones(4))
    assert d.batch_shape == (3, 4) and d.loc.shape == (3, 4)
    assert D.Normal(0.0, 1.0).batch_shape == ()
    assert D.Normal(0.0, pr.ones(2)).batch_shape == (2,)
    assert D.Uniform(pr.zeros(2, 1), 1.0).batch_shape == (2, 1)
    assert D.Bernoulli(0.3).batch_shape == () and D.Bernoulli(0.3).sample((5,)).shape == (5,)
    c = D.Categorical(logits=pr.zeros(2, 3, 5))
    assert c.batch_shape == (2, 3) and c.event_shape == () and c.param_shape == (2, 3, 5)
    m = D.MultivariateNormal(pr.zeros(4, 1, 3), scale_tril=pr.eye(3).expand(2, 3, 3))
    assert m.batch_shape == (4, 2) and m.event_shape == (3,)
    assert m.covariance_matrix.shape == (4, 2, 3, 3) and m.precision_matrix.shape == (4, 2, 3, 3)
    # log_prob broadcasts the value against the batch shape
    assert D.Normal(pr.zeros(3), pr.ones(3)).log_prob(pr.zeros(2, 1)).shape == (2, 3)
    assert m.log_prob(pr.zeros(3)).shape == (4, 2)


@pytest.mark.parametrize("name", [c for c in CASES if c != "normal_scalar"])
def test_expand(name, rng):
    family, kwargs, _, _ = case(name, rng)
    p, _ = build(pr, family, kwargs)
    t, _ = build(torch, family, kwargs)
    shape = (2,) + tuple(t.batch_shape)
    pe, te = p.expand(shape), t.expand(shape)
    assert type(pe) is type(p) and pe.batch_shape == shape and pe.event_shape == p.event_shape
    assert pe.sample((3,)).shape == tuple(te.sample((3,)).shape)
    torch.manual_seed(int(rng.integers(2**31)))
    value = te.sample().numpy()
    value = value.astype(np.int64) if value.dtype.kind == "i" else _f32(value)
    check(pe.log_prob(_p(value)), te.log_prob(_t(value)), 256, "expanded log_prob")
    assert pe._validate_args == p._validate_args


def test_independent(rng):
    loc, scale = _f32(rng.standard_normal((3, 4, 5))), _unif(rng, 0.5, 2, (4, 5))
    value = _f32(rng.standard_normal((2, 3, 4, 5)))
    p = D.Independent(D.Normal(_p(loc), _p(scale)), 2)
    t = TD.Independent(TD.Normal(_t(loc), _t(scale)), 2)
    assert p.batch_shape == (3,) and p.event_shape == (4, 5) and p.has_rsample
    check(p.log_prob(_p(value)), t.log_prob(_t(value)), 64, "log_prob")
    check(p.entropy(), t.entropy(), 64, "entropy")
    check(p.mean, t.mean, 1)
    check(p.variance, t.variance, 1)
    assert p.rsample((6,)).shape == (6, 3, 4, 5)
    assert p.expand((2, 3)).batch_shape == (2, 3) and p.expand((2, 3)).event_shape == (4, 5)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        D.Independent(D.Normal(pr.zeros(3), pr.ones(3)), 2)
    b = D.Independent(D.Bernoulli(probs=pr.full((3,), 0.5)), 1)
    assert not b.has_enumerate_support and b.event_shape == (3,)


# ---- kl_divergence ------------------------------------------------------------------------------
def _kl_params(family, rng, shape):
    if family in ("Normal", "Laplace"):
        return dict(loc=_f32(rng.standard_normal(shape)), scale=_unif(rng, 0.3, 3, shape))
    if family == "Exponential":
        return dict(rate=_unif(rng, 0.2, 3, shape))
    if family == "Uniform":  # some inside [0, 1], some not: finite and infinite KLs
        low = _unif(rng, -0.2, 0.4, shape)
        return dict(low=low, high=_f32(low + rng.uniform(0.2, 0.8, shape)))
    if family == "Gamma":
        return dict(concentration=_unif(rng, 0.5, 5, shape), rate=_unif(rng, 0.3, 3, shape))
    if family == "Beta":
        return dict(
            concentration1=_unif(rng, 0.5, 5, shape), concentration0=_unif(rng, 0.5, 5, shape)
        )
    if family == "Bernoulli":
        probs = _unif(rng, 0.05, 0.95, shape)
        probs.flat[0], probs.flat[-1] = 0.0, 1.0  # the 0 log 0 and log 0 cases
        return dict(probs=probs)
    if family in ("Categorical", "OneHotCategorical"):
        probs = _unif(rng, 0.05, 1, shape + (5,))
        probs.flat[0] = 0.0
        return dict(probs=probs)
    return dict(loc=_f32(rng.standard_normal(shape + (3,))), scale_tril=_tril(rng, shape, 3))


SAME = [
    "Normal",
    "Laplace",
    "Exponential",
    "Uniform",
    "Gamma",
    "Beta",
    "Bernoulli",
    "Categorical",
    "OneHotCategorical",
    "MultivariateNormal",
]
CROSS = [
    ("Beta", "Exponential"),
    ("Beta", "Gamma"),
    ("Beta", "Normal"),
    ("Beta", "Uniform"),
    ("Exponential", "Gamma"),
    ("Exponential", "Normal"),
    ("Gamma", "Exponential"),
    ("Gamma", "Normal"),
    ("Laplace", "Normal"),
    ("Normal", "Laplace"),
    ("Uniform", "Beta"),
    ("Uniform", "Exponential"),
    ("Uniform", "Gamma"),
    ("Uniform", "Normal"),
    ("Normal", "Uniform"),
    ("Exponential", "Beta"),
    ("Gamma", "Uniform"),
    ("Laplace", "Exponential"),
]
LGAMMA_BASED = {"Gamma", "Beta"}


@pytest.mark.parametrize("pair", [(f, f) for f in SAME] + CROSS, ids=lambda x: "-".join(x))
def test_kl_divergence(pair, rng):
    fp, fq = pair
    # the same family also broadcasts p against q (torch's Bernoulli rule does not broadcast)
    shape_q = (4,) if fp == fq and fp != "Bernoulli" else (3, 4)
    kp, kq = _kl_params(fp, rng, (3, 4)), _kl_params(fq, rng, shape_q)
    p, pp = build(pr, fp, kp, grad=True)
    q, pq = build(pr, fq, kq, grad=True)
    tp_, tpp = build(torch, fp, kp, grad=True)
    tq, tpq = build(torch, fq, kq, grad=True)
    got, want = D.kl_divergence(p, q), TD.kl_divergence(tp_, tq)
    ulps = 64 if LGAMMA_BASED & {fp, fq} or fp == "MultivariateNormal" else 16
    check(got, want, ulps, "kl")
    finite = np.isfinite(_np(want))
    if fp == fq and finite.all():
        got.sum().backward()
        want.sum().backward()
        for k in pp:
            check(pp[k].grad, tpp[k].grad, 4 * ulps, f"d/dp.{k}")
        for k in pq:
            check(pq[k].grad, tpq[k].grad, 4 * ulps, f"d/dq.{k}")


def test_kl_independent(rng):
    kp, kq = _kl_params("Normal", rng, (2, 3, 4)), _kl_params("Normal", rng, (3, 4))
    p = D.Independent(build(pr, "Normal", kp)[0], 2)
    q = D.Independent(build(pr, "Normal", kq)[0], 2)
    tp_ = TD.Independent(build(torch, "Normal", kp)[0], 2)
    tq = TD.Independent(build(torch, "Normal", kq)[0], 2)
    check(D.kl_divergence(p, q), TD.kl_divergence(tp_, tq), 64)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(p, D.Independent(build(pr, "Normal", kq)[0], 1))


def test_kl_registry():
    class MyNormal(D.Normal):
        pass

    n = D.Normal(pr.zeros(2), pr.ones(2))
    mine = MyNormal(pr.ones(2), pr.ones(2))
    np.testing.assert_allclose(D.kl_divergence(mine, n).numpy(), [0.5, 0.5], rtol=1e-6)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(n, D.Bernoulli(probs=pr.full((2,), 0.5)))

    @D.register_kl(MyNormal, D.Normal)
    def _kl_mine(p, q):
        return pr.full((2,), 7.0)

    try:  # the more specific rule wins, and the memo was cleared for it
        assert D.kl_divergence(mine, n).tolist() == [7.0, 7.0]
        assert D.kl_divergence(n, mine).tolist() != [7.0, 7.0]
    finally:
        from pyrite.distributions import kl

        del kl._KL_REGISTRY[MyNormal, D.Normal]
        kl._KL_MEMOIZE.clear()
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)
    with pytest.raises(ValueError, match="different event shapes"):
        D.kl_divergence(
            D.MultivariateNormal(pr.zeros(2), scale_tril=pr.eye(2)),
            D.MultivariateNormal(pr.zeros(3), scale_tril=pr.eye(3)),
        )


# ---- validate_args --------------------------------------------------------------------------
BAD_PARAMS = [
    (lambda: D.Normal(pr.zeros(2), pr.tensor([1.0, -1.0])), "scale"),
    (lambda: D.Normal(pr.tensor([0.0, float("nan")]), pr.ones(2)), "loc"),
    (lambda: D.Exponential(pr.tensor([0.0])), "rate"),
    (lambda: D.Laplace(0.0, pr.tensor([0.0])), "scale"),
    (lambda: D.Gamma(pr.tensor([-1.0]), 1.0), "concentration"),
    (lambda: D.Beta(pr.tensor([1.0]), pr.tensor([0.0])), "concentration0"),
    (lambda: D.Bernoulli(probs=pr.tensor([1.5])), "probs"),
    (lambda: D.Categorical(probs=pr.tensor([0.5, -0.1, 0.6])), "probs"),
    (lambda: D.OneHotCategorical(probs=pr.tensor([0.5, -0.1, 0.6])), "probs"),
    (
        lambda: D.MultivariateNormal(pr.zeros(2), scale_tril=pr.tensor([[1.0, 1.0], [0, 1]])),
        "scale_tril",
    ),
    (lambda: D.MultivariateNormal(pr.zeros(2), covariance_matrix=-pr.eye(2)), "covariance"),
    (lambda: D.MultivariateNormal(pr.zeros(2), precision_matrix=pr.ones(2, 2)), "precision"),
]


@pytest.mark.parametrize("make, param", BAD_PARAMS)
def test_invalid_parameters_raise(make, param):
    with pytest.raises(ValueError, match=f"Expected parameter {param}"):
        make()


def test_invalid_values_raise():
    n = D.Normal(pr.zeros(3), pr.ones(3))
    with pytest.raises(ValueError, match="must be a Tensor"):
        n.log_prob(0.5)
    with pytest.raises(ValueError, match="not broadcastable"):
        n.log_prob(pr.zeros(4))
    with pytest.raises(ValueError, match="must match event_shape"):
        D.MultivariateNormal(pr.zeros(3), scale_tril=pr.eye(3)).log_prob(pr.zeros(2))
    for d, bad in [
        (D.Exponential(pr.ones(2)), pr.tensor([1.0, -1.0])),
        (D.Uniform(pr.zeros(2), pr.ones(2)), pr.tensor([0.5, 1.5])),
        (D.Beta(pr.ones(2), pr.ones(2)), pr.tensor([0.5, 1.5])),
        (D.Bernoulli(probs=pr.full((2,), 0.5)), pr.tensor([0.0, 0.5])),
        (D.Categorical(logits=pr.zeros(3)), pr.tensor([3])),
        (D.OneHotCategorical(logits=pr.zeros(3)), pr.tensor([1.0, 1.0, 0.0])),
    ]:
        with pytest.raises(ValueError, match="to be within the support"):
            d.log_prob(bad)
    # validate_args=False checks nothing
    D.Normal(pr.zeros(1), pr.tensor([-1.0]), validate_args=False)
    D.Exponential(pr.ones(2), validate_args=False).log_prob(pr.tensor([1.0, -1.0]))


def test_constructor_errors():
    for make, match in [
        (lambda: D.Bernoulli(), "Either `probs` or `logits`"),
        (lambda: D.Bernoulli(probs=pr.ones(1), logits=pr.ones(1)), "Either `probs` or `logits`"),
        (lambda: D.Categorical(probs=pr.tensor(1.0)), "at least one-dimensional"),
        (lambda: D.MultivariateNormal(pr.tensor(0.0), scale_tril=pr.eye(1)), "loc must be"),
        (lambda: D.MultivariateNormal(pr.zeros(2)), "Exactly one"),
        (lambda: D.MultivariateNormal(pr.zeros(2), covariance_matrix=pr.ones(2)), "two-dim"),
    ]:
        with pytest.raises(ValueError, match=match):
            make()


def test_set_default_validate_args():
    assert D.Distribution._validate_args is True
    D.Distribution.set_default_validate_args(False)
    try:
        d = D.Normal(pr.zeros(1), pr.tensor([-1.0]))  # no error
        d.log_prob(pr.zeros(5))  # shapes are not checked either
        assert D.Normal(0.0, 1.0, validate_args=True)._validate_args
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(pr.zeros(1), pr.tensor([-1.0]))
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_constraints_and_repr():
    C = D.constraints
    assert C.positive.check(pr.tensor([0.0, 1.0])).tolist() == [False, True]
    assert C.simplex.check(pr.tensor([[0.5, 0.5], [0.5, 0.6]])).tolist() == [True, False]
    assert C.independent(C.real, 1).check(pr.tensor([[0.0, float("nan")]])).tolist() == [False]
    assert C.is_dependent(D.Uniform.support) and C.is_dependent(C.dependent)
    assert not C.is_dependent(D.Uniform(0.0, 1.0).support)
    assert C.integer_interval(0, 2).check(pr.tensor([0.0, 1.5, 3.0])).tolist() == [
        True,
        False,
        False,
    ]
    assert repr(D.Normal(0.0, 1.0)) == "Normal(loc: 0.0, scale: 1.0)"  # as torch's
    assert "Normal(loc: pyrite.Size([2])" in repr(D.Normal(pr.zeros(2), 1.0))
