"""HalfNormal(scale) and HalfCauchy(scale), as torch.distributions': |X| for X a centred
Normal or Cauchy."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .cauchy import Cauchy
from .normal import Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfCauchy", "HalfNormal"]


class _Half(TransformedDistribution):
    """|X| for X symmetric about 0: twice X's density on x >= 0 (and -inf below)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return pr.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return pr.where(value >= 0, log_prob, pr.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Half):
    """|X| for X ~ Normal(0, scale)."""

    def __init__(self, scale, validate_args=None):
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Half):
    """|X| for X ~ Cauchy(0, scale); its mean and variance are infinite."""

    def __init__(self, scale, validate_args=None):
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    @property
    def mean(self):
        return pr.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype)

    @property
    def variance(self):
        return pr.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype)
