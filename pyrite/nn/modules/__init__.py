"""The layers of pyrite.nn, one concern a file (torch.nn.modules' layout)."""

# torch.nn.parallel's DataParallel (a thin wrapper on one device) is exported as nn.DataParallel;
# instancenorm, module, normalization, utils are torch.nn.modules' other file names, re-exports
# (nn.modules.module.Module, nn.modules.utils._pair, nn.modules.batchnorm._BatchNorm, ...)
from ..parallel import DataParallel  # noqa: F401  (and makes pyrite.nn.parallel)
from . import (  # noqa: F401
    activation,
    adaptive,
    attention,
    batchnorm,
    channelshuffle,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    lazy,
    legacy,
    linear,
    linear_cross_entropy,
    loss,
    module,
    norm,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsample,
    upsampling,
    utils,
)
from .activation import *  # noqa: F403
from .adaptive import *  # noqa: F403
from .attention import *  # noqa: F403
from .batchnorm import *  # noqa: F403
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .distance import *  # noqa: F403
from .dropout import *  # noqa: F403
from .flatten import *  # noqa: F403
from .lazy import *  # noqa: F403
from .legacy import *  # noqa: F403
from .linear import *  # noqa: F403
from .linear_cross_entropy import *  # noqa: F403
from .loss import *  # noqa: F403
from .module import Module  # noqa: F401  (`from torch.nn.modules import Module`)
from .norm import *  # noqa: F403
from .padding import *  # noqa: F403
from .pooling import *  # noqa: F403
from .rnn import *  # noqa: F403
from .sparse import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsample import *  # noqa: F403

_FILES = (activation, adaptive, attention, batchnorm, container, conv, distance, dropout, flatten, lazy, legacy, linear,
          linear_cross_entropy, loss, norm, padding, pooling, rnn, sparse, transformer, upsample)  # fmt: skip
__all__ = sorted({name for mod in _FILES for name in mod.__all__} | {"DataParallel"})

# torch's files hold some classes pyrite defines elsewhere (the lazy modules in lazy.py, the
# legacy ones in legacy.py): code names them by torch's file (torch.nn.modules.conv.LazyConv2d)
for _file, _names in (
    (batchnorm, ("LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d")),
    (conv, ("LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
            "LazyConvTranspose2d", "LazyConvTranspose3d")),
    (instancenorm, ("LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d")),
    (linear, ("LazyLinear",)),
    (container, ("Container",)),
    (loss, ("NLLLoss2d", "LinearCrossEntropyLoss")),
    (normalization, ("CrossMapLRN2d",)),
):  # fmt: skip
    for _name in _names:
        setattr(_file, _name, globals()[_name])
del _file, _names, _name
