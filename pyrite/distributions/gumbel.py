"""Gumbel(loc, scale), as torch.distributions.Gumbel."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution

__all__ = ["Gumbel"]

_EULER_GAMMA = 0.57721566490153286060


class Gumbel(Distribution):
    """The Gumbel (type-I extreme value) distribution: cdf exp(-exp(-(x - loc) / scale)).
    `rsample` is reparameterized: loc - scale * log(-log u), u uniform on (tiny, 1 - eps).
    (torch builds it as a TransformedDistribution of a Uniform; this is the same law, written
    out.)"""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(("loc", "scale"), (loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Gumbel, ("loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        finfo = pr.finfo(self.loc.dtype)
        u = pr.rand(tuple(shape), dtype=self.loc.dtype).clamp(min=finfo.tiny, max=1 - finfo.eps)
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def _uniform_range(self):
        """(low, high - low) of the Uniform(tiny, 1 - eps) torch's Gumbel transforms."""
        finfo = pr.finfo(self.loc.dtype)
        return finfo.tiny, (1 - finfo.eps) - finfo.tiny

    def cdf(self, value):
        # the transformed Uniform's cdf, as torch's: (u - tiny) / (1 - eps - tiny), in [0, 1]
        if self._validate_args:
            self._validate_sample(value)
        low, width = self._uniform_range()
        u = pr.exp(-pr.exp((self.loc - value) / self.scale))
        return ((u - low) / width).clamp(min=0, max=1)

    def icdf(self, value):
        # the Uniform's icdf first, as torch's: 0 and 1 map to tiny and 1 - eps (finite)
        low, width = self._uniform_range()
        u = value * width + low
        return self.loc - self.scale * (-u.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)
