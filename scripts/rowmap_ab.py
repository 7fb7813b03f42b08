"""A/B of the vec4 map (ops/core.VEC4), the reductions' vec4 loads (ops/reduce.VEC4) and several rows a
workgroup (ROW_UNIT_ELEMS) and the held-row row kernels (ops/rowops.HELD, by
HELD_LANE_MAX: the GPU's lanes a row): host time
of each op after a GPU warm-up (pyrite.bench._median_time), GB/s of its one read and one write
(two reads for add), beside torch CUDA when it is there. The row kernels' columns: streamed,
held with at most 4 / 8 / 16 elements a lane (subgroup reductions where the device has them),
and "tree": held (8) reduced by the workgroup-memory tree (ops/rowops.SUBGROUPS = False), and
"scalar": held (8) with scalar loads and stores (ops/rowops.HELD_VEC4 = False; the others read
and write f32 rows as vec4s).

    PYRITE_BACKEND=wgpu|dawn python scripts/rowmap_ab.py [--quick] [--rows]
"""

import sys

import pyrite as pr
from pyrite.bench import _cuda_time, _median_time, _torch
from pyrite.ops import core, rowops
from pyrite.ops import reduce as R

F = pr.nn.functional


def main():
    quick = "--quick" in sys.argv
    torch = _torch()
    cuda = torch is not None and torch.cuda.is_available()
    print(pr.device_info()["name"], pr.device_info()["implementation"])
    n = (1 << 20) if quick else (1 << 26)
    x, y, o = pr.rand(n), pr.rand(n), pr.empty(n)
    rows_only = "--rows" in sys.argv
    maps = (
        []
        if rows_only
        else [
            ("copy_", lambda: o.copy_(x), 2),
            ("add", lambda: x + y, 3),
            ("x * 0.5 + 1", lambda: x * 0.5 + 1, 2),
        ]
    )
    for label, fn, words in maps:
        t = {}
        for flag in (False, True):
            core.VEC4 = flag
            core._plans.clear()
            t[flag] = _median_time(fn)
        core.VEC4 = True
        peer = ""
        if cuda:
            xc, yc, oc = (torch.rand(n, device="cuda") for _ in range(3))
            tf = {"copy_": lambda: oc.copy_(xc), "add": lambda: xc + yc}.get(
                label, lambda: xc * 0.5 + 1
            )
            peer = f", torch CUDA {words * 4 * n / _cuda_time(torch, tf) / 1e9:,.0f}"
        gb = lambda s: words * 4 * n / s / 1e9  # noqa: E731
        print(
            f"{label} ({n:,} f32): scalar {gb(t[False]):,.0f} GB/s, vec4 {gb(t[True]):,.0f}{peer}",
            flush=True,
        )
    red = (
        []
        if rows_only
        else [
            ("x.sum()", lambda: x.sum(), lambda: xc.sum(), n),
            ("x.sum(1) of (n/1024, 1024)", lambda: x2.sum(1), lambda: xc2.sum(1), n),
            ("x.amax()", lambda: x.amax(), lambda: xc.amax(), n),
        ]
    )
    x2 = x.view(n // 1024, 1024)
    if cuda:
        xc = torch.rand(n, device="cuda")
        xc2 = xc.view(n // 1024, 1024)
    for label, fn, tf, m in red:
        t = {}
        cfgs = {
            "scalar": (False, 0),
            "vec4": (True, 0),
            "vec4 units<=8": (True, 8),
            "vec4 units<=16": (True, 16),
        }
        for cfg, (v4, units) in cfgs.items():
            R.VEC4, R.ROW_UNIT_ELEMS = v4, units
            R._plans.clear()
            t[cfg] = _median_time(fn)
        R.VEC4, R.ROW_UNIT_ELEMS = True, 16
        peer = f", torch CUDA {4 * m / _cuda_time(torch, tf) / 1e9:,.0f}" if cuda else ""
        print(
            f"{label}: "
            + ", ".join(f"{k} {4 * m / v / 1e9:,.0f} GB/s" for k, v in t.items())
            + peer,
            flush=True,
        )
    saved = rowops.HELD_LANE_MAX
    shapes = (
        [(4096, 1024)]
        if quick
        else [(65536, 1024), (4096, 768), (128, 768), (49152, 128), (16384, 2048), (8192, 4096)]
    )
    for rows, width in shapes:
        a = pr.randn(rows, width)
        w, b = pr.randn(width), pr.randn(width)
        cases = [
            ("softmax", lambda: a.softmax(-1), lambda v: v.softmax(-1)),
            ("layer_norm", lambda: F.layer_norm(a, (width,), w, b), None),
        ]
        for label, fn, _ in cases:
            t = {}
            for cfg in ("streamed", 4, 8, 16, "tree", "scalar"):
                rowops.HELD = cfg != "streamed"
                rowops.HELD_LANE_MAX = cfg if isinstance(cfg, int) else saved
                rowops.SUBGROUPS = cfg != "tree"
                rowops.HELD_VEC4 = cfg != "scalar"
                t[cfg] = _median_time(fn)
            rowops.HELD, rowops.HELD_LANE_MAX, rowops.SUBGROUPS = True, saved, True
            rowops.HELD_VEC4 = True
            peer = ""
            if cuda:
                ac = torch.randn(rows, width, device="cuda")
                wc, bc = torch.randn(width, device="cuda"), torch.randn(width, device="cuda")
                tf = (
                    (lambda: ac.softmax(-1))
                    if label == "softmax"
                    else (lambda: torch.nn.functional.layer_norm(ac, (width,), wc, bc))
                )
                peer = f", torch CUDA {8 * rows * width / _cuda_time(torch, tf) / 1e9:,.0f}"
            gb = lambda s: 8 * rows * width / s / 1e9  # noqa: E731
            print(
                f"{label} {rows}x{width}: "
                + ", ".join(
                    f"{k if isinstance(k, str) else f'held <= {k}'} {gb(v):,.0f} GB/s ({v * 1e6:.1f} us)"
                    for k, v in t.items()
                )
                + peer,
                flush=True,
            )


if __name__ == "__main__":
    main()
