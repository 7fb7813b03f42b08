"""Uniform(low, high), as torch.distributions.Uniform."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Uniform"]


class Uniform(Distribution):
    """The uniform distribution on the half-open interval [low, high). `rsample` is
    reparameterized: low + u * (high - low), u ~ U[0, 1)."""

    arg_constraints = {
        "low": constraints.dependent(is_discrete=False, event_dim=0),
        "high": constraints.dependent(is_discrete=False, event_dim=0),
    }
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self._init_params(("low", "high"), (low, high), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Uniform, ("low", "high"), batch_shape, _instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.interval(self.low, self.high)

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return pr.full_like(self.high, float("nan"))

    @property
    def stddev(self):
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = pr.rand(tuple(shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value) & (self.high > value)
        return pr.log(inside.to(self.low.dtype)) - pr.log(self.high - self.low)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return pr.log(self.high - self.low)
