"""Sorting kernels: a bitonic network over each row, carrying the original indices.

Every value becomes an order-preserving u32 key, so one comparison serves every dtype:
  f32 (and f16 read as f32): NaN -> 0xffffffff (sorts last, as PyTorch), -0.0 -> +0.0 (they are
    equal to torch, so ties between them fall to the index), then negatives have all bits flipped
    and non-negatives the sign bit set;
  i32: bits ^ 0x80000000;  bool (u32 0/1): the value.
Descending sorts flip the key (NaN then comes first, as PyTorch's descending sort).
Pairs compare as (key, index), so no two are equal and the bitonic network's (unstable) result is
the stable sort's: equal values keep their original order, for `stable=True` or not.
Rows are padded to a power of two P with (0xffffffff, index >= n), which sort after every real
element, even a NaN (whose index is < n).

Kernels (rows are contiguous, length n, padded length P):
- `bitonic_local(stype, C, mode, desc)`: one workgroup sorts (or merges) a chunk of C <= 2048
  elements in workgroup memory (C * 8 bytes: 2048 is the 16 KiB default
  maxComputeWorkgroupStorageSize), with min(256, C/2) invocations and one barrier a stage.
  mode "row":   C == P: load the row from the input, sort, write values and indices (one dispatch).
  mode "first": C < P: load, sort with each chunk's direction taken from its place in the row
                (bitonic stages k <= C), write keys and indices to scratch.
  mode "merge": for one stage k > C, finish the passes j = C/2 .. 1 inside each chunk.
- `bitonic_global()`: one compare-exchange pass (k, j) with j >= C over scratch, one thread a pair.
- `sort_gather(stype)`: values[r, e] = x[r, idx[r, e]], indices out, from scratch.
- `median_pick(stype, nan_mode)`: per row of a sorted tensor, the element at the lower median,
  or the first NaN when the row has one ("median": NaN propagates) or the lower median of the
  non-NaN prefix ("nanmedian").
- `searchsorted_kernel(...)`: one binary search a value.
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for

LOCAL_MAX = 2048  # elements per workgroup chunk: 2048 * (4 key + 4 index) bytes = 16 KiB

_PAD = "0xffffffffu"


def _key_fn(stype: str, desc: bool) -> str:
    if stype in ("f32", "f16"):
        body = (
            "  let v = f32(x);\n"
            "  if (p_isnan(v)) { return KEY(0xffffffffu); }\n"
            "  var b = bitcast<u32>(v);\n"
            "  if (v == 0.0) { b = 0u; }\n"
            "  return KEY(select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u));\n"
        )
    elif stype == "i32":
        body = "  return KEY(bitcast<u32>(x) ^ 0x80000000u);\n"
    else:
        body = "  return KEY(x);\n"
    body = body.replace("KEY(", "(~" if desc else "(")
    return f"fn key_of(x: {stype}) -> u32 {{\n{body}}}\n"


def _threads(chunk: int) -> int:
    return max(1, min(WG, chunk // 2))


_CX = """fn cx(i: u32, l: u32, up: bool) {
  // order (sk[i], si[i]) and (sk[l], si[l]): ascending when `up`
  let ka = sk[i]; let kb = sk[l]; let ia = si[i]; let ib = si[l];
  let a_gt = (ka > kb) || (ka == kb && ia > ib);
  if (a_gt == up) { sk[i] = kb; sk[l] = ka; si[i] = ib; si[l] = ia; }
}
"""


@lru_cache(maxsize=256)
def bitonic_local(stype: str, chunk: int, mode: str, desc: bool) -> KernelSource:
    """Info words: [0] chunks in all, [1] n, [2] P, [3] x offset, [4] k (mode "merge")."""
    t = _threads(chunk)
    half = chunk // 2
    if mode == "row":
        bufs = [("x", stype, "r"), ("vals", stype, "w"), ("idx", "i32", "w")]
    elif mode == "first":
        bufs = [("x", stype, "r"), ("keys", "u32", "w"), ("tidx", "i32", "w")]
    else:
        bufs = [("keys", "u32", "w"), ("tidx", "i32", "w")]
    src = [
        header(bufs),
        f"const C: u32 = {chunk}u;\nconst T: u32 = {t}u;\n",
        f"var<workgroup> sk: array<u32, {chunk}>;\nvar<workgroup> si: array<i32, {chunk}>;\n",
    ]
    if mode != "merge":
        key = _key_fn(stype, desc)
        src.append(helpers_for(key) + key)
    src.append(_CX)
    src.append(ENTRY.format(wg=t))
    src.append(
        "  let g = (wid.z * nwg.y + wid.y) * nwg.x + wid.x;\n"
        "  if (g >= u32(info[0])) { return; }\n"
        "  let n = u32(info[1]);\n  let P = u32(info[2]);\n"
        "  let per_row = P / C;\n  let row = g / per_row;\n"
        "  let base = (g % per_row) * C;  // this chunk's first position in its row\n"
        "  let lt = lid.x;\n"
    )
    # load: position p = base + e of row `row`
    if mode == "merge":
        src.append(
            "  for (var e = lt; e < C; e += T) {\n"
            "    let s = row * P + base + e;\n"
            "    sk[e] = keys[s]; si[e] = tidx[s];\n  }\n"
        )
    else:
        src.append(
            "  let xo = u32(info[3]) + row * n;\n"
            "  for (var e = lt; e < C; e += T) {\n"
            "    let p = base + e;\n"
            f"    if (p < n) {{ sk[e] = key_of(x[xo + p]); }} else {{ sk[e] = {_PAD}; }}\n"
            "    si[e] = i32(p);\n  }\n"
        )
    src.append("  workgroupBarrier();\n")
    # pair t of a pass with stride j: i = (t with a zero bit inserted at j), l = i + j
    pair = (
        f"    for (var t = lt; t < {half}u; t += T) {{\n"
        "      let i = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));\n"
        "      cx(i, i | j, ((base + i) & k) == 0u);\n"
        "    }\n    workgroupBarrier();\n"
    )
    if mode == "merge":
        src.append(
            "  let k = u32(info[4]);\n"
            "  for (var j = C / 2u; j > 0u; j = j >> 1u) {\n" + pair + "  }\n"
        )
    else:
        src.append(
            "  for (var k = 2u; k <= C; k = k << 1u) {\n"
            "    for (var j = k >> 1u; j > 0u; j = j >> 1u) {\n" + pair + "    }\n  }\n"
        )
    if mode == "row":
        src.append(
            "  let oo = row * n;\n"
            "  for (var e = lt; e < n; e += T) {\n"
            "    let s = si[e];\n"
            "    vals[oo + e] = x[xo + u32(s)];\n    idx[oo + e] = s;\n  }\n"
        )
    else:
        src.append(
            "  for (var e = lt; e < C; e += T) {\n"
            "    let s = row * P + base + e;\n"
            "    keys[s] = sk[e]; tidx[s] = si[e];\n  }\n"
        )
    src.append("}\n")
    return KernelSource("".join(src), "".join(m for _, _, m in bufs))


@lru_cache(maxsize=4)
def bitonic_global() -> KernelSource:
    """One pass (k, j) over scratch. Info: [0] pairs in all, [1] P, [2] k, [3] j."""
    bufs = [("keys", "u32", "w"), ("tidx", "i32", "w")]
    src = (
        header(bufs)
        + ENTRY.format(wg=WG)
        + FLAT_INDEX.format(wg=WG)
        + "  if (gi >= info[0]) { return; }\n"
        "  let P = u32(info[1]); let k = u32(info[2]); let j = u32(info[3]);\n"
        "  let half = P / 2u;\n"
        "  let row = u32(gi) / half; let t = u32(gi) % half;\n"
        "  let i = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));\n"
        "  let up = (i & k) == 0u;\n"
        "  let a = row * P + i; let b = a + j;\n"
        "  let ka = keys[a]; let kb = keys[b]; let ia = tidx[a]; let ib = tidx[b];\n"
        "  let a_gt = (ka > kb) || (ka == kb && ia > ib);\n"
        "  if (a_gt == up) { keys[a] = kb; keys[b] = ka; tidx[a] = ib; tidx[b] = ia; }\n"
        "}\n"
    )
    return KernelSource(src, "ww")


@lru_cache(maxsize=16)
def sort_gather(stype: str) -> KernelSource:
    """Info: [0] rows*n, [1] n, [2] P, [3] x offset."""
    bufs = [("x", stype, "r"), ("tidx", "i32", "r"), ("vals", stype, "w"), ("idx", "i32", "w")]
    src = (
        header(bufs)
        + ENTRY.format(wg=WG)
        + FLAT_INDEX.format(wg=WG)
        + "  if (gi >= info[0]) { return; }\n"
        "  let n = info[1];\n  let row = gi / n; let e = gi % n;\n"
        "  let s = tidx[row * info[2] + e];\n"
        "  vals[gi] = x[info[3] + row * n + s];\n  idx[gi] = s;\n}\n"
    )
    return KernelSource(src, "rrww")


@lru_cache(maxsize=16)
def median_pick(stype: str, nan_mode: str) -> KernelSource:
    """Per row of sorted values/indices (contiguous, length n): the lower median.

    Info: [0] rows, [1] n. `nan_mode`: "none" (no NaN possible), "median" (a NaN in the row is
    the answer: the first one), "nanmedian" (median of the NaN-free prefix).
    """
    bufs = [("sv", stype, "r"), ("si", "i32", "r"), ("vals", stype, "w"), ("idx", "i32", "w")]
    body = (
        "  if (gi >= info[0]) { return; }\n"
        "  let n = info[1]; let b = gi * n;\n"
        "  var p = (n - 1) / 2;\n"
    )
    if nan_mode != "none":
        # NaNs sort last: find the first one by binary search
        body += (
            "  var lo = 0; var hi = n;\n"
            "  while (lo < hi) { let m = (lo + hi) / 2;\n"
            "    if (p_isnan(f32(sv[b + m]))) { hi = m; } else { lo = m + 1; } }\n"
        )
        if nan_mode == "median":
            body += "  if (lo < n) { p = lo; }\n"
        else:
            body += "  p = max(lo - 1, 0) / 2;\n  if (lo == 0) { p = 0; }\n"
    body += "  vals[gi] = sv[b + p];\n  idx[gi] = si[b + p];\n}\n"
    src = header(bufs) + helpers_for(body) + ENTRY.format(wg=WG) + FLAT_INDEX.format(wg=WG) + body
    return KernelSource(src, "rrww")


@lru_cache(maxsize=64)
def searchsorted_kernel(
    seq_type: str, x_type: str, ctype: str, right: bool, batched: bool
) -> KernelSource:
    """out[i] = first position p in the row where seq[p] > x (right) or >= x (left).

    Info: [0] numel of x, [1] L (row length of seq), [2] values per row of x, [3] seq offset,
    [4] x offset. Both operands contiguous.
    """
    bufs = [("seq", seq_type, "r"), ("xs", x_type, "r"), ("out", "i32", "w")]
    if ctype == "f32":
        # torch's test, NaN included: go right while !(v > x) (right) or !(v >= x) (left), so
        # a NaN x lands at the end and a NaN in seq counts as below every x (NaN-exact compares)
        go_right = "!p_flt(x, v)" if right else "!p_fle(x, v)"
    else:
        go_right = "v <= x" if right else "v < x"
    row = "gi / info[2]" if batched else "0"
    body = (
        "  if (gi >= info[0]) { return; }\n"
        f"  let x = {ctype}(xs[info[4] + gi]);\n"
        f"  let L = info[1]; let b = info[3] + ({row}) * L;\n"
        "  var lo = 0; var hi = L;\n"
        "  while (lo < hi) {\n    let m = (lo + hi) / 2;\n"
        f"    let v = {ctype}(seq[b + m]);\n"
        f"    if ({go_right}) {{ lo = m + 1; }} else {{ hi = m; }}\n  }}\n"
        "  out[gi] = lo;\n}\n"
    )
    src = header(bufs) + helpers_for(body) + ENTRY.format(wg=WG) + FLAT_INDEX.format(wg=WG) + body
    return KernelSource(src, "rrw")
