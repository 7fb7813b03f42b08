"""The test of a trusted kernel's claim (kernels/common.TRUSTED: every index into its workgroup,
private and function arrays is in range by construction, so the backend builds it without the
run-time clamps; an index out of range would then read another array's data or fault).

With PYRITE_CHECK_TRUSTED=1 the device builds each trusted kernel instrumented instead: every
`name[expr]` into a fixed-size array declared in the module becomes
`name[pyr_chk(i32(expr), size, site)]`, which clamps as the checked build would and records the
first out-of-range site in one extra storage word (bound after the kernel's own buffers, the
info binding moved one on). `Device.trusted_violation()` reads and clears it. The test suite runs
the trusted kernels this way over random shapes (tests/test_trusted_kernels.py), so a claim that
does not hold fails a test rather than corrupting a result on a GPU.

Vectors indexed by a run-time value are not instrumented (an out-of-range component is an
undefined value, never another variable's memory)."""

from __future__ import annotations

import re

ARRAY_DECL = re.compile(
    r"\bvar(?:<(?:workgroup|private|function)>)?\s+(\w+)\s*:\s*array<\s*[\w<>]+\s*,\s*(\d+)u?\s*>"
)
INFO_DECL = re.compile(r"@binding\((\d+)\)(\s*var<storage, read> info\s*:)")

CHECK_FN = """
fn pyr_chk(i: i32, n: i32, site: u32) -> i32 {
  if (i < 0 || i >= n) { pyr_oob[0] = site; }
  return clamp(i, 0, n - 1);
}
"""


def _close(s: str, i: int) -> int:
    """Index of the ']' matching the '[' at s[i]."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "[":
            depth += 1
        elif s[j] == "]":
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("pyrite: internal: unbalanced brackets in a kernel")


def instrument(wgsl: str, n_buffers: int, tag: int) -> tuple[str, list[str]]:
    """`wgsl` with its fixed-size array indices checked (module docstring): the source, and the
    site descriptions (site k records tag * 65536 + k + 1)."""
    sizes: dict[str, int] = {}
    for name, n in ARRAY_DECL.findall(wgsl):
        sizes[name] = min(int(n), sizes.get(name, int(n)))  # (a reused name: the smaller)
    m = INFO_DECL.search(wgsl)
    if m is None or int(m.group(1)) != n_buffers:
        raise ValueError("pyrite: internal: a trusted kernel without the usual info binding")
    sites: list[str] = []
    if sizes:
        use = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sizes)) + r")\s*\[")
        spans = [(mt.group(1), mt.end() - 1) for mt in use.finditer(wgsl)]
        for name, lb in spans:  # (described as written, numbered in source order)
            expr = wgsl[lb + 1 : _close(wgsl, lb)]
            sites.append(f"{name}[{' '.join(expr.split())}] (size {sizes[name]})")
        s = wgsl
        for k in range(len(spans) - 1, -1, -1):  # (from the end: earlier offsets stay valid)
            name, lb = spans[k]
            rb = _close(s, lb)
            site = tag * 65536 + k + 1
            s = s[: lb + 1] + f"pyr_chk(i32({s[lb + 1 : rb]}), {sizes[name]}, {site}u)" + s[rb:]
        wgsl = s
    wgsl = INFO_DECL.sub(
        f"@binding({n_buffers}) var<storage, read_write> pyr_oob: array<u32>;\n"
        rf"@group(0) @binding({n_buffers + 1})\2",
        wgsl,
        count=1,
    )
    return wgsl + (CHECK_FN if sizes else ""), sites
