"""The Python side of eager ops alone (issue 9): every C call that records a dispatch is replaced
by a no-op, so nothing reaches the GPU and the timings are pyrite's Python (ops, planning, the
pool, the dispatch bookkeeping) on this host, steady from run to run even on lavapipe, where a
normal timing also holds the CPU's share of running the kernels. Results are garbage: timing
only. `python scripts/python_cost.py [--profile EXPR | --opcodes [-v]]` (--opcodes: bytecodes
and Python calls a call, counted by a trace function: the same on every run, where a shared
host's timings are not)"""

import cProfile
import pstats
import sys
import time

import numpy as np
from _opcount import opcodes

import pyrite as pr
from pyrite import backend

F = pr.nn.functional
dev = backend.current()
c = dev._c
if c is None:
    sys.exit("python_cost: needs the C path (not PYRITE_SAFE_CALLS)")


def _nop(*_):
    return None


rng = np.random.default_rng(0)
x = pr.tensor(rng.standard_normal((128, 768)).astype(np.float32))
w = pr.tensor(rng.standard_normal((768, 768)).astype(np.float32))
b = pr.tensor(rng.standard_normal(768).astype(np.float32))
x3 = pr.tensor(rng.standard_normal((2, 64, 768)).astype(np.float32))
y1k = pr.ones(1024)  # (the bench's overhead chain: y = y + 1)
CASES = {
    "y1k + 1": lambda: y1k + 1,
    "x * 0.03": lambda: x * 0.03,
    "x + x": lambda: x + x,
    "x.relu()": lambda: x.relu(),
    "F.gelu(x)": lambda: F.gelu(x),
    "F.linear(x, w)": lambda: F.linear(x, w),
    "F.linear(x, w, b)": lambda: F.linear(x, w, b),
    "F.linear(x3, w, b)": lambda: F.linear(x3, w, b),
    "x.sum()": lambda: x.sum(),
    "x.sum(-1)": lambda: x.sum(-1),
    "F.softmax(x, -1)": lambda: F.softmax(x, -1),
    "F.layer_norm(x, (768,))": lambda: F.layer_norm(x, (768,)),
    "x.t().contiguous()": lambda: x.t().contiguous(),
    "x.reshape(2, 64, 768)": lambda: x.reshape(2, 64, 768),
    "pr.empty(128, 768)": lambda: pr.empty(128, 768),
}


for fn in CASES.values():  # (once for real: device probes, pipelines, plans)
    fn()
pr.synchronize()
c.set_pipeline = c.set_bind_group = c.dispatch = _nop


def best(fn, n=500, runs=7):
    for _ in range(n):
        fn()
    out = 1e9
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out = min(out, time.perf_counter() - t)
    return out / n * 1e6


if "--opcodes" in sys.argv:
    print(f"{dev.name} ({dev.impl}): bytecodes / Python calls a call, C recording calls stubbed")
    for name, fn in CASES.items():
        counts, per = opcodes(fn)
        print(f"  {name:26s} {counts['op']:6d} ops {counts['call']:4d} calls")
        if "-v" in sys.argv:
            for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:25]:
                print(f"      {v:5d}  {k}")
elif "--profile" in sys.argv:
    fn = CASES[sys.argv[sys.argv.index("--profile") + 1]]
    best(fn, 200, 1)
    p = cProfile.Profile()
    p.enable()
    for _ in range(3000):
        fn()
    p.disable()
    pstats.Stats(p).sort_stats("tottime").print_stats(20)
else:
    print(f"{dev.name} ({dev.impl}): Python per call, C recording calls stubbed out")
    for name, fn in CASES.items():
        print(f"  {name:26s} {best(fn):6.2f} us")
