"""ContinuousBernoulli(probs or logits), as torch.distributions.ContinuousBernoulli."""

from __future__ import annotations

import math

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .distribution import Distribution
from .utils import BinaryParams, broadcast_all, clamp_probs, lazy_property, logits_to_probs

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(BinaryParams, Distribution):
    """The continuous Bernoulli on [0, 1] (Loaiza-Ganem and Cunningham, 2019): density
    C(p) p^x (1 - p)^(1 - x). Its normalizer and moments cancel catastrophically near p = 1/2,
    so inside `lims` they switch to Taylor series, as torch's. `rsample` is the inverse cdf of
    a uniform draw (reparameterized)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        batch_shape, _ = self._set_param(probs, logits)
        if probs is not None:
            if validate_args is not None:
                if not bool(self.arg_constraints["probs"].check(self.probs).all()):
                    raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = pr.Size(batch_shape)
        self._expand_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return pr.where(
            self._outside_unstable_region(), self.probs, pr.full_like(self.probs, self._lims[0])
        )

    def _cont_bern_log_norm(self):
        """log C(p), with its Taylor series about p = 1/2 inside `lims`."""
        cut = self._cut_probs()
        below = pr.where(cut <= 0.5, cut, pr.zeros_like(cut))
        above = pr.where(cut >= 0.5, cut, pr.ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - pr.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return pr.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return pr.where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        cut = self._cut_probs()
        var = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(
            2
        )
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return pr.where(self._outside_unstable_region(), var, taylor)

    def sample(self, sample_shape=()):
        with pr.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        u = pr.rand(shape, dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        bce = F.binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = pr.where(self._outside_unstable_region(), cdfs, value)
        inside = pr.where(value >= 1.0, pr.ones_like(unbounded), unbounded)
        return pr.where(value <= 0.0, pr.zeros_like(unbounded), inside)

    def icdf(self, value):
        cut = self._cut_probs()
        inv = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (
            cut.log() - (-cut).log1p()
        )
        return pr.where(self._outside_unstable_region(), inv, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0
