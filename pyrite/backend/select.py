"""Choosing a WebGPU implementation and an adapter.

Two implementations share one Python API: `wgpu` (wgpu-py over wgpu-native) and `wgpudawn` (the
same API over Google's Dawn). On the lent H200 (../shared/gpu.md, 2026-11-29) Dawn dispatched
faster (4.4 against 7.6 µs a replayed dispatch, 28 against 47 µs with a fresh bind group) and ran
a loop-indexed matmul 37× faster, while only wgpu-native offered `shader-f16` and only wgpu-native
found lavapipe. So the default order is Dawn, then wgpu-native, skipping an implementation whose
best adapter lacks a feature that was asked for. This module is, with device.py, the only
importer of either package.
"""

from __future__ import annotations

import contextlib
import importlib
import os

from ..errors import DeviceError

IMPLEMENTATIONS = {"dawn": "wgpudawn", "wgpu": "wgpu"}
DEFAULT_ORDER = ("dawn", "wgpu")

# Adapter ranking: a discrete GPU first, a CPU rasteriser (lavapipe) last; a native API before GL.
_TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 3, "CPU": 4}
_BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2, "OpenGLES": 2}


@contextlib.contextmanager
def _quiet_stderr():
    """Dawn prints driver warnings on stderr while probing adapters it then rejects; hide them."""
    if os.environ.get("PYRITE_DEBUG"):
        yield
        return
    try:
        fd = os.dup(2)
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)
        os.close(devnull)


# Dawn device toggles pyrite asks for ("-name": turned off): timestamps to the nanosecond (Dawn
# rounds them to 65.5 µs by default, a browser's guard against timing attacks, which left
# pr.profiler and the timing scripts unable to rank kernels under Dawn). PYRITE_DAWN_TOGGLES
# (names joined by "+" or ",", "none" for none) replaces the list: an A/B's switch. Measured
# with it on a lent H100, 2026-12-05 (`scripts/trusted_ab.py --modes ...`, GPU time):
# enable_integer_range_analysis_in_robustness + vulkan_use_buffer_robust_access_2 changed
# nothing (±0.3 %); disable_robustness took BERT-base's linears 1.06-1.23x and the attention
# forward 1.07-1.23x faster, but it is device-wide and drops the storage-buffer bounds too, so
# it is not taken (wgpu-native's counterpart is per kernel: kernels/common.TRUSTED);
# disable_workgroup_init added nothing to it.
DAWN_TOGGLES = ("-timestamp_quantization",)


def dawn_toggles() -> tuple[str, ...]:
    env = os.environ.get("PYRITE_DAWN_TOGGLES")
    if env is None:
        return DAWN_TOGGLES
    return tuple(t for t in env.replace("+", ",").split(",") if t and t != "none")


def load(impl: str):
    """Import one implementation's module, or None when it is not installed or cannot load."""
    try:
        with _quiet_stderr():
            module = importlib.import_module(IMPLEMENTATIONS[impl])
    except Exception:  # noqa: BLE001 - a missing or broken native library means "not available"
        return None
    if impl == "dawn":
        _set_dawn_toggles()
    return module


def _set_dawn_toggles():
    """Ask Dawn's instance for DAWN_TOGGLES, once, before its first adapter (too late when the
    program made one itself first: then Dawn's defaults stay)."""
    toggles = dawn_toggles()
    if not toggles:
        return
    try:
        from wgpudawn.backends.dawn import extras

        known = extras.all_toggles()
        on = [t for t in toggles if t in known]
        off = [t[1:] for t in toggles if t.startswith("-") and t[1:] in known]
        extras.set_instance_extras(enable_toggles=on, disable_toggles=off)
    except Exception:  # noqa: BLE001 - the instance exists already, or an older wgpudawn
        pass


def adapters(module) -> list:
    try:
        with _quiet_stderr():
            found = list(module.gpu.enumerate_adapters_sync())
    except Exception:  # noqa: BLE001
        return []
    return sorted(found, key=_rank)


def _rank(adapter):
    info = adapter.info
    return (
        _TYPE_RANK.get(info.get("adapter_type", "Unknown"), 3),
        _BACKEND_RANK.get(info.get("backend_type", ""), 1),
    )


def _matches(adapter, index: int, want) -> bool:
    if want is None or want == "":
        return True
    if isinstance(want, int) or (isinstance(want, str) and want.isdigit()):
        return index == int(want)
    want = str(want).lower()
    info = adapter.info
    if want == "cpu":
        return info.get("adapter_type") == "CPU"
    if want == "gpu":
        return info.get("adapter_type") != "CPU"
    text = " ".join(str(info.get(k, "")) for k in ("device", "vendor", "description")).lower()
    return want in text


def choose(backend=None, device=None, features=()) -> tuple:
    """(implementation name, module, adapter) for the request, or DeviceError saying what exists."""
    backend = backend or os.environ.get("PYRITE_BACKEND") or None
    device = device if device is not None else os.environ.get("PYRITE_DEVICE") or None
    if backend is not None and backend not in IMPLEMENTATIONS:
        raise DeviceError(
            f"pyrite: unknown backend {backend!r}; choose one of "
            f"{sorted(IMPLEMENTATIONS)} (PYRITE_BACKEND)"
        )
    order = (backend,) if backend else DEFAULT_ORDER
    seen = []
    for impl in order:
        module = load(impl)
        if module is None:
            seen.append(f"{impl}: not installed or failed to load")
            continue
        found = adapters(module)
        # Dawn's `vulkan` on lavapipe lacks dynamic indexing; it lists nothing usable there
        for index, adapter in enumerate(found):
            if not _matches(adapter, index, device):
                continue
            missing = [f for f in features if f not in adapter.features]
            if missing:
                seen.append(f"{impl}: {adapter.info.get('device')} lacks {missing}")
                continue
            return impl, module, adapter
        names = [a.info.get("device") for a in found] or ["no adapter"]
        seen.append(f"{impl}: {', '.join(map(str, names))}")
    hint = (
        "on a machine with no GPU install Mesa's lavapipe (`apt-get install -y "
        "mesa-vulkan-drivers`)"
    )
    if features:
        hint = f"features {list(features)} were asked for; {hint}"
    raise DeviceError(
        f"pyrite: no WebGPU adapter matches backend={backend!r} device={device!r}. "
        f"Seen: {'; '.join(seen)}. {hint}."
    )
