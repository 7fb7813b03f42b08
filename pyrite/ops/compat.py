"""PyTorch names a ported script meets that are compositions of existing ops: isin, renorm,
gradient, addr, angle/real/imag/conj (pyrite has real dtypes only), range, the
in-place comparison and logical methods (x.eq_(y), x.logical_and_(y), ...), the remaining
in-place method spellings, the top-level in-place functions (torch.relu_(x), torch.abs_(x),
...), and the host-memory no-ops (pin_memory, share_memory_).
"""

from __future__ import annotations

import builtins
import numbers

from .. import dtypes as D
from ..errors import DtypeError, ShapeError
from ..tensor import Tensor
from .creation import range_
from .elementwise import _is_scalar, as_tensor_arg, binary, result_dtype
from .mathops import inplace_of


def _as_tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    from .creation import tensor

    return tensor(x)


# ---- isin ------------------------------------------------------------------------------------
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element is in test_elements (NaN is in nothing): a sort of the test set and
    one searchsorted, so O((n + m) log m)."""
    from .scatter import gather
    from .sorting import searchsorted, sort

    e, t = _as_tensor(elements), _as_tensor(test_elements)
    if e.dtype.is_bool or t.dtype.is_bool:
        raise DtypeError("pyrite: Unsupported input type encountered for isin(): Bool")
    dt = result_dtype(e, t)
    if dt.is_bool:
        dt = D.int32
    e2, t2 = e.to(dt), t.to(dt).reshape(-1)
    if t2.numel() == 0:
        from .creation import full

        return full(e._shape, bool(invert), dtype=D.bool_)
    s = sort(t2).values  # NaN last
    key = s
    if s.dtype.kind == "f":
        from .elementwise import where

        # searchsorted counts a NaN boundary below every value (torch's rule): search with the
        # trailing NaNs as +inf; a NaN gathered back from s still compares unequal
        key = where(s.isnan(), float("inf"), s)
    idx = searchsorted(key, e2).clamp(max=t2.numel() - 1)
    found = gather(s, 0, idx.reshape(-1)).reshape(e2._shape) == e2
    return ~found if invert else found


# ---- renorm ------------------------------------------------------------------------------------
def renorm(input, p, dim, maxnorm):
    """Each slice input.select(dim, i) whose p-norm exceeds maxnorm scaled to norm maxnorm
    (by maxnorm / (norm + 1e-7), as PyTorch)."""
    from .elementwise import where

    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        raise DtypeError(f"pyrite: renorm: expected a floating-point tensor, got {x.dtype!r}")
    if p <= 0:
        raise RuntimeError(f"pyrite: renorm: non-positive-norm not supported (p={p})")
    if maxnorm < 0:
        raise RuntimeError(f"pyrite: renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if x.ndim <= 1:
        raise RuntimeError(
            f"pyrite: renorm: input needs at least 2 dimensions, got {x.ndim} dimensions"
        )
    d = x._dim(dim)
    others = tuple(i for i in builtins.range(x.ndim) if i != d)
    from .. import autograd

    def pnorm(t):
        return t.abs().pow(p).sum(others, keepdim=True).pow(1.0 / p)

    with autograd.no_grad():
        big = pnorm(x) > maxnorm
    # the norm's gradient is only read where a slice is scaled: the other slices (a zero one's
    # norm has a 0/0 gradient) are replaced by ones before the recorded norm, as torch's rule
    norms = pnorm(where(big, x, 1.0)) if autograd.needs_grad(x) else pnorm(x)
    factor = where(big, maxnorm / (norms + 1e-7), 1.0)
    return (x * factor).to(x.dtype)


def _renorm_(self, p, dim, maxnorm):
    """In place: renorm reads a copy of self's old values when a graph is recorded (its backward
    needs them; copy_ then writes self)."""
    from .. import autograd

    src = self.clone() if autograd.needs_grad(self) else self
    return self.copy_(renorm(src, p, dim, maxnorm))


# ---- gradient ----------------------------------------------------------------------------------
def _spacings(spacing, dims, y):
    """Per dim: a Python float (uniform) or a 1-D coordinates tensor."""
    if spacing is None:
        return [1.0] * len(dims)
    if isinstance(spacing, (numbers.Number, Tensor)) and not (
        isinstance(spacing, Tensor) and spacing.ndim == 1
    ):
        v = spacing.item() if isinstance(spacing, Tensor) else spacing
        return [float(v)] * len(dims)
    sp = list(spacing)
    if len(sp) != len(dims):
        raise RuntimeError(
            f"pyrite: torch.gradient expected spacing to be unspecified, a scalar or a list of "
            f"length equal to the number of dims ({len(dims)}), but got a list of length {len(sp)}"
        )
    out = []
    for s, d in zip(sp, dims):
        if isinstance(s, Tensor) and s.ndim == 1:
            if s._shape[0] != y._shape[d]:
                raise RuntimeError(
                    f"pyrite: torch.gradient expected each tensor to be on the same device "
                    f"and of size {y._shape[d]} along dim {d}, got {s._shape[0]}"
                )
            out.append(s.to(D.float32))
        else:
            out.append(float(s.item() if isinstance(s, Tensor) else s))
    return out


def _shape_along(t: Tensor, d: int, ndim: int):
    shape = [1] * ndim
    shape[d] = t._shape[0]
    return t.reshape(tuple(shape))


def _gradient_1(y: Tensor, d: int, h, edge_order: int) -> Tensor:
    from .combine import cat
    from .views import narrow

    n = y._shape[d]
    if n < edge_order + 1:
        raise RuntimeError(
            f"pyrite: torch.gradient expected each dimension size to be at least "
            f"edge_order+1 (dim {d} has size {n}, edge_order {edge_order})"
        )

    def at(start, length=None):
        return narrow(y, d, start, (n - start) if length is None else length)

    if isinstance(h, float):
        interior = (at(2) - at(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (at(1, 1) - at(0, 1)) / h
            last = (at(n - 1, 1) - at(n - 2, 1)) / h
        else:
            first = (at(0, 1) * -1.5 + at(1, 1) * 2 - at(2, 1) * 0.5) / h
            last = (at(n - 3, 1) * 0.5 - at(n - 2, 1) * 2 + at(n - 1, 1) * 1.5) / h
        return cat([first, interior, last], d)
    x = h  # coordinates (n,)
    dx = x[1:] - x[:-1]  # (n-1,)
    hl, hr = _shape_along(dx[:-1], d, y.ndim), _shape_along(dx[1:], d, y.ndim)
    interior = (hl * hl * at(2) - hr * hr * at(0, n - 2) + (hr * hr - hl * hl) * at(1, n - 2)) / (
        hl * hr * (hl + hr)
    )
    if edge_order == 1:
        first = (at(1, 1) - at(0, 1)) / _shape_along(dx[:1], d, y.ndim)
        last = (at(n - 1, 1) - at(n - 2, 1)) / _shape_along(dx[-1:], d, y.ndim)
    else:
        h1, h2 = _shape_along(dx[:1], d, y.ndim), _shape_along(dx[1:2], d, y.ndim)
        a = -(2 * h1 + h2) / (h1 * (h1 + h2))
        b = (h1 + h2) / (h1 * h2)
        c = -h1 / (h2 * (h1 + h2))
        first = a * at(0, 1) + b * at(1, 1) + c * at(2, 1)
        h1, h2 = _shape_along(dx[-2:-1], d, y.ndim), _shape_along(dx[-1:], d, y.ndim)
        a = h2 / (h1 * (h1 + h2))
        b = -(h2 + h1) / (h1 * h2)
        c = (2 * h2 + h1) / (h2 * (h1 + h2))
        last = a * at(n - 3, 1) + b * at(n - 2, 1) + c * at(n - 1, 1)
    return cat([first, interior, last], d)


def gradient(input, *, spacing=None, dim=None, edge_order=1):
    """Central differences along each dim (one-sided, first or second order, at the edges), as
    numpy.gradient: a tuple of one tensor per dim."""
    y = as_tensor_arg(input)
    if edge_order not in (1, 2):
        raise RuntimeError(
            f"pyrite: torch.gradient only supports edge_order=1 and edge_order=2 (got {edge_order})"
        )
    if y.dtype.kind != "f":
        y = y.to(D.float32)
    if dim is None:
        dims = list(builtins.range(y.ndim))
    elif isinstance(dim, numbers.Integral):
        dims = [y._dim(dim)]
    else:
        dims = [y._dim(d) for d in dim]
    hs = _spacings(spacing, dims, y)
    return tuple(_gradient_1(y, d, h, edge_order) for d, h in zip(dims, hs))


# ---- small linear algebra --------------------------------------------------------------------
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta·input + alpha·outer(vec1, vec2)."""
    v1, v2 = as_tensor_arg(vec1), as_tensor_arg(vec2)
    if v1.ndim != 1 or v2.ndim != 1:
        raise RuntimeError(
            f"pyrite: addr: expected 1-D vectors, got shapes {tuple(v1._shape)} and {tuple(v2._shape)}"
        )
    outer = v1.unsqueeze(1) * v2.unsqueeze(0)  # (n, m)
    if alpha != 1:
        outer = outer * alpha
    if beta == 0:
        shape = as_tensor_arg(input)._shape
        from .core import broadcast_shapes

        if broadcast_shapes(shape, outer._shape) != outer._shape:
            raise ShapeError(
                f"pyrite: addr: input {tuple(shape)} does not broadcast to {tuple(outer._shape)}"
            )
        return outer
    x = as_tensor_arg(input)
    return (x * beta if beta != 1 else x) + outer


# ---- complex-number names on real tensors ----------------------------------------------------
def dist(input, other, p=2):
    """torch.dist: the p-norm of input - other (broadcast), a 0-d tensor."""
    from .linalg_norms import vector_norm

    if isinstance(p, Tensor):
        p = p.item()
    d = _as_tensor(input) - _as_tensor(other)
    return vector_norm(d, float(p))


def angle(input):
    """The argument of a real number: pi for negatives, 0 otherwise (NaN stays NaN)."""
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        x = x.to(D.float32)
    from .core import empty, run_map

    return run_map(
        "select(select(0.0, 3.14159265358979, x0 < 0.0), x0, p_isnan(x0))",
        (x,),
        ("f32",),
        empty(x._shape, x.dtype),
        "f32",
    )


def real(input):
    """input itself (pyrite's tensors are real)."""
    return input


def imag(input):
    raise RuntimeError("pyrite: imag is not implemented for tensors with non-complex dtypes.")


def conj(input):
    """input itself: the conjugate of a real tensor."""
    return input


# ---- from host memory: frombuffer is ops/creation.py's (chunked, bfloat16 kept packed) ---
def _pin_memory(self, device=None):
    return self


def _share_memory_(self):
    return self


def _get_device(self) -> int:
    return 0


# ---- the remaining in-place spellings --------------------------------------------------------
def _inplace_binary(name):
    """x.<name>_(other): the op's result (bool for comparisons) written back, cast to x's dtype."""

    def fn(self, other):
        if not _is_scalar(other):
            other = as_tensor_arg(other)
            if other._shape != self._shape:
                from .core import broadcast_shapes

                if broadcast_shapes(self._shape, other._shape) != self._shape:
                    raise ShapeError(
                        f"pyrite: in-place {name}: shape {tuple(other._shape)} does not broadcast "
                        f"to the tensor's {tuple(self._shape)}"
                    )
        return self.copy_(binary(name, self, other))

    fn.__name__ = f"{name}_"
    return fn


_COMPARE_INPLACE = {
    "eq_": "eq", "ne_": "ne", "lt_": "lt", "le_": "le", "gt_": "gt", "ge_": "ge",
    "greater_": "gt", "greater_equal_": "ge", "less_": "lt", "less_equal_": "le",
    "not_equal_": "ne", "logical_and_": "logical_and", "logical_or_": "logical_or",
    "logical_xor_": "logical_xor",
}  # fmt: skip


def _method_inplace(name):
    def fn(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)

    return fn


def _top_level_inplace(method):
    def fn(input, *args, **kwargs):
        return getattr(input, method)(*args, **kwargs)

    fn.__name__ = method
    fn.__doc__ = f"torch.{method}(x, ...): x.{method}(...), in place."
    return fn


# torch.<name>_(x) for the in-place methods PyTorch also exposes as functions
_TOP_LEVEL_INPLACE = (
    "abs_ acos_ acosh_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ "
    "atanh_ ceil_ clamp_ clamp_max_ clamp_min_ clip_ cos_ cosh_ deg2rad_ erf_ erfc_ exp2_ exp_ "
    "expm1_ fill_ fix_ floor_ frac_ gcd_ i0_ index_put_ lcm_ ldexp_ log10_ log1p_ log2_ log_ "
    "logit_ nan_to_num_ neg_ negative_ rad2deg_ reciprocal_ relu_ round_ rsqrt_ sigmoid_ sin_ "
    "sinc_ sinh_ sqrt_ square_ tan_ tanh_ trunc_ xlogy_"
).split()


def _scan_inplace(fn, name):
    """x.cumsum_(dim, dtype=...): torch 2.13 refuses a dtype other than x's own ("Bad in-place
    call: input tensor dtype c10::Half and output tensor dtype float should match", a
    RuntimeError), where the result-then-cast rule would round an f32 scan back into x."""
    from ..errors import DtypeError

    inner = inplace_of(fn, name)

    def method(self, *args, dtype=None, **kwargs):
        if dtype is not None and D.from_any(dtype) is not self.dtype:
            raise DtypeError(
                f"pyrite: {name}_(): Bad in-place call: input tensor dtype {self.dtype!r} and "
                f"output tensor dtype {D.from_any(dtype)!r} should match"
            )
        return inner(self, *args, dtype=dtype, **kwargs)

    method.__name__ = f"{name}_"
    return method


def _more_inplace_methods():
    """x.<f>_() for ops that have a function but no in-place method yet."""
    from . import elementwise, reduce

    out = {}
    for name in ("asin", "acos", "atan", "arcsin", "arccos", "arctan", "sinh", "cosh", "log10",
                 "neg", "abs", "sign"):  # fmt: skip
        fn = getattr(elementwise, name)
        out[f"{name}_"] = inplace_of(fn, name)
    out["negative_"] = out["neg_"]
    out["absolute_"] = out["abs_"]
    out["sgn_"] = out["sign_"]
    out["fix_"] = inplace_of(elementwise.trunc, "fix")
    out["atan2_"] = out["arctan2_"] = _inplace_binary("atan2")
    out["multiply_"] = _method_inplace("mul_")
    out["subtract_"] = _method_inplace("sub_")
    out["float_power_"] = inplace_of(elementwise.float_power, "float_power")
    out["cumsum_"] = _scan_inplace(reduce.cumsum, "cumsum")
    out["cumprod_"] = _scan_inplace(reduce.cumprod, "cumprod")
    return out


FUNCS = {
    "isin": isin,
    "renorm": renorm,
    "gradient": gradient,
    "addr": addr,
    "dist": dist,
    "angle": angle,
    "real": real,
    "imag": imag,
    "conj": conj,
    "conj_physical": conj,
    "resolve_conj": conj,
    "resolve_neg": conj,
    "range": range_,  # (creation's: native bfloat16, not widened by ops/fallback)
}
FUNCS.update({name: _top_level_inplace(name) for name in _TOP_LEVEL_INPLACE})

globals().update({k: v for k, v in FUNCS.items() if k not in globals()})  # exported by name
__all__ = sorted(FUNCS)

_NOT_METHODS = ("range", "gradient", "isin", "real", "imag")
METHODS = {k: v for k, v in FUNCS.items() if k not in _NOT_METHODS and k not in _TOP_LEVEL_INPLACE}
METHODS["real"] = property(real)  # attributes on PyTorch's Tensor, not methods
METHODS["imag"] = property(imag)
METHODS.update({k: _inplace_binary(v) for k, v in _COMPARE_INPLACE.items()})
METHODS.update(_more_inplace_methods())
METHODS.update(
    {
        "renorm_": _renorm_,
        "addr_": lambda self, vec1, vec2, *, beta=1, alpha=1: self.copy_(
            addr(self, vec1, vec2, beta=beta, alpha=alpha)
        ),
        "pin_memory": _pin_memory,
        "is_pinned": lambda self, device=None: False,
        "share_memory_": _share_memory_,
        "is_shared": lambda self: False,
        "get_device": _get_device,
        "is_inference": lambda self: False,
    }
)


# ---- gradients ------------------------------------------------------------------------------
def _g_angle(ctx, g):
    """A real tensor's angle is piecewise constant: zero gradients (torch)."""
    from .creation import zeros_like

    return (zeros_like(g),)


_g_angle.saves = frozenset()

GRADS = {"angle": _g_angle}
