"""A/B of the subgroup reductions against the workgroup-memory trees they replace, by GPU time
(timestamp queries, scripts/gpu_time.py; the median of each dispatch timed in a pass of its own):
the held-row row ops (ops/rowops.SUBGROUPS), the row-mode reductions (ops/reduce.SUBGROUPS), the
GEMV (ops/matmul.GEMV_SUBGROUPS) and the quantized GEMV (ops/quantized.QGEMV_SUBGROUPS), each
switched off and on in turn within one process, at the shapes the README's tables measure.

    PYRITE_BACKEND=wgpu|dawn python scripts/subgroup_ab.py [--quick] [--json PATH]

(Dawn on the lent GPUs rounds timestamps to 65.5 us: its small rows read 0 there.)
"""

import json
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench.quant import _random_qweight
from pyrite.ops import matmul, quantized, reduce, rowops

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional


def gpu_us(fn, reps=9):
    return sum(t for t, *_ in kernel_times(fn, reps=reps)) / 1e3


def main():
    quick = "--quick" in sys.argv
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    dev = backend.current()
    print(f"{dev.name} ({dev.impl}), subgroups mode {dev.subgroups}", flush=True)
    if not dev.subgroups:
        print("no subgroups on this device: nothing to compare")
        return
    rng = np.random.default_rng(0)
    s = 16 if quick else 1
    rows = [(65536 // s, 1024), (4096 // s, 768), (49152 // s, 128), (128, 768)]
    cases = []
    for r, w in rows:
        a, g = pr.randn(r, w), pr.randn(w)
        nbytes = 8 * r * w
        cases.append((f"softmax {r}x{w}", rowops, "SUBGROUPS", lambda a=a: a.softmax(-1), nbytes))
        cases.append(
            (f"layer_norm {r}x{w}", rowops, "SUBGROUPS", lambda a=a, w=w, g=g: F.layer_norm(a, (w,), g), nbytes)
        )  # fmt: skip
    x2 = pr.randn(65536 // s, 1024)
    cases.append(("row sums 65536x1024", reduce, "SUBGROUPS", lambda: x2.sum(1), 4 * x2.numel()))
    v = pr.randn((1 << 26) // s)
    cases.append(("x.sum() 67M", reduce, "SUBGROUPS", lambda: v.sum(), 4 * v.numel()))
    N, K = (11008 // s, 4096)
    xv, wf = pr.randn(1, K), pr.randn(N, K)
    cases.append(("F.linear 1x4096 . 11008x4096T", matmul, "GEMV_SUBGROUPS", lambda: F.linear(xv, wf), 4 * N * K))  # fmt: skip
    for bits, gs in ((8, None), (4, 128)):
        qw = _random_qweight(rng, bits, gs, N, K)
        nb = qw.qweight.numel() * 4 + qw.scales.numel() * 4
        cases.append(
            (f"qlinear int{bits} g{gs} 1 row", quantized, "QGEMV_SUBGROUPS", lambda qw=qw: quantized.qlinear(xv, qw), nb)
        )  # fmt: skip
    results = []
    for label, mod, flag, fn, nbytes in cases:
        t = {}
        for on in (False, True, False, True):
            setattr(mod, flag, on)
            matmul._plans.clear()
            reduce._plans.clear()
            us = gpu_us(fn)
            t[on] = min(t.get(on, us), us)
        setattr(mod, flag, True)
        results.append(
            {"case": label, "tree_us": t[False], "subgroups_us": t[True], "bytes": nbytes}
        )
        gb = lambda us: f"{nbytes / us / 1e3:7,.0f} GB/s" if us > 0 else "      - GB/s"  # noqa: E731
        ratio = f"{t[False] / t[True]:.2f}x" if t[True] > 0 else "-"
        print(
            f"{label:34s} tree {t[False]:9.1f} us ({gb(t[False])})  "
            f"subgroups {t[True]:9.1f} us ({gb(t[True])})  {ratio}",
            flush=True,
        )
    if out:
        with open(out, "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": results}, f, indent=1)


if __name__ == "__main__":
    main()
