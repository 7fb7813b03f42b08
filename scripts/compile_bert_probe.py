"""Why the compiled BERT-base forward at batch 32 ran slower than eager (H100, 2026-12-05:
30.95 ms against 21.84): the whole model eager, compiled, and compiled without fusion
(options={"fusion": False}), and the fused products alone (GELU and residual add in a GEMM's
store) against their eager pair, wall time of back-to-back calls.
`PYRITE_BACKEND=wgpu python scripts/compile_bert_probe.py [--quick]`"""

import sys
import time

import numpy as np

import pyrite as pr
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build

F = pr.nn.functional
quick = "--quick" in sys.argv
B, layers, n = (1, 1, 2) if quick else (32, 12, 10)
dev = pr.backend.current()
print(f"{dev.name} ({dev.impl})")


def ms(fn, n=n):
    fn()
    pr.synchronize()
    warm_gpu()
    ts = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        pr.synchronize()
        ts.append((time.perf_counter() - t0) / n * 1e3)
    return min(ts)


rng = np.random.default_rng(0)
pr.manual_seed(0)
model = build(pr, layers=layers)
x = pr.tensor(rng.standard_normal((B, 128, 768)).astype(np.float32))
with pr.no_grad():
    eager = ms(lambda: model(x))
    fused = pr.compile(model)
    t_fused = ms(lambda: fused(x))
    plain = pr.compile(model, options={"fusion": False})
    t_plain = ms(lambda: plain(x))
print(f"BERT {B}x128, {layers} layers: eager {eager:.2f} ms, compiled {t_fused:.2f} "
      f"({fused.stats()['kernels']} kernels), compiled without fusion {t_plain:.2f} "
      f"({plain.stats()['kernels']} kernels)")  # fmt: skip
M = B * 128
xs = pr.tensor(rng.standard_normal((M, 768)).astype(np.float32))
h = pr.tensor(rng.standard_normal((M, 3072)).astype(np.float32))
w1 = pr.tensor(rng.standard_normal((3072, 768)).astype(np.float32) / 28)
b1 = pr.tensor(rng.standard_normal(3072).astype(np.float32))
w2 = pr.tensor(rng.standard_normal((768, 3072)).astype(np.float32) / 55)
b2 = pr.tensor(rng.standard_normal(768).astype(np.float32))
cases = {
    "gelu(linear 768->3072)": (lambda: F.gelu(F.linear(xs, w1, b1)), None),
    "linear 768->3072 alone": (lambda: F.linear(xs, w1, b1), None),
    "linear 3072->768 + residual": (lambda: F.linear(h, w2, b2) + xs, None),
    "linear 3072->768 alone": (lambda: F.linear(h, w2, b2), None),
}
with pr.no_grad():
    for name, (fn, _) in cases.items():
        e = ms(fn, 4 * n)
        c = pr.compile(fn)
        tc = ms(c, 4 * n)
        c0 = pr.compile(fn, options={"fusion": False})
        t0 = ms(c0, 4 * n)
        print(f"{name:30s} eager {e * 1e3:8.1f} us  compiled {tc * 1e3:8.1f} "
              f"({c.stats()['kernels']} kernels)  unfused {t0 * 1e3:8.1f}")  # fmt: skip
with pr.no_grad():
    # GELU fused into the big tile's store anyway (compile/fusion.py HEAVY_POST_MAX_SUMS lifted):
    # the bound was measured with the branchy erfc GELU; p_gelu_cdf may have moved it
    from pyrite.compile import fusion

    bound = fusion.HEAVY_POST_MAX_SUMS
    fusion.HEAVY_POST_MAX_SUMS = 1 << 20
    try:
        fn = cases["gelu(linear 768->3072)"][0]
        c = pr.compile(fn)
        print(f"{'gelu(linear) fused anyway':30s} compiled {ms(c, 4 * n) * 1e3:8.1f} us "
              f"({c.stats()['kernels']} kernels)")  # fmt: skip
        whole = pr.compile(model)
        print(f"BERT {B}x128 with GELU fused anyway: {ms(lambda: whole(x)):.2f} ms "
              f"({whole.stats()['kernels']} kernels)")  # fmt: skip
    finally:
        fusion.HEAVY_POST_MAX_SUMS = bound
