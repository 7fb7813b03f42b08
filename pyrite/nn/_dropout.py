"""Dropout of torch.nn.functional: dropout, alpha_dropout, feature_alpha_dropout and the
channel-wise dropout1d/2d/3d, with the device's Philox stream (`pr.manual_seed`).

One uniform draw per element (or per (sample, channel) for the feature forms, broadcast over the
spatial dims in the kernel) and one map kernel: kept elements are scaled (x / (1 - p), or
a·x + a·α·p for the SELU-preserving alpha forms, α = 1.7580993408473766 and
a = ((α²·p + 1)·(1 - p))^-1/2, torch's constants), dropped ones are 0 (alpha: a·α·(p - 1)).
Not training, p = 0 or an empty input return the input itself, as torch's.
"""

from __future__ import annotations

import math

from pyrite.errors import warn as _warn

from .. import autograd as _autograd
from ..errors import ShapeError
from ..ops import creation as _creation
from ..ops.core import empty, run_map
from ._common import need_tensor

_ALPHA = 1.7580993408473766  # -SELU_SCALE·SELU_ALPHA: SELU's negative saturation


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"pyrite: dropout probability has to be between 0 and 1, but got {p}")


def _dropout(input, p, train, inplace, feature, alpha, name):
    need_tensor(name, "input", input)
    _check_p(p)
    if p == 0.0 or not train or input.numel() == 0:
        return input
    if feature and input.ndim < 2:
        raise ShapeError(
            f"pyrite: {name}: Feature dropout requires at least 2 dimensions in the input"
        )
    if _autograd.needs_grad(input):
        return _recorded_dropout(input, p, inplace, feature, alpha)
    out = input if inplace else empty(input._shape, input.dtype)
    if p == 1.0:  # torch: input · 0, NaN for NaN and inf (a compiler may fold x·0 to 0)
        return run_map(
            "select(0.0, p_nan(), p_isnan(x0) || p_isinf(x0))", (input,), ("f32",), out, "f32"
        )
    noise_shape = input._shape[:2] + (1,) * (input.ndim - 2) if feature else input._shape
    u = _creation.rand(noise_shape)  # kept where u >= p: probability 1 - p
    if alpha:
        a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p))
        expr = "select(s2 * (s1 - 1.0), x0 * s0 + s2 * s1, x1 >= s1)"
        scalars = (a, p, _ALPHA * a)
    else:
        expr = "select(0.0, x0 * s0, x1 >= s1)"
        scalars = (1.0 / (1.0 - p), p)
    return run_map(expr, (input, u), ("f32", "f32"), out, "f32", scalars, ("f32",) * len(scalars))


def _recorded_dropout(input, p, inplace, feature, alpha):
    """Dropout as recorded ops when input requires grad: out = input·M (+ B for the alpha
    forms), M the scaled keep-mask (0 or the scale), so the gradient is g·M with the very mask
    of the forward (the mul's node keeps it)."""
    noise_shape = input._shape[:2] + (1,) * (input.ndim - 2) if feature else input._shape
    if p == 1.0:  # input · 0: NaN stays NaN (a tensor operand, never folded away)
        m = _creation.zeros(noise_shape, dtype=input.dtype)
        return input.mul_(m) if inplace else input * m
    u = _creation.rand(noise_shape)
    scale = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1) * (1 - p)) if alpha else 1.0 / (1.0 - p)
    m = run_map(
        "select(0.0, s0, x0 >= s1)",
        (u,),
        ("f32",),
        empty(noise_shape, input.dtype),
        "f32",
        (scale, p),
        ("f32", "f32"),
    )
    out = input.mul_(m) if inplace else input * m
    if alpha:
        b = run_map(
            "select(s0 * (s1 - 1.0), s0 * s1, x0 >= s1)",
            (u,),
            ("f32",),
            empty(noise_shape, input.dtype),
            "f32",
            (_ALPHA * scale, p),
            ("f32", "f32"),
        )
        out = out.add_(b) if inplace else out + b
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1 - p)."""
    return _dropout(input, p, training, inplace, False, False, "dropout")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's self-normalising mean and variance."""
    return _dropout(input, p, training, inplace, False, True, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels (dim 1)."""
    return _dropout(input, p, training, inplace, True, True, "feature_alpha_dropout")


def _channel_dropout(input, p, training, inplace, spatial, name):
    need_tensor(name, "input", input)
    _check_p(p)
    batched_dims = spatial + 2
    if spatial == 1 and input.ndim not in (2, 3):
        raise ShapeError(
            f"pyrite: dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input."
        )
    if spatial > 1 and input.ndim not in (batched_dims - 1, batched_dims):
        _warn(
            f"pyrite: {name}: Received a {input.ndim}-D input to {name}, which is deprecated "
            "and will result in an error in a future release.",
            stacklevel=3,
        )
    # dropout2d on a 3-D input is channel-wise 1-D dropout over (N, C, L), as torch's
    unbatched = input.ndim == batched_dims - 1 and spatial != 2
    x = input.unsqueeze(0) if unbatched else input
    out = _dropout(x, p, training, inplace, True, False, name)
    if out is x:
        return input
    return out.squeeze(0) if unbatched else out


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) or (C, L) inputs."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) inputs."""
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d")


def feature_dropout(input, p, train):
    """torch.feature_dropout: dropout of whole channels (dim 1)."""
    return _dropout(input, p, train, False, True, False, "feature_dropout")


__all__ = [
    "alpha_dropout",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "feature_alpha_dropout",
]
