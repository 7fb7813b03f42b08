"""torch.linalg's norms and products built from other pyrite ops: vector_norm, matrix_norm, norm
(and torch.norm's dispatch), cross, vecdot, multi_dot, tensordot, diagonal, matmul.

vector norms are the reduction kernels' norms (ops/reduce.py, f32 accumulation, f16 in and
out as torch allows); matrix norms are sums and maxima of |A| along one dim, or the singular
values (ops/linalg.py `svdvals`) for ord 2, -2 and 'nuc'.
"""

from __future__ import annotations

import math
import numbers

from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor
from .core import broadcast_shapes
from .elementwise import as_tensor_arg


def _need_float(x: Tensor, name: str):
    if x.dtype.kind != "f":
        raise DtypeError(
            f"pyrite: {name}: Expected a floating point tensor as input. Got {x.dtype!r}"
        )


def _dim_list(x: Tensor, dim) -> tuple | None:
    if dim is None:
        return None
    if isinstance(dim, numbers.Integral):
        return (x._dim(int(dim)),) if x.ndim else (int(dim),)
    return tuple(x._dim(int(d)) for d in dim)


# ---- vector and matrix norms ---------------------------------------------------------------
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """(sum |x_i|^ord)^(1/ord) over `dim` (all dims when None); ord inf / -inf give max / min
    |x_i|, ord 0 the count of nonzeros."""
    from .linalg import _out
    from .reduce import norm as _reduce_norm

    x = as_tensor_arg(x)
    _need_float(x, "linalg.vector_norm")
    if isinstance(ord, (str, bool)) or not isinstance(ord, numbers.Number):
        raise TypeError(
            f"pyrite: linalg.vector_norm(): argument 'ord' must be a number, not "
            f"{type(ord).__name__}"
        )
    if dtype is not None:
        x = x.to(dtype)
    if isinstance(dim, (list, tuple)) and len(dim) == 0:
        dim = None
    res = _reduce_norm(x, float(ord), dim, keepdim)
    return _out(res, out, "linalg.vector_norm")


MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """A matrix norm over the two dims `dim`: 'fro' (Frobenius), 'nuc' (sum of singular
    values), inf / -inf (max / min row sum of |A|), 1 / -1 (max / min column sum), 2 / -2
    (largest / smallest singular value)."""
    from ..linalg import svdvals  # (the recorded one: its rule carries the gradient)
    from .linalg import _out

    A = as_tensor_arg(A)
    _need_float(A, "linalg.matrix_norm")
    if A.ndim < 2:
        raise ShapeError(
            f"pyrite: linalg.matrix_norm: The input tensor A must have at least 2 dimensions "
            f"(got shape {tuple(A._shape)})."
        )
    if isinstance(dim, numbers.Integral) or len(dim) != 2:
        got = 1 if isinstance(dim, numbers.Integral) else len(dim)
        raise ShapeError(f"pyrite: linalg.matrix_norm: dim must be a 2-tuple. Got {got}")
    d0, d1 = (A._dim(int(d)) for d in dim)
    if d0 == d1:
        raise ShapeError(f"pyrite: linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord not in MATRIX_ORDS or isinstance(ord, bool):
        raise ArgumentError(f"pyrite: linalg.matrix_norm: Order {ord} not supported.")
    if ord in (2, -2, "nuc") and A.dtype.itemsize < 4:
        # (torch checks the input's dtype before dtype= casts it: its SVD takes no half)
        raise DtypeError(
            f"pyrite: linalg.matrix_norm: Low precision dtypes not supported. Got {A.dtype!r}"
        )
    if dtype is not None:
        A = A.to(dtype)
    if ord == "fro":
        return _out(vector_norm(A, 2, (d0, d1), keepdim), out, "linalg.matrix_norm", True)
    if ord in (1, -1, math.inf, -math.inf):
        # ord ±inf: rows (sum over d1, extreme over d0); ord ±1: columns (sum over d0)
        s_dim, e_dim = (d1, d0) if ord in (math.inf, -math.inf) else (d0, d1)
        sums = A.abs().sum(s_dim, keepdim=True)
        if ord > 0 and sums._shape[e_dim] == 0:  # torch: the max of no sums is 0
            ext = sums.sum(e_dim, keepdim=True)
        else:
            ext = sums.amax(e_dim, keepdim=True) if ord > 0 else sums.amin(e_dim, keepdim=True)
        res = ext if keepdim else ext.squeeze(max(d0, d1)).squeeze(min(d0, d1))
        return _out(res, out, "linalg.matrix_norm", True)
    moved = A.movedim((d0, d1), (-2, -1))
    S = svdvals(moved)
    if ord == "nuc":
        res = S.sum(-1)
    else:
        k = S._shape[-1]
        if k == 0 and ord == -2:  # torch: amin over no singular values
            raise IndexError(
                "pyrite: linalg.matrix_norm: amin(): Expected reduction dim -1 to have non-zero size."
            )
        # an empty matrix's 2-norm is 0, as torch's (S[..., 0] raised an IndexError)
        res = S.sum(-1) if k == 0 else S[..., 0] if ord == 2 else S[..., k - 1]
    if keepdim:
        res = res.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1))
    return _out(res, out, "linalg.matrix_norm", True)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):
    """torch.linalg.norm: a vector norm for an int (or 1-tuple) dim, a matrix norm for a
    2-tuple; with dim None, the 2-norm of A flattened when ord is None, else A must be 1-D
    (vector norm) or 2-D (matrix norm)."""
    from .linalg import _out

    # (out= after the norm: torch's linalg.norm is a composite that accepts out= with inputs
    # requiring grad, and its out carries the gradient)
    return _out(_norm(A, ord, dim, keepdim, dtype), out, "linalg.norm", True)


def _norm(A, ord, dim, keepdim, dtype):
    A = as_tensor_arg(A)
    if dim is not None:
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        if len(dims) == 1:
            if isinstance(ord, str):
                raise ShapeError("pyrite: linalg.matrix_norm: dim must be a 2-tuple. Got 1")
            o = 2 if ord is None else ord
            return vector_norm(A, o, dims, keepdim, dtype=dtype)
        o = "fro" if ord is None else ord
        return matrix_norm(A, o, dims, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim not in (1, 2):
        raise ShapeError(
            f"pyrite: linalg.norm: If dim is not specified but ord is, the input must be 1D "
            f"or 2D. Got {A.ndim}D."
        )
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if isinstance(ord, str):
        raise ShapeError(
            "pyrite: linalg.matrix_norm: The input tensor A must have at least 2 dimensions."
        )
    return vector_norm(A, ord, None, keepdim, dtype=dtype)


def norm_top(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """torch.norm: a string p is 'fro' (a 2-norm over up to two dims) or a matrix norm ('nuc');
    a number is a vector norm over `dim` (all dims when None)."""
    input = as_tensor_arg(input)
    dims = None if dim is None else ((dim,) if isinstance(dim, numbers.Integral) else dim)
    if isinstance(p, str):
        if p == "fro" and (dims is None or len(dims) <= 2):
            return vector_norm(input, 2, dims, keepdim, dtype=dtype, out=out)
        dims = tuple(range(input.ndim)) if dims is None else dims
        return matrix_norm(input, p, dims, keepdim, dtype=dtype, out=out)
    return vector_norm(input, 2.0 if p is None else p, dims, keepdim, dtype=dtype, out=out)


# ---- cross, vecdot -----------------------------------------------------------------------------
def _cross3(a: Tensor, b: Tensor, d: int) -> Tensor:
    from .combine import stack

    a0, a1, a2 = (a.select(d, i) for i in range(3))
    b0, b1, b2 = (b.select(d, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def cross(input, other, *, dim=-1, out=None):
    """The cross product of 3-vectors along `dim`, batch dims broadcast (torch.linalg.cross)."""
    from .linalg import _out

    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if a.dtype is not b.dtype:  # (torch promotes no types here)
        raise DtypeError(
            f"pyrite: linalg.cross: expected both inputs of one dtype, got {a.dtype!r} and "
            f"{b.dtype!r}"
        )
    if a.ndim != b.ndim:
        raise ShapeError(
            f"pyrite: linalg.cross: inputs must have the same number of dimensions "
            f"(shapes {tuple(a._shape)} and {tuple(b._shape)})"
        )
    if not a.ndim:
        raise ShapeError("pyrite: linalg.cross: inputs must have at least one dimension")
    d = a._dim(dim)
    if a._shape[d] != 3 or b._shape[d] != 3:
        raise ShapeError(
            f"pyrite: linalg.cross: inputs dimension {dim} must have length 3. Got "
            f"{a._shape[d]} and {b._shape[d]}"
        )
    shape = broadcast_shapes(a._shape, b._shape)
    return _out(_cross3(a.expand(*shape), b.expand(*shape), d), out, "linalg.cross")


def cross_top(input, other, dim=None, *, out=None):
    """torch.cross: with dim None, the first dimension of size 3 (torch deprecates that)."""
    a, b = as_tensor_arg(input), as_tensor_arg(other)
    if dim is None:
        shape = broadcast_shapes(a._shape, b._shape) if a.ndim == b.ndim else a._shape
        found = [i for i, s in enumerate(shape) if s == 3]
        if not found:
            raise ShapeError(
                f"pyrite: cross: no dimension of size 3 in input (shape {tuple(a._shape)})"
            )
        dim = found[0]
    return cross(a, b, dim=dim, out=out)


def vecdot(x, y, *, dim=-1, out=None):
    """sum(x * y) along `dim`, broadcast (the conjugate of x is x: pyrite has no complex)."""
    from .linalg import _out

    a, b = as_tensor_arg(x), as_tensor_arg(y)
    if a.dtype is not b.dtype:
        raise DtypeError(
            f"pyrite: linalg.vecdot: Expected x and y to have the same dtype, but found "
            f"x of type {a.dtype!r} and y of type {b.dtype!r} instead"
        )
    shape = broadcast_shapes(a._shape, b._shape)
    d = dim if dim >= 0 else dim + len(shape)
    if not 0 <= d < len(shape):
        raise IndexError(f"pyrite: linalg.vecdot: dimension {dim} out of range for {shape}")
    return _out((a * b).sum(d), out, "linalg.vecdot")


# ---- multi_dot, tensordot, matmul, diagonal ----------------------------------------------------
def _chain_order(dims):
    """The cheapest parenthesisation of a chain with shapes dims[i] x dims[i+1] (the textbook
    O(n³) dynamic programme); returns split[i][j]."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors, *, out=None):
    """The product of a chain of matrices in the cheapest order; the first may be a 1-D row
    vector and the last a 1-D column vector, as torch.linalg.multi_dot."""
    from .linalg import _out
    from .matmul import matmul

    ts = [as_tensor_arg(t) for t in tensors]
    n = len(ts)
    if n < 2:
        raise ArgumentError(f"pyrite: multi_dot(): expected at least 2 tensors but got {n}")
    first_1d, last_1d = ts[0].ndim == 1, ts[-1].ndim == 1
    for i, t in enumerate(ts):
        ok = t.ndim == 2 or (t.ndim == 1 and i in (0, n - 1))
        if not ok:
            where = "first" if i == 0 else ("last" if i == n - 1 else f"tensor {i}")
            need = "1D or 2D" if i in (0, n - 1) else "2D"
            raise ShapeError(
                f"pyrite: multi_dot(): the {where} tensor must be {need} but got {t.ndim}D"
            )
    if first_1d:
        ts[0] = ts[0].unsqueeze(0)
    if last_1d:
        ts[-1] = ts[-1].unsqueeze(1)
    for i in range(n - 1):
        if ts[i]._shape[1] != ts[i + 1]._shape[0]:
            raise ShapeError(
                f"pyrite: multi_dot(): tensors {i} and {i + 1} with shapes "
                f"{tuple(tensors[i].shape)} and {tuple(tensors[i + 1].shape)} cannot be multiplied"
            )
    dims = [ts[0]._shape[0]] + [t._shape[1] for t in ts]
    split = _chain_order(dims) if n > 2 else None

    def prod(i, j):
        if i == j:
            return ts[i]
        k = split[i][j] if split is not None else i
        return matmul(prod(i, k), prod(k + 1, j))

    res = prod(0, n - 1)
    if first_1d:
        res = res.squeeze(0)
    if last_1d:
        res = res.squeeze(-1)
    return _out(res, out, "linalg.multi_dot")


def tensordot(a, b, dims=2, out=None):
    """Contract a's dims dims[0] with b's dims[1] (an int d: a's last d with b's first d)."""
    from .linalg import _out
    from .matmul import matmul

    a, b = as_tensor_arg(a), as_tensor_arg(b)
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise ArgumentError(f"pyrite: tensordot expects dims >= 0, but got dims={dims}")
        if dims > a.ndim or dims > b.ndim:
            raise ShapeError(
                f"pyrite: tensordot: dims={dims} is more than the dims of shapes "
                f"{tuple(a._shape)} and {tuple(b._shape)}"
            )
        ca, cb = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        if len(dims) != 2:
            raise ArgumentError("pyrite: tensordot: dims must be an int or a pair of dim lists")
        ca, cb = dims
        ca = [ca] if isinstance(ca, numbers.Integral) else list(ca)
        cb = [cb] if isinstance(cb, numbers.Integral) else list(cb)
        if len(ca) != len(cb):
            raise ArgumentError(
                f"pyrite: tensordot: both dimension lists should have same length, got "
                f"{len(ca)} and {len(cb)}"
            )
        ca = [a._dim(d) for d in ca]
        cb = [b._dim(d) for d in cb]
    for da, db in zip(ca, cb):
        if a._shape[da] != b._shape[db]:
            raise ShapeError(
                f"pyrite: tensordot: contracted dimensions need to match, but first has size "
                f"{a._shape[da]} in dim {da} and second has size {b._shape[db]} in dim {db}"
            )
    fa = [d for d in range(a.ndim) if d not in ca]
    fb = [d for d in range(b.ndim) if d not in cb]
    K = math.prod(a._shape[d] for d in ca)
    sa = [a._shape[d] for d in fa]
    sb = [b._shape[d] for d in fb]
    a2 = a.permute(*fa, *ca).reshape(math.prod(sa), K)
    b2 = b.permute(*cb, *fb).reshape(K, math.prod(sb))
    return _out(matmul(a2, b2).reshape(*sa, *sb), out, "tensordot")


def matmul(input, other, *, out=None):
    """torch.linalg.matmul: matmul, its out= resized from empty as torch's (the product's own
    out= takes only the result's shape)."""
    from .linalg import _out
    from .matmul import matmul as _mm

    return _out(_mm(input, other), out, "linalg.matmul")


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """A view of the diagonal of A over dims dim1, dim2 (torch.linalg.diagonal's defaults)."""
    from .views import diagonal as _diag

    return _diag(as_tensor_arg(A), offset, dim1, dim2)


def vander(x, *, N=None):
    """torch.linalg.vander: x (*, n) -> (*, n, N) with columns x**0, x**1, ..., x**(N-1)."""
    from .. import dtypes as D

    x = as_tensor_arg(x)
    if x.dtype in (D.float16, D.bfloat16, D.bool_):  # (torch's CPU refuses these three)
        raise DtypeError(
            "pyrite: linalg.vander supports floating point, complex, and integer tensors, but "
            f"got {x.dtype!r}"
        )
    if x.ndim == 0:
        raise ShapeError("pyrite: linalg.vander: x must have at least one dimension")
    N = x._shape[-1] if N is None else int(N)
    if N <= 1:
        raise ArgumentError(f"pyrite: linalg.vander: N must be greater than 1 (got {N}).")
    return _powers(x, N)


def _powers(x: Tensor, N: int) -> Tensor:
    """(*, n, N): x**0 .. x**(N-1) by repeated products (exact for integers, as torch)."""
    from .combine import stack
    from .creation import zeros

    if N <= 0:
        return zeros(*x._shape, 0, dtype=x.dtype)
    cols = [x * 0 + 1]
    for _ in range(1, N):
        cols.append(cols[-1] * x)
    return stack(cols, -1)
