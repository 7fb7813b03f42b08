"""A/B of the small-readback path (device.read_many): the persistent staging buffer mapped and
waited for through the C path (capi.py) against wgpu-py's queue.read_buffer, interleaved in one
process: `python scripts/readback_ab.py`."""

import time

import numpy as np

import pyrite as pr
from pyrite import backend

x = pr.randn(128, 768)
dev = backend.current()
st = dev._staging
for mode in ["staging", "read_buffer"] * 2:
    dev._staging = st if mode == "staging" else None
    for _ in range(10):
        x.sum().item()
    ts = []
    for _ in range(100):
        t = time.perf_counter()
        v = x.sum().item()
        ts.append(time.perf_counter() - t)
    ts2 = []
    for _ in range(100):
        t = time.perf_counter()
        pr.synchronize()
        ts2.append(time.perf_counter() - t)
    ts3 = []
    for _ in range(100):
        t = time.perf_counter()
        x[0, 0].item()
        ts3.append(time.perf_counter() - t)
    print(
        f"{mode:12s} sum().item() {np.median(ts) * 1e6:7.1f} us  x[0,0].item() {np.median(ts3) * 1e6:7.1f}  synchronize {np.median(ts2) * 1e6:7.1f} us"
    )
