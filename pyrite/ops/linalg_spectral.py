"""torch.linalg's orthogonal factorisations and what is built on them: qr, eigh / eigvalsh,
svd / svdvals (and torch.svd), pinv, lstsq, matrix_rank, cond; eig / eigvals refuse (no
general eigensolver).
The drivers (Householder QR, Jacobi eigh and SVD) are in ops/linalg.py.
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import ArgumentError, DtypeError, LinAlgError, ShapeError
from ..tensor import Tensor
from .core import broadcast_shapes, empty
from .linalg import (
    _eigh,
    _float_input,
    _matrix_input,
    _mT,
    _out,
    _outs,
    _qr,
    _square_input,
    _svd_jacobi,
    geqrf_result,
    linalg_eigh,
    linalg_lstsq,
    linalg_qr,
    linalg_svd,
    qr_result,
    svd_result,
)


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
        raise ArgumentError(
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


def geqrf(input, *, out=None):
    """(a, tau): QR in LAPACK's compact form (torch.geqrf): R on and above a's diagonal, the
    Householder vectors below it (v[0] = 1 implied), tau their scalars."""
    A = _matrix_input(input, "geqrf")
    W, tau, _ = _qr(A, 0)
    return _outs(geqrf_result, (W, tau), out, "geqrf")


def householder_product(A, tau, *, out=None):
    """The first n columns of H_0·H_1·...·H_{k-1} from reflectors A (*, m, n), m >= n, and tau
    (*, k), k <= n (torch.linalg.householder_product, LAPACK's orgqr)."""
    A = _matrix_input(A, "linalg.householder_product")
    tau = _float_input(tau, "linalg.householder_product")
    m, n = A._shape[-2], A._shape[-1]
    if m < n:
        raise ShapeError(
            "pyrite: linalg.householder_product: input.shape[-2] must be greater than or equal "
            f"to input.shape[-1] (got shape {tuple(A._shape)})"
        )
    k = tau._shape[-1] if tau.ndim else 0
    if tau.ndim < 1 or k > n or tau._shape[:-1] != A._shape[:-2]:
        raise ShapeError(
            f"pyrite: linalg.householder_product: tau of shape {tuple(tau._shape)} does not fit "
            f"input of shape {tuple(A._shape)} (expected (*batch, k), k <= {n})"
        )
    if k < n:  # the missing reflectors are the identity (tau = 0)
        from .combine import cat
        from .creation import zeros

        tau = cat([tau, zeros(*tau._shape[:-1], n - k)], -1)
    _, _, Q = _qr(A, n, tau)
    return _out(Q, out, "linalg.householder_product")


def _qr_top(input, some=True, *, out=None):
    Q, R = qr(input, "reduced" if some else "complete")
    return _outs(qr_result, (Q, R), out, "qr")


# ---- symmetric eigenproblems --------------------------------------------------------------
def _symmetric(A: Tensor, UPLO: str, name: str) -> Tensor:
    if UPLO not in ("L", "U", "l", "u"):
        raise ArgumentError(
            f"pyrite: {name}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}"
        )
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


def _no_complex(name, A):
    _square_input(A, name)  # torch's shape errors first (a RuntimeError)
    raise DtypeError(  # (a TypeError as before, and a RuntimeError)
        f"pyrite: {name}: pyrite has no eigensolver for general (non-symmetric) matrices, "
        "whose eigenvalues are complex; for a symmetric matrix use linalg.eigh / "
        "linalg.eigvalsh"
    )


def eig(A, *, out=None):
    _no_complex("linalg.eig", A)


def eigvals(A, *, out=None):
    _no_complex("linalg.eigvals", A)


# ---- SVD -----------------------------------------------------------------------------------
def _svd_parts(A: Tensor, vectors: bool, full: bool, name: str | None = None):
    """(U, S, Vh) of A (*, m, n) (U, Vh None without vectors); S descending. With `name`,
    a matrix holding NaN raises LinAlgError as torch's svd does (one readback: LAPACK's gesdd
    refuses a NaN norm); a matrix with an inf but no NaN, or any non-finite one without
    `name`, gets NaN results (torch's for an inf too)."""
    m, n = A._shape[-2], A._shape[-1]
    if m < n:  # A = U S Vh  <=>  Aᵀ = Vh.T S U.T
        U, S, Vh = _svd_parts(_mT(A), vectors, full, name)
        return (None if Vh is None else _mT(Vh), S, None if U is None else _mT(U))
    if A.numel() == 0:
        return _svd_tall(A, vectors, full)
    A, c, finite = _pow2_scaled(A)
    if name is not None and not bool(finite.all().item()) and bool(A.isnan().any().item()):
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
    # zero singular values give zero columns (QR below completes them); not a tiny clamp:
    # 1e-38 is subnormal in f32 and GPUs flush it to 0 (0/0 made the H200's U NaN)
    pos = S > 0
    Ur = Ws / S.masked_fill(~pos, 1.0).unsqueeze(-2) * pos.float().unsqueeze(-2)
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
        raise ArgumentError(
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
    from .elementwise import maximum, where

    # tensor tolerances are per matrix (shape (*batch), broadcast with A's batch): a last dim
    # added to meet S0 (*, 1), as torch's atol.unsqueeze(-1)
    atol = atol.float().unsqueeze(-1) if isinstance(atol, Tensor) else atol
    rtol = rtol.float().unsqueeze(-1) if isinstance(rtol, Tensor) else rtol
    if rtol is None:
        default = EPS32 * max(m, n)
        if isinstance(atol, Tensor):  # (torch: where(atol > 0, 0, default), per matrix)
            rtol = where(atol > 0, 0.0, default)
        else:
            rtol = 0.0 if atol is not None and float(atol) > 0 else default
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
            raise TypeError("pyrite: linalg.pinv: pass rtol or rcond, not both")
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
    from .. import linalg as LA  # (the recorded svdvals and inv_ex: cond is their composite)

    A = _matrix_input(A, "linalg.cond")
    if A._shape[-1] == 0 or A._shape[-2] == 0:  # torch: 0 for an empty matrix, in every norm
        if p in ("fro", "nuc"):  # (torch checks squareness first for these two only)
            _square_input(A, "linalg.cond")
        return _out(A.sum((-2, -1)), out, "linalg.cond", True)
    if p in (None, 2, -2):
        S = LA.svdvals(A)
        r = S[..., 0] / S[..., -1] if p in (None, 2) else S[..., -1] / S[..., 0]
        return _out(r, out, "linalg.cond", True)
    _square_input(A, "linalg.cond")
    if p == "nuc":  # torch's: sum(S)·sum(1/S) (inf for a singular matrix, NaN for a zero one)
        S = LA.svdvals(A)
        return _out(S.sum(-1) * S.reciprocal().sum(-1), out, "linalg.cond", True)
    X, info = LA.inv_ex(A)
    # torch's: a singular matrix's inverse is inf, and a NaN product (0·inf for a zero matrix,
    # or NaN input) is inf
    X = X.masked_fill((info > 0).unsqueeze(-1).unsqueeze(-1), float("inf"))
    r = LA.matrix_norm(A, p) * LA.matrix_norm(X, p)
    return _out(r.masked_fill(r != r, float("inf")), out, "linalg.cond", True)


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
        raise ArgumentError(
            "pyrite: torch.linalg.lstsq: parameter `driver` should be one of "
            "(gels, gelsy, gelsd, gelss)"
        )
    A = _matrix_input(A, "linalg.lstsq")
    B = _float_input(B, "linalg.lstsq")
    m, n = A._shape[-2], A._shape[-1]
    # torch's rules: B has A's number of dims or one fewer (else refused), and is a batch of
    # vectors when 1-D or of A's shape without its last dim (as linalg.solve's). A batch of
    # matrices with one dim fewer than A is broadcast as A's batch says: there torch 2.13
    # broadcasts A's batch against B's leading dims instead, returning the solution repeated
    # (A (1, 3, 2), B (3, 3) gave (3, 2, 3)) or raising (A (3, 5, 2), B (5, 2)).
    if A.ndim - B.ndim not in (0, 1):
        raise ShapeError(
            "pyrite: torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() "
            f"and (input.dim() - other.dim()) <= 1 (shapes {tuple(A._shape)} and "
            f"{tuple(B._shape)})"
        )
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
    # rank and singular values are A's, over A's batch (torch's shapes: "the batch
    # dimensions of A"); the solution and residuals over the broadcast batch
    if min(m, n) == 0:
        from .creation import zeros

        X = zeros(*batch, n, k)
        S = zeros(*A._shape[:-2], 0)
        rank = zeros(*A._shape[:-2], dtype=D.int32)
    else:
        U, S, Vh = _svd_parts(A, True, False)
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
