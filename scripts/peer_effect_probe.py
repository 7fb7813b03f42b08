"""Does running torch CUDA in the same process change pyrite's round trips? (issue 9: the bench
times torch's peer just before each latency row.) `PYRITE_BACKEND=wgpu|dawn python
scripts/peer_effect_probe.py`: x.sum().item() and x[0, 0].item() before torch is imported, then
right after torch CUDA ran the same calls, then again after a second of rest."""

import time

import pyrite as pr
from pyrite.bench import _median_us

x = pr.randn(128, 768)
pr.synchronize()


def rows(label):
    a = _median_us(lambda: x.sum().item(), 300, 30)
    b = _median_us(lambda: x[0, 0].item(), 300, 30)
    print(f"  {label:<34} x.sum().item() {a:7.1f} us   x[0, 0].item() {b:7.1f} us")


rows("before torch")
import torch  # noqa: E402

if torch.cuda.is_available():
    tc = torch.randn(128, 768, device="cuda")
    for _ in range(300):
        tc.sum().item()
    rows("right after torch CUDA's calls")
    time.sleep(1.0)
    rows("after a second of rest")
    for _ in range(300):
        tc.sum().item()
        x.sum().item()
    t = _median_us(lambda: (tc.sum().item(), x.sum().item()), 300, 30)
    print(f"  interleaved torch + pyrite sum().item() pairs {t:7.1f} us a pair")
