"""pyrite.nn.utils: gradient clipping, parameter/vector conversion, rnn (pad_sequence),
parametrize and parametrizations (weight_norm, spectral_norm, orthogonal), the older hook-based
weight_norm / spectral_norm, prune, and conv/linear + BatchNorm fusion."""

from . import parametrizations, parametrize, prune, rnn, stateless
from .clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from .convert_parameters import parameters_to_vector, vector_to_parameters
from .fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from .weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters and buffers are left for the caller to
    initialise (torch's builds on the meta device; here the constructor's own init runs, and
    its values are as arbitrary to the caller as torch's uninitialised ones)."""
    from ..module import Module

    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    return module_cls(*args, **kwargs)


def convert_conv2d_weight_memory_format(module, memory_format):
    """The module itself: pyrite has one memory format, so there is nothing to convert."""
    return module


def convert_conv3d_weight_memory_format(module, memory_format):
    """The module itself: pyrite has one memory format, so there is nothing to convert."""
    return module


__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "convert_conv2d_weight_memory_format",
    "convert_conv3d_weight_memory_format",
    "fuse_conv_bn_eval",
    "fuse_conv_bn_weights",
    "fuse_linear_bn_eval",
    "fuse_linear_bn_weights",
    "get_total_norm",
    "parameters_to_vector",
    "parametrizations",
    "parametrize",
    "prune",
    "remove_spectral_norm",
    "remove_weight_norm",
    "rnn",
    "skip_init",
    "spectral_norm",
    "stateless",
    "vector_to_parameters",
    "weight_norm",
]
