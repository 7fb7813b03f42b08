"""Where an eager training step's time goes (host profile), for the small GPT of bench/train.py:
`PYRITE_BACKEND=wgpu|dawn python scripts/eager_step_probe.py [--no-cat]`."""

import cProfile
import pstats
import sys
import time

import numpy as np

import pyrite as pr
from pyrite.bench.train import _gpt

if "--no-cat" in sys.argv:
    from pyrite.ops import combine

    combine._cat_kernel = lambda *a: False
rng = np.random.default_rng(0)
idx = pr.tensor(rng.integers(0, 256, (8, 64)))
step = _gpt(pr, idx, pr.tensor(rng.integers(0, 256, (8, 64))))
for _ in range(5):
    step()
pr.synchronize()
t = time.perf_counter()
for _ in range(5):
    step()
pr.synchronize()
print(f"eager step {(time.perf_counter() - t) / 5 * 1e3:.2f} ms")
p = cProfile.Profile()
p.enable()
step()
pr.synchronize()
p.disable()
pstats.Stats(p).sort_stats("tottime").print_stats(12)
