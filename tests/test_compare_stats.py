"""compare.py (isclose, allclose, equal, type_as) and stats.py (multinomial, bincount, histc,
diff, broadcast_shapes, trace, kron, logaddexp, logcumsumexp, cummax/cummin, cov, corrcoef,
cdist) against torch CPU on random inputs; multinomial statistically.

These ops are compositions of already-tested kernels (no new grids), so there is no case past
65,535 workgroups here; awkward shapes, non-contiguous views and broadcasting are what is new.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from optable import EPS32, assert_close, laid_out

import pyrite as pr


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- isclose / allclose / equal / type_as ---------------------------------------------------
SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 1e-9], np.float32)


@pytest.mark.parametrize("layout", ["c", "t", "s"])
@pytest.mark.parametrize("tol", [(1e-5, 1e-8), (1e-2, 0.0), (0.0, 0.5)])
def test_isclose_matches_torch(rng, layout, tol):
    a = _f32(rng, 7, 13)
    b = a + (rng.standard_normal((7, 13)) * rng.choice([1e-7, 1e-4, 1e-2, 1.0], (7, 13))).astype(
        np.float32
    )
    a[0, :7], b[0, :7] = SPECIALS, SPECIALS  # each special against itself
    a[1, :7], b[1, :7] = SPECIALS, SPECIALS[::-1]
    rtol, atol = tol
    for equal_nan in (False, True):
        got = pr.isclose(
            laid_out(a, layout), laid_out(b, layout), rtol=rtol, atol=atol, equal_nan=equal_nan
        )
        want = torch.isclose(
            torch.tensor(a), torch.tensor(b), rtol=rtol, atol=atol, equal_nan=equal_nan
        )
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert pr.allclose(laid_out(a, layout), laid_out(b, layout), rtol, atol, equal_nan) is bool(
            want.all()
        )


def test_isclose_broadcast_int_bool_and_methods(rng):
    a = rng.integers(-5, 5, (3, 1, 5)).astype(np.int32)
    b = rng.integers(-5, 5, (4, 5)).astype(np.int32)
    got = laid_out(a).isclose(laid_out(b), atol=1)
    want = torch.isclose(torch.tensor(a), torch.tensor(b), atol=1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.shape == pr.Size([3, 4, 5])
    m = rng.random(11) < 0.5
    np.testing.assert_array_equal(
        pr.isclose(pr.tensor(m), pr.tensor(m[::-1].copy())).numpy(),
        torch.isclose(torch.tensor(m), torch.tensor(m[::-1].copy())).numpy(),
    )
    x = _f32(rng, 5)
    assert pr.tensor(x).allclose(pr.tensor(x * (1 + 1e-7)))
    assert not pr.tensor(x).allclose(pr.tensor(x + 1))


def test_isclose_errors():
    with pytest.raises(TypeError, match="pyrite: isclose: .*int32.*float32"):
        pr.isclose(pr.tensor([1]), pr.tensor([1.0]))
    with pytest.raises(ValueError, match="pyrite: isclose: rtol"):
        pr.isclose(pr.tensor([1.0]), pr.tensor([1.0]), rtol=-1)
    assert pr.allclose(pr.tensor([1.0]), pr.tensor([1.0]))  # the next op still works


def test_equal(rng):
    a = _f32(rng, 6, 7)
    assert pr.equal(laid_out(a), laid_out(a, "t")) is True
    b = a.copy()
    b[5, 6] += 1
    assert pr.equal(laid_out(a), laid_out(b)) is False
    assert laid_out(a).equal(laid_out(a[:, :6])) is False  # shapes differ: no broadcast
    assert pr.equal(pr.tensor([np.nan]), pr.tensor([np.nan])) is torch.equal(
        torch.tensor([np.nan]), torch.tensor([np.nan])
    )
    assert pr.equal(pr.tensor([1, 2]), pr.tensor([1.0, 2.0])) is True
    assert pr.equal(pr.zeros(0, 3), pr.zeros(0, 3)) is True


def test_type_as():
    x = pr.tensor([1.7, -2.2])
    y = x.type_as(pr.tensor([1]))
    assert y.dtype is pr.int32
    np.testing.assert_array_equal(
        y.numpy(), torch.tensor([1.7, -2.2]).type_as(torch.tensor([1])).numpy()
    )
    assert pr.tensor([1, 2]).type_as(x).dtype is pr.float32


# ---- multinomial ------------------------------------------------------------------------------
def _binomial_ok(count, n, p, z=5.5):
    """|count - n·p| within z standard deviations (+1 for discreteness). z = 5.5: a false alarm
    has probability ~4e-8 per cell, so ~1e-6 over every cell this file checks."""
    return abs(count - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


def test_multinomial_with_replacement_counts(rng):
    w = rng.random((3, 7)).astype(np.float32) * 5
    w[0, 2] = 0.0  # a zero weight is never drawn
    w[1, 6] = 0.0  # nor a trailing one (the u·total == total cap)
    w[2, 0] = 0.0
    n = 20000
    pr.manual_seed(11)
    s = pr.multinomial(pr.tensor(w), n, replacement=True)
    assert s.shape == pr.Size([3, n]) and s.dtype is pr.int32
    s = s.numpy()
    p = w.astype(np.float64) / w.sum(1, keepdims=True)
    for r in range(3):
        counts = np.bincount(s[r], minlength=7)
        assert counts.size == 7
        for c in range(7):
            if p[r, c] == 0:
                assert counts[c] == 0, (r, c)
            else:
                assert _binomial_ok(counts[c], n, p[r, c]), (r, c, counts[c], n * p[r, c])


def test_multinomial_without_replacement(rng):
    # 1-D weights, unnormalised; first and second draws against their exact distributions:
    # P(first = j) = p_j, P(second = j) = sum_{i != j} p_i p_j / (1 - p_i).
    w = np.array([0.5, 3.0, 1.0, 0.0, 2.5], np.float32)
    p = w.astype(np.float64) / w.sum()
    reps, k = 12000, 3
    pr.manual_seed(3)
    s = pr.multinomial(pr.tensor(w).expand(reps, 5), k).numpy()  # (reps, k), expanded input
    assert s.shape == (reps, k)
    assert all(len(set(row)) == k for row in s)  # no duplicates in a row
    assert not (s == 3).any()  # zero weight: only drawn once the positive ones run out
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(5) if i != j) for j in range(5)])
    for col, dist in ((0, p), (1, second)):
        counts = np.bincount(s[:, col], minlength=5)
        for j in range(5):
            assert _binomial_ok(counts[j], reps, dist[j]), (col, j, counts[j], reps * dist[j])
    one = pr.multinomial(pr.tensor(w), 4)  # 1-D in, 1-D out; all four positive ones
    assert one.shape == pr.Size([4]) and sorted(one.tolist()) == [0, 1, 2, 4]
    full = pr.multinomial(pr.tensor(w), 5).tolist()  # every category, the zero one last
    assert sorted(full) == [0, 1, 2, 3, 4] and full[-1] == 3


def test_multinomial_reproducible():
    w = pr.rand(4, 9) + 0.1
    for replacement in (True, False):
        pr.manual_seed(1234)
        a = pr.multinomial(w, 5, replacement).numpy()
        pr.manual_seed(1234)
        b = pr.multinomial(w, 5, replacement).numpy()
        np.testing.assert_array_equal(a, b)
        g = pr.Generator().manual_seed(7)
        c = pr.multinomial(w, 5, replacement, generator=g).numpy()
        g.manual_seed(7)
        np.testing.assert_array_equal(c, pr.multinomial(w, 5, replacement, generator=g).numpy())
    assert w.multinomial(2).shape == pr.Size([4, 2])


@pytest.mark.parametrize(
    ("weights", "k", "replacement", "exc", "match"),
    [
        ([1.0, 1.0], 3, False, RuntimeError, "cannot sample n_sample > prob_dist.size"),
        ([1.0, -1.0], 1, True, RuntimeError, "inf`, `nan` or element < 0"),
        ([1.0, np.inf], 1, True, RuntimeError, "inf`, `nan` or element < 0"),
        ([np.nan, 1.0], 1, False, RuntimeError, "inf`, `nan` or element < 0"),
        ([[1.0, 1.0], [0.0, 0.0]], 1, True, RuntimeError, r"sum of probabilities <= 0"),
        ([1.0, 1.0], 0, True, RuntimeError, "cannot sample n_sample <= 0"),
        ([[[1.0]]], 1, True, RuntimeError, "prob_dist must be 1 or 2 dim"),
        ([1, 2], 1, True, TypeError, "floating-point"),
    ],
)
def test_multinomial_errors(weights, k, replacement, exc, match):
    w = pr.tensor(weights)
    with pytest.raises(exc, match="pyrite: multinomial.*" + match):
        pr.multinomial(w, k, replacement)
    tw = torch.tensor(weights)  # torch raises too (its exception types differ for ints)
    with pytest.raises((RuntimeError, TypeError)):
        torch.multinomial(tw, k, replacement)
    assert pr.multinomial(pr.tensor([0.0, 1.0]), 1).tolist() == [1]  # the next op works


# ---- bincount / histc -------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 7, 1031])
def test_bincount(rng, n):
    x = rng.integers(0, 23, n).astype(np.int64)
    w = rng.standard_normal(n).astype(np.float32)
    for minlength in (0, 5, 40):
        got = pr.bincount(pr.tensor(x), minlength=minlength)
        want = torch.bincount(torch.tensor(x), minlength=minlength)
        assert got.dtype is pr.int32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        gw = pr.tensor(x).bincount(pr.tensor(w), minlength)
        ww = torch.bincount(torch.tensor(x), torch.tensor(w), minlength).numpy().astype(np.float64)
        # a sum of up to n f32 weights, in any order: n·eps·Σ|w|
        assert_close(gw.numpy().astype(np.float64), ww, n * EPS32 * np.abs(w).sum(), 0, "bincount")
    xs = np.repeat(x, 2)  # a strided view
    np.testing.assert_array_equal(
        pr.bincount(pr.tensor(xs)[::2]).numpy(), torch.bincount(torch.tensor(x)).numpy()
    )


def test_bincount_empty_and_errors():
    e = pr.tensor(np.zeros(0, np.int32))
    np.testing.assert_array_equal(pr.bincount(e, minlength=3).numpy(), [0, 0, 0])
    with pytest.raises(
        RuntimeError, match="pyrite: bincount only supports 1-d non-negative.*min is -1"
    ):
        pr.bincount(pr.tensor([-1, 2]))
    with pytest.raises(RuntimeError, match=r"pyrite: bincount only supports 1-d.*\(1, 2\)"):
        pr.bincount(pr.tensor([[1, 2]]))
    with pytest.raises(TypeError, match="pyrite: bincount: .*float32"):
        pr.bincount(pr.tensor([1.0]))
    with pytest.raises(RuntimeError, match="pyrite: bincount: weights should be 1-d"):
        pr.bincount(pr.tensor([1, 2]), pr.tensor([1.0]))
    assert pr.bincount(pr.tensor([2])).tolist() == [0, 0, 1]


@pytest.mark.parametrize("shape", [(1,), (997,), (13, 17)])
def test_histc(rng, shape):
    x = _f32(rng, *shape)
    for bins, lo, hi in ((100, 0, 0), (7, -1.0, 1.5), (1, 0, 0), (33, 0.25, 0.25)):
        got = pr.histc(pr.tensor(x), bins=bins, min=lo, max=hi)
        want = torch.histc(torch.tensor(x), bins=bins, min=lo, max=hi)
        assert got.dtype is pr.float32 and got.shape == pr.Size([bins])
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    if len(shape) == 2:  # a transposed view
        got = laid_out(x.T.copy(), "t").histc(bins=9)
        np.testing.assert_array_equal(
            got.numpy(), torch.histc(torch.tensor(x.T.copy()), bins=9).numpy()
        )


def test_histc_constant_nan_and_errors():
    c = np.full(5, 3.0, np.float32)
    np.testing.assert_array_equal(
        pr.histc(pr.tensor(c), bins=4).numpy(), torch.histc(torch.tensor(c), bins=4).numpy()
    )
    x = np.array([1.0, np.nan, 2.0, 9.0], np.float32)  # NaN and out-of-range are not counted
    np.testing.assert_array_equal(pr.histc(pr.tensor(x), 4, 1, 3).numpy(), [1.0, 0.0, 1.0, 0.0])
    with pytest.raises(TypeError, match="pyrite: histc: .*int32"):
        pr.histc(pr.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="pyrite: histc: max must be larger than min"):
        pr.histc(pr.tensor([1.0]), min=2, max=1)
    assert pr.histc(pr.tensor([1.0]), bins=2, min=0, max=2).tolist() == [0.0, 1.0]


# ---- diff / broadcast_shapes / trace / kron ---------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_diff(rng, dtype):
    x = (rng.standard_normal((5, 11, 3)) * 10).astype(dtype)
    for n in (0, 1, 2, 4, 12):
        for dim in (-1, 0, 1):
            got = pr.diff(pr.tensor(x), n=n, dim=dim)
            want = torch.diff(torch.tensor(x), n=n, dim=dim)
            assert got.shape == pr.Size(want.shape), (n, dim)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=4 * n * EPS32, atol=0)
    pre = (rng.standard_normal((5, 2, 3)) * 10).astype(dtype)
    app = (rng.standard_normal((5, 1, 3)) * 10).astype(dtype)
    got = (
        pr.tensor(x)
        .transpose(0, 2)
        .diff(2, 1, pr.tensor(pre).transpose(0, 2), pr.tensor(app).transpose(0, 2))
    )
    want = torch.diff(
        torch.tensor(x).transpose(0, 2),
        2,
        1,
        torch.tensor(pre).transpose(0, 2),
        torch.tensor(app).transpose(0, 2),
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=8 * EPS32, atol=0)


def test_diff_errors():
    with pytest.raises(
        RuntimeError, match="pyrite: diff expects input to be at least one-dimensional"
    ):
        pr.diff(pr.tensor(1.0))
    with pytest.raises(RuntimeError, match="pyrite: diff: order must be non-negative"):
        pr.diff(pr.tensor([1.0]), n=-1)
    with pytest.raises(RuntimeError, match="same dimension as input"):
        pr.diff(pr.tensor([[1.0]]), prepend=pr.tensor([1.0]))
    with pytest.raises(IndexError, match="pyrite: dimension out of range"):
        pr.diff(pr.tensor([1.0]), dim=2)


def test_broadcast_shapes():
    for shapes in [((2, 1), (3,)), (2, (3, 1)), ((), (4, 1, 5), [7, 5]), ((0, 1), (3,)), ((1,),)]:
        got = pr.broadcast_shapes(*shapes)
        assert isinstance(got, pr.Size) and tuple(got) == tuple(torch.broadcast_shapes(*shapes))
    with pytest.raises(ValueError, match=r"pyrite: shapes \(2,\) and \(3,\) do not broadcast"):
        pr.broadcast_shapes((2,), (3,))


def test_trace(rng):
    for shape in [(1, 1), (5, 3), (3, 7), (16, 16)]:
        a = _f32(rng, *shape)
        got = pr.trace(laid_out(a.T.copy(), "t"))
        assert_close(
            got.numpy().astype(np.float64),
            np.float64(torch.trace(torch.tensor(a))),
            8 * EPS32 * np.abs(a).sum(),
            0,
        )
        i = rng.integers(-9, 9, shape).astype(np.int32)
        g = pr.tensor(i).trace()
        assert g.dtype is pr.int32 and g.item() == torch.trace(torch.tensor(i)).item()
    with pytest.raises(
        RuntimeError, match="pyrite: trace: expected a matrix, but got tensor with dim 3"
    ):
        pr.trace(pr.zeros(2, 2, 2))


@pytest.mark.parametrize(
    ("sa", "sb"), [((2, 3), (3, 1, 2)), ((5,), (1,)), ((1, 7), (3, 1)), ((), (4,))]
)
def test_kron(rng, sa, sb):
    a, b = _f32(rng, *sa), _f32(rng, *sb)
    got = pr.kron(pr.tensor(a), pr.tensor(b))
    np.testing.assert_array_equal(got.numpy(), torch.kron(torch.tensor(a), torch.tensor(b)).numpy())
    ia, ib = rng.integers(-5, 5, sa).astype(np.int32), rng.integers(-5, 5, sb).astype(np.int32)
    got = pr.tensor(ia).kron(pr.tensor(ib))
    assert got.dtype is pr.int32
    np.testing.assert_array_equal(
        got.numpy(), torch.kron(torch.tensor(ia), torch.tensor(ib)).numpy()
    )


# ---- log-space and scans ----------------------------------------------------------------------
def test_logaddexp(rng):
    a = (_f32(rng, 6, 1, 9) * 30).astype(np.float32)
    b = (_f32(rng, 5, 9) * 30).astype(np.float32)
    a[0, 0, :4] = [np.inf, -np.inf, np.nan, -np.inf]
    b[0, :4] = [np.inf, -np.inf, 1.0, 2.0]
    got = pr.logaddexp(pr.tensor(a), pr.tensor(b)).numpy().astype(np.float64)
    want = torch.logaddexp(torch.tensor(a), torch.tensor(b)).numpy().astype(np.float64)
    assert_close(got, want, 8 * EPS32, 8 * EPS32, "logaddexp")
    with pytest.raises(TypeError, match="pyrite: logaddexp: .*int32"):
        pr.logaddexp(pr.tensor([1]), pr.tensor([2]))


@pytest.mark.parametrize(("shape", "dim"), [((1,), 0), ((4, 37), 1), ((70, 3), 0), ((3, 5, 2), 1)])
def test_logcumsumexp(rng, shape, dim):
    x = (rng.standard_normal(shape) * 20).astype(np.float32)
    got = pr.logcumsumexp(laid_out(x, "s"), dim).numpy().astype(np.float64)
    want = torch.logcumsumexp(torch.tensor(x, dtype=torch.float64), dim).numpy()
    # each output goes through ceil(log2 L) logaddexps, each within a few ulps of its result
    passes = max(1, math.ceil(math.log2(shape[dim])))
    tol = 8 * (passes + 1) * EPS32
    assert_close(got, want, tol * np.abs(want).max(), tol, "logcumsumexp")


@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize(("shape", "dim"), [((1,), 0), ((5, 37), 1), ((67, 3), 0), ((2, 9, 4), -2)])
def test_cummax_cummin(rng, op, shape, dim):
    ints = rng.integers(-3, 4, shape).astype(np.int32)  # many ties: later index wins, as torch
    flts = rng.standard_normal(shape).astype(np.float32)
    flts.reshape(-1)[::7] = np.nan
    for a in (ints, flts):
        got = getattr(pr, op)(laid_out(a, "t") if a.ndim > 1 else pr.tensor(a), dim)
        want = getattr(torch, op)(torch.tensor(a), dim)
        np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    v, i = pr.tensor(3.0).cummax(0)
    assert v.item() == 3.0 and i.item() == 0


# ---- cov / corrcoef / cdist -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(11,), (1, 5), (4, 29)])
def test_cov_corrcoef(rng, shape):
    x = _f32(rng, *shape)
    tx = torch.tensor(x, dtype=torch.float64)
    n = shape[-1]
    tol = 4 * n * EPS32 * float(np.abs(x).max()) ** 2 + EPS32  # a dot of n f32 products
    for kw in ({}, {"correction": 0}):
        got = pr.cov(pr.tensor(x), **kw).numpy().astype(np.float64)
        assert_close(got, torch.cov(tx, **kw).numpy(), tol, 8 * EPS32, f"cov {kw}")
    fw = rng.integers(1, 4, n)
    aw = rng.random(n).astype(np.float32) + 0.1
    got = (
        pr.cov(pr.tensor(x), fweights=pr.tensor(fw), aweights=pr.tensor(aw))
        .numpy()
        .astype(np.float64)
    )
    want = torch.cov(
        tx, fweights=torch.tensor(fw), aweights=torch.tensor(aw, dtype=torch.float64)
    ).numpy()
    assert_close(got, want, 4 * tol, 16 * EPS32, "cov weighted")
    if shape[0] > 1 or len(shape) == 1:
        got = pr.corrcoef(pr.tensor(x)).numpy().astype(np.float64)
        assert_close(got, torch.corrcoef(tx).numpy(), 16 * n * EPS32, 0, "corrcoef")
    i = rng.integers(-5, 5, shape).astype(np.int32)
    got = pr.cov(pr.tensor(i)).numpy().astype(np.float64)
    assert_close(
        got,
        torch.cov(torch.tensor(i, dtype=torch.float64)).numpy(),
        4 * n * 25 * EPS32,
        8 * EPS32,
        "cov int",
    )


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, math.inf])
def test_cdist(rng, p):
    a, b = _f32(rng, 2, 5, 7), _f32(rng, 2, 3, 7)
    got = pr.cdist(pr.tensor(a), pr.tensor(b), p=p).numpy().astype(np.float64)
    want = torch.cdist(
        torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64), p=p
    ).numpy()
    assert got.shape == (2, 5, 3)
    assert_close(got, want, 16 * 7 * EPS32, 16 * 7 * EPS32, f"cdist p={p}")
    with pytest.raises(
        ValueError, match="pyrite: cdist: X1 and X2 must have the same number of columns"
    ):
        pr.cdist(pr.tensor(a), pr.tensor(b[..., :6]))
