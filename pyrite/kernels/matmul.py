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

Measured on lavapipe (2-core llvmpipe), 1024^3 f32: tiled 7.4 GFLOP/s, direct (8x8 invocations,
4x4 registers) 4.4; the tiled kernel's barriers cost less than its reuse saves once there are
enough tiles to occupy the cores (the rule and the other shapes: ops/matmul.py `_choose`).
Not yet measured on the H200.

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

from .common import KernelSource, header

INFO_BATCH = 18  # first batch word
TILE = 64  # tiled kernel: output tile edge per workgroup
TK = 16  # tiled kernel: K step


def _prologue(ct: str, nb: int, epi: str) -> list[str]:
    """Flat workgroup id -> (tile column, tile row, batch) and each operand's base index."""
    L = ["  let w = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);",
         "  if (w >= info[5]) { return; }",
         "  let M = info[0]; let N = info[1]; let K = info[2];",
         "  let tn = w % info[3]; let rest = w / info[3]; let tm = rest % info[4];",
         "  let bflat = rest / info[4];",
         "  var a_base = info[6]; var b_base = info[9]; var e_base = info[13];",
         "  let c_base = info[12] + bflat * M * N;"]
    if nb:
        L.append("  var bb = bflat;")
        for d in range(nb - 1, -1, -1):
            w0 = INFO_BATCH + 4 * d
            L.append(f"  {{ let cd = bb % info[{w0}]; bb = bb / info[{w0}]; "
                     f"a_base += cd * info[{w0 + 1}]; b_base += cd * info[{w0 + 2}]; "
                     f"e_base += cd * info[{w0 + 3}]; }}")
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


def _store_line(m: str, n: str, val: str, ct: str, c_st: str, e_st: str, epi: str) -> str:
    """c[m, n] = epilogue(val); `m`, `n` are in range."""
    if epi == "none":
        v = val
    else:
        e = _ld(f"e[e_base + ({m}) * info[14] + ({n}) * info[15]]", e_st, ct)
        v = f"{val} + {e}" if epi == "bias" else f"alpha * {val} + beta * {e}"
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


ENTRY = ("@compute @workgroup_size({wg})\n"
         "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lix: u32,"
         " @builtin(num_workgroups) nwg: vec3<u32>) {{\n")


@lru_cache(maxsize=512)
def gemm_tiled(a_st: str, b_st: str, c_st: str, ct: str, a_lay: str, b_lay: str, nb: int,
               epi: str = "none", e_st: str = "f32") -> KernelSource:
    """64x64 tile per workgroup of 64 invocations, 8x8 outputs each, K steps of 16."""
    bufs = _buffers(a_st, b_st, c_st, e_st, epi)
    v4 = f"vec4<{ct}>"
    zero = "0.0" if ct == "f32" else "0"
    L = [header(bufs),
         f"var<workgroup> As: array<{v4}, {TK * TILE // 4}>;  // As[k*16 + m/4][m%4]",
         f"var<workgroup> Bs: array<{v4}, {TK * TILE // 4}>;  // Bs[k*16 + n/4][n%4]",
         ENTRY.format(wg=64)]
    L += _prologue(ct, nb, epi)
    L += ["  let li = i32(lix); let tx = li % 8; let ty = li / 8;",
          f"  let row0 = tm * {TILE}; let col0 = tn * {TILE};"]
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
    L.append("      if (row0 + am < M && t + ak < K) { va = "
             + _ld(f"a[{_a_index('row0 + am', 't + ak', a_lay)}]", a_st, ct) + "; }")
    L.append("      As[ak * 16 + am / 4][am % 4] = va;")
    if b_lay == "n":
        L.append(f"      let bk = e / {TILE}; let bn = e % {TILE};")
    else:
        L.append(f"      let bk = e % {TK}; let bn = e / {TK};")
    L.append(f"      var vb = {zero};")
    L.append("      if (col0 + bn < N && t + bk < K) { vb = "
             + _ld(f"b[{_b_index('t + bk', 'col0 + bn', b_lay)}]", b_st, ct) + "; }")
    L.append("      Bs[bk * 16 + bn / 4][bn % 4] = vb;")
    L.append("    }")
    L.append("    workgroupBarrier();")
    L.append(f"    for (var kk = 0; kk < {TK}; kk++) {{")
    L.append("      let a0 = As[kk * 16 + ty * 2]; let a1 = As[kk * 16 + ty * 2 + 1];")
    L.append("      let b0 = Bs[kk * 16 + tx * 2]; let b1 = Bs[kk * 16 + tx * 2 + 1];")
    comps = ["a0.x", "a0.y", "a0.z", "a0.w", "a1.x", "a1.y", "a1.z", "a1.w"]
    for i in range(8):
        L.append(f"      c{i}0 = {_fma(ct, f'{v4}({comps[i]})', 'b0', f'c{i}0')}; "
                 f"c{i}1 = {_fma(ct, f'{v4}({comps[i]})', 'b1', f'c{i}1')};")
    L.append("    }")
    L.append("    workgroupBarrier();")
    L.append("  }")
    # epilogue: row ty*8+i, columns tx*8 + 0..7 (c{i}0 then c{i}1)
    for i in range(8):
        L.append(f"  {{ let m = row0 + ty * 8 + {i};")
        L.append("    if (m < M) {")
        for j in range(8):
            val = f"c{i}{j // 4}.{'xyzw'[j % 4]}"
            L.append(f"      {{ let n = col0 + tx * 8 + {j}; if (n < N) {{ "
                     f"{_store_line('m', 'n', val, ct, c_st, e_st, epi)} }} }}")
        L.append("    }")
        L.append("  }")
    L.append("}")
    return KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs))


@lru_cache(maxsize=512)
def gemm_direct(a_st: str, b_st: str, c_st: str, ct: str, a_lay: str, b_lay: str, nb: int,
                epi: str = "none", e_st: str = "f32", tx: int = 16, ty: int = 4, rm: int = 4,
                rn: int = 4) -> KernelSource:
    """No barriers: invocation (x, y) of a TX x TY workgroup computes rows y*RM.., columns x*RN..
    of the workgroup's (TY*RM) x (TX*RN) tile, reading A and B from storage."""
    assert rn in (1, 4)
    bufs = _buffers(a_st, b_st, c_st, e_st, epi)
    acc_t = ct if rn == 1 else f"vec4<{ct}>"
    zero = "0.0" if ct == "f32" else "0"
    L = [header(bufs), ENTRY.format(wg=tx * ty)]
    L += _prologue(ct, nb, epi)
    L += [f"  let li = i32(lix); let lx = li % {tx}; let ly = li / {tx};",
          f"  let m0 = tm * {ty * rm} + ly * {rm}; let n0 = tn * {tx * rn} + lx * {rn};"]
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
            L.append(f"      {{ let n = n0 + {j}; if (n < N) {{ "
                     f"{_store_line('m', 'n', val, ct, c_st, e_st, epi)} }} }}")
        L.append("    }")
        L.append("  }")
    L.append("}")
    return KernelSource("\n".join(L) + "\n", "".join(m for _, _, m in bufs))
