"""The NVIDIA driver's machine code (SASS) for pyrite's kernels, read out of its shader disk
cache: registers a lane, spills, and the instruction mix (what bounds a kernel that is neither
at its memory nor at its arithmetic ceiling). The Vulkan driver caches each pipeline it builds
under $__GL_SHADER_DISK_CACHE_PATH. On the lent H100 (driver 580, 2026-12-06) an entry file
("CDVN" header) holds zstd frames; each program is a small CUDA ELF and a container
("NVDANVVMNVuc") whose code section is the raw instruction stream, which `nvdisasm -b SM90`
(installed on the lent machines) reads. Where the frames are ELF cubins instead, `cuobjdump`
reads those.

  python scripts/sass_probe.py run NAME        # build and run workload NAME once (own process)
  python scripts/sass_probe.py carve DIR OUT   # cut the cubins out of cache DIR into OUT/*.cubin

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

    def linear_bert():
        return F.linear(t(4096, 768), t(3072, 768), t(3072))

    def attn_bert():
        q, k, v = t(32, 12, 128, 64), t(32, 12, 128, 64), t(32, 12, 128, 64)
        mask = pr.tensor(rng.random((32, 1, 1, 128)) < 0.9)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    def attn_causal():
        q, k, v = t(1, 16, 4096, 64), t(1, 16, 4096, 64), t(1, 16, 4096, 64)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def qgemv(bits, gs):
        def f():
            from pyrite.bench.quant import _random_qweight
            from pyrite.ops import quantized as Q

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

    return {
        "half_acc16": half_acc16,
        "gemm": gemm,
        "linear_bert": linear_bert,
        "attn_bert": attn_bert,
        "attn_causal": attn_causal,
        "qgemv4": qgemv(4, 128),
        "qgemv8": qgemv(8, None),
        "half_gemm": half_gemm,
    }


def run(name):
    import pyrite as pr

    out = workloads()[name]()
    pr.to_numpy(out if not isinstance(out, tuple) else out[0])
    print(f"{name}: ran")


def _elves(data: bytes):
    """(offset, bytes) of each CUDA ELF (e_machine 190) whose header and section table lie
    inside `data`."""
    i = data.find(b"\x7fELF")
    while i >= 0:
        if len(data) >= i + 64 and data[i + 4] == 2:  # ELF64
            mach = struct.unpack_from("<H", data, i + 0x12)[0]
            shoff = struct.unpack_from("<Q", data, i + 0x28)[0]
            shent, shnum = struct.unpack_from("<HH", data, i + 0x3A)
            size = shoff + shent * shnum
            if mach == 190 and 0 < size <= len(data) - i:
                yield i, data[i : i + size]
        i = data.find(b"\x7fELF", i + 4)


def _unpacked(data: bytes):
    """`data` itself, then whatever a known compressor's stream inside it holds: zlib (each
    0x78 header), zstd, lz4 frames and raw deflate, where the modules exist."""
    import zlib

    yield "raw", data
    for i in range(len(data) - 2):
        b0, b1 = data[i], data[i + 1]
        if b0 == 0x78 and b1 in (0x01, 0x5E, 0x9C, 0xDA):
            try:
                yield f"zlib@{i}", zlib.decompressobj().decompress(data[i:])
            except zlib.error:
                pass
    j = data.find(ZSTD)
    while j >= 0:  # (the NVIDIA driver's cache, 2026-12: zstd frames, seen on an H100)
        out = _unzstd(data[j:])
        if out:
            yield f"zstd@{j}", out
        j = data.find(ZSTD, j + 4)


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


def carve(src, dst):
    """Every CUDA ELF inside the files under `src` (or inside a compressed stream in them),
    written to `dst`."""
    os.makedirs(dst, exist_ok=True)
    n = 0
    for root, _, files in os.walk(src):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            data = open(p, "rb").read()
            print(f"  {os.path.relpath(p, src)}: {len(data)} bytes, head {data[:16].hex()}")
            for how, blob in _unpacked(data):
                for at, elf in _elves(blob):
                    out = os.path.join(dst, f"k{n:03d}.cubin")
                    open(out, "wb").write(elf)
                    print(f"    cubin {out}: {len(elf)} bytes at {at} ({how})")
                    n += 1
                code = _code(blob)
                if code is not None:  # (raw SASS: `nvdisasm -b SM90`)
                    out = os.path.join(dst, f"k{n:03d}.sm")
                    open(out, "wb").write(code)
                    print(f"    code {out}: {len(code) // 16} instructions ({how})")
                    n += 1
    print(f"carved {n} programs")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        carve(sys.argv[2], sys.argv[3])
