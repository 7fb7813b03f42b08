"""WGSL generators for advanced indexing: gather, scatter (plain or reducing), index range checks
and nonzero.

Every indexing op is planned (pyrite/ops/indexing.py) as one "index walk" over an iteration
shape of rank R (the indexed result's shape), with K index tensors, K <= 5 (WebGPU's default of
8 storage buffers per stage, minus source, destination/value and one spare):

    c = unravel(gi, shape)                                   # the walk's coordinate
    at = base + sum_d c_d * bstride_d                        # basic dims (slices, None: 0)
    for each index tensor k:
        i = idx_k[ioff_k + sum_d c_d * istride_k_d]          # broadcast to the walk: 0-strides
        i = select(i, i + size_k, i < 0)                     # negative indices wrap
        at += i * xstride_k                                  # the dim it indexes
    gather:  out[gi] = x[at]
    scatter: x[at] (op)= value[voff + sum_d c_d * vstride_d]

Rank and K are baked into the text; sizes, strides and offsets are info words, so one pipeline
serves every shape of a rank (eager ops see many shapes). Info layout:
  [0] n  [1] base  [2, 2+R) shape  [2+R, 2+2R) bstrides
  then per index tensor: ioff, size, xstride, istrides[R]
  (scatter) then voff, vstrides[R]

Indices are range-checked before these run (`minmax_kernel`), so the walk itself trusts them.

Float reductions into the destination (scatter_add, index_put_(accumulate=True), index_add,
scatter_reduce) need float atomics, which core WGSL lacks: the destination is bound as
`array<atomic<u32>>` and each update is a compare-and-swap loop over the f32 bit pattern. That is
order-nondeterministic in the last bits for sums (as PyTorch's CUDA scatter_add is), and works on
Dawn and wgpu-native alike. i32 sums/max/min use the native atomics.
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    ENTRY,
    FLAT_INDEX,
    WG,
    KernelSource,
    _nonzero_f32,
    header,
    helpers_for,
    load,
    store,
)

MAX_INDEX_TENSORS = 5
NONZERO_PER_THREAD = 4  # elements per invocation in the nonzero kernels: 1,024 per workgroup
NONZERO_CHUNK = WG * NONZERO_PER_THREAD


def info_words(rank: int, k: int, scatter: bool) -> int:
    return 2 + 2 * rank + k * (3 + rank) + ((1 + rank) if scatter else 0)


def _unravel(rank: int, shape_at: int) -> str:
    lines = ["  var r = gi;\n"]
    for d in range(rank - 1, 0, -1):
        lines.append(f"  let c{d} = r % info[{shape_at + d}]; r = r / info[{shape_at + d}];\n")
    if rank:
        lines.append("  let c0 = r;\n")
    return "".join(lines)


def _dot(rank: int, at: int) -> str:
    return "".join(f" + c{d} * info[{at + d}]" for d in range(rank))


def _walk(rank: int, k: int) -> str:
    """WGSL computing `at`, the element of x this coordinate addresses (see module docstring)."""
    body = [_unravel(rank, 2), f"  var at = info[1]{_dot(rank, 2 + rank)};\n"]
    pos = 2 + 2 * rank
    for j in range(k):
        body.append(
            f"  var i{j} = idx{j}[info[{pos}]{_dot(rank, pos + 3)}];\n"
            f"  i{j} = select(i{j}, i{j} + info[{pos + 1}], i{j} < 0);\n"
            f"  at = at + i{j} * info[{pos + 2}];\n"
        )
        pos += 3 + rank
    return "".join(body)


@lru_cache(maxsize=512)
def gather_kernel(rank: int, k: int, stype: str) -> KernelSource:
    """out[gi] = x[at]: raw storage values copied, any dtype (f16 included)."""
    bufs = [(f"idx{j}", "i32", "r") for j in range(k)] + [("x", stype, "r"), ("out", stype, "w")]
    body = (
        FLAT_INDEX.format(wg=WG)
        + "  if (gi >= info[0]) { return; }\n"
        + _walk(rank, k)
        + "  out[gi] = x[at];\n"
    )
    return KernelSource(header(bufs) + ENTRY.format(wg=WG) + body + "}\n", "r" * (k + 1) + "w")


# Inputs one cat dispatch reads at most: WebGPU's default of 8 storage buffers per stage, minus
# the output and the info words (a device allowing more gets the same pipelines).
CAT_INPUTS = 6


def cat_info_words(rank: int, k: int) -> int:
    return 2 + 2 * rank + k * (2 + rank)


@lru_cache(maxsize=256)
def cat_kernel(rank: int, dim: int, k: int, stype: str) -> KernelSource:
    """One dispatch of `cat`: k inputs (the same storage type, raw values copied) into a region
    of `out` of rank R, the inputs side by side along `dim`. Info layout:
      [0] n  [1] out base  [2, 2+R) region shape  [2+R, 2+2R) out strides
      then per input: offset, its first coordinate along dim, strides[R]
    Each invocation unravels its coordinate in the region and reads the input whose range
    along `dim` holds it."""
    bufs = [(f"in{j}", stype, "r") for j in range(k)] + [("out", stype, "w")]
    body = [
        FLAT_INDEX.format(wg=WG),
        "  if (gi >= info[0]) { return; }\n",
        _unravel(rank, 2),
        f"  let o = info[1]{_dot(rank, 2 + rank)};\n",
    ]
    pos = [2 + 2 * rank + j * (2 + rank) for j in range(k)]

    def read(j):
        at = pos[j]
        terms = "".join(
            f" + (c{d} - info[{at + 1}]) * info[{at + 2 + d}]"
            if d == dim
            else f" + c{d} * info[{at + 2 + d}]"
            for d in range(rank)
        )
        return f"out[o] = in{j}[info[{at}]{terms}];"

    for j in range(k - 1):
        lead = "  if" if j == 0 else " else if"
        body.append(f"{lead} (c{dim} < info[{pos[j + 1] + 1}]) {{ {read(j)} }}")
    body.append(f" else {{ {read(k - 1)} }}\n" if k > 1 else f"  {read(0)}\n")
    text = "".join(body)
    return KernelSource(header(bufs) + ENTRY.format(wg=WG) + text + "}\n", "r" * k + "w")


# combine(old, v) for reductions done by a compare-and-swap loop, by compute type
_CAS_COMBINE = {
    ("f32", "sum"): "old + v",
    ("f32", "prod"): "old * v",
    ("f32", "amax"): "p_maxf(old, v)",
    ("f32", "amin"): "p_minf(old, v)",
    ("i32", "prod"): "old * v",
}
_NATIVE = {
    ("i32", "sum"): "atomicAdd",
    ("i32", "amax"): "atomicMax",
    ("i32", "amin"): "atomicMin",
    ("u32", "sum"): "atomicOr",
    ("u32", "amax"): "atomicOr",
    ("u32", "prod"): "atomicAnd",
    ("u32", "amin"): "atomicAnd",
}


@lru_cache(maxsize=512)
def scatter_kernel(
    rank: int, k: int, x_stype: str, v_stype: str, reduce: str | None
) -> KernelSource:
    """x[at] = value (reduce None: last writer wins, unspecified which) or x[at] op= value.

    The value is read through its own strides (0 where broadcast) and converted to x's type.
    `reduce` in sum/prod/amax/amin needs x_stype f32, i32 or u32 (bool: or/and).
    """
    ctype = {"f32": "f32", "f16": "f32", "i32": "i32", "u32": "bool"}[x_stype]
    vpos = 2 + 2 * rank + k * (3 + rank)
    bufs = [(f"idx{j}", "i32", "r") for j in range(k)] + [("val", v_stype, "r")]
    head = header(bufs + [("x", x_stype, "w")])
    read_v = load(f"val[info[{vpos}]{_dot(rank, vpos + 1)}]", v_stype, ctype)
    body = [
        FLAT_INDEX.format(wg=WG),
        "  if (gi >= info[0]) { return; }\n",
        _walk(rank, k),
        f"  let v = {read_v};\n",
    ]
    combine = ""
    if reduce is None:
        body.append(f"  x[at] = {store('v', ctype, x_stype)};\n")
    else:
        if x_stype == "f16":
            raise ValueError("scatter_kernel: reduce into f16 is done in f32 by the caller")
        atom = "i32" if x_stype == "i32" else "u32"
        # rebind x as atomics: same binding, so the layout ("w") is unchanged
        head = head.replace(
            f"var<storage, read_write> x: array<{x_stype}>",
            f"var<storage, read_write> x: array<atomic<{atom}>>",
        )
        native = _NATIVE.get((x_stype, reduce))
        if native is not None:
            operand = "select(0u, 1u, v)" if x_stype == "u32" else "v"
            body.append(f"  {native}(&x[at], {operand});\n")
        else:
            combine = _CAS_COMBINE[(ctype, reduce)]
            to_c = "bitcast<f32>(raw)" if ctype == "f32" else "raw"
            to_s = "bitcast<u32>(nv)" if ctype == "f32" else "nv"
            body.append(
                "  var raw = atomicLoad(&x[at]);\n"
                "  loop {\n"
                f"    let old = {to_c};\n"
                f"    let nv = {combine};\n"
                f"    let res = atomicCompareExchangeWeak(&x[at], raw, {to_s});\n"
                "    if (res.exchanged) { break; }\n"
                "    raw = res.old_value;\n"
                "  }\n"
            )
    src = head + helpers_for(combine) + ENTRY.format(wg=WG) + "".join(body) + "}\n"
    return KernelSource(src, "r" * (k + 1) + "w")


# Workgroup memory is not zero-initialised on every stack (seen: wgpu-native on lavapipe left
# garbage in a `var<workgroup>` atomic), so the per-workgroup partials below are written by every
# invocation into an array, then combined serially by invocation 0 after one barrier: no
# initialisation needed, and one barrier (costly on lavapipe) instead of a log-step tree.
_SERIAL_SUM = "  part[lid.x] = c;\n  workgroupBarrier();\n"


@lru_cache(maxsize=64)
def minmax_kernel(rank: int) -> KernelSource:
    """Min and max of an i32 tensor read through strides, into words (2*slot, 2*slot+1).

    Values are mapped to order-preserving u32 keys (v ^ 0x80000000); the result buffer keeps the
    max key and the max of the complemented key (= the min) with atomicMax, so a zeroed buffer
    is the identity. Inactive invocations contribute key 0 / complement 0 (the identities).
    info: [0] n  [1] offset  [2] slot  [3, 3+R) shape  [3+R, 3+2R) strides
    """
    head = header([("idx", "i32", "r"), ("res", "u32", "w")]).replace(
        "var<storage, read_write> res: array<u32>",
        "var<storage, read_write> res: array<atomic<u32>>",
    )
    body = [FLAT_INDEX.format(wg=WG), "  let live = gi < info[0];\n"]
    body.append(_unravel(rank, 3).replace("var r = gi", "var r = min(gi, info[0] - 1)"))
    body.append(
        f"  let key = bitcast<u32>(idx[info[1]{_dot(rank, 3 + rank)}]) ^ 0x80000000u;\n"
        "  pmax[lid.x] = select(0u, key, live);\n"
        "  pmin[lid.x] = select(0u, ~key, live);\n"
        "  workgroupBarrier();\n"
        "  if (lid.x == 0u) {\n"
        "    var a = 0u; var b = 0u;\n"
        f"    for (var t = 0u; t < {WG}u; t = t + 1u) {{ a = max(a, pmin[t]); "
        "b = max(b, pmax[t]); }\n"
        "    atomicMax(&res[2 * info[2]], a);\n"
        "    atomicMax(&res[2 * info[2] + 1], b);\n"
        "  }\n"
    )
    wg_vars = f"var<workgroup> pmin: array<u32, {WG}>;\nvar<workgroup> pmax: array<u32, {WG}>;\n"
    return KernelSource(head + wg_vars + ENTRY.format(wg=WG) + "".join(body) + "}\n", "rw")


def _mask_walk(rank: int, stype: str) -> str:
    """WGSL fn nz(e) -> bool: whether flat element e (row-major over info shape) is nonzero."""
    lines = ["fn nz(e: i32) -> bool {\n", "  var r = e;\n", "  var at = info[1];\n"]
    for d in range(rank - 1, -1, -1):
        lines.append(
            f"  at = at + (r % info[{3 + d}]) * info[{3 + rank + d}]; r = r / info[{3 + d}];\n"
        )
    if stype in ("f32", "f16"):  # by the bits: lavapipe's NaN != 0.0 came out false
        lines.append(f"  return {_nonzero_f32('f32(m[at])')};\n}}\n")
    else:
        lines.append(f"  return m[at] != {'0u' if stype == 'u32' else '0'};\n}}\n")
    return "".join(lines)


def _nonzero_prologue() -> list[str]:
    """The start of both nonzero kernels' bodies: flat ids and this invocation's first element."""
    return [
        FLAT_INDEX.format(wg=WG),
        f"  let wg_id = i32(wg_flat);\n  let first = gi * {NONZERO_PER_THREAD};\n  var c = 0u;\n",
    ]


def _nonzero_source(head: str, rank: int, stype: str, body: list[str], modes: str) -> KernelSource:
    """A nonzero kernel: buffers, the per-workgroup partial counts, the mask walk, the body."""
    return KernelSource(
        head
        + f"var<workgroup> part: array<u32, {WG}>;\n"
        + _mask_walk(rank, stype)
        + ENTRY.format(wg=WG)
        + "".join(body)
        + "}\n",
        modes,
    )


@lru_cache(maxsize=64)
def nonzero_count_kernel(rank: int, stype: str) -> KernelSource:
    """counts[w] = number of nonzero elements in chunk w (1,024 consecutive elements).

    info: [0] n  [1] offset  [2] unused  [3, 3+R) shape  [3+R, 3+2R) strides
    """
    head = header([("m", stype, "r"), ("counts", "u32", "w")])
    per = NONZERO_PER_THREAD
    body = _nonzero_prologue()
    for j in range(per):
        body.append(f"  if (first + {j} < info[0] && nz(first + {j})) {{ c = c + 1u; }}\n")
    body.append(
        _SERIAL_SUM + "  if (lid.x == 0u) {\n    var acc = 0u;\n"
        f"    for (var t = 0u; t < {WG}u; t = t + 1u) {{ acc = acc + part[t]; }}\n"
        "    counts[wg_id] = acc;\n  }\n"
    )
    return _nonzero_source(head, rank, stype, body, "rw")


@lru_cache(maxsize=64)
def nonzero_write_kernel(rank: int, stype: str) -> KernelSource:
    """out[(base_w + p) * R + d] = coordinate d of the p-th nonzero element of chunk w.

    `starts[w]` is the exclusive prefix sum of the chunk counts (made on the host from the
    counts it read back anyway, to size the result). Inside a chunk, one invocation scans the
    256 per-thread counts serially between two barriers: cheaper on lavapipe than a
    log-step tree (barriers there cost more than 256 workgroup-memory adds).
    info: as nonzero_count_kernel.
    """
    head = header([("m", stype, "r"), ("starts", "u32", "r"), ("out", "i32", "w")])
    per = NONZERO_PER_THREAD
    body = _nonzero_prologue()
    for j in range(per):
        body.append(
            f"  let f{j} = first + {j} < info[0] && nz(first + {j});\n"
            f"  c = c + select(0u, 1u, f{j});\n"
        )
    body.append(
        _SERIAL_SUM + "  if (lid.x == 0u) {\n    var acc = 0u;\n"
        f"    for (var t = 0u; t < {WG}u; t = t + 1u) {{ let v = part[t]; part[t] = acc; "
        "acc = acc + v; }\n  }\n  workgroupBarrier();\n"
        "  var p = i32(starts[wg_id] + part[lid.x]);\n"
    )
    for j in range(per):
        body.append(f"  if (f{j}) {{\n    var r = first + {j};\n")
        for d in range(rank - 1, -1, -1):
            body.append(f"    out[p * {rank} + {d}] = r % info[{3 + d}]; r = r / info[{3 + d}];\n")
        body.append("    p = p + 1;\n  }\n")
    return _nonzero_source(head, rank, stype, body, "rrw")
