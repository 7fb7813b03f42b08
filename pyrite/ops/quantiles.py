"""Order statistics and binning: quantile, nanquantile, mode, nanmean, histogram, histogramdd,
trapezoid (trapz), cumulative_trapezoid.

No new kernels: each is a composition of parity-tested ops (the bitonic sort, gather,
searchsorted, scatter_add, cummax, the strided map), so the loop budget is each piece's.

- quantile: sort each row (NaN last, as PyTorch), rank = q·(n - 1) in the input's float type
  (nanquantile: n = the row's non-NaN count), then the interpolation between the two gathered
  neighbours, PyTorch's lerp (start + w·(end - start) for w < 1/2, end - (1 - w)·(end - start)
  above). A row holding NaN gives NaN (quantile), an all-NaN row NaN (nanquantile). Checking a
  tensor q against [0, 1] reads back one flag (PyTorch checks it too).
- mode: sort each row stably; the runs of equal values (NaN equal to nothing, as PyTorch) give
  each run's length at its last element; the first longest run (so the smallest value among
  ties) wins, and its last element's original index is the index (PyTorch's CPU answer).
- histogram / histogramdd: the edges are linspace(lo, hi, bins + 1) as PyTorch computes them,
  lo and hi read back when `range` is not given (one readback for all dims); each point's bin
  is searchsorted(edges, x, right=True) - 1 (the rightmost edge closes the last bin), points
  outside or NaN go to a dump bin, and the counts (or weights) are one scatter_add.
"""

from __future__ import annotations

import math
import numbers

from .. import autograd
from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..tensor import Tensor
from .casts import to_dtype
from .core import empty, run_map
from .elementwise import as_tensor_arg
from .reduce import _return_type

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


# ---- quantile ------------------------------------------------------------------------------------
def _q_tensor(q, x: Tensor, name: str) -> tuple[Tensor, bool]:
    """q as a 1-D float tensor of x's dtype, and whether it was a scalar (0-d)."""
    from .creation import tensor

    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise RuntimeError(f"pyrite: {name}() q must be a scalar or 1D tensor")
        if q.dtype is not x.dtype:
            raise RuntimeError(
                f"pyrite: {name}() q tensor must be same dtype as the input tensor "
                f"(q {q.dtype!r}, input {x.dtype!r})"
            )
        from .flags import any_where

        if any_where([(q, "!(v >= 0.0 && v <= 1.0)")])[0]:
            raise RuntimeError(f"pyrite: {name}() q values must be in the range [0, 1]")
        return q.reshape(-1), q.ndim == 0
    if isinstance(q, (list, tuple)):
        return _q_tensor(tensor(list(q), dtype=x.dtype), x, name)
    qf = float(q)
    if not 0.0 <= qf <= 1.0:
        raise RuntimeError(f"pyrite: {name}() q must be in the range [0, 1] but got {q}")
    return tensor([qf], dtype=x.dtype), True


def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    from .elementwise import where
    from .scatter import gather
    from .sorting import sort

    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise RuntimeError(
            f"pyrite: {name}() input tensor must be either float or double dtype, got {x.dtype!r}"
        )
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(
            f"pyrite: {name}() interpolation must be one of linear, lower, higher, midpoint or "
            f"nearest, but got {interpolation}"
        )
    if x.numel() == 0:
        raise RuntimeError(f"pyrite: {name}() input tensor must be non-empty")
    qt, q_scalar = _q_tensor(q, x, name)
    nq = qt._shape[0]
    if dim is None:
        rows = x.reshape(-1)  # (n,)
        kept = (1,) * x.ndim if keepdim else ()
        d = 0
    else:
        d = x._dim(dim)
        rows = x.movedim(d, -1) if x.ndim else x.reshape(1)  # (*rest, n)
        rest = x._shape[:d] + x._shape[d + 1 :] if x.ndim else ()
        kept = (rest[:d] + (1,) + rest[d:]) if keepdim and x.ndim else rest
    rest = rows._shape[:-1]
    n = rows._shape[-1]
    s = sort(rows, -1).values  # (*rest, n), NaN last
    if ignore_nan:
        valid = (~s.isnan()).sum(-1).float()  # (*rest,)
    else:
        from .creation import full

        valid = full(rest, float(n))
    qv = qt.reshape((nq,) + (1,) * len(rest)).float()  # (Q, 1, ...)
    rank = qv * (valid - 1).clamp(min=0)  # (Q, *rest)
    if interpolation == "lower":
        rank = rank.floor()
    elif interpolation == "higher":
        rank = rank.ceil()
    elif interpolation == "nearest":
        rank = rank.round()
    lo_i = rank.floor().clamp(0, n - 1).to(D.int32)
    hi_i = rank.ceil().clamp(0, n - 1).to(D.int32)
    sq = s.unsqueeze(0).expand(nq, *s._shape)  # (Q, *rest, n)
    lo = gather(sq, -1, lo_i.unsqueeze(-1)).squeeze(-1)  # (Q, *rest)
    hi = gather(sq, -1, hi_i.unsqueeze(-1)).squeeze(-1)
    w = rank - rank.floor() if interpolation != "midpoint" else rank * 0 + 0.5
    if interpolation in ("lower", "higher", "nearest"):
        val = lo.clone()  # the element itself (an infinite one stays, as torch's pick)
    elif autograd.needs_grad(lo):  # recorded ops: the weights 1 - w, w onto the sorted pair
        val = where(w < 0.5, lo + w * (hi - lo), hi - (hi - lo) * (1.0 - w))
    else:  # PyTorch's lerp: the nearer end is the anchor
        val = run_map(
            "select(x1 - (x1 - x0) * (1.0 - x2), x0 + x2 * (x1 - x0), x2 < 0.5)",
            (lo, hi, w),
            ("f32", "f32", "f32"),
            empty(lo._shape, x.dtype),
            "f32",
        )
    if ignore_nan:
        bad = valid == 0  # (*rest,)
    else:
        bad = s.select(-1, n - 1).isnan()  # a NaN sorts last
    val = where(bad, float("nan"), val)
    out_shape = kept if q_scalar else (nq,) + tuple(kept)
    return val.reshape(out_shape) if val._shape != out_shape else val


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-th quantiles of each row along dim (all elements when dim is None).

    q: a float in [0, 1] or a 1-D tensor of them (its values become the result's first dim).
    interpolation: 'linear', 'lower', 'higher', 'midpoint' or 'nearest'. A row holding NaN
    gives NaN (see nanquantile)."""
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """quantile ignoring NaN: each row's quantile among its non-NaN values (NaN if none)."""
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# ---- mode ------------------------------------------------------------------------------------
mode_return = _return_type("mode")


def mode(input, dim=-1, keepdim=False):
    """(values, indices): the most frequent value of each row along dim (the smallest among
    ties), and the index of its last occurrence."""
    from .creation import arange, zeros
    from .sorting import sort
    from .stats import cummax

    x = as_tensor_arg(input)
    d = x._dim(dim)  # (a 0-d tensor takes dims -1 and 0 only, as torch)
    if x.ndim == 0:
        return mode_return(x.clone(), zeros((), dtype=D.int32))
    n = x._shape[d]
    if n == 0:
        raise IndexError(f"pyrite: mode(): Expected reduction dim {d} to have non-zero size.")
    rows = x.movedim(d, -1)  # (*rest, n)
    srt = sort(rows, -1, stable=True)
    s, si = srt.values, srt.indices
    ct = "f32" if x.dtype.kind == "f" else "i32"
    same = "x0 == x1" if ct == "i32" else "x0 == x1 && !p_isnan(x0)"
    # start[i]: a new run begins at i (i = 0 or s[i] != s[i-1])
    start = empty(s._shape, D.bool_)
    start[..., :1] = True
    if n > 1:
        run_map(f"!({same})", (s[..., 1:], s[..., :-1]), (ct, ct), start[..., 1:], "bool")
    pos = arange(n, dtype=D.int32)  # (n,)
    run_start = cummax(start.to(D.int32) * pos, -1).values  # (*rest, n)
    length = pos - run_start + 1
    end = empty(s._shape, D.bool_)
    end[..., n - 1 :] = True
    if n > 1:
        end[..., :-1] = start[..., 1:]
    key = length * end.to(D.int32)  # a run's length at its last element, else 0
    best = key.argmax(-1, keepdim=True)  # the first longest run: the smallest value
    values = s.gather(-1, best).squeeze(-1)
    indices = si.gather(-1, best).squeeze(-1)
    if keepdim:
        values, indices = values.unsqueeze(d), indices.unsqueeze(d)
    return mode_return(values, indices)


# ---- nanmean ---------------------------------------------------------------------------------
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements (NaN where there are none)."""
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise RuntimeError(
            f"pyrite: nanmean(): expected input to have floating point dtype but got {x.dtype!r}"
        )
    if dtype is not None:
        if not D.from_any(dtype).is_floating_point:
            raise TypeError(
                "pyrite: nanmean(): could not infer output dtype. Optional dtype must be either "
                f"a floating point or complex dtype. Got: {D.from_any(dtype)!r}"
            )
        x = to_dtype(x, D.from_any(dtype))
    count = (~x.isnan()).sum(dim, keepdim=keepdim) if dim is not None else (~x.isnan()).sum()
    total = x.nansum(dim, keepdim=keepdim) if dim is not None else x.nansum()
    if keepdim and dim is None:
        total = total.reshape((1,) * x.ndim)
        count = count.reshape((1,) * x.ndim)
    return (total / count).to(x.dtype)


# ---- trapezoid -------------------------------------------------------------------------------
def _trapezoid_terms(y, x, dx, dim, name):
    from .views import narrow

    y = as_tensor_arg(y)
    if y.dtype.is_bool:
        raise DtypeError(
            f"pyrite: {name}: received a bool input for `y`, but bool is not supported"
        )
    if y.dtype.kind != "f":
        y = to_dtype(y, D.float32)
    if y.ndim == 0:
        raise IndexError(f"pyrite: {name}: dimension out of range for a 0-d input")
    d = y._dim(dim)
    n = y._shape[d]
    if n == 0:
        return None, y, d
    hi, lo = narrow(y, d, 1, n - 1), narrow(y, d, 0, n - 1)
    if x is None:
        step = 1.0 if dx is None else float(dx)
        return (hi + lo) * (step / 2), y, d
    if dx is not None:
        raise TypeError(f"pyrite: {name}: pass x or dx, not both")
    x = as_tensor_arg(x)
    if x.ndim == 1:
        if x._shape[0] != n:
            raise ShapeError(
                f"pyrite: {name}: There must be one `x` value for each sample point "
                f"(x has {x._shape[0]}, y has {n} along dim {d})"
            )
        shape = [1] * y.ndim
        shape[d] = n
        x = x.reshape(tuple(shape))
        xd = d
    else:
        xd = x._dim(dim)
    gaps = narrow(x, xd, 1, x._shape[xd] - 1) - narrow(x, xd, 0, x._shape[xd] - 1)
    return (hi + lo) * gaps / 2, y, d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along dim: spacing dx (default 1) or sample points x."""
    terms, yt, d = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    if terms is None:
        return empty(yt._shape[:d] + yt._shape[d + 1 :], yt.dtype).fill_(0)
    return terms.sum(d)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along dim (one element fewer than y along dim)."""
    terms, yt, d = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None or terms._shape[d] == 0:
        shape = list(yt._shape)
        shape[d] = max(0, shape[d] - 1)
        return empty(tuple(shape), yt.dtype)
    return terms.cumsum(d)


# ---- histogram -------------------------------------------------------------------------------
histogram_return = _return_type("histogram", ("hist", "bin_edges"))
histogramdd_return = _return_type("histogramdd", ("hist", "bin_edges"))


def _edges(pts: Tensor, bins, range_, name):
    """Per dim: a 1-D edges tensor, from bin counts (and range, or the data's min and max,
    read back once for all dims) or from given edge tensors."""
    from .creation import linspace

    ndim = pts._shape[1]
    if isinstance(bins, Tensor) and bins.ndim == 0:
        bins = int(bins.item())
    if isinstance(bins, numbers.Integral):
        bins = [int(bins)] * ndim
    bins = list(bins)
    if len(bins) != ndim:
        raise RuntimeError(
            f"pyrite: {name}: expected {ndim} sequences of bin edges for each dimension, "
            f"but got {len(bins)}"
        )
    counts = [b for b in bins if not isinstance(b, Tensor)]
    for d, b in enumerate(counts):
        if int(b) <= 0:
            raise RuntimeError(f"pyrite: {name}(): bins must be > 0, but got {b} for dimension {d}")
    if range_ is not None:
        r = [float(v) for v in range_]
        if len(r) != 2 * ndim:
            raise RuntimeError(
                f"pyrite: {name}: for a {ndim}-dimensional histogram, range should have "
                f"{2 * ndim} elements, but got {len(r)}"
            )
        bounds = [(r[2 * d], r[2 * d + 1]) for d in range(ndim)]
    elif counts and pts._shape[0]:
        import numpy as np

        mm = np.stack([pts.amin(0).float().numpy(), pts.amax(0).float().numpy()])  # one sync
        bounds = [(float(mm[0, d]), float(mm[1, d])) for d in range(ndim)]
    else:
        bounds = [(0.0, 1.0)] * ndim
    edges = []
    for d, b in enumerate(bins):
        if isinstance(b, Tensor):
            edges.append(to_dtype(b.reshape(-1), pts.dtype))
            continue
        lo, hi = bounds[d]
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise RuntimeError(f"pyrite: {name}: dimension {d}'s range [{lo}, {hi}] is not finite")
        if lo > hi:
            raise RuntimeError(
                f"pyrite: {name}: min should not exceed max, but got min {lo} max {hi} "
                f"for dimension {d}"
            )
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges.append(linspace(lo, hi, int(b) + 1, dtype=pts.dtype))
    return edges


def _histogramdd(pts: Tensor, bins, range_, weight, density, name):
    from .creation import full, zeros
    from .elementwise import where
    from .sorting import searchsorted

    n, ndim = pts._shape
    edges = _edges(pts, bins, range_, name)
    nbins = [e._shape[0] - 1 for e in edges]
    total = math.prod(nbins)
    if weight is not None:
        weight = as_tensor_arg(weight)
        if weight._shape != (n,):
            raise RuntimeError(
                f"pyrite: {name}: if weight tensor is provided it should have the same shape as "
                f"the input tensor excluding its innermost dimension, but got input with shape "
                f"{list(pts._shape)} and weight with shape {list(weight._shape)}"
            )
    hist = zeros(total + 1, dtype=pts.dtype)
    if n and total:
        flat = zeros(n, dtype=D.int32)
        out = zeros(n, dtype=D.bool_)
        stride = 1
        for d in range(ndim - 1, -1, -1):
            col = pts[:, d]
            e = edges[d]
            nb = nbins[d]
            idx = searchsorted(e, col, right=True) - 1
            last = e[nb:]  # (1,): the rightmost edge closes the last bin
            idx = where(col == last, nb - 1, idx)
            out = out | (col < e[:1]) | (col > last) | col.isnan()
            flat = flat + idx.clamp(0, max(nb - 1, 0)) * stride
            stride *= nb
        flat = where(out, total, flat)
        src = (
            full((1,), 1.0, dtype=pts.dtype).expand(n)
            if weight is None
            else to_dtype(weight, pts.dtype)
        )
        hist.scatter_add_(0, flat, src)
    hist = hist[:total].reshape(tuple(nbins))
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            shape = [1] * ndim
            shape[d] = nbins[d]
            width = (e[1:] - e[:-1]).reshape(tuple(shape))
            hist = hist / width
    return hist, edges


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):
    """(hist, bin_edges): counts (or summed weights) of input's elements in `bins` equal bins
    over range (the data's min and max by default), or in the bins between given edges."""
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise DtypeError(f'pyrite: "histogram" not implemented for {x.dtype!r} (floats only)')
    if isinstance(bins, Tensor) and bins.ndim == 1:
        bins = [bins]
    elif isinstance(bins, Tensor):
        bins = int(bins.item())
    w = None if weight is None else as_tensor_arg(weight)
    if w is not None and w._shape != x._shape:
        raise RuntimeError(
            f"pyrite: histogram: weight should have the same shape as input, got input "
            f"{list(x._shape)} and weight {list(w._shape)}"
        )
    hist, edges = _histogramdd(
        x.reshape(-1, 1), bins, range, None if w is None else w.reshape(-1), density, "histogram"
    )
    return histogram_return(hist, edges[0])


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the D-dimensional histogram of the points input[..., :] (D = the last
    dim); bins an int, D ints, or D edge tensors; range [lo0, hi0, lo1, hi1, ...]."""
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise TypeError(f'pyrite: "histogramdd" not implemented for {x.dtype!r} (floats only)')
    if x.ndim < 1:
        raise RuntimeError("pyrite: histogramdd: input should have at least 1 dimension")
    ndim = x._shape[-1]
    w = None if weight is None else as_tensor_arg(weight).reshape(-1)
    hist, edges = _histogramdd(x.reshape(-1, ndim), bins, range, w, density, "histogramdd")
    return histogramdd_return(hist, tuple(edges))


__all__ = [
    "cumulative_trapezoid",
    "histogram",
    "histogramdd",
    "mode",
    "nanmean",
    "nanquantile",
    "quantile",
    "trapezoid",
    "trapz",
]

METHODS = {
    "quantile": quantile,
    "nanquantile": nanquantile,
    "mode": mode,
    "nanmean": nanmean,
    "histogram": histogram,
}


# ---- gradients ------------------------------------------------------------------------------
def _g_mode(ctx, g):
    """The values' gradient goes to the index mode returned (torch's value_selecting_reduction)."""
    from .creation import zeros

    gv = g[0]
    if gv is None:
        return (None,)
    shape = ctx.meta[0][0]
    if len(shape) == 0:
        return (gv,)
    d = ctx.arg(1, "dim", -1)
    d = d + len(shape) if d < 0 else d
    idx = ctx.out[1]
    if not ctx.arg(2, "keepdim", False):
        idx, gv = idx.unsqueeze(d), gv.unsqueeze(d)
    return (zeros(tuple(shape), dtype=gv.dtype).scatter(d, idx.long(), gv),)


_g_mode.saves = frozenset(("out",))

GRADS = {"mode": _g_mode}
