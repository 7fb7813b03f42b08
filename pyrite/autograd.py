"""Gradient mode. The tape and `backward` arrive with the training issue; the switches that
PyTorch code calls already work, as context managers and as decorators, and nest."""

from __future__ import annotations

import functools
import threading

_state = threading.local()


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


def _set(mode: bool):
    _state.enabled = bool(mode)


class _GradMode:
    mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self.mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Disable gradient recording inside the block (PyTorch's torch.no_grad)."""

    mode = False


class enable_grad(_GradMode):
    mode = True


class inference_mode(_GradMode):
    mode = False

    def __init__(self, mode=True):
        self.mode = not mode


class set_grad_enabled(_GradMode):
    """Set the mode now (a function call), and restore it when used as a context manager."""

    def __init__(self, mode: bool):
        self._prev = is_grad_enabled()
        self.mode = bool(mode)
        _set(mode)

    def __enter__(self):
        return self
