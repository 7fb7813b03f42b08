"""`pyrite.nn`: for now only `functional` (torch.nn.functional's forward ops); modules
(Linear, LayerNorm, ...) and parameters come with the training issue.

`TOPLEVEL` holds the torch.* spellings of functional ops (torch.selu, torch.batch_norm, ...),
exported by `pyrite/__init__.py`; the Tensor methods among them are installed here."""

from ..tensor import Tensor as _Tensor
from . import functional
from ._toplevel import METHODS as _METHODS
from ._toplevel import TOPLEVEL

for _name, _fn in _METHODS.items():
    setattr(_Tensor, _name, _fn)

__all__ = ["TOPLEVEL", "functional"]

# ---- modules, parameters, init and utils (issue 5) -----------------------------------------
from . import attention, init, utils  # noqa: E402
from .module import Buffer, Module, Parameter  # noqa: E402
from .modules import *  # noqa: E402, F403
from .modules import __all__ as _modules_all  # noqa: E402

__all__ += ["Buffer", "Module", "Parameter", "attention", "init", "utils", *_modules_all]
