"""Products of complex64 tensors beyond matmul: mv, inner, outer/ger, tensordot, kron, cross,
linalg.vecdot, einsum, and the scaled products addmm, addmv, baddbmm, addbmm, addr (and their
in-place forms), each composed of the real op on the real and imaginary parts, so shape rules
and errors are the real op's and autograd records every piece (torch's conjugate-Wirtinger
gradient, ops/complex.py).

A product bilinear over the reals, f(A + iB, C + iD) = f(A, C) - f(B, D) + i(f(A, D) + f(B, C)),
is four real products (two where one operand is real): each part's error is the real product's,
so for a contraction of length K within ~K·eps·Σ|a||b| of the exact value, as torch's complex
GEMM. einsum instead contracts the real views (a trailing part label on each complex operand)
with the multiplication table M[p, q, r] of (1, i) as extra operands, one after each complex
operand from the second on, so pyrite's left-to-right pairwise einsum forms each complex
product as one real GEMM twice as wide and folds it at once (an intermediate never holds more
than four real parts).

Operand dtypes follow torch: where torch wants equal dtypes (mv, inner, tensordot, einsum,
cross, vecdot, the addmm family) a real operand beside a complex one is refused (ComplexError,
a RuntimeError as torch's); outer, kron and addr promote it.
"""

from __future__ import annotations

from .. import autograd
from ..tensor import Tensor
from .complex import _C, _PYCOMPLEX, _R, C64, ComplexError, _is_c, as_complex
from .complex_math import _make, _parts


# ---- the parts of a product --------------------------------------------------------------------
def _split(x):
    """(real part, imaginary part or None) of a tensor or Python number."""
    if isinstance(x, Tensor):
        if _is_c(x):
            return _parts(x)
        return x, None
    if isinstance(x, _PYCOMPLEX):
        return _parts(as_complex(x))
    return x, None


def bilinear(f, a, b, *args, **kwargs):
    """f(a, b, *args, **kwargs) for an f bilinear over the reals, from real products."""
    ar, ai = _split(a)
    br, bi = _split(b)

    def g(x, y):
        return f(x, y, *args, **kwargs)

    if ai is None and bi is None:
        return g(ar, br)
    if ai is None:
        return _make(g(ar, br), g(ar, bi))
    if bi is None:
        return _make(g(ar, br), g(ai, br))
    return _make(g(ar, br) - g(ai, bi), g(ar, bi) + g(ai, br))


def _same_dtype(name, *ts):
    """torch's rule for these products: every tensor operand of one dtype."""
    ts = [t for t in ts if isinstance(t, Tensor)]
    if any(t.dtype is not ts[0].dtype for t in ts):
        raise ComplexError(
            f"pyrite: {name}: expected all operands to have the same dtype, but got "
            f"{', '.join(t.dtype.name for t in ts)} (torch refuses a real tensor beside a "
            "complex one here too; convert it with .to(complex64))"
        )


def _no_out(name, out):
    # (ops/outarg.py writes out= around this layer: an out reaching here is a direct call)
    if out is not None:
        from .complex import unsupported

        raise unsupported(f"{name}(out=...)")


def _strict(name):
    """The impl of a bilinear op whose two tensor operands must share a dtype."""

    def impl(orig, a, b, *args, out=None, **kwargs):
        _no_out(name, out)
        _same_dtype(name, a, b)
        return bilinear(orig, a, b, *args, **kwargs)

    return impl


def _promoting(orig, a, b, *args, out=None, **kwargs):
    _no_out(getattr(orig, "__name__", "op"), out)
    return bilinear(orig, a, b, *args, **kwargs)


def vecdot(orig, x, y, *, dim=-1, out=None):
    """sum(conj(x)·y) along `dim` (torch.linalg.vecdot)."""
    from .complex_impls import _conj

    _no_out("linalg.vecdot", out)
    _same_dtype("linalg.vecdot", x, y)
    return bilinear(orig, _conj(x), y, dim=dim)


# ---- einsum ----------------------------------------------------------------------------------------
_TABLE = ((1.0, 0.0), (0.0, 1.0)), ((0.0, 1.0), (-1.0, 0.0))  # (1, i) x (1, i) -> (1, i)


def _implicit_output(terms):
    counts: dict = {}
    for term in terms:
        for c in term.replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
    ell = "..." if any("..." in t for t in terms) else ""
    return ell + "".join(sorted(c for c, k in counts.items() if k == 1))


def einsum(orig, equation, *operands):
    """torch.einsum with complex operands: the real einsum of the real views and the
    multiplication table (see the module docstring)."""
    from .complex import _const
    from .einsum import _from_sublists

    if not isinstance(equation, str):
        equation, operands = _from_sublists((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    _same_dtype("einsum", *operands)
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        return orig(equation, *operands)  # (the real einsum's error)
    if not arrow:
        rhs = _implicit_output(terms)
    labels = iter(chr(0x3B1 + i) for i in range(2 * len(operands)))  # (Greek: never torch's)
    new_terms, new_ops, cur = [], [], ""
    table = None
    for term, t in zip(terms, operands):
        if not _is_c(t):
            new_terms.append(term)
            new_ops.append(t)
            continue
        p = next(labels)
        new_terms.append(term + p)
        new_ops.append(_R(t))
        if not cur:
            cur = p
            continue
        if table is None:
            table = _const(_TABLE)
        r = next(labels)
        new_terms.append(cur + p + r)
        new_ops.append(table)
        cur = r
    return _C(orig(",".join(new_terms) + "->" + rhs + cur, *new_ops))


# ---- beta·input + alpha·product ------------------------------------------------------------------
def _scale(x, s):
    from .complex_impls import _mul

    return x if isinstance(s, (int, float)) and s == 1 else _mul(x, s)


def _affine(name, input, prod, beta, alpha):
    """beta·input + alpha·prod, input broadcast to prod's shape (ignored where beta is 0, as
    torch: a NaN there does not propagate)."""
    from .complex_impls import _add

    if isinstance(input, Tensor):
        try:
            input.expand(*prod._shape)
        except Exception:
            from ..errors import ShapeError

            raise ShapeError(
                f"pyrite: {name}: input of shape {tuple(input._shape)} does not broadcast to "
                f"the product's shape {tuple(prod._shape)}"
            ) from None
    prod = _scale(prod, alpha)
    if beta == 0:
        return as_complex(prod)
    return _add(_scale(input, beta), prod)


def _zero_alpha(name, input, shape, beta):
    """torch's BLAS calls (complex addmm / addbmm, large baddbmm) skip the product where alpha
    is 0: beta·input, its NaNs kept, the operands' not read."""
    from .creation import zeros

    return _affine(name, input, zeros(shape, dtype=C64), beta, 1)


def _scaled(name, product_of, skip_at_zero=lambda *a: False):
    """The impl of addmm-like ops: `product_of(orig, a, b)` is the complex product (its shape
    checks the real op's, with beta = 0)."""

    def impl(orig, input, a, b, *, beta=1, alpha=1, out=None):
        _no_out(name, out)
        _same_dtype(name, input, a, b)
        if alpha == 0 and skip_at_zero(a, b):
            shape = product_of(orig, input, a, b, probe=True)
            return _zero_alpha(name, input, shape, beta)
        prod = product_of(orig, input, a, b)
        return _affine(name, input, prod, beta, alpha)

    return impl


def _product(orig, input, a, b, probe=False):
    """a·b as the real op computes it (input's real part given, beta 0: its shape checked)."""
    base = _split(input)[0] if isinstance(input, Tensor) else input

    def f(x, y):
        return orig(base, x, y, beta=0)

    if probe:  # the shape only (the real op on the real parts: no complex product formed)
        with autograd.no_grad():
            return tuple(f(_split(a)[0], _split(b)[0])._shape)
    return bilinear(f, a, b)


def _baddbmm_blas(a, b):
    from .matmul import BADDBMM_BLAS_MIN

    return a._shape[1] * a._shape[2] * b._shape[2] >= BADDBMM_BLAS_MIN


def addr(orig, input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """beta·input + alpha·outer(vec1, vec2); a real operand promoted, as torch's."""
    _no_out("addr", out)
    prod = bilinear(lambda x, y: orig(_split(input)[0], x, y, beta=0), vec1, vec2)
    return _affine("addr", input, prod, beta, alpha)


def _out_of_place(name):
    """The real op `name` (for an in-place method's parts: its own orig writes in place)."""
    from . import compat, matmul

    return getattr(compat if name == "addr" else matmul, name)


def _inplace(name, impl):
    """self.op_(...) = self[...] = op(self, ...) (refused while self requires grad)."""
    from .complex_impls import _write

    def op(orig, self, *args, **kwargs):
        return _write(name, self, impl(_out_of_place(name[:-1]), self, *args, **kwargs))

    return op


# ---- chains ----------------------------------------------------------------------------------------
def _chain(name):
    """multi_dot, chain_matmul, matrix_power (n >= 0): the real functions as they are, whose
    products are the guarded matmul (complex above); one dtype, as torch's."""

    def impl(orig, *args, **kwargs):
        ts = args[0] if name == "multi_dot" and args else args
        if name == "matrix_power":
            ts = args[:1]
            n = args[1] if len(args) > 1 else kwargs.get("n", 0)
            if isinstance(n, int) and not isinstance(n, bool) and n < 0:
                return _negative_power(orig, args[0], n)
        _same_dtype(name, *ts)
        res = orig(*args, **kwargs)
        if name == "matrix_power" and not res.requires_grad and ts[0].requires_grad:
            # n = 0: the identity, connected to A as torch's (a zero gradient): plus the sum of
            # an empty slice of A, exactly 0 whatever A holds
            res = _C(_R(res) + _R(ts[0]).narrow(-1, 0, 0).sum())
        return res

    return impl


def _negative_power(orig, A, n):
    """A**n, n < 0: (A⁻¹)**|n|, A⁻¹ the complex inverse (ops/complex_linalg.py); a non-square
    A gets the real op's error (its sizes are A's)."""
    from .. import linalg

    if A.ndim < 2 or A._shape[-1] != A._shape[-2]:
        orig(_parts(A)[0], n)
    return orig(linalg.inv(A), -n)


# ---- linear ------------------------------------------------------------------------------------------
def linear(orig, input, weight, bias=None):
    """input @ weight.T + bias: four real linears on the parts (the bias's parts in two of
    them, in the GEMM's epilogue); input, weight and bias of one dtype, as torch's."""
    ts = [t for t in (input, weight, bias) if isinstance(t, Tensor)]
    if any(t.dtype is not C64 for t in ts):
        raise ComplexError(
            "pyrite: linear: expected input, weight and bias to have the same dtype, but got "
            f"{', '.join(t.dtype.name for t in ts)} (torch refuses a real tensor beside a "
            "complex one here too)"
        )
    (xr, xi), (wr, wi) = _parts(input), _parts(weight)
    br, bi = _parts(bias) if bias is not None else (None, None)
    return _make(orig(xr, wr, br) - orig(xi, wi), orig(xr, wi, bi) + orig(xi, wr))


def register(IMPLS):
    IMPLS["linear"] = linear
    for name in ("mv", "inner", "tensordot"):
        IMPLS[name] = _strict(name)
    IMPLS["cross"] = IMPLS["cross_top"] = _strict("cross")
    for name in ("outer", "ger", "kron"):
        IMPLS[name] = _promoting
    IMPLS["vecdot"] = vecdot
    IMPLS["einsum"] = einsum
    IMPLS["addmm"] = _scaled("addmm", _product, lambda a, b: True)
    IMPLS["addmv"] = _scaled("addmv", _product)
    IMPLS["baddbmm"] = _scaled("baddbmm", _product, _baddbmm_blas)
    IMPLS["addbmm"] = _scaled("addbmm", _product, lambda a, b: True)
    IMPLS["addr"] = addr
    for name in ("addmm", "addmv", "baddbmm", "addbmm", "addr"):
        IMPLS[name + "_"] = _inplace(name + "_", IMPLS[name])
    for name in ("multi_dot", "chain_matmul", "matrix_power"):
        IMPLS[name] = _chain(name)
