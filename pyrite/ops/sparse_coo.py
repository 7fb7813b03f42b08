"""Sparse COO tensors (torch.sparse_coo_tensor, Tensor.to_sparse, torch.spmm), stored dense.

A `SparseCOOTensor` is a dense pyrite tensor (its values where the indices put them, zeros
elsewhere) that also keeps the COO form it was given: `_indices()` (sparse_dim, nnz) and
`_values()` (nnz, *dense dims), uncoalesced as given, `coalesce()`d on request. Its layout is
`pyrite.sparse_coo` and `is_sparse` is True. Every op reads the dense values, so results are
torch's (`sparse @ dense`, `dense + sparse`, `torch.mm(sparse, w)` with w's gradient); the
memory and the work are a dense tensor's, and op results are dense tensors (torch keeps a few
sparse: `sparse * 2`, `sparse.t()`), except to_sparse / coalesce / `.to()`.

WebGPU has no sparse kernels worth their cost at the sizes ported scripts use (a GCN's 2,708
node adjacency is 29 MB dense); the COO form is for code that reads it back.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor
from .porting import layout

sparse_coo = layout("sparse_coo")


class SparseCOOTensor(Tensor):
    """A dense tensor with a COO form (module docstring). Made by sparse_coo_tensor or
    to_sparse, never directly."""

    def __init__(self, *args, **kwargs):  # (Tensor.__init__ is the legacy constructor)
        pass

    @property
    def layout(self):
        return sparse_coo

    @property
    def is_sparse(self):
        return True

    def sparse_dim(self) -> int:
        return self._sp_indices.shape[0]

    def dense_dim(self) -> int:
        return self.ndim - self.sparse_dim()

    def _nnz(self) -> int:
        return self._sp_indices.shape[1]

    def _indices(self):
        return self._sp_indices

    def _values(self):
        return self._sp_values

    def indices(self):
        self._need_coalesced("indices")
        return self._sp_indices

    def values(self):
        self._need_coalesced("values")
        return self._sp_values

    def is_coalesced(self) -> bool:
        return self._sp_coalesced

    def _need_coalesced(self, what):
        if not self._sp_coalesced:
            raise RuntimeError(
                f"pyrite: Cannot get {what} on an uncoalesced tensor, please call .coalesce() first"
            )

    def coalesce(self):
        """The same tensor with sorted, unique indices (duplicates' values summed)."""
        if self._sp_coalesced:
            return self
        idx = self._sp_indices.numpy().astype(np.int64)
        sparse_shape = self._shape[: idx.shape[0]]
        flat = np.ravel_multi_index(tuple(idx), sparse_shape) if idx.size else idx[0]
        keys, slot = np.unique(flat, return_inverse=True)
        indices = np.stack(np.unravel_index(keys, sparse_shape)) if keys.size else idx[:, :0]
        values = self._sp_values
        zeros = values.new_zeros((len(keys), *values.shape[1:]))
        values = zeros.index_add(0, _int_tensor(slot), values)
        return _wrap(Tensor.clone(self), _int_tensor(indices), values, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """A plain dense copy. Its gradient flows back masked to the COO pattern (the entries
        the indices name), as torch's masked_grad=True (the default); False passes it all."""
        if masked_grad is None or masked_grad:
            out = Tensor.mul(self, self._pattern())  # (the values unchanged: 0 elsewhere)
        else:
            out = Tensor.clone(self)
        return out if dtype is None else out.to(dtype)

    def _pattern(self):
        """1 at the entries the indices name (over the dense dims too), 0 elsewhere."""
        from .creation import zeros

        sparse_shape = self._shape[: self.sparse_dim()]
        rows = tuple(self._sp_indices[d] for d in range(self.sparse_dim()))
        mark = zeros(sparse_shape, dtype=self.dtype)
        if self._nnz():
            mark = mark.index_put(rows, mark.new_ones(self._nnz()))
        return mark.reshape(*sparse_shape, *(1,) * self.dense_dim())

    def to_sparse(self, *args, layout=None, **kwargs):
        if args or kwargs.get("sparse_dim") not in (None, self.sparse_dim()):
            raise RuntimeError("pyrite: to_sparse: the tensor is sparse already (sparse_dim)")
        return self

    to_sparse_coo = to_sparse

    def to(self, *args, **kwargs):
        out = Tensor.to(self, *args, **kwargs)
        if out is self or out.dtype is self.dtype:
            return self
        return _wrap(out, self._sp_indices, self._sp_values.to(out.dtype), self._sp_coalesced)

    def __repr__(self):
        return (
            f"tensor(indices={self._sp_indices!r},\n       values={self._sp_values!r},\n"
            f"       size={tuple(self._shape)}, nnz={self._nnz()}, layout=pyrite.sparse_coo)"
        )

    __str__ = __repr__


def _int_tensor(a):
    from .creation import tensor

    return tensor(np.ascontiguousarray(a, dtype=np.int64), dtype=D.int32)


def _wrap(dense: Tensor, indices: Tensor, values: Tensor, coalesced: bool) -> SparseCOOTensor:
    """`dense` (its storage, its autograd history) as a SparseCOOTensor with this COO form."""
    t = SparseCOOTensor._make(
        dense._storage, dense._shape, dense._strides, dense._offset, dense.dtype
    )
    t.requires_grad = dense.requires_grad
    t.grad_fn = dense.grad_fn
    t._out_nr = getattr(dense, "_out_nr", 0)
    t._base = dense._base
    t._agen = dense._agen
    t._sp_indices, t._sp_values, t._sp_coalesced = indices, values, coalesced
    return t


def _host_indices(indices) -> np.ndarray:
    if isinstance(indices, Tensor):
        if indices.dtype.kind != "i":
            raise RuntimeError(
                f"pyrite: indices must be an int64 tensor (got {indices.dtype.name})"
            )
        return indices.numpy().astype(np.int64)
    arr = np.asarray(indices)
    if arr.dtype.kind not in "iu":
        raise RuntimeError(f"pyrite: indices must be an int64 tensor (got {arr.dtype})")
    return arr.astype(np.int64)


def sparse_coo_tensor(
    indices,
    values,
    size=None,
    *,
    dtype=None,
    device=None,
    pin_memory=False,
    requires_grad=False,
    check_invariants=None,
    is_coalesced=None,
):
    """torch.sparse_coo_tensor: `values` (nnz, *dense dims) at `indices` (sparse_dim, nnz);
    size inferred (each sparse dim's largest index + 1) when not given. Duplicate indices are
    kept (uncoalesced), their values summed in the dense form, as torch's to_dense sums them."""
    from .creation import tensor, zeros

    idx = _host_indices(indices)
    if idx.ndim != 2:
        raise RuntimeError(f"pyrite: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if not isinstance(values, Tensor):
        values = tensor(values, dtype=dtype)
    if dtype is not None:
        values = values.to(dtype)
    sparse_dim, nnz = idx.shape
    if values.ndim == 0 or values.shape[0] != nnz:
        raise RuntimeError(
            f"pyrite: indices and values must have same nnz, but got nnz from indices: {nnz}, "
            f"nnz from values: {values.shape[0] if values.ndim else 0}"
        )
    if nnz and idx.min() < 0:
        raise RuntimeError("pyrite: found negative index in the indices of a sparse tensor")
    if size is None:
        size = tuple(int(m) + 1 for m in idx.max(1)) if nnz else (0,) * sparse_dim
        size = (*size, *values.shape[1:])
    size = tuple(int(s) for s in size)
    if len(size) != sparse_dim + values.ndim - 1 or tuple(size[sparse_dim:]) != tuple(
        values.shape[1:]
    ):
        raise RuntimeError(
            f"pyrite: number of dimensions must be sparse_dim ({sparse_dim}) + dense_dim "
            f"({values.ndim - 1}), but got {len(size)} (size {list(size)}, values "
            f"{list(values.shape)})"
        )
    for d in range(sparse_dim):
        if nnz and idx[d].max() >= size[d]:
            raise RuntimeError(
                f"pyrite: size is inconsistent with indices: for dim {d}, size is {size[d]} "
                f"but found index {int(idx[d].max())}"
            )
    dense = zeros(size, dtype=values.dtype)
    if nnz:
        dense = dense.index_put(tuple(_int_tensor(row) for row in idx), values, accumulate=True)
    if requires_grad:
        dense.requires_grad_(True)
    coalesced = bool(is_coalesced) if is_coalesced is not None else nnz <= 1
    return _wrap(dense, _int_tensor(idx), values, coalesced)


def to_sparse(self, *args, layout=None, blocksize=None, dense_dim=None, **kwargs):
    """Tensor.to_sparse(sparse_dim=ndim): the nonzero entries (rows over the sparse dims
    with any nonzero value, when dense dims remain), coalesced."""
    if layout not in (None, sparse_coo) or blocksize is not None:
        raise NotImplementedError(f"pyrite: to_sparse: only the COO layout (got {layout})")
    sparse_dim = args[0] if args else kwargs.get("sparse_dim", None)
    if sparse_dim is None:
        sparse_dim = self.ndim - (dense_dim or 0)
    if not 0 < sparse_dim <= self.ndim and self.ndim:
        raise RuntimeError(
            f"pyrite: sparse_dim must be in [1, {self.ndim}] for a {self.ndim}-d tensor "
            f"(got {sparse_dim})"
        )
    mask = self != 0
    if sparse_dim < self.ndim:
        mask = mask.flatten(sparse_dim).any(-1)
    where = mask.nonzero()  # (nnz, sparse_dim), row-major: sorted, unique
    indices = where.t().contiguous()
    values = self[tuple(where[:, d] for d in range(sparse_dim))] if sparse_dim else self
    return _wrap(Tensor.clone(self), indices, values, True)


def to_sparse_coo(self):
    return to_sparse(self)


def spmm(input, mat2):
    """torch.spmm: sparse (or dense) @ dense."""
    return input.mm(mat2)


# ---- the sparse accessors on a dense tensor: torch's answers and errors ----------------------
def _strided_error(name, kind="sparse coordinate tensor"):
    def method(self):
        raise RuntimeError(f"pyrite: {name} expected {kind} layout but got Strided")

    method.__name__ = name
    return method


def _not_sparse(name):
    def method(self):
        raise NotImplementedError(f"pyrite: {name} is for sparse tensors; this one is dense")

    method.__name__ = name
    return method


def _sparse_dim(self) -> int:
    return 0


def _dense_dim(self) -> int:
    return self.ndim


for _f in (sparse_coo_tensor, to_sparse, to_sparse_coo, spmm):
    _f._pyrite_plain = True  # (compositions of recorded ops: nothing of their own to record)

__all__ = ["sparse_coo_tensor", "spmm"]
METHODS = {
    "to_sparse": to_sparse,
    "to_sparse_coo": to_sparse_coo,
    "indices": _strided_error("indices"),
    "values": _strided_error("values", "sparse tensor"),
    "coalesce": _strided_error("coalesce"),
    "is_coalesced": _strided_error("is_coalesced"),
    "_indices": _not_sparse("_indices"),
    "_values": _not_sparse("_values"),
    "_nnz": _not_sparse("_nnz"),
    "sparse_dim": _sparse_dim,
    "dense_dim": _dense_dim,
}
for _f in METHODS.values():
    _f._pyrite_plain = True
