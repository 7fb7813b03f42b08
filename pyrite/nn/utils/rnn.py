"""pyrite.nn.utils.rnn: torch.nn.utils.rnn's PackedSequence, pack_padded_sequence,
pad_packed_sequence, pack_sequence, unpack_sequence, pad_sequence and unpad_sequence.

A PackedSequence stores the time steps of a batch of sequences (sorted by decreasing length)
one after another: step t contributes its first batch_sizes[t] rows. batch_sizes, lengths and
the permutations are small integer tensors that live on the host side of the computation (the
packing plans are computed there with numpy, once per call); the data is moved by one
index_select, so packing and unpacking are differentiable in the data.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable

import numpy as np

from ...ops import combine as _combine
from ...ops import creation as _creation
from ...ops import scatter as _scatter
from ...tensor import Tensor
from .. import functional as F

__all__ = [
    "PackedSequence",
    "invert_permutation",
    "pack_padded_sequence",
    "pack_sequence",
    "pad_packed_sequence",
    "pad_sequence",
    "unpack_sequence",
    "unpad_sequence",
]


def _ints(t):
    """A host int64 array from a Tensor, a list or a numpy array."""
    if isinstance(t, Tensor):
        return np.asarray(t.tolist(), dtype=np.int64)
    return np.asarray(t, dtype=np.int64)


def _long(a):
    return _creation.tensor(np.asarray(a, dtype=np.int64))


def invert_permutation(permutation):
    """The inverse of a permutation (None stays None)."""
    if permutation is None:
        return None
    p = _ints(permutation)
    inv = np.empty_like(p)
    inv[p] = np.arange(p.size, dtype=np.int64)
    return _long(inv)


class PackedSequence(
    namedtuple("PackedSequence", "data batch_sizes sorted_indices unsorted_indices")
):
    """Holds the data and the list of batch_sizes of a packed sequence
    (torch.nn.utils.rnn.PackedSequence). Build one with pack_padded_sequence or
    pack_sequence, not by hand.

    Attributes:
        data (Tensor): the packed steps, (sum(batch_sizes), *).
        batch_sizes (Tensor): how many sequences are still running at each time step.
        sorted_indices (Tensor, optional): the original batch index of each sorted sequence
            (None when the batch was given sorted).
        unsorted_indices (Tensor, optional): the inverse of sorted_indices.
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            # torch's: PackedSequence((data, batch_sizes)) from a pair
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise TypeError("PackedSequence: pass (data, batch_sizes) or data and batch_sizes")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    # the dtype/device conversions of the data (the indices stay integer)
    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def _conv(self, name):
        data = getattr(self.data, name)()
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def cuda(self, *args, **kwargs):
        return self

    def cpu(self, *args, **kwargs):
        return self

    def double(self):
        return self._conv("double")

    def float(self):
        return self._conv("float")

    def half(self):
        return self._conv("half")

    def long(self):
        return self._conv("long")

    def int(self):
        return self._conv("int")

    def short(self):
        return self._conv("short")

    def char(self):
        return self._conv("char")

    def byte(self):
        return self._conv("byte")

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return False


def _lengths(lengths):
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(
                "'lengths' argument should be a 1D CPU int64 tensor, but got "
                f"{lengths.dim()}D tensor"
            )
        return _ints(lengths)
    arr = np.asarray(lengths)
    if arr.ndim != 1:
        raise RuntimeError(
            f"'lengths' argument should be a 1D CPU int64 tensor, but got {arr.ndim}D tensor"
        )
    return arr.astype(np.int64)


def _batch_sizes(lengths):
    """batch_sizes of sorted (decreasing, positive) lengths: at step t, #{b: lengths[b] > t}."""
    return (lengths[None, :] > np.arange(int(lengths[0]))[:, None]).sum(1).astype(np.int64)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a Tensor of padded sequences of variable length.

    Args:
        input (Tensor): padded batch (T, B, *), or (B, T, *) with batch_first.
        lengths (Tensor or list[int]): each sequence's length (all > 0).
        batch_first (bool): the layout of input. Default: False.
        enforce_sorted (bool): True: the lengths must be in decreasing order; False: the
            batch is sorted here and the permutation kept in sorted_indices. Default: True.

    Returns:
        a PackedSequence. Differentiable in input.
    """
    lengths = _lengths(lengths)
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    bdim, tdim = (0, 1) if batch_first else (1, 0)
    if input.dim() < 2:
        raise RuntimeError(
            f"pack_padded_sequence: input must have at least 2 dimensions, got {input.dim()}"
        )
    batch = input.size(bdim)
    if lengths.size != batch:
        raise RuntimeError(
            f"Expected `len(lengths)` to be equal to batch_size, but got {lengths.size} "
            f"(batch_size={batch})"
        )
    if enforce_sorted:
        sorted_indices = None
        if np.any(np.diff(lengths) > 0):
            raise RuntimeError(
                "`lengths` array must be sorted in decreasing order when `enforce_sorted` is "
                "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
                "pack_sequence to sidestep this requirement if you do not need ONNX "
                "exportability."
            )
        order = np.arange(batch)
    else:
        # torch.sort(descending=True) is stable here: ties keep their batch order
        order = np.argsort(-lengths, kind="stable")
        lengths = lengths[order]
        sorted_indices = _long(order)
    if lengths[-1] <= 0:
        raise RuntimeError(
            "Length of all samples has to be greater than 0, but found an element in "
            "'lengths' that is <= 0"
        )
    steps = input.size(tdim)
    if lengths[0] > steps:
        # torch reads past the end here; pyrite refuses
        raise RuntimeError(
            f"pack_padded_sequence: a length ({int(lengths[0])}) exceeds the sequence length "
            f"of input ({steps})"
        )
    bs = _batch_sizes(lengths)
    # row (t, b) of the (T, B) layout, for every packed element in order
    t_idx = np.repeat(np.arange(bs.size), bs)
    b_idx = np.concatenate([order[:n] for n in bs])
    flat = t_idx * batch + b_idx if not batch_first else b_idx * steps + t_idx
    rows = input.reshape(batch * steps, *input.shape[2:])
    data = _scatter.index_select(rows, 0, _long(flat))
    return PackedSequence(data, _long(bs), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Pads a packed batch of variable length sequences (the inverse of pack_padded_sequence).

    Args:
        sequence (PackedSequence): the batch to pad.
        batch_first (bool): output (B, T, *) instead of (T, B, *). Default: False.
        padding_value (float): the value of the padded elements. Default: 0.
        total_length (int, optional): pad to this many steps (at least the longest length).

    Returns:
        (padded Tensor, lengths Tensor): the batch in its original order (unsorted_indices)
        and each sequence's length. Differentiable in sequence.data.
    """
    data = sequence.data
    bs = _ints(sequence.batch_sizes)
    max_len = int(bs.size)
    if total_length is not None:
        if total_length < max_len:
            raise ValueError(
                "Expected total_length to be at least the length of the longest sequence in "
                f"input, but got total_length={total_length} and max sequence length being "
                f"{max_len}"
            )
        max_len = int(total_length)
    batch = int(bs[0])
    # sorted lengths: sequence b runs while batch_sizes[t] > b
    lengths = (bs[None, :] > np.arange(batch)[:, None]).sum(1).astype(np.int64)
    unsorted = (
        np.arange(batch) if sequence.unsorted_indices is None else _ints(sequence.unsorted_indices)
    )
    # packed position of (t, sorted b), or the padding row (index S) outside a sequence
    start = np.concatenate([[0], np.cumsum(bs)[:-1]]).astype(np.int64)
    total = int(bs.sum())
    t = np.arange(max_len)[:, None]
    b = np.arange(batch)[None, :]
    live = t < lengths[None, :]
    pos = np.where(live, start[np.minimum(t, bs.size - 1)] + b, total)
    pos = pos[:, unsorted]  # back to the caller's batch order
    if batch_first:
        pos = pos.T
    pad = _creation.full((1, *data.shape[1:]), padding_value, dtype=data.dtype)
    rows = _combine.cat([data, pad], 0)
    out = _scatter.index_select(rows, 0, _long(pos.reshape(-1)))
    out = out.reshape(*pos.shape, *data.shape[1:])
    return out, _long(lengths[unsorted])


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of variable length Tensors (L_i, *).

    Args:
        sequences (list[Tensor]): the sequences, in decreasing length unless
            enforce_sorted=False.
        enforce_sorted (bool): as in pack_padded_sequence. Default: True.

    Returns:
        a PackedSequence.
    """
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of variable length Tensors that pack_sequence packed."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


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
