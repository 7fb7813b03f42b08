"""Where BERT-base's batch-32 forward spends device time with the shipped big tile
(ops/matmul.BIG_TILE) and with a candidate in its place: pr.profiler's events (the card warmed
before each), grouped by kernel family and by grid. `PYRITE_BACKEND=wgpu python
scripts/bert_tile_profile.py "128,128,8,8,16,3" [LAYERS BATCH]`"""

import statistics
import sys
from collections import defaultdict

import numpy as np

import pyrite as pr
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build
from pyrite.ops import matmul as mmod

cand = tuple(int(v) for v in sys.argv[1].split(","))
layers, batch = (int(v) for v in (sys.argv[2:4] if len(sys.argv) > 3 else (12, 32)))
rng = np.random.default_rng(0)
model = build(pr, layers=layers)
x = pr.tensor(rng.standard_normal((batch, 128, 768)).astype(np.float32))
with pr.no_grad():
    for name, tile in (("shipped", mmod.BIG_TILE), ("candidate", cand), ("shipped", mmod.BIG_TILE)):
        mmod.BIG_TILE = tile
        mmod._plans.clear()
        for _ in range(2):
            model(x)
        warm_gpu(0)
        with pr.profiler.profile() as prof:
            model(x)
        groups = defaultdict(list)
        for e in prof.events():
            groups[(e.kernel, e.grid)].append(e.device_ns / 1e3)
        print(f"== {name} {tile}: {prof.device_time_total() / 1e3:.2f} ms device")
        for (k, grid), ts in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
            print(
                f"  {k:10s} grid {str(grid):16s} n={len(ts):3d} median {statistics.median(ts):8.1f} us"
                f"  total {sum(ts) / 1e3:7.3f} ms"
            )
