"""`pyrite.nn.functional`: torch.nn.functional's names, arguments and defaults (forward only).

    import pyrite.nn.functional as F

This module is the namespace; the implementations live by concern beside it:
  _activation.py  relu .. hardshrink, glu, softmax/softmin/log_softmax, the `_` in-place forms
  _loss.py        regression and likelihood losses, nll_loss, cross_entropy
  _margin.py      margin, ranking, multi-label and triplet losses
  _distance.py    pairwise_distance, cosine_similarity, pdist
  _ctc.py         ctc_loss (the alpha recursion on the device, kernels/ctc.py)
  _norm.py        batch/instance/group/layer/rms/local-response norm, normalize
  _sparse.py      embedding (max_norm), embedding_bag, one_hot
  _dropout.py     dropout and its alpha / channel-wise forms
  _attention.py   scaled_dot_product_attention
  _linear.py      linear, bilinear
  ops/conv.py     convolution and pooling (imported below)
Elementwise activations are one strided-map kernel each; normalisations and losses are maps
plus ops/reduce.py's reductions (which respect the device's loop budget) or ops/rowops.py's
fused row kernels. Gradients come with the training issue.
"""

from __future__ import annotations

from ..ops import pad as _pad
from ..ops.conv import conv1d, conv2d
from ..ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from ._activation import (
    celu,
    celu_,
    elu,
    elu_,
    gelu,
    glu,
    gumbel_softmax,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    hardtanh_,
    leaky_relu,
    leaky_relu_,
    log_softmax,
    logsigmoid,
    mish,
    prelu,
    relu,
    relu6,
    relu_,
    relu_squared,
    relu_squared_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    sigmoid,
    silu,
    softmax,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanh,
    tanhshrink,
    threshold,
    threshold_,
)
from ._attention import scaled_dot_product_attention
from ._ctc import ctc_loss
from ._distance import cosine_similarity, pairwise_distance, pdist
from ._dropout import (
    alpha_dropout,
    dropout,
    dropout1d,
    dropout2d,
    dropout3d,
    feature_alpha_dropout,
)
from ._linear import bilinear, linear
from ._linear_xent import linear_cross_entropy
from ._loss import (
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    cross_entropy,
    gaussian_nll_loss,
    huber_loss,
    kl_div,
    l1_loss,
    mse_loss,
    nll_loss,
    poisson_nll_loss,
    smooth_l1_loss,
)
from ._margin import (
    cosine_embedding_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_loss,
    triplet_margin_with_distance_loss,
)
from ._native import grouped_mm
from ._norm import (
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    local_response_norm,
    normalize,
    rms_norm,
)
from ._sparse import embedding, embedding_bag, one_hot


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)/2 dims: (left, right, top, bottom, ...); constant, reflect,
    replicate or circular."""
    return _pad.pad(input, pad, mode, value)


# ---- convolution and pooling (ops/conv.py, ops/pool.py) -------------------------------------
# conv1d, conv2d (ops/conv.py), max_pool2d, avg_pool2d, adaptive_avg_pool2d (ops/pool.py): above
# (same names, arguments and defaults as torch.nn.functional's).

__all__ = [
    "adaptive_avg_pool2d",
    "alpha_dropout",
    "avg_pool2d",
    "batch_norm",
    "bilinear",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "celu_",
    "conv1d",
    "conv2d",
    "cosine_embedding_loss",
    "cosine_similarity",
    "cross_entropy",
    "linear_cross_entropy",
    "ctc_loss",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "elu",
    "elu_",
    "embedding",
    "embedding_bag",
    "grouped_mm",
    "feature_alpha_dropout",
    "gaussian_nll_loss",
    "gelu",
    "glu",
    "gumbel_softmax",
    "group_norm",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "hardtanh_",
    "hinge_embedding_loss",
    "huber_loss",
    "instance_norm",
    "kl_div",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "leaky_relu_",
    "linear",
    "local_response_norm",
    "log_softmax",
    "logsigmoid",
    "margin_ranking_loss",
    "max_pool2d",
    "mish",
    "mse_loss",
    "multi_margin_loss",
    "multilabel_margin_loss",
    "multilabel_soft_margin_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "pairwise_distance",
    "pdist",
    "poisson_nll_loss",
    "prelu",
    "relu",
    "relu6",
    "relu_",
    "relu_squared",
    "relu_squared_",
    "rms_norm",
    "rrelu",
    "rrelu_",
    "scaled_dot_product_attention",
    "selu",
    "selu_",
    "sigmoid",
    "silu",
    "smooth_l1_loss",
    "soft_margin_loss",
    "softmax",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanh",
    "tanhshrink",
    "threshold",
    "threshold_",
    "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
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

# autograd (pyrite/autograd.py): the nn modules' functions record their GRADS rules or are
# guarded, as the op modules' are; names bound above by `from ... import` are rebound
from .. import autograd as _autograd  # noqa: E402
from ..tensor import Tensor as _Tensor  # noqa: E402
from . import (  # noqa: E402
    _activation,
    _attention,
    _ctc,
    _distance,
    _dropout,
    _linear,
    _loss,
    _margin,
    _norm,
    _sparse,
    _toplevel,
)

_autograd.install(
    [
        _activation,
        _attention,
        _ctc,
        _distance,
        _dropout,
        _linear,
        _loss,
        _margin,
        _norm,
        _sparse,
        _toplevel,
    ],
    _Tensor,
    namespaces=(globals(), _toplevel.TOPLEVEL, _toplevel.METHODS),
)

# ---- fused fast paths with flash-attn's and causal-conv1d's APIs (nn/_fastpaths.py) ---------
from . import _fastpaths  # noqa: E402

_autograd.install([_fastpaths], _Tensor, namespaces=(globals(),))
from ._fastpaths import (  # noqa: E402
    apply_rotary,
    apply_rotary_emb,
    apply_rotary_emb_3d,
    causal_conv1d,
    causal_conv1d_fn,
)

__all__ += [
    "apply_rotary",
    "apply_rotary_emb",
    "apply_rotary_emb_3d",
    "causal_conv1d",
    "causal_conv1d_fn",
]


def __getattr__(name):
    """torch.nn.functional.multi_head_attention_forward lives with nn.MultiheadAttention
    (nn/modules/attention.py, which imports this module): looked up on first use."""
    if name == "multi_head_attention_forward":
        from .modules.attention import multi_head_attention_forward

        globals()[name] = multi_head_attention_forward
        return multi_head_attention_forward
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
