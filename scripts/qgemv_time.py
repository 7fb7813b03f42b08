"""GPU time of the quantized GEMV (kernels/quant.qgemv) by timestamp queries, over its shape
knobs (ops/quantized.py QGEMV_SHAPE; `--unpack convert,magic,inplace`: each with those
QGEMV_UNPACK conversions; `--stage`: with QGEMV_STAGE off and on; `--configs "32,2,4,4;64,2,4,2"`: only those; `--no-linear`: no F.linear rows), at 1 x 4096 . 11008 x 4096^T and
8 x 4096 ..., cycling through distinct weights (more bytes than the L2 holds); beside the copy
kernel's rate, timed the same way. `PYRITE_BACKEND=wgpu|dawn python scripts/qgemv_time.py [--quick]`

Two figures a configuration: the median of each dispatch in a pass of its own (`gpu_time`'s
kernel_times; Dawn on the H200 rounds timestamps to 65.5 us, so there only the second counts)
and the mean over one pass holding every dispatch of several rounds (back-to-back kernels, no
host). Prints the best configurations and writes JSON when given `--json PATH`.
`--format 4,128` times one format only. On the H200 a process's kernels can drop to a quarter of
their speed partway through a run (every kernel at once, the copy included; measured
2026-12-03, scripts/gpu_slow_state.py): compare configurations only within one process's fast phase,
and run each format in a process of its own.
"""

import inspect
import itertools
import json
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench.quant import _random_qweight
from pyrite.ops import quantized as Q

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import _busy, kernel_times, pass_durations, recorded, timed_pass  # noqa: E402


def one_pass_mean(fn, rounds=6, calls=None):
    """Mean nanoseconds a dispatch over one compute pass of `rounds` x fn's dispatches (`calls`:
    a call of fn's, for fn making that many calls of several dispatches each)."""
    dev = backend.current()
    rec, keep = recorded(fn)
    g, w = dev.device, dev.wgpu
    qs = g.create_query_set(type="timestamp", count=2)
    res = g.create_buffer(size=16, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC)
    enc = g.create_command_encoder()
    timed_pass(enc, qs, 0, [(pipeline, bg, 0, grid) for pipeline, bg, grid, _, _ in rec] * rounds)
    t = pass_durations(g, enc, qs, 2, res)[0]
    _busy()
    del keep
    return t / ((calls or len(rec)) * rounds)


def copy_time(nbytes, sweep):
    """Nanoseconds the vec4 copy kernel takes to move `nbytes` (nbytes / 2 read, as many
    written), cycling through buffer pairs that add up to `sweep` bytes (so not from the L2):
    the like-for-like ceiling of a kernel that reads `nbytes` once, its ramp and tail included."""
    from pyrite.kernels.common import grid_for
    from pyrite.kernels.elementwise import vec4_copy_kernel

    dev = backend.current()
    n = max(4, nbytes // 8 // 4 * 4)
    pairs = [(pr.rand(n), pr.empty(n)) for _ in range(max(2, sweep // (8 * n)))]
    vec = vec4_copy_kernel(4)

    def run():
        for a, b in pairs:
            dev.dispatch(
                vec, (a._storage.buffer, b._storage.buffer), [n // 4], grid_for(n // 4, 1024)
            )

    return one_pass_mean(run, rounds=4) * nbytes / (8 * n)


def weight_copy(label, nbytes, sweep):
    tw = copy_time(nbytes, sweep)
    print(
        f"copy moving the {label} weight's {nbytes / 1e6:.1f} MB (half read, half written): "
        f"{tw / 1e3:.1f} us, {nbytes / tw:.0f} GB/s"
    )
    return tw


def main():
    quick = "--quick" in sys.argv
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    unpacks = (
        tuple(sys.argv[sys.argv.index("--unpack") + 1].split(","))
        if "--unpack" in sys.argv
        else (Q.QGEMV_UNPACK,)
    )
    default_unpack = Q.QGEMV_UNPACK
    stages = (False, True) if "--stage" in sys.argv else (Q.QGEMV_STAGE,)
    configs = None
    if "--configs" in sys.argv:  # "lanes,words,cols,unroll;..."
        spec = sys.argv[sys.argv.index("--configs") + 1]
        configs = {tuple(int(v) for v in c.split(",")) for c in spec.split(";")}
    linear = "--no-linear" not in sys.argv
    formats = ((8, None), (8, 128), (4, 128), (4, 32))
    if "--format" in sys.argv:  # "8" (per row) or "4,128": one format (a process each: see below)
        f = [int(v) for v in sys.argv[sys.argv.index("--format") + 1].split(",")]
        formats = ((f[0], f[1] if len(f) > 1 else None),)
    dev = backend.current()
    exact = dev.impl != "dawn"
    print(f"{dev.name} ({dev.impl})")
    rng = np.random.default_rng(0)
    N, K = (1024, 1024) if quick else (11008, 4096)
    sweep = (16 << 20) if quick else (400 << 20)
    tc = copy_time(2 * sweep, 2 * sweep)
    ceiling = 2 * sweep / tc
    print(f"copy {sweep >> 20} MiB: {tc / 1e3:.1f} us, {ceiling:.0f} GB/s")
    results = {"device": dev.name, "impl": dev.impl, "copy_GBps": ceiling, "rows": []}
    F = pr.nn.functional
    dts = (pr.float32, pr.float16, pr.bfloat16) if dev.has_f16 else (pr.float32, pr.bfloat16)
    for dt in dts if linear else ():
        ws = [pr.randn(N, K, dtype=dt) for _ in range(max(2, sweep // (N * K * dt.itemsize)))]
        nb = N * K * dt.itemsize
        tw = weight_copy(str(dt), nb, sweep)
        for M in (1, 8):
            x = pr.randn(M, K, dtype=dt)
            t = one_pass_mean(lambda: [F.linear(x, w) for w in ws])
            print(
                f"F.linear {dt} M={M}: {t / 1e3:.1f} us, {nb / t:.0f} GB/s ({nb / t / ceiling:.0%}"
                f" of the big copy, {tw / t:.0%} of the same bytes' copy)"
            )
            results["rows"].append({"what": f"linear {dt}", "M": M, "ns": t, "GBps": nb / t})
            if dt is pr.bfloat16:  # the path before the bf16 GEMV: ops/fallback's widening
                from pyrite.ops import fallback
                from pyrite.ops import matmul as mmod

                t = one_pass_mean(
                    lambda: [
                        fallback._slow(inspect.unwrap(mmod.linear), "linear", False, (x, w), {})
                        for w in ws
                    ],
                    calls=len(ws),
                )
                print(f"  the same through the f32 widening (before): {t / 1e3:.1f} us")
    saved, saved4 = dict(Q.QGEMV_SHAPE), dict(Q.QGEMV_SHAPE_INT4)
    saved_u4 = dict(Q.QGEMV_UNPACK_INT4)
    for bits, gs in formats:
        q0 = _random_qweight(rng, bits, gs, N, K)
        ws = [q0] + [_random_qweight(rng, bits, gs, N, K) for _ in range(sweep // q0.nbytes)]
        tw = weight_copy(f"int{bits} g{gs}", q0.nbytes, sweep)
        for M in (1, 8):
            rm = 8 if M > 4 else M
            Q.QGEMV_SHAPE_INT4.clear()  # (the sweep sets QGEMV_SHAPE and QGEMV_UNPACK for
            Q.QGEMV_UNPACK_INT4.clear()  # every format)
            x = pr.randn(M, K)
            res = {}
            shapes = sorted(configs) if configs else itertools.product(
                (16, 32, 64), (1, 2, 4), (2, 4), (1, 2, 4)
            )  # fmt: skip
            for stage, unpack, (lanes, wpl, cols, unroll) in itertools.product(
                stages, unpacks, list(shapes)
            ):
                if quick and not configs and (lanes, unroll) not in ((16, 1), (32, 2)):
                    continue
                Q.QGEMV_UNPACK, Q.QGEMV_STAGE = unpack, stage
                Q.QGEMV_SHAPE[rm] = (lanes, wpl, cols, unroll)
                t1 = one_pass_mean(lambda: [Q.qlinear(x, w) for w in ws])
                t0 = (
                    statistics_median(kernel_times(lambda: [Q.qlinear(x, w) for w in ws], reps=3))
                    if exact
                    else float("nan")
                )
                tags = (unpack,) + (("staged",) if stage and gs else ())
                res[(lanes, wpl, cols, unroll) + tags] = (t1, t0)
                results["rows"].append(
                    {
                        "what": f"int{bits} g{gs}",
                        "M": M,
                        "lanes": lanes,
                        "words": wpl,
                        "cols": cols,
                        "unroll": unroll,
                        "unpack": unpack,
                        "staged": stage,
                        "ns": t1,
                        "ns_alone": t0,
                        "GBps": q0.nbytes / t1,
                    }
                )
            Q.QGEMV_UNPACK = default_unpack
            Q.QGEMV_STAGE = stages[-1] if len(stages) == 1 else True
            Q.QGEMV_SHAPE.update(saved)
            Q.QGEMV_SHAPE_INT4.update(saved4)
            Q.QGEMV_UNPACK_INT4.update(saved_u4)
            t_def = one_pass_mean(lambda: [Q.qlinear(x, w) for w in ws])
            order = sorted(res, key=lambda k: res[k][0])
            print(
                f"int{bits} g{gs} M={M} ({q0.nbytes / 1e6:.1f} MB): default {t_def / 1e3:.1f} us; best "
                + "; ".join(
                    f"{k}: {res[k][0] / 1e3:.1f} ({res[k][1] / 1e3:.1f} alone, "
                    f"{q0.nbytes / res[k][0] / ceiling:.0%}, {tw / res[k][0]:.0%} of its copy)"
                    for k in order[:6]
                ),
                flush=True,
            )
            if out:
                with open(out, "w") as f:
                    json.dump(results, f, indent=1)


def statistics_median(times):
    import statistics

    return statistics.median(t for t, *_ in times)


if __name__ == "__main__":
    main()
