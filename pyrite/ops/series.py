"""Special functions composed from elementwise ops (so autograd differentiates them as they
stand): the Hurwitz zeta function, polygamma, erfcx and spherical_bessel_j0.

zeta(x, q) follows Cephes' zeta.c (the algorithm PyTorch's CPU kernel uses): the first N terms
of sum (q + k)^-x directly, then the Euler-Maclaurin tail at a = q + N with 12 Bernoulli
terms. Cephes stops as soon as a term falls below machine epsilon; here every element takes the
same fixed count (N = 9 for q >= 0), whose extra terms are negligible against the sum, so
results agree with torch's f32 kernel to a few ULP. A negative q needs a >= 9 as Cephes': N grows
to 9 + ceil(-min q), read back once.
"""

from __future__ import annotations

import math

from .. import dtypes as D
from .elementwise import as_tensor_arg

# Cephes zeta.c: (2k)! / B_2k, the Euler-Maclaurin coefficients
_EM = (
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
    1.8152105401943546773e17, -7.1661652561756670113e18,
)  # fmt: skip


def _float(t):
    t = as_tensor_arg(t)
    return t if t.dtype.kind == "f" else t.to(D.float32)


def zeta(input, other, *, out=None):
    """The Hurwitz zeta function sum_{k>=0} (other + k)^-input (torch.special.zeta): inf at
    input == 1 and at non-positive integer `other`, nan for input < 1 and for negative
    non-integer `other` with non-integer input."""
    from .elementwise import _is_scalar, where

    if _is_scalar(input) and _is_scalar(other):
        raise TypeError("pyrite: zeta: at least one of input and other must be a tensor")
    x = _float(input) if not _is_scalar(input) else float(input)
    q = _float(other) if not _is_scalar(other) else float(other)
    from .creation import full_like

    # a scalar operand as a constant tensor (not q·0 + x: pow's exponent gradient log(q) is NaN
    # for q < 0, and 0·NaN would reach q's gradient)
    if not hasattr(x, "dtype"):
        x = full_like(q.detach(), x)
    if not hasattr(q, "dtype"):
        q = full_like(x.detach(), q)
    x, q = x.broadcast_to(_bshape(x, q)), q.broadcast_to(_bshape(x, q))
    n_terms = 9
    if q.numel():
        qmin = float(q.min().item())  # one readback: the direct sum must reach a >= 9
        if qmin < 0 and math.isfinite(qmin):
            n_terms = 9 + math.ceil(-qmin)
    s = q.pow(-x)
    a = q
    b = None
    for _ in range(n_terms):
        a = a + 1.0
        b = a.pow(-x)
        s = s + b
    w = a
    s = s + b * w / (x - 1.0) - 0.5 * b
    # the Euler-Maclaurin terms t_i = b·x(x+1)...(x+2i)/w^(2i+1) / EM[i], built as one running
    # product c (b·prod/w^j stays in range where the separate factors overflow f32)
    c = b / w * x
    k = x
    for i, coef in enumerate(_EM):
        s = s + c / coef
        if i + 1 < len(_EM):
            c = c * (k + 1.0) / w * (k + 2.0) / w
            k = k + 2.0
    inf, nan = float("inf"), float("nan")
    q_int = q == q.floor()
    x_int = x == x.floor()
    s = where((q <= 0) & q_int, inf, s)
    s = where((q < 0) & ~q_int & ~x_int, nan, s)
    s = where(x < 1.0, nan, s)
    s = where(x == 1.0, inf, s)
    s = where(x.isnan() | q.isnan(), nan, s)
    if out is not None:
        return out.copy_(s)
    return s


def _bshape(a, b):
    from .core import broadcast_shapes

    return tuple(broadcast_shapes(tuple(a._shape), tuple(b._shape)))


def polygamma(n, input, *, out=None):
    """The n-th derivative of digamma: digamma for n = 0, the trigamma kernel for n = 1, else
    (-1)^(n+1)·n!·zeta(n+1, input)."""
    from .special import digamma

    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"pyrite: polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("pyrite: polygamma(n, x) does not support negative n.")
    x = _float(input)
    if n == 0:
        r = digamma(x)
    elif n == 1:  # (the trigamma kernel, as torch: 1/x at large x, 0 at inf, NaN at -inf)
        from .elementwise_grads import _trigamma

        r = _trigamma(x)
    else:
        r = zeta(float(n + 1), x) * ((-1.0) ** (n + 1) * math.factorial(n))
    if out is not None:
        return out.copy_(r)
    return r


def erfcx(input, *, out=None):
    """The scaled complementary error function exp(x²)·erfc(x): that product below x = 5
    (x² split into an exactly squared head and a small tail, so exp's argument carries no
    rounding of x²), the asymptotic series 1/(x√π)·sum (-1)^k (2k-1)!!/(2x²)^k above, 12 terms
    (the 12th is 1.3e-9 of the sum at x = 5)."""
    from .elementwise import where
    from .special import erfc

    x = _float(input)
    # each branch sees only its own range (an unused inf would make NaN of where's gradient)
    # (below -10, exp(x²) is past float32 anyway: clamped so the split cannot overflow)
    small_x = where(x < 5.0, x, 0.0).clamp_min(-10.0)
    # Dekker's split: hi holds 12 significant bits of x, so hi·hi is exact whatever x's scale
    # (round(x·4096)/4096 kept 16 bits at x = -9.2: x²'s rounding, 5e-6 of exp's argument,
    # put erfcx(-9.2) 3.4e-6 relative off; each step is its own kernel, so no compiler
    # folds c - (c - x) into x)
    c = small_x * 4097.0
    hi = c - (c - small_x)
    lo = small_x - hi
    small = (hi * hi).exp() * (lo * (2.0 * hi + lo)).exp() * erfc(small_x)
    big_x = where(x >= 5.0, x, 5.0)  # (the series' branch, kept finite where unused)
    z = 1.0 / (2.0 * big_x * big_x)
    acc = 1.0
    for k in range(12, 0, -1):  # Horner: 1 - z(1 - 3z(1 - 5z(...)))
        acc = 1.0 - (2 * k - 1) * z * acc
    big = acc / (big_x * math.sqrt(math.pi))
    r = where(x >= 5.0, big, small)
    r = where(x == float("inf"), 0.0, r)
    r = where(x == float("-inf"), float("inf"), r)
    r = where(x.isnan(), float("nan"), r)
    if out is not None:
        return out.copy_(r)
    return r


def spherical_bessel_j0(input, *, out=None):
    """sin(x)/x: 1 at 0, its Taylor series below |x| = 0.5 (as PyTorch's), 0 at ±inf."""
    from .elementwise import where

    x = _float(input)
    x2 = x * x
    series = 1.0 - x2 / 6.0 * (1.0 - x2 / 20.0 * (1.0 - x2 / 42.0 * (1.0 - x2 / 72.0)))
    safe = where(x.abs() < 0.5, 1.0, x)
    r = where(x.abs() < 0.5, series, safe.sin() / safe)
    r = where(x.isinf(), 0.0, r)
    if out is not None:
        return out.copy_(r)
    return r


def _polygamma_method(self, n):
    return polygamma(n, self)


def _polygamma_(self, n):
    return self.copy_(polygamma(n, self))


FUNCS = {"polygamma": polygamma}
# torch.special's names (pyrite/special.py gathers them)
SPECIAL_ONLY = {
    "zeta": zeta,
    "polygamma": polygamma,
    "erfcx": erfcx,
    "spherical_bessel_j0": spherical_bessel_j0,
}
__all__ = sorted(FUNCS)
METHODS = {"polygamma": _polygamma_method, "polygamma_": _polygamma_}
