"""pyrite.utils.data against torch.utils.data: the same batches from the same data (shuffle off),
drop_last both ways, custom collate_fn, dict and namedtuple samples; seeded shuffles that are
permutations and reproducible; random_split; the fast TensorDataset path; torch's errors."""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import pyrite as pr
import pyrite.utils.data as pud

Point = namedtuple("Point", "x y")


def _same(a, b):
    """A pyrite batch equals a torch batch: same container types, keys, values, dtypes (torch's
    int64/float64 are pyrite's int32/float32)."""
    if isinstance(b, torch.Tensor):
        assert isinstance(a, pr.Tensor), type(a)
        assert tuple(a.shape) == tuple(b.shape)
        want = {torch.int64: "int32", torch.float64: "float32"}.get(b.dtype, str(b.dtype)[6:])
        assert a.dtype.name == want
        np.testing.assert_array_equal(a.numpy(), b.numpy().astype(a.numpy().dtype))
    elif isinstance(b, dict):
        assert type(a) is type(b) and list(a) == list(b)
        for k in b:
            _same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        assert a == b


class _Samples:
    """A map-style dataset of mixed samples, defined once for both libraries."""

    def __init__(self, rng, n, kind):
        self.kind = kind
        self.x = rng.standard_normal((n, 3)).astype(np.float32)
        self.y = rng.integers(-5, 100, size=n)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.kind == "tuple":
            return self.x[i], int(self.y[i])
        if self.kind == "dict":
            return {"x": self.x[i], "label": int(self.y[i]), "w": float(i) / 3, "name": f"s{i}"}
        if self.kind == "namedtuple":
            return Point(self.x[i], bool(self.y[i] % 2))
        return [self.x[i], np.int64(self.y[i]), True]


class _PrSamples(_Samples, pud.Dataset):
    pass


class _TorchSamples(_Samples, tud.Dataset):
    pass


@pytest.mark.parametrize("kind", ["tuple", "dict", "namedtuple", "list"])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("batch_size", [1, 4, 7])
def test_batches_match_torch(rng, kind, drop_last, batch_size):
    seed = int(rng.integers(1 << 30))
    n = 23
    ours = _PrSamples(np.random.default_rng(seed), n, kind)
    theirs = _TorchSamples(np.random.default_rng(seed), n, kind)
    a = pud.DataLoader(ours, batch_size=batch_size, drop_last=drop_last)
    b = tud.DataLoader(theirs, batch_size=batch_size, drop_last=drop_last)
    assert len(a) == len(b)
    got, want = list(a), list(b)
    assert len(got) == len(want) == len(a)
    for x, y in zip(got, want):
        _same(x, y)


def test_custom_collate_and_no_batching(rng):
    ds = _PrSamples(rng, 11, "tuple")
    tds = _TorchSamples(np.random.default_rng(0), 11, "tuple")
    tds.x, tds.y = ds.x, ds.y

    def collate(batch):
        return len(batch), sum(y for _, y in batch)

    assert list(pud.DataLoader(ds, batch_size=4, collate_fn=collate)) == list(
        tud.DataLoader(tds, batch_size=4, collate_fn=collate)
    )
    # batch_size=None: no batching; default_convert turns numpy arrays into tensors
    a = list(pud.DataLoader(ds, batch_size=None))
    b = list(tud.DataLoader(tds, batch_size=None))
    assert len(a) == len(b) == 11
    for x, y in zip(a, b):
        _same(x, y)


def test_tensor_dataset_matches_torch_and_gathers_once(rng, monkeypatch):
    x = rng.standard_normal((29, 5)).astype(np.float32)
    y = rng.integers(0, 9, size=29)
    px, py = pr.tensor(x), pr.tensor(y)
    ds = pud.TensorDataset(px, py)
    assert len(ds) == 29
    sample = ds[3]
    assert isinstance(sample, tuple) and sample[0].shape == (5,)
    gathers = []
    real = pud.TensorDataset.__getitem__
    monkeypatch.setattr(
        pud.TensorDataset, "__getitem__", lambda self, i: gathers.append(i) or real(self, i)
    )
    sampler = pud.BatchSampler(pud.SequentialSampler(range(29)), 8, False)
    batches = list(pud.DataLoader(ds, batch_sampler=sampler))
    assert not gathers  # the fast path: no per-sample __getitem__
    want = list(tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=8))
    assert len(batches) == len(want) == 4
    for a, b in zip(batches, want):
        _same(a, b)
    # numpy arrays and a Subset over the dataset take the same path
    sub = pud.Subset(pud.TensorDataset(x, y), [5, 2, 28, 0])
    ((bx, by),) = list(pud.DataLoader(sub, batch_size=4))
    np.testing.assert_array_equal(bx.numpy(), x[[5, 2, 28, 0]])
    np.testing.assert_array_equal(by.numpy(), y[[5, 2, 28, 0]])


def test_tensor_dataset_errors():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        pud.TensorDataset(pr.zeros(3, 2), pr.zeros(4))
    with pytest.raises(TypeError, match="pyrite tensors or numpy arrays"):
        pud.TensorDataset([1, 2, 3])


def test_shuffle_is_a_reproducible_permutation():
    ds = pud.TensorDataset(pr.arange(37))

    def order(loader):
        return [v for (b,) in loader for v in b.tolist()]

    pr.manual_seed(0)
    first = order(pud.DataLoader(ds, batch_size=5, shuffle=True))
    second_epoch_loader = pud.DataLoader(ds, batch_size=5, shuffle=True)
    pr.manual_seed(0)
    again = order(pud.DataLoader(ds, batch_size=5, shuffle=True))
    assert sorted(first) == list(range(37))
    assert first == again
    assert first != list(range(37))
    # two epochs of one loader differ; a generator of its own gives its own stream
    loader = second_epoch_loader
    assert order(loader) != order(loader)
    g1, g2 = pr.Generator().manual_seed(7), pr.Generator().manual_seed(7)
    a = order(pud.DataLoader(ds, batch_size=4, shuffle=True, generator=g1))
    b = order(pud.DataLoader(ds, batch_size=4, shuffle=True, generator=g2))
    assert a == b and sorted(a) == list(range(37))


def test_random_sampler_forms():
    g = pr.Generator().manual_seed(3)
    s = pud.RandomSampler(range(10), replacement=True, num_samples=45, generator=g)
    got = list(s)
    assert len(got) == len(s) == 45 and all(0 <= i < 10 for i in got)
    s = pud.RandomSampler(range(10), num_samples=25, generator=g)
    got = list(s)
    assert len(got) == 25
    assert sorted(got[:10]) == list(range(10)) and sorted(got[10:20]) == list(range(10))
    assert len(set(got[20:])) == 5
    with pytest.raises(TypeError, match="replacement should be a boolean value"):
        pud.RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
        pud.RandomSampler(range(3), num_samples=0)
    w = list(pud.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 50, generator=g))
    assert set(w) <= {1, 3} and len(w) == 50
    sub = list(pud.SubsetRandomSampler([4, 8, 15, 16, 23, 42], generator=g))
    assert sorted(sub) == [4, 8, 15, 16, 23, 42]


def test_batch_sampler_matches_torch():
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False)]:
        a = pud.BatchSampler(pud.SequentialSampler(range(n)), bs, drop)
        b = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, drop)
        assert list(a) == list(b) and len(a) == len(b)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        pud.BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        pud.BatchSampler(range(3), 2, 1)


@pytest.mark.parametrize(
    "lengths", [[3, 7], [0.3, 0.7], [0.5, 0.25, 0.25], [1 / 3, 1 / 3, 1 / 3], [10, 0]]
)
def test_random_split_lengths(lengths):
    ds = list(range(10, 20))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = pud.random_split(ds, lengths, generator=pr.Generator().manual_seed(1))
        theirs = tud.random_split(ds, lengths, generator=torch.Generator().manual_seed(1))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    flat = [x for s in ours for x in s]
    assert sorted(flat) == ds
    again = pud.random_split(ds, lengths, generator=pr.Generator().manual_seed(1))
    assert [list(s) for s in again] == [list(s) for s in ours]


def test_random_split_errors():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal"):
        pud.random_split(range(10), [3, 3])
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        pud.random_split(range(10), [0.5, 1.5, -1.0])


def test_concat_subset_iterable():
    a, b = pud.TensorDataset(np.arange(4)), pud.TensorDataset(np.arange(10, 13))
    cat = a + b
    assert len(cat) == 7 and cat[5][0] == 11 and cat[-1][0] == 12
    with pytest.raises(ValueError, match="absolute value of index should not exceed"):
        cat[-8]

    class Stream(pud.IterableDataset):
        def __iter__(self):
            return iter(range(11))

        def __len__(self):
            return 11

    for drop in (False, True):
        got = [b.tolist() for b in pud.DataLoader(Stream(), batch_size=4, drop_last=drop)]
        want = [b.tolist() for b in tud.DataLoader(range(11), batch_size=4, drop_last=drop)]
        assert got == want
        assert len(pud.DataLoader(Stream(), batch_size=4, drop_last=drop)) == len(want)
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        pud.DataLoader(Stream(), shuffle=True)


def test_loader_errors_and_accepted_options():
    ds = pud.TensorDataset(np.arange(6))
    with pytest.raises(ValueError, match="sampler option is mutually exclusive with shuffle"):
        pud.DataLoader(ds, sampler=range(6), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        pud.DataLoader(ds, batch_sampler=[[0, 1]], batch_size=2)
    with pytest.raises(ValueError, match="mutually exclusive with drop_last"):
        pud.DataLoader(ds, batch_size=None, drop_last=True)
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        pud.DataLoader(ds, num_workers=-1)
    loader = pud.DataLoader(ds, batch_size=4)
    with pytest.raises(ValueError, match="batch_size attribute should not be set after"):
        loader.batch_size = 2
    import pyrite.utils.data.dataloader as dl

    dl._warned_workers = False
    with pytest.warns(UserWarning, match="main process"):
        loader = pud.DataLoader(ds, batch_size=4, num_workers=4, pin_memory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        pud.DataLoader(ds, batch_size=4, num_workers=2)
    assert [b.tolist() for (b,) in loader] == [[0, 1, 2, 3], [4, 5]]


def test_default_collate_types():
    out = pud.default_collate([1, 2, 3])
    assert out.dtype is pr.int32 and out.tolist() == [1, 2, 3]
    assert pud.default_collate([1.5, 2.0]).dtype is pr.float32
    assert pud.default_collate([True, False]).dtype is pr.bool
    assert pud.default_collate(["a", "b"]) == ["a", "b"]
    t = pud.default_collate([pr.ones(2, 3), pr.zeros(2, 3)])
    assert t.shape == (2, 2, 3) and t.sum().item() == 6
    bf = pud.default_collate([pr.ones(2).to(pr.bfloat16)] * 3)
    assert bf.dtype is pr.bfloat16 and bf.shape == (3, 2)
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal"):
        pud.default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
        pud.default_collate([np.zeros(2), np.zeros(3)])
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors"):
        pud.default_collate([object(), object()])
    with pytest.raises(OverflowError, match="do not fit in int32"):
        pud.default_collate([np.int64(2**40), np.int64(1)])


def test_numpy_batch_is_one_upload(rng, monkeypatch):
    from pyrite.ops import creation

    calls = []
    real = creation.from_host
    monkeypatch.setattr(
        creation, "from_host", lambda a, d=None: calls.append(a.shape) or real(a, d)
    )
    batch = [rng.standard_normal((3, 2)) for _ in range(9)]
    out = pud.default_collate(batch)
    assert calls == [(9, 3, 2)]
    np.testing.assert_array_equal(out.numpy(), np.stack(batch).astype(np.float32))
    assert pr.utils.data.DataLoader is pud.DataLoader
