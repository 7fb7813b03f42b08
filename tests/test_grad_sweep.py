"""Gradient sweep: every op of the forward sweep (tests/sweep_ops.py) run backward against torch.

For each op whose torch result is floating and differentiable, `PYRITE_GRAD_SWEEP_CASES` cases
(default 3) of its forward generator are run with float32 inputs requiring grad; torch's and
pyrite's gradients of sum(out * w), for a fixed random cotangent w, are compared input by input
(tests/grad_sweep_harness.py says how). A missing rule (pyrite's NotImplementedError naming the op)
is the to-do list, not a failure; a wrong gradient, a gradient pyrite leaves None or zero where
torch has one, or an output torch records and pyrite does not, is a failure.

The summary table (not part of the suite):
    python tests/test_grad_sweep.py --cases 20 [--only REGEX] [--show 2]
"""

from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np
import pytest

from tests.grad_sweep_harness import run_grad_case
from tests.sweep_ops import OPS

CASES = int(os.environ.get("PYRITE_GRAD_SWEEP_CASES", "3"))


def case_rng(name: str, i: int):
    # the forward sweep's seeds: case i of an op is the forward sweep's case i, run backward
    return np.random.default_rng([zlib.crc32(name.encode()), i])


def run_op(op, cases, start=0):
    """`cases` cases that ran backward on both sides: the forward generator's cases from
    `start` on, passing over those without a float input (its dtypes cycle with the case
    number) or that torch refuses; an op none of whose outputs has a gradient stops early."""
    out, ran, no_grad = [], 0, 0
    i = start
    while ran < cases and i < start + 8 * cases + 12 and no_grad < 3:
        o = run_grad_case(op, case_rng(op.name, i), i)
        out.append(o)
        if o.status != "skip":
            ran += 1
        elif o.detail.startswith("no output has a gradient"):
            no_grad += 1
        i += 1
    return out


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_grad_sweep(op):
    fails = [o for o in run_op(op, CASES) if o.status == "FAIL"]
    assert not fails, "\n".join(f"case {o.case}: {o.detail}" for o in fails[:3])


def main(argv):
    import argparse
    import collections
    import time

    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=20)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--only", default="")
    p.add_argument("--show", type=int, default=1)
    args = p.parse_args(argv)
    pat = re.compile(args.only) if args.only else None
    t0 = time.time()
    ok, documented, failing, untested = [], collections.defaultdict(set), {}, []
    counts = collections.Counter()
    skips = collections.Counter()
    for op in OPS:
        if pat and not pat.search(op.name):
            continue
        res = run_op(op, args.cases, args.start)
        counts.update(o.status for o in res)
        skips.update(o.detail.split(":")[0] for o in res if o.status == "skip")
        fails = [o for o in res if o.status == "FAIL"]
        docs = [o for o in res if o.status == "documented"]
        if fails:
            failing[op.name] = fails
            print(f"FAIL {op.name}: {len(fails)}/{len(res)}", flush=True)
            for o in fails[: args.show]:
                print(f"  case {o.case}: {o.detail}", flush=True)
        elif docs:
            for o in docs:
                documented[o.detail].add(op.name)
        elif any(o.status == "ok" for o in res):
            ok.append(op.name)
        else:
            untested.append(op.name)
    print(f"\n{sum(counts.values())} cases {dict(counts)} in {time.time() - t0:.0f}s")
    print(f"ops ok: {len(ok)}")
    n_doc = len(set().union(*documented.values())) if documented else 0
    print(f"ops with missing rules: {n_doc} ({len(documented)} rules)")
    for rule, names in sorted(documented.items()):
        print(f"  {rule}: {', '.join(sorted(names))}")
    print(f"ops failing: {len(failing)}")
    for name, fails in failing.items():
        print(f"  {name}: {fails[0].detail.splitlines()[0]}")
    print(f"ops untested (every case skipped): {len(untested)}")
    print("  " + ", ".join(untested))
    print("skips: " + ", ".join(f"{k} {v}" for k, v in skips.most_common()))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(sys.argv[1:])
