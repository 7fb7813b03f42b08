"""The torch names added after tests/test_legacy_names.py, each against torch CPU on fresh random
inputs of awkward sizes: svd_lowrank / pca_lowrank / lobpcg (ops/lowrank.py; randomized, so
singular values and subspaces are compared, not vectors), segment_reduce (ops/segment.py), the
tensor-level names of ops/legacy.py (as_strided_scatter, ormqr, set_, storage(), resize,
as_subclass, ...), the aten spellings of nn/_native.py (native_*_norm, the RNN cells,
embedding_bag, grouped_mm) and nn/modules/legacy.py's deprecated layers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.testing.tolerance import F32_U


def _np(t):
    return t.detach().numpy()


def _close(got, want, tol, what=""):
    np.testing.assert_allclose(_np(got), want.detach().numpy(), rtol=tol, atol=tol, err_msg=what)


# ---- svd_lowrank, pca_lowrank, lobpcg --------------------------------------------------------
def _low_rank(rng, m, n, r, noise=1e-4):
    a = rng.standard_normal((m, r)) @ rng.standard_normal((r, n))
    return (a + noise * rng.standard_normal((m, n))).astype(np.float32)


def _subspace_gap(U1, U2):
    """‖P1 - P2‖ of the orthogonal projectors onto two column spaces."""
    q1, _ = np.linalg.qr(U1.astype(np.float64))
    q2, _ = np.linalg.qr(U2.astype(np.float64))
    return np.linalg.norm(q1 @ q1.T - q2 @ q2.T, 2)


@pytest.mark.parametrize("m,n", [(23, 17), (11, 29)])
def test_svd_lowrank(m, n, rng):
    """A rank-4 matrix plus noise: the top 4 singular values as torch's (and float64's), the
    top-4 left and right subspaces the same, U and V with orthonormal columns, and
    A ≈ U diag(S) Vᵀ to the noise's size."""
    a = _low_rank(rng, m, n, 4)
    pr.manual_seed(3)
    U, S, V = pr.svd_lowrank(pr.tensor(a), q=6)
    tU, tS, tV = torch.svd_lowrank(torch.tensor(a), q=6)
    assert tuple(U.shape) == tuple(tU.shape) and tuple(S.shape) == tuple(tS.shape)
    assert tuple(V.shape) == tuple(tV.shape)
    s64 = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    # (singular values of a 6-column range finder with 2 power iterations: ~m·eps relative)
    np.testing.assert_allclose(_np(S)[:4], s64[:4], rtol=64 * m * F32_U)
    np.testing.assert_allclose(_np(S)[:4], tS.numpy()[:4], rtol=64 * m * F32_U)
    assert _subspace_gap(_np(U)[:, :4], tU.numpy()[:, :4]) < 1e-3
    assert _subspace_gap(_np(V)[:, :4], tV.numpy()[:, :4]) < 1e-3
    np.testing.assert_allclose(_np(U).T @ _np(U), np.eye(6), atol=1e-5)
    recon = _np(U) @ np.diag(_np(S)) @ _np(V).T
    assert np.abs(recon - a).max() < 1e-2
    # the global generator makes it repeatable, as torch's
    pr.manual_seed(3)
    np.testing.assert_array_equal(_np(pr.svd_lowrank(pr.tensor(a), q=6)[1]), _np(S))


def test_svd_lowrank_batched_and_M(rng):
    a = np.stack([_low_rank(rng, 13, 7, 3) for _ in range(2)])
    mean = rng.standard_normal((1, 7)).astype(np.float32)
    U, S, V = pr.svd_lowrank(pr.tensor(a), q=5, M=pr.tensor(mean))
    for b in range(2):
        s64 = np.linalg.svd((a[b] - mean).astype(np.float64), compute_uv=False)
        np.testing.assert_allclose(_np(S)[b, :3], s64[:3], rtol=1e-4)
    assert tuple(U.shape) == (2, 13, 5) and tuple(V.shape) == (2, 7, 5)


def test_pca_lowrank(rng):
    a = _low_rank(rng, 31, 9, 3) + 5.0
    U, S, V = pr.pca_lowrank(pr.tensor(a), q=4)
    tU, tS, tV = torch.pca_lowrank(torch.tensor(a), q=4)
    np.testing.assert_allclose(_np(S)[:3], tS.numpy()[:3], rtol=1e-4)
    assert _subspace_gap(_np(V)[:, :3], tV.numpy()[:, :3]) < 1e-3
    s_nc = pr.pca_lowrank(pr.tensor(a), q=4, center=False)[1]
    np.testing.assert_allclose(_np(s_nc)[:1], np.linalg.svd(a, compute_uv=False)[:1], rtol=1e-4)
    with pytest.raises(ValueError, match="q"):
        pr.pca_lowrank(pr.tensor(a), q=10)
    with pytest.raises(ValueError, match="niter"):
        pr.pca_lowrank(pr.tensor(a), niter=-1)


def test_lobpcg_largest_smallest_generalized(rng):
    m = 37
    x = rng.standard_normal((m, m))
    A = (x @ x.T / m + np.diag(np.linspace(0, 6, m))).astype(np.float32)
    w64 = np.linalg.eigvalsh(A.astype(np.float64))
    # (eigenvalue errors of a converged Ritz pair: ~tol²·‖A‖ ≪ 1e-4 relative)
    pr.manual_seed(0)
    E, X = pr.lobpcg(pr.tensor(A), k=3)
    tE, tX = torch.lobpcg(torch.tensor(A, dtype=torch.float64), k=3)
    np.testing.assert_allclose(_np(E), tE.numpy(), rtol=1e-4)
    np.testing.assert_allclose(_np(E), w64[::-1][:3], rtol=1e-4)
    assert _subspace_gap(_np(X), tX.numpy()) < 1e-2
    E, X = pr.lobpcg(pr.tensor(A), k=2, largest=False, n=3)
    np.testing.assert_allclose(_np(E), w64[:2], rtol=1e-3, atol=1e-4)
    assert tuple(X.shape) == (m, 2)
    # A x = λ B x
    y = rng.standard_normal((m, m))
    B = (y @ y.T / m + np.eye(m)).astype(np.float32)
    L = np.linalg.cholesky(B.astype(np.float64))
    Li = np.linalg.inv(L)
    wg = np.linalg.eigvalsh(Li @ A @ Li.T)
    E, X = pr.lobpcg(pr.tensor(A), k=2, B=pr.tensor(B))
    np.testing.assert_allclose(_np(E), wg[::-1][:2], rtol=1e-4)
    x = _np(X).astype(np.float64)
    np.testing.assert_allclose(x.T @ B @ x, np.eye(2), atol=1e-4)  # B-orthonormal
    with pytest.raises(ValueError, match="3 x the number"):
        pr.lobpcg(pr.tensor(A[:8, :8]), k=3)


def test_lobpcg_eigenvalue_gradient(rng):
    """dλ/dA = x xᵀ at the converged pair (torch's gradient of E). The vectors' error is the
    residual's times ‖A‖/gap (~1e-2 at the default tol √eps_f32 here), so a tighter tol."""
    m = 25
    x = rng.standard_normal((m, m))
    A = (x @ x.T / m + np.diag(np.arange(m, dtype=np.float64))).astype(np.float32)
    a = pr.tensor(A, requires_grad=True)
    E, X = pr.lobpcg(a, k=2, tol=1e-5)
    E.sum().backward()
    ta = torch.tensor(A, dtype=torch.float64, requires_grad=True)
    tE, _ = torch.lobpcg(ta, k=2)
    tE.sum().backward()
    np.testing.assert_allclose(_np(a.grad), ta.grad.numpy(), atol=1e-3)
    with pytest.raises(NotImplementedError, match="lobpcg"):
        X.sum().backward()


# ---- segment_reduce --------------------------------------------------------------------------
REDUCES = ["sum", "mean", "max", "min", "prod"]


@pytest.mark.parametrize("reduce", REDUCES)
def test_segment_reduce_values_and_grads(reduce, rng):
    """Lengths with an empty segment, a prime-length axis, initial or not, the offsets form,
    and gradients (ties of max/min share theirs; zeros in prod) as torch's."""
    data = rng.standard_normal((13, 3)).astype(np.float32)
    data[2, 0] = data[1, 0]  # (a tie inside segment 0)
    data[7, 1] = 0.0  # (a zero for prod)
    lengths = np.array([3, 0, 5, 1, 4])
    g = rng.standard_normal((5, 3)).astype(np.float32)
    for initial in (None, 0.5):
        kw = {} if initial is None else {"initial": initial}
        x = pr.tensor(data, requires_grad=True)
        got = pr.segment_reduce(x, reduce, lengths=pr.tensor(lengths), **kw)
        tx = torch.tensor(data, requires_grad=True)
        want = torch.segment_reduce(tx, reduce, lengths=torch.tensor(lengths), **kw)
        _close(got, want, 8 * F32_U * 16, f"{reduce} {kw}")
        got_off = pr.segment_reduce(
            pr.tensor(data), reduce, offsets=pr.tensor(np.r_[0, np.cumsum(lengths)]), **kw
        )
        _close(got_off, want, 8 * F32_U * 16)
        finite = np.isfinite(want.detach().numpy())
        gg = np.where(finite, g, 0).astype(np.float32)
        got.backward(pr.tensor(gg))
        want.backward(torch.tensor(gg))
        _close(x.grad, tx.grad, 64 * F32_U * 16, f"grad {reduce} {kw}")


def test_segment_reduce_axis_and_errors(rng):
    data = rng.standard_normal((2, 7, 3)).astype(np.float32)
    lengths = np.array([[3, 4], [2, 5]])
    for reduce in ("sum", "max"):
        got = pr.segment_reduce(pr.tensor(data), reduce, lengths=pr.tensor(lengths), axis=1)
        want = torch.segment_reduce(
            torch.tensor(data), reduce, lengths=torch.tensor(lengths), axis=1
        )
        _close(got, want, 16 * F32_U * 8)
    # unsafe: positions after the last segment are left out
    got = pr.segment_reduce(pr.ones(4), "sum", lengths=pr.tensor([1, 1]), unsafe=True)
    np.testing.assert_array_equal(_np(got), [1.0, 1.0])
    d = pr.tensor(data[0])
    with pytest.raises(RuntimeError, match="sum to"):
        pr.segment_reduce(d, "sum", lengths=pr.tensor([3, 3]))
    with pytest.raises(RuntimeError, match="reduce argument"):
        pr.segment_reduce(d, "foo", lengths=pr.tensor([7]))
    with pytest.raises(RuntimeError, match="negative"):
        pr.segment_reduce(d, "sum", lengths=pr.tensor([-1, 8]))
    with pytest.raises(RuntimeError, match="Either lengths or offsets"):
        pr.segment_reduce(d, "sum")
    with pytest.raises(RuntimeError, match="last dimension"):
        pr.segment_reduce(pr.tensor(data), "sum", lengths=pr.tensor([3, 4]), axis=1)
    with pytest.raises(NotImplementedError):
        pr.segment_reduce(pr.tensor([1, 2]), "sum", lengths=pr.tensor([2]))


# ---- tensor-level names (ops/legacy.py) ------------------------------------------------------
def test_as_strided_scatter_and_grads(rng):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    s = rng.standard_normal((2, 3)).astype(np.float32)
    g = rng.standard_normal((5, 7)).astype(np.float32)
    x, src = pr.tensor(a, requires_grad=True), pr.tensor(s, requires_grad=True)
    tx, tsrc = torch.tensor(a, requires_grad=True), torch.tensor(s, requires_grad=True)
    got = pr.as_strided_scatter(x, src, (2, 3), (7, 2), 3)
    want = torch.as_strided_scatter(tx, tsrc, (2, 3), (7, 2), 3)
    np.testing.assert_array_equal(_np(got), want.detach().numpy())
    got.backward(pr.tensor(g))
    want.backward(torch.tensor(g))
    np.testing.assert_array_equal(_np(src.grad), tsrc.grad.numpy())
    # input's gradient: g where input's values survive, 0 where src overwrote them. torch
    # 2.13's formula gives the complement (g only at the overwritten places; its review,
    # pytorch#77128: "Autograd formula looks wrong"), so the reference is computed here
    written = np.zeros(35, bool)
    written[[3 + 7 * i + 2 * j for i in range(2) for j in range(3)]] = True
    np.testing.assert_array_equal(_np(x.grad), np.where(written.reshape(5, 7), 0, g))
    # a view's offset is not the scatter's: counted from the copy's start, as torch's
    v, tv = pr.tensor(a)[1:], torch.tensor(a)[1:]
    np.testing.assert_array_equal(
        _np(v.as_strided_scatter(pr.tensor(s), (2, 3), (7, 1))),
        tv.as_strided_scatter(torch.tensor(s), (2, 3), (7, 1)).numpy(),
    )
    with pytest.raises(RuntimeError, match="size equal to the slice"):
        pr.as_strided_scatter(x, pr.ones(3, 2), (2, 3), (7, 2))
    with pytest.raises(RuntimeError, match="out of bounds"):
        pr.as_strided_scatter(x, pr.ones(2, 3), (2, 3), (33, 1))


@pytest.mark.parametrize("m,n,c", [(7, 4, 3), (4, 6, 5)])
def test_ormqr(m, n, c, rng):
    A = torch.tensor(rng.standard_normal((2, m, n)).astype(np.float32))
    a, tau = torch.geqrf(A)
    other_l = rng.standard_normal((2, m, c)).astype(np.float32)
    other_r = rng.standard_normal((2, c, m)).astype(np.float32)
    tol = 16 * m * F32_U * 4  # (k reflectors of norm ≤ 2 on O(1) entries)
    for left, other in ((True, other_l), (False, other_r)):
        for transpose in (False, True):
            want = torch.ormqr(a, tau, torch.tensor(other), left, transpose)
            got = pr.ormqr(pr.tensor(a.numpy()), pr.tensor(tau.numpy()), pr.tensor(other),
                           left, transpose)  # fmt: skip
            _close(got, want, tol, f"left={left} transpose={transpose}")
    # gradients in all three, as torch's
    ta, ttau, tc = (
        torch.tensor(t.numpy(), requires_grad=True) for t in (a, tau, torch.tensor(other_l))
    )
    torch.ormqr(ta, ttau, tc, True, True).square().sum().backward()
    pa, ptau, pc = (pr.tensor(t.detach().numpy(), requires_grad=True) for t in (ta, ttau, tc))
    pa.ormqr(ptau, pc, True, True).square().sum().backward()
    for p, t in ((pa, ta), (ptau, ttau), (pc, tc)):
        _close(p.grad, t.grad, 64 * tol)
    with pytest.raises(RuntimeError, match="must be equal to input.shape"):
        pr.ormqr(pr.tensor(a.numpy()), pr.tensor(tau.numpy()), pr.ones(2, m + 1, 2))
    with pytest.raises(RuntimeError, match="tau.shape"):
        pr.ormqr(pr.tensor(a.numpy()), pr.ones(2, min(m, n) - 1), pr.tensor(other_l))


def test_function_forms(rng):
    v = pr.zeros(4)
    assert pr.addmv_(v, pr.ones(4, 3), pr.ones(3), beta=2, alpha=3) is v
    np.testing.assert_array_equal(_np(v), [9.0] * 4)
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(_np(pr.adjoint(pr.tensor(a))), torch.adjoint(torch.tensor(a)))
    with pytest.raises(ShapeErrorOrRuntime, match="matrices"):
        pr.adjoint(pr.ones(3))
    x = pr.tensor(a)
    assert pr.conj_physical_(x) is x and x.conj_physical_() is x
    y = pr.arange(12.0)
    pr.as_strided_(y, (3, 2), (4, 1), 1)
    np.testing.assert_array_equal(_np(y), torch.arange(12.0).as_strided((3, 2), (4, 1), 1))
    z = pr.arange(6.0)
    assert pr.resize_as_(z, pr.zeros(2, 2)) is z and tuple(z.shape) == (2, 2)
    np.testing.assert_array_equal(_np(z), [[0, 1], [2, 3]])


ShapeErrorOrRuntime = (pr.ShapeError, RuntimeError)


def test_set_storage_resize_as_subclass():
    s = pr.zeros(2, 3)
    a = pr.arange(6.0)
    assert a.set_(s) is a and tuple(a.shape) == (2, 3)
    s.fill_(3.0)
    np.testing.assert_array_equal(_np(a), np.full((2, 3), 3.0))  # one storage
    b = pr.arange(6.0)
    b.set_(s.untyped_storage(), 1, (2, 2), (1, 2))
    assert tuple(b.stride()) == (1, 2) and b.storage_offset() == 1
    c = pr.arange(6.0).set_()
    assert tuple(c.shape) == (0,)
    d = pr.arange(6.0).set_(s.storage())
    assert tuple(d.shape) == (6,)
    with pytest.raises(RuntimeError, match="Could not set tensor"):
        pr.arange(6, dtype=pr.int64).set_(s)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        pr.arange(6.0, requires_grad=True).set_(s)
    with pytest.raises(RuntimeError, match="out of bounds"):
        pr.arange(6.0).set_(s, 4, (3,))
    # storage(): a TypedStorage of the base's elements
    t = pr.arange(6.0)[2:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's TypedStorage deprecation)
        st, tst = t.storage(), torch.arange(6.0)[2:].storage()
    assert len(st) == len(tst) == st.size() and st.dtype == pr.float32
    assert st.tolist() == tst.tolist() and st[4] == tst[4] and st.nbytes() == tst.nbytes()
    assert pr.arange(1.0).set_(t).storage() == st  # (one storage: equal)
    assert t.storage() == t.storage() and st.data_ptr() == t.untyped_storage().data_ptr()
    # resize: torch's deprecated reshape, same number of elements only
    with pytest.warns(UserWarning, match="non-inplace resize"):
        r = pr.arange(6.0).resize(3, 2)
    np.testing.assert_array_equal(_np(r), np.arange(6.0).reshape(3, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="preserving the number of elements"):
            pr.arange(6.0).resize(2, 2)

    # as_subclass: same storage, same place in the graph
    class Sub(pr.Tensor):
        pass

    w = pr.tensor([1.0, 2.0, 3.0], requires_grad=True)
    m = (w * 2).as_subclass(Sub)
    assert type(m) is Sub and m.requires_grad
    m.sum().backward()
    np.testing.assert_array_equal(_np(w.grad), [2.0, 2.0, 2.0])
    with pytest.raises(TypeError, match="does not inherit from Tensor"):
        pr.ones(2).as_subclass(int)


# ---- aten spellings of nn ops (nn/_native.py) ------------------------------------------------
def test_native_norms(rng):
    x = rng.standard_normal((3, 5, 7)).astype(np.float32)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    tol = 64 * F32_U * 8  # (normalised values of O(1), statistics over ≤ 35 elements)
    got = pr.native_layer_norm(pr.tensor(x), [5, 7], pr.tensor(w), None, 1e-5)
    want = torch.native_layer_norm(torch.tensor(x), [5, 7], torch.tensor(w), None, 1e-5)
    for g, t in zip(got, want):
        assert tuple(g.shape) == tuple(t.shape)
        _close(g, t, tol)
    rm, rv, trm, trv = pr.zeros(5), pr.ones(5), torch.zeros(5), torch.ones(5)
    got = pr.native_batch_norm(pr.tensor(x), None, None, rm, rv, True, 0.1, 1e-5)
    want = torch.native_batch_norm(torch.tensor(x), None, None, trm, trv, True, 0.1, 1e-5)
    for g, t in zip(got, want):
        _close(g, t, tol)
    _close(rv, trv, tol)
    got = pr.native_batch_norm(pr.tensor(x), None, None, rm, rv, False, 0.1, 1e-5)
    want = torch.native_batch_norm(torch.tensor(x), None, None, trm, trv, False, 0.1, 1e-5)
    _close(got[0], want[0], tol)
    assert tuple(got[1].shape) == tuple(want[1].shape) == (0,)
    with pytest.raises(RuntimeError, match="running_mean"):  # (torch's CPU build crashes here)
        pr.native_batch_norm(pr.tensor(x), None, None, None, None, False, 0.1, 1e-5)
    xg = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    got = pr.native_group_norm(pr.tensor(xg), None, None, 2, 6, 15, 3, 1e-5)
    want = torch.native_group_norm(torch.tensor(xg), None, None, 2, 6, 15, 3, 1e-5)
    for g, t in zip(got, want):
        assert tuple(g.shape) == tuple(t.shape)
        _close(g, t, tol)
    with pytest.raises(RuntimeError, match="N \\* C \\* HxW"):
        pr.native_group_norm(pr.tensor(xg), None, None, 2, 6, 14, 3, 1e-5)
    # gradients through the output, as the functional forms'
    px, tx = pr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    pr.native_layer_norm(px, [7], None, None, 1e-5)[0].pow(2).sum().backward()
    torch.native_layer_norm(tx, [7], None, None, 1e-5)[0].pow(2).sum().backward()
    _close(px.grad, tx.grad, 8 * tol)


def test_native_dropout_norm_except_dim(rng):
    out, mask = pr.native_dropout(pr.ones(200, 50), 0.3, True)
    keep = _np(mask)
    assert mask.dtype == pr.bool and abs(keep.mean() - 0.7) < 0.02
    np.testing.assert_allclose(_np(out), keep / 0.7, rtol=4 * F32_U)
    out, mask = pr.native_dropout(pr.ones(3, 4), 0.5, False)
    assert _np(mask).all() and (_np(out) == 1).all()
    assert not _np(pr.native_dropout(pr.ones(5), 1.0, None)[1]).any()
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    for p, dim in ((2, 0), (2, 1), (3, 2), (1, -2), (2, -1)):
        got = pr.norm_except_dim(pr.tensor(x), p, dim)
        want = torch.norm_except_dim(torch.tensor(x), p, dim)
        assert tuple(got.shape) == tuple(want.shape)
        _close(got, want, 64 * F32_U)
    want = torch.linalg.vector_norm(torch.tensor(x), 3)
    _close(pr.native_norm(pr.tensor(x), 3), want, 64 * F32_U)
    got = pr.native_norm(pr.tensor(x), 1, [1], True, None)
    _close(got, torch.linalg.vector_norm(torch.tensor(x), 1, [1], True), 64 * F32_U)


@pytest.mark.parametrize("cell", ["rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell"])
def test_rnn_cells(cell, rng):
    chunks = {"rnn_tanh_cell": 1, "rnn_relu_cell": 1, "gru_cell": 3, "lstm_cell": 4}[cell]
    N, In, H = 3, 5, 7
    arrs = [
        rng.standard_normal(s).astype(np.float32)
        for s in ((N, In), (N, H), (N, H), (chunks * H, In), (chunks * H, H), (chunks * H,),
                  (chunks * H,))
    ]  # fmt: skip
    pt = [pr.tensor(a, requires_grad=True) for a in arrs]
    tt = [torch.tensor(a, requires_grad=True) for a in arrs]

    def call(lib, t):
        hx = (t[1], t[2]) if cell == "lstm_cell" else t[1]
        out = getattr(lib, cell)(t[0], hx, *t[3:])
        return out[0] * out[1] if cell == "lstm_cell" else out

    got, want = call(pr, pt), call(torch, tt)
    _close(got, want, 64 * F32_U * 8)
    got.sum().backward()
    want.sum().backward()
    for p, t in zip(pt, tt):
        if t.grad is not None:
            _close(p.grad, t.grad, 256 * F32_U * 8)
    with pytest.raises(RuntimeError, match="input_size"):
        getattr(pr, cell)(pr.ones(N, In + 1), (pt[1], pt[2]) if cell == "lstm_cell" else pt[1],
                          *pt[3:])  # fmt: skip


def test_embedding_renorm_and_bag(rng):
    w = rng.standard_normal((9, 4)).astype(np.float32) * 2
    idx = np.array([0, 2, 2, 8])
    pw, tw = pr.tensor(w), torch.tensor(w)
    assert pr.embedding_renorm_(pw, pr.tensor(idx), 1.0, 2.0) is pw
    torch.embedding_renorm_(tw, torch.tensor(idx), 1.0, 2.0)
    _close(pw, tw, 8 * F32_U)
    W = rng.standard_normal((11, 3)).astype(np.float32)
    I, O = np.array([1, 2, 4, 5, 4, 3, 2, 10, 7]), np.array([0, 4, 4, 6])
    for mode in (0, 1, 2):
        for pad in (None, 4):
            got = pr.embedding_bag(pr.tensor(W), pr.tensor(I), pr.tensor(O), False, mode, False,
                                   None, False, pad)  # fmt: skip
            want = torch.embedding_bag(torch.tensor(W), torch.tensor(I), torch.tensor(O), False,
                                       mode, False, None, False, pad)  # fmt: skip
            _close(got[0], want[0], 16 * F32_U)
            for g, t in zip(got[1:], want[1:]):
                assert tuple(g.shape) == tuple(t.shape), (mode, pad)
                np.testing.assert_array_equal(_np(g), t.numpy(), err_msg=f"{mode} {pad}")


def test_grouped_mm(rng):
    """torch 2.13's four cases (its CPU kernel wants 16-byte-aligned strides: sizes of 8, 16);
    rows or columns after offs[-1] are torch's unwritten memory, compared only where written."""
    offs = np.array([3, 3, 8], np.int32)
    cases = [
        ((20, 8), (3, 8, 16), offs, 8),
        ((3, 8, 8), (3, 8, 16), None, None),
        ((8, 20), (20, 16), offs, None),
        ((3, 8, 8), (8, 24), np.array([4, 8, 16], np.int32), 16),
    ]
    for sa, sb, o, written in cases:
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        kw_p = {} if o is None else {"offs": pr.tensor(o)}
        kw_t = {} if o is None else {"offs": torch.tensor(o)}
        got = F.grouped_mm(pr.tensor(a), pr.tensor(b), **kw_p)
        want = TF.grouped_mm(torch.tensor(a), torch.tensor(b), **kw_t)
        assert tuple(got.shape) == tuple(want.shape)
        tol = 8 * 8 * F32_U * 16
        if written is None:
            _close(got, want, tol)
        elif len(sa) == 2:
            _close(got[:written], want[:written], tol)
            assert (_np(got[written:]) == 0).all()
        else:
            _close(got[:, :written], want[:, :written], tol)
    x = pr.tensor(rng.standard_normal((20, 8)).astype(np.float32), requires_grad=True)
    wt = pr.tensor(rng.standard_normal((3, 8, 16)).astype(np.float32), requires_grad=True)
    F.grouped_mm(x, wt, offs=pr.tensor(offs)).sum().backward()
    np.testing.assert_allclose(_np(x.grad)[:3], np.tile(_np(wt)[0].sum(1), (3, 1)), rtol=1e-5)
    assert (_np(x.grad)[8:] == 0).all() and (_np(wt.grad)[1] == 0).all()


# ---- deprecated nn layers --------------------------------------------------------------------
def test_deprecated_layers(rng):
    with pytest.warns(FutureWarning, match="NLLLoss2d"):
        loss = pr.nn.NLLLoss2d()
    assert isinstance(loss, pr.nn.NLLLoss)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = rng.integers(0, 3, (2, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.nn.NLLLoss2d()(torch.tensor(x), torch.tensor(t))
    _close(loss(pr.tensor(x), pr.tensor(t)), want, 16 * F32_U)
    with pytest.warns(FutureWarning, match="Container"):
        c = pr.nn.Container(fc=pr.nn.Linear(2, 3))
    assert [n for n, _ in c.named_parameters()] == ["fc.weight", "fc.bias"]


@pytest.mark.parametrize("C,size", [(7, 3), (5, 4), (3, 1)])
def test_cross_map_lrn2d(C, size, rng):
    """torch's forward (its window keeps channel 0's square, see nn/modules/legacy.py); the
    gradient against float64 central differences of torch's forward, since torch's own
    backward fails gradcheck."""
    x = rng.standard_normal((2, C, 2, 3)).astype(np.float32)
    tm = torch.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=2)
    pm = pr.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=2)
    _close(pm(pr.tensor(x)), tm(torch.tensor(x)), 16 * F32_U)
    g = rng.standard_normal(x.shape)
    px = pr.tensor(x, requires_grad=True)
    pm(px).backward(pr.tensor(g.astype(np.float32)))
    x64, h = x.astype(np.float64), 1e-6
    num = np.zeros_like(x64)
    for i in np.ndindex(*x.shape):
        e = np.zeros_like(x64)
        e[i] = h
        up = tm(torch.tensor(x64 + e)).numpy()
        down = tm(torch.tensor(x64 - e)).numpy()
        num[i] = ((up - down) * g).sum() / (2 * h)
    np.testing.assert_allclose(_np(px.grad), num, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="4D"):
        pm(pr.ones(2, 3, 4))
