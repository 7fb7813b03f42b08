"""Spatial ops (interpolate, conv, conv_transpose, pools, grid_sample, shuffles, unfold) on
the device: pyrite (median of timed batches) vs torch CUDA (which runs its convolutions in TF32,
hence their 3e-4 relative error). On the H200: see scripts/h200_prelude.sh, then
    PYRITE_BACKEND=dawn python3 scripts/bench_spatial.py   (JSON to $OUT or /tmp)
"""

import json
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.bench import _median_time

print(pr.device_info()["name"], pr.device_info()["implementation"], flush=True)
dev = "cuda"
rng = np.random.default_rng(0)
rows = []


def cuda_time(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts)


def case(name, shapes, pfn, tfn, nbytes=None, flops=None):
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    P = [pr.tensor(a) for a in arrs]
    T = [torch.tensor(a, device=dev) for a in arrs]
    try:
        got = pfn(*P)
        want = tfn(*T)
        g = got.numpy() if not isinstance(got, tuple) else got[0].numpy()
        w = want.cpu().numpy() if not isinstance(want, tuple) else want[0].cpu().numpy()
        err = float(np.abs(g - w).max() / (np.abs(w).max() + 1e-30))
        tp = _median_time(lambda: pfn(*P), repeats=5, warmup=1)
        tt = cuda_time(lambda: tfn(*T))
    except Exception as e:
        print(f"{name}: FAILED {e!r}", flush=True)
        return
    extra = ""
    if nbytes:
        extra += f"  pyrite {nbytes / tp / 1e9:7.1f} GB/s  torch {nbytes / tt / 1e9:7.1f} GB/s"
    if flops:
        extra += (
            f"  pyrite {flops / tp / 1e12:6.2f} TFLOP/s  torch {flops / tt / 1e12:6.2f} TFLOP/s"
        )
    print(
        f"{name:<48} pyrite {tp * 1e3:8.3f} ms  torch {tt * 1e3:8.3f} ms  x{tp / tt:6.1f}  relerr {err:.1e}{extra}",
        flush=True,
    )
    rows.append(dict(name=name, pyrite_ms=tp * 1e3, torch_ms=tt * 1e3, relerr=err))


B = 8 * 320 * 64 * 64 * 4
case(
    "interpolate nearest 2x (8,320,64,64)",
    [(8, 320, 64, 64)],
    lambda x: F.interpolate(x, scale_factor=2.0),
    lambda x: TF.interpolate(x, scale_factor=2.0),
    nbytes=5 * B,
)
case(
    "interpolate bilinear 2x (8,320,64,64)",
    [(8, 320, 64, 64)],
    lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear"),
    lambda x: TF.interpolate(x, scale_factor=2.0, mode="bilinear"),
    nbytes=5 * B,
)
case(
    "interpolate bicubic 0.6x (8,64,128,128)",
    [(8, 64, 128, 128)],
    lambda x: F.interpolate(x, scale_factor=0.6, mode="bicubic"),
    lambda x: TF.interpolate(x, scale_factor=0.6, mode="bicubic"),
)
case(
    "interpolate bilinear AA 0.25x (8,3,512,512)",
    [(8, 3, 512, 512)],
    lambda x: F.interpolate(x, scale_factor=0.25, mode="bilinear", antialias=True),
    lambda x: TF.interpolate(x, scale_factor=0.25, mode="bilinear", antialias=True),
)
case(
    "conv2d 3x3 (8,320,64,64)->320",
    [(8, 320, 64, 64), (320, 320, 3, 3)],
    lambda x, w: F.conv2d(x, w, padding=1),
    lambda x, w: TF.conv2d(x, w, padding=1),
    flops=2 * 8 * 320 * 4096 * 2880,
)
case(
    "conv2d 1x1 (8,320,64,64)->640",
    [(8, 320, 64, 64), (640, 320, 1, 1)],
    lambda x, w: F.conv2d(x, w),
    lambda x, w: TF.conv2d(x, w),
    flops=2 * 8 * 640 * 4096 * 320,
)
case(
    "conv_transpose2d k4s2p1 (1,512,64,64)->256",
    [(1, 512, 64, 64), (512, 256, 4, 4)],
    lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
    lambda x, w: TF.conv_transpose2d(x, w, stride=2, padding=1),
    flops=2 * 512 * 4096 * 256 * 16,
)
case(
    "conv_transpose2d k4s2p1 (8,128,64,64)->64",
    [(8, 128, 64, 64), (128, 64, 4, 4)],
    lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
    lambda x, w: TF.conv_transpose2d(x, w, stride=2, padding=1),
    flops=2 * 8 * 128 * 4096 * 64 * 16,
)
case(
    "conv3d 3x3x3 (2,64,16,32,32)->64",
    [(2, 64, 16, 32, 32), (64, 64, 3, 3, 3)],
    lambda x, w: F.conv3d(x, w, padding=1),
    lambda x, w: TF.conv3d(x, w, padding=1),
    flops=2 * 2 * 64 * 16384 * 64 * 27,
)
case(
    "max_pool2d 3x3/2 (32,64,112,112)",
    [(32, 64, 112, 112)],
    lambda x: F.max_pool2d(x, 3, 2, 1),
    lambda x: TF.max_pool2d(x, 3, 2, 1),
    nbytes=32 * 64 * 112 * 112 * 4 * 1.25,
)
case(
    "avg_pool2d 2x2 (32,256,56,56)",
    [(32, 256, 56, 56)],
    lambda x: F.avg_pool2d(x, 2),
    lambda x: TF.avg_pool2d(x, 2),
    nbytes=32 * 256 * 56 * 56 * 4 * 1.25,
)
case(
    "adaptive_avg_pool2d 1 (32,2048,7,7)",
    [(32, 2048, 7, 7)],
    lambda x: F.adaptive_avg_pool2d(x, 1),
    lambda x: TF.adaptive_avg_pool2d(x, 1),
    nbytes=32 * 2048 * 49 * 4,
)
case(
    "adaptive_avg_pool2d 1 (1,3,1024,1024) tiled",
    [(1, 3, 1024, 1024)],
    lambda x: F.adaptive_avg_pool2d(x, 1),
    lambda x: TF.adaptive_avg_pool2d(x, 1),
    nbytes=3 * 1024 * 1024 * 4,
)
case(
    "grid_sample bilinear (8,64,128,128)",
    [(8, 64, 128, 128), (8, 128, 128, 2)],
    lambda x, g: F.grid_sample(x, g.tanh(), align_corners=False),
    lambda x, g: TF.grid_sample(x, g.tanh(), align_corners=False),
    nbytes=2 * 8 * 64 * 128 * 128 * 4,
)
case(
    "pixel_shuffle 2 (8,256,64,64)",
    [(8, 256, 64, 64)],
    lambda x: F.pixel_shuffle(x, 2),
    lambda x: TF.pixel_shuffle(x, 2),
    nbytes=2 * 8 * 256 * 4096 * 4,
)
case(
    "unfold 3x3 (8,64,64,64)",
    [(8, 64, 64, 64)],
    lambda x: F.unfold(x, 3, padding=1),
    lambda x: TF.unfold(x, 3, padding=1),
    nbytes=8 * 64 * 4096 * 4 * 10,
)
json.dump(
    rows,
    open(
        os.path.join(
            os.environ.get("OUT", "/tmp"), f"spatial_{pr.device_info()['implementation']}.json"
        ),
        "w",
    ),
    indent=1,
)
