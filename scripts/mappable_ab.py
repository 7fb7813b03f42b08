"""Small results in host-mappable buffers (backend/device.py MAPPABLE, wgpu-native's
mappable-primary-buffers): the round trip of a scalar reduction's item() with and without, and
what a kernel pays to read such a scalar (it lives in host memory) against one in device
memory, GPU time by timestamps. `PYRITE_BACKEND=wgpu python scripts/mappable_ab.py`
"""

import os
import sys

import pyrite as pr
from pyrite import backend
from pyrite.bench import _median_us

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_time import kernel_times  # noqa: E402


def main():
    dev = backend.current()
    print(f"{dev.name} ({dev.impl}); mappable: {dev.pool.mappable_usage is not None}")
    usage = dev.pool.mappable_usage
    x = pr.randn(128, 768)
    big = pr.randn(4096, 4096)
    for label, u in (("device memory", None), ("mappable", usage)) * 2:
        dev.pool.mappable_usage = u
        pr.synchronize()
        t1 = _median_us(lambda: x.sum().item(), 400, 40)
        t2 = _median_us(lambda: x.mean().item(), 400, 40)
        s = big.sum()
        host = id(s._storage.buffer) in dev.pool.mappable
        k = kernel_times(lambda s=s: big * s, reps=15)
        k2 = kernel_times(lambda s=s: big[:64] * s, reps=15)
        print(
            f"  {label:<14} x.sum().item() {t1:6.1f} us, x.mean().item() {t2:6.1f} us; "
            f"big * s (s in host memory: {host}) GPU {k[0][0] / 1e3:6.1f} us, "
            f"(64x4096) * s {k2[0][0] / 1e3:5.1f} us",
            flush=True,
        )
    dev.pool.mappable_usage = usage


if __name__ == "__main__":
    main()
