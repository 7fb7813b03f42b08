"""Reductions, scans, products, comparisons and norms of complex64 tensors, as compositions of
recorded real ops on the real views (ops/complex.py), so their gradients are torch's.

Errors: a product of n complex numbers is formed pairwise (a tree of depth ceil(log2 n)), each
level one complex multiply (~2 ulp of the magnitudes multiplied), so within ~2·log2(n) ulp of
the product of the magnitudes; torch multiplies in order (n - 1 levels). Sums and scans are the
real ops' on each part. Norms are the real norms of |z| (|z| scaled: complex_math.abs_).
"""

from __future__ import annotations

import numbers

from .. import dtypes as D
from ..tensor import Tensor
from .complex import _C, _R, C64, ComplexError, _is_c, as_complex, unsupported
from .complex_math import _make, _parts, abs_, isnan


def _dims_of(z, dim):
    if dim is None:
        return list(range(z.ndim))
    if isinstance(dim, (list, tuple)):
        return sorted({z._dim(d) for d in dim}) if dim else list(range(z.ndim))
    return [z._dim(dim)]


def _check_dtype(name, dtype):
    if dtype is not None and D.from_any(dtype) is not C64:
        raise ComplexError(
            f"pyrite: {name}(): a complex input with dtype={dtype!r} (torch refuses the "
            "implicit cast of complex to real too)"
        )


# ---- products ------------------------------------------------------------------------------------
def _tree_prod(z):
    """The product along z's last dim, pairwise: (..., n) -> (...)."""
    from .combine import cat
    from .complex_impls import _mul
    from .creation import ones

    n = z._shape[-1]
    if n == 0:
        return _C(_R(ones(z._shape[:-1], dtype=C64)))
    while n > 1:
        if n % 2:
            pad = ones((*z._shape[:-1], 1), dtype=C64)
            z = _C(cat([_R(z), _R(pad)], -2))
            n += 1
        z = _mul(z[..., 0::2], z[..., 1::2])
        n //= 2
    return z[..., 0]


def prod(orig, z, dim=None, keepdim=False, *, dtype=None, out=None):
    """torch.prod of a complex tensor (all elements, or one dim)."""
    if out is not None:
        raise unsupported("prod(out=...)")
    _check_dtype("prod", dtype)
    z = as_complex(z)
    if z.ndim == 0:
        return _C(_R(z).clone())
    dims = _dims_of(z, dim)
    rest = [d for d in range(z.ndim) if d not in dims]
    moved = z.permute(*rest, *dims)
    flat = moved.reshape(*(z._shape[d] for d in rest), -1)
    res = _tree_prod(flat)
    if keepdim:
        res = res.reshape(*(1 if d in dims else z._shape[d] for d in range(z.ndim)))
    return res


def cumsum(orig, z, dim, *, dtype=None, out=None):
    """Each part's running sum: the real cumsum of the real view along `dim`."""
    if out is not None:
        raise unsupported("cumsum(out=...)")
    _check_dtype("cumsum", dtype)
    z = as_complex(z)
    if z.ndim == 0:
        return _C(_R(z).clone())
    return _C(_R(z).cumsum(z._dim(dim)))


def cumprod(orig, z, dim, *, dtype=None, out=None):
    """Running products by Hillis-Steele doubling: ceil(log2 n) complex multiplies per element
    (error as prod's)."""
    from .combine import cat
    from .complex_impls import _mul

    if out is not None:
        raise unsupported("cumprod(out=...)")
    _check_dtype("cumprod", dtype)
    z = as_complex(z)
    if z.ndim == 0:
        return _C(_R(z).clone())
    d = z._dim(dim)
    n = z._shape[d]
    w = z.movedim(d, -1)
    k = 1
    while k < n:
        head = w[..., :k]
        tail = _mul(w[..., k:], w[..., : n - k])
        w = _C(cat([_R(head), _R(tail)], -2))
        k *= 2
    return _C(_R(w).clone()).movedim(-1, d) if n <= 1 else w.movedim(-1, d)


# ---- dot products ----------------------------------------------------------------------------------
def _same_dtype_1d(name, a, b):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"pyrite: {name}(): expected two tensors")
    if a.dtype is not b.dtype:
        raise ComplexError(
            f"pyrite: {name} : expected both vectors to have same dtype, but found "
            f"{a.dtype.name} and {b.dtype.name}"
        )
    if a.ndim != 1 or b.ndim != 1:
        from ..errors import ShapeError

        raise ShapeError(
            f"pyrite: {name}: 1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors"
        )
    if a._shape != b._shape:
        from ..errors import ShapeError

        raise ShapeError(
            f"pyrite: {name}: inconsistent tensor size, expected tensor [{a._shape[0]}] and "
            f"src [{b._shape[0]}] to have the same number of elements, but got "
            f"{a._shape[0]} and {b._shape[0]} elements respectively"
        )


def dot(orig, a, b, *, out=None):
    """sum(a·b) over two complex vectors: (1, n) @ (n, 1) complex products (four real dots)."""
    from .complex_impls import _matmul

    if out is not None:
        raise unsupported("dot(out=...)")
    _same_dtype_1d("dot", a, b)
    return _matmul(a.unsqueeze(0), b.unsqueeze(1)).reshape(())


def vdot(orig, a, b, *, out=None):
    """sum(conj(a)·b)."""
    if out is not None:
        raise unsupported("vdot(out=...)")
    _same_dtype_1d("vdot", a, b)
    return dot(None, a.conj(), b)


# ---- comparisons --------------------------------------------------------------------------------
def isclose(orig, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """torch's rule: a == b, or both NaN (equal_nan), or |a - b| <= atol + |rtol·b| with the
    difference finite; |.| the complex modulus."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(
            f"pyrite: isclose(): argument 'other' must be Tensor, not {type(b).__name__}"
        )
    if a.dtype is not b.dtype:
        raise TypeError(
            f"pyrite: isclose: {a.dtype.name} did not match {b.dtype.name} (both tensors must "
            "have the same dtype, as in PyTorch)"
        )
    if rtol < 0 or atol < 0:
        raise ValueError(f"pyrite: isclose: rtol ({rtol}) and atol ({atol}) must be >= 0")
    close = a == b
    if equal_nan:
        close = close | (isnan(a) & isnan(b))
    if rtol == 0 and atol == 0:
        return close
    actual = abs_(a - b)
    allowed = abs_(b) * float(rtol) + float(atol)
    return close | (actual.isfinite() & (actual <= allowed))


def allclose(orig, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(isclose(None, a, b, rtol, atol, equal_nan).all().item())


def where(orig, condition, input=None, other=None):
    """torch.where with a complex operand: each part's where (a real tensor or scalar operand
    is promoted to complex)."""
    from .complex import _pair
    from .elementwise import where as real_where

    if input is None and other is None:
        return orig(condition)
    cond = condition if isinstance(condition, Tensor) else as_complex(condition)
    if _is_c(cond):
        cond = _R(cond).ne(0).any(-1)
    elif not cond.dtype.is_bool:
        cond = cond != 0
    return _C(real_where(cond.unsqueeze(-1), _pair(input), _pair(other)))


# ---- norms ----------------------------------------------------------------------------------------
def _real_dtype(dtype):
    if dtype is None:
        return None
    d = D.from_any(dtype)
    return D.float32 if d is C64 else d


def vector_norm(orig, x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The real vector norm of |x| (float32, as torch's for complex64)."""
    return orig(abs_(x), ord, dim, keepdim, dtype=_real_dtype(dtype), out=out)


def matrix_norm(orig, A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """'fro', ±1 and ±inf: the real norm of |A|; 2, -2 and 'nuc' from the singular values of
    the real embedding [[Re A, -Im A], [Im A, Re A]], which are A's, each twice."""
    if ord in (2, -2, "nuc") and not isinstance(ord, bool):
        return _spectral_norm(A, ord, dim, keepdim, out)
    return orig(abs_(A), ord, dim, keepdim, dtype=_real_dtype(dtype), out=out)


def _embed(A):
    """A = R + iJ (..., m, n) as the real (..., 2m, 2n) matrix [[R, -J], [J, R]]: a map that
    keeps sums, products and inverses (the embedding of A⁻¹ is the inverse of A's), whose
    singular values are A's, each twice."""
    from .combine import cat

    re, im = _parts(A)
    return cat([cat([re, -im], -1), cat([im, re], -1)], -2)


def _unembed(X, m, n):
    """The complex (..., m, n) matrix whose embedding is X (its left column of blocks)."""
    return _make(X[..., :m, :n], X[..., m:, :n])


def _square_or_real_error(orig, A, *args):
    """A's shape checked by the real op on its real part (a non-square A raises the real
    op's error, naming A's own sizes)."""
    if A.ndim < 2 or A._shape[-1] != A._shape[-2]:
        orig(_parts(A)[0], *args)
        raise AssertionError("unreachable: the real op accepted a non-square matrix")


def inv(orig, A, *, out=None):
    """A⁻¹ from the real inverse of A's embedding (LU with partial pivoting on the 2n x 2n
    matrix, whose condition number is A's); singular A: the real op's LinAlgError."""
    from .linalg import _out

    _square_or_real_error(orig, A)
    n = A._shape[-1]
    return _out(_unembed(orig(_embed(A)), n, n), out, "linalg.inv")


def inv_ex(orig, A, *, check_errors=False, out=None):
    from .linalg import _outs

    _square_or_real_error(orig, A)
    n = A._shape[-1]
    res = orig(_embed(A), check_errors=check_errors)
    return _outs(type(res), (_unembed(res[0], n, n), res[1]), out, "linalg.inv_ex")


def solve(orig, A, B, *, left=True, out=None):
    """X with A X = B (X A = B: left=False, through transposes), from the real solve of the
    embedding: [[R, -J], [J, R]] [Xr; Xi] = [Br; Bi]. A shape the embedding refuses gets the
    real op's error on the real parts (it names the complex shapes)."""
    from .linalg import _out

    return _out(_solve(orig, A, B, left), out, "linalg.solve")


def _solve(orig, A, B, left):
    from .combine import cat

    if not (_is_c(A) and _is_c(B)):
        raise ComplexError(
            "pyrite: linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{A.dtype.name} and B of type {B.dtype.name} instead."
        )
    _square_or_real_error(orig, A, _parts(B)[0])
    n = A._shape[-1]
    # torch's rule: B is a vector (*, n) when 1-d, or when its shape is A's batch and n
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B._shape == A._shape[:-1])
    if not left:
        if vector:  # (torch's rule and error: a vector B has no X A = B)
            raise RuntimeError(
                "pyrite: linalg.solve: Incompatible shapes of A and B for the equation XA = B "
                f"({n}x{n} and {B._shape[-1]}x1)"
            )
        return _solve(orig, A.mT, B.mT, True).mT
    br, bi = _parts(B)
    try:
        X = orig(_embed(A), cat([br, bi], -1 if vector else -2))
    except ValueError:  # (ShapeError: the parts' own shapes name the sizes torch names)
        orig(_parts(A)[0], br)
        raise
    return _make(X[..., :n], X[..., n:]) if vector else _make(X[..., :n, :], X[..., n:, :])


def _spectral_norm(A, ord, dim, keepdim, out):
    from .. import linalg

    if isinstance(dim, numbers.Integral) or len(dim) != 2:
        raise ValueError("pyrite: linalg.matrix_norm: dim must be a 2-tuple")
    d0, d1 = (A._dim(int(d)) for d in dim)
    M = A.movedim((d0, d1), (-2, -1))
    S = linalg.svdvals(_embed(M))[..., 0::2]  # (..., k): A's singular values
    k = S._shape[-1]
    if k == 0 and ord == -2:  # (torch: amin over no singular values)
        raise IndexError(
            "pyrite: linalg.matrix_norm: amin(): Expected reduction dim -1 to have non-zero size."
        )
    if ord == "nuc" or k == 0:  # (an empty matrix's 2-norm is 0, as torch's)
        res = S.sum(-1)
    elif ord == 2:
        res = S[..., 0]
    else:
        res = S[..., k - 1]
    if keepdim:
        res = res.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    from .linalg import _out

    return _out(res, out, "linalg.matrix_norm", True)


def linalg_norm(orig, A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """torch.linalg.norm: the real norm of |A|, except the spectral matrix norms (2, -2, 'nuc'
    over a 2-tuple dim, or over a 2-D A with dim None)."""
    pair = dim is not None and not isinstance(dim, numbers.Integral) and len(dim) == 2
    if (
        ord in (2, -2, "nuc")
        and not isinstance(ord, bool)
        and (pair or (dim is None and A.ndim == 2))
    ):
        return _spectral_norm(A, ord, dim if pair else (-2, -1), keepdim, out)
    return orig(abs_(A), ord, dim, keepdim, out=out, dtype=_real_dtype(dtype))


def tensor_norm(orig, z, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm / Tensor.norm: the real norm of |z| ('nuc': its singular values)."""
    if p == "nuc":
        return _spectral_norm(z, "nuc", (-2, -1) if dim is None else dim, keepdim, out)
    return orig(abs_(z), p, dim, keepdim, out=out, dtype=_real_dtype(dtype))


def norm(orig, *args, **kwargs):
    """'norm' names two ops: torch.linalg.norm (ord=) and torch.norm / Tensor.norm (p=)."""
    inner = orig
    while getattr(inner, "__wrapped__", None) is not None:
        inner = inner.__wrapped__
    if inner.__name__ == "norm_top":
        return tensor_norm(orig, *args, **kwargs)
    return linalg_norm(orig, *args, **kwargs)


def register(IMPLS):
    IMPLS["prod"] = prod
    IMPLS["cumsum"] = cumsum
    IMPLS["cumprod"] = cumprod
    IMPLS["dot"] = dot
    IMPLS["vdot"] = vdot
    IMPLS["isclose"] = isclose
    IMPLS["allclose"] = allclose
    IMPLS["where"] = where
    IMPLS["vector_norm"] = vector_norm
    IMPLS["matrix_norm"] = matrix_norm
    IMPLS["norm"] = norm
    IMPLS["inv"] = IMPLS["inverse"] = inv
    IMPLS["inv_ex"] = inv_ex
    IMPLS["solve"] = solve
