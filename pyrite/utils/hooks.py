"""torch.utils.hooks's names: `RemovableHandle` (what every register_*_hook returns: the Module
hooks' class, pyrite/nn/module.py), `unserializable_hook` and `warn_if_has_hooks`, for code that
imports them (`from torch.utils.hooks import RemovableHandle` in type hints and hook managers)."""

from __future__ import annotations

from ..errors import warn
from ..nn.module import RemovableHandle

__all__ = ["RemovableHandle", "unserializable_hook", "warn_if_has_hooks"]


def unserializable_hook(f):
    """Mark a tensor hook as one that need not survive serialization (no warning for it)."""
    f.__torch_unserializable__ = True
    return f


def warn_if_has_hooks(tensor):
    """Warn, as torch does when it pickles a tensor, for each backward hook on `tensor` that is
    not marked unserializable_hook (a hook is never saved with its tensor)."""
    from ..autograd import _hooks_of

    entry = _hooks_of(tensor, create=False) if tensor.requires_grad else None
    for hook in entry[1] if entry else ():
        if not hasattr(hook, "__torch_unserializable__"):
            warn(
                f"backward hook {hook!r} on tensor will not be serialized.  If this is "
                "expected, you can decorate the function with @torch.utils.hooks."
                "unserializable_hook to suppress this warning"
            )
