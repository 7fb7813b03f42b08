"""What each op does with complex64 arguments: IMPLS[op name] (ops/complex.py's guard calls
`IMPLS[name](the wrapped op, *args, **kwargs)`), each a composition of real ops on the real
views (`_R`, `_C`), so autograd records every piece; PASS lists the ops that take complex
tensors as they are (metadata, host copies)."""

from __future__ import annotations

import math
import warnings

from .. import autograd
from .. import dtypes as D
from ..errors import DtypeError
from ..tensor import Tensor
from .complex import (
    _C,
    _PYCOMPLEX,
    _R,
    C64,
    ComplexError,
    _const,
    _float,
    _imag,
    _is_c,
    _pair,
    _real,
    _real_view,
    _refuse_grad,
    _swap,
    as_complex,
    unsupported,
)


# ---- arithmetic --------------------------------------------------------------------------------
def _check_alpha_kw(name, kw):
    extra = set(kw) - {"alpha", "out"}
    if extra:
        raise unsupported(f"{name}({', '.join(sorted(extra))}=...)")
    if kw.get("out") is not None:
        raise unsupported(f"{name}(out=...)")


def _add(a, b, alpha=1):
    if alpha != 1:
        b = _mul(b, alpha)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return as_complex(_PYCOMPLEX(a) + _PYCOMPLEX(b))
    return _C(_pair(a) + _pair(b))


def _sub(a, b, alpha=1):
    if alpha != 1:
        b = _mul(b, alpha)
    if not isinstance(a, Tensor):
        return _add(_neg(b), a)
    return _C(_pair(a) - _pair(b))


def _mul(a, b):
    if not isinstance(a, Tensor):
        a, b = b, a
    if not isinstance(b, Tensor):  # tensor * scalar
        c = _PYCOMPLEX(b)
        if not _is_c(a):  # real tensor * complex scalar: (x c.re, x c.im)
            return _C(_float(a).unsqueeze(-1) * _const([c.real, c.imag]))
        p = _R(a)
        if c.imag == 0:
            return _C(p * c.real)
        # (a + ib)(cr + i ci) = (a cr - b ci) + i(a ci + b cr)
        return _C(p * c.real + _swap(p) * _const([-c.imag, c.imag]))
    if not _is_c(a):
        a, b = b, a
    p = _R(a)
    if not _is_c(b):  # complex * real tensor
        return _C(p * _float(b).unsqueeze(-1))
    q = _R(b)
    # (a + ib)(c + id) = (ac - bd) + i(ad + bc): p*c + swap(p)*(-d, d)
    return _C(p * q[..., :1] + _swap(p) * (q[..., 1:] * _const([-1.0, 1.0])))


def _conj_pairs(p):
    return p * _const([1.0, -1.0])


def _div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise unsupported(f"div(rounding_mode={rounding_mode!r})")
    if not isinstance(b, Tensor):
        c = _PYCOMPLEX(b)
        if c.imag == 0:
            return _C(_pair(a) / c.real) if isinstance(a, Tensor) else as_complex(a / c.real)
        return _mul(a, 1 / c)
    if not _is_c(b):  # complex / real tensor
        return _C(_pair(a) / _float(b).unsqueeze(-1))
    from .complex_math import div

    return div(as_complex(a), b)  # (Smith's scaling, as torch's CPU division)


def _neg(z):
    return _C(-_R(z))


def _conj(z):
    """A new tensor (pyrite conjugates eagerly; torch's conj is a lazy view)."""
    if not _is_c(z):
        return z
    return _C(_conj_pairs(_R(z)))


def _abs(z):
    """|z|, scaled so no square overflows; gradient z/|z| (0 at z = 0), torch's."""
    from .complex_math import abs_

    return abs_(z)


def _angle(z):
    from .elementwise import atan2

    p = _R(z)
    return atan2(p[..., 1], p[..., 0])


def _square(z):
    return _mul(z, z)


def _sgn(z):
    from .elementwise import where

    p = _R(z)
    r = _abs(z).unsqueeze(-1)
    return _C(where(r == 0, p * 0.0, p / r))


def _matmul(a, b):
    """(A + iB)(C + iD) = (AC - BD) + i(AD + BC): four real products."""
    from .combine import stack

    a, b = as_complex(a), as_complex(b)
    p, q = _R(a), _R(b)
    ar, ai, br, bi = p[..., 0], p[..., 1], q[..., 0], q[..., 1]
    return _C(stack([ar @ br - ai @ bi, ar @ bi + ai @ br], -1))


def _reduction(which):
    def reduce(z, dim=None, keepdim=False, *, dtype=None, **kw):
        if kw.get("out") is not None or set(kw) - {"out"}:
            raise unsupported(f"{which}({', '.join(sorted(kw))}=...)")
        if dtype is not None and D.from_any(dtype) is not C64:
            raise ComplexError(f"pyrite: {which}() of a complex tensor with dtype={dtype!r}")
        if not _is_c(z):
            return getattr(as_complex(z), which)(dim, keepdim)
        p = _R(z)
        if not z._shape:
            return _C(p.clone())
        if dim is None or (isinstance(dim, (list, tuple)) and not dim):
            dims = list(range(z.ndim))
        elif isinstance(dim, (list, tuple)):
            dims = [z._dim(d) for d in dim]
        else:
            dims = [z._dim(dim)]
        return _C(getattr(p, which)(dim=dims, keepdim=keepdim))

    return reduce


def _eq(a, b):
    return (_pair(a) == _pair(b)).all(-1)


def _ne(a, b):
    return (_pair(a) != _pair(b)).any(-1)


# ---- in place ----------------------------------------------------------------------------------
def _write(name, self, value):
    """self[...] = value (broadcast), self complex (or real from a complex value: the real part,
    as torch with its warning)."""
    _refuse_grad(name, self, value)
    if not _is_c(self):
        if isinstance(value, Tensor) and value.dtype is C64 or isinstance(value, _PYCOMPLEX):
            raise ComplexError(
                f"pyrite: {name}: result type ComplexFloat can't be cast to the desired output "
                f"type {self.dtype.name}"
            )
    with autograd.no_grad():
        _real_view(self).copy_(_pair(value))  # (copy_ broadcasts)
    return self


def _inplace(name, fn):
    def op(self, other, *args, **kwargs):
        return _write(name, self, fn(self, other, *args, **kwargs))

    return op


def _copy_(self, src, non_blocking=False):
    if _is_c(self):
        return _write("copy_", self, src)
    # complex into real: the real part (torch warns so)
    _warn_discard()
    return self.copy_(_real(src))


def _fill_(self, value):
    if isinstance(value, Tensor):
        value = value.item()
    return _write("fill_", self, value)


def _zero_(self):
    return _write("zero_", self, 0.0)


def _warn_discard():
    warnings.warn(
        "Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3
    )


# ---- views and shape ops: the real view's op, with dims counted in complex dims ------------
def _dims(z, dims):
    return [z._dim(d) for d in dims]


def _view(z, *shape, **kw):
    from .views import _shape_arg

    if kw.get("dtype") is not None or (
        len(shape) == 1 and not isinstance(shape[0], (int, list, tuple))
    ):
        raise unsupported("view(dtype)")
    if "size" in kw:
        shape = (kw["size"],)
    return _C(_R(z).view(*_shape_arg(shape), 2))


def _reshape(z, *shape, **kw):
    from .views import _shape_arg

    if "shape" in kw:
        shape = (kw["shape"],)
    return _C(_R(z).reshape(*_shape_arg(shape), 2))


def _permute(z, *dims, **kw):
    if "dims" in kw:
        dims = (kw["dims"],)
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return _C(_R(z).permute(*_dims(z, dims), z.ndim))


def _transpose(z, d0, d1):
    if z.ndim == 0:
        return z
    return _C(_R(z).transpose(z._dim(d0), z._dim(d1)))


def _t(z):
    if z.ndim > 2:
        raise RuntimeError(
            f"pyrite: t() expects a tensor with <= 2 dimensions, but self is {z.ndim}D"
        )
    return z if z.ndim < 2 else _transpose(z, 0, 1)


def _T(z):
    return _permute(z, *range(z.ndim - 1, -1, -1))


def _mT(z):
    if z.ndim < 2:
        raise RuntimeError("pyrite: tensor.mT is only supported on matrices or batches of matrices")
    return _transpose(z, -2, -1)


def _movedim(z, source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    return _C(_R(z).movedim(_dims(z, src), _dims(z, dst)))


def _expand(z, *sizes, **kw):
    from .views import _shape_arg

    if "size" in kw:
        sizes = (kw["size"],)
    return _C(_R(z).expand(*_shape_arg(sizes), 2))


def _squeeze(z, dim=None):
    if dim is None:
        dims = [i for i, d in enumerate(z._shape) if d == 1]
    else:
        dims = _dims(z, dim if isinstance(dim, (list, tuple)) else [dim])
        dims = [i for i in dims if z._shape[i] == 1]
    shape = [d for i, d in enumerate(z._shape) if i not in dims]
    return _reshape(z, *shape)


def _unsqueeze(z, dim):
    n = z.ndim + 1
    if not -n <= dim < n:
        raise IndexError(
            f"pyrite: dimension out of range (expected to be in range of [{-n}, {n - 1}], "
            f"but got {dim})"
        )
    return _C(_R(z).unsqueeze(dim % n))


def _flatten(z, start_dim=0, end_dim=-1):
    if z.ndim == 0:
        return _reshape(z, 1)
    return _C(_R(z).flatten(z._dim(start_dim), z._dim(end_dim)))


def _unflatten(z, dim, sizes):
    return _C(_R(z).unflatten(z._dim(dim), sizes))


def _narrow(z, dim, start, length):
    return _C(_R(z).narrow(z._dim(dim), start, length))


def _select(z, dim, index):
    return _C(_R(z).select(z._dim(dim), index))


def _unbind(z, dim=0):
    return tuple(_C(p) for p in _R(z).unbind(z._dim(dim)))


def _chunk(z, chunks, dim=0):
    return [_C(p) for p in _R(z).chunk(chunks, z._dim(dim))]


def _split(z, split_size_or_sections, dim=0):
    return [_C(p) for p in _R(z).split(split_size_or_sections, z._dim(dim))]


def _diagonal(z, offset=0, dim1=0, dim2=1):
    return _C(_R(z).diagonal(offset, z._dim(dim1), z._dim(dim2)).movedim(-2, -1))


def _flip(z, *dims, **kw):
    if "dims" in kw:
        dims = (kw["dims"],)
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return _C(_R(z).flip(_dims(z, dims)))


def _roll(z, shifts, dims=None):
    if dims is None:
        return _reshape(_roll(_reshape(z, -1), shifts, 0), *z._shape)
    single = isinstance(dims, int)
    dims = _dims(z, [dims] if single else dims)
    return _C(_R(z).roll(shifts, dims[0] if single else dims))


def _repeat(z, *sizes):
    from .views import _shape_arg

    return _C(_R(z).repeat(*_shape_arg(sizes), 1))


def _join(which):
    def join(tensors, dim=0, **kw):
        if kw.get("out") is not None:
            raise unsupported(f"{which}(out=...)")
        from . import combine

        zs = [as_complex(t) for t in tensors]
        n = zs[0].ndim + (which == "stack")
        if not -n <= dim < n:
            raise IndexError(
                f"pyrite: dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                f"but got {dim})"
            )
        return _C(getattr(combine, which)([_R(z) for z in zs], dim % n))

    return join


def _index(z, index):
    """index for z's real view: a trailing `:` after an Ellipsis, so it keeps binding the
    complex dims (without one, the real view's extra last dim is left whole anyway)."""
    if isinstance(index, tuple) and any(i is Ellipsis for i in index):
        return (*index, slice(None))
    return index


def _getitem(z, index):
    return _C(_R(z)[_index(z, index)])


def _setitem(z, index, value):
    _refuse_grad("__setitem__", z, value)
    with autograd.no_grad():
        _real_view(z)[_index(z, index)] = _pair(value)


def _contiguous(z, memory_format=None):
    return z if z.is_contiguous() else _C(_R(z).contiguous())


def _clone(z, *, memory_format=None):
    return _C(_R(z).clone())


# ---- dtype conversions -------------------------------------------------------------------------
def _target_dtype(args, kwargs):
    dt = kwargs.get("dtype")
    for a in args:
        if isinstance(a, Tensor):
            dt = a.dtype
        elif isinstance(a, D.dtype) or (
            a is not None and not isinstance(a, (str, int)) and "dtype" in type(a).__name__
        ):
            dt = a
        elif isinstance(a, str) and a in D._NAMES:
            dt = a
    return None if dt is None else D.from_any(dt)


def _to_real(z, dt):
    if dt is D.bool_:  # (nonzero: either part; torch warns of no discarded part here)
        return _ne(z, 0)
    _warn_discard()
    return _real(z).to(dt) if dt is not D.float32 else _real(z).clone()


def _to(orig, self, *args, **kwargs):
    dt = _target_dtype(args, kwargs)
    if self.dtype is C64:
        if dt is None or dt is C64:
            return _clone(self) if kwargs.get("copy") else self
        return _to_real(self, dt)
    if dt is not C64:
        return orig(self, *args, **kwargs)
    return as_complex(self)


def _cast_method(dt):
    def cast(orig, self, *args, **kwargs):
        if self.dtype is C64:
            return _to_real(self, dt)
        return orig(self, *args, **kwargs)

    return cast


def _to_dtype(orig, x, dtype):
    return _to(orig, x, dtype)


# ---- factories ---------------------------------------------------------------------------------
def _filled(shape, fill, value=0.0, generator=None):
    """A new complex tensor of `shape`: zeros, ones, a value, or random (randn: each part
    N(0, 1/2) as torch's, so E|z|^2 = 1; rand: each part U[0, 1))."""
    from . import random as rnd
    from .creation import zeros

    if fill == "randn":
        return _C(rnd.randn((*shape, 2), generator=generator) * math.sqrt(0.5))
    if fill == "rand":
        return _C(rnd.rand((*shape, 2), generator=generator))
    p = zeros((*shape, 2), dtype=D.float32)
    c = _PYCOMPLEX(1.0 if fill == "ones" else value.item() if isinstance(value, Tensor) else value)
    if c.real:
        p[..., 0] = c.real
    if c.imag:
        p[..., 1] = c.imag
    return _C(p)


def _real_fill(value, dt):
    """A Python complex fill value for a real dtype `dt`, as torch converts it: its real part
    where its imaginary part is 0, else refused (torch: "value cannot be converted to type
    float without overflow")."""
    if isinstance(value, _PYCOMPLEX):
        if value.imag:
            raise DtypeError(
                f"pyrite: value {value} cannot be converted to type {D.from_any(dt)} without "
                "overflow (a complex fill of a real tensor: its imaginary part must be 0)"
            )
        return value.real
    return value


def _factory(fill):
    """zeros/ones/full/empty/rand/randn with dtype=complex64 (full: or a complex fill value)."""

    def make(orig, *args, **kwargs):
        kwargs = dict(kwargs)
        dt = kwargs.get("dtype")
        if fill == "full" and dt is not None and D.from_any(dt) is not C64:
            # a complex fill value with a real dtype: a real tensor, or refused
            args = list(args)
            if len(args) > 1:
                args[1] = _real_fill(args[1], dt)
            else:
                kwargs["fill_value"] = _real_fill(kwargs["fill_value"], dt)
            return orig(*args, **kwargs)
        rg = kwargs.pop("requires_grad", False)
        kwargs["dtype"] = D.float32
        args = list(args)
        value = 0.0
        if fill == "full":
            if len(args) > 1:
                value, args[1] = args[1], 0.0
            else:
                value, kwargs["fill_value"] = kwargs["fill_value"], 0.0
        shape = orig(*args, **kwargs)._shape  # (the factory's own size parsing)
        out = _filled(shape, fill, value, kwargs.get("generator"))
        if rg:
            out.requires_grad = True
        return out

    return make


def _like(fill):
    def like(orig, input, *args, **kwargs):
        dt = kwargs.get("dtype")
        if dt is None and not _is_c(input):
            dt = input.dtype  # (a complex fill value for a real input: its dtype stays)
        if dt is not None and D.from_any(dt) is not C64:
            # a real tensor shaped like a complex one, or a real one with a complex fill
            if fill == "full":
                args = list(args)
                if args:
                    args[0] = _real_fill(args[0], dt)
                else:
                    kwargs = {**kwargs, "fill_value": _real_fill(kwargs["fill_value"], dt)}
            return orig(_real(input) if _is_c(input) else input, *args, **kwargs)
        value = args[0] if args else kwargs.get("fill_value", 0.0)
        out = _filled(tuple(input._shape), fill, value, kwargs.get("generator"))
        if kwargs.get("requires_grad"):
            out.requires_grad = True
        return out

    return like


# ---- the table ---------------------------------------------------------------------------------
def _plain(fn):
    """An impl that ignores the wrapped op (IMPLS entries take it first)."""

    def impl(orig, *args, **kwargs):
        return fn(*args, **kwargs)

    return impl


def _binary_kw(name, fn, swap=False):
    def impl(orig, a, b, **kw):
        _check_alpha_kw(name, kw)
        if "alpha" in kw:
            return fn(b, a, kw["alpha"]) if swap else fn(a, b, kw["alpha"])
        return fn(b, a) if swap else fn(a, b)

    return impl


def _div_impl(orig, a, b, *, rounding_mode=None, out=None):
    if out is not None:
        raise unsupported("div(out=...)")
    return _div(a, b, rounding_mode)


def _rdiv_impl(orig, a, b):
    return _div(b, a)


def _unary(fn):
    def impl(orig, z, *args, **kw):
        if args or kw.get("out") is not None:
            raise unsupported(orig.__name__)
        return fn(z if _is_c(z) else as_complex(z))

    return impl


def _inplace_impl(name, fn):
    write = _inplace(name, fn)

    def impl(orig, self, other, **kw):
        _check_alpha_kw(name, kw)
        if "alpha" in kw:
            return write(self, other, kw["alpha"])
        return write(self, other)

    return impl


IMPLS: dict = {}
for _n in ("add", "__add__", "__radd__"):
    IMPLS[_n] = _binary_kw(_n, _add)
for _n in ("sub", "subtract", "__sub__"):
    IMPLS[_n] = _binary_kw(_n, _sub)
IMPLS["__rsub__"] = _binary_kw("__rsub__", _sub, swap=True)
IMPLS["rsub"] = _binary_kw("rsub", _sub, swap=True)
for _n in ("mul", "multiply", "__mul__", "__rmul__"):
    IMPLS[_n] = _binary_kw(_n, _mul)
for _n in ("div", "divide", "true_divide", "__truediv__"):
    IMPLS[_n] = _div_impl
IMPLS["__rtruediv__"] = _rdiv_impl
for _n, _f in (("add_", _add), ("__iadd__", _add), ("sub_", _sub), ("__isub__", _sub)):
    IMPLS[_n] = _inplace_impl(_n, _f)
for _n, _f in (("mul_", _mul), ("__imul__", _mul), ("div_", _div), ("__itruediv__", _div)):
    IMPLS[_n] = _inplace_impl(_n, _f)
for _n in ("matmul", "__matmul__", "mm", "bmm"):
    IMPLS[_n] = _plain(_matmul)
IMPLS["__rmatmul__"] = _plain(lambda a, b: _matmul(b, a))
for _n in ("neg", "negative", "__neg__"):
    IMPLS[_n] = _unary(_neg)
for _n in ("conj", "conj_physical"):
    IMPLS[_n] = _unary(_conj)
for _n in ("resolve_conj", "resolve_neg", "__pos__", "positive"):
    IMPLS[_n] = _plain(lambda z: z)
for _n in ("abs", "absolute", "__abs__"):
    IMPLS[_n] = _unary(_abs)
IMPLS["angle"] = _unary(_angle)
IMPLS["square"] = _unary(_square)
IMPLS["sgn"] = _unary(_sgn)
IMPLS["real"] = _plain(_real)
IMPLS["imag"] = _plain(_imag)
IMPLS["sum"] = _plain(_reduction("sum"))
IMPLS["mean"] = _plain(_reduction("mean"))
for _n in ("eq", "__eq__"):
    IMPLS[_n] = _plain(_eq)
for _n in ("ne", "__ne__"):
    IMPLS[_n] = _plain(_ne)
IMPLS["copy_"] = _plain(_copy_)
IMPLS["fill_"] = _plain(_fill_)
IMPLS["zero_"] = _plain(_zero_)
IMPLS["is_complex"] = _plain(lambda z: _is_c(z))
IMPLS["isreal"] = _plain(lambda z: _imag(z) == 0 if _is_c(z) else z == z)
# views and shape ops
IMPLS["view"] = _plain(_view)
IMPLS["reshape"] = _plain(_reshape)
IMPLS["view_as"] = _plain(lambda z, other: _view(z, *other._shape))
IMPLS["reshape_as"] = _plain(lambda z, other: _reshape(z, *other._shape))
IMPLS["contiguous"] = _plain(_contiguous)
IMPLS["clone"] = _plain(_clone)
IMPLS["permute"] = _plain(_permute)
for _n in ("transpose", "swapaxes", "swapdims"):
    IMPLS[_n] = _plain(_transpose)
IMPLS["t"] = _plain(_t)
IMPLS["T"] = _plain(_T)
IMPLS["mT"] = _plain(_mT)
IMPLS["H"] = _plain(lambda z: _conj(_T(z)))
for _n in ("mH", "adjoint"):
    IMPLS[_n] = _plain(lambda z: _conj(_mT(z)))
for _n in ("movedim", "moveaxis"):
    IMPLS[_n] = _plain(_movedim)
IMPLS["expand"] = _plain(_expand)
IMPLS["expand_as"] = _plain(lambda z, other: _expand(z, *other._shape))
IMPLS["broadcast_to"] = _plain(lambda z, shape: _expand(z, *shape))
IMPLS["squeeze"] = _plain(_squeeze)
IMPLS["unsqueeze"] = _plain(_unsqueeze)
IMPLS["flatten"] = _plain(_flatten)
IMPLS["unflatten"] = _plain(_unflatten)
IMPLS["narrow"] = _plain(_narrow)
IMPLS["select"] = _plain(_select)
IMPLS["unbind"] = _plain(_unbind)
IMPLS["chunk"] = _plain(_chunk)
IMPLS["split"] = _plain(_split)
IMPLS["diagonal"] = _plain(_diagonal)
IMPLS["flip"] = _plain(_flip)
IMPLS["roll"] = _plain(_roll)
IMPLS["repeat"] = _plain(_repeat)
for _n in ("cat", "concat", "concatenate"):
    IMPLS[_n] = _plain(_join("cat"))
IMPLS["stack"] = _plain(_join("stack"))
for _n in ("__getitem__", "getitem"):
    IMPLS[_n] = _plain(_getitem)
for _n in ("__setitem__", "setitem"):
    IMPLS[_n] = _plain(_setitem)
# dtype conversions
IMPLS["to"] = _to
IMPLS["to_dtype"] = _to_dtype
IMPLS["float"] = _cast_method(D.float32)
IMPLS["double"] = _cast_method(D.float32)
for _n, _d in (
    ("bool", D.bool_), ("half", D.float16), ("bfloat16", D.bfloat16), ("int", D.int32),
    ("long", D.int32), ("short", D.int16), ("char", D.int8), ("byte", D.uint8),
):  # fmt: skip
    IMPLS[_n] = _cast_method(_d)
# factories
for _n in ("zeros", "ones", "full", "empty", "randn", "rand"):
    IMPLS[_n] = _factory(_n)
for _n in ("zeros_like", "ones_like", "full_like", "empty_like", "randn_like", "rand_like"):
    IMPLS[_n] = _like(_n[: -len("_like")])
# ops that take complex tensors as they are (metadata, host copies of the storage)
PASS = frozenset(
    (
        "tensor", "as_tensor", "asarray", "from_numpy", "is_conj", "is_neg", "is_sparse",
        "is_sparse_csr", "is_quantized", "is_mps", "is_xpu", "is_mkldnn", "is_nested",
        "is_vulkan", "is_xla", "is_ipu", "is_maia", "is_mtia", "is_distributed", "output_nr",
        "name", "data_ptr", "untyped_storage", "get_device", "is_pinned", "is_shared",
        "is_inference", "pin_memory", "share_memory_", "numel", "is_floating_point",
        "is_nonzero", "requires_grad_", "detach", "cpu", "cuda", "type", "dim_order",
        "is_set_to", "nbytes", "element_size", "__reduce_ex__", "__deepcopy__",
    )
)  # fmt: skip

# elementwise functions (ops/complex_math.py) and reductions, comparisons, norms
# (ops/complex_linalg.py)
from . import complex_linalg as _complex_linalg  # noqa: E402
from . import complex_math as _complex_math  # noqa: E402
from . import complex_parts as _complex_parts  # noqa: E402
from . import complex_products as _complex_products  # noqa: E402

_complex_math.register(IMPLS, _unary, _inplace_impl)
_complex_linalg.register(IMPLS)
_complex_products.register(IMPLS)
_complex_parts.register(IMPLS)
from . import complex_select as _complex_select  # noqa: E402

_complex_select.register(IMPLS)
from . import complex_stats as _complex_stats  # noqa: E402

_complex_stats.register(IMPLS)
