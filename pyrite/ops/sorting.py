"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median, nanmedian, searchsorted,
bucketize (on the device, kernels/sort.py), unique and unique_consecutive (read back: their result
size depends on the data, and PyTorch synchronises for them too).

Rows along any dim: the dim is moved last and made contiguous, each row sorted by a bitonic
network of (key, index) pairs, so the result is always the stable sort's (equal values keep their
order) and NaN sorts as the largest value, as PyTorch. Rows up to 2,048 (padded to a power of
two) sort in one dispatch in workgroup memory; longer rows take log2(P/2048) local sorts/merges
plus one global pass for every stage stride >= 2048 (kernels/sort.py).
topk/kthvalue/median sort the whole row and take what they need.
"""

from __future__ import annotations

import math
import numbers
from collections import namedtuple

import numpy as np

from .. import backend
from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.sort import (
    LOCAL_MAX,
    bitonic_global,
    bitonic_local,
    median_pick,
    searchsorted_kernel,
    sort_gather,
)
from ..tensor import Tensor
from .casts import clone
from .core import empty, note_indices
from .elementwise import as_tensor_arg
from .ranges import keep
from .views import contiguous, movedim, narrow, reshape, select, unsqueeze

# PyTorch's torch.return_types.* : named tuples of (values, indices)
SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])
KthvalueResult = namedtuple("kthvalue", ["values", "indices"])
MedianResult = namedtuple("median", ["values", "indices"])


def _rows(x: Tensor, d: int):
    """x with dim d moved last, contiguous: (tensor, rows, n)."""
    moved = movedim(x, d, -1) if d != x.ndim - 1 else x
    moved = contiguous(moved)
    n = moved._shape[-1]
    rows = math.prod(moved._shape[:-1])
    return moved, rows, n


def _sort_rows(m: Tensor, rows: int, n: int, desc: bool):
    """Sort each contiguous row of m (rows, n): (values, int32 indices), both (rows, n)."""
    dev = backend.current()
    vals = empty((rows, n), m.dtype)
    idx = empty((rows, n), D.int32)
    st = m.dtype.wgsl
    p = 1 << max(1, (n - 1).bit_length())  # padded row: a power of two, at least 2
    if p <= LOCAL_MAX:
        src = bitonic_local(st, p, "row", desc)
        dev.dispatch(
            src,
            (m._storage.buffer, vals._storage.buffer, idx._storage.buffer),
            (rows, n, p, m._offset),
            fold_grid(rows),
        )
        return vals, idx
    c = LOCAL_MAX
    chunks = rows * (p // c)
    keys = empty((rows * p,), D.int32)  # u32 keys in the kernel; the buffer is untyped
    tidx = empty((rows * p,), D.int32)
    kb, tb = keys._storage.buffer, tidx._storage.buffer
    dev.dispatch(
        bitonic_local(st, c, "first", desc),
        (m._storage.buffer, kb, tb),
        (chunks, n, p, m._offset),
        fold_grid(chunks),
    )
    merge = bitonic_local(st, c, "merge", desc)
    glob = bitonic_global()
    pairs = rows * p // 2
    k = 2 * c
    while k <= p:
        j = k // 2
        while j >= c:
            dev.dispatch(glob, (kb, tb), (pairs, p, k, j), grid_for(pairs))
            j //= 2
        dev.dispatch(merge, (kb, tb), (chunks, n, p, 0, k), fold_grid(chunks))
        k *= 2
    total = rows * n
    dev.dispatch(
        sort_gather(st),
        (m._storage.buffer, tb, vals._storage.buffer, idx._storage.buffer),
        (total, n, p, m._offset),
        grid_for(total),
    )
    return vals, idx


def _sort(x: Tensor, d: int, desc: bool):
    """(values, indices) of x sorted along dim d, shaped like x."""
    if x.ndim == 0:
        from .creation import zeros

        return clone(x), zeros((), dtype=D.int32)
    m, rows, n = _rows(x, d)
    if rows * n == 0:
        return empty(x._shape, x.dtype), empty(x._shape, D.int32)
    vals, idx = _sort_rows(m, rows, n, desc)
    shape = m._shape
    vals, idx = reshape(vals, shape), reshape(idx, shape)
    if d != x.ndim - 1:
        vals, idx = contiguous(movedim(vals, -1, d)), contiguous(movedim(idx, -1, d))
    return keep(vals, x), idx  # (an int tensor's values, reordered: its range)


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    x = as_tensor_arg(input)
    if not isinstance(dim, numbers.Integral) and dim is not None:  # sort(x, stable=..., dim=...)
        raise TypeError(f"pyrite: sort: dim must be an int, got {dim!r}")
    d = x._dim(-1 if dim is None else dim)  # a 0-d tensor takes dims -1 and 0
    # stable or not: the (value, index) network is always stable
    vals, idx = _sort(x, d, bool(descending))
    return SortResult(vals, _bounded(idx, x, d))


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending, stable).indices


def msort(input):
    return sort(input, 0).values


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    x = as_tensor_arg(input)
    d = x._dim(dim)  # a 0-d tensor takes dims -1 and 0
    size = x._shape[d] if x.ndim else 1
    if x.dtype.is_bool:  # torch: "topk does not support bool dtypes on CPU"
        raise DtypeError("pyrite: topk is not implemented for pyrite.bool")
    k = int(k)
    if not 0 <= k <= size:
        raise RuntimeError(
            f"pyrite: topk: selected index k out of range: k={k} but dim {dim} "
            f"has size {size} (shape {tuple(x._shape)})"
        )
    vals, idx = _sort(x, d, bool(largest))
    if x.ndim == 0:
        return TopkResult(vals, idx)
    idx = _bounded(contiguous(narrow(idx, d, 0, k)), x, d)
    return TopkResult(contiguous(narrow(vals, d, 0, k)), idx)


def _bounded(idx, x, d):
    """Sort's and topk's indices along d lie in [0, size): noted so that a gather through them
    (top-p's scatter back, `probs_idx.gather(...)`) reads nothing back for its range check."""
    return note_indices(idx, x, x._shape[d] if x.ndim else 1)


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    x = as_tensor_arg(input)
    d = x._dim(dim)  # a 0-d tensor takes dims -1 and 0
    size = x._shape[d] if x.ndim else 1
    if size == 0:
        raise IndexError(f"pyrite: kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if x.dtype.is_bool and x.ndim:  # torch: "kthvalue_cpu" not implemented for 'Bool'
        raise DtypeError("pyrite: kthvalue is not implemented for pyrite.bool")
    if not 1 <= k <= size:
        raise RuntimeError(
            f"pyrite: kthvalue: selected number k out of range: k={k} but dim {dim} has size {size}"
        )
    vals, idx = _sort(x, d, False)
    if x.ndim == 0:
        return KthvalueResult(vals, idx)
    v, i = clone(select(vals, d, k - 1)), clone(select(idx, d, k - 1))
    if keepdim:
        v, i = unsqueeze(v, d), unsqueeze(i, d)
    return KthvalueResult(v, i)


def _median(x: Tensor, dim, keepdim, nan_mode):
    if x.dtype.is_bool and (dim is None or x.numel()):  # torch: not implemented for 'Bool'
        raise DtypeError(f"pyrite: {nan_mode} is not implemented for pyrite.bool")
    if dim is None:
        flat = reshape(x, (x.numel(),))
        if flat.numel() == 0:  # PyTorch: nan for floats (its int64 answer is INT64_MIN)
            from .creation import full

            if x.dtype.kind != "f":  # (torch 2.13 gives 0 for its 8- and 16-bit ints)
                return full((), D.INT32_MIN if x.dtype.bits == 32 else 0, dtype=x.dtype)
            return full((), float("nan"), dtype=x.dtype)
        v, _ = _median_rows(flat, 0, nan_mode)
        return reshape(v, ())
    d = x._dim(dim)  # a 0-d tensor takes dims -1 and 0
    if x.ndim == 0:
        from .creation import zeros

        return MedianResult(clone(x), zeros((), dtype=D.int32))
    if x._shape[d] == 0:
        raise IndexError(
            f"pyrite: median(): expected reduction dim {d} to have non-zero size "
            f"(shape {tuple(x._shape)})"
        )
    if x.dtype.is_bool:
        raise DtypeError(f"pyrite: {nan_mode} is not implemented for pyrite.bool")
    v, i = _median_rows(x, d, nan_mode)
    if keepdim:
        v, i = unsqueeze(v, d), unsqueeze(i, d)
    return MedianResult(v, i)


def _median_rows(x: Tensor, d: int, nan_mode: str):
    """The lower median of every row along d: (values, indices) with d removed."""
    m, rows, n = _rows(x, d)
    out_shape = m._shape[:-1]
    if rows == 0:
        return empty(out_shape, x.dtype), empty(out_shape, D.int32)
    sv, si = _sort_rows(m, rows, n, False)
    vals = empty(out_shape, x.dtype)
    idx = empty(out_shape, D.int32)
    mode = nan_mode if x.dtype.is_floating_point else "none"
    backend.current().dispatch(
        median_pick(x.dtype.wgsl, mode),
        (sv._storage.buffer, si._storage.buffer, vals._storage.buffer, idx._storage.buffer),
        (rows, n),
        grid_for(rows),
    )
    return vals, idx


def median(input, dim=None, keepdim=False, *, out=None):
    return _median(as_tensor_arg(input), dim, keepdim, "median")


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    return _median(as_tensor_arg(input), dim, keepdim, "nanmedian")


# ---- searchsorted / bucketize -----------------------------------------------------------------
def searchsorted(
    sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None, out=None
):
    seq = as_tensor_arg(sorted_sequence)
    x = as_tensor_arg(input)  # a Python scalar gives a 0-d result, as torch
    if side is not None:  # (torch: RuntimeError for both)
        if side not in ("left", "right"):
            raise RuntimeError(
                f"pyrite: searchsorted(): side can only be 'left' or 'right' but got {side!r}"
            )
        if right and side == "left":
            raise RuntimeError(
                "pyrite: searchsorted(): side and right can't be set to opposites, got side "
                "of left while right was True"
            )
        right = side == "right"
    if sorter is not None:
        seq = _sorted_by(seq, sorter)
    if seq.ndim == 0:
        raise ShapeError("pyrite: searchsorted: boundaries tensor should not be 0-d")
    batched = seq.ndim > 1
    if batched and (x.ndim != seq.ndim or x._shape[:-1] != seq._shape[:-1]):
        raise ShapeError(
            f"pyrite: searchsorted: boundaries tensor should be 1 dimension or the "
            f"first N-1 dimensions of boundaries tensor and input value tensor must "
            f"match, but we got boundaries tensor {tuple(seq._shape)} and input "
            f"value tensor {tuple(x._shape)}"
        )
    seq, x = contiguous(seq), contiguous(x)
    out_t = empty(x._shape, D.int32)
    n = x.numel()
    if n:
        ct = "f32" if "f" in (seq.dtype.kind, x.dtype.kind) else "i32"
        src = searchsorted_kernel(seq.dtype.wgsl, x.dtype.wgsl, ct, bool(right), batched)
        per_row = x._shape[-1] if x.ndim else 1
        backend.current().dispatch(
            src,
            (seq._storage.buffer, x._storage.buffer, out_t._storage.buffer),
            (n, seq._shape[-1], max(per_row, 1), seq._offset, x._offset),
            grid_for(n),
        )
    return out_t


def _sorted_by(seq: Tensor, sorter) -> Tensor:
    """seq gathered along its last dim by `sorter`, with torch's checks: an integer sorter of
    seq's shape whose indices lie in [0, len) (a negative one is refused too)."""
    from .indexing import IndexOutOfBounds
    from .scatter import gather

    sorter = as_tensor_arg(sorter)
    if sorter.dtype is not D.int32:
        raise TypeError(
            f"pyrite: searchsorted(): sorter must be a tensor of long dtype but got dtype "
            f"{sorter.dtype!r}"
        )
    if tuple(sorter._shape) != tuple(seq._shape):
        raise ShapeError(
            f"pyrite: searchsorted(): boundary and sorter must have the same size, but got "
            f"boundary tensor {list(seq._shape)} and sorter tensor {list(sorter._shape)}"
        )
    if seq.ndim == 0:
        return seq
    try:
        return gather(seq, -1, sorter)
    except IndexOutOfBounds as e:
        raise IndexOutOfBounds(f"pyrite: searchsorted(): sorter index out of range ({e})") from None


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    b = as_tensor_arg(boundaries)
    if b.ndim != 1:
        raise ShapeError(
            f"pyrite: bucketize: boundaries tensor must be 1 dimension, but got dim({b.ndim})"
        )
    return searchsorted(b, input, right=right)


# ---- unique (read back) ----------------------------------------------------------------------
def _upload(a: np.ndarray, dtype):
    from .creation import tensor

    return tensor(np.array(a, order="C"), dtype=dtype)  # (ascontiguousarray makes 0-d 1-d)


def _unique_result(vals, inv, cnt, dtype, return_inverse, return_counts):
    """unique's and unique_consecutive's result: the values, then inverse and counts if asked."""
    res = [_upload(vals, dtype)]
    if return_inverse:
        res.append(_upload(inv.astype(np.int32), D.int32))
    if return_counts:
        res.append(_upload(cnt.astype(np.int32), D.int32))
    return res[0] if len(res) == 1 else tuple(res)


def _unique_dim(x, dim):
    """unique's `dim` wrapped, with torch's checks: a 0-d tensor has no dim to take (other ops
    read dim 0 of a scalar as itself), and no other dim may be empty."""
    if x.ndim == 0:
        raise IndexError(f"pyrite: Dimension specified as {dim} but tensor has no dimensions")
    d = x._dim(dim)
    if any(s == 0 for i, s in enumerate(x._shape) if i != d):
        raise RuntimeError(
            "pyrite: There are 0 sized dimensions, and they aren't selected, so unique cannot "
            "be applied"
        )
    return d


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    x = as_tensor_arg(input)
    a = x.numpy()
    if dim is None:
        vals, inv, cnt = np.unique(
            a.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False
        )
        inv = inv.reshape(a.shape)
    else:
        d = _unique_dim(x, dim)
        vals, inv, cnt = np.unique(a, return_inverse=True, return_counts=True, axis=d)
        inv = inv.reshape(-1)
    return _unique_result(vals, inv, cnt, x.dtype, return_inverse, return_counts)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    x = as_tensor_arg(input)
    a = x.numpy()
    if dim is None:
        flat = a.reshape(-1)
        if flat.size == 0:
            starts = np.zeros(0, dtype=bool)
        else:
            starts = np.concatenate([[True], flat[1:] != flat[:-1]])
        vals = flat[starts]
        inv = (np.cumsum(starts) - 1).reshape(a.shape)
    else:
        d = _unique_dim(x, dim)
        moved = np.moveaxis(a, d, 0)
        n = moved.shape[0]
        starts = np.ones(n, dtype=bool)
        if n > 1:
            diff = (moved[1:] != moved[:-1]).reshape(n - 1, -1).any(axis=1)
            starts[1:] = diff
        vals = np.moveaxis(moved[starts], 0, d)
        inv = np.cumsum(starts) - 1
    pos = np.flatnonzero(starts)
    cnt = np.diff(np.append(pos, starts.size))
    return _unique_result(vals, inv, cnt, x.dtype, return_inverse, return_counts)


# ---- backward rules (autograd.install records these): the values' gradient goes back to the
# places their indices name (torch's value_selecting_reduction_backward / sort's scatter)
def _sel_dim(ctx, x_ndim, default):
    a = ctx.args
    dim = a[1] if len(a) > 1 else ctx.kwargs.get("dim", default)
    return (-1 if dim is None else dim) % x_ndim


def _to_indices(ctx, g, d, keepdim):
    from .creation import zeros

    gv = g[0]
    if gv is None:
        return (None,)
    shape, dtype = ctx.meta[0]
    if not shape:
        return (gv.reshape(()),)
    idx = ctx.out[1]
    if not keepdim:  # (the method: this module's imported unsqueeze is the unrecorded one)
        gv, idx = gv.unsqueeze(d), idx.unsqueeze(d)
    return (zeros(tuple(shape), dtype=gv.dtype).scatter(d, idx, gv),)


def _g_sort(ctx, g):
    nd = max(len(ctx.meta[0][0]), 1)
    return _to_indices(ctx, g, _sel_dim(ctx, nd, -1), True)


def _g_topk(ctx, g):
    a = ctx.args
    dim = a[2] if len(a) > 2 else ctx.kwargs.get("dim", -1)
    return _to_indices(ctx, g, dim % max(len(ctx.meta[0][0]), 1), True)


def _g_kthvalue(ctx, g):
    a = ctx.args
    dim = a[2] if len(a) > 2 else ctx.kwargs.get("dim", -1)
    keepdim = a[3] if len(a) > 3 else ctx.kwargs.get("keepdim", False)
    return _to_indices(ctx, g, dim % max(len(ctx.meta[0][0]), 1), keepdim)


def _g_median(ctx, g):
    a = ctx.args
    dim = a[1] if len(a) > 1 else ctx.kwargs.get("dim")
    if dim is not None:
        keepdim = a[2] if len(a) > 2 else ctx.kwargs.get("keepdim", False)
        return _to_indices(ctx, g, dim % max(len(ctx.meta[0][0]), 1), keepdim)
    # one value: shared evenly among the elements equal to it (NaN: among the NaNs), as torch
    from .elementwise import isnan, where
    from .reduce import sum as _sum

    x, out = ctx.args[0], ctx.out
    hit = where(isnan(out), isnan(x), x == out)
    return (where(hit, g, 0.0) / _sum(hit),)


_g_sort.saves = _g_topk.saves = _g_kthvalue.saves = frozenset({"out"})
_g_median.saves = frozenset({0, "out"})

# the values' gradients go to their indices: only the indices output is read (writing the
# values in place after the forward is allowed, as in torch)
_g_sort.out_reads = _g_topk.out_reads = _g_kthvalue.out_reads = frozenset((1,))
_g_median.out_reads = frozenset((1,))  # (median() of all elements has one output: checked)

GRADS = {
    "sort": _g_sort,
    "topk": _g_topk,
    "kthvalue": _g_kthvalue,
    "median": _g_median,
    "nanmedian": _g_median,
}


__all__ = [
    "argsort",
    "bucketize",
    "kthvalue",
    "median",
    "msort",
    "nanmedian",
    "searchsorted",
    "sort",
    "topk",
    "unique",
    "unique_consecutive",
]

METHODS = {
    "sort": sort,
    "argsort": argsort,
    "msort": msort,
    "topk": topk,
    "kthvalue": kthvalue,
    "median": median,
    "nanmedian": nanmedian,
    "unique": unique,
    "unique_consecutive": unique_consecutive,
}
