"""torch.cuda.memory_stats and its kin, read from the buffer pool's own accounting
(backend/pool.py), under PyTorch's key names for the figures the pool has:

- `allocated_bytes.all.*`: bytes of device buffers handed to tensors (each rounded up to its
  size class, as torch's allocator rounds to its blocks): current = `memory_allocated()`,
  peak = `max_memory_allocated()`, allocated / freed = handed out / given back since the start
  (or the last `reset_accumulated_memory_stats`).
- `allocation.all.current`: buffers held by tensors (the pool counts no allocations as they
  happen, to keep them cheap, so there is no peak or total of them).
- `reserved_bytes.all.*`: bytes held from the driver (live and pooled buffers): current =
  `memory_reserved()`, peak = `max_memory_reserved()`, allocated / freed = bytes of buffers
  created / destroyed (`empty_cache` destroys the pooled ones). Buffers a compiled graph keeps
  for its replays (no tensor holding them) are created but not in current.
- `segment.all.*`: buffers created on the device and not yet destroyed (WebGPU buffers are
  never split, so a segment is one buffer).
- `num_alloc_retries` (a buffer creation that failed, retried after emptying the pool),
  `num_ooms` (OutOfMemoryError raised), `num_device_alloc` / `num_device_free` (buffers created /
  destroyed).

Left out, as pyrite has no such figure: the large/small pool split (one pool of size classes),
`active*` and `inactive_split*` (buffers are not split, and none waits on a stream), and
`requested_bytes` (the pool does not keep each request's unrounded size).
"""

from __future__ import annotations

import collections

from . import backend as _backend

_ACCUMULATED = (
    "allocated_bytes",
    "freed_bytes",
    "created_bytes",
    "destroyed_bytes",
    "allocations",
    "destroyed",
    "retries",
    "ooms",
)


def _totals(pool) -> dict:
    """The pool's counters since the process began."""
    st = pool.stats
    return {
        "allocated_bytes": pool.live_bytes + pool.freed_bytes,
        "freed_bytes": pool.freed_bytes,
        "created_bytes": st.created_bytes,
        "destroyed_bytes": st.destroyed_bytes,
        "allocations": pool.allocations,
        "destroyed": st.destroyed,
        "retries": st.retries,
        "ooms": st.ooms,
    }


def _live_buffers(pool) -> int:
    """Buffers tensors hold: those the pool made and has not destroyed, less the pooled ones
    and those only a compiled graph keeps."""
    pooled = sum(map(len, pool.free.values())) + sum(map(len, pool.recent.values()))
    held = sum(1 for pin in pool.pins.values() if pin.dead)
    return len(pool.owned) - pooled - held


def memory_stats_as_nested_dict() -> dict:
    """torch.cuda.memory_stats_as_nested_dict: {"allocated_bytes": {"all": {"current", "peak",
    "allocated", "freed"}}, "allocation": {"all": {"current"}}, "reserved_bytes": ...,
    "segment": ...,
    "num_alloc_retries": n, "num_ooms": n, "num_device_alloc": n, "num_device_free": n}."""
    pool = _backend.current().pool
    with pool.lock:
        if pool.deferred:
            pool._drain()
        total = _totals(pool)
        base = pool.stats.accumulated_base
        acc = {k: total[k] - base.get(k, 0) for k in _ACCUMULATED}
        reserved, segments = pool.reserved_bytes, pool.segments

        def stat(current, peak, allocated, freed):
            return {
                "all": {"current": current, "peak": peak, "allocated": allocated, "freed": freed}
            }

        return {
            "allocated_bytes": stat(
                pool.live_bytes,
                max(pool.peak_live_bytes, pool.live_bytes),
                acc["allocated_bytes"],
                acc["freed_bytes"],
            ),
            "allocation": {"all": {"current": _live_buffers(pool)}},
            "reserved_bytes": stat(
                reserved,
                max(pool.peak_reserved_bytes, reserved),
                acc["created_bytes"],
                acc["destroyed_bytes"],
            ),
            "segment": stat(
                segments,
                max(pool.stats.peak_segments, segments),
                acc["allocations"],
                acc["destroyed"],
            ),
            "num_alloc_retries": acc["retries"],
            "num_ooms": acc["ooms"],
            "num_device_alloc": acc["allocations"],
            "num_device_free": acc["destroyed"],
        }


def memory_stats() -> collections.OrderedDict:
    """torch.cuda.memory_stats: the nested dict flattened to dotted keys
    ("allocated_bytes.all.current", ...), sorted by key."""
    flat = []

    def walk(prefix, obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            flat.append((prefix, obj))

    walk("", memory_stats_as_nested_dict())
    flat.sort()
    return collections.OrderedDict(flat)


def reset_peak_memory_stats():
    """Start every peak again from the current figure."""
    pool = _backend.current().pool
    with pool.lock:
        pool.peak_live_bytes = pool.live_bytes
        pool.peak_reserved_bytes = pool.reserved_bytes
        pool.stats.peak_segments = pool.segments


def reset_accumulated_memory_stats():
    """Start the allocated / freed totals, num_alloc_retries, num_ooms and num_device_alloc /
    free again from 0 (current and peak figures stay)."""
    pool = _backend.current().pool
    with pool.lock:
        pool.stats.accumulated_base = _totals(pool)


def _scaled(n: int, ref: int, units, base: int, at: int, width: int) -> str:
    """`n` in the unit that suits `ref` (the row's peak), as torch's summary prints it: the next
    unit up (`base` times the last) while `ref` is `at` or more."""
    u = 0
    while u + 1 < len(units) and ref >= at:
        n //= base
        ref /= base
        u += 1
    return f"{n:{width}d} {units[u]}"


def _size(n: int, ref: int) -> str:
    return _scaled(n, ref, ("B  ", "KiB", "MiB", "GiB", "TiB"), 1024, 768 * 1024, 6)


def _count(n: int, ref: int) -> str:
    return _scaled(n, ref, (" ", "K", "M"), 1000, 750 * 1000, 7) + " "


def memory_summary(abbreviated: bool = False) -> str:
    """torch.cuda.memory_summary's table (current, peak, total allocated, total freed) for the
    rows pyrite counts: allocated memory, reserved memory and segments.
    `abbreviated` is accepted (there are no per-pool rows to leave out)."""
    st = memory_stats_as_nested_dict()
    rule = "|" + "=" * 75 + "|"
    thin = "|" + "-" * 75 + "|"
    lines = [
        rule,
        "| {:^73} |".format("pyrite memory summary, device ID 0"),
        thin,
        "| {:<35}| {:<37}|".format(
            f"          OOMs: {st['num_ooms']}", f"     alloc retries: {st['num_alloc_retries']}"
        ),
        rule,
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
    ]
    rows = (
        ("Allocated memory", "allocated_bytes", _size),
        ("GPU reserved memory", "reserved_bytes", _size),
        ("GPU reserved segments", "segment", _count),
    )
    for label, key, fmt in rows:
        s = st[key]["all"]
        ref = s["peak"]
        cells = " | ".join(
            fmt(s[k], max(ref, s[k])) for k in ("current", "peak", "allocated", "freed")
        )
        lines += [thin, f"| {label:<21} | {cells} |"]
    lines.append(rule)
    return "\n".join(lines) + "\n"
