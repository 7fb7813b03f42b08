"""Making tensors: from host data, filled, ranges, identity, and random on the device."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.random import random_kernel
from ..tensor import Tensor
from .core import empty as _empty
from .core import f32_bits, run_map
from .core import upload as _upload


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ValueError(f"pyrite: negative dimension in size {shape}")
    return shape


_HOST_DTYPES = {
    np.dtype(np.uint8): D.uint8,
    np.dtype(np.int8): D.int8,
    np.dtype(np.int16): D.int16,
    np.dtype(np.float16): D.float16,
}


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
    raise TypeError(
        f"pyrite: unsupported data type {arr.dtype} (supported: float, int, uint8, bool)"
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
    try:
        arr = np.asarray(data)
    except ValueError:  # numpy's words for a ragged list; PyTorch raises ValueError too
        raise ValueError(
            f"pyrite: could not make a tensor from {type(data).__name__}; nested "
            "sequences must be rectangular (every row the same length)"
        ) from None
    if arr.dtype == object:
        raise TypeError(
            f"pyrite: could not make a tensor from {type(data).__name__}; "
            "nested sequences must be rectangular and hold numbers"
        )
    return arr


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


def as_tensor(data, dtype=None, device=None) -> Tensor:
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    return tensor(data, dtype=dtype)


def from_numpy(arr: np.ndarray) -> Tensor:
    return from_host(arr)


def asarray(obj, dtype=None, device=None, copy=None, requires_grad=False):
    return as_tensor(obj, dtype=dtype)


def empty(*size, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    t = _empty(_size(size), D.from_any(dtype))
    t.requires_grad = requires_grad
    return t


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    if dtype is None:
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = D.bool_
        elif isinstance(fill_value, numbers.Integral):
            dtype = D.int32
        else:
            dtype = D.float32
    dt = D.from_any(dtype)
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    t = _empty(_size((size,)) if not isinstance(size, int) else (size,), dt)
    t.fill_(fill_value)
    t.requires_grad = requires_grad
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    return full(_size(size), 0, dtype=D.from_any(dtype), requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    return full(_size(size), 1, dtype=D.from_any(dtype), requires_grad=requires_grad)


def _like_dtype(x, dtype):
    return x.dtype if dtype is None else D.from_any(dtype)


def empty_like(input, *, dtype=None, **_):
    return _empty(input._shape, _like_dtype(input, dtype))


def zeros_like(input, *, dtype=None, **_):
    return full(input._shape, 0, dtype=_like_dtype(input, dtype))


def ones_like(input, *, dtype=None, **_):
    return full(input._shape, 1, dtype=_like_dtype(input, dtype))


def full_like(input, fill_value, *, dtype=None, **_):
    return full(input._shape, fill_value, dtype=_like_dtype(input, dtype))


def _new_full(self, size, fill_value, *, dtype=None, **_):
    return full(tuple(size), fill_value, dtype=_like_dtype(self, dtype))


def _new_zeros(self, *size, dtype=None, **_):
    return full(_size(size), 0, dtype=_like_dtype(self, dtype))


def _new_ones(self, *size, dtype=None, **_):
    return full(_size(size), 1, dtype=_like_dtype(self, dtype))


def _new_empty(self, *size, dtype=None, **_):
    return _empty(_size(size), _like_dtype(self, dtype))


def _new_tensor(self, data, dtype=None, **_):
    return tensor(
        data, dtype=_like_dtype(self, dtype) if dtype or not isinstance(data, Tensor) else None
    )


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    start, end, step = vals
    if step == 0:
        raise ValueError("pyrite: arange step must be nonzero")
    if (end - start) * step < 0:  # as PyTorch: arange(4, 2) is an error, not empty
        raise ValueError(
            f"pyrite: arange: upper bound and lower bound inconsistent with step "
            f"sign (start={start}, end={end}, step={step})"
        )
    if dtype is None:
        dtype = D.float32 if any(isinstance(v, float) for v in vals) else D.int32
    dt = D.from_any(dtype)
    n = max(0, math.ceil((end - start) / step))
    out = _empty((n,), dt)
    if n:
        if dt.kind == "f":
            run_map("s0 + f32(gi) * s1", (), (), out, "f32", (start, step), ("f32", "f32"))
        else:
            run_map("s0 + gi * s1", (), (), out, "i32", (int(start), int(step)), ("i32", "i32"))
    out.requires_grad = requires_grad
    return out


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    dt = D.from_any(dtype)
    steps = int(steps)
    out = _empty((steps,), dt)
    if steps == 1:
        out.fill_(start)
    elif steps > 1:
        step = (end - start) / (steps - 1)
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


def logspace(start, end, steps, base=10.0, *, dtype=None, **_):
    return (linspace(start, end, steps) * math.log2(base)).exp2().to(D.from_any(dtype))


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    m = n if m is None else m
    rows = arange(n).unsqueeze(1)
    cols = arange(m).unsqueeze(0)
    out = (rows == cols).to(D.from_any(dtype))
    out.requires_grad = requires_grad
    return out


# ---- random --------------------------------------------------------------------------------
class Generator:
    """Seed and counter offset of the Philox stream; each draw advances the offset."""

    def __init__(self, device=None):
        self._seed = 0x5EED
        self.offset = 0

    def manual_seed(self, seed):
        self._seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.offset = 0
        return self

    def seed(self):
        import random as _random

        return self.manual_seed(_random.getrandbits(63))._seed

    def initial_seed(self):
        return self._seed

    def take(self, n):
        off = self.offset
        self.offset += (n + 3) // 4
        return off


default_generator = Generator()


def manual_seed(seed):
    return default_generator.manual_seed(seed)


def seed():
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def _fill_random(out: Tensor, dist: str, a, b, generator=None):
    gen = generator or default_generator
    n = out.numel()
    if n == 0:
        return out
    target = out if out.is_contiguous() else _empty(out._shape, out.dtype)
    if out.dtype is D.bfloat16 or out.dtype.is_small_int:
        # bf16 (packed) and the small ints (wrapped): the random kernel writes f32 / i32
        target = _empty(out._shape, D.float32 if out.dtype.is_floating_point else D.int32)
    off = gen.take(n)
    s = gen._seed
    words = [
        n,
        target._offset,
        _i32(s & 0xFFFFFFFF),
        _i32(s >> 32),
        _i32(off & 0xFFFFFFFF),
        _i32(off >> 32),
    ]
    if dist == "randint":
        words += [int(a), int(b)]
    else:
        words += [f32_bits(a), f32_bits(b)]
    stype = target.dtype.wgsl if dist != "randint" or target.dtype.kind == "i" else "i32"
    backend.current().dispatch(
        random_kernel(dist, stype), (target._storage.buffer,), words, grid_for(-(-n // 4))
    )
    if target is not out:
        out.copy_(target)
    return out


def _i32(x):
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    out = _fill_random(_empty(_size(size), D.from_any(dtype)), "uniform", 0.0, 1.0, generator)
    out.requires_grad = requires_grad
    return out


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, **_) -> Tensor:
    out = _fill_random(_empty(_size(size), D.from_any(dtype)), "normal", 0.0, 1.0, generator)
    out.requires_grad = requires_grad
    return out


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None, **_):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if high is None:
        raise TypeError("pyrite: randint() needs high and size")
    if high <= low:
        raise ValueError(f"pyrite: randint: low ({low}) must be less than high ({high})")
    dt = D.from_any(dtype) if dtype is not None else D.int32
    if dt.is_small_int and (low < dt.min or high - 1 > dt.max):
        which, v = ("from", low) if low < dt.min else ("to - 1", high - 1)
        raise RuntimeError(
            f"pyrite: randint: {which} is out of bounds for {dt.name} ({v} outside "
            f"[{dt.min}, {dt.max}])"
        )
    out = _empty(tuple(size), D.int32)
    _fill_random(out, "randint", low, high, generator)
    return out if dt is D.int32 else out.to(dt)


def rand_like(input, *, dtype=None, **_):
    return rand(input._shape, dtype=_like_dtype(input, dtype))


def randn_like(input, *, dtype=None, **_):
    return randn(input._shape, dtype=_like_dtype(input, dtype))


def randint_like(input, low=0, high=None, *, dtype=None, **_):
    return randint(low, high, input._shape, dtype=_like_dtype(input, dtype))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, **_):
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        shape = (mean if isinstance(mean, Tensor) else std)._shape
        return randn(shape, generator=generator) * std + mean
    return _fill_random(_empty(tuple(size), D.float32), "normal", mean, std, generator)


def bernoulli(input, p=None, *, generator=None):
    probs = input if p is None else full(input._shape, p)
    return (rand(probs._shape, generator=generator) < probs).to(input.dtype)


def randperm(n, *, generator=None, dtype=None, **_):
    from .sorting import argsort

    keys = rand(n, generator=generator)
    return argsort(keys).to(D.from_any(dtype) if dtype is not None else D.int32)


def _uniform_(self, a=0.0, b=1.0, *, generator=None):
    return _fill_random(self, "uniform", a, b, generator)


def _normal_(self, mean=0.0, std=1.0, *, generator=None):
    return _fill_random(self, "normal", mean, std, generator)


def _random_(self, from_=0, to=None, *, generator=None):
    return self.copy_(randint(from_, to if to is not None else 2**31 - 1, self._shape))


def _bernoulli_(self, p=0.5, *, generator=None):
    return self.copy_(rand(self._shape, generator=generator) < p)


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
