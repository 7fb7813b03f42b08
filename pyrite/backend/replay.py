"""Recording what the device does and replaying it: the executable under `pr.compile`.

A `Tape` listens while eager code runs (`Device.record`): every dispatch (its pipeline, buffers,
info words and grid), every buffer-to-buffer copy and every upload, in order, with the buffers they
name. Buffers allocated while it records belong to it (pinned in the pool, backend/pool.py): one
whose tensor dies during the recording goes back to the tape's own free list, so a later
allocation of the recording takes it — the eager pool's reuse, kept inside the graph — and after
the recording none of them returns to the common pool while the graph lives. Buffers that existed
before (parameters, optimizer state, the caller's tensors) are *external*: pinned too, and watched —
if one dies, the graph no longer names what its caller means and it is marked stale.

A `Graph` is a finished tape turned into prebuilt commands: one persistent info buffer holding
every dispatch's info window, bind groups made once against it, the uploads' bytes in one constant
buffer copied into place at their recorded positions, and the list of C handles a replay walks
(Device.replay). A replay records no Python op: per dispatch it costs a set-bind-group and a
dispatch call (plus a set-pipeline when the pipeline changes).

Values that must change between replays (an optimizer's learning rate and step count, a random
kernel's counter) are *dynamic*: the code that made them registers, while the tape records, a
region (a callable rerun before each replay with the device in refresh mode: its dispatches only
give their new info words to the recorded ones, in order) or a per-dispatch callable returning
fresh info words.
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import PyriteError
from .device import INFO_WINDOW_WORDS
from .pool import Storage

# The public functions that turn host data into a tensor: inside a recording their values would
# be frozen at the first call, so they end the graph (compile/__init__.py says what happens then).
HOST_DATA = {"tensor", "as_tensor", "from_numpy", "asarray", "new_tensor", "Tensor.__init__"}


class GraphBreak(PyriteError, RuntimeError):
    """A compiled function did something a replay cannot repeat (fullgraph=True)."""


# Frames that only pass a call on (autograd's and Module's wrappers): not named as the op.
_WRAPPERS = {"_call_impl", "wrapper", "guard", "op", "inner", "decorate_context", "__call__"}


def _site():
    """(inner, outer, "file:line", data, called): the innermost pyrite function below the
    device, the op to name (the innermost Module forward on the way, else `called`), the
    caller's line, whether a pyrite.utils.data frame is on the way, and the outermost pyrite
    function that is not a wrapper (the one the caller called)."""
    f = sys._getframe(2)
    inner = outer = forward = None
    data = False
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if not mod.startswith("pyrite"):
            break
        if mod.startswith("pyrite.utils.data"):
            data = True
        code = f.f_code
        if code.co_name not in _WRAPPERS and not mod.startswith(
            ("pyrite.backend", "pyrite.compile", "pyrite.profiler")
        ):
            name = getattr(code, "co_qualname", code.co_name)
            if inner is None:
                inner = name
            if forward is None and code.co_name == "forward":
                forward = name
            outer = name
        f = f.f_back
    where = f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"
    return inner or "?", forward or outer or "?", where, data, outer


def _view(t):
    """A tensor's view without its Storage (which must be free to die): buffer, shape, strides,
    offset, dtype."""
    return (t._storage.buffer, t._shape, t._strides, t._offset, t.dtype)


class Op:
    """One recorded command: kind "d" (dispatch), "c" (copy) or "u" (upload)."""

    __slots__ = ("args", "gemm", "inner", "kind", "map", "outer", "row", "where")

    def __init__(self, kind, args, site, map=None, gemm=None, row=None):
        self.kind = kind
        self.args = args
        self.inner, self.outer, self.where = site[:3]
        # an elementwise map's, a fast GEMM's or a row gradient kernel's description
        # (Tape.map_next, gemm_next, row_next), for compile/fusion.py
        self.map = map
        self.gemm = gemm
        self.row = row


class Tape:
    def __init__(self, device, fullgraph=False):
        self.device = device
        self.pool = device.pool
        self.fullgraph = fullgraph
        self.ops: list[Op] = []
        self.owned: dict[int, object] = {}  # buffers allocated while recording
        self.external: dict[int, object] = {}  # buffers named by an op, made before
        self.free: dict[int, list] = {}  # owned buffers whose tensors died: reused by later ones
        self.breaks: list[tuple[str, str]] = []  # (what, "file:line") a replay cannot repeat
        self.regions: list[tuple] = []  # (callable, [dispatch numbers]) rerun before a replay
        self.dynamic: dict[int, object] = {}  # dispatch number -> callable giving info words
        # dispatch number -> (ids of the parameters it updates, scalar words, info words): an
        # optimizer's fused update, whose trailing info words are its step scalars
        self.scalar_slots: dict[int, tuple] = {}
        self.allocated_bytes = 0  # every allocation's size class, as if nothing were reused
        # (op position, id(buffer)) of every allocation: a buffer holds a new tensor from there
        self.allocs: list[tuple[int, int]] = []
        self.recording = True
        self.stale = False
        self.dispatches = 0
        self.folded = 0  # commands constant folding took out (compile/fusion.py)
        self.common = 0  # common subexpressions taken out (compile/fusion.py)
        # buffers another tape owns that this one reads (a compiled module's backward reads
        # its forward's saved tensors): neither pinned nor watched here, the owner holds them
        self.borrowed: dict[int, object] = {}
        self._region = None
        self._next_dynamic = None
        self._next_scalars = None
        self._next_map = None
        self._next_gemm = None
        self._next_row = None

    # ---- while recording (called by the pool and the device, their lock held) ------------
    def allocate(self, pool, nbytes, size, upload):
        self.allocated_bytes += size
        bucket = None if upload else self.free.get(size)
        if bucket:  # (an upload is written by the queue before pending work: fresh buffers only)
            buffer = bucket.pop()
            self.allocs.append((len(self.ops), id(buffer)))
            pool.pins[id(buffer)].dead = False
            pool.live_bytes += size
            pool.peak_live_bytes = max(pool.peak_live_bytes, pool.live_bytes)
            return Storage(buffer, nbytes, pool)
        pool.tape = None
        try:
            storage = pool._allocate(nbytes, upload)
        finally:
            pool.tape = self
        self.adopt(storage.buffer)
        self.allocs.append((len(self.ops), id(storage.buffer)))
        return storage

    def adopt(self, buffer):
        """Make `buffer` the graph's own (the slots compile/ copies inputs into)."""
        self.owned[id(buffer)] = buffer
        self.pool.pin(buffer, self)

    def borrow(self, other):
        """Read `other`'s owned buffers as its (the owner keeps them; it must outlive this)."""
        self.borrowed = other.owned

    def on_release(self, buffer):
        if id(buffer) in self.owned:
            if self.recording:
                self.free.setdefault(buffer.size, []).append(buffer)
            return
        if self.recording:
            # a tensor the recording read, replaced while it ran (h = f(h) kept across calls):
            # a replay would read the dead buffer again instead of the new tensor
            self._break("replaced a tensor it had read with a new one (state kept by rebinding)")
        else:
            self.stale = True

    def _name(self, buffers):
        for b in buffers:
            i = id(b)
            if i not in self.owned and i not in self.external and i not in self.borrowed:
                self.external[i] = b
                self.pool.pin(b, self)

    def dispatch(self, pipeline, modes, buffers, info, grid):
        self._name(buffers)
        words = np.asarray(info, dtype=np.int32).copy() if len(info) else None
        op = Op(
            "d",
            (pipeline, modes, tuple(buffers), words, tuple(grid)),
            _site(),
            self._next_map,
            self._next_gemm,
            self._next_row,
        )
        self._next_map = self._next_gemm = self._next_row = None
        self.ops.append(op)
        if self._region is not None:
            self._region.append(self.dispatches)
        if self._next_dynamic is not None:
            self.dynamic[self.dispatches] = self._next_dynamic
            self._next_dynamic = None
        if self._next_scalars is not None:
            self.scalar_slots[self.dispatches] = self._next_scalars
            self._next_scalars = None
        self.dispatches += 1

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        self._name((src, dst))
        self.ops.append(Op("c", (src, src_offset, dst, dst_offset, nbytes), _site()))

    def upload(self, buffer, byte_offset, data):
        site = _site()
        _, outer, _, from_data, called = site
        if from_data or called in HOST_DATA:
            what = "a DataLoader batch" if from_data else f"{outer}(...) of host data"
            self._break(
                f"makes {what} inside the compiled function (its values would be frozen)", site
            )
        self._name((buffer,))
        self.ops.append(Op("u", (buffer, byte_offset, bytes(data)), site))

    def read(self):
        self._break(
            "reads a value back to the host (item(), numpy(), print, a data-dependent shape)"
        )

    def _break(self, what, site=None):
        _, outer, where, _, _ = site or _site()
        self.breaks.append((f"{outer}: {what}", where))
        if self.fullgraph:
            raise GraphBreak(
                f"pyrite: compile(fullgraph=True): the function {what} at {where} ({outer}); "
                "a replay cannot repeat that. Move it out of the compiled function, or compile "
                "without fullgraph=True to run this function eagerly"
            )

    # ---- what ops and optimizers register --------------------------------------------------
    def region(self, rerun):
        """Context: the dispatches recorded inside get their info words from `rerun()`, called
        before every replay with the device in refresh mode (an optimizer's step)."""
        return _Region(self, rerun)

    def dynamic_next(self, words):
        """The next dispatch's info words come from `words()` at every replay (random kernels)."""
        self._next_dynamic = words

    def map_next(self, expr, inputs, in_ctypes, out, out_ctype, scalars, s_ctypes):
        """The next dispatch is ops/core.run_map's `out = expr(inputs, scalars)`."""
        self._next_map = (
            expr,
            tuple(_view(t) for t in inputs),
            tuple(in_ctypes),
            _view(out),
            out_ctype,
            tuple(scalars),
            tuple(s_ctypes),
        )

    def gemm_next(self, spec, out):
        """The next dispatch is ops/matmul's gemm_fast(*spec) writing `out` (no fused map yet)."""
        self._next_gemm = (spec, _view(out), None)

    def row_next(self, spec, out):
        """The next dispatch is ops/rowops' row_grad_kernel(*spec) writing `out` (whole rows of
        n, contiguous from offset 0) first, then its row statistics."""
        self._next_row = (spec, _view(out))

    def scalar_tail(self, params, n_scalars, n_info):
        """The next dispatch is an optimizer's fused update of `params` (optim/_fused.py)."""
        self._next_scalars = (tuple(id(p) for p in params), n_scalars, n_info)

    def refresh(self, src, info):  # (the device asks every dispatch: not refreshing)
        return False

    def writes(self) -> set:
        """ids of the buffers some command writes."""
        out = set()
        for op in self.ops:
            if op.kind == "d":
                _, modes, buffers, _, _ = op.args
                out.update(id(b) for b, m in zip(buffers, modes) if m == "w")
            elif op.kind == "c":
                out.add(id(op.args[2]))
            else:
                out.add(id(op.args[0]))
        return out

    # ---- after ----------------------------------------------------------------------------
    def finish(self):
        self.recording = False
        self.free.clear()

    def close(self):
        """Let go of every buffer: owned ones whose tensors died return to the pool."""
        pool = self.pool
        for b in (*self.owned.values(), *self.external.values()):
            pool.unpin(b, self)
        self.owned, self.external = {}, {}
        self.ops = []


class _Region:
    def __init__(self, tape, rerun):
        self.tape, self.rerun, self.outer = tape, rerun, None

    def __enter__(self):
        t = self.tape
        if t._region is None:  # (an inner region belongs to the outer one)
            t._region = []
            self.outer = True
        return self

    def __exit__(self, *exc):
        t = self.tape
        if self.outer:
            t.regions.append((self.rerun, t._region))
            t._region = None
        return False


class Refresher:
    """The device's listener while a region reruns. Each dispatch gives its info words to the
    recorded dispatch at the same place in the region; nothing is encoded, copied or uploaded.
    Where the region is an optimizer's step whose updates were noted (Tape.scalar_slots), the
    fused updates skip their Python and hand over only their step scalars (`scalars`), written
    into the trailing words of the recorded updates at the end (`done`)."""

    def __init__(self, graph, numbers):
        self.graph, self.numbers, self.i = graph, numbers, 0
        self.recording = False
        slots = graph.tape.scalar_slots
        self.fast = [k for k in numbers if k in slots]
        self.values: dict[int, tuple] = {}

    def scalars(self, written, scalars):
        p = next(iter(written.values()))
        self.values[id(p)] = tuple(scalars.values())

    def refresh(self, src, info):
        if self.fast:  # (staging copies of the update: their info words do not change)
            return True
        g = self.graph
        if self.i >= len(self.numbers):
            _retrace("made more dispatches")
        k = self.numbers[self.i]
        self.i += 1
        if g.device._pipelines.get(src.wgsl, (None,))[0] is not g.pipelines[k]:
            _retrace("chose a different kernel")
        g.set_info(k, info)
        return True

    def done(self):
        g = self.graph
        if not self.fast:
            if self.i != len(self.numbers):
                _retrace("made fewer dispatches")
            return
        slots = g.tape.scalar_slots
        for k in self.fast:
            params, n, n_info = slots[k]
            vals = {self.values.get(i) for i in params}
            if len(vals) != 1 or None in vals:
                _retrace("updated different parameters, or with different scalars")
            words = np.array(vals.pop(), dtype=np.float32).view(np.int32)
            g.set_info(k, words, n_info - n)


def _retrace(what):
    raise RuntimeError(
        f"pyrite: a compiled function's optimizer step {what} than when it was traced; "
        "trace it again (step.reset())"
    )


class Graph:
    """A finished tape as prebuilt commands (see the module docstring)."""

    def __init__(self, device, tape: Tape):
        self.device = device
        self.tape = tape
        ops = tape.ops
        n = tape.dispatches
        self.info = np.zeros(max(n, 1) * INFO_WINDOW_WORDS, dtype=np.int32)
        w = device.wgpu.BufferUsage
        self.info_gpu = device.device.create_buffer(
            size=self.info.nbytes, usage=w.STORAGE | w.COPY_DST
        )
        consts = bytearray()
        for op in ops:
            if op.kind == "u":
                consts += op.args[2]
                consts += b"\0" * (-len(consts) % 4)
        self.consts = None
        if consts:
            self.consts = device.device.create_buffer(
                size=len(consts), usage=w.COPY_SRC | w.COPY_DST
            )
            device.queue.write_buffer(self.consts, 0, bytes(consts))
        self.pipelines = []
        self.commands = []  # ("d", pipeline, bind group, byte offset, grid) | ("c", 5 args)
        k = pos = 0
        for op in ops:
            if op.kind == "d":
                pipeline, modes, buffers, words, grid = op.args
                if words is not None:
                    self.info[k * INFO_WINDOW_WORDS : k * INFO_WINDOW_WORDS + len(words)] = words
                group = device.make_bind_group(modes, buffers, self.info_gpu)
                self.pipelines.append(pipeline)
                handles = (pipeline._internal, group._internal) if device._c else (None, None)
                self.commands.append(
                    ("d", pipeline, group, k * INFO_WINDOW_WORDS * 4, grid, *handles)
                )
                k += 1
            elif op.kind == "c":
                self.commands.append(("c", *op.args))
            else:
                buffer, byte_offset, data = op.args
                size = (len(data) + 3) & ~3
                if size:
                    self.commands.append(("c", self.consts, pos, buffer, byte_offset, size))
                pos += size
        self.dirty = [0, n]  # info windows to write before the next replay
        self.kernels = n

    def set_info(self, k, words, start=0):
        base = k * INFO_WINDOW_WORDS + start
        self.info[base : base + len(words)] = words
        d = self.dirty
        d[0], d[1] = min(d[0], k), max(d[1], k + 1)

    def refresh(self):
        """Rerun the regions and dynamic words (before a replay)."""
        dev, tape = self.device, self.tape
        for rerun, numbers in tape.regions:
            r = Refresher(self, numbers)
            saved = dev._tape
            dev._tape = r
            try:
                rerun()
            finally:
                dev._tape = saved
            r.done()
        for k, words in tape.dynamic.items():
            self.set_info(k, words())

    def close(self):
        self.tape.close()
        self.commands = []
        for b in (self.info_gpu, self.consts):
            if b is not None:
                b.destroy()
        self.info_gpu = self.consts = None
