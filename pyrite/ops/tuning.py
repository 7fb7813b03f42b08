"""Tuned GEMM configurations: what `pyrite tune` measured best for a product shape on this
device, read by ops/matmul.py's planner before its shape rules.

An entry is keyed by the fast kernel's layout (`_fast_layout`: "k", "n", "mk", "mn") and the
exact M, N, K of a single (unbatched) f32 product, and holds two winners by GPU time: the best
tile without a split of K (`tile`, taken by eager products, whose split decision stays the
rule's: a second dispatch costs host time there) and the best tile with its split (`tile_split`,
`split`: taken under a `pr.compile` recording, where only GPU time counts). A shape with no entry
takes the rules (ops/matmul.py FAST_GPU, SPLIT_FILL), which are measured defaults.

Tables live in one JSON file, `$PYRITE_TUNE_CACHE` or `~/.cache/pyrite/tune.json`, one section a
device (adapter name, implementation, driver and pyrite version: a new driver or pyrite tunes
afresh); `pyrite/data/tune-*.json` ship tables measured on the lent H200 and H100 (wgpu-native),
read where no cached section exists. None ships for lavapipe: its rules (ops/matmul.py's CPU
tiles) were measured there, and its timings move with the machine's load. Writes are atomic (pyrite/_fs.py).
"""

from __future__ import annotations

import glob
import json
import os

from .._fs import write_atomic

_tables: dict = {}  # device key -> {entry key: entry}


def device_key(dev) -> str:
    from .. import __version__

    return f"{dev.name} | {dev.impl} | {dev.driver} | pyrite {__version__}"


def cache_path() -> str:
    return os.environ.get("PYRITE_TUNE_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "pyrite", "tune.json"
    )


def entry_key(lay: str, M: int, N: int, K: int) -> str:
    return f"{lay} {M}x{N}x{K}"


def _read(path) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def table(dev) -> dict:
    """This device's tuned entries (the cache's section, else a shipped table's)."""
    key = device_key(dev)
    got = _tables.get(key)
    if got is None:
        got = _read(cache_path()).get(key)
        if got is None:
            shipped = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
            for path in sorted(glob.glob(os.path.join(shipped, "tune-*.json"))):
                got = _read(path).get(key)
                if got is not None:
                    break
        got = _tables[key] = dict(got or {})
    return got


def lookup(dev, lay, M, N, K):
    """The entry for this product shape on `dev`, or None."""
    if lay is None:
        return None
    return table(dev).get(entry_key(lay, M, N, K))


def store(dev, entries: dict, path=None):
    """Merge `entries` into this device's section of the cache file (atomically) and into the
    table in use; the plans cached for shapes already run are dropped so they take them."""
    entries = {k: v for k, v in entries.items() if isinstance(v, dict)}
    path = path or cache_path()
    data = _read(path)
    key = device_key(dev)
    section = data.setdefault(key, {})
    section.update(entries)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    text = json.dumps(data, indent=1, sort_keys=True).encode()
    write_atomic(path, lambda fh: fh.write(text))
    table(dev).update(entries)
    from . import matmul

    matmul._plans.clear()


def forget():
    """Drop the tables read (the next lookup reads the files again)."""
    _tables.clear()
