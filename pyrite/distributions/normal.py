"""Normal(loc, scale), as torch.distributions.Normal."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Normal"]


class Normal(Distribution):
    """The normal (Gaussian) distribution with mean `loc` and standard deviation `scale`.
    `rsample` is reparameterized: loc + scale * eps, eps ~ N(0, 1)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(("loc", "scale"), (loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Normal, ("loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = pr.randn(tuple(shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale**2
        return (
            -((value - self.loc) ** 2) / (2 * var)
            - self.scale.log()
            - math.log(math.sqrt(2 * math.pi))
        )

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + pr.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * pr.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + pr.log(self.scale)
