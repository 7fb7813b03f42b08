"""Writing a file so that a failure part-way never leaves a corrupt one (standard library only,
so any layer may use it): pr.save's checkpoints, the profiler's exports, the tuning cache."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path, write, mode=None) -> None:
    """Call `write(fh)` on a temporary file in `path`'s folder (binary), flush it to disk, then
    rename it over `path`; on any failure the temporary file goes and a previous `path` stays.
    The folder is synced after the rename where the platform allows (POSIX). `mode`: the file's
    permission bits (default: the temporary file's, owner-only)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # (torch's wording; mkstemp would name its temporary file)
        raise RuntimeError(f"pyrite: Parent directory {folder} does not exist.")
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself survives a crash once the folder is synced
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
