"""Backward rules of the last ops without one (div's rounding modes, nextafter, angle, ldexp,
logaddexp, meshgrid/cartesian_prod, local_response_norm, mode, quantile, scatter_reduce,
digamma): each op's gradients against torch autograd on random inputs of awkward sizes, with
non-contiguous inputs, and torch's zeros or errors where torch gives them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from tests.test_grad_more_ops import check  # one gradient check for both files


def rnd(*shape, seed=0, lo=None, hi=None):
    rng = np.random.default_rng(seed + 31 * len(shape) + sum(shape))
    if lo is not None:
        return rng.uniform(lo, hi, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_div_rounding_modes_zero_gradients(mode):
    a, b = rnd(7, 3), rnd(3, seed=1, lo=0.5, hi=2.0)
    P, _ = check(
        lambda x, y: pr.div(x.transpose(0, 1), y[:, None], rounding_mode=mode),
        lambda x, y: torch.div(x.transpose(0, 1), y[:, None], rounding_mode=mode),
        [a, b],
    )
    assert not P[0].grad.numpy().any() and not P[1].grad.numpy().any()


def test_floor_divide_has_no_derivative_as_torch():
    x = pr.tensor(rnd(5)).requires_grad_()
    with pytest.raises(NotImplementedError):
        (x // 2.0).sum().backward()


def test_nextafter_angle():
    # torch 2.13's derivative is (grad, 0); torch < 2.13 has none, so the reference is built so
    ref = lambda a, b: torch.nextafter(a.detach(), b.detach()) + (a - a.detach()) + 0 * b  # noqa
    check(pr.nextafter, ref, [rnd(5, 3), rnd(3, seed=2)])
    check(lambda x: x.t().angle(), lambda x: x.t().angle(), [rnd(4, 7)])


def test_ldexp():
    check(pr.ldexp, torch.ldexp, [rnd(5, 3), rnd(3, seed=2)], terms=4)
    e = np.array([1, 0, 3], dtype=np.int32)
    check(
        lambda x: pr.ldexp(x.t(), pr.tensor(e)[:, None]),
        lambda x: torch.ldexp(x.t(), torch.tensor(e)[:, None]),
        [rnd(7, 3)],
    )


def test_ldexp_negative_int_exponent():
    # torch 2.13 computes this gradient as grad * 2**other in integers: 0 for a negative
    # integer exponent although the forward is x / 4. pyrite gives the true derivative 2^e.
    x = pr.tensor(rnd(4)).requires_grad_()
    pr.ldexp(x, pr.tensor([-2, -1, 0, 5])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.array([0.25, 0.5, 1.0, 32.0], np.float32))


def test_logaddexp():
    check(pr.logaddexp, torch.logaddexp, [rnd(5, 3), rnd(3, seed=2)], terms=4)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_cartesian_prod(indexing):
    arrays = [rnd(5), rnd(1, seed=3), rnd(3, seed=4)]
    check(
        lambda a, b, c: pr.meshgrid(a, b, c, indexing=indexing),
        lambda a, b, c: torch.meshgrid(a, b, c, indexing=indexing),
        arrays,
        terms=15,
    )
    check(
        lambda a, b: pr.meshgrid([a[::2], b], indexing=indexing),
        lambda a, b: torch.meshgrid([a[::2], b], indexing=indexing),
        arrays[::2],
        terms=5,
    )
    check(pr.cartesian_prod, torch.cartesian_prod, arrays, terms=15)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_local_response_norm(size):
    check(
        lambda x: F.local_response_norm(x.transpose(1, 2), size, alpha=0.3, beta=0.7, k=1.5),
        lambda x: TF.local_response_norm(x.transpose(1, 2), size, alpha=0.3, beta=0.7, k=1.5),
        [rnd(2, 3, 5, 2)],
        terms=4 * size,
    )


def test_mode():
    rng = np.random.default_rng(5)
    a = rng.integers(0, 3, (4, 7)).astype(np.float32)  # repeated values: a mode to find
    for dim, keepdim in [(-1, False), (0, True), (1, True)]:
        check(
            lambda x: pr.mode(x * 1.5, dim, keepdim)[0],
            lambda x: torch.mode(x * 1.5, dim, keepdim)[0],
            [a],
        )
    check(lambda x: x.t().mode(dim=0).values, lambda x: x.t().mode(dim=0).values, [a])


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(interp):
    a = rnd(5, 7)
    q = [0.0, 0.3, 0.55, 1.0]
    check(
        lambda x: pr.quantile(x.t(), pr.tensor(q), dim=1, interpolation=interp),
        lambda x: torch.quantile(x.t(), torch.tensor(q), dim=1, interpolation=interp),
        [a],
        terms=4,
    )
    check(
        lambda x: pr.quantile(x, 0.37, interpolation=interp),
        lambda x: torch.quantile(x, 0.37, interpolation=interp),
        [a],
    )
    b = a.copy()
    b[1, 2] = b[3, 0] = np.nan
    check(
        lambda x: pr.nanquantile(x, pr.tensor(q), dim=0, keepdim=True, interpolation=interp),
        lambda x: torch.nanquantile(x, torch.tensor(q), dim=0, keepdim=True, interpolation=interp),
        [b],
        terms=4,
    )


def test_digamma():
    rng = np.random.default_rng(11)
    a = np.concatenate(
        [rng.uniform(0.01, 30.0, 13), rng.uniform(-4.9, -0.1, 6), [1e-3, 0.5, 1.0, 2.0, 1e4]]
    ).astype(np.float32)
    check(pr.digamma, torch.digamma, [a], terms=64)
    check(lambda x: x.t().digamma(), lambda x: x.t().digamma(), [rnd(4, 3, lo=0.2, hi=9.0)], 64)
    # (at a negative integer pole pyrite gives inf, torch a huge finite value of its rounding)
    xs = pr.tensor([0.0, float("inf")]).requires_grad_()
    pr.digamma(xs).sum().backward()
    xt = torch.tensor([0.0, float("inf")], requires_grad=True)
    torch.digamma(xt).sum().backward()
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_gradients(rng, reduce, include_self):
    """torch's scatter_reduce backward: sum/mean through the counts, amax/amin shared among the
    elements equal to the result (distinct random values: no accidental ties), positions no
    index reaches. (src of index's shape: torch's own backward fails for a larger src.)"""
    x = rng.standard_normal((5, 7)).astype(np.float32)
    src = rng.standard_normal((4, 6)).astype(np.float32)
    index = rng.integers(0, 7, (4, 6))
    index[0, :3] = 2  # repeats into one target
    px, ps = pr.tensor(x).requires_grad_(), pr.tensor(src).requires_grad_()
    tx, ts = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    w = rng.standard_normal((5, 7)).astype(np.float32)
    po = pr.scatter_reduce(px, 1, pr.tensor(index), ps, reduce, include_self=include_self)
    to = torch.scatter_reduce(tx, 1, torch.tensor(index), ts, reduce, include_self=include_self)
    (po * pr.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(po.detach().numpy(), to.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ps.grad.numpy(), ts.grad.numpy(), rtol=1e-5, atol=1e-6)
