"""Distance functions of torch.nn.functional: pairwise_distance and cosine_similarity.

Both broadcast their two inputs, form the elementwise term in one map kernel and reduce it along
the last dim (pairwise_distance) or `dim` (cosine_similarity) with ops/reduce.py's `norm`/`sum`,
which split long rows to respect the device's loop budget.
"""

from __future__ import annotations

from ..ops import reduce as _reduce
from ..ops.core import broadcast_shapes
from ._common import fmap, need_tensor


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """‖x1 - x2 + eps‖_p over the last dim of the broadcast inputs (0-d inputs give a 0-d
    result, as torch's)."""
    need_tensor("pairwise_distance", "x1", x1)
    need_tensor("pairwise_distance", "x2", x2)
    diff = fmap("x0 - x1 + s0", [x1, x2], [eps])  # (..., D)
    if diff.ndim == 0:
        return _reduce.norm(diff, p, None, keepdim)
    return _reduce.norm(diff, p, -1, keepdim)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Σ (x1/max(‖x1‖, eps))·(x2/max(‖x2‖, eps)) along dim, after broadcasting x1 with x2
    (each vector divided by its clamped norm first, as torch's, so large entries don't
    overflow the product of the norms)."""
    need_tensor("cosine_similarity", "x1", x1)
    need_tensor("cosine_similarity", "x2", x2)
    shape = broadcast_shapes(x1._shape, x2._shape)
    a, b = x1.expand(*shape), x2.expand(*shape)
    if not a.dtype.is_floating_point:
        a = a.float()
    if not b.dtype.is_floating_point:
        b = b.float()
    na = _reduce.norm(a, 2, dim, keepdim=True)
    nb = _reduce.norm(b, 2, dim, keepdim=True)
    prod = fmap("(x0 / max(x1, s0)) * (x2 / max(x3, s0))", [a, na, b, nb], [eps])
    return prod.sum(dim)


__all__ = ["cosine_similarity", "pairwise_distance"]
