"""pyrite.nn.utils.rnn: pad_sequence / unpad_sequence (torch.nn.utils.rnn's), and the
PackedSequence type (the RNN modules do not take one yet)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

from ...ops import combine as _combine
from ...tensor import Tensor
from .. import functional as F

__all__ = ["PackedSequence", "pad_sequence", "unpad_sequence"]


class PackedSequence(
    namedtuple("PackedSequence", "data batch_sizes sorted_indices unsorted_indices")
):
    """torch.nn.utils.rnn.PackedSequence's fields (data, batch_sizes, sorted_indices,
    unsorted_indices)."""

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = sorted_indices.argsort()
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Pad a list of variable-length tensors (L_i, *) with `padding_value` and stack them.

    Args:
        sequences (list[Tensor]): sequences of shape (L_i, *), trailing sizes equal.
        batch_first (bool): output (B, T, *) instead of (T, B, *). Default: False.
        padding_value (float): value of the padded elements. Default: 0.
        padding_side (str): 'right' or 'left'. Default: 'right'.

    Returns:
        Tensor (T, B, *) — or (B, T, *) with batch_first — where T is the longest length.
        Differentiable in the sequences.
    """
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    if not isinstance(sequences, Iterable):
        raise RuntimeError(
            "pad_sequence: Expected iterable for input sequences, but got arg of type: "
            f"{type(sequences)}"
        )
    sequences = tuple(sequences)
    if padding_side not in ("left", "right"):
        raise RuntimeError(
            f"Expected padding_side to be one of left or right, but got {padding_side}."
        )
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    for k, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(
                f"pad_sequence: sequences[{k}] must be a Tensor, not {type(s).__name__}"
            )
        if s.dim() == 0:
            raise RuntimeError(f"pad_sequence: sequences[{k}] is 0-D; each sequence needs (L, *)")
        if tuple(s.shape[1:]) != tuple(sequences[0].shape[1:]):
            raise RuntimeError(
                f"pad_sequence: sequences[{k}] has trailing shape {tuple(s.shape[1:])}, "
                f"sequences[0] {tuple(sequences[0].shape[1:])}"
            )
    longest = max(s.size(0) for s in sequences)
    padded = []
    for s in sequences:
        n = longest - s.size(0)
        if n:
            # F.pad lists the last dimension first: dims 1.. get (0, 0), dim 0 gets the padding
            side = (0, n) if padding_side == "right" else (n, 0)
            s = F.pad(s, (0, 0) * (s.dim() - 1) + side, value=padding_value)
        padded.append(s)
    return _combine.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences (L_i, *) that pad_sequence padded (right-padded input).

    Args:
        padded_sequences (Tensor): (T, B, *) or (B, T, *) with batch_first.
        lengths (Tensor or list[int]): each sequence's length.
        batch_first (bool): the layout of padded_sequences. Default: False.
    """
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    lengths = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [seq[: int(n)] for seq, n in zip(padded_sequences.unbind(0), lengths)]
