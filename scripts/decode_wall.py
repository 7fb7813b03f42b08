"""Host-timed decode calls (pyrite bench's measure: 200 calls a synchronisation, the median of
7) with the one-pass kernel's key ranges merged in the same dispatch (nn/_attention
DECODE_FUSED_MERGE None) and by the merge kernel (False).

    PYRITE_BACKEND=wgpu python scripts/decode_wall.py
"""

import statistics
import time

import pyrite as pr
from pyrite.nn import _attention as A

F = pr.nn.functional
SHAPES = [(1, 16, 16, 1, 4096, 64), (1, 32, 8, 1, 4096, 128), (1, 32, 32, 1, 4096, 128),
          (1, 64, 8, 1, 8192, 128)]  # fmt: skip


def main():
    print(pr.backend.current().name, pr.backend.current().impl)
    for shape in SHAPES:
        B, hq, hk, L, S, E = shape
        q, k, v = pr.randn(B, hq, L, E), pr.randn(B, hk, S, E), pr.randn(B, hk, S, E)
        res = {}
        for fm in (None, False):
            A.DECODE_FUSED_MERGE = fm
            A._PLANS.clear()

            def fn():
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hk)

            for _ in range(20):
                fn()
            pr.synchronize()
            ts = []
            for _ in range(7):
                t = time.perf_counter()
                for _ in range(200):
                    fn()
                pr.synchronize()
                ts.append((time.perf_counter() - t) / 200 * 1e6)
            res["fused" if fm is None else "merge kernel"] = round(statistics.median(ts), 1)
        A.DECODE_FUSED_MERGE = None
        print(shape, res, "us a call", flush=True)


if __name__ == "__main__":
    main()
