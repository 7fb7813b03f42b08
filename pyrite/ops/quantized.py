"""Weight-only quantized linear: a weight stored as int8 or int4 values packed in u32 words with
per-row or per-group scales (and offsets, for int4), multiplied without ever materialising the
float weight where the product has few rows (kernels/quant.py: the layout and the kernels).

    qw = quantize_weight(w, bits=4, group_size=128)   # w (out_features, in_features), float
    y = qlinear(x, qw, bias)                          # ≈ F.linear(x, w, bias)

Quantization (on the host, once, round to nearest even):
  int8, symmetric:   scale = absmax / 127 of the row or group, q = clamp(round(w / scale), -127, 127)
  int4, asymmetric:  scale = (max - min) / 15, offset = min, q = clamp(round((w - min) / scale), 0, 15)
A group whose values are all equal gets scale 1 (int4: q = 0, the offset carries the value; int8
all-zero: q = 0). Non-finite weights are refused.

`QuantizedWeight.from_values` packs integer values and scales made elsewhere (a checkpoint's
GGUF Q8_0 / Q4_0 / Q4_1 blocks: Q4_0's (q - 8)·d is scale d, offset -8·d).

Which kernel (measured thresholds beside the constants): up to QGEMV_MAX_M rows the GEMV kernel
reads the packed weight once for every 8 rows (bandwidth: the weight's bytes); past it the weight
is dequantized into a float32 (out, in) temporary and the product is an ordinary GEMM
(ops/matmul.py), as llama.cpp does for a prompt. The gradient with respect to the input (QLoRA-
style fine-tuning through a frozen quantized layer) goes through the dequantized weight; the
quantized weight itself gets none.
"""

from __future__ import annotations

import math

import numpy as np

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..errors import ShapeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.quant import PER_WORD, dequant, qgemv, stage_fits, values_per_unit
from ..tensor import Tensor
from . import matmul as _matmul
from .core import empty, max_loop_iterations, upload

# Rows a GEMV dispatch covers (its accumulators are registers: 8 rows x a vec4).
QGEMV_ROWS = 8
# Products of at most this many rows take the GEMV kernel (ceil(M / 8) dispatches, each
# reading the packed weight); more rows dequantize into a float32 weight and run a GEMM.
# Measured on the H200 (2026-12-03, `python -m pyrite bench --only quant`, int4 g128 against
# 11008 x 4096, both under pr.compile), GEMV time / dequantize + GEMM time by rows: a first run
# 1: 0.06, 8: 0.13, 16: 0.22, 32: 0.45, 64: 0.85, 128: 1.27 (wgpu-native and Dawn agreed; it
# idled between rows, so parts ran at the GPU's lowered clock: pyrite.bench.warm_gpu); a later
# run with each timing warmed up (wgpu-native): 1: 0.09, 8: 0.20, 16: 0.37, 32: 0.71, 64: 1.28,
# 128: 1.79. So 32, not 64.
QGEMV_MAX_M = 32
# The GEMV's shape by baked rows (1, 2, 4, 8): (lanes sharing one output's dot product, packed
# words a lane loads at a step, output columns a group of lanes computes, steps a loop
# iteration). Consecutive lanes read consecutive words, so the weight's and X's loads are both
# coalesced; X's values, loaded once, serve every column. Measured on the H200 (2026-12-03,
# wgpu-native, `scripts/qgemv_time.py --format F`, a process a format, GPU time by timestamps,
# x 1 x 4096 . 11008 x 4096^T, weights cycling through 400 MB; copy 4,150 GB/s), one row at
# (64, 2, 2, 2): int8 per row 17.8 us (61 % of copy), int8 g128 19.8 (57 %), int4 g128 19.2
# (32 %), int4 g32 19.5 (42 %) — the previous default (32, 1, 4, 1) 33 / 24 / 25 / 32 us. Every
# format lands at 18-20 us whatever its bytes: that floor, not bandwidth, limits the one-row
# product now. 8 rows at (16, 2, 2, 2): 59.6 / 61.4 / 108 / 109 us ((32, 2, 4, 4): 58 / 57 /
# - / 82). 2 and 4 rows are not measured: between the two. On an H100 (2026-12-05,
# wgpu-native, the same script, GPU time; docs/bench/2026-12-05-h100-s28-session-1.txt), 8 rows:
# int8 per row (16, 2, 2, 2) 62.0 us, best (32, 2, 4, 4) 50.7; int4 g128 (16, 2, 2, 2) 106.2,
# best (32, 1, 4, 4) 52.5 — both 8 values a lane's step, so int4 has its own entry
# (QGEMV_SHAPE_INT4). One row: every shape of the first six within 4 % of the default.
# Session 35 (2026-12-06, the H100, wgpu-native, GPU time; scripts/qgemv_probe.py, then
# `scripts/gpu_session.sh qgemv-shapes`, docs/bench/2026-12-06-h100-s35-qgemv-*): int4 g128 one
# row with parts of its work taken out, µs (its weight's copy 11.4):
#   shape          shipped  in-place  no unpack  no math (loads alone)
#   (64, 2, 2, 2)   17.5     18.4      18.6       17.5
#   (32, 2, 4, 4)   20.8     18.2      14.6       11.8
# So at (64, 2, 2, 2) the loads alone take the whole time, which hid that the arithmetic does
# cost at a shape whose loads run at the copy's rate: (32, 2, 4, 4) is bound by its instructions
# (loads 11.8, + the products with X 14.6, + the unpack). The in-place unpack's mask and OR were
# two LOP3s a value in the SASS (its exponent an immediate); with the exponent in a register
# (kernels/quant._inplace) one row at (32, 2, 4, 4) in place runs 16.1 us against the shipped
# 18.3 in the same run (71 % of its copy), so int4's one-row product takes that shape and that
# unpack (QGEMV_UNPACK_INT4); 8 rows stay (their best in that run, 69.5, against 52.4).
QGEMV_SHAPE = {1: (64, 2, 2, 2), 2: (32, 2, 2, 2), 4: (16, 2, 2, 2), 8: (32, 2, 4, 4)}
QGEMV_SHAPE_INT4 = {1: (32, 2, 4, 4), 8: (32, 1, 4, 4)}


# How the GEMV turns packed values into floats (kernels/quant.qgemv `unpack`): "convert"
# (integer-to-float instructions), "magic" (the exponent trick after a shift a value: measured
# as above, 2026-12-03, an earlier run, no faster at one row: int8 per row 18.5 vs 17.9 us) or
# "inplace" (the exponent trick on each value in its place, one fma to undo its place, the
# scale applied once a step and int4's offset through Σx: about 3 instructions a value
# against 8). Measured on the H100 (2026-12-06, wgpu-native, `scripts/qgemv_time.py --unpack
# convert,magic,inplace`, GPU time, 1 x 4096 . 11008 x 4096^T; docs/bench/2026-12-06-h100-s32-
# qgemv-*.json): int4 g128 one row, best shape each, 18.4 / 19.1 / 18.1 us (its weight's copy
# 11.5); 8 rows 52.5 / 53.8 / 62.9; int8 a scale a row one row 20.1 / - / 20.3, 8 rows 50.7 /
# - / 53.6. A third of the instructions bought nothing at one row: the one-row product is not
# bound by its arithmetic (nor by its waves: 344 workgroups ran as fast as 1,376), so convert.
# Nor by a fixed floor: its time grows with the weight (`scripts/qgemv_scale.py`, same day, one
# row, N = 1,376 .. 44,032 at K = 4,096 and 11,008 x 16,384): int4 g128 6.4 / 7.7 / 11.5 /
# 18.6 / 31.8 / 59.6 us (60.3 at K = 16,384), 62-68 % of its weight's copy at every size, about
# 3.0 G values a us; int8 a scale a row 7.1 .. 67.9 us, 90-95 % of its copy from N = 5,504 on,
# 2.65 G values a us. So a value costs int4 what it costs int8, whatever the unpack, the lanes,
# columns or steps (QGEMV_SHAPE's sweep): what bounds it is not found yet. Ruled out on the H100
# (same day, one row, GPU time): the ALU (the in-place unpack's third of the instructions), the
# waves (344 or 1,376 workgroups), a fixed floor (above), X's loads (X made a constant in the
# WGSL: 16.9 -> 16.3 us) and the scales' and offsets' loads (made constants: 17.0 -> 17.2). Four
# words a lane's step instead of two took it from 17.0 to 30.0 us (int8: 21.7 -> 20.8), which
# points at registers a lane (spills or occupancy) rather than memory; unmeasured without a
# profiler that reads the driver's machine code.
QGEMV_UNPACK = "convert"
QGEMV_UNPACK_INT4 = {1: "inplace"}  # int4's own, by baked rows (session 35, above QGEMV_SHAPE)


def qgemv_shape(rows, bits):
    """The GEMV's (lanes, words, columns, steps) for `rows` baked rows of `bits`-bit weights."""
    return (QGEMV_SHAPE_INT4 if bits == 4 else {}).get(rows, QGEMV_SHAPE[rows])


def qgemv_unpack(rows, bits):
    """The GEMV's unpack (kernels/quant.qgemv) for `rows` baked rows of `bits`-bit weights."""
    return (QGEMV_UNPACK_INT4 if bits == 4 else {}).get(rows, QGEMV_UNPACK)


# Stage a workgroup's group scales in workgroup memory (kernels/quant.py `stage`): measured as
# above, no faster (int8 g128 one row at (64, 2, 2, 2): 24.1 us staged, 19.8 not), so off.
QGEMV_STAGE = False
# The lanes' sums with subgroup operations where the device has them (kernels/matmul.lane_sum).
# Unmeasured on a GPU as yet.
QGEMV_SUBGROUPS = True


class QuantizedWeight:
    """A (out_features, in_features) weight stored as `bits`-bit integers (8 or 4) packed in
    u32 words, with float32 scales (and offsets, for 4 bits) per row (`group_size` None) or per
    `group_size` consecutive input features. Device tensors: `qweight` (int32 words, (out,
    padded words a row)), `scales` and `offsets` ((out, groups a row), float32)."""

    __slots__ = ("bits", "group_size", "shape", "qweight", "scales", "offsets")

    def __init__(self, bits, group_size, shape, qweight, scales, offsets=None):
        self.bits = bits
        self.group_size = group_size
        self.shape = tuple(shape)
        self.qweight = qweight
        self.scales = scales
        self.offsets = offsets

    # ---- construction --------------------------------------------------------------------
    @classmethod
    def from_values(cls, values, scales, offsets=None, bits=8, group_size=None):
        """Pack integer `values` (out, in) — int8: -128..127, int4: 0..15 — with `scales` (and,
        for int4, `offsets`) of shape (out,) or (out, groups): W = values·scale (+ offset)."""
        bits, gs = _check_format(bits, group_size)
        q = _host(values, "values")
        if q.ndim != 2:
            raise ShapeError(f"pyrite: quantized weight values must be 2-D, got shape {q.shape}")
        if not np.issubdtype(q.dtype, np.integer):
            raise TypeError(f"pyrite: quantized weight values must be integers, not {q.dtype}")
        lo, hi = (-128, 127) if bits == 8 else (0, 15)
        if q.size and (q.min() < lo or q.max() > hi):
            raise ValueError(
                f"pyrite: int{bits} values must lie in [{lo}, {hi}], got [{q.min()}, {q.max()}]"
            )
        N, K = q.shape
        groups = 1 if gs is None else -(-K // gs)
        s = _groups(_host(scales, "scales"), N, groups, "scales")
        o = None
        if bits == 4:
            if offsets is None:
                raise ValueError("pyrite: int4 weights need offsets (W = q·scale + offset)")
            o = _groups(_host(offsets, "offsets"), N, groups, "offsets")
        elif offsets is not None:
            raise ValueError("pyrite: int8 weights are symmetric (W = q·scale): no offsets")
        return cls._pack(q, s, o, bits, gs)

    @classmethod
    def _pack(cls, q, s, o, bits, gs):
        N, K = q.shape
        vpu = values_per_unit(bits)
        kp = max(1, -(-K // vpu)) * vpu
        pad = np.zeros((N, kp), np.int64)
        pad[:, :K] = q
        if bits == 8:
            words = np.ascontiguousarray(pad.astype(np.int8)).view("<u4")
        else:
            nib = pad.astype(np.uint32).reshape(N, kp // 8, 8) << (
                4 * np.arange(8, dtype=np.uint32)
            )
            words = np.bitwise_or.reduce(nib, axis=2).astype("<u4")
        qweight = upload(words.view(np.int32), D.int32)
        scales = upload(s.astype(np.float32), D.float32)
        offsets = upload(o.astype(np.float32), D.float32) if o is not None else None
        return cls(bits, gs, (N, K), qweight, scales, offsets)

    # ---- use -----------------------------------------------------------------------------
    @property
    def out_features(self):
        return self.shape[0]

    @property
    def in_features(self):
        return self.shape[1]

    @property
    def nbytes(self) -> int:
        """Device bytes of the packed values, scales and offsets."""
        n = self.qweight.numel() * 4 + self.scales.numel() * 4
        return n + (self.offsets.numel() * 4 if self.offsets is not None else 0)

    def dequantize(self) -> Tensor:
        """The weight as a new float32 (out_features, in_features) tensor (one kernel)."""
        N, K = self.shape
        out = empty((N, K), D.float32)
        words = self.qweight.numel()
        if N * K == 0:
            return out
        wr = self.qweight._shape[1]
        groups = self.scales._shape[1]
        bufs = [self.qweight._storage.buffer, self.scales._storage.buffer]
        if self.offsets is not None:
            bufs.append(self.offsets._storage.buffer)
        bufs.append(out._storage.buffer)
        src = dequant(self.bits, self.group_size is not None or self.bits == 4, self._gs())
        backend.current().dispatch(src, bufs, [words, wr, K, groups], grid_for(words))
        return out

    def _gs(self) -> int:
        """The group size the kernels bake: a row's padded length for one group a row."""
        if self.group_size is not None:
            return self.group_size
        return self.qweight._shape[1] * PER_WORD[self.bits]

    def __repr__(self):
        g = "per row" if self.group_size is None else f"group_size={self.group_size}"
        return f"QuantizedWeight(int{self.bits}, shape={self.shape}, {g})"


def _check_format(bits, group_size):
    if bits not in PER_WORD:
        raise ValueError(f"pyrite: quantized weights are int8 or int4 (bits 8 or 4), not {bits!r}")
    if group_size is not None:
        if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
            raise ValueError(
                f"pyrite: group_size must be a positive int or None, not {group_size!r}"
            )
        pw = PER_WORD[bits]
        if group_size % pw:
            raise ValueError(
                f"pyrite: int{bits} group_size must be a multiple of {pw} (the values a 32-bit "
                f"word packs), got {group_size}"
            )
    return bits, group_size


def _host(x, what):
    if isinstance(x, Tensor):
        return x.numpy()
    try:
        return np.asarray(x)
    except Exception as e:  # pragma: no cover - numpy's own message names the problem
        raise TypeError(
            f"pyrite: {what} must be a tensor or an array, not {type(x).__name__}"
        ) from e


def _groups(a, N, groups, what):
    a = np.asarray(a, np.float64)
    if a.ndim == 1 and groups == 1:
        a = a.reshape(N if a.size == N else -1, 1)
    if a.shape != (N, groups):
        raise ShapeError(
            f"pyrite: {what} must have shape ({N}, {groups}) (out_features, groups a row)"
            + (f" or ({N},)" if groups == 1 else "")
            + f", got {a.shape}"
        )
    if not np.isfinite(a).all():
        raise ValueError(f"pyrite: {what} must be finite")
    return a


def quantize_weight(weight, bits=8, group_size=None) -> QuantizedWeight:
    """Quantize a float (out_features, in_features) weight to int8 (symmetric) or int4
    (asymmetric: scale and offset), per row (`group_size` None) or per group of that many input
    features (the module docstring gives the rounding). Reads the weight to the host once."""
    bits, gs = _check_format(bits, group_size)
    if isinstance(weight, Tensor) and not weight.dtype.is_floating_point:
        raise TypeError(
            f"pyrite: quantize_weight: weight must be floating point, not {weight.dtype!r}"
        )
    if isinstance(weight, Tensor) and weight.dtype is not D.float32:
        weight = weight.float()  # (bfloat16 has no numpy dtype: widened exactly, as f16 is)
    w = _host(weight, "weight").astype(np.float64)
    if w.ndim != 2:
        raise ShapeError(
            f"pyrite: quantize_weight: weight must be 2-D (out_features, in_features), got "
            f"shape {w.shape}"
        )
    if not np.isfinite(w).all():
        raise ValueError("pyrite: quantize_weight: the weight holds NaN or infinite values")
    N, K = w.shape
    g = max(K, 1) if gs is None else gs  # (in_features 0: one group of one padded value)
    groups = max(1, -(-K // g))
    # the row padded to whole groups with copies of its last value (they change no min / max)
    wp = np.empty((N, groups * g))
    wp[:, :K] = w
    if K:
        wp[:, K:] = w[:, -1:]
    else:
        wp[:] = 0.0
    blocks = wp.reshape(N, groups, g)
    if bits == 8:
        amax = np.abs(blocks).max(axis=2)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        q = np.clip(np.rint(blocks / scale[..., None].astype(np.float64)), -127, 127)
        off = None
    else:
        lo, hi = blocks.min(axis=2), blocks.max(axis=2)
        scale = np.where(hi > lo, (hi - lo) / 15.0, 1.0).astype(np.float32)
        off = lo.astype(np.float32)
        q = np.clip(np.rint((blocks - off[..., None]) / scale[..., None]), 0, 15)
    q = q.reshape(N, groups * g)[:, :K].astype(np.int64)
    return QuantizedWeight._pack(q, scale, off, bits, gs)


# ---- the product -----------------------------------------------------------------------------
def _check_args(x, qw, bias):
    if not isinstance(qw, QuantizedWeight):
        raise TypeError(
            f"pyrite: qlinear(): weight must be a QuantizedWeight, not {type(qw).__name__}"
        )
    if not isinstance(x, Tensor):
        raise TypeError(f"pyrite: qlinear(): input must be Tensor, not {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise TypeError(f"pyrite: qlinear(): input must be floating point, not {x.dtype!r}")
    N, K = qw.shape
    if x.ndim == 0 or x._shape[-1] != K:
        raise ShapeError(
            f"pyrite: qlinear(): input of shape {tuple(x._shape)} and a quantized weight of shape "
            f"{qw.shape} cannot be multiplied (in_features {K})"
        )
    if bias is not None:
        if not isinstance(bias, Tensor) or not bias.dtype.is_floating_point:
            raise TypeError("pyrite: qlinear(): bias must be a floating-point Tensor or None")
        if tuple(bias._shape) != (N,):
            raise ShapeError(
                f"pyrite: qlinear(): bias must have shape ({N},) (out_features), got "
                f"{tuple(bias._shape)}"
            )


def _gemv_fits(qw, M, dev) -> bool:
    if M > QGEMV_MAX_M or dev.adapter_type == "CPU" and M > QGEMV_ROWS:
        return False
    rms = {_matmul.baked_rows(min(QGEMV_ROWS, M - r0)) for r0 in range(0, M, QGEMV_ROWS)}
    wr = qw.qweight._shape[1]
    shapes = [qgemv_shape(rm, qw.bits) for rm in rms]
    return all(-(-wr // (s[1] * s[0])) + 2 <= max_loop_iterations() for s in shapes)


def _qlinear_raw(input, qweight, bias=None):
    _check_args(input, qweight, bias)
    N, K = qweight.shape
    lead = tuple(input._shape[:-1])
    want = input.dtype
    x = input if want is D.float32 else input.to(D.float32)
    b = bias if bias is None or bias.dtype is D.float32 else bias.to(D.float32)
    M = math.prod(lead)
    dev = backend.current()
    if M == 0 or N == 0:
        out = empty(lead + (N,), D.float32)
    elif K == 0:
        out = empty(lead + (N,), D.float32).zero_() if b is None else b.expand(*lead, N).clone()
    elif _gemv_fits(qweight, M, dev):
        out = _qgemv(x.reshape(M, K), qweight, b, M).reshape(*lead, N)
    else:
        out = _matmul.linear(x, qweight.dequantize(), b)
    return out if want is D.float32 else out.to(want)


def _qgemv(x, qw, b, M):
    """Y (M, N) through kernels/quant.qgemv, QGEMV_ROWS rows a dispatch."""
    N, K = qw.shape
    if x._strides[-1] != 1:
        x = x.contiguous()
    rs = x._strides[0] if M > 1 else 0
    xvec = K % 4 == 0 and x._offset % 4 == 0 and rs % 4 == 0
    bits = qw.bits
    grouped = qw.group_size is not None or bits == 4
    out = empty((M, N), D.float32)
    bufs = [x._storage.buffer, qw.qweight._storage.buffer, qw.scales._storage.buffer]
    if qw.offsets is not None:
        bufs.append(qw.offsets._storage.buffer)
    if b is not None:
        bufs.append(b._storage.buffer)
    bufs.append(out._storage.buffer)
    dev = backend.current()
    for r0 in range(0, M, QGEMV_ROWS):
        m = min(QGEMV_ROWS, M - r0)
        rm = _matmul.baked_rows(m)
        lanes, wpl, cols, unroll = qgemv_shape(rm, bits)
        spv = PER_WORD[bits] * wpl  # values a step
        full = K // spv
        wgs = -(-N // (256 // lanes * cols))
        args = (
            bits,
            grouped,
            qw._gs(),
            rm,
            lanes,
            wpl,
            cols,
            unroll,
            xvec,
            full * spv < K,
            b is not None,
            qgemv_unpack(rm, bits),
            QGEMV_STAGE and grouped and stage_fits(bits, lanes, cols, qw.scales._shape[1]),
            dev.subgroups if QGEMV_SUBGROUPS else 0,
        )
        info = [m, N, K, wgs, x._offset + r0 * rs, rs, full, qw.qweight._shape[1]]
        info += [qw.scales._shape[1]]
        info += [b._offset, b._strides[0]] if b is not None else [0, 0]
        info.append(r0 * N)
        tape = dev._tape
        if m == M and tape is not None and tape.recording:  # (one dispatch: compile/fusion.py
            tape.gemm_next(("qgemv", args), out)  # may fuse a map into its store)
        dev.dispatch(qgemv(*args), bufs, info, fold_grid(wgs))
    return out


def _g_qlinear(ctx, g):
    qw, x_dtype = ctx.args[1], ctx.meta[0][1]
    gx = gb = None
    if ctx.needs[0]:
        gx = _matmul.matmul(g.to(D.float32) if g.dtype is not D.float32 else g, qw.dequantize())
        gx = gx if x_dtype is D.float32 else gx.to(x_dtype)
    if len(ctx.needs) > 2 and ctx.needs[2]:
        gb = g.reshape(-1, g._shape[-1]).sum(0)
    return (gx, None, gb)


_g_qlinear.saves = frozenset()  # (the weight is not a tensor: kept; x's dtype is in meta)
qlinear = _autograd.wrap(_qlinear_raw, "qlinear", _g_qlinear)
qlinear.__doc__ = """qlinear(input, weight, bias=None) -> Tensor

input @ W.T + bias for a QuantizedWeight W (out_features, in_features): input (*, in_features),
any float dtype (computed in float32, returned in input's dtype). Differentiable with respect to
input and bias."""
