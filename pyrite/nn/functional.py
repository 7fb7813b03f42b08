"""`pyrite.nn.functional`: torch.nn.functional's names, arguments and defaults (forward only).

Everything here is composed from ops: activations are one strided-map kernel each (`_map`),
normalisations are the fused row kernels (ops/rowops.py), losses are one map kernel for the
elementwise part plus a reduction (ops/reduce.py), attention is matmul → mask → softmax → matmul.
Gradients come with the training issue.
"""

from __future__ import annotations

import math

from .. import dtypes as D
from ..errors import ShapeError
from ..ops import combine as _combine
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import matmul as _matmul
from ..ops import pad as _pad
from ..ops import reduce as _reduce
from ..ops import rowops as _rowops
from ..ops import scatter as _scatter
from ..ops.conv import adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d, max_pool2d
from ..ops.core import broadcast_shapes, empty, run_map

softmax = _rowops.softmax
log_softmax = _rowops.log_softmax
layer_norm = _rowops.layer_norm
rms_norm = _rowops.rms_norm


def _float_dtype(*tensors):
    """f16 when every tensor is f16, else f32 (pyrite's float promotion for two floats)."""
    return D.float16 if all(t.dtype is D.float16 for t in tensors) else D.float32


def _map(expr: str, tensors, scalars=(), dtype=None, ctypes=None, out_ctype="f32", s_ctypes=None):
    """One kernel: out = expr(x0.., s0..) over the broadcast of `tensors` (f32 unless told)."""
    tensors = [_ew.as_tensor_arg(t) for t in tensors]
    shape = tensors[0]._shape
    for t in tensors[1:]:
        if t._shape != shape:
            shape = broadcast_shapes(shape, t._shape)
    out = empty(shape, dtype or _float_dtype(*tensors))
    return run_map(
        expr,
        tensors,
        tuple(ctypes or ("f32",) * len(tensors)),
        out,
        out_ctype,
        tuple(scalars),
        tuple(s_ctypes or ("f32",) * len(scalars)),
    )


def _inplace(input, result, inplace):
    return input.copy_(result) if inplace else result


# ---- linear, activations -------------------------------------------------------------------
def linear(input, weight, bias=None):
    """input @ weight.T + bias (ops/matmul.py adds the bias in the GEMM epilogue)."""
    return _matmul.linear(input, weight, bias)


def relu(input, inplace=False):
    return _inplace(input, _ew.relu(input), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(
            f"pyrite: hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})"
        )
    return _inplace(input, _ew.clamp(input, min_val, max_val), inplace)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    y = _map(
        "select(x0 * s0, x0, x0 > 0.0)",
        [input],
        [negative_slope],
        input.dtype if input.dtype.is_floating_point else D.float32,
    )
    return _inplace(input, y, inplace)


def elu(input, alpha=1.0, inplace=False):
    y = _map("select(s0 * p_expm1(x0), x0, x0 > 0.0)", [input], [alpha], _fdt(input))
    return _inplace(input, y, inplace)


def _fdt(x):
    return x.dtype if x.dtype.is_floating_point else D.float32


def gelu(input, approximate="none"):
    return _ew.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _inplace(input, _ew.silu(input), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    return _ew.softplus(input, beta, threshold)


def sigmoid(input):
    return _ew.sigmoid(input)


def tanh(input):
    return _ew.tanh(input)


# ---- normalisation, embedding, one_hot, pad, dropout ---------------------------------------
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(‖input‖_p along dim, eps)."""
    n = _reduce.norm(input, p, dim, keepdim=True)
    y = _map("x0 / max(x1, s0)", [input, n], [eps], _fdt(input))
    return y if out is None else out.copy_(y)


def embedding(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """weight[input]: rows of `weight` (V, D) picked by the integer tensor `input`."""
    return _scatter.embedding(
        input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse
    )


def one_hot(tensor, num_classes=-1):
    """(..., num_classes) int tensor with a 1 at each index (num_classes=-1: max + 1)."""
    return _scatter.one_hot(tensor, num_classes)


def pad(input, pad, mode="constant", value=None):
    return _pad.pad(input, pad, mode, value)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p (device RNG) and scale the rest by 1/(1-p)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"pyrite: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _inplace(input, _creation.zeros_like(input), inplace)
    u = _creation.rand_like(input, dtype=D.float32)
    y = _map("select(0.0, x0 * s1, x1 >= s0)", [input, u], [p, 1.0 / (1.0 - p)], input.dtype)
    return _inplace(input, y, inplace)


# ---- convolution and pooling (ops/conv.py) -------------------------------------------------
# conv1d, conv2d, max_pool2d, avg_pool2d and adaptive_avg_pool2d: ops/conv.py's, imported above
# (same names, arguments and defaults as torch.nn.functional's).


# ---- losses --------------------------------------------------------------------------------
def _reduce_loss(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"pyrite: {reduction!r} is not a valid value for reduction")


def _check_reduction(reduction, allowed=("none", "mean", "sum")):
    if reduction not in allowed:
        raise ValueError(f"pyrite: {reduction!r} is not a valid value for reduction")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_reduction(reduction)
    return _reduce_loss(_map("(x0 - x1) * (x0 - x1)", [input, target]), reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _check_reduction(reduction)
    return _reduce_loss(_map("abs(x0 - x1)", [input, target]), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    _check_reduction(reduction)
    if beta < 0:
        raise ValueError(
            f"pyrite: smooth_l1_loss does not support negative values for beta, got {beta}"
        )
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    loss = _map(
        "select(abs(x0 - x1) - 0.5 * s0, 0.5 * (x0 - x1) * (x0 - x1) / s0, abs(x0 - x1) < s0)",
        [input, target],
        [beta],
    )
    return _reduce_loss(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _check_reduction(reduction)
    loss = _map(
        "select(s0 * (abs(x0 - x1) - 0.5 * s0), 0.5 * (x0 - x1) * (x0 - x1), abs(x0 - x1) < s0)",
        [input, target],
        [delta],
    )
    return _reduce_loss(loss, reduction)


def binary_cross_entropy(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean"
):
    """-(t·log(x) + (1 - t)·log(1 - x)), each log clamped at -100 as torch does."""
    _check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: binary_cross_entropy: target size {tuple(target._shape)} "
            f"must be the same as input size {tuple(input._shape)}"
        )
    expr = "-(x1 * max(log(x0), -100.0) + (1.0 - x1) * max(log(1.0 - x0), -100.0))"
    tens = [input, target]
    if weight is not None:
        expr = f"({expr}) * x2"
        tens.append(weight)
    return _reduce_loss(_map(expr, tens, dtype=_float_dtype(input, target)), reduction)


def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """(1 - t)·x + (1 + (pw - 1)·t)·(log1p(exp(-|x|)) + max(-x, 0)): never exp of a large x."""
    _check_reduction(reduction)
    if tuple(target._shape) != tuple(input._shape):
        raise ShapeError(
            f"pyrite: binary_cross_entropy_with_logits: target size "
            f"{tuple(target._shape)} must be the same as input size "
            f"{tuple(input._shape)}"
        )
    soft = "(p_log1p(exp(-abs(x0))) + max(-x0, 0.0))"
    tens = [input, target]
    if pos_weight is not None:
        tens.append(pos_weight)
        expr = f"(1.0 - x1) * x0 + (1.0 + (x2 - 1.0) * x1) * {soft}"
    else:
        expr = f"(1.0 - x1) * x0 + {soft}"
    if weight is not None:
        expr = f"({expr}) * x{len(tens)}"
        tens.append(weight)
    return _reduce_loss(_map(expr, tens, dtype=_float_dtype(input, target)), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target·(log(target) - input) (0 where target is 0), or exp(t)·(t - input) for log t."""
    _check_reduction(reduction, ("none", "mean", "sum", "batchmean"))
    if log_target:
        loss = _map("exp(x1) * (x1 - x0)", [input, target])
    else:
        loss = _map("select(x1 * (log(x1) - x0), 0.0, x1 == 0.0)", [input, target])
    if reduction == "batchmean":
        return loss.sum() / (input._shape[0] if input.ndim else 1)
    return _reduce_loss(loss, reduction)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Σ (x1/max(‖x1‖, eps))·(x2/max(‖x2‖, eps)) along dim, after broadcasting x1 with x2."""
    shape = broadcast_shapes(x1._shape, x2._shape)
    a, b = x1.expand(*shape), x2.expand(*shape)
    na = _reduce.norm(a, 2, dim, keepdim=True)
    nb = _reduce.norm(b, 2, dim, keepdim=True)
    prod = _map("(x0 / max(x1, s0)) * (x2 / max(x3, s0))", [a, na, b, nb], [eps])
    return prod.sum(dim)


# ---- nll_loss and cross_entropy ------------------------------------------------------------
def _class_layout(input, target, name):
    """(class dim, C) for input (N, C, d1, ...) or unbatched (C,), checking the target's shape."""
    if input.ndim == 0:
        raise ShapeError(f"pyrite: {name}: input must have at least 1 dim, got a 0-d tensor")
    cd = 0 if input.ndim == 1 else 1
    return cd, input._shape[cd]


def _pick(logp, target, cd, C, ignore_index, weight):
    """(logp[target] along cd, weight[target]), both 0 where target == ignore_index."""
    # an ignored target reads class 0 (always in range), then is zeroed
    safe = _map(
        "select(x0, 0, x0 == s0)", [target], [ignore_index], D.int32, ("i32",), "i32", ("i32",)
    )
    picked = _scatter.gather(logp, cd, safe.unsqueeze(cd)).squeeze(cd)
    picked = _map(
        "select(x0, 0.0, x1 == s0)",
        [picked, target],
        [ignore_index],
        logp.dtype,
        ("f32", "i32"),
        "f32",
        ("i32",),
    )
    if weight is None:
        wt = _map(
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
        wt = _map(
            "select(x0, 0.0, x1 == s0)",
            [wt, target],
            [ignore_index],
            weight.dtype,
            ("f32", "i32"),
            "f32",
            ("i32",),
        )
    return picked, wt


def _check_target(input, target, cd, name):
    want = tuple(input._shape[:cd]) + tuple(input._shape[cd + 1 :])
    if tuple(target._shape) != want:
        raise ShapeError(
            f"pyrite: {name}: expected target of shape {want} for input of shape "
            f"{tuple(input._shape)}, got {tuple(target._shape)}"
        )


def _weight_view(weight, ndim, cd):
    shape = [1] * ndim
    shape[cd] = weight._shape[0]
    return weight.reshape(*shape)


def nll_loss(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
):
    """-input[target]·weight[target]; 'mean' divides by Σ weight[target] over kept targets."""
    _check_reduction(reduction)
    cd, C = _class_layout(input, target, "nll_loss")
    _check_target(input, target, cd, "nll_loss")
    if target.dtype.kind != "i":
        raise TypeError(f"pyrite: nll_loss: expected an integer target, got {target.dtype!r}")
    picked, wt = _pick(input, target, cd, C, ignore_index, weight)
    loss = _map("-x0 * x1", [picked, wt], dtype=input.dtype)
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
    (probability targets), with torch's label smoothing and weighting."""
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(
            f"pyrite: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}"
        )
    cd, C = _class_layout(input, target, "cross_entropy")
    logp = log_softmax(input, cd)
    w_b = _weight_view(weight, input.ndim, cd) if weight is not None else None
    if target.dtype.is_floating_point:  # class probabilities, shaped like input
        if tuple(target._shape) != tuple(input._shape):
            raise ShapeError(
                f"pyrite: cross_entropy: probability target of shape "
                f"{tuple(target._shape)} must match input {tuple(input._shape)}"
            )
        if label_smoothing > 0:
            target = target * (1.0 - label_smoothing) + label_smoothing / C
        terms = _map("-x0 * x1", [logp, target])
        if w_b is not None:
            terms = terms * w_b
        if reduction == "none":
            return terms.sum(cd)
        if reduction == "sum":
            return terms.sum()
        return terms.sum() / (input.numel() // C)
    _check_target(input, target, cd, "cross_entropy")
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if label_smoothing == 0.0:
        return nll
    _, wt = _pick(logp, target, cd, C, ignore_index, weight)
    smooth = logp if w_b is None else logp * w_b
    smooth = _map(
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


# ---- attention -----------------------------------------------------------------------------
def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """softmax(q·kᵀ·scale + mask)·v over (..., L, E) queries and (..., S, E) keys.

    A bool mask marks the pairs that take part (True = attend); a float mask is added to the
    scores; is_causal masks with the lower triangle of an (L, S) matrix (top-left aligned, as
    torch); enable_gqa repeats each key/value head for its group of query heads (dim -3).
    """
    if is_causal and attn_mask is not None:
        raise ValueError(
            "pyrite: scaled_dot_product_attention: explicit attn_mask should not be "
            "set when is_causal=True"
        )
    L, E = query._shape[-2], query._shape[-1]
    S = key._shape[-2]
    if enable_gqa and query.ndim >= 3 and key._shape[-3] != query._shape[-3]:
        hq, hk = query._shape[-3], key._shape[-3]
        if hq % hk or value._shape[-3] != hk:
            raise ShapeError(
                f"pyrite: scaled_dot_product_attention: {hq} query heads are not a "
                f"multiple of {hk} key/value heads"
            )
        key = _combine.repeat_interleave(key, hq // hk, -3)
        value = _combine.repeat_interleave(value, hq // hk, -3)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    scores = _matmul.matmul(query, key.transpose(-2, -1))  # (..., L, S)
    if is_causal:
        rows = _creation.arange(L, dtype=D.int32).unsqueeze(1)
        attn_mask = _ew.ge(rows, _creation.arange(S, dtype=D.int32))  # (L, S): j <= i
    if attn_mask is None:
        scores = _map("x0 * s0", [scores], [scale], scores.dtype)
    elif attn_mask.dtype.is_bool:
        scores = run_map(
            "select(-p_inf(), x0 * s0, x1)",
            [scores, attn_mask],
            ("f32", "bool"),
            empty(broadcast_shapes(scores._shape, attn_mask._shape), scores.dtype),
            "f32",
            (scale,),
            ("f32",),
        )
    else:
        scores = _map("x0 * s0 + x1", [scores, attn_mask], [scale], scores.dtype)
    attn = softmax(scores, -1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return _matmul.matmul(attn, value)


__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "conv1d",
    "conv2d",
    "cosine_similarity",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "hardtanh",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "relu",
    "relu6",
    "rms_norm",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "softmax",
    "softplus",
    "tanh",
]


# ---- convolution, pooling and resampling (ops/conv.py, ops/pool.py, ops/resample.py) ----------
from ..ops.conv import (  # noqa: E402
    conv3d,
    conv_tbc,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from ..ops.fold import fold, unfold  # noqa: E402
from ..ops.grid import affine_grid, grid_sample  # noqa: E402
from ..ops.pool import (  # noqa: E402
    adaptive_avg_pool1d,
    adaptive_avg_pool3d,
    adaptive_max_pool1d,
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d,
    adaptive_max_pool3d_with_indices,
    avg_pool1d,
    avg_pool3d,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d,
    max_pool3d_with_indices,
)
from ..ops.resample import (  # noqa: E402
    channel_shuffle,
    interpolate,
    native_channel_shuffle,
    pixel_shuffle,
    pixel_unshuffle,
    upsample,
    upsample_bilinear,
    upsample_nearest,
)
from ..ops.unpool import (  # noqa: E402
    fractional_max_pool2d,
    fractional_max_pool2d_with_indices,
    fractional_max_pool3d,
    fractional_max_pool3d_with_indices,
    max_unpool1d,
    max_unpool2d,
    max_unpool3d,
)

__all__ += [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d",
    "adaptive_max_pool3d_with_indices",
    "affine_grid",
    "avg_pool1d",
    "avg_pool3d",
    "channel_shuffle",
    "conv3d",
    "conv_tbc",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "fold",
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
    "grid_sample",
    "interpolate",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
    "max_pool1d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d",
    "max_pool3d_with_indices",
    "max_unpool1d",
    "max_unpool2d",
    "max_unpool3d",
    "native_channel_shuffle",
    "pixel_shuffle",
    "pixel_unshuffle",
    "unfold",
    "upsample",
    "upsample_bilinear",
    "upsample_nearest",
]
