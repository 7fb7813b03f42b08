"""interpolate's bilinear, bicubic and lanczos modes on uint8 images, as PyTorch's CPU computes
them (aten/src/ATen/native/cpu/UpSampleKernel.cpp `_compute_index_ranges_int16_weights` and
`basic_loop_aa_horizontal<uint8_t>`; UpSampleKernelAVXAntialias.h gives the same numbers):
separable passes, W first then H (a dim whose size does not change is skipped), each with
int16 fixed-point weights computed here in float64 as PyTorch computes them, an integer sum
started at half a unit, shifted and clamped to [0, 255] — so the pass in between is rounded to
uint8 too, and the result is not the float path's result rounded (bicubic overshoots are
clamped after the first pass). The tables follow torch's code line by line; tests/
test_api_gaps36.py compares the results with torch's, exactly.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..kernels.resample import aa_pass_u8
from ..tensor import Tensor
from .core import upload
from .resample import _aa_filter, device_table


def _scale(i: int, o: int, align: bool, scale) -> float:
    """area_pixel_compute_scale<double>."""
    if align:
        return (i - 1) / (o - 1) if o > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return i / o


def _windows_aa(i, o, sc, interp, filt):
    """_compute_indices_min_size_weights_aa for each output: (xmin, xsize, weights, the largest
    weight)."""
    support = interp * 0.5 * sc if sc >= 1.0 else interp * 0.5
    maxk = int(math.ceil(support)) * 2 + 1
    inv = 1.0 / sc if sc >= 1.0 else 1.0
    center = sc * (np.arange(o, dtype=np.float64) + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)  # (C++ casts truncate)
    xsize = np.minimum((center + support + 0.5).astype(np.int64), i) - xmin
    xsize = np.clip(xsize, 0, maxk)
    j = np.arange(maxk)
    w = filt(((j[None, :] + xmin[:, None]) - center[:, None] + 0.5) * inv)
    w = np.where(j[None, :] < xsize[:, None], w, 0.0)
    total = np.cumsum(w, axis=1)[:, -1:]  # (summed in order, as the C++ loop: not pairwise)
    w = np.where(total != 0.0, w / np.where(total == 0.0, 1.0, total), w)
    w_max = max(0.0, float(np.where(total != 0.0, w, 0.0).max()))
    return xmin, xsize, w, w_max


def _windows(i, o, sc, align, interp, filt):
    """_compute_indices_min_size_weights (antialias=False): the float path's taps, those past
    an edge folded onto the edge's (so the weights of a window cut by the border sum as the
    float path's clamped reads do)."""
    idx = np.arange(o, dtype=np.float64)
    if align:
        real = sc * idx
    else:
        real = sc * (idx + 0.5) - 0.5
        if interp == 2:  # (area_pixel_compute_source_index clamps at 0 unless cubic)
            real = np.where(real < 0.0, 0.0, real)
    # guard_index_and_lambda: floorf, so the index is rounded to float32 first
    index = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), i - 1)
    lam = np.minimum(np.maximum(real - index, 0.0), 1.0)
    support = interp // 2
    lo = index - support + 1
    xmin = np.maximum(lo, 0)
    xsize = np.clip(np.minimum(index + support + 1, i) - xmin, 0, interp)
    w = np.zeros((o, interp))
    rows = np.arange(o)
    slot = np.zeros(o, np.int64)
    w_max = 0.0  # (the largest running sum, as torch's loop takes it)
    for j in range(interp):
        slot = np.where(lo + j <= 0, 0, np.where(lo + j >= i - 1, xsize - 1, slot))
        w[rows, slot] += filt((j + 1 - support) - lam)
        w_max = max(w_max, float(w[rows, slot].max()))
        slot = slot + 1
    return xmin, xsize, w, w_max


def u8_table(i: int, o: int, align: bool, scale, mode: str, antialias: bool):
    """(table words, maxk, fraction bits) of one pass: [xmin (o)] [xsize (o)] [int16 weights
    (o, maxk)], as `_compute_index_ranges_int16_weights`."""
    interp, filt = _aa_filter(mode, -0.5 if antialias else -0.75)  # (Pillow's a, OpenCV's)
    sc = _scale(i, o, align, scale)
    if antialias:
        xmin, xsize, w, w_max = _windows_aa(i, o, sc, interp, filt)
    else:
        xmin, xsize, w, w_max = _windows(i, o, sc, align, interp, filt)
    bits = 0  # the most fraction bits that keep 2·w_max (rounded) under 2**15
    while bits < 22 and int(0.5 + w_max * (1 << (bits + 1))) < (1 << 15):
        bits += 1
    v = w * (1 << bits)
    wi = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int32)
    words = np.concatenate([xmin.astype(np.int32), xsize.astype(np.int32), wi.ravel()])
    return words, w.shape[1], bits


_TABLES: dict = {}  # (sizes, align_corners, scale, mode, antialias) -> (words, window, bits)


def _table_on_device(i, o, align, scale, mode, antialias):
    def make():
        words, maxk, bits = u8_table(i, o, align, scale, mode, antialias)
        return upload(words, D.int32), maxk, bits

    return device_table(_TABLES, (i, o, align, scale, mode, antialias), make)


def resize_u8(x: Tensor, out_sp: tuple, mode: str, antialias: bool, align: bool, scales):
    """(N, C, H, W) uint8 resized to out_sp (H, W)."""
    from .resample import _window_pass

    cur = x
    for axis in (3, 2):  # W first, then H, as PyTorch
        i, o = cur._shape[axis], out_sp[axis - 2]
        if i == o:
            continue
        tab, maxk, bits = _table_on_device(i, o, align, scales[axis - 2], mode, antialias)
        cur = _window_pass(cur, axis, tab, maxk, o, kernel=aa_pass_u8, bits=bits)
    return x.clone() if cur is x else cur
