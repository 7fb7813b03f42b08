"""Poisson(rate), as torch.distributions.Poisson, with a sampler on the device."""

from __future__ import annotations

import pyrite as pr

from .. import autograd
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all

__all__ = ["Poisson", "poisson_sample"]

# rates at and above this use transformed rejection (PTRS), below it the product of uniforms;
# torch's CPU sampler switches at the same rate
_PTRS_MIN_RATE = 10.0
_MAX_ROUNDS = 256


def poisson_sample(rate):
    """Poisson(rate) counts of rate's shape (no gradient), as floats. Below rate 10, Knuth's
    method: the count of uniforms whose running product stays above exp(-rate) (about rate + 1
    rounds). From 10 up, Hormann's PTRS (1993), the rejection method torch uses: a candidate
    from a transformed uniform, accepted in ~90% of rounds. Every element is redrawn until it is
    accepted; both loops stop once all are."""
    with pr.no_grad():
        rate = rate.detach()
        shape = tuple(rate.shape)
        small = rate < _PTRS_MIN_RATE
        out = _knuth(rate, small, shape)
        if bool((~small).any()):
            out = pr.where(small, out, _ptrs(rate.clamp(min=_PTRS_MIN_RATE), small, shape))
        return out


def poisson(input, generator=None):
    """torch.poisson: Poisson(input) counts of input's shape and dtype, by poisson_sample,
    drawing from `generator` if given; their gradient to input is zero (torch's)."""
    from ..ops.random import drawing_from

    if not isinstance(input, pr.Tensor) or not input.dtype.is_floating_point:
        got = input.dtype if isinstance(input, pr.Tensor) else type(input).__name__
        raise TypeError(f"pyrite: poisson() expects a floating-point tensor, got {got}")
    if input.numel() and bool((~(input >= 0)).any()):  # (one readback; NaN fails it too)
        raise RuntimeError("pyrite: invalid Poisson rate, expected rate to be non-negative")
    with drawing_from(generator):
        out = poisson_sample(input).to(input.dtype)
    return autograd.zero_gradient("poisson", input, out)


def _knuth(rate, small, shape):
    limit = pr.exp(-rate)
    count = pr.zeros_like(rate)
    prod = pr.ones_like(rate)
    done = ~small
    for _ in range(_MAX_ROUNDS):
        prod = prod * pr.rand(shape, dtype=rate.dtype)
        alive = ~done & (prod > limit)
        count = count + alive.to(rate.dtype)
        done = ~alive
        if bool(done.all()):
            break
    return count


def _ptrs(lam, done, shape):
    slam = lam.sqrt()
    loglam = lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_invalpha = (1.1239 + 1.1328 / (b - 3.4)).log()
    vr = 0.9277 - 3.6224 / (b - 2)
    out = pr.zeros_like(lam)
    for _ in range(_MAX_ROUNDS):
        u = pr.rand(shape, dtype=lam.dtype) - 0.5
        v = pr.rand(shape, dtype=lam.dtype)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + lam + 0.43).floor()
        quick = (us >= 0.07) & (v <= vr)
        possible = (k >= 0) & ~((us < 0.013) & (v > us))
        log_ratio = v.log() + log_invalpha - (a / (us * us) + b).log()
        bound = -lam + k * loglam - pr.lgamma(k.clamp(min=0) + 1)
        ok = quick | (possible & (log_ratio <= bound))
        out = pr.where(ok & ~done, k, out)
        done = done | ok
        if bool(done.all()):
            break
    return out


class Poisson(Distribution):
    """The Poisson distribution of counts with mean `rate`: P(k) = rate^k e^-rate / k!.
    Samples are floats of the rate's dtype (as torch's); no `rsample`."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self._init_params(("rate",), (rate,), validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, ("rate",), batch_shape, _instance)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return poisson_sample(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return pr.xlogy(value, rate) - rate - pr.lgamma(value + 1)
