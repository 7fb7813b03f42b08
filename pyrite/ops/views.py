"""Views: new shape, strides and offset over the same storage, no kernel. Also basic indexing.

Negative strides are allowed (`x[::-1]` is a view here; PyTorch refuses it), so every kernel reads
strides as signed words.
"""

from __future__ import annotations

import math
import numbers
import operator
from functools import lru_cache

import numpy as np

from pyrite.errors import warn as _warn

from .. import dtypes as D
from ..autograd import forwards, plain
from ..errors import ArgumentError, DtypeError, ShapeError
from ..tensor import Tensor, contiguous_strides
from .core import contiguous_copy


def _shape_arg(shape):
    if len(shape) == 1:
        if isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        elif isinstance(shape[0], Tensor):
            shape = tuple(shape[0].tolist())
    if all(type(s) is int for s in shape):  # the common case: no conversions (hot path)
        return tuple(shape)
    try:  # ints, numpy ints, 0-d integer tensors; not floats (torch: TypeError)
        return tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"pyrite: a shape must be a tuple of ints, but got {shape}") from None


def _infer(shape, numel, old_shape):
    if not shape or min(shape) >= 0:  # (nothing to infer, the common case: no generators)
        if math.prod(shape) != numel:
            raise ShapeError(
                f"pyrite: shape {list(shape)} is invalid for input of size {numel} "
                f"(shape {tuple(old_shape)})"
            )
        return shape
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise ShapeError("pyrite: only one dimension can be inferred (-1)")
    if any(s < -1 for s in shape):
        raise ShapeError(f"pyrite: invalid shape dimension in {shape}")
    known = math.prod(s for s in shape if s != -1)
    if neg:
        if known == 0 or numel % known:
            raise ShapeError(
                f"pyrite: shape {list(shape)} is invalid for input of size {numel} "
                f"(shape {tuple(old_shape)})"
            )
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(
            f"pyrite: shape {list(shape)} is invalid for input of size {numel} "
            f"(shape {tuple(old_shape)})"
        )
    return shape


def _view_strides(old_shape, old_strides, new_shape):
    """Strides that read the same elements in `new_shape` without a copy, or None: the walk
    below, kept per layout (a model reshapes the same views every layer and step: BERT-base's
    head splits of its narrowed q, k and v took ~270 bytecodes each)."""
    return _walk_view_strides(tuple(old_shape), tuple(old_strides), tuple(new_shape))


@lru_cache(maxsize=4096)
def _walk_view_strides(old_shape, old_strides, new_shape):
    """Strides that read the same elements in `new_shape` without a copy, or None.

    PyTorch's rule (ATen `computeStride`): walk the old dims from the innermost, in chunks that
    are contiguous among themselves; each chunk must be re-split exactly by a run of new dims.
    """
    if math.prod(old_shape) == 0 or not old_shape:
        return contiguous_strides(new_shape)
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = old_strides[-1]
    tensor_numel = 1
    view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = old_strides[d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)


def _one_form(name, args, kw_name, kw_value):
    """The sizes/dims of a method PyTorch lets one spell x.f(2, 3), x.f((2, 3)) or
    x.f(kw_name=(2, 3)): exactly one of the positional form and the keyword."""
    if kw_value is None:
        return args
    if args:
        raise TypeError(f"pyrite: {name}() got multiple values for argument '{kw_name}'")
    return (kw_value,)


def view(input: Tensor, *shape, size=None, dtype=None) -> Tensor:
    """A view of input with a new shape (one dim may be -1), sharing its storage; as torch,
    `view(*shape)`, `view(shape)`, `view(size=shape)`."""
    x = input
    if dtype is not None and not shape and size is None:
        return view_dtype(x, dtype)
    shape = _one_form("view", shape, "size", size)
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, int, Tensor, np.integer)):
        return view_dtype(x, shape[0])
    shape = _infer(_shape_arg(shape), x.numel(), x._shape)
    strides = _view_strides(x._shape, x._strides, shape)
    if strides is None:
        raise ShapeError(
            f"pyrite: view size {list(shape)} is not compatible with input tensor's "
            f"size {tuple(x._shape)} and stride {x._strides}; use .reshape(...)"
        )
    return x._view(shape, strides, x._offset)


def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """input with a new shape: a view when the strides allow, else a contiguous copy."""
    x = input
    shape = _infer(_shape_arg(_one_form("reshape", args, "shape", shape)), x.numel(), x._shape)
    if shape == x._shape:
        return x._view(x._shape, x._strides, x._offset)
    if x.is_contiguous():  # the common case: the new shape's own strides (no chunk walk)
        return x._view(shape, contiguous_strides(shape), x._offset)
    strides = _view_strides(x._shape, x._strides, shape)
    if strides is None:
        c = contiguous_copy(x)
        return c._view(shape, contiguous_strides(shape), 0)
    return x._view(shape, strides, x._offset)


@forwards  # (other gives a shape only: its requires_grad is not the result's, as torch's)
def view_as(input, other):
    x = input
    return view(x, other._shape)


@forwards  # (other gives a shape only: its requires_grad is not the result's, as torch's)
def reshape_as(input, other):
    x = input
    return reshape(x, other._shape)


def contiguous(input: Tensor, memory_format=None) -> Tensor:
    x = input
    return x if x.is_contiguous() else contiguous_copy(x)


# torch's element sizes (the bytes view(dtype) reinterprets), and numpy's type for those bytes
_BYTES = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "float32": 4,
}
_NP_BITS = {"bool": np.bool_, "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "float16": np.float16, "bfloat16": np.uint16, "int32": np.int32, "float32": np.float32}  # fmt: skip


def view_dtype(x: Tensor, dtype) -> Tensor:
    """x.view(dtype): x's bytes read as `dtype`, as torch (a float32 tensor's bits as int32,
    say). float32 <-> int32 is a true view (both are 32-bit words on the device); every other
    pair is reinterpreted through the host and returns a new tensor, not one sharing x's
    storage, since the device holds uint8/int8/int16/bool widened to 32-bit words."""
    dt = D.from_any(dtype)
    if dt is x.dtype:
        return x._view(x._shape, x._strides, x._offset)
    if {dt.name, x.dtype.name} == {"float32", "int32"}:
        t = Tensor._make(x._storage, x._shape, x._strides, x._offset, dt)
        t._base = x if x._base is None else x._base
        return t
    old, new = _BYTES[x.dtype.name], _BYTES[dt.name]
    if old != new:
        what = f"view {x.dtype.name} as {dt.name} (different element sizes)"
        if x.ndim == 0:
            raise RuntimeError(f"pyrite: self.dim() cannot be 0 to {what}")
        if x._strides[-1] != 1 and x._shape[-1] != 1:
            raise RuntimeError(f"pyrite: self.stride(-1) must be 1 to {what}")
        if x._shape[-1] * old % new:
            raise RuntimeError(
                f"pyrite: self.size(-1) must be divisible by {new // old} to {what}, but got "
                f"{x._shape[-1]}"
            )
    from .creation import from_host

    host = x._host() if x.dtype is not D.bfloat16 else None
    if x.dtype is D.bfloat16:  # its bits, not its values
        host = D.f32_to_bf16_bits(x.float()._host())
    raw = np.ascontiguousarray(host.astype(_NP_BITS[x.dtype.name], copy=False))
    shape = x._shape[:-1] + (x._shape[-1] * old // new,) if x.ndim else ()
    got = raw.view(_NP_BITS[dt.name]).reshape(shape)
    if dt is D.bfloat16:
        return from_host(D.bf16_bits_to_f32(got).reshape(shape), D.bfloat16)
    return from_host(got, dt)


def permute(input: Tensor, *args, dims=None) -> Tensor:
    x = input
    dims = _shape_arg(_one_form("permute", args, "dims", dims))
    if len(dims) != x.ndim:
        raise ShapeError(
            f"pyrite: permute: number of dims {len(dims)} doesn't match the "
            f"tensor's {x.ndim} (shape {tuple(x._shape)})"
        )
    dims = tuple(x._dim(d) for d in dims)
    if len(set(dims)) != len(dims):
        raise ShapeError(f"pyrite: permute: repeated dim in {dims}")
    return x._view(tuple(x._shape[d] for d in dims), tuple(x._strides[d] for d in dims), x._offset)


def transpose(input: Tensor, dim0, dim1) -> Tensor:
    x = input
    d0, d1 = x._dim(dim0), x._dim(dim1)  # a 0-d tensor takes dims -1 and 0
    if x.ndim == 0:
        return x._view((), (), x._offset)
    shape, strides = list(x._shape), list(x._strides)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    strides[d0], strides[d1] = strides[d1], strides[d0]
    return x._view(tuple(shape), tuple(strides), x._offset)


swapdims = transpose


def swapaxes(input: Tensor, axis0, axis1) -> Tensor:
    """transpose, in NumPy's argument names (as torch.swapaxes)."""
    return transpose(input, axis0, axis1)


def t(input: Tensor) -> Tensor:
    x = input
    if x.ndim > 2:
        raise ShapeError(
            f"pyrite: t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D"
        )
    return transpose(x, 0, 1) if x.ndim == 2 else x._view(x._shape, x._strides, x._offset)


def _T(x):
    # torch's deprecation warnings for x.T on other than 2 dims (3-D and up are silent there)
    if x.ndim == 0:
        _warn(
            "Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases.",
            UserWarning,
            stacklevel=2,
        )
        return view(x, ())  # (a recorded alias, as torch's: the result has a grad_fn)
    if x.ndim == 1:
        _warn(
            "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
            "deprecated and it will throw an error in a future release. Consider `x.mT` to "
            "transpose batches of matrices or `x.permute(*torch.arange(x.ndim - 1, -1, -1))` "
            "to reverse the dimensions of a tensor.",
            UserWarning,
            stacklevel=2,
        )
    return permute(x, *range(x.ndim - 1, -1, -1))


def _mT(x):
    if x.ndim == 0:  # torch returns a 0-d tensor as it is (view: recorded, an alias)
        return view(x, ())
    if x.ndim < 2:
        raise ShapeError("pyrite: tensor.mT is only supported on matrices or batches of matrices")
    return transpose(x, -2, -1)


def movedim(input: Tensor, source, destination) -> Tensor:
    x = input
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(
            f"pyrite: movedim: Invalid source or destination dims: source ({src} dims) should "
            f"contain the same number of dims as destination ({dst} dims)"
        )
    src = [x._dim(d) for d in src]
    dst = [x._dim(d) for d in dst]
    if x.ndim == 0:  # dims 0 / -1 of a 0-d tensor: nothing to move
        return x._view((), (), x._offset)
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute(x, *order)


moveaxis = movedim


def expand(input: Tensor, *args, size=None) -> Tensor:
    x = input
    sizes = _shape_arg(_one_form("expand", args, "size", size))
    if len(sizes) < x.ndim:
        raise ShapeError(
            f"pyrite: expand: the number of sizes provided ({len(sizes)}) must be "
            f"greater or equal to the number of dimensions ({x.ndim})"
        )
    lead = len(sizes) - x.ndim
    shape, strides = [], []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ShapeError(f"pyrite: expand: -1 not allowed in a new leading dim {sizes}")
            shape.append(s)
            strides.append(0)
            continue
        d, st = x._shape[i - lead], x._strides[i - lead]
        if s == -1 or s == d:
            shape.append(d)
            strides.append(st)
        elif d == 1:
            shape.append(s)
            strides.append(0)
        else:
            raise ShapeError(
                f"pyrite: expand: the expanded size of the tensor ({s}) must match "
                f"the existing size ({d}) at non-singleton dimension {i}; target "
                f"sizes {list(sizes)}, tensor shape {tuple(x._shape)}"
            )
    for i in range(lead - 1, -1, -1) if x.ndim else ():
        if shape[i] == 1:  # a new dim of size 1: torch's stride (ATen inferExpandGeometry), so
            # x[:, :] = x[0] of a (1, n) x is the same data, no partial overlap, as in torch
            strides[i] = shape[i + 1] * strides[i + 1]
    return x._view(tuple(shape), tuple(strides), x._offset)


@forwards  # (other gives a shape only: its requires_grad is not the result's, as torch's)
def expand_as(input, other):
    x = input
    return expand(x, *other._shape)


def broadcast_to(input, shape):
    x = input
    return expand(x, *_shape_arg((shape,)))


def squeeze(input: Tensor, dim=None) -> Tensor:
    x = input
    if dim is None:
        keep = [i for i, d in enumerate(x._shape) if d != 1]
    else:
        listed = [x._dim(d) for d in ((dim,) if isinstance(dim, int) else dim)]
        dims = set(listed)
        if len(dims) != len(listed):
            repeated = next(d for d in listed if listed.count(d) > 1)
            raise RuntimeError(f"pyrite: dim {repeated} appears multiple times in the list of dims")
        keep = [i for i, d in enumerate(x._shape) if not (i in dims and d == 1)]
    return x._view(tuple(x._shape[i] for i in keep), tuple(x._strides[i] for i in keep), x._offset)


def unsqueeze(input: Tensor, dim) -> Tensor:
    x = input
    n = x.ndim + 1
    if not -n <= dim < n:
        raise IndexError(
            f"pyrite: dimension out of range (expected to be in range of "
            f"[{-n}, {n - 1}], but got {dim})"
        )
    dim = dim % n
    shape = list(x._shape)
    strides = list(x._strides)
    inner = strides[dim] * shape[dim] if dim < x.ndim else 1
    shape.insert(dim, 1)
    strides.insert(dim, inner)
    return x._view(tuple(shape), tuple(strides), x._offset)


def flatten(input: Tensor, start_dim=0, end_dim=-1) -> Tensor:
    x = input
    s, e = x._dim(start_dim), x._dim(end_dim)  # a 0-d tensor takes dims -1 and 0
    if x.ndim == 0:
        return reshape(x, 1)
    if s > e:
        raise ShapeError("pyrite: flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:  # nothing to merge: the input itself, as torch's (`autograd.grad(out, x.flatten())`
        return x  # of a 1-D x is x's gradient)
    shape = x._shape[:s] + (math.prod(x._shape[s : e + 1]),) + x._shape[e + 1 :]
    return reshape(x, shape)


def unflatten(input: Tensor, dim, sizes) -> Tensor:
    x = input
    need_dims(x, "unflatten")
    d = x._dim(dim)
    sizes = tuple(sizes)
    inner = _infer(sizes, x._shape[d], (x._shape[d],))
    return reshape(x, x._shape[:d] + inner + x._shape[d + 1 :])


@plain
def need_dims(x: Tensor, name: str):
    """torch's RuntimeError for ops that split or slice a dim of a 0-d tensor."""
    if x.ndim == 0:
        raise RuntimeError(f"pyrite: {name}() expects at least a 1-dimensional tensor")


def narrow(input: Tensor, dim, start, length) -> Tensor:
    x = input
    need_dims(x, "narrow")
    d = x._dim(dim)
    size = x._shape[d]
    if isinstance(start, Tensor):
        if start.ndim or start.dtype.kind != "i":  # (torch: a RuntimeError)
            raise DtypeError(
                f"pyrite: narrow: start must be an 0-dim integral Tensor, got {start.dtype!r} "
                f"of shape {tuple(start._shape)}"
            )
        start = int(start.item())
    if not -size <= start <= size:  # torch: IndexError here, RuntimeError for the length
        raise IndexError(
            f"pyrite: narrow: start out of range (expected to be in range of [{-size}, "
            f"{size}], but got {start})"
        )
    if start < 0:
        start += size
    if length < 0:
        raise RuntimeError("pyrite: narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(
            f"pyrite: narrow: start ({start}) + length ({length}) exceeds "
            f"dimension size ({size}) of dim {dim}"
        )
    shape = list(x._shape)
    shape[d] = length
    return x._view(tuple(shape), x._strides, x._offset + start * x._strides[d])


def wrap_index(i: int, size: int, d: int) -> int:
    """An integer index into a dim of `size` (dim number `d`, for the message), negative
    counting from the end, as 0..size-1; PyTorch's IndexError when out of range."""
    if not -size <= i < size:
        raise IndexError(f"pyrite: index {i} is out of bounds for dimension {d} with size {size}")
    return i % size


def select(input: Tensor, dim, index) -> Tensor:
    x = input
    d = x._dim(dim)
    i = wrap_index(int(index), x._shape[d], d)
    return x._view(
        x._shape[:d] + x._shape[d + 1 :],
        x._strides[:d] + x._strides[d + 1 :],
        x._offset + i * x._strides[d],
    )


def unbind(input: Tensor, dim=0):
    x = input
    d = x._dim(dim)
    return tuple(select(x, d, i) for i in range(x._shape[d]))


def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    x = input
    if any(s < 0 for s in size) or any(s < 0 for s in stride):  # (torch: a RuntimeError)
        raise ArgumentError(
            f"pyrite: as_strided: negative sizes or strides are not supported, got size "
            f"{tuple(size)} and stride {tuple(stride)}"
        )
    offset = x._offset if storage_offset is None else storage_offset
    nbytes = getattr(x._storage, "logical_nbytes", None)
    if nbytes is not None and all(s > 0 for s in size):
        last = offset + sum((n - 1) * st for n, st in zip(size, stride))
        if (last + 1) * x.dtype.itemsize > nbytes:  # (torch: a RuntimeError; would read past)
            raise ArgumentError(
                f"pyrite: as_strided: size {tuple(size)}, stride {tuple(stride)} and storage "
                f"offset {offset} reach element {last}, out of bounds for a storage of "
                f"{nbytes // x.dtype.itemsize} elements"
            )
    return x._view(tuple(size), tuple(stride), offset)


def diagonal(input: Tensor, offset=0, dim1=0, dim2=1) -> Tensor:
    x = input
    d1, d2 = x._dim(dim1), x._dim(dim2)
    if d1 == d2:
        raise RuntimeError(f"pyrite: diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x._shape[d1], x._shape[d2]
    if offset >= 0:
        length = max(0, min(n1, n2 - offset))
        start = offset * x._strides[d2]
    else:
        length = max(0, min(n1 + offset, n2))
        start = -offset * x._strides[d1]
    keep = [i for i in range(x.ndim) if i not in (d1, d2)]
    shape = tuple(x._shape[i] for i in keep) + (length,)
    strides = tuple(x._strides[i] for i in keep) + (x._strides[d1] + x._strides[d2],)
    return x._view(shape, strides, x._offset + (start if length else 0))


# ---- basic indexing ------------------------------------------------------------------------
def _is_advanced(i):
    if isinstance(i, (Tensor, list, np.ndarray)) or isinstance(i, (bool, np.bool_)):
        return not (isinstance(i, Tensor) and i.ndim == 0 and i.dtype.kind == "i")
    return False


def _byte_masks(index):
    """uint8 index tensors (and numpy uint8 arrays) are masks, as in PyTorch, which warns that
    this is deprecated; int8 and int16 tensors are refused as PyTorch refuses them."""
    out = []
    for i in index:
        if isinstance(i, Tensor) and i.dtype.kind == "i" and i.dtype.bits < 32:
            if i.dtype.is_signed:
                raise IndexError(
                    "pyrite: tensors used as indices must be long, int, byte or bool tensors "
                    f"(got {i.dtype!r})"
                )

            _warn(
                "indexing with dtype uint8 is now deprecated, please use a dtype bool instead.",
                UserWarning,
                stacklevel=4,
            )
            i = i != 0
        elif isinstance(i, np.ndarray) and i.dtype == np.uint8:
            i = i != 0
        out.append(i)
    return tuple(out)


def _bool_scalar_tensor(i) -> bool:
    if isinstance(i, Tensor):
        return i.ndim == 0 and i.dtype.is_bool
    return isinstance(i, np.ndarray) and i.ndim == 0 and i.dtype == bool


def _sequence_as_tuple(index) -> bool:
    """torch's (and old numpy's) rule: a list index holding a sequence, tensor, slice, None or
    ... is read as a tuple of indices (x[[[0, 2], [1, 1]]] is x[[0, 2], [1, 1]]; torch warns
    that this is deprecated); a list of ints is one advanced index."""
    if not isinstance(index, list) or len(index) >= 32:
        return False
    return any(
        isinstance(i, (list, tuple, slice, Tensor, np.ndarray)) or i is None or i is Ellipsis
        for i in index
    )


def _normalize(x, index):
    if _sequence_as_tuple(index):
        _warn(
            "Using a non-tuple sequence for multidimensional indexing is deprecated and will "
            "be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 "
            "this will be interpreted as tensor index, x[torch.tensor(seq)], which will result "
            "either in an error or a different result",
            UserWarning,
            stacklevel=3,
        )
        index = tuple(index)
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, (range, tuple)) for i in index):
        # a range or a tuple inside the index is a sequence: one advanced index, as a list
        # (x[range(n), y], x[:, (0, 2)] in torch)
        index = tuple(list(i) if isinstance(i, (range, tuple)) else i for i in index)
    if any(isinstance(i, (Tensor, np.ndarray)) for i in index):
        index = _byte_masks(index)
    n_used = sum(
        1
        for i in index
        if i is not None
        and i is not Ellipsis
        and not (isinstance(i, (bool, np.bool_)))
        and not _bool_scalar_tensor(i)  # x[tensor(True)] adds a dim, as x[True]
    )
    n_used += sum(
        i.ndim - 1 for i in index if isinstance(i, Tensor) and i.dtype.is_bool and i.ndim > 1
    )
    n_used += sum(
        np.ndim(i) - 1
        for i in index
        if isinstance(i, np.ndarray) and i.dtype == bool and i.ndim > 1
    )
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("pyrite: an index can only have a single ellipsis ('...')")
    if n_used > x.ndim:
        raise IndexError(
            f"pyrite: too many indices for tensor of dimension {x.ndim} (got {n_used})"
        )
    if Ellipsis in [i for i in index if not isinstance(i, (Tensor, np.ndarray, list))]:
        k = next(j for j, i in enumerate(index) if i is Ellipsis)
        index = index[:k] + (slice(None),) * (x.ndim - n_used) + index[k + 1 :]
    return index


def basic_index(x: Tensor, index):
    """x[index] for ints, slices, None and Ellipsis: a view."""
    shape, strides = [], []
    offset = x._offset
    d = 0
    for i in index:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        if isinstance(i, slice):
            size = x._shape[d]
            start, stop, step = i.indices(size)
            if step == 0:
                raise ValueError("pyrite: slice step cannot be zero")
            length = len(range(start, stop, step))
            shape.append(length)
            strides.append(x._strides[d] * step)
            if length or (step > 0 and size):
                # (an empty slice keeps torch's offset too: start clamped to [0, size])
                offset += start * x._strides[d]
            d += 1
            continue
        if isinstance(i, Tensor):
            i = i.item()
        if isinstance(i, numbers.Integral):
            offset += wrap_index(i, x._shape[d], d) * x._strides[d]
            d += 1
            continue
        raise IndexError(
            f"pyrite: unsupported index {i!r} of type {type(i).__name__}; use "
            "ints, slices, None, ..., integer or boolean tensors"
        )
    shape.extend(x._shape[d:])
    strides.extend(x._strides[d:])
    return x._view(tuple(shape), tuple(strides), offset)


def getitem(x: Tensor, index):
    # the common case first: plain ints, slices, None and one ... (x[0, 0], x[:, 1:],
    # x[..., :64], x[:, None]): no normalising scan
    if type(index) is int or type(index) is slice:
        if x.ndim:
            return basic_index(x, (index,))
    elif type(index) is tuple:
        used, ellipsis = 0, -1
        for k, i in enumerate(index):
            if type(i) is int or type(i) is slice:
                used += 1
            elif i is Ellipsis and ellipsis < 0:
                ellipsis = k
            elif i is not None:
                break
        else:
            if used <= x.ndim:
                if ellipsis >= 0:
                    fill = (slice(None),) * (x.ndim - used)
                    index = index[:ellipsis] + fill + index[ellipsis + 1 :]
                return basic_index(x, index)
    index = _normalize(x, index)
    if any(_is_advanced(i) for i in index):
        from .indexing import advanced_getitem

        return advanced_getitem(x, index)
    return basic_index(x, index)


def setitem(x: Tensor, index, value):
    if index is False:  # torch's x[False] = v returns at once: v's shape is not checked
        return
    index = _normalize(x, index)
    if any(_is_advanced(i) for i in index):
        from .indexing import advanced_setitem

        advanced_setitem(x, index, value)
        return
    target = basic_index(x, index)
    if not isinstance(value, (Tensor, numbers.Number, np.bool_)):
        from .creation import tensor

        value = tensor(value)  # lists and arrays; copy_ casts to x's dtype
    if isinstance(value, Tensor) and value.ndim > target.ndim:
        # PyTorch drops a value's leading size-1 dims first: a[0] = v of shape (1, N)
        lead = value.ndim - target.ndim
        if all(d == 1 for d in value._shape[:lead]):
            value = value._view(value._shape[lead:], value._strides[lead:], value._offset)
    if target.numel() > 1:
        from .core import check_writable

        check_writable(target)  # torch's copy_: even a scalar into an expanded view raises
    if isinstance(value, Tensor):
        if value._shape != target._shape and value.ndim:
            # torch's copy_to: a value of another shape is expanded to the target's first, so
            # its overlap with the target is too hard to decide and not refused (`x[:, :] = x[0]`:
            # computed as if out of place)
            try:
                value = expand(value, *target._shape)
            except ShapeError:
                pass  # (copy_ raises naming both shapes)
        target.copy_(value)
    else:
        target.fill_(value)  # a number: fill_'s range check, as torch (copy_ of one casts)


__all__ = [
    "as_strided",
    "broadcast_to",
    "diagonal",
    "flatten",
    "moveaxis",
    "movedim",
    "narrow",
    "permute",
    "reshape",
    "select",
    "squeeze",
    "swapaxes",
    "swapdims",
    "t",
    "transpose",
    "unbind",
    "unflatten",
    "unsqueeze",
]

METHODS = {
    "view": view,
    "reshape": reshape,
    "view_as": view_as,
    "reshape_as": reshape_as,
    "contiguous": contiguous,
    "permute": permute,
    "transpose": transpose,
    "swapaxes": swapaxes,
    "swapdims": swapdims,
    "t": t,
    "T": property(_T),
    "mT": property(_mT),
    "H": property(_T),
    "mH": property(_mT),
    "adjoint": _mT,
    "movedim": movedim,
    "moveaxis": movedim,
    "expand": expand,
    "expand_as": expand_as,
    "broadcast_to": broadcast_to,
    "squeeze": squeeze,
    "unsqueeze": unsqueeze,
    "flatten": flatten,
    "unflatten": unflatten,
    "narrow": narrow,
    "select": select,
    "unbind": unbind,
    "as_strided": as_strided,
    "diagonal": diagonal,
    "__getitem__": getitem,
    "__setitem__": setitem,
}


# ---- backward rules (pyrite/autograd.py): a view's gradient is the inverse view of g ----------
from ..autograd import saves as _saves  # noqa: E402


@_saves()
def _g_reshape(ctx, g):
    return (g.reshape(ctx.meta[0][0]),)


@_saves()
def _g_same(ctx, g):
    return (g,)  # expand/broadcast_to: the engine sums g back to the input's shape


def _g_permute(ctx, g):
    # (x.permute() of a 0-d tensor passes no dims at all)
    dims = ctx.args[1:] if len(ctx.args) > 1 else ctx.kwargs.get("dims", ())
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    n = len(ctx.meta[0][0])  # (the input's rank from its metadata: the input is not saved)
    inv = [0] * n
    for i, d in enumerate(dims):
        inv[d % n if n else 0] = i
    return (g.permute(*inv),)


_g_permute.saves = frozenset()


def _ctx_args(ctx, *names):
    """The arguments after the first as called, positional or by keyword (x.narrow(dim=1, ...)):
    the wrapper moves only tensors to positions."""
    a = ctx.args
    return tuple(a[i + 1] if len(a) > i + 1 else ctx.kwargs[n] for i, n in enumerate(names))


def _g_transpose(ctx, g):
    return (g.transpose(*_ctx_args(ctx, "dim0", "dim1")),)


_g_transpose.saves = frozenset()


@_saves()
def _g_t(ctx, g):
    return (g.t(),)


def _g_movedim(ctx, g):
    source, destination = _ctx_args(ctx, "source", "destination")
    return (g.movedim(destination, source),)


_g_movedim.saves = frozenset()


def embed(shape, dtype, index, g):
    """zeros(shape) with g added at x[index] (the gradient of x[index]): basic indices write a
    view, advanced ones scatter-add (repeated indices accumulate)."""
    from .creation import zeros

    gx = zeros(tuple(shape), dtype=dtype)
    norm = _normalize(gx, index)
    if any(_is_advanced(i) for i in norm):
        from .indexing import _plan, _scatter

        if dtype is D.bfloat16:
            # no packed-bf16 scatter kernel (public ops widen in ops/fallback.py; this runs in
            # backward): accumulate in f32 and round once
            return embed(shape, D.float32, index, g.float()).to(dtype)

        _scatter(gx, _plan(gx, norm), g, "sum")
    else:
        basic_index(gx, norm).copy_(g)
    return gx


@_saves(1)  # (the index: a tensor index not listed here is dropped from ctx.args)
def _g_getitem(ctx, g):
    shape, dtype = ctx.meta[0]
    return (embed(shape, dtype, ctx.args[1], g),)


def _g_narrow(ctx, g):
    shape, dtype = ctx.meta[0]
    dim, start, length = _ctx_args(ctx, "dim", "start", "length")
    idx = [slice(None)] * len(shape)
    d = dim % len(shape)
    st = start if isinstance(start, int) else int(start)
    st = st % shape[d] if st < 0 else st
    idx[d] = slice(st, st + length)
    return (embed(shape, dtype, tuple(idx), g),)


_g_narrow.saves = frozenset()


def _g_select(ctx, g):
    shape, dtype = ctx.meta[0]
    dim, index = _ctx_args(ctx, "dim", "index")
    idx = [slice(None)] * len(shape)
    idx[dim % len(shape)] = index
    return (embed(shape, dtype, tuple(idx), g),)


_g_select.saves = frozenset()


def _g_unbind(ctx, gs):
    from .combine import stack
    from .creation import zeros

    shape, dtype = ctx.meta[0]
    dim = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("dim", 0)
    d = dim % len(shape)
    part = tuple(s for i, s in enumerate(shape) if i != d)
    return (stack([zeros(part, dtype=dtype) if x is None else x for x in gs], d),)


_g_unbind.saves = frozenset()


def _g_diagonal(ctx, g):
    from .creation import zeros

    shape, dtype = ctx.meta[0]
    a = ctx.args
    offset = a[1] if len(a) > 1 else ctx.kwargs.get("offset", 0)
    d1 = a[2] if len(a) > 2 else ctx.kwargs.get("dim1", 0)
    d2 = a[3] if len(a) > 3 else ctx.kwargs.get("dim2", 1)
    gx = zeros(tuple(shape), dtype=dtype)
    diagonal(gx, offset, d1, d2).copy_(g)
    return (gx,)


_g_diagonal.saves = frozenset()


def _g_as_strided(ctx, g):
    """Each view element's gradient added into the input element it reads (index_add, so a
    view that reads an element twice, a 0 stride, sums there). The input must be contiguous
    and the view inside its elements (else it raises: torch's general geometry is not done)."""
    from .core import upload
    from .creation import zeros
    from .scatter import index_add

    x = ctx.args[0]
    size, stride = tuple(ctx.args[1]), tuple(ctx.args[2])
    off = ctx.args[3] if len(ctx.args) > 3 else ctx.kwargs.get("storage_offset")
    off = x._offset if off is None else off
    n = x.numel()
    pos = np.full(size, off - x._offset, dtype=np.int64)
    for d, (k, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = k
        pos = pos + (np.arange(k, dtype=np.int64) * st).reshape(shape)
    if not x.is_contiguous() or (pos.size and (pos.min() < 0 or pos.max() >= n)):
        raise NotImplementedError(
            "pyrite: the gradient of as_strided is implemented for a contiguous input and a "
            "view inside its elements"
        )
    idx = upload(np.ascontiguousarray(pos.reshape(-1).astype(np.int32)), D.int32)
    gx = index_add(zeros((n,), dtype=g.dtype), 0, idx, g.reshape(-1))
    return (gx.reshape(x.shape),)


_g_as_strided.saves = frozenset()
_g_as_strided.geometry = frozenset((0,))  # the input's layout only (autograd.Geometry)


def _g_setitem(ctx, g):
    """x[index] = v: x's old value gets g with the written region zeroed; v gets g[index]."""
    x_old, index, value = ctx.args
    gx = gv = None
    if ctx.needs[0]:
        gx = g.clone()
        setitem(gx, index, 0.0)
    if ctx.needs[2]:
        gv = g[index]
    return gx, None, gv


_g_setitem.saves = frozenset((1,))


@_saves(2)
def _g_embed(ctx, g):
    # embed(shape, dtype, index, v) is linear in v: its gradient is g[index] (double backward
    # of indexing ops goes through here)
    return None, None, None, g[ctx.args[2]]


GRADS = {
    "embed": _g_embed,
    "view": _g_reshape,
    "reshape": _g_reshape,
    "flatten": _g_reshape,
    "unflatten": _g_reshape,
    "squeeze": _g_reshape,
    "unsqueeze": _g_reshape,
    "contiguous": _g_same,
    "expand": _g_same,
    "broadcast_to": _g_same,
    "permute": _g_permute,
    "transpose": _g_transpose,
    "swapaxes": _g_transpose,
    "swapdims": _g_transpose,
    "t": _g_t,
    "movedim": _g_movedim,
    "moveaxis": _g_movedim,
    "narrow": _g_narrow,
    "select": _g_select,
    "unbind": _g_unbind,
    "diagonal": _g_diagonal,
    "as_strided": _g_as_strided,
    "getitem": _g_getitem,
    "setitem": _g_setitem,
}

INPLACE = {"setitem"}  # written in place (autograd.install records them as in-place ops)
