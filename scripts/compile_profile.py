"""GPU time of a compiled step, by timestamp queries: the whole replay in one pass, and each of
its kernels in a pass of its own (wgpu-native; Dawn quantizes timestamps to 65.5 us on the H200).

    PYRITE_BACKEND=wgpu python scripts/compile_profile.py [gpt|bert]

Prints the whole pass's time, the sum of the kernels' own times, and the kernels grouped by the
pyrite function that recorded them: bench/train.py's small GPT training step, or bench/bert.py's
BERT-base forward at batch 1 x 128 tokens.
"""

from __future__ import annotations

import collections
import statistics

import numpy as np
from gpu_time import pass_durations, timed_pass  # (scripts/ is on the path when run as a script)

import pyrite as pr
from pyrite.bench.train import _gpt


def profile(graph, reps=9):
    dev = graph.device
    g, w = dev.device, dev.wgpu
    cmds = [c for c in graph.commands if c[0] == "d"]
    n = len(cmds)
    qs = g.create_query_set(type="timestamp", count=2 * (n + 1) * reps)
    res = g.create_buffer(
        size=16 * (n + 1) * reps, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC
    )
    dev._flush()
    w_info = dev._io
    lo, hi = graph.dirty
    if hi > lo:
        w_info.write(graph.info_gpu, 0, graph.info)
    enc = g.create_command_encoder()
    q = 0
    kernels = [(pipeline, group, offset, grid) for _, pipeline, group, offset, grid, *_ in cmds]
    for _ in range(reps):
        q = timed_pass(enc, qs, q, kernels)
        for k in kernels:
            q = timed_pass(enc, qs, q, [k])
    dt = pass_durations(g, enc, qs, q, res).reshape(reps, n + 1)
    whole = statistics.median(dt[:, 0].tolist())
    each = [statistics.median(dt[:, i + 1].tolist()) for i in range(n)]
    return whole, each


def main(which="gpt"):
    rng = np.random.default_rng(0)
    pr.manual_seed(0)
    if which == "bert":
        from pyrite.bench.bert import build

        model = pr.compile(build(pr))
        x = pr.tensor(rng.standard_normal((1, 128, 768)).astype(np.float32))

        def step():
            with pr.no_grad():
                return model(x)

        compiled = model._compiled
    else:
        idx = pr.tensor(rng.integers(0, 256, (8, 64)))
        tgt = pr.tensor(rng.integers(0, 256, (8, 64)))
        step = compiled = pr.compile(_gpt(pr, idx, tgt))
    for _ in range(5):
        step()
    pr.synchronize()
    graph = compiled._last.graph
    whole, each = profile(graph)
    ops = [op for op in graph.tape.ops if op.kind == "d"]
    print(
        f"{graph.kernels} kernels: one pass {whole / 1e3:.0f} us; kernels alone sum to "
        f"{sum(each) / 1e3:.0f} us"
    )
    by = collections.defaultdict(lambda: [0, 0.0])
    for op, t in zip(ops, each):
        k = f"{op.inner} ({op.outer})"
        by[k][0] += 1
        by[k][1] += t
    for k, (cnt, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:20]:
        print(f"  {t / 1e3:8.1f} us  {cnt:3d}x  {k}")


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:])
