"""Backward rules of the nn functional ops training needs (losses, dropout, embedding,
convolution, pooling, norms, attention): each op's gradients against torch autograd on the same
random inputs of awkward sizes, with a non-contiguous input where the op reads strides."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.testing.tolerance import F32_U


def tol(terms=1):
    """f32 rounding of a gradient whose elements each sum `terms` products (plus a few ulps for
    exp/log/division in the elementwise part)."""
    return 64 * F32_U * max(terms, 1)


def check(fn_pr, fn_t, arrays, terms=1, grads=None, weights=True):
    """fn_pr(*pyrite tensors) and fn_t(*torch tensors) give the same output and the same
    gradients of Σ out·w (w random), for the arrays whose position is in `grads` (all)."""
    rng = np.random.default_rng(len(arrays) * 7919 + sum(a.size for a in arrays))
    grads = range(len(arrays)) if grads is None else grads
    P = [pr.tensor(a) for a in arrays]
    T = [torch.tensor(a) for a in arrays]
    for i in grads:
        P[i].requires_grad_()
        T[i].requires_grad_()
    op, ot = fn_pr(*P), fn_t(*T)
    t_out = ot.detach().numpy()
    np.testing.assert_allclose(op.detach().numpy(), t_out, rtol=tol(terms), atol=tol(terms))
    w = rng.standard_normal(t_out.shape).astype(np.float32) if weights else np.ones_like(t_out)
    (op * pr.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    for i in grads:
        tg = T[i].grad.numpy()
        assert P[i].grad is not None, f"no gradient for input {i}"
        scale = float(np.abs(tg).max()) if tg.size else 1.0
        np.testing.assert_allclose(
            P[i].grad.numpy(),
            tg,
            rtol=tol(terms),
            atol=tol(terms) * max(scale, 1e-30),
            err_msg=f"gradient of input {i}",
        )
    return P, T


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- losses --------------------------------------------------------------------------------
REDUCTIONS = ("none", "mean", "sum")


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "name,kw",
    [
        ("mse_loss", {}),
        ("l1_loss", {}),
        ("smooth_l1_loss", {"beta": 0.7}),
        ("smooth_l1_loss", {"beta": 0.0}),
        ("huber_loss", {"delta": 0.6}),
    ],
)
def test_regression_losses(rng, name, kw, reduction):
    x, t = randn(rng, 7, 5), randn(rng, 7, 5)
    check(
        lambda a, b: getattr(F, name)(
            a.transpose(0, 1), b.transpose(0, 1), reduction=reduction, **kw
        ),
        lambda a, b: getattr(TF, name)(
            a.transpose(0, 1), b.transpose(0, 1), reduction=reduction, **kw
        ),
        [x, t],
        terms=35,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_regression_losses_with_weight(rng, name, reduction):
    x, t, w = randn(rng, 3, 11), randn(rng, 3, 11), rng.random((3, 11)).astype(np.float32) + 0.1
    check(
        lambda a, b, c: getattr(F, name)(a, b, reduction=reduction, weight=c),
        lambda a, b, c: getattr(TF, name)(a, b, reduction=reduction, weight=c),
        [x, t, w],
        terms=33,
    )


def test_mse_broadcast_target(rng):
    x, t = randn(rng, 4, 3), randn(rng, 3)
    with pytest.warns(UserWarning):
        check(lambda a, b: F.mse_loss(a, b), lambda a, b: TF.mse_loss(a, b), [x, t], terms=12)


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(rng, reduction, log_target):
    x = randn(rng, 5, 3)
    t = rng.random((5, 3)).astype(np.float32) + 0.05
    if log_target:
        t = np.log(t)
    check(
        lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
        lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
        [x, t],
        terms=15,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(rng, reduction, weighted):
    x = rng.uniform(0.05, 0.95, (6, 5)).astype(np.float32)
    t = rng.random((6, 5)).astype(np.float32)
    w = rng.random(5).astype(np.float32) + 0.1
    check(
        lambda a, b: F.binary_cross_entropy(
            a, b, weight=pr.tensor(w) if weighted else None, reduction=reduction
        ),
        lambda a, b: TF.binary_cross_entropy(
            a, b, weight=torch.tensor(w) if weighted else None, reduction=reduction
        ),
        [x, t],
        terms=30,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos", [False, True])
def test_bce_with_logits(rng, reduction, weighted, pos):
    x, t = randn(rng, 6, 5) * 3, rng.random((6, 5)).astype(np.float32)
    w = rng.random(5).astype(np.float32) + 0.1
    pw = rng.random(5).astype(np.float32) * 3
    kw_p = {
        "weight": pr.tensor(w) if weighted else None,
        "pos_weight": pr.tensor(pw) if pos else None,
    }
    kw_t = {
        "weight": torch.tensor(w) if weighted else None,
        "pos_weight": torch.tensor(pw) if pos else None,
    }
    check(
        lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction, **kw_p),
        lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction, **kw_t),
        [x, t],
        terms=30,
    )


def test_bce_weight_not_differentiable(rng):
    x = pr.tensor(rng.uniform(0.1, 0.9, (3,)).astype(np.float32)).requires_grad_()
    w = pr.ones(3).requires_grad_()
    loss = F.binary_cross_entropy(x, pr.rand(3), weight=w)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        loss.backward()


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("log_input,full", [(True, False), (False, True)])
def test_poisson_nll(rng, reduction, log_input, full):
    x = rng.uniform(0.2, 2.0, (4, 7)).astype(np.float32)
    t = rng.uniform(0.0, 4.0, (4, 7)).astype(np.float32)
    check(
        lambda a, b: F.poisson_nll_loss(a, b, log_input=log_input, full=full, reduction=reduction),
        lambda a, b: TF.poisson_nll_loss(a, b, log_input=log_input, full=full, reduction=reduction),
        [x, t],
        terms=28,
    )


def _targets(rng, n, C, ignore):
    t = rng.integers(0, C, n).astype(np.int64)
    if ignore is not None:
        t[::3] = ignore
    return t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 2])
def test_nll_loss(rng, reduction, weighted, ignore):
    C = 5
    x = randn(rng, 7, C)
    t = _targets(rng, 7, C, ignore)
    w = rng.random(C).astype(np.float32) + 0.1
    ii = -100 if ignore is None else ignore
    check(
        lambda a: F.nll_loss(
            a,
            pr.tensor(t),
            weight=pr.tensor(w) if weighted else None,
            ignore_index=ii,
            reduction=reduction,
        ),
        lambda a: TF.nll_loss(
            a,
            torch.tensor(t),
            weight=torch.tensor(w) if weighted else None,
            ignore_index=ii,
            reduction=reduction,
        ),
        [x],
        terms=7,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 1])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_class_indices(rng, reduction, weighted, ignore, smoothing):
    N, C, L = 3, 7, 5  # (N, C, L) input: the class dim is 1, a spatial dim after it
    x = randn(rng, N, L, C)
    t = _targets(rng, N * L, C, ignore).reshape(N, L)
    w = rng.random(C).astype(np.float32) + 0.1
    ii = -100 if ignore is None else ignore
    check(
        lambda a: F.cross_entropy(
            a.transpose(1, 2),
            pr.tensor(t),
            weight=pr.tensor(w) if weighted else None,
            ignore_index=ii,
            reduction=reduction,
            label_smoothing=smoothing,
        ),
        lambda a: TF.cross_entropy(
            a.transpose(1, 2),
            torch.tensor(t),
            weight=torch.tensor(w) if weighted else None,
            ignore_index=ii,
            reduction=reduction,
            label_smoothing=smoothing,
        ),
        [x],
        terms=N * L * C,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(rng, reduction, weighted, smoothing):
    C = 6
    x = randn(rng, 5, C)
    t = rng.random((5, C)).astype(np.float32)
    t /= t.sum(1, keepdims=True)
    w = rng.random(C).astype(np.float32) + 0.1
    check(
        lambda a, b: F.cross_entropy(
            a,
            b,
            weight=pr.tensor(w) if weighted else None,
            reduction=reduction,
            label_smoothing=smoothing,
        ),
        lambda a, b: TF.cross_entropy(
            a,
            b,
            weight=torch.tensor(w) if weighted else None,
            reduction=reduction,
            label_smoothing=smoothing,
        ),
        [x, t],
        terms=30,
    )


def test_cross_entropy_unbatched_and_double_backward(rng):
    x = randn(rng, 11)
    check(
        lambda a: F.cross_entropy(a, pr.tensor(3)),
        lambda a: TF.cross_entropy(a, torch.tensor(3)),
        [x],
        terms=11,
    )
    # a gradient penalty through the rule: d/dx |d loss/dx|²
    xp = pr.tensor(randn(rng, 4, 5)).requires_grad_()
    xt = torch.tensor(xp.numpy(), requires_grad=True)
    tgt = rng.integers(0, 5, 4)
    (gp,) = pr.autograd.grad(F.cross_entropy(xp, pr.tensor(tgt)), xp, create_graph=True)
    (gt,) = torch.autograd.grad(TF.cross_entropy(xt, torch.tensor(tgt)), xt, create_graph=True)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=tol(20), atol=tol(20))


def test_cross_entropy_weight_not_differentiable(rng):
    x = pr.tensor(randn(rng, 3, 4)).requires_grad_()
    w = pr.ones(4).requires_grad_()
    loss = F.cross_entropy(x, pr.tensor([0, 1, 2]), weight=w)
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'weight'"):
        loss.backward()


# ---- dropout and embedding -----------------------------------------------------------------
ALPHA = 1.7580993408473766


@pytest.mark.parametrize(
    "name,shape,feature",
    [
        ("dropout", (37, 5), False),
        ("dropout1d", (3, 11, 11), True),
        # enough channels (33, 26, 22, 27) that all kept, 0.7^n, is negligible
        ("dropout2d", (2, 13, 3, 4), True),
        ("dropout3d", (2, 11, 2, 3, 5), True),
        ("alpha_dropout", (41, 3), False),
        ("feature_alpha_dropout", (3, 9, 5), True),
    ],
)
@pytest.mark.parametrize("p", [0.3, 1.0])
def test_dropout_gradient_is_the_forward_mask(rng, name, shape, feature, p):
    pr.manual_seed(int(rng.integers(2**31)))  # the draw depends on this test, not on the order
    x = pr.tensor(randn(rng, *shape) + 3.0).requires_grad_()  # no zero inputs
    w = randn(rng, *shape)
    kw = {"training": True} if "alpha" in name else {}
    out = getattr(F, name)(x, p, **kw)
    (out * pr.tensor(w)).sum().backward()
    m = x.grad.numpy() / w  # the mask times the scale
    o, xs = out.detach().numpy(), x.detach().numpy()
    if p == 1.0:
        np.testing.assert_array_equal(m, 0.0)
        np.testing.assert_array_equal(o, 0.0)
        return
    alpha = "alpha" in name
    scale = 1 / np.sqrt((ALPHA**2 * p + 1) * (1 - p)) if alpha else 1 / (1 - p)
    kept = m > scale / 2
    np.testing.assert_allclose(m, np.where(kept, scale, 0.0), rtol=tol(), atol=tol())
    b = np.where(kept, ALPHA * scale * p, ALPHA * scale * (p - 1)) if alpha else 0.0
    np.testing.assert_allclose(o, xs * m + b, rtol=tol(4), atol=tol(4))
    assert 0 < kept.mean() < 1
    if feature:  # one draw per (sample, channel)
        k = kept.reshape(shape[0], shape[1], -1)
        assert (k == k[..., :1]).all()


def test_dropout_inplace_and_eval(rng):
    x = pr.tensor(randn(rng, 5, 4)).requires_grad_()
    assert F.dropout(x, 0.5, training=False) is x
    with pytest.raises(RuntimeError, match="leaf Variable"):
        F.dropout(x, 0.5, inplace=True)
    h = x * 1.0
    y = F.dropout(h, 0.5, inplace=True)
    assert y is h
    y.sum().backward()
    assert set(np.unique(x.grad.numpy()).tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("padding_idx,freq", [(None, False), (2, False), (-1, True)])
def test_embedding(rng, padding_idx, freq):
    V, Dm = 7, 5
    idx = rng.integers(0, V, (4, 6))
    idx[0, :3] = V - 1  # repeats, and the padding row when padding_idx=-1
    idx[1, 0] = 2
    check(
        lambda w: F.embedding(pr.tensor(idx), w, padding_idx=padding_idx, scale_grad_by_freq=freq),
        lambda w: TF.embedding(
            torch.tensor(idx), w, padding_idx=padding_idx, scale_grad_by_freq=freq
        ),
        [randn(rng, V, Dm)],
        terms=24,
    )


def test_embedding_max_norm(rng):
    V, Dm = 6, 3
    idx = np.array([[0, 2, 2], [5, 1, 0]])
    w0 = randn(rng, V, Dm) * 3
    wp = pr.tensor(w0).requires_grad_()
    wt = torch.tensor(w0, requires_grad=True)
    g = randn(rng, 2, 3, Dm)
    (F.embedding(pr.tensor(idx), wp, max_norm=1.0) * pr.tensor(g)).sum().backward()
    (TF.embedding(torch.tensor(idx), wt, max_norm=1.0) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(wp.grad.numpy(), wt.grad.numpy(), rtol=tol(6), atol=tol(6))


# ---- convolution ---------------------------------------------------------------------------
CONV_CASES = [
    # dims, N, C, O, spatial, kernel, stride, padding, dilation, groups
    (1, 2, 3, 5, (13,), (3,), 1, 0, 1, 1),
    (1, 3, 4, 6, (17,), (4,), 3, 2, 2, 2),
    (1, 1, 3, 3, (11,), (3,), 1, "same", 2, 3),
    (2, 2, 3, 4, (7, 9), (3, 2), 1, 1, 1, 1),
    (2, 2, 4, 6, (11, 8), (3, 3), (2, 3), (1, 2), (2, 1), 2),
    (2, 1, 2, 3, (6, 7), (2, 3), 1, "same", 1, 1),
    (2, 2, 5, 5, (5, 5), (1, 1), 1, 0, 1, 1),
    (2, 3, 6, 6, (9, 7), (3, 3), 2, 1, 1, 6),
    (3, 2, 2, 3, (5, 6, 4), (2, 3, 2), (1, 2, 1), 1, 1, 1),
    (3, 1, 4, 2, (5, 5, 6), (3, 2, 2), 2, (1, 0, 1), (1, 2, 1), 2),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv(rng, case):
    dims, N, C, O, sp, ker, stride, padding, dil, groups = case
    x = randn(rng, N, C, *sp)
    w = randn(rng, O, C // groups, *ker)
    b = randn(rng, O)
    name = f"conv{dims}d"
    kw = dict(stride=stride, padding=padding, dilation=dil, groups=groups)
    terms = C * int(np.prod(ker)) + N * int(np.prod(sp))
    check(
        lambda a, c, d: getattr(F, name)(a, c, d, **kw),
        lambda a, c, d: getattr(TF, name)(a, c, d, **kw),
        [x, w, b],
        terms=terms,
    )


def test_conv_unbatched_noncontiguous_and_double_backward(rng):
    x = randn(rng, 9, 3, 7)  # a (3, 7, 9) view of it, transposed
    w = randn(rng, 4, 3, 2, 3)
    check(
        lambda a, c: F.conv2d(a.permute(1, 2, 0), c, padding=1),
        lambda a, c: TF.conv2d(a.permute(1, 2, 0), c, padding=1),
        [x, w],
        terms=60,
    )
    # gradient penalty: d/dw |d out/dx|² (the input gradient is a recorded transposed conv)
    xp, wp = pr.tensor(randn(rng, 2, 3, 6, 5)).requires_grad_(), pr.tensor(w).requires_grad_()
    xt, wt = torch.tensor(xp.numpy(), requires_grad=True), torch.tensor(w, requires_grad=True)
    (gp,) = pr.autograd.grad(F.conv2d(xp, wp, stride=2).square().sum(), xp, create_graph=True)
    (gt,) = torch.autograd.grad(TF.conv2d(xt, wt, stride=2).square().sum(), xt, create_graph=True)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    s = float(np.abs(wt.grad.numpy()).max())
    np.testing.assert_allclose(wp.grad.numpy(), wt.grad.numpy(), rtol=tol(400), atol=tol(400) * s)


@pytest.mark.parametrize(
    "dims,N,C,O,sp,ker,stride,padding,out_pad,dil,groups",
    [
        (1, 2, 4, 3, (7,), (3,), 2, 1, 1, 1, 1),
        (2, 2, 4, 6, (5, 4), (3, 2), (2, 1), (1, 0), (1, 0), (1, 2), 2),
        (2, 1, 3, 2, (4, 5), (2, 2), 1, 0, 0, 3, 1),
        (3, 1, 2, 2, (3, 4, 3), (2, 2, 3), 2, 1, (0, 1, 1), 1, 1),
    ],
)
def test_conv_transpose(rng, dims, N, C, O, sp, ker, stride, padding, out_pad, dil, groups):
    x = randn(rng, N, C, *sp)
    w = randn(rng, C, O // groups, *ker)
    b = randn(rng, O)
    name = f"conv_transpose{dims}d"
    kw = dict(stride=stride, padding=padding, output_padding=out_pad, groups=groups, dilation=dil)
    check(
        lambda a, c, d: getattr(F, name)(a, c, d, **kw),
        lambda a, c, d: getattr(TF, name)(a, c, d, **kw),
        [x, w, b],
        terms=C * int(np.prod(ker)) + N * int(np.prod(sp)) * 4,
    )


# ---- pooling -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "dims,shape,kw",
    [
        (1, (2, 3, 13), dict(kernel_size=3)),
        (1, (3, 11), dict(kernel_size=4, stride=2, padding=2, dilation=2, ceil_mode=True)),
        (2, (2, 3, 7, 9), dict(kernel_size=2)),
        (2, (1, 2, 11, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=1, ceil_mode=True)),
        (2, (2, 5, 9, 7), dict(kernel_size=3, stride=1, dilation=2)),
        (3, (1, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2), padding=(1, 0, 1))),
    ],
)
@pytest.mark.parametrize("indices", [False, True])
def test_max_pool(rng, dims, shape, kw, indices):
    x = randn(rng, *shape)

    def pr_fn(a):
        r = getattr(F, f"max_pool{dims}d")(a, return_indices=indices, **kw)
        return r[0] if indices else r

    def t_fn(a):
        r = getattr(TF, f"max_pool{dims}d")(a, return_indices=indices, **kw)
        return r[0] if indices else r

    check(pr_fn, t_fn, [x], terms=8)


def test_max_pool_with_indices_and_noncontiguous(rng):
    x = randn(rng, 2, 9, 3, 8)
    check(
        lambda a: F.max_pool2d_with_indices(a.transpose(1, 2), 2, 2)[0],
        lambda a: TF.max_pool2d_with_indices(a.transpose(1, 2), 2, 2)[0],
        [x],
        terms=4,
    )


@pytest.mark.parametrize(
    "dims,shape,out",
    [
        (1, (2, 3, 10), 4),
        (2, (2, 3, 7, 9), (3, None)),
        (2, (3, 5, 6), (4, 1)),
        (3, (1, 2, 5, 4, 7), (2, 3, 3)),
    ],
)
def test_adaptive_max_pool(rng, dims, shape, out):
    check(
        lambda a: getattr(F, f"adaptive_max_pool{dims}d")(a, out),
        lambda a: getattr(TF, f"adaptive_max_pool{dims}d")(a, out),
        [randn(rng, *shape)],
        terms=8,
    )


@pytest.mark.parametrize(
    "dims,shape,kw",
    [
        (1, (2, 3, 13), dict(kernel_size=3)),
        (1, (3, 11), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
        (1, (2, 2, 12), dict(kernel_size=3, padding=1, count_include_pad=False)),
        (2, (2, 3, 7, 9), dict(kernel_size=2)),
        (2, (1, 2, 11, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=1, ceil_mode=True)),
        (
            2,
            (2, 2, 9, 7),
            dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        ),
        (2, (2, 2, 8, 7), dict(kernel_size=3, stride=2, padding=1, divisor_override=5)),
        (3, (1, 2, 5, 6, 7), dict(kernel_size=2, stride=(1, 2, 2), padding=(1, 0, 1))),
    ],
)
def test_avg_pool(rng, dims, shape, kw):
    check(
        lambda a: getattr(F, f"avg_pool{dims}d")(a, **kw),
        lambda a: getattr(TF, f"avg_pool{dims}d")(a, **kw),
        [randn(rng, *shape)],
        terms=12,
    )


@pytest.mark.parametrize(
    "dims,shape,out",
    [
        (1, (2, 3, 10), 4),
        (1, (3, 7), 1),
        (2, (2, 3, 7, 9), (3, None)),
        (2, (3, 5, 6), (4, 1)),
        (2, (2, 4, 5, 5), 1),
        (3, (1, 2, 5, 4, 7), (2, 3, 3)),
    ],
)
def test_adaptive_avg_pool(rng, dims, shape, out):
    check(
        lambda a: getattr(F, f"adaptive_avg_pool{dims}d")(
            a.transpose(-1, -2).transpose(-1, -2), out
        ),
        lambda a: getattr(TF, f"adaptive_avg_pool{dims}d")(a, out),
        [randn(rng, *shape)],
        terms=16,
    )


def test_lp_pool_and_avg_double_backward(rng):
    x = np.abs(randn(rng, 2, 3, 8, 7)) + 0.5
    check(
        lambda a: F.lp_pool2d(a, 2.0, 3, stride=2),
        lambda a: TF.lp_pool2d(a, 2.0, 3, stride=2),
        [x],
        terms=20,
    )
    xp = pr.tensor(x).requires_grad_()
    xt = torch.tensor(x, requires_grad=True)
    (gp,) = pr.autograd.grad(F.avg_pool2d(xp * xp, 3, 2, 1).sum(), xp, create_graph=True)
    (gt,) = torch.autograd.grad(TF.avg_pool2d(xt * xt, 3, 2, 1).sum(), xt, create_graph=True)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=tol(20), atol=tol(20))


# ---- normalisation -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7, 3), (4, 5, 6), (2, 3, 5, 4)])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm(rng, shape, training, affine):
    C = shape[1]
    x = randn(rng, *shape) * 2 + 1
    w, b = randn(rng, C), randn(rng, C)
    rm0, rv0 = randn(rng, C), rng.random(C).astype(np.float32) + 0.5
    rms = {}

    def run(lib, fn):
        def f(a, c, d):
            rm, rv = lib.tensor(rm0.copy()), lib.tensor(rv0.copy())
            rms[lib.__name__] = (rm, rv)
            return fn(a, rm, rv, c if affine else None, d if affine else None, training, 0.2, 1e-4)

        return f

    n = int(np.prod(shape)) // C
    check(
        run(pr, F.batch_norm),
        run(torch, TF.batch_norm),
        [x, w, b],
        terms=n,
        grads=[0, 1, 2] if affine else [0],
    )
    for p, t in zip(rms["pyrite"], rms["torch"]):
        np.testing.assert_allclose(p.numpy(), t.numpy(), rtol=tol(n), atol=tol(n))


def test_batch_norm_two_forwards_then_backward_and_double_backward(rng):
    x1, x2 = randn(rng, 5, 3, 4), randn(rng, 5, 3, 4)
    w = randn(rng, 3)
    P = [pr.tensor(a).requires_grad_() for a in (x1, x2, w)]
    T = [torch.tensor(a, requires_grad=True) for a in (x1, x2, w)]
    rp, vp = pr.zeros(3), pr.ones(3)
    rt, vt = torch.zeros(3), torch.ones(3)
    lp = (F.batch_norm(P[0], rp, vp, P[2], None, True) ** 3).sum()
    lp = lp + (F.batch_norm(P[1], rp, vp, P[2], None, True) ** 3).sum()
    lt = (TF.batch_norm(T[0], rt, vt, T[2], None, True) ** 3).sum()
    lt = lt + (TF.batch_norm(T[1], rt, vt, T[2], None, True) ** 3).sum()
    (gp,) = pr.autograd.grad(lp, P[0], create_graph=True)
    (gt,) = torch.autograd.grad(lt, T[0], create_graph=True)
    np.testing.assert_allclose(gp.numpy(), gt.detach().numpy(), rtol=tol(20), atol=tol(20) * 10)
    (gp * gp).sum().backward()
    (gt * gt).sum().backward()
    for p, t in zip(P[::2], T[::2]):
        s = float(np.abs(t.grad.numpy()).max())
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=tol(60), atol=tol(60) * s)


@pytest.mark.parametrize("shape", [(2, 3, 7), (3, 2, 4, 5)])
@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm(rng, shape, use_input_stats):
    C = shape[1]
    x = randn(rng, *shape) + 0.5
    w, b = randn(rng, C), randn(rng, C)
    rm0, rv0 = randn(rng, C), rng.random(C).astype(np.float32) + 0.5
    n = int(np.prod(shape[2:]))

    def run(lib, fn):
        return lambda a, c, d: fn(
            a, lib.tensor(rm0), lib.tensor(rv0), c, d, use_input_stats, 0.1, 1e-5
        )

    check(run(pr, F.instance_norm), run(torch, TF.instance_norm), [x, w, b], terms=n * shape[0])


@pytest.mark.parametrize(
    "shape,G", [((2, 6, 5), 3), ((3, 4, 3, 5), 2), ((2, 5, 7), 5), ((4, 3), 1)]
)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(rng, shape, G, affine):
    C = shape[1]
    x = randn(rng, *shape) * 3 - 1
    w, b = randn(rng, C), randn(rng, C)
    n = int(np.prod(shape)) // G
    check(
        lambda a, c, d: F.group_norm(a, G, c if affine else None, d if affine else None),
        lambda a, c, d: TF.group_norm(a, G, c if affine else None, d if affine else None),
        [x, w, b],
        terms=n,
        grads=[0, 1, 2] if affine else [0],
    )


# ---- attention -----------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [None, "bool", "float", "causal", "dead"])
def test_scaled_dot_product_attention(rng, mask):
    B, H, L, S, E = 2, 3, 5, 7, 4
    q, k, v = randn(rng, B, H, L, E), randn(rng, B, H, S, E), randn(rng, B, H, S, 6)
    m = None
    if mask in ("bool", "dead"):
        m = rng.random((L, S)) > 0.4
        m[:, 0] = True
        if mask == "dead":
            m[2] = False  # a query that attends to nothing gives 0
    elif mask == "float":
        m = randn(rng, B, 1, L, S)

    def run(lib, fn):
        def f(a, b, c):
            mm = None if m is None else lib.tensor(m)
            return fn(a, b, c, attn_mask=mm, is_causal=mask == "causal", scale=0.7)

        return f

    check(
        run(pr, F.scaled_dot_product_attention),
        run(torch, TF.scaled_dot_product_attention),
        [q, k, v],
        terms=S * E,
    )


def test_sdpa_gqa_and_noncontiguous(rng):
    q, k, v = randn(rng, 2, 4, 3, 5), randn(rng, 2, 2, 6, 5), randn(rng, 2, 2, 6, 5)
    check(
        lambda a, b, c: F.scaled_dot_product_attention(a, b, c, enable_gqa=True),
        lambda a, b, c: TF.scaled_dot_product_attention(a, b, c, enable_gqa=True),
        [q, k, v],
        terms=30,
    )
    x = randn(rng, 2, 5, 3, 4)  # (B, L, H, E) transposed to (B, H, L, E)
    check(
        lambda a: F.scaled_dot_product_attention(
            a.transpose(1, 2), a.transpose(1, 2), a.transpose(1, 2), is_causal=True
        ),
        lambda a: TF.scaled_dot_product_attention(
            a.transpose(1, 2), a.transpose(1, 2), a.transpose(1, 2), is_causal=True
        ),
        [x],
        terms=30,
    )
