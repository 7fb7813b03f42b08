"""A/B of the attention forward kernels by GPU time (timestamp queries, scripts/gpu_time.py):
the per-query flash kernel, the register-tiled one (kernels/attention_tiled.py; "tiled-inorder":
causal blocks numbered bh-major, not heaviest first; "-r4" / "-r2": 4 or 2 query rows an
invocation; "-nosg": rows merged through workgroup memory, not subgroup shuffles) and, for few
queries, the decode kernel, each forced in turn, at issue 6's shapes and around the rules'
thresholds (nn/_attention.py TILED_MIN_L, DECODE_MAX_L), torch CUDA beside (CUDA events).
`PYRITE_BACKEND=wgpu|dawn python scripts/attention_ab.py [--json PATH] [--only REGEX]
[--kernels NAME,..] [--check]` (--check: each variant's largest difference from the rule's pick)
(Dawn on the lent GPUs quantizes timestamps to 65.5 µs: its columns are multiples of that and
say little; take Dawn's figures from `pyrite bench --only attention`, timed on the host.)"""

import json
import re
import statistics
import sys

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.kernels import attention, attention_tiled
from pyrite.nn import _attention

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional

# (label, (B, H, L, S, E), causal, padding mask)
CASES = [
    ("BERT-base", (32, 12, 128, 128, 64), False, True),
    ("BERT-base batch 1", (1, 12, 128, 128, 64), False, True),
    ("BERT-base batch 4", (4, 12, 128, 128, 64), False, True),
    ("BERT-base batch 8", (8, 12, 128, 128, 64), False, True),
    ("BERT-base batch 2", (2, 12, 128, 128, 64), False, True),
    ("BERT-base batch 16", (16, 12, 128, 128, 64), False, True),
    ("1024 tokens", (1, 12, 1024, 1024, 64), False, False),
    ("512 tokens batch 1", (1, 12, 512, 512, 64), False, False),
    ("causal 1024", (1, 16, 1024, 1024, 64), True, False),
    ("causal 2048", (1, 16, 2048, 2048, 64), True, False),  # (256 blocks of 128)
    ("causal 1024 x2", (2, 16, 1024, 1024, 64), True, False),  # (256)
    ("causal 1024 x4", (4, 16, 1024, 1024, 64), True, False),  # (512)
    ("causal 512 x8", (8, 12, 512, 512, 64), True, False),  # (384)
    ("512 tokens", (2, 12, 512, 512, 64), False, False),
    ("causal 4096", (1, 16, 4096, 4096, 64), True, False),
    ("GPT bench", (8, 4, 64, 64, 32), True, False),
    ("E=128 prefill 512", (1, 32, 512, 512, 128), True, False),
    ("E=128, 128 tokens", (8, 16, 128, 128, 128), False, True),
    ("E=32, 512 tokens", (8, 12, 512, 512, 32), True, False),
    ("L=16", (8, 12, 16, 512, 64), False, False),
    ("L=32", (8, 12, 32, 512, 64), False, False),
    ("L=8", (8, 12, 8, 512, 64), False, False),
    ("L=4", (8, 12, 4, 512, 64), False, False),
    ("decode 4096", (1, 16, 1, 4096, 64), False, False),
    ("decode 4096 E=128", (1, 32, 1, 4096, 128), False, False),
    ("decode 16384 x8", (8, 8, 1, 16384, 64), False, False),
    ("decode 4 queries", (4, 32, 4, 2048, 128), False, False),
    # BERT-base's heads at other key and query counts (no mask): a key tile's cost (the slope
    # over S) against a workgroup's fixed cost (q staging, the epilogue: the intercept)
    *((f"scale S={s}", (32, 12, 128, s, 64), False, False) for s in (32, 64, 256, 512)),
    ("scale S=128", (32, 12, 128, 128, 64), False, False),
    *((f"scale L={n}", (32, 12, n, 128, 64), False, False) for n in (64, 256, 512)),
]
KERNELS = {
    "flash": dict(FORCE_TILED=False, FORCE_DECODE=False),
    "tiled": dict(FORCE_TILED=True, FORCE_DECODE=False, PREFETCH=True),
    "tiled0": dict(FORCE_TILED=True, FORCE_DECODE=False, PREFETCH=False),
    "tiled-inorder": dict(FORCE_TILED=True, FORCE_DECODE=False, HEAVY_FIRST=False),
    "tiled-r4": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_RPT=4),
    "tiled-r2": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_RPT=2),
    "tiled-nosg": dict(FORCE_TILED=True, FORCE_DECODE=False, SUBGROUP_ROWS=False),
    "tiled-pshfl": dict(FORCE_TILED=True, FORCE_DECODE=False, P_SHUFFLE=True),
    "tiled-db": dict(FORCE_TILED=True, FORCE_DECODE=False, P_SHUFFLE=True, DOUBLE_BUFFER=True),
    "tiled-bq32": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=32, FORCE_TILED_RPT=2),
    "tiled-bq32-r4": dict(
        FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=32, FORCE_TILED_RPT=4
    ),
    "tiled-db-r4": dict(
        FORCE_TILED=True, FORCE_DECODE=False, P_SHUFFLE=True, DOUBLE_BUFFER=True, FORCE_TILED_RPT=4
    ),
    # blocks of 128 queries (48 KiB of workgroup memory at E = 64): 4 rows an invocation (256
    # invocations), 2 (512), without PREFETCH
    "bq128": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=128, FORCE_TILED_RPT=4),
    "bq128-r2": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=128, FORCE_TILED_RPT=2),
    "bq128-pf0": dict(
        FORCE_TILED=True,
        FORCE_DECODE=False,
        FORCE_TILED_BQ=128,
        FORCE_TILED_RPT=4,
        PREFETCH=False,
    ),
    # blocks of 64 queries, rows an invocation by the rule (what the rule took before TILED_WIDE_BQ)
    "bq64": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=64),
    "decode": dict(FORCE_TILED=False, FORCE_DECODE=True),
    "auto": dict(FORCE_TILED=None, FORCE_DECODE=None),
}


def torch_us(shape, causal, masked, backward=False):
    """torch CUDA's median µs of the forward (or, `backward`, of the backward alone) by CUDA
    events, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    B, H, L, S, E = shape
    q = torch.randn(B, H, L, E, device="cuda", requires_grad=backward)
    k, v = (torch.randn(B, H, S, E, device="cuda", requires_grad=backward) for _ in range(2))
    m = torch.ones(B, 1, 1, S, dtype=torch.bool, device="cuda")
    m[..., S - S // 4 :] = False
    kw = {"is_causal": True} if causal else {"attn_mask": m} if masked else {}
    f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
    if backward:  # (the backward alone, of one forward's output)
        o = f()
        g = torch.randn_like(o)
        f = lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True)  # noqa: E731
    return cuda_us(torch, f)


def cuda_us(torch, f):
    """The median µs of f() on the CUDA stream by CUDA events (5 calls first)."""
    for _ in range(5):
        f()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) * 1e3)
    return statistics.median(ts)


def main():
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    rng = np.random.default_rng(0)
    rows = []
    prefetch = attention_tiled.PREFETCH
    variant = attention_tiled.P_SHUFFLE, attention_tiled.DOUBLE_BUFFER
    only = re.compile(sys.argv[sys.argv.index("--only") + 1]) if "--only" in sys.argv else None
    kernels = (  # --kernels a,b: only these (and the rule's pick, "auto")
        sys.argv[sys.argv.index("--kernels") + 1].split(",") if "--kernels" in sys.argv else None
    )
    check = "--check" in sys.argv  # each variant's output against the rule's pick
    for label, (B, H, L, S, E), causal, masked in CASES:
        if only is not None and not only.search(label):
            continue
        q = pr.tensor(rng.standard_normal((B, H, L, E)).astype(np.float32))
        k = pr.tensor(rng.standard_normal((B, H, S, E)).astype(np.float32))
        v = pr.tensor(rng.standard_normal((B, H, S, E)).astype(np.float32))
        keep = np.ones((B, 1, 1, S), dtype=bool)
        keep[..., S - S // 4 :] = False
        m = pr.tensor(keep)
        kw = {"is_causal": True} if causal else {"attn_mask": m} if masked else {}
        flops = 4 * B * H * L * S * E / (2 if causal else 1)
        row = {"case": label, "shape": [B, H, L, S, E]}
        ref = F.scaled_dot_product_attention(q, k, v, **kw).numpy()  # (the rule's pick)
        diffs = {}
        for name, force in KERNELS.items():
            if kernels is not None and name not in kernels and name != "auto":
                continue
            if name == "decode" and L > 8 or name.startswith("tiled") and E > 128:
                continue
            where = {"PREFETCH": attention_tiled, "HEAVY_FIRST": attention}
            where.update(P_SHUFFLE=attention_tiled, DOUBLE_BUFFER=attention_tiled)
            for k_, v_ in force.items():
                setattr(where.get(k_, _attention), k_, v_)
            try:
                if check:  # (a variant the rule does not take: its output against the rule's)
                    got = F.scaled_dot_product_attention(q, k, v, **kw).numpy()
                    diffs[name] = float(np.abs(got - ref).max())
                times = kernel_times(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
                if force.get("FORCE_TILED") and not _attention._use_tiled(dev, B * H, L, S, E):
                    print(f"  {name}: the tiled kernel cannot run here (another one timed)")
            except Exception as e:  # (a variant that cannot run here: say so, go on)
                print(f"  {name}: {type(e).__name__}: {str(e)[:200]}")
                continue
            finally:
                _attention.FORCE_TILED = _attention.FORCE_DECODE = None
                _attention.FORCE_TILED_RPT = _attention.FORCE_TILED_BQ = None
                _attention.SUBGROUP_ROWS = True
                attention_tiled.PREFETCH = prefetch
                attention_tiled.P_SHUFFLE, attention_tiled.DOUBLE_BUFFER = variant
                attention.HEAVY_FIRST = True
            row[name] = sum(t for t, *_ in times) / 1e3
            row[name + "_dispatches"] = len(times)
        row["torch"] = torch_us((B, H, L, S, E), causal, masked)
        row["max_abs_diff"] = diffs
        if diffs:
            print(f"  max |variant - rule's pick|: {diffs}")
        row["gflop"] = flops / 1e9
        rows.append(row)
        cells = "  ".join(
            f"{n} {row[n]:9.1f}" for n in (*KERNELS, "torch") if row.get(n) is not None
        )
        tf = flops / (max(row["auto"], 1e-3) * 1e-6) / 1e12  # (Dawn may quantize to 0)
        print(f"{label:<22} {str((B, H, L, S, E)):<26} us: {cells}   auto {tf:5.1f} TFLOP/s")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
