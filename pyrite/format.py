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
    # PyTorch's rule (torch/_tensor_str.py): scientific when max/min of the nonzero finite
    # magnitudes exceeds 1000, or max > 1e8, or min < 1e-4
    if absmax >= 1e8 or (absmin and absmin < 1e-4) or (absmin and absmax / absmin > 1e3):
        return lambda x: f"{x:.4e}" if np.isfinite(x) else _special(x)
    return lambda x: f"{x:.4f}" if np.isfinite(x) else _special(x)


def _special(x):
    return "nan" if np.isnan(x) else ("inf" if x > 0 else "-inf")


def _shown(arr: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (the first and last _EDGE along every dim)."""
    if arr.size <= _SUMMARIZE:
        return arr
    for d in range(arr.ndim):
        if arr.shape[d] > 2 * _EDGE:
            idx = list(range(_EDGE)) + list(range(arr.shape[d] - _EDGE, arr.shape[d]))
            arr = np.take(arr, idx, axis=d)
    return arr


def format_tensor(t) -> str:
    arr = t._host()  # bfloat16 as float32: numpy has no bf16
    suffix = []
    if t.dtype is not D.float32 and t.dtype is not D.int32 and t.dtype is not D.bool_:
        suffix.append(f"dtype={t.dtype!r}")
    if arr.size == 0:
        if arr.shape != (0,):  # PyTorch names the size of every empty tensor but the 1-D one
            suffix.insert(0, f"size={tuple(arr.shape)}")
        body = "[]"
    else:
        if t.dtype.is_floating_point:
            f = _float_formatter(arr.astype(np.float64).ravel())
            key = "float_kind"
        elif t.dtype.is_bool:
            f = lambda x: "True" if x else "False"
            key = "bool"
        else:
            f = lambda x: f"{x}"
            key = "int"
        # PyTorch right-aligns every element to the widest one (over the shown elements)
        shown = _shown(arr).ravel()
        width = max(len(f(x)) for x in shown) if shown.size else 0
        fmt = {key: lambda x: f(x).rjust(width)}
        body = np.array2string(
            arr,
            separator=", ",
            prefix="tensor(",
            formatter=fmt,
            threshold=_SUMMARIZE,
            edgeitems=_EDGE,
            max_line_width=80,
        )
    tail = "".join(f", {s}" for s in suffix)
    return f"tensor({body}{tail})"
