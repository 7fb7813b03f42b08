"""Time one AdamW step over an MLP's parameters (784x256, 256, 256x10, 10: 203,530 floats).

    python scripts/bench_optim.py [--steps 50] [--amsgrad]

Prints the device, the median step time (device synchronised around each step), the number
of dispatches a step records, and torch CPU's AdamW on the same shapes when torch is installed.
On lavapipe only the ratios mean anything (DESIGN.md, "Measuring").
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pyrite as pr
from pyrite import backend

SHAPES = [(784, 256), (256,), (256, 10), (10,)]


def time_steps(step, sync, n):
    times = []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--amsgrad", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    params = [pr.tensor(w).requires_grad_() for w in weights]
    for p, g in zip(params, grads):
        p.grad = pr.tensor(g)
    opt = pr.optim.AdamW(params, lr=1e-3, amsgrad=args.amsgrad)
    dev = backend.current()
    for _ in range(5):  # warm-up: state allocation, the pipeline build
        opt.step()
    before = dev.dispatches
    opt.step()
    per_step = dev.dispatches - before
    t = time_steps(opt.step, pr.synchronize, args.steps)

    def ten_steps():
        for _ in range(10):
            opt.step()

    t10 = time_steps(ten_steps, pr.synchronize, max(args.steps // 10, 3)) / 10
    t_sync = time_steps(lambda: None, pr.synchronize, args.steps)
    n = sum(int(np.prod(s)) for s in SHAPES)
    info = pr.device_info()
    name = info.get("name", "?") if isinstance(info, dict) else str(info)
    print(f"device: {name} ({dev.impl}, {dev.adapter_type})")
    print(
        f"pyrite AdamW step over {n:,} parameters: {t * 1e3:.3f} ms median of {args.steps} "
        f"({per_step} dispatches a step; {7 * 4 * n / 1e9 / t:.2f} GB/s counting param, grad, "
        "exp_avg, exp_avg_sq read and param, exp_avg, exp_avg_sq written)"
    )
    print(f"  ten steps between synchronisations: {t10 * 1e3:.3f} ms a step")
    print(f"  an empty synchronisation alone: {t_sync * 1e3:.3f} ms")
    try:
        import torch
    except ImportError:
        return
    tp = [torch.tensor(w).requires_grad_() for w in weights]
    for p, g in zip(tp, grads):
        p.grad = torch.tensor(g)
    for label, kw in (("for-loop", {"foreach": False}), ("foreach", {"foreach": True})):
        topt = torch.optim.AdamW(tp, lr=1e-3, amsgrad=args.amsgrad, **kw)
        for _ in range(5):
            topt.step()
        tt = time_steps(topt.step, lambda: None, args.steps)
        print(f"torch CPU AdamW ({label}, {torch.get_num_threads()} threads): {tt * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
