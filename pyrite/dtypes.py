"""Data types: what pyrite stores, how it maps to numpy/torch/WGSL, and PyTorch's promotion rules.

Storage types are float32, float16 (needs the device's `shader-f16`), int32 and bool. int64 is
accepted at the boundary (numpy, PyTorch, Python ints) and stored as int32 after a range check, so
`pr.int64 is pr.int32` and `pr.long` is the same object: WebGPU has no 64-bit integers in storage.
bool is stored as one u32 per element (WGSL has no 8-bit storage type).
"""

from __future__ import annotations

import builtins as _builtins

import numpy as np


class dtype:
    __slots__ = (
        "ctype",
        "is_bool",
        "is_floating_point",
        "itemsize",
        "kind",
        "name",
        "np",
        "wgsl",
    )

    def __init__(self, name, np_dtype, wgsl, itemsize, kind):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.wgsl = wgsl  # the WGSL element type of the storage array
        # the type kernels compute in: f32 for both floats, i32, bool
        self.ctype = {"f": "f32", "i": "i32", "b": "bool"}[kind]
        self.itemsize = itemsize
        self.kind = kind  # "b" < "i" < "f": PyTorch's category order for promotion
        self.is_floating_point = kind == "f"
        self.is_bool = kind == "b"

    def __repr__(self):
        return f"pyrite.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_signed(self):
        return self.kind != "b"


float32 = dtype("float32", np.float32, "f32", 4, "f")
float16 = dtype("float16", np.float16, "f16", 2, "f")
int32 = dtype("int32", np.int32, "i32", 4, "i")
bool_ = dtype(
    "bool", np.uint32, "u32", 4, "b"
)  # numpy view of storage is uint32; numpy() gives bool

float = float32
float64 = float32  # accepted and narrowed: WebGPU storage has no f64
double = float32
half = float16
int64 = int32
long = int32
int = int32
int16 = int32
int8 = int32
uint8 = int32

_ALL = {"float32": float32, "float16": float16, "int32": int32, "bool": bool_}


def _by_name(name):
    return _ALL[name]


def get_default_dtype():
    return float32


builtin_float = _builtins.float
builtin_int = _builtins.int


def from_any(d) -> dtype:
    """A pyrite dtype from a pyrite dtype, numpy dtype, torch dtype, Python type, or name."""
    if isinstance(d, dtype):
        return d
    if d is None:
        return float32
    if d is bool:
        return bool_
    if d is builtin_float:
        return float32
    if d is builtin_int:
        return int32
    given = d
    if isinstance(d, type) and issubclass(d, np.generic):  # np.float32 and friends, the classes
        d = np.dtype(d)
    name = getattr(d, "name", None) if not isinstance(d, str) else d
    if name is None:  # torch.dtype has no .name; str(torch.float32) == "torch.float32"
        name = str(d).replace("torch.", "")
    name = str(name)
    table = {
        "float32": float32,
        "float": float32,
        "float64": float32,
        "double": float32,
        "float16": float16,
        "half": float16,
        "int32": int32,
        "int64": int32,
        "int": int32,
        "long": int32,
        "int16": int32,
        "int8": int32,
        "uint8": int32,
        "uint16": int32,
        "uint32": int32,
        "bool": bool_,
    }
    if name not in table:
        raise TypeError(
            f"pyrite: unsupported dtype {given!r}; supported: float32, float16, int32 "
            "(int64 is stored as int32), bool"
        )
    return table[name]


def result_type_of(a: dtype, b: dtype) -> dtype:
    """Promotion of two tensor dtypes (both dimensioned): the higher category wins; f16+f32 → f32."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if "bif".index(a.kind) > "bif".index(b.kind) else b
    # same kind, different types: only float16/float32 reach here
    return float32


def scalar_kind(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "b"
    if isinstance(x, (builtin_int, np.integer)):
        return "i"
    if isinstance(x, (builtin_float, np.floating)):
        return "f"
    raise TypeError(f"pyrite: unsupported scalar {x!r} of type {type(x).__name__}")


def promote_with_scalar(t: dtype, x) -> dtype:
    """PyTorch's rule: a Python scalar only changes the result when its category is higher."""
    k = scalar_kind(x)
    if "bif".index(k) <= "bif".index(t.kind):
        return t
    return float32 if k == "f" else int32


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
