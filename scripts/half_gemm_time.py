"""GPU time of F.linear's GEMM with float32, float16 and bfloat16 storage at BERT-base's
products and 4096^3, by timestamp queries (scripts/gpu_time.py), beside the path each half type
took before gemm_fast read half storage (f16: the general tiled kernel, forced; bf16: ops/
fallback's widening to f32 and back, its three kernels summed) and torch CUDA's time for the
same product when torch sees a GPU (f32 with TF32 off; f16/bf16 on its tensor cores), and for
f16 the time with f16 arithmetic (`pr.backends.cuda.matmul.allow_fp16_accumulation`).

    PYRITE_BACKEND=wgpu python scripts/half_gemm_time.py [--quick] [--json PATH]
"""

import inspect
import json
import statistics
import sys

import pyrite as pr
from pyrite import backend
from pyrite.ops import fallback
from pyrite.ops import matmul as mm

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional


def gpu_us(fn, reps=7):
    """Median microseconds of fn's dispatches, summed (each replayed in its own pass)."""
    return sum(t for t, *_ in kernel_times(fn, reps=reps)) / 1e3


def torch_us(M, N, K, dt):
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dt]
    x = torch.randn(M, K, device="cuda", dtype=tdt)
    w = torch.randn(N, K, device="cuda", dtype=tdt)
    b = torch.randn(N, device="cuda", dtype=tdt)
    for _ in range(3):
        torch.nn.functional.linear(x, w, b)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ts = []
    for _ in range(7):
        ev[0].record()
        for _ in range(10):
            torch.nn.functional.linear(x, w, b)
        ev[1].record()
        torch.cuda.synchronize()
        ts.append(ev[0].elapsed_time(ev[1]) * 100)  # ms for 10 -> us each
    return statistics.median(ts)


def main():
    quick = "--quick" in sys.argv
    out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv else None
    dev = backend.current()
    print(f"{dev.name} ({dev.impl})")
    shapes = [(256, 256, 256)] if quick else [
        (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072), (128, 768, 768), (4096, 4096, 4096)
    ]  # fmt: skip
    dts = [pr.float32, pr.bfloat16] + ([pr.float16] if dev.has_f16 else [])
    rows = []
    linear_raw = inspect.unwrap(mm.linear)
    for M, N, K in shapes:
        flops = 2 * M * N * K
        for dt in dts:
            x, w, b = pr.randn(M, K, dtype=dt), pr.randn(N, K, dtype=dt), pr.randn(N, dtype=dt)
            t = gpu_us(lambda: F.linear(x, w, b))
            kind = mm.LAST
            if dt is pr.float16:
                mm.FORCE = ("tiled", None)
                try:
                    before = gpu_us(lambda: F.linear(x, w, b))
                finally:
                    mm.FORCE = None
            elif dt is pr.bfloat16:
                before = gpu_us(lambda: fallback._slow(linear_raw, "linear", False, (x, w, b), {}))
            else:
                before = None
            arith = None
            if dt is pr.float16:  # f16 arithmetic (gemm_fast's acc16)
                pr.backends.cuda.matmul.allow_fp16_accumulation = True
                try:
                    arith = gpu_us(lambda: F.linear(x, w, b))
                finally:
                    pr.backends.cuda.matmul.allow_fp16_accumulation = False
            peer = torch_us(M, N, K, str(dt).split(".")[-1])
            row = {
                "M": M, "N": N, "K": K, "dtype": str(dt), "us": t, "kernel": str(kind),
                "TFLOPs": flops / t / 1e6, "before_us": before, "torch_cuda_us": peer,
                "f16_arithmetic_us": arith,
            }  # fmt: skip
            rows.append(row)
            extra = f", before {before:.1f} us" if before else ""
            extra += f", f16 arithmetic {arith:.1f} us" if arith else ""
            extra += f", torch CUDA {peer:.1f} us" if peer else ""
            print(
                f"{M}x{K} . {N}x{K}T + b {dt}: {t:.1f} us ({flops / t / 1e6:.1f} TFLOP/s) "
                f"{kind[0]}{extra}",
                flush=True,
            )
    if out:
        with open(out, "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
