"""Differential sweep: pyrite against torch CPU on random shapes, layouts, dtypes and arguments.

Every op in tests/sweep_ops.py runs `PYRITE_SWEEP_CASES` cases (default a few, so the file takes
well under a minute on 2 cores); each case is seeded from the op's name and its number, so a
failure reruns alone. Errors and results are compared as tests/sweep_harness.py says; the
differences pyrite documents are its allow-list (`allowed_error`, ERROR_CLASSES, EXPECT_DTYPE).

A bigger run (not part of the suite): python tests/test_sweep.py --cases 400 [--only REGEX]
"""

from __future__ import annotations

import os
import re
import sys
import zlib

import numpy as np
import pytest

from tests.sweep_harness import run_case
from tests.sweep_ops import OPS

CASES = int(os.environ.get("PYRITE_SWEEP_CASES", "6"))


def case_rng(name: str, i: int):
    return np.random.default_rng([zlib.crc32(name.encode()), i])


def run_op(op, cases, start=0):
    out = []
    for i in range(start, start + cases):
        out.append(run_case(op, case_rng(op.name, i), i))
    return out


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_sweep(op):
    fails = [o for o in run_op(op, CASES) if o.status == "FAIL"]
    assert not fails, "\n".join(f"case {o.case}: {o.detail}" for o in fails[:3])


def main(argv):
    import argparse
    import collections
    import time

    p = argparse.ArgumentParser()
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--only", default="")
    p.add_argument("--show", type=int, default=2)
    args = p.parse_args(argv)
    pat = re.compile(args.only) if args.only else None
    counts = collections.Counter()
    t0 = time.time()
    for op in OPS:
        if pat and not pat.search(op.name):
            continue
        res = run_op(op, args.cases, args.start)
        c = collections.Counter(o.status for o in res)
        counts.update(c)
        fails = [o for o in res if o.status == "FAIL"]
        if fails:
            print(f"== {op.name}: {len(fails)}/{len(res)} FAIL", flush=True)
            for o in fails[: args.show]:
                print(f"  case {o.case}: {o.detail}", flush=True)
    print(f"total {sum(counts.values())} cases: {dict(counts)} in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main(sys.argv[1:])
