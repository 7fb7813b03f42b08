"""The one-pass decode kernel's keys a step (kernels/attention_decode.DECODE_STEP) by GPU time
(timestamps, scripts/gpu_time.py: every dispatch of the call), at decode shapes.

    PYRITE_BACKEND=wgpu python scripts/decode_step_ab.py [--steps 2,4,8]
"""

import sys

import pyrite as pr
from pyrite.kernels import attention_decode as _KD
from pyrite.nn import _attention as A

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decode_ab import SHAPES  # noqa: E402
from gpu_time import kernel_times  # noqa: E402

F = pr.nn.functional


def main():
    steps = [int(s) for s in (sys.argv[sys.argv.index("--steps") + 1] if "--steps" in sys.argv
                              else "2,4,8").split(",")]  # fmt: skip
    dev = pr.backend.current()
    print(f"{dev.name} ({dev.impl}): GPU us by keys a step {steps}", flush=True)
    for B, hq, hk, L, S, E in SHAPES:
        q, k, v = pr.randn(B, hq, L, E), pr.randn(B, hk, S, E), pr.randn(B, hk, S, E)
        times = []
        for st in steps:
            _KD.DECODE_STEP = st
            A._PLANS.clear()
            fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hq != hk)  # noqa: E731
            kernel_times(fn, reps=3)  # (warm: the first call's probes and builds)
            times.append(sum(t for t, *_ in kernel_times(fn, reps=9)) / 1e3)
        _KD.DECODE_STEP = 4
        print((B, hq, hk, L, S, E), " / ".join(f"{t:.1f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
