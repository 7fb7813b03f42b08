"""GPU time of BERT-base batch 32's kernels other than its GEMMs (issue 6: in the 2026-12-06
H100 profile they took 3.5 ms against torch's 1.8), each beside torch CUDA's time for the same
op, plus the sum of issue 9 against a one-workgroup sum:
`PYRITE_BACKEND=wgpu python scripts/bert_rowops_probe.py` (timestamps: scripts/gpu_time.py;
torch: CUDA events over 50 back-to-back calls)."""

import sys

import numpy as np

import pyrite as pr
from pyrite import backend

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

try:
    import torch

    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None

dev = backend.current()
print(f"{dev.name} ({dev.impl})")
rng = np.random.default_rng(0)
B, T, H, E = (2, 16, 2, 8) if "--quick" in sys.argv else (32, 128, 12, 64)
D = H * E
arrays = {
    "h": rng.standard_normal((B, T, 4 * D)).astype(np.float32),
    "x": rng.standard_normal((B, T, D)).astype(np.float32),
    "y": rng.standard_normal((B, T, D)).astype(np.float32),
    "qkv": rng.standard_normal((B, T, 3 * D)).astype(np.float32),
    "s": rng.standard_normal(128 * 768).astype(np.float32),
}


def _old_gelu(L, h):
    """gelu through the branchy erfc it used before p_gelu_cdf (ops/elementwise.GELU_CDF_OLD)."""
    if L is torch:
        return L.nn.functional.gelu(h)
    from pyrite.ops import elementwise as E

    new = E.UNARY["gelu"]
    E.UNARY["gelu"] = (E.GELU_CDF_OLD,) + new[1:]
    try:
        return L.nn.functional.gelu(h)
    finally:
        E.UNARY["gelu"] = new


def cases(L, t):
    F = L.nn.functional
    ln = L.nn.LayerNorm(D, eps=1e-12)
    if L is torch:
        ln = ln.cuda()

    def heads(z):
        return z.reshape(B, T, H, E).transpose(1, 2)

    q, k, v = (heads(z) for z in t["qkv"].split(D, dim=-1))
    a = F.scaled_dot_product_attention(q, k, v)
    return {
        "gelu 32x128x3072": lambda: F.gelu(t["h"]),
        "gelu (erfc form) 32x128x3072": lambda: _old_gelu(L, t["h"]),
        "gelu tanh 32x128x3072": lambda: F.gelu(t["h"], approximate="tanh"),
        "h * 2 (32x128x3072)": lambda: t["h"] * 2,
        "x + y (32x128x768)": lambda: t["x"] + t["y"],
        "layer_norm 32x128x768": lambda: ln(t["x"]),
        "attention 32x12x128x64": lambda: F.scaled_dot_product_attention(q, k, v),
        "attn out transpose+reshape": lambda: a.transpose(1, 2).reshape(B, T, D),
        "attn out .contiguous() of transpose": lambda: a.transpose(1, 2).contiguous(),
        "sum of 98,304": lambda: t["s"].sum(),
    }


def _dispatches(fn):
    before = dev.dispatches
    fn()
    return dev.dispatches != before


pt = {k: pr.tensor(v) for k, v in arrays.items()}
tt = {k: torch.tensor(v, device="cuda") for k, v in arrays.items()} if torch else None
with pr.no_grad():
    ours = cases(pr, pt)
    theirs = cases(torch, tt) if torch else {}
    for name, fn in ours.items():
        ks = kernel_times(fn, reps=11) if _dispatches(fn) else []
        us = sum(t for t, *_ in ks) / 1e3
        line = (
            f"{name:38s} pyrite {us:8.1f} us ({len(ks)} kernels: "
            + ", ".join(f"{t / 1e3:.1f} grid {g}" for t, g, _ in ks)
            + ")"
        )
        if name in theirs:
            with torch.no_grad():
                f = theirs[name]
                for _ in range(5):
                    f()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                s.record()
                for _ in range(50):
                    f()
                e.record()
                torch.cuda.synchronize()
                line += f"  torch {s.elapsed_time(e) * 1e3 / 50:8.1f} us"
        print(line)
