"""What the dtype representations cost: bytes per element on the device and an elementwise add's
speed for each dtype, beside float32 (the figures in pyrite/dtypes.py's docstring).

    python -m pyrite.bench.dtypes [--n 16777216] [--json PATH]

uint8/int8/int16 are widened to one i32 word an element (wrapped on store), bfloat16 is packed
two a u32 word, float16 is `array<f16>`. The add reads two tensors and writes one: elements per
second and "effective" GB/s counted at the dtype's own size (what a packed representation would
move), and the device bytes actually moved.
"""

from __future__ import annotations

import argparse
import json
import time

import pyrite as pr
from pyrite.ops.core import _storage_nbytes


def run(n: int, dtypes=None, rounds: int = 25):
    """Per dtype: device bytes per element and the add's time, the minimum over `rounds`
    rounds that take every dtype in turn (interleaved, so a shared machine's load falls on all
    of them alike; medians moved 2x between runs on lavapipe's 2 shared cores, minimums 5 %)."""
    dtypes = dtypes or ["float32", "int32", "uint8", "int8", "int16", "bfloat16", "float16"]
    has_f16 = "shader-f16" in pr.device_info()["features"]
    cases = {}
    for name in dtypes:
        dt = getattr(pr, name)
        if name == "float16" and not has_f16:
            continue
        if dt.is_floating_point:
            a, b = pr.randn(n).to(dt), pr.randn(n).to(dt)
        else:
            lo, hi = max(dt.min, -100), min(dt.max, 100)
            a, b = pr.randint(lo, hi, (n,), dtype=dt), pr.randint(lo, hi, (n,), dtype=dt)
        cases[name] = (dt, a, b, pr.empty(n, dtype=dt))
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (_, a, b, out) in cases.items():
            pr.add(a, b, out=out)
            pr.synchronize()
            t0 = time.perf_counter()
            for _ in range(3):
                pr.add(a, b, out=out)
            pr.synchronize()
            times[name].append((time.perf_counter() - t0) / 3)
    ref = min(times["float32"]) if "float32" in times else None
    rows = []
    for name, (dt, *_) in cases.items():
        t = min(times[name])
        dev_bytes = _storage_nbytes(n, dt)
        row = {
            "dtype": name,
            "device_bytes_per_element": dev_bytes / n,
            "torch_bytes_per_element": dt.itemsize,
            "add_ms": t * 1e3,
            "Gelem_per_s": n / t / 1e9,
            "device_GB_per_s": 3 * dev_bytes / t / 1e9,
            "effective_GB_per_s": 3 * n * dt.itemsize / t / 1e9,
            "time_vs_float32": t / ref if ref else None,
        }
        rows.append(row)
        print(
            f"  {name:<9} {row['device_bytes_per_element']:>4.1f} B/elem on the device "
            f"(torch {dt.itemsize})  add {row['add_ms']:8.3f} ms  "
            f"{row['Gelem_per_s']:7.3f} Gelem/s  device {row['device_GB_per_s']:8.2f} GB/s  "
            f"at its own size {row['effective_GB_per_s']:8.2f} GB/s  "
            f"x{row['time_vs_float32'] or 1:.2f} of float32's time",
            flush=True,
        )
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1 << 24)
    p.add_argument("--json")
    args = p.parse_args(argv)
    info = pr.device_info()
    print(f"{info['name']} ({info['implementation']}), n = {args.n:,}")
    rows = run(args.n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"device": info["name"], "impl": info["implementation"], "rows": rows}, f, indent=1
            )


if __name__ == "__main__":
    main()
