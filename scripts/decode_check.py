"""Decode attention against torch (float64 on the CPU) at random shapes a GPU takes the one-pass
kernel for (its key ranges merged in the kernel there), grouped heads, masks and causal blocks
among them, many calls in a row (the merge's scratch reused): the worst error relative to the
result's scale, and how many calls were off. `PYRITE_BACKEND=wgpu python scripts/decode_check.py
[--calls N]`"""

import sys

import numpy as np
import torch

import pyrite as pr

F = pr.nn.functional


def main():
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 60
    rng = np.random.default_rng(1)
    dev = pr.backend.current()
    print(dev.name, dev.impl, flush=True)
    worst, bad = 0.0, 0
    for i in range(calls):
        B = int(rng.integers(1, 3))
        hk = int(rng.choice([1, 2, 4, 8]))
        r = int(rng.choice([1, 1, 2, 4, 8]))
        L = 1 if r > 1 else int(rng.integers(1, 9))
        S = int(rng.integers(256, 6000))
        E = int(rng.choice([32, 64, 80, 96, 128]))
        q = rng.standard_normal((B, hk * r, L, E)).astype(np.float32)
        k, v = (rng.standard_normal((B, hk, S, E)).astype(np.float32) for _ in range(2))
        kw = {}
        kind = rng.integers(0, 3)
        if kind == 1:
            m = rng.random((B, 1, L, S)) < 0.8
            m[..., 0] = True
            kw["attn_mask"] = m
        elif kind == 2 and r == 1:
            kw["is_causal"] = True
        pkw = {key: pr.tensor(val) if isinstance(val, np.ndarray) else val
               for key, val in kw.items()}  # fmt: skip
        tkw = {key: torch.tensor(val) if isinstance(val, np.ndarray) else val
               for key, val in kw.items()}  # fmt: skip
        got = F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v),
                                             enable_gqa=r > 1, **pkw).numpy()  # fmt: skip
        want = torch.nn.functional.scaled_dot_product_attention(
            *(torch.tensor(a, dtype=torch.float64) for a in (q, k, v)), enable_gqa=r > 1, **tkw
        ).numpy()
        err = float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))
        tol = 16 * (E + S) * 2.0**-24
        worst = max(worst, err / tol)
        if not np.isfinite(got).all() or err > tol:
            bad += 1
            print(f"  call {i}: {(B, hk * r, hk, L, S, E, kind)} error {err:.3g} > {tol:.3g}")
    print(f"{calls} calls: {bad} off; worst error {worst:.3f} of its bound", flush=True)


if __name__ == "__main__":
    main()
