"""nn.LinearCrossEntropyLoss (torch 2.13): a Linear to C·prod(out_features) logits and the cross
entropy of them, in one module (F.linear_cross_entropy; its weight stored flat, as torch's)."""

from __future__ import annotations

import math

from .. import functional as F
from .._linear_xent import LinearCrossEntropyOptions
from .linear import Linear
from .loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """cross_entropy(linear(input), target) with the Linear (in_features -> C·prod(out_features),
    bias optional) inside; torch's arguments, checks, state_dict names and repr."""

    __constants__ = ["num_classes", "out_features", "reduction", "ignore_index", "label_smoothing"]

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple = (),
        bias: bool = False,
        device=None,
        dtype=None,
        reduction: str = "mean",
        weight=None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: LinearCrossEntropyOptions | None = None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(
                f"pyrite: expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}"
            )
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(
                f"pyrite: expected label_smoothing to be in range [0, 1], got {label_smoothing}"
            )
        super().__init__(weight, None, None, reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        rows = math.prod(self.out_features, start=num_classes)
        self.linear = Linear(in_features, rows, bias=bias, device=device, dtype=dtype)
        self.options = options

    def forward(self, input, target):
        w = self.linear.weight.reshape(
            (self.num_classes, *self.out_features, self.linear.in_features)
        )
        b = self.linear.bias
        if b is not None:
            b = b.reshape((self.num_classes, *self.out_features))
        return F.linear_cross_entropy(
            input, w, target, linear_bias=b, weight=self.weight, reduction=self.reduction,
            ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
            options=self.options,
        )  # fmt: skip

    def extra_repr(self) -> str:
        return (
            f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
            f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )
