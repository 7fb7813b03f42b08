"""Exponential(rate), as torch.distributions.Exponential."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Exponential"]


class Exponential(Distribution):
    """The exponential distribution with density rate * exp(-rate * x) on x >= 0. `rsample`
    is reparameterized: E / rate with E a standard exponential draw."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self._init_params(("rate",), (rate,), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Exponential, ("rate",), batch_shape, _instance)

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return pr.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return pr.empty(tuple(shape), dtype=self.rate.dtype).exponential_() / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - pr.exp(-self.rate * value)

    def icdf(self, value):
        return -pr.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - pr.log(self.rate)
