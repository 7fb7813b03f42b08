"""Advanced indexing: x[idx], x[idx] = v, index_put(_), nonzero/argwhere, and the *index walk*
they share with the gather/scatter family (ops/scatter.py): host-data upload, index range checks,
the walk's planning and its gather and scatter dispatches.

Every op here and in ops/scatter.py is planned as one *index walk* (kernels/indexing.py): an
iteration shape, a base offset and per-dim strides into the source/destination for the basic
dims (slices, None, the dims not indexed), and up to 5 index tensors (more are first folded into
one tensor of offsets), each read through its own strides broadcast over the walk, each
addressing one dim of x. A gather copies x[at] to a contiguous output; a scatter
writes (or atomically reduces) a broadcast value into x[at]. So x[i, :, j] with two broadcasting
index tensors, torch.gather along any dim, index_select, take and embedding are the same kernel
with different info words, and nothing is copied to make an input contiguous.

Semantics follow PyTorch's (which differ from NumPy's in one place): ints are applied first as
selects, so they neither count as advanced indices nor separate them; advanced indices (integer
tensors, lists, arrays, bool masks, Python bools) broadcast together, and their result dims
replace the first one's position when they are adjacent in the index (None and slices separate,
ints do not) or go first otherwise. A bool mask over k dims becomes k index tensors by nonzero
(which reads back the count).

Range checks. Indices given on the host (lists, numpy arrays) are checked on the host for free.
Indices already on the device are checked before the walk by one min/max kernel per index tensor
and one readback of 8 bytes a tensor (a round trip, not a transfer of the indices): that keeps
the error at the call that caused it, as PyTorch's CPU errors are, and leaves the destination of
a scatter untouched. A deferred device-side flag would save the round trip but report the error
at some later sync, far from its cause; that trade can be revisited once a sync hook exists.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from .. import dtypes as D
from ..backend.device import INFO_ZERO_WORD
from ..errors import ShapeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.indexing import (
    MAX_INDEX_TENSORS,
    NONZERO_CHUNK,
    gather_kernel,
    minmax_kernel,
    nonzero_count_kernel,
    nonzero_write_kernel,
    scatter_kernel,
)
from ..tensor import Tensor
from . import ranges
from .core import (
    broadcast_shapes,
    broadcast_strides,
    coalesce,
    contiguous_copy,
    empty,
    exact_minmax,
    upload,
)
from .overlap import check_overlap
from .views import wrap_index

_INFO_LIMIT = INFO_ZERO_WORD  # words of info a dispatch may fill


# ---- host data -----------------------------------------------------------------------------
def _host(arr, dtype=D.int32) -> Tensor:
    """Upload a host array as a new contiguous tensor of `dtype`: converts it to `dtype`'s
    storage layout (bool as uint32, floats truncated for an int dtype), then `core.upload`."""
    arr = np.asarray(arr)
    if dtype is D.bool_:
        host = np.ascontiguousarray(arr != 0, dtype=np.uint32)
    else:
        if dtype.kind == "i" and arr.dtype.kind == "f":
            arr = np.trunc(arr)
        host = np.ascontiguousarray(arr, dtype=dtype.np)
    return upload(host, dtype)


def _is_int_scalar(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return False
    if isinstance(i, numbers.Integral):
        return True
    return isinstance(i, Tensor) and i.ndim == 0 and i.dtype.kind == "i"


def _is_bool_scalar(i) -> bool:
    if isinstance(i, (bool, np.bool_)):
        return True
    if isinstance(i, (Tensor, np.ndarray)) and i.ndim == 0:
        return i.dtype.is_bool if isinstance(i, Tensor) else i.dtype == bool
    return False


def _index_arg(i):
    """An index that is not an int/slice/None/bool scalar: a device Tensor, or a host ndarray."""
    if isinstance(i, Tensor):
        if i.dtype.kind == "f":
            raise IndexError(
                f"pyrite: tensors used as indices must be long, int, byte or bool "
                f"tensors (got {i.dtype!r})"
            )
        return i
    try:
        arr = np.asarray(i)
    except Exception:  # noqa: BLE001 - ragged lists and the like
        arr = np.asarray(i, dtype=object)
    if arr.size == 0 and arr.dtype.kind == "f":
        arr = arr.astype(np.int64)  # x[[]] indexes with an empty int tensor, as torch does
    if arr.dtype.kind not in "biu":
        raise IndexError(
            f"pyrite: tensors used as indices must be long, int, byte or bool "
            f"tensors (got an index of dtype {arr.dtype})"
        )
    return arr


class IndexOutOfBounds(IndexError, RuntimeError):
    """An index past its dimension: torch raises IndexError for x[idx] and RuntimeError for
    gather/scatter/index_select with the same words; this is both, so either `except` works."""


def _check_host(arr, size, dim, allow_negative=True):
    if arr.size == 0:
        return
    lo, hi = int(arr.min()), int(arr.max())
    low = -size if allow_negative else 0
    if lo < low or hi >= size:
        bad = lo if lo < low else hi
        raise IndexOutOfBounds(
            f"pyrite: index {bad} is out of bounds for dimension {dim} with size {size}"
        )


# ---- range checks on the device ------------------------------------------------------------
def _check_device(items, allow_negative=True, message=None):
    """`items`: (index tensor, size, dim). One min/max kernel each, one readback for all;
    none for an index whose range is known to pass (ops/ranges.py). `message(bad, size, dim)`
    words the error where the caller's op has torch words of its own (nll_loss's "Target 5
    is out of bounds.")."""
    low_of = (lambda size: -size) if allow_negative else (lambda size: 0)
    items = [it for it in items if it[0].numel() and not _passes(it[0], low_of(it[1]), it[1])]
    if not items:
        return
    for (lo, hi), (_, size, dim) in zip(minmax_many([t for t, _, _ in items]), items):
        low = -size if allow_negative else 0
        if lo < low or hi >= size:
            bad = lo if lo < low else hi
            if message is not None:
                raise IndexOutOfBounds(message(bad, size, dim))
            raise IndexOutOfBounds(
                f"pyrite: index {bad} is out of bounds for dimension {dim} with size {size}"
            )


def minmax_many(tensors):
    """[(min, max)] of non-empty int tensors: one min/max kernel each, one readback for all. A
    tensor that is its whole storage keeps what was read as its range (the next check of it
    reads nothing), except in a trace, where the value is this call's only."""
    dev = backend.current()
    res = _host(np.zeros(2 * len(tensors), np.int32))  # zero keys are the identities
    for slot, t in enumerate(tensors):
        cshape, (cst,) = coalesce(t._shape, [t._strides])
        n = t.numel()
        info = [n, t._offset, slot, *cshape, *cst]
        dev.dispatch(
            minmax_kernel(len(cshape)), [t._storage.buffer, res._storage.buffer], info, grid_for(n)
        )
    words = np.frombuffer(dev.read(res._storage.buffer, 0, 8 * len(tensors)), dtype=np.uint32)
    out = []
    for slot, t in enumerate(tensors):
        lo = int((~words[2 * slot] ^ np.uint32(0x80000000)).astype(np.uint32).view(np.int32))
        hi = int((words[2 * slot + 1] ^ np.uint32(0x80000000)).view(np.int32))
        ranges.note_read(t, lo, hi)
        out.append((lo, hi))
    return out


def _passes(t, low, size):
    return ranges.within(t, low, size - 1)  # (under pr.compile: a need its replays meet too)


def _minmax(t: Tensor):
    """(min, max) of an int tensor, by the same kernel (one readback unless they are known)."""
    known = exact_minmax(t)
    if known is not None:
        return known
    return minmax_many([t])[0]


# ---- the walk ------------------------------------------------------------------------------
class _Walk:
    """An iteration `shape`; x's `base` offset and `bstrides`; `idx`: (tensor, size, xstride,
    istrides over the walk, dim); `unchecked`: (tensor, size, dim) still to range-check."""

    __slots__ = ("base", "bstrides", "idx", "shape", "unchecked")

    def __init__(self, shape, base, bstrides, idx, unchecked=()):
        self.shape = tuple(shape)
        self.base = base
        self.bstrides = tuple(bstrides)
        self.idx = list(idx)
        self.unchecked = list(unchecked)


def _info(walk: _Walk, vstrides=None, voff=0):
    strides = [walk.bstrides] + [ist for _, _, _, ist, _ in walk.idx]
    if vstrides is not None:
        strides.append(tuple(vstrides))
    cshape, cst = coalesce(walk.shape, [tuple(s) for s in strides])
    n = math.prod(walk.shape)
    info = [n, walk.base, *cshape, *cst[0]]
    for (t, size, xs, _, _), st in zip(walk.idx, cst[1:]):
        info += [t._offset, size, xs, *st]
    if vstrides is not None:
        info += [voff, *cst[-1]]
    if len(info) > _INFO_LIMIT:
        raise NotImplementedError(
            f"pyrite: this index needs {len(info)} info words (rank "
            f"{len(cshape)}, {len(walk.idx)} index tensors); at most "
            f"{_INFO_LIMIT} fit"
        )
    return len(cshape), info


def _fold(walk: _Walk) -> _Walk:
    """A walk of at most MAX_INDEX_TENSORS index tensors (a kernel binds each as a buffer: 8
    storage buffers a stage): past that, the last ones become one tensor of x offsets over the
    walk, sum((i mod size) * x stride), computed by ordinary ops once their ranges are checked
    (x[m] with a bool mask m of 6 dims, or 6 index tensors, as torch takes)."""
    if len(walk.idx) <= MAX_INDEX_TENSORS:
        return walk
    keep, rest = walk.idx[: MAX_INDEX_TENSORS - 1], walk.idx[MAX_INDEX_TENSORS - 1 :]
    at = None
    for t, size, xs, ist, _ in rest:
        part = t._view(walk.shape, ist, t._offset).remainder(size) * xs  # (size > 0: checked)
        at = part if at is None else at + part
    at = at.contiguous()
    ist = tuple(at._strides)
    return _Walk(walk.shape, walk.base, walk.bstrides, [*keep, (at, 1, 1, ist, rest[0][4])])


def _check_walk(walk: _Walk, allow_negative, always):
    """Range-check the walk's device indices. torch's indexing kernels check each index as they
    read it, so a walk of no elements checks none (`x[[5]]` of a (3, 0) x is a (1, 0) tensor,
    `x.index_add_(0, [5], src)` of one is a no-op); `always` for the ops that check up front
    (index_select, embedding, index_reduce)."""
    if always or math.prod(walk.shape):
        _check_device(walk.unchecked, allow_negative)


def _gather(x: Tensor, walk: _Walk, allow_negative=True, always=False) -> Tensor:
    _check_walk(walk, allow_negative, always)
    out = empty(walk.shape, x.dtype)
    n = out.numel()
    if n == 0:
        return out
    walk = _fold(walk)
    rank, info = _info(walk)
    bufs = [t._storage.buffer for t, *_ in walk.idx] + [x._storage.buffer, out._storage.buffer]
    backend.current().dispatch(
        gather_kernel(rank, len(walk.idx), x.dtype.wgsl), bufs, info, grid_for(n)
    )
    return ranges.keep(out, x)  # a batch of labels gathered from a bounded data set stays bounded


def _value(value, dtype) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (int, float, bool, np.number, np.bool_)):
        from .casts import fill_value

        value = fill_value(value, dtype)  # torch: x[i] = -3.1 into uint8 overflows, as fill_
    return _host(np.asarray(value), dtype)


def _scatter(x: Tensor, walk: _Walk, value, reduce=None, allow_negative=True):
    """x[walk] = value (or op= value): value broadcast to the walk's shape, cast to x's dtype."""
    _check_walk(walk, allow_negative, False)
    if reduce is not None and x.dtype is D.float16:
        # No f16 atomics: reduce into an f32 copy of x's whole storage, so that the walk's
        # offsets and strides (in elements) address the same elements, then narrow it back.
        raw = Tensor._make(x._storage, (x._storage.nbytes // 2,), (1,), 0, D.float16)
        wide = raw.float()
        _scatter(wide, walk, value, reduce)
        raw.copy_(wide)
        return x
    v = _value(value, x.dtype)
    n = math.prod(walk.shape)
    vshape = v._shape
    while len(vshape) > len(walk.shape) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        if broadcast_shapes(vshape, walk.shape) != walk.shape:
            raise ShapeError("")
    except ShapeError:
        raise ShapeError(
            f"pyrite: shape mismatch: value tensor of shape {list(v._shape)} cannot "
            f"be broadcast to indexing result of shape {list(walk.shape)}"
        ) from None
    if n == 0:  # (after the shape check: torch refuses a value that does not fit there too)
        return x
    v = v._view(vshape, v._strides[len(v._shape) - len(vshape) :], v._offset)
    if v._storage is x._storage:
        v = contiguous_copy(v)
    idx = [(contiguous_copy(t) if t._storage is x._storage else t, *rest) for t, *rest in walk.idx]
    walk = _fold(_Walk(walk.shape, walk.base, walk.bstrides, idx))
    idx = walk.idx
    rank, info = _info(walk, broadcast_strides(v, walk.shape), v._offset)
    bufs = [t._storage.buffer for t, *_ in idx] + [v._storage.buffer, x._storage.buffer]
    src = scatter_kernel(rank, len(idx), x.dtype.wgsl, v.dtype.wgsl, reduce)
    old = ranges.known(x) if reduce is None else None
    backend.current().dispatch(src, bufs, info, grid_for(n))
    if old is not None:  # x's storage holds its old values or v's (a KV cache of positions)
        ranges.settle(x, ranges.hull, old, ranges.known(v))
    return x


# ---- planning x[index] ---------------------------------------------------------------------
def _plan(x: Tensor, index) -> _Walk:
    basic = []  # (size, stride) of the walk's basic dims, in order
    base = x._offset
    d = 0
    adv = []  # (broadcast shape, [(tensor, dim, host_checked)])
    adv_pos = []  # position among the non-int entries, for the adjacency rule
    host = []  # (host index, size, dim): checked once the walk is known to be non-empty
    first_out = None
    pos = 0
    for it in index:
        if it is None:
            basic.append((1, 0))
            pos += 1
            continue
        if isinstance(it, slice):
            size = x._shape[d]
            start, stop, step = it.indices(size)
            length = len(range(start, stop, step))
            basic.append((length, x._strides[d] * step))
            if length:
                base += start * x._strides[d]
            d += 1
            pos += 1
            continue
        if _is_int_scalar(it):
            i = int(it.item()) if isinstance(it, Tensor) else int(it)
            base += wrap_index(i, x._shape[d], d) * x._strides[d]
            d += 1
            continue
        if first_out is None:
            first_out = len(basic)
        adv_pos.append(pos)
        pos += 1
        if _is_bool_scalar(it):
            adv.append(((1,) if bool(it.item() if isinstance(it, Tensor) else it) else (0,), []))
            continue
        a = _index_arg(it)
        is_bool = a.dtype.is_bool if isinstance(a, Tensor) else a.dtype == bool
        if is_bool:
            k = a.ndim
            want = tuple(x._shape[d : d + k])
            if tuple(a.shape) != want:
                raise IndexError(
                    f"pyrite: the shape of the mask {list(a.shape)} at index {d} "
                    f"does not match the shape of the indexed tensor "
                    f"{list(x._shape)} at index {d}"
                )
            if isinstance(a, Tensor):
                nz = nonzero(a)  # (N, k); its columns are in range by construction
                cols = [
                    nz._view((nz._shape[0],), (nz._strides[0],), nz._offset + j) for j in range(k)
                ]
            else:
                cols = [_host(c) for c in np.nonzero(a)]
            n_true = cols[0]._shape[0] if cols else 0
            adv.append(((n_true,), [(c, d + j, True) for j, c in enumerate(cols)]))
            d += k
            continue
        if d >= x.ndim:
            raise IndexError(f"pyrite: too many indices for tensor of dimension {x.ndim}")
        if isinstance(a, Tensor):
            adv.append((tuple(a._shape), [(a, d, False)]))
        else:
            host.append((a, x._shape[d], d))
            adv.append((a.shape, [(_host(a), d, True)]))
        d += 1
    basic.extend((x._shape[j], x._strides[j]) for j in range(d, x.ndim))
    shapes = [s for s, _ in adv]
    try:
        bshape = broadcast_shapes(*shapes)
    except ShapeError:
        raise IndexError(
            "pyrite: shape mismatch: indexing tensors could not be broadcast "
            f"together with shapes {', '.join(str(list(s)) for s in shapes)}"
        ) from None
    # (no advanced entry at all: index_put_ with only 0-d int tensors, each a basic index)
    adjacent = not adv_pos or adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    a0 = (len(basic) if first_out is None else first_out) if adjacent else 0
    nb = len(bshape)
    shape = [s for s, _ in basic[:a0]] + list(bshape) + [s for s, _ in basic[a0:]]
    bstrides = [s for _, s in basic[:a0]] + [0] * nb + [s for _, s in basic[a0:]]
    if math.prod(bshape):  # torch's AdvancedIndex: no index is valid for a dim of size 0
        for _, tensors in adv:
            for _, dim, _ in tensors:
                if x._shape[dim] == 0:
                    raise IndexOutOfBounds(
                        f"pyrite: index is out of bounds for dimension {dim} with size 0"
                    )
    if math.prod(shape):  # (an empty walk reads no index: torch checks none then)
        for a, size, dim in host:
            _check_host(a, size, dim)
    idx, unchecked = [], []
    for _, tensors in adv:
        for t, dim, checked in tensors:
            ist = [0] * len(shape)
            ist[a0 : a0 + nb] = broadcast_strides(t, bshape)
            idx.append((t, x._shape[dim], x._strides[dim], tuple(ist), dim))
            if not checked:
                unchecked.append((t, x._shape[dim], dim))
    return _Walk(shape, base, bstrides, idx, unchecked)


def advanced_getitem(x: Tensor, index) -> Tensor:
    """x[index] where some element of `index` (normalised by views.getitem) is advanced."""
    return _gather(x, _plan(x, index))


def _check_put(x, index, value, setitem=False):
    """PyTorch's index_put_ with one bool mask and a one-element value tensor is
    `masked_fill_(mask, value.item())` (canDispatchToMaskedFill): the value is checked as a fill
    value ("value cannot be converted to type uint8_t without overflow"), not refused for its
    dtype, and may be an element of x (`x[x > 3] = x[0]`). Any other index_put_ refuses an
    index or value sharing the memory it writes (assert_no_overlap: `x[idx] = x[:2]`)."""
    adv = [i for i in index if not isinstance(i, (slice, numbers.Integral)) and i is not None]
    adv = [i for i in adv if i is not Ellipsis]
    if isinstance(value, Tensor) and value.numel() == 1:
        if len(adv) == 1 and isinstance(adv[0], Tensor) and adv[0].dtype.is_bool:
            from .casts import check_fill_tensor

            check_fill_tensor(value, x.dtype)
            return
    shared = [t for t in (*adv, value) if isinstance(t, Tensor) and t._storage is x._storage]
    if shared:
        check_overlap(_sliced(x, index) if setitem else x, shared, full_ok=False)


def _sliced(x: Tensor, index) -> Tensor:
    """The view of x that `x[index] = v` hands index_put_ (torch's applySlicing): index's ints
    and slices applied, each advanced index's dims kept whole (`x[0, idx] = x[1, :2]` writes
    into x[0] and reads x[1]: no overlap)."""
    from .views import basic_index

    basic = []
    for i in index:
        if isinstance(i, (bool, np.bool_)) or (
            isinstance(i, Tensor) and i.dtype.is_bool and i.ndim == 0
        ):
            basic.append(None)  # (x[True] adds a dim, as None)
        elif isinstance(i, Tensor) and i.dtype.is_bool:
            basic.extend([slice(None)] * i.ndim)
        elif isinstance(i, np.ndarray) and i.dtype == bool:
            basic.extend([slice(None)] * max(i.ndim, 1))
        elif isinstance(i, (Tensor, list, np.ndarray)):
            basic.append(slice(None))  # (a 0-d int tensor too: no readback of its value)
        else:
            basic.append(i)
    return basic_index(x, basic)


def advanced_setitem(x: Tensor, index, value):
    _check_put(x, index, value, setitem=True)
    _scatter(x, _plan(x, index), value)


def index_put_(self: Tensor, indices, values, accumulate=False) -> Tensor:
    index = tuple(slice(None) if i is None else i for i in indices)
    _check_put_dtype(self, index, values, accumulate)
    if not accumulate:
        _check_put(self, index, values)
    else:
        check_overlap(self, (*index, values), full_ok=False)
    _scatter(self, _plan(self, index), values, "sum" if accumulate else None)
    return self


def _check_put_dtype(x, index, values, accumulate):
    """torch's index_put_ refuses values of another dtype ("Index put requires the source and
    destination dtypes match"), except on its masked_fill path (one bool mask, one value, no
    accumulate); `x[idx] = v` casts v first and never gets here."""
    if not isinstance(values, Tensor) or values.dtype is x.dtype:
        return
    mask = len(index) == 1 and isinstance(index[0], Tensor) and index[0].dtype.is_bool
    if mask and values.numel() == 1 and not accumulate:
        return
    from ..errors import DtypeError

    raise DtypeError(
        "pyrite: index put requires the source and destination dtypes match, got "
        f"{x.dtype} for the destination and {values.dtype} for the source"
    )


def index_put(input: Tensor, indices, values, accumulate=False) -> Tensor:
    return index_put_(input.clone(), indices, values, accumulate)


# ---- nonzero (a bool mask index becomes index tensors through it) ---------------------------
def nonzero(input: Tensor, *, as_tuple=False):
    """(N, ndim) int32 coordinates of the nonzero elements in row-major order.

    Two kernels over chunks of 1,024 elements: counts per chunk (read back: that is the
    count, and its prefix sum on the host gives each chunk's first output row), then each
    chunk writes its coordinates in order.
    """
    if input.ndim == 0:
        n = 1 if bool(input.item()) else 0
        out = _host(np.zeros((n, 0), np.int32))
        return (_host(np.zeros(n, np.int32)),) if as_tuple else out
    dev = backend.current()
    numel = input.numel()
    rank = input.ndim
    if numel == 0:
        out = _host(np.zeros((0, rank), np.int32))
    else:
        chunks = -(-numel // NONZERO_CHUNK)
        counts = empty((chunks,), D.int32)
        info = [numel, input._offset, 0, *input._shape, *input._strides]
        st = input.dtype.wgsl
        grid = fold_grid(chunks)
        dev.dispatch(
            nonzero_count_kernel(rank, st),
            [input._storage.buffer, counts._storage.buffer],
            info,
            grid,
        )
        c = np.frombuffer(dev.read(counts._storage.buffer, 0, 4 * chunks), dtype=np.uint32)
        starts = np.zeros(chunks, np.uint32)
        np.cumsum(c[:-1], out=starts[1:])
        total = int(c.sum())
        out = empty((total, rank), D.int32)
        if total:
            s = _host(starts.view(np.int32))
            dev.dispatch(
                nonzero_write_kernel(rank, st),
                [input._storage.buffer, s._storage.buffer, out._storage.buffer],
                info,
                grid,
            )
    if as_tuple:
        return tuple(out._view((out._shape[0],), (rank,), j) for j in range(rank))
    return out


def argwhere(input: Tensor) -> Tensor:
    return nonzero(input)


# ---- backward rules (autograd.install records these; torch's index_put backward) -------------
def _g_index_put(ctx, g):
    """x.index_put(indices, values): x gets g (accumulate) or g with the written places zeroed;
    values get g[indices], summed back to values' shape by the engine (broadcast values)."""
    indices, accumulate = (
        ctx.args[1],
        (ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("accumulate", False)),
    )
    index = tuple(slice(None) if i is None else i for i in indices)
    gx = gv = None
    if ctx.needs[0]:
        gx = g if accumulate else index_put(g, indices, _value(0.0, g.dtype))
    if ctx.needs[2]:
        gv = g[index]
    return gx, None, gv


_g_index_put.saves = frozenset()

GRADS = {"index_put": _g_index_put, "index_put_": _g_index_put}


__all__ = [
    "argwhere",
    "index_put",
    "nonzero",
]

METHODS = {
    "index_put": index_put,
    "index_put_": index_put_,
    "nonzero": nonzero,
    "argwhere": argwhere,
}
