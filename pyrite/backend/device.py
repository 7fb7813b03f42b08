"""The WebGPU device: limits and features, pipelines, bind groups, batched dispatch, transfers.

Every kernel binds its storage buffers at bindings 0..n-1 of group 0 and its *info* — sizes,
strides, offsets and scalars as i32 words — at binding n, a window into one per-batch arena with a
dynamic offset. So an eager op costs one `set_bind_group` with a cached bind group and no buffer
creation; the arena is written once per batch, just before the batch is submitted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from types import SimpleNamespace

import numpy as np

from ..errors import DeviceError, KernelError
from . import quirks, trustcheck
from .capi import CheckedPath, CPath, trusted_module
from .pool import BufferPool

# Optional features pyrite asks for when the adapter has them (wgpu-native and Dawn spell
# subgroups differently).
WANTED_FEATURES = (
    "shader-f16",
    "subgroup",
    "subgroups",
    "timestamp-query",
    "mappable-primary-buffers",
) + tuple(
    f for f in os.environ.get("PYRITE_EXTRA_FEATURES", "").split(",") if f
)  # (PYRITE_EXTRA_FEATURES: more, where the adapter has them, for probes)

# The info window each dispatch binds: 128 i32 words, one window a dispatch (512 bytes apart, a
# multiple of every minStorageBufferOffsetAlignment WebGPU allows). A dispatch's info fills at
# most the first INFO_ZERO_WORD words; the last word of every window is never written, so it is
# always 0: kernels read it as a zero the shader compiler cannot know (kernels/common.py
# `p_opaque`). NVIDIA's Vulkan compiler rewrites float algebra as if it were exact ((a - (a + x))
# + x became 0, H200 2026-12-01, scripts/fp_probe.py), which erases the rounding-error terms of
# compensated sums, exact division and range reductions; passing a value through an OR with an
# unknown zero stops that rewrite where it matters. (A zero the compiler can bound, such as
# arrayLength(&info) >> 30, was folded away there.)
INFO_WINDOW_WORDS = 128
STAGING_BYTES = 64 << 10  # reads up to this size go through the persistent staging buffer
LARGE_READ_BYTES = 64 << 20  # larger reads go in pieces of at most this
INFO_ZERO_WORD = INFO_WINDOW_WORDS - 1
# a kernel's last line when it may be built without run-time index checks (kernels/common.py
# TRUSTED; tests/test_runtime.py checks the two agree)
TRUSTED = "\n// pyrite: trusted\n"
TRUSTED_MODE = os.environ.get("PYRITE_TRUSTED", "1")
# (trustcheck.py) 1: instrument the trusted kernels; all: every kernel (which could be trusted)
CHECK_TRUSTED = os.environ.get("PYRITE_CHECK_TRUSTED", "") in ("1", "all")
CHECK_ALL = os.environ.get("PYRITE_CHECK_TRUSTED", "") == "all"
# The info arena is a cache: each distinct info (its words as a tuple) gets a window once and
# keeps it, so a dispatch whose info was seen before (the same op on the same shapes: every
# step of a training loop, every token of a generation, every item() of a loss) binds that
# window and writes nothing. A batch writes only the windows it added, in one queue write just
# before its submit, and none when it added none. Measured on the H200 (2026-12-03,
# `scripts/dispatch_probe.py`, one trivial dispatch, a 4-byte copy, submit and map, µs,
# wgpu-native / Dawn): 73.0 / 53.5 with the write, 58.6 / 46.3 without. When the arena is full,
# the pending batch is submitted and the cache starts again from window 0 (the queue orders that
# rewrite after the work submitted before it).
INFO_ARENA_WORDS = 1 << 20  # 4 MiB: 8,192 windows

# Small results the host is likely to read (a full reduction's scalar: a loss, a metric) are
# made in buffers it can map directly, where the implementation allows a storage buffer to be
# mappable (wgpu-native's mappable-primary-buffers; not Dawn): their read is a submit and a
# map, without the copy into the staging buffer, its pass boundary and barrier (ops/reduce.py
# asks; read_many takes the short way). Measured on a lent H100 (2026-12-06, wgpu-native,
# `PYRITE_EXTRA_FEATURES=mappable-primary-buffers scripts/dispatch_probe.py --mappable`, a
# slow host: its copy + submit + map 33.6 us against 25.6 usually): one dispatch then a copy
# and a map 60.3 us, the dispatch writing a mappable buffer and a map 49.6. PYRITE_MAPPABLE=0:
# off. Such a buffer lives in host memory, so kernels that read it pay the bus: only scalars.
MAPPABLE = os.environ.get("PYRITE_MAPPABLE", "1") != "0"
# reads of at most this many mappable buffers at once map each (a map of a buffer whose work
# is done costs little); more go through the staging copy and one map
MAPPABLE_MAX_READS = 4


class _Quiet(logging.Filter):
    def filter(self, record):
        return "MAPPABLE_PRIMARY_BUFFERS" not in record.getMessage()


# Dispatches recorded before a batch is submitted without being asked. Measured on the H200
# (2026-11-29, `PYRITE_BATCH=N pyrite bench --only overhead`, 1,000 chained adds, µs an op,
# Dawn / wgpu-native): 32: 13.1 / 16.8; 256: 10.5-18.8 / 13.8-21.5 over four runs; 1024:
# 18.0 / 16.0. The spread between runs of one setting (the host's numpy peer moved 0.9-2.0 µs
# in the same runs) is larger than between settings, so the choice is not sensitive; 256 keeps
# the info arena (64K words, <= 128 a dispatch) to one write per batch and bounds the buffers
# held back from uploads.
# Later, with the doubling below (a lent H100, 2026-12-06, `scripts/gpu_session.sh batch
# batch-dawn`, docs/bench/2026-12-06-h100-s30-batch.json; pyrite bench's rows, wgpu-native /
# Dawn): a cap of 64 against 256 took the chain of 100 (F.linear 128x768·768², * 0.03) from
# 16.0 to 14.6 / 15.9 to 14.2 µs an op (the last batch's GPU work, all of it after the host
# is done, is a quarter as long), the batch-1 BERT-base forward 4.56 to 4.35 / 4.67 to 4.35 ms,
# the 1,000 adds 10.6 to 10.4 / 10.4 to 10.3 µs an op; batch 32 BERT-base even (21.4 / 21.2 ms).
# Caps of 32 and 48 were within noise of 64 on wgpu-native (chain 14.9, 14.6); 128: 15.0.
BATCH_DISPATCHES = int(os.environ.get("PYRITE_BATCH", "64"))
# ... but a batch recorded while the GPU has nothing to do leaves it idle until the batch is
# submitted: a batch-1 BERT-base forward (168 dispatches) ran as one submit at its end, the host's
# 4-5 ms of recording and the GPU's ~3 ms of work back to back (H200, 2026-12-01). So after each
# completed wait (the device idle) the first batch goes after BATCH_FIRST dispatches and each
# later one after twice as many as the one before, up to BATCH_DISPATCHES: the GPU starts within
# a few ops and runs behind the host from then on, for ~5 extra submits (~10 µs each).
BATCH_FIRST = min(int(os.environ.get("PYRITE_BATCH_FIRST", "8")), BATCH_DISPATCHES)
# ... and (PYRITE_BATCH_IDLE=N) a batch of at least N dispatches may go early when the queue has
# run dry (checked every IDLE_CHECK_EVERY dispatches without blocking, through the C path; 0,
# the default: never). Measured on the H100 (the run above, cap 256 with N = 16 against
# without): wgpu-native even (chain 15.9 / 16.0 µs an op: its checks rarely found the queue
# empty), Dawn worse (the 1,000 adds 14.9 against 10.3 µs an op with a cap of 64; a guess: the
# ProcessEvents each check runs), so it stays off; the smaller cap took what it was meant to.
BATCH_IDLE = int(os.environ.get("PYRITE_BATCH_IDLE", "0"))
IDLE_CHECK_EVERY = 8
# Buffers freed during a batch are held from uploads until it is submitted; past this many bytes,
# submit so they return to the common pool.
RECENT_LIMIT = 256 << 20


class Device:
    def __init__(self, impl: str, module, adapter):
        self.impl = impl
        self.wgpu = module
        self.adapter = adapter
        info = adapter.info
        self.name = info.get("device", "unknown")
        self.adapter_type = info.get("adapter_type", "Unknown")
        self.backend_type = info.get("backend_type", "Unknown")
        self.driver = info.get("description", "")
        lim = adapter.limits
        self.features = sorted(
            f
            for f in WANTED_FEATURES
            if f in adapter.features and (f != "mappable-primary-buffers" or MAPPABLE)
        )
        wanted_limits = {
            "max-buffer-size": lim["max-buffer-size"],
            "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
            "max-storage-buffers-per-shader-stage": lim["max-storage-buffers-per-shader-stage"],
            "max-compute-workgroup-storage-size": lim["max-compute-workgroup-storage-size"],
            "max-compute-invocations-per-workgroup": lim["max-compute-invocations-per-workgroup"],
            "max-compute-workgroup-size-x": lim["max-compute-workgroup-size-x"],
            "max-compute-workgroup-size-y": lim["max-compute-workgroup-size-y"],
        }
        quiet = _Quiet()  # (wgpu-core warns of mappable-primary-buffers on a discrete GPU: the
        # warning is for buffers that live in host memory, which here are only MAPPABLE's)
        logging.getLogger("wgpu").addFilter(quiet)
        try:
            self.device = adapter.request_device_sync(
                required_features=self.features, required_limits=wanted_limits
            )
        except Exception as exc:  # noqa: BLE001
            raise DeviceError(f"pyrite: could not open {self.name} through {impl}: {exc}") from None
        finally:
            logging.getLogger("wgpu").removeFilter(quiet)
        self.limits = {
            k: self.device.limits[k]
            for k in sorted(self.device.limits)
            if k.startswith(("max-", "min-"))
        }
        self.queue = self.device.queue
        self.has_f16 = "shader-f16" in self.features
        self.max_binding = self.limits["max-storage-buffer-binding-size"]
        self.max_workgroups = self.limits["max-compute-workgroups-per-dimension"]
        self.offset_align = max(self.limits["min-storage-buffer-offset-alignment"], 16) // 4
        if INFO_WINDOW_WORDS % self.offset_align:
            raise DeviceError(
                f"pyrite: {self.name} wants storage offsets aligned to {self.offset_align * 4} "
                f"bytes, more than the {INFO_WINDOW_WORDS * 4}-byte info windows pyrite uses"
            )
        usage = module.BufferUsage
        self.pool = BufferPool(
            self.device,
            usage.STORAGE | usage.COPY_SRC | usage.COPY_DST,
            self.limits["max-buffer-size"],
            self.max_binding,
        )
        if "mappable-primary-buffers" in self.features:
            self.pool.mappable_usage = self.pool.usage | usage.MAP_READ
        # Ops may run from several Python threads: every call that touches the pending batch (or
        # the pool) holds this re-entrant lock, the pool's own, so encoding and submitting never
        # interleave. Uncontended it costs ~0.1 µs a call (an op is ~10 µs).
        self._lock = self.pool.lock
        self._pipelines: dict[str, tuple] = {}
        self._layouts: dict[str, tuple] = {}
        self._bind_groups: dict[tuple, object] = {}
        self._info_host = np.zeros(INFO_ARENA_WORDS + INFO_WINDOW_WORDS, dtype=np.int32)
        self._info_gpu = self.device.create_buffer(
            size=self._info_host.nbytes, usage=usage.STORAGE | usage.COPY_DST
        )
        self._info_pos = 0  # the next free window
        self._info_new = 0  # where the windows added since the last submit begin
        self._info_slots: dict[tuple, int] = {}  # info words -> their window's first word
        self._encoder = None
        self._pass = None
        self._last_pipeline = None
        self._count = 0
        self.dispatches = 0  # ever, for tests and PYRITE_DEBUG
        self.submits = 0
        self.readbacks = 0  # round trips that waited for the GPU (reads and synchronizes)
        self.debug = debug_level()
        self._tiny = self.pool.allocate(4)
        self._persistent = {}  # key -> Storage (persistent())
        self._busy = False  # work submitted (or written) since the last completed wait
        self._batch_limit = BATCH_FIRST  # dispatches before the pending batch is submitted
        try:  # (device._read: small readbacks through one persistent mappable buffer)
            self._staging = self.device.create_buffer(
                size=STAGING_BYTES, usage=usage.MAP_READ | usage.COPY_DST
            )
        except Exception:  # noqa: BLE001
            self._staging = None
        self._checked_sites = []  # PYRITE_CHECK_TRUSTED: (kernel, index sites) by tag - 1
        self._oob = None  # its violation word
        self._graveyard = []  # bind groups dropped from the cache while a batch may use them
        # the C entry points (capi.py), or None: wgpu-py's checked calls (PYRITE_SAFE_CALLS=1,
        # PYRITE_DEBUG >= 1, or a binding that does not look as expected)
        self._c = None if self.debug else CPath.open(self.device, impl)
        self._io = self._c if self._c is not None else CheckedPath(self.device)
        self._raw_group = self._raw_bind_group() if self._c is not None else None
        if self._c is not None and BATCH_IDLE:
            self._c.track_done()
        self.pool.on_trim = self._forget_bind_groups
        self._tape = None  # a replay.Tape recording, a replay.Refresher, or None
        self._loop_budget = ...  # measured on first use (quirks.py)
        self._ftz = None
        self._subgroups = None
        self._subgroup_size = None
        # the subgroup feature's name as this implementation spells it (wgpu-native "subgroup",
        # Dawn "subgroups"), or None
        self.subgroup_feature = next(
            (f for f in ("subgroup", "subgroups") if f in self.features), None
        )

    @property
    def flushes_subnormals(self) -> bool:
        """Whether shaders on this device flush f32 subnormals to zero (quirks.py)."""
        if self._ftz is None:
            self._ftz = quirks.flushes_subnormals(self)
        return self._ftz

    @property
    def subgroups(self) -> int:
        """How kernels may use subgroup operations here: 0 not at all, 1 as builtins
        (wgpu-native), 2 after `enable subgroups;` (Dawn). Probed once (quirks.py)."""
        if self._subgroups is None:
            self._subgroups = (
                0 if not self.subgroup_size else 2 if self.subgroup_feature == "subgroups" else 1
            )
        return self._subgroups

    @contextlib.contextmanager
    def without_subgroups(self):
        """Kernels generated inside use no subgroup operations (`subgroups` reads 0): what runs
        on any WebGPU device, a browser's included (pyrite.web traces under it)."""
        saved, self._subgroups = self._subgroups, 0
        try:
            yield
        finally:
            self._subgroups = saved

    def source_of(self, pipeline) -> str | None:
        """The WGSL a pipeline of this device was built from (the text its cache is keyed by),
        or None."""
        for text, entry in self._pipelines.items():
            if entry[0] is pipeline:
                return text
        return None

    @property
    def subgroup_size(self) -> int:
        """The subgroup size kernels may rely on (quirks.subgroup_size: consecutive local
        indices, one size), or 0 where they may not use subgroups. Probed once."""
        if self._subgroup_size is None:
            self._subgroup_size = quirks.subgroup_size(self)
        return self._subgroup_size

    @property
    def loop_budget(self) -> int | None:
        """Loop iterations one invocation may run before the driver stops it, or None."""
        if self._loop_budget is ...:
            self._loop_budget = quirks.loop_budget(self)
        return self._loop_budget

    def run_probe(self, wgsl: str, word: int) -> int:
        """Run a one-invocation probe kernel (one read-write u32 buffer, info = [word]) and
        return the u32 it wrote at index 0."""
        from types import SimpleNamespace

        with self._lock:  # (a probe met inside a compiled function's trace is not part of it)
            tape, self._tape, self.pool.tape = self._tape, None, None
            try:
                out = self.pool.allocate(4)
                self.dispatch(
                    SimpleNamespace(wgsl=wgsl, modes="w"), (out.buffer,), (word,), (1, 1, 1)
                )
                return int(np.frombuffer(self.read(out.buffer, 0, 4), dtype=np.uint32)[0])
            finally:
                self._tape = tape
                self.pool.tape = tape if tape is not None and tape.recording else None

    def _forget_bind_groups(self):
        """Bind groups are cached by buffer identity: drop them all before buffers are destroyed
        (recorded commands keep theirs alive until the batch is submitted)."""
        self._graveyard.append(self._bind_groups)
        self._bind_groups = {}

    def _raw_bind_group(self):
        """A maker of bind groups through the C entry point, or None (the checked path).

        Training recycles pool buffers in new combinations every step, so most dispatches of a
        step need a new bind group (measured: 200 of a small GPT step's 279). wgpu-py's
        create_bind_group checks and converts every entry in Python (27 µs a group on this
        machine's CPU); the same descriptor written straight into a C struct costs a fraction
        of that. Only pyrite's own storage-buffer entries go through here, after _check_owned.
        """
        try:
            api = self._c.api  # (built only when the C path opened)
            ffi, create, group_cls = api.ffi, api.lib.wgpuDeviceCreateBindGroup, api.GPUBindGroup
            device, dev_c = self.device, self._c.dev_c
            info_c, info_size = self._info_gpu._internal, INFO_WINDOW_WORDS * 4
        except Exception:  # noqa: BLE001 - any surprise: keep the checked path
            return None

        def make(bgl, buffers, info=None):
            n = len(buffers)
            entries = ffi.new("WGPUBindGroupEntry[]", n + 1)
            for i, b in enumerate(buffers):
                e = entries[i]
                e.binding = i
                e.buffer = b._internal
                e.size = b.size
            e = entries[n]
            e.binding = n
            e.buffer = info_c if info is None else info._internal
            e.size = info_size
            desc = ffi.new("WGPUBindGroupDescriptor *")
            desc.layout = bgl._internal
            desc.entries = entries
            desc.entryCount = n + 1
            return group_cls("", create(dev_c, desc), device)

        return make

    # ---- pipelines -------------------------------------------------------------------------
    def _layout(self, modes: str):
        entry = self._layouts.get(modes)
        if entry is None:
            w = self.wgpu
            kinds = {"r": w.BufferBindingType.read_only_storage, "w": w.BufferBindingType.storage}
            entries = [
                {"binding": i, "visibility": w.ShaderStage.COMPUTE, "buffer": {"type": kinds[m]}}
                for i, m in enumerate(modes)
            ]
            entries.append(
                {
                    "binding": len(modes),
                    "visibility": w.ShaderStage.COMPUTE,
                    "buffer": {
                        "type": w.BufferBindingType.read_only_storage,
                        "has_dynamic_offset": True,
                        "min_binding_size": INFO_WINDOW_WORDS * 4,
                    },
                }
            )
            bgl = self.device.create_bind_group_layout(entries=entries)
            pl = self.device.create_pipeline_layout(bind_group_layouts=[bgl])
            entry = self._layouts[modes] = (bgl, pl)
        return entry

    def pipeline(self, src):
        entry = self._pipelines.get(src.wgsl)
        if entry is None:
            if CHECK_TRUSTED and (CHECK_ALL or src.wgsl.endswith(TRUSTED)):
                entry = self._build_checked(src)
            else:
                entry = self._build(src)
            self._pipelines[src.wgsl] = entry
        return entry

    def _build_checked(self, src):
        """A trusted kernel instrumented (PYRITE_CHECK_TRUSTED=1, trustcheck.py): its modes
        gain the violation word's binding, which make_bind_group appends to the buffers."""
        tag = len(self._checked_sites) + 1
        wgsl, sites = trustcheck.instrument(src.wgsl, len(src.modes), tag)
        self._checked_sites.append((src.wgsl, sites))
        if self._oob is None:
            self._oob_storage = self.pool.allocate(4)
            self._oob = self._oob_storage.buffer
            self._io.write(self._oob, 0, np.zeros(1, np.uint32))
        pipeline, modes, writable = self._build(SimpleNamespace(wgsl=wgsl, modes=src.modes + "w"))
        # the word is bound by make_bind_group, after the op's buffers (which the op, a recording
        # and compile/'s passes see as the kernel's own, unchanged)
        return pipeline, modes, writable[:-1]

    def trusted_violation(self) -> str | None:
        """The first out-of-range index a checked trusted kernel recorded since the last call
        (PYRITE_CHECK_TRUSTED=1), as text naming the kernel and the site, or None; clears it."""
        if self._oob is None:
            return None
        word = int(np.frombuffer(self.read(self._oob, 0, 4), np.uint32)[0])
        if not word:
            return None
        self._io.write(self._oob, 0, np.zeros(1, np.uint32))
        wgsl, sites = self._checked_sites[word // 65536 - 1]
        return f"index out of range at {sites[word % 65536 - 1]} in the kernel:\n{wgsl}"

    def _build(self, src):
        bgl, pl = self._layout(src.modes)
        t0 = time.perf_counter()
        try:
            module = None
            if self._trusted(src.wgsl):
                module = trusted_module(self.device, src.wgsl)
            if module is None:
                module = self.device.create_shader_module(code=src.wgsl)
            pipeline = self.device.create_compute_pipeline(
                layout=pl, compute={"module": module, "entry_point": "main"}
            )
        except Exception as exc:  # noqa: BLE001
            numbered = "\n".join(
                f"{i + 1:4d}  {line}" for i, line in enumerate(src.wgsl.split("\n"))
            )
            raise KernelError(
                f"pyrite: a kernel failed to build on {self.name} ({self.impl}); "
                f"this is a pyrite bug.\n{exc}\n{numbered}"
            ) from None
        if self.debug >= 2:
            print(
                f"[pyrite] pipeline #{len(self._pipelines) + 1} built in "
                f"{(time.perf_counter() - t0) * 1e3:.1f} ms"
            )
            if self.debug >= 3:
                print(src.wgsl)
        writable = tuple(i for i, m in enumerate(src.modes) if m == "w")
        return (pipeline, src.modes, writable)

    def _trusted(self, wgsl: str) -> bool:
        """Build this kernel without run-time index checks (kernels/common.TRUSTED): wgpu-native
        on Vulkan only (where the driver's robust buffer access still bounds storage buffers;
        on Metal and D3D12 naga's checks are all there is), not under PYRITE_DEBUG, and
        PYRITE_TRUSTED=0 turns it off (=all: every kernel, an experiment's switch)."""
        mode = TRUSTED_MODE
        if self.impl != "wgpu" or self.backend_type != "Vulkan" or self.debug or mode == "0":
            return False
        return mode == "all" or wgsl.endswith(TRUSTED)

    @property
    def pipeline_count(self):
        return len(self._pipelines)

    # ---- dispatch --------------------------------------------------------------------------
    def dispatch(self, src, buffers, info, grid):
        """Record one kernel: `buffers` in binding order, `info` a sequence of i32 words. (The
        body holds the lock itself, not through a wrapper: a call more on every op's path costs
        ~0.1 µs of its ~5. pr.profiler replaces `dispatch` on the instance while it records.)"""
        with self._lock:
            tape = self._tape
            bounds = self.pool.bounds
            if tape is not None and tape.refresh(src, buffers, info, grid):
                if bounds:  # (a rerun's kernel writes as the recorded one will: forget the same)
                    for i, m in enumerate(src.modes):
                        if m == "w":
                            bounds.pop(id(buffers[i]), None)
                return
            pipeline, modes, writable = self._pipelines.get(src.wgsl) or self.pipeline(src)
            if bounds:  # what this kernel may write is no longer known to be in bounds
                for i in writable:
                    bounds.pop(id(buffers[i]), None)
            key = (modes, *map(id, buffers))
            bind_group = self._bind_groups.get(key)
            if bind_group is None:
                bind_group = self._bind_group(key, modes, buffers)
            key = tuple(info)
            pos = self._info_slots.get(key)
            if pos is None:
                pos = self._info_window(key)
            cpass = self._pass
            if cpass is None:
                cpass = self._begin()
            c = self._c
            if c is None:
                if pipeline is not self._last_pipeline:
                    cpass.set_pipeline(pipeline)
                    self._last_pipeline = pipeline
                cpass.set_bind_group(0, bind_group, [pos * 4])
                cpass.dispatch_workgroups(*grid)
            else:  # cpass is the C handle
                if pipeline is not self._last_pipeline:
                    c.set_pipeline(cpass, pipeline._internal)
                    self._last_pipeline = pipeline
                offsets = c.offsets
                offsets[0] = pos * 4
                c.set_bind_group(cpass, 0, bind_group._internal, 1, offsets)
                c.dispatch(cpass, grid[0], grid[1], grid[2])
            self.dispatches += 1
            n = self._count = self._count + 1
            if tape is not None:
                tape.dispatch(pipeline, modes, buffers, info, grid)
            if n >= self._batch_limit or self.pool.recent_bytes > RECENT_LIMIT:
                self._flush()
            elif (
                BATCH_IDLE
                and n >= BATCH_IDLE
                and not n % IDLE_CHECK_EVERY
                and c is not None
                and c.queue_idle()
            ):
                self._flush()

    def _info_window(self, key):
        """A new window in the info arena holding these words (written at the next submit)."""
        n = len(key)
        if n > INFO_ZERO_WORD:
            raise KernelError(
                f"pyrite: internal: a dispatch's info has {n} words, more than the "
                f"{INFO_ZERO_WORD} a window holds"
            )
        pos = self._info_pos
        if pos + INFO_WINDOW_WORDS > INFO_ARENA_WORDS:  # full: submit, then start again
            self._flush()
            self._info_slots.clear()
            self._info_new = pos = 0
        if n:
            self._info_host[pos : pos + n] = key
        self._info_pos = pos + INFO_WINDOW_WORDS
        self._info_slots[key] = pos
        return pos

    def _check_owned(self, buffers):
        """DeviceError for a buffer that is not this device's: a tensor made before set_device."""
        owned = self.pool.owned
        for b in buffers:
            if id(b) not in owned and b is not self._info_gpu:
                raise DeviceError(
                    "pyrite: a tensor made on a previous device was used after "
                    f"pyrite.set_device() switched to {self.name} ({self.impl}); tensors do not "
                    "move between devices: make it again, or copy it through the host "
                    "(pr.tensor(t_old.numpy()) before switching)"
                )

    def _bind_group(self, key, modes, buffers):
        self._check_owned(buffers)
        if len(self._bind_groups) > 16384:
            self._graveyard.append(self._bind_groups)
            self._bind_groups = {}
        group = self._bind_groups[key] = self.make_bind_group(modes, buffers)
        return group

    def make_bind_group(self, modes, buffers, info=None):
        """A bind group of `buffers` in binding order and an info window of `info` (default: the
        per-batch arena; a recorded graph passes its own, backend/replay.py)."""
        bgl, _ = self._layout(modes)
        if len(modes) > len(buffers):  # (a checked trusted kernel, e.g. one compile/ fused)
            buffers = [*buffers, self._oob]
        if self._raw_group is not None:
            return self._raw_group(bgl, buffers, info)
        entries = [
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate(buffers)
        ]
        entries.append(
            {
                "binding": len(buffers),
                "resource": {
                    "buffer": self._info_gpu if info is None else info,
                    "offset": 0,
                    "size": INFO_WINDOW_WORDS * 4,
                },
            }
        )
        return self.device.create_bind_group(layout=bgl, entries=entries)

    # The pending batch: one command encoder and its open compute pass, recorded through
    # self._io (capi.py): C handles on the C path, wgpu-py objects on the checked one.
    def _new_encoder(self):
        self._encoder = self._io.encoder()
        self.pool.batch_open = True

    def _begin(self):
        if self._encoder is None:
            self._new_encoder()
        self._pass = self._io.begin_pass(self._encoder)
        self._last_pipeline = None
        return self._pass

    def _end_pass(self):
        if self._pass is not None:
            self._io.end_pass(self._pass)
            self._pass = None

    def copy(self, src_buffer, src_offset, dst_buffer, dst_offset, nbytes):
        """Record a buffer-to-buffer copy (offsets and size multiples of 4 bytes) in order."""
        with self._lock:
            self._check_owned((src_buffer, dst_buffer))
            self.pool.bounds.pop(id(dst_buffer), None)  # (a rerun's copy too: _copy does not run)
            tape = self._tape
            if tape is not None:
                if not tape.recording:
                    if tape.refresh_copy(src_buffer, src_offset, dst_buffer, dst_offset, nbytes):
                        return  # (refreshing or rerunning: the recorded copy stands)
                else:
                    tape.copy(src_buffer, src_offset, dst_buffer, dst_offset, nbytes)
            self._copy(src_buffer, src_offset, dst_buffer, dst_offset, nbytes)

    def _copy(self, src_buffer, src_offset, dst_buffer, dst_offset, nbytes):
        self._end_pass()
        if self._encoder is None:
            self._new_encoder()
        self._io.copy(self._encoder, src_buffer, src_offset, dst_buffer, dst_offset, nbytes)
        self.pool.bounds.pop(id(dst_buffer), None)
        self._count += 1

    def flush(self):
        """Submit what was recorded. The info arena is written first, in queue order."""
        with self._lock:
            self._flush()

    def _flush(self):
        self._end_pass()
        if self._encoder is None:
            return
        new, pos = self._info_new, self._info_pos
        if pos > new:  # the windows this batch added (the rest are on the GPU already)
            self._io.write(self._info_gpu, new * 4, self._info_host[new:pos])
            self._info_new = pos
        self._io.submit(self._encoder)
        self._encoder = None
        self._busy = True
        self._batch_limit = min(2 * self._batch_limit, BATCH_DISPATCHES)
        self._count = 0
        self._graveyard.clear()
        self.submits += 1
        self.pool.batch_submitted()

    # ---- transfers -------------------------------------------------------------------------
    def upload_new(self, data):
        """A new Storage holding these host bytes (written by the queue, before pending work)."""
        mv = memoryview(data).cast("B")
        storage = self.pool.allocate(max(len(mv), 4), upload=True)
        self.upload(storage, mv)
        return storage

    def upload(self, storage, data, byte_offset=0) -> None:
        """Write host bytes into a storage that no recorded command uses (see upload_new), at
        `byte_offset` (a multiple of 4: ops/core.upload_chunks writes a large tensor in pieces)."""
        mv = memoryview(data).cast("B")
        n = len(mv)
        if n % 4:
            padded = bytearray(n + (4 - n % 4))
            padded[:n] = mv
            mv = memoryview(padded)
        if n:
            with self._lock:
                self._check_owned((storage.buffer,))
                self.pool.bounds.pop(id(storage.buffer), None)  # (a rerun's upload too)
                tape = self._tape
                if tape is not None:
                    if not tape.recording:
                        if tape.refresh_upload(storage.buffer, byte_offset, mv):
                            return
                    else:
                        tape.upload(storage.buffer, byte_offset, mv)
                self._busy = True
                self._io.write(storage.buffer, byte_offset, mv)

    def persistent(self, key, data):
        """A storage that lives as long as the device, made once for `key` holding the bytes
        `data` (a multiple of 4; or a function giving them, called only when it is made): a
        kernel's own scratch whose contents carry from one dispatch to the next (ops/reduce.py's
        fused reductions, nn/_attention.py's fused decode merge: their counters and slots).
        Never freed, and never a compiled trace's buffer (pr.compile plans only what its tape
        allocated, so this one is made outside any tape)."""
        st = self._persistent.get(key)
        if st is None:
            if callable(data):
                data = data()
            with self._lock:
                tape, self.pool.tape = self.pool.tape, None
                try:
                    # upload=True: never a buffer released during the open batch. The queue's
                    # write lands before the whole batch is submitted, so such a buffer's
                    # earlier commands in that batch would read (or be overwritten by) these
                    # bytes: an lse sink made this way once zeroed a bias that load_state_dict
                    # was copying from its upload (tests/test_persistent_order.py)
                    st = self.pool.allocate(memoryview(data).nbytes, upload=True)
                finally:
                    self.pool.tape = tape
                self._io.write(st.buffer, 0, data)
                self._busy = True
            self._persistent[key] = st
        return st

    def read(self, buffer, byte_offset, nbytes) -> bytes:
        """Submit what is pending and read `nbytes` from the buffer (one round trip)."""
        return self.read_many([(buffer, byte_offset, nbytes)])[0]

    def read_many(self, reads, _sync=False) -> list:
        """Submit what is pending and read each (buffer, byte_offset, nbytes): one copy each
        into the persistent staging buffer and one map for all of them while they fit in it
        (STAGING_BYTES), so reading a loss and an accuracy costs one round trip."""
        with self._lock:
            self._check_owned(tuple(r[0] for r in reads))
            if self._tape is not None and not _sync:
                self._tape.read(reads)
            spans, pos = [], 0
            for buffer, byte_offset, nbytes in reads:
                start = byte_offset & ~3  # copies move whole 4-byte words
                end = min((byte_offset + nbytes + 3) & ~3, buffer.size) if nbytes else start
                spans.append((buffer, start, end - start, pos, byte_offset - start, nbytes))
                pos += end - start
            if pos == 0:
                self._flush()
                return [b"" for _ in reads]
            mappable = self.pool.mappable
            if (
                len(spans) <= MAPPABLE_MAX_READS
                and self._tape is None
                and all(id(sp[0]) in mappable for sp in spans)
            ):
                # mappable buffers (MAPPABLE): submit and map each where it is. A map waits for
                # the submits that use its buffer, not all: the device is not known idle after
                self._flush()
                self.readbacks += 1
                out = []
                for buffer, start, size, _, d, n in spans:
                    lo = start & ~7  # (a map's offset is a multiple of 8)
                    data = self._io.read_mapped(buffer, start + size - lo, lo)
                    out.append(bytes(data[start - lo + d : start - lo + d + n]))
                return out
            if self._staging is not None and pos <= STAGING_BYTES:
                data = self._read_staged(spans, pos)
                if data is not None:
                    return [bytes(data[p + d : p + d + n]) for _, _, _, p, d, n in spans]
            out = []
            for buffer, start, size, _, d, n in spans:
                data = self._read_large(buffer, start, size) if size else b""
                out.append(bytes(data[d : d + n]))
            return out

    def _read_staged(self, spans, total):
        """The spans copied side by side into the staging buffer, in the pending batch (one
        submit carries them), then mapped and waited for through self._io (capi.py: the C path's
        spin-then-block wait where there is one). None when this implementation cannot map it (then reads go the long
        way from now on). Every read waits for all work submitted before it (queue order), so
        afterwards the device is idle."""
        staging = self._staging
        self.readbacks += 1
        try:
            for buffer, start, size, pos, _, _ in spans:
                if size:
                    self._copy(buffer, start, staging, pos, size)
            self._flush()
            data = self._io.read_mapped(staging, total)
        except Exception:  # noqa: BLE001 - an implementation without this path: the other
            self._staging = None
            if getattr(staging, "map_state", "unmapped") == "mapped":
                staging.unmap()
            return None
        self._idle()
        return data

    def _read_large(self, buffer, start, size):
        """A read past the staging buffer: wgpu-py's read_buffer (a temporary mappable buffer,
        its own submit), in pieces of at most LARGE_READ_BYTES so a large tensor's read does
        not need as much again in mappable memory."""
        self._flush()
        self.readbacks += 1
        if size <= LARGE_READ_BYTES:
            data = self.queue.read_buffer(buffer, start, size)
        else:
            data = bytearray(size)
            for off in range(0, size, LARGE_READ_BYTES):
                n = min(LARGE_READ_BYTES, size - off)
                data[off : off + n] = self.queue.read_buffer(buffer, start + off, n)
        self._idle()
        return data

    def synchronize(self):
        """Submit what is pending and wait until the GPU has finished it. With nothing recorded
        or submitted since the last completed wait there is nothing to wait for: no round
        trip."""
        with self._lock:
            if self._encoder is None and not self._busy:
                return
            self.read_many([(self._tiny.buffer, 0, 4)], _sync=True)

    # ---- recording and replaying (backend/replay.py) --------------------------------------
    def record(self, tape):
        """Context: `tape` hears every dispatch, copy, upload, read and allocation within."""
        import contextlib

        @contextlib.contextmanager
        def recording():
            with self._lock:
                if self._tape is not None:
                    raise RuntimeError("pyrite: a compiled function ran inside another's trace")
                self._tape = tape
                self.pool.tape = tape
            try:
                yield tape
            finally:
                with self._lock:
                    self._tape = None
                    self.pool.tape = None
                    tape.finish()

        return recording()

    def replay(self, graph, before=(), after=(), chunk=None):
        """Submit pending work, then `before` (copies: (src, src offset, dst, dst offset,
        bytes)), the graph's commands and `after`, in one submission — or, with `chunk`, in
        submissions of at most that many kernels with a wait after each."""
        with self._lock:
            self._replay(graph, before, after, chunk)

    def _replay(self, graph, before=(), after=(), chunk=None, start=0, stop=None):
        """replay() of the graph's commands [start, stop) (a segment between graph breaks)."""
        self._flush()
        lo, hi = graph.dirty
        if hi > lo:
            w = INFO_WINDOW_WORDS
            self._io.write(graph.info_gpu, lo * w * 4, graph.info[lo * w : hi * w])
            graph.dirty = [graph.kernels, 0]
        io, c = self._io, self._c
        if c is not None:
            set_pipeline, set_group, dispatch, offsets = (
                c.set_pipeline,
                c.set_bind_group,
                c.dispatch,
                c.offsets,
            )
        self._new_encoder()
        enc = self._encoder
        for args in before:
            io.copy(enc, *args)
        cpass = None
        last = None
        count = 0
        for cmd in graph.commands[start:stop]:
            if cmd[0] == "d":
                _, pipeline, group, offset, grid, pipe_c, group_c = cmd
                if cpass is None:
                    cpass = self._pass = io.begin_pass(enc)
                    last = None
                if c is None:
                    if pipeline is not last:
                        cpass.set_pipeline(pipeline)
                        last = pipeline
                    cpass.set_bind_group(0, group, [offset])
                    cpass.dispatch_workgroups(*grid)
                else:
                    if pipe_c is not last:
                        set_pipeline(cpass, pipe_c)
                        last = pipe_c
                    offsets[0] = offset
                    set_group(cpass, 0, group_c, 1, offsets)
                    dispatch(cpass, *grid)
                count += 1
                if chunk and count % chunk == 0:
                    cpass = None
                    self._flush()
                    self.read_many([(self._tiny.buffer, 0, 4)], _sync=True)
                    self._new_encoder()
                    enc = self._encoder
            else:
                if cpass is not None:
                    self._end_pass()
                    cpass = None
                io.copy(enc, *cmd[1:])
        if cpass is not None:
            self._end_pass()
        for args in after:
            io.copy(enc, *args)
        self.dispatches += count
        self._count = count
        self._flush()

    def _idle(self):
        """A wait completed: everything submitted has run."""
        self._busy = False
        self._batch_limit = BATCH_FIRST

    def info(self) -> dict:
        return {
            "name": self.name,
            "implementation": self.impl,
            "backend": self.backend_type,
            "type": self.adapter_type,
            "driver": self.driver,
            "vendor": self.adapter.info.get("vendor", ""),
            "features": list(self.features),
            "limits": dict(self.limits),
            "loop_budget": self.loop_budget,
            "flushes_subnormals": self.flushes_subnormals,
            "total_memory": self.total_memory,
            "total_memory_source": self._memory_source,
        }

    @property
    def total_memory(self) -> int:
        """The adapter's memory in bytes, as far as WebGPU lets pyrite know (it has no query for
        it): Dawn's memory heaps where the adapter reports them (the device-local ones), the
        host's physical memory for a CPU adapter (lavapipe's buffers are host memory), else
        maxBufferSize, the largest one buffer may be (a lower bound). `_memory_source` names
        which."""
        if getattr(self, "_total_memory", None) is None:
            self._total_memory, self._memory_source = self._find_total_memory()
        return self._total_memory

    def _find_total_memory(self):
        if self.impl == "dawn" and "adapter-properties-memory-heaps" in self.adapter.features:
            try:
                from wgpudawn.backends.dawn import extras

                heaps = extras.get_adapter_properties(self.adapter).get("memory_heaps", [])
                local = sum(h["size"] for h in heaps if "device-local" in h["properties"])
                if local > 0:
                    return int(local), "memory heaps"
            except Exception:  # noqa: BLE001 - an older wgpudawn, or Dawn refusing the query
                pass
        if self.adapter_type == "CPU":
            try:
                return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "host memory"
            except (ValueError, OSError, AttributeError):
                pass
        return int(self.limits["max-buffer-size"]), "max-buffer-size"


def debug_level() -> int:
    """PYRITE_DEBUG as a level (README: 1 checked wgpu calls, 2 report each pipeline build,
    3 also print its WGSL; higher levels include the lower); unset or empty is 0. Anything
    else is refused at once, naming the variable, rather than failing inside int()."""
    raw = os.environ.get("PYRITE_DEBUG", "").strip()
    if not raw:
        return 0
    try:
        level = int(raw)
    except ValueError:
        level = -1
    if level < 0:
        raise ValueError(
            f"pyrite: PYRITE_DEBUG={raw!r} is not a debug level: it accepts a non-negative "
            "integer (0 off, 1 checked wgpu calls, 2 report each pipeline build, 3 also print "
            "its WGSL), or unset"
        )
    return level
