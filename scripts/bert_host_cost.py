"""The Python side of an eager BERT-base forward (issue 9's batch-1 row, pyrite/bench/bert.py):
12 layers at 1 x 128 tokens under no_grad, run once for real, then with every C call that records
a dispatch replaced by a no-op (as scripts/python_cost.py does), so the timing is pyrite's Python
alone (modules, ops, planning, the pool, dispatch bookkeeping). Results are garbage: timing only.
`python scripts/bert_host_cost.py [--layers N] [--profile]`"""

import argparse
import cProfile
import pstats
import sys
import time

import numpy as np
from _opcount import opcodes

import pyrite as pr
from pyrite import backend
from pyrite.bench.bert import build

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=12)
ap.add_argument("--runs", type=int, default=7, help="timings, the best reported")
ap.add_argument("--n", type=int, default=20, help="forwards a timing")
ap.add_argument("--profile", action="store_true", help="cProfile by tottime and cumtime")
ap.add_argument(
    "--opcodes", action="store_true", help="bytecodes and Python calls a forward, by function"
)
args = ap.parse_args()

dev = backend.current()
c = dev._c
if c is None:
    sys.exit("bert_host_cost: needs the C path (not PYRITE_SAFE_CALLS)")


def _nop(*_):
    return None


pr.manual_seed(0)
model = build(pr, layers=args.layers)
x = pr.tensor(np.random.default_rng(0).standard_normal((1, 128, 768)).astype(np.float32))

with pr.no_grad():
    model(x).numpy()  # (once for real: device probes, pipelines, plans)
    c.set_pipeline = c.set_bind_group = c.dispatch = _nop
    for _ in range(3):
        model(x)
    d0 = dev.dispatches
    model(x)
    per = dev.dispatches - d0

    if args.opcodes:
        counts, funcs = opcodes(lambda: model(x))
        print(
            f"BERT-base {args.layers} layers, 1x128, eager: {counts['op']} bytecodes, "
            f"{counts['call']} Python calls a forward, {per} dispatches"
        )
        for k, v in sorted(funcs.items(), key=lambda kv: -kv[1])[:40]:
            print(f"  {v:7d}  {k}")
    elif args.profile:
        p = cProfile.Profile()
        p.enable()
        for _ in range(args.n):
            model(x)
        p.disable()
        for key in ("tottime", "cumtime"):
            pstats.Stats(p).sort_stats(key).print_stats(35)
    else:
        best = 1e9
        for _ in range(args.runs):
            t = time.perf_counter()
            for _ in range(args.n):
                model(x)
            best = min(best, (time.perf_counter() - t) / args.n)
        print(
            f"{dev.name} ({dev.impl}): BERT-base {args.layers} layers, 1x128, eager, C recording "
            f"stubbed: {best * 1e3:.3f} ms a forward, {per} dispatches a forward, "
            f"{best * 1e6 / per:.1f} us a dispatch"
        )
