"""Session 41: results that were silently wrong or less accurate than torch 2.13 CPU's, each
checked against torch on fresh random inputs (the `rng` fixture, seeded from the test's id).

- complex sqrt / rsqrt overflowed for max(|re|, |im|) >= ~2.4e38 (inf, then 0 for rsqrt) and
  lost ~1e4 ulp on subnormal parts (sqrt(-1e-45) was 0): now scaled by an even power of two.
  abs, log and reciprocal near the extremes were already within their stated bounds; tested
  here too.
- var / std / var_mean / std_mean of float32 data whose squared deviations summed past
  float32's range were inf (var of 1000 values ~1e19 apart, representable: inf), std of data
  ~1e38 apart inf (torch: its double Welford, finite): Welford's state now switches to units of
  2^-81 when the data's spread passes 2^40.
- vander (float32) was 1-2 ulp off for x^3 and up: torch's cumprod carries a double; now an
  exact emulation of that double product, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

from pyrite import backend  # noqa: E402
from tests.oracle import IS_ORACLE, flush_subnormals, has_subnormal  # noqa: E402
from tests.test_reduce_accuracy import PATHS, SHAPES, _check_path, _force  # noqa: E402


def _ftz() -> bool:
    """Whether this device flushes subnormals (NVIDIA's Vulkan driver does: the H100 read
    1e-40 as 0 and wrote 1.17e-38 as 0): its oracle is torch on the flushed input, judged
    where torch's result has no subnormal part."""
    return backend.current().flushes_subnormals


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _ulp_err(want, got):
    """|got - want| in ulps of |want| (a float32's spacing at |want|, 2^-149 at least), per
    complex element the larger of its two parts' errors against |want|; 0 where both agree on
    a non-finite value, inf where only one is finite."""
    want = np.asarray(want).astype(np.complex128)
    got = np.asarray(got).astype(np.complex128)
    with np.errstate(all="ignore"):
        unit = np.maximum(2.0 ** (np.floor(np.log2(np.abs(want))) - 23), 2.0**-149)
    with np.errstate(all="ignore"):
        err = np.maximum(np.abs(want.real - got.real), np.abs(want.imag - got.imag))
    fin = np.isfinite(want)
    same = (want.real == got.real) | (np.isnan(want.real) & np.isnan(got.real))
    same &= (want.imag == got.imag) | (np.isnan(want.imag) & np.isnan(got.imag))
    with np.errstate(all="ignore"):
        r = np.where(fin, err / unit, np.where(same, 0.0, np.inf))
    return np.nan_to_num(r, nan=np.inf)


def _against_torch(name, z):
    """torch's and pyrite's `name` of z and the ulp error per element; on a device that
    flushes subnormals, 0 where torch's result has a subnormal part (written there as 0)."""
    want = _np(getattr(torch, name)(torch.from_numpy(z)))
    got = getattr(pr, name)(pr.tensor(z)).numpy()
    err = _ulp_err(want, got)
    if _ftz():
        err = np.where(has_subnormal(want), 0.0, err)
    return want, got, err


def _complex_at(rng, n, scale):
    """n complex64 values, both parts N(0, scale²), clipped into float32's range."""
    p = np.clip(rng.standard_normal((2, n)) * scale, -3.4e38, 3.4e38).astype(np.float32)
    return (p[0] + 1j * p[1]).astype(np.complex64)


# ---- complex sqrt, rsqrt, abs, log, reciprocal near the extremes --------------------------------
# Bounds, in ulp of |result|: the functions' documented error (ops/complex_math.py) plus
# torch's own (glibc's, ~1 ulp): sqrt 2 + 1; rsqrt = 1/sqrt, ~5 ulp + 1; abs ~1.5 (measured
# 2 at |z| ~ 1e38, before and after this session) + 0.5 (torch's hypot is correctly rounded);
# log's real part ~2 ulp of |log|z||, its imaginary part atan2's ~2, + 1; reciprocal ~3
# (Smith's scaling) + 1.
BOUND = {"sqrt": 3.0, "rsqrt": 6.0, "abs": 2.5, "log": 4.0, "reciprocal": 4.0}
SCALES = [3e38, 1e38, 1e19, 1e-19, 1e-38, 1e-41, 1e-44]


@pytest.mark.parametrize("name", sorted(BOUND))
@pytest.mark.parametrize("scale", SCALES)
def test_complex_near_extremes(rng, name, scale):
    z = _complex_at(rng, 1009, scale)
    if _ftz():
        z = flush_subnormals(z)
    want, got, err = _against_torch(name, z)
    i = int(np.argmax(err))
    assert err.max() <= BOUND[name], (z[i], want[i], got[i], err[i])


def test_complex_sqrt_special_and_mixed(rng):
    """One part at float32's edge, the other ordinary or tiny; the axes and signed zeros; inf
    and NaN parts: torch's values (a non-finite result bit for bit up to NaN's payload)."""
    big = np.float32(3.4e38) * rng.uniform(0.5, 1.0, 6).astype(np.float32)
    tiny = np.float32(1e-45) * rng.integers(1, 9, 6).astype(np.float32)
    parts = [
        *big,
        *-big,
        *tiny,
        *-tiny,
        0.0,
        -0.0,
        1.5,
        -2.25,
        np.inf,
        -np.inf,
        np.nan,
    ]
    parts = np.array(parts, np.float32)
    if _ftz():
        parts = flush_subnormals(parts)
    re, im = np.meshgrid(parts, parts)
    z = np.empty(re.size, np.complex64)
    z.real, z.imag = re.ravel(), im.ravel()  # (re + 1j * im loses a -0.0 imaginary part)
    for name in ("sqrt", "rsqrt"):
        want, got, err = _against_torch(name, z)
        i = int(np.argmax(err))
        assert err.max() <= BOUND[name], (name, z[i], want[i], got[i])
    # the signs of zero parts and of infinities as torch's
    want = _np(torch.sqrt(torch.from_numpy(z)))
    got = pr.sqrt(pr.tensor(z)).numpy()
    if _ftz():  # (a subnormal result part is written as a zero of its sign)
        want = flush_subnormals(want)
    zero = (want.real == 0) | np.isinf(want.real)
    assert np.array_equal(np.signbit(want.real[zero]), np.signbit(got.real[zero]))
    zero = (want.imag == 0) | np.isinf(want.imag)
    assert np.array_equal(np.signbit(want.imag[zero]), np.signbit(got.imag[zero]))


def test_complex_sqrt_grad_near_extremes(rng):
    """The scaling is a constant factor: the gradient at |z| ~ 1e38 and ~1e-40 is torch's
    (d sqrt = 1 / (2 sqrt z), conjugated: within sqrt's and one division's error, ~4 ulp)."""
    z = np.concatenate([_complex_at(rng, 17, 1e38), _complex_at(rng, 17, 1e-40)])
    if _ftz():  # (the subnormal half reads as zeros there: sqrt's gradient at 0 is not finite)
        z = z[:17]
    tz = torch.from_numpy(z).requires_grad_()
    torch.sqrt(tz).real.sum().backward()
    pz = pr.tensor(z, requires_grad=True)
    pr.sqrt(pz).real.sum().backward()
    err = _ulp_err(_np(tz.grad), pz.grad.numpy())
    assert err.max() <= 6.0, err


# ---- var / std / var_mean / std_mean past float32's squares -------------------------------------
def _moments64(a, correction=1):
    """(var, std, mean) along the last axis in float64 (two passes: squares of float32 data,
    up to (6.8e38)², are far inside float64's range)."""
    a = a.astype(np.float64)
    m = a.mean(-1)
    q = ((a - m[..., None]) ** 2).sum(-1)
    v = q / (a.shape[-1] - correction)
    return v, np.sqrt(v), m


def _spread_rows(kind, shape, rng):
    """Rows whose squared deviations pass float32's range though their variance may not."""
    a = rng.standard_normal(shape)
    if kind == "1e12":  # just past the scaled units' switch (2^40)
        a = a * 1e12
    elif kind == "1e19":  # var ~1e38 representable, Σ(x - mean)² ~1e38·n not
        a = a * 1e19
    elif kind == "offset":  # far from 0 as well
        a = a * 1e19 + 1e20
    elif kind == "1e38":  # var past float32 (inf), std ~1e38 (finite)
        a = np.clip(a * 1e38, -3.4e38, 3.4e38)
    elif kind == "outlier":  # small data, one huge value late in the row (the switch mid-row)
        a[..., -3] = 3e37
    return a.astype(np.float32)


# Tolerances: the variance to the 1e-5 relative that the Welford reduction documents and
# tests (test_reduce_accuracy, test_reduce); the scaling by 2^-81 is exact, so Welford's
# rounding is all the error. std is var's root: half var's relative error, +1 rounding. The
# mean (mean()'s compensated sum, or Welford's k + m where that sum overflows): n·2^-24 of
# max|x| absolute (each of Welford's n mean updates rounds at the data's scale).
RTOL_VAR = 1e-5


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["1e12", "1e19", "offset", "1e38", "outlier"])
def test_var_std_past_float32_squares(path, kind, rng, monkeypatch):
    _force(path, monkeypatch)
    a = _spread_rows(kind, SHAPES[path], rng)
    x = pr.tensor(a)
    v, m = pr.var_mean(x, 1)
    _check_path(path)
    s, m2 = pr.std_mean(x, dim=1)
    v1, s1 = pr.var(x, 1), pr.std(x, 1)
    v64, s64, m64 = _moments64(a)
    with np.errstate(over="ignore"):
        want_v, want_s = v64.astype(np.float32), s64.astype(np.float32)
    for got, want in ((v, want_v), (v1, want_v), (s, want_s), (s1, want_s)):
        got = got.numpy()
        assert np.array_equal(np.isinf(got), np.isinf(want)), (got, want)
        fin = np.isfinite(want)
        np.testing.assert_allclose(got[fin], want[fin].astype(np.float64), rtol=RTOL_VAR)
    tol = a.shape[1] * 2.0**-24 * np.abs(a).astype(np.float64).max(1)
    for got in (m, m2):
        assert (np.abs(got.numpy() - m64) <= tol).all(), (got.numpy(), m64)
    # torch's (double Welford along a dim) agrees on which results are finite; a single row is
    # torch's full reduction, whose float32 sum overflows to NaN here (float64 is the oracle)
    if a.shape[0] == 1:
        return
    tv, tm = torch.var_mean(torch.from_numpy(a), 1)
    assert np.array_equal(np.isinf(_np(tv)), np.isinf(v.numpy()))
    assert (
        np.isfinite(_np(torch.std(torch.from_numpy(a), 1))).all() and np.isfinite(s.numpy()).all()
    )


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_var_std_huge_full_and_multi_dim(rng):
    """Full and multi-dim reductions, correction 0 and 2, keepdim; every value against float64
    (torch's full-reduction var/std of such data is NaN: its float32 sum overflows, so float64
    is the oracle here), a row of one value and rows wider than float32 (x - k overflows)."""
    a = (rng.standard_normal((3, 37, 11)) * 1e19).astype(np.float32)
    x = pr.tensor(a)
    for corr in (0, 1, 2):
        got = pr.var(x, dim=(0, 2), correction=corr, keepdim=True).numpy().ravel()
        want = _moments64(a.transpose(1, 0, 2).reshape(37, -1), corr)[0]
        np.testing.assert_allclose(got, want, rtol=RTOL_VAR)
        got = pr.std(x, correction=corr).item()
        want = _moments64(a.reshape(-1), corr)[1]
        np.testing.assert_allclose(got, want, rtol=RTOL_VAR)
    # x - k past float32 (3e38 - (-3e38)): std finite where representable
    b = np.array([[-3e38, 3e38, 3e38, 3e38] * 50, [3e38, -3e38] * 100], np.float32)
    s = pr.std(pr.tensor(b), 1).numpy()
    v64, s64, _ = _moments64(b)
    with np.errstate(over="ignore"):
        want = s64.astype(np.float32)
    assert np.array_equal(np.isinf(s), np.isinf(want))
    np.testing.assert_allclose(s[np.isfinite(want)], s64[np.isfinite(want)], rtol=RTOL_VAR)
    assert np.isinf(pr.var(pr.tensor(b), 1).numpy()).all()  # (~1e77: past float32)
    # one value: var 0/0 → NaN with correction 1, 0 with correction 0 (as torch)
    one = pr.tensor(np.array([[3e38]], np.float32))
    assert np.isnan(pr.var(one, 1).item()) and pr.var(one, 1, correction=0).item() == 0.0


# ---- vander (float32): torch's cumprod with its double accumulator, bit for bit --------------------
def _same_bits(want, got):
    want, got = np.asarray(want), np.asarray(got)
    return (want.view(np.uint32) == got.view(np.uint32)) | (np.isnan(want) & np.isnan(got))


def _vander64(x, n, inc):
    """torch 2.13's float32 vander, computed independently of the torch at hand (the GPU
    machine's is older): each column a running product in float64, every product rounded to a
    double, the result rounded to float32."""
    cols = np.ones((len(x), len(x) if n is None else n), np.float64)
    cols[:, 1:] = x.astype(np.float64)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.cumprod(cols, axis=1).astype(np.float32)
    return w if inc else w[:, ::-1]


def _vander_check(x, n, inc):
    """pyrite's vander of x bit for bit against _vander64 (and _vander64 against torch 2.13's);
    on a device that flushes subnormals, judged where neither x nor the result is subnormal."""
    want = _vander64(x, n, inc)
    if IS_ORACLE:
        assert _same_bits(want, _np(torch.vander(torch.from_numpy(x), N=n, increasing=inc))).all()
    got = pr.vander(pr.tensor(x), N=n, increasing=inc).numpy()
    assert want.shape == got.shape
    ok = _same_bits(want, got)
    if _ftz():
        ok |= has_subnormal(want) | has_subnormal(x)[:, None]
    assert ok.all(), (n, inc, np.argwhere(~ok)[:5], want[~ok][:5], got[~ok][:5])


@pytest.mark.parametrize("scale", [1.0, 7.0, 1e-3, 1e5, 1e-12, 1e-40])
def test_vander_float32_bits(rng, scale):
    """Every column bit for bit (x^3 and up were 1-2 ulp off: a float32 running product), over
    magnitudes whose powers overflow, underflow and go subnormal, both orders, several N."""
    x = (rng.standard_normal(int(rng.integers(1, 120))) * scale).astype(np.float32)
    for n in (None, 1, 2, 3, int(rng.integers(4, 40))):
        for inc in (False, True):
            _vander_check(x, n, inc)


def test_vander_float32_special_values_and_grad(rng):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 3e38, -1e-45, 2.5], np.float32)
    _vander_check(x, 6, False)
    # the gradient against float64's Σ_k g_k·k·x^(k-1) (torch 2.13's own vander backward raises
    # "modified by an inplace operation" here): each term a few roundings (the power, the
    # products) and N-1 additions: (N + 3)·2^-24 of Σ|terms|
    a = rng.standard_normal(23).astype(np.float32)
    g = rng.standard_normal((23, 7)).astype(np.float32)
    for inc in (False, True):
        px = pr.tensor(a, requires_grad=True)
        pr.vander(px, N=7, increasing=inc).backward(pr.tensor(g))
        k = np.arange(7.0) if inc else np.arange(7.0)[::-1]
        terms = g.astype(np.float64) * k * a[:, None].astype(np.float64) ** np.maximum(k - 1, 0)
        want = terms.sum(1)
        tol = (7 + 3) * 2.0**-24 * np.abs(terms).sum(1)
        assert (np.abs(px.grad.numpy() - want) <= tol).all(), (px.grad.numpy(), want)
