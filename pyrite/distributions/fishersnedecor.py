"""FisherSnedecor(df1, df2), as torch.distributions.FisherSnedecor: the F distribution."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .gamma import Gamma

__all__ = ["FisherSnedecor"]


class FisherSnedecor(Distribution):
    """The F distribution with `df1` and `df2` degrees of freedom: (X1 / df1) / (X2 / df2)
    for independent chi-squared X1, X2, drawn as the ratio of Gamma(df1 / 2, rate df1) and
    Gamma(df2 / 2, rate df2) draws. Like pyrite's Gamma it has no `rsample` (torch's is
    reparameterized through its implicit gamma gradient). The mean is NaN for df2 <= 2, the
    mode for df1 <= 2 and the variance for df2 <= 4, as torch's."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = False

    def __init__(self, df1, df2, validate_args=None):
        self._init_params(("df1", "df2"), (df1, df2), validate_args)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._expand_params(FisherSnedecor, ("df1", "df2"), batch_shape, _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = self.df2
        return pr.where(df2 > 2, df2 / (df2 - 2), math.nan)

    @property
    def mode(self):
        df1, df2 = self.df1, self.df2
        mode = (df1 - 2) / df1 * df2 / (df2 + 2)
        return pr.where(df1 > 2, mode, math.nan)

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return pr.where(df2 > 4, var, math.nan)

    def sample(self, sample_shape=()):
        with pr.no_grad():
            tiny = pr.finfo(self.df1.dtype).tiny
            x1 = self._gamma1.sample(sample_shape)
            x2 = self._gamma2.sample(sample_shape).clamp(min=tiny)
            return (x1 / x2).clamp(min=tiny)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(
            "pyrite: FisherSnedecor.rsample: pyrite has no differentiable gamma sampler "
            "(use sample)"
        )

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * pr.log(value)
        t3 = (ct1 + ct2) * pr.log1p(ct3 * value)
        return t1 + t2 - t3
