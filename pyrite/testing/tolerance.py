"""Tolerances derived from the operation, and an `assert_close` that shows the worst element.

A tolerance here is a rounding-error bound, not a number tuned until a test passes:
- one correctly rounded operation is off by at most u·|x|, u the unit roundoff (2⁻²⁴ in f32);
  WGSL allows more for some built-ins (x/y 2.5 ULP, exp 3 + 2·|x| ULP, sin/cos 2⁻¹¹ absolute on
  [-π, π]: WGSL spec, "Floating Point Accuracy"), hence `ulps`;
- a sum of n terms in any order is within ~n·u·Σ|xᵢ| (Higham, Accuracy and Stability, §4.2);
- a dot product of length K is within ~K·u·Σ|aᵢbᵢ| (Higham §3.1).
Results stored in f16 add one more rounding: pass `rtol=unit_roundoff("float16")` on top.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

F32_U = 2.0**-24  # unit roundoff of float32: half the gap between 1 and the next float

# Unit roundoff 2^-p, p the significand's bits including the implicit one.
_UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# Smallest normal number: GPUs may flush subnormal results to zero (WGSL allows it).
_TINY = {"float64": 2.0**-1022, "float32": 2.0**-126, "float16": 2.0**-14, "bfloat16": 2.0**-126}


class Tol(NamedTuple):
    atol: float | np.ndarray
    rtol: float


def _dtype_name(dtype) -> str:
    """'float32', 'int32', 'bool', ... for a numpy dtype, a pyrite dtype, a type or a name."""
    if getattr(dtype, "is_bool", False):
        return "bool"
    if isinstance(dtype, str) and dtype in ("bfloat16", "bf16"):
        return "bfloat16"
    return np.dtype(getattr(dtype, "np", dtype)).name


def unit_roundoff(dtype) -> float:
    """u for a floating dtype (2⁻²⁴ for float32); 0 for integers and bools, which are exact."""
    return _UNIT_ROUNDOFF.get(_dtype_name(dtype), 0.0)


def elementwise_tol(dtype, ulps: float = 4) -> Tol:
    """For an op computing each output from a few inputs: `ulps` units in the last place,
    relative, plus as many smallest normals absolute (for results flushed from subnormal)."""
    name = _dtype_name(dtype)
    if name not in _UNIT_ROUNDOFF:
        return Tol(0.0, 0.0)
    ulp = 2 * _UNIT_ROUNDOFF[name]  # the gap above 1.0: one ULP, relative
    return Tol(ulps * _TINY[name], ulps * ulp)


def _eps(eps) -> float:
    return float(eps) if isinstance(eps, (int, float, np.floating)) else unit_roundoff(eps)


def sum_tol(abs_values_sum, n: int, eps=F32_U) -> np.ndarray:
    """Absolute bound for a sum of n terms: n·eps·Σ|xᵢ| (`abs_values_sum` may be an array, one
    entry per output; `eps` a number or a dtype)."""
    return max(int(n), 1) * _eps(eps) * np.asarray(abs_values_sum, dtype=np.float64)


def dot_tol(K: int, abs_products_sum, eps=F32_U) -> np.ndarray:
    """Absolute bound for a dot product of length K: K·eps·Σ|aᵢbᵢ| (per output when an array)."""
    return max(int(K), 1) * _eps(eps) * np.asarray(abs_products_sum, dtype=np.float64)


def matmul_tol(a, b, eps=F32_U) -> np.ndarray:
    """Per-element absolute bound for a @ b (numpy matmul rules): K·eps·(|a| @ |b|)."""
    a64 = np.abs(np.asarray(a, dtype=np.float64))
    b64 = np.abs(np.asarray(b, dtype=np.float64))
    return dot_tol(a64.shape[-1], a64 @ b64, eps)


def _to_numpy(x) -> np.ndarray:
    """numpy view of an ndarray, a scalar, a torch tensor or a pyrite Tensor (no imports)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch (and anything shaped like it)
        x = x.detach()
        if hasattr(x, "cpu"):
            x = x.cpu()
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.asarray(x)


def assert_close(actual, expected, atol=0.0, rtol=0.0, msg: str = "", equal_nan: bool = True):
    """Assert |actual - expected| <= atol + rtol·|expected| elementwise, shapes equal.

    `atol` may be an array (one bound per element, as `sum_tol` and `matmul_tol` return). NaN
    must meet NaN (when `equal_nan`) and infinities must match exactly. On failure the message
    names the worst element: its index, both values, the error and what was allowed.
    """
    act, exp = _to_numpy(actual), _to_numpy(expected)
    prefix = f"{msg}: " if msg else ""
    if act.shape != exp.shape:
        raise AssertionError(f"{prefix}shape {act.shape} (actual) != {exp.shape} (expected)")
    a = act.astype(np.float64)
    e = exp.astype(np.float64)
    finite = np.isfinite(a) & np.isfinite(e)
    with np.errstate(invalid="ignore"):
        allowed = np.broadcast_to(np.asarray(atol, dtype=np.float64) + rtol * np.abs(e), e.shape)
        err = np.where(finite, np.abs(a - e), 0.0)
        same_special = (a == e) | (equal_nan & np.isnan(a) & np.isnan(e))
    bad = np.where(finite, err > allowed, ~same_special)
    if not bad.any():
        return

    # Worst element: a non-finite mismatch first, else the largest error relative to its bound.
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(finite, err / allowed, np.inf)
    score = np.where(bad, np.nan_to_num(score, nan=np.inf), -1.0)
    flat = int(np.argmax(score))
    idx = tuple(int(i) for i in np.unravel_index(flat, e.shape)) if e.shape else ()
    av, ev = float(a.reshape(-1)[flat]), float(e.reshape(-1)[flat])
    ok = float(allowed.reshape(-1)[flat])
    rel = abs(av - ev) / abs(ev) if ev != 0 and np.isfinite(ev) else float("nan")
    first = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)[:5]]
    raise AssertionError(
        f"{prefix}{int(bad.sum())} of {bad.size} elements differ beyond atol + rtol·|expected| "
        f"(shape {e.shape}, actual {act.dtype}, expected {exp.dtype}, rtol={rtol:g})\n"
        f"  worst at index {idx}: actual={av!r} expected={ev!r} |diff|={abs(av - ev):.6g} "
        f"allowed={ok:.6g} rel={rel:.3g}\n"
        f"  first mismatches at {first}"
    )
