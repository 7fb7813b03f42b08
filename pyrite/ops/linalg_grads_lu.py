"""Backward rules of the LU family and of the Householder product: torch's formulas
(FunctionsManual.cpp: linalg_lu_backward, lu_factor_ex_backward, lu_unpack_backward,
linalg_lu_solve_LU, householder_product_backward), written with public ops (matmul,
solve_triangular, tril/triu, cat) so they batch and a double backward records through them.

    lu (A = P L U, k = min(m, n)):  square: gA = P L⁻ᵀ [tril₋₁(Lᵀ gL) + triu(gU Uᵀ)] U⁻ᵀ;
        wide and tall A through their square block (the extra block of U, or L, passes through)
    lu_factor(_ex), torch.lu:  lu's rule with gL = g[:, :k], gU = g[:k, :] (the compact LU)
    lu_unpack:  gLU = tril₋₁(gL) + triu(gU), the rectangular blocks placed back
    lu_solve:   gB = the adjoint solve; gLU = tril₋₁(gL') + triu(gR) from gR = -U⁻ᵀ gX Xᵀ (and
        the mirrored form when left == adjoint)
    householder_product (Q = H₀…H_{k-1}, Hᵢ = I - τᵢ vᵢ vᵢᵀ):  with Kᵢ = (H₀…Hᵢ)⁻¹ Q gᵀ H₀…Hᵢ₋₁,
        gvᵢ = -τᵢ (Kᵢᵀ + Kᵢ) vᵢ, gτᵢ = -vᵢᵀ Kᵢ vᵢ; Hᵢ⁻¹ = H(τᵢ / (τᵢ‖vᵢ‖² - 1))
    geqrf:      none (torch has none either): the backward raises NotImplementedError

torch.linalg.ldl_factor / ldl_solve are not in pyrite (torch has no derivative for them).
"""

from __future__ import annotations

from .linalg_grads import _LA, _arg, _live, _t


def _tri(A, B, *, upper, left=True, unit=False):
    return _LA().solve_triangular(A, B, upper=upper, left=left, unitriangular=unit)


def _cat(parts, dim):
    from .combine import cat

    return cat(parts, dim)


def _zeros(shape):
    from .creation import zeros

    return zeros(*shape)


# ---- LU -------------------------------------------------------------------------------------
def _factors(LU, pivots):
    """P (no gradient: a permutation), and L (*, m, k) unit lower, U (*, k, n) upper as
    recorded functions of LU (so a double backward sees them depend on it)."""
    from .creation import eye
    from .linalg_solve import lu_unpack

    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    P = lu_unpack(LU.detach(), pivots, unpack_data=False)[0]
    L = LU[..., :, :k].tril(-1) + eye(m, k)
    U = LU[..., :k, :].triu()
    return P, L, U


def _lu_grad(gL, gU, P, L, U):
    """torch's linalg_lu_backward for A = P L U (pivoted), L (*, m, k), U (*, k, n)."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if gL is None and gU is None:
        return None
    if m == n:
        G = (_t(L) @ gL).tril(-1) if gL is not None else None
        if gU is not None:
            t = (gU @ _t(U)).triu()
            G = t if G is None else G + t
        G = _tri(_t(U), G, upper=False, left=False)  # · U⁻ᵀ
        G = _tri(_t(L), G, upper=True, unit=True)  # L⁻ᵀ ·
        return P @ G
    if m < n:  # wide: A = P L (U1 | U2)
        U1 = U[..., :, :k]
        G = _t(L) @ gL if gL is not None else None
        if gU is not None:
            t = gU.triu() @ _t(U)
            G = -t if G is None else G - t
        G = _tri(_t(U1), G.tril(-1), upper=False, left=False)
        if gU is not None:
            G = _cat([G + gU[..., :, :k].triu(), gU[..., :, k:]], -1)
        G = _tri(_t(L), G, upper=True, unit=True)
        if gU is None:
            G = _cat([G, _zeros((*G.shape[:-1], n - k))], -1)
        return P @ G
    # tall: A = P (L1; L2) U
    L1 = L[..., :k, :]
    G = gU @ _t(U) if gU is not None else None
    if gL is not None:
        t = _t(L) @ gL.tril(-1)
        G = -t if G is None else G - t
    G = _tri(_t(L1), G.triu(), upper=True, unit=True)
    if gL is not None:
        G = _cat([G + gL[..., :k, :].tril(-1), gL[..., k:, :]], -2)
    G = _tri(_t(U), G, upper=False, left=False)
    if gL is None:
        G = _cat([G, _zeros((*G.shape[:-2], m - k, k))], -2)
    return P @ G


def _g_lu(ctx, g):
    """linalg.lu: (P, L, U); P carries no gradient (torch's output_differentiability)."""
    A = ctx.args[0]
    pivot = ctx.kwargs.get("pivot", True)
    P, L, U = _live(ctx, lambda: _LA().lu(A, pivot=pivot))
    return (_lu_grad(g[1], g[2], P.detach(), L, U),)


def _g_lu_factor(ctx, g):
    """lu_factor, lu_factor_ex and torch.lu: the compact LU's gradient split into L's
    (columns :k) and U's (rows :k); the rule reads only the strict lower part of the first and
    the upper part of the second."""
    from .. import autograd

    g = g[0] if isinstance(g, (tuple, list)) else g
    if g is None:
        return (None,)
    A = ctx.args[0]
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    if autograd.is_grad_enabled():  # (a double backward is recorded: L, U recomputed from A)
        P, L, U = _LA().lu(A)
        P = P.detach()
    else:
        P, L, U = _factors(ctx.out[0], ctx.out[1])
    return (_lu_grad(g[..., :, :k], g[..., :k, :], P, L, U),)


def _g_lu_unpack(ctx, g):
    """torch's lu_unpack_backward: L's strict lower part and U's upper part, back into the
    compact (m, n) matrix (the rectangular block of the longer factor placed beside)."""
    LU = ctx.args[0]
    gL, gU = g[1], g[2]
    m, n = LU.shape[-2], LU.shape[-1]
    k = min(m, n)
    if not _arg(ctx, 2, "unpack_data", True) or (gL is None and gU is None):
        return None, None
    if gL is not None and gU is not None:
        if m == n:
            return gL.tril(-1) + gU.triu(), None
        G1 = gL[..., :k, :].tril(-1) + gU[..., :, :k].triu()
        if m > n:
            return _cat([G1, gL[..., k:, :]], -2), None
        return _cat([G1, gU[..., :, k:]], -1), None
    if gL is not None:
        G = gL.tril(-1)
        if m < n:
            G = _cat([G, _zeros((*G.shape[:-1], n - m))], -1)
        return G, None
    G = gU.triu()
    if m > n:
        G = _cat([G, _zeros((*G.shape[:-2], m - n, n))], -2)
    return G, None


def _g_lu_solve(ctx, g):
    """B: the solve with the adjoint system (the same factors). LU: torch's linalg_lu_solve_LU
    (for left != adjoint, X = U⁻¹ L⁻¹ Pᵀ B read as a function of L and U)."""
    LU, piv, B = ctx.args[0], ctx.args[1], ctx.args[2]
    left = _arg(ctx, 3, "left", True)
    adjoint = _arg(ctx, 4, "adjoint", False)
    LA = _LA()
    gB = LA.lu_solve(LU, piv, g, left=left, adjoint=not adjoint) if ctx.needs[2] else None
    if not ctx.needs[0]:
        return None, None, gB
    X = _live(ctx, lambda: LA.lu_solve(LU, piv, B, left=left, adjoint=adjoint))
    P, L, U = _factors(LU, piv)
    if left != adjoint:
        # gR = U⁻ᵀ op(-gX) op(X)ᵀ; gL = tril₋₁(L⁻ᵀ gR Uᵀ)
        gR = _tri(_t(U), -(g @ _t(X) if left else _t(g) @ X), upper=False)
        gL = _tri(_t(L), gR @ _t(U), upper=True, unit=True).tril(-1)
        return gL + gR.triu(), None, gB
    # gR = -Pᵀ op(X) op(gX)ᵀ P L⁻ᵀ; gU = triu(Lᵀ gR U⁻ᵀ)
    gR = -(_t(P) @ (X @ _t(g) if left else _t(X) @ g) @ P)
    gR = _tri(_t(L), gR, upper=True, left=False, unit=True)
    gU = _tri(_t(U), _t(L) @ gR, upper=False, left=False).triu()
    return gR.tril(-1) + gU, None, gB


# ---- Householder product --------------------------------------------------------------------
def _reflect(K, v, t, left):
    """(I - t v vᵀ) K (left) or K (I - t v vᵀ); v (*, m, 1), t (*, 1, 1)."""
    if left:
        return K - (t * v) @ (_t(v) @ K)
    return K - (K @ (t * v)) @ _t(v)


def _householder_grad(g, Q, A, tau):
    """torch's householder_product_backward (real case), out of place: a loop over the k
    reflectors carrying K = (H₀…Hᵢ)⁻¹ Q gᵀ H₀…Hᵢ₋₁ (m, m). Assumes every Hᵢ invertible
    (τᵢ‖vᵢ‖² ≠ 1), as torch does; geqrf's reflectors always are."""
    from .creation import eye, zeros_like

    m, n = A.shape[-2], A.shape[-1]
    k = tau.shape[-1]
    if A.numel() == 0 or k == 0:
        return zeros_like(A), zeros_like(tau)
    V = A.tril(-1) + eye(m, n)  # the reflectors, v[i] = 1 implied
    sq = (V[..., :, :k] * V[..., :, :k]).sum(-2)  # ‖vᵢ‖² (*, k)
    sigma = tau / (tau * sq - 1.0)  # H(σᵢ) = H(τᵢ)⁻¹
    col = lambda M, i: M[..., :, i : i + 1]  # noqa: E731
    sca = lambda s, i: s[..., i : i + 1].unsqueeze(-1)  # noqa: E731
    K = _reflect(Q @ _t(g), col(V, 0), sca(sigma, 0), left=True)
    gv, gt = [], []
    for i in range(k):
        v, t = col(V, i), sca(tau, i)
        vK = _t(v) @ K  # (*, 1, m)
        gv.append(-t * _t(vK) - t * (K @ v))
        gt.append(-(vK @ v).squeeze(-1))
        if i + 1 < k:
            K = _reflect(K, col(V, i + 1), sca(sigma, i + 1), left=True)
            K = _reflect(K, v, t, left=False)
    if k < n:
        gv.append(zeros_like(A[..., :, k:]))
    return _cat(gv, -1).tril(-1), _cat(gt, -1)


def _g_householder_product(ctx, g):
    A, tau = ctx.args[0], ctx.args[1]
    Q = _live(ctx, lambda: _LA().householder_product(A, tau))
    gA, gtau = _householder_grad(g, Q, A, tau)
    return gA if ctx.needs[0] else None, gtau if ctx.needs[1] else None


def _g_geqrf(ctx, g):
    raise NotImplementedError(
        "pyrite: the derivative for 'geqrf' is not implemented (torch has none either): "
        "differentiate through linalg.qr, or linalg.householder_product of geqrf's outputs"
    )


_g_geqrf.saves = frozenset()

# torch.linalg's names (pyrite/linalg.py)
LINALG = {
    "lu": _g_lu,
    "lu_factor": _g_lu_factor,
    "lu_factor_ex": _g_lu_factor,
    "lu_solve": _g_lu_solve,
    "householder_product": _g_householder_product,
}
# torch's top-level names (ops/linalg_top.py)
TOP = {
    "lu": _g_lu_factor,
    "lu_unpack": _g_lu_unpack,
    "orgqr": _g_householder_product,
    "geqrf": _g_geqrf,
}
