"""Index sets and placements: triu_indices, tril_indices, combinations, unravel_index,
fill_diagonal_, rot90, vander, put_/put, select_scatter, slice_scatter, diagonal_scatter.

Index sets whose size depends only on Python ints (triu/tril_indices, the index tuples of
combinations) are built on the host with numpy and uploaded once, as PyTorch's CPU builds them;
everything that touches tensor values stays on the device (views, copies, gathers, the
index walk of ops/indexing.py).
"""

from __future__ import annotations

import itertools
import numbers

import numpy as np

from .. import dtypes as D
from ..errors import DtypeError, IndexShapeError
from ..tensor import Tensor
from .core import empty, max_loop_iterations, upload
from .creation import checks_device
from .elementwise import as_tensor_arg
from .overlap import check_overlap


def _index_dtype(dtype):
    dt = D.int32 if dtype is None else D.from_any(dtype)
    if dt.kind != "i":
        raise DtypeError(f"pyrite: indices must be an integer dtype, got {dt!r}")
    return dt


def _rc(row, col, name):
    for what, v in (("row", row), ("col", col)):
        if not isinstance(v, numbers.Integral):
            raise TypeError(
                f"pyrite: {name}(): argument '{what}' must be int, not {type(v).__name__}"
            )
        if v < 0:
            raise RuntimeError(f"pyrite: {name}: {what} must be non-negative, got {v}")


def _upload_indices(rows, cols, dtype):
    host = np.ascontiguousarray(np.stack([rows, cols]).astype(np.int32))  # (2, N)
    t = upload(host, D.int32)
    return t if dtype is D.int32 else t.to(dtype)


@checks_device
def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """(2, N) coordinates of the upper triangle of a row x col matrix (j - i >= offset), row-major."""
    _rc(row, col, "triu_indices")
    r, c = np.triu_indices(row, int(offset), col)
    return _upload_indices(r, c, _index_dtype(dtype))


@checks_device
def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """(2, N) coordinates of the lower triangle of a row x col matrix (j - i <= offset), row-major."""
    _rc(row, col, "tril_indices")
    r, c = np.tril_indices(row, int(offset), col)
    return _upload_indices(r, c, _index_dtype(dtype))


def combinations(input, r=2, with_replacement=False):
    """(C, r) rows: the length-r combinations of a 1-D tensor's elements, in itertools' order."""
    from .scatter import index_select

    x = as_tensor_arg(input)
    if x.ndim != 1:
        raise RuntimeError(
            f"pyrite: combinations: Expect a 1D vector, but got shape {list(x._shape)}"
        )
    r = int(r)
    if r < 0:
        raise RuntimeError(f"pyrite: combinations: Expect a non-negative number, but got {r}")
    if r == 0:
        return empty((0,), x.dtype)
    make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.fromiter(
        itertools.chain.from_iterable(make(range(x._shape[0]), r)), dtype=np.int32
    ).reshape(-1, r)
    if idx.shape[0] == 0:
        return empty((0, r), x.dtype)
    flat = upload(np.ascontiguousarray(idx.reshape(-1)), D.int32)
    return index_select(x, 0, flat).reshape(idx.shape)


def unravel_index(indices, shape):
    """The coordinates of flat indices in a tensor of `shape` (each a floor modulo, as PyTorch:
    -1 is the last element)."""
    from .division import floor_divide, remainder

    idx = as_tensor_arg(indices)
    if idx.dtype.kind != "i":
        raise TypeError(f"pyrite: expected 'indices' to be integer dtype, but got {idx.dtype!r}")
    shape = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"pyrite: 'shape' cannot have negative values, but got {shape}")
    if any(s == 0 for s in shape):
        raise ValueError(f"pyrite: 'shape' cannot contain zero, but got {shape}")
    out = []
    rest = idx
    for s in reversed(shape):
        out.append(remainder(rest, s))
        rest = floor_divide(rest, s)
    return tuple(reversed(out))


def fill_diagonal_(self: Tensor, fill_value, wrap=False) -> Tensor:
    """Fill the main diagonal (x[i, i, ..., i]) in place; a tall matrix with wrap=True restarts
    the diagonal every col + 1 rows, as NumPy's fill_diagonal."""
    x = self
    if x.ndim < 2:
        raise RuntimeError("pyrite: fill_diagonal_: dimensions must larger than 1")
    if x.ndim > 2 and len(set(x._shape)) != 1:
        raise RuntimeError(
            f"pyrite: fill_diagonal_: all dimensions of input must be of equal length "
            f"(shape {tuple(x._shape)})"
        )
    if x.ndim == 2 and wrap and x._shape[0] > x._shape[1]:
        rows, cols = x._shape
        # flat positions k·(cols + 1) of the row-major matrix: (k + k // cols, k % cols)
        k = np.arange(-(-rows * cols // (cols + 1)), dtype=np.int64) * (cols + 1)
        r, c = k // cols, k % cols
        keep = r < rows
        from .indexing import index_put_

        ri = upload(np.ascontiguousarray(r[keep].astype(np.int32)), D.int32)
        ci = upload(np.ascontiguousarray(c[keep].astype(np.int32)), D.int32)
        index_put_(x, (ri, ci), _fill_tensor(fill_value, x.dtype))
        return x
    n = min(x._shape)
    diag = x._view((n,), (sum(x._strides),), x._offset)
    diag.fill_(fill_value)
    return x


def _fill_tensor(value, dtype):
    from .creation import full

    if isinstance(value, Tensor):
        return value
    return full((), value, dtype=dtype)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90° k times in the plane of dims, from the first towards the second (a copy)."""
    from .combine import flip

    x = as_tensor_arg(input)
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(
            f"pyrite: rot90: expected total rotation dims == 2, but got dims = {len(dims)}"
        )
    if x.ndim < 2:
        raise RuntimeError(
            f"pyrite: rot90: expected total dims >= 2, but got total dims = {x.ndim}"
        )
    d0, d1 = x._dim(dims[0]), x._dim(dims[1])
    if d0 == d1:
        raise RuntimeError(
            f"pyrite: rot90: expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}"
        )
    k = int(k) % 4
    if k == 1:
        return flip(x, d1).transpose(d0, d1).contiguous()
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return flip(x, d0).transpose(d0, d1).contiguous()
    return x.clone()


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix: columns x^(N-1), ..., x^0 (or increasing), by a running product
    as PyTorch computes it."""
    from .combine import cat
    from .creation import ones

    v = as_tensor_arg(x)
    if v.ndim != 1:
        raise RuntimeError(
            f"pyrite: x must be a one-dimensional tensor (got shape {list(v._shape)})"
        )
    n = v._shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError(f"pyrite: N must be non-negative (got {n})")
    dt = v.dtype if v.dtype.kind != "b" else D.int32
    if n == 0:
        return empty((v._shape[0], 0), dt)
    if dt is D.float32 and n <= max_loop_iterations():  # (p_pow_cumprod loops up to n - 1)
        return _vander_f32(v, n, increasing)
    cols = [ones((v._shape[0], 1), dtype=dt)]
    if n > 1:
        cols.append(v.to(dt).unsqueeze(1).expand(v._shape[0], n - 1))
    out = cat(cols, 1).cumprod(1)
    return out if increasing else out.flip(1)


# x^k by kernels/mathlib p_pow_cumprod loops k - 1 times: N past the device's loop budget
# (core.max_loop_iterations: lavapipe's 65,535 iterations an invocation less its margin,
# DESIGN.md; none on the GPUs) takes the float32 cumprod (an ulp or two off)


def _vander_f32(v, n, increasing):
    """float32 vander as torch's: column k = x^k by its cumprod's double accumulator, bit for
    bit (kernels/mathlib p_pow_cumprod), one map; the gradient Σ_k g_k·k·x^(k-1)."""
    from .. import autograd
    from .core import run_map

    out = empty((v._shape[0], n), D.float32)
    k = "gi % s0" if increasing else "s0 - 1 - gi % s0"
    with autograd.no_grad():
        run_map(f"p_pow_cumprod(x0, {k})", (v.unsqueeze(1),), ("f32",), out, "f32", (n,), ("i32",))
    if autograd.needs_grad(v):
        autograd.record("vander", _g_vander, (v, n, increasing), {}, out)
    return out


def _g_vander(ctx, g):
    """d x^k / dx = k·x^(k-1): g's columns (increasing order) 1..N-1 times k and x's powers
    0..N-2."""
    from .creation import arange

    x, n, increasing = ctx.args
    if n < 2:
        return (g.sum(1) * 0.0, None, None)
    gi = g if increasing else g.flip(1)
    p = vander(x, n - 1, increasing=True)  # (m, N-1): x^0 .. x^(N-2), recorded for double grads
    kk = arange(1, n, dtype=D.float32)
    return ((gi[:, 1:] * kk * p).sum(1), None, None)


# ---- put and the *_scatter family ------------------------------------------------------------
def put_(self: Tensor, index, source, accumulate=False) -> Tensor:
    """self viewed flat (row-major) gets source at index (negative counts from the end)."""
    from .indexing import index_put_

    idx = as_tensor_arg(index)
    if idx.dtype.kind != "i":
        raise DtypeError(f"pyrite: put_: index must be an integer tensor, got {idx.dtype!r}")
    if isinstance(source, Tensor) and source.dtype is not self.dtype:  # torch: RuntimeError
        raise DtypeError(
            f"pyrite: put_(): self and source expected to have the same dtype, but got "
            f"self.dtype = {self.dtype!r} and source.dtype = {source.dtype!r}"
        )
    src = as_tensor_arg(source)
    check_overlap(self, (idx, src), full_ok=False)  # torch's (x.put_(i, x[1:3]) is refused)
    if idx.numel() != src.numel():  # torch: an IndexError
        raise IndexShapeError(
            f"pyrite: put_: Expected source and index to have the same number of elements, but "
            f"got source.numel() = {src.numel()}, index.numel() = {idx.numel()}"
        )
    flat_idx, flat_src = idx.reshape(-1), src.reshape(-1)
    if self.is_contiguous():
        flat = self._view((self.numel(),), (1,), self._offset)
        index_put_(flat, (flat_idx,), flat_src, accumulate)
        return self
    work = self.contiguous()
    index_put_(work.reshape(-1), (flat_idx,), flat_src, accumulate)
    return self.copy_(work)


def put(input, index, source, accumulate=False) -> Tensor:
    return put_(as_tensor_arg(input).clone(), index, source, accumulate)


def _scatter_into(input, view_of, src, name):
    x = as_tensor_arg(input).clone()
    target = view_of(x)
    s = as_tensor_arg(src)
    if s._shape != target._shape:
        raise RuntimeError(
            f"pyrite: {name}: expected src to have a size equal to the slice of self. src size = "
            f"{list(s._shape)}, slice size = {list(target._shape)}"
        )
    target.copy_(s)
    return x


def select_scatter(input, src, dim, index):
    """A copy of input with input.select(dim, index) replaced by src."""
    return _scatter_into(input, lambda t: t.select(dim, index), src, "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """A copy of input with the slice start:end:step along dim replaced by src."""

    def view(t):
        d = t._dim(dim)
        index = [slice(None)] * t.ndim
        index[d] = slice(start, end, step)
        return t[tuple(index)]

    return _scatter_into(input, view, src, "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """A copy of input with input.diagonal(offset, dim1, dim2) replaced by src."""
    return _scatter_into(input, lambda t: t.diagonal(offset, dim1, dim2), src, "diagonal_scatter")


__all__ = [
    "combinations",
    "diagonal_scatter",
    "put",
    "rot90",
    "select_scatter",
    "slice_scatter",
    "tril_indices",
    "triu_indices",
    "unravel_index",
    "vander",
]

METHODS = {
    "fill_diagonal_": fill_diagonal_,
    "rot90": rot90,
    "put_": put_,
    "put": put,
    "select_scatter": select_scatter,
    "slice_scatter": slice_scatter,
    "diagonal_scatter": diagonal_scatter,
}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
# (Without them these ops wrote through views autograd does not see: fill_diagonal_ and put_
# gave the gradient of the tensor before the write, silently wrong; the *_scatter raised.)
def _arg(ctx, i, name, default):
    return ctx.args[i] if len(ctx.args) > i else ctx.kwargs.get(name, default)


def _g_fill_diagonal_(ctx, g):
    """The written diagonal gets no gradient."""
    return (fill_diagonal_(g.clone(), 0, _arg(ctx, 2, "wrap", False)),)


def _g_put(ctx, g):
    """self: g, less the written positions unless accumulating; source: g at them."""
    from .creation import zeros_like

    index, source = ctx.args[1], ctx.args[2]
    accumulate = _arg(ctx, 3, "accumulate", False)
    gs = None
    if isinstance(source, Tensor) and len(ctx.needs) > 2 and ctx.needs[2]:
        gs = g.reshape(-1).take(index.reshape(-1)).reshape(source.shape)
    gx = None
    if ctx.needs[0]:
        gx = g if accumulate else put_(g.clone(), index, zeros_like(source))
    return gx, None, gs


def _scatter_rule(view_of_args, scatter):
    """input: g with the scattered slice zeroed; src: g's slice."""

    def rule(ctx, g):
        from .creation import zeros_like

        src = ctx.args[1]
        rest = view_of_args(ctx)
        gi = scatter(g, zeros_like(src), *rest) if ctx.needs[0] else None
        gs = None
        if len(ctx.needs) > 1 and ctx.needs[1]:
            gs = _SLICES[scatter](g, *rest)
        return gi, gs

    return rule


def _select_of(g, dim, index):
    return g.select(dim, index)


def _slice_of(g, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * g.ndim
    index[g._dim(dim)] = slice(start, end, step)
    return g[tuple(index)]


def _diagonal_of(g, offset=0, dim1=0, dim2=1):
    return g.diagonal(offset, dim1, dim2)


_SLICES = {
    select_scatter: _select_of,
    slice_scatter: _slice_of,
    diagonal_scatter: _diagonal_of,
}


def _args_from(names_defaults):
    def get(ctx):
        return [_arg(ctx, 2 + i, n, d) for i, (n, d) in enumerate(names_defaults)]

    return get


GRADS = {
    "fill_diagonal_": _g_fill_diagonal_,
    "put_": _g_put,
    "put": _g_put,
    "select_scatter": _scatter_rule(_args_from([("dim", None), ("index", None)]), select_scatter),
    "slice_scatter": _scatter_rule(
        _args_from([("dim", 0), ("start", None), ("end", None), ("step", 1)]), slice_scatter
    ),
    "diagonal_scatter": _scatter_rule(
        _args_from([("offset", 0), ("dim1", 0), ("dim2", 1)]), diagonal_scatter
    ),
}
