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
import weakref

import numpy as np

from ..errors import PyriteError
from .device import INFO_WINDOW_WORDS
from .pool import Storage

# A segmented tape (one a Rerun may follow) also cuts itself every CUT_EVERY dispatches, so a
# rerun submits the commands matched so far while its Python goes on: the GPU runs the first
# part of a step while the host matches the rest (else the whole recording would wait for the
# Python to reach its first read). A cut keeps the tensors alive there, as a read does, so
# fusion does not cross it; a recording without graph breaks drops its cuts (strip_cuts).
CUT_EVERY = 48

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

    __slots__ = ("args", "gemm", "host", "inner", "kind", "map", "outer", "row", "where")

    def __init__(self, kind, args, site, map=None, gemm=None, row=None):
        self.kind = kind  # (and "r": a barrier, args (ids, "read" | "cut"): Tape._barrier)
        self.args = args
        self.inner, self.outer, self.where = site[:3] if site is not None else ("cut", "", "")
        # an elementwise map's, a fast GEMM's or a row gradient kernel's description
        # (Tape.map_next, gemm_next, row_next), for compile/fusion.py
        self.map = map
        self.gemm = gemm
        self.row = row
        self.host = False  # an upload of host data (a segmented tape's: refreshed every call)


class Tape:
    """What the device did while a compiled function ran (the module docstring). `segmented`:
    a read back to the host and an upload of host data are graph breaks the recording keeps
    (a "r" op, a host upload) instead of reasons to run eagerly (compile/__init__.py replays
    such a recording by running the function again: `Rerun`)."""

    # the device asks an optimizer's update (optim/_fused.update) whether to skip its kernel
    skips_updates = False

    def __init__(self, device, fullgraph=False, segmented=False):
        self.device = device
        self.pool = device.pool
        self.fullgraph = fullgraph
        self.segmented = segmented and not fullgraph
        self.soft: list[tuple[str, str]] = []  # graph breaks kept: (what, "file:line")
        self._since_cut = 0
        self.protect: set[int] = set()  # dispatch numbers fusion must leave as they are
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
        # integer value ranges while it records (ops/ranges.py): id(buffer) -> (the pool's bounds
        # entry, its expression), and the ranges index checks that passed needed; opaque here
        self.ranges: dict[int, tuple] = {}
        self.range_needs: dict = {}
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
            storage = pool.allocate(nbytes, upload)
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
        if self.segmented:
            self._since_cut += 1
            if self._since_cut >= CUT_EVERY:
                self._barrier("cut")

    def _barrier(self, why, reads=()):
        """A "r" op here: the buffers read and every tensor of the recording alive here (the
        function's Python may read any of them after it) count as read by it, so no pass fuses
        one away or moves a command across it; a Rerun submits the commands before it there."""
        pins = self.pool.pins
        ids = {i for i in self.owned if not pins[i].dead}
        ids.update(id(r[0]) for r in reads)
        self.ops.append(Op("r", (frozenset(ids), why), None if why == "cut" else _site()))
        self._since_cut = 0

    def strip_cuts(self):
        """Drop the "cut" barriers (a recording that replays whole does not need them)."""
        before, n, ops = [], 0, []  # (cuts before each position: the allocation log's shift)
        for op in self.ops:
            before.append(n)
            if op.kind == "r" and op.args[1] == "cut":
                n += 1
            else:
                ops.append(op)
        before.append(n)
        self.ops = ops
        self.allocs = [(pos - before[pos], i) for pos, i in self.allocs]

    def copy(self, src, src_offset, dst, dst_offset, nbytes):
        self._name((src, dst))
        self.ops.append(Op("c", (src, src_offset, dst, dst_offset, nbytes), _site()))

    def upload(self, buffer, byte_offset, data):
        site = _site()
        _, outer, _, from_data, called = site
        what = None
        if from_data or called in HOST_DATA:
            what = "a DataLoader batch" if from_data else f"{outer}(...) of host data"
            if not self.segmented:
                self._break(
                    f"makes {what} inside the compiled function (its values would be frozen)",
                    site,
                )
        self._name((buffer,))
        op = Op("u", (buffer, byte_offset, bytes(data)), site)
        if from_data or called in HOST_DATA:
            op.host = True
            self.soft.append((f"{outer}: makes {what}", site[2]))
        self.ops.append(op)

    def read(self, reads=()):
        what = "reads a value back to the host (item(), numpy(), print, a data-dependent shape)"
        if not self.segmented:
            self._break(what)
            return
        _, outer, where, _, _ = _site()
        self._barrier("read", reads)  # (a graph break kept)
        self.soft.append((f"{outer}: {what}", where))

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

    def scalar_tail(self, params, n_scalars, n_info, sig=None):
        """The next dispatch is an optimizer's fused update of `params` (optim/_fused.py);
        `sig`: its rule and operand names (a refresh with another rule cannot reuse it)."""
        self._next_scalars = (tuple(id(p) for p in params), n_scalars, n_info, sig)

    def refresh(self, src, buffers, info, grid):  # (the device asks every dispatch: recording)
        return False

    def snapshot(self) -> list:
        """The commands as recorded, before any pass changes them (a `Rerun` follows these):
        (kind, args, info words as a tuple, the Op, its dispatch number or None)."""
        out, k = [], 0
        for op in self.ops:
            words = ()
            num = None
            if op.kind == "d":
                w = op.args[3]
                words = () if w is None else tuple(w.tolist())
                num = k
                k += 1
            out.append((op.kind, op.args, words, op, num))
        return out

    def writes(self) -> set:
        """ids of the buffers some command writes."""
        out = set()
        for op in self.ops:
            if op.kind == "d":
                _, modes, buffers, _, _ = op.args
                out.update(id(b) for b, m in zip(buffers, modes) if m == "w")
            elif op.kind == "c":
                out.add(id(op.args[2]))
            elif op.kind == "u":
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

    recording = False
    skips_updates = True

    def __init__(self, graph, numbers):
        self.graph, self.numbers, self.i = graph, numbers, 0
        slots = graph.tape.scalar_slots
        self.fast = [k for k in numbers if k in slots]
        self.values: dict[int, tuple] = {}

    def scalars(self, written, scalars, sig=None):
        p = next(iter(written.values()))
        self.values[id(p)] = (sig, tuple(scalars.values()))

    def refresh_copy(self, *args):  # (the recorded copy stands)
        return True

    def refresh_upload(self, buffer, byte_offset, data):  # (the recorded upload stands)
        return True

    def refresh(self, src, buffers, info, grid):
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
            params, n, n_info, sig = slots[k]
            vals = {self.values.get(i) for i in params}
            if len(vals) != 1 or None in vals:
                _retrace("updated different parameters, or with different scalars")
            got, values = vals.pop()
            if sig is not None and got != sig:
                _retrace("ran another update rule (a hyperparameter changed it)")
            words = np.array(values, dtype=np.float32).view(np.int32)
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
        # graph breaks: the command index where each segment ends ("r" ops), then the end
        self.cuts = [0]
        self.k_of: dict[int, int] = {}  # id(Op) -> its dispatch number
        self.upload_at: dict[int, int] = {}  # id(Op) of an upload -> its bytes' place in consts
        k = pos = 0
        for op in ops:
            if op.kind == "r":
                self.cuts.append(len(self.commands))
            elif op.kind == "d":
                self.k_of[id(op)] = k
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
                self.upload_at[id(op)] = pos
                if size:
                    self.commands.append(("c", self.consts, pos, buffer, byte_offset, size))
                pos += size
        self.cuts.append(len(self.commands))
        self.dirty = [0, n]  # info windows to write before the next replay
        self.kernels = n
        self.raw = None  # Tape.snapshot() of a recording a Rerun follows (compile/ sets it)
        self.moved: dict[int, tuple] = {}  # dispatch number as traced -> info words a Rerun set

    def set_info(self, k, words, start=0):
        base = k * INFO_WINDOW_WORDS + start
        self.info[base : base + len(words)] = words
        d = self.dirty
        d[0], d[1] = min(d[0], k), max(d[1], k + 1)

    def write_upload(self, op, data):
        """The upload `op` (of host data) copies `data` (its recorded size) from now on."""
        self.device.queue.write_buffer(self.consts, self.upload_at[id(op)], data)

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


class _Held(Storage):
    """A second Storage of a buffer another Storage holds (a Rerun's allocation of a buffer the
    recording keeps alive): its death releases nothing, the holder's will."""

    __slots__ = ()

    def __del__(self):
        pass


class Rerun:
    """The device's and the pool's listener while a compiled function whose recording has graph
    breaks (or whose Python values changed) runs its Python again.

    Each command the Python makes is checked against the recording (`graph.raw`, the commands
    as traced, in order): the same kernel on the same buffers with the same grid and copies and
    uploads to the same places. A match encodes nothing; a dispatch's new info words go to the
    graph's dispatch (a learning rate, a position read from a Python int), an upload's new bytes
    to the graph's constants (host data). Allocations take the recording's buffers in the order
    the trace took them, so every tensor is where the recording keeps it. At a read back to the
    host (a "r" op) the graph's commands up to that break are submitted, then the read runs.

    Where the Python does something else (control flow that depends on a value read back, a
    value the passes baked into a fused kernel changed), the rerun *diverges*: the commands
    matched since the last break run eagerly, as they were made, and the rest of the call runs
    eagerly. Every tensor of the recording alive at a break was kept by the passes (Tape.read),
    so what the eager rest reads is right. `why` says what diverged; `changed` lists the
    dispatch numbers whose words changed where the graph cannot take them (fused or folded)."""

    recording = False
    skips_updates = False

    def __init__(self, graph, before=(), chunk=None, uploads=True):
        self.g = graph
        self.dev = graph.device
        self.raw = graph.raw
        tape = graph.tape
        self.allocs = [tape.owned[i] for _, i in tape.allocs]
        # buffers a Storage holds as the call begins (the recording's own views of what it
        # returns): a rerun's tensor in one of them is a second Storage of it (_Held)
        pins = tape.pool.pins
        self.held = {i for i in tape.owned if not pins[i].dead}
        self.tenants: dict[int, weakref.ref] = {}  # id(buffer) -> this call's Storage of it
        self.before = list(before)
        self.chunk = chunk
        self.uploads = uploads  # whether new upload bytes may be written into the graph
        self.i = self.a = self.seg = 0
        self.pending: list[tuple] = []
        self.off = False
        self.why = None
        self.changed: set[int] = set()

    # ---- the device and the pool ask (their lock held) ------------------------------------
    def _next(self, kind):
        i = self.i
        if i < len(self.raw) and self.raw[i][0] == kind:
            return self.raw[i]
        return None

    def refresh(self, src, buffers, info, grid):
        if self.off:
            return False
        r = self._next("d")
        if r is None:
            return self._diverge("made a kernel where the trace made another command")
        _, (pipeline, _, bufs, _, rgrid), words, op, num = r
        entry = self.dev._pipelines.get(src.wgsl)
        if entry is None or entry[0] is not pipeline:
            return self._diverge(f"ran another kernel than the trace at its kernel {num}")
        if len(buffers) != len(bufs) or any(x is not y for x, y in zip(buffers, bufs)):
            return self._diverge(f"gave its kernel {num} other buffers than the trace")
        if tuple(grid) != rgrid:
            return self._diverge(f"launched its kernel {num} on another grid")
        now = tuple(info)
        g = self.g
        if now != g.moved.get(num, words):
            k = g.k_of.get(id(op))
            if k is None or op.args[3] is not r[1][3]:  # (fused into another, or folded)
                self.changed.add(num)
                return self._diverge(f"changed a value its kernel {num} had fused or folded")
            g.set_info(k, np.asarray(info, dtype=np.int32))
            g.moved[num] = now
        self.pending.append(("d", src, buffers, info, grid))
        self.i += 1
        self._cut()
        return True

    def _cut(self):
        """At a "cut" barrier: submit the segment before it (the GPU starts on it)."""
        i = self.i
        if i < len(self.raw) and self.raw[i][0] == "r" and self.raw[i][1][1] == "cut":
            self.i += 1
            self._submit(self.seg)

    def refresh_copy(self, *args):
        if self.off:
            return False
        r = self._next("c")
        a = None if r is None else r[1]
        if (
            a is None
            or a[0] is not args[0]
            or a[2] is not args[2]
            or a[1] != args[1]
            or (a[3:] != args[3:])
        ):
            return self._diverge("made a copy the trace did not")
        self.pending.append(("c", *args))
        self.i += 1
        self._cut()
        return True

    def refresh_upload(self, buffer, byte_offset, data):
        if self.off:
            return False
        r = self._next("u")
        if r is None or r[1][0] is not buffer or r[1][1] != byte_offset:
            return self._diverge("made an upload the trace did not")
        data = bytes(data)
        if data != r[1][2]:
            op = r[3]
            if len(data) != len(r[1][2]) or not self.uploads or id(op) not in self.g.upload_at:
                return self._diverge("uploaded other bytes than the trace")
            self.g.write_upload(op, data)
        self.pending.append(("u", buffer, byte_offset, data))
        self.i += 1
        self._cut()
        return True

    def allocate(self, pool, nbytes, size, upload):
        a = self.a
        if a < len(self.allocs) and self.allocs[a].size == size:
            buffer = self.allocs[a]
            i = id(buffer)
            pin = pool.pins[i]
            earlier = self.tenants.get(i)
            if (earlier is not None and earlier() is not None) or (
                not pin.dead and i not in self.held
            ):
                # its earlier tenant still lives (it had died here in the trace: a reference
                # cycle not yet collected, say): the buffer cannot be shared
                self._diverge("kept a tensor alive that the trace had dropped")
                return pool.allocate(nbytes, upload)
            self.a += 1
            if pin.dead:
                pin.dead = False
                pool.live_bytes += size
                pool.peak_live_bytes = max(pool.peak_live_bytes, pool.live_bytes)
                st = Storage(buffer, nbytes, pool)
            else:  # (the recording's own view of an output holds it)
                st = _Held(buffer, nbytes, pool)
            self.tenants[i] = weakref.ref(st)
            return st
        self._diverge("allocated otherwise than the trace")
        return pool.allocate(nbytes, upload)

    def read(self, reads=()):
        if self.off:
            return
        if self._next("r") is None:
            self._diverge("read a value back where the trace did not")
            return
        self.i += 1
        self._submit(self.seg)

    def dispatch(self, *args):  # (a dispatch run eagerly after a divergence)
        pass

    # ---- the call's ends ------------------------------------------------------------------
    def _submit(self, seg, after=()):
        g = self.g
        before = self.before if seg == 0 else ()
        self.dev._replay(g, before, after, self.chunk, g.cuts[seg], g.cuts[seg + 1])
        self.pending.clear()
        self.seg = seg + 1

    def end(self, kept, outputs) -> bool:
        """After the Python returned: whether it followed the whole recording and returned only
        tensors the passes kept (`outputs`, `kept`: buffer ids). Where it did not, it diverges
        here. Either way the listener is gone (the caller's copies out allocate normally)."""
        if not self.off:
            if self.i != len(self.raw):
                self._diverge("made fewer commands than the trace")
            elif not outputs <= kept:
                self._diverge("returned a tensor the trace did not")
        self._stop()
        return not self.off

    def submit_last(self, after):
        """Submit the last segment, then `after` (the copies out)."""
        self._submit(self.seg, after)

    def abort(self):
        """The Python raised: what it did before the exception happens, eagerly."""
        if not self.off:
            self._diverge("raised")

    def _stop(self):
        dev = self.dev
        if dev._tape is self:
            dev._tape = None
        if dev.pool.tape is self:
            dev.pool.tape = None

    def _diverge(self, why):
        """Run what was matched since the last break as it was made; hand the rest to eager."""
        self.off = True
        self.why = why
        self._stop()
        dev = self.dev
        if self.seg == 0:
            for args in self.before:
                dev._copy(*args)
        for cmd in self.pending:
            if cmd[0] == "d":
                dev.dispatch(*cmd[1:])
            elif cmd[0] == "c":
                dev._copy(*cmd[1:])
            else:
                dev._io.write(cmd[1], cmd[2], cmd[3])
        self.pending.clear()
        return False
