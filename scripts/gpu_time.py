"""GPU time of each kernel an op mix records, by timestamp queries (issue 9: where per-op time
goes). `PYRITE_BACKEND=wgpu|dawn python scripts/gpu_time.py [--sequence | --chain]`

`kernel_times(fn)` runs fn once while capturing the dispatches it records (pipeline, buffers,
info words, grid), then replays each one `reps` times in its own compute pass bracketed by
timestamp writes, and returns (median nanoseconds, grid, kernel source) of each dispatch. (Needs the
`timestamp-query` feature; Dawn may quantize timestamps.) The cases below are issue 9's.
`--sequence` times whole op mixes (the chain of linears, the batch-1 BERT-base forward) as one
pass, beside the sum of their dispatches alone and their eager wall time.
"""

import statistics

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench import _busy, warm_gpu


def timed_pass(enc, qs, q, dispatches):
    """One compute pass of `dispatches` ((pipeline, bind group, info offset, grid), ...)
    bracketed by timestamp writes q and q + 1 of query set `qs`; returns the next free q."""
    p = enc.begin_compute_pass(
        timestamp_writes={
            "query_set": qs,
            "beginning_of_pass_write_index": q,
            "end_of_pass_write_index": q + 1,
        }
    )
    for pipeline, group, offset, grid in dispatches:
        p.set_pipeline(pipeline)
        p.set_bind_group(0, group, [offset])
        p.dispatch_workgroups(*grid)
    p.end()
    return q + 2


def pass_durations(g, enc, qs, q, res):
    """Resolve the first q timestamps into `res`, submit, read back: each pass's nanoseconds."""
    enc.resolve_query_set(qs, 0, q, res, 0)
    g.queue.submit([enc.finish()])
    ts = np.frombuffer(g.queue.read_buffer(res), np.uint64).astype(np.int64)[:q].reshape(-1, 2)
    return ts[:, 1] - ts[:, 0]


def recorded(fn):
    """fn's dispatches, run once, as (pipeline, bind group, grid, src, info buffer) ready to be
    encoded again (each with its own info buffer), and what fn returned (keep it alive while
    the dispatches are encoded: they name its buffers)."""
    dev = backend.current()
    rec = []
    orig = dev.dispatch

    def capture(src, buffers, info, grid):
        rec.append((src, list(buffers), list(info), tuple(grid)))
        orig(src, buffers, info, grid)

    dev.dispatch = capture
    try:
        keep = fn()
    finally:
        del dev.dispatch
    pr.synchronize()
    g, w = dev.device, dev.wgpu
    out = []
    for src, bufs, info, grid in rec:
        bgl, _ = dev._layout(src.modes)
        words = np.zeros(128, np.int32)
        words[: len(info)] = info
        ib = g.create_buffer_with_data(data=words.tobytes(), usage=w.BufferUsage.STORAGE)
        entries = [
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate(bufs)
        ]
        entries.append({"binding": len(bufs), "resource": {"buffer": ib, "offset": 0, "size": 512}})
        bg = g.create_bind_group(layout=bgl, entries=entries)
        out.append((dev.pipeline(src)[0], bg, grid, src, ib))
    # the clock after the host work above (pyrite.bench.warm_gpu), every time: a run of short
    # timings with pipeline builds between let an H100 drop to its idle clock mid-run (2026-12-05,
    # ops/matmul.py's tile table notes), which the idle-time test alone does not catch
    warm_gpu(0.0)
    return out, keep


def kernel_times(fn, reps=15):
    dev = backend.current()
    rec, keep = recorded(fn)
    g, w = dev.device, dev.wgpu
    n = len(rec) * reps
    qs = g.create_query_set(type="timestamp", count=2 * n)
    res = g.create_buffer(size=16 * n, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC)
    enc = g.create_command_encoder()
    q = 0
    for _ in range(reps):
        for pipeline, bg, grid, _, _ in rec:
            q = timed_pass(enc, qs, q, [(pipeline, bg, 0, grid)])
    dt = pass_durations(g, enc, qs, q, res).reshape(reps, -1)
    _busy()
    del keep
    out = []
    for i, (_, _, grid, src, _) in enumerate(rec):
        out.append((statistics.median(dt[:, i].tolist()), grid, src))
    return out


def sequence_time(fn, reps=7):
    """Median GPU nanoseconds of all of fn's dispatches run in order in one compute pass
    (the dependencies between them as eager recording has them), against the sum of each
    dispatch timed alone: (sequence, sum alone, number of dispatches)."""
    dev = backend.current()
    rec, keep = recorded(fn)
    g, w = dev.device, dev.wgpu
    qs = g.create_query_set(type="timestamp", count=2 * reps)
    res = g.create_buffer(
        size=16 * reps, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC
    )
    enc = g.create_command_encoder()
    q = 0
    for _ in range(reps):
        q = timed_pass(enc, qs, q, [(p, bg, 0, grid) for p, bg, grid, _, _ in rec])
    dt = pass_durations(g, enc, qs, q, res)
    _busy()
    alone = sum(t for t, *_ in kernel_times(fn, reps=5))
    del keep
    return statistics.median(dt.tolist()), alone, len(rec)


def show_sequence(label, fn, wall_fn=None):
    """One line: fn's GPU time as one pass, the sum of its dispatches alone, and (wall_fn) the
    wall time of running it eagerly to completion."""
    seq, alone, n = sequence_time(fn)
    line = f"{label}: {n} dispatches, one pass {seq / 1e3:8.1f} us GPU, alone {alone / 1e3:8.1f} us"
    if wall_fn is not None:
        from pyrite.bench import _median_time

        wall = _median_time(wall_fn, repeats=7, warmup=1, inner=1)
        line += f", eager wall {wall * 1e6:8.1f} us"
    print(line)


def show(label, fn):
    times = kernel_times(fn)
    total = sum(t for t, *_ in times)
    print(f"{label}: {len(times)} dispatches, {total / 1e3:.1f} us GPU")
    for t, grid, src in times:
        first = next((ln for ln in src.wgsl.split("\n") if ln.startswith("var<workgroup>")), "")
        print(f"    {t / 1e3:8.2f} us  grid {grid}  {first[:60]}")


def _chain():
    """issue 9's chain of 100 × (linear 128×768 · 768², × 0.03): (its input, the chain)."""
    F = pr.nn.functional
    x, w = pr.randn(128, 768), pr.randn(768, 768) * 0.03

    def chain():
        y = x
        for _ in range(100):
            y = F.linear(y, w) * 0.03
        return y

    return x, chain


def sequences():
    """`--sequence`: op mixes as one pass against their eager wall time (issue 9)."""
    import pyrite.ops.matmul as mm
    from pyrite.bench.bert import build

    x, chain = _chain()
    model = build(pr)
    xb = pr.randn(1, 128, 768)

    def bert():
        with pr.no_grad():
            return model(xb)

    for label, (smax, min_k) in {"no split": (1, 2048), "split K>=2048": (16, 2048),
                                 "split K>=512": (16, 512)}.items():  # fmt: skip
        mm.SPLIT_MAX, mm.SPLIT_MIN_K = smax, min_k
        mm._plans.clear()
        show_sequence(f"chain of 100 (linear, *0.03), {label}", chain, chain)
        show_sequence(f"BERT-base fwd 1x128, {label}", bert, bert)
    show_sequence("x.sum() 128x768", lambda: x.sum(), lambda: x.sum())
    show_sequence("x * 2 128x768", lambda: x * 2, lambda: x * 2)


def chain_only():
    """`--chain`: the chain of linears as one pass against its dispatches alone and its eager
    wall time, with the rules' tile and with the K-group tile's deep prefetch forced."""
    import pyrite.ops.matmul as mm

    F = pr.nn.functional
    x, chain = _chain()
    w = pr.randn(768, 768) * 0.03
    for label, force in (
        ("rules", None),
        ("K groups, deep prefetch", ("fast", (32, 32, 4, 4, 32, 2, 4))),
    ):
        mm.FORCE = force
        try:
            show_sequence(f"chain of 100 (linear, *0.03), {label}", chain, chain)
        finally:
            mm.FORCE = None
    show("one linear 128x768 . 768^2", lambda: F.linear(x, w))
    show("one x * 0.03 128x768", lambda: x * 0.03)


if __name__ == "__main__":
    dev = backend.current()
    print(f"{dev.name} ({dev.impl}), timestamp-query: {'timestamp-query' in dev.features}")
    import sys

    if "--chain" in sys.argv:
        chain_only()
        sys.exit(0)

    if "--sequence" in sys.argv:
        sequences()
        sys.exit(0)
    import pyrite.ops.matmul as mm

    F = pr.nn.functional
    from pyrite.ops import reduce as red

    x = pr.randn(128, 768)
    for parts in (None, 48, 96, 192):
        red.FORCE_SPLIT = parts
        show(f"x.sum() 128x768, split parts {parts}", lambda: x.sum())
    red.FORCE_SPLIT = None
    show("x * 2", lambda: x * 2)
    show("x.sum(-1)", lambda: x.sum(-1))
    show("F.layer_norm 128x768", lambda: F.layer_norm(x, (768,)))
    show("F.gelu 128x768", lambda: F.gelu(x))
    from pyrite.kernels import attention as att

    for shape in ((1, 12, 128, 64), (1, 12, 512, 64), (8, 12, 128, 64), (32, 12, 128, 64)):
        q = pr.randn(*shape)
        for blk in (64, 32, 16):
            att.BLOCK = blk
            show(f"sdpa {shape} BLOCK={blk}", lambda: F.scaled_dot_product_attention(q, q, q))
        att.BLOCK = 64
    cases = [(100, 768, 768), (77, 768, 3072), (1, 768, 768), (128, 768, 768), (128, 768, 2304), (128, 768, 3072), (128, 3072, 768),
             (512, 768, 768), (1024, 1024, 1024), (2048, 1024, 1024)]  # fmt: skip
    for m, k, n in cases:
        a, wt, b = pr.randn(m, k), pr.randn(n, k), pr.randn(n)
        cands = [None, ("fast", (64, 64, 8, 8, 16, True)), ("fast", (64, 64, 4, 4, 16, True))]
        for force in cands:
            mm.FORCE, mm.FORCE_SPLIT = force, None
            try:
                F.linear(a, wt, b)
                if force is not None and mm.LAST != force:
                    continue
                show(f"F.linear {m}x{k}.{n}x{k}T {mm.LAST} {'auto' if force is None else 'S=1'}",
                     lambda: F.linear(a, wt, b))  # fmt: skip
            finally:
                mm.FORCE = mm.FORCE_SPLIT = None
