"""Gradient edge cases the differential gradient sweep found (tests/test_grad_sweep.py with new
seeds), each against torch CPU autograd: a value with leading size-1 dims assigned into fewer
dims, remainder/fmod's divisor gradient at quotients near an integer, x.T of a 0-d tensor, and
var/std with a correction at or past the element count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def test_setitem_value_with_leading_ones_backward(rng):
    """x[i, j] = v with v of shape (1,) or (1, 1): v's gradient is g[i, j] in v's shape."""
    for vshape in ((1,), (1, 1)):
        xa = rng.standard_normal((2, 17)).astype(np.float32)
        va = rng.standard_normal(vshape).astype(np.float32)
        w = rng.standard_normal((2, 17)).astype(np.float32)
        grads = []
        for L in (pr, torch):
            x, v = L.tensor(xa, requires_grad=True), L.tensor(va, requires_grad=True)
            y = x * 1
            y[-1, 14] = v
            (y * L.tensor(w)).sum().backward()
            grads.append((np.asarray(x.grad), np.asarray(v.grad)))
        (px, pv), (tx, tv) = grads
        np.testing.assert_array_equal(px, tx)
        assert pv.shape == tv.shape == vshape
        np.testing.assert_array_equal(pv, tv)


@pytest.mark.parametrize("op", ["remainder", "fmod"])
def test_divisor_gradient_uses_the_exact_rounded_quotient(rng, op):
    """d(a mod b)/db = -round(a / b) with the quotient rounded as the forward rounds it (exact),
    not round of the float32 a / b: integer dividends up to 2^15 over divisors whose quotients
    land within an ulp of an integer."""
    a = rng.integers(-32768, 32768, 4096).astype(np.int32)
    q = rng.integers(1, 40000, 4096)
    b = (a / q).astype(np.float32)  # a / b lands at or next to the integer q in float32
    b[b == 0] = 1.5
    g = rng.standard_normal(4096).astype(np.float32)
    grads = []
    for L in (pr, torch):
        tb = L.tensor(b, requires_grad=True)
        (getattr(L, op)(L.tensor(a), tb) * L.tensor(g)).sum().backward()
        grads.append(np.asarray(tb.grad))
    np.testing.assert_array_equal(grads[0], grads[1])


def test_T_of_a_0d_tensor_is_a_recorded_view():
    x = pr.tensor(2.5, requires_grad=True)
    with pytest.warns(UserWarning, match="0-D"):
        y = x.T
    assert y.grad_fn is not None
    (y * 3).backward()
    assert x.grad.item() == 3.0


@pytest.mark.parametrize("n,correction", [(1, 2), (2, 2), (1, 1), (3, 5), (4, 1)])
@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_backward_past_the_degrees_of_freedom(rng, n, correction, fn):
    """torch's rule: 2 / (n - correction) unclamped (infinite at n == correction, negative
    past it), NaN where the deviation is 0 and the factor infinite; never a Python error."""
    xa = rng.standard_normal(n).astype(np.float32)
    out = []
    for L in (pr, torch):
        x = L.tensor(xa, requires_grad=True)
        with pytest.warns(UserWarning) if n <= correction else _nothing():
            y = getattr(x, fn)(dim=-1, correction=correction)
        y.backward()
        out.append((float(y), np.asarray(x.grad)))
    (py, pg), (ty, tg) = out
    np.testing.assert_allclose(py, ty, rtol=1e-5, equal_nan=True)
    np.testing.assert_allclose(pg, tg, rtol=1e-5, atol=1e-6, equal_nan=True)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
