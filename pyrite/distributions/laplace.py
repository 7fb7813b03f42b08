"""Laplace(loc, scale), as torch.distributions.Laplace."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Laplace"]


class Laplace(Distribution):
    """The Laplace distribution: density exp(-|x - loc| / scale) / (2 scale). `rsample` is
    reparameterized through the inverse cdf of a uniform draw."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(("loc", "scale"), (loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Laplace, ("loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = pr.finfo(self.loc.dtype).eps
        # u uniform on (-1, 1) (open at -1, so log1p(-|u|) is finite)
        u = pr.rand(tuple(shape), dtype=self.loc.dtype) * (2 - eps) - (1 - eps)
        return self.loc - self.scale * u.sign() * pr.log1p(-u.abs())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -pr.log(2 * self.scale) - pr.abs(value - self.loc) / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * pr.expm1(-d.abs() / self.scale)

    def icdf(self, value):
        t = value - 0.5
        return self.loc - self.scale * t.sign() * pr.log1p(-2 * t.abs())

    def entropy(self):
        return 1 + pr.log(2 * self.scale)
