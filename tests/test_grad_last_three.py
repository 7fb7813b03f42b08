"""Backward rules of the last three ops that lacked one: F.ctc_loss (the alpha-beta gradient
with respect to log_probs), scatter_reduce(..., reduce="prod") (zeros included) and
F.grid_sample(..., mode="bicubic"). Each against torch autograd on random inputs of awkward
sizes (1, primes, non-contiguous views)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.testing.tolerance import F32_U, assert_close, sum_tol
from tests.test_grad_more_ops import check  # the gradient tables' shared check


@pytest.fixture(params=["serial", "workgroup"])
def kernel(request, monkeypatch):
    """Both table kernels (kernels/ctc.py) on any device: serial is CPU adapters' choice."""
    from pyrite.nn import _ctc

    monkeypatch.setattr(_ctc, "FORCE_KERNEL", request.param)
    return request.param


# ---- ctc_loss ---------------------------------------------------------------------------------
def _ctc_inputs(rng, T, N, C, S, blank=0, feasible=True):
    """logits (N, T, C) (the test takes log_softmax of their transpose: a non-contiguous
    (T, N, C)), padded targets (N, S) of labels != blank, input and target lengths. feasible:
    every T_n leaves room for its target and the blanks between repeats."""
    logits = (rng.standard_normal((N, T, C)) * 2).astype(np.float32)
    labels = np.array([c for c in range(C) if c != blank])
    tg = rng.choice(labels, (N, S)) if S else np.zeros((N, 0), np.int64)
    tl = rng.integers(0, S + 1, N)
    il = rng.integers(1, T + 1, N)
    if feasible:
        for n in range(N):
            t = tg[n, : tl[n]]
            need = len(t) + int(np.sum(t[1:] == t[:-1]))
            if need > T:
                tl[n] = 0
                need = 0
            il[n] = max(il[n], need, 1)
    return logits, tg, il, tl


def _ctc_check(logits, tg, il, tl, blank=0, reduction="mean", zero_infinity=False, concat=False):
    """pyrite's and torch's ctc_loss of log_softmax(logits.transpose(0, 1)): the losses, and the
    gradients of Σ loss·w with respect to the logits and to the log_probs (retained).

    Tolerance: a loss is a sum of T log-sum-exps along a path, each step a few roundings
    (exp/log: WGSL allows a few ULPs, relative to the magnitudes involved): its error is within
    sum_tol(Σ_t max_c |lp|, 8·T). An occupation exp(alpha + beta - lp + nll) inherits that
    error (twice: alpha and beta) relatively, and it is at most 1; the gradient is it times
    |dL/dnll_n|, plus exp(lp)'s few ULPs."""
    T = logits.shape[1]
    N = logits.shape[0]
    if concat:
        tg = np.concatenate([tg[n, : tl[n]] for n in range(N)]).astype(np.int64)
    kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    px = pr.tensor(logits).requires_grad_()
    tx = torch.tensor(logits, requires_grad=True)
    plp = px.transpose(0, 1).log_softmax(2)
    tlp = tx.transpose(0, 1).log_softmax(2)
    plp.retain_grad()
    tlp.retain_grad()
    po = F.ctc_loss(plp, pr.tensor(tg), pr.tensor(il), pr.tensor(tl), **kw)
    to = TF.ctc_loss(tlp, torch.tensor(tg), torch.tensor(il), torch.tensor(tl), **kw)
    w = np.random.default_rng(N * 97 + T).standard_normal(tuple(to.shape)).astype(np.float32)
    (po * pr.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    lp = tlp.detach().numpy().astype(np.float64)
    mag = np.abs(lp).max(axis=2).sum(axis=0)  # (N,): bounds |log alpha|, |log beta|, nll
    loss_err = sum_tol(mag, 8 * T)
    if reduction == "none":
        g = np.abs(np.broadcast_to(w, (N,)))
    elif reduction == "sum":
        g = np.full(N, abs(float(w)))
    else:
        g = abs(float(w)) / (np.maximum(tl, 1) * N)
    assert_close(po, to, atol=float(np.max(loss_err * np.maximum(g, 1.0))), rtol=8 * F32_U)
    grad_tol = (2 * loss_err + 16 * F32_U) * g  # (N,)
    assert_close(plp.grad, tlp.grad, atol=grad_tol[None, :, None], msg="d/dlog_probs")
    # through log_softmax's backward: a sum over C more
    x_tol = grad_tol[:, None, None] * (logits.shape[2] + 1) * 2
    assert_close(px.grad, tx.grad, atol=x_tol, rtol=8 * F32_U, msg="d/dlogits")
    return plp.grad.numpy(), tlp.grad.numpy()


CTC_SIZES = [  # (T, N, C, S)
    (1, 1, 2, 0),
    (1, 1, 2, 1),
    (7, 3, 5, 3),
    (13, 5, 7, 4),
    (31, 2, 3, 11),
    (50, 4, 11, 17),
]


@pytest.mark.parametrize("reduction,concat", [("mean", False), ("sum", True), ("none", False)])
@pytest.mark.parametrize("size", CTC_SIZES)
def test_ctc_loss_gradient(rng, kernel, size, reduction, concat):
    _ctc_check(*_ctc_inputs(rng, *size), reduction=reduction, concat=concat)


def test_ctc_loss_gradient_blank_last_and_empty_targets(rng, kernel):
    logits, tg, il, tl = _ctc_inputs(rng, 11, 3, 6, 4, blank=5)
    _ctc_check(logits, tg, il, tl, blank=5, reduction="mean")
    _ctc_check(logits, tg, il, tl, blank=5, reduction="none", concat=True)
    # every target empty (S = 0): the gradient of the all-blank path
    logits, tg, il, tl = _ctc_inputs(rng, 9, 4, 3, 0, blank=1)
    _ctc_check(logits, tg, il, tl, blank=1, reduction="sum")
    # an item with no frames and no target (loss 0, no gradient) beside ordinary ones
    logits, tg, il, tl = _ctc_inputs(rng, 8, 3, 5, 3)
    il[1], tl[1] = 0, 0
    _ctc_check(logits, tg, il, tl, reduction="none")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_loss_gradient_zero_infinity(rng, kernel, reduction):
    """Items whose target cannot fit their frames: infinite loss. zero_infinity=True: loss and
    gradient 0 for them (the others as usual); False: torch's nan gradient at their frames."""
    logits, tg, il, tl = _ctc_inputs(rng, 6, 4, 5, 5)
    tg[0, :5] = [1, 2, 3, 4, 1]
    il[0], tl[0] = 3, 5  # 5 labels in 3 frames
    tg[2, :3] = [2, 2, 2]
    il[2], tl[2] = 4, 3  # repeats need 5 frames
    pg, tg_ = _ctc_check(logits, tg, il, tl, reduction=reduction, zero_infinity=True)
    assert not pg[:, 0].any() and not pg[:, 2].any()
    assert np.abs(tg_[:, 1]).max() > 0
    pg, tg_ = _ctc_check(logits, tg, il, tl, reduction="none", zero_infinity=False)
    assert np.isnan(tg_[:3, 0]).all() and not np.isnan(tg_[3:, 0]).any()  # torch's own
    assert np.array_equal(np.isnan(pg), np.isnan(tg_))


def test_ctc_loss_gradient_unbatched(rng):
    logits, tg, il, tl = _ctc_inputs(rng, 17, 1, 7, 5)
    lp = torch.tensor(logits[0]).log_softmax(1).numpy()
    L = int(tl[0])
    for reduction in ("mean", "none"):
        kw = dict(reduction=reduction)
        check(
            lambda x: F.ctc_loss(x, pr.tensor(tg[0, :L]), [int(il[0])], [L], **kw),
            lambda x: TF.ctc_loss(x, torch.tensor(tg[0, :L]), [int(il[0])], [L], **kw),
            [lp],
            terms=2 * 17,
        )


def test_ctc_loss_gradient_chained_past_the_loop_budget(rng, monkeypatch, kernel):
    """Under a budget of 300 iterations the table kernels need several dispatches for T = 200
    (as the forward's): the gradient must not change."""
    logits, tg, il, tl = _ctc_inputs(rng, 200, 3, 5, 9)
    il[0] = 200
    dev = backend.current()
    monkeypatch.setattr(dev, "_loop_budget", 300)
    from pyrite.ops import core

    assert core.max_loop_iterations() < 200 * 3
    _ctc_check(logits, tg, il, tl, reduction="sum")


def test_ctc_loss_double_backward_raises_as_torch(rng):
    """torch has no derivative of ctc_loss_backward: a second backward through the log_probs
    raises; the first (create_graph=True) still gives torch's values."""
    logits, tg, il, tl = _ctc_inputs(rng, 7, 2, 4, 2)
    lp = torch.tensor(logits).transpose(0, 1).log_softmax(2).detach().numpy().copy()
    x = pr.tensor(lp).requires_grad_()
    tx = torch.tensor(lp, requires_grad=True)
    loss = F.ctc_loss(x, pr.tensor(tg), pr.tensor(il), pr.tensor(tl))
    tloss = TF.ctc_loss(tx, torch.tensor(tg), torch.tensor(il), torch.tensor(tl))
    (gx,) = pr.autograd.grad(loss, [x], create_graph=True)
    (tgx,) = torch.autograd.grad(tloss, [tx], create_graph=True)
    assert_close(gx, tgx, atol=1e-5 * float(tgx.abs().max()))
    with pytest.raises(RuntimeError, match="not implemented"):
        tgx.pow(2).sum().backward()
    with pytest.raises(NotImplementedError, match="ctc_loss_backward"):
        gx.pow(2).sum().backward()


def test_ctc_loss_no_gradient_without_requires_grad(rng):
    logits, tg, il, tl = _ctc_inputs(rng, 5, 2, 4, 2)
    out = F.ctc_loss(pr.tensor(logits).transpose(0, 1), pr.tensor(tg), il.tolist(), tl.tolist())
    assert out.grad_fn is None and not out.requires_grad


# ---- scatter_reduce(reduce="prod") --------------------------------------------------------------
def _prod_inputs(rng, zeros):
    x = (rng.uniform(0.5, 1.5, (7, 5)) * rng.choice([-1, 1], (7, 5))).astype(np.float32)
    src = (rng.uniform(0.5, 1.5, (11, 5)) * rng.choice([-1, 1], (11, 5))).astype(np.float32)
    index = rng.integers(0, 7, (11, 5))
    index[:4, 1] = 3  # a group of four src elements into x[3, 1]
    if "src1" in zeros:
        src[0, 1] = 0.0  # one zero in that group
    if "src2" in zeros:
        src[0, 1] = src[2, 1] = 0.0  # two zeros in one group
    if "self" in zeros:
        x[3, 1] = 0.0  # self's zero in that group
        x[index[5, 2], 2] = 0.0
    return x, src, index


ZERO_CASES = ["none", "src1", "src2", "self", "self+src1"]


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("zeros", ZERO_CASES)
def test_scatter_reduce_prod_gradient(rng, include_self, zeros):
    """torch's rule with its zero handling: self and src (a transposed view, dim 1 of it) get
    the product of the others in their group; two zeros in a group give 0."""
    x, src, index = _prod_inputs(rng, zeros)
    kw = dict(include_self=include_self)
    idx_p, idx_t = pr.tensor(index.T.copy()), torch.tensor(index.T.copy())
    P, T = check(
        lambda a, s: pr.scatter_reduce(a.t(), 1, idx_p, s.t(), "prod", **kw),
        lambda a, s: torch.scatter_reduce(a.t(), 1, idx_t, s.t(), "prod", **kw),
        [x, src],
        terms=6,
    )
    if zeros == "src1":  # the zero's gradient is the product of the others, not 0
        assert T[1].grad[0, 1] != 0
    # dim 0 of contiguous inputs
    check(
        lambda a, s: a.scatter_reduce(0, pr.tensor(index), s, "prod", **kw),
        lambda a, s: a.scatter_reduce(0, torch.tensor(index), s, "prod", **kw),
        [x, src],
        terms=6,
    )


def test_scatter_reduce_prod_inplace_and_size_one(rng):
    x = rng.uniform(0.5, 2.0, (1,)).astype(np.float32)
    src = rng.uniform(0.5, 2.0, (3,)).astype(np.float32)
    src[1] = 0.0
    index = np.zeros(3, np.int64)
    check(
        lambda a, s: (a * 1.0).scatter_reduce_(0, pr.tensor(index), s, "prod"),
        lambda a, s: (a * 1.0).scatter_reduce_(0, torch.tensor(index), s, "prod"),
        [x, src],
        terms=3,
    )


# ---- grid_sample(mode="bicubic") ----------------------------------------------------------------
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_bicubic_gradient(rng, padding_mode, align):
    """Input and grid gradients: 16 taps, torch's cubic coefficients (A = -0.75); a transposed
    input, grid points outside [-1, 1] (each padding mode's taps)."""
    x = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)  # transposed to (2, 3, 5, 7)
    grid = (rng.random((2, 4, 6, 2)) * 2.8 - 1.4).astype(np.float32)
    kw = dict(mode="bicubic", padding_mode=padding_mode, align_corners=align)
    check(
        lambda a, g: F.grid_sample(a.transpose(-1, -2), g, **kw),
        lambda a, g: TF.grid_sample(a.transpose(-1, -2), g, **kw),
        [x, grid],
        terms=16,
    )
    # a 1 x 1 input and a 1-point grid; a 1-row input of prime width. With border or
    # reflection padding every tap along a size-1 dim reads the same element, so that
    # coordinate's gradient is 0 by cancellation (coefficients summing to 1): both sides are
    # rounding noise there, bounded by 16 taps of |x|·|w|·|coefficient'| (at most 2) times the
    # unnormalising scale (size / 2)
    for xs, gs in (((1, 1, 1, 1), (1, 1, 1, 2)), ((1, 2, 1, 13), (1, 3, 5, 2))):
        x1 = rng.standard_normal(xs).astype(np.float32)
        g1 = (rng.random(gs) * 2.4 - 1.2).astype(np.float32)
        w = rng.standard_normal((xs[0], xs[1], gs[1], gs[2])).astype(np.float32)
        P = [pr.tensor(x1).requires_grad_(), pr.tensor(g1).requires_grad_()]
        T = [torch.tensor(x1, requires_grad=True), torch.tensor(g1, requires_grad=True)]
        po, to = F.grid_sample(*P, **kw), TF.grid_sample(*T, **kw)
        assert_close(po, to, atol=sum_tol(16 * np.abs(x1).max(), 16 * 4), rtol=64 * F32_U)
        (po * pr.tensor(w)).sum().backward()
        (to * torch.tensor(w)).sum().backward()
        bound = 16 * np.abs(x1).max() * np.abs(w).sum(axis=1).max() * 2 * max(xs[2:])
        assert_close(P[0].grad, T[0].grad, atol=sum_tol(np.abs(w).sum(), 16 * w.size))
        assert_close(P[1].grad, T[1].grad, atol=sum_tol(bound, 16 * 4), rtol=64 * F32_U)


def test_grid_sample_bicubic_gradient_of_one_input(rng):
    """Only the grid (or only the input) requiring grad."""
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    grid = (rng.random((1, 3, 4, 2)) * 2.2 - 1.1).astype(np.float32)
    kw = dict(mode="bicubic", padding_mode="border", align_corners=False)
    for which in ([0], [1]):
        check(
            lambda a, g: F.grid_sample(a, g, **kw),
            lambda a, g: TF.grid_sample(a, g, **kw),
            [x, grid],
            terms=16,
            grads=which,
        )
