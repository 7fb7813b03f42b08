"""Probe: what makes grouped qgemv slow. Variants by rewriting the generated WGSL."""
import re, sys
import numpy as np
sys.path.insert(0, "scripts")
import pyrite as pr
from pyrite.ops import quantized as Q
from pyrite.kernels.common import KernelSource
from pyrite.bench.quant import _random_qweight
from qgemv_time import one_pass_mean

orig = Q.qgemv
MODE = {"v": None}

def patched(*a):
    k = orig(*a)
    s = k.wgsl
    v = MODE["v"]
    if v == "const_scale":  # no scale/offset loads at all
        s = re.sub(r"let sc(\d+_\d+) = sc_\[g\d+_\d+\];", r"let sc\1 = 0.01;", s)
        s = re.sub(r"let ofs(\d+_\d+) = of_\[g\d+_\d+\];", r"let ofs\1 = -0.08;", s)
    elif v == "fixed_index":  # a load, always the row's first group
        s = re.sub(r"let g(\d+)_(\d+) = grow(\d+) \+ [^;]*;", r"let g\1_\2 = grow\3;", s)
    elif v == "uniform_index":  # a load whose index is the same for the whole workgroup
        s = re.sub(r"let g(\d+)_(\d+) = grow(\d+) \+ ([^;]*);", r"let g\1_\2 = \4;", s)
    return KernelSource(s, k.modes)

Q.qgemv = patched
rng = np.random.default_rng(0)
N, K = (1024, 512) if "--quick" in sys.argv else (11008, 4096)
dev = pr.backend.current()
print(dev.name, dev.impl)
for bits, gs in ((8, None), (8, 128), (4, 128)):
    q0 = _random_qweight(rng, bits, gs, N, K)
    ws = [q0] + [_random_qweight(rng, bits, gs, N, K) for _ in range(((4 << 20) if "--quick" in sys.argv else (400 << 20)) // q0.nbytes)]
    for M in (1, 8):
        rm = 8 if M > 4 else M
        x = pr.randn(M, K)
        for cfg in ((64, 2, 2, 2), (32, 2, 4, 4), (16, 2, 2, 2), (32, 1, 4, 1)):
            lanes, wpl, cols, unroll = cfg
            Q.QGEMV_LANES[bits], Q.QGEMV_WORDS[bits] = lanes, wpl
            Q.QGEMV_COLS[rm], Q.QGEMV_UNROLL[rm] = cols, unroll
            row = []
            for v in (None, "const_scale", "uniform_index", "staged", "staged_magic"):
                if gs is None and bits == 8 and v not in (None, "staged_magic"):
                    continue
                MODE["v"] = v
                Q.QGEMV_STAGE = v in ("staged", "staged_magic")
                Q.QGEMV_MAGIC = v == "staged_magic"
                t = one_pass_mean(lambda: [Q.qlinear(x, w) for w in ws])
                row.append(f"{v or 'as is'} {t/1e3:.1f}")
            print(f"int{bits} g{gs} M={M} {cfg}: " + "; ".join(row), flush=True)
