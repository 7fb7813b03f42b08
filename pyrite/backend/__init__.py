"""The WebGPU device layer: the only code that imports `wgpu` or `wgpudawn`."""

from __future__ import annotations

import threading

from ..errors import DeviceError
from .device import Device
from .pool import Storage, size_class

_lock = threading.Lock()
_current: Device | None = None
_request = {"backend": None, "device": None, "features": ()}


def current() -> Device:
    """The device in use, opened on first call."""
    dev = _current
    if dev is None:
        dev = _open()
    return dev


def _open() -> Device:
    global _current
    with _lock:
        if _current is None:
            from .select import choose

            impl, module, adapter = choose(**_request)
            _current = Device(impl, module, adapter)
        return _current


def set_device(device=None, backend=None, features=()):
    """Choose the adapter (index, name substring, "cpu" or "gpu") and implementation.

    A switch that fails (no such adapter, an unknown backend, a missing feature) raises
    DeviceError and leaves the previous device in use. Tensors made on the previous device
    raise DeviceError when used on the new one.
    """
    global _current
    from .select import choose

    with _lock:
        request = {"backend": backend, "device": device, "features": tuple(features)}
        impl, module, adapter = choose(**request)  # raises before anything changes
        new = Device(impl, module, adapter)
        old = _current
        if old is not None:
            old.synchronize()
        _request.update(request)
        _current = new
    return new.info()


def is_open() -> bool:
    return _current is not None


def require_f16(dev: Device, what: str = "float16"):
    if not dev.has_f16:
        raise DeviceError(
            f"pyrite: {what} needs the WebGPU feature 'shader-f16', which {dev.name} through "
            f"{dev.impl} does not offer. Use float32, or choose an implementation that offers it "
            "(PYRITE_BACKEND=wgpu, or pr.set_device(backend='wgpu', features=['shader-f16']))."
        )


__all__ = ["Device", "Storage", "current", "is_open", "require_f16", "set_device", "size_class"]
