"""The second wave of pyrite.distributions (LogNormal ... MixtureSameFamily, transforms and
their kl_divergence pairs) against torch.distributions (CPU, float64) on the same f32 values.

Tolerances as in test_distributions.py: pyrite computes in f32, so a quantity of a few
exp/log/lgamma terms is within `ulps` ULP of (|result| + the case's largest |result| + 1);
lgamma/digamma (4 ULP each) and the low-rank solves (n·u·κ) get more. Sample statistics: the
mean and variance of N draws within 5 standard errors estimated from the draws, fixed seed.
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

N_SAMPLES = 20000


def _f32(a):
    return np.asarray(a, dtype=np.float32)


def _unif(rng, lo, hi, shape):
    return _f32(rng.uniform(lo, hi, shape))


def _np(x):
    if isinstance(x, (torch.Tensor, pr.Tensor)):
        return x.detach().numpy().astype(np.float64)
    return np.asarray(x, dtype=np.float64)


def _conv(lib, a, grad=False):
    """A numpy f32 array as a pyrite f32 or torch f64 tensor (numbers pass through)."""
    if not isinstance(a, np.ndarray):
        return a
    if lib is pr:
        t = pr.tensor(_f32(a))
    else:
        t = torch.from_numpy(_f32(a).astype(np.float64))
    return t.requires_grad_() if grad else t


def check(got, want, ulps, what=""):
    """got within `ulps` ULP of (|want| + max|want| + 1): see the module's docstring."""
    g, w = _np(got), _np(want)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    finite = w[np.isfinite(w)]
    scale = (float(np.abs(finite).max()) if finite.size else 0.0) + 1.0
    tol = ulps * EPS32 * (np.abs(np.nan_to_num(w, posinf=0, neginf=0)) + scale)
    assert_close(g, w, tol, 0, what)


@pytest.fixture(autouse=True)
def _torch_without_validation():
    """torch's oracle unvalidated: its Gumbel cdf validates the Uniform it is built on and
    rejects extreme (valid) values. pyrite's own validation is tested below."""
    TD.Distribution.set_default_validate_args(False)
    yield
    TD.Distribution.set_default_validate_args(True)


def _simplex(rng, shape):
    x = rng.gamma(1.5, 1.0, shape) + 0.05
    return _f32(x / x.sum(-1, keepdims=True))


# ---- cases: name -> (make(lib, params), params, a value in the support, ULP allowance) ------
def _mixture(lib, P):
    mix = lib.distributions.Categorical(logits=P["logits"])
    comp = lib.distributions.Normal(P["loc"], P["scale"])
    return lib.distributions.MixtureSameFamily(mix, comp)


def _mixture_mvn(lib, P):
    mix = lib.distributions.Categorical(logits=P["logits"])
    comp = lib.distributions.Independent(lib.distributions.Laplace(P["loc"], P["scale"]), 1)
    return lib.distributions.MixtureSameFamily(mix, comp)


def _tanh_normal(lib, P):
    d = lib.distributions
    base = d.Normal(P["loc"], P["scale"])
    t = [d.transforms.AffineTransform(0.5, 2.0), d.transforms.TanhTransform(cache_size=1)]
    return d.TransformedDistribution(base, t)


def _affine_exp(lib, P):
    d = lib.distributions
    base = d.Laplace(P["loc"], P["scale"])
    t = d.transforms.ComposeTransform(
        [d.transforms.AffineTransform(P["shift"], -1.5), d.transforms.ExpTransform()]
    )
    return d.TransformedDistribution(base, [t])


def _sigmoid_gumbel(lib, P):
    d = lib.distributions
    return d.TransformedDistribution(
        d.Gumbel(P["loc"], P["scale"]), d.transforms.SigmoidTransform()
    )


def _stick_breaking(lib, P):
    d = lib.distributions
    base = d.Independent(d.Normal(P["loc"], P["scale"]), 1)
    return d.TransformedDistribution(base, d.transforms.StickBreakingTransform())


def _family(name):
    def make(lib, P):
        return getattr(lib.distributions, name)(**P)

    return make


def case(name, rng):
    u = lambda lo, hi, shape: _unif(rng, lo, hi, shape)  # noqa: E731
    n = lambda shape, s=1.0: _f32(rng.standard_normal(shape) * s)  # noqa: E731
    if name == "lognormal":
        P = dict(loc=n((3, 1), 0.5), scale=u(0.3, 1.5, (4,)))
        return _family("LogNormal"), P, _f32(rng.lognormal(0, 1, (2, 3, 4))), 16
    if name == "logistic_normal":
        P = dict(loc=n((3, 1, 4), 0.5), scale=u(0.3, 1.5, (2, 4)))
        return _family("LogisticNormal"), P, _simplex(rng, (2, 3, 2, 5)), 64
    if name == "cauchy":
        P = dict(loc=n((5, 1)), scale=u(0.3, 3, (1, 3)))
        return _family("Cauchy"), P, n((2, 5, 3), 4), 16
    if name == "halfnormal":
        return _family("HalfNormal"), dict(scale=u(0.3, 3, (4, 3))), _f32(np.abs(n((2, 4, 3)))), 8
    if name == "halfcauchy":
        return _family("HalfCauchy"), dict(scale=u(0.3, 3, (7,))), _f32(np.abs(n((7,), 3))), 16
    if name == "gumbel":
        P = dict(loc=n((2, 1, 3)), scale=u(0.3, 3, (4, 3)))
        return _family("Gumbel"), P, n((2, 4, 3), 2), 16
    if name == "studentt":
        P = dict(df=u(0.5, 8, (3, 1)), loc=n((5,)), scale=u(0.3, 3, (3, 5)))
        return _family("StudentT"), P, n((2, 3, 5), 3), 64
    if name == "chi2":
        return _family("Chi2"), dict(df=u(0.5, 9, (5,))), _f32(rng.chisquare(3, (2, 5))), 64
    if name == "dirichlet":
        P = dict(concentration=u(0.4, 5, (2, 3, 5)))
        return _family("Dirichlet"), P, _simplex(rng, (4, 1, 3, 5)), 128
    if name == "poisson":
        value = _f32(rng.poisson(3.0, (2, 3, 4)))
        return _family("Poisson"), dict(rate=u(0.2, 8, (3, 4))), value, 64
    if name == "binomial_probs":
        P = dict(total_count=7.0, probs=u(0.05, 0.95, (5,)))
        return _family("Binomial"), P, _f32(rng.integers(0, 8, (3, 5))), 64
    if name == "binomial_logits":
        P = dict(total_count=_f32(rng.integers(1, 20, (3, 1))), logits=n((4,), 2))
        return _family("Binomial"), P, _f32(rng.integers(0, 2, (2, 3, 4))), 64
    if name == "geometric_probs":
        P = dict(probs=u(0.05, 0.95, (4, 3)))
        return _family("Geometric"), P, _f32(rng.integers(0, 9, (2, 4, 3))), 16
    if name == "geometric_logits":
        return _family("Geometric"), dict(logits=n((5,), 2)), _f32(rng.integers(0, 9, (5,))), 16
    if name == "cont_bernoulli":
        # probs near 1/2 too, where torch switches to its Taylor series
        # (random ones avoid 0.4-0.6 just outside that window, where f32 cancels: see
        # _moment_condition)
        far = _f32(rng.choice([-1, 1], 5) * rng.uniform(0.1, 0.45, 5) + 0.5)
        probs = _f32(np.concatenate([far, [0.4995, 0.5, 0.5008]]))
        return _family("ContinuousBernoulli"), dict(probs=probs), u(0.01, 0.99, (3, 8)), 64
    if name == "cont_bernoulli_logits":
        P = dict(logits=_f32(rng.choice([-1, 1], (3, 4)) * rng.uniform(0.4, 3, (3, 4))))
        return _family("ContinuousBernoulli"), P, u(0.01, 0.99, (3, 4)), 64
    if name == "relaxed_bernoulli":
        P = dict(temperature=u(0.3, 2, ()), probs=u(0.05, 0.95, (3, 4)))
        return _family("RelaxedBernoulli"), P, u(0.02, 0.98, (2, 3, 4)), 32
    if name == "relaxed_onehot":
        P = dict(temperature=u(0.3, 2, ()), logits=n((3, 5)))
        return _family("RelaxedOneHotCategorical"), P, _simplex(rng, (2, 3, 5)), 64
    if name == "lowrank_mvn":
        P = dict(loc=n((4, 3)), cov_factor=n((2, 1, 3, 2), 0.7), cov_diag=u(0.3, 2, (3,)))
        return _family("LowRankMultivariateNormal"), P, n((5, 2, 4, 3), 2), 512
    if name == "mixture":
        P = dict(logits=n((3, 4)), loc=n((3, 4), 2), scale=u(0.4, 2, (3, 4)))
        return _mixture, P, n((2, 3), 2), 64
    if name == "mixture_event":
        P = dict(logits=n((4,)), loc=n((2, 4, 3), 2), scale=u(0.4, 2, (2, 4, 3)))
        return _mixture_mvn, P, n((5, 2, 3), 2), 64
    if name == "tanh_normal":
        P = dict(loc=n((3, 1), 0.3), scale=u(0.2, 0.8, (4,)))
        return _tanh_normal, P, u(-0.95, 0.95, (2, 3, 4)), 64
    if name == "affine_exp":
        P = dict(loc=n((4,)), scale=u(0.3, 1.5, (3, 1)), shift=n((4,), 0.5))
        return _affine_exp, P, _f32(rng.lognormal(0, 1, (2, 3, 4))), 32
    if name == "sigmoid_gumbel":
        P = dict(loc=n((3,)), scale=u(0.5, 2, (2, 3)))
        return _sigmoid_gumbel, P, u(0.05, 0.95, (2, 3)), 64
    if name == "stick_breaking":
        P = dict(loc=n((2, 3)), scale=u(0.5, 1.5, (3,)))
        return _stick_breaking, P, _simplex(rng, (5, 2, 4)), 64
    raise KeyError(name)


CASES = [
    "lognormal",
    "logistic_normal",
    "cauchy",
    "halfnormal",
    "halfcauchy",
    "gumbel",
    "studentt",
    "chi2",
    "dirichlet",
    "poisson",
    "binomial_probs",
    "binomial_logits",
    "geometric_probs",
    "geometric_logits",
    "cont_bernoulli",
    "cont_bernoulli_logits",
    "relaxed_bernoulli",
    "relaxed_onehot",
    "lowrank_mvn",
    "mixture",
    "mixture_event",
    "tanh_normal",
    "affine_exp",
    "sigmoid_gumbel",
    "stick_breaking",
]


def build(lib, make, P, grad=False):
    tensors = {k: _conv(lib, v, grad) for k, v in P.items()}
    return make(lib, tensors), tensors


def _torch_has(fn):
    """fn()'s value, or None where torch does not implement it."""
    try:
        return fn()
    except NotImplementedError:
        return None


def _moment_condition(name, t):
    """ContinuousBernoulli's closed-form mean and variance subtract terms of size
    1 / (1 - 2p)^2 just outside its Taylor window around p = 1/2 (torch's own f32 variance is
    off by 3x at p = 0.5011): their condition number, elementwise."""
    if not name.startswith("cont_bernoulli"):
        return 1.0
    d = np.abs(1 - 2 * _np(t.probs))
    return np.where(d > 0.002, 1.0 / np.maximum(d, 0.002) ** 2, 1.0)  # Taylor inside


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
        if want is not None:
            check(getattr(p, attr), want, ulps * _moment_condition(name, t), attr)
    want = _torch_has(lambda: t.cdf(_conv(torch, value)))
    if want is not None:
        check(p.cdf(_conv(pr, value)), want, ulps, "cdf")
    q = _unif(rng, 0.02, 0.98, tuple(t.batch_shape))
    want = _torch_has(lambda: t.icdf(_conv(torch, q)))
    if want is not None:
        # icdf's condition number grows like 1 / density near the tails (Cauchy's tan)
        check(p.icdf(_conv(pr, q)), want, 16 * ulps, "icdf")
    want = _torch_has(t.enumerate_support) if t.has_enumerate_support else None
    if want is not None:
        assert_close(_np(p.enumerate_support()), _np(want))
    assert p.has_rsample == (t.has_rsample and name not in ("chi2", "dirichlet"))


def test_support_attributes():
    assert D.LogNormal(0.0, 1.0).support is D.constraints.positive
    assert D.Dirichlet(pr.ones(3)).support is D.constraints.simplex
    assert D.Poisson(2.0).support.is_discrete and D.Geometric(0.3).support.is_discrete
    b = D.Binomial(pr.tensor([3.0, 5.0]), probs=pr.tensor([0.2, 0.9]))
    assert bool(b.support.check(pr.tensor([3.0, 5.0])).all())
    assert not bool(b.support.check(pr.tensor([4.0, 5.5])).any())
    assert D.Gumbel(0.0, 1.0).support is D.constraints.real
    assert D.HalfNormal(1.0).support is D.constraints.nonnegative
    assert D.RelaxedOneHotCategorical(1.0, logits=pr.zeros(4)).support is D.constraints.simplex
    low = D.LowRankMultivariateNormal(pr.zeros(3), pr.ones(3, 1), pr.ones(3))
    assert low.support.event_dim == 1
    tn = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.TanhTransform()])
    assert bool(tn.support.check(pr.tensor([0.5])).all())
    assert not bool(tn.support.check(pr.tensor([1.5])).any())


@pytest.mark.parametrize("name", CASES)
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
        if isinstance(v, pr.Tensor):
            check(v.grad, tp[k].grad, 4 * ulps * value.size, f"d/d{k}")


# ---- rsample: the pathwise derivative of a loss of the draws --------------------------------
def _pathwise_loss(x, w):
    return (x * w).sum() + (x * x).sum()


def _rsample_noise(name, P, x):
    """torch's value of the same draw `x`, rebuilt from its noise with torch's parameters (so
    torch's autograd gives the pathwise derivative independently of pyrite)."""
    tp = {k: _conv(torch, v, grad=True) for k, v in P.items()}
    x = torch.from_numpy(x)
    det = {k: v.detach() for k, v in tp.items()}
    if name in ("cauchy", "gumbel"):
        noise = (x - det["loc"]) / det["scale"]
        return tp["loc"] + noise * tp["scale"], tp
    if name == "lognormal":
        noise = (x.log() - det["loc"]) / det["scale"]
        return (tp["loc"] + noise * tp["scale"]).exp(), tp
    if name in ("halfnormal", "halfcauchy"):
        return (x / det["scale"]) * tp["scale"], tp
    if name == "studentt":
        noise = (x - det["loc"]) / det["scale"]
        return tp["loc"] + noise * tp["scale"], tp
    if name == "cont_bernoulli_logits":
        # x = icdf(u): recover u by the cdf (torch's), then rebuild x from u with grad
        t = TD.ContinuousBernoulli(logits=det["logits"])
        u = t.cdf(x)
        return TD.ContinuousBernoulli(logits=tp["logits"]).icdf(u), tp
    if name == "relaxed_bernoulli":
        # x = sigmoid((logit(u) + logit(p)) / T): recover logit(u), then rebuild
        temp, probs = tp["temperature"], tp["probs"]
        logit_u = torch.logit(x) * det["temperature"] - torch.logit(det["probs"])
        return torch.sigmoid((logit_u + torch.logit(probs)) / temp), tp
    if name == "relaxed_onehot":
        # x = softmax((logits + g) / T): g up to a per-row constant is T log x - logits
        temp, logits = tp["temperature"], tp["logits"]
        g = det["temperature"] * x.log() - det["logits"]
        return torch.softmax((logits + g) / temp, -1), tp
    if name == "lowrank_mvn":
        raise AssertionError("checked by test_lowrank_rsample_gradients")
    if name == "logistic_normal":
        # x = stick_breaking(loc + scale * eps): invert the stick breaking exactly in f64
        sb = TD.transforms.StickBreakingTransform()
        noise = (sb.inv(x) - det["loc"]) / det["scale"]
        return sb(tp["loc"] + noise * tp["scale"]), tp
    if name == "tanh_normal":
        noise = (torch.atanh(x).sub(0.5).div(2.0) - det["loc"]) / det["scale"]
        return torch.tanh(0.5 + 2.0 * (tp["loc"] + noise * tp["scale"])), tp
    raise KeyError(name)


RSAMPLE_CASES = [
    "lognormal",
    "logistic_normal",
    "logistic_normal",
    "cauchy",
    "halfnormal",
    "halfcauchy",
    "gumbel",
    "studentt",
    "cont_bernoulli_logits",
    "relaxed_bernoulli",
    "relaxed_onehot",
    "tanh_normal",
]


@pytest.mark.parametrize("name", RSAMPLE_CASES)
def test_rsample_gradients(name, rng):
    make, P, _, ulps = case(name, rng)
    if name == "studentt":  # no gradient for df (see test_no_rsample_...)
        pp = {k: _conv(pr, v, grad=True) for k, v in P.items() if k != "df"}
        p = D.StudentT(pr.tensor(P["df"]), **pp)
    else:
        p, pp = build(pr, make, P, grad=True)
    x = p.rsample((6,))
    t = make(torch, {k: _conv(torch, v) for k, v in P.items()})
    assert x.shape == (6,) + tuple(t.batch_shape) + tuple(t.event_shape)
    w = _f32(rng.standard_normal(tuple(x.shape)))
    _pathwise_loss(x, _conv(pr, w)).backward()
    xt, tp = _rsample_noise(name, P, x.detach().numpy().astype(np.float64))
    _pathwise_loss(xt, _conv(torch, w)).backward()
    for k, v in pp.items():
        assert v.grad is not None, k
        check(v.grad, tp[k].grad, 16 * ulps * x.numel(), f"d/d{k}")


def test_lowrank_rsample_gradients(rng):
    make, P, _, ulps = case("lowrank_mvn", rng)
    p, pp = build(pr, make, P, grad=True)
    pr.manual_seed(5)
    x = p.rsample((3,))
    assert x.shape == (3, 2, 4, 3)
    # the same noise through torch: x = loc + W eps_W + sqrt(D) eps_D, with pyrite's draws
    pr.manual_seed(5)
    eps_w = pr.randn(3, 2, 4, 2).numpy().astype(np.float64)
    eps_d = pr.randn(3, 2, 4, 3).numpy().astype(np.float64)
    tp = {k: _conv(torch, v, grad=True) for k, v in P.items()}
    xt = (
        tp["loc"]
        + (tp["cov_factor"] @ torch.from_numpy(eps_w).unsqueeze(-1)).squeeze(-1)
        + tp["cov_diag"].sqrt() * torch.from_numpy(eps_d)
    )
    check(x, xt, ulps, "draw")
    w = _f32(rng.standard_normal(tuple(x.shape)))
    _pathwise_loss(x, _conv(pr, w)).backward()
    _pathwise_loss(xt, _conv(torch, w)).backward()
    for k, v in pp.items():
        check(v.grad, tp[k].grad, 4 * ulps * x.numel(), f"d/d{k}")


def test_no_rsample_where_pyrite_has_no_gamma_gradient():
    for d in (D.Dirichlet(pr.ones(3)), D.Chi2(pr.tensor([2.0]))):
        assert d.has_rsample is False
        with pytest.raises(NotImplementedError):
            d.rsample()
    for d in (D.Poisson(2.0), D.Binomial(3, probs=0.3), D.Geometric(0.3)):
        assert d.has_rsample is False
    df = pr.tensor([3.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="df"):
        D.StudentT(df).rsample()


# ---- sampling: shapes and statistics --------------------------------------------------------
def _stat_case(family):
    f = _f32
    return {
        "LogNormal": dict(loc=f([-0.5, 0.0, 0.5]), scale=f([0.2, 0.5, 0.4])),
        "HalfNormal": dict(scale=f([0.5, 1.0, 3.0])),
        "Gumbel": dict(loc=f([-1.0, 0.5, 3.0]), scale=f([0.5, 1.0, 2.0])),
        "StudentT": dict(df=f([5.0, 9.0, 30.0]), loc=f([0.0, 1.0, -2.0]), scale=f([1, 2, 0.5])),
        "Chi2": dict(df=f([0.7, 3.0, 12.0])),
        "Dirichlet": dict(concentration=f([[0.3, 1.0, 2.5], [4.0, 4.0, 0.8]])),
        "Poisson": dict(rate=f([0.0, 0.3, 4.0, 9.9, 10.0, 37.5, 250.0])),
        "Binomial": dict(
            total_count=f([0.0, 5.0, 40.0, 40.0, 200.0, 1000.0, 12.0]),
            probs=f([0.5, 0.3, 0.1, 0.9, 0.45, 0.02, 1.0]),
        ),
        "Geometric": dict(probs=f([0.05, 0.3, 0.9, 1.0])),
        "ContinuousBernoulli": dict(probs=f([0.05, 0.3, 0.5, 0.9])),
        "RelaxedBernoulli": dict(temperature=f(0.5), probs=f([0.1, 0.5, 0.8])),
        "RelaxedOneHotCategorical": dict(temperature=f(0.7), logits=f([[0.0, 1.0, -1.0, 2.0]])),
        "LowRankMultivariateNormal": dict(
            loc=f([1.0, -2.0, 0.5]), cov_factor=f([[1.0], [0.5], [-1.0]]), cov_diag=f([0.5, 1, 2])
        ),
    }[family]


STAT_FAMILIES = [
    "LogNormal",
    "HalfNormal",
    "Gumbel",
    "StudentT",
    "Chi2",
    "Dirichlet",
    "Poisson",
    "Binomial",
    "Geometric",
    "ContinuousBernoulli",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "LowRankMultivariateNormal",
]


def _check_statistics(x, mean, var):
    """Sample mean and variance within 5 standard errors (from the draws' own moments)."""
    n = x.shape[0]
    se = x.std(0) / math.sqrt(n)
    assert (np.abs(x.mean(0) - mean) <= 5 * se + 1e-6).all(), (x.mean(0), mean, se)
    if var is not None:
        dev = x - x.mean(0)
        se_var = np.sqrt(((dev**4).mean(0) - x.var(0) ** 2) / n)
        assert (np.abs(x.var(0) - var) <= 5 * se_var + 1e-6).all(), (x.var(0), var, se_var)


@pytest.mark.parametrize("family", STAT_FAMILIES)
def test_sample_statistics(family, rng):
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
    if family.startswith("Relaxed"):
        # no closed-form moments: compare with torch's own draws' mean (two-sample test)
        y = _np(t.sample((N_SAMPLES,)))
        se = np.sqrt((x.var(0) + y.var(0)) / N_SAMPLES)
        assert (np.abs(x.mean(0) - y.mean(0)) <= 5 * se + 1e-6).all()
        return
    _check_statistics(x, _np(t.mean), _np(t.variance))


def test_mixture_sample_statistics(rng):
    pr.manual_seed(7)
    P = dict(logits=_f32([[0.0, 1.0, -1.0], [2.0, 0.0, 0.0]]), loc=_f32([[-3, 0, 4], [1, 2, 3]]))
    P["scale"] = _f32([[0.5, 1.0, 0.3], [1.0, 0.2, 2.0]])
    p, _ = build(pr, _mixture, P)
    t, _ = build(torch, _mixture, P)
    assert p.sample((4, 5)).shape == (4, 5, 2)
    _check_statistics(_np(p.sample((N_SAMPLES,))), _np(t.mean), _np(t.variance))
    P = dict(logits=_f32([0.3, -0.2]), loc=_f32([[[0, 1, 2], [3, 2, 1]]]))
    P["scale"] = _f32([[[0.5, 1.0, 0.3], [1.0, 0.2, 2.0]]])
    p, _ = build(pr, _mixture_mvn, P)
    t, _ = build(torch, _mixture_mvn, P)
    x = _np(p.sample((N_SAMPLES,)))
    assert x.shape == (N_SAMPLES, 1, 3)
    _check_statistics(x, _np(t.mean), _np(t.variance))


def test_transformed_sample_statistics():
    pr.manual_seed(11)
    P = dict(loc=_f32([0.2, -0.1]), scale=_f32([0.3, 0.6]))
    p, _ = build(pr, _tanh_normal, P)
    t, _ = build(torch, _tanh_normal, P)
    x, y = _np(p.sample((N_SAMPLES,))), _np(t.sample((N_SAMPLES,)))
    assert ((x > -1) & (x < 1)).all()
    se = np.sqrt((x.var(0) + y.var(0)) / N_SAMPLES)
    assert (np.abs(x.mean(0) - y.mean(0)) <= 5 * se).all()
    # rsample then log_prob of the same draw: the tanh cache returns the pre-image itself
    xs = p.rsample((4,))
    assert np.isfinite(_np(p.log_prob(xs))).all()


# ---- expand ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_expand(name, rng):
    make, P, value, ulps = case(name, rng)
    p, _ = build(pr, make, P)
    t, _ = build(torch, make, P)
    shape = (2,) + tuple(t.batch_shape)
    pe, te = p.expand(shape), t.expand(shape)
    assert type(pe) is type(p) and pe.batch_shape == shape and pe.event_shape == p.event_shape
    assert pe.sample((3,)).shape == tuple(te.sample((3,)).shape)
    # the value's own leading (sample) dims kept apart from the new batch dim
    k = value.ndim - len(t.batch_shape) - len(t.event_shape)
    if k >= 0:
        value = value.reshape(value.shape[:k] + (1,) + value.shape[k:])
    check(pe.log_prob(_conv(pr, value)), te.log_prob(_conv(torch, value)), ulps, "log_prob")


# ---- kl_divergence --------------------------------------------------------------------------
def _kl_case(name, rng):
    u = lambda lo, hi, shape: _unif(rng, lo, hi, shape)  # noqa: E731
    n = lambda shape, s=1.0: _f32(rng.standard_normal(shape) * s)  # noqa: E731
    if name == "dirichlet":
        return (
            "Dirichlet",
            [dict(concentration=u(0.3, 5, (3, 4)))] * 0
            + [
                dict(concentration=u(0.3, 5, (3, 4))),
                dict(concentration=u(0.3, 5, (2, 1, 4))),
            ],
            256,
        )
    if name == "poisson":
        return "Poisson", [dict(rate=u(0.1, 9, (3,))), dict(rate=u(0.1, 9, (2, 3)))], 32
    if name == "lognormal":
        P = [dict(loc=n((4,)), scale=u(0.3, 2, (3, 1))), dict(loc=n((4,)), scale=u(0.3, 2, (4,)))]
        return "LogNormal", P, 16
    if name == "halfnormal":
        return "HalfNormal", [dict(scale=u(0.3, 2, (5,))), dict(scale=u(0.3, 2, (2, 5)))], 16
    if name == "cauchy":
        P = [dict(loc=n((3,)), scale=u(0.3, 2, (3,))), dict(loc=n((2, 3)), scale=u(0.3, 2, (3,)))]
        return "Cauchy", P, 16
    if name == "gumbel":
        P = [dict(loc=n((3,)), scale=u(0.3, 2, (3,))), dict(loc=n((2, 3)), scale=u(0.3, 2, (3,)))]
        return "Gumbel", P, 64
    if name == "geometric":
        return "Geometric", [dict(probs=u(0.05, 0.95, (4,))), dict(logits=n((3, 4)))], 32
    if name == "binomial":
        P = [
            dict(total_count=9.0, probs=u(0.05, 0.95, (4,))),
            dict(total_count=9.0, logits=n((4,))),
        ]
        return "Binomial", P, 32
    if name == "cont_bernoulli":
        sign = lambda shape: rng.choice([-1, 1], shape)  # noqa: E731
        P = [
            dict(probs=_f32(0.5 + sign(4) * rng.uniform(0.1, 0.45, 4))),
            dict(logits=_f32(sign((3, 4)) * rng.uniform(0.4, 3, (3, 4)))),
        ]
        return "ContinuousBernoulli", P, 64
    if name == "chi2":
        return "Chi2", [dict(df=u(0.5, 9, (3,))), dict(df=u(0.5, 9, (2, 3)))], 64
    if name == "lowrank":
        P = [
            dict(loc=n((2, 3)), cov_factor=n((3, 2), 0.7), cov_diag=u(0.3, 2, (3,))),
            dict(loc=n((3,)), cov_factor=n((2, 3, 1), 0.7), cov_diag=u(0.3, 2, (2, 3))),
        ]
        return "LowRankMultivariateNormal", P, 1024
    if name in ("exponential", "gamma", "beta", "bernoulli", "categorical"):
        raise AssertionError("covered by test_distributions.py")
    raise KeyError(name)


KL_CASES = [
    "dirichlet",
    "poisson",
    "lognormal",
    "halfnormal",
    "cauchy",
    "gumbel",
    "geometric",
    "binomial",
    "cont_bernoulli",
    "chi2",
    "lowrank",
]


@pytest.mark.parametrize("name", KL_CASES)
def test_kl_divergence(name, rng):
    family, (P, Q), ulps = _kl_case(name, rng)
    pp, ptp = build(pr, _family(family), P, grad=True)
    pq, _ = build(pr, _family(family), Q)
    tp, ttp = build(torch, _family(family), P, grad=True)
    tq, _ = build(torch, _family(family), Q)
    got, want = D.kl_divergence(pp, pq), TD.kl_divergence(tp, tq)
    if name == "cont_bernoulli":  # p's mean and both normalizers: see _moment_condition
        cond = np.maximum(_moment_condition(name, tp), _moment_condition(name, tq))
        check(got, want, ulps * cond, "kl")
    else:
        check(got, want, ulps, "kl")
    w = _f32(rng.standard_normal(tuple(want.shape)))
    (got * _conv(pr, w)).sum().backward()
    (want * _conv(torch, w)).sum().backward()
    for k, v in ptp.items():
        if isinstance(v, pr.Tensor):
            check(v.grad, ttp[k].grad, 4 * ulps * w.size, f"d/d{k}")


def test_kl_mixed_gaussians(rng):
    loc = _f32(rng.standard_normal((2, 3)))
    W, Dg = _f32(rng.standard_normal((3, 2)) * 0.6), _unif(rng, 0.4, 2, (3,))
    L = np.tril(rng.standard_normal((3, 3)) * 0.3, -1) + np.diag(rng.uniform(0.6, 1.5, 3))
    for lib in (pr, torch):
        d = lib.distributions
        c = lambda a: _conv(lib, a)  # noqa: E731
        low = d.LowRankMultivariateNormal(c(loc), c(W), c(Dg))
        mvn = d.MultivariateNormal(c(loc[::-1].copy()), scale_tril=c(_f32(L)))
        if lib is pr:
            got = (d.kl_divergence(low, mvn), d.kl_divergence(mvn, low))
        else:
            want = (d.kl_divergence(low, mvn), d.kl_divergence(mvn, low))
    check(got[0], want[0], 1024, "KL(lowrank || mvn)")
    check(got[1], want[1], 1024, "KL(mvn || lowrank)")


def test_kl_transformed_needs_equal_transforms():
    a = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.ExpTransform()])
    b = D.TransformedDistribution(D.Normal(0.0, 1.0), [D.transforms.SigmoidTransform()])
    with pytest.raises(NotImplementedError):
        D.kl_divergence(a, b)
    with pytest.raises(NotImplementedError, match="q.total_count"):
        D.kl_divergence(D.Binomial(3, probs=0.5), D.Binomial(5, probs=0.5))


# ---- transforms -----------------------------------------------------------------------------
def test_transforms_against_torch(rng):
    x = _f32(rng.standard_normal((4, 5)))
    pos = _f32(np.abs(x) + 0.1)
    for make, arg in [
        (lambda T: T.ExpTransform(), x),
        (lambda T: T.SigmoidTransform(), x),
        (lambda T: T.TanhTransform(), x),
        (lambda T: T.AffineTransform(0.5, -2.0), x),
        (lambda T: T.PowerTransform(2.5), pos),
        (lambda T: T.StickBreakingTransform(), x),
        (lambda T: T.ComposeTransform([T.AffineTransform(1.0, 0.5), T.ExpTransform()]), x),
        (lambda T: T.ExpTransform().inv, pos),
    ]:
        tp, tt = make(D.transforms), make(TD.transforms)
        xp, xt = _conv(pr, arg), _conv(torch, arg)
        yp, yt = tp(xp), tt(xt)
        check(yp, yt, 16, f"{tt} forward")
        check(tp.inv(yp), tt.inv(yt), 64, f"{tt} inverse")
        check(tp.log_abs_det_jacobian(xp, yp), tt.log_abs_det_jacobian(xt, yt), 32, f"{tt} ladj")
        assert tp.domain.event_dim == tt.domain.event_dim
        assert tp.codomain.event_dim == tt.codomain.event_dim
    soft = D.transforms.SoftmaxTransform()(_conv(pr, x))
    check(soft, torch.softmax(_conv(torch, x), -1), 8, "softmax")
    assert D.transforms.ExpTransform() == D.transforms.ExpTransform()
    assert D.transforms.AffineTransform(0.0, -2.0).sign == -1


def test_transform_cache():
    t = D.transforms.TanhTransform(cache_size=1)
    x = pr.tensor([30.0])  # tanh rounds to 1: atanh(1) would be inf
    y = t(x)
    assert t.inv(y) is x
    with pytest.raises(ValueError):
        D.transforms.ExpTransform(cache_size=2)


# ---- validate_args --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make, param",
    [
        (lambda: D.LogNormal(pr.zeros(2), pr.tensor([1.0, -1.0])), "scale"),
        (lambda: D.Cauchy(0.0, pr.tensor([0.0])), "scale"),
        (lambda: D.HalfNormal(pr.tensor([-1.0])), "scale"),
        (lambda: D.HalfCauchy(pr.tensor([-1.0])), "scale"),
        (lambda: D.Gumbel(pr.zeros(1), pr.tensor([-2.0])), "scale"),
        (lambda: D.StudentT(pr.tensor([-1.0])), "df"),
        (lambda: D.Chi2(pr.tensor([0.0])), "df"),
        (lambda: D.Dirichlet(pr.tensor([1.0, -1.0])), "concentration"),
        (lambda: D.Poisson(pr.tensor([-1.0])), "rate"),
        (lambda: D.Binomial(pr.tensor([2.5]), probs=pr.tensor([0.5])), "total_count"),
        (lambda: D.Binomial(3, probs=pr.tensor([1.5])), "probs"),
        (lambda: D.Geometric(pr.tensor([1.5])), "probs"),
        (lambda: D.RelaxedBernoulli(pr.tensor(0.5), probs=pr.tensor([1.5])), "probs"),
        (lambda: D.LowRankMultivariateNormal(pr.zeros(2), pr.ones(2, 1), -pr.ones(2)), "cov_diag"),
    ],
)
def test_invalid_parameters_raise(make, param):
    with pytest.raises(ValueError, match=f"Expected parameter {param}"):
        make()


def test_invalid_values_and_constructor_errors():
    for d, bad in [
        (D.LogNormal(0.0, 1.0), pr.tensor([-1.0])),
        (D.HalfNormal(1.0), pr.tensor([-0.5])),
        (D.Poisson(pr.tensor([2.0])), pr.tensor([1.5])),
        (D.Binomial(3, probs=pr.tensor([0.5])), pr.tensor([4.0])),
        (D.Geometric(pr.tensor([0.5])), pr.tensor([-1.0])),
        (D.Dirichlet(pr.ones(3)), pr.tensor([0.5, 0.6, 0.1])),
        (D.RelaxedBernoulli(pr.tensor(0.5), probs=pr.tensor([0.5])), pr.tensor([1.5])),
    ]:
        with pytest.raises(ValueError, match="to be within the support"):
            d.log_prob(bad)
    D.Poisson(pr.tensor([2.0]), validate_args=False).log_prob(pr.tensor([1.5]))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Geometric()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Binomial(3, probs=0.5, logits=0.0)
    with pytest.raises(ValueError, match="at least one-dimensional"):
        D.Dirichlet(pr.tensor(1.0))
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices"):
        D.LowRankMultivariateNormal(pr.zeros(3), pr.ones(2, 1), pr.ones(3))
    with pytest.raises(ValueError, match="cov_diag must be a batch of vectors"):
        D.LowRankMultivariateNormal(pr.zeros(3), pr.ones(3, 1), pr.ones(2))
    with pytest.raises(ValueError, match="Incompatible batch shapes"):
        D.LowRankMultivariateNormal(pr.zeros(2, 3), pr.ones(4, 3, 1), pr.ones(3))
    with pytest.raises(ValueError, match="Mixture distribution needs"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(pr.zeros(3), pr.ones(3)))
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(logits=pr.zeros(2)), D.Normal(pr.zeros(3), pr.ones(3)))
    with pytest.raises(ValueError, match="transforms must be"):
        D.TransformedDistribution(D.Normal(0.0, 1.0), "exp")
    with pytest.raises(NotImplementedError, match="Inhomogeneous"):
        D.Binomial(pr.tensor([2.0, 3.0]), probs=pr.tensor([0.5, 0.5])).entropy()


def test_set_default_validate_args_applies_to_new_families():
    D.Distribution.set_default_validate_args(False)
    try:
        d = D.Poisson(pr.tensor([-1.0]))
        assert not d._validate_args
        d.log_prob(pr.tensor([0.5]))
        with pytest.raises(ValueError):
            D.Poisson(pr.tensor([-1.0]), validate_args=True)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Gumbel(0.0, -1.0)
