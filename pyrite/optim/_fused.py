"""Dispatching the fused update (kernels/optim.py): one WGSL dispatch reads a parameter, its
gradient and its state, and writes the parameter and the state in place. Inside `batched()` (every
Optimizer.step) the parameters with the same rule, storage types and step scalars share one dispatch, up
to what the device binds at once (kernels/optim.update_many_kernel: 3 Adam parameters a dispatch
on Dawn's 16 storage buffers, 7 on lavapipe's 32, 16 on wgpu-native's H200).

Nothing is read back: the scalars of a step are computed on the host from Python numbers and go
into the dispatch's info words. Operands the kernel cannot address directly (a non-contiguous
view, packed bfloat16, a gradient sharing a buffer with a written operand) are staged through a
contiguous float32 copy, and the written ones copied back afterwards: extra dispatches, the
same numbers.
"""

from __future__ import annotations

import contextlib
import math
import threading

from .. import autograd, backend
from .. import dtypes as D
from ..kernels.common import INFO_ZERO_WORD, grid_for
from ..kernels.optim import TOKENS, update_kernel, update_many_kernel
from ..ops.core import empty, f32_bits, run_map
from ..tensor import Tensor


def _direct(t: Tensor) -> bool:
    return t.dtype.storage in TOKENS and t.is_contiguous()


def _staged(t: Tensor) -> Tensor:
    """A contiguous float32 copy of `t` (one strided-map dispatch)."""
    out = empty(t.shape, D.float32)
    return run_map("x0", (t,), ("f32",), out, "f32")


MAX_BATCH = 16  # parameters a dispatch at most (the rule's text is repeated once a parameter)
_local = threading.local()


class _Batch:
    """Parameters queued for update_many_kernel dispatches, one list a key (rule, operand names
    and storage tokens, step scalars); no storage is bound twice among everything queued
    (WebGPU refuses a buffer bound both read-only and read-write, and writable aliases)."""

    def __init__(self):
        self.lists = {}
        self.storages = set()
        self.caps = {}  # key -> parameters a dispatch (the device's limits, once a key)

    def add(self, rule, written, read, scalars):
        tensors = [*written.values(), *read.values()]
        ids = {id(t._storage) for t in tensors}
        if ids & self.storages:
            self.flush()
        operands = tuple(
            [(n, t.dtype.storage, True) for n, t in written.items()]
            + [(n, t.dtype.storage, False) for n, t in read.items()]
        )
        key = (rule, operands, tuple(scalars), tuple(scalars.values()))
        items = self.lists.setdefault(key, [])
        cap = self.caps.get(key)
        if cap is None:
            cap = self.caps[key] = _capacity(len(operands), len(scalars))
        if len(items) >= cap:
            self._dispatch(key, items)
            items.clear()
        items.append((tensors, written))
        self.storages |= ids

    def flush(self):
        lists, self.lists, self.storages = self.lists, {}, set()
        for key, items in lists.items():
            if items:
                self._dispatch(key, items)

    @staticmethod
    def _dispatch(key, items):
        rule, operands, names, values = key
        info = [0]
        bufs = []
        total = 0
        for tensors, _ in items:
            total += math.prod(tensors[0].shape)
            info.append(total)
            info += [t._offset for t in tensors]
            bufs += [t._storage.buffer for t in tensors]
        info[0] = total
        info += [f32_bits(x) for x in values]
        if len(items) == 1:
            src = update_kernel(operands, rule, names)
            info = [total, *info[2:]]
        else:
            src = update_many_kernel(operands, rule, names, len(items))
        if total:
            sig = _signature(rule, operands, names)
            _note_scalars([tensors[0] for tensors, _ in items], len(values), len(info), sig)
            backend.current().dispatch(src, bufs, info, grid_for(total))
        for _, written in items:
            for t in written.values():
                autograd.mark_written(t)


def _signature(rule, operands, names) -> tuple:
    """What an update's kernel is, beside its scalars' values: the rule, the operands' names
    (written, then read) and the scalars' names (a replay refreshing the scalars of another
    rule would run the traced one: backend/replay.Refresher checks)."""
    written = tuple(op[0] for op in operands if op[2])
    read = tuple(op[0] for op in operands if not op[2])
    return (rule, written, read, tuple(names))


def _note_scalars(params, n_scalars, n_info, sig=None):
    """Inside a compiled function's trace: the next dispatch's last `n_scalars` info words are
    the step scalars of `params` (the parameter tensors it updates), which a replay refreshes
    (backend/replay.Refresher) without running the update's Python again."""
    tape = backend.current()._tape
    if tape is not None and tape.recording:
        tape.scalar_tail(params, n_scalars, n_info, sig)


def _capacity(n_operands, n_scalars):
    """Parameters a dispatch: the device's storage bindings (one is the info window), the
    info words, and MAX_BATCH."""
    limit = backend.current().limits.get("max-storage-buffers-per-shader-stage", 8)
    by_info = (INFO_ZERO_WORD - 1 - n_scalars) // (1 + n_operands)
    return max(1, min(MAX_BATCH, (limit - 1) // n_operands, by_info))


@contextlib.contextmanager
def batched():
    """Within: `update` queues parameters that can share a dispatch; dispatched by the end."""
    outer = getattr(_local, "batch", None)
    batch = _local.batch = _Batch()
    try:
        yield
    finally:
        _local.batch = outer
        batch.flush()


def update(rule: str, written: dict, read: dict, scalars: dict) -> None:
    """Run `rule` (kernels/optim.update_kernel) over every element of the operands.

    `written`: {name: tensor} updated in place (the parameter first, then its state tensors);
    `read`: {name: tensor} only read (the gradient); `scalars`: {name: float}. Every operand
    has the parameter's shape."""
    tape = backend.current()._tape
    if tape is not None and tape.skips_updates:  # a compiled step's refresh: only the scalars
        ops = [(n, None, True) for n in written] + [(n, None, False) for n in read]
        tape.scalars(written, scalars, _signature(rule, ops, tuple(scalars)))
        for t in written.values():
            autograd.mark_written(t)
        return
    batch = getattr(_local, "batch", None)
    if batch is not None:
        ws = {id(t._storage) for t in written.values()}
        if (
            len(ws) == len(written)
            and all(_direct(t) for t in written.values())
            and all(_direct(t) and id(t._storage) not in ws for t in read.values())
        ):
            batch.add(rule, written, read, scalars)
            return
        batch.flush()  # this one is staged: keep the order of the updates
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
        sig = _signature(rule, operands, tuple(scalars))
        _note_scalars([next(iter(written.values()))], len(scalars), len(info), sig)
        bufs = [t._storage.buffer for t in tensors]
        backend.current().dispatch(src, bufs, info, grid_for(n))
        for s, t in copies_back:
            run_map("x0", (s,), ("f32",), t, t.dtype.ctype)
    for t in written.values():
        autograd.mark_written(t)
