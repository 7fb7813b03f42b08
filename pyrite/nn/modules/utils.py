"""torch.nn.modules.utils' tuple helpers (`from torch.nn.modules.utils import _pair`)."""

from __future__ import annotations

from ._util import _ntuple, _pair, _reverse_repeat_tuple, _single, _triple  # noqa: F401

__all__ = []
_quadruple = _ntuple(4, "_quadruple")
