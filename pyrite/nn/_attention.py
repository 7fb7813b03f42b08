"""scaled_dot_product_attention: matmul → scale and mask → softmax (ops/rowops.py's fused row
kernel) → dropout → matmul. When an input requires grad the same steps run as recorded ops
(the scale a multiplication, the mask an added constant), so the math form differentiates."""

from __future__ import annotations

import math

from .. import autograd as _autograd
from .. import dtypes as D
from ..errors import ShapeError
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import matmul as _matmul
from ..ops import reduce as _reduce
from ..ops import rowops as _rowops
from ..ops.core import broadcast_shapes, empty, run_map
from ._common import fmap
from ._dropout import dropout


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """softmax(q·kᵀ·scale + mask)·v over (..., L, E) queries and (..., S, E) keys.

    A bool mask marks the pairs that take part (True = attend); a float mask is added to the
    scores; is_causal masks with the lower triangle of an (L, S) matrix (top-left aligned, as
    torch); enable_gqa repeats each key/value head for its group of query heads (dim -3).
    """
    if is_causal and attn_mask is not None:
        raise ValueError(
            "pyrite: scaled_dot_product_attention: explicit attn_mask should not be "
            "set when is_causal=True"
        )
    L, E = query._shape[-2], query._shape[-1]
    S = key._shape[-2]
    if enable_gqa and query.ndim >= 3 and key._shape[-3] != query._shape[-3]:
        hq, hk = query._shape[-3], key._shape[-3]
        if hq % hk or value._shape[-3] != hk:
            raise ShapeError(
                f"pyrite: scaled_dot_product_attention: {hq} query heads are not a "
                f"multiple of {hk} key/value heads"
            )
        key, value = _repeat_heads(key, hq // hk), _repeat_heads(value, hq // hk)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if _autograd.needs_grad(query, key, value):
        return _recorded(query, key, value, attn_mask, dropout_p, is_causal, scale, L, S)
    scores = _matmul.matmul(query, key.transpose(-2, -1))  # (..., L, S)
    if is_causal:
        rows = _creation.arange(L, dtype=D.int32).unsqueeze(1)
        attn_mask = _ew.ge(rows, _creation.arange(S, dtype=D.int32))  # (L, S): j <= i
    if attn_mask is None:
        scores = fmap("x0 * s0", [scores], [scale], scores.dtype)
    elif attn_mask.dtype.is_bool:
        scores = run_map(
            "select(-p_inf(), x0 * s0, x1)",
            [scores, attn_mask],
            ("f32", "bool"),
            empty(broadcast_shapes(scores._shape, attn_mask._shape), scores.dtype),
            "f32",
            (scale,),
            ("f32",),
        )
    else:
        scores = fmap("x0 * s0 + x1", [scores, attn_mask], [scale], scores.dtype)
    attn = _rowops.softmax(scores, -1)
    if attn_mask is not None and not is_causal:
        # torch's _safe_softmax: a query whose every key is masked (-inf) attends to nothing
        # and gives 0, not softmax's NaN
        dead = _reduce.all(_ew.eq(scores, -math.inf), -1, keepdim=True)
        attn = _ew.where(dead, 0.0, attn)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return _matmul.matmul(attn, value)


def _repeat_heads(t, r):
    """repeat_interleave(t, r, -3) as expand + reshape (views and one copy, all recorded)."""
    shape = tuple(t._shape)
    e = t.unsqueeze(-3).expand(*shape[:-2], r, *shape[-2:])
    return e.reshape(*shape[:-3], shape[-3] * r, *shape[-2:])


def _recorded(query, key, value, attn_mask, dropout_p, is_causal, scale, L, S):
    """The math form with every step recorded: softmax(q·kᵀ·scale + M)·v, M the mask as 0 / -inf
    (a constant: a float mask gets no gradient), rows with every key masked attending to
    nothing (their M row set to 0 so softmax stays finite, their weights multiplied by 0)."""
    scores = _matmul.matmul(query, key.transpose(-2, -1)) * scale
    alive = None
    if is_causal:
        rows = _creation.arange(L, dtype=D.int32).unsqueeze(1)
        attn_mask = _ew.ge(rows, _creation.arange(S, dtype=D.int32))
    if attn_mask is not None:
        with _autograd.no_grad():
            if attn_mask.dtype.is_bool:
                madd = run_map(
                    "select(-p_inf(), 0.0, x0)",
                    [attn_mask],
                    ("bool",),
                    empty(attn_mask._shape, scores.dtype),
                    "f32",
                )
            else:
                madd = attn_mask.detach()
            if not is_causal:
                dead = _reduce.all(_ew.eq(madd, -math.inf), -1, keepdim=True)
                madd = _ew.where(dead, 0.0, madd)
                alive = fmap("select(1.0, 0.0, x0 != 0.0)", [dead.to(D.float32)], (), scores.dtype)
        scores = scores + madd
    attn = _rowops.softmax(scores, -1)
    if alive is not None:
        attn = attn * alive
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return _matmul.matmul(attn, value)


__all__ = ["scaled_dot_product_attention"]
