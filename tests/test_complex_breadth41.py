"""Complex64 breadth (session 41): ops that raised ComplexError where torch 2.13 computes a
result (index, movement and mask ops, nonzero counts, linear, cov/corrcoef, trapezoid,
linspace/logspace, inv and matrix_power(n < 0)), and the ones torch refuses too (nanmean,
nansum, cdist), against torch CPU on random complex inputs of awkward shapes, forward and
gradient.

Inputs come from the `rng` fixture (seeded from the test's id). The oracle is torch's complex128
result (and gradient) on the same complex64 inputs. Movement and index ops are exact: their
values equal the oracle's bit for bit. Elsewhere the tolerance is derived from the op, as in
test_complex_breadth40.py: a sum or product of length K within C·K·eps times the same op run
on the magnitudes in float64 (`mag`), and each gradient within C·K·eps times the magnitudes'
gradient with |W| weights.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

from tests.oracle import assert_within as _assert_within  # noqa: E402
from tests.oracle import crandn as _crandn  # noqa: E402
from tests.oracle import numpy_of as _np  # noqa: E402
from tests.oracle import same_error  # noqa: E402

EPS = 2.0**-24


def check(rng, op, shapes, K, *, grad=True, C=4.0, exact=False, mag_op=None):
    """op(lib, *tensors) on complex leaves of `shapes`, pyrite against torch complex128: values
    equal (exact) or within C·K·eps times op on the magnitudes (float64); with grad, the
    gradients of Σ view_as_real(out)·W within C·K·eps times the magnitudes' gradient (|W|
    weights; K counts the terms a gradient element sums)."""
    arrays = [_crandn(rng, *s) for s in shapes]
    P = [pr.tensor(a, requires_grad=grad) for a in arrays]
    T = [torch.tensor(a.astype(np.complex128), requires_grad=grad) for a in arrays]
    M = [torch.tensor(np.abs(a).astype(np.float64), requires_grad=grad) for a in arrays]
    got, want = op(pr, *P), op(torch, *T)
    assert got.dtype == pr.complex64 and want.dtype == torch.complex128
    assert tuple(got.shape) == tuple(want.shape)
    bound = (mag_op or op)(torch, *M)
    assert (_np(bound) >= 0).all()
    if exact:
        np.testing.assert_array_equal(_np(got), _np(want).astype(np.complex64))
    else:
        _assert_within(_np(got), _np(want), C * K * EPS * _np(bound) + 1e-30, "value")
    if not grad:
        return
    W = rng.standard_normal((*want.shape, 2))
    (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
    (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
    (bound * torch.tensor(np.abs(W).max(-1))).sum().backward()
    for i, (p, t, m) in enumerate(zip(P, T, M)):
        assert p.grad is not None and p.grad.dtype == pr.complex64, i
        gb = np.abs(_np(m.grad))
        _assert_within(_np(p.grad), _np(t.grad), C * K * EPS * gb + 1e-30, f"grad {i}")


def _pair(rng, z):
    """The same complex64 values as a pyrite and a torch (complex64) tensor."""
    return pr.tensor(z), torch.tensor(z)


# ---- index and movement ops: the real op on each part, exact ---------------------------------------
def test_gather(rng):
    idx = rng.integers(0, 5, (3, 4))  # (repeats: a gradient element sums up to 4 terms)
    check(rng, lambda lib, a: lib.gather(a, 1, lib.tensor(idx)), [(3, 5)], 4, exact=True)
    idx = rng.integers(0, 3, (2, 3, 4))
    check(rng, lambda lib, a: lib.gather(a, -3, lib.tensor(idx)), [(3, 3, 4)], 2, exact=True)
    idx = rng.integers(0, 7, (4, 3))
    check(rng, lambda lib, a: a.mT.gather(0, lib.tensor(idx)), [(3, 7)], 4, exact=True)


def test_index_select_take(rng):
    idx = np.array([4, 0, 2, 2, 1])
    check(rng, lambda lib, a: lib.index_select(a, -1, lib.tensor(idx)), [(3, 5)], 2, exact=True)
    check(rng, lambda lib, a: a[:, ::2].index_select(0, lib.tensor(idx[:3] % 2)), [(2, 9)], 2, exact=True)  # fmt: skip
    check(rng, lambda lib, a: lib.index_select(a, 0, lib.tensor(np.array([3]))), [(7,)], 1, exact=True)  # fmt: skip
    idx = rng.integers(-24, 24, (2, 5))  # (negative indices count from the end)
    check(rng, lambda lib, a: lib.take(a, lib.tensor(idx)), [(2, 3, 4)], 10, exact=True)
    idx = rng.integers(0, 5, (3, 2))
    check(rng, lambda lib, a: lib.take_along_dim(a, lib.tensor(idx), -1), [(3, 5)], 2, exact=True)
    check(rng, lambda lib, a: lib.take_along_dim(a, lib.tensor(idx)), [(3, 5)], 2, exact=True)


def test_tile_rot90(rng):
    for reps in [(2, 1), (3,), (2, 1, 3), (1, 1)]:
        check(rng, lambda lib, a: lib.tile(a, reps), [(3, 5)], 6, exact=True)
    check(rng, lambda lib, a: a.tile(2, 2), [(7,)], 4, exact=True)
    for k in (-1, 0, 1, 2, 3, 5):
        check(rng, lambda lib, a: lib.rot90(a, k, [0, 1]), [(3, 5)], 1, exact=True)
        check(rng, lambda lib, a: lib.rot90(a, k, [-1, 0]), [(2, 3, 4)], 1, exact=True)
    check(rng, lambda lib, a: a.mT.rot90(), [(5, 3)], 1, exact=True)


def test_masked_select(rng):
    m = rng.standard_normal((3, 5)) > 0
    check(rng, lambda lib, a: lib.masked_select(a, lib.tensor(m)), [(3, 5)], 1, exact=True)
    check(rng, lambda lib, a: a.masked_select(lib.tensor(m[0])), [(2, 3, 5)], 1, exact=True)


@pytest.mark.parametrize("value", [2.5, -1.5 + 0.25j, 3j, 0])
def test_masked_fill(rng, value):
    # (the bound: the op on the magnitudes, filled with the value's modulus)
    m = rng.standard_normal((3, 5)) > 0
    check(
        rng,
        lambda lib, a: a.masked_fill(lib.tensor(m), value),
        [(3, 5)],
        1,
        exact=True,
        mag_op=lambda lib, a: a.masked_fill(torch.tensor(m), abs(value)),
    )
    # a broadcast mask, the function form, a strided input
    check(
        rng,
        lambda lib, a: lib.masked_fill(a[..., ::2], lib.tensor(m[0]), value),
        [(2, 3, 9)],
        1,
        exact=True,
        mag_op=lambda lib, a: a[..., ::2].masked_fill(torch.tensor(m[0]), abs(value)),
    )


def test_masked_fill_tensor_value_and_in_place(rng):
    z, m = _crandn(rng, 3, 5), rng.standard_normal((3, 5)) > 0
    v = _crandn(rng)
    # a 0-d complex value tensor gets its gradient: the sum of the filled places' gradients
    p, pv = pr.tensor(z, requires_grad=True), pr.tensor(v, requires_grad=True)
    t, tv = torch.tensor(z, requires_grad=True), torch.tensor(v, requires_grad=True)
    got, want = p.masked_fill(pr.tensor(m), pv), t.masked_fill(torch.tensor(m), tv)
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    W = rng.standard_normal((3, 5, 2)).astype(np.float32)
    (pr.view_as_real(got) * pr.tensor(W)).sum().backward()
    (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), t.grad.numpy())
    # (a sum of up to 15 float32 terms)
    _assert_within(pv.grad.numpy(), tv.grad.numpy(), 15 * EPS * np.abs(W).sum(), "value grad")
    # a real 0-d value tensor
    got = pr.tensor(z).masked_fill(pr.tensor(m), pr.tensor(np.float32(-2.5)))
    want = torch.tensor(z).masked_fill(torch.tensor(m), torch.tensor(-2.5))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    # in place: complex self, and a real self with a complex value whose imaginary part is 0
    p, t = _pair(rng, z)
    assert p.masked_fill_(pr.tensor(m), 1 - 2j) is p
    t.masked_fill_(torch.tensor(m), 1 - 2j)
    np.testing.assert_array_equal(p.numpy(), t.numpy())
    x = rng.standard_normal((3, 5)).astype(np.float32)
    p, t = pr.tensor(x), torch.tensor(x)
    got, want = p.masked_fill(pr.tensor(m), 4 + 0j), t.masked_fill(torch.tensor(m), 4 + 0j)
    assert got.dtype == pr.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    p.masked_fill_(pr.tensor(m), pr.tensor(np.complex64(-3)))
    t.masked_fill_(torch.tensor(m), torch.tensor(np.complex64(-3)))
    np.testing.assert_array_equal(p.numpy(), t.numpy())


def test_index_fill(rng):
    z, idx = _crandn(rng, 4, 5), np.array([3, 0])
    for value in (2.0, 1 - 1j):
        p, t = _pair(rng, z)
        got = p.index_fill(-2, pr.tensor(idx), value)
        want = t.index_fill(-2, torch.tensor(idx), value)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        p.index_fill_(1, pr.tensor(idx), value)
        t.index_fill_(1, torch.tensor(idx), value)
        np.testing.assert_array_equal(p.numpy(), t.numpy())


def test_index_and_mask_refusals(rng):
    z, x = _crandn(rng, 3, 5), rng.standard_normal((3, 5)).astype(np.float32)
    ci = np.array([[1 + 0j]], np.complex64)
    m = rng.standard_normal((3, 5)) > 0
    cases = [
        lambda L, T: L.gather(T(z), 0, T(ci)),
        lambda L, T: L.gather(T(x), 0, T(ci)),
        lambda L, T: L.index_select(T(z), 0, T(ci[0])),
        lambda L, T: L.take(T(z), T(ci[0])),
        lambda L, T: L.take_along_dim(T(z), T(ci), 0),
        lambda L, T: L.masked_select(T(z), T(z)),
        lambda L, T: T(z).masked_fill(T(z), 1.0),
        lambda L, T: T(z).masked_fill_(T(z), 1.0),
        lambda L, T: T(x).masked_fill(T(m), 1 + 1j),  # (a real tensor, a complex value)
        lambda L, T: T(x).masked_fill_(T(m), T(np.complex64(1 - 1j))),
        lambda L, T: T(x).index_fill(0, T(np.array([1])), 1 + 1j),
        lambda L, T: L.rot90(T(z[0])),
        lambda L, T: L.rot90(T(z), 1, [0, 0]),
        lambda L, T: L.index_select(T(z), 2, T(np.array([0]))),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))


# ---- nonzero counts --------------------------------------------------------------------------------
def _sparse_complex(rng, *shape):
    """Random complex values with zeros, purely real and purely imaginary entries mixed in."""
    z = _crandn(rng, *shape)
    kind = rng.integers(0, 4, shape)
    z = np.where(kind == 0, 0, z)
    z = np.where(kind == 1, z.real, z)
    return np.where(kind == 2, 1j * z.imag, z).astype(np.complex64)


def test_nonzero_argwhere_count_nonzero(rng):
    for shape in [(7,), (3, 5), (2, 3, 4), ()]:
        z = _sparse_complex(rng, *shape)
        p, t = _pair(rng, z)
        want = torch.nonzero(t)
        got = pr.nonzero(p)
        assert got.dtype == pr.nonzero(pr.tensor(np.abs(z))).dtype  # (pyrite's index dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(pr.argwhere(p).numpy(), torch.argwhere(t).numpy())
        for g, w in zip(pr.nonzero(p, as_tuple=True), torch.nonzero(t, as_tuple=True)):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
        np.testing.assert_array_equal(p.nonzero().numpy(), want.numpy())
        dims = [None] + list(range(-len(shape), len(shape)))
        if len(shape) > 1:
            dims.append((0, -1))
        for d in dims:
            got, want = pr.count_nonzero(p, dim=d), torch.count_nonzero(t, dim=d)
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    # NaN parts count as nonzero, as torch's
    z = np.array([complex(np.nan, 0), 0, complex(0, np.nan)], np.complex64)
    np.testing.assert_array_equal(
        pr.count_nonzero(pr.tensor(z)).numpy(), torch.count_nonzero(torch.tensor(z)).numpy()
    )


# ---- linear --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 5), (2, 5), (2,)],
        [(7,), (3, 7), (3,)],
        [(2, 3, 4), (1, 4), (1,)],
        [(3, 5), (2, 5), None],
        [(3, 5), (5,), None],
        [(1, 1), (1, 1), (1,)],
    ],
)
def test_linear(rng, shapes):
    # (a dot of length K, plus the bias: K + 1 terms an element)
    K = shapes[1][-1] + 1
    if shapes[2] is None:
        op = lambda lib, x, w: lib.nn.functional.linear(x, w)  # noqa: E731
        shapes = shapes[:2]
    else:
        op = lambda lib, x, w, b: lib.nn.functional.linear(x, w, b)  # noqa: E731
    check(rng, op, shapes, K)


def test_linear_transposed_weight_and_refusals(rng):
    check(rng, lambda lib, x, w: lib.nn.functional.linear(x, w.mT), [(4, 3), (3, 2)], 3)
    z, x = _crandn(rng, 3, 5), rng.standard_normal((3, 5)).astype(np.float32)
    b, bx = _crandn(rng, 3), rng.standard_normal(3).astype(np.float32)
    cases = [
        lambda F, T: F.linear(T(x), T(z)),
        lambda F, T: F.linear(T(z), T(x)),
        lambda F, T: F.linear(T(z), T(z), T(bx)),
        lambda F, T: F.linear(T(x), T(x), T(b)),
        lambda F, T: F.linear(T(z), T(z[0]), T(b[0])),  # (a 1-d weight with a bias)
        lambda F, T: F.linear(T(z), T(z.T)),
    ]
    for f in cases:
        same_error(
            lambda f=f: f(pr.nn.functional, pr.tensor),
            lambda f=f: f(torch.nn.functional, torch.tensor),
        )


# ---- inv, matrix_power(n < 0) ----------------------------------------------------------------------
def _inverse_bounds(a, k):
    """Per matrix of a (..., n, n): the bound C·n·eps·κ(A)·‖A⁻¹‖^k on an element of A^-k formed
    in float32 (a backward-stable inverse is within ~n·eps·κ(A) of A⁻¹ normwise, and each of
    the k factors carries that relative error), and the same times k·‖A⁻¹‖ for the gradient of
    Σ Re(conj(W)·A^-k) (the gradient is a sum of k products of A⁻ᴴ's around W)."""
    a64 = a.astype(np.complex128)
    n = a.shape[-1]
    kappa = np.linalg.cond(a64)[..., None, None]
    xn = np.linalg.norm(np.linalg.inv(a64), axis=(-2, -1))[..., None, None]
    value = 8 * (k + 1) * n * EPS * kappa * xn**k
    return value, value * k * xn


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (2, 4, 4), (2, 1, 7, 7)])
def test_inv(rng, shape):
    a = _crandn(rng, *shape)
    a += 2 * np.eye(shape[-1], dtype=np.complex64)  # (away from singular, still not Hermitian)
    value_tol, grad_tol = _inverse_bounds(a, 1)
    for f in (
        lambda L, A: L.linalg.inv(A),
        lambda L, A: L.inverse(A),
        lambda L, A: A.inverse(),
        lambda L, A: L.linalg.inv_ex(A).inverse,
    ):
        p = pr.tensor(a, requires_grad=True)
        t = torch.tensor(a.astype(np.complex128), requires_grad=True)
        got, want = f(pr, p), f(torch, t)
        assert got.dtype == pr.complex64 and tuple(got.shape) == tuple(want.shape)
        _assert_within(_np(got), _np(want), value_tol, "value")
        W = rng.standard_normal((*shape, 2))
        (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
        (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
        wn = np.linalg.norm(np.abs(W[..., 0] + 1j * W[..., 1]), axis=(-2, -1))[..., None, None]
        _assert_within(_np(p.grad), _np(t.grad), grad_tol * wn, "grad")
    info = pr.linalg.inv_ex(pr.tensor(a)).info
    np.testing.assert_array_equal(info.numpy(), np.zeros(shape[:-2]))


@pytest.mark.parametrize("n", [-1, -2, -3])
def test_matrix_power_negative(rng, n):
    for shape in [(3, 3), (2, 5, 5)]:
        a = _crandn(rng, *shape) + 2 * np.eye(shape[-1], dtype=np.complex64)
        value_tol, grad_tol = _inverse_bounds(a, -n)
        p = pr.tensor(a, requires_grad=True)
        t = torch.tensor(a.astype(np.complex128), requires_grad=True)
        got, want = pr.linalg.matrix_power(p, n), torch.linalg.matrix_power(t, n)
        assert got.dtype == pr.complex64
        _assert_within(_np(got), _np(want), value_tol, "value")
        np.testing.assert_array_equal(
            pr.tensor(a).matrix_power(n).numpy(), pr.linalg.matrix_power(pr.tensor(a), n).numpy()
        )
        W = rng.standard_normal((*shape, 2))
        (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
        (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
        wn = np.linalg.norm(np.abs(W[..., 0] + 1j * W[..., 1]), axis=(-2, -1))[..., None, None]
        _assert_within(_np(p.grad), _np(t.grad), grad_tol * wn, "grad")


def test_inv_refusals(rng):
    z = _crandn(rng, 3, 5)
    cases = [
        lambda L, T: L.linalg.inv(T(z)),
        lambda L, T: L.linalg.inv(T(z[0])),
        lambda L, T: L.linalg.inv(T(np.zeros((2, 3, 3), np.complex64))),
        lambda L, T: L.linalg.inv_ex(T(np.zeros((3, 3), np.complex64)), check_errors=True),
        lambda L, T: L.linalg.matrix_power(T(z), -1),
        lambda L, T: L.linalg.matrix_power(T(z[0]), -2),
        lambda L, T: L.linalg.matrix_power(T(np.zeros((3, 3), np.complex64)), -1),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))
    # a singular batch element: the real op's LinAlgError, naming the batch element
    b = np.stack([_crandn(rng, 3, 3), np.zeros((3, 3), np.complex64)])
    with pytest.raises(RuntimeError, match="Batch element 1"):
        pr.linalg.inv(pr.tensor(b))
    info = pr.linalg.inv_ex(pr.tensor(b)).info.numpy()
    assert info[0] == 0 and info[1] > 0


# ---- cov, corrcoef -------------------------------------------------------------------------------
def _cov_mag(correction=1, fw=None, aw=None):
    """A bound on cov's terms from the magnitudes: |z - μ| <= |z| + mean|z| (weighted as the
    op weighs), so Σ w|z_j - μ_j||z_l - μ_l| / norm is bounded by the same sum of those."""

    def mag(lib, a):
        a = a.reshape(1, -1) if a.ndim < 2 else a
        w = torch.ones(a.shape[1], dtype=torch.float64)
        if fw is not None:
            w = w * torch.tensor(fw, dtype=torch.float64)
        if aw is not None:
            w = w * torch.tensor(aw, dtype=torch.float64)
        c = a + (a * w).sum(1, keepdim=True) / w.sum()
        if aw is None:
            norm = w.sum() - correction
        else:
            norm = w.sum() - correction * (w * torch.tensor(aw)).sum() / w.sum()
        out = (c * w) @ c.T / abs(norm)
        return out.reshape(()) if out.shape == (1, 1) else out

    return mag


@pytest.mark.parametrize(
    "shape,kw",
    [
        ((3, 5), {}),
        ((7,), {}),
        ((2, 11), {"correction": 0}),
        ((4, 6), {"correction": 2}),
        ((1, 5), {}),
        ((3, 5), {"fw": [1, 2, 3, 1, 4]}),
        ((3, 5), {"aw": [0.5, 2.0, 0.25, 1.0, 3.0]}),
        ((2, 5), {"fw": [2, 1, 1, 3, 1], "aw": [1.5, 0.5, 2.0, 1.0, 0.75], "correction": 1}),
    ],
)
def test_cov(rng, shape, kw):
    fw, aw, corr = kw.get("fw"), kw.get("aw"), kw.get("correction", 1)

    def op(lib, a):
        extra = {}
        if fw is not None:
            extra["fweights"] = lib.tensor(np.array(fw))
        if aw is not None:
            extra["aweights"] = lib.tensor(np.array(aw, np.float32))
        return lib.cov(a, correction=corr, **extra)

    # (the mean: a sum of N terms, then a sum of N products: 2N + 2 roundings an element)
    N = shape[-1]
    check(rng, op, [shape], 2 * N + 2, C=8.0, mag_op=_cov_mag(corr, fw, aw))
    if len(shape) == 2 and not kw:  # (the method, on a transposed view)
        mag = _cov_mag()
        check(rng, lambda lib, a: a.mT.cov(), [shape[::-1]], 2 * N + 2, C=8.0,
              mag_op=lambda lib, a: mag(lib, a.mT))  # fmt: skip


@pytest.mark.parametrize("shape", [(3, 5), (2, 9), (4, 4), (6,), (1, 7)])
def test_corrcoef(rng, shape):
    """Against torch complex128: r_jl = cov_jl / (sd_j sd_l); |Σ (z_j - μ_j) conj(z_l - μ_l)|
    <= (N-1) sd_j sd_l (Cauchy-Schwarz), so the value error is within C·N·eps, and each
    gradient element within C·N·eps times the sizes of its terms, G below."""
    z = _crandn(rng, *shape) + (0.5 - 1j)  # (off zero: the centring matters)
    p = pr.tensor(z, requires_grad=True)
    t = torch.tensor(z.astype(np.complex128), requires_grad=True)
    got, want = pr.corrcoef(p), torch.corrcoef(t)
    assert got.dtype == pr.complex64 and tuple(got.shape) == tuple(want.shape)
    N = shape[-1]
    _assert_within(_np(got), _np(want), 16 * N * EPS, "value")
    W = rng.standard_normal((*want.shape, 2))
    (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
    (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
    z2 = z.reshape(-1, N).astype(np.complex128)
    c = np.abs(z2 - z2.mean(1, keepdims=True))  # (V, N)
    sd = np.sqrt((c**2).sum(1) / (N - 1))  # (V,)
    w = np.abs(W[..., 0] + 1j * W[..., 1]).reshape(len(sd), len(sd))
    w = w + w.T
    # d r_jl / d z_jk: terms of size (|c_lk| / sd_l + |c_jk| / sd_j) / ((N - 1) sd_j)
    G = (w @ (c / sd[:, None]) + w.sum(1, keepdims=True) * c / sd[:, None]) / (
        (N - 1) * sd[:, None]
    )
    _assert_within(_np(p.grad), _np(t.grad), 16 * N * EPS * G.reshape(shape), "grad")


def test_cov_corrcoef_edges_and_refusals(rng):
    z = _crandn(rng, 3, 5)
    # one variable, one observation: torch's NaN (degrees of freedom <= 0) and 0-d shapes
    for f in (lambda L: L.cov(L.tensor(z[0, :1])), lambda L: L.corrcoef(L.tensor(z[0, :1]))):
        with warnings.catch_warnings():  # (torch warns of the degrees of freedom)
            warnings.simplefilter("ignore")
            g, w = f(pr), f(torch)
        assert tuple(g.shape) == tuple(w.shape) == ()
        np.testing.assert_array_equal(np.isnan(g.numpy()), np.isnan(w.numpy()))
    x = rng.standard_normal((3, 5)).astype(np.float32)
    cases = [
        lambda L, T: L.cov(T(_crandn(rng, 2, 2, 2))),
        lambda L, T: L.cov(T(z), aweights=T(z[0])),
        lambda L, T: L.cov(T(z), fweights=T(z[0])),
        lambda L, T: L.cov(T(z), aweights=T(x[0, :4])),
        lambda L, T: L.corrcoef(T(_crandn(rng, 2, 2, 2))),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))


# ---- trapezoid, cumulative_trapezoid --------------------------------------------------------------
def _trap_mag(dim, cumulative=False, dx=1.0):
    """Σ (|y_k| + |y_k+1|)(|x_k| + |x_k+1|) / 2 along dim (or dx·Σ(|y_k| + |y_k+1|) / 2): a
    bound on each term of the sum, so on its float32 error with K the count of terms."""

    def mag(lib, y, x=None):
        n = y.shape[dim]
        hi, lo = y.narrow(dim, 1, n - 1), y.narrow(dim, 0, n - 1)
        if x is None:
            terms = (hi + lo) * abs(dx) / 2
        else:
            if x.ndim == 1:
                shape = [1] * y.ndim
                shape[dim] = n
                x = x.reshape(shape)
            xd = dim if x.ndim == y.ndim else -1
            terms = (hi + lo) * (x.narrow(xd, 1, n - 1) + x.narrow(xd, 0, n - 1)) / 2
        return terms.cumsum(dim) if cumulative else terms.sum(dim)

    return mag


@pytest.mark.parametrize("cumulative", [False, True])
def test_trapezoid(rng, cumulative):
    name = "cumulative_trapezoid" if cumulative else "trapezoid"

    def run(**kw):
        return lambda lib, *ts: getattr(lib, name)(*ts, **kw)

    for shape, dim in [((3, 5), -1), ((7,), 0), ((2, 3, 4), 1), ((4, 2), -2)]:
        n = shape[dim]
        # spacing 1, a real dx, complex x along dim (1-d, or y's shape)
        check(rng, run(dim=dim), [shape], n + 2, mag_op=_trap_mag(dim, cumulative))
        check(rng, run(dx=0.37, dim=dim), [shape], n + 2, mag_op=_trap_mag(dim, cumulative, 0.37))
        check(rng, run(dim=dim), [shape, (n,)], n + 4, mag_op=_trap_mag(dim, cumulative))
        check(rng, run(dim=dim), [shape, shape], n + 4, mag_op=_trap_mag(dim, cumulative))
    check(rng, lambda lib, y: lib.trapz(y, dx=2.0), [(3, 5)], 7, mag_op=_trap_mag(-1, dx=2.0))


def _wide(a):
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def test_trapezoid_mixed_and_edges(rng):
    # a real y with complex x, a complex y with real x: torch promotes both
    for ys, xs in [((3, 5), None), (None, (5,))]:
        y = _crandn(rng, 3, 5) if ys is None else rng.standard_normal(ys).astype(np.float32)
        x = _crandn(rng, 5) if xs is None else rng.standard_normal(xs).astype(np.float32)
        for name in ("trapezoid", "cumulative_trapezoid"):
            got = getattr(pr, name)(pr.tensor(y), pr.tensor(x))
            want = getattr(torch, name)(torch.tensor(_wide(y)), torch.tensor(_wide(x)))
            assert got.dtype == pr.complex64
            bound = _trap_mag(-1, name[0] == "c")(torch, torch.tensor(np.abs(y)).double(),
                                                  torch.tensor(np.abs(x)).double())  # fmt: skip
            _assert_within(got.numpy(), _np(want), 24 * EPS * _np(bound), name)
    # an empty dim: zeros of the reduced shape, an empty running sum
    z = np.zeros((3, 0), np.complex64)
    for f in (lambda L, T: L.trapezoid(T(z)), lambda L, T: L.cumulative_trapezoid(T(z))):
        g, w = f(pr, pr.tensor), f(torch, torch.tensor)
        assert g.dtype == pr.complex64 and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    z = _crandn(rng, 3, 5)
    cases = [
        lambda L, T: L.trapezoid(T(z), dx=1 + 1j),
        lambda L, T: L.cumulative_trapezoid(T(z), dx=2j),
        lambda L, T: L.trapezoid(T(z), T(_crandn(rng, 4))),
        lambda L, T: L.trapezoid(T(z), dim=2),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))


# ---- linspace, logspace ---------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [1, 2, 5, 17, 100])
def test_linspace(rng, steps):
    # torch forms the complex step and each element part by part in float32: the same values
    a, b, c, d = (float(v) for v in rng.uniform(-50, 50, 4))
    for start, end, kw in [
        (complex(a, b), complex(c, d), {}),
        (a, complex(c, d), {}),
        (complex(a, 0), c, {"dtype": None}),
        (a, c, {"dtype": "complex64"}),
        (complex(0, b), complex(0, b), {}),
    ]:
        tkw = {k: getattr(torch, v) if isinstance(v, str) else v for k, v in kw.items()}
        pkw = {k: getattr(pr, v) if isinstance(v, str) else v for k, v in kw.items()}
        got, want = pr.linspace(start, end, steps, **pkw), torch.linspace(start, end, steps, **tkw)
        assert got.dtype == pr.complex64 and want.dtype == torch.complex64
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    # 0-d complex tensors as the ends; requires_grad
    s, e = _crandn(rng), _crandn(rng)
    got = pr.linspace(pr.tensor(s), pr.tensor(e), steps, requires_grad=True)
    want = torch.linspace(torch.tensor(s), torch.tensor(e), steps, requires_grad=True)
    assert got.requires_grad and want.requires_grad
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())


@pytest.mark.parametrize("base", [10.0, 2.0, 0.5])
def test_logspace(rng, base):
    """exp(w·ln b) in float32: the exponent's rounding is ~eps·|w ln b| absolute, so each value
    within C·eps·(1 + |w ln b|)·|b^w|."""
    a, b, c, d = (float(v) for v in rng.uniform(-3, 3, 4))
    for steps in (1, 4, 13):
        got = pr.logspace(complex(a, b), complex(c, d), steps, base=base)
        want = torch.logspace(complex(a, b), complex(c, d), steps, base=base)
        w = torch.linspace(complex(a, b), complex(c, d), steps, dtype=torch.complex128).numpy()
        assert got.dtype == pr.complex64 and want.dtype == torch.complex64
        exact = base**w
        tol = 8 * EPS * (1 + np.abs(w * np.log(base))) * np.abs(exact)
        _assert_within(got.numpy(), exact, tol, "logspace")
        _assert_within(want.numpy(), exact, tol, "torch's logspace")  # (the bound holds there)


def test_linspace_refusals(rng):
    cases = [
        lambda L: L.linspace(1j, 2, 5, dtype=L.float32),
        lambda L: L.linspace(1 + 0j, 2, 5, dtype=L.int32),
        lambda L: L.logspace(1j, 2, 5, dtype=L.float32),
        lambda L: L.linspace(1j, 2, -1),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr), lambda f=f: f(torch))


# ---- what torch refuses too -----------------------------------------------------------------------
def test_nanmean_nansum_cdist_refused_as_torch(rng):
    z, x = _crandn(rng, 3, 5), rng.standard_normal((3, 5)).astype(np.float32)
    cases = [
        lambda L, T: L.nanmean(T(z)),
        lambda L, T: T(z).nanmean(dim=1),
        lambda L, T: L.nansum(T(z)),
        lambda L, T: L.nanmean(T(x), dtype=L.complex64),
        lambda L, T: L.nansum(T(x), dtype=L.complex64),
        lambda L, T: L.cdist(T(z), T(z)),
        lambda L, T: L.cdist(T(x), T(z)),
        lambda L, T: L.cdist(T(z), T(x)),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))


@pytest.mark.parametrize(
    "ashape,bshape,left",
    [
        ((3, 3), (3, 2), True),
        ((5, 5), (5,), True),
        ((2, 4, 4), (2, 4), True),  # (B of A's batch and n: a vector, torch's rule)
        ((2, 4, 4), (1, 4, 3), True),
        ((3, 3), (2, 3), False),
        ((2, 1, 5, 5), (3, 7, 5), False),
    ],
)
def test_solve(rng, ashape, bshape, left):
    """A backward-stable solve is within ~n·eps·κ(A)·‖X‖ of X normwise; the gradients
    (gB = A⁻ᴴ G, gA = -gB Xᴴ, or their transposes) within that times ‖A⁻¹‖·‖G‖·(1 + ‖X‖)."""
    a = _crandn(rng, *ashape) + 2 * np.eye(ashape[-1], dtype=np.complex64)
    b = _crandn(rng, *bshape)
    p = [pr.tensor(a, requires_grad=True), pr.tensor(b, requires_grad=True)]
    t = [torch.tensor(v.astype(np.complex128), requires_grad=True) for v in (a, b)]
    got = pr.linalg.solve(*p, left=left)
    want = torch.linalg.solve(*t, left=left).resolve_conj()  # (left=False: a conj view)
    assert got.dtype == pr.complex64 and tuple(got.shape) == tuple(want.shape)
    a64 = a.astype(np.complex128)
    n = ashape[-1]
    kappa = np.linalg.cond(a64).max()
    ainv = np.linalg.norm(np.linalg.inv(a64), axis=(-2, -1)).max()
    xn = np.abs(_np(want)).max() * np.sqrt(_np(want).size)
    tol = 8 * n * EPS * kappa * xn
    _assert_within(_np(got), _np(want), tol, "value")
    W = rng.standard_normal((*want.shape, 2))
    (pr.view_as_real(got) * pr.tensor(W.astype(np.float32))).sum().backward()
    (torch.view_as_real(want) * torch.tensor(W)).sum().backward()
    gn = np.sqrt((W**2).sum())
    for i in range(2):
        _assert_within(_np(p[i].grad), _np(t[i].grad), tol * ainv * gn * (1 + 1 / xn), f"grad {i}")


def test_solve_refusals(rng):
    a, b = _crandn(rng, 2, 4, 4), _crandn(rng, 4)
    cases = [
        lambda L, T: L.linalg.solve(T(a), T(b.real.copy())),
        lambda L, T: L.linalg.solve(T(a.real.copy()), T(b)),
        lambda L, T: L.linalg.solve(T(np.zeros((3, 3), np.complex64)), T(b[:3])),
        lambda L, T: L.linalg.solve(T(a), T(b), left=False),
        lambda L, T: L.linalg.solve(T(a), T(_crandn(rng, 2, 4)), left=False),
    ]
    for f in cases:
        same_error(lambda f=f: f(pr, pr.tensor), lambda f=f: f(torch, torch.tensor))
    # a shape the embedding refuses: the real op's error, naming the complex sizes
    with pytest.raises(ValueError, match="4x4 and 5x2"):
        pr.linalg.solve(pr.tensor(a), pr.tensor(_crandn(rng, 5, 2)))
