"""Reductions and scans against torch CPU float64: every op-table row runs through both kernel
shapes (serial loop per output; one workgroup per output), on awkward and non-contiguous inputs."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from optable import EPS32, OpInfo, Sample, check_row

import pyrite as pr
import pyrite.ops.reduce as R


@pytest.fixture(params=["serial", "row"])
def mode(request, monkeypatch):
    monkeypatch.setattr(R, "FORCE_MODE", request.param)
    return request.param


def T(a):
    return torch.from_numpy(np.asarray(a))


def tref(fn):
    """A float64 torch oracle on numpy arrays; tuples and named tuples become tuples of arrays."""

    def ref(*arrays, **kw):
        r = fn(*[T(a) for a in arrays], **kw)
        if isinstance(r, tuple):
            return tuple(x.numpy() for x in r)
        return r.numpy()

    return ref


def _len(inputs, expected):
    return max(1, np.asarray(inputs[0]).size // max(1, np.size(expected)))


def sum_tol(inputs, expected):
    # f32 sum of n terms: |err| <= n·eps·Σ|x|, Σ|x| <= n·max|x|
    n = _len(inputs, expected)
    return n * n * EPS32 * float(np.abs(inputs[0]).max(initial=0.0)) + EPS32, 4 * EPS32


def mean_tol(inputs, expected):
    n = _len(inputs, expected)
    return n * EPS32 * float(np.abs(inputs[0]).max(initial=0.0)) + EPS32, 4 * EPS32


def rel_tol(k=4):
    # prod / logsumexp / norm / var: each of n steps adds a few ulps of relative error
    def tol(inputs, expected):
        n = _len(inputs, expected)
        return k * n * EPS32, k * n * EPS32

    return tol


def scan_tol(k=1):
    # a prefix of m <= n terms (n the longest dim bounds the scanned one): n·eps·Σ|x|
    def tol(inputs, expected):
        x = np.abs(inputs[0])
        n = max(x.shape, default=1)
        return k * n * n * EPS32 * float(x.max(initial=0.0)) + EPS32, k * n * EPS32

    return tol


def normal(*shape):
    return lambda rng: [rng.standard_normal(shape)]


def near_one(*shape):
    return lambda rng: [rng.uniform(0.7, 1.4, shape)]


def ints(*shape, lo=-9, hi=10):
    return lambda rng: [rng.integers(lo, hi, shape).astype(np.int32)]


def bools(*shape):
    return lambda rng: [rng.random(shape) < 0.5]


def dim_samples(make=normal, extra=None):
    """Awkward shapes, dims (int, negative, tuple, None), keepdim both ways, strided layouts."""
    extra = extra or {}
    out = [
        Sample(make(1), dict(dim=0, **extra), name="(1,) d0"),
        Sample(
            make(7), dict(dim=None, **extra) if "dim" not in extra else dict(extra), name="(7,) all"
        ),
        Sample(make(1031), dict(dim=-1, keepdim=True, **extra), name="(1031,) keep"),
        Sample(make(13, 257), dict(dim=1, **extra), name="(13,257) d1"),
        Sample(make(13, 257), dict(dim=0, keepdim=True, **extra), layout="t", name="t d0"),
        Sample(make(13, 257), dict(dim=-1, **extra), layout="s", name="strided d-1"),
        Sample(make(3, 7, 13), dict(dim=(0, 2), **extra), name="(3,7,13) d(0,2)"),
        Sample(
            make(3, 7, 13),
            dict(dim=[-1, 1], keepdim=True, **extra),
            layout="t",
            name="t d[-1,1] keep",
        ),
        Sample(make(5, 1, 7), dict(dim=1, **extra), name="size-1 dim"),
    ]
    return out


def single_dim(samples):
    return [
        s
        for s in samples
        if not isinstance(s.kwargs.get("dim"), (tuple, list)) and s.kwargs.get("dim", 0) is not None
    ]


def _max_dim(fn):
    return lambda x, dim, keepdim=False: tuple(fn(x, dim, keepdim))


def _tmax_dim(fn):
    return lambda x, dim, keepdim=False: tuple(r.numpy() for r in fn(T(x), dim, keepdim))


ROWS = [
    OpInfo(
        "sum",
        lambda x, **k: pr.sum(x, **k),
        tref(torch.sum),
        dim_samples(),
        sum_tol,
        dtypes=("float32", "float16"),
    ),
    OpInfo("nansum", lambda x, **k: x.nansum(**k), tref(torch.nansum), dim_samples(), sum_tol),
    OpInfo(
        "mean",
        lambda x, **k: x.mean(**k),
        tref(torch.mean),
        dim_samples(),
        mean_tol,
        dtypes=("float32", "float16"),
    ),
    OpInfo(
        "prod",
        lambda x, **k: x.prod(**k),
        tref(torch.prod),
        single_dim(dim_samples(near_one)),
        rel_tol(),
    ),
    OpInfo(
        "amax",
        lambda x, **k: x.amax(**k),
        tref(torch.amax),
        [s for s in dim_samples() if s.kwargs.get("dim") is not None],
        exact=True,
    ),
    OpInfo(
        "amin",
        lambda x, **k: pr.amin(x, **k),
        tref(torch.amin),
        [s for s in dim_samples() if s.kwargs.get("dim") is not None],
        exact=True,
    ),
    OpInfo(
        "max.dim",
        _max_dim(lambda x, d, k: x.max(d, k)),
        _tmax_dim(torch.max),
        single_dim(dim_samples()),
        exact=True,
    ),
    OpInfo(
        "min.dim",
        _max_dim(lambda x, d, k: pr.min(x, dim=d, keepdim=k)),
        _tmax_dim(torch.min),
        single_dim(dim_samples()),
        exact=True,
    ),
    OpInfo(
        "argmax",
        lambda x, **k: x.argmax(**k),
        tref(torch.argmax),
        single_dim(dim_samples())
        + [
            Sample(normal(3, 7, 13), {"dim": None}, name="flat"),
            Sample(normal(3, 7), {"dim": None, "keepdim": True}, layout="t", name="flat keep"),
        ],
    ),
    OpInfo(
        "argmin",
        lambda x, **k: pr.argmin(x, **k),
        tref(torch.argmin),
        single_dim(dim_samples()) + [Sample(normal(13, 7), {}, layout="t", name="flat")],
    ),
    OpInfo("var", lambda x, **k: x.var(**k), tref(torch.var), dim_samples(), rel_tol(8)),
    OpInfo(
        "std.correction0",
        lambda x, **k: x.std(**k),
        tref(torch.std),
        dim_samples(extra={"correction": 0}),
        rel_tol(8),
    ),
    OpInfo(
        "var_mean",
        lambda x, **k: pr.var_mean(x, **k),
        tref(torch.var_mean),
        single_dim(dim_samples()),
        rel_tol(8),
    ),
    OpInfo(
        "std_mean.unbiased",
        lambda x, **k: pr.std_mean(x, **k),
        tref(torch.std_mean),
        single_dim(dim_samples(extra={"unbiased": False})),
        rel_tol(8),
    ),
    OpInfo(
        "logsumexp",
        lambda x, **k: x.logsumexp(**k),
        tref(torch.logsumexp),
        [s for s in dim_samples() if s.kwargs.get("dim") is not None],
        rel_tol(),
    ),
    OpInfo(
        "norm",
        lambda x, **k: x.norm(**k),
        tref(torch.norm),
        dim_samples(extra={"p": 2})
        + [Sample(normal(13, 7), {"p": "fro", "dim": (0, 1)}, layout="t")],
        rel_tol(),
    ),
    OpInfo(
        "norm.p",
        lambda x, **k: pr.norm(x, **k),
        tref(torch.norm),
        [
            Sample(normal(13, 257), {"p": p, "dim": d}, name=f"p={p}")
            for p, d in ((1, 1), (3, 0), (0.5, -1), (math.inf, 1), (-math.inf, 0), (0, 1))
        ],
        rel_tol(16),
    ),
    OpInfo(
        "cumsum",
        lambda x, **k: x.cumsum(**k),
        tref(torch.cumsum),
        single_dim(dim_samples()),
        scan_tol(),
    ),
    OpInfo(
        "cumprod",
        lambda x, **k: pr.cumprod(x, **k),
        tref(torch.cumprod),
        single_dim(dim_samples(near_one)),
        scan_tol(4),
    ),
    # integer and bool inputs: exact, int32 results where torch gives int64
    OpInfo("sum.int", lambda x, **k: x.sum(**k), tref(torch.sum), dim_samples(ints), exact=True),
    OpInfo("sum.bool", lambda x, **k: x.sum(**k), tref(torch.sum), dim_samples(bools), exact=True),
    OpInfo(
        "prod.int",
        lambda x, **k: x.prod(**k),
        tref(torch.prod),
        single_dim(dim_samples(lambda *s: ints(*s, lo=-1, hi=2))),
        exact=True,
    ),
    OpInfo(
        "amax.int",
        lambda x, **k: x.amax(**k),
        tref(torch.amax),
        [s for s in dim_samples(ints) if s.kwargs.get("dim") is not None],
        exact=True,
    ),
    OpInfo(
        "max.dim.int",
        _max_dim(lambda x, d, k: x.max(d, k)),
        _tmax_dim(torch.max),
        single_dim(dim_samples(lambda *s: ints(*s, lo=0, hi=3))),
        exact=True,
    ),
    OpInfo(
        "argmin.int.ties",
        lambda x, **k: x.argmin(**k),
        tref(torch.argmin),
        single_dim(dim_samples(lambda *s: ints(*s, lo=0, hi=3))),
        exact=True,
    ),
    OpInfo("all", lambda x, **k: x.all(**k), tref(torch.all), dim_samples(bools), exact=True),
    OpInfo(
        "any",
        lambda x, **k: pr.any(x, **k),
        tref(torch.any),
        dim_samples(lambda *s: lambda rng: [rng.random(s) < 0.01]),
        exact=True,
    ),
    OpInfo(
        "all.int",
        lambda x, **k: x.all(**k),
        tref(torch.all),
        dim_samples(lambda *s: ints(*s, lo=0, hi=30)),
        exact=True,
    ),
    OpInfo(
        "count_nonzero",
        lambda x, **k: x.count_nonzero(**k),
        tref(torch.count_nonzero),
        [
            Sample(s.make, {"dim": s.kwargs["dim"]}, s.layout, s.name)
            for s in dim_samples(lambda *s: ints(*s, lo=0, hi=3))
            if "keepdim" not in s.kwargs
        ],
        exact=True,
    ),
    OpInfo(
        "cumsum.int",
        lambda x, **k: x.cumsum(**k),
        tref(torch.cumsum),
        single_dim(dim_samples(ints)),
        exact=True,
    ),
    OpInfo(
        "cumsum.bool",
        lambda x, **k: x.cumsum(**k),
        tref(torch.cumsum),
        single_dim(dim_samples(bools)),
        exact=True,
    ),
]
for _r in ROWS:  # scans take no keepdim
    if _r.name.startswith("cum"):
        _r.samples = [
            Sample(s.make, {"dim": s.kwargs["dim"]}, s.layout, s.name) for s in _r.samples
        ]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_parity(row, rng, mode):
    check_row(row, rng)


def test_result_dtypes():
    x = pr.tensor([[1, 2], [3, 4]], dtype=pr.int32)
    assert x.sum().dtype is pr.int32 and x.sum().item() == 10
    assert (x > 1).sum(0).dtype is pr.int32
    assert x.prod(1).dtype is pr.int32
    assert x.sum(dtype=pr.float32).dtype is pr.float32
    assert x.mean(dtype=pr.float32).item() == 2.5
    assert x.all().dtype is pr.bool and x.any(1).dtype is pr.bool
    assert x.argmax().dtype is pr.int32 and x.count_nonzero().dtype is pr.int32
    assert x.cumsum(0, dtype=pr.float32).dtype is pr.float32
    assert x.float().logsumexp(0).dtype is pr.float32
    if pr.backend.current().has_f16:  # float16 storage needs shader-f16 (Dawn lacks it)
        h = pr.tensor([1.0, 2.0], dtype=pr.float16)
        assert h.sum().dtype is pr.float16 and h.mean().dtype is pr.float16
    assert pr.tensor(3.5).sum().item() == 3.5 and pr.tensor(3.5).sum(0).shape == ()


def test_max_min_forms():
    a = pr.tensor([[1.0, 5.0], [4.0, 2.0]])
    b = pr.tensor([[3.0, 3.0], [3.0, 3.0]])
    np.testing.assert_array_equal(pr.max(a, b).numpy(), [[3, 5], [4, 3]])
    np.testing.assert_array_equal(a.min(b).numpy(), [[1, 3], [3, 2]])
    r = a.max(dim=1, keepdim=True)
    assert r.values.shape == (2, 1) and r.indices.numpy().ravel().tolist() == [1, 0]
    v, i = a.min(0)
    assert v.numpy().tolist() == [1.0, 2.0] and i.numpy().tolist() == [0, 1]
    assert r[0] is r.values and "values=" in repr(r)
    assert a.max().item() == 5.0 and a.min().item() == 1.0
    mm = a.aminmax(dim=0)
    assert mm.min.numpy().tolist() == [1.0, 2.0] and mm.max.numpy().tolist() == [4.0, 5.0]
    assert [t.item() for t in pr.aminmax(a)] == [1.0, 5.0]


def test_nan_propagation(mode):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    a[1, 3] = np.nan
    a[2, 0] = np.nan
    a[2, 4] = np.nan
    x, t = pr.tensor(a), T(a)
    for f in (
        lambda v: v.max(1),
        lambda v: v.min(1),
        lambda v: v.argmax(1),
        lambda v: v.argmin(0),
        lambda v: v.amax(0),
        lambda v: v.sum(1),
        lambda v: v.logsumexp(1),
        lambda v: v.var(1),
        lambda v: v.nansum(1),
        lambda v: v.cumsum(1),
        lambda v: v.norm(dim=1),
        lambda v: v.argmax(),
        lambda v: v.max(),
    ):
        got, want = f(x), f(t)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6, equal_nan=True)


def test_infinities(mode):
    a = np.array(
        [[-np.inf, -np.inf, 1.0], [np.inf, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]], dtype=np.float32
    )
    x, t = pr.tensor(a), T(a)
    for f in (
        lambda v: v.logsumexp(1),
        lambda v: v.argmax(1),
        lambda v: v.argmin(1),
        lambda v: v.amax(1),
    ):
        np.testing.assert_array_equal(f(x).numpy(), f(t).numpy())


def test_empty(mode):
    e = pr.zeros(0, 3)
    te = torch.zeros(0, 3)
    for f in (
        lambda v: v.sum(0),
        lambda v: v.prod(0),
        lambda v: v.mean(0),
        lambda v: v.all(0),
        lambda v: v.any(0),
        lambda v: v.sum(),
        lambda v: v.prod(),
        lambda v: v.logsumexp(0),
        lambda v: v.norm(),
        lambda v: v.count_nonzero(0),
        lambda v: v.cumsum(0),
        lambda v: v.max(1).values,
        lambda v: v.sum(1),
        lambda v: v.var(0),
    ):
        g, w = f(e), f(te)
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy().astype(g.numpy().dtype))
    with pytest.raises(RuntimeError, match=r"max\(\): Expected reduction dim"):
        e.max()
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0"):
        e.amax(0)
    with pytest.raises(IndexError, match=r"argmin\(\)"):
        e.argmin()
    assert pr.ones(2).sum().item() == 2.0  # the next op still works


def test_long_row(rng):
    # 200,003 > SERIAL_MAX_LEN_CPU: the row kernel on lavapipe, 782 iterations an invocation
    a = rng.standard_normal(200_003)
    x = pr.tensor(a.astype(np.float32))
    a = a.astype(np.float32).astype(np.float64)
    n = a.size
    assert abs(x.sum().item() - a.sum()) <= n * EPS32 * np.abs(a).sum()
    assert x.argmax().item() == int(a.argmax())
    np.testing.assert_allclose(x.var().item(), a.var(ddof=1), rtol=n * EPS32 * 4)
    c = x.cumsum(0).numpy()
    np.testing.assert_allclose(c, np.cumsum(a), atol=n * EPS32 * np.abs(a).sum())


def test_grid_folding(rng, monkeypatch):
    # 65,537 outputs in the one-workgroup-per-output kernel: the grid folds into (65535, 2, 1)
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    a = rng.standard_normal((65_537, 3)).astype(np.float32)
    x = pr.tensor(a)
    np.testing.assert_allclose(x.sum(1).numpy(), a.astype(np.float64).sum(1), atol=1e-5)
    np.testing.assert_array_equal(x.argmax(1).numpy(), a.argmax(1))
    np.testing.assert_allclose(x.cumsum(1).numpy(), np.cumsum(a.astype(np.float64), 1), atol=1e-5)


def test_var_overloads():
    a = np.random.default_rng(0).standard_normal((5, 9)).astype(np.float32)
    x, t = pr.tensor(a), T(a)
    cases = [
        ((), {}),
        ((False,), {}),
        ((1, True), {}),
        ((1, False, True), {}),
        ((), {"dim": 0, "unbiased": False}),
        ((), {"dim": 1, "correction": 2, "keepdim": True}),
    ]
    for args, kw in cases:
        for name in ("var", "std"):
            np.testing.assert_allclose(
                getattr(x, name)(*args, **kw).numpy(),
                getattr(t, name)(*args, **kw).numpy(),
                rtol=1e-5,
            )
    one = pr.tensor([3.0]).var()
    assert math.isnan(one.item())
    assert math.isinf(pr.tensor([1.0, 2.0]).var(correction=2).item())


def test_errors():
    x = pr.ones(2, 3)
    with pytest.raises(IndexError, match=r"range of \[-2, 1\], but got 2"):
        x.sum(2)
    with pytest.raises(IndexError, match="range"):
        x.amax((0, -3))
    with pytest.raises(IndexError, match="range"):
        x.cumsum(5)
    with pytest.raises(RuntimeError, match="multiple times"):
        x.sum((1, -1))
    with pytest.raises((TypeError, RuntimeError), match="int32"):
        pr.ones(3, dtype=pr.int32).mean()
    with pytest.raises(TypeError, match="int32"):
        pr.ones(3, dtype=pr.int32).var()
    assert x.sum().item() == 6.0  # the device still works after the errors


def test_kernels_as_text():
    from pyrite.kernels.reduce import reduce_kernel, scan_kernel

    src = reduce_kernel("argmax", "f16", "f32", ("i32",), ("i32",), 2, 1, "row").wgsl
    assert "enable f16;" in src and src.count("workgroupBarrier") == 2
    assert "var<workgroup> sh" in src
    serial = reduce_kernel("var", "f32", "f32", ("f32",), ("f32",), 1, 2, "serial").wgsl
    assert "workgroupBarrier" not in serial and "var<workgroup>" not in serial
    # (the scan's parallel prefix of the blocks' totals: two barriers a step in its loop, one
    # after; no invocation walks the WG totals alone)
    scan = scan_kernel("cumsum", "f32", "f32", "f32", 1, "row").wgsl
    assert scan.count("workgroupBarrier") == 3 and "k < 256" not in scan


# ---- split (two-stage) reductions: few outputs, long rows ---------------------------------
def _plan(n_out, length):
    plan = R._split_plan(n_out, length)
    assert plan is not None, f"({n_out} outputs of {length}) should take the split path"
    return plan


def split_tol(k=1, rel=False):
    """A split reduction folds C elements a chunk (serially at worst) then merges P states: at
    most C + P rounding steps on any path, so |err| <= k·(C + P)·eps·Σ|x| (rel: k·(C + P)·eps).
    The wide row kernel (R.WIDE) folds n / WIDE_LANES elements an invocation into its states,
    merges those, then 64 states in its tree (32 groups of 32)."""

    def tol(inputs, expected):
        x = np.abs(inputs[0])
        n_out = max(1, np.size(expected))
        n = max(1, x.size // n_out)
        fused = R._fused_plan(n_out, n, "sum", "f32")  # (the order _reduce_plan takes)
        if fused is not None:
            steps = k * (fused[1] + fused[0]) * EPS32
        elif R._wide(n_out, n, 4):
            steps = k * (n // R.WIDE_LANES + R.WIDE_ILP + 64) * EPS32
        else:
            parts, chunk = _plan(n_out, n)[:2]
            steps = k * (chunk + parts) * EPS32
        if rel:
            return steps, steps
        return steps * float(x.sum()) + EPS32, 4 * EPS32

    return tol


def long_samples(make=normal, extra=None):
    """Rows the split takes: 1-D prime length, (3, 200,003) over dim 1, and transposed."""
    extra = extra or {}
    return [
        Sample(make(300_007), dict(dim=0, **extra), name="(300007,)"),
        Sample(make(3, 200_003), dict(dim=1, **extra), name="(3,200003) d1"),
        Sample(
            make(3, 100_003), dict(dim=-1, keepdim=True, **extra), layout="t", name="transposed d-1"
        ),
    ]


def uniform(*shape):
    # positive terms: Σ|x| = |Σx|, so the sum tolerance is a relative one
    return lambda rng: [rng.uniform(0.0, 1.0, shape)]


SPLIT_ROWS = [
    OpInfo("sum", lambda x, **k: x.sum(**k), tref(torch.sum), long_samples(uniform), split_tol()),
    OpInfo(
        "nansum",
        lambda x, **k: x.nansum(**k),
        tref(torch.nansum),
        long_samples(uniform),
        split_tol(),
    ),
    OpInfo(
        "mean",
        lambda x, **k: x.mean(**k),
        tref(torch.mean),
        long_samples(uniform),
        split_tol(2, rel=True),
    ),
    OpInfo(
        "prod",
        lambda x, **k: x.prod(**k),
        tref(torch.prod),
        long_samples(lambda *s: lambda rng: [rng.uniform(0.999, 1.001, s)]),
        split_tol(4, rel=True),
    ),
    OpInfo("amax", lambda x, **k: x.amax(**k), tref(torch.amax), long_samples(), exact=True),
    OpInfo("amin", lambda x, **k: x.amin(**k), tref(torch.amin), long_samples(), exact=True),
    OpInfo(
        "max.dim",
        _max_dim(lambda x, d, k: x.max(d, k)),
        _tmax_dim(torch.max),
        long_samples(),
        exact=True,
    ),
    OpInfo(
        "min.dim",
        _max_dim(lambda x, d, k: x.min(d, k)),
        _tmax_dim(torch.min),
        long_samples(),
        exact=True,
    ),
    OpInfo("argmax", lambda x, **k: x.argmax(**k), tref(torch.argmax), long_samples()),
    OpInfo("argmin", lambda x, **k: x.argmin(**k), tref(torch.argmin), long_samples()),
    OpInfo(
        "aminmax",
        lambda x, **k: tuple(pr.aminmax(x, **k)),
        lambda a, **k: tuple(r.numpy() for r in torch.aminmax(T(a), **k)),
        long_samples(),
        exact=True,
    ),
    OpInfo(
        "var", lambda x, **k: x.var(**k), tref(torch.var), long_samples(), split_tol(8, rel=True)
    ),
    OpInfo(
        "std_mean",
        lambda x, **k: pr.std_mean(x, **k),
        tref(torch.std_mean),
        long_samples(uniform, {"correction": 0}),
        split_tol(8, rel=True),
    ),
    OpInfo(
        "logsumexp",
        lambda x, **k: x.logsumexp(**k),
        tref(torch.logsumexp),
        long_samples(),
        split_tol(4, rel=True),
    ),
    OpInfo(
        "norm",
        lambda x, **k: x.norm(**k),
        tref(torch.norm),
        long_samples(extra={"p": 2})
        + [
            Sample(normal(300_007), {"p": 1, "dim": 0}),
            Sample(normal(300_007), {"p": math.inf, "dim": 0}),
        ],
        split_tol(4, rel=True),
    ),
    OpInfo("sum.int", lambda x, **k: x.sum(**k), tref(torch.sum), long_samples(ints), exact=True),
    OpInfo(
        "all",
        lambda x, **k: x.all(**k),
        tref(torch.all),
        long_samples(lambda *s: lambda rng: [rng.random(s) < 0.99999]),
        exact=True,
    ),
    OpInfo(
        "any",
        lambda x, **k: x.any(**k),
        tref(torch.any),
        long_samples(lambda *s: lambda rng: [rng.random(s) < 0.00001]),
        exact=True,
    ),
    OpInfo(
        "count_nonzero",
        lambda x, **k: x.count_nonzero(**k),
        tref(torch.count_nonzero),
        [
            Sample(s.make, {"dim": s.kwargs["dim"]}, s.layout, s.name)
            for s in long_samples(lambda *s: ints(*s, lo=0, hi=3))
        ],
        exact=True,
    ),
]


@pytest.fixture(params=["adapter", "gpu-plan"])
def split_plan(request, monkeypatch):
    """This adapter's split plan (serial stages on lavapipe), and the GPU plan (row stages,
    P ≈ SPLIT_TARGET_WORKGROUPS / outputs) run on this adapter to reach those kernels too."""
    if request.param == "gpu-plan":
        monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    # (a GPU takes rows this long wide, or in one pass: the split here)
    monkeypatch.setattr(R, "WIDE", False)
    monkeypatch.setattr(R, "FUSED", False)
    return request.param


# the GPU plan's kernels differ from the adapter's only in their stages' shape, so one op of
# each state type runs it (sum, (value, index), (lo, hi), Welford, logsumexp, bool, int)
GPU_PLAN_ROWS = ("sum", "max.dim", "argmin", "aminmax", "std_mean", "logsumexp", "all", "sum.int")


@pytest.mark.parametrize(
    "plan,row",
    [("adapter", r) for r in SPLIT_ROWS]
    + [("gpu-plan", r) for r in SPLIT_ROWS if r.name in GPU_PLAN_ROWS],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
def test_split_parity(plan, row, rng, monkeypatch):
    if plan == "gpu-plan":
        monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    # (on a GPU the adapter's own rule takes rows up to WIDE_MAX_LEN wide, or in one pass)
    monkeypatch.setattr(R, "WIDE", False)
    monkeypatch.setattr(R, "FUSED", False)
    check_row(row, rng)
    assert R.LAST_PATH.startswith("split"), R.LAST_PATH


def test_split_ties_and_nans_across_chunks(rng, split_plan):
    # argmax/argmin ties → the first index, NaN → the first NaN, when the candidates sit in
    # different chunks (and the later-index candidate in an earlier chunk)
    n = 300_007
    parts, chunk = _plan(1, n)[:2]
    assert parts >= 4
    a = rng.integers(-3, 4, n).astype(np.float32)
    a[[chunk + 7, chunk - 1, 3 * chunk, 2 * chunk + 5]] = [9, 9, 9, -9]
    a[[3 * chunk + 1, 2 * chunk]] = -9
    x, t = pr.tensor(a), T(a)
    for f in (
        lambda v: v.argmax(),
        lambda v: v.argmin(),
        lambda v: v.max(0).indices,
        lambda v: v.min(0).indices,
    ):
        assert f(x).item() == f(t).item()
    assert x.argmax().item() == chunk - 1 and x.argmin().item() == 2 * chunk
    a[[3 * chunk + 2, chunk + 3]] = np.nan
    x, t = pr.tensor(a), T(a)
    for f in (lambda v: v.argmax(), lambda v: v.argmin(), lambda v: v.max(0).indices):
        assert f(x).item() == f(t).item() == chunk + 3
    for f in (
        lambda v: v.amax(0),
        lambda v: v.sum(),
        lambda v: v.var(),
        lambda v: v.logsumexp(0),
        lambda v: v.max(0).values,
    ):
        assert math.isnan(f(x).item())
    assert x.nansum().item() == np.nansum(a.astype(np.float64))  # small integers: exact
    assert R.LAST_PATH.startswith("split")


def test_split_welford_offset(rng, split_plan):
    # x = 1e4 + N(0, 1): E[x²] − E[x]² in f32 would lose everything (eps·1e8 ≈ 6 ≫ var ≈ 1).
    # Welford within a chunk and Chan's merge across chunks keep var to ~ulp(1e4)/σ ≈ 1e-3
    # relative (the rounding of the running mean, 2⁻¹⁰ at 1e4, against σ = 1).
    a = (1e4 + rng.standard_normal((2, 150_001))).astype(np.float32).astype(np.float64)
    x = pr.tensor(a.astype(np.float32))
    for name, ref in (("var", a.var(1, ddof=1)), ("std", a.std(1, ddof=1))):
        np.testing.assert_allclose(getattr(x, name)(1).numpy(), ref, rtol=2e-3)
    v, m = pr.var_mean(x, 1)
    np.testing.assert_allclose(m.numpy(), a.mean(1), rtol=4 * EPS32)
    np.testing.assert_allclose(v.numpy(), a.var(1, ddof=1), rtol=2e-3)
    assert R.LAST_PATH.startswith("split")


def test_split_force_small(rng, monkeypatch):
    # FORCE_SPLIT reaches both stages at small sizes: P=5 chunks of 256 over a (4, 1031) view
    monkeypatch.setattr(R, "FORCE_SPLIT", 5)
    a = rng.standard_normal((1031, 4))
    x = pr.tensor(a.astype(np.float32)).t()
    a = a.astype(np.float32).astype(np.float64).T
    np.testing.assert_allclose(x.sum(1).numpy(), a.sum(1), atol=1e-4)
    np.testing.assert_array_equal(x.argmin(1).numpy(), a.argmin(1))
    np.testing.assert_allclose(x.var(1).numpy(), a.var(1, ddof=1), rtol=1e-5)
    assert R.LAST_PATH == "split P=5 C=256"


def test_split_past_row_limit(rng, past_budget):
    # a row whose row kernel would pass the loop budget (lavapipe: past ~15.7M elements) must
    # split, on every adapter
    n = (past_budget() - 32) * 256 + 3
    a = rng.random(n, dtype=np.float32)
    a[n - 2] = 2.0
    x = pr.tensor(a)
    s = a.astype(np.float64).sum()
    parts, chunk = _plan(1, n)[:2]
    assert abs(x.sum().item() - s) <= (chunk + parts) * EPS32 * s
    assert x.argmax().item() == n - 2
    assert R.LAST_PATH.startswith("split")


def test_split_kernels_as_text():
    from pyrite.kernels.reduce import reduce_kernel, state_words

    part = reduce_kernel("var", "f16", "f32", ("f16",), ("f32",), 1, 2, "row", "partial")
    assert "part: array<S>" in part.wgsl and part.modes == "rw" and "part[u] = s;" in part.wgsl
    merge = reduce_kernel("argmax", "f32", "f32", ("i32",), ("i32",), 0, 0, "serial", "merge")
    assert "var<storage, read> part: array<S>" in merge.wgsl and merge.modes == "rw"
    assert "workgroupBarrier" not in merge.wgsl and "inp" not in merge.wgsl
    assert state_words("var", "f32") == 4 and state_words("argmax", "f32") == 2  # (n, m, q, shift)
    assert state_words("sum", "i32") == 1


@pytest.mark.parametrize("n", [100_000, 1_000_003])
def test_sum_of_alike_terms_is_compensated(n, rng):
    # a plain f32 loop drifts systematically when the terms are alike (0.1 × 100,000 came out
    # 5e-5 off); the compensated sum stays within a few ulps of float64, as torch's cascade sum
    v = np.float32(0.1)
    x = pr.full((n,), float(v))
    exact = np.float64(v) * n
    for got in (x.sum().item(), x.reshape(-1, 1).sum(0).item(), x.mean().item() * n):
        assert abs(got - exact) <= 4 * EPS32 * exact, (got, exact)
    a = rng.random((3, n), dtype=np.float32) + 1.0
    got = pr.tensor(a).sum(1).numpy()
    want = a.astype(np.float64).sum(1)
    assert np.all(np.abs(got - want) <= 8 * EPS32 * want)
    # inf and NaN still propagate through the compensation
    y = pr.tensor(np.array([1.0, np.inf, 2.0, -1.0], dtype=np.float32))
    assert y.sum().item() == np.inf and np.isnan(pr.tensor([np.inf, -np.inf, 1.0]).sum().item())
    assert np.isnan(pr.tensor([1.0, np.nan]).mean().item())
    assert pr.tensor([1.0, np.nan, 2.0]).nansum().item() == 3.0


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_extremes_of_bool_tensors():
    # the reduce kernel stored its i32 accumulator through a bool select (a WGSL build error)
    a = np.array([[True, False, True], [False, False, False]])
    t, p = torch.tensor(a), pr.tensor(a)
    for f in (
        lambda x: x.amax(0),
        lambda x: x.amin(1),
        lambda x: x.max(),
        lambda x: x.max(1).values,
        lambda x: x.T.min(0).values,
        lambda x: x.aminmax().max,
    ):
        got, want = f(p), f(t)
        assert got.dtype is pr.bool
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(TypeError, match="bool"):
        p.argmax()


def test_sweep_all_any_of_uint8_and_dim_empty_tuple():
    a = np.array([[1, 0, 2]], dtype=np.uint8)
    for f in (lambda x: x.all(), lambda x: x.any(1), lambda x: x.all(dim=())):
        want, got = f(torch.tensor(a)), f(pr.tensor(a))
        assert got.dtype is pr.uint8  # torch's legacy: uint8 in, uint8 out
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    f = np.array([[1.0, 0.0, np.nan]], dtype=np.float32)
    np.testing.assert_array_equal(  # dim=() tests each element alone
        pr.tensor(f).any(dim=()).numpy(), torch.tensor(f).any(dim=()).numpy()
    )


def test_sweep_norm_keeps_nan():
    # lavapipe's exp2(log2(NaN)) came out 0 or inf
    a = np.array([[np.inf, np.nan, 1.0], [0.5, np.nan, 2.0], [1.0, 2.0, 3.0]], dtype=np.float32)
    for p in (3.0, 0.5):
        got = pr.tensor(a).norm(p, dim=1).numpy()
        want = torch.tensor(a).norm(p, dim=1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(RuntimeError, match="inf norm on an empty"):
        pr.zeros(3, 0).norm(float("inf"))


def test_sweep_amax_of_empty_without_dim_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="reduction dim to be specified"):
        pr.zeros(2, 0).amax()
    with pytest.raises(IndexError, match="non-zero size"):
        pr.zeros(2, 0).amax(1)


def test_sweep_reductions_check_a_0d_dim():
    z = pr.tensor(2.0)
    for f in (lambda: z.logsumexp(2), lambda: z.sum(2), lambda: pr.mode(z, 2)):
        with pytest.raises(IndexError, match="out of range"):
            f()
    assert z.sum(-1).item() == 2.0 and z.logsumexp(0).item() == 2.0
    with pytest.raises(RuntimeError, match="2-tuple"):
        pr.ones(2, 2, 2).norm("fro", dim=(0, 1, 2))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_parity_scalar_loads(row, rng, monkeypatch):
    """The row kernel with its scalar loads only (R.VEC4 off): aligned rows of unit stride
    otherwise take the vec4 loads, which test_parity's row mode reaches."""
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    monkeypatch.setattr(R, "VEC4", False)
    check_row(row, rng)


@pytest.mark.parametrize("shape", [(6, 1024), (3, 40), (1, 65536)])
def test_vec4_row_loads(shape, rng, monkeypatch):
    """Rows of a multiple of 4, contiguous at an offset of 4: the row kernel (and the GPU plan's
    split partials, the long row) read vec4s. Sums within the compensated bound, the extremes
    and their first index with ties and a NaN placed in every lane of a vec4, std in f64's."""
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    full = rng.standard_normal((shape[0], shape[1] + 4)).astype(np.float32)
    a = full[:, 4:]
    x = pr.tensor(full)[:, 4:]  # (offset 4, rows N + 4 apart: multiples of 4)
    got = x.sum(1).numpy()
    np.testing.assert_allclose(got, a.astype(np.float64).sum(1), rtol=1e-6, atol=1e-5)
    assert "vec4<f32>" in str(next(reversed(R._plans.values())))
    b = a.copy()
    top = b.max() + 1
    for r in range(shape[0]):
        lane = r % 4
        b[r, lane], b[r, lane + 4 if shape[1] > 8 else lane] = top, top  # ties: the first index
    xb = pr.tensor(b)
    np.testing.assert_array_equal(xb.argmax(1).numpy(), b.argmax(1))
    np.testing.assert_array_equal(xb.amax(1).numpy(), b.max(1))
    c = a.copy()
    c[:, min(3, shape[1] - 1)] = np.nan
    assert np.isnan(pr.tensor(c).sum(1).numpy()).all()
    np.testing.assert_array_equal(
        pr.tensor(c).argmax(1).numpy(), np.full(shape[0], min(3, shape[1] - 1))
    )
    np.testing.assert_allclose(
        pr.tensor(a).std(1).numpy(), a.astype(np.float64).std(1, ddof=1), rtol=1e-5
    )


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.name in GPU_PLAN_ROWS + ("mean", "argmax")], ids=lambda r: r.name
)
@pytest.mark.parametrize("sg", [True, False], ids=["subgroups", "tree"])
def test_parity_gpu_row_units(row, sg, rng, monkeypatch):
    """The row kernel as a GPU plans it: short rows several to a workgroup (32 .. 128
    invocations a row, R.ROW_UNIT_ELEMS elements each at most), rows past the last of a
    workgroup idle through its barriers; one op of each state type (as the GPU split plan's);
    the states merged by subgroup operations (where the device has them) and by the tree."""
    monkeypatch.setattr(R, "SUBGROUPS", sg)
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    check_row(row, rng)


@pytest.mark.parametrize(
    "row", [r for r in SPLIT_ROWS if r.name in GPU_PLAN_ROWS + ("mean", "argmax", "prod")],
    ids=lambda r: r.name,
)  # fmt: skip
@pytest.mark.parametrize("sg", [True, False], ids=["subgroups", "tree"])
def test_wide_row_parity(row, sg, rng, monkeypatch):
    """The wide row kernel (R.WIDE: one workgroup of 1,024 invocations a row, four independent
    states each) on the split's rows, one op of each state type, merged by subgroup operations
    (where the device has them) and by the tree."""
    monkeypatch.setattr(R, "SUBGROUPS", sg)
    monkeypatch.setattr(R, "WIDE", True)
    check_row(row, rng)
    assert R.LAST_PATH == "row wide", R.LAST_PATH


def test_wide_row_ties_nans_and_tails(rng, monkeypatch):
    # ties go to the first index and NaN to the first NaN when the candidates sit in different
    # states of one invocation, in the tail loop, and in other invocations; lengths that leave
    # a tail of each size (vec4 loads where aligned, scalar ones in the strided view)
    monkeypatch.setattr(R, "WIDE", True)
    lanes, ilp = R.WIDE_LANES, R.WIDE_ILP
    for n in (ilp * lanes, 4 * ilp * lanes * 3 + 4, 50_001, 98_307):
        a = rng.integers(-3, 4, n).astype(np.float32)
        a[[n - 1, min(4 * lanes + 1, n - 4), 7, min(8 * lanes + 2, n - 6)]] = 9  # first: 7
        a[[n - 2, min(5 * lanes, n - 7), 11]] = -9  # the first: 11
        for x in (pr.tensor(a), pr.tensor(np.stack([a, -a], 1))[:, 0]):
            assert x.argmax().item() == 7 and x.argmin().item() == 11
            assert x.max(0).indices.item() == 7
            assert x.sum().item() == a.astype(np.float64).sum()  # small integers: exact
            assert R.LAST_PATH == "row wide"
        b = a.copy()
        nans = [n - 3, min(4 * lanes + 3, n - 8)]
        b[nans] = np.nan
        x = pr.tensor(b)
        assert x.argmax().item() == torch.from_numpy(b).argmax().item() == min(nans)
        assert math.isnan(x.amax().item()) and math.isnan(x.sum().item())
        assert x.nansum().item() == np.nansum(b.astype(np.float64))


@pytest.mark.parametrize("sum4", [True, False, None], ids=["sum4", "twosum-each", "rule"])
def test_wide_sum_and_mean_within_ulps_of_float64(sum4, rng, monkeypatch):
    """The f32 sum's vec4 step (R.SUM4: a vec4 added plainly, then one TwoSum; None takes it in
    the wide kernel) and the TwoSum an element: sums and means of long rows stay within 2 ulp
    of float64's (alike terms, cancelling terms, one large term among small ones; with the vec4
    step 16 ulp where the terms cancel: its error is relative to each vec4, measured up to 4.9
    ulp of the result, a plain running sum's ~1,000), inf and NaN pass through."""
    monkeypatch.setattr(R, "WIDE", True)
    monkeypatch.setattr(R, "SUM4", sum4)
    n = 98_304 + 4 * int(rng.integers(1, 500))
    cases = [
        np.full(n, 0.1, np.float32),
        rng.standard_normal(n).astype(np.float32),
        (rng.random(n) * 2 - 1).astype(np.float32) * np.float32(1e-3),
        np.concatenate([[3e7], rng.random(n - 1)]).astype(np.float32),
    ]
    for i, a in enumerate(cases):
        k = 16 if sum4 is not False and i in (1, 2) else 2  # (cancelling terms)
        want = a.astype(np.float64).sum()
        ulp = float(np.spacing(np.float32(abs(want))))
        got = pr.tensor(a).sum().item()
        assert R.LAST_PATH == "row wide"
        assert abs(got - want) <= k * ulp, (got, want)
        mean = pr.tensor(a).mean().item()
        assert abs(mean - want / n) <= k * float(np.spacing(np.float32(abs(want / n))))
    b = rng.standard_normal(n).astype(np.float32)
    b[n // 3] = np.inf
    assert pr.tensor(b).sum().item() == np.inf
    b[n // 2] = -np.inf
    assert math.isnan(pr.tensor(b).sum().item())


def test_wide_rule_on_a_gpu(rng, monkeypatch):
    # on a GPU the split's mid-sized rows take the wide kernel, longer ones and many outputs
    # the split; a device whose workgroups cannot hold 1,024 invocations, or whose loop budget
    # the wide kernel's loops would pass, never the wide one (the one-pass split, which takes
    # both where the state is all f32, off: test_fused_rule_on_a_gpu)
    monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    monkeypatch.setattr(R, "FUSED", False)
    for n, path in ((98_304, "row wide"), (R.WIDE_MAX_LEN + 1, "split")):
        a = rng.integers(-3, 4, n).astype(np.float32)
        assert pr.tensor(a).sum().item() == a.astype(np.float64).sum()  # small integers: exact
        assert R.LAST_PATH.startswith(path), (n, R.LAST_PATH)
    assert R._wide(1, R.SPLIT_MIN_LEN, 1) and R._wide(8, R.WIDE_MAX_LEN, 3)
    assert not R._wide(R.SPLIT_MAX_OUTPUTS, 98_304, 1)
    assert not R._wide(1, R.SPLIT_MIN_LEN - 1, 1)
    monkeypatch.setattr(R, "WIDE", False)
    assert not R._wide(1, 98_304, 1) and R._split_plan(1, 98_304)
    monkeypatch.setattr(R, "WIDE", None)
    budget = R.reduce_loop_iterations("row", 98_304)
    monkeypatch.setattr(R, "max_loop_iterations", lambda: budget - 1)
    assert not R._wide(1, 98_304, 1)
    monkeypatch.setattr(R, "max_loop_iterations", lambda: budget)
    assert R._wide(1, 98_304, 1)
    dev = pr.backend.current()
    monkeypatch.setitem(dev.limits, "max-compute-invocations-per-workgroup", 256)
    assert not R._wide(1, 98_304, 1)


def test_subgroup_merge_as_text():
    """With subgroups the row kernel shuffles every field of its state (the compensated sum's
    two, argmax's value and index) and waits at one barrier; Dawn's spelling starts with
    `enable subgroups;`; serial mode ignores it."""
    from pyrite.kernels.reduce import reduce_kernel

    k = reduce_kernel("sum", "f32", "f32", ("f32",), ("f32",), 1, 1, "row", sg=1).wgsl
    assert "subgroupShuffleXor(s.a," in k and "subgroupShuffleXor(s.c," in k
    assert k.count("workgroupBarrier") == 1 and "subgroup_size" in k
    k = reduce_kernel("argmax", "f32", "f32", ("i32",), ("i32",), 1, 1, "row", sg=2).wgsl
    assert k.startswith("enable subgroups;") and "subgroupShuffleXor(s.i," in k
    k = reduce_kernel("sum", "f32", "f32", ("f32",), ("f32",), 1, 1, "serial", sg=1).wgsl
    assert "subgroup" not in k
    # a wide row (1,024 invocations): masks stay below WGSL's largest subgroup (Tint refuses 128)
    k = reduce_kernel("sum", "f32", "f32", ("f32",), ("f32",), 0, 1, "row", "full", 1, 1, 1024, 4, sg=2).wgsl  # fmt: skip
    masks = {int(m) for m in re.findall(r"subgroupShuffleXor\(s\.a, (\d+)u\)", k)}
    assert masks == {1, 2, 4, 8, 16, 32, 64}


@pytest.mark.parametrize("offset", [1e4, -3e4, 1e5])
def test_var_mean_of_data_far_from_zero(offset, rng):
    """var / std / var_mean of data sitting far from 0 (spread 0.5 around 1e4 .. 1e5: raw inputs
    to a first BatchNorm), serial, row and split plans: the mean within one rounding of float64's
    (as torch CPU's double sums give), the variance within 1e-5 relative; BatchNorm2d's output
    within what x - mean can be in f32 (x's own ulp over the std). An unshifted Welford state
    carried 1e4's ulp into every deviation (mean ~5 ulp off, BatchNorm 10x torch's error)."""
    x = (rng.standard_normal((16, 3, 9, 9)) * 0.5 + offset).astype(np.float32)
    x64 = x.astype(np.float64)
    ulp = np.spacing(np.float32(abs(offset) * 1.01))
    want_m, want_v = x64.mean((0, 2, 3)), x64.var((0, 2, 3), ddof=1)
    for mode in ("serial", "row", None):
        R.FORCE_MODE = mode
        try:
            v, m = pr.var_mean(pr.tensor(x), dim=(0, 2, 3))
            s = pr.tensor(x).std(dim=(0, 2, 3))
        finally:
            R.FORCE_MODE = None
        assert np.abs(m.numpy() - want_m).max() <= ulp, mode
        np.testing.assert_allclose(v.numpy(), want_v, rtol=1e-5)
        np.testing.assert_allclose(s.numpy(), np.sqrt(want_v), rtol=1e-5)
    y = pr.nn.BatchNorm2d(3)(pr.tensor(x)).numpy()
    mu, var = x64.mean((0, 2, 3), keepdims=True), x64.var((0, 2, 3), keepdims=True)
    ref = (x64 - mu) / np.sqrt(var + 1e-5)
    assert np.abs(y - ref).max() <= 2 * ulp / np.sqrt(var.min()) + 1e-5
    # one long row through the split plan (chunks merged across shifts)
    z = (rng.standard_normal(300_001) * 0.5 + offset).astype(np.float32)
    v, m = pr.var_mean(pr.tensor(z))
    assert abs(float(m) - z.astype(np.float64).mean()) <= ulp
    np.testing.assert_allclose(float(v), z.astype(np.float64).var(ddof=1), rtol=1e-5)


# ---- one-pass splits (R.FUSED): the partial states and their merge in one dispatch ----------
FUSED_ROWS = ("sum", "nansum", "mean", "prod", "amax", "amin", "std_mean", "logsumexp")


def _scratch_clean(dev):
    """The fused scratch's slots all FUSED_EMPTY and its counters 0 (so the next fused
    reduction starts from nothing), read straight from the device."""
    scratch, words = R._fused_scratch(dev)
    data = np.frombuffer(dev.read(scratch.buffer, 0, scratch.buffer.size), np.uint32)
    n = R.FUSED_MAX_UNITS * R.FUSED_WORDS
    return bool((data[:n] == R.FUSED_EMPTY).all() and (data[n : n + R.FUSED_MAX_UNITS] == 0).all())


@pytest.mark.parametrize(
    "row", [r for r in SPLIT_ROWS if r.name in FUSED_ROWS], ids=lambda r: r.name
)
@pytest.mark.parametrize("sg", [True, False], ids=["subgroups", "tree"])
def test_fused_parity(row, sg, rng, monkeypatch):
    """Every reduction whose state is all f32 on the split's rows in one pass (the last
    workgroup of each output merges its chunks' states), both merges; the scratch is left
    clean for the next."""
    monkeypatch.setattr(R, "FUSED", True)
    monkeypatch.setattr(R, "SUBGROUPS", sg)
    check_row(row, rng)
    assert R.LAST_PATH.startswith("fused"), R.LAST_PATH
    assert _scratch_clean(pr.backend.current())


def test_fused_only_for_f32_states(rng, monkeypatch):
    # (value, index), bool and integer states keep the split (or the wide kernel, on a GPU):
    # FUSED_EMPTY is an f32 NaN pattern
    monkeypatch.setattr(R, "FUSED", True)
    a = rng.integers(-3, 4, 70_001).astype(np.float32)
    x = pr.tensor(a)
    assert x.argmax().item() == int(np.argmax(a)) and not R.LAST_PATH.startswith("fused")
    assert bool(x.ne(0).any()) and not R.LAST_PATH.startswith("fused")
    assert pr.tensor(a.astype(np.int32)).sum().item() == int(a.sum())
    assert not R.LAST_PATH.startswith("fused")
    assert x.sum().item() == a.astype(np.float64).sum() and R.LAST_PATH.startswith("fused")


def test_fused_specials_and_many_outputs(rng, monkeypatch):
    # NaN and inf pass the handoff (a NaN state word is stored canonical, never FUSED_EMPTY:
    # a payload NaN of all ones in the input included), several outputs each merged by their
    # own last workgroup, back to back in one batch before any read
    monkeypatch.setattr(R, "FUSED", True)
    n = 50_003
    a = rng.standard_normal((3, n)).astype(np.float32)
    a[0, n // 2] = np.inf
    a[1, 17] = np.frombuffer(np.uint32(0xFFFFFFFF).tobytes(), np.float32)[0]
    x = pr.tensor(a)
    outs = [x.sum(1), x.amax(1), x.mean(1), x.std(1), x[2].sum(), x[2].amin()]
    assert all(R._fused_plan(3, n, "sum", "f32") for _ in (0,))
    s, m, mu, sd, s2, mn = (o.numpy() for o in outs)
    assert s[0] == np.inf and math.isnan(s[1]) and math.isnan(m[1]) and m[0] == np.inf
    assert math.isnan(mu[1]) and math.isnan(sd[0]) and math.isnan(sd[1])
    want = a[2].astype(np.float64)
    assert abs(s[2] - want.sum()) <= 8 * EPS32 * np.abs(want).sum()
    assert abs(s2 - want.sum()) <= 8 * EPS32 * np.abs(want).sum()
    assert mn == a[2].min() and m[2] == a[2].max()
    assert abs(sd[2] - want.std(ddof=1)) <= 1e-5 * want.std()
    assert _scratch_clean(pr.backend.current())


def test_fused_rule_on_a_gpu(rng, monkeypatch):
    # on a GPU the split's and the wide kernel's rows take one pass where the state is all
    # f32, within the scratch's units; many outputs, short rows, other states, FUSED False:
    # the paths before
    monkeypatch.setattr(R, "_cpu_adapter", lambda: False)
    parts, chunk = R._fused_plan(1, 98_304, "sum", "f32")
    assert parts * chunk >= 98_304 and chunk % 256 == 0 and chunk >= R.FUSED_MIN_CHUNK
    assert parts == 98_304 // R.FUSED_MIN_CHUNK
    assert R._fused_plan(1, 1 << 26, "sum", "f32")[0] == R.FUSED_TARGET_WORKGROUPS
    assert R._fused_plan(4, 1 << 20, "var", "f32")[0] == R.FUSED_TARGET_WORKGROUPS // 4
    assert R._fused_plan(1, R.SPLIT_MIN_LEN - 1, "sum", "f32") is None
    assert R._fused_plan(R.SPLIT_MAX_OUTPUTS, 1 << 20, "sum", "f32") is None
    assert R._fused_plan(1, 1 << 20, "argmax", "f32") is None
    a = rng.integers(-3, 4, 98_304).astype(np.float32)
    assert pr.tensor(a).sum().item() == a.astype(np.float64).sum()  # small integers: exact
    assert R.LAST_PATH.startswith("fused")
    monkeypatch.setattr(R, "WIDE", True)  # (a test forcing the wide kernel gets it)
    assert R._fused_plan(1, 98_304, "sum", "f32") is None
    monkeypatch.setattr(R, "WIDE", None)
    monkeypatch.setattr(R, "FUSED", False)
    assert R._fused_plan(1, 98_304, "sum", "f32") is None
    monkeypatch.setattr(R, "FUSED", None)
    parts, chunk = R._fused_plan(1, 1 << 20, "sum", "f32")
    # its worst case: the chunk's loops, the merge and a full wait for each state word
    budget = R.fused_loop_iterations(chunk, parts, R.state_words("sum", "f32"))
    monkeypatch.setattr(R, "max_loop_iterations", lambda: budget - 1)  # (one past it)
    assert R._fused_plan(1, 1 << 20, "sum", "f32") is None
    monkeypatch.setattr(R, "max_loop_iterations", lambda: budget)
    assert R._fused_plan(1, 1 << 20, "sum", "f32") == (parts, chunk)


def test_new_loops_within_lavapipes_budget():
    # the fused stage's worst case for the largest state it takes (the spins of every word
    # included), and a staged scan unit's, inside lavapipe's ~65,535 iterations an invocation
    from pyrite.kernels.reduce import SCAN_STAGED, scan_loop_iterations

    worst = R.fused_loop_iterations(R.SPLIT_MIN_CHUNK * 4, R.FUSED_MAX_UNITS, R.FUSED_WORDS)
    assert worst < 65_535 - 1_000, worst
    assert scan_loop_iterations("row", SCAN_STAGED) < 64


def test_fused_under_compile(rng, monkeypatch):
    # a compiled step replays the fused dispatch with the device's scratch: right every call
    monkeypatch.setattr(R, "FUSED", True)

    @pr.compile
    def loss(x, w):
        return (x * w).sum()

    for _ in range(3):
        a = rng.standard_normal(70_000).astype(np.float32)
        w = rng.standard_normal(70_000).astype(np.float32)
        want = (a.astype(np.float64) * w).sum()
        got = loss(pr.tensor(a), pr.tensor(w)).item()
        assert abs(got - want) <= 8 * EPS32 * np.abs(a.astype(np.float64) * w).sum()
    assert _scratch_clean(pr.backend.current())
