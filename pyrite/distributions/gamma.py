"""Gamma(concentration, rate) and Beta(concentration1, concentration0), as
torch.distributions'. Samples are drawn by Marsaglia and Tsang's rejection method on the
device; pyrite has no differentiable gamma sampler (torch's uses implicit reparameterization),
so these two have `has_rsample = False` and `rsample` raises NotImplementedError."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Beta", "Gamma", "standard_gamma"]

_MAX_ROUNDS = 64


def standard_gamma(alpha):
    """Gamma(alpha, 1) draws of alpha's shape (no gradient). Marsaglia and Tsang (2000):
    for a >= 1, x = d v with d = a - 1/3, v = (1 + z / sqrt(9 d))^3, z ~ N(0, 1), accepted when
    log u < z^2/2 + d - d v + d log v; every element is redrawn until accepted (over 95% are on
    each round). For a < 1, a Gamma(a + 1) draw times u^(1/a). Clamped below at the smallest
    normal float, as torch's sampler."""
    with pr.no_grad():
        alpha = alpha.detach()
        boost = alpha < 1
        a = pr.where(boost, alpha + 1, alpha)
        d = a - 1.0 / 3.0
        c = (9 * d).rsqrt()
        out = pr.zeros_like(a)
        done = pr.zeros(tuple(a.shape), dtype=pr.bool)
        for _ in range(_MAX_ROUNDS):
            z = pr.randn(tuple(a.shape), dtype=a.dtype)
            u = pr.rand(tuple(a.shape), dtype=a.dtype)
            v = (1 + c * z) ** 3
            ok = (v > 0) & (pr.log(u) < 0.5 * z * z + d - d * v + d * pr.log(v.clamp(min=1e-30)))
            out = pr.where(ok & ~done, d * v, out)
            done = done | ok
            if bool(done.all()):
                break
        u = pr.rand(tuple(a.shape), dtype=a.dtype)
        out = pr.where(boost, out * u.pow(alpha.reciprocal()), out)
        return out.clamp(min=pr.finfo(a.dtype).tiny)


class Gamma(Distribution):
    """The gamma distribution with shape `concentration` and inverse scale `rate`: density
    rate^a x^(a-1) exp(-rate x) / Gamma(a). No `rsample` (see the module's docstring) and no
    `cdf` (pyrite has no regularized incomplete gamma function)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = False

    def __init__(self, concentration, rate, validate_args=None):
        self._init_params(("concentration", "rate"), (concentration, rate), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gamma, ("concentration", "rate"), batch_shape, _instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with pr.no_grad():
            x = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
            return x.clamp(min=pr.finfo(x.dtype).tiny)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            "pyrite: Gamma.rsample: pyrite has no differentiable gamma sampler (use sample)"
        )

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, r = self.concentration, self.rate
        return pr.xlogy(a, r) + pr.xlogy(a - 1, value) - r * value - pr.lgamma(a)

    def entropy(self):
        a, r = self.concentration, self.rate
        return a - pr.log(r) + pr.lgamma(a) + (1.0 - a) * pr.digamma(a)

    def cdf(self, value):
        """The regularized lower incomplete gamma P(concentration, rate·value) (torch's; no
        gradient with respect to concentration, as torch's gammainc)."""
        if self._validate_args:
            self._validate_sample(value)
        return pr.special.gammainc(self.concentration, self.rate * value)


class Beta(Distribution):
    """The beta distribution on (0, 1) with concentrations `concentration1` (alpha) and
    `concentration0` (beta): density x^(a-1) (1-x)^(b-1) / B(a, b). Sampled as X / (X + Y)
    with X ~ Gamma(a), Y ~ Gamma(b); no `rsample` (see the module's docstring)."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = False

    def __init__(self, concentration1, concentration0, validate_args=None):
        names = ("concentration1", "concentration0")
        self._init_params(names, (concentration1, concentration0), validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("concentration1", "concentration0")
        return self._expand_params(Beta, names, batch_shape, _instance)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            "pyrite: Beta.rsample: pyrite has no differentiable gamma sampler (use sample)"
        )

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        am1, bm1 = (a - 1).clamp(min=0), (b - 1).clamp(min=0)
        mode = am1 / (am1 + bm1)
        # both below 1: the density is unbounded at both ends; torch (through Dirichlet's mode)
        # answers 1, and so do we
        both_small = (a < 1) & (b < 1)
        return pr.where(both_small, pr.ones_like(mode), mode)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return a * b / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with pr.no_grad():
            x = standard_gamma(self.concentration1.expand(shape))
            y = standard_gamma(self.concentration0.expand(shape))
            eps = pr.finfo(x.dtype).eps
            return (x / (x + y)).clamp(min=pr.finfo(x.dtype).tiny, max=1 - eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return pr.xlogy(a - 1, value) + pr.xlogy(b - 1, 1 - value) - _lbeta(a, b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (
            _lbeta(a, b)
            - (a - 1) * pr.digamma(a)
            - (b - 1) * pr.digamma(b)
            + (total - 2) * pr.digamma(total)
        )


def _lbeta(a, b):
    return pr.lgamma(a) + pr.lgamma(b) - pr.lgamma(a + b)
