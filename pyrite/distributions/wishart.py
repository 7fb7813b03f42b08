"""Wishart(df, covariance_matrix | precision_matrix | scale_tril), as
torch.distributions.Wishart."""

from __future__ import annotations

import math
import numbers
import warnings

import pyrite as pr

from . import constraints
from .chi2 import Chi2
from .distribution import Distribution
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """The multivariate digamma: sum over i < p of digamma(x - i / 2)."""
    if not bool((x > (p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    halves = pr.arange(p, dtype=x.dtype) / 2
    return pr.digamma(x.unsqueeze(-1) - halves).sum(-1)


class Wishart(Distribution):
    """The Wishart distribution over p x p positive-definite matrices with `df` > p - 1
    degrees of freedom and scale matrix Sigma, given as one of `covariance_matrix`,
    `precision_matrix` (its inverse) or `scale_tril` (its lower Cholesky factor, the form
    every computation uses). Mean df Sigma.

    `rsample` draws by the Bartlett decomposition, L A A^T L^T with A lower triangular,
    A_ii = sqrt(Chi2(df - i)) and standard normals below: pathwise in the scale matrix; pyrite
    has no differentiable gamma sampler, so it raises when `df` itself needs a gradient. A
    draw that is not numerically positive definite (possible for df < p) is redrawn up to
    `max_try_correction` times, with a warning."""

    support = constraints.positive_definite
    has_rsample = True

    @property
    def arg_constraints(self):
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self.event_shape[-1] - 1),
        }

    def __init__(
        self,
        df,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        given = [m is not None for m in (covariance_matrix, scale_tril, precision_matrix)]
        if sum(given) != 1:
            raise AssertionError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        param = next(m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None)
        if param.dim() < 2:
            raise ValueError(
                "scale_tril must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if isinstance(df, numbers.Number):
            batch_shape = pr.Size(tuple(param.shape[:-2]))
            self.df = pr.tensor(float(df), dtype=param.dtype)
        else:
            batch_shape = pr.Size(pr.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(tuple(batch_shape))
        event_shape = pr.Size(tuple(param.shape[-2:]))
        p = event_shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        mshape = tuple(batch_shape) + (p, p)
        if scale_tril is not None:
            self.scale_tril = param.expand(mshape)
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(mshape)
        else:
            self.precision_matrix = param.expand(mshape)
        if bool((self.df < p).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for "
                "ndim - 1 < df < ndim.",
                stacklevel=2,
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = pr.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._bartlett_chi2(batch_shape)

    def _bartlett_chi2(self, batch_shape):
        """Chi2(df - i) for i < p: the squared diagonal of Bartlett's factor."""
        p = self._event_shape[-1]
        offsets = pr.arange(p, dtype=self._unbroadcasted_scale_tril.dtype)
        df = self.df.detach().unsqueeze(-1) - offsets
        return Chi2(df.expand(tuple(batch_shape) + (p,)), validate_args=False)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = pr.Size(batch_shape)
        mshape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(mshape)
        new.df = self.df.expand(tuple(batch_shape))
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(mshape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._bartlett_chi2(batch_shape)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = pr.eye(self._event_shape[-1], dtype=L.dtype)
        return pr.cholesky_solve(eye.expand(tuple(L.shape)), L).expand(self._matrix_shape())

    def _df_matrix(self):
        """df shaped to broadcast against the batch of matrices."""
        return self.df.reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = pr.where(factor <= 0, math.nan, factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        d = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (V.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        with pr.no_grad():
            chi2 = self._dist_chi2.sample(sample_shape)
            diag = chi2.sqrt().clamp(min=pr.finfo(chi2.dtype).eps)
            below = pr.randn(tuple(sample_shape) + self._matrix_shape(), dtype=chi2.dtype)
            noise = below.tril(-1) + diag.diag_embed()
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """A draw by Bartlett's decomposition (see the class docstring); draws that are not
        positive definite are redrawn up to `max_try_correction` (default 10) times."""
        if self.df.requires_grad and pr.is_grad_enabled():
            raise NotImplementedError(
                "pyrite: Wishart.rsample: no gradient with respect to df (pyrite has no "
                "differentiable gamma sampler); detach df or use sample()"
            )
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = pr.Size(tuple(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample.detach())
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                fresh = self._bartlett_sampling(sample_shape)
                sample = pr.where(singular.unsqueeze(-1).unsqueeze(-1), fresh, sample)
                singular = ~self.support.check(sample.detach())
                if not bool(singular.any()):
                    break
        return sample

    def _half_log_det_scale(self):
        """p log(2) / 2 + log det L."""
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        return p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        batch = pr.broadcast_shapes(tuple(value.shape[:-2]), tuple(L.shape[:-2]))
        full = tuple(batch) + (p, p)
        trace = pr.cholesky_solve(value.expand(full), L.expand(full))
        trace = trace.diagonal(dim1=-2, dim2=-1).sum(-1)
        return (
            -nu * self._half_log_det_scale()
            - pr.mvlgamma(nu / 2, p=p)
            + (nu - p - 1) / 2 * pr.linalg.slogdet(value).logabsdet
            - trace / 2
        )

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        return (
            (p + 1) * self._half_log_det_scale()
            + pr.mvlgamma(nu / 2, p=p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p)
            + nu * p / 2
        )
