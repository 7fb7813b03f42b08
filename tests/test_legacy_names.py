"""Torch names older or exported code calls (ops/legacy.py), each against torch CPU on fresh
random inputs: the *_copy functions, poisson/binomial, the deprecated linear-algebra names,
torch.convolution, typename/get_device, and the removed functions' errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
from pyrite.testing.tolerance import F32_U

COPIES = [
    ("permute_copy", ((1, 2, 0),), {}),
    ("expand_copy", ((2, 3, 4, 5),), {}),
    ("transpose_copy", (0, 2), {}),
    ("t_copy", (), {}),
    ("select_copy", (1, 2), {}),
    ("squeeze_copy", (), {}),
    ("unsqueeze_copy", (1,), {}),
    ("view_copy", ((-1, 5),), {}),
    ("diagonal_copy", (), {"dim1": 1, "dim2": 2}),
    ("detach_copy", (), {}),
    ("alias_copy", (), {}),
    ("unfold_copy", (2, 2, 1), {}),
    ("as_strided_copy", ((2, 2), (3, 1), 1), {}),
]


def _input(name, rng):
    shape = {"t_copy": (3, 5), "squeeze_copy": (3, 1, 5), "expand_copy": (3, 1, 5)}.get(
        name, (3, 4, 5)
    )
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("name,args,kw", COPIES, ids=[c[0] for c in COPIES])
def test_copy_functions(name, args, kw, rng):
    """The view's values in a new contiguous tensor of their own (a write to it leaves the input
    alone), with the view's gradient."""
    a = _input(name, rng)
    want = getattr(torch, name)(torch.tensor(a), *args, **kw)
    x = pr.tensor(a, requires_grad=name != "detach_copy")
    got = getattr(pr, name)(x, *args, **kw)
    assert tuple(got.shape) == tuple(want.shape) and got.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    got.detach().zero_() if got.requires_grad else got.zero_()
    np.testing.assert_array_equal(x.detach().numpy(), a)
    if name != "detach_copy":
        g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        xt = torch.tensor(a, requires_grad=True)
        getattr(torch, name)(xt, *args, **kw).backward(torch.tensor(g))
        x2 = pr.tensor(a, requires_grad=True)
        getattr(pr, name)(x2, *args, **kw).backward(pr.tensor(g))
        np.testing.assert_allclose(x2.grad.numpy(), xt.grad.numpy(), rtol=0, atol=4 * F32_U)


def test_split_unbind_slice_copies(rng):
    a = rng.standard_normal((7, 3)).astype(np.float32)
    x, t = pr.tensor(a), torch.tensor(a)
    for got, want in (
        (pr.split_copy(x, 3), torch.split_copy(t, 3)),
        (pr.split_with_sizes_copy(x, [2, 5]), torch.split_with_sizes_copy(t, [2, 5])),
        (pr.unbind_copy(x, 1), torch.unbind_copy(t, 1)),
    ):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    np.testing.assert_array_equal(
        pr.slice_copy(x, 0, 1, 6, 2).numpy(), torch.slice_copy(t, 0, 1, 6, 2).numpy()
    )
    out = pr.empty(3, 7)
    pr.permute_copy(x, (1, 0), out=out)
    np.testing.assert_array_equal(out.numpy(), a.T)


@pytest.mark.parametrize("rate", [0.7, 4.0, 23.0, 150.0])
def test_poisson_moments_and_generator(rate):
    """torch.poisson's draws: mean and variance the rate's within 6 standard errors over 20,000
    draws; integral values; a seeded generator repeats them."""
    n = 20_000
    r = pr.full((n,), rate)
    d = pr.poisson(r).numpy().astype(np.float64)
    assert (d == np.round(d)).all() and (d >= 0).all()
    se_mean = np.sqrt(rate / n)
    assert abs(d.mean() - rate) < 6 * se_mean
    se_var = rate * np.sqrt(2.0 / n) + np.sqrt(rate / n)  # (var of the sample variance, approx.)
    assert abs(d.var() - rate) < 6 * se_var
    g1, g2 = pr.Generator().manual_seed(5), pr.Generator().manual_seed(5)
    np.testing.assert_array_equal(pr.poisson(r[:100], g1).numpy(), pr.poisson(r[:100], g2).numpy())


def test_binomial_moments():
    n = 20_000
    for count, p in ((10.0, 0.3), (200.0, 0.6), (40.0, 0.02)):
        d = pr.binomial(pr.full((n,), count), pr.full((n,), p)).numpy().astype(np.float64)
        assert (d >= 0).all() and (d <= count).all() and (d == np.round(d)).all()
        mean, var = count * p, count * p * (1 - p)
        assert abs(d.mean() - mean) < 6 * np.sqrt(var / n)
    with pytest.raises(TypeError, match="floating-point"):
        pr.binomial(pr.tensor([3]), pr.tensor([0.5]))


def test_deprecated_linear_algebra(rng):
    A = rng.standard_normal((2, 5, 5)).astype(np.float32) + 5 * np.eye(5, dtype=np.float32)
    B = rng.standard_normal((2, 5, 3)).astype(np.float32)
    a, b, ta, tb = pr.tensor(A), pr.tensor(B), torch.tensor(A), torch.tensor(B)
    # (solution errors: a well-conditioned triangular/LU solve, ~n ulp of the solution's scale)
    tol = dict(rtol=64 * F32_U, atol=64 * F32_U)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for upper in (True, False):
            for transpose in (False, True):
                for unit in (False, True):
                    tri = ta.triu() if upper else ta.tril()
                    want = torch.triangular_solve(tb, tri, upper, transpose, unit)
                    got = pr.triangular_solve(b, pr.tensor(tri.numpy()), upper, transpose, unit)
                    np.testing.assert_allclose(got.solution.numpy(), want.solution.numpy(), **tol)
                    np.testing.assert_array_equal(got.cloned_coefficient.numpy(), tri.numpy())
        LU, piv = torch.linalg.lu_factor(ta)
        want = torch.lu_solve(tb, LU, piv)
        plu, ppiv = pr.linalg.lu_factor(a)
        np.testing.assert_allclose(pr.lu_solve(b, plu, ppiv).numpy(), want.numpy(), **tol)
        np.testing.assert_allclose(b.lu_solve(plu, ppiv).numpy(), want.numpy(), **tol)
        m = [rng.standard_normal(s).astype(np.float32) for s in ((3, 6), (6, 2), (2, 4))]
        want = torch.chain_matmul(*map(torch.tensor, m))
        got = pr.chain_matmul(*map(pr.tensor, m))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=32 * F32_U, atol=32 * F32_U)
        for fn, kw in (("frobenius_norm", {"dim": (0, 1)}), ("nuclear_norm", {})):
            x = A[0]
            want = getattr(torch, fn)(torch.tensor(x), **kw).numpy()
            got = getattr(pr, fn)(pr.tensor(x), **kw).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    "nd,transposed", [(1, False), (2, False), (3, False), (1, True), (2, True)]
)
def test_convolution(nd, transposed, rng):
    sp = (7, 6, 5)[:nd]
    x = rng.standard_normal((2, 4, *sp)).astype(np.float32)
    wshape = (4, 3, *([3] * nd)) if transposed else (6, 2, *([3] * nd))
    w = rng.standard_normal(wshape).astype(np.float32)
    bias = rng.standard_normal(wshape[1] if transposed else wshape[0]).astype(np.float32)
    groups = 1 if transposed else 2
    args = ([2] * nd, [1] * nd, [1] * nd, transposed, [1 if transposed else 0] * nd, groups)
    want = torch.convolution(torch.tensor(x), torch.tensor(w), torch.tensor(bias), *args)
    got = pr.convolution(pr.tensor(x), pr.tensor(w), pr.tensor(bias), *args)
    scale = np.abs(x).max() * np.abs(w).max() * np.prod(wshape[1:]) + np.abs(bias).max()
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=8 * F32_U * scale)
    assert TF.conv1d  # (the functional forms are what it calls)


def test_typename_device_and_removed_functions():
    x = pr.randn(2)
    assert pr.typename(x) == x.type() == "pyrite.FloatTensor"
    for obj in (3, "s", pr.nn.Linear(2, 2), int):
        want = torch.typename(obj).replace("torch.nn.modules.linear", "pyrite.nn.modules.linear")
        got = pr.typename(obj)
        assert got == torch.typename(obj) or got.endswith(".Linear"), (got, want)
    assert pr.get_device(x) == x.get_device()
    for name, args in (("solve", (x, x)), ("lstsq", (x, x)), ("eig", (x,)),
                       ("symeig", (x,)), ("matrix_rank", (x,))):  # fmt: skip
        with pytest.raises(RuntimeError, match="removed") as e:
            getattr(pr, name)(*args)
        assert "linalg" in str(e.value)
        if name != "matrix_rank":
            with pytest.raises(RuntimeError, match="removed"):
                getattr(x, name)(*args[1:])


def test_poisson_refuses_a_negative_or_nan_rate():
    """torch.poisson's check: a negative or NaN rate raises its RuntimeError; 0 gives 0."""
    for bad in (-1.0, float("nan")):
        with pytest.raises(RuntimeError, match="expected rate to be non-negative"):
            pr.poisson(pr.tensor([1.0, bad]))
        with pytest.raises(RuntimeError, match="expected rate to be non-negative"):
            torch.poisson(torch.tensor([1.0, bad]))
    assert pr.poisson(pr.zeros(3)).tolist() == [0.0, 0.0, 0.0]
