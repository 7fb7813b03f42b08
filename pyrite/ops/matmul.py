"""Matrix products: matmul / @ (PyTorch's 1-D, 2-D and batch-broadcast rules), mm, bmm, mv, dot,
vdot, inner, outer/ger, addmm, addmv, baddbmm and linear (bias in the GEMM's epilogue); einsum,
built on the same `gemm`, is in ops/einsum.py.

Every product is one call of `gemm`, which reads both operands through their strides (no copy for
transposed, sliced or broadcast operands), coalesces the batch dims and picks a kernel variant
(kernels/matmul.py) by device type and shape: the contiguous-aligned `gemm_fast` from the
`FAST_GPU` / `FAST_CPU` tables when the operands' layout and the tile allow it, else the general
strided, edge-guarded kernels (`_choose`). int32 accumulates in i32 (wrapping, as PyTorch's
int64 would not: pyrite stores int64 as int32); float16 storage computes in f32.
"""

from __future__ import annotations

import contextvars
import functools
import math

from .. import backend
from .. import dtypes as D
from ..dtypes import float32
from ..errors import DtypeError, ShapeError
from ..kernels.common import bake, fold_grid, grid_for
from ..kernels.matmul import (
    GEMV_LANES,
    GEMVN_COLS,
    INFO_BATCH,
    TILE,
    fast_smem_bytes,
    fast_valid,
    gemm_direct,
    gemm_fast,
    gemm_tiled,
    gemv_cols,
    gemv_rows,
    splitk_sum,
)
from ..tensor import Tensor, contiguous_strides
from . import fallback as _fallback
from .core import PlanCache, broadcast_shapes, coalesce, empty, f32_bits, max_loop_iterations
from .elementwise import as_tensor_arg
from .views import _view_strides

# Variant choice, measured on lavapipe (this CI box: llvmpipe, 2 cores), f32, GFLOP/s:
#   1024^3:          tiled 64x64 (barriers) 7.39 | direct 8x8 inv, 4x4 regs 4.38 | direct 16x4 2.67
#                    (peers: numpy ~150, tinygrad WebGPU 1.05, a reference no-barrier kernel 1.5)
#   256^3:           tiled 2.53 | direct 8x8 1.96
#   128^3:           tiled 2.69 | direct 8x8 2.42
#   64x512x64:       tiled 1.42 | direct 8x8 4.90   (one 64x64 tile: one workgroup, one core busy)
#   32x256x32:       tiled 0.41 | direct 8x8 0.81
# So, barriers notwithstanding, the tiled kernel wins on lavapipe once there are enough tiles to
# feed the cores; below 4 tiles (or M, N under half a tile) the direct kernel goes. The same rule
# is used on GPUs (the H200 figures in ../shared/gpu.md are for the tiled spelling; a GPU with
# ~100 SMs would want more tiles before the tiled kernel pays, which is not yet measured).
MIN_TILES = 4


def _check_dtypes(a: Tensor, b: Tensor, what: str):
    if a.dtype is not b.dtype:
        raise DtypeError(
            f"pyrite: {what}: expected both operands to have the same dtype, but got "
            f"{a.dtype!r} and {b.dtype!r}"
        )
    if a.dtype.is_bool:
        raise DtypeError(f"pyrite: {what} is not implemented for {a.dtype!r}")


def _check_added(a: Tensor, added, what: str):
    """The tensor added to a product (addmm's input, linear's bias) in the product's dtype:
    torch refuses another ("self and mat2 must have the same dtype"); a cast would silently
    truncate a float bias to an integer product's dtype, or round it to a half one's."""
    for c in added:
        if c.dtype is not a.dtype:
            raise DtypeError(
                f"pyrite: {what}: the added tensor ({c.dtype!r}) and the product's operands "
                f"({a.dtype!r}) must have the same dtype"
            )


def _layout_a(st_m, st_k, M, K):
    if st_k == 1 or K == 1:
        return "k"
    if st_m == 1 or M == 1:
        return "m"
    return "s"


def _layout_b(st_k, st_n, K, N):
    if st_n == 1 or N == 1:
        return "n"
    if st_k == 1 or K == 1:
        return "k"
    return "s"


# Fast-path table for GPUs (the contiguous-aligned kernel, kernels/matmul.py `gemm_fast`).
# Rows are (least M*N*batch outputs, (bm, bn, tm, tn, bk, dbuf)); the first row whose bound is
# met and whose tile divides the shape (M % bm, N % bn, K % bk) is used; when none fits, the
# general edge-guarded kernels below run. Re-measure with
#   PYRITE_BACKEND=dawn|wgpu python3 -m pyrite.bench.gemm_variants --json g.json
# Measured on the H200, 2026-11-29, f32 TFLOP/s (Dawn / wgpu-native), 11 variants compared:
#   128x128 8x8 k16: 1024^3 12.5/11.4, 2048^3 33.7/32.3, 4096^3 37.4/34.8,
#                    8192x4096 @ (4096x4096).T 36.7/35.2  (best at >= 2048^2 outputs)
#   64x64 8x8 k16 db: 1024^3 19.3/18.9, 2048^3 29.6/17.6  (best below: 128-tiles leave SMs idle)
#   general tiled 64x64: 6.3/5.6, 2.9/3.2, 10.3/10.0;  cuBLAS f32 (no TF32): 49-51.
# Small products (issue 9), GPU time by timestamp queries on the H200 through wgpu-native,
# 2026-12-01 (`scripts/gpu_time.py`; Dawn quantizes its timestamps to 65.5 µs), F.linear x (M, K)
# @ w.T + b, µs: 64x64 8x8 (64 invocations) / 64x64 4x4 (256) / 32x32 4x4 / 16x64 4x4:
#   128x768 . 768^2:       63.8 / 37.5 / 33.4 / 35.6   (split K in 4: 30.1 / 21.1 / 22.2 / 23.2)
#   128x768 . 3072x768:    64.0 / 37.9 / 40.9 / 44.4   (split in 4: 48.4 / 37.4 / 46.0 / 47.6)
#   128x3072 . 768x3072:  224.0 / 128.9 / 112.8 / 120.1 (split in 8: 45.3 / 42.8 / 51.5 / 54.5)
#   512x768 . 768^2:       64.1 / 38.0 / 40.8 / 45.5
# Two warps a workgroup hide too little latency when each SM holds one or two workgroups: the
# 256-invocation 4x4 tile is the best below SMALL_OUTPUTS outputs, and the smaller tiles serve
# M or N that 64 does not divide. Too few tiles to fill the GPU take a split of K (SPLIT_FILL).
# 2026-12-05, a lent H100, after the fast tiles were built without run-time index clamps on
# wgpu-native (kernels/common.TRUSTED), GPU time of F.linear by timestamps, every tile forced
# (`scripts/gemm_tile_ab.py`, docs/bench/2026-12-05-h100-gemm-tiles-*.json), µs, wgpu-native /
# Dawn (Dawn's timestamps unrounded: backend/select.py DAWN_TOGGLES):
#   shape (M x K . N x K^T)  128x128 8x8 k16 (the old rule)  128x128 16x8 k8 db  64x64 db  64x64
#   4096^3                    4,239 / 3,675                 3,385 / 3,627       3,616 / 4,543  3,764 / 3,752
#   2048^3 (low clock: below)  2,708 / 2,515                  441 / 477         2,644 / 3,347  2,825 / 2,808
#   4096x768 . 3072           611 / 534                     503 / 532           543 / 678      549 / 544
#   4096x768 . 2304           506 / 466                     471 / 494           411 / 514      419 / 416
#   4096x3072 . 768           817 / 693                     644 / 683           523 / 658      654 / 649
#   4096x768 . 768            193 / -                       168 / -             145 / -        163 / -
# The 16x8 tile (128 invocations, 128 sums each) is the fastest big tile on both, but with 2 of
# its workgroups an SM (132 SMs) it leaves a third of the GPU idle in the last wave at 576 or 192
# tiles, where the 64x64 tiles win: it is taken when its tiles fill their waves to WAVE_FILL
# (GPU_SLOTS workgroups at once; WebGPU does not tell the SM count, so the H100's and H200's).
# The 2,500-3,400 µs at 2048^3 (and the 489-1,263 µs of the last four tiles at 1024^3, not
# shown) are the GPU at its idle clock, not the tiles: 5.7x slow, the ratio of the 1,980 and
# 345 MHz clocks (README, "The GPU's clock"), and the slow tiles are those timed in a row at the
# end of the 1024^3 run and the start of the 2048^3 one, after the short 1024^3 kernels let the
# clock drop. scripts/gpu_time.kernel_times now warms the GPU before every timing. The 16x8
# tile's 441 there was timed at the high clock (the old tile ran 530 µs on the H200,
# 2026-11-29). Below the big tile, Dawn runs the single-buffered 64x64 faster and wgpu-native
# the double-buffered.
# Later the same night (H100, GPU time, wgpu-native / Dawn, `scripts/gemm_small_ab.sh`,
# docs/bench/2026-12-05-h100-s28-{small,tiles96}-*.json), two more kinds of tile, µs:
#   K groups (gemm_fast's kg: 4 groups of 64 invocations on a 32x32 tile, K steps of 32), below
#   SMALL_OUTPUTS, against what the rules and the shipped tune tables took:
#     128x768 . 768^2          21.5 -> 16.2   /  42.5 -> 20.3
#     128x768 . 2304x768       36.4 -> 34.5   /  42.8 -> 39.9
#     128x768 . 3072x768       36.6 -> 34.4   /  42.9 -> 39.9
#     512x768 . 768^2          36.5 -> 34.4   /  42.9 -> 39.7
#     128x3072 . 768x3072      40.4 -> 43.3   /  53.4 -> 50.2  (the rule's split K: 2 dispatches)
#     512x768 . 3072x768 (1.5M outputs: the 64x64 tiles stay)  96.6 -> 117.9 / 97.8 -> 128.5
#   so KG_TILE is taken below SMALL_OUTPUTS where K >= KG_MIN_K (the Ks measured; shorter
#   products keep the other tiles). 2 or 8 groups, 32x64 and 16x64 tiles were slower. Not for a
#   transposed A (layouts "mk", "mn": a weight's gradient): unmeasured there, and the K-group
#   tile does not carry the bias gradient's row sums (gemm_fast's `rows`).
#   96 columns (128x96, 8x12 an invocation: BERT's 768, 2304 and 3072 outputs fill ~97 % of
#   their waves where 128-wide tiles fill 73 %), single-buffered, against the rule:
#     4096x768 . 768^2        143.2 -> 137.5  / 165.5 -> 143.4
#     4096x768 . 2304x768     413.0 -> 391.4  / 420.8 -> 368.7
#     4096x768 . 3072x768     504.1 -> 514.5  / 536.6 -> 482.8
#     4096x3072 . 768x3072    521.3 -> 545.0  / 655.8 -> 554.3
#   Dawn gains 10-15 % on every shape and takes it (before the big tile) wherever N divides by
#   96 and its tiles fill their waves as the big tile's must; on wgpu-native it is within 5 %
#   either way, so the rule stays.
# 2026-12-06, the H100, wgpu-native, GPU time (`scripts/gpu_session.sh small2`,
# docs/bench/2026-12-06-h100-s29-small2-db2.json), K-group tiles with the deep prefetch
# (gemm_fast's dbuf = 2: loads two K steps ahead) against KG_TILE, µs (torch CUDA's F.linear):
#   shape                    KG_TILE   32x32 k16 kg2 db2   32x32 k32 kg4 db2   (torch)
#   128x768 . 2304x768         34.6         32.5               35.6            (31.9)
#   128x768 . 3072x768         34.6         32.6               35.8            (29.1)
#   512x768 . 768^2            34.5         32.5               35.7            (34.9)
#   128x768 . 768^2            16.1         21.1               17.2            (28.9)
#   128x3072 . 768x3072        43.3         60.4               47.4            (58.1)
# so KG2_TILE takes the K-group products of KG2_MIN_OUTPUTS outputs and more whose K is at most
# KG2_MAX_K, on wgpu-native (Dawn unmeasured: its table keeps KG_TILE). One run; which of its
# three changes (K step 16, 2 groups, the deep prefetch) gains was not separated.
# 2026-12-06, session 35, the H100, GPU time (`scripts/gpu_session.sh gemm-dbu`,
# docs/bench/2026-12-06-h100-s35-gemm-dbu-*.json): the big tile with gemm_fast's unconditional
# prefetch (dbuf = 3) against the guarded one (dbuf = True), µs, wgpu-native / Dawn:
#   4096^3 (F.linear)          3,391 -> 3,191  /  3,628 -> 3,399      (torch CUDA 2,710 / 2,692)
#   4096^3 (a @ b)             3,291 -> 3,123  /  -                   (2,711)
#   2048^3 (a @ b)               427 ->   411  /  -                   (353)
#   4096x768 . 3072x768T         504 ->   475  /    533 ->   498      (395 / 392)
#   4096x3072 . 768x3072T        643 ->   611  /    684 ->   656      (the 64x64 tile's 522 stays)
# Its SASS lost 37 of its 109 MOVs a K step, and 11 registers (R227 -> R216). The 64x64 8x8
# tile did not gain: 3,626 -> 5,344 at 4096^3, 542 -> 727 at 4096x768 . 3072x768T (unexamined),
# so it keeps dbuf = True.
# 2026-12-06, session 38, the lent H200, wgpu-native, GPU time (`scripts/gpu_session.sh big-rule
# bert-tile2`, docs/bench/2026-12-06-h200-s38-*): 256 invocations of 8x8 sums in K steps of 16
# with the unconditional prefetch (R140 in its SASS against the 16x8 tile's R216, so still one
# workgroup an SM: 8 warps either way) as the big tile, also taken from BIG_MIN_TILES tiles on,
# against the 16x8 tile under the wave-fill rule alone, µs (torch CUDA's F.linear):
#   4096^3                  3,198 -> 3,242   (2,709)    (H100, session 37: 3,191 -> 3,161)
#   4096x768 . 3072x768T      471 ->   459   (396)      (H100: 475 -> 461)
#   4096x768 . 2304x768T      412 ->   386   (384)      576 tiles: the 64x64 tile before
#   2048x768 . 3072x768T      279 ->   236   (231)      384 tiles
#   8192x768 . 768x768T       281 ->   246   (233)      384
#   2560x768 . 2560x768T      323 ->   309   (264)      400
#   2560x768 . 1920x768T      234 ->   228   (214)      300
#   2048x768 . 2304x768T      231 ->   235   (194)      288
#   1024x4096 . 4096x4096T    811 ->   824   (705)      256 (both the big tile)
#   (192 tiles, 4096x768 . 768x768T and 3072x1024 . 1024x1024T: the 64x64 tile either way)
# and BERT-base's batch-32 forward 22.47 -> 22.06 ms (three alternations each, outputs equal).
# Session 37's A/B of this tile in BERT (22.64 against 20.74 ms on the H100) swapped BIG_TILE
# alone, not the tables that hold it: its "candidate" ran the 16x8 tile with no wave-fill test
# (QKV's 576 tiles 468 µs, the output projection's 192 tiles 164 µs), never this tile. Counting
# its waves in 132 slots (one workgroup an SM) instead of BIG_MIN_TILES loses the 300, 400 and
# 288-tile gains. Dawn keeps the 16x8 tile (BIG_TILE_16X8): this one is unmeasured there.
SMALL_OUTPUTS = 1024 * 1024
BIG_TILE = (128, 128, 8, 8, 16, 3)
BIG_TILE_16X8 = (128, 128, 16, 8, 8, 3)
KG_TILE = (32, 32, 4, 4, 32, True, 4)
KG_MIN_K = 768
KG2_TILE = (32, 32, 4, 4, 16, 2, 2)
KG2_MIN_OUTPUTS = 256 * 1024
KG2_MAX_K = 1024
WIDE96_TILE = (128, 96, 8, 12, 16, False)
GPU_SLOTS = 264
WAVE_FILL = 0.85
# the big tile also where its waves fill less than WAVE_FILL, at this many tiles or more (0: never)
BIG_MIN_TILES = GPU_SLOTS
FAST_GPU = [
    (SMALL_OUTPUTS, BIG_TILE),
    (SMALL_OUTPUTS, (64, 64, 8, 8, 16, True)),
    (KG2_MIN_OUTPUTS, KG2_TILE),
    (0, KG_TILE),
    (0, (64, 64, 4, 4, 16, True)),
    (0, (32, 32, 4, 4, 16, True)),
    (0, (16, 64, 4, 4, 16, True)),
]
FAST_GPU_DAWN = [
    (SMALL_OUTPUTS, WIDE96_TILE),
    (SMALL_OUTPUTS, BIG_TILE_16X8),
    (SMALL_OUTPUTS, (64, 64, 8, 8, 16, False)),
    *(row for row in FAST_GPU[2:] if row[1] != KG2_TILE),
]
# the convolutions' implicit GEMM keeps the tiles it was measured with (ops/conv.py), none of
# the K-group or deep-prefetch ones (gemm_fast builds neither with `conv`: the K-group rows here
# made every GPU convolution of fewer than SMALL_OUTPUTS outputs fail, 2026-12-06)
CONV_GPU = [
    (2048 * 2048, (128, 128, 8, 8, 16, False)),
    (SMALL_OUTPUTS, (64, 64, 8, 8, 16, True)),
    *(row for row in FAST_GPU[2:] if len(row[1]) == 6 and row[1][5] != 2),
]


def wave_fill(tiles: int) -> float:
    """The busy share of the GPU's workgroup slots over the waves `tiles` big tiles take."""
    return tiles / (-(-tiles // GPU_SLOTS) * GPU_SLOTS)


# Split K (`_choose_split`) on GPUs when one fast product has fewer than SPLIT_FILL workgroups:
# S (a power of two up to SPLIT_MAX) is the least giving >= SPLIT_FILL, with K-chunks of at
# least SPLIT_MIN_CHUNK. Measured above: 24 tiles of 128x768 . 768^2 gain 1.8x from S = 4 (96
# workgroups), and S = 8 is no better; 96 tiles (512x768 . 768^2, 128x768 . 3072x768) gain
# nothing from a split; 24 tiles with K = 3072 gain 3x from S = 8 (42.8 µs; S = 4: 44.1).
# But a split costs the host a second dispatch and a second plan lookup (~30 µs a product on the
# H200's host), and eager small products are host-bound there: back to back (`scripts/split_ab.py`,
# wgpu-native / Dawn, µs a call) 128x768 . 768^2 ran 57 / 54 unsplit and 86 / 73 split, while
# 128x3072 . 768x3072 ran 139 / 144 unsplit and 95 / 85 split. So only K >= SPLIT_MIN_K splits
# (under a replayed step, issue 7, the host cost goes and this threshold should be re-measured).
SPLIT_FILL = 96
SPLIT_MAX = 16
SPLIT_MIN_CHUNK = 128
SPLIT_MIN_K = 2048
# Under pr.compile's replay the second dispatch costs no host time, so a split is taken from
# K = 512 (K-chunks of >= SPLIT_MIN_CHUNK): the GPU-time figures above decide alone.
SPLIT_MIN_K_REPLAY = 512
# On CPU adapters (lavapipe), measured with gemm_variants on this CI box (2-core llvmpipe,
# f32, TFLOP/s): 512^3 general tiled 0.007 | fast 64x64 8x8 k16 0.010 | 128x128 8x8 k8 db 0.011 |
# 128x128 8x16 k8 db 0.013 | 128x256 8x16 k8 db 0.014; 256^3: tiled 0.004 | 128x256 0.007.
# A fast pipeline costs 0.3-0.7 s to build there, so it is taken only for products big enough
# to repay that (>= 512x512 outputs); smaller ones keep the general rule below.
FAST_CPU = [
    (512 * 512, (128, 256, 8, 16, 8, True)),
    (512 * 512, (128, 128, 8, 16, 8, True)),
]

# Products of at most this many rows with a K-contiguous B (x @ w.T: batch-1 inference, decode)
# take `gemv_rows` on GPUs. Measured on the H200, 2026-12-01 (`python -m pyrite.bench.gemm_small`,
# µs a call with the host's share, wgpu-native / Dawn), F.linear 768 -> 768: M = 1: GEMV 46 / 42,
# the direct kernel (64x1 invocations, 1x4 outputs each) 213 / 203; M = 8: GEMV 47 / 45, direct
# (8x8, 4x4) 141 / 242. GPU time alone (timestamps, wgpu-native): 1x768 . 768^2 7.3 µs,
# 8x768 . 3072x768 12.3 µs. From 16 rows the fast tiles below apply. x @ w with w (K, N)
# row-major (`gemv_cols`), GPU time, wgpu-native: 1x768 @ 768^2 10.7 µs (the direct kernels 155 /
# 165), 8x768 @ 768x2304 15.3 (156 / 168), 1x4096 @ 4096^2 70.8 (1,660 / 1,794): ~0.95 TB/s of w.
GEMV_MAX_M = 8
# The GEMV's lanes sum with subgroup operations where the device has them (kernels/matmul.
# lane_sum: one barrier where the tree takes six). Unmeasured on a GPU as yet.
GEMV_SUBGROUPS = True

# f16 products on the fast tiles with f16 arithmetic (gemm_fast's `acc16`: packed f16 fmas, f16
# sums over each K step, f32 across steps), set by torch's switch for it,
# `pr.backends.cuda.matmul.allow_fp16_accumulation` (off by default, as in torch). The other
# variants (GEMV, the direct and tiled kernels, split K) keep f32 sums.
F16_ACCUMULATION = False
# With f16 arithmetic the big tile's place goes to 8x4 sums an invocation (512 of them) in K steps
# of 32 with the unconditional prefetch (f16 tiles: 33 KB of workgroup memory). H100,
# wgpu-native, 2026-12-06, GPU time (docs/bench/2026-12-06-h100-s36-acc16-wgpu.json and
# `…-acc16-more.json`, two runs: the 8x8 k32 column was timed in both, 2,789 / 2,793), in µs:
#                          8x16 k16 (before) 8x16 k16 dbu 8x8 k16 dbu 8x8 k32 dbu 8x4 k32 dbu  f32
#   4096^3                        3,672         2,960       3,427       2,789       2,659     3,168
#   4096x768 . 3072x768^T           531           428         466         407         395       472
#   4096x3072 . 768x3072^T          529           587         607         525         504       521
# (16x8 k16 dbu 3,185 / 462 / 632; 8x16 k32 dbu 4,058 / 594 / 726; 64x128 8x8 k32 dbu 3,706 /
# 477 / 459; 256x128 and 128x256 8x8 k16 dbu 3,615-3,635.) So 1.19x f32 at 4096^3 — short of
# issue 6's 1.6x. f16 sums across the whole of K (F16_ACCUMULATION = "sums", cuBLAS's 16F
# compute, `…-acc16-sums-wgpu.json`) took 2,455 µs with 8x8 k16 dbu, 1.29x f32; its 16x16 tiles
# ran 4-30x slower (their sums and operands past the registers). Devices with fewer than 512
# invocations a workgroup keep the big tile, with f16 arithmetic in its K steps of 8.
# What binds it (the H100's SASS, 2026-12-07, docs/bench/2026-12-07-h100-s42-sass-half-acc16-
# tile.sass): a K step's 512 packed fmas against 96 LDS.64 — a warp's 16 HFMA2 a product step
# take 4 scheduler cycles and its 4 workgroup-memory wavefronts 4 of the SM's one a cycle, so
# workgroup memory binds at the f16 rate; 105 registers x 512 invocations: one workgroup an SM.
# The 8x8 tile halves the wavefronts a fma at 198 registers (8 warps an SM). f16 sums across K
# ("sums", no f32 totals) with 8x8 sums ran 1.29x f32 (above); its SASS is unread.
ACC16_BIG_TILE = (128, 128, 8, 4, 32, 3)
# ... also where the rule's wave-fill test (WAVE_FILL) turned the f32 big tile down, once the
# product has ACC16_MIN_TILES of its tiles or more. H100, wgpu-native, GPU time, 2026-12-06
# (`scripts/gpu_session.sh acc16-n768`, docs/bench/2026-12-06-h100-s37-acc16-n768.json), µs,
# the rule's tile / ACC16_BIG_TILE / the 64x64 tile, each with f16 arithmetic:
#   4096x768 . 2304x768T (576 tiles)      358.6 / 328.6 / 358.7
#   4096x3072 . 768x3072T (192 tiles)     532.5 / 504.0 / 616.3
#   4096x768 . 768x768T (192 tiles)       128.8 / 134.8 / 157.4
#   1024x3072 . 768x3072T (48 tiles)      233.4 / 254.3 / 224.0
# so a full wave of slots (GPU_SLOTS) or more; at 192 one shape gains and one loses: kept.
ACC16_MIN_TILES = GPU_SLOTS


def _acc16(dt) -> int:
    """gemm_fast's `acc16` for a product of `dt` storage: 0 (f32 sums), 1 (f16 arithmetic: f16
    sums over each K step, f32 across steps) or 2 (f16 sums across the whole of K, as cuBLAS's
    16F compute sums: F16_ACCUMULATION = "sums", for measurements only)."""
    if not F16_ACCUMULATION or dt.wgsl != "f16":
        return 0
    return 2 if F16_ACCUMULATION == "sums" else 1


# Set to bake the fast tiles' sizes and operand strides (info words BAKE_WORDS: M, N, K and A's
# and B's strides) into their kernels, a kernel a shape (kernels/common.bake): for measurements.
BAKE = False
BAKE_WORDS = (0, 1, 2, 7, 8, 10, 11)

# Set to ("tiled", None), ("direct", (tx, ty, rm, rn)) or ("fast", (bm, bn, tm, tn, bk, dbuf))
# to force a variant (benchmarks, tests). A forced "fast" variant runs only where its layout
# and tile apply; other products then take the ordinary rule.
FORCE = None
# The variant the last `gemm` ran, as (kind, params): for tests and benchmarks.
LAST = None
# Set to (S, (kind, params)) to force a split of K into S chunks run by that variant (benchmarks,
# tests); S = 1 forces no split. Products the split cannot apply to take the ordinary rule.
FORCE_SPLIT = None


def _fast_layout(a, b, e, out_dtype, cstrides):
    """ "n" or "k" (B's unit-stride dim), prefixed by "m" where A's unit stride is along M (a
    transposed A: a weight's gradient g.T @ x), when the product may take `gemm_fast`, else
    None: A, B, the output and any epilogue all f32, all f16 or all bf16. The output is a new
    contiguous tensor of `out_dtype` (offset 0)."""
    st = a.dtype.wgsl
    if (
        st not in ("f32", "f16", "bf16")
        or b.dtype.wgsl != st
        or out_dtype.wgsl != st
        or (e is not None and e.dtype.wgsl != st)
    ):
        return None
    if a._offset % 4 or b._offset % 4:
        return None
    if a._strides[-1] == 1 and a._strides[-2] % 4 == 0:
        al = ""
    elif a._strides[-2] == 1 and a._strides[-1] % 4 == 0:
        al = "m"
    else:
        return None
    if any(s % 4 for s in cstrides[1]) or any(s % 4 for s in cstrides[2]):
        return None
    if b._strides[-1] == 1 and b._strides[-2] % 4 == 0:
        return al + "n"
    if b._strides[-2] == 1 and b._strides[-1] % 4 == 0:
        return al + "k"
    return None


def fast_params(params):
    """A fast tile's (bm, bn, tm, tn, bk, dbuf, kg): tables and forced variants may leave out
    the K groups (kernels/matmul.py gemm_fast's `kg`), 1."""
    return (*params, 1) if len(params) == 6 else tuple(params)


def _fast_fits(dev, params, fast_lay, M, N, K, half=False):
    """Whether the fast tile `params` runs this product on `dev` (`half`: its workgroup tiles
    hold f16, f16 arithmetic's)."""
    bm, bn, tm, tn, bk, dbuf, kg = fast_params(params)
    if M % bm or N % bn or K % bk or K == 0 or not fast_valid(bm, bn, tm, tn, bk, kg):
        return False
    lim = dev.limits
    nt = (bn // tn) * (bm // tm) * kg  # (one dimension of invocations)
    if nt > min(
        lim.get("max-compute-invocations-per-workgroup", 256),
        lim.get("max-compute-workgroup-size-x", 256),
    ):
        return False
    return fast_smem_bytes(bm, bn, tm, tn, bk, dbuf, fast_lay, kg, half) <= lim.get(
        "max-compute-workgroup-storage-size", 16384
    )


def _choose(dev, M, N, K, batch, fast_lay, half=False):
    """(kind, params): the kernel variant for an M x N output (`half`: f16 arithmetic's, whose
    workgroup tiles hold f16)."""
    if FORCE is not None:
        if FORCE[0] in ("tiled", "direct"):
            return FORCE
        # (a forced "gemv"/"gemvn" is applied by _gemv_params where it can run)
        if (
            FORCE[0] == "fast"
            and fast_lay is not None
            and _fast_fits(dev, FORCE[1], fast_lay, M, N, K, half)
        ):
            return FORCE
    elif fast_lay is not None:
        table = FAST_CPU if dev.adapter_type == "CPU" else FAST_GPU
        if table is FAST_GPU and dev.impl == "dawn":
            table = FAST_GPU_DAWN
        for least, params in table:
            if M * N * batch < least or not _fast_fits(dev, params, fast_lay, M, N, K):
                continue
            if params in (BIG_TILE, BIG_TILE_16X8, WIDE96_TILE):
                tiles = M * N * batch // (params[0] * params[1])
                many = params == BIG_TILE and BIG_MIN_TILES and tiles >= BIG_MIN_TILES
                if wave_fill(tiles) < WAVE_FILL and not many:
                    continue
            if params in (KG_TILE, KG2_TILE) and (
                K < KG_MIN_K or M * N * batch >= SMALL_OUTPUTS or fast_lay[0] == "m"
            ):
                continue
            if params == KG2_TILE and K > KG2_MAX_K:
                continue
            return "fast", params
    if N < 4:  # matrix-vector and thin outputs: 256 rows a workgroup, one column each
        return "direct", (1, 64, 4, 1)
    if M < 4:  # a few rows (vector-matrix): 256 columns a workgroup
        return "direct", (64, 1, 1, 4)
    tiles = -(-M // TILE) * -(-N // TILE) * batch
    if M < TILE // 2 or N < TILE // 2 or tiles < MIN_TILES:
        return "direct", (8, 8, 4, 4)
    return "tiled", None


# gemm_tiled, a K step: 16 tile-load iterations + exit, 16 inner-product iterations + exit
TK_TILED_LOOPS = 34


def k_loop_iterations(kind: str, params, K: int) -> int:
    """Loop iterations one invocation of a GEMM variant runs for a K-long product, counted as
    lavapipe's loop budget counts them: every iteration of every loop plus each loop's final
    exit test (measured: a 30,000 x 1 nested loop ran 21,845 = 65,535 / 3 outer passes).
    Loops the generator unrolls are not loops. The direct kernel steps k one at a time; the
    tiled kernel runs K/16 steps, each a 16-step tile load and a 16-step inner product; the
    fast kernel unrolls its K step."""
    if kind == "direct":
        return K + 1
    if kind == "tiled":
        return -(-K // 16) * (TK_TILED_LOOPS + 1) + 1
    if kind == "gemv":  # lanes stride through K (16-byte loads or scalars), then a tree sum
        per = params[1] * (2 if params[1] == 4 and params[2:3] in (("f16",), ("bf16",)) else 1)
        return -(-K // (GEMV_LANES * per)) + 1
    if kind == "gemvn":  # 32 slices of K
        return -(-K // 32) + 1
    return -(-K // params[4]) + 1


def _split_k_chunk(kind, params, K):
    """The K-chunk length that keeps one invocation within the device's loop budget, or None
    when the whole K fits. Chunks are multiples of 64, so every variant's K step (16, or the fast
    kernel's bk <= 32) and the fast kernel's 4-element alignment divide them."""
    limit = max_loop_iterations()
    if K <= 64 or k_loop_iterations(kind, params, K) <= limit:
        return None  # fits, or cannot split finer (only under a forced budget of < ~150)
    # the largest multiple of 64 whose loops fit (k_loop_iterations grows with K), searched in
    # units of 64: lo fits (or is the floor, 1), hi does not (64 * hi >= K, which does not fit).
    # (Searching over K itself stalled for good at lo = 64(q - 1), hi = K = 64q + r: the
    # midpoint rounded down to lo. A K of 190 under a budget of 300 hung conv's backward.)
    lo, hi = 1, K // 64 + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if k_loop_iterations(kind, params, 64 * mid) <= limit:
            lo = mid
        else:
            hi = mid
    return 64 * lo


def _gemm_split_k(a, b, e, alpha, beta, out_dtype, chunk):
    """The product in K-chunks of `chunk`, each a GEMM adding the running total through the
    bias epilogue (acc_i = a_i @ b_i + acc_{i-1}), then alpha and beta·e applied once. Used where
    a single invocation may not loop over the whole K (lavapipe's loop budget, backend/quirks.py);
    the running total is f32 for float16 operands, so the chunks do not round to f16 between."""
    K = a._shape[-1]
    want = out_dtype or a.dtype
    acc_dtype = D.float32 if want.is_floating_point else want
    acc = None
    for k0 in range(0, K, chunk):
        k = min(chunk, K - k0)
        ai = a._view(a._shape[:-1] + (k,), a._strides, a._offset + k0 * a._strides[-1])
        bi = b._view(b._shape[:-2] + (k, b._shape[-1]), b._strides, b._offset + k0 * b._strides[-2])
        acc = gemm(ai, bi, acc, out_dtype=acc_dtype)
    if alpha != 1:
        acc = acc * alpha
    if e is not None and beta != 0:
        acc = acc + e * beta if beta != 1 else acc + e
    return acc if acc.dtype is want else acc.to(want)


def baked_rows(m: int) -> int:
    """The row count (1, 2, 4 or 8) a GEMV kernel is generated for to cover m <= 8 rows."""
    return 1 if m == 1 else 2 if m == 2 else 4 if m <= 4 else 8


def _gemv_params(dev, a, b, e_dt, out_dt, M, K):
    """(kind, params) for a GEMV kernel, or None: M <= GEMV_MAX_M rows (baked as 1, 2, 4 or 8),
    on a GPU (see GEMV_MAX_M). B with unit K stride and A with unit K stride (x @ w.T for a
    row-major w) take `gemv_rows` with 16-byte loads where K, offsets and row strides allow
    (multiples of 4 values, f16 and bf16 8); B with unit N stride and N, its offset and row
    stride multiples of 4 (x @ w) `gemv_cols`. A and B both f32, f16 or bf16, the output and any
    bias the same (bf16: or both f32, the sums unrounded; a bf16 output needs an even N: two
    columns are one word; its offset is 0, a new tensor)."""
    st = a.dtype.wgsl
    cst = out_dt.wgsl
    if st not in ("f32", "f16", "bf16") or b.dtype.wgsl != st or K == 0:
        return None
    if cst != st and not (st == "bf16" and cst == "f32"):
        return None
    if e_dt is not None and e_dt.wgsl != cst:
        return None
    if cst == "bf16" and b._shape[-1] % 2:  # (two columns a word)
        return None
    if b._strides[-2] == 1 and a._strides[-1] == 1:
        kind = "gemv"
        q = 8 if st in ("f16", "bf16") else 4
        aligned = K % q == 0 and a._offset % q == 0 and b._offset % q == 0
        aligned = aligned and (M == 1 or a._strides[-2] % q == 0) and b._strides[-1] % q == 0
        vec = 4 if aligned else 1
    elif b._strides[-1] == 1 and not (b._shape[-1] % 4 or b._offset % 4 or b._strides[-2] % 4):
        kind, vec = "gemvn", None
    else:
        return None
    if FORCE is not None:
        if FORCE[0] != kind or M > FORCE[1][0]:
            return None
        rm = FORCE[1][0]
        vec = vec if vec is None else min(vec, FORCE[1][1])
    elif M > GEMV_MAX_M or dev.adapter_type == "CPU" or K < 64:
        return None
    else:
        rm = baked_rows(M)
    tail = (st,) if cst == st else (st, cst)
    return (kind, (rm,) + tail if vec is None else (rm, vec) + tail)


def _split_fits(dev, S, variant, M, N, K, fast_lay):
    """Whether K splits into S chunks that `variant` can run as a batch of S products."""
    if S < 2 or K % S:
        return False
    kc = K // S
    kind, params = variant
    if kind == "fast":
        return fast_lay is not None and kc % 4 == 0 and _fast_fits(dev, params, fast_lay, M, N, kc)
    return kind == "tiled"


def _tuned(dev, fast_lay, nbatch, M, N, K, out_dt, chosen):
    """(tile, split or None) that `pyrite tune` measured best for this product on this device
    (ops/tuning.py), where it still fits and was measured against what the rules choose now
    (`chosen`, the rules' variant; tune_signature); None: the rules decide."""
    if FORCE is not None or FORCE_SPLIT is not None or nbatch != 1 or out_dt.wgsl != "f32":
        return None
    from . import tuning

    hit = tuning.lookup(dev, fast_lay, M, N, K)
    if hit is None or "sig" not in hit:
        return None
    recording = dev._tape is not None
    try:
        if hit["sig"] != tune_signature(dev, fast_lay, M, N, K, hit, chosen):
            return None
        if recording and int(hit.get("split", 1)) > 1:  # (only GPU time counts: the split)
            tile = _tile(hit["tile_split"])
            split = (int(hit["split"]), ("fast", tile))
            if not _split_fits(dev, split[0], split[1], M, N, K, fast_lay):
                return None
            return tile, split
        if hit.get("tile") is None:
            return None  # (the rules beat every tile here)
        tile = _tile(hit["tile"])
    except (KeyError, TypeError, ValueError):
        return None  # (an entry of another pyrite's making: the rules decide)
    if not _fast_fits(dev, tile, fast_lay, M, N, K):
        return None
    return tile, None


def tune_signature(dev, fast_lay, M, N, K, entry, chosen=None) -> str:
    """What a `pyrite tune` entry's times were measured against, as a hash: the product, the
    rules' variant for it (`chosen`, else _choose's), the splits the rules take with it eagerly
    and under a recording, and the WGSL of the rules' fast kernel and of the entry's tiles.
    An entry keeps its signature (ops/tuning.py); one that no longer matches — the rules or
    those kernels changed since it was measured — is not taken. (2026-12-06: the H200's shipped
    table held a 64x64 4x4 tile for 4096x768 . 3072x768T, BERT-base's second FFN product,
    measured at 691 µs against the rules' 864 then; the rules' own tile had since come to 524,
    and the stale entry, 664, cost BERT-base's batch-32 forward ~1.7 ms there, and Dawn, which
    borrows that table, too.) The general and direct kernels' own code is not in it."""
    import hashlib

    if chosen is None:
        chosen = _choose(dev, M, N, K, 1, fast_lay)
    parts = [fast_lay, M, N, K, chosen]
    parts += [_rule_split(dev, M, N, K, fast_lay, chosen, rec) for rec in (False, True)]
    tiles = [chosen[1]] if chosen[0] == "fast" else []
    tiles += [_tile(entry[k]) for k in ("tile", "tile_split") if entry.get(k) is not None]
    for t in tiles:
        parts.append(gemm_fast(fast_lay, 0, "none", *fast_params(t)).wgsl)
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def _tile(v):
    bm, bn, tm, tn, bk, dbuf, kg = fast_params(v)
    t = (int(bm), int(bn), int(tm), int(tn), int(bk), 2 if dbuf == 2 else bool(dbuf))
    return t if int(kg) == 1 else (*t, int(kg))


def _choose_split(dev, a, b, M, N, K, nbatch, fast_lay, out_dt, chosen):
    """(S, variant) for a split-K product, or None: a single product whose tiles are too few to
    fill the GPU runs as S partial products over K-chunks (one batched dispatch) and their sum
    (one more); see SPLIT_FILL."""
    if nbatch != 1 or out_dt.wgsl != "f32" or a.dtype.wgsl != "f32":
        return None
    if FORCE_SPLIT is not None:
        S, variant = FORCE_SPLIT
        return (S, variant) if _split_fits(dev, S, variant, M, N, K, fast_lay) else None
    return _rule_split(dev, M, N, K, fast_lay, chosen, dev._tape is not None)


def _rule_split(dev, M, N, K, fast_lay, chosen, recording):
    """The rules' split of a single f32 product whose variant is `chosen`, eagerly or under a
    recording (a compiled function's trace: no host cost to repay): (S, variant) or None."""
    kind, params = chosen
    min_k = SPLIT_MIN_K_REPLAY if recording else SPLIT_MIN_K
    if kind != "fast" or dev.adapter_type == "CPU" or FORCE is not None or K < min_k:
        return None
    tiles = (M // params[0]) * (N // params[1])
    S = 1
    while tiles * S < SPLIT_FILL and S < SPLIT_MAX:
        S *= 2
    while S > 1 and not (
        K // S >= SPLIT_MIN_CHUNK and _split_fits(dev, S, chosen, M, N, K, fast_lay)
    ):
        S //= 2
    return (S, chosen) if S > 1 else None


def _gemm_split_par(dev, a, b, e, alpha, beta, S, variant, out_dt, into=None, rows=False):
    """a @ b as S products over K-chunks, views of a and b with the chunk as a batch dim (no
    copy), summed with the epilogue by `splitk_sum`. `rows`: (a @ b, a's row sums or None), the
    partial row sums summed in the same kernel (gemm's `rows`)."""
    M, K = a._shape
    N = b._shape[1]
    kc = K // S
    (sam, sak), (sbk, sbn) = a._strides, b._strides
    av = a._view((S, M, kc), (kc * sak, sam, sak), a._offset)
    bv = b._view((S, kc, N), (kc * sbk, sbk, sbn), b._offset)
    part = gemm(av, bv, variant=variant, rows=rows)
    qpart = None
    if rows:
        part, qpart = part
        if alpha != 1 or e is not None:
            qpart = None
    out = empty((M, N), out_dt) if into is None else into
    bufs = [part._storage.buffer]
    if e is None:
        epi, ew = "none", [0, 0, 0]
    else:
        epi = "bias" if alpha == 1 and beta == 1 else "axpby"
        ew = [e._offset, e._strides[0], e._strides[1]]
        bufs.append(e._storage.buffer)
    info = [M * N, S, N, out._offset, *ew, f32_bits(alpha), f32_bits(beta)]
    rs = r_at = None
    if qpart is not None:
        rs = empty((M,), out_dt)
        r_at = len(info)
        info += [M, rs._offset]
        bufs.append(qpart._storage.buffer)
    bufs.append(out._storage.buffer)
    if rs is not None:
        bufs.append(rs._storage.buffer)
    elif dev._tape is not None and dev._tape.recording:
        dev._tape.gemm_next(("splitk", epi), out)
    n = M * N + (M if rs is not None else 0)
    dev.dispatch(splitk_sum(epi, rows=r_at), bufs, info, grid_for(n))
    if e is None and alpha != 1:  # (alpha with no e: rare)
        out.mul_(alpha)
    return (out, rs) if rows else out


# Rows: a product whose M the fast tiles do not divide (a prompt of 100 tokens) would run the
# general kernel whole; instead its first M - M % RAGGED_ROWS rows run as their own product (the
# fast path, split if need be) and the rest (< RAGGED_ROWS rows) as GEMVs of up to 8 rows (or one
# general product when B is not K-contiguous), all written into one output.
RAGGED_ROWS = 16


def _ragged_rows(dev, kind, M, N, K, nbatch, fast_lay, into):
    """The row count of the aligned part of a ragged product, or None."""
    if kind == "fast" or into is not None or nbatch != 1 or fast_lay is None or FORCE is not None:
        return None
    if dev.adapter_type == "CPU" or M < RAGGED_ROWS or M % RAGGED_ROWS == 0:
        return None
    rows = M - M % RAGGED_ROWS
    if _choose(dev, rows, N, K, 1, fast_lay)[0] != "fast":
        return None  # N or K does not fit a fast tile either
    return rows


def _gemm_ragged(a, b, e, alpha, beta, rows, out_dt):
    # (one product, but its operands may carry leading dims of size 1: a batch-1 matmul, as
    # addbmm's gradient b1.mT @ g; they were read as the matrix's dims, and on a GPU such a
    # product with M % 16 != 0 failed gemm's K check, 2026-12-07)
    lead = (1,) * (max(a.ndim, b.ndim, 2 if e is None else e.ndim) - 2)
    a, b = (t._view(t._shape[-2:], t._strides[-2:], t._offset) for t in (a, b))
    if e is not None:
        e = e._view(e._shape[-2:], e._strides[-2:], e._offset)
    M, N = a._shape[0], b._shape[1]
    out = empty((M, N), out_dt)
    parts = [(0, rows)]
    gemv_ok = b._strides[0] == 1 or (b._strides[1] == 1 and N % 4 == 0 and b._strides[0] % 4 == 0)
    step = GEMV_MAX_M if gemv_ok else M  # the rest in GEMV-sized pieces
    for r0 in range(rows, M, step):
        parts.append((r0, min(step, M - r0)))
    for r0, n in parts:
        ai = a._view((n, a._shape[1]), a._strides, a._offset + r0 * a._strides[0])
        ei = None if e is None else e._view((n, N), e._strides, e._offset + r0 * e._strides[0])
        into = out._view((n, N), (N, 1), out._offset + r0 * N)
        _gemm(ai, b, ei, alpha, beta, out_dt, into=into)  # (unwrapped: bf16 stays packed)
    if lead:
        return out._view(lead + (M, N), contiguous_strides(lead + (M, N)), out._offset)
    return out


# Plans of gemm by everything they depend on (shapes, strides, offsets, dtypes, the epilogue,
# the device): the kernel, its info words and grid, or the split-K chunk. A training step calls
# the same few dozen GEMMs every step; choosing a variant, coalescing the batch dims and
# building the info words is ~20 Python calls a GEMM, a lookup once planned.
_plans = PlanCache()


def gemm(
    a: Tensor,
    b: Tensor,
    e: Tensor | None = None,
    alpha=1,
    beta=1,
    out_dtype=None,
    variant=None,
    into=None,
    rows=False,
) -> Tensor:
    """C = alpha * (a @ b) + beta * e for a (..., M, K), b (..., K, N) with broadcastable batch
    dims; `e`, when given, is already broadcast (a view) to C's shape. Returns a new tensor.
    Internal: `variant` (the split-K plan's partial products) is a (kind, params) to run in
    place of the shape rule's choice; `into` (the ragged plan's two parts) a contiguous (M, N)
    view of a new tensor to write instead of a new output (single products only). `rows`:
    returns (C, R) with R (..., M) a's row sums (sum over k) computed by the same kernels
    where the plan is the fast tile (split or not, f32, no epilogue), else (C, None)."""
    dev = backend.current()
    _plans.for_device(dev)
    key = (
        a._shape, a._strides, a._offset, a.dtype, b._shape, b._strides, b._offset, b.dtype,
        None if e is None else (e._shape, e._strides, e._offset, e.dtype),
        alpha, beta, out_dtype,
        FORCE, FORCE_SPLIT, dev.loop_budget,  # (tests force variants, lower the budget: max_loop_iterations)
        F16_ACCUMULATION, GEMV_SUBGROUPS, BAKE,
        variant, None if into is None else into._offset, dev._tape is not None, rows,
    )  # fmt: skip
    plan = _plans.get(key)
    if plan is not None:
        if plan[0] == "split":
            out = _gemm_split_k(a, b, e, alpha, beta, out_dtype, plan[1])
            return (out, None) if rows else out
        if plan[0] == "splitk":
            return _gemm_split_par(dev, a, b, e, alpha, beta, plan[1], plan[2], plan[3], into, rows)
        if plan[0] == "ragged":
            out = _gemm_ragged(a, b, e, alpha, beta, plan[1], plan[2])
            return (out, None) if rows else out
        if plan[0] == "widen":
            raise _Widen
        _, src, info, grid, out_shape, out_dt, last, spec, rs_shape = plan
        global LAST
        LAST = last
        out = empty(out_shape, out_dt) if into is None else into
        bufs = [a._storage.buffer, b._storage.buffer]
        if e is not None:
            bufs.append(e._storage.buffer)
        bufs.append(out._storage.buffer)
        rs = None
        if rs_shape is not None:
            rs = empty(rs_shape, out_dt)
            bufs.append(rs._storage.buffer)
        if spec is not None and dev._tape is not None and dev._tape.recording:
            dev._tape.gemm_next(spec, out)
        dev.dispatch(src, bufs, info, grid)
        return (out, rs) if rows else out
    return _gemm_plan(dev, key, a, b, e, alpha, beta, out_dtype, variant, into, rows)


def _gemm_plan(dev, key, a, b, e, alpha, beta, out_dtype, variant=None, into=None, rows=False):
    M, K = a._shape[-2], a._shape[-1]
    K2, N = b._shape[-2], b._shape[-1]
    assert K == K2
    batch = broadcast_shapes(a._shape[:-2], b._shape[:-2])
    out_shape = batch + (M, N)
    dt = a.dtype
    out_dt = out_dtype or dt
    nbatch = math.prod(batch)
    if M == 0 or N == 0 or nbatch == 0:
        return (empty(out_shape, out_dt), None) if rows else empty(out_shape, out_dt)
    ct = dt.ctype
    nbd = len(batch)

    def bstrides(t):
        lead = nbd - (t.ndim - 2)
        return tuple(
            [0] * lead + [0 if d == 1 else s for d, s in zip(t._shape[:-2], t._strides[:-2])]
        )

    # the output is a new contiguous tensor, made once the variant (or a split of K) is chosen
    slist = [contiguous_strides(out_shape)[:-2], bstrides(a), bstrides(b)]
    epi = "none"
    if e is not None:
        slist.append(tuple(e._strides[:-2]))
        epi = "bias" if alpha == 1 and beta == 1 else "axpby"
    cshape, cstrides = coalesce(batch, slist)
    nb = len(cshape)
    a_lay = _layout_a(a._strides[-2], a._strides[-1], M, K)
    b_lay = _layout_b(b._strides[-2], b._strides[-1], K, N)
    fast_lay = _fast_layout(a, b, e, out_dt, cstrides)
    if variant is not None and (
        variant[0] != "fast"
        or (fast_lay is not None and _fast_fits(dev, variant[1], fast_lay, M, N, K))
    ):
        kind, params = variant
    elif dt.wgsl == "bf16":  # only the GEMVs and the fast tiles read packed bf16
        e_dt = None if e is None else e.dtype
        gv = _gemv_params(dev, a, b, e_dt, out_dt, M, K)
        kind, params = gv if gv is not None else _choose(dev, M, N, K, nbatch, fast_lay)
        if kind not in ("gemv", "gemvn", "fast"):
            aligned = _ragged_rows(dev, kind, M, N, K, nbatch, fast_lay, into)
            if aligned is not None and _gemv_params(dev, a, b, e_dt, out_dt, 1, K) is not None:
                _remember(key, ("ragged", aligned, out_dt))  # (the rest rows' GEMVs exist)
                out = _gemm_ragged(a, b, e, alpha, beta, aligned, out_dt)
                return (out, None) if rows else out
        if kind not in ("gemv", "gemvn", "fast") or _split_k_chunk(kind, params, K) is not None:
            _remember(key, ("widen",))
            raise _Widen  # (nothing dispatched: the op widens instead, _bf16_or_widened)
    else:
        kind, params = _choose(dev, M, N, K, nbatch, fast_lay, _acc16(dt) > 0)
        tuned = _tuned(dev, fast_lay, nbatch, M, N, K, out_dt, (kind, params))
        if tuned is not None:
            kind, params = "fast", tuned[0]
        gv = _gemv_params(dev, a, b, None if e is None else e.dtype, out_dt, M, K)
        if gv is not None:
            kind, params = gv
        if tuned is not None and tuned[1] is not None:  # (recording: the tuned split)
            split = tuned[1]
        else:
            split = _choose_split(dev, a, b, M, N, K, nbatch, fast_lay, out_dt, (kind, params))
        if split is not None:
            _remember(key, ("splitk", *split, out_dt))
            return _gemm_split_par(dev, a, b, e, alpha, beta, *split, out_dt, into, rows)
        aligned = _ragged_rows(dev, kind, M, N, K, nbatch, fast_lay, into)
        if aligned is not None:
            _remember(key, ("ragged", aligned, out_dt))
            out = _gemm_ragged(a, b, e, alpha, beta, aligned, out_dt)
            return (out, None) if rows else out
    chunk = _split_k_chunk(kind, params, K)
    if chunk is not None:
        _remember(key, ("split", chunk))
        out = _gemm_split_k(a, b, e, alpha, beta, out_dtype, chunk)
        return (out, None) if rows else out
    out = empty(out_shape, out_dt) if into is None else into
    global LAST
    LAST = (kind, params)
    e_st = e.dtype.wgsl if e is not None else "f32"
    spec = None  # (gemm_fast's arguments: compile/fusion.py may rebuild it with a fused map)
    rs_shape = None  # (the row sums' shape where this product also computes them: `rows`)
    if kind == "fast" and dt.wgsl != "f32":  # (half storage: no fused maps, no row sums)
        acc16 = _acc16(dt)
        if (
            acc16
            and FORCE is None
            and (
                params in (BIG_TILE, BIG_TILE_16X8)
                or M * N * nbatch >= ACC16_MIN_TILES * ACC16_BIG_TILE[0] * ACC16_BIG_TILE[1]
            )
            and _fast_fits(dev, ACC16_BIG_TILE, fast_lay, M, N, K, True)
        ):
            params = ACC16_BIG_TILE
            LAST = (kind, params)
        bm, bn, tm, tn, bk, dbuf, kg = fast_params(params)
        acc16 = acc16 if kg == 1 else 0
        src = gemm_fast(fast_lay, nb, epi, bm, bn, tm, tn, bk, dbuf, kg, st=dt.wgsl, acc16=acc16)
        tile_m, tile_n = bm, bn
    elif kind == "fast":
        bm, bn, tm, tn, bk, dbuf, kg = fast_params(params)
        spec = (fast_lay, nb, epi, bm, bn, tm, tn, bk, dbuf, kg)
        if rows and epi == "none" and nb <= 1 and out_dt.storage == "f32" and kg == 1:
            rs_shape = batch + (M,)
            src = gemm_fast(*spec, rows=INFO_BATCH + 4 * nb)
            spec = None  # (an extra output: not a product compile/fusion.py rewrites)
        else:
            src = gemm_fast(*spec)
        tile_m, tile_n = bm, bn
    elif kind == "gemv":
        sg = dev.subgroups if GEMV_SUBGROUPS else 0
        src = gemv_rows(nb, epi, *params, sg=sg)
        tile_m, tile_n = params[0], 256 // GEMV_LANES
        spec = ("gemv", nb, epi, params, sg)  # (compile/fusion.py: a map fused into its store)
    elif kind == "gemvn":
        src = gemv_cols(nb, epi, *params)
        tile_m, tile_n = params[0], GEMVN_COLS
    elif kind == "tiled":
        src = gemm_tiled(dt.wgsl, dt.wgsl, out.dtype.wgsl, ct, a_lay, b_lay, nb, epi, e_st)
        tile_m = tile_n = TILE
    else:
        tx, ty, rm, rn = params
        src = gemm_direct(
            dt.wgsl, dt.wgsl, out.dtype.wgsl, ct, a_lay, b_lay, nb, epi, e_st, tx, ty, rm, rn
        )
        tile_m, tile_n = ty * rm, tx * rn
    tiles_n = -(-N // tile_n)
    tiles_m = -(-M // tile_m)
    total = tiles_n * tiles_m * nbatch

    def word(x):
        return f32_bits(x) if ct == "f32" else int(x)

    info = [
        M,
        N,
        K,
        tiles_n,
        tiles_m,
        total,
        a._offset,
        a._strides[-2],
        a._strides[-1],
        b._offset,
        b._strides[-2],
        b._strides[-1],
        out._offset,
        e._offset if e is not None else 0,
        e._strides[-2] if e is not None else 0,
        e._strides[-1] if e is not None else 0,
        word(alpha),
        word(beta),
    ]
    est = cstrides[3] if e is not None else (0,) * nb
    for d in range(nb):
        info += [cshape[d], cstrides[1][d], cstrides[2][d], est[d]]
    bufs = [a._storage.buffer, b._storage.buffer]
    if e is not None:
        bufs.append(e._storage.buffer)
    bufs.append(out._storage.buffer)
    rs = None
    if rs_shape is not None:
        info.append(0)  # (the row sums' offset: a new tensor)
        rs = empty(rs_shape, out_dt)
        bufs.append(rs._storage.buffer)
    grid = fold_grid(total)
    if BAKE and kind == "fast":
        src = bake(src, {i: info[i] for i in BAKE_WORDS})
    if spec is not None and dev._tape is not None and dev._tape.recording:
        dev._tape.gemm_next(spec, out)
    dev.dispatch(src, bufs, info, grid)
    _remember(key, ("run", src, info, grid, out_shape, out_dt, LAST, spec, rs_shape))
    return (out, rs) if rows else out


def _remember(key, plan):
    _plans.keep(key, plan, 4096)


def _mismatch(a, b):
    sa = "x".join(map(str, a._shape))
    sb = "x".join(map(str, b._shape))
    return ShapeError(
        f"pyrite: mat1 and mat2 shapes cannot be multiplied ({sa} and {sb}): "
        f"shapes {tuple(a._shape)} and {tuple(b._shape)}"
    )


# ---- bfloat16 products: the GEMVs read packed bf16; everything else widens ------------------
class _Widen(Exception):
    """gemm's bf16 plan found no kernel that reads packed bf16 for this product (raised before
    anything is dispatched): the op runs through ops/fallback's widening instead."""


def _all_bf16(*args) -> bool:
    """Every tensor argument bfloat16, the others plain numbers (alpha=, beta=) or None."""
    return all(
        (t.dtype is D.bfloat16) if isinstance(t, Tensor) else (t is None or type(t) in (int, float))
        for t in args
    )


def _bf16_or_widened(fn=None, *, skip=0):
    """An op of this module that runs as written when its tensor arguments are all bfloat16
    and gemm has a kernel reading them packed (the GEMVs, the fast tiles), and through
    ops/fallback's widening for every other bf16 or small-int call (_Widen; the op is then not
    wrapped again: `_pyrite_fallback`). The two matrix operands (the first two tensor
    arguments, after `skip` others) must share a dtype, as torch's: a widened bf16 would
    otherwise pass the op's own check."""
    if fn is None:
        return functools.partial(_bf16_or_widened, skip=skip)

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if not _fallback._needs(args, kwargs):
            return fn(*args, **kwargs)
        pair = [t for t in args[skip:] if isinstance(t, Tensor)][:2]
        if len(pair) == 2:
            _check_dtypes(pair[0], pair[1], fn.__name__)
            # addmm's input, linear's bias: in the operands' dtype too (torch refuses others)
            extra = [t for t in (*args[:skip], *args[skip + 2 :], kwargs.get("bias"))]
            _check_added(pair[0], [t for t in extra if isinstance(t, Tensor)], fn.__name__)
        if _all_bf16(*args, *kwargs.values()):
            try:
                return fn(*args, **kwargs)
            except _Widen:
                pass
        return _widening(fn, fn.__name__, False, args, kwargs)

    op._pyrite_fallback = True
    return op


# True while ops/fallback runs a product on float32 copies of bfloat16 (or small-int) operands:
# torch's bfloat16 products multiply even at alpha = 0, so _scaled must not skip them then
_WIDENED = contextvars.ContextVar("pyrite_matmul_widened", default=False)


def _widening(fn, name, inplace, args, kwargs):
    """ops/fallback's widened call of fn (_slow), with _WIDENED set while it runs."""
    token = _WIDENED.set(True)
    try:
        return _fallback._slow(fn, name, inplace, args, kwargs)
    finally:
        _WIDENED.reset(token)


def _widened_marked(fn, inplace=False):
    """fallback.wrap(fn) (bf16 and small ints widened; install then leaves it alone), with the
    widened call marked (_widening): addmv, baddbmm, addbmm and the in-place forms."""

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if not _fallback._needs(args, kwargs):
            return fn(*args, **kwargs)
        return _widening(fn, op.__name__, inplace, args, kwargs)

    op._pyrite_fallback = True
    return op


# ---- matmul and friends ----------------------------------------------------------------------
@_bf16_or_widened
def matmul(input, other, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    _check_dtypes(a, b, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"pyrite: both arguments to matmul need to be at least 1D, but they are "
            f"{a.ndim}D and {b.ndim}D (shapes {tuple(a._shape)} and {tuple(b._shape)})"
        )
    a2 = a._view((1,) + a._shape, (0,) + a._strides, a._offset) if a.ndim == 1 else a
    b2 = b._view(b._shape + (1,), b._strides + (0,), b._offset) if b.ndim == 1 else b
    if a2._shape[-1] != b2._shape[-2]:
        raise _mismatch(a, b)
    try:
        broadcast_shapes(a2._shape[:-2], b2._shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"pyrite: matmul: batch dimensions of shapes {tuple(a._shape)} and "
            f"{tuple(b._shape)} do not broadcast"
        ) from None
    res = (_gemm if a2.dtype is D.bfloat16 else gemm)(a2, b2)  # (bf16: _bf16_or_widened)
    shape = res._shape
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    if shape != res._shape:
        res = res._view(shape, _contig(shape), 0)
    return _to_out(res, out)


def _contig(shape):
    return contiguous_strides(tuple(shape))


def _to_out(res, out):
    if out is None:
        return res
    if tuple(out._shape) != tuple(res._shape):
        raise ShapeError(
            f"pyrite: out has shape {tuple(out._shape)}, the result {tuple(res._shape)}"
        )
    out.copy_(res)
    return out


def _need(t, n, what, name):
    if t.ndim != n:
        raise ShapeError(
            f"pyrite: {what}: {name} must be a {n}D tensor, got shape {tuple(t._shape)}"
        )


def mm(input, mat2, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(mat2)
    _need(a, 2, "mm", "self")
    _need(b, 2, "mm", "mat2")
    return matmul(a, b, out=out)


def bmm(input, mat2, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(mat2)
    _need(a, 3, "bmm", "batch1")
    _need(b, 3, "bmm", "batch2")
    if a._shape[0] != b._shape[0]:
        raise ShapeError(
            f"pyrite: bmm: batch sizes differ: shapes {tuple(a._shape)} and {tuple(b._shape)}"
        )
    return matmul(a, b, out=out)


def mv(input, vec, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(vec)
    _need(a, 2, "mv", "input")
    _need(b, 1, "mv", "vec")
    return matmul(a, b, out=out)


def dot(input, other, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(
            f"pyrite: dot: 1D tensors expected, but got shapes {tuple(a._shape)} "
            f"and {tuple(b._shape)}"
        )
    if a._shape != b._shape:
        raise ShapeError(
            f"pyrite: dot: inconsistent tensor size: shapes {tuple(a._shape)} and {tuple(b._shape)}"
        )
    return matmul(a, b, out=out)


vdot = dot  # real tensors only: conj is the identity


def inner(input, other, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if a.ndim == 0 or b.ndim == 0:
        from .elementwise import mul

        return _to_out(mul(a, b), out)
    if a._shape[-1] != b._shape[-1]:
        raise _mismatch(a, b)
    bt = b.reshape(math.prod(b._shape[:-1]), b._shape[-1])  # (P, K); K may be 0
    res = matmul(a, bt.transpose(0, 1))  # (..., P)
    return _to_out(res.reshape(*a._shape[:-1], *b._shape[:-1]), out)


def outer(input, vec2, *, out=None):
    a, b = as_tensor_arg(input), as_tensor_arg(vec2)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(
            f"pyrite: outer: 1D tensors expected, got shapes {tuple(a._shape)} and "
            f"{tuple(b._shape)}"
        )
    # a[:, None] * b, as torch.outer: elementwise, so bools and mixed dtypes promote as mul's
    from .elementwise import mul

    col = a._view((a._shape[0], 1), (a._strides[0], 1), a._offset)
    row = b._view((1, b._shape[0]), (1, b._strides[0]), b._offset)
    return _to_out(mul(col, row), out)


ger = outer


def _scaled(input, a, b, beta, alpha, what, blas=True):
    """beta * input + alpha * (a @ b), input broadcast to the product's shape. `blas`: whether
    torch's CPU kernel for this call is a BLAS one (sgemm/sgemv), which skips the product when
    alpha is 0 (see below)."""
    product = _gemm if a.dtype is D.bfloat16 else gemm  # (bf16: _bf16_or_widened)
    c = as_tensor_arg(input)
    _check_dtypes(a, b, what)
    shape = broadcast_shapes(a._shape[:-2], b._shape[:-2]) + (a._shape[-2], b._shape[-1])
    try:
        e = c.expand(*shape)
    except ShapeError:
        raise ShapeError(
            f"pyrite: {what}: input of shape {tuple(c._shape)} does not broadcast to "
            f"the product's shape {shape}"
        ) from None
    _check_added(a, [c], what)
    if alpha == 0 and blas and a.dtype is float32 and not _WIDENED.get():
        # torch's float32/float64 BLAS calls skip the product when alpha is 0 (BLAS's rule: C =
        # beta·C, a and b never read), so an inf or NaN in mat1/mat2 does not reach the result
        # (verified on torch 2.13 CPU; its float16/bfloat16 kernels multiply, giving NaN, as
        # the product below does)
        if beta == 0:
            from .creation import zeros

            return zeros(*shape, dtype=a.dtype)
        from .elementwise import mul

        return mul(e, beta)
    if beta == 0:  # PyTorch ignores input then (NaN in it does not propagate)
        res = product(a, b)
        if a.dtype.kind == "i" and not isinstance(alpha, Tensor):
            alpha = int(alpha)  # (torch casts the scalar to the integer type: 2.5 is 2)
        return res if alpha == 1 else res * alpha
    return product(a, b, e, alpha, beta)


@_bf16_or_widened(skip=1)
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    a, b = as_tensor_arg(mat1), as_tensor_arg(mat2)
    _need(a, 2, "addmm", "mat1")
    _need(b, 2, "addmm", "mat2")
    if a._shape[1] != b._shape[0]:
        raise _mismatch(a, b)
    return _to_out(_scaled(input, a, b, beta, alpha, "addmm"), out)


@_widened_marked
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    a, v = as_tensor_arg(mat), as_tensor_arg(vec)
    _need(a, 2, "addmv", "mat")
    _need(v, 1, "addmv", "vec")
    if a._shape[1] != v._shape[0]:
        raise _mismatch(a, v)
    col = v._view((v._shape[0], 1), (v._strides[0], 0), v._offset)
    c = as_tensor_arg(input)
    c2 = c._view(c._shape + (1,), c._strides + (0,), c._offset) if c.ndim >= 1 else c
    res = _scaled(c2, a, col, beta, alpha, "addmv")
    return _to_out(res._view(res._shape[:-1], res._strides[:-1], 0), out)


BADDBMM_BLAS_MIN = 400  # (torch's threshold in aten/src/ATen/native/LinearAlgebra.cpp)


@_widened_marked
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    a, b = as_tensor_arg(batch1), as_tensor_arg(batch2)
    _need(a, 3, "baddbmm", "batch1")
    _need(b, 3, "baddbmm", "batch2")
    if a._shape[0] != b._shape[0] or a._shape[2] != b._shape[1]:
        raise _mismatch(a, b)
    # torch's CPU baddbmm multiplies in its own loop below M·K·N = 400 a batch (a NaN or inf
    # reaches the result even at alpha = 0) and through BLAS from there (bmm_out_or_baddbmm_,
    # verified on torch 2.13: 399 propagates, 400 skips)
    blas = a._shape[1] * a._shape[2] * b._shape[2] >= BADDBMM_BLAS_MIN
    return _to_out(_scaled(input, a, b, beta, alpha, "baddbmm", blas), out)


@_widened_marked
def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    a, b = as_tensor_arg(batch1), as_tensor_arg(batch2)
    _need(a, 3, "addbmm", "batch1")
    _need(b, 3, "addbmm", "batch2")
    if a._shape[0] != b._shape[0] or a._shape[2] != b._shape[1]:
        raise _mismatch(a, b)
    # sum_b A_b @ B_b == [A_0 .. A_{B-1}] (M, B*K) @ [B_0; ..; B_{B-1}] (B*K, N)
    # (sizes spelt out: a -1 cannot be inferred where M or N is 0)
    bk = a._shape[0] * a._shape[2]
    ac = a.permute(1, 0, 2).reshape(a._shape[1], bk)
    bc = b.reshape(bk, b._shape[2])
    return _to_out(_scaled(input, ac, bc, beta, alpha, "addbmm"), out)


@_bf16_or_widened
def linear(input, weight, bias=None):
    """input @ weight.T + bias in one kernel (the bias is added in the GEMM's epilogue)."""
    # (isinstance first: as_tensor_arg is a wrapped public op, and this is the hot path of
    # every model)
    x = input if isinstance(input, Tensor) else as_tensor_arg(input)
    w = weight if isinstance(weight, Tensor) else as_tensor_arg(weight)
    bt = bias if isinstance(bias, Tensor) else None
    key = (
        x._shape, x._strides, x.dtype, w._shape, w._strides, w.dtype,
        None if bt is None else (bt._shape, bt._strides, bt.dtype),
    )  # fmt: skip
    plan = _linear_plans.get(key) if bt is not None or bias is None else None
    if plan is not None:  # (a layout seen before: its checks passed, its views are known)
        x2v, ev, rv = plan
        x2 = x if x2v is None else x._view(x2v[0], x2v[1], x._offset)
        wt = w._view((w._shape[1], w._shape[0]), (w._strides[1], w._strides[0]), w._offset)
        e = None if ev is None else bt._view(ev[0], ev[1], bt._offset)
        res = _gemm(x2, wt, e)
        return res if rv is None else res._view(rv[0], rv[1], 0)
    xd, wd = len(x._shape), len(w._shape)  # (ndim, read once: the property costs a call)
    if wd not in (1, 2):
        raise ShapeError(f"pyrite: linear: weight must be 1D or 2D, got shape {tuple(w._shape)}")
    if xd == 0 or x._shape[-1] != w._shape[-1]:
        raise ShapeError(
            f"pyrite: linear: input of shape {tuple(x._shape)} and weight of shape "
            f"{tuple(w._shape)} cannot be multiplied (in_features {w._shape[-1]})"
        )
    _check_dtypes(x, w, "linear")
    if isinstance(bias, Tensor):
        _check_added(x, [bias], "linear")
    if wd == 1:
        return _linear_vector(x, w, bias)
    wt = w._view((w._shape[1], w._shape[0]), (w._strides[1], w._strides[0]), w._offset)
    lead = x._shape[:-1]
    x2 = None
    if xd >= 3 and (bias is None or getattr(bias, "ndim", 0) == 1):
        # (..., T, K) that views as (prod, K): one product, so the variant and its tile count
        # see every row (batch-1 decode is then one GEMV, not B of them)
        x2 = _fold_rows(x)
    if x2 is None:
        x2 = x if xd >= 2 else x._view((1,) + x._shape, (0,) + x._strides, x._offset)
    shape = x2._shape[:-1] + (w._shape[0],)
    # bf16 (_bf16_or_widened): the GEMV stores two columns a word, so an odd N takes f32 sums
    # (and bias) and one rounding after
    odd_bf16 = x.dtype is D.bfloat16 and w._shape[0] % 2 == 1
    e = None
    keep = xd >= 2 and not odd_bf16  # (a plan for _linear_plans: views of the operands only)
    if bias is not None:
        keep = keep and bt is not None
        bt = bias if isinstance(bias, Tensor) else as_tensor_arg(bias)
        if odd_bf16:
            bt = bt.to(D.float32)
        try:
            if bt.ndim == 1 and bt._shape[0] == shape[-1]:  # the usual bias: a broadcast view
                e = bt._view(shape, (0,) * (len(shape) - 1) + bt._strides, bt._offset)
            else:
                keep = False
                e = bt.expand(*shape)
        except ShapeError:
            raise ShapeError(
                f"pyrite: linear: bias of shape {tuple(bt._shape)} does not match "
                f"out_features {w._shape[0]}"
            ) from None
    if odd_bf16:
        res = _gemm(x2, wt, e, out_dtype=D.float32).to(D.bfloat16)
    else:
        res = _gemm(x2, wt, e)
    rv = None
    if xd == 1:
        rv = lead + (w._shape[0],), (1,)
    elif x2 is not x:
        rv = lead + (w._shape[0],), contiguous_strides(lead + (w._shape[0],))
    if keep:
        views = (None if x2 is x else (x2._shape, x2._strides),
                 None if e is None else (e._shape, e._strides), rv)  # fmt: skip
        _linear_plans.keep(key, views, 4096)
    return res if rv is None else res._view(rv[0], rv[1], 0)


# Plans of linear by its operands' layouts and dtypes (the offsets of x and the bias go into
# their views as they are; w's into its transposed view): the folded input's, the broadcast
# bias's and the result's views, so a layout seen before skips the checks, the fold rule and
# the stride arithmetic (~4 µs of every linear; four a transformer layer).
_linear_plans = PlanCache()


def _linear_vector(x, w, bias):
    """linear with a 1-D weight: x @ w, then bias added in place, as torch. torch sends a bias to
    addmm (which refuses the 1-D weight: "mat2 must be a matrix, got 1-D tensor") when x is 2-D,
    or when x is contiguous and the bias 1-D once squeezed and contiguous (Linear.cpp's
    is_bias_likely_fusable); otherwise out.add_(bias), which refuses a bias that would grow the
    output (x (3,) gives a 0-d output: a (1, 1) bias fails)."""
    if bias is not None:
        bt = bias if isinstance(bias, Tensor) else as_tensor_arg(bias)
        squeezed = len([n for n in bt._shape if n != 1])
        fusable = (bt.ndim == 1 or squeezed == 1) and bt.is_contiguous()
        if x.ndim == 2 or (fusable and x.is_contiguous()):
            raise ShapeError(
                f"pyrite: linear: mat2 must be a matrix, got 1-D tensor (torch adds a bias of "
                f"shape {tuple(bt._shape)} to input {tuple(x._shape)} @ a 1-D weight by addmm)"
            )
    res = matmul(x, w)
    if bias is None:
        return res
    shape = broadcast_shapes(res._shape, bt._shape)
    if shape != res._shape:
        raise ShapeError(
            f"pyrite: linear: output with shape {list(res._shape)} doesn't match the broadcast "
            f"shape {list(shape)}"
        )
    return res + bt


# gemm as defined here: ops/__init__ installs the module's public functions behind autograd's
# guard and the bf16 fallback; linear (its own rule, recording off inside) calls it without them
_gemm = gemm


def _fold_rows(x):
    """x (..., K) as a (rows, K) view (torch's view rule), or None where no view exists."""
    shape = (math.prod(x._shape[:-1]), x._shape[-1])
    strides = _view_strides(x._shape, x._strides, shape)
    return None if strides is None else x._view(shape, strides, x._offset)


def _rmatmul(self, other):
    return matmul(other, self)


__all__ = [
    "addbmm",
    "addmm",
    "addmv",
    "baddbmm",
    "bmm",
    "dot",
    "ger",
    "inner",
    "matmul",
    "mm",
    "mv",
    "outer",
    "vdot",
]

METHODS = {
    "matmul": matmul,
    "__matmul__": matmul,
    "__rmatmul__": _rmatmul,
    "mm": mm,
    "bmm": bmm,
    "mv": mv,
    "dot": dot,
    "vdot": vdot,
    "inner": inner,
    "outer": outer,
    "ger": ger,
    "addmm": addmm,
    "addmv": addmv,
    "baddbmm": baddbmm,
    "addbmm": addbmm,
}


def _in_place(fn):
    """x.addmm_(a, b) and friends: the product written into x (torch's in-place forms)."""

    def method(self, *args, **kwargs):
        return self.copy_(fn(self, *args, **kwargs))

    method.__name__ = f"{fn.__name__}_"
    return method


for _name in ("addmm", "addmv", "baddbmm", "addbmm"):
    METHODS[f"{_name}_"] = _widened_marked(_in_place(METHODS[_name]), inplace=True)


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _g_matmul(ctx, g):
    """matmul's gradients for every rank pairing (1-D operands, broadcast batches: the engine
    sums a gradient's batch dims back to its operand's)."""
    a, b = ctx.args[0], ctx.args[1]  # (either is None when only the other's gradient reads it)
    ga = gb = None
    a_ndim, b_ndim = len(ctx.meta[0][0]), len(ctx.meta[1][0])
    if a_ndim == 1 and b_ndim == 1:
        return (g * b if ctx.needs[0] else None), (g * a if ctx.needs[1] else None)
    if a_ndim == 1:  # (k) @ (..., k, n) -> (..., n)
        if ctx.needs[0]:
            ga = matmul(g.unsqueeze(-2), b.mT).squeeze(-2)
        if ctx.needs[1]:
            gb = a.unsqueeze(-1) * g.unsqueeze(-2)
        return ga, gb
    if b_ndim == 1:  # (..., m, k) @ (k) -> (..., m)
        if ctx.needs[0]:
            ga = g.unsqueeze(-1) * b
        if ctx.needs[1]:
            gb = matmul(a.mT, g.unsqueeze(-1)).squeeze(-1)
        return ga, gb
    if ctx.needs[0]:
        ga = matmul(g, b.mT)
    if ctx.needs[1]:
        gb = matmul(a.mT, g)
    return ga, gb


_g_matmul.saves = frozenset((0, 1))
_g_matmul.reads_for = {0: 1, 1: 0}  # (autograd._drop_unread: as torch, each for the other)


def _g_addmm(ctx, g):
    _, m1, m2 = ctx.args[:3]
    beta = ctx.kwargs.get("beta", 1)
    alpha = ctx.kwargs.get("alpha", 1)
    gi = g * beta if ctx.needs[0] else None
    g1 = matmul(g, m2.mT) * alpha if ctx.needs[1] else None
    g2 = matmul(m1.mT, g) * alpha if ctx.needs[2] else None
    return gi, g1, g2


_g_addmm.saves = frozenset((1, 2))
_g_addmm.reads_for = {1: 2, 2: 1}


def _rows(t) -> int:
    """The rows of t with its leading dims folded (its last dim the columns)."""
    return math.prod(t._shape[:-1])


def _g_linear(ctx, g):
    """y = x W^T + b: dx = g W, dW = g^T x over the flattened batch, db = g (summed)."""
    from ..autograd import is_grad_enabled

    x, w = ctx.args[0], ctx.args[1]  # (either is None when only the other's gradient reads it)
    w_shape = ctx.meta[1][0]
    gx = gw = gb = None
    if ctx.needs[0]:
        if w.ndim != 2:
            gx = g.unsqueeze(-1) * w
        elif g.ndim > 2 and g.is_contiguous():  # the batch folded into rows: one 2-D product
            gx = matmul(g.reshape(_rows(g), g._shape[-1]), w).reshape(*g._shape[:-1], w._shape[-1])
        else:
            gx = matmul(g, w)
    want_b = len(ctx.needs) > 2 and ctx.needs[2]  # (the bias is not saved: only needs says)
    if ctx.needs[1]:
        if len(w_shape) == 2:
            # (explicit row counts: reshape(-1, 0) of an empty tensor is ambiguous, and
            # Linear(n, 0) / Linear(0, n) have empty gradients to give)
            gt = g.reshape(_rows(g), g._shape[-1]).mT
            x2 = x.reshape(_rows(x), x._shape[-1])
            if (
                want_b
                and ctx.meta[2][0] == (w_shape[0],)
                and g.dtype is x.dtype is float32
                and not is_grad_enabled()
            ):
                # the bias gradient (g's column sums) from the weight gradient's own kernel
                # (not under create_graph: the raw kernel records nothing, so a double backward
                # takes the public matmul below)
                gw, gb = _gemm(gt, x2, rows=True)
            else:
                gw = matmul(gt, x2)
        else:
            gw = (g.unsqueeze(-1) * x).reshape(_rows(x), x._shape[-1]).sum(0)
    if want_b and gb is None:
        gb = g  # (the engine sums it to the bias's shape)
    return gx, gw, gb


_g_linear.saves = frozenset((0, 1))
_g_linear.reads_for = {0: 1, 1: 0}


def _g_outer(ctx, g):
    a, b = ctx.args[0], ctx.args[1]
    ga = matmul(g, b.to(g.dtype)) if ctx.needs[0] else None
    gb = matmul(a.to(g.dtype), g) if ctx.needs[1] else None
    return ga, gb


_g_outer.saves = frozenset((0, 1))
_g_outer.reads_for = {0: 1, 1: 0}


def _g_baddbmm(ctx, g):
    """beta·input + alpha·(b1 @ b2), batched (addbmm: summed over the batch)."""
    _, b1, b2 = ctx.args[:3]
    beta = ctx.kwargs.get("beta", 1)
    alpha = ctx.kwargs.get("alpha", 1)
    gi = g * beta if ctx.needs[0] else None
    if ctx.name.startswith("addbmm"):  # g (M, N) is every batch's
        g = g.unsqueeze(0).expand(ctx.meta[1][0][0], *g._shape)
    g1 = matmul(g, b2.mT) * alpha if ctx.needs[1] else None
    g2 = matmul(b1.mT, g) * alpha if ctx.needs[2] else None
    return gi, g1, g2


_g_baddbmm.saves = frozenset((1, 2))
_g_baddbmm.reads_for = {1: 2, 2: 1}


def _g_addmv(ctx, g):
    _, m, v = ctx.args[:3]
    beta = ctx.kwargs.get("beta", 1)
    alpha = ctx.kwargs.get("alpha", 1)
    gi = g * beta if ctx.needs[0] else None
    gm = g.unsqueeze(-1) * v * alpha if ctx.needs[1] else None
    gv = matmul(m.mT, g) * alpha if ctx.needs[2] else None
    return gi, gm, gv


_g_addmv.saves = frozenset((1, 2))
_g_addmv.reads_for = {1: 2, 2: 1}

GRADS = {
    "outer": _g_outer,
    "ger": _g_outer,
    "baddbmm": _g_baddbmm,
    "addbmm": _g_baddbmm,
    "addmv": _g_addmv,
    "matmul": _g_matmul,
    "mm": _g_matmul,
    "bmm": _g_matmul,
    "addmm": _g_addmm,
    "linear": _g_linear,
}
