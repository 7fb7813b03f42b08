"""Regression and likelihood losses of torch.nn.functional: mse, l1, smooth_l1, huber, binary
cross entropy (with logits), kl_div, poisson_nll, gaussian_nll, nll_loss and cross_entropy.

Each is one map kernel for the elementwise term (every operand read through its strides and
broadcast in the kernel, no expanded copies) plus a reduction (ops/reduce.py, which bounds its
loops by the device's budget). Margin losses are in _margin.py, distances in _distance.py, CTC in
_ctc.py.
"""

from __future__ import annotations

import math
import weakref

from pyrite.errors import warn as _warn

from .. import autograd as _autograd
from .. import dtypes as D
from ..errors import ArgumentError, DtypeError, ShapeError
from ..ops import indexing as _indexing
from ..ops import ranges
from ..ops import rowops as _rowops
from ..ops import scatter as _scatter
from ..ops.core import broadcast_shapes
from ..tensor import Tensor
from ._common import (
    check_reduction,
    float_dtype,
    fmap,
    legacy_reduction,
    need_tensor,
    reduce_loss,
)


def _size_warning(input, target):
    if tuple(target._shape) != tuple(input._shape):
        _warn(
            f"pyrite: Using a target size ({tuple(target._shape)}) that is different to the "
            f"input size ({tuple(input._shape)}). This will likely lead to incorrect results "
            "due to broadcasting. Please ensure they have the same size.",
            stacklevel=3,
        )


def _some_float(name, input, target):
    """torch has no integer kernel for these losses: refuse two integer (or bool) operands."""
    if not (input.dtype.is_floating_point or target.dtype.is_floating_point):
        raise DtypeError(
            f"pyrite: {name}: not implemented for {input.dtype!r} and {target.dtype!r} "
            "(floating-point only)"
        )


def _float_target(name, input, target):
    """torch's check that a probability target is floating point (and, for
    binary_cross_entropy, of the input's dtype: "Found dtype Long but expected Float")."""
    if not target.dtype.is_floating_point:
        raise DtypeError(
            f"pyrite: {name}: Found dtype {target.dtype!r} but expected {input.dtype!r} "
            "(a floating-point target)"
        )


def _weighted(name, loss, weight, input, reduction, mean_by_weight):
    """loss·weight reduced; 'mean' divides by Σ weight (mse, l1) or by the count (huber)."""
    if weight is None:
        return reduce_loss(loss, reduction)
    if tuple(weight._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: {name}: Weights and input must have the same size "
            f"({tuple(weight._shape)} vs {tuple(input._shape)})."
        )
    loss = fmap("x0 * x1", [loss, weight], dtype=loss.dtype)
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return reduce_loss(loss, reduction)


# ---- regression ----------------------------------------------------------------------------
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target)²; with weight, 'mean' is Σ w·(x - y)² / Σ w."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    _some_float("mse_loss", input, target)
    _size_warning(input, target)
    loss = fmap("(x0 - x1) * (x0 - x1)", [input, target])
    return _weighted("mse_loss", loss, weight, input, reduction, True)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|; with weight, 'mean' is Σ w·|x - y| / Σ w."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    _some_float("l1_loss", input, target)
    _size_warning(input, target)
    loss = fmap("abs(x0 - x1)", [input, target])
    return _weighted("l1_loss", loss, weight, input, reduction, True)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5·d²/β where |d| < β, else |d| - 0.5·β (d = input - target)."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if beta < 0:
        raise ArgumentError(
            f"pyrite: smooth_l1_loss does not support negative values for beta, got {beta}"
        )
    _some_float("smooth_l1_loss", input, target)
    _size_warning(input, target)
    if beta == 0.0:
        return reduce_loss(fmap("abs(x0 - x1)", [input, target]), reduction)
    loss = fmap(
        "select(abs(x0 - x1) - 0.5 * s0, 0.5 * (x0 - x1) * (x0 - x1) / s0, abs(x0 - x1) < s0)",
        [input, target],
        [beta],
    )
    return reduce_loss(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5·d² where |d| < δ, else δ·(|d| - 0.5·δ); with weight, 'mean' is mean(w·loss)."""
    check_reduction(reduction)
    if delta <= 0:
        raise ArgumentError(
            f"pyrite: huber_loss does not support non-positive values for delta, got {delta}"
        )
    _some_float("huber_loss", input, target)
    _size_warning(input, target)
    loss = fmap(
        "select(s0 * (abs(x0 - x1) - 0.5 * s0), 0.5 * (x0 - x1) * (x0 - x1), abs(x0 - x1) < s0)",
        [input, target],
        [delta],
    )
    return _weighted("huber_loss", loss, weight, input, reduction, False)


# ---- likelihoods ---------------------------------------------------------------------------
def poisson_nll_loss(
    input,
    target,
    log_input=True,
    full=False,
    size_average=None,
    eps=1e-8,
    reduce=None,
    reduction="mean",
):
    """exp(x) - t·x (log_input) or x - t·log(x + eps); full adds Stirling's
    t·log(t) - t + 0.5·log(2πt) where t > 1."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    expr = "p_expf(x0) - x1 * x0" if log_input else "x0 - x1 * log(x0 + s0)"
    if full:
        expr = f"({expr}) + select(0.0, x1 * log(x1) - x1 + 0.5 * log(s1 * x1), x1 > 1.0)"
    loss = fmap(expr, [input, target], [eps, 2.0 * math.pi])
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5·(log(max(var, eps)) + (input - target)² / max(var, eps)) (+ 0.5·log(2π) if full).

    var: one per element (input's shape), one per sample (input's shape less the last dim, or
    with exactly one dim of size 1), or a Python float. A negative entry raises ValueError, as
    torch's, which reads var back to check (one readback)."""
    need_tensor("gaussian_nll_loss", "input", input)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("pyrite: gaussian_nll_loss: var has negative entry/entries")
        var_t = None
    else:
        need_tensor("gaussian_nll_loss", "var", var)
        var_t = var
        if tuple(var._shape) != tuple(input._shape):
            ishape, vshape = tuple(input._shape), tuple(var._shape)
            if ishape[:-1] == vshape:
                var_t = var.unsqueeze(-1)
            elif not (
                len(ishape) == len(vshape) and sum(v for i, v in zip(ishape, vshape) if i != v) == 1
            ):
                raise ShapeError(
                    f"pyrite: gaussian_nll_loss: var is of incorrect size {vshape} for input "
                    f"of size {ishape}"
                )
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"pyrite: gaussian_nll_loss: {reduction} is not valid")
    if var_t is not None and var_t.numel() and float(var_t.min().item()) < 0:
        raise ValueError("pyrite: gaussian_nll_loss: var has negative entry/entries")
    const = 0.5 * math.log(2 * math.pi) if full else 0.0
    if _autograd.needs_grad(input, target, var_t):
        # torch's composition: var clamped under no_grad, so its gradient passes the clamp
        if var_t is None:
            v, lv = max(float(var), eps), math.log(max(float(var), eps))
            return reduce_loss(0.5 * (lv + (input - target) ** 2 / v) + const, reduction)
        with _autograd.no_grad():
            shift = var_t.clamp_min(eps) - var_t
        vc = var_t + shift
        return reduce_loss(0.5 * (vc.log() + (input - target) ** 2 / vc) + const, reduction)
    if var_t is None:
        v = max(float(var), eps)
        loss = fmap(
            "0.5 * (s0 + (x0 - x1) * (x0 - x1) / s1) + s2",
            [input, target],
            [math.log(v), v, const],
        )
    else:
        loss = fmap(
            # (p_maxf: a NaN variance stays NaN, as torch's clamp; WGSL's max gave eps)
            "0.5 * (log(p_maxf(x2, s0)) + (x0 - x1) * (x0 - x1) / p_maxf(x2, s0)) + s1",
            [input, target, var_t],
            [eps, const],
        )
    return reduce_loss(loss, reduction)


def binary_cross_entropy(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """-(t·log(x) + (1 - t)·log(1 - x)), each log clamped at -100 as torch does."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: binary_cross_entropy: Using a target size {tuple(target._shape)} that "
            f"is different to the input size {tuple(input._shape)} is deprecated. Please "
            "ensure they have the same size."
        )
    _float_target("binary_cross_entropy", input, target)
    # An input outside [0, 1] (or NaN) gives NaN, where torch raises: checking would read the
    # input back every step. (Left to the logs, WGSL's max(NaN, -100) may be -100: a finite,
    # wrong loss.)
    expr = (
        "select(p_nan(), -(x1 * max(log(x0), -100.0) + (1.0 - x1) * max(log(1.0 - x0), -100.0)),"
        " x0 >= 0.0 && x0 <= 1.0)"
    )
    tens = [input, target]
    if weight is not None:
        _weight_fits("binary_cross_entropy", weight, input)
        expr = f"({expr}) * x2"
        tens.append(weight)
    return reduce_loss(fmap(expr, tens, dtype=float_dtype(input, target)), reduction)


def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """(1 - t)·x + (1 + (pw - 1)·t)·(log1p(exp(-|x|)) + max(-x, 0)): never exp of a large x."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: binary_cross_entropy_with_logits: Target size "
            f"{tuple(target._shape)} must be the same as input size "
            f"{tuple(input._shape)}"
        )
    _float_target("binary_cross_entropy_with_logits", input, target)
    soft = "(p_log1p(p_expf(-abs(x0))) + max(-x0, 0.0))"
    tens = [input, target]
    if pos_weight is not None:
        tens.append(pos_weight)
        expr = f"(1.0 - x1) * x0 + (1.0 + (x2 - 1.0) * x1) * {soft}"
    else:
        expr = f"(1.0 - x1) * x0 + {soft}"
    if weight is not None:
        _weight_fits("binary_cross_entropy_with_logits", weight, input)
        expr = f"({expr}) * x{len(tens)}"
        tens.append(weight)
    return reduce_loss(fmap(expr, tens, dtype=float_dtype(input, target)), reduction)


def _weight_fits(name, weight, input):
    """torch multiplies the loss by weight in place: weight must broadcast to input's shape."""
    if broadcast_shapes(input._shape, weight._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: {name}: weight of shape {tuple(weight._shape)} does not broadcast to "
            f"the input's shape {tuple(input._shape)}"
        )


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target·(log(target) - input) (0 where target is 0), or exp(t)·(t - input) for log t."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction, ("none", "mean", "sum", "batchmean"))
    if not (input.dtype.is_floating_point and target.dtype.is_floating_point):
        raise DtypeError(
            f"pyrite: kl_div: not implemented for {input.dtype!r} and {target.dtype!r} "
            "(floating-point only)"
        )
    if log_target:
        loss = fmap("p_expf(x1) * (x1 - x0)", [input, target])
    else:
        loss = fmap("select(x1 * (log(x1) - x0), 0.0, x1 == 0.0)", [input, target])
    if reduction == "batchmean":
        return loss.sum() / (input._shape[0] if input.ndim else 1)
    return reduce_loss(loss, reduction)


# ---- nll_loss and cross_entropy ------------------------------------------------------------
def _class_layout(input, name):
    """(class dim, C) for input (N, C, d1, ...) or unbatched (C,)."""
    if input.ndim == 0:
        raise ShapeError(f"pyrite: {name}: input must have at least 1 dim, got a 0-d tensor")
    cd = 0 if input.ndim == 1 else 1
    return cd, input._shape[cd]


def _with_zero(r):
    return (min(r[0], 0), max(r[1], 0))


def _pick(logp, target, cd, ignore_index, weight):
    """(logp[target] along cd, weight[target]), both 0 where target == ignore_index."""
    # an ignored target reads class 0 (always in range), then is zeroed
    safe = fmap(
        "select(x0, 0, x0 == s0)", [target], [ignore_index], D.int32, ("i32",), "i32", ("i32",)
    )
    # the labels' range holds for `safe` too, with 0 added (no readback)
    ranges.settle(safe, _with_zero, ranges.known(target))
    _check_labels(safe, cd, logp._shape[cd])
    picked = _scatter.gather(logp, cd, safe.unsqueeze(cd)).squeeze(cd)
    picked = fmap(
        "select(x0, 0.0, x1 == s0)",
        [picked, target],
        [ignore_index],
        logp.dtype,
        ("f32", "i32"),
        "f32",
        ("i32",),
    )
    if weight is None:
        wt = fmap(
            "select(1.0, 0.0, x0 == s0)",
            [target],
            [ignore_index],
            logp.dtype,
            ("i32",),
            "f32",
            ("i32",),
        )
    else:
        wt = _scatter.index_select(weight, 0, safe.reshape(-1)).reshape(*target._shape)
        wt = fmap(
            "select(x0, 0.0, x1 == s0)",
            [wt, target],
            [ignore_index],
            weight.dtype,
            ("f32", "i32"),
            "f32",
            ("i32",),
        )
    return picked, wt


def _target_out_of_bounds(bad, size, dim):
    return f"pyrite: Target {bad} is out of bounds. (classes are 0..{size - 1})"


def _check_labels(safe, cd, C):
    """torch's range check of class labels: every target in [0, C) or ignore_index (`safe`:
    the targets with ignore_index replaced by 0). No readback where the labels' range is
    known (uploaded labels), else one."""
    if not ranges.within(safe, 0, C - 1):
        _indexing._check_device(
            [(safe, C, cd)], allow_negative=False, message=_target_out_of_bounds
        )


def _check_target(input, target, cd, name):
    """Class-index targets are input's shape without the class dim, in torch's words: a batch
    size that differs, else the expected size."""
    want = tuple(input._shape[:cd]) + tuple(input._shape[cd + 1 :])
    got = tuple(target._shape)
    if got == want:
        return
    if cd == 1 and (not got or got[0] != want[0]):
        first = got[0] if got else "none"
        words = f"Expected input batch_size ({want[0]}) to match target batch_size ({first})."
    else:
        words = f"Expected target size {list(want)}, got {list(got)}"
    raise ShapeError(
        f"pyrite: {name}: {words} (input of shape {tuple(input._shape)}, class dim {cd})"
    )


def _weight_view(weight, ndim, cd):
    shape = [1] * ndim
    shape[cd] = weight._shape[0]
    return weight.reshape(*shape)


def nll_loss(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
):
    """-input[target]·weight[target]; 'mean' divides by Σ weight[target] over kept targets."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    cd, C = _class_layout(input, "nll_loss")
    _check_target(input, target, cd, "nll_loss")
    if target.dtype.kind != "i":
        raise DtypeError(
            f"pyrite: nll_loss: expected target dtype to be Long or Byte, but got {target.dtype!r}"
        )
    _check_class_weight(weight, C)
    picked, wt = _pick(input, target, cd, ignore_index, weight)
    loss = fmap("-x0 * x1", [picked, wt], dtype=input.dtype)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / wt.sum()


def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index=-100,
    reduce=None,
    reduction="mean",
    label_smoothing=0.0,
):
    """log_softmax over the class dim, then nll_loss (class-index targets) or -Σ t·log p
    (probability targets), with torch's label smoothing and weighting.

    Class-index targets with an (N, C) or (C,) float32/float16 input take the fused kernels:
    one row kernel, then a sum ('sum') and a division ('mean'); one kernel for the backward.
    Targets are range-checked without a readback where their bounds are known (uploaded
    labels), else with one. Other layouts ((N, C, d1, ...), probability targets, rows past the
    device's loop budget) are composed from log_softmax, gather and reductions."""
    reduction = legacy_reduction(size_average, reduce, reduction)
    check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(
            f"pyrite: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        )
    cd, C = _class_layout(input, "cross_entropy")
    if not target.dtype.is_floating_point:
        _check_target(input, target, cd, "cross_entropy")
        _check_class_weight(weight, C)
        if _xent_fused(input, target, weight, C):
            return _xent(input, target, weight, C, cd, ignore_index, reduction, label_smoothing)
    logp = _rowops.log_softmax(input, cd)
    w_b = _weight_view(weight, input.ndim, cd) if weight is not None else None
    if target.dtype.is_floating_point:  # class probabilities, shaped like input
        if tuple(target._shape) != tuple(input._shape):
            # torch reads a target not shaped like input as class indices
            raise ShapeError(
                f"pyrite: cross_entropy: expected target dtype to be Long or Byte, but got "
                f"{target.dtype!r} (a floating-point target holds class probabilities and "
                f"must have the input's shape {tuple(input._shape)}, got "
                f"{tuple(target._shape)})"
            )
        if ignore_index >= 0:
            raise ArgumentError(
                "pyrite: cross_entropy: ignore_index is not supported for floating point target"
            )
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / C
        terms = fmap("-x0 * x1", [logp, target])
        if w_b is not None:
            terms = terms * w_b
        if reduction == "none":
            return terms.sum(cd)
        if reduction == "sum":
            return terms.sum()
        return terms.sum() / (input.numel() // C)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    _, wt = _pick(logp, target, cd, ignore_index, weight)
    smooth = logp if w_b is None else logp * w_b
    smooth = fmap(
        "select(-x0, 0.0, x1 == s0)",
        [smooth.sum(cd), target],
        [ignore_index],
        logp.dtype,
        ("f32", "i32"),
        "f32",
        ("i32",),
    )
    if reduction == "mean":
        smooth = smooth.sum() / wt.sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / C)


# ---- the fused cross_entropy (class-index targets, (N, C) or (C,) input) -----------------------
# The forward is one row kernel (ops/rowops.py _xent_forward: per-row loss, target weight and
# log-sum-exp), then a sum and a division for 'mean'; the backward one row kernel (_xent_backward)
# reading the forward's log-sum-exps and 'mean' denominator, kept here by the output's storage
# (a weak key: they live as long as the loss does; the backward rule reads them through
# ctx.out). Saving them rather than recomputing: the backward then reads each row of x once with
# no barrier, and the denominator (a sum over rows) could not be recomputed inside one row
# kernel anyway.
_XENT_SAVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_OWN = object()  # the forward buffer is the output's own storage ('none', float32)


def _check_class_weight(weight, C):
    if weight is not None and (weight.ndim != 1 or weight._shape[0] != C):
        raise RuntimeError(
            f"pyrite: weight tensor should be defined either for all {C} classes or no classes "
            f"but got weight tensor of shape: {list(weight._shape)}"
        )


def _xent_fused(input, target, weight, C):
    """Whether the fused kernels take cross_entropy(input, target): a 1-/2-D float32/float16
    input of at least one row and class, int32 targets, a row within the loop budget."""
    return (
        input.ndim in (1, 2)
        and input.dtype in (D.float32, D.float16)
        and target.dtype.wgsl == "i32"
        and target.dtype.kind == "i"
        and input.numel() > 0
        and (weight is None or weight.dtype in (D.float32, D.float16))
        and _rowops._xent_fits(C)
    )


def _xent_rows(x, t):
    """x as (N, C) and t as (N,) views (an unbatched (C,) input is one row)."""
    if x.ndim == 1:
        return x._view((1, x._shape[0]), (0, x._strides[0]), x._offset), t._view(
            (1,), (0,), t._offset
        )
    return x, t


def _xent(input, target, weight, C, cd, ignore_index, reduction, eps):
    if not ranges.within(target, 0, C - 1):
        # torch's range check: every target in [0, C) or ignore_index (one readback)
        safe = fmap(
            "select(x0, 0, x0 == s0)", [target], [ignore_index], D.int32, ("i32",), "i32", ("i32",)
        )
        _check_labels(safe, cd, C)
    x2, t1 = _xent_rows(input, target)
    N = x2._shape[0]
    buf = _rowops._xent_forward(x2, t1, weight, ignore_index, eps)
    den = None
    if reduction == "none":
        # the loss rows as a tensor of their own (not a view of buf: in-place ops on the loss
        # are then plain in-place ops)
        out = Tensor._make(buf._storage, tuple(target._shape), (1,) * target.ndim, 0, D.float32)
        if input.dtype is not D.float32:
            out = out.to(input.dtype)
    elif reduction == "sum":
        out = buf._view((N,), (1,), 0).sum()
        if input.dtype is not D.float32:
            out = out.to(input.dtype)
    else:
        sums = buf._view((2, N), (N, 1), 0).sum(1)
        den = sums._view((), (), sums._offset + 1)
        out = fmap("p_divf(x0, x1)", [sums._view((), (), sums._offset), den], dtype=input.dtype)
    if input.requires_grad:  # (the autograd wrapper records a node after this returns)
        own = out._storage is buf._storage
        _XENT_SAVED[out._storage] = (_OWN if own else buf, den)
    return out


def _g_xent_fused(ctx, g, a, reduction):
    """The fused backward (one kernel), or None where the forward left nothing to read."""
    out = ctx.out
    saved = _XENT_SAVED.get(out._storage) if isinstance(out, Tensor) else None
    if saved is None or g.dtype not in (D.float32, D.float16):
        return None
    x, target, weight = ctx.args[0], ctx.args[1], a["weight"]
    buf, den = saved
    x2, t1 = _xent_rows(x, target)
    if buf is _OWN:
        buf = Tensor._make(out._storage, (3 * x2._shape[0] + 1,), (1,), 0, D.float32)
    gs = g._strides[0] if reduction == "none" and g.ndim else 0
    gx = _rowops._xent_backward(
        x2, t1, weight, a["ignore_index"], a["label_smoothing"], buf, g, gs, den
    )
    return gx if x.ndim == 2 else gx._view(tuple(x._shape), (1,), 0)


__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "gaussian_nll_loss",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
]


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
# The forwards above are fused map kernels (nothing recorded inside), so each loss has its own
# rule: the elementwise derivative times the reduction's factor, written with recorded pyrite
# ops (double backward works). Arguments torch does not differentiate (nll/cross_entropy/bce
# class weights, pos_weight) raise torch's error at backward when they require grad.
import inspect as _inspect  # noqa: E402

from ..ops import creation as _creation  # noqa: E402
from ..ops import elementwise as _ew  # noqa: E402

_SIGS: dict = {}


def _bind(fn, ctx):
    """The call's arguments by name, defaults filled in (ctx.args, ctx.kwargs)."""
    sig = _SIGS.get(fn)
    if sig is None:
        sig = _SIGS[fn] = _inspect.signature(fn)
    b = sig.bind(*ctx.args, **ctx.kwargs)
    b.apply_defaults()
    return b.arguments


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _not_differentiable(ctx, pos, fname, what):
    if len(ctx.needs) > pos and ctx.needs[pos]:
        raise RuntimeError(
            f"pyrite: The function '{fname}' is not differentiable with respect to argument "
            f"'{what}'. This input cannot have requires_grad True."
        )


def _elem_scale(g, reduction, n):
    """The gradient reaching each element of the unreduced loss (n terms in a 'mean')."""
    if reduction == "mean":
        return g / max(n, 1) if n else g * float("nan")
    return g


def _elem_rule(fn, deriv, weight_pos=None, mean_by_weight=False):
    """A rule for loss = reduce(term(x, t)[· w]): deriv(a, x, t) -> (term or None, dx, dt)."""

    def rule(ctx, g):
        a = _bind(fn, ctx)
        x, t = ctx.args[0], ctx.args[1]
        reduction = legacy_reduction(a.get("size_average"), a.get("reduce"), a["reduction"])
        shape = broadcast_shapes(ctx.meta[0][0], ctx.meta[1][0])
        w = a.get("weight") if weight_pos is not None else None
        need_w = w is not None and ctx.needs[weight_pos]
        term, dx, dt = deriv(a, x, t, need_w)
        if w is not None and reduction == "mean" and mean_by_weight:
            ws = w.sum()
            ge = g / ws
            if need_w:  # the only branch that reads the output: checked here (it is soft)
                _autograd._check_versions(ctx, only=frozenset(("out",)))
            gw = (term - ctx.out) * ge if need_w else None
        else:
            ge = _elem_scale(g, reduction, _numel(shape))
            gw = term * ge if need_w else None
        if w is not None:
            ge = ge * w
        res = [
            ge * dx if ctx.needs[0] else None,
            ge * dt if ctx.needs[1] and dt is not None else None,
        ]
        if weight_pos is not None:
            res += [None] * (weight_pos - len(res)) + [gw]
        return tuple(res)

    # the output is read only for a weighted mean's weight gradient (checked there), so writing
    # the loss in place otherwise is allowed, as torch allows it
    rule.soft = frozenset(("out",))
    return rule


def _d_mse(a, x, t, need_term):
    d = x - t
    return (d * d if need_term else None), 2.0 * d, -2.0 * d


def _d_l1(a, x, t, need_term):
    d = x - t
    s = _ew.sign(d)
    return (d.abs() if need_term else None), s, -s


def _d_smooth_l1(a, x, t, need_term):
    beta = a["beta"]
    d = x - t
    if beta == 0.0:
        s = _ew.sign(d)
    else:
        s = _ew.where(d.abs() < beta, d / beta, _ew.sign(d))
    return None, s, -s


def _d_huber(a, x, t, need_term):
    delta = a["delta"]
    d = x - t
    small = d.abs() < delta
    s = _ew.where(small, d, delta * _ew.sign(d))
    term = None
    if need_term:
        term = _ew.where(small, 0.5 * d * d, delta * (d.abs() - 0.5 * delta))
    return term, s, -s


def _d_poisson(a, x, t, need_term):
    if a["log_input"]:
        dx, dt = _ew.exp(x) - t, -x
    else:
        eps = a["eps"]
        dx, dt = 1.0 - t / (x + eps), -_ew.log(x + eps)
    if a["full"]:
        # d/dt of t·log(t) - t + 0.5·log(2πt) where t > 1
        dt = dt + _ew.where(t > 1.0, _ew.log(t) + 0.5 / t, 0.0)
    return None, dx, dt


def _d_kl(a, x, t, need_term):
    if a["log_target"]:
        et = _ew.exp(t)
        return None, -et, et * (t - x + 1.0)
    # torch differentiates xlogy(t, t) - t·x: the target's gradient is NaN where t == 0
    dt = _ew.where(t != 0.0, _ew.log(t), 0.0) - x + t / t
    return None, -t, dt


def _g_kl_div(ctx, g):
    a = _bind(kl_div, ctx)
    if legacy_reduction(a["size_average"], a["reduce"], a["reduction"]) != "batchmean":
        return _kl_elem(ctx, g)
    x, t = ctx.args[0], ctx.args[1]
    _, dx, dt = _d_kl(a, x, t, False)
    ge = g / (ctx.meta[0][0][0] if len(ctx.meta[0][0]) else 1)
    return (ge * dx if ctx.needs[0] else None), (ge * dt if ctx.needs[1] else None)


def _g_bce(ctx, g):
    _not_differentiable(ctx, 2, "binary_cross_entropy", "weight")
    a = _bind(binary_cross_entropy, ctx)
    x, t, w = ctx.args[0], ctx.args[1], a["weight"]
    reduction = legacy_reduction(a["size_average"], a["reduce"], a["reduction"])
    ge = _elem_scale(g, reduction, _numel(ctx.meta[0][0]))
    if w is not None:
        ge = ge * w
    gx = gt = None
    if ctx.needs[0]:
        gx = ge * (x - t) / _ew.clamp_min((1.0 - x) * x, 1e-12)
    if ctx.needs[1]:
        gt = ge * (_ew.clamp_min(_ew.log1p(-x), -100.0) - _ew.clamp_min(_ew.log(x), -100.0))
    # (NaN where the input is outside [0, 1], as the forward)
    inside = (x >= 0.0) & (x <= 1.0)
    gx, gt = (None if v is None else _ew.where(inside, v, float("nan")) for v in (gx, gt))
    return gx, gt


def _g_bce_logits(ctx, g):
    _not_differentiable(ctx, 2, "binary_cross_entropy_with_logits", "weight")
    _not_differentiable(ctx, 6, "binary_cross_entropy_with_logits", "pos_weight")
    a = _bind(binary_cross_entropy_with_logits, ctx)
    x, t, w, pw = ctx.args[0], ctx.args[1], a["weight"], a["pos_weight"]
    reduction = legacy_reduction(a["size_average"], a["reduce"], a["reduction"])
    ge = _elem_scale(g, reduction, _numel(ctx.meta[0][0]))
    if w is not None:
        ge = ge * w
    gx = gt = None
    if ctx.needs[0]:
        s = _ew.sigmoid(x)
        gx = ge * ((s - t) if pw is None else (1.0 + (pw - 1.0) * t) * s - pw * t)
    if ctx.needs[1]:
        if pw is None:
            gt = -ge * x
        else:  # -x + (pw - 1)·softplus(-x), softplus(-x) = log1p(exp(-|x|)) + relu(-x)
            sp = _ew.log1p(_ew.exp(-x.abs())) + _ew.relu(-x)
            gt = ge * ((pw - 1.0) * sp - x)
    return gx, gt


def _class_scale(g, reduction, cd, denom):
    if reduction == "none":
        return g.unsqueeze(cd)
    if reduction == "sum":
        return g
    return g / denom


def _onehot(target, cd, C, ndim, dtype):
    shape = [1] * ndim
    shape[cd] = C
    classes = _creation.arange(C, dtype=D.int32).reshape(*shape)
    return _ew.eq(target.unsqueeze(cd), classes).to(dtype)


def _g_nll_loss(ctx, g):
    _not_differentiable(ctx, 2, "nll_loss_forward", "weight")
    a = _bind(nll_loss, ctx)
    if not ctx.needs[0]:
        return (None,)
    x, target, weight = ctx.args[0], ctx.args[1], a["weight"]
    reduction = legacy_reduction(a["size_average"], a["reduce"], a["reduction"])
    cd, C = _class_layout(x, "nll_loss")
    with _no_grad():
        _, wt = _pick(x, target, cd, a["ignore_index"], weight)
        denom = wt.sum() if reduction == "mean" else None
        if denom is not None:  # every sample ignored: gradient 0 (torch), not 0·inf
            denom = _ew.where(denom == 0, 1.0, denom)
        coef = _onehot(target, cd, C, x.ndim, x.dtype) * wt.unsqueeze(cd)
    return (-_class_scale(g, reduction, cd, denom) * coef,)


def _g_cross_entropy(ctx, g):
    """d/dx of -Σ_c Q_c·log_softmax(x)_c is softmax(x)·Σ_c Q_c - Q, with Q the weighted,
    smoothed target distribution of each sample (0 for an ignored one). With probability
    targets the weight is differentiable too (torch composes that form): -Σ scale·q·log p over
    everything but the class dim. Class-index targets through the fused forward take the fused
    backward kernel unless a double backward is being recorded (grad mode is on inside a rule
    only under create_graph=True): this composite is recorded then."""
    a = _bind(cross_entropy, ctx)
    x, target, weight = ctx.args[0], ctx.args[1], a["weight"]
    reduction = legacy_reduction(a["size_average"], a["reduce"], a["reduction"])
    eps = a["label_smoothing"]
    cd, C = _class_layout(x, "cross_entropy")
    w_b = _weight_view(weight, x.ndim, cd) if weight is not None else None
    gx = gt = None
    if target.dtype.is_floating_point:
        scale = _class_scale(g, reduction, cd, max(x.numel() // max(C, 1), 1))
        q = target * (1.0 - eps) + eps / C if eps > 0 else target
        Q = q * w_b if w_b is not None else q
        if ctx.needs[0]:
            p = _rowops.softmax(x, cd)
            gx = scale * (p * Q.sum(cd, keepdim=True) - Q)
        if ctx.needs[1]:
            logp = _rowops.log_softmax(x, cd)
            gt = -(1.0 - eps) * scale * (logp * w_b if w_b is not None else logp)
        gw = None
        if weight is not None and len(ctx.needs) > 2 and ctx.needs[2]:
            per = -(scale * q * _rowops.log_softmax(x, cd))
            others = tuple(d for d in range(per.ndim) if d != cd)
            gw = per.sum(others) if others else per
        return (gx, gt, gw) if gw is not None else (gx, gt)
    _not_differentiable(ctx, 2, "nll_loss_forward", "weight")
    if not ctx.needs[0]:
        return None, None
    if not _autograd.is_grad_enabled():  # not recording a double backward: the fused kernel
        gx = _g_xent_fused(ctx, g, a, reduction)
        if gx is not None:
            return gx, None
    with _no_grad():
        ii = a["ignore_index"]
        _, wt = _pick(x, target, cd, ii, weight)
        denom = wt.sum() if reduction == "mean" else None
        if denom is not None:
            # every sample ignored: the loss is 0/0 but each term's gradient is 0 (torch), not
            # 0·inf
            denom = _ew.where(denom == 0, 1.0, denom)
        Q = _onehot(target, cd, C, x.ndim, x.dtype) * wt.unsqueeze(cd)
        if eps > 0:
            keep = _ew.ne(target, ii).to(x.dtype).unsqueeze(cd)
            smooth = keep * w_b if w_b is not None else keep
            Q = Q * (1.0 - eps) + smooth * (eps / C)
        total = Q.sum(cd, keepdim=True)
    p = _rowops.softmax(x, cd)
    return _class_scale(g, reduction, cd, denom) * (p * total - Q), None


def _no_grad():
    from ..autograd import no_grad

    return no_grad()


_kl_elem = _elem_rule(kl_div, _d_kl)
# the output is kept for the fused backward's saved buffers (its storage is their key), not for
# its values: modifying the loss in place after the forward is fine, as in torch
_g_cross_entropy.soft = frozenset(("out",))

GRADS = {
    "mse_loss": _elem_rule(mse_loss, _d_mse, 5, True),
    "l1_loss": _elem_rule(l1_loss, _d_l1, 5, True),
    "smooth_l1_loss": _elem_rule(smooth_l1_loss, _d_smooth_l1),
    "huber_loss": _elem_rule(huber_loss, _d_huber, 4, False),
    "poisson_nll_loss": _elem_rule(poisson_nll_loss, _d_poisson),
    "kl_div": _g_kl_div,
    "binary_cross_entropy": _g_bce,
    "binary_cross_entropy_with_logits": _g_bce_logits,
    "nll_loss": _g_nll_loss,
    "cross_entropy": _g_cross_entropy,
}
