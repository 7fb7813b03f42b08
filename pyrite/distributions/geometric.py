"""Geometric(probs or logits), as torch.distributions.Geometric."""

from __future__ import annotations

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .distribution import Distribution
from .utils import BinaryParams, broadcast_all

__all__ = ["Geometric"]


class Geometric(BinaryParams, Distribution):
    """The number of failures before the first success in Bernoulli(`probs`) trials:
    P(k) = (1 - p)^k p, k = 0, 1, ... Give `probs` (in (0, 1]) or `logits`. Samples are
    floats, drawn by inversion: floor(log u / log(1 - p))."""

    arg_constraints = {"probs": constraints.interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        batch_shape, _ = self._set_param(probs, logits)
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            # torch's extra check: p = 0 never succeeds (constraints.interval allows it)
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{value}"
                )

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = pr.Size(batch_shape)
        self._expand_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return pr.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with pr.no_grad():
            tiny = pr.finfo(self.probs.dtype).tiny
            u = pr.rand(shape, dtype=self.probs.dtype).clamp(min=tiny)
            return (u.log() / (-self.probs.expand(shape)).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 and k = 0: 0 * log(0) is 0
        probs = pr.where((probs == 1) & (value == 0), pr.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        # -[(1-p) log(1-p) + p log p] / p as a sum of positive terms: torch's
        # binary_cross_entropy_with_logits(logits, probs) / p cancels for very negative logits
        # (~950 ULP in f32 at logits = -8)
        lg = self.logits
        q = pr.sigmoid(-lg)  # 1 - p without rounding p first
        return (q * F.softplus(lg) + self.probs * F.softplus(-lg)) / self.probs
