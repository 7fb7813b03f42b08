"""Views against numpy/torch: every view op shares storage and runs no kernel; basic indexing and
`__setitem__` with basic indices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from pyrite.errors import ShapeError


def _arr(shape, rng):
    return rng.standard_normal(shape).astype(np.float32)


def _check_view(x, fn, want):
    """fn(x) must equal `want`, share x's storage, and dispatch nothing."""
    dev = backend.current()
    dev.flush()
    before = dev.dispatches
    v = fn(x)
    assert dev.dispatches == before, "a view ran a kernel"
    vs = v if isinstance(v, (tuple, list)) else [v]
    ws = want if isinstance(want, (tuple, list)) else [want]
    assert len(vs) == len(ws)
    for a, w in zip(vs, ws):
        assert a._storage is x._storage
        w = np.asarray(w)
        assert tuple(a.shape) == w.shape
        np.testing.assert_array_equal(a.numpy(), w)


VIEW_CASES = [
    ("reshape", (3, 4, 5), lambda x: x.reshape(4, 15), lambda a: a.reshape(4, 15)),
    ("reshape_infer", (3, 4, 5), lambda x: x.reshape(-1, 5), lambda a: a.reshape(-1, 5)),
    ("view_tuple", (3, 4, 5), lambda x: x.view((2, 30)), lambda a: a.reshape(2, 30)),
    ("view_split_dim", (6, 5), lambda x: x.T.view(5, 2, 3), lambda a: a.T.reshape(5, 2, 3)),
    ("permute", (2, 3, 5), lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("permute_neg", (2, 3, 5), lambda x: x.permute(-1, 0, -2), lambda a: a.transpose(2, 0, 1)),
    ("transpose", (2, 3, 5), lambda x: x.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    ("t", (3, 5), lambda x: x.t(), lambda a: a.T),
    ("t_1d", (7,), lambda x: x.t(), lambda a: a),
    ("T", (2, 3, 5), lambda x: x.T, lambda a: a.T),
    ("mT", (2, 3, 5), lambda x: x.mT, lambda a: a.swapaxes(-1, -2)),
    ("expand", (3, 1), lambda x: x.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4))),
    ("expand_keep", (3, 1), lambda x: x.expand(-1, 6), lambda a: np.broadcast_to(a, (3, 6))),
    (
        "broadcast_to",
        (1, 5),
        lambda x: pr.broadcast_to(x, (4, 5)),
        lambda a: np.broadcast_to(a, (4, 5)),
    ),
    ("squeeze", (1, 3, 1, 5), lambda x: x.squeeze(), lambda a: a.squeeze()),
    ("squeeze_dim", (1, 3, 1, 5), lambda x: x.squeeze(2), lambda a: a.squeeze(2)),
    ("squeeze_non1", (1, 3, 1, 5), lambda x: x.squeeze(1), lambda a: a),
    ("unsqueeze", (3, 5), lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("unsqueeze_neg", (3, 5), lambda x: x.unsqueeze(-1), lambda a: a[..., None]),
    ("flatten", (2, 3, 5), lambda x: x.flatten(), lambda a: a.reshape(-1)),
    ("flatten_mid", (2, 3, 5, 2), lambda x: x.flatten(1, 2), lambda a: a.reshape(2, 15, 2)),
    ("unflatten", (2, 12), lambda x: x.unflatten(1, (3, -1)), lambda a: a.reshape(2, 3, 4)),
    ("narrow", (7, 5), lambda x: x.narrow(0, 2, 3), lambda a: a[2:5]),
    ("narrow_neg", (7, 5), lambda x: x.narrow(1, -3, 2), lambda a: a[:, 2:4]),
    ("select", (7, 5), lambda x: x.select(1, -2), lambda a: a[:, -2]),
    ("unbind", (3, 4), lambda x: x.unbind(1), lambda a: tuple(a[:, i] for i in range(4))),
    ("movedim", (2, 3, 5), lambda x: x.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    (
        "movedim_multi",
        (2, 3, 5, 7),
        lambda x: x.movedim((0, 1), (3, 0)),
        lambda a: np.moveaxis(a, (0, 1), (3, 0)),
    ),
    ("diagonal", (4, 6), lambda x: x.diagonal(), lambda a: np.diagonal(a).copy()),
    ("diagonal_off", (4, 6), lambda x: x.diagonal(2), lambda a: np.diagonal(a, 2).copy()),
    ("diagonal_neg", (5, 4), lambda x: x.diagonal(-1), lambda a: np.diagonal(a, -1).copy()),
    (
        "diagonal_3d",
        (3, 4, 5),
        lambda x: x.diagonal(1, 0, 2),
        lambda a: np.diagonal(a, 1, 0, 2).copy(),
    ),
    (
        "view_of_transposed_batch",
        (4, 3, 5),
        lambda x: x.transpose(0, 1).reshape(3, 2, 2, 5),
        lambda a: a.swapaxes(0, 1).reshape(3, 2, 2, 5),
    ),
]


@pytest.mark.parametrize("case", VIEW_CASES, ids=lambda c: c[0])
def test_view_ops(case, rng):
    _, shape, fn, ref = case
    a = _arr(shape, rng)
    _check_view(pr.tensor(a), fn, ref(a))


def test_view_non_contiguous_fails_reshape_copies(rng):
    a = _arr((4, 6), rng)
    x = pr.tensor(a).T  # (6, 4), strides (1, 6)
    with pytest.raises(ShapeError, match=r"view size .*not compatible.*reshape"):
        x.view(24)
    dev = backend.current()
    before = dev.dispatches
    r = x.reshape(24)
    assert dev.dispatches > before and r._storage is not x._storage
    np.testing.assert_array_equal(r.numpy(), a.T.reshape(24))
    # the copy is a new tensor: writing it leaves x alone
    r.fill_(0)
    np.testing.assert_array_equal(x.numpy(), a.T)
    with pytest.raises(ShapeError, match=r"invalid for input of size 24"):
        x.reshape(5, -1)
    with pytest.raises(ShapeError, match="only one dimension"):
        x.reshape(-1, -1)


def test_view_matches_torch_on_strided(rng):
    """PyTorch's computeStride rule: which views of non-contiguous tensors succeed."""
    a = _arr((4, 6, 5), rng)
    pt, tt = pr.tensor(a), torch.from_numpy(a)
    for fn in (
        lambda x: x[:, ::2],
        lambda x: x.transpose(0, 1),
        lambda x: x[:, :, 1:3],
        lambda x: x.permute(2, 0, 1),
    ):
        pv, tv = fn(pt), fn(tt)
        for shape in (
            (-1,),
            (pv.shape[0] * pv.shape[1], -1),
            (pv.shape[0], -1),
            (*pv.shape[:-1], 1, pv.shape[-1]),
        ):
            try:
                want = tv.view(*shape)
            except RuntimeError:
                with pytest.raises(ShapeError):
                    pv.view(*shape)
                continue
            got = pv.view(*shape)
            assert got._storage is pt._storage
            assert tuple(got.stride()) == tuple(want.stride())
            np.testing.assert_array_equal(got.numpy(), want.numpy())


INDEXES = [
    3,
    -1,
    slice(None),
    slice(1, 5),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(-2, None),
    slice(5, 1, -2),
    (1, 2),
    (-1, slice(None), 0),
    None,
    (None, 1),
    (Ellipsis, 1),
    (1, Ellipsis),
    (slice(None), None, slice(None, None, -2)),
    (Ellipsis, None),
    (slice(1, None, 3), -2, slice(None, None, -1)),
    (2, 3, 4),
    (slice(10, 20),),
    (slice(None), slice(3, 3)),
    (Ellipsis,),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_basic_getitem(index, rng):
    a = _arr((6, 7, 5), rng)
    x = pr.tensor(a)
    dev = backend.current()
    dev.flush()
    before = dev.dispatches
    v = x[index]
    assert dev.dispatches == before
    assert v._storage is x._storage
    np.testing.assert_array_equal(v.numpy(), a[index])
    # indexing a view (transposed, stepped) composes
    w = x.permute(2, 0, 1)[::-1]
    np.testing.assert_array_equal(w[index].numpy(), a.transpose(2, 0, 1)[::-1][index])


@pytest.mark.parametrize("index", [(7,), (0, -8), (1, 2, 5), (-7,)], ids=repr)
def test_index_out_of_range(index):
    x = pr.zeros(6, 7, 5)
    with pytest.raises(
        IndexError,
        match=r"index -?\d+ is out of bounds for dimension \d with "
        r"size \d",
    ):
        x[index]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    assert (x + 1).numpy().sum() == 210  # the next op works


SET_CASES = [
    (1, lambda rng: 2.5),
    ((slice(None), 2), lambda rng: rng.standard_normal(5).astype(np.float32)),
    (
        (slice(1, 5, 2), slice(None, None, -1)),
        lambda rng: rng.standard_normal((7, 5)).astype(np.float32),
    ),
    ((Ellipsis, 0), lambda rng: rng.standard_normal((6, 1)).astype(np.float32)),
    ((slice(None), None, 3), lambda rng: np.float32(-1)),
    ((-1, -1, -1), lambda rng: 7),
    (slice(None, None, -2), lambda rng: np.arange(5, dtype=np.int64)),
]


@pytest.mark.parametrize("case", SET_CASES, ids=lambda c: repr(c[0]))
@pytest.mark.parametrize("as_tensor", [False, True])
def test_setitem(case, as_tensor, rng):
    index, make = case
    a = _arr((6, 7, 5), rng)
    x = pr.tensor(a)
    storage = x._storage
    val = make(rng)
    x[index] = pr.tensor(val) if as_tensor and isinstance(val, np.ndarray) else val
    a[index] = val
    assert x._storage is storage
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_into_view_writes_base(rng):
    a = _arr((5, 6), rng)
    x = pr.tensor(a)
    v = x.T[1:4]
    v[:, ::2] = pr.tensor(np.float32(3.0))
    a.T[1:4][:, ::2] = 3.0
    np.testing.assert_array_equal(x.numpy(), a)
    v[0] = x[0, :5]  # reading the same storage it writes
    a.T[1:4][0] = a[0, :5].copy()
    np.testing.assert_array_equal(x.numpy(), a)


def test_view_errors():
    x = pr.zeros(2, 3)
    with pytest.raises(ShapeError, match="expand"):
        x.expand(4, 3, 2)
    with pytest.raises(IndexError, match=r"dimension out of range .*\[-2, 1\], but got 2"):
        x.transpose(0, 2)
    with pytest.raises(ShapeError, match="permute"):
        x.permute(0)
    with pytest.raises(ShapeError, match="t\\(\\) expects"):
        pr.zeros(2, 2, 2).t()
    with pytest.raises(RuntimeError, match="narrow"):  # torch: RuntimeError for the length
        x.narrow(1, 2, 2)
    with pytest.raises(IndexError, match="start out of range"):
        x.narrow(1, 5, 0)
    with pytest.raises(IndexError, match="out of bounds"):
        x.select(0, 2)
    assert (x + 1).numpy().sum() == 6


def test_writes_into_expanded_views_raise_as_torch():
    # torch: an in-place op or a copy into an expanded (overlapping) view raises; fill_ and
    # zero_ (one value for every alias) and writes through non-overlapping sub-views do not
    x = pr.ones(3).expand(4, 3)
    for f in (
        lambda: x.add_(1),
        lambda: x.mul_(2),
        lambda: x.exp_(),
        lambda: x.clamp_(0, 1),
        lambda: x.copy_(pr.zeros(4, 3)),
        lambda: x.__setitem__((slice(None), 0), 5),
    ):
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            f()
    x.fill_(2.0)
    x[0] = 5.0  # the row view has no overlap
    assert x.numpy().tolist() == [[5.0] * 3] * 4
    x.zero_()
    assert x.sum().item() == 0


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_view_dtype_reinterprets_bits():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 4)) * 3
    for src, dst in [
        ("float32", "int32"),
        ("int32", "float32"),
        ("float16", "int16"),
        ("bfloat16", "int16"),
        ("uint8", "int8"),
        ("float32", "uint8"),
        ("uint8", "float32"),
        ("int16", "bfloat16"),
        ("bool", "uint8"),
    ]:
        t = torch.tensor(a > 0 if src == "bool" else a).to(getattr(torch, src))
        want = t.view(getattr(torch, dst))
        got = pr.tensor(t).view(getattr(pr, dst))
        assert got.dtype is getattr(pr, dst) and tuple(got.shape) == tuple(want.shape), (src, dst)
        np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    x = pr.tensor([1.0, 2.0])
    x.view(pr.int32)[0] = 0  # float32 <-> int32 is a true view
    assert x.tolist() == [0.0, 2.0]
    with pytest.raises(RuntimeError, match="divisible by 2"):
        pr.ones(3, dtype=pr.uint8).view(pr.int16)


def test_sweep_views_of_0d_tensors():
    z = pr.tensor(5.0)
    assert z.movedim(0, -1).shape == () and z.mT.shape == ()
    for f in (
        lambda: z.narrow(0, 0, 1),
        lambda: z.chunk(2),
        lambda: z.split(1),
        lambda: z.unflatten(0, (1,)),
    ):
        with pytest.raises(RuntimeError, match="1-dimensional|0-dim"):
            f()
    with pytest.warns(UserWarning, match="0-D"):
        z.T
    with pytest.warns(UserWarning, match="x.T"):
        pr.arange(3).T


def test_sweep_diagonal_of_one_dim_twice():
    with pytest.raises(RuntimeError, match="cannot be identical"):
        pr.zeros(3, 3).diagonal(0, 0, -2)


def test_sweep_index_forms():
    x = pr.arange(12).reshape(3, 4)
    t = torch.arange(12).reshape(3, 4)
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[[0, 2], [1, 1]]].tolist() == [1, 9]  # a list of lists is a tuple, as torch
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        assert x[[pr.tensor(0), pr.tensor(1)]].item() == 1
    assert x[[0, 2]].tolist() == t[[0, 2]].tolist()  # ints: one advanced index
    z = pr.tensor(5)
    assert z[pr.tensor(True)].tolist() == [5] and tuple(z[pr.tensor(False)].shape) == (0,)
    assert tuple(pr.arange(2)[pr.tensor(True)].shape) == (1, 2)


def test_sweep_size_and_scalars():
    s = pr.zeros(2, 3).shape
    assert isinstance(s + (4,), pr.Size) and s + (4,) == (2, 3, 4)
    import pickle

    assert isinstance(pickle.loads(pickle.dumps(s)), pr.Size)
    assert complex(pr.tensor(1.5)) == 1.5 + 0j
    assert pr.ones(2).type() == "pyrite.FloatTensor"
    assert pr.ones(2).type("torch.cuda.LongTensor").dtype is pr.int64
    with pytest.raises(RuntimeError, match="cannot be converted"):
        pr.ones(2).item()


def test_sweep_empty_tensors_are_contiguous():
    x = pr.zeros(2, 0, 11, 6)[..., ::3]
    assert x.is_contiguous() and x.contiguous().shape == (2, 0, 11, 2)


def test_basic_indexing_with_none_and_ellipsis_matches_numpy(rng):
    """Tuples of ints, slices, None and one ... (getitem's fast path, which expands the ...
    itself) index as numpy's basic indexing, and raise IndexError where numpy raises."""
    a = rng.standard_normal((3, 4, 5, 6)).astype(np.float32)
    x = pr.tensor(a)
    items = [0, -1, 2, 4, slice(None), slice(1, None), slice(None, None, 2), slice(-3, -1),
             slice(5, 1), None, Ellipsis]  # fmt: skip
    checked = 0
    while checked < 400:
        idx = tuple(items[k] for k in rng.integers(0, len(items), int(rng.integers(1, 7))))
        if sum(i is Ellipsis for i in idx) > 1:
            with pytest.raises(IndexError):
                x[idx]
            continue
        try:
            want = a[idx]
        except IndexError:
            with pytest.raises(IndexError):
                x[idx]
            continue
        got = x[idx]
        assert got.shape == want.shape, idx
        np.testing.assert_array_equal(got.numpy(), want)
        checked += 1
