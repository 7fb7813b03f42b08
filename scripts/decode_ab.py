"""The decode kernels by GPU time (timestamp queries, scripts/gpu_time.py: every dispatch of the
call summed) at decode shapes, torch CUDA beside: the one-pass kernel (kernels/attention_decode
.attn_decode_lanes_kernel, several lanes a key, DECODE_SG None; its key ranges merged in the
same dispatch, and by the merge kernel: DECODE_FUSED_MERGE False), the two-pass kernel (DECODE_SG
False), and the kernel the call takes without decode (FORCE_DECODE False: tiled or flash), with
the one-pass kernel's time at each count of key ranges. Grouped-query shapes (Hq query heads
over Hk key/value heads) run with enable_gqa, one query a head folded into rows of the key head.

    PYRITE_BACKEND=wgpu python scripts/decode_ab.py [--json PATH]
"""

import json
import sys

import pyrite as pr
from pyrite import backend
from pyrite.kernels import attention_decode as _KD
from pyrite.nn import _attention as A

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from attention_ab import cuda_us  # noqa: E402
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional
# (B, Hq, Hk, L, S, E)
SHAPES = [
    (1, 16, 16, 1, 4096, 64),
    (1, 32, 32, 1, 4096, 128),
    (8, 8, 8, 1, 16384, 64),
    (1, 32, 8, 1, 4096, 128),  # Llama-3-8B's heads, one token
    (1, 64, 8, 1, 8192, 128),  # Llama-3-70B's heads
    (4, 32, 32, 4, 2048, 128),
    (8, 12, 12, 8, 512, 64),
    (2, 16, 16, 2, 1024, 64),
]


def torch_us(shape):
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    B, hq, hk, L, S, E = shape
    q = torch.randn(B, hq, L, E, device="cuda")
    k, v = (torch.randn(B, hk, S, E, device="cuda") for _ in range(2))
    F_t = torch.nn.functional
    return cuda_us(torch, lambda: F_t.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hk))


def main():
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})", flush=True)
    rows = []

    def us(fn):
        A._PLANS.clear()
        return [t / 1e3 for t, *_ in kernel_times(fn, reps=9)]

    for shape in SHAPES:
        B, hq, hk, L, S, E = shape
        try:
            q, k, v = pr.randn(B, hq, L, E), pr.randn(B, hk, S, E), pr.randn(B, hk, S, E)
        except pr.OutOfMemoryError as e:
            print(f"{shape}: skipped: {e}")
            continue
        fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hk)  # noqa: E731
        row = {"shape": shape, "torch_us": torch_us(shape)}
        for name, sg, force, fm in (("one-pass", None, None, None),
                                    ("one-pass, merge kernel", None, None, False),
                                    ("two-pass", False, None, None),
                                    ("no decode", None, False, None)):  # fmt: skip
            _KD.DECODE_SG, A.FORCE_DECODE, A.DECODE_FUSED_MERGE = sg, force, fm
            try:
                row[name] = us(fn)
            finally:
                _KD.DECODE_SG, A.FORCE_DECODE, A.DECODE_FUSED_MERGE = None, None, None
        rule = A._decode_splits
        sweep = {}
        for p in (1, 2, 4, 8, 16):
            A._decode_splits = lambda *a, p=p: p
            try:
                sweep[p] = sum(us(fn))
            except Exception as e:  # noqa: BLE001 - (a count the kernels cannot take)
                sweep[p] = repr(e)[:60]
            finally:
                A._decode_splits = rule
        row["one-pass by ranges"] = sweep
        nbh, Lr = (B * hk, hq // hk) if hq != hk and L == 1 else (B * hq, L)
        row["rule ranges"] = A._decode_splits(dev, nbh, Lr, S, E)
        t = row["torch_us"]
        print(
            f"{shape}: one-pass {sum(row['one-pass']):.1f} us "
            f"({' + '.join(f'{x:.1f}' for x in row['one-pass'])}, {row['rule ranges']} ranges); "
            f"with the merge kernel {sum(row['one-pass, merge kernel']):.1f}; "
            f"two-pass {sum(row['two-pass']):.1f}; no decode {sum(row['no decode']):.1f}; "
            f"torch {'-' if t is None else f'{t:.1f}'}; by ranges "
            + ", ".join(
                f"{p}: {x:.1f}" if isinstance(x, float) else f"{p}: -" for p, x in sweep.items()
            ),  # fmt: skip
            flush=True,
        )
        rows.append(row)
    if out:
        with open(out, "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
