"""Where a compiled step's time goes: host time of a call (refresh, encode+submit) against the
call's wall time with the GPU included.

    python scripts/compile_probe.py            # the bench's small GPT training step
"""

from __future__ import annotations

import time

import numpy as np

import pyrite as pr
from pyrite.bench.train import _gpt


def main():
    rng = np.random.default_rng(0)
    idx = pr.tensor(rng.integers(0, 256, (8, 64)))
    tgt = pr.tensor(rng.integers(0, 256, (8, 64)))
    pr.manual_seed(0)
    step = pr.compile(_gpt(pr, idx, tgt))
    for _ in range(30):
        step()
    pr.synchronize()
    v = step._last
    g = v.graph
    dev = pr._backend.current()
    n = 50
    host, refresh = [], []
    t_all = time.perf_counter()
    for _ in range(n):
        t0 = time.perf_counter()
        g.refresh()
        t1 = time.perf_counter()
        dev.replay(g)
        t2 = time.perf_counter()
        refresh.append(t1 - t0)
        host.append(t2 - t1)
    pr.synchronize()
    wall = (time.perf_counter() - t_all) / n
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    pr.synchronize()
    call = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    dev.replay(g)
    pr.synchronize()
    one = time.perf_counter() - t0
    print(
        f"{g.kernels} kernels: refresh {np.median(refresh) * 1e6:.0f} us, encode+submit "
        f"{np.median(host) * 1e6:.0f} us ({np.median(host) / g.kernels * 1e6:.2f} us a kernel); "
        f"back-to-back replay {wall * 1e3:.2f} ms, whole call {call * 1e3:.2f} ms, one replay "
        f"waited for {one * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
