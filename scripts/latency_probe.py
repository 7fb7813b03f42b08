"""Where a small readback's time goes, and which wait is fastest, on the current implementation
(issue 9): `PYRITE_BACKEND=wgpu|dawn python scripts/latency_probe.py`.

Prints the median microseconds of each piece of a 4-byte round trip (encode a copy, submit,
wait for the map, read and unmap), done through wgpu-py and through the C entry points with each
way of waiting the implementation offers; then the dispatch counts and host/GPU split of the
op mixes of issue 9 (a small reduction, the small linears, a chain of linears).
"""

import sys

import pyrite as pr
from pyrite import backend
from pyrite.bench import _median_us

dev = backend.current()
api = sys.modules[type(dev.device).__module__]
ffi, lib = api.ffi, api.lib
print(f"{dev.name} ({dev.impl})")


def med(fn, n=300, w=30):
    return _median_us(fn, n, w)


x = pr.randn(128, 768)
pr.synchronize()
src = x._storage.buffer
st = dev.device.create_buffer(size=256, usage=0x0001 | 0x0008)  # MAP_READ | COPY_DST
st_c, src_c, q_c, dev_c = st._internal, src._internal, dev.queue._internal, dev.device._internal


def enc_copy():
    e = dev.device.create_command_encoder()
    e.copy_buffer_to_buffer(src, 0, st, 0, 4)
    return e.finish()


def py_submit():
    dev.queue.submit([enc_copy()])


def py_map():
    st.map_async("READ_NOSYNC", 0, 4).sync_wait()
    b = st.read_mapped(0, 4)
    st.unmap()
    return b


cmd = ffi.new("WGPUCommandBuffer[1]")


def raw_submit():
    e = lib.wgpuDeviceCreateCommandEncoder(dev_c, ffi.NULL)
    lib.wgpuCommandEncoderCopyBufferToBuffer(e, src_c, 0, st_c, 0, 4)
    cmd[0] = lib.wgpuCommandEncoderFinish(e, ffi.NULL)
    lib.wgpuQueueSubmit(q_c, 1, cmd)
    lib.wgpuCommandBufferRelease(cmd[0])
    lib.wgpuCommandEncoderRelease(e)


done = [0, 0]


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def on_mapped(status, message, u1, u2):
    done[0] = 1
    done[1] = status


def cbinfo(mode):
    info = ffi.new("WGPUBufferMapCallbackInfo *")
    info.mode = mode
    info.callback = on_mapped
    return info


def take():
    ptr = lib.wgpuBufferGetConstMappedRange(st_c, 0, 4)
    b = bytes(ffi.buffer(ptr, 4))
    lib.wgpuBufferUnmap(st_c)
    return b


waits = {}
if dev.impl == "wgpu":
    info_pe = cbinfo(lib.WGPUCallbackMode_AllowProcessEvents)

    def poll_block():
        done[0] = 0
        lib.wgpuBufferMapAsync(st_c, lib.WGPUMapMode_Read, 0, 4, info_pe[0])
        while not done[0]:
            lib.wgpuDevicePoll(dev_c, 1, ffi.NULL)
        return take()

    def poll_spin():
        done[0] = 0
        lib.wgpuBufferMapAsync(st_c, lib.WGPUMapMode_Read, 0, 4, info_pe[0])
        while not done[0]:
            lib.wgpuDevicePoll(dev_c, 0, ffi.NULL)
        return take()

    waits = {"poll(wait)": poll_block, "poll spin": poll_spin}
else:
    from wgpudawn.backends.dawn._helpers import get_wgpu_instance

    inst = get_wgpu_instance()
    info_wa = cbinfo(lib.WGPUCallbackMode_WaitAnyOnly)
    info_pe = cbinfo(lib.WGPUCallbackMode_AllowProcessEvents)
    info_sp = cbinfo(lib.WGPUCallbackMode_AllowSpontaneous)
    wi = ffi.new("WGPUFutureWaitInfo *")

    def waitany(timeout):
        def f():
            done[0] = 0
            fut = lib.wgpuBufferMapAsync(st_c, lib.WGPUMapMode_Read, 0, 4, info_wa[0])
            wi.future = fut
            wi.completed = 0
            while not wi.completed:
                lib.wgpuInstanceWaitAny(inst, 1, wi, timeout)
            return take()

        return f

    def pe_spin():
        done[0] = 0
        lib.wgpuBufferMapAsync(st_c, lib.WGPUMapMode_Read, 0, 4, info_pe[0])
        while not done[0]:
            lib.wgpuInstanceProcessEvents(inst)
        return take()

    def spont_spin():
        done[0] = 0
        lib.wgpuBufferMapAsync(st_c, lib.WGPUMapMode_Read, 0, 4, info_sp[0])
        while not done[0]:
            lib.wgpuInstanceProcessEvents(inst)
        return take()

    waits = {
        "WaitAny(0.1s)": waitany(100_000_000),
        "WaitAny(0) spin": waitany(0),
        "ProcessEvents spin": pe_spin,
        "spontaneous+PE spin": spont_spin,
    }

print(f"  encode copy + finish (wgpu-py)     {med(enc_copy):7.1f} us")
print(f"  encode + submit (wgpu-py)          {med(py_submit):7.1f} us")
print(f"  encode + submit (C)                {med(raw_submit):7.1f} us")
dev.queue.submit([])
print(f"  submit + map + read (wgpu-py)      {med(lambda: (py_submit(), py_map())):7.1f} us")
for name, w in waits.items():
    print(f"  submit (C) + {name:<22}{med(lambda w=w: (raw_submit(), w())):7.1f} us")
    print(f"  map, nothing pending, {name:<13}{med(w):7.1f} us")

# the pyrite calls themselves
print(f"  pyrite x[0,0].item()               {med(lambda: x[0, 0].item()):7.1f} us")
print(f"  pyrite x.sum().item()              {med(lambda: x.sum().item()):7.1f} us")
print(f"  pyrite synchronize()               {med(pr.synchronize):7.1f} us")
d0, s0 = dev.dispatches, dev.submits
x.sum().item()
print(f"  x.sum().item(): {dev.dispatches - d0} dispatches, {dev.submits - s0} submits")
y = x.sum()
pr.synchronize()
print(f"  y.item() of a computed sum         {med(lambda: y.item()):7.1f} us")
print(f"  x.sum() then synchronize()         {med(lambda: (x.sum(), pr.synchronize())):7.1f} us")

# op mixes: host time to record vs time with the GPU's work included
F = pr.nn.functional
for m, k, n in ((1, 768, 768), (8, 768, 768), (32, 768, 768), (128, 768, 768), (128, 768, 3072),
                (128, 3072, 768), (512, 768, 768)):  # fmt: skip
    a, w, b = pr.randn(m, k), pr.randn(n, k), pr.randn(n)
    F.linear(a, w, b)
    pr.synchronize()

    def many(r=50):
        for _ in range(r):
            F.linear(a, w, b)

    host = med(many, n=10, w=2) / 50
    full = med(lambda: (many(), pr.synchronize()), n=10, w=2) / 50
    from pyrite.ops import matmul as _mm

    print(f"  F.linear {m}x{k}.{n}x{k}T+b: host {host:6.1f} us/op, with GPU {full:6.1f} us/op  "
          f"{_mm.LAST}  ({2 * m * n * k / full / 1e6:.2f} TFLOP/s)")  # fmt: skip

# the small reduction: host cost, and GPU cost by path
from pyrite.ops import reduce as _red  # noqa: E402

for split in (True, False):
    _red.SPLIT = split
    x.sum()
    pr.synchronize()
    print(f"  x.sum() SPLIT={split}: {_red.LAST_PATH}: host {med(lambda: x.sum()):6.1f} us, "
          f"sum+sync {med(lambda: (x.sum(), pr.synchronize())):6.1f} us, "
          f"sum().item() {med(lambda: x.sum().item()):6.1f} us")  # fmt: skip
_red.SPLIT = True
z = pr.randn(16)
print(f"  z.sum().item(), z of 16             {med(lambda: z.sum().item()):7.1f} us")
print(f"  (x * 2) then synchronize()          {med(lambda: (x * 2, pr.synchronize())):7.1f} us")
