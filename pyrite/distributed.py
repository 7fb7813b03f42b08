"""torch.distributed as single-process scripts ask it: there is one device and no process
group, so it is not available and never initialized; `get_rank()` / `get_world_size()`
answer for the one process (0 and 1), as scripts' fallbacks assume."""

from __future__ import annotations


def is_available() -> bool:
    return False


def is_initialized() -> bool:
    return False


def is_torchelastic_launched() -> bool:
    return False


def get_rank(group=None) -> int:
    return 0


def get_world_size(group=None) -> int:
    return 1


def init_process_group(*args, **kwargs):
    raise RuntimeError("pyrite: torch.distributed is not available (one process, one device)")


def barrier(*args, **kwargs):
    pass
