"""Complex64 breadth (session 40): ops that raised ComplexError where torch 2.13 computes a
result (products, triangular and diagonal parts, diff, var/std, lerp, addcmul/addcdiv, cross,
kron, equal, bool), against torch CPU on random complex inputs of awkward shapes (size 1,
primes, batches, non-contiguous views), forward and gradient.

Inputs come from the `rng` fixture (seeded from the test's id). The oracle is torch's complex128
result (and gradient), so the tolerance is pyrite's float32 error alone, derived from the
operation: a product of length K within C·K·eps·Σ|a||b| per element, where Σ|a||b| is the same
op run on the magnitudes in float64 (and its gradient, for the gradients' bounds: the gradient
of Σ|W|·op(|a|, |b|) bounds each gradient element's terms); an elementwise result within a few
eps of the magnitudes it combines.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

EPS = 2.0**-24


def _crandn(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _np(x):
    x = x.detach()
    if isinstance(x, torch.Tensor):
        x = x.resolve_conj()
    return x.numpy()


def _leaves(arrays, grad):
    P = [pr.tensor(a, requires_grad=grad) for a in arrays]
    T = [torch.tensor(a.astype(np.complex128), requires_grad=grad) for a in arrays]
    M = [torch.tensor(np.abs(a).astype(np.float64), requires_grad=grad) for a in arrays]
    return P, T, M


def _assert_within(got, want, tol, what):
    g, w = np.asarray(got, np.complex128), np.asarray(want, np.complex128)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    err = np.abs(g - w)
    bad = ~(err <= tol)
    assert not bad.any(), (
        f"{what}: err {err[bad][:4]}, tol {np.broadcast_to(tol, err.shape)[bad][:4]}"
    )


def check(rng, op, shapes, K, *, grad=True, C=4.0, Kg=None, mag=True, mag_op=None):
    """op(lib, *tensors) on complex leaves of `shapes`, pyrite against torch complex128: values
    within C·K·eps times op on the magnitudes (float64), and with grad the gradients of
    Σ view_as_real(out)·W within C·Kg·eps times the magnitudes' gradient (|W| weights)."""
    arrays = [_crandn(rng, *s) for s in shapes]
    P, T, M = _leaves(arrays, grad)
    got, want = op(pr, *P), op(torch, *T)
    assert got.dtype == pr.complex64 and want.dtype == torch.complex128
    assert tuple(got.shape) == tuple(want.shape)
    if mag:
        bound = (mag_op or op)(torch, *M)
    else:  # (the op is no real product: bound by its magnitudes' sum)
        bound = torch.tensor(sum(float(np.abs(a).sum()) for a in arrays)).expand(want.shape)
    assert (_np(bound) >= 0).all()  # (a bound, not a signed result: see mag_op)
    _assert_within(_np(got), _np(want), C * K * EPS * _np(bound) + 1e-30, "value")
    if not grad:
        return P, T
    W = rng.standard_normal((*want.shape, 2))
    (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
    (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
    if mag:
        (bound * torch.tensor(np.abs(W).max(-1))).sum().backward()
    Kg = K if Kg is None else Kg
    for i, (p, t, m) in enumerate(zip(P, T, M)):
        assert p.grad is not None and p.grad.dtype == pr.complex64, i
        gb = _np(m.grad) if mag else np.abs(W).sum() * max(np.abs(a).max() for a in arrays)
        _assert_within(_np(p.grad), _np(t.grad), C * Kg * EPS * gb + 1e-30, f"grad {i}")
    return P, T


def same_error(fp, ft):
    """Both raise; pyrite's error an instance of torch's class (its builtin base)."""
    with pytest.raises(Exception) as te:
        ft()
    want = type(te.value)
    if want.__module__.startswith("torch"):
        want = next(c for c in want.__mro__ if c.__module__ == "builtins")
    with pytest.raises(want):
        fp()


# ---- products ---------------------------------------------------------------------------------
@pytest.mark.parametrize("m,k", [(1, 1), (7, 5), (13, 1), (2, 31)])
def test_mv(rng, m, k):
    check(rng, lambda lib, a, v: lib.mv(a, v), [(m, k), (k,)], k)
    # a transposed matrix, a strided vector, the method form
    check(rng, lambda lib, a, v: a.mT.mv(v[::2]), [(k, m), (2 * k,)], k)


def test_inner_outer_ger(rng):
    check(rng, lambda lib, a, b: lib.inner(a, b), [(3, 5), (2, 7, 5)], 5)
    check(rng, lambda lib, a, b: lib.inner(a.mT, b), [(2, 11), (1, 2)], 2)
    check(rng, lambda lib, a, b: lib.inner(a, b[0, 0]), [(3, 5), (1, 1)], 1)  # a 0-d operand
    check(rng, lambda lib, a, b: lib.outer(a, b[::3]), [(7,), (9,)], 1)
    check(rng, lambda lib, a, b: lib.ger(a, b), [(1,), (5,)], 1)
    # outer promotes a real vector, as torch's
    z, x = _crandn(rng, 5), rng.standard_normal(3).astype(np.float32)
    got = pr.outer(pr.tensor(z), pr.tensor(x))
    want = torch.outer(torch.tensor(z), torch.tensor(x))
    assert got.dtype == pr.complex64
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2 * EPS, atol=0)


@pytest.mark.parametrize(
    "eq,shapes,K",
    [
        ("ij,jk->ik", [(5, 7), (7, 3)], 7),
        ("bij,bjk", [(2, 3, 5), (2, 5, 1)], 5),
        ("i,i", [(13,), (13,)], 13),
        ("i,j->ij", [(3,), (4,)], 1),
        ("ii->i", [(5, 5)], 1),
        ("ii", [(6, 6)], 6),
        ("ij->", [(3, 7)], 21),
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)], 4),
        ("ij,jk,kl->il", [(3, 5), (5, 2), (2, 7)], 10),
        ("ab,bc,cd,de", [(2, 3), (3, 1), (1, 4), (4, 5)], 12),
    ],
)
def test_einsum(rng, eq, shapes, K):
    check(rng, lambda lib, *ts: lib.einsum(eq, *ts), shapes, K, C=8.0)


def test_einsum_forms_and_refusals(rng):
    # a transposed operand, the list form and the sublist form
    check(rng, lambda lib, a, b: lib.einsum("ij,jk->ik", [a.mT, b]), [(5, 3), (5, 2)], 5)
    check(rng, lambda lib, a, b: lib.einsum(a, [0, 1], b, [1, 2], [0, 2]), [(2, 3), (3, 4)], 3)
    check(rng, lambda lib, a: lib.einsum("ij->ji", a), [(3, 4)], 1)
    z, x = _crandn(rng, 3, 3), rng.standard_normal((3, 3)).astype(np.float32)
    same_error(
        lambda: pr.einsum("ij,jk", pr.tensor(z), pr.tensor(x)),
        lambda: torch.einsum("ij,jk", torch.tensor(z), torch.tensor(x)),
    )


def test_tensordot(rng):
    check(rng, lambda lib, a, b: lib.tensordot(a, b, 1), [(3, 5), (5, 2)], 5)
    check(rng, lambda lib, a, b: lib.tensordot(a, b), [(2, 3, 5), (3, 5, 7)], 15)
    check(
        rng,
        lambda lib, a, b: lib.tensordot(a.mT, b, dims=([0], [1])),
        [(2, 11), (3, 11)],
        11,
    )
    check(rng, lambda lib, a, b: lib.tensordot(a, b, 0), [(2,), (3,)], 1)


def test_linalg_vecdot(rng):
    check(rng, lambda lib, a, b: lib.linalg.vecdot(a, b), [(3, 7), (7,)], 7)
    check(rng, lambda lib, a, b: lib.linalg.vecdot(a.mT, b, dim=0), [(1, 5), (5, 4)], 5)
    check(rng, lambda lib, a, b: lib.linalg.vecdot(a, b, dim=-2), [(2, 13, 3), (13, 1)], 13)


def test_kron(rng):
    check(rng, lambda lib, a, b: lib.kron(a, b), [(2, 3), (3, 1)], 1)
    check(rng, lambda lib, a, b: lib.kron(a[::2], b), [(3, 2), (5,)], 1)
    z, x = _crandn(rng, 2, 2), rng.standard_normal((3, 1)).astype(np.float32)
    got, want = pr.kron(pr.tensor(x), pr.tensor(z)), torch.kron(torch.tensor(x), torch.tensor(z))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2 * EPS, atol=0)


@pytest.mark.filterwarnings("ignore:Using torch.cross without")
@pytest.mark.parametrize("dim", [-1, 0, None])
def test_cross(rng, dim):
    # (each component a difference of two products: bounded by Σ|a|·Σ|b| along the dim)
    if dim is None:  # torch.cross: the first dim of size 3
        shapes, d = [(5, 3), (5, 3)], 1
        prep = lambda t: t  # noqa: E731
        op = lambda lib, a, b: lib.cross(a, b)  # noqa: E731
    elif dim == 0:
        shapes, d = [(2, 3), (3, 2)], 0
        prep = lambda t: t.mT if t.shape[0] == 2 else t  # noqa: E731
        op = lambda lib, a, b: lib.cross(prep(a), b, dim=0)  # noqa: E731
    else:  # linalg.cross, batch dims broadcast
        shapes, d = [(4, 1, 3), (1, 7, 3)], -1
        prep = lambda t: t  # noqa: E731
        op = lambda lib, a, b: lib.linalg.cross(a, b)  # noqa: E731

    def mag(lib, a, b):
        a, b = prep(a), prep(b)
        return lib.broadcast_tensors(a.sum(d, keepdim=True) * b.sum(d, keepdim=True), a, b)[0]

    check(rng, op, shapes, 2, mag_op=mag)


def _addmm_cases():
    return [
        ("addmm", lambda lib, c, a, b, **k: lib.addmm(c, a, b, **k), [(5,), (3, 7), (7, 5)], 7),
        ("addmm.T", lambda lib, c, a, b, **k: lib.addmm(c, a.mT, b, **k), [(1, 1), (2, 1), (2, 3)], 2),
        ("addmv", lambda lib, c, a, b, **k: lib.addmv(c, a, b, **k), [(3,), (3, 11), (11,)], 11),
        ("baddbmm", lambda lib, c, a, b, **k: lib.baddbmm(c, a, b, **k), [(3, 1), (2, 3, 5), (2, 5, 1)], 5),
        ("addbmm", lambda lib, c, a, b, **k: lib.addbmm(c, a, b, **k), [(3, 2), (4, 3, 5), (4, 5, 2)], 20),
        ("addr", lambda lib, c, a, b, **k: lib.addr(c, a, b, **k), [(1, 7), (3,), (7,)], 1),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(6))
def test_addmm_family(rng, case):
    name, op, shapes, K = _addmm_cases()[case]
    check(rng, op, shapes, K + 1)
    for beta, alpha in ((0.5, -2.0), (1j, 2 - 1j)):  # complex scalars too
        check(
            rng,
            lambda lib, *t: op(lib, *t, beta=beta, alpha=alpha),
            shapes,
            K + 2,
            grad=False,
            mag_op=lambda lib, *t: op(lib, *t, beta=abs(beta), alpha=abs(alpha)),
        )
    # beta = 0 ignores the input: its NaN does not propagate
    arrays = [_crandn(rng, *s) for s in shapes]
    arrays[0][...] = np.nan
    got = op(pr, *(pr.tensor(a) for a in arrays), beta=0)
    want = op(torch, *(torch.tensor(a) for a in arrays), beta=0)
    assert np.isfinite(got.numpy()).all() and np.isfinite(want.numpy()).all()
    # mixed dtypes: torch refuses (addr promotes)
    x = rng.standard_normal(shapes[1]).astype(np.float32)
    fp = lambda lib, T: op(lib, T(arrays[0]), T(x), T(arrays[2]))  # noqa: E731
    if name == "addr":
        assert fp(pr, pr.tensor).dtype == pr.complex64
    else:
        same_error(lambda: fp(pr, pr.tensor), lambda: fp(torch, torch.tensor))


def test_addmm_in_place_out_and_zero_alpha(rng):
    c, a, b = _crandn(rng, 3, 4), _crandn(rng, 3, 5), _crandn(rng, 5, 4)
    want = torch.tensor(c).addmm_(torch.tensor(a), torch.tensor(b), beta=2, alpha=1j)
    got = pr.tensor(c)
    assert got.addmm_(pr.tensor(a), pr.tensor(b), beta=2, alpha=1j) is got
    tol = 6 * 5 * EPS * (np.abs(a) @ np.abs(b) + np.abs(c))
    _assert_within(got.numpy(), want.numpy(), tol, "addmm_")
    out = pr.empty(0, dtype=pr.complex64)
    assert pr.addmm(pr.tensor(c), pr.tensor(a), pr.tensor(b), out=out) is out
    _assert_within(out.numpy(), np.asarray(c) + a.astype(complex) @ b, tol, "out=")
    # torch's BLAS calls skip the product at alpha = 0 (a NaN operand does not reach the result)
    a[0, 0] = np.nan
    for fn in (torch.addmm, pr.addmm):
        T = torch.tensor if fn is torch.addmm else pr.tensor
        res = fn(T(c), T(a), T(b), alpha=0, beta=0.5)
        np.testing.assert_allclose(_np(res), 0.5 * c, rtol=EPS, atol=0)
    # in place under autograd: refused, as for every complex tensor (see README)
    leaf = pr.tensor(c, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="requires grad"):
        leaf.addmm_(pr.tensor(a), pr.tensor(b))
