"""Writing PyTorch's `torch.save` zip format without PyTorch (what `pyrite.save` writes for
plain data), so that `torch.load` of any PyTorch since 1.6 reads pyrite's checkpoints, with
`weights_only=True`, and pyrite reads them back through pyrite/io/_torch.py.

The archive is the one torch/serialization.py's `_save` writes: `<name>/data.pkl` (the object,
pickle protocol 2), `.format_version`, `.storage_alignment`, `byteorder`, each storage's bytes in
`data/<key>`, `version`, every record stored uncompressed and its bytes at a multiple of 64 from
the start (the local header's extra field padded, as torch pads it: torch.load(mmap=True) maps
them). In the pickle a tensor is torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
requires_grad, OrderedDict()), a parameter _rebuild_parameter(tensor, requires_grad,
OrderedDict()), a storage the persistent id ('storage', torch.<Type>Storage, key, 'cpu', numel),
a dtype torch.<name>, a Size torch.Size(tuple): the globals torch.load's weights_only rule
admits.

Tensors that view one pyrite storage in one dtype share one saved storage (its elements from the
lowest any of them reads to the highest), so tied weights and views stay tied after a load;
a tensor with a negative stride (which torch has no form for) or no elements gets a storage of
its own. Plain data is what torch's weights_only load reads: dicts (an OrderedDict keeps its
`_metadata`), Counters, lists, tuples, sets, strings, bytes, bytearrays, numbers, None,
tensors, parameters, dtypes and Sizes; anything else raises `NotPlain` for the caller
(pyrite/io/__init__.py), which keeps pyrite's own container for it.
"""

from __future__ import annotations

import collections
import io
import pickle
import struct
import sys
import zipfile

import numpy as np

from .. import dtypes as D
from ..tensor import Size, Tensor
from ._host import tensor_to_host

ALIGN = 64  # (torch's storage alignment: each record's bytes at a multiple of it)
VERSION = "3\n"  # (the archive version torch 2.x writes; any torch >= 1.6 reads it)

# pyrite dtype -> torch's legacy storage class name (the persistent id's storage type)
STORAGE_OF = {
    D.float32: "FloatStorage",
    D.float16: "HalfStorage",
    D.bfloat16: "BFloat16Storage",
    D.int32: "IntStorage",
    D.int16: "ShortStorage",
    D.int8: "CharStorage",
    D.uint8: "ByteStorage",
    D.bool_: "BoolStorage",
    D.complex64: "ComplexFloatStorage",
}


class NotPlain(TypeError):
    """An object torch's weights_only load could not rebuild (a Module, a numpy array, a
    script's class): the caller saves it another way."""


class _Global:
    """A module-level name of torch's (or collections') written into the pickle as a GLOBAL,
    without importing it."""

    def __init__(self, module: str, name: str):
        self.module, self.name = module, name

    def __reduce_ex__(self, protocol):
        return self.name  # (a string: the pickler calls save_global, below)

    def __call__(self, *args):  # (pickle's save_reduce wants a callable; this is never called)
        raise TypeError(f"pyrite: internal: {self.module}.{self.name} is a name, not a function")


_REBUILD_TENSOR = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_SIZE = _Global("torch", "Size")
_CODECS_ENCODE = _Global("_codecs", "encode")
_STORAGE_TYPE = {dt: _Global("torch", name) for dt, name in STORAGE_OF.items()}
_DTYPE = {dt: _Global("torch", dt.name) for dt in STORAGE_OF}


class _Stored:
    """One saved storage: the pyrite tensor whose storage it is, in one dtype, and the element
    range [lo, hi) the saved tensors read of it (a persistent id in the pickle)."""

    def __init__(self, t: Tensor, own: bool = False):
        self.source, self.own = t, own
        self.lo, self.hi = None, None
        self.key = None

    def cover(self, lo: int, hi: int):
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)

    def numel(self) -> int:
        return 0 if self.lo is None else self.hi - self.lo

    def host(self) -> np.ndarray:
        """The range's elements as a host array in their own width (bf16: the 16-bit words)."""
        t = self.source
        if self.own:  # (a copy of the tensor itself: contiguous, from element 0)
            return tensor_to_host(t).reshape(-1)
        if self.numel() == 0:
            return np.zeros(0, np.uint8)
        t, k = t.detach(), 1
        if t.dtype is D.complex64:  # (its float pairs: the same bytes; as_strided has no complex)
            from ..ops.complex import view_as_real

            t, k = view_as_real(t), 2
        return tensor_to_host(t.as_strided((k * self.numel(),), (1,), k * self.lo))


class _TensorRef:
    """A tensor in the pickle: _rebuild_tensor_v2 over its saved storage (and, for a
    parameter, _rebuild_parameter around that)."""

    def __init__(self, t: Tensor, stored: _Stored, offset: int, size, stride):
        self.t, self.stored, self.offset, self.size, self.stride = t, stored, offset, size, stride

    def __reduce_ex__(self, protocol):
        stored = self.stored
        rebuild = (
            _REBUILD_TENSOR,
            (stored, self.offset - (stored.lo or 0), tuple(self.size), tuple(self.stride),
             bool(self.t.requires_grad), collections.OrderedDict()),
        )  # fmt: skip
        if type(self.t).__name__ != "Parameter":
            return rebuild
        return _REBUILD_PARAMETER, (_Rebuilt(rebuild), bool(self.t.requires_grad),
                                    collections.OrderedDict())  # fmt: skip


class _Rebuilt:
    """A prepared (callable, args) pair, pickled as itself."""

    def __init__(self, reduced):
        self.reduced = reduced

    def __reduce_ex__(self, protocol):
        return self.reduced


class _SizeRef:
    def __init__(self, s):
        self.s = tuple(int(x) for x in s)

    def __reduce_ex__(self, protocol):
        return _SIZE, (self.s,)


class _Collector:
    """Walks the object, putting the pickle's stand-ins where tensors, dtypes and Sizes are
    and grouping the tensors by the storage they view."""

    def __init__(self):
        self.stored: dict = {}  # (id of the pyrite storage, dtype) -> _Stored
        self.order: list = []  # _Stored in the order first met (their keys)
        # id of a pyrite tensor -> its _TensorRef (the same tensor twice; the ref holds the
        # tensor, so the id stays its own until the pickle is written)
        self.refs: dict = {}

    def walk(self, obj, path: str):
        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
            return obj
        if type(obj) is bytearray:  # (torch's weights_only rule admits it, and set)
            return bytearray(obj)
        if type(obj) is set:
            return {self.walk(v, path) for v in obj}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            return obj.item()
        if isinstance(obj, Tensor):
            return self.tensor(obj)
        if isinstance(obj, D.dtype):
            if obj not in _DTYPE:
                raise NotPlain(f"pyrite: save: {path or 'the object'}: dtype {obj}")
            return _DTYPE[obj]
        if isinstance(obj, Size):
            return _SizeRef(obj)
        if type(obj) in (dict, collections.OrderedDict, collections.Counter):
            out = type(obj)()
            for k, v in obj.items():
                if not (k is None or isinstance(k, (bool, int, float, str, bytes, tuple))):
                    raise NotPlain(
                        f"pyrite: save: a {type(k).__name__} key in {path or 'the object'}"
                    )
                out[self.walk(k, path)] = self.walk(v, f"{path}.{k}" if path else str(k))
            meta = getattr(obj, "_metadata", None)
            if type(obj) is collections.OrderedDict and meta is not None:
                out._metadata = self.walk(meta, f"{path}._metadata")  # (module versions)
            return out
        if type(obj) in (list, tuple):
            items = [self.walk(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]
            return items if type(obj) is list else tuple(items)
        raise NotPlain(f"pyrite: save: {path or 'the object'} of type {type(obj).__name__}")

    def tensor(self, t: Tensor):
        ref = self.refs.get(id(t))
        if ref is not None:
            return ref
        if t.dtype not in STORAGE_OF:
            raise NotPlain(f"pyrite: save: a tensor of dtype {t.dtype}")
        size, stride, offset = t._shape, t._strides, t._offset
        n = t.numel()
        if n == 0 or min(stride, default=0) < 0:  # (its own storage: a contiguous copy)
            stored = _Stored(t, own=True)
            stored.cover(0, n)
            stride = _contiguous(size)
            offset = 0
            self.order.append(stored)
        else:
            key = (id(t._storage), t.dtype)
            stored = self.stored.get(key)
            if stored is None:
                stored = self.stored[key] = _Stored(t)
                self.order.append(stored)
            last = offset + sum((s - 1) * st for s, st in zip(size, stride))
            stored.cover(offset, last + 1)
        ref = self.refs[id(t)] = _TensorRef(t, stored, offset, size, stride)
        return ref


def _contiguous(size) -> tuple:
    out, acc = [], 1
    for s in reversed(size):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


class _Pickler(pickle._Pickler):
    """Protocol 2, as torch.save: storages as persistent ids, stand-ins as GLOBALs. (The
    Python pickler: its save_global can be replaced; the C one's cannot.)"""

    def save_bytes(self, obj):
        # protocol 2 writes b"" as `bytes()`, a global torch's weights_only rule refuses (and
        # so torch.load refuses its own torch.save of b""): the codecs.encode('', 'latin1')
        # form that every other bytes object takes, which both readers admit
        if obj:
            return super().save_bytes(obj)
        self.save_reduce(_CODECS_ENCODE, ("", "latin1"), obj=obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[bytes] = save_bytes

    def persistent_id(self, obj):
        if isinstance(obj, _Stored):
            return ("storage", _STORAGE_TYPE[obj.source.dtype], obj.key, "cpu", obj.numel())
        return None

    def save_global(self, obj, name=None):
        if not isinstance(obj, _Global):
            return super().save_global(obj, name)
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)


def _record(zf: zipfile.ZipFile, fh, name: str, data: bytes):
    """One stored record whose bytes start at a multiple of ALIGN (the local header's extra
    field padded: 'FB', its length, then filler, as torch writes it)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    start = fh.tell() + 30 + len(name.encode())
    pad = -(start + 4) % ALIGN
    info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)


class Archive:
    """A torch.save zip archive of `obj` made ready (the object walked, the pickle written;
    NotPlain where `obj` is not plain data): `write(fh)` streams it, one storage read from the
    device at a time, into a seekable binary file."""

    def __init__(self, obj, name: str = "archive"):
        self.name = name  # (the records' folder: torch takes the file name's stem)
        col = _Collector()
        tree = col.walk(obj, "")
        for i, stored in enumerate(col.order):
            stored.key = str(i)
        pkl = io.BytesIO()
        _Pickler(pkl, protocol=2).dump(tree)
        self.pickle, self.stored = pkl.getvalue(), col.order

    def write(self, fh):
        n = self.name
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            _record(zf, fh, f"{n}/data.pkl", self.pickle)
            _record(zf, fh, f"{n}/.format_version", b"1")
            _record(zf, fh, f"{n}/.storage_alignment", str(ALIGN).encode())
            _record(zf, fh, f"{n}/byteorder", sys.byteorder.encode())
            for stored in self.stored:
                _record(zf, fh, f"{n}/data/{stored.key}", stored.host().tobytes())
            _record(zf, fh, f"{n}/version", VERSION.encode())


def dumps_archive(archive: Archive) -> bytes:
    """The bytes of a prepared archive (for a file object, which may not seek)."""
    fh = io.BytesIO()
    archive.write(fh)
    return fh.getvalue()
