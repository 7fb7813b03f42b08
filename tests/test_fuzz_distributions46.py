"""Regressions of the session-46 differential fuzz of pyrite.distributions
(scripts/fuzz_distributions.py) against torch.distributions 2.13 CPU, each minimized to a named
parity test, plus a small seeded run of the fuzz itself.

Found and fixed by it:
- MixtureSameFamily.support was the component's support: a value was checked against the
  components' parameter-dependent bounds without the mixture dim (a mixture of Uniforms with
  a batch checked the wrong bounds); it is now torch's MixtureSameFamilyConstraint (the value
  is in the support of every component) (constraints.py, mixture_same_family.py);
- 22 kl_divergence pairs torch registers were missing (ContinuousBernoulli against Beta,
  Exponential, Normal, Uniform and the infinite ones; Gumbel against Exponential, Gamma,
  Normal, Uniform; Bernoulli-Poisson; Poisson-Bernoulli/Binomial), and Wishart-Wishart
  (torch's exponential-family rule), written as the closed form (kl_more.py);
- Gumbel.icdf(0 or 1) was -inf / inf where torch's (its Uniform(tiny, 1 - eps) base mapped
  through the transforms) is finite, and its cdf is that Uniform's (gumbel.py);
- AbsTransform's codomain was `nonnegative`: torch's is `positive` (transforms.py);
- Binomial / NegativeBinomial with a tensor total_count and a number for probs or logits had
  batch shape () where torch's is total_count's (utils.BinaryParams._set_param).
"""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")
TD = torch.distributions
D = pr.distributions
U = 2.0**-24


def _f32(a):
    return np.asarray(a, np.float32)


def _both(a):
    """(pyrite float32, torch float64) tensors of the same float32 values."""
    a = _f32(a)
    return pr.tensor(a), torch.tensor(a, dtype=torch.float64)


def _close(got, want, k=64, floor=1.0):
    got = got.detach().numpy().astype(np.float64)
    want = want.detach().numpy().astype(np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    same_inf = np.isinf(want) & (got == want)
    tol = k * U * (np.abs(np.where(same_inf, 0, want)) + floor)
    err = np.where(same_inf, 0, np.abs(got - want))
    assert (err <= tol).all(), (got, want)


# ---- MixtureSameFamily's support ------------------------------------------------------------
def test_mixture_support_checks_every_component(rng):
    lo = _f32(rng.uniform(-1, 0, (3, 2)))
    hi = _f32(lo + rng.uniform(0.5, 2, (3, 2)))
    logits = _f32(rng.normal(size=(3, 2)))
    x = _f32(rng.uniform(-1.5, 2.5, (5, 3)))
    inside = _f32(np.broadcast_to((lo.max(-1) + hi.min(-1)) / 2, (5, 3)))
    out = []
    for T in (pr, torch):
        t = pr.tensor if T is pr else (lambda a: torch.tensor(a, dtype=torch.float64))
        comp = T.distributions.Uniform(t(lo), t(hi), validate_args=False)
        mix = T.distributions.Categorical(logits=t(logits))
        d = T.distributions.MixtureSameFamily(mix, comp, validate_args=True)
        assert type(d.support).__name__ == "MixtureSameFamilyConstraint"
        assert d.support.event_dim == 0 and not d.support.is_discrete
        out.append(d.support.check(t(x)).numpy())
        d.log_prob(t(inside))  # (in every component's support: accepted)
        with pytest.raises(ValueError):
            d.log_prob(t(x))
    np.testing.assert_array_equal(out[0], out[1])
    assert not out[1].all()


def test_mixture_support_of_vector_components(rng):
    loc = _f32(rng.normal(size=(2, 3, 4)))
    x = _f32(rng.normal(size=(2, 4)))
    x[0, 1] = np.nan
    got = D.MixtureSameFamily(
        D.Categorical(logits=pr.zeros(2, 3)),
        D.Independent(D.Normal(pr.tensor(loc), pr.ones(2, 3, 4)), 1),
    ).support.check(pr.tensor(x))
    want = TD.MixtureSameFamily(
        TD.Categorical(logits=torch.zeros(2, 3)),
        TD.Independent(TD.Normal(torch.tensor(loc), torch.ones(2, 3, 4)), 1),
    ).support.check(torch.tensor(x))
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# ---- the kl_divergence pairs that were missing ----------------------------------------------
def _params(rng, fam, shape):
    pos = lambda: _f32(rng.uniform(0.4, 3, shape))  # noqa: E731
    if fam in ("Normal", "Gumbel"):
        return {"loc": _f32(rng.normal(size=shape)), "scale": pos()}
    if fam == "Laplace":
        return {"loc": _f32(rng.normal(size=shape)), "scale": pos()}
    if fam == "Exponential":
        return {"rate": pos()}
    if fam == "Gamma":
        return {"concentration": pos(), "rate": pos()}
    if fam == "Beta":
        return {"concentration1": pos(), "concentration0": pos()}
    if fam == "Uniform":
        lo = _f32(rng.uniform(-0.5, 0.5, shape))
        return {"low": lo, "high": _f32(lo + rng.uniform(0.3, 2, shape))}
    if fam == "ContinuousBernoulli":
        # (away from 1/2, where its mean and variance cancel as 1 / (1 - 2p)^2 in float32)
        p = rng.uniform(0.05, 0.3, shape)
        return {"probs": _f32(np.where(rng.random(shape) < 0.5, p, 1 - p))}
    if fam in ("Bernoulli",):
        return {"probs": _f32(rng.uniform(0.05, 0.95, shape))}
    if fam == "Poisson":
        return {"rate": pos()}
    if fam == "Binomial":
        return {"total_count": 7.0, "probs": _f32(rng.uniform(0.05, 0.95, shape))}
    raise KeyError(fam)


NEW_PAIRS = [
    ("Beta", "ContinuousBernoulli"),
    ("Uniform", "ContinuousBernoulli"),
    ("ContinuousBernoulli", "Exponential"),
    ("ContinuousBernoulli", "Normal"),
    ("ContinuousBernoulli", "Uniform"),
    ("Exponential", "Gumbel"),
    ("Gamma", "Gumbel"),
    ("Gumbel", "Normal"),
    ("Normal", "Gumbel"),
    ("Uniform", "Gumbel"),
    ("Bernoulli", "Poisson"),
    ("Gumbel", "Beta"),
    ("Gumbel", "ContinuousBernoulli"),
    ("Gumbel", "Exponential"),
    ("Gumbel", "Gamma"),
    ("Gumbel", "Uniform"),
    ("Exponential", "ContinuousBernoulli"),
    ("Gamma", "ContinuousBernoulli"),
    ("Laplace", "ContinuousBernoulli"),
    ("Normal", "ContinuousBernoulli"),
    ("Poisson", "Bernoulli"),
    ("Poisson", "Binomial"),
]


def _make(T, fam, P, grad=False):
    leaves = {}
    kw = {}
    for k, v in P.items():
        if isinstance(v, np.ndarray):
            t = pr.tensor(v) if T is pr else torch.tensor(v, dtype=torch.float64)
            if grad:
                t.requires_grad_()
                leaves[k] = t
            kw[k] = t
        else:
            kw[k] = v
    return getattr(T.distributions, fam)(**kw, validate_args=False), leaves


@pytest.mark.parametrize("pair", NEW_PAIRS, ids=["-".join(p) for p in NEW_PAIRS])
def test_kl_pairs_torch_registers(pair, rng):
    fp, fq = pair
    P, Q = _params(rng, fp, (3, 1)), _params(rng, fq, (5,))
    outs = []
    for T in (pr, torch):
        p, lp = _make(T, fp, P, grad=True)
        q, lq = _make(T, fq, Q, grad=True)
        outs.append((T.distributions.kl_divergence(p, q), lp, lq))
    assert tuple(outs[0][0].shape) == tuple(outs[1][0].shape)  # (the infinite pairs: p's)
    _close(outs[0][0], outs[1][0], k=256)
    got, want = outs[0][0].detach().numpy(), outs[1][0].detach().numpy()
    if np.isfinite(want).all():
        w = rng.uniform(0.5, 1.5, (3, 5))
        for (kl, lp, lq), T in zip(outs, (pr, torch)):
            wt = pr.tensor(_f32(w)) if T is pr else torch.tensor(w)
            (kl * wt).sum().backward()
        for k in outs[1][1]:
            _close(outs[0][1][k].grad, outs[1][1][k].grad, k=1024, floor=np.abs(got).max())
    else:
        assert np.isinf(got[np.isinf(want)]).all()


# ---- Wishart-Wishart -------------------------------------------------------------------------
def _spd(rng, shape, n):
    a = rng.standard_normal(shape + (n, n))
    return _f32(a @ np.swapaxes(a, -1, -2) / n + 0.5 * np.eye(n))


def _torch_wishart_kl(dfp, Sp, dfq, Sq):
    """torch's KL element by element (its batched form sums a batch-shaped term over the batch,
    see the fuzz's docstring)."""
    shape = np.broadcast_shapes(dfp.shape, dfq.shape, Sp.shape[:-2], Sq.shape[:-2])
    out = np.zeros(shape)
    for i in np.ndindex(*shape):
        p = TD.Wishart(
            torch.tensor(np.broadcast_to(dfp, shape)[i], dtype=torch.float64),
            covariance_matrix=torch.tensor(np.broadcast_to(Sp, shape + Sp.shape[-2:])[i]).double(),
        )
        q = TD.Wishart(
            torch.tensor(np.broadcast_to(dfq, shape)[i], dtype=torch.float64),
            precision_matrix=torch.tensor(np.broadcast_to(Sq, shape + Sq.shape[-2:])[i]).double(),
        )
        out[i] = TD.kl_divergence(p, q).item()
    return out


def test_wishart_kl_and_its_df_gradient(rng):
    n = 3
    dfp, Sp = _f32(rng.uniform(3, 9, (2,))), _spd(rng, (2,), n)
    dfq, Sq = _f32(rng.uniform(3, 9, ())), _spd(rng, (), n)
    want = _torch_wishart_kl(dfp, Sp, dfq, Sq)
    df = pr.tensor(dfp).requires_grad_()
    p = D.Wishart(df, covariance_matrix=pr.tensor(Sp))
    q = D.Wishart(pr.tensor(dfq), precision_matrix=pr.tensor(Sq))
    got = D.kl_divergence(p, q)
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=2e-4, atol=2e-4)
    got.sum().backward()
    h = 1e-4  # (central difference of torch float64's KL in p's df)
    fd = (_torch_wishart_kl(dfp + h, Sp, dfq, Sq) - _torch_wishart_kl(dfp - h, Sp, dfq, Sq)) / (
        2 * h
    )
    np.testing.assert_allclose(df.grad.numpy(), fd, rtol=1e-3, atol=1e-3)


# ---- Gumbel's cdf / icdf through torch's Uniform(tiny, 1 - eps) ------------------------------
def test_gumbel_icdf_and_cdf_as_torch(rng):
    loc, scale = _f32(rng.normal(size=(4, 1))), _f32(rng.uniform(0.3, 3, (7,)))
    q = _f32(np.r_[0.0, 1.0, rng.uniform(0, 1, 5)])
    ends = _f32(np.arange(7) % 2)  # (0, 1, 0, 1, ...)
    x = _f32(rng.normal(0, 4, (4, 7)))
    p = D.Gumbel(pr.tensor(loc), pr.tensor(scale))
    t32 = TD.Gumbel(torch.tensor(loc), torch.tensor(scale), validate_args=False)
    t64 = TD.Gumbel(torch.tensor(loc).double(), torch.tensor(scale).double(), validate_args=False)
    got = p.icdf(pr.tensor(q)).numpy()
    assert np.isfinite(got).all()
    # q = 0 and 1 are float32's tiny and 1 - eps (finite, as torch float32's); the others are
    # the float64 quantiles
    _close(p.icdf(pr.tensor(ends)), t32.icdf(torch.tensor(ends)), k=64, floor=4)
    _close(p.icdf(pr.tensor(q))[:, 2:], t64.icdf(torch.tensor(q).double())[:, 2:], k=64, floor=4)
    _close(p.cdf(pr.tensor(x)), t64.cdf(torch.tensor(x).double()), k=64)


# ---- AbsTransform's codomain -----------------------------------------------------------------
def test_abs_transform_codomain_is_positive():
    t = D.transforms.AbsTransform()
    assert type(t.codomain).__name__.lstrip("_") == "GreaterThan"
    d = D.TransformedDistribution(D.Normal(pr.zeros(3), pr.ones(3)), [t])
    want = TD.TransformedDistribution(
        TD.Normal(torch.zeros(3), torch.ones(3)), [TD.transforms.AbsTransform()]
    )
    x = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(
        d.support.check(pr.tensor(x)).numpy(), want.support.check(torch.tensor(x)).numpy()
    )


# ---- a tensor total_count with a number for the probabilities ---------------------------------
@pytest.mark.parametrize("fam", ["Binomial", "NegativeBinomial"])
@pytest.mark.parametrize("param", ["probs", "logits"])
def test_count_families_batch_shape_from_total_count(fam, param, rng):
    count = _f32(rng.integers(1, 20, (3,)))
    value = 0.37 if param == "probs" else -0.8
    k = _f32(np.minimum(rng.integers(0, 20, (2, 3)), count))
    p = getattr(D, fam)(pr.tensor(count), **{param: value})
    t = getattr(TD, fam)(torch.tensor(count).double(), **{param: value})
    assert tuple(p.batch_shape) == tuple(t.batch_shape) == (3,)
    assert tuple(p.sample().shape) == (3,)
    _close(p.log_prob(pr.tensor(k)), t.log_prob(torch.tensor(k).double()), k=256, floor=8)
    _close(p.mean, t.mean, k=16)


# ---- a seeded run of the fuzz ----------------------------------------------------------------
def _fuzz():
    return fuzzing.load_script("fuzz_distributions")


def test_seeded_fuzz_of_distributions_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 60)]
    fails = fuzzing.seeded_failures(fz, seeds)
    assert not fails, "\n".join(fails)
