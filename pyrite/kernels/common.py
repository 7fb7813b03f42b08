"""Shared pieces of the WGSL generators: the kernel record, the binding header, grid folding,
conversions between storage and compute types, and helper functions included on demand.

Conventions every generator follows (the backend relies on them):
- storage buffers at @binding(0..n-1) of group 0, in the order the op passes them; `modes` says
  which are read-only ("r") and which read-write ("w");
- `info: array<i32>` at @binding(n): sizes, strides, offsets and scalars, read through a dynamic
  offset, at most 127 words; word 127 is always 0, a zero the shader compiler cannot know
  (backend/device.py INFO_ZERO_WORD; the helper `p_opaque` uses it);
- entry point `main`; 1-D work is folded over (x, y) workgroups so no dimension passes 65,535
  (WebGPU's maxComputeWorkgroupsPerDimension default), and the kernel rebuilds the flat index
  from `num_workgroups`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# the info word every dispatch leaves 0 (the device's side of the contract: backend/device.py
# INFO_ZERO_WORD; kernels/ and backend/ do not import each other, tests/test_backend.py checks
# the two agree)
INFO_ZERO_WORD = 127

MAX_WORKGROUPS = 65535  # WebGPU maxComputeWorkgroupsPerDimension (default limit)
WG = 256  # invocations per workgroup for 1-D kernels: WebGPU's default maxComputeInvocations


class KernelSource(NamedTuple):
    wgsl: str
    modes: str  # one letter a storage binding: "r" read-only, "w" read-write


# Last line of a kernel whose every workgroup- and function-array index is in range by
# construction (a tiled kernel's unrolled loops over its own tiles): the backend may build it
# without the implementation's run-time index clamps (backend/capi.py `trusted_module`).
# Storage-buffer reads and writes stay checked by the driver whatever this says.
TRUSTED = "\n// pyrite: trusted\n"


def trusted(src: KernelSource) -> KernelSource:
    """`src` marked TRUSTED."""
    return src if src.wgsl.endswith(TRUSTED) else KernelSource(src.wgsl + TRUSTED, src.modes)


_INFO_WORD = re.compile(r"\binfo\[(\d+)\]")


def bake(src: KernelSource, words: dict) -> KernelSource:
    """`src` with the info words `words` (index -> i32 value) written in as constants: a
    kernel for one shape, whose sizes and strides the compiler sees (loop trip counts, address
    arithmetic folded). The words are still bound and written; only these reads go."""
    return KernelSource(
        _INFO_WORD.sub(
            lambda m: f"({words[int(m[1])]}i)" if int(m[1]) in words else m[0], src.wgsl
        ),
        src.modes,
    )


def fold_grid(workgroups: int, limit: int = MAX_WORKGROUPS) -> tuple[int, int, int]:
    """A 1-D count of workgroups as an (x, y, z) grid with no dimension over `limit`."""
    workgroups = max(1, workgroups)
    if workgroups <= limit:
        return (workgroups, 1, 1)
    y = -(-workgroups // limit)
    if y > limit:
        z = -(-y // limit)
        if z > limit:  # past limit³ workgroups no grid exists: say so instead of an invalid one
            raise ValueError(f"pyrite: {workgroups:,} workgroups exceed a {limit}³ grid")
        return (limit, limit, z)
    return (limit, y, 1)


def grid_for(n: int, per_group: int = WG) -> tuple[int, int, int]:
    return fold_grid(-(-n // per_group))


# The flat workgroup index of a folded grid, and this invocation's flat index.
FLAT_INDEX = (
    "  let wg_flat = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n"
    "  let gi = i32(wg_flat * {wg}u + lid.x);\n"
)
ENTRY = (
    "@compute @workgroup_size({wg})\n"
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,"
    " @builtin(num_workgroups) nwg: vec3<u32>) {{\n"
)

# The entry point with the subgroup size (`sgs`), for kernels built with subgroup operations
# (the device's `subgroups`: 1 on wgpu-native, whose naga takes the builtins as they are; 2 on
# Dawn, whose Tint wants SG_ENABLE first).
ENTRY_SG = ENTRY.replace(
    "@builtin(num_workgroups) nwg: vec3<u32>)",
    "@builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sgs: u32)",
)
SG_ENABLE = "enable subgroups;\n"
# The largest subgroup WGSL allows: a butterfly's shuffle masks stay below it (Tint refuses a
# subgroupShuffleXor mask of 128 or more: the H100 through Dawn, 2026-12-05).
SG_MAX = 128


def sg_offsets(width: int) -> list[int]:
    """The subgroupShuffleXor masks of a butterfly over groups of `width` lanes (a power of
    two): 1, 2, 4, ... below min(width, SG_MAX). A kernel generates them all and discards, in a
    branch after each shuffle, those past its subgroup's size (kernels/rowops._sg_reduce)."""
    out, o = [], 1
    while o < min(width, SG_MAX):
        out.append(o)
        o *= 2
    return out


def header(buffers, n_info_binding=None, f16=False) -> str:
    """Binding declarations. `buffers` is a sequence of (name, element type, mode)."""
    lines = ["enable f16;"] if f16 or any(t == "f16" for _, t, _ in buffers) else []
    for i, (name, elem, mode) in enumerate(buffers):
        if elem == "bf16":
            # packed bfloat16 (two elements a u32 word) is read and written by the strided map
            # alone; every other kernel family gets f32 (ops/fallback.py widens at the op)
            raise TypeError(
                "pyrite: internal: a bfloat16 tensor reached a kernel that reads only unpacked "
                "storage (its op should widen bfloat16 to float32 first: ops/fallback.py)"
            )
        access = "read" if mode == "r" else "read_write"
        lines.append(f"@group(0) @binding({i}) var<storage, {access}> {name}: array<{elem}>;")
    n = len(buffers) if n_info_binding is None else n_info_binding
    lines.append(f"@group(0) @binding({n}) var<storage, read> info: array<i32>;")
    return "\n".join(lines) + "\n"


# an input (x0..) or a scalar (s0..) of a map expression (ops/core.run_map; compile/fusion.py)
EXPR_VAR = re.compile(r"\b([xs])(\d+)\b")


def post_expr(expr, value, at, n_extra, s_ctypes, col):
    """A map fused into a kernel's store (compile/fusion.py; kernels/matmul.gemm_fast's `post`,
    kernels/rowops.row_grad_kernel's): `expr` with x0 the kernel's own output `value` at row
    `m`, column `col`, x1..x{n_extra} read from f32 operands r1.. each at info words at + 3k
    (base, m stride, n stride), and s0.. scalars at info words at + 3 * n_extra + i."""

    def sub(mt):
        kind, k = mt.group(1), int(mt.group(2))
        if kind == "x":
            if k == 0:
                return value
            w = at + 3 * (k - 1)
            return f"r{k}[info[{w}] + m * info[{w + 1}] + ({col}) * info[{w + 2}]]"
        w = at + 3 * n_extra + k
        return f"bitcast<f32>(info[{w}])" if s_ctypes[k] == "f32" else f"info[{w}]"

    return f"({EXPR_VAR.sub(sub, expr)})"


# ---- types ---------------------------------------------------------------------------------
# Storage tokens (dtypes.dtype.storage): f32 f16 i32, u32 (bool as 0/1), u8 i8 i16 (widened: one
# i32 word an element, wrapped to the width on every store), bf16 (packed: two elements a u32
# word, element 2k in the low half). Other kernel families see the small ints as plain "i32"
# (dtype.wgsl) and never see bf16. Compute types: f32 i32 bool.
STORAGE_TO_COMPUTE = {
    "f32": "f32",
    "f16": "f32",
    "bf16": "f32",
    "i32": "i32",
    "u8": "i32",
    "i8": "i32",
    "i16": "i32",
    "u32": "bool",
}
# the WGSL element type of each token's storage array
STORAGE_ELEM = {
    "f32": "f32",
    "f16": "f16",
    "bf16": "u32",
    "i32": "i32",
    "u8": "i32",
    "i8": "i32",
    "i16": "i32",
    "u32": "u32",
}
SMALL_INT = ("u8", "i8", "i16")
_ZERO = {"f32": "0.0", "f16": "0.0h", "i32": "0", "u32": "0u", "u8": "0", "i8": "0", "i16": "0"}
_ONE = {"f32": "1.0", "f16": "1.0h", "i32": "1", "u32": "1u", "u8": "1", "i8": "1", "i16": "1"}


def _nonzero_f32(expr: str) -> str:
    # by the bits: lavapipe's compiler treats `x != 0.0` as ordered (NaN != 0.0 came out false),
    # and PyTorch's nan.bool() is True; -0.0 is False
    return f"((bitcast<u32>({expr}) & 0x7fffffffu) != 0u)"


def load(expr: str, stype: str, ctype: str) -> str:
    """A value read from storage of type `stype`, as compute type `ctype`."""
    if stype == "bf16":
        raise ValueError("pyrite: internal: bf16 storage is read with load_packed")
    if stype in SMALL_INT:
        stype = "i32"
    if ctype == "bool":
        if stype == "f32":
            return _nonzero_f32(expr)
        if stype == "f16":
            return _nonzero_f32(f"f32({expr})")
        return f"({expr} != {_ZERO[stype]})"
    if stype == "u32":  # bool storage read as a number
        return f"{ctype}({expr})"
    if stype == ctype:
        return expr
    return f"{ctype}({expr})"


def load_packed(word: str, index: str, ctype: str) -> str:
    """A bf16 element from its u32 `word`, `index` the element's index (its parity picks the
    half), as compute type `ctype`."""
    v = f"p_bf16_at({word}, {index})"
    if ctype == "bool":
        return _nonzero_f32(v)
    return v if ctype == "f32" else f"{ctype}({v})"


def store(expr: str, ctype: str, stype: str, exact: bool = False) -> str:
    """A compute value of type `ctype` as storage type `stype`.

    `exact` (the strided map): PyTorch's x86 CPU results where WGSL leaves a cast undefined or
    differs — float → int through `p_f2i` (NaN, ±inf and out-of-range give INT32_MIN, not a
    clamp), float → float16 overflowing to ±inf. Small-int tokens always wrap to their width."""
    if stype == "bf16":
        raise ValueError("pyrite: internal: bf16 storage is written with store_packed")
    if ctype == "bool":
        return f"select({_ZERO[stype]}, {_ONE[stype]}, {expr})"
    if stype == "u32":
        if ctype == "f32":
            return f"select(0u, 1u, {_nonzero_f32(expr)})"
        return f"select(0u, 1u, {expr} != {_ZERO[ctype]})"
    if stype in SMALL_INT:
        v = expr if ctype == "i32" else (f"p_f2i({expr})" if exact else f"i32({expr})")
        if stype == "u8":
            return f"(({v}) & 255)"
        bits = 24 if stype == "i8" else 16
        return f"((({v}) << {bits}u) >> {bits}u)"
    if stype == ctype:
        return expr
    if exact and ctype == "f32" and stype == "i32":
        return f"p_f2i({expr})"
    if exact and ctype == "f32" and stype == "f16":
        return f"p_f16({expr})"
    return f"{stype}({expr})"


def packed_bits(expr: str, ctype: str) -> str:
    """The bf16 bits (a u32 below 0x10000) of a compute value, rounded to nearest even."""
    if ctype == "bool":
        return f"select(0u, 0x3f80u, {expr})"
    v = expr if ctype == "f32" else f"f32({expr})"
    return f"p_bf16({v})"


def cast(expr: str, frm: str, to: str) -> str:
    """Between compute types."""
    if frm == to:
        return expr
    if to == "bool":
        if frm == "f32":
            return _nonzero_f32(expr)
        return f"({expr} != {_ZERO[frm]})"
    if frm == "bool":
        return f"select({_ZERO[to]}, {'1.0' if to == 'f32' else '1'}, {expr})"
    return f"{to}({expr})"


# ---- helper functions, included when an expression names them ------------------------------
HELPERS = {
    # ---- a counter-based hash (Jarzynski & Olano 2020, "Hash Functions for GPU Rendering":
    # pcg4d): four 32-bit outputs from four inputs; the fused attention's dropout draws its
    # keep bits from it (kernels/attention.py dropout_keep), `pyrite.testing.pcg4d` mirrors it
    "p_pcg4d": """fn p_pcg4d(a: vec4<u32>) -> vec4<u32> {
  var v = a * 1664525u + vec4<u32>(1013904223u);
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  v = v ^ (v >> vec4<u32>(16u));
  v.x += v.y * v.w; v.y += v.z * v.x; v.z += v.x * v.y; v.w += v.y * v.z;
  return v;
}""",
    # ---- casts (ops/casts.py, the strided map): PyTorch's CPU results on x86 ----
    # float → int: truncation through int32; NaN, ±inf and |x| >= 2^31 give INT32_MIN (x86
    # cvttss2si's "integer indefinite", which PyTorch CPU returns); WGSL's i32() would clamp
    "p_f2i": """fn p_f2i(x: f32) -> i32 {
  if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x4f000000u) { return i32(-2147483647 - 1); }
  return i32(x);
}""",
    # float → float16: WGSL leaves the rounding of values in [65504, 65536) to the driver; IEEE
    # (and PyTorch) round |x| >= 65520 to ±inf (an f32 infinity converts to an f16 one). The
    # infinity through a var: Tint rejects a const-evaluated one.
    "p_f16": """fn p_f16(x: f32) -> f16 {
  let u = bitcast<u32>(x);
  let a = u & 0x7fffffffu;
  if (a >= 0x477ff000u && a <= 0x7f800000u) {
    var b = (u & 0x80000000u) | 0x7f800000u;
    return f16(bitcast<f32>(b));
  }
  return f16(x);
}""",
    # x rounded to the nearest float16 value (ties to even; |x| >= 65520 to ±inf; NaN stays),
    # returned as an f32, computed without an f16 conversion: f32(f16(x)) is a round trip the
    # H100's compiler removed (div_trunc of halves truncated -49.989, not its f16 value -50,
    # 2026-12-07), and needs `shader-f16`. The quantum 2^(e - 10) (e the exponent, at least
    # -14 for f16's subnormals) scales x exactly to [2^10, 2^11), where round() is ties to even.
    "p_f16r": """fn p_f16r(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  let a = u & 0x7fffffffu;
  if (a >= 0x477ff000u) {
    return select(bitcast<f32>((u & 0x80000000u) | 0x7f800000u), x, a > 0x7f800000u);
  }
  let e = max(i32(a >> 23u) - 127, -14);
  let up = bitcast<f32>(u32(137 - e) << 23u);
  let down = bitcast<f32>(u32(117 + e) << 23u);
  return bitcast<f32>(bitcast<u32>(round(bitcast<f32>(a) * up) * down) | (u & 0x80000000u));
}""",
    # bfloat16: an element is the top half of an f32; element 2k sits in the low half of word k
    "p_bf16_at": """fn p_bf16_at(w: u32, i: i32) -> f32 {
  return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (i & 1) != 0));
}""",
    # f32 → bf16 bits, round to nearest even as PyTorch (c10::BFloat16); NaN → 0x7fc0
    "p_bf16": """fn p_bf16(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}""",
    # four bfloat16s packed in a vec2<u32> (element 2k in the low half of word k) as f32s, and back
    "p_bf16x4": """fn p_bf16x4(w: vec2<u32>) -> vec4<f32> {
  let v = vec4<u32>(w.x << 16u, w.x & 0xffff0000u, w.y << 16u, w.y & 0xffff0000u);
  return bitcast<vec4<f32>>(v);
}""",
    "p_bf16x4_pack": """fn p_bf16x4_pack(v: vec4<f32>) -> vec2<u32> {
  return vec2<u32>(p_bf16(v.x) | (p_bf16(v.y) << 16u), p_bf16(v.z) | (p_bf16(v.w) << 16u));
}""",
    # a float is true when nonzero by its bits: NaN is true, -0.0 false (see _nonzero_f32)
    "p_nz": "fn p_nz(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) != 0u; }",
    # ---- end of casts ----
    # NaN and infinity by their bits: WGSL lets a compiler assume finite math, so `x != x` may fold.
    "p_isnan": "fn p_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }",
    # an f32's bits with every NaN made the canonical 0x7FC00000 (the one-pass reductions' and
    # the decode merge's scratch words: no stored word is ever their all-ones "empty" pattern)
    "p_word": """fn p_word(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  return select(b, 0x7FC00000u, (b & 0x7FFFFFFFu) > 0x7F800000u);
}""",
    "p_isinf": "fn p_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }",
    # Through a `var`: Dawn's compiler (Tint) evaluates a const-expression bitcast and rejects a
    # NaN or infinite result ("value inf cannot be represented as 'f32'"); a var is not const.
    "p_nan": "fn p_nan() -> f32 { var bits = 0x7fc00000u; return bitcast<f32>(bits); }",
    "p_inf": "fn p_inf() -> f32 { var bits = 0x7f800000u; return bitcast<f32>(bits); }",
    # erf / erfc: the musl/sun libm f32 split (|x| < 0.84375 series, < 1.25 rational around 1,
    # else erfc from a rational in 1/x²), shortened to what f32 needs. Measured against math.erf
    # on 2M points of [-7, 7] (lavapipe): <= 1.02 ULP, <= 6.1e-8 absolute (tests/test_elementwise.py
    # checks it). p_erfc_pos(a), a >= 0.84375, is erfc(a) without cancellation, so gelu's tail
    # (0.5·x·erfc(-x/√2) for x < 0) keeps its relative accuracy instead of computing 1 + erf ≈ 0.
    # Its exps are p_expf (kernels/mathlib.py; WGSL's exp made erfc(4) 42 ULP off) and z keeps 11
    # bits (with 12, -z*z - 0.5625 rounded for z in [4, 10): erfc(8) was 63 ULP off).
    "p_erfc_pos": """fn p_erfc_pos(a: f32) -> f32 {
  if (a < 1.25) {
    let s = a - 1.0;
    let p = -2.36211856e-03 + s * (4.14856118e-01 + s * (-3.72207876e-01 + s * (3.18346619e-01 + s * (-1.10894694e-01 + s * (3.54783043e-02 + s * -2.16637559e-03)))));
    let q = 1.0 + s * (1.06420880e-01 + s * (5.40397917e-01 + s * (7.18286544e-02 + s * (1.26171219e-01 + s * (1.36370839e-02 + s * 1.19844998e-02)))));
    return 1.54937088e-01 - p_divf(p, q);
  }
  if (a >= 10.0) { return 0.0; }
  let s = 1.0 / (a * a);
  var r: f32; var t: f32;
  if (a < 2.857143) {
    r = -9.86494403e-03 + s * (-6.93858572e-01 + s * (-1.05586262e+01 + s * (-6.23753324e+01 + s * (-1.62396669e+02 + s * (-1.84605092e+02 + s * (-8.12874355e+01 + s * -9.81432934e+00))))));
    t = 1.0 + s * (1.96512716e+01 + s * (1.37657754e+02 + s * (4.34565877e+02 + s * (6.45387271e+02 + s * (4.29008140e+02 + s * (1.08635005e+02 + s * (6.57024977e+00 + s * -6.04244152e-02)))))));
  } else {
    r = -9.86494292e-03 + s * (-7.99283237e-01 + s * (-1.77579549e+01 + s * (-1.60636384e+02 + s * (-6.37566443e+02 + s * (-1.02509513e+03 + s * -4.83519191e+02)))));
    t = 1.0 + s * (3.03380607e+01 + s * (3.25792512e+02 + s * (1.53672958e+03 + s * (3.19985821e+03 + s * (2.55305040e+03 + s * (4.74528541e+02 + s * -2.24409524e+01))))));
  }
  let z = bitcast<f32>(bitcast<u32>(a) & 0xffffe000u);  // 11 bits: z*z + 0.5625 exact below 10
  // (z - a)·(z + a) through p_opaque: not to be rewritten as z·z - a·a, which cancels
  return p_divf(p_expf(-z * z - 0.5625) * p_expf(p_opaque(z - a) * (z + a) + p_divf(r, t)), a);
}""",
    "p_erf_small": """fn p_erf_small(x: f32) -> f32 {
  let z = x * x;
  let r = 1.28379166e-01 + z * (-3.25042107e-01 + z * (-2.84817495e-02 + z * (-5.77027029e-03 + z * -2.37630166e-05)));
  let s = 1.0 + z * (3.97917223e-01 + z * (6.50222499e-02 + z * (5.08130628e-03 + z * (1.32494738e-04 + z * -3.96022827e-06))));
  return x + x * p_divf(r, s);
}""",
    "p_erf": """fn p_erf(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.84375) { return p_erf_small(x); }
  if (a >= 6.0) { return select(-1.0, 1.0, x >= 0.0); }
  let e = 1.0 - p_erfc_pos(a);
  return select(-e, e, x >= 0.0);
}""",
    "p_erfc": """fn p_erfc(x: f32) -> f32 {
  let a = abs(x);
  if (a < 0.84375) { return 1.0 - p_erf_small(x); }
  let c = p_erfc_pos(a);
  return select(2.0 - c, c, x >= 0.0);
}""",
    # Φ(x) = 0.5·erfc(-x/√2), the normal CDF of gelu = x·Φ(x), without branches: erfc(a) =
    # t·exp(-a² + P(t)), t = 1/(1 + a/2), P a degree-9 polynomial (the Chebyshev fit of Numerical
    # Recipes' erfcc, fractional error < 1.2e-7 for every a >= 0), -a² split as -z² (z: a's top
    # 12 bits, z² exact) + (z - a)(z + a) so the tail keeps its relative accuracy. p_erfc's
    # branches (three ranges, two rational fits each) diverge within a warp on activations and
    # made gelu compute-bound: see ops/elementwise.py GELU_CDF for the measurement. Measured
    # against float64 on 4M points of [-14, 14] (lavapipe): see tests/test_elementwise.py.
    # exp(-z² + d) is one exp with its argument reduced around -z² exactly (-z² - n·ln2_hi is
    # exact, d added after), not the product of two p_expf, and without p_expf's range branches
    # (the argument lies in [-102, 1]): as accurate on 2M points of [-14, 14] (lavapipe; max ulp
    # by range the same to 0.1), and gelu over 4096×3072 took 56.5 → 42.9 µs on the H100
    # (wgpu-native; Dawn 61.5 → 45.1; torch CUDA 43.6 / 47.2), from compute-bound to the copy's
    # 40 (scripts/bert_maps_time.py, 2026-12-06).
    "p_gelu_cdf": """fn p_gelu_cdf(x: f32) -> f32 {
  let a = min(abs(x) * 0.70710678, 10.0);
  let t = 1.0 / (1.0 + 0.5 * a);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let z = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
  let d = p_opaque(z - a) * (z + a) + p;
  let zz = z * z;
  let n = round((d - zz) * 1.44269504);
  let r = p_opaque(p_opaque(-zz - n * 0.693145752) + d) - n * 1.42860677e-06;
  let q = 1.0 + r * (1.0 + r * (0.5 + r * (0.166666672 + r * (0.0416666679 + r * (0.00833333377 + r * (0.00138888892 + r * 0.000198412701))))));
  let ni = i32(n);
  let h = ni / 2;
  var e = 0.5 * t * p_opaque(q * bitcast<f32>(u32(h + 127) << 23u)) * bitcast<f32>(u32(ni - h + 127) << 23u);
  e = select(e, 0.0, a >= 10.0);
  return select(1.0 - e, e, x < 0.0);
}""",
    # tanh(a) = e / (e + 2), e = expm1(2a): no cancellation near 0 (the (exp(2a) - 1) / (exp(2a)
    # + 1) form was off by ~1000 ULP at |x| ~ 1e-3 on lavapipe); clamping at 15 keeps exp finite
    # (some drivers' tanh returns NaN for |x| > ~44, exp overflowing inside).
    "p_tanh": """fn p_tanh(x: f32) -> f32 {
  if (p_isnan(x)) { return x; }  // min(NaN, 15) may be 15
  let a = min(abs(x), 15.0);
  let e = p_expm1(2.0 * a);
  let t = e / (e + 2.0);
  return p_xorsign(t, x);
}""",
    # x - tanh(x): below |x| = 0.6 its odd series from x^3 (9 terms: x^21/x^3 < 2^-24 there;
    # 2.4 ulp at worst in float32, against the subtraction's cancellation: x - tanh(x) near
    # x = 0.25 was 60 ulp off, at 0.01 0.3 % relative), above it the subtraction (<= 4 ulp
    # of the result past 0.6 with a correctly rounded tanh)
    "p_tanhshrink": """fn p_tanhshrink(x: f32) -> f32 {
  if (abs(x) < 0.6) {
    let z = x * x;
    let p = 0.33333333 + z * (-0.13333333 + z * (0.053968254 + z * (-0.021869489 + z * (0.0088632355 + z * (-0.0035921280 + z * (0.0014558344 + z * (-0.00059002744 + z * 0.00023912911)))))));
    return select(x * z * p, 0.0, x == 0.0);  // (-0.0 gives +0.0, as x - tanh(x) does)
  }
  return x - p_tanh(x);
}""",
    # 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, as one branch-free division (one exp,
    # no divergence within a warp on activations of either sign): over 4096×3072 on the H100
    # (wgpu-native), gelu's tanh form 54.7 → 42.3 µs, silu and sigmoid 42.7 / 42.6 (torch CUDA
    # 45.3, 45.8, 43.1; scripts/bert_maps_time.py, 2026-12-06)
    "p_sigmoid": """fn p_sigmoid(x: f32) -> f32 {
  let e = p_expf(-abs(x));
  return select(e, 1.0, x >= 0.0) / (1.0 + e);
}""",
    # log1p and expm1 near 0 by series: Kahan's log(u)·x/(u - 1) trick needs a correctly rounded
    # log, and WGSL's log is only 2^-21 absolute on [0.5, 2] (lavapipe's log(1 + 2^-23) was off by
    # 2x). log1p: 2·atanh(s), s = x/(2 + x), |s| <= 1/3 on [-0.5, 1], 8 odd terms reach s^17/17
    # < 2^-24·|s|; outside, log(1 + x) plus the rounding of 1 + x, (x - (u - 1))/u.
    "p_log1p": """fn p_log1p(x: f32) -> f32 {
  if (x >= -0.5 && x <= 1.0) {
    // 2s = x / (1 + x/2), whose half s is subnormal for |x| < 2^-125: flushed on NVIDIA, where
    // logaddexp(0, -87) (1.65e-38, normal) came out 0; the same bits as 2·(x / (2 + x)) elsewhere
    let s2 = x / (1.0 + 0.5 * x);
    let s = 0.5 * s2;
    let z = s * s;
    let p = 1.0 + z * (0.33333333 + z * (0.2 + z * (0.14285714 + z * (0.11111111 + z * (0.09090909 + z * (0.07692308 + z * (0.06666667 + z * 0.05882353)))))));
    return s2 * p;
  }
  let u = p_opaque(1.0 + x);  // (x - (u - 1)) is the rounding of 1 + x, not 0
  if (p_isinf(u) || u <= 0.0) { return log(u); }
  return log(u) + (x - (u - 1.0)) / u;
}""",
    # expm1: Taylor to x^9/9! on |x| < 0.5 (the next term is < 2^-24·|x|); exp(x) - 1 outside,
    # where exp(x) - 1 loses at most a factor 2.6 of exp's own error.
    "p_expm1": """fn p_expm1(x: f32) -> f32 {
  if (abs(x) < 0.5) {
    return x * (1.0 + x * (0.5 + x * (1.6666667e-01 + x * (4.1666668e-02 + x * (8.3333338e-03 + x * (1.3888889e-03 + x * (1.9841270e-04 + x * (2.4801587e-05 + x * 2.7557319e-06))))))));
  }
  return p_expf(x) - 1.0;
}""",
    "p_softplus": """fn p_softplus(x: f32, beta: f32, threshold: f32) -> f32 {
  let bx = beta * x;
  if (bx > threshold) { return x; }
  return p_log1p(p_expf(-abs(bx))) / beta + max(bx, 0.0) / beta;
}""",
    # x ** y with PyTorch's answers for negative bases and integral exponents
    # NaN handled by bits first: lavapipe's compiler folds `x == 0.0` to true for a NaN x
    # (NaN ** 3 came out 0); PyTorch: x ** 0 = 1 and 1 ** y = 1 even for NaN
    # |v| with the sign bit set where `neg`, by bits: a select between v and -v may lose a
    # signed zero to a compiler that ignores them (NVIDIA's)
    "p_with_sign": """fn p_with_sign(v: f32, neg: bool) -> f32 {
  return bitcast<f32>((bitcast<u32>(v) & 0x7fffffffu) | select(0u, 0x80000000u, neg));
}""",
    # v with its sign flipped where x's sign bit is set: an odd function from its value at |x|,
    # so -0.0 (and a negative subnormal a GPU flushes) keeps its sign, which `x < 0.0` loses
    "p_xorsign": """fn p_xorsign(v: f32, x: f32) -> f32 {
  return bitcast<f32>(bitcast<u32>(v) ^ (bitcast<u32>(x) & 0x80000000u));
}""",
    "p_powf": """fn p_powf(x: f32, y: f32) -> f32 {
  if ((bitcast<u32>(y) & 0x7fffffffu) == 0u) { return 1.0; }
  if (bitcast<u32>(x) == 0x3f800000u) { return 1.0; }
  if (p_isnan(x) || p_isnan(y)) { return p_nan(); }
  if (y == 1.0) { return x; }
  if (y == 2.0) { return x * x; }
  if (bitcast<u32>(x) == 0xff800000u) {  // -inf: C's pow, signed only for odd integer y
    // (an infinite y is even: inf - inf is NaN, and NaN != 0 is true on the H200)
    let odd = !p_isinf(y) && floor(y) == y && (y - 2.0 * floor(y * 0.5)) != 0.0;
    return p_with_sign(select(0.0, p_inf(), y > 0.0), odd);
  }
  // (-0) ** 0.5 is +0: the sign cleared by bits (NVIDIA's compiler, not keeping signed zeros,
  // folded select(sqrt(x), 0.0, x == 0.0) to sqrt(x), which is -0)
  if (y == 0.5) { return bitcast<f32>(bitcast<u32>(sqrt(x)) & 0x7fffffffu); }
  if (p_isinf(y)) {  // C's pow: |x| = 1 gives 1 (also for x = -1), else inf or 0 by |x| > 1
    let ax = abs(x);
    if (ax == 1.0) { return 1.0; }
    return select(0.0, p_inf(), (ax > 1.0) == (y > 0.0));
  }
  let ux = bitcast<u32>(x);
  let ax = ux & 0x7fffffffu;
  let xneg = (ux >> 31u) == 1u;  // by the bit: -0 and negative subnormals included
  let yi = floor(y);
  let yint = yi == y;
  let odd = yint && abs(y) < 16777216.0 && (yi - 2.0 * floor(yi * 0.5)) != 0.0;
  if (ax == 0u || ax == 0x7f800000u) {  // ±0, ±inf: 0 or inf, x's sign for an odd integer y
    return p_with_sign(select(0.0, p_inf(), (y < 0.0) == (ax == 0u)), odd && xneg);
  }
  if (xneg && !yint) { return p_nan(); }
  let a = bitcast<f32>(ax);
  var r: f32;
  if (yint && abs(y) * (abs(f32(i32(ax >> 23u) - 127)) + 1.0) < 60.0) {
    r = p_powi_dd(a, y);  // exact where the power is representable (10.0 ** 7 is 1e7)
  } else {
    r = p_exp2_dd(y, p_log2_dd(a));
  }
  return p_with_sign(r, odd && xneg);
}""",
    # x ** y to ~1 ULP, where exp2(y·log2 x) in f32 was off by |y·log2 x|·2^-24 relative
    # (0.95 ** 911: 1591 ULP; (-2.5) ** -100 was 0, its x ** 100 overflowing): pairs (hi, lo)
    # of floats carry about 44 bits. a·b = p + e exactly (Dekker: 12-bit halves, every partial
    # product exact, fused or not; p through p_opaque so that no compiler fuses a later p - ...
    # with the product that made p).
    "p_two_prod": """fn p_two_prod(a: f32, b: f32) -> vec2<f32> {
  let p = p_opaque(a * b);
  let sa = p_split(a);
  let sb = p_split(b);
  return vec2<f32>(p, (((sa.x * sb.x - p) + sa.x * sb.y) + sa.y * sb.x) + sa.y * sb.y);
}""",
    "p_dd_mul": """fn p_dd_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let p = p_two_prod(a.x, b.x);
  let e = p.y + (a.x * b.y + a.y * b.x);
  let s = p_opaque(p.x + e);
  return vec2<f32>(s, e - p_opaque(s - p.x));
}""",
    # a ** n, a > 0, n a nonzero integer with every a ** 2^k in [2^-64, 2^64]: squaring in
    # pairs, so the one rounding is the last (the f32 loop was ~n/2 ULP: 64 roundings compound)
    "p_powi_dd": """fn p_powi_dd(a: f32, y: f32) -> f32 {
  var b = vec2<f32>(a, 0.0);
  var q = vec2<f32>(1.0, 0.0);
  var e = u32(abs(y));
  loop {
    if ((e & 1u) == 1u) { q = p_dd_mul(q, b); }
    e = e >> 1u;
    if (e == 0u) { break; }
    b = p_dd_mul(b, b);
  }
  if (y > 0.0) { return q.x + q.y; }
  // 1 / (q.x + q.y): the rounded reciprocal and one correction from its exact residual
  let r0 = p_divf(1.0, q.x);
  let t = p_two_prod(r0, q.x);
  return r0 + r0 * (((1.0 - t.x) - t.y) - r0 * q.y);
}""",
    # log2(a), a > 0 finite (subnormals too), as hi + lo to ~2^-30 relative: a = 2^e·(1 + f)
    # (p_log_split), ln(1 + f) = 2·atanh(s), s = f / (2 + f) as a pair (its residual
    # f - s·(2 + f) exact), plus 2s·(s²/3 + s^4/5 + ...) in f32 (|s| <= 0.172, so that term is
    # below 1 % of the whole); times log2 e in two parts, plus e
    "p_log2_dd": """fn p_log2_dd(a: f32) -> vec2<f32> {
  let ef = p_log_split(a);
  let f = ef.y;
  let d = p_opaque(2.0 + f);  // (opaque: Mesa's NIR folds (2 + f) - 2 to f)
  let dl = f - p_opaque(d - 2.0);  // 2 + f = d + dl exactly
  let s = f / d;
  let sd = p_two_prod(s, d);
  let sl = (((f - sd.x) - sd.y) - s * dl) / d;
  let z = s * s;
  let c = z * (0.33333333 + z * (0.2 + z * (0.14285714 + z * (0.11111111 + z * (0.09090909 + z * (0.07692308 + z * 0.06666667))))));
  let lh = 2.0 * s;
  let ll = 2.0 * sl + lh * c;
  let p = p_two_prod(lh, 1.44269502);  // log2 e = 1.44269502 + 1.92596299e-8
  let pl = p.y + (lh * 1.92596299e-8 + ll * 1.44269502);
  let h = p_opaque(ef.x + p.x);  // e an integer, |p.x| < 1: e + p.x = h + (e - h) + p.x exactly
  let t = ((ef.x - h) + p.x) + pl;
  let hi = p_opaque(h + t);  // renormalised, |lo| <= ulp(hi) / 2 (pl held 2s·c: ~1 % of it)
  return vec2<f32>(hi, t - p_opaque(hi - h));
}""",
    # 2 ** (y·(l.x + l.y)) to ~1 ULP: w = y·l as a pair, 2^n·e^(r·ln 2) with n = round(w) and
    # |r| <= 1/2, the Taylor series of p_expf, 2^n from bits in two halves (subnormal results
    # rounded once)
    "p_exp2_dd": """fn p_exp2_dd(y: f32, l: vec2<f32>) -> f32 {
  if (l.x == 0.0) { return 1.0; }  // a = 1 (y may be too large to split)
  let w0 = y * l.x;
  if (w0 > 140.0) { return p_inf(); }
  if (w0 < -160.0) { return 0.0; }
  let w = p_two_prod(y, l.x);
  let wl = w.y + y * l.y;
  let n = round(w.x + wl);
  let r = ((w.x - n) + wl) * 0.693147182;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.166666672 + r * (0.0416666679 + r * (0.00833333377 + r * (0.00138888892 + r * 0.000198412701))))));
  if (n > 128.0) { return p_inf(); }
  if (n < -151.0) { return 0.0; }
  let ni = i32(n);
  let h = ni / 2;
  return p_opaque(p * bitcast<f32>(u32(h + 127) << 23u)) * bitcast<f32>(u32(ni - h + 127) << 23u);
}""",
    "p_powi": """fn p_powi(x: i32, y: i32) -> i32 {
  if (y < 0) { return select(0, select(-1, 1, (y & 1) == 0), x == -1) + select(0, 1, x == 1); }
  var b = x; var e = y; var r = 1;
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * b; } b = b * b; e = e >> 1u; }
  return r;
}""",
    # Python/PyTorch floor semantics from truncating division. The remainder is formed as
    # a - q*b and the sign test as (r ^ b) < 0: on the H200 through wgpu-native the spelling
    # `(a % b != 0) && ((a < 0) != (b < 0))` gave truncated results (-4 for -5 // ...).
    "p_floordiv_i": """fn p_floordiv_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let q = a / b;
  let r = a - q * b;
  return select(q, q - 1, r != 0 && (r ^ b) < 0);
}""",
    "p_mod_i": """fn p_mod_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  let r = a - (a / b) * b;
  return select(r, r + b, r != 0 && (r ^ b) < 0);
}""",
    # C's fmod on i32 (truncated remainder). Not WGSL's `%`: through wgpu-native on the H200
    # `a % b` with a negative operand came out as the unsigned remainder (fmod(5, -2) gave 5,
    # fmod(-1, 2) gave 1; 2026-12-01), where a - (a / b) * b is right; INT_MIN / -1 is INT_MIN
    # in WGSL, so that case gives 0, as C.
    "p_fmod_i": """fn p_fmod_i(a: i32, b: i32) -> i32 {
  if (b == 0) { return 0; }
  return a - (a / b) * b;
}""",
    # An identity the shader compiler cannot see through: v OR'ed with info's last word, which
    # the device keeps 0 (backend/device.py INFO_ZERO_WORD). NVIDIA's Vulkan compiler simplifies
    # float algebra as if it were exact: (a - (a + x)) + x came out 0, so compensated sums lost
    # their error terms, Dekker's residual vanished, x - n·hi - n·lo merged into x - n·(hi + lo)
    # and (0.5·h)·h became 0.5·(h·h), overflowing (H200, both implementations, 2026-12-01,
    # scripts/fp_probe.py). An error-free step passes its rounded value through p_opaque
    # before the cancellation that recovers the error.
    "p_opaque": f"""fn p_opaque(v: f32) -> f32 {{
  return bitcast<f32>(bitcast<u32>(v) | u32(info[{INFO_ZERO_WORD}]));
}}""",
    # Dekker's split of v into a high part of 12 bits and the rest (both exact)
    "p_split": """fn p_split(v: f32) -> vec2<f32> {
  let c = p_opaque(4097.0 * v);
  let h = p_opaque(c - p_opaque(c - v));
  return vec2<f32>(h, v - h);
}""",
    # x + y rounded to odd (Boldo & Melquiond): the nearest float, moved one ULP toward the exact
    # sum when that sum is not a float and the nearest is even; the error by TwoSum
    "p_add_odd": """fn p_add_odd(x: f32, y: f32) -> f32 {
  let z = p_opaque(x + y);
  let yv = p_opaque(z - x);
  let err = (x - p_opaque(z - yv)) + (y - yv);
  let u = bitcast<u32>(z);
  if (err == 0.0 || (u & 1u) == 1u || p_isinf(z)) { return z; }
  return bitcast<f32>(select(u - 1u, u + 1u, (err > 0.0) == (z > 0.0)));
}""",
    # a·b + c rounded once, as C's fma (which lavapipe's fma() is not): the exact product as
    # p + e (p_two_prod), c + p as th + tl (TwoSum), then th + RO(tl + e) (Boldo & Melquiond,
    # "Emulation of FMA and correctly rounded sums", 2008: exact for binary32 without underflow).
    # Non-finite operands or products, a zero product and factors the split could overflow:
    # the plain a·b + c (which is the fma's value for the first three).
    "p_fma": """fn p_fma(a: f32, b: f32, c: f32) -> f32 {
  let p = a * b;
  if (p == 0.0 || p_isinf(p) || p_isnan(p) || p_isinf(c) || p_isnan(c) || max(abs(a), abs(b)) > 1e30) {
    return p + c;
  }
  let pe = p_two_prod(a, b);
  let th = p_opaque(c + pe.x);
  let bv = p_opaque(th - c);
  let tl = (c - p_opaque(th - bv)) + (pe.x - bv);
  return th + p_add_odd(tl, pe.y);
}""",
    # (a + c) / n for a compensated sum (a, c) of n terms (a mean): a's quotient correctly
    # rounded, then the residual a - q·n (exact: Dekker's split of q and n, every partial
    # product exact) plus c, divided by n, added once. (a + c) / n rounded the sum before the
    # division, which WGSL lets be 2.5 ULP: the mean of 5 copies of one float came out 1 ULP
    # from it (lavapipe, 2026-12-06), an instance_norm of constant rows 3e-5 from 0. Sums past
    # 1e30 (where the split could overflow): the plain quotient; an inf or NaN sum: a / n alone.
    "p_cmean": """fn p_cmean(a: f32, c: f32, n: f32) -> f32 {
  if (p_isnan(a) || p_isinf(a)) { return p_divf(a, n); }  // (c is meaningless then: inf - inf)
  if (abs(a) > 1e30) { return p_divf(a + c, n); }
  let q = p_divf(a, n);
  let sq = p_split(q);
  let sn = p_split(n);
  let p = p_opaque(q * n);
  let e1 = p_opaque(sq.x * sn.x - p);
  let e2 = p_opaque(e1 + sq.x * sn.y);
  let e3 = p_opaque(e2 + sq.y * sn.x);
  let e = p_opaque(e3 + sq.y * sn.y);
  let r = p_opaque(p_opaque(a - p) - e) + c;
  return q + r / n;
}""",
    # a / b correctly rounded: WGSL allows 2.5 ULP for f32 division and NVIDIA's compiler uses
    # that (uint8 / uint8 came out 1 ULP off torch in 152 of 210 cases on the H200). One
    # residual step rounds to the nearest quotient: r = a - q·b exactly, by Dekker's split of q
    # and b into 12-bit halves (every partial product is exact, fused or not), not by fma(),
    # which lavapipe evaluates unfused (the fma form put lavapipe's exact quotients 1 ULP off);
    # every step through p_opaque, so no compiler folds r to a - a. The residual is taken on the
    # mantissas and the exponent put back by two power-of-two products, exact for any normal
    # result, so quotients near 3e38 or 1e-37 are rounded correctly too (not through WGSL's
    # frexp/ldexp: 1 / 0.01 came out 1.0 through them on lavapipe).
    "p_divf": """fn p_divf(a: f32, b: f32) -> f32 {
  let ea = (bitcast<u32>(a) >> 23u) & 0xffu;
  let eb = (bitcast<u32>(b) >> 23u) & 0xffu;
  // inf and NaN operands by IEEE's rules (the H200's inf / 3e38 was NaN: inf times a flushed
  // 1/b); zero and subnormal ones: the plain quotient
  if (ea == 255u || eb == 255u) {
    if (p_isnan(a) || p_isnan(b) || (ea == 255u && eb == 255u)) { return p_nan(); }
    let sign = (bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u;
    return bitcast<f32>(select(sign, sign | 0x7f800000u, ea == 255u));
  }
  if (ea == 0u || eb == 0u) { return a / b; }
  // the mantissas in [1, 2) (signs kept), their quotient in (1/2, 2): no part of the residual
  // overflows or underflows (the plain 3e38 / 3e38 came out 0 on the H200: a times 1/b, and
  // 1/b flushed to zero)
  let ma = bitcast<f32>((bitcast<u32>(a) & 0x807fffffu) | 0x3f800000u);
  let mb = bitcast<f32>((bitcast<u32>(b) & 0x807fffffu) | 0x3f800000u);
  let m = p_opaque(ma / mb);
  let sm = p_split(m);
  let sb = p_split(mb);
  let r1 = p_opaque(ma - sm.x * sb.x);
  let r2 = p_opaque(r1 - sm.x * sb.y);
  let r3 = p_opaque(r2 - sm.y * sb.x);
  let c = p_opaque(m + (r3 - sm.y * sb.y) / mb);
  // c·2^e: inf past the largest float; below the smallest normal the plain quotient (a
  // subnormal result, flushed by such GPUs anyway); else two exact power-of-two products
  let e = i32(ea) - i32(eb);
  let et = e + i32((bitcast<u32>(c) >> 23u) & 0xffu) - 127;
  if (et > 127) { return p_with_sign(p_inf(), (bitcast<u32>(c) >> 31u) == 1u); }
  if (et < -126) { return a / b; }
  let h = e / 2;
  return p_opaque(c * bitcast<f32>(u32(h + 127) << 23u)) * bitcast<f32>(u32(e - h + 127) << 23u);
}""",
    # float equality by the bits, NaN unequal and ±0 equal: a GPU that flushes subnormals (the
    # H200 through Vulkan) compared 1e-45 == 0 as true
    "p_feq": """fn p_feq(a: f32, b: f32) -> bool {
  let ua = bitcast<u32>(a); let ub = bitcast<u32>(b);
  if ((ua & 0x7fffffffu) > 0x7f800000u || (ub & 0x7fffffffu) > 0x7f800000u) { return false; }
  return ua == ub || ((ua | ub) & 0x7fffffffu) == 0u;
}""",
    # float order by the bits (the same flushing GPU said 1e-45 > 0 is false): a key whose
    # unsigned order is the floats' order, -0 made +0; NaN compares false
    "p_fkey": """fn p_fkey(x: f32) -> u32 {
  var u = bitcast<u32>(x);
  if (u == 0x80000000u) { u = 0u; }
  return select(u | 0x80000000u, ~u, (u >> 31u) == 1u);
}""",
    "p_flt": """fn p_flt(a: f32, b: f32) -> bool {
  if (p_isnan(a) || p_isnan(b)) { return false; }
  return p_fkey(a) < p_fkey(b);
}""",
    "p_fle": """fn p_fle(a: f32, b: f32) -> bool {
  if (p_isnan(a) || p_isnan(b)) { return false; }
  return p_fkey(a) <= p_fkey(b);
}""",
    "p_mod_f": """fn p_mod_f(a: f32, b: f32) -> f32 {
  return a - b * floor(a / b);
}""",
    "p_maxf": """fn p_maxf(a: f32, b: f32) -> f32 {
  if (p_isnan(a) || p_isnan(b)) { return p_nan(); }
  return max(a, b);
}""",
    "p_minf": """fn p_minf(a: f32, b: f32) -> f32 {
  if (p_isnan(a) || p_isnan(b)) { return p_nan(); }
  return min(a, b);
}""",
    "p_round": """fn p_round(x: f32) -> f32 {
  // ties to even, as PyTorch; a zero result keeps x's sign (round(-0.3) is -0.0)
  let f = floor(x);
  let d = x - f;
  var r = f;
  if (d > 0.5) { r = f + 1.0; } else if (d == 0.5) { r = select(f + 1.0, f, (f * 0.5) == floor(f * 0.5)); }
  if (r == 0.0) { return bitcast<f32>(bitcast<u32>(x) & 0x80000000u); }
  return r;
}""",
    # PyTorch's sign(NaN) is 0 (every comparison with NaN is false)
    # by the bits alone: on lavapipe the float-compare form gave -0.0 (not 0.0) for 0, -0.0 and
    # NaN, even through an integer select; ±1 takes x's sign bit, 0 / -0 / NaN give +0.0
    "p_signf": """fn p_signf(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  let a = u & 0x7fffffffu;
  return bitcast<f32>(select(0u, (u & 0x80000000u) | 0x3f800000u, a != 0u && a <= 0x7f800000u));
}""",
}
# more helpers (exact fmod, erfinv, lgamma, ...) live in kernels/mathlib.py
from .mathlib import HELPERS as _MATHLIB  # noqa: E402

HELPERS.update(_MATHLIB)
_HELPER_RE = re.compile(r"\b(p_[a-z0-9_]+)\s*\(")


def helpers_for(*exprs: str) -> str:
    """WGSL text of every helper the expressions call, with the helpers' own dependencies."""
    wanted: list[str] = []
    seen: set[str] = set()

    def visit(text):
        for name in _HELPER_RE.findall(text):
            if name in HELPERS and name not in seen:
                seen.add(name)
                visit(HELPERS[name])
                wanted.append(name)

    for e in exprs:
        visit(e)
    return "\n".join(HELPERS[n] for n in wanted) + ("\n" if wanted else "")
