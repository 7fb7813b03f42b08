"""A/B of the attention backward kernels by GPU time (timestamp queries, scripts/gpu_time.py):
the per-row dq and dk/dv kernels (kernels/attention.py) against the register-tiled ones
(kernels/attention_tiled_bwd.py) in each spelling (t<rows an invocation>; "-inorder": causal blocks numbered
bh-major instead of heaviest first, kernels/attention.HEAVY_FIRST; "dsgemm": dq from the stored dS
by a GEMM, nn/_attention.DS_GEMM; "gemm3": dk and dv by GEMMs too, nn/_attention.GEMM_PRODUCTS),
each forced in turn, torch CUDA's backward beside (CUDA events around torch.autograd.grad of
the same output). GPU time of the backward's dispatches only; `--breakdown` prints each
dispatch's (the kernel a label guessed from its WGSL, its grid, its µs).
`PYRITE_BACKEND=wgpu|dawn python scripts/attention_bwd_ab.py [--json PATH] [--only REGEX]
[--variants a,b] [--breakdown]`"""

import json
import re
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.kernels import attention as K
from pyrite.kernels import attention_tiled_bwd as KB
from pyrite.nn import _attention

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from attention_ab import CASES as AB_CASES  # noqa: E402
from attention_ab import torch_us  # noqa: E402
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional

# attention_ab's cases, those with a backward worth timing
SHAPES = ("BERT-base", "BERT-base batch 1", "512 tokens", "causal 4096", "GPT bench",
          "E=128 prefill 512", "E=128, 128 tokens", "E=32, 512 tokens")  # fmt: skip
CASES = [c for c in AB_CASES if c[0] in SHAPES]


# (name, FORCE_TILED_BWD, BWD_RPT, kernels/attention.HEAVY_FIRST, nn/_attention.DS_GEMM,
# attention_tiled_bwd.P_SHUFFLE, nn/_attention.GEMM_PRODUCTS)
VARIANTS = [
    ("rows", False, 4, True, False, False, False),
    ("t4", True, 4, True, False, False, False),
    ("t2", True, 2, True, False, False, False),
    ("t2-inorder", True, 2, False, False, False, False),
    ("dsgemm", True, 2, True, True, False, False),  # dq from the stored dS by a GEMM
    ("t2-shfl", True, 2, True, False, True, False),  # the products' weights by subgroup shuffles
    ("dsgemm-shfl", True, 2, True, True, True, False),
    ("gemm3", True, 2, True, True, False, True),  # P and dS stored, dq, dk, dv by GEMMs
]

# (a WGSL name the kernel declares, the label --breakdown gives it), first match wins
LABELS = [
    ("pg:", "attn P+dS (no products)"),
    ("dsg:", "attn dk/dv + dS"),
    ("dpart:", "attn dq + D"),
    ("lsh:", "attn dk/dv"),
]


def kernel_label(src) -> str:
    """A short name for a dispatch's kernel: the attention kernels by their buffers, any other
    by its size and workgroup (a GEMM is the one of ~150 lines)."""
    text = src.wgsl
    for key, name in LABELS:
        if key in text:
            return name
    wg = re.search(r"@workgroup_size\(([^)]*)\)", text)
    return f"{len(text.splitlines())} lines, workgroup {wg.group(1) if wg else '?'}"


def main():
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    rng = np.random.default_rng(0)
    only = re.compile(sys.argv[sys.argv.index("--only") + 1]) if "--only" in sys.argv else None
    rows = []
    default, shuffle, gemm0 = KB.BWD_RPT, KB.P_SHUFFLE, _attention.GEMM_PRODUCTS
    only_v = (  # --variants a,b: only these
        sys.argv[sys.argv.index("--variants") + 1].split(",") if "--variants" in sys.argv else None
    )
    for label, (B, H, L, S, E), causal, masked in CASES:
        if only is not None and not only.search(label):
            continue
        q, k, v = (
            pr.tensor(rng.standard_normal((B, H, n, E)).astype(np.float32)).requires_grad_()
            for n in (L, S, S)
        )
        keep = np.ones((B, 1, 1, S), dtype=bool)
        keep[..., S - S // 4 :] = False
        kw = {"is_causal": True} if causal else {"attn_mask": pr.tensor(keep)} if masked else {}
        o = F.scaled_dot_product_attention(q, k, v, **kw)
        g = pr.tensor(rng.standard_normal((B, H, L, E)).astype(np.float32))
        flops = 10 * B * H * L * S * E / (2 if causal else 1)  # (5 products, recomputing S)
        row = {"case": label, "shape": [B, H, L, S, E]}
        for name, force, rpt, heavy, ds, shfl, gemm3 in VARIANTS:
            if only_v is not None and name not in only_v:
                continue
            _attention.FORCE_TILED_BWD, KB.BWD_RPT, K.HEAVY_FIRST = force, rpt, heavy
            _attention.DS_GEMM, KB.P_SHUFFLE, _attention.GEMM_PRODUCTS = ds, shfl, gemm3
            try:
                times = kernel_times(lambda: pr.autograd.grad(o, (q, k, v), g, retain_graph=True))
            finally:
                _attention.FORCE_TILED_BWD, KB.BWD_RPT, K.HEAVY_FIRST = None, default, True
                _attention.DS_GEMM, KB.P_SHUFFLE, _attention.GEMM_PRODUCTS = None, shuffle, gemm0
            row[name] = sum(t for t, *_ in times) / 1e3
            row[name + "_dispatches"] = len(times)
            row[name + "_each"] = [
                [kernel_label(src), list(grid), t / 1e3] for t, grid, src in times
            ]
            if "--breakdown" in sys.argv:
                for t, grid, src in times:
                    what = f"{kernel_label(src):<40} {str(grid):<16}"
                    print(f"  {label} {name:<12} {what} {t / 1e3:9.1f} us")
        row["torch"] = torch_us((B, H, L, S, E), causal, masked, backward=True)
        rows.append(row)
        names = [n for n, *_ in VARIANTS] + ["torch"]
        cells = "  ".join(f"{n} {row[n]:8.1f}" for n in names if row.get(n))
        best = min(row[n] for n, *_ in VARIANTS if n in row)
        tf = flops / (max(best, 1e-3) * 1e-6) / 1e12
        print(f"{label:<18} {str((B, H, L, S, E)):<24} us: {cells}  best {tf:5.1f} TFLOP/s")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
