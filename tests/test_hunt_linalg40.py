"""Randomized hunt (session 40) of torch.linalg.*, torch.fft.* and complex tensors against
torch 2.13 CPU: keyword arguments (out=, s, dim, norm, atol / rtol tensors, p of cond),
singular / non-finite / empty inputs, error classes, and the bits of fftfreq.

Inputs come from the `rng` fixture (seeded from the test's id, printed on failure). Tolerances
are rounding bounds of the operation: a length-n DFT of float32 data within
32·sqrt(n)·2⁻²⁴·max|x| (tests/test_fft.py's bound, both libraries' errors together); an
elementwise complex function within a few ulp of its magnitude.

Found and fixed by it:
- out= of any op with a complex result or a complex out raised ValueError ('substring not
  found': ops/outarg.py ranked dtype kinds as bool < int < float only);
- every pyrite.fft transform refused out= (torch writes it, resizing; a real out for a complex
  result is refused);
- fftn / rfftn / ... with len(s) > ndim and dim=None transformed one dim twice (torch refuses),
  the real n-D transforms with no dims raised IndexError, irfft / hfft of a 0-d tensor a
  RuntimeError (torch: IndexError), an invalid `norm` a bare ValueError (torch: RuntimeError);
- fftfreq / rfftfreq: n = 0 or d = 0 raised ZeroDivisionError (torch: empty / inf, NaN), a
  float n was taken (torch: TypeError), and ~10 % of values differed from torch's in the last
  bit (numpy's float64 product rounded afterwards; torch multiplies k by the float32 scale).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

from tests.oracle import device_error, same_error  # noqa: E402

EPS = 2.0**-24


def _crandn(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().resolve_conj().numpy()
    return x.detach().numpy()


def _fft_close(got, want, n, x):
    g, w = _np(got), _np(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype.type(0).astype(g.dtype).dtype
    tol = 32 * math.sqrt(max(n, 1)) * EPS * float(np.abs(x).max() if x.size else 0.0)
    err = float(np.abs(g.astype(np.complex128) - w).max()) if g.size else 0.0
    assert err <= tol, f"err {err}, tol {tol}"


# ---- out= with complex tensors ------------------------------------------------------------------
def test_complex_out_arguments_match_torch(rng):
    z, w = _crandn(rng, 3, 5), _crandn(rng, 3, 5)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    zp, wp, xp = pr.tensor(z), pr.tensor(w), pr.tensor(x)
    zt, wt, xt = torch.tensor(z), torch.tensor(w), torch.tensor(x)
    for fp, ft in [
        (lambda o: pr.add(zp, wp, out=o), lambda o: torch.add(zt, wt, out=o)),
        (lambda o: pr.mul(zp, wp, out=o), lambda o: torch.mul(zt, wt, out=o)),
        (lambda o: pr.matmul(zp, wp.mT, out=o), lambda o: torch.matmul(zt, wt.mT, out=o)),
        (lambda o: pr.add(xp, xp, out=o), lambda o: torch.add(xt, xt, out=o)),  # real into complex
    ]:
        ot = torch.empty(0, dtype=torch.complex64)
        op = pr.empty(0, dtype=pr.complex64)
        assert ft(ot) is ot and fp(op) is op
        # (the matmul's K = 5 complex products, 4 real ones each, within ~2·2K ulp of
        # max|z|·max|w|·K; the elementwise results within a few ulp of that too)
        tol = 4 * 5 * EPS * 5 * max(np.abs(z).max(), 1) * max(np.abs(w).max(), 1)
        np.testing.assert_allclose(_np(op), _np(ot), rtol=0, atol=tol)
    # a complex result into a real out: torch's RuntimeError
    same_error(
        lambda: pr.add(zp, wp, out=pr.empty(3, 5)), lambda: torch.add(zt, wt, out=torch.empty(3, 5))
    )


# ---- pyrite.fft -------------------------------------------------------------------------------
FFT_FNS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
FFTN_FNS = ["fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn"]
FFT2_FNS = ["fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2"]
REAL_IN = {"rfft", "ihfft", "rfftn", "ihfftn", "rfft2", "ihfft2"}


@pytest.mark.parametrize("name", FFT_FNS + FFTN_FNS + FFT2_FNS)
def test_fft_out_argument(rng, name):
    shape = (int(rng.integers(1, 5)), int(rng.integers(2, 9)), int(rng.integers(2, 9)))
    x = rng.standard_normal(shape).astype(np.float32) if name in REAL_IN else _crandn(rng, *shape)
    fp, ft = getattr(pr.fft, name), getattr(torch.fft, name)
    want = ft(torch.tensor(x))
    pdt = pr.complex64 if want.is_complex() else pr.float32
    for start in [(0,), tuple(want.shape)]:  # resized from empty, or written in place
        out = pr.empty(start, dtype=pdt)
        got = fp(pr.tensor(x), out=out)
        assert got is out
        _fft_close(out, want, max(shape), x)
    # a real out for a complex result (or a complex out for a real one): torch refuses
    bad = pr.float32 if want.is_complex() else pr.complex64
    tbad = torch.float32 if want.is_complex() else torch.complex64
    same_error(
        lambda: fp(pr.tensor(x), out=pr.empty(tuple(want.shape), dtype=bad)),
        lambda: ft(torch.tensor(x), out=torch.empty(tuple(want.shape), dtype=tbad)),
    )


@pytest.mark.parametrize("name", FFTN_FNS)
def test_fftn_shape_and_dims_checks(rng, name):
    nd = int(rng.integers(1, 4))
    shape = tuple(int(v) for v in rng.integers(2, 6, nd))
    x = rng.standard_normal(shape).astype(np.float32) if name in REAL_IN else _crandn(rng, *shape)
    fp, ft = getattr(pr.fft, name), getattr(torch.fft, name)
    xp, xt = pr.tensor(x), torch.tensor(x)
    s = tuple(int(v) for v in rng.integers(2, 6, nd + 1))  # more sizes than dims
    same_error(lambda: fp(xp, s=s), lambda: ft(xt, s=s))
    if name not in ("fftn", "ifftn"):  # the real transforms need at least one dim
        same_error(lambda: fp(xp, dim=[]), lambda: ft(xt, dim=[]))
        same_error(lambda: fp(xp[(0,) * nd]), lambda: ft(xt[(0,) * nd]))  # a 0-d input
    same_error(lambda: fp(xp, norm="bogus"), lambda: ft(xt, norm="bogus"))
    # and the sizes that are valid: the last len(s) dims, -1 for the input's own size
    s = tuple(int(v) for v in rng.integers(1, 7, nd))
    s = tuple(-1 if rng.random() < 0.3 else v for v in s)
    if name in ("irfftn", "hfftn"):
        s = tuple(shape[i] if v == -1 else v for i, v in enumerate(s))[:-1] + (max(s[-1], 2),)
    _fft_close(fp(xp, s=s), ft(xt, s=s), max(max(s), max(shape)) ** nd, x)


@pytest.mark.parametrize("name", ["irfft", "hfft", "fft", "rfft", "ihfft", "ifft"])
def test_fft_1d_errors(rng, name):
    x = _crandn(rng, 4) if name not in REAL_IN else rng.standard_normal(4).astype(np.float32)
    fp, ft = getattr(pr.fft, name), getattr(torch.fft, name)
    same_error(lambda: fp(pr.tensor(x)[0]), lambda: ft(torch.tensor(x)[0]))
    same_error(lambda: fp(pr.tensor(x), norm="Ortho"), lambda: ft(torch.tensor(x), norm="Ortho"))
    same_error(lambda: fp(pr.tensor(x), n=0), lambda: ft(torch.tensor(x), n=0))
    same_error(lambda: fp(pr.tensor(x), dim=1), lambda: ft(torch.tensor(x), dim=1))


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_fftfreq_bits_and_edges(rng, name):
    fp, ft = getattr(pr.fft, name), getattr(torch.fft, name)
    ns = [0, 1, 2] + [int(v) for v in rng.integers(3, 3000, 12)]
    ds = [1.0, 0.0, -0.5] + [float(v) for v in rng.uniform(1e-4, 10, 6)]
    for n in ns:
        for d in ds:
            for pd, td in [
                (None, None),
                (pr.float16, torch.float16),
                (pr.bfloat16, torch.bfloat16),
            ]:
                if td is torch.bfloat16 and n > 513:
                    continue  # (torch's own bf16 arange rounds |k| > 256 two ways: by path)
                want = ft(n, d, dtype=td)
                got = fp(n, d, dtype=pd)
                assert got.dtype == (pd or pr.float32)
                g = got.float().numpy()
                w = want.float().numpy()
                assert g.shape == w.shape, (n, d)
                same = (g == w) | (np.isnan(g) & np.isnan(w))
                assert same.all(), (n, d, td, g[~same][:4], w[~same][:4])
    same_error(lambda: fp(4.0), lambda: ft(4.0))


# ---- pyrite.linalg: bad arguments raise torch's class -------------------------------------------
def _bad_calls(m, A, v):
    L = m.linalg
    return {
        "qr mode": lambda: L.qr(A, mode="x"),
        "eigh UPLO": lambda: L.eigh(A, UPLO="X"),
        "tensordot neg dims": lambda: m.tensordot(A, A, dims=-1),
        "tensordot dims lists": lambda: m.tensordot(A, A, dims=([0, 1], [0])),
        "matrix_power float n": lambda: L.matrix_power(A, 1.5),
        "cross dim": lambda: L.cross(A, A, dim=5),
        "norm nuc of a vector": lambda: L.norm(A[0], "nuc"),
        "matrix_norm same dims": lambda: L.matrix_norm(A, dim=(0, 0)),
        "matrix_norm bad ord": lambda: L.matrix_norm(A, 3),
        "householder tau longer": lambda: L.householder_product(A, v(4)),
        "matrix_exp not square": lambda: L.matrix_exp(A[:, :2]),
        "inv_ex check_errors": lambda: L.inv_ex(A * 0, check_errors=True),
        "solve_ex check_errors": lambda: L.solve_ex(A * 0, A, check_errors=True),
        "lu_solve shapes": lambda: L.lu_solve(*L.lu_factor(A), v(4, 2)),
        "tensorinv ind 0": lambda: L.tensorinv(A, ind=0),
        "det of 0-d": lambda: L.det(A[0, 0]),
        "diagonal of 1-d": lambda: L.diagonal(A[0]),
        "vecdot shapes": lambda: L.vecdot(A, v(4, 3)),
        "vander N 0": lambda: L.vander(A[0], N=0),
        "multi_dot one": lambda: L.multi_dot([A]),
        "lstsq driver": lambda: L.lstsq(A, A, driver="foo"),
        "solve int": lambda: L.solve(A.int(), A),
        "det int": lambda: L.det(A.int()),
        "vector_norm int": lambda: L.vector_norm(A.int()),
        "cond fro of 3x0": lambda: L.cond(A[:, :0], "fro"),
        "solve shapes": lambda: L.solve(A, v(4, 2)),
        "cholesky not pd": lambda: L.cholesky(-A @ A.mT - m.eye(3)),
    }


def test_linalg_error_classes(rng):
    a = rng.standard_normal((3, 3)).astype(np.float32)
    calls = {
        lib: _bad_calls(
            m,
            m.tensor(a),
            lambda *s: m.tensor(rng.standard_normal(s).astype(np.float32)),
        )
        for lib, m in (("pr", pr), ("torch", torch))
    }
    failed = []
    for key, ft in calls["torch"].items():
        try:
            same_error(calls["pr"][key], ft)
        except BaseException as e:  # (every case checked, all failures named at once)
            failed.append(f"{key}: {e!r}"[:300])
    assert not failed, "\n".join(failed)


# ---- cond, and the SVD of non-finite input ------------------------------------------------------
def _singular_batch(rng, n):
    """(B, n, n) float32: regular matrices and exactly singular ones (a zero matrix, a zero row,
    two equal integer rows), whose LU meets an exact zero pivot in float32 too."""
    mats = [rng.standard_normal((n, n)) + n * np.eye(n) for _ in range(2)]
    mats.append(np.zeros((n, n)))
    z = rng.standard_normal((n, n))
    z[int(rng.integers(n))] = 0
    mats.append(z)
    d = rng.integers(-3, 4, (n, n)).astype(np.float64)
    d[-1] = d[0]
    mats.append(d)
    order = rng.permutation(len(mats))
    return np.stack([mats[i] for i in order]).astype(np.float32)


@pytest.mark.parametrize("p", ["fro", "nuc", 1, -1, math.inf, -math.inf])
def test_cond_of_singular_matrices_is_torchs(rng, p):
    n = int(rng.choice([2, 3, 5]))
    a = _singular_batch(rng, n)
    got = _np(pr.linalg.cond(pr.tensor(a), p))
    want = _np(torch.linalg.cond(torch.tensor(a), p))
    assert got.shape == want.shape
    # singular: inf (torch fills the inverse with inf) or NaN ('nuc' of a zero matrix: 0·inf);
    # 'nuc' is sum(S)·sum(1/S), where LAPACK's smallest S of a singular matrix may be rounding
    # noise (~eps·s_max) instead of 0: torch's then finite but past 1/(n·eps), as pyrite's may be
    huge = 1 / (64 * n * EPS)
    assert (np.isnan(got) == np.isnan(want)).all(), (got, want)
    special = ~np.isfinite(want) | (want > huge)
    big = special & ~np.isnan(want)
    assert (got[big] > huge).all(), (got, want)
    if p != "nuc":
        assert (got[big] == want[big]).all(), (got, want)
    # regular: kappa within ~8·n·eps·kappa (the inverse's error) of torch's
    ok = ~special
    tol = 8 * n * 2 * EPS * want[ok] ** 2 + 8 * n * EPS * want[ok]
    assert (np.abs(got[ok] - want[ok]) <= tol).all(), (got, want)


@pytest.mark.parametrize("p", [None, "fro", "nuc", 1, -1, math.inf, 2, -2])
def test_cond_of_empty_matrices(rng, p):
    for shape in [(3, 0), (0, 4), (2, 0, 0), (0, 3, 3)]:
        a = np.zeros(shape, np.float32)
        try:
            want = torch.linalg.cond(torch.tensor(a), p)
        except RuntimeError:
            same_error(
                lambda: pr.linalg.cond(pr.tensor(a), p),
                lambda: torch.linalg.cond(torch.tensor(a), p),
            )
            continue
        got = pr.linalg.cond(pr.tensor(a), p)
        assert tuple(got.shape) == tuple(want.shape) and (_np(got) == _np(want)).all()


@pytest.mark.parametrize("fn", ["svdvals", "svd", "matrix_norm2", "matrix_rank", "cond"])
def test_svd_of_inf_gives_nan_and_of_nan_raises(rng, fn):
    m, n = (int(v) for v in rng.integers(2, 6, 2))
    a = rng.standard_normal((2, m, n)).astype(np.float32)
    a[0, int(rng.integers(m)), int(rng.integers(n))] = np.inf * rng.choice([-1, 1])
    call = {
        "svdvals": lambda L, x: L.svdvals(x),
        "svd": lambda L, x: L.svd(x, full_matrices=False)[1],
        "matrix_norm2": lambda L, x: L.matrix_norm(x, 2),
        "matrix_rank": lambda L, x: L.matrix_rank(x),
        "cond": lambda L, x: L.cond(x),
    }[fn]
    got = _np(call(pr.linalg, pr.tensor(a)))
    try:
        want = _np(call(torch.linalg, torch.tensor(a)))
    except RuntimeError:  # (gesdd with vectors sometimes fails to converge on an inf instead)
        want = np.full(got.shape, np.nan, np.float32)
        want[1:] = _np(call(torch.linalg, torch.tensor(a[1:])))
    assert got.shape == want.shape
    assert (np.isnan(got.astype(np.float64)) == np.isnan(want.astype(np.float64))).all()
    ok = ~np.isnan(want.astype(np.float64))
    if fn == "matrix_rank":
        assert (got[ok] == want[ok]).all(), (got, want)
    else:  # (the finite matrix: its singular values' rounding, a few n·eps of s_max)
        s_max = np.abs(_np(torch.linalg.svdvals(torch.tensor(a[1:])))).max()
        tol = 16 * max(m, n) * EPS * (s_max if fn != "cond" else float(want[ok].max()) ** 2)
        assert np.allclose(got[ok], want[ok], rtol=0, atol=tol), (got, want)
    a[1, 0, 0] = np.nan
    same_error(lambda: call(pr.linalg, pr.tensor(a)), lambda: call(torch.linalg, torch.tensor(a)))


# ---- tolerance tensors of pinv / matrix_rank ----------------------------------------------------
@pytest.mark.filterwarnings("ignore:An output with one or more elements")
@pytest.mark.parametrize("fn", ["matrix_rank", "pinv"])
def test_tolerance_tensors_broadcast_over_the_batch(rng, fn):
    B, m, n = int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    a = rng.standard_normal((B, m, n)).astype(np.float32)
    s = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    # cutoffs between two singular values (never within rounding of one), zero for some
    lo = s[:, -1:] if min(m, n) > 1 else s[:, :1] * 0
    cuts = np.sqrt(s[:, :1] * lo)[:, 0] * rng.choice([0.0, 1.0], B)
    kwargs = [
        {"atol": cuts.astype(np.float32)},
        {"rtol": (cuts / s[:, 0]).astype(np.float32)},
        {"atol": cuts.astype(np.float32), "rtol": np.float32(0.5)},
        {"atol": np.float32(cuts.max())},  # (0-d)
        {"atol": cuts.astype(np.float32)[:, None, None][:1]},  # (1, 1, 1): broadcast up
    ]
    for kw in kwargs:
        kp = {k: pr.tensor(v) for k, v in kw.items()}
        kt = {k: torch.tensor(v) for k, v in kw.items()}
        got = getattr(pr.linalg, fn)(pr.tensor(a), **kp)
        want = getattr(torch.linalg, fn)(torch.tensor(a), **kt)
        assert tuple(got.shape) == tuple(want.shape), (kw, got.shape, want.shape)
        if fn == "matrix_rank":
            assert (_np(got) == _np(want)).all(), (kw, _np(got), _np(want))
        else:  # the kept singular values are >= sqrt(s_max·s_min): pinv within ~n·eps/s_min²
            g, w = _np(got), _np(want)
            tol = 64 * max(m, n) * EPS * s[:, 0].max() / max(s.min(), 1e-3) ** 2
            assert np.abs(g - w).max() <= tol, (kw, np.abs(g - w).max(), tol)


# ---- complex elementwise special values ---------------------------------------------------------
def test_complex_abs_of_infinite_parts_is_inf(rng):
    pool = np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, np.nan, 1e-40, 3e38], np.float32)
    re = rng.choice(pool, 64).astype(np.float32)
    im = rng.choice(pool, 64).astype(np.float32)
    re[:2], im[:2] = [np.nan, -np.inf], [np.inf, np.nan]
    z = np.empty(64, np.complex64)
    z.real, z.imag = re, im
    got = _np(pr.tensor(z).abs())

    def wrong(z):
        want = _np(torch.tensor(z).abs())
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        # finite results: within 2 ulp of |z| (hypot's rounding, both libraries)
        fin = np.isfinite(want)
        same[fin] = np.abs(got[fin] - want[fin]) <= 2 * 2 * EPS * np.abs(want[fin]) + 1e-45
        return ~same, want

    # (a device that flushes subnormals may read the 1e-40 parts as 0: |1e-40 + 0i| is 0 there)
    bad = device_error(wrong, z) > 0
    assert not bad.any(), (z[bad], got[bad], _np(torch.tensor(z).abs())[bad])


def test_complex_repr_leaves_complex64_unnamed(rng):
    """torch names no dtype for complex64 beside the default float32 (but does for an empty
    tensor, where no element shows the type)."""
    z = _crandn(rng, int(rng.integers(1, 4)), int(rng.integers(1, 4))).round(2)
    for a in (z, z[0], z[:0], z[0, 0]):
        want = repr(torch.tensor(a)).replace("torch.", "pyrite.")
        assert repr(pr.tensor(a)) == want
