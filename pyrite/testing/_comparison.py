"""`torch.testing.assert_close` as ported tests call it (`pr.testing.assert_close(a, b)`,
keywords `rtol=`, `atol=`, `equal_nan=`, `check_dtype=`, `msg=`): tolerances default by dtype
as torch's, tensors (pyrite's or torch's), arrays, numbers and nested sequences or mappings of
them compare element by element. Positional tolerances, `assert_close(a, b, atol, rtol, msg)`,
are the test suite's spelling: they go to `tolerance.assert_close` unchanged.

Dtypes are compared as pyrite holds them (float64 data is float32 here, int64 is int32).
Imports only numpy, the standard library and pyrite.dtypes (tests/test_layering.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..dtypes import from_any as _from_any
from . import tolerance as _tolerance

# torch.testing's defaults: (rtol, atol) by dtype; integers and bools compare exactly
_DEFAULT_TOL = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _is_leaf(x) -> bool:
    return hasattr(x, "dtype") or isinstance(x, (int, float, bool, complex, np.generic))


def _dtype_name(x) -> str:
    """'float32', 'bfloat16', 'int64', ... for a tensor (pyrite's or torch's), an array or a
    Python number (float is float64, as torch compares it)."""
    if hasattr(x, "dtype"):
        return str(x.dtype).rpartition(".")[2]
    if isinstance(x, bool):
        return "bool"
    return "int64" if isinstance(x, int) else "float64"


def _same_dtype(a: str, b: str) -> bool:
    try:
        return _from_any(a) is _from_any(b)
    except (TypeError, ValueError, KeyError):
        return a == b


def _array(x) -> np.ndarray:
    if _dtype_name(x) == "bfloat16" and hasattr(x, "float"):  # numpy has no bfloat16
        x = x.detach().float() if hasattr(x, "detach") else x.float()
    return _tolerance._to_numpy(x)


def _fail(message: str, msg, path: str):
    where = f" (at {path})" if path else ""
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = str(msg)
    raise AssertionError(message + ("" if msg is not None else where))


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, path):
    if not (_is_leaf(actual) and _is_leaf(expected)):
        if isinstance(actual, Mapping) and isinstance(expected, Mapping):
            if set(actual) != set(expected):
                _fail(
                    f"The keys of the mappings do not match: {sorted(map(str, actual))} != "
                    f"{sorted(map(str, expected))}",
                    msg,
                    path,
                )
            for key in actual:
                _compare(actual[key], expected[key], rtol, atol, equal_nan, check_dtype, msg,
                         f"{path}[{key!r}]")  # fmt: skip
            return
        seqs = (Sequence,)
        if isinstance(actual, seqs) and isinstance(expected, seqs):
            if isinstance(actual, str) or isinstance(expected, str):
                if actual != expected:
                    _fail(f"{actual!r} != {expected!r}", msg, path)
                return
            if len(actual) != len(expected):
                _fail(
                    f"The length of the sequences mismatch: {len(actual)} != {len(expected)}",
                    msg,
                    path,
                )
            for i, (a, e) in enumerate(zip(actual, expected)):
                _compare(a, e, rtol, atol, equal_nan, check_dtype, msg, f"{path}[{i}]")
            return
        _fail(f"No comparison for {type(actual).__name__} and {type(expected).__name__}", msg, path)
    da, de = _dtype_name(actual), _dtype_name(expected)
    if check_dtype and hasattr(actual, "dtype") and hasattr(expected, "dtype"):
        if not _same_dtype(da, de):
            _fail(f"The values for attribute 'dtype' do not match: {da} != {de}.", msg, path)
    if rtol is None:
        defaults = [_DEFAULT_TOL.get(d, (0.0, 0.0)) for d in (da, de)]
        rtol = max(r for r, _ in defaults)
        atol = max(a for _, a in defaults)
    a, e = _array(actual), _array(expected)
    if a.shape != e.shape:
        _fail(f"The values for attribute 'shape' do not match: {a.shape} != {e.shape}.", msg,
              path)  # fmt: skip
    try:
        _tolerance.assert_close(a, e, atol, rtol, "Tensor-likes are not close!", equal_nan)
    except AssertionError as err:
        _fail(str(err), msg, path)


def assert_close(actual, expected, *args, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):  # fmt: skip
    """torch.testing.assert_close: |actual - expected| <= atol + rtol·|expected| elementwise,
    shapes and dtypes equal. Give `rtol` and `atol` both or neither (then torch's defaults for
    the dtype: float32 rtol 1.3e-6, atol 1e-5; integers exact). Positional tolerances are
    tolerance.assert_close(actual, expected, atol, rtol, msg, equal_nan)."""
    if args:
        given = {"atol": atol, "rtol": rtol, "msg": msg}
        kw = {k: v for k, v in given.items() if v is not None}
        return _tolerance.assert_close(actual, expected, *args, **kw)
    if (rtol is None) != (atol is None):
        raise ValueError(
            f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
            f"{'rtol' if rtol is None else 'atol'}."
        )
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, "")
    return None
