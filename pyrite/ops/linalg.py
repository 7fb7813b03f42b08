"""torch.linalg's factorisations on the device: LU (solve, inv, det, slogdet), Cholesky,
Householder QR, Jacobi eigh and SVD, batched over leading dims (kernels/linalg.py).

Each op validates like torch (float32 only: torch's CPU refuses half too; square where the
algorithm needs it), copies its input into a contiguous float32 work buffer, dispatches the
factorisation's steps in as many dispatches as the loop budget needs (`_spans`) and finishes
with ordinary pyrite ops (diagonals, products, sorting, triangles). The `_ex` variants return
LAPACK's `info` as an int32 tensor without reading it back; the others read it (one small
readback, as torch's CPU ops do) and raise `LinAlgError` for singular or non-positive-definite
input with torch's messages.
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
def _spans(cost, nsteps: int, fixed: int = 8) -> list:
    """[(s0, s1), ...]: consecutive step ranges whose summed loop cost for one invocation
    (`cost(s)`, plus `fixed` for the dispatch) stays within the device's loop budget."""
    limit = max_loop_iterations()
    spans = []
    s0, acc = 0, fixed
    for s in range(nsteps):
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
# lavapipe runs a workgroup's invocations in turn and splits the shader at each barrier
# (kernels/rowops.py has the measurement), so a team is no wider than the step's work needs.
TEAM_MAX = 256
WG_MIN = 64


def _team(work: int, batch: int) -> tuple[int, int]:
    """(TP, MPW) for a matrix whose widest phase has `work` independent items."""
    tp = min(TEAM_MAX, max(8, _pow2(work)))
    mpw = max(1, min(WG_MIN // tp, _pow2(batch)))
    return tp, mpw


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


def _lu(W: Tensor, n: int):
    """Factor the work buffer in place; returns (piv (*batch, n) int32, info (*batch,) int32)."""
    batch_shape = W._shape[:-2]
    ld = W._shape[-1]
    r = ld - n
    nb = math.prod(batch_shape)
    piv = empty(batch_shape + (n,), D.int32)
    info = empty(batch_shape, D.int32)
    if nb == 0:
        return piv, info
    if n == 0:
        info.fill_(0)
        return piv, info
    tp, mpw = _team(max(n * ld // 4, n), nb)
    tx = min(tp, 32)
    nsteps = 2 * n if r else n
    spans = _spans(lambda s: K.lu_step_cost(s, n, ld, r, tp, tx), nsteps)
    src = K.lu_kernel(tp, mpw, tx)
    bufs = [W._storage.buffer, piv._storage.buffer, info._storage.buffer]
    _run(src, bufs, [n, ld, r], nb, mpw, spans)
    return piv, info


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
    spans = _spans(lambda s: K.cholesky_step_cost(s, n, tp, tx), n + 1)
    bufs = [W._storage.buffer, info._storage.buffer]
    _run(K.cholesky_kernel(tp, mpw, tx), bufs, [n], nb, mpw, spans)
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
    qbuf = Q if qc else tau  # an unused binding when there is no Q
    bufs = [W._storage.buffer, tau._storage.buffer, qbuf._storage.buffer]
    _run(K.qr_kernel(tp, mpw, g), bufs, [m, n, qc], nb, mpw, spans)
    return W, tau, Q


def _eye(m, n):
    from .creation import eye

    return eye(m, n, dtype=D.float32)


# ---- Jacobi eigh and SVD ------------------------------------------------------------------
# Sweep caps. Cyclic Jacobi converges quadratically once off-diagonal mass is small; measured
# here on random f32 matrices (ops below record the sweeps in their state buffer): ...
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
    spans = _spans(lambda s: K.eigh_step_cost(s, n, tp, tx), sweeps * nr)
    bufs = [W._storage.buffer, V._storage.buffer, rot._storage.buffer, st._storage.buffer]
    bufs.append(fro._storage.buffer)
    _run(K.eigh_kernel(tp, mpw, tx, vectors), bufs, [n], nb, mpw, spans)
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
