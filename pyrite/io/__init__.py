"""Checkpoints: `pyrite.save` and `pyrite.load` (torch.save / torch.load's counterparts).

pyrite writes PyTorch's torch.save zip format for plain data (pyrite/io/_torch_write.py: what
`torch.load` reads), a safetensors file where the name ends `.safetensors` or the object is not
plain data (a whole Module: pyrite/io/_safetensors.py, _pickled.py), and reads back those, any
other safetensors file, and PyTorch's torch.save files in both the zip and the legacy format
(pyrite/io/_torch.py), without PyTorch and without running code from the file.
"""

from __future__ import annotations

import os

from .._fs import write_atomic
from . import _safetensors, _torch, _torch_write
from ._gguf import GGUFFile, load_gguf, unpermute_qk
from .errors import CheckpointError, UnpicklingError

__all__ = [
    "CheckpointError",
    "GGUFFile",
    "UnpicklingError",
    "load",
    "load_gguf",
    "save",
    "unpermute_qk",
]


def _write_all(fh, data: bytes) -> None:
    """Write `data` to an open binary file (a seam the atomic-save test breaks)."""
    view = memoryview(data)
    while view:
        n = fh.write(view)
        view = view[n if n is not None else len(view) :]


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """Save `obj` (a state dict, or nested dicts/lists/tuples of tensors, numbers, strings and
    None: an optimizer's state dict, a training checkpoint) to `f`, as torch.save.

    Plain data (dicts, OrderedDicts, Counters, lists, tuples, sets, strings, bytes,
    bytearrays, numbers, None, tensors, parameters, dtypes, Sizes: what torch.load's
    weights_only rule admits) is written
    in PyTorch's own torch.save zip format, so `torch.load(f)` reads it in any PyTorch since
    1.6 (int32 tensors stay int32, pyrite's integers), and so does `pyrite.load`. Tensors that
    view one storage are saved as views of it, so tied weights stay tied.

    A path ending `.safetensors`, and an object that is not plain data (a whole Module, as
    torch.save(model) saves it; numpy arrays), make one safetensors file instead: its tensors
    in their own dtypes (bfloat16 as raw 16-bit words), the structure around them as JSON in
    its metadata (a Module pickled, its tensors taken out), so a flat state dict is also a
    plain safetensors file other tools read (`safetensors.torch.load_file`). `pyrite.load`
    reads every file it writes.

    Args:
        obj: what to save.
        f: a path (str or os.PathLike) or a binary file object opened for writing. A path is
            written atomically: to a temporary file in the same folder, flushed to disk, then
            renamed over `f`, so a failure part-way leaves any previous file intact.
        pickle_module, pickle_protocol, _use_new_zipfile_serialization: accepted for torch
            compatibility and ignored (the zip format's pickle is protocol 2, as torch's).

    Example::

        >>> pr.save({"model": model.state_dict(), "step": 100}, "ckpt.pt")
    """
    is_path = isinstance(f, (str, os.PathLike))
    if not is_path and not hasattr(f, "write"):
        raise TypeError(
            f"pyrite: save: f must be a path or a binary file object, not {type(f).__name__}"
        )
    archive = _archive(obj, f)
    if archive is not None and is_path:  # (streamed: one storage in host memory at a time)
        _write_path(f, archive.write)
        return
    if archive is not None:
        data = _torch_write.dumps_archive(archive)
    else:
        data = _safetensors.dumps(obj)
    if is_path:
        _write_path(f, lambda fh: _write_all(fh, data))
    else:
        _write_all(f, data)


def _write_path(f, write) -> None:
    """write_atomic(f, write), an OS error about its temporary file (a folder that cannot be
    written: '/sys/.x.pt.k3j2.tmp'; `f` a folder) reported as about `f`, as torch.save's."""
    path = os.fspath(f)
    try:
        write_atomic(path, write)
    except OSError as exc:
        temp = f".{os.path.basename(path)}."
        if not os.path.basename(str(exc.filename or "")).startswith(temp):
            raise
        why = exc.strerror or str(exc)
        raise type(exc)(exc.errno, f"pyrite: save: {why}", path) from None


def _archive(obj, f):
    """The torch.save zip archive `save(obj, f)` writes, or None where it writes safetensors
    (a name ending .safetensors, or `obj` not plain data)."""
    path = os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", None)
    path = path if isinstance(path, str) else None
    if path is not None and path.endswith(".safetensors"):
        return None
    # (torch names the archive's folder by the file's stem; "archive" for file objects)
    stem = os.path.splitext(os.path.basename(path))[0] if path else ""
    try:
        return _torch_write.Archive(obj, stem or "archive")
    except _torch_write.NotPlain:
        return None


def _describe(f) -> str:
    if isinstance(f, (str, os.PathLike)):
        return repr(os.fspath(f))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"the {type(f).__name__} object"


def load(
    f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args
):
    """Load an object saved by `pyrite.save`, a safetensors file (a dict of its tensors), or a
    PyTorch `torch.save` file (zip or legacy format), as torch.load.

    PyTorch files are read without PyTorch: their pickle runs through an Unpickler that admits
    only tensors, parameters, storages, dtypes, torch.Size, OrderedDict, Counter and builtin
    containers (torch.load(weights_only=True)'s rule), and refuses anything else with
    `pyrite.io.UnpicklingError` naming it, before it could run. Tensors keep their saved
    size, stride and offset (views of one device tensor per saved storage); int64 values
    become int32 after a range check and float64 float32 (pyrite's dtypes).

    Args:
        f: a path (str or os.PathLike) or a binary file object opened for reading.
        map_location: accepted and ignored: every tensor goes to pyrite's device.
        pickle_module: accepted and ignored.
        weights_only (bool): for PyTorch files, False also admits non-torch globals (the
            file's pickle may then import and run code; only for files you trust). Default True.
        mmap: accepted and ignored.
        **pickle_load_args: passed to the Unpickler (`encoding="latin1"` for Python 2 files).

    Raises:
        FileNotFoundError: there is no file at `f`.
        pyrite.io.CheckpointError: the file is truncated, corrupt, or of no format pyrite reads.
        pyrite.io.UnpicklingError: a PyTorch file asks for a class or function not admitted.

    Example::

        >>> model.load_state_dict(pr.load("pytorch_model.bin"))
    """
    where = _describe(f)
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if not os.path.exists(path):
            raise FileNotFoundError(f"pyrite: load: no such file: {where}")
        if os.path.isdir(path):
            raise IsADirectoryError(f"pyrite: load: {where} is a folder, not a checkpoint")
        with open(path, "rb") as fh:
            return _load_open(fh, where, weights_only, pickle_load_args)
    if not hasattr(f, "read"):
        raise TypeError(
            f"pyrite: load: f must be a path or a binary file object, not {type(f).__name__}"
        )
    return _load_open(f, where, weights_only, pickle_load_args)


def _load_open(fh, where, weights_only, pickle_kw):
    import io

    if not (hasattr(fh, "seek") and fh.seekable()):
        fh = io.BytesIO(fh.read())
    start = fh.tell()
    head = fh.read(16)
    fh.seek(start)
    if not head:
        raise CheckpointError(f"pyrite: load: {where} is empty")
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _torch.load_zip(fh, where, weights_only, pickle_kw)
    if _safetensors.looks_like(head):
        return _safetensors.loads(fh.read(), where, weights_only)
    if head[:1] == b"\x80":  # a pickle, protocol >= 2: PyTorch's legacy format
        return _torch.load_legacy(fh, where, weights_only, pickle_kw)
    raise CheckpointError(
        f"pyrite: load: {where} is not a checkpoint pyrite reads (a pyrite or safetensors file, "
        f"or PyTorch's torch.save format); it starts with {bytes(head[:8])!r}"
    )
