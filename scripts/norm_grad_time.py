"""GPU time of the norms' parameter-gradient kernels by row parts (ops/rowops NORM_FILL,
NORM_MIN_ROWS), by timestamp queries (scripts/gpu_time.py): layer_norm's backward at the small
GPT's shape (512 rows of 128) and BERT-base's (4096 of 768), each part count forced.
`PYRITE_BACKEND=wgpu python scripts/norm_grad_time.py`"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gpu_time import kernel_times  # noqa: E402

import pyrite as pr  # noqa: E402
import pyrite.nn.functional as F  # noqa: E402
from pyrite.ops import rowops  # noqa: E402

rng = np.random.default_rng(0)
for rows, n in ((512, 128), (4096, 768), (1024, 768)):
    x = pr.tensor(rng.standard_normal((rows, n)).astype(np.float32)).requires_grad_()
    w = pr.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)).requires_grad_()
    b = pr.tensor(rng.standard_normal(n).astype(np.float32)).requires_grad_()
    g = pr.tensor(rng.standard_normal((rows, n)).astype(np.float32))
    for parts in (1, 2, 4, 8, 16, 32):
        rowops.FORCE_PARTS = parts
        y = F.layer_norm(x, (n,), w, b)

        def bwd():
            y.backward(g, retain_graph=True)

        w.grad = b.grad = x.grad = None
        times = kernel_times(bwd)

        def tag(src):
            t = src.wgsl
            if "@workgroup_size(32, 8)" in t:
                return "params"
            if "t += part" in t:
                return "merge"
            if "stats[2u * row]" in t:
                return "dx"
            return "other"

        mine = [(tag(src), t / 1e3) for t, _, src in times if tag(src) != "other"]
        total = sum(t for k, t in mine if k != "dx")
        print(
            f"rows {rows:5d} n {n:4d} parts {parts:3d}: dw+db {total:7.2f} us GPU  ("
            + ", ".join(f"{k} {t:.2f}" for k, t in mine)
            + ")"
        )
    rowops.FORCE_PARTS = None
