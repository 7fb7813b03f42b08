"""`pr.profiler`: where a model's time goes, kernel by kernel, in the manner of `torch.profiler`.

    with pr.profiler.profile() as prof:
        with pr.profiler.record_function("forward"):
            loss = model(x).sum()
        loss.backward()
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")     # Perfetto, chrome://tracing
    prof.export_timeline("timeline.png")       # (matplotlib)

Inside the context every kernel runs in a compute pass of its own, bracketed by timestamp
queries (the adapter's `timestamp-query` feature: wgpu-native and Dawn on GPUs, lavapipe), so
each event's device time is that kernel's alone; a `pr.compile` replay is one event (its kernels
share one pass). Where the adapter has no timestamp queries, each kernel is submitted and waited
for on its own and its wall time stands in (`prof.exact` is False). Profiling changes what it
measures a little: one pass a kernel, the calls through wgpu-py's checked API, a stack walk a
kernel to name its op. Dawn on the H200 quantizes timestamps (to 65.5 µs there): read its
per-kernel figures as coarse.

Warm the GPU before you profile. A card left idle for a few seconds drops its clock, and the
next hundred-odd milliseconds of kernels run at a fraction of their speed whether profiled or
not: on an H100, BERT-base's batch-32 forward ran 114.5 ms after 5 s idle and 21.5 ms warm,
and the profile read 114.5 and 21.5 ms of device time with it (scripts/profile_check.py,
2026-12-06). Profile after a few untimed steps (torch.profiler's `schedule(warmup=...)` does
that), or call `pyrite.bench.warm_gpu(0)` just before.

Each event has the op that made it (the innermost Module forward on the way, else the
pyrite function the caller called: `Linear.forward`, `layer_norm`, `Tensor.__mul__`; in a
backward, the autograd node: `linearBackward`), the kernel's family (`gemm`, `run_map`,
`row_grad`, ...), its grid, the `record_function` labels open around it, where it was
called from, and its device start and duration.
"""

from __future__ import annotations

import enum
import json
import os
import sys
import time

import numpy as np

from . import backend
from ._fs import write_atomic

__all__ = [
    "ProfilerAction",
    "ProfilerActivity",
    "profile",
    "record_function",
    "schedule",
    "tensorboard_trace_handler",
]

# Timestamp pairs a query set holds; past that the profile resolves what it has and starts over.
CAPACITY = 2048


class ProfilerActivity(enum.Enum):
    """Accepted for torch's signature: pyrite always records its device's kernels."""

    CPU = 0
    CUDA = 1


class ProfilerAction(enum.Enum):
    """What a schedule asks of a step (torch.profiler.ProfilerAction)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0):
    """torch.profiler.schedule: skip `skip_first` steps, then cycles of `wait` idle steps,
    `warmup` steps and `active` recorded steps (the last one RECORD_AND_SAVE: the trace is
    handed to on_trace_ready), `repeat` cycles (0: for ever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("pyrite: schedule: wait, warmup, repeat, skip_first >= 0, active > 0")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        k = step % cycle
        if k < wait:
            return ProfilerAction.NONE
        if k < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD_AND_SAVE if k == cycle - 1 else ProfilerAction.RECORD

    return action


def tensorboard_trace_handler(dir_name: str, worker_name=None, use_gzip=False):
    """An on_trace_ready that writes each trace as `<worker>.<ms>.pt.trace.json` (Chrome trace
    format, which TensorBoard's profiler plugin and Perfetto read) into `dir_name`."""
    import socket

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, name), gzip=use_gzip)

    return handler


_active: list = []  # the profiles recording now (innermost last)


class record_function:
    """A named range: events inside carry the label (torch.profiler.record_function)."""

    def __init__(self, name: str, args=None):
        self.name = str(name)
        self.t0 = None

    def __enter__(self):
        self.t0 = time.perf_counter_ns()
        for p in _active:
            p._labels.append(self.name)
        return self

    def __exit__(self, *exc):
        t1 = time.perf_counter_ns()
        for p in _active:
            if p._labels and p._labels[-1] == self.name:
                p._labels.pop()
            if p._recording:
                p._ranges.append((self.name, self.t0, t1))
        return False


class Event:
    """One kernel (or one compiled replay) the profile saw."""

    __slots__ = ("device_ns", "grid", "host_ns", "kernel", "labels", "name", "start_ns", "where")

    def __init__(self, name, kernel, grid, labels, where, host_ns):
        self.name, self.kernel, self.grid = name, kernel, grid
        self.labels, self.where, self.host_ns = labels, where, host_ns
        self.start_ns = 0  # device clock, from the profile's first event
        self.device_ns = 0

    def __repr__(self):
        return (
            f"<Event {self.name} / {self.kernel} grid {self.grid}: "
            f"{self.device_ns / 1e3:.2f} us device>"
        )


class FunctionEventAvg:
    """Events grouped under one key (torch's FunctionEventAvg): counts and device time."""

    def __init__(self, key):
        self.key = key
        self.count = 0
        self.device_time_total = 0.0  # microseconds
        self.kernels: set = set()

    @property
    def device_time(self):  # (torch's per-call average, microseconds)
        return self.device_time_total / max(self.count, 1)

    @property
    def cuda_time_total(self):  # (torch's CUDA-era names)
        return self.device_time_total

    @property
    def cuda_time(self):
        return self.device_time

    def __repr__(self):
        return f"<{self.key}: {self.count} calls, {self.device_time_total:.1f} us device>"


class EventList(list):
    """key_averages()'s list of FunctionEventAvg, printable as torch's table."""

    def table(self, sort_by="device_time_total", row_limit=100, **_):
        keys = {
            "device_time_total": lambda e: -e.device_time_total,
            "cuda_time_total": lambda e: -e.device_time_total,
            "self_device_time_total": lambda e: -e.device_time_total,
            "self_cuda_time_total": lambda e: -e.device_time_total,
            "device_time": lambda e: -e.device_time,
            "cuda_time": lambda e: -e.device_time,
            "count": lambda e: -e.count,
            None: lambda e: 0,
        }
        if sort_by not in keys:
            raise ValueError(
                f"pyrite: profiler table(sort_by={sort_by!r}): one of "
                f"{sorted(k for k in keys if k)}"
            )
        rows = sorted(self, key=keys[sort_by])
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total = sum(e.device_time_total for e in self if not _is_label(e)) or 1.0
        width = max([len("Name")] + [len(str(e.key)) for e in rows])
        width = min(width, 60)
        head = (
            f"{'Name':<{width}}  {'Device total':>13}  {'Device %':>8}  {'Device avg':>11}  "
            f"{'Calls':>6}  Kernels"
        )
        lines = [head, "-" * len(head)]
        for e in rows:
            name = str(e.key)
            name = name if len(name) <= width else name[: width - 3] + "..."
            ks = ", ".join(sorted(e.kernels))
            lines.append(
                f"{name:<{width}}  {_us(e.device_time_total):>13}  "
                f"{100 * e.device_time_total / total:7.1f}%  {_us(e.device_time):>11}  "
                f"{e.count:>6}  {ks[:60]}"
            )
        lines.append("-" * len(head))
        lines.append(
            f"Device time total: {_us(total)}  ({len(self)} rows; [label] rows are "
            "record_function ranges, their kernels also counted in the rows above)"
        )
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def _is_label(e) -> bool:
    """A record_function row (its events are counted in the op rows too)."""
    return str(e.key).startswith("[")


def _us(x: float) -> str:
    if x >= 1e3:
        return f"{x / 1e3:.3f} ms"
    return f"{x:.2f} us"


class profile:
    """Profile the kernels of the code inside (torch.profiler.profile's signature).

    Args:
        activities: accepted for torch's signature (pyrite records its device's kernels).
        record_shapes, profile_memory, with_stack, with_flops, with_modules: accepted, ignored.
        schedule (callable, optional): step number -> ProfilerAction (`schedule(wait=,
            warmup=, active=, repeat=, skip_first=)`); with one, `prof.step()` ends each step
            and only the RECORD steps are profiled (warm-up steps run unprofiled here: nothing
            is gained by recording them).
        on_trace_ready (callable, optional): called with this profile when an active window
            ends (with a schedule) or when the context exits (without).
    """

    def __init__(
        self,
        activities=None,
        *,
        schedule=None,
        on_trace_ready=None,
        record_shapes=False,
        profile_memory=False,
        with_stack=False,
        with_flops=False,
        with_modules=False,
        experimental_config=None,
        use_cuda=None,
    ):
        if schedule is not None and not callable(schedule):
            raise TypeError(
                "pyrite: profile(schedule=) takes a callable from step number to "
                "ProfilerAction, as pr.profiler.schedule(wait=, warmup=, active=) makes"
            )
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self._recording = False
        self.device = None
        self.exact = True
        self._events: list[Event] = []
        self._labels: list[str] = []
        self._ranges: list = []
        self._pending: list[Event] = []  # events whose timestamps are not read yet
        self._saved = None
        self._t0 = None
        self.wall_ns = 0

    # ---- the context -------------------------------------------------------------------------
    def __enter__(self):
        if _active:
            raise RuntimeError("pyrite: a profiler is already recording (profiles do not nest)")
        _active.append(self)
        self._step = 0
        if self.schedule is None or self.schedule(0) in _RECORDING:
            self._start()
        return self

    def __exit__(self, *exc):
        try:
            if self._recording:
                self._stop()
                if self.on_trace_ready is not None and (
                    self.schedule is None or self.schedule(self._step) is ProfilerAction.RECORD
                ):
                    self.on_trace_ready(self)  # (torch: a trace in progress is saved at exit)
        finally:
            _active.remove(self)
        return False

    def step(self):
        """Mark the end of one step for the `schedule` (torch's prof.step()); without a
        schedule it does nothing."""
        if self.schedule is None:
            return
        before = self.schedule(self._step)
        self._step += 1
        after = self.schedule(self._step)
        if before is ProfilerAction.RECORD_AND_SAVE:
            self._stop()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
        elif before in _RECORDING and after not in _RECORDING:
            self._stop()
        if after in _RECORDING and not self._recording:
            self._start()

    def _start(self):
        dev = self.device = backend.current()
        if dev._tape is not None:
            raise RuntimeError("pyrite: profile() inside a pr.compile trace is not supported")
        dev.synchronize()
        self._events, self._ranges, self._pending = [], [], []
        self.exact = "timestamp-query" in dev.features
        if self.exact:
            g, w = dev.device, dev.wgpu
            self._qs = g.create_query_set(type="timestamp", count=2 * CAPACITY)
            self._res = g.create_buffer(
                size=16 * CAPACITY, usage=w.BufferUsage.QUERY_RESOLVE | w.BufferUsage.COPY_SRC
            )
        with dev._lock:
            dev._flush()
            self._saved = (dev._c, dev._io)
            dev._io = _TimedPath(self, dev.device)
            dev._c = None
            dev.dispatch = self._dispatch  # (an instance attribute: the class's stays)
        self._recording = True
        self._t0 = time.perf_counter_ns()

    def _stop(self):
        dev = self.device
        try:
            dev.synchronize()
            with dev._lock:
                dev._flush()
                self._collect()
        finally:
            with dev._lock:
                del dev.dispatch
                dev._c, dev._io = self._saved
            for b in (getattr(self, "_qs", None), getattr(self, "_res", None)):
                if b is not None:
                    b.destroy()
            self._qs = self._res = None
            self._recording = False
        self.wall_ns = time.perf_counter_ns() - self._t0
        self._place()

    # ---- recording (the device's lock held) --------------------------------------------------
    def _dispatch(self, src, buffers, info, grid):
        from .backend.replay import _site

        dev = self.device
        if self.exact and len(self._pending) >= CAPACITY:  # (the query set is full: read it)
            dev._flush()
            self._collect()
        inner, outer, where, _, _ = _site()
        name = _backward_node() or outer
        ev = Event(name, _kernel_name(inner), tuple(grid), tuple(self._labels), where, 0)
        self._next = ev
        dev._end_pass()  # (the kernel's own pass, begun by _TimedPath.begin_pass)
        t = time.perf_counter_ns()
        type(dev).dispatch(dev, src, buffers, info, grid)
        dev._end_pass()
        ev.host_ns = time.perf_counter_ns() - t
        if not self.exact:  # (no timestamps: its wall time, alone on the device)
            t = time.perf_counter_ns()
            dev.synchronize()
            ev.device_ns = time.perf_counter_ns() - t
            ev.start_ns = t - self._t0
            self._events.append(ev)

    def _slot(self):
        """The query pair of the pass about to begin, and its event."""
        ev = getattr(self, "_next", None)
        self._next = None
        if ev is None:  # a pass nobody named: a compiled replay's (one pass, all its kernels)
            from .backend.replay import _site

            _, _, where, _, called = _site()
            ev = Event(
                called or "compiled replay", "pr.compile replay", (), tuple(self._labels), where, 0
            )
            if not self.exact or len(self._pending) >= CAPACITY:
                self._events.append(ev)  # (untimed: its pass cannot wait for a readback)
                return None
        if not self.exact:
            return None
        self._pending.append(ev)
        return 2 * (len(self._pending) - 1)

    def _collect(self):
        """Resolve and read the pending events' timestamps (after their submission)."""
        if not self._pending:
            return
        dev = self.device
        n = 2 * len(self._pending)
        enc = dev.device.create_command_encoder()
        enc.resolve_query_set(self._qs, 0, n, self._res, 0)
        dev.queue.submit([enc.finish()])
        ts = np.frombuffer(dev.queue.read_buffer(self._res, 0, 8 * n), np.uint64)
        ts = ts.astype(np.int64).reshape(-1, 2)
        for ev, (t0, t1) in zip(self._pending, ts):
            ev.start_ns = int(t0)
            ev.device_ns = max(int(t1 - t0), 0)
            self._events.append(ev)
        self._pending = []

    def _place(self):
        if self.exact and self._events:
            base = min(e.start_ns for e in self._events)
            for e in self._events:
                e.start_ns -= base

    # ---- what it saw -------------------------------------------------------------------------
    def events(self) -> list:
        """Every event, in the order the kernels were recorded."""
        return list(self._events)

    def key_averages(self, group_by="op", group_by_input_shape=False) -> EventList:
        """Events grouped by op (default), "kernel", "label" (the innermost record_function,
        else the op) or "site" (file:line of the call), as torch's key_averages()."""
        keyf = {
            "op": lambda e: e.name,
            "kernel": lambda e: e.kernel,
            "label": lambda e: e.labels[-1] if e.labels else e.name,
            "site": lambda e: e.where,
        }.get(group_by)
        if keyf is None:
            raise ValueError(
                f"pyrite: key_averages(group_by={group_by!r}): one of op, kernel, label, site"
            )
        groups: dict = {}
        for e in self._events:
            k = keyf(e)
            g = groups.get(k)
            if g is None:
                g = groups[k] = FunctionEventAvg(k)
            g.count += 1
            g.device_time_total += e.device_ns / 1e3
            g.kernels.add(e.kernel)
        out = EventList(groups.values())
        for label in {r[0] for r in self._ranges}:  # labels as rows of their own
            if label not in groups:
                g = FunctionEventAvg(f"[{label}]")
                for e in self._events:
                    if label in e.labels:
                        g.count += 1
                        g.device_time_total += e.device_ns / 1e3
                        g.kernels.add(e.kernel)
                if g.count:
                    out.append(g)
        return out

    def device_time_total(self) -> float:
        """Microseconds of device time, all events."""
        return sum(e.device_ns for e in self._events) / 1e3

    def export_chrome_trace(self, path, gzip=False):
        """Write the events (device track) and the record_function ranges (host track) as a
        Chrome trace (JSON), for Perfetto or chrome://tracing. Written atomically (_fs.write_atomic):
        a failed export leaves no partial file."""
        trace = []
        for e in self._events:
            trace.append(
                {
                    "name": e.name,
                    "cat": e.kernel,
                    "ph": "X",
                    "ts": e.start_ns / 1e3,
                    "dur": max(e.device_ns / 1e3, 0.001),
                    "pid": 1,
                    "tid": 1,
                    "args": {
                        "kernel": e.kernel,
                        "grid": list(e.grid),
                        "labels": list(e.labels),
                        "where": e.where,
                        "host_us": e.host_ns / 1e3,
                    },
                }
            )
        for name, t0, t1 in self._ranges:
            trace.append(
                {
                    "name": name,
                    "ph": "X",
                    "ts": (t0 - self._t0) / 1e3,
                    "dur": (t1 - t0) / 1e3,
                    "pid": 0,
                    "tid": 0,
                }
            )
        meta = [
            {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": _device_name(self)}},
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "host (labels)"}},
        ]
        data = json.dumps({"traceEvents": meta + trace}).encode()
        if gzip:
            import gzip as gz

            data = gz.compress(data)
        write_atomic(path, lambda fh: fh.write(data))

    def export_timeline(self, path, row_limit=12):
        """A PNG: the events on the device's time axis, one row for each of the `row_limit` ops
        with the most device time (the rest in one row), bar length its duration. Needs
        matplotlib."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError(
                "pyrite: profile.export_timeline needs matplotlib (pip install matplotlib); "
                "export_chrome_trace needs nothing"
            ) from None
        avgs = sorted(self.key_averages(), key=lambda g: -g.device_time_total)
        top = [g.key for g in avgs if not _is_label(g)][:row_limit]
        rows = {k: i for i, k in enumerate(top)}
        other = len(top)
        fig, ax = plt.subplots(figsize=(12, 0.45 * (len(top) + 2) + 1.2))
        for e in self._events:
            r = rows.get(e.name, other)
            ax.broken_barh(
                [(e.start_ns / 1e3, max(e.device_ns / 1e3, 0.01))], (r - 0.4, 0.8),
                color=f"C{r % 10}",
            )  # fmt: skip
        ax.set_yticks(range(other + 1), [*(str(k)[:40] for k in top), "(other)"])
        ax.invert_yaxis()
        ax.set_xlabel("device time (µs)" if self.exact else "wall time (µs)")
        ax.set_title(
            f"{_device_name(self)}: {len(self._events)} events, "
            f"{_us(self.device_time_total())} device time"
        )
        fig.tight_layout()
        try:
            write_atomic(path, lambda fh: fig.savefig(fh, format="png", dpi=110))
        finally:
            plt.close(fig)


def _backward_node():
    """`<op>Backward` while the autograd engine runs a node's rule (its kernels are that node's,
    as torch names them), else None."""
    f = sys._getframe(2)
    while f is not None:
        if f.f_code.co_name == "_engine" and f.f_globals.get("__name__") == "pyrite.autograd":
            node = f.f_locals.get("node")
            return None if node is None else node.name_()
        f = f.f_back
    return None


def _kernel_name(inner: str) -> str:
    """The kernel's family from the function that dispatched it: one name whether the op's plan
    was cached or made this call (`_reduce`, `_reduce_plan` -> `reduce`)."""
    name = inner.rsplit(".", 1)[-1].lstrip("_")
    return name[: -len("_plan")] if name.endswith("_plan") else name


def _device_name(p) -> str:
    d = p.device
    return f"{d.name} ({d.impl})" if d is not None else "device"


def _timed_path():
    from .backend.capi import CheckedPath

    class TimedPath(CheckedPath):
        """wgpu-py's checked calls, each compute pass bracketed by the profile's timestamps."""

        def __init__(self, prof, device):
            super().__init__(device)
            self.prof = prof

        def begin_pass(self, enc):
            q = self.prof._slot()
            if q is None:
                return enc.begin_compute_pass()
            return enc.begin_compute_pass(
                timestamp_writes={
                    "query_set": self.prof._qs,
                    "beginning_of_pass_write_index": q,
                    "end_of_pass_write_index": q + 1,
                }
            )

    return TimedPath


def _TimedPath(prof, device):  # noqa: N802 - a class made on first use (capi imports wgpu)
    global _TIMED
    if _TIMED is None:
        _TIMED = _timed_path()
    return _TIMED(prof, device)


_TIMED = None
