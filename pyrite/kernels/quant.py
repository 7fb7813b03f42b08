"""Weight-only quantized linear layers: int8 and int4 weights packed in u32 words, dequantized in
registers (ops/quantized.py packs them, validates and dispatches).

Layout of a quantized weight W (N, K) — N output features, K input features, as nn.Linear holds
it:

  qweight  u32 (N, WR): each row's K values packed along K, `PW` a word (int8: 4, one byte each,
           two's complement; int4: 8, one nibble each, unsigned 0..15), value j of a word in
           bits [j·b, j·b + b) — little-endian, so value k of the row is byte k of int8 bytes.
           Rows are padded with zero values to whole units of 4 words (`VPU` values: int8 16,
           int4 32), so a row starts 16-byte aligned and is read as vec4<u32>.
  scales   f32 (N, G): G = ceil(K / group_size) groups a row (G = 1: one scale a row).
  offsets  f32 (N, G), int4 only.

  int8:  W[n, k] = q · scales[n, k / gs]                 (symmetric)
  int4:  W[n, k] = q · scales[n, k / gs] + offsets[n, k / gs]  (asymmetric: GGUF's Q4_1, or a
                                                           zero point z as offset = -z · scale)

`qgemv`: Y (M, N) = X (M, K) · Wᵀ (+ bias) for M <= rm rows (baked 1, 2, 4 or 8). A workgroup
of 256 invocations is 256 / lanes lane groups, each computing `cols` adjacent output columns:
its `lanes` lanes stride through the columns' rows of qweight a step at a time (a step: `wpl`
words a lane, one u32 / vec2 / vec4 load a column — consecutive lanes read consecutive words, so
a lane group's loads are coalesced), `unroll` steps an iteration with every word (and each
group's scale and offset) loaded before any is used, so more bytes are in flight a lane. Each
word is dequantized once (the fma with its group's scale and offset) and multiplied into all rm
rows of X, whose values, loaded once a step (vec4 loads where K, its offset and row stride are
multiples of 4), serve all `cols` columns. The row's last step, when it runs past K, is taken by
one lane with X's loads guarded. Then a tree over the lanes in workgroup memory; per-row int8
scales multiply the sum once at the end. The knobs' measured values are in ops/quantized.py.

qgemv info words (i32):
  [0] M  [1] N  [2] K  [3] workgroups  [4] X offset  [5] X row stride  [6] full steps a row
  [7] words a row  [8] G  [9] bias offset  [10] bias stride  [11] Y offset

`dequant`: W as f32 (N, K), one invocation a packed word: the path for many rows (a GEMM over
the dequantized weight) and for the gradient with respect to X.

dequant info words: [0] words in all (N · WR)  [1] WR  [2] K  [3] G
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY as ENTRY_FLAT
from .common import FLAT_INDEX, SG_ENABLE, KernelSource, header, helpers_for, post_expr, trusted
from .matmul import ENTRY, ENTRY_SG, lane_sum

PER_WORD = {8: 4, 4: 8}  # values a u32 word holds, by bits
UNIT_WORDS = 4  # words a unit (one vec4<u32> load)


def values_per_unit(bits: int) -> int:
    return PER_WORD[bits] * UNIT_WORDS


def _unpack(bits: int, word: str, magic: bool = False) -> list[str]:
    """WGSL vec4<f32> expressions of the quantized values of `word`, four at a time. `magic`:
    convert without an integer-to-float instruction (a quarter-rate one on NVIDIA): the value's
    bits ORed under the exponent of 2^23 make the float 2^23 + q exactly; subtracting 2^23 (also
    exact) leaves q. int8's signed bytes are flipped to q + 128 first (XOR 0x80) and 2^23 + 128
    subtracted."""
    if bits == 8:
        if magic:
            return [
                f"(bitcast<vec4<f32>>(((vec4<u32>({word} ^ 0x80808080u) >> "
                "vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(255u)) | vec4<u32>(0x4B000000u))"
                " - vec4<f32>(8388736.0))"
            ]
        return [  # bytes 0..3, sign-extended by an arithmetic shift
            f"vec4<f32>(bitcast<vec4<i32>>(vec4<u32>({word}) << vec4<u32>(24u, 16u, 8u, 0u))"
            " >> vec4<u32>(24u))"
        ]
    if magic:
        return [
            f"(bitcast<vec4<f32>>(((vec4<u32>({word}) >> vec4<u32>({a}u, {a + 4}u, {a + 8}u, "
            f"{a + 12}u)) & vec4<u32>(15u)) | vec4<u32>(0x4B000000u)) - vec4<f32>(8388608.0))"
            for a in (0, 16)
        ]
    return [
        f"vec4<f32>((vec4<u32>({word}) >> vec4<u32>({a}u, {a + 4}u, {a + 8}u, {a + 12}u))"
        " & vec4<u32>(15u))"
        for a in (0, 16)
    ]


def _dequant(bits: int, grouped: bool, q: str, c="") -> str:
    """A dequantized vec4 from quantized values `q`, with `sc{c}` / `ofs{c}` the group's scale
    and offset in scope."""
    if bits == 4:
        return f"fma({q}, vec4<f32>(sc{c}), vec4<f32>(ofs{c}))"
    return f"({q} * sc{c})" if grouped else q


STAGE_FLOATS = 4096  # workgroup memory for staged scales: 16 KiB, WebGPU's guaranteed limit


def stage_fits(bits: int, lanes: int, cols: int, groups_a_row: int) -> bool:
    """Whether a workgroup's rows of scales (and int4's offsets) fit in STAGE_FLOATS."""
    return (256 // lanes) * cols * groups_a_row * (2 if bits == 4 else 1) <= STAGE_FLOATS


@lru_cache(maxsize=128)
def qgemv(bits: int, grouped: bool, gs: int, rm: int, lanes: int, wpl: int, cols: int,
          unroll: int, xvec: bool, tail: bool, bias: bool, unpack: str = "convert",
          stage: bool = False, sg: int = 0, post: tuple | None = None,
          dual=None) -> KernelSource:  # fmt: skip
    """The kernel of the module docstring. `gs`: the group size (a multiple of PER_WORD[bits];
    unused when not `grouped`); `wpl`: words a lane loads at a step (1, 2 or 4: u32, vec2, vec4);
    `cols`: output columns a lane group computes (X's values, loaded once, serve all of them);
    `unroll`: steps a loop iteration takes (their words all loaded before any is used: more
    loads in flight a lane); `tail`: K is not a multiple of a step's values; `unpack`: how the
    packed values become floats ("convert": integer-to-float instructions; "magic": _unpack's
    exponent trick; "inplace": _inplace's, with the scale applied once a step and int4's offset
    through the sum of X, see below); `stage` (grouped only): the workgroup's
    rows of scales (and offsets) copied into workgroup memory first (STAGE_FLOATS at most,
    `stage_fits`), the loop reading them there instead of from the storage buffers. `sg`: the
    device's `subgroups`, for the lanes' sums (kernels/matmul.lane_sum). `post` and `dual` as
    kernels/matmul.gemm_fast's (compile/fusion.py: a map fused into the store)."""
    assert dual is None or post is not None
    pw = PER_WORD[bits]
    spv = pw * wpl  # values a step
    groups = 256 // lanes
    wt = {1: "u32", 2: "vec2<u32>", 4: "vec4<u32>"}[wpl]
    xt = "vec4<f32>" if xvec else "f32"
    bufs = [("x", xt, "r"), ("qw", wt, "r"), ("sc_", "f32", "r")]
    if bits == 4:
        bufs.append(("of_", "f32", "r"))
    if bias:
        bufs.append(("bs", "f32", "r"))
    if post is not None:
        p_expr, n_extra, p_at, p_sct = post
        bufs += [(f"r{k}", "f32", "r") for k in range(1, n_extra + 1)]
    bufs.append(("y", "f32", "w"))
    if dual is not None:
        bufs.append(("y2", "f32", "w"))
    nslice = min(8, rm * cols)
    stage = stage and grouped
    size = max(nslice * 256, STAGE_FLOATS if stage else 0)
    L = [
        (SG_ENABLE if sg == 2 else "") + header(bufs),
        f"var<workgroup> red: array<f32, {size}>;",
        (ENTRY_SG if sg else ENTRY).format(wg=256),
    ]
    L += [
        "  let w = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);",
        "  if (w >= info[3]) { return; }",
        "  let M = info[0]; let N = info[1]; let K = info[2]; let G = info[8];",
        # (_inplace's exponent, opaque to the compiler: M is never negative, but a constant
        # here is an immediate, and a LOP3 takes one: the mask and the OR became two)
        "  let mg = vec4<u32>(select(0x4B000000u, 0u, M < 0));",
        f"  let li = i32(lix); let grp = li / {lanes}; let lane = li % {lanes};",
        f"  let n0 = (w * {groups} + grp) * {cols}; let sf = info[6];",
    ]
    if stage:  # the workgroup's rows w·R .. w·R + R - 1 of scales (offsets after them)
        R = groups * cols
        L += [
            f"  let tot = {R} * G; let r0 = w * {R};",
            "  for (var i = li; i < tot; i += 256) {",
            "    let src = min(r0 + i / G, N - 1) * G + i % G;",
            "    red[i] = sc_[src];" + (" red[tot + i] = of_[src];" if bits == 4 else ""),
            "  }",
            "  workgroupBarrier();",
        ]
    for c in range(cols):
        L.append(f"  let nn{c} = min(n0 + {c}, N - 1);")
        grow = f"(grp * {cols} + {c}) * G" if stage else f"nn{c} * G"
        L.append(f"  let wrow{c} = nn{c} * (info[7] / {wpl}); let grow{c} = {grow};")
    for r in range(rm):
        L.append(f"  let xr{r} = info[4] + min({r}, M - 1) * info[5];")
        L += [f"  var acc{r}_{c} = 0.0;" for c in range(cols)]
    step_scale = grouped and gs % spv == 0
    inplace = unpack == "inplace"
    magic = unpack == "magic"
    # inplace: a scale's extent (the values one scale covers within a lane's step) sums
    # t = Σ q·x with q exact, then acc += sc·t (+ ofs·Σx for int4): a step when the step lies
    # in one group, else each word; int8 with a scale a row sums Σ q·x straight into acc
    per_word = inplace and grouped and not step_scale
    if stage:
        sc_names = "let sc{c} = red[g{c}];" + (
            " let ofs{c} = red[tot + g{c}];" if bits == 4 else ""
        )
    else:
        sc_names = "let sc{c} = sc_[g{c}];" + (" let ofs{c} = of_[g{c}];" if bits == 4 else "")

    def body(guard: bool, nu: int) -> list[str]:
        """Steps s, s + lanes, .. (nu of them): every weight load first, then the math."""
        B = []
        for u in range(nu):
            B.append(f"    let s{u} = s + {u * lanes};")
            B += [f"    let wv{u}_{c} = qw[wrow{c} + s{u}];" for c in range(cols)]
            if step_scale:  # (the group's scale loaded beside its words, before any math)
                for c in range(cols):
                    B.append(
                        f"    let g{u}_{c} = grow{c} + s{u} * {spv} / {gs}; "
                        + sc_names.format(c=f"{u}_{c}")
                    )
        for u in range(nu):
            B.append("    {")
            B.append(f"    let k0 = s{u} * {spv};")
            if step_scale:
                for c in range(cols):
                    of = f" let ofs{c} = ofs{u}_{c};" if bits == 4 else ""
                    B.append(f"    let sc{c} = sc{u}_{c};{of}")
            if inplace and grouped and not per_word:
                B += _extent_open(bits, rm, cols)
            for j in range(wpl):
                B.append("    {")
                if grouped and not step_scale:
                    for c in range(cols):
                        B.append(f"      let g{c} = grow{c} + (k0 + {j * pw}) / {gs}; "
                                 + sc_names.format(c=c))  # fmt: skip
                if per_word:
                    B += _extent_open(bits, rm, cols)
                for h in range(pw // 4):
                    kk = j * pw + 4 * h
                    for r in range(rm):
                        B.append(f"      let x{r}_{h} = {_xload(r, kk, xvec, guard)};")
                for c in range(cols):
                    word = f"wv{u}_{c}" if wpl == 1 else f"wv{u}_{c}[{j}]"
                    if inplace:
                        sums = [f"t{r}_{c}" if grouped else f"acc{r}_{c}" for r in range(rm)]
                        for h, q in enumerate(_inplace(bits, word)):
                            B.append(f"      let q{c}_{h} = {q};")
                            B += [f"      {t} = {t} + dot(q{c}_{h}, x{r}_{h});"
                                  for r, t in enumerate(sums)]  # fmt: skip
                        continue
                    for h, q in enumerate(_unpack(bits, word, magic)):
                        B.append(f"      let dq{c}_{h} = {_dequant(bits, grouped, q, c)};")
                        B += [
                            f"      acc{r}_{c} = acc{r}_{c} + dot(dq{c}_{h}, x{r}_{h});"
                            for r in range(rm)
                        ]
                if inplace and bits == 4:  # (Σx over the extent, for the offsets)
                    halves = " + ".join(f"x{{r}}_{h}" for h in range(pw // 4))
                    B += [f"      sx{r} = sx{r} + {halves.format(r=r)};" for r in range(rm)]
                if per_word:
                    B += _extent_close(bits, rm, cols)
                B.append("    }")
            if inplace and grouped and not per_word:
                B += _extent_close(bits, rm, cols)
            B.append("    }")
        return B

    L.append("  var s = lane;")
    if unroll > 1:
        L.append(f"  for (; s + {(unroll - 1) * lanes} < sf; s += {unroll * lanes}) {{")
        L += body(False, unroll)
        L.append("  }")
    L.append(f"  for (; s < sf; s += {lanes}) {{")
    L += body(False, 1)
    L.append("  }")
    if tail:  # the row's last step, past K: one lane, X's loads guarded
        L.append(f"  if (lane == sf % {lanes}) {{")
        L.append("    s = sf;")
        L += body(True, 1)
        L.append("  }")
    if stage:  # (every lane done with the staged scales before the sums overwrite them)
        L.append("  workgroupBarrier();")
    slices = [(r, c) for c in range(cols) for r in range(rm)]
    for i0 in range(0, len(slices), nslice):
        chunk = slices[i0 : i0 + nslice]
        if i0:
            L.append("  workgroupBarrier();")
        lines, sums = lane_sum([f"acc{r}_{c}" for r, c in chunk], lanes, sg)
        L.append("  {")  # (each chunk's sums in a scope of their own: their names repeat)
        L += lines
        L.append("  if (lane == 0) {")
        for i, (r, c) in enumerate(chunk):
            v = sums[i]
            if not grouped:
                v = f"{v} * sc_[nn{c}]"
            if bias:
                v = f"{v} + bs[info[9] + nn{c} * info[10]]"
            at = f"{r} * N + n0 + {c}"
            if post is None:
                L.append(f"    if ({r} < M && n0 + {c} < N) {{ y[info[11] + {at}] = {v}; }}")
                continue
            fused = post_expr(p_expr, "v", p_at, n_extra, p_sct, f"n0 + {c}")
            L.append(f"    if ({r} < M && n0 + {c} < N) {{ let m = {r}; let v = {v};")
            if dual is not None:
                L.append(f"      y[info[11] + {at}] = v; y2[info[{dual}] + {at}] = {fused}; }}")
            else:
                L.append(f"      y[info[11] + {at}] = {fused}; }}")
        L.append("  }")
        L.append("  }")
    L.append("}")
    body = "\n".join(L[1:]) + "\n"
    head = L[0] + "\n" + (helpers_for(body) if post is not None else "")
    return trusted(KernelSource(head + body, "".join(m for _, _, m in bufs)))


def _inplace(bits: int, word: str) -> list[str]:
    """WGSL vec4<f32> expressions of the quantized values of `word`, four at a time, exact, by
    the exponent trick without shifting each value down: value j keeps its place in the word
    (int4: nibble j of a half-word at bits 4j, int8: byte j at bits 8j; int8's signed bytes
    flipped to q + 128 by XOR 0x80), masked and ORed under the exponent of 2^23 it makes the float
    2^23 + q·16^j (2^23 + (q + 128)·256^j) exactly (< 2^24), and one fma by 16^-j (256^-j) with
    the constant -2^23·16^-j (-(2^23 + 128·256^j)·256^-j) leaves q, exactly, in one rounding
    (of an exact value). A value: one logic op (the mask and the OR fuse into one LOP3 on
    NVIDIA where the exponent `mg` is in a register: qgemv makes it a value the compiler cannot
    fold, since as an immediate beside the mask's it took two LOP3s, seen in the H100's SASS)
    and one fma, where _unpack's conversion takes a shift, a mask and an integer-to-float
    conversion (a quarter-rate instruction on NVIDIA) and its `magic` a shift, a LOP3 and an add."""
    if bits == 4:
        w = "vec4<f32>(1.0, 0.0625, 0.00390625, 0.000244140625)"
        c = "vec4<f32>(-8388608.0, -524288.0, -32768.0, -2048.0)"
        mask = "vec4<u32>(0xFu, 0xF0u, 0xF00u, 0xF000u)"
        halves = [f"vec4<u32>({word})", f"vec4<u32>({word} >> 16u)"]
    else:
        w = "vec4<f32>(1.0, 0.00390625, 1.0, 0.00390625)"
        c = "vec4<f32>(-8388736.0, -32896.0, -8388736.0, -32896.0)"
        mask = "vec4<u32>(0xFFu, 0xFF00u, 0xFFu, 0xFF00u)"
        f = f"({word} ^ 0x80808080u)"
        halves = [f"vec4<u32>({f}, {f}, {f} >> 16u, {f} >> 16u)"]
    return [f"fma(bitcast<vec4<f32>>(({h} & {mask}) | mg), {w}, {c})" for h in halves]


def _extent_open(bits: int, rm: int, cols: int) -> list[str]:
    """A scale extent's sums (qgemv's `inplace`): t = Σ q·x a row and column, Σx a row (int4)."""
    L = [f"      var t{r}_{c} = 0.0;" for c in range(cols) for r in range(rm)]
    if bits == 4:
        L += [f"      var sx{r} = vec4<f32>(0.0);" for r in range(rm)]
    return L


def _extent_close(bits: int, rm: int, cols: int) -> list[str]:
    """acc += sc·t (+ ofs·Σx): Σ (q·sc + ofs)·x over the extent, with the scale applied once."""
    L = []
    for c in range(cols):
        for r in range(rm):
            if bits == 4:
                ofs = f"fma(ofs{c}, dot(sx{r}, vec4<f32>(1.0)), acc{r}_{c})"
                L.append(f"      acc{r}_{c} = fma(sc{c}, t{r}_{c}, {ofs});")
            else:
                L.append(f"      acc{r}_{c} = fma(sc{c}, t{r}_{c}, acc{r}_{c});")
    return L


def _xload(r: int, kk: int, xvec: bool, guard: bool) -> str:
    """X[row r, k0 + kk .. + 4] as a vec4<f32>; `guard`: values at or past K read as 0."""
    if xvec and not guard:
        return f"x[(xr{r} >> 2u) + ((k0 + {kk}) >> 2u)]"
    parts = []
    for i in range(4):
        k = f"k0 + {kk + i}"
        if xvec:  # (guarded vec4 storage: the element through its vec4)
            e = f"(xr{r} + min({k}, K - 1))"
            v = f"x[{e} >> 2u][{e} & 3]"
        else:
            v = f"x[xr{r} + min({k}, K - 1)]" if guard else f"x[xr{r} + {k}]"
        parts.append(f"select(0.0, {v}, {k} < K)" if guard else v)
    return f"vec4<f32>({', '.join(parts)})"


@lru_cache(maxsize=16)
def dequant(bits: int, grouped: bool, gs: int) -> KernelSource:
    """W (N, K) as f32 from its packed words: one invocation a word, PW values written (those
    before K)."""
    pw = PER_WORD[bits]
    bufs = [("qw", "u32", "r"), ("sc_", "f32", "r")]
    if bits == 4:
        bufs.append(("of_", "f32", "r"))
    bufs.append(("y", "f32", "w"))
    L = [header(bufs), ENTRY_FLAT.format(wg=256), FLAT_INDEX.format(wg=256)]
    L += [
        "  if (gi >= info[0]) { return; }",
        "  let WR = info[1]; let K = info[2]; let G = info[3];",
        f"  let n = gi / WR; let k0 = (gi % WR) * {pw};",
        "  if (k0 >= K) { return; }",
    ]
    if grouped:
        L.append(f"  let g = n * G + k0 / {gs};")
    else:
        L.append("  let g = n;")
    L.append("  let sc = sc_[g];" + (" let ofs = of_[g];" if bits == 4 else ""))
    L.append("  let word = qw[gi]; let o = n * K + k0;")
    for h, q in enumerate(_unpack(bits, "word")):
        L.append(f"  let v{h} = {_dequant(bits, True, q)};")
        for i in range(4):
            j = 4 * h + i
            L.append(f"  if (k0 + {j} < K) {{ y[o + {j}] = v{h}[{i}]; }}")
    L.append("}")
    return trusted(KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs)))
