"""Batched GEMM generators: C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] (+ beta * E[b, m, n]).

Two families, both reading A and B through their strides and offsets (so `x @ w.T`, batch
broadcasts and sliced operands need no copy) and both unrolled by Python into named registers
(no dynamically indexed private arrays: through wgpu-native these become local memory and ran
37x slower on the H200, ../shared/gpu.md):

- `gemm_tiled`: 64x64 output tile per workgroup of 8x8 invocations, each 8x8 outputs in 16 named
  vec4 accumulators; K in steps of 16 through vec4 tiles in `var<workgroup>` with two barriers a
  step. Edge tiles are zero-filled on load and guarded on store.
- `gemm_direct`: no workgroup memory and no barriers: each invocation computes an RM x RN block
  reading A and B straight from storage. Row and column indices are clamped to M-1 / N-1 on load
  (results of clamped lanes are simply not stored), so the K loop has no branches. Shapes of the
  workgroup (TX x TY invocations) and the block (RM x RN, RN in {1, 4}) are baked; the ops layer
  picks them by shape.

- `gemm_fast`: the contiguous-aligned f32 path (A with unit K stride; B with unit N stride, or
  unit K stride as in `x @ w.T`; offsets and other strides multiples of 4; M, N, K multiples of
  the tile): vec4 loads, k-major padded workgroup tiles, bm x bn tiles with tm x tn outputs per
  invocation, optional double buffering (one barrier a K step), no guards. The general kernels
  above stay for everything else. Variant choice: ops/matmul.py `FAST_GPU` / `FAST_CPU`, filled
  in from `python -m pyrite.bench.gemm_variants`.

- `gemv_rows`: up to 8 rows times a K-contiguous B (x @ w.T): lanes of a workgroup share each
  output's dot product, then a tree sum (batch-1 inference, decode).
- `splitk_sum`: the sum of a split-K product's partial products, with the epilogue.

Tensor cores (not used): wgpu-native lists `cooperative-matrix` on the H200 but refuses it
without an experimental-features switch that wgpu-py 0.32 does not expose (tried 2026-12-01);
Dawn's counterpart is `chromium-experimental-subgroup-matrix`. Where they would plug in:
`gemm_fast`'s `compute` (one K step over the k-major workgroup tiles As, Bs): its tm x tn
register FMAs would become fragment loads of 8x8 / 16x16 blocks from As and Bs and one
multiply-add per fragment pair, keeping the global loads, the stash and the double buffering
as they are; the epilogue would store fragments to workgroup memory first, then run as now.
The tile tables (ops/matmul.py FAST_GPU) would get fragment-sized entries, chosen by the same
rule. Only f16 (and bf16) operands pay: f32 has no tensor-core rate there without TF32.

Measured on lavapipe (2-core llvmpipe), 1024^3 f32: tiled 7.4 GFLOP/s, direct (8x8 invocations,
4x4 registers) 4.4; the tiled kernel's barriers cost less than its reuse saves once there are
enough tiles to occupy the cores (the rule and the other shapes: ops/matmul.py `_choose`). The
H200 figures for every variant and the small-shape rule are beside the tables in ops/matmul.py.

Baked per pipeline: the compute type (f32 or i32; f16 storage computes in f32), which inner
dimension of each operand has unit stride ("k"/"m"/"s" for A, "n"/"k"/"s" for B: it picks the
coalesced load order of the tiled kernel and drops a multiply), the batch rank after coalescing,
and the epilogue ("none", "bias": + E, "axpby": alpha*acc + beta*E).

Workgroups are numbered flat over (batch, tile row, tile column), folded over (x, y, z) by
`fold_grid`, so any batch count works (>65,535 workgroups included).

Info words (i32):
  [0] M  [1] N  [2] K  [3] tiles along N  [4] tiles along M  [5] total workgroups
  [6] A offset  [7] A m-stride  [8] A k-stride  [9] B offset  [10] B k-stride  [11] B n-stride
  [12] C offset  [13] E offset  [14] E m-stride  [15] E n-stride  [16] alpha bits  [17] beta bits
  then per batch dim d (outermost first): [size, A stride, B stride, E stride]
C is contiguous: C[c_off + b*M*N + m*N + n], b the flat batch index.
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    SG_ENABLE,
    KernelSource,
    header,
    helpers_for,
    post_expr,
    sg_offsets,
    trusted,
)

INFO_BATCH = 18  # first batch word
TILE = 64  # tiled kernel: output tile edge per workgroup
TK = 16  # tiled kernel: K step


def _prologue(ct: str, nb: int, epi: str) -> list[str]:
    """Flat workgroup id -> (tile column, tile row, batch) and each operand's base index."""
    L = [
        "  let w = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);",
        "  if (w >= info[5]) { return; }",
        "  let M = info[0]; let N = info[1]; let K = info[2];",
        "  let tn = w % info[3]; let rest = w / info[3]; let tm = rest % info[4];",
        "  let bflat = rest / info[4];",
        "  var a_base = info[6]; var b_base = info[9]; var e_base = info[13];",
        "  let c_base = info[12] + bflat * M * N;",
    ]
    if nb:
        L.append("  var bb = bflat;")
        for d in range(nb - 1, -1, -1):
            w0 = INFO_BATCH + 4 * d
            L.append(
                f"  {{ let cd = bb % info[{w0}]; bb = bb / info[{w0}]; "
                f"a_base += cd * info[{w0 + 1}]; b_base += cd * info[{w0 + 2}]; "
                f"e_base += cd * info[{w0 + 3}]; }}"
            )
    L.append("  let s_am = info[7]; let s_ak = info[8]; let s_bk = info[10]; let s_bn = info[11];")
    if epi == "axpby":
        if ct == "f32":
            L.append("  let alpha = bitcast<f32>(info[16]); let beta = bitcast<f32>(info[17]);")
        else:
            L.append("  let alpha = info[16]; let beta = info[17];")
    return L


def _a_index(m: str, k: str, a_lay: str) -> str:
    mt = m if a_lay == "m" else f"({m}) * s_am"
    kt = k if a_lay == "k" else f"({k}) * s_ak"
    return f"a_base + {mt} + {kt}"


def _b_index(k: str, n: str, b_lay: str) -> str:
    kt = k if b_lay == "k" else f"({k}) * s_bk"
    nt = n if b_lay == "n" else f"({n}) * s_bn"
    return f"b_base + {kt} + {nt}"


def _ld(expr: str, stype: str, ct: str) -> str:
    return expr if stype == ct else f"{ct}({expr})"


def _epi_value(m: str, n: str, val: str, ct: str, e_st: str, epi: str) -> str:
    """epilogue(val) at (m, n): val, val + E, or alpha * val + beta * E."""
    if epi == "none":
        return val
    e = _ld(f"e[e_base + ({m}) * info[14] + ({n}) * info[15]]", e_st, ct)
    return f"{val} + {e}" if epi == "bias" else f"alpha * {val} + beta * {e}"


def _store_line(m: str, n: str, val: str, ct: str, c_st: str, e_st: str, epi: str) -> str:
    """c[m, n] = epilogue(val); `m`, `n` are in range."""
    v = _epi_value(m, n, val, ct, e_st, epi)
    if c_st != ct:
        v = f"{c_st}({v})"
    return f"c[c_base + ({m}) * N + {n}] = {v};"


def _fma(ct, a, b, acc):
    return f"fma({a}, {b}, {acc})" if ct == "f32" else f"{a} * {b} + {acc}"


def _buffers(a_st, b_st, c_st, e_st, epi):
    bufs = [("a", a_st, "r"), ("b", b_st, "r")]
    if epi != "none":
        bufs.append(("e", e_st, "r"))
    bufs.append(("c", c_st, "w"))
    return bufs


ENTRY = (
    "@compute @workgroup_size({wg})\n"
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lix: u32,"
    " @builtin(num_workgroups) nwg: vec3<u32>) {{\n"
)


@lru_cache(maxsize=512)
def gemm_tiled(
    a_st: str,
    b_st: str,
    c_st: str,
    ct: str,
    a_lay: str,
    b_lay: str,
    nb: int,
    epi: str = "none",
    e_st: str = "f32",
) -> KernelSource:
    """64x64 tile per workgroup of 64 invocations, 8x8 outputs each, K steps of 16."""
    bufs = _buffers(a_st, b_st, c_st, e_st, epi)
    v4 = f"vec4<{ct}>"
    zero = "0.0" if ct == "f32" else "0"
    L = [
        header(bufs),
        f"var<workgroup> As: array<{v4}, {TK * TILE // 4}>;  // As[k*16 + m/4][m%4]",
        f"var<workgroup> Bs: array<{v4}, {TK * TILE // 4}>;  // Bs[k*16 + n/4][n%4]",
        ENTRY.format(wg=64),
    ]
    L += _prologue(ct, nb, epi)
    L += [
        "  let li = i32(lix); let tx = li % 8; let ty = li / 8;",
        f"  let row0 = tm * {TILE}; let col0 = tn * {TILE};",
    ]
    for i in range(8):
        L.append(f"  var c{i}0 = {v4}({zero}); var c{i}1 = {v4}({zero});")
    L.append(f"  for (var t = 0; t < K; t += {TK}) {{")
    L.append(f"    for (var j = 0; j < {TK * TILE // 64}; j++) {{")
    L.append("      let e = li + j * 64;")
    # A tile, 64 (m) x 16 (k): consecutive invocations walk A's unit-stride dim
    if a_lay == "k":
        L.append(f"      let am = e / {TK}; let ak = e % {TK};")
    else:
        L.append(f"      let am = e % {TILE}; let ak = e / {TILE};")
    L.append(f"      var va = {zero};")
    L.append(
        "      if (row0 + am < M && t + ak < K) { va = "
        + _ld(f"a[{_a_index('row0 + am', 't + ak', a_lay)}]", a_st, ct)
        + "; }"
    )
    L.append("      As[ak * 16 + am / 4][am % 4] = va;")
    if b_lay == "n":
        L.append(f"      let bk = e / {TILE}; let bn = e % {TILE};")
    else:
        L.append(f"      let bk = e % {TK}; let bn = e / {TK};")
    L.append(f"      var vb = {zero};")
    L.append(
        "      if (col0 + bn < N && t + bk < K) { vb = "
        + _ld(f"b[{_b_index('t + bk', 'col0 + bn', b_lay)}]", b_st, ct)
        + "; }"
    )
    L.append("      Bs[bk * 16 + bn / 4][bn % 4] = vb;")
    L.append("    }")
    L.append("    workgroupBarrier();")
    L.append(f"    for (var kk = 0; kk < {TK}; kk++) {{")
    L.append("      let a0 = As[kk * 16 + ty * 2]; let a1 = As[kk * 16 + ty * 2 + 1];")
    L.append("      let b0 = Bs[kk * 16 + tx * 2]; let b1 = Bs[kk * 16 + tx * 2 + 1];")
    comps = ["a0.x", "a0.y", "a0.z", "a0.w", "a1.x", "a1.y", "a1.z", "a1.w"]
    for i in range(8):
        L.append(
            f"      c{i}0 = {_fma(ct, f'{v4}({comps[i]})', 'b0', f'c{i}0')}; "
            f"c{i}1 = {_fma(ct, f'{v4}({comps[i]})', 'b1', f'c{i}1')};"
        )
    L.append("    }")
    L.append("    workgroupBarrier();")
    L.append("  }")
    # epilogue: row ty*8+i, columns tx*8 + 0..7 (c{i}0 then c{i}1)
    for i in range(8):
        L.append(f"  {{ let m = row0 + ty * 8 + {i};")
        L.append("    if (m < M) {")
        for j in range(8):
            val = f"c{i}{j // 4}.{'xyzw'[j % 4]}"
            L.append(
                f"      {{ let n = col0 + tx * 8 + {j}; if (n < N) {{ "
                f"{_store_line('m', 'n', val, ct, c_st, e_st, epi)} }} }}"
            )
        L.append("    }")
        L.append("  }")
    L.append("}")
    return trusted(KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs)))


@lru_cache(maxsize=512)
def gemm_direct(
    a_st: str,
    b_st: str,
    c_st: str,
    ct: str,
    a_lay: str,
    b_lay: str,
    nb: int,
    epi: str = "none",
    e_st: str = "f32",
    tx: int = 16,
    ty: int = 4,
    rm: int = 4,
    rn: int = 4,
) -> KernelSource:
    """No barriers: invocation (x, y) of a TX x TY workgroup computes rows y*RM.., columns x*RN..
    of the workgroup's (TY*RM) x (TX*RN) tile, reading A and B from storage."""
    assert rn in (1, 4)
    bufs = _buffers(a_st, b_st, c_st, e_st, epi)
    acc_t = ct if rn == 1 else f"vec4<{ct}>"
    zero = "0.0" if ct == "f32" else "0"
    L = [header(bufs), ENTRY.format(wg=tx * ty)]
    L += _prologue(ct, nb, epi)
    L += [
        f"  let li = i32(lix); let lx = li % {tx}; let ly = li / {tx};",
        f"  let m0 = tm * {ty * rm} + ly * {rm}; let n0 = tn * {tx * rn} + lx * {rn};",
    ]
    # clamped row / column bases: loads never leave the operands, the K loop never branches
    for i in range(rm):
        mt = f"min(m0 + {i}, M - 1)"
        L.append(f"  let ar{i} = a_base + {mt if a_lay == 'm' else f'{mt} * s_am'};")
        L.append(f"  var x{i} = {acc_t}({zero});")
    for j in range(rn):
        nt = f"min(n0 + {j}, N - 1)"
        L.append(f"  let bc{j} = b_base + {nt if b_lay == 'n' else f'{nt} * s_bn'};")
    ka = "k" if a_lay == "k" else "k * s_ak"
    kb = "k" if b_lay == "k" else "k * s_bk"
    L.append("  for (var k = 0; k < K; k++) {")
    L.append(f"    let ka = {ka}; let kb = {kb};")
    for i in range(rm):
        L.append(f"    let a{i} = {_ld(f'a[ar{i} + ka]', a_st, ct)};")
    if rn == 1:
        L.append(f"    let bv = {_ld('b[bc0 + kb]', b_st, ct)};")
        for i in range(rm):
            L.append(f"    x{i} = {_fma(ct, f'a{i}', 'bv', f'x{i}')};")
    else:
        parts = ", ".join(_ld(f"b[bc{j} + kb]", b_st, ct) for j in range(4))
        L.append(f"    let bv = vec4<{ct}>({parts});")
        for i in range(rm):
            L.append(f"    x{i} = {_fma(ct, f'vec4<{ct}>(a{i})', 'bv', f'x{i}')};")
    L.append("  }")
    for i in range(rm):
        L.append(f"  {{ let m = m0 + {i};")
        L.append("    if (m < M) {")
        for j in range(rn):
            val = f"x{i}" if rn == 1 else f"x{i}.{'xyzw'[j]}"
            L.append(
                f"      {{ let n = n0 + {j}; if (n < N) {{ "
                f"{_store_line('m', 'n', val, ct, c_st, e_st, epi)} }} }}"
            )
        L.append("    }")
        L.append("  }")
    L.append("}")
    return trusted(KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs)))


# ---- the contiguous-aligned fast path ---------------------------------------------------------
def _kg_sums_vec4(bm: int, bn: int, tm: int, tn: int, kg: int) -> int:
    """vec4s of workgroup memory gemm_fast's K groups merge their sums through (0: one group)."""
    return (kg // 2) * (bn // tn) * (bm // tm) * (tm * tn // 4) if kg > 1 else 0


def fast_smem_bytes(
    bm: int, bn: int, tm: int, tn: int, bk: int, dbuf: bool, lay: str, kg: int = 1,
    half: bool = False,
) -> int:  # fmt: skip
    """Workgroup memory of `gemm_fast` (bytes): the ops layer skips a variant past the limit.
    `half`: the tiles hold f16 (`acc16`), 8 bytes a vec4."""
    sa = bm // 4 + 1
    sb = bn // 4 + (1 if lay[-1] == "k" else 0)
    tiles = (2 if dbuf else 1) * bk * sa
    sums = _kg_sums_vec4(bm, bn, tm, tn, kg)
    width = 8 if half and kg == 1 else 16
    return (tiles + (2 if dbuf else 1) * bk * sb) * width + (sums * 16 if sums > tiles else 0)


def fast_valid(bm: int, bn: int, tm: int, tn: int, bk: int, kg: int = 1) -> bool:
    """Whether `gemm_fast` can be built with this tiling: vec4 registers, and each K step's
    vec4 loads of both tiles split evenly over the invocations (of all `kg` K groups), and the
    K step split evenly over the groups."""
    if tm % 4 or tn % 4 or bk % 4 or bm % tm or bn % tn or kg < 1 or kg & (kg - 1) or bk % kg:
        return False
    nt = (bn // tn) * (bm // tm) * kg
    return (bm * bk // 4) % nt == 0 and (bn * bk // 4) % nt == 0


@lru_cache(maxsize=256)
def gemm_fast(
    lay: str,
    nb: int,
    epi: str = "none",
    bm: int = 128,
    bn: int = 128,
    tm: int = 8,
    tn: int = 8,
    bk: int = 8,
    dbuf: bool = True,
    kg: int = 1,
    post: tuple | None = None,
    dual: int | None = None,
    rows: int | None = None,
    st: str = "f32",
    conv: tuple | None = None,
    acc16: int = 0,
) -> KernelSource:
    """GEMM for operands the ops layer has checked are aligned: A (.., M, K) with unit K
        stride, or with unit M stride where `lay` starts with "m" (`g.T @ x`, a weight's gradient);
        B (.., K, N) with unit N stride (`lay` ending "n") or unit K stride ("k": `x @ w.T`); every
        other stride and offset (batch strides too) a multiple of 4, M % bm == N % bn == K % bk == 0,
        C contiguous at an offset multiple of 4. No guards anywhere.

        A workgroup of (bn/tn) x (bm/tm) invocations computes a bm x bn tile; invocation (tx, ty)
        holds tm x tn outputs in tm*tn/4 named vec4 registers. Its rows are the vec4 groups
        ty + i*(bm/tm) (i < tm/4) and its columns the vec4 groups tx + j*(bn/tn), so one warp's
        workgroup-memory reads of B are consecutive 16-byte words (no bank conflicts) and its stores
        to C are coalesced. Operands come in as vec4 (16-byte) loads; A (and B when K is its unit
        dim) is transposed on its way into the k-major workgroup tile, whose rows are padded by one
        vec4 so those scalar stores spread over the banks (an M-contiguous A goes in whole, as an
    N-contiguous B does). With `dbuf` the workgroup tiles are double
        buffered: the next K step's vec4s are loaded into registers while the current step computes,
        then stored into the other buffer, one barrier a K step instead of two. With `dbuf` = 2
        (the deep prefetch, not with `conv`) two register sets alternate, so each K step's loads
        are issued two steps before they are stored: their latency hides behind two steps of
        products instead of one (small products' few workgroups an SM wait on each step's loads).
        With `dbuf` = 3 (not with `conv`, which takes `dbuf` = 1's code) the next step's loads and
        stores are unconditional: the last step loads its own tile again (K - bk, in bounds) into
        the buffer nothing reads after it. `dbuf` = 1 guards them with `if (more)`, and the
        H100's SASS of its 16x8 tile showed what that costs: the registers the guarded loads
        fill are carried round the loop (16 predicated and 16 plain MOVs a step) and the loads
        were sunk after the step's products, just before their stores (their latency not
        hidden). `dbuf` = 4: as 3, two K steps an iteration, so each step's tile buffers are
        constants (no `cur`: its offsets fold into the loads); an odd step count ends halfway
        through. `dbuf` = 5: as 3 with a barrier right after the loads, which the driver's
        compiler otherwise sinks to ~70 % through the step's products (the H100's SASS: its
        scheduler shortens the loaded registers' lives); the invocations are level there, just
        past the last step's barrier, so it costs little. No tile gained from it on the H100
        (docs/bench/2026-12-06-h100-s36-gemm-dbub.json): a measured alternative, not a rule's.
        The K step is unrolled by the generator.

        Info words as the general kernels (module docstring); e (the epilogue operand) is read by
        scalars through its strides.

    `post` (compile/fusion.py: an elementwise map fused into the product's store) is (expr,
    n_extra, at, s_ctypes): each output is written as expr with x0 the product's value (after
    the epilogue), x1..x{n_extra} read from extra f32 operands bound after e, each at info words
    at + 3k (base, m stride, n stride), and s0.. scalars at info words at + 3 * n_extra + i.
    2-D products only (nb == 0). With `dual` (an info word) the product itself is still
    written to C and the map's result goes to a second output C2 (bound after C, contiguous like
    C at the element offset in that word): a map whose input is also read elsewhere (GELU's
    pre-activation, saved for the backward).

    With `rows` (an info word) the kernel also writes A's row sums, sum_k A[b, m, k], to a
    contiguous f32 output RS bound last, at RS[info[rows] + b * M + m]: every invocation adds up
    the A values it reads from the workgroup tile anyway (tm/4 vec4 adds a K step beside its
    tm*tn/4 fmas), and the first tile column's first column of invocations stores them. A
    linear's weight gradient g^T x with its bias gradient (the column sums of g) in one kernel.
    Not with `post`.

    With `kg` > 1 (a power of two: K groups) the workgroup is kg groups of (bn/tn) x (bm/tm)
    invocations: all of them load each K step's tiles, group g sums the step's products g*bk/kg ..
    (g+1)*bk/kg - 1 into its own registers, and after the last step the groups' sums are added
    pairwise through workgroup memory (log2(kg) rounds, in a fixed order) and group 0 stores
    them. A split of K inside one workgroup and one dispatch: products with few output tiles
    (batch-1 inference's M = 128) get kg times the invocations an SM to hide latency with, and
    each invocation's chain of sums is kg times shorter. Not with `rows`, `conv` or `acc16`.

    `st`: the storage of A, B, C and E: "f32", "f16" (vec4<f16> loads and stores: `shader-f16`)
    or "bf16" (four packed values a vec2<u32>, rounded to nearest even on store). The workgroup
    tiles, the products and the sums are f32 whatever the storage; C is rounded once. `post`,
    `dual` and `rows` are f32 only.

    `acc16` (f16 storage only; `torch.backends.cuda.matmul.allow_fp16_accumulation`): f16
    arithmetic. The workgroup tiles stay f16 (half the bytes and half the workgroup-memory
    reads), the products are packed f16 fmas (vec4<f16>: two half2 instructions where f32 takes
    four) summed in f16 over one K step (bk products), and each K step's f16 sum is added to f32
    sums. So the error is a K step's: each product rounded to f16 and bk of them summed in f16
    (relative ~bk * 2^-11 of the step's |a||b| sum in the worst case), not K's; a step whose sum
    passes 65504 overflows to inf. `acc16` = 2: f16 sums across the whole of K, never
    added to f32 sums (cuBLAS's CUBLAS_COMPUTE_16F, what torch's switch asks of it): no f32
    sums held and none converted, at an error of K f16 roundings in the worst case.

    With `conv` = (nd, KD, KH, KW, at, tr, cbatch, ostore) the kernel is a convolution as an implicit GEMM (f32
    or f16, lay "n", no `post`/`rows`): B is never stored. It is the column matrix of the input x
    (a scalar buffer), each element gathered from x as its K step is loaded (`_conv_operand`,
    zero outside the input, the kernel box's extent baked), and C is stored a scalar at a time,
    columns past N not stored, so N needs no alignment (M and K still do). Its words from `at`:
    see `CONV_WORDS`. `tr`: a transposed convolution of stride 1 (the input gradient of a
    stride-1 convolution; strided ones run as stride-1 convolutions per output phase, stored
    with `ostore`). `cbatch`: B's columns are
    (batch index, output position), each batch index another offset into x (a weight
    gradient's input channels, ops/conv.py `_wgrad_implicit`). `ostore`: C is written through
    the output's strides (words at + 21: channel stride, + 22..24: spatial strides, + 25..: batch
    strides), a strided transposed convolution's phase (ops/conv.py `_conv_transpose_phases`).
    """
    assert lay in ("n", "k", "mn", "mk")
    assert rows is None or post is None
    assert st == "f32" or (post is None and rows is None)
    assert conv is None or (lay == "n" and st != "bf16" and post is None and rows is None)
    assert conv is None or (bn // tn) * (bm // tm) % (bn // 4) == 0
    assert not acc16 or (st == "f16" and conv is None and post is None and rows is None)
    assert kg == 1 or (rows is None and conv is None and not acc16)
    assert fast_valid(bm, bn, tm, tn, bk, kg)
    assert dbuf != 2 or conv is None  # (the deep prefetch: not for the implicit convolution)
    tt = "vec4<f16>" if acc16 else "vec4<f32>"  # the workgroup tiles' and the loads' vec4
    lst = "f32" if acc16 else st  # (the loads widen from storage `st` to f32, unless acc16)
    v4 = {"f32": "vec4<f32>", "f16": "vec4<f16>", "bf16": "vec2<u32>"}[st]
    a_m, b_lay = lay[0] == "m", lay[-1]
    ntx, nty = bn // tn, bm // tm
    ng = ntx * nty  # invocations a K group
    nt = ng * kg
    kq = bk // 4
    la, lb = bm * kq, bn * bk // 4  # vec4 loads a K step
    ra, rb = la // nt, lb // nt
    sa = bm // 4 + 1  # As: k-major, row of bm/4 vec4 + 1 pad
    sb = bn // 4 + (1 if b_lay == "k" else 0)
    nbuf = 2 if dbuf else 1
    bufs = [("a", v4, "r"), ("b", st if conv else v4, "r")]
    if epi != "none":
        bufs.append(("e", "u32" if st == "bf16" else st, "r"))
    if post is not None:
        assert nb == 0
        p_expr, n_extra, p_at, p_sct = post
        bufs += [(f"r{k}", "f32", "r") for k in range(1, n_extra + 1)]
    bufs.append(("c", st if conv else v4, "w"))
    if dual is not None:
        assert post is not None
        bufs.append(("c2", "vec4<f32>", "w"))
    if rows is not None:
        bufs.append(("rs", "f32", "w"))
    nsum = _kg_sums_vec4(bm, bn, tm, tn, kg)
    sums = "As" if nsum <= nbuf * bk * sa else "Ks"  # (the groups' sums: in As where they fit)
    L = [
        f"var<workgroup> As: array<{tt}, {nbuf * bk * sa}>;  // As[buf][k][m/4][m%4]",
        f"var<workgroup> Bs: array<{tt}, {nbuf * bk * sb}>;  // Bs[buf][k][n/4][n%4]",
    ]
    if sums == "Ks":
        L.append(f"var<workgroup> Ks: array<vec4<f32>, {nsum}>;  // the K groups' sums")
    L.append(ENTRY.format(wg=nt))
    L += _prologue("f32", nb, epi)
    if kg == 1:
        L.append(f"  let li = i32(lix); let tx = li % {ntx}; let ty = li / {ntx};")
    else:
        L.append(
            f"  let li = i32(lix); let lg = li % {ng}; let kgi = li / {ng}; "
            f"let tx = lg % {ntx}; let ty = lg / {ntx};"
        )
    L.append(f"  let row0 = tm * {bm}; let col0 = tn * {bn};")
    L += _tile_operand("a", "m", "row0", bm, sa, a_m, ra, nt, kq, tt)
    if conv is None:
        L += _tile_operand("b", "n", "col0", bn, sb, b_lay == "n", rb, nt, kq, tt)
    else:
        L += _conv_operand(conv, bn, sb, rb, nt)
    sum_t = "vec4<f16>" if acc16 == 2 else "vec4<f32>"  # (the sums' type: f16 across K with 2)
    for r in range(tm):
        L.append("  " + " ".join(f"var c{r}_{j} = {sum_t}(0.0);" for j in range(tn // 4)))
    if rows is not None:
        L.append("  " + " ".join(f"var rs{i} = vec4<f32>(0.0);" for i in range(tm // 4)))

    def load(t, ind, reg="v"):  # global -> registers for the K step starting at element `t`
        out = [f"{ind}let t4 = ({t}) >> 2u;"]
        out += _tile_load("a", a_m, ra, t, ind, lst, reg)
        if conv is not None:
            return out + _conv_load(conv, rb, t, ind, st)
        return out + _tile_load("b", b_lay == "n", rb, t, ind, lst, reg)

    def stash(buf, ind, reg="v"):  # registers -> workgroup tile `buf`
        out = _tile_stash("a", a_m, ra, f"({buf}) * {bk * sa}", sa, ind, reg)
        return out + _tile_stash("b", b_lay == "n", rb, f"({buf}) * {bk * sb}", sb, ind, reg)

    bkg = bk // kg  # (the K step's products a group sums)

    def compute(buf, ind):
        if kg == 1:
            out = [f"{ind}let oa = ({buf}) * {bk * sa} + ty; let ob = ({buf}) * {bk * sb} + tx;"]
        else:
            out = [
                f"{ind}let oa = ({buf}) * {bk * sa} + kgi * {bkg * sa} + ty; "
                f"let ob = ({buf}) * {bk * sb} + kgi * {bkg * sb} + tx;"
            ]
        acc, cv = ("p", "vec4<f16>") if acc16 == 1 else ("c", "vec4<f16>" if acc16 else "vec4<f32>")
        if acc16 == 1:  # this K step's f16 sums
            for r in range(tm):
                out.append(
                    ind + " ".join(f"var p{r}_{j} = vec4<f16>(0.0);" for j in range(tn // 4))
                )
        for kk in range(bkg):
            out.append(ind + "{")
            out.append(
                ind
                + "  "
                + " ".join(f"let a{i} = As[oa + {kk * sa + i * nty}];" for i in range(tm // 4))
            )
            if rows is not None:
                out.append(ind + "  " + " ".join(f"rs{i} += a{i};" for i in range(tm // 4)))
            out.append(
                ind
                + "  "
                + " ".join(f"let b{j} = Bs[ob + {kk * sb + j * ntx}];" for j in range(tn // 4))
            )
            for r in range(tm):
                av = f"{cv}(a{r // 4}.{'xyzw'[r % 4]})"
                out.append(
                    ind
                    + "  "
                    + " ".join(
                        f"{acc}{r}_{j} = fma({av}, b{j}, {acc}{r}_{j});" for j in range(tn // 4)
                    )
                )
            out.append(ind + "}")
        if acc16 == 1:
            for r in range(tm):
                out.append(
                    ind + " ".join(f"c{r}_{j} += vec4<f32>(p{r}_{j});" for j in range(tn // 4))
                )
        return out

    # the double-buffered loops' first K step, into tile 0
    first = ["  {", *load("0", "    "), *stash("0", "    "), "  }"]
    if dbuf == 2:  # the deep prefetch: two register sets, each step's loads two steps ahead
        L += [f"  var wa{r}: {tt};" for r in range(ra)] + [f"  var wb{r}: {tt};" for r in range(rb)]
        L += first
        L.append(f"  if ({bk} < K) {{")
        L += load(f"{bk}", "    ", "w")
        L.append("  }")
        L.append("  workgroupBarrier();")
        L.append("  var cur = 0;")
        L.append(f"  for (var t = 0; t < K; t += {2 * bk}) {{")
        # step t (in tile cur; w holds step t + bk); v takes step t + 2bk
        L.append(f"    if (t + {2 * bk} < K) {{")
        L += load(f"t + {2 * bk}", "      ")
        L.append("    }")
        L += compute("cur", "    ")
        L.append(f"    if (t + {bk} < K) {{")
        L += stash("1 - cur", "      ", "w")
        L.append("    }")
        L.append("    workgroupBarrier();")
        L.append("    cur = 1 - cur;")
        # step t + bk (in tile cur; v holds step t + 2bk); w takes step t + 3bk
        L.append(f"    if (t + {bk} < K) {{")
        L.append(f"      if (t + {3 * bk} < K) {{")
        L += load(f"t + {3 * bk}", "        ", "w")
        L.append("      }")
        L += compute("cur", "      ")
        L.append(f"      if (t + {2 * bk} < K) {{")
        L += stash("1 - cur", "        ")
        L.append("      }")
        L.append("      workgroupBarrier();")
        L.append("      cur = 1 - cur;")
        L.append("    }")
        L.append("  }")
    elif dbuf == 4 and conv is None:  # unconditional prefetch, two K steps an iteration
        L += first
        L.append("  workgroupBarrier();")
        L.append(f"  for (var t = 0; t < K; t += {2 * bk}) {{")
        L += load(f"min(t + {bk}, K - {bk})", "    ")
        L += compute("0", "    ")
        L += stash("1", "    ")
        L.append("    workgroupBarrier();")
        L.append(f"    if (t + {bk} < K) {{")
        L += load(f"min(t + {2 * bk}, K - {bk})", "      ")
        L += compute("1", "      ")
        L += stash("0", "      ")
        L.append("      workgroupBarrier();")
        L.append("    }")
        L.append("  }")
    elif dbuf:
        L += first
        L.append("  workgroupBarrier();")
        L.append("  var cur = 0;")
        L.append(f"  for (var t = 0; t < K; t += {bk}) {{")
        if dbuf in (3, 5) and conv is None:  # the unconditional prefetch (the docstring's 3, 5)
            L += load(f"min(t + {bk}, K - {bk})", "    ")
            if dbuf == 5:  # (the loads issued here, not sunk towards their stores)
                L.append("    workgroupBarrier();")
            L += compute("cur", "    ")
            L += stash("1 - cur", "    ")
        else:
            L.append(f"    let more = t + {bk} < K;")
            L.append("    if (more) {")
            L += load(f"t + {bk}", "      ")
            L.append("    }")
            L += compute("cur", "    ")
            L.append("    if (more) {")
            L += stash("1 - cur", "      ")
            L.append("    }")
        L.append("    workgroupBarrier();")
        L.append("    cur = 1 - cur;")
        L.append("  }")
    else:
        L.append(f"  for (var t = 0; t < K; t += {bk}) {{")
        L += load("t", "    ")
        L += stash("0", "    ")
        L.append("    workgroupBarrier();")
        L += compute("0", "    ")
        L.append("    workgroupBarrier();")
        L.append("  }")
    if kg > 1:  # the groups' sums, pairwise: groups h..2h-1 hand theirs to groups 0..h-1
        regs = [f"c{r}_{j}" for r in range(tm) for j in range(tn // 4)]
        h = kg // 2
        while h >= 1:
            L.append(f"  if (kgi >= {h} && kgi < {2 * h}) {{")
            L += [f"    {sums}[((kgi - {h}) * {len(regs)} + {i}) * {ng} + lg] = {v};"
                  for i, v in enumerate(regs)]  # fmt: skip
            L.append("  }")
            L.append("  workgroupBarrier();")
            L.append(f"  if (kgi < {h}) {{")
            L += [f"    {v} += {sums}[(kgi * {len(regs)} + {i}) * {ng} + lg];"
                  for i, v in enumerate(regs)]  # fmt: skip
            L.append("  }")
            if h > 1:
                L.append("  workgroupBarrier();")
            h //= 2
        L.append("  if (kgi != 0) { return; }")
    # store: row m = row0 + 4*(ty + i*nty) + q, vec4 column (col0/4) + tx + j*ntx
    if conv is not None and conv[7]:
        L += _conv_store_offsets(conv, nb, ntx, tn)
    L.append("  let c4 = (c_base >> 2u) + (col0 >> 2u); let n4 = N >> 2u;")
    if dual is not None:
        L.append(f"  let d4 = (info[{dual}] >> 2u) + (col0 >> 2u);")
    for r in range(tm):
        i, q = divmod(r, 4)
        L.append(f"  {{ let m = row0 + 4 * (ty + {i * nty}) + {q};")
        for j in range(tn // 4):
            v = f"vec4<f32>(c{r}_{j})" if acc16 == 2 else f"c{r}_{j}"
            n = f"(col0 + 4 * (tx + {j * ntx}))"
            if epi != "none":
                es = ", ".join(
                    _elem(f"e_base + m * info[14] + ({n} + {s}) * info[15]", st) for s in range(4)
                )
                ev = f"vec4<f32>({es})"
                v = f"{v} + {ev}" if epi == "bias" else f"alpha * {v} + beta * {ev}"
            if conv is not None and conv[7]:  # scalar stores through the output's strides
                L.append(
                    f"    {{ let v = {_narrow4(v, st)}; let cm = c_out + m * info[{conv[4] + 21}];"
                )
                for q in range(4):
                    L.append(f"      if (cok{j}_{q}) {{ c[cm + co{j}_{q}] = v.{'xyzw'[q]}; }}")
                L.append("    }")
            elif conv is not None:  # scalar stores, columns past N dropped
                L.append(f"    {{ let v = {_narrow4(v, st)}; let n = {n};")
                for q in range(4):
                    L.append(
                        f"      if (n + {q} < N) {{ c[c_base + m * N + n + {q}] = v.{'xyzw'[q]}; }}"
                    )
                L.append("    }")
            elif post is not None:
                lanes = ", ".join(
                    post_expr(p_expr, f"v.{'xyzw'[q]}", p_at, n_extra, p_sct, f"{n} + {q}")
                    for q in range(4)
                )
                L.append(f"    {{ let v = {v};")
                if dual is not None:
                    L.append(f"      c[c4 + m * n4 + tx + {j * ntx}] = v;")
                    L.append(f"      c2[d4 + m * n4 + tx + {j * ntx}] = vec4<f32>({lanes}); }}")
                else:
                    L.append(f"      c[c4 + m * n4 + tx + {j * ntx}] = vec4<f32>({lanes}); }}")
            else:
                L.append(f"    c[c4 + m * n4 + tx + {j * ntx}] = {_narrow4(v, st)};")
        L.append("  }")
    if rows is not None:  # (tn: the tile column; a uniform branch, after the last barrier)
        L.append("  if (tn == 0 && tx == 0) {")
        L.append(f"    let r0 = info[{rows}] + bflat * M + row0;")
        for i in range(tm // 4):
            L.append(
                "    "
                + " ".join(
                    f"rs[r0 + 4 * (ty + {i * nty}) + {q}] = rs{i}.{'xyzw'[q]};" for q in range(4)
                )
            )
        L.append("  }")
    L.append("}")
    body = "\n".join(L) + "\n"
    helpers = helpers_for(body, p_expr if post is not None else "")
    return trusted(
        KernelSource(header(bufs, f16=st == "f16") + helpers + body, "".join(m for _, _, m in bufs))
    )


def _elem(idx: str, st: str) -> str:
    """The f32 value of element `idx` of a scalar storage buffer `e` of storage `st`."""
    return _elem_of("e", idx, st)


def _elem_of(buf: str, idx: str, st: str) -> str:
    """The f32 value of element `idx` of scalar storage buffer `buf` of storage `st`."""
    if st == "bf16":
        return f"p_bf16_at({buf}[({idx}) >> 1u], {idx})"
    return f"{buf}[{idx}]" if st == "f32" else f"f32({buf}[{idx}])"


# gemm_fast's four-element storage types (its `st`): the conversion of one load to vec4<f32>
# and of a vec4<f32> back for the store
_CONVERT4 = {"f16": ("vec4<f32>", "vec4<f16>"), "bf16": ("p_bf16x4", "p_bf16x4_pack")}


def _widen4(v: str, st: str) -> str:
    return v if st == "f32" else f"{_CONVERT4[st][0]}({v})"


def _narrow4(v: str, st: str) -> str:
    return v if st == "f32" else f"{_CONVERT4[st][1]}({v})"


def _tile_operand(x, o, origin, width, pad, direct, reps, nt, kq, vt="vec4<f32>"):
    """gemm_fast's index lines for operand x ("a" or "b"), whose workgroup tile is k-major
    with `width` elements of its other dim o ("m" or "n") a row (padded to `pad` vec4s), from
    tile origin `origin`. Invocation li loads vec4 number li + r*nt (r < reps) a K step.
    `direct`: o is the operand's unit dim, so a vec4 goes into the tile whole (k row idx /
    (width/4), o-vec4 idx % (width/4)); else K is (o row idx / kq, k-vec4 idx % kq) and the
    vec4 is transposed into four tile rows (`stash`)."""
    L = []
    if direct:
        L += [f"  let s{x}k4 = s_{x}k >> 2u;", f"  let {x}4 = ({x}_base >> 2u) + ({origin} >> 2u);"]
        for r in range(reps):
            i = f"(li + {r * nt})"
            L.append(f"  let {x}k{r} = {i} / {width // 4}; let {x}{o}{r} = {i} % {width // 4};")
            L.append(
                f"  let g{x}{r} = {x}4 + {x}k{r} * s{x}k4 + {x}{o}{r}; "
                f"let s{x}{r} = {x}k{r} * {pad} + {x}{o}{r};"
            )
            L.append(f"  var v{x}{r}: {vt};")
        return L
    L += [
        f"  let s{x}{o}4 = s_{x}{o} >> 2u;",
        f"  let {x}4 = ({x}_base >> 2u) + {origin} * s{x}{o}4;",
    ]
    for r in range(reps):
        i = f"(li + {r * nt})"
        L.append(f"  let {x}{o}{r} = {i} / {kq}; let {x}k{r} = {i} % {kq};")
        L.append(f"  let g{x}{r} = {x}4 + {x}{o}{r} * s{x}{o}4 + {x}k{r};")
        L.append(
            f"  let s{x}{r} = {x}k{r} * {4 * pad} + {x}{o}{r} / 4; let q{x}{r} = {x}{o}{r} % 4;"
        )
        L.append(f"  var v{x}{r}: {vt};")
    return L


def _tile_load(x, direct, reps, t, ind, st="f32", reg="v"):
    """Operand x's vec4s of the K step starting at element `t` (see _tile_operand), widened
    to f32 from storage `st`, into registers `reg`<x><r> (v, or w: the deep prefetch's second
    set)."""
    if direct:
        return [
            f"{ind}{reg}{x}{r} = {_widen4(f'{x}[g{x}{r} + ({t}) * s{x}k4]', st)};"
            for r in range(reps)
        ]
    return [f"{ind}{reg}{x}{r} = {_widen4(f'{x}[g{x}{r} + t4]', st)};" for r in range(reps)]


# gemm_fast's convolution words from `at` (its `conv`): x's channel stride, then per spatial
# dim (depth, height, width): x's stride, the input's size, the output's size, the stride, the
# padding, the dilation; then, with a column batch, the columns a batch index covers (the
# output's positions) and x's stride between batch indices; then, with `ostore`, the output's
# channel and spatial strides and one stride per batch dim.
CONV_WORDS = 25


def _conv_operand(conv, width, pad, reps, nt):
    """The implicit column matrix's index lines (gemm_fast with `conv`). Invocation li loads, a K
    step, element rows bk_r = (li + r*nt) / (width/4) and the four columns of vec4 column
    li % (width/4) (the same for every r: nt is a multiple of width/4). Each column's output
    position and its input origin are decoded once: position * stride - padding for a
    convolution (with that origin's offset in x), position + padding for a transposed one of
    stride 1 (`conv[5]`: the input element a kernel offset meets is origin - offset). A column
    past N gets an x origin far left of the input, so nothing is read for it.
    Depth words are read only for nd = 3 (1-D and 2-D convolutions have no depth)."""
    nd, at, tr, cbatch = conv[0], conv[4], conv[5], conv[6]
    w4 = width // 4
    dims = ["z", "y", "x"][3 - nd :]
    word = {d: i for i, d in enumerate(["z", "y", "x"])}  # (words per dim start at at + 1)
    L = [f"  let sxc = info[{at}];"]
    for d in dims:
        j = word[d]
        L.append(
            f"  let sx{d} = info[{at + 1 + j}]; let in{d} = info[{at + 4 + j}]; "
            f"let on{d} = info[{at + 7 + j}]; let st{d} = info[{at + 10 + j}]; "
            f"let pd{d} = info[{at + 13 + j}]; let dl{d} = info[{at + 16 + j}];"
        )
    L.append(f"  let bcol = col0 + 4 * (li % {w4});")
    for q in range(4):
        L.append("  " + " ".join(f"var i{d}{q} = 0;" for d in dims))
        dec = ["var o = bcol + " + str(q) + ";"]
        if cbatch:  # (column = (column batch, position))
            L.append(f"  var cbo{q} = 0;")
            dec.append(
                f"cbo{q} = (o / info[{at + 19}]) * info[{at + 20}]; o = o % info[{at + 19}];"
            )
        for d in reversed(dims):  # innermost (x) first; the outermost takes the rest
            dec.append(
                f"let p{d} = o;" if d == dims[0] else f"let p{d} = o % on{d}; o = o / on{d};"
            )
        if tr:
            dec += [f"i{d}{q} = p{d} + pd{d};" for d in dims]
        else:
            dec += [f"i{d}{q} = p{d} * st{d} - pd{d};" for d in dims]
        L.append("  { " + " ".join(dec) + " }")
        L.append(f"  if (bcol + {q} >= N) {{ ix{q} = -1073741824; }}")
        if not tr:
            base = "b_base + " + (f"cbo{q} + " if cbatch else "")
            L.append(f"  let cb{q} = {base}" + " + ".join(f"i{d}{q} * sx{d}" for d in dims) + ";")
    for r in range(reps):
        L.append(f"  let bk{r} = (li + {r * nt}) / {w4}; let sb{r} = bk{r} * {pad} + li % {w4};")
        L.append(f"  var vb{r}: vec4<f32>;")
    return L


def _conv_store_offsets(conv, nb, ntx, tn):
    """With `conv[7]` (ostore) C is written through strides (a transposed convolution's phase:
    every stride-th output position): the output's base for this workgroup's batch indices
    (c_out, from the batch strides at words at + 25..) and, for each of this invocation's
    columns, its offset (co{j}_{q}: the column's position decoded over the output grid, times
    the output's spatial strides) and whether it is inside N (cok{j}_{q})."""
    nd, at = conv[0], conv[4]
    dims = ["z", "y", "x"][3 - nd :]
    word = {d: i for i, d in enumerate(["z", "y", "x"])}
    L = ["  var c_out = info[12];"]
    if nb:
        L.append("  { var bb2 = bflat;")
        for d in range(nb - 1, -1, -1):
            w0 = INFO_BATCH + 4 * d
            L.append(
                f"    {{ let cd = bb2 % info[{w0}]; bb2 = bb2 / info[{w0}]; "
                f"c_out += cd * info[{at + 25 + d}]; }}"
            )
        L.append("  }")
    for j in range(tn // 4):
        for q in range(4):
            dec = [f"var o = col0 + 4 * (tx + {j * ntx}) + {q}; var off = 0;"]
            for d in reversed(dims):
                if d == dims[0]:
                    dec.append(f"off += o * info[{at + 22 + word[d]}];")
                else:
                    dec.append(f"off += (o % on{d}) * info[{at + 22 + word[d]}]; o = o / on{d};")
            L.append(
                f"  var co{j}_{q} = 0; let cok{j}_{q} = col0 + 4 * (tx + {j * ntx}) + {q} < N;"
            )
            L.append("  { " + " ".join(dec) + f" co{j}_{q} = off; }}")
    return L


def _conv_load(conv, reps, t, ind, st="f32"):
    """The implicit column matrix's rows of the K step at `t` (see _conv_operand): row k is
    (channel, kd, kh, kw) of the baked kernel box, each lane's input element tested against the
    input's extent (one unsigned compare a dim) and read, or 0."""
    nd, KD, KH, KW, _, tr, _, _ = conv
    dims = ["z", "y", "x"][3 - nd :]
    kk = {"z": KD, "y": KH, "x": KW}
    L = []
    for r in range(reps):
        L.append(f"{ind}{{ var k = ({t}) + bk{r};")
        # k = ((c * KD + kd) * KH + kh) * KW + kw: innermost first, every divisor baked
        for d in reversed(dims):
            L.append(f"{ind}  let k{d} = (k % {kk[d]}) * dl{d}; k = k / {kk[d]};")
        lanes = []
        if not tr:
            off = " + ".join(["k * sxc"] + [f"k{d} * sx{d}" for d in dims])
            L.append(f"{ind}  let koff = {off};")
        else:
            L.append(f"{ind}  let kc = b_base + k * sxc;")
        for q in range(4):
            if not tr:
                ok = " && ".join(f"u32(i{d}{q} + k{d}) < u32(in{d})" for d in dims)
                L.append(f"{ind}  let ok{q} = {ok};")
                idx = f"cb{q} + koff"
            else:  # (stride 1: the input element is origin - offset; a negative one is a
                # huge u32, past the input)
                ok = " && ".join(f"u32(i{d}{q} - k{d}) < u32(in{d})" for d in dims)
                L.append(f"{ind}  let ok{q} = {ok};")
                idx = "kc + " + " + ".join(f"(i{d}{q} - k{d}) * sx{d}" for d in dims)
            lanes.append(f"select(0.0, {_elem_of('b', f'select(0, {idx}, ok{q})', st)}, ok{q})")
        L.append(f"{ind}  vb{r} = vec4<f32>({', '.join(lanes)});")
        L.append(f"{ind}}}")
    return L


def _tile_stash(x, direct, reps, off, pad, ind, reg="v"):
    """Operand x's registers `reg`<x><r> into its workgroup tile at `off` (see _tile_operand)."""
    X = x.upper()
    if direct:
        return [f"{ind}{X}s[{off} + s{x}{r}] = {reg}{x}{r};" for r in range(reps)]
    return [
        ind
        + " ".join(
            f"{X}s[{off} + s{x}{r} + {q * pad}][q{x}{r}] = {reg}{x}{r}.{'xyzw'[q]};"
            for q in range(4)
        )
        for r in range(reps)
    ]


# ---- split-K: the partial products' sum ---------------------------------------------------------
@lru_cache(maxsize=64)
def splitk_sum(epi: str = "none", post: tuple | None = None, dual=None, rows=None) -> KernelSource:
    """C = alpha * sum_s P[s] + beta * E, or sum_s P[s] (+ E): the second half of a split-K GEMM
    (ops/matmul.py `_split_plan`). P is the (S, M, N) f32 partial products of the K-chunks,
    contiguous; C is (M, N) contiguous at an offset; E is read through its (m, n) strides. One
    invocation an output, the S partials summed in order (each partial is one chunk's sum, so
    the result is the chunked sum order of the fast kernel's, not a different rounding class).

    Info: [0] M*N  [1] S  [2] N  [3] C offset  [4] E offset  [5] E m-stride  [6] E n-stride
          [7] alpha bits  [8] beta bits
    `post` and `dual` as gemm_fast's. With `rows` (an info word: [rows] M, [rows + 1] the RS
    offset) the partial row sums Q (S, M) of gemm_fast's `rows` are summed too, by M more
    invocations, into RS (bound last).
    """
    assert rows is None or post is None
    bufs = [("p", "f32", "r")]
    if epi != "none":
        bufs.append(("e", "f32", "r"))
    if rows is not None:
        bufs.append(("q", "f32", "r"))
    if post is not None:  # (as gemm_fast's: a map fused into the store)
        p_expr, n_extra, p_at, p_sct = post
        bufs += [(f"r{k}", "f32", "r") for k in range(1, n_extra + 1)]
    bufs.append(("c", "f32", "w"))
    if dual is not None:
        assert post is not None
        bufs.append(("c2", "f32", "w"))
    if rows is not None:
        bufs.append(("rs", "f32", "w"))
    L = [
        header(bufs) + (helpers_for(p_expr) if post is not None else ""),
        _ENTRY_1D,
        "  let i = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * 256 + i32(lix);",
        "  let mn = info[0];",
    ]
    if rows is not None:
        L += [
            "  if (i >= mn) {",
            f"    let r = i - mn; let nm = info[{rows}];",
            "    if (r >= nm) { return; }",
            "    var acc = q[r];",
            "    for (var s = 1; s < info[1]; s++) { acc += q[s * nm + r]; }",
            f"    rs[info[{rows + 1}] + r] = acc;",
            "    return;",
            "  }",
        ]
    L += [
        "  if (i >= mn) { return; }",
        "  var acc = p[i];",
        "  for (var s = 1; s < info[1]; s++) { acc += p[s * mn + i]; }",
    ]
    if epi != "none" or post is not None:
        L.append("  let m = i / info[2]; let n = i % info[2];")
    if epi != "none":
        L.append("  let ev = e[info[4] + m * info[5] + n * info[6]];")
        if epi == "bias":
            L.append("  acc += ev;")
        else:
            L.append("  acc = bitcast<f32>(info[7]) * acc + bitcast<f32>(info[8]) * ev;")
    if dual is not None:
        L.append("  c[info[3] + i] = acc;")
        L.append(f"  c2[info[{dual}] + i] = {post_expr(p_expr, 'acc', p_at, n_extra, p_sct, 'n')};")
    elif post is not None:
        L.append(f"  c[info[3] + i] = {post_expr(p_expr, 'acc', p_at, n_extra, p_sct, 'n')};")
    else:
        L.append("  c[info[3] + i] = acc;")
    L.append("}")
    return trusted(KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs)))


_ENTRY_1D = ENTRY.format(wg=256)


# ---- GEMV: a few rows times a K-contiguous B (x @ w.T with w row-major) --------------------------
GEMV_LANES = 32  # invocations sharing one output column's dot product


def lane_tree(rm: int, lanes: int) -> list[str]:
    """WGSL lines summing, for each of `rm` rows, the `lanes` consecutive values a group of lanes
    left in `red[r * 256 + li]` (workgroups of 256): a barrier, then a halving tree; lane 0 of
    each group ends with the sum. Needs `li` (the local index) and `lane` (li % lanes)."""
    L = ["  workgroupBarrier();"]
    s = lanes // 2
    while s >= 1:
        L.append(f"  if (lane < {s}) {{")
        L += [f"    red[{r * 256} + li] += red[{r * 256} + li + {s}];" for r in range(rm)]
        L.append("  }")
        L.append("  workgroupBarrier();")
        s //= 2
    return L


def lane_sum(vals: list[str], lanes: int, subgroups: int = 0) -> tuple[list[str], list[str]]:
    """WGSL lines summing each value of `vals` over groups of `lanes` consecutive lanes of a
    workgroup of 256 (`li` the local index, `lane` = li % lanes, both i32; `red` a workgroup
    array of at least len(vals) * 256 f32), and the expressions that hold each sum at lane 0
    of every group afterwards. `subgroups` 0: `lane_tree` over `red`; 1 or 2 (the device's
    `subgroups`, the entry giving `sgs`): a butterfly of subgroupShuffleXor within each
    subgroup (offsets below min(lanes, SG_MAX) generated, in uniform control flow; one past the span
    min(sgs, lanes) is discarded), one slot a subgroup in `red`, one barrier, then every lane
    adds its group's lanes / span slots in order: one barrier where the tree takes
    log2(lanes) + 1 (kernels/rowops._sg_reduce does the same for the row ops)."""
    rm = len(vals)
    if not subgroups:
        L = [f"  red[{r * 256} + li] = {v};" for r, v in enumerate(vals)]
        return L + lane_tree(rm, lanes), [f"red[{r * 256} + li]" for r in range(rm)]
    L = [f"  var ls{r} = {v};" for r, v in enumerate(vals)]
    L.append(f"  let span = min(sgs, {lanes}u);")
    for o in sg_offsets(lanes):
        L.append("  {")
        L += [f"    let o{r} = subgroupShuffleXor(ls{r}, {o}u);" for r in range(rm)]
        L.append(
            f"    if ({o}u < span) {{ " + " ".join(f"ls{r} += o{r};" for r in range(rm)) + " }"
        )
        L.append("  }")
    L.append(f"  let nsub = {lanes}u / span; let slot0 = (u32(li) / {lanes}u) * nsub;")
    L.append(
        "  if (u32(lane) % span == 0u) { "
        + " ".join(f"red[{r * 256}u + slot0 + u32(lane) / span] = ls{r};" for r in range(rm))
        + " }"
    )
    L.append("  workgroupBarrier();")
    L.append("  " + " ".join(f"var ts{r} = red[{r * 256}u + slot0];" for r in range(rm)))
    L.append(
        "  for (var k = 1u; k < nsub; k++) { "
        + " ".join(f"ts{r} += red[{r * 256}u + slot0 + k];" for r in range(rm))
        + " }"
    )
    return L, [f"ts{r}" for r in range(rm)]


# the GEMVs' entry with the subgroup size (`sgs`), for `lane_sum` with subgroups
ENTRY_SG = ENTRY.replace(
    "@builtin(num_workgroups) nwg: vec3<u32>)",
    "@builtin(num_workgroups) nwg: vec3<u32>, @builtin(subgroup_size) sgs: u32)",
)


@lru_cache(maxsize=64)
def gemv_rows(nb: int, epi: str, rm: int, vec: int, st: str = "f32", cst: str | None = None,
              sg: int = 0, post: tuple | None = None, dual=None) -> KernelSource:  # fmt: skip
    """C (M, N) = A (M, K) @ B (K, N) for M <= rm (baked, 1-8) and B with unit K stride: each
    output is a dot product of A's row with one of w's rows, both contiguous. A workgroup of
    256 computes 256 / GEMV_LANES output columns for all rm rows: each column's lanes stride
    through K (`vec` = 4: 16-byte loads, needing K, offsets and row strides multiples of the
    values a load holds; 1: scalars), w's row read once for all rows, then a tree sum over the
    lanes in workgroup memory. Rows past M are clamped on load and not stored. `st`: the
    storage of A and B, "f32", "f16" or "bf16"; the halves with vec 4 are
    8 a vec4<u32> (f16: unpack2x16float; bf16: the top halves of f32s), with vec 1 scalars (f16
    needs `shader-f16`; bf16 reads its element's half of a u32 word). Sums are f32 either way.
    `cst`: C's (and the epilogue's E's) storage, by default `st`; bf16 C is stored a word (two columns) at a time by each
    even column's lane 0, so C's offset must be even and, where more than one row is stored,
    N too; "f32" C from bf16 operands leaves the rounding to the caller. Info words as the GEMM
    kernels (tiles along N = columns / (256 / GEMV_LANES), tiles along M = 1). `sg`: the
    device's `subgroups` for the lanes' sums (`lane_sum`; not with a bf16 C, whose stores read
    the next column's sum from the tree). `post` and `dual` as gemm_fast's (compile/fusion.py: a
    map fused into the store; an f32 C, no batch)."""
    T = GEMV_LANES
    nc = 256 // T
    cst = cst or st
    sg = 0 if cst == "bf16" else sg
    assert post is None or (nb == 0 and cst == "f32")
    assert dual is None or post is not None
    half, bf = st == "f16", st == "bf16"
    if vec == 4:
        vt, per = ("vec4<u32>", 8) if half or bf else ("vec4<f32>", 4)
    else:
        vt, per = ("u32" if bf else st), 1
    bufs = [("a", vt, "r"), ("b", vt, "r")]
    if epi != "none":  # (E is stored as C)
        bufs.append(("e", "u32" if cst == "bf16" else cst, "r"))
    if post is not None:
        p_expr, n_extra, p_at, p_sct = post
        bufs += [(f"r{k}", "f32", "r") for k in range(1, n_extra + 1)]
    bufs.append(("c", "u32" if cst == "bf16" else cst, "w"))
    if dual is not None:
        bufs.append(("c2", "f32", "w"))
    entry = (ENTRY_SG if sg else ENTRY).format(wg=256)
    L = [f"var<workgroup> red: array<f32, {rm * 256}>;", entry]
    L += _prologue("f32", nb, epi)
    sh = {1: "", 4: " >> 2u", 8: " >> 3u"}[per]
    L += [
        f"  let li = i32(lix); let col = li / {T}; let lane = li % {T};",
        f"  let n = tn * {nc} + col; let bn = (b_base + min(n, N - 1) * s_bn){sh};",
    ]
    at = "vec4<f32>" if vec == 4 else "f32"
    for r in range(rm):
        L.append(f"  let ar{r} = (a_base + min({r}, M - 1) * s_am){sh};")
        L.append(f"  var acc{r} = {at}(0.0);")
    kq = {1: "K", 4: "(K >> 2)", 8: "(K >> 3)"}[per]
    unpack = _bf16s if bf else _halves
    L.append(f"  for (var k = lane; k < {kq}; k += {T}) {{")
    if bf and vec == 1:
        L.append("    let bv = p_bf16_at(b[(bn + k) >> 1u], bn + k);")
    else:
        L.append("    let bv = b[bn + k];")
    if vec == 4 and (half or bf):
        L.append(f"    let b0 = {unpack('bv', 0)}; let b1 = {unpack('bv', 2)};")
        for r in range(rm):
            L.append(f"    {{ let av = a[ar{r} + k];")
            L.append(f"      acc{r} = fma({unpack('av', 0)}, b0, acc{r});")
            L.append(f"      acc{r} = fma({unpack('av', 2)}, b1, acc{r}); }}")
    elif bf:
        L += [
            f"    acc{r} = fma(p_bf16_at(a[(ar{r} + k) >> 1u], ar{r} + k), bv, acc{r});"
            for r in range(rm)
        ]
    elif half:
        L += [f"    acc{r} = fma(f32(a[ar{r} + k]), f32(bv), acc{r});" for r in range(rm)]
    else:
        L += [f"    acc{r} = fma(a[ar{r} + k], bv, acc{r});" for r in range(rm)]
    L.append("  }")
    vals = [f"dot(acc{r}, vec4<f32>(1.0))" if vec == 4 else f"acc{r}" for r in range(rm)]
    lines, sums = lane_sum(vals, T, sg)
    L += lines
    if cst == "bf16":  # an even column's lane 0 stores its value and the next column's
        L.append("  if (lane == 0 && col % 2 == 0 && n < N) {")
        for r in range(rm):
            lo = _bf16_epilogue(str(r), "n", f"red[{r * 256} + li]", epi)
            hi = _bf16_epilogue(str(r), "n + 1", f"red[{r * 256} + li + {T}]", epi)
            L.append(f"    if ({r} < M) {{")
            L.append(f"      var hi = 0u; if (n + 1 < N) {{ hi = p_bf16({hi}) << 16u; }}")
            L.append(f"      c[(c_base + {r} * N + n) >> 1u] = p_bf16({lo}) | hi;")
            L.append("    }")
    elif post is not None:  # (C f32: the fused map's value at row m, column n)
        L.append("  if (lane == 0 && n < N) {")
        for r in range(rm):
            v = _epi_value(str(r), "n", sums[r], "f32", cst, epi)
            fused = post_expr(p_expr, "v", p_at, n_extra, p_sct, "n")
            L.append(f"    if ({r} < M) {{ let m = {r}; let v = {v};")
            if dual is not None:
                L.append("      c[c_base + m * N + n] = v;")
                L.append(f"      c2[info[{dual}] + m * N + n] = {fused}; }}")
            else:
                L.append(f"      c[c_base + m * N + n] = {fused}; }}")
    else:
        L.append("  if (lane == 0 && n < N) {")
        for r in range(rm):
            store = _store_line(str(r), "n", sums[r], "f32", cst, cst, epi)
            L.append(f"    if ({r} < M) {{ {store} }}")
    L += ["  }", "}"]
    body = "\n".join(L) + "\n"
    head = (SG_ENABLE if sg == 2 else "") + header(bufs)
    return trusted(KernelSource(head + helpers_for(body) + body, "".join(m for _, _, m in bufs)))


def _halves(v: str, i: int) -> str:
    """The four halves in words i, i + 1 of vec4<u32> `v`, as a vec4<f32>."""
    return f"vec4<f32>(unpack2x16float({v}[{i}]), unpack2x16float({v}[{i + 1}]))"


def _bf16s(v: str, i: int) -> str:
    """The four bfloat16s in words i, i + 1 of vec4<u32> `v` (element 2k in word k's low half),
    as a vec4<f32>."""
    return f"p_bf16x4(vec2<u32>({v}[{i}], {v}[{i + 1}]))"


def _bf16_epilogue(m: str, n: str, val: str, epi: str) -> str:
    """The f32 value stored at C[m, n] for packed-bf16 operands: `val` plus the epilogue's
    E[m, n] (bf16, read from its word)."""
    if epi == "none":
        return val
    idx = f"(e_base + ({m}) * info[14] + ({n}) * info[15])"
    e = f"p_bf16_at(e[{idx} >> 1u], {idx})"
    return f"{val} + {e}" if epi == "bias" else f"alpha * {val} + beta * {e}"


GEMVN_COLS = 32  # output columns a workgroup of `gemv_cols` (8 vec4 groups x 32 K-slices)


@lru_cache(maxsize=64)
def gemv_cols(nb: int, epi: str, rm: int, st: str = "f32", cst: str | None = None) -> KernelSource:  # fmt: skip
    """C (M, N) = A (M, K) @ B (K, N) for M <= rm (baked, 1-8) and B with unit N stride
    (x @ w for a row-major w of shape (K, N), as GPT-2's Conv1D layers hold it): a workgroup of
    256 is 8 groups of 4 adjacent columns (vec4 loads of B's rows, coalesced) by 32 slices of K;
    each invocation sums its slice for all rm rows (A read as scalars through its strides), then
    the slices are summed by a tree in workgroup memory, one row at a time. Needs N, B's offset
    and row stride multiples of 4. `st`: the storage of A, B, C (and E), "f32", "f16" or "bf16"
    (B's four halves a vec2<u32>: unpack2x16float, or the top halves of f32s; f32 sums; bf16 C
    two words a group, so C's offset must be even). `cst`: C's and E's storage, by default
    `st` (bf16 operands: or "f32"). Info words as the GEMM kernels (tiles along N = columns /
    GEMVN_COLS, tiles along M = 1)."""
    half, bf = st == "f16", st == "bf16"
    cst = cst or st
    cw = "u32" if cst == "bf16" else cst
    bufs = [("a", "u32" if bf else st, "r"), ("b", "vec2<u32>" if half or bf else "vec4<f32>", "r")]
    if epi != "none":
        bufs.append(("e", cw, "r"))
    bufs.append(("c", cw, "w"))
    L = ["var<workgroup> red: array<vec4<f32>, 256>;", ENTRY.format(wg=256)]
    L += _prologue("f32", nb, epi)
    L += [
        "  let li = i32(lix); let g = li % 8; let s = li / 8;",
        f"  let n4 = tn * {GEMVN_COLS // 4} + g; let nq = N >> 2;",
        "  let bcol = (b_base >> 2u) + min(n4, nq - 1); let sbk4 = s_bk >> 2u;",
    ]
    for r in range(rm):
        L.append(f"  let ar{r} = a_base + min({r}, M - 1) * s_am;")
        L.append(f"  var acc{r} = vec4<f32>(0.0);")
    L.append("  for (var k = s; k < K; k += 32) {")
    if half or bf:
        L.append("    let bw = b[bcol + k * sbk4];")
        if bf:
            L.append("    let bv = p_bf16x4(bw);")
        else:
            L.append("    let bv = vec4<f32>(unpack2x16float(bw.x), unpack2x16float(bw.y));")
    else:
        L.append("    let bv = b[bcol + k * sbk4];")
    for r in range(rm):
        ai = f"ar{r} + k * s_ak"
        av = f"p_bf16_at(a[({ai}) >> 1u], {ai})" if bf else f"f32(a[{ai}])"
        L.append(f"    acc{r} = fma(vec4<f32>({av}), bv, acc{r});")
    L.append("  }")
    for r in range(rm):
        L.append(f"  red[li] = acc{r};")
        L.append("  workgroupBarrier();")
        step = 16
        while step >= 1:
            L.append(f"  if (s < {step}) {{ red[li] += red[li + {step * 8}]; }}")
            L.append("  workgroupBarrier();")
            step //= 2
        L.append(f"  if (s == 0 && n4 < nq && {r} < M) {{")
        L.append("    let v = red[li];")
        if cst == "bf16":
            vals = [
                _bf16_epilogue(str(r), f"(4 * n4 + {q})", f"v.{'xyzw'[q]}", epi) for q in range(4)
            ]
            L.append(f"    let o = (c_base + {r} * N + 4 * n4) >> 1u;")
            L.append(f"    c[o] = p_bf16({vals[0]}) | (p_bf16({vals[1]}) << 16u);")
            L.append(f"    c[o + 1] = p_bf16({vals[2]}) | (p_bf16({vals[3]}) << 16u);")
        else:
            for q in range(4):
                L.append(
                    "    "
                    + _store_line(str(r), f"(4 * n4 + {q})", f"v.{'xyzw'[q]}", "f32", cst, cst, epi)
                )
        L.append("  }")
        L.append("  workgroupBarrier();")
    L.append("}")
    body = "\n".join(L) + "\n"
    return trusted(
        KernelSource(header(bufs) + helpers_for(body) + body, "".join(m for _, _, m in bufs))
    )
