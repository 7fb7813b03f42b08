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
