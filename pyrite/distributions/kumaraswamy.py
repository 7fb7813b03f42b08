"""Kumaraswamy(concentration1, concentration0), as torch.distributions.Kumaraswamy: the
inverse-cdf transform of a Uniform(0, 1) draw."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform
from .uniform import Uniform
from .utils import broadcast_all

__all__ = ["Kumaraswamy"]

_EULER_GAMMA = 0.57721566490153286060


def _moment(a, b, n):
    """E[X^n] = b B(1 + n / a, b)."""
    arg = 1 + n / a
    return b * pr.exp(pr.lgamma(arg) + pr.lgamma(b) - pr.lgamma(arg + b))


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1]: density a b x^(a-1) (1 - x^a)^(b-1) with
    a = `concentration1`, b = `concentration0`; a draw is (1 - U^(1/b))^(1/a). `rsample` is
    reparameterized in both parameters; cdf/icdf come from the uniform's."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base_dist = Uniform(
            pr.zeros_like(self.concentration0),
            pr.ones_like(self.concentration0),
            validate_args=validate_args,
        )
        transforms = [
            PowerTransform(exponent=self.concentration0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # ((a - 1) / (a b - 1))^(1/a), in logs; NaN where either concentration is below 1
        # (torch 2.13 writes log1p(-b) - log1p(-a b) here, NaN for every b > 1: its mode is
        # NaN everywhere, so pyrite answers the closed form instead)
        a, b = self.concentration1, self.concentration0
        log_mode = ((a - 1).log() - (a * b - 1).log()) / a
        log_mode = pr.where((b < 1) | (a < 1), math.nan, log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return _moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        h0 = pr.digamma(b + 1) + _EULER_GAMMA
        return t0 + t1 * h0 - pr.log(a) - pr.log(b)
