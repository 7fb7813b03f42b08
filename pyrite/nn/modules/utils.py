"""torch.nn.modules.utils' tuple helpers (`from torch.nn.modules.utils import _pair`)."""

from __future__ import annotations

from ._util import _ntuple, _pair, _reverse_repeat_tuple, _single, _triple  # noqa: F401

__all__ = []
_quadruple = _ntuple(4, "_quadruple")


def consume_prefix_in_state_dict_if_present(state_dict, prefix: str) -> None:
    """Strip `prefix` from the keys of `state_dict` that have it, in place, as torch's (a
    DataParallel / DDP checkpoint's "module." keys), and from its `_metadata` keys too."""
    keys = [k for k in state_dict if k.startswith(prefix)]
    for key in keys:
        state_dict[key[len(prefix) :]] = state_dict.pop(key)
    meta = getattr(state_dict, "_metadata", None)
    if meta is not None:
        for key in list(meta):
            if key.startswith(prefix) or key == prefix.rstrip("."):
                new = "" if key == prefix.rstrip(".") else key[len(prefix) :]
                meta[new] = meta.pop(key)
