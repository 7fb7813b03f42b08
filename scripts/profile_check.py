"""Does pr.profiler read a model's device time truly? For the BERT-base forward (batch 1 and 32
x 128, no_grad) and one of its linears: the wall time of a synchronized call without the
profiler; inside it, the wall time, the sum of the events' device times, their span (first start
to last end) and how many events begin before the one before them ended; the same through the
checked call path alone (no timestamps) and with a wait after every kernel (the profiler's mode
for adapters without timestamps); for batch 32, also after 5 s idle. `PYRITE_BACKEND=wgpu python scripts/profile_check.py [LAYERS]`"""

import statistics
import sys
import time

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench.bert import build as bert


def wall_ms(fn, reps=5):
    pr.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        pr.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def profiled(fn, exact=True):
    dev = backend.current()
    saved = dev.features
    if not exact:
        dev.features = [f for f in saved if f != "timestamp-query"]
    try:
        t = time.perf_counter()
        with pr.profiler.profile() as prof:
            fn()
        wall = (time.perf_counter() - t) * 1e3
    finally:
        dev.features = saved
    ev = sorted(prof.events(), key=lambda e: e.start_ns)
    total = sum(e.device_ns for e in ev) / 1e6
    span = (max(e.start_ns + e.device_ns for e in ev) - ev[0].start_ns) / 1e6
    early = sum(b.start_ns < a.start_ns + a.device_ns for a, b in zip(ev, ev[1:]))
    gaps = [b.start_ns - (a.start_ns + a.device_ns) for a, b in zip(ev, ev[1:])]
    return wall, total, span, early, len(ev), statistics.median(gaps) / 1e3 if gaps else 0.0, ev


def checked_wall(fn):
    """The wall time through wgpu-py's checked calls, one pass a kernel, no timestamps."""
    from pyrite.backend.capi import CheckedPath

    dev = backend.current()
    with dev._lock:
        dev._flush()
        saved = (dev._c, dev._io)
        dev._io, dev._c = CheckedPath(dev.device), None
    try:
        return wall_ms(fn)
    finally:
        with dev._lock:
            dev._flush()
            dev._c, dev._io = saved


rng = np.random.default_rng(0)
layers = int(sys.argv[1]) if len(sys.argv) > 1 else 12  # (fewer for a smoke test)
model = bert(pr, layers=layers)
lin = pr.nn.Linear(768, 3072)
cases = {
    "bert_b1": pr.tensor(rng.standard_normal((1, 128, 768)).astype(np.float32)),
    "bert_b32": pr.tensor(rng.standard_normal((32, 128, 768)).astype(np.float32)),
}
a = pr.tensor(rng.standard_normal((4096, 768)).astype(np.float32))
print(f"{backend.current().name} ({backend.current().impl})")
with pr.no_grad():
    fns = {k: (lambda x=x: model(x)) for k, x in cases.items()}
    fns["linear_4096x768x3072"] = lambda: lin(a)
    fns["linear_x12"] = lambda: [lin(a) for _ in range(12)]
    for _ in range(3):
        for f in fns.values():
            f()
    for name, fn in fns.items():
        w = wall_ms(fn)
        cw = checked_wall(fn)
        rows = []
        for rep in range(2):
            rows.append(profiled(fn))
        nx = profiled(fn, exact=False)
        print(f"\n== {name}: wall {w:.3f} ms; checked path {cw:.3f} ms")
        for i, (pw, tot, span, early, n, gap, ev) in enumerate(rows):
            print(
                f"  profile {i}: wall {pw:.3f} ms, {n} events, sum {tot:.3f} ms, span {span:.3f} ms,"
                f" {early} begin before the previous ends, median gap {gap:.2f} us"
            )
        ev = rows[-1][-1]
        fam = {}
        for e in ev:
            fam.setdefault(e.kernel, []).append(e.device_ns / 1e3)
        for k, v in sorted(fam.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"    {k:12s} n={len(v):3d} median {statistics.median(v):9.2f} us  max {max(v):9.2f}"
            )
        print(
            f"  waiting after each kernel: wall {nx[0]:.3f} ms, sum of kernel walls {nx[1]:.3f} ms"
        )
        if name == "bert_b32":
            time.sleep(
                5
            )  # (the card's slow state: 2-4 s without sustained work, gpu_slow_state.py)
            pw, tot, span, early, n, gap, _ = profiled(fn)
            print(f"  after 5 s idle: wall {pw:.3f} ms, sum {tot:.3f} ms, span {span:.3f} ms")
            time.sleep(5)
            print(f"  after 5 s idle, no profiler: wall {wall_ms(fn, reps=1):.3f} ms")
            first = [(e.kernel, e.start_ns / 1e3, e.device_ns / 1e3) for e in ev[:24]]
            for k, s, d in first:
                print(f"    {k:12s} start {s:10.1f} us  dur {d:9.1f} us")
