"""pyrite.quasirandom.SobolEngine against torch.quasirandom.SobolEngine: the direction-number
table (torch's, bit for bit, and Joe & Kuo's published first rows), unscrambled and seeded
scrambled draws value for value (float32; torch's float64 draws rounded once to float32) over
dimensions 1, 2, 7, 1111 and 21201 and draw sizes that are not powers of 2, fast_forward,
reset, draw_base2, dtype, out=, torch's refusals; and a scrambled sequence's net properties
(every 2^m block stratifies each coordinate into 2^m cells, one point a cell)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.errors import ArgumentError, DtypeError
from pyrite.quasirandom import SobolEngine, direction_numbers

torch = pytest.importorskip("torch")
TorchSobol = torch.quasirandom.SobolEngine

DIMS = [1, 2, 7, 1111, 21201]
SIZES = [1, 6, 0, 13, 100, 3]  # (the first point alone, then counts that are not powers of 2)


def _np(t):
    return t.numpy() if isinstance(t, pr.Tensor) else t.detach().numpy()


def _same(a, b, what=""):
    a, b = _np(a), _np(b).astype(np.float32)
    assert a.dtype == np.float32 and a.shape == b.shape, (what, a.shape, b.shape)
    np.testing.assert_array_equal(a, b, err_msg=what)


def _message(fn) -> str:
    try:
        fn()
    except Exception as e:  # noqa: BLE001  (torch's message, to compare with pyrite's)
        return str(e)
    raise AssertionError("torch did not raise")


def test_table_is_torchs_and_joe_kuos():
    want = torch.zeros(21201, 30, dtype=torch.long)
    torch._sobol_engine_initialize_state_(want, 21201)
    got = direction_numbers(21201)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want.numpy())
    np.testing.assert_array_equal(direction_numbers(9), want.numpy()[:9])
    # new-joe-kuo-6.21201, dimensions 2..7: (s, a, m_1 .. m_s)
    rows = [(1, 0, [1]), (2, 1, [1, 3]), (3, 1, [1, 3, 1]), (3, 2, [1, 1, 1]),
            (4, 1, [1, 1, 3, 3]), (4, 4, [1, 3, 5, 13])]  # fmt: skip
    table = pr.quasirandom._table()
    for d, (s, a, m) in enumerate(rows, start=1):
        assert (table["degree"][d - 1], table["a"][d - 1]) == (s, a), d
        assert (got[d, :s] >> np.arange(29, 29 - s, -1)).tolist() == m, d
    assert (got[0] == 1 << np.arange(29, -1, -1)).all()  # (dimension 1: all m = 1)


@pytest.mark.parametrize("dimension", DIMS)
@pytest.mark.parametrize("scramble", [False, True])
def test_draws_match_torch(dimension, scramble, rng):
    seed = int(rng.integers(0, 2**31)) if scramble else None
    ours, theirs = SobolEngine(dimension, scramble, seed), TorchSobol(dimension, scramble, seed)
    sizes = SIZES if dimension < 20000 else [1, 6, 0, 13]
    for n in sizes:
        got, want = ours.draw(n), theirs.draw(n)
        _same(got, want, f"d={dimension} n={n} after {ours.num_generated - n}")
        assert ours.num_generated == theirs.num_generated
    if not scramble:
        first = SobolEngine(dimension).draw(3)
        assert (first.numpy()[0] == 0).all() and (first.numpy()[1] == 0.5).all()


@pytest.mark.parametrize("dimension", [1, 7, 1111])
def test_fast_forward_and_reset(dimension):
    for scramble in (False, True):
        ours, theirs = SobolEngine(dimension, scramble, 3), TorchSobol(dimension, scramble, 3)
        for skip in (0, 1, 37, 0, 1000, 255):
            assert ours.fast_forward(skip) is ours
            theirs.fast_forward(skip)
            assert ours.num_generated == theirs.num_generated
            _same(ours.draw(5), theirs.draw(5), f"after fast_forward({skip})")
        assert ours.reset() is ours and ours.num_generated == 0
        theirs.reset()
        _same(ours.draw(9), theirs.draw(9), "after reset")
        _same(ours.draw(4), theirs.draw(4), "after reset")
        ours.reset().fast_forward(5)
        theirs.reset().fast_forward(5)
        _same(ours.draw(3), theirs.draw(3), "fast_forward after reset")


def test_fast_forward_to_the_end():
    """Point 2^30 - 1 is V[:, 29] (its Gray code 2^29): torch's loop would take 2^30 steps."""
    ours = SobolEngine(7).fast_forward(2**30 - 1)
    want = torch.zeros(7, 30, dtype=torch.long)
    torch._sobol_engine_initialize_state_(want, 7)
    _same(ours.draw(1)[0], (want[:, 29] / 2**30).float())
    assert ours.num_generated == 2**30
    with pytest.raises(ArgumentError, match="2\\*\\*30 points"):
        ours.draw(1)
    with pytest.raises(ArgumentError, match="n >= 0"):
        SobolEngine(2).draw(-3)
    with pytest.raises(ArgumentError, match="n >= 0"):
        SobolEngine(2).fast_forward(-1)


def test_draw_base2():
    for scramble in (False, True):
        ours, theirs = SobolEngine(5, scramble, 11), TorchSobol(5, scramble, 11)
        for m in (0, 0, 1, 2, 3, 4):  # (totals 1, 2, 4, 8, 16, 32)
            _same(ours.draw_base2(m), theirs.draw_base2(m), f"m={m}")
        assert ours.num_generated == 32
    ours, theirs = SobolEngine(3), TorchSobol(3)
    ours.draw(3), theirs.draw(3)
    want = _message(lambda: theirs.draw_base2(2))
    with pytest.raises(ArgumentError) as err:
        ours.draw_base2(2)
    assert str(err.value) == "pyrite: " + want
    assert isinstance(err.value, ValueError)  # (torch raises ValueError)
    assert ours.num_generated == 3
    assert SobolEngine(3).draw_base2(4).shape == (16, 3)


def test_dtype_and_out():
    ours, theirs = SobolEngine(4), TorchSobol(4)
    got, want = ours.draw(7, dtype=pr.float64), theirs.draw(7, dtype=torch.float64)
    assert got.dtype is pr.float64  # (float64 is stored as float32: the same dtype object)
    _same(got, want)  # (torch's float64 values rounded once to float32)
    _same(ours.draw(5, dtype=pr.float32), theirs.draw(5, dtype=torch.float32))
    _same(ours.draw(3, dtype=torch.float64), theirs.draw(3))
    out, tout = pr.empty(7), torch.empty(7)
    got, want = ours.draw(6, out=out), theirs.draw(6, out=tout)
    assert got is out and tuple(out.shape) == (6, 4)
    _same(out, want)


def test_draw_base2_with_out():
    ours, theirs = SobolEngine(4, True, 5), TorchSobol(4, True, 5)
    out, tout = pr.zeros(3, 3), torch.zeros(3, 3)
    assert ours.draw_base2(3, out=out) is out
    theirs.draw_base2(3, out=tout)
    _same(out, tout)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64"])
def test_refused_dtypes(dtype):
    want = _message(lambda: TorchSobol(3).draw(4, dtype=getattr(torch, dtype)))
    with pytest.raises(DtypeError) as err:
        SobolEngine(3).draw(4, dtype=getattr(pr, dtype))
    assert str(err.value) == "pyrite: " + want
    assert isinstance(err.value, NotImplementedError)  # (torch's NotImplementedError)


@pytest.mark.parametrize("dimension", [0, -1, 21202])
def test_dimension_out_of_range(dimension):
    want = _message(lambda: TorchSobol(dimension))
    with pytest.raises(ArgumentError) as err:
        SobolEngine(dimension)
    assert str(err.value) == "pyrite: " + want
    assert isinstance(err.value, ValueError)


def test_attributes_and_names():
    import pyrite.quasirandom

    assert pr.quasirandom is pyrite.quasirandom
    assert pr.quasirandom.SobolEngine is SobolEngine
    assert SobolEngine.MAXDIM == TorchSobol.MAXDIM == 21201
    e = SobolEngine(3, scramble=True, seed=5)
    assert (e.dimension, e.scramble, e.seed, e.num_generated) == (3, True, 5, 0)
    assert repr(e) == repr(TorchSobol(3, scramble=True, seed=5))
    assert repr(SobolEngine(2)) == "SobolEngine(dimension=2)"
    e.draw(3)
    assert e.num_generated == 3
    assert tuple(SobolEngine(6).draw(0).shape) == (0, 6)  # (torch: "negative dimension -1")
    assert tuple(SobolEngine(6).draw().shape) == (1, 6)


def test_unseeded_scramble_follows_manual_seed():
    pr.manual_seed(1234)
    a = SobolEngine(5, scramble=True).draw(64).numpy()
    pr.manual_seed(1234)
    b = SobolEngine(5, scramble=True).draw(64).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, SobolEngine(5).draw(64).numpy())
    assert SobolEngine(5, scramble=True).seed is None


@pytest.mark.parametrize("dimension", [2, 7, 1111])
def test_scrambled_nets(dimension, rng):
    """Each block of 2^m points (from a multiple of 2^m) is a (t, m, s)-net; in one coordinate
    t = 0: the 2^m cells [k/2^m, (k+1)/2^m) hold one point each, so the i-th smallest value
    lies in cell i and the block's mean is within 2^-m-1 of 1/2. In the first two coordinates
    t = 0 too: every box [a/2^i, ..) x [b/2^(m-i), ..) holds one point. Scrambling keeps both.

    Float32 blurs the cells' right ends: a 30-bit value just below k/2^m can round up onto it
    (the 1111-dimensional case met it twice in 3 x 256 x 1111 values, as torch's float32 draws
    do), and just below 1 onto 1.0 (a chance of 2^-25 a value), so a value may sit on the
    right end of its cell, never past it."""
    m, cells = 8, np.arange(2**8)[:, None]
    seed = int(rng.integers(0, 2**31))
    engine = SobolEngine(dimension, scramble=True, seed=seed)
    for block in range(3):
        x = engine.draw(2**m).numpy().astype(np.float64)  # (2^m, dimension)
        assert ((x >= 0) & (x <= 1)).all(), (seed, block)
        xs = np.sort(x, axis=0)
        inside = (xs >= cells / 2**m) & (xs <= (cells + 1) / 2**m)
        assert inside.all(), (seed, block, np.argwhere(~inside)[:4].tolist())
        assert np.abs(x.mean(0) - 0.5).max() <= 2.0 ** (-m - 1) + 2.0**-24, (seed, block)
        for i in range(m + 1):  # (the first two coordinates, away from the blurred ends)
            a, b = x[:, 0] * 2**i, x[:, 1] * 2 ** (m - i)
            box = np.floor(a) * 2 ** (m - i) + np.floor(b)
            sharp = (a != np.floor(a)) & (b != np.floor(b))
            assert len(np.unique(box[sharp])) == sharp.sum() >= 2**m - 2, (seed, block, i)
    assert engine.num_generated == 3 * 2**m
    many = SobolEngine(dimension, scramble=True, seed=seed + 1).draw(4096).numpy()
    assert abs(float(many.mean()) - 0.5) < 1e-3
    assert not np.array_equal(many[:256], SobolEngine(dimension).draw(256).numpy())
