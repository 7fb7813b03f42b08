"""VonMises(loc, concentration), as torch.distributions.VonMises: the circular normal."""

from __future__ import annotations

import math

import pyrite as pr

from . import constraints
from .distribution import Distribution
from .utils import lazy_property

__all__ = ["VonMises"]

# polynomial approximations of I0 and I1 (Abramowitz and Stegun 9.8.1-9.8.4, as torch uses):
# x < 3.75 in powers of (x / 3.75)^2, else sqrt(x) exp(-x) I(x) in powers of 3.75 / x
_I0_SMALL = [1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2]
_I0_LARGE = [
    0.39894228,
    0.1328592e-1,
    0.225319e-2,
    -0.157565e-2,
    0.916281e-2,
    -0.2057706e-1,
    0.2635537e-1,
    -0.1647633e-1,
    0.392377e-2,
]
_I1_SMALL = [0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2, 0.32411e-3]
_I1_LARGE = [
    0.39894228,
    -0.3988024e-1,
    -0.362018e-2,
    0.163801e-2,
    -0.1031555e-1,
    0.2282967e-1,
    -0.2895312e-1,
    0.1787654e-1,
    -0.420059e-2,
]

_MAX_ROUNDS = 64  # Best-Fisher accepts at least ~66% of proposals per round at any kappa


def _horner(y, coef):
    result = coef[-1]
    for c in reversed(coef[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel(x, order=0):
    """log I_order(x) for x > 0, order 0 or 1. Each branch is evaluated on x clamped into its
    own range, so the branch not taken stays finite (and so do gradients through `where`)."""
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1, got {order}")
    xs = x.clamp(max=3.75)
    small = _horner((xs / 3.75).pow(2), _I0_SMALL if order == 0 else _I1_SMALL)
    if order == 1:
        small = xs.abs() * small
    small = small.log()
    xl = x.clamp(min=3.75)
    large = xl - 0.5 * xl.log() + _horner(3.75 / xl, _I0_LARGE if order == 0 else _I1_LARGE).log()
    return pr.where(x < 3.75, small, large)


class VonMises(Distribution):
    """The von Mises distribution on the circle: density exp(k cos(x - loc)) / (2 pi I0(k)).
    `loc` and values may be any real numbers, read as angles modulo 2 pi; samples lie in
    [-pi, pi). Sampled by Best and Fisher's (1979) rejection method (no `rsample`, as torch).
    `mean` and `variance` are the circular ones (loc, and 1 - I1(k) / I0(k))."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self._init_params(("loc", "concentration"), (loc, concentration), validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "concentration")
        return self._expand_params(VonMises, names, batch_shape, _instance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return (
            k * pr.cos(value - self.loc) - math.log(2 * math.pi) - _log_modified_bessel(k, order=0)
        )

    @lazy_property
    def _proposal_r(self):
        """r = (1 + rho^2) / (2 rho) of Best and Fisher, with rho = (tau - sqrt(2 tau)) / (2 k),
        tau = 1 + sqrt(1 + 4 k^2), written as rho = 2 k / (tau + sqrt(2 tau)) so that it does
        not cancel in float32 for small k (torch computes it in float64 instead)."""
        k = self.concentration.detach()
        tau = 1 + (1 + 4 * k.pow(2)).sqrt()
        rho = 2 * k / (tau + (2 * tau).sqrt())
        return (1 + rho.pow(2)) / (2 * rho)

    def sample(self, sample_shape=()):
        """Best and Fisher's algorithm: z = cos(pi u1), f = (1 + r z) / (r + z),
        c = k (r - f), accepted when c (2 - c) > u2 or log(c / u2) + 1 >= c; the angle is
        +-acos(f) by the sign of u3 - 1/2. Every element is redrawn until accepted, for at most
        `_MAX_ROUNDS` rounds (then a leftover would keep 0; its chance is below 0.34^64)."""
        shape = tuple(self._extended_shape(sample_shape))
        with pr.no_grad():
            loc = self.loc.detach()
            k = self.concentration.detach().expand(shape)
            r = self._proposal_r.detach().expand(shape)
            x = pr.zeros(shape, dtype=loc.dtype)
            done = pr.zeros(shape, dtype=pr.bool)
            for _ in range(_MAX_ROUNDS):
                u1, u2, u3 = pr.rand((3,) + shape, dtype=loc.dtype).unbind(0)
                z = pr.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = k * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                new = ~done & accept
                x = pr.where(new, (u3 - 0.5).sign() * f.clamp(min=-1, max=1).acos(), x)
                done = done | accept
                if bool(done.all()):
                    break
            return (x + math.pi + loc) % (2 * math.pi) - math.pi

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        k = self.concentration
        return 1 - (_log_modified_bessel(k, order=1) - _log_modified_bessel(k, order=0)).exp()
