"""`repr` of a tensor, in PyTorch's style: `tensor([[1.0000, 2.5000]], dtype=pyrite.float16)`."""

from __future__ import annotations

import numpy as np

from . import dtypes as D

_SUMMARIZE = 1000  # elements past which the middle is elided, as PyTorch's `threshold`
_EDGE = 3


def _float_formatter(values: np.ndarray):
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return lambda x: f"{x}"
    absmax = float(np.abs(finite).max())
    nonzero = np.abs(finite[finite != 0])
    absmin = float(nonzero.min()) if nonzero.size else 0.0
    if np.all(finite == np.round(finite)) and absmax < 1e8:
        return lambda x: f"{x:.0f}." if np.isfinite(x) else _special(x)
    if absmax >= 1e8 or (absmin and absmin < 1e-4) or (absmin and absmax / absmin > 1e3
                                                        and absmax > 1e3):
        return lambda x: f"{x:.4e}" if np.isfinite(x) else _special(x)
    return lambda x: f"{x:.4f}" if np.isfinite(x) else _special(x)


def _special(x):
    return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")


def format_tensor(t) -> str:
    arr = t.numpy()
    suffix = []
    if t.dtype is not D.float32 and t.dtype is not D.int32 and t.dtype is not D.bool_:
        suffix.append(f"dtype={t.dtype!r}")
    if arr.size == 0:
        suffix.insert(0, f"size={tuple(arr.shape)}")
        body = "[]"
    else:
        if t.dtype.is_floating_point:
            fmt = {"float_kind": _float_formatter(arr.astype(np.float64).ravel())}
        elif t.dtype.is_bool:
            fmt = {"bool": lambda x: "True" if x else "False"}
        else:
            fmt = {"int": lambda x: f"{x}"}
        body = np.array2string(arr, separator=", ", prefix="tensor(", formatter=fmt,
                               threshold=_SUMMARIZE, edgeitems=_EDGE, max_line_width=80)
    tail = "".join(f", {s}" for s in suffix)
    return f"tensor({body}{tail})"
