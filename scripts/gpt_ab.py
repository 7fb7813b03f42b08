"""A/B of this session's GEMM and batching changes on the small GPT training step (pyrite bench's),
interleaved in one process: `PYRITE_BACKEND=wgpu|dawn python scripts/gpt_ab.py`."""

import statistics

import numpy as np

import pyrite as pr
import pyrite.ops.matmul as mm
from pyrite.backend import device as devmod
from pyrite.bench.train import _gpt, _time

rng = np.random.default_rng(0)
idx, tgt = rng.integers(0, 256, (8, 64)), rng.integers(0, 256, (8, 64))
NEW_TABLE, OLD_TABLE = list(mm.FAST_GPU), [mm.FAST_GPU[0], mm.FAST_GPU[1]]
OLD_TABLE[1] = (0, OLD_TABLE[1][1])
fold = mm._fold_rows


def config(name):
    mm._plans.clear()
    mm.FAST_GPU = OLD_TABLE if name in ("old tiles, no split", "all off") else NEW_TABLE
    mm.SPLIT_MAX = 1 if name in ("no split", "old tiles, no split", "all off") else 16
    mm._fold_rows = (lambda x: None) if name in ("no fold", "all off") else fold
    devmod.BATCH_FIRST = 256 if name in ("late first batch", "all off") else 8


names = ["as built", "no split", "old tiles, no split", "no fold", "late first batch", "all off"]
steps = {}
for n in names:
    config(n)
    pr.manual_seed(0)
    steps[n] = _gpt(pr, pr.tensor(idx), pr.tensor(tgt))
res = {n: [] for n in names}
for _ in range(4):
    for n in names:
        config(n)
        res[n].append(_time(steps[n], pr.synchronize, n=10, warmup=10) * 1e3)
for n in names:
    print(
        f"  GPT step, {n:<22} {statistics.median(res[n]):6.2f} ms  {[round(v, 2) for v in res[n]]}"
    )
