"""A/B of split-K in eager use (ops/matmul.py SPLIT_MAX and SPLIT_MIN_K), interleaved in one
process: the small linears of issue 9 back to back, the chain of linears and the batch-1 BERT-base
forward, with no split, the split from K >= 2048, and from K >= 512.
`PYRITE_BACKEND=wgpu|dawn python scripts/split_ab.py`"""

import statistics
import time

import pyrite as pr
import pyrite.ops.matmul as mm
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build

F = pr.nn.functional
model = build(pr)
xb = pr.randn(1, 128, 768)
x1, w1, b1 = pr.randn(128, 768), pr.randn(768, 768) * 0.03, pr.randn(768)
x2, w2 = pr.randn(128, 3072), pr.randn(768, 3072) * 0.02


def many(fn, n):
    def run():
        for _ in range(n):
            fn()

    return run


def chain():
    y = x1
    for _ in range(100):
        y = F.linear(y, w1) * 0.03


def bert():
    with pr.no_grad():
        model(xb)


cases = {
    "50 x linear 128x768.768^2": many(lambda: F.linear(x1, w1, b1), 50),
    "50 x linear 128x3072.768x3072": many(lambda: F.linear(x2, w2, b1), 50),
    "chain of 100": chain,
    "BERT batch 1": bert,
}
res = {}
SETTINGS = {"no split": (1, 2048), "split K>=2048": (16, 2048), "split K>=512": (16, 512)}
for _ in range(5):
    for label, (smax, min_k) in SETTINGS.items():
        mm.SPLIT_MAX, mm.SPLIT_MIN_K = smax, min_k
        mm._plans.clear()
        warm_gpu()
        for name, fn in cases.items():
            fn()
            pr.synchronize()
            ts = []
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                pr.synchronize()
                ts.append(time.perf_counter() - t0)
            res.setdefault((name, label), []).append(min(ts))
for (name, label), v in sorted(res.items()):
    print(f"  {name:<32} {label:<14} {statistics.median(v) * 1e3:7.2f} ms")
