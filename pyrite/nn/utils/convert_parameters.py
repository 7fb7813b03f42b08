"""parameters_to_vector and vector_to_parameters (torch.nn.utils')."""

from __future__ import annotations

from ...ops import combine as _combine
from ...tensor import Tensor
from ..module import _set_data, _typename

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor (a copy)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return _combine.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make each parameter view its slice of `vec`, in order (as torch: the parameters then
    share vec's storage)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    pointer = 0
    for param in parameters:
        num_param = param.numel()
        _set_data(param, vec[pointer : pointer + num_param].view_as(param).detach())
        pointer += num_param
