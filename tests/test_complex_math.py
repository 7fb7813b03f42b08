"""complex64 math (ops/complex_math.py, ops/complex_linalg.py) against torch CPU: values on
awkward inputs (wide magnitudes, both sides of every branch cut, signed zeros, the branch
points, infinities and NaNs), dtypes, broadcasting, and gradients through torch.autograd.

Tolerances. Both libraries compute in float32 from the same float32 inputs, so the difference
is the sum of their rounding errors: |got - want| <= K·eps·scale elementwise, eps = 2⁻²⁴. scale
is the magnitude each function's error is relative to, computed in float64 from the input
(|f(z)| for the well-conditioned ones; cosh(Im z) for sin/cos, whose parts are products with
cosh; max(|f|, 1) where an angle of size ~π or an absolute error near |z| = 1 is involved; see
each row), and K is the ulp count in ops/complex_math.py's docstring for that function plus
torch's (glibc's c*f functions, ~2 ulp), doubled for the rounding of intermediate results that
feed a second function. Special values (infinities, NaN, zeros) must match exactly: the same
NaN positions, the same infinities, the same sign on a zero.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.ops.complex import ComplexError
from tests.oracle import device_error

EPS = 2.0**-24


# ---- inputs ------------------------------------------------------------------------------------
def cmplx(re, im):
    """complex64 with exactly these parts (re + 1j*im would turn inf*1j into NaN parts)."""
    out = np.empty(np.broadcast(re, im).shape, np.complex64)
    out.real, out.imag = re, im
    return out


def awkward(rng, n, wide):
    """n values: normal ones, log-uniform magnitudes (1e-30 .. 1e30 when `wide`, else up to
    20: exp, sin and friends overflow past ~88), both sides of the real and imaginary axes
    (±0 and ±1e-7 off them), around the branch points ±1 and ±i, and zeros."""
    k = n // 6
    parts = [cmplx(*rng.standard_normal((2, k)) * 2)]
    lo, hi = (-30, 30) if wide else (-6, 1.3)
    mag = 10.0 ** rng.uniform(lo, hi, k)
    ang = rng.uniform(-math.pi, math.pi, k)
    parts.append(cmplx(mag * np.cos(ang), mag * np.sin(ang)))
    off = rng.choice([0.0, -0.0, 1e-7, -1e-7], k)
    axis = rng.uniform(-4, 4, k)
    parts.append(cmplx(axis, off))
    parts.append(cmplx(off, axis))
    tiny = 10.0 ** rng.uniform(-7, -1, k) * rng.choice([-1, 1], k)
    pts = rng.choice([1, -1, 1j, -1j], k)
    parts.append(cmplx(pts.real + tiny * rng.choice([0, 1], k), pts.imag + tiny))
    m = n - 5 * k
    parts.append(cmplx(rng.choice([0.0, -0.0], m), rng.choice([0.0, -0.0], m)))
    z = np.concatenate(parts)
    return z[rng.permutation(n)]


SPECIAL = np.array(
    [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-20, -1e-20, 1e20, -3e30],
    np.float32,
)  # fmt: skip
GRID = cmplx(*np.meshgrid(SPECIAL, SPECIAL)).ravel()  # 225 values, every pair


def check(got, want, K, scale, what, zero_signs=True):
    """Same dtype and shape; special values equal (NaN positions, infinities, zero signs
    unless `zero_signs` is off); the rest within K·eps·scale."""
    g, w = _values(got, want)
    assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
    _assert_parts(_wrong_parts(g, w, K, scale, zero_signs), g, w, what)


def _values(got, want):
    """got and want as numpy, complex (a real result as complex64)."""
    g = got.detach().numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    w = want.detach().resolve_conj().numpy() if isinstance(want, torch.Tensor) else want
    if not np.iscomplexobj(g):
        g, w = g.astype(np.complex64), w.astype(np.complex64)
    return g, w


def _wrong_parts(g, w, K, scale, zero_signs=True):
    """Per part, stacked (real, imag): whether g misses w as `check` judges; with the errors
    and their bound, K·eps·scale."""
    bads, errs = [], []
    bound = K * EPS * np.broadcast_to(scale, g.shape)
    for part in ("real", "imag"):
        a, b = getattr(g, part), getattr(w, part)
        bad = np.isnan(a) != np.isnan(b)
        bad |= (np.isinf(a) | np.isinf(b)) & (a != b)
        if zero_signs:
            bad |= (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
        ok = np.isfinite(a) & np.isfinite(b)
        with np.errstate(invalid="ignore"):
            err = np.abs(a.astype(np.float64) - b)
            bad |= ok & (err > bound + 1e-300)
        bads.append(bad)
        errs.append(err)
    return np.stack(bads), np.stack(errs), bound


def _assert_parts(wrong, g, w, what):
    bad, err, bound = wrong
    for i, part in enumerate(("real", "imag")):
        assert not bad[i].any(), f"{what} ({part}): {_show(bad[i], g, w, err[i], bound)}"


def _show(bad, g, w, err, bound):
    i = np.flatnonzero(bad.ravel())[:5]
    return [
        (g.ravel()[j], w.ravel()[j], err.ravel()[j], bound.ravel()[j]) for j in i
    ], f"{bad.sum()} bad of {bad.size}"


# ---- elementwise functions --------------------------------------------------------------------
def _max1(z, w):
    return np.maximum(np.abs(w), 1.0)


def _absw(z, w):
    return np.abs(w)


def _cosh_im(z, w):
    return np.cosh(np.minimum(np.abs(z.imag), 700))


def _cosh_re(z, w):
    return np.cosh(np.minimum(np.abs(z.real), 700))


def _expm1(z, w):
    x, y = z.real, z.imag
    return np.abs(np.expm1(x) * np.cos(y)) + 2 * np.sin(y / 2) ** 2 + np.exp(x) * np.abs(np.sin(y))


def _log1p(z, w):
    return np.maximum(np.abs(w), np.minimum(np.abs(z), 1.0))


def _sigmoid(z, w):
    # 1 + e^-z cancels near the poles z = iπ(2k + 1): its error eps·|e^-z| grows by |w| there
    return np.abs(w) * (1 + np.abs(w) * np.exp(-z.real))


# name: (K, scale(z, w) in float64, wide inputs)
UNARY = {
    "log": (8, _max1, True),
    "log2": (10, _max1, True),
    "log10": (10, _max1, True),
    "log1p": (16, _log1p, True),
    "exp": (8, _absw, False),
    "expm1": (12, _expm1, False),
    "sqrt": (8, _absw, True),
    "rsqrt": (16, _absw, True),
    "reciprocal": (8, _absw, True),
    "sin": (8, _cosh_im, False),
    "cos": (8, _cosh_im, False),
    "sinh": (8, _cosh_re, False),
    "cosh": (8, _cosh_re, False),
    "tan": (24, _max1, False),
    "tanh": (24, _max1, False),
    "sigmoid": (16, _sigmoid, False),
    "asin": (16, _max1, True),
    "acos": (16, _max1, True),
    "atan": (16, _max1, True),
    "asinh": (16, _max1, True),
    "acosh": (16, _max1, True),
    "atanh": (16, _max1, True),
}

# special values where C leaves the result unspecified and glibc's functions disagree with
# each other, so pyrite's composition cannot follow both (listed, not loosened)
ALLOWED = {
    # csin(±inf/NaN ± i·inf): the sign of the infinite imaginary part; glibc's csinf and
    # csinhf (whose -i·csinh(iz) pyrite uses) give opposite signs
    "sin": lambda z: ~np.isfinite(z.real) & np.isinf(z.imag),
    # ccos(±0 + NaN·i): the sign of the zero imaginary part next to a NaN
    "cos": lambda z: (z.real == 0) & np.isnan(z.imag),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_against_torch(rng, name):
    K, scale, wide = UNARY[name]
    z = awkward(rng, 2 * 3 * 5 * 37, wide)
    z = np.concatenate([z, GRID])
    allowed = ALLOWED.get(name, lambda z: np.zeros(z.shape, bool))(z)
    z = z[~allowed].copy()
    # a non-contiguous view of an awkward shape
    zz = z[: (z.size // 31) * 31].reshape(31, -1).T
    got = getattr(pr.tensor(zz.T.copy()).T, name)()

    def wrong(zz):
        _, _, parts, exact = _unary_wrong(got, name, zz, K, scale)
        return parts[0], exact

    # On a device that flushes subnormals (tests/oracle.device_error) a part whose exact value
    # is below float32's normal range is not judged, its zero's sign included (the H100's
    # 1/(-1e-20 + 1e20i) had real part +0, torch -0: Smith's ratio -1e-40 was flushed, where
    # torch's kept the part's sign through gradual underflow, -1e-40·1e-20 = -0), and a
    # subnormal input part may read as 0
    bad = device_error(wrong, zz) > 0
    g, w, (_, err, bound), _ = _unary_wrong(got, name, zz, K, scale)
    _assert_parts((bad, err, bound), g, w, name)
    # torch's method names and functions reach the same op
    assert getattr(pr, name)(pr.tensor(zz[:2, :3].copy())).dtype is pr.complex64


def _unary_wrong(got, name, zz, K, scale):
    """got and torch's `name` at zz as numpy, the per-part verdicts (_wrong_parts) on them, and
    the exact parts (torch's complex128 at zz), stacked (real, imag)."""
    want = getattr(torch.tensor(zz), name)()
    z128 = zz.astype(np.complex128)
    w128 = want.numpy().astype(np.complex128)
    with np.errstate(all="ignore"):
        sc = scale(z128, w128)
    sc = np.where(np.isfinite(sc), sc, np.inf)
    g, w = _values(got, want)
    exact = getattr(torch.tensor(z128), name)().numpy()
    return g, w, _wrong_parts(g, w, K, sc), np.stack([exact.real, exact.imag])


GRAD_FNS = ["log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
            "asin", "acos", "atan", "asinh", "acosh", "atanh", "log10", "reciprocal"]  # fmt: skip


def test_gradients_of_unary_functions(rng):
    """Each function's gradient at generic points (away from poles, cuts and branch points),
    as torch's conjugate-Wirtinger gradient: one loss over all of them, one backward. The
    composed gradients run through ~40 float32 operations each, conditioned up to ~10 at these
    points: within 2^-13 of the largest gradient of each function's slice."""
    n = 23
    mag = rng.uniform(0.2, 0.8, (len(GRAD_FNS), n))
    ang = rng.uniform(-3.0, 3.0, (len(GRAD_FNS), n))
    z = cmplx(mag * np.cos(ang) + 0.1, mag * np.sin(ang) + 0.15)
    wts = cmplx(*rng.standard_normal((2, len(GRAD_FNS), n)))
    grads = []
    for L in (pr, torch):
        zt = L.tensor(z, requires_grad=True)
        wt = L.tensor(wts)
        loss = sum((getattr(zt[i], f)() * wt[i]).real.sum() for i, f in enumerate(GRAD_FNS))
        loss.backward()
        grads.append(zt.grad.numpy())
    g, w = grads
    for i, f in enumerate(GRAD_FNS):
        tol = 2.0**-13 * np.abs(w[i]).max()
        np.testing.assert_allclose(g[i], w[i], atol=tol, rtol=0, err_msg=f)


# ---- powers ------------------------------------------------------------------------------------
def _pow_scale(b, e, w):
    """exp(e·log b) amplifies log's absolute error by |e log b|: |w|·(1 + |e|·|log b|)."""
    with np.errstate(all="ignore"):
        lb = np.abs(np.log(np.where(b == 0, 1, b)))
    return np.abs(w) * (1 + np.abs(e) * lb + 1)


def test_pow_against_torch(rng):
    b = np.concatenate([awkward(rng, 60, False), cmplx([0.0, -0.0, 2.0], [0.0, 0.0, -0.0])])
    b = b.reshape(7, 9)
    e = awkward(rng, 18, False).reshape(2, 1, 9)  # broadcasting against b
    r = rng.standard_normal((7, 1)).astype(np.float32) * 2  # real exponents and bases
    P, T = pr.tensor(b), torch.tensor(b)
    cases = [
        ("z**w", lambda L, X, E, R: X**E, e),
        ("z**r", lambda L, X, E, R: L.pow(X, R), r),
        ("r**z", lambda L, X, E, R: R**X, r),
        ("z**z.real", lambda L, X, E, R: X**X.real, b.real),
    ]
    for what, fn, ex in cases:
        got = fn(pr, P, pr.tensor(e), pr.tensor(r))
        want = fn(torch, T, torch.tensor(e), torch.tensor(r))
        if what == "r**z":
            sc = _pow_scale(r.astype(np.complex128), b, want.numpy())
        else:
            sc = _pow_scale(b, ex, want.numpy())
        check(got, want, 16, sc, what)
    for s in (0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5, 4, -3, 1j, 2 - 1.5j):
        check(P**s, T**s, 16, _pow_scale(b, s, (T**s).numpy()), f"z**{s}")
    for s in (2, -2.0, 1 + 1j, 0, 0.5j):
        check(s**P, s**T, 16, _pow_scale(np.complex128(s), b, (s**T).numpy()), f"{s}**z")
    # in place, and float_power (torch's complex128 is narrowed to complex64 here)
    q = P.clone()
    q.pow_(2.5)
    check(q, T**2.5, 16, _pow_scale(b, 2.5, (T**2.5).numpy()), "pow_")
    check(pr.float_power(P, 3), T**3, 16, _pow_scale(b, 3, (T**3).numpy()), "float_power")


def test_pow_gradients(rng):
    z = cmplx(*rng.uniform(0.3, 1.5, (2, 5, 4)))
    w = cmplx(*rng.uniform(-1, 1, (2, 5, 4)))
    x = rng.uniform(0.5, 2, (5, 1)).astype(np.float32)
    out = []
    for L in (pr, torch):
        zt, wt, xt = (L.tensor(a, requires_grad=True) for a in (z, w, x))
        loss = ((zt**wt) * 0.3j + zt**2.5 + zt**3 + xt**wt + (1 + 2j) ** zt + zt**xt).real.sum()
        loss.backward()
        out.append([t.grad.numpy() for t in (zt, wt, xt)])
    for g, t in zip(*out):
        np.testing.assert_allclose(g, t, atol=2.0**-14 * np.abs(t).max(), rtol=0)


# ---- predicates, comparisons -------------------------------------------------------------------
def test_isnan_isinf_isfinite():
    z = GRID.reshape(15, 15)
    for f in ("isnan", "isinf", "isfinite"):
        got, want = getattr(pr.tensor(z), f)(), getattr(torch.tensor(z), f)()
        assert got.dtype is pr.bool
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f)


def test_isclose_allclose(rng):
    b = awkward(rng, 300, True)
    b = b[np.isfinite(b)]
    # perturbations well inside (0.2x) or outside (5x) the allowed error, so rounding at the
    # boundary cannot flip a result
    factor = rng.choice([0.2, 5.0], b.size)
    rtol, atol = 1e-4, 1e-6
    d = factor * (atol + rtol * np.abs(b)) * np.exp(1j * rng.uniform(0, 6.28, b.size))
    a = (b + d).astype(np.complex64)
    a[:3], b[:3] = np.nan, np.nan  # equal_nan
    a[3], b[3] = cmplx(np.inf, 1.0), cmplx(np.inf, 1.0)
    for kw in ({}, {"rtol": rtol, "atol": atol}, {"equal_nan": True, "rtol": rtol, "atol": atol}):
        got = pr.isclose(pr.tensor(a), pr.tensor(b), **kw)
        want = torch.isclose(torch.tensor(a), torch.tensor(b), **kw)
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str(kw))
        assert pr.allclose(pr.tensor(a[4:]), pr.tensor(b[4:]), **kw) == torch.allclose(
            torch.tensor(a[4:]), torch.tensor(b[4:]), **kw
        )
    assert pr.tensor(a[4:]).isclose(pr.tensor(a[4:])).all().item()
    with pytest.raises(TypeError, match="did not match"):
        pr.isclose(pr.tensor(a), pr.tensor(a.real.copy()))


# ---- reductions, scans, dot products -----------------------------------------------------------
def test_prod_cumsum_cumprod_sum_mean(rng):
    a = cmplx(*rng.uniform(0.5, 1.5, (2, 6, 11, 5)) * rng.choice([-1, 1], (2, 6, 11, 5)))
    a[1, 3, 2] = 0  # a zero in one product
    P, T = pr.tensor(a), torch.tensor(a)
    m = np.abs(a).astype(np.float64)
    # a product of n values: torch multiplies in order (n - 1 roundings of ~2 ulp), pyrite
    # pairwise; K = 4n bounds both, relative to the product of the magnitudes. The sign of a
    # zero product depends on that order (0·(a + ib) takes the signs of a and b), so it is not
    # compared
    for dim in (None, 0, 1, -1):
        kw = {} if dim is None else {"dim": dim}
        n = a.size if dim is None else a.shape[dim]
        sc = m.prod() if dim is None else m.prod(axis=dim)
        check(P.prod(**kw), T.prod(**kw), 4 * n, sc, f"prod({dim})", zero_signs=False)
    want = torch.prod(T, 1, keepdim=True)
    check(pr.prod(P, 1, keepdim=True), want, 44, m.prod(1, keepdims=True), "keepdim", False)
    for dim in (0, 1, 2):
        n = a.shape[dim]
        sc = np.cumprod(m, dim)
        check(P.cumprod(dim), T.cumprod(dim), 4 * n, sc, f"cumprod({dim})", zero_signs=False)
        check(P.cumsum(dim), T.cumsum(dim), 2 * n, np.cumsum(m, dim), f"cumsum({dim})")
    Pv, Tv, mv = P.permute(2, 0, 1), T.permute(2, 0, 1), m.transpose(2, 0, 1)
    check(pr.cumsum(Pv, dim=0), torch.cumsum(Tv, dim=0), 10, np.cumsum(mv, 0), "cumsum view")
    check(P.sum((0, 2)), T.sum((0, 2)), 2 * 66, m.sum((0, 2)), "sum")
    check(P.mean(-1), T.mean(-1), 12, m.mean(-1), "mean")


def test_dot_vdot(rng):
    a, b = crandn(rng, 2, 301)
    Pa, Pb, Ta, Tb = pr.tensor(a), pr.tensor(b), torch.tensor(a), torch.tensor(b)
    sc = float((np.abs(a) * np.abs(b)).sum())
    check(pr.dot(Pa, Pb), torch.dot(Ta, Tb), 2 * 301, sc, "dot")
    check(Pa.vdot(Pb), Ta.vdot(Tb), 2 * 301, sc, "vdot")
    with pytest.raises(RuntimeError, match="same dtype"):
        pr.dot(Pa, pr.tensor(a.real.copy()))


def crandn(rng, *shape):
    return cmplx(*rng.standard_normal((2, *shape)))


def test_norms(rng):
    a = crandn(rng, 3, 7, 5)
    a[0, 0, 0] = cmplx(3e25, -4e25)  # |z|^2 would overflow float32
    P, T = pr.tensor(a), torch.tensor(a)
    m = np.abs(a.astype(np.complex128))
    cases = [
        ("vector_norm", lambda L, X: L.linalg.vector_norm(X), m.size),
        ("vector_norm(1, dim)", lambda L, X: L.linalg.vector_norm(X, 1, dim=(0, 2)), 15),
        ("vector_norm(inf)", lambda L, X: L.linalg.vector_norm(X, math.inf, dim=1), 1),
        ("vector_norm(3)", lambda L, X: L.linalg.vector_norm(X[1:], 3, dim=-1, keepdim=True), 5),
        ("linalg.norm", lambda L, X: L.linalg.norm(X), m.size),
        ("linalg.norm(dim)", lambda L, X: L.linalg.norm(X, dim=1), 7),
        ("Tensor.norm", lambda L, X: X.norm(), m.size),
        ("norm(p=1)", lambda L, X: L.norm(X, p=1, dim=2), 5),
        ("fro", lambda L, X: L.linalg.matrix_norm(X[1:]), 35),
        ("matrix 1", lambda L, X: L.linalg.matrix_norm(X[1:], 1), 7),
        ("matrix -inf", lambda L, X: L.linalg.norm(X[1:], -math.inf, dim=(1, 2)), 5),
    ]
    for what, fn, n in cases:
        want = fn(torch, T)
        # a sum of n non-negative terms, both libraries: 2n roundings of its size
        check(fn(pr, P), want, 4 * n + 8, np.abs(want.numpy().astype(np.float64)), what)
    # the spectral norms (no overflow case: singular values by an iterative SVD, whose error is
    # ~n·eps·||A||_2 for both libraries; n = 10 for pyrite's 2n x 2n real embedding)
    b = crandn(rng, 2, 6, 4)
    Pb, Tb = pr.tensor(b), torch.tensor(b)
    top = float(torch.linalg.matrix_norm(Tb, 2).max())
    for what, fn in [
        ("2", lambda L, X: L.linalg.matrix_norm(X, 2)),
        ("-2", lambda L, X: L.linalg.norm(X, -2, dim=(-2, -1))),
        ("nuc", lambda L, X: L.linalg.matrix_norm(X, "nuc", keepdim=True)),
        ("2 (2-D)", lambda L, X: L.linalg.norm(X[0], 2)),
        ("norm(nuc)", lambda L, X: L.norm(X[1], p="nuc")),
    ]:
        want = fn(torch, Tb)
        check(fn(pr, Pb), want, 256, 4 * top, what)


def test_reduction_and_norm_gradients(rng):
    a, b = crandn(rng, 5, 6), crandn(rng, 5, 6)
    out = []
    for L in (pr, torch):
        at, bt = L.tensor(a, requires_grad=True), L.tensor(b, requires_grad=True)
        loss = (
            (at.prod(1) * 0.5j).real.sum()
            + (at.cumprod(0) * bt).imag.sum()
            + (at.cumsum(1) * bt.conj()).real.sum()
            + L.dot(at[0], bt[1]).real
            + L.vdot(at[2], bt[3]).imag
            + L.linalg.vector_norm(at, 3, dim=0).sum()
            + L.linalg.matrix_norm(bt, "nuc")
            + at.norm()
        )
        loss.backward()
        out.append((loss.item(), at.grad.numpy(), bt.grad.numpy()))
    (lp, *gp), (lt, *gt) = out
    assert abs(lp - lt) <= 2.0**-16 * abs(lt) + 1e-5
    for g, t in zip(gp, gt):
        np.testing.assert_allclose(g, t, atol=2.0**-14 * np.abs(t).max(), rtol=0)


# ---- casts -------------------------------------------------------------------------------------
def test_cfloat_cdouble_chalf(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    p, t = pr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    zp, zt = p.cfloat(), t.cfloat()
    assert zp.dtype is pr.complex64 and zp.cfloat() is zp
    np.testing.assert_array_equal(zp.detach().numpy(), zt.detach().numpy())
    # complex128 is narrowed to complex64, as float64 (double()) is to float32
    assert p.cdouble().dtype is pr.complex64 and p.double().dtype is pr.float32
    (zp * (1 + 2j)).abs().sum().backward()
    (zt * (1 + 2j)).abs().sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-6)
    with pytest.raises(TypeError, match="pyrite: chalf.*complex32"):
        p.chalf()


def test_where_and_errors(rng):
    z = crandn(rng, 4, 5)
    P, T = pr.tensor(z), torch.tensor(z)
    check(pr.where(P.real > 0, P, 2.0), torch.where(T.real > 0, T, 2.0), 0, 0, "where")
    x = rng.standard_normal((4, 1)).astype(np.float32)
    check(
        pr.where(P.imag > 0, pr.tensor(x), P),
        torch.where(T.imag > 0, torch.tensor(x), T),
        0,
        0,
        "where real",
    )
    with pytest.raises(ComplexError, match="erf does not support complex"):
        P.erf()
    with pytest.raises(ComplexError):
        P.prod(dtype=pr.float32)
