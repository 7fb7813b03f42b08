"""The rest of what ported scripts call: in-place view changes (t_, transpose_, squeeze_,
unsqueeze_, as_strided_, resize_), sum_to_size, predicates (is_same_size, is_nonzero,
is_signed, can_cast), ravel, empty_strided, scalar_tensor, fill, zero_, the window functions
(hann, hamming, blackman, bartlett, kaiser), the random fills exponential_, geometric_,
log_normal_ and cauchy_, the RNG state, PyTorch's constants (pi, e, inf, nan, newaxis) and
memory formats, and the process-wide knobs (set_num_threads, set_float32_matmul_precision,
use_deterministic_algorithms, ...) that have no effect on a WebGPU device but that scripts set.
"""

from __future__ import annotations

import math
import numbers
import os

from .. import dtypes as D
from ..tensor import Tensor
from .core import empty
from .creation import checks_device
from .elementwise import as_tensor_arg

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None


class memory_format:
    """PyTorch's memory formats, accepted and ignored: pyrite tensors are row-major (a
    channels_last request gives the same values in the default layout)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"pyrite.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")


# ---- in-place view changes ---------------------------------------------------------------------
def _become(self: Tensor, view: Tensor) -> Tensor:
    """self takes view's shape, strides and offset (same storage)."""
    self._shape, self._strides, self._offset = view._shape, view._strides, view._offset
    return self


def t_(self):
    return _become(self, self.t())


def transpose_(self, dim0, dim1):
    return _become(self, self.transpose(dim0, dim1))


def swapaxes_(self, axis0, axis1):
    return _become(self, self.transpose(axis0, axis1))


def squeeze_(self, dim=None):
    return _become(self, self.squeeze(dim))


def unsqueeze_(self, dim):
    return _become(self, self.unsqueeze(dim))


def as_strided_(self, size, stride, storage_offset=None):
    return _become(self, self.as_strided(size, stride, storage_offset))


def resize_(self, *sizes, memory_format=None):
    """A new shape of any size, row-major; the first min(old, new) elements keep their values
    and any new ones are uninitialised, as PyTorch's."""
    from .creation import _size

    shape = _size(sizes, "resize_")
    n = math.prod(shape)
    if n == self.numel() and self.is_contiguous():
        return _become(self, self.reshape(shape))
    fresh = empty(shape, self.dtype)
    keep = min(n, self.numel())
    if keep:
        fresh.reshape(-1)[:keep].copy_(self.reshape(-1)[:keep])
    self._storage, self._base = fresh._storage, None
    return _become(self, fresh)


def resize_as_(self, other, memory_format=None):
    return resize_(self, other._shape)


def sum_to_size(self, *size):
    """Sum the dims broadcasting expanded to reach `size` (the inverse of expand)."""
    from .creation import _size

    shape = _size(size, "sum_to_size")
    lead = self.ndim - len(shape)
    ok = lead >= 0 and all(s in (1, d) for s, d in zip(shape, self._shape[lead:]))
    if not ok:
        raise RuntimeError(
            f"pyrite: size {{{list(shape)}}} is not expandable to size {{{list(self._shape)}}}."
        )
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and self._shape[lead + i] != 1
    )
    r = self.sum(dims, keepdim=True) if dims else self
    return r.reshape(shape) if r._shape != shape else r


# ---- predicates and small constructors ---------------------------------------------------------
def is_same_size(input, other) -> bool:
    return tuple(input._shape) == tuple(other._shape)


def is_nonzero(input) -> bool:
    n = input.numel()
    if n == 0:
        raise RuntimeError("pyrite: Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("pyrite: Boolean value of Tensor with more than one value is ambiguous")
    return bool(input.item())


def is_signed(input) -> bool:
    return bool(input.dtype.is_signed)


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules allow from_ -> to without a category drop (float to int,
    int to bool, ...)."""
    a, b = D.from_any(from_), D.from_any(to)
    return "bif".index(a.kind) <= "bif".index(b.kind)


def ravel(input):
    """The elements as a 1-D tensor, row-major (a view when possible)."""
    return as_tensor_arg(input).reshape(-1)


@checks_device
def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False, **kw):
    """An uninitialised tensor with the given strides (its storage covers every element)."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(
            f"pyrite: empty_strided: mismatch in length of strides and shape ({size}, {stride})"
        )
    span = 1 + sum((d - 1) * abs(s) for d, s in zip(size, stride)) if all(size) else 0
    base = empty((span,), D.from_any(dtype))
    t = base._view(size, stride, 0)
    t.requires_grad = requires_grad
    return t


def _new_empty_strided(self, size, stride, *, dtype=None, **kw):
    return empty_strided(size, stride, dtype=self.dtype if dtype is None else dtype, **kw)


@checks_device
def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False, **kw):
    """A 0-d tensor holding s (float32 unless dtype says otherwise, as PyTorch)."""
    from .creation import full

    if isinstance(s, Tensor):
        s = s.item()
    t = full((), s, dtype=D.float32 if dtype is None else dtype)
    t.requires_grad = requires_grad
    return t


def fill(input, value):
    return as_tensor_arg(input).clone().fill_(value)


def zero_(input):
    return input.fill_(0)


# ---- windows -------------------------------------------------------------------------------------
def _window(name, n, periodic, dtype):
    """The sample positions 0..N-1 as floats (N one larger when periodic), or a finished window
    for the lengths 0 and 1."""
    from .creation import arange, ones

    if not isinstance(n, numbers.Integral):
        raise TypeError(f"pyrite: {name}(): argument 'window_length' must be int")
    if n < 0:
        raise RuntimeError(
            f"pyrite: {name} requires non-negative window_length, got window_length={n}"
        )
    dt = D.float32 if dtype is None else D.from_any(dtype)
    if dt.kind != "f":
        raise RuntimeError(f"pyrite: {name} expects floating point dtypes, got: {dt!r}")
    if n == 0:
        return empty((0,), dt), None, dt
    if n == 1:
        return ones(1, dtype=dt), None, dt
    m = n + 1 if periodic else n
    return None, arange(m, dtype=D.float32), dt


def _finish(w, n, dt):
    return w[:n].to(dt).contiguous()


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, **kw):
    """alpha - beta·cos(2·pi·k / (N - 1)), PyTorch's formula and order of operations."""
    done, k, dt = _window("hamming_window", window_length, periodic, dtype)
    if done is not None:
        return done
    m = k._shape[0]
    w = (k * (2 * math.pi / (m - 1))).cos() * -beta + alpha
    return _finish(w, window_length, dt)


def hann_window(window_length, periodic=True, *, dtype=None, **kw):
    """0.5 - 0.5·cos(2·pi·k / (N - 1))."""
    return hamming_window(window_length, periodic, 0.5, 0.5, dtype=dtype, **kw)


def blackman_window(window_length, periodic=True, *, dtype=None, **kw):
    """0.42 - 0.5·cos(2·pi·k / (N - 1)) + 0.08·cos(4·pi·k / (N - 1))."""
    done, k, dt = _window("blackman_window", window_length, periodic, dtype)
    if done is not None:
        return done
    m = k._shape[0]
    w = k * (math.pi / (m - 1))
    w = (w * 4).cos() * 0.08 - (w * 2).cos() * 0.5 + 0.42
    return _finish(w, window_length, dt)


def bartlett_window(window_length, periodic=True, *, dtype=None, **kw):
    """The triangle 1 - |2k / (N - 1) - 1|, as PyTorch builds it (2k/(N-1), mirrored)."""
    done, k, dt = _window("bartlett_window", window_length, periodic, dtype)
    if done is not None:
        return done
    m = k._shape[0]
    w = k * (2.0 / (m - 1))
    half = ((m - 1) >> 1) + 1
    w[half:] = 2 - w[half:]
    return _finish(w, window_length, dt)


_UNSET = object()


def kaiser_window(window_length, periodic=_UNSET, beta=_UNSET, *, dtype=None, **kw):
    """i0(beta·sqrt(1 - ((k - a) / a)^2)) / i0(beta), a = (N - 1) / 2. torch's overloads take
    `beta` only after `periodic` (kaiser_window(7, beta=5.0) is a TypeError there)."""
    from .creation import full
    from .special import i0

    if periodic is _UNSET and beta is not _UNSET:
        raise TypeError(
            "pyrite: kaiser_window() received an invalid combination of arguments: "
            "`beta` needs `periodic` too (kaiser_window(window_length, periodic, beta))"
        )
    periodic = True if periodic is _UNSET else periodic
    beta = 12.0 if beta is _UNSET else beta
    done, k, dt = _window("kaiser_window", window_length, periodic, dtype)
    if done is not None:
        return done
    m = k._shape[0]
    a = (m - 1) / 2.0
    r = ((k - a) / a) ** 2
    w = i0((1 - r).abs().sqrt() * float(beta)) / i0(full((1,), float(beta)))
    return _finish(w, window_length, dt)


# ---- random fills ------------------------------------------------------------------------------
def _uniform_like(self, generator):
    from .creation import rand

    return rand(self._shape, generator=generator)


def exponential_(self, lambd=1.0, *, generator=None):
    """Exponential(lambd) samples, -log(1 - U) / lambd with U in [0, 1)."""
    if lambd <= 0:
        raise RuntimeError(f"pyrite: exponential_ expects lambda > 0.0, but found lambda={lambd}")
    u = _uniform_like(self, generator)
    return self.copy_((1 - u).log() * (-1.0 / lambd))


def geometric_(self, p, *, generator=None):
    """Geometric(p) samples on {1, 2, ...}: ceil(log(1 - U) / log(1 - p))."""
    if not 0 < p < 1:
        raise RuntimeError(f"pyrite: geometric_ expects p to be in (0, 1), but got p={p}")
    u = _uniform_like(self, generator)
    return self.copy_(((1 - u).log() / math.log1p(-p)).ceil().clamp(min=1))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """exp(Normal(mean, std)) samples."""
    from .creation import randn

    if std <= 0:
        raise RuntimeError(f"pyrite: log_normal_ expects std > 0.0, but found std={std}")
    return self.copy_((randn(self._shape, generator=generator) * std + mean).exp())


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Cauchy(median, sigma) samples, median + sigma·tan(pi·(U - 1/2))."""
    if sigma <= 0:
        raise RuntimeError(f"pyrite: cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    u = _uniform_like(self, generator)
    return self.copy_(((u - 0.5) * math.pi).tan() * sigma + median)


def get_rng_state():
    """The default generator's state (seed and offset) as an int32 tensor of 4 words."""
    from .creation import default_generator

    return default_generator.get_state()


def set_rng_state(new_state):
    from .creation import default_generator

    default_generator.set_state(new_state)


# ---- process-wide knobs ---------------------------------------------------------------------
_KNOBS = {"threads": os.cpu_count() or 1, "interop": os.cpu_count() or 1, "precision": "highest"}
_KNOBS.update(deterministic=False, warn_only=False, warn_always=False)


def get_num_threads() -> int:
    return _KNOBS["threads"]


def set_num_threads(n):
    """Recorded (PyTorch's CPU thread count); pyrite's kernels run on the WebGPU device."""
    if int(n) <= 0:
        raise RuntimeError(f"pyrite: set_num_threads: Expected positive number of threads, got {n}")
    _KNOBS["threads"] = int(n)


def get_num_interop_threads() -> int:
    return _KNOBS["interop"]


def set_num_interop_threads(n):
    _KNOBS["interop"] = int(n)


def get_float32_matmul_precision() -> str:
    return _KNOBS["precision"]


def set_float32_matmul_precision(precision):
    """Recorded; pyrite's matmuls are always full f32 ('highest')."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(
            f"pyrite: set_float32_matmul_precision: Invalid precision {precision!r}; expected "
            "'highest', 'high' or 'medium'"
        )
    _KNOBS["precision"] = precision


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded. pyrite's kernels are deterministic except float atomics (scatter_add,
    index_add, index_put_(accumulate=True)), whose sums may differ in the last bits."""
    _KNOBS["deterministic"], _KNOBS["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _KNOBS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _KNOBS["warn_only"]


def set_warn_always(b):
    _KNOBS["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    return _KNOBS["warn_always"]


def set_flush_denormal(mode) -> bool:
    """False: not supported (GPUs decide denormal handling themselves), as PyTorch answers on
    CPUs without the flag."""
    return False


def _data_ptr(self) -> int:
    """A number identifying where this view's first element lives (storage identity plus byte
    offset), so x.data_ptr() == y.data_ptr() compares as in PyTorch (untyped_storage().data_ptr()
    is the first term: ops/tensor_attrs.py)."""
    return (id(self._storage) << 32) + self._offset * self.dtype.itemsize


_data_ptr._pyrite_plain = True  # (autograd.plain: the bf16 fallback must not widen self first)


FUNCS = {
    "is_same_size": is_same_size,
    "is_nonzero": is_nonzero,
    "is_signed": is_signed,
    "can_cast": can_cast,
    "ravel": ravel,
    "empty_strided": empty_strided,
    "scalar_tensor": scalar_tensor,
    "fill": fill,
    "zero_": zero_,
    "hamming_window": hamming_window,
    "hann_window": hann_window,
    "blackman_window": blackman_window,
    "bartlett_window": bartlett_window,
    "kaiser_window": kaiser_window,
    "get_rng_state": get_rng_state,
    "set_rng_state": set_rng_state,
    "get_num_threads": get_num_threads,
    "set_num_threads": set_num_threads,
    "get_num_interop_threads": get_num_interop_threads,
    "set_num_interop_threads": set_num_interop_threads,
    "get_float32_matmul_precision": get_float32_matmul_precision,
    "set_float32_matmul_precision": set_float32_matmul_precision,
    "use_deterministic_algorithms": use_deterministic_algorithms,
    "are_deterministic_algorithms_enabled": are_deterministic_algorithms_enabled,
    "is_deterministic_algorithms_warn_only_enabled": is_deterministic_algorithms_warn_only_enabled,
    "set_warn_always": set_warn_always,
    "is_warn_always_enabled": is_warn_always_enabled,
    "set_flush_denormal": set_flush_denormal,
    "pi": pi,
    "e": e,
    "inf": inf,
    "nan": nan,
    "newaxis": newaxis,
    "memory_format": memory_format,
    "contiguous_format": contiguous_format,
    "preserve_format": preserve_format,
    "channels_last": channels_last,
    "channels_last_3d": channels_last_3d,
}

__all__ = sorted(FUNCS)

METHODS = {
    "t_": t_,
    "transpose_": transpose_,
    "swapaxes_": swapaxes_,
    "swapdims_": transpose_,
    "squeeze_": squeeze_,
    "unsqueeze_": unsqueeze_,
    "as_strided_": as_strided_,
    "resize_": resize_,
    "resize_as_": resize_as_,
    "sum_to_size": sum_to_size,
    "is_same_size": is_same_size,
    "is_nonzero": is_nonzero,
    "is_signed": is_signed,
    "ravel": ravel,
    "new_empty_strided": _new_empty_strided,
    "exponential_": exponential_,
    "geometric_": geometric_,
    "log_normal_": log_normal_,
    "cauchy_": cauchy_,
    "data_ptr": _data_ptr,
}
