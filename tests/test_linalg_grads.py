"""Gradients of the linear-algebra functions whose kernels factor a work buffer in place
(ops/linalg_grads.py), against torch autograd in float64 on f32-rounded inputs of awkward and
batched shapes. Losses are weighted sums of the outputs; where an output's sign is arbitrary
(eigenvectors, singular vectors) they use its square, which is not. Before these rules, det,
slogdet, logdet, cholesky, eigh, svd, svdvals, pinv and lu_factor returned wrong gradients
without an error: the factorizations' internals were recorded as a copy of the input. The
factorizations without a rule raise at backward (OPAQUE); geqrf, which torch does not
differentiate either, is checked here.

Tolerance: relative to the largest gradient entry, 2e-4: each rule is a few products and
solves of well-conditioned matrices (condition numbers below ~20 here), so the f32 error is a
small multiple of κ·n·u ≈ 1e-5."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr

RTOL = 2e-4


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _both(fn_t, fn_p, arrays, rng):
    """Run fn on torch float64 and pyrite float32 leaves; the loss is Σ w·out over the float
    outputs (w drawn here, the same for both); returns the input gradients of each."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    ps = [pr.tensor(a.astype(np.float32)).requires_grad_() for a in arrays]
    outs_t, outs_p = fn_t(*ts), fn_p(*ps)
    if not isinstance(outs_t, (tuple, list)):
        outs_t, outs_p = (outs_t,), (outs_p,)
    lt = lp = 0
    for a, b in zip(outs_t, outs_p):
        if a is None or not a.dtype.is_floating_point:
            continue
        w = rng.standard_normal(tuple(a.shape))
        lt = lt + (a * torch.tensor(w)).sum()
        lp = lp + (b * pr.tensor(w.astype(np.float32))).sum()
    lt.backward()
    lp.backward()
    return [t.grad.numpy() for t in ts], [p.grad.numpy() for p in ps]


def _check(fn_t, fn_p, arrays, rng):
    gts, gps = _both(fn_t, fn_p, arrays, rng)
    for gt, gp in zip(gts, gps):
        assert gp.shape == gt.shape
        np.testing.assert_allclose(gp, gt, rtol=0, atol=RTOL * np.abs(gt).max())


def _general(rng, batch, n):
    return _f32(rng.standard_normal(batch + (n, n)) + 2 * np.sqrt(n) * np.eye(n))


def _spd(rng, batch, n):
    M = rng.standard_normal(batch + (n, n))
    return _f32(M @ np.swapaxes(M, -1, -2) + n * np.eye(n))


def _sym(rng, batch, n):
    M = rng.standard_normal(batch + (n, n))
    return _f32(M + np.swapaxes(M, -1, -2))


SHAPES = [((), 1), ((), 5), ((3,), 4), ((2, 2), 7)]


@pytest.mark.parametrize("batch,n", SHAPES)
def test_determinants(batch, n, rng):
    A = _general(rng, batch, n)
    _check(torch.linalg.det, pr.linalg.det, [A], rng)
    _check(torch.det, pr.det, [A], rng)
    _check(lambda a: torch.linalg.slogdet(a)[1], lambda a: pr.linalg.slogdet(a)[1], [A], rng)
    _check(lambda a: torch.slogdet(a).logabsdet, lambda a: pr.slogdet(a).logabsdet, [A], rng)
    _check(torch.logdet, pr.logdet, [_spd(rng, batch, n)], rng)


def test_det_of_the_reported_matrix_is_the_adjugate():
    """The case that was wrong: d det/dA = adj(A)ᵀ, a full matrix (it was diag(det / U_ii))."""
    A = [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]]
    x = pr.tensor(A).requires_grad_()
    pr.linalg.det(x).backward()
    want = np.array([[11, -4, 1], [-4, 8, -2], [1, -2, 5]], dtype=np.float64)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("batch,n", SHAPES)
def test_inverse_and_solves(batch, n, rng):
    A = _general(rng, batch, n)
    _check(torch.linalg.inv, pr.linalg.inv, [A], rng)
    _check(torch.inverse, pr.inverse, [A], rng)
    _check(lambda a: torch.linalg.inv_ex(a)[0], lambda a: pr.linalg.inv_ex(a)[0], [A], rng)
    B = _f32(rng.standard_normal(batch + (n, 3)))
    _check(torch.linalg.solve, pr.linalg.solve, [A, B], rng)
    Bl = _f32(rng.standard_normal(batch + (2, n)))
    _check(
        lambda a, b: torch.linalg.solve(a, b, left=False),
        lambda a, b: pr.linalg.solve(a, b, left=False),
        [A, Bl],
        rng,
    )
    v = _f32(rng.standard_normal(batch + (n,)))
    _check(torch.linalg.solve, pr.linalg.solve, [A, v], rng)
    # B broadcast over A's batch: its gradient sums over the batch
    Bb = _f32(rng.standard_normal((n, 2)))
    _check(torch.linalg.solve, pr.linalg.solve, [A, Bb], rng)
    _check(
        lambda a, b: torch.linalg.solve_ex(a, b)[0],
        lambda a, b: pr.linalg.solve_ex(a, b)[0],
        [A, B],
        rng,
    )


@pytest.mark.parametrize("batch,n", SHAPES)
def test_cholesky(batch, n, rng):
    A = _spd(rng, batch, n)
    _check(torch.linalg.cholesky, pr.linalg.cholesky, [A], rng)
    _check(
        lambda a: torch.linalg.cholesky(a, upper=True),
        lambda a: pr.linalg.cholesky(a, upper=True),
        [A],
        rng,
    )
    _check(
        lambda a: torch.linalg.cholesky_ex(a)[0], lambda a: pr.linalg.cholesky_ex(a)[0], [A], rng
    )


def _eigh_loss(lib, w_vals, w_vecs):
    def f(a):
        lam, V = lib.linalg.eigh(a)
        return lam * w_vals, V * V * w_vecs  # (V's column signs are arbitrary: squared)

    return f


@pytest.mark.parametrize("batch,n", [((), 2), ((), 6), ((3,), 4)])
def test_eigh(batch, n, rng):
    S = _sym(rng, batch, n)
    wv, wV = rng.standard_normal(batch + (n,)), rng.standard_normal(batch + (n, n))
    _check(
        _eigh_loss(torch, torch.tensor(wv), torch.tensor(wV)),
        _eigh_loss(pr, pr.tensor(wv.astype(np.float32)), pr.tensor(wV.astype(np.float32))),
        [S],
        rng,
    )
    _check(torch.linalg.eigvalsh, pr.linalg.eigvalsh, [S], rng)


def _svd_loss(lib, full, w):
    def f(a):
        U, S, Vh = lib.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        # squares (signs are arbitrary), and U·diag(√S)·Vh (sign-free)
        recon = (U[..., :k] * S.sqrt().unsqueeze(-2)) @ Vh[..., :k, :]
        return U * U * w[0], S * w[1], Vh * Vh * w[2], recon

    return f


@pytest.mark.parametrize(
    "shape,full", [((6, 4), False), ((3, 5), False), ((2, 4, 4), True), ((2, 5, 3), False)]
)
def test_svd(shape, full, rng):
    A = _f32(rng.standard_normal(shape))
    m, n = shape[-2:]
    k = min(m, n)
    b = shape[:-2]
    ws = [
        rng.standard_normal(b + (m, m if full else k)),
        rng.standard_normal(b + (k,)),
        rng.standard_normal(b + (n if full else k, n)),
    ]
    _check(
        _svd_loss(torch, full, [torch.tensor(w) for w in ws]),
        _svd_loss(pr, full, [pr.tensor(w.astype(np.float32)) for w in ws]),
        [A],
        rng,
    )
    _check(torch.linalg.svdvals, pr.linalg.svdvals, [A], rng)
    _check(torch.linalg.pinv, pr.linalg.pinv, [A], rng)


def test_top_level_svd_and_pinverse(rng):
    A = _f32(rng.standard_normal((5, 3)))
    wU, wV = rng.standard_normal((5, 3)), rng.standard_normal((3, 3))

    def f(lib, c):
        def g(a):
            U, S, V = lib.svd(a)
            return U * U * c(wU), S, V * V * c(wV)

        return g

    _check(f(torch, torch.tensor), f(pr, lambda w: pr.tensor(w.astype(np.float32))), [A], rng)
    _check(torch.pinverse, pr.pinverse, [A], rng)


def test_double_backward_through_det_and_inv(rng):
    A = _general(rng, (), 4)
    for tf, pf in ((torch.linalg.det, pr.linalg.det), (torch.linalg.inv, pr.linalg.inv)):
        ta = torch.tensor(A, requires_grad=True)
        pa = pr.tensor(A.astype(np.float32)).requires_grad_()
        (tg,) = torch.autograd.grad(tf(ta).sum(), ta, create_graph=True)
        (pg,) = pr.autograd.grad(pf(pa).sum(), pa, create_graph=True)
        (tg * tg).sum().backward()
        (pg * pg).sum().backward()
        gt = ta.grad.numpy()
        np.testing.assert_allclose(pa.grad.numpy(), gt, rtol=0, atol=1e-3 * np.abs(gt).max())


def test_matrix_power_negative_takes_the_inverse_rule(rng):
    A = _general(rng, (2,), 4)
    _check(
        lambda a: torch.linalg.matrix_power(a, -3),
        lambda a: pr.linalg.matrix_power(a, -3),
        [A],
        rng,
    )


def test_geqrf_has_no_gradient_and_raises_at_backward(rng):
    """torch has no derivative for geqrf (NotImplementedError at the backward): nor pyrite.
    lu, lu_factor and householder_product, once here, have rules now (test_linalg_grads41)."""
    x = pr.tensor(_spd(rng, (), 4).astype(np.float32)).requires_grad_()
    out = pr.geqrf(x)[0]
    with pytest.raises(NotImplementedError, match="geqrf"):
        out.sum().backward()


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_matrix_norms_through_the_svd_and_cond(ord, rng):
    """matrix_norm with ord ±2 / 'nuc' (and linalg.norm, linalg.cond) take the recorded
    svdvals: their gradient was silently zero (the raw function's output was unrecorded)."""
    A = _f32(rng.standard_normal((2, 3, 4)))
    _check(
        lambda a: torch.linalg.matrix_norm(a, ord=ord),
        lambda a: pr.linalg.matrix_norm(a, ord=ord),
        [A],
        rng,
    )
    _check(lambda a: torch.linalg.norm(a[0], ord), lambda a: pr.linalg.norm(a[0], ord), [A], rng)
    if ord != "nuc":
        _check(
            lambda a: torch.linalg.cond(a, ord), lambda a: pr.linalg.cond(a, ord), [A[..., :3]], rng
        )


def test_det_gradient_of_singular_matrices():
    """d det / dA = adj(A)ᵀ (the cofactor matrix) is defined for singular A too: from the SVD
    (inv raised there). A rank-2 3x3 and a rank-1 2x2 against their cofactors, computed here
    (torch's own answer depends on its LAPACK: one CPU build gave the cofactors for the 3x3,
    another zeros, and zeros for the 2x2, though det(A + εE₀₀) = 4ε there)."""
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    cof = np.array(
        [[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(a, i, 0), j, 1)) for j in range(3)]
         for i in range(3)]
    )  # fmt: skip
    p = pr.tensor(a.astype(np.float32)).requires_grad_()
    pr.linalg.det(p).backward()
    np.testing.assert_allclose(p.grad.numpy(), cof, rtol=0, atol=1e-5 * 4)
    b = pr.tensor([[1.0, 2.0], [2.0, 4.0]]).requires_grad_()
    pr.linalg.det(b).backward()
    np.testing.assert_allclose(b.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=2e-5)


def test_matrix_exp_cholesky_solve_inverse_and_tensor_solves(rng):
    """matrix_exp (the block-matrix adjoint), cholesky_solve / cholesky_inverse (torch's full-
    matrix rules for L), tensorinv / tensorsolve (composites of the recorded inv / solve)."""
    A = _f32(rng.standard_normal((2, 4, 4)) * 0.7)
    _check(torch.linalg.matrix_exp, pr.linalg.matrix_exp, [A], rng)
    _check(torch.matrix_exp, pr.matrix_exp, [A[0]], rng)
    L = _f32(np.linalg.cholesky(_spd(rng, (), 4)))
    B = _f32(rng.standard_normal((4, 3)))
    for upper in (False, True):
        Lu = np.ascontiguousarray(L.T) if upper else L
        _check(
            lambda b, l, u=upper: torch.cholesky_solve(b, l, upper=u),
            lambda b, l, u=upper: pr.cholesky_solve(b, l, upper=u),
            [B, Lu],
            rng,
        )
        _check(
            lambda l, u=upper: torch.cholesky_inverse(l, upper=u),
            lambda l, u=upper: pr.cholesky_inverse(l, upper=u),
            [Lu],
            rng,
        )
    T = _f32(rng.standard_normal((6, 2, 3)) + 3 * np.eye(6).reshape(6, 2, 3))
    _check(
        lambda a: torch.linalg.tensorinv(a, ind=1),
        lambda a: pr.linalg.tensorinv(a, ind=1),
        [T],
        rng,
    )
    T2 = _f32(rng.standard_normal((2, 3, 6)) + 3 * np.eye(6).reshape(2, 3, 6))
    _check(
        torch.linalg.tensorsolve,
        pr.linalg.tensorsolve,
        [T2, _f32(rng.standard_normal((2, 3)))],
        rng,
    )


@pytest.mark.parametrize("ash,bsh", [((5, 3), (5, 2)), ((2, 6, 4), (2, 6, 3)), ((5, 3), (5,))])
def test_lstsq_solution_gradient(ash, bsh, rng):
    """lstsq's solution differentiates as pinv(A)·B (full column rank: torch's answer)."""
    A, B = _f32(rng.standard_normal(ash)), _f32(rng.standard_normal(bsh))
    _check(
        lambda a, b: torch.linalg.lstsq(a, b).solution,
        lambda a, b: pr.linalg.lstsq(a, b).solution,
        [A, B],
        rng,
    )


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (2, 6, 4), (3, 5), (2, 3, 7)])
def test_qr_gradient(shape, rng):
    """(gQ + Q·copyltu(R gRᵀ - gQᵀ Q))·R⁻ᵀ for m >= n, a wide A through its square part,
    against torch with sign-free losses (Q's columns and R's rows may flip sign together)."""
    A = _f32(rng.standard_normal(shape))
    m, n = shape[-2:]
    k = min(m, n)
    wq = rng.standard_normal(shape[:-2] + (m, k))
    wr = rng.standard_normal(shape[:-2] + (k, n))

    def loss(lib, c):
        def f(a):
            Q, R = lib.linalg.qr(a)
            return Q * Q * c(wq), R * R * c(wr), Q @ R

        return f

    _check(loss(torch, torch.tensor), loss(pr, lambda w: pr.tensor(w.astype(np.float32))), [A], rng)
    tall = pr.tensor(rng.standard_normal((5, 3)).astype(np.float32)).requires_grad_()
    with pytest.raises(RuntimeError, match="mode='complete' and nrows > ncols"):
        pr.linalg.qr(tall, mode="complete")[0].sum().backward()


@pytest.mark.parametrize(
    "left,adjoint", [(True, False), (True, True), (False, False), (False, True)]
)
def test_lu_solve_gradients(left, adjoint, rng):
    """B's gradient is the adjoint solve with the same factors; LU's is torch's
    linalg_lu_solve_LU (more shapes in test_linalg_grads41)."""
    A = _general(rng, (), 4)
    B = _f32(rng.standard_normal((4, 2) if left else (2, 4)))
    kw = {"left": left, "adjoint": adjoint}
    tLU, tp = torch.linalg.lu_factor(torch.tensor(A))
    pp = pr.tensor(tp.numpy())
    _check(
        lambda lu, b: torch.linalg.lu_solve(lu, tp, b, **kw),
        lambda lu, b: pr.linalg.lu_solve(lu, pp, b, **kw),
        [_f32(tLU.numpy()), B],
        rng,
    )
