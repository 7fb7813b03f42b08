"""linear_cross_entropy (torch 2.13): cross_entropy of linear(input, linear_weight, linear_bias),
with torch's checks and K-dimensional logits (linear_weight (C, d_1, ..., d_K, in)).

torch's `options` (LinearCrossEntropyOptions) opts into a chunked path that never materializes
the (N, C) logits; pyrite accepts it and computes the reference (the logits are materialized:
the memory saving is not implemented), with a warning that says so.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

from ..tensor import Tensor
from . import _linear, _loss  # (called through the modules: autograd.install rebinds them)


@dataclasses.dataclass
class LinearCrossEntropyOptions:
    """torch.nn.LinearCrossEntropyOptions' fields (the chunked path's configuration). pyrite
    keeps them for code that builds one; linear_cross_entropy computes the reference."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str | None = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None


def linear_cross_entropy(
    input: Tensor,
    linear_weight: Tensor,
    target: Tensor,
    *,
    linear_bias: Tensor | None = None,
    weight: Tensor | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options: LinearCrossEntropyOptions | None = None,
) -> Tensor:
    """cross_entropy(linear(input, linear_weight, linear_bias) as (*batch, C, d_1.., d_K),
    target, ...), torch's reference implementation and errors; `ignore_index` None means -100
    (and may not be given with probability targets)."""
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"pyrite: expected input with dimensionality 1 or 2, got {input.dim()}")
    if linear_weight.dim() < 2:
        raise RuntimeError(
            "pyrite: expected linear_weight with dimensionality at least 2, got "
            f"{linear_weight.dim()}"
        )
    batch, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(
            "pyrite: expected equal input and linear_weight last dimensions (in_features), "
            f"got {in_features} and {linear_weight.shape[-1]}, respectively"
        )
    num_classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (num_classes, *out_features):
        raise RuntimeError(
            f"pyrite: expected linear_bias shape {(num_classes, *out_features)}, got "
            f"{tuple(linear_bias.shape)}"
        )
    if out_features and not batch:
        raise RuntimeError(
            f"pyrite: K-dimensional loss defined by linear_weight shape "
            f"{tuple(linear_weight.shape)} requires batched input, (N, {in_features}), got "
            f"unbatched input with shape {tuple(input.shape)}"
        )
    logits_shape = (*batch, num_classes, *out_features)
    if tuple(target.shape) == logits_shape and ignore_index is not None:
        raise RuntimeError(
            "pyrite: ignore_index cannot be specified when target contains probabilities"
        )
    if options is not None:
        warnings.warn(
            "pyrite: linear_cross_entropy computes the reference path (the logits are "
            "materialized); the chunked path `options` selects is not implemented",
            stacklevel=2,
        )
    if out_features:
        rows = math.prod(out_features, start=num_classes)
        linear_weight = linear_weight.reshape(rows, in_features)
        if linear_bias is not None:
            linear_bias = linear_bias.reshape(rows)
    logits = _linear.linear(input, linear_weight, linear_bias).reshape(logits_shape)
    return _loss.cross_entropy(
        logits,
        target,
        weight=weight,
        reduction=reduction,
        ignore_index=-100 if ignore_index is None else ignore_index,
        label_smoothing=label_smoothing,
    )
