"""Gradients of F.multilabel_margin_loss and F.pdist against torch float64 autograd (both used to
build their output with unrecorded map kernels, so their backward raised). torch implements no
double backward for either (multilabel_margin_loss_backward, _pdist_backward); pyrite's is
checked against the first derivative's linearity in the incoming gradient instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F

RTOL = 2e-5
ATOL = 2e-5


def _close(a, b, what):
    np.testing.assert_allclose(np.asarray(a, np.float64), b, rtol=RTOL, atol=ATOL, err_msg=what)


def _targets(rng, N, C):
    """Class-index rows with -1 terminators at various positions (none, first, middle, last),
    entries after the terminator that must be ignored, and repeated labels."""
    t = rng.integers(0, C, size=(N, C))
    for n in range(N):
        stop = n % (C + 1)  # 0: empty target list; C: no terminator
        if stop < C:
            t[n, stop] = -1
    if N > 1 and C > 2:
        t[1, :3] = [C - 1, C - 1, -1]  # repeated label: torch counts it twice
    return t


def _mlm(x, t, reduction, rng, lib):
    if lib == "torch":
        X = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        out = TF.multilabel_margin_loss(X, torch.tensor(t), reduction=reduction)
    else:
        X = pr.tensor(x.astype(np.float32), requires_grad=True)
        out = F.multilabel_margin_loss(X, pr.tensor(t.astype(np.int64)), reduction=reduction)
    return X, out


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 4), (2, 9), (6,)])
def test_multilabel_margin_grad(reduction, shape):
    rng = np.random.default_rng(sum(shape) * 31 + len(reduction))
    x = rng.standard_normal(shape)
    N, C = (1, shape[0]) if len(shape) == 1 else shape
    t = _targets(rng, N, C).reshape(shape)
    Xt, ot = _mlm(x, t, reduction, rng, "torch")
    Xp, op = _mlm(x, t, reduction, rng, "pyrite")
    _close(op.detach().numpy(), ot.detach().numpy(), "loss")
    w = rng.standard_normal(tuple(ot.shape))
    (ot * torch.tensor(w)).sum().backward()
    (op * pr.tensor(w.astype(np.float32))).sum().backward()
    assert Xp.grad is not None
    _close(Xp.grad.numpy(), Xt.grad.numpy(), "gradient")


def test_multilabel_margin_grad_kinks_and_ties():
    """z = 1 - x[y] + x[i] exactly 0 gets no gradient (torch's `z > 0`); equal inputs."""
    x = np.array([[1.0, 0.0, 0.5, 0.5], [0.25, 0.25, 0.25, 0.25]])
    t = np.array([[0, -1, 1, 2], [3, 1, 3, -1]])
    for reduction in ("none", "mean", "sum"):
        Xt, ot = _mlm(x, t, reduction, None, "torch")
        Xp, op = _mlm(x, t, reduction, None, "pyrite")
        _close(op.detach().numpy(), ot.detach().numpy(), "loss")
        ot.sum().backward()
        op.sum().backward()
        _close(Xp.grad.numpy(), Xt.grad.numpy(), f"gradient ({reduction})")


def test_multilabel_margin_double_backward():
    """grad_x = J(x)ᵀ·v is linear in v: d<grad_x, w>/dv = J(x)·w (torch's Jacobian)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6))
    t = _targets(rng, 4, 6)
    X = pr.tensor(x.astype(np.float32), requires_grad=True)
    v = pr.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    w = rng.standard_normal((4, 6))
    loss = F.multilabel_margin_loss(X, pr.tensor(t), reduction="none")
    (gx,) = pr.autograd.grad(loss, X, v, create_graph=True)
    (gv,) = pr.autograd.grad((gx * pr.tensor(w.astype(np.float32))).sum(), v)
    J = torch.autograd.functional.jacobian(
        lambda a: TF.multilabel_margin_loss(a, torch.tensor(t), reduction="none"),
        torch.tensor(x),
    )  # (N, N, C)
    _close(gv.numpy(), (J * torch.tensor(w)).sum((1, 2)).numpy(), "double backward")


def test_multilabel_margin_no_grad_target_unchanged():
    """The unrecorded kernel path (no input requiring grad) gives the recorded path's value."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    t = _targets(rng, 5, 7)
    a = F.multilabel_margin_loss(pr.tensor(x), pr.tensor(t), reduction="none")
    b = F.multilabel_margin_loss(pr.tensor(x, requires_grad=True), pr.tensor(t), reduction="none")
    _close(a.numpy(), b.detach().numpy(), "kernel vs recorded")


PS = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf")]


def _pdist_both(x, p, w):
    Xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    Xp = pr.tensor(x.astype(np.float32), requires_grad=True)
    ot, op = torch.pdist(Xt, p), F.pdist(Xp, p)
    _close(op.detach().numpy(), ot.detach().numpy(), f"pdist p={p}")
    (ot * torch.tensor(w)).sum().backward()
    (op * pr.tensor(w.astype(np.float32))).sum().backward()
    assert Xp.grad is not None
    _close(Xp.grad.numpy(), Xt.grad.numpy(), f"pdist gradient p={p}")


@pytest.mark.parametrize("p", PS)
@pytest.mark.parametrize("shape", [(2, 1), (5, 3), (7, 6), (4, 9)])
def test_pdist_grad(p, shape):
    rng = np.random.default_rng(shape[0] * 17 + shape[1])
    x = rng.standard_normal(shape)
    n = shape[0]
    _pdist_both(x, p, rng.standard_normal(n * (n - 1) // 2))


@pytest.mark.parametrize("p", PS)
def test_pdist_grad_coincident_rows_and_ties(p):
    """Rows that coincide (distance 0: torch's gradient is 0), components that are equal (a
    zero component for p < 1), and for p = inf components tied at the max (each tied one gets
    the whole gradient in torch, not a share)."""
    x = np.array(
        [[0.0, 0.0, 1.0], [1.0, -1.0, 1.0], [0.0, 0.0, 1.0], [2.0, 0.5, -1.0], [1.0, -1.0, 1.0]]
    )
    rng = np.random.default_rng(int(p * 10) if np.isfinite(p) else 99)
    _pdist_both(x, p, rng.standard_normal(10))


def test_pdist_grad_single_row():
    x = pr.tensor(np.ones((1, 3), np.float32), requires_grad=True)
    out = F.pdist(x)
    assert tuple(out.shape) == (0,)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 3), np.float32))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, float("inf")])
def test_pdist_double_backward(p):
    """torch has no double backward for pdist: the first derivative is linear in the incoming
    gradient v, so d<grad_x, w>/dv is the Jacobian of pdist applied to w (torch's Jacobian)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3))
    X = pr.tensor(x.astype(np.float32), requires_grad=True)
    v = pr.tensor(rng.standard_normal(6).astype(np.float32), requires_grad=True)
    w = rng.standard_normal((4, 3))
    (gx,) = pr.autograd.grad(F.pdist(X, p), X, v, create_graph=True)
    (gv,) = pr.autograd.grad((gx * pr.tensor(w.astype(np.float32))).sum(), v)
    J = torch.autograd.functional.jacobian(lambda a: torch.pdist(a, p), torch.tensor(x))
    _close(gv.numpy(), (J * torch.tensor(w)).sum((1, 2)).numpy(), "double backward")


def test_pdist_second_derivative_p2():
    """A second derivative through pdist's rule: Σ pdist(x)² (p = 2) against torch's sum of
    squared row differences, which is twice differentiable."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 2))
    X = pr.tensor(x.astype(np.float32), requires_grad=True)
    (gx,) = pr.autograd.grad((F.pdist(X) ** 2).sum(), X, create_graph=True)
    w = rng.standard_normal((5, 2))
    (gg,) = pr.autograd.grad((gx * pr.tensor(w.astype(np.float32))).sum(), X)
    Xt = torch.tensor(x, requires_grad=True)
    d2 = ((Xt.unsqueeze(0) - Xt.unsqueeze(1)) ** 2).sum(-1).triu(1).sum()
    (gt,) = torch.autograd.grad(d2, Xt, create_graph=True)
    (ggt,) = torch.autograd.grad((gt * torch.tensor(w)).sum(), Xt)
    _close(gg.numpy(), ggt.numpy(), "second derivative")
