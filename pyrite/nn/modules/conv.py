"""Convolution layers: Conv1d/2d/3d (groups, dilation, padding 'same'/'valid', padding_mode
zeros/reflect/replicate/circular), ConvTranspose1d/2d/3d, and Unfold/Fold (im2col/col2im, listed
among torch's convolution layers); weights and biases initialised
as torch's (kaiming_uniform_ with a=√5, bias U(-1/√fan_in, 1/√fan_in))."""

from __future__ import annotations

import math

from ...ops import conv as _conv
from ...ops import fold as _fold
from .. import functional as F
from .. import init
from ..module import Module, Parameter
from ._util import _pair, _reverse_repeat_tuple, _single, _triple, new_empty

__all__ = [
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Fold",
    "Unfold",
]


class _ConvNd(Module):
    __constants__ = [
        "stride",
        "padding",
        "dilation",
        "groups",
        "padding_mode",
        "output_padding",
        "in_channels",
        "out_channels",
        "kernel_size",
    ]

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        bias,
        padding_mode,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}"
                )
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(
                f"padding_mode must be one of {valid_padding_modes}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's (left, right, top, bottom, ...) for the non-zeros padding modes
        if isinstance(self.padding, str):
            rpad = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total_padding = d * (k - 1)
                    left_pad = total_padding // 2
                    rpad[2 * i] = left_pad
                    rpad[2 * i + 1] = total_padding - left_pad
            self._reversed_padding_repeated_twice = rpad
        else:
            self._reversed_padding_repeated_twice = list(_reverse_repeat_tuple(self.padding, 2))
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = Parameter(new_empty(*shape, dtype=dtype))
        if bias:
            self.bias = Parameter(new_empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # kaiming_uniform_ with a=√5: U(-1/√fan_in, 1/√fan_in), as torch's
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


def _conv_args(kernel_size, stride, padding, dilation, tup):
    padding_ = padding if isinstance(padding, str) else tup(padding)
    return tup(kernel_size), tup(stride), padding_, tup(dilation)


class _Conv(_ConvNd):
    _dims = 2
    _tuple = staticmethod(_pair)

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups=1,
        bias=True,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        tup = self._tuple
        k, s, p, d = _conv_args(kernel_size, stride, padding, dilation, tup)
        super().__init__(
            in_channels, out_channels, k, s, p, d, False, tup(0), groups, bias, padding_mode,
            device, dtype,
        )  # fmt: skip

    def _conv_forward(self, input, weight, bias):
        fn = (None, F.conv1d, F.conv2d, _conv.conv3d)[self._dims]
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return fn(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return fn(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L); weight (out, in/groups, k)."""

    _dims = 1
    _tuple = staticmethod(_single)


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W); weight (out, in/groups, kH, kW).

    Args:
        in_channels, out_channels (int), kernel_size (int or tuple),
        stride (int or tuple): default 1.
        padding (int, tuple or 'same'/'valid'): default 0.
        dilation (int or tuple): default 1.  groups (int): default 1.
        bias (bool): default True.
        padding_mode ('zeros', 'reflect', 'replicate' or 'circular'): default 'zeros'.
    """

    _dims = 2
    _tuple = staticmethod(_pair)


class Conv3d(_Conv):
    _dims = 3
    _tuple = staticmethod(_triple)


class _ConvTransposeNd(_ConvNd):
    _dims = 2
    _tuple = staticmethod(_pair)

    def __init__(
        self,
        in_channels,
        out_channels,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups=1,
        bias=True,
        dilation=1,
        padding_mode="zeros",
        device=None,
        dtype=None,
    ):
        if padding_mode != "zeros":
            raise ValueError(
                f'Only "zeros" padding mode is supported for {self.__class__.__name__}'
            )
        tup = self._tuple
        super().__init__(
            in_channels, out_channels, tup(kernel_size), tup(stride), tup(padding),
            tup(dilation), True, tup(output_padding), groups, bias, padding_mode, device, dtype,
        )  # fmt: skip

    def _output_padding(self, input, output_size, stride, padding, kernel_size, nsd, dilation):
        if output_size is None:
            return self._tuple(self.output_padding)
        has_batch_dim = input.dim() == nsd + 2
        num_non_spatial_dims = 2 if has_batch_dim else 1
        output_size = list(output_size)
        if len(output_size) == num_non_spatial_dims + nsd:
            output_size = output_size[num_non_spatial_dims:]
        if len(output_size) != nsd:
            raise ValueError(
                f"ConvTranspose{nsd}D: for {input.dim()}D input, output_size must have {nsd} "
                f"or {num_non_spatial_dims + nsd} elements (got {len(output_size)})"
            )
        min_sizes, max_sizes = [], []
        for d in range(nsd):
            dim_size = (
                (input.size(d + num_non_spatial_dims) - 1) * stride[d]
                - 2 * padding[d]
                + dilation[d] * (kernel_size[d] - 1)
                + 1
            )
            min_sizes.append(dim_size)
            max_sizes.append(dim_size + stride[d] - 1)
        for i, size in enumerate(output_size):
            if size < min_sizes[i] or size > max_sizes[i]:
                raise ValueError(
                    f"requested an output size of {output_size}, but valid sizes range "
                    f"from {min_sizes} to {max_sizes} (for an input of "
                    f"{list(input.size())[num_non_spatial_dims:]})"
                )
        return tuple(output_size[d] - min_sizes[d] for d in range(nsd))

    def forward(self, input, output_size=None):
        fn = (None, _conv.conv_transpose1d, _conv.conv_transpose2d, _conv.conv_transpose3d)
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, self._dims,
            self.dilation,
        )  # fmt: skip
        return fn[self._dims](
            input, self.weight, self.bias, self.stride, self.padding, output_padding,
            self.groups, self.dilation,
        )  # fmt: skip


class ConvTranspose1d(_ConvTransposeNd):
    _dims = 1
    _tuple = staticmethod(_single)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution; weight (in, out/groups, kH, kW); forward(input,
    output_size=None) picks the output_padding that gives output_size."""

    _dims = 2
    _tuple = staticmethod(_pair)


class ConvTranspose3d(_ConvTransposeNd):
    _dims = 3
    _tuple = staticmethod(_triple)


class Unfold(Module):
    """Sliding blocks of (N, C, *spatial) as columns: (N, C·∏kernel_size, L) (im2col)."""

    __constants__ = ["kernel_size", "dilation", "padding", "stride"]

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return _fold.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (
            "kernel_size={kernel_size}, dilation={dilation}, padding={padding},"
            " stride={stride}".format(**self.__dict__)
        )


class Fold(Module):
    """Columns (N, C·∏kernel_size, L) summed back into (N, C, *output_size) (col2im, the
    adjoint of Unfold)."""

    __constants__ = ["output_size", "kernel_size", "dilation", "padding", "stride"]

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return _fold.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self):
        return (
            "output_size={output_size}, kernel_size={kernel_size}, "
            "dilation={dilation}, padding={padding}, stride={stride}".format(**self.__dict__)
        )
