"""`pyrite.sparse`: torch.sparse's functions over pyrite's sparse COO tensors (ops/sparse_coo.py:
dense storage with the COO form kept), so `torch.sparse.mm(adj, x)` ports by the import.

Results are dense tensors where torch's are sparse (pyrite's sparse tensors are stored dense:
README, "Differences from PyTorch"); their values are torch's `.to_dense()` of its result:
`softmax` and `log_softmax` take the row's specified entries only (the unspecified ones count
as -inf, and are 0 in the result, as torch's to_dense gives them); `sum` of some dims sums the
values. The inputs torch takes only as sparse tensors are refused as dense ones, with the way
out named.
"""

from __future__ import annotations

from .ops import elementwise as _ew
from .ops import matmul as _matmul
from .ops import rowops as _rowops
from .ops.sparse_coo import SparseCOOTensor

__all__ = ["addmm", "check_sparse_tensor_invariants", "log_softmax", "mm", "softmax", "sum"]


def _need_sparse(x, name: str, dense: str):
    if not isinstance(x, SparseCOOTensor):
        raise RuntimeError(
            f"pyrite: sparse.{name}: expected a sparse COO tensor (x.to_sparse(), "
            f"pr.sparse_coo_tensor), got a dense one; for a dense tensor use {dense}"
        )


def _masked(x):
    """A sparse operand read through to_dense: its gradient masked to its COO pattern, as
    torch.sparse's functions give it (torch.mm and `@` pass it unmasked)."""
    return x.to_dense() if isinstance(x, SparseCOOTensor) else x


def mm(mat1, mat2, reduce: str = "sum"):
    """torch.sparse.mm: mat1 @ mat2 (mat1 sparse or dense), gradients to both; a sparse
    operand's gradient is masked to its pattern (torch's sparse gradient's to_dense)."""
    if reduce != "sum":
        raise NotImplementedError(
            f"pyrite: sparse.mm: reduce={reduce!r} (torch's CSR-only reductions); only 'sum'"
        )
    return _matmul.mm(_masked(mat1), _masked(mat2))


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2), mat1 sparse (its gradient
    masked to its pattern, as sparse.mm's)."""
    return _matmul.addmm(mat, _masked(mat1), mat2, beta=beta, alpha=alpha)


def sum(input, dim=None, dtype=None):
    """torch.sparse.sum: the sum of a sparse tensor's values, over every dim (a 0-d tensor) or
    over `dim` (an int or a tuple of them); the gradient reaches the specified entries only
    (torch's is sparse, of the input's pattern)."""
    _need_sparse(input, "sum", "x.sum(dim)")
    x = input.to_dense() if dtype is None else input.to_dense().to(dtype)
    return x.sum() if dim is None else x.sum(dim)


def _masked_rows(input, dim, dtype, name, fn):
    _need_sparse(input, name, f"pr.{name}(x, dim)")
    x = input.to_dense(masked_grad=True)
    if dtype is not None:
        x = x.to(dtype)
    keep = input._pattern().expand(x.shape).bool()  # (the specified entries)
    out = fn(_ew.where(keep, x, float("-inf")), dim)
    return _ew.where(keep, out, 0.0)  # (a row with nothing specified: 0, not NaN)


def softmax(input, dim, *, dtype=None):
    """torch.sparse.softmax: softmax along `dim` over the specified entries only (the others
    count as -inf: 0 in the result)."""
    return _masked_rows(input, dim, dtype, "softmax", _rowops.softmax)


def log_softmax(input, dim, *, dtype=None):
    """torch.sparse.log_softmax: log_softmax along `dim` over the specified entries only (0 at
    the others, as torch's result's to_dense)."""
    return _masked_rows(input, dim, dtype, "log_softmax", _rowops.log_softmax)


class check_sparse_tensor_invariants:
    """torch.sparse.check_sparse_tensor_invariants: pyrite checks a sparse tensor's indices
    against its size whatever this says (sparse_coo_tensor), so enabling it changes nothing;
    it is kept, as a context manager and a decorator, for code that sets it."""

    _enabled = False

    def __init__(self, enable: bool = True):
        self.state = enable
        self.saved = None

    @staticmethod
    def is_enabled() -> bool:
        return check_sparse_tensor_invariants._enabled

    @staticmethod
    def enable():
        check_sparse_tensor_invariants._enabled = True

    @staticmethod
    def disable():
        check_sparse_tensor_invariants._enabled = False

    def __enter__(self):
        if self.saved is not None:
            raise RuntimeError("pyrite: this context manager instance is already activated")
        self.saved = check_sparse_tensor_invariants._enabled
        check_sparse_tensor_invariants._enabled = self.state
        return self

    def __exit__(self, *exc):
        check_sparse_tensor_invariants._enabled = self.saved
        self.saved = None
        return False

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with check_sparse_tensor_invariants(self.state):
                return fn(*args, **kwargs)

        wrapped.__name__ = getattr(fn, "__name__", "wrapped")
        wrapped.__doc__ = getattr(fn, "__doc__", None)
        return wrapped
