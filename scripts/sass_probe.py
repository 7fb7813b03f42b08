"""The NVIDIA driver's machine code (SASS) for pyrite's kernels, read out of its shader disk
cache: registers a lane, spills, and the instruction mix (what bounds a kernel that is neither
at its memory nor at its arithmetic ceiling). The Vulkan driver caches each pipeline it builds
under $__GL_SHADER_DISK_CACHE_PATH. On the lent H100 (driver 580, 2026-12-06) an entry file
("CDVN" header) holds zstd frames; each program is a small x86 ELF (a host-side stub) and a
container ("NVDANVVMNVuc") whose code section is the raw instruction stream, which
`nvdisasm -b SM90` (installed on the lent machines) reads. No other layout was seen there.

  python scripts/sass_probe.py run NAME        # build and run workload NAME once (own process)
  python scripts/sass_probe.py carve DIR OUT   # each program's code in cache DIR to OUT/*.sm

scripts/sass_probe.sh runs each workload with a cache of its own and disassembles what it left.
"""

import os
import struct
import sys


def workloads():
    import numpy as np

    import pyrite as pr
    import pyrite.nn.functional as F

    rng = np.random.default_rng(0)

    def t(*shape):
        return pr.tensor(rng.standard_normal(shape, dtype=np.float32))

    def gemm():
        a, b = t(4096, 4096), t(4096, 4096)
        return a @ b

    def gemm_dbu():  # the big tile with gemm_fast's unconditional prefetch (dbuf = 3)
        import pyrite.ops.matmul as mm

        mm.FORCE = ("fast", (128, 128, 16, 8, 8, 3))
        return gemm()

    def tile(shape):  # the 4096^3 product with one fast tile forced
        def f():
            import pyrite.ops.matmul as mm

            mm.FORCE = ("fast", shape)
            return gemm()

        return f

    def linear_bert():
        return F.linear(t(4096, 768), t(3072, 768), t(3072))

    def attn_bert():
        q, k, v = t(32, 12, 128, 64), t(32, 12, 128, 64), t(32, 12, 128, 64)
        mask = pr.tensor(rng.random((32, 1, 1, 128)) < 0.9)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def attn_causal():
        q, k, v = t(1, 16, 4096, 64), t(1, 16, 4096, 64), t(1, 16, 4096, 64)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def attn_forced(base, **force):  # an attention workload with the tiled forward's knobs set
        def f():
            from pyrite.nn import _attention

            for k, v in force.items():
                setattr(_attention, k, v)
            return base()

        return f

    def qgemv(bits, gs, unpack=None):
        def f():
            from pyrite.bench.quant import _random_qweight
            from pyrite.ops import quantized as Q

            if unpack:
                Q.QGEMV_UNPACK = unpack

            qw = _random_qweight(rng, bits, gs, 11008, 4096)
            return Q.qlinear(t(1, 4096), qw)

        return f

    def half_gemm():
        a = t(4096, 4096).half()
        return a @ t(4096, 4096).half()

    def half_acc16():
        import pyrite.ops.matmul as mm

        mm.F16_ACCUMULATION = True
        return half_gemm()

    def half_acc16_tile(shape, mode=True):  # f16 arithmetic on one forced tile
        def f():
            import pyrite.ops.matmul as mm

            mm.F16_ACCUMULATION, mm.FORCE = mode, ("fast", shape)
            return half_gemm()

        return f

    def scan(n, **knobs):  # a cumsum of one row of n f32 (ops/reduce's rule, knobs set)
        def f():
            from pyrite.ops import reduce as R

            for k, v in knobs.items():
                setattr(R, k, v)
            return t(1, n).cumsum(1)

        return f

    return {
        "scan_lookback": scan(1 << 23),  # (the look-back: 2,048 chunks of 4,096)
        "scan_chunked": scan(1 << 24),  # (totals, the carry's scan, apply: chunks of 2,048)
        "scan_chunked4k": scan(1 << 24, SCAN_CHUNK_UNIT=4096),
        "half_acc16": half_acc16,
        "half_acc16_88k32": half_acc16_tile((128, 128, 8, 8, 32, 3)),
        "half_sums_816": half_acc16_tile((128, 128, 8, 16, 16, 3), "sums"),
        "gemm": gemm,
        "gemm_dbu": gemm_dbu,
        "gemm_dbu2": tile((128, 128, 16, 8, 8, 4)),
        "gemm_dbub": tile((128, 128, 16, 8, 8, 5)),
        "gemm64_db": tile((64, 64, 8, 8, 16, 1)),
        "gemm64_dbu": tile((64, 64, 8, 8, 16, 3)),
        "gemm88k16": tile((128, 128, 8, 8, 16, 3)),  # (256 invocations: session 37's candidate)
        "linear_bert": linear_bert,
        "attn_bert": attn_bert,
        "attn_causal": attn_causal,
        "attn_bert_bq64": attn_forced(attn_bert, FORCE_TILED_BQ=64, FORCE_TILED_RPT=2),
        "qgemv4": qgemv(4, 128),
        "qgemv4_inplace": qgemv(4, 128, "inplace"),
        "qgemv8_inplace": qgemv(8, None, "inplace"),
        "qgemv8": qgemv(8, None),
        "half_gemm": half_gemm,
    }


def run(name):
    import pyrite as pr

    out = workloads()[name]()
    pr.to_numpy(out if not isinstance(out, tuple) else out[0])
    print(f"{name}: ran")


ZSTD = b"\x28\xb5\x2f\xfd"
NVUC = b"NVDANVVM"  # the driver's container of one compiled program (seen: "NVDANVVMNVuc")


def _unzstd(stream: bytes) -> bytes:
    """The first zstd frame of `stream`, decompressed (the zstandard module, else the zstd
    command), or b"" where neither can."""
    try:
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(stream)
    except ImportError:
        pass
    except Exception:  # noqa: BLE001 - a false magic
        return b""
    import subprocess

    try:
        p = subprocess.run(["zstd", "-d", "-c", "-q"], input=stream, capture_output=True)
    except OSError:
        return b""
    return p.stdout


def _code(blob: bytes):
    """The machine code of a driver container (NVUC): its section of type 1, whose table entry
    (u32 type, u32 bytes, u64 offset) sits at 0x48; the instructions start 8 bytes past the
    offset (read off an H100's cache, 2026-12-06: the first is the usual IMAD.MOV / MOV of a
    kernel's prologue). None where the layout is not that."""
    if not blob.startswith(NVUC) or len(blob) < 0x58:
        return None
    kind, size, off = struct.unpack_from("<IIQ", blob, 0x48)
    if kind != 1 or off + 8 + size > len(blob) or size % 16:
        return None
    return blob[off + 8 : off + 8 + size]


def _frames(data: bytes):
    """Each zstd frame in `data`, decompressed (a false magic inside a frame gives nothing)."""
    j = data.find(ZSTD)
    while j >= 0:
        out = _unzstd(data[j:])
        if out:
            yield j, out
        j = data.find(ZSTD, j + 4)


def carve(src, dst):
    """The code of every driver container in the cache files under `src`, written to
    `dst`/k*.sm (raw sm_90 instructions: `nvdisasm -b SM90`)."""
    os.makedirs(dst, exist_ok=True)
    n = 0
    for root, _, files in os.walk(src):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            data = open(p, "rb").read()
            print(f"  {os.path.relpath(p, src)}: {len(data)} bytes, head {data[:16].hex()}")
            for at, blob in _frames(data):
                code = _code(blob)
                if code is not None:
                    out = os.path.join(dst, f"k{n:03d}.sm")
                    open(out, "wb").write(code)
                    print(f"    code {out}: {len(code) // 16} instructions (frame at {at})")
                    n += 1
    print(f"carved {n} programs")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        carve(sys.argv[2], sys.argv[3])
