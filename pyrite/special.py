"""`pyrite.special`: torch.special's names, over the ops in pyrite/ops/special.py and the existing
elementwise and reduction ops (`pr.special.erfinv is pr.erfinv`, and so on).

zeta, polygamma, erfcx and spherical_bessel_j0 are compositions of elementwise ops
(pyrite/ops/series.py); modified_bessel_i0/i1 are i0/i1.

The Bessel J/Y/K families, airy_ai, gammainc/gammaincc and the orthogonal polynomials
(chebyshev_*, hermite_*, laguerre_*, legendre_*) are pyrite/ops/special_more.py.
"""

from __future__ import annotations

from .ops import elementwise as _ew
from .ops import reduce as _reduce
from .ops import rowops as _rowops
from .ops import series as _series
from .ops import special as _sp
from .ops import special_more as _more

erfinv = _sp.erfinv
erfc = _sp.erfc
logit = _sp.logit
xlogy = _sp.xlogy
sinc = _sp.sinc
i0 = _sp.i0
gammaln = _sp.lgamma
digamma = psi = _sp.digamma
multigammaln = _sp.mvlgamma
expit = _sp.expit
xlog1py = _sp.xlog1py
entr = _sp.entr
i0e = _sp.i0e
i1 = _sp.i1
i1e = _sp.i1e
modified_bessel_i0 = _sp.i0
modified_bessel_i1 = _sp.i1
zeta = _series.zeta
polygamma = _series.polygamma
erfcx = _series.erfcx
spherical_bessel_j0 = _series.spherical_bessel_j0
ndtr = _sp.ndtr
ndtri = _sp.ndtri
log_ndtr = _sp.log_ndtr
globals().update(_more.SPECIAL)

erf = _ew.erf
exp2 = _ew.exp2
expm1 = _ew.expm1
log1p = _ew.log1p
round = _ew.round
logsumexp = _reduce.logsumexp


def softmax(input, dim, *, dtype=None):
    return _rowops.softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    return _rowops.log_softmax(input, dim, dtype)


__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfcx",
    "erfc",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
    *sorted(_more.SPECIAL),
]


def _with_out():
    """torch.special's functions take out= as the top-level ones do (ops/outarg.py); the same
    wrapper objects, so pr.special.erfinv is pr.erfinv."""
    import types

    from .ops.outarg import _takes_out, with_out

    for name, fn in list(globals().items()):
        if isinstance(fn, types.FunctionType) and not name.startswith("_") and _takes_out(fn):
            globals()[name] = with_out(fn, name)


_with_out()
