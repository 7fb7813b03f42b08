"""Whether BERT-base's attention forward is bound by its waves: GPU time (timestamp queries,
scripts/gpu_time.py) of the batch-B forward (B x 12 heads x 128 x 128 x 64, padding mask) for B
around 32, per batch element. Time proportional to B means no wave effect; steps at the
multiples of the GPU's workgroup slots mean one. `PYRITE_BACKEND=wgpu python scripts/attn_waves.py`"""

import sys

import numpy as np

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional


def main():
    rng = np.random.default_rng(0)
    for B in (8, 16, 20, 24, 26, 27, 28, 30, 32, 36, 40, 48, 56, 64):
        q, k, v = (
            pr.tensor(rng.standard_normal((B, 12, 128, 64), dtype=np.float32)) for _ in "qkv"
        )
        mask = pr.tensor(rng.random((B, 1, 1, 128)) < 0.9)
        ts = kernel_times(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask), reps=9)
        tot = sum(t for t, *_ in ts) / 1e3
        grids = [g for _, g, _ in ts]
        print(f"B {B:3d}: {tot:8.1f} us, {tot / B:6.2f} us a batch element, grids {grids}")


if __name__ == "__main__":
    main()
