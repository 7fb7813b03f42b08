"""Values of the GPU's own kernel choices at the shapes only a GPU takes them (the big GEMM tile,
f16 arithmetic's tile, int4's one-row GEMV shape), against numpy in float64, each with the tolerance of its sum:
`python scripts/gpu_parity_check.py [--n GEMV_ROWS]` (prints each worst error over its bound, and the kernel the
rule chose; exits 1 where one is past its bound)."""

import sys

import numpy as np

import pyrite as pr
import pyrite.ops.matmul as mm
from pyrite import backend
from pyrite.bench.quant import _random_qweight
from pyrite.ops import quantized as Q

F = pr.nn.functional
rng = np.random.default_rng(0)
bad = 0
NQ = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 11008  # (GEMV rows)


def report(label, got, ref, bound, ran):
    global bad
    r = float(np.max(np.abs(got - ref) / bound))
    bad += r > 1
    print(f"{label:40s} worst error / bound {r:.3f}  ran {ran}", flush=True)


# (4096x768 . 2304: the big tile past BIG_MIN_TILES, its waves filled 73 %)
for M, N, K, wt in ((2048, 2048, 512, False), (4096, 3072, 768, True), (4096, 4096, 256, False),
                    (4096, 2304, 768, True)):  # fmt: skip
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((N, K) if wt else (K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    if wt:
        got = F.linear(pr.tensor(a), pr.tensor(b), pr.tensor(bias)).numpy()
        ref = a.astype(np.float64) @ b.T.astype(np.float64) + bias
        bnd = (K + 1) * 2.0**-24 * (np.abs(a) @ np.abs(b.T) + np.abs(bias)) + 1e-30
    else:
        got = (pr.tensor(a) @ pr.tensor(b)).numpy()
        ref = a.astype(np.float64) @ b.astype(np.float64)
        bnd = K * 2.0**-24 * (np.abs(a) @ np.abs(b)) + 1e-30
    report(f"{'linear' if wt else 'matmul'} {M}x{K} . {N}", got, ref, bnd, mm.LAST)

# f16 storage, f32 sums (the big tile's vec4<f16> loads): the f32 sum's bound and the output's
# rounding to f16 (2^-11 of it)
if backend.current().has_f16:
    for M, N, K in ((4096, 3072, 768), (4096, 2304, 768)):
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((N, K)).astype(np.float16)
        got = F.linear(pr.tensor(a), pr.tensor(b)).numpy().astype(np.float64)
        ref = a.astype(np.float64) @ b.T.astype(np.float64)
        abs_ab = np.abs(a).astype(np.float64) @ np.abs(b.T).astype(np.float64)
        bnd = K * 2.0**-24 * abs_ab + 2.0**-11 * np.abs(ref) + 1e-30
        report(f"f16 storage linear {M}x{K} . {N}", got, ref, bnd, mm.LAST)

# f16 arithmetic (allow_fp16_accumulation: ACC16_BIG_TILE where the rule picks the big tile or
# the product has ACC16_MIN_TILES tiles: 4096x768 . 2304 is of the second kind):
# each K step's products rounded to f16 and summed in f16 (bk of them), the steps' sums in f32,
# the output rounded to f16 (README's bound: (bk + 1)·2^-11 of the step sums' |a||b|, + 2^-11)
if backend.current().has_f16:
    for M, N, K in ((2048, 2048, 512), (4096, 3072, 768), (4096, 2304, 768)):
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((N, K)).astype(np.float16)
        pr.backends.cuda.matmul.allow_fp16_accumulation = True
        try:
            got = F.linear(pr.tensor(a), pr.tensor(b)).numpy().astype(np.float64)
            ran = mm.LAST
        finally:
            pr.backends.cuda.matmul.allow_fp16_accumulation = False
        ref = a.astype(np.float64) @ b.T.astype(np.float64)
        bk = ran[1][4] if ran[0] == "fast" else K
        bnd = (bk + 1) * 2.0**-11 * (np.abs(a).astype(np.float64) @ np.abs(b.T)) + 2.0**-11 * (
            np.abs(ref)
        )
        report(f"f16 arithmetic linear {M}x{K} . {N}", got, ref, bnd + 1e-30, ran)

for bits, gs in ((4, 128), (8, None)):
    qw = _random_qweight(rng, bits, gs, NQ, 4096)
    w = qw.dequantize().numpy().astype(np.float64)
    for m in (1, 8):
        x = rng.standard_normal((m, 4096)).astype(np.float32)
        got = Q.qlinear(pr.tensor(x), qw).numpy()
        ref = x.astype(np.float64) @ w.T
        bnd = 4097 * 2.0**-23 * (np.abs(x) @ np.abs(w.T)) + 1e-30
        rm = 8 if m > 4 else m
        ran = (Q.qgemv_shape(rm, bits), Q.qgemv_unpack(rm, bits))
        report(f"qlinear int{bits} g{gs} {m} x 4096 . {NQ}", got, ref, bnd, ran)
sys.exit(1 if bad else 0)
