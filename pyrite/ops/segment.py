"""torch.segment_reduce: sums, means, maxima, minima or products of consecutive segments of
`data` along `axis`, the segments given by their `lengths` or `offsets` (one row of them per
index of the dims before `axis`). Composed of scatter_reduce (so its gradient is
scatter_reduce's, which is torch's here: ties of a max share the gradient, a product's zeros
are handled); the segment bounds are read back once to build the index.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..tensor import Tensor

_REDUCE = {"sum": "sum", "mean": "sum", "max": "amax", "amax": "amax", "min": "amin",
           "amin": "amin", "prod": "prod"}  # fmt: skip
# (an empty segment's value when initial is None, as torch's)
_EMPTY = {"sum": 0.0, "mean": float("nan"), "amax": float("-inf"), "amin": float("inf"),
          "prod": 1.0}  # fmt: skip


def _bounds(data, axis, lengths, offsets, unsafe):
    """(starts, lengths) as int64 arrays of shape (*lead, S), read back and checked."""
    given = lengths if lengths is not None else offsets
    name = "lengths" if lengths is not None else "offsets"
    if not isinstance(given, Tensor):
        given = np.asarray(given)
    kind = given.dtype.kind
    if kind not in "iu":
        raise TypeError(f"pyrite: segment_reduce(): {name} must be an integer tensor")
    if given.ndim > data.ndim:
        raise RuntimeError(
            f"pyrite: segment_reduce(): Expected data.dim() >= {name}.dim(), got {data.ndim} "
            f"and {given.ndim}"
        )
    if given.ndim - 1 != axis:
        raise RuntimeError(
            f"pyrite: segment_reduce(): Expected axis to be the last dimension of {name} but "
            f"got {axis}."
        )
    host = (given.numpy() if isinstance(given, Tensor) else given).astype(np.int64)
    if tuple(host.shape[:-1]) != tuple(data.shape[:axis]):
        raise ShapeError(
            f"pyrite: segment_reduce(): {name} of shape {tuple(host.shape)} does not match "
            f"data's leading dims {tuple(data.shape[:axis])}"
        )
    if lengths is not None:
        lens = host
        starts = np.cumsum(lens, axis=-1) - lens
    else:
        if host.shape[-1] < 1:
            raise RuntimeError("pyrite: segment_reduce(): offsets must have at least one entry")
        starts, lens = host[..., :-1], np.diff(host, axis=-1)
    if (lens < 0).any():
        raise RuntimeError(
            "pyrite: segment_reduce(): lengths contains negative value!"
            if lengths is not None
            else "pyrite: segment_reduce(): Expected segment_length >= 0 (offsets decreasing)"
        )
    if not unsafe:
        total = starts[..., -1:] + lens[..., -1:] if lens.shape[-1] else np.zeros(1, np.int64)
        if lengths is not None and (total != data.shape[axis]).any():
            raise RuntimeError(
                f"pyrite: segment_reduce(): Expected all rows of lengths along axis to sum to "
                f"data.size(lengths.dim()-1) (= {data.shape[axis]}) when !unsafe."
            )
        if offsets is not None and ((starts < 0).any() or (total > data.shape[axis]).any()):
            raise RuntimeError(
                f"pyrite: segment_reduce(): offsets must lie in [0, {data.shape[axis]}] "
                "when !unsafe"
            )
    return starts, lens


def segment_reduce(
    data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None
):
    """torch.segment_reduce: (*lead, S, *rest) from data (*lead, L, *rest), segment s of row
    `lead` covering data's positions [start, start + length) along `axis`. `reduce` is "sum",
    "mean", "max", "min" or "prod"; `initial` joins every segment's reduction (a mean divides
    by the count alone, as torch's), else an empty segment is 0, nan, -inf, inf or 1.
    `lengths` wins over `offsets` when both are given; `unsafe` skips the check that the
    segments cover `axis` exactly (positions after the last segment are then left out)."""
    from .core import upload
    from .creation import full
    from .elementwise import where
    from .scatter import scatter_reduce

    if not isinstance(data, Tensor):
        raise TypeError(f"pyrite: segment_reduce(): data must be a Tensor, got {type(data)}")
    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise RuntimeError(
            f"pyrite: reduce argument must be either sum, prod, mean, amax or amin, got {reduce}"
        )
    if indices is not None:
        raise NotImplementedError("pyrite: segment_reduce(): indices is not supported (torch's)")
    if lengths is None and offsets is None:
        raise RuntimeError("pyrite: segment_reduce(): Either lengths or offsets must be defined.")
    if not data.dtype.is_floating_point:
        raise NotImplementedError(
            f'pyrite: "segment_reduce" not implemented for {data.dtype!r} (floating types only, '
            "as torch's CPU kernel)"
        )
    if data.ndim == 0:
        raise IndexError("pyrite: segment_reduce(): data must have at least one dimension")
    axis = data._dim(axis)
    starts, lens = _bounds(data, axis, lengths, offsets, unsafe)
    lead, L, rest = tuple(data.shape[:axis]), data.shape[axis], tuple(data.shape[axis + 1 :])
    S = lens.shape[-1]
    # seg[*lead, j]: the segment of position j; S (a spare row, cut off) where none covers it
    seg = np.full((int(np.prod(lead, dtype=np.int64)), L), S, np.int64)
    flat_starts, flat_lens = starts.reshape(-1, S), lens.reshape(-1, S)
    for r in range(seg.shape[0]):  # (segments are consecutive: one run from the first start)
        a = int(flat_starts[r, 0]) if S else 0
        run = np.repeat(np.arange(S), flat_lens[r])[: max(L - a, 0)]
        seg[r, a : a + run.size] = run
    seg = seg.reshape(lead + (L,))
    op = _REDUCE[reduce]
    index = upload(seg.astype(np.int32), D.int32)
    index = index.reshape(lead + (L,) + (1,) * len(rest)).expand(data.shape)
    base_value = _EMPTY[op] if initial is None else initial  # (a mean's: the sum's)
    base = full(lead + (S + 1,) + rest, float(base_value), dtype=data.dtype)
    out = scatter_reduce(base, axis, index, data, op, include_self=True)
    out = out.narrow(axis, 0, S)
    if reduce == "mean":
        count = upload(lens.astype(np.float32), D.float32).to(data.dtype)
        count = count.reshape(lead + (S,) + (1,) * len(rest))
        empty = float("nan") if initial is None else float(initial)
        out = where(count > 0, out / count.clamp_min(1), empty)
    return out


__all__ = ["segment_reduce"]
