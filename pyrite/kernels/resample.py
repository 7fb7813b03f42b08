"""Resampling kernels over (N, C, D, H, W) views read through their strides. None of them loops
over the input: each invocation computes one output from a fixed number of taps, unrolled here
(the loop budget does not arise), except `aa_pass` and `grid_sample`, whose loops the ops bound.

- `interp`: F.interpolate's nearest, nearest-exact, linear (1-3 dims: linear, bilinear,
  trilinear) and cubic modes, one invocation per output. The source index and the weights are
  computed in f32 exactly as PyTorch's CPU kernels compute them (UpSample.h): scale = 1/scale_factor
  when one was given, else in/out (or (in-1)/(out-1) with align_corners), passed as f32 bits so the
  host rounds it as C++ does; nearest: min(floor(o*scale), in-1), and where info[11] asks (PyTorch
  2.13's 2-D kernel, not its 1-D or 3-D ones, measured) the shortcuts o for out = in and o >> 1
  for out = 2*in, which differ from the formula when a scale_factor was given; linear: src = max(scale*(o+0.5)-0.5, 0), taps floor(src) and the next one
  (clamped), lambda clamped to [0, 1]; cubic: Keys' kernel with A = -0.75 over taps floor(src)-1
  .. +2 clamped to the input. Taps are summed innermost dim first, as PyTorch.
- `aa_pass`: one dim of antialiased resampling (bilinear/bicubic/lanczos with antialias=True):
  out[b, i, k] = Σ_j w[i, j] * x[b, xmin_i + j, k], the weights and windows precomputed on the
  host (ops/resample.py, as PyTorch precomputes them). The op runs the dims one after another and
  splits a window past the loop budget into several dispatches that add into the output.
- `aa_pass_u8`: aa_pass for uint8 images in PyTorch's fixed point (int16 weights, an i32
  sum, rounded and clamped to [0, 255] after each pass).
- `gather_pass`: one dim of interpolate's backward, aa_pass's transpose: out[b, l, k] =
  Σ_j w[l, j] * g[b, t[l, j], k] over the outputs t whose taps read input l (tables from the
  op), so a non-finite g reaches only those inputs; split past the loop budget as aa_pass.
- `grid_sample`: one invocation per (n, block of channels, output point): the grid is read and
  the weights computed once, then a loop over the block's channels (the op keeps the block under
  the loop budget) gathers the taps; bilinear, nearest (round half to even, as nearbyint) and
  bicubic (2-D only, as PyTorch) with padding zeros, border or reflection.

Info words (i32), interp:
  [0] outputs  [1] C  [2..4] in D, H, W  [5..7] out D, H, W  [8..10] scale (f32 bits) d, h, w
  [11] align_corners (linear, cubic) or nearest's shortcuts  [12] x offset  [13..17] x strides n, c, d, h, w
aa_pass (tab: [xmin(Lout)] [xsize(Lout)] [weights (Lout, maxk), f32 bits]) and gather_pass
(tab: [n (Lout)] [t (Lout, maxk)] [weights (Lout, maxk), f32 bits]):
  [0] outputs  [1] Lout  [2] inner  [3] maxk  [4] j0  [5] j1  [6] accumulate  [7] x offset
  [8..10] x strides b, l, inner; aa_pass_u8 also [11] weight fraction bits  [12] last chunk
grid_sample:
  [0] units  [1] C  [2] channels a block  [3] blocks  [4..6] in D, H, W  [7..9] out D, H, W
  [10] align_corners  [11] x offset  [12..16] x strides n, c, d, h, w  [17] grid offset
  [18..22] grid strides n, d, h, w, coordinate
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load, store

_NAMES = ("d", "h", "w")  # info slots: in size 2+i, out size 5+i, scale 8+i, x stride 15+i

# Keys' cubic convolution, PyTorch's cubic_convolution1 (|x| <= 1) and 2 (1 < |x| < 2)
CUBIC = """fn cubic1(x: f32, A: f32) -> f32 { return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0; }
fn cubic2(x: f32, A: f32) -> f32 { return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A; }
fn cubic_w(t: f32) -> vec4<f32> {
  let A = -0.75;
  return vec4<f32>(cubic2(t + 1.0, A), cubic1(t, A), cubic1(1.0 - t, A), cubic2(2.0 - t, A));
}
"""


def _index_lines(mode: str, name: str, k: int) -> list[str]:
    """WGSL computing dim `name`'s taps (i{name}{j}) and weights (l{name}{j})."""
    i_sz, o_sz, sc = f"info[{2 + k}]", f"info[{5 + k}]", f"bitcast<f32>(info[{8 + k}])"
    o = f"o{name}"
    if mode == "nearest":
        return [
            f"  var i{name}0 = min(i32(floor(f32({o}) * {sc})), {i_sz} - 1);",
            f"  if (info[11] != 0 && {o_sz} == {i_sz}) {{ i{name}0 = {o}; }}",
            f"  if (info[11] != 0 && {o_sz} == 2 * {i_sz}) {{ i{name}0 = {o} >> 1u; }}",
        ]
    if mode == "nearest-exact":
        return [f"  let i{name}0 = min(i32(floor((f32({o}) + 0.5) * {sc})), {i_sz} - 1);"]
    if mode == "linear":
        return [
            f"  var i{name}0 = {o}; var i{name}1 = {o}; var l{name}1 = 0.0;",
            f"  if ({o_sz} != {i_sz}) {{",
            f"    var src = {sc} * f32({o});",
            f"    if (info[11] == 0) {{ src = max({sc} * (f32({o}) + 0.5) - 0.5, 0.0); }}",
            f"    i{name}0 = min(i32(floor(src)), {i_sz} - 1);",
            f"    l{name}1 = min(max(src - f32(i{name}0), 0.0), 1.0);",
            f"    i{name}1 = i{name}0 + select(0, 1, i{name}0 < {i_sz} - 1);",
            "  }",
            f"  let l{name}0 = 1.0 - l{name}1;",
        ]
    # cubic
    lines = [
        f"  var src_{name} = {sc} * f32({o});",
        f"  if (info[11] == 0) {{ src_{name} = {sc} * (f32({o}) + 0.5) - 0.5; }}",
        f"  let f{name} = min(i32(floor(src_{name})), {i_sz} - 1);",
        f"  let c{name} = cubic_w(min(max(src_{name} - f32(f{name}), 0.0), 1.0));",
    ]
    for j in range(4):
        lines.append(f"  let i{name}{j} = clamp(f{name} + {j - 1}, 0, {i_sz} - 1);")
        lines.append(f"  let l{name}{j} = c{name}[{j}];")
    return lines


def _combine(names: tuple, taps: int, stype: str, prefix: str = "") -> str:
    """Σ over taps of the dims in `names` (outermost first) of weight · x, innermost first."""
    if not names:
        return load(f"xin[base{prefix}]", stype, "f32")
    n, rest = names[0], names[1:]
    terms = []
    for j in range(taps):
        inner = _combine(rest, taps, stype, f"{prefix} + q{n}{j}")
        terms.append(f"l{n}{j} * ({inner})" if taps > 1 else inner)
    return " + ".join(terms)


# Outputs an invocation of `interp` computes, consecutive in memory: they share one decoding
# of the flat index (its divisions cost more than the rest of the kernel). H200, nearest 2x of
# (8, 320, 64, 64) f32 through Dawn: one an invocation 0.31 ms, four 0.19 ms, the same kernel
# with its sizes baked in as constants 0.17 ms (a 2-D grid, ow from the x dimension, 0.36 ms).
INTERP_PER_THREAD = 4


def _decode_vars(var: str, names: tuple, first: bool) -> list[str]:
    """(Re)assign ow, oh, od, n, c from flat output index `var` (info[5..7] sizes, info[1] C)."""
    osize = {"d": "info[5]", "h": "info[6]", "w": "info[7]"}
    kw = "var " if first else ""
    L = [f"{'var ' if first else ''}r_ = {var};"]
    for name in reversed(names):
        L.append(f"{kw}o{name} = r_ % {osize[name]}; r_ = r_ / {osize[name]};")
    L.append(f"{kw}n = r_ / info[1]; {kw}c = r_ - n * info[1];")
    return L


@lru_cache(maxsize=64)
def interp(mode: str, rank: int, stype: str, per_thread: int = INTERP_PER_THREAD) -> KernelSource:
    """mode: "nearest", "nearest-exact", "linear", "cubic"; rank: spatial dims (1-3). Each
    invocation computes `per_thread` consecutive outputs."""
    names = _NAMES[3 - rank :]
    taps = {"nearest": 1, "nearest-exact": 1, "linear": 2, "cubic": 4}[mode]
    pt = per_thread
    L = [
        FLAT_INDEX.format(wg=WG),
        f"  let g0 = gi * {pt};",
        "  if (g0 >= info[0]) { return; }",
        *(f"  {line}" for line in _decode_vars("g0", names, True)),
    ]
    for name in _NAMES:
        if name not in names:
            L.append(f"  let o{name} = 0;")
    val = _combine(names, taps, stype)
    inner = []
    for name in names:
        k = _NAMES.index(name)
        inner += _index_lines(mode, name, k)
        for j in range(taps):
            inner.append(f"  let q{name}{j} = i{name}{j} * info[{15 + k}];")
    for k in range(pt):
        if k:
            last = names[-1]
            L += [
                f"  if (g0 + {k} >= info[0]) {{ return; }}",
                f"  o{last} = o{last} + 1;",
                f"  if (o{last} == info[7]) {{ "
                + " ".join(_decode_vars(f"g0 + {k}", names, False))
                + " }",
            ]
        L += [
            "  {",
            f"  let g = g0 + {k};",
            "  let base = info[12] + n * info[13] + c * info[14];",
            *(f"  {line}" for line in inner),
            f"  out[g] = {store(val, 'f32', stype)};",
            "  }",
        ]
    body = "\n".join(L) + "\n}\n"
    bufs = [("xin", stype, "r"), ("out", stype, "w")]
    fns = CUBIC if mode == "cubic" else ""
    src = header(bufs) + fns + ENTRY.format(wg=WG) + body
    return KernelSource(src, "rw")


@lru_cache(maxsize=16)
def aa_pass(stype: str) -> KernelSource:
    """One antialiased 1-D pass; the output is f32 (the op narrows once at the end)."""
    body = f"""{FLAT_INDEX.format(wg=WG)}  if (gi >= info[0]) {{ return; }}
  let k = gi % info[2]; let i = (gi / info[2]) % info[1]; let b = gi / (info[2] * info[1]);
  let xmin = tab[i]; let j1 = min(info[5], tab[info[1] + i]);
  let wrow = 2 * info[1] + i * info[3];
  let row = info[7] + b * info[8] + k * info[10];
  var acc = 0.0;
  if (info[6] != 0) {{ acc = out[gi]; }}
  for (var j = info[4]; j < j1; j = j + 1) {{
    acc = acc + bitcast<f32>(tab[wrow + j]) * {load("xin[row + (xmin + j) * info[9]]", stype, "f32")};
  }}
  out[gi] = acc;
}}
"""
    bufs = [("xin", stype, "r"), ("tab", "i32", "r"), ("out", "f32", "w")]
    return KernelSource(header(bufs) + ENTRY.format(wg=WG) + body, "rrw")


@lru_cache(maxsize=4)
def aa_pass_u8(stype: str) -> KernelSource:
    """One pass of a uint8 image's bilinear / bicubic / lanczos resize as PyTorch's CPU computes
    it (UpSampleKernel.cpp `basic_loop_aa_horizontal<uint8_t>`, the AVX2 kernels alike): int16
    weights with info[11] fraction bits (table as aa_pass's, the weights integers), an i32 sum
    that starts at half a unit, and in the window's last chunk (info[12]) clamp(sum >> bits, 0,
    255). Earlier chunks leave the raw sum in `out` for the next to add to."""
    body = f"""{FLAT_INDEX.format(wg=WG)}  if (gi >= info[0]) {{ return; }}
  let k = gi % info[2]; let i = (gi / info[2]) % info[1]; let b = gi / (info[2] * info[1]);
  let xmin = tab[i]; let j1 = min(info[5], tab[info[1] + i]);
  let wrow = 2 * info[1] + i * info[3];
  let row = info[7] + b * info[8] + k * info[10];
  var acc = 1 << u32(info[11] - 1);
  if (info[6] != 0) {{ acc = out[gi]; }}
  for (var j = info[4]; j < j1; j = j + 1) {{
    acc = acc + tab[wrow + j] * {load("xin[row + (xmin + j) * info[9]]", stype, "i32")};
  }}
  if (info[12] != 0) {{ acc = clamp(acc >> u32(info[11]), 0, 255); }}
  out[gi] = acc;
}}
"""
    bufs = [("xin", stype, "r"), ("tab", "i32", "r"), ("out", "i32", "w")]
    return KernelSource(header(bufs) + ENTRY.format(wg=WG) + body, "rrw")


@lru_cache(maxsize=16)
def gather_pass(stype: str) -> KernelSource:
    """One axis of interpolate's backward, the transpose of a resampling: out[b, l, k] =
    Σ_{j < n_l} w[l, j] * x[b, t[l, j], k], each input position l gathering the outputs t that
    read it (a term per tap, repeats included). Same info words as `aa_pass`; the table is
    [n (Lout)] [t (Lout, maxk)] [w (Lout, maxk), f32 bits]. The output is f32."""
    body = f"""{FLAT_INDEX.format(wg=WG)}  if (gi >= info[0]) {{ return; }}
  let k = gi % info[2]; let l = (gi / info[2]) % info[1]; let b = gi / (info[2] * info[1]);
  let j1 = min(info[5], tab[l]);
  let trow = info[1] + l * info[3];
  let wrow = info[1] + info[1] * info[3] + l * info[3];
  let row = info[7] + b * info[8] + k * info[10];
  var acc = 0.0;
  if (info[6] != 0) {{ acc = out[gi]; }}
  for (var j = info[4]; j < j1; j = j + 1) {{
    acc = acc + bitcast<f32>(tab[wrow + j]) * {load("xin[row + tab[trow + j] * info[9]]", stype, "f32")};
  }}
  out[gi] = acc;
}}
"""
    bufs = [("xin", stype, "r"), ("tab", "i32", "r"), ("out", "f32", "w")]
    return KernelSource(header(bufs) + ENTRY.format(wg=WG) + body, "rrw")


# ---- grid_sample -------------------------------------------------------------------------------
# PyTorch's GridSampler.h: unnormalize, then (bilinear, nearest) the padding mode's clip or
# reflection, then coordinates outside int range become -100 (out of bounds).
GS_HELPERS = """fn gs_unnorm(c: f32, size: i32, align: bool) -> f32 {
  if (align) { return (c + 1.0) / 2.0 * f32(size - 1); }
  return ((c + 1.0) * f32(size) - 1.0) / 2.0;
}
fn gs_clip(c: f32, size: i32) -> f32 { return min(f32(size - 1), max(c, 0.0)); }
fn gs_reflect(c: f32, twice_low: i32, twice_high: i32) -> f32 {
  if (twice_low == twice_high) { return 0.0; }
  let mn = f32(twice_low) / 2.0;
  let span = f32(twice_high - twice_low) / 2.0;
  let a = abs(c - mn);
  let extra = a % span;
  let flips = floor(a / span);
  if (flips % 2.0 == 0.0) { return extra + mn; }
  return span - extra + mn;
}
fn gs_safe(c: f32) -> f32 {
  if (!(c > -2147483648.0 && c < 2147483647.0)) { return -100.0; }
  return c;
}
"""


def _gs_pad(c: str, size: str, padding: str) -> str:
    if padding == "border":
        return f"gs_safe(gs_clip({c}, {size}))"
    if padding == "reflection":
        refl = (
            f"select(gs_reflect({c}, -1, 2 * {size} - 1), gs_reflect({c}, 0, 2 * ({size} - 1)), "
            "align)"
        )
        return f"gs_safe(gs_clip({refl}, {size}))"
    return f"gs_safe({c})"


@lru_cache(maxsize=64)
def grid_sample(mode: str, padding: str, rank: int, stype: str) -> KernelSource:
    """mode: "bilinear", "nearest", "bicubic" (rank 2 only); padding: "zeros", "border",
    "reflection"; rank: spatial dims (2 or 3)."""
    names = ("w", "h", "d")[:rank]  # grid coordinate j samples dim names[j]
    sizes = {"d": "info[4]", "h": "info[5]", "w": "info[6]"}
    xs = {"d": "info[14]", "h": "info[15]", "w": "info[16]"}
    L = [
        FLAT_INDEX.format(wg=WG),
        "  if (gi >= info[0]) { return; }",
        "  let S = info[7] * info[8] * info[9];",
        "  let s = gi % S; let cb = (gi / S) % info[3]; let n = gi / (S * info[3]);",
        "  let ow = s % info[9]; let oh = (s / info[9]) % info[8]; let od = s / (info[9] * info[8]);",
        "  let align = info[10] != 0;",
        "  let gp = info[17] + n * info[18] + od * info[19] + oh * info[20] + ow * info[21];",
    ]
    for j, nm in enumerate(names):
        g = load(f"grid[gp + {j} * info[22]]", stype, "f32")
        L.append(f"  let u{nm} = gs_unnorm({g}, {sizes[nm]}, align);")
    taps = []  # one per tap: ({dim: index variable}, weight expression)
    if mode in ("bilinear", "nearest"):
        for nm in names:
            L.append(f"  let p{nm} = {_gs_pad(f'u{nm}', sizes[nm], padding)};")
        if mode == "nearest":
            for nm in names:
                L.append(f"  let i{nm} = i32(round(p{nm}));")
            taps.append(({nm: f"i{nm}" for nm in names}, "1.0"))
        else:
            for nm in names:
                L += [
                    f"  let f{nm} = floor(p{nm}); let i{nm}0 = i32(f{nm}); let i{nm}1 = i{nm}0 + 1;",
                    f"  let w{nm}1 = p{nm} - f{nm}; let w{nm}0 = (f{nm} + 1.0) - p{nm};",
                ]
            # corners in PyTorch's order (nw, ne, sw, se; then the bottom layer in 3-D)
            for corner in itertools.product((0, 1), repeat=rank):
                sel = dict(zip(reversed(names), corner))
                weight = " * ".join(f"w{nm}{sel[nm]}" for nm in names)
                taps.append(({nm: f"i{nm}{sel[nm]}" for nm in names}, weight))
    else:  # bicubic, 2-D: taps at floor(u) - 1 .. + 2, each coordinate padded on its own
        for nm in names:
            L += [
                f"  let f{nm} = floor(u{nm}); let c{nm} = cubic_w(u{nm} - f{nm});",
            ]
            for j in range(4):
                p = _gs_pad(f"(f{nm} + {float(j - 1)})", sizes[nm], padding)
                L.append(f"  let i{nm}{j} = i32({p});")
                L.append(f"  let v{nm}{j} = i{nm}{j} >= 0 && i{nm}{j} < {sizes[nm]};")
    L += [
        "  let xb = info[11] + n * info[12];",
        "  let c0 = cb * info[2]; let c1 = min(info[1], c0 + info[2]);",
        "  var ob = (n * info[1] + c0) * S + s;",
    ]
    if mode == "bicubic":
        # the 16 tap offsets, clamped so the (discarded) out-of-bounds loads stay in the buffer
        for a in range(4):
            for b in range(4):
                L.append(
                    f"  let t{a}{b} = select(-1, clamp(ih{a}, 0, info[5] - 1) * info[15] + "
                    f"clamp(iw{b}, 0, info[6] - 1) * info[16], vh{a} && vw{b});"
                )
        loop_body = []
        for a in range(4):
            row = " + ".join(f"cw[{b}] * tap(t{a}{b}, xc)" for b in range(4))
            loop_body.append(f"    let r{a} = {row};")
        loop_body.append("    let val = ch[0] * r0 + ch[1] * r1 + ch[2] * r2 + ch[3] * r3;")
        fns = CUBIC + (
            f"fn tap(t: i32, xc: i32) -> f32 {{\n"
            f"  if (t < 0) {{ return 0.0; }}\n  return {load('xin[xc + t]', stype, 'f32')};\n}}\n"
        )
    else:
        for k, (idx, weight) in enumerate(taps):
            valid = " && ".join(f"{v} >= 0 && {v} < {sizes[nm]}" for nm, v in idx.items())
            # the offset clamped into the input, so a (discarded) out-of-bounds load stays inside
            off = " + ".join(f"clamp({v}, 0, {sizes[nm]} - 1) * {xs[nm]}" for nm, v in idx.items())
            L.append(f"  let ok{k} = {valid}; let t{k} = {off}; let g{k} = {weight};")
        terms = [
            f"select(0.0, g{k} * {load(f'xin[xc + t{k}]', stype, 'f32')}, ok{k})"
            for k in range(len(taps))
        ]
        loop_body = [f"    let val = {' + '.join(terms)};"]
        fns = ""
    L += [
        "  for (var c = c0; c < c1; c = c + 1) {",
        "    let xc = xb + c * info[13];",
        *loop_body,
        f"    out[ob] = {store('val', 'f32', stype)};",
        "    ob = ob + S;",
        "  }",
    ]
    body = "\n".join(L) + "\n}\n"
    bufs = [("xin", stype, "r"), ("grid", stype, "r"), ("out", stype, "w")]
    src = header(bufs) + helpers_for(body) + GS_HELPERS + fns + ENTRY.format(wg=WG) + body
    return KernelSource(src, "rrw")
