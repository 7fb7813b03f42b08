"""Reading PyTorch's `torch.save` files without PyTorch.

Two formats (torch/serialization.py):
- zip (torch >= 1.6): `<name>/data.pkl` is the pickled object, whose storages are persistent
  ids ('storage', storage_type, key, location, numel) with their bytes in `<name>/data/<key>`;
  `<name>/byteorder` says "little" or "big".
- legacy (`_use_new_zipfile_serialization=False`): four pickles back to back — the magic number,
  the protocol version (1001), sys info, then the object (persistent ids ('storage', type, key,
  location, numel, view_metadata)) — then the sorted storage keys, then each storage as an
  8-byte little-endian element count and its raw bytes.

The pickle runs through a restricted Unpickler (`find_class`) that admits only the tensor and
parameter rebuild functions, the legacy storage types, torch dtypes, torch.Size, torch.device,
OrderedDict, Counter and builtin containers, as torch.load(weights_only=True) does; anything
else raises pyrite.io.UnpicklingError naming the global, before it could run. Tensors are rebuilt
as views (offset, size, stride) of one device tensor per storage, so saved views keep their
values and storages shared in the file stay shared; int64 becomes int32 after a range check,
float64 float32 (pyrite's dtypes).
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pickle
import struct
import zipfile
import zlib

import numpy as np

from .. import dtypes as D
from ..errors import PyriteError
from ._host import host_to_tensor
from ._safetensors import as_parameter
from .errors import CheckpointError, UnpicklingError

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
LEGACY_PROTOCOL = 1001

# torch's legacy storage classes -> (numpy type of the bytes, bfloat16 bits?)
STORAGE_TYPES = {
    "FloatStorage": ("float32", np.float32),
    "DoubleStorage": ("float64", np.float64),
    "HalfStorage": ("float16", np.float16),
    "BFloat16Storage": ("bfloat16", np.uint16),
    "LongStorage": ("int64", np.int64),
    "IntStorage": ("int32", np.int32),
    "ShortStorage": ("int16", np.int16),
    "CharStorage": ("int8", np.int8),
    "ByteStorage": ("uint8", np.uint8),
    "BoolStorage": ("bool", np.bool_),
    "ComplexFloatStorage": ("complex64", np.complex64),
    "ComplexDoubleStorage": ("complex128", np.complex128),
    "UntypedStorage": ("uint8", np.uint8),
}
# torch dtypes a checkpoint may name (as values, or for _rebuild_tensor_v3's untyped storages)
TORCH_DTYPES = {
    "float32": np.float32,
    "float": np.float32,
    "float64": np.float64,
    "double": np.float64,
    "float16": np.float16,
    "half": np.float16,
    "bfloat16": np.uint16,
    "int64": np.int64,
    "long": np.int64,
    "int32": np.int32,
    "int": np.int32,
    "int16": np.int16,
    "short": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
    "complex64": np.complex64,
    "cfloat": np.complex64,
    "complex128": np.complex128,
    "cdouble": np.complex128,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
}


# What damaged bytes raise from zipfile and pickle (a name field that is not UTF-8 is a
# UnicodeDecodeError, an unknown compression method NotImplementedError, a pickle length past
# the file OverflowError or MemoryError, a flipped flag bit zipfile's RuntimeError "File ... is
# encrypted, password required"): each is reported as a CheckpointError naming the file.
_CORRUPT = (
    zipfile.BadZipFile, EOFError, OSError, NotImplementedError, ValueError, IndexError, KeyError,
    TypeError, AttributeError, OverflowError, MemoryError, struct.error, zlib.error,
    pickle.UnpicklingError, RuntimeError,
)  # fmt: skip


def _corrupt(where: str, exc: Exception) -> CheckpointError:
    return CheckpointError(
        f"pyrite: load: {where} is truncated or corrupt: {type(exc).__name__}: {exc}"
    )


class _TorchDtype:
    """A torch dtype named in a checkpoint (a value, or _rebuild_tensor_v3's argument)."""

    def __init__(self, name):
        self.name = name


class _StorageType:
    def __init__(self, name):
        self.name = name
        self.dtype, self.np = STORAGE_TYPES[name]


class _Storage:
    """One saved storage: its raw bytes, and the device tensor made of them on first use."""

    def __init__(self, key, stype: _StorageType, raw=None):
        self.key, self.stype, self.raw = key, stype, raw
        self.device = {}  # dtype name -> 1-d pyrite tensor of the whole storage

    def tensor(self, dtype: str, what: str):
        if dtype not in self.device:
            if self.raw is None:
                raise CheckpointError(f"pyrite: load: {what}: storage {self.key} has no data")
            a = np.frombuffer(self.raw, dtype=TORCH_DTYPES[dtype])
            self.device[dtype] = host_to_tensor(a, dtype == "bfloat16", what)
        return self.device[dtype]


class _Pending:
    """A tensor to rebuild once the storages are read: torch's _rebuild_tensor_v2 arguments."""

    def __init__(self, storage, offset, size, stride, requires_grad, dtype=None):
        self.storage, self.offset = storage, int(offset)
        self.size, self.stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
        self.requires_grad = bool(requires_grad)
        self.dtype = dtype or storage.stype.dtype
        self.parameter = False


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks, *_):
    return _Pending(storage, storage_offset, size, stride, requires_grad)


def _rebuild_tensor_v3(
    storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype, *_
):
    name = getattr(dtype, "name", None)
    if name not in TORCH_DTYPES:
        raise UnpicklingError(f"pyrite: load: a tensor of torch.{name}, which pyrite lacks")
    return _Pending(storage, storage_offset, size, stride, requires_grad, name)


def _rebuild_parameter(data, requires_grad, backward_hooks, *_):
    data.requires_grad = bool(requires_grad)
    data.parameter = True
    return data


def _rebuild_from_type_v2(func, new_type, args, state):
    out = func(*args)
    if isinstance(out, _Pending) and new_type == "Parameter":
        out.parameter = True
    return out


def _torch_size(*args):
    from ..tensor import Size

    return Size(*args)


def _torch_device(*args):
    return str(args[0]) if args else "cpu"


def _allowed(module: str, name: str):
    """What `module.name` unpickles to, or None where it is not admitted."""
    if module == "collections" and name in ("OrderedDict", "Counter"):
        # (a Counter: MultiStepLR's milestones in a scheduler's state dict; torch admits it)
        return getattr(collections, name)
    if module == "builtins" and name in ("set", "frozenset", "bytearray", "complex", "slice"):
        return {"set": set, "frozenset": frozenset, "bytearray": bytearray}.get(
            name, {"complex": complex, "slice": slice}.get(name)
        )
    if module == "_codecs" and name == "encode":  # protocol 2's spelling of bytes
        import codecs

        return codecs.encode
    if module in ("torch", "torch.cuda") and name in STORAGE_TYPES:
        return _StorageType(name)
    if module == "torch" and (name in TORCH_DTYPES or name.startswith(("float", "int", "uint"))):
        return _TorchDtype(name)  # a pyrite dtype once rebuilt, where pyrite has one
    if module == "torch._utils":
        return {
            "_rebuild_tensor_v2": _rebuild_tensor_v2,
            "_rebuild_tensor_v3": _rebuild_tensor_v3,
            "_rebuild_parameter": _rebuild_parameter,
            "_rebuild_parameter_with_state": _rebuild_parameter,
        }.get(name)
    if module == "torch._tensor" and name == "_rebuild_from_type_v2":
        return _rebuild_from_type_v2
    if (module, name) in (("torch", "Tensor"), ("torch.nn.parameter", "Parameter")):
        return name
    if module == "torch" and name == "Size":
        return _torch_size
    if module == "torch" and name == "device":
        return _torch_device
    return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, where, persistent_load, weights_only, **kw):
        super().__init__(file, **kw)
        self._where, self._persistent, self._weights_only = where, persistent_load, weights_only

    def find_class(self, module, name):
        # torch.save's pickle is protocol 2, which names Python 3's builtins by their Python 2
        # names (`__builtin__.set`, `copy_reg`): map them back first, as pickle's own
        # find_class does for protocol < 3 (set, bytearray and complex were refused)
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        got = _allowed(module, name)
        if got is not None:
            return got
        if module.split(".")[0] == "torch":
            raise UnpicklingError(
                f"pyrite: load: {self._where}: Unsupported global: GLOBAL {module}.{name} is "
                "not something pyrite can rebuild without PyTorch (it reads tensors, "
                "parameters and containers of them: save a model's state_dict(), not the model)"
            )
        if self._weights_only:
            raise UnpicklingError(
                f"pyrite: load: {self._where}: Weights only load failed. Unsupported global: "
                f"GLOBAL {module}.{name} was not an allowed global by default (pyrite reads "
                "tensors, numbers, strings and containers). If you trust the file, "
                "weights_only=False lets its pickle import and run it."
            )
        return super().find_class(module, name)

    def persistent_load(self, pid):
        return self._persistent(pid)


def _storage_pid(pid, where):
    if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
        kind = pid[0] if isinstance(pid, tuple) and pid else pid
        raise UnpicklingError(
            f"pyrite: load: {where}: unsupported persistent id {kind!r} (pyrite reads tensors "
            "and their storages; a pickled module's source cannot be loaded)"
        )
    stype = pid[1]
    if not isinstance(stype, _StorageType):
        raise UnpicklingError(f"pyrite: load: {where}: a storage of unknown type {stype!r}")
    return stype, str(pid[2])


# ---- the zip format ------------------------------------------------------------------------
def load_zip(source, where: str, weights_only: bool, pickle_kw: dict):
    try:
        zf = zipfile.ZipFile(source)
        names = zf.namelist()
    except PyriteError:
        raise
    except _CORRUPT as exc:
        raise CheckpointError(f"pyrite: load: {where} is a damaged zip archive: {exc}") from None
    with zf:
        pkl = next((n for n in names if n.endswith("/data.pkl") or n == "data.pkl"), None)
        if pkl is None:
            what = (
                "a TorchScript archive (torch.jit.save); save the state_dict() instead"
                if any(n.endswith("constants.pkl") for n in names)
                else "a zip archive without data.pkl, not a torch.save file"
            )
            raise CheckpointError(f"pyrite: load: {where} is {what}")
        try:
            obj = _unpickle_zip(zf, names, pkl[: -len("data.pkl")], where, weights_only, pickle_kw)
        except PyriteError:
            raise
        except _CORRUPT as exc:
            raise _corrupt(where, exc) from (exc if not weights_only else None)
    return materialize(obj, where)


def _unpickle_zip(zf, names, prefix, where, weights_only, pickle_kw):
    big = False
    if prefix + "byteorder" in names:
        big = zf.read(prefix + "byteorder").decode().strip() == "big"
    storages = {}

    def persistent_load(pid):
        stype, key = _storage_pid(pid, where)
        if key not in storages:
            try:
                raw = zf.read(f"{prefix}data/{key}")
            except KeyError:
                raise CheckpointError(
                    f"pyrite: load: {where}: storage data/{key} is missing from the archive"
                ) from None
            if big and np.dtype(stype.np).itemsize > 1:
                raw = np.frombuffer(raw, np.dtype(stype.np).newbyteorder(">")).byteswap()
                raw = raw.tobytes()
            storages[key] = _Storage(key, stype, raw)
        return storages[key]

    data = zf.read(prefix + "data.pkl")
    return _Unpickler(io.BytesIO(data), where, persistent_load, weights_only, **pickle_kw).load()


# ---- the legacy format ---------------------------------------------------------------------
def load_legacy(f, where: str, weights_only: bool, pickle_kw: dict):
    def plain(file):
        return _Unpickler(file, where, _no_pid(where), True, **pickle_kw).load()

    try:
        magic = plain(f)
        if magic != LEGACY_MAGIC:
            raise CheckpointError(
                f"pyrite: load: {where} is a pickle but not a torch.save file (no PyTorch magic "
                "number); pyrite does not load arbitrary pickles"
            )
        protocol = plain(f)
        if protocol != LEGACY_PROTOCOL:
            raise CheckpointError(f"pyrite: load: {where}: unknown legacy protocol {protocol}")
        sys_info = plain(f)
        little = sys_info.get("little_endian", True) if isinstance(sys_info, dict) else True
        storages = {}

        def persistent_load(pid):
            stype, key = _storage_pid(pid, where)
            view = pid[5] if len(pid) > 5 else None
            root = storages.setdefault(key, _Storage(key, stype))
            if view is None:
                return root
            view_key, offset, size = view
            if view_key not in storages:
                storages[view_key] = _View(view_key, root, int(offset), int(size))
            return storages[view_key]

        obj = _Unpickler(f, where, persistent_load, weights_only, **pickle_kw).load()
        keys = plain(f)
        for key in keys:
            s = storages.get(str(key))
            count = int.from_bytes(_read_exact(f, 8, where), "little" if little else "big")
            itemsize = np.dtype(s.stype.np).itemsize if s is not None else 1
            raw = _read_exact(f, count * itemsize, where)
            if s is None:
                continue
            if not little and itemsize > 1:
                raw = np.frombuffer(raw, np.dtype(s.stype.np).newbyteorder(">")).byteswap()
                raw = raw.tobytes()
            s.raw = raw
        for s in storages.values():
            if isinstance(s, _View):
                s.resolve()
    except PyriteError:
        raise
    except _CORRUPT as exc:
        raise _corrupt(where, exc) from (exc if not weights_only else None)
    return materialize(obj, where)


class _View(_Storage):
    """A legacy storage view (pre-1.0 files): elements [offset, offset + size) of a root."""

    def __init__(self, key, root, offset, size):
        super().__init__(key, root.stype)
        self.root, self.start, self.count = root, offset, size

    def resolve(self):
        n = np.dtype(self.stype.np).itemsize
        self.raw = self.root.raw[self.start * n : (self.start + self.count) * n]


def _read_exact(f, n, where):
    data = f.read(n)
    if len(data) != n:
        raise CheckpointError(f"pyrite: load: {where} is truncated (a storage's bytes end early)")
    return data


def _no_pid(where):
    def refuse(pid):
        raise UnpicklingError(f"pyrite: load: {where}: unexpected persistent id")

    return refuse


# ---- rebuilding ----------------------------------------------------------------------------
def materialize(obj, where: str, path: str = ""):
    """Replace every pending tensor in `obj` (dicts, lists, tuples, sets and, for
    weights_only=False, objects' __dict__) by its pyrite tensor; torch dtype names stored as
    values become pyrite dtypes."""
    memo = {}
    visited = set()

    def walk(x, p):
        if isinstance(x, _Pending):
            if id(x) not in memo:
                memo[id(x)] = _tensor_of(x, f"{p or 'the tensor'} in {where}")
            return memo[id(x)]
        if type(x) in (dict, collections.OrderedDict):
            out = type(x)((k, walk(v, _join(p, k))) for k, v in x.items())
            if hasattr(x, "__dict__"):  # a state dict's _metadata (module versions) stays
                out.__dict__.update(x.__dict__)
            return out
        if isinstance(x, dict):  # a subclass (weights_only=False): updated in place
            for k in list(x):
                x[k] = walk(x[k], _join(p, k))
            return x
        if isinstance(x, list):
            return [walk(v, _join(p, i)) for i, v in enumerate(x)]
        if isinstance(x, tuple):
            items = tuple(walk(v, _join(p, i)) for i, v in enumerate(x))
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        if isinstance(x, (set, frozenset)):
            return type(x)(walk(v, p) for v in x)
        if isinstance(x, _TorchDtype):
            return D._NAMES.get(x.name, x.name)
        if hasattr(x, "__dict__") and not isinstance(x, type) and id(x) not in visited:
            visited.add(id(x))
            for k, v in list(vars(x).items()):
                setattr(x, k, walk(v, _join(p, k)))
        return x

    return walk(obj, path)


def _join(p, k):
    return f"{p}.{k}" if p else str(k)


def _tensor_of(t: _Pending, what: str):
    base = t.storage.tensor(t.dtype, what)
    n = base.numel()
    if all(s > 0 for s in t.size):
        last = t.offset + sum((s - 1) * st for s, st in zip(t.size, t.stride))
        if t.offset < 0 or min(t.stride, default=0) < 0 or last >= n:
            raise CheckpointError(
                f"pyrite: load: {what}: size {list(t.size)}, stride {list(t.stride)} and offset "
                f"{t.offset} reach past its storage of {n} elements (corrupt file?)"
            )
    if base.dtype is D.complex64:  # (as_strided over its float pairs: complex has none)
        from ..ops.complex import view_as_complex, view_as_real

        # a view of the storage, as the real dtypes' (a copy lost the saved strides, and views
        # of one storage came back unshared)
        pairs = view_as_real(base).reshape(-1)
        size, stride = t.size + (2,), tuple(2 * s for s in t.stride) + (1,)
        out = view_as_complex(pairs.as_strided(size, stride, 2 * t.offset))
    else:
        out = base.as_strided(t.size, t.stride, t.offset)
    return as_parameter(out, t.requires_grad, t.parameter)
