"""torch.nn.attention: `SDPBackend` and the `sdpa_kernel` context manager, as LLM scripts choose
scaled_dot_product_attention's backend with them. pyrite has its own kernels (nn/_attention.py);
the block sets torch.backends.cuda's sdp switches (recorded, they choose nothing) and restores
them on exit, as torch's does."""

from __future__ import annotations

import contextlib
from enum import IntEnum

from . import bias

__all__ = ["SDPBackend", "bias", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(IntEnum):
    """torch's backend names and values."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


# the switch of pr.backends.cuda.sdp each backend sets
_SWITCHES = {
    SDPBackend.MATH: "math",
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "mem_efficient",
    SDPBackend.CUDNN_ATTENTION: "cudnn",
}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """Enable only `backends` (an SDPBackend or a list of them) inside the block."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    if not isinstance(backends, list) or not all(isinstance(b, SDPBackend) for b in backends):
        raise TypeError(
            "pyrite: sdpa_kernel: backends must be an SDPBackend or a list of SDPBackend, "
            f"got {backends!r}"
        )
    from ...runtime import backends as _flags

    enable = {f"enable_{name}": backend in backends for backend, name in _SWITCHES.items()}
    with _flags.cuda.sdp_kernel(**enable):  # (sets the four switches, restores them after)
        yield {}
