"""LowRankMultivariateNormal(loc, cov_factor, cov_diag), as torch.distributions'."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .multivariate_normal import _batch_mahalanobis, _batch_mv
from .utils import lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of the capacitance matrix I + W^T D^-1 W: (..., m, m)."""
    m = W.shape[-1]
    Wt_Dinv = W.mT / D.unsqueeze(-2)  # (..., m, n)
    K = pr.matmul(Wt_Dinv, W) + pr.eye(m, dtype=W.dtype)
    return pr.linalg.cholesky(K)


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """log det(W W^T + D) = log det(C) + log det(D) (the matrix determinant lemma)."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """x^T (W W^T + D)^-1 x by Woodbury: x^T D^-1 x - |C^-1 W^T D^-1 x|^2."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    term1 = (x.pow(2) / D).sum(-1)
    term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return term1 - term2


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal whose covariance is cov_factor @ cov_factor.T + diag(cov_diag),
    with `cov_factor` (..., n, m) of low rank m: densities cost O(n m^2) through the matrix
    determinant lemma and Woodbury's identity, never an n x n factorization. `rsample` is
    reparameterized: loc + W eps_m + sqrt(D) eps_n."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, "
                "with optional leading batch dimensions"
            )
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m"
            )
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        n, m = event_shape[0], cov_factor.shape[-1]
        try:
            batch = tuple(
                pr.broadcast_shapes(
                    tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]), tuple(cov_diag.shape[:-1])
                )
            )
        except ValueError as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {tuple(loc.shape)}, "
                f"cov_factor {tuple(cov_factor.shape)}, cov_diag {tuple(cov_diag.shape)}"
            ) from e
        self.loc = loc.expand(batch + (n,))
        self.cov_factor = cov_factor.expand(batch + (n, m))
        self.cov_diag = cov_diag.expand(batch + (n,))
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        super().__init__(batch, tuple(event_shape), validate_args=validate_args)
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = pr.Size(batch_shape)
        loc_shape = tuple(batch_shape + self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (W.pow(2).sum(-1) + D).expand(tuple(self._batch_shape + self._event_shape))

    @lazy_property
    def covariance_matrix(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        cov = pr.matmul(W, W.mT) + pr.diag_embed(D)
        return cov.expand(self._matrix_shape())

    @lazy_property
    def scale_tril(self):
        # chol(D^-1/2 Sigma D^-1/2) scaled back: the inner matrix is I + low rank, well
        # conditioned, as torch computes it
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        n = self._event_shape[0]
        Dsqrt = D.sqrt().unsqueeze(-1)
        Wn = W / Dsqrt
        K = pr.matmul(Wn, Wn.mT) + pr.eye(n, dtype=W.dtype)
        return (Dsqrt * pr.linalg.cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        # (W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1 (Woodbury)
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        Wt_Dinv = W.mT / D.unsqueeze(-2)
        m = W.shape[-1]
        L = self._capacitance_tril
        eye = pr.eye(m, dtype=W.dtype).expand(tuple(L.shape))
        Linv = pr.linalg.solve_triangular(L, eye, upper=False)
        A = pr.matmul(Linv, Wt_Dinv)  # (..., m, n)
        prec = pr.diag_embed(D.reciprocal()) - pr.matmul(A.mT, A)
        return prec.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        m = self._unbroadcasted_cov_factor.shape[-1]
        eps_W = pr.randn(shape[:-1] + (m,), dtype=self.loc.dtype)
        eps_D = pr.randn(shape, dtype=self.loc.dtype)
        return (
            self.loc
            + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
            + self._unbroadcasted_cov_diag.sqrt() * eps_D
        )

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        M = _batch_lowrank_mahalanobis(W, D, diff, self._capacitance_tril)
        log_det = _batch_lowrank_logdet(W, D, self._capacitance_tril)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + log_det + M)

    def entropy(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        log_det = _batch_lowrank_logdet(W, D, self._capacitance_tril)
        n = self._event_shape[0]
        h = 0.5 * (n * (1.0 + math.log(2 * math.pi)) + log_det)
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
