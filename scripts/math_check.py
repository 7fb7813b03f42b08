"""Build and run the elementwise math functions on this device and compare with numpy float64:
a quick check that kernels/mathlib.py's functions compile and hold their accuracy on an
implementation (Dawn's Tint and wgpu-native's naga accept different WGSL).

    PYRITE_BACKEND=wgpu|dawn python scripts/math_check.py
"""

import numpy as np

import pyrite as pr

rng = np.random.default_rng(0)
x = np.concatenate(
    [rng.uniform(1e-3, 3, 4000), 1 - rng.uniform(0, 1e-3, 500), rng.uniform(-80, 80, 500)]
).astype(np.float32)
pos = np.abs(x) + np.float32(1e-30)
cases = {
    "log": (pos, np.log),
    "log2": (pos, np.log2),
    "log10": (pos, np.log10),
    "exp": (x, np.exp),
    "expm1": (x, np.expm1),
    "sigmoid": (x, lambda v: 1 / (1 + np.exp(-v))),
    "tanh": (x, np.tanh),
}
print(pr.device_info()["name"], pr.device_info()["implementation"])
worst = 0.0
for name, (a, ref) in cases.items():
    got = getattr(pr, name)(pr.tensor(a)).numpy().astype(np.float64)
    want = ref(a.astype(np.float64))
    ok = np.isfinite(want) & (np.abs(want) < 3e38)
    ulp = np.spacing(np.abs(want[ok]).astype(np.float32)).astype(np.float64)
    err = float(np.max(np.abs(got[ok] - want[ok]) / np.maximum(ulp, 1e-45)))
    worst = max(worst, err)
    print(f"{name:8s} worst {err:8.1f} ULP")
b = rng.uniform(0.1, 3, 2000).astype(np.float32)
e = rng.uniform(-20, 20, 2000).astype(np.float32)
got = (pr.tensor(b) ** pr.tensor(e)).numpy().astype(np.float64)
want = b.astype(np.float64) ** e.astype(np.float64)
ok = np.abs(want) < 3e38
err = float(np.max(np.abs(got[ok] - want[ok]) / np.spacing(want[ok].astype(np.float32))))
print(f"pow      worst {err:8.1f} ULP")
print("ok" if max(worst, err) < 64 else "LARGE ERRORS")
