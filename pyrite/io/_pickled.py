"""Whole objects in a pyrite checkpoint: `pr.save(model, f)` as torch.save(model, f) does it.

An object that is not plain data (a Module, a script's own class) is pickled, with every tensor
taken out of the pickle as a persistent id: the tensors are the safetensors file's tensors (one
entry per tensor view, shared ones once), the pickle is base64 in the file's pyrite metadata.

Loading it follows torch.load's rule. weights_only=True (the default) unpickles only the
globals pyrite admits by default (containers, dtypes, Size, device) and those the caller
allowlisted (`pr.serialization.add_safe_globals`, or the `safe_globals` context): anything else
raises UnpicklingError naming it, before it is imported. weights_only=False imports and runs
what the pickle names (only for files you trust).
"""

from __future__ import annotations

import base64
import collections
import io
import pickle

from .. import dtypes as D
from ..tensor import Size, Tensor, device
from .errors import UnpicklingError

# ---- the allowlist: torch.serialization's add_safe_globals / safe_globals --------------------
_user_globals: list = []  # add_safe_globals
_context_globals: list = []  # one list per open safe_globals context


def add_safe_globals(safe_globals):
    """Allowlist classes and functions for weights_only loads (torch.serialization's): each an
    object, or an (object, "module.name") pair naming where the pickle finds it."""
    _user_globals.extend(safe_globals)


def get_safe_globals():
    """The globals allowlisted by add_safe_globals."""
    return list(_user_globals)


def clear_safe_globals():
    """Forget every global allowlisted by add_safe_globals."""
    _user_globals.clear()


class safe_globals:
    """`with pr.serialization.safe_globals([Net, ...]):` allowlists them for the loads inside."""

    def __init__(self, safe_globals):
        self.safe_globals = list(safe_globals)

    def __enter__(self):
        _context_globals.append(self.safe_globals)
        return self

    def __exit__(self, *exc):
        _context_globals.remove(self.safe_globals)
        return False


def _qualified(obj) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


def user_global(module: str, name: str):
    """The allowlisted object a pickle names `module.name`, or None."""
    want = f"{module}.{name}"
    for entries in (_user_globals, *_context_globals):
        for entry in entries:
            if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[1], str):
                obj, where = entry
            else:
                obj, where = entry, _qualified(entry)
            if where == want:
                return obj
    return None


_DEFAULTS = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("collections", "Counter"): collections.Counter,
    ("collections", "defaultdict"): collections.defaultdict,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "slice"): slice,
    ("builtins", "complex"): complex,
    ("builtins", "bytearray"): bytearray,
    ("builtins", "range"): range,
    ("pyrite.dtypes", "_by_name"): D._by_name,
    ("pyrite.tensor", "Size"): Size,
    ("pyrite.tensor", "device"): device,
}


# ---- saving ---------------------------------------------------------------------------------
def dumps(obj, tensor_node) -> str:
    """The base64 pickle of `obj`, each tensor replaced by `tensor_node(t)` (its JSON node)."""

    refs = {}  # id(tensor object) -> its number: one object saved twice loads as one

    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if not isinstance(o, Tensor):
                return None
            node = dict(tensor_node(o))
            node["ref"] = refs.setdefault(id(o), len(refs))
            if getattr(o, "_is_buffer", False):  # (nn.Buffer's mark and its persistence)
                node["buffer"] = bool(getattr(o, "persistent", True))
            return node

    buf = io.BytesIO()
    Pickler(buf, protocol=pickle.DEFAULT_PROTOCOL).dump(obj)
    return base64.b64encode(buf.getvalue()).decode("ascii")


# ---- loading --------------------------------------------------------------------------------
def loads(text: str, where: str, tensor_of, weights_only: bool):
    """Unpickle what dumps wrote; `tensor_of(node)` rebuilds a tensor from its JSON node."""
    rebuilt = {}

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if not weights_only:
                return super().find_class(module, name)
            got = _DEFAULTS.get((module, name))
            if got is None:
                got = user_global(module, name)
            if got is None:
                raise UnpicklingError(
                    f"pyrite: load: {where}: Weights only load failed. Unsupported global: "
                    f"GLOBAL {module}.{name} was not an allowed global by default. If you "
                    f"trust this class or function, allowlist it with "
                    f"`pyrite.serialization.add_safe_globals([{name}])` or the "
                    f"`pyrite.serialization.safe_globals([{name}])` context manager; if you "
                    "trust the whole file, weights_only=False lets its pickle import and run it."
                )
            return got

        def persistent_load(self, pid):
            key = pid.get("ref")
            if key not in rebuilt:
                t = tensor_of(pid)
                if "buffer" in pid:
                    from ..nn.module import Buffer

                    t = Buffer(t, persistent=pid["buffer"])
                rebuilt[key] = t
            return rebuilt[key]

    data = base64.b64decode(text.encode("ascii"))
    return Unpickler(io.BytesIO(data)).load()
