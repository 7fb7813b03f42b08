"""PyTorch's `out=` for every exported function: `pr.add(a, b, out=c)`, `pr.sum(x, 1, out=s)`,
`pr.max(x, 0, out=(values, indices))`, `pr.zeros(3, out=z)`.

One rule for all of them, as torch's: the op runs as without `out`, then its result is written
into `out` and `out` is returned (a tuple of results into a tuple of tensors). The result's dtype
must cast to out's without a category drop ("result type Float can't be cast to the desired
output type Int", a TypeError here), except where torch takes the op's dtype= from out (the
creation functions, sum, prod, cumsum, cumprod: _OUT_DTYPE); an `out` of another shape is
resized to the result's, with torch's UserWarning when it held elements (a view cannot be
resized: it is refused). Writing costs one copy of the result; ops/__init__.py wraps every
exported function once, at import (`with_out`), so no op ignores an `out=` it was given.
"""

from __future__ import annotations

import functools

from pyrite.errors import DtypeError
from pyrite.errors import warn as _warn

from ..autograd import no_grad as _no_grad
from ..tensor import Tensor
from .overlap import check_overlap, tensors_in


def _write(out, res, name):
    if not isinstance(out, Tensor) or not isinstance(res, Tensor):
        raise TypeError(f"pyrite: {name}(): out must be a Tensor, got {type(out).__name__}")
    if "bifc".index(res.dtype.kind) > "bifc".index(out.dtype.kind):  # bool < int < float < complex
        raise DtypeError(
            f"pyrite: {name}(): result type {res.dtype!r} can't be cast to the desired output "
            f"type {out.dtype!r}"
        )
    if tuple(out._shape) != tuple(res._shape):
        _resize(out, tuple(res._shape), name)
    if out._storage is res._storage and out._offset == res._offset and out._strides == res._strides:
        return out  # the op already wrote here (pr.add(x, y, out=x) through an in-place path)
    out.copy_(res)
    return out


def _resize(out: Tensor, shape, name):
    from .core import empty

    if out._base is not None:
        raise RuntimeError(
            f"pyrite: {name}(): out is a view of shape {tuple(out._shape)}; it cannot be "
            f"resized to the result's {shape}"
        )
    if out.numel():
        _warn(
            f"An output with one or more elements was resized since it had shape "
            f"{list(out._shape)}, which does not match the required output shape {list(shape)}. "
            "This behavior is deprecated, and in a future PyTorch release outputs will not be "
            "resized unless they have zero elements. You can explicitly reuse an out tensor t "
            "by resizing it, inplace, to zero elements with t.resize_(0).",
            UserWarning,
            stacklevel=4,
        )
    if out.dtype.kind == "c":  # (a complex tensor's storage: float32 pairs)
        from .. import dtypes as D
        from .complex import _C

        with _no_grad():
            t = _C(empty((*shape, 2), D.float32))
    else:
        t = empty(shape, out.dtype)
    out._storage, out._shape, out._strides, out._offset = t._storage, t._shape, t._strides, 0


_WRAPPED: dict = {}  # id(fn) -> (fn, wrapper): one wrapper per function (pr.special.erfinv is pr.erfinv)


def with_out(fn, name):
    """fn with torch's out= handled as the module docstring says."""
    if not callable(fn) or isinstance(fn, type) or getattr(fn, "_pyrite_out", False):
        return fn
    hit = _WRAPPED.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not kwargs:
            return fn(*args)
        out = kwargs.pop("out", None)
        if out is None:
            return fn(*args, **kwargs)
        if kwargs.get("dtype") is None and isinstance(out, Tensor) and name in _OUT_DTYPE:
            kwargs["dtype"] = out.dtype  # pr.zeros(3, out=z) makes z's dtype, as torch
        if name not in _OVERLAP_UNCHECKED:
            _check_overlap(out, args, kwargs, full_ok=name not in _NO_FULL_OVERLAP)
        res = fn(*args, **kwargs)
        if name in _OUT_EXACT:
            _check_exact(out, res, name)
        if isinstance(out, (tuple, list)):
            if not isinstance(res, tuple) or len(res) != len(out):
                raise TypeError(
                    f"pyrite: {name}(): out must be a tensor, got a {type(out).__name__}"
                )
            written = [_write(o, r, name) for o, r in zip(out, res)]
            return type(res)(*written) if hasattr(res, "_fields") else type(res)(written)
        return _write(out, res, name)

    wrapper._pyrite_out = True
    _WRAPPED[id(fn)] = (fn, wrapper)
    return wrapper


def _check_exact(out, res, name):
    """torch's refusal of an out= whose dtype is not the result's own, for _OUT_EXACT."""
    from .. import dtypes as D
    from ..errors import DtypeError

    outs, ress = (out, res) if isinstance(out, (tuple, list)) else ((out,), (res,))
    for i, (o, r) in enumerate(zip(outs, ress)):
        if not isinstance(o, Tensor) or not isinstance(r, Tensor):
            continue  # (_write names the wrong type)
        want = D.int64 if i else r.dtype  # (a values, indices pair: indices are long)
        if o.dtype is not want:
            raise DtypeError(
                f"pyrite: {name}(): expected out tensor to have dtype {want!r}, but got "
                f"{o.dtype!r} instead (torch takes no other dtype here, not even a wider float)"
            )


def _check_overlap(out, args, kwargs, full_ok=True):
    """torch's refusal of an out= that partially overlaps an input (`pr.add(x[:4], 1,
    out=x[1:5])`), before the op runs; `out=x` for an input x itself is allowed, except where
    `full_ok` is False (_NO_FULL_OVERLAP)."""
    inputs = tensors_in(args, kwargs)
    if not inputs:
        return
    for o in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(o, Tensor):
            check_overlap(o, inputs, full_ok)


# out= functions torch refuses even when out is one of the inputs itself (its cat checks
# assert_no_overlap against every input: `torch.cat([a, b], out=a)` raises)
_NO_FULL_OVERLAP = set("cat concat concatenate hstack vstack dstack column_stack row_stack".split())


# out= functions torch writes without an overlap check (reductions, matmuls, softmax, tril:
# measured against torch 2.13 CPU: `torch.sum(x, 0, out=x[1:4])` runs, and reads elements it
# has already written); pyrite computes them first and copies, so their result is the one an
# out= of fresh memory would hold
_OVERLAP_UNCHECKED = set(
    "sum mean prod nansum nanmean amax amin argmax argmin all any std var norm logsumexp "
    "median nanmedian count_nonzero softmax log_softmax tril triu matmul mm bmm addmm addbmm "
    "baddbmm mv dot vdot inner einsum tensordot diag histc cummax cummin narrow_copy".split()
)


# creation functions whose dtype defaults to out's (torch.zeros(3, out=int_tensor) is int)
_CREATION = {"zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint", "range"}  # fmt: skip
# and the sums, products and scans whose dtype= does (torch 2.13's out= variants take their
# dtype from out: torch.cumsum(x, 1, out=int_tensor) scans x cast to int, and out=float16
# scans x rounded to float16 first, where the result-then-cast rule refused the first and
# rounded only the result)
_OUT_DTYPE = _CREATION | {"sum", "prod", "cumsum", "cumprod"}

# out= functions whose out must have the result's own dtype, where the rest cast into any of
# the same or a higher category: torch 2.13 refuses `torch.amax(x32, 0, out=x16)` ("Expected
# the dtype for input and out to match") and cummax/cummin/logcumsumexp's ("expected
# scalar_type Float but found Half"; cummax's indices must be long), a RuntimeError
_OUT_EXACT = {"amax", "amin", "cummax", "cummin", "logcumsumexp"}


# functions torch gives out= whose pyrite signature lacks it (the rest advertise `out`)
_ADD_OUT = set(
    "sum mean prod nansum nanmean max min amax amin aminmax argmax argmin all any std var "
    "norm logsumexp cumsum cumprod cummax cummin logcumsumexp mode where index_select gather "
    "masked_select nonzero take diag tril triu kron narrow_copy round zeros ones full empty "
    "arange range linspace logspace eye rand randn randint randperm normal "
    # (torch's out= on these too: a ported script's pr.softmax(x, -1, out=buf) raised)
    "softmax log_softmax pow addcmul addcdiv lerp nan_to_num logical_not diff histc "
    "multinomial bernoulli argsort clone count_nonzero "
    # (torch 2.13's out= on these too: scatters and index writes out of place)
    "msort take_along_dim scatter scatter_add scatter_reduce index_add index_copy "
    "index_reduce".split()
)


def _takes_out(fn) -> bool:
    import inspect

    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def wrap_all(functions: dict) -> dict:
    """Wrap the functions that take out= (in torch): those whose signature has `out` (which
    their bodies may ignore) and those in _ADD_OUT; the rest stay the same objects (pr.conv3d
    is F.conv3d)."""
    return {
        name: with_out(fn, name) if name in _ADD_OUT or _takes_out(fn) else fn
        for name, fn in functions.items()
    }
