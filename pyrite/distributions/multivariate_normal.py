"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), as
torch.distributions.MultivariateNormal."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["MultivariateNormal"]


def _batch_mv(matrix, vec):
    """matrix @ vec over broadcast batch dims: (..., n, n) x (..., n) -> (..., n)."""
    return pr.matmul(matrix, vec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(scale_tril, diff):
    """|L^-1 diff|^2 over broadcast batch dims, by a triangular solve (L lower)."""
    n = diff.shape[-1]
    batch = pr.broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(diff.shape[:-1]))
    L = scale_tril.expand(tuple(batch) + (n, n))
    d = diff.expand(tuple(batch) + (n,)).unsqueeze(-1)
    y = pr.linalg.solve_triangular(L, d, upper=False).squeeze(-1)
    return y.pow(2).sum(-1)


def _precision_to_scale_tril(P):
    """The lower Cholesky factor of P^-1 without forming the inverse: with J the reversal
    permutation, chol(J P J) = Lf gives P = U U^T for the upper-triangular U = J Lf J, so
    P^-1 = U^-T U^-1 and its lower factor is U^-T = solve(U^T, I)."""
    Lf = pr.linalg.cholesky(pr.flip(P, (-2, -1)))
    Ut = pr.flip(Lf, (-2, -1)).mT  # U^T, lower triangular
    eye = pr.eye(P.shape[-1], dtype=P.dtype).expand(tuple(Ut.shape))
    return pr.linalg.solve_triangular(Ut, eye, upper=False)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean `loc` (the event is its last dim) and
    one of `covariance_matrix`, `precision_matrix` or `scale_tril` (lower-triangular with a
    positive diagonal); batch dims of loc and the matrix broadcast. `rsample` is
    reparameterized: loc + L eps."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m is not None for m in (covariance_matrix, scale_tril, precision_matrix)]
        if sum(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        for name, m in (
            ("scale_tril", scale_tril),
            ("covariance_matrix", covariance_matrix),
            ("precision_matrix", precision_matrix),
        ):
            if m is not None and m.dim() < 2:
                raise ValueError(
                    f"{name} matrix must be at least two-dimensional, "
                    "with optional leading batch dimensions"
                )
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        n = loc.shape[-1]
        batch_shape = pr.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        mshape = tuple(batch_shape) + (n, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(mshape)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(mshape)
        else:
            self.precision_matrix = precision_matrix.expand(mshape)
        self.loc = loc.expand(tuple(batch_shape) + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = pr.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = pr.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return pr.matmul(L, L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = pr.eye(L.shape[-1], dtype=L.dtype).expand(tuple(L.shape))
        Linv = pr.linalg.solve_triangular(L, eye, upper=False)
        return pr.matmul(Linv.mT, Linv).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        var = self._unbroadcasted_scale_tril.pow(2).sum(-1)
        return var.expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = pr.randn(tuple(shape), dtype=self.loc.dtype)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return h
        return h.expand(tuple(self._batch_shape))
