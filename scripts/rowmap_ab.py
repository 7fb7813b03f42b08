"""A/B of the vec4 map (ops/core.VEC4) and the held-row row kernels (ops/rowops.HELD, by
HELD_LANE_MAX: the GPU's lanes a row): host time
of each op after a GPU warm-up (pyrite.bench._median_time), GB/s of its one read and one write
(two reads for add), beside torch CUDA when it is there.

    PYRITE_BACKEND=wgpu|dawn python scripts/rowmap_ab.py [--quick]
"""

import sys

import pyrite as pr
from pyrite.bench import _cuda_time, _median_time, _torch
from pyrite.ops import core, rowops

F = pr.nn.functional


def main():
    quick = "--quick" in sys.argv
    torch = _torch()
    cuda = torch is not None and torch.cuda.is_available()
    print(pr.device_info()["name"], pr.device_info()["implementation"])
    n = (1 << 20) if quick else (1 << 26)
    x, y, o = pr.rand(n), pr.rand(n), pr.empty(n)
    maps = [
        ("copy_", lambda: o.copy_(x), 2),
        ("add", lambda: x + y, 3),
        ("x * 0.5 + 1", lambda: x * 0.5 + 1, 2),
    ]
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
            for cfg in ("streamed", 4, 8, 16):
                rowops.HELD = cfg != "streamed"
                rowops.HELD_LANE_MAX = cfg if rowops.HELD else saved
                t[cfg] = _median_time(fn)
            rowops.HELD, rowops.HELD_LANE_MAX = True, saved
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
                    f"{k if k == 'streamed' else f'held <= {k}'} {gb(v):,.0f} GB/s ({v * 1e6:.1f} us)"
                    for k, v in t.items()
                )
                + peer,
                flush=True,
            )


if __name__ == "__main__":
    main()
