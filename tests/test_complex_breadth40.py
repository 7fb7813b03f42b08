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

from tests.oracle import OLDER_TORCH, same_error  # noqa: E402
from tests.oracle import assert_within as _assert_within  # noqa: E402
from tests.oracle import crandn as _crandn  # noqa: E402
from tests.oracle import numpy_of as _np  # noqa: E402

EPS = 2.0**-24


def _leaves(arrays, grad):
    P = [pr.tensor(a, requires_grad=grad) for a in arrays]
    T = [torch.tensor(a.astype(np.complex128), requires_grad=grad) for a in arrays]
    M = [torch.tensor(np.abs(a).astype(np.float64), requires_grad=grad) for a in arrays]
    return P, T, M


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
        gb = np.abs(_np(m.grad)) if mag else np.abs(W).sum() * max(np.abs(a).max() for a in arrays)
        _assert_within(_np(p.grad), _np(t.grad), C * Kg * EPS * gb + 1e-30, f"grad {i}")
    return P, T


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


# ---- triangular and diagonal parts, trace, diff -----------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (2, 3, 7)])
def test_tril_triu(rng, shape):
    for k in (0, -2, 3):
        check(rng, lambda lib, a: lib.tril(a, k), [shape], 1)
        check(rng, lambda lib, a: a.mT.triu(diagonal=k), [shape], 1)
    with pr.no_grad():  # in place
        z = _crandn(rng, *shape)
        p, t = pr.tensor(z), torch.tensor(z)
        assert p.tril_(1) is p
        np.testing.assert_array_equal(p.numpy(), t.tril_(1).numpy())
        p.triu_(-1), t.triu_(-1)
        np.testing.assert_array_equal(p.numpy(), t.numpy())


def test_diag_diag_embed_trace(rng):
    for k in (0, 2, -1):
        check(rng, lambda lib, v: lib.diag(v[::2], k), [(7,)], 1)
        check(rng, lambda lib, a: lib.diag(a.mT, k), [(3, 5)], 1)
        check(rng, lambda lib, a: a.diag(k), [(1, 1)], 1)
    check(rng, lambda lib, a: lib.diag_embed(a), [(2, 3)], 1)
    check(rng, lambda lib, a: lib.diag_embed(a, 1, 0, 2), [(3, 1, 2)], 1)
    check(rng, lambda lib, a: lib.diag_embed(a.mT, offset=-2, dim1=-1, dim2=0), [(5, 2)], 1)
    for shape in [(1, 1), (5, 5), (3, 11), (13, 2)]:
        if OLDER_TORCH and shape[0] > shape[1]:
            # (torch 2.11's trace backward of a tall matrix also writes every (cols + 1)-th
            # element past the diagonal: 9 of (13, 2)'s 26 where 2.13 writes the 2; the H100)
            continue
        check(rng, lambda lib, a: lib.trace(a), [shape], min(shape))
    check(rng, lambda lib, a: a.mT.trace(), [(7, 4)], 4)


def _abs_diff(lib, a, n, dim, pre=None, app=None):
    """Each diff element's magnitude bound: the binomial sums of |terms| (diff with + signs)."""
    a = lib.cat([t for t in (pre, a, app) if t is not None], dim)
    for _ in range(n):
        size = a.shape[dim]
        a = a.narrow(dim, 1, size - 1) + a.narrow(dim, 0, size - 1)
    return a


@pytest.mark.parametrize("n,dim", [(1, -1), (2, 0), (3, 1)])
def test_diff(rng, n, dim):
    shape = (5, 7)
    check(
        rng,
        lambda lib, a: lib.diff(a, n, dim),
        [shape],
        2**n,
        mag_op=lambda lib, a: _abs_diff(lib, a, n, dim),
    )
    check(
        rng,
        lambda lib, a: a.mT.diff(n=n, dim=dim),
        [(7, 5)],
        2**n,
        mag_op=lambda lib, a: _abs_diff(lib, a.mT, n, dim),
    )
    pshape = tuple(2 if i == dim % 2 else s for i, s in enumerate(shape))
    check(
        rng,
        lambda lib, a, p, q: lib.diff(a, n, dim, prepend=p, append=q),
        [shape, pshape, pshape],
        2**n,
        mag_op=lambda lib, a, p, q: _abs_diff(lib, a, n, dim, p, q),
    )
    # a real prepend is promoted, as torch's
    z, x = _crandn(rng, *shape), rng.standard_normal(pshape).astype(np.float32)
    got = pr.diff(pr.tensor(z), n, dim, prepend=pr.tensor(x))
    want = torch.diff(torch.tensor(z), n, dim, prepend=torch.tensor(x))
    tol = (
        2**n
        * 4
        * EPS
        * _np(_abs_diff(torch, torch.tensor(np.abs(z)), n, dim, torch.tensor(np.abs(x))))
    )
    _assert_within(got.numpy(), want.numpy(), tol, "diff, real prepend")


# ---- var / std ----------------------------------------------------------------------------------
VAR_CASES = [
    ((13,), lambda lib, z: lib.var(z)),
    ((5, 7), lambda lib, z: z.var(0)),
    ((5, 7), lambda lib, z: lib.std(z.mT, dim=1, keepdim=True)),
    ((2, 3, 11), lambda lib, z: lib.var(z, (0, 2), correction=0)),
    ((1, 3), lambda lib, z: z.std(1, False)),  # unbiased positional
    ((4, 1), lambda lib, z: lib.var(z, 1, correction=0)),
    ((3, 5), lambda lib, z: lib.var_mean(z, 1)),
    ((2, 9), lambda lib, z: lib.std_mean(z[:, ::2], dim=-1, correction=2)),
]


@pytest.mark.parametrize("case", range(len(VAR_CASES)))
def test_var_std(rng, case):
    """Real results (var: the mean of |z - mean|², torch's correction); the values within
    4·N·eps of the mean square, std's within that over 2·std, gradients likewise."""
    shape, op = VAR_CASES[case]
    z = _crandn(rng, *shape) + (1 + 2j)  # (off zero: the shifted data matters)
    P, T = (
        pr.tensor(z, requires_grad=True),
        torch.tensor(z.astype(np.complex128), requires_grad=True),
    )
    got, want = op(pr, P), op(torch, T)
    pair = isinstance(want, tuple)
    g0, w0 = (got[0], want[0]) if pair else (got, want)
    assert g0.dtype == pr.float32 and tuple(g0.shape) == tuple(w0.shape)
    n, ms = z.size / max(w0.numel(), 1), float(np.mean(np.abs(z) ** 2))
    tol = 4 * n * EPS * ms * n / max(n - 2, 1)
    is_std = "std" in str(op.__code__.co_names)
    if is_std:
        tol = tol / (2 * _np(w0)) + 4 * EPS * _np(w0)
    _assert_within(_np(g0), _np(w0), tol, "var/std")
    loss_p = (g0 * pr.tensor(np.ones(w0.shape, np.float32) * 0.7)).sum()
    loss_t = (w0 * 0.7).sum()
    if pair:  # and the complex mean, and its gradient
        _assert_within(got[1].numpy(), _np(want[1]), 4 * EPS * np.abs(z).max(), "mean")
        loss_p = loss_p + pr.view_as_real(got[1]).sum()
        loss_t = loss_t + torch.view_as_real(want[1]).sum()
    loss_p.backward()
    loss_t.backward()
    gtol = 16 * n * EPS * np.abs(z).max() * (1 + 1 / max(float(_np(w0).min()), 1e-3))
    _assert_within(P.grad.numpy(), _np(T.grad), gtol, "grad")


# ---- lerp, addcmul, addcdiv ---------------------------------------------------------------------
@pytest.mark.parametrize("w", [0.3, 0.75, 1.0, 0.2 + 0.5j, -1j])
def test_lerp_scalar_weight(rng, w):
    aw = abs(w)
    check(
        rng,
        lambda lib, a, b: lib.lerp(a, b[::2], w),
        [(3, 5), (6, 5)],
        4,
        mag_op=lambda lib, a, b: (a + b[::2]) * (1 + aw),
    )


def test_lerp_tensor_weight_and_refusals(rng):
    check(
        rng,
        lambda lib, a, b, w: lib.lerp(a, b, w.mT),
        [(1, 7), (3, 7), (7, 3)],
        4,
        mag_op=lambda lib, a, b, w: (a + b) * (1 + w.mT),
    )
    with pr.no_grad():
        z, e = _crandn(rng, 5), _crandn(rng, 5)
        p, t = pr.tensor(z), torch.tensor(z)
        assert p.lerp_(pr.tensor(e), 0.25) is p
        t.lerp_(torch.tensor(e), 0.25)
        _assert_within(p.numpy(), t.numpy(), 4 * EPS * (np.abs(z) + np.abs(e)), "lerp_")
    x = rng.standard_normal(5).astype(np.float32)
    same_error(
        lambda: pr.lerp(pr.tensor(z), pr.tensor(z), pr.tensor(x)),
        lambda: torch.lerp(torch.tensor(z), torch.tensor(z), torch.tensor(x)),
    )
    same_error(
        lambda: pr.lerp(pr.tensor(z), pr.tensor(x), 0.5),
        lambda: torch.lerp(torch.tensor(z), torch.tensor(x), 0.5),
    )


@pytest.mark.parametrize("value", [1, -0.5, 2 - 1j])
def test_addcmul_addcdiv(rng, value):
    av = abs(value)
    check(
        rng,
        lambda lib, c, a, b: lib.addcmul(c, a.mT, b, value=value),
        [(1, 5), (5, 3), (3, 5)],
        4,
        mag_op=lambda lib, c, a, b: c + av * a.mT * b,
    )
    check(
        rng,
        lambda lib, c, a, b: lib.addcdiv(c, a, b[..., ::2], value=value),
        [(2, 3), (2, 3), (2, 6)],
        8,
        mag_op=lambda lib, c, a, b: c + av * a / b[..., ::2],
    )
    # real operands promote, as torch's; the in-place forms
    z, x = _crandn(rng, 4), rng.standard_normal(4).astype(np.float32)
    for fn in ("addcmul", "addcdiv"):
        got = getattr(pr, fn)(pr.tensor(x), pr.tensor(z), pr.tensor(x), value=value)
        want = getattr(torch, fn)(torch.tensor(x), torch.tensor(z), torch.tensor(x), value=value)
        assert got.dtype == pr.complex64
        tol = 8 * EPS * (np.abs(x) + av * np.abs(z) * np.maximum(np.abs(x), 1 / np.abs(x)))
        _assert_within(got.numpy(), want.numpy(), tol, fn)
        with pr.no_grad():
            p, t = pr.tensor(z), torch.tensor(z)
            getattr(p, fn + "_")(pr.tensor(z), pr.tensor(x), value=value)
            getattr(t, fn + "_")(torch.tensor(z), torch.tensor(x), value=value)
            _assert_within(p.numpy(), t.numpy(), tol + 8 * EPS * np.abs(z), fn + "_")


# ---- equal, bool and the casts ------------------------------------------------------------------
def test_equal(rng):
    z = _crandn(rng, 3, 5)
    a, b = pr.tensor(z), pr.tensor(z.copy())
    assert pr.equal(a, b) and a.equal(b) and pr.equal(a.mT, b.mT)
    w = z.copy()
    w[1, 2] += 1j * 2.0**-20  # the imaginary part alone differs
    assert not pr.equal(a, pr.tensor(w)) and not torch.equal(torch.tensor(z), torch.tensor(w))
    assert not pr.equal(a, b[:2]) and not torch.equal(torch.tensor(z), torch.tensor(z)[:2])
    n = z.copy()
    n[0, 0] = complex(np.nan, 0)
    assert pr.equal(pr.tensor(n), pr.tensor(n)) == torch.equal(torch.tensor(n), torch.tensor(n))
    r = z.real.copy()  # a real tensor against its complex copy: torch promotes
    for lib in (pr, torch):
        assert lib.equal(lib.tensor(r.astype(np.complex64)), lib.tensor(r))


def test_bool_and_casts(rng):
    z = _crandn(rng, 11)
    z[[1, 4]] = z[[1, 4]].real  # imaginary part 0
    z[[2, 5]] = 1j * z[[2, 5]].imag  # real part 0
    z[[3, 7]] = 0
    z[8] = complex(-0.0, 0.0)
    z[9] = complex(np.nan, 0)
    p, t = pr.tensor(z), torch.tensor(z)
    for fn in (
        lambda x: x.bool(),
        lambda x: x.to(pr.bool if isinstance(x, pr.Tensor) else torch.bool),
        lambda x: x != 0,
    ):
        np.testing.assert_array_equal(fn(p).numpy(), fn(t).numpy())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no discarded-imaginary-part warning for bool)
        p.bool(), p.to(pr.bool)
    zs = z[np.isfinite(z)] * 50
    p, t = pr.tensor(zs), torch.tensor(zs)
    for cast in ("int", "long", "short", "half", "bfloat16"):
        with pytest.warns(UserWarning, match="discards the imaginary part"):
            got = getattr(p, cast)()
        with warnings.catch_warnings():  # (torch warns once a process)
            warnings.simplefilter("ignore")
            want = getattr(t, cast)()
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


# ---- chains, block_diag, any/all/logical_not --------------------------------------------------
@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
def test_multi_dot_chain_matmul_matrix_power(rng):
    check(
        rng,
        lambda lib, v, a, b, w: lib.linalg.multi_dot([v, a, b.mT, w]),
        [(3,), (3, 7), (2, 7), (2,)],
        21,
        C=8.0,
    )
    check(rng, lambda lib, a, b: lib.chain_matmul(a, b, a.mT), [(2, 5), (5, 5)], 25, C=8.0)
    for n in (0, 1, 3):
        check(rng, lambda lib, a: lib.linalg.matrix_power(a, n), [(2, 4, 4)], 4 * n + 1, C=8.0)
    check(rng, lambda lib, a: a.mT.matrix_power(2), [(5, 5)], 5)
    z, x = _crandn(rng, 3, 3), rng.standard_normal((3, 3)).astype(np.float32)
    same_error(
        lambda: pr.linalg.multi_dot([pr.tensor(z), pr.tensor(x)]),
        lambda: torch.linalg.multi_dot([torch.tensor(z), torch.tensor(x)]),
    )


def test_block_diag(rng):
    check(rng, lambda lib, a, b, c: lib.block_diag(a, b.mT, c), [(1, 1), (3, 2), (4,)], 1)
    z, x = _crandn(rng, 2, 3), rng.standard_normal((3, 1)).astype(np.float32)
    got = pr.block_diag(pr.tensor(z), pr.tensor(x))
    want = torch.block_diag(torch.tensor(z), torch.tensor(x))
    assert got.dtype == pr.complex64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_any_all_logical_not(rng):
    z = _crandn(rng, 4, 5)
    z[0] = 0
    z[1, :3] = 1j * z[1, :3].imag
    z[2, 1] = complex(-0.0, 0.0)
    z[3, 2] = z[3, 2].real
    p, t = pr.tensor(z), torch.tensor(z)
    for fn in (
        lambda lib, x: x.any(),
        lambda lib, x: lib.all(x),
        lambda lib, x: x.any(1),
        lambda lib, x: lib.all(x.mT, dim=0, keepdim=True),
        lambda lib, x: x.logical_not(),
        lambda lib, x: lib.logical_not(x[:, ::2]),
    ):
        got, want = fn(pr, p), fn(torch, t)
        assert got.dtype == pr.bool
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_complex_fill_values_follow_the_target_dtype(rng):
    # a Python complex fill value: a complex tensor where no dtype is asked or inherited;
    # into a real dtype (asked, or the input's for *_like) its real part where its imaginary
    # part is 0, else refused as torch refuses it (pyrite filled a complex tensor)
    re, im = (float(v) for v in rng.uniform(-5, 5, 2))
    z, z0 = complex(re, im), complex(re, 0.0)
    cases = [
        lambda m: m.full((3,), z),
        lambda m: m.full((3,), z0, dtype=m.float32),
        lambda m: m.full((2, 3), fill_value=z0, dtype=m.float32),
        lambda m: m.full_like(m.zeros(4), z0),
        lambda m: m.full_like(m.zeros(4, dtype=m.int32), complex(3.0, 0.0)),
        lambda m: m.full_like(m.zeros(4), z, dtype=m.complex64),
        lambda m: m.full_like(m.zeros(4, dtype=m.complex64), z),
    ]
    for f in cases:
        p, t = f(pr), f(torch)
        assert str(p.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
        np.testing.assert_array_equal(p.numpy(), t.numpy())
    for f in [
        lambda m: m.full((3,), z, dtype=m.float32),
        lambda m: m.full((3,), fill_value=z, dtype=m.float32),
        lambda m: m.full_like(m.zeros(4), z),
        lambda m: m.full_like(m.zeros(4), fill_value=z),
        lambda m: m.full_like(m.zeros(4, dtype=m.complex64), z, dtype=m.float32),
        lambda m: m.complex(m.tensor([1, 2]), m.tensor([3, 4])),
        lambda m: m.polar(m.tensor([1, 2]), m.tensor([3, 4])),
    ]:
        same_error(lambda f=f: f(pr), lambda f=f: f(torch))
