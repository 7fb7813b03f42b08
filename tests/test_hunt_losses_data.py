"""Losses and the data pipeline as ported training scripts use them (`import pyrite as torch`).

Losses: every torch.nn.functional loss, forward and gradient against torch CPU (float64 on the
same f32-rounded inputs) over awkward shapes, every reduction, class weights, ignore_index,
label smoothing, probability targets, K-dimensional inputs, pos_weight broadcast, log targets;
then torch's errors for bad targets, as pyrite's error classes in torch's words.

Data: default_collate of nested samples, DataLoader batching forms, the main-process workers
README promises (worker_init_fn accepted, get_worker_info None), seeded shuffles that are
reproducible (README: pyrite's own order, not torch's), random_split fractions, Subset,
ConcatDataset, TensorDataset and WeightedRandomSampler.
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
import torch.utils.data as tud

import pyrite as pr
import pyrite.nn.functional as F
import pyrite.utils.data as pud
from tests.test_data import _same

REDUCTIONS = ("none", "mean", "sum")


# ---- the oracle ----------------------------------------------------------------------------
def _pair(a, grad):
    """(pyrite, torch) tensors of one numpy value: floats as f32 / the same values in f64."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        a32 = a.astype(np.float32)
        return (
            pr.tensor(a32, requires_grad=grad),
            torch.from_numpy(a32.astype(np.float64)).requires_grad_(grad),
        )
    if a.dtype.kind == "b":
        return pr.tensor(a), torch.from_numpy(a)
    return pr.tensor(a.astype(np.int64)), torch.from_numpy(a.astype(np.int64))


def check_loss(rng, fn, arrays, grad=(0,), tol=2e-5, **kw):
    """F.<fn> forward and the gradient of every input in `grad` against torch's, with a random
    upstream gradient (a 'none' loss gets one per element)."""
    pairs = [_pair(a, i in grad) for i, a in enumerate(arrays)]
    pkw, tkw = {}, {}
    for k, v in kw.items():
        p, t = _pair(v, False) if isinstance(v, np.ndarray) else (v, v)
        pkw[k], tkw[k] = p, t
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # kl_div 'mean' and broadcast-size warnings
        got = getattr(F, fn)(*[p for p, _ in pairs], **pkw)
        want = getattr(TF, fn)(*[t for _, t in pairs], **tkw)
    assert tuple(got.shape) == tuple(want.shape), (fn, kw)
    w = want.detach().numpy()
    scale = 1.0 + float(np.abs(w).max()) if w.size else 1.0
    np.testing.assert_allclose(got.numpy(), w, rtol=tol, atol=tol * scale, err_msg=f"{fn} {kw}")
    if not grad:
        return
    up = rng.standard_normal(w.shape)
    got.backward(pr.tensor(up.astype(np.float32)))
    want.backward(torch.from_numpy(up))
    for i in grad:
        p, t = pairs[i]
        assert p.grad is not None, f"{fn}: no gradient for input {i}"
        g = t.grad.numpy()
        gs = 1.0 + float(np.abs(g).max()) if g.size else 1.0
        np.testing.assert_allclose(
            p.grad.numpy(), g, rtol=10 * tol, atol=10 * tol * gs, err_msg=f"{fn} d{i} {kw}"
        )


# ---- cross_entropy and nll_loss ------------------------------------------------------------
# (input shape, C): unbatched, one row, a prime batch, K-dimensional (N, C, d1, d2) and (N, C, d)
CLASS_SHAPES = [((7,), 7), ((1, 5), 5), ((13, 6), 6), ((3, 4, 5, 2), 4), ((2, 3, 7), 3)]


def _labels(rng, shape, C, ignore_index):
    """Class labels for input `shape`, a third of them ignore_index (when it is one)."""
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    t = rng.integers(0, C, tshape)
    if ignore_index is not None and t.ndim:
        t[rng.random(tshape) < 0.3] = ignore_index
    return t


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,C", CLASS_SHAPES)
def test_cross_entropy_class_targets(rng, reduction, shape, C):
    x = rng.standard_normal(shape) * 2
    w = rng.random(C) + 0.1
    for ls in (0.0, 0.25):
        for ii in (-100, 1):
            t = _labels(rng, shape, C, ii)
            kw = dict(reduction=reduction, label_smoothing=ls, ignore_index=ii)
            check_loss(rng, "cross_entropy", [x, t], **kw)
            check_loss(rng, "cross_entropy", [x, t], weight=w, **kw)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,C", CLASS_SHAPES)
def test_cross_entropy_probability_targets(rng, reduction, shape, C):
    """Probabilities as targets (the class dim sums to 1, and one that does not): the gradient
    flows to the target too, as in distillation."""
    x = rng.standard_normal(shape)
    cd = 0 if len(shape) == 1 else 1
    p = rng.random(shape)
    p = p / p.sum(axis=cd, keepdims=True)
    w = rng.random(C) + 0.1
    for ls in (0.0, 0.3):
        check_loss(
            rng, "cross_entropy", [x, p], grad=(0, 1), reduction=reduction, label_smoothing=ls
        )
        check_loss(rng, "cross_entropy", [x, p * 1.7], grad=(0, 1), reduction=reduction, weight=w)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,C", CLASS_SHAPES)
def test_nll_loss(rng, reduction, shape, C):
    logp = np.log(rng.random(shape) + 0.05)
    check_loss(rng, "nll_loss", [logp, _labels(rng, shape, C, None)], reduction=reduction)
    t = _labels(rng, shape, C, 2)
    w = rng.random(C) + 0.1
    check_loss(rng, "nll_loss", [logp, t], reduction=reduction, weight=w, ignore_index=2)


def test_cross_entropy_ignore_index_past_the_classes(rng):
    """An ignore_index of C (a padding id past the vocabulary) is skipped, not out of bounds."""
    for shape, C in [((6, 5), 5), ((2, 5, 3), 5)]:
        t = _labels(rng, shape, C, C)
        x = rng.standard_normal(shape)
        for red in REDUCTIONS:
            check_loss(rng, "cross_entropy", [x, t], ignore_index=C, reduction=red)
            check_loss(rng, "cross_entropy", [x, t], ignore_index=C, label_smoothing=0.1)


def test_cross_entropy_all_ignored_and_empty(rng):
    x = rng.standard_normal((3, 4))
    t = np.full(3, -100)
    for red in REDUCTIONS:
        check_loss(rng, "cross_entropy", [x, t], grad=(), reduction=red)  # mean: 0/0 = nan
    e = np.zeros((0, 4))
    for red in REDUCTIONS:
        check_loss(rng, "cross_entropy", [e, np.zeros(0, np.int64)], reduction=red)
        check_loss(rng, "nll_loss", [e, np.zeros(0, np.int64)], reduction=red)


def test_cross_entropy_strided_input(rng):
    x = rng.standard_normal((6, 5))
    t = rng.integers(0, 6, 5)
    xp = pr.tensor(x.astype(np.float32), requires_grad=True)
    xt = torch.from_numpy(x.astype(np.float32).astype(np.float64)).requires_grad_()
    got = F.cross_entropy(xp.t(), pr.tensor(t), label_smoothing=0.1)
    want = TF.cross_entropy(xt.t(), torch.from_numpy(t), label_smoothing=0.1)
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    got.backward()
    want.backward()
    np.testing.assert_allclose(xp.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


# ---- binary cross entropy, kl_div ----------------------------------------------------------
ELEM_SHAPES = [(5,), (3, 7), (2, 3, 5)]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", ELEM_SHAPES)
def test_binary_cross_entropy(rng, reduction, shape):
    p = rng.random(shape) * 0.98 + 0.01
    y = rng.random(shape)
    check_loss(rng, "binary_cross_entropy", [p, y], grad=(0, 1), reduction=reduction)
    for w in (rng.random(shape[-1:]) + 0.1, rng.random(shape) + 0.1):  # broadcast and full
        check_loss(rng, "binary_cross_entropy", [p, y], grad=(0, 1), reduction=reduction, weight=w)
    # the clamped logs: p of exactly 0 or 1
    edge = np.array([0.0, 1.0, 0.5, 1.0])
    check_loss(rng, "binary_cross_entropy", [edge, np.array([0.0, 1.0, 1.0, 0.0])], grad=())


def test_binary_cross_entropy_of_an_input_outside_0_1_is_nan(rng):
    """torch raises for an input outside [0, 1] (CPU) or stops the GPU (CUDA); pyrite, which
    would have to read the input back every step to raise, gives NaN there, loss and gradient
    both, so a training loop's loss shows it (WGSL's max(NaN, -100) had made it a finite,
    wrong loss). In-range elements keep torch's values."""
    n = 11
    p = rng.random(n).astype(np.float32)
    bad = rng.choice(n, 4, replace=False)
    p[bad] = np.array([1.5, -0.25, np.nan, 1.0 + 2.0**-20], np.float32)
    y = rng.random(n).astype(np.float32)
    x = pr.tensor(p, requires_grad=True)
    loss = pr.nn.functional.binary_cross_entropy(x, pr.tensor(y), reduction="none")
    loss.sum().backward()
    got, grad = loss.detach().numpy(), x.grad.numpy()
    ok = np.setdiff1d(np.arange(n), bad)
    assert np.isnan(got[bad]).all() and np.isnan(grad[bad]).all()
    xt = torch.tensor(p[ok], requires_grad=True)
    want = torch.nn.functional.binary_cross_entropy(xt, torch.tensor(y[ok]), reduction="none")
    want.sum().backward()
    np.testing.assert_allclose(got[ok], want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad[ok], xt.grad.numpy(), rtol=1e-4, atol=1e-6)
    mean = pr.nn.functional.binary_cross_entropy(pr.tensor(p), pr.tensor(y))
    assert np.isnan(mean.item())


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", ELEM_SHAPES)
def test_binary_cross_entropy_with_logits(rng, reduction, shape):
    z = rng.standard_normal(shape) * 4
    y = (rng.random(shape) > 0.5).astype(np.float64)
    w = rng.random(shape[-1:]) + 0.1
    pw = rng.random(shape[-1:]) * 3  # per class, broadcast over the batch
    kw = dict(reduction=reduction)
    check_loss(rng, "binary_cross_entropy_with_logits", [z, y], grad=(0, 1), **kw)
    check_loss(rng, "binary_cross_entropy_with_logits", [z, y], grad=(0, 1), pos_weight=pw, **kw)
    check_loss(
        rng, "binary_cross_entropy_with_logits", [z, y], grad=(0, 1), weight=w, pos_weight=pw, **kw
    )
    big = np.array([80.0, -80.0, 0.0])  # no overflow in exp
    check_loss(rng, "binary_cross_entropy_with_logits", [big, np.array([0.0, 1.0, 0.5])], **kw)


@pytest.mark.parametrize("reduction", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("shape", ELEM_SHAPES)
def test_kl_div(rng, reduction, shape):
    lp = np.log(rng.random(shape) + 0.01)
    lt = np.log(rng.random(shape) + 0.01)
    check_loss(rng, "kl_div", [lp, np.exp(lt)], grad=(0, 1), reduction=reduction)
    check_loss(rng, "kl_div", [lp, lt], grad=(0, 1), reduction=reduction, log_target=True)
    zero = np.exp(lt)
    zero.flat[0] = 0.0  # 0·log 0 is 0
    check_loss(rng, "kl_div", [lp, zero], grad=(0,), reduction=reduction)


# ---- regression and likelihood losses ------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", ELEM_SHAPES)
def test_regression_losses(rng, reduction, shape):
    a = rng.standard_normal(shape)
    b = rng.standard_normal(shape)
    kw = dict(reduction=reduction)
    check_loss(rng, "mse_loss", [a, b], grad=(0, 1), **kw)
    check_loss(rng, "l1_loss", [a, b], grad=(0, 1), **kw)
    for beta in (1.0, 0.3, 0.0, 2.5):
        check_loss(rng, "smooth_l1_loss", [a, b], grad=(0, 1), beta=beta, **kw)
    for delta in (1.0, 0.3, 2.5):
        check_loss(rng, "huber_loss", [a, b], grad=(0, 1), delta=delta, **kw)
    counts = np.round(np.abs(b) * 3)
    for log_input in (True, False):
        x = a if log_input else np.abs(a) + 0.01
        for full in (False, True):
            check_loss(rng, "poisson_nll_loss", [x, counts], log_input=log_input, full=full, **kw)
    var = rng.random(shape) + 0.1
    for full in (False, True):
        check_loss(rng, "gaussian_nll_loss", [a, b, var], grad=(0, 1, 2), full=full, **kw)
        # a variance per sample (last dim 1) or one fewer dim, broadcast as torch does
        check_loss(rng, "gaussian_nll_loss", [a, b, var[..., :1]], grad=(0, 1, 2), **kw)
        if len(shape) > 1:
            check_loss(rng, "gaussian_nll_loss", [a, b, var[..., 0]], grad=(0, 1, 2), **kw)


# ---- margin, hinge, ranking and embedding losses -------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_losses(rng, reduction):
    N, D = 5, 7
    a, p, n = rng.standard_normal((3, N, D))
    y = np.where(rng.random(N) > 0.5, 1.0, -1.0)
    kw = dict(reduction=reduction)
    check_loss(rng, "cosine_embedding_loss", [a, p, y], grad=(0, 1), margin=0.2, **kw)
    check_loss(rng, "cosine_embedding_loss", [a[0], p[0], np.array(-1.0)], grad=(0, 1), **kw)
    check_loss(rng, "triplet_margin_loss", [a, p, n], grad=(0, 1, 2), swap=True, p=1.5, **kw)
    check_loss(rng, "triplet_margin_loss", [a[0], p[0], n[0]], grad=(0, 1, 2), margin=0.3, **kw)
    check_loss(rng, "triplet_margin_with_distance_loss", [a, p, n], grad=(0, 1, 2), swap=True, **kw)
    check_loss(rng, "margin_ranking_loss", [a[:, 0], p[:, 0], y], grad=(0, 1), margin=0.1, **kw)
    ysign = np.sign(rng.standard_normal((N, D)))
    check_loss(rng, "hinge_embedding_loss", [a, ysign], margin=0.7, **kw)
    check_loss(rng, "soft_margin_loss", [a, ysign], **kw)
    # integer ±1 targets, as scripts build them with torch.randint
    check_loss(rng, "hinge_embedding_loss", [a, ysign.astype(np.int64)], **kw)
    t = rng.integers(0, D, N)
    for power in (1, 2):
        w = rng.random(D) + 0.1
        check_loss(rng, "multi_margin_loss", [a, t], p=power, margin=0.8, weight=w, **kw)
        check_loss(rng, "multi_margin_loss", [a[0], np.array(3)], p=power, **kw)
    ml = rng.integers(-1, D, (N, D))
    check_loss(rng, "multilabel_margin_loss", [a, ml], **kw)
    check_loss(rng, "multilabel_margin_loss", [a[0], ml[0]], **kw)
    yb = (rng.random((N, D)) > 0.5).astype(np.float64)
    check_loss(rng, "multilabel_soft_margin_loss", [a, yb], weight=rng.random(D), **kw)
    check_loss(rng, "multilabel_soft_margin_loss", [a, yb.astype(np.int64)], **kw)


# ---- ctc_loss ------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ctc_loss_forms(rng, reduction):
    """Padded and concatenated targets, lengths as tensors or tuples, an impossible alignment
    with zero_infinity, empty targets."""
    T, N, C = 9, 3, 5
    lp = np.log(rng.dirichlet(np.ones(C), (T, N)))
    tg = rng.integers(1, C, (N, 4))
    il, tl = np.array([9, 7, 5]), np.array([4, 2, 3])
    for zi in (False, True):
        kw = dict(reduction=reduction, zero_infinity=zi)
        check_loss(rng, "ctc_loss", [lp, tg, il, tl], tol=1e-4, **kw)
        check_loss(rng, "ctc_loss", [lp, tg, tuple(il), tuple(tl)], tol=1e-4, **kw)
        cat = np.concatenate([tg[i, : tl[i]] for i in range(N)])
        check_loss(rng, "ctc_loss", [lp, cat, il, tl], tol=1e-4, **kw)
    # sample 2 cannot fit 3 labels in 1 frame: inf, or 0 (and no gradient) with zero_infinity
    check_loss(rng, "ctc_loss", [lp, tg, np.array([9, 7, 1]), tl], tol=1e-4, zero_infinity=True)
    check_loss(rng, "ctc_loss", [lp, np.zeros((N, 0), np.int64), il, np.zeros(N, np.int64)])


# ---- torch's errors for bad targets --------------------------------------------------------
def test_class_target_errors():
    x = pr.randn(4, 5)
    # out-of-range classes: torch's IndexError "Target 5 is out of bounds."
    for fn in (F.cross_entropy, F.nll_loss):
        with pytest.raises(IndexError, match=r"Target 5 is out of bounds\."):
            fn(x, pr.tensor([0, 1, 5, 2]))
        with pytest.raises(IndexError, match=r"Target -3 is out of bounds\."):
            fn(x, pr.tensor([0, 1, -3, 2]))
        with pytest.raises(IndexError, match=r"Target 3 is out of bounds\."):
            fn(pr.randn(2, 3, 4), pr.tensor([[0, 1, 3, 2], [0, 0, 0, 0]]))
        with pytest.raises(IndexError, match=r"Target 9 is out of bounds\."):
            fn(x, pr.tensor([0, 1, 4, 2]) * 2 + 1)  # an op's result: bounds read back
        # batch-size and K-dim shape mismatches, torch's words
        with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target "):
            fn(x, pr.tensor([0, 1, 2]))
        with pytest.raises(RuntimeError, match=r"Expected target size \[2, 4\], got \[2, 5\]"):
            fn(pr.randn(2, 3, 4), pr.zeros(2, 5, dtype=pr.long))
        # a class weight of the wrong length
        with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 5"):
            fn(x, pr.tensor([0, 1, 2, 2]), weight=pr.ones(3))
    with pytest.raises(TypeError, match="expected target dtype to be Long or Byte"):
        F.nll_loss(x, pr.tensor([0.0, 1.0, 2.0, 2.0]))
    # a float target not shaped like the input is read as class indices, of the wrong dtype
    with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
        F.cross_entropy(x, pr.tensor([0.0, 1.0, 2.0, 2.0]))
    # probability targets have nothing to ignore (a negative ignore_index is accepted)
    with pytest.raises(RuntimeError, match="ignore_index is not supported for floating point"):
        F.cross_entropy(x, pr.rand(4, 5), ignore_index=1)
    F.cross_entropy(x, pr.rand(4, 5), ignore_index=-5)
    with pytest.raises(RuntimeError, match=r"label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, pr.tensor([0, 1, 2, 2]), label_smoothing=1.5)
    with pytest.raises(ValueError, match="is not a valid value for reduction"):
        F.cross_entropy(x, pr.tensor([0, 1, 2, 2]), reduction="avg")


def test_elementwise_loss_errors():
    with pytest.raises(ValueError, match=r"Using a target size .* that is different to the input"):
        F.binary_cross_entropy(pr.rand(3, 2), pr.rand(3))
    with pytest.raises(ValueError, match=r"Target size .* must be the same as input size"):
        F.binary_cross_entropy_with_logits(pr.rand(3, 2), pr.rand(3))
    with pytest.raises(TypeError, match="Found dtype"):
        F.binary_cross_entropy(pr.tensor([0.5, 0.5]), pr.tensor([1, 0]))
    with pytest.raises(RuntimeError):  # torch: the sizes of a and b must match
        F.binary_cross_entropy_with_logits(pr.rand(3, 2), pr.rand(3, 2), pos_weight=pr.ones(3))
    with pytest.raises(RuntimeError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the size warning, as torch's, before the error
        F.mse_loss(pr.rand(3, 2), pr.rand(4, 1))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values"):
        F.smooth_l1_loss(pr.rand(3), pr.rand(3), beta=-1.0)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values"):
        F.huber_loss(pr.rand(3), pr.rand(3), delta=0.0)
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(pr.rand(3, 2), pr.rand(3, 2), pr.rand(3, 3))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(pr.rand(3, 2), pr.rand(3, 2), -pr.rand(3, 2) - 0.1)
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        F.multi_margin_loss(pr.rand(3, 4), pr.tensor([0, 2, 1]), p=3)
    with pytest.raises(RuntimeError, match="target out of range"):
        F.multi_margin_loss(pr.rand(3, 4), pr.tensor([0, 4, 1]))
    lp = pr.randn(6, 2, 4).log_softmax(2)
    tg = pr.tensor([[1, 2], [1, 1]])
    with pytest.raises(RuntimeError, match="Expected input_lengths to have value at most 6"):
        F.ctc_loss(lp, tg, pr.tensor([7, 6]), pr.tensor([2, 2]))
    with pytest.raises(RuntimeError, match="Expected tensor to have size at least 3 at dimension"):
        F.ctc_loss(lp, tg, pr.tensor([6, 6]), pr.tensor([3, 2]))


def test_loss_modules_match_functional(rng):
    """The nn.*Loss modules carry their options (and their weight buffers) into F.*."""
    x = rng.standard_normal((6, 4))
    t = rng.integers(0, 4, 6)
    w = rng.random(4) + 0.1
    xp, xt = _pair(x, False)
    tp, tt = _pair(t, False)
    wp, wt = _pair(w, False)
    pm = pr.nn.CrossEntropyLoss(weight=wp, ignore_index=2, label_smoothing=0.1, reduction="sum")
    tm = torch.nn.CrossEntropyLoss(weight=wt, ignore_index=2, label_smoothing=0.1, reduction="sum")
    np.testing.assert_allclose(pm(xp, tp).item(), tm(xt, tt).item(), rtol=1e-5)
    assert list(pm.state_dict()) == list(tm.state_dict()) == ["weight"]
    y = (rng.random((6, 4)) > 0.5).astype(np.float64)
    yp, yt = _pair(y, False)
    pm = pr.nn.BCEWithLogitsLoss(pos_weight=wp)
    tm = torch.nn.BCEWithLogitsLoss(pos_weight=wt)
    np.testing.assert_allclose(pm(xp, yp).item(), tm(xt, yt).item(), rtol=1e-5)
    assert list(pm.state_dict()) == list(tm.state_dict()) == ["pos_weight"]
    pm = pr.nn.KLDivLoss(reduction="batchmean", log_target=True)
    tm = torch.nn.KLDivLoss(reduction="batchmean", log_target=True)
    np.testing.assert_allclose(pm(xp, yp).item(), tm(xt, yt).item(), rtol=1e-5)
    pm, tm = pr.nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)
    np.testing.assert_allclose(pm(xp, yp).item(), tm(xt, yt).item(), rtol=1e-5)
    pm, tm = pr.nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5)
    np.testing.assert_allclose(pm(xp, yp).item(), tm(xt, yt).item(), rtol=1e-5)


# ---- torch.utils.data ----------------------------------------------------------------------
Pair = namedtuple("Pair", "image label")


def _samples(rng, n):
    """Samples of every type default_collate knows, nested."""
    out = []
    for i in range(n):
        img = rng.standard_normal((2, 3)).astype(np.float32)
        out.append(
            {
                "pair": Pair(img, int(rng.integers(0, 10))),
                "meta": (f"id{i}", float(i) / 3, bool(i % 2), np.int64(i), np.float32(i / 7)),
                "arr": np.arange(i, i + 3, dtype=np.int64),
                "nested": {"mask": [True, False], "score": np.array(i * 0.5)},
            }
        )
    return out


def test_default_collate_nested_matches_torch(rng):
    batch = _samples(rng, 5)
    _same(pud.default_collate(batch), tud.default_collate(batch))
    tensors = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    _same(
        pud.default_collate([pr.tensor(t) for t in tensors]),
        tud.default_collate([torch.from_numpy(t) for t in tensors]),
    )
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        pud.default_collate([pr.ones(2), pr.ones(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        pud.default_collate([[1, 2], [1]])
    with pytest.raises(TypeError, match="default_collate: batch must contain"):
        pud.default_collate([None, None])


class _MapSet:
    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (2, True), (3, False), (7, True)])
def test_loader_batches_match_torch(rng, batch_size, drop_last):
    samples = _samples(rng, 11)
    pl = pud.DataLoader(_MapSet(samples), batch_size=batch_size, drop_last=drop_last)
    tl = tud.DataLoader(_MapSet(samples), batch_size=batch_size, drop_last=drop_last)
    assert len(pl) == len(tl)
    got, want = list(pl), list(tl)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same(a, b)


def test_loader_sampler_forms_match_torch(rng):
    """An explicit sampler, a batch_sampler, batch_size=None and a custom collate_fn give
    torch's batches (every order here is fixed, so torch's is the oracle)."""
    samples = _samples(rng, 9)
    order = [8, 0, 3, 3, 5]
    batches = [[1, 2], [8, 0, 7], [4]]
    cases = [
        dict(sampler=order, batch_size=2),
        dict(sampler=pud.SequentialSampler(samples), batch_size=4, drop_last=True),
        dict(batch_sampler=batches),
        dict(batch_size=None),
        dict(batch_size=3, collate_fn=lambda b: [s["pair"].label for s in b]),
    ]
    for kw in cases:
        tkw = dict(kw)
        if isinstance(kw.get("sampler"), pud.Sampler):
            tkw["sampler"] = tud.SequentialSampler(samples)
        got = list(pud.DataLoader(_MapSet(samples), **kw))
        want = list(tud.DataLoader(_MapSet(samples), **tkw))
        assert len(got) == len(want), kw
        for a, b in zip(got, want):
            _same(a, b)


def _stream(lib, n):
    class Stream(lib.IterableDataset):
        """Shards by worker, as torch's docs show; one worker (None) reads everything."""

        def __iter__(self):
            info = lib.get_worker_info()
            if info is None:
                return iter(range(n))
            return iter(range(info.id, n, info.num_workers))

    return Stream()


def test_iterable_dataset_batches_match_torch():
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)):
        got = list(pud.DataLoader(_stream(pud, 8), **kw))
        want = list(tud.DataLoader(_stream(tud, 8), **kw))
        assert len(got) == len(want), kw
        for a, b in zip(got, want):
            _same(a, b)
    assert list(_stream(pud, 2) + _stream(pud, 3)) == [0, 1, 0, 1, 2]  # ChainDataset


def test_workers_run_in_the_main_process(rng):
    """README: workers run in the main process. num_workers > 0 with worker_init_fn,
    persistent_workers and prefetch_factor is accepted (one warning) and gives the batches of
    num_workers=0; get_worker_info() is None, so a sharding IterableDataset reads everything
    once (torch's workers together read the same samples, interleaved)."""
    calls = []
    samples = _samples(rng, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = pud.DataLoader(
            _MapSet(samples),
            batch_size=3,
            num_workers=2,
            worker_init_fn=calls.append,
            persistent_workers=True,
            prefetch_factor=2,
        )
        got = list(loader)
        stream = list(pud.DataLoader(_stream(pud, 10), batch_size=2, num_workers=3))
    for a, b in zip(got, tud.DataLoader(_MapSet(samples), batch_size=3)):
        _same(a, b)
    assert pud.get_worker_info() is None
    assert sorted(sum((b.tolist() for b in stream), [])) == list(range(10))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        pud.DataLoader(range(3), num_workers=-1)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        pud.DataLoader(range(3), persistent_workers=True)


def _epochs(loader, n=2):
    return [[b.tolist() for b in loader] for _ in range(n)]


def test_shuffle_is_reproducible_from_a_seed():
    """README: shuffles come from pr.Generator, reproducible with a seed (pyrite's orders, not
    torch's). Each epoch is a permutation, epochs differ, and the same seed (a generator's or
    the global manual_seed) gives the same epochs."""
    data = list(range(23))

    def seeded(seed):
        g = pr.Generator().manual_seed(seed)
        return _epochs(pud.DataLoader(data, batch_size=4, shuffle=True, generator=g))

    a, b, c = seeded(7), seeded(7), seeded(8)
    assert a == b and a != c
    for epoch in a:
        assert sorted(sum(epoch, [])) == data
    assert a[0] != a[1]

    def global_seed(seed):
        pr.manual_seed(seed)
        return _epochs(pud.DataLoader(data, batch_size=5, shuffle=True, drop_last=True))

    g1, g2 = global_seed(3), global_seed(3)
    assert g1 == g2 and all(len(batch) == 5 for epoch in g1 for batch in epoch)
    assert len(g1[0]) == len(list(tud.DataLoader(data, batch_size=5, drop_last=True)))


def test_random_split_fractions_and_subsets():
    """Fractional lengths round as torch's (floor, then the remainder one at a time from the
    first split); the splits partition the data, reproducibly from a generator."""
    for n, fracs in [
        (10, [0.33, 0.33, 0.34]),
        (11, [0.5, 0.25, 0.25]),
        (7, [0.1, 0.9]),
        (5, [1.0]),
    ]:
        want = [len(s) for s in tud.random_split(range(n), fracs)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a zero-length split warns, as torch's
            got = pud.random_split(range(n), fracs, generator=pr.Generator().manual_seed(1))
            again = pud.random_split(range(n), fracs, generator=pr.Generator().manual_seed(1))
        assert [len(s) for s in got] == want
        assert sorted(sum((list(s) for s in got), [])) == list(range(n))
        assert [list(s) for s in got] == [list(s) for s in again]
    with pytest.raises(ValueError):
        pud.random_split(range(10), [0.5, 0.6])
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        pud.random_split(range(10), [5, 6])
    # a split of a TensorDataset goes through a DataLoader like torch's Subset
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    ds = pud.TensorDataset(pr.tensor(x), pr.arange(10))
    train, val = pud.random_split(ds, [0.8, 0.2], generator=pr.Generator().manual_seed(0))
    rows = sum((b[1].tolist() for b in pud.DataLoader(train, batch_size=3)), [])
    assert rows == list(train.indices) and len(rows) == 8
    np.testing.assert_array_equal(val[0][0].numpy(), x[val.indices[0]])


def test_subset_concat_tensor_dataset_match_torch(rng):
    x = rng.standard_normal((9, 3)).astype(np.float32)
    y = rng.integers(0, 5, 9)
    pds = pud.TensorDataset(pr.tensor(x), pr.tensor(y))
    tds = tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    idx = [8, 1, 1, 4, 0]
    psub, tsub = pud.Subset(pds, idx), tud.Subset(tds, idx)
    pcat = pud.ConcatDataset([psub, pds, pud.Subset(psub, [4, 2])])
    tcat = tud.ConcatDataset([tsub, tds, tud.Subset(tsub, [4, 2])])
    assert len(pcat) == len(tcat)
    for i in (0, 4, 5, 13, 14, -1, -2):
        _same(pcat[i], tcat[i])
    for kw in (dict(batch_size=4), dict(batch_size=3, drop_last=True)):
        for pset, tset in ((psub, tsub), (pcat, tcat)):
            got, want = list(pud.DataLoader(pset, **kw)), list(tud.DataLoader(tset, **kw))
            assert len(got) == len(want)
            for a, b in zip(got, want):
                _same(a, b)
    with pytest.raises(ValueError, match="absolute value of index should not exceed"):
        pcat[-len(pcat) - 1]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        pud.TensorDataset(pr.ones(3), pr.ones(4))


def test_weighted_random_sampler():
    """Index i with probability proportional to weights[i]: a zero weight is never drawn, the
    frequencies follow the weights, a seed reproduces the draw, and without replacement every
    index appears at most once."""
    w = [0.0, 1.0, 3.0, 0.0, 4.0]
    draws = list(pud.WeightedRandomSampler(w, 4000, generator=pr.Generator().manual_seed(5)))
    again = list(pud.WeightedRandomSampler(w, 4000, generator=pr.Generator().manual_seed(5)))
    assert draws == again and len(draws) == 4000
    counts = np.bincount(draws, minlength=5) / 4000
    assert counts[0] == counts[3] == 0
    np.testing.assert_allclose(counts, np.array(w) / sum(w), atol=0.04)
    no_rep = list(pud.WeightedRandomSampler(pr.tensor(w), 3, replacement=False))
    assert sorted(no_rep) == [1, 2, 4]
    # a class-balanced loader, as scripts build it
    labels = np.array([0, 0, 0, 0, 1])
    per_sample = (1.0 / np.bincount(labels))[labels]
    ds = pud.TensorDataset(pr.arange(5), pr.tensor(labels))
    sampler = pud.WeightedRandomSampler(per_sample, 2000, generator=pr.Generator().manual_seed(0))
    seen = sum((b[1].tolist() for b in pud.DataLoader(ds, batch_size=64, sampler=sampler)), [])
    assert len(seen) == 2000 and abs(np.mean(seen) - 0.5) < 0.05
    with pytest.raises(ValueError, match="weights should be a 1d sequence"):
        pud.WeightedRandomSampler([[0.1, 0.9]], 5)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        pud.WeightedRandomSampler([0.1, 0.9], 0)
