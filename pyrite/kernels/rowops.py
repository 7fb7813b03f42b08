"""Fused row ops: softmax, log_softmax, layer_norm, rms_norm — one workgroup per row.

A "row" is the run of `n` elements the op normalises over (the softmax dim, or the flattened
normalized_shape). Every other dim is an "outer" dim: the row index r (the flat workgroup id of a
folded grid) is split into outer coordinates, and each operand's row base is
`off + sum_d c_d * stride_d`. The input is read through its strides (no copy), the output is
written in its own (contiguous) layout.

Inside a row, invocation `lid` walks elements lid, lid+WG, lid+2·WG, ... of the row, keeping a
partial result in registers; one tree reduction in workgroup memory combines the WG partials
(log2(WG) barriers: barriers are the expensive part on lavapipe, so each op does a single tree):

  softmax / log_softmax  online (max, sum of exp(x - max)) pairs, rescaled as the max rises, so
                         the input is read twice in all (reduce, then write) and exp never
                         overflows: out = exp(x - m) / s, or x - m - log(s)
  layer_norm             Welford (count, mean, M2) per invocation, Chan's pairwise combine in the
                         tree; out = (x - mean) * inverseSqrt(M2/n + eps) * w + b
  rms_norm               sum of x²; out = x * inverseSqrt(sum/n + eps) * w

Info words (i32):
  [0] rows R  [1] n  [2] x offset  [3] x row stride  [4] out row stride  [5] eps (f32 bits)
  [6 .. 6+K) outer sizes, then K x outer strides, then K out outer strides  (K = `rank`)
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    ENTRY,
    ENTRY_SG,
    SG_ENABLE,
    KernelSource,
    header,
    helpers_for,
    load,
    post_expr,
    sg_offsets,
    store,
    trusted,
)

OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")


def workgroup_size(n: int, gpu: bool = False) -> int:
    """Invocations per row: 32, doubled (up to 256) while each would walk over 32 elements; on
    a GPU 64, doubled while each would walk over 4.

    On the H200 (2026-12-01, `scripts/compile_profile.py bert`, timestamps, wgpu-native) the CPU
    rule's 32 invocations a row of 768 (24 Welford steps each, a division in every step, 128
    rows: 4,096 invocations on 132 SMs) took 20.3 us a layer_norm of 128 x 768.

    Measured on lavapipe (2 cores, softmax f32, ms per call by workgroup size 32/64/128/256):
    (4099, 257): 33/37/68/122; (257, 4099): 14/18/18/21; (65536, 16): 323/465/1124/2153.
    lavapipe runs a group's invocations in turn and splits the shader at each barrier, so small
    groups win there; a GPU wants enough invocations per long row to keep its memory busy, hence
    the growth past 1024 elements (the (257, 4099) case loses 14 -> 18 ms on lavapipe for it)."""
    if gpu:
        wg = 64
        while wg * 4 < n and wg < 256:
            wg *= 2
        return wg
    wg = 32
    while wg * 32 < n and wg < 256:
        wg *= 2
    return wg


def row_loop_iterations(n: int, wg: int) -> int:
    """Loop iterations of one invocation of row_kernel over a row of n, each loop's exit test
    included (lavapipe counts it against its budget): two passes of ceil(n / wg) steps and the
    log2(wg)-step tree."""
    return 2 * (-(-n // wg) + 1) + wg.bit_length() + 2


def _reduce_tree(wg: int, combine: str, lane: str = "lid.x") -> str:
    """The tree over workgroup memory; `combine` is WGSL combining slot `lid` with `j`.
    `lane`: the invocation's index within its row's `wg` (several rows a workgroup)."""
    return (
        f"  var half = {wg // 2}u;\n"
        "  loop {\n"
        "    workgroupBarrier();\n"
        "    if (half == 0u) { break; }\n"
        f"    if ({lane} < half) {{ let j = lid.x + half;\n{combine}    }}\n"
        "    half = half >> 1u;\n"
        "  }\n"
    )


# (m, s): running max and sum of exp(x - m) over a row, one element `v` a step. -inf elements
# add nothing (they would give exp(-inf - -inf) = NaN); a NaN or +inf element makes s NaN, so
# the whole row is NaN as in torch (whose exp(x - max) is exp(inf - inf) = NaN there).
_ONLINE_STEP = (
    "    if (p_isnan(v) || v == p_inf()) { s = p_nan(); }\n"
    "    else if (v > m) { s = s * exp(m - v) + 1.0; m = v; }\n"
    "    else if (v != -p_inf()) { s += exp(v - m); }\n"
)
# the tree's merge of two (m, s) partials held in workgroup arrays sm, ss (defines mm, m1, m2)
_ONLINE_MERGE = (
    "      let m1 = sm[lid.x]; let m2 = sm[j]; let s1 = ss[lid.x]; let s2 = ss[j];\n"
    "      let mm = max(m1, m2);\n"
    "      let t1 = select(s1 * exp(m1 - mm), s1, s1 == 0.0 || m1 == mm);\n"
    "      let t2 = select(s2 * exp(m2 - mm), s2, s2 == 0.0 || m2 == mm);\n"
    "      sm[lid.x] = mm; ss[lid.x] = t1 + t2;\n"
)
# Welford's step over one element `v` of a row, into (cnt, mu, m2)
_WELFORD_STEP = (
    "    cnt += 1.0;\n    let d = v - mu;\n    mu += d / cnt;\n    m2 += d * (v - mu);\n"
)


def _chan_merge(c: str, mu: str, q: str) -> str:
    """Chan et al.: the tree's merge of two (count, mean, M2) partials in arrays c, mu, q."""
    return (
        f"      let na = {c}[lid.x]; let nb = {c}[j];\n"
        "      let nt = na + nb;\n"
        "      if (nb > 0.0) {\n"
        f"        let d = {mu}[j] - {mu}[lid.x];\n"
        "        let f = nb / nt;\n"
        f"        {mu}[lid.x] = {mu}[lid.x] + d * f;\n"
        f"        {q}[lid.x] = {q}[lid.x] + {q}[j] + d * d * na * f;\n"
        f"        {c}[lid.x] = nt;\n"
        "      }\n"
    )


def _row_buffers(x_type, out_type, w_type, b_type) -> list:
    buffers = [("x", x_type, "r")]
    if w_type:
        buffers.append(("w", w_type, "r"))
    if b_type:
        buffers.append(("b", b_type, "r"))
    buffers.append(("out", out_type, "w"))
    return buffers


def _row_bases(rank: int) -> list[str]:
    """Row r's input and output bases (xb, ob) from its `rank` outer coordinates, innermost
    first (info: sizes at 6, x strides at 6 + rank, out strides at 6 + 2·rank), then the row's
    element strides and eps."""
    sizes, xs, os_ = 6, 6 + rank, 6 + 2 * rank
    body = [
        f"  {{ let c = r % info[{sizes + d}]; r = r / info[{sizes + d}]; "
        f"xb += c * info[{xs + d}]; ob += c * info[{os_ + d}]; }}\n"
        for d in range(rank - 1, -1, -1)
    ]
    body.append("  let sx = info[3];\n  let so = info[4];\n  let eps = bitcast<f32>(info[5]);\n")
    return body


@lru_cache(maxsize=256)
def row_kernel(
    op: str,
    wg: int,
    rank: int,
    x_type: str,
    out_type: str,
    w_type: str | None = None,
    b_type: str | None = None,
    per: int = 0,
    groups: int = 1,
    subgroups: int = 0,
    vec: int = 1,
) -> KernelSource:
    """WGSL for `op` over rows of `n` elements; `rank` outer dims; w/b types None when absent.
    `per` > 0: each invocation holds its (at most `per`) elements of the row in registers
    (`_held_row`, `groups` rows a workgroup of groups·wg), so the row is read once; 0: two
    streaming passes over the row. `subgroups` (held rows only; the device's `subgroups`):
    0: the row's reduction is a tree over workgroup memory; 1: subgroup operations
    (`_sg_reduce`); 2: the same with WGSL's `enable subgroups;` (Dawn wants it, naga refuses it).
    `vec` (held rows only): 4 reads and writes the rows as vec4s (see _held_row)."""
    if op not in OPS:
        raise ValueError(f"pyrite: unknown row op {op!r}")
    if per:
        return _held_row(
            op, wg, rank, x_type, out_type, w_type, b_type, per, groups, subgroups, vec
        )
    buffers = _row_buffers(x_type, out_type, w_type, b_type)
    ld = lambda e, t: load(e, t, "f32")

    body = [
        "  let row = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n",
        "  if (row >= u32(info[0])) { return; }\n",  # uniform: the whole group leaves
        "  let n = info[1];\n",
        "  var r = i32(row);\n",
        "  var xb = info[2];\n",
        "  var ob = 0;\n",
    ]
    body += _row_bases(rank)
    xk = ld("x[xb + k * sx]", x_type)
    wk = ld("w[k]", w_type) if w_type else "1.0"
    bk = ld("b[k]", b_type) if b_type else "0.0"
    loop = f"  for (var k = i32(lid.x); k < n; k += {wg}) {{\n"

    if op in ("softmax", "log_softmax"):
        shared = f"var<workgroup> sm: array<f32, {wg}>;\nvar<workgroup> ss: array<f32, {wg}>;\n"
        body += [
            "  var m = -p_inf();\n  var s = 0.0;\n",
            loop,
            f"    let v = {xk};\n",
            _ONLINE_STEP,
            "  }\n  sm[lid.x] = m;\n  ss[lid.x] = s;\n",
        ]
        body.append(_reduce_tree(wg, _ONLINE_MERGE))
        body.append("  let M = sm[0];\n  let S = ss[0];\n")
        if op == "softmax":
            body.append("  let inv = 1.0 / S;\n")
            val = "exp(v - M) * inv"
        else:
            # (v - M) - log(S), as torch: v - (M + log(S)) rounded the sum at M's ulp (at M = 9
            # the max's -0.00144 was 3.9e-7 off, 2.7e-4 relative; test_fuzz_nn.py test_loss[557]
            # at PYRITE_FUZZ_SEED=101)
            body.append("  let ls = log(S);\n")
            val = "(v - M) - ls"
    elif op == "layer_norm":
        shared = (
            f"var<workgroup> sc: array<f32, {wg}>;\n"
            f"var<workgroup> smu: array<f32, {wg}>;\n"
            f"var<workgroup> sq: array<f32, {wg}>;\n"
        )
        # (the statistics of x - shift, shift the row's first element: see _held_row)
        body += [
            f"  let shift = {ld('x[xb]', x_type)};\n",
            "  var cnt = 0.0;\n  var mu = 0.0;\n  var m2 = 0.0;\n",
            loop,
            f"    let v = {xk} - shift;\n",
            _WELFORD_STEP,
            "  }\n  sc[lid.x] = cnt;\n  smu[lid.x] = mu;\n  sq[lid.x] = m2;\n",
        ]
        body.append(_reduce_tree(wg, _chan_merge("sc", "smu", "sq")))
        body.append("  let M = smu[0];\n  let rstd = inverseSqrt(sq[0] / f32(n) + eps);\n")
        val = f"((v - shift) - M) * rstd * {wk} + {bk}"
    else:  # rms_norm
        shared = f"var<workgroup> sq: array<f32, {wg}>;\n"
        body += [
            "  var acc = 0.0;\n",
            loop,
            f"    let v = {xk};\n",
            "    acc += v * v;\n",
            "  }\n  sq[lid.x] = acc;\n",
        ]
        body.append(_reduce_tree(wg, "      sq[lid.x] = sq[lid.x] + sq[j];\n"))
        body.append("  let rstd = inverseSqrt(sq[0] / f32(n) + eps);\n")
        val = f"v * rstd * {wk}"

    body += [
        loop,
        f"    let v = {xk};\n",
        f"    out[ob + k * so] = {store(val, 'f32', out_type)};\n",
        "  }\n",
    ]
    entry = ENTRY.format(wg=wg)
    text = "".join(body)
    src = (
        header(buffers)
        + helpers_for(text, "p_isnan(x) p_nan() p_inf()")
        + shared
        + entry
        + text
        + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


HELD_MAX = 16  # elements an invocation holds at most (row_kernel's `per`)


# Merges of two partials (the names, and the names with "2": the other's), for the subgroup
# reduction (`_sg_reduce`): softmax's (max, sum of exp(x - max), NaN-or-+inf flag), layer_norm's
# (count, mean, squared deviations) by Chan et al.'s rule, rms_norm's sum of squares.
_SG_MERGES = {
    "softmax": (
        "      let mm = max(rm, rm2);\n"
        "      let t1 = select(rs * exp(rm - mm), rs, rs == 0.0 || rm == mm);\n"
        "      let t2 = select(rs2 * exp(rm2 - mm), rs2, rs2 == 0.0 || rm2 == mm);\n"
        "      rm = mm; rs = t1 + t2; rb = max(rb, rb2);\n"
    ),
    "layer_norm": (
        "      if (rc2 > 0.0) {\n"
        "        let nt = rc + rc2; let d = rmu2 - rmu; let f = rc2 / nt;\n"
        "        rmu = rmu + d * f; rq = rq + rq2 + d * d * rc * f; rc = nt;\n"
        "      }\n"
    ),
    "rms_norm": "      rq = rq + rq2;\n",
}


def _sg_reduce(wg: int, names: list[str], merge: str) -> str:
    """The row's reduction of the partials held in `names` (f32 variables, the workgroup arrays
    s_<name> of one slot an invocation), every lane of the row ending with the total, by
    subgroup operations where the device has them (`subgroups` in the kernels' requests):
    a butterfly of subgroupShuffleXor within each subgroup (offsets 1, 2, .. below the span
    min(subgroup size, wg): the row's lanes and the subgroup's are both aligned blocks of
    powers of two, so a partner is in the same row and subgroup), then one slot a subgroup
    in workgroup memory, one barrier, and each lane merging its row's wg / span slots in order.
    One barrier where the tree (`_reduce_tree`) takes log2(wg) + 1. Every shuffle runs in
    uniform control flow (offsets below min(wg, SG_MAX) are generated; one past the subgroup
    is discarded by the branch after it, which holds no subgroup operation), so strict uniformity
    analysis (Tint's) accepts it. Assumes subgroups are consecutive local indices, which
    backend/quirks.subgroup_size probes before a device uses them."""
    L = [f"  let span = min(sgs, {wg}u);\n"]
    for o in sg_offsets(wg):
        L.append("  {\n")
        L += [f"    let {n}2 = subgroupShuffleXor({n}, {o}u);\n" for n in names]
        L.append(f"    if ({o}u < span) {{\n{merge}    }}\n  }}\n")
    L.append(f"  let nsub = {wg}u / span; let slot0 = grp * nsub;\n")
    L.append(
        "  if (lane % span == 0u) { "
        + " ".join(f"s_{n}[slot0 + lane / span] = {n};" for n in names)
        + " }\n"
    )
    L.append("  workgroupBarrier();\n")
    L.append("  " + " ".join(f"{n} = s_{n}[slot0];" for n in names) + "\n")
    L.append("  for (var u = 1u; u < nsub; u++) {\n")
    L.append("    " + " ".join(f"let {n}2 = s_{n}[slot0 + u];" for n in names) + "\n")
    L.append(merge)
    L.append("  }\n")
    return "".join(L)


def _held_row(
    op, wg, rank, x_type, out_type, w_type, b_type, per, groups, subgroups=0, vec=1
) -> KernelSource:
    """row_kernel with the row in registers: `groups` rows a workgroup, `wg` invocations a row;
    lane t of a row holds its elements t + i·wg (i < per), loaded once, then one tree over
    workgroup memory (as the streaming kernel's; every row of the workgroup in step, rows past
    the last computing nothing). softmax:
    each invocation's maximum over its finite and -inf elements (a NaN or +inf one makes the
    row NaN, as torch's exp(x - max) does) and its sum of exp(x - max), one exp an element
    (the streaming kernel's online rescaling spends up to three), merged as the streaming
    kernel merges; its exps are then rescaled by exp(m - M) / S. layer_norm: each invocation's
    count, mean and squared deviations by two passes over its registers (no division a step,
    as Welford's), merged by Chan et al.'s rule. rms_norm: the sum of squares. Measured: see
    ops/rowops.py HELD.

    `vec` 4 (f32 in and out, unit element strides, rows starting at multiples of 4 and n a
    multiple of 4: the caller checks): the row is read and written as vec4s, lane t holding
    vec4s t + g·wg (g < per / 4), each one 16-byte load and store (ops/rowops.py HELD_VEC4)."""
    buffers = _row_buffers(x_type, out_type, w_type, b_type)
    if vec == 4:
        assert x_type == out_type == "f32" and per % 4 == 0
        buffers = [(n, "vec4<f32>" if n in ("x", "out") else t, m) for n, t, m in buffers]
    body = [
        "  let wf = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n",
        f"  let grp = lid.x / {wg}u; let lane = lid.x % {wg}u; let base = grp * {wg}u;\n",
        f"  let row = wf * {groups}u + grp;\n",
        "  if (wf * %du >= u32(info[0])) { return; }\n" % groups,  # (uniform: the whole group)
        "  let live = row < u32(info[0]);\n",
        "  let n = info[1];\n  var r = i32(min(row, u32(info[0]) - 1u));\n",
        "  var xb = info[2];\n  var ob = 0;\n",
    ]
    body += _row_bases(rank)
    idx = range(per)
    if vec == 4:  # element k{4g + c} = 4·j{g} + c, read with vec4 j{g}
        for g in range(per // 4):
            body.append(
                f"  let j{g} = i32(lane) + {g * wg}; let hv{g} = live && 4 * j{g} < n;\n"
                f"  var x{g} = vec4<f32>(0.0); if (hv{g}) {{ x{g} = x[xb / 4 + j{g}]; }}\n"
            )
            for c in range(4):
                i = 4 * g + c
                body.append(
                    f"  let k{i} = 4 * j{g} + {c}; let h{i} = hv{g}; var v{i} = x{g}[{c}];\n"
                )
    else:
        for i in idx:
            body.append(
                f"  let k{i} = i32(lane) + {i * wg}; let h{i} = live && k{i} < n; var v{i} = 0.0;\n"
                f"  if (h{i}) {{ v{i} = {load(f'x[xb + k{i} * sx]', x_type, 'f32')}; }}\n"
            )

    shared = []
    if op in ("softmax", "log_softmax"):
        # this invocation's (max, sum of exp(x - max)) over its elements, each exp once; one
        # tree merges the pairs (and the NaN-or-+inf flag); the held exps are then rescaled
        shared = ["sm", "ss", "sb"]
        body.append("  var m = -p_inf(); var bad = 0.0;\n")
        for i in idx:
            body.append(
                f"  if (h{i}) {{ if (p_isnan(v{i}) || v{i} == p_inf()) {{ bad = 1.0; }} "
                f"else {{ m = max(m, v{i}); }} }}\n"
            )
        body.append("  var s = 0.0;\n")
        for i in idx:
            body.append(
                f"  var e{i} = 0.0; if (h{i} && v{i} != -p_inf()) {{ e{i} = exp(v{i} - m); "
                f"s += e{i}; }}\n"
            )
        if subgroups:
            shared = ["s_rm", "s_rs", "s_rb"]
            body.append("  var rm = m; var rs = s; var rb = bad;\n")
            body.append(_sg_reduce(wg, ["rm", "rs", "rb"], _SG_MERGES["softmax"]))
            body.append("  let M = rm;\n  let S = rs;\n  let nan_row = rb > 0.0;\n")
        else:
            body.append("  sm[lid.x] = m;\n  ss[lid.x] = s;\n  sb[lid.x] = bad;\n")
            merge = _ONLINE_MERGE + "      sb[lid.x] = max(sb[lid.x], sb[j]);\n"
            body.append("  {\n" + _reduce_tree(wg, merge, "lane") + "  }\n")
            body.append(
                "  let M = sm[base];\n  let S = ss[base];\n  let nan_row = sb[base] > 0.0;\n"
            )
        if op == "softmax":
            body.append(
                "  let inv = select(select(exp(m - M), 0.0, m == -p_inf()) / S, p_nan(), "
                "nan_row);\n"
            )
            vals = [f"e{i} * inv" for i in idx]
        else:
            body.append("  let ls = select(log(S), p_nan(), nan_row);\n")
            vals = [f"(v{i} - M) - ls" for i in idx]  # (see row_kernel's log_softmax)
    elif op == "layer_norm":
        # this invocation's (count, mean, squared deviations) by two passes over its elements,
        # then one tree of Chan et al.'s merges
        # The sums are of x - shift, shift the row's first element (shifted data): rows far
        # from 0 (x ~ 1e4, spread 1) summed raw carry 1e4's rounding into the mean and every
        # deviation; x - shift is exact there (Sterbenz).
        shared = ["sc", "smu", "sq"]
        first = "x[xb / 4].x" if vec == 4 else load("x[xb]", x_type, "f32")
        body.append(f"  let shift = {first};\n")
        body += [f"  if (h{i}) {{ v{i} = v{i} - shift; }}\n" for i in idx]
        body.append("  var c = 0.0; var a = 0.0;\n")
        body += [f"  if (h{i}) {{ c += 1.0; a += v{i}; }}\n" for i in idx]
        body.append("  let mu = select(a / c, 0.0, c == 0.0);\n  var q = 0.0;\n")
        body += [f"  if (h{i}) {{ let d = v{i} - mu; q += d * d; }}\n" for i in idx]
        if subgroups:
            shared = ["s_rc", "s_rmu", "s_rq"]
            body.append("  var rc = c; var rmu = mu; var rq = q;\n")
            body.append(_sg_reduce(wg, ["rc", "rmu", "rq"], _SG_MERGES["layer_norm"]))
            body.append("  let M = rmu;\n  let rstd = inverseSqrt(rq / f32(n) + eps);\n")
        else:
            body.append("  sc[lid.x] = c;\n  smu[lid.x] = mu;\n  sq[lid.x] = q;\n")
            body.append(
                "  {\n" + _reduce_tree(wg, _chan_merge("sc", "smu", "sq"), "lane") + "  }\n"
            )
            body.append(
                "  let M = smu[base];\n  let rstd = inverseSqrt(sq[base] / f32(n) + eps);\n"
            )
        vals = []
        for i in idx:
            wk = load(f"w[k{i}]", w_type, "f32") if w_type else "1.0"
            bk = load(f"b[k{i}]", b_type, "f32") if b_type else "0.0"
            vals.append(f"(v{i} - M) * rstd * {wk} + {bk}")
    else:  # rms_norm
        shared = ["sq"]
        body.append("  var q = 0.0;\n" + "".join(f"  q += v{i} * v{i};\n" for i in idx))
        if subgroups:
            shared = ["s_rq"]
            body.append("  var rq = q;\n")
            body.append(_sg_reduce(wg, ["rq"], _SG_MERGES["rms_norm"]))
            body.append("  let rstd = inverseSqrt(rq / f32(n) + eps);\n")
        else:
            body.append("  sq[lid.x] = q;\n")
            body.append(
                "  {\n"
                + _reduce_tree(wg, "      sq[lid.x] = sq[lid.x] + sq[j];\n", "lane")
                + "  }\n"
            )
            body.append("  let rstd = inverseSqrt(sq[base] / f32(n) + eps);\n")
        vals = []
        for i in idx:
            wk = load(f"w[k{i}]", w_type, "f32") if w_type else "1.0"
            vals.append(f"v{i} * rstd * {wk}")
    if vec == 4:
        for g in range(per // 4):
            body.append(
                f"  if (hv{g}) {{ out[ob / 4 + j{g}] = vec4<f32>({', '.join(vals[4 * g : 4 * g + 4])}); }}\n"
            )
    else:
        for i, v in zip(idx, vals):
            body.append(f"  if (h{i}) {{ out[ob + k{i} * so] = {store(v, 'f32', out_type)}; }}\n")
    text = "".join(body)
    src = (
        (SG_ENABLE if subgroups == 2 else "")
        + header(buffers)
        + helpers_for(text, "p_isnan(x) p_nan() p_inf()")
        + "".join(f"var<workgroup> {a}: array<f32, {wg * groups}>;\n" for a in shared)
        + (ENTRY_SG if subgroups else ENTRY).format(wg=wg * groups)
        + text
        + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


GRAD_OPS = ("softmax", "log_softmax", "layer_norm", "rms_norm")


def grad_loop_iterations(op: str, n: int, wg: int) -> int:
    """Loop iterations of one invocation of row_grad_kernel over a row of n (as
    row_loop_iterations): two passes for the softmaxes, three for the norms, and their trees."""
    passes = 2 if op in ("softmax", "log_softmax") else 3
    trees = 1 if op in ("softmax", "log_softmax") else 2
    return passes * (-(-n // wg) + 1) + trees * (wg.bit_length() + 2)


def _tree(wg: int, combine: str) -> str:
    """_reduce_tree in its own block (a kernel with two trees declares `half` twice)."""
    return "  {\n" + _reduce_tree(wg, combine) + "  }\n"


@lru_cache(maxsize=128)
def row_grad_kernel(
    op: str, wg: int, a_type: str, g_type: str, out_type: str, w_type=None, post=None
):
    """WGSL for the gradient of row op `op` with respect to its input, over contiguous rows.

    Operands: `a` (softmax, log_softmax: the op's output y; the norms: the input x), `g` the
    incoming gradient, `w` the norms' weight (absent: 1), `out` the input's gradient; the norms
    also write `stats` (row r: mean at 2r, 1/std at 2r+1) for their weight's gradient.
      softmax      dx = y·(g - Σ g·y)
      log_softmax  dx = g - exp(y)·Σ g
      layer_norm   x̂ = (x - μ)·r, ĝ = g·w:  dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂))
      rms_norm     x̂ = x·r:                 dx = r·(ĝ - x̂·mean(ĝ·x̂))
    μ and r are recomputed (Welford and Chan's merge, as the forward), not saved.
    Info words: [0] rows  [1] n  [2] a offset  [3] g offset  [4] eps (f32 bits).

    `post` (compile/fusion.py: a map fused into the store, as gemm_fast's) is (expr, n_extra,
    at, s_ctypes): `out` (then f32, at the element offset in info word `at`) gets expr with x0
    the gradient, x1.. read from the f32 operands bound after `w` at info words at + 1 + 3k
    (base, row stride, column stride), s0.. scalars after those.
    """
    if op not in GRAD_OPS:
        raise ValueError(f"pyrite: unknown row op {op!r}")
    norm = op in ("layer_norm", "rms_norm")
    buffers = [("a", a_type, "r"), ("g", g_type, "r")]
    if w_type:
        buffers.append(("w", w_type, "r"))
    if post is not None:
        p_expr, n_extra, p_at, p_sct = post
        buffers += [(f"r{k}", "f32", "r") for k in range(1, n_extra + 1)]
    buffers.append(("out", out_type, "w"))
    if norm:
        buffers.append(("stats", "f32", "w"))
    ak = load("a[ab + k]", a_type, "f32")
    gk = load("g[gb + k]", g_type, "f32")
    wk = load("w[k]", w_type, "f32") if w_type else "1.0"
    loop = f"  for (var k = i32(lid.x); k < n; k += {wg}) {{\n"
    body = [
        "  let row = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n",
        "  if (row >= u32(info[0])) { return; }\n",
        "  let n = info[1];\n",
        "  let ob = i32(row) * n;\n  let ab = info[2] + ob;\n  let gb = info[3] + ob;\n",
        "  let eps = bitcast<f32>(info[4]);\n",
    ]
    sum_tree = _tree(wg, "      s1[lid.x] = s1[lid.x] + s1[j];\n")
    shared = f"var<workgroup> s1: array<f32, {wg}>;\n"
    if op == "softmax":
        body += [
            "  var acc = 0.0;\n",
            loop,
            f"    acc += {gk} * {ak};\n  }}\n  s1[lid.x] = acc;\n",
            sum_tree,
            "  let dot = s1[0];\n",
        ]
        val = f"{ak} * ({gk} - dot)"
    elif op == "log_softmax":
        body += [
            "  var acc = 0.0;\n",
            loop,
            f"    acc += {gk};\n  }}\n  s1[lid.x] = acc;\n",
            sum_tree,
            "  let sg = s1[0];\n",
        ]
        val = f"{gk} - exp({ak}) * sg"
    else:
        shared += f"var<workgroup> s2: array<f32, {wg}>;\nvar<workgroup> s3: array<f32, {wg}>;\n"
        if op == "layer_norm":
            body += [
                "  var cnt = 0.0;\n  var mu = 0.0;\n  var m2 = 0.0;\n",
                loop,
                f"    let v = {ak};\n",
                _WELFORD_STEP,
                "  }\n  s1[lid.x] = cnt;\n  s2[lid.x] = mu;\n  s3[lid.x] = m2;\n",
                _tree(wg, _chan_merge("s1", "s2", "s3")),
                "  let mean = s2[0];\n  let r = inverseSqrt(s3[0] / f32(n) + eps);\n",
            ]
        else:
            body += [
                "  var acc = 0.0;\n",
                loop,
                f"    let v = {ak};\n    acc += v * v;\n  }}\n  s1[lid.x] = acc;\n",
                sum_tree,
                "  let mean = 0.0;\n  let r = inverseSqrt(s1[0] / f32(n) + eps);\n",
            ]
        # every invocation has read the statistics above before the next tree reuses s1, s2
        body += [
            "  workgroupBarrier();\n",
            "  var t1 = 0.0;\n  var t2 = 0.0;\n",
            loop,
            f"    let gh = {gk} * {wk};\n    t1 += gh;\n    t2 += gh * ({ak} - mean) * r;\n",
            "  }\n  s1[lid.x] = t1;\n  s2[lid.x] = t2;\n",
            _tree(
                wg, "      s1[lid.x] = s1[lid.x] + s1[j];\n      s2[lid.x] = s2[lid.x] + s2[j];\n"
            ),
            "  let q1 = select(0.0, s1[0] / f32(n), "
            + ("true" if op == "layer_norm" else "false")
            + ");\n  let q2 = s2[0] / f32(n);\n",
            "  if (lid.x == 0u) { stats[2u * row] = mean; stats[2u * row + 1u] = r; }\n",
        ]
        val = f"r * ({gk} * {wk} - q1 - ({ak} - mean) * r * q2)"
    if post is None:
        body += [loop, f"    out[ob + k] = {store(val, 'f32', out_type)};\n", "  }\n"]
    else:
        fused = post_expr(p_expr, "v", p_at + 1, n_extra, p_sct, "k")
        body += [
            "  let m = i32(row);\n",
            loop,
            f"    let v = {val};\n",
            f"    out[info[{p_at}] + ob + k] = {fused};\n  }}\n",
        ]
    entry = ENTRY.format(wg=wg)
    text = "".join(body)
    src = header(buffers) + helpers_for(text) + shared + entry + text + "}\n"
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


# The norms' weight and bias gradients, dw = Σ_rows g·x̂ and db = Σ_rows g per column: one kernel
# reading g and x once (the row gradient kernel left each row's mean and 1/std in `stats`). A
# workgroup takes NORM_COLS consecutive columns (one coalesced 128-byte read of a row for a
# warp's worth of invocations) and NORM_LANES invocations a column, lane l summing rows l, l+8,
# ... of its part of the rows; a part is a range of `chunk` rows (grid.y parts). With one part it
# writes dw and db; with several, each part writes its partial sums [part][2n] and
# norm_param_merge_kernel adds them.
NORM_COLS = 32
NORM_LANES = 8


@lru_cache(maxsize=32)
def norm_param_grad_kernel(x_type: str, g_type: str, partial: bool) -> KernelSource:
    """WGSL for the norms' dw and db over contiguous (rows, n) x and g with per-row (mean, 1/std)
    in `stats` (2r, 2r+1). Info words: [0] rows  [1] n  [2] x offset  [3] g offset  [4] rows a
    part. Bindings x, g, stats, then dw and db (`partial`: one `part` buffer, [part][2n])."""
    outs = [("part", "f32", "w")] if partial else [("dw", "f32", "w"), ("db", "f32", "w")]
    buffers = [("x", x_type, "r"), ("g", g_type, "r"), ("stats", "f32", "r"), *outs]
    xv = load("x[info[2] + r * n + c]", x_type, "f32")
    gv = load("g[info[3] + r * n + c]", g_type, "f32")
    cols, lanes = NORM_COLS, NORM_LANES
    if partial:
        write = (
            "    let base = i32(wid.y) * 2 * n;\n"
            "    part[base + c] = s2[lid.x];\n    part[base + n + c] = s1[lid.x];\n"
        )
    else:
        write = "    dw[c] = s2[lid.x];\n    db[c] = s1[lid.x];\n"
    text = (
        f"  let c = i32(wid.x * {cols}u + lid.x);\n"
        "  let n = info[1];\n"
        "  let lo = i32(wid.y) * info[4];\n"
        "  let hi = min(info[0], lo + info[4]);\n"
        "  var t1 = 0.0;\n  var t2 = 0.0;\n"
        "  if (c < n) {\n"
        f"    for (var r = lo + i32(lid.y); r < hi; r += {lanes}) {{\n"
        f"      let gv = {gv};\n"
        "      t1 += gv;\n"
        f"      t2 += gv * ({xv} - stats[2 * r]) * stats[2 * r + 1];\n"
        "    }\n  }\n"
        f"  let i = lid.y * {cols}u + lid.x;\n"
        "  s1[i] = t1;\n  s2[i] = t2;\n  workgroupBarrier();\n"
        f"  for (var j = {lanes // 2}u; j > 0u; j = j >> 1u) {{\n"
        "    if (lid.y < j) {\n"
        f"      s1[i] = s1[i] + s1[i + j * {cols}u];\n"
        f"      s2[i] = s2[i] + s2[i + j * {cols}u];\n"
        "    }\n    workgroupBarrier();\n  }\n"
        "  if (lid.y == 0u && c < n) {\n" + write + "  }\n"
    )
    shared = (
        f"var<workgroup> s1: array<f32, {cols * lanes}>;\n"
        f"var<workgroup> s2: array<f32, {cols * lanes}>;\n"
    )
    entry = ENTRY.format(wg=f"{cols}, {lanes}")
    src = header(buffers) + helpers_for(text) + shared + entry + text + "}\n"
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


@lru_cache(maxsize=4)
def norm_param_merge_kernel() -> KernelSource:
    """WGSL adding norm_param_grad_kernel's partial sums [part][2n] into dw and db.
    Info words: [0] n  [1] parts."""
    buffers = [("part", "f32", "r"), ("dw", "f32", "w"), ("db", "f32", "w")]
    text = (
        "  let k = i32(((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * 64u + lid.x);\n"
        "  let n = info[0];\n"
        "  if (k >= 2 * n) { return; }\n"
        "  var t = 0.0;\n"
        "  for (var p = 0; p < info[1]; p++) { t += part[p * 2 * n + k]; }\n"
        "  if (k < n) { dw[k] = t; } else { db[k - n] = t; }\n"
    )
    src = header(buffers) + ENTRY.format(wg=64) + text + "}\n"
    return trusted(KernelSource(src, "rww"))


def info_words_count(rank: int) -> int:
    return 6 + 3 * rank


# ---- fused cross entropy (class-index targets) -----------------------------------------------
# Info words of both phases (i32):
#   [0] rows N  [1] classes C  [2] x offset  [3] x class stride  [4] x row stride
#   [5] t offset  [6] t stride  [7] ignore_index  [8] label smoothing eps (f32 bits)
#   [9] w offset  [10] w stride
# backward only:
#   [11] g offset  [12] g row stride (0: one scalar for every row)  [13] denominator offset in
#   `den` (-1: none, 'sum'/'none')
XENT_INFO_WORDS = 14


@lru_cache(maxsize=64)
def xent_kernel(
    phase: str, wg: int, x_type: str, w_type: str | None, smooth: bool, g_type: str = "f32"
) -> KernelSource:
    """WGSL for cross_entropy over rows of x (N, C) with targets t (N,), one workgroup a row.

    phase "fwd" writes `out`, an f32 buffer of 3·N + 1 words: [0, N) the row's loss,
    [N, 2N) the target's weight w_t (the 'mean' denominator's terms), [2N, 3N) the row's
    log-sum-exp, and word 3N Σ_c w_c (written when `smooth`, eps > 0; read by a weighted
    backward, whose `smooth` says to read it). Per row:

        lse = M + log(S)    (online max / sum-exp pairs, the softmax kernel's NaN/inf handling)
        A = w_t·(lse - x_t),  B = Σ_c w_c·(lse - x_c),  loss = (1 - eps)·A + (eps / C)·B

    both 0 where t == ignore_index. B is accumulated as D = Σ w_c·(m - x_c) against the running
    max m (re-based by (m' - m)·Σw as m rises): every term is >= 0, so no cancellation between
    C·lse and Σ x_c, and B = D + log(S)·Σw.

    phase "bwd" reads the forward's `out` (`fo`: lse, Σw), the upstream gradient g and the
    'mean' denominator, and writes grad_x (N, C) contiguous in x's dtype:

        grad[n, c] = g_n·(p_c·((1 - eps)·w_t + (eps / C)·Σw) - (1 - eps)·w_t·[c == t]
                          - (eps / C)·w_c),   p_c = exp(x_c - lse),   0 for an ignored row

    one pass, no barrier. g_n is g[n] ('none'), g ('sum') or g / den ('mean'). As in torch, a
    zero denominator gives 0 where every row is ignored (ignored rows are written 0) and NaN
    where kept rows have weight 0."""
    if phase not in ("fwd", "bwd"):
        raise ValueError(f"pyrite: unknown cross entropy phase {phase!r}")
    ld = lambda e, t: load(e, t, "f32")
    buffers = [("x", x_type, "r"), ("t", "i32", "r")]
    if w_type:
        buffers.append(("w", w_type, "r"))
    if phase == "fwd":
        buffers.append(("out", "f32", "w"))
    else:
        buffers += [("fo", "f32", "r"), ("g", g_type, "r"), ("den", "f32", "r")]
        buffers.append(("gx", x_type, "w"))
    xk = ld("x[xb + k * sc]", x_type)
    wk = ld("w[info[9] + k * info[10]]", w_type) if w_type else "1.0"
    body = [
        "  let row = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n",
        "  if (row >= u32(info[0])) { return; }\n",  # uniform: the whole group leaves
        "  let N = info[0];\n  let n = info[1];\n  let r = i32(row);\n",
        "  let sc = info[3];\n  let xb = info[2] + r * info[4];\n",
        "  let tgt = t[info[5] + r * info[6]];\n",
        "  let ignored = tgt == info[7];\n",
        "  let tc = clamp(tgt, 0, n - 1);\n",  # ignored / unchecked targets read in range
        "  let eps = bitcast<f32>(info[8]);\n",
        f"  let wt = select({ld('w[info[9] + tc * info[10]]', w_type) if w_type else '1.0'}, "
        "0.0, ignored);\n",
    ]
    loop = f"  for (var k = i32(lid.x); k < n; k += {wg}) {{\n"
    if phase == "fwd":
        shared = f"var<workgroup> sm: array<f32, {wg}>;\nvar<workgroup> ss: array<f32, {wg}>;\n"
        if smooth:
            shared += (
                f"var<workgroup> sd: array<f32, {wg}>;\nvar<workgroup> sw: array<f32, {wg}>;\n"
            )
        body += ["  var m = -p_inf();\n  var s = 0.0;\n"]
        if smooth:
            body.append("  var d = 0.0;\n  var ws = 0.0;\n")
        body += [loop, f"    let v = {xk};\n"]
        if smooth:
            # re-base D on the new max before it moves (ws == 0: nothing to move; avoids
            # 0·inf when m is still -inf)
            body += [
                f"    let wc = {wk};\n",
                "    if (v > m && ws != 0.0) { d += (v - m) * ws; }\n",
            ]
        body.append(_ONLINE_STEP)
        if smooth:
            # a -inf element's term is w·inf even while m is still -inf (not -inf - -inf)
            body.append("    d += wc * select(m - v, p_inf(), v == -p_inf());\n    ws += wc;\n")
        body.append("  }\n  sm[lid.x] = m;\n  ss[lid.x] = s;\n")
        if smooth:
            body.append("  sd[lid.x] = d;\n  sw[lid.x] = ws;\n")
        combine = _ONLINE_MERGE
        if smooth:
            combine += (
                "      let w1 = sw[lid.x]; let w2 = sw[j];\n"
                "      let d1 = sd[lid.x] + select((mm - m1) * w1, 0.0, w1 == 0.0 || m1 == mm);\n"
                "      let d2 = sd[j] + select((mm - m2) * w2, 0.0, w2 == 0.0 || m2 == mm);\n"
                "      sd[lid.x] = d1 + d2; sw[lid.x] = w1 + w2;\n"
            )
        body.append(_reduce_tree(wg, combine))
        body += [
            "  let lse = sm[0] + log(ss[0]);\n",
            f"  let xt = {ld('x[xb + tc * sc]', x_type)};\n",
            # (log(S) - (xt - M), as torch's log_softmax: lse - xt rounded lse at M's ulp)
            "  var loss = (1.0 - eps) * wt * (log(ss[0]) - (xt - sm[0]));\n",
        ]
        if smooth:
            body.append(
                "  loss += (eps / f32(n)) * (sd[0] + log(ss[0]) * sw[0]);\n"
                "  if (row == 0u && lid.x == 0u) { out[3 * N] = sw[0]; }\n"
            )
        body.append(
            "  if (lid.x == 0u) {\n"
            "    out[r] = select(loss, 0.0, ignored);\n"
            "    out[N + r] = wt;\n"
            "    out[2 * N + r] = lse;\n"
            "  }\n"
        )
    else:
        shared = ""
        body += [
            "  let lse = fo[2 * N + r];\n",
            f"  var gn = {ld('g[info[11] + r * info[12]]', g_type)};\n",
            "  if (info[13] >= 0) { gn = gn / den[info[13]]; }\n",
            "  let a = (1.0 - eps) * wt;\n",
            "  let e = eps / f32(n);\n",
            f"  let tot = a + {'e * fo[3 * N]' if smooth else '0.0'};\n"
            if w_type
            else "  let tot = a + eps;\n",  # Σw = C without a weight: (eps / C)·C
            "  let ob = r * n;\n",
            loop,
            f"    let v = {xk};\n",
            f"    var gv = exp(v - lse) * tot - select(0.0, a, k == tc) - e * {wk};\n",
            "    gv = select(gn * gv, 0.0, ignored);\n",
            f"    gx[ob + k] = {store('gv', 'f32', x_type)};\n",
            "  }\n",
        ]
    entry = ENTRY.format(wg=wg)
    text = "".join(body)
    src = (
        header(buffers)
        + helpers_for(text, "p_isnan(x) p_nan() p_inf()")
        + shared
        + entry
        + text
        + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))
