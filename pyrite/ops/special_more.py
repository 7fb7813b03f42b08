"""torch.special's Bessel J0/J1/Y0/Y1 and K0/K1 (with the exp-scaled K), airy_ai, gammainc /
gammaincc (torch.igamma / igammac and their Tensor methods), and the orthogonal polynomials
(Chebyshev T/U/V/W and their shifted forms, Hermite H/He, Laguerre L, Legendre P).

Each is one elementwise map over a WGSL helper in kernels/special_more.py, computing in f32;
integer and bool inputs give float32 (torch's float ops). The polynomials take n as a tensor or
a number and follow torch's recurrences and special cases (n < 0 or nan: 0; fractional n is
truncated; Chebyshev at |x| < 1 and n > 6 (T) or 8 (U, V, W) by the trigonometric closed form).

Gradients, as torch's: gammainc / gammaincc have one with respect to x (the second argument) and
raise at backward for a (torch: "the derivative for 'igamma: input' is not implemented"); the
Bessel, Airy and polynomial functions have none — their outputs never require grad (torch gives
them no grad_fn either).

Loops: the polynomial recurrences take n - 1 steps and the incomplete gamma's series or
continued fraction O(sqrt(a)) steps near x = a. On a device with a loop budget (lavapipe: 65,535
iterations an invocation, backend/quirks.py) each element may take at most
max_loop_iterations() / 16 steps (about 3,800 there); an element that needs more gives nan, and
a Python-number n beyond it raises. Elsewhere the bound is 2^20 steps for the polynomials and
2^16 for the incomplete gamma (its series converges within ~6·sqrt(a) steps: a up to ~1e8).

Accuracy, measured on lavapipe against torch float64 of the same f32 inputs (mpmath for airy_ai:
torch's own float64 Ai is 1.7e-5 off near x = -2.09; and for J0, J1, Y0, Y1 on 4 <= |x| <= 8.5,
where torch's float64 is up to 9 of these units off), in units of eps·(|f| + |x·f'(x)|) with
eps = 2^-24 (an argument's own rounding inside a kernel moves f by x·f'·eps; near a zero of J, Y
or Ai it is an absolute bound), max over 3 seeds of tests/test_special_more.py's draws (J0 to
Y1: 8 seeds; a dense grid of 270,000 points on [0, 60] gives 3.8, 4.4, 4.1, 4.5):
J0 3.4, J1 3.5, Y0 3.7, Y1 3.7, K0 2.6,
K1 2.0, scaled K0 6.1, scaled K1 3.4, Ai 2.7; gammainc 15.2 and gammaincc 19.9 (with both
arguments' conditioning); the polynomials (n <= 40, units times n + 1 and the polynomial's size
near x, for the n roundings of a recurrence) Chebyshev T/U/V/W <= 3.6, shifted <= 10.7, Laguerre
3.9, Legendre 0.4, Hermite 0.2. The tests hold each to MAX_COND_ULP.
"""

from __future__ import annotations

import math

from .. import autograd
from ..errors import DtypeError
from ..tensor import Tensor
from .core import UNBOUNDED, max_loop_iterations
from .elementwise import BINARY, UNARY, as_tensor_arg, binary, unary
from .elementwise_grads import BINARY_RULES

UNARY.update(
    {
        "bessel_j0": ("p_bessel_j0(A)", None, "float"),
        "bessel_j1": ("p_bessel_j1(A)", None, "float"),
        "bessel_y0": ("p_bessel_y0(A)", None, "float"),
        "bessel_y1": ("p_bessel_y1(A)", None, "float"),
        "modified_bessel_k0": ("p_bessel_k0(A)", None, "float"),
        "modified_bessel_k1": ("p_bessel_k1(A)", None, "float"),
        "scaled_modified_bessel_k0": ("p_bessel_k0e(A)", None, "float"),
        "scaled_modified_bessel_k1": ("p_bessel_k1e(A)", None, "float"),
        "airy_ai": ("p_airy_ai(A)", None, "float"),
    }
)

# name: its WGSL helper p_<helper>(x, n, cap)
_POLYS = {
    "chebyshev_polynomial_t": "cheb_t",
    "chebyshev_polynomial_u": "cheb_u",
    "chebyshev_polynomial_v": "cheb_v",
    "chebyshev_polynomial_w": "cheb_w",
    "shifted_chebyshev_polynomial_t": "scheb_t",
    "shifted_chebyshev_polynomial_u": "scheb_u",
    "shifted_chebyshev_polynomial_v": "scheb_v",
    "shifted_chebyshev_polynomial_w": "scheb_w",
    "hermite_polynomial_h": "hermite_h",
    "hermite_polynomial_he": "hermite_he",
    "laguerre_polynomial_l": "laguerre_l",
    "legendre_polynomial_p": "legendre_p",
}
POLY_CAP = 1 << 20  # steps an element, where the device has no loop budget
IGAMMA_CAP = 1 << 16


def _cap(unbounded_cap: int) -> int:
    """Steps one element may loop: the device's budget over the map's elements an invocation
    (up to 8 on a CPU adapter) with room to spare, or `unbounded_cap`."""
    limit = max_loop_iterations()
    if limit >= UNBOUNDED:
        return unbounded_cap
    return max(1, limit // 16)


def _binary_op(name: str, expr: str, cap: int) -> str:
    """The BINARY entry for `name` at this loop cap (the cap is part of the WGSL text)."""
    key = f"{name}@{cap}"
    if key not in BINARY:
        BINARY[key] = (expr.format(cap=cap), None, None, "float")
    return key


def _no_grad_args(*xs):
    """torch gives these functions no gradient: their outputs never require grad."""
    return tuple(x.detach() if isinstance(x, Tensor) else x for x in xs)


def _unary_fn(name, doc):
    def fn(input, *, out=None):
        (x,) = _no_grad_args(input)
        with autograd.no_grad():
            return unary(name, x, out=out)

    fn.__name__ = name
    fn.__doc__ = doc
    fn._pyrite_plain = True  # (autograd.plain: no guard; the map handles every dtype itself)
    return fn


bessel_j0 = _unary_fn("bessel_j0", "Bessel function of the first kind, order 0.")
bessel_j1 = _unary_fn("bessel_j1", "Bessel function of the first kind, order 1.")
bessel_y0 = _unary_fn("bessel_y0", "Bessel function of the second kind, order 0 (nan below 0).")
bessel_y1 = _unary_fn("bessel_y1", "Bessel function of the second kind, order 1 (nan below 0).")
modified_bessel_k0 = _unary_fn(
    "modified_bessel_k0", "Modified Bessel function of the second kind, order 0."
)
modified_bessel_k1 = _unary_fn(
    "modified_bessel_k1", "Modified Bessel function of the second kind, order 1."
)
scaled_modified_bessel_k0 = _unary_fn("scaled_modified_bessel_k0", "exp(x)·K0(x).")
scaled_modified_bessel_k1 = _unary_fn("scaled_modified_bessel_k1", "exp(x)·K1(x).")
airy_ai = _unary_fn("airy_ai", "The Airy function Ai.")


def _poly_fn(name, helper):
    def fn(input, n, *, out=None):
        cap = _cap(POLY_CAP)
        if isinstance(n, (int, float)) and not isinstance(n, bool) and n - 1 > cap:
            raise ValueError(
                f"pyrite: {name}: n = {n} needs {int(n) - 1} recurrence steps, more than this "
                f"device's loop budget allows an element ({cap}); split the work or use n <= "
                f"{cap + 1}"
            )
        x, nn = _no_grad_args(input, n)
        key = _binary_op(name, f"p_{helper}(A, B, {{cap}})", cap)
        with autograd.no_grad():
            return binary(key, x, nn, out)

    fn.__name__ = name
    fn.__doc__ = (
        f"torch.special.{name}(input, n): the polynomial of degree n at input (n a tensor or a "
        "number; n < 0 gives 0, a fractional n is truncated)."
    )
    fn._pyrite_plain = True
    return fn


for _name, _helper in _POLYS.items():
    globals()[_name] = _poly_fn(_name, _helper)


def _check_igamma(name, input, other):
    a = input if isinstance(input, Tensor) else None
    b = other if isinstance(other, Tensor) else None
    kinds = {t.dtype.kind for t in (a, b) if t is not None}
    if kinds and "f" not in kinds:  # torch: "igamma_cpu" not implemented for 'Long'
        dt = (a if a is not None else b).dtype
        raise DtypeError(f"pyrite: {name} is not implemented for {dt!r}; pass floating tensors")


def _igamma_key(name):
    cap = _cap(IGAMMA_CAP)
    part = "x" if name == "igamma" else "y"
    key = f"{name}@{cap}"
    if key not in BINARY:
        BINARY[key] = (f"p_igamma_pq(A, B, {cap}).{part}", None, None, "float")
        BINARY_RULES[key] = _IGAMMA_RULES[name]
    return key


def igamma(input, other, *, out=None):
    """The regularized lower incomplete gamma function P(input, other) (torch.special.gammainc):
    nan where either argument is negative or nan, 1 at a = 0 < x, 0 at x = 0 < a."""
    _check_igamma("igamma", input, other)
    return binary(_igamma_key("igamma"), input, other, out)


def igammac(input, other, *, out=None):
    """The regularized upper incomplete gamma function Q(input, other) = 1 - P
    (torch.special.gammaincc), computed without that cancellation."""
    _check_igamma("igammac", input, other)
    return binary(_igamma_key("igammac"), input, other, out)


def _igamma_grad(sign, fname):
    @autograd.saves(0, 1)
    def rule(ctx, g):
        """d/dx P(a, x) = x^(a-1)·e^-x / Gamma(a) (Q: its negative); none for a (torch)."""
        from .special import lgamma

        a, x = ctx.args
        if ctx.needs[0]:
            raise NotImplementedError(
                f"pyrite: the derivative for '{fname}: input' is not implemented (torch has "
                "none either: only the second argument, x, gets a gradient); detach() the first"
            )
        lg = math.lgamma(a) if not isinstance(a, Tensor) else lgamma(a)
        x = as_tensor_arg(x)
        dx = ((a - 1.0) * x.log() - x - lg).exp()
        return None, (g * dx if sign > 0 else -(g * dx))

    return rule


_IGAMMA_RULES = {"igamma": _igamma_grad(1, "igamma"), "igammac": _igamma_grad(-1, "igammac")}
for _n in _IGAMMA_RULES:
    BINARY_RULES[_n] = _IGAMMA_RULES[_n]


def igamma_(self, other):
    """In place: self = P(self, other)."""
    return _inplace_igamma("igamma", self, other)


def igammac_(self, other):
    """In place: self = Q(self, other)."""
    return _inplace_igamma("igammac", self, other)


def _inplace_igamma(name, self, other):
    from .elementwise import _inplace

    _check_igamma(name, self, other)
    if not self.dtype.is_floating_point:
        raise DtypeError(
            f"pyrite: result type Float can't be cast to the desired output type {self.dtype!r}"
        )
    return _inplace(_igamma_key(name), self, other)


SPECIAL = {
    "bessel_j0": bessel_j0,
    "bessel_j1": bessel_j1,
    "bessel_y0": bessel_y0,
    "bessel_y1": bessel_y1,
    "modified_bessel_k0": modified_bessel_k0,
    "modified_bessel_k1": modified_bessel_k1,
    "scaled_modified_bessel_k0": scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": scaled_modified_bessel_k1,
    "airy_ai": airy_ai,
    "gammainc": igamma,
    "gammaincc": igammac,
    **{name: globals()[name] for name in _POLYS},
}

__all__ = ["igamma", "igammac"]
METHODS = {"igamma": igamma, "igammac": igammac, "igamma_": igamma_, "igammac_": igammac_}
