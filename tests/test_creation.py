"""Creation against numpy/torch: host data, filled tensors, ranges, eye, random statistics and
the Philox stream bit for bit, repr in PyTorch's format, and the ways out to the host."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.kernels.random import philox_reference


# ---- from host data --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data, dtype",
    [
        ([1.5, -2.0, 3.25], pr.float32),
        ([[1, 2], [3, -4]], pr.int32),
        ([True, False], pr.bool),
        (3.5, pr.float32),
        (7, pr.int32),
        ([[1, 2.5]], pr.float32),
        ([], pr.float32),
    ],
)
def test_tensor_from_lists(data, dtype):
    t = pr.tensor(data)
    want = torch.tensor(data)
    assert t.dtype is dtype and t.shape == tuple(want.shape)
    np.testing.assert_array_equal(t.numpy(), want.numpy())


def test_tensor_from_numpy_and_torch(rng):
    a64 = rng.standard_normal((3, 5))
    t = pr.tensor(a64)
    assert t.dtype is pr.float32  # float64 narrows
    np.testing.assert_array_equal(t.numpy(), a64.astype(np.float32))
    i64 = rng.integers(-(2**31), 2**31 - 1, 17, dtype=np.int64)
    t = pr.from_numpy(i64)
    assert t.dtype is pr.int32
    np.testing.assert_array_equal(t.numpy(), i64.astype(np.int32))
    h = a64.astype(np.float16)
    assert pr.tensor(h).dtype is pr.float16
    np.testing.assert_array_equal(pr.tensor(h).numpy(), h)
    np.testing.assert_array_equal(pr.tensor(a64.T).numpy(), a64.T.astype(np.float32))  # any layout
    tt = torch.from_numpy(a64).float()[:, ::2]
    np.testing.assert_array_equal(pr.tensor(tt).numpy(), tt.numpy())
    np.testing.assert_array_equal(pr.as_tensor(torch.arange(5)).numpy(), np.arange(5))
    assert pr.tensor(torch.tensor([True, False])).dtype is pr.bool
    assert pr.tensor([1, 2], dtype=pr.float32).dtype is pr.float32
    x = pr.tensor([1.0, 2.0])
    assert pr.as_tensor(x) is x


def test_int64_out_of_range():
    big = np.array([1, 2**31], dtype=np.int64)
    with pytest.raises(OverflowError, match=r"do not fit in int32"):
        pr.tensor(big)
    with pytest.raises(OverflowError, match=r"int32"):
        pr.tensor([-(2**31) - 1, 0])
    assert pr.tensor(np.array([2**31 - 1, -(2**31)])).tolist() == [2**31 - 1, -(2**31)]


# ---- filled tensors, ranges, eye --------------------------------------------------------------
@pytest.mark.parametrize("fn", ["zeros", "ones", "empty_like_shape"])
@pytest.mark.parametrize("dtype", [pr.float32, pr.float16, pr.int32, pr.bool])
def test_filled(fn, dtype):
    shape = (3, 1, 7)
    if fn == "empty_like_shape":
        t = pr.full(shape, 2, dtype=dtype)
        want = np.full(shape, 2, dtype=dtype.np if not dtype.is_bool else bool)
    else:
        t = getattr(pr, fn)(*shape, dtype=dtype)
        want = getattr(np, fn)(shape, dtype=dtype.np if not dtype.is_bool else bool)
    assert t.dtype is dtype and t.shape == shape
    np.testing.assert_array_equal(t.numpy(), want)
    for like, ref in ((pr.zeros_like, np.zeros_like), (pr.ones_like, np.ones_like)):
        np.testing.assert_array_equal(like(t).numpy(), ref(want))
        assert like(t).dtype is dtype
    assert pr.empty_like(t).shape == shape
    np.testing.assert_array_equal(pr.full_like(t, 1).numpy(), np.ones_like(want))


def test_full_dtypes():
    assert pr.full((2,), 1.5).dtype is pr.float32
    assert pr.full((2,), 3).dtype is pr.int32
    assert pr.full((2,), True).dtype is pr.bool
    np.testing.assert_array_equal(pr.full((2, 3), -7).numpy(), np.full((2, 3), -7))
    assert pr.zeros(()).shape == () and pr.zeros(0).numel() == 0


@pytest.mark.parametrize(
    "args, kw",
    [
        ((10,), {}),
        ((2, 11, 3), {}),
        ((5, -6, -2), {}),
        ((0, 1, 0.1), {}),
        ((1.5, -2.0, -0.25), {}),
        ((0, 7), {"dtype": pr.float32}),
        ((-3.0, 3.0, 0.7), {}),
        ((0,), {}),
    ],
)
def test_arange(args, kw):
    t = pr.arange(*args, **kw)
    want = torch.arange(*args, **{k: torch.float32 for k in kw})
    assert t.dtype.name == str(want.dtype).replace("torch.", "").replace("int64", "int32")
    assert t.shape == tuple(want.shape)
    np.testing.assert_allclose(t.numpy(), want.numpy(), rtol=0, atol=4 * 2.0**-24 * 4)


def test_arange_errors():
    # RuntimeError, as PyTorch's
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        pr.arange(4, 2)
    with pytest.raises(RuntimeError, match="nonzero"):
        pr.arange(0, 4, 0)
    assert pr.arange(3).tolist() == [0, 1, 2]


@pytest.mark.parametrize(
    "args", [(0, 1, 5), (-2.5, 7.0, 13), (3, 3, 4), (1, -1, 1), (0, 10, 257), (5, 0, 0)]
)
def test_linspace(args):
    t = pr.linspace(*args)
    want = torch.linspace(*args, dtype=torch.float64).numpy()
    # start + i·step in f32: one rounding of step times i plus one of the sum
    bound = 4 * 2.0**-24 * (abs(args[0]) + abs(args[1])) + 1e-30
    assert t.shape == want.shape
    assert np.all(np.abs(t.numpy() - want) <= bound)
    if args[2] > 1:
        assert t.numpy()[0] == np.float32(args[0]) and t.numpy()[-1] == np.float32(args[1])


@pytest.mark.parametrize("n, m", [(1, None), (4, None), (3, 5), (7, 2)])
def test_eye(n, m):
    t = pr.eye(n, m)
    assert t.dtype is pr.float32
    np.testing.assert_array_equal(t.numpy(), np.eye(n, m))
    assert pr.eye(n, m, dtype=pr.bool).numpy().dtype == bool


# ---- random -----------------------------------------------------------------------------------
def _stats_ok(x, mean, var, n):
    """Mean within 6 standard errors (σ/√n) and variance within 6 of its own (√(2/n)·σ² for a
    normal; uniform's fourth moment is smaller, so the same bound holds)."""
    assert abs(x.mean() - mean) < 6 * math.sqrt(var / n), x.mean()
    assert abs(x.var() - var) < 6 * var * math.sqrt(2 / n), x.var()


def test_rand_randn_randint_statistics():
    n = 100_003
    pr.manual_seed(1234)
    u = pr.rand(n).numpy().astype(np.float64)
    assert u.min() >= 0 and u.max() < 1
    _stats_ok(u, 0.5, 1 / 12, n)
    z = pr.randn(n).numpy().astype(np.float64)
    assert np.all(np.isfinite(z))
    _stats_ok(z, 0.0, 1.0, n)
    r = pr.randint(-5, 7, (n,)).numpy()
    assert r.dtype == np.int32 and r.min() == -5 and r.max() == 6
    _stats_ok(r.astype(np.float64), 0.5, (12**2 - 1) / 12, n)
    counts = np.bincount(r + 5, minlength=12)
    # each bin ~ Binomial(n, 1/12): within 6 standard deviations
    assert np.all(np.abs(counts - n / 12) < 6 * math.sqrt(n / 12 * 11 / 12))
    h = pr.randn(1001, dtype=pr.float16)
    assert h.dtype is pr.float16 and np.all(np.isfinite(h.numpy()))
    w = pr.empty(2000).uniform_(-2, 3).numpy().astype(np.float64)
    assert w.min() >= -2 and w.max() < 3
    _stats_ok(w, 0.5, 25 / 12, 2000)


def test_seed_reproducible_and_successive_draws_differ():
    pr.manual_seed(7)
    a, b = pr.randn(257).numpy(), pr.randn(257).numpy()
    pr.manual_seed(7)
    c, d = pr.randn(257).numpy(), pr.randn(257).numpy()
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)
    assert not np.array_equal(a, b)
    pr.manual_seed(8)
    assert not np.array_equal(pr.randn(257).numpy(), a)
    g = pr.Generator().manual_seed(7)
    np.testing.assert_array_equal(pr.randn(257, generator=g).numpy(), a)


def test_philox_bits_exact():
    """randint over [0, 2^31 - 1) is Philox's raw word mod (2^31 - 1): check it bit for bit."""
    span = 2**31 - 1
    for seed in (0, 1, 0xDEADBEEF12345678):
        pr.manual_seed(seed)
        pr.rand(8)  # advances the counter offset by 2
        n = 4 * 3 + 2  # a partial last quad
        got = pr.randint(0, span, (n,)).numpy().astype(np.int64)
        key = (seed & 0xFFFFFFFF, seed >> 32)
        off = 2
        want = []
        for i in range(n):
            bits = philox_reference((i // 4, 0, off & 0xFFFFFFFF, off >> 32), key)
            want.append(bits[i % 4] % span)
        np.testing.assert_array_equal(got, np.array(want))


def test_philox_reference_known_answers():
    """Random123's published known-answer vectors for Philox4x32-10."""
    assert philox_reference([0, 0, 0, 0], [0, 0]) == [
        0x6627E8D5,
        0xE169C58D,
        0xBC57AC4C,
        0x9B00DBD8,
    ]
    assert philox_reference([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2) == [
        0x408F276D,
        0x41C83B0E,
        0xA20BC7C6,
        0x6D5451FD,
    ]
    assert philox_reference(
        [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0]
    ) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


# ---- repr -------------------------------------------------------------------------------------
REPR_CASES = [
    lambda: torch.tensor([[1.5, -2.25], [3.0, 4.125]]),
    lambda: torch.tensor([1.0, 2.0, 3.0]),
    lambda: torch.tensor([[-2.1167, 0.9173], [1.8161, -1.0150]]),
    lambda: torch.tensor([1, -20, 300]),
    lambda: torch.tensor([[1, 2], [30, 4]]),
    lambda: torch.tensor([True, False]),
    lambda: torch.tensor(3.5),
    lambda: torch.tensor(7),
    lambda: torch.tensor(False),
    lambda: torch.tensor([1e-5, 1.0]),
    lambda: torch.tensor([0.5, 600.0]),
    lambda: torch.tensor([float("nan"), 1.5, float("inf")]),
    lambda: torch.tensor([0.1, 0.25]).half(),
    lambda: torch.zeros(0),
    lambda: torch.zeros(2, 0),
    lambda: torch.tensor([-0.5, 100.25]),
]


@pytest.mark.parametrize("make", REPR_CASES, ids=lambda f: repr(f()).replace("\n", ""))
def test_repr_matches_torch(make):
    t = make()
    want = repr(t).replace("torch.", "pyrite.")
    if t.dtype == torch.int64:
        want = want.replace(", dtype=pyrite.int64", "")
    assert repr(pr.tensor(t)) == want


# ---- leaving the device -----------------------------------------------------------------------
def test_host_conversions(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = pr.tensor(a)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(np.array(t, dtype=np.float64), a.astype(np.float64))
    assert t.tolist() == a.tolist()
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and all(r.shape == (4,) for r in rows)
    np.testing.assert_array_equal(rows[2].numpy(), a[2])
    assert t[1, 2].item() == float(a[1, 2])
    assert isinstance(pr.tensor(3).item(), int) and isinstance(pr.tensor(True).item(), bool)
    assert float(pr.tensor([2.5])) == 2.5 and int(pr.tensor(4)) == 4
    with pytest.raises(ValueError, match="12 elements"):
        t.item()
    with pytest.raises(TypeError, match="0-d"):
        len(pr.tensor(1.0))
    np.testing.assert_array_equal(t.T.numpy(), a.T)  # a non-contiguous readback
    assert pr.tensor(True).numpy().dtype == bool


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_tensor_of_one_element_tensors():
    # torch reads a tensor inside a list as a Python scalar
    assert pr.tensor([pr.tensor([1.0]), pr.tensor([2.0])]).shape == (2,)
    assert pr.tensor([[pr.tensor(1), 2]]).tolist() == [[1, 2]]
    assert pr.tensor([pr.tensor(1.5, dtype=pr.bfloat16)]).tolist() == [1.5]
    with pytest.raises(ValueError, match="only one element tensors"):
        pr.tensor([pr.ones(2), pr.ones(2)])


def test_sweep_out_argument():
    o = pr.empty(3, dtype=pr.int32)
    assert pr.zeros(3, out=o) is o and o.dtype is pr.int32 and o.tolist() == [0, 0, 0]
    o = pr.empty(2)
    assert pr.sum(pr.ones(2, 3), 1, out=o) is o and o.tolist() == [3.0, 3.0]
    v, i = pr.empty(2), pr.empty(2, dtype=pr.int64)
    r = pr.max(pr.arange(6.0).reshape(2, 3), 1, out=(v, i))
    assert r.values is v and r.indices is i and i.tolist() == [2, 2]
    o = pr.empty(3)
    with pytest.warns(UserWarning, match="resized"):
        pr.add(pr.ones(2), 1, out=o)
    assert o.shape == (2,) and o.tolist() == [2.0, 2.0]
    o = pr.empty(0)
    pr.mul(pr.ones(2), 3, out=o)  # resized silently when it held nothing
    assert o.tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="can't be cast"):
        pr.add(pr.ones(2), 1, out=pr.empty(2, dtype=pr.int32))
    assert pr.special.erfinv is pr.erfinv


def test_sweep_linspace_logspace_integer_ends():
    # torch casts the ends to the integer type first: linspace(0.5, 3.7, 3) is [0, 1, 3]
    for f in (
        lambda L: L.linspace(0.5, 3.7, 3, dtype=L.int64),
        lambda L: L.logspace(-1.5, 3.7, 3, base=2, dtype=L.int64),
        lambda L: L.logspace(10, 7.25, 2, base=2, dtype=L.int64),
    ):
        assert f(pr).tolist() == f(torch).tolist()


def test_legacy_tensor_constructor_takes_sizes():
    """torch.Tensor(2, 3) is an uninitialized float32 tensor of that shape (older layers write
    nn.Parameter(torch.Tensor(out, in)) and initialize it after); a sequence is data."""
    import torch

    for args in [(2, 3), (5,), (4, 1, 2), ()]:
        assert tuple(pr.Tensor(*args).shape) == tuple(torch.Tensor(*args).shape), args
        assert pr.Tensor(*args).dtype is pr.float32
    assert tuple(pr.Tensor(pr.Size([2, 4])).shape) == (2, 4)
    assert tuple(pr.nn.Parameter(pr.Tensor(4, 3)).shape) == (4, 3)
    assert pr.Tensor([1, 2]).tolist() == [1.0, 2.0]
    assert pr.Tensor((2, 3)).tolist() == torch.Tensor((2, 3)).tolist()
    assert pr.Tensor([[1, 2], [3, 4]]).tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_legacy_tensor_types_and_new():
    """torch.FloatTensor(2, 3), torch.LongTensor([1, 2]), isinstance by dtype, x.type(cls),
    and x.new(sizes or data) in x's dtype."""
    import torch

    for name in ("FloatTensor", "LongTensor", "IntTensor", "BoolTensor", "HalfTensor"):
        P, T = getattr(pr, name), getattr(torch, name)
        assert tuple(P(2, 3).shape) == tuple(T(2, 3).shape)
        assert P([1, 0]).tolist() == T([1, 0]).tolist()
        assert isinstance(P([1]), P)
    assert isinstance(pr.zeros(2), pr.FloatTensor) and not isinstance(pr.zeros(2), pr.LongTensor)
    assert pr.ones(2).type(pr.LongTensor).dtype is pr.LongTensor([1]).dtype
    x = pr.ones(2, dtype=pr.int32)
    assert tuple(x.new(3, 1).shape) == (3, 1) and x.new(3, 1).dtype is pr.int32
    assert x.new([5, 6]).tolist() == [5, 6] and tuple(x.new().shape) == (0,)
