"""The matrix and composite constraints of torch.distributions.constraints that the first set
lacked: `square`, `positive_semidefinite`, `corr_cholesky` (LKJCholesky's support) and the
functors `cat` / `stack` (what `biject_to` maps to CatTransform / StackTransform). They are
re-exported by `constraints`, so `constraints.corr_cholesky` is the one to use."""

from __future__ import annotations

import pyrite as pr

from .constraints import Constraint, _LowerCholesky, _Symmetric

__all__ = ["cat", "corr_cholesky", "positive_semidefinite", "square", "stack"]


class _Square(Constraint):
    """Square matrices (a shape check: every batch element answers the same)."""

    event_dim = 2

    def check(self, value):
        square = value.dim() >= 2 and value.shape[-2] == value.shape[-1]
        return pr.full(tuple(value.shape[:-2]), bool(square), dtype=pr.bool)


class _PositiveSemidefinite(_Symmetric):
    """Symmetric matrices with no negative eigenvalue."""

    def check(self, value):
        symmetric = super().check(value)
        if not bool(symmetric.all()):
            return symmetric
        return (pr.linalg.eigvalsh(value) >= 0).all(-1)


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: lower triangular, a positive diagonal,
    and every row of unit Euclidean length (within 10 n eps, as torch)."""

    event_dim = 2

    def check(self, value):
        tol = pr.finfo(value.dtype).eps * value.shape[-1] * 10
        row_norm = pr.linalg.norm(value.detach(), dim=-1)
        unit_rows = ((row_norm - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _Joined(Constraint):
    """Constraints `cseq` applied to parts of a value along `dim` (cat's and stack's)."""

    def __init__(self, cseq, dim=0):
        if not all(isinstance(c, Constraint) for c in cseq):
            raise AssertionError("All elements of cseq must be Constraint instances")
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    def _check_dim(self, value):
        if not -value.dim() <= self.dim < value.dim():
            raise AssertionError(
                f"dim {self.dim} out of range for value with {value.dim()} dimensions"
            )


class _Cat(_Joined):
    """The constraints `cseq` applied to consecutive slices of `lengths` along `dim`, as
    torch.cat joins them."""

    def __init__(self, cseq, dim=0, lengths=None):
        super().__init__(cseq, dim)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise AssertionError(
                f"lengths ({len(self.lengths)}) must match cseq ({len(self.cseq)})"
            )

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        self._check_dim(value)
        checks, start = [], 0
        for constraint, length in zip(self.cseq, self.lengths):
            checks.append(constraint.check(value.narrow(self.dim, start, length)))
            start = start + length
        return pr.cat(checks, self.dim)


class _Stack(_Joined):
    """The constraints `cseq` applied to the slices of `value` along `dim`, one each, as
    torch.stack joins them."""

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value):
        self._check_dim(value)
        slices = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return pr.stack([c.check(v) for v, c in zip(slices, self.cseq)], self.dim)


square = _Square()
positive_semidefinite = _PositiveSemidefinite()
corr_cholesky = _CorrCholesky()
cat = _Cat
stack = _Stack
