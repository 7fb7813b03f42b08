"""Special functions: erfinv, erfc, logit, xlogy/xlog1py, sinc, entr, Bessel i0/i0e/i1/i1e,
ndtr/ndtri/log_ndtr, lgamma, digamma, mvlgamma — the top-level and Tensor forms, which
`pyrite.special` (pyrite/special.py) gathers under torch.special's names.

All compute in f32 through WGSL helpers in kernels/mathlib.py (each with its measured accuracy);
integer and bool inputs give float32, as PyTorch's.

Accuracy, measured on lavapipe against torch float64 of the same f32 inputs (tests/test_special.py
repeats each measurement as a test):
- erfinv: max 1.17 ULP (lavapipe) and 1.65 ULP (H200, fused multiply-adds and its own exp/log)
  over 6M points of (-1, 1) (uniform, 1 - 2^-U(1,24), 2^-U(0,120)).
  Giles' approximation alone (no Newton step) is 3.7 ULP; the Newton step was 2.2 ULP with the
  old erfc (WGSL exp: 42 ULP at erfc(4)); ERFINV_MAX_ULP is the bound the test holds it to.
- erfc: <= 2.9 ULP on [0.84, 9.5] (the tail, relative), erf-exact elsewhere.
- erfcinv (ndtri's core): <= 1.7 ULP on q in [1e-45, 2] against mpmath (120 digits); ndtri
  <= 2.4 ULP against torch float64.
"""

from __future__ import annotations

import math

from .elementwise import BINARY, UNARY, as_tensor_arg, binary, unary, where
from .mathops import inplace_of

ERFINV_MAX_ULP = 2.0  # measured 1.17 / 1.65 (see above); the test's bound

# A is zero as the arithmetic sees it (a GPU that flushes subnormals computes on a subnormal A as
# 0, so xlogy(1e-40, 1e-40) is 0 there, not 0 · -inf); NaN excluded by its bits first, since
# lavapipe folds NaN == 0.0 to true
_ZERO_A = "(!p_isnan(A) && A == 0.0)"

UNARY.update(
    {
        "erfinv": ("p_erfinv(A)", None, "float"),
        "erfc": ("p_erfc(A)", None, "float"),
        # logit(z) = log(z / (1 - z)); near 1/2 as log1p((2z - 1) / (1 - z)) (2z - 1 is exact
        # there), so logit(0.5 + d) keeps its relative accuracy
        "logit": (
            "select(select(p_logf(A / (1.0 - A)), p_log1p((2.0 * A - 1.0) / (1.0 - A)), "
            "abs(A - 0.5) < 0.25), p_nan(), A < 0.0 || A > 1.0 || p_isnan(A))",
            None,
            "float",
        ),
        "sinc": (
            "select(p_sinpi(A) / (3.14159265358979 * A), 1.0, " + _ZERO_A + ")",
            None,
            "float",
        ),
        "entr": (
            "select(select(select(-A * p_logf(A), 0.0, " + _ZERO_A + "), -p_inf(), A < 0.0), A, "
            "p_isnan(A))",
            None,
            "float",
        ),
        "i0": ("p_i0(A)", None, "float"),
        "i0e": ("p_i0e(A)", None, "float"),
        "i1": ("p_i1(A)", None, "float"),
        "i1e": ("p_i1e(A)", None, "float"),
        "ndtr": ("0.5 * p_erfc(A * -0.70710678118654752)", None, "float"),
        # -sqrt(2)·erfcinv(2p); +0 at p = 1/2 (the product would be -0)
        "ndtri": ("select(-1.4142135623730951 * p_erfcinv(2.0 * A), 0.0, A == 0.5)", None, "float"),
        "log_ndtr": ("p_log_ndtr(A)", None, "float"),
        "lgamma": ("p_lgamma(A)", None, "float"),
        "digamma": ("p_digamma(A)", None, "float"),
        "trigamma": ("p_trigamma(A)", None, "float"),  # digamma's derivative (its rule)
    }
)

BINARY.update(
    {
        # PyTorch: 0 where x == 0 unless y is NaN
        "xlogy": (f"select(A * p_logf(B), 0.0, {_ZERO_A} && !p_isnan(B))", None, None, "float"),
        "xlog1py": (f"select(A * p_log1p(B), 0.0, {_ZERO_A} && !p_isnan(B))", None, None, "float"),
    }
)


# this module's own factory, not elementwise's: ops/fallback.py wraps the functions whose
# __module__ is this (non-native) module, so that other dtypes are widened for them
def _make_unary(name, doc):
    def fn(input, *, out=None):
        return unary(name, input, out=out)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


erfinv = _make_unary("erfinv", "Inverse error function: ±inf at ±1, nan outside [-1, 1].")
erfc = _make_unary("erfc", "Complementary error function 1 - erf(x), accurate in the tail.")
sinc = _make_unary("sinc", "Normalised sinc: sin(pi x) / (pi x), 1 at 0.")
entr = _make_unary("entr", "-x·log(x) (0 at 0, -inf below 0).")
i0 = _make_unary("i0", "Modified Bessel function of the first kind, order 0.")
i0e = _make_unary("i0e", "exp(-|x|)·i0(x).")
i1 = _make_unary("i1", "Modified Bessel function of the first kind, order 1.")
i1e = _make_unary("i1e", "exp(-|x|)·i1(x).")
ndtr = _make_unary("ndtr", "The standard normal CDF.")
ndtri = _make_unary("ndtri", "The inverse of ndtr (the standard normal quantile).")
log_ndtr = _make_unary("log_ndtr", "log(ndtr(x)), accurate far into the lower tail.")
lgamma = _make_unary("lgamma", "log|Gamma(x)| (inf at 0 and the negative integers).")
digamma = _make_unary("digamma", "psi(x) = d/dx lgamma(x).")


def logit(input, eps=None, *, out=None):
    """log(p / (1 - p)); with eps, p is first clamped to [eps, 1 - eps] (eps < 0: no clamp)."""
    x = as_tensor_arg(input)
    if eps is not None and eps >= 0:
        if x.dtype.kind != "f":
            x = x.float()
        # torch's x < lo ? lo : (x > hi ? hi : x): with eps > 1/2 (lo > hi) every value
        # below lo becomes lo, not hi as min(max(x, lo), hi) would make it
        lo, hi = float(eps), 1.0 - float(eps)
        x = where(x < lo, lo, where(x > hi, hi, x))
    return unary("logit", x, out=out)


def expit(input, *, out=None):
    """The logistic sigmoid, as torch.special.expit."""
    return unary("sigmoid", input, out=out)


def xlogy(input, other, *, out=None):
    """input · log(other), 0 where input == 0 (unless other is NaN)."""
    return binary("xlogy", input, other, out)


def xlog1py(input, other, *, out=None):
    """input · log1p(other), 0 where input == 0 (unless other is NaN)."""
    return binary("xlog1py", input, other, out)


def mvlgamma(input, p):
    """The multivariate log-gamma of dimension p: sum_i lgamma(x - i/2) + p(p-1)/4·log(pi)."""
    x = as_tensor_arg(input)
    p = int(p)
    if p < 1:
        raise RuntimeError(f"pyrite: mvlgamma: p has to be greater than or equal to 1 (got {p})")
    if x.dtype.kind != "f":
        raise TypeError(f"pyrite: mvlgamma is not implemented for {x.dtype!r}")
    acc = lgamma(x)
    for i in range(1, p):
        acc = acc + lgamma(x - 0.5 * i)
    return acc + p * (p - 1) / 4 * math.log(math.pi)


FUNCS = {
    "erfinv": erfinv,
    "erfc": erfc,
    "logit": logit,
    "xlogy": xlogy,
    "sinc": sinc,
    "i0": i0,
    "lgamma": lgamma,
    "digamma": digamma,
    "mvlgamma": mvlgamma,
}
# torch.special's own names (pyrite/special.py), besides FUNCS and the existing ops
SPECIAL_ONLY = {
    "expit": expit,
    "xlog1py": xlog1py,
    "entr": entr,
    "i0e": i0e,
    "i1": i1,
    "i1e": i1e,
    "ndtr": ndtr,
    "ndtri": ndtri,
    "log_ndtr": log_ndtr,
    "psi": digamma,
    "gammaln": lgamma,
    "multigammaln": mvlgamma,
}

__all__ = sorted(FUNCS)

METHODS = dict(FUNCS)
METHODS.update(
    {f"{n}_": inplace_of(FUNCS[n], n) for n in ("erfinv", "erfc", "logit", "xlogy", "sinc", "i0")}
)
METHODS.update({f"{n}_": inplace_of(FUNCS[n], n) for n in ("lgamma", "digamma", "mvlgamma")})
