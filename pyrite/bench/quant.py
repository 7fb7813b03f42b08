"""`pyrite bench --only quant`: decode-shaped products against quantized and float weights.

A batch-1 linear layer reads its whole weight once, so its ceiling is bandwidth: the weight's
bytes over the copy kernel's rate (measured here, on a buffer far past the L2 cache). Each
product is timed under `pr.compile` (a replay: no per-op host cost) over enough distinct weights
that they do not fit in the L2 (the H200 has 60 MB) — one weight called again and again would be
read from the cache. The eager figure (host cost included) goes in the note. Then the GEMV
kernel against the dequantize-and-GEMM path by row count (ops/quantized.py QGEMV_MAX_M). The
GEMV's shape knobs (QGEMV_SHAPE) are swept by scripts/qgemv_time.py, by timestamps.

    python -m pyrite.bench.quant [--quick]
"""

from __future__ import annotations

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.kernels.quant import UNIT_WORDS, values_per_unit
from pyrite.ops import quantized as Q
from pyrite.ops.core import upload

from . import Report, _cuda_time, _median_time, _torch

SWEEP_BYTES = 400 << 20  # the weights one timing cycles through: several times the L2


def _copy_ceiling(nbytes):
    from pyrite.kernels.common import grid_for
    from pyrite.kernels.elementwise import vec4_copy_kernel

    n = nbytes // 4
    x, y = pr.rand(n), pr.empty(n)
    dev = backend.current()
    vec = vec4_copy_kernel(4)
    bufs = (x._storage.buffer, y._storage.buffer)
    t = _median_time(lambda: dev.dispatch(vec, bufs, [n // 4], grid_for(n // 4, 256 * 4)))
    return 2 * n * 4 / t / 1e9


def _random_qweight(rng, bits, gs, N, K):
    """A QuantizedWeight of random packed words (every bit pattern is a valid packing)."""
    wr = -(-K // values_per_unit(bits)) * UNIT_WORDS
    words = rng.integers(0, 1 << 32, (N, wr), dtype=np.uint64).astype(np.uint32).view(np.int32)
    groups = 1 if gs is None else -(-K // gs)
    sc = (rng.random((N, groups), dtype=np.float32) * 0.01).astype(np.float32)
    off = -8 * sc if bits == 4 else None
    return Q.QuantizedWeight(
        bits,
        gs,
        (N, K),
        upload(words, pr.int32),
        upload(sc, pr.float32),
        upload(off, pr.float32) if off is not None else None,
    )


def _per_call(fn_of_weight, weights, x):
    """Seconds a product under pr.compile, cycling through `weights` (one replay runs them
    all), and eager seconds a call (host cost included)."""
    f = pr.compile(lambda x: tuple(fn_of_weight(x, w) for w in weights))
    for _ in range(3):
        f(x)
    t = _median_time(lambda: f(x), repeats=7) / len(weights)
    t_eager = _median_time(lambda: fn_of_weight(x, weights[0]))
    return t, t_eager


def bench_quant(rep, quick=False):
    dev = backend.current()
    rng = np.random.default_rng(0)
    N, K = (1024, 1024) if quick else (11008, 4096)
    sweep = (16 << 20) if quick else SWEEP_BYTES
    ceiling = _copy_ceiling(sweep)
    rep.add(f"vec4 copy kernel ({sweep >> 20} MiB), read+write", ceiling, "GB/s")
    F = pr.nn.functional
    torch = _torch()
    cuda = torch is not None and torch.cuda.is_available()
    xa = rng.standard_normal((1, K)).astype(np.float32)
    formats = [("f32", None, None)]
    if dev.has_f16:
        formats.append(("f16", None, None))
    formats += [("int8", 8, None), ("int8", 8, 128), ("int4", 4, 128), ("int4", 4, 32)]
    for name, bits, gs in formats:
        if bits is None:
            dt = pr.float32 if name == "f32" else pr.float16
            one = N * K * dt.itemsize
            nw = max(2, min(16, -(-sweep // one)))
            ws = [pr.randn(N, K, dtype=dt) for _ in range(nw)]
            x = pr.tensor(xa).to(dt)
            t, te = _per_call(lambda x, w: F.linear(x, w), ws, x)
            nbytes = one
            label = f"GEMV 1x{K} . {N}x{K}T {name}"
        else:
            q0 = _random_qweight(rng, bits, gs, N, K)
            nbytes = q0.nbytes
            nw = max(2, min(16, -(-sweep // nbytes)))
            ws = [q0] + [_random_qweight(rng, bits, gs, N, K) for _ in range(nw - 1)]
            x = pr.tensor(xa)
            t, te = _per_call(Q.qlinear, ws, x)
            g = "per row" if gs is None else f"g{gs}"
            label = f"GEMV 1x{K} . {N}x{K}T {name} {g}"
        peers = {}
        if cuda and bits is None:
            tdt = torch.float32 if name == "f32" else torch.float16
            torch.backends.cuda.matmul.allow_tf32 = False
            wc = [torch.randn(N, K, device="cuda", dtype=tdt) for _ in range(nw)]
            xc = torch.tensor(xa, device="cuda", dtype=tdt)
            tc = _cuda_time(torch, lambda: [torch.nn.functional.linear(xc, w) for w in wc])
            peers["torch-cuda"] = nbytes / (tc / nw) / 1e9
        if cuda and bits == 8 and gs is None:
            try:  # torch's own int8 weight-only product (bf16 activations on CUDA)
                wq = [torch.randint(-128, 127, (N, K), dtype=torch.int8, device="cuda")
                      for _ in range(nw)]  # fmt: skip
                sc = torch.rand(N, device="cuda", dtype=torch.bfloat16)
                xb = torch.tensor(xa, device="cuda", dtype=torch.bfloat16)
                tc = _cuda_time(torch, lambda: [torch._weight_int8pack_mm(xb, w, sc) for w in wq])
                peers["torch-cuda _weight_int8pack_mm"] = nbytes / (tc / nw) / 1e9
            except Exception:  # noqa: BLE001 - not every build has the CUDA kernel
                pass
        rep.add(label, nbytes / t / 1e9, "GB/s", ceiling, peers,
                f"{nbytes / 1e6:.1f} MB, {t * 1e6:.1f} us compiled, {te * 1e6:.1f} us eager, "
                f"{nbytes / t / 1e9 / ceiling:.0%} of copy")  # fmt: skip
    # GEMV kernel (ceil(M / 8) dispatches) or dequantize + GEMM, by rows
    bits, gs = 4, 128
    ws = [_random_qweight(rng, bits, gs, N, K) for _ in range(2 if quick else 4)]
    keep = Q.QGEMV_MAX_M
    try:
        for M in (1, 8, 16, 32, 64, 128):
            x = pr.tensor(rng.standard_normal((M, K)).astype(np.float32))
            res = {}
            for path, limit in (("gemv", 1 << 30), ("dequant+gemm", 0)):
                Q.QGEMV_MAX_M = limit
                res[path], _ = _per_call(Q.qlinear, ws, x)
            rep.add(f"int4 g128 {M}x{K} . {N}x{K}T: GEMV / dequant+GEMM", res["gemv"] /
                    res["dequant+gemm"], "x time", None, None,
                    f"GEMV {res['gemv'] * 1e6:.1f} us, dequant+GEMM "
                    f"{res['dequant+gemm'] * 1e6:.1f} us")  # fmt: skip
    finally:
        Q.QGEMV_MAX_M = keep


if __name__ == "__main__":
    import sys

    r = Report()
    bench_quant(r, quick="--quick" in sys.argv)
