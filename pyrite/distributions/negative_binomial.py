"""NegativeBinomial(total_count, probs or logits), as torch.distributions.NegativeBinomial."""

from __future__ import annotations

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .distribution import Distribution
from .gamma import Gamma
from .utils import BinaryParams, lazy_property

__all__ = ["NegativeBinomial"]


class NegativeBinomial(BinaryParams, Distribution):
    """The number of successes (probability `probs`, or sigmoid(`logits`)) before
    `total_count` failures; total_count may be any non-negative real. Samples are floats,
    drawn as Poisson(Gamma(total_count, exp(-logits))) (no gradient), as torch draws them."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        batch_shape, (count,) = self._set_param(probs, logits, total_count)
        self.total_count = count.to(self._param.dtype)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = pr.Size(batch_shape)
        new.total_count = self.total_count.expand(tuple(batch_shape))
        self._expand_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / pr.sigmoid(-self.logits)

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape=()):
        with pr.no_grad():
            rate = self._gamma.sample(sample_shape)
            return pr.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized = self.total_count * F.logsigmoid(-self.logits) + value * F.logsigmoid(
            self.logits
        )
        log_normalization = (
            -pr.lgamma(self.total_count + value)
            + pr.lgamma(1.0 + value)
            + pr.lgamma(self.total_count)
        )
        log_normalization = log_normalization.masked_fill(self.total_count + value == 0.0, 0.0)
        return log_unnormalized - log_normalization
