"""bfloat16: packed two a u32 word, read and written natively by the strided map (bit-for-bit
against torch CPU where torch computes in f32 and rounds once), every other op family through
the f32 fallback (ops/fallback.py), numpy refusing it as torch does, and checkpoint bytes
uploaded without widening (`pr.frombuffer`)."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
import test_reduce
import torch
from optable import check_row

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite import dtypes as D
from pyrite.kernels.common import header
from pyrite.kernels.elementwise import map_kernel

BF = torch.bfloat16


def bits(t) -> np.ndarray:
    """The uint16 bits of a pyrite or torch bf16 tensor, NaNs made one pattern (torch CPU's
    vectorised cast gives 0xffff for NaN, its scalar one 0x7fc0, pyrite 0x7fc0: all NaN)."""
    if isinstance(t, torch.Tensor):
        b = t.contiguous().view(torch.int16).numpy().view(np.uint16).copy()
    else:
        assert t.dtype is pr.bfloat16, t.dtype
        b = D.f32_to_bf16_bits(t.float().numpy())
    b[(b & 0x7FFF) > 0x7F80] = 0x7FC0
    return b


def same_bits(got, want, what=""):
    assert isinstance(got, pr.Tensor) and got.dtype is pr.bfloat16, f"{what}: {got.dtype}"
    assert tuple(got.shape) == tuple(want.shape), (
        f"{what}: {tuple(got.shape)} vs {tuple(want.shape)}"
    )
    g, w = bits(got), bits(want)
    bad = g != w
    if backend.current().flushes_subnormals:
        # a device that flushes f32 subnormals (the H200 through Vulkan: backend/quirks.py)
        # gives ±0 where the exact result is subnormal
        sub = ((w & 0x7F80) == 0) & ((w & 0x7F) != 0)
        bad &= ~(sub & ((g & 0x7FFF) == 0))
    assert not bad.any(), (
        f"{what}: {bad.sum()} of {bad.size} differ, e.g. got "
        f"{D.bf16_bits_to_f32(g[bad][:4])} want {D.bf16_bits_to_f32(w[bad][:4])}"
    )


def device_inputs(t):
    """`t` as the device reads it: a device that flushes f32 subnormals (backend/quirks.py)
    computes on ±0 where an input is subnormal, so the reference gets the same signed zeros."""
    if not backend.current().flushes_subnormals:
        return t
    tiny = torch.finfo(torch.float32).tiny
    return torch.where((t != 0) & (t.abs() < tiny), torch.zeros_like(t) * t.sign(), t)


def close(got, want, ulps=1, what="", scale=None):
    """Within `ulps` bf16 units of torch's bf16 result (for ops whose f32 math differs from
    torch's by an f32 ulp or two before the rounding to bf16); `scale`: the units are of that
    magnitude instead (a sum of products that cancels: its error is relative to the terms)."""
    assert got.dtype is pr.bfloat16, f"{what}: {got.dtype}"
    g, w = got.float().numpy().astype(np.float64), want.float().numpy().astype(np.float64)
    assert g.shape == w.shape, what
    mag = np.abs(w) if scale is None else np.maximum(np.abs(w), scale)
    tol = ulps * 2.0**-7 * np.maximum(mag, 2.0**-126) + 1e-30
    ok = (np.abs(g - w) <= tol) | (np.isnan(g) & np.isnan(w)) | (g == w)
    assert ok.all(), f"{what}: {(~ok).sum()} differ, e.g. got {g[~ok][:4]} want {w[~ok][:4]}"


def rand_bf16(rng, *shape, scale=1.0):
    return torch.from_numpy((rng.standard_normal(shape) * scale).astype(np.float32)).to(BF)


SPECIAL = [
    0.0, -0.0, 1.0, -1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-9, 1 + 3 * 2**-9, 1 + 2**-9 + 2**-20,
    3.3895e38, 3.39e38, 3.4028e38, -3.4e38, 1e-38, 1e-40, -1e-40, 9.2e-41, 65504.0, 0.1, 1 / 3,
    float("nan"), float("inf"), float("-inf"),
]  # fmt: skip


# ---- storage and casts -----------------------------------------------------------------------
def test_round_to_nearest_even_from_f32(rng):
    v = np.concatenate(
        [np.array(SPECIAL, np.float32), rng.standard_normal(20011).astype(np.float32) * 1e3]
    )
    # every tie pattern: low 16 bits exactly 0x8000, with both parities of bit 16
    ties = (rng.integers(0, 2**31, 500).astype(np.uint32) & ~np.uint32(0xFFFF)) | np.uint32(0x8000)
    v = np.concatenate([v, ties.view(np.float32)])
    t = torch.from_numpy(v)
    same_bits(pr.tensor(v).bfloat16(), t.bfloat16(), "f32 -> bf16 on the device")
    same_bits(pr.tensor(v, dtype=pr.bfloat16), t.bfloat16(), "f32 -> bf16 on the host")
    same_bits(pr.tensor(t.bfloat16()), t.bfloat16(), "torch bf16 bits")
    back = pr.tensor(t.bfloat16()).float().numpy()
    want = t.bfloat16().float().numpy()
    assert np.array_equal(back, want, equal_nan=True)
    assert pr.tensor([float("nan")]).bfloat16().isnan().item()


def test_numpy_refuses_like_torch():
    x = pr.tensor([1.5, 2.0]).bfloat16()
    with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
        x.numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(x)
    assert x.float().numpy().tolist() == [1.5, 2.0]
    assert x.tolist() == [1.5, 2.0] and x[1].item() == 2.0 and float(x[0]) == 1.5
    assert "dtype=pyrite.bfloat16" in repr(x) and "1.5000" in repr(x)
    assert pr.bfloat16.itemsize == 2 and x.element_size() == 2


# ---- the strided map: bit-exact against torch ------------------------------------------------
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: (
        torch.maximum(a, b) if isinstance(a, torch.Tensor) else pr.maximum(a, b)
    ),
    "minimum": lambda a, b: (
        torch.minimum(a, b) if isinstance(a, torch.Tensor) else pr.minimum(a, b)
    ),
}
UNARY = [
    "neg",
    "abs",
    "relu",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sqrt",
    "square",
    "sign",
    "reciprocal",
]
UNARY_APPROX = ["exp", "log", "sin", "tanh", "sigmoid", "rsqrt"]  # f32 math ± an f32 ulp


def test_elementwise_bit_exact(rng):
    n = 4099
    ta, tb = rand_bf16(rng, n, scale=3), rand_bf16(rng, n, scale=3)
    tb = torch.where(tb == 0, torch.ones_like(tb), tb)
    ta[: len(SPECIAL)] = torch.tensor(SPECIAL).to(BF)
    ta, tb = device_inputs(ta), device_inputs(tb)
    a, b = pr.tensor(ta), pr.tensor(tb)
    for name, f in BINARY.items():
        same_bits(f(a, b), f(ta, tb), name)
    for s in (0.1, 1 / 3, 2.5, -7, 3):  # the scalar: rounded to bf16 for +, -; f32 for *, /
        for name in ("add", "sub", "mul", "div"):
            same_bits(BINARY[name](a, s), BINARY[name](ta, s), f"{name} {s}")
        same_bits(s - a, s - ta, f"{s} - x")
        for name in ("lt", "eq", "ge"):
            got, want = getattr(a, name)(s), getattr(ta, name)(s)
            assert np.array_equal(got.numpy(), want.numpy()), f"{name} {s}"
        same_bits(
            a.clamp(-s, s) if s > 0 else a.clamp(s, -s), ta.clamp(-abs(s), abs(s)), f"clamp {s}"
        )
    for name in UNARY:
        same_bits(
            getattr(pr, name)(a.abs() if name == "sqrt" else a),
            getattr(torch, name)(ta.abs() if name == "sqrt" else ta),
            name,
        )
    k = len(SPECIAL)  # WGSL's sin & co. are accurate on moderate arguments only: no 3e38
    for name in UNARY_APPROX:
        x = a[k:].abs() + 0.01 if name in ("log", "rsqrt") else a[k:]
        t = ta[k:].abs() + 0.01 if name in ("log", "rsqrt") else ta[k:]
        close(getattr(pr, name)(x), getattr(torch, name)(t), 1, name)
    same_bits(pr.where(a > 0, a, b), torch.where(ta > 0, ta, tb), "where")
    same_bits(a * b + a, ta * tb + ta, "chain (rounded at each op, as torch)")
    same_bits(pr.nan_to_num(a), torch.nan_to_num(ta), "nan_to_num (bf16 max)")
    # mixed: bf16 with f32 / f16 / ints promotes as torch
    f = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    got = a + pr.tensor(f)
    assert got.dtype is pr.float32
    assert np.array_equal(got.numpy(), (ta + f).numpy(), equal_nan=True)
    same_bits(a + pr.tensor([3], dtype=pr.uint8), ta + torch.tensor([3], dtype=torch.uint8), "+ u8")
    same_bits(a * pr.tensor(2.5), ta * torch.tensor(2.5), "* 0-d f32")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 256, 257, 2049, 65537])
def test_packed_writes(n, rng):
    """Word ownership at both ends of a contiguous view with an odd or even offset, and the
    atomic path of strided views, in place and not, against torch's bf16 tensors."""
    t = rand_bf16(rng, n + 3)
    x = pr.tensor(t)
    for lo in (0, 1, 2, 3):
        hi = lo + n if lo + n <= n + 3 else n + 3
        y, u = x.clone(), t.clone()
        y[lo:hi] = x[lo:hi] * 3  # contiguous view, odd/even start
        u[lo:hi] = t[lo:hi] * 3
        same_bits(y, u, f"slice [{lo}:{hi}] = ")
        y[lo:hi].add_(1.0)  # in place through the view (reads its own words)
        u[lo:hi].add_(1.0)
        same_bits(y, u, f"slice [{lo}:{hi}] += ")
    y, u = x.clone(), t.clone()
    k = (n + 3) // 2
    y[1::2] = -x[::2][:k]  # strided: two invocations per word, atomics
    u[1::2] = -t[::2][:k]
    same_bits(y, u, "odd elements")
    y[::3].mul_(2.0)
    u[::3].mul_(2.0)
    same_bits(y, u, "every third, in place")
    y[2:].fill_(0.5)
    u[2:].fill_(0.5)
    same_bits(y, u, "fill_ from offset 2")


def test_views_and_copies_2d(rng):
    t = rand_bf16(rng, 37, 41)
    x = pr.tensor(t)
    same_bits(x.T.contiguous(), t.T.contiguous(), "transpose copy")
    same_bits(x[3:, 1::2] + 1, t[3:, 1::2] + 1, "strided read")
    y, u = x.clone(), t.clone()
    y.T.mul_(2)  # in place on a transposed view: strided output, aliased input
    u.T.mul_(2)
    same_bits(y, u, "x.T *= 2")
    y[:, 5] = x[:, 7]
    u[:, 5] = t[:, 7]
    same_bits(y, u, "column copy")
    same_bits(x.expand(2, 37, 41)[1], t.expand(2, 37, 41)[1], "expand")
    same_bits(pr.cat([x, x[:5]], 0), torch.cat([t, t[:5]], 0), "cat rows")
    same_bits(pr.cat([x[:, :3], x], 1), torch.cat([t[:, :3], t], 1), "cat odd columns")
    same_bits(pr.stack([x, x], 2), torch.stack([t, t], 2), "stack")
    same_bits(F.pad(x, (1, 2, 3, 0)), torch.nn.functional.pad(t, (1, 2, 3, 0)), "pad")
    same_bits(x.flip(1), t.flip(1), "flip")
    same_bits(x.roll(5, 0), t.roll(5, 0), "roll")
    same_bits(x.tril(2), t.tril(2), "tril")
    same_bits(x.repeat(2, 1), t.repeat(2, 1), "repeat")
    same_bits(x.reshape(41, 37), t.reshape(41, 37), "reshape")


def test_creation():
    for f in ("zeros", "ones"):
        same_bits(getattr(pr, f)(5, dtype=pr.bfloat16), getattr(torch, f)(5, dtype=BF), f)
    same_bits(pr.full((3,), 0.1, dtype=pr.bfloat16), torch.full((3,), 0.1, dtype=BF), "full")
    # torch's own bf16 arange (ops/range_factories: its blocked rule, bases rounded to bf16)
    same_bits(
        pr.arange(0, 300, 0.7, dtype=pr.bfloat16), torch.arange(0, 300, 0.7, dtype=BF), "arange"
    )
    same_bits(pr.eye(4, dtype=pr.bfloat16), torch.eye(4, dtype=BF), "eye")
    same_bits(
        pr.tensor([[0.1, 2.7]], dtype=pr.bfloat16), torch.tensor([[0.1, 2.7]], dtype=BF), "tensor"
    )
    r = pr.randn(10000, dtype=pr.bfloat16)
    assert r.dtype is pr.bfloat16 and abs(float(r.float().std()) - 1) < 0.05
    with pytest.raises(RuntimeError, match="BFloat16 without overflow"):
        pr.zeros(2, dtype=pr.bfloat16).fill_(1e39)


# ---- other op families through the f32 fallback ----------------------------------------------
def test_op_families(rng):
    """Reductions, matmul, conv, sort, indexing, scatter, row ops, losses, attention: bf16 in,
    bf16 out (as torch), values within a bf16 ulp of torch's bf16 results."""
    t = rand_bf16(rng, 6, 37)
    w = rand_bf16(rng, 5, 37)
    x, wx = pr.tensor(t), pr.tensor(w)
    idx = torch.from_numpy(rng.integers(0, 37, (6, 11)))
    i = pr.tensor(idx)
    cases = {
        "sum": (lambda a: a.sum(1), lambda a: a.sum(1), 2),
        "mean": (lambda a: a.mean(0), lambda a: a.mean(0), 2),
        "amax": (lambda a: a.amax(1), lambda a: a.amax(1), 0),
        "max.values": (lambda a: a.max(1).values, lambda a: a.max(1).values, 0),
        "var": (lambda a: a.var(1), lambda a: a.var(1), 2),
        "logsumexp": (lambda a: a.logsumexp(1), lambda a: a.logsumexp(1), 1),
        "norm": (lambda a: a.norm(dim=1), lambda a: a.norm(dim=1), 1),
        "cumsum": (lambda a: a.cumsum(1), lambda a: a.cumsum(1), 4),
        "softmax": (lambda a: a.softmax(-1), lambda a: a.softmax(-1), 1),
        "log_softmax": (lambda a: a.log_softmax(0), lambda a: a.log_softmax(0), 1),
        "sort": (lambda a: a.sort(1).values, lambda a: a.sort(1).values, 0),
        "topk": (lambda a: a.topk(3).values, lambda a: a.topk(3).values, 0),
        "median": (lambda a: a.median(1).values, lambda a: a.median(1).values, 0),
        "gather": (lambda a: a.gather(1, i), lambda a: a.gather(1, idx), 0),
        "getitem": (lambda a: a[:, i[0]], lambda a: a[:, idx[0]], 0),
        "mask": (lambda a: a[a > 0], lambda a: a[a > 0], 0),
        "index_select": (lambda a: a.index_select(1, i[0]), lambda a: a.index_select(1, idx[0]), 0),
        "masked_fill": (
            lambda a: a.masked_fill(a < 0, 0.3),
            lambda a: a.masked_fill(a < 0, 0.3),
            0,
        ),
        "scatter_add_": (
            lambda a: a.clone().scatter_add_(1, i, a[:, :11]),
            lambda a: a.clone().scatter_add_(1, idx, a[:, :11]),
            1,
        ),
        "index_add_": (
            lambda a: a.clone().index_add_(1, i[0], a[:, :11]),
            lambda a: a.clone().index_add_(1, idx[0], a[:, :11]),
            1,
        ),
        "setitem_adv": (
            lambda a: _set(a, (slice(None), i[0]), 2.5),
            lambda a: _set(a, (slice(None), idx[0]), 2.5),
            0,
        ),
        "setitem_mask": (lambda a: _set(a, a > 0.5, -1.0), lambda a: _set(a, a > 0.5, -1.0), 0),
        "layer_norm": (
            lambda a: pr.nn.functional.layer_norm(a, (37,)),
            lambda a: torch.nn.functional.layer_norm(a, (37,)),
            2,
        ),
        "gelu": (lambda a: pr.nn.functional.gelu(a), lambda a: torch.nn.functional.gelu(a), 1),
    }
    for name, (fp, ft, ulps) in cases.items():
        got, want = fp(x), ft(t)
        if ulps == 0:
            same_bits(got, want, name)
        else:
            close(got, want, ulps, name)
    # matmul family: K = 37 products summed in f32 (torch: the same, another order)
    close(x @ wx.T, t @ w.T, 2, "matmul")
    close(F.linear(x, wx), torch.nn.functional.linear(t, w), 2, "linear")
    close(pr.einsum("ik,jk->ij", x, wx), torch.einsum("ik,jk->ij", t, w), 2, "einsum")
    img, ker = rand_bf16(rng, 1, 2, 9, 11), rand_bf16(rng, 3, 2, 3, 3)
    close(
        F.conv2d(pr.tensor(img), pr.tensor(ker)), torch.nn.functional.conv2d(img, ker), 2, "conv2d"
    )
    same_bits(F.max_pool2d(pr.tensor(img), 2), torch.nn.functional.max_pool2d(img, 2), "max_pool2d")
    q = rand_bf16(rng, 2, 7, 8)
    # both round the scores and the probabilities to bf16 on the way; their sums of p·v cancel
    close(
        F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(q), pr.tensor(q)),
        torch.nn.functional.scaled_dot_product_attention(q, q, q),
        4,
        "sdpa",
        scale=float(q.float().abs().max()),
    )
    tgt = torch.from_numpy(rng.integers(0, 37, 6))
    close(
        F.cross_entropy(x, pr.tensor(tgt)),
        torch.nn.functional.cross_entropy(t, tgt),
        2,
        "cross_entropy",
    )
    close(F.mse_loss(x, x * 0.5), torch.nn.functional.mse_loss(t, t * 0.5), 2, "mse")
    # results that are not bf16 stay what torch gives
    assert np.array_equal(x.argmax(1).numpy(), t.argmax(1).numpy())
    assert np.array_equal(x.sort(1).indices.numpy(), t.sort(1).indices.numpy())
    assert np.array_equal((x > 0).nonzero().numpy(), (t > 0).nonzero().numpy())
    assert x.sum(dtype=pr.float32).dtype is pr.float32
    assert pr.cat([x, pr.tensor(t.float())]).dtype is pr.float32  # bf16 with f32: f32
    assert pr.tensor(t.float()).sum(dtype=pr.bfloat16).dtype is pr.bfloat16
    assert pr.allclose(x, x) and pr.equal(x, x.clone())


def _set(a, index, v):
    a = a.clone()
    a[index] = v
    return a


BF16_REDUCE_ROWS = ("sum", "mean", "amax", "max.dim", "argmax", "var", "logsumexp", "norm")


@pytest.mark.parametrize(
    "row", [r for r in test_reduce.ROWS if r.name in BF16_REDUCE_ROWS], ids=lambda r: r.name
)
def test_reduce_rows(row, rng):
    """The reduction op table's rows on bfloat16 inputs (awkward shapes, strided layouts)."""
    check_row(dataclasses.replace(row, dtypes=("bfloat16",)), rng)


# ---- checkpoint bytes ------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5, 1000, 4097])
def test_frombuffer_bf16_in_chunks(n, rng, monkeypatch):
    from pyrite.ops import core

    monkeypatch.setattr(core, "UPLOAD_CHUNK_BYTES", 64)  # 32 elements a piece
    t = rand_bf16(rng, n)
    raw = bytes(t.untyped_storage())  # what a safetensors file holds for this tensor
    x = pr.frombuffer(raw, dtype=pr.bfloat16)
    same_bits(x, t, "frombuffer")
    if n > 3:
        same_bits(
            pr.frombuffer(raw, dtype=torch.bfloat16, count=n - 3, offset=2), t[1 : n - 2], "offset"
        )
        same_bits(
            pr.frombuffer(bytearray(raw), dtype="bfloat16").view(-1)[1:] * 2, t[1:] * 2, "math"
        )


@pytest.mark.parametrize(
    "td",
    [
        torch.float32,
        torch.float16,
        torch.int32,
        torch.int64,
        torch.float64,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.bool,
    ],
)
def test_frombuffer_dtypes(td, rng, monkeypatch):
    from pyrite.ops import core

    if td == torch.float16 and not pr.device_info()["features"].count("shader-f16"):
        pytest.skip("needs shader-f16")
    monkeypatch.setattr(core, "UPLOAD_CHUNK_BYTES", 40)
    t = torch.from_numpy(rng.standard_normal(103) * 50).to(td)
    raw = t.numpy().tobytes()
    x = pr.frombuffer(raw, dtype=td)
    want = torch.frombuffer(bytearray(raw), dtype=td)
    assert x.dtype.name == str(want.dtype).replace("torch.", "").replace("int64", "int32").replace(
        "float64", "float32"
    )
    w = want.numpy()
    if w.dtype == np.float64:
        w = w.astype(np.float32)  # stored as float32
    assert np.array_equal(x.numpy().astype(np.float64), w.astype(np.float64))


def test_frombuffer_errors():
    with pytest.raises(ValueError, match="multiple of element size"):
        pr.frombuffer(b"abc", dtype=pr.bfloat16)
    with pytest.raises(ValueError, match="requested 5 elements"):
        pr.frombuffer(b"abcdef", dtype=pr.bfloat16, count=5)


def test_frombuffer_never_widens_on_the_host(monkeypatch):
    """A 16 MiB bf16 checkpoint tensor (8M elements) uploads with well under its own size of
    host memory allocated beside the source bytes (a widened f32 copy would be 32 MiB)."""
    from pyrite.ops import core

    monkeypatch.setattr(core, "UPLOAD_CHUNK_BYTES", 1 << 20)
    n = 8 << 20
    raw = np.arange(n, dtype=np.uint32).astype(np.uint16).view(np.uint8)  # all bit patterns
    tracemalloc.start()
    x = pr.frombuffer(raw, dtype=pr.bfloat16)
    pr.synchronize()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 << 20, f"host peak {peak / 2**20:.1f} MiB"
    assert x.shape == (n,)
    got = x[n - 5 :].float().numpy()
    want = D.bf16_bits_to_f32(np.arange(n - 5, n).astype(np.uint16))
    assert np.array_equal(got, want, equal_nan=True)


def test_torch_bf16_tensor_uploads_its_bits(rng):
    t = rand_bf16(rng, 33, 7)
    x = pr.tensor(t)
    same_bits(x, t, "pr.tensor(torch bf16)")
    same_bits(pr.tensor(t.T), t.T.contiguous(), "a transposed torch view")


# ---- kernels as text -------------------------------------------------------------------------
def test_kernel_text():
    with pytest.raises(TypeError, match="bfloat16 tensor reached a kernel"):
        header([("x", "bf16", "r")])
    c = map_kernel("x0 + s0", (("bf16", "f32", "c", False),), ("bf16", "f32", "c"), 1, ("f32",), 4)
    assert "atomic" not in c.wgsl and "p_bf16(" in c.wgsl and "p_bf16_at(" in c.wgsl
    s = map_kernel("x0", (("bf16", "f32", "s", True),), ("bf16", "f32", "s"), 2, (), 4)
    assert "array<atomic<u32>>" in s.wgsl and "atomicAnd" in s.wgsl and "atomicLoad" in s.wgsl
    u8 = map_kernel("x0 + x0", (("u8", "i32", "c", False),), ("u8", "i32", "c"), 1)
    assert "& 255" in u8.wgsl and "array<i32>" in u8.wgsl


def test_tiny_loop_budget_subprocess():
    """The map's loops are a few per-thread steps whatever the size; with a tiny forced loop
    budget the bf16 and small-int paths (and the int32 exact sum, split) still agree."""
    code = """
import numpy as np, pyrite as pr
x = pr.arange(200003, dtype=pr.float32).bfloat16()
y = (x * 0.5 + 1).float().numpy()
w = (np.arange(200003, dtype=np.float32))
want = (pr.tensor(w).bfloat16().float().numpy() * 0.5 + 1)
assert np.array_equal(y, pr.tensor(want).bfloat16().float().numpy())
u = pr.arange(200003, dtype=pr.uint8)
assert (u + u).numpy()[-1] == np.uint8((200002 % 256) * 2 % 256)
s = pr.full((200003,), 10000, dtype=pr.int32).sum().item()
assert s == 10000 * 200003, s
try:
    pr.full((300007,), 10000, dtype=pr.int32).sum()
    raise SystemExit("no OverflowError")
except OverflowError:
    pass
print("ok")
"""
    env = dict(__import__("os").environ, PYRITE_LOOP_BUDGET="300")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-2000:]


def test_math_of_rounding_helpers():
    assert D.bf16_bits_of(1 + 2**-8) == 0x3F80  # a tie: to even
    assert D.bf16_bits_of(1 + 3 * 2**-8) == 0x3F82
    assert D.bf16_bits_of(float("nan")) == 0x7FC0
    assert D.bf16_bits_of(3.4e38) == 0x7F80  # rounds up to inf, as torch
    assert math.isinf(D.bf16_value(0x7F80))
