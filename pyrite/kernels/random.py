"""Random numbers on the device: Philox4x32-10 (Salmon et al., SC'11), counter-based.

Element i's value depends only on (seed, offset, i): the same seed gives the same tensor on any
device, and no state lives on the GPU. Each invocation makes four values from one counter
(i/4, 0, offset_lo, offset_hi) under key (seed_lo, seed_hi).

Info words: [0] n  [1] out offset  [2] seed_lo [3] seed_hi [4] offset_lo [5] offset_hi
            [6] a (f32 bits or i32)  [7] b   — uniform: low, high; normal: mean, std;
            randint: low, high (exclusive).
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header

PHILOX = """
fn mulhi32(a: u32, b: u32) -> u32 {
  // the high word of a 32x32-bit product, from 16-bit halves (WGSL has no 64-bit integers)
  let a_lo = a & 0xffffu; let a_hi = a >> 16u;
  let b_lo = b & 0xffffu; let b_hi = b >> 16u;
  let lo_lo = a_lo * b_lo; let hi_lo = a_hi * b_lo; let lo_hi = a_lo * b_hi;
  let cross = (lo_lo >> 16u) + (hi_lo & 0xffffu) + lo_hi;
  return a_hi * b_hi + (hi_lo >> 16u) + (cross >> 16u);
}

fn philox(counter: vec4<u32>, key: vec2<u32>) -> vec4<u32> {
  var c = counter;
  var k = key;
  for (var r = 0; r < 10; r++) {
    let hi0 = mulhi32(0xD2511F53u, c.x); let lo0 = 0xD2511F53u * c.x;
    let hi1 = mulhi32(0xCD9E8D57u, c.z); let lo1 = 0xCD9E8D57u * c.z;
    c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k = k + vec2<u32>(0x9E3779B9u, 0xBB67AE85u);
  }
  return c;
}

// [0, 1) with 24 random bits
fn unit(x: u32) -> f32 { return f32(x >> 8u) * 5.9604644775390625e-8; }
"""

_VALUE = {
    "uniform": (
        "let u = vec4<f32>(unit(bits.x), unit(bits.y), unit(bits.z), unit(bits.w));\n"
        "  let v = a + (b - a) * u;\n"
    ),
    # Box-Muller on two pairs; 1 - unit() lies in (0, 1] so the log is finite
    "normal": (
        "let r0 = sqrt(-2.0 * log(1.0 - unit(bits.x)));\n"
        "  let r1 = sqrt(-2.0 * log(1.0 - unit(bits.z)));\n"
        "  let t0 = 6.283185307179586 * unit(bits.y);\n"
        "  let t1 = 6.283185307179586 * unit(bits.w);\n"
        "  let v = a + b * vec4<f32>(r0 * cos(t0), r0 * sin(t0), r1 * cos(t1), r1 * sin(t1));\n"
    ),
    # low + bits mod range (range < 2^31: the bias is below 2^-1 ULP of the count for small ranges)
    "randint": (
        "let span = u32(b - a);\n  let v = vec4<i32>(a) + vec4<i32>(bits % vec4<u32>(span));\n"
    ),
}


@lru_cache(maxsize=64)
def random_kernel(dist: str, out_type: str) -> KernelSource:
    """`dist` in uniform|normal|randint; out_type the storage type written (f32, f16, i32)."""
    is_int = dist == "randint"
    ab = (
        "  let a = info[6]; let b = info[7];\n"
        if is_int
        else "  let a = bitcast<f32>(info[6]); let b = bitcast<f32>(info[7]);\n"
    )
    conv = {"f32": "v[j]", "f16": "f16(v[j])", "i32": "i32(v[j])" if not is_int else "v[j]"}
    body = (
        FLAT_INDEX.format(wg=WG)
        + "  let base = gi * 4;\n"
        + "  if (base >= info[0]) { return; }\n"
        + "  let key = vec2<u32>(u32(info[2]), u32(info[3]));\n"
        + "  let bits = philox(vec4<u32>(u32(gi), 0u, u32(info[4]), u32(info[5])), key);\n"
        + ab
        + "  "
        + _VALUE[dist]
        + "  for (var j = 0; j < 4; j++) {\n"
        + "    if (base + j < info[0]) { out[info[1] + base + j] = "
        + conv[out_type]
        + "; }\n"
        + "  }\n"
    )
    src = header([("out", out_type, "w")]) + PHILOX + ENTRY.format(wg=WG) + body + "}\n"
    return KernelSource(src, "w")


def philox_reference(counter, key):
    """Philox4x32-10 in Python integers, for tests (no numpy needed)."""
    c = list(counter)
    k = list(key)
    m = 0xFFFFFFFF
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & m, p1 & m, ((p0 >> 32) ^ c[3] ^ k[1]) & m, p0 & m]
        k = [(k[0] + 0x9E3779B9) & m, (k[1] + 0xBB67AE85) & m]
    return c
