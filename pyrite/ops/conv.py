"""Convolution with PyTorch's signatures: conv1d/2d/3d (stride, padding incl. 'same'/'valid',
dilation, groups, bias), conv_transpose1d/2d/3d (stride, padding, output_padding, groups,
dilation) and conv_tbc. (F.unfold / F.fold and Tensor.unfold: ops/fold.py.)

A float32 convolution whose weight suits the fast GEMM's tiles is one implicit GEMM
(`_conv_implicit`: kernels/matmul.gemm_fast gathers the column matrix from the input as it loads
each K step, zero padding included, so it is never stored; the bias in its epilogue). Any
other is im2col (kernels/conv.py gathers the column matrix) followed by one batched GEMM
(ops/matmul.gemm) with the groups as a batch dim and the bias added in the GEMM's epilogue; a
1x1 convolution of stride 1 skips im2col (the input already is the column matrix). A transposed
convolution (a convolution's input gradient) is an implicit GEMM too: at stride 1 one, with the
kernel's channel dims exchanged; strided, one per output phase (`_conv_transpose_phases`).
Otherwise it is the GEMM cols = Wᵀ @ x followed by col2im, which adds the bias. Column matrices larger than COLS_MAX_BYTES are built and multiplied in chunks of
batches (and of columns, or of output channels), so one binding never has to hold them whole.
Inputs batched (N, C, ...) or unbatched (C, ...) as torch. The pools live in ops/pool.py.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from .. import dtypes as D
from ..autograd import is_grad_enabled as _autograd_enabled
from ..errors import ArgumentError, DtypeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.conv import IM2COL_PER_THREAD, col2im, im2col
from ..kernels.matmul import INFO_BATCH, gemm_fast
from ..tensor import Tensor
from .core import empty, f32_bits, max_loop_iterations, upload
from .elementwise import as_tensor_arg
from .matmul import CONV_GPU, SPLIT_FILL, _fast_fits, gemm, k_loop_iterations
from .spatial import SpatialError, as_ncdhw, fit_box, from_ncdhw, ntuple, pad3, widened

# nn.functional imported the pools from here before they moved to ops/pool.py: resolved at
# lookup (PEP 562), so that the importer gets pool's functions as installed, gradient rules
# included (names copied at import time would stay the unwrapped ones)
_POOLS = frozenset(
    (
        "adaptive_avg_pool1d",
        "adaptive_avg_pool2d",
        "adaptive_max_pool1d",
        "adaptive_max_pool2d",
        "avg_pool1d",
        "avg_pool2d",
        "max_pool1d",
        "max_pool2d",
    )
)


def __getattr__(name):
    if name in _POOLS:
        from . import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Column matrices above this many bytes are built in chunks (and never above the device's
# binding limit). 256 MiB keeps a 3x3 conv of (8, 512, 128, 128) (cols: 2.4 GB) to ten chunks of
# one batch; each chunk's GEMM still has 512 x 16,384 outputs to fill a GPU.
COLS_MAX_BYTES = 1 << 28
LAST_COL2IM_TILES = None  # the kernel-box tile of the last col2im (tests read it)


def _cols_limit(itemsize: int) -> int:
    """Elements a column-matrix chunk may hold."""
    dev = backend.current()
    return max(1, min(COLS_MAX_BYTES, dev.max_binding) // itemsize)


def _mergeable(t: Tensor, first: int) -> bool:
    """Do dims first.. of t walk memory as one run (so they flatten into one stride)?"""
    # size-1 dims are skipped, but the dims on either side of them must still chain: (8, 1, 5)
    # with strides (1, ., 8) does not flatten (comparing only neighbours missed that)
    dims = [(d, s) for d, s in zip(t._shape[first:], t._strides[first:]) if d != 1]
    return all(s0 == s1 * d1 for (_, s0), (d1, s1) in zip(dims, dims[1:]))


def _flat_spatial(t: Tensor, first: int) -> tuple:
    """(size, stride) of dims first.. of t flattened into one (they must be mergeable)."""
    size = math.prod(t._shape[first:])
    stride = 1
    for d, s in zip(t._shape[first:], t._strides[first:]):
        if d != 1:
            stride = s
    return size, stride


def _weight(w: Tensor, dims: int, what: str) -> Tensor:
    if w.ndim != dims + 2:
        raise SpatialError(
            f"pyrite: {what}: weight must be {dims + 2}D, got shape {tuple(w._shape)}"
        )
    w = w if w.is_contiguous() else w.contiguous()
    sh = w._shape[:2] + (1,) * (3 - dims) + w._shape[2:]
    return w._view(sh, tuple(math.prod(sh[i + 1 :]) for i in range(5)), w._offset)


def _check_common(x, w, bias, stride, padding, dilation, groups, dims, what, transposed):
    x, w = as_tensor_arg(x), as_tensor_arg(w)
    if x.dtype is not w.dtype:
        raise DtypeError(
            f"pyrite: {what}: input ({x.dtype!r}) and weight ({w.dtype!r}) must have the same dtype"
        )
    if x.dtype.is_bool:
        raise DtypeError(f'pyrite: "{what}" not implemented for {x.dtype!r}')
    if x.ndim not in (dims + 1, dims + 2):
        raise SpatialError(
            f"pyrite: expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to "
            f"{what}, but got input of size: {list(x._shape)}"
        )
    g = int(groups)
    if g <= 0:
        raise SpatialError(f"pyrite: {what}: non-positive groups is not supported, got {g}")
    strd = ntuple(stride, dims, "stride", what)
    dil = ntuple(dilation, dims, "dilation", what)
    if any(s <= 0 for s in strd):
        raise SpatialError(f"pyrite: {what}: non-positive stride is not supported, got {strd}")
    if any(d <= 0 for d in dil):
        raise SpatialError(
            f"pyrite: {what}: dilation should be greater than zero, but got {list(dil)}"
        )
    if w.ndim and w._shape[0] == 0:
        raise SpatialError(
            f"pyrite: Given groups={g}, expected weight to be at least 1 at dimension 0, but got "
            f"weight of size {list(w._shape)} instead"
        )
    if bias is not None:
        bias = as_tensor_arg(bias)
        if bias.dtype is not x.dtype:
            raise DtypeError(
                f"pyrite: {what}: input ({x.dtype!r}) and bias ({bias.dtype!r}) must have the "
                "same dtype"
            )
    return x, w, bias, g, strd, dil


def _check_bias(bias, n, w, what, transposed):
    if bias is not None and bias._shape != (n,):
        t = "transposed=1, " if transposed else ""
        raise SpatialError(
            f"pyrite: {what}: given {t}weight of size {list(w._shape)}, expected bias to be "
            f"1-dimensional with {n} elements, but got bias of size {list(bias._shape)} instead"
        )


# ---- convolution -------------------------------------------------------------------------------
def _conv(x, weight, bias, stride, padding, dilation, groups, dims, what):
    x, w_in, bias, g, strd, dil = _check_common(
        x, weight, bias, stride, padding, dilation, groups, dims, what, False
    )
    w = _weight(w_in, dims, what)
    xb, unbatched = as_ncdhw(x, dims, what)
    N, C = xb._shape[:2]
    in_sp = xb._shape[2:]
    O, Cg = w._shape[:2]
    ker = w._shape[2:]
    if O % g:
        raise SpatialError(
            f"pyrite: Given groups={g}, expected weight to be divisible by {g} at dimension 0, "
            f"but got weight of size {list(w_in._shape)} instead"
        )
    if C != Cg * g:
        raise SpatialError(
            f"pyrite: Given groups={g}, weight of size {list(w_in._shape)}, expected "
            f"input{list(xb._shape[:2] + xb._shape[5 - dims :])} to have {Cg * g} channels, "
            f"but got {C} channels instead"
        )
    k_eff = [d * (k - 1) for d, k in zip(pad3(dil, 1), ker)]
    if isinstance(padding, str):
        if padding == "valid":
            pad = (0, 0, 0)
        elif padding == "same":
            if any(s != 1 for s in strd):
                raise SpatialError(
                    f"pyrite: {what}: padding='same' is not supported for strided convolutions"
                )
            pad = tuple(e // 2 for e in k_eff)  # the odd one out goes right, as torch
        else:
            raise ArgumentError(
                f"pyrite: {what}: invalid padding string {padding!r}; expected 'same' or 'valid'"
            )
    else:
        pad = pad3(ntuple(padding, dims, "padding", what), 0)
        if any(p < 0 for p in pad):
            raise SpatialError(f"pyrite: {what}: negative padding is not supported")
    same = padding == "same"
    stride3, dil3 = pad3(strd, 1), pad3(dil, 1)
    out_sp = tuple(
        i if same else (i + 2 * p - e - 1) // s + 1
        for i, p, e, s in zip(in_sp, pad, k_eff, stride3)
    )
    too_small = any(i + 2 * p < e + 1 for i, p, e in zip(in_sp, pad, k_eff))
    if (too_small and not same) or any(o <= 0 for o in out_sp):
        padded = " x ".join(str(i + 2 * p) for i, p in list(zip(in_sp, pad))[3 - dims :])
        ks = " x ".join(str(e + 1) for e in k_eff[3 - dims :])
        raise SpatialError(
            f"pyrite: {what}: calculated padded input size per channel: ({padded}). Kernel "
            f"size: ({ks}). Kernel size can't be greater than actual input size"
        )
    _check_bias(bias, O, w_in, what, False)
    K = math.prod(ker)
    L = math.prod(out_sp)
    CK = Cg * K
    if N * O * L == 0:
        return from_ncdhw(empty((N, O) + out_sp, x.dtype), dims, unbatched)
    out_shape, out_strides = (N, O) + out_sp, (O * L, L) + (out_sp[1] * out_sp[2], out_sp[2], 1)
    # (1, g, O/g, CK) @ (N, g, CK, L) -> (N, g, O/g, L): weight rows are (c, kd, kh, kw) as cols
    a = w._view((1, g, O // g, CK), (0, (O // g) * CK, CK, 1), w._offset)
    direct = K == 1 and all(s == 1 for s in stride3) and not any(pad) and _mergeable(xb, 2)
    if direct:  # a 1x1 convolution: x (N, C, L) is its own column matrix
        _, ls = _flat_spatial(xb, 2)
        sn, sc = xb._strides[:2]
        b = xb._view((N, g, Cg, L), (sn, Cg * sc, sc, ls), xb._offset)
        res = gemm(a, b, _bias_view(bias, N, g, O, L))
        return from_ncdhw(res._view(out_shape, out_strides, 0), dims, unbatched)
    imp = _implicit_plan(xb, w, bias, g, L, CK, O)
    if imp is not None:
        geo = (in_sp, out_sp, stride3, pad, dil3)
        out = empty((N, O) + tuple(out_sp), xb.dtype)
        _conv_implicit(xb, w, bias, g, ker, geo, imp, dims, out)
        return from_ncdhw(out, dims, unbatched)
    limit = _cols_limit(x.dtype.itemsize)
    nb = max(1, min(N, limit // max(1, C * K * L)))
    lc = L if nb > 1 or C * K * L <= limit else max(1, limit // (C * K))
    dev = backend.current()
    src = im2col(x.dtype.wgsl)
    out = None
    for n0 in range(0, N, nb):
        nbc = min(nb, N - n0)
        for l0 in range(0, L, lc):
            lcc = min(lc, L - l0)
            cols = empty((nbc, C * K, lcc), x.dtype)  # rows (c, kd, kh, kw), columns l
            info = [
                cols.numel(),
                C,
                *in_sp,
                *ker,
                *out_sp,
                *stride3,
                *pad,
                *dil3,
                xb._offset,
                *xb._strides,
                n0,
                l0,
                lcc,
            ]
            dev.dispatch(
                src,
                [xb._storage.buffer, cols._storage.buffer],
                info,
                grid_for(-(-cols.numel() // IM2COL_PER_THREAD)),
            )
            b = cols._view((nbc, g, CK, lcc), (C * K * lcc, CK * lcc, lcc, 1), 0)
            res = gemm(a, b, _bias_view(bias, nbc, g, O, lcc))  # (nbc, g, O/g, lcc)
            if nbc == N and lcc == L:
                return from_ncdhw(res._view(out_shape, out_strides, 0), dims, unbatched)
            if out is None:
                out = empty(out_shape, x.dtype)
            dst = out._view((nbc, g, O // g, lcc), (O * L, (O // g) * L, L, 1), n0 * O * L + l0)
            _copy(dst, res)
    return from_ncdhw(out, dims, unbatched)


# A convolution as an implicit GEMM (kernels/matmul.gemm_fast with `conv`): the GEMM's tiles
# gather the column matrix from the input as they load it, so no column matrix is stored (im2col
# writes and reads C·k·L values an image: 9x the input for a 3x3 kernel). It needs f32 (or f16
# where the device has shader-f16: f16 storage, f32 sums) and the fast GEMM's alignment on the
# weight side: O/groups a multiple of the tile's rows, C/groups·k a multiple of its K step, the
# weight at an offset and row length multiple of 4 (the input and the output need none: the
# input is gathered by scalars, the output stored by scalars, columns past L dropped). Tiles
# come from the GEMM's fast tiles on GPUs (ops/matmul.py CONV_GPU), from CONV_CPU on CPU
# adapters. Outputs of fewer than IMPLICIT_MIN_L positions an image keep im2col (a tile of 32
# or more columns would be mostly empty); lavapipe, (4, 256, 7x7) -> 256 (49 positions):
# im2col 100 ms, implicit with 64x64 tiles 59.
IMPLICIT_MIN_L = 32
# CPU adapters: the implicit GEMM's own table (least outputs, tile). Measured on lavapipe (this CI
# box, 2-core llvmpipe), conv2d 3x3 padding 1 with a bias, ms a call, im2col / implicit with tiles
# 128x256 8x16 k8 | 128x128 8x8 k16 | 64x64 8x8 k16 | 64x64 4x4 | 32x32 4x4:
#   (8, 64, 32x32) -> 64:     189 / - | - | 64 | 92 | 113
#   (4, 32, 64x64) -> 64:     192 / - | - | 73 | 99 | 123
#   (8, 128, 16x16) -> 128:    87 / 41 | 53 | 62 | 88 | 111
#   (2, 64, 32x32) -> 128 /2:  18 / 5.9 | 7.3 | 8.5 | 12 | 15
#   (8, 256, 14x14) -> 256:   403 / 156 (128x256)
# Every tile beat im2col; a new kernel box is a new pipeline (0.3-0.7 s to build there), so small
# convolutions (under CONV_CPU_MIN outputs) keep im2col's shared pipelines.
CONV_CPU_MIN = 128 * 128
CONV_CPU = [
    (CONV_CPU_MIN, (128, 256, 8, 16, 8, True)),
    (CONV_CPU_MIN, (64, 64, 8, 8, 16, True)),
    (CONV_CPU_MIN, (32, 32, 4, 4, 16, True)),
]
# True / False forces the implicit GEMM on or off where it can run (tests, benchmarks); None: the
# rule above. IMPLICIT_PARAMS forces its tile (bm, bn, tm, tn, bk, dbuf).
IMPLICIT = None
IMPLICIT_PARAMS = None
LAST_IMPLICIT = None  # the tile of the last implicit convolution, or None after im2col (tests)
# Strided transposed convolutions (so strided convolutions' input gradients) by output phases
# (`_conv_transpose_phases`) on CPU adapters only: None the rule, True / False forced (tests).
# lavapipe: 2-5x faster than col2im (README). H100 (2026-12-05, `pyrite bench --only conv`),
# conv_transpose2d 4x4 stride 2, (8, 512, 32x32) -> 256: 16.4 TFLOP/s by phases against col2im's
# 24.3 (wgpu-native), 13.0 against 26.5 (Dawn): four quarter-size GEMMs of 128 tiles each, and
# each phase's weight gather, where col2im's one GEMM fills the GPU.
PHASES = None


def _implicit_ok(tensors, dev) -> bool:
    """Whether the implicit GEMM reads these operands (None entries skipped): all f32, or all
    f16 where the device has shader-f16."""
    st = tensors[0].dtype.wgsl
    if IMPLICIT is False or st not in ("f32", "f16") or (st == "f16" and not dev.has_f16):
        return False
    return all(t is None or t.dtype.wgsl == st for t in tensors)


def _implicit_tiles(dev, M, outputs, cols=None):
    """The tiles of the device's table (or IMPLICIT_PARAMS) an implicit GEMM with M rows and
    `outputs` outputs in all may take, best first (the K length is checked by `_k_fits`).
    With `cols` (the columns of one product), tiles more than twice as wide come last: more
    than half their columns would be empty (lavapipe, conv2d 3x3 (4, 256, 7x7) -> 256: tile
    128x256 153 ms, 64x64 59; at 12x12 (144 columns) 128x256 was the faster, 10.7 ms to 12.0)."""
    if IMPLICIT_PARAMS is not None:
        table = [(0, IMPLICIT_PARAMS)]
    else:
        table = CONV_CPU if dev.adapter_type == "CPU" else CONV_GPU
    if cols is not None:
        table = sorted(table, key=lambda e: e[1][1] > 2 * cols)  # (stable: the order else)
    for least, params in table:
        bm, bn, tm, tn, bk, _ = params
        if outputs < least and not IMPLICIT:
            continue
        if ((bn // tn) * (bm // tm)) % (bn // 4):
            continue
        # (the column count plays no part: columns are guarded)
        if _fast_fits(dev, params, "n", M, bn, bk):
            yield params


def _k_fits(params, K) -> bool:
    """K a multiple of the tile's K step, its loop within the device's budget."""
    return (
        K > 0
        and K % params[4] == 0
        and k_loop_iterations("fast", params, K) <= (max_loop_iterations())
    )


def _implicit_plan(xb, w, bias, g, L, CK, O, copied=False, allowed=True):
    """The tile (bm, bn, tm, tn, bk, dbuf) of the implicit GEMM for a convolution of xb by the
    (O, CK) weight rows w, or None for im2col (see IMPLICIT_MIN_L). `copied`: the rows will be
    a new contiguous copy of w (a transposed convolution's), so w's offset does not matter.
    `allowed`: False refuses (the caller's own condition), keeping LAST_IMPLICIT true."""
    global LAST_IMPLICIT
    LAST_IMPLICIT = None
    dev = backend.current()
    if not allowed or not _implicit_ok((xb, w, bias), dev):
        return None
    if (w._offset % 4 and not copied) or CK % 4 or (L < IMPLICIT_MIN_L and not IMPLICIT):
        return None
    M = O // g
    for params in _implicit_tiles(dev, M, M * L * xb._shape[0] * g, L):
        if _k_fits(params, CK):
            LAST_IMPLICIT = params
            return params
    return None


def _conv_gemm(params, nb, epi, st, conv):
    """gemm_fast with a convolution's operand (`conv`, see its docstring) for a tile."""
    bm, bn, tm, tn, bk, dbuf = params
    return gemm_fast("n", nb, epi, bm, bn, tm, tn, bk, dbuf, st=st, conv=conv)


def _conv_implicit(xb, a, bias, g, ker, geo, params, dims, out, transposed=False, phase=None):
    """out (N, O, *out_sp) = conv(xb, ·) + bias by gemm_fast's implicit GEMM: per (image,
    group), the (O/g, C/g·k) weight rows `a` (contiguous, a group's after another) times the
    virtual (C/g·k, L) column matrix of the image. `transposed`: a transposed convolution, `a`
    its weight with each group's channel dims exchanged. `phase` = (offset, steps): the outputs
    go to out's positions offset + steps·m (per spatial dim) instead of filling it: one phase of
    a strided transposed convolution (`_conv_transpose_phases`)."""
    in_sp, out_sp, stride3, pad, dil3 = geo
    N, C = xb._shape[:2]
    O = out._shape[1]
    M, Cg, L = O // g, C // g, math.prod(out_sp)
    CK = Cg * math.prod(ker)
    bm, bn = params[:2]
    sxn, sxc = xb._strides[:2]
    # batch dims, outermost first: [size, weight stride, input stride, bias stride]
    bdims = [[N, 0, sxn, 0]]
    sb = bias._strides[0] if bias is not None else 0
    if g > 1:
        bdims.append([g, M * CK, Cg * sxc, M * sb])
    tiles_n, tiles_m = -(-L // bn), M // bm
    total = tiles_n * tiles_m * N * g
    epi = "none" if bias is None else "bias"
    at = INFO_BATCH + 4 * len(bdims)
    src = _conv_gemm(
        params,
        len(bdims),
        epi,
        xb.dtype.wgsl,
        (dims, *ker, at, transposed, False, phase is not None),
    )
    c_off = 0
    if phase is not None:
        c_off = out._offset + sum(o * st for o, st in zip(phase[0], out._strides[2:]))
    info = [M, L, CK, tiles_n, tiles_m, total, a._offset, CK, 1, xb._offset, 0, 0, c_off]
    info += [bias._offset if bias is not None else 0, sb, 0, f32_bits(1.0), f32_bits(1.0)]
    for d in bdims:
        info += d
    info += [sxc, *xb._strides[2:], *in_sp, *out_sp, *stride3, *pad, *dil3]
    if phase is not None:  # (words at + 19, 20: the column batch's, unused here)
        so = out._strides
        info += [0, 0, so[1], *(k * st for k, st in zip(phase[1], so[2:])), so[0]]
        if g > 1:
            info.append(M * so[1])
    bufs = [a._storage.buffer, xb._storage.buffer]
    if bias is not None:
        bufs.append(bias._storage.buffer)
    bufs.append(out._storage.buffer)
    backend.current().dispatch(src, bufs, info, fold_grid(total))
    return out


def _bias_view(bias, N, g, O, L):
    if bias is None:
        return None
    s = bias._strides[0]
    return bias._view((N, g, O // g, L), (0, (O // g) * s, s, 0), bias._offset)


def _copy(dst: Tensor, src: Tensor):
    from .core import run_map

    ct = dst.dtype.ctype
    run_map("x0", (src,), (ct,), dst, ct)


def _no_bool(x, what):
    """torch has no bool convolution (NotImplementedError); `widened` would otherwise compute
    one in a wider dtype and cast the sums back to bool, before _check_common's own check."""
    if isinstance(x, Tensor) and x.dtype.is_bool:
        raise DtypeError(f'pyrite: "{what}" not implemented for {x.dtype!r}')


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution of (N, C_in, L) or (C_in, L) with weight (C_out, C_in/groups, k)."""
    _no_bool(input, "conv1d")
    return widened(_conv, input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution of (N, C_in, H, W) or (C_in, H, W) with weight (C_out, C_in/groups,
    kh, kw); padding an int, a pair, 'valid' or 'same'."""
    _no_bool(input, "conv2d")
    return widened(_conv, input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution of (N, C_in, D, H, W) or (C_in, D, H, W) with weight (C_out,
    C_in/groups, kd, kh, kw)."""
    _no_bool(input, "conv3d")
    return widened(_conv, input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def conv_tbc(input, weight, bias, pad=0):
    """A 1-D convolution over time-major input (T, B, C_in) with weight (k, C_in, C_out) and
    bias (C_out,): (T + 2*pad - k + 1, B, C_out), contiguous (fairseq's layout)."""
    x, w, b = (as_tensor_arg(t) for t in (input, weight, bias))
    if x.ndim != 3:
        raise SpatialError("pyrite: conv_tbc: input must have 3 dims: time, batch, in_channel")
    if w.ndim != 3:
        raise SpatialError(
            "pyrite: conv_tbc: weight tensor must have 3 dims: kernel_width, in_channels, "
            "out_channels."
        )
    if b.ndim != 1:
        raise SpatialError("pyrite: conv_tbc: bias must have 1 dim: out_channels")
    if x._shape[2] != w._shape[1]:
        raise SpatialError(
            "pyrite: conv_tbc: input dim 2 (input channels) is not == dim 1 in the weight tensor"
        )
    if b._shape[0] != w._shape[2]:
        raise SpatialError(
            "pyrite: conv_tbc: bias size must equal dim 2 in the weight tensor (output channels)."
        )
    out = conv1d(x.permute(1, 2, 0), w.permute(2, 1, 0), b, padding=int(pad))  # (B, C_out, T')
    return out.permute(2, 0, 1).contiguous()


# ---- col2im: transposed convolution and fold ---------------------------------------------------
def _col2im(cols: Tensor, out: Tensor, geo: dict, bias=None, n0=0, nb=None, c0=0, cc=None):
    """out[n0:n0+nb, channels of chunk] = col2im(cols) (+ bias). cols is (nb, g*cc*K, L) read
    through its strides; geo has the output/block/kernel geometry (3-tuples) and groups."""
    N, Co = out._shape[:2]
    D, H, W = out._shape[2:]
    g, Cg = geo["groups"], Co // geo["groups"]
    nb = N if nb is None else nb
    cc = Cg if cc is None else cc
    ker, blocks = geo["kernel"], geo["blocks"]
    stride, pad, dil = geo["stride"], geo["padding"], geo["dilation"]
    n = nb * g * cc * D * H * W
    if n == 0:
        return
    steps = [s if d == 1 else 1 for s, d in zip(stride, dil)]
    # tiles of the kernel box: each dispatch's three nested loops stay under the loop budget
    tiles = list(fit_box(tuple(ker), max_loop_iterations()))
    global LAST_COL2IM_TILES
    LAST_COL2IM_TILES = tuple(tiles)
    dev = backend.current()
    src = col2im(out.dtype.wgsl, bias is not None, cols.dtype.wgsl)
    bufs = [cols._storage.buffer, out._storage.buffer]
    if bias is not None:
        bufs.append(bias._storage.buffer)
    first = True
    for kd0 in range(0, ker[0], tiles[0]):
        for kh0 in range(0, ker[1], tiles[1]):
            for kw0 in range(0, ker[2], tiles[2]):
                tile = [
                    kd0,
                    min(ker[0], kd0 + tiles[0]),
                    kh0,
                    min(ker[1], kh0 + tiles[1]),
                    kw0,
                    min(ker[2], kw0 + tiles[2]),
                ]
                info = [
                    n,
                    cc,
                    D,
                    H,
                    W,
                    *ker,
                    *blocks,
                    *stride,
                    *pad,
                    *dil,
                    cols._offset,
                    *cols._strides,
                    *tile,
                    int(not first),
                    g,
                    Cg,
                    c0,
                    n0,
                    bias._offset if bias is not None else 0,
                    bias._strides[0] if bias is not None else 0,
                    Co,
                    *steps,
                ]
                dev.dispatch(src, bufs, info, grid_for(n))
                first = False


def _conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, dims, what):
    if isinstance(padding, str):
        raise TypeError(f"pyrite: {what}(): argument 'padding' must be tuple of ints, not str")
    x, w_in, bias, g, strd, dil = _check_common(
        x, weight, bias, stride, padding, dilation, groups, dims, what, True
    )
    w = _weight(w_in, dims, what)  # (C_in, C_out/g, kd, kh, kw)
    xb, unbatched = as_ncdhw(x, dims, what)
    N, Cin = xb._shape[:2]
    in_sp = xb._shape[2:]
    Cin_w, Cg = w._shape[:2]
    ker = w._shape[2:]
    if Cin_w % g:
        raise SpatialError(
            f"pyrite: Given groups={g}, expected weight to be divisible by {g} at dimension 0, "
            f"but got weight of size {list(w_in._shape)} instead"
        )
    if Cin != Cin_w:
        raise SpatialError(
            f"pyrite: Given transposed=1, weight of size {list(w_in._shape)}, expected "
            f"input{list(xb._shape[:2] + xb._shape[5 - dims :])} to have {Cin_w} channels, "
            f"but got {Cin} channels instead"
        )
    pad = pad3(ntuple(padding, dims, "padding", what), 0)
    opad = pad3(ntuple(output_padding, dims, "output_padding", what), 0)
    stride3, dil3 = pad3(strd, 1), pad3(dil, 1)
    if any(p < 0 for p in pad) or any(p < 0 for p in opad):
        raise SpatialError(f"pyrite: {what}: negative padding is not supported")
    if any(op >= s and op >= d for op, s, d in zip(opad, stride3, dil3)):
        raise SpatialError(
            f"pyrite: {what}: output padding must be smaller than either stride or dilation, "
            f"but got output_padding={list(opad[3 - dims :])}, stride={list(strd)}, "
            f"dilation={list(dil)}"
        )
    out_sp = tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, s, p, d, k, op in zip(in_sp, stride3, pad, dil3, ker, opad)
    )
    if any(o < 0 for o in out_sp):  # (an empty output is torch's answer at exactly 0)
        raise SpatialError(
            f"pyrite: {what}: given input size per channel: "
            f"({' x '.join(map(str, in_sp[3 - dims :]))}). Calculated output size per channel: "
            f"({' x '.join(map(str, out_sp[3 - dims :]))}). Output size is too small"
        )
    Co = Cg * g
    _check_bias(bias, Co, w_in, what, True)
    out = empty((N, Co) + out_sp, x.dtype)
    if out.numel() == 0:
        return from_ncdhw(out, dims, unbatched)
    K = math.prod(ker)
    Cig = Cin // g
    wb = w._strides[0]  # = Cg * K
    # stride 1 (a stride-1 convolution's input gradient): the implicit GEMM. Its weight rows are
    # (group, output channel) by (input channel, k): each group's block with its channel dims
    # exchanged, a copy (weights are small). Measured on lavapipe, (4, 128, 32x32) -> 64, 3x3:
    # 67 ms against col2im's 119. Strided: one implicit GEMM per output phase (a single one over
    # the whole kernel would multiply zeros for all but 1/stride of its offsets per dim:
    # (2, 256, 32x32) -> 128, 4x4 stride 2 took 599 ms that way, against col2im's 226).
    unit = all(s == 1 for s in stride3)
    geo = (in_sp, out_sp, stride3, pad, dil3)
    if _implicit_plan(xb, w, bias, g, math.prod(out_sp), Cig * K, Co, copied=True, allowed=unit):
        a = w._view((g, Cg, Cig, K), (Cig * wb, K, wb, 1), w._offset).contiguous()
        _conv_implicit(xb, a, bias, g, ker, geo, LAST_IMPLICIT, dims, out, transposed=True)
        return from_ncdhw(out, dims, unbatched)
    phases = PHASES if PHASES is not None else backend.current().adapter_type == "CPU"
    if not unit and phases and _conv_transpose_phases(xb, w, bias, g, geo, dims, out, opad):
        return from_ncdhw(out, dims, unbatched)
    if not _mergeable(xb, 2):
        xb = xb.contiguous()
    L, ls = _flat_spatial(xb, 2)
    sn, sc = xb._strides[:2]
    geo = {
        "groups": g,
        "kernel": ker,
        "blocks": in_sp,
        "stride": stride3,
        "padding": pad,
        "dilation": dil3,
    }
    # chunks: batches, then output channels of each group, so that cols fit COLS_MAX_BYTES
    limit = _cols_limit(x.dtype.itemsize)
    per_n = Co * K * L
    nb = max(1, min(N, limit // max(1, per_n)))
    cc = Cg if nb > 1 or per_n <= limit else max(1, limit // (g * K * L))
    for c0 in range(0, Cg, cc):
        ccc = min(cc, Cg - c0)
        # a[0, gi, (c, k), ci] = w[gi*Cig + ci, c0 + c, k]: Wᵀ of the group. Copied contiguous:
        # the GEMM's fast kernel wants A's K unit-stride (H200, Dawn, (1, 512, 64, 64) k4 s2 p1
        # -> 256: the strided view took the general kernel, 1.68 ms; copied, 0.80 ms), and
        # weights are small
        a = w._view((1, g, ccc * K, Cig), (0, Cig * wb, 1, wb), w._offset + c0 * K).contiguous()
        for n0 in range(0, N, nb):
            nbc = min(nb, N - n0)
            b = xb._view((nbc, g, Cig, L), (sn, Cig * sc, sc, ls), xb._offset + n0 * sn)
            # (nbc, g, ccc*K, L); f32 columns for a half output, which is rounded once: f16
            # columns rounded each tap's sum (a bias cancelling the sum left the f16 error of
            # the sum, 80 ulp of the result)
            cols = gemm(a, b, out_dtype=D.float32 if out.dtype is D.float16 else None)
            cv = cols._view((nbc, g * ccc * K, L), (g * ccc * K * L, L, 1), 0)
            _col2im(cv, out, geo, bias, n0, nbc, c0, ccc)
    return from_ncdhw(out, dims, unbatched)


def _phase_taps(r, s, p, d, k, size):
    """One dim of a strided transposed convolution's phase r (outputs r, r + s, ...): the
    kernel offsets that meet an input element there (those with (r + p - kk·d) divisible by s),
    as (taps, output count, the stride-1 convolution it is: padding, dilation). An output
    o = r + s·m meets input m + (r + p - kk·d)/s: with the taps flipped, a convolution of
    stride 1 and dilation d/gcd(s, d) whose padding may be negative."""
    taps = [kk for kk in range(k) if (r + p - kk * d) % s == 0]
    count = max(0, -(-(size - r) // s))
    if not taps:
        return taps, count, 0, 1
    e = d // math.gcd(s, d)
    c0 = (r + p - taps[0] * d) // s
    return taps, count, (len(taps) - 1) * e - c0, e


def _conv_transpose_phases(xb, w, bias, g, geo, dims, out, opad) -> bool:
    """A strided transposed convolution as one implicit GEMM per output phase (the outputs
    sharing their position modulo the stride): each phase is an ordinary stride-1 convolution
    of the input by the kernel offsets that reach it (flipped), written through the output's
    strides. No column matrix, and no multiply of an inserted zero. False (nothing done) where
    a phase does not suit the implicit GEMM: col2im then runs the whole convolution."""
    global LAST_IMPLICIT
    in_sp, out_sp, stride3, pad, dil3 = geo
    Cin, Cg = w._shape[:2]
    Cig = Cin // g
    ker = w._shape[2:]
    phases = []
    for rz in range(stride3[0]):
        for ry in range(stride3[1]):
            for rx in range(stride3[2]):
                r = (rz, ry, rx)
                per = [
                    _phase_taps(r[i], stride3[i], pad[i], dil3[i], ker[i], out_sp[i])
                    for i in range(3)
                ]
                if any(c == 0 for _, c, _, _ in per):
                    continue  # (no output position in this phase)
                J = math.prod(len(t) for t, _, _, _ in per)
                L = math.prod(c for _, c, _, _ in per)
                # (no kernel offset reaching a phase: its outputs are the bias alone)
                if not J or not _implicit_plan(xb, w, bias, g, L, Cig * J, Cg * g, copied=True):
                    LAST_IMPLICIT = None
                    return False
                phases.append((r, per, LAST_IMPLICIT))
    from .scatter import index_select

    w5 = w
    for r, per, params in phases:
        sub = w5
        for i, (taps, _, _, _) in enumerate(per):
            if len(taps) != ker[i] or taps != list(range(ker[i])):
                idx = upload(np.asarray(taps[::-1], dtype=np.int32), D.int32)
                sub = index_select(sub, 2 + i, idx)
            else:
                sub = sub.flip([2 + i])
        jk = tuple(len(t) for t, _, _, _ in per)
        J = math.prod(jk)
        # rows (group, output channel) by (input channel, tap): each group's block transposed
        a = sub.reshape(g, Cig, Cg, J).transpose(1, 2).contiguous()
        pgeo = (
            in_sp,
            tuple(c for _, c, _, _ in per),
            (1, 1, 1),
            tuple(p for _, _, p, _ in per),
            tuple(e for _, _, _, e in per),
        )
        _conv_implicit(xb, a, bias, g, jk, pgeo, params, dims, out, phase=(r, stride3))
    return True


def _transposed(dims, input, weight, bias, stride, padding, output_padding, groups, dilation):
    what = f"conv_transpose{dims}d"
    args = (bias, stride, padding, output_padding, groups, dilation, dims, what)
    _no_bool(input, what)
    return widened(_conv_transpose, input, weight, *args)


def conv_transpose1d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """1-D transposed convolution of (N, C_in, L) or (C_in, L) with weight (C_in,
    C_out/groups, k): L_out = (L - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1."""
    return _transposed(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """2-D transposed convolution of (N, C_in, H, W) or (C_in, H, W) with weight (C_in,
    C_out/groups, kh, kw)."""
    return _transposed(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(
    input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """3-D transposed convolution of (N, C_in, D, H, W) or (C_in, D, H, W) with weight (C_in,
    C_out/groups, kd, kh, kw)."""
    return _transposed(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


__all__ = [
    "conv_tbc",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
]

METHODS: dict = {}


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
# conv: dx is the transposed convolution of g with the same weight (output_padding recovering
# the input's size, a slice for padding='same'; at stride 1 it takes the implicit GEMM); dW is
# a grouped convolution of the input by g with batch and channels swapped (the output's spatial extent as the kernel, stride and
# dilation exchanged): out[c, o, k] = Σ_n Σ_l x[n, c, k·dil + l·stride - pad]·g[n, o, l];
# db = Σ g. conv_transpose: dx is the convolution of g, dW the same swapped convolution with
# g and x exchanged. Both written with the public ops, so double backward records.
import inspect as _inspect  # noqa: E402

_SIGS: dict = {}


def _bind(fn, ctx):
    sig = _SIGS.get(fn)
    if sig is None:
        sig = _SIGS[fn] = _inspect.signature(fn)
    b = sig.bind(*ctx.args, **ctx.kwargs)
    b.apply_defaults()
    return b.arguments


def _convs(dims):
    return (conv1d, conv2d, conv3d)[dims - 1], (
        conv_transpose1d,
        conv_transpose2d,
        conv_transpose3d,
    )[dims - 1]


def _pads(padding, ker, dil, dims, what):
    """(left, right) zero padding per spatial dim ('same' pads the odd one out on the right)."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * dims
        e = [d * (k - 1) for d, k in zip(dil, ker)]
        return [(x // 2, x - x // 2) for x in e]
    return [(p, p) for p in ntuple(padding, dims, "padding", what)]


# A weight gradient's implicit GEMM splits its K (images × output positions) over WGRAD_FILL
# workgroups' worth of tiles on GPUs (ops/matmul.py's SPLIT_FILL: the product has only
# (O/groups)/bm × (C/groups·k)/bn tiles a group), in whole images, at most WGRAD_MAX_SPLITS.
WGRAD_FILL = SPLIT_FILL
WGRAD_MAX_SPLITS = 32
LAST_WGRAD = None  # (tile, splits) of the last implicit weight gradient, or None (tests)
WGRAD_SPLITS = None  # forces the split count where it divides the batch and fits (tests)


def _wgrad_plan(dev, x, go, M, cols, N, OL, outputs):
    """(tile, splits) for `_wgrad_implicit`, or None."""
    for params in _implicit_tiles(dev, M, outputs):
        bm, bn = params[:2]
        tiles = (M // bm) * -(-cols // bn) * (outputs // (M * cols))
        fits = [S for S in range(1, min(N, WGRAD_MAX_SPLITS) + 1) if N % S == 0]
        fits = [S for S in fits if _k_fits(params, N // S * OL)]
        if not fits:
            continue
        if WGRAD_SPLITS in fits:
            return params, WGRAD_SPLITS
        if dev.adapter_type == "CPU":
            return params, fits[0]
        full = [S for S in fits if tiles * S >= WGRAD_FILL]
        return params, full[0] if full else fits[-1]
    return None


def _wgrad_implicit(x, go, ker, stride, pads, dil, groups, dims):
    """d(conv(x, W))/dW as one implicit GEMM a group, or None where it does not apply. Rows:
    output channels o; columns (input channel c, kernel offset k); K: (image n, output position
    l), summed in `splits` chunks of whole images (then added up):
        dW[o, c, k] = Σ_{n, l} g[n, o, l] · x[n, c, l·stride - pad + k·dil]
    It is the convolution `_wgrad` runs, each input channel a batch index of B's columns
    (gemm_fast's `cbatch`), so x is gathered, never copied into a column matrix. g is
    copied as (groups, O/groups, N·L) rows. Padding on the right needs nothing: past the
    input reads 0."""
    global LAST_WGRAD
    LAST_WGRAD = None
    dev = backend.current()
    if _autograd_enabled() or not _implicit_ok((x, go), dev):
        return None  # (create_graph: the public ops below record for a double backward)
    xb, _ = as_ncdhw(x, dims, "conv")
    gb, _ = as_ncdhw(go, dims, "conv")
    N, C = xb._shape[:2]
    O = gb._shape[1]
    Cg, Og = C // groups, O // groups
    osp, ker3 = tuple(gb._shape[2:]), pad3(tuple(ker), 1)
    OL, KK = math.prod(osp), math.prod(ker3)
    cols = Cg * KK
    if cols < IMPLICIT_MIN_L and not IMPLICIT:
        return None
    plan = _wgrad_plan(dev, xb, gb, Og, cols, N, OL, Og * cols * groups * N)
    if plan is None:
        return None
    params, S = plan
    LAST_WGRAD = plan
    bm, bn = params[:2]
    a = gb.reshape(N, groups, Og, OL).permute(1, 2, 0, 3).contiguous()  # (g, Og, N·L)
    KT, chunk = N * OL, N // S * OL
    sxn, sxc = xb._strides[:2]
    bdims = [[S, chunk, N // S * sxn, 0]]
    if groups > 1:
        bdims.append([groups, Og * KT, Cg * sxc, 0])
    tiles_n, tiles_m = -(-cols // bn), Og // bm
    total = tiles_n * tiles_m * S * groups
    at = INFO_BATCH + 4 * len(bdims)
    src = _conv_gemm(
        params, len(bdims), "none", xb.dtype.wgsl, (dims, *osp, at, False, True, False)
    )
    info = [Og, cols, chunk, tiles_n, tiles_m, total, 0, KT, 1, xb._offset, 0, 0, 0, 0, 0, 0]
    info += [f32_bits(1.0), f32_bits(1.0)]
    for d in bdims:
        info += d
    # the convolution of x by g's output box: positions are kernel offsets (stride: dil),
    # "offsets" output positions (dilation: stride), the images its channels
    left = pad3(tuple(p[0] for p in pads), 0)
    info += [sxn, *xb._strides[2:], *xb._shape[2:], *ker3, *pad3(tuple(dil), 1), *left]
    info += [*pad3(tuple(stride), 1), KK, sxc]
    part = empty((S, groups, Og, cols), xb.dtype)  # (f16: partials rounded, summed in f32)
    dev.dispatch(
        src, [a._storage.buffer, xb._storage.buffer, part._storage.buffer], info, fold_grid(total)
    )
    dw = part[0] if S == 1 else part.to(D.float32).sum(0).to(xb.dtype)
    return dw.reshape((O, Cg) + tuple(ker))


def _wgrad(x, go, ker, stride, pads, dil, groups, dims):
    """d(conv(x, W))/dW for batched x (N, C, *sp), g (N, O, *osp): (O, C/groups, *ker)."""
    from .pad import pad as _pad

    dw = _wgrad_implicit(x, go, ker, stride, pads, dil, groups, dims)
    if dw is not None:
        return dw

    conv, _ = _convs(dims)
    N, C = x._shape[:2]
    O = go._shape[1]
    Cg, Og = C // groups, O // groups
    left = [p[0] for p in pads]
    extra = [p[1] - p[0] for p in pads]
    if any(extra):
        flat = []
        for e in reversed(extra):
            flat += [0, e]
        x = _pad(x, flat)
    sp, osp = tuple(x._shape[2:]), tuple(go._shape[2:])
    rest = tuple(range(3, 3 + dims))
    xs = x.reshape(N, groups, Cg, *sp).permute(2, 1, 0, *rest).reshape(Cg, groups * N, *sp)
    ws = go.reshape(N, groups, Og, *osp).permute(1, 2, 0, *rest).reshape(groups * Og, N, *osp)
    r = conv(
        xs, ws, None, stride=tuple(dil), padding=tuple(left), dilation=tuple(stride), groups=groups
    )
    r = r[(slice(None), slice(None)) + tuple(slice(0, k) for k in ker)]
    return r.transpose(0, 1)


def _batched(t, dims):
    return t.unsqueeze(0) if t.ndim == dims + 1 else t


def _g_conv_of(dims):
    def rule(ctx, g):
        conv, convT = _convs(dims)
        what = f"conv{dims}d"
        a = _bind(conv, ctx)
        x, w = a["input"], a["weight"]
        unbatched = len(ctx.meta[0][0]) == dims + 1
        in_sp = tuple(ctx.meta[0][0][-dims:])
        ker = tuple(ctx.meta[1][0][2:])
        stride = ntuple(a["stride"], dims, "stride", what)
        dil = ntuple(a["dilation"], dims, "dilation", what)
        groups = a["groups"]
        pads = _pads(a["padding"], ker, dil, dims, what)
        go = _batched(g, dims)
        gx = gw = gb = None
        if ctx.needs[0]:
            out_sp = go._shape[2:]
            left = tuple(p[0] for p in pads)
            size0 = [
                (o - 1) * s - 2 * p + d * (k - 1) + 1
                for o, s, p, d, k in zip(out_sp, stride, left, dil, ker)
            ]
            op = tuple(max(0, i - s0) for i, s0 in zip(in_sp, size0))
            gx = convT(go, w, None, stride, left, op, groups, dil)
            if any(s0 > i for s0, i in zip(size0, in_sp)):
                gx = gx[(slice(None), slice(None)) + tuple(slice(0, i) for i in in_sp)]
            if unbatched:
                gx = gx.squeeze(0)
        if ctx.needs[1]:
            gw = _wgrad(_batched(x, dims), go, ker, stride, pads, dil, groups, dims)
        if len(ctx.needs) > 2 and ctx.needs[2]:
            gb = go.sum([0, *range(2, 2 + dims)])
        return gx, gw, gb

    rule.saves = frozenset((0, 1))
    return rule


def _g_conv_transpose_of(dims):
    def rule(ctx, g):
        conv, convT = _convs(dims)
        what = f"conv_transpose{dims}d"
        a = _bind(convT, ctx)
        x, w = a["input"], a["weight"]
        unbatched = len(ctx.meta[0][0]) == dims + 1
        ker = tuple(ctx.meta[1][0][2:])
        stride = ntuple(a["stride"], dims, "stride", what)
        dil = ntuple(a["dilation"], dims, "dilation", what)
        pad = ntuple(a["padding"], dims, "padding", what)
        groups = a["groups"]
        go = _batched(g, dims)
        gx = gw = gb = None
        if ctx.needs[0]:
            gx = conv(go, w, None, stride, pad, dil, groups)
            in_sp = tuple(ctx.meta[0][0][-dims:])
            if tuple(gx._shape[2:]) != in_sp:  # output_padding >= stride (allowed below dilation)
                gx = gx[(slice(None), slice(None)) + tuple(slice(0, i) for i in in_sp)]
            if unbatched:
                gx = gx.squeeze(0)
        if ctx.needs[1]:
            # the weight (C_in, C_out/groups, *k) of y = convT(x) is the weight gradient of
            # the convolution taking g (as input) to x (as its output gradient)
            gw = _wgrad(
                go, _batched(x, dims), ker, stride, [(p, p) for p in pad], dil, groups, dims
            )
        if len(ctx.needs) > 2 and ctx.needs[2]:
            gb = go.sum([0, *range(2, 2 + dims)])
        return gx, gw, gb

    rule.saves = frozenset((0, 1))
    return rule


GRADS = {
    "conv1d": _g_conv_of(1),
    "conv2d": _g_conv_of(2),
    "conv3d": _g_conv_of(3),
    "conv_transpose1d": _g_conv_transpose_of(1),
    "conv_transpose2d": _g_conv_transpose_of(2),
    "conv_transpose3d": _g_conv_transpose_of(3),
}
