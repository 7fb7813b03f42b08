"""Numerics at the edges against torch: extreme ranges, near 0 and 1, near overflow, subnormals,
±inf, NaN, -0.0 (elementwise math, pow), each found silently wrong once.

The reference is torch float64 of the same float32 inputs (pyrite's float64 is float32); the
tolerance is a few float32 ULP at the reference (`_ulps`), the kernels' measured accuracy plus
the one rounding of the result, or exact agreement where the answer is a special value. On a
device that flushes subnormals (the H100) `_device_ulps` judges what it can represent: a
subnormal input may read as 0 there, and a subnormal result is written as 0
(tests/oracle.device_error); elsewhere it is `_ulps` itself.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.oracle import device_error

SUBNORMALS = (1e-45, 1e-40, 1.17e-38)


def _ulps(got, want):
    """|got - want| in units of the float32 spacing at want (subnormal spacing at least); 0
    where both are the same infinity."""
    with np.errstate(over="ignore"):  # (a want past float32's range: its spacing is inf)
        want32 = want.astype(np.float32)
    spacing = np.maximum(np.spacing(np.abs(want32)), np.float32(2.0**-149)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.abs(got.astype(np.float64) - want) / spacing
    return np.where(got == want, 0.0, err)


def _device_ulps(got, oracle, *inputs):
    """_ulps(got, oracle(*inputs)) as this device can be held to it (tests/oracle.device_error):
    on one that flushes subnormals, also against the oracle of the flushed inputs, and 0 where
    the oracle's result is subnormal."""

    def err_of(*args):
        want = np.asarray(oracle(*args))
        return _ulps(got, want), want

    return device_error(err_of, *inputs)


def _ref(fn, x, *args):
    return fn(torch.tensor(np.asarray(x, np.float32).astype(np.float64)), *args).numpy()


def _same_specials(got, want):
    """NaN where torch has NaN, the same infinities, and the sign of a zero result."""
    want32 = want.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want32))
    inf = np.isinf(want32) | np.isinf(got)
    assert np.array_equal(got[inf], want32[inf])
    zero = want32 == 0
    assert np.array_equal(np.signbit(got[zero]), np.signbit(want32[zero]))


# ---- log, log2, log10: WGSL's log is 2^-21 absolute near 1 and misread subnormals -------------


@pytest.mark.parametrize("name", ["log", "log2", "log10"])
def test_log_near_one_and_subnormal(name):
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            1.0 + rng.uniform(-1e-3, 1e-3, 4000),  # log(0.99999946) was 10 % off
            np.exp(rng.uniform(np.log(1e-45), np.log(3e38), 4000)),
            SUBNORMALS,  # log(1e-45) was -88.03, not -103.28
            (0.9999, 1.0 - 2.0**-24, 1.0 + 2.0**-23, 2.0, 8.0, 1000.0),
        ]
    ).astype(np.float32)
    got = getattr(pr, name)(pr.tensor(x)).numpy()
    want = _ref(getattr(torch, name), x)
    assert _ulps(got, want).max() <= 2.0
    assert (
        getattr(pr, name)(pr.tensor([8.0])).item() == getattr(torch, name)(torch.tensor(8.0)).item()
    )


def test_log_specials():
    x = np.array([0.0, -0.0, -1e-40, -1.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
    for name in ("log", "log2", "log10"):
        got = getattr(pr, name)(pr.tensor(x)).numpy()
        _same_specials(got, _ref(getattr(torch, name), x))


@pytest.mark.parametrize(
    "name,lo,hi",
    [
        ("exp", -103.0, 88.7),  # WGSL exp is 3 + 2|x| ULP: 63 ULP at -86.7
        ("expm1", -20.0, 88.7),
        ("sigmoid", -100.0, 100.0),  # sigmoid(-87.3) was 0, torch 1.2e-38
    ],
)
def test_exp_family_whole_range(name, lo, hi):
    x = np.random.default_rng(1).uniform(lo, hi, 20000).astype(np.float32)
    got = getattr(pr, name)(pr.tensor(x)).numpy()
    # (exp(-103) and sigmoid(-100) are subnormal: 0 where the device flushes them)
    assert _device_ulps(got, lambda x: _ref(getattr(torch, name), x), x).max() <= 3.0


def test_log_based_special_functions():
    # entr near 1, logit and lgamma at subnormals (lgamma(1e-40) was inf: 1 / x overflowed)
    # (where subnormals are flushed, entr(1.17e-38) and logit(1e-40) may be those of 0)
    x = np.array([0.9999, 1 - 1e-5, 0.5, *SUBNORMALS], np.float32)
    entr = pr.special.entr(pr.tensor(x)).numpy()
    assert _device_ulps(entr, lambda x: _ref(torch.special.entr, x), x).max() <= 3
    logit = pr.logit(pr.tensor(x)).numpy()
    assert _device_ulps(logit, lambda x: _ref(torch.logit, x), x).max() <= 4
    y = np.array([*SUBNORMALS, -1e-40, 1e-8, -1e-8], np.float32)
    lgamma = pr.lgamma(pr.tensor(y)).numpy()
    assert _device_ulps(lgamma, lambda y: _ref(torch.lgamma, y), y).max() <= 2
    a = np.array([2.0, 3.0], np.float32)
    b = np.array([0.9999, 1e-40], np.float32)
    xlogy = pr.xlogy(pr.tensor(a), pr.tensor(b)).numpy()

    def want(a, b):
        a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
        return torch.xlogy(a, b).numpy()

    assert _device_ulps(xlogy, want, a, b).max() <= 3


def test_bessel_i0_i1_near_overflow():
    # e^x overflows past 88.72 while i0(x) ~ e^x / sqrt(2 pi x) is still finite up to ~91
    x = np.array([80.5, 88.8, 89.0, 90.0, -89.0], np.float32)
    assert _ulps(pr.i0(pr.tensor(x)).numpy(), _ref(torch.i0, x)).max() <= 6
    assert _ulps(pr.special.i1(pr.tensor(x)).numpy(), _ref(torch.special.i1, x)).max() <= 6


def test_odd_functions_keep_negative_zero():
    x = pr.tensor([-0.0, 0.0])
    for name in ("tan", "atan", "asin", "sinh", "asinh", "atanh", "tanh", "erf", "sin"):
        got = getattr(pr, name)(x).numpy()
        want = getattr(torch, name)(torch.tensor([-0.0, 0.0])).numpy()
        assert np.array_equal(np.signbit(got), np.signbit(want)), name
    assert pr.special.ndtri(pr.tensor([-0.0])).item() == float("-inf")  # was nan


# ---- pow: exp2(y·log2 x) in f32 was |y·log2 x|·2^-24 relative off -----------------------------


@pytest.mark.parametrize(
    "xlo,xhi,ylo,yhi",
    [(0.9, 1.1, -1000.0, 1000.0), (0.5, 2.0, -100.0, 100.0), (1e-30, 1e30, -3.0, 3.0)],
)
def test_pow_accuracy(xlo, xhi, ylo, yhi):
    rng = np.random.default_rng(2)
    x = np.exp(rng.uniform(np.log(xlo), np.log(xhi), 20000)).astype(np.float32)
    y = rng.uniform(ylo, yhi, 20000).astype(np.float32)
    got = pr.pow(pr.tensor(x), pr.tensor(y)).numpy()
    want = _pow64(x, y)
    normal = np.abs(want) < 3.4e38
    err = _device_ulps(got, _pow64, x, y)  # (a result below 2^-126: 0 where flushed)
    assert err[normal].max() <= 3.0  # 0.95 ** 911 was 1591 ULP off


def _pow64(x, y):
    x, y = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    return torch.pow(x, y).numpy()


def test_pow_integer_exponents_and_subnormals():
    x = np.array([-2.5, 3.0, -3.0, 1e20, 10.0, -1.1, 1.1, 1e-40, 1e-40, -1.0], np.float32)
    y = np.array([-100.0, -88.0, 5.0, -2.0, 7.0, 63.0, 64.0, 0.3, -0.5, 3e38], np.float32)
    got = pr.pow(pr.tensor(x), pr.tensor(y)).numpy()
    # (-2.5) ** -100 was 0, 1e-40 ** 0.3 3.4x off (on a flushing device the subnormal results
    # are 0, and 1e-40 ** 0.3 is 1e-12 still: pow takes x's exponent from its bits)
    assert _device_ulps(got, _pow64, x, y).max() <= 1.0
    ints = np.array([3.0, 10.0, -7.0, 1.5], np.float32)
    for e in (3, 5, 7, 12, -3):  # exactly representable powers stay exact
        got = (pr.tensor(ints) ** pr.tensor(np.full(4, e, np.float32))).numpy()
        assert np.array_equal(got, (torch.tensor(ints, dtype=torch.float64) ** e).float().numpy())


def test_logit_eps_above_half_and_logaddexp_tail():
    # torch clamps as x < lo ? lo : (x > hi ? hi : x): with eps > 1/2 values below lo become lo
    x = [0.0, 0.3, 0.5, 1.0]
    for eps in (0.1, 0.4, 0.7):
        got = pr.logit(pr.tensor(x), eps=eps).numpy()
        want = torch.logit(torch.tensor(x), eps=eps).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # log1p(e^-88) is 6.05e-39 (subnormal e^-88 was flushed: 0), log1p(e^-87) 1.65e-38 (on a
    # device that flushes subnormals, the first is 0 and only the second is judged)
    a = np.zeros(2, np.float32)
    b = np.array([-88.0, -87.0], np.float32)
    got = pr.logaddexp(pr.tensor(a), pr.tensor(b)).numpy()
    want = _ref(lambda t: torch.logaddexp(t, torch.tensor(b, dtype=torch.float64)), a)
    assert _device_ulps(got, lambda a: want, a).max() <= 2


@pytest.mark.parametrize("name", ["max", "min"])
def test_full_max_min_gradient_with_nan(name):
    # torch's evenly_distribute_backward: a NaN result's gradient goes to the NaN elements
    for xs in ([1.0, float("nan"), 2.0], [float("nan"), float("nan"), 1.0], [3.0, 1.0, 3.0]):
        xt = torch.tensor(xs, requires_grad=True)
        xp = pr.tensor(xs, requires_grad=True)
        getattr(xt, name)().backward()
        getattr(xp, name)().backward()
        np.testing.assert_array_equal(xp.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("shape", [(0, 0), (2, 0, 0), (2, 0, 3), (2, 3, 0)])
def test_matrix_norm_and_cond_of_empty_matrices(shape):
    # torch: the 2-norm, 1-norm and inf-norm of an empty matrix are 0 (they raised IndexError)
    for ord in (2, -2, "nuc", 1, -1, float("inf"), "fro"):
        try:
            want = torch.linalg.matrix_norm(torch.zeros(shape), ord).numpy()
        except IndexError:
            with pytest.raises(IndexError):
                pr.linalg.matrix_norm(pr.zeros(shape), ord)
            continue
        np.testing.assert_array_equal(pr.linalg.matrix_norm(pr.zeros(shape), ord).numpy(), want)
    if shape[-1] == shape[-2]:
        for p in (None, -2, "fro", 1):
            want = torch.linalg.cond(torch.zeros(shape), p).numpy()
            np.testing.assert_array_equal(pr.linalg.cond(pr.zeros(shape), p).numpy(), want)
