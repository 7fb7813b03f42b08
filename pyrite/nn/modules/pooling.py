"""Pooling layers over ops/pool.py and ops/unpool.py: MaxPool1d/2d/3d, AvgPool1d/2d/3d,
AdaptiveAvgPool1d/2d/3d, AdaptiveMaxPool1d/2d/3d, LPPool1d/2d/3d, MaxUnpool1d/2d/3d,
FractionalMaxPool2d/3d (arguments stored as torch stores them, so the reprs agree)."""

from __future__ import annotations

from ...ops import pool as _pool
from ...ops import unpool as _unpool
from ..module import Module
from ._util import _pair, _single, _triple

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "FractionalMaxPool2d",
    "FractionalMaxPool3d",
    "LPPool1d",
    "LPPool2d",
    "LPPool3d",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MaxUnpool1d",
    "MaxUnpool2d",
    "MaxUnpool3d",
]


class _MaxPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"]
    _fn = None

    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
        ceil_mode=False,
    ):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (
            "kernel_size={kernel_size}, stride={stride}, padding={padding}, "
            "dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__)
        )

    def forward(self, input):
        return type(self)._fn(
            input, self.kernel_size, self.stride, self.padding, self.dilation,
            ceil_mode=self.ceil_mode, return_indices=self.return_indices,
        )  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    """Max over sliding windows of (N, C, L) or (C, L)."""

    _fn = staticmethod(_pool.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """Max over sliding windows of (N, C, H, W) or (C, H, W)."""

    _fn = staticmethod(_pool.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    _fn = staticmethod(_pool.max_pool3d)


class _AvgPoolNd(Module):
    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over sliding windows of (N, C, L) or (C, L)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):  # fmt: skip
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return _pool.avg_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad,
        )  # fmt: skip


class _AvgPool23(_AvgPoolNd):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return type(self)._fn(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip


class AvgPool2d(_AvgPool23):
    """Mean over sliding windows of (N, C, H, W) or (C, H, W)."""

    _fn = staticmethod(_pool.avg_pool2d)


class AvgPool3d(_AvgPool23):
    _fn = staticmethod(_pool.avg_pool3d)


class _AdaptiveAvgPoolNd(Module):
    __constants__ = ["output_size"]
    _fn = None

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"

    def forward(self, input):
        return type(self)._fn(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Mean over L/output_size-wide adaptive windows of (N, C, L) or (C, L)."""

    _fn = staticmethod(_pool.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Mean over adaptive windows to an (H_out, W_out) output; None keeps that size."""

    _fn = staticmethod(_pool.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    _fn = staticmethod(_pool.adaptive_avg_pool3d)


class _AdaptiveMaxPoolNd(Module):
    __constants__ = ["output_size", "return_indices"]
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"

    def forward(self, input):
        return type(self)._fn(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(_pool.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(_pool.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    _fn = staticmethod(_pool.adaptive_max_pool3d)


class _MaxUnpoolNd(Module):
    _fn = None
    _ntuple = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = type(self)._ntuple(kernel_size)
        self.stride = type(self)._ntuple(stride if (stride is not None) else kernel_size)
        self.padding = type(self)._ntuple(padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(
            input, indices, self.kernel_size, self.stride, self.padding, output_size
        )


class MaxUnpool1d(_MaxUnpoolNd):
    """The inverse of MaxPool1d: each value of (N, C, L) put back at its index, zeros
    elsewhere; `output_size` in forward picks among the sizes a pool could have come from."""

    _fn = staticmethod(_unpool.max_unpool1d)
    _ntuple = staticmethod(_single)


class MaxUnpool2d(_MaxUnpoolNd):
    """The inverse of MaxPool2d over (N, C, H, W) or (C, H, W)."""

    _fn = staticmethod(_unpool.max_unpool2d)
    _ntuple = staticmethod(_pair)


class MaxUnpool3d(_MaxUnpoolNd):
    """The inverse of MaxPool3d over (N, C, D, H, W) or (C, D, H, W)."""

    _fn = staticmethod(_unpool.max_unpool3d)
    _ntuple = staticmethod(_triple)


class _LPPoolNd(Module):
    __constants__ = ["norm_type", "kernel_size", "stride", "ceil_mode"]
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (
            "norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, "
            "ceil_mode={ceil_mode}".format(**self.__dict__)
        )

    def forward(self, input):
        return type(self)._fn(
            input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode
        )


class LPPool1d(_LPPoolNd):
    """(Σ x**p over each window) ** (1/p) of (N, C, L) or (C, L); p = inf is max pooling."""

    _fn = staticmethod(_pool.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """(Σ x**p over each window) ** (1/p) of (N, C, H, W) or (C, H, W)."""

    _fn = staticmethod(_pool.lp_pool2d)


class LPPool3d(_LPPoolNd):
    _fn = staticmethod(_pool.lp_pool3d)


class _FractionalMaxPoolNd(Module):
    """Arguments checked as torch checks them at construction; `_random_samples` (N, C, dims)
    is a buffer (None: fresh samples each forward)."""

    __constants__ = ["kernel_size", "return_indices", "output_size", "output_ratio"]
    _dims = 0
    _fn = None

    def __init__(
        self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
        _random_samples=None,
    ):  # fmt: skip
        super().__init__()
        dims, name = type(self)._dims, type(self).__name__
        ntuple = _pair if dims == 2 else _triple
        if dims == 3 and (
            (isinstance(kernel_size, int) and kernel_size <= 0)
            or (isinstance(kernel_size, (tuple, list)) and not all(k > 0 for k in kernel_size))
        ):
            raise ValueError(f"kernel_size must be greater than 0, but got {kernel_size}")
        self.kernel_size = ntuple(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = ntuple(output_size) if output_size is not None else None
        self.output_ratio = ntuple(output_ratio) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None:
            if not all(0 < self.output_ratio[i] < 1 for i in range(dims)):
                raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return type(self)._fn(
            input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
            _random_samples=self._random_samples,
        )  # fmt: skip


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max over k x k windows at pseudo-random fractional strides (Graham, 2014) of (N, C, H,
    W) or (C, H, W), to `output_size` or input size times `output_ratio`."""

    _dims = 2
    _fn = staticmethod(_unpool.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Max over k x k x k windows at pseudo-random fractional strides of (N, C, D, H, W) or
    (C, D, H, W)."""

    _dims = 3
    _fn = staticmethod(_unpool.fractional_max_pool3d)
