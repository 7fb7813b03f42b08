"""pr.lgamma's error against mpmath (exact), beside torch.lgamma's (CPU float32), in ulp of the
f32 spacing at |lgamma(x)| (so relative to the result, however small: near a root of lgamma
an absolute error that is fine elsewhere is many ulp).

Regions: the f32 neighbours of each negative root (scripts/lgamma_tables.py), random points
within the root's distance to its pole on either side of it, the f32 neighbours of the poles
-1..-70, uniform on [-70, 0.5), and x >= 0.5 (uniform on [0.5, 100], log-uniform to 1e30).

    .venv/bin/python scripts/lgamma_check.py [--roots K] [--n N] [--per-interval]
"""

from __future__ import annotations

import argparse
import os
import sys

import mpmath as mp
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lgamma_tables  # noqa: E402

import pyrite as pr  # noqa: E402


def exact(x):
    """log|Gamma(x)| for f32 x, by mpmath; inf at the poles."""
    out = np.empty(len(x), np.float64)
    with mp.workdps(60):
        for i, v in enumerate(x.astype(np.float64)):
            if v <= 0 and v == np.floor(v):
                out[i] = np.inf
            else:
                out[i] = float(mp.log(abs(mp.gamma(mp.mpf(float(v))))))
    return out


def ulps(got, want):
    """|got - want| in f32 spacings at |want| (an inf matched exactly is 0)."""
    got = got.astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    sp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf (then `same`)
        e = np.abs(got - want) / np.maximum(sp, 2.0**-149)
    return np.where(same, 0.0, e)


def f32_neighbours(v, n):
    """the 2n + 1 f32 values nearest v (v's rounding and n steps either way)."""
    c = np.float32(v)
    out = [c]
    lo = hi = c
    for _ in range(n):
        lo, hi = np.nextafter(lo, np.float32(-np.inf)), np.nextafter(hi, np.float32(np.inf))
        out += [lo, hi]
    return np.array(out, np.float32)


def samples(k_roots, n, rng):
    regions = {}
    near, around = [], []
    for k in range(3, k_roots + 1):
        for r, pole in zip(lgamma_tables.roots(k), (-k + 1, -k)):
            rf = float(r)
            near.append(f32_neighbours(rf, 40))
            # within the root's distance to its pole, either side (f32 may round onto the pole)
            dist = abs(rf - pole)
            around.append(rf + rng.uniform(-dist, dist, n // 200).astype(np.float64))
    regions["root neighbours"] = np.concatenate(near)
    regions["around roots"] = np.concatenate(around).astype(np.float32)
    regions["pole neighbours"] = np.concatenate(
        [f32_neighbours(-p, 30) for p in range(1, 71)]
    )  # includes the poles themselves (inf)
    regions["uniform [-70, 0.5)"] = rng.uniform(-70, 0.5, n).astype(np.float32)
    regions["[0.5, 100]"] = rng.uniform(0.5, 100, n // 4).astype(np.float32)
    regions["[100, 1e30]"] = np.exp(rng.uniform(np.log(100), np.log(1e30), n // 8)).astype(
        np.float32
    )
    return regions


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", type=int, default=30, help="roots of (-k, -k + 1) up to k")
    ap.add_argument("--n", type=int, default=40000, help="uniform samples")
    ap.add_argument("--per-interval", action="store_true", help="worst per unit interval")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    print(pr.device_info()["name"], pr.device_info()["implementation"])
    print(f"{'region':22s} {'n':>6s} | {'pyrite max':>10s} {'p99.9':>8s} {'p50':>6s} | "
          f"{'torch max':>10s} {'p99.9':>8s} {'p50':>6s}")  # fmt: skip
    allx, allp, allt = [], [], []
    for name, x in samples(args.roots, args.n, rng).items():
        want = exact(x)
        ep = ulps(pr.lgamma(pr.tensor(x)).numpy(), want)
        et = ulps(torch.lgamma(torch.from_numpy(x)).numpy(), want)
        stats = []
        for e in (ep, et):
            stats += [e.max(), np.percentile(e, 99.9), np.median(e)]
        print(f"{name:22s} {len(x):6d} | {stats[0]:10.1f} {stats[1]:8.1f} {stats[2]:6.2f} | "
              f"{stats[3]:10.1f} {stats[4]:8.1f} {stats[5]:6.2f}")  # fmt: skip
        worst = int(np.argmax(ep))
        print(f"{'':22s} pyrite's worst at x = {x[worst]!r} (want {want[worst]:.9g})")
        allx.append(x), allp.append(ep), allt.append(et)
    if args.per_interval:
        x, ep, et = (np.concatenate(v) for v in (allx, allp, allt))
        print("worst per interval (-k, -k + 1): k, pyrite, torch, pyrite/torch")
        for k in range(1, 71):
            m = (x > -k) & (x < -k + 1)
            if m.any():
                a, b = ep[m].max(), et[m].max()
                print(f"  {k:3d} {a:10.1f} {b:10.1f} {a / max(b, 0.5):8.1f}")


if __name__ == "__main__":
    main()
