"""Process-wide controls: the device in use, synchronisation, memory, and PyTorch's small
compatibility helpers (finfo/iinfo, default dtype, the `pr.cuda` namespace)."""

from __future__ import annotations

import contextlib
import math
import os
import time

import numpy as np

from . import backend as _backend
from . import dtypes as _dtypes
from . import errors as _errors
from . import memstats as _memstats


def device_info() -> dict:
    """The adapter in use: name, implementation (dawn|wgpu), backend, type, driver, features,
    limits."""
    return _backend.current().info()


def set_device(device=None, backend=None, features=()):
    """Choose the adapter by index, name substring, "cpu" (lavapipe) or "gpu", and the WebGPU
    implementation ("dawn" or "wgpu"); returns the new device's info."""
    return _backend.set_device(device, backend, features)


def synchronize(device=None):
    """Submit pending work and wait for the GPU to finish it (at once when nothing was submitted
    since the last wait)."""
    _backend.current().synchronize()


def to_numpy(*tensors):
    """Each tensor as a numpy array (as `t.numpy()`), all read back in one round trip: a
    training loop's loss and accuracy, say, cost one wait instead of two. Arguments that are
    not tensors (numbers, None) come back as they are."""
    from .tensor import Tensor, host_arrays

    ts = [t for t in tensors if isinstance(t, Tensor)]
    for t in ts:
        if t.dtype.numpy_dtype is None:
            raise TypeError(
                f"Got unsupported ScalarType BFloat16 (pyrite: numpy has no {t.dtype.name};"
                " use .float() first)"
            )
    arrays = iter(host_arrays(ts))
    out = []
    for t in tensors:
        if not isinstance(t, Tensor):
            out.append(t)
            continue
        a = next(arrays)
        out.append(a if a.dtype == t.dtype.numpy_dtype else a.astype(t.dtype.numpy_dtype))
    return tuple(out)


def memory_stats() -> dict:
    """Bytes held by live tensors and bytes pooled for reuse, with counters."""
    dev = _backend.current()
    pool = dev.pool
    return {
        "live_bytes": pool.live_bytes,
        "pooled_bytes": pool.pooled_bytes + pool.recent_bytes,
        "peak_live_bytes": pool.peak_live_bytes,
        "buffers_created": pool.allocations,
        "pipelines": dev.pipeline_count,
        "dispatches": dev.dispatches,
        "submits": dev.submits,
        "readbacks": dev.readbacks,
    }


def memory_allocated(device=None) -> int:
    return _backend.current().pool.live_bytes


def max_memory_allocated(device=None) -> int:
    return _backend.current().pool.peak_live_bytes


def empty_cache():
    """Return pooled buffers to the driver."""
    dev = _backend.current()
    dev.synchronize()
    dev.pool.trim()


class finfo:
    """Machine limits of a float dtype, as torch.finfo."""

    def __init__(self, dtype=None):
        dt = _dtypes.from_any(dtype) if dtype is not None else _dtypes.float32
        if dt.is_complex:  # torch: a complex dtype's limits are its parts' (complex64: float32)
            dt = _dtypes.float32
        if not dt.is_floating_point:
            raise TypeError(f"pyrite: finfo needs a floating dtype, got {dt!r}")
        self.dtype = dt
        if dt is _dtypes.bfloat16:  # numpy has no bfloat16: 8 exponent bits, 7 mantissa bits
            self.bits = 16
            self.eps = 2.0**-7
            self.max = float(np.float32(_dtypes.bf16_value(0x7F7F)))
            self.min = -self.max
            self.tiny = self.smallest_normal = 2.0**-126
            self.resolution = 0.01
            return
        info = np.finfo(dt.np)
        self.bits = info.bits
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny)
        # torch's: 10^-(decimal digits of precision), numpy's float16 one is 0.0010004
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype.name})"
        )


class iinfo:
    """Limits of an integer dtype, as torch.iinfo. int64 is stored as int32 here, so
    iinfo(pyrite.int64) gives int32's limits."""

    def __init__(self, dtype):
        dt = _dtypes.from_any(dtype)
        if dt.kind != "i":
            raise TypeError(f"pyrite: {dt!r} is not supported by iinfo (an integer dtype is)")
        self.dtype = dt
        self.bits, self.min, self.max = dt.bits, dt.min, dt.max

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype.name})"


def set_default_dtype(d):
    """Only float32 is accepted: pyrite's default float is float32 (float16 is storage)."""
    if _dtypes.from_any(d) is not _dtypes.float32:
        raise TypeError(f"pyrite: the default dtype must be float32, got {d!r}")


def set_default_tensor_type(t):
    """torch.set_default_tensor_type (deprecated in torch, still in LLM reference scripts):
    a legacy type (pr.FloatTensor, pr.cuda.FloatTensor) or its name ('torch.cuda.FloatTensor')
    sets the default dtype, so only float32 types are accepted (set_default_dtype)."""
    from .ops.casts import _FROM_LEGACY

    name = t if isinstance(t, str) else getattr(t, "__name__", None)
    key = name.rsplit(".", 1)[-1] if isinstance(name, str) else None
    if key not in _FROM_LEGACY:
        raise TypeError(f"pyrite: set_default_tensor_type: invalid type {t!r}")
    dt = _dtypes.from_any(_FROM_LEGACY[key])
    if not dt.is_floating_point:
        raise TypeError(
            f"pyrite: only floating-point types are supported as the default type, got {t!r}"
        )
    set_default_dtype(dt)


def reset_peak_memory_stats(device=None):
    """Start the peaks of `max_memory_allocated`, `max_memory_reserved` and memory_stats'
    other peaks again from the figures now."""
    _one_device(device)
    _memstats.reset_peak_memory_stats()


def reset_accumulated_memory_stats(device=None):
    """torch.cuda.reset_accumulated_memory_stats: memory_stats' allocated / freed totals and
    its num_* counters start again from 0."""
    _one_device(device)
    _memstats.reset_accumulated_memory_stats()


def cuda_memory_stats(device=None) -> dict:
    """torch.cuda.memory_stats: PyTorch's keys ("allocated_bytes.all.current", ...) for the
    figures the buffer pool counts (pyrite/memstats.py says which)."""
    _one_device(device)
    return _memstats.memory_stats()


def memory_stats_as_nested_dict(device=None) -> dict:
    _one_device(device)
    return _memstats.memory_stats_as_nested_dict()


def memory_summary(device=None, abbreviated=False) -> str:
    """torch.cuda.memory_summary: a table of memory_stats' figures."""
    _one_device(device)
    return _memstats.memory_summary(abbreviated)


def memory_reserved(device=None) -> int:
    """Bytes held from the driver: live tensors' and pooled buffers' (torch's reserved)."""
    return _backend.current().pool.reserved_bytes


def max_memory_reserved(device=None) -> int:
    """The most bytes `memory_reserved` has counted at once (since the start, or the last
    `reset_peak_memory_stats`)."""
    _one_device(device)
    return max(_backend.current().pool.peak_reserved_bytes, memory_reserved())


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes, as torch.cuda.mem_get_info. WebGPU reports no memory figures:
    total is the device's `total_memory` (Dawn's memory heaps, the host's memory for a CPU
    adapter, else the adapter's maxBufferSize: backend/device.py), and free is total less what
    this process's buffer pool holds (`memory_reserved`); other processes' use is not seen."""
    _one_device(device)
    total = _backend.current().total_memory
    return max(total - memory_reserved(), 0), total


def _one_device(device) -> int:
    """0 for the spellings of the one device (None, 0, -1, "cuda", "cuda:0", a device);
    anything else raises, as torch's "invalid device ordinal" does."""
    index = getattr(device, "index", device)
    if isinstance(device, str):
        from .tensor import device as _device

        index = _device(device).index
    if index is None or index in (0, -1):
        return 0
    raise RuntimeError(f"pyrite: invalid device ordinal {index}: there is one device (index 0)")


class _DeviceProperties:
    """What `cuda.get_device_properties` returns (torch's _CudaDeviceProperties)."""

    def __init__(self, info: dict):
        self.name = info["name"]
        self.type = info["type"]  # the WebGPU adapter type: DiscreteGPU, IntegratedGPU, CPU, ...
        # WebGPU reports no memory size: a size the backend names, else 0 (unknown)
        self.total_memory = int(info.get("total_memory", 0))
        # pyrite's features as a capability: bfloat16 and TF32-era paths yes, fp8 no
        self.major, self.minor = _CAPABILITY
        # WebGPU reports no core count: the CPU's for a CPU adapter (lavapipe), else 1 (unknown)
        self.multi_processor_count = (os.cpu_count() or 1) if self.type == "CPU" else 1
        self.is_integrated = int(self.type == "IntegratedGPU")
        self.is_multi_gpu_board = 0

    def __repr__(self):
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 2**20}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


_CAPABILITY = (8, 0)


class _Event:
    """`cuda.Event`: `record()` waits for the work submitted so far and takes the host clock,
    so `start.elapsed_time(end)` is the milliseconds between the two points (host-timed)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self.enable_timing = enable_timing
        self._time = None

    def record(self, stream=None):
        synchronize()
        self._time = time.perf_counter()

    def synchronize(self):
        synchronize()

    def query(self) -> bool:
        return True  # record() has waited already

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end_event) -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._time - self._time) * 1000.0


class _Stream:
    """`cuda.Stream`: the device has one queue, so a stream is a name for it; its waits are
    the device's synchronize."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority

    def synchronize(self):
        synchronize()

    def query(self) -> bool:
        synchronize()
        return True

    def wait_event(self, event):
        pass

    def wait_stream(self, stream):
        pass

    def record_event(self, event=None):
        event = event if event is not None else _Event()
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, _Stream)

    def __hash__(self):
        return 0


_DEFAULT_STREAM = _Stream()


class _StreamContext:
    """`with cuda.stream(s):`: work runs on the one queue whatever the stream."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


class _DeviceContext:
    """`with cuda.device(i):` for the one device (other indexes raise)."""

    def __init__(self, device):
        self.idx = _one_device(device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class cuda:
    """`pr.cuda` as ported scripts call it. There is no CUDA here; "available" means a GPU
    adapter is in use, so `device = "cuda" if torch.cuda.is_available() else "cpu"` works (both
    strings are accepted and ignored: pyrite has one device). The rest acts on that one device
    (index 0; other indexes raise): its name and properties, its memory counters, synchronize,
    and the default generator's seed and state (there is one generator). Events are host-timed
    after a synchronize; streams are names for the one queue."""

    Event = _Event
    Stream = _Stream
    StreamContext = _StreamContext
    device = _DeviceContext
    OutOfMemoryError = _errors.OutOfMemoryError

    @staticmethod
    def is_available() -> bool:
        return _backend.current().adapter_type != "CPU"

    @staticmethod
    def device_count() -> int:
        return 1 if cuda.is_available() else 0

    @staticmethod
    def is_initialized() -> bool:
        """Whether the WebGPU device has been opened (it opens on first use)."""
        return _backend.is_open()

    @staticmethod
    def init():
        _backend.current()

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def set_device(device):
        """Accepted for the one device (0, "cuda", "cuda:0"); to choose the WebGPU adapter,
        use pr.set_device."""
        _one_device(device)

    @staticmethod
    def get_device_name(device=None) -> str:
        _one_device(device)
        return device_info()["name"]

    @staticmethod
    def get_device_properties(device=None) -> _DeviceProperties:
        _one_device(device)
        return _DeviceProperties(device_info())

    @staticmethod
    def get_device_capability(device=None) -> tuple:
        """(8, 0): pyrite runs what scripts gate on that (bfloat16, TF32 switches), not fp8."""
        _one_device(device)
        return _CAPABILITY

    @staticmethod
    def get_arch_list() -> list:
        return []

    @staticmethod
    def synchronize(device=None):
        synchronize()

    @staticmethod
    def current_stream(device=None) -> _Stream:
        return _DEFAULT_STREAM

    default_stream = current_stream

    @staticmethod
    def stream(stream) -> _StreamContext:
        return _StreamContext(stream)

    @staticmethod
    def set_stream(stream):
        pass

    @staticmethod
    def manual_seed(seed):
        from .ops.creation import manual_seed

        return manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def seed():
        from .ops.creation import seed

        return seed()

    seed_all = seed

    @staticmethod
    def initial_seed() -> int:
        from .ops.creation import initial_seed

        return initial_seed()

    @staticmethod
    def get_rng_state(device="cuda"):
        """The default generator's state (pr.get_rng_state: one generator serves every
        device)."""
        from .ops.misc import get_rng_state

        return get_rng_state()

    @staticmethod
    def set_rng_state(new_state, device="cuda"):
        from .ops.misc import set_rng_state

        set_rng_state(new_state)

    @staticmethod
    def get_rng_state_all() -> list:
        return [cuda.get_rng_state()]

    @staticmethod
    def set_rng_state_all(new_states):
        for state in new_states:
            cuda.set_rng_state(state)

    empty_cache = staticmethod(empty_cache)

    @staticmethod
    def is_bf16_supported(including_emulation=True) -> bool:
        return True  # bfloat16 storage is native; its arithmetic runs in f32

    memory_allocated = staticmethod(memory_allocated)
    max_memory_allocated = staticmethod(max_memory_allocated)
    memory_reserved = staticmethod(memory_reserved)
    max_memory_reserved = staticmethod(max_memory_reserved)
    mem_get_info = staticmethod(mem_get_info)
    reset_peak_memory_stats = staticmethod(reset_peak_memory_stats)
    reset_max_memory_allocated = staticmethod(reset_peak_memory_stats)
    reset_accumulated_memory_stats = staticmethod(reset_accumulated_memory_stats)
    memory_stats = staticmethod(cuda_memory_stats)
    memory_stats_as_nested_dict = staticmethod(memory_stats_as_nested_dict)
    memory_summary = staticmethod(memory_summary)
    # torch's deprecated names for the reserved counters
    memory_cached = staticmethod(memory_reserved)
    max_memory_cached = staticmethod(max_memory_reserved)
    reset_max_memory_cached = staticmethod(reset_peak_memory_stats)


class accelerator:
    """torch.accelerator (torch >= 2.6), the device-agnostic spelling recent scripts use:
    `device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available()
    else "cpu"`. pyrite's device is the accelerator where pr.cuda.is_available() says so (a GPU
    adapter; on lavapipe there is none, as on a CPU-only torch), and it is named "cuda" as on a
    CUDA torch; either branch's device string is accepted."""

    @staticmethod
    def is_available() -> bool:
        return cuda.is_available()

    @staticmethod
    def current_accelerator(check_available: bool = False):
        from .tensor import device

        return device("cuda") if cuda.is_available() else None

    @staticmethod
    def device_count() -> int:
        return cuda.device_count()

    @staticmethod
    def current_device_index() -> int:
        return 0

    current_device_idx = current_device_index

    @staticmethod
    def set_device_index(device):
        _one_device(device)

    set_device_idx = set_device_index

    @staticmethod
    def synchronize(device=None):
        _one_device(device)
        synchronize()

    @staticmethod
    def get_device_capability(device=None) -> dict:
        """{"supported_dtypes": the dtypes tensors can hold here} (float16 needs shader-f16)."""
        _one_device(device)
        D = _dtypes
        dts = {D.float32, D.bfloat16, D.int32, D.int16, D.int8, D.uint8, D.bool_}
        if _backend.current().has_f16:
            dts.add(D.float16)
        return {"supported_dtypes": dts}

    empty_cache = staticmethod(empty_cache)
    memory_allocated = staticmethod(memory_allocated)
    max_memory_allocated = staticmethod(max_memory_allocated)
    memory_reserved = staticmethod(memory_reserved)
    max_memory_reserved = staticmethod(max_memory_reserved)
    reset_peak_memory_stats = staticmethod(reset_peak_memory_stats)
    reset_accumulated_memory_stats = staticmethod(reset_accumulated_memory_stats)
    memory_stats = staticmethod(cuda_memory_stats)  # (torch's keys, as torch.cuda's)


def get_device_module(device=None):
    """torch.get_device_module: the namespace of a device type — `pr.cuda` for "cuda" (and
    pyrite's "webgpu"), `pr.cpu` for "cpu"; with no device, the accelerator's (pr.cuda where
    `cuda.is_available()`, else pr.cpu)."""
    import pyrite

    from .tensor import device as _device

    if device is None:
        return pyrite.cuda if cuda.is_available() else pyrite.cpu
    kind = device.type if isinstance(device, _device) else _device(device).type
    if kind in ("cuda", "webgpu"):
        return pyrite.cuda
    if kind == "cpu":
        return pyrite.cpu
    raise RuntimeError(
        f"pyrite: Device '{kind}' does not have a corresponding module registered as "
        f"'pyrite.{kind}'."
    )


class _Flags:
    """An attribute bag accepting any setting (torch.backends.cudnn.benchmark = True, ...)."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)


class _Cudnn(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False  # no cuDNN: convolutions are pyrite's WGSL kernels

    @staticmethod
    def version():
        return None


class _CudaMatmul(_Flags):
    """torch.backends.cuda.matmul. `allow_fp16_accumulation` (off by default, as in torch) lets
    float16 products on the fast GEMM tiles use f16 arithmetic: packed f16 products summed in f16
    over each K step (32 on the GPUs' big tile), f32 across steps (ops/matmul.F16_ACCUMULATION).
    The other switches are accepted and change nothing (no TF32 on WebGPU)."""

    @property
    def allow_fp16_accumulation(self) -> bool:
        from .ops import matmul

        return matmul.F16_ACCUMULATION

    @allow_fp16_accumulation.setter
    def allow_fp16_accumulation(self, value):
        from .ops import matmul

        matmul.F16_ACCUMULATION = bool(value)


class _CudaBackend(_Flags):
    @staticmethod
    def is_built() -> bool:
        return True  # the pr.cuda namespace is always there (on the WebGPU device)

    # scaled_dot_product_attention's kernel choice: recorded, pyrite has one path
    def enable_flash_sdp(self, enabled: bool):
        self.sdp["flash"] = bool(enabled)

    def enable_mem_efficient_sdp(self, enabled: bool):
        self.sdp["mem_efficient"] = bool(enabled)

    def enable_math_sdp(self, enabled: bool):
        self.sdp["math"] = bool(enabled)

    def flash_sdp_enabled(self) -> bool:
        return self.sdp["flash"]

    def mem_efficient_sdp_enabled(self) -> bool:
        return self.sdp["mem_efficient"]

    def math_sdp_enabled(self) -> bool:
        return self.sdp["math"]

    def enable_cudnn_sdp(self, enabled: bool):
        self.sdp["cudnn"] = bool(enabled)

    def cudnn_sdp_enabled(self) -> bool:
        return self.sdp["cudnn"]

    @contextlib.contextmanager
    def sdp_kernel(
        self, enable_flash=True, enable_math=True, enable_mem_efficient=True, enable_cudnn=True
    ):
        """torch.backends.cuda.sdp_kernel (deprecated in torch for nn.attention.sdpa_kernel):
        sets the four switches inside the block and restores them after."""
        previous = dict(self.sdp)
        self.sdp.update(
            flash=bool(enable_flash),
            math=bool(enable_math),
            mem_efficient=bool(enable_mem_efficient),
            cudnn=bool(enable_cudnn),
        )
        try:
            yield {}
        finally:
            self.sdp.clear()
            self.sdp.update(previous)


class _Mps(_Flags):
    @staticmethod
    def is_available() -> bool:
        return False

    @staticmethod
    def is_built() -> bool:
        return False


class backends:
    """torch.backends as training scripts set it: the switches are accepted and, but for
    `cuda.matmul.allow_fp16_accumulation` (f16 arithmetic in float16 GEMMs, see _CudaMatmul),
    have no effect (pyrite has no cuDNN or TF32 path to toggle). cudnn and mps report unavailable;
    backends.cuda.is_built() is True (pr.cuda is always present)."""

    cudnn = _Cudnn(benchmark=False, deterministic=False, enabled=True, allow_tf32=True)
    cuda = _CudaBackend(
        matmul=_CudaMatmul(
            allow_tf32=False,
            allow_fp16_reduced_precision_reduction=True,
            allow_bf16_reduced_precision_reduction=True,
        ),
        sdp={"flash": True, "mem_efficient": True, "math": True, "cudnn": True},
    )
    mps = _Mps()

    @staticmethod
    def is_available():
        return False
