"""MultiheadAttention: torch's parameters (in_proj_weight/in_proj_bias packed, or q/k/v_proj_weight
when kdim/vdim differ; out_proj a Linear), masks and returned weights, and the forward of
torch.nn.functional.multi_head_attention_forward written with pyrite ops.

need_weights=False goes through scaled_dot_product_attention (no (L, S) weights kept for the
caller); need_weights=True computes softmax(q·kᵀ/√d + mask) explicitly to return it."""

from __future__ import annotations

import math

from ...errors import warn
from ...ops import combine as _combine
from ...ops import creation as _creation
from ...ops import elementwise as _ew
from ...ops import matmul as _matmul
from ...ops import pad as _pad
from .. import functional as F
from .. import init
from ..module import Module, Parameter
from ._util import new_empty
from .linear import NonDynamicallyQuantizableLinear

__all__ = ["MultiheadAttention", "multi_head_attention_forward"]


def _canonical_mask(mask, mask_name, target_type, other_type=None, other_name=""):
    """A bool mask (True = masked out) as a float one (-inf where masked, 0 elsewhere);
    a float mask as it is. Warns, as torch, when other_type (the other mask's dtype) differs."""
    if mask is None:
        return None
    if not (mask.dtype.is_bool or mask.dtype.is_floating_point):
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if other_type is not None and mask.dtype != other_type:
        warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type "
            "for both instead."
        )
    if mask.dtype.is_bool:
        return _ew.where(mask, -math.inf, 0.0).to(target_type)
    return mask


def _none_or_dtype(t):
    return None if t is None else t.dtype


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """torch's F._mha_shape_check: the ranks of the inputs and masks (its words); True when
    the query is batched (3-D)."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                f"found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                f"found {attn_mask.dim()}-D tensor instead"
            )
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                f"{key.dim()}-D and {value.dim()}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D "
                f"but found {key_padding_mask.dim()}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                    f"but found {attn_mask.dim()}-D tensor instead"
                )
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(
                    f"Expected `attn_mask` shape to be {expected} but got {attn_mask.shape}"
                )
        return False
    raise AssertionError(
        "query should be unbatched 2D or batched 3D tensor but received "
        f"{query.dim()}-D query tensor"
    )


def _check_proj_shapes(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v):
    """torch's F._in_projection checks: w_q (E, E), w_k (E, Ek), w_v (E, Ev), biases (E,)."""
    eq, ek, ev = query.shape[-1], key.shape[-1], value.shape[-1]
    for what, w, shape in (
        ("query weights", w_q, (eq, eq)),
        ("key weights", w_k, (eq, ek)),
        ("value weights", w_v, (eq, ev)),
        ("query bias", b_q, (eq,)),
        ("key bias", b_k, (eq,)),
        ("value bias", b_v, (eq,)),
    ):
        if w is not None and tuple(w.shape) != shape:
            raise AssertionError(f"expecting {what} shape of {shape}, but got {w.shape}")


def _heads(t, static, name, n, head_dim):
    """(S, N, E) -> (N·H, S, hd), or static_k/static_v as given (checked)."""
    if static is None:
        return t.reshape(t.shape[0], n, head_dim).transpose(0, 1)
    if static.size(0) != n:
        raise AssertionError(f"expecting {name}.size(0) of {n}, but got {static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {static.size(2)}")
    return static


def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check,
    num_heads,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn,
    dropout_p,
    out_proj_weight,
    out_proj_bias,
    training=True,
    key_padding_mask=None,
    need_weights=True,
    attn_mask=None,
    use_separate_proj_weight=False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights=True,
    is_causal=False,
):
    """torch.nn.functional.multi_head_attention_forward: inputs (L, N, E) / (S, N, E), or
    unbatched (L, E) / (S, E). Returns (output, weights or None). Its checks, words and
    control flow follow torch's: is_causal with neither a key_padding_mask nor need_weights
    hands the causal hint to scaled_dot_product_attention in place of attn_mask."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(
        key_padding_mask, "key_padding_mask", query.dtype, _none_or_dtype(attn_mask), "attn_mask"
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
            "module method `generate_square_subsequent_mask` to create this mask."
        )
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # sdpa's is_causal instead
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
        )
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                f"{value.shape[:2]}"
            )
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    # in-projection: (L, N, E), (S, N, E), (S, N, E)
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w_q, w_k, w_v = in_proj_weight.chunk(3)
    else:
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(
                    f"use_separate_proj_weight is True but {name}_proj_weight is None"
                )
        w_q, w_k, w_v = q_proj_weight, k_proj_weight, v_proj_weight
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    if use_separate_proj_weight:
        _check_proj_shapes(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v)
    q = F.linear(query, w_q, b_q)
    k = F.linear(key, w_k, b_k)
    v = F.linear(value, w_v, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                    f"{(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _combine.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _combine.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = _pad.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = _pad.pad(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    # (N·H, L, hd), (N·H, S, hd), (N·H, S, hd)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads(k, static_k, "static_k", bsz * num_heads, head_dim)
    v = _heads(v, static_v, "static_v", bsz * num_heads, head_dim)

    if add_zero_attn:
        zeros = _creation.zeros(bsz * num_heads, 1, head_dim, dtype=q.dtype)
        k = _combine.cat([k, zeros], dim=1)
        v = _combine.cat([v, zeros], dim=1)
        if attn_mask is not None:
            attn_mask = _pad.pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = _pad.pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]

    if key_padding_mask is not None:
        for d, want in enumerate((bsz, src_len)):
            if key_padding_mask.shape[d] != want:
                raise AssertionError(
                    f"Expected key_padded_mask.shape[{d}] to be {want}, but got "
                    f"{key_padding_mask.shape[d]}"
                )
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        scale = math.sqrt(1.0 / float(head_dim))
        scores = _matmul.bmm(q * scale, k.transpose(-2, -1))  # (N·H, L, S)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = F.softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = F.dropout(weights, p=dropout_p)
        out = _matmul.bmm(weights, v)  # (N·H, L, hd)
        out = out.transpose(0, 1).contiguous().reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, out_proj_weight, out_proj_bias)
        out = out.reshape(tgt_len, bsz, out.shape[-1])
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out = out.squeeze(1)
            weights = weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, attn_mask.shape[-2], src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).contiguous().reshape(bsz * tgt_len, embed_dim)
    out = F.linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, out.shape[-1])
    if not is_batched:
        out = out.squeeze(1)
    return out, None


class MultiheadAttention(Module):
    """Attention over num_heads heads of embed_dim/num_heads each.

    Args:
        embed_dim (int), num_heads (int), dropout (float): on the attention weights.
        bias (bool): in_proj_bias and out_proj.bias. add_bias_kv, add_zero_attn (bool).
        kdim, vdim (int): key/value sizes (separate q/k/v_proj_weight when they differ).
        batch_first (bool): (N, L, E) inputs instead of (L, N, E).

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) -> (output, weights or None).
    """

    __constants__ = ["batch_first"]

    def __init__(
        self,
        embed_dim,
        num_heads,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
        batch_first=False,
        device=None,
        dtype=None,
    ):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0,"
                f" got embed_dim={embed_dim} and num_heads={num_heads} instead"
            )
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(new_empty(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(new_empty(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(new_empty(embed_dim, self.vdim, dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(new_empty(3 * embed_dim, embed_dim, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(new_empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, dtype=dtype
        )
        if add_bias_kv:
            self.bias_k = Parameter(new_empty(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(new_empty(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights=True,
        attn_mask=None,
        average_attn_weights=True,
        is_causal=False,
    ):
        is_batched = query.dim() == 3
        # torch's module canonicalizes both masks before anything else, so a mask of another
        # dtype is refused even where the functional would drop it (is_causal's sdpa path)
        key_padding_mask = _canonical_mask(
            key_padding_mask, "key_padding_mask", query.dtype, _none_or_dtype(attn_mask),
            "attn_mask",
        )  # fmt: skip
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if self.batch_first and is_batched:
            # (N, L, E) -> (L, N, E), keeping query is key is value (self-attention)
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        # (the separate weights are read only where they are used: torch's forward, so a
        # module whose unused q_proj_weight was deleted still runs)
        separate = not self._qkv_same_embed_dim
        out, weights = multi_head_attention_forward(
            query,
            key,
            value,
            self.embed_dim,
            self.num_heads,
            self.in_proj_weight,
            self.in_proj_bias,
            self.bias_k,
            self.bias_v,
            self.add_zero_attn,
            self.dropout,
            self.out_proj.weight,
            self.out_proj.bias,
            training=self.training,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            use_separate_proj_weight=separate,
            q_proj_weight=self.q_proj_weight if separate else None,
            k_proj_weight=self.k_proj_weight if separate else None,
            v_proj_weight=self.v_proj_weight if separate else None,
            average_attn_weights=average_attn_weights,
            is_causal=is_causal,
        )
        if self.batch_first and is_batched:
            return out.transpose(1, 0), weights
        return out, weights

    def __setstate__(self, state):
        state.setdefault("_qkv_same_embed_dim", True)
        super().__setstate__(state)
