"""Parity tests for ops/sorting.py against PyTorch (CPU).

Values must match exactly (sorting moves values, never computes them). pyrite's sort is always
stable, so indices are compared exactly with torch's `stable=True` sort; for topk, kthvalue and
median (whose indices torch leaves unspecified among ties) the indices must point at the values.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from optable import laid_out

import pyrite as pr


def same(got, want):
    g = got.numpy()
    w = want.numpy()
    if w.dtype == np.int64:
        w = w.astype(np.int32)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    assert g.dtype == w.dtype, f"dtype {g.dtype}, expected {w.dtype}"
    np.testing.assert_array_equal(g, w)  # NaN equals NaN here


def ties_and_nans(rng, shape, dtype="float32"):
    """Few distinct values (many ties), some NaN and ±inf and -0.0 for floats."""
    if dtype == "int32":
        return rng.integers(-4, 4, size=shape).astype(np.int32)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    a = rng.integers(-4, 4, size=shape).astype(np.float32) * 0.5
    flat = a.reshape(-1)
    k = flat.size
    for v in (np.nan, np.inf, -np.inf, -0.0):
        flat[rng.integers(0, k, size=max(1, k // 17))] = v
    return a


CASES = [
    ((1,), -1),
    ((7,), 0),
    ((3, 13), -1),
    ((257, 5), 0),
    ((4, 1000), 1),
    ((2, 1025), -1),
    ((2, 3, 31), 1),
    ((2, 2048), -1),
]


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
@pytest.mark.parametrize("layout", ["c", "t", "s"])
def test_sort_argsort(rng, dtype, layout):
    for shape, dim in CASES:
        a = ties_and_nans(rng, shape, dtype)
        x, t = laid_out(a, layout), torch.tensor(a)
        for desc in (False, True):
            v, i = pr.sort(x, dim=dim, descending=desc)
            tv, ti = torch.sort(t, dim=dim, descending=desc, stable=True)
            same(v, tv)
            same(i, ti)
            same(
                x.argsort(dim, descending=desc, stable=True),
                torch.argsort(t, dim=dim, descending=desc, stable=True),
            )
    r = pr.sort(pr.tensor([3.0, 1.0]))
    assert isinstance(r, tuple) and r.values.tolist() == [1.0, 3.0] and r.indices.tolist() == [1, 0]


def test_sort_long_rows_global_passes(rng):
    # rows over 2048 take the global-pass path: 5000 pads to 8192 (two global stages)
    for shape, dim in (((3, 5000), -1), ((4097, 2), 0), ((1, 8192), -1)):
        a = ties_and_nans(rng, shape)
        x, t = pr.tensor(a), torch.tensor(a)
        for desc in (False, True):
            v, i = pr.sort(x, dim=dim, descending=desc)
            tv, ti = torch.sort(t, dim=dim, descending=desc, stable=True)
            same(v, tv)
            same(i, ti)
    b = rng.standard_normal(5000).astype(np.float32)
    same(pr.msort(pr.tensor(b)), torch.msort(torch.tensor(b)))


def test_sort_many_rows_grid_fold(rng):
    # 70,001 rows: one workgroup a row, so the grid folds past 65,535 workgroups
    a = rng.integers(-3, 3, size=(70001, 3)).astype(np.float32)
    v, i = pr.sort(pr.tensor(a), -1)
    tv, ti = torch.sort(torch.tensor(a), dim=-1, stable=True)
    same(v, tv)
    same(i, ti)


def _indices_point_at_values(x, d, vals, idx):
    g = np.take_along_axis(x, idx.numpy().astype(np.int64), axis=d)
    np.testing.assert_array_equal(g, vals.numpy())


def test_topk_kthvalue(rng):
    for shape, dim in CASES + [((3, 5000), -1)]:
        a = ties_and_nans(rng, shape)
        x, t = pr.tensor(a), torch.tensor(a)
        n = shape[dim]
        for k in sorted({1, min(3, n), n}):
            for largest in (True, False):
                v, i = pr.topk(x, k, dim=dim, largest=largest)
                tv, _ = torch.topk(t, k, dim=dim, largest=largest)
                same(v, tv)
                _indices_point_at_values(a, dim % len(shape), v, i)
            v, i = x.kthvalue(k, dim, keepdim=True)
            tv, _ = t.kthvalue(k, dim, keepdim=True)
            same(v, tv)
            _indices_point_at_values(a, dim % len(shape), v, i)


def test_median(rng):
    for shape, dim in CASES:
        for nans in (False, True):
            a = ties_and_nans(rng, shape) if nans else rng.standard_normal(shape).astype(np.float32)
            x, t = pr.tensor(a), torch.tensor(a)
            same(x.median(), t.median())
            same(pr.nanmedian(x), torch.nanmedian(t))
            v, i = pr.median(x, dim)
            same(v, torch.median(t, dim).values)
            d = dim % len(shape)
            _indices_point_at_values(
                a,
                d,
                pr.tensor(np.expand_dims(v.numpy(), d)),
                pr.tensor(np.expand_dims(i.numpy(), d)),
            )
            same(
                pr.nanmedian(x, dim, keepdim=True).values,
                torch.nanmedian(t, dim, keepdim=True).values,
            )
    i = rng.integers(-50, 50, size=(6, 9)).astype(np.int32)
    same(pr.tensor(i).median(1).values, torch.tensor(i).median(1).values)


def test_searchsorted_bucketize(rng):
    seq = np.sort(rng.integers(-10, 10, size=31)).astype(np.float32)
    vals = rng.integers(-12, 12, size=(5, 7)).astype(np.float32)
    for right in (False, True):
        same(
            pr.searchsorted(pr.tensor(seq), pr.tensor(vals), right=right),
            torch.searchsorted(torch.tensor(seq), torch.tensor(vals), right=right),
        )
        same(
            pr.bucketize(pr.tensor(vals), pr.tensor(seq), right=right),
            torch.bucketize(torch.tensor(vals), torch.tensor(seq), right=right),
        )
    bseq = np.sort(rng.standard_normal((5, 13)), axis=-1).astype(np.float32)
    bval = rng.standard_normal((5, 4)).astype(np.float32)
    same(
        pr.searchsorted(pr.tensor(bseq), pr.tensor(bval), side="right"),
        torch.searchsorted(torch.tensor(bseq), torch.tensor(bval), side="right"),
    )
    # an unsorted sequence with the permutation that sorts it (sorter=)
    useq = rng.permutation(31).astype(np.float32)
    order = np.argsort(useq)
    same(
        pr.searchsorted(pr.tensor(useq), pr.tensor(vals * 2), sorter=pr.tensor(order)),
        torch.searchsorted(torch.tensor(useq), torch.tensor(vals * 2), sorter=torch.tensor(order)),
    )
    iseq = np.arange(0, 40, 3, dtype=np.int32)
    ival = rng.integers(-2, 42, size=17).astype(np.int32)
    same(
        pr.searchsorted(pr.tensor(iseq), pr.tensor(ival)),
        torch.searchsorted(torch.tensor(iseq), torch.tensor(ival)),
    )


def test_unique(rng):
    a = rng.integers(-5, 5, size=(7, 13)).astype(np.int32)
    x, t = pr.tensor(a), torch.tensor(a)
    same(pr.unique(x), torch.unique(t))
    for got, want in zip(
        pr.unique(x, return_inverse=True, return_counts=True),
        torch.unique(t, return_inverse=True, return_counts=True),
    ):
        same(got, want)
    r = rng.integers(0, 2, size=(9, 3)).astype(np.float32)
    for got, want in zip(
        pr.unique(pr.tensor(r), dim=0, return_inverse=True, return_counts=True),
        torch.unique(torch.tensor(r), dim=0, return_inverse=True, return_counts=True),
    ):
        same(got, want)
    c = np.repeat(rng.integers(0, 3, size=11), rng.integers(1, 4, size=11)).astype(np.float32)
    for got, want in zip(
        pr.unique_consecutive(pr.tensor(c), return_inverse=True, return_counts=True),
        torch.unique_consecutive(torch.tensor(c), return_inverse=True, return_counts=True),
    ):
        same(got, want)
    for got, want in zip(
        pr.unique_consecutive(pr.tensor(r), return_counts=True, dim=0),
        torch.unique_consecutive(torch.tensor(r), return_counts=True, dim=0),
    ):
        same(got, want)


def test_errors():
    x = pr.zeros(3, 5)
    with pytest.raises(RuntimeError, match=r"k=7 .*size 5"):
        pr.topk(x, 7)
    with pytest.raises(RuntimeError, match=r"k=0 .*size 5"):
        x.kthvalue(0)
    with pytest.raises(IndexError, match="dimension out of range"):
        x.sort(dim=2)
    # the device still works after the errors
    same(pr.topk(x, 2).values, torch.zeros(3, 2))


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_bool_median_kthvalue_refused():
    b = pr.tensor([True, False, True])
    for f in (
        lambda: b.median(),
        lambda: b.median(0),
        lambda: b.nanmedian(),
        lambda: b.kthvalue(1),
    ):
        with pytest.raises(TypeError, match="bool"):
            f()


def test_sweep_unique_of_0d_keeps_the_inverse_0d():
    for L in (torch, pr):
        vals, inv, cnt = L.unique(L.tensor(3), return_inverse=True, return_counts=True)
        assert tuple(inv.shape) == () and tuple(vals.shape) == (1,)
    _, inv = pr.unique_consecutive(pr.tensor(2.0), return_inverse=True)
    assert tuple(inv.shape) == ()


def test_sweep_kthvalue_and_unique_shape_errors():
    with pytest.raises(IndexError, match="non-zero size"):
        pr.zeros(0).kthvalue(1)
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        pr.zeros(11, 0).unique(dim=0)
    assert (
        pr.median(pr.zeros(0, dtype=pr.int16)).item()
        == torch.median(torch.zeros(0, dtype=torch.int16)).item()
    )
