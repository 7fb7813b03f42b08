"""StudentT(df, loc, scale), as torch.distributions.StudentT."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .gamma import standard_gamma

__all__ = ["StudentT"]


class StudentT(Distribution):
    """Student's t with `df` degrees of freedom, location `loc` and scale `scale`. `rsample`
    is loc + scale * X / sqrt(Z / df) with X ~ N(0, 1), Z ~ Chi2(df): reparameterized in loc
    and scale; pyrite has no differentiable gamma sampler, so it raises when `df` itself needs
    a gradient (torch's implicit gamma reparameterization is not implemented)."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init_params(("df", "loc", "scale"), (df, loc, scale), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(StudentT, ("df", "loc", "scale"), batch_shape, _instance)

    @property
    def mean(self):
        nan = pr.full_like(self.loc, math.nan)
        return pr.where(self.df > 1, self.loc, nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        m = pr.where(df > 2, finite, pr.full_like(finite, math.inf))
        return pr.where(df <= 1, pr.full_like(m, math.nan), m)

    def rsample(self, sample_shape=()):
        if self.df.requires_grad and pr.is_grad_enabled():
            raise NotImplementedError(
                "pyrite: StudentT.rsample: no gradient with respect to df (pyrite has no "
                "differentiable gamma sampler); detach df or use sample()"
            )
        shape = tuple(self._extended_shape(sample_shape))
        df = self.df.detach().expand(shape)
        x = pr.randn(shape, dtype=self.loc.dtype)
        z = standard_gamma(0.5 * df) * 2  # Chi2(df) = Gamma(df / 2, rate 1 / 2)
        y = x * (z / df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        norm = (
            self.scale.log()
            + 0.5 * df.log()
            + 0.5 * math.log(math.pi)
            + pr.lgamma(0.5 * df)
            - pr.lgamma(0.5 * (df + 1.0))
        )
        return -0.5 * (df + 1.0) * (y.pow(2) / df).log1p() - norm

    def entropy(self):
        df = self.df
        lbeta = pr.lgamma(0.5 * df) + math.lgamma(0.5) - pr.lgamma(0.5 * (df + 1))
        return (
            self.scale.log()
            + 0.5 * (df + 1) * (pr.digamma(0.5 * (df + 1)) - pr.digamma(0.5 * df))
            + 0.5 * df.log()
            + lbeta
        )
