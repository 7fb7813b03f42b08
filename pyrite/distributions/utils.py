"""Helpers shared by the distributions: parameter broadcasting, probs <-> logits, lazy
attributes, and summing the rightmost dims of a log-density."""

from __future__ import annotations

import numbers

import pyrite as pr

__all__ = [
    "BinaryParams",
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "sum_rightmost",
]


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number)


def broadcast_all(*values):
    """Broadcast tensors and Python numbers to one shape. Numbers become tensors of the first
    tensor argument's dtype (the default dtype if none), as torch.distributions.utils does."""
    tensors = [v for v in values if isinstance(v, pr.Tensor)]
    for v in values:
        if not isinstance(v, pr.Tensor) and not _is_number(v):
            raise ValueError(
                "Input arguments must all be instances of numbers.Number, "
                f"pyrite.Tensor or objects implementing __torch_function__, got {type(v)}"
            )
    if not tensors:
        dtype = pr.get_default_dtype()
        return tuple(pr.tensor(float(v), dtype=dtype) for v in values)
    dtype = tensors[0].dtype
    values = [v if isinstance(v, pr.Tensor) else pr.tensor(float(v), dtype=dtype) for v in values]
    shape = tuple(pr.broadcast_shapes(*(tuple(v.shape) for v in values)))
    # expand (differentiable) rather than broadcast_tensors (pyrite has no gradient for it)
    return tuple(v if tuple(v.shape) == shape else v.expand(shape) for v in values)


def sum_rightmost(value, dim: int):
    """Sum out the `dim` rightmost dims of `value` (none if dim is 0)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Probabilities clamped to [eps, 1 - eps] of their dtype, so their logs are finite."""
    eps = pr.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary: bool = False):
    """Sigmoid of binary logits, else softmax over the last dim."""
    if is_binary:
        return pr.sigmoid(logits)
    return pr.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary: bool = False):
    """log p (or log-odds for binary probabilities), with p clamped away from 0 and 1."""
    p = clamp_probs(probs)
    if is_binary:
        return pr.log(p) - pr.log1p(-p)
    return pr.log(p)


class lazy_property:  # noqa: N801 (torch's spelling)
    """A property computed on first use and then stored in the instance's __dict__ (so a
    parameter given to __init__ under that name simply shadows it)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__
        self.__name__ = wrapped.__name__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with pr.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


class BinaryParams:
    """`probs` or `logits` of a binary family (Bernoulli, Binomial, Geometric, ContinuousBernoulli,
    LogitRelaxedBernoulli): exactly one given, the other computed on first use, `param_shape`,
    and `expand` of whichever was given."""

    def _set_param(self, probs, logits, *extra):
        """Broadcast the given one of probs / logits with `extra` (as broadcast_all) and keep
        it; returns (the batch shape, the broadcast extras)."""
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        name, value = ("probs", probs) if probs is not None else ("logits", logits)
        *rest, param = broadcast_all(*extra, value)
        setattr(self, name, param)
        self._param = param
        # the batch shape is the broadcast of every argument (total_count's too), () only
        # where all of them are plain numbers
        plain = all(isinstance(v, numbers.Number) for v in (*extra, value))
        return (pr.Size() if plain else param.size()), rest

    def _expand_param(self, new, batch_shape):
        """`new`'s probs / logits: this one's given parameter expanded to batch_shape."""
        for name in ("probs", "logits"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(batch_shape))
                new._param = getattr(new, name)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.size()
