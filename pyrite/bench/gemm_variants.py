"""Time every f32 GEMM variant of ops/matmul.py on the current device, each one forced, so the
variant table (ops/matmul.py `FAST_GPU`) can be filled in from measurements.

    PYRITE_BACKEND=dawn python3 -m pyrite.bench.gemm_variants [--sizes 1024,2048,4096]
        [--linear 8192,4096,4096] [--json PATH] [--only SUBSTRING]

Shapes: square M = K = N for each size (A, B row-major), and a linear layer
x (M, K) @ w.T with w (N, K) row-major, i.e. B with unit K stride (the `b_lay "k"` fast kernel).
Each variant is timed as `pyrite bench` times (median of repeats, each spanning >= 20 ms, around a
synchronize), after a spot check: rows 0, M/2 and M-1 of the result against numpy float64, the
error reported relative to the dot-product bound K * 2^-24 * (|a| @ |b|) (so <= 1 is within the
bound; the table prints the worst ratio). "ran" says which kernel really ran: a forced fast variant
whose tile does not divide the shape falls back to the general rule, and is marked so.

Defaults: on a CPU adapter (lavapipe) sizes 128,256 and linear 256,128,128, so the script is a
smoke test there; on a GPU 1024,2048,4096 and 8192,4096,4096 (about 1-2 minutes on the H200).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

import pyrite as pr
import pyrite.ops.matmul as mmod
from pyrite import backend
from pyrite.bench import _median_time

# (name, FORCE value). "auto" is the shape rule as configured (FAST_GPU / FAST_CPU table).
# fast params: (bm, bn, tm, tn, bk, double-buffered)
VARIANTS = [
    ("auto", None),
    ("tiled-64 (general)", ("tiled", None)),
    ("fast 64x64 8x8 k16", ("fast", (64, 64, 8, 8, 16, False))),
    ("fast 64x64 8x8 k16 db", ("fast", (64, 64, 8, 8, 16, True))),
    ("fast 128x64 8x8 k16 db", ("fast", (128, 64, 8, 8, 16, True))),
    ("fast 64x128 8x8 k16 db", ("fast", (64, 128, 8, 8, 16, True))),
    ("fast 128x128 8x8 k8", ("fast", (128, 128, 8, 8, 8, False))),
    ("fast 128x128 8x8 k8 db", ("fast", (128, 128, 8, 8, 8, True))),
    ("fast 128x128 8x8 k16", ("fast", (128, 128, 8, 8, 16, False))),
    ("fast 128x128 8x8 k16 db", ("fast", (128, 128, 8, 8, 16, True))),
    ("fast 128x128 8x16 k8 db", ("fast", (128, 128, 8, 16, 8, True))),
    ("fast 128x128 16x8 k8 db", ("fast", (128, 128, 16, 8, 8, True))),
    ("fast 128x128 16x8 k8 dbu", ("fast", (128, 128, 16, 8, 8, 3))),  # (BIG_TILE)
    ("fast 128x256 8x16 k8 db", ("fast", (128, 256, 8, 16, 8, True))),
    # longer K steps and wider tiles (fewer barriers and load waits a product; 25-34 KB of workgroup memory,
    # past WebGPU's default 16 KB but within the H100's and H200's 48)
    ("fast 128x128 8x8 k32", ("fast", (128, 128, 8, 8, 32, False))),
    ("fast 128x256 8x16 k16", ("fast", (128, 256, 8, 16, 16, False))),
    ("fast 256x128 16x8 k16", ("fast", (256, 128, 16, 8, 16, False))),
    # the 16x8 tile (ops/matmul.py BIG_TILE) with other K steps and buffering
    ("fast 128x128 16x8 k8", ("fast", (128, 128, 16, 8, 8, False))),
    ("fast 128x128 16x8 k16", ("fast", (128, 128, 16, 8, 16, False))),
    ("fast 128x128 16x8 k16 db", ("fast", (128, 128, 16, 8, 16, True))),
    ("fast 128x64 16x8 k16 db", ("fast", (128, 64, 16, 8, 16, True))),
    # 96 columns: BERT's 768, 2304 and 3072 outputs in 8, 24 and 32 tiles a row (waves ~97 % full
    # where 128-wide tiles fill 73 %)
    ("fast 128x96 8x12 k16 db", ("fast", (128, 96, 8, 12, 16, True))),
    ("fast 128x96 8x12 k16", ("fast", (128, 96, 8, 12, 16, False))),
    ("fast 64x96 8x12 k16 db", ("fast", (64, 96, 8, 12, 16, True))),
    # K groups inside a workgroup (gemm_fast's `kg`): for products of few tiles (M = 128)
    ("fast 32x32 4x4 k32 db kg4", ("fast", (32, 32, 4, 4, 32, True, 4))),
    ("fast 32x32 4x4 k64 kg8", ("fast", (32, 32, 4, 4, 64, False, 8))),
    ("fast 32x64 4x4 k32 kg2", ("fast", (32, 64, 4, 4, 32, False, 2))),
    ("fast 32x64 4x4 k64 kg4", ("fast", (32, 64, 4, 4, 64, False, 4))),
    ("fast 64x64 4x4 k32 db kg2", ("fast", (64, 64, 4, 4, 32, True, 2))),
    ("fast 32x32 4x4 k16 db2 kg2", ("fast", (32, 32, 4, 4, 16, 2, 2))),
    ("fast 16x64 4x4 k64 kg4", ("fast", (16, 64, 4, 4, 64, False, 4))),
    ("fast 32x32 4x4 k32 db", ("fast", (32, 32, 4, 4, 32, True))),
    ("fast 64x64 4x4 k16 db", ("fast", (64, 64, 4, 4, 16, True))),
    # longer K steps for f16 arithmetic (its f16 sums go into f32 once a K step)
    ("fast 128x128 8x8 k32 db", ("fast", (128, 128, 8, 8, 32, True))),
    ("fast 128x128 8x16 k16 db", ("fast", (128, 128, 8, 16, 16, True))),
]


def _spot_check(a_np, b_np, c, M):
    """Worst |c - ref| / bound over rows 0, M/2, M-1 (ref and bound in float64)."""
    rows = sorted({0, M // 2, M - 1})
    got = np.stack([c[r].numpy() for r in rows]).astype(np.float64)
    a = a_np[rows].astype(np.float64)
    ref = a @ b_np
    bound = a_np.shape[1] * 2.0**-24 * (np.abs(a) @ np.abs(b_np)) + 1e-30
    return float(np.max(np.abs(got - ref) / bound))


def _shapes(sizes, linear):
    out = [(f"{s}^3", s, s, s, False) for s in sizes]
    if linear:
        m, k, n = linear
        out.append((f"{m}x{k} @ ({n}x{k}).T", m, k, n, True))
    return out


def run(sizes, linear, only=""):
    dev = backend.current()
    print(f"device: {dev.name} via {dev.impl} ({dev.adapter_type})", flush=True)
    rows = []
    rng = np.random.default_rng(0)
    for label, M, K, N, wt in _shapes(sizes, linear):
        a_np = rng.random((M, K), dtype=np.float32)
        bmat = rng.random((N, K) if wt else (K, N), dtype=np.float32)
        b_np = (bmat.T if wt else bmat).astype(np.float64)  # (K, N)
        a = pr.tensor(a_np)
        b = pr.tensor(bmat).t() if wt else pr.tensor(bmat)
        flops = 2.0 * M * N * K
        for name, force in VARIANTS:
            if only and only not in name and name != "auto":
                continue
            old = mmod.FORCE
            mmod.FORCE = force
            try:
                t0 = time.perf_counter()
                c = a @ b
                pr.synchronize()
                first = time.perf_counter() - t0
                ran = mmod.LAST
                if force is not None and ran != force:
                    rows.append({"variant": name, "shape": label, "ran": str(ran), "skipped": True})
                    print(f"  {name:26s} {label:24s} n/a (does not apply; ran {ran})", flush=True)
                    continue
                err = _spot_check(a_np, b_np, c, M)
                del c
                t = _median_time(lambda a=a, b=b: a @ b, repeats=5)
                tf = flops / t / 1e12
                rows.append(
                    {
                        "variant": name,
                        "shape": label,
                        "M": M,
                        "K": K,
                        "N": N,
                        "ran": str(ran),
                        "seconds": t,
                        "tflops": tf,
                        "err_ratio": err,
                        "first_call_s": first,
                    }
                )
                print(
                    f"  {name:26s} {label:24s} {tf:8.3f} TFLOP/s  err/bound {err:.3f}  "
                    f"(first call {first * 1e3:.0f} ms; ran {ran})",
                    flush=True,
                )
            except Exception as exc:  # noqa: BLE001 - report and go on to the next variant
                rows.append(
                    {
                        "variant": name,
                        "shape": label,
                        "error": f"{type(exc).__name__}: {exc}"[:2000],
                    }
                )
                print(
                    f"  {name:26s} {label:24s} FAILED {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0][:200]}",
                    flush=True,
                )
            finally:
                mmod.FORCE = old
    return dev, rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="", help="square sizes, comma separated")
    p.add_argument("--linear", default="", help="M,K,N of x (M,K) @ w.T, w (N,K); 'none' to skip")
    p.add_argument("--json", default="", help="write the rows here")
    p.add_argument("--only", default="", help="only variants whose name contains this")
    args = p.parse_args(argv)
    cpu = backend.current().adapter_type == "CPU"
    sizes = [int(s) for s in (args.sizes or ("128,256" if cpu else "1024,2048,4096")).split(",")]
    lin = args.linear or ("256,128,128" if cpu else "8192,4096,4096")
    linear = None if lin == "none" else tuple(int(x) for x in lin.split(","))
    t0 = time.perf_counter()
    dev, rows = run(sizes, linear, args.only)
    print(f"\n{'variant':26s} {'shape':24s} {'TFLOP/s':>9s} {'err/bound':>9s}")
    for r in rows:
        if "tflops" in r:
            flag = "" if r["err_ratio"] <= 1.0 else "  <-- OVER BOUND"
            print(
                f"{r['variant']:26s} {r['shape']:24s} {r['tflops']:9.3f} {r['err_ratio']:9.3f}{flag}"
            )
        elif "error" in r:
            print(f"{r['variant']:26s} {r['shape']:24s} {'FAILED':>9s}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.info(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
