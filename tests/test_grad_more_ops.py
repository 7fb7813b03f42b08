"""Backward rules of the resampling, folding, linear-algebra helpers, scans and margin losses
(interpolate, fold/unfold, cosine_similarity ... triplet_margin_loss): each op's gradients against
torch autograd on the same random inputs of awkward sizes, with non-contiguous inputs."""

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


def check(fn_pr, fn_t, arrays, terms=1, grads=None):
    """fn_pr(*pyrite tensors) and fn_t(*torch tensors) give the same output(s) and the same
    gradients of Σ out·w (w random), for the arrays whose position is in `grads` (all)."""
    rng = np.random.default_rng(len(arrays) * 7919 + sum(a.size for a in arrays))
    grads = range(len(arrays)) if grads is None else grads
    P = [pr.tensor(a) for a in arrays]
    T = [torch.tensor(a) for a in arrays]
    for i in grads:
        P[i].requires_grad_()
        T[i].requires_grad_()
    op, ot = fn_pr(*P), fn_t(*T)
    op = op if isinstance(op, (tuple, list)) else (op,)
    ot = ot if isinstance(ot, (tuple, list)) else (ot,)
    lp = lt = 0
    for a, b in zip(op, ot):
        if not b.dtype.is_floating_point:
            np.testing.assert_array_equal(a.numpy(), b.numpy())
            continue
        t_out = b.detach().numpy()
        np.testing.assert_allclose(a.detach().numpy(), t_out, rtol=tol(terms), atol=tol(terms))
        w = rng.standard_normal(t_out.shape).astype(np.float32)
        lp = lp + (a * pr.tensor(w)).sum()
        lt = lt + (b * torch.tensor(w)).sum()
    lp.backward()
    lt.backward()
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


# ---- interpolate -----------------------------------------------------------------------------
INTERP = [
    ((2, 3, 7), dict(size=13, mode="nearest")),
    ((2, 3, 11), dict(scale_factor=0.6, mode="nearest")),
    ((2, 3, 7), dict(size=12, mode="nearest-exact")),
    ((2, 3, 7), dict(size=13, mode="linear", align_corners=False)),
    ((2, 3, 7), dict(size=5, mode="linear", align_corners=True)),
    ((2, 3, 5, 7), dict(size=(11, 3), mode="nearest")),
    ((1, 2, 5, 7), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 5, 7), dict(scale_factor=(1.7, 0.6), mode="bilinear", align_corners=False)),
    ((2, 3, 5, 7), dict(size=(8, 13), mode="bilinear", align_corners=True)),
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bicubic", align_corners=False)),
    ((2, 3, 5, 7), dict(scale_factor=1.5, mode="bicubic", align_corners=True)),
    ((1, 2, 3, 5, 4), dict(size=(4, 7, 3), mode="trilinear", align_corners=False)),
    ((1, 2, 3, 5, 4), dict(scale_factor=(2, 1.5, 0.5), mode="nearest")),
    ((2, 3, 7, 9), dict(size=(3, 4), mode="area")),
    ((2, 3, 11, 13), dict(size=(5, 4), mode="bilinear", antialias=True)),
    ((2, 3, 11, 13), dict(size=(5, 6), mode="bicubic", antialias=True)),
]


@pytest.mark.parametrize("shape,kw", INTERP)
def test_interpolate(rng, shape, kw):
    x = randn(rng, *shape[:-2], shape[-1], shape[-2]) if len(shape) > 3 else randn(rng, *shape)
    nc = len(shape) > 3  # a non-contiguous input: the last two dims transposed

    def f(mod):
        def run(a):
            return mod.interpolate(a.transpose(-1, -2) if nc else a, **kw)

        return run

    check(f(F), f(TF), [x], terms=16)


def test_upsample_module(rng):
    x = randn(rng, 2, 3, 4, 5)
    P, T = check(
        lambda a: pr.nn.Upsample(scale_factor=2, mode="bilinear")(a),
        lambda a: torch.nn.Upsample(scale_factor=2, mode="bilinear")(a),
        [x],
        terms=16,
    )


def test_interpolate_double_backward(rng):
    x = randn(rng, 1, 2, 5, 6)
    w = randn(rng, 1, 2, 9, 4)
    res = []
    for lib, Fm in ((pr, F), (torch, TF)):
        a = lib.tensor(x).requires_grad_()
        y = Fm.interpolate(a * a, size=(9, 4), mode="bilinear", align_corners=False)
        (g,) = lib.autograd.grad((y * lib.tensor(w)).sum(), a, create_graph=True)
        (g * g).sum().backward()
        res.append(a.grad.numpy())
    np.testing.assert_allclose(res[0], res[1], rtol=tol(64), atol=tol(64))


# ---- fold / unfold ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw",
    [
        dict(kernel_size=(2, 3)),
        dict(kernel_size=3, dilation=(1, 2), padding=1, stride=(2, 1)),
    ],
)
def test_unfold_fold(rng, kw):
    x = randn(rng, 2, 3, 9, 7)  # (N, C, W, H) transposed below: a non-contiguous input
    check(
        lambda a: F.unfold(a.transpose(-1, -2), **kw),
        lambda a: TF.unfold(a.transpose(-1, -2), **kw),
        [x],
        terms=9,
    )
    L = TF.unfold(torch.zeros(1, 1, 7, 9), **kw).shape[-1]
    k = kw["kernel_size"]
    K = k[0] * k[1] if isinstance(k, tuple) else k * k
    c = randn(rng, 2, L, 3 * K)
    check(
        lambda a: F.fold(a.transpose(1, 2), (7, 9), **kw),
        lambda a: TF.fold(a.transpose(1, 2), (7, 9), **kw),
        [c],
        terms=9,
    )
    c1 = randn(rng, 3 * K, L)  # unbatched
    check(
        lambda a: F.fold(a, output_size=(7, 9), **kw),
        lambda a: TF.fold(a, output_size=(7, 9), **kw),
        [c1],
        terms=9,
    )


@pytest.mark.parametrize("dim,size,step", [(1, 3, 2), (-1, 2, 5), (0, 1, 1), (1, 4, 1)])
def test_tensor_unfold(rng, dim, size, step):
    x = randn(rng, 5, 11)
    check(
        lambda a: a.t().unfold(dim, size, step),
        lambda a: a.t().unfold(dim, size, step),
        [x],
        terms=4,
    )


# ---- distances, normalize, bilinear ------------------------------------------------------------
def test_cosine_similarity(rng):
    a, b = randn(rng, 7, 5), randn(rng, 3, 1, 7)
    check(
        lambda x, y: F.cosine_similarity(x.t(), y, dim=-1),
        lambda x, y: TF.cosine_similarity(x.t(), y, dim=-1),
        [a, b],
        terms=8,
    )
    check(
        lambda x, y: F.cosine_similarity(x, y, 0),
        lambda x, y: TF.cosine_similarity(x, y, 0),
        [randn(rng, 11, 3), randn(rng, 11, 3)],
        terms=12,
    )


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0])
def test_pairwise_distance(rng, p):
    a, b = randn(rng, 7, 5), randn(rng, 5)
    check(
        lambda x, y: F.pairwise_distance(x.t(), y[:, None].expand(5, 7), p=p, keepdim=True),
        lambda x, y: TF.pairwise_distance(x.t(), y[:, None].expand(5, 7), p=p, keepdim=True),
        [a, b],
        terms=8,
    )


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, -1), (3.0, 0)])
def test_normalize(rng, p, dim):
    check(
        lambda x: F.normalize(x.transpose(0, 2), p=p, dim=dim),
        lambda x: TF.normalize(x.transpose(0, 2), p=p, dim=dim),
        [randn(rng, 3, 5, 7)],
        terms=8,
    )


def test_bilinear(rng):
    x1, x2, w, bias = randn(rng, 2, 3, 5), randn(rng, 2, 3, 4), randn(rng, 7, 5, 4), randn(rng, 7)
    check(F.bilinear, TF.bilinear, [x1, x2, w, bias], terms=20)
    check(
        lambda a, b, c: F.bilinear(a, b, c), lambda a, b, c: TF.bilinear(a, b, c), [x1, x2, w], 20
    )


# ---- products ---------------------------------------------------------------------------------
def test_products(rng):
    check(pr.outer, torch.outer, [randn(rng, 5), randn(rng, 3)])
    check(
        lambda a, b: pr.ger(a[::2], b),
        lambda a, b: torch.ger(a[::2], b),
        [randn(rng, 9), randn(rng, 3)],
    )
    i, a, b = randn(rng, 1, 5), randn(rng, 3, 5, 7), randn(rng, 3, 7, 5)
    check(
        lambda x, y, z: pr.baddbmm(x, y, z.transpose(1, 2), beta=0.5, alpha=-1.5),
        lambda x, y, z: torch.baddbmm(x, y, z.transpose(1, 2), beta=0.5, alpha=-1.5),
        [i, a, randn(rng, 3, 5, 7)],
        terms=8,
    )
    check(
        lambda x, y, z: pr.addbmm(x, y, z, alpha=2.0),
        lambda x, y, z: torch.addbmm(x, y, z, alpha=2.0),
        [i, a, b],
        terms=24,
    )
    check(
        lambda x, y, z: pr.addmv(x, y, z, beta=0.3),
        lambda x, y, z: torch.addmv(x, y, z, beta=0.3),
        [randn(rng, 5), randn(rng, 7, 5).T.copy(), randn(rng, 7)],
        terms=8,
    )
    check(
        lambda x, y, z: pr.addr(x, y, z, beta=0.3, alpha=2.0),
        lambda x, y, z: torch.addr(x, y, z, beta=0.3, alpha=2.0),
        [randn(rng, 5, 3), randn(rng, 5), randn(rng, 3)],
    )


# ---- diagonals ---------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 2, -1])
def test_diag(rng, k):
    check(lambda a: pr.diag(a[::2], k), lambda a: torch.diag(a[::2], k), [randn(rng, 9)])
    check(lambda a: pr.diag(a.t(), k), lambda a: torch.diag(a.t(), k), [randn(rng, 5, 4)])
    check(
        lambda a: pr.diag_embed(a.transpose(0, 1), k, 0, 2),
        lambda a: torch.diag_embed(a.transpose(0, 1), k, 0, 2),
        [randn(rng, 3, 2, 4)],
    )
    check(
        lambda a: pr.diag_embed(a, offset=k),
        lambda a: torch.diag_embed(a, offset=k),
        [randn(rng, 2, 5)],
    )


def test_block_diag(rng):
    check(
        lambda a, b, c, d: pr.block_diag(a, b.t(), c, d),
        lambda a, b, c, d: torch.block_diag(a, b.t(), c, d),
        [randn(rng, 2, 3), randn(rng, 4, 1), randn(rng, 5), np.float32(rng.standard_normal())],
    )


# ---- moments, extremes, scans -------------------------------------------------------------------
@pytest.mark.parametrize("fn", ["std_mean", "var_mean"])
@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(dim=1),
        dict(dim=(0, 2), keepdim=True, correction=0),
        dict(dim=-1, unbiased=False),
    ],
)
def test_moments_mean(rng, fn, kw):
    check(
        lambda a: getattr(pr, fn)(a.transpose(0, 1), **kw),
        lambda a: getattr(torch, fn)(a.transpose(0, 1), **kw),
        [randn(rng, 5, 3, 7)],
        terms=40,
    )


@pytest.mark.parametrize("kw", [dict(), dict(dim=1), dict(dim=0, keepdim=True)])
def test_aminmax(rng, kw):
    x = rng.permutation(35).astype(np.float32).reshape(5, 7) * 0.3  # no ties
    # torch < 2.13 has no derivative for aminmax: its reference is the pair amin, amax
    ref = lambda a: (torch.amin(a.t(), **kw), torch.amax(a.t(), **kw))  # noqa: E731
    check(lambda a: pr.aminmax(a.t(), **kw), ref, [x])
    check(lambda a: a.aminmax(**kw), lambda a: ref(a.t()), [x])


@pytest.mark.parametrize("fn", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, -1])
def test_cum_extreme(rng, fn, dim):
    x = rng.permutation(66).astype(np.float32).reshape(6, 11) * 0.1
    check(lambda a: getattr(pr, fn)(a.t(), dim), lambda a: getattr(torch, fn)(a.t(), dim), [x])
    check(lambda a: getattr(a, fn)(dim=dim), lambda a: getattr(a, fn)(dim=dim), [x])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp(rng, dim):
    x = randn(rng, 7, 13) * 3
    check(
        lambda a: pr.logcumsumexp(a.t(), dim),
        lambda a: torch.logcumsumexp(a.t(), dim),
        [x],
        terms=13,
    )


# ---- margin and embedding losses ------------------------------------------------------------
def away(rng, *shape, lo=0.05):
    """Random values at least `lo` from 0 (the losses' kinks sit at their hinge's 0 below)."""
    x = randn(rng, *shape)
    return (np.sign(x) * (np.abs(x) + lo)).astype(np.float32)


def pm1(rng, *shape):
    return rng.choice([-1.0, 1.0], size=shape).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_pair_losses(rng, reduction):
    a, b = randn(rng, 7, 3), randn(rng, 3)
    y = pm1(rng, 3, 1)
    r = reduction
    check(
        lambda x1, x2, t: F.margin_ranking_loss(x1.t(), x2.expand(7, 3).t(), t, 0.3, reduction=r),
        lambda x1, x2, t: TF.margin_ranking_loss(x1.t(), x2.expand(7, 3).t(), t, 0.3, reduction=r),
        [a, b, y],
        grads=(0, 1),
    )
    x = away(rng, 5, 4) + 1.0
    t = rng.choice([-1.0, 1.0, 2.0], size=(4, 5)).astype(np.float32)
    check(
        lambda i, tt: F.hinge_embedding_loss(i.t(), tt, margin=0.7, reduction=r),
        lambda i, tt: TF.hinge_embedding_loss(i.t(), tt, margin=0.7, reduction=r),
        [x, t],
        grads=(0,),
    )
    check(
        lambda i, tt: F.soft_margin_loss(i.t(), tt, reduction=r),
        lambda i, tt: TF.soft_margin_loss(i.t(), tt, reduction=r),
        [randn(rng, 5, 4) * 3, pm1(rng, 4, 5)],
        grads=(0,),
    )
    w = np.abs(randn(rng, 6)) + 0.1
    check(
        lambda i, tt, ww: F.multilabel_soft_margin_loss(i.t(), tt, weight=ww, reduction=r),
        lambda i, tt, ww: TF.multilabel_soft_margin_loss(i.t(), tt, weight=ww, reduction=r),
        [randn(rng, 6, 3) * 2, rng.integers(0, 2, (3, 6)).astype(np.float32), w],
        terms=6,
    )
    check(
        lambda i, tt: F.multilabel_soft_margin_loss(i, tt, reduction=r),
        lambda i, tt: TF.multilabel_soft_margin_loss(i, tt, reduction=r),
        [randn(rng, 3, 5), rng.random((3, 5)).astype(np.float32)],
        terms=5,
    )


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_embedding_losses(rng, reduction):
    r = reduction
    y = pm1(rng, 5)
    y[0] = 0.0  # neither: no loss
    check(
        lambda a, b, t: F.cosine_embedding_loss(a.t(), b, t, margin=-0.9, reduction=r),
        lambda a, b, t: TF.cosine_embedding_loss(a.t(), b, t, margin=-0.9, reduction=r),
        [randn(rng, 7, 5), randn(rng, 5, 7), y],
        grads=(0, 1),
        terms=8,
    )
    check(
        lambda a, b, t: F.cosine_embedding_loss(a, b, t, reduction=r),
        lambda a, b, t: TF.cosine_embedding_loss(a, b, t, reduction=r),
        [randn(rng, 7), randn(rng, 7), np.float32(-1.0)],
        grads=(0, 1),
        terms=8,
    )
    a, p, n = randn(rng, 4, 6), randn(rng, 4, 6), randn(rng, 4, 6)
    for swap in (False, True):
        for pn in (2, 1):
            check(
                lambda x, y_, z: F.triplet_margin_loss(
                    x, y_, z, margin=0.5, p=pn, swap=swap, reduction=r
                ),
                lambda x, y_, z: TF.triplet_margin_loss(
                    x, y_, z, margin=0.5, p=pn, swap=swap, reduction=r
                ),
                [a, p, n],
                terms=8,
            )
    check(
        lambda x, y_, z: F.triplet_margin_with_distance_loss(x, y_, z, swap=True, reduction=r),
        lambda x, y_, z: TF.triplet_margin_with_distance_loss(x, y_, z, swap=True, reduction=r),
        [a, p, n],
        terms=8,
    )


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(rng, reduction, p):
    x = rng.permutation(35).astype(np.float32).reshape(5, 7) * 0.13  # hinge terms away from 0
    t = rng.integers(0, 5, 7)
    w = np.abs(randn(rng, 5)) + 0.1
    for weight in (None, w):
        P = [pr.tensor(x).requires_grad_()]
        T = [torch.tensor(x).requires_grad_()]
        if weight is not None:
            P.append(pr.tensor(weight))
            T.append(torch.tensor(weight))
        kw = dict(p=p, margin=0.9, reduction=reduction)
        lp = F.multi_margin_loss(
            P[0].t(), pr.tensor(t), weight=P[1] if weight is not None else None, **kw
        )
        lt = TF.multi_margin_loss(
            T[0].t(), torch.tensor(t), weight=T[1] if weight is not None else None, **kw
        )
        g = randn(rng, *lt.shape)
        (lp * pr.tensor(g)).sum().backward()
        (lt * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(P[0].grad.numpy(), T[0].grad.numpy(), rtol=tol(8), atol=tol(8))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_gaussian_nll_loss(rng, reduction):
    x, t = randn(rng, 5, 4), randn(rng, 5, 4)
    v = np.abs(randn(rng, 5, 4)) + 0.1
    v[0, 0] = 1e-8  # clamped at eps: its gradient passes the clamp, as torch's
    for full in (False, True):
        check(
            lambda a, b, c: F.gaussian_nll_loss(a, b, c, full=full, reduction=reduction),
            lambda a, b, c: TF.gaussian_nll_loss(a, b, c, full=full, reduction=reduction),
            [x, t, v],
            terms=4,
        )
    check(
        lambda a, b, c: F.gaussian_nll_loss(a.t(), b.t(), c, reduction=reduction),
        lambda a, b, c: TF.gaussian_nll_loss(a.t(), b.t(), c, reduction=reduction),
        [x, t, np.abs(randn(rng, 4, 1)) + 0.2],
        terms=8,
    )
    check(
        lambda a, b: F.gaussian_nll_loss(a, b, 0.7, reduction=reduction),
        lambda a, b: TF.gaussian_nll_loss(a, b, 0.7, reduction=reduction),
        [x, t],
    )


# ---- grid_sample ------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(rng, mode, padding_mode, align):
    x = randn(rng, 2, 3, 7, 5)  # transposed to (2, 3, 5, 7) below
    grid = (rng.random((2, 4, 6, 2)) * 2.6 - 1.3).astype(np.float32)  # some outside [-1, 1]
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align)
    check(
        lambda a, gr: F.grid_sample(a.transpose(-1, -2), gr, **kw),
        lambda a, gr: TF.grid_sample(a.transpose(-1, -2), gr, **kw),
        [x, grid],
        terms=16,
    )
    x3 = randn(rng, 1, 2, 3, 4, 5)
    g3 = (rng.random((1, 2, 3, 2, 3)) * 2.4 - 1.2).astype(np.float32)
    check(
        lambda a, gr: F.grid_sample(a, gr, **kw),
        lambda a, gr: TF.grid_sample(a, gr, **kw),
        [x3, g3],
        terms=16,
    )
