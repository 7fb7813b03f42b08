"""OneHotCategoricalStraightThrough, as torch.distributions': a OneHotCategorical with the
straight-through gradient estimator as its `rsample`."""

from __future__ import annotations

from .categorical import OneHotCategorical

__all__ = ["OneHotCategoricalStraightThrough"]


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose `rsample` is reparameterizable by the straight-through
    estimator (Bengio et al., 2013): the forward value is a one-hot draw, the backward pass
    treats it as `probs` (sample + probs - probs.detach())."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
