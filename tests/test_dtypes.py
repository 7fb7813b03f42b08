"""dtypes: names, PyTorch's promotion lattice, casts (NaN / inf / out-of-range as torch CPU on
x86), uint8/int8/int16 wrapping arithmetic, limits, numpy/torch interop, and the small ints
through every op family — torch 2.13 CPU is the oracle throughout."""

from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
import pytest
import test_reduce
import torch
from optable import check_row, has_f16

import pyrite as pr
from pyrite import dtypes as D

NAMES = ["float32", "float16", "bfloat16", "int32", "int16", "int8", "uint8", "bool"]
TORCH = {n: getattr(torch, n) for n in NAMES}
SMALL = ["uint8", "int8", "int16"]
INTS = ["uint8", "int8", "int16", "int32"]


def P(name):
    return getattr(pr, name)


def _name(td):
    n = str(td).replace("torch.", "")
    return {"int64": "int32", "float64": "float32"}.get(n, n)


def _f16_ok(*names):
    return "float16" not in names or has_f16()


def to_pr(t: torch.Tensor) -> pr.Tensor:
    """A pyrite tensor holding torch tensor t exactly (bf16 by its bits)."""
    r = pr.tensor(t)
    assert r.dtype.name == _name(t.dtype), (r.dtype, t.dtype)
    return r


def host(t):
    """Values of a pyrite or torch tensor as a float64 (or int64) numpy array."""
    if isinstance(t, torch.Tensor):
        t = t.float() if t.dtype in (torch.bfloat16, torch.float16) else t
        return t.numpy().astype(np.float64 if t.is_floating_point() else np.int64)
    t = t.float() if t.dtype.is_floating_point else t
    a = t.numpy()
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)


def same(got, want, what=""):
    """Exact equality of values and dtype, NaN equal to NaN."""
    assert got.dtype.name == _name(want.dtype), f"{what}: dtype {got.dtype} vs {want.dtype}"
    g, w = host(got), host(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}"
    bad = ~((g == w) | (np.isnan(g) & np.isnan(w)) if g.dtype.kind == "f" else (g == w))
    assert not bad.any(), (
        f"{what}: {bad.sum()} mismatches, e.g. got {g[bad][:5]}, want {w[bad][:5]}"
    )


# ---- names -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, want",
    [
        ("float32", pr.float32),
        ("float", pr.float32),
        ("float64", pr.float32),
        ("double", pr.float32),
        ("float16", pr.float16),
        ("half", pr.float16),
        ("bfloat16", pr.bfloat16),
        ("int32", pr.int32),
        ("int64", pr.int32),
        ("long", pr.int32),
        ("int", pr.int32),
        ("int16", pr.int16),
        ("short", pr.int16),
        ("int8", pr.int8),
        ("char", pr.int8),
        ("uint8", pr.uint8),
        ("byte", pr.uint8),
        ("bool", pr.bool),
        (np.float32, pr.float32),
        (np.float64, pr.float32),
        (np.float16, pr.float16),
        (np.int32, pr.int32),
        (np.int64, pr.int32),
        (np.int16, pr.int16),
        (np.int8, pr.int8),
        (np.uint8, pr.uint8),
        (np.bool_, pr.bool),
        (np.dtype("float16"), pr.float16),
        (np.dtype("uint8"), pr.uint8),
        (torch.float32, pr.float32),
        (torch.float64, pr.float32),
        (torch.float16, pr.float16),
        (torch.bfloat16, pr.bfloat16),
        (torch.int32, pr.int32),
        (torch.int64, pr.int32),
        (torch.int16, pr.int16),
        (torch.int8, pr.int8),
        (torch.uint8, pr.uint8),
        (torch.bool, pr.bool),
        (float, pr.float32),
        (int, pr.int32),
        (bool, pr.bool),
        (None, pr.float32),
        (pr.float16, pr.float16),
    ],
)
def test_from_any(spec, want):
    assert D.from_any(spec) is want


@pytest.mark.parametrize(
    "spec", ["complex32", np.clongdouble, torch.complex32, "bfloat16x", "string"]
)
def test_from_any_rejects(spec):
    with pytest.raises(TypeError, match=r"pyrite: unsupported dtype .*supported: float32"):
        D.from_any(spec)


def test_aliases_and_sizes():
    assert pr.int64 is pr.int32 and pr.long is pr.int32 and pr.double is pr.float32
    assert pr.half is pr.float16
    assert pr.byte is pr.uint8 and pr.char is pr.int8 and pr.short is pr.int16
    assert repr(pr.float16) == "pyrite.float16" and repr(pr.bool) == "pyrite.bool"
    assert repr(pr.bfloat16) == "pyrite.bfloat16"
    for n in NAMES:  # element_size() is PyTorch's, whatever the device stores
        assert P(n).itemsize == TORCH[n].itemsize, n
        assert P(n).is_floating_point == TORCH[n].is_floating_point, n
        assert P(n).is_signed == TORCH[n].is_signed, n
    assert pr.tensor([1, 2], dtype=pr.uint8).element_size() == 1
    assert pr.zeros(3, dtype=pr.bfloat16).nbytes == 6
    assert pr.uint8.kind == pr.int8.kind == "i" and pr.bfloat16.kind == "f"


# ---- promotion -------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", list(itertools.product(NAMES, NAMES)))
def test_promotion_table(a, b):
    """Every pair: promote_types, and result_type of tensor-tensor, tensor-0d, 0d-tensor and
    tensor-scalar, against torch; the ops themselves give that dtype."""
    pa, pb, ta, tb = P(a), P(b), TORCH[a], TORCH[b]
    assert pr.promote_types(pa, pb).name == _name(torch.promote_types(ta, tb))
    if not _f16_ok(a, b):
        return
    x1, y1 = pr.ones(3, dtype=pa), pr.ones(3, dtype=pb)
    t1, u1 = torch.ones(3, dtype=ta), torch.ones(3, dtype=tb)
    assert pr.result_type(x1, y1).name == _name(torch.result_type(t1, u1))
    y0, u0 = pr.ones((), dtype=pb), torch.ones((), dtype=tb)
    assert pr.result_type(x1, y0).name == _name(torch.result_type(t1, u0)), "tensor, 0-d"
    assert pr.result_type(y0, x1).name == _name(torch.result_type(u0, t1)), "0-d, tensor"
    for scalar in (True, 2, 2.5):
        assert pr.result_type(x1, scalar).name == _name(torch.result_type(t1, scalar)), scalar
    if "bool" not in (a, b):
        assert (x1 * y0).dtype.name == _name((t1 * u0).dtype)
        assert (x1 + y1).dtype.name == _name((t1 + u1).dtype)
        assert (x1 < y1).dtype is pr.bool


# ---- casts -----------------------------------------------------------------------------------
FLOAT_VALUES = [
    -1.0, -0.5, 0.0, -0.0, 0.4, 1.5, 2.5, 127.9, 128.0, -129.0, 255.5, 256.0, 300.0, -300.0,
    32767.5, 32768.0, -32769.0, 65504.0, 65519.99, 65520.0, 70000.7, -70000.7, 2.5e9, 3e9, -3e9,
    1e10, -1e10, 3.39e38, 3.4e38, -3.4e38, 1e-40, -1e-40, 1.0000001, 1 + 2**-8, 1 + 3 * 2**-9,
    float("nan"), float("inf"), float("-inf"),
]  # fmt: skip
INT_VALUES = [
    0, 1, -1, 7, 127, 128, -128, -129, 200, 255, 256, 300, -300, 32767, 32768, -32769, 65535,
    70000, -70000, 2**24 + 1, 2**31 - 1, -(2**31),
]  # fmt: skip


def _source(src: str) -> torch.Tensor:
    td = TORCH[src]
    if td.is_floating_point:
        return torch.tensor(FLOAT_VALUES, dtype=torch.float32).to(td)
    if td == torch.bool:
        return torch.tensor([True, False, True])
    return torch.tensor(INT_VALUES, dtype=torch.int64).to(td)  # wrapped by torch


@pytest.mark.parametrize("src, dst", list(itertools.product(NAMES, NAMES)))
def test_casts_match_torch(src, dst):
    """Every cast of every dtype pair on NaN, ±inf, ±0, out-of-range and tie values, as
    torch CPU gives it (x86: float → int through int32 with INT32_MIN for NaN/inf/out of range,
    then wrapped; float → float16 overflowing to inf; bfloat16 rounded to nearest even; NaN
    → True). The float → int results are C++-undefined; these are torch's observed values."""
    if not _f16_ok(src, dst):
        pytest.skip("needs shader-f16")
    t = _source(src)
    x = to_pr(t)
    same(x.to(P(dst)), t.to(TORCH[dst]), f"{src} -> {dst}")
    # the same through a strided view, and through the method names
    same(x[::2].to(P(dst)), t[::2].to(TORCH[dst]), f"{src} -> {dst} strided")


def test_cast_methods():
    t = _source("float32")
    x = to_pr(t)
    for meth in ("byte", "char", "short", "int", "bfloat16", "float", "double", "bool"):
        same(getattr(x, meth)(), getattr(t, meth)(), meth)
    same(x.long(), t.int(), "long is int32 here (torch's int64 of 1e10 would not fit)")
    same(x.type(pr.uint8), t.type(torch.uint8), "type")
    same(x.to(dtype=pr.int16), t.to(dtype=torch.int16), "to(dtype=)")
    same(x.to(pr.uint8).type_as(x), t.to(torch.uint8).type_as(t), "type_as")


def test_nan_bool_and_comparisons():
    x = pr.tensor([float("nan"), 0.0, -0.0, 1e-45, -2.0])
    t = torch.tensor([float("nan"), 0.0, -0.0, 1e-45, -2.0])
    same(x.bool(), t.bool(), "bool")
    same(x != 0, t != 0, "ne scalar")
    same(x != x, t != t, "ne self")
    same(x == x, t == t, "eq self")
    same(pr.logical_and(x, x), torch.logical_and(t, t), "logical_and")
    same(pr.logical_or(x, 0.0 * x), torch.logical_or(t, 0.0 * t), "logical_or")
    same(pr.logical_xor(x, x.flip(0)), torch.logical_xor(t, t.flip(0)), "logical_xor")
    same(pr.logical_not(x), torch.logical_not(t), "logical_not")
    assert bool(pr.tensor(float("nan"))) is True


def test_float16_overflow_to_inf():
    if not has_f16():
        pytest.skip("needs shader-f16")
    v = [65504.0, 65519.99, 65520.0, 65535.0, 1e6, -65520.0, 6e-8, 1e-8]
    same(pr.tensor(v).half(), torch.tensor(v).half(), "f32 -> f16")
    same(pr.tensor(v).bfloat16().half(), torch.tensor(v).bfloat16().half(), "bf16 -> f16")


# ---- wrapping arithmetic ---------------------------------------------------------------------
def _rand_ints(rng, name, n):
    info = torch.iinfo(TORCH[name])
    return torch.from_numpy(rng.integers(info.min, info.max + 1, n).astype(np.int64)).to(
        TORCH[name]
    )


BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
    "fmod": lambda a, b: torch.fmod(a, b) if isinstance(a, torch.Tensor) else pr.fmod(a, b),
    "maximum": lambda a, b: (
        torch.maximum(a, b) if isinstance(a, torch.Tensor) else pr.maximum(a, b)
    ),
    "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b,
    "ge": lambda a, b: a >= b,
    "div": lambda a, b: a / b,
}


@pytest.mark.parametrize(
    "a, b", [(a, b) for a in SMALL + ["int32", "bool"] for b in SMALL + ["int32"]]
)
def test_wrapping_binary_ops(a, b, rng):
    """Tensor op tensor over every small-int pair (uint8 + int8 → int16 ...), on values across
    each type's whole range: exactly torch's wrapped results."""
    n = 517
    ta = _rand_ints(rng, a, n) if a != "bool" else torch.from_numpy(rng.random(n) < 0.5)
    tb = _rand_ints(rng, b, n)
    tb = torch.where(tb == 0, torch.ones_like(tb), tb)  # no integer division by zero
    xa, xb = to_pr(ta), to_pr(tb)
    for name, f in BINARY.items():
        if a == "bool" and name in ("sub",):
            continue
        same(f(xa, xb), f(ta, tb), f"{a} {name} {b}")


@pytest.mark.parametrize("a", SMALL)
def test_wrapping_scalars_and_unary(a, rng):
    """Tensor op Python scalar: the scalar is cast (wrapped) to the tensor's dtype first, as in
    torch (uint8 < 1000 compares with 232; uint8 // 300 divides by 44); unary ops wrap."""
    t = _rand_ints(rng, a, 1031)
    t = torch.where(t == 0, torch.ones_like(t), t)
    x = to_pr(t)
    for s in (1, 3, 100, 1000, 300, -1, -7, 2**20 + 5):
        for name, f in BINARY.items():
            if name in ("floordiv", "remainder", "fmod") and D.wrap_int(s, P(a)) == 0:
                continue
            if name == "maximum":  # torch.maximum takes tensors only: clamp_min is its form
                try:
                    want = t.clamp_min(s)
                except RuntimeError:  # torch refuses a clamp bound that overflows the dtype
                    with pytest.raises(RuntimeError, match="without overflow"):
                        x.clamp_min(s)
                    continue
                same(x.clamp_min(s), want, f"{a} clamp_min {s}")
                continue
            same(f(x, s), f(t, s), f"{a} {name} {s}")
        same(s - x, s - t, f"{s} - {a}")
        same(s * x, s * t, f"{s} * {a}")
    same(x * 2.5, t * 2.5, "float scalar")
    for name in ("neg", "abs", "square", "sign", "relu"):
        f = getattr(torch, name)
        same(getattr(pr, name)(x), f(t), f"{name}({a})")
    same(x**2, t**2, "pow 2")
    same(x.float() / 255, t.float() / 255, "to float")
    # in place: the result keeps the tensor's dtype and wraps
    y, u = x.clone(), t.clone()
    y += 200
    u += 200
    same(y, u, "+= 200")
    y *= x
    u *= t
    same(y, u, "*= tensor")


def test_mixed_and_zero_dim():
    u8 = torch.tensor([1, 200, 255], dtype=torch.uint8)
    i8 = torch.tensor([-128, 5, 127], dtype=torch.int8)
    x, y = to_pr(u8), to_pr(i8)
    same(x + y, u8 + i8, "uint8 + int8 -> int16")
    same(
        x * to_pr(torch.tensor(3, dtype=torch.int32)),
        u8 * torch.tensor(3, dtype=torch.int32),
        "0-d",
    )
    same(
        to_pr(torch.tensor(5, dtype=torch.uint8)) * y,
        torch.tensor(5, dtype=torch.uint8) * i8,
        "0-d u8",
    )
    same(
        x + to_pr(torch.tensor([True, False, True])), u8 + torch.tensor([True, False, True]), "bool"
    )
    same(x + 1.5, u8 + 1.5, "float scalar")
    same(x.bfloat16() + y, u8.bfloat16() + i8, "bf16 + int8")
    same(pr.where(x > 100, x, 5), torch.where(u8 > 100, u8, 5), "where scalar")


def test_scalar_overflow_errors():
    """PyTorch refuses fill values (and clamp / where scalars) that overflow the dtype, but
    lets uint8 take negatives down to -255 (they wrap) and arithmetic scalars wrap freely."""
    msg = "value cannot be converted to type uint8_t without overflow"
    with pytest.raises(RuntimeError, match=msg):
        pr.full((2,), 300, dtype=pr.uint8)
    with pytest.raises(RuntimeError, match=msg):
        pr.zeros(2, dtype=pr.uint8).fill_(255.9)
    with pytest.raises(RuntimeError, match=msg):
        pr.tensor([300, 1], dtype=pr.uint8)
    with pytest.raises(RuntimeError, match=msg):
        pr.tensor([1, 2], dtype=pr.uint8).clamp(0, 300)
    with pytest.raises(RuntimeError, match=msg):
        pr.where(pr.tensor([True]), pr.tensor([1], dtype=pr.uint8), 300)
    with pytest.raises(RuntimeError, match="int8_t without overflow"):
        pr.full((1,), -129, dtype=pr.int8)
    with pytest.raises(RuntimeError, match="type int without overflow"):
        pr.zeros(2, dtype=pr.int32).fill_(float("nan"))
    if has_f16():  # (a device without shader-f16 refuses float16 itself first)
        with pytest.raises(RuntimeError, match="c10::Half without overflow"):
            pr.zeros(2, dtype=pr.float32).half().fill_(70000.0)
    with pytest.raises(RuntimeError, match="out of bounds for uint8"):
        pr.randint(0, 300, (3,), dtype=pr.uint8)
    same(pr.full((2,), -1, dtype=pr.uint8), torch.full((2,), -1, dtype=torch.uint8), "-1 wraps")
    same(
        pr.zeros(2, dtype=pr.int32).fill_(2.7),
        torch.zeros(2, dtype=torch.int32).fill_(2.7),
        "trunc",
    )
    same(
        pr.tensor([1, 2], dtype=pr.uint8).clamp(min=-5),
        torch.tensor([1, 2], dtype=torch.uint8).clamp(min=-5),
        "clamp -5",
    )
    # a numpy array is cast (wrapped), a list is checked, as torch does
    v = np.array([300, -1, 70000, 2.5e9])
    same(pr.tensor(v, dtype=pr.uint8), torch.tensor(v, dtype=torch.uint8), "numpy wraps")
    same(
        pr.tensor(v.astype(np.float32), dtype=pr.int16),
        torch.tensor(v.astype(np.float32), dtype=torch.int16),
        "f32 -> i16",
    )


# ---- limits ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", INTS)
def test_iinfo(name):
    a, b = pr.iinfo(P(name)), torch.iinfo(TORCH[name])
    assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max)
    assert "dtype=" + name in repr(a)


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_finfo(name):
    a, b = pr.finfo(P(name)), torch.finfo(TORCH[name])
    for f in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-6), f


def test_limit_errors():
    with pytest.raises(TypeError, match="iinfo"):
        pr.iinfo(pr.bfloat16)
    with pytest.raises(TypeError, match="iinfo"):
        pr.iinfo(pr.bool)
    with pytest.raises(TypeError, match="finfo"):
        pr.finfo(pr.uint8)


# ---- numpy / torch interop -------------------------------------------------------------------
@pytest.mark.parametrize("npdt", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.bool_])
def test_numpy_round_trip(npdt, rng):
    a = (rng.standard_normal((7, 5)) * 100).astype(npdt)
    for x in (pr.tensor(a), pr.from_numpy(a), pr.as_tensor(a)):
        assert x.dtype.name == _name(torch.from_numpy(a).dtype)
        got = x.numpy()
        assert got.dtype == np.dtype(npdt) and np.array_equal(got, a)
        assert x.tolist() == a.tolist()
    assert pr.tensor(a)[2, 3].item() == a[2, 3].item()
    assert np.array_equal(np.asarray(pr.tensor(a).T), a.T)


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "bfloat16"])
def test_torch_tensors_in(name, rng):
    t = torch.from_numpy(rng.standard_normal(301).astype(np.float32) * 90).to(TORCH[name])
    x = pr.tensor(t)
    same(x, t, "pr.tensor(torch)")
    same(pr.tensor(t, dtype=pr.float32), t.float(), "with dtype")
    same(pr.as_tensor(t[::3]), t[::3], "strided torch view")


def test_wide_numpy_ints():
    same(
        pr.tensor(np.array([70000, 2**31 - 1], dtype=np.uint32)),
        torch.tensor([70000, 2**31 - 1], dtype=torch.int32),
        "u32",
    )
    same(pr.tensor(np.array([65535], dtype=np.uint16)), torch.tensor([65535]), "u16")
    with pytest.raises(OverflowError, match="do not fit in int32"):
        pr.tensor(np.array([2**40]))
    with pytest.raises(OverflowError, match="do not fit in int32"):
        pr.tensor(np.array([3e9]), dtype=pr.int64)


# ---- creation with dtype= --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "bfloat16"])
def test_creation_dtypes(name):
    pd, td = P(name), TORCH[name]
    same(pr.zeros(2, 3, dtype=pd), torch.zeros(2, 3, dtype=td), "zeros")
    same(pr.ones(5, dtype=pd), torch.ones(5, dtype=td), "ones")
    same(pr.full((3,), 7, dtype=pd), torch.full((3,), 7, dtype=td), "full")
    same(pr.arange(5, dtype=pd), torch.arange(5, dtype=td), "arange")
    same(pr.eye(3, dtype=pd), torch.eye(3, dtype=td), "eye")
    x = pr.tensor([[1, 2], [3, 4]], dtype=pd)
    same(x, torch.tensor([[1, 2], [3, 4]], dtype=td), "tensor(list)")
    for like in ("zeros_like", "ones_like"):
        same(
            getattr(pr, like)(x),
            getattr(torch, like)(torch.tensor([[1, 2], [3, 4]], dtype=td)),
            like,
        )
    assert pr.empty(4, dtype=pd).dtype is pd and x.new_zeros(3).dtype is pd
    assert pr.randint(0, 100, (9,), dtype=pd).dtype is pd
    if name == "bfloat16":
        # pyrite rounds the f32 value once; torch's bf16 linspace is a bf16 ulp off at times
        got, want = host(pr.linspace(0, 1, 7, dtype=pd)), host(torch.linspace(0, 1, 7, dtype=td))
        assert np.allclose(got, want, rtol=0, atol=2**-8)
        for f in (pr.rand, pr.randn):
            r = f(1001, dtype=pd)
            assert r.dtype is pd and 0.2 < float(r.float().abs().mean()) < 1.0
    else:
        same(
            pr.arange(250, 260, dtype=pr.uint8), torch.arange(250, 260, dtype=torch.uint8), "wraps"
        )
        lo = 0 if name == "uint8" else -5
        r = pr.randint(lo, 6, (2000,), dtype=pd).numpy()
        assert r.min() == lo and r.max() == 5


def test_image_pipeline(rng):
    img = torch.from_numpy(rng.integers(0, 256, (3, 37, 41), dtype=np.uint8))
    x = to_pr(img)
    same(x.float() / 255, img.float() / 255, "img.float() / 255")
    f = torch.from_numpy(rng.uniform(-0.2, 1.2, (3, 37, 41)).astype(np.float32))
    same(
        (to_pr(f) * 255).clamp(0, 255).to(pr.uint8),
        (f * 255).clamp(0, 255).to(torch.uint8),
        "to uint8",
    )
    same(
        (to_pr(f) * 255).round().clamp(0, 255).byte(),
        (f * 255).round().clamp(0, 255).byte(),
        "byte",
    )
    same(x.permute(1, 2, 0).contiguous(), img.permute(1, 2, 0).contiguous(), "HWC")
    same(x.flip(2)[:, ::2], img.flip(2)[:, ::2], "flip")
    same(x.max(), img.max(), "max")
    same((x > 128).sum(), (img > 128).sum(), "count")
    same(x.sum(), img.sum(), "sum (int64 in torch)")
    same(pr.cat([x, x], 0), torch.cat([img, img], 0), "cat")
    mean = x.float().mean((1, 2))
    assert np.allclose(mean.numpy(), img.float().mean((1, 2)).numpy(), rtol=1e-5)


# ---- indexing with small-int tensors ---------------------------------------------------------
def test_uint8_mask_indexing_and_index_dtypes(rng):
    t = torch.from_numpy(rng.standard_normal((6, 5)).astype(np.float32))
    x = to_pr(t)
    m = torch.from_numpy((rng.random((6, 5)) < 0.4).astype(np.uint8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = t[m]
        want_rows = t[m[:, 0]]
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        got = x[to_pr(m)]
    same(got, want, "uint8 mask")
    with pytest.warns(UserWarning):
        same(x[to_pr(m[:, 0])], want_rows, "uint8 row mask")
    with pytest.warns(UserWarning):
        y = x.clone()
        y[to_pr(m)] = 0.0
    u = t.clone()
    u[m.bool()] = 0.0
    same(y, u, "uint8 mask setitem")
    for bad in ("int8", "int16"):
        with pytest.raises(IndexError, match="must be long, int, byte or bool"):
            x[pr.tensor([0, 1], dtype=P(bad))]
    with pytest.raises(TypeError, match="Expected dtype int32/int64 for index"):
        x.gather(0, pr.tensor([[0, 1]], dtype=pr.uint8))
    with pytest.raises(TypeError, match="Expected dtype int32/int64 for index"):
        x.index_select(0, pr.tensor([0, 1], dtype=pr.int8))


# ---- the small ints through the other op families --------------------------------------------
@pytest.mark.parametrize("name", SMALL)
def test_small_int_op_families(name, rng):
    """Sorting, reductions, gather/scatter, indexing, matmul on uint8/int8/int16 against torch
    (these kernels read the widened words as int32; what they compute is wrapped afterwards)."""
    t = _rand_ints(rng, name, 6 * 37).reshape(6, 37)
    x = to_pr(t)
    same(x.sort(1).values, t.sort(1).values, "sort")
    same(x.sort(0, descending=True).values, t.sort(0, descending=True).values, "sort desc")
    same(x.topk(3, 1).values, t.topk(3, 1).values, "topk")
    same(x.unique(), t.unique(), "unique")
    same(x.amax(1), t.amax(1), "amax")
    same(x.min(0).values, t.min(0).values, "min dim")
    same(x.argmax(1), t.argmax(1), "argmax")
    same(x.sum(1), t.sum(1), "sum -> int64 (int32 here)")
    same(x.sum(1, dtype=P(name)), t.sum(1, dtype=TORCH[name]), "sum wraps with dtype=")
    same(x.cumsum(1), t.cumsum(1), "cumsum")
    same(x.cumsum(1, dtype=P(name)), t.cumsum(1, dtype=TORCH[name]), "cumsum dtype=")
    same(x.prod(1, dtype=P(name)), t.prod(1, dtype=TORCH[name]), "prod wraps")
    idx = torch.from_numpy(rng.integers(0, 37, (6, 11)))
    same(x.gather(1, to_pr(idx)), t.gather(1, idx), "gather")
    same(x.T[to_pr(idx[0])], t.T[idx[0]], "advanced getitem")
    same(x[x > 0], t[t > 0], "mask select")
    same(
        x.clone().scatter_add_(1, to_pr(idx), x[:, :11]),
        t.clone().scatter_add_(1, idx, t[:, :11]),
        "scatter_add_ wraps",
    )
    rows = idx[0] % 6
    same(
        x.clone().index_put_((to_pr(rows),), x[to_pr(rows)], accumulate=True),
        t.clone().index_put_((rows,), t[rows], accumulate=True),
        "index_put_ accumulate",
    )
    same(
        x.clone().index_add_(1, to_pr(idx[0]), x[:, :11]),
        t.clone().index_add_(1, idx[0], t[:, :11]),
        "index_add_",
    )
    same(x @ x.T, t @ t.T, "matmul wraps")
    same(x.masked_fill(x < 0, 3), t.masked_fill(t < 0, 3), "masked_fill")
    same(pr.stack([x, x]).flatten()[::7], torch.stack([t, t]).flatten()[::7], "stack")
    same(x.repeat(2, 1), t.repeat(2, 1), "repeat")
    same(x.tril(), t.tril(), "tril")
    same(pr.nn.functional.pad(x, (1, 2)), torch.nn.functional.pad(t, (1, 2)), "pad")
    same(x.roll(3, 1), t.roll(3, 1), "roll")
    same(x.view(-1)[5:50].max(0).indices, t.view(-1)[5:50].max(0).indices, "max indices")
    u = t.view(-1)[:64].abs().to(torch.uint8)
    same(pr.bincount(to_pr(u)), torch.bincount(u), "bincount")


REDUCE_ROW_NAMES = ("sum", "amax", "amin", "max.dim", "min.dim", "argmax", "argmin", "cumsum")


@pytest.mark.parametrize(
    "row", [r for r in test_reduce.ROWS if r.name in REDUCE_ROW_NAMES], ids=lambda r: r.name
)
@pytest.mark.parametrize("name", SMALL)
def test_reduce_rows_small_ints(row, name, rng):
    """The reduction op table's rows, their inputs scaled and wrapped into each small type."""
    check_row(dataclasses.replace(row, dtypes=(name,), exact=True), rng)


def test_unwrapped_word_is_caught():
    """While poisoning is on (the suite), numpy() of a small-int tensor checks its words' range,
    so a kernel that stored an unwrapped value (or none) fails loudly."""
    from pyrite.ops import core

    if not core.POISON:
        pytest.skip("poisoning off")
    raw = pr.tensor([1000, 5], dtype=pr.int32)
    bad = pr.Tensor._make(raw._storage, (2,), (1,), 0, pr.uint8)
    with pytest.raises(RuntimeError, match="outside its range"):
        bad.numpy()
    with pytest.raises(RuntimeError, match="outside its range"):
        pr.empty(3, dtype=pr.int8).numpy()  # poisoned, never written
