"""Synchronous checks on a tensor's values, for the errors PyTorch's CPU raises at the call:
`any_where([(t, cond), ...])` runs one flag kernel per tensor (kernels/flags.py) and reads back
all the flags at once, one round trip (the pending batch is submitted and waited on), so an op
that needs one costs a sync, not a transfer of the data.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.flags import any_kernel
from .core import coalesce, upload


def any_where(checks) -> list:
    """`checks`: [(tensor, cond)], `cond` a WGSL bool expression in `v` (the element in its
    compute type). Returns [bool]: whether any element of each tensor satisfies its cond."""
    live = [(i, t, c) for i, (t, c) in enumerate(checks) if t.numel()]
    result = [False] * len(checks)
    if not live:
        return result
    dev = backend.current()
    flags = upload(np.zeros(len(live), np.int32), D.int32)  # zeroed words, set by atomicOr
    for slot, (_, t, cond) in enumerate(live):
        cshape, (cst,) = coalesce(t._shape, [t._strides])
        n = t.numel()
        src = any_kernel(len(cshape), t.dtype.wgsl, t.dtype.ctype, cond)
        info = [n, t._offset, slot, *cshape, *cst]
        dev.dispatch(src, (t._storage.buffer, flags._storage.buffer), info, grid_for(n))
    words = np.frombuffer(dev.read(flags._storage.buffer, 0, 4 * len(live)), dtype=np.uint32)
    for slot, (i, _, _) in enumerate(live):
        result[i] = bool(words[slot])
    return result
