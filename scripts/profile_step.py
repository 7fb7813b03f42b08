"""Where a training step's host time goes: `python scripts/profile_step.py mlp|gpt [N] [--host-only]`.

Runs the `pyrite bench --only train` models (pyrite/bench/train.py) for N steps (default 20)
after a warm-up and prints, per step: wall milliseconds with one synchronisation at the end,
dispatches, submits, new bind groups, readbacks; then the top functions by own time (cProfile).
Readbacks and new bind groups are what eager training should not have in a steady state; the
per-function table says which layer (autograd, ops, the device) the rest of the host time is in.
`--host-only` also times the step with the device's dispatch replaced by a no-op: pyrite's own
Python work, without the WebGPU implementation's encoding and the driver (nor any GPU work).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench.train import _gpt, _mlp


def main(which="mlp", n=20, host_only=False):
    rng = np.random.default_rng(0)
    if which == "mlp":
        xs = rng.standard_normal((128, 784)).astype(np.float32)
        step = _mlp(pr, pr.tensor(xs), pr.tensor(rng.integers(0, 10, 128)))
    else:
        idx, tgt = rng.integers(0, 256, (8, 64)), rng.integers(0, 256, (8, 64))
        step = _gpt(pr, pr.tensor(idx), pr.tensor(tgt))
    dev = backend.current()
    for _ in range(5):
        step()
    pr.synchronize()
    counts = {"groups": 0, "reads": 0}
    make_group, read = dev._bind_group, dev.read

    def counting_group(*a, **k):
        counts["groups"] += 1
        return make_group(*a, **k)

    def counting_read(*a, **k):
        counts["reads"] += 1
        return read(*a, **k)

    dev._bind_group, dev.read = counting_group, counting_read
    d0, s0 = dev.dispatches, dev.submits
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    host = time.perf_counter() - t0
    pr.synchronize()
    wall = time.perf_counter() - t0
    reads = counts["reads"]
    del dev._bind_group, dev.read
    print(
        f"{which} on {dev.name} ({dev.impl}): {wall / n * 1e3:.3f} ms/step wall, "
        f"{host / n * 1e3:.3f} ms/step host; per step: {(dev.dispatches - d0) / n:.0f} "
        f"dispatches, {(dev.submits - s0) / n:.1f} submits, {counts['groups'] / n:.1f} new bind "
        f"groups, {reads / n:.1f} readbacks"
    )
    if host_only:
        real = dev.dispatch

        def null(src, buffers, info, grid):
            dev.dispatches += 1

        dev.dispatch = null
        try:
            for _ in range(3):
                step()
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            python = time.perf_counter() - t0
        finally:
            dev.dispatch = real
        print(f"  host-only (dispatch a no-op): {python / n * 1e3:.3f} ms/step of pyrite's Python")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        step()
    pr.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(
        args[0] if args else "mlp",
        int(args[1]) if len(args) > 1 else 20,
        host_only="--host-only" in sys.argv,
    )
