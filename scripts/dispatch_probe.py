"""What a compute dispatch adds to a small round trip (issue 9): `PYRITE_BACKEND=wgpu|dawn
python scripts/dispatch_probe.py`.

A readback of a ready tensor costs one copy, one submit and one map wait; `(x * 2)` then a
readback costs far more than the map alone plus the op's host time. This times, through the
device's own recording path (median µs of single round trips), a copy alone, an empty compute
pass before it, one trivial dispatch (one workgroup), the same without the info-arena write,
several dispatches in one pass, a bigger grid, and the dispatch in its own submit before the copy.
(The info arena caches windows: "new info" rows use words never seen before, so each batch
writes its window; the others find theirs on the GPU.)
"""

import sys
from types import SimpleNamespace

import numpy as np

import pyrite as pr
from pyrite import backend
from pyrite.bench import _median_us

dev = backend.current()
print(f"{dev.name} ({dev.impl})")
TRIVIAL = SimpleNamespace(
    wgsl="""
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<i32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    if (g.x == 0u) { out[0] = out[0] + u32(info[0]) + 1u; }
}
""",
    modes="w",
)
out = dev.pool.allocate(1 << 20)
buf = out.buffer
staging = dev._staging
pr.synchronize()


def read():
    dev._copy(buf, 0, staging, 0, 4)
    dev._flush()
    return dev._io.read_mapped(staging, 4)


def med(fn):
    return _median_us(fn, 400, 40)


def copy_only():
    return read()


def empty_pass():
    dev._begin()
    return read()


fresh = [1 << 20]


def dispatches(n, grid=(1, 1, 1), info_write=False):
    def f():
        for _ in range(n):
            if info_write:
                fresh[0] += 1
            dev.dispatch(TRIVIAL, (buf,), (fresh[0] if info_write else 1,), grid)
        return read()

    return f


def own_submit():
    dev.dispatch(TRIVIAL, (buf,), (1,), (1, 1, 1))
    dev._flush()
    return read()


def dispatch_then_sync():
    dev.dispatch(TRIVIAL, (buf,), (1,), (1, 1, 1))
    pr.synchronize()


rows = [
    ("copy + submit + map", copy_only),
    ("empty compute pass, copy", empty_pass),
    ("1 dispatch (1 wg), copy", dispatches(1)),
    ("1 dispatch, new info", dispatches(1, info_write=True)),
    ("2 dispatches", dispatches(2)),
    ("8 dispatches", dispatches(8)),
    ("1 dispatch of 132 wgs", dispatches(1, (132, 1, 1))),
    ("1 dispatch of 4096 wgs", dispatches(1, (4096, 1, 1))),
    ("dispatch submitted alone, then copy", own_submit),
    ("dispatch, synchronize()", dispatch_then_sync),
]
for name, fn in rows:
    fn()
    print(f"  {name:<40}{med(fn):8.1f} us")
if "--mappable" in sys.argv:  # wgpu-native's mappable-primary-buffers: the kernel writes the
    # mappable buffer itself, no copy (PYRITE_EXTRA_FEATURES=mappable-primary-buffers)
    if "mappable-primary-buffers" not in dev.features:
        print("  (no mappable-primary-buffers on this device)")
    else:
        u = dev.wgpu.BufferUsage
        mb = dev.device.create_buffer(size=256, usage=u.MAP_READ | u.STORAGE | u.COPY_DST)
        dev.pool.owned[id(mb)] = mb

        def into_mappable(grid=(1, 1, 1)):
            def f():
                dev.dispatch(TRIVIAL, (mb,), (1,), grid)
                dev._flush()
                return dev._io.read_mapped(mb, 4)

            return f

        rows += [
            ("1 dispatch into a mappable buffer, map", into_mappable()),
            ("the same, 48 wgs", into_mappable((48, 1, 1))),
            ("1 dispatch of 48 wgs, copy", dispatches(1, (48, 1, 1))),
        ]
        for name, fn in rows[-3:]:
            fn()
            print(f"  {name:<40}{med(fn):8.1f} us")
if "--twice" in sys.argv:  # the order's effect: the same rows again
    for name, fn in rows:
        print(f"  {name:<40}{med(fn):8.1f} us")

if "--sum" in sys.argv:
    # one workgroup of `lanes` invocations summing a contiguous f32 vector (vec4 loads, four
    # independent sums an invocation), against pyrite's x.sum(): one dispatch against two
    def one_wg_sum(lanes):
        return SimpleNamespace(
            wgsl=f"""
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> info: array<i32>;
var<workgroup> part: array<f32, {lanes}>;
@compute @workgroup_size({lanes})
fn main(@builtin(local_invocation_id) lid: vec3<u32>) {{
    let n4 = info[0];
    let t = i32(lid.x);
    var s0 = vec4<f32>(0.0); var s1 = vec4<f32>(0.0); var s2 = vec4<f32>(0.0); var s3 = vec4<f32>(0.0);
    var i = t;
    for (; i + {3 * lanes} < n4; i += {4 * lanes}) {{
        s0 += x[i]; s1 += x[i + {lanes}]; s2 += x[i + {2 * lanes}]; s3 += x[i + {3 * lanes}];
    }}
    for (; i < n4; i += {lanes}) {{ s0 += x[i]; }}
    let s = (s0 + s1) + (s2 + s3);
    part[t] = (s.x + s.y) + (s.z + s.w);
    workgroupBarrier();
    for (var h = {lanes // 2}; h > 0; h >>= 1u) {{
        if (t < h) {{ part[t] += part[t + h]; }}
        workgroupBarrier();
    }}
    if (t == 0) {{ out[0] = part[0]; }}
}}
""",
            modes="rw",
        )

    for n in (128 * 768, 16 * 1024, 1 << 18, 1 << 20):
        xs = pr.randn(n)
        xb = xs._storage.buffer
        want = float(xs.sum())
        print(f"  sum of {n:,} f32: pyrite x.sum().item() {med(lambda: xs.sum().item()):7.1f} us")
        for lanes in (256, 1024):
            src = one_wg_sum(lanes)

            def f(src=src):
                dev.dispatch(src, (xb, buf), (n // 4,), (1, 1, 1))
                return read()

            got = np.frombuffer(f(), np.float32)[0]
            print(
                f"    one workgroup of {lanes}: {med(f):7.1f} us  (got {got:.4f}, want {want:.4f})"
            )
