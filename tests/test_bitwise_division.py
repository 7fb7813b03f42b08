"""Shifts and bit ops (ops/bitwise.py), gcd/lcm, and division (ops/division.py): against torch
CPU, exactly (integer results, and float //, %, fmod, which PyTorch's CPU computes from an exact
fmod).

Integer division by zero raises as PyTorch's CPU does (RuntimeError: ZeroDivisionError); the
error type here is a RuntimeError and a ZeroDivisionError.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend

I32 = np.int32
EDGE_I = np.array([0, 1, -1, 5, -8, 123456789, -123456789, 2**30, 2**31 - 1, -(2**31)], I32)


def _same(got, want):
    g = got.numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    w = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    if w.dtype == np.int64:
        w = w.astype(np.int32)
    assert g.shape == w.shape, f"shape {g.shape} vs {w.shape}"
    np.testing.assert_array_equal(g, w)


# ---- shifts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("amount", [0, 1, 7, 30, 31, 32, 33, 63, 64, 100, -1, -5, 2**40, -(2**40)])
def test_shift_by_scalar(amount):
    a, t = pr.tensor(EDGE_I), torch.from_numpy(EDGE_I)
    # torch narrows a Python int shift to the tensor's int32 first; pyrite's int64 is int32, so
    # it answers for the int64 the user meant: any shift >= 64 (or < 0) is 0 / the sign fill
    ta = t.long() if abs(amount) >= 2**31 else t
    _same(a << amount, (ta << amount).to(torch.int32))
    _same(a >> amount, (ta >> amount).to(torch.int32))


def test_shift_by_tensor(rng):
    a = np.concatenate([EDGE_I, rng.integers(-(2**31), 2**31 - 1, 50, dtype=np.int64).astype(I32)])
    s = rng.integers(-40, 70, a.size).astype(I32)
    s[:10] = [0, 31, 32, -1, 1, 64, 33, 5, -32, 30]
    pa, ps, ta, ts = pr.tensor(a), pr.tensor(s), torch.from_numpy(a), torch.from_numpy(s)
    _same(pa << ps, ta << ts)
    _same(pa >> ps, ta >> ts)
    _same(pr.bitwise_left_shift(pa, ps), torch.bitwise_left_shift(ta, ts))
    # broadcasting, strided views and reflected scalars
    m = pr.tensor(a[:10]).reshape(2, 5).t()
    _same(
        m << pr.tensor(s[:2]), torch.from_numpy(a[:10]).reshape(2, 5).t() << torch.from_numpy(s[:2])
    )
    _same(3 << pr.tensor([1, 2, 31, 32]), 3 << torch.tensor([1, 2, 31, 32], dtype=torch.int32))
    _same(-64 >> pr.tensor([1, 3, 40]), -64 >> torch.tensor([1, 3, 40], dtype=torch.int32))


def test_shift_in_place_and_bools():
    x = pr.tensor([1, 2, -3])
    y = x
    x <<= 2
    assert x is y and x.tolist() == [4, 8, -12]
    x >>= pr.tensor([1, 0, 1])
    assert x.tolist() == [2, 8, -6]
    x.bitwise_left_shift_(1)
    assert x.tolist() == [4, 16, -12]
    b = pr.tensor([True, False])
    assert (b << 1).tolist() == [2, 0] and (b << 1).dtype == pr.int32
    assert (1 << b).tolist() == [2, 1]
    with pytest.raises(TypeError, match="bool"):
        b << b
    with pytest.raises(TypeError, match="float32"):
        pr.tensor([1.0]) << 1
    with pytest.raises(TypeError, match="can't be cast"):
        b <<= 1
    with pytest.raises(TypeError, match="float32"):
        pr.tensor([1]) >> 1.5


def test_bitwise_in_place(rng):
    a = rng.integers(-1000, 1000, 31).astype(I32)
    b = rng.integers(-1000, 1000, 31).astype(I32)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        x = pr.tensor(a)
        getattr(x, name + "_")(pr.tensor(b))
        _same(x, getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)))
    x = pr.tensor(a)
    x.bitwise_not_()
    _same(x, ~torch.from_numpy(a))
    m = pr.tensor([True, False, True])
    m &= pr.tensor([True, True, False])
    assert m.tolist() == [True, False, False] and m.dtype == pr.bool


def test_gcd_lcm(rng):
    a = rng.integers(-10000, 10000, 257).astype(I32)
    b = rng.integers(-10000, 10000, 257).astype(I32)
    a[:4], b[:4] = [0, 0, 12, -18], [0, 5, 0, 12]
    _same(pr.gcd(pr.tensor(a), pr.tensor(b)), torch.gcd(torch.from_numpy(a), torch.from_numpy(b)))
    small_a, small_b = a % 500, b % 500
    _same(
        pr.lcm(pr.tensor(small_a), pr.tensor(small_b)),
        torch.lcm(torch.from_numpy(small_a), torch.from_numpy(small_b)),
    )
    x = pr.tensor([12, 18])
    x.gcd_(8)
    assert x.tolist() == [4, 2]
    with pytest.raises(TypeError, match="float32"):
        pr.gcd(pr.tensor([1.0]), pr.tensor([2.0]))


def test_gcd_worst_case_loop_budget():
    """Consecutive Fibonacci numbers take Euclid's most steps (45 for 1836311903, 1134903170);
    each invocation of the map runs 8 elements: ~370 loop iterations, far inside lavapipe's
    65,535, over enough elements to fill many workgroups."""
    fib = [1, 1]
    while fib[-1] < 2**31 - 1 - fib[-2]:
        fib.append(fib[-1] + fib[-2])
    a = np.array(fib[2:], np.int64)
    b = np.array(fib[1:-1], np.int64)
    n = 70_000
    reps = -(-n // a.size)
    a, b = np.tile(a, reps)[:n].astype(I32), np.tile(b, reps)[:n].astype(I32)
    got = pr.gcd(pr.tensor(a), pr.tensor(b)).numpy()
    assert (got == 1).all()


# ---- integer division by zero ---------------------------------------------------------------
def _raises_zero_division(fn):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        fn()
    with pytest.raises(ZeroDivisionError):
        fn()


DIVISIONS = [
    lambda a, z: a // z,
    lambda a, z: a % z,
    lambda a, z: pr.floor_divide(a, z),
    lambda a, z: pr.remainder(a, z),
    lambda a, z: pr.fmod(a, z),
    lambda a, z: a.fmod(z),
    lambda a, z: pr.div(a, z, rounding_mode="floor"),
    lambda a, z: pr.div(a, z, rounding_mode="trunc"),
    lambda a, z: a.div(z, rounding_mode="trunc"),
    lambda a, z: 7 // z if isinstance(z, pr.Tensor) else a // z,
    lambda a, z: 7 % z if isinstance(z, pr.Tensor) else a % z,
    lambda a, z: pr.remainder(7, z) if isinstance(z, pr.Tensor) else pr.remainder(a, z),
]


@pytest.mark.parametrize("k", range(len(DIVISIONS)))
@pytest.mark.parametrize("divisor", ["tensor", "scalar", "bool", "strided", "0-d"])
def test_integer_division_by_zero_raises(k, divisor):
    a = pr.tensor([5, -7, 9])
    z = {
        "scalar": 0,
        "bool": pr.tensor([True, False, True]),
        "strided": pr.tensor([[1, 9], [0, 9], [2, 9]])[:, 0],
        "0-d": pr.tensor(0),
        "tensor": pr.tensor([1, 0, 2]),
    }[divisor]
    _raises_zero_division(lambda: DIVISIONS[k](a, z))
    assert (a * 2).tolist() == [10, -14, 18]  # the next op still works
    ok = DIVISIONS[k](a, pr.tensor([1, 3, 2]))  # and the same call without a zero
    assert ok.dtype == pr.int32


def test_in_place_division_by_zero_leaves_the_tensor():
    for op in ("floor_divide_", "remainder_", "fmod_"):
        a = pr.tensor([5, -7, 9])
        _raises_zero_division(lambda a=a, op=op: getattr(a, op)(pr.tensor([1, 0, 1])))
        assert a.tolist() == [5, -7, 9]
    a = pr.tensor([5, -7])
    _raises_zero_division(lambda: a.__ifloordiv__(0))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a //= pr.tensor([0, 1])
    assert a.tolist() == [5, -7]
    a.div_(pr.tensor([2, 2]), rounding_mode="floor")
    assert a.tolist() == [2, -4]


def test_float_division_by_zero_is_ieee():
    x = pr.tensor([1.0, -1.0, 0.0])
    z = pr.tensor([0.0, 0.0, 0.0])
    t = torch.tensor([1.0, -1.0, 0.0])
    _same(x / z, t / torch.zeros(3))
    _same(x // z, t // torch.zeros(3))
    _same(x % z, t % torch.zeros(3))
    _same(pr.fmod(x, 0.0), torch.fmod(t, 0.0))
    # an int tensor divided by a float zero is float division
    _same(pr.tensor([1, 2]) // 0.0, torch.tensor([1, 2]) // 0.0)
    _same(pr.tensor([1, 2]) / 0, torch.tensor([1, 2]) / 0)


def test_integer_division_matches_torch(rng):
    a = np.concatenate([EDGE_I, rng.integers(-(2**31), 2**31 - 1, 200, dtype=np.int64).astype(I32)])
    b = rng.integers(-50, 50, a.size).astype(I32)
    b[b == 0] = 7
    b[:6] = [1, -1, 2, -2, 3, 2**31 - 1]
    pa, pb, ta, tb = pr.tensor(a), pr.tensor(b), torch.from_numpy(a), torch.from_numpy(b)
    _same(pa // pb, ta // tb)
    _same(pa % pb, ta % tb)
    _same(pr.fmod(pa, pb), torch.fmod(ta, tb))
    _same(pr.div(pa, pb, rounding_mode="trunc"), torch.div(ta, tb, rounding_mode="trunc"))
    _same(pr.div(pa, pb, rounding_mode="floor"), torch.div(ta, tb, rounding_mode="floor"))
    _same(pa // 7, ta // 7)
    _same(1000 % pb, 1000 % tb)


FLOAT_EDGE = np.array(
    [
        1.0,
        -1.0,
        7.5,
        -7.5,
        0.0,
        -0.0,
        1e30,
        -1e30,
        3e38,
        1e-38,
        1e-40,
        5.5,
        np.inf,
        -np.inf,
        np.nan,
    ],
    np.float32,
)


def _c_floor_mod(a, b):
    """PyTorch's CPU formulas (c10 div_floor_floating, remainder) on C's exact fmod, in f32.

    The oracle is numpy's fmod (C's fmodf), not torch.fmod: torch's vectorised CPU path (16+
    elements, Sleef) is not exact for huge quotients (fmod(3e38, 1.1) gives 0.4411, not
    0.1113; 1 mod 1e-40 gives nan), while its scalar path is C's fmod, as pyrite's kernel."""
    with np.errstate(all="ignore"):
        mod = np.fmod(a, b)
        fix = (mod != 0) & ((b < 0) != (mod < 0))
        rem = np.where(fix, mod + b, mod).astype(np.float32)
        div = ((a - mod) / b).astype(np.float32)
        div = np.where(fix, div - np.float32(1), div).astype(np.float32)
        fl = np.floor(div)
        fl = np.where(div - fl > 0.5, fl + 1, fl).astype(np.float32)
        zero = np.copysign(np.float32(0), a / b).astype(np.float32)
        floordiv = np.where(div != 0, fl, zero)
        floordiv = np.where(b == 0, a / b, floordiv).astype(np.float32)
        nan = np.isnan(a) | np.isnan(b)
        floordiv[nan] = np.nan
    return mod, rem, floordiv


def test_float_floor_mod_fmod_exact(rng):
    """Exactly PyTorch's CPU formulas: // and % from an exact fmod (1 // 0.1 == 9, -5 // inf
    == -1, 5 % inf == 5), with huge quotients (fmod's longest loop, 253 exponent bits) and
    subnormals."""
    a = np.concatenate([np.repeat(FLOAT_EDGE, FLOAT_EDGE.size), rng.standard_normal(300) * 100])
    b = np.concatenate([np.tile(FLOAT_EDGE, FLOAT_EDGE.size), rng.standard_normal(300)])
    a = np.concatenate([a, [1.0, 1.0, 3e38, 3e38, -3e38, 1e-45, 1.0]]).astype(np.float32)
    b = np.concatenate([b, [0.1, 0.3, 1e-45, 7e-39, 1.3, 1e-45, 1e-38]]).astype(np.float32)
    mod, rem, floordiv = _c_floor_mod(a, b)
    if backend.current().flushes_subnormals:
        # a device that flushes f32 subnormals (backend/quirks.py) computes these cases on ±0:
        # they are exact only where subnormals are kept (lavapipe, CPUs)
        tiny = np.finfo(np.float32).tiny

        def sub(v):
            return (v != 0) & (np.abs(v) < tiny)

        with np.errstate(all="ignore"):
            q = (a / b).astype(np.float32)
        keep = ~(sub(a) | sub(b) | sub(mod) | sub(rem) | sub(q))
        a, b, mod, rem, floordiv = a[keep], b[keep], mod[keep], rem[keep], floordiv[keep]
    pa, pb = pr.tensor(a), pr.tensor(b)
    got = pr.fmod(pa, pb).numpy()
    np.testing.assert_array_equal(got, mod)
    assert (np.signbit(got) == np.signbit(mod))[~np.isnan(mod)].all()  # signed zeros
    np.testing.assert_array_equal((pa % pb).numpy(), rem)
    np.testing.assert_array_equal((pa // pb).numpy(), floordiv)
    with np.errstate(all="ignore"):
        trunc = np.trunc((a / b).astype(np.float32))
    np.testing.assert_array_equal(pr.div(pa, pb, rounding_mode="trunc").numpy(), trunc)
    # and torch itself where its CPU path is the scalar one (< 16 elements)
    for i in range(0, a.size, 8):
        ta, tb = torch.from_numpy(a[i : i + 8]), torch.from_numpy(b[i : i + 8])
        _same(pr.fmod(pa[i : i + 8], pb[i : i + 8]), torch.fmod(ta, tb))
        _same(pa[i : i + 8] // pb[i : i + 8], ta // tb)
        _same(pa[i : i + 8] % pb[i : i + 8], ta % tb)


def test_fmod_worst_case_loop_budget():
    """fmod's loop takes ceil(253/8) = 32 steps for 3e38 mod 1e-45; 8 elements an invocation
    is 256 iterations, inside lavapipe's 65,535, over 70,000 elements."""
    a = np.full(70_000, 3.3e38, np.float32)
    b = np.full(70_000, 1.4e-45, np.float32)
    a[::7] = -1.7e38
    b[::5] = 1.1
    got = pr.fmod(pr.tensor(a), pr.tensor(b)).numpy()
    np.testing.assert_array_equal(got, np.fmod(a, b))


def test_operators_refuse_non_operands():
    x = pr.tensor([1, 2])
    assert (x == None) is False  # noqa: E711
    assert (x != None) is True  # noqa: E711
    assert (x == "a") is False and (x != "a") is True
    assert (x == [1, 2]) is False  # PyTorch: a list is not an operand of ==
    assert None != x  # noqa: E711
    assert x not in [None, "a"]
    for bad in (lambda: x < None, lambda: x + [1, 2], lambda: x // "a", lambda: x << None):
        with pytest.raises(TypeError):
            bad()
    assert (x == np.array([1, 3])).tolist() == [True, False]
    assert (x == 1 + 2j).tolist() == [False, False] and (x != 2 + 0j).tolist() == [True, False]
    assert 2 in x and 3 not in x and pr.tensor([1, 2]) in pr.tensor([[1, 2], [3, 4]])
    with pytest.raises(RuntimeError, match="__contains__"):
        "a" in x  # noqa: B015
    assert [int(v) for v in reversed(pr.tensor([1, 2, 3]))] == [3, 2, 1]


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_bool_division_is_a_dtype_error_not_a_zero_division():
    # two bools have no division (torch: "not implemented for 'Bool'"), whatever they hold
    b = pr.tensor([True, False])
    for f in (lambda: b // b, lambda: b % b, lambda: pr.fmod(b, b), lambda: b // False):
        with pytest.raises(TypeError, match="bool"):
            f()
