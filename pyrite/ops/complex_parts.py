"""Complex64 ops that act on the real and imaginary parts one by one, or are short complex
compositions: the linear maps tril, triu, diag, diag_embed, trace and diff (the real op on
each part: torch's shape rules and errors, the real op's exactness), var/std/var_mean/std_mean
(real results: the mean of |x - mean|² is the real parts' variance plus the imaginary parts',
each the real op's, with the same correction), lerp, addcmul, addcdiv (torch's formulas in
complex arithmetic), equal, block_diag, any/all/logical_not (of z != 0), and the in-place
forms. Every piece is a recorded real op, so
autograd gives torch's conjugate-Wirtinger gradients (ops/complex.py).
"""

from __future__ import annotations

from ..tensor import Tensor
from .complex import _PYCOMPLEX, ComplexError, _pair, as_complex
from .complex_math import _make, _parts


# ---- linear maps, part by part ------------------------------------------------------------------
def _by_parts(orig, z, *args, **kwargs):
    """op(z) = op(Re z) + i op(Im z), for an op linear over the reals in its first argument."""
    if kwargs.get("out") is not None:
        from .complex import unsupported

        raise unsupported(f"{getattr(orig, '__name__', 'op')}(out=...)")
    kwargs.pop("out", None)
    re, im = _parts(as_complex(z))
    return _make(orig(re, *args, **kwargs), orig(im, *args, **kwargs))


def diff(orig, input, n=1, dim=-1, prepend=None, append=None):
    """torch.diff: linear in input, prepend and append together (a real prepend or append has
    zero imaginary parts, as torch promotes it)."""

    def parts(x):
        return (None, None) if x is None else _parts(as_complex(x))

    (re, im), (pr_, pi), (ar, ai) = _parts(as_complex(input)), parts(prepend), parts(append)
    return _make(orig(re, n, dim, prepend=pr_, append=ar), orig(im, n, dim, prepend=pi, append=ai))


# ---- variance ------------------------------------------------------------------------------------
def _reduce():
    from . import reduce

    return reduce  # (its public functions, looked up at call time: the recorded ops)


def var(orig, z, *args, **kwargs):
    """E|z - E z|² with torch's correction: Var(Re z) + Var(Im z), float32."""
    re, im = _parts(z)
    r = _reduce()
    return r.var(re, *args, **kwargs) + r.var(im, *args, **kwargs)


def std(orig, z, *args, **kwargs):
    return var(orig, z, *args, **kwargs).sqrt()


def var_mean(orig, z, *args, **kwargs):
    """(the real variance, the complex mean), as torch.var_mean of a complex tensor."""
    re, im = _parts(z)
    r = _reduce()
    vr, mr = r.var_mean(re, *args, **kwargs)
    vi, mi = r.var_mean(im, *args, **kwargs)
    return vr + vi, _make(mr, mi)


def std_mean(orig, z, *args, **kwargs):
    v, m = var_mean(orig, z, *args, **kwargs)
    return v.sqrt(), m


# ---- elementwise compositions -------------------------------------------------------------------
def _same_dtype(name, *ts):
    ts = [t for t in ts if isinstance(t, Tensor)]
    if any(t.dtype is not ts[0].dtype for t in ts):
        raise ComplexError(
            f"pyrite: {name}: expected {', '.join(t.dtype.name for t in ts)} to be of one dtype "
            "(torch refuses a real tensor beside a complex one here too)"
        )


def lerp(orig, input, end, weight):
    """torch's formula: input + w·(end - input) where |w| < 0.5, else end - (end - input)·(1 - w)
    (so w = 1 gives end exactly)."""
    from .complex_impls import _add, _mul, _sub
    from .complex_linalg import where
    from .complex_math import abs_

    _same_dtype("lerp", input, end, weight)
    d = _sub(end, input)
    if not isinstance(weight, Tensor):
        w = _PYCOMPLEX(weight)
        return _add(input, _mul(d, w)) if abs(w) < 0.5 else _sub(end, _mul(d, 1 - w))
    small = abs_(weight) < 0.5
    return where(None, small, _add(input, _mul(weight, d)), _sub(end, _mul(d, _sub(1, weight))))


def _scaled_by(t, value):
    from .complex_impls import _mul

    return t if isinstance(value, (int, float)) and value == 1 else _mul(value, t)


def addcmul(orig, input, tensor1, tensor2, *, value=1, out=None):
    """input + value·tensor1·tensor2 (torch's order: (value·tensor1)·tensor2)."""
    from .complex_impls import _add, _mul

    return _add(input, _mul(_scaled_by(as_complex(tensor1), value), tensor2))


def addcdiv(orig, input, tensor1, tensor2, *, value=1, out=None):
    """input + value·tensor1/tensor2 (Smith's division, as torch's CPU)."""
    from .complex_impls import _add, _div

    return _add(input, _div(_scaled_by(as_complex(tensor1), value), tensor2))


def equal(orig, input, other):
    """Same shape and every element equal (both parts; NaN unequal), as torch.equal (a real
    operand is compared with zero imaginary parts)."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    return orig(_pair(input), _pair(other))


def block_diag(orig, *tensors):
    """The blocks' real parts and imaginary parts, each the real block_diag (a real block has
    zero imaginary parts: torch promotes it)."""
    parts = [_parts(as_complex(t)) for t in tensors]
    return _make(orig(*(p[0] for p in parts)), orig(*(p[1] for p in parts)))


def _nonzero_reduction(name):
    """any / all: of z != 0 (either part nonzero), as torch's."""

    def impl(orig, z, *args, **kwargs):
        from . import reduce

        return getattr(reduce, name)(_pair(z).ne(0).any(-1), *args, **kwargs)

    return impl


# ---- in place ------------------------------------------------------------------------------------
def _inplace(name, impl, real_fn):
    """self.op_(...): self[...] = op(self, ...) (refused while self requires grad); `real_fn`
    names the out-of-place real op that the parts go through."""
    from .complex_impls import _write

    def op(orig, self, *args, **kwargs):
        return _write(name, self, impl(real_fn(), self, *args, **kwargs))

    return op


def _combine(name):
    def get():
        from . import combine

        return getattr(combine, name)

    return get


def register(IMPLS):
    for name in ("tril", "triu", "diag", "diag_embed", "trace"):
        IMPLS[name] = _by_parts
    for name in ("tril", "triu"):
        IMPLS[name + "_"] = _inplace(name + "_", _by_parts, _combine(name))
    IMPLS["diff"] = diff
    IMPLS["var"] = var
    IMPLS["std"] = std
    IMPLS["var_mean"] = var_mean
    IMPLS["std_mean"] = std_mean
    IMPLS["lerp"] = lerp
    IMPLS["addcmul"] = addcmul
    IMPLS["addcdiv"] = addcdiv
    IMPLS["equal"] = equal
    IMPLS["block_diag"] = block_diag
    IMPLS["any"] = _nonzero_reduction("any")
    IMPLS["all"] = _nonzero_reduction("all")
    IMPLS["logical_not"] = lambda orig, z: _pair(z).eq(0).all(-1)
    for name, fn in (("lerp_", lerp), ("addcmul_", addcmul), ("addcdiv_", addcdiv)):
        IMPLS[name] = _inplace(name, fn, lambda: None)
