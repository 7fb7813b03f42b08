"""torch's randomized and iterative spectral methods, composed of pyrite's linear algebra:
`svd_lowrank` and `pca_lowrank` (Halko, Martinsson and Tropp 2009, algorithms 4.4 and 5.1, as
torch/_lowrank.py: a random range finder, `niter` subspace iterations, then the SVD of the
small projected matrix) and `lobpcg` (k extreme eigenpairs of a symmetric, optionally
generalized, problem by Knyazev's locally optimal block preconditioned conjugate gradient).

Randomness comes from pyrite's global generator, as torch's from its own: `pr.manual_seed(s)`
makes a call repeatable (the draws differ from torch's, so compare subspaces and singular
values with torch, not vectors).
"""

from __future__ import annotations

import math

from .. import dtypes as D
from ..errors import ShapeError
from ..tensor import Tensor


def _randn(*shape, dtype):
    from .random import randn

    return randn(*shape, dtype=dtype)


def _float_dtype(A):
    return A.dtype if A.dtype.is_floating_point else D.float32


def _qr_q(X):
    from ..linalg import qr

    return qr(X).Q


def get_approximate_basis(A, q, niter=2, M=None):
    """Q (*, m, q) with orthonormal columns such that Q Qᴴ (A - M) approximates A - M
    (torch._lowrank.get_approximate_basis, Halko et al. algorithm 4.4)."""
    niter = 2 if niter is None else niter
    R = _randn(A.shape[-1], q, dtype=_float_dtype(A))  # (n, q), shared by the batch as torch's
    X = A @ R
    if M is not None:
        X = X - M @ R
    Q = _qr_q(X)
    for _ in range(niter):
        X = A.mH @ Q
        if M is not None:
            X = X - M.mH @ Q
        Q = _qr_q(X)
        X = A @ Q
        if M is not None:
            X = X - M @ Q
        Q = _qr_q(X)
    return Q


def _check_matrix(A, what):
    if not isinstance(A, Tensor):
        raise TypeError(f"pyrite: {what}(): expected a Tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise ShapeError(
            f"pyrite: {what}(): expected a matrix or a batch of matrices (*, m, n), got shape "
            f"{tuple(A.shape)}"
        )


def _svd_lowrank(A, q=6, niter=2, M=None):
    from ..linalg import svd

    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:  # (work on the tall one)
        A = A.mH
        if M is not None:
            M = M.mH
    Q = get_approximate_basis(A, q, niter=niter, M=M)  # (*, m, q)
    B = Q.mH @ A  # (*, q, n)
    if M is not None:
        B = B - Q.mH @ M
    U, S, Vh = svd(B, full_matrices=False)
    V = Vh.mH
    U = Q @ U
    if m < n:
        U, V = V, U
    return U, S, V


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U, S, V) with A - M ≈ U diag(S) Vᴴ of rank q: U (*, m, q), S (*, q), V (*, n, q)
    (torch.svd_lowrank; M, broadcast to A's shape, defaults to none)."""
    _check_matrix(A, "svd_lowrank")
    return _svd_lowrank(A, q=q, niter=niter, M=M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """torch.pca_lowrank: svd_lowrank of A with its column means taken off (`center`); V's
    columns are the principal directions, S²/(m - 1) the covariance's eigenvalues.
    q defaults to min(6, m, n)."""
    _check_matrix(A, "pca_lowrank")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(
            f"pyrite: q(={q}) must be non-negative integer and not greater than min(m, n)"
            f"={min(m, n)}"
        )
    if not (niter >= 0):
        raise ValueError(f"pyrite: niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter=niter, M=None)
    C = A.mean(dim=-2, keepdim=True)
    return _svd_lowrank(A - C, q, niter=niter, M=None)


# ---- LOBPCG ----------------------------------------------------------------------------------
def _lobpcg_args(A, k, B, X, n, iK):
    _check_matrix(A, "lobpcg")
    m = A.shape[-1]
    if A.shape[-2] != m:
        raise ShapeError(f"pyrite: lobpcg(): A must be square, got shape {tuple(A.shape)}")
    for name, t in (("B", B), ("iK", iK)):
        if t is not None and tuple(t.shape[-2:]) != (m, m):
            raise ShapeError(
                f"pyrite: lobpcg(): {name} must have the shape of A {tuple(A.shape)}, got "
                f"{tuple(t.shape)}"
            )
    if X is None:
        k = 1 if k is None else k
        n = k if n is None else n
    else:
        if X.ndim < 2 or X.shape[-2] != m:
            raise ShapeError(
                f"pyrite: lobpcg(): X must be (*, m, n) with m = {m} rows, got {tuple(X.shape)}"
            )
        n = X.shape[-1]
        k = n if k is None else k
    if m < 3 * n:
        raise ValueError(
            f"pyrite: LOBPCG algorithm is not applicable when the number of A rows (={m}) is "
            f"smaller than 3 x the number of requested eigenpairs (={n})"
        )
    if k > n:
        raise ValueError(f"pyrite: lobpcg(): k (={k}) must not exceed n (={n})")
    return k, n


def _rayleigh_ritz(C, S, n, largest):
    """The n extreme Ritz pairs of the symmetric C on the orthonormal basis S (*, m, c):
    (theta (*, n), coefficients Z (*, c, n)), the largest first when `largest`."""
    from ..linalg import eigh

    T = S.mT @ (C @ S)
    T = (T + T.mT) * 0.5  # (exactly symmetric for eigh)
    theta, Z = eigh(T)  # ascending
    c = Z.shape[-1]
    if largest:
        idx = list(range(c - 1, c - 1 - n, -1))
        return theta[..., idx], Z[..., idx]
    return theta[..., :n], Z[..., :n]


def lobpcg(
    A,
    k=None,
    B=None,
    X=None,
    n=None,
    iK=None,
    niter=None,
    tol=None,
    largest=None,
    method=None,
    tracker=None,
    ortho_iparams=None,
    ortho_fparams=None,
    ortho_bparams=None,
):
    """torch.lobpcg: the k largest (or, largest=False, smallest) eigenpairs of the symmetric
    A x = λ B x (B symmetric positive definite, the identity when None) by LOBPCG over a
    block of n ≥ k vectors (X's columns, random when None), preconditioned by iK.

    Returns (E (*, k), X (*, m, k)), the largest eigenvalue first (the smallest when
    largest=False). Runs until every wanted residual ‖Ax - λBx‖ / ((‖A‖ + |λ|‖B‖)‖x‖) is below
    `tol` (default √eps of float32) or after `niter` iterations (default 1000; -1: until
    converged). Each iteration reads one number back. Dense only. E's gradient is
    Hellmann-Feynman's (xᵀ dA x - λ xᵀ dB x, exact at convergence); X has none (its backward
    raises), where torch's differentiates both.

    The basis [X, W, P] is orthonormalized by Householder QR (after B's Cholesky factor L
    turns the problem into L⁻¹ A L⁻ᵀ), so a basis that loses rank as the block converges
    still gives a valid Rayleigh-Ritz step; `method` ("basic", "ortho") and the ortho_*
    parameters are accepted and do not change that."""
    from ..autograd import no_grad
    from ..linalg import cholesky, solve_triangular
    from .combine import cat

    if tracker is not None:
        raise NotImplementedError("pyrite: lobpcg(): tracker is not supported")
    if method not in (None, "basic", "ortho"):
        raise ValueError(f"pyrite: lobpcg(): method must be 'basic' or 'ortho', got {method!r}")
    k, n = _lobpcg_args(A, k, B, X, n, iK)
    largest = True if largest is None else bool(largest)
    niter = 1000 if niter is None else int(niter)
    tol = math.sqrt(1.1920928955078125e-07) if tol is None else float(tol)
    batch = tuple(A.shape[:-2])
    m = A.shape[-1]
    dt = _float_dtype(A)

    with no_grad():
        A0 = A.detach().to(dt)
        L = None
        C = A0
        if B is not None:  # B = L Lᵀ; C = L⁻¹ A L⁻ᵀ, y = Lᵀ x
            L = cholesky(B.detach().to(dt))
            Y = solve_triangular(L, A0, upper=False)  # L⁻¹ A
            C = solve_triangular(L, Y.mT, upper=False).mT  # (L⁻¹ A) L⁻ᵀ = L⁻¹ (L⁻¹ A)ᵀ ᵀ
            C = (C + C.mT) * 0.5
        if X is None:
            Y0 = _randn(*batch, m, n, dtype=dt)
        else:
            Y0 = X.detach().to(dt).expand(*batch, m, n)
            if L is not None:
                Y0 = L.mT @ Y0
        Yb = _qr_q(Y0)
        theta, Z = _rayleigh_ritz(C, Yb, n, largest)
        Yb = Yb @ Z
        P = None
        it = 0
        while True:
            R = C @ Yb - Yb * theta.unsqueeze(-2)  # (*, m, n)
            # (‖A‖ estimated by the largest |Ritz value| seen; y has unit norm)
            a_norm = theta.abs().amax(-1, keepdim=True)
            rerr = R[..., :k].norm(dim=-2) / (a_norm + theta[..., :k].abs()).clamp_min(1e-30)
            if float(rerr.max()) < tol or (niter >= 0 and it >= niter):
                break
            W = R
            if iK is not None:
                # w = iK r with r = L r̃ in the original space; w̃ = Lᵀ w
                W = iK.detach().to(dt) @ (R if L is None else L @ R)
                W = W if L is None else L.mT @ W
            parts = [Yb, W] if P is None else [Yb, W, P]
            S = _qr_q(cat(parts, dim=-1))
            theta, Z = _rayleigh_ritz(C, S, n, largest)
            Y_new = S @ Z
            # P: the new block's part outside the old one's span
            P = _qr_q(Y_new - Yb @ (Yb.mT @ Y_new))
            Yb = Y_new
            it += 1
        Xk = Yb[..., :k]
        if L is not None:  # x = L⁻ᵀ y (B-orthonormal)
            Xk = solve_triangular(L.mT, Xk, upper=True)
        Xk = Xk.contiguous()
        E = theta[..., :k].contiguous()
    if not (A.requires_grad or (B is not None and B.requires_grad)):
        return E, Xk
    # E's gradient: the Rayleigh quotient of the converged (detached) vectors, recorded
    num = (Xk * (A.to(dt) @ Xk)).sum(-2)
    if B is None:
        return num, Xk
    return num / (Xk * (B.to(dt) @ Xk)).sum(-2), Xk


__all__ = ["svd_lowrank", "pca_lowrank", "lobpcg"]
