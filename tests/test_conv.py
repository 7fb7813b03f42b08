"""Convolution and pooling against torch.nn.functional in float64 on f32-rounded inputs.

conv tolerance per output: K·2⁻²⁴·Σ|w||x| over its window (K = C/groups·kh·kw terms, plus the
bias), computed by running the same conv on |x|, |w| in float64. Pools: max is exact, averages a
sum of ≤ kh·kw terms.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pyrite as pr
from pyrite.testing.tolerance import assert_close

EPS = 2.0**-24


def _f32(a):
    return a.astype(np.float32).astype(np.float64)


CONV2D = [
    # (N, C, H, W), (O, C/g, kh, kw), kwargs
    ((2, 3, 9, 11), (5, 3, 3, 3), {}),
    ((1, 4, 8, 7), (6, 2, 3, 2), {"groups": 2, "padding": 1, "stride": 2}),
    ((2, 6, 13, 10), (6, 1, 3, 3), {"groups": 6, "dilation": 2, "padding": (2, 1)}),
    ((1, 2, 7, 9), (4, 2, 4, 3), {"padding": "same", "dilation": (1, 2)}),
    ((3, 2, 5, 5), (3, 2, 5, 5), {"padding": "valid"}),
    ((2, 3, 17, 17), (65, 3, 3, 3), {"stride": (2, 3), "padding": (0, 2)}),
    ((3, 8, 8), (4, 3, 1, 1), {}),  # unbatched
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("xs,ws,kw", CONV2D, ids=[str(i) for i in range(len(CONV2D))])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv2d(xs, ws, kw, with_bias, rng):
    x, w = _f32(rng.standard_normal(xs)), _f32(rng.standard_normal(ws))
    b = _f32(rng.standard_normal(ws[0])) if with_bias else None
    T = lambda a: None if a is None else torch.tensor(a)
    P = lambda a: None if a is None else pr.tensor(a, dtype=pr.float32)
    want = F.conv2d(T(x), T(w), T(b), **kw).numpy()
    absref = F.conv2d(T(np.abs(x)), T(np.abs(w)), None if b is None else T(np.abs(b)), **kw).numpy()
    K = ws[1] * ws[2] * ws[3] + 1
    got = pr.conv2d(P(x), P(w), P(b), **kw)
    assert_close(got.numpy(), want, atol=K * EPS * absref + 1e-30, msg=str((xs, ws, kw)))


def test_conv2d_strided_input(rng):
    x = _f32(rng.standard_normal((2, 5, 9, 8)))
    w = _f32(rng.standard_normal((4, 5, 3, 3)))
    xp = pr.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), dtype=pr.float32).permute(
        0, 3, 1, 2
    )
    want = F.conv2d(torch.tensor(x), torch.tensor(w), padding=1).numpy()
    absref = F.conv2d(torch.tensor(np.abs(x)), torch.tensor(np.abs(w)), padding=1).numpy()
    got = pr.conv2d(xp, pr.tensor(w, dtype=pr.float32), padding=1)
    assert_close(got.numpy(), want, atol=45 * EPS * absref + 1e-30)


CONV1D = [
    ((2, 3, 17), (4, 3, 3), {}),
    ((1, 4, 20), (6, 2, 5), {"groups": 2, "padding": 2, "stride": 3, "dilation": 2}),
    ((3, 11), (2, 3, 4), {"padding": "same"}),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("xs,ws,kw", CONV1D, ids=[str(i) for i in range(len(CONV1D))])
def test_conv1d(xs, ws, kw, rng):
    x, w, b = (_f32(rng.standard_normal(s)) for s in (xs, ws, (ws[0],)))
    want = F.conv1d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw).numpy()
    absref = F.conv1d(
        torch.tensor(np.abs(x)), torch.tensor(np.abs(w)), torch.tensor(np.abs(b)), **kw
    ).numpy()
    got = pr.conv1d(*(pr.tensor(a, dtype=pr.float32) for a in (x, w, b)), **kw)
    assert_close(got.numpy(), want, atol=(ws[1] * ws[2] + 1) * EPS * absref + 1e-30)


POOL2D = [
    ((2, 3, 9, 11), {"kernel_size": 3}),
    ((1, 2, 10, 7), {"kernel_size": (3, 2), "stride": (2, 1), "padding": 1}),
    ((2, 2, 11, 13), {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ((3, 8, 9), {"kernel_size": 2, "stride": 3, "ceil_mode": True}),
]


@pytest.mark.parametrize("xs,kw", POOL2D, ids=[str(i) for i in range(len(POOL2D))])
def test_max_pool2d(xs, kw, rng):
    x = _f32(rng.standard_normal(xs))
    for dil in (1, 2):
        if dil == 2 and (np.array(kw["kernel_size"]) * 2 > np.array(xs[-2:])).any():
            continue
        w_out, w_idx = F.max_pool2d(torch.tensor(x), dilation=dil, return_indices=True, **kw)
        g_out, g_idx = pr.max_pool2d(
            pr.tensor(x, dtype=pr.float32), dilation=dil, return_indices=True, **kw
        )
        np.testing.assert_array_equal(g_out.numpy(), w_out.numpy())
        np.testing.assert_array_equal(g_idx.numpy(), w_idx.numpy())


@pytest.mark.parametrize("xs,kw", POOL2D, ids=[str(i) for i in range(len(POOL2D))])
@pytest.mark.parametrize("cip,div", [(True, None), (False, None), (True, 5)])
def test_avg_pool2d(xs, kw, cip, div, rng):
    x = _f32(rng.standard_normal(xs))
    want = F.avg_pool2d(torch.tensor(x), count_include_pad=cip, divisor_override=div, **kw).numpy()
    absref = F.avg_pool2d(
        torch.tensor(np.abs(x)), count_include_pad=cip, divisor_override=div, **kw
    ).numpy()
    got = pr.avg_pool2d(
        pr.tensor(x, dtype=pr.float32), count_include_pad=cip, divisor_override=div, **kw
    )
    assert_close(got.numpy(), want, atol=12 * EPS * absref + 1e-30, rtol=4 * EPS)


@pytest.mark.parametrize(
    "xs,os", [((2, 3, 9, 11), (4, 5)), ((1, 2, 7, 7), 3), ((2, 5, 6), (None, 4)), ((2, 3, 4, 4), 1)]
)
def test_adaptive_pool2d(xs, os, rng):
    x = _f32(rng.standard_normal(xs))
    want = F.adaptive_avg_pool2d(torch.tensor(x), os).numpy()
    got = pr.adaptive_avg_pool2d(pr.tensor(x, dtype=pr.float32), os)
    absref = F.adaptive_avg_pool2d(torch.tensor(np.abs(x)), os).numpy()
    assert_close(got.numpy(), want, atol=30 * EPS * absref + 1e-30, rtol=4 * EPS)
    w_out, w_idx = F.adaptive_max_pool2d(torch.tensor(x), os, return_indices=True)
    g_out, g_idx = pr.adaptive_max_pool2d(pr.tensor(x, dtype=pr.float32), os, return_indices=True)
    np.testing.assert_array_equal(g_out.numpy(), w_out.numpy())
    np.testing.assert_array_equal(g_idx.numpy(), w_idx.numpy())


def test_pool1d(rng):
    x = _f32(rng.standard_normal((2, 3, 17)))
    t, p = torch.tensor(x), pr.tensor(x, dtype=pr.float32)
    np.testing.assert_array_equal(
        pr.max_pool1d(p, 3, 2, 1).numpy(), F.max_pool1d(t, 3, 2, 1).numpy()
    )
    assert_close(
        pr.avg_pool1d(p, 4, 3, 2, ceil_mode=True).numpy(),
        F.avg_pool1d(t, 4, 3, 2, ceil_mode=True).numpy(),
        atol=1e-6,
        rtol=8 * EPS,
    )
    assert_close(
        pr.adaptive_avg_pool1d(p, 5).numpy(),
        F.adaptive_avg_pool1d(t, 5).numpy(),
        atol=1e-6,
        rtol=8 * EPS,
    )


def test_max_pool_nan():
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    x[0, 0, 1, 2] = np.nan
    want = F.max_pool2d(torch.tensor(x), 2).numpy()
    got = pr.max_pool2d(pr.tensor(x, dtype=pr.float32), 2).numpy()
    np.testing.assert_array_equal(got, want)


def test_many_outputs(rng):
    """Pool over more than 65,535 x 256 outputs would be slow here; check a grid past one
    dimension's 65,535 workgroups instead: 70,000 x 256 outputs of a 1x1 pool."""
    x = rng.standard_normal((70000, 256, 1, 1)).astype(np.float32)
    got = pr.avg_pool2d(pr.tensor(x), 1).numpy()
    np.testing.assert_array_equal(got, x)


def test_conv_errors():
    x, w = pr.ones(1, 3, 5, 5), pr.ones(4, 2, 3, 3)
    with pytest.raises(pr.ShapeError, match=r"\(1, 3, 5, 5\).*\(4, 2, 3, 3\)"):
        pr.conv2d(x, w)
    with pytest.raises(pr.ShapeError, match="smaller"):
        pr.conv2d(pr.ones(1, 2, 2, 2), w)
    with pytest.raises(ValueError, match="padding"):
        pr.conv2d(pr.ones(1, 2, 5, 5), w, padding="full")
    assert pr.conv2d(pr.ones(1, 2, 5, 5), w).shape == (1, 4, 3, 3)
