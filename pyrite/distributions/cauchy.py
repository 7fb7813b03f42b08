"""Cauchy(loc, scale), as torch.distributions.Cauchy."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Cauchy"]


class Cauchy(Distribution):
    """The Cauchy (Lorentz) distribution with median `loc` and half-width `scale`: density
    1 / (pi scale (1 + ((x - loc) / scale)^2)). Its mean is undefined (NaN) and its variance
    infinite, as torch reports. `rsample` is reparameterized: loc + scale * tan(pi (u - 1/2))."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(("loc", "scale"), (loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Cauchy, ("loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        return pr.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return pr.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = pr.empty(tuple(shape), dtype=self.loc.dtype).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - z.pow(2).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return pr.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return pr.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()
