"""cumsum's paths (ops/reduce.py): the one-pass look-back scan (SCAN_LOOKBACK, the rule on a
GPU), the chunked two-pass path (chunking by SCAN_TARGET_WORKGROUPS, staging by SCAN_STAGE)
and whole rows. For each: GPU time by timestamps over all its dispatches and the eager op's
pipelined host time (pyrite.bench._median_time), as GB/s of one read and one write, beside
torch CUDA's; then its result against numpy float64 (max |error| / Σ|x| of the row) and
whether the look-back's bits repeat across runs.
    PYRITE_BACKEND=wgpu|dawn python scripts/scan_ab.py [--paths lookback,chunked,rows]
        [--lookback ticket:last,id:last,ticket:pass,id:pass] [--targets 1024,2048,4096]
        [--stage 0,1] [--units 2048,4096,8192] [--early 0,1] [--unroll 0,1] [--chunk-units 2048,4096] [--shapes 1x16777216,..] [--quick]
        [--json PATH]
`--lookback`: the look-back kernel's variants (ops/reduce.SCAN_LOOKBACK_VARIANT: chunk order,
reset), each timed as its own path; `--units`: its chunk lengths (ops/reduce.SCAN_LOOKBACK_CHUNK;
one the device's workgroup memory cannot hold runs SCAN_STAGED, and says so in its kernel);
`--early`: superblock totals stored before the waits for earlier ones (SCAN_LOOKBACK_EARLY);
`--unroll`: a full staged unit's loads issued together (SCAN_STAGE_UNROLL), on every path;
`--chunk-units`: the chunked path's staged unit (SCAN_CHUNK_UNIT), so its longest chunk.
"""

import json
import os
import sys

import numpy as np

import pyrite as pr
from pyrite.bench import _median_time
from pyrite.ops import reduce as R

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_time import kernel_times  # noqa: E402

PATHS = {  # SCAN_LOOKBACK, and whether rows are never chunked
    "lookback": (True, False),
    "chunked": (False, False),
    "rows": (False, True),
}


def torch_gbps(shape, dim):
    try:
        import torch

        if not torch.cuda.is_available():
            return float("nan")
    except ImportError:
        return float("nan")
    x = torch.randn(*shape, device="cuda")
    for _ in range(3):
        x.cumsum(dim)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(20):
        x.cumsum(dim)
    e.record()
    torch.cuda.synchronize()
    return 8 * x.numel() / (s.elapsed_time(e) / 20 * 1e6)


def on_path(path, fn):
    R.SCAN_LOOKBACK, whole = PATHS[path]
    rule = R._scan_chunk
    if whole:
        R._scan_chunk = lambda rows, length, mode: None
    try:
        return fn()
    finally:
        R._scan_chunk, R.SCAN_LOOKBACK = rule, None


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1].split(",") if name in sys.argv else default


def main():
    variants = [tuple(v.split(":")) for v in arg("--lookback", [":".join(R.SCAN_LOOKBACK_VARIANT)])]
    units = [int(u) for u in arg("--units", [str(R.SCAN_LOOKBACK_CHUNK or 0)])]
    earlies = [v == "1" for v in arg("--early", ["1" if R.SCAN_LOOKBACK_EARLY else "0"])]
    chunk_units = [int(u) for u in arg("--chunk-units", [str(R.SCAN_CHUNK_UNIT or 0)])]
    unrolls = [v == "1" for v in arg("--unroll", ["1" if R.SCAN_STAGE_UNROLL else "0"])]
    paths = [
        (p, v, u, e, r)
        for p in arg("--paths", list(PATHS))
        for v in (variants if p == "lookback" else [None])
        for u in (units if p == "lookback" else chunk_units if p == "chunked" else [0])
        for e in (earlies if p == "lookback" else [False])
        for r in unrolls
    ]
    targets = [int(v) for v in arg("--targets", [R.SCAN_TARGET_WORKGROUPS])]
    stages = [v == "1" for v in arg("--stage", ["1" if R.SCAN_STAGE else "0"])]
    dev = pr.backend.current()
    print(f"{dev.name} ({dev.impl})")
    shapes = [(1, 1 << 24), (1, 1 << 20), (4, 1 << 22), (64, 65536), (1024, 4096), (4096, 1024)]
    if "--shapes" in sys.argv:
        shapes = [tuple(int(n) for n in v.split("x")) for v in arg("--shapes", [])]
    if "--quick" in sys.argv:
        shapes = [(1, 1 << 18), (3, 5000)]
    rows = []
    for shape in shapes:
        x = pr.randn(*shape)
        nb = 8 * x.numel()
        tg = torch_gbps(shape, 1)
        xn = x.numpy().astype(np.float64)
        ref, scale = np.cumsum(xn, 1), np.abs(xn).sum(1, keepdims=True)
        for path, variant, unit, early, unroll in paths:
            for target, stage in [(a, b) for a in targets for b in stages]:
                R.SCAN_TARGET_WORKGROUPS, R.SCAN_STAGE = target, stage
                R.SCAN_LOOKBACK_VARIANT = variant or R.SCAN_LOOKBACK_VARIANT
                R.SCAN_LOOKBACK_CHUNK = (unit or None) if path == "lookback" else None
                R.SCAN_CHUNK_UNIT = (unit or None) if path == "chunked" else None
                R.SCAN_LOOKBACK_EARLY = early
                R.SCAN_STAGE_UNROLL = unroll
                y = on_path(path, lambda: x.cumsum(1).numpy())
                kernel = R.SCAN_LAST_PATH
                ks = on_path(path, lambda: kernel_times(lambda: x.cumsum(1), reps=10))
                ns = sum(t for t, _, _ in ks)
                host = on_path(path, lambda: _median_time(lambda: x.cumsum(1)))
                err = float((np.abs(y - ref) / scale).max())
                row = {
                    "shape": list(shape), "path": path, "kernel": kernel, "target": target,
                    "staged": stage, "dispatches": len(ks), "gpu_us": ns / 1e3,
                    "gpu_gbps": nb / ns, "host_gbps": nb / host / 1e9, "torch_cuda_gbps": tg,
                    "err": err, "variant": variant,
                    "unit": R._lookback_unit() if path == "lookback" else None, "early": early,
                    "unroll": unroll,
                    "dispatch_us": [t / 1e3 for t, _, _ in ks],
                }  # fmt: skip
                if path == "lookback":
                    again = on_path(path, lambda: x.cumsum(1).numpy())
                    row["same_bits"] = bool((y.view(np.uint32) == again.view(np.uint32)).all())
                rows.append(row)
                print(
                    f"  {str(shape):>14} {path:>8} ({kernel}"
                    + (f" {':'.join(variant)} C={R._lookback_unit()}" if variant else "")
                    + (" early" if early else "")
                    + ("" if unroll else " looped")
                    + f", target {target}, staged "
                    f"{int(stage)}): {len(ks)} dispatches, {ns / 1e3:8.1f} us, "
                    f"{nb / ns:6.0f} GB/s GPU ("
                    + " + ".join(f"{t / 1e3:.1f}" for t, _, _ in ks)
                    + f"), {nb / host / 1e9:6.0f} host (torch CUDA "
                    f"{tg:6.0f}); err {err:.1e}"
                    + (f", bits repeat {row['same_bits']}" if "same_bits" in row else ""),
                    flush=True,
                )
    R.SCAN_TARGET_WORKGROUPS, R.SCAN_STAGE = targets[0], True
    R.SCAN_LOOKBACK_VARIANT, R.SCAN_LOOKBACK_CHUNK = ("ticket", "last"), None
    R.SCAN_LOOKBACK_EARLY, R.SCAN_STAGE_UNROLL, R.SCAN_CHUNK_UNIT = False, True, None
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"device": dev.name, "impl": dev.impl, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
