"""Accuracy of two reductions against float64: p-norms for p not in {0, 1, 2, ±inf} (the
scaled, compensated "normp" state) and the mean var_mean / std_mean return (mean()'s
compensated sum beside Welford's state), on every reduction path, with torch CPU's special
values (kernels/reduce.py _normp_spec, _welford_spec)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from optable import EPS32

import pyrite as pr
import pyrite.ops.reduce as R

# the paths a row can take, forced at test sizes (as tests/test_reduce.py forces them)
PATHS = ("serial", "row", "split", "gpu-split", "fused", "wide")


def _force(path, monkeypatch):
    if path in ("serial", "row"):
        monkeypatch.setattr(R, "FORCE_MODE", path)
    elif path == "split":
        monkeypatch.setattr(R, "FORCE_SPLIT", 7)
    elif path == "gpu-split":  # the GPU's split plan (row stages) run on this adapter
        monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
        monkeypatch.setattr(R, "WIDE", False)
        monkeypatch.setattr(R, "FUSED", False)
    elif path == "fused":
        monkeypatch.setattr(R, "FUSED", True)
    else:
        monkeypatch.setattr(R, "WIDE", True)
        monkeypatch.setattr(R, "FUSED", False)


def _check_path(path):
    want = {"split": "split", "gpu-split": "split", "fused": "fused", "wide": "row wide"}
    assert R.LAST_PATH.startswith(want.get(path, path)), (path, R.LAST_PATH)


# (rows, length): long enough for the split, one-pass and wide paths where forced
SHAPES = {
    "serial": (5, 1031),
    "row": (5, 1031),
    "split": (2, 1031),
    "gpu-split": (3, 70_001),
    "fused": (2, 70_001),
    "wide": (1, 70_000),
}


def _ulps(got, want):
    """|got - want| in ulps of want rounded to float32 (the smallest subnormal at least); a
    want past float32's range must come out inf (0 ulp), anything else is inf ulp off."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(over="ignore"):
        want32 = np.abs(want).astype(np.float32)
    over = np.isinf(want32)
    sp = np.maximum(np.spacing(np.where(over, 1.0, want32)).astype(np.float64), 2.0**-149)
    err = np.abs(got - want) / sp
    return np.where(over, np.where(np.abs(got) == np.inf, 0.0, np.inf), err)


# ---- p-norms --------------------------------------------------------------------------------
def _norm64(a, p):
    """(Σ|x|^p)^(1/p) along the last axis in float64, scaled by the dominant |x| (so float64
    itself neither overflows nor underflows), p as float32 (the kernel's, and torch's)."""
    p = float(np.float32(p))
    x = np.abs(a.astype(np.float64))
    if p > 0:
        m = x.max(-1, keepdims=True)
    else:
        m = np.where(x == 0, np.inf, x).min(-1, keepdims=True)
    m = np.where((m == 0) | ~np.isfinite(m), 1.0, m)
    return ((x / m) ** p).sum(-1) ** (1.0 / p) * m[..., 0]


def _normp_tol(p):
    """ulps of the result: each term 2^(p·(log2|x| − e)) to ~1 ulp (p_exp2_dd of p_log2_dd's
    pair), a rescale to the dominant |x| ~1 ulp, Neumaier's sum ~1 ulp of a positive total: ~3
    ulp relative in Σ, divided by |p| through the root; the root itself ~1 ulp."""
    return 1.0 + 3.0 / abs(p)


P_VALUES = (3.0, 0.5, 1.5, 4.0, 7.0, -1.0, -2.5, 2.7)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scale", [1.0, 1e30, 1e-30], ids=["normal", "huge", "tiny"])
def test_normp_within_ulps_of_float64(path, scale, rng, monkeypatch):
    """vector_norm(x, p) of normal data (times 1e30 or 1e-30: |x|^p overflows or underflows
    float32 there, torch's included) within _normp_tol(p) ulps of float64's. Before: 9 .. 54
    ulp on normal data (exp2/log2 terms summed plainly), inf or garbage at 1e±30."""
    _force(path, monkeypatch)
    rows, n = SHAPES[path]
    a = (rng.standard_normal((rows, n)) * scale).astype(np.float32)
    x = pr.tensor(a)
    for p in P_VALUES:
        got = pr.linalg.vector_norm(x, p, dim=1).numpy()
        _check_path(path)
        err = _ulps(got, _norm64(a, p))
        assert err.max() <= _normp_tol(p), (p, err.max())


def test_normp_beats_torch_cpu(rng):
    """torch CPU's float32 p-norm sums |x|^p plainly (218 ulp at p = 3 over 100,003 normal
    values, 2026-12); pyrite's stays within _normp_tol. Both against float64."""
    a = rng.standard_normal((2, 100_003)).astype(np.float32)
    for p in (3.0, 0.5, -1.0):
        want = _norm64(a, p)
        ours = _ulps(pr.linalg.vector_norm(pr.tensor(a), p, dim=1).numpy(), want).max()
        theirs = _ulps(torch.linalg.vector_norm(torch.from_numpy(a), p, dim=1).numpy(), want)
        assert ours <= _normp_tol(p) and ours <= theirs.max(), (p, ours, theirs.max())


def test_normp_public_entry_points(rng):
    # torch.norm, Tensor.norm, linalg.norm / vector_norm and F.normalize(p=3) share the kernel
    a = rng.standard_normal((7, 263)).astype(np.float32)
    want = _norm64(a, 3.0)
    x = pr.tensor(a)
    for got in (
        pr.norm(x, 3, dim=1),
        x.norm(p=3, dim=1),
        pr.linalg.norm(x, 3, dim=1),
        pr.linalg.vector_norm(x, 3, dim=1),
    ):
        assert _ulps(got.numpy(), want).max() <= _normp_tol(3.0)
    y = pr.nn.functional.normalize(x, p=3.0, dim=1).numpy()
    ref = a.astype(np.float64) / want[:, None]
    # (one more rounding: the division)
    assert (np.abs(y - ref) / np.spacing(np.abs(ref).astype(np.float32))).max() <= 1 + _normp_tol(3)
    # a whole-tensor norm of a transposed view (strided reads)
    t = pr.tensor(a).t()
    assert _ulps(pr.norm(t, 0.5).numpy(), _norm64(a.reshape(1, -1), 0.5)).max() <= _normp_tol(0.5)


INF, NAN = math.inf, math.nan
SPECIAL_ROWS = (
    [0.0],
    [0.0, 0.0],
    [INF],
    [-INF, 1.0],
    [INF, 0.0, 1.0, 2.0],
    [NAN, 1.0],
    [NAN, INF],
    [NAN, 0.0],
    [0.0, 1.0, 2.0],
    [INF, INF],
    [0.0, INF],
    [-3.0, 4.0],
    [1e-45, 1e-45],
    [1e-40, 2.0],
    [5.0],
)


@pytest.mark.parametrize("path", ["serial", "row", "split", "fused"])
def test_normp_special_values_as_torch(path, monkeypatch):
    """NaN, ±inf, zeros and subnormals, alone and after 3,000 elements whose terms are 0 (zeros
    for p > 0, infs for p < 0: the special element lands in another chunk of the split paths):
    torch CPU's answer where torch's float32 is right, else float64's within 2 ulp
    (subnormals, where torch's |x|^p underflows to 0)."""
    _force(path, monkeypatch)
    for p in (3.0, 0.5, -1.0, -2.5):
        for row in SPECIAL_ROWS:
            for pad in (0, 3000):
                a = np.array([0.0 if p > 0 else INF] * pad + row, np.float32)
                got = pr.linalg.vector_norm(pr.tensor(a), p).item()
                want = torch.linalg.vector_norm(torch.from_numpy(a), p).item()
                w64 = torch.linalg.vector_norm(torch.from_numpy(a).double(), p).item()
                if math.isnan(want) or math.isinf(w64) or w64 == 0:
                    assert got == want or (math.isnan(got) and math.isnan(want)), (p, row, got)
                elif got == 0.0 and w64 < 2.0**-126:
                    pass  # a subnormal result flushed (the H100's Vulkan: 0 for 5.6e-45)
                else:
                    assert _ulps(got, w64) <= 2, (p, row, pad, got, w64)


def test_normp_does_not_overflow_where_the_norm_is_finite():
    """torch CPU's float32 p-norm overflows |x|^p (vector_norm([1e30] * 3, 3) is inf, torch
    2.13) and underflows it to 0; pyrite's scaled state gives the finite norm. (A deliberate
    difference from torch: the exact norm is representable. norm2 still overflows, as torch's.)"""
    for v, p in ((1e30, 3.0), (3e38, 1.5), (1e-30, 3.0), (1e-40, 4.0), (1e30, -2.5)):
        a = np.full(3, v, np.float32)
        got = pr.linalg.vector_norm(pr.tensor(a), p).item()
        want = float(np.float32(v)) * 3.0 ** (1.0 / float(np.float32(p)))
        if got == 0.0 and want < 2.0**-126:
            continue  # subnormals flushed (the H100's Vulkan, 2026-12: 0 for the 1e-40 row)
        assert _ulps(got, want) <= _normp_tol(p), (v, p, got, want)
    assert math.isinf(torch.linalg.vector_norm(torch.full((3,), 1e30), 3.0).item())


def test_normp_state_is_three_f32_words():
    from pyrite.kernels.reduce import fused_ok, state_words

    assert state_words("normp", "f32") == 3 and fused_ok("normp", "f32")


# ---- var_mean / std_mean's mean -------------------------------------------------------------
def _data(kind, shape, rng):
    a = rng.standard_normal(shape)
    if kind == "cancel":  # rows cancelling to ~1e-3 of their spread
        a = a - a.mean(-1, keepdims=True) + 1e-3 * rng.standard_normal(shape[:-1] + (1,))
    elif kind == "offset":  # far from 0 (Welford's shift's case)
        a = a * 0.5 + 1e4
    elif kind == "uniform":
        a = rng.uniform(-1.0, 1.0, shape)
    return a.astype(np.float32)


def _mean_tol(a):
    """Neumaier's sum: |err| <= 2u·|Σ| + O(n·u²)·Σ|x| (Higham, Accuracy and Stability, §4.3),
    then the division rounds once more: in ulps of the mean, 2 + n·u·mean|x| / ulp(mean)·u."""
    n = a.shape[-1]
    mean = np.abs(a.astype(np.float64).mean(-1))
    sp = np.maximum(np.spacing(mean.astype(np.float32)).astype(np.float64), 2.0**-149)
    return 2.0 + n * EPS32 * EPS32 * np.abs(a).astype(np.float64).mean(-1) / sp


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", ["normal", "cancel", "offset", "uniform"])
def test_var_mean_returns_mean_as_accurate_as_mean(path, kind, rng, monkeypatch):
    """var_mean's and std_mean's mean equal pyrite's mean() bit for bit (the same compensated
    sum, merged in the same order) and lie within _mean_tol of float64's, where k + m of the
    shifted Welford state was up to 35,755 ulp off (2 x 100,003 normal values, serial); torch
    CPU's double sums are within 0.5. The variance keeps its accuracy (1e-5 relative, as
    test_reduce.test_var_mean_of_data_far_from_zero)."""
    _force(path, monkeypatch)
    a = _data(kind, SHAPES[path], rng)
    x = pr.tensor(a)
    v, m = pr.var_mean(x, 1)
    _check_path(path)
    s, m2 = pr.std_mean(x, dim=1, correction=0)
    m3 = x.mean(1)
    np.testing.assert_array_equal(m.numpy(), m3.numpy())
    np.testing.assert_array_equal(m2.numpy(), m3.numpy())
    a64 = a.astype(np.float64)
    assert (_ulps(m.numpy(), a64.mean(1)) <= _mean_tol(a)).all()
    tm = torch.var_mean(torch.from_numpy(a), 1)[1].numpy()
    assert _ulps(tm, a64.mean(1)).max() <= 0.5 + 1e-9  # (torch: double sums, one rounding)
    np.testing.assert_allclose(v.numpy(), a64.var(1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(s.numpy(), a64.std(1), rtol=1e-5)


def test_var_mean_mean_over_several_dims_and_views(rng):
    # BatchNorm's reduction (dims 0, 2, 3) of a permuted (non-contiguous) view, keepdim
    c = _data("cancel", (3, 7 * 9 * 11), rng)  # each channel cancels
    x = pr.tensor(c.reshape(3, 7, 9, 11)).permute(1, 0, 2, 3)  # (7, 3, 9, 11)
    v, m = pr.var_mean(x, dim=(0, 2, 3), keepdim=True)
    assert m.shape == (1, 3, 1, 1)
    np.testing.assert_array_equal(m.numpy(), x.mean((0, 2, 3), keepdim=True).numpy())
    assert (_ulps(m.numpy().ravel(), c.astype(np.float64).mean(1)) <= _mean_tol(c)).all()
    b = np.array([[1.0, np.inf, 2.0], [np.inf, -np.inf, 0.0], [np.nan, 1.0, 2.0]], np.float32)
    tv, tm = torch.var_mean(torch.from_numpy(b), 1)
    v, m = pr.var_mean(pr.tensor(b), 1)
    np.testing.assert_array_equal(m.numpy(), tm.numpy())
    np.testing.assert_array_equal(np.isnan(v.numpy()), np.isnan(tv.numpy()))
    # the empty row: NaN mean (0 / 0), as torch's
    e = pr.var_mean(pr.zeros(2, 0), 1, correction=0)[1].numpy()
    assert np.isnan(e).all() and np.isnan(torch.var_mean(torch.zeros(2, 0), 1)[1].numpy()).all()


def test_var_mean_state_words_and_one_pass():
    # var and std keep Welford's 4 words (their wide kernel's 1,024 states and split scratch
    # as before); the _mean ops carry the sum's 2 more, still within the one-pass slot
    from pyrite.kernels.reduce import fused_ok, state_words

    assert state_words("var", "f32") == state_words("std", "f32") == 4
    assert state_words("var_mean", "f32") == state_words("std_mean", "f32") == 6
    assert fused_ok("var_mean", "f32") and R.FUSED_WORDS >= 6
    assert R._fused_scratch(pr.backend.current())[1] == R.FUSED_MAX_UNITS * R.FUSED_WORDS
