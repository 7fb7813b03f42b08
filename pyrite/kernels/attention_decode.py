"""The attention forward for few queries over many keys (decode against a KV cache): a workgroup
of DECODE_WG invocations a (batch·head, query, key range), where kernels/attention.py's per-query
kernel gives a query one invocation walking every key. Info words, buffers, masks, dropout and
the split partials (merged by attn_merge_kernel) are attn_fwd_kernel's; nn/_attention.py
`_decode_splits` chooses the ranges.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .attention import (
    _check,
    _dot,
    _mask_test,
    _row_base,
    _row_vec,
    dropout_keep,
    forward_setup,
    key_range,
    lse_store,
    padded_dim,
)
from .common import (
    SG_ENABLE,
    SG_MAX,
    KernelSource,
    header,
    helpers_for,
    load,
    sg_offsets,
    store,
    trusted,
)

DECODE_WG = 256  # invocations of a decode workgroup (WebGPU's guaranteed maximum)
DECODE_MAX_SPAN = 2048  # keys a decode workgroup holds the scores of (8 KB of workgroup memory)
# The one-pass kernel (attn_decode_lanes_kernel: decode_key_lanes lanes a key, each key's rows
# read by consecutive lanes, once for a block of queries): None on GPUs with subgroups
# (nn/_attention._decode_lanes), True on any device with subgroups (tests: lavapipe's hold 8),
# False never (A/B: the two-pass attn_decode_kernel, one invocation a key, a warp's reads of k
# falling on 32 rows). On lavapipe (2 cores, scripts/decode_sweep.py --lanes, 2026-12-06) a
# two-pass version with lanes took 1.4-1.7x the time of one invocation a key.
DECODE_SG = None
# The one-pass kernel's key ranges merged in the same dispatch (`fused`, GPUs: nn/_attention
# DECODE_FUSED_MERGE): each workgroup stores its rows' partials (acc, max, sum) as words of a
# persistent scratch (MERGE_SLOTS words, all MERGE_EMPTY, then MERGE_COUNTERS counters at 0)
# by atomic stores and counts itself in its block's counter; the block's last workgroup waits for
# each word (it was stored before its workgroup counted), sets it back to MERGE_EMPTY, merges and
# writes out and lse, and sets the counter back to 0 (kernels/reduce.py's one-pass split, for
# attention). MERGE_SPINS bounds a wait (a lost word reads as MERGE_EMPTY: a NaN, never unseen).
# Keys a key slot of the one-pass kernel reads at a step (their rows' loads all issued before
# the step's math; the step's online-softmax rescale is one for them all). 4 is what the H100
# figures beside nn/_attention's constants were measured with; 2 and 8 are there for an A/B
# (scripts/decode_step_ab.py), not yet run on a GPU: the session's device time ran out.
DECODE_STEP = 4
MERGE_SLOTS = 1 << 20  # (one query a head over 64 heads, 16 ranges, E 128: 133,120 words)
MERGE_COUNTERS = 1 << 14
MERGE_EMPTY = 0xFFFFFFFF
MERGE_SPINS = 1 << 13


def decode_groups(E: int) -> int:
    """Groups of lanes walking the values at once in attn_decode_kernel's second pass."""
    return DECODE_WG // (padded_dim(E) // 4)


def decode_span(S: int, splits: int) -> int:
    """Keys a decode workgroup covers: S cut into `splits` ranges of whole DECODE_WG keys."""
    per = splits * DECODE_WG
    return -(-S // per) * DECODE_WG


def decode_key_lanes(E: int, sgs: int) -> int:
    """Lanes reading one key's rows together in attn_decode_lanes_kernel on a device whose
    subgroups hold `sgs` consecutive invocations (0: none): the largest power of two at most
    both ⌈E/4⌉ and sgs (each lane a vec4 of q, k and v, or several ⌈E/4⌉/lanes apart; their dot
    products summed by a subgroupShuffleXor butterfly), or 0 (the two-pass kernel)."""
    if DECODE_SG is False or sgs < 2:
        return 0
    c = padded_dim(E) // 4
    r = 1
    while 2 * r <= min(c, sgs, SG_MAX):
        r *= 2
    return r if r >= 2 else 0


def decode_loop_iterations(S: int, splits: int, E: int) -> int:
    """Loop iterations of one invocation of attn_decode_kernel (each loop with its exit test):
    pass 1 over the range's keys DECODE_WG apart, pass 2 over them 4·G apart, the sum over the
    G groups (the max tree is unrolled)."""
    span, G = decode_span(S, splits), decode_groups(E)
    return (-(-span // DECODE_WG) + 1) + (-(-span // (4 * G)) + 1) + (G + 1)


@lru_cache(maxsize=64)
def attn_decode_kernel(
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
    dropout: bool = False,
) -> KernelSource:
    """The forward for few queries over many keys (decode against a KV cache): one workgroup of
    DECODE_WG invocations per (batch·head, query, key range), the whole range's keys at once
    instead of attn_fwd_kernel's one invocation a query walking them all.

    Two passes over the range [k0, kend) (decode_span keys, at most DECODE_MAX_SPAN): invocation
    t scores keys k0 + t, k0 + t + DECODE_WG, ... (q·scale in its registers, one dot product a
    key) into workgroup memory, and the workgroup takes their max M (a tree); then the
    invocations split as G = DECODE_WG / C groups of C = ⌈E/4⌉ lanes (decode_groups), lane
    (g, c) adding exp(s_j - M)·v_j[4c..4c+4) over the keys j ≡ g (mod G), four keys a step, so
    each group reads whole rows of v;
    a tree over the groups gives acc and l = Σ exp(s_j - M). No running rescale: M is the
    range's true max. Buffers and info words as attn_fwd_kernel, info[4] = L·splits; the outputs
    are out and lse (splits = 1) or the split forward's partials for attn_merge_kernel."""
    _check(E, 8, mask)
    ep = padded_dim(E)
    C = ep // 4
    G = DECODE_WG // C
    wg = DECODE_WG
    lay, bufs, b = forward_setup(wg, rank, mask, (q_type, k_type, v_type, m_type, out_type),
                                 splits, dropout)  # fmt: skip
    b += f"  let t = i32(lid.x);\n  let i = blk / {splits};\n  let part_i = blk % {splits};\n"
    b += key_range("min(S, i + 1)" if causal else "S", splits, wg)  # (whole DECODE_WG keys)
    b += "  let n = max(kend - k0, 0);\n"
    # pass 1: the scores of the range, and their max
    b += "  var mloc = -p_inf();\n"
    b += _row_vec("q", "q_", q_type, f"qb + i * {lay.row('q')}", lay.col("q"), E, " * scale")
    b += f"  for (var jj = t; jj < n; jj += {wg}) {{\n    let j = k0 + jj;\n"
    kr = _row_vec("kr", "k_", k_type, f"kb + j * {lay.row('k')}", lay.col("k"), E)
    b += "".join(f"  {ln}\n" for ln in kr.splitlines())
    b += f"    var s = {_dot('q', lambda c: f'kr{c}', C)};\n"
    b += "    var ok = true;\n"
    b += _mask_words(_mask_test(mask, m_type, "i", "j"), mask, lay)
    b += "    s = select(-p_inf(), s, ok);\n    sc[jj] = s;\n    mloc = max(mloc, s);\n  }\n"
    b += "  rl[t] = mloc;\n  workgroupBarrier();\n"
    w = wg // 2
    while w >= 1:
        b += f"  if (t < {w}) {{ rl[t] = max(rl[t], rl[t + {w}]); }}\n  workgroupBarrier();\n"
        w //= 2
    b += "  let M = rl[0];\n  workgroupBarrier();\n"
    # pass 2: p = exp(s - M) times v, lane (g, c) over keys g, g + G, ...
    b += f"  let g = t / {C};\n  let c = t % {C};\n  let e0 = 4 * c;\n"
    b += "  var acc = vec4<f32>(0.0);\n  var lsum = 0.0;\n"
    # four keys a step (g, g + G, g + 2G, g + 3G): their rows' reads are in flight together
    b += f"  if (g < {G}) {{\n"
    b += f"    for (var j4 = g; j4 < n; j4 += {4 * G}) {{\n"
    for u in range(4):
        b += f"      let jj{u} = min(j4 + {u * G}, n - 1);\n      let s{u} = sc[jj{u}];\n"
        b += (
            f"      let p{u} = select(exp(s{u} - M), 0.0, s{u} == -p_inf() || j4 + {u * G} >= n);\n"
        )
        b += f"      let vr{u} = vb + (k0 + jj{u}) * {lay.row('v')};\n"
    for u in range(4):
        comps = []
        for k in range(4):
            v = load(f"v_[vr{u} + min(e0 + {k}, {E - 1}) * {lay.col('v')}]", v_type, "f32")
            comps.append(f"select(0.0, {v}, e0 + {k} < {E})")
        pu = f"p{u}"
        if dropout:
            keep = dropout_keep("bh * L + i", f"k0 + jj{u}")
            pu = f"select(0.0, p{u} * dscale, {keep})"
        b += f"      acc += {pu} * vec4<f32>({', '.join(comps)});\n"
    b += "      lsum += (p0 + p1) + (p2 + p3);\n    }\n  }\n"
    b += "  ra[t] = acc;\n  rl[t] = lsum;\n  workgroupBarrier();\n"
    b += f"  if (t >= {C}) {{ return; }}\n"
    b += "  var a = vec4<f32>(0.0);\n  var l = 0.0;\n"
    b += f"  for (var gg = 0; gg < {G}; gg++) {{ a += ra[gg * {C} + t]; l += rl[gg * {C}]; }}\n"
    if splits > 1:
        b += f"  let pb = ((bh * L + i) * {splits} + part_i) * {E + 2};\n"
        for k in range(4):
            b += f"  if (e0 + {k} < {E}) {{ part[pb + e0 + {k}] = a[{k}]; }}\n"
        b += f"  if (t == 0) {{ part[pb + {E}] = M; part[pb + {E + 1}] = l; }}\n}}\n"
    else:
        b += "  let inv = select(1.0 / l, 0.0, l == 0.0);\n"
        b += f"  let ob = {_row_base('L', 'i', E, heads)};\n"
        for k in range(4):
            val = store(f"a[{k}] * inv", "f32", out_type)
            b += f"  if (e0 + {k} < {E}) {{ o_[ob + e0 + {k}] = {val}; }}\n"
        b += "  if (t == 0) {\n" + lse_store("bh * L + i", "M", "l", "    ") + "  }\n}\n"
    shared = (
        f"var<workgroup> sc: array<f32, {DECODE_MAX_SPAN}>;\n"
        f"var<workgroup> rl: array<f32, {wg}>;\n"
        f"var<workgroup> ra: array<vec4<f32>, {wg}>;\n"
    )
    src = header(bufs) + helpers_for(b) + shared + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def _mask_words(mt: str, mask: str, lay) -> str:
    """_mask_test's WGSL with the mask's row and column stride words filled in."""
    if mask == "none":
        return mt
    return mt.replace("{mr}", str(lay.pos["m"] + 1)).replace("{mc}", str(lay.pos["m"] + 2))


def decode_lanes_loop_iterations(S: int, splits: int, E: int, lanes: int, rows: int) -> int:
    """Loop iterations of one invocation of attn_decode_lanes_kernel: the walk over its range in
    steps of DECODE_STEP·DECODE_WG/lanes keys, then per query row the two loops over the key
    slots."""
    slots = DECODE_WG // lanes
    span = lanes_span(S, splits, lanes)
    return (-(-span // (DECODE_STEP * slots)) + 1) + rows * 2 * (slots + 1)


def fused_merge_loop_iterations(splits: int, rows: int, E: int, spins: int = MERGE_SPINS) -> int:
    """Loop iterations of the fused merge at worst (every wait spinning to `spins`): a lane's
    turns over the (row, range) maxima and sums, two waits each, then over the (row, column)
    pairs, a wait for each range."""
    a, c = -(-rows * splits // DECODE_WG), -(-rows * E // DECODE_WG)
    return a * (2 * (spins + 1) + 1) + c * (splits * (spins + 1) + 1) + 2


def lanes_span(S: int, splits: int, lanes: int) -> int:
    """Keys a workgroup of attn_decode_lanes_kernel covers: S cut into `splits` ranges of whole
    steps (DECODE_STEP·DECODE_WG/lanes keys)."""
    unit = DECODE_STEP * DECODE_WG // lanes
    return -(-S // (splits * unit)) * unit


@lru_cache(maxsize=64)
def attn_decode_lanes_kernel(
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
    dropout: bool = False,
    lanes: int = 8,
    rows: int = 1,
    sg: int = 1,
    fused: bool = False,
    spins: int = MERGE_SPINS,
    step: int = 4,
) -> KernelSource:
    """The decode forward in one pass where the device has subgroups: a workgroup of DECODE_WG
    invocations a (batch·head, block of `rows` queries, key range), each key of the range read
    once (its row of k and of v, by `lanes` consecutive invocations: decode_key_lanes) for all
    the block's queries (a grouped-query head's query heads folded into rows share one read).

    Lane rk of key slot gk (K = DECODE_WG / lanes slots) holds q's vec4 chunks rk, rk + lanes,
    ... of each query (scaled) and their output chunks; each step it takes keys gk, gk + K,
    gk + 2K, gk + 3K: partial dot products, summed over the key's lanes by a subgroupShuffleXor
    butterfly (every lane ends with the scores), then the online softmax per query (one rescale
    a step) and p·v into its chunks. The K slots' (max, sum, chunks) then merge per query through
    workgroup memory. Nothing of size keys is stored, so the range has no length limit (the
    two-pass attn_decode_kernel keeps a range's scores: DECODE_MAX_SPAN). Outputs as
    attn_decode_kernel: out and lse, or the partials for attn_merge_kernel; info[4] = ⌈L/rows⌉ ·
    splits. With `fused` (splits > 1) the partials go to the persistent scratch `mp` bound after
    out and lse, and the ranges merge in this dispatch (MERGE_SLOTS). Keys past the range are
    clamped reads scored -inf; the loop's bound is the workgroup's, so the shuffles stay in
    uniform control flow."""
    _check(E, 8, mask)
    C = padded_dim(E) // 4
    U = -(-C // lanes)  # chunks a lane holds
    K = DECODE_WG // lanes
    exact = E % 4 == 0 and C % lanes == 0  # (every lane's chunks lie inside the row)
    fused = fused and splits > 1
    lay, bufs, b = forward_setup(DECODE_WG, rank, mask, (q_type, k_type, v_type, m_type, out_type),
                                 1 if fused else splits, dropout)  # fmt: skip
    if fused:
        bufs = bufs + [("mp", "atomic<u32>", "w")]
    b += f"  let t = i32(lid.x);\n  let rk = t % {lanes};\n  let gk = t / {lanes};\n"
    b += f"  let ib = (blk / {splits}) * {rows};\n  let part_i = blk % {splits};\n"
    b += key_range(f"min(S, min(L, ib + {rows}))" if causal else "S", splits, step * K)
    b += "  let n = max(kend - k0, 0);\n"

    def chunk(buf, stype, base, col, u):
        comps = []
        for k in range(4):
            e = f"4 * (rk + {u * lanes}) + {k}"
            if exact:
                comps.append(load(f"{buf}[{base} + ({e}) * {col}]", stype, "f32"))
            else:
                v = load(f"{buf}[{base} + min({e}, {E - 1}) * {col}]", stype, "f32")
                comps.append(f"select(0.0, {v}, {e} < {E})")
        return f"vec4<f32>({', '.join(comps)})"

    for r in range(rows):
        b += f"  let i{r} = min(ib + {r}, L - 1);\n"
        for u in range(U):
            q = chunk("q_", q_type, f"qb + i{r} * {lay.row('q')}", lay.col("q"), u)
            b += f"  let q{r}_{u} = {q} * scale;\n  var a{r}_{u} = vec4<f32>(0.0);\n"
        b += f"  var m{r} = -p_inf();\n  var l{r} = 0.0;\n"
    b += f"  for (var jb = 0; jb < n; jb += {step * K}) {{\n"
    for w in range(step):
        b += f"    let jj{w} = jb + gk + {w * K};\n    let j{w} = k0 + min(jj{w}, n - 1);\n"
        for u in range(U):
            kc = chunk("k_", k_type, f"kb + j{w} * {lay.row('k')}", lay.col("k"), u)
            b += f"    let k{w}_{u} = {kc};\n"
        for r in range(rows):
            terms = " + ".join(f"dot(q{r}_{u}, k{w}_{u})" for u in range(U))
            b += f"    var s{w}_{r} = {terms};\n"
    for o in sg_offsets(lanes):
        for w in range(step):
            for r in range(rows):
                b += f"    s{w}_{r} += subgroupShuffleXor(s{w}_{r}, {o}u);\n"
    for w in range(step):
        for u in range(U):
            vc = chunk("v_", v_type, f"vb + j{w} * {lay.row('v')}", lay.col("v"), u)
            b += f"    let v{w}_{u} = {vc};\n"
    for r in range(rows):
        for w in range(step):
            b += f"    var ok{w}_{r} = jj{w} < n;\n"
            if causal:
                b += f"    ok{w}_{r} = ok{w}_{r} && j{w} <= i{r};\n"
            mt = _mask_words(_mask_test(mask, m_type, f"i{r}", f"j{w}"), mask, lay)
            b += re.sub(r"\bok\b", f"ok{w}_{r}", mt).replace("s +=", f"s{w}_{r} +=")
            b += f"    s{w}_{r} = select(-p_inf(), s{w}_{r}, ok{w}_{r});\n"
        b += (
            f"    let mn{r} = max(m{r}, {_tree_of('max', [f's{w}_{r}' for w in range(step)])});\n"
            f"    let al{r} = select(exp(m{r} - mn{r}), 0.0, mn{r} == -p_inf());\n"
        )
        for w in range(step):
            b += f"    let p{w}_{r} = select(exp(s{w}_{r} - mn{r}), 0.0, s{w}_{r} == -p_inf());\n"
        psum = _tree_of("+", [f"p{w}_{r}" for w in range(step)])
        b += f"    l{r} = l{r} * al{r} + {psum};\n    m{r} = mn{r};\n"
        pv = []
        for w in range(step):
            pw = f"p{w}_{r}"
            if dropout:
                keep = dropout_keep(f"bh * L + i{r}", f"j{w}")
                pw = f"select(0.0, p{w}_{r} * dscale, {keep})"
            pv.append(pw)
        for u in range(U):
            terms = " + ".join(f"{pv[w]} * v{w}_{u}" for w in range(step))
            b += f"    a{r}_{u} = a{r}_{u} * al{r} + {terms};\n"
    b += "  }\n"
    # the K slots' states of each query merged: max, then sums and chunks rescaled to it
    for r in range(rows):
        b += f"  if (rk == 0) {{ rm[gk] = m{r}; }}\n  workgroupBarrier();\n"
        b += f"  var M{r} = -p_inf();\n  for (var g = 0; g < {K}; g++) {{ M{r} = max(M{r}, rm[g]); }}\n"
        b += f"  let f{r} = select(exp(m{r} - M{r}), 0.0, M{r} == -p_inf());\n"
        b += f"  if (rk == 0) {{ rl[gk] = l{r} * f{r}; }}\n"
        for u in range(U):
            guard = "" if exact else f"if (rk + {u * lanes} < {C}) "
            b += f"  {guard}{{ ra[gk * {C} + rk + {u * lanes}] = a{r}_{u} * f{r}; }}\n"
        b += "  workgroupBarrier();\n"
        b += f"  if (t < {C} && ib + {r} < L) {{\n"
        b += "    var a = vec4<f32>(0.0);\n    var l = 0.0;\n"
        b += f"    for (var g = 0; g < {K}; g++) {{ a += ra[g * {C} + t]; l += rl[g]; }}\n"
        b += f"    let row = bh * L + i{r};\n    let e0 = 4 * t;\n"
        if splits > 1:  # (the range's partials: words of the scratch, or the merge kernel's)
            if fused:
                put = lambda i, v: f"atomicStore(&mp[{i}], p_word({v}));"  # noqa: E731
            else:
                put = lambda i, v: f"part[{i}] = {v};"  # noqa: E731
            b += f"    let pb = (row * {splits} + part_i) * {E + 2};\n"
            for k in range(4):
                b += f"    if (e0 + {k} < {E}) {{ {put(f'pb + e0 + {k}', f'a[{k}]')} }}\n"
            b += f"    if (t == 0) {{ {put(f'pb + {E}', f'M{r}')} {put(f'pb + {E + 1}', 'l')} }}\n"
        else:
            b += "    let inv = select(1.0 / l, 0.0, l == 0.0);\n"
            b += f"    let ob = {_row_base('L', f'i{r}', E, heads)};\n"
            for k in range(4):
                val = store(f"a[{k}] * inv", "f32", out_type)
                b += f"    if (e0 + {k} < {E}) {{ o_[ob + e0 + {k}] = {val}; }}\n"
            b += "    if (t == 0) {\n" + lse_store("row", f"M{r}", "l", "      ") + "    }\n"
        b += "  }\n  workgroupBarrier();\n"
    if fused:
        b += _fused_merge(E, splits, rows, heads, out_type, spins)
    b += "}\n"
    shared = (
        f"var<workgroup> rm: array<f32, {max(K, rows * splits if fused else 0)}>;\n"
        f"var<workgroup> rl: array<f32, {max(K, rows * splits if fused else 0)}>;\n"
        f"var<workgroup> ra: array<vec4<f32>, {K * C}>;\n"
    )
    fns = ""
    if fused:
        shared += "var<workgroup> last: u32;\n"
        fns = (
            "fn p_wait(i: i32, first: u32) -> f32 {\n"
            "  var v = first;\n"
            f"  for (var n = 0; v == {MERGE_EMPTY:#x}u && n < {spins}; n++) "
            "{ v = atomicLoad(&mp[i]); }\n"
            f"  atomicStore(&mp[i], {MERGE_EMPTY:#x}u);\n"
            "  return bitcast<f32>(v);\n}\n"
        )
    src = (SG_ENABLE if sg == 2 else "") + header(bufs) + helpers_for(b) + shared + fns + b
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def _fused_merge(E, splits, rows, heads, out_type, spins) -> str:
    """WGSL of the fused merge (MERGE_SLOTS): the workgroup counts itself in its block's
    counter; the block's last one takes every range's max and sum of every row (one lane a
    (row, range)) into workgroup memory, then every (row, column) (all the lanes, in turn) reads
    its word of each range, all the reads issued before any is waited for, merges them as
    attn_merge_kernel does and writes out and lse; then it sets the counter back to 0."""
    w = E + 2
    rs = rows * splits
    b = f"  let cnt = {MERGE_SLOTS} + bh * ((L + {rows - 1}) / {rows}) + blk / {splits};\n"
    b += f"  if (t == 0) {{ last = select(0u, 1u, atomicAdd(&mp[cnt], 1u) == {splits - 1}u); }}\n"
    b += "  if (workgroupUniformLoad(&last) == 0u) { return; }\n"
    b += f"  for (var x = t; x < {rs}; x += {DECODE_WG}) {{\n"
    b += f"    let r = x / {splits};\n    let p = x % {splits};\n"
    b += f"    if (ib + r < L) {{\n      let pb = ((bh * L + ib + r) * {splits} + p) * {w};\n"
    b += f"      rm[x] = p_wait(pb + {E}, atomicLoad(&mp[pb + {E}]));\n"
    b += f"      rl[x] = p_wait(pb + {E + 1}, atomicLoad(&mp[pb + {E + 1}]));\n    }}\n  }}\n"
    b += "  workgroupBarrier();\n"
    b += f"  for (var x = t; x < {rows * E}; x += {DECODE_WG}) {{\n"
    b += f"    let r = x / {E};\n    let e = x % {E};\n"
    b += "    if (ib + r < L) {\n      let row = bh * L + ib + r;\n"
    b += f"      let rb = row * {splits * w} + e;\n"
    for p in range(splits):  # (every read in flight before the first wait)
        b += f"      let w{p} = atomicLoad(&mp[rb + {p * w}]);\n"
    b += f"      var M = rm[r * {splits}];\n"
    for p in range(1, splits):
        b += f"      M = max(M, rm[r * {splits} + {p}]);\n"
    b += "      var l = 0.0;\n      var a = 0.0;\n"
    for p in range(splits):
        b += (
            f"      let f{p} = select(exp(rm[r * {splits} + {p}] - M), 0.0, M == -p_inf());\n"
            f"      l += rl[r * {splits} + {p}] * f{p};\n"
            f"      a += p_wait(rb + {p * w}, w{p}) * f{p};\n"
        )
    b += "      let inv = select(1.0 / l, 0.0, l == 0.0);\n"
    b += f"      let ob = {_row_base('L', '(ib + r)', E, heads)};\n"
    b += f"      o_[ob + e] = {store('a * inv', 'f32', out_type)};\n"
    b += "      if (e == 0) {\n" + lse_store("row", "M", "l", "        ") + "      }\n    }\n  }\n"
    b += "  if (t == 0) { atomicStore(&mp[cnt], 0u); }\n"
    return b


def _tree_of(op: str, xs: list[str]) -> str:
    """WGSL combining xs pairwise (a balanced tree): op "max" or "+"."""
    while len(xs) > 1:
        pairs = [xs[i : i + 2] for i in range(0, len(xs), 2)]
        xs = [(f"max({p[0]}, {p[1]})" if op == "max" else f"({p[0]} + {p[1]})") if len(p) == 2
              else p[0] for p in pairs]  # fmt: skip
    return xs[0]
