"""Margin and embedding losses of torch.nn.functional: margin_ranking, hinge_embedding,
soft_margin, multilabel_soft_margin, multilabel_margin, multi_margin, cosine_embedding and the
triplet losses.

Each is maps (ops/core.run_map) plus reductions (ops/reduce.py). Class-index targets are
range-checked with one readback (a min/max kernel), as torch's CPU kernels check them; the
pairwise terms of multilabel_margin_loss are an (N, C, C) map, so it holds N·C² floats.
NaN: a clamp at 0 keeps NaN (p_maxf), as torch's clamp_min does.
"""

from __future__ import annotations

from .. import autograd as _autograd
from .. import dtypes as D
from ..errors import ShapeError
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import indexing as _indexing
from ..ops import scatter as _scatter
from ._common import (
    check_reduction,
    float_dtype,
    fmap,
    legacy_reduction,
    need_tensor,
    reduce_loss,
)
from ._distance import pairwise_distance

# Each loss is one fused map when nothing needs a gradient; when an input requires grad the same
# formula is written with recorded ops (torch's own composition), so autograd differentiates it
# as it stands, with torch's conventions at the kinks (clamp_min passes g where z >= 0 ... as
# torch's clamp_min_ does).
_rec = _autograd.needs_grad


def _relu(z):
    return z.clamp_min(0.0)


def _int_target(name, target):
    need_tensor(name, "target", target)
    if target.dtype.kind != "i":
        raise TypeError(
            f"pyrite: {name}: expected an integer (Long) target, but found {target.dtype!r}"
        )


def _range_check(name, target, lo, hi):
    """Every target in [lo, hi), checked on the device (one readback), as torch's check."""
    if target.numel() == 0:
        return
    tmin, tmax = _indexing._minmax(target)
    if tmin < lo or tmax >= hi:
        # torch: RuntimeError "target out of range"; IndexOutOfBounds is an IndexError too
        raise _indexing.IndexOutOfBounds(
            f"pyrite: {name}: target out of range: got {tmin if tmin < lo else tmax}, "
            f"expected values in [{lo}, {hi})"
        )


# ---- pairs ---------------------------------------------------------------------------------
def margin_ranking_loss(
    input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"
):
    """max(0, -y·(x1 - x2) + margin), broadcast; all three must have the same number of dims."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(
            f"pyrite: margin_ranking_loss : All input tensors should have same dimension but "
            f"got sizes: input1: {tuple(input1._shape)}, input2: {tuple(input2._shape)}, "
            f"target: {tuple(target._shape)}"
        )
    if _rec(input1, input2, target):
        loss = _relu(-target * (input1 - input2) + margin)
    else:
        loss = fmap("p_maxf(-x2 * (x0 - x1) + s0, 0.0)", [input1, input2, target], [margin])
    return reduce_loss(loss, reduction)


def hinge_embedding_loss(
    input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"
):
    """x where y = 1, max(0, margin - x) where y = -1 (torch's: the first term where y != -1,
    the second where y != 1, so other targets add both)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if _rec(input, target):
        m = _ew.where(target != 1.0, _relu(margin - input), 0.0)
        return reduce_loss(m + _ew.where(target != -1.0, input, 0.0), reduction)
    loss = fmap(
        "select(0.0, p_maxf(s0 - x0, 0.0), x1 != 1.0) + select(0.0, x0, x1 != -1.0)",
        [input, target],
        [margin],
        dtype=input.dtype if input.dtype.is_floating_point else D.float32,
    )
    return reduce_loss(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y·x)), as softplus(-y·x) = max(z, 0) + log1p(exp(-|z|)): finite where
    torch's log1p(exp(z)) overflows to inf (z > 88)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if _rec(input, target):
        return reduce_loss(_ew.softplus(-target * input), reduction)
    loss = fmap(
        "max(-x1 * x0, 0.0) + p_log1p(p_expf(-abs(x1 * x0)))",
        [input, target],
        dtype=input.dtype if input.dtype.is_floating_point else D.float32,
    )
    return reduce_loss(loss, reduction)


def cosine_embedding_loss(
    input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"
):
    """1 - cos(x1, x2) where y = 1, max(0, cos - margin) where y = -1, 0 otherwise; cos over
    dim 1 of (N, D) inputs with (N,) targets, or dim 0 of (D,) inputs with a 0-d target."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    for what, t in (("input1", input1), ("input2", input2), ("target", target)):
        need_tensor("cosine_embedding_loss", what, t)
    if target.ndim > 1:
        raise ShapeError(
            "pyrite: cosine_embedding_loss: 0D or 1D target tensor expected, multi-target "
            "not supported"
        )
    want = 2 if target.ndim == 1 else 1
    if input1.ndim != want or input2.ndim != want:
        raise ShapeError(
            f"pyrite: cosine_embedding_loss: {target.ndim}D target tensor expects {want}D "
            f"input tensors, but found inputs with sizes {list(input1._shape)} and "
            f"{list(input2._shape)}."
        )
    d = want - 1
    # torch's: Σ x1·x2 / sqrt((Σ x1² + 1e-12)·(Σ x2² + 1e-12))
    if _rec(input1, input2, target):
        m12 = ((input1 * input1).sum(d) + 1e-12) * ((input2 * input2).sum(d) + 1e-12)
        cos = (input1 * input2).sum(d) / m12.sqrt()
        loss = _ew.where(target == 1.0, 1.0 - cos, 0.0) + _ew.where(
            target == -1.0, _relu(cos - margin), 0.0
        )
        return reduce_loss(loss, reduction)
    prod = fmap("x0 * x1", [input1, input2]).sum(d)
    m1 = fmap("x0 * x0", [input1]).sum(d)
    m2 = fmap("x0 * x0", [input2]).sum(d)
    loss = fmap(
        "select(0.0, 1.0 - p_divf(x0, sqrt((x1 + 1e-12) * (x2 + 1e-12))), x3 == 1.0)"
        " + select(0.0, p_maxf(p_divf(x0, sqrt((x1 + 1e-12) * (x2 + 1e-12))) - s0, 0.0), x3 == -1.0)",
        [prod, m1, m2, target],
        [margin],
        dtype=float_dtype(input1, input2),
    )
    return reduce_loss(loss, reduction)


# ---- multi-class and multi-label -----------------------------------------------------------
def _class_rows(name, input):
    """input as (N, C) rows, and whether it was one unbatched (C,) sample."""
    if input.ndim == 0 or input.ndim > 2 or input.numel() == 0 and input.ndim == 1:
        raise ShapeError(
            f"pyrite: {name}: Expected non-empty vector or matrix with optional 0-dim batch "
            f"size, but got: {list(input._shape)}"
        )
    return (input.unsqueeze(0), True) if input.ndim == 1 else (input, False)


def multilabel_soft_margin_loss(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """-(y·logσ(x) + (1 - y)·logσ(-x)) (·weight), averaged over the last (class) dim."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    need_tensor("multilabel_soft_margin_loss", "input", input)
    if input.ndim == 0:  # torch sums over dim -1
        raise IndexError(
            "pyrite: multilabel_soft_margin_loss: Dimension specified as -1 but tensor has no "
            "dimensions"
        )
    # logσ(x) = min(x, 0) - log1p(exp(-|x|)); logσ(-x) = min(-x, 0) - log1p(exp(-|x|))
    expr = "-(x1 * min(x0, 0.0) + (1.0 - x1) * min(-x0, 0.0) - p_log1p(p_expf(-abs(x0))))"
    tens = [input, target]
    if weight is not None:
        expr = f"({expr}) * x2"
        tens.append(weight)
    if _rec(*tens):
        from ._activation import logsigmoid

        loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
        if weight is not None:
            loss = loss * weight
    else:
        dt = input.dtype if input.dtype.is_floating_point else D.float32
        loss = fmap(expr, tens, dtype=dt)
    C = input._shape[-1]
    loss = loss.sum(-1) / C
    return reduce_loss(loss, reduction)


def multi_margin_loss(
    input,
    target,
    p=1,
    margin=1.0,
    weight=None,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """Σ_{i != y} max(0, margin - x[y] + x[i])^p · weight[y] / C for each sample (p = 1 or 2)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("pyrite: multi_margin_loss: only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("pyrite: multi_margin_loss: weight must be one-dimensional")
    need_tensor("multi_margin_loss", "input", input)
    _int_target("multi_margin_loss", target)
    x, single = _class_rows("multi_margin_loss", input)
    N, C = x._shape
    if target.numel() != N or (not single and target.ndim != 1) or target.ndim > 1:
        raise ShapeError(
            f"pyrite: multi_margin_loss: target tensor should be 1-D with size equal to the "
            f"number of input samples (batch size). Expected target size [{N}], but got "
            f"{list(target._shape)}. Input has shape {list(input._shape)}."
        )
    if weight is not None and weight.numel() != C:
        raise ShapeError(
            f"pyrite: multi_margin_loss: inconsistent weight size, expected {C} but got "
            f"{list(weight._shape)}"
        )
    _range_check("multi_margin_loss", target, 0, C)
    t = target.reshape(N, 1)
    xy = _scatter.gather(x, 1, t)  # (N, 1): x[y]
    cols = _creation.arange(C, dtype=D.int32)  # (C,): the class of each column
    z = "(s0 - x1 + x0)"
    h = f"{z} * {z}" if p == 2 else z
    expr = f"select(0.0, {h}, {z} > 0.0 && x2 != x3)"
    tens = [x, xy, t, cols]
    ctypes = ["f32", "f32", "i32", "i32"]
    if weight is not None:
        expr = f"({expr}) * x4"
        tens.append(_scatter.index_select(weight, 0, t.reshape(N)).reshape(N, 1))
        ctypes.append("f32")
    if _rec(*tens):
        z = margin - xy + x
        h = _ew.where((z > 0.0) & (t != cols), z * z if p == 2 else z, 0.0)
        terms = h * tens[4] if weight is not None else h
    else:
        terms = fmap(expr, tens, [margin], dtype=x.dtype, ctypes=ctypes)  # (N, C)
    loss = terms.sum(1) / C  # (N,)
    if reduction == "none":
        return loss.reshape(target._shape)
    return reduce_loss(loss, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Σ_{j in targets} Σ_{i not in targets} max(0, 1 - (x[j] - x[i])) / C per sample; each
    sample's targets are the class indices of its row of `target` before the first -1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    need_tensor("multilabel_margin_loss", "input", input)
    _int_target("multilabel_margin_loss", target)
    x, single = _class_rows("multilabel_margin_loss", input)
    N, C = x._shape
    if tuple(target._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: multilabel_margin_loss: inconsistent target size: "
            f"{list(target._shape)} for input of size: {list(input._shape)}"
        )
    _range_check("multilabel_margin_loss", target, -1, C)
    t = target.reshape(N, C)
    # valid[n, k]: k is before the row's first -1 (a min reduction of the -1s' columns)
    cols = _creation.arange(C, dtype=D.int32)
    first = fmap(
        "select(s0, x1, x0 == -1)", [t, cols], [C], D.int32, ("i32", "i32"), "i32", ("i32",)
    ).amin(1, keepdim=True)  # (N, 1)
    valid = fmap("select(0, 1, x0 < x1)", [cols, first], (), D.int32, ("i32", "i32"), "i32")
    safe = fmap("select(0, x0, x1 != 0)", [t, valid], (), D.int32, ("i32", "i32"), "i32")
    # is_target[n, c] = 1 where some valid entry names c
    is_target = _creation.zeros((N, C), dtype=D.int32)
    is_target = _scatter.scatter_reduce(is_target, 1, safe, valid, "amax")
    xt = _scatter.gather(x, 1, safe)  # (N, K): x at each listed target
    if _rec(x):  # recorded: each kept pair passes g to x[i] and -g to x[j], 0 at z = 0 (torch)
        z = 1.0 - xt.unsqueeze(2) + x.unsqueeze(1)
        keep = (valid.unsqueeze(2) != 0) & (is_target.unsqueeze(1) == 0) & (z > 0.0)
        terms = _ew.where(keep, z, 0.0)
    else:
        terms = fmap(
            "select(0.0, 1.0 - x0 + x2, x1 != 0 && x3 == 0 && 1.0 - x0 + x2 > 0.0)",
            [xt.unsqueeze(2), valid.unsqueeze(2), x.unsqueeze(1), is_target.unsqueeze(1)],
            dtype=x.dtype,
            ctypes=("f32", "i32", "f32", "i32"),
        )  # (N, K, C)
    loss = terms.sum((1, 2)) / C  # (N,)
    if single:
        loss = loss.reshape(())
    return reduce_loss(loss, reduction)


# ---- triplets ------------------------------------------------------------------------------
def _triplet_dims(anchor, positive, negative):
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(
            f"pyrite: The anchor, positive, and negative tensors are expected to have the same "
            f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
            f"and negative {negative.ndim}D inputs"
        )


def _triplet(dist_pos, dist_neg, margin, reduction):
    if _rec(dist_pos, dist_neg):
        return reduce_loss(_relu(margin + dist_pos - dist_neg), reduction)
    loss = fmap("p_maxf(s0 + x0 - x1, 0.0)", [dist_pos, dist_neg], [margin])
    return reduce_loss(loss, reduction)


def triplet_margin_loss(
    anchor,
    positive,
    negative,
    margin=1.0,
    p=2,
    eps=1e-6,
    swap=False,
    size_average=None,
    reduce=None,
    reduction="mean",
):
    """max(d(a, p) - d(a, n) + margin, 0), d the pairwise p-norm distance; swap uses
    min(d(a, n), d(p, n)) for the negative distance."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if margin <= 0:
        raise ValueError(
            f"pyrite: triplet_margin_loss: margin must be greater than 0, got {margin}"
        )
    _triplet_dims(anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_pn = pairwise_distance(positive, negative, p, eps)
        d_neg = (
            _ew.minimum(d_neg, d_pn) if _rec(d_neg, d_pn) else fmap("p_minf(x0, x1)", [d_neg, d_pn])
        )
    return _triplet(d_pos, d_neg, margin, reduction)


def triplet_margin_with_distance_loss(
    anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"
):
    """triplet_margin_loss with any distance (pairwise_distance by default)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"pyrite: {reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(
            f"pyrite: triplet_margin_with_distance_loss: margin must be greater than 0, "
            f"got {margin}"
        )
    _triplet_dims(anchor, positive, negative)
    dist = distance_function if distance_function is not None else pairwise_distance
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_pn = dist(positive, negative)
        d_neg = (
            _ew.minimum(d_neg, d_pn) if _rec(d_neg, d_pn) else fmap("p_minf(x0, x1)", [d_neg, d_pn])
        )
    return _triplet(d_pos, d_neg, margin, reduction)


__all__ = [
    "cosine_embedding_loss",
    "hinge_embedding_loss",
    "margin_ranking_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]
