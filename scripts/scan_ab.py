"""cumsum's GPU time by shape, chunking (ops/reduce.py SCAN_TARGET_WORKGROUPS) and staging
(SCAN_STAGE), GB/s of read + write by timestamps over all its dispatches, beside torch CUDA's.
`PYRITE_BACKEND=wgpu|dawn python scripts/scan_ab.py [--targets 1024,2048,4096] [--stage 0,1]`
"""

import os
import sys

import pyrite as pr
from pyrite.ops import reduce as R

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_time import kernel_times  # noqa: E402


def torch_gbps(shape, dim):
    try:
        import torch

        if not torch.cuda.is_available():
            return float("nan")
    except ImportError:
        return float("nan")
    x = torch.randn(*shape, device="cuda")
    for _ in range(3):
        x.cumsum(dim)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        x.cumsum(dim)
    e.record()
    torch.cuda.synchronize()
    return 8 * x.numel() / (s.elapsed_time(e) / 20 * 1e6)


def main():
    targets = [4096]
    if "--targets" in sys.argv:
        targets = [int(v) for v in sys.argv[sys.argv.index("--targets") + 1].split(",")]
    stages = [R.SCAN_STAGE]
    if "--stage" in sys.argv:
        stages = [v == "1" for v in sys.argv[sys.argv.index("--stage") + 1].split(",")]
    dev = pr.backend.current()
    print(f"{dev.name} ({dev.impl})")
    for shape in ((1, 1 << 24), (4, 1 << 22), (64, 65536), (1024, 4096), (4096, 1024)):
        x = pr.randn(*shape)
        tg = torch_gbps(shape, 1)
        for target, stage in [(a, b) for a in targets for b in stages]:
            R.SCAN_TARGET_WORKGROUPS, R.SCAN_STAGE = target, stage
            x.cumsum(1)
            ks = kernel_times(lambda: x.cumsum(1), reps=10)
            ns = sum(t for t, _, _ in ks)
            print(
                f"  {str(shape):>14} target {target:>5} staged {int(stage)}: {len(ks)} dispatches, "
                f"{ns / 1e3:8.1f} us, "
                f"{8 * x.numel() / ns:6.0f} GB/s (torch CUDA {tg:6.0f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
