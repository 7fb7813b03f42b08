"""Sampling and statistics that ported scripts reach for: multinomial, bincount, histc, diff,
broadcast_shapes, trace, kron, logaddexp, logcumsumexp, cummax/cummin, cov, corrcoef, cdist.

No new kernels: each op is a composition of existing ones (the strided map `run_map`, reductions,
cumsum, searchsorted, topk, scatter_add, rand), so every piece is already parity-tested.

- multinomial, with replacement: inverse CDF. cdf = cumsum(w) over each row, u ~ U[0, 1) from the
  device Philox stream scaled by the row's last cdf value, index = searchsorted(cdf, u,
  right=True) (the first cdf > u, so a zero-weight category is never chosen). If rounding makes
  u·total == total, the index is capped at the first index whose cdf reaches the total (the last
  positive-weight category), found by a second searchsorted.
- multinomial, without replacement: the exponential race (Gumbel-top-k). Give category i the
  clock E_i = -log(U_i) / w_i ~ Exponential(rate w_i), independent. By memorylessness the first
  clock to ring is i with probability w_i / Σw, and the remaining clocks, restarted, are again
  independent exponentials with the same rates: so the order in which clocks ring is exactly
  sequential sampling without replacement proportional to the weights. The k first to ring are
  the top-k of keys log(U_i) / w_i (= -E_i); zero weights get key -inf (never before a positive
  weight, as in PyTorch, which then returns zero-weight categories in some order). U_i is taken as
  1 - rand() in (0, 1], so log never sees 0.
  Validation (inf, NaN, negative weights, rows summing to <= 0) costs one readback of two flags:
  PyTorch raises these synchronously on the CPU, and so do we.
- bincount needs the output length max(input)+1 on the host: one readback (min and max in one
  kernel, so negative inputs are rejected in the same round trip). histc needs none: the range,
  when taken from the data, stays on the device as 0-d tensors.
- cummax / cummin / logcumsumexp: a Hillis–Steele doubling scan, ceil(log2 L) passes of
  elementwise maps over shifted views (O(L log L) work, 2–4 dispatches a pass). The combine
  rules are associative: (value, index) pairs with "later wins ties, NaN wins" (PyTorch's
  sequential rule), and logaddexp.
"""

from __future__ import annotations

import builtins
import math
import numbers

from .. import dtypes as D
from ..autograd import plain
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Size, Tensor
from . import core
from .casts import clone, to_dtype
from .core import empty, run_map
from .elementwise import as_tensor_arg, result_dtype
from .reduce import _return_type, int_dim

_FLAGS_BAD = "!(p_isnan(x0) || p_isinf(x0)) && x0 >= 0.0"  # a valid weight
# x0 = U[0,1), x1 = weight: key log(v)/w, v = 1 - u kept below 1 (u = 0, once in 2^24 draws,
# gave log(1) = 0, a key no positive weight can beat however small: a 1e-9 token then won)
_RACE_KEY = "select(-p_inf(), log(min(1.0 - x0, 0.99999994)) / x1, x1 > 0.0)"


# ---- multinomial ------------------------------------------------------------------------------
def _check_weights(w: Tensor):
    """PyTorch's two errors, from one readback of two flags."""
    from .combine import stack

    ok = run_map(_FLAGS_BAD, (w,), ("f32",), empty(w._shape, D.bool_), "bool")
    flags = stack([ok.all(), (w.sum(-1) > 0).all()]).numpy()
    if not flags[0]:
        raise RuntimeError(
            "pyrite: multinomial: probability tensor contains either `inf`, `nan` or element < 0"
        )
    if not flags[1]:
        raise RuntimeError(
            "pyrite: multinomial: invalid multinomial distribution (sum of probabilities <= 0)"
        )


def multinomial(input, num_samples, replacement=False, *, generator=None) -> Tensor:
    """Indices (int32) drawn from each row of `input`'s (unnormalised) weights."""
    from .creation import rand
    from .elementwise import minimum
    from .sorting import searchsorted, topk

    w = as_tensor_arg(input)
    if w.dtype.kind != "f":
        raise DtypeError(
            f"pyrite: multinomial only supports floating-point dtypes for input, got {w.dtype}"
        )
    if w.ndim not in (1, 2):
        raise RuntimeError(
            f"pyrite: multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(w._shape)}"
        )
    n = w._shape[-1]
    k = int(num_samples)
    if k <= 0:
        raise RuntimeError(f"pyrite: multinomial: cannot sample n_sample <= 0 samples (got {k})")
    if not replacement and k > n:
        raise RuntimeError(
            f"pyrite: multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
            f"replacement (n_sample={k}, size {n})"
        )
    w2 = to_dtype(w if w.ndim == 2 else w.unsqueeze(0), D.float32)  # (rows, n)
    rows = w2._shape[0]
    if rows == 0:
        return empty((0, k), D.int32)
    _check_weights(w2)
    if replacement:
        cdf = w2.cumsum(-1)  # (rows, n)
        total = cdf[:, n - 1 :].contiguous()  # (rows, 1)
        u = rand(rows, k, generator=generator) * total  # (rows, k) in [0, total]
        idx = searchsorted(cdf, u, right=True)
        last = searchsorted(cdf, total, right=False)  # first index whose cdf reaches the total
        idx = minimum(idx, last)
    else:
        u = rand(rows, n, generator=generator)
        keys = run_map(_RACE_KEY, (u, w2), ("f32", "f32"), empty((rows, n), D.float32), "f32")
        idx = topk(keys, k, -1).indices
    core.note_bounds(idx, 0, n - 1)  # drawn categories: a decode's next token, range known
    return idx if w.ndim == 2 else idx.reshape(k)


# ---- counting ---------------------------------------------------------------------------------
def bincount(input, weights=None, minlength=0) -> Tensor:
    """Counts (int32) or summed weights of each value of a 1-D non-negative int tensor.

    The output length max(input) + 1 is needed on the host: one readback (min and max together).
    """
    from .creation import full, zeros
    from .indexing import _minmax

    x = as_tensor_arg(input)
    if x.dtype.kind != "i":
        raise DtypeError(f"pyrite: bincount: input must be an integer tensor, got {x.dtype}")
    if x.ndim != 1:
        raise RuntimeError(
            f"pyrite: bincount only supports 1-d non-negative integral inputs (got shape {tuple(x._shape)})"
        )
    if minlength < 0:
        raise RuntimeError(f"pyrite: bincount: minlength should be >= 0, got {minlength}")
    if weights is not None:
        weights = as_tensor_arg(weights)
        if weights._shape != x._shape:
            raise RuntimeError(
                f"pyrite: bincount: weights should be 1-d and have the same length as input "
                f"(input {tuple(x._shape)}, weights {tuple(weights._shape)})"
            )
    n = x.numel()
    size = int(minlength)
    if n:
        lo, hi = _minmax(x)
        if lo < 0:
            raise RuntimeError(
                f"pyrite: bincount only supports 1-d non-negative integral inputs (min is {lo})"
            )
        size = builtins.max(size, hi + 1)
    # torch: float32 weights give float32, any other weights float64 (float32 here: no f64)
    out_dt = D.int32 if weights is None else D.float32
    out = zeros(size, dtype=out_dt)
    if n == 0:
        return out
    src = (
        full((1,), 1, dtype=D.int32).expand(n) if weights is None else to_dtype(weights, D.float32)
    )
    # scatter takes int32 indices only, as torch's (uint8 / int8 / int16 inputs are cast)
    return out.scatter_add_(0, x if x.dtype is D.int32 else to_dtype(x, D.int32), src)


# x0 = value, x1 = lo, x2 = hi (0-d, broadcast), s0 = bins: the bin, or s0 (a dump bin) when out
# of [lo, hi] or NaN. PyTorch's order of operations: (x - lo) * bins / (hi - lo), truncated.
_HIST_BIN = (
    "select(i32(s0), min(i32((x0 - x1) * s0 / (x2 - x1)), i32(s0) - 1), "
    "!p_isnan(x0) && x0 >= x1 && x0 <= x2)"
)


@plain
def histc(input, bins=100, min=0, max=0) -> Tensor:
    """Histogram with `bins` equal bins over [min, max] (the data's range when min == max).
    Not differentiable: as torch's, the counts never require grad (unwrapped, on the input
    detached), where a guarded op's output would carry a backward that raises."""
    from .creation import full, zeros

    x = as_tensor_arg(input)
    if isinstance(x, Tensor):
        x = x.detach()
    if x.dtype.kind != "f":
        raise DtypeError(
            f"pyrite: histc: not implemented for {x.dtype} (floating-point input only)"
        )
    bins = int(bins)
    if bins <= 0:
        raise RuntimeError(f"pyrite: histc: bins must be > 0, got {bins}")
    if min > max:
        raise RuntimeError(f"pyrite: histc: max must be larger than min (min={min}, max={max})")
    n = x.numel()
    if n == 0:
        return zeros(bins, dtype=x.dtype)
    lo, hi = float(min), float(max)
    if lo == hi:  # the data's range: one readback, as torch's (its range check needs it)
        from .combine import stack

        lo, hi = (float(v) for v in stack([x.amin(), x.amax()]).float().numpy())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        # torch's refusal: an inf or NaN in the data (or the range given) would put every
        # element in a bin of NaN width (pyrite counted nothing or raised an index error)
        raise RuntimeError(f"pyrite: histc: range of [{lo}, {hi}] is not finite")
    lo, hi = full((), lo), full((), hi)
    idx = run_map(
        _HIST_BIN,
        (x.reshape(-1), lo, hi),
        ("f32",) * 3,
        empty((n,), D.int32),
        "i32",
        (float(bins),),
        ("f32",),
    )
    counts = zeros(bins + 1, dtype=D.float32)
    counts.scatter_add_(0, idx, full((1,), 1.0).expand(n))
    return to_dtype(counts[:bins].contiguous(), x.dtype)


# ---- differences, shapes, products ----------------------------------------------------------
def diff(input, n=1, dim=-1, prepend=None, append=None) -> Tensor:
    from .combine import cat
    from .views import narrow

    x = as_tensor_arg(input)
    if x.ndim == 0:
        raise RuntimeError("pyrite: diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"pyrite: diff: order must be non-negative but got {n}")
    d = x._dim(dim)
    if n == 0:  # torch returns the input as it is, prepend and append unused
        return clone(x)
    parts = [as_tensor_arg(p) for p in (prepend, x, append) if p is not None]
    for p in parts:
        if p.ndim != x.ndim:
            raise RuntimeError(
                f"pyrite: diff expects prepend or append to be the same dimension as input "
                f"(input {tuple(x._shape)}, got {tuple(p._shape)})"
            )
    if len(parts) > 1:
        x = cat(parts, d)
    for _ in range(n):
        length = x._shape[d]
        if length == 0:
            break
        hi, lo = narrow(x, d, 1, length - 1), narrow(x, d, 0, length - 1)
        x = (hi != lo) if x.dtype.is_bool else hi - lo
    return x if n else clone(x)


def broadcast_shapes(*shapes) -> Size:
    tups = []
    for s in shapes:
        t = (int(s),) if isinstance(s, numbers.Integral) else tuple(int(v) for v in s)
        if any(v < 0 for v in t):
            raise RuntimeError(f"pyrite: broadcast_shapes: negative dimension in shape {t}")
        tups.append(t)
    return Size(core.broadcast_shapes(*tups))


def trace(input) -> Tensor:
    x = as_tensor_arg(input)
    if x.ndim != 2:
        raise RuntimeError(f"pyrite: trace: expected a matrix, but got tensor with dim {x.ndim}")
    if x.dtype.is_bool:  # torch: "trace" not implemented for 'Bool'
        raise DtypeError("pyrite: trace is not implemented for pyrite.bool")
    return x.diagonal().sum()


def kron(input, other) -> Tensor:
    """out[i·bs + j] = a[i]·b[j] per dim: a viewed (a0, 1, a1, 1, ...) times b (1, b0, 1, b1, ...)."""
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a._shape)
    sb = (1,) * (nd - b.ndim) + tuple(b._shape)
    av = a.reshape(tuple(v for d in sa for v in (d, 1)))
    bv = b.reshape(tuple(v for d in sb for v in (1, d)))
    return (av * bv).reshape(tuple(p * q for p, q in zip(sa, sb)))


# ---- log-space ------------------------------------------------------------------------------
# max(a, b) + log1p(exp(-|a - b|)); equal infinities give themselves (inf - inf would be NaN)
# (p_expf: WGSL's exp flushes subnormal results, logaddexp(0, -88) was 0, torch 6.05e-39)
_LOGADDEXP = "select(p_maxf(x0, x1) + p_log1p(p_expf(-abs(x0 - x1))), x0, x0 == x1 && p_isinf(x0))"


def _float_result(a, b, name):
    dt = result_dtype(a, b)
    if dt.kind != "f":
        raise DtypeError(f"pyrite: {name}: not implemented for {dt} (floating-point inputs only)")
    return dt


def logaddexp(input, other) -> Tensor:
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    dt = _float_result(a, b, "logaddexp")
    shape = core.broadcast_shapes(a._shape, b._shape)
    return run_map(_LOGADDEXP, (a, b), ("f32", "f32"), empty(shape, dt), "f32")


# ---- doubling scans ---------------------------------------------------------------------------
def _later_wins(largest: bool, kind: str) -> str:
    """x0 = earlier value, x1 = later value: true when the later one is the running extreme."""
    cmp = ">=" if largest else "<="
    if kind != "f":
        return f"x1 {cmp} x0"
    return f"p_isnan(x1) || (!p_isnan(x0) && x1 {cmp} x0)"


def _shifted(t: Tensor, d: int, s: int):
    """(t[..., :L-s], t[..., s:]) along d: the earlier and later operand of a doubling pass."""
    from .views import narrow

    length = t._shape[d]
    return narrow(t, d, 0, length - s), narrow(t, d, s, length - s)


def _pass(expr, inputs, ctypes, prev: Tensor, d: int, s: int, ctype: str) -> Tensor:
    """A new tensor: prev's first s entries along d, then expr over the shifted operands."""
    from .views import narrow

    length = prev._shape[d]
    nxt = empty(prev._shape, prev.dtype)
    nxt_head = narrow(nxt, d, 0, s)
    run_map("x0", (narrow(prev, d, 0, s),), (ctype,), nxt_head, ctype)
    run_map(expr, inputs, ctypes, narrow(nxt, d, s, length - s), ctype)
    return nxt


_RESULTS = {name: _return_type(name) for name in ("cummax", "cummin")}


def _cum_extreme(input, dim, largest: bool, name: str):
    from .creation import arange

    x = as_tensor_arg(input)
    int_dim(name, dim)
    result = _RESULTS[name]
    d = x._dim(dim)  # a 0-d tensor takes dims -1 and 0
    if x.ndim == 0:
        return result(clone(x), core.empty((), D.int32).fill_(0))
    length = x._shape[d]
    vals = clone(x)
    shape = [1] * x.ndim
    shape[d] = length
    idx = clone(arange(length, dtype=D.int32).reshape(tuple(shape)).expand(*x._shape))
    if x.numel() == 0:
        return result(vals, idx)
    kind = x.dtype.kind
    ct = "f32" if kind == "f" else "i32"
    cond = _later_wins(largest, kind)
    s = 1
    while s < length:
        v0, v1 = _shifted(vals, d, s)
        i0, i1 = _shifted(idx, d, s)
        idx = _pass(
            f"select(x2, x3, {cond})", (v0, v1, i0, i1), (ct, ct, "i32", "i32"), idx, d, s, "i32"
        )
        vals = _pass(f"select(x0, x1, {cond})", (v0, v1), (ct, ct), vals, d, s, ct)
        s *= 2
    return result(vals, idx)


def cummax(input, dim):
    return _cum_extreme(input, dim, True, "cummax")


def cummin(input, dim):
    return _cum_extreme(input, dim, False, "cummin")


def logcumsumexp(input, dim) -> Tensor:
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise DtypeError(
            f"pyrite: logcumsumexp: not implemented for {x.dtype} (floating-point only)"
        )
    int_dim("logcumsumexp", dim)
    d = x._dim(dim)  # a 0-d tensor takes dims -1 and 0
    if x.ndim == 0 or x.numel() == 0:
        return clone(x)
    # f16/bf16: the passes run in f32 and the result is rounded once (torch's opmath); a pass
    # that stored each partial in the half type rounded ceil(log2 L) times (a 13-long f16 scan
    # of 2.5s gave 5.0625, torch 5.0664, exact 5.06495)
    # the copy into f32 also turns -0.0 into 0.0: torch's first element is log(exp(-inf) +
    # exp(x0)), -0.0 + 0.0 = 0.0 (torch 2.13: logcumsumexp([-0.0], 0) is [0.]; a 0-d one,
    # returned above as a copy, stays -0.0 there too)
    ct = x.dtype.ctype
    out = run_map("select(x0, 0.0, x0 == 0.0)", (x,), (ct,), empty(x._shape, D.float32), ct)
    length = x._shape[d]
    s = 1
    while s < length:
        a, b = _shifted(out, d, s)
        out = _pass(_LOGADDEXP, (a, b), ("f32", "f32"), out, d, s, "f32")
        s *= 2
    return to_dtype(out, x.dtype)


# ---- covariance and distances -----------------------------------------------------------------
def cov(input, *, correction=1, fweights=None, aweights=None) -> Tensor:
    """Covariance of the rows (variables) over the columns (observations), as torch.cov."""
    from .creation import full

    x = as_tensor_arg(input)
    if x.dtype.is_bool:
        raise DtypeError("pyrite: cov(): bool dtype is not supported for input")
    if x.ndim > 2:
        raise RuntimeError(
            f"pyrite: cov(): expected input to have two or fewer dimensions but got an input with {x.ndim} dimensions"
        )
    if x.dtype.kind != "f":
        x = to_dtype(x, D.float32)
    x2 = x.reshape(1, -1) if x.ndim < 2 else x  # (V, N)
    nobs = x2._shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        wt = as_tensor_arg(wt)
        if wt.ndim > 1 or wt.numel() != nobs:
            raise RuntimeError(
                f"pyrite: cov(): expected {name} to have one dimension with {nobs} elements, "
                f"got shape {tuple(wt._shape)}"
            )
        if name == "fweights" and wt.dtype.kind == "f":
            raise DtypeError("pyrite: cov(): expected fweights to have integral dtype")
        wt = to_dtype(wt.reshape(nobs), D.float32)
        if nobs and bool((wt < 0).any()):  # one readback, as torch's check (a RuntimeError)
            raise ArgumentError(f"pyrite: cov(): {name} cannot be negative")
        w = wt if w is None else w * wt
    if w is None:
        avg = x2.mean(1, keepdim=True)  # (V, 1)
        norm = full((), float(builtins.max(nobs - correction, 0)))
    else:
        w_sum = w.sum()
        avg = (x2 * w).sum(1, keepdim=True) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = w_sum - correction
        else:
            aw = to_dtype(as_tensor_arg(aweights).reshape(nobs), D.float32)
            norm = w_sum - correction * (w * aw).sum() / w_sum
        norm = norm.clamp(min=0)
    xm = x2 - avg  # (V, N)
    c = ((xm * w) if w is not None else xm) @ xm.transpose(0, 1) / norm  # (V, V)
    return c.reshape(()) if c._shape == (1, 1) else c  # one variable: 0-d, as torch


def corrcoef(input) -> Tensor:
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal()
    sd = d.sqrt()
    c = c / sd.reshape(-1, 1) / sd.reshape(1, -1)
    return c.clamp(-1, 1)


_CDIST_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """p-norm distances between the rows of x1 (B, P, M) and x2 (B, R, M): (B, P, R).

    Computed directly from the differences (B, P, R, M) with `norm`, never through the
    |a|² + |b|² - 2ab expansion (PyTorch's mm path), so it is exact to a norm's rounding but
    holds P·R·M floats at once.
    """
    if compute_mode not in _CDIST_MODES:  # (torch: a ValueError)
        raise ArgumentError(
            f"pyrite: cdist: {compute_mode!r} is not a valid value for compute_mode"
        )
    a, b = as_tensor_arg(x1), as_tensor_arg(x2)
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(
            f"pyrite: cdist only supports at least 2D tensors, X1 got: {a.ndim}D, X2 got: {b.ndim}D"
        )
    if a._shape[-1] != b._shape[-1]:
        raise ShapeError(
            f"pyrite: cdist: X1 and X2 must have the same number of columns. "
            f"X1: {a._shape[-1]} X2: {b._shape[-1]} (shapes {tuple(a._shape)} and {tuple(b._shape)})"
        )
    if p < 0:
        raise RuntimeError(f"pyrite: cdist only supports non-negative p values, got {p}")
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        raise DtypeError(
            f"pyrite: cdist only supports floating-point dtypes, X1 got: {a.dtype}, X2 got: {b.dtype}"
        )
    diffs = a.unsqueeze(-2) - b.unsqueeze(-3)  # (B, P, R, M)
    return diffs.norm(p=p, dim=-1)


__all__ = [
    "bincount",
    "broadcast_shapes",
    "cdist",
    "corrcoef",
    "cov",
    "cummax",
    "cummin",
    "diff",
    "histc",
    "kron",
    "logaddexp",
    "logcumsumexp",
    "multinomial",
    "trace",
]


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _g_cum_extreme(ctx, g):
    """cummax/cummin: each value's gradient goes to the index it came from (summed there)."""
    from .creation import zeros

    gv = g[0]
    shape = ctx.meta[0][0]
    if gv is None:
        return (None,)
    if len(shape) == 0:
        return (gv,)
    d = ctx.arg(1, "dim")
    d = d % len(shape)
    return (zeros(tuple(shape), dtype=gv.dtype).scatter_add(d, ctx.out[1].to(D.int64), gv),)


_g_cum_extreme.saves = frozenset(("out",))


def _g_logcumsumexp(ctx, g):
    """dx_j = Σ_{i>=j} g_i·exp(x_j - out_i), torch's stable form: the positive and negative
    parts of g each through a reversed logcumsumexp in log space."""
    from .. import autograd
    from .elementwise import where

    x = ctx.args[0]
    if x.ndim == 0:
        return (g,)
    d = ctx.arg(1, "dim") % x.ndim
    # while a double backward is recorded, out is recomputed from x: the saved one is an alias
    # without a graph, and the second derivative through it was lost (d²/dx² of a 3-long
    # logcumsumexp came out [0.134, 0.073, -0.440] where torch's is [0.098, 0.110, -0.207])
    out = logcumsumexp(x, d) if autograd.is_grad_enabled() else ctx.out
    lowest = -3.4028234663852886e38

    def rev_lcse(t):
        return logcumsumexp(t.flip(d), d).flip(d)

    la = g.abs().log()
    pos = where(g > 0, la, lowest)
    neg = where(g < 0, la, lowest)
    return ((rev_lcse(pos - out) + x).exp() - (rev_lcse(neg - out) + x).exp(),)


_g_logcumsumexp.saves = frozenset((0, "out"))


def _g_logaddexp(ctx, g):
    """d/da = 1 / (1 + exp(b - a)), d/db = 1 / (1 + exp(a - b)), torch's form: exp(a - out)
    is NaN where a and out are the same infinity (logaddexp(inf, 1.5): d/da is 1, not NaN)."""
    from .elementwise import exp

    a, b = ctx.args[0], ctx.args[1]
    ga = g / (1 + exp(b - a)) if ctx.needs[0] else None
    gb = g / (1 + exp(a - b)) if ctx.needs[1] else None
    return ga, gb


_g_logaddexp.saves = frozenset((0, 1))

GRADS = {
    "logaddexp": _g_logaddexp,
    "cummax": _g_cum_extreme,
    "cummin": _g_cum_extreme,
    "logcumsumexp": _g_logcumsumexp,
}

METHODS = {
    "multinomial": multinomial,
    "bincount": bincount,
    "histc": histc,
    "diff": diff,
    "trace": trace,
    "kron": kron,
    "logaddexp": logaddexp,
    "logcumsumexp": logcumsumexp,
    "cummax": cummax,
    "cummin": cummin,
    "cov": cov,
    "corrcoef": corrcoef,
}
