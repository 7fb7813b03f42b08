"""Identity, Linear, Bilinear: parameters initialised as torch's reset_parameters."""

from __future__ import annotations

import math

from .. import functional as F
from .. import init
from ..module import Module, Parameter
from ._util import new_empty

__all__ = ["Bilinear", "Identity", "Linear"]


class Identity(Module):
    """Returns its input; takes (and ignores) any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x·Wᵀ + b.

    Args:
        in_features, out_features (int): sizes of each input and output sample.
        bias (bool): learn an additive bias. Default: True.

    Shape: (*, in_features) -> (*, out_features). weight is (out_features, in_features),
    U(-1/√in, 1/√in) (kaiming_uniform_ with a=√5), bias the same bound.
    """

    __constants__ = ["in_features", "out_features"]

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(new_empty(out_features, in_features, dtype=dtype))
        if bias:
            self.bias = Parameter(new_empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class NonDynamicallyQuantizableLinear(Linear):
    """torch's name for MultiheadAttention.out_proj's class (a Linear; the repr says so)."""


class Bilinear(Module):
    """y = x1ᵀ·A·x2 + b, weight (out, in1, in2) and bias U(-1/√in1, 1/√in1)."""

    __constants__ = ["in1_features", "in2_features", "out_features"]

    def __init__(
        self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None
    ):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(new_empty(out_features, in1_features, in2_features, dtype=dtype))
        if bias:
            self.bias = Parameter(new_empty(out_features, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
