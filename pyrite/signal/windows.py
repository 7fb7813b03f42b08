"""torch.signal.windows: bartlett, blackman, cosine, exponential, gaussian, general_cosine,
general_hamming, hamming, hann, kaiser, nuttall — each `(M, *, ..., sym=True, dtype=None,
layout=strided, device=None, requires_grad=False)` with torch's checks and definitions
(`sym=False`: the periodic window of spectral analysis, one point longer and its last dropped).

A window is a few thousand numbers at most: each is computed on the host in float64 from
torch's definition and rounded once into float32 (torch computes in the dtype asked for, so in
float32 its points may differ from these by a few ulps).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

from .. import dtypes as D
from ..ops.creation import tensor as _tensor

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _checks(name, M, dtype, layout):
    # torch passes M to linspace's `steps` (an int): a float M is refused there (torch returns
    # early, unchecked, for M of 0 and 1 only: pyrite refuses every float)
    if not isinstance(M, numbers.Integral):
        raise TypeError(f"pyrite: {name}(): argument 'M' must be int, not {type(M).__name__}")
    if M < 0:
        raise ValueError(f"pyrite: {name} requires non-negative window length, got M={M}")
    if layout is not None and str(layout).split(".")[-1] != "strided":
        raise ValueError(f"pyrite: {name} is implemented for strided tensors only, got: {layout}")
    dt = D.float32 if dtype is None else D.from_any(dtype)
    if dt.name not in ("float32", "float64"):
        raise ValueError(f"pyrite: {name} expects float32 or float64 dtypes, got: {dtype}")


def _out(values, requires_grad):
    return _tensor(np.asarray(values, np.float64).astype(np.float32), requires_grad=requires_grad)


def _line(M, start, step):
    """torch.linspace(start, start + (M - 1) * step, M), in float64."""
    return start + step * np.arange(M, dtype=np.float64)


def exponential(M, *, center=None, tau=1.0, sym=True, dtype=None, layout=None, device=None,
                requires_grad=False):  # fmt: skip
    """exp(-|n - center| / tau)."""
    _checks("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"pyrite: Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("pyrite: Center must be None for symmetric windows")
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    return _out(np.exp(-np.abs(_line(M, -center / tau, 1 / tau))), requires_grad)


def cosine(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """sin(pi (n + 1/2) / M) (the sine window)."""
    _checks("cosine", M, dtype, layout)
    c = math.pi / (M + 1 if not sym and M > 1 else M) if M else 0.0
    return _out(np.sin(_line(M, 0.5 * c, c)), requires_grad)


def gaussian(M, *, std=1.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """exp(-((n - (M - 1)/2) / std)^2 / 2)."""
    _checks("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"pyrite: Standard deviation must be positive, got: {std} instead.")
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / (std * math.sqrt(2))
    return _out(np.exp(-(_line(M, start * c, c) ** 2)), requires_grad)


def kaiser(M, *, beta=12.0, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """I0(beta sqrt(1 - (2n / N - 1)^2)) / I0(beta), N = M - 1 (M if not sym)."""
    _checks("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"pyrite: beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _out(np.ones(M), requires_grad)
    c = 2.0 * beta / (M if not sym else M - 1)
    k = np.minimum(_line(M, -beta, c), beta)
    return _out(np.i0(np.sqrt(np.maximum(beta * beta - k * k, 0.0))) / np.i0(beta), requires_grad)


def general_cosine(M, *, a, sym=True, dtype=None, layout=None, device=None,
                   requires_grad=False):  # fmt: skip
    """sum_i (-1)^i a_i cos(2 pi i n / N), N = M - 1 (M if not sym)."""
    _checks("general_cosine", M, dtype, layout)
    if M <= 1:
        return _out(np.ones(M), requires_grad)
    if not isinstance(a, Iterable):
        raise TypeError("pyrite: Coefficients must be a list/tuple")
    a = list(a)
    if not a:
        raise ValueError("pyrite: Coefficients cannot be empty")
    k = _line(M, 0.0, 2 * math.pi / (M if not sym else M - 1))
    w = sum((-1) ** i * float(ai) * np.cos(i * k) for i, ai in enumerate(a))
    return _out(w, requires_grad)


def general_hamming(M, *, alpha=0.54, sym=True, dtype=None, layout=None, device=None,
                    requires_grad=False):  # fmt: skip
    """alpha - (1 - alpha) cos(2 pi n / N)."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype, layout=layout,
                          requires_grad=requires_grad)  # fmt: skip


def hamming(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha = 0.54."""
    return general_hamming(M, sym=sym, dtype=dtype, layout=layout, requires_grad=requires_grad)


def hann(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_hamming with alpha = 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, layout=layout,
                           requires_grad=requires_grad)  # fmt: skip


def blackman(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_cosine with a = (0.42, 0.5, 0.08)."""
    _checks("blackman", M, dtype, layout)
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype, layout=layout,
                          requires_grad=requires_grad)  # fmt: skip


def bartlett(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangle 1 - |2n / N - 1|, N = M - 1 (M if not sym)."""
    _checks("bartlett", M, dtype, layout)
    if M <= 1:
        return _out(np.ones(M), requires_grad)
    return _out(1 - np.abs(_line(M, -1.0, 2 / (M if not sym else M - 1))), requires_grad)


def nuttall(M, *, sym=True, dtype=None, layout=None, device=None, requires_grad=False):
    """general_cosine with Nuttall's four coefficients."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, layout=layout, requires_grad=requires_grad)  # fmt: skip
