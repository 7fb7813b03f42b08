"""Fused fast paths of LLaMA- and LFM2-style models: the rotary embedding and the causal
depthwise conv1d, one dispatch each (nn/_fastpaths.py validates, allocates and dispatches).

Rotary (flash-attn's `apply_rotary`): x (batch, seqlen, nheads, headdim) through its strides,
cos/sin (seqlen_ro, rotary_dim / 2). One invocation a rotated pair of a head, plus one a
passed-through element past rotary_dim (none when written in place: those stay as they are),
so a head has U = headdim - rotary_dim / 2 invocations and the kernel has no loop:

    pair u (half = rotary_dim / 2): i0, i1 = (u, u + half), or (2u, 2u + 1) interleaved
    row r = t + offset[b]: c, s = cos[r, u], sign·sin[r, u]  (c, s = 1, 0 past seqlen_ro,
                                                             as flash-attn's masked loads)
    out[i0] = x[i0]·c - x[i1]·s;  out[i1] = x[i0]·s + x[i1]·c

sign is -1 for the conjugate rotation (the gradient). Varlen (cu_seqlens): x (total, nheads,
headdim), batch b's rows cu[b] .. cu[b+1], t < max_seqlen.

Rotary info words (i32):
  [0] invocations N  [1] U  [2] nheads  [3] seqlen (max_seqlen when varlen)  [4] half
  [5] seqlen_ro  [6..10] x offset, batch, seq, head, dim strides  [11..15] the same for out
  [16..18] cos offset, row, column strides  [19..21] sin's  [22] the int offset, or the offsets
  tensor's offset  [23] offsets stride  [24] sign (f32 bits)  [25] cu offset  [26] cu stride

Causal conv1d (the causal-conv1d package's `causal_conv1d_fn`): x (batch, dim, seqlen) through
its strides, weight (dim, width), bias (dim,); width is baked into the kernel (its loops have
compile-time bounds of width or width² iterations: the op checks them against the loop budget).

    z[b, d, t] = bias[d] + Σ_{k<W} w[d, k]·x[b, d, t - (W - 1) + k]   (x = 0 before t = 0)
    out = z, or silu(z) = z·σ(z)

Backward, gz = g·act'(z) (z recomputed: W loads, no saved pre-activation):
  dx kernel   dx[b, d, t] = Σ_k w[d, k]·gz[b, d, t + W - 1 - k]   (terms inside [0, T))
  dw kernel   one workgroup of CONV_WG a (d, chunk of the flat (b, t) range): partial sums of
              gz·x[t - (W - 1) + k] (k < W) and of gz (k = W, the bias) in registers, one tree;
              written to part[chunk]: gw (D, W) row-major at d·W + k, then gb at D·W + d (the
              op sums over chunks when there are several).

Conv info words (i32):
  [0] N (forward, dx: B·D·T; dw: chunk elements)  [1] D  [2] T  [3..6] x offset, batch, dim,
  time strides  [7..10] out's (dx: gx's)  [11..13] w offset, d, k strides  [14] bias offset
  [15] bias stride  [16..19] g offset, batch, dim, time strides  [20] B·T  [21] chunks
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load, store, trusted

ROTARY_INFO_WORDS = 27
ROTARY3D_INFO_WORDS = 35  # then [27..29] the grid T, H, W  [30] s1  [31] s1 + s2  [32..34] offsets
CONV_INFO_WORDS = 22
CONV_WG = 64  # the dw kernel's workgroup: its tree holds CONV_WG·(W + 1) floats
MAX_SHARED_FLOATS = 4096  # 16 KiB: WebGPU's default maxComputeWorkgroupStorageSize


def _f(e: str, t: str) -> str:
    return load(e, t, "f32")


@lru_cache(maxsize=128)
def rotary_kernel(
    x_type: str,
    cos_type: str,
    sin_type: str,
    out_type: str,
    interleaved: bool,
    inplace: bool,
    offsets_tensor: bool,
    varlen: bool,
    grid3d: bool = False,
) -> KernelSource:
    """WGSL for the rotary embedding (the module docstring). `inplace`: x is the output
    binding itself (WebGPU forbids one buffer bound read-only and writable in one dispatch).
    `grid3d`: the 3-D rotary embedding of video models (ROTARY3D_INFO_WORDS: the token's (time,
    height, width) position picks the row of cos/sin for its section of pairs)."""
    buffers = []
    if not inplace:
        buffers.append(("x", x_type, "r"))
    buffers += [("cs", cos_type, "r"), ("sn", sin_type, "r")]
    if offsets_tensor:
        buffers.append(("offs", "i32", "r"))
    if varlen:
        buffers.append(("cu", "i32", "r"))
    buffers.append(("out", out_type, "w"))
    xa = "out" if inplace else "x"
    b = [
        FLAT_INDEX.format(wg=WG),
        "  if (gi >= info[0]) { return; }\n",
        "  let U = info[1];\n  let H = info[2];\n  let T = info[3];\n  let half = info[4];\n",
        "  let u = gi % U;\n  var r = gi / U;\n  let h = r % H;\n  r = r / H;\n",
        "  let t = r % T;\n  let bi = r / T;\n",
    ]
    if varlen:
        b += [
            "  let start = cu[info[25] + bi * info[26]];\n",
            "  if (t >= cu[info[25] + (bi + 1) * info[26]] - start) { return; }\n",
            "  let xb = info[6] + (start + t) * info[8] + h * info[9];\n",
            "  let ob = info[11] + (start + t) * info[13] + h * info[14];\n",
        ]
    else:
        b += [
            "  let xb = info[6] + bi * info[7] + t * info[8] + h * info[9];\n",
            "  let ob = info[11] + bi * info[12] + t * info[13] + h * info[14];\n",
        ]
    b.append("  let sd = info[10];\n  let od = info[15];\n")
    off = "offs[info[22] + bi * info[23]]" if offsets_tensor else "info[22]"
    if interleaved:
        idx = "  let i0 = 2 * u;\n  let i1 = 2 * u + 1;\n"
    else:
        idx = "  let i0 = u;\n  let i1 = u + half;\n"
    if grid3d:  # t = (ti·GH + hi)·GW + wi; pairs [0, s1) by ti, [s1, s2) by hi, then by wi
        row = (
            "    let gt = info[27];\n    let gh = info[28];\n    let gw = info[29];\n"
            "    let wi = t % gw;\n    let hi = (t / gw) % gh;\n    let ti = t / (gw * gh);\n"
            "    var rc = select(select(wi + info[34], hi + info[33], u < info[31]), "
            "ti + info[32], u < info[30]);\n"
            "    if (t >= gt * gh * gw) { rc = -1; }\n"  # (tokens past the grid: unrotated)
        )
    else:
        row = f"    let rc = t + {off};\n"
    b += [
        "  if (u < half) {\n",
        row,
        "    var c = 1.0;\n    var s = 0.0;\n",
        "    if (rc >= 0 && rc < info[5]) {\n",
        f"      c = {_f('cs[info[16] + rc * info[17] + u * info[18]]', cos_type)};\n",
        f"      s = {_f('sn[info[19] + rc * info[20] + u * info[21]]', sin_type)}"
        " * bitcast<f32>(info[24]);\n",
        "    }\n",
        "  " + idx.replace("\n  ", "\n    "),
        f"    let x0 = {_f(f'{xa}[xb + i0 * sd]', x_type)};\n",
        f"    let x1 = {_f(f'{xa}[xb + i1 * sd]', x_type)};\n",
        f"    out[ob + i0 * od] = {store('x0 * c - x1 * s', 'f32', out_type)};\n",
        f"    out[ob + i1 * od] = {store('x0 * s + x1 * c', 'f32', out_type)};\n",
        "  }\n",
    ]
    if not inplace:  # the head's tail past rotary_dim, copied
        b += [
            "  else {\n    let e = u + half;\n",
            f"    out[ob + e * od] = {store(_f('x[xb + e * sd]', x_type), 'f32', out_type)};\n",
            "  }\n",
        ]
    text = "".join(b)
    src = header(buffers) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


def _act(activation: bool) -> str:
    return "z * (1.0 / (1.0 + exp(-z)))" if activation else "z"


def _z_at(w_type: str, x_type: str, b_type, width: int, tt: str, var: str) -> str:
    """WGSL computing the pre-activation z at time `tt` of row base `xb` into `var`."""
    bias = _f("bs[info[14] + d * info[15]]", b_type) if b_type else "0.0"
    return (
        f"    var {var} = {bias};\n"
        f"    for (var k = 0; k < {width}; k++) {{\n"
        f"      let tx = {tt} - {width - 1} + k;\n"
        "      if (tx >= 0) {\n"
        f"        {var} += {_f('w[info[11] + d * info[12] + k * info[13]]', w_type)}"
        f" * {_f('x[xb + tx * info[6]]', x_type)};\n"
        "      }\n"
        "    }\n"
    )


def conv_loop_iterations(kind: str, width: int, activation: bool, per_invocation: int = 1):
    """Loop iterations of one invocation, each loop's exit test included (lavapipe counts it):
    `kind` "fwd" (W), "dx" (W, times W + 1 with an activation), "dw" (`per_invocation`
    elements of W + 1, plus W with an activation, and the tree's log2(CONV_WG) steps of W + 1)."""
    w1 = width + 1
    if kind == "fwd":
        return w1
    if kind == "dx":
        return w1 * (w1 + 1) if activation else w1
    per = 1 + w1 + (w1 if activation else 0)
    return per_invocation * per + 2 + (CONV_WG.bit_length() + 3) * (w1 + 1)


@lru_cache(maxsize=128)
def conv_kernel(
    x_type: str,
    w_type: str,
    b_type: str | None,
    out_type: str,
    width: int,
    activation: bool,
    d_fastest: bool,
) -> KernelSource:
    """WGSL for the causal depthwise conv1d forward, one invocation an output element.
    `d_fastest`: consecutive invocations walk channels (a channels-last x), else time."""
    buffers = [("x", x_type, "r"), ("w", w_type, "r")]
    if b_type:
        buffers.append(("bs", b_type, "r"))
    buffers.append(("out", out_type, "w"))
    b = [FLAT_INDEX.format(wg=WG), "  if (gi >= info[0]) { return; }\n", *_decode(d_fastest)]
    b += [
        "  let xb = info[3] + bi * info[4] + d * info[5];\n",
        _z_at(w_type, x_type, b_type, width, "t", "z").replace("\n    ", "\n  ")[2:],
        f"  out[info[7] + bi * info[8] + d * info[9] + t * info[10]] = "
        f"{store(_act(activation), 'f32', out_type)};\n",
    ]
    text = "".join(b)
    src = header(buffers) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


def _decode(d_fastest: bool) -> list:
    if d_fastest:
        return [
            "  let D = info[1];\n  let T = info[2];\n",
            "  let d = gi % D;\n  let t = (gi / D) % T;\n  let bi = gi / (D * T);\n",
        ]
    return [
        "  let D = info[1];\n  let T = info[2];\n",
        "  let t = gi % T;\n  let d = (gi / T) % D;\n  let bi = gi / (D * T);\n",
    ]


def _gz(g_type: str, activation: bool, tt: str, z: str) -> str:
    """gz at time `tt` (row base gb): g, times silu'(z) = σ(z)·(1 + z·(1 - σ(z)))."""
    g = _f(f"g[gb + {tt} * info[19]]", g_type)
    if not activation:
        return g
    return f"({g} * p_dsilu({z}))"


_DSILU = (
    "fn p_dsilu(z: f32) -> f32 {\n"
    "  let s = 1.0 / (1.0 + exp(-z));\n"
    "  return s * (1.0 + z * (1.0 - s));\n"
    "}\n"
)


@lru_cache(maxsize=128)
def conv_dx_kernel(
    x_type: str,
    w_type: str,
    b_type: str | None,
    g_type: str,
    out_type: str,
    width: int,
    activation: bool,
    d_fastest: bool,
) -> KernelSource:
    """WGSL for the input gradient of the causal conv1d, one invocation an element of dx."""
    buffers = [("x", x_type, "r"), ("w", w_type, "r")]
    if b_type:
        buffers.append(("bs", b_type, "r"))
    buffers += [("g", g_type, "r"), ("out", out_type, "w")]
    b = [FLAT_INDEX.format(wg=WG), "  if (gi >= info[0]) { return; }\n", *_decode(d_fastest)]
    b += [
        "  let xb = info[3] + bi * info[4] + d * info[5];\n",
        "  let gb = info[16] + bi * info[17] + d * info[18];\n",
        "  var acc = 0.0;\n",
        f"  for (var j = 0; j < {width}; j++) {{\n",
        f"    let tz = t + {width - 1} - j;\n",
        "    if (tz < T) {\n",
    ]
    if activation:
        b.append(_z_at(w_type, x_type, b_type, width, "tz", "z").replace("\n    ", "\n      "))
    b += [
        f"      acc += {_f('w[info[11] + d * info[12] + j * info[13]]', w_type)}"
        f" * {_gz(g_type, activation, 'tz', 'z')};\n",
        "    }\n  }\n",
        f"  out[info[7] + bi * info[8] + d * info[9] + t * info[10]] = "
        f"{store('acc', 'f32', out_type)};\n",
    ]
    text = "".join(b)
    src = (
        header(buffers)
        + helpers_for(text)
        + (_DSILU if activation else "")
        + ENTRY.format(wg=WG)
        + text
        + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


@lru_cache(maxsize=128)
def conv_dw_kernel(
    x_type: str,
    w_type: str,
    b_type: str | None,
    g_type: str,
    width: int,
    activation: bool,
) -> KernelSource:
    """WGSL for the weight and bias gradients of the causal conv1d: one workgroup of CONV_WG
    a (channel d, chunk of info[0] elements of the flat (b, t) range); writes f32 partial sums
    to part[chunk·D·(W + 1) + a], a = d·W + k (the weight's, k < W) or D·W + d (the bias's)."""
    w1 = width + 1
    buffers = [("x", x_type, "r"), ("w", w_type, "r")]
    if b_type:
        buffers.append(("bs", b_type, "r"))
    buffers += [("g", g_type, "r"), ("part", "f32", "w")]
    b = [
        "  let wgi = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);\n",
        "  let D = info[1];\n  let T = info[2];\n",
        "  if (wgi >= D * info[21]) { return; }\n",  # uniform: the whole group leaves
        "  let d = wgi % D;\n  let chunk = wgi / D;\n",
        "  let m0 = chunk * info[0];\n  let m1 = min(m0 + info[0], info[20]);\n",
        f"  var acc: array<f32, {w1}>;\n",
        f"  for (var m = m0 + i32(lid.x); m < m1; m += {CONV_WG}) {{\n",
        "    let t = m % T;\n    let bi = m / T;\n",
        "    let xb = info[3] + bi * info[4] + d * info[5];\n",
        "    let gb = info[16] + bi * info[17] + d * info[18];\n",
    ]
    if activation:
        b.append(_z_at(w_type, x_type, b_type, width, "t", "z"))
    b += [
        f"    let gz = {_gz(g_type, activation, 't', 'z')};\n",
        f"    for (var k = 0; k < {width}; k++) {{\n",
        f"      let tx = t - {width - 1} + k;\n",
        f"      if (tx >= 0) {{ acc[k] += gz * {_f('x[xb + tx * info[6]]', x_type)}; }}\n",
        "    }\n",
        f"    acc[{width}] += gz;\n",
        "  }\n",
        f"  for (var k = 0; k < {w1}; k++) {{ sh[k * {CONV_WG} + i32(lid.x)] = acc[k]; }}\n",
        f"  var half = {CONV_WG // 2}u;\n",
        "  loop {\n",
        "    workgroupBarrier();\n",
        "    if (half == 0u) { break; }\n",
        "    if (lid.x < half) {\n",
        f"      for (var k = 0; k < {w1}; k++) {{\n",
        f"        let a = k * {CONV_WG} + i32(lid.x);\n",
        "        sh[a] = sh[a] + sh[a + i32(half)];\n",
        "      }\n",
        "    }\n",
        "    half = half >> 1u;\n",
        "  }\n",
        f"  if (lid.x == 0u) {{\n    for (var k = 0; k < {w1}; k++) {{\n",
        f"      let a = select(d * {width} + k, D * {width} + d, k == {width});\n",
        f"      part[chunk * D * {w1} + a] = sh[k * {CONV_WG}];\n",
        "    }\n  }\n",
    ]
    text = "".join(b)
    entry = ENTRY.format(wg=CONV_WG)
    shared = f"var<workgroup> sh: array<f32, {CONV_WG * w1}>;\n"
    src = (
        header(buffers)
        + helpers_for(text)
        + (_DSILU if activation else "")
        + shared
        + entry
        + text
        + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))
