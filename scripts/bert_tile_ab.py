"""BERT-base's batch-32 forward with the f32 rule's big tile as shipped (ops/matmul.BIG_TILE)
and with a candidate in its place (gemm_tile_ab.use_big_tile: the rule's tables too, its
BIG_MIN_TILES from `--min T`, its GPU_SLOTS from `--slots S`), alternated, each timing after a
warm-up (pyrite bench's BERT timing), outputs compared. `--profile`: instead, one pr.profiler
profile of each (the card warmed before it), its device time by kernel family and grid.
`PYRITE_BACKEND=wgpu python scripts/bert_tile_ab.py "128,128,16,8,8,3" [--min T] [--slots S]
[--profile] [LAYERS BATCH]`"""

import statistics
import sys
import time
from collections import defaultdict

import numpy as np

import pyrite as pr
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build
from pyrite.ops import matmul as mmod

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gemm_tile_ab import use_big_tile  # noqa: E402

profile = "--profile" in sys.argv
argv = sys.argv[1:]
opts = {"--min": 0, "--slots": None}  # the candidate's BIG_MIN_TILES and GPU_SLOTS
for o in opts:
    if o in argv:
        i = argv.index(o)
        opts[o] = int(argv[i + 1])
        del argv[i : i + 2]
args = [a for a in argv if a != "--profile"]
cand = tuple(int(v) for v in args[0].split(","))
tiles = {
    "shipped": (mmod.BIG_TILE, mmod.BIG_MIN_TILES, mmod.GPU_SLOTS),
    "candidate": (cand, opts["--min"], opts["--slots"]),
}
layers, batch = (int(v) for v in (args[1:3] if len(args) > 2 else (12, 32)))  # (smoke tests)
rng = np.random.default_rng(0)
model = build(pr, layers=layers)
x = pr.tensor(rng.standard_normal((batch, 128, 768)).astype(np.float32))


def use(tile):
    """`tile` (a tile, its BIG_MIN_TILES and GPU_SLOTS) as the rule's big tile; warmed up."""
    use_big_tile(*tile)
    for _ in range(2):
        got = model(x)
    warm_gpu(0)
    return got


def show_profile(name, tile):
    with pr.profiler.profile() as prof:
        model(x)
    groups = defaultdict(list)
    for e in prof.events():
        groups[(e.kernel, e.grid)].append(e.device_ns / 1e3)
    print(f"== {name} {tile}: {prof.device_time_total() / 1e3:.2f} ms device")
    for (k, grid), ts in sorted(groups.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {k:10s} grid {str(grid):16s} n={len(ts):3d} median "
              f"{statistics.median(ts):8.1f} us  total {sum(ts) / 1e3:7.3f} ms")  # fmt: skip


times = {k: [] for k in tiles}
with pr.no_grad():
    want = model(x).numpy()
    for _ in range(1 if profile else 3):
        for name, tile in tiles.items():
            got = use(tile)
            err = float(np.abs(got.numpy() - want).max())
            assert err < 1e-3, (name, err)
            if profile:
                show_profile(name, tile)
                continue
            pr.synchronize()
            t = time.perf_counter()
            for _ in range(5):
                model(x)
            pr.synchronize()
            times[name].append((time.perf_counter() - t) / 5 * 1e3)
if not profile:
    print(f"{pr.backend.current().name}: BERT-base {batch}x128 forward, ms (3 alternations)")
    for name, ts in times.items():
        print(f"  {name:10s} {tiles[name]} median {statistics.median(ts):.2f}: "
              f"{[round(t, 2) for t in ts]}")  # fmt: skip
