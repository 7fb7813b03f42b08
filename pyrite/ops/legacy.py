"""Torch names that older or exported code still calls, as compositions of pyrite's ops: the
deprecated
`chain_matmul`, `frobenius_norm`, `nuclear_norm`, `triangular_solve` and `lu_solve`,
`torch.convolution` (the generic entry of the conv functions), `typename`, `get_device`, and
the `*_copy` functions (`permute_copy`, `expand_copy`, ...: the view op's values in a new
contiguous tensor, as torch.export emits them). The functions torch 1.9 removed (`torch.solve`,
`lstsq`, `eig`, `symeig`, `matrix_rank`) raise torch's own error naming their replacement.
"""

from __future__ import annotations

import collections

from ..errors import ShapeError
from ..tensor import Tensor


def typename(obj) -> str:
    """The type's name as torch.typename gives it: a tensor's `type()` ("pyrite.FloatTensor"),
    else the class's module-qualified name (a builtin's bare name)."""
    if isinstance(obj, Tensor):
        return obj.type()
    cls = obj if isinstance(obj, type) else type(obj)
    module = cls.__module__
    if module in (None, "builtins"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def get_device(input) -> int:
    """The tensor's device index (`Tensor.get_device`)."""
    return input.get_device()


def chain_matmul(*matrices, out=None):
    """The product of 2-D matrices in the cheapest order (deprecated in torch for
    `linalg.multi_dot`, which this is)."""
    from .linalg_norms import multi_dot

    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


def frobenius_norm(input, dim=(-2, -1), keepdim=False, *, out=None):
    """sqrt(Σ x²) over `dim` (deprecated in torch for `linalg.vector_norm(x, 2, dim)`)."""
    from .linalg_norms import vector_norm

    return vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=(-2, -1), keepdim=False, *, out=None):
    """The sum of singular values over the two dims `dim` (deprecated in torch for
    `linalg.matrix_norm(x, 'nuc', dim)`)."""
    from .linalg_norms import matrix_norm

    if not isinstance(dim, (tuple, list)):
        dim = (-2, -1)  # (torch.nuclear_norm(x, keepdim) takes keepdim second)
    return matrix_norm(input, "nuc", tuple(dim), keepdim)


triangular_solve_result = collections.namedtuple(
    "triangular_solve", ["solution", "cloned_coefficient"]
)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """X with op(A) X = b for a triangular A (op: transpose if `transpose`), and A itself
    (torch's `cloned_coefficient`), batched. Deprecated in torch for
    `linalg.solve_triangular(A, B, upper=...)`."""
    from .linalg_solve import solve_triangular

    if A.ndim < 2 or b.ndim < 2:
        raise ShapeError(
            "pyrite: triangular_solve: expected b and A to have at least 2 dimensions, got "
            f"{b.ndim} and {A.ndim}"
        )
    op = A.mT if transpose else A
    x = solve_triangular(op, b, upper=(upper != bool(transpose)), unitriangular=unitriangular)
    return triangular_solve_result(x, A.clone())


def lu_solve(b, LU_data, LU_pivots, *, out=None):
    """X with A X = b from A's LU factorization (`linalg.lu_factor`'s LU and pivots);
    deprecated in torch for `linalg.lu_solve(LU, pivots, B)`."""
    from .linalg_solve import lu_solve as _lu_solve

    return _lu_solve(LU_data, LU_pivots, b)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution: the conv (or, `transposed`, the transposed conv) of input's spatial
    rank (1, 2 or 3) with every argument given, as the functional forms take them."""
    from ..nn import functional as F

    nd = input.ndim - 2
    if nd not in (1, 2, 3) or weight.ndim != nd + 2:
        raise ShapeError(
            f"pyrite: convolution: expected a (N, C, *spatial) input with 1 to 3 spatial dims "
            f"and a weight of the same rank, got {tuple(input.shape)} and {tuple(weight.shape)}"
        )
    if transposed:
        fn = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)


# ---- the *_copy functions: the view op, then its values in a new contiguous tensor -------------
def _copy_of(view_name, many=False):
    def fn(input, *args, out=None, **kwargs):  # (out=: ops/outarg's wrapper writes it)
        got = input if view_name == "alias" else getattr(input, view_name)(*args, **kwargs)
        if many:
            return tuple(t.clone() for t in got)
        return got.clone()

    fn.__name__ = f"{view_name}_copy"
    fn.__qualname__ = fn.__name__
    fn.__doc__ = f"`{view_name}`'s values as a new contiguous tensor (torch.{view_name}_copy)."
    return fn


_VIEWS = ("alias", "as_strided", "detach", "diagonal", "expand", "permute", "select", "squeeze",
          "t", "transpose", "unfold", "unsqueeze", "view")  # fmt: skip
_MANY = ("split", "split_with_sizes", "unbind")

_copies = {f"{v}_copy": _copy_of(v) for v in _VIEWS}
_copies.update({f"{v}_copy": _copy_of(v, many=True) for v in _MANY})


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """input[start:end:step] along `dim` as a new contiguous tensor (torch.slice_copy)."""
    index = [slice(None)] * input.ndim
    index[dim] = slice(start, end, step)
    return input[tuple(index)].clone()


# ---- removed in torch 1.9: torch's own errors ------------------------------------------------
_REMOVED = {
    "solve": "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` "
    "has its arguments reversed and does not return the LU factorization.",
    "lstsq": "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`. `torch.linalg.lstsq` "
    "has reversed arguments and does not return the QR decomposition in the returned tuple.",
    "eig": "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather "
    "than real tensors mimicking complex tensors.",
    "symeig": "The default behavior has changed from using the upper triangular portion of the "
    "matrix by default to using the lower triangular portion: use `torch.linalg.eigh`.",
    "matrix_rank": "Please use the `torch.linalg.matrix_rank` function instead. The parameter "
    "'symmetric' was renamed in `torch.linalg.matrix_rank()` to 'hermitian'.",
}


def _removed(name):
    def fn(*args, **kwargs):
        raise RuntimeError(
            "pyrite: This function was deprecated since version 1.9 and is now removed. "
            + _REMOVED[name]
        )

    fn.__name__ = name
    fn.__qualname__ = name
    return fn


_removed_fns = {name: _removed(name) for name in _REMOVED}

globals().update(_copies)
globals().update(_removed_fns)

__all__ = [
    "typename",
    "get_device",
    "chain_matmul",
    "frobenius_norm",
    "nuclear_norm",
    "triangular_solve",
    "lu_solve",
    "convolution",
    "slice_copy",
    *_copies,
    *_removed_fns,
]

METHODS = {
    "triangular_solve": triangular_solve,
    "lu_solve": lu_solve,
    **{name: fn for name, fn in _removed_fns.items() if name != "matrix_rank"},
}
