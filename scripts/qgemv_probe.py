"""Where the quantized GEMV's time goes (issue 6: int4 stays at ~62-68 % of its weight's copy
whatever its knobs): the same kernel, by timestamps, with parts of its work taken out. Results
of the probes are garbage; only their times count.

  default     the shipped kernel (QGEMV_UNPACK(_INT4), QGEMV_SHAPE(_INT4))
  inplace     the in-place unpack (a third of the instructions)
  no-unpack   each packed word used as one float as it is (no shifts, masks, conversions):
              the loads, the dot products with X and the sums only
  no-math     the words XORed into one accumulator (no X, no dot products): the loads alone
  then the copy of the weight's bytes (the like-for-like ceiling), all at 1 x 4096 . 11008 x
  4096^T over weights cycling through 400 MiB. `PYRITE_BACKEND=wgpu python
  scripts/qgemv_probe.py [--format 4,128] [--configs "64,2,2,2;32,2,4,4"]`
"""

import sys

import numpy as np

import pyrite as pr
from pyrite.bench.quant import _random_qweight
from pyrite.kernels import quant as KQ
from pyrite.ops import quantized as Q

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from qgemv_time import one_pass_mean, weight_copy  # noqa: E402

real_unpack, real_inplace, real_dequant = KQ._unpack, KQ._inplace, KQ._dequant
SHIPPED_UNPACK_INT4 = dict(Q.QGEMV_UNPACK_INT4)


def words_as_floats(bits, word, magic=False):
    return [f"vec4<f32>(bitcast<f32>({word}))"] * (2 if bits == 4 else 1)


def xor_only(bits, word, magic=False):  # (with _dequant below: acc ^= word, through floats)
    return [f"bitcast<vec4<f32>>(vec4<u32>({word}))"] * (2 if bits == 4 else 1)


def set_probe(name):
    KQ._unpack, KQ._inplace, KQ._dequant = real_unpack, real_inplace, real_dequant
    Q.QGEMV_UNPACK = "inplace" if name == "inplace" else "convert"
    Q.QGEMV_UNPACK_INT4 = {} if name != "default" else SHIPPED_UNPACK_INT4
    if name == "no-unpack":
        KQ._unpack = words_as_floats
    elif name == "no-math":
        KQ._unpack = xor_only
        # dot(dq, x) -> dq.x (one lane): the compiler keeps the load, drops most of the math
        KQ._dequant = lambda bits, grouped, q, c="": f"vec4<f32>({q}.x, 0.0, 0.0, 0.0)"
    KQ.qgemv.cache_clear()


def main():
    fmt = [4, 128]
    if "--format" in sys.argv:
        fmt = [int(v) for v in sys.argv[sys.argv.index("--format") + 1].split(",")]
    bits, gs = fmt[0], (fmt[1] if len(fmt) > 1 else None)
    configs = [None]
    if "--configs" in sys.argv:
        spec = sys.argv[sys.argv.index("--configs") + 1]
        configs += [tuple(int(v) for v in c.split(",")) for c in spec.split(";")]
    rng = np.random.default_rng(0)
    N, K, sweep = 11008, 4096, 400 << 20
    q0 = _random_qweight(rng, bits, gs, N, K)
    ws = [q0] + [_random_qweight(rng, bits, gs, N, K) for _ in range(sweep // q0.nbytes)]
    tw = weight_copy(f"int{bits} g{gs}", q0.nbytes, sweep)
    x = pr.randn(1, K)
    table = Q.QGEMV_SHAPE_INT4 if bits == 4 else Q.QGEMV_SHAPE
    saved = dict(table)
    for cfg in configs:
        if cfg is not None:
            table[1] = cfg
        shape = Q.qgemv_shape(1, bits)
        for name in ("default", "inplace", "no-unpack", "no-math"):
            set_probe(name)
            t = one_pass_mean(lambda: [Q.qlinear(x, w) for w in ws])
            print(
                f"int{bits} g{gs} {shape} {name:10s} {t / 1e3:6.1f} us  "
                f"{q0.nbytes / t:5.0f} GB/s  {tw / t:4.0%} of its copy",
                flush=True,
            )
        table.clear()
        table.update(saved)
    set_probe("default")


if __name__ == "__main__":
    main()
