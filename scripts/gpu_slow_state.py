"""Probe: what flips the H200 from fast to slow kernels (time idle, uploads, frees), and what
brings it back (`--busy`: seconds of back-to-back copies). Measured 2026-12-03, wgpu-native:
every kernel ran ~4x slower (int8 GEMV 17.9 -> 87 us, f32 GEMV 50 -> 142 us) from 2-4 s after
the process's last sustained work on, and stayed so through uploads, frees and fills.

    PYRITE_BACKEND=wgpu python scripts/gpu_slow_state.py [--busy] [--quick] [--torch]

`--torch`: the same idle sequence for PyTorch CUDA's f32 F.linear (CUDA events), to see whether
the card or the Vulkan path has the slow phase. Lines carry the wall clock (UTC, ms) so they
line up with `nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,... -lms 100`.
"""

import sys
import time

import numpy as np

sys.path.insert(0, "scripts")
from qgemv_time import one_pass_mean

import pyrite as pr
from pyrite.bench.quant import _random_qweight
from pyrite.ops import quantized as Q

quick = "--quick" in sys.argv
use_torch = "--torch" in sys.argv
rng = np.random.default_rng(0)
N, K = (1024, 512) if quick else (11008, 4096)
t0 = time.time()


def stamp():
    now = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}"


if use_torch:
    import torch

    xt = torch.randn(1, K, device="cuda")
    yt = [torch.randn(N, K, device="cuda") for _ in range(4)]
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]

    def t(label):
        ev[0].record()
        for w in yt:
            torch.nn.functional.linear(xt, w)
        ev[1].record()
        torch.cuda.synchronize()
        b = ev[0].elapsed_time(ev[1]) * 1e3 / len(yt)
        print(f"{stamp()} {time.time() - t0:6.1f} s {label}: torch f32 {b:.1f} us", flush=True)

else:
    x = pr.randn(1, K)
    Q.QGEMV_SHAPE[1] = (64, 2, 2, 2)
    w1 = [_random_qweight(rng, 8, None, N, K) for _ in range(9)]
    y = pr.randn(N, K)

    def t(label):
        a = one_pass_mean(lambda: [Q.qlinear(x, w) for w in w1])
        b = one_pass_mean(lambda: [pr.nn.functional.linear(x, y) for _ in range(4)])
        print(
            f"{stamp()} {time.time() - t0:6.1f} s {label}: int8 {a / 1e3:.1f} us, "
            f"f32 {b / 1e3:.1f} us",
            flush=True,
        )


def sequence():
    t("start")
    for i in range(4):
        time.sleep(2)
        t(f"idle {i}")
    mb = 16 if quick else 256
    arr = np.ones(mb << 18, np.float32)
    up = []
    for i in range(6):
        up.append(pr.tensor(arr))
        pr.synchronize()
        t(f"after uploading {(i + 1) * mb} MB")
    for i in range(3):
        up.pop()
        pr.synchronize()
        t(f"after freeing one upload ({len(up)} left)")
    up = None
    dev = pr.backend.current()
    dev.pool.trim()
    t("after trim")
    z = [pr.zeros(mb << 18) for _ in range(4)]
    pr.synchronize()
    t("after 4 device fills")
    del z
    t("after freeing them")


def busy(seconds):
    """Keep the GPU loaded with copies for about `seconds` (one submit a few ms long each)."""
    end = time.time() + seconds
    big = pr.rand((4 if quick else 64) << 20)
    while time.time() < end:
        for _ in range(20):
            big.clone()
        pr.synchronize()


t("start")
if use_torch:
    for i in range(5):
        time.sleep(2)
        t(f"idle {i}")
elif "--busy" not in sys.argv:
    sequence()
else:
    time.sleep(3)
    t("after 3 s idle")
    for s in (0.25, 0.5, 1, 2, 4):
        busy(s)
        t(f"after {s} s of back-to-back copies")
    for d in (0.1, 0.5, 1, 2, 3):
        busy(1)
        time.sleep(d)
        t(f"1 s of copies, then {d} s idle")
    busy(1)
    small = pr.rand(1024)
    end = time.time() + 5
    while time.time() < end:  # a trickle: one tiny kernel and a wait every 50 ms
        (small + 1).sum().item()
        time.sleep(0.05)
    t("1 s of copies, then 5 s of one tiny kernel every 50 ms")
