"""`pyrite.nn.init`: torch.nn.init's initialisers, in place and without recording gradients.

Same distributions, fans and gains as PyTorch's (the numbers differ: the generator is pyrite's
Philox stream on the device, so nothing is drawn on the host or read back).
"""

from __future__ import annotations

import math

from pyrite.errors import warn as _warn

from .. import linalg as _linalg
from ..autograd import no_grad

__all__ = [
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity: linear/conv/sigmoid 1, tanh 5/3, relu √2,
    leaky_relu √(2/(1 + slope²)), selu 3/4."""
    linear_fns = [
        "linear",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
    ]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight (out, in, *kernel): in·∏kernel and out·∏kernel."""
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    if tensor.dim() > 2:
        receptive_field_size = math.prod(tensor.shape[2:])
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std²)."""
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std²) truncated to [a, b] (PyTorch's inverse-CDF method: uniform
    on [2Φ(a')-1, 2Φ(b')-1], then erfinv, scale and shift; a' and b' standardised)."""

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        _warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    with no_grad():
        lo = norm_cdf((a - mean) / std)
        hi = norm_cdf((b - mean) / std)
        tensor.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        tensor.erfinv_()
        tensor.mul_(std * math.sqrt(2.0))
        tensor.add_(mean)
        tensor.clamp_(min=a, max=b)
        return tensor


def constant_(tensor, val):
    """Fill with the value val."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    with no_grad():
        return tensor.fill_(1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the diagonal, zeros elsewhere)."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.creation import eye

    with no_grad():
        tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D conv weight with the Dirac delta: each of the first
    out/groups output channels of a group copies its input channel."""
    dimensions = tensor.ndimension()
    if dimensions not in [3, 4, 5]:
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.size()
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    import numpy as np

    from ..ops.creation import tensor as _tensor

    host = np.zeros(tuple(sizes), dtype=np.float32)  # a small weight: built on the host, once
    centre = tuple(k // 2 for k in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            host[(g * out_chans_per_grp + d, d, *centre)] = 1
    with no_grad():
        tensor.copy_(_tensor(host, dtype=tensor.dtype))
    return tensor


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot: U(-a, a) with a = gain·√(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot: N(0, std²) with std = gain·√(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return gain / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He: U(-bound, bound) with bound = gain·√(3 / fan) (fan_in or fan_out by mode)."""
    if 0 in tensor.shape:
        _warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He: N(0, std²) with std = gain / √fan."""
    if 0 in tensor.shape:
        _warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill with a (semi-)orthogonal matrix: Q of the QR of a normal matrix, its columns'
    signs fixed by R's diagonal (so Q is uniform over the orthogonal group), times gain.
    Dims past the first are flattened."""
    if tensor.ndimension() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    from ..ops.creation import empty

    rows = tensor.size(0)
    cols = tensor.numel() // rows
    with no_grad():
        flattened = empty(rows, cols).normal_(0.0, 1.0, generator=generator)
        if rows < cols:
            flattened = flattened.t()
        q, r = _linalg.qr(flattened)
        d = r.diagonal(0, -2, -1)
        q = q * d.sign()
        if rows < cols:
            q = q.t()
        tensor.copy_(q.reshape(tensor.shape))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Fill a 2-D tensor with N(0, std²), then zero ceil(sparsity · rows) random rows of each
    column (torch's: a fresh permutation per column; here the ranks of uniform draws)."""
    if tensor.ndimension() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.creation import empty

    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        tensor.normal_(0.0, std, generator=generator)
        if num_zeros > 0 and tensor.numel() > 0:
            ranks = empty(rows, cols).uniform_(generator=generator).argsort(0).argsort(0)
            tensor.masked_fill_(ranks < num_zeros, 0.0)
    return tensor


def _deprecated(name, fn):
    def wrapper(*args, **kwargs):
        _warn(
            f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`.",
            FutureWarning,
            stacklevel=2,
        )
        return fn(*args, **kwargs)

    wrapper.__name__ = name
    return wrapper


uniform = _deprecated("uniform", uniform_)
normal = _deprecated("normal", normal_)
constant = _deprecated("constant", constant_)
xavier_uniform = _deprecated("xavier_uniform", xavier_uniform_)
xavier_normal = _deprecated("xavier_normal", xavier_normal_)
kaiming_uniform = _deprecated("kaiming_uniform", kaiming_uniform_)
kaiming_normal = _deprecated("kaiming_normal", kaiming_normal_)
orthogonal = _deprecated("orthogonal", orthogonal_)
sparse = _deprecated("sparse", sparse_)
eye = _deprecated("eye", eye_)
dirac = _deprecated("dirac", dirac_)
