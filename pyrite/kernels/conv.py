"""Convolution kernels over (N, C, D, H, W) views (1-D and 2-D convolutions run with D = H = 1):

- `im2col`: one invocation per element of a chunk of the column matrix
  cols[n, (c, kd, kh, kw), l] = x[n, c, od*sd - pd + kd*dd, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
  for column l = (od, oh, ow), 0 outside the input (zero padding without a padded copy). No
  loops. A convolution is then one batched GEMM (ops/conv.py) with the groups as a batch dim;
  F.unfold is this kernel alone. A chunk covers batches [n0, n0 + Nb) and columns
  [l0, l0 + Lc), so a large convolution's column matrix never has to fit one binding.
- `col2im`: one invocation per output element gathers the column entries that land on it:
  out[n, c, z] = Σ cols[n, (c, k), l] over kernel offsets k and blocks l with
  z = l*stride - pad + k*dil (per dim). This is F.fold, and the second half of a transposed
  convolution (cols = Wᵀ @ x, then col2im, the bias added here). It loops over the kernel
  offsets of one *tile* of the kernel box; a kernel box past the loop budget runs as several
  dispatches over its tiles, each adding into the output (`accumulate`). Where dilation is 1
  only every stride-th offset can land, so the loop steps by the stride.

Info words (i32), im2col:
  [0] elements  [1] C  [2] D  [3] H  [4] W  [5] KD  [6] KH  [7] KW  [8] OD  [9] OH  [10] OW
  [11..13] stride d,h,w  [14..16] padding  [17..19] dilation  [20] x offset
  [21..25] x strides n, c, d, h, w  [26] n0  [27] l0  [28] Lc
col2im (output (N, Co, D, H, W) contiguous; cols (Nb, g*Cc*K, L) read through strides):
  [0] outputs of this dispatch  [1] Cc  [2] D  [3] H  [4] W  [5] KD  [6] KH  [7] KW
  [8] BD  [9] BH  [10] BW (blocks)  [11..13] stride  [14..16] padding  [17..19] dilation
  [20] cols offset  [21] cols n-stride  [22] row stride  [23] column stride
  [24..29] tile kd0, kd1, kh0, kh1, kw0, kw1  [30] accumulate  [31] groups  [32] Cg (output
  channels a group)  [33] c0 (first channel of the chunk in its group)  [34] n0  [35] bias offset
  [36] bias stride  [37] Co  [38..40] loop step d, h, w
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, load, store

# Column-matrix elements an invocation of `im2col` writes, consecutive in memory, sharing one
# decoding of the flat index (its nine divisions dominate the kernel): as interp's, measured on
# the H200 at 4 (kernels/resample.py INTERP_PER_THREAD).
IM2COL_PER_THREAD = 4

_IM2COL_DECODE = (
    "r_ = g / info[28]; lc = g % info[28]; l = info[27] + lc;"
    " kw = r_ % info[7]; r_ = r_ / info[7]; kh = r_ % info[6]; r_ = r_ / info[6];"
    " kd = r_ % info[5]; r_ = r_ / info[5]; c = r_ % info[1]; n = info[26] + r_ / info[1];"
    " ow = l % info[10]; oh = (l / info[10]) % info[9]; od = l / (info[10] * info[9]);"
)


@lru_cache(maxsize=64)
def im2col(stype: str, per_thread: int = IM2COL_PER_THREAD) -> KernelSource:
    ct = "i32" if stype == "i32" else "f32"
    zero = "0" if ct == "i32" else "0.0"
    addr = "info[20] + n * info[21] + c * info[22] + z * info[23] + y * info[24] + x * info[25]"
    L = [
        FLAT_INDEX.format(wg=WG),
        f"  var g = gi * {per_thread};",
        "  if (g >= info[0]) { return; }",
        "  // g over (nb, c, kd, kh, kw, lc) of the chunk, row-major; column l = l0 + lc",
        "  var r_ = 0; var lc = 0; var l = 0; var kw = 0; var kh = 0; var kd = 0; var c = 0;",
        "  var n = 0; var ow = 0; var oh = 0; var od = 0;",
        f"  {_IM2COL_DECODE}",
    ]
    for k in range(per_thread):
        if k:
            L += [
                "  g = g + 1;",
                "  if (g >= info[0]) { return; }",
                "  lc = lc + 1; ow = ow + 1;",
                f"  if (lc == info[28]) {{ {_IM2COL_DECODE} }}",
                "  else if (ow == info[10]) {",
                "    ow = 0; oh = oh + 1;",
                "    if (oh == info[9]) { oh = 0; od = od + 1; }",
                "  }",
            ]
        L += [
            "  {",
            "    let z = od * info[11] - info[14] + kd * info[17];",
            "    let y = oh * info[12] - info[15] + kh * info[18];",
            "    let x = ow * info[13] - info[16] + kw * info[19];",
            f"    var v: {ct} = {zero};",
            "    if (z >= 0 && z < info[2] && y >= 0 && y < info[3] && x >= 0 && x < info[4]) {",
            f"      v = {load(f'xin[{addr}]', stype, ct)};",
            "    }",
            f"    cols[g] = {store('v', ct, stype)};",
            "  }",
        ]
    body = "\n".join(L) + "\n}\n"
    src = header([("xin", stype, "r"), ("cols", stype, "w")]) + ENTRY.format(wg=WG) + body
    return KernelSource(src, "rw")


def _dim_loop(
    k: str,
    r: str,
    k0: str,
    k1: str,
    step: str,
    s: str,
    dil: str,
    blocks: str,
    q: str,
    body: str,
    indent: str,
) -> str:
    """Loop over kernel offsets k of one dim landing on output coordinate r - pad: block
    q = (r - k*dil) / s must be whole and inside [0, blocks)."""
    i = indent
    return (
        f"{i}var {k} = {k0};\n"
        f"{i}if ({step} > 1) {{ {k} = {k0} + (({r} - {k0}) % {step} + {step}) % {step}; }}\n"
        f"{i}for (; {k} < {k1}; {k} = {k} + {step}) {{\n"
        f"{i}  let {q}_n = {r} - {k} * {dil};\n"
        f"{i}  if ({q}_n < 0) {{ break; }}\n"
        f"{i}  if ({q}_n % {s} != 0) {{ continue; }}\n"
        f"{i}  let {q} = {q}_n / {s};\n"
        f"{i}  if ({q} >= {blocks}) {{ continue; }}\n"
        f"{body}"
        f"{i}}}\n"
    )


@lru_cache(maxsize=64)
def col2im(stype: str, bias: bool, cols_type: str | None = None) -> KernelSource:
    """out (stype) = the column matrix folded back (+ bias); the columns may be stored in
    another type (f32 columns of an f16 output: the partial sums are rounded once, at the end)."""
    ct = "i32" if stype == "i32" else "f32"
    cols_type = cols_type or stype
    zero = "0" if ct == "i32" else "0.0"
    inner = (
        "        let l = (qd * info[9] + qh) * info[10] + qw;\n"
        "        let krow = (kd * info[6] + kh) * info[7] + kw;\n"
        f"        acc = acc + {load('cols[cbase + krow * info[22] + l * info[23]]', cols_type, ct)};\n"
    )
    loops = _dim_loop(
        "kd",
        "rd",
        "info[24]",
        "info[25]",
        "info[38]",
        "info[11]",
        "info[17]",
        "info[8]",
        "qd",
        _dim_loop(
            "kh",
            "rh",
            "info[26]",
            "info[27]",
            "info[39]",
            "info[12]",
            "info[18]",
            "info[9]",
            "qh",
            _dim_loop(
                "kw",
                "rw",
                "info[28]",
                "info[29]",
                "info[40]",
                "info[13]",
                "info[19]",
                "info[10]",
                "qw",
                inner,
                "      ",
            ),
            "    ",
        ),
        "  ",
    )
    first = f"{load('bias[info[35] + co * info[36]]', stype, ct)}" if bias else zero
    body = f"""{FLAT_INDEX.format(wg=WG)}  if (gi >= info[0]) {{ return; }}
  // gi over (nb, group, cc, od, oh, ow) of this dispatch's outputs, row-major
  let ow = gi % info[4]; let oh = (gi / info[4]) % info[3];
  var r = gi / (info[4] * info[3]);
  let od = r % info[2]; r = r / info[2];
  let cc = r % info[1]; r = r / info[1];
  let g = r % info[31]; let nb = r / info[31];
  let co = g * info[32] + info[33] + cc;
  let o = ((info[34] + nb) * info[37] + co) * (info[2] * info[3] * info[4])
        + (od * info[3] + oh) * info[4] + ow;
  let ksize = info[5] * info[6] * info[7];
  let cbase = info[20] + nb * info[21] + (g * info[1] + cc) * ksize * info[22];
  let rd = od + info[14]; let rh = oh + info[15]; let rw = ow + info[16];
  var acc: {ct} = {zero};
  if (info[30] != 0) {{ acc = {load("out[o]", stype, ct)}; }} else {{ acc = {first}; }}
{loops}  out[o] = {store("acc", ct, stype)};
}}
"""
    bufs = [("cols", cols_type, "r"), ("out", stype, "w")]
    if bias:
        bufs.append(("bias", stype, "r"))
    src = header(bufs) + ENTRY.format(wg=WG) + body
    return KernelSource(src, "".join(m for _, _, m in bufs))
