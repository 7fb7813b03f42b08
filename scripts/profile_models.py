"""pr.profiler on the bench's models: where the BERT-base forward (batch 1 and 32 x 128, 12
layers, no_grad) and the small GPT's training step spend device time, by op and by kernel family.
`PYRITE_BACKEND=wgpu|dawn python scripts/profile_models.py [OUT_DIR]` (writes a Chrome trace and
a PNG timeline of each there)."""

import os
import sys

import numpy as np

import pyrite as pr
from pyrite.bench import warm_gpu
from pyrite.bench.bert import build as bert
from pyrite.bench.train import _gpt

out = sys.argv[1] if len(sys.argv) > 1 else "."
dev = pr.backend.current()
print(f"{dev.name} ({dev.impl})")
rng = np.random.default_rng(0)
model = bert(pr, layers=12)
x = pr.tensor(rng.standard_normal((1, 128, 768)).astype(np.float32))
x32 = pr.tensor(rng.standard_normal((32, 128, 768)).astype(np.float32))
step = _gpt(pr, pr.tensor(rng.integers(0, 256, (8, 64))), pr.tensor(rng.integers(0, 256, (8, 64))))
with pr.no_grad():
    for _ in range(3):
        model(x)
        model(x32)
for _ in range(3):
    step()
pr.synchronize()
runs = (("bert_b1", lambda: model(x)), ("bert_b32", lambda: model(x32)), ("gpt_step", step))
for name, fn in runs:
    # (a card idle for a few seconds — the tables and plots below take that long — runs its
    # next ~100 ms of kernels at its low clock: session 36's profile of the batch-32 forward
    # read 68.8 ms so; scripts/profile_check.py measured 114.5 ms after 5 s idle, 21.5 warm)
    warm_gpu(0)
    with pr.no_grad() if name.startswith("bert") else pr.enable_grad():
        with pr.profiler.profile() as prof:
            fn()
    print(
        f"\n== {name}: {len(prof.events())} kernels, {prof.device_time_total() / 1e3:.3f} ms "
        f"device (timestamps: {prof.exact})"
    )
    print(prof.key_averages().table(row_limit=12))
    print(prof.key_averages(group_by="kernel").table(row_limit=8))
    prof.export_chrome_trace(os.path.join(out, f"{name}-{dev.impl}.json"))
    try:
        prof.export_timeline(os.path.join(out, f"{name}-{dev.impl}.png"))
    except ImportError as exc:
        print(f"(no timeline: {exc})")
