"""Chunked vs whole-row scans (ops/reduce.py `_scan_chunk`) and the compensated sum, on the
device in use. The H200 figures beside `_scan_chunk` came from this, run as
    source scripts/h200_prelude.sh && PYRITE_BACKEND=dawn python3 scripts/scan_check.py
"""

from __future__ import annotations

import time

import pyrite as pr
from pyrite.ops import reduce as R


def median_time(fn, repeats=20):
    fn()
    pr.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        pr.synchronize()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def main():
    dev = pr.device_info()
    print(dev["name"], dev["implementation"], "loop_budget", dev["loop_budget"])
    for shape in [(1, 16 << 20), (4, 1 << 22), (64, 1 << 16), (1024, 4096)]:
        x = pr.rand(*shape)
        chunked = median_time(lambda: x.cumsum(1))
        rule = R._scan_chunk
        R._scan_chunk = lambda rows, length, mode: None  # every row scanned whole
        try:
            whole = median_time(lambda: x.cumsum(1))
        finally:
            R._scan_chunk = rule
        nbytes = 2 * x.numel() * 4
        print(
            f"cumsum {shape}: chunk rule {nbytes / chunked / 1e9:8.1f} GB/s   "
            f"whole rows {nbytes / whole / 1e9:8.1f} GB/s"
        )
    y = pr.full((16 << 20,), 0.1)
    print("sum 16M x 0.1:", y.sum().item(), "exact", 0.1 * (16 << 20))


if __name__ == "__main__":
    main()
