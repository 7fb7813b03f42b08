"""`pyrite.nn`: for now only `functional` (torch.nn.functional's forward ops); modules
(Linear, LayerNorm, ...) and parameters come with the training issue."""

from . import functional

__all__ = ["functional"]
