"""Matrix, composite and reshaping transforms of torch.distributions.transforms, the targets of
`biject_to` / `transform_to` for matrix and composite constraints: LowerCholeskyTransform,
PositiveDefiniteTransform, CorrCholeskyTransform, CatTransform and StackTransform; with
ReshapeTransform and SoftplusTransform. They are re-exported by `transforms`."""

from __future__ import annotations

import math

import pyrite as pr
import pyrite.nn.functional as F

from . import constraints
from .transforms import Transform
from .utils import sum_rightmost

__all__ = [
    "CatTransform",
    "CorrCholeskyTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "ReshapeTransform",
    "SoftplusTransform",
    "StackTransform",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]


def _tril_flat_index(n, diag):
    """Flat indices i * n + j of the entries with j <= i + diag of an n x n matrix, row order."""
    return pr.tensor([i * n + j for i in range(n) for j in range(n) if j <= i + diag])


def tril_matrix_to_vec(mat, diag=0):
    """The entries on and below diagonal `diag` of (a batch of) n x n matrices, row by row."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat.index_select(-1, _tril_flat_index(n, diag))


def vec_to_tril_matrix(vec, diag=0):
    """The (batch of) n x n lower triangular matrices, zero above diagonal `diag`, whose entries
    on and below it are `vec`'s in row order."""
    m = vec.shape[-1]
    # the positive root of n^2 + (1 + 2 diag) n - |diag| (diag + 1) - 2 m = 0
    b = 1 + 2 * diag
    root = (-b + math.sqrt(b * b + 8 * m + 4 * abs(diag) * (diag + 1))) / 2
    if abs(round(root) - root) > pr.finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {m} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix."
        )
    n = round(root)
    flat = pr.zeros(tuple(vec.shape[:-1]) + (n * n,), dtype=vec.dtype)
    flat = flat.index_copy(-1, _tril_flat_index(n, diag), vec)
    return flat.reshape(tuple(vec.shape[:-1]) + (n, n))


def _check_dim(t, dim, what):
    if not -t.dim() <= dim < t.dim():
        raise AssertionError(f"dim {dim} out of range for {what} with {t.dim()} dimensions")


class LowerCholeskyTransform(Transform):
    """Square matrices -> lower triangular ones with a positive diagonal: the strictly lower
    part kept, the diagonal exponentiated (not bijective on all matrices: the upper part is
    dropped)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def __hash__(self):
        return hash(LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Square matrices -> positive-definite ones: L L^T with L = LowerCholeskyTransform(x)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def __hash__(self):
        return hash(PositiveDefiniteTransform)

    def _call(self, x):
        L = LowerCholeskyTransform()(x)
        return L @ L.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(pr.linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """A real vector of length D (D - 1) / 2 -> the Cholesky factor of a D x D correlation
    matrix: the vector fills the strictly lower part row by row through tanh, and each row is
    made of unit length by a signed stick breaking of its squares (y_ij = r_ij sqrt(1 - sum
    of the row's earlier squares)); the diagonal takes the rest. The log-Jacobian is that of x
    against the strictly lower entries of y."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other):
        return isinstance(other, CorrCholeskyTransform)

    def __hash__(self):
        return hash(CorrCholeskyTransform)

    def _call(self, x):
        eps = pr.finfo(x.dtype).eps
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        remaining = (1 - r * r).sqrt().cumprod(-1)  # sqrt of the stick left after each entry
        r = r + pr.eye(r.shape[-1], dtype=r.dtype)
        return r * F.pad(remaining[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y):
        left = 1 - (y * y).cumsum(-1)
        left_before = F.pad(left[..., :-1], [1, 0], value=1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left_before, diag=-1).sqrt()
        return (t.log1p() - (-t).log1p()) / 2  # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        left = 1 - (y * y).cumsum(-1)
        # diag=-2 picks, for each strictly lower entry, the stick left before it
        stick = 0.5 * tril_matrix_to_vec(left, diag=-2).log().sum(-1)
        tanh = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


class _PiecewiseTransform(Transform):
    """Cat's and Stack's shared part: the transforms `tseq`, each applied to its slice of the
    input along `dim` (`_slices`), the results joined by `_join` (torch.cat / torch.stack)."""

    _join = None

    def __init__(self, tseq, dim, cache_size):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def _call(self, x):
        self._check(x, "x")
        return self._join([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        self._check(y, "y")
        return self._join([t.inv(s) for t, s in zip(self.transforms, self._slices(y))], self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)


class CatTransform(_PiecewiseTransform):
    """The transforms `tseq` applied to consecutive slices of `lengths` (default 1 each)
    along `dim`, the results joined as torch.cat."""

    _join = staticmethod(pr.cat)

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        super().__init__(tseq, dim, cache_size)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(
                f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})"
            )

    @property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _check(self, t, what):
        _check_dim(t, self.dim, what)
        if t.shape[self.dim] != self.length:
            raise AssertionError(
                f"{what}.size({self.dim}) = {t.shape[self.dim]} must equal length {self.length}"
            )

    def _slices(self, t):
        start = 0
        for length in self.lengths:
            yield t.narrow(self.dim, start, length)
            start = start + length

    def log_abs_det_jacobian(self, x, y):
        self._check(x, "x")
        self._check(y, "y")
        terms = []
        for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y)):
            term = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                term = sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
        # concatenated where `dim` is a batch dim of the result, summed where it is an event dim
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + self.event_dim
        if dim < 0:
            return pr.cat(terms, dim)
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(_PiecewiseTransform):
    """The transforms `tseq` applied to the slices along `dim`, one each, the results joined
    as torch.stack."""

    _join = staticmethod(pr.stack)

    def __init__(self, tseq, dim=0, cache_size=0):
        super().__init__(tseq, dim, cache_size)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _check(self, t, what):
        _check_dim(t, self.dim, what)
        if t.shape[self.dim] != len(self.transforms):
            raise AssertionError(
                f"{what}.size({self.dim}) = {t.shape[self.dim]} must equal len(transforms) "
                f"{len(self.transforms)}"
            )

    def _slices(self, t):
        return [t.select(self.dim, i) for i in range(t.shape[self.dim])]

    def log_abs_det_jacobian(self, x, y):
        self._check(x, "x")
        self._check(y, "y")
        terms = [
            t.log_abs_det_jacobian(xs, ys)
            for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))
        ]
        return pr.stack(terms, self.dim)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class ReshapeTransform(Transform):
    """Reshapes the rightmost `in_shape` dims to `out_shape` (the same number of elements):
    a bijection with a zero log-Jacobian."""

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = pr.Size(tuple(in_shape))
        self.out_shape = pr.Size(tuple(out_shape))
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[: y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        batch = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return pr.zeros(batch, dtype=x.dtype)

    def _reshaped(self, shape, src, dst):
        if len(shape) < len(src):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(src)
        if tuple(shape[cut:]) != tuple(src):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {tuple(src)}")
        return tuple(shape[:cut]) + tuple(dst)

    def forward_shape(self, shape):
        return self._reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._reshaped(shape, self.out_shape, self.in_shape)


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)) (linear above x = 20, as F.softplus); inverse y + log(-expm1(-y))."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def __hash__(self):
        return hash(SoftplusTransform)

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)
