"""Device buffers: one `Storage` per allocation, recycled through a pool of size classes.

A tensor and all its views share one Storage. When the last reference dies its buffer goes back to
the pool at once. A buffer freed while commands are recorded but not yet submitted may still be
read by them, which is harmless for the next kernel output (commands in one encoder run in order)
but not for an upload: `queue.write_buffer` runs before the pending batch. So such buffers sit in
`recent` until the batch is submitted; kernel outputs may take them, uploads may not (nor
anything else the queue writes first: Device.persistent's scratch asks as an upload).
"""

from __future__ import annotations

import collections
import threading

from ..errors import OutOfMemoryError

# Size classes: multiples of 256 bytes up to 4 KiB, then four steps per power of two (≤ 25 %
# waste). 256 is WebGPU's `minStorageBufferOffsetAlignment` default, the largest a device may ask.
_SMALL = 4096


def size_class(nbytes: int) -> int:
    if nbytes <= _SMALL:
        return max(256, (nbytes + 255) & ~255)
    top = 1 << (nbytes - 1).bit_length()  # next power of two
    step = top >> 3  # quarters of the octave [top/2, top]
    return (nbytes + step - 1) // step * step


class Storage:
    """One device buffer (or a region of one) owned by tensors; returns to the pool when freed."""

    # version: bumped by every in-place write (autograd's check that saved tensors are unchanged)
    # logical_nbytes: the bytes torch would give the elements it was made for (n × itemsize:
    # no rounding to words, 1 an int8 element; ops/core.py sets it), else nbytes
    # (Tensor.untyped_storage().nbytes())
    __slots__ = ("__weakref__", "buffer", "logical_nbytes", "nbytes", "pool", "version")

    def __init__(self, buffer, nbytes, pool):
        self.buffer = buffer
        self.nbytes = nbytes
        self.logical_nbytes = nbytes
        self.pool = pool
        self.version = 0

    def __del__(self):
        pool = self.pool
        if pool is not None:
            pool.release(self.buffer)


class Pin:
    """A buffer held by recorded graphs: how many hold it, whether its Storage has died, and
    who wants to hear of that death (a graph whose replays read it as an input it did not
    make: once it dies the graph is stale)."""

    __slots__ = ("buffer", "count", "dead", "watchers")

    def __init__(self, buffer):
        self.buffer = buffer
        self.count = 0
        self.dead = False
        self.watchers = []

    def died(self, pool):
        self.dead = True
        for w in list(self.watchers):
            w.on_release(self.buffer)


class PoolStats:
    """The pool's counters of rarer events, since the process began: bytes and buffers created
    and destroyed (trim), the most buffers held at once, creations retried after a trim, and
    OutOfMemoryErrors raised; and the totals when reset_accumulated_memory_stats last ran."""

    __slots__ = (
        "accumulated_base",
        "created_bytes",
        "destroyed",
        "destroyed_bytes",
        "ooms",
        "peak_segments",
        "retries",
    )

    def __init__(self):
        self.created_bytes = self.destroyed = self.destroyed_bytes = 0
        self.peak_segments = self.retries = self.ooms = 0
        self.accumulated_base: dict = {}


class BufferPool:
    def __init__(self, device, usage, max_buffer, max_binding):
        # One re-entrant lock for the pool and the device's pending batch (backend/device.py):
        # tensors may be made, used and freed from several threads, and a Storage may die (and
        # release its buffer) in any thread, inside any of these calls.
        self.lock = threading.RLock()
        # Buffers released while another thread holds the lock wait here (see release()).
        self.deferred: collections.deque = collections.deque()
        self.device = device
        self.usage = usage
        self.max_buffer = max_buffer
        self.max_binding = max_binding
        self.free: dict[int, list] = {}
        self.recent: dict[int, list] = {}  # freed during the open batch: not for uploads
        self.recent_bytes = 0
        self.batch_open = False  # set by the device while commands are recorded but not submitted
        self.live_bytes = 0
        self.pooled_bytes = 0
        self.peak_live_bytes = 0
        # the most bytes held from the driver at once (live + pooled + recent, as
        # runtime.memory_reserved counts them): torch.cuda.max_memory_reserved
        self.peak_reserved_bytes = 0
        self.allocations = 0  # buffers created on the device, ever
        # torch.cuda.memory_stats (pyrite/memstats.py): the bytes tensors gave back (so
        # live_bytes + freed_bytes were handed out), the one figure counted on the way of
        # every tensor (an add in _release: 0.02-0.05 µs of ~1.9 µs an allocate and release on
        # the development machine, where counting allocations, frees and the peak count too
        # cost 0.33 µs; memstats derives the live buffers' count from the pool's lists), and
        # the counters of rarer events, in one object: with them as 7 more attributes here
        # (30 in all) the pair took 0.2 µs longer than with one more (CPython 3.11 shares an
        # instance dict's keys, the fast attribute path, for up to 30 of them)
        self.freed_bytes = 0
        self.stats = PoolStats()
        self.on_trim = None  # the device forgets bind groups naming buffers about to go
        # Value bounds of integer buffers known without a readback, id(buffer) -> (lo, hi,
        # n_exact): set by an upload from the host (the exact min and max of its n_exact
        # elements) or by a kernel whose outputs lie in a range by construction (n_exact -1),
        # dropped by any write to the buffer (device.py) and when the buffer comes back here.
        # Index range checks consult it before reading anything back (ops/core.known_bounds).
        self.bounds: dict[int, tuple[int, int, int]] = {}
        # Every buffer the pool made, held until trim() destroys it. Without this, tensors that
        # die inside a garbage-collected reference cycle can take their GPUBuffer down in the
        # same pass (wgpu-py releasing the handle first), and Storage.__del__ would then pool a
        # released buffer: the next bind group naming it aborts the process.
        self.owned: dict[int, object] = {}
        # Buffers a recorded graph names (backend/replay.py): id(buffer) -> Pin. A pinned buffer
        # whose Storage dies is held, not pooled, until the last graph naming it lets go.
        self.pins: dict[int, Pin] = {}
        self.tape = None  # the Tape recording now (device.record), or None
        # Buffers the host may map for reading directly (usage | MAP_READ: wgpu-native's
        # mappable-primary-buffers, device.py MAPPABLE): ids, pooled apart under size key -size.
        self.mappable: set[int] = set()
        self.mappable_usage = None  # (the device sets it where it has the feature)

    def allocate(
        self, nbytes: int, upload: bool = False, mappable: bool = False, size: int = 0
    ) -> Storage:
        """A buffer of at least `nbytes`; `upload=True` for one about to be written by the queue;
        `mappable`: one the host can map to read (where the device has them, and not for a
        compiled trace's tape). `size`: nbytes' size class where the caller keeps it (every op's
        output: ops/core._layouts), else 0. (One function with the lock inside: this runs for
        every tensor an op makes, and a call more costs ~0.1 µs of its ~5 µs on a fast host.)"""
        with self.lock:
            if self.deferred:
                self._drain()
            if nbytes > self.max_binding:
                self.stats.ooms += 1
                raise OutOfMemoryError(
                    f"pyrite: a tensor of {nbytes:,} bytes exceeds this device's largest storage "
                    f"binding ({self.max_binding:,} bytes, maxStorageBufferBindingSize); split it "
                    "into smaller tensors"
                )
            if not size:
                size = size_class(nbytes)
            tape = self.tape
            if tape is not None:
                return tape.allocate(self, nbytes, size, upload)
            if mappable and self.mappable_usage is not None:
                key = -size  # (mappable buffers pool apart: see self.mappable)
            else:
                key = size
                mappable = False
            bucket = None if upload else self.recent.get(key)
            if bucket:
                buffer = bucket.pop()
                self.recent_bytes -= size
            else:
                bucket = self.free.get(key)
                if bucket:
                    buffer = bucket.pop()
                    self.pooled_bytes -= size
                elif mappable:
                    buffer = self._create(size, self.mappable_usage)
                    self.mappable.add(id(buffer))
                else:
                    buffer = self._create(size)
            live = self.live_bytes = self.live_bytes + size
            if live > self.peak_live_bytes:
                self.peak_live_bytes = live
            reserved = live + self.pooled_bytes + self.recent_bytes
            if reserved > self.peak_reserved_bytes:
                self.peak_reserved_bytes = reserved
            return Storage(buffer, nbytes, self)

    def _create(self, size, usage=None):
        usage = self.usage if usage is None else usage
        try:
            buffer = self.device.create_buffer(size=size, usage=usage)
        except Exception as exc:  # noqa: BLE001 - the driver's words are wrapped, never shown raw
            self.stats.retries += 1
            self.trim()
            try:
                buffer = self.device.create_buffer(size=size, usage=usage)
            except Exception:  # noqa: BLE001
                self.stats.ooms += 1
                raise OutOfMemoryError(
                    f"pyrite: could not allocate {size:,} bytes on the device "
                    f"({self.live_bytes:,} bytes live): {type(exc).__name__}"
                ) from None
        self.allocations += 1
        stats = self.stats
        stats.created_bytes += size
        stats.peak_segments = max(stats.peak_segments, self.segments)
        self.owned[id(buffer)] = buffer
        return buffer

    def release(self, buffer):
        """Return a buffer to the pool; called from Storage.__del__, so in any thread, at any
        moment. It must never wait: wgpu-py's poller thread can collect garbage (and so run
        __del__) while the main thread holds the lock waiting for that same poller to deliver a
        readback, which deadlocked (tests/test_leak.py). A release that finds the lock taken is
        deferred (deque.append is atomic) and done by the next allocation or submit."""
        if self.lock.acquire(False):  # (blocking=False: positional, a keyword costs ~0.13 µs)
            try:
                if self.deferred:
                    self._drain()
                self._release(buffer)
            finally:
                self.lock.release()
        else:
            self.deferred.append(buffer)

    def _drain(self):
        while self.deferred:
            self._release(self.deferred.popleft())

    def _release(self, buffer):
        if self.bounds:
            self.bounds.pop(id(buffer), None)
        size = buffer.size  # (a property of wgpu-py's: read once, passed on)
        self.live_bytes -= size
        self.freed_bytes += size
        if self.pins:
            pin = self.pins.get(id(buffer))
            if pin is not None:
                pin.died(self)
                return
        if self.mappable and id(buffer) in self.mappable:
            self._pool(buffer, size)
        elif self.batch_open:  # (_pool's two lines for a plain buffer: every op's output ends
            # here, and the call more costs ~0.1 µs)
            bucket = self.recent.get(size)
            if bucket is None:
                self.recent[size] = [buffer]
            else:
                bucket.append(buffer)
            self.recent_bytes += size
        else:
            self._pool(buffer, size)

    def _pool(self, buffer, size=None):
        if size is None:
            size = buffer.size
        key = -size if self.mappable and id(buffer) in self.mappable else size
        if self.batch_open:
            self.recent.setdefault(key, []).append(buffer)
            self.recent_bytes += size
        else:
            self.free.setdefault(key, []).append(buffer)
            self.pooled_bytes += size

    def pin(self, buffer, watcher=None) -> Pin:
        """Hold `buffer` for a graph: while pinned it never returns to the pool. `watcher`
        (an object with `on_release(buffer)`) hears when the buffer's Storage dies."""
        with self.lock:
            pin = self.pins.get(id(buffer))
            if pin is None:
                pin = self.pins[id(buffer)] = Pin(buffer)
            pin.count += 1
            if watcher is not None:
                pin.watchers.append(watcher)
            return pin

    def unpin(self, buffer, watcher=None):
        with self.lock:
            pin = self.pins.get(id(buffer))
            if pin is None:
                return
            if watcher is not None and watcher in pin.watchers:
                pin.watchers.remove(watcher)
            pin.count -= 1
            if pin.count <= 0:
                del self.pins[id(buffer)]
                if pin.dead and id(buffer) in self.owned:
                    self._pool(buffer)

    @property
    def reserved_bytes(self) -> int:
        """Bytes held from the driver: live tensors' and pooled buffers' (torch's reserved;
        `allocate` adds it up inline for its peak)."""
        return self.live_bytes + self.pooled_bytes + self.recent_bytes

    @property
    def segments(self) -> int:
        """Buffers created on the device and not yet destroyed."""
        return self.allocations - self.stats.destroyed

    @property
    def held_bytes(self) -> int:
        """Bytes of buffers no tensor holds that graphs keep for their replays."""
        return sum(p.buffer.size for p in self.pins.values() if p.dead)

    def batch_submitted(self):  # called by the device with the lock held
        if self.deferred:
            self._drain()
        self.batch_open = False
        for size, bucket in self.recent.items():
            self.free.setdefault(size, []).extend(bucket)
        self.pooled_bytes += self.recent_bytes
        self.recent.clear()
        self.recent_bytes = 0

    def trim(self):
        """Give every pooled buffer back to the driver."""
        with self.lock:
            self._trim()

    def _trim(self):
        if self.deferred:
            self._drain()
        if self.on_trim is not None:
            self.on_trim()
        for bucket in self.free.values():
            for buffer in bucket:
                self.owned.pop(id(buffer), None)
                self.mappable.discard(id(buffer))
                self.stats.destroyed += 1
                self.stats.destroyed_bytes += buffer.size
                buffer.destroy()
        self.free.clear()
        self.pooled_bytes = 0
