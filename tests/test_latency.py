"""Issue 9's round-trip behaviour: what waits and what does not, the early first batch, the C
entry points against wgpu-py's checked calls, and the fast paths of item() and plain indexing."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.backend import device as devmod


def _readbacks():
    return pr.memory_stats()["readbacks"]


def test_synchronize_waits_only_when_something_was_submitted(rng):
    x = pr.tensor(rng.standard_normal(1000).astype(np.float32))
    pr.synchronize()
    n = _readbacks()
    pr.synchronize()
    pr.synchronize()
    assert _readbacks() == n  # nothing recorded or submitted since: no round trip
    y = x * 3
    pr.synchronize()
    assert _readbacks() == n + 1
    pr.tensor(rng.standard_normal(10).astype(np.float32))  # an upload alone is queue work too
    pr.synchronize()
    assert _readbacks() == n + 2
    # a read leaves the device idle: the synchronize after it has nothing to wait for
    np.testing.assert_allclose(y.numpy(), x.numpy() * 3, rtol=1e-6)
    k = _readbacks()
    pr.synchronize()
    assert _readbacks() == k


def test_first_batch_after_a_wait_is_submitted_early_and_batches_grow(rng):
    dev = backend.current()
    a = rng.standard_normal(257).astype(np.float32)
    x = pr.tensor(a)
    pr.synchronize()
    first = devmod.BATCH_FIRST
    s0, d0 = dev.submits, dev.dispatches
    marks = []  # dispatches recorded when each batch went
    y, n = x, 0
    while len(marks) < 2:
        y = y + 1.0
        n += 1
        if dev.submits > s0 + len(marks):
            marks.append(dev.dispatches - d0)
    assert marks[0] == first  # the GPU starts on the first few ops
    assert marks[1] - marks[0] == 2 * first  # the next batch is twice as long
    np.testing.assert_allclose(y.numpy(), a + n, rtol=1e-5)
    assert dev._batch_limit == first  # the read reset it


@pytest.mark.parametrize("idle", [True, False])
def test_a_batch_goes_early_when_the_queue_has_run_dry(rng, monkeypatch, idle):
    """PYRITE_BATCH_IDLE: past that many dispatches, a batch is submitted at the next check
    (every IDLE_CHECK_EVERY) that finds the queue empty; while it is busy the doubling rules."""
    dev = backend.current()
    if dev._c is None:
        pytest.skip("the early submit asks the C path whether the queue is empty")
    a = rng.standard_normal(300).astype(np.float32)
    x = pr.tensor(a)
    pr.synchronize()
    assert dev._c.queue_idle() or dev._c.impl != "wgpu"  # nothing in flight after a wait
    first, every = devmod.BATCH_FIRST, devmod.IDLE_CHECK_EVERY
    monkeypatch.setattr(devmod, "BATCH_IDLE", every)
    monkeypatch.setattr(dev._c, "queue_idle", lambda: idle)
    s0, d0 = dev.submits, dev.dispatches
    marks = []
    y, n = x, 0
    while len(marks) < 3:
        y = y * 0.5 + 1.0
        n += 1
        if dev.submits > s0 + len(marks):
            marks.append(dev.dispatches - d0)
    gaps = np.diff([0, *marks]).tolist()
    if idle:  # every check past BATCH_IDLE finds the queue empty
        assert gaps == [first, every, every]
    else:
        assert gaps == [first, 2 * first, 4 * first]
    want = a.astype(np.float64)
    for _ in range(n):
        want = want * 0.5 + 1.0
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5)


def test_checked_calls_give_the_same_results_as_the_c_path():
    """PYRITE_SAFE_CALLS=1 runs every call through wgpu-py; the numbers must not change."""
    script = textwrap.dedent(
        """
        import numpy as np, pyrite as pr
        from pyrite import backend
        rng = np.random.default_rng(5)
        a = rng.standard_normal((37, 65)).astype(np.float32)
        w = rng.standard_normal((19, 65)).astype(np.float32)
        x = pr.tensor(a)
        out = [pr.nn.functional.linear(x, pr.tensor(w)).numpy().ravel(),
               np.array([x.sum().item(), x[3, 7].item()], np.float32),
               (x[1:, ::2] * 2).softmax(-1).numpy().ravel()]
        pr.synchronize()
        print(backend.current()._c is None)
        np.save(__import__("sys").argv[1], np.concatenate(out))
        """
    )
    outs = []
    for safe in ("1", ""):
        env = dict(os.environ)
        env.pop("PYRITE_SAFE_CALLS", None)
        if safe:
            env["PYRITE_SAFE_CALLS"] = safe
        path = os.path.join(
            os.environ.get("TMPDIR", "/tmp"), f"pyrite_safe_{safe or 0}_{os.getpid()}.npy"
        )
        r = subprocess.run(
            [sys.executable, "-c", script, path], env=env, capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == ("True" if safe else "False")
        outs.append(np.load(path))
        os.unlink(path)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "bool", "bfloat16", "uint8"])
def test_item_of_every_dtype_and_of_strided_views(dtype, rng):
    dt = getattr(pr, dtype)
    if dt is pr.float16 and not backend.current().has_f16:
        pytest.skip("no shader-f16 on this device")
    a = rng.standard_normal((5, 7)) * 10
    t = pr.tensor(a.astype(np.float32)).to(dt)
    host = t.float().numpy() if dt is pr.bfloat16 else t.numpy()
    for i, j in ((0, 0), (4, 6), (-1, 3), (2, -7)):
        v = t[i, j].item()
        assert type(v) is (float if dt.is_floating_point else bool if dt is pr.bool else int)
        assert v == host[i, j]
        assert t.T[j, i].item() == host[i, j]  # a 0-d view into a transposed tensor
    assert t[2:3, 4:5].item() == host[2, 4]  # one element, two dims
    with pytest.raises(ValueError, match="cannot be converted"):
        t[0].item()


def test_plain_int_and_slice_indexing_matches_numpy(rng):
    a = rng.standard_normal((6, 5, 4)).astype(np.float32)
    t = pr.tensor(a)
    for _ in range(200):
        idx = []
        for d in range(int(rng.integers(1, 4))):
            n = a.shape[d]
            if rng.random() < 0.5:
                idx.append(int(rng.integers(-n, n)))
            else:
                lo, hi = sorted(int(v) for v in rng.integers(-n - 2, n + 2, 2))
                idx.append(slice(lo, hi, int(rng.choice([1, 2, 3, -1]) if lo != hi else 1)))
        key = tuple(idx) if rng.random() < 0.8 or len(idx) > 1 else idx[0]
        # (negative steps are views here, as numpy's: ops/views.py; torch refuses them)
        np.testing.assert_array_equal(t[key].numpy(), a[key])
    with pytest.raises(IndexError, match="out of bounds"):
        t[6]
    with pytest.raises(IndexError, match="out of bounds"):
        t[0, -6]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError):
        pr.tensor(3.0)[0]


def test_to_numpy_reads_many_tensors_in_one_round_trip(rng):
    a = rng.standard_normal((33, 7)).astype(np.float32)
    x = pr.tensor(a)
    loss, acc = (x * 2).sum(), (x > 0).float().mean()
    ints = pr.tensor(rng.integers(-9, 9, 13).astype(np.int32))
    flags = x[:, 0] > 0
    empty = pr.tensor(np.zeros((0, 3), np.float32))
    odd = x.T[2:5, 1::3]  # a strided view: made contiguous first
    n = pr.memory_stats()["readbacks"]
    got = pr.to_numpy(loss, acc, ints, 3.5, flags, empty, odd, None)
    assert pr.memory_stats()["readbacks"] == n + 1
    np.testing.assert_allclose(got[0], (a * 2).sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(got[1], (a > 0).mean(), rtol=1e-6)
    np.testing.assert_array_equal(got[2], ints.numpy())
    assert got[3] == 3.5 and got[7] is None
    assert got[4].dtype == np.bool_
    np.testing.assert_array_equal(got[4], a[:, 0] > 0)
    assert got[5].shape == (0, 3)
    np.testing.assert_array_equal(got[6], a.T[2:5, 1::3])
    # past the staging buffer, each read goes the long way (and still right)
    big = rng.standard_normal(devmod.STAGING_BYTES // 4 + 11).astype(np.float32)
    b1, b2 = pr.to_numpy(pr.tensor(big), pr.tensor(big[:100]))
    np.testing.assert_array_equal(b1, big)
    np.testing.assert_array_equal(b2, big[:100])
    with pytest.raises(TypeError, match="BFloat16"):
        pr.to_numpy(x.to(pr.bfloat16))


def test_large_reads_go_in_pieces(rng, monkeypatch):
    monkeypatch.setattr(devmod, "LARGE_READ_BYTES", 1 << 16)
    a = rng.standard_normal(100_003).astype(np.float32)  # 6 pieces and a tail
    t = pr.tensor(a)
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t[7:].numpy(), a[7:])


def _info_writes(dev, monkeypatch):
    """Count the queue writes into the info arena (a list that grows by one a write)."""
    writes, io = [], dev._io
    real = io.write

    def counting(buffer, offset, data):
        if buffer is dev._info_gpu:
            writes.append((offset, len(memoryview(data).cast("B"))))
        return real(buffer, offset, data)

    monkeypatch.setattr(io, "write", counting)
    return writes


def test_an_op_seen_before_writes_no_info(rng, monkeypatch):
    dev = backend.current()
    a = rng.standard_normal((37, 53)).astype(np.float32)
    x = pr.tensor(a)
    float((x * 2.5).sum())  # the first time: its windows are new
    writes = _info_writes(dev, monkeypatch)
    got = [float((x * 2.5).sum()) for _ in range(3)]
    assert writes == []  # every later batch finds its windows on the GPU
    np.testing.assert_allclose(got, [(a * 2.5).sum()] * 3, rtol=1e-4)
    z = pr.tensor(rng.standard_normal((41, 7)).astype(np.float32))
    float((z * 2.5).sum())  # a new shape: new windows, written once in one write
    assert len(writes) == 1 and writes[0][1] > 0


def test_a_full_info_arena_starts_again_without_mixing_windows(rng, monkeypatch):
    # An arena of 3 windows, filled many times over inside one batch and across batches: every
    # op must still read its own sizes (each slice below has its own info words).
    dev = backend.current()
    pr.synchronize()
    monkeypatch.setattr(devmod, "INFO_ARENA_WORDS", 3 * devmod.INFO_WINDOW_WORDS)
    dev._flush()
    dev._info_slots.clear()
    dev._info_pos = dev._info_new = 0
    a = rng.standard_normal((29, 61)).astype(np.float32)
    x = pr.tensor(a)
    for _ in range(2):  # the second round meets words whose windows were overwritten
        outs = [(x[:, : k + 1] * (k + 1)).sum(dim=1) for k in range(23)]
        outs += [(x[: k + 1] + 1.5).sum() for k in range(11)]
        vals = pr.to_numpy(*outs)
        for k in range(23):
            want = (a[:, : k + 1] * (k + 1)).sum(1)
            np.testing.assert_allclose(vals[k], want, rtol=1e-4, atol=1e-4)
        for k in range(11):
            want = (a[: k + 1] + 1.5).sum()
            np.testing.assert_allclose(vals[23 + k], want, rtol=1e-4, atol=1e-3)
    assert dev._info_pos <= 3 * devmod.INFO_WINDOW_WORDS
    monkeypatch.undo()
    dev._flush()
    dev._info_slots.clear()
    dev._info_pos = dev._info_new = 0
