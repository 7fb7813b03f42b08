"""Second derivatives against torch CPU: bugs a double-backward differential hunt found."""

import numpy as np
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F


def _hvp(L, Fn, f, arrs, w, vs):
    """sum(v · d/dx sum(w · f(x))) differentiated again: the gradients' own gradients."""
    xs = [L.tensor(a).requires_grad_() for a in arrs]
    out = f(L, Fn, *xs)
    gs = L.autograd.grad((out * L.tensor(w)).sum(), xs, create_graph=True)
    assert all(g.requires_grad for g in gs)
    s = sum((g * L.tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.detach().numpy() for h in L.autograd.grad(s, xs)]


def test_linear_with_bias_weight_gradient_is_differentiable(rng):
    """linear's weight gradient (with a bias) came from the raw fused kernel that also gives
    the bias gradient, so under create_graph it was detached: its second-order terms were lost."""
    arrs = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 4), (5,))]
    w = rng.standard_normal((3, 5)).astype(np.float32)
    vs = [rng.standard_normal(a.shape).astype(np.float32) for a in arrs]

    def f(L, Fn, x, wt, b):
        return Fn.linear(x, wt, b).tanh()

    for p, t in zip(_hvp(pr, F, f, arrs, w, vs), _hvp(torch, TF, f, arrs, w, vs)):
        # (a few products of O(1) terms of length 4..5: f32 rounding, 1e-5 of the scale)
        np.testing.assert_allclose(p, t, rtol=0, atol=1e-5 * max(1.0, np.abs(t).max()))


def test_op_returning_its_input_records_nothing(rng):
    """x.to(x.dtype), x.float(), x.contiguous() return x itself (as torch): a node recorded on
    it turned a leaf into a non-leaf whose edge is itself, and its gradient counted twice (first
    order too, and outer's mixed second derivative, whose rule casts with .to)."""
    for f in (
        lambda x: x.to(pr.float32),
        lambda x: x.float(),
        lambda x: x.type_as(x),
        lambda x: x.contiguous(),
    ):
        x = pr.tensor(np.ones(3, np.float32)).requires_grad_()
        y = f(x)
        assert y is x and x.is_leaf and x.grad_fn is None
        (g,) = pr.autograd.grad((y * 2).sum(), [x])
        np.testing.assert_array_equal(g.numpy(), [2, 2, 2])
        (y * 2).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])
        # a non-leaf keeps its own grad_fn
        z = x * 3
        fn = z.grad_fn
        assert f(z) is z and z.grad_fn is fn
    a = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    vs = [rng.standard_normal(4).astype(np.float32), rng.standard_normal(3).astype(np.float32)]

    def f(L, Fn, x, y):
        return L.outer(x, y) ** 2

    for p, t in zip(_hvp(pr, F, f, [a, b], w, vs), _hvp(torch, TF, f, [a, b], w, vs)):
        np.testing.assert_allclose(p, t, rtol=0, atol=1e-5 * max(1.0, np.abs(t).max()))


def test_digamma_second_derivative(rng):
    """digamma's gradient (trigamma) had no backward: under create_graph it is polygamma(1, x),
    differentiable, as torch's polygamma(2, x)."""
    x = np.array([-2.3, -0.4, 0.2, 1.3, 7.5], np.float32)
    res = []
    for L in (pr, torch):
        t = L.tensor(x).requires_grad_()
        (g,) = L.autograd.grad(t.digamma().sum(), [t], create_graph=True)
        (h,) = L.autograd.grad(g.sum(), [t])
        res.append((g.detach().numpy(), h.numpy()))
    for p, t in zip(*res):
        # (zeta's series, f32: a few units in the last place of each value)
        np.testing.assert_allclose(p, t, rtol=2e-6, atol=0)


def test_logit_gradient_nan_outside_unit_interval():
    """logit without eps: the gradient is NaN where x < 0 or x > 1 (torch's logit_backward),
    not g / (x (1 - x)); with eps, zero outside [eps, 1 - eps]."""
    x = np.array([-1.0, 0.3, 0.5, 2.0], np.float32)
    for kw in ({}, {"eps": 0.2}):
        res = []
        for L in (pr, torch):
            t = L.tensor(x).requires_grad_()
            (g,) = L.autograd.grad(t.logit(**kw).sum(), [t])
            res.append(g.numpy())
        np.testing.assert_allclose(res[0], res[1], rtol=1e-6, atol=0)
