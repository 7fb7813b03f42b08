"""torch.nn.attention.bias: `causal_upper_left(L, S)` / `causal_lower_right(L, S)`, passed as
scaled_dot_product_attention's attn_mask. Lower-right alignment is the causal mask of a chunk of
L new queries against S = past + L keys (chunked prefill with a KV cache), where is_causal=True
aligns top-left. torch's CausalBias is a Tensor subclass dispatching the call; here it is a
small object that nn/_attention.py turns into is_causal=True (upper left, or L == S) or the
materialized bool mask (lower right), as torch's CPU path does."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]


class CausalVariant(IntEnum):
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask of (seq_len_q, seq_len_kv) aligned upper left or lower right."""

    def __init__(self, variant, seq_len_q: int, seq_len_kv: int):
        if not isinstance(variant, CausalVariant):
            raise ValueError(
                f"pyrite: CausalBias: variant must be a CausalVariant, got {variant!r}"
            )
        self.variant, self.seq_len_q, self.seq_len_kv = variant, int(seq_len_q), int(seq_len_kv)
        if self.seq_len_q > self.seq_len_kv and variant is CausalVariant.LOWER_RIGHT:
            from ...errors import warn

            warn(
                "pyrite: lower right causal bias with seq_len_q > seq_len_kv leaves the first "
                "queries attending to nothing (their outputs are 0)"
            )

    def _materialize(self, device=None):
        """The bool mask (True = attend)."""
        from ...dtypes import bool_
        from ...ops.combine import tril
        from ...ops.creation import ones

        diagonal = 0
        if self.variant is CausalVariant.LOWER_RIGHT:
            diagonal = self.seq_len_kv - self.seq_len_q
        return tril(ones(self.seq_len_q, self.seq_len_kv, dtype=bool_), diagonal)

    def __repr__(self):
        return self._materialize().__repr__()


def causal_upper_left(*size) -> CausalBias:
    """The causal mask of is_causal=True: query i attends to keys 0..i."""
    if len(size) != 2:
        raise ValueError(f"pyrite: causal_upper_left expects (seq_len_q, seq_len_kv), got {size}")
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size) -> CausalBias:
    """Query i (of L) attends to keys 0..S-L+i: the last query sees every key."""
    if len(size) != 2:
        raise ValueError(f"pyrite: causal_lower_right expects (seq_len_q, seq_len_kv), got {size}")
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)
