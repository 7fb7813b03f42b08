"""Gather/scatter along a dim and by mask: gather, scatter(_), scatter_add(_), scatter_reduce(_),
index_select, index_add(_), index_copy(_), index_fill(_), masked_fill(_), masked_select,
masked_scatter(_), take, take_along_dim, one_hot, embedding.

Each op here only builds an index walk (an iteration shape, x's base offset and strides, and the
index tensors with their strides over the walk) and hands it to ops/indexing.py's `_gather` or
`_scatter`, which range-check the indices and run the one walk kernel (kernels/indexing.py); the
masked fills are elementwise (`run_map`) and one_hot reads its class range by `_minmax`. So
torch.gather along any dim, index_select, take and embedding are the same kernel as x[idx] with
different info words, and nothing is copied to make an input contiguous.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..errors import (
    ArgumentError,
    DtypeError,
    IndexDtypeError,
    IndexShapeError,
    ShapeError,
    warn_once,
)
from ..tensor import Tensor
from . import ranges
from .core import broadcast_shapes, empty, run_map
from .indexing import (
    _check_walk,
    _gather,
    _host,
    _minmax,
    _plan,
    _scatter,
    _Walk,
    advanced_getitem,
)
from .overlap import check_overlap, check_writable


# ---- along one dim -------------------------------------------------------------------------
def _int_index(index: Tensor, what: str, empty_ok: bool = False) -> Tensor:
    """index as an int32 tensor; any other dtype raises torch's error, but for an empty index
    where `empty_ok` (torch checks the dtype of a non-empty index only, in gather/scatter)."""
    if not isinstance(index, Tensor):
        index = _host(np.asarray(index))
    if empty_ok and index.numel() == 0:
        return index
    if index.dtype is not D.int32:  # torch: int32/int64 only, not uint8/int8/int16
        # torch: a RuntimeError (index_fill_: an IndexError)
        cls = IndexDtypeError if what == "index_fill" else DtypeError
        raise cls(f"pyrite: {what}(): Expected dtype int32/int64 for index (got {index.dtype!r})")
    return index


def _dim_walk(x: Tensor, dim: int, index: Tensor, shape) -> _Walk:
    """Walk over `shape` (index's shape, rank of x) with x's coordinate `dim` read from index."""
    bstrides = list(x._strides)
    bstrides[dim] = 0
    ist = tuple(0 if s == 1 else st for s, st in zip(index._shape, index._strides))
    return _Walk(
        shape,
        x._offset,
        bstrides,
        [(index, x._shape[dim], x._strides[dim], ist, dim)],
        [(index, x._shape[dim], dim)],
    )


def _same_rank(x, dim, index, what, other=None):
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise ShapeError(
            f"pyrite: {what}(): index tensor must have the same number of "
            f"dimensions as input tensor (index {tuple(index._shape)}, input "
            f"{tuple(x._shape)})"
        )
    for d in range(index.ndim):
        if d != dim and x.ndim and index._shape[d] > x._shape[d]:
            raise ShapeError(
                f"pyrite: {what}(): size of dimension {d} of index "
                f"{tuple(index._shape)} exceeds the input's {tuple(x._shape)}"
            )
        if other is not None and index._shape[d] > other._shape[d]:
            raise ShapeError(
                f"pyrite: {what}(): index {tuple(index._shape)} is larger than src "
                f"{tuple(other._shape)} in dimension {d}"
            )


def _as_1d(t: Tensor) -> Tensor:
    return t._view((1,), (1,), t._offset) if t.ndim == 0 else t


def gather(input: Tensor, dim, index, *, sparse_grad=False) -> Tensor:
    index = _int_index(index, "gather", empty_ok=True)
    if input.ndim == 0:  # a scalar gathers from itself: torch.gather(s, 0, i) with i 0-d
        return gather(_as_1d(input), dim, _as_1d(index)).reshape(index._shape)
    dim = input._dim(dim)
    if index.numel() == 0:  # torch: an empty index of any shape (and dtype) gathers nothing
        return empty(tuple(index._shape), input.dtype)
    _same_rank(input, dim, index, "gather")
    return _gather(input, _dim_walk(input, dim, index, index._shape), allow_negative=False)


def _same_dtype(self: Tensor, src, what: str):
    """torch's check that a tensor source has self's dtype (a Python number is cast)."""
    if isinstance(src, Tensor) and src.dtype is not self.dtype:  # torch: a RuntimeError
        raise DtypeError(
            f"pyrite: {what}(): expected self and source to have the same dtype, but got "
            f"(self) {self.dtype!r} and (source) {src.dtype!r}"
        )


def _scatter_into(self: Tensor, dim, index, src, op) -> Tensor:
    """self[..., index[i], ...] = src[i] (op None) or op= it (op "sum", "prod", "amax", "amin"),
    along `dim`, in place. An empty index writes nothing and is not checked further: torch
    checks neither its dtype nor its shape against self's and src's then."""
    index = _int_index(index, "scatter", empty_ok=True)
    _same_dtype(self, src, "scatter")
    _check_target(self, index, src)
    x = _as_1d(self)
    dim = x._dim(dim)
    if index.numel() == 0:
        return self
    idx1 = _as_1d(index) if x.ndim == 1 else index
    if isinstance(src, Tensor):
        # torch counts a 0-d index or source as one element of one dimension: a 0-d source
        # fills an index of one element only (a wider one is refused, not broadcast)
        if max(idx1.ndim, 1) != max(src.ndim, 1):
            raise ShapeError(
                f"pyrite: scatter(): index tensor must have the same number of dimensions as "
                f"src tensor (index {tuple(index._shape)}, src {tuple(src._shape)})"
            )
        s1 = _as_1d(src)
        _same_rank(x, dim, idx1, "scatter", s1)
        v = s1._view(idx1._shape, s1._strides, s1._offset)  # src's corner of index's shape
    else:
        _same_rank(x, dim, idx1, "scatter")
        v = src
    _scatter(x, _dim_walk(x, dim, idx1, idx1._shape), v, op, allow_negative=False)
    return self


def _check_target(self: Tensor, index, source):
    """torch's scatter / index_add / index_copy checks: self has no expanded dims, and neither
    the index nor the source shares any of self's memory (assert_no_overlap: x.index_copy_(0,
    i, x) is refused too)."""
    check_writable(self)
    check_overlap(self, (index, source), full_ok=False)


def scatter_(self: Tensor, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    if reduce not in (None, "add", "multiply"):
        raise ArgumentError("pyrite: reduce argument must be either add or multiply.")
    if reduce is not None and isinstance(src, Tensor):  # (torch: a Tensor src only, not a value)
        warn_once(
            "scatter reduce",
            "The reduce argument of torch.scatter with Tensor src is deprecated and will be "
            "removed in a future PyTorch release. Use torch.scatter_reduce instead for more "
            "reduction options.",
        )
    op = {None: None, "add": "sum", "multiply": "prod"}[reduce]
    return _scatter_into(self, dim, index, value if src is None else src, op)


def scatter(input: Tensor, dim, index, src=None, *, value=None, reduce=None) -> Tensor:
    return scatter_(input.clone(), dim, index, src, value=value, reduce=reduce)


def scatter_add_(self: Tensor, dim, index, src) -> Tensor:
    return _scatter_into(self, dim, index, src, "sum")


def scatter_add(input: Tensor, dim, index, src) -> Tensor:
    return _scatter_into(input.clone(), dim, index, src, "sum")


_IDENTITY = {"sum": 0, "mean": 0, "prod": 1, "amax": -math.inf, "amin": math.inf}


def scatter_reduce_(self: Tensor, dim, index, src, reduce, *, include_self=True) -> Tensor:
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise ArgumentError(
            f"pyrite: scatter_reduce: reduce must be one of sum, prod, mean, amax, "
            f"amin (got {reduce!r})"
        )
    _same_dtype(self, src, "scatter_reduce")  # before include_self's write
    if reduce == "mean" and self.dtype.is_bool:  # torch: not implemented for 'Bool'
        raise DtypeError("pyrite: scatter_reduce: reduce='mean' is not implemented for pyrite.bool")
    op = "sum" if reduce == "mean" else reduce
    if not include_self:
        ident = _IDENTITY[reduce]
        if self.dtype.kind != "f" and math.isinf(ident):
            # the dtype's own extremes: int16's INT32_MAX would wrap to -1 and win an amin
            lo = self.dtype.min if self.dtype.min is not None else 0
            hi = self.dtype.max if self.dtype.max is not None else 1
            ident = lo if ident < 0 else hi
        _scatter_into(self, dim, index, ident, None)
    if reduce != "mean":
        return _scatter_into(self, dim, index, src, op)
    from .creation import ones_like, zeros_like

    counts = zeros_like(self) if not include_self else ones_like(self)
    _scatter_into(counts, dim, index, ones_like(src), "sum")
    _scatter_into(self, dim, index, src, "sum")
    # sum / count where anything was counted (count 0 keeps the input: max(count, 1))
    if self.dtype.kind == "f":
        expr, ct = "p_divf(x0, max(x1, 1.0))", "f32"
    else:
        expr, ct = "p_floordiv_i(x0, max(x1, 1))", "i32"
    return run_map(expr, (self, counts), (ct, ct), self, ct)


def scatter_reduce(input: Tensor, dim, index, src, reduce, *, include_self=True) -> Tensor:
    return scatter_reduce_(input.clone(), dim, index, src, reduce, include_self=include_self)


def _index_1d(index, what):
    index = _int_index(index, what)
    if index.ndim > 1:
        raise IndexError(
            f"pyrite: {what}(): index should have at most 1 dimension (got shape "
            f"{tuple(index._shape)})"
        )
    return _as_1d(index)


def _along(x: Tensor, dim: int, index: Tensor, shape) -> _Walk:
    """Walk over `shape` (x's with dim's size = len(index)), coordinate dim read from index."""
    bstrides = list(x._strides)
    bstrides[dim] = 0
    ist = [0] * len(shape)
    ist[dim] = index._strides[0]
    return _Walk(
        shape,
        x._offset,
        bstrides,
        [(index, x._shape[dim], x._strides[dim], tuple(ist), dim)],
        [(index, x._shape[dim], dim)],
    )


def index_select(input: Tensor, dim, index) -> Tensor:
    index = _index_1d(index, "index_select")
    if input.ndim == 0 and index.numel() != 1:  # torch: a RuntimeError
        raise IndexShapeError(
            f"pyrite: index_select(): Index to scalar can have only 1 value, got "
            f"{index.numel()} value(s)"
        )
    x = _as_1d(input)
    d = x._dim(dim)
    shape = list(x._shape)
    shape[d] = index._shape[0]
    out = _gather(x, _along(x, d, index, shape), allow_negative=False, always=True)
    return out.reshape(()) if input.ndim == 0 else out


def _index_source(self, dim, index, source, what):
    index = _index_1d(index, what)
    _same_dtype(self, source, what)
    x = _as_1d(self)
    d = x._dim(dim)
    shape = list(x._shape)
    shape[d] = index._shape[0]
    if isinstance(source, Tensor):
        src = _as_1d(source) if x.ndim == 1 else source
        if tuple(src._shape) != tuple(shape):  # torch: index_copy_ an IndexError, others not
            raise IndexShapeError(
                f"pyrite: {what}(): source shape {tuple(source._shape)} does not "
                f"match {tuple(shape)} (self {tuple(self._shape)} with dim {d} of "
                f"size len(index) = {index._shape[0]})"
            )
    else:
        src = source
    return x, _along(x, d, index, shape), src


def index_add_(self: Tensor, dim, index, source, *, alpha=1) -> Tensor:
    x, walk, src = _index_source(self, dim, index, source, "index_add")
    _check_target(self, index, source)
    if self.ndim > 1 and self.numel() == 0:
        return self  # torch's index_add_cpu_ returns before reading an index then
    if alpha != 1:
        if self.dtype.kind != "f" and isinstance(alpha, float):
            alpha = int(alpha)  # torch casts alpha to an integer self's type (1.5 adds once)
        src = src * alpha
    _scatter(x, walk, src, "sum", allow_negative=False)
    return self


def index_add(input: Tensor, dim, index, source, *, alpha=1) -> Tensor:
    return index_add_(input.clone(), dim, index, source, alpha=alpha)


def index_copy_(self: Tensor, dim, index, source) -> Tensor:
    x, walk, src = _index_source(self, dim, index, source, "index_copy")
    _check_target(self, index, source)
    _scatter(x, walk, src, None, allow_negative=False)
    return self


def index_copy(input: Tensor, dim, index, source) -> Tensor:
    return index_copy_(input.clone(), dim, index, source)


def index_fill_(self: Tensor, dim, index, value) -> Tensor:
    if isinstance(value, Tensor) and value.ndim:  # torch: a RuntimeError
        raise IndexShapeError(
            f"pyrite: index_fill_ only supports a 0-dimensional value tensor, but "
            f"got tensor with {value.ndim} dimension(s)"
        )
    x, walk, _ = _index_source(self, dim, index, None, "index_fill")
    _scatter(x, walk, value, None, allow_negative=True)
    return self


def index_fill(input: Tensor, dim, index, value) -> Tensor:
    return index_fill_(input.clone(), dim, index, value)


def index_reduce_(self: Tensor, dim, index, source, reduce, *, include_self=True) -> Tensor:
    """torch's index_reduce_: scatter_reduce_ with the 1-d index spread over source's shape
    (a composite of recorded ops, so its gradient is scatter_reduce's)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise ArgumentError(
            f"pyrite: index_reduce(): reduce must be one of prod, mean, amax or amin "
            f"(got {reduce!r})"
        )
    x, walk, src = _index_source(self, dim, index, source, "index_reduce")
    d = x._dim(dim)
    idx = _index_1d(index, "index_reduce")
    if not isinstance(src, Tensor):
        raise TypeError("pyrite: index_reduce(): source must be a Tensor")
    _check_walk(walk, False, True)  # torch checks every index, even into an empty self
    lead = [1] * x.ndim
    lead[d] = idx._shape[0]
    idx = idx.reshape(lead).expand(*src._shape)
    scatter_reduce_(x, d, idx, src, reduce, include_self=include_self)
    return self


def index_reduce(input: Tensor, dim, index, source, reduce, *, include_self=True) -> Tensor:
    return index_reduce_(input.clone(), dim, index, source, reduce, include_self=include_self)


# ---- masks ---------------------------------------------------------------------------------
def _mask(mask, what) -> Tensor:
    if not isinstance(mask, Tensor):
        mask = _host(np.asarray(mask), D.bool_)
    if not mask.dtype.is_bool:  # torch: a RuntimeError
        raise DtypeError(
            f"pyrite: {what} only supports boolean masks, but got mask with dtype {mask.dtype!r}"
        )
    return mask


def _fill_value(value, what):
    if isinstance(value, Tensor) and value.ndim:  # torch: a RuntimeError (pyrite's was IndexError)
        raise IndexShapeError(
            f"pyrite: {what} only supports a 0-dimensional value tensor, but "
            f"got tensor with {value.ndim} dimension(s)"
        )
    return value


def _masked_fill_into(out, x, mask, value):
    if out.dtype.kind != "i":
        return _masked_fill_map(out, x, mask, value)
    # (taken before the kernel: in place, out is x)
    before, kx = ranges.known(out), ranges.known(x)
    kv = ranges.known(value) if isinstance(value, Tensor) else None
    r = _masked_fill_map(out, x, mask, value)
    if kv is None and not isinstance(value, Tensor):
        from .casts import fill_value

        v = fill_value(value, out.dtype)
        kv = ranges.const(v, v)
    ranges.settle(r, ranges.hull, kx, kv, before=before)  # (`targets.masked_fill(pad, -100)`)
    return r


def _masked_fill_map(out, x, mask, value):
    from .casts import check_fill_tensor, fill_value

    ct = out.dtype.ctype
    if isinstance(value, Tensor):
        check_fill_tensor(value, out.dtype)  # torch's overflow check (one readback, rare)
        if value._storage is out._storage:  # (torch reads value.item(): x.masked_fill_(m, x[0]))
            value = value.clone()
        return run_map("select(x0, x2, x1)", (x, mask, value), (ct, "bool", ct), out, ct)
    # torch checks the value as fill_ does ("value cannot be converted to type uint8_t
    # without overflow") and casts it to the tensor's type
    value = fill_value(value, out.dtype)
    scalar_ct = "i32" if ct == "bool" else ct
    v = bool(value) if ct == "bool" else value
    expr = "select(x0, s0 != 0, x1)" if ct == "bool" else "select(x0, s0, x1)"
    return run_map(expr, (x, mask), (ct, "bool"), out, ct, (v,), (scalar_ct,))


def masked_fill(input: Tensor, mask, value) -> Tensor:
    mask = _mask(mask, "masked_fill")
    value = _fill_value(value, "masked_fill")
    shape = broadcast_shapes(input._shape, mask._shape)
    return _masked_fill_into(empty(shape, input.dtype), input, mask, value)


def masked_fill_(self: Tensor, mask, value) -> Tensor:
    mask = _mask(mask, "masked_fill_")
    value = _fill_value(value, "masked_fill_")
    if broadcast_shapes(self._shape, mask._shape) != self._shape:
        raise ShapeError(
            f"pyrite: masked_fill_: mask of shape {tuple(mask._shape)} does not "
            f"broadcast to the tensor's shape {tuple(self._shape)}"
        )
    return _masked_fill_into(self, self, mask, value)


def masked_select(input: Tensor, mask) -> Tensor:
    mask = _mask(mask, "masked_select")
    shape = broadcast_shapes(input._shape, mask._shape)
    x = input.expand(*shape) if input._shape != shape else input
    m = mask.expand(*shape) if mask._shape != shape else mask
    return advanced_getitem(x, (m,))


def masked_scatter_(self: Tensor, mask, source) -> Tensor:
    mask = _mask(mask, "masked_scatter_")
    _same_dtype(self, source, "masked_scatter_")
    if broadcast_shapes(self._shape, mask._shape) != self._shape:
        raise ShapeError(
            f"pyrite: masked_scatter_: mask of shape {tuple(mask._shape)} does not "
            f"broadcast to the tensor's shape {tuple(self._shape)}"
        )
    check_writable(self)  # (a source overlapping self torch reads unchecked: _scatter copies it)
    m = mask.expand(*self._shape) if mask._shape != self._shape else mask
    walk = _plan(self, (m,))
    n = walk.shape[0]
    if source.numel() < n:
        raise ShapeError(
            f"pyrite: masked_scatter_: source has {source.numel()} elements, the mask selects {n}"
        )
    flat = source.reshape(-1)
    _scatter(self, walk, flat._view((n,), flat._strides, flat._offset))
    return self


def masked_scatter(input: Tensor, mask, source) -> Tensor:
    mask = _mask(mask, "masked_scatter")
    shape = broadcast_shapes(input._shape, mask._shape)
    out = input.expand(*shape).clone() if input._shape != shape else input.clone()
    return masked_scatter_(out, mask, source)


# ---- take, nonzero, one_hot, embedding -------------------------------------------------------
def take(input: Tensor, index) -> Tensor:
    index = _int_index(index, "take")
    flat = input.reshape(-1)
    n = flat._shape[0]
    ist = tuple(0 if s == 1 else st for s, st in zip(index._shape, index._strides))
    walk = _Walk(
        index._shape,
        flat._offset,
        (0,) * index.ndim,
        [(index, n, flat._strides[0], ist, 0)],
        [(index, n, 0)],
    )
    return _gather(flat, walk)


def take_along_dim(input: Tensor, indices, dim=None) -> Tensor:
    indices = _int_index(indices, "take_along_dim")
    if dim is None:  # torch: gather over the flattened input (no negative indices)
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    d = input._dim(dim)
    if indices.ndim != input.ndim:
        raise ShapeError(
            f"pyrite: take_along_dim(): input {tuple(input._shape)} and indices "
            f"{tuple(indices._shape)} should have the same number of dimensions"
        )
    s_in = list(input._shape)
    s_ix = list(indices._shape)
    s_in[d] = s_ix[d] = 1
    b = list(broadcast_shapes(tuple(s_in), tuple(s_ix)))
    x = input.expand(*(b[:d] + [input._shape[d]] + b[d + 1 :]))
    ix = indices.expand(*(b[:d] + [indices._shape[d]] + b[d + 1 :]))
    # a negative index counts from the end (torch 2.13 takes indices modulo the dim's size;
    # pyrite refuses those outside [-size, size), as gather does, where torch's wrap reads them)
    return _gather(x, _dim_walk(x, d, ix, ix._shape), allow_negative=True)


def one_hot(tensor: Tensor, num_classes=-1) -> Tensor:
    if not isinstance(tensor, Tensor) or tensor.dtype is not D.int32:  # torch: RuntimeError
        raise DtypeError(
            "pyrite: one_hot is only applicable to index tensor (int32/int64), got "
            f"{getattr(tensor, 'dtype', type(tensor).__name__)!r}"
        )
    if tensor.numel() == 0:
        if num_classes == -1:
            raise RuntimeError(
                "pyrite: one_hot: can not infer total number of classes from empty tensor"
            )
        return empty(tuple(tensor._shape) + (num_classes,), D.int32)
    lo, hi = _minmax(tensor)
    from .indexing import IndexOutOfBounds  # torch: RuntimeError; an IndexError too

    if lo < 0:
        raise IndexOutOfBounds(f"pyrite: one_hot: class values must be non-negative (got {lo})")
    if num_classes == -1:
        num_classes = hi + 1
    elif hi >= num_classes:
        raise IndexOutOfBounds(
            f"pyrite: one_hot: class values must be smaller than num_classes "
            f"({num_classes}), got {hi}"
        )
    shape = tuple(tensor._shape) + (num_classes,)
    x = tensor._view(shape, tuple(tensor._strides) + (0,), tensor._offset)
    # out[..., c] = (x[...] == c): the class is the output's flat index mod num_classes
    return run_map(
        "select(0, 1, x0 == gi % s0)",
        (x,),
        ("i32",),
        empty(shape, D.int32),
        "i32",
        (num_classes,),
        ("i32",),
    )


def embedding(
    input: Tensor,
    weight: Tensor,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
) -> Tensor:
    """weight[input]: rows of `weight` (V, D) for each index; (*input.shape, D).

    padding_idx only changes the gradient (its row gets none), so the forward ignores it.
    """
    input = _int_index(input, "embedding")
    if weight.ndim != 2:
        raise ShapeError(f"pyrite: embedding: weight must be 2-D (got {tuple(weight._shape)})")
    if max_norm is not None:
        raise NotImplementedError("pyrite: embedding(max_norm=...) is not supported")
    v, dmodel = weight._shape
    shape = tuple(input._shape) + (dmodel,)
    ist = tuple(0 if s == 1 else st for s, st in zip(input._shape, input._strides)) + (0,)
    walk = _Walk(
        shape,
        weight._offset,
        (0,) * input.ndim + (weight._strides[1],),
        [(input, v, weight._strides[0], ist, 0)],
        [(input, v, 0)],
    )
    return _gather(weight, walk, allow_negative=False, always=True)


# ---- backward rules (autograd.install records these; torch's formulas, derivatives.yaml) -----
# Written with the ops above (scatter_add, index_add, index_select, gather, ...), whose own
# rules make the gradients differentiable again. The in-place forms share their rules (the engine
# keeps the written tensor's old identity).
def _1d(t):
    """A 0-d gradient as 1 element, recorded (_as_1d's raw view would cut double backward)."""
    return t.reshape(1) if t.ndim == 0 else t


def _a(ctx, i, name, default=None):
    a = ctx.args
    return a[i] if len(a) > i and a[i] is not None else ctx.kwargs.get(name, default)


def _zeros(meta, like):
    from .creation import zeros

    shape, dtype = meta
    return zeros(tuple(shape), dtype=like.dtype if like is not None else dtype)


def _dim_index(ctx, x_shape, what):
    """(dim, index) of a dim-wise op as its forward saw them (0-d inputs as 1-element)."""
    dim, index = ctx.args[1], ctx.args[2]
    index = _int_index(index, what, empty_ok=True)
    nd = max(len(x_shape), 1)
    return dim % nd, index


def _empty_index_grads(ctx, g):
    """The gradients of a scatter whose index is empty (it wrote nothing): self's is g, src's
    zeros (torch's backward raises there, its gather of nothing not being src's shape). None
    when the index is not empty."""
    index = ctx.arg(2, "index")
    if not isinstance(index, Tensor) or index.numel():
        return None
    gx = g if ctx.needs[0] else None
    gs = None
    if len(ctx.needs) > 3 and ctx.needs[3]:
        gs = _zeros(ctx.meta[3], g)
    return gx, None, None, gs


def _g_gather(ctx, g):
    shape = ctx.meta[0][0]
    d, index = _dim_index(ctx, shape, "gather")
    if not shape:  # (a 0-d x: every index reads it, none with an empty index, so the sum)
        return (g.sum(),)
    return (scatter_add(_zeros(ctx.meta[0], g), d, index, g),)


def _g_scatter(ctx, g):
    # out = x with src (or value) written at index: x gets g with those places zeroed, src the
    # g it wrote (torch's; with duplicate indices the last write wins, unspecified in both)
    empty_case = _empty_index_grads(ctx, g)
    if empty_case is not None:
        return empty_case
    if _a(ctx, 5, "reduce") is not None:
        raise NotImplementedError(
            "pyrite: the gradient of scatter(..., reduce=...) is not implemented (use "
            "scatter_reduce, as torch suggests)"
        )
    shape = ctx.meta[0][0]
    d, index = _dim_index(ctx, shape, "scatter")
    g1 = _1d(g)
    idx = _as_1d(index) if g1.ndim == 1 else index
    gx = gs = None
    if ctx.needs[0]:
        gx = scatter(g1, d, idx, 0.0).reshape(shape)
    if len(ctx.needs) > 3 and ctx.needs[3]:
        gs = gather(g1, d, idx)
        src_shape = ctx.meta[3][0]
        gs = gs.reshape(src_shape) if not src_shape else _pad_to(gs, src_shape)
    return gx, None, None, gs


def _pad_to(t, shape):
    """t (index's shape) in the corner of zeros(shape): src larger than index gets 0 outside."""
    if tuple(t._shape) == tuple(shape):
        return t
    from .pad import pad

    widths = []
    for have, want in zip(reversed(t._shape), reversed(shape)):
        widths += [0, want - have]
    return pad(t, widths)


def _g_scatter_add(ctx, g):
    empty_case = _empty_index_grads(ctx, g)
    if empty_case is not None:
        return empty_case
    shape = ctx.meta[0][0]
    d, index = _dim_index(ctx, shape, "scatter_add")
    gs = None
    if ctx.needs[3]:
        g1 = _1d(g)
        idx = _as_1d(index) if g1.ndim == 1 else index
        gs = gather(g1, d, idx)
        src_shape = ctx.meta[3][0]
        gs = gs.reshape(src_shape) if not src_shape else _pad_to(gs, src_shape)
    return g, None, None, gs


def _g_index_select(ctx, g):
    shape = ctx.meta[0][0]
    index = _index_1d(ctx.args[2], "index_select")
    if not shape:
        return (g.reshape(()),)
    d = ctx.args[1] % len(shape)
    return (index_add(_zeros(ctx.meta[0], g), d, index, g),)


def _src_grad(ctx, g, i, scale=1):
    """g at the rows `index` picks along dim (index_add/index_copy's source), source's shape."""
    shape = ctx.meta[0][0]
    index = _index_1d(ctx.args[2], "index_select")
    g1 = _1d(g)
    gs = index_select(g1, ctx.args[1] % max(len(shape), 1), index)
    if scale != 1:
        gs = gs * scale
    return gs.reshape(ctx.meta[i][0])


def _g_index_add(ctx, g):
    gs = _src_grad(ctx, g, 3, ctx.kwargs.get("alpha", 1)) if ctx.needs[3] else None
    return g, None, None, gs


def _filled(ctx, g):
    """g with the rows `index` picks along dim zeroed (what index_copy/index_fill overwrote)."""
    shape = ctx.meta[0][0]
    index = _index_1d(ctx.args[2], "index_fill")
    return index_fill(_1d(g), ctx.args[1] % max(len(shape), 1), index, 0.0).reshape(shape)


def _g_index_copy(ctx, g):
    gx = _filled(ctx, g) if ctx.needs[0] else None
    gs = _src_grad(ctx, g, 3) if ctx.needs[3] else None
    return gx, None, None, gs


def _g_index_fill(ctx, g):
    gx = _filled(ctx, g) if ctx.needs[0] else None
    gv = None
    if len(ctx.needs) > 3 and ctx.needs[3]:
        # a 0-d value tensor: the sum of g where it was written (a repeated index counts once)
        from .creation import zeros_like
        from .reduce import sum as _sum

        shape = ctx.meta[0][0]
        g1 = _1d(g)
        index = _index_1d(ctx.args[2], "index_fill")
        written = index_fill(zeros_like(g1), ctx.args[1] % max(len(shape), 1), index, 1.0)
        gv = _sum(g1 * written).reshape(ctx.meta[3][0])
    return gx, None, None, gv


def _g_masked_fill(ctx, g):
    from .elementwise import where
    from .reduce import sum as _sum

    mask = ctx.args[1]
    gx = where(mask, 0.0, g) if ctx.needs[0] else None
    gv = None
    if len(ctx.needs) > 2 and ctx.needs[2]:
        gv = _sum(where(mask, g, 0.0)).reshape(ctx.meta[2][0])
    return gx, None, gv


def _g_masked_select(ctx, g):
    from .core import broadcast_shapes

    mask = ctx.args[1]
    shape = broadcast_shapes(ctx.meta[0][0], mask._shape)
    from .creation import zeros

    return (masked_scatter(zeros(shape, dtype=g.dtype), mask, g),)


def _g_masked_scatter(ctx, g):
    from .elementwise import where

    mask = ctx.args[1]
    gx = where(mask, 0.0, g) if ctx.needs[0] else None
    gs = None
    if ctx.needs[2]:
        from .core import broadcast_shapes

        shape = broadcast_shapes(ctx.meta[0][0], mask._shape)
        m = mask.expand(*shape) if tuple(mask._shape) != tuple(shape) else mask
        picked = masked_select(g, m)  # the first n elements of source, in order
        src_shape = ctx.meta[2][0]
        n_src = math.prod(src_shape)
        if picked._shape[0] < n_src:
            from .pad import pad

            picked = pad(picked, [0, n_src - picked._shape[0]])
        gs = picked.reshape(src_shape)
    return gx, None, gs


def _flat_index(index, n):
    """index (any shape, negative counting from the end) as 1-D non-negative positions."""
    from .elementwise import add, lt, mul

    flat = index.reshape(-1)
    return add(flat, mul(lt(flat, 0).to(D.int32), n))


def _g_take(ctx, g):
    from .creation import zeros

    shape = ctx.meta[0][0]
    n = math.prod(shape)
    index = _int_index(ctx.args[1], "take")
    gx = index_add(zeros((n,), dtype=g.dtype), 0, _flat_index(index, n), g.reshape(-1))
    return (gx.reshape(shape),)


def _g_take_along_dim(ctx, g):
    shape = ctx.meta[0][0]
    indices = _int_index(ctx.args[1], "take_along_dim")
    dim = _a(ctx, 2, "dim")
    if dim is None:
        from .creation import zeros

        n = math.prod(shape)
        gx = index_add(zeros((n,), dtype=g.dtype), 0, indices.reshape(-1), g.reshape(-1))
        return (gx.reshape(shape),)
    d = dim % len(shape)
    indices = _flat_index(indices, shape[d]).reshape(indices._shape)  # (negatives as read)
    # the forward broadcast input and indices to one shape outside dim: scatter-add g into
    # that expanded input's shape (the engine sums it back over the broadcast dims)
    s_ix = list(g._shape)
    s_x = list(g._shape)
    s_x[d] = shape[d]
    ix = indices.expand(*s_ix) if tuple(indices._shape) != tuple(s_ix) else indices
    from .creation import zeros

    return (scatter_add(zeros(tuple(s_x), dtype=g.dtype), d, ix, g),)


def _g_embedding(ctx, g):
    """The weight's gradient: g's rows added into the rows they looked up (index_add; a
    padding_idx row gets none; scale_grad_by_freq divides by each index's count)."""
    from .creation import ones, zeros
    from .elementwise import ne, where

    input = _int_index(ctx.args[0], "embedding")
    v, dm = ctx.meta[1][0]
    padding_idx = _a(ctx, 2, "padding_idx")
    idx = input.reshape(-1)
    rows = g.reshape(-1, dm)
    if padding_idx is not None:
        p = padding_idx + v if padding_idx < 0 else padding_idx
        rows = where(ne(idx, p).unsqueeze(1), rows, 0.0)
    if _a(ctx, 5, "scale_grad_by_freq", False):
        counts = index_add(zeros((v,), dtype=g.dtype), 0, idx, ones(idx._shape, dtype=g.dtype))
        rows = rows / index_select(counts, 0, idx).unsqueeze(1)
    return None, index_add(zeros((v, dm), dtype=g.dtype), 0, idx, rows)


for _r, _s in (
    (_g_gather, {2}),
    (_g_scatter, {2}),
    (_g_scatter_add, {2}),
    (_g_index_select, {2}),
    (_g_index_add, {2}),
    (_g_index_copy, {2}),
    (_g_index_fill, {2}),
    (_g_masked_fill, {1}),
    (_g_masked_select, {1}),
    (_g_masked_scatter, {1}),
    (_g_take, {1}),
    (_g_take_along_dim, {1}),
    (_g_embedding, {0}),
):
    _r.saves = frozenset(_s)


def _g_scatter_reduce(ctx, g):
    """torch's scatter_reduce backward for sum, mean, amax and amin (include_self either way):
    sum passes g through; mean divides by each target's count; amax/amin share g evenly among
    the elements equal to the result; prod as _g_scatter_reduce_prod."""
    from .creation import ones_like

    empty_case = _empty_index_grads(ctx, g)
    if empty_case is not None:
        return empty_case
    reduce = ctx.arg(4, "reduce")
    include_self = ctx.kwargs.get("include_self", True)
    if reduce == "prod":
        return _g_scatter_reduce_prod(ctx, g, include_self)
    x, src = ctx.args[0], ctx.args[3]
    shape = ctx.meta[0][0]
    d, index = _dim_index(ctx, shape, "scatter_reduce")
    g1 = _1d(g)
    idx = _as_1d(index) if g1.ndim == 1 else index
    src_shape = ctx.meta[3][0]
    ones_idx = ones_like(idx, dtype=g1.dtype)
    hit = scatter_add(_zeros(ctx.meta[0], g1).reshape(g1._shape), d, idx, ones_idx) > 0
    gx = gs = None
    if reduce == "sum":
        gx = g1 if include_self else g1.masked_fill(hit, 0.0)
        gsrc = gather(g1, d, idx)
    elif reduce == "mean":
        base = ones_like(g1) if include_self else _zeros(ctx.meta[0], g1).reshape(g1._shape)
        n = scatter_add(base, d, idx, ones_idx)
        n = n.masked_fill(n == 0, 1.0)
        gx = g1 / n if include_self else (g1 / n).masked_fill(hit, 0.0)
        gsrc = gather(g1 / n, d, idx)
    else:  # amax / amin
        out = _1d(ctx.out)
        x1 = _1d(x)
        s_idx = _src_part(src, idx, d)
        # The gradient is shared evenly among the elements the reduction took in (amax/amin's
        # documented rule); with include_self=False a reached self is not one of them. torch
        # 2.13 CPU counts it among the ties anyway wherever it equals the result and zeroes its
        # share after (FunctionsManual's scatter_reduce_backward), so src's shares there sum to
        # less than g (x = [2], src = [2], amax: src's gradient 0.5, where out = src exactly).
        # pyrite follows the documented semantics and differs from torch there, on purpose.
        # Positions no index reaches keep self (out = self, gradient g), as torch.
        self_is = x1 == out
        if not include_self:
            self_is = self_is & ~hit
        src_is = s_idx == gather(out, d, idx)
        count = scatter_add(self_is.to(g1.dtype), d, idx, src_is.to(g1.dtype))
        share = g1 / count.masked_fill(count == 0, 1.0)
        gx = share * self_is
        if not include_self:
            gx = gx.masked_fill(hit, 0.0)
        gsrc = gather(share, d, idx) * src_is
    if ctx.needs[0]:
        gx = gx.reshape(shape)
    else:
        gx = None
    if len(ctx.needs) > 3 and ctx.needs[3]:
        gs = gsrc.reshape(src_shape) if not src_shape else _pad_to(gsrc, src_shape)
    return gx, None, None, gs


def _g_scatter_reduce_prod(ctx, g, include_self):
    """torch's prod rule (FunctionsManual scatter_reduce_backward), zeros included: self gets
    g times the product of the src scattered onto it (recomputed with self's zeros set to 1,
    then divided by the masked self, as torch); src gets g * result / src where src != 0, and
    where it is the only zero of its group the product of the others (the group's product with
    that zero set to 1). Two or more zeros in a group: 0 for each (result / 1 = 0)."""
    x, src = ctx.args[0], ctx.args[3]
    shape = ctx.meta[0][0]
    d, index = _dim_index(ctx, shape, "scatter_reduce")
    g1 = _1d(g)
    idx = _as_1d(index) if g1.ndim == 1 else index
    x1 = _1d(x)
    s_idx = _src_part(src, idx, d)
    gx = gs = None
    if ctx.needs[0]:
        masked_x = x1.masked_fill(x1 == 0, 1.0)
        masked_res = scatter_reduce(masked_x, d, idx, s_idx, "prod", include_self=include_self)
        gx = g1 * masked_res / masked_x
        if not include_self:
            gx = scatter(gx, d, idx, 0.0)  # self did not take part where src was scattered
        gx = gx.reshape(shape)
    if len(ctx.needs) > 3 and ctx.needs[3]:
        out = _1d(ctx.out)
        src_zero = s_idx == 0
        zeros = scatter_add(
            _zeros(ctx.meta[0], g1).reshape(g1._shape), d, idx, src_zero.to(g1.dtype)
        )
        single = src_zero & (gather(zeros, d, idx) == 1)
        masked_src = s_idx.masked_fill(single, 1.0)
        others = scatter_reduce(x1, d, idx, masked_src, "prod", include_self=include_self)
        from .elementwise import where

        gsrc = where(
            single,
            gather(g1 * others, d, idx),
            gather(g1 * out, d, idx) / s_idx.masked_fill(src_zero, 1.0),
        )
        src_shape = ctx.meta[3][0]
        gs = gsrc.reshape(src_shape) if not src_shape else _pad_to(gsrc, src_shape)
    return gx, None, None, gs


def _src_part(src, idx, d):
    """The part of src the forward read: its leading index-shaped corner."""
    s = _1d(src)
    if tuple(s._shape) == tuple(idx._shape):
        return s
    return s[tuple(slice(0, n) for n in idx._shape)]


_g_scatter_reduce.saves = frozenset((0, 2, 3, "out"))

GRADS = {
    "scatter_reduce": _g_scatter_reduce,
    "scatter_reduce_": _g_scatter_reduce,
    "gather": _g_gather,
    "scatter": _g_scatter,
    "scatter_": _g_scatter,
    "scatter_add": _g_scatter_add,
    "scatter_add_": _g_scatter_add,
    "index_select": _g_index_select,
    "index_add": _g_index_add,
    "index_add_": _g_index_add,
    "index_copy": _g_index_copy,
    "index_copy_": _g_index_copy,
    "index_fill": _g_index_fill,
    "index_fill_": _g_index_fill,
    "masked_fill": _g_masked_fill,
    "masked_fill_": _g_masked_fill,
    "masked_select": _g_masked_select,
    "masked_scatter": _g_masked_scatter,
    "masked_scatter_": _g_masked_scatter,
    "take": _g_take,
    "take_along_dim": _g_take_along_dim,
    "embedding": _g_embedding,
}


__all__ = [
    "embedding",
    "gather",
    "index_add",
    "index_copy",
    "index_fill",
    "index_reduce",
    "index_select",
    "masked_fill",
    "masked_scatter",
    "masked_select",
    "one_hot",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "take",
    "take_along_dim",
]

METHODS = {
    "gather": gather,
    "scatter": scatter,
    "scatter_": scatter_,
    "scatter_add": scatter_add,
    "scatter_add_": scatter_add_,
    "scatter_reduce": scatter_reduce,
    "scatter_reduce_": scatter_reduce_,
    "index_select": index_select,
    "index_add": index_add,
    "index_add_": index_add_,
    "index_copy": index_copy,
    "index_copy_": index_copy_,
    "index_fill": index_fill,
    "index_fill_": index_fill_,
    "index_reduce": index_reduce,
    "index_reduce_": index_reduce_,
    "masked_fill": masked_fill,
    "masked_fill_": masked_fill_,
    "masked_select": masked_select,
    "masked_scatter": masked_scatter,
    "masked_scatter_": masked_scatter_,
    "take": take,
    "take_along_dim": take_along_dim,
}
