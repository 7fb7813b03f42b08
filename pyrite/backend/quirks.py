"""Driver quirks that change what a correct kernel may do, each measured where it is found.

The loop budget
---------------
Mesa's llvmpipe (lavapipe, the CI device) stops a shader invocation after 65,535 loop iterations
*in total*, silently: the loops simply exit, and the kernel writes a wrong result. (Mesa 22.3,
llvmpipe 15.0.6, measured 2026-12-01: one loop of 100,000 counted 65,535; two nested loops of
400 counted 65,209, and a 30,000 x 1 nested loop ran 21,845 outer passes: every iteration of
every loop and each loop's final exit test count against one budget, so a nested loop costs
inner + 2 a pass.) gallivm keeps this limiter to stop runaway loops; newer drivers may not
have it, so pyrite measures it.

`loop_budget(device)` is the budget for one invocation, or None where loops are unbounded. It is
measured once per device with a single-loop probe on CPU adapters (where every such driver seen
so far lives: a GPU driver has no such limiter), and `PYRITE_LOOP_BUDGET=N` overrides it (0: no
budget; a small N lets a test drive every split path on any device). Kernel planners in `ops/`
call `ops.core.max_loop_iterations()`, which leaves a margin below this for the loops a kernel
runs besides its main one.

Subnormal flushing
------------------
GPUs may flush f32 subnormals to zero in shaders (WebGPU leaves it to the implementation; the
H200 through Vulkan, both implementations, flushed them: a bf16 product of 4.5e-38 came out 0,
and 1e-45 compared equal to 0, 2026-12-01). `flushes_subnormals(device)` measures it with one
multiply of a subnormal. Comparisons and casts to bool read the bits, so they hold either way;
arithmetic on subnormal operands or results gives ±0 on such a device, as CUDA's -ftz=true.

Subgroups
---------
Kernels that reduce with subgroup operations (kernels/rowops._sg_reduce) assume a subgroup is a
block of consecutive local invocation indices, of a power-of-two size, whole within the
workgroup. WGSL does not promise that mapping. `subgroup_size(device)` checks it once with a
probe of 256 invocations (lavapipe: 8 lanes, subgroup_invocation_id = index % 8, measured
2026-12-05) and gives the size, or 0 (the kernels then keep their workgroup-memory trees).
"""

from __future__ import annotations

import os

# The probe counts its own loop's iterations up to PROBE_N; a driver that stops it early has a
# budget of exactly the count it reached.
PROBE_N = 1 << 20
PROBE_WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<i32>;
@compute @workgroup_size(1)
fn main() {
  var c = 0u;
  let n = u32(info[0]);
  for (var i = 0u; i < n; i = i + 1u) { c = c + 1u; }
  out[0] = c;
}
"""


SUBNORMAL_PROBE_WGSL = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<i32>;
@compute @workgroup_size(1)
fn main() {
  let x = bitcast<f32>(u32(info[0]));
  out[0] = bitcast<u32>(x * 1.5);
}
"""
SUBNORMAL_BITS = 0x00400000  # 5.9e-39; times 1.5 is 0x00600000 where subnormals are kept


def flushes_subnormals(device) -> bool:
    """Whether `device` flushes f32 subnormal results (and so operands) to zero."""
    return device.run_probe(SUBNORMAL_PROBE_WGSL, SUBNORMAL_BITS) != 0x00600000


def _env_budget():
    raw = os.environ.get("PYRITE_LOOP_BUDGET")
    if raw is None or raw.strip() == "":
        return False, None
    try:
        n = int(raw)
    except ValueError:
        from ..errors import DeviceError

        raise DeviceError(
            f"pyrite: PYRITE_LOOP_BUDGET must be a whole number of loop iterations (0: none), "
            f"got {raw!r}"
        ) from None
    return True, (n if n > 0 else None)


def loop_budget(device) -> int | None:
    """Loop iterations one invocation may run on `device` before the driver stops it."""
    given, n = _env_budget()
    if given:
        return n
    if device.adapter_type != "CPU":
        return None
    count = device.run_probe(PROBE_WGSL, PROBE_N)
    return None if count >= PROBE_N else int(count)


SUBGROUP_PROBE_WGSL = """{enable}
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<storage, read> info: array<i32>;
var<workgroup> bad: atomic<u32>;
var<workgroup> size: atomic<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_size) sgs: u32,
        @builtin(subgroup_invocation_id) sid: u32) {
  // the lane a block of consecutive indices would give, and the first lane's index as every
  // lane of the subgroup sees it
  if (li == 0u) { atomicStore(&bad, 0u); atomicStore(&size, 0u); }  // (no zero-init assumed)
  workgroupBarrier();
  let first = subgroupBroadcastFirst(li);
  let pow2 = sgs >= 4u && sgs <= 128u && (sgs & (sgs - 1u)) == 0u;
  if (!pow2 || sid != li % sgs || first != li - sid) { atomicOr(&bad, 1u); }
  atomicMax(&size, sgs);
  workgroupBarrier();
  if (li == 0u) {
    out[0] = select(atomicLoad(&size), 0u, atomicLoad(&bad) != 0u || atomicLoad(&size) != sgs);
  }
}
"""


def subgroup_size(device) -> int:
    """The device's subgroup size where kernels may reduce with subgroup operations (a power of
    two from 4 to 128, subgroups of consecutive local indices, one size across the probe's
    workgroup), else 0. `PYRITE_SUBGROUPS=0` turns them off."""
    if os.environ.get("PYRITE_SUBGROUPS", "").strip() == "0" or not device.subgroup_feature:
        return 0
    enable = "enable subgroups;" if device.subgroup_feature == "subgroups" else ""
    try:
        return int(device.run_probe(SUBGROUP_PROBE_WGSL.replace("{enable}", enable), 0))
    except Exception:  # noqa: BLE001 - a compiler that refuses the probe: no subgroups
        return 0
