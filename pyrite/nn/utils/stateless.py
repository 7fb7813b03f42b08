"""torch.nn.utils.stateless: functional_call's deprecated spelling (torch.func.functional_call
is the one to use; pyrite/nn/utils/_functional_call.py)."""

from __future__ import annotations

from pyrite.errors import warn as _warn

from ._functional_call import functional_call as _functional_call

__all__ = ["functional_call"]


def functional_call(
    module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False
):
    """torch.func.functional_call, with torch's deprecation warning."""
    _warn(
        "pyrite: `torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
        "and will be removed in a future version of PyTorch. Please use "
        "`torch.func.functional_call` instead which is a drop-in replacement.",
        FutureWarning,
        stacklevel=2,
    )
    return _functional_call(
        module, parameters_and_buffers, args, kwargs, tie_weights=tie_weights, strict=strict
    )
