"""Bernoulli(probs or logits), as torch.distributions.Bernoulli."""

from __future__ import annotations

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .distribution import Distribution
from .utils import BinaryParams, broadcast_all

__all__ = ["Bernoulli"]


class Bernoulli(BinaryParams, Distribution):
    """A 0/1 draw that is 1 with probability `probs` (or sigmoid(`logits`)); give exactly one.
    Samples are floats of the parameter's dtype."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        batch_shape, _ = self._set_param(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = pr.Size(batch_shape)
        self._expand_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        p = self.probs
        mode = (p >= 0.5).to(p.dtype)
        return pr.where(p == 0.5, pr.full_like(p, float("nan")), mode)

    @property
    def variance(self):
        if self._param is self.__dict__.get("logits"):
            # sigmoid(l) sigmoid(-l): no cancellation in 1 - p when p is near 1
            return pr.sigmoid(self.logits) * pr.sigmoid(-self.logits)
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with pr.no_grad():
            return pr.bernoulli(self.probs.expand(tuple(shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def enumerate_support(self, expand=True):
        values = pr.arange(2, dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
