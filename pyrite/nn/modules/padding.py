"""Padding layers: Zero/Constant/Reflection/Replication/Circular Pad1d/2d/3d over F.pad.
`padding` is an int (every side) or (left, right[, top, bottom[, front, back]])."""

from __future__ import annotations

from .. import functional as F
from ..module import Module
from ._util import _ntuple

__all__ = [
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
]


class _PadNd(Module):
    __constants__ = ["padding"]
    _mode = "constant"
    _sides = 4

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(self._sides)(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    __constants__ = ["padding", "value"]

    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _sides = 2


class ConstantPad2d(_ConstantPadNd):
    _sides = 4


class ConstantPad3d(_ConstantPadNd):
    _sides = 6


class _ZeroPad(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPad):
    _sides = 2


class ZeroPad2d(_ZeroPad):
    """Pad the last two dims of (N, C, H, W) or (C, H, W) with zeros."""

    _sides = 4


class ZeroPad3d(_ZeroPad):
    _sides = 6


class ReflectionPad1d(_PadNd):
    _mode, _sides = "reflect", 2


class ReflectionPad2d(_PadNd):
    _mode, _sides = "reflect", 4


class ReflectionPad3d(_PadNd):
    _mode, _sides = "reflect", 6


class ReplicationPad1d(_PadNd):
    _mode, _sides = "replicate", 2


class ReplicationPad2d(_PadNd):
    _mode, _sides = "replicate", 4


class ReplicationPad3d(_PadNd):
    _mode, _sides = "replicate", 6


class CircularPad1d(_PadNd):
    _mode, _sides = "circular", 2


class CircularPad2d(_PadNd):
    _mode, _sides = "circular", 4


class CircularPad3d(_PadNd):
    _mode, _sides = "circular", 6
