"""The row ops' one-kernel gradients (kernels/rowops.row_grad_kernel): softmax and log_softmax
over the last dim, layer_norm and rms_norm with and without their affine parameters, against
torch's autograd on awkward shapes and non-contiguous inputs; the dispatches a backward takes;
and the composite rules that still serve double backward."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.testing.tolerance import assert_close


def _pair(a, transpose=False):
    p = pr.tensor(a).requires_grad_()
    t = torch.tensor(a, requires_grad=True)
    return p, t


def _grads(fp, ft, arrays, weight):
    P = [pr.tensor(a).requires_grad_() for a in arrays]
    T = [torch.tensor(a, requires_grad=True) for a in arrays]
    (fp(*P) * pr.tensor(weight)).sum().backward()
    (ft(*T) * torch.tensor(weight)).sum().backward()
    return [p.grad for p in P], [t.grad for t in T]


def _tol(n, w):
    # a row's gradient sums n terms of |g·y| <= max|w|: f32 rounding of sums of n terms
    return 8 * n * 2.0**-24 * float(np.abs(w).max()) + 1e-6


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (3, 5, 257), (2, 2049)])
@pytest.mark.parametrize("strided", [False, True])
def test_softmax_grads(op, shape, strided, rng):
    a = (rng.standard_normal(shape[::-1] if strided else shape) * 3).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)

    def f(L):
        rev = tuple(reversed(range(len(shape))))
        return lambda x: getattr(L.nn.functional, op)(x.permute(rev) if strided else x, dim=-1)

    gp, gt = _grads(f(pr), f(torch), [a], w)
    assert_close(gp[0], gt[0].numpy(), atol=_tol(shape[-1], w), rtol=1e-5)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("ns", [(1,), (13,), (3, 7), (1031,)])
@pytest.mark.parametrize("affine", [False, True])
def test_norm_grads(op, ns, affine, rng):
    lead = (5, 3)
    a = (rng.standard_normal(lead + ns) * 2 + 0.5).astype(np.float32)
    w = rng.standard_normal(lead + ns).astype(np.float32)
    arrays = [a]
    if affine:
        arrays.append(rng.uniform(0.5, 1.5, ns).astype(np.float32))
        if op == "layer_norm":
            arrays.append(rng.standard_normal(ns).astype(np.float32))

    def f(L):
        fn = getattr(L.nn.functional, op)
        if op == "layer_norm":
            return lambda x, *p: fn(x, ns, *p, eps=1e-5)
        return lambda x, *p: fn(x, ns, *p, eps=1e-6)

    gp, gt = _grads(f(pr), f(torch), arrays, w)
    n = int(np.prod(ns))
    for p, t in zip(gp, gt):
        # dx carries 1/std (up to ~1e3 for a constant row of n = 1, where torch's and pyrite's
        # rounding of a zero variance differ): compare where torch's value is finite and sane
        scale = max(1.0, float(np.abs(t.numpy()).max()))
        assert_close(p, t.numpy(), atol=_tol(max(n, 15), w) * scale * 4, rtol=1e-4)


def test_norm_grad_of_a_noncontiguous_input(rng):
    a = rng.standard_normal((11, 6, 4)).astype(np.float32)
    wt = rng.standard_normal((4, 6, 11)).astype(np.float32)
    gp, gt = _grads(
        lambda x: F.layer_norm(x.permute(2, 1, 0), (11,)),
        lambda x: torch.nn.functional.layer_norm(x.permute(2, 1, 0), (11,)),
        [a],
        wt,
    )
    assert_close(gp[0], gt[0].numpy(), atol=_tol(11, wt) * 4, rtol=1e-5)


def _norm_param_reference(op, x, g, eps):
    """dw = Σ_rows g·x̂ and db = Σ_rows g in float64, and Σ_rows |g·x̂| (the rounding scale)."""
    x, g = x.astype(np.float64), g.astype(np.float64)
    mean = x.mean(-1, keepdims=True) if op == "layer_norm" else 0.0
    xh = (x - mean) / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    return (g * xh).sum(0), g.sum(0), np.abs(g * xh).sum(0), np.abs(g).sum(0)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("parts", [None, 1, 3, 8])
def test_norm_parameter_grads_over_many_rows(op, parts, rng, monkeypatch):
    """dw and db of 1037 rows of 45 (kernels/rowops.norm_param_grad_kernel), in one part or
    split over parts and merged, against float64. Each column's sum is a lane's serial sum of
    rows/8 terms, then a tree of 3 and the merge over the parts; each term's x̂ carries the row
    statistics' rounding (about n ulps): the bound is (rows/8 + parts + 8 + n + 8) ulps of
    Σ|term|."""
    from pyrite.ops import rowops

    monkeypatch.setattr(rowops, "FORCE_PARTS", parts)
    rows, n = 1037, 45
    xa = (rng.standard_normal((rows, n)) * 2 + 0.5).astype(np.float32)
    ga = rng.standard_normal((rows, n)).astype(np.float32)
    wa = rng.uniform(0.5, 1.5, n).astype(np.float32)
    ba = rng.standard_normal(n).astype(np.float32)
    x, w = pr.tensor(xa), pr.tensor(wa).requires_grad_()
    args = (w, pr.tensor(ba).requires_grad_()) if op == "layer_norm" else (w,)
    getattr(F, op)(x, (n,), *args, eps=1e-5).backward(pr.tensor(ga))
    dw, db, sw, sb = _norm_param_reference(op, xa, ga, 1e-5)
    ulps = (rows / 8 + (parts or 1) + 8 + n + 8) * 2.0**-24
    assert np.all(np.abs(w.grad.numpy() - dw) <= ulps * sw + 1e-6)
    if op == "layer_norm":
        assert np.all(np.abs(args[1].grad.numpy() - db) <= ulps * sb + 1e-6)


def test_norm_parameter_grads_split_past_the_loop_budget(rng, loop_budget, monkeypatch):
    """A budget of 100 iterations (50 for the main loop): 1037 rows take parts of at most 400
    rows (three dispatches: dx, the parts, their merge), and the gradient is still the float64
    one's."""
    from pyrite.ops import core

    monkeypatch.setattr(core, "POISON", False)  # count the backward's own dispatches only
    loop_budget(100)
    rows, n = 1037, 19
    xa = rng.standard_normal((rows, n)).astype(np.float32)
    ga = rng.standard_normal((rows, n)).astype(np.float32)
    w = pr.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)).requires_grad_()
    b = pr.tensor(rng.standard_normal(n).astype(np.float32)).requires_grad_()
    y = F.layer_norm(pr.tensor(xa), (n,), w, b)
    gt = pr.tensor(ga)
    d0 = backend.current().dispatches
    y.backward(gt)
    assert backend.current().dispatches - d0 == 3
    dw, db, sw, sb = _norm_param_reference("layer_norm", xa, ga, 1e-5)
    ulps = (rows / 8 + 8 + 8 + n + 8) * 2.0**-24
    assert np.all(np.abs(w.grad.numpy() - dw) <= ulps * sw + 1e-6)
    assert np.all(np.abs(b.grad.numpy() - db) <= ulps * sb + 1e-6)


def test_backward_dispatches(rng, monkeypatch):
    """softmax's and log_softmax's backward: one kernel; layer_norm's with weight and bias:
    two (dx and the row statistics, then dw and db together), on lavapipe's one part."""
    from pyrite.ops import core

    monkeypatch.setattr(core, "POISON", False)  # count the backward's own dispatches only
    dev = backend.current()
    x = pr.tensor(rng.standard_normal((6, 40)).astype(np.float32)).requires_grad_()
    w = pr.tensor(rng.uniform(0.5, 1.5, 40).astype(np.float32)).requires_grad_()
    b = pr.tensor(rng.standard_normal(40).astype(np.float32)).requires_grad_()
    g = pr.tensor(rng.standard_normal((6, 40)).astype(np.float32))
    for fn, most in [
        (lambda: F.softmax(x, -1), 1),
        (lambda: F.log_softmax(x, -1), 1),
        (lambda: F.layer_norm(x, (40,), w, b), 2),
    ]:
        fn().backward(g)  # warm: kernels built
        x.grad = w.grad = b.grad = None  # no accumulation adds into existing .grad
        y = fn()
        d0 = dev.dispatches
        y.backward(g)
        assert dev.dispatches - d0 == most


def test_double_backward_through_layer_norm(rng):
    a = rng.standard_normal((4, 9)).astype(np.float32)
    wv = rng.uniform(0.5, 1.5, 9).astype(np.float32)
    xp, wp = pr.tensor(a).requires_grad_(), pr.tensor(wv).requires_grad_()
    xt, wt = torch.tensor(a, requires_grad=True), torch.tensor(wv, requires_grad=True)
    (gp,) = pr.autograd.grad((F.layer_norm(xp, (9,), wp) ** 3).sum(), xp, create_graph=True)
    (gt,) = torch.autograd.grad(
        (torch.nn.functional.layer_norm(xt, (9,), wt) ** 3).sum(), xt, create_graph=True
    )
    assert_close(gp, gt.detach().numpy(), atol=1e-4, rtol=1e-4)
    (ggp,) = pr.autograd.grad((gp * gp).sum(), wp)
    (ggt,) = torch.autograd.grad((gt * gt).sum(), wt)
    assert_close(ggp, ggt.numpy(), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_float16_grads(op, rng):
    """float16 storage, f32 arithmetic inside the kernel: within f16 rounding of torch's f32
    gradient of the same f16 values."""
    if not backend.current().has_f16:
        pytest.skip("this device has no shader-f16")
    a = rng.standard_normal((7, 33)).astype(np.float16)
    w = rng.standard_normal((7, 33)).astype(np.float16)
    x = pr.tensor(a).requires_grad_()
    xt = torch.tensor(a.astype(np.float32), requires_grad=True)
    if op == "softmax":
        y, yt = F.softmax(x, -1), torch.softmax(xt, -1)
    else:
        y, yt = F.layer_norm(x, (33,)), torch.nn.functional.layer_norm(xt, (33,))
    y.backward(pr.tensor(w))
    yt.backward(torch.tensor(w.astype(np.float32)))
    assert x.grad.dtype is pr.float16
    ref = xt.grad.numpy()
    assert_close(x.grad.float(), ref, atol=4e-3 * max(1.0, np.abs(ref).max()), rtol=4e-3)


@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm"])
def test_rows_past_the_loop_budget_compose(op, rng, loop_budget):
    """A row too long for one invocation's loop budget (kernels/rowops.grad_loop_iterations)
    takes the composite rule: the gradient is still torch's."""
    from pyrite.kernels.rowops import grad_loop_iterations, workgroup_size
    from pyrite.ops.core import max_loop_iterations

    n = 3001
    need = grad_loop_iterations(op, n, workgroup_size(n))
    loop_budget(2 * (need - 1))  # max_loop_iterations() = need - 1: the fused backward is out
    assert need > max_loop_iterations()
    a = rng.standard_normal((3, n)).astype(np.float32)
    w = rng.standard_normal((3, n)).astype(np.float32)

    def f(L):
        fn = getattr(L.nn.functional, op)
        if op == "softmax":
            return lambda x: fn(x, dim=-1)
        return lambda x: fn(x, (n,))

    gp, gt = _grads(f(pr), f(torch), [a], w)
    assert_close(gp[0], gt[0].numpy(), atol=_tol(n, w) * 8, rtol=1e-4)
