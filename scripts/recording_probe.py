"""The eager chain of 1,000 dependent adds, plain and recorded for backward (pyrite bench's two
overhead rows), timed to completion and, after them, with the recording C calls stubbed (the
host's Python alone; results garbage from then on). `PYRITE_BACKEND=wgpu python
scripts/recording_probe.py` (PYRITE_BOUND=0: without ops/bound.py's plans)."""

import statistics
import time

import pyrite as pr
from pyrite import backend

dev = backend.current()
w = pr.ones(1024).requires_grad_()
x = pr.ones(1024)


def plain():
    y = x
    for _ in range(1000):
        y = y + 1
    return y


def recording():
    y = w * 1.0
    for _ in range(1000):
        y = y + 1
    return y


def per_op(fn, sync):
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        fn()
        if sync:
            pr.synchronize()
        ts.append((time.perf_counter() - t) / 1000 * 1e6)
    return statistics.median(ts)


print(f"{dev.name} ({dev.impl})")
for fn in (plain, recording, plain, recording):
    fn()
pr.synchronize()
for fn in (plain, recording):
    print(f"  {fn.__name__:10s} to completion {per_op(fn, True):6.2f} us/op")
c = dev._c
if c is not None:
    c.set_pipeline = c.set_bind_group = c.dispatch = lambda *_: None
    for fn in (plain, recording):
        print(f"  {fn.__name__:10s} Python alone  {per_op(fn, False):6.2f} us/op")
