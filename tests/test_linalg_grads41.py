"""Gradients of the LU family (linalg.lu, lu_factor, lu_factor_ex, torch.lu, lu_unpack, lu_solve
with respect to LU) and of the Householder product (linalg.householder_product, torch.orgqr):
ops/linalg_grads_lu.py. Also the rules that already existed, on awkward and batched shapes
(solve_triangular, matrix_exp, eigh, svd with full_matrices on rectangular A, qr's modes), and
the backward torch refuses (geqrf; qr 'r', and 'complete' of a tall A), refused alike.

The oracle is torch autograd in float64 on the float32-rounded inputs; pyrite runs in float32.
Tolerance (`_tol`): a backward rule is a few products and triangular solves, so its float32
error is bounded by about n·u·κ times the largest gradient entry, u = 2⁻²⁴ and κ the condition
number of what the rule divides by: κ(L)·κ(U) for the LU rules (one solve with each factor),
the spread of the singular values or eigenvalues (σ_max / the smallest gap or σ_min) for svd and
eigh, κ(R) for qr. The factor 16 covers the forward's own error (the factors themselves are
computed in float32) and the sum over n terms; the inputs are built well-conditioned (κ below
~20; `_tol` refuses κ >= 50, so a broken generator cannot widen the tolerance unseen), so the
tolerance stays below ~1e-4 relative. Measured over 6 seeds: 1e-7 to 1.5e-6 relative.

Finite differences: WebGPU has no float64, so pr.autograd.gradcheck runs in float32 (central
differences, eps 1e-3, atol 1e-3, rtol 1e-2: its defaults, documented in autograd_check.py);
the float64 finite-difference check is not possible on this path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.oracle import same_error  # noqa: E402

U32 = 2.0**-24


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _p(a):
    return pr.tensor(np.asarray(a, dtype=np.float32))


def _tol(n, kappa):
    assert kappa < 50, f"input not well-conditioned (κ = {kappa:.3g}): the generator broke"
    return 16 * max(n, 2) * U32 * kappa


def _grads(fn_t, fn_p, arrays, rng, create=False):
    """Σ w·out over the differentiable float outputs (w drawn here, the same for both), then
    the gradients of each input: torch float64, pyrite float32."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ps = [_p(a).requires_grad_() for a in arrays]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.lu's deprecation warning
        outs_t, outs_p = fn_t(*ts), fn_p(*ps)
    if not isinstance(outs_t, (tuple, list)):
        outs_t, outs_p = (outs_t,), (outs_p,)
    lt = lp = 0
    for a, b in zip(outs_t, outs_p):
        if a is None or not a.dtype.is_floating_point or not a.requires_grad:
            continue  # (P of linalg.lu: torch gives it no gradient)
        w = rng.standard_normal(tuple(a.shape))
        lt = lt + (a * torch.tensor(w)).sum()
        lp = lp + (b * _p(w)).sum()
    return ts, ps, lt, lp


def _check(fn_t, fn_p, arrays, rng, n, kappa):
    """Gradients against torch's; returns the largest relative error (for the report)."""
    ts, ps, lt, lp = _grads(fn_t, fn_p, arrays, rng)
    lt.backward()
    lp.backward()
    worst = 0.0
    for t, p in zip(ts, ps):
        gt, gp = t.grad.numpy(), p.grad.numpy()
        assert gp.shape == gt.shape
        scale = max(np.abs(gt).max(), 1e-30)
        np.testing.assert_allclose(gp, gt, rtol=0, atol=_tol(n, kappa) * scale)
        worst = max(worst, np.abs(gp - gt).max() / scale)
    return worst


def _check_double(fn_t, fn_p, arrays, rng, n, kappa):
    """The gradient of Σ g² for g the first gradient (a double backward), against torch's;
    a second backward compounds the error of the first: the tolerance is κ times wider."""
    ts, ps, lt, lp = _grads(fn_t, fn_p, arrays, rng)
    gt = torch.autograd.grad(lt, ts, create_graph=True)
    gp = pr.autograd.grad(lp, ps, create_graph=True)
    sum((g * g).sum() for g in gt).backward()
    sum((g * g).sum() for g in gp).backward()
    for t, p in zip(ts, ps):
        want = t.grad.numpy()
        atol = _tol(n, kappa) * kappa * np.abs(want).max()
        np.testing.assert_allclose(p.grad.numpy(), want, rtol=0, atol=atol)


# ---- inputs ---------------------------------------------------------------------------------
def _general(rng, shape):
    """Random entries plus 2√k on the main diagonal (k = min(m, n)): partial pivoting then
    keeps the diagonal, and L and U stay well-conditioned."""
    m, n = shape[-2:]
    k = min(m, n)
    return _f32(rng.standard_normal(shape) + 2 * np.sqrt(k) * np.eye(m, n))


def _lu_kappa(A):
    """κ(L₁)·κ(U₁) of A's pivoted LU (the square blocks that the rules solve with)."""
    _, L, U = torch.linalg.lu(torch.tensor(A))
    k = min(A.shape[-2:])
    L1, U1 = L[..., :k, :k].numpy(), U[..., :k, :k].numpy()
    return float(np.max(np.linalg.cond(L1) * np.linalg.cond(U1)))


def _spectrum(rng, shape, lo=1.0, hi=3.0):
    """A = U·diag(s)·Vᵀ with s evenly spread over [lo, hi] (shuffled), U and V random
    orthogonal: singular values apart by (hi - lo)/(k - 1), the smallest lo."""
    m, n = shape[-2:]
    k = min(m, n)
    batch = shape[:-2]
    U = np.linalg.qr(rng.standard_normal(batch + (m, m)))[0][..., :k]
    V = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0][..., :k]
    s = np.linspace(lo, hi, k)[rng.permutation(k)]
    return _f32((U * s) @ np.swapaxes(V, -1, -2))


def _spread(s, gaps_only=False):
    """The largest |value| over the smallest gap between values (svd: or the smallest σ, which
    its rule divides by too; eigh divides by the gaps alone)."""
    s = np.sort(np.asarray(s) if gaps_only else np.abs(s), -1)
    gaps = np.diff(s, axis=-1)
    low = gaps.min() if gaps.size else np.inf
    if not gaps_only:
        low = min(low, s[..., 0].min())
    return float(np.abs(s).max() / low) if np.isfinite(low) else 1.0


LU_SHAPES = [(1, 1), (3, 3), (5, 5), (2, 4, 4), (5, 3), (3, 5), (2, 3, 6, 4), (2, 4, 7)]


# ---- LU ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_gradient(shape, rng):
    A = _general(rng, shape)
    kap, n = _lu_kappa(A), max(shape[-2:])
    for pick in (slice(1, 3), 1, 2):  # (L, U), L alone, U alone
        _check(
            lambda a, s=pick: torch.linalg.lu(a)[s],
            lambda a, s=pick: pr.linalg.lu(a)[s],
            [A],
            rng,
            n,
            kap,
        )


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_factor_gradient(shape, rng):
    """lu_factor, lu_factor_ex, torch.lu and the Tensor method: the compact LU's gradient."""
    A = _general(rng, shape)
    kap, n = _lu_kappa(A), max(shape[-2:])
    for ft, fp in (
        (lambda a: torch.linalg.lu_factor(a)[0], lambda a: pr.linalg.lu_factor(a)[0]),
        (lambda a: torch.linalg.lu_factor_ex(a).LU, lambda a: pr.linalg.lu_factor_ex(a).LU),
        (lambda a: torch.lu(a)[0], lambda a: pr.lu(a)[0]),
        (lambda a: a.lu(get_infos=True)[0], lambda a: a.lu(get_infos=True)[0]),
    ):
        _check(ft, fp, [A], rng, n, kap)


@pytest.mark.parametrize("shape", LU_SHAPES)
def test_lu_unpack_gradient(shape, rng):
    """lu_unpack's L and U back into the compact matrix (both, L alone, U alone)."""
    LU, piv = torch.linalg.lu_factor(torch.tensor(_general(rng, shape)))
    LU = _f32(LU.numpy())
    n = max(shape[-2:])
    for pick in (slice(1, 3), 1, 2):
        _check(
            lambda a, s=pick: torch.lu_unpack(a, piv)[s],
            lambda a, s=pick: pr.lu_unpack(a, pr.tensor(piv.numpy()))[s],
            [LU],
            rng,
            n,
            1.0,  # (a copy of entries: no division)
        )


@pytest.mark.parametrize("batch,n", [((), 1), ((), 3), ((), 5), ((2,), 4), ((2, 1), 3)])
@pytest.mark.parametrize(
    "left,adjoint", [(True, False), (True, True), (False, False), (False, True)]
)
def test_lu_solve_gradient(batch, n, left, adjoint, rng):
    """Both LU's gradient (torch's linalg_lu_solve_LU, each of its two forms) and B's."""
    A = _general(rng, batch + (n, n))
    LU, piv = torch.linalg.lu_factor(torch.tensor(A))
    LU = _f32(LU.numpy())
    B = _f32(rng.standard_normal(batch + ((n, 2) if left else (2, n))))
    kw = {"left": left, "adjoint": adjoint}
    _check(
        lambda lu, b: torch.linalg.lu_solve(lu, piv, b, **kw),
        lambda lu, b: pr.linalg.lu_solve(lu, pr.tensor(piv.numpy()), b, **kw),
        [LU, B],
        rng,
        n,
        _lu_kappa(A),
    )


def test_lu_solve_gradient_broadcast_b(rng):
    """B with a batch that LU broadcasts over: LU's gradient sums over that batch."""
    A = _general(rng, (4, 4))
    LU, piv = torch.linalg.lu_factor(torch.tensor(A))
    B = _f32(rng.standard_normal((3, 4, 2)))
    _check(
        lambda lu, b: torch.linalg.lu_solve(lu, piv, b),
        lambda lu, b: pr.linalg.lu_solve(lu, pr.tensor(piv.numpy()), b),
        [_f32(LU.numpy()), B],
        rng,
        4,
        _lu_kappa(A),
    )


# ---- Householder product ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,k", [((1, 1), 1), ((3, 3), 3), ((5, 3), 3), ((5, 5), 4), ((7, 4), 2), ((2, 5, 3), 3)]
)
def test_householder_product_gradient(shape, k, rng):
    """Reflectors and scalars from geqrf (so every H_i is invertible, as torch's rule assumes;
    each H_i is orthogonal, hence κ = 1 for the K updates), k <= n of them."""
    a, tau = torch.geqrf(torch.tensor(_f32(rng.standard_normal(shape))))
    a, tau = _f32(a.numpy()), _f32(tau[..., :k].numpy())
    m = shape[-2]
    for ft, fp in (
        (torch.linalg.householder_product, pr.linalg.householder_product),
        (torch.orgqr, pr.orgqr),
        (lambda x, t: x.orgqr(t), lambda x, t: x.orgqr(t)),
    ):
        _check(ft, fp, [a, tau], rng, m * k, 1.0)


def test_householder_product_of_any_tau(rng):
    """τ not from geqrf (H_i then not orthogonal, still invertible): κ of the K updates is
    Π‖H_i‖·‖H_i⁻¹‖, computed here."""
    a = _f32(rng.standard_normal((5, 3)) * 0.3)
    tau = _f32(rng.uniform(0.1, 0.3, 3))  # 1 - τ‖v‖² stays above ~0.4: each κ(H_i) below ~2.5
    V = np.tril(a, -1) + np.eye(5, 3)
    kap = 1.0
    for i in range(3):
        H = np.eye(5) - tau[i] * np.outer(V[:, i], V[:, i])
        kap *= np.linalg.cond(H)
    _check(torch.linalg.householder_product, pr.linalg.householder_product, [a, tau], rng, 15, kap)


# ---- double backward and finite differences ----------------------------------------------------
def test_double_backward(rng):
    A = _general(rng, (2, 4, 4))
    kap = _lu_kappa(A)
    _check_double(
        lambda a: torch.linalg.lu_factor(a)[0],
        lambda a: pr.linalg.lu_factor(a)[0],
        [A],
        rng,
        4,
        kap,
    )
    At = _general(rng, (5, 3))
    _check_double(
        lambda a: torch.linalg.lu(a)[1:], lambda a: pr.linalg.lu(a)[1:], [At], rng, 5, _lu_kappa(At)
    )
    LU, piv = torch.linalg.lu_factor(torch.tensor(A))
    B = _f32(rng.standard_normal((2, 4, 3)))
    _check_double(
        lambda lu, b: torch.linalg.lu_solve(lu, piv, b),
        lambda lu, b: pr.linalg.lu_solve(lu, pr.tensor(piv.numpy()), b),
        [_f32(LU.numpy()), B],
        rng,
        4,
        kap,
    )
    a, tau = torch.geqrf(torch.tensor(_f32(rng.standard_normal((5, 3)))))
    _check_double(
        torch.linalg.householder_product,
        pr.linalg.householder_product,
        [_f32(a.numpy()), _f32(tau.numpy())],
        rng,
        15,
        1.0,
    )


def test_gradcheck_float32(rng):
    """Central differences in float32 (no float64 on WebGPU): pr.autograd.gradcheck."""
    A = _p(_general(rng, (4, 4))).requires_grad_()
    W = _p(_general(rng, (3, 5))).requires_grad_()
    assert pr.autograd.gradcheck(lambda a: pr.linalg.lu_factor(a)[0], (A,))
    assert pr.autograd.gradcheck(lambda a: pr.linalg.lu(a)[1:], (W,))
    LU, piv = pr.linalg.lu_factor(A.detach())
    LU = LU.requires_grad_()
    B = _p(rng.standard_normal((4, 2))).requires_grad_()
    assert pr.autograd.gradcheck(lambda lu, b: pr.linalg.lu_solve(lu, piv, b), (LU, B))
    assert pr.autograd.gradcheck(lambda lu: pr.lu_unpack(lu, piv)[1:], (LU,))
    a, tau = pr.geqrf(_p(rng.standard_normal((5, 3))))
    args = (a.requires_grad_(), tau.requires_grad_())
    assert pr.autograd.gradcheck(pr.linalg.householder_product, args)


# ---- the rules that already existed, on awkward and batched shapes ------------------------------
@pytest.mark.parametrize("batch,n", [((), 1), ((), 3), ((2, 2), 5)])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular_gradient(batch, n, upper, left, unit, rng):
    T = np.tril(rng.standard_normal(batch + (n, n)), -1) * 0.5 + np.diag(rng.uniform(1, 2, n))
    # (unitriangular: the diagonal read as ones; κ of the matrix actually solved with)
    kap = float(np.max(np.linalg.cond(np.tril(T, -1) + np.eye(n) if unit else T)))
    T = _f32(np.swapaxes(T, -1, -2) if upper else T)
    B = _f32(rng.standard_normal(batch + ((n, 3) if left else (3, n))))
    kw = {"upper": upper, "left": left, "unitriangular": unit}
    _check(
        lambda a, b: torch.linalg.solve_triangular(a, b, **kw),
        lambda a, b: pr.linalg.solve_triangular(a, b, **kw),
        [T, B],
        rng,
        n,
        kap,
    )


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5, 5)])
def test_matrix_exp_gradient(shape, rng):
    """‖A‖ below 1 here: exp's condition number is then below e (Fréchet derivative)."""
    A = _f32(rng.standard_normal(shape) * 0.8 / shape[-1])
    _check(torch.linalg.matrix_exp, pr.linalg.matrix_exp, [A], rng, shape[-1], np.e)


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5, 5)])
def test_eigh_gradient(shape, rng):
    n = shape[-1]
    Q = np.linalg.qr(rng.standard_normal(shape))[0]
    lam = np.linspace(-2.0, 2.0, n)[rng.permutation(n)]  # eigenvalues 4/(n-1) apart
    S = (Q * lam) @ np.swapaxes(Q, -1, -2)
    S = _f32((S + np.swapaxes(S, -1, -2)) / 2)  # (symmetric to the last bit, then rounded)
    kap = _spread(np.linalg.eigvalsh(S), gaps_only=True)
    wv, wV = rng.standard_normal(shape[:-1]), rng.standard_normal(shape)

    def loss(lib, c):
        def f(a):
            lam, V = lib.linalg.eigh(a)
            return lam * c(wv), V * V * c(wV)  # (V's column signs are arbitrary: squared)

        return f

    _check(loss(torch, torch.tensor), loss(pr, _p), [S], rng, shape[-1], kap)


@pytest.mark.parametrize(
    "shape,full",
    [((3, 3), False), ((5, 3), True), ((3, 5), True), ((2, 4, 4), True), ((2, 6, 4), True)],
)
def test_svd_gradient(shape, full, rng):
    """full_matrices=True of a rectangular A: torch differentiates through the first k columns
    of U (rows of Vh) only, the rest carrying no gradient; pyrite raised there before."""
    A = _spectrum(rng, shape)
    m, n = shape[-2:]
    k = min(m, n)
    kap = _spread(np.linalg.svd(A, compute_uv=False))

    def loss(lib):
        def f(a):
            U, S, Vh = lib.linalg.svd(a, full_matrices=full)
            # squares (signs are arbitrary); the extra columns of a full U by their row sums of
            # squares (sign- and basis-free: 1)
            return U[..., :k] ** 2, S, Vh[..., :k, :] ** 2, (U * U).sum(-1)

        return f

    _check(loss(torch), loss(pr), [A], rng, max(m, n), kap)

    def top(lib):
        def f(a):
            U, S, V = lib.svd(a, some=not full)
            return U[..., :k] ** 2, S, V[..., :k] ** 2

        return f

    _check(top(torch), top(pr), [A], rng, max(m, n), kap)


@pytest.mark.parametrize(
    "shape,mode",
    [((3, 3), "reduced"), ((5, 3), "reduced"), ((3, 5), "complete"), ((2, 4, 4), "complete")],
)
def test_qr_gradient(shape, mode, rng):
    """A wide A's rule solves with R's square block (the QR of A's first m columns): that
    block is built well-conditioned, the other columns random."""
    m, n = shape[-2:]
    A = _spectrum(rng, shape[:-1] + (min(m, n),))
    if n > m:
        A = np.concatenate([A, _f32(rng.standard_normal(shape[:-1] + (n - m,)))], -1)
    R = np.linalg.qr(A, mode="r")
    kap = float(np.max(np.linalg.cond(R[..., : min(m, n), : min(m, n)])))

    def loss(lib):
        def f(a):
            Q, R = lib.linalg.qr(a, mode=mode)
            return Q * Q, R * R, Q @ R  # (Q's columns and R's rows flip sign together)

        return f

    _check(loss(torch), loss(pr), [A], rng, max(m, n), kap)


# ---- what torch refuses -----------------------------------------------------------------------
def test_refusals_match_torch(rng):
    """geqrf has no derivative in torch (NotImplementedError), qr's 'r' mode and a complete Q
    of a tall A none either (RuntimeError): pyrite raises the same class, at the backward."""
    A = _f32(rng.standard_normal((5, 3)))
    for ft, fp in (
        (lambda a: torch.geqrf(a)[0], lambda a: pr.geqrf(a)[0]),
        (lambda a: torch.geqrf(a)[1], lambda a: pr.geqrf(a)[1]),
        (lambda a: torch.linalg.qr(a, mode="r")[1], lambda a: pr.linalg.qr(a, mode="r")[1]),
        (
            lambda a: torch.linalg.qr(a, mode="complete")[0],
            lambda a: pr.linalg.qr(a, "complete")[0],
        ),
    ):
        out = fp(_p(A).requires_grad_())  # the forward runs
        same_error(
            lambda o=out: o.sum().backward(),
            lambda f=ft: f(torch.tensor(A, requires_grad=True)).sum().backward(),
        )
    with pytest.raises(NotImplementedError, match="derivative for 'geqrf'"):
        pr.geqrf(_p(A).requires_grad_())[0].sum().backward()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        pr.linalg.qr(_p(A).requires_grad_(), "complete")[0].sum().backward()
