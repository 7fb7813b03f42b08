"""Small-M f32 linear layers (issue 9): every candidate variant and split of K, each forced, on
`F.linear(x, w, b)` with x (M, K) and w (N, K), so the small-shape rule of ops/matmul.py
(`GEMV_MAX_M`, `FAST_GPU`, `SPLIT_FILL`) can be set from measurements.

    PYRITE_BACKEND=dawn python3 -m pyrite.bench.gemm_small [--m 1,8,32,128] [--json PATH]

Each candidate's result is checked against numpy float64 (worst error over the bound
K * 2^-24 * (|x| @ |w|.T), printed when above 1) and timed as the median of 3 timings of
back-to-back calls spanning >= 5 ms, around a synchronize; the table gives microseconds a call
and the best candidate per shape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import pyrite as pr
import pyrite.ops.matmul as mmod
from pyrite import backend

FAST_TILES = [
    (64, 64, 8, 8, 16, True),
    (64, 64, 4, 4, 16, True),
    (32, 128, 4, 8, 16, True),
    (32, 64, 4, 8, 16, True),
    (32, 32, 4, 4, 16, True),
    (16, 64, 4, 4, 16, True),
    # longer K steps for small outputs: a 128x768 . 768^2 product's 24-96 workgroups spend its
    # 48 K steps of 16 mostly waiting on each step's loads (the tuned 32x32 tile: 32.5 us of GPU
    # for 0.15 GFLOP); 32 or 64 a step halves or quarters the waits (workgroup memory: 18-45 KB,
    # the H200 allows 48)
    (32, 32, 4, 4, 32, True),
    (32, 32, 4, 4, 64, True),
    (32, 64, 4, 8, 32, True),
    (64, 64, 4, 4, 32, True),
    (16, 64, 4, 4, 64, True),
    # the big shapes' tiles (ops/matmul.py FAST_GPU, FAST_GPU_DAWN), so `pyrite tune --shapes`
    # of a large product weighs them too
    (128, 128, 16, 8, 8, True),
    (128, 128, 16, 8, 8, 3),  # (BIG_TILE_16X8: the unconditional prefetch, Dawn's big tile)
    (128, 128, 8, 8, 16, 3),  # (BIG_TILE: wgpu-native's)
    (64, 64, 8, 8, 16, False),
    # K groups inside a workgroup (kernels/matmul.py gemm_fast's `kg`, the 7th word): 2-8 times
    # the invocations on the same few tiles, each summing part of every K step
    (32, 32, 4, 4, 32, True, 4),
    (32, 32, 4, 4, 64, False, 8),
    (32, 64, 4, 4, 32, False, 2),
    (32, 64, 4, 4, 64, False, 4),
    (64, 64, 4, 4, 32, True, 2),
    (16, 64, 4, 4, 64, False, 4),
    # the deep prefetch (dbuf 2: loads two K steps ahead; ops/matmul.py KG2_TILE)
    (32, 32, 4, 4, 16, 2, 2),
]
SPLITS = (1, 2, 4, 8, 16)
SHAPES = [(768, 768), (768, 3072), (3072, 768), (4096, 4096)]


def _time(fn):
    from . import _busy, warm_gpu

    warm_gpu()  # (the GPU's clocks: see pyrite.bench.warm_gpu)
    fn()
    pr.synchronize()
    t0 = time.perf_counter()
    fn()
    pr.synchronize()
    one = time.perf_counter() - t0
    inner = max(1, min(500, int(0.005 / max(one, 1e-6))))
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        pr.synchronize()
        ts.append((time.perf_counter() - t0) / inner)
    _busy()
    return statistics.median(ts)


def candidates(M):
    out = [("auto", None, None)]
    if M <= 8:
        rm = mmod.baked_rows(M)
        out.append((f"gemv rows {rm}", ("gemv", (rm, 4)), None))
        out.append(("direct 64x1 1x4", ("direct", (64, 1, 1, 4)), None))
        out.append(("direct 8x8 4x4", ("direct", (8, 8, 4, 4)), None))
    for t in FAST_TILES:
        if M % t[0]:
            continue
        for S in SPLITS:
            kg = f" kg{t[6]}" if len(t) > 6 else ""
            db = " db2" if t[5] == 2 else ""
            name = f"fast {t[0]}x{t[1]} {t[2]}x{t[3]} k{t[4]}{db}{kg} S={S}"
            out.append((name, ("fast", t), S))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m pyrite.bench.gemm_small")
    p.add_argument("--m", default="1,4,8,16,32,64,128,256,512")
    p.add_argument("--shapes", default=",".join(f"{k}x{n}" for k, n in SHAPES), help="KxN,...")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    info = pr.device_info()
    print(f"gemm_small on {info['name']} ({info['implementation']})")
    F = pr.nn.functional
    rng = np.random.default_rng(0)
    rows = []
    for kn in args.shapes.split(","):
        K, N = map(int, kn.split("x"))
        wa = (rng.standard_normal((N, K)) / np.sqrt(K)).astype(np.float32)
        ba = rng.standard_normal(N).astype(np.float32)
        w, b = pr.tensor(wa), pr.tensor(ba)
        for M in map(int, args.m.split(",")):
            xa = rng.standard_normal((M, K)).astype(np.float32)
            x = pr.tensor(xa)
            ref = xa.astype(np.float64) @ wa.T.astype(np.float64) + ba
            bound = K * 2.0**-24 * (np.abs(xa) @ np.abs(wa).T + np.abs(ba)) + 1e-30
            best = None
            for name, force, S in candidates(M):
                mmod.FORCE = force
                mmod.FORCE_SPLIT = None if S is None else (S, force)
                try:
                    got = F.linear(x, w, b)
                    ran = mmod.LAST
                    err = float(np.max(np.abs(got.numpy() - ref) / bound))
                    t = _time(lambda: F.linear(x, w, b))
                except Exception as exc:  # noqa: BLE001
                    print(f"  M={M} {K}x{N} {name}: failed {type(exc).__name__}: {exc}")
                    continue
                finally:
                    mmod.FORCE = mmod.FORCE_SPLIT = None
                if force is not None and ran != force:
                    continue  # the variant did not apply (fell back to the rule)
                us = t * 1e6
                row = {"M": M, "K": K, "N": N, "variant": name, "us": us, "err": err,
                       "gflops": 2 * M * N * K / t / 1e9}  # fmt: skip
                rows.append(row)
                if best is None or us < best["us"]:
                    best = row
                flag = "  ERROR" if err > 1 else ""
                print(
                    f"  M={M:<4} {K}x{N:<5} {name:<26} {us:9.1f} us {row['gflops']:8.0f} GFLOP/s{flag}"
                )
            if best is not None:
                print(f"  -> M={M} {K}x{N}: best {best['variant']} {best['us']:.1f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": info, "rows": rows}, f, indent=1)
    backend.current()
    return rows


if __name__ == "__main__":
    main()
