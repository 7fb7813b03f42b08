"""The fused cross_entropy (class-index targets, (N, C) or (C,) input) against torch CPU.

Forward: one row kernel (per-row loss, target weight, log-sum-exp), a sum and a division for
'mean'; backward: one row kernel (nn/_loss.py, kernels/rowops.py xent_kernel). Torch runs in
float64 on the same f32- (or f16-) rounded values.

Tolerances (Higham §4.2, WGSL's exp/log accuracy): the row's log-sum-exp is a sum of C exps,
each within a few ULP, so lse is off by about (C + 16)·u·(|lse| + 1); each loss row is a
weighted difference of lse and x, (C + 16)·u times its terms' magnitudes (the smoothing term
sums C of them); 'sum' and 'mean' add an N-term sum. A gradient element g·(p·T - ...) carries
p = exp(x - lse)'s relative error (the lse error plus exp's few ULP of |x - lse|) and a few
roundings of the products. f16 results add one f16 rounding (and f16's smallest normal).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.testing.tolerance import assert_close, unit_roundoff

U = unit_roundoff("float32")
U16 = unit_roundoff("float16")
TINY16 = 2.0**-14
REDUCTIONS = ("none", "sum", "mean")


def _ref(x, t, w, ii, eps):
    """float64 reference pieces: lse (N,), kept mask, w_t (N,), Σw."""
    x = np.asarray(x, np.float64)
    C = x.shape[1]
    m = x.max(1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]
    w = np.ones(C) if w is None else np.asarray(w, np.float64)
    keep = t != ii
    wt = np.where(keep, w[np.clip(t, 0, C - 1)], 0.0)
    return lse, keep, wt, w


def _tols(x, t, w, ii, eps, reduction, g, f16=False):
    """(loss atol, grad atol array) from the bounds in the module docstring."""
    x = np.asarray(x, np.float64)
    N, C = x.shape
    lse, keep, wt, wv = _ref(x, t, w, ii, eps)
    k = (C + 16) * U
    xt = np.abs(x[np.arange(N), np.clip(t, 0, C - 1)])
    row = k * (
        (1 - eps) * wt * (np.abs(lse) + xt + 1)
        + keep * (eps / C) * (np.abs(wv) * (np.abs(lse)[:, None] + np.abs(x) + 1)).sum(1)
    )
    if reduction == "none":
        latol = row
    else:
        terms = np.abs(
            (1 - eps) * wt * (lse - x[np.arange(N), np.clip(t, 0, C - 1)])
            + keep * (eps / C) * (wv * (lse[:, None] - x)).sum(1)
        )
        latol = row.sum() + (N + 4) * U * terms.sum()
        if reduction == "mean":
            latol = latol / max(wt.sum(), 1e-30) + 4 * U * terms.sum() / max(wt.sum(), 1e-30)
    gn = np.broadcast_to(np.abs(np.asarray(g, np.float64)), (N,)).copy()
    if reduction == "mean":
        gn = gn / max(wt.sum(), 1e-30)
    p = np.exp(x - lse[:, None])
    a = (1 - eps) * wt
    T = a + (eps / C) * wv.sum()
    gatol = (
        gn[:, None]
        * keep[:, None]
        * (
            p
            * T[:, None]
            * (k * (np.abs(lse)[:, None] + 2) + 16 * U * (np.abs(x - lse[:, None]) + 1))
            + 8 * U * (T[:, None] + a[:, None] + (eps / C) * np.abs(wv)[None, :])
        )
    )
    if f16:
        gatol = gatol + TINY16
        latol = latol + TINY16
    return latol, gatol


def _run_both(xp, xt, t, w, reduction, eps, ii, g, x_for_tol, f16=False):
    """Forward and backward in both libraries; compares loss and x's gradient."""
    kw = dict(reduction=reduction, label_smoothing=eps, ignore_index=ii)
    lp = F.cross_entropy(
        xp, pr.tensor(t.astype(np.int32)), weight=None if w is None else pr.tensor(w), **kw
    )
    lt = TF.cross_entropy(
        xt,
        torch.from_numpy(t.astype(np.int64)),
        weight=None if w is None else torch.from_numpy(np.asarray(w, np.float64)),
        **kw,
    )
    gg = np.asarray(g, np.float32)
    lp.backward(pr.tensor(gg).to(lp.dtype))
    lt.backward(torch.from_numpy(gg.astype(np.float64)))
    x2 = np.atleast_2d(x_for_tol)
    t2 = np.atleast_1d(t)
    latol, gatol = _tols(x2, t2, w, ii, eps, reduction, np.atleast_1d(gg), f16)
    what = f"{reduction} eps={eps} weight={w is not None} ii={ii}"
    rt = U16 if f16 else 0.0
    assert tuple(lp.shape) == tuple(lt.shape), what
    assert_close(
        lp.detach().float().numpy(),
        lt.detach().numpy(),
        latol.reshape(lt.shape) if np.ndim(latol) else latol,
        rt,
        "loss " + what,
    )
    gt = xt.grad.numpy()
    assert_close(xp.grad.float().numpy(), gt, gatol.reshape(gt.shape), rt, "grad " + what)


def _grad_of(rng, reduction, n):
    return rng.standard_normal(n if reduction == "none" else ()).astype(np.float32)


@pytest.mark.parametrize("N", [1, 7, 129])
@pytest.mark.parametrize("C", [1, 2, 10, 1000, 5003])
def test_parity(N, C, rng):
    """Every reduction, with and without a weight, smoothing 0 and 0.1, some ignored targets
    (ignore_index -100, or a valid class)."""
    x = (rng.standard_normal((N, C)) * 3).astype(np.float32)
    for reduction in REDUCTIONS:
        for weighted in (False, True):
            for eps in (0.0, 0.1):
                w = rng.random(C).astype(np.float32) + 0.1 if weighted else None
                ii = -100 if rng.random() < 0.5 else int(rng.integers(0, C))
                t = rng.integers(0, C, N)
                t[rng.random(N) < 0.25] = ii
                xp = pr.tensor(x, requires_grad=True)
                xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
                _run_both(xp, xt, t, w, reduction, eps, ii, _grad_of(rng, reduction, N), x)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_strided_inputs(reduction, rng):
    """A transposed (C, N).t(), a slice, a strided target and a strided weight."""
    N, C = 13, 37
    base = (rng.standard_normal((C, N)) * 2).astype(np.float32)
    xt_np = np.ascontiguousarray(base.T)
    w_full = rng.random(2 * C).astype(np.float32) + 0.1
    t_full = rng.integers(0, C, 2 * N)
    t_full[::5] = -100
    for eps in (0.0, 0.1):
        # transposed view
        leaf = pr.tensor(base, requires_grad=True)
        xp = leaf.t()
        xt_leaf = torch.from_numpy(base.astype(np.float64)).requires_grad_()
        g = _grad_of(rng, reduction, N)
        kw = dict(reduction=reduction, label_smoothing=eps)
        tp = pr.tensor(t_full.astype(np.int32))[::2]
        wp = pr.tensor(w_full)[::2]
        lp = F.cross_entropy(xp, tp, weight=wp, **kw)
        lt = TF.cross_entropy(
            xt_leaf.t(),
            torch.from_numpy(t_full[::2].astype(np.int64)),
            weight=torch.from_numpy(w_full[::2].astype(np.float64)),
            **kw,
        )
        lp.backward(pr.tensor(g))
        lt.backward(torch.from_numpy(g.astype(np.float64)))
        latol, gatol = _tols(xt_np, t_full[::2], w_full[::2], -100, eps, reduction, g)
        assert_close(lp.numpy(), lt.detach().numpy(), latol, 0.0, f"transposed {reduction}")
        assert_close(leaf.grad.numpy(), xt_leaf.grad.numpy(), gatol.T, 0.0, "transposed grad")
        # a slice of a bigger tensor: rows 1::2, classes 3:3+C
        big = rng.standard_normal((2 * N + 1, C + 5)).astype(np.float32)
        leaf = pr.tensor(big, requires_grad=True)
        tleaf = torch.from_numpy(big.astype(np.float64)).requires_grad_()
        sub = big[1::2, 3 : 3 + C]
        t = rng.integers(0, C, sub.shape[0])
        lp = F.cross_entropy(leaf[1::2, 3 : 3 + C], pr.tensor(t.astype(np.int32)), **kw)
        lt = TF.cross_entropy(tleaf[1::2, 3 : 3 + C], torch.from_numpy(t.astype(np.int64)), **kw)
        g = _grad_of(rng, reduction, sub.shape[0])
        lp.backward(pr.tensor(g))
        lt.backward(torch.from_numpy(g.astype(np.float64)))
        latol, gatol = _tols(sub, t, None, -100, eps, reduction, g)
        assert_close(lp.numpy(), lt.detach().numpy(), latol, 0.0, f"slice {reduction}")
        want = tleaf.grad.numpy()
        full_tol = np.zeros(want.shape)
        full_tol[1::2, 3 : 3 + C] = gatol
        assert_close(leaf.grad.numpy(), want, full_tol, 0.0, "slice grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_unbatched(reduction, rng):
    """A (C,) input with a 0-d target (kept and ignored)."""
    C = 11
    x = rng.standard_normal(C).astype(np.float32)
    for t in (np.array(4), np.array(-100)):
        for eps in (0.0, 0.1):
            xp = pr.tensor(x, requires_grad=True)
            xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
            g = rng.standard_normal(()).astype(np.float32)
            w = rng.random(C).astype(np.float32) + 0.1
            _run_both(xp, xt, t, w, reduction, eps, -100, g, x)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_all_ignored(reduction, rng):
    """Every target ignored: 'mean' is NaN (0/0) with 0 gradients, as torch; 'sum' 0."""
    N, C = 5, 7
    x = rng.standard_normal((N, C)).astype(np.float32)
    t = np.full(N, 2)
    for eps in (0.0, 0.1):
        xp = pr.tensor(x, requires_grad=True)
        xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
        _run_both(xp, xt, t, None, reduction, eps, 2, _grad_of(rng, reduction, N), x)
        assert not np.isnan(xp.grad.numpy()).any()


def test_float16(rng):
    """f16 input (computed in f32, loss and gradient stored in f16)."""
    if not pr.backend.current().has_f16:
        pytest.skip("needs shader-f16")
    N, C = 9, 257
    x16 = (rng.standard_normal((N, C)) * 2).astype(np.float16)
    for reduction in REDUCTIONS:
        for eps in (0.0, 0.1):
            for weighted in (False, True):
                w = rng.random(C).astype(np.float32) + 0.1 if weighted else None
                t = rng.integers(0, C, N)
                t[0] = -100
                xp = pr.tensor(x16, requires_grad=True)
                assert xp.dtype is pr.float16
                xt = torch.from_numpy(x16.astype(np.float64)).requires_grad_()
                g = _grad_of(rng, reduction, N).astype(np.float16).astype(np.float32)
                _run_both(xp, xt, t, w, reduction, eps, -100, g, x16, f16=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_fused_forward_at_most_3_dispatches_and_backward_1(reduction, rng):
    """With uploaded labels (bounds known: no range-check readback), the forward takes at most
    three dispatches (row kernel, sum, division) and the backward one. (Debug poisoning, a
    fill of every new buffer, is off here: it would count too.)"""
    from pyrite.ops import core

    dev = pr.backend.current()
    before = core.POISON
    core.set_poison(False)
    try:
        _count_dispatches(dev, reduction, rng)
    finally:
        core.set_poison(before)


def _count_dispatches(dev, reduction, rng):
    N, C = 128, 10
    for eps in (0.0, 0.1):
        for w in (None, pr.tensor(rng.random(C).astype(np.float32))):
            x = pr.tensor(rng.standard_normal((N, C)).astype(np.float32), requires_grad=True)
            t = pr.tensor(rng.integers(0, C, N))
            g = pr.ones(N) if reduction == "none" else pr.tensor(1.0)
            F.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=eps)  # warm
            d0 = dev.dispatches
            loss = F.cross_entropy(x, t, weight=w, reduction=reduction, label_smoothing=eps)
            d1 = dev.dispatches
            loss.backward(g)
            d2 = dev.dispatches
            assert d1 - d0 <= {"none": 1, "sum": 2, "mean": 3}[reduction]
            assert d2 - d1 == 1


def test_double_backward_gradient_penalty(rng):
    """A gradient penalty through cross_entropy (create_graph=True takes the recorded rule)."""
    N, D, C = 6, 5, 4
    a = rng.standard_normal((N, D)).astype(np.float32)
    w0 = rng.standard_normal((D, C)).astype(np.float32)
    t = rng.integers(0, C, N)
    t[1] = -100
    cw = (rng.random(C) + 0.5).astype(np.float32)
    wp = pr.tensor(w0, requires_grad=True)
    wt = torch.from_numpy(w0.astype(np.float64)).requires_grad_()
    for eps in (0.0, 0.1):
        wp.grad = None
        wt.grad = None
        lp = F.cross_entropy(
            pr.tensor(a) @ wp, pr.tensor(t), weight=pr.tensor(cw), label_smoothing=eps
        )
        (gp,) = pr.autograd.grad(lp, [wp], create_graph=True)
        (lp + (gp * gp).sum()).backward()
        lt = TF.cross_entropy(
            torch.from_numpy(a.astype(np.float64)) @ wt,
            torch.from_numpy(t),
            weight=torch.from_numpy(cw.astype(np.float64)),
            label_smoothing=eps,
        )
        (gt,) = torch.autograd.grad(lt, [wt], create_graph=True)
        (lt + (gt * gt).sum()).backward()
        assert_close(gp.detach().numpy(), gt.detach().numpy(), 1e-5, 1e-5, "first grad")
        assert_close(wp.grad.numpy(), wt.grad.numpy(), 1e-5, 1e-5, "penalised grad")


def test_retain_graph_and_inplace_on_loss(rng):
    """A second backward (retain_graph) gives the same gradient; writing the 'none' loss in
    place after the forward is allowed (torch: the loss is not saved) and does not change
    the gradient."""
    x = rng.standard_normal((5, 6)).astype(np.float32)
    t = rng.integers(0, 6, 5)
    xp = pr.tensor(x, requires_grad=True)
    loss = F.cross_entropy(xp, pr.tensor(t))
    loss.backward(retain_graph=True)
    first = xp.grad.numpy().copy()
    xp.grad = None
    loss.backward()
    assert_close(xp.grad.numpy(), first, 0.0, 0.0, "second backward")
    xp.grad = None
    rows = F.cross_entropy(xp, pr.tensor(t), reduction="none")
    want = TF.cross_entropy(
        torch.from_numpy(x.astype(np.float64)), torch.from_numpy(t), reduction="none"
    )
    rows.mul_(2.0)
    rows.sum().backward()
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    r = TF.cross_entropy(xt, torch.from_numpy(t), reduction="none")
    r.mul_(2.0)
    r.sum().backward()
    assert_close(rows.detach().numpy(), 2 * want.numpy(), 1e-6, 1e-6, "doubled rows")
    assert_close(xp.grad.numpy(), xt.grad.numpy(), 1e-6, 1e-6, "grad after in-place on loss")


def test_composite_past_the_loop_budget(loop_budget, rng):
    """Rows past what one workgroup may loop over take the composite path, same results."""
    from pyrite.ops.core import max_loop_iterations

    loop_budget(80)
    assert max_loop_iterations() < 80
    N, C = 3, 2000
    x = rng.standard_normal((N, C)).astype(np.float32)
    t = rng.integers(0, C, N)
    xp = pr.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    _run_both(xp, xt, t, None, "mean", 0.1, -100, np.float32(1.0), x)


def test_errors(rng):
    """Out-of-range targets raise at the call (bounds known from the upload, or read back);
    a class weight of the wrong size raises torch's RuntimeError."""
    x = pr.randn(4, 5)
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        F.cross_entropy(x, pr.tensor([0, 5, 2, 1]))
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.cross_entropy(x, pr.tensor([0, -1, 2, 1]))
    unknown = pr.tensor([0, 3, 2, 1]) * 2  # an op's result: bounds unknown, read back
    with pytest.raises(IndexError, match="Target 6 is out of bounds"):
        F.cross_entropy(x, unknown)
    ok = pr.tensor([0, 3, 2, 1]) + 0  # unknown bounds, in range (and -100 ignored) passes
    got = F.cross_entropy(x, ok, reduction="none").numpy()
    want = TF.cross_entropy(
        torch.from_numpy(x.numpy()), torch.tensor([0, 3, 2, 1]), reduction="none"
    )
    assert_close(got, want.numpy(), 1e-5, 1e-5, "unknown bounds, in range")
    F.cross_entropy(x, pr.tensor([0, -100, 2, 1]) + 0)
    with pytest.raises(IndexError, match="Target 11 is out of bounds"):
        F.cross_entropy(x[0], pr.tensor(11))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5 "):
        F.cross_entropy(x, pr.tensor([0, 1, 2, 1]), weight=pr.ones(4))
    with pytest.raises(RuntimeError, match=r"got weight tensor of shape: \[5, 1\]"):
        F.cross_entropy(x, pr.tensor([0, 1, 2, 1]), weight=pr.ones(5, 1))


def test_non_finite_logits(rng):
    """+inf, NaN and -inf logits give torch's inf/NaN pattern in the loss and the gradient
    (an all -inf row is NaN; a -inf logit under smoothing makes the loss +inf)."""
    for N, C in ((4, 6), (3, 300)):
        x = rng.standard_normal((N, C)).astype(np.float32)
        x[0, 2] = np.inf
        x[1, 3] = np.nan
        x[2, 1::7] = -np.inf
        if N > 3:
            x[3, :] = -np.inf
        t = np.full(N, 1)
        for eps in (0.0, 0.1):
            for w in (None, (rng.random(C) + 0.1).astype(np.float32)):
                xp = pr.tensor(x, requires_grad=True)
                xt = torch.from_numpy(x.astype(np.float64)).requires_grad_()
                kw = dict(reduction="none", label_smoothing=eps)
                lp = F.cross_entropy(
                    xp, pr.tensor(t), weight=None if w is None else pr.tensor(w), **kw
                )
                lt = TF.cross_entropy(
                    xt,
                    torch.from_numpy(t),
                    weight=None if w is None else torch.from_numpy(w.astype(np.float64)),
                    **kw,
                )
                lp.sum().backward()
                lt.sum().backward()
                what = f"{N}x{C} eps={eps} weight={w is not None}"
                assert_close(lp.detach().numpy(), lt.detach().numpy(), 1e-4, 1e-5, "loss " + what)
                assert_close(xp.grad.numpy(), xt.grad.numpy(), 1e-5, 1e-5, "grad " + what)
