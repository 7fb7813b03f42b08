"""Torch names that older or exported code still calls, as compositions of pyrite's ops: the
deprecated
`chain_matmul`, `frobenius_norm`, `nuclear_norm`, `triangular_solve` and `lu_solve`,
`torch.convolution` (the generic entry of the conv functions), `typename`, `get_device`, and
the `*_copy` functions (`permute_copy`, `expand_copy`, ...: the view op's values in a new
contiguous tensor, as torch.export emits them). The functions torch 1.9 removed (`torch.solve`,
`lstsq`, `eig`, `symeig`, `matrix_rank`) raise torch's own error naming their replacement.

Then the function forms of in-place and view methods (`addmv_`, `adjoint`, `conj_physical_`,
`as_strided_`, `resize_as_`), `as_strided_scatter`, `ormqr` (Q of geqrf's reflectors applied
without forming it), and the storage-level methods `Tensor.set_`, `Tensor.storage()` (a
TypedStorage over the tensor's storage), `Tensor.resize` (torch's deprecated reshape) and
`Tensor.as_subclass`.

Last, torch's deprecated scalar-first overloads, which pre-1.5 code (hand-written optimizers:
`exp_avg.add_(1 - beta1, grad)`, `p.data.addcdiv_(-step_size, exp_avg, denom)`) still calls and
torch still runs with a warning: `add`/`sub` (alpha, other) and `addcmul`/`addcdiv` (value,
tensor1, tensor2), as functions and as Tensor methods, in place too (`_install_scalar_first`,
outermost, from ops/__init__.py).
"""

from __future__ import annotations

import collections
import functools
import math
import numbers

from .. import dtypes as D
from ..errors import ShapeError, warn, warn_once
from ..tensor import Tensor
from .misc import as_strided_, resize_as_
from .tensor_attrs import UntypedStorage


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
    from .. import linalg as _LA  # (the recorded solve: its gradient is linalg's)
    from .core import broadcast_shapes

    if A.ndim < 2 or b.ndim < 2:
        raise ShapeError(
            "pyrite: triangular_solve: expected b and A to have at least 2 dimensions, got "
            f"{b.ndim} and {A.ndim}"
        )
    op = A.mT if transpose else A
    x = _LA.solve_triangular(op, b, upper=(upper != bool(transpose)), unitriangular=unitriangular)
    # (torch's cloned_coefficient has the broadcast batch shape of A and b)
    batch = broadcast_shapes(tuple(A.shape[:-2]), tuple(b.shape[:-2]))
    return triangular_solve_result(x, A.expand(*batch, *A.shape[-2:]).clone())


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


# ---- function forms of methods, and more of torch's tensor-level names ------------------------
def addmv_(input, mat, vec, *, beta=1, alpha=1):
    """input = beta·input + alpha·(mat @ vec), in place (torch.addmv_)."""
    return input.addmv_(mat, vec, beta=beta, alpha=alpha)


# (a forwarder, as autograd.forwards marks one: the method carries the bf16 fallback, the guard
# and the rule; widened here first, a bf16 input would reach the method as float32, whose
# product ops/matmul._scaled skips at alpha = 0 where torch's bf16 one gives NaN)
addmv_._pyrite_plain = True


def adjoint(input):
    """The conjugate transpose of the last two dims, a view (torch.adjoint)."""
    if input.ndim < 2:
        raise ShapeError(
            "pyrite: tensor.adjoint() is only supported on matrices or batches of matrices. "
            f"Got {input.ndim}-D tensor."
        )
    return input.adjoint()


def conj_physical_(input):
    """Conjugates in place; a real tensor is its own conjugate (returned as it is)."""
    if input.dtype.kind == "c":
        return input.copy_(input.conj_physical())
    return input


def _check_strided_bounds(size, stride, offset, numel, what):
    if len(size) != len(stride):
        raise RuntimeError(
            f"pyrite: {what}: mismatch in length of strides and shape ({len(stride)} and "
            f"{len(size)})"
        )
    if any(d < 0 for d in size) or any(st < 0 for st in stride) or offset < 0:
        raise RuntimeError(f"pyrite: {what}: negative size, stride or offset ({size}, {stride})")
    if 0 in size:
        return
    last = offset + sum((d - 1) * st for d, st in zip(size, stride))
    if last >= numel:
        raise RuntimeError(
            f"pyrite: setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{offset} are out of bounds for storage of {numel} elements"
        )


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """A contiguous copy of input with `src` written into its as_strided(size, stride,
    storage_offset) view (torch.as_strided_scatter: the offset counts from the copy's start,
    0 when None)."""
    size, stride = tuple(int(d) for d in size), tuple(int(st) for st in stride)
    offset = 0 if storage_offset is None else int(storage_offset)
    _check_strided_bounds(size, stride, offset, input.numel(), "as_strided_scatter")
    if tuple(src.shape) != size:
        raise RuntimeError(
            "pyrite: expected src to have a size equal to the slice of self. src size = "
            f"{list(src.shape)}, slice size = {list(size)}"
        )
    from .creation import arange

    # (a scatter at the view's flat positions, so both inputs get their gradients: an in-place
    # copy_ into an as_strided view of the copy would not be recorded)
    n = input.numel()
    where = arange(n, dtype=D.int64).as_strided(size, stride, offset).reshape(-1)
    out = input.reshape(-1).scatter(0, where, src.reshape(-1).to(input.dtype))
    return out.reshape(input.shape)


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):
    """Q @ other (or Qᵀ, or other @ Q with left=False) for Q = H₀ H₁ ... H_{k-1}, the product of
    geqrf's Householder reflectors Hᵢ = I - tauᵢ vᵢ vᵢᵀ (vᵢ: 1 at row i, input's column i
    below it), applied one by one without forming Q (torch.ormqr, LAPACK's ormqr). Batched;
    differentiable in all three tensors."""
    from .creation import eye

    for name, t in (("input", input), ("other", other)):
        if t.ndim < 2:
            raise RuntimeError(f"pyrite: torch.ormqr: {name} must have at least 2 dimensions.")
    if tau.ndim < 1:
        raise RuntimeError("pyrite: torch.ormqr: tau must have at least 1 dimension.")
    if input.dtype != other.dtype or input.dtype != tau.dtype:
        raise TypeError(
            f"pyrite: torch.ormqr: Expected input, tau and other to have the same dtype, but got "
            f"{input.dtype!r}, {tau.dtype!r} and {other.dtype!r}"
        )
    m, n = input.shape[-2:]
    along = other.shape[-2] if left else other.shape[-1]
    if along != m:
        which = "other.shape[-2]" if left else "other.shape[-1]"
        raise RuntimeError(f"pyrite: torch.ormqr: {which} must be equal to input.shape[-2]")
    k = tau.shape[-1]
    if k != min(m, n):
        raise RuntimeError(
            "pyrite: torch.ormqr: tau.shape[-1] must be equal to min(other.shape[-2], "
            "input.shape[-1])"
        )
    V = input[..., :, :k].tril(-1) + eye(m, k, dtype=input.dtype)  # (*, m, k) the vᵢ
    # Q C = H₀(H₁(...(H_{k-1} C))); Qᵀ C = H_{k-1}(...(H₀ C)); C Q = ((C H₀) H₁)...
    forward = left == bool(transpose)
    C = other
    for i in range(k) if forward else range(k - 1, -1, -1):
        v = V[..., :, i : i + 1]  # (*, m, 1)
        t = tau[..., i : i + 1].unsqueeze(-1)  # (*, 1, 1)
        if left:
            C = C - (v * t) @ (v.mT @ C)
        else:
            C = C - (C @ v) @ (v * t).mT
    return C if C is not other else other.clone()


# ---- storage-level methods ----------------------------------------------------------------------
class TypedStorage:
    """What `Tensor.storage()` returns (torch.TypedStorage, deprecated in torch for
    `untyped_storage()`): the elements under a tensor and all its views, of its dtype.
    `size()` / `len()` count elements, `[i]` and `tolist()` read them back; `nbytes()`,
    `element_size()`, `dtype`, `device`, `data_ptr()` (the storage's identity, as
    UntypedStorage's), `untyped()`. `Tensor.set_` takes one."""

    __slots__ = ("_untyped", "dtype")

    def __init__(self, storage, dtype):
        self._untyped = UntypedStorage(storage, dtype)
        self.dtype = dtype

    def size(self) -> int:
        return self._untyped.nbytes() // self.dtype.itemsize

    __len__ = size

    def nbytes(self) -> int:
        return self._untyped.nbytes()

    def element_size(self) -> int:
        return self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._untyped.data_ptr()

    @property
    def device(self):
        return self._untyped.device

    @property
    def is_cuda(self) -> bool:
        return False

    def untyped(self) -> UntypedStorage:
        return self._untyped

    def _flat(self) -> Tensor:
        return Tensor._make(self._untyped._storage, (self.size(),), (1,), 0, self.dtype)

    def tolist(self) -> list:
        return self._flat().tolist()

    def __getitem__(self, i):
        if not isinstance(i, int):
            raise TypeError(
                f"pyrite: TypedStorage indices must be integers, got {type(i).__name__}"
            )
        return self._flat()[i].item()

    def __eq__(self, other):
        return isinstance(other, TypedStorage) and other._untyped == self._untyped

    def __hash__(self):
        return hash(self._untyped)

    def __repr__(self):
        return (
            f"pyrite.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}"
        )


def storage(self) -> TypedStorage:
    """The tensor's storage, typed (torch's deprecated Tensor.storage())."""
    return TypedStorage(self._storage, self.dtype)


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """Makes self a view of `source`'s memory (torch's Tensor.set_): a tensor's storage, shape,
    strides and offset (or, with storage_offset/size/stride, that window of its storage); a
    TypedStorage or UntypedStorage from a tensor of self's dtype (1-D over all of it unless a
    window is given); no source: an empty tensor. Writes through either are seen by the
    other. A source of another dtype is refused, as torch's."""
    from ..autograd import is_grad_enabled
    from .creation import empty

    if self.requires_grad and self.grad_fn is None and is_grad_enabled():
        raise RuntimeError(
            "pyrite: a leaf Variable that requires grad is being used in an in-place operation."
        )
    if source is None:
        fresh = empty(0, dtype=self.dtype)
        storage, shape, strides, offset = fresh._storage, (0,), (1,), 0
    else:
        if isinstance(source, Tensor):
            dtype, storage = source.dtype, source._storage
        elif isinstance(source, TypedStorage):
            dtype, storage = source.dtype, source._untyped._storage
        elif isinstance(source, UntypedStorage):
            dtype, storage = source._dtype, source._storage
        else:
            raise TypeError(
                "pyrite: set_(): expected a Tensor, TypedStorage or UntypedStorage source, got "
                f"{type(source).__name__}"
            )
        if dtype != self.dtype:
            raise RuntimeError(
                f"pyrite: Could not set tensor of type {self.dtype} to a tensor of type {dtype} "
                "(pyrite's storages hold one dtype's elements)"
            )
        numel = storage.logical_nbytes // dtype.itemsize
        if isinstance(source, Tensor) and size is None:
            shape, strides, offset = source._shape, source._strides, source._offset
        elif size is None:
            shape, strides, offset = (numel - int(storage_offset),), (1,), int(storage_offset)
        else:
            from .creation import _size

            shape = tuple(_size((size,), "set_"))
            if stride is None or len(stride) == 0:
                strides, acc = [], 1
                for d in reversed(shape):
                    strides.append(acc)
                    acc *= max(d, 1)
                strides = tuple(reversed(strides))
            else:
                strides = tuple(int(st) for st in stride)
            offset = int(storage_offset)
        _check_strided_bounds(shape, strides, offset, numel, "set_")
    self._storage, self._shape, self._strides, self._offset = storage, shape, strides, offset
    self._base = None
    return self


def resize(self, *sizes):
    """torch's deprecated non-in-place Tensor.resize: a view of the same number of elements
    in a new shape (torch refuses any other size, as this does)."""
    from .creation import _size

    warn("non-inplace resize is deprecated")
    shape = tuple(_size(sizes, "resize"))
    n, have = math.prod(shape), self.numel()
    if n != have:
        dims = "x".join(str(d) for d in shape)
        raise RuntimeError(
            f"pyrite: requested resize to {dims} ({n} elements in total), but the given tensor "
            f"has a size of {'x'.join(str(d) for d in self.shape)} ({have} elements). "
            "autograd's resize can only change the shape of a given tensor, while preserving "
            "the number of elements. "
        )
    return self.reshape(shape)


def as_subclass(self, cls):
    """The same tensor (same storage, same place in the autograd graph) as an instance of
    `cls`, a subclass of pyrite.Tensor (torch's Tensor.as_subclass). pyrite has no
    __torch_function__: ops on it return plain Tensors."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(
            "pyrite: Creating a Tensor subclass from a class that does not inherit from Tensor "
            "is not possible. Make sure your class inherits from Tensor."
        )
    from ..autograd import is_grad_enabled

    src = self.view_as(self) if (self.requires_grad and is_grad_enabled()) else self.detach()
    t = object.__new__(cls)
    for name in Tensor.__slots__:
        if name != "__weakref__" and hasattr(src, name):
            object.__setattr__(t, name, getattr(src, name))
    return t


# (autograd.plain: no bf16 widening of self, whose storage these alias, and no guard)
for _fn in (storage, set_, as_subclass):
    _fn._pyrite_plain = True
del _fn


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
    "addmv_",
    "adjoint",
    "conj_physical_",
    "as_strided_",
    "as_strided_scatter",
    "resize_as_",
    "ormqr",
    "TypedStorage",
    *_copies,
    *_removed_fns,
]

METHODS = {
    "triangular_solve": triangular_solve,
    "lu_solve": lu_solve,
    "conj_physical_": conj_physical_,
    "as_strided_scatter": as_strided_scatter,
    "ormqr": ormqr,
    "storage": storage,
    "set_": set_,
    "resize": resize,
    "as_subclass": as_subclass,
    **{name: fn for name, fn in _removed_fns.items() if name != "matrix_rank"},
}


# ---- the deprecated scalar-first overloads ---------------------------------------------------
# name -> (keyword the leading scalar becomes, the tensors after it, their names in torch's words)
_SCALAR_FIRST = {
    "add": ("alpha", 1, "Tensor other"),
    "sub": ("alpha", 1, "Tensor other"),
    "addcmul": ("value", 2, "Tensor tensor1, Tensor tensor2"),
    "addcdiv": ("value", 2, "Tensor tensor1, Tensor tensor2"),
}


def _scalar_first(fn, name, method):
    """fn, also taking torch's deprecated `name(self, scalar, tensors...)`: the scalar becomes
    the keyword (alpha or value), with torch's deprecation warning (once: a training loop's
    every call would otherwise pay for it). The wrapper's frame costs every call of these eight
    methods and four functions ~0.4 µs of Python (x.add(x) 8.3 -> 8.7 µs with the recording
    calls stubbed, 2-core development machine, 2026-12-07); the operators (x + y, x += y) do
    not pass through it."""
    key, n, rest = _SCALAR_FIRST[name.rstrip("_")]
    head, tail = ("", "") if method else ("Tensor input, ", ", Tensor out = None")
    message = (
        f"This overload of {name} is deprecated:\n\t{name}({head}Number {key}, {rest}"
        f"{', *' + tail if tail else ''})\nConsider using one of the following signatures "
        f"instead:\n\t{name}({head}{rest}, *, Number {key} = 1{tail})"
    )

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if len(args) == n + 1 and isinstance(args[0], numbers.Number) and key not in kwargs:
            warn_once(("scalar-first", name), message)  # (each overload once a process)
            kwargs[key] = args[0]
            args = args[1:]
        return fn(self, *args, **kwargs)

    return wrapper


def _install_scalar_first(tensor_cls):
    """The overloads on `tensor_cls`'s methods (add, add_, sub, ...), in place."""
    for name in _SCALAR_FIRST:
        for meth in (name, name + "_"):
            setattr(tensor_cls, meth, _scalar_first(getattr(tensor_cls, meth), meth, True))


def _scalar_first_functions(functions: dict) -> dict:
    """`functions` with the overloads on those of _SCALAR_FIRST's names (torch.add(x, 2, y))."""
    return {
        k: _scalar_first(f, k, False) if k in _SCALAR_FIRST else f for k, f in functions.items()
    }
