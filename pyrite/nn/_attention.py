"""scaled_dot_product_attention.

The fused path (kernels/attention.py, flash-style: one dispatch forward, two backward, nothing of
size L×S stored) runs when 0 <= dropout_p < 1, q/k/v are float32 or float16 of one dtype with
E == Ev <= 128, the mask is bool or floating, and the key (query) loop fits the device's loop
budget. Its forward is one of three kernels chosen by shape (`_use_tiled`, `_decode_splits`).
Dropout happens inside the kernels: each pair's keep bit is a hash of (key, query row, key
index) (`_DropKey`), recomputed by the backward instead of stored — not torch's Philox stream, so
the masks differ from torch's (the statistics are the same). Otherwise the composite: matmul →
scale and mask → softmax (ops/rowops.py's fused row kernel) → dropout → matmul; when an input
requires grad the same steps run as recorded ops (the scale a multiplication, the mask an added
constant), so the math form differentiates.

The fused op `_flash` has its own backward rule (GRADS below): the FlashAttention-2 kernels from
the saved log-sum-exp, or, while a double backward is recorded (create_graph=True) or a float mask
needs its gradient, the same math written with recorded ops.
"""

from __future__ import annotations

import math
import sys
from functools import partial

import numpy as np

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..kernels import attention as _K
from ..kernels import attention_decode as _KD
from ..kernels import attention_tiled as _KT
from ..kernels import attention_tiled_bwd as _KB
from ..kernels.common import fold_grid
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import matmul as _matmul
from ..ops import random as _random
from ..ops import reduce as _reduce
from ..ops import rowops as _rowops
from ..ops.core import (
    PlanCache,
    broadcast_shapes,
    broadcast_strides,
    coalesce,
    empty,
    f32_bits,
    max_loop_iterations,
    run_map,
)
from ..tensor import Tensor, contiguous_strides
from ._common import fmap
from ._dropout import dropout
from .attention.bias import CausalBias, CausalVariant


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """softmax(q·kᵀ·scale + mask)·v over (..., L, E) queries and (..., S, E) keys.

    A bool mask marks the pairs that take part (True = attend); a float mask is added to the
    scores; is_causal masks with the lower triangle of an (L, S) matrix (top-left aligned, as
    torch); enable_gqa repeats each key/value head for its group of query heads (dim -3).
    """
    pk = _plan_key(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if pk is not None:
        plan = _PLANS.get(pk)
        if plan is not None and plan[0] != "unkept":
            return _run_kept(plan, query, key, value, attn_mask)
    scale = _check_operands(query, key, value, attn_mask, scale)
    if isinstance(attn_mask, CausalBias):  # torch.nn.attention.bias (torch's CPU dispatch)
        if is_causal:
            raise ValueError(
                "pyrite: scaled_dot_product_attention: CausalBias should not be used with "
                "is_causal=True"
            )
        L_, S_ = query._shape[-2], key._shape[-2]
        if (attn_mask.seq_len_q, attn_mask.seq_len_kv) != (L_, S_):
            raise ShapeError(
                f"pyrite: scaled_dot_product_attention: a CausalBias of "
                f"({attn_mask.seq_len_q}, {attn_mask.seq_len_kv}) for {L_} queries and {S_} keys"
            )
        if L_ == S_ or attn_mask.variant is CausalVariant.UPPER_LEFT:
            attn_mask, is_causal = None, True
        else:
            attn_mask = attn_mask._materialize()
    if is_causal and attn_mask is not None:
        raise ValueError(
            "pyrite: scaled_dot_product_attention: explicit attn_mask should not be "
            "set when is_causal=True"
        )
    _check_dtypes(query, key, value, attn_mask)
    _check_rows(query, key, value)
    _check_heads(query, key, value, enable_gqa)
    _check_mask_shape(query, key, attn_mask, enable_gqa)
    L, E = query._shape[-2], query._shape[-1]
    S = key._shape[-2]
    scale_ = _default_scale(E) if scale is None else scale
    if 0.0 <= dropout_p < 1.0 and _fusable(query, key, value, attn_mask, enable_gqa):
        plan = None if pk is None else _PLANS.get(pk)
        if pk is not None and plan is None:  # (no gradient, no dropout: plan once, keep it)
            plan = _kept_plan(query, key, value, attn_mask, is_causal, scale_, enable_gqa)
            _PLANS.keep(pk, plan, PLANS_MAX)
        if plan is not None and plan[0] != "unkept":
            return _run_kept(plan, query, key, value, attn_mask)
        return _fused_call(query, key, value, attn_mask, is_causal, scale_, enable_gqa, dropout_p)
    if query.dtype in (D.float16, D.bfloat16):
        # the composite in f32, rounded once into the half type, as torch's CPU kernels
        # accumulate: half scores and weights were 1.4 ulp of the result off (torch 0.4)
        f32, m = D.float32, attn_mask
        if isinstance(m, Tensor) and m.dtype.is_floating_point:
            m = m.to(f32)
        out = scaled_dot_product_attention(
            query.to(f32), key.to(f32), value.to(f32), m, dropout_p, is_causal, scale_, enable_gqa
        )
        return out.to(query.dtype)
    if enable_gqa:  # (heads checked by _check_heads; key and value may have different counts)
        hq, hk, hv = query._shape[-3], key._shape[-3], value._shape[-3]
        key = key if hk == hq else _repeat_heads(key, hq // hk)
        value = value if hv == hq else _repeat_heads(value, hq // hv)
    scale = _default_scale(E) if scale is None else scale
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


def _check_operands(query, key, value, attn_mask, scale):
    """torch's argument checks that come before any shape is read: q, k and v tensors of at
    least 2 dims (a 1-D query was an IndexError), a tensor (or CausalBias) mask, a real scale
    (a string reached the info words' packing). Returns the scale as a float (or None)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"pyrite: scaled_dot_product_attention: {name} must be a Tensor, not "
                f"{type(t).__name__}"
            )
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ShapeError(
            "pyrite: scaled_dot_product_attention: expected query, key and value to be at least "
            f"2-D (..., L or S, E), got shapes {tuple(query._shape)}, {tuple(key._shape)} and "
            f"{tuple(value._shape)}"
        )
    if attn_mask is not None and not isinstance(attn_mask, (Tensor, CausalBias)):
        raise TypeError(
            "pyrite: scaled_dot_product_attention: attn_mask must be a Tensor (bool or "
            f"floating) or None, not {type(attn_mask).__name__}"
        )
    if scale is None or type(scale) is float:
        return scale
    if isinstance(scale, (str, bytes)) or not hasattr(scale, "__float__"):
        raise TypeError(
            "pyrite: scaled_dot_product_attention: scale must be a float or None, not "
            f"{type(scale).__name__}"
        )
    return float(scale)


def _default_scale(E):
    """1/√E; with E = 0 every score is an empty sum, 0, at any scale (torch scales q and k by
    √scale before the product, so its infinite default scale gives 0 there, not 0·inf)."""
    return 1.0 / math.sqrt(E) if E > 0 else 1.0


def _check_dtypes(query, key, value, attn_mask):
    """torch's checks: one dtype for q, k and v (else the error came from matmul), and a bool or
    floating mask — an integer one (a tokenizer's 0/1 attention_mask passed as is) was added to
    the scores as a float bias, attending to the padding. DtypeError: a TypeError and, as
    torch's, a RuntimeError."""
    dts = [getattr(t, "dtype", None) for t in (query, key, value)]
    if dts[0] is not dts[1] or dts[0] is not dts[2]:
        raise DtypeError(
            "pyrite: scaled_dot_product_attention: expected query, key and value to have the "
            f"same dtype, got {dts[0]}, {dts[1]} and {dts[2]}"
        )
    m = None if attn_mask is None else attn_mask.dtype
    if m is not None and not (m.is_bool or m is D.float32 or m is dts[0]):
        # (torch's rule, "Expected attn_mask dtype to be bool or float or to match query
        # dtype": a float16 mask with float32 queries is refused, a float32 one with float16
        # queries taken; float64 is float32 here, so pyrite takes a float64 mask torch refuses)
        raise DtypeError(
            "pyrite: scaled_dot_product_attention: expected attn_mask to be bool (True = "
            "attend), or float32 or the query's dtype (added to the scores), got "
            f"{m} with {dts[0]} query"
        )


def _check_rows(query, key, value):
    """The products' shapes, named at this call (they were matmul's errors): the query's and the
    key's head dims agree (q·kᵀ), and the value has a row a key (p·v). (torch's fused CPU kernel
    takes a value with more rows than keys and reads past them; its math path refuses.)"""
    if min(getattr(t, "ndim", 0) for t in (query, key, value)) < 2:
        return
    E, (S, Ek), Sv = query._shape[-1], key._shape[-2:], value._shape[-2]
    if E != Ek:
        raise ShapeError(
            "pyrite: scaled_dot_product_attention: query and key must have the same head dim "
            f"(the last), got query {tuple(query._shape)} and key {tuple(key._shape)}"
        )
    if S != Sv:
        raise ShapeError(
            "pyrite: scaled_dot_product_attention: key and value must have the same number of "
            f"rows (dim -2, one value a key), got key {tuple(key._shape)} and value "
            f"{tuple(value._shape)}"
        )


def _check_heads(query, key, value, enable_gqa):
    """torch's checks of grouped-query heads (dim -3): every operand has one (a 2-D one was an
    IndexError there too), and the key's and the value's counts, which may differ, each divide
    the query's (or all three are equal). No key or value heads for some query heads is refused
    (torch divides by zero there)."""
    if not enable_gqa:
        return
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim < 3:
            raise IndexError(
                "pyrite: scaled_dot_product_attention: enable_gqa=True reads the heads at "
                f"dim -3, but {name} of shape {tuple(t._shape)} has {t.ndim} dims: dimension "
                f"out of range (expected to be in range of [{-t.ndim}, {t.ndim - 1}], but got -3)"
            )
    hq, hk, hv = query._shape[-3], key._shape[-3], value._shape[-3]
    if hq == hk == hv:
        return
    if hk == 0 or hv == 0 or hq % hk or hq % hv:
        raise ShapeError(
            f"pyrite: scaled_dot_product_attention: the number of heads in key ({hk}) and in "
            f"value ({hv}) must each divide the number of heads in query ({hq}) "
            "(enable_gqa=True)"
        )


def _check_mask_shape(query, key, attn_mask, enable_gqa):
    """torch adds the mask to the (..., L, S) scores in place (attn.add_(mask)): a mask whose
    leading dims would broadcast the scores larger (more dims, or a size where the scores have
    1) raises there, rather than widening the output."""
    if attn_mask is None:
        return
    kl = tuple(key._shape[:-2])
    if enable_gqa:  # (the key's heads repeated to the query's)
        kl = kl[:-1] + (query._shape[-3],)
    try:
        lead = tuple(broadcast_shapes(tuple(query._shape[:-2]), kl))
        scores = lead + (query._shape[-2], key._shape[-2])
        full = tuple(broadcast_shapes(scores, tuple(attn_mask._shape)))
    except ShapeError:
        return  # (not broadcastable at all: the product or the mask's map raises that)
    if full != scores:
        raise ShapeError(
            f"pyrite: scaled_dot_product_attention: attn_mask of shape "
            f"{tuple(attn_mask._shape)} would broadcast the scores {scores} to {full} (torch "
            "adds the mask to the scores in place: it may not add or widen their dims)"
        )


def _repeat_heads(t, r):
    """repeat_interleave(t, r, -3) as expand + reshape (views and one copy, all recorded)."""
    shape = tuple(t._shape)
    e = t.unsqueeze(-3).expand(*shape[:-2], r, *shape[-2:])
    return e.reshape(*shape[:-3], shape[-3] * r, *shape[-2:])


def _recorded(query, key, value, attn_mask, dropout_p, is_causal, scale, L, S):
    """The math form with every step recorded: dropout(softmax(q·kᵀ·scale + M))·v (_weights)."""
    attn = _weights(query, key, attn_mask, is_causal, scale, L, S)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p)
    return _matmul.matmul(attn, value)


# ---- the fused path (kernels/attention.py) ---------------------------------------------------
def _fusable(query, key, value, attn_mask, enable_gqa) -> bool:
    """Whether the fused kernels take this call (the composite handles everything else)."""
    if not all(isinstance(t, Tensor) for t in (query, key, value)):
        return False
    dt = query.dtype
    if dt not in (D.float32, D.float16) or key.dtype is not dt or value.dtype is not dt:
        return False
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        return False
    L, E = query._shape[-2:]
    S = key._shape[-2]
    if not (1 <= E <= _K.MAX_HEAD_DIM) or key._shape[-1] != E or value._shape[-1] != E:
        return False
    if L == 0 or S == 0 or value._shape[-2] != S:
        return False
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor) or attn_mask.ndim < 1:
            return False
        m = attn_mask.dtype
        if not (m.is_bool or m in (D.float32, D.float16)):
            return False
    if enable_gqa and query.ndim >= 3 and key._shape[-3] != query._shape[-3]:
        if key.ndim < 3 or value.ndim < 3:
            return False
        hq, hk = query._shape[-3], key._shape[-3]
        if hk == 0 or hq % hk or value._shape[-3] != hk:
            return False  # (key and value head counts apart: the composite repeats each)
    try:
        lead = _lead_shape(query, key, value, attn_mask, enable_gqa)
    except Exception:
        return False  # not broadcastable: the composite raises torch's error
    nbh = math.prod(lead)
    if _K.fwd_loop_iterations(S, E, _K.block_for(L)) > max_loop_iterations():
        # (past the flash kernel's loop budget: fused only where the tiled or the decode
        # kernel takes it; their loops are short)
        dev = backend.current()
        if not (_use_tiled(dev, nbh, L, S, E) or _decode_splits(dev, nbh, L, S, E)):
            return False
    return nbh * -(-max(L, S) // _K.BLOCK) <= 65535**2


def _lead_shape(q, k, v, mask, gqa=False):
    """The broadcast leading shape of the operands (with grouped-query heads: of the views
    _fused_call makes, query heads split as (Hk, r), keys' (Hk, 1))."""
    shapes = [tuple(q._shape[:-2]), tuple(k._shape[:-2]), tuple(v._shape[:-2])]
    if gqa and q.ndim >= 3 and k._shape[-3] != q._shape[-3]:
        hq, hk = q._shape[-3], k._shape[-3]
        shapes = [shapes[0][:-1] + (hk, hq // hk), shapes[1] + (1,), shapes[2] + (1,)]
    if mask is not None:
        full = broadcast_shapes(mask._shape, (q._shape[-2], k._shape[-2]))
        if full[-2:] != (q._shape[-2], k._shape[-2]):
            raise ShapeError("mask")
        ml = tuple(full[:-2])
        if gqa and len(shapes[0]) >= 2 and ml:
            hk, r = shapes[0][-2:]
            ml = ml[:-1] + ((hk, r) if ml[-1] == hk * r else (1, 1))  # (a head dim of 1)
        shapes.append(ml)
    return tuple(broadcast_shapes(*shapes))


def _fused_call(query, key, value, attn_mask, is_causal, scale, enable_gqa, dropout_p=0.0):
    """The fused op on views: grouped-query heads by splitting the query heads (..., Hk, r, L, E)
    against keys (..., Hk, 1, S, E), read with stride 0 over r (no repeated copy)."""
    drop = _DropKey(dropout_p) if dropout_p > 0.0 else None
    hq = query._shape[-3] if query.ndim >= 3 else None
    if enable_gqa and hq is not None and key._shape[-3] != hq:
        hk = key._shape[-3]
        r = hq // hk
        L, E = query._shape[-2:]
        folded = _fold_heads(query, key, value, attn_mask, is_causal, drop)
        if folded is not None:
            q, m = folded  # (..., hk, r, E): the group's r query heads as r query rows
            out = _flash(q, key, value, m, is_causal, scale, drop)[0]
            return out.reshape(*out._shape[:-3], hq, 1, E)
        q = query.reshape(*query._shape[:-3], hk, r, L, E)
        k, v = key.unsqueeze(-3), value.unsqueeze(-3)
        m = attn_mask
        if m is not None and m.ndim >= 3 and m._shape[-3] == hq:
            m = m.reshape(*m._shape[:-3], hk, r, *m._shape[-2:])
        elif m is not None and m.ndim >= 3:
            m = m.unsqueeze(-3)
        out = _flash(q, k, v, m, is_causal, scale, drop)[0]
        return out.reshape(*out._shape[:-4], hq, L, E)
    return _flash(query, key, value, attn_mask, is_causal, scale, drop)[0]


def _fold_heads(query, key, value, mask, is_causal, drop):
    """One query a head over grouped key/value heads (decode with grouped-query attention): the
    query (..., hk·r, 1, E) as (..., hk, r, E), each group's r query heads rows of one
    (batch, key head), and the mask to match, so the decode kernel reads each key and value row
    once for the r heads instead of r times. None for several queries a head or causal ones
    (the rows would be queries of one head), where the decode kernel would not take the rows,
    or with dropout (its keep bits are drawn per (query head, key))."""
    if drop is not None or is_causal or query._shape[-2] != 1:
        return None
    hk = key._shape[-3]
    r = query._shape[-3] // hk
    lead = tuple(query._shape[:-3])
    nbh = math.prod(lead) * hk
    S, E = key._shape[-2], query._shape[-1]
    dev = backend.current()
    if not _decode_lanes(dev, E) or not _decode_splits(dev, nbh, r, S, E):
        return None
    q = query.reshape(*lead, hk, r, E)
    if mask is None or mask.ndim < 3 or mask._shape[-3] == 1:
        return q, mask  # (one row for every head: broadcast over the r rows as it is)
    m = mask.expand(*mask._shape[:-3], hk * r, 1, S)
    return q, m.reshape(*m._shape[:-3], hk, r, S)


def _mask_kind(mask):
    if mask is None:
        return "none"
    return "bool" if mask.dtype.is_bool else "float"


def _info(lead, L, S, scale, nblk, operands):
    """Info words (kernels/attention.py): common words, coalesced leading sizes, then per
    strided operand (tensor, row dim, col dim) its offset, row and col strides, lead strides."""
    full = [
        broadcast_strides(t, tuple(lead) + tuple(t._shape[-2:]))[: len(lead)] for t, *_ in operands
    ]
    cshape, cstr = coalesce(tuple(lead), [tuple(f) for f in full])
    words = [math.prod(lead), L, S, f32_bits(scale), nblk, *cshape]
    for (t, rd, cd), ls in zip(operands, cstr):
        rs = 0 if t._shape[rd] == 1 else t._strides[rd]
        cs = 0 if t._shape[cd] == 1 else t._strides[cd]
        words += [t._offset, rs, cs, *ls]
    return len(cshape), words


def _mask_operand(mask, L, S):
    """The mask as a strided operand of shape (..., L, S) (a 1-D mask is (S,): rows broadcast)."""
    if mask.ndim == 1:
        mask = mask.unsqueeze(0)
    return mask


def _heads_inside(t, lead) -> int:
    """The head count when `t` (lead..., n, E) is a transposed view of (..., n, heads, E) (its
    head dim strides less than its row dim), else 0: outputs and gradients are then written in
    that layout too (kernels/attention._row_base)."""
    if len(lead) < 2 or t.ndim < 3 or lead[-1] < 2 or t._shape[-3] != lead[-1]:
        return 0
    return lead[-1] if t._strides[-3] < t._strides[-2] else 0


def _empty_rows(lead, n, E, dtype, heads):
    """A new (lead..., n, E) tensor, laid out (lead[:-1]..., n, heads, E) when heads > 0."""
    shape = tuple(lead) + (n, E)
    if not heads:
        return empty(shape, dtype)
    phys = empty(tuple(lead[:-1]) + (n, heads, E), dtype)
    st = phys._strides
    return phys._view(shape, (*st[:-3], st[-2], st[-3], st[-1]), 0)


class _DropKey:
    """The dropout of one fused attention call (kernels/attention.py drop_setup): p, and a key
    drawn from the default generator's seed and offset (each draw advances the offset, as a
    random kernel does). The forward and its backward read the same object, so they draw the
    same keep bit for every pair; under pr.compile the forward's replay draws a new key before
    the backward's replay reads it (their info words are dynamic, in dispatch order)."""

    def __init__(self, p):
        self.p = float(p)
        self.draw()

    def draw(self):
        gen = _random.default_generator
        off, seed = gen.take(4), gen._seed
        m = 0xFFFFFFFF
        self.key = _pcg4d(seed & m, (seed >> 32) & m, off & m, (off >> 32) & m)[:2]

    def words(self):
        thr = min(round(self.p * 2.0**32), 2**32 - 1)
        i32 = _random._i32
        return [i32(self.key[0]), i32(self.key[1]), i32(thr), f32_bits(1.0 / (1.0 - self.p))]


def _pcg4d(x, y, z, w):
    """kernels/common.py's p_pcg4d on the host (32-bit wrapping arithmetic)."""
    m = 0xFFFFFFFF
    v = [(a * 1664525 + 1013904223) & m for a in (x, y, z, w)]

    def mix(v):
        v[0] = (v[0] + v[1] * v[3]) & m
        v[1] = (v[1] + v[2] * v[0]) & m
        v[2] = (v[2] + v[0] * v[1]) & m
        v[3] = (v[3] + v[1] * v[2]) & m

    mix(v)
    v = [a ^ (a >> 16) for a in v]
    mix(v)
    return v


def _dispatch(dev, src, bufs, info, grid, drop, redraw=False):
    """One dispatch whose info words end with `drop`'s (when there is one). While pr.compile
    records, those words are dynamic: a replay's forward (`redraw`) draws a new key first."""
    if drop is None:
        return dev.dispatch(src, bufs, info, grid)
    base = list(info)
    if dev._tape is not None and getattr(dev._tape, "recording", False):

        def words():
            if redraw:
                drop.draw()
            return base + drop.words()

        dev._tape.dynamic_next(words)
    dev.dispatch(src, bufs, base + drop.words(), grid)


def _flash(query, key, value, attn_mask, is_causal, scale, drop=None):
    """(out, lse): the fused forward (one dispatch, or the split's two). out (lead..., L, E) in
    q's dtype, lse (lead..., L, 2) float32 the log-sum-exp of each query's scaled, masked scores
    as its two parts, the maximum and log of the sum (+inf and 0 for a query with every key
    masked: kernels/attention.lse_store), kept for the backward."""
    plan = _flash_plan(query, key, value, attn_mask, is_causal, scale, drop is not None)
    return _flash_run(plan, query, key, value, attn_mask, drop)


def _flash_plan(query, key, value, attn_mask, is_causal, scale, dropout):
    """What _flash_run dispatches for these operands (their shapes, strides, offsets and dtypes,
    the device and the module's constants decide it; nothing in it names a tensor): (lead,
    heads, out dtype, the forward's kernel, info words and grid, the partials' length (0: no
    split), the merge's info words and grid)."""
    L, E = query._shape[-2:]
    S = key._shape[-2]
    lead = _lead_shape(query, key, value, attn_mask)
    mask = None if attn_mask is None else _mask_operand(attn_mask, L, S)
    kind = _mask_kind(mask)
    block = _K.block_for(L)
    nblk = -(-L // block)
    ops = [(query, -2, -1), (key, -2, -1), (value, -2, -1)]
    if mask is not None:
        ops.append((mask, -2, -1))
    heads = _heads_inside(query, lead)
    nbh = math.prod(lead)
    dev = backend.current()
    dsplits = _decode_splits(dev, nbh, L, S, E)
    tiled = not dsplits and _use_tiled(dev, nbh, L, S, E, bool(is_causal))
    if tiled:
        bq, rpt = _tiled_shape(dev, nbh, L, S, E, bool(is_causal))
        nblk = -(-L // bq)
        splits = _key_splits(dev, nbh * nblk, S, E, _KT.TILED_BK)
    else:
        splits = 1 if dsplits else _key_splits(dev, nbh * nblk, S, E)
    lanes = _decode_lanes(dev, E) if dsplits else 0
    if dsplits:  # (the decode kernels' blocks: one query, or DECODE_ROWS with lanes)
        nblk = -(-L // _decode_rows(L)) if lanes else L
    rank, info = _info(lead, L, S, scale, nblk * (dsplits or splits), ops)
    out_dt = query.dtype
    args = (
        E,
        block,
        rank,
        bool(is_causal),
        kind,
        query.dtype.wgsl,
        key.dtype.wgsl,
        value.dtype.wgsl,
        mask.dtype.wgsl if mask is not None else None,
        out_dt.wgsl,
        heads,
    )
    fused = False
    if lanes:  # (few queries over many keys, one pass: a workgroup a block of queries and range)
        rows = _decode_rows(L)
        fused = _fused_merge(dev, nbh, L, S, E, dsplits, lanes, rows)
        kernel = partial(_KD.attn_decode_lanes_kernel, E, *args[2:], dropout=dropout,
                         lanes=lanes, rows=rows, sg=dev.subgroups, fused=fused,
                         spins=_KD.MERGE_SPINS, step=_KD.DECODE_STEP)  # fmt: skip
        groups, splits = nbh * -(-L // rows), dsplits
    elif dsplits:  # (the same where the device has no subgroups: a workgroup a query and range)
        kernel = partial(_KD.attn_decode_kernel, E, *args[2:], dropout=dropout)
        groups, splits = nbh * L, dsplits
    elif tiled:  # (a block of 64 queries, both products as register tiles)
        kernel = partial(
            _KT.attn_fwd_tiled_kernel, E, *args[2:], prefetch=_KT.PREFETCH, dropout=dropout,
            heavy_first=_K.HEAVY_FIRST, bq=bq, rpt=rpt, sg=_row_subgroups(dev),
            **_tiled_variant(dev, E),
        )  # fmt: skip
        groups = nbh * nblk
    else:
        kernel = partial(_K.attn_fwd_kernel, *args, dropout=dropout, heavy_first=_K.HEAVY_FIRST)
        groups = nbh * nblk
    if splits == 1 or fused:  # (one dispatch: no partials, no merge kernel)
        extra = (_merge_scratch(dev).buffer,) if fused else ()
        src = kernel(splits=splits) if fused else kernel()
        return (
            lead,
            heads,
            out_dt,
            src,
            info,
            fold_grid(groups * splits),
            0,
            None,
            None,
            None,
            extra,
        )
    merge = _K.attn_merge_kernel(E, splits, out_dt.wgsl, heads)
    merge_grid = fold_grid(-(-nbh * L * E // _K.MERGE_WG))
    return (lead, heads, out_dt, kernel(splits=splits), info, fold_grid(groups * splits),
            nbh * L * splits * (E + 2), merge, [nbh * L, L], merge_grid, ())  # fmt: skip


def _flash_run(plan, query, key, value, attn_mask, drop=None, want_lse=True):
    """(out, lse) of a _flash_plan's dispatches on these operands. Without `want_lse` (a call
    no backward follows) lse is None and the kernels write it to the device's sink (_lse_sink)
    instead of a new buffer."""
    lead, heads, out_dt, src, info, grid, npart, merge, merge_info, merge_grid, extra = plan
    L, E = query._shape[-2:]
    out = _empty_rows(lead, L, E, out_dt, heads)
    dev = backend.current()
    if want_lse:
        lse = empty(tuple(lead) + (L, _K.LSE_WORDS), D.float32)  # (kernels/attention.lse_store)
        lse_buf = lse._storage.buffer
    else:
        lse, lse_buf = None, _lse_sink(dev, info[0] * L * _K.LSE_WORDS)
    bufs = [query._storage.buffer, key._storage.buffer, value._storage.buffer]
    if attn_mask is not None:
        bufs.append(attn_mask._storage.buffer)
    if not npart:
        _dispatch(dev, src, [*bufs, out._storage.buffer, lse_buf, *extra], info, grid, drop,
                  redraw=True)  # fmt: skip
        return out, lse
    part = empty((npart,), D.float32)
    _dispatch(dev, src, bufs + [part._storage.buffer], info, grid, drop, redraw=True)
    dev.dispatch(merge, [part._storage.buffer, out._storage.buffer, lse_buf], merge_info,
                 merge_grid)  # fmt: skip
    return out, lse


def _lse_sink(dev, n):
    """A device buffer of at least n f32s that kernels write a log-sum-exp nobody reads to (an
    allocation and a release less a call): one a power of two of sizes, kept by the device.
    Successive dispatches writing it are ordered like any two writers of one buffer."""
    size = 1 << max(n - 1, 0).bit_length()
    return dev.persistent(("attn.lse_sink", size), lambda: bytes(4 * size)).buffer


# Calls that need no gradient (inference: a model's eval forward, a decode step) skip the
# checks and the kernel choice once their operands' layout has been seen: the plan of each
# (shapes, strides, offsets, dtypes, mask, is_causal, scale, enable_gqa) is kept (_kept_plan:
# with one query a head over grouped heads, the folded views too), with the constants above
# and in the kernel modules that choose it (tests and A/B runs change them), the device and its
# loop budget. A decode against a growing cache sees a new S each step: PLANS_MAX bounds them.
PLANS_MAX = 256
_PLANS = PlanCache(lambda: [(m, ()) for m in (sys.modules[__name__], _K, _KT, _KD)])


def _plan_key(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """The plan cache's key for this call, or None where the cache does not serve it (a
    gradient, dropout, pr.compile recording, a CausalBias, non-tensors)."""
    if dropout_p != 0.0 or type(query) is not Tensor or type(key) is not Tensor:
        return None
    if type(value) is not Tensor or not (attn_mask is None or type(attn_mask) is Tensor):
        return None
    if not (scale is None or type(scale) is float or type(scale) is int):
        return None
    if _autograd.needs_grad(query, key, value, attn_mask):
        return None
    dev = backend.current()
    if dev._tape is not None:
        return None
    knobs = _PLANS.constants(dev)
    m = None if attn_mask is None else (
        attn_mask._shape, attn_mask._strides, attn_mask._offset, attn_mask.dtype)  # fmt: skip
    return (
        query._shape, query._strides, query._offset, query.dtype,
        key._shape, key._strides, key._offset, key.dtype,
        value._shape, value._strides, value._offset, value.dtype,
        m, bool(is_causal), scale, bool(enable_gqa), max_loop_iterations(), knobs,
    )  # fmt: skip


def _kept_plan(query, key, value, attn_mask, is_causal, scale, enable_gqa):
    """What the plan cache keeps for a fused call: ("flash", _flash_plan), or, for one query a
    head over grouped key/value heads (_fold_heads), ("fold", the folded query's and mask's views,
    _flash_plan of them, the output's shape); ("unkept",) where grouped heads take another way
    (such calls run through _fused_call every time)."""
    hq = query._shape[-3] if query.ndim >= 3 else None
    if not (enable_gqa and hq is not None and key._shape[-3] != hq):
        return "flash", _flash_plan(query, key, value, attn_mask, is_causal, scale, False)
    folded = _fold_heads(query, key, value, attn_mask, is_causal, None)
    if folded is None:
        return ("unkept",)
    q, m = folded
    if m is not None and m._storage is not attn_mask._storage:
        return ("unkept",)  # (the mask was copied to fold: no view of the caller's to keep)
    views = [None if t is None else (t._shape, t._strides, t._offset) for t in (q, m)]
    return "fold", *views, _flash_plan(q, key, value, m, is_causal, scale, False), query._shape


def _run_kept(plan, query, key, value, attn_mask):
    """The output of a kept plan (_kept_plan) on these operands."""
    if plan[0] == "flash":
        return _flash_run(plan[1], query, key, value, attn_mask, want_lse=False)[0]
    _, qv, mv, fp, shape = plan
    m = None if mv is None else attn_mask._view(*mv)
    out = _flash_run(fp, query._view(*qv), key, value, m, want_lse=False)[0]
    if fp[1]:  # (written in a (B, L, H, E) layout: reshape decides whether it views)
        return out.reshape(shape)
    return out._view(shape, contiguous_strides(shape), out._offset)  # (contiguous: a view)


# The forward cuts the keys into ranges (kernels/attention.attn_fwd_kernel `splits`, merged by
# attn_merge_kernel) on GPUs when its (batch·head, query block) workgroups number fewer than
# SPLIT_FILL: the least power of two reaching it, at most SPLIT_MAX, every range at least one
# staged tile of keys. A batch-1 BERT-base layer (12 heads x 2 query blocks of 64: 24 workgroups,
# one invocation a query walking all 128 keys) took 55 us a forward on the H200 (2026-12-01,
# scripts/compile_profile.py bert).
SPLIT_FILL = 96
SPLIT_MAX = 8
FORCE_SPLITS = None  # an int forces that many ranges where the keys allow (tests)


def _key_splits(dev, workgroups, S, E, tile=None):
    """Key ranges of the forward: `tile` the keys a kernel stages at a time (a range holds
    whole tiles; the flash kernel's tile_rows by default)."""
    tile = tile or _K.tile_rows(_K.padded_dim(E))
    most = max(1, min(SPLIT_MAX, S // tile))
    if FORCE_SPLITS is not None:
        return max(1, min(FORCE_SPLITS, most))
    if dev.adapter_type == "CPU":
        return 1
    p = 1
    while workgroups * p < SPLIT_FILL and p * 2 <= most:
        p *= 2
    return p


# The register-tiled forward (kernels/attention_tiled.py) takes head dims up to 64 on GPUs where
# its 32 KiB of workgroup memory and 128 invocations fit, whatever the queries (past 64: below). H100,
# wgpu-native (2026-12-05, second run, scripts/attention_ab.py, GPU time, flash / tiled with
# PREFETCH / without, us; docs/bench/2026-12-05-h100-wgpu-session.txt): BERT-base batch 32
# (768 query blocks) 205 / 180 / 175 (torch CUDA 147); batch 1 45 / 33 / 32; 512 tokens (2, 12)
# 185 / 152 / 154; causal 16 x 4096 x 64 3,265 / 2,624 / 2,719 (torch 1,349); E = 32 at 512
# tokens 228 / 159 / 165; (8, 12, L, 512, 64) at L = 8 / 16 / 32 ~80 against 385 / 261 / 204.
# (The first run of that kernel, before its last changes, had lost to flash at the big shapes:
# 242 against 205 at BERT-base, 3,651 against 3,275 at causal 4096, so it was kept for few
# query blocks only.)
# Head dims 65 .. 128 (Llama's 128) take it too where 48 KiB fit, in blocks of 32 queries, 2 rows
# an invocation (tiled_rpt) (H100, 2026-12-05, docs/bench/2026-12-05-h100-attn-fwd-e128-rpt.json,
# us, flash / tiled with 4 rows an invocation (64 a workgroup) / 2 rows (128) / torch CUDA):
# causal 1 x 32 x 512 x 128 520 / 316 / 245 / 123; 8 x 16 x 128 x 128 with a padding mask
# 184 / 180 / 142 / 97; 4 queries (4, 32, 4, 2048, 128) 5,560 / 569 / 396 / 219.
# Over few keys (S <= TILED_RPT2_MAX_S) 2 rows an invocation at every head dim: the workgroup's
# key loop is short, so twice the invocations hide more of it (H100, wgpu-native, 2026-12-05,
# docs/bench/2026-12-05-h100-s28-attn-fwd.json, us, 4 rows / 2 rows): BERT-base 32 x 12 x 128 x 64
# 156.8 / 143.5, batch 1 31.4 / 29.9, batch 8 45.4 / 44.7, the GPT bench (S = 64, E = 32) 20.9 /
# 19.7; but at S = 512: 2 x 12 x 512 x 64 136.2 / 140.8, E = 32 107.8 / 129.7, L = 16 71.0 / 73.4.
TILED_RPT2_MAX_S = 128
# Blocks of 128 queries (256 invocations of 4 rows, 48 KiB of workgroup memory) at head dims
# 33 .. 64, for L >= TILED_WIDE_MIN_L queries in at least TILED_WIDE_MIN_BLOCKS such blocks: a
# key and value tile staged once serves twice the queries. H100, wgpu-native, 2026-12-07 (scripts/
# attention_ab.py, GPU time, us, blocks of 64 by the rule / of 128 / torch CUDA; docs/bench/
# 2026-12-07-h100-s43-attn-l4.json): BERT-base 32 x 12 x 128 x 64 with a padding mask 128.7 /
# 109.7 / 121.4; 2 x 12 x 512 114.7 / 87.7 / 98.8; causal 16 x 4096 1,657 / 1,290 /
# 1,367; BERT-base's heads over 512 keys 374 / 281 / 250; 512 queries over 128 436 / 335 / 263.
# Lost: batch 1 (12 blocks) 21.6 / 26.1, L = 64 65.2 / 85.0 (half of each block idle), E = 32 at
# 512 tokens 85.2 / 90.8. Around the threshold (a second run, docs/bench/2026-12-07-h100-s43-
# attn-wide.json): BERT-base at batch 4 / 8 / 16 (48 / 96 / 192 blocks) 23.5 / 40.5 / 58.0 in
# blocks of 64, 35.2 / 32.7 / 56.9 in blocks of 128; (1, 12, 512 / 1024 tokens) (48 / 96 blocks)
# 61.3 / 211.7 against 63.6 / 163.8. Causal calls want more blocks (a third run, docs/bench/
# 2026-12-07-h100-s43-attn-wide2.json, blocks of 64 / of 128 / torch): (1, 16, 1024) (128 blocks
# of 128) 122.3 / 166.8 / 158.7; (1, 16, 2048) (256) 434.4 / 352.5 / 434.9; (2, 16, 1024) (256)
# 244.3 / 197.3 / 228.7; (8, 12, 512) (384) 219.5 / 188.5 / 173.9; (4, 16, 1024) (512) 483.5 /
# 386.8 / 376.9; (1, 16, 4096) (512) 1,638.5 / 1,279.9 / 1,323.8. (A guess at why: a causal
# call's blocks differ in work, the last of a head's the most, and with few blocks that one
# decides the call's time, twice as long in a block of 128.) Between 128 and 256 causal blocks
# is not measured.
TILED_WIDE_BQ = 128
TILED_WIDE_MIN_L = 128
TILED_WIDE_MIN_BLOCKS = 96
TILED_WIDE_MIN_BLOCKS_CAUSAL = 256
FORCE_TILED = None  # True / False: take (where it can run) / never take it (tests, benchmarks)
FORCE_TILED_BQ = None  # queries a workgroup of the tiled forward (tests: 16 or 32 at E <= 64)
FORCE_TILED_RPT = None  # query rows an invocation of it (tests, A/B: 2 or 4)


# The tiled forward's rows merge their 8 lanes' maxima and sums by subgroupShuffleXor where the
# device's subgroups hold 8 or more consecutive invocations (backend/quirks.subgroup_size), two
# barriers a key tile fewer than through workgroup memory. SUBGROUP_ROWS False: never (A/B).
SUBGROUP_ROWS = True


def _row_subgroups(dev) -> int:
    """The `sg` argument of the tiled forward on this device: its `subgroups`, or 0."""
    if not SUBGROUP_ROWS or dev.subgroup_size < 8:
        return 0
    return dev.subgroups


def _tiled_variant(dev, E) -> dict:
    """The tiled forward's `pshfl` and `dbuf` arguments on this device at head dim E (the
    kernels' P_SHUFFLE and DOUBLE_BUFFER where they apply)."""
    pshfl = _KT.P_SHUFFLE and bool(_row_subgroups(dev))
    dbuf = _KT.DOUBLE_BUFFER and pshfl and _KT.PREFETCH and _KT.tiled_ep(E) <= 64
    return {"pshfl": pshfl, "dbuf": dbuf}


def _tiled_shape(dev, nbh, L, S, E, causal=False):
    """(queries a workgroup, query rows an invocation) of the tiled forward on `dev` for nbh
    batch·heads of L queries over S keys at head dim E (`causal`: is_causal)."""
    if FORCE_TILED_BQ is None and _tiled_wide(dev, nbh, L, E, causal):
        return TILED_WIDE_BQ, FORCE_TILED_RPT or 4
    rpt = FORCE_TILED_RPT or (2 if S <= TILED_RPT2_MAX_S else _KT.tiled_rpt(E))
    return FORCE_TILED_BQ or _KT.tiled_bq(E), rpt


def _tiled_wide(dev, nbh, L, E, causal) -> bool:
    """Whether the tiled forward takes blocks of TILED_WIDE_BQ queries here (see there)."""
    if dev.adapter_type == "CPU" or not 32 < E <= 64 or L < TILED_WIDE_MIN_L:
        return False
    least = TILED_WIDE_MIN_BLOCKS_CAUSAL if causal else TILED_WIDE_MIN_BLOCKS
    if nbh * -(-L // TILED_WIDE_BQ) < least:
        return False
    return _tiled_fits(dev, E, TILED_WIDE_BQ, 4)


def _tiled_fits(dev, E, bq, rpt) -> bool:
    """Whether the device's workgroups hold the tiled forward's invocations and workgroup
    memory in blocks of `bq` queries, `rpt` rows an invocation."""
    lim = dev.limits
    return lim.get("max-compute-workgroup-storage-size", 16384) >= _KT.tiled_shared_bytes(
        E, bq, rpt, **_tiled_variant(dev, E)
    ) and lim.get("max-compute-invocations-per-workgroup", 256) >= _KT.tiled_wg(bq, rpt)


def _use_tiled(dev, nbh, L, S, E, causal=False):
    if FORCE_TILED is False or E > _KT.TILED_EP:
        return False
    if FORCE_TILED is None and dev.adapter_type == "CPU":
        return False
    bq, rpt = _tiled_shape(dev, nbh, L, S, E, causal)
    if _KT.tiled_wg(bq, rpt) > _KT.tiled_ep(E) * _KT.TILED_BK // 4:
        return False  # (more invocations than vec4s of a key tile: forced shapes only)
    return (
        _tiled_fits(dev, E, bq, rpt)
        and _KT.tiled_loop_iterations(S, E, bq, rpt) <= max_loop_iterations()
    )


# Few queries over many keys (decode against a KV cache) take attn_decode_kernel on GPUs: a
# workgroup of 256 invocations a (batch·head, query, key range) instead of one invocation a query
# walking every key. Ranges: the least power of two keeping a range's scores in workgroup memory
# (DECODE_MAX_SPAN keys), doubled while the workgroups number fewer than DECODE_FILL or a group of
# lanes walks more than DECODE_MAX_STEPS values of its range in turn, as long as every range keeps
# keys; at most DECODE_MAX_SPLITS (the merge kernel is unrolled over them). H100, wgpu-native
# (2026-12-05, scripts/attention_ab.py, GPU time): one query a head, 16 heads x 4096 keys x 64:
# 71 us against the flash kernel's 481 (torch CUDA 455); (8, 12, 4, 512, 64): 68 us against
# the tiled kernel's 101 and flash's 382 — but at 8 queries the tiled one wins (101 against 130).
# On CPU adapters for one query only: lavapipe (2 cores, 2026-12-05, scripts/attention_ab.py) ran
# one query a head 2.2-2.7x faster than the flash kernel (S = 256..8,192, E = 64 and 128, with and
# without a mask: (1, 8, 1, 8192, 64) 30.7 against 84.2 ms), two queries even (20.3 / 22.2 ms),
# four slower (29.4 against 16.5 ms).
# The ranges, by GPU time on a lent H100 (2026-12-05, scripts/decode_sweep.py, wgpu-native, the
# decode kernel and its merge; docs/bench/2026-12-05-h100-decode.json), us by number of ranges:
#   (1, 16, 1, 4096, 64)     2: 99.4  4: 58.6  8: 45.3  16: 71.0   (torch CUDA 452)
#   (1, 32, 1, 4096, 128)    2: 208   4: 134   8: 162   16: 256    (torch 409)
#   (8, 8, 1, 16384, 64)     8: 390   16: 441  32: 550             (torch 1,804)
#   (4, 32, 4, 2048, 128)    1: 715   2: 743   4: 759   8: 810     (torch 216)
# So about one workgroup an SM (132): DECODE_FILL 128 (it was 264, two an SM, and 16 ranges at
# the first two shapes), and a group of lanes may walk 256 values (64 split the last shape 4 ways).
DECODE_MAX_L = 4
# Past E = 64 the tiled forward (blocks of 32 queries, 2 rows an invocation) beat the decode
# kernel from 4 queries on (H100, 2026-12-05, docs/bench/2026-12-05-h100-attn-fwd-e128-rpt.json,
# us, decode / tiled: (4, 32, 4, 2048, 128) 716 / 396; one query (1, 32, 1, 4096, 128) 134 /
# 235): one query only there (the decode kernel's time grows with the queries, the tiled one's
# not, so 2 queries are an estimate: ~270 / ~235).
DECODE_MAX_L_WIDE = 1
DECODE_CPU_MAX_L = 1
DECODE_MIN_S = 256
DECODE_FILL = 128
DECODE_MAX_STEPS = 256
DECODE_MAX_SPLITS = 16
FORCE_DECODE = None  # True / False: take (where it can run) / never take it (tests, benchmarks)
# The one-pass decode kernel (kernels/attention_decode.attn_decode_lanes_kernel, GPUs with
# subgroups) reads each key once for a block of up to DECODE_ROWS queries (a grouped-query
# head's query heads folded into rows: _fold_heads), so it takes up to DECODE_LANES_MAX_L
# queries, and its ranges fill DECODE_LANES_FILL (query row, range) pairs, a range keeping
# DECODE_LANES_MIN_SPAN keys. H100, wgpu-native, GPU time, us, the key ranges merged in the
# kernel (2026-12-06, scripts/decode_ab.py, docs/bench/2026-12-06-h100-s33-decode-fused-wgpu.json;
# the first rows' counts measured with the merge kernel before, -decode-ab-wgpu.json, agree),
# one-pass by ranges / two-pass at its rule / the kernel without decode / torch CUDA:
#   (1, 16, 1, 4096, 64)        8: 19.7  16: 16.2            / 33.6 / 72.1  / 499
#   (1, 32, 1, 4096, 128)       8: 65.7  16: 55.7            / 110  / 174   / 416
#   (8, 8, 1, 16384, 64)        8: 185   16: 190             / 364  / 883   / 1,796
#   Hq 32 over Hk 8, 1 x 4096 x 128   8: 32.3  16: 24.1      / 99.8 / 169   / 261
#   Hq 64 over Hk 8, 1 x 8192 x 128   8: 88.6  16: 63.7      / 357  / 591   / 799
#   (4, 32, 4, 2048, 128)       1: 146   2: 106   4: 113     / -    / 311   / 215
#   (8, 12, 8, 512, 64)         1: 26.8  2: 35.0             / -    / 60.3  / 72.1
#   (2, 16, 2, 1024, 64)        2: 19.9  4: 14.8  8: 12.9    / 32.6 / 42.0  / 130
# (Dawn: the same order, 0.95-1.4x these.) 768 pairs takes the best count or one within 15 %
# at every row (1,024 took 2 ranges at the 8-query row: its 8 queries a key make it
# compute-bound); a range of fewer than 256 keys was measured only at the last row.
DECODE_ROWS = 8
DECODE_FUSED_MERGE = None  # None: GPUs; True: any device (tests); False: never (A/B)
DECODE_LANES_MAX_L = 8
DECODE_LANES_FILL = 768
DECODE_LANES_MIN_SPAN = 256
DECODE_LANES_MAX_SPLITS = 64


def _decode_splits(dev, nbh, L, S, E):
    """Key ranges of the decode kernel for this call, or 0: another kernel runs."""
    if FORCE_DECODE is False:
        return 0
    lanes = _decode_lanes(dev, E)
    if dev.adapter_type == "CPU":
        max_l = DECODE_CPU_MAX_L
    elif lanes:
        max_l = DECODE_LANES_MAX_L
    else:
        max_l = DECODE_MAX_L
        if E > 64 and _use_tiled(dev, nbh, L, S, E):
            max_l = min(max_l, DECODE_MAX_L_WIDE)
    if FORCE_DECODE is None and (L > max_l or S < DECODE_MIN_S):
        return 0
    if dev.limits.get("max-compute-invocations-per-workgroup", 256) < _KD.DECODE_WG:
        return 0
    if lanes:
        return _lanes_splits(nbh, L, S, E, lanes)
    p = 1
    while _KD.decode_span(S, p) > _KD.DECODE_MAX_SPAN:
        p *= 2
    if p > DECODE_MAX_SPLITS:
        return 0
    groups = _KD.decode_groups(E)
    while (
        (nbh * L * p < DECODE_FILL or _KD.decode_span(S, p) > DECODE_MAX_STEPS * groups)
        and 2 * p <= DECODE_MAX_SPLITS
        and _KD.decode_span(S, 2 * p) * (2 * p - 1) < S  # (every range holds keys)
    ):
        p *= 2
    return p if _KD.decode_loop_iterations(S, p, E) <= max_loop_iterations() else 0


def _lanes_splits(nbh, L, S, E, lanes):
    """Key ranges of the one-pass decode kernel (kernels/attention_decode
    .attn_decode_lanes_kernel): doubled from 1 while its (query row, range) pairs number fewer
    than DECODE_LANES_FILL or an invocation's walk passes the loop budget, as long as a range
    keeps DECODE_LANES_MIN_SPAN keys and the merge's unrolled DECODE_LANES_MAX_SPLITS allow; 0
    where none fits."""
    rows = _decode_rows(L)
    blocks = nbh * -(-L // rows)
    budget = max_loop_iterations()

    def fits(p):
        return _KD.decode_lanes_loop_iterations(S, p, E, lanes, rows) <= budget

    p = 1
    while (
        (blocks * rows * p < DECODE_LANES_FILL or not fits(p))
        and 2 * p <= DECODE_LANES_MAX_SPLITS
        and _KD.lanes_span(S, 2 * p, lanes) >= DECODE_LANES_MIN_SPAN
        and _KD.lanes_span(S, 2 * p, lanes) * (2 * p - 1) < S  # (every range holds keys)
    ):
        p *= 2
    return p if fits(p) else 0


def _fused_merge(dev, nbh, L, S, E, splits, lanes, rows) -> bool:
    """Whether the one-pass kernel merges its key ranges itself (kernels/attention_decode
    MERGE_SLOTS): DECODE_FUSED_MERGE None on GPUs (True: on any device, tests), where the
    partials and the blocks' counters fit the scratch, the walk and the merge's waits the loop
    budget, and no pr.compile trace records (the scratch is the device's, not a trace's)."""
    if splits < 2 or DECODE_FUSED_MERGE is False or dev._tape is not None:
        return False
    if DECODE_FUSED_MERGE is None and dev.adapter_type == "CPU":
        return False
    if nbh * L * splits * (E + 2) > _KD.MERGE_SLOTS or nbh * -(-L // rows) > _KD.MERGE_COUNTERS:
        return False
    walk = _KD.decode_lanes_loop_iterations(S, splits, E, lanes, rows)
    waits = _KD.fused_merge_loop_iterations(splits, rows, E, _KD.MERGE_SPINS)
    return walk + waits <= max_loop_iterations()


def _merge_scratch(dev):
    """The device's persistent scratch of the fused merge: MERGE_SLOTS words all MERGE_EMPTY,
    then MERGE_COUNTERS counters at 0 (4 MiB, made on first use)."""

    def data():
        return np.concatenate([np.full(_KD.MERGE_SLOTS, _KD.MERGE_EMPTY, np.uint32),
                               np.zeros(_KD.MERGE_COUNTERS, np.uint32)])  # fmt: skip

    return dev.persistent(("attn.decode.merge", _KD.MERGE_SLOTS, _KD.MERGE_COUNTERS), data)


def _decode_rows(L) -> int:
    """Queries a workgroup of the one-pass decode kernel takes (each key read once for them)."""
    return min(L, DECODE_ROWS)


def _decode_lanes(dev, E) -> int:
    """The decode kernel's `lanes` on this device (kernels/attention_decode.decode_key_lanes;
    on CPU adapters only where DECODE_SG forces them): > 0 takes the one-pass kernel."""
    if not dev.subgroups or (dev.adapter_type == "CPU" and _KD.DECODE_SG is not True):
        return 0
    return _KD.decode_key_lanes(E, dev.subgroup_size)


# The register-tiled backward (kernels/attention_tiled_bwd.py) takes head dims up to 128 where
# a workgroup may hold its 43 KiB (E <= 64; 27 KiB at E <= 32; 36 KiB in blocks of 16 past 64)
# and its 128 (64) invocations: the H100/H200
# through both implementations. Not on CPU adapters unless forced (tests reach it on lavapipe at
# E <= 32; there the per-row kernels were even or faster). H100, wgpu-native, GPU time of the
# backward's two dispatches (2026-12-05, scripts/attention_bwd_ab.py, causal blocks heaviest
# first; docs/bench/2026-12-05-h100-attn-bwd-3.json), us, per-row kernels / tiled with 4 rows an
# invocation (64 a workgroup) / 2 rows (128) / torch CUDA's backward:
#   BERT-base 32x12x128x64, padding mask     678 / 877 / 623 / 291
#   the same at batch 1                       224 / 75 / 54 / 158
#   2x12x512x512x64                           812 / 625 / 462 / 252
#   causal 1x16x4096x4096x64               10,083 / 12,584 / 9,475 / 3,349
#   causal 8x4x64x64x32 (the GPT bench)        55 / 33 / 28 / 188
#   causal 8x12x512x512x32                    446 / 673 / 596 / 464
# so 2 rows an invocation (BWD_RPT), at E > 32 always; at E <= 32 only where the per-row
# kernels would have fewer than TILED_BWD_SMALL_E_GROUPS workgroups (the GPT bench: 32; the
# last row: 768, where the per-row kernels win; the threshold between is an estimate, two
# workgroups an SM of a 132-SM GPU). Issuing the next tile's reads early (as the forward's
# PREFETCH) measured the same or up to 5 % slower and was dropped.
TILED_BWD_SMALL_E_GROUPS = 264
# Head dims 65 .. 128 take it in blocks of 16 (kernels/attention_tiled_bwd.BWD_TB_WIDE; H100,
# 2026-12-05, docs/bench/2026-12-05-h100-attn-bwd-e128.json, us, per-row / tiled / torch CUDA):
# causal 1 x 32 x 512 x 128 2,626 / 1,333 / 455; 8 x 16 x 128 x 128 with a mask 939 / 793 / 266.
FORCE_TILED_BWD = None  # True / False: take (where it can run) / never take it (tests, A/B)
FORCE_TILED_BWD_TB = None  # its block rows (tests: 16 at E <= 64, what E > 64 takes on a GPU)


# dq from a stored dS (kernels/attention_tiled_bwd.attn_dkv_tiled_kernel's `ds_out`): the dk/dv
# kernel writes the dS it sums anyway (f32, batch·heads × L × S), D = Σ dout·out comes from two
# ops, and dq = scale · dS · k is one batched GEMM, so the dq kernel's recomputation of S and dP
# (two of the backward's seven products) goes, for a write and a read of dS (BERT-base,
# 32×12×128×128: 25 MB). Measured on an H100, wgpu-native, 2026-12-05
# (docs/bench/2026-12-05-h100-s28-attn-bwd.json, GPU time of every kernel, µs, dq kernel /
# stored dS / torch CUDA):
#   BERT-base 32x12x128x128x64, padding mask     523 / 417 / 258   (dS 25 MB)
#   2x12x512x512x64                              381 / 331 / 235   (25 MB)
#   causal 1x32x512x512x128                      919 / 719 / 376   (34 MB)
#   8x16x128x128x128, padding mask               574 / 408 / 181   (8.4 MB)
#   8x12x512x512x32                              430 / 530 / 395   (101 MB; E = 32: the
#                                                                   recomputation is cheap)
#   BERT-base batch 1, 1x12x128x128x64            46 /  65 / 118   (0.8 MB: the extra
#   causal 8x4x64x64x32 (the GPT bench)           24 /  45 / 140    dispatches dominate)
# so it is taken at E > DS_GEMM_MIN_E where dS is at least DS_GEMM_MIN_BYTES (between the 0.8
# and 8.4 MB measured; 4 MiB is an estimate) and at most DS_GEMM_MAX_BYTES (causal 16×4096² is
# 1 GiB: the dq kernel, which never stores dS, runs there).
DS_GEMM = None  # True / False: take it wherever the tiled backward runs and dS fits / never
DS_GEMM_MIN_E = 32
DS_GEMM_MIN_BYTES = 4 << 20
DS_GEMM_MAX_BYTES = 256 << 20
# ... and dk, dv by GEMMs too (attn_dkv_tiled_kernel's `p_out`): the kernel stores the weights P
# beside dS (a second batch·heads × L × S f32 buffer) and does only the scores, dP and the
# elementwise step, and dv = Pᵀ·dout, dk = scale·dSᵀ·q, dq = scale·dS·k are three batched GEMMs:
# two more of the backward's products move from the kernel's register tiles (~11 TFLOP/s at
# BERT-base, an estimate: the tiled dq and dk/dv kernels' seven products took 523 µs together)
# to the GEMM kernels, for a write and two reads of P. Measured on an H100, wgpu-native,
# 2026-12-07 (session 47, docs/bench/2026-12-07-h100-s47-attn-gemm3.*: the whole backward's GPU
# time, µs, dq kernel / stored dS / gemm3 / torch CUDA):
#   BERT-base 32x12x128x128x64, padding mask     523 / 399 / 410 / 323
#   2x12x512x512x64                              385 / 334 / 344 / 347
#   causal 1x32x512x512x128                      909 / 721 / 699 / 508
#   8x16x128x128x128, padding mask               579 / 402 / 377 / 286
#   8x12x512x512x32                              438 / 528 / 680 / 525  (stored dS not taken)
#   BERT-base batch 1                             46 /  59 /  74 / 158  (not taken)
# so where the stored dS is taken, dk and dv go to GEMMs too at E >= GEMM_PRODUCTS_MIN_E (the
# kernel's register tiles at E = 128 hold twice E = 64's sums a thread; at 64 the GEMMs' extra
# read of P costs more than they save).
GEMM_PRODUCTS = None  # True / False: wherever the stored dS is taken / never; None: the rule
GEMM_PRODUCTS_MIN_E = 128


def _use_gemm_products(E) -> bool:
    if GEMM_PRODUCTS is not None:
        return bool(GEMM_PRODUCTS)
    return E >= GEMM_PRODUCTS_MIN_E


def _use_ds_gemm(nbh, L, S, E) -> bool:
    nbytes = nbh * L * S * 4
    if DS_GEMM is not None:
        return bool(DS_GEMM) and nbytes <= DS_GEMM_MAX_BYTES
    return E > DS_GEMM_MIN_E and DS_GEMM_MIN_BYTES <= nbytes <= DS_GEMM_MAX_BYTES


def _tiled_bwd_tb(E):
    """Block rows of the tiled backward at head dim E."""
    return FORCE_TILED_BWD_TB or _KB.bwd_tb(E)


def _use_tiled_bwd(dev, L, S, E, nbh=1):
    if FORCE_TILED_BWD is False or E > _KB.BWD_MAX_E:
        return False
    if FORCE_TILED_BWD is None:
        if dev.adapter_type == "CPU":
            return False
        rows = nbh * max(-(-L // _K.block_for(L)), -(-S // _K.block_for(S)))
        if E <= 32 and rows >= TILED_BWD_SMALL_E_GROUPS:
            return False
    lim = dev.limits
    budget = max_loop_iterations()
    tb = _tiled_bwd_tb(E)
    return (
        lim.get("max-compute-workgroup-storage-size", 16384) >= _KB.bwd_shared_bytes(E, None, tb)
        and lim.get("max-compute-invocations-per-workgroup", 256) >= _KB.bwd_wg(tb)
        and _KB.bwd_loop_iterations(S, E, None, tb) <= budget
        and _KB.bwd_loop_iterations(L, E, None, tb) <= budget
    )


def _flash_backward(q, k, v, mask, is_causal, scale, out, lse, g, drop=None):
    """(dq, dk, dv) of the broadcast leading shape by the two backward kernels, or None where
    the key loop of the dk/dv kernel passes the loop budget."""
    L, E = q._shape[-2:]
    S = k._shape[-2]
    lead = _lead_shape(q, k, v, mask)
    if mask is not None:
        mask = _mask_operand(mask, L, S)
    dev = backend.current()
    nbh = math.prod(lead)
    tiled = _use_tiled_bwd(dev, L, S, E, nbh)
    tb = _tiled_bwd_tb(E)
    qblock, kblock = (tb, tb) if tiled else (_K.block_for(L), _K.block_for(S))
    budget = max_loop_iterations()
    if not tiled and (
        _K.fwd_loop_iterations(S, E, qblock) > budget
        or _K.dkv_loop_iterations(L, E, kblock) > budget
    ):
        return None
    kind = _mask_kind(mask)
    mt = mask.dtype.wgsl if mask is not None else None
    base = [(q, -2, -1), (k, -2, -1), (v, -2, -1)] + ([(mask, -2, -1)] if mask is not None else [])
    bufs = [q._storage.buffer, k._storage.buffer, v._storage.buffer]
    if mask is not None:
        bufs.append(mask._storage.buffer)

    def kernel(tiled_kernel, rows_kernel, block, args, **extra):
        if tiled:
            shfl = _KB.P_SHUFFLE
            if shfl is None:
                shfl = _KT.tiled_ep(E) <= _KB.SHUFFLE_MAX_E
            sg = _row_subgroups(dev) if shfl else 0
            return tiled_kernel(E, *args, dropout=bool(drop), rpt=_KB.BWD_RPT,
                                heavy_first=_K.HEAVY_FIRST, tb=tb, sg=sg, **extra)  # fmt: skip
        return rows_kernel(E, block, *args, dropout=bool(drop), heavy_first=_K.HEAVY_FIRST)

    # dq from the stored dS (DS_GEMM): D by ops here, dS from the dk/dv kernel, dq by a GEMM below
    ds_gemm = tiled and _use_ds_gemm(nbh, L, S, E)
    if ds_gemm:
        dd = _reduce.sum(_ew.mul(g.to(D.float32), out.to(D.float32)), -1).contiguous()
    else:  # dq and D = Σ dout·out per query
        nq = -(-L // qblock)
        rank, info = _info(lead, L, S, scale, nq, base + [(out, -2, -1), (g, -2, -1)])
        qh = _heads_inside(q, lead)
        dq = _empty_rows(lead, L, E, q.dtype, qh)
        dd = empty(tuple(lead) + (L,), D.float32)
        dq_args = (rank, bool(is_causal), kind, q.dtype.wgsl, k.dtype.wgsl, v.dtype.wgsl, mt,
                   out.dtype.wgsl, g.dtype.wgsl, dq.dtype.wgsl, qh)  # fmt: skip
        src = kernel(_KB.attn_dq_tiled_kernel, _K.attn_dq_kernel, qblock, dq_args)
        extra = [out._storage.buffer, g._storage.buffer, lse._storage.buffer]
        _dispatch(dev, src, bufs + extra + [dq._storage.buffer, dd._storage.buffer], info,
                  fold_grid(nbh * nq), drop)  # fmt: skip
    # dk, dv (and dS)
    nk = -(-S // kblock)
    rank, info = _info(lead, L, S, scale, nk, base + [(g, -2, -1)])
    kh = _heads_inside(k, lead)
    kh = kh if kh and _heads_inside(v, lead) == kh else 0
    dk = _empty_rows(lead, S, E, k.dtype, kh)
    dv = _empty_rows(lead, S, E, v.dtype, kh)
    outs = [dk._storage.buffer, dv._storage.buffer]
    dkv_args = (rank, bool(is_causal), kind, q.dtype.wgsl, k.dtype.wgsl, v.dtype.wgsl, mt,
                g.dtype.wgsl, dk.dtype.wgsl, dv.dtype.wgsl, kh)  # fmt: skip
    gemm3 = ds_gemm and _use_gemm_products(E)
    if ds_gemm:
        ds = empty(tuple(lead) + (L, S), D.float32)
        if gemm3:  # (P and dS out; dk and dv by the GEMMs below)
            pm = empty(tuple(lead) + (L, S), D.float32)
            outs = [pm._storage.buffer]
        outs.append(ds._storage.buffer)
        src = kernel(_KB.attn_dkv_tiled_kernel, None, kblock, dkv_args, ds_out=True, p_out=gemm3)
    else:
        src = kernel(_KB.attn_dkv_tiled_kernel, _K.attn_dkv_kernel, kblock, dkv_args)
    extra = [g._storage.buffer, lse._storage.buffer, dd._storage.buffer]
    _dispatch(dev, src, bufs + extra + outs, info, fold_grid(nbh * nk), drop)
    if ds_gemm:  # (ds holds scale·dS)
        dq = _matmul.matmul(ds, k.to(D.float32)).to(q.dtype)
    if gemm3:
        dk = _matmul.matmul(ds.transpose(-2, -1), q.to(D.float32)).to(k.dtype)
        dv = _matmul.matmul(pm.transpose(-2, -1), g.to(D.float32)).to(v.dtype)
    return dq, dk, dv


def _weights(query, key, attn_mask, is_causal, scale, L, S):
    """softmax(q·kᵀ·scale + M) with every step recorded, M the mask as 0 / -inf (a bool or
    causal mask) or the float mask itself; rows with every key masked attend to nothing (their
    M row set to 0 so softmax stays finite, their weights multiplied by 0). A float mask that
    requires grad is added as it is (recorded)."""
    scores = _matmul.matmul(query, key.transpose(-2, -1)) * scale
    alive = dead = None
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
        if not attn_mask.dtype.is_bool and attn_mask.requires_grad:
            # recorded, so its gradient passes through (not madd + (m - m.detach()): a -inf
            # entry, a padding mask added to a learned bias, made that NaN everywhere)
            madd = attn_mask if dead is None else _ew.where(dead, 0.0, attn_mask)
        dt = scores.dtype
        scores = scores + madd
        if scores.dtype is not dt:  # (a float32 mask on half scores: added in float32, rounded
            scores = scores.to(dt)  # once to the scores' dtype, as the unrecorded path does)
    attn = _rowops.softmax(scores, -1)
    if alive is not None:
        attn = attn * alive
    return attn


def _g_flash(ctx, grads):
    """dq, dk, dv (and a float mask's gradient) of _flash. The fused kernels when no double
    backward is recorded and the mask needs no gradient; else the math with recorded ops:
    P the weights, dV = Pᵀ·g, dS = P·(g·Vᵀ - rowsum(P·g·Vᵀ)), dQ = scale·dS·K, dK = scale·dSᵀ·Q,
    dM = dS."""
    q, k, v, mask, is_causal, scale, drop = ctx.args
    g = grads[0] if isinstance(grads, (list, tuple)) else grads
    if g is None:
        return (None,) * 4
    needs_mask = len(ctx.needs) > 3 and ctx.needs[3]
    if not _autograd.is_grad_enabled() and not needs_mask:
        out, lse = ctx.out
        got = _flash_backward(q, k, v, mask, is_causal, scale, out, lse, g, drop)
        if got is not None:
            dq, dk, dv = got
            return (dq if ctx.needs[0] else None, dk if ctx.needs[1] else None,
                    dv if ctx.needs[2] else None, None)  # fmt: skip
    L, S = q._shape[-2], k._shape[-2]
    dts = (q.dtype, k.dtype, v.dtype, None if mask is None else mask.dtype)
    if q.dtype in (D.float16, D.bfloat16):
        # the math in float32, as the kernels and torch's CPU math accumulate, the gradients
        # rounded once: in half, a score plus a padding mask's -1e4 lost the score (f16's step
        # there is 8) and the gradients of such rows were 15-25 % off
        q, k, v, g = (t.to(D.float32) for t in (q, k, v, g))
        if mask is not None and not mask.dtype.is_bool:
            mask = mask.to(D.float32)
    attn = _weights(q, k, mask, is_causal, scale, L, S)
    dattn = _matmul.matmul(g, v.transpose(-2, -1))
    kept = attn
    if drop is not None:  # the forward's mask as a tensor: dP = (g·Vᵀ)·M, dV = (P·M)ᵀ·g
        dm = _drop_mask(_lead_shape(q, k, v, mask), L, S, drop, attn.dtype)
        dattn = dattn * dm
        kept = attn * dm
    dv = _matmul.matmul(kept.transpose(-2, -1), g) if ctx.needs[2] else None
    ds = attn * (dattn - (dattn * attn).sum(-1, keepdim=True))
    dq = _matmul.matmul(ds, k) * scale if ctx.needs[0] else None
    dk = _matmul.matmul(ds.transpose(-2, -1), q) * scale if ctx.needs[1] else None
    grads = (dq, dk, dv, ds if needs_mask else None)
    return tuple(t if t is None or t.dtype is dt else t.to(dt) for t, dt in zip(grads, dts))


_g_flash.saves = frozenset((0, 1, 2, 3, "out"))


def _drop_mask(lead, L, S, drop, dtype):
    """The fused kernels' dropout mask as a (lead..., L, S) tensor: 1/(1-p) kept, 0 dropped."""
    out = empty(tuple(lead) + (L, S), dtype)
    n = out.numel()
    src = _K.attn_dropout_mask_kernel(out.dtype.wgsl)
    _dispatch(backend.current(), src, [out._storage.buffer], [n, S],
              fold_grid(-(-n // 256)), drop)  # fmt: skip
    return out


GRADS = {"_flash": _g_flash}


__all__ = ["scaled_dot_product_attention"]
