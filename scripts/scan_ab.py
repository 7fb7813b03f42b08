"""A/B of the scans (ops/reduce.py): the one-pass look-back scan (SCAN_LOOKBACK, the rule on a
GPU) against the chunked two-pass path and whole rows, on the device in use: host time of
each op after a GPU warm-up, pipelined (pyrite.bench._median_time), GB/s of one read and one
write, beside torch CUDA when it is there; then each path's result against numpy float64 and
the look-back's bits across two runs.

    PYRITE_BACKEND=wgpu|dawn python scripts/scan_ab.py [--quick] [--json PATH]
"""

import json
import sys

import numpy as np

import pyrite as pr
from pyrite.bench import _cuda_time, _median_time, _torch
from pyrite.ops import reduce as R

PATHS = {  # (SCAN_LOOKBACK, the chunk rule): whole rows replace the rule by "never chunk"
    "lookback": (True, None),
    "chunked": (False, None),
    "rows": (False, lambda rows, length, mode: None),
}


def run(path, fn):
    R.SCAN_LOOKBACK, rule = PATHS[path]
    keep = R._scan_chunk
    if rule is not None:
        R._scan_chunk = rule
    try:
        return fn()
    finally:
        R._scan_chunk, R.SCAN_LOOKBACK = keep, None


def main():
    quick = "--quick" in sys.argv
    torch = _torch()
    cuda = torch is not None and torch.cuda.is_available()
    info = pr.device_info()
    print(info["name"], info["implementation"], flush=True)
    shapes = [(1, 1 << 24), (1, 1 << 20), (4, 1 << 22), (64, 1 << 16), (1024, 4096), (8192, 4096)]
    if quick:
        shapes = [(1, 1 << 18), (3, 5000)]
    rows = []
    for shape in shapes:
        x = pr.rand(*shape)
        nbytes = 2 * x.numel() * 4
        row = {"shape": list(shape)}
        for path in PATHS:
            t = run(path, lambda: _median_time(lambda: x.cumsum(1)))
            row[path] = nbytes / t / 1e9
            row[path + " kernel"] = R.SCAN_LAST_PATH
        if cuda:
            xc = torch.rand(*shape, device="cuda")
            row["torch-cuda"] = nbytes / _cuda_time(torch, lambda: xc.cumsum(1)) / 1e9
        xn = x.numpy().astype(np.float64)
        ref = np.cumsum(xn, 1)
        scale = np.abs(xn).sum(1, keepdims=True)
        for path in PATHS:
            y = run(path, lambda: x.cumsum(1).numpy())
            row[path + " err"] = float((np.abs(y - ref) / scale).max())
        a = run("lookback", lambda: x.cumsum(1).numpy())
        b = run("lookback", lambda: x.cumsum(1).numpy())
        row["lookback same bits"] = bool((a.view(np.uint32) == b.view(np.uint32)).all())
        rows.append(row)
        print(
            f"cumsum {shape}: "
            + "  ".join(f"{p} {row[p]:,.1f} GB/s ({row[p + ' kernel']})" for p in PATHS)
            + (f"  torch CUDA {row['torch-cuda']:,.0f}" if cuda else "")
            + "\n   max |err| / sum|x|: "
            + "  ".join(f"{p} {row[p + ' err']:.1e}" for p in PATHS)
            + f"  look-back bits repeat: {row['lookback same bits']}",
            flush=True,
        )
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"device": info["name"], "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
