"""The one place where ops without native bfloat16 or small-integer kernels meet those dtypes.

The strided map (elementwise ops, casts, copies, fills, views' copies, cat/stack/pad...) reads
and writes packed bfloat16 and wraps uint8/int8/int16 on store; so do the GEMV and fast-tile
GEMM kernels for `linear`, `matmul` and `addmm` of bf16 (ops/matmul._bf16_or_widened: those
three ops are not wrapped here, and widen through `_slow` themselves where no such kernel fits:
a bf16 weight read widened costs 5x its bytes at batch 1). Every other kernel family
(reductions, matmul, conv, sort, gather/scatter, row ops, ...) was written for f32/f16/i32/bool.
Instead of teaching each of them, `install` wraps the public functions and Tensor methods of the
op modules that use such kernels (everything but NATIVE_MODULES), once, at import:

- bfloat16: tensor arguments are widened to float32 (one map pass each), the op runs in f32 as
  it would anyway, and its float32 results are narrowed back to bfloat16 (round to nearest even)
  when every floating tensor argument was bfloat16 — so `x.sum()`, `x @ w`, `x.softmax(-1)`
  of bf16 give bf16, as PyTorch's, while bf16 with float32 gives float32 (PyTorch's promotion).
  An in-place op (`x.scatter_(...)`, `x[mask] = v`, `out=`) runs on the widened copy, which is
  then copied back into the bf16 tensor. A `dtype=bfloat16` argument asks for float32 and
  narrows. Cost: the widening pass and a float32 copy (2x the bf16 bytes) per bf16 argument.
- uint8/int8/int16 are i32 words underneath, so those kernels read them unchanged; what they
  compute in i32 and store into a small-int result (`sum(dtype=uint8)`, `scatter_add_`, integer
  matmul) is wrapped to the width afterwards, in place (exact: wrapping commutes with +, −, ×).
  Ops that only move values (sort, gather, max, ...) are listed in MOVERS and skip that pass.

A call with no bf16 or small-int tensor (and no such dtype=) costs one scan of its arguments.
Kernels that still meet packed bf16 refuse it loudly (kernels/common.header), never misread it.
"""

from __future__ import annotations

import functools

from .. import dtypes as D
from ..tensor import Tensor

# modules whose ops are built on the strided map and views only: they handle the new dtypes
# natively and are not wrapped (wrapping them would also break views: x[0] of a bf16 tensor
# must stay a view of it)
NATIVE_MODULES = {
    "elementwise",
    "casts",
    "operators",
    "views",
    "creation",
    "combine",
    "compare",
    "pad",
    "fallback",
    # binary maps and a flag readback only; native so bf16 div(rounding_mode="trunc") can round
    # the quotient to bf16 before truncating, as torch
    "division",
    # complex64 views (ops/complex.py): bf16 is refused there, not widened
    "complex",
}
# module-level functions outside __all__ that native modules call across modules
EXTRA = {"indexing": ("advanced_getitem", "advanced_setitem")}
# functions that write into their first argument although not named like `x.op_()`
INPLACE = {"advanced_setitem"}
# ops whose small-int results only hold copies of input values: no wrap pass needed
MOVERS = {
    "advanced_getitem",
    "amax",
    "amin",
    "aminmax",
    "argsort",
    "cummax",
    "cummin",
    "gather",
    "index_select",
    "kthvalue",
    "masked_select",
    "max",
    "median",
    "min",
    "mode",
    "msort",
    "nanmedian",
    "sort",
    "take",
    "take_along_dim",
    "topk",
    "unique",
    "unique_consecutive",
}
# ops whose float result is not in their inputs' float type: torch's bincount sums any weights
# but float32 ones in float64 (float32 here), bfloat16 ones included
NO_NARROW = {"bincount"}
# ops that want self and their source in one dtype (torch refuses another), with the source's
# position and keyword: widening a bfloat16 argument to float32 would hide a bf16/f32 pair from
# the op's own check, so _slow makes it first, on the arguments as given
SAME_DTYPE_SOURCE = {
    "index_copy": (3, "source"),
    "index_add": (3, "source"),
    "index_reduce": (3, "source"),
    "scatter": (3, "src"),
    "scatter_add": (3, "src"),
    "scatter_reduce": (3, "src"),
    "masked_scatter": (2, "source"),
    "put": (2, "source"),
}
# ops whose every tensor operand torch wants in one dtype (matrix products, convolutions:
# "expected m1 and m2 to have the same dtype"): widening would turn a bf16/f32 pair into a
# float32 product, so _slow refuses the mix first, as the op itself does for f16/f32
SAME_DTYPE_ALL = {
    "mm", "bmm", "mv", "dot", "vdot", "inner", "einsum", "addmv", "baddbmm", "addbmm",
    "conv1d", "conv2d", "conv3d", "heaviside", "grid_sample", "quantile",
    "nanquantile",
}  # fmt: skip
_SPECIAL = frozenset(("bf16", "u8", "i8", "i16"))  # (a set: ~40 ns less a tensor argument)
# ops whose dtype= casts the input element by element before reducing (as torch's; not mean,
# whose dtype= torch CPU applies to the f32 mean only: ops/reduce.py mean)
CAST_FIRST = {"sum", "nansum", "prod", "cumsum", "cumprod"}


def _special(t) -> bool:
    return isinstance(t, Tensor) and t.dtype.storage in _SPECIAL


def _needs(args, kwargs) -> bool:
    for a in args:
        if isinstance(a, Tensor):
            if a.dtype.storage in _SPECIAL:
                return True
        elif type(a) is D.dtype:  # a dtype passed by position (softmax(x, -1, bfloat16))
            if a.storage in _SPECIAL:
                return True
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, Tensor) and b.dtype.storage in _SPECIAL:
                    return True
    if kwargs:
        for k, v in kwargs.items():
            if isinstance(v, Tensor):
                if v.dtype.storage in _SPECIAL:
                    return True
            elif k == "dtype" and v is not None and D.from_any(v).storage in _SPECIAL:
                return True
            elif type(v) in (list, tuple) and any(_special(b) for b in v):
                return True
    return False


def _cast(x: Tensor, dtype) -> Tensor:
    """x in `dtype`, recorded (Tensor.to's rule) when x requires grad with grad mode on: an op
    with no rule of its own (its gradient is that of the ops it is composed of, under the
    autograd guard) then keeps its path from the bf16 input to the bf16 output (unrecorded
    casts cut it: lp_pool2d, pixel_shuffle, max_unpool2d ... of bf16 raised "not implemented"
    at backward). Ops with a rule run this with grad mode off: unrecorded, as before."""
    from .. import autograd

    if x.requires_grad and autograd.is_grad_enabled():
        return x.to(dtype)
    from .casts import to_dtype

    return to_dtype(x, dtype)


def _widen(x, floats):
    if isinstance(x, Tensor):
        if x.dtype.is_floating_point:
            floats.append((x.dtype, not x._shape))
        if x.dtype is D.bfloat16:
            return _cast(x, D.float32)
        return x
    if type(x) in (list, tuple):
        return type(x)(_widen(b, floats) for b in x)
    return x


def _wrap_small_int(t: Tensor):
    """Wrap a small-int tensor's i32 words to its width, in place (the map's store wraps)."""
    from .core import run_map

    run_map("x0", (t,), ("i32",), t, "i32")


def _check_same_dtype(name, args, kwargs):
    if name.rstrip("_") in SAME_DTYPE_ALL:
        operands = [a for a in _tensors(args, {k: v for k, v in kwargs.items() if k != "out"})]
        if len({t.dtype for t in operands}) > 1:
            raise TypeError(
                f"pyrite: {name}(): expected all operands to have the same dtype, but got "
                + ", ".join(repr(t.dtype) for t in operands)
            )
        return
    where = SAME_DTYPE_SOURCE.get(name.rstrip("_"))
    if where is None or not args:
        return
    pos, keyword = where
    self = args[0]
    src = args[pos] if len(args) > pos else kwargs.get(keyword)
    if isinstance(self, Tensor) and isinstance(src, Tensor) and src.dtype is not self.dtype:
        raise TypeError(
            f"pyrite: {name}(): expected self and source to have the same dtype, but got "
            f"(self) {self.dtype!r} and (source) {src.dtype!r}"
        )


def _expanded_bf16_self(args, w_args):
    """An expanded bf16 self (torch's index_fill_ writes one, with a deprecation warning): its
    distinct elements widened and expanded again, so the float32 op writes through the same
    aliases as torch's (or refuses the view as torch does), then (view, widened) to copy back."""
    from .overlap import has_internal_overlap

    self = args[0] if args else None
    if not isinstance(self, Tensor) or self.dtype is not D.bfloat16:
        return None
    if not has_internal_overlap(self):
        return None
    # (the stride-0 dims of size > 1 cut to one element: a view with no aliases)
    key = tuple(
        slice(0, 1) if st == 0 and n > 1 else slice(None)
        for n, st in zip(self._shape, self._strides)
    )
    distinct = self[key]
    wide = _cast(distinct, D.float32)
    w_args[0] = wide.expand(*self._shape)
    return distinct, wide


def _slow(fn, name, inplace, args, kwargs):
    _check_same_dtype(name, args, kwargs)
    floats: list = []
    w_args = [_widen(a, floats) for a in args]
    w_kwargs = {k: _widen(v, floats) for k, v in kwargs.items()}
    # torch's promotion: a 0-d float tensor does not widen dimensioned ones of its category
    # (bf16 tensor / float32 0-d tensor is bf16), so the dimensioned floats decide when any
    dims = [d for d, zero_d in floats if not zero_d] or [d for d, _ in floats]
    narrow = bool(dims) and all(d is D.bfloat16 for d in dims) and name not in NO_NARROW
    asked = kwargs.get("dtype")
    if asked is not None:
        asked = D.from_any(asked)
        narrow = asked is D.bfloat16
        if narrow:
            w_kwargs["dtype"] = D.float32
            x = args[0] if args else None
            if name in CAST_FIRST and isinstance(x, Tensor) and x.dtype.kind == "f":
                # torch's reductions with dtype= round each element to it first (ops/reduce.py
                # _cast_first): sum(dtype=bfloat16) of float32 adds bf16-rounded values
                from .casts import to_dtype

                w_args[0] = to_dtype(to_dtype(x, D.bfloat16), D.float32)
    else:
        # a dtype passed by position (F.softmax passes its dtype on so) decides as dtype= does
        for i, a in enumerate(args):
            if type(a) is D.dtype:
                narrow = a is D.bfloat16
                if narrow:
                    w_args[i] = D.float32
                break
    compact = _expanded_bf16_self(args, w_args) if inplace else None
    res = fn(*w_args, **w_kwargs)
    # in-place: the op wrote into the widened copy of its first argument (or of out=)
    back = {}
    if inplace and args and isinstance(args[0], Tensor):  # (a Parameter / Buffer too)
        self = args[0]
        if compact is not None:
            compact[0].copy_(compact[1])
        elif self.dtype is D.bfloat16:
            self.copy_(w_args[0])
        elif self.dtype.is_small_int:
            _wrap_small_int(self)
        back[id(w_args[0])] = self
    out = kwargs.get("out")
    if isinstance(out, Tensor):
        if out.dtype is D.bfloat16:
            out.copy_(w_kwargs["out"])
        elif out.dtype.is_small_int and name not in MOVERS:
            _wrap_small_int(out)
        back[id(w_kwargs["out"])] = out
    sources = {id(a._storage) for a in _tensors(args, kwargs)}

    def fix(r):
        if not isinstance(r, Tensor):
            return r
        if id(r) in back:
            return back[id(r)]
        if narrow and r.dtype is D.float32:
            return _cast(r, D.bfloat16)
        if r.dtype.is_small_int and name not in MOVERS and id(r._storage) not in sources:
            _wrap_small_int(r)
        return r

    if isinstance(res, Tensor):
        return fix(res)
    if isinstance(res, (tuple, list)) and any(isinstance(r, Tensor) for r in res):
        items = [fix(r) for r in res]
        if type(res) in (tuple, list):
            return type(res)(items)
        return type(res)(*items)  # a named pair (reduce._ReturnType) or a namedtuple
    return res


def _tensors(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif type(a) in (list, tuple):
            yield from (b for b in a if isinstance(b, Tensor))


def wrap(fn, name: str, inplace: bool):
    """`fn` made safe for bf16 and small-int arguments (see the module docstring)."""
    if getattr(fn, "_pyrite_fallback", False):
        return fn

    @functools.wraps(fn)
    def op(*args, **kwargs):
        if not _needs(args, kwargs):
            return fn(*args, **kwargs)
        return _slow(fn, name, inplace, args, kwargs)

    op._pyrite_fallback = True
    op._pyrite_fallback_of = fn  # (ops/complex._wrap calls it directly on an ordinary call)
    return op


def _is_inplace(name: str) -> bool:
    # x.add_(...), and the augmented assignments (__ifloordiv__: x //= y must write x)
    return (
        name in INPLACE
        or (name.endswith("_") and not name.startswith("__"))
        or (
            name.startswith("__i")
            and name.endswith("__")
            and name not in ("__init__", "__index__", "__int__", "__iter__", "__invert__")
        )
    )


def install(modules, tensor_cls=Tensor):
    """Wrap the ops of every non-native module in `modules`: their module attributes (so that
    calls across modules, looked up at call time, take the wrapped op too) and Tensor methods."""
    import types

    for mod in modules:
        short = mod.__name__.rsplit(".", 1)[-1]
        if short in NATIVE_MODULES:
            continue
        done: dict = {}

        def wrapped(fn, name):
            key = (id(fn), _is_inplace(name))
            if key not in done:
                done[key] = wrap(fn, name, key[1])
            return done[key]

        # every public function the module defines (nn.functional calls some that are not
        # in __all__, matmul.linear say), and the private ones native modules call (EXTRA)
        names = [
            k
            for k, v in vars(mod).items()
            if not k.startswith("_")
            and isinstance(v, types.FunctionType)
            and v.__module__ == mod.__name__
        ]
        for name in (*names, *EXTRA.get(short, ())):
            fn = getattr(mod, name, None)
            if isinstance(fn, types.FunctionType) and not getattr(fn, "_pyrite_plain", False):
                setattr(mod, name, wrapped(fn, name))
        for meth, fn in getattr(mod, "METHODS", {}).items():
            # only where this module's method is the one installed (a later module may have
            # replaced it), and not a plain one (autograd.plain: x.data_ptr() of a bf16 x must
            # see x, not a widened copy)
            if (
                isinstance(fn, types.FunctionType)
                and not getattr(fn, "_pyrite_plain", False)
                and tensor_cls.__dict__.get(meth) is fn
            ):
                setattr(tensor_cls, meth, wrapped(fn, meth))
