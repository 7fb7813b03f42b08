"""torch._foreach_*: an op applied to every tensor of a list (custom optimizers' and EMA
helpers' multi-tensor updates: diffusers' EMAModel(foreach=True), timm's ModelEmaV3, ...).

Each is the ordinary op a tensor, so broadcasting, dtypes and autograd are the op's. The
second operand is a scalar, a list of scalars, a list of tensors, or one tensor, as torch
takes them. Out-of-place forms return a tuple, in-place forms (`_foreach_add_`) the input
list. An empty list raises, as torch's.
"""

from __future__ import annotations

import numbers

from ..tensor import Tensor

_UNARY = (
    "abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p "
    "log2 neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
).split()
_BINARY = ("add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum", "minimum", "pow")
_TERNARY = ("addcmul", "addcdiv", "lerp")


def _list(tensors, name):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(
            f"pyrite: _foreach_{name}: expected a list or tuple of tensors, got "
            f"{type(tensors).__name__}"
        )
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"pyrite: _foreach_{name}: Tensor list must have at least one tensor.")
    return tensors


def _spread(arg, n, name, what="other"):
    """arg for each of n tensors: a list/tuple given one a tensor, else the same arg (a scalar
    or one tensor) for every tensor."""
    if isinstance(arg, (list, tuple)):
        if len(arg) != n:
            kind = "tensors" if arg and isinstance(arg[0], Tensor) else "scalars"
            raise RuntimeError(
                f"pyrite: _foreach_{name}: the tensor list has {n} tensors and the {what} list "
                f"{len(arg)} {kind}; they must have the same length"
            )
        return list(arg)
    return [arg] * n


def _scalars(value, n, name):
    """addcmul/addcdiv's `value`/`scalars`: a scalar, a list of scalars, or a 1-D tensor of
    them (read back once)."""
    if isinstance(value, Tensor):
        value = value.tolist()
        if not isinstance(value, list):
            value = [value] * n
    return _spread(value, n, name, "scalars")


def _binary_one(name, t, o, alpha):
    if name in ("add", "sub"):
        return getattr(t, name)(o) if alpha == 1 else getattr(t, name)(o, alpha=alpha)
    if name == "clamp_min":
        return t.clamp(min=o) if not isinstance(o, Tensor) else t.maximum(o.to(t.dtype))
    if name == "clamp_max":
        return t.clamp(max=o) if not isinstance(o, Tensor) else t.minimum(o.to(t.dtype))
    if name in ("maximum", "minimum") and not isinstance(o, Tensor):
        return t.clamp(min=o) if name == "maximum" else t.clamp(max=o)
    return getattr(t, name)(o)


def _make_unary(op):
    def fn(self):
        return tuple(getattr(t, op)() for t in _list(self, op))

    def fn_(self):
        for t in _list(self, op + "_"):
            getattr(t, op + "_")()
        return self

    fn.__name__, fn_.__name__ = f"_foreach_{op}", f"_foreach_{op}_"
    fn.__doc__ = f"(t.{op}() for t in self), as torch._foreach_{op}."
    fn_.__doc__ = f"t.{op}_() for t in self, in place, as torch._foreach_{op}_."
    return fn, fn_


def _make_binary(op):
    def compute(self, other, alpha, name):
        ts = _list(self, name)
        if alpha != 1 and not isinstance(other, (list, tuple, Tensor)):
            raise TypeError(f"pyrite: _foreach_{name}: alpha is taken only with tensors")
        return ts, [_binary_one(op, t, o, alpha) for t, o in zip(ts, _spread(other, len(ts), name))]

    def fn(self, other, *, alpha=1):
        if op == "pow" and isinstance(self, numbers.Number):  # _foreach_pow(scalar, exponents)
            exps = _list(other, op)
            return tuple(e.new_full((), self).pow(e) if e.dim() == 0 else
                         e.new_full(tuple(e.shape), self).pow(e) for e in exps)  # fmt: skip
        return tuple(compute(self, other, alpha, op)[1])

    def fn_(self, other, *, alpha=1):
        _write_back(*compute(self, other, alpha, op + "_"))
        return self

    return _named(fn, fn_, op, "with a scalar, list or tensors")


def _write_back(ts, outs):
    """An in-place foreach op's results into its tensors."""
    for t, r in zip(ts, outs):
        t.copy_(r)


def _named(fn, fn_, op, what):
    """`fn` and `fn_` named and documented as torch._foreach_{op} and its in-place form."""
    fn.__name__, fn_.__name__ = f"_foreach_{op}", f"_foreach_{op}_"
    fn.__doc__ = f"torch._foreach_{op}: {op} of each tensor {what}."
    fn_.__doc__ = f"torch._foreach_{op}_: in place."
    return fn, fn_


def _ternary_values(op, self, a, b, value):
    ts = _list(self, op)
    n = len(ts)
    a = _spread(a, n, op, "tensor1" if op != "lerp" else "tensors1")
    if op == "lerp":  # lerp(self, end, weight): weight a scalar, list, tensor or tensor list
        ws = b if isinstance(b, (list, tuple)) else [b] * n
        ws = _spread(ws, n, op, "weight")
        return ts, [t.lerp(e, w) for t, e, w in zip(ts, a, ws)]
    b = _spread(b, n, op, "tensor2")
    vs = _scalars(value, n, op)
    return ts, [getattr(t, op)(x, y, value=v) for t, x, y, v in zip(ts, a, b, vs)]


def _make_ternary(op):
    if op == "lerp":

        def fn(self, tensors1, weight):
            return tuple(_ternary_values(op, self, tensors1, weight, None)[1])

        def fn_(self, tensors1, weight):
            _write_back(*_ternary_values(op, self, tensors1, weight, None))
            return self

    else:

        def fn(self, tensor1, tensor2, value=1):
            return tuple(_ternary_values(op, self, tensor1, tensor2, value)[1])

        def fn_(self, tensor1, tensor2, value=1):
            _write_back(*_ternary_values(op, self, tensor1, tensor2, value))
            return self

    return _named(fn, fn_, op, "with two others")


def _foreach_norm(self, ord=2, dtype=None):
    """(linalg.vector_norm(t, ord, dtype=dtype) for t in self), as torch._foreach_norm."""
    from .linalg_norms import vector_norm

    return tuple(vector_norm(t, ord, dtype=dtype) for t in _list(self, "norm"))


def _foreach_powsum(self, ord=2, dtype=None):
    """(Σ|t|^ord for t in self), as torch._foreach_powsum (torch >= 2.12; clip_grad_norm_'s
    foreach path sums these before one root): 0^0 is 1 and inf/NaN follow pow, as torch's.
    `dtype` is the result's dtype (powers and sum run in float32 either way, rounded once);
    integer tensors are refused."""
    if not isinstance(ord, numbers.Number):
        raise TypeError(
            f"pyrite: _foreach_powsum(): argument 'ord' (position 2) must be Number, not "
            f"{type(ord).__name__}"
        )
    out = []
    for t in _list(self, "powsum"):
        if not t.is_floating_point():
            raise TypeError(f"pyrite: _foreach_powsum: not implemented for {t.dtype!r}")
        s = (t.float().abs() ** ord).sum()  # |t|^ord and the sum in f32 (torch's opmath)
        out.append(s.to(dtype if dtype is not None else t.dtype))
    return tuple(out)


def _foreach_max(self):
    """(t.max() for t in self), as torch._foreach_max."""
    return tuple(t.max() for t in _list(self, "max"))


def _foreach_clone(self):
    return tuple(t.clone() for t in _list(self, "clone"))


def _foreach_zero_(self):
    for t in _list(self, "zero_"):
        t.zero_()
    return self


def _foreach_copy_(self, src, non_blocking=False):
    ts = _list(self, "copy_")
    for t, s in zip(ts, _spread(list(src), len(ts), "copy_", "src")):
        t.copy_(s)
    return self


def _foreach_mm(self, mat2):
    ts = _list(self, "mm")
    return tuple(a.mm(b) for a, b in zip(ts, _spread(list(mat2), len(ts), "mm", "mat2")))


_table = {
    "_foreach_norm": _foreach_norm,
    "_foreach_max": _foreach_max,
    "_foreach_powsum": _foreach_powsum,
    "_foreach_clone": _foreach_clone,
    "_foreach_zero_": _foreach_zero_,
    "_foreach_copy_": _foreach_copy_,
    "_foreach_mm": _foreach_mm,
}
for _op in _UNARY:
    _table[f"_foreach_{_op}"], _table[f"_foreach_{_op}_"] = _make_unary(_op)
for _op in _BINARY:
    _table[f"_foreach_{_op}"], _table[f"_foreach_{_op}_"] = _make_binary(_op)
for _op in _TERNARY:
    _table[f"_foreach_{_op}"], _table[f"_foreach_{_op}_"] = _make_ternary(_op)
globals().update(_table)

__all__ = sorted(_table)
