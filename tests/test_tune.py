"""`pyrite tune` and its cache (pyrite/bench/tune.py, pyrite/ops/tuning.py): a tuned shape's
products take the winner (and stay right), entries that no longer fit or were measured against
other rules or kernels are ignored, recordings take the tuned split, and the cache file is
written whole, other devices' sections kept."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyrite as pr
from pyrite.ops import matmul as mm
from pyrite.ops import tuning

TILE = (32, 32, 4, 4, 16, True)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "tune.json"
    monkeypatch.setenv("PYRITE_TUNE_CACHE", str(path))
    # (no shipped table: on the lent H100 the package's own table for it was read before the
    # test's cache section could be borrowed)
    monkeypatch.setattr(tuning, "_shipped", lambda want: None)
    tuning.forget()
    mm._plans.clear()
    yield path
    tuning.forget()
    mm._plans.clear()


def _product(rng, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float32)
    w = rng.standard_normal((N, K)).astype(np.float32)
    return a, w, pr.tensor(a), pr.tensor(w)


def _signed(M, N, K, entry, lay="k"):
    """`entry` with the signature `pyrite tune` gives it against the rules as they are now."""
    entry = dict(entry)
    entry["sig"] = mm.tune_signature(pr.backend.current(), lay, M, N, K, entry)
    return entry


def _check(got, a, w):
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    bound = 2 * a.shape[1] * 2.0**-24 * (np.abs(a64) @ np.abs(w64.T))
    assert (np.abs(got - a64 @ w64.T) <= bound).all()


def test_tuned_shape_takes_the_winner(cache, rng):
    from pyrite.bench.tune import tune_shape

    other = (16, 64, 4, 4, 16, True)
    entry, report = tune_shape(32, 64, 96, "k", reps=2, tiles=[TILE, other], splits=(1, 2))
    labels = [label for label, _ in report]
    assert labels[0] == "rules" and len(labels) == 1 + 2 * 2  # (each tile, unsplit and S=2)
    # every candidate right (a time of 0: timestamps coarser than the kernel, Dawn's on a GPU)
    assert all(us is not None and us >= 0 for _, us in report)
    if entry is None or entry["tile"] is None:  # (the rules won on this run: keep a winner)
        entry = _signed(32, 64, 96, {"tile": list(other), "split": 1, "tile_split": None})
    assert entry["sig"] == _signed(32, 64, 96, entry)["sig"]
    assert tuple(entry["tile"]) in (TILE, other)
    dev = pr.backend.current()
    tuning.store(dev, {tuning.entry_key("k", 32, 64, 96): entry})
    data = json.loads(cache.read_text())
    assert tuning.device_key(dev) in data
    a, w, ta, tw = _product(rng, 32, 64, 96)
    got = pr.nn.functional.linear(ta, tw).numpy()
    assert mm.LAST == ("fast", tuple(entry["tile"]))
    _check(got, a, w)


def test_entries_that_do_not_fit_are_ignored_and_other_sections_kept(cache, rng):
    dev = pr.backend.current()
    cache.write_text(json.dumps({"another device": {"k 1x1x1": {"tile": [1]}}}))
    bad = {"tile": [64, 64, 8, 8, 16, True], "split": 1}  # 64 does not divide M = 48
    bad = _signed(48, 64, 64, bad)
    tuning.store(dev, {tuning.entry_key("k", 48, 64, 64): bad})
    data = json.loads(cache.read_text())
    assert "another device" in data and tuning.device_key(dev) in data
    assert list(cache.parent.iterdir()) == [cache]  # (no temporary file left)
    a, w, ta, tw = _product(rng, 48, 64, 64)
    got = pr.nn.functional.linear(ta, tw).numpy()
    assert mm.LAST != ("fast", (64, 64, 8, 8, 16, True))  # (the rules decided)
    _check(got, a, w)
    tuning.store(dev, {tuning.entry_key("k", 48, 64, 64): {"tile": "junk"}})
    _check(pr.nn.functional.linear(ta, tw).numpy(), a, w)


def test_a_recording_takes_the_tuned_split(cache, rng):
    """An eager product keeps the rule's split decision (no split on lavapipe) with the tuned
    tile; under pr.compile the tuned split of K runs (partials and their sum: two kernels)."""
    dev = pr.backend.current()
    entry = {"tile": list(TILE), "split": 2, "tile_split": list(TILE), "us": 1.0, "us_split": 0.5}
    tuning.store(dev, {tuning.entry_key("k", 32, 32, 128): _signed(32, 32, 128, entry)})
    a, w, ta, tw = _product(rng, 32, 32, 128)
    from pyrite.ops import core

    core_poison = core.POISON
    eager = pr.nn.functional.linear(ta, tw)
    assert mm.LAST == ("fast", TILE)
    _check(eager.numpy(), a, w)
    f = pr.compile(lambda x: pr.nn.functional.linear(x, tw), options={"fusion": False})
    for _ in range(3):
        got = f(ta).numpy()
    _check(got, a, w)
    kernels = f.stats()["kernels"]
    assert kernels == (4 if core_poison else 2)  # (partials, their sum; each poisoned first)


def test_entries_measured_against_other_rules_or_kernels_are_passed_by(cache, rng, monkeypatch):
    """An entry is taken only while its signature matches: not one with none (a table of an
    older pyrite's), not once the rules choose another tile for the shape or the code of the
    kernels it was timed against changes; the products stay right either way."""
    dev = pr.backend.current()
    key = tuning.entry_key("k", 32, 64, 96)
    a, w, ta, tw = _product(rng, 32, 64, 96)

    def ran():
        mm._plans.clear()
        _check(pr.nn.functional.linear(ta, tw).numpy(), a, w)
        return mm.LAST

    rule = ran()
    # a tile the rules do not choose here (the H100's rules choose TILE itself)
    tile = TILE if rule != ("fast", TILE) else (16, 64, 4, 4, 16, True)
    entry = {"tile": list(tile), "split": 1, "tile_split": None, "us": 1.0}
    tuning.store(dev, {key: entry})  # (no signature)
    assert ran() == rule
    tuning.store(dev, {key: _signed(32, 64, 96, entry)})
    assert ran() == ("fast", tile)
    choose = mm._choose
    monkeypatch.setattr(mm, "_choose", lambda *a, **k: ("tiled", None))  # (the rules change)
    assert ran() == ("tiled", None)
    monkeypatch.setattr(mm, "_choose", choose)  # (not undo(): the cache fixture's patches stay)
    assert ran() == ("fast", tile)
    sig = _signed(32, 64, 96, entry)["sig"]
    real = mm.gemm_fast

    def edited(*args, **kw):  # (the tile's kernel changes)
        src = real(*args, **kw)
        return type(src)(src.wgsl + "// edited\n", src.modes)

    monkeypatch.setattr(mm, "gemm_fast", edited)
    assert mm.tune_signature(dev, "k", 32, 64, 96, entry) != sig
    assert ran() == rule


def test_the_command_measures_and_keeps(cache, capsys):
    """`pyrite tune --shapes ...`: a table of the rules against the winners, and a cache file
    (with --dry-run: the table only)."""
    from pyrite.cli import main

    assert main(["tune", "--shapes", "32x32x32:k", "--reps", "2", "--dry-run"]) == 0
    got = capsys.readouterr()
    assert "k 32x32x32" in got.out + got.err and not cache.exists()  # (the bar, or a line)
    assert main(["tune", "--shapes", "32x32x32:k", "--reps", "2"]) == 0
    out = capsys.readouterr().out
    data = json.loads(cache.read_text()) if cache.exists() else {}
    dev = pr.backend.current()
    kept = data.get(tuning.device_key(dev), {})
    # kept only where a candidate beat the rules by the margin: either way the run says so
    assert ("kept 1 entries" in out) == (tuning.entry_key("k", 32, 32, 32) in kept)
    with pytest.raises(SystemExit):
        main(["tune", "--shapes", "32x32:k"])


def test_a_device_without_a_table_borrows_the_other_implementations(cache, monkeypatch):
    """A device with no section of its own takes the section of the same adapter, driver and
    pyrite version under the other WebGPU implementation (Dawn cannot rank candidates with its
    coarse timestamps); not another adapter's, not over its own, and not with
    PYRITE_TUNE_BORROW=0."""
    dev = pr.backend.current()
    own = tuning.device_key(dev)
    name, impl, rest = own.split(" | ", 2)
    driver, version = rest.rsplit(" | ", 1)
    # (the other implementation words the same driver its own way: Dawn "NVIDIA: 580.159.04
    # 580.159.4.0" where wgpu-native says "580.159.04")
    other = f"{name} | {'dawn' if impl != 'dawn' else 'wgpu'} | vendor: {driver} 1.2 | {version}"
    entry = {"tile": list(TILE), "split": 1, "us": 1.0}
    cache.write_text(
        json.dumps({other: {"k 1x2x3": entry}, f"elsewhere | {impl} | x": {"k 9x9x9": entry}})
    )
    tuning.forget()
    assert tuning.lookup(dev, "k", 1, 2, 3) == entry
    assert tuning.lookup(dev, "k", 9, 9, 9) is None
    monkeypatch.setenv("PYRITE_TUNE_BORROW", "0")
    tuning.forget()
    assert tuning.lookup(dev, "k", 1, 2, 3) is None
    monkeypatch.delenv("PYRITE_TUNE_BORROW")
    cache.write_text(json.dumps({other: {"k 1x2x3": entry}, own: {"k 4x4x4": entry}}))
    tuning.forget()
    assert tuning.lookup(dev, "k", 1, 2, 3) is None and tuning.lookup(dev, "k", 4, 4, 4) == entry
