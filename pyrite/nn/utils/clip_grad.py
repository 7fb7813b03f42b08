"""clip_grad_norm_, clip_grad_value_, get_total_norm, clip_grads_with_norm_ (torch.nn.utils').

Nothing is read back: the total norm stays a 0-d device tensor and the clip coefficient
min(max_norm / (norm + 1e-6), 1) multiplies the gradients on the device; only
error_if_nonfinite=True reads one bool."""

from __future__ import annotations

import functools

from pyrite.errors import PyriteError
from pyrite.errors import warn as _warn

from ... import dtypes as D
from ...autograd import no_grad
from ...ops import combine as _combine
from ...ops import creation as _creation
from ...ops import elementwise as _ew
from ...ops.linalg_norms import vector_norm
from ...tensor import Tensor

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm"]  # fmt: skip


def _tensor_list(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm of the norms of `tensors` (= the norm of all of them concatenated)."""
    tensors = _tensor_list(tensors)
    norm_type = float(norm_type)
    if len(tensors) == 0:
        return _creation.tensor(0.0)
    with no_grad():
        norms = [vector_norm(t, norm_type) for t in tensors]
        total_norm = vector_norm(_combine.stack([n.float() for n in norms]), norm_type)
        # in the tensors' (promoted) dtype, as torch's: bfloat16 gradients give a bfloat16
        # norm (here summed in float32 and rounded once), and so a bfloat16 clip coefficient
        dtype = functools.reduce(D.result_type_of, (n.dtype for n in norms))
        if dtype is not total_norm.dtype:
            total_norm = total_norm.to(dtype)
    if error_if_nonfinite and not bool(_ew.isfinite(total_norm)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from "
            "`parameters` is non-finite, so it cannot be clipped. To disable "
            "this error and scale the gradients by the non-finite norm anyway, "
            "set `error_if_nonfinite=False`"
        )
    return total_norm


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by min(max_norm / (total_norm + 1e-6), 1), in place."""
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if len(grads) == 0:
        return
    with no_grad():
        clip_coef = float(max_norm) / (total_norm + 1e-6)
        clip_coef_clamped = _ew.clamp(clip_coef, max=1.0)
        for g in grads:
            g.mul_(clip_coef_clamped.to(g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of `parameters` so that their total norm is at most max_norm.

    Args:
        parameters (Iterable[Tensor] or Tensor): tensors whose .grad is clipped in place.
        max_norm (float): the largest total norm.
        norm_type (float): the p of the p-norm; 'inf' for the max norm. Default: 2.0.
        error_if_nonfinite (bool): raise if the total norm is nan or inf. Default: False.

    Returns:
        The total norm of the gradients before clipping (a 0-d tensor).
    """
    parameters = _tensor_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated spelling of clip_grad_norm_."""

    _warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=2,
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of `parameters` to [-clip_value, clip_value], in place.

    As torch 2.13's: a NaN clip_value makes every gradient NaN, and parameters none of which
    has a gradient raise (torch's grouping of the gradients by device refuses an empty list,
    whatever `foreach`), where clip_grad_norm_ returns a zero norm."""
    clip_value = float(clip_value)
    grads = [p.grad for p in _tensor_list(parameters) if p.grad is not None]
    if not grads:
        raise PyriteError(
            "pyrite: Expected !nested_tensorlist[0].empty() to be true, but got false. "
            "(clip_grad_value_: none of the parameters has a gradient; torch raises this too)"
        )
    with no_grad():
        for g in grads:
            g.clamp_(min=-clip_value, max=clip_value)
