"""GPU time of BERT-base batch 32's elementwise and row ops, each dispatch alone by timestamp
queries (scripts/gpu_time.kernel_times), against the copy of the same bytes and torch CUDA's
kernel time (CUDA events): GELU over 4096×3072, the residual add over 4096×768, layer_norm over
4096×768 (issue 6's row). `PYRITE_BACKEND=wgpu|dawn python scripts/bert_maps_time.py`"""

import statistics
import sys

import numpy as np

import pyrite as pr

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional


def torch_cuda_us(fn, arrays):
    """torch CUDA's median µs of fn(torch, tensors) by CUDA events, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    ts = [torch.tensor(a, device="cuda") for a in arrays]
    for _ in range(5):
        fn(torch, ts)
    out = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(torch, ts)
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def main():
    dev = pr.backend.current()
    print(f"{dev.name} ({dev.impl})")
    rng = np.random.default_rng(0)
    h = pr.tensor(rng.standard_normal((4096, 3072)).astype(np.float32))
    x, y = (pr.tensor(rng.standard_normal((4096, 768)).astype(np.float32)) for _ in range(2))
    w, b = pr.ones(768), pr.zeros(768)
    cases = [
        ("gelu 4096x3072", lambda L, h, x, y, w, b: L.nn.functional.gelu(h), 2 * h.numel() * 4),
        ("gelu tanh 4096x3072", lambda L, h, x, y, w, b: L.nn.functional.gelu(h, approximate="tanh"),
         2 * h.numel() * 4),
        ("silu 4096x3072", lambda L, h, x, y, w, b: L.nn.functional.silu(h), 2 * h.numel() * 4),
        ("sigmoid 4096x3072", lambda L, h, x, y, w, b: L.sigmoid(h), 2 * h.numel() * 4),
        ("add 4096x768", lambda L, h, x, y, w, b: x + y, 3 * x.numel() * 4),
        ("copy 4096x3072", lambda L, h, x, y, w, b: h.clone(), 2 * h.numel() * 4),
        ("layer_norm 4096x768", lambda L, h, x, y, w, b: L.nn.functional.layer_norm(x, (768,), w, b),
         2 * x.numel() * 4),
    ]  # fmt: skip
    tensors = (h, x, y, w, b)
    for label, fn, nbytes in cases:
        times = kernel_times(lambda: fn(pr, *tensors))
        us = sum(t for t, *_ in times) / 1e3
        tc = torch_cuda_us(lambda L, ts: fn(L, *ts), [t.numpy() for t in tensors])
        peer = f"torch {tc:7.1f} us ({nbytes / tc / 1e3:5.0f} GB/s)" if tc else ""
        print(
            f"{label:<22} {us:7.1f} us ({nbytes / us / 1e3:5.0f} GB/s, {len(times)} kernels)  {peer}"
        )


if __name__ == "__main__":
    main()
