"""InverseGamma(concentration, rate), as torch.distributions.InverseGamma: 1 / X for X ~
Gamma(concentration, rate)."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .gamma import Gamma
from .transformed_distribution import TransformedDistribution
from .transforms import PowerTransform

__all__ = ["InverseGamma"]


class InverseGamma(TransformedDistribution):
    """The inverse gamma distribution: density rate^a / Gamma(a) y^(-a-1) exp(-rate / y).
    Sampled as the reciprocal of a Gamma draw; like pyrite's Gamma it has no `rsample`
    (torch's is reparameterized through its implicit gamma gradient). The cdf is the upper
    regularized incomplete gamma Q(a, rate / y) (torch reaches the same through Gamma.cdf)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -pr.ones((), dtype=base_dist.rate.dtype)
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        a = self.concentration
        return pr.where(a > 1, self.rate / (a - 1), math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        a = self.concentration
        result = self.rate.square() / ((a - 1).square() * (a - 2))
        return pr.where(a > 2, result, math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return pr.igammac(self.concentration, self.rate / value)

    def entropy(self):
        a = self.concentration
        return a + self.rate.log() + a.lgamma() - (1 + a) * a.digamma()
