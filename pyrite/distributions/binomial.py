"""Binomial(total_count, probs or logits), as torch.distributions.Binomial, with a sampler on
the device."""

from __future__ import annotations

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .utils import BinaryParams, broadcast_all

__all__ = ["Binomial", "binomial_sample"]

# n * min(p, 1 - p) at and above this uses BTRS, below it inversion (torch's CPU switch)
_BTRS_MIN_MEAN = 10.0
_MAX_ROUNDS = 256
# Stirling's series remainder log k! - [(k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2] for
# k = 0..9 (from Hormann's BTRS paper, as torch's sampler); the series below is used beyond
_STIRLING_TAIL = (
    0.08106146679532726,
    0.04134069595540929,
    0.02767792568499834,
    0.02079067210376509,
    0.01664469118982119,
    0.01387612882307075,
    0.01189670994589177,
    0.01041126526197209,
    0.009255462182712733,
    0.008330563433362871,
)


def binomial_sample(count, prob):
    """Binomial(count, prob) draws of the broadcast shape (no gradient), as floats. With
    q = min(p, 1 - p) (a draw for 1 - p is count minus one for p): below a mean count * q of
    10, inversion by geometric waiting times (about count * q + 1 rounds); from 10 up,
    Hormann's BTRS (1993) transformed rejection, as torch's sampler. Every element is redrawn
    until accepted; each loop stops once all are."""
    with pr.no_grad():
        count, prob = (t.detach() for t in broadcast_all(count, prob))
        shape = tuple(count.shape)
        flip = prob > 0.5
        q = pr.where(flip, 1 - prob, prob)
        small = count * q < _BTRS_MIN_MEAN
        trivial = (q <= 0) | (count <= 0)
        out = _inversion(count, q.clamp(min=1e-30), ~small | trivial, shape)
        if bool((~small).any()):
            big = _btrs(count.clamp(min=1.0), q.clamp(min=1e-6), small | trivial, shape)
            out = pr.where(small, out, big)
        out = pr.where(trivial, pr.zeros_like(out), out)
        return pr.where(flip, count - out, out)


def binomial(count, prob, generator=None):
    """torch.binomial: Binomial(count, prob) draws of the broadcast shape as count's dtype (no
    gradient), by binomial_sample, drawing from `generator` if given."""
    from ..ops.random import drawing_from

    for t in (count, prob):
        if not isinstance(t, pr.Tensor) or not t.dtype.is_floating_point:
            got = t.dtype if isinstance(t, pr.Tensor) else type(t).__name__
            raise TypeError(f"pyrite: binomial() expects floating-point tensors, got {got}")
    with drawing_from(generator):
        return binomial_sample(count, prob).to(count.dtype)


def _inversion(count, q, done, shape):
    log1mq = (-q).log1p()
    total = pr.zeros_like(count)
    out = pr.zeros_like(count)
    for _ in range(_MAX_ROUNDS):
        u = pr.rand(shape, dtype=count.dtype).clamp(min=pr.finfo(count.dtype).tiny)
        total = total + (u.log() / log1mq).ceil()
        alive = ~done & (total <= count)
        out = out + alive.to(count.dtype)
        done = ~alive
        if bool(done.all()):
            break
    return out


def _stirling_tail(k):
    kp1sq = (k + 1).pow(2)
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    table = pr.tensor(_STIRLING_TAIL, dtype=k.dtype)
    small = table[k.clamp(min=0, max=9).long().reshape(-1)].reshape(tuple(k.shape))
    return pr.where(k <= 9, small, series)


def _btrs(n, p, done, shape):
    stddev = (n * p * (1 - p)).sqrt()
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    r = p / (1 - p)
    alpha = (2.83 + 5.1 / b) * stddev
    m = ((n + 1) * p).floor()
    fixed = (
        (m + 0.5) * ((m + 1) / (r * (n - m + 1))).log() + _stirling_tail(m) + _stirling_tail(n - m)
    )
    out = pr.zeros_like(n)
    for _ in range(_MAX_ROUNDS):
        u = pr.rand(shape, dtype=n.dtype) - 0.5
        v = pr.rand(shape, dtype=n.dtype)
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + c).floor()
        inside = (k >= 0) & (k <= n)
        quick = (us >= 0.07) & (v <= v_r)
        kc = k.clamp(min=0).minimum(n)
        log_v = (v * alpha / (a / (us * us) + b)).log()
        bound = (
            fixed
            + (n + 1) * ((n - m + 1) / (n - kc + 1)).log()
            + (kc + 0.5) * (r * (n - kc + 1) / (kc + 1)).log()
            - _stirling_tail(kc)
            - _stirling_tail(n - kc)
        )
        ok = inside & (quick | (log_v <= bound))
        out = pr.where(ok & ~done, k, out)
        done = done | ok
        if bool(done.all()):
            break
    return out


def _clamp_by_zero(x):
    # x.clamp(min=0) with gradient 1/2 at 0, as torch's binomial
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(BinaryParams, Distribution):
    """The number of successes in `total_count` Bernoulli(`probs`) trials (or
    sigmoid(`logits`)); total_count broadcasts with the probabilities. Samples are floats."""

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        batch_shape, (count,) = self._set_param(probs, logits, total_count)
        self.total_count = count.to(self._param.dtype)
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = pr.Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        self._expand_param(new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().minimum(self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return binomial_sample(self.total_count.expand(shape), self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, k, logits = self.total_count, value, self.logits
        log_factorial_n = pr.lgamma(n + 1)
        log_factorial_k = pr.lgamma(k + 1)
        log_factorial_nmk = pr.lgamma(n - k + 1)
        # n log(1 + e^logits), written so neither exp overflows
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return k * logits - log_factorial_k - log_factorial_nmk - normalize

    def entropy(self):
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        total_count = int(self.total_count.max().item())
        if not bool((self.total_count == total_count).all()):
            raise NotImplementedError(
                "Inhomogeneous total count not supported by `enumerate_support`."
            )
        values = pr.arange(1 + total_count, dtype=self._param.dtype)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values
