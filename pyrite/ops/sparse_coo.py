"""Sparse COO tensors (torch.sparse_coo_tensor, Tensor.to_sparse, torch.spmm), stored dense.

A `SparseCOOTensor` is a dense pyrite tensor (its values where the indices put them, zeros
elsewhere) that also keeps the COO form it was given: `_indices()` (sparse_dim, nnz) and
`_values()` (nnz, *dense dims), uncoalesced as given, `coalesce()`d on request. Its layout is
`pyrite.sparse_coo` and `is_sparse` is True. Every op reads the dense values, so results are
torch's (`sparse @ dense`, `dense + sparse`, `torch.mm(sparse, w)` with w's gradient); the
memory and the work are a dense tensor's. Op results are dense tensors, except where torch's
are sparse through the methods: to_sparse, coalesce, `.to()`, `s * number`, `s / number`,
`-s`, `s * dense`, `dense * s`, `s * s2`, `s + s2`, `s - s2`, `s.add / sub(s2, alpha=)`,
`t()` and `transpose` of sparse dims keep torch's COO pattern, so a later `to_dense()` masks
the gradient to it as torch's does; so do their function forms (`pr.mul(s, 2)`:
sparse_function_forms).

WebGPU has no sparse kernels worth their cost at the sizes ported scripts use (a GCN's 2,708
node adjacency is 29 MB dense); the COO form is for code that reads it back.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor
from . import elementwise as _ew
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
        the indices name), as torch's masked_grad=True (the default); False passes it all.
        (`dtype=` converts; torch refuses it for a sparse tensor.)"""
        if masked_grad is None or masked_grad:
            # (where, not a product with the pattern: storage that holds inf / nan where no
            # index names it, as `s * inf` leaves, reads 0 there, as torch's to_dense)
            out = _ew.where(self._pattern().bool(), self, 0)
        else:
            out = Tensor.clone(self)
        return out if dtype is None else out.to(dtype)

    # ---- the results torch keeps sparse ----------------------------------------------------
    # torch's gradient of a sparse tensor is masked to a COO pattern only where the chain
    # meets to_dense (or torch.sparse.*): `(x.to_sparse() * 2).to_dense()` gives x the
    # gradient 2 at x's nonzeros and 0 elsewhere. So the ops torch keeps sparse return a
    # SparseCOOTensor with torch's pattern; their dense storage is the dense op's (its
    # gradient unmasked, as torch's sparse op passes it) and to_dense masks.
    def _same_pattern(self, dense, values):
        return _wrap(dense, self._sp_indices, values, self._sp_coalesced)

    def _scaled(self, dense, values, finite: bool):
        """`dense` (self's storage scaled by a number) as a result of self's pattern; where the
        scale is not finite (0 * inf and 0 / 0 are nan), the storage is zeroed where no index
        names an entry, as torch's unspecified entries stay 0."""
        if not finite:
            dense = _ew.where(self._pattern().bool(), dense, 0)
        return self._same_pattern(dense, values)

    def __mul__(self, other):
        if _is_number(other):
            dense = Tensor.mul(self, other)
            return self._scaled(dense, self._sp_values * other, math.isfinite(other))
        if isinstance(other, SparseCOOTensor):
            return _sparse_mul(self, other)
        if isinstance(other, Tensor) and _broadcast_to(other.shape, self.shape):
            # (each entry, duplicates too, times other there: the pattern's values)
            at = _values_at(other.expand(tuple(self.shape)), self._sp_indices)
            return self._same_pattern(Tensor.mul(self, other), self._sp_values * at)
        return Tensor.mul(self, other)

    def __rmul__(self, other):
        return self.__mul__(other)

    mul = multiply = __mul__

    def __truediv__(self, other):
        if _is_number(other):
            dense = Tensor.div(self, other)
            return self._scaled(dense, self._sp_values / other, other != 0)
        return Tensor.div(self, other)

    div = divide = __truediv__

    def __neg__(self):
        return self._same_pattern(Tensor.neg(self), -self._sp_values)

    neg = negative = __neg__

    def __add__(self, other, *, alpha=1):
        if isinstance(other, SparseCOOTensor) and tuple(other.shape) == tuple(self.shape):
            return _sparse_add(self, other, alpha)
        return Tensor.add(self, other, alpha=alpha)

    def __radd__(self, other):
        return Tensor.add(other, self) if isinstance(other, Tensor) else self.__add__(other)

    def add(self, other, *, alpha=1):
        return self.__add__(other, alpha=alpha)

    def __sub__(self, other):
        return self.__add__(other, alpha=-1)

    def sub(self, other, *, alpha=1):
        return self.__add__(other, alpha=-alpha)

    subtract = sub

    def __rsub__(self, other):
        return (
            Tensor.sub(other, self) if isinstance(other, Tensor) else Tensor.__rsub__(self, other)
        )

    def transpose(self, dim0, dim1):
        """Sparse, as torch's: the index rows of two sparse dims swapped; a dense dim only
        with itself (torch refuses the rest)."""
        n = self.ndim
        d0, d1 = (dim0 + n if dim0 < 0 else dim0), (dim1 + n if dim1 < 0 else dim1)
        dense = Tensor.transpose(self, dim0, dim1)
        sd = self.sparse_dim()
        if d0 == d1:
            return _wrap(dense, self._sp_indices, self._sp_values, self._sp_coalesced)
        if not (d0 < sd and d1 < sd):
            raise RuntimeError(
                f"pyrite: sparse transpose: transposed dimensions must be sparse Got sparse_dim: "
                f"{sd}, d0: {d0}, d1: {d1}"
            )
        order = list(range(sd))
        order[d0], order[d1] = order[d1], order[d0]
        indices = self._sp_indices[order] if self._nnz() else self._sp_indices
        # (torch: swapped rows are sorted no longer, unless there are none)
        return _wrap(dense, indices, self._sp_values, self._nnz() == 0)

    swapaxes = swapdims = transpose

    def t(self):
        if self.sparse_dim() > 2 or self.dense_dim():
            raise RuntimeError(
                f"pyrite: t() expects a tensor with <= 2 sparse and 0 dense dimensions, but got "
                f"{self.sparse_dim()} sparse and {self.dense_dim()} dense dimensions"
            )
        if self.ndim < 2:
            return self
        return self.transpose(0, 1)

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


# torch's function forms of the methods SparseCOOTensor keeps sparse: name -> (method, the
# keyword arguments the method takes)
_FUNCTION_FORMS = {
    "mul": ("mul", ()),
    "multiply": ("mul", ()),
    "div": ("div", ()),
    "divide": ("div", ()),
    "true_divide": ("div", ()),
    "neg": ("neg", ()),
    "negative": ("neg", ()),
    "add": ("add", ("alpha",)),
    "sub": ("sub", ("alpha",)),
    "subtract": ("sub", ("alpha",)),
    "t": ("t", ()),
    "transpose": ("transpose", ()),
    "swapdims": ("transpose", ()),
    "swapaxes": ("transpose", ()),
}


def sparse_function_forms(functions: dict) -> dict:
    """`functions` (the exported namespace) with the function forms above handing a sparse
    first argument to its method, as torch's dispatch does: pr.mul(s, 2) is s.mul(2), sparse,
    so a later to_dense() keeps the gradient to the stored entries. Other keyword arguments
    (out=, rounding_mode=) take the dense function."""
    out = dict(functions)
    for name, (method, keywords) in _FUNCTION_FORMS.items():
        if name in out:
            out[name] = _sparse_first(out[name], method, frozenset(keywords))
    return out


def _sparse_first(fn, method, keywords):
    @functools.wraps(fn)
    def wrapper(input, *args, **kwargs):
        if type(input) is SparseCOOTensor and keywords.issuperset(kwargs):
            return getattr(input, method)(*args, **kwargs)
        return fn(input, *args, **kwargs)

    return wrapper


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _broadcast_to(shape, target) -> bool:
    """Whether `shape` broadcasts to `target` without growing it."""
    shape, target = tuple(shape), tuple(target)
    if len(shape) > len(target):
        return False
    return all(a in (1, b) for a, b in zip(reversed(shape), reversed(target)))


def _values_at(dense: Tensor, indices: Tensor) -> Tensor:
    """dense[indices[0], ..., indices[sd - 1]]: (nnz, *dense dims)."""
    sd, nnz = indices.shape
    if nnz == 0:
        return dense.new_zeros((0, *dense.shape[sd:]))
    return dense[tuple(indices[d] for d in range(sd))]


def _host_pattern(x: SparseCOOTensor) -> np.ndarray:
    """The flat (row-major over the sparse dims) positions x's indices name, sorted, unique."""
    idx = x._sp_indices.numpy().astype(np.int64)
    if idx.shape[1] == 0:
        return np.zeros(0, np.int64)
    return np.unique(np.ravel_multi_index(tuple(idx), tuple(x.shape[: idx.shape[0]])))


def _from_flat(flat: np.ndarray, x: SparseCOOTensor) -> Tensor:
    sd = x.sparse_dim()
    if flat.size == 0:
        return _int_tensor(np.zeros((sd, 0), np.int64))
    return _int_tensor(np.stack(np.unravel_index(flat, tuple(x.shape[:sd]))))


def _sparse_mul(a: SparseCOOTensor, b: SparseCOOTensor):
    """sparse * sparse: torch's result names the entries both name (coalesced)."""
    if tuple(a.shape) != tuple(b.shape) or a.sparse_dim() != b.sparse_dim():
        return Tensor.mul(a, b)
    dense = Tensor.mul(a, b)
    indices = _from_flat(np.intersect1d(_host_pattern(a), _host_pattern(b)), a)
    return _wrap(dense, indices, _values_at(dense, indices), True)


def _sparse_add(a: SparseCOOTensor, b: SparseCOOTensor, alpha):
    """sparse + alpha * sparse: torch's result names the entries either names (its explicit
    zeros too); coalesced where both were, the two index lists side by side otherwise."""
    if a.sparse_dim() != b.sparse_dim():
        return Tensor.add(a, b, alpha=alpha)
    dense = Tensor.add(a, b, alpha=alpha)
    if a._sp_coalesced and b._sp_coalesced:
        indices = _from_flat(np.union1d(_host_pattern(a), _host_pattern(b)), a)
        return _wrap(dense, indices, _values_at(dense, indices), True)
    from .combine import cat

    values = cat([a._sp_values, b._sp_values * alpha], 0)
    indices = cat([a._sp_indices, b._sp_indices], 1)
    return _wrap(dense, indices, values, False)


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
    if nnz or values.requires_grad:  # (no entries: still a graph, so values.grad is empty)
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
