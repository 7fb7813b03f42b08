"""Multinomial(total_count, probs or logits), as torch.distributions.Multinomial: counts of
`total_count` Categorical draws over the last dim's categories."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .binomial import Binomial
from .categorical import Categorical
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    """How often each of K categories comes up in `total_count` (an int) independent draws
    with probabilities `probs` (normalized over the last dim) or softmax(`logits`). The event
    shape is (K,); samples are float counts. `log_prob` takes any total per value (the count is
    the value's sum), `sample` the one `total_count`."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = pr.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        sample_shape = pr.Size(tuple(sample_shape))
        # (total_count, *sample_shape, *batch_shape) category indices, the draws moved last
        drawn = self._categorical.sample(pr.Size((self.total_count,)) + sample_shape)
        drawn = drawn.permute(*range(1, drawn.dim()), 0)
        counts = pr.zeros(tuple(self._extended_shape(sample_shape)), dtype=drawn.dtype)
        counts.scatter_add_(-1, drawn, pr.ones_like(drawn))
        return counts.to(self.probs.dtype)

    def entropy(self):
        # n H(Categorical) - log n! + Σ_k Σ_x Binomial(n, p_k)(x) log x!
        n = pr.tensor(float(self.total_count), dtype=self.probs.dtype)
        term1 = n * self._categorical.entropy() - pr.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        term2 = (binomial_probs * pr.lgamma(support + 1)).sum([0, -1])
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = pr.lgamma(value.sum(-1) + 1)
        log_factorial_xs = pr.lgamma(value + 1).sum(-1)
        # a category of probability 0 that never came up contributes 0, not 0 * -inf
        logits = pr.where((value == 0) & (logits == float("-inf")), 0.0, logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers
