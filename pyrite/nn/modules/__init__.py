"""The layers of pyrite.nn, one concern a file (torch.nn.modules' layout)."""

from .activation import *  # noqa: F403
from .attention import MultiheadAttention
from .container import *  # noqa: F403
from .conv import *  # noqa: F403
from .dropout import *  # noqa: F403
from .flatten import *  # noqa: F403
from .linear import *  # noqa: F403
from .loss import *  # noqa: F403
from .norm import *  # noqa: F403
from .padding import *  # noqa: F403
from .pooling import *  # noqa: F403
from .sparse import *  # noqa: F403
from .transformer import *  # noqa: F403
from .upsample import *  # noqa: F403
from . import activation, container, conv, dropout, flatten, linear, loss, norm  # noqa: E402
from . import padding, pooling, sparse, transformer, upsample  # noqa: E402

__all__ = sorted(
    {"MultiheadAttention"}
    | {
        name
        for mod in (activation, container, conv, dropout, flatten, linear, loss, norm, padding,
                    pooling, sparse, transformer, upsample)
        for name in mod.__all__
    }
)  # fmt: skip
