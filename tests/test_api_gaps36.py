"""Session 36's gaps from the ported-scripts hunt, each against torch CPU:
torch.multiprocessing (spawn, tensors crossing processes by value), torch.autograd.gradgradcheck,
torch.cuda.memory_stats and kin, and F.interpolate's bilinear / bicubic / lanczos on uint8
images (PyTorch's fixed-point results, exactly)."""

from __future__ import annotations

import os
import pickle
import re
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.backend.pool import size_class
from tests.oracle import older_torch_mark, skip_older_torch


# ---- torch.multiprocessing ---------------------------------------------------------------------
def test_multiprocessing_namespace():
    import multiprocessing

    import torch.multiprocessing as tmp

    import pyrite.multiprocessing as mp

    assert pr.multiprocessing is mp
    for name in multiprocessing.__all__:  # the standard library's API, re-exported
        assert hasattr(mp, name), name
    for name in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException"):
        assert hasattr(mp, name), name
    assert mp.get_all_sharing_strategies() == tmp.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == tmp.get_sharing_strategy()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(AssertionError, match="invalid sharing strategy"):
        mp.set_sharing_strategy("shared_gpu")
    with pytest.raises(AssertionError):
        tmp.set_sharing_strategy("shared_gpu")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "uint8", "int32", "bool"])
def test_tensor_pickles_by_value(rng, dtype):
    shape = (3, 1, 7)
    a = rng.standard_normal(shape) * 50
    t = torch.tensor(a).to(getattr(torch, dtype))
    x = pr.tensor(a).to(getattr(pr, dtype))
    for tv, xv in ((t, x), (t.transpose(0, 2)[1:], x.transpose(0, 2)[1:])):
        ty, xy = pickle.loads(pickle.dumps(tv)), pickle.loads(pickle.dumps(xv))
        assert tuple(xy.shape) == tuple(ty.shape) and xy.dtype == xv.dtype
        np.testing.assert_array_equal(xy.float().numpy(), ty.float().numpy())


def test_pickled_tensor_keeps_requires_grad(rng):
    a = rng.standard_normal((2, 5)).astype(np.float32)
    t, x = torch.tensor(a, requires_grad=True), pr.tensor(a, requires_grad=True)
    for tv, xv in ((t, x), (t * 2, x * 2)):  # a leaf, then a non-leaf: both arrive as leaves
        ty, xy = pickle.loads(pickle.dumps(tv)), pickle.loads(pickle.dumps(xv))
        assert (xy.requires_grad, xy.is_leaf) == (ty.requires_grad, ty.is_leaf) == (True, True)
        np.testing.assert_array_equal(xy.detach().numpy(), ty.detach().numpy())
    # through multiprocessing's pickler (queues, spawn's arguments) a non-leaf is refused, as
    # torch.multiprocessing's reducer refuses it
    # (importing pyrite, as torch, imports its multiprocessing module, which registers it)

    for v in (t * 2, x * 2):
        with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf"):
            ForkingPickler.dumps(v)
    y = pickle.loads(bytes(ForkingPickler.dumps(x)))
    assert y.requires_grad and np.array_equal(y.detach().numpy(), a)


def test_spawn_two_processes_and_a_failure(rng):
    """Two spawned processes get a tensor by value and send back what they received and a
    result computed on their own device; a process that raises is named in the parent's
    error (spawn's start method imports pyrite in each child: a few seconds)."""
    import mp_worker_36 as worker

    import pyrite.multiprocessing as mp

    a = rng.standard_normal((3, 5)).astype(np.float32)
    x = pr.tensor(a, requires_grad=True)
    q = mp.get_context("spawn").SimpleQueue()
    assert mp.spawn(worker.scale_and_report, args=(x, q), nprocs=2) is None
    got = sorted((q.get() for _ in range(2)), key=lambda r: r[0])
    assert [r[0] for r in got] == [0, 1]
    pids = {r[1] for r in got}
    assert len(pids) == 2 and os.getpid() not in pids
    for i, _, xi, shape, dtype, requires_grad, y in got:
        assert (shape, dtype, requires_grad) == ((3, 5), "pyrite.float32", True)
        assert xi.requires_grad and xi.dtype == pr.float32
        np.testing.assert_array_equal(xi.detach().numpy(), a)
        np.testing.assert_array_equal(y.numpy(), a * np.float32(i + 1) + np.float32(1))

    ctx = mp.spawn(worker.fail_in_one, args=(1,), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    with pytest.raises(mp.ProcessRaisedException, match="Process 1 terminated") as err:
        while not ctx.join():
            pass
    assert err.value.error_index == 1
    assert "ValueError: worker 1 failed on purpose" in str(err.value)


# ---- torch.autograd.gradgradcheck ------------------------------------------------------------
def _cube(lib, wrong: bool):
    """x³ as a custom Function whose backward is right; with `wrong`, its first derivative is
    still right but not its own derivative (3x·x.detach(): d/dx gives 3x, not 6x)."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * (x.detach() if wrong else x)

    return Cube.apply


_SECOND_ORDER = [
    ("mul_sin_sum", lambda lib: lambda a, b: (a * b.sin()).sum(1), [(3, 5), (3, 5)]),
    ("tanh", lambda lib: lambda a: a.tanh(), [(7,)]),
    ("matmul", lambda lib: lambda a, w: (a @ w) ** 2, [(2, 3), (3, 5)]),
    ("two_outputs", lambda lib: lambda a: (a.exp(), a * a), [(1, 4)]),
    ("softmax", lambda lib: lambda a: lib.nn.functional.softmax(a, -1), [(2, 5)]),
    ("cube_fn", lambda lib: _cube(lib, False), [(5,)]),
]


@pytest.mark.parametrize("name, make, shapes", _SECOND_ORDER, ids=[c[0] for c in _SECOND_ORDER])
def test_gradgradcheck_passes_as_torch(rng, name, make, shapes):
    arrays = [rng.standard_normal(s) * 0.8 for s in shapes]
    t_in = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    p_in = [pr.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]
    assert torch.autograd.gradgradcheck(make(torch), t_in)
    assert pr.autograd.gradgradcheck(make(pr), p_in)


def test_gradgradcheck_fails_on_a_wrong_second_derivative(rng):
    from pyrite.autograd.gradcheck import GradcheckError

    from pyrite.autograd import gradcheck, gradgradcheck

    a = rng.standard_normal(6) + 0.5 * np.sign(rng.standard_normal(6))
    t = torch.tensor(a, requires_grad=True)
    x = pr.tensor(a.astype(np.float32), requires_grad=True)
    # the first derivative is right for both; the second wrong for both
    assert torch.autograd.gradcheck(_cube(torch, True), (t,))
    assert gradcheck(_cube(pr, True), (x,))
    assert not torch.autograd.gradgradcheck(_cube(torch, True), (t,), raise_exception=False)
    assert not gradgradcheck(_cube(pr, True), (x,), raise_exception=False)
    with pytest.raises(GradcheckError, match="Jacobian mismatch for input 0"):
        gradgradcheck(_cube(pr, True), (x,))
    assert issubclass(GradcheckError, RuntimeError)  # (torch's is one too)
    # given grad_outputs (not requiring grad: only the inputs' second derivatives are checked)
    go = rng.standard_normal(6).astype(np.float32)
    assert gradgradcheck(_cube(pr, False), (x,), pr.tensor(go))
    assert not gradgradcheck(_cube(pr, True), (x,), pr.tensor(go), raise_exception=False)


def test_gradcheck_needs_an_input_that_requires_grad():
    msg = "at least one input tensor to require gradient"
    with pytest.raises(ValueError, match=msg):
        torch.autograd.gradcheck(lambda v: v * 2, (torch.ones(3, dtype=torch.float64),))
    with pytest.raises(ValueError, match=msg):
        pr.autograd.gradcheck(lambda v: v * 2, (pr.ones(3),))
    with pytest.raises(ValueError, match=msg):
        pr.autograd.gradgradcheck(lambda v: v * 2, (pr.ones(3),))


# ---- torch.cuda.memory_stats and kin ---------------------------------------------------------
def _torch_documented_keys() -> set:
    """The key names torch.cuda.memory_stats documents (expanding its {a,b} patterns), and
    those torch.cuda.memory_summary reads (its docstring says "allocated.*" for the count of
    allocations; the allocator's key, which the summary reads, is "allocation.*")."""
    import inspect

    keys = set()
    summary = inspect.getsource(torch.cuda.memory_summary)
    for metric in re.findall(r'\("([a-z_]+)", "[A-Za-z ]+", _format_', summary):
        keys.update(f"{metric}.all.{f}" for f in ("current", "peak", "allocated", "freed"))
    for pat in re.findall(r'``"([a-z_.{},]+)"``', torch.cuda.memory_stats.__doc__):
        names = [""]
        for part in pat.split("."):
            alts = part[1:-1].split(",") if part.startswith("{") else [part]
            names = [f"{n}.{a}" if n else a for n in names for a in alts]
        keys.update(names)
    return keys


def test_memory_stats_keys_are_torchs():
    stats = pr.cuda.memory_stats()
    assert list(stats) == sorted(stats)  # torch's OrderedDict, sorted by key
    assert set(stats) <= _torch_documented_keys()
    for key in ("allocated_bytes", "reserved_bytes", "segment"):
        for f in ("current", "peak", "allocated", "freed"):
            assert f"{key}.all.{f}" in stats
    assert "allocation.all.current" in stats
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        assert key in stats
    assert all(isinstance(v, int) for v in stats.values())
    # the nested dict, flattened as torch flattens it, is memory_stats
    nested = pr.cuda.memory_stats_as_nested_dict()
    flat = {}

    def walk(prefix, obj):
        for k, v in obj.items():
            name = f"{prefix}.{k}" if prefix else k
            walk(name, v) if isinstance(v, dict) else flat.__setitem__(name, v)

    walk("", nested)
    assert flat == dict(pr.cuda.memory_stats())
    assert pr.accelerator.memory_stats() == pr.cuda.memory_stats()


def test_memory_stats_follow_the_pool(rng):
    pr.synchronize()
    n = int(rng.integers(1000, 5000))
    s0 = pr.cuda.memory_stats()
    assert s0["allocated_bytes.all.current"] == pr.cuda.memory_allocated()
    assert s0["allocated_bytes.all.peak"] == pr.cuda.max_memory_allocated()
    assert s0["reserved_bytes.all.current"] == pr.cuda.memory_reserved()
    assert s0["reserved_bytes.all.peak"] == pr.cuda.max_memory_reserved()
    x = pr.empty(n)  # one buffer of n float32s, rounded up to its size class
    s1 = pr.cuda.memory_stats()
    size = size_class(4 * n)
    assert s1["allocated_bytes.all.current"] == s0["allocated_bytes.all.current"] + size
    assert s1["allocated_bytes.all.allocated"] == s0["allocated_bytes.all.allocated"] + size
    assert s1["allocation.all.current"] == s0["allocation.all.current"] + 1
    del x
    s2 = pr.cuda.memory_stats()
    assert s2["allocated_bytes.all.current"] == s0["allocated_bytes.all.current"]
    assert s2["allocated_bytes.all.freed"] == s1["allocated_bytes.all.freed"] + size
    assert s2["allocation.all.current"] == s0["allocation.all.current"]
    assert s2["allocated_bytes.all.peak"] >= s1["allocated_bytes.all.current"]
    # empty_cache destroys the pooled buffers: reserved falls to what tensors hold
    pr.cuda.empty_cache()
    s3 = pr.cuda.memory_stats()
    pooled = s2["reserved_bytes.all.current"] - s3["reserved_bytes.all.current"]
    assert s3["reserved_bytes.all.current"] == s3["allocated_bytes.all.current"]
    assert s3["reserved_bytes.all.freed"] - s2["reserved_bytes.all.freed"] == pooled > 0
    assert s3["num_device_free"] - s2["num_device_free"] == (
        s2["segment.all.current"] - s3["segment.all.current"]
    )
    for s in (s0, s1, s2, s3):  # current = handed out - given back
        a = "allocated_bytes.all."
        assert s[a + "current"] == s[a + "allocated"] - s[a + "freed"]


def test_memory_stats_resets():
    keep = pr.ones(777)
    big = pr.empty(100_000)
    del big
    pr.cuda.reset_peak_memory_stats()
    s = pr.cuda.memory_stats()
    for key in ("allocated_bytes", "reserved_bytes", "segment"):
        assert s[f"{key}.all.peak"] == s[f"{key}.all.current"]
    pr.cuda.reset_accumulated_memory_stats()
    s = pr.cuda.memory_stats()
    for key in ("allocated_bytes", "reserved_bytes", "segment"):
        assert s[f"{key}.all.allocated"] == s[f"{key}.all.freed"] == 0
    for key in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        assert s[key] == 0
    assert s["allocated_bytes.all.current"] == pr.cuda.memory_allocated() > 0
    # an OutOfMemoryError counts (a tensor past the largest binding)
    limit = pr.backend.current().pool.max_binding
    with pytest.raises(pr.OutOfMemoryError):
        pr.empty(limit // 4 + 1)
    assert pr.cuda.memory_stats()["num_ooms"] == 1
    del keep


def test_memory_summary_and_devices():
    text = pr.cuda.memory_summary()
    s = pr.cuda.memory_stats()
    for label in (
        "Allocated memory",
        "GPU reserved memory",
        "GPU reserved segments",
    ):
        assert f"| {label}" in text
    assert f"OOMs: {s['num_ooms']}" in text and f"alloc retries: {s['num_alloc_retries']}" in text
    row = next(line for line in text.splitlines() if line.startswith("| GPU reserved segments"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[1]) == s["segment.all.current"]  # (counts below 750,000 print whole)
    assert pr.cuda.memory_summary(abbreviated=True) == text
    for dev in (None, 0, "cuda", "cuda:0", pr.device("cuda:0")):
        assert isinstance(pr.cuda.memory_stats(dev), dict)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        pr.cuda.memory_stats(1)


# ---- F.interpolate on uint8 images -------------------------------------------------------------
# Tolerance 0: torch's CPU resizes uint8 in fixed point (int16 weights, an int32 sum, each
# separable pass rounded and clamped to [0, 255]; the AVX2 path for C <= 4 and the generic one
# for C > 4 give the same numbers), and pyrite computes those integers: measured equal on every
# case below (and 376 more in development). torch's float path rounded would differ by 1
# (bilinear) to ~25 (bicubic's clamped overshoot) — not a tolerance to allow.
_SIZES = [  # (H, W) -> (OH, OW): up, down, mixed, 1s, primes, unchanged dims
    ((7, 9), (5, 13)),
    ((1, 5), (3, 1)),
    ((13, 11), (4, 29)),
    ((16, 16), (32, 8)),
    ((31, 3), (2, 2)),
    ((97, 37), (7, 101)),
    ((9, 9), (9, 4)),
    ((1, 1), (5, 4)),
]
_NO_LANCZOS = "lacks F.interpolate's mode='lanczos' (antialias is bilinear and bicubic only)"
_MODES = [
    ("bilinear", False, False),
    ("bilinear", False, True),
    ("bilinear", True, False),
    ("bilinear", True, True),
    ("bicubic", False, False),
    ("bicubic", False, True),
    ("bicubic", True, False),
    ("bicubic", True, True),
    pytest.param("lanczos", True, False, marks=older_torch_mark(_NO_LANCZOS)),
]


def _both(x_np, **kw):
    t = TF.interpolate(torch.from_numpy(x_np), **kw).numpy()
    p = F.interpolate(pr.tensor(x_np), **kw)
    assert p.dtype == pr.uint8 and tuple(p.shape) == t.shape
    return p.numpy(), t


@pytest.mark.parametrize("mode, antialias, align", _MODES)
def test_interpolate_uint8_matches_torch(rng, mode, antialias, align):
    for c in (1, 3, 5):
        for (h, w), size in _SIZES:
            x = rng.integers(0, 256, (2, c, h, w), dtype=np.uint8)
            kw = dict(size=size, mode=mode, antialias=antialias, align_corners=align)
            p, t = _both(x, **kw)
            np.testing.assert_array_equal(p, t, err_msg=f"C={c} {(h, w)} -> {size}")


@pytest.mark.parametrize("mode, antialias, align", _MODES)
def test_interpolate_uint8_scale_factor(rng, mode, antialias, align):
    x = rng.integers(0, 256, (1, 3, 23, 19), dtype=np.uint8)
    for sf in ((0.37, 2.5), (1.7, 0.3), 3.0, (0.5, 1.0)):
        for rsf in (None, True):
            kw = dict(scale_factor=sf, mode=mode, antialias=antialias, align_corners=align)
            p, t = _both(x, recompute_scale_factor=rsf, **kw)
            np.testing.assert_array_equal(p, t, err_msg=f"scale_factor={sf}")


def test_interpolate_uint8_views_and_split_windows(rng, loop_budget):
    # a channels-last image viewed NCHW, a sliced view, and windows past a small loop budget
    # (the antialiased window split across dispatches that add into the sum)
    base = rng.integers(0, 256, (2, 19, 23, 3), dtype=np.uint8)
    t_view = torch.from_numpy(base).permute(0, 3, 1, 2)
    p_view = pr.tensor(base).permute(0, 3, 1, 2)
    for tv, pv in ((t_view, p_view), (t_view[:, 1:, 2:, ::2], p_view[:, 1:, 2:, ::2])):
        for kw in (
            dict(size=(5, 31), mode="bilinear", antialias=True),
            dict(size=(40, 3), mode="bicubic", antialias=False, align_corners=True),
        ):
            np.testing.assert_array_equal(F.interpolate(pv, **kw).numpy(), TF.interpolate(tv, **kw))
    loop_budget(8)
    x = rng.integers(0, 256, (1, 2, 150, 211), dtype=np.uint8)
    for mode in ("bilinear", "bicubic", "lanczos"):
        if mode == "lanczos":
            skip_older_torch(_NO_LANCZOS)
        p, t = _both(x, size=(3, 4), mode=mode, antialias=True)
        np.testing.assert_array_equal(p, t)


def test_interpolate_uint8_same_size_and_refusals(rng):
    x = rng.integers(0, 256, (1, 2, 6, 7), dtype=np.uint8)
    px = pr.tensor(x)
    y = F.interpolate(px, size=(6, 7), mode="bilinear")
    np.testing.assert_array_equal(y.numpy(), x)
    y.add_(1)  # a new tensor (torch copies), not a view of the input
    np.testing.assert_array_equal(px.numpy(), x)
    # modes torch has no uint8 kernel for, and other integer dtypes: both refuse
    for arr, kw in (
        (x[:, :, 0], dict(size=9, mode="linear")),
        (x.astype(np.int32), dict(size=(3, 3), mode="bilinear")),
        (x.astype(np.int32), dict(size=(3, 3), mode="bicubic")),
    ):
        with pytest.raises(RuntimeError):
            TF.interpolate(torch.from_numpy(arr), **kw)
        with pytest.raises(RuntimeError, match="not implemented"):
            F.interpolate(pr.tensor(arr), **kw)


# ---- other names ported scripts hit ------------------------------------------------------------
def test_multinomial_matches_torch(rng):
    from pyrite.distributions import Multinomial

    p = rng.random((3, 5)).astype(np.float32)
    p[1, 2] = 0.0  # a category that never comes up
    n = 7
    t, m = torch.distributions.Multinomial(n, torch.tensor(p)), Multinomial(n, pr.tensor(p))
    counts = t.sample((4,))
    np.testing.assert_allclose(
        m.log_prob(pr.tensor(counts.numpy())).numpy(), t.log_prob(counts).numpy(), rtol=1e-5
    )
    for name in ("mean", "variance", "probs"):
        np.testing.assert_allclose(getattr(m, name).numpy(), getattr(t, name).numpy(), rtol=1e-5)
    np.testing.assert_allclose(m.entropy().numpy(), t.entropy().numpy(), rtol=1e-5)
    tl = torch.distributions.Multinomial(n, logits=torch.tensor(np.log(p + 0.1)))
    ml = Multinomial(n, logits=pr.tensor(np.log(p + 0.1)))
    np.testing.assert_allclose(
        ml.log_prob(pr.tensor(counts.numpy())).numpy(), tl.log_prob(counts).numpy(), rtol=1e-5
    )
    assert m.batch_shape == (3,) and m.event_shape == (5,)
    assert m.expand((2, 3)).batch_shape == (2, 3)
    # samples: counts summing to n, category 2 of row 1 never drawn, means within 5 sigma
    pr.manual_seed(0)
    s = m.sample((4000,))
    assert tuple(s.shape) == (4000, 3, 5) and s.dtype == pr.float32
    a = s.numpy()
    assert (a.sum(-1) == n).all() and (a[:, 1, 2] == 0).all()
    sigma = np.sqrt(t.variance.numpy() / len(a))
    assert (np.abs(a.mean(0) - t.mean.numpy()) <= 5 * sigma + 1e-6).all()
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        Multinomial(2.5, pr.tensor(p))


def test_negative_binomial_matches_torch(rng):
    from pyrite.distributions import NegativeBinomial

    count = (rng.random(4) * 5 + 0.5).astype(np.float32)
    probs = (rng.random(4) * 0.8 + 0.05).astype(np.float32)
    value = rng.integers(0, 12, (3, 4)).astype(np.float32)
    for kw_t, kw_p in (
        (dict(probs=torch.tensor(probs)), dict(probs=pr.tensor(probs))),
        (dict(logits=torch.tensor(np.log(probs))), dict(logits=pr.tensor(np.log(probs)))),
    ):
        t = torch.distributions.NegativeBinomial(torch.tensor(count), **kw_t)
        m = NegativeBinomial(pr.tensor(count), **kw_p)
        np.testing.assert_allclose(
            m.log_prob(pr.tensor(value)).numpy(),
            t.log_prob(torch.tensor(value)).numpy(),
            rtol=2e-5,
            atol=2e-5,
        )
        for name in ("mean", "variance", "mode", "probs", "logits"):
            np.testing.assert_allclose(
                getattr(m, name).numpy(), getattr(t, name).numpy(), rtol=1e-5, atol=1e-6
            )
    pr.manual_seed(1)
    s = m.sample((6000,)).numpy()
    assert s.shape == (6000, 4) and (s >= 0).all() and (s == np.round(s)).all()
    sigma = np.sqrt(t.variance.numpy() / len(s))
    assert (np.abs(s.mean(0) - t.mean.numpy()) <= 5 * sigma).all()
    assert m.expand((2, 4)).batch_shape == (2, 4)


def test_small_porting_names():
    x = pr.randn(3)
    assert x.to_dense() is x and x.to_dense(pr.float16).dtype == pr.float16
    assert x.const_data_ptr() == x.data_ptr()
    assert x.record_stream(pr.cuda.current_stream()) is None
    assert pr.nn.parameter.Parameter is pr.nn.Parameter  # (as an attribute, without an import)
    assert pr.get_device_module("cuda:0") is pr.cuda
    assert pr.get_device_module(pr.device("cpu")) is pr.cpu
    assert pr.get_device_module() is (pr.cuda if pr.cuda.is_available() else pr.cpu)
    with pytest.raises(RuntimeError, match="does not have a corresponding module"):
        torch.get_device_module("meta")
    with pytest.raises(RuntimeError, match="does not have a corresponding module"):
        pr.get_device_module("meta")
