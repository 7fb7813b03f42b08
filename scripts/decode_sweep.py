"""Sweep the decode kernel's key ranges (what nn/_attention.py DECODE_FILL, DECODE_MAX_STEPS and
DECODE_MAX_SPLITS choose) by GPU time (timestamp queries, scripts/gpu_time.py: the decode kernel
and its merge summed) at issue 6's decode shapes, torch CUDA beside: the rule's count and each
count that can run.

    PYRITE_BACKEND=wgpu python scripts/decode_sweep.py [--json PATH]
"""

import json
import sys

import pyrite as pr
from pyrite import backend
from pyrite.kernels import attention_decode as _KD
from pyrite.nn import _attention as A

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from attention_ab import torch_us  # noqa: E402
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional
SHAPES = [(1, 16, 1, 4096, 64), (1, 32, 1, 4096, 128), (8, 8, 1, 16384, 64), (4, 32, 4, 2048, 128)]


def main():
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})", flush=True)
    rule = A._decode_splits
    rows = []

    def us(fn):
        A._PLANS.clear()  # (the plan cache does not see _decode_splits replaced below)
        return sum(t for t, *_ in kernel_times(fn, reps=9)) / 1e3

    for lanes in (False, True) if "--lanes" in sys.argv else (_KD.DECODE_SG,):
        _KD.DECODE_SG = lanes
        print(f"first pass with several lanes a key: {lanes}", flush=True)
        rows += sweep(dev, rule, us, lanes)
    if out:
        with open(out, "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


def sweep(dev, rule, us, lanes):
    rows = []
    for shape in SHAPES:
        B, H, L, S, E = shape
        try:
            q, k, v = pr.randn(B, H, L, E), pr.randn(B, H, S, E), pr.randn(B, H, S, E)
        except pr.OutOfMemoryError as e:  # (lavapipe binds 128 MiB at most)
            print(f"{shape}: skipped: {e}")
            continue
        fn = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
        now = rule(dev, B * H, L, S, E)
        A._PLANS.clear()
        parts = [t / 1e3 for t, *_ in kernel_times(fn, reps=9)]
        cur = sum(parts)
        times = {}
        for p in (1, 2, 4, 8, 16, 32, 64):
            # (the constants only choose the key ranges: time each count of ranges that can run)
            if _KD.decode_span(S, p) > _KD.DECODE_MAX_SPAN or _KD.decode_span(S, p) * (p - 1) >= S:
                continue
            A._decode_splits = lambda *a, p=p: p
            try:
                times[p] = us(fn)
            finally:
                A._decode_splits = rule
        best = min(times.items(), key=lambda kv: kv[1])
        peer = torch_us(shape, False, False)
        print(
            f"{shape}: the rule's {now} ranges {cur:.1f} us"
            f" ({' + '.join(f'{t:.1f}' for t in parts)}); best {best[0]} ranges {best[1]:.1f} us;"
            f" torch CUDA {'-' if peer is None else f'{peer:.1f}'} us; "
            + ", ".join(f"{p}: {t:.1f}" for p, t in sorted(times.items())),
            flush=True,
        )
        rows.append({"shape": shape, "lanes": lanes, "rule_splits": now, "rule_us": cur,
                     "kernels_us": parts, "torch_us": peer, "by_splits": times})  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
