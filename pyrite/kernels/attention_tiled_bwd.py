"""The register-tiled attention backward: FlashAttention-2's two backward loops with both of each
tile's products as register tiles, as attention_tiled.py does for the forward.

attn_dq_kernel / attn_dkv_kernel (kernels/attention.py) give each query (key) one invocation that
walks every key (query) tile: a pair costs it 4·E multiply-adds read from workgroup memory as
broadcasts, with its own rows and accumulators in registers (4·E floats), so few invocations fit
an SM and little latency hides. Here a workgroup owns a block of TB = 32 rows (16 past E = 64)
and walks the other side TB rows at a time. Its 8·G invocations (G = TB / BWD_RPT: 16 at 2
rows each, or 8 with 4) each hold a BWD_RPT × TB/8 block of each score tile — rows ty + G·r,
columns tx + 8·c (interleaved, so a warp's reads of the padded row-major tiles fall on distinct
banks) — and BWD_RPT rows × EP/8 dims of each accumulator (dims 32·i + 4·tx .. 32·i + 4·tx + 3):

  attn_dq_tiled_kernel   a block of queries: q (pre-scaled) and dout rows staged once, with
                         D = Σ dout·out per query (written out for the other kernel); per key
                         tile S = q·kᵀ and dP = dout·vᵀ, p = exp(S - lse), dS = p·(dP - D) through
                         workgroup memory (dSᵀ), dq += dS·k;
  attn_dkv_tiled_kernel  a block of keys: k and v rows staged once; per query tile Sᵀ = k·qᵀ,
                         dPᵀ = v·doutᵀ, pᵀ and dSᵀ through workgroup memory, dv += pᵀ·dout,
                         dk += dSᵀ·q (q pre-scaled, so dk = scale·dSᵀ·q).

Tile rows are padded to RP = EP/4 + 1 vec4s (bank spread). Workgroup memory at EP = 64: four row
tiles of 32 × 17 vec4 (34 KiB) and one or two transposed 32 × (G + 1) tiles: up to 43 KiB, so
these run where a workgroup may hold 48 KiB (the H100/H200 through both implementations); at
EP = 32 up to 27 KiB (lavapipe's 32 KiB: the tests reach them there with E <= 32). Head dims
65 .. 128 (EP = 128) take blocks and tiles of TB = 16 rows (BWD_TB_WIDE: 64 invocations, each 2
rows × 2 columns of a score tile and 2 rows × 16 dims of an accumulator): 36 KiB (the tests force
TB = 16 at E <= 32 on lavapipe). Buffers, info words, masks, causal ranges, dropout bits and
output layouts are those of attn_dq_kernel and attn_dkv_kernel, so `_flash_backward` swaps
kernels and grids only.
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
    lse_word,
)
from .attention_tiled import fma_rows, tiled_ep
from .common import SG_ENABLE, KernelSource, header, helpers_for, load, store, trusted

BWD_TB = 32  # rows of a block and of each tile walked (head dims up to 64)
BWD_TB_WIDE = 16  # ... past head dim 64 (EP = 128: four row tiles of 16 x 33 vec4, 33 KiB)
BWD_MAX_E = 128
# Rows of a score block an invocation holds: 4 (8 x 8 = 64 invocations a workgroup) or 2 (16 x 8
# = 128, half the registers each, twice the warps an SM). Measured: see nn/_attention.py
# FORCE_TILED_BWD's note (2 won at every shape).
BWD_RPT = 2
# P_SHUFFLE (where the device's subgroups hold 8 or more consecutive invocations: nn/_attention
# passes `sg`): the products dq += dS·k, dv += pᵀ·dout and dk += dSᵀ·q take each walked row's
# weights from the row group's lane that holds them (subgroupShuffle: lane tx + 8·k of a block
# row owns column n = tx + 8·k) instead of a transposed tile in workgroup memory: no transposed
# stores and one barrier a tile fewer (the dk/dv kernel's dSᵀ stays where `ds_out` writes dS).
# H100, wgpu-native, 2026-12-06 (scripts/attention_bwd_ab.py, GPU time of the backward, us,
# transposed tiles / shuffles, and the same with dq from the stored dS; docs/bench/
# 2026-12-06-h100-s31-attn-bwd-shfl.json): E = 32 at 8 x 12 x 512 tokens 428 / 373 (524.6 /
# 418.5; torch CUDA 398); the GPT bench (8 x 4 x 64 x 32, causal) 24.2 / 23.7; E = 64: BERT-base
# 520 / 519 (411 / 414), 2 x 12 x 512 382 / 383 (328 / 339), causal 16 x 4096 7,553 / 7,524;
# E = 128: 914 / 929 (717 / 716), 8 x 16 x 128 571 / 587 (405 / 425). So shuffles at padded head
# dims up to SHUFFLE_MAX_E only. P_SHUFFLE True / False: everywhere / never (tests, A/B).
P_SHUFFLE = None
SHUFFLE_MAX_E = 32


def bwd_tb(E: int) -> int:
    """Rows of a block and of a walked tile of the tiled backward at head dim E."""
    return BWD_TB if E <= 64 else BWD_TB_WIDE


class _Cfg:
    """The sizes of one variant: head dim padding, block rows, rows an invocation holds and the
    columns it takes (TB / 8), workgroup size."""

    def __init__(self, E: int, rpt: int, tb: int | None = None):
        if rpt not in (2, 4):
            raise ValueError(f"pyrite: internal: rows an invocation holds: 2 or 4, not {rpt}")
        self.TB = tb or bwd_tb(E)
        if self.TB not in (16, 32):
            raise ValueError(f"pyrite: internal: tiled backward blocks of 16 or 32, not {self.TB}")
        self.EP = tiled_ep(E)
        self.R = self.EP // 4  # vec4s of a padded row
        self.RP = self.R + 1  # ... of a staged (row-major) tile row
        self.N = rpt
        self.C = self.TB // 8  # columns an invocation takes: tx + 8·k, k < C
        self.G = self.TB // rpt  # groups of rows: invocation (ty, tx) holds rows ty + G·r
        self.WG = 8 * self.G
        self.T = self.G + 1  # vecN a row of a transposed tile (pᵀ, dSᵀ), padded by one
        self.vec = f"vec{rpt}"  # (over an invocation's rows)
        self.cv = f"vec{self.C}"  # (over its columns)
        self.halves = "abcd"[: self.EP // 32]  # (parts of 32 dims: dims 32·i + 4·tx ..)

    def rows(self, first: str) -> str:
        """WGSL vecN<i32>: the rows an invocation holds, from `first`."""
        offs = ", ".join(str(self.G * r) for r in range(self.N))
        return f"{self.vec}<i32>({first} + ty) + {self.vec}<i32>({offs})"

    def cols(self, first: str) -> str:
        """WGSL vecC<i32>: the columns an invocation takes, from `first`."""
        offs = ", ".join(str(8 * k) for k in range(self.C))
        return f"{self.cv}<i32>({first} + tx) + {self.cv}<i32>({offs})"

    def cgather(self, arr: str) -> str:
        """WGSL vecC<f32>: workgroup array `arr` at the invocation's columns."""
        return f"{self.cv}<f32>({', '.join(f'{arr}[tx + {8 * k}]' for k in range(self.C))})"


def bwd_wg(tb: int, rpt: int | None = None) -> int:
    """Invocations a workgroup of the tiled backward takes with blocks of `tb` rows."""
    return 8 * tb // (rpt or BWD_RPT)


def bwd_shared_bytes(E: int, rpt: int | None = None, tb: int | None = None) -> int:
    """Workgroup memory of the larger of the two kernels (the dk/dv one) at head dim E."""
    c = _Cfg(E, rpt or BWD_RPT, tb)
    return 4 * c.TB * c.RP * 16 + 2 * c.TB * c.T * 4 * c.N + 3 * c.TB * 4  # (+ lsh, lgh, dsh)


def bwd_loop_iterations(n: int, E: int, rpt: int | None = None, tb: int | None = None) -> int:
    """Loop iterations of one invocation of either kernel walking n rows of the other side: the
    staging loop, the D loop, and each tile's head-dim and row loops, with their exit tests."""
    c = _Cfg(E, rpt or BWD_RPT, tb)
    stage = -(-c.TB * c.R // c.WG) + 1
    return 2 * stage + -(-n // c.TB) * (c.R + 1 + c.TB + 1 + 1) + 1


def _walk(c: _Cfg, tiles, count: str, first: str, body: str) -> str:
    """WGSL: the loop over the walked tiles (`ntiles` of them, from tile `first`): each
    invocation reads its vec4s of the tile's rows from `t0` (`count` of them valid, > 0) of every
    (tile, buffer, storage type, base, row stride, col stride, E, multiplier) into registers,
    then, after a barrier (the last tile's reads are done), stores them into the padded tiles;
    then `body` (which starts with its own barrier). (Issuing the next tile's reads before this
    tile's products, as the forward's PREFETCH does, gained nothing here: H100, 2026-12-05,
    docs/bench/2026-12-05-h100-attn-bwd-2.json.)"""
    n = c.TB * c.R // c.WG
    decl, read, put = "", "", ""
    for u in range(n):
        decl += (
            f"  let sr{u} = (t + {u * c.WG}) / {c.R};\n  let sc{u} = (t + {u * c.WG}) % {c.R};\n"
        )
    for name, buf, stype, base, rs, cs, E, mul in tiles:
        for u in range(n):
            comps = []
            for k in range(4):
                idx = f"{base} + (t0 + min(sr{u}, {count} - 1)) * {rs} + min(sc{u} * 4 + {k}, {E - 1}) * {cs}"
                comps.append(f"select(0.0, {load(f'{buf}[{idx}]', stype, 'f32')}, "
                             f"sr{u} < {count} && sc{u} * 4 + {k} < {E})")  # fmt: skip
            read += f"    let pf{name}{u} = vec4<f32>({', '.join(comps)}){mul};\n"
            put += f"    {name}[sr{u} * {c.RP} + sc{u}] = pf{name}{u};\n"
    b = decl + f"  for (var tt = {first}; tt < ntiles; tt++) {{\n    let t0 = tt * {c.TB};\n"
    return b + read + "    workgroupBarrier();\n" + put + body + "  }\n"


def _acc(c: _Cfg, names) -> str:
    return "".join(f"  var {n}{r}{h} = vec4<f32>(0.0);\n"
                   for n in names for r in range(c.N) for h in c.halves)  # fmt: skip


def _score_tiles(c: _Cfg, rows_a: str, cols_a: str, rows_b: str, cols_b: str) -> str:
    """WGSL: s{r} = row ty + G·r of tile `rows_a` · columns tx + 8·k of `cols_a` (a vecC over
    the columns), and dp{r} the same of `rows_b` and `cols_b`, over the padded head dim."""
    b = "".join(f"    var s{r} = {c.cv}<f32>(0.0);\n    var dp{r} = {c.cv}<f32>(0.0);\n"
                for r in range(c.N))  # fmt: skip
    b += f"    for (var e = 0; e < {c.R}; e++) {{\n"
    for r in range(c.N):
        b += f"      let a{r} = {rows_a}[(ty + {c.G * r}) * {c.RP} + e];\n"
        b += f"      let b{r} = {rows_b}[(ty + {c.G * r}) * {c.RP} + e];\n"
    for k in range(c.C):
        b += f"      let x{k} = {cols_a}[(tx + {8 * k}) * {c.RP} + e];\n"
        b += f"      let y{k} = {cols_b}[(tx + {8 * k}) * {c.RP} + e];\n"
    for r in range(c.N):
        dots = ", ".join(f"dot(a{r}, x{k})" for k in range(c.C))
        b += f"      s{r} += {c.cv}<f32>({dots});\n"
        dots = ", ".join(f"dot(b{r}, y{k})" for k in range(c.C))
        b += f"      dp{r} += {c.cv}<f32>({dots});\n"
    return b + "    }\n"


def _transpose_store(c: _Cfg, tile: str, vals: str) -> str:
    """WGSL: {tile}[(tx + 8k) · T + ty] = column k of the invocation's rows of `vals` (a format
    of r), as a vecN over its rows."""
    b = ""
    for k in range(c.C):
        comps = ", ".join(f"{vals.format(r=r)}[{k}]" for r in range(c.N))
        b += f"    {tile}[(tx + {8 * k}) * {c.T} + ty] = {c.vec}<f32>({comps});\n"
    return b


def _products(c: _Cfg, pairs) -> str:
    """WGSL: over the tile's rows n, acc{r}{h} += w[r] · row n of `src` (dims of part h), for
    each (acc, transposed weight tile, source row tile) of `pairs`."""
    b = f"    for (var n = 0; n < {c.TB}; n++) {{\n"
    for acc, wt, src in pairs:
        b += f"      let w{acc} = {wt}[n * {c.T} + ty];\n"
        for i, h in enumerate(c.halves):
            b += f"      let r{acc}{h} = {src}[n * {c.RP} + {8 * i} + tx];\n"
        b += fma_rows(c.N, c.halves, acc, lambda r: f"w{acc}[{r}]", lambda h: f"r{acc}{h}")
    return b + "    }\n"


def _products_shuffled(c: _Cfg, pairs) -> str:
    """WGSL: _products' sums with the weights taken from the registers of the row group's lanes
    (P_SHUFFLE): for each (acc, weights, source row tile) of `pairs`, `weights` a format of r
    naming the invocation's vecC of its row r's columns tx + 8·k."""
    b = "    let sgb = (u32(t) % sgs) & ~7u;\n"  # (the row group's first lane in the subgroup)
    b += "    for (var m = 0; m < 8; m++) {\n      let sl = sgb | u32(m);\n"
    for acc, wt, src in pairs:
        for r in range(c.N):
            b += f"      let w{acc}{r} = subgroupShuffle({wt.format(r=r)}, sl);\n"
    for k in range(c.C):  # (walked row n = m + 8·k: lane m's column k)
        for acc, _, src in pairs:
            for i, h in enumerate(c.halves):
                b += f"      let r{acc}{h}{k} = {src}[(m + {8 * k}) * {c.RP} + {8 * i} + tx];\n"
            b += fma_rows(
                c.N, c.halves, acc, lambda r: f"w{acc}{r}[{k}]", lambda h: f"r{acc}{h}{k}"
            )
    return b + "    }\n"


def _write_rows(c: _Cfg, acc: str, buf: str, rows: str, n: str, E: int, heads: int, stype,
                mul: str = "") -> str:  # fmt: skip
    """WGSL: rows `rows`[r] (< n) of accumulator `acc` into output `buf` (dims < E)."""
    b = ""
    for r in range(c.N):
        b += f"  if ({rows}[{r}] < {n}) {{\n    let i = {rows}[{r}];\n"
        b += f"    let wb = {_row_base(n, 'i', E, heads)};\n"
        for i, h in enumerate(c.halves):
            for k in range(4):
                d = f"{32 * i} + tx * 4 + {k}"
                v = store(f"{acc}{r}{h}[{k}]{mul}", "f32", stype)
                b += f"    if ({d} < {E}) {{ {buf}[wb + {d}] = {v}; }}\n"
        b += "  }\n"
    return b


def _mask_rows(c: _Cfg, lay, mask: str, m_type, qrow: str, kcol: str) -> str:
    """WGSL: mk{r} (a vecC over the columns k) the mask at query `qrow` and key `kcol`
    (formats of r and k)."""
    if mask == "none":
        return ""
    mr, mc = lay.pos["m"] + 1, lay.pos["m"] + 2
    b = ""
    for r in range(c.N):
        at = [f"m_[mb + {qrow.format(r=r, k=k)} * info[{mr}] + {kcol.format(r=r, k=k)} * info[{mc}]]"
              for k in range(c.C)]  # fmt: skip
        if mask == "bool":
            b += f"    let mk{r} = {c.cv}<bool>({', '.join(a + ' != 0u' for a in at)});\n"
        else:
            b += f"    let mk{r} = {c.cv}<f32>({', '.join(load(a, m_type, 'f32') for a in at)});\n"
    return b


def _keep(c: _Cfg, row: str, col: str) -> str:
    """WGSL vecC<bool>: dropout's keep bits of the invocation's pairs (row, col) (formats of k)."""
    bits = ", ".join(dropout_keep(row.format(k=k), col.format(k=k)) for k in range(c.C))
    return f"{c.cv}<bool>({bits})"


def _setup(E, rpt, tb, rank, mask: str, strided: list, bufs, dropout: bool, order: int = 0,
           sg: int = 0):  # fmt: skip
    if E > BWD_MAX_E:
        raise ValueError(f"pyrite: internal: the tiled attention backward takes E <= {BWD_MAX_E}")
    _check(E, 8, mask)
    c = _Cfg(E, rpt, tb)
    lay = _Layout(rank, strided)
    b = _entry(c.WG, order, bool(sg)) + lay.bases(strided)
    if dropout:
        b += drop_setup(lay.words)
    b += "  let t = i32(lid.x);\n  let ty = t / 8;\n  let tx = t % 8;\n"
    return c, lay, _buffers(bufs), b


def _ds_rows(c: _Cfg, values) -> str:
    """WGSL: for each (buffer, value) of `values`, the buffer (row-major (bh, L, S)) at queries
    t0 + ql and keys j0 + kl of the tile, kl fastest over consecutive invocations, each value
    in terms of ql, kl."""
    b = f"    for (var e = t; e < {c.TB * c.TB}; e += {c.WG}) {{\n"
    b += f"      let ql = e / {c.TB};\n      let kl = e % {c.TB};\n"
    b += "      if (t0 + ql < L && j0 + kl < S) {\n"
    b += "        let at = (bh * L + t0 + ql) * S + j0 + kl;\n"
    b += "".join(f"        {buf}[at] = {value};\n" for buf, value in values)
    return b + "      }\n    }\n"


def _tiles(c: _Cfg, rows, transposed) -> str:
    s = "".join(f"var<workgroup> {n}: array<vec4<f32>, {c.TB * c.RP}>;\n" for n in rows)
    return s + "".join(f"var<workgroup> {n}: array<{c.vec}<f32>, {c.TB * c.T}>;\n"
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
    rpt: int = 2,
    heavy_first: bool = False,
    tb: int | None = None,
    sg: int = 0,
) -> KernelSource:
    """WGSL of dq and D by query blocks of `tb` (default bwd_tb(E); module docstring); buffers
    and info words as attn_dq_kernel's, info[4] = query blocks per batch·head. `rpt`: see
    BWD_RPT (the caller passes it, so the cache keys on it). `sg` (the device's `subgroups`, 0
    for none): the products by shuffles (P_SHUFFLE)."""
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["o", "g"]
    c, lay, bufs, b = _setup(E, rpt, tb, rank, mask, strided, [
        ("q_", q_type, "r"), ("k_", k_type, "r"), ("v_", v_type, "r"),
        ("m_", m_type if mask != "none" else None, "r"), ("o_", o_type, "r"),
        ("g_", do_type, "r"), ("lse", "f32", "r"), ("dq", dq_type, "w"), ("dd", "f32", "w"),
    ], dropout, 1 if heavy_first and causal else 0, sg)  # fmt: skip
    TB, V, CV = c.TB, c.vec, c.cv
    b += f"  let q0 = blk * {TB};\n  {{\n    let t0 = q0;\n"
    b += _stage([("qs", "q_", q_type, "qb", lay.row("q"), lay.col("q"), E, " * scale"),
                 ("gs", "g_", do_type, "gb", lay.row("g"), lay.col("g"), E, "")],
                TB, c.WG, c.R, "L - t0", pitch=c.RP)  # fmt: skip
    b += "  }\n  workgroupBarrier();\n"
    # D = Σ dout·out of each query: P = WG / TB invocations a row, every P-th vec4 of the dims
    P = c.WG // TB
    b += f"  {{\n    let row = t / {P};\n    let oi = min(q0 + row, L - 1);\n    var acc = 0.0;\n"
    b += f"    for (var e = t % {P}; e < {c.R}; e += {P}) {{\n"
    comps = []
    for k in range(4):
        o = load(f"o_[ob + oi * {lay.row('o')} + min(e * 4 + {k}, {E - 1}) * {lay.col('o')}]",
                 o_type, "f32")  # fmt: skip
        comps.append(f"select(0.0, {o}, e * 4 + {k} < {E})")
    b += f"      acc += dot(gs[row * {c.RP} + e], vec4<f32>({', '.join(comps)}));\n    }}\n"
    b += "    dpart[t] = acc;\n  }\n  workgroupBarrier();\n"
    b += f"  let qi = {c.rows('q0')};\n"
    b += f"  let qc = min(qi, {V}<i32>(L - 1));\n"
    b += f"  var Dq = {V}<f32>(0.0);\n  var lq = {V}<f32>(0.0);\n  var lg = {V}<f32>(0.0);\n"
    for r in range(c.N):
        parts = " + ".join(f"dpart[{P} * (ty + {c.G * r}) + {p}]" for p in range(P))
        b += f"  Dq[{r}] = {parts};\n"
        b += f"  lq[{r}] = {lse_word(f'bh * L + qc[{r}]', 0)};\n"
        b += f"  lg[{r}] = {lse_word(f'bh * L + qc[{r}]', 1)};\n"
    b += "  if (tx == 0) {\n"
    for r in range(c.N):
        b += f"    if (qi[{r}] < L) {{ dd[bh * L + qi[{r}]] = Dq[{r}]; }}\n"
    b += "  }\n"
    b += _acc(c, ["dq"])
    b += f"  let kend = {f'min(S, q0 + {TB})' if causal else 'S'};\n"
    b += f"  let ntiles = (kend + {TB - 1}) / {TB};\n"
    body = "    workgroupBarrier();\n"
    body += f"    let kj = {c.cols('t0')};\n"
    body += f"    let kc = min(kj, {CV}<i32>(S - 1));\n"
    body += _mask_rows(c, lay, mask, m_type, "qc[{r}]", "kc[{k}]")
    body += _score_tiles(c, "qs", "ks", "gs", "vs")
    for r in range(c.N):
        ok = f"(kj < {CV}<i32>(kend))"
        if causal:
            ok += f" & (kj <= {CV}<i32>(qi[{r}]))"
        if mask == "bool":
            ok += f" & mk{r}"
        elif mask == "float":
            body += f"    s{r} += mk{r};\n"
        body += f"    let ok{r} = {ok} & (s{r} != {CV}<f32>(-p_inf()));\n"
        pq = f"exp((s{r} - {CV}<f32>(lq[{r}])) - {CV}<f32>(lg[{r}]))"
        body += f"    let p{r} = select({CV}<f32>(0.0), {pq}, ok{r});\n"
        dp = f"dp{r}"
        if dropout:  # (dP of the kept pairs, scaled; D holds the dropout already)
            keep = _keep(c, f"bh * L + qc[{r}]", "kj[{k}]")
            body += f"    let dpk{r} = select({CV}<f32>(0.0), dp{r} * dscale, {keep});\n"
            dp = f"dpk{r}"
        body += f"    let ds{r} = p{r} * ({dp} - {CV}<f32>(Dq[{r}]));\n"
    if sg:
        body += _products_shuffled(c, [("dq", "ds{r}", "ks")])
    else:
        body += _transpose_store(c, "dst", "ds{r}")
        body += "    workgroupBarrier();\n"
        body += _products(c, [("dq", "dst", "ks")])
    walked = [("ks", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
              ("vs", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, "")]  # fmt: skip
    b += _walk(c, walked, "(kend - t0)", "0", body)
    b += _write_rows(c, "dq", "dq", "qi", "L", E, heads, dq_type, " * scale")
    b += "}\n"
    shared = _tiles(c, ["qs", "gs", "ks", "vs"], [] if sg else ["dst"])
    shared += f"var<workgroup> dpart: array<f32, {c.WG}>;\n"
    src = (SG_ENABLE if sg == 2 else "") + header(bufs) + helpers_for(b) + shared + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


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
    rpt: int = 2,
    heavy_first: bool = False,
    tb: int | None = None,
    ds_out: bool = False,
    sg: int = 0,
    p_out: bool = False,
) -> KernelSource:
    """WGSL of dk and dv by key blocks of `tb` (default bwd_tb(E); module docstring); buffers and
    info words as attn_dkv_kernel's, info[4] = key blocks per batch·head. `rpt`: as
    attn_dq_tiled_kernel's, and `sg`.

    `ds_out`: also write scale·dS (f32; dS as dk sums it, dropout and masks applied) to a last
    buffer `dsg`, row-major (batch·head, L, S) contiguous, every pair written (0 where
    causality skips a query tile), so dq = scale·dS·k is one batched GEMM instead of
    attn_dq_tiled_kernel's recomputation of S and dP (nn/_attention.py DS_GEMM). The values go
    out through the dSᵀ tile, a query row's TB keys by consecutive invocations.

    `p_out` (with `ds_out`): write the weights P (dropout applied, as dv sums them) to a buffer
    `pg` laid out as dS, before `dsg`, and leave dk and dv to GEMMs (dv = Pᵀ·dout, dk =
    (scale·dS)ᵀ·q: nn/_attention.py GEMM_PRODUCTS): no accumulators, no products, no dk/dv
    buffers; the kernel is the scores, dP and the elementwise step of each tile."""
    if p_out and not ds_out:
        raise ValueError("pyrite: internal: the tiled backward's p_out needs ds_out")
    if p_out:
        sg = 0  # (no products to shuffle; P and dS go out through the transposed tiles)
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["g"]
    outs = [("pg", "f32", "w")] if p_out else [("dk", dk_type, "w"), ("dv", dv_type, "w")]
    c, lay, bufs, b = _setup(E, rpt, tb, rank, mask, strided, [
        ("q_", q_type, "r"), ("k_", k_type, "r"), ("v_", v_type, "r"),
        ("m_", m_type if mask != "none" else None, "r"), ("g_", do_type, "r"),
        ("lse", "f32", "r"), ("dd", "f32", "r")] + outs
        + ([("dsg", "f32", "w")] if ds_out else []), dropout,
        2 if heavy_first and causal else 0, sg)  # fmt: skip
    TB, CV = c.TB, c.cv
    b += f"  let j0 = blk * {TB};\n  {{\n    let t0 = j0;\n"
    b += _stage([("ks", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
                 ("vs", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, "")],
                TB, c.WG, c.R, "S - t0", pitch=c.RP)  # fmt: skip
    b += "  }\n"
    b += f"  let kj = {c.rows('j0')};\n"
    b += f"  let kc = min(kj, {c.vec}<i32>(S - 1));\n"
    if not p_out:
        b += _acc(c, ["dk", "dv"])
    # causal: queries i >= j only, so the query tiles before the block's first key are skipped
    b += f"  let ntiles = (L + {TB - 1}) / {TB};\n"
    body = f"    if (t < {TB}) {{\n      let ic = min(t0 + t, L - 1);\n"
    body += f"      lsh[t] = {lse_word('bh * L + ic', 0)};\n"
    body += f"      lgh[t] = {lse_word('bh * L + ic', 1)};\n"
    body += "      dsh[t] = dd[bh * L + ic];\n    }\n"
    body += "    workgroupBarrier();\n"
    body += f"    let qi = {c.cols('t0')};\n"
    body += f"    let qc = min(qi, {CV}<i32>(L - 1));\n"
    body += f"    let lq = {c.cgather('lsh')};\n    let lg = {c.cgather('lgh')};\n"
    body += f"    let Dq = {c.cgather('dsh')};\n"
    body += _mask_rows(c, lay, mask, m_type, "qc[{k}]", "kc[{r}]")
    body += _score_tiles(c, "ks", "qs", "vs", "gs")
    for r in range(c.N):
        ok = f"(qi < {CV}<i32>(L)) & {CV}<bool>(kj[{r}] < S)"
        if causal:
            ok += f" & ({CV}<i32>(kj[{r}]) <= qi)"
        if mask == "bool":
            ok += f" & mk{r}"
        elif mask == "float":
            body += f"    s{r} += mk{r};\n"
        body += f"    let ok{r} = {ok} & (s{r} != {CV}<f32>(-p_inf()));\n"
        body += f"    let p{r} = select({CV}<f32>(0.0), exp((s{r} - lq) - lg), ok{r});\n"
        dp, pv = f"dp{r}", f"p{r}"
        if dropout:
            keep = _keep(c, "bh * L + qc[{k}]", f"kc[{r}]")
            body += f"    let kept{r} = {keep};\n"
            body += f"    let pd{r} = select({CV}<f32>(0.0), p{r} * dscale, kept{r});\n"
            body += f"    let dpk{r} = select({CV}<f32>(0.0), dp{r} * dscale, kept{r});\n"
            dp, pv = f"dpk{r}", f"pd{r}"
        body += f"    let ds{r} = p{r} * ({dp} - Dq);\n"
        body += f"    let pw{r} = {pv};\n"
    if not sg:
        body += _transpose_store(c, "pt", "pw{r}")
    if ds_out or not sg:
        body += _transpose_store(c, "dst", "ds{r}") + "    workgroupBarrier();\n"
    if ds_out:  # dst[ql · T + g][r] is dS of query t0 + ql and key j0 + g + G·r (pt: P's)
        at = "[ql * {T} + kl % {G}][kl / {G}]".format(T=c.T, G=c.G)
        outs = ([("pg", "pt" + at)] if p_out else []) + [("dsg", f"dst{at} * scale")]
        body += _ds_rows(c, outs)
    if not p_out:  # (else dk and dv are the caller's GEMMs)
        pairs = [("dv", "pw{r}" if sg else "pt", "gs"), ("dk", "ds{r}" if sg else "dst", "qs")]
        body += (_products_shuffled if sg else _products)(c, pairs)
    walked = [("qs", "q_", q_type, "qb", lay.row("q"), lay.col("q"), E, " * scale"),
              ("gs", "g_", do_type, "gb", lay.row("g"), lay.col("g"), E, "")]  # fmt: skip
    if ds_out and causal:  # the query tiles before the block's first key: dS (and P) are 0
        b += f"  for (var tt = 0; tt < blk; tt++) {{\n    let t0 = tt * {TB};\n"
        b += _ds_rows(c, [(n, "0.0") for n in (["pg"] if p_out else []) + ["dsg"]]) + "  }\n"
    b += _walk(c, walked, "(L - t0)", "blk" if causal else "0", body)
    if not p_out:
        b += _write_rows(c, "dk", "dk", "kj", "S", E, heads, dk_type)
        b += _write_rows(c, "dv", "dv", "kj", "S", E, heads, dv_type)
    b += "}\n"
    transposed = ([] if sg else ["pt"]) + (["dst"] if ds_out or not sg else [])
    shared = _tiles(c, ["ks", "vs", "qs", "gs"], transposed)
    shared += f"var<workgroup> lsh: array<f32, {TB}>;\nvar<workgroup> lgh: array<f32, {TB}>;\n"
    shared += f"var<workgroup> dsh: array<f32, {TB}>;\n"
    src = (SG_ENABLE if sg == 2 else "") + header(bufs) + helpers_for(b) + shared + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))
