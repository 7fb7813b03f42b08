"""The register-tiled attention backward: FlashAttention-2's two backward loops with both of each
tile's products as register tiles, as attention_tiled.py does for the forward.

attn_dq_kernel / attn_dkv_kernel (kernels/attention.py) give each query (key) one invocation that
walks every key (query) tile: a pair costs it 4·E multiply-adds read from workgroup memory as
broadcasts, with its own rows and accumulators in registers (4·E floats), so few invocations fit
an SM and little latency hides. Here a workgroup of 8 × 8 = 64 invocations owns a block of
TB = 32 rows and walks the other side TB rows at a time; invocation (ty, tx) holds a 4 × 4 block
of each score tile — rows ty + 8r, columns tx + 8c (interleaved, so a warp's reads of the padded
row-major tiles fall on distinct banks) — and 4 rows × EP/8 dims of each accumulator (dims
4·tx .. 4·tx + 3, and 32 + 4·tx .. for EP = 64):

  attn_dq_tiled_kernel   a block of queries: q (pre-scaled) and dout rows staged once, with
                         D = Σ dout·out per query (written out for the other kernel); per key
                         tile S = q·kᵀ and dP = dout·vᵀ, p = exp(S - lse), dS = p·(dP - D) through
                         workgroup memory (dSᵀ), dq += dS·k;
  attn_dkv_tiled_kernel  a block of keys: k and v rows staged once; per query tile Sᵀ = k·qᵀ,
                         dPᵀ = v·doutᵀ, pᵀ and dSᵀ through workgroup memory, dv += pᵀ·dout,
                         dk += dSᵀ·q (q pre-scaled, so dk = scale·dSᵀ·q).

Tile rows are padded to RP = EP/4 + 1 vec4s (bank spread). Workgroup memory at EP = 64: four row
tiles of 32 × 17 vec4 (34 KiB) and one or two 32 × 9 vec4 transposed tiles: 39 / 44 KiB, so these
run where a workgroup may hold 48 KiB (the H100/H200 through both implementations); at EP = 32
23 / 28 KiB (lavapipe's 32 KiB: the tests reach them there with E <= 32). Buffers, info words,
masks, causal ranges, dropout bits and output layouts are those of attn_dq_kernel and
attn_dkv_kernel, so `_flash_backward` swaps kernels and grids only.
"""

from __future__ import annotations

from functools import lru_cache

from .attention import (
    _buffers,
    _check,
    _entry,
    _Layout,
    _row_base,
    _stage,
    drop_setup,
    dropout_keep,
)
from .attention_tiled import TILED_EP, tiled_ep
from .common import KernelSource, header, helpers_for, load, store

BWD_TB = 32  # rows of a block and of each tile walked
BWD_WG = 64  # 8 x 8 invocations
_T = 9  # vec4s a row of a transposed (pᵀ, dSᵀ) tile: 8 groups of 4 rows, padded by one


def bwd_shared_bytes(E: int) -> int:
    """Workgroup memory of the larger of the two kernels (the dk/dv one) at head dim E."""
    rp = tiled_ep(E) // 4 + 1
    return (4 * BWD_TB * rp + 2 * BWD_TB * _T) * 16 + 2 * BWD_TB * 4


def bwd_loop_iterations(n: int, E: int) -> int:
    """Loop iterations of one invocation of either kernel walking n rows of the other side: the
    staging loops, the head-dim loop and the row loop of each tile, with their exit tests."""
    r = tiled_ep(E) // 4
    stage = -(-BWD_TB * r // BWD_WG) + 1
    return stage + r // 2 + 1 + -(-n // BWD_TB) * (stage + r + 1 + BWD_TB + 1 + 1) + 1


def _acc(halves: str, names: str) -> str:
    return "".join(
        f"  var {n}{r}{h} = vec4<f32>(0.0);\n" for n in names for r in range(4) for h in halves
    )


def _score_tiles(rows_a: str, cols_a: str, rows_b: str, cols_b: str, R: int, RP: int) -> str:
    """WGSL: s{r} = rows ty + 8r of tile `rows_a` · columns tx + 8c of `cols_a` (vec4 over c),
    and dp{r} the same of `rows_b` and `cols_b`, over the padded head dim."""
    b = "".join(f"    var s{r} = vec4<f32>(0.0);\n    var dp{r} = vec4<f32>(0.0);\n"
                for r in range(4))  # fmt: skip
    b += f"    for (var e = 0; e < {R}; e++) {{\n"
    for r in range(4):
        b += f"      let a{r} = {rows_a}[(ty + {8 * r}) * {RP} + e];\n"
        b += f"      let b{r} = {rows_b}[(ty + {8 * r}) * {RP} + e];\n"
    for c in range(4):
        b += f"      let x{c} = {cols_a}[(tx + {8 * c}) * {RP} + e];\n"
        b += f"      let y{c} = {cols_b}[(tx + {8 * c}) * {RP} + e];\n"
    for r in range(4):
        dots = ", ".join(f"dot(a{r}, x{c})" for c in range(4))
        b += f"      s{r} += vec4<f32>({dots});\n"
        dots = ", ".join(f"dot(b{r}, y{c})" for c in range(4))
        b += f"      dp{r} += vec4<f32>({dots});\n"
    return b + "    }\n"


def _transpose_store(tile: str, vals: str) -> str:
    """WGSL: {tile}[(tx + 8c) * _T + ty] = the column c of rows r of `vals` (a format of r)."""
    b = ""
    for c in range(4):
        comps = ", ".join(f"{vals.format(r=r)}[{c}]" for r in range(4))
        b += f"    {tile}[(tx + {8 * c}) * {_T} + ty] = vec4<f32>({comps});\n"
    return b


def _products(pairs, halves: str, RP: int) -> str:
    """WGSL: over the tile's 32 rows n, acc{r}{h} += w[r] · row n of `src` (dims of half h), for
    each (acc, transposed weight tile, source row tile) of `pairs`."""
    b = f"    for (var n = 0; n < {BWD_TB}; n++) {{\n"
    for acc, wt, src in pairs:
        b += f"      let w{acc} = {wt}[n * {_T} + ty];\n"
        for i, h in enumerate(halves):
            b += f"      let r{acc}{h} = {src}[n * {RP} + {8 * i} + tx];\n"
        for r in range(4):
            for h in halves:
                b += f"      {acc}{r}{h} += w{acc}[{r}] * r{acc}{h};\n"
    return b + "    }\n"


def _write_rows(acc: str, buf: str, rows: str, n: str, E: int, heads: int, halves: str, stype,
                mul: str = "") -> str:  # fmt: skip
    """WGSL: rows `rows`[r] (< n) of accumulator `acc` into output `buf` (dims < E)."""
    b = ""
    for r in range(4):
        b += f"  if ({rows}[{r}] < {n}) {{\n    let i = {rows}[{r}];\n"
        b += f"    let wb = {_row_base(n, 'i', E, heads)};\n"
        for i, h in enumerate(halves):
            for k in range(4):
                d = f"{32 * i} + tx * 4 + {k}"
                v = store(f"{acc}{r}{h}[{k}]{mul}", "f32", stype)
                b += f"    if ({d} < {E}) {{ {buf}[wb + {d}] = {v}; }}\n"
        b += "  }\n"
    return b


def _mask_rows(lay, mask: str, m_type, qrow: str, kcol: str) -> str:
    """WGSL: mk{r} (vec4 over c) the mask at query `qrow` and key `kcol` (formats of r and c)."""
    if mask == "none":
        return ""
    mr, mc = lay.pos["m"] + 1, lay.pos["m"] + 2
    b = ""
    for r in range(4):
        at = [f"m_[mb + {qrow.format(r=r, c=c)} * info[{mr}] + {kcol.format(r=r, c=c)} * info[{mc}]]"
              for c in range(4)]  # fmt: skip
        if mask == "bool":
            b += f"    let mk{r} = vec4<bool>({', '.join(a + ' != 0u' for a in at)});\n"
        else:
            b += f"    let mk{r} = vec4<f32>({', '.join(load(a, m_type, 'f32') for a in at)});\n"
    return b


def _keep4(row: str, col: str) -> str:
    """WGSL vec4<bool>: dropout's keep bits of the four pairs (row, col) (formats of c)."""
    return (
        f"vec4<bool>({', '.join(dropout_keep(row.format(c=c), col.format(c=c)) for c in range(4))})"
    )


def _setup(E: int, rank: int, mask: str, strided: list, bufs, dropout: bool):
    if E > TILED_EP:
        raise ValueError(f"pyrite: internal: the tiled attention backward takes E <= {TILED_EP}")
    _check(E, 8, mask)
    EP = tiled_ep(E)
    lay = _Layout(rank, strided)
    b = _entry(BWD_WG) + lay.bases(strided)
    if dropout:
        b += drop_setup(lay.words)
    b += "  let t = i32(lid.x);\n  let ty = t / 8;\n  let tx = t % 8;\n"
    return lay, _buffers(bufs), b, EP // 4, EP // 4 + 1, "ab" if EP == 64 else "a"


def _tiles(RP: int, rows, transposed) -> str:
    s = "".join(f"var<workgroup> {n}: array<vec4<f32>, {BWD_TB * RP}>;\n" for n in rows)
    return s + "".join(f"var<workgroup> {n}: array<vec4<f32>, {BWD_TB * _T}>;\n"
                       for n in transposed)  # fmt: skip


@lru_cache(maxsize=64)
def attn_dq_tiled_kernel(
    E: int,
    rank: int,
    causal: bool,
    mask: str,
    q_type: str,
    k_type: str,
    v_type: str,
    m_type: str | None,
    o_type: str,
    do_type: str,
    dq_type: str,
    heads: int = 0,
    dropout: bool = False,
) -> KernelSource:
    """WGSL of dq and D by query blocks of BWD_TB (module docstring); buffers and info words as
    attn_dq_kernel's, info[4] = query blocks per batch·head."""
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["o", "g"]
    lay, bufs, b, R, RP, halves = _setup(E, rank, mask, strided, [
        ("q_", q_type, "r"), ("k_", k_type, "r"), ("v_", v_type, "r"),
        ("m_", m_type if mask != "none" else None, "r"), ("o_", o_type, "r"),
        ("g_", do_type, "r"), ("lse", "f32", "r"), ("dq", dq_type, "w"), ("dd", "f32", "w"),
    ], dropout)  # fmt: skip
    TB = BWD_TB
    b += f"  let q0 = blk * {TB};\n  {{\n    let t0 = q0;\n"
    b += _stage([("qs", "q_", q_type, "qb", lay.row("q"), lay.col("q"), E, " * scale"),
                 ("gs", "g_", do_type, "gb", lay.row("g"), lay.col("g"), E, "")],
                TB, BWD_WG, R, "L - t0", pitch=RP)  # fmt: skip
    b += "  }\n  workgroupBarrier();\n"
    # D = Σ dout·out of each query: two invocations a row, alternate vec4s of the dims
    b += "  {\n    let row = t / 2;\n    let oi = min(q0 + row, L - 1);\n    var acc = 0.0;\n"
    b += f"    for (var c = t % 2; c < {R}; c += 2) {{\n"
    comps = []
    for k in range(4):
        o = load(f"o_[ob + oi * {lay.row('o')} + min(c * 4 + {k}, {E - 1}) * {lay.col('o')}]",
                 o_type, "f32")  # fmt: skip
        comps.append(f"select(0.0, {o}, c * 4 + {k} < {E})")
    b += f"      acc += dot(gs[row * {RP} + c], vec4<f32>({', '.join(comps)}));\n    }}\n"
    b += "    dpart[t] = acc;\n  }\n  workgroupBarrier();\n"
    b += "  let qi = vec4<i32>(q0 + ty) + vec4<i32>(0, 8, 16, 24);\n"
    b += "  let qc = min(qi, vec4<i32>(L - 1));\n"
    b += "  var Dq = vec4<f32>(0.0);\n  var lq = vec4<f32>(0.0);\n"
    for r in range(4):
        b += f"  Dq[{r}] = dpart[2 * (ty + {8 * r})] + dpart[2 * (ty + {8 * r}) + 1];\n"
        b += f"  lq[{r}] = lse[bh * L + qc[{r}]];\n"
    b += "  if (tx == 0) {\n"
    for r in range(4):
        b += f"    if (qi[{r}] < L) {{ dd[bh * L + qi[{r}]] = Dq[{r}]; }}\n"
    b += "  }\n"
    b += _acc(halves, ["dq"])
    b += f"  let kend = {f'min(S, q0 + {TB})' if causal else 'S'};\n"
    b += f"  let ntiles = (kend + {TB - 1}) / {TB};\n"
    b += "  for (var tt = 0; tt < ntiles; tt++) {\n"
    b += f"    let t0 = tt * {TB};\n    workgroupBarrier();\n"
    b += _stage([("ks", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
                 ("vs", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, "")],
                TB, BWD_WG, R, "kend - t0", pitch=RP)  # fmt: skip
    b += "    workgroupBarrier();\n"
    b += "    let kj = vec4<i32>(t0 + tx) + vec4<i32>(0, 8, 16, 24);\n"
    b += "    let kc = min(kj, vec4<i32>(S - 1));\n"
    b += _mask_rows(lay, mask, m_type, "qc[{r}]", "kc[{c}]")
    b += _score_tiles("qs", "ks", "gs", "vs", R, RP)
    for r in range(4):
        ok = "(kj < vec4<i32>(kend))"
        if causal:
            ok += f" & (kj <= vec4<i32>(qi[{r}]))"
        if mask == "bool":
            ok += f" & mk{r}"
        elif mask == "float":
            b += f"    s{r} += mk{r};\n"
        b += f"    let ok{r} = {ok} & (s{r} != vec4<f32>(-p_inf()));\n"
        b += f"    let p{r} = select(vec4<f32>(0.0), exp(s{r} - vec4<f32>(lq[{r}])), ok{r});\n"
        dp = f"dp{r}"
        if dropout:  # (dP of the kept pairs, scaled; D holds the dropout already)
            keep = _keep4(f"bh * L + qc[{r}]", "kj[{c}]")
            b += f"    let dpk{r} = select(vec4<f32>(0.0), dp{r} * dscale, {keep});\n"
            dp = f"dpk{r}"
        b += f"    let ds{r} = p{r} * ({dp} - vec4<f32>(Dq[{r}]));\n"
    b += _transpose_store("dst", "ds{r}")
    b += "    workgroupBarrier();\n"
    b += _products([("dq", "dst", "ks")], halves, RP)
    b += "  }\n"
    b += _write_rows("dq", "dq", "qi", "L", E, heads, halves, dq_type, " * scale")
    b += "}\n"
    shared = _tiles(RP, ["qs", "gs", "ks", "vs"], ["dst"])
    shared += f"var<workgroup> dpart: array<f32, {BWD_WG}>;\n"
    src = header(bufs) + helpers_for(b) + shared + b
    return KernelSource(src, "".join(m for _, _, m in bufs))


@lru_cache(maxsize=64)
def attn_dkv_tiled_kernel(
    E: int,
    rank: int,
    causal: bool,
    mask: str,
    q_type: str,
    k_type: str,
    v_type: str,
    m_type: str | None,
    do_type: str,
    dk_type: str,
    dv_type: str,
    heads: int = 0,
    dropout: bool = False,
) -> KernelSource:
    """WGSL of dk and dv by key blocks of BWD_TB (module docstring); buffers and info words as
    attn_dkv_kernel's, info[4] = key blocks per batch·head."""
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["g"]
    lay, bufs, b, R, RP, halves = _setup(E, rank, mask, strided, [
        ("q_", q_type, "r"), ("k_", k_type, "r"), ("v_", v_type, "r"),
        ("m_", m_type if mask != "none" else None, "r"), ("g_", do_type, "r"),
        ("lse", "f32", "r"), ("dd", "f32", "r"), ("dk", dk_type, "w"), ("dv", dv_type, "w"),
    ], dropout)  # fmt: skip
    TB = BWD_TB
    b += f"  let j0 = blk * {TB};\n  {{\n    let t0 = j0;\n"
    b += _stage([("ks", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
                 ("vs", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, "")],
                TB, BWD_WG, R, "S - t0", pitch=RP)  # fmt: skip
    b += "  }\n"
    b += "  let kj = vec4<i32>(j0 + ty) + vec4<i32>(0, 8, 16, 24);\n"
    b += "  let kc = min(kj, vec4<i32>(S - 1));\n"
    b += _acc(halves, ["dk", "dv"])
    # causal: queries i >= j only, so the query tiles before the block's first key are skipped
    b += f"  let ntiles = (L + {TB - 1}) / {TB};\n"
    b += f"  for (var tt = {'blk' if causal else '0'}; tt < ntiles; tt++) {{\n"
    b += f"    let t0 = tt * {TB};\n    workgroupBarrier();\n"
    b += _stage([("qs", "q_", q_type, "qb", lay.row("q"), lay.col("q"), E, " * scale"),
                 ("gs", "g_", do_type, "gb", lay.row("g"), lay.col("g"), E, "")],
                TB, BWD_WG, R, "L - t0", pitch=RP)  # fmt: skip
    b += f"    if (t < {TB}) {{\n      let ic = min(t0 + t, L - 1);\n"
    b += "      lsh[t] = lse[bh * L + ic];\n      dsh[t] = dd[bh * L + ic];\n    }\n"
    b += "    workgroupBarrier();\n"
    b += "    let qi = vec4<i32>(t0 + tx) + vec4<i32>(0, 8, 16, 24);\n"
    b += "    let qc = min(qi, vec4<i32>(L - 1));\n"
    b += "    let lq = vec4<f32>(lsh[tx], lsh[tx + 8], lsh[tx + 16], lsh[tx + 24]);\n"
    b += "    let Dq = vec4<f32>(dsh[tx], dsh[tx + 8], dsh[tx + 16], dsh[tx + 24]);\n"
    b += _mask_rows(lay, mask, m_type, "qc[{c}]", "kc[{r}]")
    b += _score_tiles("ks", "qs", "vs", "gs", R, RP)
    for r in range(4):
        ok = f"(qi < vec4<i32>(L)) & vec4<bool>(kj[{r}] < S)"
        if causal:
            ok += f" & (vec4<i32>(kj[{r}]) <= qi)"
        if mask == "bool":
            ok += f" & mk{r}"
        elif mask == "float":
            b += f"    s{r} += mk{r};\n"
        b += f"    let ok{r} = {ok} & (s{r} != vec4<f32>(-p_inf()));\n"
        b += f"    let p{r} = select(vec4<f32>(0.0), exp(s{r} - lq), ok{r});\n"
        dp, pv = f"dp{r}", f"p{r}"
        if dropout:
            keep = _keep4("bh * L + qc[{c}]", f"kc[{r}]")
            b += f"    let kept{r} = {keep};\n"
            b += f"    let pd{r} = select(vec4<f32>(0.0), p{r} * dscale, kept{r});\n"
            b += f"    let dpk{r} = select(vec4<f32>(0.0), dp{r} * dscale, kept{r});\n"
            dp, pv = f"dpk{r}", f"pd{r}"
        b += f"    let ds{r} = p{r} * ({dp} - Dq);\n"
        b += f"    let pw{r} = {pv};\n"
    b += _transpose_store("pt", "pw{r}") + _transpose_store("dst", "ds{r}")
    b += "    workgroupBarrier();\n"
    b += _products([("dv", "pt", "gs"), ("dk", "dst", "qs")], halves, RP)
    b += "  }\n"
    b += _write_rows("dk", "dk", "kj", "S", E, heads, halves, dk_type)
    b += _write_rows("dv", "dv", "kj", "S", E, heads, halves, dv_type)
    b += "}\n"
    shared = _tiles(RP, ["ks", "vs", "qs", "gs"], ["pt", "dst"])
    shared += f"var<workgroup> lsh: array<f32, {TB}>;\nvar<workgroup> dsh: array<f32, {TB}>;\n"
    src = header(bufs) + helpers_for(b) + shared + b
    return KernelSource(src, "".join(m for _, _, m in bufs))
