"""What the device's compiler does to f32 arithmetic that exactness tricks depend on.

    python scripts/fp_probe.py            # the current pyrite device (PYRITE_BACKEND picks)

Prints, for the adapter pyrite opens: whether `fma` is fused, whether an error-free TwoSum
survives the compiler (plain, and with each intermediate passed through an opaque identity
`launder`), how a 60,000-term sum of 0.1 comes out with each, and how `a / b` and the
fma-corrected quotient compare with numpy's correctly rounded one. The findings feed
kernels/common.py (p_divf) and kernels/reduce.py (the compensated sum).
"""

from __future__ import annotations

import numpy as np

import pyrite as pr
from pyrite import backend

SRC = """
@group(0) @binding(0) var<storage, read> inp: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> info: array<u32>;

// an identity the compiler cannot see through: info[0] is 0, which only the host knows (a zero
// the compiler can bound, arrayLength(&info) >> 30, was folded away on the H200)
fn launder(v: f32) -> f32 { return bitcast<f32>(bitcast<u32>(v) | info[0]); }

fn split(v: f32) -> vec2<f32> {
  let c = launder(4097.0 * v);
  let h = launder(c - launder(c - v));
  return vec2<f32>(h, v - h);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x;
  let n = info[1];
  if (i == 0u) {
    // fma fused? (1 + 2^-13)(1 - 2^-13) - 1 = -2^-26 exactly; unfused: 0
    out[0] = fma(inp[0], inp[1], -inp[2]);
    // TwoSum of 1 + 1e-8: the error term, plain and laundered
    let a = inp[2]; let x = inp[3];
    let t = a + x;
    out[1] = (a - t) + x;
    let tl = launder(a + x);
    out[2] = launder(a - tl) + x;
    // a long Neumaier sum of 0.1, plain / laundered / naive
    var s = 0.0; var c = 0.0; var s2 = 0.0; var c2 = 0.0; var s3 = 0.0;
    let v = inp[4];
    for (var k = 0u; k < n; k = k + 1u) {
      let t1 = s + v;
      c = c + select((v - t1) + s, (s - t1) + v, abs(s) >= abs(v));
      s = t1;
      let t2 = launder(s2 + v);
      c2 = c2 + select(launder(v - t2) + s2, launder(s2 - t2) + v, abs(s2) >= abs(v));
      s2 = t2;
      s3 = s3 + v;
    }
    out[3] = s + c; out[4] = s2 + c2; out[5] = s3;
  }
  // divisions: pairs from inp[8 + 2k], inp[9 + 2k]
  let m = info[2];
  if (i < m) {
    let a = inp[8u + 2u * i]; let b = inp[9u + 2u * i];
    let q = a / b;
    out[8u + 4u * i] = q;
    out[9u + 4u * i] = q + fma(-q, b, a) / b;
    let ql = launder(q);
    out[10u + 4u * i] = ql + launder(fma(-ql, b, a)) / b;
    let sq = split(q); let sb = split(b);
    let r1 = launder(a - sq.x * sb.x);
    let r2 = launder(r1 - sq.x * sb.y);
    let r3 = launder(r2 - sq.y * sb.x);
    out[11u + 4u * i] = q + launder(r3 - sq.y * sb.y) / b;
  }
}
"""


def main():
    dev = backend.current()
    g = dev.device
    import importlib

    wgpu = importlib.import_module(type(g).__module__.split(".")[0])
    rng = np.random.default_rng(0)
    m = 4096
    a = rng.integers(-30000, 30000, m).astype(np.float32)
    b = rng.integers(1, 300, m).astype(np.float32) * rng.choice([-1, 1], m)
    head = np.array([1 + 2**-13, 1 - 2**-13, 1.0, 1e-8, 0.1, 0, 0, 0], np.float32)
    inp = np.concatenate([head, np.stack([a, b], 1).ravel()]).astype(np.float32)
    n = 60_000  # within lavapipe's loop budget (backend/quirks.py)
    info = np.array([0, n, m], np.uint32)
    usage = wgpu.BufferUsage
    bi = g.create_buffer_with_data(data=inp.tobytes(), usage=usage.STORAGE)
    bo = g.create_buffer(size=4 * (8 + 4 * m), usage=usage.STORAGE | usage.COPY_SRC)
    bn = g.create_buffer_with_data(data=info.tobytes(), usage=usage.STORAGE)
    pipe = g.create_compute_pipeline(
        layout="auto", compute={"module": g.create_shader_module(code=SRC), "entry_point": "main"}
    )
    bg = g.create_bind_group(
        layout=pipe.get_bind_group_layout(0),
        entries=[{"binding": k, "resource": {"buffer": x}} for k, x in enumerate((bi, bo, bn))],
    )
    enc = g.create_command_encoder()
    p = enc.begin_compute_pass()
    p.set_pipeline(pipe)
    p.set_bind_group(0, bg)
    p.dispatch_workgroups((m + 63) // 64)
    p.end()
    g.queue.submit([enc.finish()])
    out = np.frombuffer(g.queue.read_buffer(bo), np.float32)
    print(f"device: {pr.device_info().get('name')} via {dev.impl}")
    print(f"fma fused: {out[0] == -(2.0**-26)} (got {out[0]!r}, fused -2^-26 = {-(2.0**-26)})")
    e_true = np.float32(1e-8) - (np.float32(1.0 + np.float32(1e-8)) - np.float32(1.0))
    print(f"TwoSum error term: plain {out[1]!r}, laundered {out[2]!r}, exact {e_true!r}")
    exact = float(np.float32(0.1)) * n
    for k, name in ((3, "Neumaier plain"), (4, "Neumaier laundered"), (5, "naive")):
        print(f"sum of {n} x 0.1, {name}: {out[k]!r} (rel err {abs(out[k] - exact) / exact:.2e})")
    want = (a.astype(np.float64) / b).astype(np.float32)
    r = out[8:].reshape(m, 4)
    names = ("a / b", "q + fma(-q,b,a)/b", "same, laundered", "laundered Dekker residual")
    for k, name in enumerate(names):
        print(f"{name}: {np.count_nonzero(r[:, k] != want)} of {m} not correctly rounded")


if __name__ == "__main__":
    main()
