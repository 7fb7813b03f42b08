"""Data types: what pyrite stores, how it maps to numpy/torch/WGSL, and PyTorch's promotion rules.

Storage (WGSL has no 8- or 16-bit storage types, and no 64-bit ones):

| dtype          | storage                                   | compute | bytes/element on the device |
| -------------- | ----------------------------------------- | ------- | --------------------------- |
| float32        | `array<f32>`                              | f32     | 4                           |
| float16        | `array<f16>` (needs `shader-f16`)         | f32     | 2                           |
| bfloat16       | `array<u32>`, two elements a word, packed | f32     | 2                           |
| int32 (int64)  | `array<i32>`                              | i32     | 4                           |
| int16/int8/uint8 | `array<i32>`, one element a word, widened, wrapped on every store | i32 | 4 |
| bool           | `array<u32>`, 0 or 1                      | bool    | 4                           |
| complex64      | float32 pairs (real, imag); no kernel     | —       | 8                           |

**Small integers are widened**, not packed: every kernel family that reads int32 (sort, gather,
scatter, reductions, nonzero, ...) reads them unchanged, and only the strided map (the one kernel
that computes new integer values elementwise) needs to know the type: it wraps each stored
value to the type's width (`uint8`: `v & 255`; `int8`: `(v << 24) >> 24`), so uint8 + uint8
wraps mod 256 as in PyTorch. Other kernels that compute integers (sums with `dtype=uint8`,
`scatter_add_`, integer matmul) run in i32 and their small-integer results are wrapped once
afterwards (ops/fallback.py; wrapping commutes with +, − and ×). Measured cost (`python -m
pyrite.bench.dtypes`, lavapipe on this machine's 2 shared cores, 4,194,304-element add, minimum
of 25 interleaved rounds, 2026-12-01): memory is 4 bytes an element, 4x PyTorch's for uint8/int8
and 2x for int16; the add ran 1.05x (uint8), 1.07x (int8) and 1.01x (int16) of float32's time
(int32: 1.01x): the wrap is two ALU ops, so in elements per second they match int32. On a GPU,
where an elementwise op is bandwidth-bound (the H200 adds f32 at ~2.5 TB/s, README), a widened
uint8 add takes an int32 add's time, an estimated 4x what a packed uint8 add could (it moves 4x
the bytes); not measured on the H200. Packing would need every kernel that reads storage to
unpack, and writes of neighbouring elements by different invocations to use atomics.

**bfloat16 is packed**, two elements a u32 word (element 2k in the low half), since halving memory
is the point of bf16; its bits are the top half of an f32, so a read is `bitcast<f32>(w << 16)`
or `bitcast<f32>(w & 0xffff0000)` and no device feature is needed. The strided map reads and
writes it natively (f32 arithmetic, rounded to nearest even on store, NaN kept as NaN); every
other kernel family gets its bf16 inputs widened to f32 and its float results narrowed back
(ops/fallback.py), which is exact where the op computes in f32 and rounds once. Measured as
above: 2 bytes an element (as PyTorch), the add at 0.91x float32's time on lavapipe (half the
bytes, ~10 more ALU ops an element to unpack and round); on a bandwidth-bound GPU an estimated
~0.5-0.6x of float32's (not measured on the H200). A strided bf16 output (x.T.mul_(2), x[::2] =
...) takes two atomics an element; the fallback costs a widening pass and a float32 copy per
bf16 argument of a non-map op.

int64 is accepted at the boundary (numpy, PyTorch, Python ints) and stored as int32 after a range
check, so `pr.int64 is pr.int32` and `pr.long` is the same object. float64 is stored as float32.

**complex64** is float32 pairs (real, imag) in one buffer; a complex tensor's shape, strides and
offset count complex elements, so `view_as_real` is a float32 view with strides doubled and a
last dim of 2 (stride 1). No kernel reads complex storage: ops/complex.py routes every op given
a complex tensor to a composition of real ops on that view, or refuses it. complex128 (numpy's
default complex, torch.cdouble) is accepted and narrowed to complex64, as float64 to float32.
"""

from __future__ import annotations

import builtins as _builtins
import struct as _struct

import numpy as np


class dtype:
    __slots__ = (
        "bits",
        "ctype",
        "is_bool",
        "is_floating_point",
        "is_signed",
        "itemsize",
        "kind",
        "max",
        "min",
        "name",
        "np",
        "numpy_dtype",
        "storage",
        "storage_bytes",
        "wgsl",
    )

    def __init__(
        self,
        name,
        np_storage,
        wgsl,
        itemsize,
        kind,
        *,
        storage=None,
        numpy_dtype=None,
        storage_bytes=None,
        bits=None,
        signed=True,
        lo=None,
        hi=None,
    ):
        self.name = name
        # `np`: the numpy dtype of the storage words as a host array sees them (uint32 for bool,
        # int32 for the widened small ints, uint16 for packed bfloat16)
        self.np = np.dtype(np_storage)
        # `numpy_dtype`: what `.numpy()` gives (None: numpy has no such type, bfloat16)
        self.numpy_dtype = np.dtype(numpy_dtype) if numpy_dtype is not None else None
        # `wgsl`: the element type other kernel families declare for this dtype's storage ("bf16"
        # is no WGSL type: kernels/common.header refuses it, so no kernel reads packed words as
        # if they were something else)
        self.wgsl = wgsl
        # `storage`: the strided map's token (kernels/common.load/store), which knows how to wrap
        # small ints and to pack/unpack bf16
        self.storage = storage or wgsl
        self.storage_bytes = storage_bytes or itemsize
        # the type kernels compute in: f32 for every float, i32 for every int, bool
        self.ctype = {"f": "f32", "i": "i32", "b": "bool", "c": "c64"}[kind]
        self.itemsize = itemsize  # PyTorch's element_size()
        self.bits = bits or 8 * itemsize
        self.kind = kind  # "b" < "i" < "f" < "c": PyTorch's category order for promotion
        self.is_floating_point = kind == "f"
        self.is_bool = kind == "b"
        self.is_signed = signed
        self.min, self.max = lo, hi  # integer range (None for floats and bool)

    def __repr__(self):
        return f"pyrite.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def is_complex(self):
        return self.kind == "c"

    @property
    def is_small_int(self) -> bool:
        """uint8, int8, int16: widened to i32 words and wrapped on store."""
        return self.kind == "i" and self.bits < 32


float32 = dtype("float32", np.float32, "f32", 4, "f", numpy_dtype=np.float32)
float16 = dtype("float16", np.float16, "f16", 2, "f", numpy_dtype=np.float16)
bfloat16 = dtype("bfloat16", np.uint16, "bf16", 2, "f", storage="bf16")
int32 = dtype("int32", np.int32, "i32", 4, "i", numpy_dtype=np.int32, lo=-(2**31), hi=2**31 - 1)
int16 = dtype(
    "int16",
    np.int32,
    "i32",
    2,
    "i",
    storage="i16",
    storage_bytes=4,
    numpy_dtype=np.int16,
    lo=-(2**15),
    hi=2**15 - 1,
)
int8 = dtype(
    "int8",
    np.int32,
    "i32",
    1,
    "i",
    storage="i8",
    storage_bytes=4,
    numpy_dtype=np.int8,
    lo=-128,
    hi=127,
)
uint8 = dtype(
    "uint8",
    np.int32,
    "i32",
    1,
    "i",
    storage="u8",
    storage_bytes=4,
    numpy_dtype=np.uint8,
    signed=False,
    lo=0,
    hi=255,
)
# numpy view of storage is uint32; numpy() gives bool
bool_ = dtype("bool", np.uint32, "u32", 1, "b", storage_bytes=4, numpy_dtype=np.bool_, signed=False)
# float32 pairs; "c64" is no WGSL type, so a kernel handed complex storage fails to build
complex64 = dtype("complex64", np.complex64, "c64", 8, "c", numpy_dtype=np.complex64)

float = float32
float64 = float32  # accepted and narrowed: WebGPU storage has no f64
double = float32
half = float16
cfloat = complex64
complex128 = complex64  # accepted and narrowed, as float64
cdouble = complex64
int64 = int32
long = int32
int = int32
short = int16
char = int8
byte = uint8

_ALL = {
    d.name: d for d in (float32, float16, bfloat16, int32, int16, int8, uint8, bool_, complex64)
}
SMALL_INTS = (uint8, int8, int16)


def _by_name(name):
    return _ALL[name]


def get_default_dtype():
    return float32


builtin_float = _builtins.float
builtin_int = _builtins.int

_NAMES = {
    "float32": float32,
    "float": float32,
    "float64": float32,
    "double": float32,
    "float16": float16,
    "half": float16,
    "bfloat16": bfloat16,
    "int32": int32,
    "int64": int32,
    "int": int32,
    "long": int32,
    "int16": int16,
    "short": int16,
    "int8": int8,
    "char": int8,
    "uint8": uint8,
    "byte": uint8,
    # no unsigned 16/32-bit type: their values are held as int32 (uint32 after a range check)
    "uint16": int32,
    "uint32": int32,
    "bool": bool_,
    "complex64": complex64,
    "cfloat": complex64,
    "complex128": complex64,
    "cdouble": complex64,
}


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
    if d is complex:
        return complex64
    given = d
    if isinstance(d, type) and issubclass(d, np.generic):  # np.float32 and friends, the classes
        d = np.dtype(d)
    name = getattr(d, "name", None) if not isinstance(d, str) else d
    if name is None:  # torch.dtype has no .name; str(torch.float32) == "torch.float32"
        name = str(d).replace("torch.", "")
    name = str(name)
    if name not in _NAMES:
        raise TypeError(
            f"pyrite: unsupported dtype {given!r}; supported: float32, float16, bfloat16, int32 "
            "(int64 is stored as int32), int16, int8, uint8, bool, complex64"
        )
    return _NAMES[name]


# ---- promotion -----------------------------------------------------------------------------
_KIND_ORDER = "bifc"


def _promote_ints(a: dtype, b: dtype) -> dtype:
    """PyTorch's integer lattice: the smallest type holding both ranges (uint8 + int8 → int16)."""
    lo, hi = _builtins.min(a.min, b.min), _builtins.max(a.max, b.max)
    for d in (int8, int16, int32):
        if d.min <= lo and hi <= d.max:
            return d
    return int32


def result_type_of(a: dtype, b: dtype) -> dtype:
    """Promotion of two tensor dtypes of equal standing (both dimensioned or both 0-d):
    the higher category wins; within a category, the smallest type that holds both (torch's
    promote_types: uint8 + int8 → int16, float16 + bfloat16 → float32)."""
    if a is b:
        return a
    if a.kind != b.kind:
        return a if _KIND_ORDER.index(a.kind) > _KIND_ORDER.index(b.kind) else b
    if a.kind == "i":
        if a is uint8 or b is uint8:
            other = b if a is uint8 else a
            return _promote_ints(uint8, other)
        return a if a.bits >= b.bits else b
    return float32  # two different floats: float16 + bfloat16, or either with float32


def scalar_kind(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "b"
    if isinstance(x, (builtin_int, np.integer)):
        return "i"
    if isinstance(x, (builtin_float, np.floating)):
        return "f"
    if isinstance(x, (complex, np.complexfloating)):
        return "c"
    raise TypeError(f"pyrite: unsupported scalar {x!r} of type {type(x).__name__}")


def promote_with_scalar(t: dtype, x) -> dtype:
    """PyTorch's rule: a Python scalar only changes the result when its category is higher."""
    k = scalar_kind(x)
    if _KIND_ORDER.index(k) <= _KIND_ORDER.index(t.kind):
        return t
    return {"f": float32, "c": complex64}.get(k, int32)


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ---- host-side conversions (Python scalars and numpy arrays), PyTorch's rules ----------------
def wrap_int(v: _builtins.int, d: dtype) -> _builtins.int:
    """An integer wrapped to `d`'s width, two's complement (uint8: mod 256), as PyTorch casts."""
    if d.bits >= 32 or d.kind != "i":
        return v
    m = 1 << d.bits
    v &= m - 1
    return v - m if d.is_signed and v >= m >> 1 else v


_F32 = _struct.Struct("<f")
_U32 = _struct.Struct("<I")


def bf16_bits_of(x: _builtins.float) -> _builtins.int:
    """The bfloat16 bits of a Python float: to f32, then round to nearest even (torch's rule)."""
    u = _U32.unpack(_F32.pack(_builtins.float(np.float32(x))))[0]
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits: _builtins.int) -> _builtins.float:
    return _F32.unpack(_U32.pack((bits & 0xFFFF) << 16))[0]


def round_scalar(x, d: dtype):
    """A Python float rounded to float dtype `d`'s value set (PyTorch casts a scalar operand to
    the op's dtype before most ops)."""
    if d is bfloat16:
        return bf16_value(bf16_bits_of(x))
    if d is float16:
        with np.errstate(over="ignore"):  # (past float16's range: inf, as torch, no warning)
            return _builtins.float(np.float16(x))
    return x


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 array → uint16 bfloat16 bits, round to nearest even; NaN → 0x7FC0."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(
        np.uint16
    )
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        r[nan] = 0x7FC0
    return r


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def float_to_int_host(a: np.ndarray, d: dtype) -> np.ndarray:
    """Floats → integer dtype `d` as PyTorch's CPU cast on x86: truncate toward zero through
    int32, where NaN, ±inf and values outside int32 become INT32_MIN (cvttss2si's "integer
    indefinite"), then wrap to d's width. Returns int64 values of d's range."""
    t = np.trunc(np.asarray(a, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(t) < 2.0**31)
    i = np.where(bad, INT32_MIN, np.where(bad, 0, t)).astype(np.int64)
    return wrap_array(i, d)


def wrap_array(i: np.ndarray, d: dtype) -> np.ndarray:
    """Integers (any numpy int dtype) wrapped to d's width, as int64 values."""
    i = np.asarray(i).astype(np.int64)
    if d.bits >= 32:
        return ((i + 2**31) % 2**32) - 2**31 if d.kind == "i" else i
    m = 1 << d.bits
    i = i & (m - 1)
    if d.is_signed:
        i = np.where(i >= m >> 1, i - m, i)
    return i
