"""The command line the differential fuzzers share (scripts/fuzz_*.py): `--seeds a:b` (or a list:
`3,17,40:60`), `--show N` (one seed's case and its verdict), `--verbose`, and the tally.

A fuzzer gives `build(seed) -> case`, `check(case) -> (status, detail)` and
`describe(case) -> str`. A status is "ok", "fail", or the name of a class of difference the
fuzzer explains ("intentional", "known", "skip"), tallied by its detail's first clause. A crash
of the harness itself is a failure. The exit code is 1 where any seed failed."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


class Draws:
    """A seed's random draws, the base of each fuzzer's case builder: `r(k)` an int in [0, k),
    `chance(p)` True with probability p, `pick(seq)` one element."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def r(self, k):
        return int(self.rng.integers(0, k))

    def chance(self, p):
        return bool(self.rng.random() < p)

    def pick(self, seq):
        return seq[self.r(len(seq))]

    def prime_factors(self, n):
        """n's prime factors, small primes first, then the rest as one: the parts from which
        a fuzzer builds a random shape of n elements (no draw: the seed's sequence stays)."""
        fs, m = [], n
        for q in (2, 3, 5, 7, 11, 13):
            while m % q == 0:
                fs.append(q)
                m //= q
        if m > 1:
            fs.append(m)
        return fs


def parse_seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        if ":" in part:
            a, b = part.split(":")
            out += range(int(a), int(b))
        elif part:
            out.append(int(part))
    return out


def run(doc, build, check, describe, argv=None, add_options=None, configure=None) -> int:
    """Parse argv and run: `add_options(parser)` adds a fuzzer's own options, `configure(args)`
    applies them before any case is built."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--seeds", default="0:50", help="a:b, or a list: 3,17,40:60")
    ap.add_argument("--show", type=int, help="print one seed's case and its verdict")
    ap.add_argument("--verbose", action="store_true")
    if add_options is not None:
        add_options(ap)
    args = ap.parse_args(argv)
    if configure is not None:
        configure(args)
    if args.show is not None:
        case = build(args.show)
        print(describe(case))
        print(check(case))
        return 0
    counts = {"ok": 0, "fail": 0}
    classes: dict[str, int] = {}
    t0 = time.time()
    for seed in parse_seeds(args.seeds):
        case = build(seed)
        try:
            status, detail = check(case)
        except Exception as e:  # noqa: BLE001 (the harness itself: shown as a failure)
            status, detail = "fail", f"harness: {type(e).__name__}: {e}"
        counts[status] = counts.get(status, 0) + 1
        if status not in ("ok", "fail"):
            key = f"{status}: " + str(detail).split(";")[0]
            classes[key] = classes.get(key, 0) + 1
        if status == "fail" or args.verbose:
            print(f"=== seed {seed}: {status}: {str(detail)[:3000]}")
            if status == "fail":
                print(describe(case))
            sys.stdout.flush()
    print(f"{counts} in {time.time() - t0:.1f} s")
    for k, n in sorted(classes.items(), key=lambda kv: -kv[1]):
        print(f"  x{n} {k}")
    return 1 if counts["fail"] else 0
