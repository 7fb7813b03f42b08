"""Index range checks without a readback (ops/core.note_bounds): an index tensor whose bounds
are known for free (uploaded from the host, arange, randint, randperm, a gather from a bounded
tensor) is not read back; every write to it forgets the bounds, so a bad index written later
is still caught at the call that uses it."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.ops.core import exact_minmax, known_bounds


@contextlib.contextmanager
def counted_reads():
    dev = backend.current()
    dev.flush()
    seen = {"n": 0}
    orig = dev.read

    def counting(*a, **k):
        seen["n"] += 1
        return orig(*a, **k)

    dev.read = counting
    try:
        yield seen
    finally:
        del dev.read


def test_upload_bounds_are_exact(rng):
    a = rng.integers(-7, 40, 37)
    t = pr.tensor(a)
    assert known_bounds(t) == (a.min(), a.max())
    assert exact_minmax(t) == (a.min(), a.max())
    assert exact_minmax(t[1:]) is None  # a part of it: only bounds, not its min and max
    assert known_bounds(t[1:]) == (a.min(), a.max())
    assert known_bounds(pr.tensor(rng.standard_normal(5).astype(np.float32))) is None


def test_bounded_labels_need_no_readback(rng):
    n, c = 53, 11
    logits = pr.tensor(rng.standard_normal((n, c)).astype(np.float32))
    labels = pr.tensor(rng.integers(0, c, n))
    emb = pr.nn.Embedding(c, 6)
    pr.nn.functional.cross_entropy(logits, labels)  # warm: the device's one-time probes
    with counted_reads() as reads:
        pr.nn.functional.cross_entropy(logits, labels)
        pr.nn.functional.cross_entropy(logits, labels, ignore_index=3)
        emb(labels)
        logits.gather(1, labels[:, None])
        logits[pr.arange(n), labels]
        emb(pr.randint(0, c, (4, 5)))
        emb(pr.randperm(c))
        batch = labels[pr.tensor(rng.integers(0, n, 9))]  # a DataLoader's batch of labels
        pr.nn.functional.cross_entropy(logits[:9], batch)
    assert reads["n"] == 0


def _writes(t, c):
    """Ways a bounded index tensor gets an out-of-range value written into it."""
    return {
        "setitem": lambda: t.__setitem__(2, c + 5),
        "add_": lambda: t.add_(c),
        "copy_": lambda: t.copy_(pr.tensor(np.full(t.shape, c + 1))),
        "fill_": lambda: t.fill_(-c - 1),
        "index_put_": lambda: t.index_put_((pr.tensor([0]),), pr.tensor([c])),
        "scatter_": lambda: t.scatter_(0, pr.tensor([1]), pr.tensor([c * 2])),
        "out=": lambda: pr.add(t, c, out=t),
    }


@pytest.mark.parametrize(
    "how", ["setitem", "add_", "copy_", "fill_", "index_put_", "scatter_", "out="]
)
def test_a_write_forgets_the_bounds(how, rng):
    c = 9
    emb = pr.nn.Embedding(c, 3)
    t = pr.tensor(rng.integers(0, c, 12))
    emb(t)
    _writes(t, c)[how]()
    with pytest.raises(IndexError, match="out of bounds"):
        emb(t)


def test_a_write_through_a_view_forgets_the_bounds(rng):
    c = 9
    t = pr.tensor(rng.integers(0, c, (3, 4)))
    t.t()[1, 2] = 100  # a view of the same storage
    with pytest.raises(IndexError, match="out of bounds"):
        pr.nn.functional.embedding(t, pr.randn(c, 2))


def test_bounds_that_fail_still_check_the_view(rng):
    # the storage holds a bad value outside the view that is used: that view is fine
    c = 5
    t = pr.tensor(np.array([0, 1, 4, 2, 77]))
    w = pr.randn(c, 3)
    got = pr.nn.functional.embedding(t[:4], w).numpy()
    np.testing.assert_array_equal(got, w.numpy()[[0, 1, 4, 2]])
    with pytest.raises(IndexError, match="index 77 is out of bounds"):
        pr.nn.functional.embedding(t, w)


def test_recycled_buffers_carry_no_bounds(rng):
    for _ in range(20):
        t = pr.tensor(rng.integers(0, 3, 64))
        del t
        u = pr.tensor(rng.standard_normal(64).astype(np.float32)).to(pr.int32) * 1000
        assert known_bounds(u) is None


def test_one_hot_of_uploaded_labels_reads_nothing(rng):
    labels = rng.integers(0, 7, 40)
    t = pr.tensor(labels)
    with counted_reads() as reads:
        oh = pr.nn.functional.one_hot(t)
    assert reads["n"] == 0
    np.testing.assert_array_equal(oh.numpy(), np.eye(labels.max() + 1, dtype=np.int64)[labels])
