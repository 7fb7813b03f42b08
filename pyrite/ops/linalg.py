"""torch.linalg's factorisations on the device, batched over leading dims: the drivers of the
kernels in kernels/linalg.py (LU with partial pivoting and its solves, Cholesky, Householder
QR, Jacobi eigh and SVD), the dispatch planning they share, argument checks and named
results. The public ops are in ops/linalg_solve.py (LU and Cholesky based),
ops/linalg_spectral.py (QR, eigh, SVD and what is built on them), ops/linalg_norms.py;
torch's top-level names in ops/linalg_top.py, the torch.linalg namespace in pyrite/linalg.py.

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
from ..errors import DtypeError, LinAlgError, ShapeError
from ..kernels import linalg as K
from ..kernels.common import fold_grid
from ..tensor import Tensor
from .core import empty, max_loop_iterations
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
geqrf_result = _result_type("geqrf", ("a", "tau"))
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
        raise DtypeError(
            f"pyrite: {name}: Expected a floating point tensor as input. Got {A.dtype!r}"
        )
    if A.dtype is not D.float32:
        # torch's CPU kernels refuse half and bfloat16 too ("Low precision dtypes not supported")
        raise DtypeError(
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
def _work_copy(W: Tensor, A: Tensor):
    """W[...] = A, unrecorded: W is a kernel's work buffer, factored in place by raw dispatches
    autograd never sees, so a recorded copy would hand W's later values A's gradient (silently
    wrong). The public functions get their gradients from rules (ops/linalg_grads.py) or raise
    (pyrite/linalg.py OPAQUE)."""
    from ..autograd import no_grad

    with no_grad():
        W.copy_(A)


def _lu_work(A: Tensor, B: Tensor | None, batch: tuple) -> Tensor:
    """The work buffer (*batch, n, n + r) = [A | B], both broadcast to `batch`."""
    n = A._shape[-1]
    r = 0 if B is None else B._shape[-1]
    W = empty(batch + (n, n + r), D.float32)
    if r == 0:
        _work_copy(W, A)
    else:
        _work_copy(W[..., :n], A)
        _work_copy(W[..., n:], B)
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
    _work_copy(W, A)
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


def _qr(A: Tensor, qc: int, tau_in: Tensor | None = None):
    """Householder QR of A (*batch, m, n): (W, tau, Q) with R in W's upper triangle and Q
    (*batch, m, qc) the first qc columns of H_0·H_1·...·H_{k-1} (no Q when qc == 0). With
    `tau_in` (*batch, min(m, n)), A already holds the reflectors (geqrf's form): only Q is
    formed (householder_product)."""
    batch = A._shape[:-2]
    m, n = A._shape[-2], A._shape[-1]
    kmax = min(m, n)
    nb = math.prod(batch)
    W = empty(A._shape, D.float32)
    tau = empty(batch + (kmax,), D.float32)
    if tau_in is not None and tau.numel():
        _work_copy(tau, tau_in)
    Q = empty(batch + (m, qc), D.float32)
    if nb == 0 or m == 0 or n == 0:
        if qc and nb and m:
            Q.copy_(_eye(m, qc))
        if nb:
            _work_copy(W, A)
        return W, tau, Q
    _work_copy(W, A)
    if qc:
        Q.copy_(_eye(m, qc))
    tp, mpw = _team(max(n, m // 4), nb)
    g = _group(tp, n, m)
    nsteps = 2 * kmax if qc else kmax
    first = kmax if tau_in is not None else 0
    spans = _spans(lambda s: K.qr_step_cost(s, m, n, qc, tp, g), nsteps, first=first)
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
    _work_copy(W, A)
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
            _work_copy(W, A)
            if vectors:
                V.copy_(_eye(n, n))
        return W, V, st
    _work_copy(W, A)
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
def _out(res: Tensor, out, name: str, grad_ok: bool = False) -> Tensor:
    """res, or res copied into `out` (resized from empty). With an input that requires grad,
    out= raises as torch's ops with a derivative formula do; `grad_ok`: torch's composites
    that accept it (matrix_norm, linalg.norm, cond, tensorinv, tensorsolve), whose out then
    carries the gradient through the copy."""
    if out is None:
        return res
    if not isinstance(out, Tensor):
        raise TypeError(f"pyrite: {name}: out must be a Tensor, got {type(out).__name__}")
    from .. import autograd

    if not grad_ok and res.requires_grad and autograd.is_grad_enabled():
        raise RuntimeError(
            f"pyrite: {name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad."
        )
    if tuple(out._shape) != tuple(res._shape):
        from .outarg import _resize  # (torch's warning for a non-empty out; complex too)

        _resize(out, tuple(res._shape), name)
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
