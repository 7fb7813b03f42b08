"""Tensors to and from host arrays for checkpoints: each pyrite dtype as its numpy form
(bfloat16 as its raw 16-bit words, never widened), and host arrays of any checkpoint dtype to
pyrite tensors with pyrite's rules (int64 -> int32 after a range check, float64 -> float32)."""

from __future__ import annotations

import numpy as np

from .. import backend
from .. import dtypes as D
from ..tensor import Tensor
from .errors import CheckpointError

# pyrite dtype -> the safetensors dtype name it is written as
SAFETENSORS_NAME = {
    D.float32: "float32",
    D.float16: "float16",
    D.bfloat16: "bfloat16",
    D.int32: "int32",
    D.int16: "int16",
    D.int8: "int8",
    D.uint8: "uint8",
    D.bool_: "bool",
    D.complex64: "complex64",
}

# safetensors header codes -> the numpy type of their bytes (BF16: raw uint16 words)
SAFETENSORS_CODES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U64": np.uint64,
    "U32": np.uint32,
    "U16": np.uint16,
    "U8": np.uint8,
    "BOOL": np.bool_,
    "C64": np.complex64,  # (safetensors >= 0.4's complex; complex128 narrowed, as float64)
    "C128": np.complex128,
}


def tensor_to_host(t: Tensor) -> np.ndarray:
    """A contiguous host copy of `t` in its own width (bfloat16: the uint16 bits)."""
    t = t.detach()
    if t.dtype is not D.bfloat16:
        return np.ascontiguousarray(t.numpy()).reshape(t._shape)  # (ascontiguousarray: 0-d -> 1-d)
    n = t.numel()
    if n == 0:
        return np.zeros(t._shape, dtype=np.uint16)
    if not t.is_contiguous():
        # the words the view spans, gathered here: a bf16 copy kernel (t.contiguous()) turns
        # a NaN's payload into 0x7fc0, and a checkpoint keeps every bit
        lo = t._offset + sum((s - 1) * st for s, st in zip(t._shape, t._strides) if st < 0)
        hi = t._offset + sum((s - 1) * st for s, st in zip(t._shape, t._strides) if st > 0)
        words = tensor_to_host(t.as_strided((hi - lo + 1,), (1,), lo))
        view = np.lib.stride_tricks.as_strided(
            words[t._offset - lo :], t._shape, tuple(2 * st for st in t._strides)
        )
        return view.copy()
    raw = backend.current().read(t._storage.buffer, t._offset * 2, n * 2)
    return np.frombuffer(raw, dtype=np.uint16).reshape(t._shape).copy()


def host_to_tensor(arr: np.ndarray, bfloat16: bool, what: str) -> Tensor:
    """A pyrite tensor of a host array; `bfloat16`: `arr` holds bf16 bits (uint16). `what`
    names the tensor in errors (its key and file)."""
    from ..ops.core import upload
    from ..ops.creation import from_host

    if bfloat16:
        return upload(np.ascontiguousarray(arr, dtype=np.uint16), D.bfloat16, arr.shape)
    if arr.dtype.kind in "iu" and arr.dtype.itemsize >= 4 and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < D.INT32_MIN or hi > D.INT32_MAX:
            raise CheckpointError(
                f"pyrite: load: {what} is {arr.dtype} with values in [{lo}, {hi}], which do "
                "not fit in int32, pyrite's integer storage (WebGPU has no 64-bit integers)"
            )
    if arr.dtype.kind not in "biufc":
        raise CheckpointError(f"pyrite: load: {what} has dtype {arr.dtype}, which pyrite lacks")
    return from_host(arr)  # (complex128 as complex64, as float64 as float32)
