"""torch.linalg's factorisations on the device: LU (solve, inv, det, slogdet), Cholesky,
Householder QR, Jacobi eigh and SVD, batched over leading dims (kernels/linalg.py).

Each op validates like torch (float32 only: torch's CPU refuses half too; square where the
algorithm needs it), copies its input into a contiguous float32 work buffer, dispatches the
factorisation's steps in as many dispatches as the loop budget needs (`_spans`) and finishes
with ordinary pyrite ops (diagonals, products, sorting, triangles). The `_ex` variants return
LAPACK's `info` as an int32 tensor without reading it back; the others read it (one small
readback, as torch's CPU ops do) and raise `LinAlgError` for singular or non-positive-definite
input with torch's messages.

Paths and the sizes they handle well:
- batches of small matrices (n up to ~64): one team a matrix, many matrices a workgroup, every
  factorisation in one or a few dispatches; on lavapipe 8-invocation workgroups (`_team_cpu`);
- LU above n = 64 and Cholesky above 128: blocked, panels in the kernel and the trailing
  updates through pyrite's GEMM (all cores / SMs); QR, eigh and the SVD stay unblocked (one
  team a matrix), so a single large QR (n >= 256) or Jacobi eigh/SVD (n >= 128) runs on one
  core of lavapipe or one SM of a GPU and is slow: O(n³) a sweep, 8-10 sweeps.
Measured (min of 10, ms, with the readback; torch 2.13 CPU with 2 threads, min of 15):
    lavapipe (this 2-core CI box)  pyrite   torch CPU          H200 (wgpu-native)  torch CUDA
    solve 1000 x 8x8 (1 rhs)         6.7      0.31                 0.56              0.20
    solve 256x256 (1 rhs)           31        0.28                 5.5               0.53
    inv 256x256                     71        1.1                  7.1               0.66
    eigh 64x64                      45        0.13                 9.2               0.96
    svd 64x64                       41        0.32                 9.7               1.24
    eigh 1000 x 8x8                 69       10.8                  2.4               0.23
    cholesky 1000 x 8x8              2.5      0.19                 0.69              0.10
    qr 1000 x 8x8                   11.7      1.16                 0.68             51.9
On lavapipe every kernel here is bound by llvmpipe's per-lane loads and stores (a factorisation
step moves each element it touches through memory), not by arithmetic; on the H200 the single
large factorisations are bound by running on one SM.

Accuracy: the same class as LAPACK in float32 (tests/test_linalg.py measures both against
float64: solve/inv within 0.1·n·u·κ, LAPACK float32 0.06; eigenvalues 0.5·n·u·||A||, LAPACK
0.9; singular values 1.6·n·u·||A||, LAPACK 0.5; u = 2⁻²⁴).
"""

from __future__ import annotations

import math

from .. import backend
from .. import dtypes as D
from ..errors import LinAlgError, ShapeError
from ..kernels import linalg as K
from ..kernels.common import fold_grid
from ..tensor import Tensor
from .core import broadcast_shapes, empty, max_loop_iterations
from .elementwise import as_tensor_arg


# ---- named results (torch.return_types.*) ---------------------------------------------------
class _Result(tuple):
    _fields: tuple = ()
    _name = ""

    def __new__(cls, *values):
        return tuple.__new__(cls, values)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(self._fields, self))
        return f"pyrite.return_types.{self._name}(\n{body})"


def _result_type(name, fields):
    cls = type(name, (_Result,), {"_fields": tuple(fields), "_name": name, "__slots__": ()})
    for k, f in enumerate(fields):
        setattr(cls, f, property(lambda self, k=k: self[k]))
    return cls


linalg_inv_ex = _result_type("linalg_inv_ex", ("inverse", "info"))
linalg_solve_ex = _result_type("linalg_solve_ex", ("result", "info"))
linalg_cholesky_ex = _result_type("linalg_cholesky_ex", ("L", "info"))
linalg_slogdet = _result_type("linalg_slogdet", ("sign", "logabsdet"))
slogdet_result = _result_type("slogdet", ("sign", "logabsdet"))
linalg_qr = _result_type("linalg_qr", ("Q", "R"))
qr_result = _result_type("qr", ("Q", "R"))
linalg_eigh = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
linalg_svd = _result_type("linalg_svd", ("U", "S", "Vh"))
svd_result = _result_type("svd", ("U", "S", "V"))
linalg_lstsq = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
linalg_lu_factor = _result_type("linalg_lu_factor", ("LU", "pivots"))
linalg_lu_factor_ex = _result_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
linalg_lu = _result_type("linalg_lu", ("P", "L", "U"))
lu_unpack_result = _result_type("lu_unpack", ("P", "L", "U"))


# ---- argument checks (torch's wording) ------------------------------------------------------
def _float_input(A, name: str) -> Tensor:
    A = as_tensor_arg(A)
    if A.dtype.kind != "f":
        raise TypeError(
            f"pyrite: {name}: Expected a floating point tensor as input. Got {A.dtype!r}"
        )
    if A.dtype is not D.float32:
        # torch's CPU kernels refuse half and bfloat16 too ("Low precision dtypes not supported")
        raise TypeError(
            f"pyrite: {name}: Low precision dtypes not supported. Got {A.dtype!r} "
            "(convert with .float(); pyrite's linear algebra computes in float32)"
        )
    return A


def _matrix_input(A, name: str) -> Tensor:
    A = _float_input(A, name)
    if A.ndim < 2:
        raise ShapeError(
            f"pyrite: {name}: The input tensor A must have at least 2 dimensions "
            f"(got shape {tuple(A._shape)})."
        )
    return A


def _square_input(A, name: str) -> Tensor:
    A = _matrix_input(A, name)
    if A._shape[-1] != A._shape[-2]:
        raise ShapeError(
            f"pyrite: {name}: A must be batches of square matrices, but they are "
            f"{A._shape[-2]} by {A._shape[-1]} matrices (shape {tuple(A._shape)})"
        )
    return A


# ---- dispatch ---------------------------------------------------------------------------------
def _spans(cost, nsteps: int, fixed: int = 8, first: int = 0) -> list:
    """[(s0, s1), ...]: consecutive ranges of the steps first..nsteps-1 whose summed loop cost
    for one invocation (`cost(s)`, plus `fixed` for the dispatch) stays within the device's
    loop budget."""
    limit = max_loop_iterations()
    spans = []
    s0, acc = first, fixed
    for s in range(first, nsteps):
        c = cost(s)
        if fixed + c > limit:
            raise NotImplementedError(
                f"pyrite: one step of this factorisation loops {c:,} times in an invocation, "
                f"past this device's loop budget ({limit:,}); the matrix is too large for it"
            )
        if acc + c > limit:
            spans.append((s0, s))
            s0, acc = s, fixed
        acc += c
    if nsteps > s0 or not spans:
        spans.append((s0, nsteps))
    return spans


def _pow2(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


# Teams: TP invocations a matrix, MPW matrices a workgroup of TP·MPW <= 256 invocations.
# On GPU adapters the team grows with the widest phase's work (a quarter of the matrix's
# elements, at least 8, at most 256) and small teams share 64-invocation workgroups. H200
# through wgpu-native, min of 5, ms with the readback, this rule / the best fixed TP/MPW tried
# (1/64, 8/8, 32/2, 64/1, 256/1): solve 1000x8x8 0.56 / 0.52 (32/2); 100x32x32 0.69 / 0.63
# (256/1); 256x256 5.46 / 5.82; inv 256 7.11 / 6.78; eigh 1000x8x8 2.42 / 1.84 (64/1); eigh
# 64x64 11.4 / 11.2; svd 64x64 9.66 / 7.20 (256/1); qr 256 18.2 / 18.1; cholesky 256 3.16 /
# 2.67. (torch CUDA on the same: solve 1000x8x8 0.20, 256 0.53, eigh 64 0.96, svd 64 1.24.)
# CPU adapters take _team_cpu's rule below.
TEAM_MAX = 256
WG_MIN = 64


FORCE_TEAM = None  # (TP, MPW): benchmarks and tests
FORCE_SMEM = None  # True / False: hold the matrix in workgroup memory or not (benchmarks)


def _smem_cap(floats: int, mpw: int, extra_bytes: int) -> int:
    """Floats a team may hold in workgroup memory for a matrix of `floats`, or 0 (then the
    kernel works on the global work buffer). Measured for eigh (min of 5, ms, global /
    workgroup memory): H200 through wgpu-native, 64x64: 11.4 / 9.2; lavapipe, 64x64 (TP 8):
    52 / 187 (llvmpipe's workgroup memory is slower than its storage buffers). So GPU
    adapters hold the matrix when it fits, CPU adapters never."""
    if FORCE_SMEM is False:
        return 0
    if FORCE_SMEM is None and backend.current().adapter_type == "CPU":
        return 0
    cap = _pow2(max(floats, 64))
    limit = backend.current().limits.get("max-compute-workgroup-storage-size", 16384)
    if cap * mpw * 4 + extra_bytes > limit:
        return 0
    return cap


def _team(work: int, batch: int) -> tuple[int, int]:
    """(TP, MPW) for a matrix whose widest phase has `work` independent items."""
    if FORCE_TEAM is not None:
        return FORCE_TEAM
    if backend.current().adapter_type == "CPU":
        return _team_cpu(batch)
    tp = min(TEAM_MAX, max(8, _pow2(work)))
    mpw = max(1, min(WG_MIN // tp, _pow2(batch)))
    return tp, mpw


# On CPU adapters every kernel family ran fastest with 8-invocation workgroups (one 256-bit
# SIMD row of f32 lanes): lavapipe, 2 cores, min of 7, ms (TP/MPW):
#   solve 1000x8x8:  1/8 4.9 | 1/64 5.3 | 2/4 8.5 | 4/2 13.5
#   solve 100x32x32: 1/8 15.1 | 2/4 15.2 | 4/2 18.8 | 8/1 26.5 | 1/64 16.3
#   solve 10x64x64:  1/8 12.9 | 2/4 13.0 | 4/2 9.8 | 8/1 13.1 | 16/1 16.7
#   solve 64x64:     1/1 8.0 | 4/1 3.5 | 8/1 2.8 | 16/1 3.5 | 32/1 4.3
#   solve 256x256:   4/1 115 | 8/1 74 | 16/1 80 | 32/1 90 | 64/1 96  (unblocked)
#   eigh 1000x8x8:   1/8 71.9 | 2/4 70.1 | 4/2 89.7;  eigh 64x64: 4/1 63 | 8/1 55 | 16/1 90
#   svd 64x64: 4/1 46 | 8/1 35 | 16/1 35;  qr 1000x8x8: 1/8 9.8 | 2/4 12.9 | 8/8 23.4
#   cholesky 1000x8x8: 1/8 2.6 | 2/4 3.4;  cholesky 256x256: 8/1 31.6 | 16/1 34.1 | 32/1 39.2
# Barriers cost per invocation there (it runs a group's invocations in turn), so the
# narrowest team that still leaves >= CPU_MIN_WORKGROUPS workgroups wins.
# (Holding the matrix in workgroup memory was slower there: eigh 64x64 187 ms vs 52 ms.)
CPU_WG = 8
CPU_MIN_WORKGROUPS = 4


def _team_cpu(batch: int) -> tuple[int, int]:
    tp = 1
    while tp < CPU_WG and -(-batch // (CPU_WG // tp)) < CPU_MIN_WORKGROUPS:
        tp *= 2
    return tp, CPU_WG // tp


def _run(src, bufs, words, batch: int, mpw: int, spans):
    dev = backend.current()
    grid = fold_grid(-(-batch // mpw))
    for s0, s1 in spans:
        dev.dispatch(src, bufs, [batch, *words, s0, s1], grid)


def _read_info(info: Tensor):
    """(flat batch index, value) of the first nonzero info, or None (reads info back)."""
    if info.numel() == 0:
        return None
    flat = info.reshape(-1).numpy()
    bad = flat.nonzero()[0]
    if len(bad) == 0:
        return None
    return int(bad[0]), int(flat[bad[0]])


def _batch_prefix(A: Tensor, index: int) -> str:
    return f"(Batch element {index}): " if A.ndim > 2 else ""


# ---- LU ------------------------------------------------------------------------------------
def _lu_work(A: Tensor, B: Tensor | None, batch: tuple) -> Tensor:
    """The work buffer (*batch, n, n + r) = [A | B], both broadcast to `batch`."""
    n = A._shape[-1]
    r = 0 if B is None else B._shape[-1]
    W = empty(batch + (n, n + r), D.float32)
    if r == 0:
        W.copy_(A)
    else:
        W[..., :n].copy_(A)
        W[..., n:].copy_(B)
    return W


# Blocked LU. Above LU_BLOCK_MIN, the factorisation runs panel by panel (LU_BLOCK columns):
# the kernel factors the panel (mode 0, its updates confined to the panel's columns, swaps on
# whole rows), solves the block row with the panel's L11 (mode 1), and pyrite's GEMM applies
# the trailing update A22 -= L21·U12, right-hand sides included; the back substitution runs
# the same way from the bottom block up (mode 2 on the diagonal block, GEMM for the rows above).
# The n³ work then runs in the GEMM (all cores and its register tiles) instead of one team
# streaming the matrix through memory. Measured (min of 5, ms, unblocked / blocked, 32-column
# panels; lavapipe = this 2-core CI box, H200 through wgpu-native, both with the readback):
#   lavapipe solve: 64 2.7 / 3.1 | 96 6.2 / 5.3 | 128 12.4 / 8.3 | 256 73.5 / 25.7 |
#            512 536 / 104 | 10x128x128 63.7 / 32.0 | 100x64x64 62.0 / 50.5
#   lavapipe inv: 128 35.2 / 14.9 | 256 261 / 59.8;  panels of 16 / 64 at 256: 24.8 / 35.9
#   H200 solve: 64 0.95 / 1.22 | 256 7.05 / 5.46;  inv 256: 18.6 / 7.1
#   lavapipe cholesky (batch of 2): 64 2.0 / 4.0 | 100 9.1 / 11.5 | 130 19.1 / 17.1 |
#            256 132 / 57;  H200 cholesky 256: 3.09 / 3.16
# At 256 on lavapipe ~80% of the blocked solve is the panel kernels (one team, one core); a
# recursive panel or an inverted-L11 TRSM through GEMM would be the next step.
LU_BLOCK_MIN = 64
CHOL_BLOCK_MIN = 128
LU_BLOCK = 32
FORCE_BLOCKED = None  # True / False: benchmarks and tests


def _lu(W: Tensor, n: int, back_only: bool = False):
    """Factor the work buffer (*batch, m, ld) in place (its first n columns; ld > n only for a
    square system, whose right-hand sides are then solved for); returns (piv (*batch,
    min(m, n)) int32, 0-based, info (*batch,) int32). `back_only`: W's first n columns are
    already upper triangular; only the back substitution runs (piv and info not written)."""
    batch_shape = W._shape[:-2]
    m, ld = W._shape[-2], W._shape[-1]
    r = ld - n
    kmin = min(m, n)
    nb = math.prod(batch_shape)
    piv = empty(batch_shape + (kmin,), D.int32)
    info = empty(batch_shape, D.int32)
    if nb == 0:
        return piv, info
    if kmin == 0:
        info.fill_(0)
        return piv, info
    tp, mpw = _team(max(m * ld // 4, m), nb)
    tx = min(tp, 32)
    src = K.lu_kernel(tp, mpw, tx)
    bufs = [W._storage.buffer, piv._storage.buffer, info._storage.buffer]

    def run(mode, c0, c1, first, last):
        cost = lambda s: K.lu_step_cost(s, n, ld, mode, c0, c1, tp, tx, m)  # noqa: E731
        words = [n, ld, r, mode, c0, c1, m]
        _run(src, bufs, words, nb, mpw, _spans(cost, last, first=first))

    blocked = kmin > LU_BLOCK_MIN if FORCE_BLOCKED is None else FORCE_BLOCKED
    step = LU_BLOCK if blocked else kmin
    if not back_only:
        for j0 in range(0, kmin, step):
            j1 = min(j0 + step, kmin)
            if j1 == kmin:  # the last panel: the kernel updates whatever trails it
                run(0, 0, ld, j0, j1)
                continue
            run(0, 0, j1, j0, j1)
            run(1, j1, j1, j0, j1)
            _gemm_update(W[..., j1:, j1:], W[..., j1:, j0:j1], W[..., j0:j1, j1:])
    if r:
        for i1 in range(n, 0, -step):
            i0 = max(0, i1 - step)
            if i1 < n:
                _gemm_update(W[..., i0:i1, n:], W[..., i0:i1, i1:n], W[..., i1:n, n:])
            run(2, i0, i1, 0, i1 - i0)
    return piv, info


def _swap_rows(W: Tensor, piv: Tensor, n: int, c0: int):
    """Apply the row swaps piv (*batch, k) (0-based, in order) to W's columns c0.. in place."""
    batch_shape = W._shape[:-2]
    m, ld = W._shape[-2], W._shape[-1]
    nb = math.prod(batch_shape)
    k = piv._shape[-1]
    if nb == 0 or k == 0 or ld == c0:
        return
    tp, mpw = _team(ld - c0, nb)
    src = K.lu_kernel(tp, mpw, min(tp, 32))
    piv = piv.contiguous()
    info = empty((nb,), D.int32)
    cost = lambda s: K.lu_step_cost(s, n, ld, 3, c0, k, tp, min(tp, 32), m)  # noqa: E731
    bufs = [W._storage.buffer, piv._storage.buffer, info._storage.buffer]
    _run(src, bufs, [n, ld, ld - n, 3, c0, k, m], nb, mpw, _spans(cost, k))


def _gemm_update(C: Tensor, A: Tensor, B: Tensor):
    """C -= A @ B in place (C a view of the work buffer)."""
    from .matmul import gemm

    C.copy_(gemm(A, B, C, alpha=-1.0, beta=1.0))


# ---- Cholesky ------------------------------------------------------------------------------
def _cholesky(A: Tensor):
    """(L (*batch, n, n) lower, info (*batch,) int32) of A's lower triangle."""
    batch = A._shape[:-2]
    n = A._shape[-1]
    nb = math.prod(batch)
    W = empty(A._shape, D.float32)
    info = empty(batch, D.int32)
    if nb == 0:
        return W, info
    if n == 0:
        info.fill_(0)
        return W, info
    W.copy_(A)
    tp, mpw = _team(n * n // 4, nb)
    tx = min(tp, 32)
    src = K.cholesky_kernel(tp, mpw, tx)
    bufs = [W._storage.buffer, info._storage.buffer]

    def run(c1, first, last):
        cost = lambda s: K.cholesky_step_cost(s, n, c1, tp, tx)  # noqa: E731
        _run(src, bufs, [n, c1], nb, mpw, _spans(cost, last, first=first))

    # Blocked as LU above (panel, then A22 -= L21·L21ᵀ by GEMM; the product's upper
    # triangle lands in the part of W that is never read and is zeroed at the end).
    blocked = n > CHOL_BLOCK_MIN if FORCE_BLOCKED is None else FORCE_BLOCKED
    step = LU_BLOCK if blocked else n
    for j0 in range(0, n, step):
        j1 = min(j0 + step, n)
        run(j1, j0, j1)
        if j1 < n:
            L21 = W[..., j1:, j0:j1]
            _gemm_update(W[..., j1:, j1:], L21, _mT(L21))
    run(n, n, n + 1)
    return W, info


# ---- Householder QR ---------------------------------------------------------------------------
def _group(tp: int, cols: int, rows: int) -> int:
    """Invocations a column (a power of two dividing TP): enough that the team's TP cover the
    columns, and no more than the rows."""
    g = 1
    while g < tp and (tp // g) > cols and g < rows:
        g *= 2
    return g


def _qr(A: Tensor, qc: int):
    """Householder QR of A (*batch, m, n): (W, tau, Q) with R in W's upper triangle and Q
    (*batch, m, qc) the first qc columns of H_0·H_1·...·H_{k-1} (no Q when qc == 0)."""
    batch = A._shape[:-2]
    m, n = A._shape[-2], A._shape[-1]
    kmax = min(m, n)
    nb = math.prod(batch)
    W = empty(A._shape, D.float32)
    tau = empty(batch + (kmax,), D.float32)
    Q = empty(batch + (m, qc), D.float32)
    if nb == 0 or m == 0 or n == 0:
        if qc and nb and m:
            Q.copy_(_eye(m, qc))
        if nb:
            W.copy_(A)
        return W, tau, Q
    W.copy_(A)
    if qc:
        Q.copy_(_eye(m, qc))
    tp, mpw = _team(max(n, m // 4), nb)
    g = _group(tp, n, m)
    nsteps = 2 * kmax if qc else kmax
    spans = _spans(lambda s: K.qr_step_cost(s, m, n, qc, tp, g), nsteps)
    # without Q the binding is unused, but must be its own buffer: WebGPU forbids binding one
    # buffer twice writable in a dispatch (Dawn checks it; wgpu-native does not)
    qbuf = Q if qc else empty((1,), D.float32)
    bufs = [W._storage.buffer, tau._storage.buffer, qbuf._storage.buffer]
    _run(K.qr_kernel(tp, mpw, g), bufs, [m, n, qc], nb, mpw, spans)
    return W, tau, Q


def _eye(m, n):
    from .creation import eye

    return eye(m, n, dtype=D.float32)


# ---- Jacobi eigh and SVD ------------------------------------------------------------------
# Sweep caps. Cyclic Jacobi converges quadratically once the off-diagonal mass is small:
# on random f32 matrices (lavapipe, the sweeps counted in the state buffer, the last one
# finding nothing to rotate) eigh took n=2: 2, 3: 4, 5: 5, 17: 6, 33: 7, 64: 8, 128: 9 sweeps
# and the SVD 5 (33x5), 7 (17x17), 10 (64x64). A converged matrix costs its later dispatches
# only a check, so the cap is generous; a matrix that reaches it (NaN input, say) returns
# what the sweeps made, as torch returns what LAPACK made.
EIGH_SWEEPS = 30
SVD_SWEEPS = 30


def _fro(W: Tensor) -> Tensor:
    """||W||_F per matrix, (nb,) float32."""
    from .reduce import norm

    return norm(W.reshape(-1, W._shape[-2] * W._shape[-1]), 2, dim=1)


def _eigh(A: Tensor, vectors: bool, sweeps: int = EIGH_SWEEPS):
    """Jacobi on the symmetric (*batch, n, n) A: (diagonal W, V, state). Unsorted."""
    batch = A._shape[:-2]
    n = A._shape[-1]
    nb = math.prod(batch)
    W = empty(A._shape, D.float32)
    V = empty(A._shape if vectors else (1,), D.float32)
    st = empty((max(nb, 1), 3), D.int32)
    if nb == 0 or n == 0:
        return W, V, st
    W.copy_(A)
    if vectors:
        V.copy_(_eye(n, n))
    nn = n + (n & 1)
    rot = empty((nb, nn // 2, 4), D.float32)
    fro = _fro(W)
    tp, mpw = _team(n * nn // 8, nb)
    tx = min(tp, 32)
    nr = max(nn - 1, 1)
    cap = _smem_cap(n * n, mpw, 16)
    fixed = 8 + (2 * K._loop(n * n, tp) if cap else 0)
    spans = _spans(lambda s: K.eigh_step_cost(s, n, tp, tx), sweeps * nr, fixed)
    bufs = [W._storage.buffer, V._storage.buffer, rot._storage.buffer, st._storage.buffer]
    bufs.append(fro._storage.buffer)
    _run(K.eigh_kernel(tp, mpw, tx, vectors, cap), bufs, [n], nb, mpw, spans)
    return W, V, st


def _svd_jacobi(A: Tensor, vectors: bool, sweeps: int = SVD_SWEEPS):
    """One-sided Jacobi on A (*batch, m, n), m >= n: (W = U·S, V, state), unsorted."""
    batch = A._shape[:-2]
    m, n = A._shape[-2], A._shape[-1]
    nb = math.prod(batch)
    W = empty(A._shape, D.float32)
    V = empty(batch + (n, n) if vectors else (1,), D.float32)
    st = empty((max(nb, 1), 3), D.int32)
    if nb == 0 or n == 0 or m == 0:
        if nb:
            W.copy_(A)
            if vectors:
                V.copy_(_eye(n, n))
        return W, V, st
    W.copy_(A)
    if vectors:
        V.copy_(_eye(n, n))
    nn = n + (n & 1)
    fro = _fro(W)
    tp, mpw = _team(max(nn // 2, m * nn // 64), nb)
    g = _group(tp, nn // 2, m)
    nr = max(nn - 1, 1)
    spans = _spans(lambda s: K.svd_step_cost(s, m, n, tp, g, vectors), sweeps * nr)
    bufs = [W._storage.buffer, V._storage.buffer, st._storage.buffer, fro._storage.buffer]
    _run(K.svd_kernel(tp, mpw, g, vectors), bufs, [m, n], nb, mpw, spans)
    return W, V, st


# ---- results and out= ----------------------------------------------------------------------
def _out(res: Tensor, out, name: str) -> Tensor:
    if out is None:
        return res
    if not isinstance(out, Tensor):
        raise TypeError(f"pyrite: {name}: out must be a Tensor, got {type(out).__name__}")
    if tuple(out._shape) != tuple(res._shape):
        out.resize_(res._shape) if hasattr(out, "resize_") else None
    if tuple(out._shape) != tuple(res._shape):
        raise ShapeError(
            f"pyrite: {name}: out has shape {tuple(out._shape)}, the result {tuple(res._shape)}"
        )
    out.copy_(res)
    return out


def _outs(cls, values, out, name: str):
    if out is None:
        return cls(*values)
    if len(out) != len(values):
        raise TypeError(f"pyrite: {name}: out must be a tuple of {len(values)} tensors")
    return cls(*(_out(v, o, name) for v, o in zip(values, out)))


def _mT(t: Tensor) -> Tensor:
    return t.transpose(-2, -1)


def _raise_info(info: Tensor, A: Tensor, message):
    """Read `info` back; raise LinAlgError(message(index, value)) at the first nonzero."""
    hit = _read_info(info)
    if hit is not None:
        raise LinAlgError(message(*hit))


# ---- solve, inv ----------------------------------------------------------------------------
def _solve_shapes(A: Tensor, B: Tensor, name: str):
    """torch's rule: B is a batch of vectors when it is 1-D, or has A's shape without the last
    dimension; else a batch of matrices (n, k). Returns (batch, B as (..., n, k), vector?)."""
    n = A._shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm._shape[-2] != n:
        k = 1 if vector else (Bm._shape[-1] if Bm.ndim else 1)
        rows = B._shape[0] if vector and B.ndim == 1 else (Bm._shape[-2] if Bm.ndim >= 2 else 1)
        raise ShapeError(
            f"pyrite: {name}: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {rows}x{k}; shapes {tuple(A._shape)} and {tuple(B._shape)})"
        )
    try:
        batch = broadcast_shapes(A._shape[:-2], Bm._shape[:-2])
    except ShapeError:
        raise ShapeError(
            f"pyrite: {name}: the batch dimensions of A {tuple(A._shape)} and B "
            f"{tuple(B._shape)} do not broadcast"
        ) from None
    return batch, Bm, vector


def _solve(A, B, left: bool, name: str):
    A = _square_input(A, name)
    B = _float_input(B, name)
    if not left:  # X A = B  <=>  Aᵀ Xᵀ = Bᵀ
        if B.ndim < 2:
            raise ShapeError(
                f"pyrite: {name}: with left=False, B must have at least 2 dimensions "
                f"(got shape {tuple(B._shape)})"
            )
        X, info = _solve(_mT(A), _mT(B), True, name)
        return _mT(X).contiguous(), info
    batch, Bm, vector = _solve_shapes(A, B, name)
    n = A._shape[-1]
    W = _lu_work(A.expand(*batch, n, n), Bm.expand(*batch, n, Bm._shape[-1]), batch)
    _, info = _lu(W, n)
    X = W[..., n:].contiguous()
    if vector:
        X = X.squeeze(-1)
    return X, info


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """X with A X = B (left=True) or X A = B, and LAPACK's info (0, or the first zero pivot's
    1-based index) per matrix, without reading info back unless `check_errors`."""
    X, info = _solve(A, B, left, "linalg.solve_ex")
    if check_errors:
        _raise_info(info, A, lambda i, v: _singular_solve())
    return _outs(linalg_solve_ex, (X, info), out, "linalg.solve_ex")


def _singular_solve():
    return "pyrite: linalg.solve: The solver failed because the input matrix is singular."


def solve(A, B, *, left=True, out=None):
    """The solution X of A X = B (X A = B when left=False) for square A (*, n, n) and B (*, n)
    or (*, n, k), batch dims broadcast; LU with partial pivoting. Raises LinAlgError when a
    pivot is exactly zero, as torch does."""
    X, info = _solve(A, B, left, "linalg.solve")
    _raise_info(info, A, lambda i, v: _singular_solve())
    return _out(X, out, "linalg.solve")


def _inv(A, name: str):
    A = _square_input(A, name)
    n = A._shape[-1]
    batch = A._shape[:-2]
    W = _lu_work(A, _eye(n, n), batch)
    _, info = _lu(W, n)
    return W[..., n:].contiguous(), info


def _singular_inv(A):
    return lambda i, v: (
        f"pyrite: linalg.inv: {_batch_prefix(A, i)}The diagonal element {v} is zero, the "
        "inversion could not be completed because the input matrix is singular."
    )


def inv_ex(A, *, check_errors=False, out=None):
    """The inverse of square A (*, n, n) and info per matrix, without reading info back."""
    X, info = _inv(A, "linalg.inv_ex")
    if check_errors:
        _raise_info(info, A, _singular_inv(as_tensor_arg(A)))
    return _outs(linalg_inv_ex, (X, info), out, "linalg.inv_ex")


def inv(A, *, out=None):
    """The inverse of square A (*, n, n) by LU with partial pivoting (Gauss elimination on
    [A | I]). Raises LinAlgError for an exactly singular pivot, with torch's message."""
    X, info = _inv(A, "linalg.inv")
    _raise_info(info, A, _singular_inv(as_tensor_arg(A)))
    return _out(X, out, "linalg.inv")


def inverse(input, *, out=None):
    return inv(input, out=out)


# ---- LU factorisation as torch.linalg.lu_factor / lu / lu_solve ----------------------------------
def _lu_factor(A, pivot, name):
    A = _matrix_input(A, name)
    if not pivot:
        raise NotImplementedError(
            f"pyrite: {name}: LU without pivoting is not implemented (torch's CPU has none either)"
        )
    n = A._shape[-1]
    W = empty(A._shape, D.float32)
    if W.numel():
        W.copy_(A)
    piv, info = _lu(W, n)
    return A, W, piv, info


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """LU with partial pivoting of A (*, m, n), compact as LAPACK's getrf: (LU, pivots
    (1-based int32, min(m, n) of them), info), info not read back."""
    A, LU, piv, info = _lu_factor(A, pivot, "linalg.lu_factor_ex")
    if check_errors:
        _raise_info(info, A, _zero_u(A, "linalg.lu_factor_ex"))
    return _outs(linalg_lu_factor_ex, (LU, piv + 1, info), out, "linalg.lu_factor_ex")


def _zero_u(A, name):
    return lambda i, v: (
        f"pyrite: {name}: {_batch_prefix(A, i)}U[{v},{v}] is zero and using it on "
        "lu_solve would result in a division by zero. If you still want to perform the "
        "factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
    )


def lu_factor(A, *, pivot=True, out=None):
    """(LU, pivots) of A (*, m, n) as lu_factor_ex; raises LinAlgError when U has an exactly
    zero diagonal element, as torch does."""
    A, LU, piv, info = _lu_factor(A, pivot, "linalg.lu_factor")
    _raise_info(info, A, _zero_u(A, "linalg.lu_factor"))
    return _outs(linalg_lu_factor, (LU, piv + 1), out, "linalg.lu_factor")


def _permutation(piv0: Tensor, m: int, batch: tuple) -> Tensor:
    """P (*batch, m, m) with A = P·L·U for 0-based swaps piv0 (*batch, k): the swaps applied
    to the identity's rows give Pᵀ."""
    S = _eye(m, m).expand(*batch, m, m).contiguous()
    _swap_rows(S, piv0.expand(*batch, piv0._shape[-1]), m, 0)
    return _mT(S)


def _unpack(LU: Tensor, piv0: Tensor, unpack_data=True, unpack_pivots=True):
    m, n = LU._shape[-2], LU._shape[-1]
    k = min(m, n)
    batch = LU._shape[:-2]
    P = _permutation(piv0, m, batch) if unpack_pivots else empty((0,), D.float32)
    if not unpack_data:
        e = empty((0,), D.float32)
        return P, e, e
    L = LU[..., :, :k].tril(-1) + _eye(m, k)
    U = LU[..., :k, :].triu()
    return P, L, U


def lu(A, *, pivot=True, out=None):
    """A = P·L·U for A (*, m, n): P (*, m, m) a permutation, L (*, m, k) unit lower, U (*, k,
    n) upper, k = min(m, n); partial pivoting as LAPACK's getrf."""
    A, LU, piv, _ = _lu_factor(A, pivot, "linalg.lu")
    return _outs(linalg_lu, _unpack(LU, piv), out, "linalg.lu")


def _lu_top(A, pivot=True, get_infos=False, out=None):
    """torch.lu (deprecated there): (LU, pivots) or (LU, pivots, infos)."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    res = (LU, piv, info) if get_infos else (LU, piv)
    if out is not None:
        return tuple(_out(v, o, "lu") for v, o in zip(res, out))
    return res


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """(P, L, U) from lu_factor's compact (LU, pivots) (torch.lu_unpack)."""
    LU = _matrix_input(LU_data, "lu_unpack")
    piv0 = as_tensor_arg(LU_pivots).int() - 1
    res = _unpack(LU, piv0, unpack_data, unpack_pivots)
    return _outs(lu_unpack_result, res, out, "lu_unpack")


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B (X A = B when left=False; Aᵀ in place of A when adjoint) from lu_factor's
    (LU, pivots) of a square A (*, n, n); B (*, n, k) (or (*, k, n) when left=False), batch
    dims broadcast."""
    LU = _square_input(LU, "linalg.lu_solve")
    B = _matrix_input(B, "linalg.lu_solve")
    piv0 = as_tensor_arg(pivots).int() - 1
    if not left:  # X A = B <=> Aᵀ Xᵀ = Bᵀ
        X = lu_solve(LU, pivots, _mT(B), left=True, adjoint=not adjoint)
        return _out(_mT(X).contiguous(), out, "linalg.lu_solve")
    n = LU._shape[-1]
    if B._shape[-2] != n:
        raise ShapeError(
            f"pyrite: linalg.lu_solve: Incompatible shapes of A and B for the equation AX = B "
            f"({n}x{n} and {B._shape[-2]}x{B._shape[-1]})"
        )
    batch = broadcast_shapes(LU._shape[:-2], B._shape[:-2], piv0._shape[:-1])
    k = B._shape[-1]
    LUb = LU.expand(*batch, n, n)
    if adjoint:  # Aᵀ = Uᵀ Lᵀ Pᵀ: X = P · Lᵀ⁻¹ · Uᵀ⁻¹ · B
        Y = _tri_solve(_mT(LUb), B.expand(*batch, n, k), False, False)
        Z = _tri_solve(_mT(LUb), Y, True, True)
        P = _permutation(piv0, n, batch)
        return _out(P @ Z, out, "linalg.lu_solve")
    # A⁻¹ = U⁻¹ L⁻¹ Pᵀ: the swaps on B, forward substitution with L, back substitution
    W = _lu_work(LUb, B.expand(*batch, n, k), batch)
    nb = math.prod(batch)
    if nb and n and k:
        _swap_rows(W, piv0.expand(*batch, n), n, n)
        tp, mpw = _team(max(n * (n + k) // 4, n), nb)
        tx = min(tp, 32)
        src = K.lu_kernel(tp, mpw, tx)
        info = empty((nb,), D.int32)
        bufs = [W._storage.buffer, info._storage.buffer, info._storage.buffer]
        bufs[1] = empty((nb, n), D.int32)._storage.buffer
        ld = n + k
        for mode, c0, c1 in ((1, n, n), (2, 0, n)):
            cost = lambda s, mode=mode, c0=c0, c1=c1: K.lu_step_cost(  # noqa: E731
                s, n, ld, mode, c0, c1, tp, tx
            )
            words = [n, ld, k, mode, c0, c1, n]
            _run(src, bufs, words, nb, mpw, _spans(cost, n))
    return _out(W[..., n:].contiguous(), out, "linalg.lu_solve")


# ---- triangular systems ------------------------------------------------------------------
def _tri_solve(A: Tensor, B: Tensor, upper: bool, unit: bool) -> Tensor:
    """X with A X = B for triangular A (*, n, n) (the other triangle ignored) and B (*, n, k),
    batch dims already equal: back substitution (the LU kernel's second half); a lower A is
    solved as the upper J·A·J (J reverses the order)."""
    n = A._shape[-1]
    batch = A._shape[:-2]
    if not upper:
        A = A.flip((-2, -1))
        B = B.flip((-2,))
    W = _lu_work(A, B, batch)
    if unit:
        W[..., :n].diagonal(0, -2, -1).fill_(1.0)
    if n and math.prod(batch) and B._shape[-1]:
        _lu(W, n, back_only=True)
    X = W[..., n:]
    return (X if upper else X.flip((-2,))).contiguous()


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False) for triangular A (*, n, n) (only the triangle
    `upper` names is read; its diagonal taken as ones when `unitriangular`) and B (*, n, k)."""
    A = _square_input(A, "linalg.solve_triangular")
    B = _matrix_input(B, "linalg.solve_triangular")
    if not left:
        X = solve_triangular(_mT(A), _mT(B), upper=not upper, unitriangular=unitriangular)
        return _out(_mT(X).contiguous(), out, "linalg.solve_triangular")
    n = A._shape[-1]
    if B._shape[-2] != n:
        raise ShapeError(
            f"pyrite: linalg.solve_triangular: Incompatible shapes of A and B for the equation "
            f"AX = B ({n}x{n} and {B._shape[-2]}x{B._shape[-1]})"
        )
    batch = broadcast_shapes(A._shape[:-2], B._shape[:-2])
    k = B._shape[-1]
    X = _tri_solve(A.expand(*batch, n, n), B.expand(*batch, n, k), bool(upper), unitriangular)
    return _out(X, out, "linalg.solve_triangular")


def cholesky_solve(B, L, upper=False, *, out=None):
    """X with A X = B where A = L Lᵀ (Uᵀ U when upper) from its Cholesky factor."""
    L = _square_input(L, "cholesky_solve")
    B = _matrix_input(B, "cholesky_solve")
    Y = solve_triangular(L, B, upper=upper, left=True) if not upper else None
    if upper:  # A = Uᵀ U: Uᵀ Y = B, U X = Y
        Y = solve_triangular(_mT(L), B, upper=False)
        return _out(solve_triangular(L, Y, upper=True), out, "cholesky_solve")
    return _out(solve_triangular(_mT(L), Y, upper=True), out, "cholesky_solve")


def cholesky_inverse(L, upper=False, *, out=None):
    """inv(A) from A's Cholesky factor L (A = L Lᵀ, or Uᵀ U when upper)."""
    L = _square_input(L, "cholesky_inverse")
    n = L._shape[-1]
    eye = _eye(n, n).expand(*L._shape)
    return _out(cholesky_solve(eye, L, upper), out, "cholesky_inverse")


# ---- det, slogdet ------------------------------------------------------------------------------
def _lu_det_parts(A, name: str):
    """(diagonal of U (*, n), permutation sign (*,) float32) of A's LU factorisation."""
    from .creation import arange

    A = _square_input(A, name)
    n = A._shape[-1]
    W = _lu_work(A, None, A._shape[:-2])
    piv, _ = _lu(W, n)
    d = W.diagonal(0, -2, -1)
    swaps = (piv != arange(n, dtype=D.int32)).sum(-1)
    psign = 1.0 - 2.0 * (swaps % 2).float()
    return d, psign


def det(A, *, out=None):
    """The determinant of square A (*, n, n): the product of U's diagonal from LU with partial
    pivoting, times the permutation's sign."""
    d, psign = _lu_det_parts(A, "linalg.det")
    return _out(psign * d.prod(-1), out, "linalg.det")


def _slogdet(A, name):
    d, psign = _lu_det_parts(A, name)
    sign = psign * d.sign().prod(-1)
    logabs = d.abs().log().sum(-1)
    return sign, logabs


def slogdet(A, *, out=None):
    """(sign, log|det|) of square A (*, n, n); sign 0 and logabsdet -inf when singular."""
    return _outs(linalg_slogdet, _slogdet(A, "linalg.slogdet"), out, "linalg.slogdet")


def _slogdet_top(input):
    return slogdet_result(*_slogdet(input, "slogdet"))


def logdet(input):
    """log(det(A)): nan for a negative determinant, -inf for a singular one (torch.logdet)."""
    from .elementwise import where

    sign, logabs = _slogdet(input, "logdet")
    nan = logabs * float("nan")
    return where(sign < 0, nan, logabs)


# ---- Cholesky -----------------------------------------------------------------------------
def _not_pd(A):
    return lambda i, v: (
        f"pyrite: linalg.cholesky: {_batch_prefix(A, i)}The factorization could not be "
        f"completed because the input is not positive-definite (the leading minor of order "
        f"{v} is not positive-definite)."
    )


def _chol(A, upper: bool, name: str):
    A = _square_input(A, name)
    L, info = _cholesky(A)
    if upper:
        L = _mT(L).contiguous()
    return A, L, info


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """The Cholesky factor of Hermitian positive-definite A (its lower triangle read) and info
    (0, or the order of the first leading minor that is not positive-definite)."""
    A, L, info = _chol(A, upper, "linalg.cholesky_ex")
    if check_errors:
        _raise_info(info, A, _not_pd(A))
    return _outs(linalg_cholesky_ex, (L, info), out, "linalg.cholesky_ex")


def cholesky(A, *, upper=False, out=None):
    """L with A = L Lᵀ (U with A = Uᵀ U when upper=True) for symmetric positive-definite A
    (*, n, n), reading its lower triangle. Raises LinAlgError when A is not positive-definite."""
    A, L, info = _chol(A, upper, "linalg.cholesky")
    _raise_info(info, A, _not_pd(A))
    return _out(L, out, "linalg.cholesky")


def _cholesky_top(input, upper=False, *, out=None):
    return cholesky(input, upper=upper, out=out)


# ---- QR --------------------------------------------------------------------------------------
def _pow2_scaled(A: Tensor):
    """(A·c, c, finite): c (*, 1, 1) a power of two bringing max|A| into [1, 2) per matrix,
    because the Householder and Jacobi kernels form sums of squares, which overflow in f32
    past |a| ~ 1e19 and vanish below 1e-19; `finite` marks matrices without NaN or inf (those
    get c = 1, and the caller makes their results NaN, as LAPACK's are: the kernels' NaN
    comparisons alone would skip rotations and return the diagonal)."""
    amax = A.abs().amax(dim=(-2, -1), keepdim=True)
    finite = amax.isfinite()
    c = (-(amax.log2().floor())).exp2().masked_fill(~(finite & (amax > 0)), 1.0)
    return A * c, c, finite


def _nan_where(t: Tensor, finite: Tensor) -> Tensor:
    """t with the matrices whose `finite` (*, 1, 1) is False filled with NaN."""
    mask = finite if t.ndim == finite.ndim else finite.squeeze(-1)
    return t.masked_fill(~mask, float("nan"))


def qr(A, mode="reduced", *, out=None):
    """Householder QR of A (*, m, n): mode 'reduced' gives Q (*, m, k), R (*, k, n), k =
    min(m, n); 'complete' Q (*, m, m), R (*, m, n); 'r' an empty Q and R (*, k, n). R's
    diagonal signs are LAPACK's (not made positive)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(
            f"pyrite: qr received unrecognized mode '{mode}' but expected one of 'reduced' "
            "(default), 'r', or 'complete'"
        )
    A = _matrix_input(A, "linalg.qr")
    m, n = A._shape[-2], A._shape[-1]
    k = min(m, n)
    qc = {"reduced": k, "complete": m, "r": 0}[mode]
    scaled = A.numel() > 0
    if scaled:
        A, c, finite = _pow2_scaled(A)
    W, _, Q = _qr(A, qc)
    rows = m if mode == "complete" else k
    R = W[..., :rows, :].triu()
    if scaled:
        R = _nan_where(R / c, finite)
        Q = _nan_where(Q, finite) if qc else Q
    if mode == "r":
        Q = empty((0,), D.float32)
    return _outs(linalg_qr, (Q, R), out, "linalg.qr")


def _qr_top(input, some=True, *, out=None):
    Q, R = qr(input, "reduced" if some else "complete")
    return _outs(qr_result, (Q, R), out, "qr")


# ---- symmetric eigenproblems --------------------------------------------------------------
def _symmetric(A: Tensor, UPLO: str, name: str) -> Tensor:
    if UPLO not in ("L", "U", "l", "u"):
        raise ValueError(f"pyrite: {name}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    if UPLO in ("L", "l"):
        return A.tril() + _mT(A.tril(-1))
    return A.triu() + _mT(A.triu(1))


def _eigh_sorted(A, UPLO, vectors: bool, name: str):
    from .scatter import gather

    A = _square_input(A, name)
    n = A._shape[-1]
    S = _symmetric(A, UPLO, name)
    if S.numel() == 0:
        W, V, _ = _eigh(S, vectors)
        return W.diagonal(0, -2, -1), (V if vectors else None)
    S, c, finite = _pow2_scaled(S)
    W, V, _ = _eigh(S, vectors)
    lam = W.diagonal(0, -2, -1) / c.squeeze(-1)
    vals, idx = lam.sort(-1)
    vals = _nan_where(vals, finite)
    if not vectors:
        return vals, None
    idx2 = idx.unsqueeze(-2).expand(*idx._shape[:-1], n, n)
    return vals, _nan_where(gather(V, -1, idx2), finite)


def eigh(A, UPLO="L", *, out=None):
    """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric A (*, n, n),
    from the triangle UPLO names, by cyclic two-sided Jacobi. Eigenvector signs are arbitrary
    (as LAPACK's)."""
    vals, vecs = _eigh_sorted(A, UPLO, True, "linalg.eigh")
    return _outs(linalg_eigh, (vals, vecs), out, "linalg.eigh")


def eigvalsh(A, UPLO="L", *, out=None):
    """Eigenvalues (ascending) of symmetric A (*, n, n), from the triangle UPLO names."""
    vals, _ = _eigh_sorted(A, UPLO, False, "linalg.eigvalsh")
    return _out(vals, out, "linalg.eigvalsh")


def _no_complex(name):
    raise TypeError(
        f"pyrite: {name}: the eigenvalues of a general matrix are complex, and pyrite has no "
        "complex dtypes; for a symmetric matrix use linalg.eigh / linalg.eigvalsh"
    )


def eig(A, *, out=None):
    _no_complex("linalg.eig")


def eigvals(A, *, out=None):
    _no_complex("linalg.eigvals")


# ---- SVD -----------------------------------------------------------------------------------
def _svd_parts(A: Tensor, vectors: bool, full: bool, name: str | None = None):
    """(U, S, Vh) of A (*, m, n) (U, Vh None without vectors); S descending. With `name`,
    a matrix holding NaN or inf raises LinAlgError as torch's svd does (one readback);
    without, its results are NaN."""
    m, n = A._shape[-2], A._shape[-1]
    if m < n:  # A = U S Vh  <=>  Aᵀ = Vh.T S U.T
        U, S, Vh = _svd_parts(_mT(A), vectors, full, name)
        return (None if Vh is None else _mT(Vh), S, None if U is None else _mT(U))
    if A.numel() == 0:
        return _svd_tall(A, vectors, full)
    A, c, finite = _pow2_scaled(A)
    if name is not None and not bool(finite.all().item()):
        raise LinAlgError(
            f"pyrite: {name}: The algorithm failed to converge because the input matrix "
            "contained non-finite values."
        )
    U, S, Vh = _svd_tall(A, vectors, full)
    S = _nan_where(S / c.squeeze(-1), finite)
    if not vectors:
        return None, S, None
    return _nan_where(U, finite), S, _nan_where(Vh, finite)


def _svd_tall(A: Tensor, vectors: bool, full: bool):
    """_svd_parts for m >= n, without the scaling."""
    from .scatter import gather

    m, n = A._shape[-2], A._shape[-1]
    W, V, _ = _svd_jacobi(A, vectors)
    norms = W.norm(2, dim=-2) if n and m else W.new_zeros(*A._shape[:-2], n)
    S, idx = norms.sort(-1, descending=True)
    if not vectors:
        return None, S, None
    lead = idx._shape[:-1]
    Ws = gather(W, -1, idx.unsqueeze(-2).expand(*lead, m, n))
    Vs = gather(V, -1, idx.unsqueeze(-2).expand(*lead, n, n))
    safe = S.clamp(min=1e-38)
    Ur = Ws / safe.unsqueeze(-2) * (S > 0).float().unsqueeze(-2)
    # Orthonormalise (and for full_matrices complete) U by Householder QR: columns with zero
    # or noise-level singular values come out orthonormal as LAPACK's do; the others move by
    # O(eps). R's diagonal is ±1 there: its signs keep U·diag(S)·Vh = A.
    Q, R = qr(Ur, "complete" if full else "reduced")
    sgn = R.diagonal(0, -2, -1).sign()
    sgn = sgn + (sgn == 0).float()
    if full and m > n:
        U = Q.clone()
        U[..., :n] = Q[..., :n] * sgn.unsqueeze(-2)
    else:
        U = Q * sgn.unsqueeze(-2)
    return U, S, _mT(Vs).contiguous()


def _check_driver(driver, name):
    if driver is not None and driver not in ("gesvd", "gesvdj", "gesvda"):
        raise ValueError(
            f"pyrite: {name}: driver must be None or one of 'gesvd', 'gesvdj', 'gesvda' "
            f"(accepted and ignored: pyrite runs one-sided Jacobi), got {driver!r}"
        )


def svd(A, full_matrices=True, *, driver=None, out=None):
    """A = U diag(S) Vh for A (*, m, n): U (*, m, m) or (*, m, k), S (*, k) descending, Vh
    (*, n, n) or (*, k, n), k = min(m, n); one-sided Jacobi. `driver` (a CUDA option) is
    accepted and ignored. Singular vectors' signs are arbitrary (as LAPACK's)."""
    _check_driver(driver, "linalg.svd")
    A = _matrix_input(A, "linalg.svd")
    U, S, Vh = _svd_parts(A, True, bool(full_matrices), "linalg.svd")
    return _outs(linalg_svd, (U, S, Vh), out, "linalg.svd")


def svdvals(A, *, driver=None, out=None):
    """Singular values of A (*, m, n), descending."""
    _check_driver(driver, "linalg.svdvals")
    A = _matrix_input(A, "linalg.svdvals")
    _, S, _ = _svd_parts(A, False, False, "linalg.svdvals")
    return _out(S, out, "linalg.svdvals")


def _svd_top(input, some=True, compute_uv=True, *, out=None):
    """torch.svd: (U, S, V) with V (not Vh); some=True is full_matrices=False; without
    compute_uv, U and V are zero matrices (m, m) and (n, n), as torch returns."""
    from .creation import zeros

    A = _matrix_input(input, "svd")
    m, n = A._shape[-2], A._shape[-1]
    if not compute_uv:
        _, S, _ = _svd_parts(A, False, False, "svd")
        U = zeros(*A._shape[:-2], m, m)
        V = zeros(*A._shape[:-2], n, n)
    else:
        U, S, Vh = _svd_parts(A, True, not some, "svd")
        V = _mT(Vh)
    return _outs(svd_result, (U, S, V), out, "svd")


# ---- pinv, lstsq, matrix_rank, cond (from the SVD) ------------------------------------------------
EPS32 = 2.0**-23  # torch.finfo(torch.float32).eps


def _tolerances(atol, rtol, m, n, S0):
    """The cutoff max(atol, rtol·σ_max) per matrix. torch's defaults: rtol = eps·max(m, n) when
    neither is given, 0 when only atol is (and is not 0)."""
    from .elementwise import maximum

    if rtol is None:
        given = atol is not None and (isinstance(atol, Tensor) or float(atol) > 0)
        rtol = 0.0 if given else EPS32 * max(m, n)
    cut = S0 * rtol
    if atol is None:
        return cut
    return maximum(cut, atol) if isinstance(atol, Tensor) else cut.clamp(min=float(atol))


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The Moore-Penrose pseudoinverse of A (*, m, n) from its SVD (from eigh when
    `hermitian`): singular values at or below max(atol, rtol·σ_max) count as zero.
    `rcond` is torch's older name for rtol."""
    A = _matrix_input(A, "linalg.pinv")
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pyrite: linalg.pinv: pass rtol or rcond, not both")
        rtol = rcond
    m, n = A._shape[-2], A._shape[-1]
    if hermitian:
        if m != n:
            _square_input(A, "linalg.pinv")
        vals, V = _eigh_sorted(A, "L", True, "linalg.pinv")
        mag = vals.abs()
        cut = _tolerances(atol, rtol, m, n, mag.amax(-1, keepdim=True) if n else mag)
        inv_s = (mag > cut).float() / vals.masked_fill(mag <= cut, 1.0)
        res = (V * inv_s.unsqueeze(-2)) @ _mT(V)
        return _out(res, out, "linalg.pinv")
    if m == 0 or n == 0:
        from .creation import zeros

        return _out(zeros(*A._shape[:-2], n, m), out, "linalg.pinv")
    U, S, Vh = _svd_parts(A, True, False)
    cut = _tolerances(atol, rtol, m, n, S[..., :1])
    inv_s = (S > cut).float() / S.masked_fill(S <= cut, 1.0)
    res = (_mT(Vh) * inv_s.unsqueeze(-2)) @ _mT(U)
    return _out(res, out, "linalg.pinv")


def pinverse(input, rcond=1e-15):
    return pinv(input, rtol=rcond)


def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """The number of singular values above max(atol, rtol·σ_max) (int32: pyrite's int64)."""
    A = _matrix_input(A, "linalg.matrix_rank")
    if tol is not None:
        atol = tol
    m, n = A._shape[-2], A._shape[-1]
    if hermitian:
        S = eigvalsh(A).abs()
        S0 = S.amax(-1, keepdim=True) if n else S
    else:
        S = svdvals(A)
        S0 = S[..., :1]
    if min(m, n) == 0:
        from .creation import zeros

        return _out(zeros(*A._shape[:-2], dtype=D.int32), out, "linalg.matrix_rank")
    cut = _tolerances(atol, rtol, m, n, S0)
    return _out((S > cut).sum(-1), out, "linalg.matrix_rank")


def cond(A, p=None, *, out=None):
    """The condition number ||A||·||A⁻¹|| in norm p (None: 2, from the singular values)."""
    from .linalg_norms import matrix_norm

    A = _matrix_input(A, "linalg.cond")
    if p in (None, 2, -2):
        S = svdvals(A)
        r = S[..., 0] / S[..., -1] if p in (None, 2) else S[..., -1] / S[..., 0]
        return _out(r, out, "linalg.cond")
    _square_input(A, "linalg.cond")
    X, _ = _inv(A, "linalg.cond")
    return _out(matrix_norm(A, p) * matrix_norm(X, p), out, "linalg.cond")


LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def lstsq(A, B, rcond=None, *, driver=None):
    """Least-squares solution of A X = B for A (*, m, n), B (*, m, k) or (*, m): the
    minimum-norm X from A's SVD for every driver (torch's CPU drivers differ in what else they
    return, and that is kept: `residuals` (squared column residuals, only for m > n, full rank
    and a driver other than 'gelsy'), `rank` (not for 'gels'), `singular_values` ('gelsd',
    'gelss'); an empty tensor where a field is not computed). The default driver is 'gelsy'.
    'gelsd' and 'gelss' read the rank back to decide on residuals, as torch does."""
    driver = "gelsy" if driver is None else driver
    if driver not in LSTSQ_DRIVERS:
        raise ValueError(
            "pyrite: torch.linalg.lstsq: parameter `driver` should be one of "
            "(gels, gelsy, gelsd, gelss)"
        )
    A = _matrix_input(A, "linalg.lstsq")
    B = _float_input(B, "linalg.lstsq")
    m, n = A._shape[-2], A._shape[-1]
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    Bm = B.unsqueeze(-1) if vector else B
    if Bm.ndim < 2 or Bm._shape[-2] != m:
        raise ShapeError(
            f"pyrite: torch.linalg.lstsq: input.size(-2) should match other.size(-2) "
            f"(shapes {tuple(A._shape)} and {tuple(B._shape)})"
        )
    batch = broadcast_shapes(A._shape[:-2], Bm._shape[:-2])
    k = Bm._shape[-1]
    Ab = A.expand(*batch, m, n)
    Bb = Bm.expand(*batch, m, k)
    rtol = EPS32 * max(m, n) if rcond is None or rcond < 0 else float(rcond)
    if min(m, n) == 0:
        from .creation import zeros

        X = zeros(*batch, n, k)
        S = zeros(*batch, 0)
        rank = zeros(*batch, dtype=D.int32)
    else:
        U, S, Vh = _svd_parts(Ab, True, False)
        keep = S > S[..., :1] * rtol
        rank = keep.sum(-1)
        inv_s = keep.float() / S.masked_fill(~keep, 1.0)
        X = _mT(Vh) @ ((_mT(U) @ Bb) * inv_s.unsqueeze(-1))
    empty_f = empty((0,), D.float32)
    residuals = empty_f
    if m > n and driver != "gelsy":
        full = True
        if driver in ("gelsd", "gelss"):
            full = bool((rank == n).all().item())
        if full:
            residuals = ((Ab @ X - Bb) ** 2).sum(-2)
    if vector:
        X = X.squeeze(-1)
    return linalg_lstsq(
        X,
        residuals,
        rank if driver != "gels" else empty((0,), D.int32),
        S if driver in ("gelsd", "gelss") else empty_f,
    )


# ---- matrix_power -----------------------------------------------------------------------------
def matrix_power(A, n, *, out=None):
    """A**n for square A (*, m, m) by repeated squaring: the identity for n = 0, inv(A)**|n| for
    n < 0 (raising LinAlgError when A is singular)."""
    import numbers

    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(
            f"pyrite: linalg.matrix_power(): argument 'n' must be int, not {type(n).__name__}"
        )
    A = as_tensor_arg(A)
    if A.dtype.kind == "b" or (n < 0 and A.dtype.kind != "f"):
        _float_input(A, "linalg.matrix_power")
    if A.ndim < 2 or A._shape[-1] != A._shape[-2]:
        _square_input(A.float() if A.dtype.kind != "f" else A, "linalg.matrix_power")
    m = A._shape[-1]
    n = int(n)
    if n == 0:
        eye = _eye(m, m).to(A.dtype)
        return _out(eye.expand(*A._shape).contiguous(), out, "linalg.matrix_power")
    if n < 0:
        A = inv(A)
        n = -n
    result = None
    base = A
    while True:
        if n & 1:
            result = base if result is None else result @ base
        n >>= 1
        if not n:
            break
        base = base @ base
    if result is A:
        result = A.clone()
    return _out(result, out, "linalg.matrix_power")
