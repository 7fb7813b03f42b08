"""One-word answers about a whole tensor, for the checks PyTorch's CPU makes synchronously:
"is any element zero?" (integer division by zero), "is any element outside [0, 1]?" (quantile's
q), and the like.

    flag[slot] |= 1 if cond(x[off + sum_d c_d * stride_d]) for any element

Each invocation tests one element (no loop, so the loop budget is untouched) and, only when its
element satisfies `cond`, sets the flag word with `atomicOr`; the op reads the words back in one
round trip. The flag buffer starts zeroed (`upload`ed by the op).

info: [0] n  [1] offset  [2] slot  [3, 3+R) shape  [3+R, 3+2R) strides
"""

from __future__ import annotations

from functools import lru_cache

from .common import ENTRY, FLAT_INDEX, WG, KernelSource, header, helpers_for, load


@lru_cache(maxsize=256)
def any_kernel(rank: int, stype: str, ctype: str, cond: str) -> KernelSource:
    """`cond`: WGSL bool expression in `v` (the element as compute type `ctype`)."""
    head = header([("x", stype, "r"), ("flag", "u32", "w")]).replace(
        "var<storage, read_write> flag: array<u32>",
        "var<storage, read_write> flag: array<atomic<u32>>",
    )
    lines = [FLAT_INDEX.format(wg=WG), "  if (gi >= info[0]) { return; }\n", "  var r = gi;\n"]
    for d in range(rank - 1, 0, -1):
        lines.append(f"  let c{d} = r % info[{3 + d}]; r = r / info[{3 + d}];\n")
    at = "info[1]"
    if rank:
        lines.append("  let c0 = r;\n")
        at += "".join(f" + c{d} * info[{3 + rank + d}]" for d in range(rank))
    lines.append(f"  let v = {load(f'x[{at}]', stype, ctype)};\n")
    lines.append(f"  if ({cond}) {{ atomicOr(&flag[info[2]], 1u); }}\n")
    src = head + helpers_for(cond) + ENTRY.format(wg=WG) + "".join(lines) + "}\n"
    return KernelSource(src, "rw")
