"""The general strided map: out[i] = f(in0[...], in1[...], ..., scalars) for every element.

One generator serves every elementwise op, cast, copy and broadcast. Its rank and each operand's
access pattern are baked into the text; sizes, strides, offsets and scalars come from the info
words, so one pipeline serves every shape of a given rank (eager ops see many shapes; a new
pipeline costs 5–7 ms on the H200, ../shared/gpu.md).

Operand access patterns:
  "c"  contiguous in the output's order:   x = in[off + i]
  "s"  strided, rank R:                    x = in[off + sum_d coord_d * stride_d]
  "0"  one element for all (all strides 0): x = in[off]

Info words (i32):
  [0] numel  [1] out offset  [2 .. 2+k) input offsets
  then shape[R] (when any operand is strided), then out strides[R] (output "s"),
  then strides[R] for each strided input, then the scalars (floats as their bits).
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    ENTRY,
    FLAT_INDEX,
    STORAGE_ELEM,
    WG,
    KernelSource,
    header,
    helpers_for,
    load,
    load_packed,
    packed_bits,
    store,
    trusted,
)


def _first_index(per_thread: int) -> str:
    """FLAT_INDEX with `g0`, this invocation's first unit when each takes `per_thread` units
    WG apart."""
    return FLAT_INDEX.format(wg=WG).replace(
        f"let gi = i32(wg_flat * {WG}u + lid.x);",
        f"let g0 = i32(wg_flat * {WG * per_thread}u + lid.x);",
    )


@lru_cache(maxsize=4096)
def map_kernel(
    expr: str,
    ins: tuple,
    out: tuple,
    rank: int,
    scalars: tuple = (),
    per_thread: int = 1,
    vec: int = 1,
) -> KernelSource:
    """`ins`: ((storage token, ctype, pattern, aliased), ...); `out`: (token, ctype, pattern).

    Tokens are dtypes.dtype.storage (kernels/common.py): f32 f16 i32 u32 (bool), u8 i8 i16
    (i32 words, wrapped on store), bf16 (packed two a u32 word).

    `expr` is WGSL in x0.., s0.. (inputs and scalars as their compute types) giving the output's
    compute type. An aliased input reads the output buffer itself (an in-place op: WebGPU forbids
    binding one buffer both read-only and read-write in one dispatch).

    A bf16 output is written one way or the other:
      pattern "c" (contiguous): each invocation owns whole u32 words of the output — it computes
        both elements of a word (the half outside the view, at either end, keeps its old bits) —
        so no two invocations write one word; the grid counts words (n/2 + 1), not elements.
      otherwise (a strided view): two invocations may own the halves of one word, so each
        clears and sets its own half with atomicAnd / atomicOr on `array<atomic<u32>>`.

    `vec` 4 (`vec4_map_kernel`): 16-byte loads and stores, four elements a step.
    """
    if vec == 4:
        return vec4_map_kernel(expr, ins, out, scalars, per_thread)
    k = len(ins)
    o_tok, o_ctype, o_pat = out
    packed_out = o_tok == "bf16"
    word_owner = packed_out and o_pat == "c"
    atomic_out = packed_out and not word_owner
    strided = o_pat == "s" or any(p == "s" for _, _, p, _ in ins)
    buffers = []
    names = []
    for j, (tok, _, _, aliased) in enumerate(ins):
        if aliased:
            names.append("out")
        else:
            names.append(f"in{j}")
            buffers.append((f"in{j}", STORAGE_ELEM[tok], "r"))
    buffers.append(("out", "atomic<u32>" if atomic_out else STORAGE_ELEM[o_tok], "w"))
    modes = "".join(m for _, _, m in buffers)

    pos = 2 + k
    shape_at = pos
    if strided:
        pos += rank
    # per-dispatch words, read once an invocation: count, offsets, scalars
    head = ["  let n = info[0];\n", "  let o_off = info[1];\n"]
    head += [f"  let off{j} = info[{2 + j}];\n" for j in range(k)]

    def index(pattern, off_name):
        nonlocal pos
        if pattern == "c":
            return f"{off_name} + gi"
        if pattern == "0":
            return off_name
        terms = " + ".join(f"c{d} * info[{pos + d}]" for d in range(rank))
        pos += rank
        return f"{off_name} + {terms}"

    elem = []  # lines computing this element's inputs, given `gi`
    if strided:
        elem.append("var r = gi;\n")
        for d in range(rank - 1, 0, -1):
            elem.append(f"let c{d} = r % info[{shape_at + d}]; r = r / info[{shape_at + d}];\n")
        elem.append("let c0 = r;\n")
    out_index = index(o_pat, "o_off")
    for j, (tok, ct, pat, al) in enumerate(ins):
        idx = index(pat, f"off{j}")
        if tok == "bf16":
            elem.append(f"let p{j} = {idx};\n")
            word = f"{names[j]}[p{j} >> 1u]"
            if al and atomic_out:
                word = f"atomicLoad(&out[p{j} >> 1u])"
            elem.append(f"let x{j} = {load_packed(word, f'p{j}', ct)};\n")
        else:
            elem.append(f"let x{j} = {load(f'{names[j]}[{idx}]', tok, ct)};\n")
    for j, ct in enumerate(scalars):
        word = f"info[{pos + j}]"
        value = {"f32": f"bitcast<f32>({word})", "i32": word, "bool": f"({word} != 0)"}[ct]
        head.append(f"  let s{j} = {value};\n")
    if atomic_out:
        elem += [
            f"let oi = {out_index};\n",
            "let sh = u32(oi & 1) * 16u;\n",
            f"let bits = {packed_bits(expr, o_ctype)} << sh;\n",
            "atomicAnd(&out[oi >> 1u], ~(0xffffu << sh));\n",
            "atomicOr(&out[oi >> 1u], bits);\n",
        ]
    elif not word_owner:
        elem.append(f"out[{out_index}] = {store(expr, o_ctype, o_tok, exact=True)};\n")

    def block(gi, indent, tail=()):
        pad = " " * indent
        lines = [*elem, *tail]
        return (
            f"{pad}{{\n{pad}  let gi = {gi};\n"
            + "".join(pad + "  " + e for e in lines)
            + f"{pad}}}\n"
        )

    flat = _first_index(per_thread)
    body = [flat, *head]
    if word_owner:
        # word w of the view's words: elements e and e + 1 (flat indices; e = -1 when the view
        # starts in a word's high half), o_off the view's element offset in the storage
        bits = packed_bits(expr, o_ctype)
        body += [
            "  let w0 = o_off >> 1u;\n",
            "  let nw = ((o_off + n - 1) >> 1u) - w0 + 1;\n",
            f"  for (var k = 0; k < {per_thread}; k++) {{\n",
            f"    let w = g0 + k * {WG};\n",
            "    if (w >= nw) { return; }\n",
            "    let e = 2 * (w0 + w) - o_off;\n",
            "    var lo = 0u; var hi = 0u; var keep = 0u;\n",
            "    if (e >= 0) {\n",
            block("e", 6, (f"lo = {bits};\n",)),
            "    } else { keep = 0xffffu; }\n",
            "    if (e + 1 < n) {\n",
            block("e + 1", 6, (f"hi = {bits};\n",)),
            "    } else { keep = keep | 0xffff0000u; }\n",
            "    var word = lo | (hi << 16u);\n",
            "    if (keep != 0u) { word = word | (out[w0 + w] & keep); }\n",
            "    out[w0 + w] = word;\n",
            "  }\n",
        ]
    elif per_thread == 1:
        body += ["  if (g0 >= n) { return; }\n", block("g0", 2)]
    else:
        # each invocation takes `per_thread` elements, WG apart, so neighbouring invocations
        # still touch neighbouring elements (coalesced on a GPU, SIMD lanes on lavapipe). One
        # loop with a bounds check: a second, check-free copy for full blocks tripled
        # lavapipe's pipeline build time (test suite 31 s -> 94 s) for no clear gain there.
        body.append(f"  for (var k = 0; k < {per_thread}; k++) {{\n")
        body.append(f"    if (g0 + k * {WG} >= n) {{ return; }}\n")
        body.append(block(f"g0 + k * {WG}", 4))
        body.append("  }\n")
    text = "".join(body)
    src = header(buffers) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return trusted(KernelSource(src, modes))


def vec4_fits(ins: tuple, out: tuple) -> bool:
    """Whether `vec4_map_kernel` serves these operand patterns (map_kernel's `ins`, `out`):
    a contiguous output and contiguous or single-element inputs, none bf16, no single-element
    read of the output itself. The caller checks n and every offset are multiples of 4."""
    if out[0] == "bf16" or out[2] != "c":
        return False
    return all(tok != "bf16" and (pat == "c" or (pat == "0" and not al)) for tok, _, pat, al in ins)


@lru_cache(maxsize=1024)
def vec4_map_kernel(expr: str, ins: tuple, out: tuple, scalars: tuple, per_thread: int):
    """map_kernel for `vec4_fits` operands with n and every offset multiples of 4: contiguous
    operands as arrays of vec4 (one 16-byte load an operand a step, which a scalar map's four
    loads do not match on a GPU: elementwise copy 2,343 GB/s against a vec4 copy's 3,900 on the
    H200, 2026-12-03), the expression evaluated lane by lane (`gi` each lane's flat index).
    Info words as map_kernel's (numel, offsets, scalars)."""
    k = len(ins)
    o_tok, o_ctype, _ = out
    o_elem = STORAGE_ELEM[o_tok]
    buffers, names = [], []
    for j, (tok, _, pat, al) in enumerate(ins):
        if al:
            names.append("out")
        else:
            names.append(f"in{j}")
            elem = STORAGE_ELEM[tok]
            buffers.append((f"in{j}", f"vec4<{elem}>" if pat == "c" else elem, "r"))
    buffers.append(("out", f"vec4<{o_elem}>", "w"))
    head = ["  let n4 = info[0] >> 2u;\n", "  let o4 = info[1] >> 2u;\n"]
    for j, (_, _, pat, _) in enumerate(ins):
        head.append(f"  let off{j} = info[{2 + j}]{' >> 2u' if pat == 'c' else ''};\n")
    for j, ct in enumerate(scalars):
        word = f"info[{2 + k + j}]"
        value = {"f32": f"bitcast<f32>({word})", "i32": word, "bool": f"({word} != 0)"}[ct]
        head.append(f"  let s{j} = {value};\n")
    step = []
    for j, (tok, ct, pat, _) in enumerate(ins):
        if pat == "c":
            step.append(f"let v{j} = {names[j]}[off{j} + v];\n")
        else:
            step.append(f"let x{j} = {load(f'{names[j]}[off{j}]', tok, ct)};\n")
    step.append(f"var r: vec4<{o_elem}>;\n")
    for q in range(4):
        lane = [f"let gi = 4 * v + {q}; "]
        for j, (tok, ct, pat, _) in enumerate(ins):
            if pat == "c":
                lane.append(f"let x{j} = {load(f'v{j}[{q}]', tok, ct)}; ")
        lane.append(f"r[{q}] = {store(expr, o_ctype, o_tok, exact=True)}; ")
        step.append("{ " + "".join(lane) + "}\n")
    step.append("out[o4 + v] = r;\n")
    flat = _first_index(per_thread)
    body = [flat, *head, f"  for (var k = 0; k < {per_thread}; k++) {{\n"]
    body.append(f"    let v = g0 + k * {WG};\n")
    body.append("    if (v >= n4) { return; }\n")
    body += ["    " + line for line in step]
    body.append("  }\n")
    text = "".join(body)
    f16 = o_tok == "f16" or any(tok == "f16" for tok, *_ in ins)
    src = header(buffers, f16=f16) + helpers_for(text) + ENTRY.format(wg=WG) + text + "}\n"
    return trusted(KernelSource(src, "".join(m for _, _, m in buffers)))


def map_words(n: int, out_token: str, out_pattern: str) -> int:
    """How many units a map dispatch's grid must cover: elements, or for a contiguous bf16
    output the u32 words it owns (at most n/2 + 1, whatever the view's offset)."""
    if out_token == "bf16" and out_pattern == "c":
        return n // 2 + 1
    return n


def info_size(n_inputs: int, rank: int, n_strided: int, n_scalars: int, strided: bool) -> int:
    return 2 + n_inputs + (rank if strided else 0) + rank * n_strided + n_scalars


@lru_cache(maxsize=4)
def vec4_copy_kernel(per_thread: int = 4) -> KernelSource:
    """dst[i] = src[i] over vec4<f32>, `per_thread` vec4s an invocation, WG apart: the simplest
    kernel that moves memory, used by `pyrite bench` as the device's practical copy ceiling.
    info: [0] number of vec4s."""
    body = (
        _first_index(per_thread)
        + f"  for (var k = 0; k < {per_thread}; k++) {{\n"
        + f"    let i = g0 + k * {WG};\n"
        + "    if (i < info[0]) { dst[i] = src[i]; }\n  }\n"
    )
    src = (
        header([("src", "vec4<f32>", "r"), ("dst", "vec4<f32>", "w")])
        + ENTRY.format(wg=WG)
        + body
        + "}\n"
    )
    return trusted(KernelSource(src, "rw"))
