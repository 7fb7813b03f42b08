"""Backward rules of the linear-algebra functions whose kernels factor a work buffer in place
(LU, Cholesky, Jacobi eigh and SVD: ops/linalg.py), for torch.linalg's names (pyrite/linalg.py
GRADS) and torch's top-level ones (ops/linalg_top.py GRADS). Each is torch's formula, written
with public ops so a double backward records through it. The LU family and the Householder
product have theirs in ops/linalg_grads_lu.py; functions without a rule are OPAQUE there:
their backward raises.

    det:        gA = g·adj(A)ᵀ, from the SVD (singular A too); det(A)·A⁻ᵀ for a double backward
    slogdet:    gA = g_logabsdet·A⁻ᵀ  (sign has no gradient); logdet the same
    inv:        gA = -Xᵀ g Xᵀ, X = A⁻¹
    solve:      gB = solve(Aᵀ, g) (left=False: g A⁻ᵀ); gA = -gB Xᵀ (left=False: -Xᵀ gB)
    cholesky:   G = L⁻ᵀ Φ(Lᵀ gL) L⁻¹ (Φ: the lower triangle, its diagonal halved), gA = (G + Gᵀ)/2
    eigh:       gA = V (diag(gΛ) + skew(Vᵀ gV)/2 / E) Vᵀ, E_ij = λ_j - λ_i off the diagonal
                (0 on it); the skew part makes gA symmetric, as torch's
    svd:        gA = U [(skew(Uᵀ gU) S + S skew(Vᵀ gV)) / E + diag(gS)] Vᵀ
                     + (I - U Uᵀ) gU S⁻¹ Vᵀ + U S⁻¹ gVᵀ (I - V Vᵀ),  E_jk = s_k² - s_j²;
                full_matrices of a rectangular A: through U's first k columns and Vh's first k
                rows only (torch's rule: the others carry no gradient)
    svdvals, eigvalsh: the values' terms alone (the vectors recomputed)
    pinv:       torch's pinv_backward
    matrix_exp: the upper-right block of exp([[Aᵀ, g], [0, Aᵀ]])
    lstsq:      the solution's, through X = pinv(A)·B
    qr:         (gQ + Q·copyltu(R gRᵀ - gQᵀ Q))·R⁻ᵀ for m >= n; wide A through its square part
"""

from __future__ import annotations

from ..errors import ShapeError


def _LA():
    from .. import linalg

    return linalg


def _t(x):
    return x.transpose(-2, -1)


def _mat(v):
    return v.unsqueeze(-1).unsqueeze(-1)


def _arg(ctx, i, name, default):
    if len(ctx.args) > i:
        return ctx.args[i]
    return ctx.kwargs.get(name, default)


def _live(ctx, recompute):
    """The saved output, or recomputed by the recorded public function while a double backward
    is recorded (the saved one is detached: the second derivative must see it depend on A)."""
    from .. import autograd

    return recompute() if autograd.is_grad_enabled() else ctx.out


def _first(g):
    return g[0] if isinstance(g, (tuple, list)) else g


def _out0(out):
    return out[0] if isinstance(out, tuple) else out


# ---- determinants ---------------------------------------------------------------------------
def _g_det(ctx, g):
    """g·adj(A)ᵀ. From the SVD A = U S Vh: adj(A)ᵀ = det(U)·det(Vh)·U·diag(Π_{j≠i} s_j)·Vh,
    defined for singular A too (torch's answer there; det(A)·A⁻ᵀ divides by zero). While a
    double backward is recorded, det(A)·A⁻ᵀ (differentiable again; A must be invertible)."""
    from .. import autograd
    from .combine import cat
    from .creation import ones_like

    A = ctx.args[0]
    LA = _LA()
    if autograd.is_grad_enabled():
        d = _live(ctx, lambda: LA.det(A))
        return (_mat(g * d) * _t(LA.inv(A)),)
    U, S, Vh = LA.svd(A)
    one = ones_like(S[..., :1])
    before = cat([one, S[..., :-1].cumprod(-1)], -1)  # Π_{j<i} s_j
    after = cat([S[..., 1:].flip(-1).cumprod(-1).flip(-1), one], -1)  # Π_{j>i} s_j
    sign = LA.det(U) * LA.det(Vh)
    return (_mat(g * sign) * ((U * (before * after).unsqueeze(-2)) @ Vh),)


def _g_slogdet(ctx, g):
    glog = g[1]
    if glog is None:
        return (None,)
    return (_mat(glog) * _t(_LA().inv(ctx.args[0])),)


def _g_logdet(ctx, g):
    return (_mat(g) * _t(_LA().inv(ctx.args[0])),)


# ---- inverse and solves -----------------------------------------------------------------------
def _g_inv(ctx, g):
    g = _first(g)
    if g is None:
        return (None,)
    X = _t(_out0(_live(ctx, lambda: _LA().inv(ctx.args[0]))))
    return (-(X @ g @ X),)


def _is_vector_rhs(A, B) -> bool:
    """torch.linalg.solve's rule: B is a (batch of) vector(s)."""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _g_solve(ctx, g):
    g = _first(g)
    A, B = ctx.args[0], ctx.args[1]
    left = _arg(ctx, 2, "left", True)
    if g is None:
        return None, None
    LA = _LA()
    X = _out0(_live(ctx, lambda: LA.solve(A, B, left=left)))
    At = _t(A)
    if _is_vector_rhs(A, B):
        if not left:
            raise ShapeError("pyrite: linalg.solve: a vector B needs left=True")
        gB = LA.solve(At, g)
        gA = -(gB.unsqueeze(-1) * X.unsqueeze(-2)) if ctx.needs[0] else None
        return gA, gB if ctx.needs[1] else None
    gB = LA.solve(At, g, left=left)
    gA = None
    if ctx.needs[0]:
        gA = -(gB @ _t(X)) if left else -(_t(X) @ gB)
    return gA, gB if ctx.needs[1] else None


def _g_solve_triangular(ctx, g):
    A = ctx.args[0]
    upper = ctx.kwargs["upper"] if "upper" in ctx.kwargs else ctx.args[2]
    left = ctx.kwargs.get("left", True)
    unit = ctx.kwargs.get("unitriangular", False)
    LA = _LA()
    kw = {"left": left, "unitriangular": unit}
    X = _live(ctx, lambda: LA.solve_triangular(A, ctx.args[1], upper=upper, **kw))
    gB = LA.solve_triangular(_t(A), g, upper=not upper, **kw)
    gA = None
    if ctx.needs[0]:
        gA = -(gB @ _t(X)) if left else -(_t(X) @ gB)
        gA = gA.triu(1 if unit else 0) if upper else gA.tril(-1 if unit else 0)
    return gA, gB if ctx.needs[1] else None


# ---- Cholesky -----------------------------------------------------------------------------
def _cholesky_grad(L, gL):
    LA = _LA()
    P = _t(L) @ gL
    P = P.tril() - 0.5 * P.diagonal(0, -2, -1).diag_embed()
    Y = LA.solve_triangular(_t(L), P, upper=True)  # L⁻ᵀ Φ
    G = LA.solve_triangular(L, Y, upper=False, left=False)  # L⁻ᵀ Φ L⁻¹
    return 0.5 * (G + _t(G))


def _g_cholesky(ctx, g):
    g = _first(g)
    if g is None:
        return (None,)
    upper = _arg(ctx, 1, "upper", False)
    L = _out0(_live(ctx, lambda: _LA().cholesky(ctx.args[0], upper=upper)))
    if upper:
        L, g = _t(L), _t(g)
    return (_cholesky_grad(L, g),)


def _g_cholesky_solve(ctx, g):
    """torch's cholesky_solve_backward: gB = cholesky_solve(g, L); with C = gB Xᵀ + X gBᵀ,
    gL = -C L (lower) or -L C (upper): a full matrix, as torch's."""
    from .linalg_top import cholesky_solve

    B, L = ctx.args[0], ctx.args[1]
    upper = _arg(ctx, 2, "upper", False)
    X = _live(ctx, lambda: cholesky_solve(B, L, upper))
    gB = cholesky_solve(g, L, upper)
    gL = None
    if ctx.needs[1]:
        C = gB @ _t(X) + X @ _t(gB)
        gL = -(L @ C) if upper else -(C @ L)
    return gB if ctx.needs[0] else None, gL


def _g_cholesky_inverse(ctx, g):
    """torch's cholesky_inverse_backward: with C = X (g + gᵀ) X, gL = -C L (or -L C)."""
    from .linalg_top import cholesky_inverse

    L = ctx.args[0]
    upper = _arg(ctx, 1, "upper", False)
    X = _live(ctx, lambda: cholesky_inverse(L, upper))
    C = X @ (g + _t(g)) @ X
    return (-(L @ C) if upper else -(C @ L),)


# ---- symmetric eigendecomposition -------------------------------------------------------------
def _eigh_grad(lam, V, glam, gV):
    from .creation import zeros_like
    from .elementwise import where

    inner = glam.diag_embed() if glam is not None else None
    if gV is not None:
        E = lam.unsqueeze(-2) - lam.unsqueeze(-1)  # E[i, j] = λ_j - λ_i
        n = lam.shape[-1]
        off = ~_eye_bool(n)
        M = _t(V) @ gV
        F = where(off, (0.5 * (M - _t(M))) / where(off, E, 1.0), 0.0)
        inner = F if inner is None else inner + F
    if inner is None:
        return zeros_like(V)
    return V @ inner @ _t(V)


def _eye_bool(n):
    from .creation import eye

    return eye(n) > 0


def _g_eigh(ctx, g):
    lam, V = _live(ctx, lambda: _LA().eigh(ctx.args[0], _arg(ctx, 1, "UPLO", "L")))
    return (_eigh_grad(lam, V, g[0], g[1]),)


def _g_eigvalsh(ctx, g):
    UPLO = _arg(ctx, 1, "UPLO", "L")
    lam, V = _LA().eigh(ctx.args[0], UPLO)
    return (_eigh_grad(lam, V, g, None),)


# ---- singular value decomposition -------------------------------------------------------------
def _svd_grad(A, U, S, Vh, gU, gS, gVh, full):
    from .creation import zeros_like
    from .elementwise import where

    m, n = A.shape[-2], A.shape[-1]
    k = S.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return zeros_like(A)
        return (U[..., :k] * gS.unsqueeze(-2)) @ Vh[..., :k, :]
    if full and m != n:  # torch's rule: the extra columns of U (rows of Vh) carry no gradient
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = gU[..., :k] if gU is not None else None
        gVh = gVh[..., :k, :] if gVh is not None else None
    V = _t(Vh)
    gV = _t(gVh) if gVh is not None else None
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)  # E[j, l] = s_l² - s_j²
    off = ~_eye_bool(k)
    E = where(off, E, 1.0)
    inner = None
    if gU is not None:
        UtgU = _t(U) @ gU
        inner = (UtgU - _t(UtgU)) * S.unsqueeze(-2)
    if gV is not None:
        VtgV = _t(V) @ gV
        t = S.unsqueeze(-1) * (VtgV - _t(VtgV))
        inner = t if inner is None else inner + t
    inner = where(off, inner / E, 0.0)
    if gS is not None:
        inner = inner + gS.diag_embed()
    gA = U @ inner @ Vh
    if gU is not None and m > k:
        gA = gA + ((gU - U @ (_t(U) @ gU)) / S.unsqueeze(-2)) @ Vh
    if gV is not None and n > k:
        gA = gA + U @ _t((gV - V @ (_t(V) @ gV)) / S.unsqueeze(-2))
    return gA


def _g_svd(ctx, g):
    full = _arg(ctx, 1, "full_matrices", True)
    U, S, Vh = _live(ctx, lambda: _LA().svd(ctx.args[0], full_matrices=full))
    return (_svd_grad(ctx.args[0], U, S, Vh, g[0], g[1], g[2], full),)


def _g_svd_top(ctx, g):
    """torch.svd: (U, S, V), `some` the reduced form; without compute_uv only S."""
    from .. import autograd

    some = _arg(ctx, 1, "some", True)
    if autograd.is_grad_enabled():  # (as _live: recomputed, recorded, for a double backward)
        U, S, Vh = _LA().svd(ctx.args[0], full_matrices=not some)
        V = _t(Vh)
    else:
        U, S, V = ctx.out
    if not _arg(ctx, 2, "compute_uv", True):
        U, S, Vh = _LA().svd(ctx.args[0], full_matrices=False)
        return (_svd_grad(ctx.args[0], U, S, Vh, None, g[1], None, False),)
    gV = g[2]
    return (
        _svd_grad(ctx.args[0], U, S, _t(V), g[0], g[1], None if gV is None else _t(gV), not some),
    )


def _g_svdvals(ctx, g):
    U, S, Vh = _LA().svd(ctx.args[0], full_matrices=False)
    return (_svd_grad(ctx.args[0], U, S, Vh, None, g, None, False),)


# ---- pseudoinverse ----------------------------------------------------------------------------
def _g_pinv(ctx, g):
    """torch's pinv_backward (FunctionsManual.cpp), for the pseudoinverse X of A (m, n)."""
    A = ctx.args[0]
    X = _live(ctx, lambda: _LA().pinv(A, **_pinv_kwargs(ctx)))
    return (_pinv_grad(A, X, g),)


def _g_lstsq(ctx, g):
    """The solution's gradient through X = pinv(A)·B (the minimum-norm least-squares solution
    lstsq returns): gB = pinv(A)ᵀ g, gA = pinv's backward of g Bᵀ. Residuals, rank and
    singular values carry none."""
    gX = g[0] if isinstance(g, (tuple, list)) else g
    if gX is None:
        return None, None
    A, B = ctx.args[0], ctx.args[1]
    P = _LA().pinv(A)
    vec = _is_vector_rhs(A, B)  # (the forward's rule: a B of one dim fewer may be matrices)
    Bm = B.unsqueeze(-1) if vec else B
    gm = gX.unsqueeze(-1) if vec else gX
    gB = _t(P) @ gm if ctx.needs[1] else None
    if gB is not None and vec:
        gB = gB.squeeze(-1)
    gA = _pinv_grad(A, P, gm @ _t(Bm)) if ctx.needs[0] else None
    return gA, gB


def _pinv_grad(A, X, g):
    """d pinv(A) adjoint: torch's pinv_backward for X = pinv(A), the incoming gradient g."""
    m, n = A.shape[-2], A.shape[-1]
    Xh, gh = _t(X), _t(g)
    if m <= n:
        K = gh @ X
        KXh = K @ Xh
        gA = -_t(X @ K) + KXh - (A @ X) @ KXh + (Xh @ X) @ (gh - K @ A)
    else:
        K = X @ gh
        XhK = Xh @ K
        gA = -_t(K @ X) + (gh - A @ K) @ X @ Xh + XhK - XhK @ X @ A
    return gA


def _pinv_kwargs(ctx):
    """pinv's cutoff arguments, from linalg.pinv's or torch.pinverse's (rcond) call."""
    kw = {k: v for k, v in ctx.kwargs.items() if k in ("atol", "rtol", "hermitian")}
    if ctx.name == "pinverse":
        kw["rtol"] = _arg(ctx, 1, "rcond", 1e-15)
    elif len(ctx.args) > 1 and ctx.args[1] is not None:
        kw["rtol"] = ctx.args[1]  # (rcond, linalg.pinv's second positional)
    if len(ctx.args) > 2:
        kw["hermitian"] = ctx.args[2]
    return kw


# ---- QR --------------------------------------------------------------------------------------
def _qr_grad(A, Q, R, gQ, gR, mode):
    """A = QR with m >= n (Q (m, n) reduced, or square): with M = R gRᵀ - gQᵀ Q,
    gA = (gQ + Q·copyltu(M))·R⁻ᵀ, copyltu(M) = tril(M) + tril(M, -1)ᵀ (Walter and Lehmann;
    Liao et al., 2019): torch's answer. A wide A splits as [A1 A2] (A1 square); a complete Q
    of a tall A has no derivative (torch raises too)."""
    from .creation import zeros_like

    m, n = A.shape[-2], A.shape[-1]
    if mode == "r":
        raise RuntimeError(
            "pyrite: The derivative of linalg.qr depends on Q, which is not computed when "
            "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going to "
            "differentiate through linalg.qr."
        )
    if mode == "complete" and m > n:  # (torch's answer: Q's last m - n columns are arbitrary)
        raise RuntimeError(
            "pyrite: The QR decomposition is not differentiable when mode='complete' and "
            "nrows > ncols."
        )
    gQ = zeros_like(Q) if gQ is None else gQ
    gR = zeros_like(R) if gR is None else gR.triu()
    if m < n:  # A = [A1 A2], Q R1 = A1 (square), R2 = Qᵀ A2: A1's QR with gQ + A2 gR2ᵀ
        A1, A2 = A[..., :m], A[..., m:]
        gR1, gR2 = gR[..., :m], gR[..., m:]
        from .combine import cat

        g1 = _qr_grad(A1, Q, R[..., :m], gQ + A2 @ _t(gR2), gR1, "reduced")
        return cat([g1, Q @ gR2], -1)
    M = R @ _t(gR) - _t(gQ) @ Q
    cl = M.tril() + _t(M.tril(-1))
    return _LA().solve_triangular(_t(R), gQ + Q @ cl, upper=False, left=False)  # (·R⁻ᵀ)


def _g_qr(ctx, g):
    mode = _arg(ctx, 1, "mode", "reduced")
    Q, R = _live(ctx, lambda: _LA().qr(ctx.args[0], mode))
    return (_qr_grad(ctx.args[0], Q, R, g[0], g[1], mode),)


def _g_qr_top(ctx, g):
    mode = "reduced" if _arg(ctx, 1, "some", True) else "complete"
    Q, R = _live(ctx, lambda: _LA().qr(ctx.args[0], mode))
    return (_qr_grad(ctx.args[0], Q, R, g[0], g[1], mode),)


# ---- matrix exponential -----------------------------------------------------------------------
def _g_matrix_exp(ctx, g):
    """The upper-right block of exp([[Aᵀ, g], [0, Aᵀ]]): the Fréchet derivative's adjoint
    (Najfeld and Havel, 1995), with the same Padé and squarings as the forward."""
    from .combine import cat
    from .creation import zeros_like

    A = ctx.args[0]
    n = A.shape[-1]
    At = _t(A)
    top = cat([At, g], -1)
    bottom = cat([zeros_like(At), At], -1)
    E = _LA().matrix_exp(cat([top, bottom], -2))
    return (E[..., :n, n:],)


# torch.linalg's names (pyrite/linalg.py)
LINALG = {
    "det": _g_det,
    "slogdet": _g_slogdet,
    "inv": _g_inv,
    "inv_ex": _g_inv,
    "solve": _g_solve,
    "solve_ex": _g_solve,
    "solve_triangular": _g_solve_triangular,
    "cholesky": _g_cholesky,
    "cholesky_ex": _g_cholesky,
    "eigh": _g_eigh,
    "eigvalsh": _g_eigvalsh,
    "svd": _g_svd,
    "svdvals": _g_svdvals,
    "pinv": _g_pinv,
    "matrix_exp": _g_matrix_exp,
    "lstsq": _g_lstsq,
    "qr": _g_qr,
}
# torch's top-level names (ops/linalg_top.py)
TOP = {
    "det": _g_det,
    "slogdet": _g_slogdet,
    "logdet": _g_logdet,
    "inverse": _g_inv,
    "cholesky": _g_cholesky,
    "svd": _g_svd_top,
    "pinverse": _g_pinv,
    "matrix_exp": _g_matrix_exp,
    "cholesky_solve": _g_cholesky_solve,
    "cholesky_inverse": _g_cholesky_inverse,
    "qr": _g_qr_top,
}
