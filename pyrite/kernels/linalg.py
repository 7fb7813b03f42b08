"""Dense linear algebra on batches of small-to-medium matrices: LU with partial pivoting (and the
triangular solves after it), Cholesky, Householder QR (and forming Q), two-sided Jacobi for
symmetric eigenproblems and one-sided (Hestenes) Jacobi for the SVD.

The shape of every kernel here
------------------------------
A *team* of TP invocations owns one matrix; a workgroup holds MPW teams (TP·MPW invocations, both
baked), so batches of tiny matrices fill the workgroup and large ones get a whole team. The
matrix lives in a contiguous work buffer in global memory (batch-major, row-major, `ld` floats a
row) that the op filled before the first dispatch; the team walks the algorithm's *steps* (an
elimination column, a reflector, a Jacobi round), each step a few phases separated by barriers,
and inside a phase each invocation takes every TP-th element of the phase's work.

A dispatch runs steps [s0, s1) from its info words, so the op splits a long factorisation into
several dispatches: lavapipe stops an invocation after 65,535 loop iterations in all (DESIGN.md),
and an n = 256 LU would loop ~n³/(3·TP) + O(n²) times in one. Everything a later step needs
(pivots, Householder scalars, Jacobi convergence state) is kept in global buffers, so a dispatch
boundary can fall between any two steps. `*_step_cost` below give each step's loop iterations
for one invocation (an upper bound: each loop counted as its trip count + 1) for the planner in
ops/linalg.py.

Sizes come from info words, not baked: eager code meets many shapes and a pipeline costs
milliseconds (ops/core.py has the measurement); the team shape is baked (a handful of variants).
Barriers are WGSL `storageBarrier()` (the work buffers) and `workgroupBarrier()` (the reduction
scratch); every barrier sits in uniform control flow: loops run to bounds from `info` (uniform),
and a team without a matrix (the batch's tail) or a converged matrix only skips the arithmetic.

Team reductions (pivot search, column norms, Jacobi dot products) go through workgroup memory
as a tree unrolled by the generator (log2(TP) barriers, no loop).
"""

from __future__ import annotations

from functools import lru_cache

from .common import KernelSource, header, helpers_for

ENTRY = (
    "@compute @workgroup_size({wg})\n"
    "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,"
    " @builtin(num_workgroups) nwg: vec3<u32>) {{\n"
    "  let wg_flat = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);\n"
    "  let l = i32(lid.x);\n"
    "  let team = l / {tp};\n"
    "  let t = l % {tp};\n"
    "  let b = wg_flat * {mpw} + team;\n"
    "  let ok = b < info[0];\n"
)

SB = "  storageBarrier();\n"
WB = "  workgroupBarrier();\n"


def _entry(tp: int, mpw: int) -> str:
    return ENTRY.format(wg=tp * mpw, tp=tp, mpw=mpw)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b) if a > 0 else 0


def _loop(n: int, step: int) -> int:
    """What lavapipe counts for a loop over `n` items taken every `step`-th: its iterations
    plus the exit test."""
    return _cdiv(n, step) + 1


def _nest(rows: int, rstep: int, cols: int, cstep: int) -> int:
    """The same for a loop over rows holding a loop over cols: each outer pass costs the inner
    loop's iterations + 2 (its exit test and the outer back edge), measured on lavapipe in
    main's 42a5890 (a 30,000 x 1 nest ran 21,845 = 65,535 / 3 passes), then the outer exit."""
    return _cdiv(rows, rstep) * (_cdiv(cols, cstep) + 2) + 1


def _tree(tp: int, combine: str, indent: str = "  ", lane: str = "t") -> str:
    """An unrolled tree over a group's `tp` slots of workgroup memory: at each level, slot `a`
    (the invocation's own, defined by the caller; `lane < off`) combines with slot
    `o = a + off`. `combine` is WGSL using `a` and `o`; the group's result ends in its first
    slot. Starts with a barrier, ends with one."""
    out = []
    off = tp // 2
    while off >= 1:
        out.append(f"{indent}workgroupBarrier();\n")
        out.append(f"{indent}if ({lane} < {off}) {{ let o = a + {off};\n{combine}{indent}}}\n")
        off //= 2
    out.append(f"{indent}workgroupBarrier();\n")
    return "".join(out)


def _in_workgroup(body: str, cap: int, tp: int, size: str) -> str:
    """The kernel body with the team's matrix held in workgroup memory (`cap` floats a team):
    loaded from W at the dispatch's start, stored back at its end, every `W[base + ...]`
    access redirected. `size` is the WGSL expression for the floats to move."""
    # the kernels' other buffers (pivots, rotations, convergence state) stay in global
    # memory, so each W barrier orders both kinds of memory
    body = body.replace("W[base + ", "sw[sb + ").replace(
        "storageBarrier();", "storageBarrier(); workgroupBarrier();"
    )
    head, sep, rest = body.partition("  for (var s = ")
    load = (
        f"  let sb = team * {cap};\n"
        f"  if (ok) {{ for (var e = t; e < {size}; e += {tp}) {{ sw[sb + e] = W[base + e]; }} }}\n"
        "  workgroupBarrier();\n"
    )
    store = (
        "  workgroupBarrier();\n"
        f"  if (ok) {{ for (var e = t; e < {size}; e += {tp}) {{ W[base + e] = sw[sb + e]; }} }}\n"
    )
    rest = rest.rstrip()
    assert rest.endswith("}")
    return head + load + sep + rest[:-1] + store + "}\n"


def smem_decl(cap: int, mpw: int) -> str:
    return f"var<workgroup> sw: array<f32, {cap * mpw}>;\n" if cap else ""


# ---- LU with partial pivoting, then the triangular solves ------------------------------------
# Work buffer W: (B, n, ld), ld = n + r: the matrix with r right-hand sides beside it. A
# dispatch runs steps [s0, s1) of one of three modes (info word 4), so the op can run the
# unblocked algorithm in one go or interleave blocked panels with pyrite's GEMM:
#   mode 0, eliminate column k = s (LAPACK getf2's right-looking order): pivot = first row of
#     largest |W[i, k]|, i >= k; swap whole rows k and p (all ld columns, as getrf's laswp);
#     scale the column below the pivot by its reciprocal; rank-1 update of rows i > k in
#     columns k < j < c1 (c1 = ld: the whole trailing block, right-hand sides included, so they
#     become L⁻¹·P·B; c1 = the panel's end in the blocked algorithm). A zero pivot is recorded
#     (info = k + 1, the first such k, as getrf) and the column left unscaled, as getf2 does, so
#     det is an exact 0 and no NaN appears in the factors.
#   mode 1, forward substitution with the panel's unit-lower L11 on its block row (the blocked
#     algorithm's TRSM, U12 = L11⁻¹·A12): step k = s, rows k < i < c1, columns c0 <= j < ld.
#   mode 2, back substitution with U over rows [c0, c1) on the right-hand sides (columns
#     n..ld-1), one row finished a step: at step s, kb = c1 - s, rows c0 <= i < kb subtract
#     U[i, kb]·X[kb, :] (when kb < c1) and row kb - 1, whose sum is then complete, divides by
#     its diagonal. Every element has one writer a step, so one barrier a step.
#   mode 3, apply the recorded row swaps (c1 of them a matrix) to columns c0 <= j < ld: step k
#     swaps rows k and piv[k] (lu_solve's P·B, and the permutation matrix of linalg.lu).
# The matrix may have m != n rows in modes 0 and 3 (torch's rectangular LU: min(m, n) steps).
# Info words: [0] B  [1] n  [2] ld  [3] r  [4] mode  [5] c0  [6] c1  [7] m  [8] s0  [9] s1.
# Outputs: piv (B, min(m, n)) i32, 0-based pivot rows; inf (B,) i32, getrf's info (mode 0).


def lu_step_cost(
    s: int, n: int, ld: int, mode: int, c0: int, c1: int, tp: int, tx: int, m: int = -1
) -> int:
    ty = tp // tx
    m = n if m < 0 else m
    if mode == 0:
        k = s
        rows = m - k - 1
        update = _nest(rows, ty, c1 - k - 1, tx)
        return _loop(m - k, tp) + _loop(ld, tp) + _loop(rows, tp) + update + 2
    if mode == 3:
        return _loop(ld - c0, tp) + 2
    if mode == 1:
        return _nest(c1 - s - 1, ty, ld - c0, tx) + 2
    kb = c1 - s
    return _nest(kb - c0, ty, ld - n, tx) + 2


@lru_cache(maxsize=64)
def lu_kernel(tp: int, mpw: int, tx: int, cap: int = 0) -> KernelSource:
    """The team's TP invocations split as (TP / tx) rows by tx columns in the 2-D phases (no
    integer division an element: lavapipe cannot vectorise it). `cap` > 0: the matrix is
    held in workgroup memory, `cap` floats a team (>= n·ld)."""
    wg = tp * mpw
    head = header([("W", "f32", "w"), ("piv", "i32", "w"), ("inf", "i32", "w")])
    pick = (
        "        if (rv[o] > rv[a] || (rv[o] == rv[a] && ri[o] < ri[a])) {\n"
        "          rv[a] = rv[o]; ri[a] = ri[o];\n"
        "        }\n"
    )
    body = f"""
  let n = info[1];
  let ld = info[2];
  let mode = info[4];
  let c0 = info[5];
  let c1 = info[6];
  let m = info[7];
  let pn = min(m, n);
  let base = select(0, b * m * ld, ok);
  let lead = team * {tp};
  let ty = t / {tx};
  let tx = t % {tx};
  for (var s = info[8]; s < info[9]; s++) {{
    if (mode == 0) {{
      let k = s;
      // pivot: first row of largest |W[i, k]|, i >= k (threads with no row offer -1)
      var best = -1.0;
      var bi = k;
      if (ok) {{
        for (var i = k + t; i < m; i += {tp}) {{
          let v = abs(W[base + i * ld + k]);
          if (v > best) {{ best = v; bi = i; }}
        }}
      }}
      // the scratch alternates between two halves by step, so a slow reader of this step's
      // result is never overtaken by the next step's writes (a tree's barriers lie between)
      let half = (k & 1) * {wg};
      let a = l + half;
      rv[a] = best;
      ri[a] = bi;
{_tree(tp, pick, "      ")}
      let p = ri[lead + half];
      let pv = rv[lead + half];
      if (ok) {{
        if (p != k) {{
          for (var j = t; j < ld; j += {tp}) {{
            let x = W[base + k * ld + j];
            W[base + k * ld + j] = W[base + p * ld + j];
            W[base + p * ld + j] = x;
          }}
        }}
        if (t == 0) {{
          piv[b * pn + k] = p;
          if (k == 0) {{ inf[b] = 0; }}
          if (pv == 0.0 && inf[b] == 0) {{ inf[b] = k + 1; }}
        }}
      }}
      storageBarrier();
      if (ok && pv != 0.0) {{
        let rcp = 1.0 / W[base + k * ld + k];
        for (var i = k + 1 + t; i < m; i += {tp}) {{
          W[base + i * ld + k] = W[base + i * ld + k] * rcp;
        }}
      }}
      storageBarrier();
      if (ok) {{
        for (var i = k + 1 + ty; i < m; i += {tp // tx}) {{
          let lik = W[base + i * ld + k];
          for (var j = k + 1 + tx; j < c1; j += {tx}) {{
            W[base + i * ld + j] = W[base + i * ld + j] - lik * W[base + k * ld + j];
          }}
        }}
      }}
      storageBarrier();
    }} else if (mode == 3) {{
      let k = s;
      let p = select(k, piv[b * c1 + k], ok);
      if (ok && p != k) {{
        for (var j = c0 + t; j < ld; j += {tp}) {{
          let x = W[base + k * ld + j];
          W[base + k * ld + j] = W[base + p * ld + j];
          W[base + p * ld + j] = x;
        }}
      }}
      storageBarrier();
    }} else if (mode == 1) {{
      let k = s;
      if (ok) {{
        for (var i = k + 1 + ty; i < c1; i += {tp // tx}) {{
          let lik = W[base + i * ld + k];
          for (var j = c0 + tx; j < ld; j += {tx}) {{
            W[base + i * ld + j] = W[base + i * ld + j] - lik * W[base + k * ld + j];
          }}
        }}
      }}
      storageBarrier();
    }} else {{
      let kb = c1 - s;
      if (ok) {{
        for (var i = c0 + ty; i < kb; i += {tp // tx}) {{
          let u = select(0.0, W[base + i * ld + min(kb, n - 1)], kb < c1);
          let d = W[base + i * ld + i];
          for (var c = n + tx; c < ld; c += {tx}) {{
            var x = W[base + i * ld + c];
            if (kb < c1) {{ x = x - u * W[base + kb * ld + c]; }}
            if (i == kb - 1) {{ x = x / d; }}
            W[base + i * ld + c] = x;
          }}
        }}
      }}
      storageBarrier();
    }}
  }}
}}
"""
    src = (
        head
        + f"var<workgroup> rv: array<f32, {2 * wg}>;\nvar<workgroup> ri: array<i32, {2 * wg}>;\n"
        + smem_decl(cap, mpw)
        + _entry(tp, mpw)
        + (_in_workgroup(body, cap, tp, "m * ld") if cap else body)
    )
    return KernelSource(src, "www")


# ---- Cholesky ------------------------------------------------------------------------------
# Work buffer W: (B, n, n), only its lower triangle read (as LAPACK potrf with uplo = 'L').
# Step k < n (right-looking, potf2's order): one invocation takes the square root of W[k, k],
# or records info = k + 1 (the leading minor of order k + 1 is not positive-definite: d <= 0
# or NaN) and the team does nothing more; then the column below is scaled by 1/W[k, k] and the
# trailing lower triangle gets the rank-1 update in columns j < c1 (c1 = n, or the panel's end
# in the blocked algorithm, where GEMM applies the rest). Step n zeroes the strict upper
# triangle. Info words: [0] B  [1] n  [2] c1  [3] s0  [4] s1.  Output: inf (B,) i32.


def cholesky_step_cost(s: int, n: int, c1: int, tp: int, tx: int) -> int:
    ty = tp // tx
    if s < n:
        rows = n - s - 1
        return _loop(rows, tp) + _nest(rows, ty, min(rows, c1 - s - 1), tx) + 2
    return _nest(n, ty, n, tx) + 2


@lru_cache(maxsize=64)
def cholesky_kernel(tp: int, mpw: int, tx: int) -> KernelSource:
    head = header([("W", "f32", "w"), ("inf", "i32", "w")])
    body = f"""
  let n = info[1];
  let c1 = info[2];
  let base = select(0, b * n * n, ok);
  let ty = t / {tx};
  let tx = t % {tx};
  for (var s = info[3]; s < info[4]; s++) {{
    if (s < n) {{
      let k = s;
      if (ok && t == 0) {{
        if (k == 0) {{ inf[b] = 0; }}
        if (inf[b] == 0) {{
          let d = W[base + k * n + k];
          if (d > 0.0 && !p_isnan(d)) {{
            W[base + k * n + k] = sqrt(d);
          }} else {{
            inf[b] = k + 1;
          }}
        }}
      }}
      storageBarrier();
      let f = ok && inf[b] == 0;
      if (f) {{
        let rcp = 1.0 / W[base + k * n + k];
        for (var i = k + 1 + t; i < n; i += {tp}) {{
          W[base + i * n + k] = W[base + i * n + k] * rcp;
        }}
      }}
      storageBarrier();
      if (f) {{
        for (var i = k + 1 + ty; i < n; i += {tp // tx}) {{
          let m = W[base + i * n + k];
          for (var j = k + 1 + tx; j <= min(i, c1 - 1); j += {tx}) {{
            W[base + i * n + j] = W[base + i * n + j] - m * W[base + j * n + k];
          }}
        }}
      }}
      storageBarrier();
    }} else {{
      if (ok) {{
        for (var i = ty; i < n; i += {tp // tx}) {{
          for (var j = i + 1 + tx; j < n; j += {tx}) {{
            W[base + i * n + j] = 0.0;
          }}
        }}
      }}
    }}
  }}
}}
"""
    src = head + helpers_for("p_isnan(") + _entry(tp, mpw) + body
    return KernelSource(src, "ww")


# ---- Householder QR, and forming Q -----------------------------------------------------------
# Work buffer W: (B, m, n); tau (B, kmax), kmax = min(m, n); Q (B, m, qc), identity on entry.
# Steps 0..kmax-1 (LAPACK geqr2's order): the team reduces ||W[k+1:, k]||², one invocation
# forms the reflector as dlarfg does (beta = -sign(alpha)·sqrt(alpha² + sigma), tau =
# (beta - alpha)/beta, v = x/(alpha - beta) with v[0] = 1 implicit; tau = 0 when sigma = 0), the
# team scales v into the column, then applies H = I - tau·v·vᵀ to the trailing columns.
# Steps kmax..2·kmax-1 (when qc > 0) apply H_kk, kk = kmax-1 down to 0, to Q's columns
# j >= kk (org2r's order: the columns left of kk are still those of I).
# Column work: the team is NG = TP/G groups of G invocations; a group takes a column, its
# invocations every G-th row, and a tree over the group sums the dot product vᵀ·W[:, j].
# Info words: [0] B  [1] m  [2] n  [3] qc  [4] s0  [5] s1.


def qr_step_cost(s: int, m: int, n: int, qc: int, tp: int, g: int) -> int:
    kmax = min(m, n)
    ng = tp // g
    if s < kmax:
        k = s
        cols = _cdiv(n - k - 1, ng) + 1
        return 2 * _loop(m - k - 1, tp) + cols * (2 * _loop(m - k - 1, g) + 2) + 2
    kk = 2 * kmax - 1 - s
    cols = _cdiv(qc - kk, ng) + 1
    return cols * (2 * _loop(m - kk - 1, g) + 2) + 2


@lru_cache(maxsize=64)
def qr_kernel(tp: int, mpw: int, g: int) -> KernelSource:
    wg = tp * mpw
    head = header([("W", "f32", "w"), ("tau", "f32", "w"), ("Q", "f32", "w")])
    add = "        rs[a] = rs[a] + rs[o];\n"
    # the column loop's dot product: a tree over the group when G > 1 (slots alternate halves
    # by iteration, so a slow reader is never overtaken)
    if g > 1:
        gtree = (
            f"        let a = l + (it & 1) * {wg};\n"
            "        rs[a] = w;\n"
            + _tree(g, "    " + add, "        ", "gl")
            + f"        w = rs[gbase + (it & 1) * {wg}];\n"
        )
    else:
        gtree = ""

    def apply(mat: str, first: str, nstart: str, ncols: str) -> str:
        # H_kk applied to column j of `mat`: w = mat[kk, j] + sum_i v_i mat[i, j]; subtract tau·v·w
        return f"""
      var it = 0;
      for (var j0 = {first}; j0 < {ncols}; j0 += {tp // g}) {{
        let j = j0 + grp;
        let valid = ok && j < {ncols} && tk != 0.0;
        var w = 0.0;
        if (valid) {{
          if (gl == 0) {{ w = {mat}[{mat}b + kk * {mat}ld + j]; }}
          for (var i = kk + 1 + gl; i < m; i += {g}) {{
            w = w + W[base + i * n + kk] * {mat}[{mat}b + i * {mat}ld + j];
          }}
        }}
{gtree}        if (valid) {{
          let tw = tk * w;
          if (gl == 0) {{ {mat}[{mat}b + kk * {mat}ld + j] = {mat}[{mat}b + kk * {mat}ld + j] - tw; }}
          for (var i = kk + 1 + gl; i < m; i += {g}) {{
            {mat}[{mat}b + i * {mat}ld + j] = {mat}[{mat}b + i * {mat}ld + j] - tw * W[base + i * n + kk];
          }}
        }}
        it++;
      }}
      storageBarrier();
"""

    body = f"""
  let m = info[1];
  let n = info[2];
  let qc = info[3];
  let kmax = min(m, n);
  let base = select(0, b * m * n, ok);
  let Wb = base;
  let Wld = n;
  let Qb = select(0, b * m * qc, ok);
  let Qld = qc;
  let gl = t % {g};
  let grp = t / {g};
  let gbase = l - gl;
  let lead = team * {tp};
  for (var s = info[4]; s < info[5]; s++) {{
    if (s < kmax) {{
      let k = s;
      let kk = k;
      var part = 0.0;
      if (ok) {{
        for (var i = k + 1 + t; i < m; i += {tp}) {{
          let x = W[base + i * n + k];
          part = part + x * x;
        }}
      }}
      let a = l + {wg} * 2;
      rs[a] = part;
{_tree(tp, add, "      ")}
      if (ok && t == 0) {{
        let sigma = rs[lead + {wg} * 2];
        let alpha = W[base + k * n + k];
        var tk = 0.0;
        var scal = 0.0;
        if (sigma != 0.0) {{
          let beta = select(sqrt(alpha * alpha + sigma), -sqrt(alpha * alpha + sigma), alpha >= 0.0);
          tk = (beta - alpha) / beta;
          scal = 1.0 / (alpha - beta);
          W[base + k * n + k] = beta;
        }}
        tau[b * kmax + k] = tk;
        hs[2 * team] = tk;
        hs[2 * team + 1] = scal;
      }}
      storageBarrier();
      workgroupBarrier();
      let tk = hs[2 * team];
      let scal = hs[2 * team + 1];
      if (ok && tk != 0.0) {{
        for (var i = k + 1 + t; i < m; i += {tp}) {{
          W[base + i * n + k] = W[base + i * n + k] * scal;
        }}
      }}
      storageBarrier();
{apply("W", "k + 1", "", "n")}
    }} else {{
      let kk = 2 * kmax - 1 - s;
      let tk = select(0.0, tau[b * kmax + kk], ok);
{apply("Q", "kk", "", "qc")}
    }}
  }}
}}
"""
    src = (
        head
        + f"var<workgroup> rs: array<f32, {3 * wg}>;\nvar<workgroup> hs: array<f32, {2 * mpw}>;\n"
        + _entry(tp, mpw)
        + body
    )
    return KernelSource(src, "www")


# ---- Jacobi: the parallel ordering and the convergence state -----------------------------------
# A sweep is N - 1 rounds (N = n rounded up to even); round r pairs the indices by the
# round-robin tournament (index 0 fixed, 1..N-1 rotating), so every pair (p, q) meets once a
# sweep and the N/2 pairs of a round are disjoint: their rotations commute and run in parallel.
# A pair holding the padding index N - 1 = n (odd n) is skipped.
# State per matrix, st (B, 3) i32 atomics: [0] converged, [1] rotations so far this sweep,
# [2] sweeps run. A sweep without a rotation marks the matrix converged; its later steps skip
# the arithmetic, and a workgroup whose matrices have all converged leaves the dispatch (checked
# at each sweep's start: three barriers). The op dispatches up to its sweep cap.
PAIR = """fn pair_of(r: i32, i: i32, nn: i32) -> vec2<i32> {
  let m = nn - 1;
  var p = 0;
  if (i > 0) { p = 1 + (r + i - 1) % m; }
  let q = 1 + (r + m - 1 - i) % m;
  return vec2<i32>(min(p, q), max(p, q));
}
"""


def _jacobi_head(buffers) -> str:
    """Bindings like common.header, with st (the convergence state) as atomics."""
    lines = []
    for i, (name, elem, mode) in enumerate(buffers):
        access = "read" if mode == "r" else "read_write"
        lines.append(f"@group(0) @binding({i}) var<storage, {access}> {name}: array<{elem}>;")
    lines.append(f"@group(0) @binding({len(buffers)}) var<storage, read> info: array<i32>;")
    return "\n".join(lines) + "\n"


def _jacobi_check(first_step: str) -> str:
    """At a dispatch's first step and each sweep's first round: leave when no matrix of this
    workgroup is still iterating (a uniform decision: workgroupUniformLoad)."""
    return f"""
    if (s == {first_step} || rnd == 0) {{
      if (l == 0) {{ atomicStore(&wact, 0u); }}
      workgroupBarrier();
      if (ok && t == 0) {{
        if (s == 0) {{
          atomicStore(&st[3 * b], 0);
          atomicStore(&st[3 * b + 1], 0);
          atomicStore(&st[3 * b + 2], 0);
        }}
        if (atomicLoad(&st[3 * b]) == 0) {{ atomicOr(&wact, 1u); }}
      }}
      storageBarrier();  // st as (re)initialised, for every invocation's read below
      workgroupBarrier();
      if (l == 0) {{ wgo = atomicLoad(&wact); }}
      if (workgroupUniformLoad(&wgo) == 0u) {{ break; }}
    }}
    let live = ok && atomicLoad(&st[3 * b]) == 0;
"""


def _each_rotation(tp: int, tx: int, inner: str) -> str:
    """For each pair of this invocation's rows of the round (i = ty, ty + tp/tx, ...) that
    rotates (sn != 0): its c, sn, p, q, and `inner` over the columns j = tx, tx + TX, ..."""
    return f"""    if (live) {{
      for (var i = ty; i < np; i += {tp // tx}) {{
        let sn = rot[rbase + 4 * i + 1];
        if (sn != 0.0) {{
          let c = rot[rbase + 4 * i];
          let pq = pair_of(rnd, i, nn);
          let p = pq.x;
          let q = pq.y;
          for (var j = tx; j < n; j += {tx}) {{
{inner}          }}
        }}
      }}
"""


def _sweep_end(tp: int) -> str:
    """The team's first invocation closes a sweep: no rotation in it -> converged."""
    return """
      if (live && t == 0 && rnd == nr - 1) {
        atomicAdd(&st[3 * b + 2], 1);
        if (atomicLoad(&st[3 * b + 1]) == 0) { atomicStore(&st[3 * b], 1); }
        atomicStore(&st[3 * b + 1], 0);
      }
"""


# Rotation thresholds (f32). eigh rotates a pair when |a_pq| > JACOBI_TOL·sqrt(|a_pp·a_qq|)
# and |a_pq| > JACOBI_TOL·||A||_F / n: the relative test of Demmel & Veselić with an absolute
# floor, below which an off-diagonal entry changes no eigenvalue by more than LAPACK's own
# backward error (~eps·||A||) and rounding noise would otherwise keep the sweeps going. The SVD
# rotates columns p, q when |a_p·a_q| > JACOBI_TOL·||a_p||·||a_q|| (their cosine) and
# |a_p·a_q| > (JACOBI_TOL·||A||_F)² (columns already at the noise level).
JACOBI_TOL = 2.0**-23


# Measured: an eigh round at n = 48 (TP 8) costs lavapipe ~395 iterations (the largest single
# dispatch that completed ran 166 rounds), and eigh_step_cost gives 393. A Jacobi step also
# runs a few storage atomics (the convergence state), which llvmpipe may lower to loops over
# the lanes; ATOMIC_COST is a margin for them.
ATOMIC_COST = 16


def eigh_step_cost(s: int, n: int, tp: int, tx: int) -> int:
    nn = n + (n & 1)
    pairs = nn // 2
    ty = tp // tx
    return _loop(pairs, tp) + 2 * _nest(pairs, ty, n, tx) + 3 + ATOMIC_COST


@lru_cache(maxsize=64)
def eigh_kernel(tp: int, mpw: int, tx: int, vectors: bool, cap: int = 0) -> KernelSource:
    """Two-sided cyclic Jacobi on a symmetric W (B, n, n), accumulating V (B, n, n) = identity
    on entry when `vectors`. Round phases: (1) each pair's rotation (Golub & Van Loan 8.4:
    theta = (a_qq - a_pp)/(2·a_pq), t = sign(theta)/(|theta| + sqrt(1 + theta²)), c =
    1/sqrt(1 + t²), s = t·c) into rot (B, N/2, 4) = (c, s, a_pp - t·a_pq, a_qq + t·a_pq);
    (2) rows p, q of W rotated; (3) columns p, q of W and V rotated, with the pair's own 2x2
    block set to its exact values (a_pq = 0). Info words: [0] B [1] n [2] s0 [3] s1 (a step is
    one round; nr = N - 1 rounds a sweep)."""
    bufs = [
        ("W", "f32", "w"),
        ("V", "f32", "w"),
        ("rot", "f32", "w"),
        ("st", "atomic<i32>", "w"),
        ("fro", "f32", "r"),
    ]
    vrot = (
        """
            let vp = V[base + j * n + p];
            let vq = V[base + j * n + q];
            V[base + j * n + p] = c * vp - sn * vq;
            V[base + j * n + q] = sn * vp + c * vq;"""
        if vectors
        else ""
    )
    # phase (2) on W's rows p, q; phase (3) on its columns (and V's), the 2x2 block exact
    rows = """\
            let wp = W[base + p * n + j];
            let wq = W[base + q * n + j];
            W[base + p * n + j] = c * wp - sn * wq;
            W[base + q * n + j] = sn * wp + c * wq;
"""
    cols = (
        """\
            if (j == p) {
              W[base + p * n + p] = rot[rbase + 4 * i + 2];
              W[base + p * n + q] = 0.0;
            } else if (j == q) {
              W[base + q * n + p] = 0.0;
              W[base + q * n + q] = rot[rbase + 4 * i + 3];
            } else {
              let wp = W[base + j * n + p];
              let wq = W[base + j * n + q];
              W[base + j * n + p] = c * wp - sn * wq;
              W[base + j * n + q] = sn * wp + c * wq;
            }"""
        + vrot
        + "\n"
    )
    body = f"""
  let n = info[1];
  let nn = n + (n & 1);
  let np = nn / 2;
  let nr = max(nn - 1, 1);
  let base = select(0, b * n * n, ok);
  let rbase = select(0, b * np * 4, ok);
  let ty = t / {tx};
  let tx = t % {tx};
  let thr = {JACOBI_TOL!r} * select(0.0, fro[b], ok) / f32(max(n, 1));
  for (var s = info[2]; s < info[3]; s++) {{
    let rnd = s % nr;
{_jacobi_check("info[2]")}
    if (live) {{
      var cnt = 0;
      for (var i = t; i < np; i += {tp}) {{
        let pq = pair_of(rnd, i, nn);
        let p = pq.x;
        let q = pq.y;
        var c = 1.0;
        var sn = 0.0;
        var dp = 0.0;
        var dq = 0.0;
        if (q < n) {{
          let app = W[base + p * n + p];
          let aqq = W[base + q * n + q];
          let apq = W[base + p * n + q];
          dp = app;
          dq = aqq;
          if (abs(apq) > thr && abs(apq) > {JACOBI_TOL!r} * sqrt(abs(app * aqq))) {{
            let th = (aqq - app) / (2.0 * apq);
            let at = abs(th);
            let root = select(sqrt(at * at + 1.0), at, at > 1e18);
            let tt = select(-1.0, 1.0, th >= 0.0) / (at + root);
            c = 1.0 / sqrt(tt * tt + 1.0);
            sn = tt * c;
            dp = app - tt * apq;
            dq = aqq + tt * apq;
            cnt++;
          }}
        }}
        rot[rbase + 4 * i] = c;
        rot[rbase + 4 * i + 1] = sn;
        rot[rbase + 4 * i + 2] = dp;
        rot[rbase + 4 * i + 3] = dq;
      }}
      if (cnt > 0) {{ atomicAdd(&st[3 * b + 1], cnt); }}
    }}
    storageBarrier();
{_each_rotation(tp, tx, rows)}    }}
    storageBarrier();
{_each_rotation(tp, tx, cols)}{_sweep_end(tp)}
    }}
    storageBarrier();
  }}
}}
"""
    src = (
        _jacobi_head(bufs)
        + PAIR
        + "var<workgroup> wact: atomic<u32>;\nvar<workgroup> wgo: u32;\n"
        + smem_decl(cap, mpw)
        + _entry(tp, mpw)
        + (_in_workgroup(body, cap, tp, "n * n") if cap else body)
    )
    return KernelSource(src, "wwwwr")


def svd_step_cost(s: int, m: int, n: int, tp: int, g: int, vectors: bool) -> int:
    nn = n + (n & 1)
    pairs = nn // 2
    ng = tp // g
    per_pair = 2 * _loop(m, g) + (_loop(n, g) if vectors else 0) + 2
    return (_cdiv(pairs, ng) + 1) * per_pair + 3 + ATOMIC_COST


@lru_cache(maxsize=64)
def svd_kernel(tp: int, mpw: int, g: int, vectors: bool) -> KernelSource:
    """One-sided (Hestenes) Jacobi on the columns of W (B, m, n), m >= n, accumulating V
    (B, n, n) = identity on entry when `vectors`. A round: each pair (p, q) of columns is taken
    by a group of G invocations (NG = TP/G groups, a pair loop when there are more pairs), which
    sums alpha = ||a_p||², beta = ||a_q||², gamma = a_p·a_q over its rows (a tree over the group),
    and rotates both columns (and V's) by the Jacobi rotation of [[alpha, gamma], [gamma, beta]],
    after which a_p ⟂ a_q. At convergence the column norms are the singular values (unsorted)
    and W's columns are U·S. Info words: [0] B [1] m [2] n [3] s0 [4] s1."""
    wg = tp * mpw
    bufs = [("W", "f32", "w"), ("V", "f32", "w"), ("st", "atomic<i32>", "w"), ("fro", "f32", "r")]
    if g > 1:
        comb = "          r1[a] = r1[a] + r1[o]; r2[a] = r2[a] + r2[o]; r3[a] = r3[a] + r3[o];\n"
        gtree = (
            f"        let a = l + (it & 1) * {wg};\n"
            "        r1[a] = al; r2[a] = be; r3[a] = ga;\n"
            + _tree(g, comb, "        ", "gl")
            + f"        let h = gbase + (it & 1) * {wg};\n"
            "        al = r1[h]; be = r2[h]; ga = r3[h];\n"
        )
    else:
        gtree = ""
    vrot = (
        f"""
          for (var r = gl; r < n; r += {g}) {{
            let vp = V[vbase + r * n + p];
            let vq = V[vbase + r * n + q];
            V[vbase + r * n + p] = c * vp - sn * vq;
            V[vbase + r * n + q] = sn * vp + c * vq;
          }}"""
        if vectors
        else ""
    )
    body = f"""
  let m = info[1];
  let n = info[2];
  let nn = n + (n & 1);
  let np = nn / 2;
  let nr = max(nn - 1, 1);
  let base = select(0, b * m * n, ok);
  let vbase = select(0, b * n * n, ok);
  let gl = t % {g};
  let grp = t / {g};
  let gbase = l - gl;
  let f = {JACOBI_TOL!r} * select(0.0, fro[b], ok);
  let floor2 = f * f;
  for (var s = info[3]; s < info[4]; s++) {{
    let rnd = s % nr;
{_jacobi_check("info[3]")}
    var cnt = 0;
    var it = 0;
    for (var i0 = 0; i0 < np; i0 += {tp // g}) {{
      let i = i0 + grp;
      let pq = pair_of(rnd, min(i, np - 1), nn);
      let p = pq.x;
      let q = pq.y;
      let valid = live && i < np && q < n;
      var al = 0.0;
      var be = 0.0;
      var ga = 0.0;
      if (valid) {{
        for (var r = gl; r < m; r += {g}) {{
          let x = W[base + r * n + p];
          let y = W[base + r * n + q];
          al = al + x * x;
          be = be + y * y;
          ga = ga + x * y;
        }}
      }}
{gtree}      if (valid && abs(ga) > floor2 && abs(ga) > {JACOBI_TOL!r} * sqrt(al) * sqrt(be)) {{
        let th = (be - al) / (2.0 * ga);
        let at = abs(th);
        let root = select(sqrt(at * at + 1.0), at, at > 1e18);
        let tt = select(-1.0, 1.0, th >= 0.0) / (at + root);
        let c = 1.0 / sqrt(tt * tt + 1.0);
        let sn = tt * c;
        for (var r = gl; r < m; r += {g}) {{
          let x = W[base + r * n + p];
          let y = W[base + r * n + q];
          W[base + r * n + p] = c * x - sn * y;
          W[base + r * n + q] = sn * x + c * y;
        }}{vrot}
        if (gl == 0) {{ cnt++; }}
      }}
      it++;
    }}
    if (cnt > 0) {{ atomicAdd(&st[3 * b + 1], cnt); }}
    storageBarrier();
{_sweep_end(tp)}
    storageBarrier();
  }}
}}
"""
    src = (
        _jacobi_head(bufs)
        + PAIR
        + f"var<workgroup> r1: array<f32, {2 * wg}>;\nvar<workgroup> r2: array<f32, {2 * wg}>;\n"
        + f"var<workgroup> r3: array<f32, {2 * wg}>;\n"
        + "var<workgroup> wact: atomic<u32>;\nvar<workgroup> wgo: u32;\n"
        + _entry(tp, mpw)
        + body
    )
    return KernelSource(src, "wwwr")
