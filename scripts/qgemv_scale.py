"""How the one-row quantized GEMV's GPU time grows with its weight (issue 6's int4 GEMV floor):
1 x K . N x K^T for N from 1,376 to 44,032 at K = 4,096 (and K = 16,384 at one N), int4 g128 and
int8 a scale a row, beside the copy kernel moving the same bytes: a fixed floor shows as time
that does not halve with the bytes. GPU time by timestamps, one pass of every dispatch cycling
through more weights than the L2 holds. `PYRITE_BACKEND=wgpu python scripts/qgemv_scale.py`
"""

import os
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench.quant import _random_qweight
from pyrite.ops import quantized as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qgemv_time import copy_time, one_pass_mean  # noqa: E402


def main():
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    rng = np.random.default_rng(0)
    sweep = 200 << 20
    shapes = [(n, 4096) for n in (1376, 2752, 5504, 11008, 22016, 44032)] + [(11008, 16384)]
    for bits, gs in ((4, 128), (8, None)):
        for N, K in shapes:
            q0 = _random_qweight(rng, bits, gs, N, K)
            ws = [q0] + [_random_qweight(rng, bits, gs, N, K) for _ in range(sweep // q0.nbytes)]
            x = pr.randn(1, K)
            t = one_pass_mean(lambda: [Q.qlinear(x, w) for w in ws])
            tc = copy_time(q0.nbytes, sweep)
            print(
                f"  int{bits} g{gs} N={N:>6} K={K:>5} ({q0.nbytes / 1e6:6.1f} MB): "
                f"{t / 1e3:6.1f} us ({q0.nbytes / t:5.0f} GB/s), its copy {tc / 1e3:5.1f} us "
                f"({tc / t:.0%})",
                flush=True,
            )


if __name__ == "__main__":
    main()
