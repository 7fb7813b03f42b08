"""LKJCholesky(dim, concentration), as torch.distributions.LKJCholesky."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .gamma import Beta
from .utils import broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution over lower Cholesky factors L of dim x dim correlation matrices:
    the density of M = L L^T is proportional to det(M)^(concentration - 1), so concentration
    1 is uniform over correlation matrices. Sampled by the onion method (Lewandowski,
    Kurowicka and Joe 2009, section 3.2) on the Cholesky factor: row i is sqrt(y_i) times a
    random unit vector in its first i coordinates, y_i ~ Beta(i / 2, concentration +
    (dim - 2 - i) / 2) (no `rsample`, as torch)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}."
            )
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.size()
        dtype = self.concentration.dtype
        # the Beta of each row's squared off-diagonal length, vectorized over rows: row i >= 1
        # draws Beta(i / 2, eta + (dim - 2) / 2 - (i - 1) / 2) (the onion method's; row 0's
        # draw is unused, its off-diagonal part being empty). torch 2.13 writes i - 1/2 for the
        # first concentration, which is right for row 1 only: its draws of rows 2 and later
        # are not from this log_prob's density (their correlations come out too spread)
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = pr.cat([pr.zeros(1, dtype=dtype), pr.arange(dim - 1, dtype=dtype)])
        self._beta = Beta(
            0.5 * offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset, validate_args=False
        )
        super().__init__(batch_shape, (dim, dim), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = pr.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with pr.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            shape = tuple(self._extended_shape(sample_shape))
            u = pr.randn(shape, dtype=y.dtype).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            # row 0 has no entries below the diagonal: keep it zero rather than 0 / 0
            u = u / pr.where(norm > 0, norm, 1.0)
            w = y.sqrt() * u
            tiny = pr.finfo(w.dtype).tiny
            diag = (1 - w.pow(2).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value):
        # with L the Cholesky factor, the density of M is prod L_ii^(2 (eta - 1)) and the
        # Jacobian from L to M is prod L_ii^(dim - i): together L_ii^(2 eta - 2 + dim - i) for
        # i = 2..dim (1-based; L_11 = 1)
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-2, dim2=-1)[..., 1:]
        order = pr.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        # the normalizer (Lewandowski et al., p. 1999), through mvlgamma, whose pi term is
        # (dim - 1)(dim - 2) / 4 log(pi) against the paper's dim (dim - 1) / 4 log(pi)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = pr.lgamma(alpha) * dm1
        numerator = pr.mvlgamma(alpha - 0.5, p=dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized - (pi_constant + numerator - denominator)
