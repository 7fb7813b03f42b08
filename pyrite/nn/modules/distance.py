"""Distance layers over nn/_distance.py: PairwiseDistance and CosineSimilarity (torch.nn.modules'
distance.py; `p` is stored as `norm`, as torch stores it)."""

from __future__ import annotations

from .. import functional as F
from ..module import Module

__all__ = ["CosineSimilarity", "PairwiseDistance"]


class PairwiseDistance(Module):
    """‖x1 - x2 + eps‖_p over the last dim of the broadcast inputs."""

    __constants__ = ["norm", "eps", "keepdim"]

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """x1·x2 / (max(‖x1‖, eps)·max(‖x2‖, eps)) along `dim`, after broadcasting."""

    __constants__ = ["dim", "eps"]

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
