"""GB/s of a few elementwise functions over 16M f32 on this device (the accurate sin/cos of
kernels/mathlib.py against exp and a plain negation): `python scripts/unary_time.py`."""

import numpy as np

import pyrite as pr
from pyrite.bench import _median_time

x = pr.tensor((np.random.default_rng(0).standard_normal(1 << 24) * 10).astype(np.float32))
for name in ("sin", "cos", "exp", "neg"):
    f = getattr(pr, name)
    t = _median_time(lambda: f(x))
    print(f"{name}: {t * 1e6:.1f} us, {8 * (1 << 24) / t / 1e9:.0f} GB/s")
