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


def _grads_of(lib, f, arrays, w_seed):
    ts = [lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_() for a in arrays]
    out = f(lib, *ts)
    w = np.random.default_rng(w_seed).standard_normal(tuple(out.shape))
    (out * lib.tensor(w.astype(np.float32) if lib is pr else w)).sum().backward()
    return [t.grad.numpy() for t in ts]


@pytest.mark.parametrize(
    "f,shapes",
    [
        (lambda L, x: (x * 2).fill_diagonal_(0.5), [(3, 4)]),
        (lambda L, x: (x * 2).fill_diagonal_(0.5, wrap=True), [(7, 3)]),
        (lambda L, x, s: x.put(L.tensor([1, 5, -2]), s), [(2, 3), (3,)]),
        (lambda L, x, s: x.put(L.tensor([1, 5, 1]), s, accumulate=True), [(2, 3), (3,)]),
        (lambda L, x, s: (x * 1).put_(L.tensor([[0], [4]]), s), [(2, 3), (2, 1)]),
        (lambda L, x, s: L.select_scatter(x, s, 1, 2), [(3, 4), (3,)]),
        (lambda L, x, s: L.slice_scatter(x, s, 1, 1, 4, 2), [(3, 5), (3, 2)]),
        (lambda L, x, s: L.diagonal_scatter(x, s, 1), [(4, 4), (3,)]),
    ],
    ids=[
        "fill_diagonal_",
        "fill_diagonal_wrap",
        "put",
        "put_acc",
        "put_",
        "select_scatter",
        "slice_scatter",
        "diagonal_scatter",
    ],
)
def test_writes_into_positions_have_gradients(f, shapes, rng):
    """fill_diagonal_ and put_ on a tensor in the graph gave the gradient of the tensor before
    the write (silently wrong: the written positions got gradient); the *_scatter raised."""
    arrays = [rng.standard_normal(s) for s in shapes]
    seed = int(rng.integers(1 << 30))
    for got, want in zip(_grads_of(pr, f, arrays, seed), _grads_of(torch, f, arrays, seed)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_unrecorded_in_place_writes_invalidate_saved_tensors():
    """x·w saved w; w.mul_(0) (w needs no grad, so unrecorded), a no_grad update of a leaf
    and a random refill each bump the version: the backward refuses as torch's does (it
    silently used the new values)."""
    x = pr.tensor([1.0, 2.0], requires_grad=True)
    for write in (
        lambda w: w.mul_(0),
        lambda w: w.add_(1.0),
        lambda w: w.normal_(),
        lambda w: w.uniform_(),
    ):
        w = pr.tensor([3.0, 4.0])
        y = (x * w).sum()
        write(w)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
    w = pr.tensor([3.0, 4.0], requires_grad=True)
    y = (w * w).sum()
    with pr.no_grad():
        w -= 0.1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@pytest.mark.parametrize("write", ["zero_", "fill_", "fill_tensor"])
def test_fill_into_a_view_of_a_graph_tensor(write, rng):
    """y[:, 1:3].zero_() / .fill_(v) on a tensor in the graph: the written positions get no
    gradient (it raised ViewWriteError); a tensor fill value gets the sum of its gradient."""
    a = rng.standard_normal((3, 4))
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        v = lib.tensor(0.7, requires_grad=True)
        y = x * 2
        view = y[:, 1:3]
        if write == "zero_":
            view.zero_()
        else:
            view.fill_(v if write == "fill_tensor" else 0.7)
        (y * y).sum().backward()
        grads.append((x.grad.numpy(), None if v.grad is None else float(v.grad)))
    (gp, vp), (gt, vt) = grads[1], grads[0]
    np.testing.assert_allclose(gp, gt, rtol=1e-6)
    assert (vp is None) == (vt is None) and (vt is None or abs(vp - vt) < 1e-5)


def test_renorm_in_place_on_a_graph_tensor(rng):
    """y.renorm_() on a non-leaf: renorm saved y, then wrote it (a spurious "modified by an
    inplace operation"); it now reads a copy of the old values, as the other in-place maps."""
    a = rng.standard_normal((3, 4))
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        y = x * 1
        y.renorm_(2, 0, 1.0)
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 2)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_implicit_dim_gradients(shape, name, rng):
    """F.softmax(x) without dim takes torch's legacy implicit dim in the forward; the backward
    summed over every dim instead (silently wrong by up to ~2)."""
    a = rng.standard_normal(shape)
    w = rng.standard_normal(shape)
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        wt = lib.tensor(w.astype(np.float32) if lib is pr else w)
        (getattr(lib.nn.functional, name)(x) * wt).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["relu_", "hardtanh_", "elu_", "leaky_relu_"])
def test_functional_in_place_activations_on_a_non_leaf(name, rng):
    """F.relu_(y) on a non-leaf: the guard bumped the version a second time after the inner
    recorded relu had, so its own node refused ("modified by an inplace operation")."""
    a = rng.standard_normal((3, 4))
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        y = x * 1.0
        getattr(lib.nn.functional, name)(y)
        (y * y).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_embedding_bag_max_norm_with_a_weight_that_requires_grad(rng):
    """The looked-up rows are renormalised in place unrecorded, as torch does (it raised the
    leaf-in-place error); the gradient then flows through the lookup."""
    w = (rng.standard_normal((10, 4)) * 2).astype(np.float32)
    inp = rng.integers(0, 10, (3, 4))
    g = rng.standard_normal((3, 4)).astype(np.float32)
    res = []
    for lib in (torch, pr):
        W = lib.tensor(w.copy()).requires_grad_()
        o = lib.nn.functional.embedding_bag(lib.tensor(inp), W, mode="mean", max_norm=1.0)
        (o * lib.tensor(g)).sum().backward()
        res.append((o.detach().numpy(), W.grad.numpy(), W.detach().numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name,lo,hi",
    [
        ("entr", 0.1, 3.0),
        ("ndtr", -3.0, 3.0),
        ("ndtri", 0.05, 0.95),
        ("log_ndtr", -8.0, 4.0),
        ("i0e", -5.0, 5.0),
        ("i1", -5.0, 5.0),
        ("i1e", -5.0, 5.0),
    ],
)
def test_special_function_gradients(name, lo, hi, rng):
    """torch.special's entr, ndtr, ndtri, log_ndtr, i0e, i1, i1e (their backward raised)."""
    a = np.append(rng.uniform(lo, hi, 9), 0.0 if name.startswith("i") else (lo + hi) / 2)
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        getattr(lib.special, name)(x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=2e-5, atol=1e-6 * np.abs(grads[0]).max())


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_family_gradients_at_zero(name):
    """d/dx xlogy(x, y) is log(y) also at x = 0 (0 only where y <= 0), as torch's; it was 0
    at every x = 0. xlog1py (its backward raised) likewise with log1p and y <= -1."""
    a = np.array([0.0, 0.5, 1.0, 0.0, 0.0, 2.0])
    b = np.array([0.3, 0.5, 2.0, 0.0, -1.0, 1.5]) - (1.0 if name == "xlog1py" else 0.0) * (
        np.array([0, 0, 0, 1, 1, 0])
    )
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        y = lib.tensor(b.astype(np.float32) if lib is pr else b).requires_grad_()
        getattr(lib.special, name)(x, y).sum().backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, equal_nan=True)


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax_gradient(hard):
    """y = softmax((x + G) / tau) with G drawn inside: its gradient is the softmax's at y
    (straight through the one-hot when hard), as torch's (it raised before)."""
    pr.manual_seed(3)
    x = pr.randn(4, 5, requires_grad=True)
    w = pr.randn(4, 5)
    tau = 0.5
    y = pr.nn.functional.gumbel_softmax(x, tau=tau, hard=hard)
    (y * w).sum().backward()
    pr.manual_seed(3)
    pr.randn(4, 5), pr.randn(4, 5)  # (the same draws again: x's, w's, then the noise)
    ys = pr.nn.functional.gumbel_softmax(x.detach(), tau=tau)
    want = (ys * (w - (w * ys).sum(-1, keepdim=True))) / tau
    np.testing.assert_allclose(x.grad.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    if hard:
        np.testing.assert_array_equal(y.detach().sum(-1).numpy(), np.ones(4, np.float32))


@pytest.mark.parametrize("dims", [2, 3])
def test_fractional_max_pool_gradient(dims, rng):
    """Each output's gradient goes to the element its window's max came from, the forward's
    own indices (random windows: recomputing them would draw others); it raised before."""
    shape = (2, 3, 9, 8) if dims == 2 else (1, 2, 7, 7, 6)
    a = rng.standard_normal(shape).astype(np.float32)
    samples = rng.uniform(0, 1, (shape[0], shape[1], dims)).astype(np.float32)
    res = []
    for lib in (torch, pr):
        x = lib.tensor(a).requires_grad_()
        f = getattr(lib.nn.functional, f"fractional_max_pool{dims}d")
        out = f(x, 2, output_size=(4,) * dims, _random_samples=lib.tensor(samples))
        w = np.arange(out.numel(), dtype=np.float32).reshape(tuple(out.shape))
        (out * lib.tensor(w)).sum().backward()
        res.append((out.detach().numpy(), x.grad.numpy()))
    for got, want in zip(res[1], res[0]):
        np.testing.assert_array_equal(got, want)
    # fresh random windows: the gradient lands where that call's maxima were
    x = pr.tensor(a).requires_grad_()
    o, idx = getattr(pr.nn.functional, f"fractional_max_pool{dims}d")(
        x, 2, output_ratio=0.5, return_indices=True
    )
    o.sum().backward()
    flat = x.grad.numpy().reshape(shape[0] * shape[1], -1)
    for p, ids in enumerate(idx.numpy().reshape(shape[0] * shape[1], -1)):
        np.testing.assert_array_equal(np.nonzero(flat[p])[0], np.unique(ids))


@pytest.mark.parametrize(
    "size,stride,off",
    [((3, 4), (4, 1), 0), ((4, 5), (3, 1), 2), ((2, 3, 3), (6, 1, 0), 1), ((5, 3), (1, 2), 3)],
)
def test_as_strided_gradient(size, stride, off, rng):
    """Overlapping windows (sliding, a 0 stride) sum their gradients into the elements they
    read, as torch's (it raised before)."""
    a = rng.standard_normal(20)
    w = rng.standard_normal(size)
    grads = []
    for lib in (torch, pr):
        x = lib.tensor(a.astype(np.float32) if lib is pr else a).requires_grad_()
        y = (x * 1.0).as_strided(size, stride, off)
        (y * lib.tensor(w.astype(np.float32) if lib is pr else w)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


def test_multinomial_race_key_when_the_uniform_draw_is_zero():
    """Without replacement each weight w races with key log(1 - u)/w. A draw u = 0 (once in
    2^24) gave key 0, which beat every other weight however small: a 1e-9 token won 0.3 % of
    draws over 50k tokens. Now the key stays below 0, and the larger weight still wins."""
    from pyrite.ops.core import empty, run_map
    from pyrite.ops.stats import _RACE_KEY

    u = pr.zeros(4)
    w = pr.tensor([1e-9, 0.5, 0.25, 0.0])
    keys = run_map(_RACE_KEY, (u, w), ("f32", "f32"), empty((4,), pr.float32), "f32").numpy()
    assert np.all(keys < 0) and int(np.argmax(keys)) == 1
    assert keys[3] == -np.inf
