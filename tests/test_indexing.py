"""Advanced indexing and gather/scatter against torch (CPU) on random inputs.

Index elements are described once and turned into both a pyrite index and a torch index:
T(a) a device tensor, TT(a) a device tensor read through a transposed (non-contiguous) view,
L(a) a Python list, N(a) a numpy array; slices, None, ints, Ellipsis and bools pass through.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from optable import laid_out

import pyrite as pr
from pyrite.errors import ShapeError


class T:
    def __init__(self, a):
        self.a = np.asarray(a)


class TT(T):
    pass


class L(T):
    pass


class N(T):
    pass


def _pr_item(i):
    if isinstance(i, TT):
        return pr.tensor(np.ascontiguousarray(i.a.T)).T  # same values, transposed strides
    if isinstance(i, L):
        return i.a.tolist()
    if isinstance(i, N):
        return i.a
    if isinstance(i, T):
        return pr.tensor(i.a)
    return i


def _torch_item(i):
    if isinstance(i, T):
        return torch.tensor(i.a.astype(np.int64) if i.a.dtype.kind in "iu" else i.a)
    return i


def _index(spec):
    return tuple(_pr_item(i) for i in spec), tuple(_torch_item(i) for i in spec)


def _source(rng, shape, layout, dtype="float32"):
    """(pyrite tensor, torch tensor) with equal values; layout c (contiguous), t (transposed
    storage: the last two dims swapped), s (every other element of a wider tensor)."""
    if dtype == "float32":
        a = rng.standard_normal(shape).astype(np.float32)
    elif dtype == "int32":
        a = rng.integers(-1000, 1000, shape).astype(np.int32)
    else:
        a = rng.random(shape) > 0.5
    x = laid_out(a, layout)
    assert layout == "c" or not x.is_contiguous()
    return x, torch.tensor(a)


def _close_sum(got, want, terms_abs_max):
    """Sums whose order differs from the oracle's (atomic accumulation): within
    n·2⁻²⁴·(|base| + Σ|terms|), bounded here by the largest sum of |terms| an element gets."""
    g = got.numpy().astype(np.float64)
    w = want.numpy().astype(np.float64)
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    bound = 64 * 2.0**-24 * (np.abs(w).max() + terms_abs_max)
    assert np.abs(g - w).max() <= bound, f"values differ beyond {bound}: got {g}, expected {w}"


def _eq(got, want):
    g = got.numpy()
    w = want.numpy()
    assert g.shape == w.shape, f"shape {g.shape}, expected {w.shape}"
    assert np.array_equal(g, w), f"values differ: got {g}, expected {w}"


SHAPE = (5, 6, 7)


def _specs(rng):
    """Index forms on a (5, 6, 7) source; only numbers that rng draws (so values are random)."""
    i5 = rng.integers(-5, 5, (4,))
    i6 = rng.integers(-6, 6, (3, 1))
    i7 = rng.integers(-7, 7, (4,))
    m5 = rng.random(5) > 0.5
    m56 = rng.random((5, 6)) > 0.4
    m567 = rng.random(SHAPE) > 0.6
    m67 = rng.random((6, 7)) > 0.5
    return {
        "list": (L(i5),),
        "list_neg_2d": (L(rng.integers(-5, 5, (2, 3))),),
        "tensor": (T(i5),),
        "numpy": (N(i5),),
        "two_broadcast": (T(i5), T(i6)),  # (4,) with (3, 1) -> (3, 4)
        "three": (T(i5), TT(rng.integers(-6, 6, (2, 4)).T.copy().T), T(i7)),
        "noncontig_index": (slice(None), TT(rng.integers(0, 6, (3, 4)))),
        "slice_adv": (slice(1, None, 2), T(i6)),
        "adv_slice": (T(i5), slice(None, None, 2)),
        "separated": (T(i5), slice(None), T(i7)),
        "separated_by_none": (slice(None), T(i6), None, T(i7)),
        "int_between": (T(i5), 2, T(i7)),  # ints are selects in torch: not a separator
        "int_first": (-1, T(i6)),
        "ellipsis": (Ellipsis, T(i7)),
        "ellipsis_mid": (T(i5), Ellipsis, L(i7)),
        "none_front": (None, T(i5), slice(2, 5)),
        "mask_1d": (T(m5),),
        "mask_1d_mid": (slice(None), T(rng.random(6) > 0.5)),
        "mask_2d": (T(m56),),
        "mask_3d": (T(m567),),
        "mask_last2": (slice(None), T(m67)),
        "mask_numpy": (N(m5), slice(1, 3)),
        "mask_and_int_tensor": (T(m5), slice(None), T(rng.integers(0, 7, (1,)))),
        "bool_true": (True,),
        "bool_false": (False, slice(None)),
        "bool_with_adv": (slice(None), True, T(i6)),
        "empty_list": (L(np.zeros(0, np.int64)),),
    }


SPEC_NAMES = list(_specs(np.random.default_rng(0)))


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_getitem(name, rng):
    spec = _specs(rng)[name]
    for layout in ("c", "t"):
        x, tx = _source(rng, SHAPE, layout)
        pidx, tidx = _index(spec)
        _eq(x[pidx], tx[tidx])


def test_getitem_negative_step_numpy(rng):
    # torch refuses negative slice steps; pyrite views them, so numpy is the oracle here
    a = rng.standard_normal(SHAPE).astype(np.float32)
    i5 = rng.integers(-5, 5, (4,))
    got = pr.tensor(a)[pr.tensor(i5), ::-2].numpy()
    np.testing.assert_array_equal(got, a[i5, ::-2])
    got = pr.tensor(a)[::-1][:, [1, 0], 5:1:-1].numpy()
    np.testing.assert_array_equal(got, a[::-1][:, [1, 0], 5:1:-1])


@pytest.mark.parametrize("layout", ["c", "s"])
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_getitem_dtypes(dtype, layout, rng):
    x, tx = _source(rng, (4, 9), layout, dtype)
    for spec in [
        (L(rng.integers(-4, 4, 6)),),
        (slice(None), T(rng.integers(0, 9, (2, 3)))),
        (T(rng.random((4, 9)) > 0.5),),
    ]:
        pidx, tidx = _index(spec)
        _eq(x[pidx], tx[tidx])


def _unique(rng, n, size, shape=None):
    """Distinct indices (some negative) so that setitem's result does not depend on order."""
    v = rng.permutation(size)[:n]
    v = np.where(rng.random(n) < 0.5, v - size, v)
    return v if shape is None else v.reshape(shape)


@pytest.mark.parametrize("case", ["list", "two", "separated", "mask", "slice_mix", "bool"])
def test_setitem(case, rng):
    specs = {
        "list": (L(_unique(rng, 3, 5)),),
        "two": (T(_unique(rng, 3, 5)), TT(_unique(rng, 3, 6))),
        "separated": (T(_unique(rng, 2, 5)), slice(None), T(_unique(rng, 2, 7))),
        "mask": (T(rng.random((5, 6)) > 0.5),),
        "slice_mix": (slice(None, None, 2), T(_unique(rng, 4, 6)), 3),
        "bool": (slice(1, 3), True),
    }
    for layout in ("c", "t"):
        x, tx = _source(rng, SHAPE, layout)
        pidx, tidx = _index(specs[case])
        shape = tx[tidx].shape
        # a scalar, a value of the full indexed shape, and one broadcast from its trailing dim
        full = rng.standard_normal(tuple(shape)).astype(np.float32)
        trail = rng.standard_normal(tuple(shape)[-1:]).astype(np.float32)
        for value in (2.5, full, trail):
            pv = pr.tensor(value) if isinstance(value, np.ndarray) else value
            tv = torch.tensor(value) if isinstance(value, np.ndarray) else value
            x[pidx] = pv
            tx[tidx] = tv
            _eq(x, tx)


def test_setitem_casts_and_int(rng):
    x, tx = _source(rng, (6, 4), "c", "int32")
    idx = _unique(rng, 3, 6)
    v = rng.standard_normal((3, 4)).astype(np.float32) * 100
    x[pr.tensor(idx)] = pr.tensor(v)  # float value into int32: truncated, as torch
    tx[torch.tensor(idx)] = torch.tensor(v).to(torch.int32)
    _eq(x, tx)
    b, tb = _source(rng, (7,), "c", "bool")
    b[[0, 3]] = True
    tb[[0, 3]] = True
    _eq(b, tb)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_index_put_accumulate(dtype, rng):
    x, tx = _source(rng, (5, 3), "s", dtype)
    i = rng.integers(-5, 5, 40)  # many duplicates: summed
    j = rng.integers(0, 3, 40)
    v = rng.integers(-9, 9, 40).astype(np.float32 if dtype == "float32" else np.int32)
    x.index_put_((pr.tensor(i), pr.tensor(j)), pr.tensor(v), accumulate=True)
    tx.index_put_((torch.tensor(i), torch.tensor(j)), torch.tensor(v), accumulate=True)
    # atomic float adds land in any order: x + v1 + v2 rounds differently from x + v2 + v1
    if dtype == "float32":
        _close_sum(x, tx, 40 * 9)
    else:
        _eq(x, tx)
    tx = torch.tensor(x.numpy())  # continue from pyrite's own sums, rounding included
    y = pr.index_put(x, (pr.tensor(i[:2]),), pr.tensor(0).to(x.dtype))
    _eq(y, torch.index_put(tx, (torch.tensor(i[:2]),), torch.tensor(0).to(tx.dtype)))


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_gather_scatter(dim, rng):
    x, tx = _source(rng, (4, 5, 6), "t")
    ishape = [3, 4, 5]
    ishape[dim] = 7
    size = tx.shape[dim]
    idx = rng.integers(0, size, ishape)
    pi, ti = pr.tensor(idx), torch.tensor(idx)
    _eq(x.gather(dim, pi), tx.gather(dim, ti))
    _eq(
        pr.gather(x, dim, pi.transpose(0, 1).contiguous().transpose(0, 1)),
        torch.gather(tx, dim, ti),
    )
    # scatter: distinct targets along dim (a permutation's first rows) so the result is defined
    sshape = [3, 4, 5]
    sshape[dim] = min(size, 3)
    perm = np.argsort(rng.random([4, 5, 6]), axis=dim)
    uidx = np.take(perm, np.arange(sshape[dim]), axis=dim)[:3, :4, :5]
    src = rng.standard_normal((8, 8, 8)).astype(np.float32)  # larger than index: a corner read
    ps, ts = pr.tensor(src), torch.tensor(src)
    pu, tu = pr.tensor(uidx), torch.tensor(uidx)
    _eq(x.scatter(dim, pu, ps), tx.scatter(dim, tu, ts))
    _eq(pr.scatter(x, dim, pu, value=1.5), torch.scatter(tx, dim, tu, value=1.5))
    # scatter_add: duplicates summed; compare within the f32 bound of a sum of ~7 terms
    got = x.scatter_add(dim, pi, ps).numpy()
    want = tx.scatter_add(dim, ti, ts).numpy()
    np.testing.assert_allclose(got, want, rtol=8 * 2**-24 * 8, atol=8 * 2**-24 * 8)
    y = x.clone()
    y.scatter_add_(dim, pi, ps)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self, rng):
    x, tx = _source(rng, (4, 6), "c")
    idx = rng.integers(0, 4, (5, 6))
    src = rng.standard_normal((5, 6)).astype(np.float32)
    got = x.scatter_reduce(0, pr.tensor(idx), pr.tensor(src), reduce, include_self=include_self)
    want = tx.scatter_reduce(
        0, torch.tensor(idx), torch.tensor(src), reduce, include_self=include_self
    )
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_scatter_add_int_and_f16_free(rng):
    x, tx = _source(rng, (8,), "c", "int32")
    idx = rng.integers(0, 8, 50)
    src = rng.integers(-50, 50, 50).astype(np.int32)
    _eq(
        x.scatter_add(0, pr.tensor(idx), pr.tensor(src)),
        tx.scatter_add(0, torch.tensor(idx), torch.tensor(src)),
    )


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_index_select_add_copy_fill(dim, rng):
    x, tx = _source(rng, (4, 5, 6), "s")
    size = tx.shape[dim]
    idx = rng.integers(0, size, 7)
    pi, ti = pr.tensor(idx), torch.tensor(idx)
    _eq(x.index_select(dim, pi), tx.index_select(dim, ti))
    _eq(pr.index_select(x, dim, pi[::2]), torch.index_select(tx, dim, ti[::2]))
    sshape = list(tx.shape)
    sshape[dim] = 7
    src = rng.integers(-8, 8, sshape).astype(np.float32)
    # atomic adds of duplicates land in any order: compare within the rounding of the sums
    _close_sum(
        x.index_add(dim, pi, pr.tensor(src), alpha=2),
        tx.index_add(dim, ti, torch.tensor(src), alpha=2),
        2 * 7 * 8,
    )
    y, ty = x.clone(), tx.clone()
    y.index_add_(dim, pi, pr.tensor(src))
    ty.index_add_(dim, ti, torch.tensor(src))
    _close_sum(y, ty, 7 * 8)
    uidx = rng.permutation(size)[:3]
    sshape[dim] = 3
    src3 = rng.standard_normal(sshape).astype(np.float32)
    _eq(
        x.index_copy(dim, pr.tensor(uidx), pr.tensor(src3)),
        tx.index_copy(dim, torch.tensor(uidx), torch.tensor(src3)),
    )
    _eq(x.index_fill(dim, pi, -3.0), tx.index_fill(dim, ti, -3.0))


@pytest.mark.parametrize("mshape", [(4, 5, 6), (5, 6), (1, 6), (4, 1, 1), (6,)])
def test_masked(mshape, rng):
    x, tx = _source(rng, (4, 5, 6), "t")
    m = rng.random(mshape) > 0.5
    pm, tm = pr.tensor(m), torch.tensor(m)
    _eq(x.masked_fill(pm, 7.0), tx.masked_fill(tm, 7.0))
    _eq(pr.masked_fill(x, pm, pr.tensor(-1.5)), torch.masked_fill(tx, tm, torch.tensor(-1.5)))
    y, ty = x.clone(), tx.clone()
    y.masked_fill_(pm, 0.25)
    ty.masked_fill_(tm, 0.25)
    _eq(y, ty)
    _eq(x.masked_select(pm), tx.masked_select(tm))
    src = rng.standard_normal(120).astype(np.float32)
    _eq(x.masked_scatter(pm, pr.tensor(src)), tx.masked_scatter(tm, torch.tensor(src)))


def test_masked_fill_int_bool_and_broadcast_out(rng):
    x, tx = _source(rng, (3, 4), "c", "int32")
    m = rng.random((2, 1, 4)) > 0.5
    _eq(x.masked_fill(pr.tensor(m), 9), tx.masked_fill(torch.tensor(m), 9))
    b, tb = _source(rng, (3, 4), "c", "bool")
    _eq(b.masked_fill(pr.tensor(m[0]), True), tb.masked_fill(torch.tensor(m[0]), True))


@pytest.mark.parametrize("shape", [(1,), (13,), (3, 7), (2, 3, 5), (1, 2, 1, 3), (2100,)])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_nonzero(shape, dtype, rng):
    a = rng.random(shape)
    a = np.where(a > 0.6, a, 0)
    a = (
        a.astype({"float32": np.float32, "int32": np.int32, "bool": bool}[dtype])
        if dtype != "int32"
        else (a * 10).astype(np.int32)
    )
    x = pr.tensor(a)
    _eq(pr.nonzero(x), torch.nonzero(torch.tensor(a)))
    _eq(x.argwhere(), torch.argwhere(torch.tensor(a)))
    for g, w in zip(pr.nonzero(x, as_tuple=True), torch.nonzero(torch.tensor(a), as_tuple=True)):
        _eq(g, w)


def test_nonzero_noncontiguous_and_empty(rng):
    x, tx = _source(rng, (37, 41), "t")
    _eq((x > 0.5).nonzero(), (tx > 0.5).nonzero())
    _eq(x[::3, 1::2].nonzero(), tx[::3, 1::2].nonzero())
    _eq(pr.nonzero(pr.zeros(4, 5)), torch.nonzero(torch.zeros(4, 5)))
    _eq(pr.nonzero(pr.tensor(3.0)), torch.nonzero(torch.tensor(3.0)))


def test_one_hot(rng):
    a = rng.integers(0, 6, (3, 4))
    _eq(pr.one_hot(pr.tensor(a)), torch.nn.functional.one_hot(torch.tensor(a)))
    _eq(pr.one_hot(pr.tensor(a).T, 9), torch.nn.functional.one_hot(torch.tensor(a).T, 9))
    with pytest.raises(IndexError, match="smaller than num_classes"):
        pr.one_hot(pr.tensor(a), 2)
    with pytest.raises(IndexError, match="non-negative"):
        pr.one_hot(pr.tensor([-1, 2]))
    with pytest.raises(TypeError, match="index tensor"):
        pr.one_hot(pr.tensor([1.0]))


def test_take_and_take_along_dim(rng):
    x, tx = _source(rng, (4, 5, 6), "t")
    idx = rng.integers(-120, 120, (3, 7))
    _eq(pr.take(x, pr.tensor(idx)), torch.take(tx, torch.tensor(idx)))
    ind = rng.integers(0, 5, (4, 3, 1))
    _eq(pr.take_along_dim(x, pr.tensor(ind), 1), torch.take_along_dim(tx, torch.tensor(ind), 1))
    ind2 = rng.integers(0, 6, (1, 5, 2))
    _eq(x.take_along_dim(pr.tensor(ind2), dim=-1), tx.take_along_dim(torch.tensor(ind2), dim=-1))
    flat = rng.integers(0, 120, 9)
    _eq(pr.take_along_dim(x, pr.tensor(flat)), torch.take_along_dim(tx, torch.tensor(flat)))


def test_embedding(rng):
    w, tw = _source(rng, (11, 8), "t")
    ids = rng.integers(0, 11, (3, 5))
    _eq(
        pr.embedding(pr.tensor(ids), w, padding_idx=0),
        torch.nn.functional.embedding(torch.tensor(ids), tw, padding_idx=0),
    )
    _eq(pr.embedding(pr.tensor(ids).T, w), torch.nn.functional.embedding(torch.tensor(ids).T, tw))


def test_gather_past_65535_workgroups():
    n = 65535 * 256 + 1  # one 256-wide workgroup past the unfolded grid limit
    x = pr.arange(n, dtype=pr.int32).reshape(1, n)
    y = x[[0, 0]]  # (2, n): 2n outputs, grid folded into y
    assert y.shape == (2, n)
    got = y[1, -4:].numpy()
    np.testing.assert_array_equal(got, np.arange(n - 4, n))
    np.testing.assert_array_equal(y[0, 65535 * 256 - 2 :].numpy(), np.arange(65535 * 256 - 2, n))


# ---- errors --------------------------------------------------------------------------------
def test_index_out_of_range_then_next_op_works(rng):
    x, tx = _source(rng, (3, 4), "c")
    with pytest.raises(IndexError, match=r"index 5 is out of bounds for dimension 0 with size 3"):
        x[[0, 5]]
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for dimension 1 with size 4"):
        x[pr.tensor([0, 1]), pr.tensor([[4], [0]])]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 0 with size 3"):
        x[pr.tensor([-4])] = 1.0
    _eq(x, tx)  # the failed setitem wrote nothing
    with pytest.raises(IndexError, match=r"index 3 is out of bounds for dimension 0 with size 3"):
        x.gather(0, pr.tensor([[3, 0, 0, 0]]))
    with pytest.raises(IndexError, match=r"index -1 is out of bounds"):
        x.index_select(1, pr.tensor([-1]))  # negative indices are errors here, as in torch
    with pytest.raises(IndexError, match=r"out of bounds for dimension 0 with size 11"):
        pr.embedding(pr.tensor([11]), pr.zeros(11, 2))
    _eq(x[pr.tensor([2, -1])] + 1, tx[torch.tensor([2, -1])] + 1)


def test_index_dtype_and_shape_errors(rng):
    x, _ = _source(rng, (3, 4), "c")
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[pr.tensor([0.0, 1.0])]
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[np.array([0.5])]
    with pytest.raises(IndexError, match=r"mask \[4\] at index 0 does not match .*\[3, 4\]"):
        x[pr.tensor([True, False, True, False])]
    with pytest.raises(
        IndexError, match=r"could not be broadcast together with shapes \[2\], \[3\]"
    ):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ShapeError, match=r"value tensor of shape \[3\] cannot be broadcast"):
        x[[0, 1]] = pr.ones(3)
    with pytest.raises(TypeError, match="boolean masks"):
        x.masked_fill(pr.ones(3, 4), 1.0)
    with pytest.raises(IndexError, match="0-dimensional value tensor"):
        x.masked_fill(x > 0, pr.ones(1))
    with pytest.raises(TypeError, match="index"):
        x.gather(0, pr.zeros(1, 4))
    assert x[[1]].shape == (1, 4)


def test_float16_gather_and_reduce(rng):
    if "shader-f16" not in pr.device_info()["features"]:
        pytest.skip("this adapter has no shader-f16 (float16 storage)")
    a = rng.integers(-8, 8, (6, 5)).astype(np.float16)  # small ints: exact in f16 sums
    x, tx = pr.tensor(a), torch.tensor(a)
    _eq(x[[4, -1, 0]], tx[[4, -1, 0]])
    idx = rng.integers(0, 6, (9, 5))
    src = rng.integers(-4, 4, (9, 5)).astype(np.float16)
    # no f16 atomics: reduced in an f32 copy of the storage; x is a view at an offset here
    got = x[1:].scatter_add(0, pr.tensor(idx % 5), pr.tensor(src))
    want = tx[1:].scatter_add(0, torch.tensor(idx % 5), torch.tensor(src))
    _eq(got, want)
    y, ty = x.clone(), tx.clone()
    y[1:].index_put_((pr.tensor(idx[:, 0] % 5),), pr.tensor(src), accumulate=True)
    ty[1:].index_put_((torch.tensor(idx[:, 0] % 5),), torch.tensor(src), accumulate=True)
    _eq(y, ty)


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_nonzero_counts_nan():
    # the mask walk compared `m != 0.0`, which lavapipe compiles as ordered (NaN came out zero)
    a = np.array([0.0, -0.0, np.nan, 1.0, np.inf], dtype=np.float32)
    for dt in (pr.float32, pr.float16, pr.bfloat16):
        assert pr.nonzero(pr.tensor(a, dtype=dt)).flatten().tolist() == [2, 3, 4]
    assert pr.tensor(a)[pr.tensor(a) != 0].shape == (3,)


def test_sweep_out_of_bounds_index_is_index_and_runtime_error():
    x = pr.zeros(3, 2)
    with pytest.raises(IndexError, match="out of bounds"):
        x[pr.tensor([3])]
    with pytest.raises(RuntimeError, match="out of bounds"):  # torch's class for gather
        pr.gather(x, 0, pr.tensor([[3, 0]]))
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        pr.nn.functional.one_hot(pr.tensor([3]), 3)


def test_sweep_scatter_reduce_small_int_identity():
    # include_self=False seeded int16 slots with INT32_MAX, which wrapped to -1 and won an amin
    def run(L, dt, reduce):
        x = L.tensor([[2, 5], [4, 8], [11, 6]], dtype=getattr(L, dt))
        src = L.tensor([[3, 1], [7, 9]], dtype=getattr(L, dt))
        idx = L.tensor([[2, 0], [0, 2]])
        return x.scatter_reduce_(0, idx, src, reduce=reduce, include_self=False).tolist()

    for dt in ("int16", "int8", "uint8", "int32"):
        for reduce in ("amin", "amax"):
            assert run(pr, dt, reduce) == run(torch, dt, reduce), (dt, reduce)


def test_sweep_masked_fill_checks_the_value():
    x = pr.tensor([1, 2, 3], dtype=pr.uint8)
    for v in (-2.5, pr.tensor(-3.0)):
        with pytest.raises(RuntimeError, match="without overflow"):
            x.masked_fill(x > 1, v)
    assert x.masked_fill(x > 1, -1).tolist() == [1, 255, 255]  # an int wraps, as torch
    assert x.masked_fill(x > 1, 2.5).tolist() == [1, 2, 2]


def test_sweep_empty_setitem_still_checks_the_value_shape():
    with pytest.raises(RuntimeError, match="shape mismatch"):
        pr.zeros(0)[pr.tensor([], dtype=pr.int32)] = pr.zeros(2, 0)


def test_sweep_scatter_reduce_mean_of_bool_refused():
    with pytest.raises(TypeError, match="bool"):
        pr.zeros(3, dtype=pr.bool).scatter_reduce_(
            0, pr.tensor([0]), pr.ones(1, dtype=pr.bool), "mean"
        )


def test_sweep_setitem_of_a_number_checks_its_range():
    # torch fills x[i] = v as fill_ does: -3.1 does not fit a uint8 (copy_ of a number casts)
    for index in (0, pr.tensor([0]), slice(None), ()):
        with pytest.raises(RuntimeError, match="without overflow"):
            pr.tensor([1, 2], dtype=pr.uint8)[index] = -3.1
    x = pr.tensor([1, 2], dtype=pr.uint8)
    x[0] = -1  # an int in -255..255 wraps, as torch
    assert x.tolist() == [255, 2]
