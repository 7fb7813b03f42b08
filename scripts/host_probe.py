"""Host-side cost of eager ops on the current device (issue 9): per-op issue time of a few ops
(best of 15 runs of 200 calls, no synchronisation inside a run), the chain of linears with and
without a final synchronisation, the parts of `x.sum().item()`, and a cProfile of the chain.

    python3 scripts/host_probe.py [--profile]
"""

import cProfile
import pstats
import sys
import time

import numpy as np

import pyrite as pr

F = pr.nn.functional
rng = np.random.default_rng(0)
x = pr.tensor(rng.standard_normal((128, 768)).astype(np.float32))
w = pr.tensor((rng.standard_normal((768, 768)) / 28).astype(np.float32))
b = pr.tensor(rng.standard_normal(768).astype(np.float32))


def best(fn, n=200, runs=15, sync=False):
    for _ in range(3):
        for _ in range(n):
            fn()
        pr.synchronize()
    out = 1e9
    for _ in range(runs):
        pr.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            pr.synchronize()
        out = min(out, time.perf_counter() - t)
    return out / n * 1e6


def chain():
    y = x
    for _ in range(100):
        y = F.linear(y, w) * 0.03
    return y


print(pr.backend.current().name, pr.backend.current().impl)
for name, fn in [
    ("F.linear(x, w)", lambda: F.linear(x, w)),
    ("F.linear(x, w, b)", lambda: F.linear(x, w, b)),
    ("x * 0.03", lambda: x * 0.03),
    ("x + x", lambda: x + x),
    ("x.sum()", lambda: x.sum()),
    ("pr.empty(128, 768)", lambda: pr.empty(128, 768)),
]:
    print(f"  host issue {name:22s} {best(fn):7.2f} us/op")
print(f"  chain, host issue only     {best(chain, 1, 10) / 200:7.2f} us/op")
print(f"  chain, with synchronize    {best(chain, 1, 10, True) / 200:7.2f} us/op")
s = x.sum()
print(f"  x.sum().item()             {best(lambda: x.sum().item()):7.2f} us")
print(f"  s.item() (s ready)         {best(lambda: s.item()):7.2f} us")
print(f"  x.sum(); synchronize()     {best(lambda: (x.sum(), pr.synchronize())):7.2f} us")
print(f"  x[0, 0].item()             {best(lambda: x[0, 0].item()):7.2f} us")
if "--profile" in sys.argv:
    p = cProfile.Profile()
    p.enable()
    for _ in range(20):
        chain()
    pr.synchronize()
    p.disable()
    pstats.Stats(p).sort_stats("tottime").print_stats(25)
