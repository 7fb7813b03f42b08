"""The boilerplate ported PyTorch scripts call before and around their real work: devices,
pr.cuda / pr.backends queries, versions, the generator's state, pr.testing.assert_close,
torch.jit / torch.compiler decorators, nn.modules' file names, torch.distributed's "not here"
and nn.DataParallel. Checked against torch where it has an answer on this machine."""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn as nn

# ---- 1. devices ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("cuda", 0), {}),
        ((), {"type": "cuda", "index": 0}),
        (("cuda:0",), {}),
        (("cpu",), {}),
        (("cuda",), {}),
        (("cpu", 0), {}),
        (("cuda:1",), {}),
    ],
)
def test_device_spellings_as_torch(args, kwargs):
    d, t = pr.device(*args, **kwargs), torch.device(*args, **kwargs)
    assert (d.type, d.index) == (t.type, t.index)
    assert str(d) == str(t) and repr(d) == repr(t)
    assert pr.device(d) == d and str(pr.device(d)) == str(t)


@pytest.mark.parametrize(
    "args", [("foo",), ("cuda:-1",), ("cuda:x",), ("cuda", -1), ("cuda:0", 0), ("cuda:01",)]
)
def test_device_refuses_what_torch_refuses(args):
    with pytest.raises(RuntimeError):
        torch.device(*args)
    with pytest.raises(RuntimeError):
        pr.device(*args)


def test_tensor_device_is_the_one_device():
    x = pr.ones(2)
    assert x.device.type == "webgpu" and x.device.index == 0
    assert str(x.device) == "webgpu:0" and repr(x.device) == "device(type='webgpu', index=0)"
    for spelling in ("cuda", "cuda:0", "cpu", "webgpu", "gpu"):
        assert x.device == pr.device(spelling) and x.device == spelling
        assert hash(x.device) == hash(pr.device(spelling))
    assert x.device != "meta" and pr.device("meta") == "meta" and x.device != "nonsense"
    assert pr.device(0) == x.device and pr.device(0).index == 0
    # what scripts do with the device they chose
    dev = pr.device("cuda" if pr.cuda.is_available() else "cpu")
    assert str(dev).startswith(dev.type) and dev.type in ("cuda", "cpu")
    y = x.to(dev)
    assert y.device == dev and pr.zeros(3, device=pr.device("cuda", 0)).device == dev
    with pr.device("cuda"):
        assert pr.ones(1).device == x.device
    d = pickle.loads(pickle.dumps(pr.device("cuda", 0)))
    assert (d.type, d.index) == ("cuda", 0)


# ---- 2. backends -----------------------------------------------------------------------------


def test_backends_queries():
    assert pr.backends.mps.is_available() is False and pr.backends.mps.is_built() is False
    assert pr.backends.cudnn.is_available() is False and pr.backends.cudnn.version() is None
    assert pr.backends.cuda.is_built() is True
    pr.backends.cudnn.benchmark = True  # still a switch bag
    pr.backends.cudnn.benchmark = False
    pr.backends.cuda.matmul.allow_tf32 = True
    pr.backends.cuda.matmul.allow_tf32 = False
    pr.backends.cuda.enable_flash_sdp(False)
    assert pr.backends.cuda.flash_sdp_enabled() is False
    pr.backends.cuda.enable_flash_sdp(True)
    assert pr.backends.cuda.math_sdp_enabled()


# ---- 3. pr.cuda ------------------------------------------------------------------------------


def test_cuda_device_queries():
    info = pr.device_info()
    assert pr.cuda.current_device() == 0
    assert pr.cuda.is_initialized() is True  # the device is open (tensors were made)
    pr.cuda.init()
    pr.cuda.set_device(0)
    pr.cuda.set_device("cuda:0")
    pr.cuda.set_device(pr.device("cuda", 0))
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        pr.cuda.set_device(3)
    with pr.cuda.device(0):
        pass
    assert pr.cuda.get_device_name() == pr.cuda.get_device_name(0) == info["name"]
    props = pr.cuda.get_device_properties(0)
    assert props.name == info["name"]
    assert isinstance(props.total_memory, int) and props.total_memory >= 0
    assert (props.major, props.minor) == pr.cuda.get_device_capability()
    assert props.multi_processor_count >= 1
    assert "_CudaDeviceProperties(name=" in repr(props)
    assert pr.cuda.get_arch_list() == []
    assert pr.cuda.OutOfMemoryError is pr.OutOfMemoryError


def test_cuda_memory_counters():
    pr.cuda.reset_peak_memory_stats()
    base = pr.cuda.max_memory_allocated()
    assert base == pr.cuda.memory_allocated()
    x = pr.empty(1 << 16)
    assert pr.cuda.max_memory_allocated() >= base + x.numel() * 4
    assert pr.cuda.memory_reserved() >= pr.cuda.memory_allocated()
    del x
    pr.cuda.reset_max_memory_allocated()
    assert pr.cuda.max_memory_allocated() == pr.cuda.memory_allocated()
    pr.cuda.empty_cache()


def test_cuda_rng_is_the_default_generator():
    pr.cuda.manual_seed(3)
    state = pr.cuda.get_rng_state()
    np.testing.assert_array_equal(state.numpy(), pr.get_rng_state().numpy())
    a = pr.rand(5).numpy()
    pr.cuda.set_rng_state(state)
    np.testing.assert_array_equal(pr.rand(5).numpy(), a)
    pr.cuda.manual_seed_all(3)
    np.testing.assert_array_equal(pr.rand(5).numpy(), a)
    assert pr.cuda.initial_seed() == 3
    [s] = pr.cuda.get_rng_state_all()
    pr.cuda.set_rng_state_all([s])


def test_cuda_events_and_streams():
    start, end = pr.cuda.Event(enable_timing=True), pr.cuda.Event(enable_timing=True)
    start.record()
    (pr.randn(64, 64) @ pr.randn(64, 64)).sum()
    time.sleep(0.002)
    end.record()
    pr.cuda.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 2.0
    assert end.query() and start.elapsed_time(start) == 0.0
    with pytest.raises(RuntimeError, match="enable_timing"):
        pr.cuda.Event().elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        pr.cuda.Event(enable_timing=True).elapsed_time(end)

    s = pr.cuda.Stream()
    with pr.cuda.stream(s) as inside:
        assert inside is s
        y = pr.ones(3) * 2
    s.synchronize()
    pr.cuda.current_stream().wait_stream(s)
    assert pr.cuda.current_stream() == pr.cuda.default_stream()
    ev = s.record_event()
    ev.synchronize()
    assert y.tolist() == [2.0, 2.0, 2.0]


# ---- 4. versions and pr.random --------------------------------------------------------------


def test_version():
    assert pr.version.cuda is None and torch.version.__version__ == torch.__version__
    assert pr.version.__version__ == pr.__version__
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == pr.__version__


def test_random_module_and_fork_rng():
    assert set(n for n in dir(torch.random) if not n.startswith("_")) >= {"fork_rng"}
    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert callable(getattr(pr.random, name))
    pr.random.manual_seed(11)
    assert pr.random.initial_seed() == 11
    before = pr.random.get_rng_state().numpy()
    with pr.random.fork_rng():
        pr.rand(7)
        pr.random.manual_seed(99)
        pr.randn(3)
    np.testing.assert_array_equal(pr.random.get_rng_state().numpy(), before)
    # as torch's: the draws after the block are those without it
    want = pr.rand(4).numpy()
    pr.random.set_rng_state(pr.tensor(before))
    with pr.random.fork_rng(devices=[0], device_type="cuda"):
        pr.rand(100)
    np.testing.assert_array_equal(pr.rand(4).numpy(), want)
    with pr.random.fork_rng(enabled=False):
        pr.rand(1)
    assert not np.array_equal(pr.random.get_rng_state().numpy(), before)
    s = pr.random.seed()
    assert pr.random.initial_seed() == s


# ---- 5. pr.testing ---------------------------------------------------------------------------


def test_testing_assert_close_after_import_pyrite_only():
    code = (
        "import pyrite as pr\n"
        "pr.testing.assert_close(pr.tensor([1.0, 2.0]), pr.tensor([1.0, 2.0000001]))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_testing_assert_close_as_torch():
    a = pr.tensor([1.0, 2.0, 3.0])
    t = torch.tensor([1.0, 2.0, 3.0])
    for other in ([1.0, 2.0, 3.0000001], [1.0, 2.0, 3.0 + 2e-5]):
        ok_torch = _passes(torch.testing.assert_close, t, torch.tensor(other))
        assert _passes(pr.testing.assert_close, a, pr.tensor(other)) == ok_torch
        assert _passes(pr.testing.assert_close, a, torch.tensor(other)) == ok_torch
    pr.testing.assert_close(a, a * 1.01, rtol=0.02, atol=0.0)
    with pytest.raises(AssertionError, match="not close"):
        pr.testing.assert_close(a, a + 1)
    with pytest.raises(AssertionError, match="^custom$"):
        pr.testing.assert_close(a, a + 1, msg="custom")
    with pytest.raises(AssertionError, match="dtype"):
        pr.testing.assert_close(a, pr.tensor([1, 2, 3]))
    pr.testing.assert_close(a, pr.tensor([1, 2, 3]), check_dtype=False)
    with pytest.raises(AssertionError, match="shape"):
        pr.testing.assert_close(a, a[:2])
    with pytest.raises(ValueError):
        pr.testing.assert_close(a, a, rtol=0.1)
    nan = pr.tensor([float("nan")])
    with pytest.raises(AssertionError):
        pr.testing.assert_close(nan, nan)  # torch's equal_nan=False
    pr.testing.assert_close(nan, nan, equal_nan=True)
    pr.testing.assert_close({"w": a, "b": [a, 1.0]}, {"w": a.clone(), "b": [a, 1.0]})
    pr.testing.assert_close(a.bfloat16(), a.bfloat16())
    # the suite's positional spelling still reaches tolerance.assert_close
    pr.testing.assert_close(a.numpy(), a.numpy() + 1e-3, 1e-2, 0.0, "positional")


def _passes(fn, *args, **kwargs) -> bool:
    try:
        fn(*args, **kwargs)
    except AssertionError:
        return False
    return True


# ---- 6. jit and compiler --------------------------------------------------------------------


def test_jit_decorators_are_identities():
    assert pr.jit.is_scripting() is False and pr.jit.is_tracing() is False

    def f(x):
        return x * 2

    lin = nn.Linear(2, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pr.jit.script(f) is f
        assert pr.jit.script(lin) is lin
        assert pr.jit.trace(f, pr.ones(2)) is f
    assert sum("TorchScript" in str(w.message) for w in caught) <= 2  # once per spelling
    for deco in (pr.jit.ignore, pr.jit.unused, pr.jit.export):
        assert deco(f) is f
    assert pr.jit.ignore(drop=True)(f) is f


def test_compiler_is_compiling():
    assert pr.compiler.is_compiling() is False
    seen = []

    def step(x):
        seen.append(pr.compiler.is_compiling())
        return x + 1

    compiled = pr.compile(step)
    compiled(pr.ones(3))
    compiled(pr.ones(3))
    assert True in seen  # while pr.compile traced it
    assert pr.compiler.is_compiling() is False
    assert pr.compiler.disable(step) is step
    assert pr.compiler.disable(recursive=False)(step) is step


# ---- 7. nn.modules' file names --------------------------------------------------------------


def test_nn_modules_names():
    for cls in (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm):
        m = cls(4)
        assert isinstance(m, nn.modules.batchnorm._BatchNorm)
        assert isinstance(m, nn.modules.batchnorm._NormBase)
    assert not isinstance(nn.InstanceNorm2d(4), nn.modules.batchnorm._BatchNorm)
    assert isinstance(nn.InstanceNorm2d(4), nn.modules.batchnorm._NormBase)
    assert isinstance(nn.Conv2d(1, 1, 3), nn.modules.conv._ConvNd)
    assert isinstance(nn.ConvTranspose2d(1, 1, 3), nn.modules.conv._ConvNd)
    assert nn.modules.linear.Linear is nn.Linear and nn.modules.module.Module is nn.Module
    assert isinstance(nn.MSELoss(), nn.modules.loss._Loss)
    assert nn.modules.activation.ReLU is nn.ReLU
    assert nn.modules.normalization.LayerNorm is nn.LayerNorm
    assert nn.modules.instancenorm.InstanceNorm1d is nn.InstanceNorm1d
    assert nn.modules.utils._pair(3) == torch.nn.modules.utils._pair(3) == (3, 3)
    assert nn.modules.utils._quadruple(1) == (1, 1, 1, 1)


def test_sync_batchnorm_is_batchnorm_on_one_device():
    x = np.random.default_rng(0).standard_normal((4, 3, 5, 2)).astype(np.float32)
    ref = torch.nn.BatchNorm2d(3)
    m = nn.SyncBatchNorm(3)
    got = m(pr.tensor(x)).numpy()
    want = ref(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.running_mean.numpy(), ref.running_mean.numpy(), atol=1e-6)
    net = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3), nn.Sequential(nn.BatchNorm1d(3)))
    bn_weight = net[1].weight
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert type(conv[1]) is nn.SyncBatchNorm and type(conv[2][0]) is nn.SyncBatchNorm
    assert conv[1].weight is bn_weight and type(conv[0]) is nn.Conv2d
    assert list(conv.state_dict()) == list(net.state_dict())


# ---- 8. distributed and DataParallel --------------------------------------------------------


def test_distributed_is_not_here():
    assert pr.distributed.is_available() is False
    assert pr.distributed.is_initialized() is False
    assert pr.distributed.get_world_size() == 1 and pr.distributed.get_rank() == 0


def test_data_parallel_wraps_as_torch():
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    pnet = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    pnet.load_state_dict({k: pr.tensor(v.numpy()) for k, v in tnet.state_dict().items()})
    tdp, pdp = torch.nn.DataParallel(tnet), nn.DataParallel(pnet)
    assert list(pdp.state_dict()) == list(tdp.state_dict())
    assert all(k.startswith("module.") for k in pdp.state_dict())
    assert pdp.module is pnet and isinstance(pdp, nn.parallel.DataParallel)
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    pr.testing.assert_close(pdp(pr.tensor(x)), tdp(torch.tensor(x)).detach(), rtol=1e-5, atol=1e-5)
    # the idiom that unwraps a wrapped model
    wrappers = (nn.DataParallel, nn.parallel.DistributedDataParallel)
    inner = pdp.module if isinstance(pdp, wrappers) else pdp
    assert inner is pnet
    pdp.load_state_dict(pdp.state_dict())
    with pytest.raises(RuntimeError, match="process group"):
        nn.parallel.DistributedDataParallel(pnet)
    assert len(list(pdp.parameters())) == len(list(tdp.parameters()))
