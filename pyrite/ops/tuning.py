"""Tuned GEMM configurations: what `pyrite tune` measured best for a product shape on this
device, read by ops/matmul.py's planner before its shape rules.

An entry is keyed by the fast kernel's layout (`_fast_layout`: "k", "n", "mk", "mn") and the
exact M, N, K of a single (unbatched) f32 product, and holds two winners by GPU time: the best
tile without a split of K (`tile`, taken by eager products, whose split decision stays the
rule's: a second dispatch costs host time there) and the best tile with its split (`tile_split`,
`split`: taken under a `pr.compile` recording, where only GPU time counts). A shape with no entry
takes the rules (ops/matmul.py FAST_GPU, SPLIT_FILL), which are measured defaults. An entry also
holds its signature (`sig`, ops/matmul.tune_signature: the rules' choice for the shape and the
code of the kernels it was timed against); where the rules or those kernels have changed since,
the signature no longer matches and the entry is passed by (the rules decide until the shape is
tuned again), so a table never holds a pyrite to what an older one measured.

Tables live in one JSON file, `$PYRITE_TUNE_CACHE` or `~/.cache/pyrite/tune.json`, one section a
device (adapter name, implementation, driver and pyrite version: a new driver or pyrite tunes
afresh); `pyrite/data/tune-*.json` are tables shipped for the lent GPUs, read where no cached
section exists (the ones tuned before entries had signatures were removed, 2026-12-06;
`scripts/gpu_session.sh tune-ship` makes one: the H100's, wgpu-native, 2026-12-07, keeps one
entry, BERT's batch-1 FFN-up product split 16 ways when compiled, 34.2 µs against the rules'
42.7; at batch 32 the rules' tiles won every shape); a device with neither borrows the
same GPU's table under the other implementation (`borrow`). None ships for lavapipe: its rules (ops/matmul.py's CPU
tiles) were measured there, and its timings move with the machine's load. Writes are atomic (pyrite/_fs.py).
"""

from __future__ import annotations

import glob
import json
import os
import re

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
            got = _shipped(lambda k: k == key)
        if got is None and borrow():
            got = _borrowed(key)
        got = _tables[key] = dict(got or {})
    return got


def _shipped(want):
    """The first section of the shipped tables whose key `want` accepts, or None."""
    shipped = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
    for path in sorted(glob.glob(os.path.join(shipped, "tune-*.json"))):
        for k, section in _read(path).items():
            if want(k) and isinstance(section, dict):
                return section
    return None


# A device with no table of its own borrows the table of the same adapter, driver and pyrite
# version under the other WebGPU implementation (the cache's, else a shipped one): the kernels
# are the same WGSL on the same GPU, only the shader compiler differs. This is how Dawn gets
# tuned tiles at all: its timestamps on the lent GPUs come in 65.5 µs steps, too coarse to rank
# the candidates, so `pyrite tune` keeps none there. `PYRITE_TUNE_BORROW=0` turns it off (A/B).
# H100, Dawn, 2026-12-06 (`pyrite bench --only bert`, borrowing wgpu-native's shipped table /
# not; docs/bench/2026-12-06-h100-s31-dawn-bert-borrow*.json): the compiled BERT-base forward at
# batch 1 2.23 and 2.20 / 2.80 ms (torch CUDA eager 2.36-2.39), its split-K tiles taken (144
# kernels a call against 96); batch 32 even (20.76-20.81 / 20.94).
def borrow() -> bool:
    return os.environ.get("PYRITE_TUNE_BORROW", "1").strip() != "0"


def _versions(driver: str) -> set:
    """The version numbers in a driver description (wgpu-native says "580.159.04", Dawn
    "NVIDIA: 580.159.04 580.159.4.0" for the same driver)."""
    return set(re.findall(r"\d+(?:\.\d+)+", driver))


def _borrowed(key: str):
    name, _impl, rest = key.split(" | ", 2)
    driver, version = rest.rsplit(" | ", 1)

    def same_gpu(k: str) -> bool:
        parts = k.split(" | ")
        return (len(parts) == 4 and k != key and parts[0] == name and parts[3] == version
                and bool(_versions(parts[2]) & _versions(driver)))  # fmt: skip

    for k, section in _read(cache_path()).items():
        if same_gpu(k) and isinstance(section, dict):
            return section
    return _shipped(same_gpu)


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
