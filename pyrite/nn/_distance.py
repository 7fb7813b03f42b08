"""Distance functions of torch.nn.functional: pairwise_distance, cosine_similarity, pdist.

Both broadcast their two inputs, form the elementwise term in one map kernel and reduce it along
the last dim (pairwise_distance) or `dim` (cosine_similarity) with ops/reduce.py's `norm`/`sum`,
which split long rows to respect the device's loop budget.
"""

from __future__ import annotations

import math

import numpy as np

from .. import autograd as _autograd
from .. import dtypes as D
from ..errors import ArgumentError, DtypeError, ShapeError
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import reduce as _reduce
from ..ops import scatter as _scatter
from ..ops.core import broadcast_shapes, empty, upload
from ._common import fmap, need_tensor


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """‖x1 - x2 + eps‖_p over the last dim of the broadcast inputs (0-d inputs give a 0-d
    result, as torch's)."""
    need_tensor("pairwise_distance", "x1", x1)
    need_tensor("pairwise_distance", "x2", x2)
    if _autograd.needs_grad(x1, x2):  # recorded ops: differentiable as a composite
        diff = (x1 - x2) + eps
    else:
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
    if _autograd.needs_grad(a, b):  # recorded ops: differentiable as a composite
        # torch clamps the norms in place under no_grad: the value is max(‖x‖, eps) but the
        # gradient still flows through ‖x‖ where it was clamped (a recorded clamp_min cut it)
        na = na + (na.clamp_min(eps) - na).detach()
        nb = nb + (nb.clamp_min(eps) - nb).detach()
        prod = (a / na) * (b / nb)
    else:
        prod = fmap("p_divf(x0, max(x1, s0)) * p_divf(x2, max(x3, s0))", [a, na, b, nb], [eps])
    return prod.sum(dim)


def pdist(input, p=2.0):
    """‖x_i - x_j‖_p for every pair of rows i < j of an (N, M) input, in row-major order of
    the pairs: (N·(N - 1)/2,). The pairs' indices are made on the host and the row differences
    (N·(N - 1)/2, M) formed on the device before the norm, so it holds that many floats. Its
    gradient is a rule (_g_pdist) with torch's conventions at zero distances and p = inf ties."""
    need_tensor("pdist", "input", input)
    if input.ndim != 2:
        raise ShapeError(f"pyrite: pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise DtypeError(f"pyrite: pdist only supports floating-point dtypes, not {input.dtype!r}")
    if p < 0:
        raise ArgumentError(f"pyrite: pdist only supports non-negative p values, got {p}")
    n = input._shape[0]
    i, j = np.triu_indices(n, 1)
    if i.size == 0:
        return empty((0,), input.dtype)
    xi = _scatter.index_select(input, 0, upload(i.astype(np.int32), D.int32))
    xj = _scatter.index_select(input, 0, upload(j.astype(np.int32), D.int32))
    return _reduce.norm(fmap("x0 - x1", [xi, xj], dtype=input.dtype), p, 1)


@_autograd.saves(0, "out")
def _g_pdist(ctx, g):
    """torch's _pdist_backward: each pair's term t = d dist / d diff, added to row i and taken
    from row j. t = 0 where the distance is 0 (and, for p < 1, where a component is 0);
    p = 0: none; p = 1: sign(diff); p = inf: sign(diff) where |diff| equals the distance (every
    tied component gets the whole gradient, not a share of it, as torch's)."""
    x = ctx.args[0]
    p = float(ctx.arg(1, "p", 2.0))
    n, m = x._shape
    if n < 2 or p == 0.0:
        return (_creation.zeros((n, m), dtype=x.dtype),)
    i, j = np.triu_indices(n, 1)
    ii = upload(i.astype(np.int32), D.int32)
    jj = upload(j.astype(np.int32), D.int32)
    diff = _scatter.index_select(x, 0, ii) - _scatter.index_select(x, 0, jj)  # (P, M)
    # create_graph: the distance as a function of x (the saved output is an alias without one)
    dist = pdist(x, p) if _autograd.is_grad_enabled() else ctx.out
    gk, dk = g.unsqueeze(1), dist.unsqueeze(1)
    zero = dk == 0.0
    if p == 1.0:
        t = _ew.sign(diff) * gk
    elif math.isinf(p):
        t = _ew.where(diff.abs() == dk, _ew.sign(diff) * gk, 0.0)
    elif p == 2.0:
        t = diff * _ew.where(zero, 0.0, gk / _ew.where(zero, 1.0, dk))
    else:
        ad = diff.abs()
        if p < 1.0:
            scaled = _ew.sign(diff) * _ew.where(
                diff == 0.0, 0.0, _ew.where(diff == 0.0, 1.0, ad) ** (p - 1.0)
            )
        else:
            scaled = diff * ad ** (p - 2.0) if p >= 2.0 else _ew.sign(diff) * ad ** (p - 1.0)
        t = scaled * _ew.where(zero, 0.0, gk / _ew.where(zero, 1.0, dk) ** (p - 1.0))
    out = _scatter.index_add(_creation.zeros((n, m), dtype=t.dtype), 0, ii, t)
    return (_scatter.index_add(out, 0, jj, -t),)


GRADS = {"pdist": _g_pdist}


__all__ = ["cosine_similarity", "pairwise_distance", "pdist"]
