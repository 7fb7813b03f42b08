"""A/B of the f32 sum's vec4 step (ops/reduce.SUM4: a vec4's four elements added plainly,
then one TwoSum, against a TwoSum an element): x.sum().item() round trips and the kernel's GPU
time (timestamps), and the error against float64, at small and large sizes.
`PYRITE_BACKEND=wgpu|dawn python scripts/sum4_ab.py`"""

import sys

import numpy as np

import pyrite as pr
import pyrite.ops.reduce as R
from pyrite import backend
from pyrite.bench import _median_us

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpu_time import kernel_times  # noqa: E402

dev = backend.current()
print(f"{dev.name} ({dev.impl})")
rng = np.random.default_rng(0)
for n in (128 * 768, 1 << 18, 1 << 20, 1 << 24):
    a = rng.standard_normal(n).astype(np.float32)
    x = pr.tensor(a)
    want = a.astype(np.float64).sum()
    cells = []
    for sum4 in (False, True, False, True):
        R.SUM4 = sum4
        got = x.sum().item()
        us = _median_us(lambda: x.sum().item(), 300, 30) if n < 1 << 24 else float("nan")
        gpu = sum(t for t, *_ in kernel_times(lambda: x.sum())) / 1e3
        err = abs(got - want) / np.spacing(np.float32(abs(want)))
        cells.append(f"sum4={int(sum4)} item {us:6.1f} us gpu {gpu:7.1f} us err {err:4.2f} ulp")
    print(f"{n:>10,} {R.LAST_PATH:12s} " + " | ".join(cells))
