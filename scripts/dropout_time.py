"""Wall time of scaled_dot_product_attention forward+backward at BERT-base's shape with a padding
mask, without dropout, with dropout_p=0.1 in the fused kernels, and with the composite (the L×S
weights stored, dropout as its own kernel: what every dropout_p > 0 took before), torch CUDA
beside. `PYRITE_BACKEND=wgpu|dawn python scripts/dropout_time.py [BATCH]` (default 32)"""

import sys

import numpy as np

import pyrite as pr
from pyrite.bench import _cuda_time, _median_time, _torch
from pyrite.nn import _attention

F = pr.nn.functional
B, H, L, E = int(sys.argv[1]) if len(sys.argv) > 1 else 32, 12, 128, 64
rng = np.random.default_rng(0)
qkv = [rng.standard_normal((B, H, L, E)).astype(np.float32) for _ in range(3)]
keep = np.ones((B, 1, 1, L), dtype=bool)
keep[..., L - L // 4 :] = False


def step(lib, ts, m, p):
    out = lib.nn.functional.scaled_dot_product_attention(*ts, attn_mask=m, dropout_p=p)
    out.sum().backward()


ps = [pr.tensor(a).requires_grad_() for a in qkv]
pm = pr.tensor(keep)
rows = {}
rows["no dropout"] = _median_time(lambda: step(pr, ps, pm, 0.0), repeats=5)
rows["dropout 0.1, fused"] = _median_time(lambda: step(pr, ps, pm, 0.1), repeats=5)
real = _attention._fusable
_attention._fusable = lambda *a: False
rows["dropout 0.1, composite"] = _median_time(lambda: step(pr, ps, pm, 0.1), repeats=5)
_attention._fusable = real
torch = _torch()
if torch is not None and torch.cuda.is_available():
    ts = [torch.tensor(a, device="cuda", requires_grad=True) for a in qkv]
    tm = torch.tensor(keep, device="cuda")
    rows["torch CUDA, no dropout"] = _cuda_time(torch, lambda: step(torch, ts, tm, 0.0))
    rows["torch CUDA, dropout 0.1"] = _cuda_time(torch, lambda: step(torch, ts, tm, 0.1))
for k, v in rows.items():
    print(f"  sdpa fwd+bwd {B}x{H}x{L}x{E} {k:<26} {v * 1e3:8.3f} ms")
