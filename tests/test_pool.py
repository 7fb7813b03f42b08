"""Pools (ops/pool.py) against torch.nn.functional in float64 on f32-rounded inputs.

Max pools are exact (values and indices, NaN included); an average of n terms is within
(n + 1)·u·avg(|x|) (the sum's n·u·Σ|x| over the divisor, plus the division's rounding), so the
tolerance is that bound computed from the same pool of |x|. lp_pool composes pow, avg_pool and
pow: a few ulps on top. Loop budget: windows past 65,535 elements, and a tiny budget forced on
the device so every tile and merge path runs on small inputs.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.ops import pool as P
from pyrite.ops.spatial import box_loop_cost, fit_box
from pyrite.testing.tolerance import assert_close

U = 2.0**-24


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _dev(x, layout="c"):
    """x (float64 numpy) on the device as f32: contiguous, or a channels-last strided view."""
    if layout == "t" and x.ndim >= 3:
        perm = (0,) + tuple(range(2, x.ndim)) + (1,)
        back = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
        return pr.tensor(np.ascontiguousarray(x.transpose(perm)), dtype=pr.float32).permute(*back)
    return pr.tensor(x, dtype=pr.float32)


@pytest.fixture
def small_budget():
    """Make the device behave as one whose invocations may loop only a few dozen times."""
    dev = backend.current()
    before = dev._loop_budget
    dev._loop_budget = 16  # max_loop_iterations() = 8: tiles of <= 2 elements, merges of 8
    yield
    dev._loop_budget = before


MAX_CASES = [
    # (spatial dims, shape, kernel, stride, padding, dilation, ceil_mode)
    (1, (2, 3, 17), 3, 2, 1, 1, False),
    (1, (1, 2, 13), 4, 3, 2, 2, True),
    (1, (3, 11), 2, None, 0, 1, True),  # unbatched, default stride
    (2, (2, 3, 9, 11), 3, 2, 1, 1, False),
    (2, (1, 2, 10, 7), (3, 2), (2, 1), 1, (1, 2), False),
    (2, (2, 1, 11, 13), 3, 2, 1, 2, True),
    (2, (5, 8, 9), 2, 3, 0, 1, True),  # unbatched
    (2, (1, 1, 6, 1), (4, 2), (1, 3), (0, 1), (1, 2), True),  # windows holding no element
    (3, (2, 3, 5, 6, 7), 2, None, 0, 1, False),
    (3, (1, 2, 7, 5, 9), (3, 2, 3), (2, 1, 2), (1, 1, 0), (1, 2, 1), True),
    (3, (3, 4, 5, 6), 3, 1, 1, 1, False),  # unbatched
]


def _mp(dims):
    return (
        {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}[dims],
        {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims],
    )


@pytest.mark.parametrize("case", MAX_CASES, ids=[str(c[1]) for c in MAX_CASES])
@pytest.mark.parametrize("layout", ["c", "t"])
def test_max_pool(case, layout, rng):
    dims, shape, k, s, p, d, ceil = case
    x = _f32(rng.standard_normal(shape))
    x[rng.random(shape) < 0.05] = np.nan
    x[rng.random(shape) < 0.05] = -np.inf
    tf, pf = _mp(dims)
    want, wi = tf(torch.tensor(x), k, s, p, d, ceil, return_indices=True)
    got, gi = pf(_dev(x, layout), k, s, p, d, ceil, return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    assert gi.dtype is pr.int64
    np.testing.assert_array_equal(pf(_dev(x), k, s, p, d, ceil).numpy(), want.numpy())


def test_max_pool_nan_picks_last_nan():
    """PyTorch's CPU loop takes every NaN it meets: the index is the last NaN's."""
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = np.nan
    want, wi = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    got, gi = F.max_pool2d(_dev(x), 2, return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())


AVG_CASES = [
    ((2, 3, 17), 3, 2, 1, False),
    ((1, 2, 13), 4, 3, 2, True),
    ((2, 3, 9, 11), 3, 2, 1, False),
    ((2, 2, 11, 13), 3, 2, 1, True),
    ((3, 8, 9), 2, 3, 0, True),
    ((1, 2, 10, 7), (3, 2), (2, 1), 1, False),
    ((2, 2, 5, 6, 7), 3, 2, 1, True),
    ((1, 3, 4, 9, 5), (2, 3, 1), (1, 2, 1), (1, 1, 0), False),
]
_AVG_DIMS = {(2, 3, 17): 1, (1, 2, 13): 1, (3, 8, 9): 2}


AVG_PARAMS = [
    (case, cip, div)
    for case in AVG_CASES
    for cip, div in [(True, None), (False, None), (True, 5)]
    if div is None or _AVG_DIMS.get(case[0], len(case[0]) - 2) > 1  # avg_pool1d has none
]


@pytest.mark.parametrize("case,cip,div", AVG_PARAMS, ids=[str(i) for i in range(len(AVG_PARAMS))])
def test_avg_pool(case, cip, div, rng):
    shape, k, s, p, ceil = case
    dims = _AVG_DIMS.get(shape, len(shape) - 2)
    tf = {1: TF.avg_pool1d, 2: TF.avg_pool2d, 3: TF.avg_pool3d}[dims]
    pf = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[dims]
    kw = {} if dims == 1 else {"divisor_override": div}
    x = _f32(rng.standard_normal(shape))
    want = tf(torch.tensor(x), k, s, p, ceil, cip, **kw).numpy()
    absref = tf(torch.tensor(np.abs(x)), k, s, p, ceil, cip, **kw).numpy()
    n = math.prod(k) if isinstance(k, tuple) else k**dims
    got = pf(_dev(x, "t"), k, s, p, ceil, cip, **kw)
    assert_close(got.numpy(), want, atol=(n + 1) * U * absref + 1e-30, rtol=2 * U)


def test_pool_integer_inputs(rng):
    """Integer max and avg pools as PyTorch's (an average truncates toward zero)."""
    x = rng.integers(-50, 50, (2, 3, 7, 8))
    t = torch.tensor(x)
    p = pr.tensor(x, dtype=pr.int32)
    np.testing.assert_array_equal(F.max_pool2d(p, 3, 2, 1).numpy(), TF.max_pool2d(t, 3, 2, 1))
    got = F.avg_pool2d(p, 3, 2, 1, count_include_pad=False)
    np.testing.assert_array_equal(got.numpy(), TF.avg_pool2d(t, 3, 2, 1, count_include_pad=False))
    assert got.dtype is pr.int32
    with pytest.raises(TypeError, match="adaptive_avg_pool2d"):
        F.adaptive_avg_pool2d(p, 2)
    with pytest.raises(TypeError, match="max_pool2d"):
        F.max_pool2d(pr.ones(1, 1, 4, 4, dtype=pr.bool), 2)


def test_pool_float16(rng):
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float16)
    t = torch.tensor(x.astype(np.float64))
    p = pr.tensor(x)
    got = F.max_pool2d(p, 3, 2, 1)
    assert got.dtype is pr.float16
    np.testing.assert_array_equal(got.numpy().astype(np.float64), TF.max_pool2d(t, 3, 2, 1))
    want = TF.avg_pool2d(t, 3, 2, 1).numpy()
    assert_close(
        F.avg_pool2d(p, 3, 2, 1).numpy().astype(np.float64), want, atol=1e-6, rtol=2.0**-11
    )


ADAPTIVE = [
    ((2, 3, 17), 5),
    ((3, 10), (4,)),  # unbatched
    ((2, 1, 7), 11),  # output larger than the input
    ((2, 3, 9, 11), (4, 5)),
    ((1, 2, 7, 7), 3),
    ((2, 5, 6), (None, 4)),
    ((2, 3, 4, 4), 1),
    ((2, 2, 5, 9, 7), (2, 4, 3)),
    ((1, 3, 6, 5, 4), (None, 7, 1)),
]
_AD_DIMS = {(3, 10): 1, (2, 5, 6): 2}


@pytest.mark.parametrize("shape,osz", ADAPTIVE, ids=[str(a[0]) for a in ADAPTIVE])
def test_adaptive_pools(shape, osz, rng):
    dims = _AD_DIMS.get(shape, len(shape) - 2)
    ta = {1: TF.adaptive_avg_pool1d, 2: TF.adaptive_avg_pool2d, 3: TF.adaptive_avg_pool3d}[dims]
    pa = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[dims]
    tm = {1: TF.adaptive_max_pool1d, 2: TF.adaptive_max_pool2d, 3: TF.adaptive_max_pool3d}[dims]
    pm = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}[dims]
    x = _f32(rng.standard_normal(shape))
    want = ta(torch.tensor(x), osz).numpy()
    absref = ta(torch.tensor(np.abs(x)), osz).numpy()
    n = max(
        1,
        math.prod(
            -(-a // max(1, want.shape[i - len(shape)])) + 1
            for i, a in enumerate(shape[-dims:], start=len(shape) - dims)
        ),
    )
    assert_close(pa(_dev(x, "t"), osz).numpy(), want, atol=(n + 1) * U * absref + 1e-30, rtol=2 * U)
    wv, wi = tm(torch.tensor(x), osz, return_indices=True)
    gv, gi = pm(_dev(x), osz, return_indices=True)
    np.testing.assert_array_equal(gv.numpy(), wv.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())


def test_adaptive_output_zero():
    assert F.adaptive_avg_pool2d(pr.ones(1, 2, 5, 5), 0).shape == (1, 2, 0, 0)


@pytest.mark.parametrize("p", [2, 3, 1.5, math.inf, -math.inf])
def test_lp_pool(p, rng):
    for dims, shape in ((1, (2, 3, 10)), (2, (2, 3, 9, 10)), (3, (1, 2, 5, 6, 7))):
        a = _f32(rng.standard_normal(shape))
        if p == 1.5:
            a = np.abs(a)  # a fractional power of a negative number is NaN (in torch too)
        tf = {1: TF.lp_pool1d, 2: TF.lp_pool2d, 3: TF.lp_pool3d}[dims]
        pf = {1: F.lp_pool1d, 2: F.lp_pool2d, 3: F.lp_pool3d}[dims]
        if math.isinf(p):
            # max (min) of |x| a window, by definition; torch before 2.x's fix gave 1.0 here
            mp = {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}[dims]
            s = 1 if p > 0 else -1
            want = s * mp(s * torch.tensor(np.abs(a)), 3, 2, ceil_mode=True).numpy()
        else:
            want = tf(torch.tensor(a), p, 3, 2, ceil_mode=True).numpy()
        got = pf(_dev(a), p, 3, 2, ceil_mode=True).numpy()
        # pow (a few ulps), a sum of <= 27 terms, another pow; NaN where torch's is (negative
        # sums of odd powers to the 1/p)
        assert_close(got, want, atol=1e-30, rtol=64 * U, equal_nan=True)


# ---- the loop budget ---------------------------------------------------------------------------
def test_adaptive_avg_pool_past_loop_budget():
    """The issue's case: one window of 100,000 (lavapipe stopped at 65,535 and gave 0.655)."""
    got = F.adaptive_avg_pool2d(pr.ones(1, 1, 1, 100000), 1)
    assert got.item() == 1.0
    got = F.adaptive_avg_pool1d(pr.ones(2, 100003), 1)
    np.testing.assert_array_equal(got.numpy(), np.ones((2, 1), np.float32))


def test_max_pools_past_loop_budget(rng):
    x = _f32(rng.standard_normal((1, 2, 100003)))
    want, wi = TF.max_pool1d(torch.tensor(x), 70001, 29999, return_indices=True)
    got, gi = F.max_pool1d(_dev(x), 70001, 29999, return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    x2 = _f32(rng.standard_normal((1, 1, 300, 301)))
    want, wi = TF.adaptive_max_pool2d(torch.tensor(x2), 1, return_indices=True)
    got, gi = F.adaptive_max_pool2d(_dev(x2), 1, return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    want = TF.avg_pool3d(torch.tensor(x2[None]), (1, 300, 300)).numpy()
    got = F.avg_pool3d(_dev(x2[None]), (1, 300, 300)).numpy()
    assert_close(got, want, atol=90001 * U * np.abs(x2).mean() * 2, rtol=2 * U)
    if backend.current().loop_budget:
        assert P.LAST_PLAN[1] != (1, 1, 1)  # the window really was tiled


def test_deep_window_past_loop_budget(rng):
    """A window 30,001 deep and 1 x 1: each pass of the outer loop also pays the two inner
    loops' exit tests, so 30,001 passes cost 150,006 iterations untiled."""
    x = _f32(rng.standard_normal((1, 2, 30001, 1, 2)))
    want, wi = TF.max_pool3d(torch.tensor(x), (30001, 1, 1), return_indices=True)
    got, gi = F.max_pool3d(_dev(x), (30001, 1, 1), return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    want = TF.avg_pool3d(torch.tensor(x), (30001, 1, 1)).numpy()
    got = F.avg_pool3d(_dev(x), (30001, 1, 1)).numpy()
    assert_close(got, want, atol=30002 * U * np.abs(x).mean(axis=2, keepdims=True), rtol=2 * U)


def test_tiles_and_merge_rounds_under_a_tiny_budget(small_budget, rng):
    x = _f32(rng.standard_normal((2, 3, 9, 8, 10)))
    x[rng.random(x.shape) < 0.02] = np.nan
    t = torch.tensor(x)
    want, wi = TF.max_pool3d(t, (4, 3, 5), (2, 2, 3), (1, 1, 2), (2, 1, 1), True, True)
    got, gi = F.max_pool3d(_dev(x, "t"), (4, 3, 5), (2, 2, 3), (1, 1, 2), (2, 1, 1), True, True)
    assert P.LAST_PLAN[1] != (1, 1, 1) and P.LAST_PLAN[2] >= 2  # tiled in 3 dims, 2+ rounds
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    xa = _f32(rng.standard_normal((2, 3, 9, 8, 10)))
    for cip in (True, False):
        want = TF.avg_pool3d(torch.tensor(xa), (5, 3, 4), 2, (2, 1, 1), True, cip).numpy()
        absref = TF.avg_pool3d(torch.tensor(np.abs(xa)), (5, 3, 4), 2, (2, 1, 1), True, cip)
        got = F.avg_pool3d(_dev(xa), (5, 3, 4), 2, (2, 1, 1), True, cip).numpy()
        assert_close(got, want, atol=61 * U * absref.numpy(), rtol=2 * U)
    want, wi = TF.adaptive_max_pool2d(torch.tensor(xa[0]), (2, 3), True)
    got, gi = F.adaptive_max_pool2d(_dev(xa[0]), (2, 3), True)
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    want = TF.adaptive_avg_pool2d(torch.tensor(xa[0]), (2, 3)).numpy()
    assert_close(F.adaptive_avg_pool2d(_dev(xa[0]), (2, 3)).numpy(), want, atol=1e-6, rtol=4 * U)
    xi = rng.integers(-9, 9, (1, 2, 11, 13))
    got = F.avg_pool2d(pr.tensor(xi, dtype=pr.int32), 7, 3, 3, count_include_pad=False)
    want = TF.avg_pool2d(torch.tensor(xi), 7, 3, 3, count_include_pad=False)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_tile_plan_without_a_budget(monkeypatch):
    """On a GPU (no budget) a large window with few outputs is still tiled, for parallelism."""
    monkeypatch.setattr(P, "max_loop_iterations", lambda: P.UNBOUNDED)
    assert P._tile_plan((1, 7, 7), 10240) == (1, 7, 7)
    td, th, tw = P._tile_plan((1, 1024, 1024), 3)
    assert box_loop_cost(td, th, tw) <= P.GPU_MIN_TILE
    monkeypatch.setattr(P, "max_loop_iterations", lambda: 61439)
    t = P._tile_plan((1, 300, 301), 1)
    assert box_loop_cost(*t) <= 61439 and t != (1, 300, 301)
    for ext in ((1, 1, 10**6), (1, 10**6, 1), (10**6, 1, 1), (70, 80, 90), (3, 5, 7)):
        for limit in (9, 100, 61439):  # 9: the cost of a 1 x 1 x 1 tile
            t = fit_box(ext, limit)
            assert box_loop_cost(*t) <= limit and all(1 <= a <= b for a, b in zip(t, ext))


# ---- errors ------------------------------------------------------------------------------------
def test_pool_errors():
    x = pr.ones(1, 1, 5, 5)
    with pytest.raises(RuntimeError, match="too small"):
        F.max_pool2d(pr.ones(1, 1, 2, 2), 3)
    with pytest.raises(pr.ShapeError, match="too small"):
        F.avg_pool2d(pr.ones(1, 1, 2, 2), 3)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="stride should be greater than zero"):
        F.max_pool2d(x, 2, stride=0)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero"):
        F.max_pool2d(x, 2, dilation=0)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError, match=r"4D \(unbatched\) or 5D"):
        F.max_pool3d(pr.ones(2, 3, 3), 2)
    with pytest.raises(RuntimeError, match="kernel_size"):
        F.max_pool2d(x, (2, 2, 2))
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d\(\): expected a 3D or 4D"):
        F.adaptive_avg_pool2d(pr.ones(5), 2)
    with pytest.raises(RuntimeError, match="greater than or equal to 0"):
        F.adaptive_avg_pool2d(x, -1)
    with pytest.raises(RuntimeError, match="output_size must be 2"):
        F.adaptive_avg_pool2d(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="non-zero size"):
        F.adaptive_avg_pool2d(pr.ones(1, 1, 0, 5), 2)


def test_max_unpool(rng):
    """max_unpool puts every value back at its max_pool index, zeros elsewhere."""
    for dims, shape, k, s, p, osz in (
        (1, (3, 11), 2, None, 0, None),
        (2, (2, 3, 7, 9), 3, 2, 1, (7, 9)),
        (2, (1, 2, 8, 8), 2, None, 0, None),
        (3, (1, 2, 4, 5, 6), 2, None, 0, (1, 2, 5, 5, 7)),
    ):
        x = _f32(rng.standard_normal(shape))
        tp = {1: TF.max_pool1d, 2: TF.max_pool2d, 3: TF.max_pool3d}[dims]
        tu = {1: TF.max_unpool1d, 2: TF.max_unpool2d, 3: TF.max_unpool3d}[dims]
        pp = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[dims]
        pu = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[dims]
        o, i = tp(torch.tensor(x), k, s, p, return_indices=True)
        po, pi = pp(_dev(x), k, s, p, return_indices=True)
        want = tu(o, i, k, s, p, output_size=osz).numpy()
        np.testing.assert_array_equal(pu(po, pi, k, s, p, output_size=osz).numpy(), want)
    with pytest.raises(ValueError, match="invalid output_size"):
        F.max_unpool2d(
            pr.ones(1, 1, 2, 2), pr.zeros(1, 1, 2, 2, dtype=pr.int32), 2, output_size=(9, 9)
        )
    with pytest.raises(TypeError, match="indices"):
        F.max_unpool2d(pr.ones(1, 1, 2, 2), pr.ones(1, 1, 2, 2), 2)
    with pytest.raises(IndexError, match="out of bounds"):
        F.max_unpool2d(pr.ones(1, 1, 2, 2), pr.full((1, 1, 2, 2), 99, dtype=pr.int32), 2)


_NEST = """
@group(0) @binding(0) var<storage, read_write> out: array<i32>;
@group(0) @binding(1) var<storage, read> info: array<i32>;
@compute @workgroup_size(1)
fn main() {
  var c = 0;
  for (var a = 0; a < info[0]; a++) {
    for (var b = 0; b < info[1]; b++) { for (var k = 0; k < info[2]; k++) { c++; } }
  }
  out[0] = c;
}
"""


def test_loop_cost_model_on_the_device():
    """The tiles fit_box picks for lavapipe's 65,535-iteration budget run to completion there:
    a three-level nest that counts its innermost iterations reaches td·th·tw (on a device
    without a budget it always does)."""
    from pyrite.kernels.common import KernelSource
    from pyrite.ops.core import empty

    dev = backend.current()
    for ext in ((10**5, 1, 1), (1, 10**5, 1), (1, 1, 10**5), (10**3, 7, 3), (5, 10**3, 9)):
        t = fit_box(ext, 65535)
        o = empty((1,), pr.int32)
        dev.dispatch(KernelSource(_NEST, "w"), [o._storage.buffer], list(t), (1, 1, 1))
        assert int(o.numpy()[0]) == math.prod(t), (ext, t)


FRACTIONAL = [
    # (dims, shape, kernel, output_size, output_ratio)
    (2, (2, 3, 11, 13), 3, (5, 6), None),
    (2, (1, 2, 7, 7), 2, (6, 3), None),
    (2, (3, 9, 10), (2, 3), None, (0.5, 0.7)),  # unbatched
    (3, (1, 2, 7, 8, 9), 2, (3, 4, 5), None),
    (3, (2, 5, 6, 7), (2, 1, 3), None, 0.5),  # unbatched
]


@pytest.mark.parametrize("case", FRACTIONAL, ids=[str(f[1]) for f in FRACTIONAL])
def test_fractional_max_pool(case, rng):
    """With the same _random_samples, the windows, values and indices are PyTorch's."""
    dims, shape, k, osz, ratio = case
    x = _f32(rng.standard_normal(shape))
    x[rng.random(shape) < 0.03] = -np.inf
    nb = 1 if len(shape) == dims + 1 else shape[0]
    u = rng.random((nb, shape[-dims - 1], dims)).astype(np.float32)
    tf = {2: TF.fractional_max_pool2d, 3: TF.fractional_max_pool3d}[dims]
    pf = {2: F.fractional_max_pool2d, 3: F.fractional_max_pool3d}[dims]
    want, wi = tf(torch.tensor(x, dtype=torch.float32), k, osz, ratio, True, torch.tensor(u))
    got, gi = pf(_dev(x, "t"), k, osz, ratio, True, pr.tensor(u))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    got = pf(_dev(x), k, osz, ratio)  # samples drawn by pyrite: the shape and membership
    assert got.shape == tuple(want.shape)
    assert np.isin(got.numpy(), x).all()


def test_fractional_max_pool_errors():
    x = pr.ones(1, 1, 5, 5)
    with pytest.raises(RuntimeError, match="pool height 3 too large relative to input height 5"):
        F.fractional_max_pool2d(x, 3, 4)
    with pytest.raises(ValueError, match="either an output_size or an output_ratio"):
        F.fractional_max_pool2d(x, 2)
    with pytest.raises(RuntimeError, match="_random_samples"):
        F.fractional_max_pool2d(x, 2, 2, _random_samples=pr.rand(1, 1, 3))


def test_pool_empty_inputs():
    assert F.max_pool2d(pr.ones(0, 3, 5, 5), 2).shape == (0, 3, 2, 2)
    assert F.avg_pool3d(pr.ones(0, 2, 4, 4, 4), 2).shape == (0, 2, 2, 2, 2)
    assert F.adaptive_avg_pool2d(pr.ones(0, 3, 5, 5), 1).shape == (0, 3, 1, 1)
    with pytest.raises(RuntimeError, match="optional 0 dim batch size"):
        F.max_pool1d(pr.ones(2, 0, 5), 2)


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_avg_pool3d_input_smaller_than_kernel():
    # torch checks avg_pool3d's input against the kernel without the padding
    x = pr.zeros(1, 1, 8, 2, 2)
    with pytest.raises(RuntimeError, match="smaller than kernel size"):
        F.avg_pool3d(x, (3, 1, 3), padding=(0, 0, 1))
    want = TF.max_pool3d(torch.zeros(1, 1, 8, 2, 2), (3, 1, 3), padding=(0, 0, 1)).shape
    assert F.max_pool3d(x, (3, 1, 3), padding=(0, 0, 1)).shape == want  # max_pool3d: no check
