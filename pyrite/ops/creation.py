"""Making tensors: from host data, filled, ranges, identity; random ones are in ops/random.py
(re-exported here)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor
from .core import empty as _empty
from .core import run_map
from .core import upload as _upload


def _size(size, name="tensor"):
    """A shape from PyTorch's size forms: f(2, 3), f((2, 3)), f([2, 3]), f(Size), 0-d or 1-d
    int tensors; TypeError for non-integers, RuntimeError for negative sizes (torch's)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and isinstance(size[0], Tensor) and size[0].ndim == 1:
        size = tuple(size[0].tolist())
    shape = []
    for i, s in enumerate(size):
        if isinstance(s, Tensor) and s.numel() == 1 and s.dtype.kind in "ib":
            s = s.item()
        if not isinstance(s, numbers.Integral):
            raise TypeError(
                f"pyrite: {name}(): argument 'size' must be a tuple of ints, but found element "
                f"of type {type(s).__name__} at pos {i}"
            )
        shape.append(int(s))
    shape = tuple(shape)
    for s in shape:
        if s < 0:
            raise RuntimeError(
                f"pyrite: {name}: Trying to create tensor with negative dimension {s}: "
                f"{list(shape)}"
            )
    return shape


def _size_args(size, kw, name):
    """`f(*size)` or `f(size=...)`, not both."""
    if kw is not None:
        if size:
            raise TypeError(f"pyrite: {name}() got multiple values for argument 'size'")
        size = (kw,)
    return _size(size, name)


def _host_dtype(arr: np.ndarray):
    k = arr.dtype.kind
    if k == "b":
        return D.bool_
    if k in "iu":
        return D.int32
    if k == "f":
        return D.float16 if arr.dtype == np.float16 else D.float32
    raise TypeError(f"pyrite: unsupported data type {arr.dtype} (supported: float, int, bool)")


def _to_numpy(data):
    if isinstance(data, np.ndarray):
        return data
    mod = type(data).__module__
    if mod.startswith("torch"):
        t = data.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        data = _nested_numpy(data)
    if data is None:
        raise RuntimeError("pyrite: Could not infer dtype of NoneType (tensor(None))")
    try:
        arr = np.asarray(data)
    except ValueError:  # numpy's words for a ragged list; PyTorch raises ValueError too
        raise ValueError(
            f"pyrite: could not make a tensor from {type(data).__name__}; nested sequences "
            f"must be rectangular (every row the same length): {_ragged(data)}"
        ) from None
    if arr.dtype == object:
        raise TypeError(
            f"pyrite: could not make a tensor from {type(data).__name__}; "
            "nested sequences must be rectangular and hold numbers"
        )
    if arr.dtype.kind in "USV":
        bad = next((x for x in _flat(data) if isinstance(x, (str, bytes))), data)
        raise TypeError(f"pyrite: tensor(): invalid data type '{type(bad).__name__}'")
    return arr


def _ragged(data, dim=0):
    """PyTorch's words for the first row of the wrong length in a nested list."""
    if not isinstance(data, (list, tuple)) or not data:
        return "ragged"
    lens = [len(x) if isinstance(x, (list, tuple)) else None for x in data]
    first = lens[0]
    for n in lens[1:]:
        if n != first:
            return f"expected sequence of length {first} at dim {dim + 1} (got {n})"
    for x in data:
        msg = _ragged(x, dim + 1)
        if msg != "ragged":
            return msg
    return "ragged"


def _flat(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)
    else:
        yield x


def _nested_numpy(x):
    if isinstance(x, Tensor):
        return x.numpy()
    if isinstance(x, (list, tuple)):
        return [_nested_numpy(y) for y in x]
    return x


def from_host(arr: np.ndarray, dtype=None) -> Tensor:
    """Upload a numpy array (any layout) as a new contiguous tensor."""
    src_dtype = _host_dtype(arr)
    dt = D.from_any(dtype) if dtype is not None else src_dtype
    if dt is D.int32 and arr.dtype.kind in "iu" and arr.size and arr.dtype.itemsize > 4:
        lo, hi = arr.min(), arr.max()
        if lo < D.INT32_MIN or hi > D.INT32_MAX:
            raise OverflowError(
                f"pyrite: integer values in [{lo}, {hi}] do not fit in int32, "
                "pyrite's integer storage (WebGPU has no 64-bit integers)"
            )
    if dt is D.bool_:
        host = np.ascontiguousarray(arr != 0 if arr.dtype != bool else arr, dtype=np.uint32)
    else:
        if dt is D.int32 and arr.dtype.kind == "f":
            arr = np.trunc(arr)
        host = np.ascontiguousarray(arr, dtype=dt.np)
    return _upload(host, dt, arr.shape)


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    if isinstance(data, Tensor):
        t = data.clone() if dtype is None else data.to(dtype).clone()
    else:
        arr = _to_numpy(data)
        if dtype is None and arr.dtype.kind == "f" and arr.dtype != np.float16:
            arr = arr.astype(np.float32, copy=False)
        t = from_host(arr, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    return from_host(arr)


def asarray(obj, dtype=None, device=None, copy=None, requires_grad=False):
    return as_tensor(obj, dtype=dtype)


# keyword arguments PyTorch's factories take that mean nothing here (one device, one layout)
_IGNORED = ("layout", "pin_memory", "memory_format", "names", "out")


def _ignored(kw, name):
    bad = [k for k in kw if k not in _IGNORED]
    if bad:
        raise TypeError(f"pyrite: {name}() got an unexpected keyword argument '{bad[0]}'")


def empty(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "empty")
    _ignored(kw, "empty")
    t = _empty(shape, D.from_any(dtype))
    t.requires_grad = requires_grad
    return t


def _check_fill(fill_value, name):
    if isinstance(fill_value, Tensor):
        if fill_value.numel() != 1:
            raise RuntimeError(
                f"pyrite: {name}: fill_value must be a number or a 1-element tensor, got a "
                f"tensor of shape {tuple(fill_value._shape)}"
            )
        return fill_value.item()
    if not isinstance(fill_value, (numbers.Number, np.bool_)) or isinstance(fill_value, complex):
        raise TypeError(
            f"pyrite: {name}(): argument 'fill_value' must be Number, not "
            f"{type(fill_value).__name__}"
        )
    return fill_value


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _ignored(kw, "full")
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        size = (size,)  # PyTorch wants a sequence here; an int is accepted as (int,)
    shape = _size((size,), "full")
    fill_value = _check_fill(fill_value, "full")
    if dtype is None:
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = D.bool_
        elif isinstance(fill_value, numbers.Integral):
            dtype = D.int32
        else:
            dtype = D.float32
    dt = D.from_any(dtype)
    t = _empty(shape, dt)
    t.fill_(fill_value)
    t.requires_grad = requires_grad
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "zeros")
    _ignored(kw, "zeros")
    return full(shape, 0, dtype=D.from_any(dtype), requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "ones")
    _ignored(kw, "ones")
    return full(shape, 1, dtype=D.from_any(dtype), requires_grad=requires_grad)


def _like_dtype(x, dtype):
    return x.dtype if dtype is None else D.from_any(dtype)


def empty_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "empty_like")
    t = _empty(input._shape, _like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


def zeros_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "zeros_like")
    t = full(input._shape, 0, dtype=_like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


def ones_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "ones_like")
    t = full(input._shape, 1, dtype=_like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "full_like")
    t = full(input._shape, fill_value, dtype=_like_dtype(input, dtype))
    t.requires_grad = requires_grad
    return t


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "new_full")
    t = full(size, fill_value, dtype=_like_dtype(self, dtype))
    t.requires_grad = requires_grad
    return t


def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_zeros")
    _ignored(kw, "new_zeros")
    return full(shape, 0, dtype=_like_dtype(self, dtype), requires_grad=requires_grad)


def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_ones")
    _ignored(kw, "new_ones")
    return full(shape, 1, dtype=_like_dtype(self, dtype), requires_grad=requires_grad)


def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_empty")
    _ignored(kw, "new_empty")
    t = _empty(shape, _like_dtype(self, dtype))
    t.requires_grad = requires_grad
    return t


def _new_tensor(self, data, dtype=None, **_):
    return tensor(
        data, dtype=_like_dtype(self, dtype) if dtype or not isinstance(data, Tensor) else None
    )


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    for name, v in zip(("start", "end", "step"), vals):
        if not isinstance(v, numbers.Real):
            raise TypeError(
                f"pyrite: arange(): argument '{name}' must be a number, not {type(v).__name__}"
            )
    start, end, step = vals
    if not all(math.isfinite(v) for v in vals):
        raise RuntimeError(f"pyrite: arange: unsupported range: {start} -> {end} (step {step})")
    if step == 0:
        raise RuntimeError("pyrite: arange: step must be nonzero")
    if (end - start) * step < 0:  # as PyTorch: arange(4, 2) is an error, not empty
        raise RuntimeError(
            f"pyrite: arange: upper bound and lower bound inconsistent with step "
            f"sign (start={start}, end={end}, step={step})"
        )
    if dtype is None:
        dtype = D.float32 if any(isinstance(v, float) for v in vals) else D.int32
    dt = D.from_any(dtype)
    if dt.is_bool:
        raise TypeError('pyrite: "arange" is not implemented for pyrite.bool (as in PyTorch)')
    n = max(0, math.ceil((end - start) / step))
    out = _empty((n,), dt)
    if n:
        if dt.kind == "f":
            run_map("s0 + f32(gi) * s1", (), (), out, "f32", (start, step), ("f32", "f32"))
        else:
            run_map("s0 + gi * s1", (), (), out, "i32", (int(start), int(step)), ("i32", "i32"))
    out.requires_grad = requires_grad
    return out


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


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _ignored(kw, "linspace")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    dt = D.from_any(dtype)
    steps = _steps(steps, "linspace")
    out = _empty((steps,), dt)
    if steps == 1:
        out.fill_(start)
    elif steps > 1:
        # the step as PyTorch computes it for a float result: in the result's float type
        f32 = np.float32
        step = (
            float((f32(end) - f32(start)) / f32(steps - 1))
            if dt.kind == "f"
            else (end - start) / (steps - 1)
        )
        # PyTorch's symmetric form: the first half counts up from start, the rest down from end
        run_map(
            "select(s1 - s2 * f32(s3 - 1 - gi), s0 + s2 * f32(gi), gi < s3 / 2)",
            (),
            (),
            out,
            "f32",
            (start, end, step, steps),
            ("f32", "f32", "f32", "i32"),
        )
    out.requires_grad = requires_grad
    return out


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "logspace")
    steps = _steps(steps, "logspace")
    out = (linspace(start, end, steps) * math.log2(base)).exp2().to(D.from_any(dtype))
    out.requires_grad = requires_grad
    return out


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    _ignored(kw, "eye")
    for name, v in (("n", n), ("m", m)):
        if v is None and name == "m":
            continue
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise TypeError(f"pyrite: eye(): argument '{name}' must be int, not {type(v).__name__}")
        if v < 0:
            raise RuntimeError(f"pyrite: eye: {name} must be greater or equal to 0, got {v}")
    m = n if m is None else m
    rows = arange(n).unsqueeze(1)
    cols = arange(m).unsqueeze(0)
    out = (rows == cols).to(D.from_any(dtype))
    out.requires_grad = requires_grad
    return out


# ---- random: ops/random.py (imported here, after the names it uses are defined) ---------------
from .random import (  # noqa: E402
    Generator,
    _bernoulli_,
    _normal_,
    _random_,
    _uniform_,
    bernoulli,
    default_generator,
    initial_seed,
    manual_seed,
    normal,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    seed,
)

__all__ = [
    "Generator",
    "arange",
    "as_tensor",
    "asarray",
    "bernoulli",
    "default_generator",
    "empty",
    "empty_like",
    "eye",
    "from_numpy",
    "full",
    "full_like",
    "initial_seed",
    "linspace",
    "logspace",
    "manual_seed",
    "normal",
    "ones",
    "ones_like",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "tensor",
    "zeros",
    "zeros_like",
]

METHODS = {
    "new_full": _new_full,
    "new_zeros": _new_zeros,
    "new_ones": _new_ones,
    "new_empty": _new_empty,
    "new_tensor": _new_tensor,
    "uniform_": _uniform_,
    "normal_": _normal_,
    "random_": _random_,
    "bernoulli_": _bernoulli_,
    "bernoulli": lambda self, p=None, **kw: bernoulli(self, p, **kw),
}
