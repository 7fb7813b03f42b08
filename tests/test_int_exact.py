"""Integer exactness: a sum, prod, cumsum or cumprod whose result (int64 in PyTorch) leaves
int32 raises OverflowError naming the op, never wraps; one that fits is exact even when partial
sums overflow. Through every kernel shape (serial, row, split) and past lavapipe's loop budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.ops.reduce as R

I32 = 2**31


@pytest.fixture(params=["serial", "row", "split"])
def path(request, monkeypatch):
    if request.param == "split":
        monkeypatch.setattr(R, "FORCE_SPLIT", 3)
    else:
        monkeypatch.setattr(R, "FORCE_MODE", request.param)
    return request.param


def check(op, x: np.ndarray, **kw):
    """pyrite's int32 op against torch's int64 one: equal where it fits, else OverflowError."""
    want = getattr(torch.from_numpy(x.astype(np.int64)), op)(**kw).numpy()
    t = pr.tensor(x)
    if want.min(initial=0) < -I32 or want.max(initial=0) >= I32:
        with pytest.raises(OverflowError, match=rf"pyrite: {op}: the result does not fit in int32"):
            getattr(t, op)(**kw)
        return False
    got = getattr(t, op)(**kw)
    assert got.dtype is pr.int32
    assert np.array_equal(got.numpy(), want), (op, kw)
    return True


def big_ints(rng, shape, top=2**30):
    return rng.integers(-top, top, shape).astype(np.int32)


@pytest.mark.parametrize("op", ["sum", "nansum"])
def test_sum_exact_or_refused(op, path, rng):
    fits = refused = 0
    for shape, dim in [
        ((7,), 0),
        ((5, 13), 1),
        ((13, 5), 0),
        ((3, 4, 37), (0, 2)),
        ((1031,), None),
    ]:
        x = big_ints(rng, shape, 2**29)
        ok = check(op, x, dim=dim) if dim is not None else check(op, x)
        fits += ok
        refused += not ok
    # partial sums past int32, total inside: exact (accumulated in 64 bits)
    x = np.array([2**30, 2**30, 2**30, -(2**30) - 7, -(2**30), -(2**30) + 3], np.int32)
    assert check(op, np.tile(x, (3, 1)), dim=1)
    # the boundary itself
    assert check(op, np.array([I32 - 2, 1], np.int32))
    assert not check(op, np.array([I32 - 1, 1], np.int32))
    assert check(op, np.array([-I32 + 1, -1], np.int32))
    assert not check(op, np.array([-I32, -1], np.int32))
    assert fits and refused


def test_prod_exact_or_refused(path, rng):
    for shape, dim in [((9,), 0), ((4, 11), 1), ((11, 4), 0)]:
        check("prod", rng.integers(-40, 40, shape).astype(np.int32), dim=dim)
    assert check("prod", np.array([2**16, 2**15, -1], np.int32))  # -2^31 fits
    assert not check("prod", np.array([2**16, 2**15], np.int32))  # 2^31 does not
    assert check("prod", np.array([2**20, 2**20, 0, 5], np.int32))  # a zero: 0, however big
    assert check("prod", np.array([0, 2**20, 2**20, 3], np.int32))
    assert not check("prod", np.array([3, -(2**30), 1, 1], np.int32))
    assert check("prod", np.array([-1] * 31 + [-(2**31) + 1], np.int32))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scans_exact_or_refused(op, rng, monkeypatch):
    for mode in ("serial", "row"):
        monkeypatch.setattr(R, "FORCE_MODE", mode)
        if op == "cumsum":
            x = big_ints(rng, (4, 300), 2**24)
            assert check(op, x, dim=1)
            x[2, 150:] = 2**30  # overflows from there on
            assert not check(op, x, dim=1)
            # up past int32 then back down: an output out of range, refused
            assert not check(op, np.array([2**30, 2**30, -(2**30)], np.int32), dim=0)
            assert check(op, np.array([2**30, 2**30 - 1, -(2**30)], np.int32), dim=0)
        else:
            x = rng.integers(-3, 4, (5, 40)).astype(np.int32)
            check(op, x, dim=1)
            assert not check(op, np.array([2**16, 2**15, 0, 7], np.int32), dim=0)
            assert check(op, np.array([2**15, 2**15, 0, 7], np.int32), dim=0)
            assert check(op, np.array([-(2**15), 2**16, 0, 7], np.int32), dim=0)
            assert check(op, np.array([-1, -(2**31) + 1, -1], np.int32), dim=0)
            assert not check(op, np.array([-1, -(2**31), -1], np.int32), dim=0)


def test_small_and_bool_inputs_need_no_readback(rng):
    """Bounded results take the plain kernel: no flag, no readback (no round trip)."""
    x = pr.tensor(rng.integers(0, 256, 100_003).astype(np.uint8))
    b = pr.tensor(rng.random(1000) < 0.5)
    x[:5].sum(), x[:5].cumsum(0), b[:5].sum()  # (first uses may probe the device: a readback)
    pr.synchronize()
    before = pr.memory_stats()["readbacks"]
    s, c, bs = x.sum(), x.cumsum(0), b.sum()
    assert pr.memory_stats()["readbacks"] == before
    assert s.item() == int(x.numpy().astype(np.int64).sum()) and bs.item() == int(b.numpy().sum())
    assert c[-1].item() == s.item()
    i = pr.tensor(rng.integers(-5, 5, 1000).astype(np.int32))
    pr.synchronize()
    before = pr.memory_stats()["readbacks"]
    i.sum()  # (its values' range is known from the host's data: the sum fits, no flag read)
    assert pr.memory_stats()["readbacks"] == before
    # values made on the GPU (a float cast: no range known): the one readback of the flag
    j = (pr.tensor(rng.standard_normal(1000).astype(np.float32)) * 3).to(pr.int32)
    want = int(j.numpy().astype(np.int64).sum())
    before = pr.memory_stats()["readbacks"]
    js = j.sum()
    assert pr.memory_stats()["readbacks"] == before + 1  # the one readback of the flag
    assert js.item() == want
    # explicit small / float dtypes: torch's wrapping or float result, no check
    u = pr.tensor(np.full(1000, 200, np.uint8))
    assert u.sum(dtype=pr.uint8).item() == (200 * 1000) % 256
    assert i.sum(dtype=pr.float32).dtype is pr.float32


def test_long_rows_past_the_loop_budget(rng):
    """300,007 int32 elements (past lavapipe's 65,535 iterations in one loop): the split path
    of the exact sum agrees with numpy's int64, and an overflowing one is refused."""
    x = rng.integers(-5000, 5000, 300_007).astype(np.int32)
    assert pr.tensor(x).sum().item() == int(x.astype(np.int64).sum())
    x2 = np.full(300_007, 8000, np.int32)  # 2.4e9
    with pytest.raises(OverflowError, match="sum"):
        pr.tensor(x2).sum()
    y = np.full((2, 300_007), 8000, np.int32)
    with pytest.raises(OverflowError, match="cumsum"):
        pr.tensor(y).cumsum(1)
    z = np.ones(300_007, np.int32)
    assert pr.tensor(z).cumsum(0)[-1].item() == 300_007


def test_kernel_text():
    from pyrite.kernels.reduce import reduce_kernel

    k = reduce_kernel("isum", "i32", "i32", ("i32", "u32"), ("i32", "bool"), 0, 1, "serial")
    assert "lo: u32, hi: i32" in k.wgsl and "select(0, 1, l < lo)" in k.wgsl
    p = reduce_kernel("iprod", "i32", "i32", ("i32", "u32"), ("i32", "bool"), 0, 1, "row")
    assert "0x80000000u / m" in p.wgsl
