"""Fused (flash-style) attention: softmax(q·kᵀ·scale + mask)·v without the L×S score matrix.

Three kernels, the FlashAttention-2 split (Dao, 2023), one invocation per query (or key) row:

  attn_fwd_kernel   one workgroup per (batch·head, block of BQ queries). Keys and values are
                    staged through workgroup memory BK rows at a time; each invocation keeps its
                    (pre-scaled) query row, its output accumulator and its running (max m, sum l)
                    in registers, rescaling the accumulator when the max rises (online softmax).
                    Writes out = acc / l and the log-sum-exp m + log(l) per query (f32) for the
                    backward; a query whose keys are all masked (l = 0) gives 0 and lse = +inf
                    (so the backward's exp(s - lse) is 0 for it: torch's safe softmax).
  attn_dq_kernel    the same walk over key tiles, recomputing p = exp(s - lse): D = Σ dout·out
                    of its row, dq = scale·Σ p·(dout·v - D)·k; writes dq and D (f32).
  attn_dkv_kernel   one workgroup per (batch·head, block of BN keys), query rows and their dout
                    staged in tiles: dv = Σ p·dout, dk = scale·Σ p·(dout·v - D)·q.

Two more forwards live beside this file: attention_tiled.py (a block of queries a workgroup, both
products as register tiles) and attention_decode.py (few queries over many keys); they share this
file's layout, buffers, masks, dropout words and merge kernel.

The head dim E is baked into the text (padded to EP, a multiple of 4, with zeros) and every loop
over it is unrolled into vec4 dot products, so an invocation loops once per key (lavapipe's loop
budget: see `*_loop_iterations`). Causal masking (top-left aligned: key j is seen by query i iff
j <= i, also for L != S) skips the key tiles past a query block's last query. Masks: "none",
"bool" (u32 storage, 0 = masked out) or "float" (added to the scores), read per (query, key)
through their strides (broadcast dims have stride 0).

Operands are read through their strides: each strided operand X has info words
  [X offset, X row stride (the L or S dim), X column stride (the E dim; the S dim for the mask),
   X's strides over the `rank` leading dims]
after the common words [0] batch·heads  [1] L  [2] S  [3] scale (f32 bits)  [4] blocks per
batch·head, then the `rank` leading sizes; the outputs (out, lse, dq, D, dk, dv) are contiguous.
Storage f32 or f16 (the arithmetic and the staged tiles are f32).
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, ENTRY_SG, KernelSource, header, helpers_for, load, store, trusted

MASKS = ("none", "bool", "float")
MAX_HEAD_DIM = 128  # past this the per-invocation registers (2·E floats) stop making sense
TILE_BYTES = 16384  # WebGPU's default maxComputeWorkgroupStorageSize

# Queries (keys, in the dk/dv kernel) per workgroup: one invocation each; smaller for short rows
# (block_for). Measured on lavapipe (2 shared cores, best of 7, ms; forward / forward+backward):
#   BLOCK             64            32            16
#   (8, 4, 64, 32)    5.0 / 14.7    4.6 / 14.4    5.3 / 16.9     causal
#   (2, 12, 128, 64)  35.1 / 102.9  36.9 / 108.6  41.4 / 126.6   bool padding mask
# lavapipe runs a group's invocations in turn (8 lanes at a time), so the block matters little
# there beyond the tile loads it shares; a GPU wants 64 (two warps) to hide those loads, and 64
# was no worse here. The forward's key loop has uniform control flow (a masked pair gets p = 0,
# the running max updated by select, two exps a key) rather than `continue` and a branch on "did
# the max rise" (one exp): on lavapipe the padded BERT shape went 35.6 -> 30.5 ms with it and the
# causal one stayed ~5 ms. The backward kernels keep `continue` for masked pairs: uniform there
# cost the causal forward+backward 15.3 -> 17.7 ms and gained nothing on the padded one.
# (These machines' cores are shared: single measurements move by 20%; the best of 7-9 runs.)
BLOCK = 64


def padded_dim(E: int) -> int:
    return -(-E // 4) * 4


def tile_rows(ep: int, tiles: int = 2, cap: int = 64) -> int:
    """Rows of a staged tile: the most (a power of two, up to `cap`) that fit `tiles` tiles of
    ep f32 in TILE_BYTES (E = 64: 32 rows of k and of v; E = 128: 16). Measured on lavapipe
    (ms, forward / forward+backward, rows capped at 64/32/16/8): (8, 4, 64, 32) causal
    4.9/14.6, 5.3/14.5, 5.1/16.1, 8.9/22.4; (2, 12, 128, 64) padding mask (32 fit) 36.2/105.9,
    16: 35.9/106.5, 8: 37.9/110.9 — flat down to 16 rows, worse at 8 (a barrier pair a tile):
    the most that fit, which also means the fewest barriers on a GPU."""
    rows = cap
    while rows > 4 and tiles * rows * ep * 4 > TILE_BYTES:
        rows //= 2
    return rows


def _tile_loop_iterations(n_tiles: int, rows: int, block: int, ep: int) -> int:
    # per tile: the cooperative load (ceil(rows·C / block) + its exit test), the row loop
    # (rows + exit test), the tile loop's own test; then the final exit test
    load = -(-(rows * ep // 4) // block) + 1
    return n_tiles * (load + rows + 2) + 1


def fwd_loop_iterations(S: int, E: int, block: int = BLOCK) -> int:
    """Loop iterations of one invocation of attn_fwd_kernel / attn_dq_kernel over S keys."""
    ep = padded_dim(E)
    bk = tile_rows(ep)
    return _tile_loop_iterations(-(-S // bk), bk, block, ep)


def dkv_loop_iterations(L: int, E: int, block: int = BLOCK) -> int:
    """Loop iterations of one invocation of attn_dkv_kernel over L queries."""
    ep = padded_dim(E)
    bt = tile_rows(ep)
    return _tile_loop_iterations(-(-L // bt), bt, block, ep)


class _Layout:
    """Info word positions: the common words, the leading sizes, then each strided operand."""

    def __init__(self, rank: int, operands):
        self.rank = rank
        self.sizes = 5
        self.pos = {}
        w = 5 + rank
        for name in operands:
            self.pos[name] = w
            w += 3 + rank
        self.words = w

    def off(self, name):
        return f"info[{self.pos[name]}]"

    def row(self, name):
        return f"info[{self.pos[name] + 1}]"

    def col(self, name):
        return f"info[{self.pos[name] + 2}]"

    def bases(self, names) -> str:
        """WGSL: `var <name>b` the base offset of every strided operand for batch·head `bh`."""
        s = "  var r = i32(bh);\n"
        for n in names:
            s += f"  var {n}b = {self.off(n)};\n"
        for d in range(self.rank - 1, -1, -1):
            s += f"  {{ let c = r % info[{self.sizes + d}]; r = r / info[{self.sizes + d}];"
            for n in names:
                s += f" {n}b += c * info[{self.pos[n] + 3 + d}];"
            s += " }\n"
        return s


# Causal attention's blocks differ in work: the last query blocks see the most keys, the first
# key blocks the most queries. With HEAVY_FIRST the causal kernels number their workgroups with
# the batch·heads inside (the GPU starts workgroups about in order of their number) and the
# heaviest blocks first, so the light ones fill the tail instead of a few heavy ones running on
# alone at the end (FlashAttention-2's order). H100, wgpu-native, 2026-12-05 (GPU time, us, old
# order -> heaviest first; docs/bench/2026-12-05-h100-attn-fwd-heavy-first.json, -attn-bwd-3):
# the tiled forward at causal 16 x 4096 x 64 2,616 -> 2,323 and 8 x 12 x 512 x 32 161 -> 134;
# the per-row backward there 13,421 -> 10,083 and 640 -> 446, the tiled one 9,508 -> 9,475 and
# 660 -> 596 (non-causal shapes keep their order: unchanged).
HEAVY_FIRST = True


def _entry(block: int, order: int = 0, sg: bool = False) -> str:
    """The attention kernels' entry: workgroup `flat` → (batch·head bh, block blk) with bh
    outer (`order` 0), or bh inner with the blocks from the last (1: a causal query block) or
    from the first (2: a causal key block): see HEAVY_FIRST. `sg`: with the subgroup size
    `sgs`."""
    split = (
        "  let bh = flat / nblk;\n  let blk = flat % nblk;\n",
        "  let bh = flat % info[0];\n  let blk = nblk - 1 - flat / info[0];\n",
        "  let bh = flat % info[0];\n  let blk = flat / info[0];\n",
    )[order]
    return (ENTRY_SG if sg else ENTRY).format(wg=block) + (
        "  let flat = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);\n"
        "  let nblk = info[4];\n"
        "  if (flat >= info[0] * nblk) { return; }\n"  # uniform: the whole group leaves
        + split
        + "  let L = info[1];\n  let S = info[2];\n  let scale = bitcast<f32>(info[3]);\n"
    )


def _row_vec(var: str, buf: str, stype: str, base: str, col: str, E: int, mul: str = "") -> str:
    """`var <var>c = vec4(...)` for every 4-column chunk c of a row (columns >= E read as 0)."""
    out = ""
    for c in range(padded_dim(E) // 4):
        comps = []
        for k in range(4):
            e = 4 * c + k
            comps.append(load(f"{buf}[{base} + {e} * {col}]", stype, "f32") if e < E else "0.0")
        out += f"  var {var}{c} = vec4<f32>({', '.join(comps)}){mul};\n"
    return out


def _dot(a: str, b, C: int) -> str:
    """Σ over chunks of dot(a_c, b(c)): `a` a register row prefix, `b` a function of c."""
    return " + ".join(f"dot({a}{c}, {b(c)})" for c in range(C))


def _stage(tiles, rows: int, block: int, C: int, count: str, pitch: int | None = None) -> str:
    """Cooperative load of `rows` rows (from row `t0` on) into workgroup tiles. `tiles`: (tile
    name, buffer, storage type, base expr, row stride expr, col stride expr, E, multiplier);
    `count` the valid rows (> 0); `pitch`: vec4s a tile row takes (default C: packed rows)."""
    s = f"    for (var x = i32(lid.x); x < {rows * C}; x += {block}) {{\n"
    s += f"      let rr = x / {C};\n      let cc = (x % {C}) * 4;\n"
    s += f"      let ok = rr < {count};\n      let rc = t0 + min(rr, {count} - 1);\n"
    for name, buf, stype, base, rs, cs, E, mul in tiles:
        comps = []
        for k in range(4):
            # indices clamped into the operand (rows past the end, columns past E read as 0)
            v = load(f"{buf}[{base} + rc * {rs} + min(cc + {k}, {E - 1}) * {cs}]", stype, "f32")
            comps.append(f"select(0.0, {v}, ok && cc + {k} < {E})")
        at = "x" if pitch is None else f"rr * {pitch} + x % {C}"
        s += f"      {name}[{at}] = vec4<f32>({', '.join(comps)}){mul};\n"
    s += "    }\n"
    return s


def _mask_test(mask: str, mtype: str | None, i: str, j: str) -> str:
    """WGSL: clear `ok` for a pair a bool mask leaves out; add a float mask to s."""
    if mask == "bool":
        return f"      ok = ok && m_[mb + {i} * info[{{mr}}] + {j} * info[{{mc}}]] != 0u;\n"
    if mask == "float":
        v = load(f"m_[mb + {i} * info[{{mr}}] + {j} * info[{{mc}}]]", mtype, "f32")
        return f"      s += {v};\n"
    return ""


def lse_store(row: str, m: str, l: str, pad: str = "  ") -> str:
    """WGSL: query `row`'s saved log-sum-exp, as its two parts (LSE_WORDS words a row): the
    scores' maximum m (+inf where l = 0: every key masked) and log(l) (0 there). Not their sum:
    at |m| >= ~1e7 (a row whose keys all carry one huge negative float mask value, as Hugging
    Face's finfo.min padding) the float32 sum m + log(l) rounds log(l) away, and the backward's
    p = exp((s - m) - log(l)) would come out 1 for every key, not 1/S."""
    return (
        f"{pad}{lse_word(row, 0)} = select({m}, p_inf(), {l} == 0.0);\n"
        f"{pad}{lse_word(row, 1)} = select(log({l}), 0.0, {l} == 0.0);\n"
    )


LSE_WORDS = 2  # f32 words of a query's saved log-sum-exp (lse_store)


def lse_word(row: str, part: int) -> str:
    """WGSL: part 0 (the maximum) or 1 (log of the sum) of query `row`'s saved log-sum-exp."""
    return f"lse[{LSE_WORDS} * ({row}) + {part}]"


def _row_base(n: str, row: str, E: int, heads: int) -> str:
    """WGSL: the first element of output row `row` of batch·head `bh`. Contiguous (nbh, n, E),
    or with `heads` (the last leading dim) inside the row dim: (batch, n, heads, E), the layout a
    model's (B, T, H, E) view transposed to (B, H, T, E) came from, so that the usual
    `.transpose(1, 2).reshape(B, T, H·E)` after attention (and the same on its gradients) is a
    view instead of a copy (PyTorch's flash kernels also write their output in q's layout)."""
    if not heads:
        return f"(bh * {n} + {row}) * {E}"
    return f"(((bh / {heads}) * {n} + {row}) * {heads} + bh % {heads}) * {E}"


def _check(E, block, mask):
    if mask not in MASKS:
        raise ValueError(f"pyrite: internal: attention mask kind {mask!r}")
    if not 1 <= E <= MAX_HEAD_DIM:
        raise ValueError(f"pyrite: internal: fused attention needs 1 <= E <= {MAX_HEAD_DIM}")


def _buffers(names_types):
    return [(n, t, m) for n, t, m in names_types if t is not None]


# Dropout inside the fused kernels (dropout=True): after a kernel's own info words come four
# more (drop_setup), [key x, key y, threshold, 1/(1-p) (f32 bits)]. Pair (row, j), row = bh·L + i
# the query's flat row, is kept iff component j & 3 of pcg4d(row, j >> 2, key) >= threshold
# (= round(p·2^32)): every kernel (forward, dq, dk/dv, the mask for the math form) draws the
# same bit for a pair, so the backward sees the forward's mask without storing it. The key comes
# from the generator's seed and offset (nn/_attention._DropKey).


def forward_setup(wg: int, rank: int, mask: str, types, splits: int, dropout: bool, order: int = 0):
    """The forward kernels' common start: the info layout of q, k, v, [mask], the buffers (q, k,
    v, [mask], then out and lse, or the split's partials), the entry point (`order`: _entry's)
    with each operand's base and the dropout words. `types`: (q, k, v, mask, out) storage
    types."""
    q_type, k_type, v_type, m_type, out_type = types
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else [])
    lay = _Layout(rank, strided)
    outs = [("o_", out_type, "w"), ("lse", "f32", "w")] if splits == 1 else [("part", "f32", "w")]
    bufs = _buffers(
        [
            ("q_", q_type, "r"),
            ("k_", k_type, "r"),
            ("v_", v_type, "r"),
            ("m_", m_type if mask != "none" else None, "r"),
            *outs,
        ]
    )
    b = _entry(wg, order) + lay.bases(strided)
    if dropout:
        b += drop_setup(lay.words)
    return lay, bufs, b


def key_range(kend: str, splits: int, unit: int) -> str:
    """WGSL: `k0` and `kend`, the keys [k0, kend) of this workgroup's range when the keys are cut
    into `splits` ranges of whole `unit`s (part_i the range's number), else [0, kend)."""
    if splits == 1:
        return f"  let k0 = 0;\n  let kend = {kend};\n"
    return (
        f"  let span = (S + {splits * unit - 1}) / {splits * unit} * {unit};\n"
        f"  let k0 = part_i * span;\n  let kend = min({kend}, k0 + span);\n"
    )


def drop_setup(at: int) -> str:
    """WGSL: the dropout words at info[at..at+4) as dkey, dthr, dscale."""
    return (
        f"  let dkey = vec2<u32>(bitcast<u32>(info[{at}]), bitcast<u32>(info[{at + 1}]));\n"
        f"  let dthr = bitcast<u32>(info[{at + 2}]);\n"
        f"  let dscale = bitcast<f32>(info[{at + 3}]);\n"
    )


def dropout_keep(row: str, j: str) -> str:
    """WGSL bool: whether dropout keeps pair (row, j) (needs drop_setup)."""
    return (
        f"(p_pcg4d(vec4<u32>(u32({row}), u32({j}) >> 2u, dkey.x, dkey.y))[u32({j}) & 3u] >= dthr)"
    )


def dropout_keep4(row: str, j4: str) -> str:
    """WGSL vec4<bool>: dropout's keep bits of pairs (row, j4 .. j4 + 3), j4 a multiple of 4."""
    return f"(p_pcg4d(vec4<u32>(u32({row}), u32({j4}) >> 2u, dkey.x, dkey.y)) >= vec4<u32>(dthr))"


@lru_cache(maxsize=16)
def attn_dropout_mask_kernel(out_type: str) -> KernelSource:
    """The dropout mask of the fused kernels as a tensor (nbh, L, S): 1/(1-p) where a pair is
    kept, 0 where dropped — for the math form of the backward (double backward, a float mask's
    gradient). Info: [0] n = nbh·L·S  [1] S, then the dropout words."""
    bufs = [("o_", out_type, "w")]
    b = ENTRY.format(wg=256) + (
        "  let x = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * 256 + i32(lid.x);\n"
        "  if (x >= info[0]) { return; }\n"
    )
    b += drop_setup(2)
    b += "  let row = x / info[1];\n  let j = x % info[1];\n"
    keep = dropout_keep("row", "j")
    b += f"  o_[x] = {store(f'select(0.0, dscale, {keep})', 'f32', out_type)};\n}}\n"
    src = header(bufs) + helpers_for(b) + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


@lru_cache(maxsize=128)
def attn_fwd_kernel(
    E: int,
    block: int,
    rank: int,
    causal: bool,
    mask: str,
    q_type: str,
    k_type: str,
    v_type: str,
    m_type: str | None,
    out_type: str,
    heads: int = 0,
    splits: int = 1,
    dropout: bool = False,
    heavy_first: bool = False,
) -> KernelSource:
    """WGSL of the forward. Buffers: q, k, v, [mask], out (nbh, L, E), lse (nbh, L) f32.
    `heads` > 0: out is laid out (batch, L, heads, E) instead (see _row_base).

    `splits` > 1 (few queries: too few workgroups to fill a GPU): the keys are cut into that
    many ranges, info[4] counts (query block, range) pairs, and each workgroup writes its
    partial (acc[0..E), max, sum) per query, (E + 2) f32 at ((bh * L + i) * splits + range),
    into the one output buffer `part` (no out, no lse); attn_merge_kernel combines them."""
    _check(E, block, mask)
    ep = padded_dim(E)
    C = ep // 4
    bk = tile_rows(ep)
    order = 1 if heavy_first and causal and splits == 1 else 0
    lay, bufs, b = forward_setup(block, rank, mask, (q_type, k_type, v_type, m_type, out_type),
                                 splits, dropout, order)  # fmt: skip
    qblk = "blk"
    if splits > 1:  # (info[4] counts (query block, key range) pairs)
        b += f"  let qblk = blk / {splits};\n  let part_i = blk % {splits};\n"
        qblk = "qblk"
    b += f"  let i = {qblk} * {block} + i32(lid.x);\n  let ic = min(i, L - 1);\n"
    b += _row_vec("q", "q_", q_type, f"qb + ic * {lay.row('q')}", lay.col("q"), E, " * scale")
    for c in range(C):
        b += f"  var a{c} = vec4<f32>(0.0);\n"
    b += "  var mx = -p_inf();\n  var l = 0.0;\n"
    kend = f"min(S, {qblk} * {block} + {block})" if causal else "S"
    b += key_range(kend, splits, bk)  # (whole tiles a range)
    b += f"  let ntiles = (max(kend - k0, 0) + {bk - 1}) / {bk};\n"
    b += "  for (var t = 0; t < ntiles; t++) {\n    let t0 = k0 + t * %d;\n" % bk
    b += "    workgroupBarrier();\n"
    b += _stage(
        [
            ("tk", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
            ("tv", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, ""),
        ],
        bk,
        block,
        C,
        "kend - t0",
    )
    b += "    workgroupBarrier();\n"
    b += f"    let jn = min({bk}, kend - t0);\n"
    b += "    for (var jj = 0; jj < jn; jj++) {\n      let j = t0 + jj;\n"
    b += "      var ok = true;\n"
    if causal:
        b += "      ok = !(j > i);\n"
    b += f"      var s = {_dot('q', lambda c: f'tk[jj * {C} + {c}]', C)};\n"
    mt = _mask_test(mask, m_type, "ic", "j")
    if mask != "none":
        mt = mt.replace("{mr}", str(lay.pos["m"] + 1)).replace("{mc}", str(lay.pos["m"] + 2))
    b += mt
    # uniform control flow (no `continue`: lavapipe's SIMD lanes then share the tile reads);
    # a masked pair or a -inf score (a float mask's -inf) adds nothing
    b += "      ok = ok && s != -p_inf();\n"
    b += "      let mn = select(mx, max(mx, s), ok);\n"
    b += "      let f = select(exp(mx - mn), 1.0, mx == mn);\n"
    b += "      let p = select(0.0, exp(s - mn), ok);\n"
    b += "      l = l * f + p;\n      mx = mn;\n"
    pv = "p"
    if dropout:  # (l sums the weights before dropout; the output takes the kept ones, scaled)
        b += f"      let pd = select(0.0, p * dscale, {dropout_keep('bh * L + ic', 'j')});\n"
        pv = "pd"
    for c in range(C):
        b += f"      a{c} = a{c} * f + {pv} * tv[jj * {C} + {c}];\n"
    b += "    }\n  }\n"
    b += "  if (i >= L) { return; }\n"
    if splits > 1:
        b += f"  let pb = ((bh * L + i) * {splits} + part_i) * {E + 2};\n"
        for e in range(E):
            b += f"  part[pb + {e}] = a{e // 4}[{e % 4}];\n"
        b += f"  part[pb + {E}] = mx;\n  part[pb + {E + 1}] = l;\n}}\n"
        src = header(bufs) + helpers_for(b) + _shared([("tk", bk * C), ("tv", bk * C)]) + b
        return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))
    b += "  let inv = select(1.0 / l, 0.0, l == 0.0);\n"
    b += f"  let ob = {_row_base('L', 'i', E, heads)};\n"
    for e in range(E):
        b += f"  o_[ob + {e}] = {store(f'a{e // 4}[{e % 4}] * inv', 'f32', out_type)};\n"
    b += lse_store("bh * L + i", "mx", "l") + "}\n"
    src = header(bufs) + helpers_for(b) + _shared([("tk", bk * C), ("tv", bk * C)]) + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


MERGE_WG = 64


@lru_cache(maxsize=64)
def attn_merge_kernel(E: int, splits: int, out_type: str, heads: int = 0) -> KernelSource:
    """The split forward's second half: one invocation per (query row (bh, i), column e), the
    `splits` partials (acc, max m, sum l) of attn_fwd_kernel combining as M = max m_p,
    l = Σ l_p·exp(m_p - M), out = Σ acc_p·exp(m_p - M) / l, lse = M + log(l) (0 and +inf
    where every key was masked, as the unsplit kernel); column 0 writes lse. Consecutive
    invocations read and write consecutive columns. (It was one invocation a row walking its E
    columns: a decode of 16 heads, 16 rows, ran as 16 serial invocations on one SM.)
    Info: [0] rows nbh·L  [1] L. Grid: rows·E invocations, MERGE_WG a workgroup."""
    bufs = [("part", "f32", "r"), ("o_", out_type, "w"), ("lse", "f32", "w")]
    w = E + 2
    b = ENTRY.format(wg=MERGE_WG) + (
        f"  let x = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * {MERGE_WG} + i32(lid.x);\n"
        f"  if (x >= info[0] * {E}) {{ return; }}\n"
        f"  let row = x / {E};\n  let e = x % {E};\n"
        "  let L = info[1];\n  let bh = row / L;\n  let i = row % L;\n"
        f"  let pb = row * {splits * w};\n"
        "  var M = -p_inf();\n"
    )
    for p in range(splits):
        b += f"  let m{p} = part[pb + {p * w + E}];\n  M = max(M, m{p});\n"
    b += "  var l = 0.0;\n  var a = 0.0;\n"
    for p in range(splits):
        b += f"  let f{p} = select(exp(m{p} - M), 0.0, M == -p_inf());\n"
        b += f"  l += part[pb + {p * w + E + 1}] * f{p};\n"
        b += f"  a += part[pb + {p * w} + e] * f{p};\n"
    b += "  let inv = select(1.0 / l, 0.0, l == 0.0);\n"
    b += f"  let ob = {_row_base('L', 'i', E, heads)};\n"
    b += f"  o_[ob + e] = {store('a * inv', 'f32', out_type)};\n"
    b += "  if (e == 0) {\n" + lse_store("row", "M", "l", "    ") + "  }\n}\n"
    src = header(bufs) + helpers_for(b) + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def _shared(tiles) -> str:
    return "".join(f"var<workgroup> {n}: array<vec4<f32>, {size}>;\n" for n, size in tiles)


@lru_cache(maxsize=128)
def attn_dq_kernel(
    E: int,
    block: int,
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
    heavy_first: bool = False,
) -> KernelSource:
    """WGSL of dq and D. Buffers: q, k, v, [mask], out, dout (strided), lse, dq (nbh, L, E),
    D (nbh, L) f32. `out` and `dout` are read through their strides too."""
    _check(E, block, mask)
    ep = padded_dim(E)
    C = ep // 4
    bk = tile_rows(ep)
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["o", "g"]
    lay = _Layout(rank, strided)
    bufs = _buffers(
        [
            ("q_", q_type, "r"),
            ("k_", k_type, "r"),
            ("v_", v_type, "r"),
            ("m_", m_type if mask != "none" else None, "r"),
            ("o_", o_type, "r"),
            ("g_", do_type, "r"),
            ("lse", "f32", "r"),
            ("dq", dq_type, "w"),
            ("dd", "f32", "w"),
        ]
    )
    b = _entry(block, 1 if heavy_first and causal else 0) + lay.bases(strided)
    if dropout:
        b += drop_setup(lay.words)
    b += f"  let i = blk * {block} + i32(lid.x);\n  let ic = min(i, L - 1);\n"
    b += _row_vec("q", "q_", q_type, f"qb + ic * {lay.row('q')}", lay.col("q"), E, " * scale")
    b += _row_vec("g", "g_", do_type, f"gb + ic * {lay.row('g')}", lay.col("g"), E)
    b += _row_vec("o", "o_", o_type, f"ob + ic * {lay.row('o')}", lay.col("o"), E)
    b += f"  let D = {_dot('g', lambda c: f'o{c}', C)};\n"
    b += f"  let lm = {lse_word('bh * L + ic', 0)};\n  let lg = {lse_word('bh * L + ic', 1)};\n"
    for c in range(C):
        b += f"  var a{c} = vec4<f32>(0.0);\n"
    kend = f"min(S, blk * {block} + {block})" if causal else "S"
    b += f"  let kend = {kend};\n  let ntiles = (kend + {bk - 1}) / {bk};\n"
    b += "  for (var t = 0; t < ntiles; t++) {\n    let t0 = t * %d;\n" % bk
    b += "    workgroupBarrier();\n"
    b += _stage(
        [
            ("tk", "k_", k_type, "kb", lay.row("k"), lay.col("k"), E, ""),
            ("tv", "v_", v_type, "vb", lay.row("v"), lay.col("v"), E, ""),
        ],
        bk,
        block,
        C,
        "kend - t0",
    )
    b += "    workgroupBarrier();\n"
    b += f"    let jn = min({bk}, kend - t0);\n"
    b += "    for (var jj = 0; jj < jn; jj++) {\n      let j = t0 + jj;\n"
    b += "      var ok = true;\n"
    if causal:
        b += "      ok = !(j > i);\n"
    b += f"      var s = {_dot('q', lambda c: f'tk[jj * {C} + {c}]', C)};\n"
    mt = _mask_test(mask, m_type, "ic", "j")
    if mask != "none":
        mt = mt.replace("{mr}", str(lay.pos["m"] + 1)).replace("{mc}", str(lay.pos["m"] + 2))
    b += mt
    # the backward skips masked pairs (measured: faster on causal shapes than the forward's
    # uniform form, the same on padded ones)
    b += "      if (!ok || s == -p_inf()) { continue; }\n"
    b += "      let p = exp((s - lm) - lg);\n"
    dp = f"({_dot('g', lambda c: f'tv[jj * {C} + {c}]', C)})"
    if dropout:  # dP of the kept pairs, scaled; D = Σ dout·out already holds the dropout
        dp = f"select(0.0, {dp} * dscale, {dropout_keep('bh * L + ic', 'j')})"
    b += f"      let ds = p * ({dp} - D);\n"
    for c in range(C):
        b += f"      a{c} += ds * tk[jj * {C} + {c}];\n"
    b += "    }\n  }\n"
    b += "  if (i >= L) { return; }\n"
    b += f"  let qo = {_row_base('L', 'i', E, heads)};\n"
    for e in range(E):
        b += f"  dq[qo + {e}] = {store(f'a{e // 4}[{e % 4}] * scale', 'f32', dq_type)};\n"
    b += "  dd[bh * L + i] = D;\n}\n"
    src = header(bufs) + helpers_for(b) + _shared([("tk", bk * C), ("tv", bk * C)]) + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


@lru_cache(maxsize=128)
def attn_dkv_kernel(
    E: int,
    block: int,
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
    heavy_first: bool = False,
) -> KernelSource:
    """WGSL of dk and dv, one invocation per key. Buffers: q, k, v, [mask], dout (strided),
    lse, D (nbh, L) f32, dk, dv (nbh, S, E)."""
    _check(E, block, mask)
    ep = padded_dim(E)
    C = ep // 4
    bt = tile_rows(ep)
    strided = ["q", "k", "v"] + (["m"] if mask != "none" else []) + ["g"]
    lay = _Layout(rank, strided)
    bufs = _buffers(
        [
            ("q_", q_type, "r"),
            ("k_", k_type, "r"),
            ("v_", v_type, "r"),
            ("m_", m_type if mask != "none" else None, "r"),
            ("g_", do_type, "r"),
            ("lse", "f32", "r"),
            ("dd", "f32", "r"),
            ("dk", dk_type, "w"),
            ("dv", dv_type, "w"),
        ]
    )
    b = _entry(block, 2 if heavy_first and causal else 0) + lay.bases(strided)
    if dropout:
        b += drop_setup(lay.words)
    b += f"  let j = blk * {block} + i32(lid.x);\n  let jc = min(j, S - 1);\n"
    b += _row_vec("k", "k_", k_type, f"kb + jc * {lay.row('k')}", lay.col("k"), E)
    b += _row_vec("v", "v_", v_type, f"vb + jc * {lay.row('v')}", lay.col("v"), E)
    for c in range(C):
        b += f"  var ak{c} = vec4<f32>(0.0);\n  var av{c} = vec4<f32>(0.0);\n"
    # causal: queries i >= j only, so the tiles before the block's first key are skipped
    first = f"(blk * {block}) / {bt}" if causal else "0"
    b += f"  let ntiles = (L + {bt - 1}) / {bt};\n  let lb = bh * L;\n"
    b += f"  for (var t = {first}; t < ntiles; t++) {{\n    let t0 = t * {bt};\n"
    b += "    workgroupBarrier();\n"
    b += _stage(
        [
            ("tq", "q_", q_type, "qb", lay.row("q"), lay.col("q"), E, " * scale"),
            ("tg", "g_", do_type, "gb", lay.row("g"), lay.col("g"), E, ""),
        ],
        bt,
        block,
        C,
        "L - t0",
    )
    b += "    workgroupBarrier();\n"
    b += f"    let inn = min({bt}, L - t0);\n"
    b += "    for (var ii = 0; ii < inn; ii++) {\n      let i = t0 + ii;\n"
    b += "      var ok = true;\n"
    if causal:
        b += "      ok = !(jc > i);\n"
    b += f"      var s = {_dot('k', lambda c: f'tq[ii * {C} + {c}]', C)};\n"
    mt = _mask_test(mask, m_type, "i", "jc")
    if mask != "none":
        mt = mt.replace("{mr}", str(lay.pos["m"] + 1)).replace("{mc}", str(lay.pos["m"] + 2))
    b += mt
    # the backward skips masked pairs (measured: faster on causal shapes than the forward's
    # uniform form, the same on padded ones)
    b += "      if (!ok || s == -p_inf()) { continue; }\n"
    b += f"      let p = exp((s - {lse_word('lb + i', 0)}) - {lse_word('lb + i', 1)});\n"
    dp = f"({_dot('v', lambda c: f'tg[ii * {C} + {c}]', C)})"
    pv = "p"
    if dropout:
        b += f"      let kept = {dropout_keep('lb + i', 'jc')};\n"
        b += "      let pd = select(0.0, p * dscale, kept);\n"
        dp, pv = f"select(0.0, {dp} * dscale, kept)", "pd"
    b += f"      let ds = p * ({dp} - dd[lb + i]);\n"
    for c in range(C):
        b += f"      av{c} += {pv} * tg[ii * {C} + {c}];\n"
        b += f"      ak{c} += ds * tq[ii * {C} + {c}];\n"
    b += "    }\n  }\n"
    b += "  if (j >= S) { return; }\n"
    b += f"  let ko = {_row_base('S', 'j', E, heads)};\n"
    for e in range(E):
        b += f"  dk[ko + {e}] = {store(f'ak{e // 4}[{e % 4}]', 'f32', dk_type)};\n"
        b += f"  dv[ko + {e}] = {store(f'av{e // 4}[{e % 4}]', 'f32', dv_type)};\n"
    b += "}\n"
    src = header(bufs) + helpers_for(b) + _shared([("tq", bt * C), ("tg", bt * C)]) + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def info_words(rank: int, n_strided: int) -> int:
    return 5 + rank + n_strided * (3 + rank)


def block_for(n: int) -> int:
    """Invocations (queries or keys) per workgroup for n rows: BLOCK, or the next power of two
    at or above n (at least 8) when n is smaller, so a short L does not idle most of a group."""
    b = 8
    while b < n and b < BLOCK:
        b *= 2
    return b
