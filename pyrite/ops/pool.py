"""Pooling with PyTorch's signatures: max_pool1d/2d/3d (return_indices, ceil_mode, dilation),
avg_pool1d/2d/3d (ceil_mode, count_include_pad, divisor_override), adaptive_avg_pool1d/2d/3d,
adaptive_max_pool1d/2d/3d (return_indices), lp_pool1d/2d/3d.

Every pool is one kernel family (kernels/pool.py) over the (N, C, D, H, W) view of its input
(ops/spatial.py): one invocation per output walks its window directly, or, where a window would
pass the device's loop budget (lavapipe: 65,535 iterations an invocation), per tile of the window
into partial states merged by a second dispatch. lp_pool is composed as PyTorch composes it
(avg_pool of x**p, times the kernel size, to the 1/p).
"""

from __future__ import annotations

import math

from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.pool import merge_kernel, pool_kernel
from ..tensor import Tensor
from .core import UNBOUNDED, empty, max_loop_iterations
from .elementwise import as_tensor_arg
from .spatial import SpatialError, as_ncdhw, fit_box, from_ncdhw, native, ntuple, pad3

# On a GPU (no loop budget) a window of more than GPU_SPLIT_WINDOW elements with fewer than
# GPU_FEW_OUTPUTS outputs is still tiled, so that about GPU_TARGET_UNITS invocations share it
# (a global pool of (1, 3, 1024, 1024) would otherwise be 3 invocations walking 1M elements).
# ESTIMATES, not measured on the H200: time `pyrite bench` before relying on them.
GPU_SPLIT_WINDOW = 4096
GPU_FEW_OUTPUTS = 8192
GPU_TARGET_UNITS = 65536
GPU_MIN_TILE = 1024
GPU_MERGE_GROUP = 64
LAST_PLAN = None  # (tile sizes, tiles, merge rounds) of the last pool: tests read it


def _tile_plan(ext: tuple, n_out: int):
    """Tile sizes (td, th, tw) over a window of extents `ext` = (KD, KH, KW)."""
    limit = max_loop_iterations()
    vol = math.prod(ext)
    if limit >= UNBOUNDED and vol > GPU_SPLIT_WINDOW and n_out < GPU_FEW_OUTPUTS:
        limit = max(GPU_MIN_TILE, -(-vol * n_out // GPU_TARGET_UNITS))
    return fit_box(ext, limit)


def _run(mode, xb: Tensor, out_sp, ker, stride, pad, dil, cip, div, with_idx, dims=3, starts=None):
    """Dispatch the pool of (N, C, D, H, W) view `xb` (`dims` of its spatial dims real, the
    leading others 1); returns (out, idx or None) 5-D."""
    global LAST_PLAN
    N, C, Di, Hi, Wi = xb._shape
    OD, OH, OW = out_sp
    out = empty((N, C, OD, OH, OW), xb.dtype)
    idx = empty((N, C, OD, OH, OW), D.int32) if with_idx else None
    n_out = out.numel()
    if n_out == 0:
        return out, idx
    if mode.startswith("adaptive"):
        # the longest adaptive window: I/O where O divides I, else at most ceil(I/O) + 1
        ext = tuple(-(-i // o) + (1 if i % o else 0) for i, o in zip((Di, Hi, Wi), out_sp))
    else:
        ext = tuple(ker)
    tiles = _tile_plan(ext, n_out)
    nt = tuple(-(-e // t) for e, t in zip(ext, tiles))
    P = math.prod(nt)
    info = [
        n_out,
        P,
        C,
        Di,
        Hi,
        Wi,
        OD,
        OH,
        OW,
        *ker,
        *stride,
        *pad,
        *dil,
        xb._offset,
        *xb._strides,
        *tiles,
        nt[1],
        nt[2],
        int(bool(cip)),
        int(div or 0),
    ]
    dev = backend.current()
    st = xb.dtype.wgsl
    outs = [out._storage.buffer] + ([idx._storage.buffer] if with_idx else [])
    ins = [xb._storage.buffer] + ([] if starts is None else [starts._storage.buffer])
    if P == 1:
        LAST_PLAN = (tiles, nt, 0)
        src = pool_kernel(mode, st, "direct", with_idx, dims, all(d == 1 for d in dil))
        dev.dispatch(src, [*ins, *outs], info, grid_for(n_out))
        return out, idx
    part = empty((2 * n_out * P,), D.int32)
    dev.dispatch(
        pool_kernel(mode, st, "partial", True, dims, all(d == 1 for d in dil)),
        [*ins, part._storage.buffer],
        info,
        grid_for(n_out * P),
    )
    # states merged per invocation a round: the loop budget's worth, or GPU_MERGE_GROUP on a GPU
    # (a long serial merge of thousands of states would leave the GPU idle)
    limit = max_loop_iterations()
    group = max(2, limit - 1 if limit < UNBOUNDED else GPU_MERGE_GROUP)  # G + 1 iterations
    rounds = 0
    while True:
        rounds += 1
        p_out = -(-P // group)
        final = p_out == 1
        minfo = [n_out, P, group, p_out]
        if final:
            dev.dispatch(
                merge_kernel(mode, st, True, with_idx),
                [part._storage.buffer, *outs],
                minfo,
                grid_for(n_out),
            )
            break
        nxt = empty((2 * n_out * p_out,), D.int32)
        dev.dispatch(
            merge_kernel(mode, st, False),
            [part._storage.buffer, nxt._storage.buffer],
            minfo,
            grid_for(n_out * p_out),
        )
        part, P = nxt, p_out
    LAST_PLAN = (tiles, nt, rounds)
    return out, idx


def _check_dtype(x, what, ints_ok):
    if x.dtype.is_bool or (not ints_ok and not x.dtype.is_floating_point):
        raise TypeError(f'pyrite: "{what}" not implemented for {x.dtype!r}')


def _out_size(size, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: floor (or ceil) division, and in ceil mode the last
    window must start inside the input or its left padding."""
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    o = num // s + 1
    if ceil_mode and (o - 1) * s >= size + p:
        o -= 1
    return o


def _pool(
    mode, input, dims, what, kernel_size, stride, padding, dilation, ceil_mode, cip, div, with_idx
):
    x = as_tensor_arg(input)
    _check_dtype(x, what, True)
    x, back = native(x)
    xb, unbatched = as_ncdhw(x, dims, what)
    if any(s == 0 for s in xb._shape[1:]):
        raise SpatialError(
            f"pyrite: {what}: expected a {dims + 1}D or {dims + 2}D (batch mode) tensor with "
            f"optional 0 dim batch size for input, but got: {list(x._shape)}"
        )
    ker = ntuple(kernel_size, dims, "kernel_size", what)
    if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0):
        strd = ker
    else:
        strd = ntuple(stride, dims, "stride", what)
    pad = ntuple(padding, dims, "padding", what)
    dil = ntuple(dilation, dims, "dilation", what)
    if any(s <= 0 for s in strd):
        raise SpatialError(f"pyrite: {what}: stride should be greater than zero, got {strd}")
    if any(k <= 0 for k in ker):
        raise SpatialError(f"pyrite: {what}: kernel size should be greater than zero, got {ker}")
    if any(d <= 0 for d in dil):
        raise SpatialError(f"pyrite: {what}: dilation should be greater than zero, got {dil}")
    if any(p < 0 for p in pad):
        raise SpatialError(f"pyrite: {what}: pad must be non-negative, got {pad}")
    if any(p > k // 2 for p, k in zip(pad, ker)):
        raise SpatialError(
            f"pyrite: {what}: pad should be at most half of effective kernel size, but got "
            f"pad={padding}, kernel_size={kernel_size} and dilation={dilation}"
        )
    if div is not None and int(div) == 0:
        raise SpatialError(f"pyrite: {what}: divisor must be not zero")
    in_sp = xb._shape[5 - dims :]
    if what == "avg_pool3d" and any(i < k for i, k in zip(in_sp, ker)):
        # torch's pool3d shape check for avg_pool3d only, padding not counted
        raise SpatialError(
            f"pyrite: avg_pool3d: input image (T: {in_sp[0]} H: {in_sp[1]} W: {in_sp[2]}) "
            f"smaller than kernel size (kT: {ker[0]} kH: {ker[1]} kW: {ker[2]})"
        )
    out_sp = tuple(_out_size(*a, ceil_mode) for a in zip(in_sp, ker, strd, pad, dil))
    if any(o <= 0 for o in out_sp):
        raise SpatialError(
            f"pyrite: {what}: given input of shape {tuple(x._shape)}, kernel_size={ker}, "
            f"stride={strd}, padding={pad}, dilation={dil}: the calculated output size "
            f"{out_sp} is too small"
        )
    out, idx = _run(
        mode,
        xb,
        pad3(out_sp, 1),
        pad3(ker, 1),
        pad3(strd, 1),
        pad3(pad, 0),
        pad3(dil, 1),
        cip,
        div,
        with_idx,
        dims,
    )
    return _from_5d(out, idx, dims, unbatched, back)


def _from_5d(out, idx, dims, unbatched, back):
    """_run's 5-D (out, idx) in the input's rank (`unbatched`: without N) and, for `back`, its
    dtype."""
    out = from_ncdhw(out, dims, unbatched)
    if back is not None:
        out = out.to(back)
    return out, (None if idx is None else from_ncdhw(idx, dims, unbatched))


def _adaptive(mode, input, output_size, dims, what, with_idx):
    x = as_tensor_arg(input)
    _check_dtype(x, what, False)
    x, back = native(x)
    if x.ndim not in (dims + 1, dims + 2):
        raise SpatialError(
            f"pyrite: {what}(): expected a {dims + 1}D or {dims + 2}D tensor, got shape "
            f"{tuple(x._shape)}"
        )
    in_sp = x._shape[-dims:]
    if isinstance(output_size, (list, tuple)):
        if len(output_size) != dims and not (len(output_size) == 1 and dims == 1):
            raise SpatialError(f"pyrite: {what}: output_size must be {dims}, got {output_size}")
        osz = tuple(
            in_sp[i] if o is None else int(o)
            for i, o in enumerate(output_size * (dims if len(output_size) == 1 else 1))
        )
    else:
        osz = (int(output_size),) * dims
    if any(o < 0 for o in osz):
        raise SpatialError(
            f"pyrite: {what}: elements of output_size must be greater than or equal to 0 "
            f"but received {osz}"
        )
    # torch lets dim 0 be empty, batched or not, and the channels too for adaptive_avg 1d/2d
    # ((N, 0, H, W) -> (N, 0, h, w)); every other dimension must be non-empty
    first = 2 if mode == "adaptive_avg" and dims < 3 and x.ndim == dims + 2 else 1
    for s in x._shape[first:]:
        if s == 0:
            raise SpatialError(
                f"pyrite: {what}(): expected input to have non-zero size for non-batch "
                f"dimensions, but input has sizes {list(x._shape)}"
            )
    if mode == "adaptive_avg" and all(o == 1 for o in osz) and x.numel():
        # global average pooling is a mean over the spatial dims: ops/reduce.py's reduction,
        # which splits long rows over many workgroups (a pool window walked by one invocation
        # left a GPU idle: (1, 3, 1024, 1024) took 0.92 ms on the H200 through Dawn, the mean
        # 0.10 ms; torch CUDA 0.017)
        from .reduce import mean

        out = mean(x, tuple(range(x.ndim - dims, x.ndim)), keepdim=True)
        return (out.to(back) if back is not None else out), None
    xb, unbatched = as_ncdhw(x, dims, what)
    one = (1, 1, 1)
    out, idx = _run(mode, xb, pad3(osz, 1), one, one, (0, 0, 0), one, True, None, with_idx, dims)
    return _from_5d(out, idx, dims, unbatched, back)


# ---- max pools ---------------------------------------------------------------------------------
def _max(dims, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    what = f"max_pool{dims}d"
    args = (kernel_size, stride, padding, dilation, ceil_mode, True, None, bool(return_indices))
    out, idx = _pool("max", input, dims, what, *args)
    return (out, idx) if return_indices else out


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """Max over sliding windows of (N, C, L) or (C, L); indices are positions in L."""
    return _max(1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """Max over sliding windows of (N, C, H, W) or (C, H, W); indices are h*W + w."""
    return _max(2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """Max over sliding windows of (N, C, D, H, W) or (C, D, H, W); indices d*H*W + h*W + w."""
    return _max(3, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(
    input,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# ---- average pools -----------------------------------------------------------------------------
def _avg(dims, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor):
    what = f"avg_pool{dims}d"
    args = (kernel_size, stride, padding, 1, ceil_mode, count_include_pad, divisor, False)
    return _pool("avg", input, dims, what, *args)[0]


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over sliding windows of (N, C, L) or (C, L)."""
    return _avg(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Mean over sliding windows of (N, C, H, W) or (C, H, W); integer inputs divide with
    truncation, as PyTorch's."""
    return _avg(
        2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def avg_pool3d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Mean over sliding windows of (N, C, D, H, W) or (C, D, H, W)."""
    return _avg(
        3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


# ---- adaptive pools ----------------------------------------------------------------------------
def adaptive_avg_pool1d(input, output_size):
    """Mean over the windows [floor(o*L/O), ceil((o+1)*L/O)) of (N, C, L) or (C, L)."""
    return _adaptive("adaptive_avg", input, output_size, 1, "adaptive_avg_pool1d", False)[0]


def adaptive_avg_pool2d(input, output_size):
    """Mean over adaptive windows of (N, C, H, W) or (C, H, W); None in output_size keeps
    that input size."""
    return _adaptive("adaptive_avg", input, output_size, 2, "adaptive_avg_pool2d", False)[0]


def adaptive_avg_pool3d(input, output_size):
    """Mean over adaptive windows of (N, C, D, H, W) or (C, D, H, W)."""
    return _adaptive("adaptive_avg", input, output_size, 3, "adaptive_avg_pool3d", False)[0]


def _amax(dims, input, output_size, return_indices):
    out, idx = _adaptive(
        "adaptive_max", input, output_size, dims, f"adaptive_max_pool{dims}d", bool(return_indices)
    )
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, L) or (C, L)."""
    return _amax(1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, H, W) or (C, H, W); indices are h*W + w."""
    return _amax(2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over adaptive windows of (N, C, D, H, W) or (C, D, H, W)."""
    return _amax(3, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _amax(1, input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _amax(2, input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return _amax(3, input, output_size, True)


# ---- power-average pools -----------------------------------------------------------------------
def _lp(dims, input, norm_type, kernel_size, stride, ceil_mode):
    from .elementwise import abs as _abs
    from .elementwise import mul, neg, pow, relu, sign

    x = as_tensor_arg(input)
    ker = ntuple(kernel_size, dims, "kernel_size", f"lp_pool{dims}d")
    pools = {1: (max_pool1d, avg_pool1d), 2: (max_pool2d, avg_pool2d), 3: (max_pool3d, avg_pool3d)}
    mp, ap = pools[dims]
    p = float(norm_type)
    if p == math.inf:
        return mp(_abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if p == -math.inf:
        return neg(mp(neg(_abs(x)), kernel_size, stride, 0, 1, ceil_mode))
    out = ap(pow(x, norm_type), kernel_size, stride, 0, ceil_mode)
    # as PyTorch: sign(out) * relu(|out|) (NaN-propagating), times the kernel size, ** (1/p)
    return pow(mul(mul(sign(out), relu(_abs(out))), math.prod(ker)), 1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(Σ x**p over each window) ** (1/p) of (N, C, L) or (C, L)."""
    return _lp(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(Σ x**p over each window) ** (1/p) of (N, C, H, W) or (C, H, W)."""
    return _lp(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(Σ x**p over each window) ** (1/p) of (N, C, D, H, W) or (C, D, H, W)."""
    return _lp(3, input, norm_type, kernel_size, stride, ceil_mode)


# the names PyTorch also has at the top level (torch.max_pool2d, ...); adaptive/avg 2-D pools
# were exported by pyrite before and stay; the rest are reached through nn.functional
__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d",
    "max_pool3d",
]

METHODS: dict = {}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
# max pools: g goes to each window's argmax (the indices of the forward when it returned them,
# else of a with_indices pass rerun in the backward), summed where windows share it
# (scatter_add). Average pools, plain and adaptive, are separable: out = x ×_d A_d over the
# spatial dims with A_d (out_d, in_d) holding 1/divisor over each window, so dx = g ×_d A_dᵀ, a
# banded gather per dim (recorded: double backward works). lp_pool is composed of these.
import inspect as _inspect  # noqa: E402

import numpy as _np  # noqa: E402

_SIGS: dict = {}


def _bind(fn, ctx):
    sig = _SIGS.get(fn)
    if sig is None:
        sig = _SIGS[fn] = _inspect.signature(fn)
    b = sig.bind(*ctx.args, **ctx.kwargs)
    b.apply_defaults()
    return b.arguments


def _scatter_back(g, idx, shape, dims):
    """zeros(shape) with g added at idx (flat positions in the spatial dims)."""
    from .creation import zeros

    lead = len(shape) - dims
    # explicit sizes: reshape(..., -1) cannot infer the last dim of an empty (N = 0) tensor
    flat_g = g.reshape(*g._shape[:lead], math.prod(g._shape[lead:]))
    flat_i = idx.reshape(*idx._shape[:lead], math.prod(idx._shape[lead:]))
    z = zeros((*shape[:lead], math.prod(shape[lead:])), dtype=g.dtype)
    return z.scatter_add(lead, flat_i, flat_g).reshape(*shape)


def _g_max_of(dims, adaptive):
    def rule(ctx, g):
        from ..autograd import no_grad

        x = ctx.args[0]
        gv = g[0] if isinstance(g, (list, tuple)) else g
        if gv is None or not ctx.needs[0]:
            return (None,)
        if isinstance(ctx.out, tuple):
            from ..autograd import _check_versions

            _check_versions(ctx, only=frozenset(("out",)))  # the indices (out_reads)
            idx = ctx.out[1]
        else:
            fn = _MAXES[(dims, adaptive)]
            a = _bind(fn, ctx)
            a = {k: v for k, v in a.items() if k not in ("input", "return_indices")}
            with no_grad():
                idx = fn(x, **a, return_indices=True)[1]
        return (_scatter_back(gv, idx, tuple(ctx.meta[0][0]), dims),)

    rule.saves = frozenset((0, "out"))
    # the values are never read (their gradient goes to the indices, saved or recomputed):
    # writing them in place afterwards is allowed, as in torch
    rule.out_reads = frozenset((1,))
    rule.soft = frozenset(("out",))
    return rule


def _avg_matrix(L, O, k, s, p, cip):
    """(O, L): row o is 1/divisor over the input positions of window o (torch's avg_pool:
    the divisor counts the padding reached unless count_include_pad is False)."""
    A = _np.zeros((O, L), _np.float32)
    for o in range(O):
        start = o * s - p
        end = min(start + k, L + p)
        size = end - start
        start, end = max(start, 0), min(end, L)
        if end > start:
            A[o, start:end] = 1.0 / (size if cip else end - start)
    return A


def _adaptive_matrix(L, O):
    A = _np.zeros((O, L), _np.float32)
    for o in range(O):
        start, end = (o * L) // O, -((-(o + 1) * L) // O)
        A[o, start:end] = 1.0 / (end - start)
    return A


def _separable_back(g, mats):
    """g (…, O_1, ..., O_d) times A_jᵀ along each of its last d dims: (…, L_1, ..., L_d).

    A_j is banded, so each input position l gathers only the K outputs whose windows hold it
    (dx[l] = Σ_k g[o_lk]·A[o_lk, l]) rather than a dense matmul: a non-finite g then reaches only
    the inputs of its own windows, as in torch (0·inf in a matmul made NaN of the whole row). A
    position in fewer than K windows points its spare taps at a zero appended to g."""
    from .combine import cat
    from .creation import tensor, zeros
    from .scatter import index_select

    d = len(mats)
    for j, A in enumerate(mats):
        O, L = A.shape
        cols = [_np.nonzero(A[:, col])[0] for col in range(L)]
        K = max([len(c) for c in cols] + [1])
        idx = _np.full((L, K), O, _np.int32)  # O: the appended zero
        w = _np.zeros((L, K), _np.float32)
        for col, rows in enumerate(cols):
            idx[col, : len(rows)] = rows
            w[col, : len(rows)] = A[rows, col]
        gm = g.movedim(g.ndim - d + j, -1)  # (…, O)
        if any(len(c) < K for c in cols):
            gm = cat([gm, zeros((*gm._shape[:-1], 1), dtype=g.dtype)], -1)
        sel = index_select(gm, -1, tensor(idx.reshape(-1))).reshape(*gm._shape[:-1], L, K)
        tw = tensor(w, dtype=g.dtype)
        gm = (sel * tw).sum(-1) if K > 1 else sel.squeeze(-1) * tw.squeeze(-1)
        g = gm.movedim(-1, g.ndim - d + j)
    return g


def _g_avg_of(dims):
    def rule(ctx, g):
        if not ctx.needs[0]:
            return (None,)
        what = f"avg_pool{dims}d"
        a = _bind(_AVGS[dims], ctx)
        shape = tuple(ctx.meta[0][0])
        in_sp, out_sp = shape[-dims:], tuple(g._shape[-dims:])
        ker = ntuple(a["kernel_size"], dims, "kernel_size", what)
        st = a["stride"]
        strd = ker if st is None or (isinstance(st, (list, tuple)) and not st) else None
        strd = strd or ntuple(st, dims, "stride", what)
        pad = ntuple(a["padding"], dims, "padding", what)
        div = a.get("divisor_override")
        cip = a["count_include_pad"]
        mats = [
            _avg_matrix(L, O, k, s, p, cip) for L, O, k, s, p in zip(in_sp, out_sp, ker, strd, pad)
        ]
        if div is not None:  # every window divides by the override: A's entries are 1
            mats = [(m > 0).astype(_np.float32) for m in mats]
            mats[0] = mats[0] / float(div)
        return (_separable_back(g, mats),)

    rule.saves = frozenset()
    return rule


def _g_adaptive_avg_of(dims):
    def rule(ctx, g):
        if not ctx.needs[0]:
            return (None,)
        shape = tuple(ctx.meta[0][0])
        in_sp, out_sp = shape[-dims:], tuple(g._shape[-dims:])
        return (_separable_back(g, [_adaptive_matrix(L, O) for L, O in zip(in_sp, out_sp)]),)

    rule.saves = frozenset()
    return rule


_MAXES = {
    (1, False): max_pool1d,
    (2, False): max_pool2d,
    (3, False): max_pool3d,
    (1, True): adaptive_max_pool1d,
    (2, True): adaptive_max_pool2d,
    (3, True): adaptive_max_pool3d,
}
_AVGS = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}

GRADS = {
    "max_pool1d": _g_max_of(1, False),
    "max_pool2d": _g_max_of(2, False),
    "max_pool3d": _g_max_of(3, False),
    "max_pool1d_with_indices": _g_max_of(1, False),
    "max_pool2d_with_indices": _g_max_of(2, False),
    "max_pool3d_with_indices": _g_max_of(3, False),
    "adaptive_max_pool1d": _g_max_of(1, True),
    "adaptive_max_pool2d": _g_max_of(2, True),
    "adaptive_max_pool3d": _g_max_of(3, True),
    "adaptive_max_pool1d_with_indices": _g_max_of(1, True),
    "adaptive_max_pool2d_with_indices": _g_max_of(2, True),
    "adaptive_max_pool3d_with_indices": _g_max_of(3, True),
    "avg_pool1d": _g_avg_of(1),
    "avg_pool2d": _g_avg_of(2),
    "avg_pool3d": _g_avg_of(3),
    "adaptive_avg_pool1d": _g_adaptive_avg_of(1),
    "adaptive_avg_pool2d": _g_adaptive_avg_of(2),
    "adaptive_avg_pool3d": _g_adaptive_avg_of(3),
}
