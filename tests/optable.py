"""The op table: one row per op drives its parity tests against a float64 numpy or torch oracle.

A row names the op, how to call it on pyrite tensors, the reference on numpy arrays, the sample
inputs (shapes drawn awkward: 1, primes, tile+1, non-contiguous, broadcast, and one past 65,535
workgroups), the dtypes, and a tolerance derived from the operation. Each area's test module
builds its rows and parametrizes `check_row` over them:

    ROWS = [OpInfo("exp", lambda x: x.exp(), np.exp, unary_samples(), tol=ulp_tol(4)), ...]

    @pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
    def test_parity(row, rng):
        check_row(row, rng)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import pyrite as pr
from pyrite.testing.tolerance import assert_close  # noqa: F401  (re-exported to test modules)

EPS32 = 2.0**-24  # unit roundoff of float32
EPS16 = 2.0**-11
EPSBF16 = 2.0**-8  # bfloat16: 8 significant bits
SMALL_INTS = ("uint8", "int8", "int16")


@dataclasses.dataclass
class Sample:
    """Inputs of one call: arrays (made by `make(rng)`), plus keyword arguments."""

    make: Callable  # rng -> list of numpy arrays (float64 for floats)
    kwargs: dict = dataclasses.field(default_factory=dict)
    # how to lay each input out on the device: "c" contiguous, "t" transposed view,
    # "s" strided slice, "e" expanded (broadcast view)
    layout: str = ""
    name: str = ""


@dataclasses.dataclass
class OpInfo:
    name: str
    op: Callable  # (*pyrite tensors, **kwargs) -> pyrite tensor (or tuple)
    ref: Callable  # (*numpy float64 arrays, **kwargs) -> numpy array (or tuple)
    samples: list
    tol: Callable = None  # (numpy inputs, expected) -> (atol, rtol)
    dtypes: tuple = ("float32",)
    exact: bool = False  # integer / bool results must match exactly


def has_f16() -> bool:
    from pyrite import backend

    return backend.current().has_f16


def ulp_tol(ulps=4, eps=EPS32):
    """Elementwise ops: a few units in the last place, relative, with an absolute floor."""
    return lambda inputs, expected: (ulps * eps, ulps * eps)


def sum_tol(eps=EPS32):
    """A sum of n terms in f32: |error| <= n·eps·Σ|x| <= n²·eps·max|x| (n terms an output)."""

    def tol(inputs, expected):
        x = np.abs(inputs[0])
        n = max(1, x.size // max(1, np.size(expected)))
        return n * n * eps * float(x.max(initial=0.0)) + eps, 4 * eps

    return tol


def to_device(a: np.ndarray, dtype: str | None, layout: str):
    """A pyrite tensor holding `a` as `dtype` (None: inferred, as pr.tensor does), laid out as
    asked (the values are unchanged): 'c' contiguous, 't' a transposed view, 's' a strided
    slice, 'e' an expanded row where `a`'s rows are all equal."""
    dt = None if dtype is None else getattr(pr, dtype)
    if layout == "t" and a.ndim >= 2:
        t = pr.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), dtype=dt)
        return t.transpose(-1, -2)
    if layout == "s" and a.ndim >= 1:
        wide = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), dtype=a.dtype)
        wide[..., ::2] = a
        return pr.tensor(wide, dtype=dt)[..., ::2]
    if layout == "e" and a.ndim >= 1 and a.shape[0] > 1 and np.all(a == a[:1]):
        return pr.tensor(a[:1], dtype=dt).expand(*a.shape)
    return pr.tensor(a, dtype=dt)


def laid_out(a: np.ndarray, layout: str = "c"):
    """to_device with the dtype inferred from `a`."""
    return to_device(a, None, layout)


def round_to(a: np.ndarray, dtype: str) -> np.ndarray:
    """The float64 values the device actually holds for `a` stored as `dtype`. For the small
    integer dtypes a float sample is scaled to spread over the type's range (x·50, rounded, so
    randn samples cover about ±150) and wrapped as PyTorch casts: an int64 array."""
    if dtype == "float32":
        return a.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":
        from pyrite import dtypes as D

        return D.bf16_bits_to_f32(D.f32_to_bf16_bits(a.astype(np.float32))).astype(np.float64)
    if dtype in SMALL_INTS:
        from pyrite import dtypes as D

        return D.wrap_array(np.round(a * 50), getattr(pr, dtype))
    return a


def check_row(row: OpInfo, rng, dtype=None):
    for dtype in row.dtypes if dtype is None else (dtype,):
        if dtype == "float16" and not has_f16():
            continue  # that device's refusal is tested once, in test_errors.py
        for sample in row.samples:
            made = sample.make(rng)
            arrays = [round_to(a, dtype) if a.dtype.kind == "f" else a for a in made]
            layout = sample.layout or "c" * len(arrays)
            tensors = [
                to_device(a, dtype if m.dtype.kind == "f" else _dt(a), lay)
                for a, m, lay in zip(arrays, made, layout)
            ]
            got = row.op(*tensors, **sample.kwargs)
            want = row.ref(*arrays, **sample.kwargs)
            _compare(row, sample, arrays, got, want, dtype)


def _dt(a):
    return {"b": "bool", "i": "int32", "u": "int32"}[a.dtype.kind]


def _compare(row, sample, arrays, got, want, dtype):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _compare(row, sample, arrays, g, w, dtype)
        return
    if isinstance(got, pr.Tensor) and got.dtype is pr.bfloat16:
        got = got.float()  # numpy has no bfloat16; the float32 values are exact
    g = got.numpy() if isinstance(got, pr.Tensor) else np.asarray(got)
    w = np.asarray(want)
    where = (
        f"{row.name} [{sample.name or sample.kwargs}] dtype={dtype} shapes="
        + f"{[a.shape for a in arrays]}"
    )
    assert g.shape == w.shape, f"{where}: shape {g.shape}, expected {w.shape}"
    if row.exact or w.dtype.kind in "biu":
        bad = np.argwhere(g != w)
        assert bad.size == 0, (
            f"{where}: {len(bad)} mismatches, first at {tuple(bad[0])}: "
            f"got {g[tuple(bad[0])]}, expected {w[tuple(bad[0])]}"
        )
        return
    atol, rtol = row.tol(arrays, w) if row.tol else (1e-6, 1e-5)
    if dtype == "float16":
        atol, rtol = max(atol, 2 * EPS16), max(rtol, 4 * EPS16)
    if dtype == "bfloat16":  # the result rounded once more to 8 bits, the inputs already were
        atol, rtol = max(atol, 2 * EPSBF16), max(rtol, 4 * EPSBF16)
    assert_close(g.astype(np.float64), w.astype(np.float64), atol, rtol, where)
