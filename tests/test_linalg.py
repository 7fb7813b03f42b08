"""pyrite.linalg against torch CPU float64 on the same (float32-rounded) inputs.

Tolerances come from the conditioning, with u = 2⁻²⁴:
- solve / inv / pinv / lstsq:  max|X - X64| / max|X64| <= n·u·κ₂(A)  (forward error of a
  backward-stable solver). Measured over n in {1..100}, κ in {10, 1e3, 1e5} (lavapipe,
  2026-12): observed / bound <= 0.10 for pyrite and <= 0.06 for LAPACK float32 (torch CPU) on
  the same inputs: the same accuracy class.
- eigh, svd, qr, cholesky: values within C·n·u·||A||₂, reconstructions (Q R, U S Vh, V Λ Vᵀ,
  L Lᵀ) within C·n·u·||A||₂, orthogonality |QᵀQ - I| within C·n·u, C = 8 (n = max(m, n)).
  Observed / (n·u·||A||) over n in {1..130}: eigenvalues 0.52 (LAPACK f32: 0.91), eigh
  residual 0.65 (1.17), eigh orthogonality 3.5 (1.8), singular values 1.63 (0.46), U S Vh 1.17,
  U, V orthogonality 0.99, 3.7; Q R 0.55 (1.08), QᵀQ 1.14 (1.97); L Lᵀ 1.66; L against L64,
  relative, / (n·u·κ): 0.83 (0.83).
Signs of Q's, U's, V's and eigenvectors' columns are not unique: those are checked by
reconstruction, never against torch's signs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.ops.linalg as L
from pyrite import backend, linalg
from pyrite.testing.tolerance import assert_close
from tests.optable import OpInfo, Sample, check_row

U32 = 2.0**-24
C = 8

SIZES = [1, 2, 3, 5, 17, 33, 100]


def f32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float32)


def t64(a) -> torch.Tensor:
    return torch.tensor(np.asarray(a, dtype=np.float64))


def dev(a) -> pr.Tensor:
    return pr.tensor(f32(a))


def orthogonal(rng, batch, n):
    q, r = np.linalg.qr(rng.standard_normal(tuple(batch) + (n, n)))
    return q * np.sign(np.diagonal(r, axis1=-2, axis2=-1))[..., None, :]


def conditioned(rng, batch, n, kappa):
    """f32 A = Q1 diag(s) Q2ᵀ, s log-spaced from 1 to 1/κ: κ₂(A) ≈ κ."""
    s = np.logspace(0, -math.log10(kappa), n) if n > 1 else np.ones(1)
    a = (orthogonal(rng, batch, n) * s) @ np.swapaxes(orthogonal(rng, batch, n), -1, -2)
    return f32(a)


def spd(rng, batch, n, kappa=100.0):
    q = orthogonal(rng, batch, n)
    s = np.logspace(0, -math.log10(kappa), n) if n > 1 else np.ones(1)
    return f32((q * s) @ np.swapaxes(q, -1, -2))


def kappa_of(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    if a.size == 0:
        return 1.0
    return float(np.max(np.linalg.cond(a)))


def norm2(a) -> float:
    a = np.asarray(a, dtype=np.float64)
    if a.ndim < 2:
        return float(np.linalg.norm(a.reshape(-1)))
    return float(np.max(np.linalg.norm(a, 2, axis=(-2, -1)), initial=0.0)) if a.size else 0.0


def rel_err(got, want) -> float:
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert g.shape == w.shape, (g.shape, w.shape)
    if w.size == 0:
        return 0.0
    return float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-30))


def assert_orthonormal_columns(q, k_bound, what):
    q = np.asarray(q, dtype=np.float64)
    k = q.shape[-1]
    gram = np.swapaxes(q, -1, -2) @ q
    err = np.abs(gram - np.eye(k)).max(initial=0.0)
    assert err <= C * k_bound * U32 + 1e-30, f"{what}: |QᵀQ - I| = {err:.3g}"


# ---- solve, inv, det ---------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_solve_parity(rng, n, batch):
    kappa = 1e3
    A = conditioned(rng, batch, n, kappa)
    for B in (f32(rng.standard_normal(batch + (n, 3))), f32(rng.standard_normal(batch + (n,)))):
        X = linalg.solve(dev(A), dev(B))
        want = torch.linalg.solve(t64(A), t64(B)).numpy()
        assert X.shape == want.shape
        assert rel_err(X.numpy(), want) <= n * U32 * kappa_of(A), f"n={n} B{B.shape}"


def test_solve_broadcast_left_and_layouts(rng):
    n = 5
    A = conditioned(rng, (2, 1), n, 10.0)
    B = f32(rng.standard_normal((3, n, 4)))
    X = linalg.solve(dev(A), dev(B))
    want = torch.linalg.solve(t64(A), t64(B)).numpy()
    assert X.shape == (2, 3, n, 4)
    assert rel_err(X.numpy(), want) <= n * U32 * kappa_of(A)
    # X A = B, and A given as a transposed (non-contiguous) view
    Bl = f32(rng.standard_normal((2, 3, 4, n)))
    At = pr.tensor(np.ascontiguousarray(np.swapaxes(A, -1, -2))).transpose(-1, -2)
    X = linalg.solve(At, dev(Bl), left=False)
    want = torch.linalg.solve(t64(A), t64(Bl), left=False).numpy()
    assert rel_err(X.numpy(), want) <= n * U32 * kappa_of(A)
    # a batch of vectors: B shaped like A without its last dim
    Bv = f32(rng.standard_normal((2, 1, n)))
    X = linalg.solve(dev(A), dev(Bv))
    assert X.shape == (2, 1, n)
    assert rel_err(X.numpy(), torch.linalg.solve(t64(A), t64(Bv)).numpy()) <= n * U32 * 10
    X, info = linalg.solve_ex(dev(A), dev(Bv))
    assert info.shape == (2, 1) and info.dtype == pr.int32 and not info.numpy().any()


@pytest.mark.parametrize("n", SIZES)
def test_inv_parity(rng, n):
    A = conditioned(rng, (2,), n, 1e3)
    X = linalg.inv(dev(A))
    assert rel_err(X.numpy(), torch.linalg.inv(t64(A)).numpy()) <= n * U32 * kappa_of(A)
    assert rel_err(dev(A).inverse().numpy(), torch.linalg.inv(t64(A)).numpy()) <= (
        n * U32 * kappa_of(A)
    )


@pytest.mark.parametrize("n", SIZES)
def test_det_slogdet_parity(rng, n):
    # singular values from 10 to 0.1: |det| = 1 at any n (no under- or overflow), κ = 100
    A = conditioned(rng, (3,), n, 100.0) * f32(10.0)
    A[1] = -A[1]
    k = kappa_of(A)
    d = linalg.det(dev(A)).numpy()
    want = torch.linalg.det(t64(A)).numpy()
    # det's relative condition number is bounded by n·κ (|d det| <= |det|·||A⁻¹||·||dA||·n)
    assert_close(d, want, 0.0, n * n * U32 * k + 4 * U32)
    sign, logabs = linalg.slogdet(dev(A))
    ws, wl = torch.linalg.slogdet(t64(A))
    assert np.array_equal(sign.numpy(), ws.numpy())
    assert_close(logabs.numpy(), wl.numpy(), n * n * U32 * k + 4 * U32, 0.0)
    assert_close(pr.logdet(dev(A)).numpy(), torch.logdet(t64(A)).numpy(), n * n * U32 * k, 0.0)
    assert_close(dev(A).det().numpy(), want, 0.0, n * n * U32 * k + 4 * U32)


def test_singular_and_empty():
    # exactly singular in f32 elimination (small integers): torch's messages and info
    S = np.array([[1.0, 2, 3], [2, 4, 6], [1, 1, 1]])
    with pytest.raises(linalg.LinAlgError, match="diagonal element 3 is zero.*singular"):
        linalg.inv(dev(S))
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The diagonal element 3"):
        pr.inverse(dev(np.stack([np.eye(3), S])))
    with pytest.raises(linalg.LinAlgError, match="The solver failed because the input matrix"):
        linalg.solve(dev(S), dev(np.ones(3)))
    assert linalg.inv_ex(dev(S)).info.item() == torch.linalg.inv_ex(t64(S)).info.item() == 3
    assert linalg.det(dev(S)).item() == 0.0
    sign, logabs = linalg.slogdet(dev(S))
    assert sign.item() == 0.0 and logabs.item() == -math.inf
    z = np.zeros((4, 4))
    assert linalg.solve_ex(dev(z), dev(np.ones((4, 2)))).info.item() == 1
    # empty batch and 0x0 matrices
    e = linalg.inv(dev(np.zeros((0, 3, 3))))
    assert e.shape == (0, 3, 3)
    assert linalg.det(dev(np.zeros((0, 0)))).item() == 1.0
    assert linalg.solve(dev(np.zeros((0, 2, 2))), dev(np.zeros((0, 2)))).shape == (0, 2)
    assert linalg.inv(dev(np.zeros((2, 0, 0)))).shape == (2, 0, 0)
    assert linalg.det(dev(np.zeros((0, 4, 4)))).shape == (0,)


def test_ex_variants_do_not_read_back(monkeypatch, rng):
    A = dev(spd(rng, (3,), 4))
    d = backend.current()

    def no_read(*a, **k):
        raise AssertionError("an _ex variant read a value back")

    monkeypatch.setattr(d, "read", no_read)
    inv, info = linalg.inv_ex(A)
    Lc, info2 = linalg.cholesky_ex(A)
    X, info3 = linalg.solve_ex(A, A)
    monkeypatch.undo()
    assert not info.numpy().any() and not info2.numpy().any() and not info3.numpy().any()
    with pytest.raises(linalg.LinAlgError):
        linalg.inv_ex(dev(np.zeros((2, 2))), check_errors=True)


# ---- Cholesky --------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
def test_cholesky_parity(rng, n):
    A = spd(rng, (2,), n, 100.0)
    Lc = linalg.cholesky(dev(A)).numpy()
    want = torch.linalg.cholesky(t64(A)).numpy()
    assert rel_err(Lc, want) <= C * n * U32 * kappa_of(A)
    assert np.all(np.triu(Lc, 1) == 0)
    Lr = Lc.astype(np.float64)
    assert np.abs(Lr @ np.swapaxes(Lr, -1, -2) - A).max() <= C * n * U32 * norm2(A)
    Uc = linalg.cholesky(dev(A), upper=True).numpy()
    assert np.array_equal(Uc, np.swapaxes(Lc, -1, -2))
    assert np.array_equal(pr.cholesky(dev(A), True).numpy(), Uc)
    # only the lower triangle is read
    G = A + np.triu(f32(rng.standard_normal(A.shape)), 1)
    assert np.array_equal(linalg.cholesky(dev(G)).numpy(), Lc)


def test_cholesky_not_positive_definite():
    bad = np.diag([1.0, 1.0, -1.0])
    with pytest.raises(
        linalg.LinAlgError,
        match=r"not positive-definite \(the leading minor of order 3 is not positive-definite\)",
    ):
        linalg.cholesky(dev(bad))
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\).*order 1 is not"):
        linalg.cholesky(dev(np.stack([np.eye(3), -np.eye(3)])))
    Lc, info = linalg.cholesky_ex(dev(np.stack([np.eye(3), bad, np.full((3, 3), np.nan)])))
    assert info.numpy().tolist() == [0, 3, 1]
    assert (
        info.numpy().tolist()
        == torch.linalg.cholesky_ex(
            t64(np.stack([np.eye(3), bad, np.full((3, 3), np.nan)]))
        ).info.tolist()
    )


def test_triangular_and_cholesky_solves(rng):
    n, k = 17, 3
    A = spd(rng, (2,), n, 50.0)
    B = f32(rng.standard_normal((2, n, k)))
    Lc = linalg.cholesky(dev(A))
    want = torch.linalg.solve(t64(A), t64(B)).numpy()
    assert rel_err(pr.cholesky_solve(dev(B), Lc).numpy(), want) <= C * n * U32 * kappa_of(A)
    assert rel_err(pr.cholesky_inverse(Lc).numpy(), np.linalg.inv(A.astype(np.float64))) <= (
        C * n * U32 * kappa_of(A)
    )
    T = f32(np.triu(rng.standard_normal((2, n, n))) + 4 * np.eye(n))
    for upper, tri in ((True, T), (False, np.swapaxes(T, -1, -2))):
        X = linalg.solve_triangular(dev(tri), dev(B), upper=upper)
        want = torch.linalg.solve_triangular(t64(tri), t64(B), upper=upper).numpy()
        assert rel_err(X.numpy(), want) <= n * U32 * kappa_of(tri)
        Xl = linalg.solve_triangular(dev(tri), dev(np.swapaxes(B, -1, -2)), upper=upper, left=False)
        want = torch.linalg.solve_triangular(
            t64(tri), t64(np.swapaxes(B, -1, -2)), upper=upper, left=False
        ).numpy()
        assert rel_err(Xl.numpy(), want) <= n * U32 * kappa_of(tri)
        Xu = linalg.solve_triangular(dev(tri), dev(B), upper=upper, unitriangular=True)
        want = torch.linalg.solve_triangular(
            t64(tri), t64(B), upper=upper, unitriangular=True
        ).numpy()
        assert rel_err(Xu.numpy(), want) <= n * U32 * 1e3


# ---- QR --------------------------------------------------------------------------------------
QR_SHAPES = [(1, 1), (3, 5), (5, 3), (17, 17), (33, 5), (5, 33), (100, 17), (2, 130)]


@pytest.mark.parametrize("m,n", QR_SHAPES)
def test_qr_reconstruction(rng, m, n):
    A = f32(rng.standard_normal((2, m, n)))
    big = max(m, n)
    bound = C * big * U32 * norm2(A)
    for mode in ("reduced", "complete"):
        Q, R = linalg.qr(dev(A), mode=mode)
        Tq, Tr = torch.linalg.qr(t64(A), mode=mode)
        assert Q.shape == Tq.shape and R.shape == Tr.shape, mode
        q, r = Q.numpy().astype(np.float64), R.numpy()
        assert np.all(np.tril(r, -1) == 0)
        assert np.abs(q @ r - A).max() <= bound, mode
        assert_orthonormal_columns(q, big, f"qr {mode}")
        # R is unique up to the signs of its rows
        assert_close(
            np.abs(np.diagonal(r, axis1=-2, axis2=-1)),
            np.abs(np.diagonal(Tr.numpy(), axis1=-2, axis2=-1)),
            bound,
            0.0,
        )
    Q0, R0 = linalg.qr(dev(A), mode="r")
    assert Q0.shape == (0,) and np.array_equal(R0.numpy(), linalg.qr(dev(A))[1].numpy())
    Qt, Rt = pr.qr(dev(A), some=False)
    assert Qt.shape == (2, m, m)


# ---- eigh ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", SIZES)
def test_eigh_parity(rng, n):
    X = rng.standard_normal((2, n, n))
    A = f32(X + np.swapaxes(X, -1, -2))
    A[1, 0, 0] = 0  # and a repeated eigenvalue in the batch:
    A[1] = f32(np.eye(n) * 2.0) if n > 2 else A[1]
    nrm = norm2(A)
    w, V = linalg.eigh(dev(A))
    w64 = torch.linalg.eigvalsh(t64(A)).numpy()
    assert_close(w.numpy(), w64, C * n * U32 * nrm, 0.0)
    v = V.numpy().astype(np.float64)
    resid = np.abs(A.astype(np.float64) @ v - v * w.numpy()[..., None, :]).max()
    assert resid <= C * n * U32 * nrm
    assert_orthonormal_columns(v, n, "eigh")
    assert np.array_equal(linalg.eigvalsh(dev(A)).numpy().shape, w64.shape)
    assert_close(linalg.eigvalsh(dev(A)).numpy(), w64, C * n * U32 * nrm, 0.0)


def test_eigh_uplo_and_empty(rng):
    n = 6
    X = f32(rng.standard_normal((n, n)))
    for uplo in ("L", "U"):
        w, V = linalg.eigh(dev(X), UPLO=uplo)
        want = torch.linalg.eigvalsh(t64(X), UPLO=uplo).numpy()
        assert_close(w.numpy(), want, C * n * U32 * norm2(X + X.T), 0.0)
    with pytest.raises(ValueError, match="UPLO"):
        linalg.eigh(dev(X), UPLO="X")
    w, V = linalg.eigh(dev(np.zeros((0, 0))))
    assert w.shape == (0,) and V.shape == (0, 0)
    assert linalg.eigvalsh(dev(np.zeros((0, 3, 3)))).shape == (0, 3)
    with pytest.raises(TypeError, match="complex"):
        linalg.eig(dev(X))
    with pytest.raises(TypeError, match="complex"):
        linalg.eigvals(dev(X))


# ---- SVD -------------------------------------------------------------------------------------
SVD_SHAPES = [(1, 1), (2, 2), (3, 5), (5, 3), (17, 17), (33, 5), (5, 33), (100, 17)]


def _check_svd(A, U, S, Vh, full):
    m, n = A.shape[-2:]
    k, big = min(m, n), max(m, n)
    nrm = norm2(A)
    u, s, vh = (x.numpy().astype(np.float64) for x in (U, S, Vh))
    assert u.shape[-2:] == ((m, m) if full else (m, k)) and vh.shape[-2:] == (
        (n, n) if full else (k, n)
    )
    assert_close(s, torch.linalg.svdvals(t64(A)).numpy(), C * big * U32 * nrm, 0.0)
    assert np.all(np.diff(s, axis=-1) <= 0)
    rec = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    assert np.abs(rec - A).max() <= C * big * U32 * nrm
    assert_orthonormal_columns(u, big, "U")
    assert_orthonormal_columns(np.swapaxes(vh, -1, -2), big, "V")


@pytest.mark.parametrize("m,n", SVD_SHAPES)
def test_svd_reconstruction(rng, m, n):
    A = f32(rng.standard_normal((2, m, n)))
    for full in (False, True):
        _check_svd(A, *linalg.svd(dev(A), full_matrices=full), full)
    assert_close(
        linalg.svdvals(dev(A)).numpy(),
        torch.linalg.svdvals(t64(A)).numpy(),
        C * max(m, n) * U32 * norm2(A),
        0.0,
    )


def test_svd_rank_deficient_and_old_api(rng):
    # rank 2 in a 6x4: U must still have orthonormal columns, as LAPACK's
    B = rng.standard_normal((6, 2)) @ rng.standard_normal((2, 4))
    A = f32(B)
    _check_svd(A, *linalg.svd(dev(A), full_matrices=False), False)
    _check_svd(A, *linalg.svd(dev(A)), True)
    Z = f32(np.zeros((3, 4)))
    _check_svd(Z, *linalg.svd(dev(Z)), True)
    # torch.svd: V (not Vh), some=True is the reduced SVD; compute_uv=False gives zeros
    Uo, So, Vo = pr.svd(dev(A))
    assert Uo.shape == (6, 4) and Vo.shape == (4, 4)
    _check_svd(A, Uo, So, Vo.mT, False)
    Uz, Sz, Vz = dev(A).svd(compute_uv=False)
    assert Uz.shape == (6, 6) and Vz.shape == (4, 4) and not Uz.numpy().any()
    U3, S3, Vh3 = linalg.svd(dev(np.zeros((3, 0))))
    assert U3.shape == (3, 3) and S3.shape == (0,) and Vh3.shape == (0, 0)
    res = linalg.svd(dev(A), driver="gesvd")
    assert res.U.shape == (6, 6) and res.S.shape == (4,) and res.Vh.shape == (4, 4)


# ---- pinv, lstsq, matrix_rank, cond, matrix_power -------------------------------------------------
@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (3, 5), (17, 17)])
def test_pinv_parity(rng, m, n):
    k = min(m, n)
    A = f32(
        orthogonal(rng, (2,), m)[..., :k]
        * np.logspace(0, -2, k)
        @ np.swapaxes(orthogonal(rng, (2,), n)[..., :k], -1, -2)
    )
    bound = C * max(m, n) * U32 * 100.0
    assert rel_err(linalg.pinv(dev(A)).numpy(), torch.linalg.pinv(t64(A)).numpy()) <= bound
    assert rel_err(pr.pinverse(dev(A)).numpy(), torch.pinverse(t64(A)).numpy()) <= bound
    assert rel_err(dev(A).pinverse().numpy(), torch.linalg.pinv(t64(A)).numpy()) <= bound
    S = spd(rng, (2,), n, 10.0) - f32(0.05 * np.eye(n))  # symmetric, indefinite
    assert (
        rel_err(
            linalg.pinv(dev(S), hermitian=True).numpy(),
            torch.linalg.pinv(t64(S), hermitian=True).numpy(),
        )
        <= bound * 10
    )
    # a cutoff: singular values below atol are dropped, as torch drops them
    for kw in ({"atol": 0.05}, {"rtol": 0.05}, {"atol": 0.0, "rtol": 0.5}):
        got = linalg.pinv(dev(A), **kw).numpy()
        assert rel_err(got, torch.linalg.pinv(t64(A), **kw).numpy()) <= bound, kw
    r = linalg.matrix_rank(dev(A), atol=0.05)
    assert r.numpy().tolist() == torch.linalg.matrix_rank(t64(A), atol=0.05).tolist()


def test_lstsq(rng):
    A = conditioned(rng, (2,), 5, 10.0)[..., :3]  # 5x3, full rank
    B = f32(rng.standard_normal((2, 5, 2)))
    kap = kappa_of(A)
    for driver in (None, "gels", "gelsy", "gelsd", "gelss"):
        got = linalg.lstsq(dev(A), dev(B), driver=driver)
        want = torch.linalg.lstsq(t64(A), t64(B), driver=driver)
        for f in ("solution", "residuals", "rank", "singular_values"):
            g, w = getattr(got, f).numpy(), getattr(want, f).numpy()
            assert g.shape == w.shape, (driver, f, g.shape, w.shape)
            if f == "rank":
                assert g.tolist() == w.tolist()
            elif g.size:
                assert rel_err(g, w) <= C * 5 * U32 * kap * kap, (driver, f)
    # underdetermined (minimum-norm solution) and a vector right-hand side
    Aw = f32(rng.standard_normal((3, 6)))
    bw = f32(rng.standard_normal(3))
    got = linalg.lstsq(dev(Aw), dev(bw), driver="gelsd").solution
    want = torch.linalg.lstsq(t64(Aw), t64(bw), driver="gelsd").solution.numpy()
    assert rel_err(got.numpy(), want) <= C * 6 * U32 * kappa_of(Aw)
    with pytest.raises(ValueError, match="driver"):
        linalg.lstsq(dev(Aw), dev(bw), driver="xx")


def test_matrix_power_cond_rank(rng):
    A = conditioned(rng, (2,), 5, 10.0)
    for p in (0, 1, 2, 3, 5, -1, -2):
        got = linalg.matrix_power(dev(A), p).numpy()
        want = torch.linalg.matrix_power(t64(A), p).numpy()
        assert rel_err(got, want) <= C * 5 * abs(p or 1) * U32 * kappa_of(A) ** max(1, -p), p
    assert np.array_equal(dev(A).matrix_power(0).numpy(), np.broadcast_to(np.eye(5), A.shape))
    Ai = np.arange(9).reshape(3, 3)
    got = linalg.matrix_power(pr.tensor(Ai), 3)
    assert got.dtype == pr.int32 and np.array_equal(got.numpy(), np.linalg.matrix_power(Ai, 3))
    with pytest.raises(TypeError, match="'n' must be int"):
        linalg.matrix_power(dev(A), 2.0)
    for p in (None, 2, -2, 1, -1, math.inf, -math.inf, "fro", "nuc"):
        want = torch.linalg.cond(t64(A), p).numpy()
        assert_close(linalg.cond(dev(A), p).numpy(), want, 0.0, C * 5 * U32 * 100), p
    D = f32(np.diag([3.0, 1.0, 1e-9]))  # rank 2 at float32's tolerance (3·eps32·3)
    want = torch.linalg.matrix_rank(torch.tensor(D)).item()
    assert linalg.matrix_rank(dev(D)).item() == want == 2
    assert linalg.matrix_rank(dev(D), hermitian=True).item() == 2


# ---- norms, products (the op table) -------------------------------------------------------------
def _vn_tol(o):
    """(sum |x|^o)^(1/o): a sum of n positive terms is within n·u relative, and the power
    1/o scales a relative error by 1/o (ord 0 and ±inf are exact)."""

    def tol(inputs, expected):
        n = max(inputs[0].size // max(np.size(expected), 1), 1)
        scale = 1.0 if o in (0, math.inf, -math.inf) else max(1.0, 1.0 / abs(o))
        return 1e-30, (n + 4) * U32 * scale * 2

    return tol


def _mn_tol(inputs, expected):
    x = inputs[0]
    return C * max(x.shape[-2:]) * U32 * max(norm2(x), 1e-30) * 2, 8 * U32


def _mk(*shapes):
    return lambda rng: [rng.standard_normal(s) for s in shapes]


def _ref(fn):
    """A torch float64 reference on numpy arrays."""

    def ref(*arrays, **kw):
        out = fn(*(t64(a) for a in arrays), **kw)
        return out.numpy() if isinstance(out, torch.Tensor) else out

    return ref


VECTOR_ORDS = [2, 1, math.inf, -math.inf, 0, 3, 0.5]
MATRIX_ORDS = ["fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2]

NORM_ROWS = (
    [
        OpInfo(
            f"vector_norm-{o}",
            lambda x, o=o, **kw: linalg.vector_norm(x, o, **kw),
            _ref(lambda x, o=o, **kw: torch.linalg.vector_norm(x, o, **kw)),
            [
                Sample(_mk((5, 17))),
                Sample(_mk((5, 17)), {"dim": 1, "keepdim": True}),
                Sample(_mk((3, 4, 5)), {"dim": (0, 2)}, layout="t"),
                Sample(_mk((1,)), {}),
            ],
            tol=_vn_tol(o),
            dtypes=("float32", "float16"),
        )
        for o in VECTOR_ORDS
    ]
    + [
        OpInfo(
            f"matrix_norm-{o}",
            lambda x, o=o, **kw: linalg.matrix_norm(x, o, **kw),
            _ref(lambda x, o=o, **kw: torch.linalg.matrix_norm(x, o, **kw)),
            [
                Sample(_mk((4, 5))),
                Sample(_mk((2, 3, 17, 5)), layout="t"),
                Sample(_mk((5, 3, 4)), {"dim": (0, 2), "keepdim": True}),
                Sample(_mk((1, 1))),
            ],
            tol=_mn_tol,
        )
        for o in MATRIX_ORDS
    ]
    + [
        OpInfo(
            "linalg.norm",
            lambda x, **kw: linalg.norm(x, **kw),
            _ref(lambda x, **kw: torch.linalg.norm(x, **kw)),
            [
                Sample(_mk((3, 4, 5))),
                Sample(_mk((4, 5)), {"ord": 2}),
                Sample(_mk((7,)), {"ord": 3}),
                Sample(_mk((4, 5)), {"ord": "nuc"}),
                Sample(_mk((3, 4, 5)), {"ord": 1, "dim": 2}),
                Sample(_mk((3, 4, 5)), {"ord": -1, "dim": (0, 1), "keepdim": True}),
            ],
            tol=_mn_tol,
        ),
        OpInfo(
            "torch.norm",
            lambda x, **kw: x.norm(**kw),
            _ref(lambda x, **kw: torch.norm(x, **kw)),
            [
                Sample(_mk((3, 4, 5))),
                Sample(_mk((3, 4, 5)), {"p": "fro", "dim": (0, 1)}),
                Sample(_mk((4, 5)), {"p": "nuc"}),
                Sample(_mk((3, 4, 5)), {"p": 2, "dim": 1}),
                Sample(_mk((3, 4, 5)), {"p": 1, "dim": (1, 2), "keepdim": True}),
            ],
            tol=_mn_tol,
        ),
    ]
)

PRODUCT_ROWS = [
    OpInfo(
        "linalg.cross",
        lambda a, b, **kw: linalg.cross(a, b, **kw),
        _ref(lambda a, b, **kw: torch.linalg.cross(a, b, **kw)),
        [
            Sample(_mk((3,), (3,))),
            Sample(_mk((4, 3), (1, 3))),
            Sample(_mk((3, 5, 2), (3, 1, 2)), {"dim": 0}),
            Sample(_mk((2, 3), (2, 3)), layout="tt"),
            Sample(_mk((0, 3), (0, 3))),
        ],
        tol=lambda i, e: (
            4 * U32 * (1 + float(np.abs(i[0]).max(initial=0)) * np.abs(i[1]).max(initial=0)),
            0.0,
        ),
    ),
    OpInfo(
        "cross-default-dim",
        lambda a, b: pr.cross(a, b),
        _ref(lambda a, b: torch.cross(a, b, dim=1)),
        [Sample(_mk((2, 3, 3), (2, 3, 3)))],
        tol=lambda i, e: (1e-5, 0.0),
    ),
    OpInfo(
        "tensor.cross",
        lambda a, b: a.cross(b, dim=0),
        _ref(lambda a, b: torch.cross(a, b, dim=0)),
        [Sample(_mk((3, 4), (3, 4)))],
        tol=lambda i, e: (1e-5, 0.0),
    ),
    OpInfo(
        "vecdot",
        lambda a, b, **kw: linalg.vecdot(a, b, **kw),
        _ref(lambda a, b, **kw: torch.linalg.vecdot(a, b, **kw)),
        [Sample(_mk((2, 17), (17,))), Sample(_mk((5, 3, 1), (5, 1, 4)), {"dim": 0})],
        tol=lambda i, e: (17 * U32 * 20, 0.0),
    ),
    OpInfo(
        "tensordot",
        lambda a, b, **kw: pr.tensordot(a, b, **kw),
        _ref(lambda a, b, **kw: torch.tensordot(a, b, **kw)),
        [
            Sample(_mk((2, 3, 4), (3, 4, 5))),
            Sample(_mk((2, 3, 4), (4, 3, 5)), {"dims": ([1, 2], [1, 0])}),
            Sample(_mk((2, 3), (4, 5)), {"dims": 0}),
            Sample(_mk((2, 3, 4), (4, 5)), {"dims": 1}),
        ],
        tol=lambda i, e: (12 * U32 * 20, 0.0),
    ),
    OpInfo(
        "multi_dot",
        lambda *ts: linalg.multi_dot(list(ts)),
        _ref(lambda *ts: torch.linalg.multi_dot(list(ts))),
        [
            Sample(_mk((3,), (3, 17), (17, 2), (2,))),
            Sample(_mk((5, 3), (3, 9))),
            Sample(_mk((1, 30), (30, 2), (2, 40), (40, 3))),
        ],
        tol=lambda i, e: (1e-4, 1e-5),
    ),
    OpInfo(
        "vander",
        lambda x, **kw: linalg.vander(x, **kw),
        _ref(lambda x, **kw: torch.linalg.vander(x, **kw)),
        [Sample(_mk((5,))), Sample(_mk((2, 3)), {"N": 5}), Sample(_mk((4,)), {"N": 2})],
        tol=lambda i, e: (0.0, 8 * U32 * 5),
    ),
    OpInfo(
        "tensorinv",
        lambda a, **kw: linalg.tensorinv(a + pr.eye(6).reshape(2, 3, 6) * 4, **kw),
        _ref(lambda a, **kw: torch.linalg.tensorinv(a + torch.eye(6).reshape(2, 3, 6) * 4, **kw)),
        [Sample(_mk((2, 3, 6)))],
        tol=lambda i, e: (C * 6 * U32 * 10, 0.0),
    ),
    OpInfo(
        "tensorsolve",
        lambda a, b, **kw: linalg.tensorsolve(a + pr.eye(6).reshape(2, 3, 6) * 4, b, **kw),
        _ref(
            lambda a, b, **kw: torch.linalg.tensorsolve(
                a + torch.eye(6, dtype=torch.float64).reshape(2, 3, 6) * 4, b, **kw
            )
        ),
        [Sample(_mk((2, 3, 6), (2, 3)))],
        tol=lambda i, e: (C * 6 * U32 * 10, 0.0),
    ),
    OpInfo(
        "linalg.diagonal",
        lambda a, **kw: linalg.diagonal(a, **kw),
        lambda a, **kw: np.diagonal(a, kw.get("offset", 0), -2, -1),
        [Sample(_mk((3, 4, 5))), Sample(_mk((3, 4, 5)), {"offset": 1})],
        exact=True,
    ),
]


@pytest.mark.parametrize("row", NORM_ROWS + PRODUCT_ROWS, ids=lambda r: r.name)
def test_op_table(row, rng):
    check_row(row, rng)


def test_norm_errors():
    x = dev(np.ones((3, 3)))
    with pytest.raises(TypeError, match="floating point"):
        linalg.vector_norm(pr.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="'ord' must be a number"):
        linalg.vector_norm(x, "fro")
    with pytest.raises(ValueError, match="Order 3 not supported"):
        linalg.matrix_norm(x, 3)
    with pytest.raises(ValueError, match="dim must be a 2-tuple"):
        linalg.matrix_norm(x, "fro", dim=(0,))
    with pytest.raises(ValueError, match="must be 1D or 2D. Got 3D"):
        linalg.norm(dev(np.ones((2, 2, 2))), 2)
    with pytest.raises(ValueError, match="must have length 3. Got 3 and 2"):
        linalg.cross(dev(np.ones((2, 3))), dev(np.ones((2, 2))), dim=-1)
    with pytest.raises(ValueError, match="contracted dimensions need to match"):
        pr.tensordot(dev(np.ones((2, 3, 4))), dev(np.ones((3, 3, 5))), dims=1)
    with pytest.raises(ValueError, match="at least 2 tensors"):
        linalg.multi_dot([x])


# ---- argument errors ---------------------------------------------------------------------------
def test_argument_errors():
    sq = dev(np.eye(3))
    for fn in (linalg.inv, linalg.det, linalg.cholesky, linalg.eigh, linalg.slogdet):
        with pytest.raises(ValueError, match=r"square matrices, but they are 2 by 3 matrices"):
            fn(dev(np.ones((2, 3))))
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            fn(dev(np.ones(3)))
        with pytest.raises(TypeError, match="floating point"):
            fn(pr.tensor(np.eye(3, dtype=np.int32)))
    for fn in (linalg.svd, linalg.qr, linalg.svdvals, linalg.pinv):
        with pytest.raises(ValueError, match="at least 2 dimensions"):
            fn(dev(np.ones(3)))
    if backend.current().has_f16:
        with pytest.raises(TypeError, match="Low precision dtypes not supported"):
            linalg.inv(sq.half())
    with pytest.raises(ValueError, match=r"Incompatible shapes of A and B .*3x3 and 4x1"):
        linalg.solve(sq, dev(np.ones(4)))
    with pytest.raises(ValueError, match="unrecognized mode 'x'"):
        linalg.qr(sq, mode="x")
    with pytest.raises(ValueError, match="driver"):
        linalg.svd(sq, driver="cusolver")


# ---- the loop budget: every kernel family past it, and split on small inputs -----------------------
def test_loop_budget_splits(monkeypatch, rng):
    """With a budget of 2,500 iterations (PYRITE_LOOP_BUDGET-style, via the device), every
    family must split its steps into several dispatches and still be right."""
    d = backend.current()
    monkeypatch.setattr(d, "_loop_budget", 5000)  # max_loop_iterations() = 2,500
    n = 40
    A = conditioned(rng, (3,), n, 10.0)
    S = spd(rng, (3,), n, 10.0)
    nd = d.dispatches
    X = linalg.inv(dev(A))
    assert rel_err(X.numpy(), np.linalg.inv(A.astype(np.float64))) <= n * U32 * kappa_of(A)
    Lc = linalg.cholesky(dev(S)).numpy()
    assert rel_err(Lc, np.linalg.cholesky(S.astype(np.float64))) <= C * n * U32 * kappa_of(S)
    Q, R = linalg.qr(dev(A[..., :30]))
    assert np.abs(Q.numpy().astype(np.float64) @ R.numpy() - A[..., :30]).max() <= (
        C * n * U32 * norm2(A)
    )
    w, V = linalg.eigh(dev(S))
    assert_close(w.numpy(), np.linalg.eigvalsh(S.astype(np.float64)), C * n * U32 * norm2(S), 0)
    Uu, Ss, Vh = linalg.svd(dev(A[..., :30]), full_matrices=False)
    _check_svd(A[..., :30], Uu, Ss, Vh, False)
    LU, piv = linalg.lu_factor(dev(A))
    Bm = f32(rng.standard_normal((3, n, 50)))
    X = linalg.lu_solve(LU, piv, dev(Bm)).numpy()
    assert rel_err(X, np.linalg.solve(A.astype(np.float64), Bm)) <= n * U32 * kappa_of(A) * C
    P, Lm, Um = linalg.lu(dev(A))
    rec = P.numpy().astype(np.float64) @ Lm.numpy() @ Um.numpy()
    assert np.abs(rec - A).max() <= C * n * U32 * norm2(A)
    assert d.dispatches - nd > 60  # (unsplit: about a dozen kernels in all)
    for cost, steps in (
        (lambda s: L.K.lu_step_cost(s, n, 2 * n, 0, 0, 2 * n, 8, 8), n),
        (lambda s: L.K.lu_step_cost(s, n, 2 * n, 2, 0, n, 8, 8), n),
        (lambda s: L.K.cholesky_step_cost(s, n, n, 8, 8), n + 1),
        (lambda s: L.K.qr_step_cost(s, n, 30, 30, 8, 1), 60),
        (lambda s: L.K.eigh_step_cost(s, n, 8, 8), 39 * L.EIGH_SWEEPS),
        (lambda s: L.K.svd_step_cost(s, n, 30, 8, 1, True), 29 * L.SVD_SWEEPS),
    ):
        assert len(L._spans(cost, steps)) > 1


@pytest.mark.parametrize("n", [256, 520])
def test_past_the_real_budget(rng, n):
    """A 256x256 solve loops past lavapipe's 65,535 iterations in one invocation (~n³/(3·TP));
    the planner must split it (on a device without a budget there is one dispatch). At 520
    a blocked panel's steps alone pass it (a 520-row loop around a 32-column one)."""
    A = conditioned(rng, (), n, 10.0)
    B = f32(rng.standard_normal((n, 2)))
    X = linalg.solve(dev(A), dev(B))
    want = np.linalg.solve(A.astype(np.float64), B.astype(np.float64))
    assert rel_err(X.numpy(), want) <= n * U32 * kappa_of(A)
    if backend.current().loop_budget is not None:
        tp = 8
        unsplit = sum(L.K.lu_step_cost(s, n, n + 2, 0, 0, n + 2, tp, tp) for s in range(n))
        assert unsplit > backend.current().loop_budget


def test_blocked_paths(monkeypatch, rng):
    """The blocked LU / Cholesky (panels + GEMM), forced on small matrices with 4-column
    panels: parity, info from a later panel, and the same answers as the unblocked path."""
    monkeypatch.setattr(L, "LU_BLOCK", 4)
    monkeypatch.setattr(L, "LU_BLOCK_MIN", 0)
    monkeypatch.setattr(L, "CHOL_BLOCK_MIN", 0)
    for n in (5, 17, 33):
        A = conditioned(rng, (2,), n, 100.0)
        B = f32(rng.standard_normal((2, n, 3)))
        X = linalg.solve(dev(A), dev(B))
        assert rel_err(X.numpy(), torch.linalg.solve(t64(A), t64(B)).numpy()) <= (
            n * U32 * kappa_of(A)
        )
        Xi = linalg.inv(dev(A))
        assert rel_err(Xi.numpy(), np.linalg.inv(A.astype(np.float64))) <= n * U32 * kappa_of(A)
        d = linalg.det(dev(A * f32(10.0)))
        assert_close(d.numpy(), np.linalg.det(A.astype(np.float64) * 10), 0, n * n * U32 * 100)
        S = spd(rng, (2,), n, 100.0)
        Lc = linalg.cholesky(dev(S)).numpy()
        assert rel_err(Lc, np.linalg.cholesky(S.astype(np.float64))) <= C * n * U32 * 100
        assert np.all(np.triu(Lc, 1) == 0)
    # a zero pivot in the third panel, and a non-PD minor there
    Z = np.eye(12)
    Z[9, 9] = 0.0
    assert linalg.inv_ex(dev(Z)).info.item() == 10
    assert linalg.cholesky_ex(dev(Z)).info.item() == 10


def _one_vs_split(src, arrays, dtypes, words, span):
    """Run steps [s0, s1) of a kernel once in one dispatch and once in two; the buffers must
    end equal. If the planner's cost model undercounted, lavapipe stops the single dispatch's
    invocation early and the two differ."""
    s0, s1 = span
    mid = (s0 + s1) // 2
    outs = []
    for parts in ([(s0, s1)], [(s0, mid), (mid, s1)]):
        ts = [pr.tensor(a, dtype=dt) for a, dt in zip(arrays, dtypes)]
        for a, b in parts:
            backend.current().dispatch(
                src, [t._storage.buffer for t in ts], [1, *words, a, b], (1, 1, 1)
            )
        outs.append([t.numpy() for t in ts])
    for x, y in zip(*outs):
        assert np.array_equal(x, y, equal_nan=True)


def test_cost_model_bounds_the_real_budget(rng):
    """Each family's step costs (kernels/linalg.py) must bound what the device counts: the
    planner's longest dispatch has to complete on lavapipe. Also covers kernels' atomics,
    which llvmpipe counts too (ATOMIC_COST)."""
    if backend.current().loop_budget is None:
        pytest.skip("this device has no loop budget (only lavapipe-like drivers have one)")
    K = L.K
    f, i = pr.float32, pr.int32
    n, tp = 200, 8
    A = f32(rng.standard_normal((1, n, n)))
    span = L._spans(lambda s: K.lu_step_cost(s, n, n, 0, 0, n, tp, tp), n)[0]
    assert span[1] < n
    _one_vs_split(
        K.lu_kernel(tp, 1, tp),
        [A, np.zeros((1, n), np.int32), np.zeros(1, np.int32)],
        [f, i, i],
        [n, n, 0, 0, 0, n, n],
        span,
    )
    # the blocked algorithm's shapes: a 32-column panel of a tall matrix (long rows loop, short
    # column loop: the nested-loop cost dominates), the block row's TRSM, a wide back
    # substitution (inv's right-hand sides)
    big, c1 = 512, 32
    Ab = f32(rng.standard_normal((1, big, big)))
    lu = K.lu_kernel(tp, 1, tp)
    piv0 = np.zeros((1, big), np.int32)
    for mode, c0, c1_, steps, first in ((0, 0, c1, c1, 0), (1, c1, c1, c1, 0)):
        cost = lambda s, mode=mode, c0=c0, c1_=c1_: K.lu_step_cost(
            s, big, big, mode, c0, c1_, tp, tp
        )
        span = L._spans(cost, steps, first=first)[0]
        _one_vs_split(
            lu,
            [Ab, piv0, np.zeros(1, np.int32)],
            [f, i, i],
            [big, big, 0, mode, c0, c1_, big],
            span,
        )
    Ai = f32(np.triu(rng.standard_normal((1, 128, 256))) + 4 * np.eye(128, 256))
    cost = lambda s: K.lu_step_cost(s, 128, 256, 2, 0, 128, tp, tp)
    span = L._spans(cost, 128)[0]
    assert span[1] < 128
    _one_vs_split(
        lu,
        [Ai, piv0[:, :128], np.zeros(1, np.int32)],
        [f, i, i],
        [128, 256, 128, 2, 0, 128, 128],
        span,
    )
    S = spd(rng, (1,), n, 10.0)
    span = L._spans(lambda s: K.cholesky_step_cost(s, n, n, tp, tp), n + 1)[0]
    _one_vs_split(K.cholesky_kernel(tp, 1, tp), [S, np.zeros(1, np.int32)], [f, i], [n, n], span)
    Sb = spd(rng, (1,), big, 10.0)
    span = L._spans(lambda s: K.cholesky_step_cost(s, big, c1, tp, tp), c1)[0]
    _one_vs_split(
        K.cholesky_kernel(tp, 1, tp), [Sb, np.zeros(1, np.int32)], [f, i], [big, c1], span
    )
    tall = f32(rng.standard_normal((1, 4096, 8)))
    g = L._group(tp, 8, 4096)
    span = L._spans(lambda s: K.qr_step_cost(s, 4096, 8, 8, tp, g), 16)[0]
    _one_vs_split(
        K.qr_kernel(tp, 1, g),
        [tall, np.zeros((1, 8), np.float32), np.eye(4096, 8, dtype=np.float32)[None]],
        [f, f, f],
        [4096, 8, 8],
        span,
    )
    g = L._group(tp, n, n)
    span = L._spans(lambda s: K.qr_step_cost(s, n, n, 0, tp, g), n)[0]
    _one_vs_split(
        K.qr_kernel(tp, 1, g),
        [A, np.zeros((1, n), np.float32), np.zeros(1, np.float32)],
        [f, f, f],
        [n, n, 0],
        span,
    )
    m = 48
    X = rng.standard_normal((1, m, m))
    Sy = f32(X + np.swapaxes(X, -1, -2))
    fro = np.array([np.linalg.norm(Sy)], np.float32)
    eye = np.eye(m, dtype=np.float32)[None]
    steps = L.EIGH_SWEEPS * (m - 1)
    span = L._spans(lambda s: K.eigh_step_cost(s, m, tp, tp), steps)[0]
    _one_vs_split(
        K.eigh_kernel(tp, 1, tp, True),
        [Sy, eye, np.zeros((1, m // 2, 4), np.float32), np.zeros((1, 3), np.int32), fro],
        [f, f, f, i, f],
        [m],
        span,
    )
    g = L._group(tp, m // 2, m)
    span = L._spans(lambda s: K.svd_step_cost(s, m, m, tp, g, True), steps)[0]
    _one_vs_split(
        K.svd_kernel(tp, 1, g, True),
        [f32(X), eye, np.zeros((1, 3), np.int32), fro],
        [f, f, i, f],
        [m, m],
        span,
    )


def test_extreme_scales_and_non_finite(rng):
    """Sums of squares inside QR/Jacobi would overflow past 1e19 or vanish below 1e-19 in f32:
    each matrix is scaled by a power of two first. NaN / inf give NaN results (LAPACK's), and
    the SVD raises as torch's does."""
    for s in (1e30, 1e-30):
        A = f32(rng.standard_normal((2, 6, 4)) * s)
        Sy = f32(A[..., :4, :] + np.swapaxes(A[..., :4, :], -1, -2))
        got = linalg.svdvals(dev(A)).numpy()
        assert_close(got, np.linalg.svd(A.astype(np.float64), compute_uv=False), 0, C * 6 * U32)
        got = linalg.eigvalsh(dev(Sy)).numpy()
        assert_close(got, np.linalg.eigvalsh(Sy.astype(np.float64)), C * 4 * U32 * norm2(Sy), 0)
        Q, R = linalg.qr(dev(A))
        assert np.abs(Q.numpy().astype(np.float64) @ R.numpy() - A).max() <= C * 6 * U32 * norm2(A)
    bad = np.stack([np.eye(3), np.eye(3)])
    bad[0, 0, 1] = bad[0, 1, 0] = np.nan
    w, V = linalg.eigh(dev(bad))
    assert np.isnan(w.numpy()[0]).all() and np.isnan(V.numpy()[0]).all()
    assert np.array_equal(w.numpy()[1], [1, 1, 1])
    assert np.isnan(linalg.qr(dev(bad)).R.numpy()[0]).all()
    with pytest.raises(linalg.LinAlgError, match="non-finite values"):
        linalg.svd(dev(bad))
    assert np.isnan(linalg.pinv(dev(bad)).numpy()[0]).all()


@pytest.mark.parametrize("m,n", [(1, 1), (3, 5), (5, 3), (17, 17), (100, 100), (130, 40)])
def test_lu_family(rng, m, n):
    A = f32(rng.standard_normal((2, m, n)))
    big = max(m, n)
    P, Lm, Um = linalg.lu(dev(A))
    tP, tL, tU = torch.linalg.lu(t64(A))
    assert P.shape == tP.shape and Lm.shape == tL.shape and Um.shape == tU.shape
    p, lo, up = (x.numpy().astype(np.float64) for x in (P, Lm, Um))
    assert np.abs(p @ lo @ up - A).max() <= C * big * U32 * norm2(A)
    assert np.all(np.abs(lo) <= 1 + 4 * U32) and np.all(np.triu(lo, 1) == 0)
    assert np.all(np.tril(up, -1) == 0) and np.all(np.isin(p, (0.0, 1.0)))
    LU, piv = linalg.lu_factor(dev(A))
    assert piv.dtype == pr.int32 and piv.shape == (2, min(m, n))
    assert 1 <= piv.numpy().min() and piv.numpy().max() <= m
    P2, L2, U2 = pr.lu_unpack(LU, piv)
    assert np.array_equal(P2.numpy(), P.numpy()) and np.array_equal(U2.numpy(), Um.numpy())
    if m == n:
        kap = kappa_of(A)
        B = f32(rng.standard_normal((2, n, 3)))
        for left in (True, False):
            for adjoint in (False, True):
                Bx = B if left else np.swapaxes(B, -1, -2)
                X = linalg.lu_solve(LU, piv, dev(Bx), left=left, adjoint=adjoint).numpy()
                At = np.swapaxes(A, -1, -2) if adjoint else A
                want = torch.linalg.solve(t64(At), t64(Bx), left=left).numpy()
                assert rel_err(X, want) <= C * n * U32 * kap, (left, adjoint)


def test_lu_pivots_and_errors():
    # unambiguous pivots (distinct magnitudes): the same as LAPACK's, exactly
    A = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 10]])
    LU, piv = linalg.lu_factor(dev(A))
    tLU, tpiv = torch.linalg.lu_factor(t64(A))
    assert piv.numpy().tolist() == tpiv.tolist()
    assert_close(LU.numpy(), tLU.numpy(), 8 * U32 * 10, 0)
    with pytest.raises(linalg.LinAlgError, match=r"U\[1,1\] is zero"):
        linalg.lu_factor(dev(np.zeros((2, 2))))
    res = linalg.lu_factor_ex(dev(np.zeros((2, 2))))
    want = torch.linalg.lu_factor_ex(t64(np.zeros((2, 2))))
    assert res.info.item() == want.info.item() and res.pivots.tolist() == want.pivots.tolist()
    with pytest.raises(NotImplementedError, match="without pivoting"):
        linalg.lu_factor(dev(A), pivot=False)
    LU3, piv3, info3 = pr.lu(dev(A), get_infos=True)
    assert info3.item() == 0 and np.array_equal(LU3.numpy(), LU.numpy())


@pytest.mark.parametrize(
    "n,scale", [(1, 1.0), (3, 0.1), (5, 1.0), (17, 3.0), (33, 10.0), (8, 50.0)]
)
def test_matrix_exp(rng, n, scale):
    """Relative error within C·n·u·max(1, ||A||_1) (observed <= 0.9 of n·u·max(1, ||A||_1))."""
    A = f32(rng.standard_normal((3, n, n)) * scale / math.sqrt(n))
    A[1] = 0.0  # exp(0) = I exactly
    got = linalg.matrix_exp(dev(A)).numpy()
    want = torch.linalg.matrix_exp(t64(A)).numpy()
    nrm = max(1.0, float(np.abs(A).sum(-2).max()))
    assert rel_err(got, want) <= C * n * U32 * nrm
    assert np.array_equal(got[1], np.eye(n))
    assert np.isnan(pr.matrix_exp(dev([[0.0, np.nan], [0.0, 0.0]])).numpy()).all()


@pytest.mark.parametrize("m,n", [(1, 1), (5, 3), (4, 4), (17, 5)])
def test_geqrf_householder_product(rng, m, n):
    A = f32(rng.standard_normal((2, m, n)))
    a, tau = pr.geqrf(dev(A))
    assert a.shape == (2, m, n) and tau.shape == (2, n)
    Q = linalg.householder_product(a, tau).numpy().astype(np.float64)
    R = np.triu(a.numpy())[..., :n, :]
    assert np.abs(Q @ R - A).max() <= C * m * U32 * norm2(A)
    # torch's own reflectors (f32-rounded) through pyrite give torch's Q
    ta, ttau = torch.geqrf(t64(A))
    for k in (n, max(n - 1, 1)):
        got = linalg.householder_product(dev(ta.numpy()), dev(ttau[..., :k].numpy())).numpy()
        want = torch.linalg.householder_product(ta, ttau[..., :k]).numpy()
        assert np.abs(got - want).max() <= C * m * U32 * 4
    with pytest.raises(ValueError, match="greater than or equal"):
        linalg.householder_product(dev(np.ones((2, 3))), dev(np.ones(2)))
