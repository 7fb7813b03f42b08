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
    if per_thread == 1:
        body = [FLAT_INDEX.format(wg=WG), "  if (gi >= info[0]) { return; }\n"]
    else:
        # each invocation takes `per_thread` elements, WG apart, so neighbouring invocations
        # still touch neighbouring elements (coalesced on a GPU, SIMD lanes on lavapipe)
        body = [
            FLAT_INDEX.format(wg=WG).replace(
                f"let gi = i32(wg_flat * {WG}u + lid.x);",
                f"let g0 = i32(wg_flat * {WG * per_thread}u + lid.x);",
            ),
            f"  for (var k = 0; k < {per_thread}; k++) {{\n",
            f"  let gi = g0 + k * {WG};\n",
            "  if (gi >= info[0]) { return; }\n",
        ]
    if strided:
        body.append("  var r = gi;\n")
        for d in range(rank - 1, 0, -1):
            body.append(f"  let c{d} = r % info[{shape_at + d}]; r = r / info[{shape_at + d}];\n")
        body.append("  let c0 = r;\n")

    def index(pattern, off_word):
        nonlocal pos
        if pattern == "c":
            return f"info[{off_word}] + gi"
        if pattern == "0":
            return f"info[{off_word}]"
        terms = " + ".join(f"c{d} * info[{pos + d}]" for d in range(rank))
        pos += rank
        return f"info[{off_word}] + {terms}"

    out_index = index(o_pat, 1)
    for j, (st, ct, pat, _) in enumerate(ins):
        idx = index(pat, 2 + j)
        body.append(f"  let x{j} = {load(f'{names[j]}[{idx}]', st, ct)};\n")
    for j, ct in enumerate(scalars):
        word = f"info[{pos + j}]"
        value = {"f32": f"bitcast<f32>({word})", "i32": word, "bool": f"({word} != 0)"}[ct]
        body.append(f"  let s{j} = {value};\n")
    body.append(f"  out[{out_index}] = {store(expr, o_ctype, o_stype)};\n")
    if per_thread != 1:
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
