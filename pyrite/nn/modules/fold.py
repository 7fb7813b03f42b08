"""torch.nn.modules.fold's names (the classes live in conv.py), for code that names a class
by its torch file (`torch.serialization.safe_globals([torch.nn.modules.fold.Fold])`)."""

from .conv import Fold, Unfold  # noqa: F401

__all__ = ["Fold", "Unfold"]
