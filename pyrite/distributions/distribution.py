"""The Distribution base class, as torch.distributions.Distribution."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


class Distribution:
    """A probability distribution with a batch shape and an event shape.

    `batch_shape` indexes independent (not necessarily identical) distributions; `event_shape`
    is the shape of one draw. Samples have shape `sample_shape + batch_shape + event_shape`;
    `log_prob` returns `sample_shape + batch_shape`. With `validate_args` (default: on unless
    Python runs with -O, switchable by `Distribution.set_default_validate_args`), parameters are
    checked against `arg_constraints` at construction and values against `support` in
    `log_prob`/`cdf`, raising ValueError as torch does.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__
    arg_constraints: dict = {}

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions created afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = pr.Size(batch_shape)
        self._event_shape = pr.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # depends on other parameters: cannot be checked alone
                if param not in self.__dict__ and isinstance(
                    getattr(type(self), param, None), lazy_property
                ):
                    continue  # derived from the parameter that was given
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}"
                    )

    # ---- shapes -----------------------------------------------------------------------------
    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=()):
        return pr.Size(tuple(sample_shape)) + self._batch_shape + self._event_shape

    def expand(self, batch_shape, _instance=None):
        """A distribution with its parameters expanded (as views) to `batch_shape`."""
        raise NotImplementedError

    def _init_params(self, names, values, validate_args):
        """The parameters `names` set to `values` broadcast together; the batch shape is
        theirs (() when every value is a plain number)."""
        import numbers

        from .utils import broadcast_all

        tensors = broadcast_all(*values)
        for name, t in zip(names, tensors):
            setattr(self, name, t)
        plain = all(isinstance(v, numbers.Number) for v in values)
        Distribution.__init__(
            self, pr.Size() if plain else tensors[0].size(), validate_args=validate_args
        )

    def _expand_params(self, cls, names, batch_shape, _instance):
        """expand() for a distribution whose state is the parameters `names` alone."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = pr.Size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {type(self).__name__} of {cls.__name__} that defines a custom "
                "__init__ method must also define a custom .expand() method."
            )
        return type(self).__new__(type(self)) if _instance is None else _instance

    # ---- moments ----------------------------------------------------------------------------
    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def support(self):
        raise NotImplementedError

    # ---- sampling and densities -------------------------------------------------------------
    def sample(self, sample_shape=()):
        """A sample of shape sample_shape + batch_shape + event_shape, outside autograd."""
        with pr.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        """A reparameterized sample: differentiable with respect to the parameters."""
        raise NotImplementedError

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return pr.exp(self.entropy())

    # ---- validation -------------------------------------------------------------------------
    def _validate_sample(self, value):
        """Raise ValueError unless `value` is a tensor of a broadcastable shape in the support."""
        if not isinstance(value, pr.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = pr.Size(tuple(value.shape))
        event_start = len(shape) - len(self._event_shape)
        if shape[event_start:] != self._event_shape:
            raise ValueError(
                "The right-most size of value must match event_shape: "
                f"{shape} vs {self._event_shape}."
            )
        expected = self._batch_shape + self._event_shape
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    "Value is not broadcastable with batch_shape+event_shape: "
                    f"{shape} vs {expected}."
                )
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{value}"
            )

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return f"{type(self).__name__}({args})"
