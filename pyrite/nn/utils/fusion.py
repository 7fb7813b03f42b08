"""torch.nn.utils.fusion: fold an eval-mode BatchNorm into the convolution or linear layer that
feeds it (w' = w·γ/√(σ²+ε) per output channel, b' = (b − μ)·γ/√(σ²+ε) + β), so inference runs
one layer instead of two. The formulas are torch's, operation for operation."""

from __future__ import annotations

import copy

from ...autograd import no_grad
from ...ops.creation import ones_like, zeros_like
from ..module import Parameter

__all__ = [
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
]


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A new convolution (a deep copy of `conv`) computing bn(conv(x)) for eval-mode modules.

    Args:
        conv: a convolution module (Conv1d/2d/3d, or a ConvTranspose with `transpose=True`).
        bn: a BatchNorm module with running statistics.
        transpose (bool): the weight's output channels are dim 1 (transposed convolutions).
    """
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
        transpose,
    )
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(fused weight, fused bias) as Parameters, from a convolution's weight and bias (None: 0)
    and a BatchNorm's running mean/var, eps, weight (None: 1) and bias (None: 0)."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    b_grad = conv_b.requires_grad if conv_b is not None else False
    with no_grad():
        if conv_b is None:
            conv_b = zeros_like(bn_rm)
        if bn_w is None:
            bn_w = ones_like(bn_rm)
        if bn_b is None:
            bn_b = zeros_like(bn_rm)
        var_rsqrt = (bn_rv + bn_eps).rsqrt()
        # (C_out, 1, 1...) or, transposed, (1, C_out, 1...)
        ones = [1] * (conv_w.ndim - 2)
        shape = [1, -1, *ones] if transpose else [-1, 1, *ones]
        fused_w = (conv_w * (bn_w * var_rsqrt).reshape(shape)).to(w_dtype)
        fused_b = ((conv_b - bn_rm) * var_rsqrt * bn_w + bn_b).to(b_dtype)
    return Parameter(fused_w, conv_w.requires_grad), Parameter(fused_b, b_grad)


def fuse_linear_bn_eval(linear, bn):
    """A new Linear (a deep copy of `linear`) computing bn(linear(x)) for eval-mode modules;
    bn.num_features must be linear.out_features or 1."""
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"linear.out_features={linear.out_features} and bn.num_features={bn.num_features}"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight,
        fused.bias,
        bn.running_mean,
        bn.running_var,
        bn.eps,
        bn.weight,
        bn.bias,
    )
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(fused weight, fused bias) as Parameters, from a Linear's weight and bias (None: 0) and
    a BatchNorm's running mean/var, eps, weight and bias."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    b_grad = linear_b.requires_grad if linear_b is not None else False
    with no_grad():
        if linear_b is None:
            linear_b = zeros_like(bn_rm)
        scale = bn_w * (bn_rv + bn_eps).rsqrt()  # (C_out,)
        fused_w = linear_w * scale.unsqueeze(-1).to(w_dtype)
        fused_b = ((linear_b - bn_rm) * scale + bn_b).to(b_dtype)
    return Parameter(fused_w, linear_w.requires_grad), Parameter(fused_b, b_grad)
