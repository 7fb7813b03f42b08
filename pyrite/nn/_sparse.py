"""torch.nn.functional's "sparse functions": embedding (with max_norm), embedding_bag, one_hot.

embedding(max_norm=...) renormalises, in place in `weight`, the rows the input looks up, as
torch's embedding_renorm_: the looked-up rows are gathered (n, D), their p-norms taken, rows
over max_norm scaled by max_norm / (norm + 1e-7) and written back with index_copy_ (a row
looked up twice is written twice with the same values), and the scaled rows are the output:
O(n·D) work for n lookups, whatever the vocabulary's size.

embedding_bag reduces the rows of each bag (sum, mean or max) with index_add_ / scatter_reduce
over the bag of each position; the offsets are read on the host (torch checks them there), so
a 1-D input with offsets costs one small readback.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd import forwards
from ..errors import ArgumentAssertionError, DtypeError, ShapeError
from ..ops import creation as _creation
from ..ops import elementwise as _ew
from ..ops import reduce as _reduce
from ..ops import scatter as _scatter
from ..ops.core import upload
from ..tensor import Tensor
from ._common import fmap, need_tensor


def _padding_index(padding_idx, num_embeddings):
    if padding_idx is None:
        return None
    if padding_idx >= num_embeddings or padding_idx < -num_embeddings:
        raise ArgumentAssertionError(
            f"pyrite: embedding: Padding_idx ({padding_idx}) must be within num_embeddings "
            f"({num_embeddings})"
        )
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def _renorm_rows(weight: Tensor, index: Tensor, max_norm, norm_type):
    """The rows weight[index] (n, D) scaled to norm <= max_norm, written back into weight."""
    rows = _scatter.index_select(weight, 0, index)  # (n, D), range-checked
    norms = _reduce.norm(rows, norm_type, 1, keepdim=True)  # (n, 1)
    scaled = fmap(
        "select(x0, x0 * (s0 / (x1 + 1e-7)), x1 > s0)", [rows, norms], [max_norm], weight.dtype
    )
    _scatter.index_copy_(weight, 0, index, scaled)
    return scaled


def embedding(
    input,
    weight,
    padding_idx=None,
    max_norm=None,
    norm_type=2.0,
    scale_grad_by_freq=False,
    sparse=False,
):
    """weight[input]: the rows of `weight` (V, D) picked by the integer tensor `input`,
    (*input.shape, D). max_norm: the looked-up rows of weight are first renormalised in
    place to a norm_type-norm of at most max_norm. padding_idx only changes the gradient."""
    need_tensor("embedding", "input", input)
    need_tensor("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"pyrite: embedding: weight must be 2-D (got {tuple(weight._shape)})")
    pad = _padding_index(padding_idx, weight._shape[0])
    if max_norm is None:
        # padding_idx and scale_grad_by_freq shape the weight's gradient (ops/scatter.py)
        return _scatter.embedding(input, weight, pad, scale_grad_by_freq=scale_grad_by_freq)
    if input.dtype.kind != "i":
        raise DtypeError(
            f"pyrite: embedding: expected an integer index tensor, got {input.dtype!r}"
        )
    from ..autograd import no_grad

    with no_grad():  # torch's embedding_renorm_ is not recorded
        _renorm_rows(weight, input.reshape(-1), max_norm, norm_type)
    return _scatter.embedding(input, weight, pad, scale_grad_by_freq=scale_grad_by_freq)


def embedding_bag(
    input,
    weight,
    offsets=None,
    max_norm=None,
    norm_type=2,
    scale_grad_by_freq=False,
    mode="mean",
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """Sums, means or maxima of bags of embeddings: (B, D).

    input (B, L): B bags of L indices (offsets None); or input (n,) with offsets (B,) giving
    each bag's start (include_last_offset: offsets (B + 1,), the last one the end). Entries
    equal to padding_idx are left out (of the mean's count too); an empty bag gives zeros.
    per_sample_weights (mode 'sum' only) scale each looked-up row."""
    need_tensor("embedding_bag", "input", input)
    need_tensor("embedding_bag", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(
            f"pyrite: embedding_bag: weight has to be a 2D Tensor, but got Tensor of "
            f"dimension {weight.ndim}"
        )
    if per_sample_weights is not None and tuple(per_sample_weights._shape) != tuple(input._shape):
        raise ValueError(
            f"pyrite: embedding_bag: If per_sample_weights ({per_sample_weights.shape}) "
            f"is not None, then it must have the same shape as the input ({input.shape})"
        )
    if mode not in ("sum", "mean", "max"):
        raise ValueError("pyrite: embedding_bag: mode has to be one of sum, mean or max")
    if scale_grad_by_freq and mode == "max":
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(
            f"pyrite: embedding_bag: per_sample_weights was not None. per_sample_weights is "
            f"only supported for mode='sum' (got mode='{mode}')."
        )
    V, Dm = weight._shape
    pad = _padding_index(padding_idx, V)
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError(
                "pyrite: embedding_bag: if input is 2D, then offsets has to be None, as input "
                "is treated is a mini-batch of fixed length sequences. However, found offsets "
                f"of type {type(offsets)}"
            )
        B, L = input._shape
        bag_host = np.repeat(np.arange(B, dtype=np.int32), L)
        idx = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("pyrite: embedding_bag: offsets has to be a 1D Tensor but got None")
        off = offsets.numpy() if isinstance(offsets, Tensor) else np.asarray(offsets)
        if off.ndim != 1:
            raise ValueError("pyrite: embedding_bag: offsets has to be a 1D Tensor")
        off = off.astype(np.int64)
        n = input._shape[0]
        # (RuntimeError, as torch's checks of the offsets' values)
        if off.size and off[0] != 0:
            raise RuntimeError(
                f"pyrite: embedding_bag: offsets[0] has to be 0, i.e., the first sequence in "
                f"the mini-batch has to start from position 0. However, got {off[0]}"
            )
        if off.size and off[-1] > n:
            raise RuntimeError(
                f"pyrite: embedding_bag: offsets[-1] can not be greater than input's length {n} "
                f"but got offsets[-1] of {off[-1]}"
            )
        if np.any(np.diff(off) < 0):
            raise RuntimeError(
                f"pyrite: embedding_bag: offsets must be non-decreasing, got {off.tolist()}"
            )
        B = off.size - 1 if include_last_offset else off.size
        ends = np.append(off[1:], n) if not include_last_offset else off[1:]
        ends = ends[:B]
        counts = ends - off[:B]
        bag_host = np.repeat(np.arange(B, dtype=np.int32), counts)
        idx = input.narrow(0, 0, int(counts.sum())) if counts.sum() != n else input
        if per_sample_weights is not None and idx._shape[0] != n:
            per_sample_weights = per_sample_weights.narrow(0, 0, idx._shape[0])
    else:
        raise ValueError(
            f"pyrite: embedding_bag: input has to be 1D or 2D Tensor, but got Tensor of "
            f"dimension {input.ndim}"
        )
    out = _creation.zeros((B, Dm), dtype=weight.dtype)
    if idx.numel() == 0 or B == 0:  # no entries: zeros, still recorded as a function of
        # weight (and per_sample_weights), so a backward gives them zero gradients as torch's
        rows = _scatter.embedding(idx, weight)  # (0, D)
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
        return _scatter.index_add(out, 0, upload(np.zeros(0, np.int32), D.int32), rows)
    if max_norm is not None:  # (the rows renormalised in place, unrecorded, as torch's)
        from ..autograd import no_grad

        with no_grad():
            _renorm_rows(weight, idx, max_norm, norm_type)
    # (scale_grad_by_freq: each row's gradient divided by its index's count in the batch, as
    # F.embedding's; torch's CPU embedding_bag divides by the count of another index there)
    rows = _scatter.embedding(idx, weight, scale_grad_by_freq=scale_grad_by_freq)  # (n, D)
    bag = upload(bag_host, D.int32)  # (n,): the bag of each position
    keep = None
    if pad is not None:  # 1 where the entry counts, 0 for padding
        keep = fmap(
            "select(1.0, 0.0, x0 == s0)", [idx], [pad], D.float32, ("i32",), "f32", ("i32",)
        )
    # (recorded ops from here: the weight's and per_sample_weights' gradients flow through
    # embedding, the products, index_add_ and scatter_reduce's rules)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1).to(rows.dtype)
    if keep is not None and mode != "max":
        rows = rows * keep.unsqueeze(1).to(rows.dtype)
    if mode == "max":
        if keep is not None:  # padding rows can't win: -inf, and empty bags become 0 below
            rows = _ew.where(keep.unsqueeze(1) != 0.0, rows, float("-inf"))
        index = bag.unsqueeze(1).expand(bag._shape[0], Dm)
        if rows.requires_grad:
            out = _bag_max_first(rows, index, B, Dm)
        else:
            out = _scatter.scatter_reduce(out, 0, index, rows, "amax", include_self=False)
    else:
        out = _scatter.index_add(out, 0, bag, rows)
    if mode == "sum" and keep is None:
        return out
    ones = keep if keep is not None else _creation.ones((idx._shape[0],), dtype=D.float32)
    cnt = _creation.zeros((B,), dtype=D.float32)
    _scatter.index_add_(cnt, 0, bag, ones)  # entries counted in each bag
    cnt = cnt.unsqueeze(1)
    if mode == "mean":  # (an empty bag's sum is 0: divided by 1)
        return out / cnt.clamp(min=1.0).to(out.dtype)
    if mode == "max":
        return _ew.where(cnt == 0.0, 0.0, out)
    return out


def _bag_max_first(rows, index, B, Dm):
    """Each bag's maximum of each column (B, D), taken from the first entry of the bag that
    holds it, as torch's max_indices: a tie gives its whole gradient to that entry (amax's
    scatter_reduce rule shares it among the tied ones). An empty bag's row is arbitrary: the
    caller zeroes it."""
    from ..autograd import no_grad

    n = rows._shape[0]
    with no_grad():
        init = _creation.zeros((B, Dm), dtype=rows.dtype)
        top = _scatter.scatter_reduce(init, 0, index, rows, "amax", include_self=False)
        hit = _ew.eq(rows, _scatter.gather(top, 0, index))  # (n, D): entries at their bag's max
        pos = _creation.arange(n, dtype=D.float32).unsqueeze(1).expand(n, Dm)
        pos = _ew.where(hit, pos, float(n))
        first = _creation.full((B, Dm), float(n), dtype=D.float32)
        first = _scatter.scatter_reduce(first, 0, index, pos, "amin", include_self=True)
        first = first.clamp(max=float(n - 1)).to(D.int32)  # (B, D): the entry chosen
    return _scatter.gather(rows, 0, first)  # recorded: the gradient goes to that entry only


@forwards
def one_hot(tensor, num_classes=-1):
    """(..., num_classes) int tensor with a 1 at each index (num_classes=-1: max + 1)."""
    return _scatter.one_hot(tensor, num_classes)


__all__ = ["embedding", "embedding_bag", "one_hot"]


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _g_embedding(ctx, g):
    """dweight: each output row added into its index's row (index_add); padding_idx's row gets
    nothing; scale_grad_by_freq divides each row's gradient by its index's count in the batch.
    Dense, also for sparse=True (pyrite has no sparse tensors)."""
    from ..ops.creation import ones, zeros

    if not ctx.needs[1]:
        return None, None
    a = list(ctx.args) + [None] * (7 - len(ctx.args))
    kw = ctx.kwargs
    idx = a[0]
    padding_idx = a[2] if len(ctx.args) > 2 else kw.get("padding_idx")
    freq = a[5] if len(ctx.args) > 5 else kw.get("scale_grad_by_freq", False)
    V, Dm = ctx.meta[1][0]
    flat = idx.reshape(-1)
    rows = g.reshape(-1, Dm)
    if freq:
        with _no_grad():
            counts = zeros((V,), dtype=g.dtype).index_add(
                0, flat, ones((flat.numel(),), dtype=g.dtype)
            )
            rows = rows / _scatter.index_select(counts, 0, flat).unsqueeze(1)
    if padding_idx is not None:
        pad = _padding_index(padding_idx, V)
        rows = rows * (flat != pad).unsqueeze(1).to(g.dtype)
    return None, zeros((V, Dm), dtype=g.dtype).index_add_(0, flat, rows)  # (in place: no copy)


_g_embedding.saves = frozenset((0,))


def _no_grad():
    from ..autograd import no_grad

    return no_grad()


GRADS = {"embedding": _g_embedding}
