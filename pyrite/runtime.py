"""Process-wide controls: the device in use, synchronisation, memory, and PyTorch's small
compatibility helpers (finfo/iinfo, default dtype, the `pr.cuda` namespace)."""

from __future__ import annotations

import math

import numpy as np

from . import backend as _backend
from . import dtypes as _dtypes


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


class cuda:
    """`pr.cuda` as ported scripts call it. There is no CUDA here; "available" means a GPU
    adapter is in use, so `device = "cuda" if torch.cuda.is_available() else "cpu"` works (both
    strings are accepted and ignored: pyrite has one device)."""

    @staticmethod
    def is_available() -> bool:
        return _backend.current().adapter_type != "CPU"

    @staticmethod
    def device_count() -> int:
        return 1 if cuda.is_available() else 0

    @staticmethod
    def synchronize(device=None):
        synchronize()

    @staticmethod
    def manual_seed(seed):
        from .ops.creation import manual_seed

        return manual_seed(seed)

    manual_seed_all = manual_seed
    empty_cache = staticmethod(empty_cache)

    @staticmethod
    def is_bf16_supported(including_emulation=True) -> bool:
        return True  # bfloat16 storage is native; its arithmetic runs in f32

    memory_allocated = staticmethod(memory_allocated)
    max_memory_allocated = staticmethod(max_memory_allocated)


class _Flags:
    """An attribute bag accepting any setting (torch.backends.cudnn.benchmark = True, ...)."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)


class backends:
    """torch.backends as training scripts set it: the switches are accepted and have no effect
    (pyrite has no cuDNN or TF32 path to toggle)."""

    cudnn = _Flags(benchmark=False, deterministic=False, enabled=True, allow_tf32=True)
    cuda = _Flags(matmul=_Flags(allow_tf32=False, allow_fp16_reduced_precision_reduction=True))
    mps = _Flags()

    @staticmethod
    def is_available():
        return False


_MATMUL_PRECISION = ["highest"]


def set_float32_matmul_precision(precision: str):
    """Accepted ("highest", "high", "medium"); pyrite's f32 GEMMs are always full precision."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"pyrite: invalid float32 matmul precision {precision!r}")
    _MATMUL_PRECISION[0] = precision


def get_float32_matmul_precision() -> str:
    return _MATMUL_PRECISION[0]
