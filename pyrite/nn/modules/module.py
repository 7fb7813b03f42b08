"""torch.nn.modules.module's names: `nn.modules.module.Module` is pyrite.nn.Module."""

from __future__ import annotations

from ..module import Buffer, Module, Parameter, RemovableHandle  # noqa: F401

__all__ = ["Module"]
