"""Conformance with torch 2.13 CPU (session 39): logcumsumexp's -0.0, out= dtypes that torch
refuses for amax / amin / cummax / cummin / logcumsumexp, cumsum_ / cumprod_ with another dtype,
a tuple dim for prod / argmax / argmin, and a None or float dim for the scans. Each case runs
torch first and asserts pyrite gives the same values or the same exception class."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.oracle import older_torch_mark

_T = {pr.float32: torch.float32, pr.float16: torch.float16, pr.bfloat16: torch.bfloat16}


def _pair(rng, shape, dtype=pr.float32):
    a = rng.standard_normal(shape).astype(np.float32)
    t = torch.from_numpy(a).to(_T[dtype])
    return pr.tensor(a).to(dtype), t


def _raises_like(tfn, pfn):
    """pyrite raises an instance of the class torch raised."""
    with pytest.raises(Exception) as te:
        tfn()
    with pytest.raises(type(te.value)):
        pfn()


@pytest.fixture
def rng():
    return np.random.default_rng(39)


# ---- 1. logcumsumexp of -0.0 ----------------------------------------------------------------
@pytest.mark.parametrize("dtype", [pr.float32, pr.float16, pr.bfloat16])
def test_logcumsumexp_negative_zero(rng, dtype):
    a = rng.standard_normal((3, 5)).astype(np.float32)
    a[:, 0] = -0.0
    a[1, 2] = -0.0
    a[2, :2] = [-np.inf, -0.0]
    t = torch.from_numpy(a).to(_T[dtype])
    p = pr.tensor(a).to(dtype)
    for d in (1, 0):
        want = torch.logcumsumexp(t, d).float().numpy()
        got = pr.logcumsumexp(p, d).float().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)
        assert (np.signbit(got) == np.signbit(want)).all()
    one = torch.logcumsumexp(torch.tensor([-0.0]).to(_T[dtype]), 0)
    got = pr.logcumsumexp(pr.tensor([-0.0]).to(dtype), 0).float().numpy()
    assert np.signbit(got).tolist() == np.signbit(one.float().numpy()).tolist() == [False]
    # a 0-d tensor is returned as a copy by both: -0.0 stays
    z = pr.logcumsumexp(pr.tensor(-0.0).to(dtype), 0).float().item()
    zt = torch.logcumsumexp(torch.tensor(-0.0).to(_T[dtype]), 0).float().item()
    assert np.signbit(z) == np.signbit(zt)


# ---- 2. out= of a dtype torch refuses ------------------------------------------------------
@pytest.mark.parametrize("name", ["amax", "amin", "logcumsumexp"])
@pytest.mark.parametrize(
    "xdt,odt", [(pr.float32, pr.float16), (pr.float16, pr.float32), (pr.float32, pr.bfloat16)]
)
def test_out_dtype_refused(rng, name, xdt, odt):
    p, t = _pair(rng, (3, 4), xdt)
    _raises_like(
        lambda: getattr(torch, name)(t, 0, out=torch.empty(4, dtype=_T[odt])),
        lambda: getattr(pr, name)(p, 0, out=pr.empty(4, dtype=odt)),
    )


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("xdt,odt", [(pr.float32, pr.float16), (pr.float16, pr.float32)])
def test_cum_extreme_out_dtype_refused(rng, name, xdt, odt):
    p, t = _pair(rng, (3, 4), xdt)
    _raises_like(
        lambda: getattr(torch, name)(
            t, 1, out=(torch.empty(3, 4, dtype=_T[odt]), torch.empty(3, 4, dtype=torch.long))
        ),
        lambda: getattr(pr, name)(
            p, 1, out=(pr.empty(3, 4, dtype=odt), pr.empty(3, 4, dtype=pr.long))
        ),
    )
    # indices of another int type
    _raises_like(
        lambda: getattr(torch, name)(
            t, 1, out=(torch.empty(3, 4, dtype=t.dtype), torch.empty(3, 4, dtype=torch.int16))
        ),
        lambda: getattr(pr, name)(
            p, 1, out=(pr.empty(3, 4, dtype=xdt), pr.empty(3, 4, dtype=pr.int16))
        ),
    )


@pytest.mark.parametrize("name", ["amax", "amin", "logcumsumexp", "cummax", "cummin"])
def test_out_dtype_matching_still_written(rng, name):
    p, t = _pair(rng, (3, 4))
    if name in ("cummax", "cummin"):
        tv, ti = torch.empty(3, 4), torch.empty(3, 4, dtype=torch.long)
        pv, pi = pr.empty(3, 4), pr.empty(3, 4, dtype=pr.long)
        getattr(torch, name)(t, 1, out=(tv, ti))
        getattr(pr, name)(p, 1, out=(pv, pi))
        np.testing.assert_allclose(pv.numpy(), tv.numpy(), rtol=1e-6)
        np.testing.assert_array_equal(pi.numpy(), ti.numpy())
        return
    shape = (3, 4) if name == "logcumsumexp" else (4,)
    to, po = torch.empty(shape), pr.empty(shape)
    getattr(torch, name)(t, 0, out=to)
    r = getattr(pr, name)(p, 0, out=po)
    assert r is po
    np.testing.assert_allclose(po.numpy(), to.numpy(), rtol=1e-5, atol=1e-6)


# ---- 3. cumsum_ / cumprod_ with another dtype ------------------------------------------------
@pytest.mark.parametrize("name", ["cumsum_", "cumprod_"])
@pytest.mark.parametrize(
    "xdt,odt", [(pr.float16, pr.float32), (pr.float32, pr.float16), (pr.bfloat16, pr.float16)]
)
def test_inplace_scan_dtype_refused(rng, name, xdt, odt):
    p, t = _pair(rng, (6,), xdt)
    _raises_like(lambda: getattr(t, name)(0, dtype=_T[odt]), lambda: getattr(p, name)(0, dtype=odt))
    np.testing.assert_array_equal(p.float().numpy(), t.float().numpy())  # left unchanged


@pytest.mark.parametrize("name", ["cumsum_", "cumprod_"])
def test_inplace_scan_own_dtype(rng, name):
    p, t = _pair(rng, (7,), pr.float16)
    getattr(t, name)(0, dtype=torch.float16)
    getattr(p, name)(0, dtype=pr.float16)
    np.testing.assert_allclose(p.float().numpy(), t.float().numpy(), rtol=1e-2, atol=1e-2)


# ---- 4. a tuple dim for prod / argmax / argmin ----------------------------------------------
@pytest.mark.parametrize("name", ["prod", "argmax", "argmin"])
@pytest.mark.parametrize("dim", [(0,), [1], (0, 1)])
def test_tuple_dim_refused(rng, name, dim):
    p, t = _pair(rng, (3, 4))
    _raises_like(lambda: getattr(torch, name)(t, dim=dim), lambda: getattr(pr, name)(p, dim=dim))
    _raises_like(lambda: getattr(t, name)(dim), lambda: getattr(p, name)(dim))


@pytest.mark.parametrize("name", ["prod", "argmax", "argmin"])
def test_int_dim_still_works(rng, name):
    p, t = _pair(rng, (3, 4))
    for d in (0, -1, np.int64(1)):
        want = getattr(torch, name)(t, dim=int(d)).numpy()
        got = getattr(pr, name)(p, dim=d).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5)


# ---- 5. a None or float dim for the scans ----------------------------------------------------
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"])
@pytest.mark.parametrize(
    "dim",
    [
        pytest.param(None, marks=older_torch_mark("refuses dim=None with RuntimeError")),
        0.0,
        1.5,
        True,
    ],
)
def test_scan_non_int_dim_refused(rng, name, dim):
    p, t = _pair(rng, (3, 4))
    _raises_like(lambda: getattr(torch, name)(t, dim), lambda: getattr(pr, name)(p, dim))
    _raises_like(lambda: getattr(t, name)(dim), lambda: getattr(p, name)(dim))
    if name in ("cumsum", "cumprod"):
        _raises_like(lambda: getattr(t, name + "_")(dim), lambda: getattr(p, name + "_")(dim))
