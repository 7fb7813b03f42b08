"""The torch.* (top-level) and Tensor-method spellings of nn.functional's ops.

torch exposes many functional ops at the top level too, some with their own signatures: the
losses take `reduction` as an int (0 none, 1 mean, 2 sum), batch_norm/instance_norm put weight
and bias before the running statistics and take every argument positionally, embedding takes
(weight, indices), dropout takes (input, p, train). These are those forms, each a thin call of
the functional one; `pyrite/__init__.py` exports TOPLEVEL as `pyrite.<name>` and
`pyrite/nn/__init__.py` installs METHODS on Tensor.
"""

from __future__ import annotations

from ..ops import rowops as _rowops
from . import _activation as A
from . import _ctc, _distance, _dropout, _linear, _loss, _margin, _norm, _sparse
from ._common import reduction_name as _red


# ---- activations ---------------------------------------------------------------------------
def relu_(input):
    return A.relu(input, inplace=True)


def selu(input):
    return A.selu(input)


def selu_(input):
    return A.selu(input, inplace=True)


def celu(input, alpha=1.0):
    return A.celu(input, alpha)


def celu_(input, alpha=1.0):
    return A.celu(input, alpha, inplace=True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return A.rrelu(input, lower, upper, training, generator=generator)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    return A.rrelu(input, lower, upper, training, inplace=True, generator=generator)


def threshold(input, threshold, value):
    return A.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    return A.threshold(input, threshold, value, inplace=True)


def hardshrink(input, lambd=0.5):
    return A.hardshrink(input, lambd)


def prelu(input, weight):
    return A.prelu(input, weight)


def sigmoid_(input):
    return input.sigmoid_()


def tanh_(input):
    return input.tanh_()


# ---- losses (reduction as torch's enum: 0 none, 1 mean, 2 sum) -----------------------------
def kl_div(input, target, reduction=1, *, log_target=False):
    return _loss.kl_div(input, target, reduction=_red(reduction), log_target=log_target)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    return _loss.binary_cross_entropy_with_logits(
        input, target, weight, reduction=_red(reduction), pos_weight=pos_weight
    )


def poisson_nll_loss(input, target, log_input, full, eps, reduction):
    return _loss.poisson_nll_loss(
        input, target, log_input, full, eps=eps, reduction=_red(reduction)
    )


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction=1):
    return _margin.margin_ranking_loss(input1, input2, target, margin, reduction=_red(reduction))


def hinge_embedding_loss(input, target, margin=1.0, reduction=1):
    return _margin.hinge_embedding_loss(input, target, margin, reduction=_red(reduction))


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    return _margin.cosine_embedding_loss(input1, input2, target, margin, reduction=_red(reduction))


def triplet_margin_loss(
    anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, reduction=1
):
    return _margin.triplet_margin_loss(
        anchor, positive, negative, margin, p, eps, swap, reduction=_red(reduction)
    )


def ctc_loss(
    log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False
):
    return _ctc.ctc_loss(
        log_probs, targets, input_lengths, target_lengths, blank, _red(reduction), zero_infinity
    )


# ---- normalisation -------------------------------------------------------------------------
def batch_norm(
    input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True
):
    return _norm.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(
    input,
    weight,
    bias,
    running_mean,
    running_var,
    use_input_stats,
    momentum,
    eps,
    cudnn_enabled=True,
):
    return _norm.instance_norm(
        input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
    )


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _norm.group_norm(input, num_groups, weight, bias, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return _rowops.layer_norm(input, normalized_shape, weight, bias, eps)


# ---- embedding, dropout --------------------------------------------------------------------
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding(weight, indices): note the order, the reverse of F.embedding's. An
    integer first argument and a float second are taken in F.embedding's order (pyrite's
    earlier top-level spelling; torch would raise there)."""
    if weight.dtype.kind == "i" and indices.dtype.is_floating_point:
        weight, indices = indices, weight
    return _sparse.embedding(indices, weight)


def dropout(input, p, train):
    return _dropout.dropout(input, p, train)


def dropout_(input, p, train):
    return _dropout.dropout(input, p, train, inplace=True)


def alpha_dropout(input, p, train):
    return _dropout.alpha_dropout(input, p, train)


def alpha_dropout_(input, p, train):
    return _dropout.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input, p, train):
    return _dropout.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input, p, train):
    return _dropout.feature_alpha_dropout(input, p, train, inplace=True)


def feature_dropout(input, p, train):
    return _dropout.feature_dropout(input, p, train)


def feature_dropout_(input, p, train):
    return _dropout._dropout(input, p, train, True, True, False, "feature_dropout_")


TOPLEVEL = {
    "alpha_dropout": alpha_dropout,
    "alpha_dropout_": alpha_dropout_,
    "batch_norm": batch_norm,
    "bilinear": _linear.bilinear,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits,
    "celu": celu,
    "celu_": celu_,
    "cosine_embedding_loss": cosine_embedding_loss,
    "cosine_similarity": _distance.cosine_similarity,
    "ctc_loss": ctc_loss,
    "dropout": dropout,
    "dropout_": dropout_,
    "embedding": embedding,
    "feature_alpha_dropout": feature_alpha_dropout,
    "feature_alpha_dropout_": feature_alpha_dropout_,
    "feature_dropout": feature_dropout,
    "feature_dropout_": feature_dropout_,
    "group_norm": group_norm,
    "hardshrink": hardshrink,
    "hinge_embedding_loss": hinge_embedding_loss,
    "instance_norm": instance_norm,
    "kl_div": kl_div,
    "layer_norm": layer_norm,
    "margin_ranking_loss": margin_ranking_loss,
    "pairwise_distance": _distance.pairwise_distance,
    "pdist": _distance.pdist,
    "poisson_nll_loss": poisson_nll_loss,
    "prelu": prelu,
    "relu_": relu_,
    "rrelu": rrelu,
    "rrelu_": rrelu_,
    "selu": selu,
    "selu_": selu_,
    "sigmoid_": sigmoid_,
    "tanh_": tanh_,
    "threshold": threshold,
    "threshold_": threshold_,
    "triplet_margin_loss": triplet_margin_loss,
}
# torch.native_layer_norm, gru_cell, embedding_bag, ... (aten's spellings): nn/_native.py
from ._native import TOPLEVEL as _NATIVE  # noqa: E402

TOPLEVEL.update(_NATIVE)

METHODS = {
    "hardshrink": hardshrink,
    "prelu": prelu,
}
