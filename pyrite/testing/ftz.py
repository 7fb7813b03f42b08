"""Emulate, on lavapipe, a GPU that flushes float32 subnormals (NVIDIA's Vulkan driver: the H100
reads a subnormal input as ±0 wherever a kernel does arithmetic on it and writes a subnormal
result as ±0; `Device.flushes_subnormals`).

lavapipe runs kernels on worker threads that inherit the floating-point environment of the
thread that creates them. `flushing(create)` sets the x86 MXCSR's flush-to-zero and
denormals-are-zero bits, calls `create` (which makes the device: its threads start with them
set), and clears them again in the calling thread, so numpy and torch on the host keep gradual
underflow. The device then reports `flushes_subnormals` True, and pyrite's kernels round as the
H100's do: the GPU's subnormal failures of 2026-12-07 reproduced here to the ulp.

x86-64 with glibc only (fegetenv/fesetenv through ctypes); `PYRITE_EMULATE_FTZ=1` turns it on
for a pytest session (tests/conftest.py: `flushing(backend.current)` before anything
else creates the device).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

_FTZ_DAZ = (1 << 15) | (1 << 6)  # MXCSR: flush to zero, denormals are zero


class _FEnv(ctypes.Structure):  # glibc's x86-64 fenv_t: the x87 environment, then MXCSR
    _fields_ = [("x87", ctypes.c_ubyte * 28), ("mxcsr", ctypes.c_uint32)]


def _set(on: bool) -> None:
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    env = _FEnv()
    if libm.fegetenv(ctypes.byref(env)) != 0:
        raise OSError("pyrite: fegetenv failed")
    env.mxcsr = (env.mxcsr | _FTZ_DAZ) if on else (env.mxcsr & ~_FTZ_DAZ)
    if libm.fesetenv(ctypes.byref(env)) != 0:
        raise OSError("pyrite: fesetenv failed")


def flushing(create):
    """`create()` (which makes the device: lavapipe) with the flush-to-zero and denormals-are-zero
    bits set, so its worker threads start with them; cleared again in this thread afterwards.
    Returns what `create` returns. Raises RuntimeError off x86-64. (The caller creates the
    device: pyrite/testing/ imports no more of pyrite than pyrite.dtypes.)"""
    if platform.machine() not in ("x86_64", "AMD64"):
        raise RuntimeError("pyrite: subnormal flushing is emulated on x86-64 only")
    _set(True)
    try:
        return create()
    finally:
        _set(False)
