"""The WebGPU C entry points behind wgpu-py, for the device's hot path.

wgpu-py wraps every call in Python: argument conversion, error capture, struct building, and for
a map a promise and (wgpu-native) a poll thread. An eager op or a readback is a handful of such
calls, and they cost more than the GPU's work. Both `wgpu` and `wgpudawn` expose the C library
they wrap (`backends.<impl>._api.lib`, cffi), so the device records, submits and reads through
it directly. pyrite validates its own dispatches; PYRITE_SAFE_CALLS=1 or PYRITE_DEBUG >= 1 keeps
wgpu-py's checked calls everywhere (Device uses this module only when `CPath.open` succeeds).

Measured on the H200, 2026-12-01 (`scripts/latency_probe.py`, median µs of a 4-byte round trip,
wgpu-native / Dawn): encode a copy and submit through wgpu-py 38.2 / 18.1, through C 18.6 / 8.9;
submit (C) then wait for the map by a blocking wait (wgpuDevicePoll(wait) / WaitAny with a
timeout) 54.2 / 47.7, by spinning a non-blocking check (wgpuDevicePoll(no wait) / WaitAny(0))
28.6 / 21.7; wgpu-py's own submit + map + read 127.0 / 46.1. So a map is waited for by spinning
for up to SPIN_S, then by the blocking wait (a long synchronize should not hold a core).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..errors import DeviceError

# Spin on a non-blocking check for this long before falling back to the blocking wait. A small
# readback completes in 20-30 µs on the H200; a training step's synchronize takes milliseconds,
# and there the blocking wait's extra ~25 µs is noise.
SPIN_S = 0.002


class CPath:
    """Encoders, passes, copies, writes, submits and mapped reads through the C library."""

    @classmethod
    def open(cls, device, impl: str):
        """A CPath for this wgpu-py device, or None (checked calls asked for, or a binding
        that does not look as expected: then wgpu-py's calls serve)."""
        if os.environ.get("PYRITE_SAFE_CALLS"):
            return None
        try:
            return cls(device, impl)
        except Exception:  # noqa: BLE001 - any surprise: the checked path
            return None

    def __init__(self, device, impl):
        api = sys.modules[type(device).__module__]
        ffi, lib = api.ffi, api.lib
        self.api, self.ffi, self.lib, self.impl = api, ffi, lib, impl
        self._done = None  # track_done's counts
        self.dev_c = device._internal
        self.q_c = device.queue._internal
        self._enc_desc = ffi.new("WGPUCommandEncoderDescriptor *")
        self._pass_desc = ffi.new("WGPUComputePassDescriptor *")
        self._cmd = ffi.new("WGPUCommandBuffer[1]")
        # the hot calls, looked up once
        self.set_pipeline = lib.wgpuComputePassEncoderSetPipeline
        self.set_bind_group = lib.wgpuComputePassEncoderSetBindGroup
        self.dispatch = lib.wgpuComputePassEncoderDispatchWorkgroups
        self.offsets = ffi.new("uint32_t[1]")
        self._create_encoder = lib.wgpuDeviceCreateCommandEncoder
        self._begin = lib.wgpuCommandEncoderBeginComputePass
        self._end = lib.wgpuComputePassEncoderEnd
        self._release_pass = lib.wgpuComputePassEncoderRelease
        self._copy = lib.wgpuCommandEncoderCopyBufferToBuffer
        self._finish = lib.wgpuCommandEncoderFinish
        self._submit = lib.wgpuQueueSubmit
        self._release_cmd = lib.wgpuCommandBufferRelease
        self._release_enc = lib.wgpuCommandEncoderRelease
        self._write = lib.wgpuQueueWriteBuffer
        self._map = lib.wgpuBufferMapAsync
        self._range = lib.wgpuBufferGetConstMappedRange
        self._unmap = lib.wgpuBufferUnmap
        self._read_mode = lib.WGPUMapMode_Read
        self._ok = lib.WGPUMapAsyncStatus_Success
        self._state = [0, 0]  # [fired, status] of the last map
        state = self._state

        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def on_mapped(status, message, u1, u2):
            state[0] = 1
            state[1] = status

        self._on_mapped = on_mapped  # kept alive as long as this object
        self._map_info = ffi.new("WGPUBufferMapCallbackInfo *")
        self._map_info.callback = on_mapped
        if impl == "wgpu":
            # wgpu-native: the callback runs inside wgpuDevicePoll on this thread
            self._map_info.mode = lib.WGPUCallbackMode_AllowProcessEvents
            self._poll = lib.wgpuDevicePoll
            self.wait = self._wait_poll
        else:
            # Dawn: wgpuInstanceWaitAny on the map's future runs the callback
            self._map_info.mode = lib.WGPUCallbackMode_WaitAnyOnly
            self._inst = api.get_wgpu_instance()
            self._wait_any = lib.wgpuInstanceWaitAny
            self._wait_info = ffi.new("WGPUFutureWaitInfo *")
            self.wait = self._wait_future
        # a smoke test of every call on a scratch pair of buffers, so a binding whose C names
        # or structs differ fails here (and the checked path serves) rather than mid-training
        usage = api.flags.BufferUsage
        src = device.create_buffer(size=16, usage=usage.COPY_SRC | usage.COPY_DST)
        dst = device.create_buffer(size=16, usage=usage.MAP_READ | usage.COPY_DST)
        want = np.arange(4, dtype=np.int32) + 7
        self.write(src, 0, want)
        enc = self.encoder()
        self.end_pass(self.begin_pass(enc))
        self.copy(enc, src, 0, dst, 0, 16)
        self.submit(enc)
        got = np.frombuffer(self.read_mapped(dst, 16), np.int32)
        src.destroy()
        dst.destroy()
        if not (got == want).all():
            raise DeviceError("pyrite: the C path's smoke test read back the wrong bytes")

    # ---- recording -----------------------------------------------------------------------
    def encoder(self):
        return self._create_encoder(self.dev_c, self._enc_desc)

    def begin_pass(self, enc):
        return self._begin(enc, self._pass_desc)

    def end_pass(self, cpass):
        self._end(cpass)
        self._release_pass(cpass)

    def copy(self, enc, src, src_offset, dst, dst_offset, nbytes):
        self._copy(enc, src._internal, src_offset, dst._internal, dst_offset, nbytes)

    def submit(self, enc):
        """Finish the encoder, submit it and release both handles."""
        cmd = self._cmd
        cmd[0] = self._finish(enc, self.ffi.NULL)
        self._submit(self.q_c, 1, cmd)
        self._release_cmd(cmd[0])
        self._release_enc(enc)
        done = self._done
        if done is not None:
            done[0] += 1
            self._on_submitted(self.q_c, self._done_info[0])

    def drop(self, enc, cpass):
        """Release an encoder (and its open pass) that will not be submitted."""
        if cpass is not None:
            self.end_pass(cpass)
        self._release_enc(enc)

    def write(self, buffer, offset, data):
        """queue.writeBuffer of a host buffer (numpy array or bytes-like, contiguous)."""
        view = self.ffi.from_buffer(data)
        self._write(self.q_c, buffer._internal, offset, view, len(view))

    def track_done(self):
        """Count submissions as they complete, for queue_idle (Dawn: a work-done callback a
        submit, run by wgpuInstanceProcessEvents; wgpu-native's poll reports it by itself)."""
        if self.impl == "wgpu" or self._done is not None:
            return
        ffi, lib = self.ffi, self.lib
        done = self._done = [0, 0]  # [submitted, completed]

        @ffi.callback("void(WGPUQueueWorkDoneStatus, WGPUStringView, void *, void *)")
        def on_done(status, message, u1, u2):
            done[1] += 1

        self._on_done = on_done
        self._done_info = ffi.new("WGPUQueueWorkDoneCallbackInfo *")
        self._done_info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        self._done_info.callback = on_done
        self._on_submitted = lib.wgpuQueueOnSubmittedWorkDone
        self._process = lib.wgpuInstanceProcessEvents

    def queue_idle(self) -> bool:
        """Whether everything submitted has run: a non-blocking check (wgpu-native: its poll's
        answer; Dawn: the work-done callbacks counted since track_done, False before it)."""
        if self.impl == "wgpu":
            return bool(self._poll(self.dev_c, 0, self.ffi.NULL))
        done = self._done
        if done is None:
            return False
        if done[1] < done[0]:
            self._process(self._inst)
        return done[1] >= done[0]

    # ---- reading back ----------------------------------------------------------------------
    def read_mapped(self, buffer, size, offset=0) -> bytes:
        """Map `size` bytes of a MAP_READ buffer from `offset` (a multiple of 8), wait, copy
        them out, unmap."""
        state = self._state
        state[0] = 0
        buf_c = buffer._internal
        future = self._map(buf_c, self._read_mode, offset, size, self._map_info[0])
        self.wait(future)
        if state[1] != self._ok:
            raise DeviceError(f"pyrite: mapping the readback buffer failed (status {state[1]})")
        try:
            return bytes(self.ffi.buffer(self._range(buf_c, offset, size), size))
        finally:
            self._unmap(buf_c)

    def _wait_poll(self, future):
        state, poll, dev_c, null = self._state, self._poll, self.dev_c, self.ffi.NULL
        t_end = time.perf_counter() + SPIN_S
        while not state[0]:
            poll(dev_c, 0, null)
            if time.perf_counter() > t_end:
                while not state[0]:
                    poll(dev_c, 1, null)
                return

    def _wait_future(self, future):
        info, wait_any, inst = self._wait_info, self._wait_any, self._inst
        info.future = future
        info.completed = 0
        t_end = time.perf_counter() + SPIN_S
        while not info.completed:
            wait_any(inst, 1, info, 0)
            if time.perf_counter() > t_end:
                while not info.completed:  # 0.1 s at a time, so Ctrl-C comes through
                    wait_any(inst, 1, info, 100_000_000)
                return


def trusted_module(device, code: str):
    """A WGSL shader module built by wgpu-native without its run-time checks
    (`wgpuDeviceCreateShaderModuleTrusted` with no `WGPUShaderRuntimeChecks`): naga clamps every
    dynamic index into a workgroup or function array with a `min` (and a bounded counter into
    every loop) unless told not to, and those clamps sit in the inner loops of the tiled kernels,
    where they also stop the driver folding a constant offset into the load. Storage buffers
    keep the driver's robust buffer access. Only for kernels whose indexing is in range by
    construction (marked kernels/common.TRUSTED). None where the binding lacks the entry point."""
    api = sys.modules[type(device).__module__]
    ffi, lib, libf = api.ffi, api.lib, getattr(api, "libf", None)
    fn = getattr(libf, "wgpuDeviceCreateShaderModuleTrusted", None)
    if fn is None:
        return None
    src = ffi.new("WGPUShaderSourceWGSL *")
    raw = code.encode()
    keep = ffi.new("char[]", raw)
    src.code.data, src.code.length = keep, len(raw)
    src.chain.next = ffi.NULL
    src.chain.sType = lib.WGPUSType_ShaderSourceWGSL
    desc = ffi.new("WGPUShaderModuleDescriptor *")
    desc.nextInChain = ffi.cast("WGPUChainedStruct *", src)
    desc.label.data, desc.label.length = ffi.NULL, 0
    handle = fn(device._internal, desc, lib.WGPUShaderRuntimeChecks_None)
    if handle == ffi.NULL:
        raise RuntimeError("shader module creation failed")
    return api.GPUShaderModule("", handle, device)


class CheckedPath:
    """The same recording, submitting and reading calls as CPath, through wgpu-py's checked
    API: PYRITE_SAFE_CALLS=1, PYRITE_DEBUG >= 1, or a binding CPath could not open."""

    def __init__(self, device):
        self.device, self.queue = device, device.queue

    def encoder(self):
        return self.device.create_command_encoder()

    def begin_pass(self, enc):
        return enc.begin_compute_pass()

    def end_pass(self, cpass):
        cpass.end()

    def copy(self, enc, src, src_offset, dst, dst_offset, nbytes):
        enc.copy_buffer_to_buffer(src, src_offset, dst, dst_offset, nbytes)

    def submit(self, enc):
        self.queue.submit([enc.finish()])

    def drop(self, enc, cpass):
        if cpass is not None:
            cpass.end()

    def write(self, buffer, offset, data):
        self.queue.write_buffer(buffer, offset, data)

    def read_mapped(self, buffer, size, offset=0):
        buffer.map_async("READ_NOSYNC", offset, size).sync_wait()
        try:
            return buffer.read_mapped(offset, size)
        finally:
            buffer.unmap()
