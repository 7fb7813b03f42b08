"""Fused row ops: softmax, log_softmax, layer_norm, rms_norm (kernels/rowops.py).

Each op runs one kernel, one workgroup per row, over the input as it lies in memory: the row dim
and the outer dims are read through the input's strides and offset, so a transposed or sliced
input costs no copy, and softmax over a non-last dim reads its rows with a stride instead of
moving the dim last with `.contiguous()` first. Measured on lavapipe (2 cores), softmax over
dim 0 of a contiguous (4099, 257) f32 tensor, mean of 5 calls after a warm-up: strided read 24.6 ms;
transpose + contiguous + softmax(-1) + transpose + contiguous 55.8 ms (the two copies cost more
than the strided read saves). Not yet measured on the H200, where coalescing matters more: a
column-per-invocation kernel for small strided rows would be the next thing to try there.

Outputs are new contiguous tensors of the input's shape and dtype (f16 computes in f32, stores
f16).
"""

from __future__ import annotations

import math

from .. import backend
from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..kernels.common import MAX_WORKGROUPS, fold_grid
from ..kernels.rowops import (
    HELD_MAX,
    NORM_COLS,
    NORM_LANES,
    grad_loop_iterations,
    norm_param_grad_kernel,
    norm_param_merge_kernel,
    row_grad_kernel,
    row_kernel,
    row_loop_iterations,
    workgroup_size,
    xent_kernel,
)
from ..tensor import Tensor
from .core import (
    PlanCache,
    coalesce,
    contiguous_copy,
    empty,
    f32_bits,
    max_loop_iterations,
)

# rms_norm's default eps: the machine epsilon of the type it computes in (torch's opmath type,
# float32 also for float16/bfloat16 input: ATen's rms_norm since torch 2.6; f16's own 2^-10
# gave 1e-3-scale f16 rows another answer than torch 2.13's)
_F32_EPS = 2.0**-23  # torch.finfo(torch.float32).eps


# Rows of at most HELD_MAX elements an invocation are held in registers and read once
# (kernels/rowops._held_row); longer ones stream twice. HELD = False: always stream (A/B:
# scripts/rowmap_ab.py). On a GPU rows take the fewest lanes that hold at most HELD_LANE_MAX
# elements each, several rows a workgroup (_held_shape).
# H200, 2026-12-03 (scripts/rowmap_ab.py, GB/s of one read and one write, wgpu-native / Dawn),
# streamed -> held with HELD_LANE_MAX 4 / 8 / 16, torch CUDA in the same run:
#   softmax 65,536 x 1024     1,397 -> 1,995 / 3,133 / 3,110   Dawn 1,438 -> 1,932 / 3,102 / 3,109  torch 3,972
#   layer_norm 65,536 x 1024  1,382 -> 2,013 / 3,136 / 3,403   Dawn 1,468 -> 2,021 / 3,192 / 3,467  torch 2,706
#   softmax 4096 x 768        1,086 -> 1,158 / 1,299 / 1,371   Dawn 1,022 -> 1,189 / 1,268 /   905  torch 3,055
#   softmax 49,152 x 128        882 -> 1,779 / 1,654 / 1,729   Dawn   953 -> 1,604 / 1,417 / 1,469  torch 3,437
#   softmax 8192 x 4096       1,895 -> 2,926 / 2,936 / 2,941   Dawn 1,950 -> 2,894 / 2,952 / 2,976  torch 2,495
# (128 x 768: ~16 us whichever, launch-bound.) 8 is never far from the best on either.
HELD = True
HELD_LANE_MAX = 8
# Held rows of at most SUBGROUP_MAX_LANES lanes reduce with subgroup operations where the device
# has them (backend/quirks.py probes the mapping): one workgroup barrier instead of the tree's
# log2(lanes) + 1. H100, wgpu-native, 2026-12-05 (scripts/subgroup_ab.py, GPU time, tree ->
# subgroups, two runs): 49,152 x 128 (32 lanes a row) softmax 31.3 -> 26.4 us, layer_norm
# 30.2 -> 25.1; 128 x 768 (128 lanes) 7.3 -> 6.9; but 65,536 x 1024 (128 lanes) 188 -> 194 and
# 4096 x 768 (128 lanes) 13.9 -> 14.8 (layer_norm): with many subgroups a row the butterfly's
# unused shuffles and the slots' merge cost what the barriers saved. lavapipe (8-lane subgroups,
# rows of 32 lanes): 1.2-1.8x.
SUBGROUPS = True
SUBGROUP_MAX_LANES = 64
# HELD_VEC4: held rows of f32 with unit element strides, every row starting at a multiple of 4
# elements and n a multiple of 4, read and written as vec4s (a lane's elements rounded up to
# whole vec4s; kernels/rowops._held_row `vec`), 16-byte loads and stores as the reductions' and
# the map's. Off: it gained nothing on the H100 (wgpu-native, 2026-12-05, scripts/rowmap_ab.py
# --rows, GB/s scalar -> vec4, docs/bench/2026-12-05-h100-rowmap-vec4.txt): softmax 65,536 x 1024
# 2,709 -> 2,676, layer_norm 2,722 -> 2,691 (torch CUDA 2,901 / 2,512; the copy kernel 2,807), and
# lost where rows round up or are short: layer_norm 4096 x 768 646 -> 542, softmax 49,152 x 128
# 1,406 -> 1,289. (Both held kernels reach ~96 % of the copy there; on the H200 they reached
# ~80 %, 2026-12-03: unmeasured with vec4.)
HELD_VEC4 = False


def _wg(n: int) -> int:
    """Invocations a row on this device (kernels/rowops.workgroup_size)."""
    return workgroup_size(n, backend.current().adapter_type != "CPU")


def _run(
    op: str,
    x: Tensor,
    n: int,
    row_dim_stride: int,
    outer_shape,
    x_outer_strides,
    out: Tensor,
    out_row_stride: int,
    out_outer_strides,
    w=None,
    b=None,
    eps=0.0,
):
    """Dispatch `op` over rows of `n` elements; outer dims are coalesced before baking the rank."""
    rows = math.prod(outer_shape)
    if rows == 0 or n == 0:
        return out
    dev = backend.current()
    key = _plan_key(dev, op, x, n, row_dim_stride, outer_shape, x_outer_strides, out,
                    out_row_stride, out_outer_strides, w, b, eps)  # fmt: skip
    plan = None if key is None else _plans.get(key)
    if plan is None:
        plan = _plan(op, x, n, row_dim_stride, outer_shape, x_outer_strides, out,
                     out_row_stride, out_outer_strides, w, b, eps)  # fmt: skip
        if key is not None:
            _plans.keep(key, plan, PLANS_MAX)
    if plan[0] is None:  # (past the loop budget: composed from reductions)
        _, cshape, cx, co = plan
        return _composed(op, x, n, row_dim_stride, cshape, cx, out, out_row_stride, co, w, b, eps)
    src, info, grid = plan
    bufs = [x._storage.buffer]
    if w is not None:
        bufs.append(w._storage.buffer)
    if b is not None:
        bufs.append(b._storage.buffer)
    bufs.append(out._storage.buffer)
    dev.dispatch(src, bufs, info, grid)
    return out


# Plans of _run by everything they depend on (the rows' layout, dtypes, eps, the device and the
# module constants and rules above, which tests and A/B runs change): the kernel, its info words
# and grid, ~5 µs of coalescing, workgroup and held-shape rules and info building a call (two
# layer_norms a transformer layer).
PLANS_MAX = 4096


def _plan_parts():
    """The modules (and the rules tests replace) a plan depends on: this one and kernels/rowops."""
    import sys

    from ..kernels import rowops as K

    fns = ("_wg", "_held_shape", "row_kernel", "row_loop_iterations", "max_loop_iterations")
    return (sys.modules[__name__], fns), (K, ("workgroup_size",))


_plans = PlanCache(_plan_parts)


def _plan_key(dev, op, x, n, sx, outer, x_outer, out, so, o_outer, w, b, eps):
    """The plan cache's key for this call, or None (an eps that is not a Python number)."""
    if type(eps) is not float and type(eps) is not int:
        return None
    knobs = _plans.constants(dev)
    return (
        op, n, sx, tuple(outer), tuple(x_outer), so, tuple(o_outer), x._offset, x.dtype,
        out.dtype, None if w is None else w.dtype, None if b is None else b.dtype,
        eps if eps else f32_bits(eps),  # (-0.0 == 0.0: keyed by its bits)
        dev.adapter_type, dev.subgroups, dev.loop_budget, knobs,
    )  # fmt: skip


def _plan(
    op: str,
    x: Tensor,
    n: int,
    row_dim_stride: int,
    outer_shape,
    x_outer_strides,
    out: Tensor,
    out_row_stride: int,
    out_outer_strides,
    w=None,
    b=None,
    eps=0.0,
):
    """(kernel, info words, grid) of `op` over rows of `n` elements, or (None, shape, x's and
    out's strides) of the coalesced outer dims for rows past the loop budget (_composed)."""
    rows = math.prod(outer_shape)
    cshape, (cx, co) = coalesce(
        tuple(outer_shape), [tuple(x_outer_strides), tuple(out_outer_strides)]
    )
    rank = len(cshape)
    wg = _wg(n)
    if row_loop_iterations(n, wg) > max_loop_iterations():
        return None, cshape, cx, co
    held = _held_shape(n, wg)
    lanes, per, groups = held if held is not None else (wg, 0, 1)
    vec = 1
    if (
        per
        and HELD_VEC4
        and x.dtype is D.float32
        and out.dtype is D.float32
        and row_dim_stride == 1
        and out_row_stride == 1
        and n % 4 == 0
        and x._offset % 4 == 0
        and all(st % 4 == 0 for st in (*cx, *co))
    ):
        vec, per = 4, -(-n // (4 * lanes)) * 4
    dev = backend.current()
    src = row_kernel(
        op,
        lanes,
        rank,
        x.dtype.wgsl,
        out.dtype.wgsl,
        w.dtype.wgsl if w is not None else None,
        b.dtype.wgsl if b is not None else None,
        per,
        groups,
        dev.subgroups if per and SUBGROUPS and lanes <= SUBGROUP_MAX_LANES else 0,
        vec,
    )
    info = (rows, n, x._offset, row_dim_stride, out_row_stride, f32_bits(eps), *cshape, *cx, *co)
    return src, info, fold_grid(-(-rows // groups))


def _held_shape(n: int, wg: int):
    """(invocations a row, elements each holds, rows a workgroup) for the held-row kernel, or
    None (the streaming kernel). On a GPU the fewest lanes (32 .. 256) that leave each at most
    HELD_LANE_MAX elements, 256 // lanes rows a workgroup (a row of 768 is 128 lanes of 6, two
    rows a workgroup; the streaming rule gave it a workgroup of 256 alone), else 256 lanes of up to
    HELD_MAX; on a CPU adapter the device's workgroup rule (`_wg`), one row a workgroup."""
    if not HELD:
        return None
    if backend.current().adapter_type == "CPU":
        per = -(-n // wg)
        return (wg, per, 1) if per <= HELD_MAX else None
    for lanes in (32, 64, 128, 256):
        per = -(-n // lanes)
        if per <= HELD_LANE_MAX or (lanes == 256 and per <= HELD_MAX):
            return lanes, per, 256 // lanes
    return None


def _composed(op, x, n, sx, outer, x_outer, out, so, o_outer, w, b, eps):
    """The row op composed from reductions, for rows past what one workgroup may loop over on
    a loop-budget device (backend/quirks.py): the reductions split long rows into chunks."""
    xv = x._view(tuple(outer) + (n,), tuple(x_outer) + (sx,), x._offset)
    if xv.dtype is not D.float32:
        xv = xv.float()
    if op == "softmax":
        e = (xv - xv.amax(-1, keepdim=True)).exp()
        r = e / e.sum(-1, keepdim=True)
    elif op == "log_softmax":
        r = xv - xv.logsumexp(-1, keepdim=True)
    elif op == "layer_norm":
        from .reduce import var_mean

        var, mean = var_mean(xv, -1, correction=0, keepdim=True)
        r = (xv - mean) * (var + eps).rsqrt()
    else:  # rms_norm
        r = xv * ((xv * xv).mean(-1, keepdim=True) + eps).rsqrt()
    if w is not None:
        r = r * w.reshape(-1)
    if b is not None:
        r = r + b.reshape(-1)
    ov = out._view(tuple(outer) + (n,), tuple(o_outer) + (so,), out._offset)
    ov.copy_(r)
    return out


def _float_input(name, input, dtype):
    if not isinstance(input, Tensor):
        raise TypeError(
            f"pyrite: {name}(): argument 'input' must be Tensor, not {type(input).__name__}"
        )
    if dtype is not None:
        dt = D.from_any(dtype)
        if dt is not input.dtype:
            input = input.to(dt)
    if not input.dtype.is_floating_point:  # (torch: a NotImplementedError)
        raise DtypeError(
            f"pyrite: {name}() is not implemented for {input.dtype!r} (pass dtype=pyrite.float32)"
        )
    return input


def _softmax_like(op, input, dim, dtype):
    x = _float_input(op, input, dtype)
    if dim is None:  # torch's legacy implicit dim: 0 for 0-, 1- and 3-D, else 1
        dim = 0 if x.ndim in (0, 1, 3) else 1
    out = empty(x._shape, x.dtype)
    if x.ndim == 0:
        x._dim(dim)  # dims -1 and 0 only, as torch
        x = x._view((1,), (1,), x._offset)
        d = 0
        ostr = (1,)
    else:
        d = x._dim(dim)
        ostr = out._strides
    shape = x._shape
    outer = [i for i in range(len(shape)) if i != d]
    _run(
        op,
        x,
        shape[d],
        x._strides[d],
        [shape[i] for i in outer],
        [x._strides[i] for i in outer],
        out,
        ostr[d],
        [ostr[i] for i in outer],
    )
    return out


def softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    """softmax(input, dim, dtype=None): exp(x - max) / sum(exp(x - max)) along `dim`."""
    return _softmax_like("softmax", input, dim, dtype)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3):
    """log_softmax(input, dim, dtype=None): x - max - log(sum(exp(x - max))) along `dim`."""
    return _softmax_like("log_softmax", input, dim, dtype)


def _norm_shape(name, x: Tensor, normalized_shape):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ns = normalized_shape
    if type(ns) is not tuple or len(ns) != 1 or type(ns[0]) is not int:
        ns = tuple(int(s) for s in ns)  # ((d,), LayerNorm's own, as it is: no generator)
    k = len(ns)
    nd = len(x._shape)
    if k == 0 or k > nd or tuple(x._shape[nd - k :]) != ns:
        raise ShapeError(
            f"pyrite: {name}: given normalized_shape={list(ns)}, expected input "
            f"with shape [*, {', '.join(map(str, ns))}], but got input of size "
            f"{list(x._shape)}"
        )
    return ns


def _param(name, what, p, ns):
    if p is None:
        return None
    if not isinstance(p, Tensor):
        raise TypeError(f"pyrite: {name}: {what} must be a Tensor or None")
    if tuple(p._shape) != ns:
        raise ShapeError(
            f"pyrite: {name}: {what} of shape {tuple(p._shape)} does not match "
            f"normalized_shape {ns}"
        )
    if not p.dtype.is_floating_point:
        raise DtypeError(f"pyrite: {name}: {what} must be floating point, not {p.dtype!r}")
    return p if p.is_contiguous() and p._offset == 0 else contiguous_copy(p)


def _rows_of(x: Tensor, k: int):
    """(x, n, row stride): the last k dims as one row, copying x when they don't coalesce."""
    if k == 1:  # (one dim, the common case: its own stride, or 1 where coalesce drops it)
        n = x._shape[-1]
        return x, n, x._strides[-1] if n != 1 else 1
    tail_shape = x._shape[x.ndim - k :]
    n = math.prod(tail_shape)
    cshape, (cs,) = coalesce(tuple(tail_shape), [tuple(x._strides[x.ndim - k :])])
    if len(cshape) > 1:
        x = x.contiguous()
        return x, n, 1
    return x, n, cs[0] if cs else 1


def _norm(op, input, normalized_shape, weight, bias, eps):
    x = _float_input(op, input, None)
    ns = _norm_shape(op, x, normalized_shape)
    w = _param(op, "weight", weight, ns)
    b = _param(op, "bias", bias, ns)
    k = len(ns)
    x, n, sx = _rows_of(x, k)
    out = empty(x._shape, x.dtype)
    lead = len(x._shape) - k
    _run(op, x, n, sx, x._shape[:lead], x._strides[:lead], out, 1, out._strides[:lead], w, b, eps)
    return out


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims
    (biased variance, as torch)."""
    return _norm("layer_norm", input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x²) + eps) * weight; eps defaults to torch.finfo(float32).eps, for every
    input dtype (the computing type's, as torch's)."""
    if eps is None:
        eps = _F32_EPS
    return _norm("rms_norm", input, normalized_shape, weight, None, eps)


def _softmax_method(self, dim=None, dtype=None):
    return softmax(self, dim, dtype)


def _log_softmax_method(self, dim=None, dtype=None):
    return log_softmax(self, dim, dtype)


__all__ = ["layer_norm", "log_softmax", "rms_norm", "softmax"]

METHODS = {"softmax": _softmax_method, "log_softmax": _log_softmax_method}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _dim_arg(ctx):
    a = ctx.args
    d = a[1] if len(a) > 1 and a[1] is not None else ctx.kwargs.get("dim")
    if d is None:  # torch's legacy implicit dim, as the forward took it (a None here summed
        nd = len(ctx.meta[0][0])  # the gradient over every dim: silently wrong)
        d = 0 if nd in (0, 1, 3) else 1
    return d


def _out_of(ctx):
    """The saved output; while a double backward is recorded, tied to this node (torch's saved
    result: the input is not read, so writing it in place after the forward is allowed)."""
    from .. import autograd

    return autograd.output_of(ctx) if autograd.is_grad_enabled() else ctx.out


def _row_grad(op, a: Tensor, g: Tensor, n: int, w=None, eps=0.0):
    """One kernel (kernels/rowops.row_grad_kernel): the gradient of row op `op` with respect
    to its input, rows the last n elements of `a` (output y or input x) and `g`; with the norms'
    (mean, 1/std) per row, and the contiguous `a` and `g` the kernel read. None where it does not apply (the caller composes instead): a double
    backward being recorded, a float16/float32 mismatch, a row past the loop budget."""
    from .. import autograd

    if autograd.is_grad_enabled() or g._shape != a._shape or not g.dtype.is_floating_point:
        return None
    if a.dtype is D.bfloat16 or g.dtype is D.bfloat16 or (w is not None and w.dtype is D.bfloat16):
        return None  # packed storage: the composite's ops widen it
    wg = _wg(n)
    if grad_loop_iterations(op, n, wg) > max_loop_iterations():
        return None
    a = a if a.is_contiguous() else contiguous_copy(a)
    g = g if g.is_contiguous() else contiguous_copy(g)
    rows = a.numel() // n if n else 0
    out = empty(a._shape, a.dtype)
    norm = op in ("layer_norm", "rms_norm")
    stats = empty((max(rows, 1), 2), D.float32) if norm else None
    if rows and n:
        wt = w.dtype.wgsl if w is not None else None
        src = row_grad_kernel(op, wg, a.dtype.wgsl, g.dtype.wgsl, out.dtype.wgsl, wt)
        bufs = [a._storage.buffer, g._storage.buffer]
        if w is not None:
            bufs.append(w._storage.buffer)
        bufs.append(out._storage.buffer)
        if norm:
            bufs.append(stats._storage.buffer)
        info = [rows, n, a._offset, g._offset, f32_bits(eps)]
        dev = backend.current()
        if dev._tape is not None and dev._tape.recording:  # (compile/fusion.py may fuse a map)
            dev._tape.row_next((op, wg, a.dtype.wgsl, g.dtype.wgsl, out.dtype.wgsl, wt), out)
        dev.dispatch(src, bufs, info, fold_grid(rows))
    return out, stats, a, g


def _last_dim(ctx):
    d = _dim_arg(ctx)
    nd = max(len(ctx.meta[0][0]), 1)
    return d is not None and (d % nd) == nd - 1


def _g_softmax(ctx, g):
    y = _out_of(ctx)
    d = _dim_arg(ctx)
    if _last_dim(ctx) and y.ndim:
        fused = _row_grad("softmax", y, g, y._shape[-1])
        if fused is not None:
            return (fused[0],)
    if y.dtype in _HALF:  # (torch's kernel computes in float and rounds once)
        yf, gf = y.float(), g.float()
        return ((yf * (gf - (gf * yf).sum(d, keepdim=True))).to(y.dtype),)
    return (y * (g - (g * y).sum(d, keepdim=True)),)


# The composite backward of a float16/bfloat16 softmax or log_softmax (a dim other than the last,
# and every bfloat16 one) runs in float32 and rounds once, as torch's: rounding each of its four
# ops into the half type left 34% of float16 softmax(0) gradients 1 ulp off torch's (30% of
# bfloat16's), found by tests/test_fuzz_random_shapes.py (PYRITE_FUZZ_SEED=7)
_HALF = (D.float16, D.bfloat16)


def _g_log_softmax(ctx, g):
    from .elementwise import exp

    d = _dim_arg(ctx)
    y = _out_of(ctx)
    if _last_dim(ctx) and y.ndim:
        fused = _row_grad("log_softmax", y, g, y._shape[-1])
        if fused is not None:
            return (fused[0],)
    if y.dtype in _HALF:
        yf, gf = y.float(), g.float()
        return ((gf - exp(yf) * gf.sum(d, keepdim=True)).to(y.dtype),)
    return (g - exp(y) * g.sum(d, keepdim=True),)


_g_softmax.saves = _g_log_softmax.saves = frozenset(("out",))  # (torch's: the result only)


def _norm_dims(x, normalized_shape):
    k = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return list(range(x.ndim - k, x.ndim))


def _g_norm_fused(op, ctx, x, g, k, w, b, eps):
    """The norms' gradients in 2-4 dispatches: dx by one row kernel; dw = Σ g·x̂ over the rows
    (one map and one sum, x̂ from the kernel's row statistics), db = Σ g. None: compose."""
    if not x.dtype.is_floating_point or x.ndim < k:
        return None
    n = math.prod(x._shape[x.ndim - k :])
    if -(-n // NORM_COLS) > MAX_WORKGROUPS:  # (_norm_param_grads' grid: a row of > 2M)
        return None
    wc = None
    if w is not None:
        wc = w if w.is_contiguous() and w._offset == 0 else contiguous_copy(w)
    got = _row_grad(op, x, g, n, wc, eps)
    if got is None:
        return None
    gx, stats, xc, gc = got
    rows = x.numel() // n if n else 0
    gw = gb = None
    need_w = w is not None and ctx.needs[2]
    need_b = b is not None and len(ctx.needs) > 3 and ctx.needs[3]
    if need_w or need_b:
        dw, db = _norm_param_grads(xc, gc, stats, rows, n)
        gw = dw.reshape(w._shape).to(w.dtype) if need_w else None
        gb = db.reshape(b._shape).to(b.dtype) if need_b else None
    return gx if ctx.needs[0] else None, None, gw, gb


# The norms' parameter gradients split their rows into parts where one workgroup a 32-column
# block would leave a GPU idle: enough parts for NORM_FILL workgroups, each at least
# NORM_MIN_ROWS rows, then one more dispatch adds the parts; on lavapipe one part, unless a
# part's rows would pass the loop budget. Measured on the H200 (wgpu-native, timestamps,
# `scripts/norm_grad_time.py`; dw+db kernels' GPU time, µs, by parts 1/2/4/8/16/32):
#   512 rows of 128:   20.3 / 19.7 / 15.9 / 14.7 / 14.9 / 17.8   (the merge 5.4-11.4 of it)
#   1024 rows of 768:  36.6 / 27.6 / 19.9 / 17.1 / 16.7 / 19.5
#   4096 rows of 768: 161.4 / 91.6 / 55.0 / 35.7 / 27.7 / 25.4
# so parts of ~64 rows, up to ~500 workgroups (16 and 22 parts for the two larger), from 1,024
# rows: below that the split's 5 µs of GPU time a norm do not repay its second dispatch.
NORM_FILL = 512
NORM_MIN_ROWS = 64
NORM_SPLIT_ROWS = 1024
FORCE_PARTS = None  # (tests: this many parts wherever the loop budget allows)


def _norm_param_grads(x, g, stats, rows, n):
    """(dw, db) of a norm, f32 (n,): Σ_rows g·(x - mean)·rstd and Σ_rows g, from contiguous
    (rows, n) x and g and the row kernel's `stats`, in one dispatch (or two: parts)."""
    dw, db = empty((n,), D.float32), empty((n,), D.float32)
    if n == 0:
        return dw, db
    dev = backend.current()
    blocks = -(-n // NORM_COLS)
    parts = 1
    if FORCE_PARTS is not None:
        parts = FORCE_PARTS
    elif dev.adapter_type != "CPU" and rows >= NORM_SPLIT_ROWS:
        parts = max(1, min(-(-NORM_FILL // blocks), rows // NORM_MIN_ROWS))
    # a lane loops over ceil(chunk / NORM_LANES) rows of its part: within the loop budget
    chunk_max = max_loop_iterations() * NORM_LANES
    chunk = max(1, -(-rows // parts))
    while chunk > chunk_max:
        parts *= 2
        chunk = -(-rows // parts)
    parts = max(1, -(-rows // chunk))  # (no empty part at the end)
    info = [rows, n, x._offset, g._offset, chunk]
    bufs = [x._storage.buffer, g._storage.buffer, stats._storage.buffer]
    src = norm_param_grad_kernel(x.dtype.wgsl, g.dtype.wgsl, parts > 1)
    if parts == 1:
        dev.dispatch(src, [*bufs, dw._storage.buffer, db._storage.buffer], info, (blocks, 1, 1))
        return dw, db
    part = empty((parts, 2 * n), D.float32)
    dev.dispatch(src, [*bufs, part._storage.buffer], info, (blocks, parts, 1))
    dev.dispatch(
        norm_param_merge_kernel(),
        [part._storage.buffer, dw._storage.buffer, db._storage.buffer],
        [n, parts],
        fold_grid(-(-2 * n // 64)),
    )
    return dw, db


# The composite norm backward of a float16/bfloat16 input (every bfloat16 one: _row_grad declines
# packed storage) runs in float32 and rounds once, as torch's kernel: rounding each op into
# bfloat16 put mean(g·w) 1 ulp off, which a variance-0 row's 1/std (316 at eps 1e-5) turned into
# input gradients 0.1 off each (their sum over 13 equal values -2.5 for float64's 0, torch's
# -0.25), found by tests/test_fuzz_nn.py (test_norm[879] at PYRITE_FUZZ_DRAWS=900)
def _widen(x, g, w):
    """x, g and w in float32 where x is float16/bfloat16 (w None stays None)."""
    if x.dtype not in _HALF:
        return x, g, w
    return x.float(), g.float(), (w.float() if w is not None else None)


def _narrow(gx, ctx):
    dt = ctx.args[0].dtype
    return gx.to(dt) if gx.dtype is not dt else gx


def _param_grad(t, p):
    """A weight's or bias's gradient term (x's shape): summed over the leading dims in float32
    before it rounds into p's dtype (the engine would sum the rounded terms in p's dtype)."""
    if t.dtype is p.dtype:
        return t
    lead = t.ndim - p.ndim
    if lead > 0:
        t = t.sum(list(range(lead)))
    return t.to(p.dtype)


def _g_layer_norm(ctx, g):
    """Recomputes mean and 1/std (two reductions) rather than saving them: x̂ = (x - μ)·r,
    dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂)) with ĝ = g·w; dw = g·x̂, db = g (the engine sums the
    leading dims)."""
    a = list(ctx.args) + [None] * (5 - len(ctx.args))
    x, ns, w, b = a[0], a[1], a[2], a[3]
    eps = a[4] if a[4] is not None else ctx.kwargs.get("eps", 1e-5)
    dims = _norm_dims(x, ns)
    fused = _g_norm_fused("layer_norm", ctx, x, g, len(dims), w, b, eps)
    if fused is not None:
        return fused
    x, g, wf = _widen(x, g, w)
    mu = x.mean(dims, keepdim=True)
    xc = x - mu
    r = ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    xh = xc * r
    gh = g * wf if w is not None else g
    gx = r * (gh - gh.mean(dims, keepdim=True) - xh * (gh * xh).mean(dims, keepdim=True))
    gw = _param_grad(g * xh, w) if w is not None and ctx.needs[2] else None
    gb = _param_grad(g, b) if b is not None and ctx.needs[3] else None
    return _narrow(gx, ctx) if ctx.needs[0] else None, None, gw, gb


_g_layer_norm.saves = frozenset((0, 2, 3))


def _g_rms_norm(ctx, g):
    a = list(ctx.args) + [None] * (4 - len(ctx.args))
    x, ns, w = a[0], a[1], a[2]
    eps = a[3] if a[3] is not None else ctx.kwargs.get("eps")
    if eps is None:
        eps = _F32_EPS
    dims = _norm_dims(x, ns)
    fused = _g_norm_fused("rms_norm", ctx, x, g, len(dims), w, None, eps)
    if fused is not None:
        return fused[:3]
    x, g, wf = _widen(x, g, w)
    r = ((x * x).mean(dims, keepdim=True) + eps).rsqrt()
    xh = x * r
    gh = g * wf if w is not None else g
    gx = r * (gh - xh * (gh * xh).mean(dims, keepdim=True))
    gw = _param_grad(g * xh, w) if w is not None and ctx.needs[2] else None
    return _narrow(gx, ctx) if ctx.needs[0] else None, None, gw


_g_rms_norm.saves = frozenset((0, 2))

GRADS = {
    "softmax": _g_softmax,
    "log_softmax": _g_log_softmax,
    "layer_norm": _g_layer_norm,
    "rms_norm": _g_rms_norm,
}


# ---- fused cross entropy (nn/_loss.py cross_entropy with class-index targets) ----------------
def _xent_fits(C: int) -> bool:
    """Whether one workgroup may loop over a row of C classes on this device."""
    return row_loop_iterations(C, _wg(C)) <= max_loop_iterations()


def _xent_info(x2, t1, w, ignore_index, eps):
    N, C = x2._shape
    return [
        N,
        C,
        x2._offset,
        x2._strides[1],
        x2._strides[0],
        t1._offset,
        t1._strides[0],
        int(ignore_index),
        f32_bits(eps),
        w._offset if w is not None else 0,
        w._strides[0] if w is not None else 0,
    ]


def _xent_forward(x2: Tensor, t1: Tensor, w, ignore_index: int, eps: float) -> Tensor:
    """One kernel over x2 (N, C) (any strides, f32 or f16) and int32 targets t1 (N,): a new f32
    tensor of 3·N + 1 elements, [loss rows | target weights | log-sum-exps | Σ weight]
    (kernels/rowops.py xent_kernel)."""
    N, C = x2._shape
    out = empty((3 * N + 1,), D.float32)
    wg = _wg(C)
    src = xent_kernel("fwd", wg, x2.dtype.wgsl, w.dtype.wgsl if w is not None else None, eps > 0)
    bufs = [x2._storage.buffer, t1._storage.buffer]
    if w is not None:
        bufs.append(w._storage.buffer)
    bufs.append(out._storage.buffer)
    backend.current().dispatch(src, bufs, _xent_info(x2, t1, w, ignore_index, eps), fold_grid(N))
    return out


def _xent_backward(x2, t1, w, ignore_index, eps, fo, g, g_stride, den) -> Tensor:
    """grad of cross_entropy w.r.t. x2 (N, C), contiguous in x2's dtype, in one kernel: `fo` the
    forward's buffer (_xent_forward), `g` the upstream gradient (one element a row at g_stride,
    or one scalar with g_stride 0), `den` the 'mean' denominator (a 0-d f32 tensor) or None."""
    N, C = x2._shape
    gx = empty((N, C), x2.dtype)
    wg = _wg(C)
    src = xent_kernel(
        "bwd",
        wg,
        x2.dtype.wgsl,
        w.dtype.wgsl if w is not None else None,
        eps > 0 and w is not None,
        g.dtype.wgsl,
    )
    info = _xent_info(x2, t1, w, ignore_index, eps)
    info += [g._offset, g_stride, den._offset if den is not None else -1]
    bufs = [x2._storage.buffer, t1._storage.buffer]
    if w is not None:
        bufs.append(w._storage.buffer)
    bufs += [fo._storage.buffer, g._storage.buffer]
    bufs.append((den if den is not None else fo)._storage.buffer)
    bufs.append(gx._storage.buffer)
    backend.current().dispatch(src, bufs, info, fold_grid(N))
    return gx
