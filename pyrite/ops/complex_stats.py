"""Complex64 statistics, quadrature and ranges, each from the real op on the parts (so shape
rules, weights' checks and errors are the real op's, and autograd records real ops: torch's
conjugate-Wirtinger gradient, ops/complex.py):

- cov: the real cov of the stacked parts [Re; Im] (2V variables), folded:
  cov(z)_jk = E[(z_j - μ_j) conj(z_k - μ_k)] = C_rr + C_ii + i(C_ir - C_ri), each block the
  real estimate with the same weights and correction; corrcoef: torch's formula on that.
- trapezoid, cumulative_trapezoid, trapz: bilinear over the reals in (y, x), so at most four
  real quadratures (one per part pair); with dx or no x, the real op on each part of y.
- linspace: the real linspace of each part's ends (torch computes the complex step and each
  element part by part, so the values are the real op's); logspace: base ** that, the complex
  power (ops/complex_math.py).
- nanmean, nansum, cdist: refused, as torch 2.13 refuses them ("nansum on CPU does not support
  complex inputs"; "cdist only supports floating-point dtypes").
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import DtypeError
from ..tensor import Tensor
from .complex import _PYCOMPLEX, C64, ComplexError, _is_c, as_complex
from .complex_math import _make, _parts
from .complex_parts import _by_parts
from .complex_products import bilinear


# ---- cov, corrcoef -----------------------------------------------------------------------------
def cov(orig, input, *, correction=1, fweights=None, aweights=None):
    for name, w, kind in (("fweights", fweights, "integral"), ("aweights", aweights, "floating point")):  # fmt: skip
        if _is_c(w):
            raise ComplexError(
                f"pyrite: cov(): expected {name} to have {kind} dtype but got {name} with "
                "complex64 dtype"
            )
    z = as_complex(input)
    re, im = _parts(z)
    if z.ndim > 2:
        orig(re)  # (the real op's error, naming z's dims)
    if z.ndim < 2:
        re, im = re.reshape(1, -1), im.reshape(1, -1)
    from .combine import cat

    V = re._shape[0]
    C = orig(cat([re, im], 0), correction=correction, fweights=fweights, aweights=aweights)
    rr, ri, ir, ii = C[:V, :V], C[:V, V:], C[V:, :V], C[V:, V:]  # (V, V) each
    c = _make(rr + ii, ir - ri)
    return c.reshape(()) if V == 1 else c  # (one variable: 0-d, as the real op)


def corrcoef(orig, input):
    """torch's: cov / (sd_j sd_k), sd the square roots of cov's (real) diagonal, then each
    part clipped to [-1, 1]."""
    from . import stats

    c = stats.cov(input)
    if c.ndim == 0:
        return c / c
    sd = _parts(c.diagonal())[0].sqrt()
    c = c / sd.reshape(-1, 1) / sd.reshape(1, -1)
    re, im = _parts(c)
    return _make(re.clamp(-1, 1), im.clamp(-1, 1))


# ---- trapezoid ---------------------------------------------------------------------------------
def _trapezoid(name):
    def impl(orig, y, x=None, *, dx=None, dim=-1):
        if isinstance(dx, _PYCOMPLEX) or _is_c(dx):
            raise ComplexError(f"pyrite: {name}: Currently, we only support dx as a real number.")
        if x is None:
            return _by_parts(orig, y, dx=dx, dim=dim)
        if dx is not None:
            return orig(y, x, dx=dx, dim=dim)  # (the real op's refusal of both)
        return bilinear(lambda a, b: orig(a, b, dim=dim), y, x)

    return impl


# ---- linspace, logspace --------------------------------------------------------------------------
def _end(v):
    return _PYCOMPLEX(v.item() if isinstance(v, Tensor) else v)


def _complex_dtype(name, dtype, ends):
    """torch's rule: complex ends infer complex64, which no real dtype may narrow."""
    if dtype is None or D.from_any(dtype) is C64:
        return
    if any(isinstance(e, _PYCOMPLEX) or _is_c(e) for e in ends):
        raise ComplexError(
            f"pyrite: torch.{name}(): inferred dtype complex64 can't be safely cast to passed "
            f"dtype {D.from_any(dtype)}"
        )


def linspace(orig, start, end, steps, *, dtype=None, requires_grad=False, **kw):
    _complex_dtype("linspace", dtype, (start, end))
    s, e = _end(start), _end(end)
    re = orig(s.real, e.real, steps, dtype=D.float32, **kw)
    im = orig(s.imag, e.imag, steps, dtype=D.float32, **kw)
    out = _make(re, im)
    if requires_grad:
        out.requires_grad_()
    return out


def logspace(orig, start, end, steps, base=10.0, *, dtype=None, requires_grad=False, **kw):
    """base ** linspace(start, end, steps) (steps = 1: base ** start), as torch's."""
    from . import range_factories
    from .complex_math import _scalar_base_pow

    _complex_dtype("logspace", dtype, (start, end))
    exponents = linspace(range_factories.linspace, start, end, steps, **kw)
    out = _scalar_base_pow(float(base), exponents)
    if requires_grad:
        out.requires_grad_()
    return out


# ---- what torch refuses too ----------------------------------------------------------------------
def _nan_reduction(name):
    def impl(orig, input, *args, dtype=None, **kwargs):
        if _is_c(input):
            raise ComplexError(
                f"pyrite: {name}: nansum on CPU does not support complex inputs (torch refuses "
                "complex nansum and nanmean too; for NaN-free data use sum or mean)"
            )
        raise DtypeError(f"pyrite: {name}: \"nansum_cpu\" not implemented for 'ComplexFloat'")

    return impl


def cdist(orig, x1, x2, *args, **kwargs):
    which = "X1" if _is_c(x1) else "X2"
    raise ComplexError(
        f"pyrite: cdist only supports floating-point dtypes, {which} got: ComplexFloat (torch "
        "refuses complex cdist too)"
    )


def register(IMPLS):
    IMPLS["cov"] = cov
    IMPLS["corrcoef"] = corrcoef
    for name in ("trapezoid", "trapz", "cumulative_trapezoid"):
        IMPLS[name] = _trapezoid(name)
    IMPLS["linspace"] = linspace
    IMPLS["logspace"] = logspace
    for name in ("nanmean", "nansum"):
        IMPLS[name] = _nan_reduction(name)
    IMPLS["cdist"] = cdist
