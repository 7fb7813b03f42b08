"""pyrite's checkpoint format: one safetensors file.

Tensors are the file's tensors, each in its own dtype (bfloat16 as safetensors' BF16, its raw
16-bit words). The object around them (dicts with any keys, OrderedDicts, lists, tuples,
numbers, strings, None) is JSON in the header's metadata under "pyrite". A flat state dict's
tensors are named by their keys, so the file is also an ordinary safetensors state dict that
`safetensors.torch.load_file` reads. Entries that are the same tensor view (tied weights) are
stored once and come back as one tensor.

Structure encoding: JSON scalars are themselves; a container is a one-key object,
{"dict": [[k, v], ...]}, {"odict": ...}, {"counter": ...} (a collections.Counter: MultiStepLR's
milestones), {"list": [...]}, {"tuple": [...]}, {"size": [...]} (a Size); a tensor is
{"tensor": name} (+ "requires_grad", "parameter"; "complex": a complex64 tensor stored as its
(..., 2) float32 pairs, as pyrite wrote them before C64); a numpy array {"ndarray": name}; a pyrite
dtype {"dtype": name}. An OrderedDict carrying a `_metadata` attribute (a state dict: each
module's version, which load_state_dict reads, as torch.save keeps it) is
{"odictm": [[[k, v], ...], metadata]}. An object that is none of these (a whole Module, as
torch.save(model) saves it) makes the structure {"pickle": base64}: the object pickled with
each tensor a persistent id holding its node (_pickled.py).
"""

from __future__ import annotations

import collections
import json
import struct

import numpy as np
import safetensors

from .. import dtypes as D
from ..tensor import Size, Tensor
from . import _pickled
from ._host import SAFETENSORS_CODES, SAFETENSORS_NAME, host_to_tensor, tensor_to_host
from .errors import CheckpointError

FORMAT_KEY = "pyrite"
_NUMPY_NAMES = {
    np.dtype(k): v
    for k, v in {
        np.float64: "float64",
        np.float32: "float32",
        np.float16: "float16",
        np.int64: "int64",
        np.int32: "int32",
        np.int16: "int16",
        np.int8: "int8",
        np.uint64: "uint64",
        np.uint32: "uint32",
        np.uint16: "uint16",
        np.uint8: "uint8",
        np.bool_: "bool",
    }.items()
}


class _NotPlain(TypeError):
    """An object the JSON structure cannot hold (a Module, a script's class): pickled instead."""

    def __init__(self, path, obj):
        super().__init__(f"pyrite: save: {path or 'the object'} of type {type(obj).__name__}")


class _Writer:
    """Walks an object, collecting its tensors (named, deduplicated) and its JSON structure."""

    def __init__(self):
        self.arrays = {}  # name -> (numpy array, safetensors dtype name)
        self.seen = {}  # a tensor view's identity -> its name
        self.flat = False

    def name_for(self, path: str) -> str:
        name = path or "tensor"
        if name == "__metadata__":
            name = "_" + name
        base, k = name, 1
        while name in self.arrays:
            name, k = f"{base}#{k}", k + 1
        return name

    def encode(self, obj, path: str):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, (int, float)):
            return obj
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if isinstance(obj, Tensor):
            return self.tensor(obj, path)
        if isinstance(obj, np.ndarray):
            dt = _NUMPY_NAMES.get(obj.dtype)
            if dt is None:
                raise TypeError(
                    f"pyrite: save: {path or 'the object'} is a numpy array of dtype "
                    f"{obj.dtype}, which a safetensors file cannot hold"
                )
            name = self.name_for(path)
            self.arrays[name] = (np.ascontiguousarray(obj).reshape(obj.shape), dt)
            return {"ndarray": name}
        if isinstance(obj, D.dtype):
            return {"dtype": obj.name}
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, collections.OrderedDict) else "dict"
            if isinstance(obj, collections.Counter):  # (MultiStepLR's milestones)
                kind = "counter"
            items = []
            for k, v in obj.items():
                key = self.encode_key(k, path)
                items.append([key, self.encode(v, f"{path}.{k}" if path else str(k))])
            meta = getattr(obj, "_metadata", None) if kind == "odict" else None
            if isinstance(meta, dict):  # (a state dict's module versions)
                return {"odictm": [items, self.encode(meta, f"{path}._metadata")]}
            return {kind: items}
        if isinstance(obj, Size):  # (before tuple: a Size came back a plain tuple)
            return {"size": [int(x) for x in obj]}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {
                kind: [self.encode(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(obj)]
            }
        raise _NotPlain(path, obj)

    def encode_key(self, k, path):
        if isinstance(k, (Tensor, np.ndarray, dict, list)):
            raise TypeError(
                f"pyrite: save: a dict key of type {type(k).__name__} in {path or 'the object'}"
            )
        return self.encode(k, path)

    def tensor(self, t: Tensor, path: str):
        ident = (id(t._storage), t._offset, t._shape, t._strides, t.dtype)
        name = self.seen.get(ident)
        if name is None:
            name = self.name_for(path)
            # (complex64 as safetensors' C64, which safetensors.torch reads as complex64)
            self.arrays[name] = (tensor_to_host(t), SAFETENSORS_NAME[t.dtype])
            self.seen[ident] = name
        node = {"tensor": name}
        if t.requires_grad:
            node["requires_grad"] = True
        if type(t).__name__ == "Parameter":
            node["parameter"] = True
        return node


def _serialize(arrays: dict, metadata: dict) -> bytes:
    if hasattr(safetensors, "TensorSpec"):  # safetensors >= 0.8
        specs = {
            name: safetensors.TensorSpec(
                dtype=dt, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes
            )
            for name, (a, dt) in arrays.items()
        }
    else:
        specs = {
            name: {"dtype": dt, "shape": list(a.shape), "data": a.tobytes()}
            for name, (a, dt) in arrays.items()
        }
    return bytes(safetensors.serialize(specs, metadata=metadata))


def dumps(obj) -> bytes:
    """The bytes of a pyrite checkpoint of `obj`."""
    w = _Writer()
    try:
        structure = w.encode(obj, "")
    except _NotPlain:  # (not plain data: pickled, its tensors the file's: _pickled.py)
        w = _Writer()
        structure = {"pickle": _pickled.dumps(obj, lambda t: w.tensor(t, str(len(w.arrays))))}
    metadata = {"format": "pt", FORMAT_KEY: json.dumps(structure, allow_nan=True)}
    return _serialize(w.arrays, metadata)


def looks_like(head: bytes) -> bool:
    """Whether the first bytes of a file are a safetensors header (u64 length, then '{')."""
    return len(head) >= 9 and head[8:9] == b"{" and struct.unpack("<Q", head[:8])[0] > 1


def loads(data: bytes, name: str, weights_only: bool = True):
    """The object a safetensors file holds: pyrite's structure if it has one, else a dict of
    its tensors in file order. A pickled object (a whole Module) is unpickled under
    torch.load's weights_only rule (_pickled.py)."""
    try:
        tensors = dict(safetensors.deserialize(data))
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(bytes(data[8 : 8 + n]))
    except Exception as exc:  # SafetensorError, struct.error, JSON errors
        raise CheckpointError(
            f"pyrite: load: {name} is not a readable safetensors file (truncated or corrupt?): "
            f"{exc}"
        ) from None
    meta = header.get("__metadata__") or {}
    cache = {}

    def get(key, want_numpy=False):
        if key not in cache:
            if key not in tensors:
                raise CheckpointError(f"pyrite: load: {name} has no tensor {key!r}")
            info = tensors[key]
            code = info["dtype"]
            if code not in SAFETENSORS_CODES:
                raise CheckpointError(
                    f"pyrite: load: tensor {key!r} in {name} has dtype {code}, which pyrite "
                    "lacks (it has float32/16, bfloat16, int32/16/8, uint8, bool, complex64)"
                )
            arr = np.frombuffer(info["data"], dtype=SAFETENSORS_CODES[code]).reshape(info["shape"])
            cache[key] = (
                arr.copy()
                if want_numpy
                else host_to_tensor(arr, code == "BF16", f"tensor {key!r} in {name}")
            )
        return cache[key]

    if FORMAT_KEY not in meta:
        order = sorted(
            (k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"]
        )
        return {k: get(k) for k in order}

    def decode(node):
        if not isinstance(node, dict):
            return node
        ((kind, v),) = [("tensor", node["tensor"])] if "tensor" in node else node.items()
        if kind == "pickle":
            return _pickled.loads(v, name, decode, weights_only)
        if kind == "tensor":
            t = get(v)
            if node.get("complex"):  # (older pyrite files: complex as its float pairs)
                from ..ops.complex import view_as_complex

                t = view_as_complex(t)
            return as_parameter(t, node.get("requires_grad", False), node.get("parameter"))
        if kind == "ndarray":
            return get(v, want_numpy=True)
        if kind == "dtype":
            return D.from_any(v)
        if kind in ("dict", "odict", "counter"):
            items = dict if kind == "dict" else collections.OrderedDict
            out = items((_hashable(decode(k)), decode(x)) for k, x in v)
            return collections.Counter(out) if kind == "counter" else out
        if kind == "odictm":
            items, meta = v
            out = collections.OrderedDict((_hashable(decode(k)), decode(x)) for k, x in items)
            out._metadata = decode(meta)
            return out
        if kind == "list":
            return [decode(x) for x in v]
        if kind == "tuple":
            return tuple(decode(x) for x in v)
        if kind == "size":
            return Size(v)
        raise CheckpointError(f"pyrite: load: {name}: unknown structure entry {kind!r}")

    try:
        structure = json.loads(meta[FORMAT_KEY])
    except ValueError as exc:
        raise CheckpointError(f"pyrite: load: {name}: its pyrite metadata is corrupt: {exc}")
    return decode(structure)


def as_parameter(t: Tensor, requires_grad: bool, parameter: bool) -> Tensor:
    """`t` as an nn.Parameter (where pyrite.nn has one) or with requires_grad set."""
    from .. import nn

    cls = getattr(nn, "Parameter", None) if parameter else None
    if cls is not None:
        return cls(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _hashable(k):
    return tuple(_hashable(x) for x in k) if isinstance(k, (list, tuple)) else k
