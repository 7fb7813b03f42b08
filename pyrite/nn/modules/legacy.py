"""torch.nn's deprecated layers that older scripts still construct: `NLLLoss2d` (NLLLoss under
its pre-0.4 name), `Container` (a Module holding the modules given as keywords) and
`CrossMapLRN2d` (Lua Torch's cross-channel local response normalization, 4-D only), each
warning as torch's do where torch warns."""

from __future__ import annotations

from ... import dtypes as D
from ...errors import warn
from ...ops import creation as _creation
from ..module import Module
from .loss import NLLLoss

__all__ = ["Container", "CrossMapLRN2d", "NLLLoss2d"]


class NLLLoss2d(NLLLoss):
    """Deprecated alias of NLLLoss (which takes (N, C, H, W) inputs itself)."""

    def __init__(
        self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"
    ):
        warn(
            "`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
            "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for "
            "more details.",
            FutureWarning,
        )
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class Container(Module):
    """Deprecated: a Module whose submodules are the keyword arguments."""

    def __init__(self, **kwargs):
        warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in "
            "`nn.Module`. Subclass that instead.",
            FutureWarning,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


def _cross_map_window(C: int, size: int):
    """(C, C) 0/1 matrix W with scale[c] = Σ_j W[c, j]·x[j]² as torch's CrossMapLRN2d sums it:
    channels max(1, c - p + 1) .. min(c + p - 1, C - 1) with p = (size - 1)//2 + 1, and
    channel 0 always (torch's running window adds the next square and takes off
    x[c - p]² only once c > p, so channel 0's square is never taken off)."""
    import numpy as np

    p = int((size - 1) / 2 + 1)
    w = np.zeros((C, C), np.float32)
    for c in range(C):
        w[c, 0] = 1.0
        w[c, max(1, c - p + 1) : min(c + p - 1, C - 1) + 1] = 1.0
    return w


class CrossMapLRN2d(Module):
    """out = x · (k + alpha/size · Σ_window x²)^(-beta) over a window of `size` channels, for
    (N, C, H, W) inputs (torch.nn.CrossMapLRN2d's forward, its window included; see
    _cross_map_window). The gradient is this forward's own, recorded op by op: torch's
    hand-written backward fails torch.autograd.gradcheck against its forward (and raises for
    size 1), so gradients differ from torch's."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
        N, C, H, W = input.shape
        window = _creation.tensor(_cross_map_window(C, self.size), dtype=D.float32)
        window = window.to(input.dtype)
        sq = (input * input).reshape(N, C, H * W)
        scale = (window @ sq).reshape(N, C, H, W) * (self.alpha / self.size) + self.k
        return input * scale.pow(-self.beta)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
