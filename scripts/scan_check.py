"""Chunked vs whole-row scans (ops/reduce.py _scan_chunk) and the compensated sum, on the
device in use; the H200 figures beside _scan_chunk came from this (via scripts/h200_prelude.sh)."""
import time, sys
import pyrite as pr
from pyrite.ops import reduce as R
dev = pr.device_info()
print(dev["name"], dev["implementation"], "loop_budget", dev["loop_budget"])
def t(fn, rep=20):
    fn(); pr.synchronize()
    ts = []
    for _ in range(rep):
        t0 = time.perf_counter(); fn(); pr.synchronize(); ts.append(time.perf_counter() - t0)
    ts.sort(); return ts[len(ts)//2]
for shape in [(1, 16 << 20), (4, 1 << 22), (64, 1 << 16), (1024, 4096)]:
    x = pr.rand(*shape)
    on = t(lambda: x.cumsum(1))
    orig = R._scan_chunk
    R._scan_chunk = lambda rows, length, mode: None
    off = t(lambda: x.cumsum(1))
    R._scan_chunk = orig
    nb = 2 * x.numel() * 4
    print(f"cumsum {shape}: chunk rule {nb/on/1e9:8.1f} GB/s   whole rows {nb/off/1e9:8.1f} GB/s")
y = pr.full((16 << 20,), 0.1)
print("sum 16M x 0.1:", y.sum().item(), "exact", 0.1 * (16 << 20))
