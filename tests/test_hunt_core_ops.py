"""Core tensor ops against torch (CPU) on fresh random inputs of awkward sizes: cases that a
differential hunt found silently wrong (or raising where torch works)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def _pair(a, requires_grad=False):
    t = torch.tensor(a, requires_grad=requires_grad)
    p = pr.tensor(a, requires_grad=requires_grad)
    return t, p


def _close(p, t, tol=1e-5):
    np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=tol, atol=tol, equal_nan=True)


# ---- var / std gradients: the positional unbiased overload, degenerate degrees of freedom ----
@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("unbiased", [False, True])
def test_var_std_grad_positional_unbiased(rng, op, unbiased):
    # var(x, False) is var(x, unbiased=False) over every element, not var(x, dim=0)
    a = rng.standard_normal((int(rng.integers(2, 6)), 7)).astype(np.float32)
    t, p = _pair(a, True)
    to, po = getattr(torch, op)(t, unbiased), getattr(pr, op)(p, unbiased)
    to = to[0] + to[1] if op.endswith("_mean") else to
    po = po[0] + po[1] if op.endswith("_mean") else po
    _close(po, to)
    to.backward()
    po.backward()
    _close(p.grad, t.grad)


@pytest.mark.parametrize("shape,dim,correction", [((3,), None, 3), ((), None, 2), ((4,), None, 5)])
def test_var_mean_grad_no_degrees_of_freedom(rng, shape, dim, correction):
    # torch: a full reduction with n <= correction gives inf (nan where x == mean); no raise
    a = rng.standard_normal(shape).astype(np.float32)
    for fn in ("var", "var_mean"):
        t, p = _pair(a, True)
        to = getattr(torch, fn)(t, dim, correction=correction)
        po = getattr(pr, fn)(p, dim, correction=correction)
        (to[0] if fn == "var_mean" else to).sum().backward()
        (po[0] if fn == "var_mean" else po).sum().backward()
        _close(p.grad, t.grad)


# ---- index_reduce (was missing: AttributeError) --------------------------------------------
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_index_reduce(rng, reduce, include_self, dtype):
    shape = (5, 3, 4)
    dim = int(rng.integers(-3, 3))
    d = dim % 3
    k = 7  # more than the dim's size: duplicates
    a = (rng.standard_normal(shape) * 4).astype(dtype)
    idx = rng.integers(0, shape[d], (k,))
    sshape = list(shape)
    sshape[d] = k
    s = (rng.standard_normal(sshape) * 4).astype(dtype)
    grad = dtype == np.float32
    t, p = _pair(a, grad)
    ts, ps = _pair(s, grad)
    to = t.transpose(0, 2).index_reduce(
        2 - d, torch.tensor(idx), ts.transpose(0, 2), reduce, include_self=include_self
    )
    po = p.transpose(0, 2).index_reduce(
        2 - d, pr.tensor(idx), ps.transpose(0, 2), reduce, include_self=include_self
    )
    _close(po, to, 1e-4)
    if grad:
        w = rng.standard_normal(to.shape).astype(np.float32)
        (to * torch.tensor(w)).sum().backward()
        (po * pr.tensor(w)).sum().backward()
        _close(p.grad, t.grad, 1e-4)
        _close(ps.grad, ts.grad, 1e-4)


def test_index_reduce_inplace(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    s = rng.standard_normal((4, 5)).astype(np.float32)
    idx = np.array([2, 0, 2, 1, 2])
    t, p = torch.tensor(a), pr.tensor(a)
    r = p.index_reduce_(1, pr.tensor(idx), pr.tensor(s), "amax", include_self=False)
    t.index_reduce_(1, torch.tensor(idx), torch.tensor(s), "amax", include_self=False)
    assert r is p
    _close(p, t)


# ---- shifts: a Python int shifted by a small-int tensor is cast to the result type first ---
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
@pytest.mark.parametrize("op", ["rshift", "lshift"])
def test_scalar_shifted_by_small_int_tensor(rng, dtype, op):
    info = np.iinfo(dtype)
    a = rng.integers(0, info.bits + 3, (int(rng.integers(1, 9)), 3)).astype(dtype)
    for s in (-2, -3, 300, -200, 1, int(rng.integers(-1000, 1000))):
        t, p = torch.tensor(a), pr.tensor(a)
        if op == "rshift":
            to, po = s >> t.T, s >> p.T
        else:
            to, po = s << t.T, s << p.T
        np.testing.assert_array_equal(po.numpy(), to.numpy(), err_msg=f"scalar {s}")


# ---- div(rounding_mode="trunc") of half types truncates the quotient rounded to that type ---
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_div_trunc_half_rounds_quotient_first(rng, dtype):
    n = 601
    a = rng.integers(-9, 10, (n,)).astype(np.float32)
    b = np.round(rng.standard_normal(n) * 4, 2).astype(np.float32)
    b[b == 0] = 0.5
    td, pd = getattr(torch, dtype), getattr(pr, dtype)
    ta, tb = torch.tensor(a).to(td), torch.tensor(b).to(td)
    pa, pb = pr.tensor(a).to(pd), pr.tensor(b).to(pd)
    cases = [
        (torch.div(ta, tb, rounding_mode="trunc"), pr.div(pa, pb, rounding_mode="trunc")),
        (
            torch.div(ta[::3], tb[::3], rounding_mode="trunc"),
            pr.div(pa[::3], pb[::3], rounding_mode="trunc"),
        ),
        (torch.div(7, tb, rounding_mode="trunc"), pr.div(7, pb, rounding_mode="trunc")),
        (
            torch.div(ta.to(torch.int8), tb, rounding_mode="trunc"),
            pr.div(pa.to(pr.int8), pb, rounding_mode="trunc"),
        ),
    ]
    for to, po in cases:
        assert str(po.dtype).endswith(dtype)
        np.testing.assert_array_equal(po.float().numpy(), to.float().numpy())


# ---- cat's legacy empty (0,) input gets an empty gradient, as torch (it got None) ----------
def test_cat_legacy_empty_input_grad(rng):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    e = np.zeros((0,), np.float32)
    grads = []
    for L in (torch, pr):
        x = L.tensor(a, requires_grad=True)
        z = L.tensor(e, requires_grad=True)
        y = L.cat([x.T, z, x.T * 2], 0)
        (
            y * L.tensor(np.arange(y.numel(), dtype=np.float32).reshape(tuple(y.shape)))
        ).sum().backward()
        grads.append((x.grad, z.grad))
    (tx, tz), (px, pz) = grads
    _close(px, tx)
    assert pz is not None and tuple(pz.shape) == tuple(tz.shape) == (0,)


# ---- searchsorted / bucketize with NaN: torch's !(v >= x) test (NaN values land at the end) --
@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_searchsorted_nan(rng, right, dtype):
    n = int(rng.integers(3, 12))
    seq = np.round(rng.standard_normal(n) * 2).astype(dtype)
    seq[rng.random(n) < 0.2] = np.inf
    seq.sort()  # NaN last, as sort gives
    seq[n - int(rng.integers(0, 3)) :] = np.nan
    vals = np.round(rng.standard_normal((4, 5)) * 2).astype(dtype)
    vals[rng.random((4, 5)) < 0.3] = np.nan
    vals[0, :3] = [np.inf, -np.inf, -0.0]
    ts, ps = torch.tensor(seq), pr.tensor(seq)
    tv, pv = torch.tensor(vals), pr.tensor(vals)
    for to, po in [
        (torch.searchsorted(ts, tv.T, right=right), pr.searchsorted(ps, pv.T, right=right)),
        (torch.bucketize(tv, ts, right=right), pr.bucketize(pv, ps, right=right)),
        (torch.searchsorted(ts, float("nan")), pr.searchsorted(ps, float("nan"))),
    ]:
        np.testing.assert_array_equal(po.numpy(), to.numpy())


def test_isin_nan_in_test_elements(rng):
    a = np.round(rng.standard_normal((5, 7)) * 2).astype(np.float32)
    a[rng.random((5, 7)) < 0.2] = np.nan
    a[0, :2] = [np.inf, -np.inf]
    for test in (a[1:3], a[:, ::3], np.array([np.nan, np.inf, 0.0], np.float32)):
        to = torch.isin(torch.tensor(a).T, torch.tensor(test))
        po = pr.isin(pr.tensor(a).T, pr.tensor(test))
        np.testing.assert_array_equal(po.numpy(), to.numpy())


# ---- dtype= of sum/nansum/prod/cumsum casts each element first, as torch -------------------
def test_reduce_dtype_casts_elements_first(rng):
    a = (rng.standard_normal((7, 53)) * 30).astype(np.float32)
    t, p = torch.tensor(a), pr.tensor(a)
    for f in (
        lambda L, x: x.sum(dtype=L.float16),
        lambda L, x: x.T.sum(0, dtype=L.float16),
        lambda L, x: x.nansum(1, dtype=L.float16),
        lambda L, x: x[:, :5].prod(1, dtype=L.float16),
        lambda L, x: x.cumsum(1, dtype=L.float16),
    ):
        to, po = f(torch, t), f(pr, p)
        assert str(po.dtype) == "pyrite.float16"
        np.testing.assert_array_equal(po.numpy(), to.numpy())
    # bfloat16 (through ops/fallback.py's widening, which rounds the input first for these ops;
    # not prod: torch CPU's bf16 product rounds every partial product to bf16, pyrite's keeps
    # them in f32 and rounds once)
    for f in (
        lambda L, x: x.sum(dtype=L.bfloat16),
        lambda L, x: x.nansum(1, dtype=L.bfloat16),
        lambda L, x: x.cumsum(1, dtype=L.bfloat16),
        lambda L, x: x[:, :6].cumprod(1, dtype=L.bfloat16),
    ):
        to, po = f(torch, t), f(pr, p)
        assert str(po.dtype) == "pyrite.bfloat16"
        np.testing.assert_array_equal(po.float().numpy(), to.float().numpy())
    ints = rng.integers(-3, 4, (6, 9)).astype(np.int16)
    ints[0] = 0
    ints[0, :2] = [-1, 1]  # sums to 0 in int, True in bool
    ti, pi = torch.tensor(ints), pr.tensor(ints)
    for f in (
        lambda L, x: x.sum(1, dtype=L.bool),
        lambda L, x: x.T.sum(0, dtype=L.bool),
        lambda L, x: x.prod(0, dtype=L.bool),
        lambda L, x: x.float().sum(dtype=L.bool),
    ):
        to, po = f(torch, ti), f(pr, pi)
        np.testing.assert_array_equal(po.numpy(), to.numpy())


# ---- maximum/minimum/fmax/fmin/atan2 gradients: torch's tie, NaN and origin rules ----------
@pytest.mark.parametrize("op", ["maximum", "minimum", "fmax", "fmin", "atan2"])
def test_binary_minmax_atan2_grad_ties_nan(rng, op):
    a = np.round(rng.standard_normal((6, 5))).astype(np.float32)
    b = np.round(rng.standard_normal((5,))).astype(np.float32)
    a[0, :] = 0.0
    b[0] = 0.0  # ties (and atan2's origin)
    b[1] = np.nan
    a[2, 3] = np.nan
    w = rng.standard_normal((5, 6)).astype(np.float32)
    t, p = _pair(a, True)
    tb, pb = _pair(b, True)
    to = getattr(torch, op)(t.T, tb[:, None])
    po = getattr(pr, op)(p.T, pb[:, None])
    _close(po, to)
    (to * torch.tensor(w)).sum().backward()
    (po * pr.tensor(w)).sum().backward()
    _close(p.grad, t.grad)
    _close(pb.grad, tb.grad)


def test_dist(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    for p_ in (2, 1, 3.5, float("inf"), 0):
        t, p = _pair(a, True)
        to, po = (
            torch.dist(t.T, torch.tensor(b)[:, None], p_),
            pr.dist(p.T, pr.tensor(b)[:, None], p_),
        )
        _close(po, to, 1e-5)
        if p_ != 0:
            to.backward()
            po.backward()
            _close(p.grad, t.grad, 1e-5)
    _close(pr.tensor(a).dist(pr.tensor(b)), torch.tensor(a).dist(torch.tensor(b)), 1e-5)


def test_renorm_grad_zero_slice(rng):
    # a zero slice (within maxnorm) gets g, not the norm's 0/0 nan
    a = rng.standard_normal((5, 4)).astype(np.float32) * 2
    a[1] = 0.0
    a[3] = 0.05
    w = rng.standard_normal((4, 5)).astype(np.float32)
    for p_ in (2, 1, 3.0):
        t, p = _pair(a, True)
        to, po = torch.renorm(t.T, p_, 1, 1.0), pr.renorm(p.T, p_, 1, 1.0)
        _close(po, to)
        (to * torch.tensor(w)).sum().backward()
        (po * pr.tensor(w)).sum().backward()
        _close(p.grad, t.grad, 1e-5)
