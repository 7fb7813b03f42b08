"""BERT-base's batch-32 forward with the f32 rule's big tile as shipped (ops/matmul.BIG_TILE)
and with a candidate in its place, alternated, each timing after a warm-up (pyrite bench's
BERT timing). `PYRITE_BACKEND=wgpu python scripts/bert_tile_ab.py "128,128,8,8,16,3"`"""

import statistics
import sys
import time

import numpy as np

import pyrite as pr
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build
from pyrite.ops import matmul as mmod

cand = tuple(int(v) for v in sys.argv[1].split(","))
tiles = {"shipped": mmod.BIG_TILE, "candidate": cand}
rng = np.random.default_rng(0)
layers, batch = (
    int(v) for v in (sys.argv[2:4] if len(sys.argv) > 3 else (12, 32))
)  # (smoke tests)
model = build(pr, layers=layers)
x = pr.tensor(rng.standard_normal((batch, 128, 768)).astype(np.float32))
times = {k: [] for k in tiles}
with pr.no_grad():
    want = model(x).numpy()
    for _ in range(3):
        for name, tile in tiles.items():
            mmod.BIG_TILE = tile
            mmod._plans.clear()
            warm_gpu(0)
            for _ in range(2):
                got = model(x)
            pr.synchronize()
            t = time.perf_counter()
            for _ in range(5):
                got = model(x)
            pr.synchronize()
            times[name].append((time.perf_counter() - t) / 5 * 1e3)
            err = float(np.abs(got.numpy() - want).max())
            assert err < 1e-3, (name, err)
print(f"{pr.backend.current().name}: BERT-base 32x128 forward, ms (3 alternations)")
for name, ts in times.items():
    print(
        f"  {name:10s} {tiles[name]}  median {statistics.median(ts):.2f}  {[round(t, 2) for t in ts]}"
    )
