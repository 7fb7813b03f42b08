"""Dispatching the fused update (kernels/optim.py): one WGSL dispatch a parameter that reads the
parameter, its gradient and its state, and writes the parameter and the state in place.

Nothing is read back: the scalars of a step are computed on the host from Python numbers and go
into the dispatch's info words. Operands the kernel cannot address directly (a non-contiguous
view, packed bfloat16, a gradient sharing a buffer with a written operand) are staged through a
contiguous float32 copy, and the written ones copied back afterwards: extra dispatches, the
same numbers.
"""

from __future__ import annotations

import math

from .. import autograd, backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.optim import TOKENS, update_kernel
from ..ops.core import empty, f32_bits, run_map
from ..tensor import Tensor


def _direct(t: Tensor) -> bool:
    return t.dtype.storage in TOKENS and t.is_contiguous()


def _staged(t: Tensor) -> Tensor:
    """A contiguous float32 copy of `t` (one strided-map dispatch)."""
    out = empty(t.shape, D.float32)
    return run_map("x0", (t,), ("f32",), out, "f32")


def update(rule: str, written: dict, read: dict, scalars: dict) -> None:
    """Run `rule` (kernels/optim.update_kernel) over every element of the operands.

    `written`: {name: tensor} updated in place (the parameter first, then its state tensors);
    `read`: {name: tensor} only read (the gradient); `scalars`: {name: float}. Every operand
    has the parameter's shape."""
    operands = []
    tensors = []
    copies_back = []
    stores = set()
    for name, t in written.items():
        if not _direct(t):
            s = _staged(t)
            copies_back.append((s, t))
            t = s
        stores.add(id(t._storage))
        operands.append((name, t.dtype.storage, True))
        tensors.append(t)
    for name, t in read.items():
        # WebGPU forbids one buffer bound both read-only and read-write in a dispatch
        if not _direct(t) or id(t._storage) in stores:
            t = _staged(t)
        operands.append((name, t.dtype.storage, False))
        tensors.append(t)
    n = math.prod(tensors[0].shape)
    if n:
        src = update_kernel(tuple(operands), rule, tuple(scalars))
        info = [n, *(t._offset for t in tensors), *(f32_bits(x) for x in scalars.values())]
        bufs = [t._storage.buffer for t in tensors]
        backend.current().dispatch(src, bufs, info, grid_for(n))
        for s, t in copies_back:
            run_map("x0", (s,), ("f32",), t, t.dtype.ctype)
    mark_written = getattr(autograd, "mark_written", None)  # (the version counter, once it lands)
    if mark_written is not None:
        for t in written.values():
            mark_written(t)
