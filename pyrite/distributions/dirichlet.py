"""Dirichlet(concentration), as torch.distributions.Dirichlet."""

from __future__ import annotations

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .distribution import Distribution
from .gamma import standard_gamma

__all__ = ["Dirichlet"]


class Dirichlet(Distribution):
    """The Dirichlet distribution on the simplex, with `concentration` (..., K): the event is
    its last dim. Sampled as normalized Gamma(concentration) draws; no `rsample` (as Gamma and
    Beta here: pyrite has no differentiable gamma sampler)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = False

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = concentration.size()
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = pr.Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape + self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            "pyrite: Dirichlet.rsample: pyrite has no differentiable gamma sampler (use sample)"
        )

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        with pr.no_grad():
            x = standard_gamma(self.concentration.expand(shape))
            y = x / x.sum(-1, keepdim=True)
            finfo = pr.finfo(y.dtype)
            return y.clamp(min=finfo.tiny, max=1 - finfo.eps)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return pr.xlogy(c - 1.0, value).sum(-1) + pr.lgamma(c.sum(-1)) - pr.lgamma(c).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        cm1 = (c - 1).clamp(min=0.0)
        mode = cm1 / cm1.sum(-1, keepdim=True)
        # every concentration below 1: the density peaks at the corners; torch answers the
        # first corner (its argmax of an all-NaN row)
        corner = F.one_hot(pr.zeros(tuple(c.shape[:-1]), dtype=pr.int64), c.shape[-1])
        all_small = (c < 1).all(-1, keepdim=True)
        return pr.where(all_small, corner.to(mode.dtype), mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return (
            pr.lgamma(c).sum(-1)
            - pr.lgamma(a0)
            - (k - a0) * pr.digamma(a0)
            - ((c - 1.0) * pr.digamma(c)).sum(-1)
        )
