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

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load, store


@lru_cache(maxsize=4096)
def map_kernel(
    expr: str, ins: tuple, out: tuple, rank: int, scalars: tuple = (), per_thread: int = 1
) -> KernelSource:
    """`ins`: ((stype, ctype, pattern, aliased), ...); `out`: (stype, ctype, pattern).

    `expr` is WGSL in x0.., s0.. (inputs and scalars as their compute types) giving the output's
    compute type. An aliased input reads the output buffer itself (an in-place op: WebGPU forbids
    binding one buffer both read-only and read-write in one dispatch).
    """
    k = len(ins)
    o_stype, o_ctype, o_pat = out
    strided = o_pat == "s" or any(p == "s" for _, _, p, _ in ins)
    buffers = []
    names = []
    for j, (st, _, _, aliased) in enumerate(ins):
        if aliased:
            names.append("out")
        else:
            names.append(f"in{j}")
            buffers.append((f"in{j}", st, "r"))
    buffers.append(("out", o_stype, "w"))
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

    elem = []
    if strided:
        elem.append("var r = gi;\n")
        for d in range(rank - 1, 0, -1):
            elem.append(f"let c{d} = r % info[{shape_at + d}]; r = r / info[{shape_at + d}];\n")
        elem.append("let c0 = r;\n")
    out_index = index(o_pat, "o_off")
    for j, (st, ct, pat, _) in enumerate(ins):
        idx = index(pat, f"off{j}")
        elem.append(f"let x{j} = {load(f'{names[j]}[{idx}]', st, ct)};\n")
    for j, ct in enumerate(scalars):
        word = f"info[{pos + j}]"
        value = {"f32": f"bitcast<f32>({word})", "i32": word, "bool": f"({word} != 0)"}[ct]
        head.append(f"  let s{j} = {value};\n")
    elem.append(f"out[{out_index}] = {store(expr, o_ctype, o_stype)};\n")

    def block(gi, indent):
        pad = " " * indent
        return (
            f"{pad}{{\n{pad}  let gi = {gi};\n"
            + "".join(pad + "  " + e for e in elem)
            + f"{pad}}}\n"
        )

    flat = FLAT_INDEX.format(wg=WG).replace(
        f"let gi = i32(wg_flat * {WG}u + lid.x);",
        f"let g0 = i32(wg_flat * {WG * per_thread}u + lid.x);",
    )
    body = [flat, *head]
    if per_thread == 1:
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
    src = header(buffers) + helpers_for(expr) + ENTRY.format(wg=WG) + "".join(body) + "}\n"
    return KernelSource(src, modes)


def info_size(n_inputs: int, rank: int, n_strided: int, n_scalars: int, strided: bool) -> int:
    return 2 + n_inputs + (rank if strided else 0) + rank * n_strided + n_scalars


@lru_cache(maxsize=4)
def vec4_copy_kernel(per_thread: int = 4) -> KernelSource:
    """dst[i] = src[i] over vec4<f32>, `per_thread` vec4s an invocation, WG apart: the simplest
    kernel that moves memory, used by `pyrite bench` as the device's practical copy ceiling.
    info: [0] number of vec4s."""
    body = (
        FLAT_INDEX.format(wg=WG).replace(
            f"let gi = i32(wg_flat * {WG}u + lid.x);",
            f"let g0 = i32(wg_flat * {WG * per_thread}u + lid.x);",
        )
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
    return KernelSource(src, "rw")
