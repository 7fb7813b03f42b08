"""Process-wide controls: grad mode switches, device info, memory counters, finfo/iinfo and the
`pr.cuda` namespace that ported scripts call."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def test_grad_mode_nests_and_decorates():
    assert pr.is_grad_enabled()
    with pr.no_grad():
        assert not pr.is_grad_enabled()
        with pr.enable_grad():
            assert pr.is_grad_enabled()
        assert not pr.is_grad_enabled()
    assert pr.is_grad_enabled()

    @pr.no_grad()
    def f():
        return pr.is_grad_enabled()

    assert f() is False and pr.is_grad_enabled()
    with pr.inference_mode():
        assert not pr.is_grad_enabled()
    pr.set_grad_enabled(False)
    assert not pr.is_grad_enabled()
    pr.set_grad_enabled(True)
    with pr.set_grad_enabled(False):
        assert not pr.is_grad_enabled()
    assert pr.is_grad_enabled()


def test_finfo_iinfo_match_torch():
    for ours, theirs in ((pr.float32, torch.float32), (pr.float16, torch.float16)):
        a, b = pr.finfo(ours), torch.finfo(theirs)
        assert (a.eps, a.max, a.min, a.tiny, a.bits) == (b.eps, b.max, b.min, b.tiny, b.bits)
    i = pr.iinfo(pr.int32)
    assert (i.max, i.min, i.bits) == (2**31 - 1, -(2**31), 32)
    with pytest.raises(TypeError, match="integer dtype"):
        pr.iinfo(pr.float32)
    assert pr.iinfo(pr.int64).max == 2**31 - 1  # int64 is stored as int32


def test_default_dtype_only_float32():
    pr.set_default_dtype(pr.float32)
    assert pr.get_default_dtype() is pr.float32
    with pytest.raises(TypeError, match="float32"):
        pr.set_default_dtype(pr.float16)


def test_device_info_and_memory_counters():
    info = pr.device_info()
    for key in ("name", "implementation", "backend", "type", "driver", "features", "limits"):
        assert key in info
    assert info["implementation"] in ("dawn", "wgpu")
    assert info["limits"]["max-storage-buffer-binding-size"] > 0
    before = pr.memory_allocated()
    x = pr.ones(1000, 257)  # ~1 MB
    assert pr.memory_allocated() - before >= 1000 * 257 * 4
    assert pr.max_memory_allocated() >= pr.memory_allocated()
    del x
    assert pr.memory_allocated() == before


def test_cuda_namespace_for_ported_scripts():
    dev = "cuda" if pr.cuda.is_available() else "cpu"
    x = pr.arange(4.0).to(dev)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert pr.cuda.is_available() == (pr.device_info()["type"] != "CPU")
    pr.cuda.manual_seed(3)
    a = pr.rand(5).numpy()
    pr.manual_seed(3)
    np.testing.assert_array_equal(a, pr.rand(5).numpy())
    pr.cuda.synchronize()


def test_empty_cache_returns_pooled_buffers():
    x = pr.ones(4096, 64)
    del x
    pr.synchronize()
    pr.empty_cache()
    assert pr.memory_stats()["pooled_bytes"] == 0
    assert (pr.ones(3) + 1).tolist() == [2.0, 2.0, 2.0]  # the device still works


# ---- the compiler-opaque zero ---------------------------------------------------------------
def test_info_zero_word_contract():
    """kernels/ and backend/ agree on the info word every dispatch leaves 0."""
    from pyrite.backend import device
    from pyrite.kernels import common

    assert common.INFO_ZERO_WORD == device.INFO_ZERO_WORD == device.INFO_WINDOW_WORDS - 1


def test_error_free_sum_survives_the_compiler(rng):
    """TwoSum's error term through p_opaque (kernels/common.py): NVIDIA's compiler folded the
    plain form (a - (a + x)) + x to 0 on the H200. Many dispatches in one batch, so the zero
    word of every window is read, not only the first."""
    from pyrite.ops.core import empty, run_map

    a = rng.uniform(1, 2, 4099).astype(np.float32)
    x = (rng.uniform(-1, 1, 4099) * 2.0**-30).astype(np.float32)
    want = x - ((a + x).astype(np.float32) - a)  # numpy: IEEE f32, evaluated as written
    pa, px = pr.tensor(a), pr.tensor(x)
    outs = []
    for _ in range(20):
        out = empty(pa.shape, pr.float32)
        expr = "p_opaque(x1 - p_opaque(p_opaque(x0 + x1) - x0))"
        outs.append(run_map(expr, (pa, px), ("f32", "f32"), out, "f32"))
    for got in outs:
        np.testing.assert_array_equal(got.numpy(), want)
    assert np.count_nonzero(want) > 4000  # the terms were not all absorbed or all kept


def test_small_reads_use_the_staging_buffer_and_large_ones_still_read(rng):
    """Reads up to STAGING_BYTES go through the device's persistent mappable buffer (no
    buffer made per read); larger ones through wgpu-py's read_buffer; both exact, at offsets."""
    from pyrite import backend
    from pyrite.backend import device as devmod

    dev = backend.current()
    made = []
    real_create = dev.device.create_buffer

    def counting(*a, **k):
        made.append(k.get("size"))
        return real_create(*a, **k)

    n = devmod.STAGING_BYTES // 4
    for size in (1, 7, n - 1, n, n + 1, 3 * n + 5):
        a = rng.standard_normal(size).astype(np.float32)
        t = pr.tensor(a)
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(t[size // 3 :].numpy(), a[size // 3 :])
    x = pr.tensor(rng.standard_normal(257).astype(np.float32))
    x.sum().item()  # warm
    dev.device.create_buffer = counting
    try:
        for i in range(5):
            assert x[i * 7].item() == pytest.approx(float(x.numpy()[i * 7]))
            pr.synchronize()
    finally:
        del dev.device.create_buffer
    assert dev._staging is not None
    assert made == []
