"""Scalar results in host-mappable buffers (backend/device.py MAPPABLE: wgpu-native's
mappable-primary-buffers, which lavapipe's wgpu-native has too): a full reduction's scalar is
made there and read by mapping it in place. The values must be exactly those of the ordinary
path, whatever was recorded after the scalar was made, and the buffers must be pooled apart
from the device-memory ones."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend


@pytest.fixture
def dev():
    d = backend.current()
    if d.pool.mappable_usage is None:
        pytest.skip(f"{d.impl} on {d.name} has no mappable storage buffers")
    return d


def _in_host(t, dev) -> bool:
    return id(t._storage.buffer) in dev.pool.mappable


def test_scalar_reductions_are_mappable_and_read_right(dev, rng):
    a = rng.standard_normal((37, 301)).astype(np.float32)
    x = pr.tensor(a)
    s, m, mx = x.sum(), x.mean(), x.amax()
    assert all(_in_host(t, dev) for t in (s, m, mx))
    assert not _in_host(x.sum(0), dev)  # (only scalars)
    want = a.astype(np.float64)
    assert abs(s.item() - want.sum()) <= 1e-6 * np.abs(want).sum()
    assert abs(m.item() - want.mean()) <= 1e-6 * np.abs(want).mean()
    assert mx.item() == a.max()
    assert float(x.norm()) == pytest.approx(float(np.linalg.norm(want)), rel=1e-6)


def test_writes_recorded_after_the_scalar_are_seen(dev, rng):
    # in-place updates and a kernel reading the scalar, recorded after it and not yet
    # submitted when item() maps it: the map waits for them
    a = rng.standard_normal(1000).astype(np.float32)
    x = pr.tensor(a)
    s = x.sum()
    s.mul_(3.0)
    s.add_(x[:10].sum())
    y = x * s
    got = s.item()
    want = 3.0 * float(a.astype(np.float64).sum()) + float(a[:10].astype(np.float64).sum())
    assert got == pytest.approx(want, rel=1e-5, abs=1e-4)
    np.testing.assert_allclose(y.numpy(), a * np.float32(got), rtol=1e-6)
    assert s.tolist() == got and bool(s != 0)


def test_several_reads_and_the_sync_after(dev, rng):
    # to_numpy of two scalars (each mapped), of more than MAPPABLE_MAX_READS (the staging
    # path, the mappable buffers its copies' sources), of a mix with an ordinary tensor; a map
    # of one scalar waits only for the work that uses it, so the device is not marked idle
    a = rng.standard_normal(4096).astype(np.float32)
    x = pr.tensor(a)
    w = a.astype(np.float64)
    s, m = pr.to_numpy(x.sum(), x.mean())
    assert float(s) == pytest.approx(float(w.sum()), abs=1e-3)
    assert float(m) == pytest.approx(float(w.mean()), abs=1e-6)
    parts = [x[k * 512 : (k + 1) * 512].sum() for k in range(8)]
    got = pr.to_numpy(*parts, x[:3])
    for k in range(8):
        assert float(got[k]) == pytest.approx(float(w[k * 512 : (k + 1) * 512].sum()), abs=1e-3)
    np.testing.assert_array_equal(got[8], a[:3])
    t = x.sum()
    pr.synchronize()
    _ = x * 2.0  # (pending work that t's map does not wait for)
    t.item()
    assert dev._busy  # so synchronize() still waits for it
    pr.synchronize()
    assert not dev._busy


def test_mappable_buffers_are_pooled_apart_and_reused(dev, rng):
    x = pr.tensor(rng.standard_normal(512).astype(np.float32))
    for _ in range(3):
        x.sum().item()
    made = dev.pool.allocations
    ids = set()
    for _ in range(20):
        s = x.sum()
        ids.add(id(s._storage.buffer))
        assert _in_host(s, dev)
        s.item()
        del s
    assert dev.pool.allocations == made  # (reused, not made anew)
    assert all(i in dev.pool.mappable for i in ids)
    y = pr.empty(16)
    assert not _in_host(y, dev)  # (ordinary allocations never get a mappable one)


def test_off_and_under_compile(dev, rng, monkeypatch):
    a = rng.standard_normal(3000).astype(np.float32)
    x = pr.tensor(a)
    monkeypatch.setattr(dev.pool, "mappable_usage", None)  # (PYRITE_MAPPABLE=0)
    s = x.sum()
    assert not _in_host(s, dev)
    assert s.item() == pytest.approx(float(a.astype(np.float64).sum()), abs=1e-3)
    monkeypatch.undo()

    @pr.compile
    def f(v):
        return (v * v).sum()

    for _ in range(3):
        b = rng.standard_normal(3000).astype(np.float32)
        got = f(pr.tensor(b)).item()
        assert got == pytest.approx(float((b.astype(np.float64) ** 2).sum()), rel=1e-5)
