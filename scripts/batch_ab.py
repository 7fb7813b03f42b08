"""A/B of the batch sizes (backend/device.py BATCH_FIRST after an idle wait, BATCH_DISPATCHES the
most a batch grows to), interleaved in one process: a batch-1 BERT-base forward and issue 9's
chain of linears; then where each one's time goes when recorded as one batch.
`PYRITE_BACKEND=wgpu|dawn python scripts/batch_ab.py`"""

import statistics
import time

import pyrite as pr
from pyrite import backend
from pyrite.backend import device as devmod
from pyrite.bench.bert import build

dev = backend.current()
model = build(pr)
x = pr.randn(1, 128, 768)
w = pr.randn(768, 768) * 0.03
F = pr.nn.functional


def bert():
    with pr.no_grad():
        model(x)


def chain():
    y = x[0]
    for _ in range(100):
        y = F.linear(y, w) * 0.03


SETTINGS = ((8, 256), (256, 256), (8, 64), (8, 32), (4, 16))
res = {}
for _ in range(5):
    for first, cap in SETTINGS:
        devmod.BATCH_FIRST, devmod.BATCH_DISPATCHES = first, cap
        for name, fn in (("bert", bert), ("chain", chain)):
            fn()
            pr.synchronize()
            ts = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn()
                pr.synchronize()
                ts.append(time.perf_counter() - t0)
            res.setdefault((name, first, cap), []).append(min(ts))
for (name, first, cap), v in sorted(res.items()):
    print(
        f"  {dev.impl} {name:5s} first {first:<3d} most {cap:<3d} {statistics.median(v) * 1e3:7.2f} ms"
    )
devmod.BATCH_DISPATCHES = 256

# where a batch-1 forward's time goes: recording (Python + the C calls), the submit, the wait
devmod.BATCH_FIRST = 10**6
dev._batch_limit = 10**6
for _ in range(3):
    bert()
    pr.synchronize()
for label, fn in (("bert", bert), ("chain", chain)):
    rec, sub, wait = [], [], []
    for _ in range(7):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        dev.flush()
        t2 = time.perf_counter()
        pr.synchronize()
        t3 = time.perf_counter()
        rec.append(t1 - t0)
        sub.append(t2 - t1)
        wait.append(t3 - t2)
    d0 = dev.dispatches
    fn()
    n = dev.dispatches - d0
    pr.synchronize()
    r = statistics.median(rec)
    print(f"  {dev.impl} {label} as one batch: {n} dispatches, record {r * 1e3:.2f} ms "
          f"({r / n * 1e6:.1f} us each), submit {statistics.median(sub) * 1e3:.2f} ms, "
          f"wait {statistics.median(wait) * 1e3:.2f} ms")  # fmt: skip
# the same recording with the C calls replaced by nothing: Python's share
c = dev._c
real = (c.set_pipeline, c.set_bind_group, c.dispatch)
c.set_pipeline = c.set_bind_group = c.dispatch = lambda *a: None
for label, fn in (("bert", bert), ("chain", chain)):
    ts = []
    for _ in range(7):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        dev._end_pass()
        dev._io.drop(dev._encoder, None)
        dev._encoder = None
        dev._info_pos = dev._info_new = dev._count = 0
        dev._info_slots.clear()
        dev.pool.batch_submitted()
    print(
        f"  {dev.impl} {label}: Python alone (no pass calls) {statistics.median(ts) * 1e3:.2f} ms"
    )
c.set_pipeline, c.set_bind_group, c.dispatch = real
import cProfile  # noqa: E402
import pstats  # noqa: E402

prof = cProfile.Profile()
prof.enable()
bert()
prof.disable()
pr.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(8)
