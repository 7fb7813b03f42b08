"""Pooling kernels over (N, C, D, H, W) inputs read through their strides (1-D and 2-D pools run
with D = H = 1 or D = 1): max (value and flat index d*H*W + h*W + w in the input plane), avg
(count_include_pad, divisor_override, ceil_mode windows), adaptive avg and max (window
[floor(o*I/O), ceil((o+1)*I/O)) per dim).

The loop budget (DESIGN.md): one invocation walks one *tile* of one output's window, nested loops
over (kd, kh, kw) inside the tile, so its loop count is at most td*th*tw + td*th + td for tile
sizes (td, th, tw); the op (ops/pool.py) picks the tile so that stays under the device's budget.
  stage "direct":  one tile covers the whole window; each invocation writes its output.
  stage "partial": unit u = t * n_out + o (tile-major, so neighbouring invocations read
                   neighbouring windows) folds tile t of output o's window into a state stored
                   planar in `part: array<i32>`: word u (value bits, or the sum) and word
                   units + u (argmax index, or the divisor).
  merge_kernel:    unit u = t' * n_out + o folds states t in [t'*G, min((t'+1)*G, P)) of output
                   o; "final" writes the outputs, "partial" writes states again (a window of more
                   tiles than one invocation may loop over merges in several rounds).
Max merges are exact and order-free: NaN wins over numbers and, among NaNs, the higher index
(PyTorch's CPU loop takes every NaN it meets, so the last one); among numbers the larger value,
ties to the lower index (its loop replaces only on `>`, so the first one).

Info words (i32), pool_kernel:
  [0] outputs  [1] tiles P  [2] C  [3] D  [4] H  [5] W  [6] OD  [7] OH  [8] OW  [9] KD  [10] KH
  [11] KW  [12..14] stride d,h,w  [15..17] padding  [18..20] dilation  [21] x offset
  [22..26] x strides n, c, d, h, w  [27..29] tile sizes d,h,w  [30] tiles along h  [31] along w
  [32] count_include_pad  [33] divisor_override (0: none)
merge_kernel: [0] outputs  [1] P in  [2] group G  [3] P out
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load, store, trusted

NONE_INDEX = 2147483647  # the argmax of an empty tile: loses every tie (ties go to lower indices)

# floor(a*b/c) and the remainder for 0 <= a <= c, 0 <= b < c, exact although a*b may pass i32:
# an f32 estimate, then the remainder a*b - q*c in wrapping u32 arithmetic (it is small), and
# corrections. Adaptive windows need o*I/O, which passes 2^31 for long inputs and outputs.
MULDIV = """fn pool_muldiv(a: i32, b: i32, c: i32) -> vec2<i32> {
  var q = i32(floor(f32(a) * f32(b) / f32(c)));
  var r = bitcast<i32>(u32(a) * u32(b) - u32(q) * u32(c));
  if (r < 0) { q = q - 1; r = r + c; }
  if (r < 0) { q = q - 1; r = r + c; }
  if (r >= c) { q = q + 1; r = r - c; }
  if (r >= c) { q = q + 1; r = r - c; }
  return vec2<i32>(q, r);
}
fn ad_start(o: i32, I: i32, O: i32) -> i32 {
  return o * (I / O) + pool_muldiv(o, I % O, O).x;
}
fn ad_end(o: i32, I: i32, O: i32) -> i32 {
  let m = pool_muldiv(o + 1, I % O, O);
  return (o + 1) * (I / O) + m.x + select(0, 1, m.y > 0);
}
"""

# (name, info index of: input size, output size, kernel, stride, padding, dilation, tile size)
_DIMS = (
    ("d", 3, 6, 9, 12, 15, 18, 27),
    ("h", 4, 7, 10, 13, 16, 19, 28),
    ("w", 5, 8, 11, 14, 17, 20, 29),
)


def _neg(ct: str) -> str:
    return "-p_inf()" if ct == "f32" else "i32(-2147483647 - 1)"


def _better(ct: str) -> str:
    """fn better(bv, bi, av, ai): is the state (bv at bi) preferred over (av at ai)?"""
    if ct == "f32":
        return (
            "fn better(bv: f32, bi: i32, av: f32, ai: i32) -> bool {\n"
            "  let nb = p_isnan(bv); let na = p_isnan(av);\n"
            "  if (nb || na) { return nb && (!na || bi > ai); }\n"
            "  return bv > av || (bv == av && bi < ai);\n}\n"
        )
    return (
        "fn better(bv: i32, bi: i32, av: i32, ai: i32) -> bool {\n"
        "  return bv > av || (bv == av && bi < ai);\n}\n"
    )


def _bits(expr: str, ct: str) -> str:
    return f"bitcast<i32>({expr})" if ct == "f32" else expr


def _unbits(expr: str, ct: str) -> str:
    return f"bitcast<f32>({expr})" if ct == "f32" else expr


def decode(var: str, names: tuple, osize: dict, C: str) -> list[str]:
    """WGSL splitting flat output index `var` into o{name} for the spatial dims `names` (the
    rest are 0) and the plane: n, c. Sequential divisions, one each: they cost a GPU more than
    the rest of a small pool or resampling kernel."""
    L = [f"  var r_ = {var};"]
    for name in reversed(names):
        L.append(f"  let o{name} = r_ % {osize[name]}; r_ = r_ / {osize[name]};")
    for name in ("d", "h", "w"):
        if name not in names:
            L.append(f"  let o{name} = 0;")
    L.append(f"  let n = r_ / {C}; let c = r_ - n * {C};")
    return L


@lru_cache(maxsize=256)
def pool_kernel(
    mode: str, stype: str, stage: str, with_idx: bool = True, rank: int = 3, unit_dil: bool = False
) -> KernelSource:
    """mode: "max", "avg", "adaptive_max", "adaptive_avg", "fractional_max" (window starts read
    from a `starts` table, W's then H's then D's a plane); stage: "direct" or "partial"; rank:
    the spatial dims that are not 1 (1: w, 2: h and w, 3: all; the others are size 1, their
    loops left out); unit_dil: every dilation is 1 (no divisions to clip a window)."""
    is_max = mode.endswith("max")
    adaptive = mode.startswith("adaptive")
    fractional = mode == "fractional_max"
    ct = "i32" if stype == "i32" else "f32"
    active = ("d", "h", "w")[3 - rank :]
    partial = stage == "partial"
    L = [
        FLAT_INDEX.format(wg=WG),
        "  let n_out = info[0];",
        f"  if (gi >= {'n_out * info[1]' if partial else 'n_out'}) {{ return; }}",
        "  let o = gi % n_out; let t = gi / n_out;" if partial else "  let o = gi; let t = 0;",
        *decode("o", active, {"d": "info[6]", "h": "info[7]", "w": "info[8]"}, "info[2]"),
        "  let base = info[21] + n * info[22] + c * info[23];",
    ]
    if partial:  # this tile's (td, th, tw) from t, tile-major over (d, h, w)
        L.append(
            "  let t_w = t % info[31]; let t_h = (t / info[31]) % info[30];"
            " let t_d = t / (info[31] * info[30]);"
        )
    L += ["  var empty = false;", "  var pool_size = 1; var count = 1;"]
    for name, size, osize, k, s, p, dil, tile_at in _DIMS:
        if name not in active:
            L.append(f"  let s_{name} = 0; let dl_{name} = 1; let lo_{name} = 0;")
            continue
        if fractional:
            # window starts from the per-plane table: starts[plane * Σ out sizes + offset + o]
            off = {"d": "info[7] + info[8]", "h": "info[8]", "w": "0"}[name]
            plane = " + ".join(f"info[{6 + 'dhw'.index(a)}]" for a in active)
            L += [
                f"  let s_{name} = starts[(n * info[2] + c) * ({plane}) + {off} + o{name}];",
                f"  let dl_{name} = 1; let lo_{name} = 0; let hi_{name} = info[{k}];",
            ]
        elif adaptive:
            L += [
                f"  let s_{name} = ad_start(o{name}, info[{size}], info[{osize}]);",
                f"  let e_{name} = ad_end(o{name}, info[{size}], info[{osize}]);",
                f"  let dl_{name} = 1;",
                f"  let lo_{name} = 0; let hi_{name} = e_{name} - s_{name};",
                f"  count = count * (e_{name} - s_{name});",
            ]
        elif unit_dil:
            L += [
                f"  let s_{name} = o{name} * info[{s}] - info[{p}];",
                f"  let dl_{name} = 1;",
                f"  let lo_{name} = max(-s_{name}, 0);",
                f"  let hi_{name} = min(info[{k}], max(info[{size}] - s_{name}, 0));",
            ]
        else:
            L += [
                f"  let s_{name} = o{name} * info[{s}] - info[{p}];",
                f"  let dl_{name} = info[{dil}];",
                f"  let lo_{name} = select(0, (dl_{name} - 1 - s_{name}) / dl_{name}, s_{name} < 0);",
                f"  let r_{name} = info[{size}] - s_{name};",
                f"  let hi_{name} = select(0, min(info[{k}], (r_{name} + dl_{name} - 1) / dl_{name}),"
                f" r_{name} > 0);",
            ]
        if not is_max and not adaptive:
            # PyTorch's avg_pool: the window clipped to the padded input is the pool size,
            # the window clipped to the input is the count (and empty means an output of 0)
            L += [
                f"  let pe_{name} = min(s_{name} + info[{k}], info[{size}] + info[{p}]);",
                f"  pool_size = pool_size * (pe_{name} - s_{name});",
                f"  count = count * max(min(pe_{name}, info[{size}]) - max(s_{name}, 0), 0);",
            ]
        L.append(f"  if (hi_{name} <= lo_{name}) {{ empty = true; }}")
        if partial:
            L += [
                f"  let a_{name} = max(lo_{name}, t_{name} * info[{tile_at}]);",
                f"  let b_{name} = min(hi_{name}, (t_{name} + 1) * info[{tile_at}]);",
            ]
        else:
            L.append(f"  let a_{name} = lo_{name}; let b_{name} = hi_{name};")
    if is_max:
        L += [f"  var best: {ct} = {_neg(ct)}; var arg = {NONE_INDEX};"]
        upd = (
            "if (arg == {none} || v > best || p_isnan(v)) {{ best = v; arg = idx; }}"
            if ct == "f32"
            else "if (arg == {none} || v > best) {{ best = v; arg = idx; }}"
        ).format(none=NONE_INDEX)
        inner = [
            f"{load('xin[row_w + zw * info[26]]', stype, ct).join(['let v = ', ';'])}",
            "let idx = (zd * info[4] + zh) * info[5] + zw;",
            upd,
        ]
    else:
        zero = "0.0" if ct == "f32" else "0"
        L += [f"  var acc: {ct} = {zero};"]
        inner = [f"acc = acc + {load('xin[row_w + zw * info[26]]', stype, ct)};"]
    # the loop nest over the active dims, outermost first; an inactive dim's coordinate is 0
    strides = {"d": "info[24]", "h": "info[25]"}
    body = []
    depth = 1
    row = "base"
    for name in ("d", "h"):
        ind = "  " * depth
        if name in active:
            body += [
                f"{ind}for (var k{name} = a_{name}; k{name} < b_{name}; k{name} = k{name} + 1) {{",
                f"{ind}  let z{name} = s_{name} + k{name} * dl_{name};",
                f"{ind}  let row_{name} = {row} + z{name} * {strides[name]};",
            ]
            depth += 1
        else:
            body.append(f"{ind}let z{name} = 0; let row_{name} = {row};")
        row = f"row_{name}"
    ind = "  " * depth
    body += [
        f"{ind}let row_w = row_h;",
        f"{ind}for (var kw = a_w; kw < b_w; kw = kw + 1) {{",
        f"{ind}  let zw = s_w + kw * dl_w;",
        *(f"{ind}  {line}" for line in inner),
        f"{ind}}}",
    ]
    for d in range(depth - 1, 0, -1):
        body.append("  " * d + "}")
    L += body
    if is_max:
        # PyTorch starts from the window's first position inside the input on the low side
        # (its index even where the window holds no element), value -inf
        L += [
            "  let first = ((s_d + lo_d * dl_d) * info[4] + s_h + lo_h * dl_h) * info[5]"
            " + s_w + lo_w * dl_w;",
            f"  if (arg == {NONE_INDEX} && t == 0) {{ arg = first; }}",
        ]
    else:
        if adaptive:
            L.append("  var div = count;")
        else:
            L += [
                "  var div = select(count, pool_size, info[32] != 0);",
                "  if (info[33] != 0) { div = info[33]; }",
            ]
        L.append("  if (empty) { div = 0; }")
    if partial:
        L += _state_store("part", "n_out * info[1]", is_max, ct)
        bufs = [("xin", stype, "r"), ("part", "i32", "w")]
        if fractional:
            bufs.insert(1, ("starts", "i32", "r"))
    else:
        bufs = [("xin", stype, "r"), ("out", stype, "w")]
        if fractional:
            bufs.insert(1, ("starts", "i32", "r"))
        L += _final(is_max, with_idx, ct, stype, bufs)
    body = "\n".join(L) + "\n}\n"
    fns = MULDIV if adaptive else ""
    src = header(bufs) + helpers_for(body) + fns + ENTRY.format(wg=WG) + body
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


def _state_store(buf: str, units: str, is_max: bool, ct: str) -> list[str]:
    """A partial state into `buf` of `units` states: its value's bits, then (at units + gi) its
    index (max) or divisor (avg)."""
    first, second = ("best", "arg") if is_max else ("acc", "div")
    return [f"  {buf}[gi] = {_bits(first, ct)};", f"  {buf}[{units} + gi] = {second};"]


def _final(is_max: bool, with_idx: bool, ct: str, stype: str, bufs: list) -> list[str]:
    """The stores of an output's finished state (max: best and its index, avg: acc / div), by
    the direct pool and the last merge; appends the idx binding to `bufs` where it is used."""
    if is_max:
        if not with_idx:
            return [f"  out[gi] = {store('best', ct, stype)};"]
        bufs.append(("idx", "i32", "w"))
        return [f"  out[gi] = {store('best', ct, stype)};", "  idx[gi] = arg;"]
    if ct == "f32":
        val = "select(acc / f32(div), 0.0, div == 0)"
    else:
        val = "select(acc / max(div, 1), 0, div == 0)"  # C's truncating division, as PyTorch
    return [f"  out[gi] = {store(val, ct, stype)};"]


@lru_cache(maxsize=64)
def merge_kernel(mode: str, stype: str, final: bool, with_idx: bool = True) -> KernelSource:
    """Fold groups of G partial states per output (see the module docstring)."""
    is_max = mode.endswith("max")
    ct = "i32" if stype == "i32" else "f32"
    L = [
        FLAT_INDEX.format(wg=WG),
        "  let n_out = info[0]; let P = info[1]; let G = info[2];",
        "  if (gi >= n_out * info[3]) { return; }",
        "  let o = gi % n_out; let t = gi / n_out;",
        "  let t1 = min(P, (t + 1) * G);",
        "  let units_in = n_out * P;",
    ]
    if is_max:
        L += [
            f"  var best: {ct} = {_neg(ct)}; var arg = {NONE_INDEX};",
            "  for (var k = t * G; k < t1; k = k + 1) {",
            f"    let v = {_unbits('part[k * n_out + o]', ct)}; let i = part[units_in + k * n_out + o];",
            "    if (better(v, i, best, arg)) { best = v; arg = i; }",
            "  }",
        ]
    else:
        zero = "0.0" if ct == "f32" else "0"
        L += [
            f"  var acc: {ct} = {zero};",
            "  let div = part[units_in + o];",
            "  for (var k = t * G; k < t1; k = k + 1) {",
            f"    acc = acc + {_unbits('part[k * n_out + o]', ct)};",
            "  }",
        ]
    if not final:
        L += _state_store("pout", "n_out * info[3]", is_max, ct)
        bufs = [("part", "i32", "r"), ("pout", "i32", "w")]
    else:
        bufs = [("part", "i32", "r"), ("out", stype, "w")]
        L += _final(is_max, with_idx, ct, stype, bufs)
    body = "\n".join(L) + "\n}\n"
    fns = _better(ct) if is_max else ""
    src = header(bufs) + helpers_for(body + fns) + fns + ENTRY.format(wg=WG) + body
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))
