"""Making tensors: from host data, filled, ranges, identity; random ones are in ops/random.py
(re-exported here)."""

from __future__ import annotations

import functools
import numbers

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentTypeError
from ..tensor import Tensor, check_device
from .core import empty as _empty
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


_HOST_DTYPES = {
    np.dtype(np.uint8): D.uint8,
    np.dtype(np.int8): D.int8,
    np.dtype(np.int16): D.int16,
    np.dtype(np.float16): D.float16,
}


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
    hit = _HOST_DTYPES.get(arr.dtype)
    if hit is not None:
        return hit
    if k in "iu":
        return D.int32  # int32, int64, uint16, uint32: held as int32 (range-checked)
    if k == "f":
        return D.float32
    if k == "c":
        return D.complex64  # (complex128 narrowed, as float64)
    raise TypeError(
        f"pyrite: unsupported data type {arr.dtype} (supported: float, int, uint8, bool, complex)"
    )


def _is_torch(data) -> bool:
    return type(data).__module__.startswith("torch") and hasattr(data, "detach")


def _torch_bf16_bits(t) -> np.ndarray:
    """A torch.bfloat16 tensor's bits as a uint16 array, without widening it."""
    import torch  # only reached with a torch tensor in hand

    return t.detach().cpu().contiguous().view(torch.int16).numpy().view(np.uint16)


def _to_numpy(data):
    if isinstance(data, np.ndarray):
        return data
    if _is_torch(data):
        t = data.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return D.bf16_bits_to_f32(_torch_bf16_bits(t)).reshape(tuple(t.shape))
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
        # torch reads a tensor inside a list as a Python scalar: one element, whatever its
        # shape (tensor([tensor([1.]), tensor([2.])]) has shape (2,))
        if x.numel() != 1:
            raise ValueError("pyrite: only one element tensors can be converted to Python scalars")
        x = x.reshape(())
        return (x.float() if x.dtype is D.bfloat16 else x).numpy()
    if isinstance(x, (list, tuple)):
        return [_nested_numpy(y) for y in x]
    return x


def _host_storage(arr: np.ndarray, dt) -> np.ndarray:
    """A host array as dt's storage words (dtype.np), with PyTorch's cast rules: floats → ints
    truncated through int32 (NaN, inf, out of range → INT32_MIN) and wrapped; ints wrapped to
    small widths; floats → bfloat16 rounded to nearest even."""
    if dt is D.bool_:
        return np.ascontiguousarray(arr != 0 if arr.dtype != bool else arr, dtype=np.uint32)
    if dt is D.bfloat16:
        return D.f32_to_bf16_bits(arr.astype(np.float32, copy=False))
    if dt.kind == "i":
        if arr.dtype.kind == "f":
            if dt is D.int32:
                _check_int32(np.trunc(arr[np.isfinite(arr)]) if arr.size else arr)
            return D.float_to_int_host(arr, dt).astype(np.int32)
        if arr.dtype.kind in "iub":
            if dt is D.int32:
                _check_int32(arr)
                return np.ascontiguousarray(arr, dtype=np.int32)
            return D.wrap_array(arr, dt).astype(np.int32)
    return np.ascontiguousarray(arr, dtype=dt.np)


def _check_int32(arr):
    if arr.size and (arr.dtype.itemsize > 4 or arr.dtype.kind == "f" or arr.dtype == np.uint32):
        lo, hi = arr.min(), arr.max()
        if lo < D.INT32_MIN or hi > D.INT32_MAX:
            raise OverflowError(
                f"pyrite: integer values in [{lo}, {hi}] do not fit in int32, "
                "pyrite's integer storage (WebGPU has no 64-bit integers)"
            )


def from_host(arr: np.ndarray, dtype=None) -> Tensor:
    """Upload a numpy array (any layout) as a new contiguous tensor."""
    src_dtype = _host_dtype(arr)
    dt = D.from_any(dtype) if dtype is not None else src_dtype
    return _upload(_host_storage(arr, dt), dt, arr.shape)


def _check_python_values(data, arr, dt):
    """torch.tensor(list, dtype=uint8) refuses values outside the type (c10::overflows), where
    a numpy array's values are cast (wrapped) instead."""
    if dt.kind != "i" or dt is D.int32 or not arr.size or arr.dtype.kind not in "iuf":
        return
    from .casts import fill_value

    lo, hi = arr.min(), arr.max()
    for v in (lo, hi):
        fill_value(v.item(), dt)


def checks_device(fn):
    """A factory whose `device=` keyword is checked as torch checks it (tensor.check_device):
    a misspelt device string raises instead of being ignored."""

    @functools.wraps(fn)
    def wrapper(*args, **kw):  # (named as backend/replay._WRAPPERS knows a pass-through frame)
        d = kw.get("device")
        if d is not None:
            check_device(d)
        return fn(*args, **kw)

    return wrapper


@checks_device
def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor:
    if isinstance(data, Tensor):
        t = data.clone() if dtype is None else data.to(dtype).clone()
    elif _is_torch(data) and str(data.dtype) == "torch.bfloat16":
        # the bits as they are: a bf16 checkpoint tensor is never widened on the host
        bits = _torch_bf16_bits(data)
        t = _upload(bits, D.bfloat16, tuple(data.shape))
        if dtype is not None and D.from_any(dtype) is not D.bfloat16:
            t = t.to(dtype)
    else:
        arr = _to_numpy(data)
        if dtype is None and arr.dtype.kind == "f" and arr.dtype != np.float16:
            arr = arr.astype(np.float32, copy=False)
        if dtype is not None and not isinstance(data, np.ndarray) and not _is_torch(data):
            _check_python_values(data, arr, D.from_any(dtype))
        t = from_host(arr, dtype)
    if requires_grad:
        t.requires_grad = True
    return t


_FROMBUFFER_SOURCE = {
    k: np.dtype(v)
    for k, v in {
        "float64": np.float64,
        "double": np.float64,
        "int64": np.int64,
        "long": np.int64,
        "uint32": np.uint32,
        "uint16": np.uint16,
    }.items()
}


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False) -> Tensor:
    """A 1-d tensor from the raw bytes of an object with the buffer protocol (bytes, bytearray,
    memoryview, mmap, a numpy array), as torch.frombuffer: `count` elements of `dtype` from
    byte `offset` (-1: to the end).

    Loads a checkpoint tensor without widening it on the host: the bytes are read and uploaded
    in pieces of `core.UPLOAD_CHUNK_BYTES` (64 MiB), each converted to the device layout on its
    own (bfloat16, float16, float32 and int32 bytes are that layout already; uint8/int8/int16,
    bool, int64 and float64 are converted a piece at a time), so a memory-mapped safetensors
    file is never held whole, nor widened, in host memory. bfloat16 bytes stay packed on the
    device (2 bytes an element). Unlike torch.frombuffer the tensor does not share the buffer's
    memory (it lives on the device). Reshape it with `.view(shape)`.
    """
    from .core import UPLOAD_CHUNK_BYTES, upload_chunks

    dt = D.from_any(dtype)
    # the source's element type: pyrite's storage dtype, except where the bytes are wider than
    # what pyrite stores (8-byte int64 / float64, 4-byte uint32 ...); pyrite.int64 *is* int32,
    # so 8-byte integers are asked for as "int64", torch.int64 or np.int64
    name = str(getattr(dtype, "name", None) or dtype).replace("torch.", "")
    src = _FROMBUFFER_SOURCE.get(name)
    if src is None:
        src = np.dtype(np.uint16) if dt is D.bfloat16 else dt.numpy_dtype
    mv = memoryview(buffer).cast("B")
    total = len(mv) - offset
    if offset < 0 or total < 0:
        raise ValueError(f"pyrite: frombuffer: offset {offset} is outside the buffer")
    if count < 0:
        if total % src.itemsize:
            raise ValueError(
                f"pyrite: frombuffer: buffer length ({total} bytes after skipping offset) must "
                f"be a multiple of element size ({src.itemsize})"
            )
        count = total // src.itemsize
    elif count * src.itemsize > total:
        raise ValueError(
            f"pyrite: frombuffer: requested {count} elements of {src.itemsize} bytes from a "
            f"buffer of {total} bytes after offset {offset}"
        )
    per = max(2, (UPLOAD_CHUNK_BYTES // src.itemsize) & ~1)  # even: bf16 pieces fill words

    def pieces():
        for start in range(0, count, per):
            stop = min(count, start + per)
            raw = np.frombuffer(
                mv, dtype=src, count=stop - start, offset=offset + start * src.itemsize
            )
            if src == dt.np and dt is not D.bool_:  # already the device layout
                yield raw
            else:
                yield _host_storage(raw, dt)

    t = upload_chunks(pieces(), dt, count)
    if requires_grad:
        t.requires_grad = True
    return t


@checks_device
def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    return from_host(arr)


@checks_device
def asarray(obj, dtype=None, device=None, copy=None, requires_grad=False):
    return as_tensor(obj, dtype=dtype)


# keyword arguments PyTorch's factories take that mean nothing here (one device, one layout)
_IGNORED = ("layout", "pin_memory", "memory_format", "names", "out")


def _ignored(kw, name):
    bad = [k for k in kw if k not in _IGNORED]
    if bad:
        raise TypeError(f"pyrite: {name}() got an unexpected keyword argument '{bad[0]}'")


@checks_device
def empty(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "empty")
    _ignored(kw, "empty")
    t = _empty(shape, D.from_any(dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


def _check_fill(fill_value, name):
    if isinstance(fill_value, Tensor):
        if fill_value.numel() != 1:
            raise ArgumentTypeError(
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


@checks_device
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
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def zeros(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "zeros")
    _ignored(kw, "zeros")
    return full(shape, 0, dtype=D.from_any(dtype), requires_grad=requires_grad)


@checks_device
def ones(*size, dtype=None, device=None, requires_grad=False, **kw) -> Tensor:
    shape = _size_args(size, kw.pop("size", None), "ones")
    _ignored(kw, "ones")
    return full(shape, 1, dtype=D.from_any(dtype), requires_grad=requires_grad)


def _like_dtype(x, dtype):
    return x.dtype if dtype is None else D.from_any(dtype)


@checks_device
def empty_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "empty_like")
    t = _empty(input._shape, _like_dtype(input, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def zeros_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "zeros_like")
    t = full(input._shape, 0, dtype=_like_dtype(input, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def ones_like(input, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "ones_like")
    t = full(input._shape, 1, dtype=_like_dtype(input, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "full_like")
    t = full(input._shape, fill_value, dtype=_like_dtype(input, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, **kw):
    _ignored(kw, "new_full")
    t = full(size, fill_value, dtype=_like_dtype(self, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


@checks_device
def _new_zeros(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_zeros")
    _ignored(kw, "new_zeros")
    return full(shape, 0, dtype=_like_dtype(self, dtype), requires_grad=requires_grad)


@checks_device
def _new_ones(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_ones")
    _ignored(kw, "new_ones")
    return full(shape, 1, dtype=_like_dtype(self, dtype), requires_grad=requires_grad)


@checks_device
def _new_empty(self, *size, dtype=None, device=None, requires_grad=False, **kw):
    shape = _size_args(size, kw.pop("size", None), "new_empty")
    _ignored(kw, "new_empty")
    t = _empty(shape, _like_dtype(self, dtype))
    if requires_grad:  # (refused for integer dtypes, as torch)
        t.requires_grad_()
    return t


def _new_tensor(self, data, dtype=None, **_):
    return tensor(
        data, dtype=_like_dtype(self, dtype) if dtype or not isinstance(data, Tensor) else None
    )


@checks_device
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
    if requires_grad:  # (refused for integer dtypes, as torch)
        out.requires_grad_()
    return out


# ---- ranges: ops/range_factories.py (torch CPU's arithmetic, value for value) ---------------
from . import range_factories as _rf  # noqa: E402

arange = checks_device(_rf.arange)
linspace = checks_device(_rf.linspace)
logspace = checks_device(_rf.logspace)
range_ = checks_device(_rf.range_)

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
    "frombuffer",
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
