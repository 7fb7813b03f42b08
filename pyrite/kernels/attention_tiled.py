"""The register-tiled attention forward: a block of queries a workgroup, both products as tile
GEMMs (FlashAttention-2's loop, written for SIMT lanes instead of tensor cores).

The "torch CUDA" figures in this file's notes are torch's fused f32 kernel, which runs its
products on the tensor cores as 3xTF32 (bench.TORCH_ATTENTION_NOTE); torch's f32-FMA path (its
math backend) ran BERT-base's forward at 8.5 TFLOP/s where this kernel ran 13.3 (H100,
2026-12-06, docs/bench/2026-12-06-h100-s37-attn-bench-wgpu.json).

attn_fwd_kernel (kernels/attention.py) gives each query one invocation that walks every key: a
key costs it 2·E multiply-adds, read from workgroup memory as broadcasts, with its q row and its
output row (2·E floats) held in registers, so few invocations fit an SM and little of the
memory latency hides (the H200 ran BERT-base's 32×12×128×64 forward at 7.5 TFLOP/s against
torch's 21, 2026-12-03). Here a workgroup of TQ·TK = 128 invocations owns BQ = 64 queries and
walks the keys BK = 32 at a time:

  S = (q·scale)·kᵀ   invocation (ty, tx) computes a 4×4 block of the 64×32 score tile: queries
                     4·ty..4·ty+3, keys 4·tx..4·tx+3, from qT (q transposed, staged once) and kT
                     (the key tile transposed), one vec4 of queries and one of keys a step of E;
  online softmax     each row's max over the tile goes through workgroup memory (its 8 partial
                     maxima, a vec4 of four rows each), the output and the running sums are
                     rescaled by exp(m_old - m_new), p = exp(s - m_new);
  O += P·V           pᵀ (64×32, over the key tile's place) times the value tile: invocation
                     (ty, tx) owns queries 4·ty..4·ty+3 × dims 4·tx..4·tx+3 and 32+4·tx..32+4·tx+3
                     (adjacent lanes read adjacent vec4s of a value row).

Each invocation keeps the sum l of its own keys' p for its four rows (every lane of a row
rescales by the same max, so the partial sums add up at the end through workgroup memory). The
head dim is padded to EP = 32 or 64 with zeros; workgroup memory is qT 16 KiB + kT/pᵀ 8 KiB + v
8 KiB = 32 KiB at EP = 64 (lavapipe's limit and common elsewhere; the partial maxima and sums
reuse kT's place). Head dims 65 .. 128 pad to EP = 128 and take blocks of BQ = 32 queries, 128
invocations each holding 2 queries × 16 dims of the output (qT and pᵀ hold vec2s of queries, pᵀ
two to a vec4 of kT's place): qT, kT and v 16 KiB each, 48 KiB (the H100/H200 allow that through
both implementations; lavapipe does not, where the tests force blocks of 32 and 16 and 2 rows
an invocation at E <= 64 instead). Where a GPU's workgroups hold 48 KiB and P·V goes by
shuffles, head dims 33 .. 64 take blocks of BQ = 128 queries when there are enough of them
(nn/_attention TILED_WIDE_BQ): 256 invocations, qT 32 KiB, each staged key tile serving twice
the queries. Six barriers a key tile through workgroup memory, two with
subgroups (P_SHUFFLE: the row maxima, the sums and P·V's weights by shuffles). Masks, causal skipping and
ranges, key splits (`splits`, partials for attn_merge_kernel), the (batch, L, heads, E) output
layout, info words and buffers are those of attn_fwd_kernel.
"""

from __future__ import annotations

from functools import lru_cache

from .attention import _check, _row_base, dropout_keep4, forward_setup, key_range, lse_store
from .common import SG_ENABLE, KernelSource, header, helpers_for, load, store, trusted

# What binds this kernel (the H100's SASS at BERT-base's shape, 2026-12-07, docs/bench/
# 2026-12-07-h100-s42-sass-attn-bert.sass): 118 registers; a key tile runs 770 FFMA against 128
# workgroup-memory loads and 62 shuffles, one such operation per 4 fmas (the big GEMM tile: one
# per 21): workgroup memory and shuffles, not fmas (~12.6 TFLOP/s). Larger score tiles an
# invocation (8x4, 8x8 for 4x4) would make each q and k read serve more products.
# Tried (2026-12-07, H100, wgpu-native, scripts/attention_ab.py at d700633, GPU time, us;
# docs/bench/2026-12-07-h100-s43-attn-l4.json): 4 lanes a row in place of 8, each lane 8 keys of
# a tile (4 x 8 scores) and a quarter of the dims, so P·V takes half the shuffles a product:
# slower everywhere (BERT-base 128.7 -> 147.2, 125.6 in blocks of 128; causal 16 x 4096 1,657 ->
# 3,196, 1,561 in blocks of 128), its registers 182-251 against 118; removed. What won was the
# block: 128 queries (nn/_attention TILED_WIDE_BQ) with the 4 x 4 tiles of 8 lanes.
TILED_BQ = 64  # queries a workgroup (E <= 64): 16 rows of invocations x 4 queries each
TILED_BK = 32  # keys a tile: 8 columns of invocations x 4 keys each
TILED_EP = 128  # the largest head dim (padded: to 32 for E <= 32, 64 for E <= 64, else 128)
# (Two query rows an invocation of 256, so twice the warps an SM with half the registers each,
# was slower or even everywhere on the H100: 512 tokens 152 -> 167 us, causal 16 x 4096 2,330 ->
# 2,553, E = 32 at 512 tokens 135 -> 153, BERT-base 179 -> 180; wgpu-native, 2026-12-05,
# docs/bench/2026-12-05-h100-attn-fwd-rpt2.json. The backward gained from it: its 64 invocations
# a workgroup of 43 KiB left an SM 10 warps, the forward's 128 (tiled_wg) of 32 KiB leave it 28.)
# PREFETCH: the next key tile's global reads are issued right after the current one is staged,
# into registers, and written to workgroup memory after the tile's products (their latency hides
# behind the products instead of stalling the workgroup at a barrier). A/B: scripts/
# attention_ab.py (tiled0 is without, tiled with). H100, wgpu-native, 2026-12-05, us without /
# with: causal 16 x 4096 x 64 2,719 / 2,624; 512 tokens 154 / 152; E = 32 at 512 tokens 165 /
# 159; BERT-base batch 32 175 / 180, batch 1 31.6 / 32.7. On where the long rows gain. (Not at
# E > 64: its 16 vec4s of k and of v an invocation would sit in registers through the products.)
# Again with P_SHUFFLE (2026-12-06, docs/bench/2026-12-06-h100-s31-attn-prefetch.json, with /
# without): BERT-base 134.5 / 127.9 (the rule's identical pick timed 129.6 in the same run:
# within the noise), 2 x 12 x 512 114.4 / 114.4, E = 32 at 512 tokens 85.9 / 84.1, BERT-base's
# heads over 256 keys 216.9 / 214.2, over 128 125.9 / 126.8: no signal either way, kept.
PREFETCH = True
# P_SHUFFLE (where `sg`): P·V takes each row's p from the row's 8 lanes by subgroupShuffleXor
# (lane tx reads the keys of lane tx ^ d at step d, so a step's shuffle mask is uniform) instead
# of writing pᵀ to workgroup memory: two barriers a key tile fewer, and the key tile's place holds
# kᵀ only. DOUBLE_BUFFER (with P_SHUFFLE and PREFETCH, E <= 64): two places for the key and value
# tiles, the next tile staged into the other after this one's products, so one barrier a key
# tile; 48 KiB of workgroup memory. H100, wgpu-native, 2026-12-06 (scripts/attention_ab.py,
# GPU time, us, pᵀ through workgroup memory / P_SHUFFLE / with DOUBLE_BUFFER / torch CUDA;
# docs/bench/2026-12-06-h100-s31-attn-db.json): BERT-base 32 x 12 x 128 x 64 with a padding mask
# 141.9 / 130.0 / 135.2 / 110.9, batch 1 29.5 / 29.9 / 30.5 / 51.2; 2 x 12 x 512 x 64 135.3 /
# 114.4 / 113.9 / 99.6; causal 16 x 4096 x 64 2,033 / 1,658 / 1,619 / 1,369; E = 32 at 512 tokens
# 102.7 / 85.6 / 92.1 / 151.3; 8 x 16 x 128 x 128 95.6 / 95.2 / 94.4 / 93.2; BERT-base's heads
# over 32 / 128 / 512 keys 48.8 / 49.0 / 54.7, 133.6 / 125.9 / 131.0, 437.6 / 376.7 / 372.6
# (torch 53.1, 87.9, 263.9): a key tile of 32 costs ~22 us across the 768 workgroups, against ~26
# before. The double buffer gains 1-2 % on long rows and loses at BERT-base's: off.
P_SHUFFLE = True
DOUBLE_BUFFER = False


def tiled_ep(E: int) -> int:
    """The padded head dim of the tiled kernels: 32, 64 or 128."""
    return 32 if E <= 32 else 64 if E <= 64 else 128


def tiled_bq(E: int) -> int:
    """Queries a workgroup of the tiled forward takes at head dim E: 64, or 32 past E = 64 (so
    qT, kT and v fit 48 KiB at EP = 128)."""
    return TILED_BQ if E <= 64 else 32


def tiled_rpt(E: int) -> int:
    """Query rows an invocation of the tiled forward holds at head dim E: 4, or 2 past E = 64
    (twice the invocations: the 48 KiB workgroups leave an SM few warps)."""
    return 4 if E <= 64 else 2


def tiled_wg(bq: int, rpt: int = 4) -> int:
    """Invocations a workgroup of the tiled forward takes for blocks of `bq` queries: 8 columns
    of bq / rpt rows."""
    return 8 * bq // rpt


def tiled_shared_bytes(
    E: int, bq: int | None = None, rpt: int | None = None, pshfl: bool = False, dbuf: bool = False
) -> int:
    """Workgroup memory of the tiled forward: qT, kT (also pᵀ and the row partials, unless
    `pshfl`) and v (both twice with `dbuf`)."""
    ep, bq = tiled_ep(E), bq or tiled_bq(E)
    kp = _kp_size(ep, bq, tiled_wg(bq, rpt or tiled_rpt(E)), pshfl, dbuf)
    return (ep * bq // 4 + kp + ep * TILED_BK // 4 * (2 if dbuf else 1)) * 16


def _kp_size(ep: int, bq: int, wg: int, pshfl: bool, dbuf: bool) -> int:
    """vec4s of the key tile's place: kT (twice with `dbuf`), or also pᵀ and the rows'
    partials."""
    if pshfl:
        return ep * TILED_BK // 4 * (2 if dbuf else 1)
    return max(ep * TILED_BK // 4, TILED_BK * bq // 4, wg)


def tiled_loop_iterations(
    S: int, E: int = 64, bq: int | None = None, rpt: int | None = None
) -> int:
    """Loop iterations of one invocation of attn_fwd_tiled_kernel over S keys (the E loop in
    steps of 4, the key loop in steps of 2 and the 8-lane merges, each with its exit test; the q
    staging once)."""
    ep, bq = tiled_ep(E), bq or tiled_bq(E)
    per_tile = (ep // 4 + 1) + (TILED_BK // 2 + 1) + 9 + 1
    wg = tiled_wg(bq, rpt or tiled_rpt(E))
    return (-(-ep * bq // 4 // wg) + 1) + -(-S // TILED_BK) * per_tile + 10


def _staged_vec(buf: str, stype: str, index: str, ok: list[str]) -> str:
    """vecN (N = len(ok)) of strided reads `index` (a format of r) of storage `buf`, 0 where not
    ok[r]."""
    comps = [f"select(0.0, {load(f'{buf}[{index.format(r=r)}]', stype, 'f32')}, {ok[r]})"
             for r in range(len(ok))]  # fmt: skip
    return f"vec{len(ok)}<f32>({', '.join(comps)})"


def _tile_reads(lay, E: int, EP: int, k_type: str, v_type: str, t0: str, wg: int) -> str:
    """WGSL: this invocation's share of the key tile at `t0` into registers kr<u> (kᵀ: dim ke<u>,
    keys 4·kg<u> .. 4·kg<u> + 3) and vr<u> (v: key vj<u>, dims vd<u> .. vd<u> + 3); rows past
    kend read as 0 (kg<u>, vj<u>, ke<u>, vd<u>: the invocation's fixed places, declared once)."""
    s = ""
    for u in range(EP * TILED_BK // 4 // wg):
        kok = [f"({t0} + kg{u} * 4 + {r} < kend && ke{u} < {E})" for r in range(4)]
        kidx = (f"kb + min({t0} + kg{u} * 4 + {{r}}, S - 1) * {lay.row('k')} "
                f"+ min(ke{u}, {E - 1}) * {lay.col('k')}")  # fmt: skip
        s += f"    kr{u} = {_staged_vec('k_', k_type, kidx, kok)};\n"
        vok = [f"({t0} + vj{u} < kend && vd{u} + {r} < {E})" for r in range(4)]
        vrow = f"min({t0} + vj{u}, S - 1) * {lay.row('v')}"
        vidx = f"vb + {vrow} + min(vd{u} + {{r}}, {E - 1}) * {lay.col('v')}"
        s += f"    vr{u} = {_staged_vec('v_', v_type, vidx, vok)};\n"
    return s


@lru_cache(maxsize=64)
def attn_fwd_tiled_kernel(
    E: int,
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
    prefetch: bool = True,
    dropout: bool = False,
    heavy_first: bool = False,
    bq: int | None = None,
    rpt: int | None = None,
    sg: int = 0,
    pshfl: bool = False,
    dbuf: bool = False,
) -> KernelSource:
    """WGSL of the tiled forward (module docstring). Buffers: q, k, v, [mask], then out and lse
    (splits = 1) or the partials `part` (attn_fwd_kernel's layout). info[4] = query blocks of
    `bq` (default tiled_bq(E)) times splits, per batch·head; `rpt` query rows an invocation
    (default tiled_rpt(E)). `prefetch`: see PREFETCH (the caller passes it, so the cache keys on
    it). `sg` (the device's `subgroups`, where its subgroups hold 8 or more consecutive
    invocations): a row's 8 lanes merge their maxima and sums by subgroupShuffleXor instead of
    through workgroup memory, two barriers a key tile fewer (SUBGROUP_ROWS). `pshfl` (with `sg`)
    and `dbuf` (with `pshfl` and `prefetch`, E <= 64): P_SHUFFLE and DOUBLE_BUFFER."""
    _check(E, 8, mask)
    if E > TILED_EP:
        raise ValueError(f"pyrite: internal: the tiled attention forward takes E <= {TILED_EP}")
    BQ, BK, N = bq or tiled_bq(E), TILED_BK, rpt or tiled_rpt(E)
    if N not in (2, 4):
        raise ValueError(f"pyrite: internal: query rows an invocation holds: 2 or 4, not {N}")
    WG, NG = tiled_wg(BQ, N), BQ // N  # (invocation rows ty < NG, N queries each)
    V, VI = f"vec{N}<f32>", f"vec{N}<i32>"
    EP = tiled_ep(E)
    R = EP // 4  # vec4s of a padded row
    nreg = EP * BK // 4 // WG
    if nreg == 0 or EP * BK // 4 % WG:
        raise ValueError(
            f"pyrite: internal: {WG} invocations do not divide a key tile's {EP * BK // 4} vec4s"
        )
    prefetch = prefetch and EP <= 64
    pshfl = pshfl and bool(sg)
    dbuf = dbuf and pshfl and prefetch
    KT = EP * BK // 4  # (vec4s of a staged key tile kT, and of a value tile)
    order = 1 if heavy_first and causal and splits == 1 else 0  # (kernels/attention HEAVY_FIRST)
    lay, bufs, b = forward_setup(WG, rank, mask, (q_type, k_type, v_type, m_type, out_type),
                                 splits, dropout, order)  # fmt: skip
    b += "  let t = i32(lid.x);\n  let ty = t / 8;\n  let tx = t % 8;\n"
    qblk = "blk"
    if splits > 1:
        b += f"  let qblk = blk / {splits};\n  let part_i = blk % {splits};\n"
        qblk = "qblk"
    b += f"  let q0 = {qblk} * {BQ};\n"

    def cut(v: str) -> str:  # the N components of a vec4 slot of kp that hold N rows
        return v if N == 4 else f"({v}).xy"

    def slot(vals) -> str:  # N row values as a vec4 slot of kp
        return f"vec4<f32>({', '.join(list(vals) + ['0.0'] * (4 - N))})"

    # qT[e * NG + g] = q[q0 + N·g .. q0 + N·g + N - 1][e] * scale (lanes: consecutive e)
    b += f"  for (var x = t; x < {EP * NG}; x += {WG}) {{\n"
    b += f"    let e = x % {EP};\n    let g = x / {EP};\n    let ec = min(e, {E - 1});\n"
    qok = [f"e < {E}"] * N
    qidx = f"qb + min(q0 + g * {N} + {{r}}, L - 1) * {lay.row('q')} + ec * {lay.col('q')}"
    b += f"    qT[e * {NG} + g] = {_staged_vec('q_', q_type, qidx, qok)} * scale;\n  }}\n"
    halves = "abcd"[: EP // 32]  # (parts of 32 dims: an invocation's dims 32·i + 4·tx ..)
    for r in range(N):
        for h in halves:
            b += f"  var o{r}{h} = vec4<f32>(0.0);\n"
    b += f"  var m = {V}(-p_inf());\n  var l = {V}(0.0);\n"
    kend = f"min(S, q0 + {BQ})" if causal else "S"
    b += key_range(kend, splits, BK)  # (whole tiles a range)
    b += f"  let ntiles = (max(kend - k0, 0) + {BK - 1}) / {BK};\n"
    offs = ", ".join(str(r) for r in range(N))
    b += f"  let qi = {VI}(q0 + ty * {N}) + {VI}({offs});\n"
    # an invocation's fixed places in the staged tiles: kᵀ dim ke<u>, v dims vd<u> .. vd<u> + 3
    for u in range(nreg):
        x = f"(t + {u * WG})"
        b += f"  let kg{u} = {x} / {EP};\n  let ke{u} = {x} % {EP};\n"
        b += f"  let vj{u} = {x} / {R};\n  let vd{u} = ({x} % {R}) * 4;\n"
        b += f"  var kr{u} = vec4<f32>(0.0);\n  var vr{u} = vec4<f32>(0.0);\n"

    def stage(at: str) -> str:  # this invocation's registers into the tile places at `at`
        return "".join(f"    kp[{at}ke{u} * 8 + kg{u}] = kr{u};\n    vs[{at}t + {u * WG}] = vr{u};\n"
                       for u in range(nreg))  # fmt: skip

    if prefetch:
        b += _tile_reads(lay, E, EP, k_type, v_type, "k0", WG)
    if dbuf:  # tile 0 staged, tile 1's reads in flight
        b += stage("") + "  workgroupBarrier();\n"
        b += _tile_reads(lay, E, EP, k_type, v_type, f"(k0 + {BK})", WG)
    b += "  for (var tt = 0; tt < ntiles; tt++) {\n"
    b += f"    let t0 = k0 + tt * {BK};\n"
    ko = ""  # (the offset of this tile's places in kp and vs)
    if dbuf:
        b += f"    let kq = (tt % 2) * {KT};\n"
        ko = "kq + "
    else:
        if not prefetch:
            b += _tile_reads(lay, E, EP, k_type, v_type, "t0", WG)
        b += "    workgroupBarrier();\n"  # (the last tile's pᵀ and v reads are done)
        b += stage("")
        b += "    workgroupBarrier();\n"
        if prefetch:  # the next tile's reads, in flight during this tile's products
            b += _tile_reads(lay, E, EP, k_type, v_type, f"(t0 + {BK})", WG)
    # which keys of the tile each row takes, the mask read before the products (its latency
    # hides behind them)
    b += "    let kj = vec4<i32>(t0 + tx * 4) + vec4<i32>(0, 1, 2, 3);\n"
    b += "    let kin = kj < vec4<i32>(kend);\n"
    b += "    let kc = min(kj, vec4<i32>(S - 1));\n"
    oks = []
    for r in range(N):
        okv = "kin"
        if causal:
            okv += f" & (kj <= vec4<i32>(qi[{r}]))"
        if mask != "none":
            ir = f"min(qi[{r}], L - 1)"
            mr, mc = lay.pos["m"] + 1, lay.pos["m"] + 2
            at = [f"m_[mb + {ir} * info[{mr}] + kc[{c}] * info[{mc}]]" for c in range(4)]
            if mask == "bool":
                b += f"    let mk{r} = vec4<bool>({', '.join(a + ' != 0u' for a in at)});\n"
                okv += f" & mk{r}"
            else:
                b += (
                    f"    let mk{r} = vec4<f32>({', '.join(load(a, m_type, 'f32') for a in at)});\n"
                )
        oks.append(okv)
    # S: rows N·ty + r (s{r}), keys 4tx .. 4tx + 3 (the vec4's components)
    for r in range(N):
        b += f"    var s{r} = vec4<f32>(0.0);\n"
    b += f"    for (var e = 0; e < {EP}; e += 4) {{\n"
    for u in range(4):
        b += f"      let qv{u} = qT[(e + {u}) * {NG} + ty];\n      let kv{u} = kp[{ko}(e + {u}) * 8 + tx];\n"
    for u in range(4):
        for r in range(N):
            b += f"      s{r} += qv{u}[{r}] * kv{u};\n"
    b += "    }\n"
    for r in range(N):
        if mask == "float":
            b += f"    s{r} += mk{r};\n"
        b += f"    s{r} = select(vec4<f32>(-p_inf()), s{r}, {oks[r]});\n"
    # the tile's row maxima: 8 partials a row, by shuffles within the subgroup or through kp
    # (every lane is done with kT)
    pm = [f"max(max(s{r}.x, s{r}.y), max(s{r}.z, s{r}.w))" for r in range(N)]
    if sg:
        b += f"    var mn = {V}({', '.join(pm)});\n"
        for o in (1, 2, 4):
            b += f"    mn = max(mn, subgroupShuffleXor(mn, {o}u));\n"
        b += "    mn = max(m, mn);\n"
    else:
        b += "    workgroupBarrier();\n"
        b += f"    kp[ty * 8 + tx] = {slot(pm)};\n"
        b += "    workgroupBarrier();\n"
        b += "    var mn = m;\n"
        b += f"    for (var u = 0; u < 8; u++) {{ mn = max(mn, {cut('kp[ty * 8 + u]')}); }}\n"
    b += f"    let alpha = select(exp(m - mn), {V}(1.0), m == mn);\n"
    b += "    m = mn;\n"
    for r in range(N):
        b += f"    let p{r} = select(vec4<f32>(0.0), exp(s{r} - vec4<f32>(mn[{r}])), "
        b += f"s{r} != vec4<f32>(-p_inf()));\n"
        for h in halves:
            b += f"    o{r}{h} *= alpha[{r}];\n"
    sums = ", ".join(f"dot(p{r}, vec4<f32>(1.0))" for r in range(N))
    b += f"    l = l * alpha + {V}({sums});\n"
    if pshfl:
        b += _pv_shuffled(N, halves, R, ko, dropout)
        if dbuf:  # the next tile into the other places, the one after it in flight
            b += stage(f"{KT} - kq + ") + "    workgroupBarrier();\n"
            b += _tile_reads(lay, E, EP, k_type, v_type, f"(t0 + {2 * BK})", WG)
        b += "  }\n"
    else:
        b += _pv_staged(N, halves, R, BQ, dropout)
    b = _epilogue(b, N, V, sg, halves, splits, E, heads, out_type, cut, slot)
    KP = _kp_size(EP, BQ, WG, pshfl, dbuf)
    shared = (
        f"var<workgroup> qT: array<{V}, {EP * NG}>;\n"
        f"var<workgroup> kp: array<vec4<f32>, {KP}>;\n"  # (kT; pᵀ and partials unless pshfl)
        f"var<workgroup> vs: array<vec4<f32>, {KT * (2 if dbuf else 1)}>;\n"
    )
    src = (SG_ENABLE if sg == 2 else "") + header(bufs) + helpers_for(b) + shared + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def fma_rows(rows: int, halves: str, acc: str, weight, value) -> str:
    """WGSL: {acc}{r}{h} += weight(r) · value(h) for each of `rows` rows r and part h of the
    dims (the products' accumulate step, shared with attention_tiled_bwd)."""
    return "".join(f"      {acc}{r}{h} += {weight(r)} * {value(h)};\n"
                   for r in range(rows) for h in halves)  # fmt: skip


def _dropped(N: int, dropout: bool) -> tuple[str, str]:
    """(WGSL, name): the weights P·V takes, p<r>, or with dropout pd<r>, the kept ones scaled
    (l sums the weights before dropout)."""
    if not dropout:
        return "", "p"
    b = ""
    for r in range(N):
        keep = dropout_keep4(f"bh * L + min(qi[{r}], L - 1)", "t0 + tx * 4")
        b += f"    let pd{r} = select(vec4<f32>(0.0), p{r} * dscale, {keep});\n"
    return b, "pd"


def _pv_shuffled(N: int, halves: str, R: int, ko: str, dropout: bool) -> str:
    """WGSL: O += P·V with each row's p taken from its 8 lanes by subgroupShuffleXor: at step
    d, lane tx holds keys 4·(tx ^ d) .. + 3 of lane tx ^ d (P_SHUFFLE)."""
    b, pn = _dropped(N, dropout)
    for d in range(8):
        b += f"    {{\n      let j = (tx ^ {d}) * 4;\n"
        for r in range(N):
            src = f"{pn}{r}" if d == 0 else f"subgroupShuffleXor({pn}{r}, {d}u)"
            b += f"      let ps{r} = {src};\n"
        for c in range(4):
            for i, h in enumerate(halves):
                b += f"      let v{h}{c} = vs[{ko}(j + {c}) * {R} + {8 * i} + tx];\n"
        for c in range(4):
            b += fma_rows(N, halves, "o", lambda r: f"ps{r}[{c}]", lambda h: f"v{h}{c}")
        b += "    }\n"
    return b


def _pv_staged(N: int, halves: str, R: int, BQ: int, dropout: bool) -> str:
    """WGSL: O += P·V with pᵀ written over the key tile's place in workgroup memory; closes the
    key loop."""
    b = "    workgroupBarrier();\n"  # (every lane has read kT, and the maxima)
    # pT[j * BQ/4 + g] = p of queries 4g .. 4g + 3 for key j (N = 2: invocation row ty's two
    # queries in components 2(ty % 2), 2(ty % 2) + 1 of slot j * BQ/4 + ty / 2)
    P4 = BQ // 4
    d, pn = _dropped(N, dropout)
    b += d
    if N == 2:
        b += "    let ph = (ty % 2) * 2;\n"
    for c in range(4):
        if N == 4:
            vals = ", ".join(f"{pn}{r}[{c}]" for r in range(4))
            b += f"    kp[(tx * 4 + {c}) * {P4} + ty] = vec4<f32>({vals});\n"
        else:
            b += f"    kp[(tx * 4 + {c}) * {P4} + ty / 2][ph] = {pn}0[{c}];\n"
            b += f"    kp[(tx * 4 + {c}) * {P4} + ty / 2][ph + 1] = {pn}1[{c}];\n"
    b += "    workgroupBarrier();\n"
    b += f"    for (var j = 0; j < {TILED_BK}; j += 2) {{\n"
    for u in range(2):
        if N == 4:
            b += f"      let pv{u} = kp[(j + {u}) * {P4} + ty];\n"
        else:
            b += f"      let pw{u} = kp[(j + {u}) * {P4} + ty / 2];\n"
            b += f"      let pv{u} = select(pw{u}.xy, pw{u}.zw, ph == 2);\n"
        for i, h in enumerate(halves):
            b += f"      let v{h}{u} = vs[(j + {u}) * {R} + {8 * i} + tx];\n"
    for u in range(2):
        b += fma_rows(N, halves, "o", lambda r: f"pv{u}[{r}]", lambda h: f"v{h}{u}")
    b += "    }\n  }\n"
    return b


def _epilogue(b, N, V, sg, halves, splits, E, heads, out_type, cut, slot) -> str:
    """`b` with the kernel's end appended: the rows' sums merged over their 8 lanes, the
    normalized output and lse (or the split's partials) written."""
    # the rows' sums over the 8 lanes of a row (a butterfly's sums are the same on every lane:
    # each level adds the same two values, in either order)
    if sg:
        b += "  var lt = l;\n"
        for o in (1, 2, 4):
            b += f"  lt += subgroupShuffleXor(lt, {o}u);\n"
    else:
        b += f"  workgroupBarrier();\n  kp[ty * 8 + tx] = {slot(f'l[{r}]' for r in range(N))};\n"
        b += f"  workgroupBarrier();\n  var lt = {V}(0.0);\n"
        b += f"  for (var u = 0; u < 8; u++) {{ lt += {cut('kp[ty * 8 + u]')}; }}\n"
    dims = [(f"o{{r}}{h}[{k}]", f"{32 * i} + tx * 4 + {k}") for i, h in enumerate(halves)
            for k in range(4)]  # fmt: skip
    for r in range(N):
        b += f"  if (qi[{r}] < L) {{\n    let i = qi[{r}];\n"
        if splits > 1:
            b += f"    let pb = ((bh * L + i) * {splits} + part_i) * {E + 2};\n"
            for val, d in dims:
                b += f"    if ({d} < {E}) {{ part[pb + {d}] = {val.format(r=r)}; }}\n"
            b += f"    if (tx == 0) {{ part[pb + {E}] = m[{r}]; part[pb + {E + 1}] = lt[{r}]; }}\n"
        else:
            b += f"    let inv = select(1.0 / lt[{r}], 0.0, lt[{r}] == 0.0);\n"
            b += f"    let ob = {_row_base('L', 'i', E, heads)};\n"
            for val, d in dims:
                v = store(f"{val.format(r=r)} * inv", "f32", out_type)
                b += f"    if ({d} < {E}) {{ o_[ob + {d}] = {v}; }}\n"
            b += "    if (tx == 0) {\n"
            b += lse_store("bh * L + i", f"m[{r}]", f"lt[{r}]", "      ")
            b += "    }\n"
        b += "  }\n"
    return b + "}\n"
