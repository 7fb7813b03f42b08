"""arange, range, linspace and logspace with PyTorch 2.13 CPU's arithmetic, value for value.

torch's CPU kernels (aten/src/ATen/native/RangeFactories.cpp, cpu/RangeFactoriesKernel.cpp):

- linspace: step = (end - start) / (steps - 1) in the result's type (double for integer
  results); element i is `start + step*i` for i < steps // 2, else `end - step*(steps-1-i)`.
  The compiler fuses that multiply-add (one rounding) for float32, float64 and the double of
  integer results (then truncated); float16 / bfloat16 arithmetic rounds the index, the product
  and the sum to the half type each. float32 runs on the device with an emulated fma
  (kernels/common.py p_fma); the other types on the host, then uploaded.
- arange: in torch's accumulate type (double for float32 / float64, float for the half types,
  int64 for integers: the arguments truncated); vectorised in blocks of the CPU's SIMD width,
  each block `base + j*step` from a base `start + step*i0` rounded to the result's type, the
  tail (n % 2w elements) `start + step*i`. The width is AVX2's (8 float32s, 16 halves; also
  aarch64's), the common x86 build; torch on an AVX512 CPU blocks by 16 (README).
- logspace: `pow(double(base), start + step*i)` in double (product and sum rounded apart:
  RangeFactories.cpp is built without FMA, unlike the AVX2 kernels above), step in double from
  the ends' difference in the result's type; the power rounded (integers: truncated) once.
- range: `start + i*step` in the accumulate type (rounded apart, as logspace), size
  `(end - start) / step + 1` in that type, truncated.
The checks are torch 2.13's, on the arguments as given: step nonzero, finite ends, the step's
sign agreeing with end - start.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError
from ..tensor import Tensor
from .core import empty as _empty
from .core import note_bounds, run_map

_WIDTH = {4: 8, 2: 16}  # AVX2's Vectorized<T>::size() by element bytes (float32, half types)


# ---- exact float64 arithmetic on the host (numpy: IEEE, no contraction) ---------------------
def _split(a):
    c = a * 134217729.0  # Veltkamp: 2^27 + 1
    h = c - (c - a)
    return h, a - h


def _two_sum(a, b):
    s = a + b
    bv = s - a
    return s, (a - (s - bv)) + (b - bv)


def _to_odd(z, err):
    """z (the nearest float64 to z + err) rounded to odd instead: one ULP toward err where z is
    even and the sum inexact."""
    fix = (err != 0) & ((z.view(np.int64) & 1) == 0) & np.isfinite(z)
    return np.where(fix, np.nextafter(z, np.copysign(np.inf, err)), z)


def _fma64(a, b, c):
    """a*b + c rounded once to float64 (C's fma), elementwise: Boldo & Melquiond's emulation
    (exact product, TwoSum, the low parts added rounded to odd)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    with np.errstate(all="ignore"):
        p = a * b
        plain = p + c
        ah, al = _split(a)
        bh, bl = _split(b)
        e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
        th, tl = _two_sum(c, p)
        z, err = _two_sum(tl, e)
        r = th + _to_odd(z, err)
        ok = (p != 0) & np.isfinite(p) & np.isfinite(c) & (np.maximum(abs(a), abs(b)) < 1e300)
        return np.where(ok, r, plain)


def _fma32(a, b, c):
    """a*b + c rounded once to float32, for float32 a, b, c whose product float64 holds exactly
    (the half types' arithmetic, done in float by c10): the float64 sum rounded to odd, then
    to float32 (53 >= 24 + 2 bits, so that second rounding is the only one)."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    with np.errstate(all="ignore"):
        s, err = _two_sum(a * b, c)
        return _to_odd(s, err).astype(np.float32)


def _round_half(x, dt):
    """float32 values rounded to the half type dt (nearest even), as float32."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(all="ignore"):
        if dt is D.float16:
            return x.astype(np.float16).astype(np.float32)
        return D.bf16_bits_to_f32(D.f32_to_bf16_bits(x)).reshape(x.shape)


def _to_half(v, dt):
    """A Python number as c10 converts it to a half type: through float."""
    return _round_half(np.float32(v), dt)


def _upload_values(vals, dt, n):
    from .creation import from_host

    if dt.kind == "i":
        vals = D.float_to_int_host(vals, dt) if vals.dtype.kind == "f" else vals
        if dt is D.int32:
            vals = vals.astype(np.int64)
        return from_host(np.ascontiguousarray(vals.reshape(n)), dt)
    return from_host(np.ascontiguousarray(vals.reshape(n), dtype=np.float32), dt)


def _number(v, what, name):
    v = v.item() if isinstance(v, Tensor) else v
    if isinstance(v, (np.generic,)):
        v = v.item()
    if not isinstance(v, numbers.Number) or isinstance(v, complex):
        raise TypeError(
            f"pyrite: {what}(): argument '{name}' must be Number, not {type(v).__name__}"
        )
    return v


# ---- arange / range ---------------------------------------------------------------------------
def _check_range(xs, xe, xst, what):
    if not xst > 0 and not xst < 0:
        raise RuntimeError(f"pyrite: {what}: step must be nonzero")
    if not (math.isfinite(xs) and math.isfinite(xe)):
        raise RuntimeError(f"pyrite: {what}: unsupported range: {xs} -> {xe}")
    if not ((xst > 0 and xe >= xs) or (xst < 0 and xe <= xs)):
        raise RuntimeError(
            f"pyrite: {what}: upper bound and lower bound inconsistent with step sign"
        )


def _acc(v, dt):
    """A Python number as torch's accumulate type for dt holds it (int64 truncates; float for
    the half types; double otherwise)."""
    if dt.kind == "i":
        if isinstance(v, float) and not math.isfinite(v):
            return v  # refused by the finiteness check
        return int(v)
    if dt.itemsize == 2:
        return float(np.float32(v))
    return float(v)


def _fill_ints(out, start, step, n, dt):
    run_map("s0 + gi * s1", (), (), out, "i32", (start, step), ("i32", "i32"))
    if not dt.is_small_int:
        ends = (start, start + (n - 1) * step)
        note_bounds(out, min(ends), max(ends), exact=True)


def _arange_values(start, step, n, dt):
    """torch's vectorised arange kernel (see the module's docstring) on the host."""
    i = np.arange(n, dtype=np.float64)
    w = _WIDTH[min(dt.itemsize, 4)]
    in_block = i < n - n % (2 * w)
    j = i % w
    if dt.itemsize == 2:  # float accumulation, the base rounded to the half type
        s, st = np.float32(start), np.float32(step)
        base = _round_half(_fma32(st, i - j, s), dt)
        vals = np.where(in_block, _fma32(j, st, base), _fma32(st, i, s))
        return _round_half(vals, dt)
    base = _fma64(step, i - j, start).astype(np.float32)
    return np.where(in_block, _fma64(j, step, base), _fma64(step, i, start)).astype(np.float32)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, **kw):
    from .creation import _ignored

    _ignored(kw, "arange")
    if end is None:
        start, end = 0, start
    start, end, step = (
        _number(v, "arange", k) for v, k in ((start, "start"), (end, "end"), (step, "step"))
    )
    if dtype is None:
        dtype = D.float32 if any(isinstance(v, float) for v in (start, end, step)) else D.int32
    dt = D.from_any(dtype)
    if dt.is_bool:
        raise NotImplementedError("pyrite: \"arange_cpu\" not implemented for 'Bool'")
    if dt.is_complex:
        raise NotImplementedError(f'pyrite: "arange_cpu" not implemented for {dt!r}')
    _check_range(float(start), float(end), float(step), "arange")
    xs, xe, xst = (_acc(v, dt) for v in (start, end, step))
    if dt is D.int32:  # pyrite's int32 is torch's int64: the size in integers
        if xst == 0:
            raise ArgumentError(  # (torch: a RuntimeError)
                "pyrite: arange: step must be nonzero (the step truncated to int64)"
            )
        sgn = 1 if xst > 0 else -1
        num = xe - xs + xst - sgn
        n = abs(num) // abs(xst) * (1 if (num >= 0) == (xst > 0) else -1)
    else:
        n = math.ceil((float(end) - float(start)) / float(step))
    if n < 0 or n > 2**63 - 1:  # torch's int64 size check (numpy's own is a ValueError)
        raise RuntimeError("pyrite: arange: invalid size, possible overflow?")
    out = _empty((n,), dt) if dt.kind == "i" or n == 0 else None
    if n and dt.kind == "i":
        _fill_ints(out, xs, xst, n, dt)
    elif n:
        if (
            float(xs).is_integer()
            and float(xst).is_integer()
            and max(abs(xs), abs(xs + (n - 1) * xst)) <= 2048
        ):
            out = _empty((n,), dt)  # whole numbers that every rounding keeps: on the device
            run_map("s0 + f32(gi) * s1", (), (), out, "f32", (xs, xst), ("f32", "f32"))
        else:
            out = _upload_values(_arange_values(xs, xst, n, dt), dt, n)
    if requires_grad:  # (refused for integer dtypes, as torch)
        out.requires_grad_()
    return out


def range_(start, end, step=1, *, dtype=None, device=None, requires_grad=False, **kw):
    """Deprecated in PyTorch: [start, end] inclusive, float32 by default."""
    from .creation import _ignored

    _ignored(kw, "range")
    start, end, step = (
        _number(v, "range", k) for v, k in ((start, "start"), (end, "end"), (step, "step"))
    )
    dt = D.float32 if dtype is None else D.from_any(dtype)
    if dt.is_bool or dt.is_complex:
        name = {"bool": "Bool"}.get(dt.name, dt.name)
        raise NotImplementedError(f"pyrite: \"range_cpu\" not implemented for '{name}'")
    _check_range(float(start), float(end), float(step), "range")
    xs, xe, xst = (_acc(v, dt) for v in (start, end, step))
    if xst == 0:  # (torch divides by it: SIGFPE)
        raise ArgumentError(  # (torch: a RuntimeError)
            "pyrite: range: step must be nonzero (the step truncated to an integer)"
        )
    if dt.kind == "i":  # C's truncating division (the signs agree here)
        n = abs(xe - xs) // abs(xst) + 1
    elif dt.itemsize == 2:
        n = int(np.float32(np.float32(xe - xs) / np.float32(xst)) + 1)
    else:
        n = int((xe - xs) / xst + 1)
    out = _empty((n,), dt)
    if n and dt.kind == "i":
        _fill_ints(out, xs, xst, n, dt)
    elif n:
        i = np.arange(n, dtype=np.float64)
        if dt.itemsize == 2:
            f32 = np.float32
            vals = _round_half(f32(xs) + i.astype(f32) * f32(xst), dt)
        else:
            vals = (xs + i * xst).astype(np.float32)
        out = _upload_values(vals, dt, n)
    if requires_grad:  # (refused for integer dtypes, as torch)
        out.requires_grad_()
    return out


# ---- linspace / logspace ----------------------------------------------------------------------
def _steps(steps, name):
    if isinstance(steps, Tensor) and steps.numel() == 1 and steps.dtype.kind == "i":
        steps = steps.item()
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool):
        raise TypeError(
            f"pyrite: {name}(): argument 'steps' must be int, not {type(steps).__name__}"
        )
    if steps < 0:
        raise RuntimeError(f"pyrite: {name}: number of steps must be non-negative (got {steps})")
    return int(steps)


def _ends(start, end, dt, name):
    """The ends as torch's `Scalar::to<scalar_t>()` converts them (checked for overflow)."""
    from .casts import fill_value

    start, end = (_number(v, name, k) for v, k in ((start, "start"), (end, "end")))
    if dt.is_bool:
        raise NotImplementedError(f"pyrite: \"{name}_cpu\" not implemented for 'Bool'")
    if dt.is_complex:
        from .complex import ComplexError

        raise ComplexError(f"pyrite: {name} does not support complex results yet")
    start, end = (fill_value(v, dt) for v in (start, end))
    if dt.kind == "i":
        return D.wrap_int(int(start), dt), D.wrap_int(int(end), dt)
    if dt.itemsize == 2:
        return _to_half(start, dt), _to_half(end, dt)
    return float(np.float32(start)), float(np.float32(end))


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    from .creation import _ignored

    _ignored(kw, "linspace")
    dt = D.from_any(dtype)
    s, e = _ends(start, end, dt, "linspace")
    steps = _steps(steps, "linspace")
    out = _empty((steps,), dt)
    if steps == 1:
        out.fill_(s)
    elif steps > 1:
        half = steps // 2
        i = np.arange(steps, dtype=np.float64)
        k = steps - 1 - i
        if dt.kind == "i":  # the step in double; the fused multiply-add truncated
            st = (float(e) - float(s)) / (steps - 1)
            vals = np.where(i < half, _fma64(st, i, s), _fma64(-st, k, e))
            out = _upload_values(vals, dt, steps)
        elif dt.itemsize == 2:  # c10's half arithmetic: each operation rounded to the type
            with np.errstate(all="ignore"):
                st = _round_half(
                    _round_half(e - s, dt) / _round_half(np.float32(steps - 1), dt), dt
                )
                up = _round_half(s + _round_half(st * _round_half(i, dt), dt), dt)
                down = _round_half(e - _round_half(st * _round_half(k, dt), dt), dt)
            out = _upload_values(np.where(i < half, up, down), dt, steps)
        else:  # float32: the step in float32, each element one fused multiply-add
            f32 = np.float32
            with np.errstate(all="ignore"):
                st = float((f32(e) - f32(s)) / f32(steps - 1))
            run_map(
                "select(p_fma(-s2, f32(s3 - 1 - gi), s1), p_fma(s2, f32(gi), s0), gi < s3 / 2)",
                (),
                (),
                out,
                "f32",
                (s, e, st, steps),
                ("f32", "f32", "f32", "i32"),
            )
    if requires_grad:  # (refused for integer dtypes, as torch)
        out.requires_grad_()
    return out


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False, **kw):
    from .creation import _ignored

    _ignored(kw, "logspace")
    dt = D.from_any(dtype)
    steps = _steps(steps, "logspace")
    base = float(_number(base, "logspace", "base"))
    s, e = _ends(start, end, dt, "logspace")
    if steps == 0:
        out = _empty((0,), dt)
    else:
        i = np.arange(steps, dtype=np.float64)
        with np.errstate(all="ignore"):
            if steps == 1:  # torch: pow(base, start) of the start as given
                x = np.full(1, float(_number(start, "logspace", "start")))
            else:
                if dt.kind == "i":  # the ends' difference in the result's type, then double
                    diff = float(D.wrap_int(int(e) - int(s), dt))
                elif dt.itemsize == 2:
                    diff = float(_round_half(np.float32(e) - np.float32(s), dt))
                else:
                    diff = float(np.float32(e) - np.float32(s))
                st = diff / (steps - 1)
                x = np.where(i < steps // 2, float(s) + st * i, float(e) - st * (steps - 1 - i))
            vals = np.power(base, x)
        if dt.kind == "i":
            out = _upload_values(vals, dt, steps)
        else:
            with np.errstate(over="ignore"):
                vals = vals.astype(np.float32)
            if dt.itemsize == 2:
                vals = _round_half(vals, dt)
            out = _upload_values(vals, dt, steps)
    if requires_grad:  # (refused for integer dtypes, as torch)
        out.requires_grad_()
    return out
