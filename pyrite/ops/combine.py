"""Combining and rearranging: cat/stack and friends, split/chunk, repeat/tile, flip/roll,
tril/triu, meshgrid, diag, broadcast_tensors, atleast_nd. (`pad` is in ops/pad.py.)

One kernel of its own (cat's); every other op here is views (free) plus the strided map (`run_map("x0", ...)`)
writing into a *view* of the output, which is a strided copy with a cast. So:
- `cat` is one dispatch for up to six inputs of out's dtype (kernels/indexing.cat_kernel: each
  output element reads the input whose range holds it), else one copy per input into
  `out.narrow(dim, at, size)` (casting);
- `repeat`/`tile` is one copy from the input viewed as (r0, d0, r1, d1, ...) with stride 0 on the
  repeat dims, into the output viewed the same way;
- `flip` is one copy from a negative-stride view; `roll` two copies per rolled dim;
- `tril`/`triu` one map whose expression finds the row and column from the flat index `gi`.
"""

from __future__ import annotations

import math
import numbers

from .. import autograd, backend
from .. import dtypes as D
from ..backend.device import INFO_ZERO_WORD
from ..errors import ArgumentError, DtypeError, ShapeError, warn_once
from ..kernels.common import grid_for
from ..kernels.indexing import CAT_INPUTS, cat_info_words, cat_kernel
from ..tensor import Tensor, contiguous_strides
from .casts import clone, fill_
from .core import check_writable, empty, keep_bounds, run_map
from .elementwise import as_tensor_arg
from .views import diagonal, expand, narrow, need_dims, reshape, unsqueeze


def _copy_into(dst: Tensor, src: Tensor):
    """dst[...] = src (same shape, or broadcasting), cast to dst's dtype."""
    ct = dst.dtype.ctype
    run_map("x0", (src,), (ct,), dst, ct)
    return dst


def _seq(tensors, name):
    if isinstance(tensors, Tensor):
        raise TypeError(f"pyrite: {name}() expects a sequence of tensors, got a Tensor")
    return [as_tensor_arg(t) for t in tensors]


def _promote(tensors):
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = D.result_type_of(dt, t.dtype)
    return dt


# ---- cat / stack ---------------------------------------------------------------------------
def cat(tensors, dim=0, *, out=None):
    tensors = _seq(tensors, "cat")
    if not tensors:  # torch: a ValueError (hstack/vstack/dstack, which call this: RuntimeError)
        raise ArgumentError("pyrite: cat() expects a non-empty list of tensors")
    dt = _promote(tensors)
    # PyTorch skips 1-D empty tensors (legacy behaviour) when other inputs have a real shape
    numbered = [(i, t) for i, t in enumerate(tensors) if not (t.ndim == 1 and t._shape[0] == 0)]
    if not numbered:
        return empty((0,), dt) if out is None else out
    kept = [t for _, t in numbered]
    ref = kept[0]
    if ref.ndim == 0:
        raise ShapeError("pyrite: zero-dimensional tensor cannot be concatenated")
    for _, t in numbered:
        if t.ndim != ref.ndim:  # before the dim's range: torch's RuntimeError
            raise ShapeError(
                f"pyrite: Tensors must have same number of dimensions: got {ref.ndim} and {t.ndim}"
            )
    d = ref._dim(dim)
    for i, t in numbered:
        if t.ndim != ref.ndim or any(
            a != b for j, (a, b) in enumerate(zip(t._shape, ref._shape)) if j != d
        ):
            raise ShapeError(
                f"pyrite: cat: sizes of tensors must match except in dimension {d}: "
                f"tensor {numbered[0][0]} has shape {tuple(ref._shape)}, tensor {i} has shape "
                f"{tuple(t._shape)}"
            )
    total = sum(t._shape[d] for t in kept)
    shape = ref._shape[:d] + (total,) + ref._shape[d + 1 :]
    fresh = out is None
    if fresh:
        out = empty(shape, dt)
    elif tuple(out._shape) != shape:
        raise ShapeError(f"pyrite: cat: out has shape {tuple(out._shape)}, the result {shape}")
    if not _cat_kernel(kept, d, out):
        at = 0
        for t in kept:
            n = t._shape[d]
            if n:
                _copy_into(narrow(out, d, at, n), t)
            at += n
    return keep_bounds(out, *kept) if fresh else out


def _cat_kernel(tensors, d, out) -> bool:
    """`cat` as one dispatch a few inputs (kernels/indexing.cat_kernel) where every input has
    out's dtype (raw values copied: no cast), none shares out's storage, and out is not packed
    bfloat16; False: the caller copies input by input (casting)."""
    dt = out.dtype
    if dt.storage == "bf16" or out.numel() == 0:
        return False
    for t in tensors:
        if t.dtype is not dt or t._storage is out._storage:
            return False
    check_writable(out)
    dev = backend.current()
    rank = out.ndim
    k_max = min(
        CAT_INPUTS,
        dev.limits.get("max-storage-buffers-per-shader-stage", 8) - 2,  # (out and info)
        (INFO_ZERO_WORD - cat_info_words(rank, 0)) // (2 + rank),  # (a dispatch's info window)
    )
    if k_max < 1:
        return False
    parts = [t for t in tensors if t._shape[d]]
    at = 0
    for i in range(0, len(parts), k_max):
        chunk = parts[i : i + k_max]
        size = sum(t._shape[d] for t in chunk)
        region = narrow(out, d, at, size)
        info = [region.numel(), region._offset, *region._shape, *region._strides]
        start = 0
        for t in chunk:
            info += [t._offset, start, *t._strides]
            start += t._shape[d]
        src = cat_kernel(rank, d, len(chunk), dt.wgsl)
        bufs = [t._storage.buffer for t in chunk] + [out._storage.buffer]
        dev.dispatch(src, bufs, info, grid_for(region.numel()))
        at += size
    return True


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    tensors = _seq(tensors, "stack")
    if not tensors:
        raise ArgumentError("pyrite: stack() expects a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if t._shape != tensors[0]._shape:
            raise ShapeError(
                f"pyrite: stack expects each tensor to be equal size, but got "
                f"{tuple(tensors[0]._shape)} at entry 0 and {tuple(t._shape)} at "
                f"entry {i}"
            )
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(
            f"pyrite: dimension out of range (expected to be in range of "
            f"[{-n}, {n - 1}], but got {dim})"
        )
    return cat([unsqueeze(t, dim % n) for t in tensors], dim % n, out=out)


def atleast_1d(*tensors):
    def one(x):
        x = as_tensor_arg(x)
        return reshape(x, (1,)) if x.ndim == 0 else x

    return _each(one, tensors)


def atleast_2d(*tensors):
    def one(x):
        x = as_tensor_arg(x)
        if x.ndim == 0:
            return reshape(x, (1, 1))
        return unsqueeze(x, 0) if x.ndim == 1 else x

    return _each(one, tensors)


def atleast_3d(*tensors):
    def one(x):
        x = as_tensor_arg(x)
        if x.ndim == 0:
            return reshape(x, (1, 1, 1))
        if x.ndim == 1:
            return unsqueeze(unsqueeze(x, 0), 2)
        return unsqueeze(x, 2) if x.ndim == 2 else x

    return _each(one, tensors)


def _each(fn, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    if len(tensors) == 1:
        return fn(tensors[0])
    return tuple(fn(t) for t in tensors)


def hstack(tensors, *, out=None):
    ts = [atleast_1d(t) for t in _seq(tensors, "hstack")]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1, out=out)  # torch: the first decides


def vstack(tensors, *, out=None):
    return cat([atleast_2d(t) for t in _seq(tensors, "vstack")], 0, out=out)


row_stack = vstack


def dstack(tensors, *, out=None):
    return cat([atleast_3d(t) for t in _seq(tensors, "dstack")], 2, out=out)


def column_stack(tensors, *, out=None):
    ts = []
    for t in _seq(tensors, "column_stack"):
        ts.append(reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t)
    return cat(ts, 1, out=out)


# ---- split ---------------------------------------------------------------------------------
def split(tensor, split_size_or_sections, dim=0):
    need_dims(tensor, "split")
    d = tensor._dim(dim)
    n = tensor._shape[d]
    if isinstance(split_size_or_sections, numbers.Integral):
        size = int(split_size_or_sections)
        if size <= 0 and not (size == 0 and n == 0):
            raise ArgumentError(
                f"pyrite: split expects split_size be non-negative, but got split_size={size}"
            )
        sizes = [min(size, n - i) for i in range(0, n, size)] if size else [0]
        if not sizes:
            sizes = [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ShapeError(
                f"pyrite: split_with_sizes expects split_sizes to sum exactly to "
                f"{n} (input tensor's size at dimension {d}), but got "
                f"split_sizes={sizes}"
            )
    out, at = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, at, s))
        at += s
    return tuple(out)


def split_with_sizes(tensor, split_sizes, dim=0):
    return split(tensor, list(split_sizes), dim)


def tensor_split(input, indices_or_sections, dim=0):
    need_dims(input, "tensor_split")
    d = input._dim(dim)
    n = input._shape[d]
    if isinstance(indices_or_sections, Tensor):
        t = indices_or_sections
        if t.ndim > 1:  # (torch: a RuntimeError)
            raise ShapeError(
                "pyrite: tensor_split expected tensor_indices_or_sections to be a "
                f"zero-dimensional or one-dimensional tensor, but got shape {tuple(t._shape)}"
            )
        if t.dtype.kind != "i":
            raise DtypeError(
                "pyrite: tensor_split expected tensor_indices_or_sections to have an integer "
                f"dtype, but got {t.dtype!r}"
            )
        indices_or_sections = t.tolist()
    if isinstance(indices_or_sections, numbers.Integral):
        s = int(indices_or_sections)
        if s <= 0:
            raise ArgumentError(f"pyrite: number of sections must be larger than 0, got {s}")
        q, r = divmod(n, s)
        sizes = [q + 1] * r + [q] * (s - r)
        return split(input, sizes, d)
    out, prev = [], 0
    for i in list(indices_or_sections) + [n]:
        i = max(0, min(n, i + n if i < 0 else i))
        start = min(prev, n)
        out.append(narrow(input, d, start, max(0, i - start)))
        prev = i
    return tuple(out)


def chunk(input, chunks, dim=0):
    need_dims(input, "chunk")
    if chunks <= 0:
        raise ArgumentError(f"pyrite: chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = input._dim(dim)
    n = input._shape[d]
    size = -(-n // chunks)
    return (
        split(input, size if n else 0, d)
        if n
        else tuple(narrow(input, d, 0, 0) for _ in range(chunks))
    )


def _split_n(name, input, indices_or_sections, dim, min_ndim):
    """torch's hsplit/vsplit/dsplit: at least `min_ndim` dims, and a number of sections that
    divides the dim (tensor_split would give unequal pieces); both refusals RuntimeErrors."""
    if input.ndim < min_ndim:
        raise ShapeError(
            f"pyrite: {name} requires a tensor with at least {min_ndim} dimension, but got a "
            f"tensor with {input.ndim} dimensions"
        )
    if isinstance(indices_or_sections, numbers.Integral):
        s, n = int(indices_or_sections), input._shape[dim]
        if s <= 0 or n % s:
            raise ArgumentError(
                f"pyrite: {name} attempted to split along dimension {dim}, but the size of the "
                f"dimension {n} is not divisible by the split_size {s}"
            )
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input, indices_or_sections):
    return _split_n("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input, indices_or_sections):
    return _split_n("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    return _split_n("dsplit", input, indices_or_sections, 2, 3)


# ---- repeat / tile / repeat_interleave -----------------------------------------------------
def _sizes(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return tuple(int(a) for a in args)


def repeat(input, *sizes, repeats=None):
    """input tiled `sizes` times along each dim (leading new dims allowed); as torch,
    `x.repeat(2, 3)`, `x.repeat((2, 3))` or `x.repeat(repeats=(2, 3))`."""
    if repeats is not None:
        if sizes:
            raise TypeError("pyrite: repeat() got multiple values for argument 'repeats'")
        sizes = (repeats,)
    reps = _sizes(sizes)
    if len(reps) < input.ndim:
        raise ShapeError(
            f"pyrite: number of dimensions of repeat dims ({len(reps)}) can not be "
            f"smaller than number of dimensions of tensor ({input.ndim})"
        )
    lead = len(reps) - input.ndim
    shape = (1,) * lead + tuple(input._shape)
    strides = (0,) * lead + tuple(input._strides)
    out_shape = tuple(r * s for r, s in zip(reps, shape))
    if any(r < 0 for r in reps):
        raise RuntimeError(
            f"pyrite: repeat: Trying to create tensor with negative dimension "
            f"{min(out_shape)}: {list(out_shape)}"
        )
    out = empty(out_shape, input.dtype)
    # (r0, d0, r1, d1, ...): the input with stride 0 on each repeat dim, the output contiguous
    pair_shape = tuple(v for r, s in zip(reps, shape) for v in (r, s))
    src = input._view(pair_shape, tuple(v for st in strides for v in (0, st)), input._offset)
    dst = out._view(pair_shape, contiguous_strides(pair_shape), 0)
    _copy_into(dst, src)
    return out


def _dims_arg(name, args, dims):
    """`dims` given positionally (`x.flip(0, 1)`, `x.flip((0, 1))`) or by keyword, not both."""
    if dims is None:
        if not args:
            raise TypeError(f"pyrite: {name}() missing required argument 'dims'")
        return args[0] if len(args) == 1 else args
    if args:
        raise TypeError(f"pyrite: {name}() got multiple values for argument 'dims'")
    return dims


def tile(input, *args, dims=None):
    """repeat, with missing leading dims taken as 1: `torch.tile(x, (2, 2))`, `x.tile(2, 2)`."""
    dims = _dims_arg("tile", args, dims)
    dims = _sizes((dims,)) if not isinstance(dims, numbers.Integral) else (int(dims),)
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # torch.repeat_interleave(repeats): indices repeated by their count
        from .creation import arange

        counts = as_tensor_arg(input)
        return repeat_interleave(arange(counts.numel(), dtype=D.int32), counts, 0)
    x = as_tensor_arg(input)
    if dim is None:
        x = reshape(x, (x.numel(),))
        dim = 0
    d = x._dim(dim)
    n = x._shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.item())
    if isinstance(repeats, numbers.Integral):
        r = int(repeats)
        if r < 0:
            raise ArgumentError("pyrite: repeat_interleave: repeats can not be negative")
        shape = list(x._shape)
        src = unsqueeze(x, d + 1)
        src = expand(src, *(shape[: d + 1] + [r] + shape[d + 1 :]))
        out = empty(tuple(shape[:d]) + (n * r,) + tuple(shape[d + 1 :]), x.dtype)
        _copy_into(out._view(src._shape, contiguous_strides(src._shape), 0), src)
        return out
    # per-element repeats: read the counts (PyTorch synchronises here too), one copy a piece
    reps = [int(v) for v in as_tensor_arg(repeats).tolist()]
    if len(reps) != n:
        raise ShapeError(
            f"pyrite: repeat_interleave: repeats must have the same size as input "
            f"along dim {d}: {len(reps)} vs {n}"
        )
    if any(v < 0 for v in reps):
        raise ArgumentError("pyrite: repeat_interleave: repeats can not be negative")
    shape = list(x._shape)
    out = empty(tuple(shape[:d]) + (sum(reps),) + tuple(shape[d + 1 :]), x.dtype)
    at = 0
    for i, v in enumerate(reps):
        if v:
            _copy_into(narrow(out, d, at, v), narrow(x, d, i, 1))
        at += v
    return out


# ---- flip / roll ---------------------------------------------------------------------------
def _flip_view(x: Tensor, dims) -> Tensor:
    strides = list(x._strides)
    offset = x._offset
    for d in dims if x.ndim else ():  # a 0-d tensor's dim 0: nothing to reverse
        if x._shape[d] > 1:
            offset += (x._shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    return x._view(x._shape, tuple(strides), offset)


def flip(input, *args, dims=None):
    """input reversed along dims (a copy): `torch.flip(x, (0, 1))`, `x.flip(0, 1)`."""
    dims = _dims_arg("flip", args, dims)
    if isinstance(dims, numbers.Integral):
        dims = (dims,)
    ds = [input._dim(d) for d in dims]
    if len(set(ds)) != len(ds):
        raise ArgumentError(f"pyrite: flip: dims has duplicates, original flip dims={list(dims)}")
    return clone(_flip_view(input, ds))


def fliplr(input):
    if input.ndim < 2:
        raise ShapeError("pyrite: fliplr: input tensor must be >= 2-d")
    return flip(input, (1,))


def flipud(input):
    if input.ndim < 1:
        raise ShapeError("pyrite: flipud: input tensor must be >= 1-d")
    return flip(input, (0,))


def roll(input, shifts, dims=None):
    if isinstance(shifts, numbers.Integral):
        shifts = (int(shifts),)
    shifts = tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts) != 1:
            raise ShapeError(
                f"pyrite: roll: shifts {shifts} needs dims when it has more than one entry"
            )
        flat = reshape(input, (input.numel(),))
        return reshape(roll(flat, shifts, 0), input._shape)
    if isinstance(dims, numbers.Integral):
        dims = (dims,)
    dims = tuple(dims)
    if len(shifts) != len(dims):
        raise ShapeError(
            f"pyrite: roll: shifts and dimensions must align. shifts: "
            f"{len(shifts)}, dims: {len(dims)}"
        )
    cur = input
    for s, dim in zip(shifts, dims):
        d = input._dim(dim)
        n = input._shape[d]
        s = s % n if n else 0
        out = empty(cur._shape, cur.dtype)
        # out[s:] = cur[:n-s]; out[:s] = cur[n-s:]
        if n - s:
            _copy_into(narrow(out, d, s, n - s), narrow(cur, d, 0, n - s))
        if s:
            _copy_into(narrow(out, d, 0, s), narrow(cur, d, n - s, s))
        cur = out
    return cur if cur is not input else clone(input)


# ---- tril / triu ---------------------------------------------------------------------------
_ZERO = {"f32": "0.0", "i32": "0", "bool": "false"}


def _tri(input, diagonal, lower):
    if input.ndim < 2:
        raise ShapeError(
            f"pyrite: {'tril' if lower else 'triu'}: input tensor must have at "
            f"least 2 dimensions, got shape {tuple(input._shape)}"
        )
    rows, cols = input._shape[-2], input._shape[-1]
    ct = input.dtype.ctype
    # out is contiguous: col = gi % C, row = (gi / C) % R; keep where col - row <= k (tril)
    cond = "(gi % s1) - ((gi / s1) % s0) " + ("<=" if lower else ">=") + " s2"
    expr = f"select({_ZERO[ct]}, x0, {cond})"
    out = empty(input._shape, input.dtype)
    return run_map(
        expr, (input,), (ct,), out, ct, (rows, cols, int(diagonal)), ("i32", "i32", "i32")
    )


def tril(input, diagonal=0):
    return _tri(input, diagonal, True)


def triu(input, diagonal=0):
    return _tri(input, diagonal, False)


# ---- meshgrid, diag, broadcast ------------------------------------------------------------
def meshgrid(*tensors, indexing=None):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:  # "ij", with torch's warning that the argument will be required
        warn_once(
            "meshgrid",
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
        )
        indexing = "ij"
    ts = [as_tensor_arg(t) for t in tensors]
    if not ts:  # (torch: a RuntimeError)
        raise ArgumentError("pyrite: meshgrid expects a non-empty list of tensors")
    for t in ts:
        if t.ndim > 1:
            raise ShapeError(
                f"pyrite: meshgrid expects 0-D or 1-D tensors, got shape {tuple(t._shape)}"
            )
    if indexing not in ("ij", "xy"):
        raise ArgumentError(  # (a RuntimeError, as torch's)
            f'pyrite: meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    if len({t.dtype for t in ts}) > 1:
        raise DtypeError(  # (a RuntimeError, as torch's)
            "pyrite: meshgrid expects all tensors to have the same dtype, got "
            f"{[t.dtype for t in ts]}"
        )
    ts = [reshape(t, (t.numel(),)) for t in ts]
    sizes = [t._shape[0] for t in ts]
    order = list(range(len(ts)))
    if indexing == "xy" and len(ts) >= 2:
        order[0], order[1] = 1, 0
    shape = tuple(sizes[i] for i in order)
    outs = []
    if autograd.needs_grad(*ts):  # recorded views (reshape, expand): differentiable as they are
        for i, t in enumerate(ts):
            pos = order.index(i)
            one = [1] * len(ts)
            one[pos] = sizes[i]
            outs.append(t.reshape(tuple(one)).expand(shape))
        return tuple(outs)
    for i, t in enumerate(ts):
        pos = order.index(i)
        strides = [0] * len(ts)
        strides[pos] = t._strides[0]
        outs.append(t._view(shape, tuple(strides), t._offset))
    return tuple(outs)


def cartesian_prod(*tensors):
    ts = [as_tensor_arg(t) for t in tensors]
    for t in ts:
        if t.ndim != 1:  # (torch: a RuntimeError)
            raise ShapeError(
                f"pyrite: cartesian_prod expects 1-D tensors, got shape {tuple(t._shape)}"
            )
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return stack([reshape(g, (g.numel(),)) for g in grids], 1)


def diag(input, diagonal=0):
    k = int(diagonal)
    if input.ndim == 1:
        n = input._shape[0]
        m = n + abs(k)
        out = empty((m, m), input.dtype)
        fill_(out, 0)
        if n:
            _copy_into(_diagonal_of(out, k, 0, 1), input)
        return out
    if input.ndim == 2:
        return clone(_diagonal_of(input, k, 0, 1))
    raise ShapeError(f"pyrite: diag: input must be 1-D or 2-D, got shape {tuple(input._shape)}")


def _diagonal_of(x, offset, d1, d2):
    return diagonal(x, offset, d1, d2)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    n = input._shape[-1] if input.ndim else 1
    m = n + abs(offset)
    nd = input.ndim + 1
    for d in (dim1, dim2):
        if not -nd <= d < nd:
            raise IndexError(
                f"pyrite: Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                f"but got {d})"
            )
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(
            f"pyrite: diag_embed: diagonal dimensions cannot be identical {dim1}, {dim2}"
        )
    batch = list(input._shape[:-1])
    shape = []
    for i in range(nd):
        shape.append(m if i in (d1, d2) else batch.pop(0))
    out = empty(tuple(shape), input.dtype)
    fill_(out, 0)
    if input.numel():
        _copy_into(diagonal(out, offset, d1, d2), input)
    return out


def diagflat(input, offset=0):
    return diag(reshape(input, (input.numel(),)), offset)


def narrow_copy(input, dim, start, length):
    return clone(narrow(input, dim, start, length))


def broadcast_tensors(*tensors):
    from .core import broadcast_shapes

    ts = [as_tensor_arg(t) for t in tensors]
    shape = broadcast_shapes(*(t._shape for t in ts))
    return tuple(expand(t, *shape) for t in ts)


def block_diag(*tensors):
    ts = [as_tensor_arg(t) for t in tensors]
    for i, t in enumerate(ts):
        if t.ndim > 2:  # (torch: a RuntimeError)
            raise ShapeError(
                f"pyrite: block_diag: input tensors must have 2 or fewer dimensions; input {i} "
                f"has shape {tuple(t._shape)}"
            )
    ts = [
        reshape(t, (1, 1)) if t.ndim == 0 else (unsqueeze(t, 0) if t.ndim == 1 else t) for t in ts
    ]
    dt = _promote(ts)
    rows = sum(t._shape[0] for t in ts)
    cols = sum(t._shape[1] for t in ts)
    out = empty((rows, cols), dt)
    fill_(out, 0)
    r = c = 0
    for t in ts:
        if t.numel():
            _copy_into(narrow(narrow(out, 0, r, t._shape[0]), 1, c, t._shape[1]), t)
        r += t._shape[0]
        c += t._shape[1]
    return out


__all__ = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "broadcast_tensors",
    "cartesian_prod",
    "cat",
    "chunk",
    "column_stack",
    "concat",
    "concatenate",
    "diag",
    "diag_embed",
    "diagflat",
    "dsplit",
    "dstack",
    "flip",
    "fliplr",
    "flipud",
    "hsplit",
    "hstack",
    "meshgrid",
    "narrow_copy",
    "repeat_interleave",
    "roll",
    "row_stack",
    "split",
    "split_with_sizes",
    "stack",
    "tensor_split",
    "tile",
    "tril",
    "triu",
    "vsplit",
    "vstack",
]


def _split_method(self, split_size, dim=0):
    """Tensor.split(split_size, dim): the method's argument name is torch's `split_size`."""
    return split(self, split_size, dim)


METHODS = {
    "split": _split_method,
    "split_with_sizes": split_with_sizes,
    "tensor_split": tensor_split,
    "chunk": chunk,
    "hsplit": hsplit,
    "vsplit": vsplit,
    "dsplit": dsplit,
    "repeat": repeat,
    "tile": tile,
    "repeat_interleave": repeat_interleave,
    "flip": flip,
    "fliplr": fliplr,
    "flipud": flipud,
    "roll": roll,
    "tril": tril,
    "triu": triu,
    "diag": diag,
    "diag_embed": diag_embed,
    "diagflat": diagflat,
    "narrow_copy": narrow_copy,
    "tril_": lambda self, diagonal=0: self.copy_(tril(self, diagonal)),
    "triu_": lambda self, diagonal=0: self.copy_(triu(self, diagonal)),
}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _cat_grads(ctx, g, dim, stacked):
    """Each input's slice of g along `dim` (stack: the slice without the new dim)."""
    shapes = [m[0] if m is not None else None for m in ctx.meta]
    out = []
    pos = 0
    for i in range(len(ctx.args[0])):
        shape = shapes[i]
        if stacked:
            out.append(g.select(dim, i) if ctx.needs[i] else None)
            continue
        if len(shape) == 1 and shape[0] == 0 and g.ndim != 1:
            # torch's legacy empty (0,) input of cat, skipped: its gradient is empty too
            out.append(g.new_zeros((0,)) if ctx.needs[i] else None)
            continue
        k = shape[dim % len(shape)]
        out.append(g.narrow(dim, pos, k) if ctx.needs[i] else None)
        pos += k
    return tuple(out)


def _g_cat(ctx, g):
    dim = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0)
    return _cat_grads(ctx, g, dim, False)


def _g_stack(ctx, g):
    dim = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0)
    return _cat_grads(ctx, g, dim % g.ndim, True)


for _r in (_g_cat, _g_stack):
    _r.saves = frozenset()
    _r.list_arg = True


def _g_split(ctx, gs):
    """split/chunk/split_with_sizes: the pieces' gradients concatenated (zeros for unused)."""
    from .creation import zeros

    x_shape, dtype = ctx.meta[0]
    dim = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dim", 0)
    parts = []
    outs = ctx.out
    for g, o in zip(gs, outs):
        parts.append(zeros(o._shape, dtype=dtype) if g is None else g)
    if not parts:
        return (zeros(x_shape, dtype=dtype),)
    return (cat(parts, dim),)


_g_split.saves = frozenset(("out",))


def _g_flip(ctx, g):
    dims = _dims_arg("flip", ctx.args[1:], ctx.kwargs.get("dims"))
    return (flip(g, dims),)


def _g_roll(ctx, g):
    shifts = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs["shifts"]
    dims = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dims")
    back = -int(shifts) if isinstance(shifts, numbers.Integral) else tuple(-int(v) for v in shifts)
    return (roll(g, back, dims),)


def _g_repeat(ctx, g):
    # out viewed as (r0, s0, r1, s1, ...): the gradient sums over every r
    shape = tuple(ctx.meta[0][0])
    sizes = ctx.args[1:] if len(ctx.args) > 1 else (ctx.kwargs["repeats"],)
    reps = _sizes(sizes)
    full = (1,) * (len(reps) - len(shape)) + shape
    pairs = tuple(v for r, n in zip(reps, full) for v in (r, n))
    if not pairs:
        return (g,)
    from .reduce import sum as _sum

    # (Tensor methods: this module's imported view functions are the unrecorded originals)
    summed = _sum(g.reshape(pairs), dim=tuple(range(0, len(pairs), 2)))
    return (summed.reshape(shape),)


def _g_repeat_interleave(ctx, g):
    from .creation import zeros

    shape, dtype = ctx.meta[0]
    repeats = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("repeats")
    dim = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("dim")
    flat = dim is None
    n_el = math.prod(shape)
    d = 0 if flat else dim % max(len(shape), 1)
    n = n_el if flat else shape[d]
    if isinstance(repeats, Tensor) and repeats.numel() == 1:
        repeats = int(repeats.item())
    if isinstance(repeats, numbers.Integral):
        # out along d is (n, r) flattened: sum over r
        from .reduce import sum as _sum

        gs = list(g._shape)
        split = gs[:d] + [n, int(repeats)] + gs[d + 1 :]
        gx = _sum(g.reshape(tuple(split)), dim=d + 1)
    else:
        # per-element counts: each output slice adds into the input slice it copied
        from .creation import tensor as _tensor
        from .scatter import index_add

        reps = [int(v) for v in as_tensor_arg(repeats).tolist()]
        src = _tensor([i for i, v in enumerate(reps) for _ in range(v)], dtype=D.int32)
        zshape = list(g._shape)
        zshape[d] = n
        gx = index_add(zeros(tuple(zshape), dtype=g.dtype), d, src, g)
    return (gx.reshape(shape) if flat else gx,)


def _g_tri(lower):
    def rule(ctx, g):
        diag = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("diagonal", 0)
        return ((tril if lower else triu)(g, diag),)

    rule.saves = frozenset()
    return rule


for _r in (_g_flip, _g_roll, _g_repeat):
    _r.saves = frozenset()
_g_repeat_interleave.saves = frozenset({1})  # a tensor of counts


def _g_diag(ctx, g):
    """diag of a vector: the k-th diagonal of g; diag of a matrix: g on that diagonal."""
    shape, dtype = ctx.meta[0]
    k = int(ctx.arg(1, "diagonal", 0))
    if len(shape) == 1:
        return (diagonal(g, k, 0, 1),)
    from .creation import zeros

    gx = zeros(tuple(shape), dtype=g.dtype)
    diagonal(gx, k, 0, 1).copy_(g)
    return (gx,)


_g_diag.saves = frozenset()


def _g_diag_embed(ctx, g):
    return (diagonal(g, ctx.arg(1, "offset", 0), ctx.arg(2, "dim1", -2), ctx.arg(3, "dim2", -1)),)


_g_diag_embed.saves = frozenset()


def _g_block_diag(ctx, g):
    """Each block's gradient is its window of g."""
    res, r, c = [], 0, 0
    for i, (shape, _) in enumerate(ctx.meta):
        h, w = (1, 1) if len(shape) == 0 else ((1, shape[0]) if len(shape) == 1 else shape)
        res.append(g[r : r + h, c : c + w].reshape(tuple(shape)) if ctx.needs[i] else None)
        r, c = r + h, c + w
    return tuple(res)


_g_block_diag.saves = frozenset()

GRADS = {
    "diag": _g_diag,
    "diag_embed": _g_diag_embed,
    "block_diag": _g_block_diag,
    "cat": _g_cat,
    "flip": _g_flip,
    "roll": _g_roll,
    "repeat": _g_repeat,
    "repeat_interleave": _g_repeat_interleave,
    "tril": _g_tri(True),
    "triu": _g_tri(False),
    "concat": _g_cat,
    "concatenate": _g_cat,
    "stack": _g_stack,
    "split": _g_split,
    "split_with_sizes": _g_split,
    "chunk": _g_split,
}
