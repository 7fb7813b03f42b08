"""pyrite: a deep-learning framework whose every kernel is WGSL, run through WebGPU.

    import pyrite as pr
    x = pr.randn(4, 8)
    y = (x @ x.T).softmax(-1)

PyTorch's names and semantics throughout; see README.md and DESIGN.md.
"""

from __future__ import annotations

from . import backend as _backend
from . import dtypes as _dtypes
from . import ops as _ops
from .dtypes import bool_ as bool
from .dtypes import (
    double,
    dtype,
    float,
    float16,
    float32,
    float64,
    get_default_dtype,
    half,
    int,
    int8,
    int16,
    int32,
    int64,
    long,
    uint8,
)
from .errors import DeviceError, KernelError, OutOfMemoryError, PyriteError, ShapeError
from .tensor import Size, Tensor, device

globals().update(_ops.exported())

from . import nn

__version__ = "0.1.0"


def device_info() -> dict:
    """The adapter in use: name, implementation (dawn|wgpu), backend, type, driver, features,
    limits."""
    return _backend.current().info()


def set_device(device=None, backend=None, features=()):
    """Choose the adapter by index, name substring, "cpu" (lavapipe) or "gpu", and the WebGPU
    implementation ("dawn" or "wgpu"); returns the new device's info."""
    return _backend.set_device(device, backend, features)


def synchronize():
    """Submit pending work and wait for the GPU to finish it."""
    _backend.current().synchronize()


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
    }


def empty_cache():
    """Return pooled buffers to the driver."""
    dev = _backend.current()
    dev.synchronize()
    dev.pool.trim()


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def numel(input) -> int:
    return input.numel()


def is_floating_point(input) -> bool:
    return input.is_floating_point()


def result_type(a, b):
    from .ops.elementwise import result_dtype

    return result_dtype(a, b)


def promote_types(a, b):
    return _dtypes.result_type_of(_dtypes.from_any(a), _dtypes.from_any(b))


class no_grad:
    """Context manager and decorator; gradients arrive with the training issue."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


inference_mode = enable_grad = no_grad
