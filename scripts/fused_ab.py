"""One-pass split reductions (ops/reduce.FUSED, kernels/reduce.py's "fused" stage) against what
ran before them (the wide one-workgroup row kernel, or the two-dispatch split), by size: the
round trip of x.sum().item() (median µs, host-timed) and the GPU time of x.sum()'s dispatches
(timestamps), with FUSED_MIN_CHUNK swept; then a stress check of the cross-workgroup handoff
(thousands of fused reductions of random sizes and ops back to back, against numpy).
`PYRITE_BACKEND=wgpu|dawn python scripts/fused_ab.py [--quick] [--json PATH]`
"""

import json
import os
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench import _median_us
from pyrite.ops import reduce as R

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_time import kernel_times  # noqa: E402


def setting(fused, chunk):
    R.FUSED = fused
    R.FUSED_MIN_CHUNK = chunk
    R._plans.clear()


def main():
    quick = "--quick" in sys.argv
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    exact = dev.impl != "dawn" or True
    rows = []
    cases = [((16384,), None), ((98304,), None), ((262144,), None), ((1 << 20,), None)]
    cases += [((1 << 24,), None), ((64, 65536), 1), ((8, 262144), 1)]
    if quick:
        cases = cases[:2]
    settings = [("before", False, 4096), ("fused C>=1024", None, 1024)]
    settings += [("fused C>=2048", None, 2048), ("fused C>=4096", None, 4096)]
    settings += [("fused C>=8192", None, 8192)]
    rng = np.random.default_rng(0)
    for shape, dim in cases:
        a = rng.standard_normal(shape).astype(np.float32)
        x = pr.tensor(a)
        want = a.astype(np.float64).sum(axis=dim)
        for label, fused, chunk in settings:
            setting(fused, chunk)
            red = (lambda: x.sum()) if dim is None else (lambda: x.sum(dim))
            got = red().numpy()
            path = R.LAST_PATH
            err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-30)))
            rt = _median_us(lambda: red()[0].item() if dim else red().item(), 300, 30)
            gpu = sum(t for t, _, _ in kernel_times(red, reps=15)) / 1e3 if exact else float("nan")
            print(
                f"  {str(shape):>14} {label:<14} {path:<22} item() {rt:7.1f} us  GPU {gpu:7.1f} us"
                f"  rel err {err:.1e}",
                flush=True,
            )
            rows.append(
                dict(
                    shape=shape,
                    dim=dim,
                    setting=label,
                    path=path,
                    item_us=rt,
                    gpu_us=gpu,
                    rel_err=err,
                )  # fmt: skip
            )
    setting(None, 4096)
    # the handoff under load: many fused reductions queued back to back, random sizes and ops
    bad = 0
    n_checks = 300 if quick else 3000
    pending = []
    for i in range(n_checks):
        n = int(rng.integers(16384, 400000))
        m = int(rng.integers(1, 6))
        a = rng.standard_normal((m, n)).astype(np.float32)
        op = ("sum", "mean", "amax", "std")[i % 4]
        t = getattr(pr.tensor(a), op)(1)
        ref = {
            "sum": lambda: a.astype(np.float64).sum(1),
            "mean": lambda: a.astype(np.float64).mean(1),
            "amax": lambda: a.max(1),
            "std": lambda: a.astype(np.float64).std(1, ddof=1),
        }[op]()
        pending.append((t, ref, op, R.LAST_PATH))
        if len(pending) == 50:
            for t, ref, op, path in pending:
                got = t.numpy()
                if not np.allclose(got, ref, rtol=1e-5, atol=1e-5 * np.sqrt(n)):
                    bad += 1
                    print("  MISMATCH", op, path, got[:3], ref[:3])
            pending = []
    print(f"stress: {n_checks} fused reductions, {bad} wrong", flush=True)
    if out:
        with open(out, "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows, "stress_bad": bad}, f)


if __name__ == "__main__":
    main()
