"""Parity tests for ops/combine.py against PyTorch (CPU): cat/stack, split/chunk, repeat/tile,
flip/roll, tril/triu, pad, meshgrid, diag, and their error messages.

Every op here moves values without arithmetic, so results must match exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from optable import laid_out

import pyrite as pr
from pyrite.errors import ShapeError
from pyrite.ops.pad import pad as pr_pad

SIZES = (1, 7, 13, 257)


def _np(t):
    return t.numpy() if isinstance(t, pr.Tensor) else t.detach().numpy()


def same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    g, w = _np(got), _np(want)
    if w.dtype == np.int64:
        w = w.astype(np.int32)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    assert g.dtype == w.dtype, f"dtype {g.dtype}, expected {w.dtype}"
    np.testing.assert_array_equal(g, w)


def pair(a, layout="c"):
    """(pyrite, torch) holding `a`; layout 't' gives a transposed view, 's' a strided slice."""
    return laid_out(a, layout), torch.tensor(a)


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("layout", ["c", "t", "s"])
def test_cat_stack(rng, layout):
    for n in SIZES:
        a, b = rnd(rng, 3, n), rnd(rng, 3, n + 2)
        (pa, ta), (pb, tb) = pair(a, layout), pair(b, layout)
        same(pr.cat([pa, pb], dim=-1), torch.cat([ta, tb], dim=-1))
        same(pr.concat([pa, pa], 0), torch.concat([ta, ta], 0))
        same(pr.stack([pa, pa, pa], dim=1), torch.stack([ta, ta, ta], dim=1))
        same(pr.stack([pa, pa], dim=-1), torch.stack([ta, ta], dim=-1))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, bool, np.int8])
@pytest.mark.parametrize("k", [1, 3, 6, 7, 13])
def test_cat_one_dispatch_a_few_inputs(rng, dtype, k, monkeypatch):
    """cat's own kernel (kernels/indexing.cat_kernel): k inputs of awkward sizes along each dim
    of a rank-3 result, contiguous, transposed and sliced (offset) views mixed, equal to torch's;
    one dispatch for each six inputs (the chunks of 7 and 13 take two and three)."""
    from pyrite import backend
    from pyrite.ops import core

    monkeypatch.setattr(core, "POISON", False)  # (count cat's own dispatches)
    from pyrite.kernels.indexing import CAT_INPUTS

    dev = backend.current()
    k_max = min(CAT_INPUTS, dev.limits.get("max-storage-buffers-per-shader-stage", 8) - 2)
    for dim in (0, 1, -1):
        arrays, views, tviews = [], [], []
        for j in range(k):
            shape = [3, 5, 4]
            shape[dim] = int(rng.integers(1, 9))
            a = (rng.standard_normal(shape) * 9).astype(dtype)
            arrays.append(a)
            layout = ("c", "t", "s")[j % 3]
            if layout == "t":  # a transposed view of the transposed array: strides (1, .., ..)
                v = pr.tensor(np.ascontiguousarray(a.transpose(2, 1, 0))).permute(2, 1, 0)
            elif layout == "s":  # a slice: an offset into a larger storage
                v = pr.tensor(np.concatenate([a, a], axis=1))[:, a.shape[1] :]
            else:
                v = pr.tensor(a)
            views.append(v)
            tviews.append(torch.tensor(a))
        d0 = dev.dispatches
        got = pr.cat(views, dim)
        assert dev.dispatches - d0 == -(-k // k_max)
        same(got, torch.cat(tviews, dim))


def test_cat_mixed_dtypes_and_empty(rng):
    a = rnd(rng, 2, 5)
    i = rng.integers(-9, 9, size=(3, 5)).astype(np.int32)
    b = rng.integers(0, 2, size=(1, 5)).astype(bool)
    pa, ta = pair(a)
    got = pr.cat([pa, pr.tensor(i), pr.tensor(b)])
    want = torch.cat([ta, torch.tensor(i), torch.tensor(b)])
    assert got.dtype is pr.float32
    same(got, want)
    same(pr.cat([pr.tensor(i), pr.tensor(b)]), torch.cat([torch.tensor(i), torch.tensor(b)]))
    # PyTorch skips 1-D empty tensors
    same(pr.cat([pr.tensor(np.zeros(0, np.float32)), pa]), torch.cat([torch.zeros(0), ta]))
    same(pr.concatenate([pa, pa[:0]], 0), torch.cat([ta, ta[:0]], 0))


def test_hvd_stack(rng):
    v, m = rnd(rng, 7), rnd(rng, 3, 7)
    (pv, tv), (pm, tm) = pair(v), pair(m)
    same(pr.hstack([pv, pv]), torch.hstack([tv, tv]))
    same(pr.hstack([pm, pm]), torch.hstack([tm, tm]))
    same(pr.vstack([pv, pm]), torch.vstack([tv, tm]))
    same(pr.dstack([pv, pv]), torch.dstack([tv, tv]))
    same(pr.dstack([pm, pm]), torch.dstack([tm, tm]))
    same(pr.column_stack([pv, pm.t()]), torch.column_stack([tv, tm.t()]))
    for fn, tfn in (
        (pr.atleast_1d, torch.atleast_1d),
        (pr.atleast_2d, torch.atleast_2d),
        (pr.atleast_3d, torch.atleast_3d),
    ):
        for x in (np.float32(2.5), v, m, rnd(rng, 2, 3, 4)):
            same(fn(pr.tensor(x)), tfn(torch.tensor(x)))


def test_split_chunk(rng):
    for n in (1, 7, 13, 257):
        a = rnd(rng, 3, n)
        pa, ta = pair(a, "t")
        for size in (1, 2, 5, n):
            same(pa.split(size, dim=-1), ta.split(size, dim=-1))
            same(pa.chunk(size, 1), ta.chunk(size, 1))
            same(pa.tensor_split(size, dim=1), ta.tensor_split(size, dim=1))
        sizes = [n // 3, n - n // 3 - 1, 1]
        same(pr.split(pa, sizes, 1), torch.split(ta, sizes, 1))
        same(pr.tensor_split(pa, [1, 4, -2], dim=1), torch.tensor_split(ta, [1, 4, -2], dim=1))
    # split results are views: writing one changes the source
    x = pr.zeros(6)
    x.split(4)[1].fill_(1.0)
    assert x.tolist() == [0, 0, 0, 0, 1, 1]


def test_repeat_tile_interleave(rng):
    a = rnd(rng, 3, 7)
    for layout in "cts":
        pa, ta = pair(a, layout)
        same(pa.repeat(2, 1, 3), ta.repeat(2, 1, 3))
        same(pa.repeat(1, 1), ta.repeat(1, 1))
        same(pr.tile(pa, (2,)), torch.tile(ta, (2,)))
        same(pr.tile(pa, (2, 1, 2)), torch.tile(ta, (2, 1, 2)))
        same(pa.repeat_interleave(3, dim=1), ta.repeat_interleave(3, dim=1))
        same(pr.repeat_interleave(pa, 2), torch.repeat_interleave(ta, 2))
        same(
            pa.repeat_interleave(pr.tensor([2, 0, 3]), dim=0),
            ta.repeat_interleave(torch.tensor([2, 0, 3]), dim=0),
        )
    same(
        pr.repeat_interleave(pr.tensor([1, 3, 2])), torch.repeat_interleave(torch.tensor([1, 3, 2]))
    )
    e = pr.tensor(np.float32(1.5)).reshape(1).expand(4)
    same(e.repeat(2, 3), torch.full((4,), 1.5).repeat(2, 3))


def test_flip_roll(rng):
    a = rnd(rng, 4, 7, 13)
    for layout in "cts":
        pa, ta = pair(a, layout)
        same(pa.flip(0), ta.flip(0))
        same(pa.flip((-1, 0)), ta.flip((-1, 0)))
        same(pr.fliplr(pa), torch.fliplr(ta))
        same(pr.flipud(pa), torch.flipud(ta))
        same(pa.roll(5), ta.roll(5))
        same(pa.roll(-3, 1), ta.roll(-3, 1))
        same(pr.roll(pa, (1, -20, 40), (0, -1, 1)), torch.roll(ta, (1, -20, 40), (0, -1, 1)))
    i = rng.integers(-5, 5, size=(257,)).astype(np.int32)
    same(pr.tensor(i).roll(100), torch.tensor(i).roll(100))


def test_tril_triu(rng):
    for shape in ((1, 1), (7, 13), (13, 7), (2, 3, 5, 6)):
        a = rnd(rng, *shape)
        for layout in "ct":
            pa, ta = pair(a, layout)
            for k in (-20, -2, -1, 0, 1, 3, 20):
                same(pa.tril(k), ta.tril(k))
                same(pr.triu(pa, diagonal=k), torch.triu(ta, diagonal=k))
    i = rng.integers(-9, 9, size=(2, 5, 5)).astype(np.int32)
    same(pr.tensor(i).tril(-1), torch.tensor(i).tril(-1))
    b = rng.integers(0, 2, size=(5, 4)).astype(bool)
    same(pr.tensor(b).triu(1), torch.tensor(b).triu(1))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(rng, mode):
    a4 = rnd(rng, 2, 3, 7, 13)
    for layout in "ct":
        for p in ((1, 2), (3, 0, 1, 2), (0, 5, 2, 1), (-1, 2), (2, -3, 1, -1), (6, 1, 0, 4)):
            # torch pads 3-D inputs by one pair, 4-D by two, outside constant mode
            pa, ta = pair(a4[0] if len(p) == 2 else a4, layout)
            kw = {"value": -1.5} if mode == "constant" else {}
            same(pr_pad(pa, p, mode=mode, **kw), F.pad(ta, p, mode=mode, **kw))
    if mode == "constant":
        same(pr_pad(pa, (1, 1, 1, 1, 1, 1)), F.pad(ta, (1, 1, 1, 1, 1, 1)))
        i = rng.integers(-9, 9, size=(3, 4)).astype(np.int32)
        same(pr_pad(pr.tensor(i), (2, 1), value=7), F.pad(torch.tensor(i), (2, 1), value=7))


def test_meshgrid_cartesian(rng):
    x, y, z = rnd(rng, 7), rnd(rng, 3), rnd(rng, 1)
    (px, tx), (py, ty), (pz, tz) = pair(x), pair(y), pair(z)
    for indexing in ("ij", "xy"):
        same(
            pr.meshgrid(px, py, pz, indexing=indexing),
            torch.meshgrid(tx, ty, tz, indexing=indexing),
        )
        same(pr.meshgrid([px, py], indexing=indexing), torch.meshgrid([tx, ty], indexing=indexing))
    same(pr.cartesian_prod(px, py), torch.cartesian_prod(tx, ty))


def test_diag_broadcast_misc(rng):
    v, m = rnd(rng, 7), rnd(rng, 5, 8)
    (pv, tv), (pm, tm) = pair(v), pair(m, "t")
    for k in (-2, 0, 3):
        same(pr.diag(pv, k), torch.diag(tv, k))
        same(pr.diag(pm, k), torch.diag(tm, k))
        same(pr.diag_embed(pm, k), torch.diag_embed(tm, k))
    same(pr.diag_embed(pm, 1, 0, 2), torch.diag_embed(tm, 1, 0, 2))
    same(pr.diagflat(pm), torch.diagflat(tm))
    same(pr.narrow_copy(pm, 1, 2, 3), torch.narrow_copy(tm, 1, 2, 3))
    same(pr.block_diag(pv, pm), torch.block_diag(tv, tm))
    a, b = rnd(rng, 3, 1), rnd(rng, 1, 7)
    same(
        pr.broadcast_tensors(pr.tensor(a), pr.tensor(b)),
        torch.broadcast_tensors(torch.tensor(a), torch.tensor(b)),
    )


def test_errors():
    a, b = pr.zeros(2, 3), pr.zeros(3, 4)
    with pytest.raises(ShapeError, match=r"dimension 1.*\(2, 3\).*\(3, 4\)"):
        pr.cat([a, b], dim=1)
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(3, 4\)"):
        pr.stack([a, b])
    with pytest.raises(NotImplementedError, match="padding mode 'bogus'"):
        pr_pad(a, (1, 1), mode="bogus")
    with pytest.raises(ValueError, match="padding size should be less"):
        pr_pad(a, (3, 0), mode="reflect")
    with pytest.raises(ShapeError, match="sum exactly to 3"):
        a.split([1, 1], dim=1)
    with pytest.raises(ShapeError, match="repeat dims"):
        a.repeat(2)
    with pytest.raises(IndexError, match="dimension out of range"):
        pr.cat([a, a], dim=2)
    # the device still works after the errors
    same(pr.cat([a, a], 1), torch.zeros(2, 6))


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_meshgrid_wants_one_dtype_and_diag_embed_dims():
    with pytest.raises(TypeError, match="same dtype"):
        pr.meshgrid(pr.ones(2), pr.ones(3, dtype=pr.int32), indexing="ij")
    with pytest.raises(IndexError, match="out of range"):
        pr.diag_embed(pr.tensor(2.0))  # dims -2, -1 of a 1-D result
    with pytest.raises(RuntimeError, match="identical"):
        pr.diag_embed(pr.ones(3), 0, 0, -2)
    with pytest.raises(RuntimeError, match="1-dimensional"):
        pr.tensor_split(pr.tensor(1.0), 2)


def test_sweep_pad_errors_are_runtime_errors():
    x = pr.zeros(1, 1, 3, 2)
    with pytest.raises(RuntimeError, match="padding size should be less"):
        F_pr = pr.nn.functional
        F_pr.pad(x, (3, 1, 0, 0), mode="reflect")
    with pytest.raises(RuntimeError, match="wrapping around"):
        pr.nn.functional.pad(x, (3, 2, 1, 1), mode="circular")


def test_sweep_cat_of_mixed_ranks():
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        pr.hstack([pr.ones(3), pr.ones(3, 1)])
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        pr.cat([pr.ones(2, 2), pr.ones(2)], 1)
    with pytest.raises(RuntimeError, match="overflow"):  # F.pad's value is a float
        pr.nn.functional.pad(pr.ones(2, 2, dtype=pr.uint8), (1, 1), value=-2)


def test_sweep_pad_without_padding_ignores_the_value():
    x = pr.ones(1, 1, 5, 1, dtype=pr.uint8)
    assert pr.nn.functional.pad(x, (0, 0), value=-2).tolist() == x.tolist()
