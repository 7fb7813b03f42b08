"""Elementwise math with broadcasting and PyTorch's type promotion, over the strided map kernel:
the unary and binary op tables, `unary`/`binary`/`_ternary`, promotion (`result_dtype`), the
functions in PyTorch's spelling (add, exp, where, clamp, ...), and the Tensor operators
(`+`, `<`, `+=`, ...) and in-place methods (`add_`, `exp_`, ...) built on them.

Each op is a WGSL expression in `A` (and `B`, `C`) written for the compute type (f32 for both
float dtypes, i32, bool). Python scalars travel as info words, never as buffers. Casts and
copies (`to`, `float()`, `clone`, `copy_`, `fill_`) are in ops/casts.py.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as D
from ..autograd import _requires, is_grad_enabled, mark_written, plain
from ..errors import ArgumentError, DtypeError
from ..tensor import Tensor
from . import range_rules
from .core import broadcast_shapes, empty, run_map

# ---- unary ---------------------------------------------------------------------------------
# name: (f32 expression, i32 expression or None to compute in f32, result: same|float|bool)
GELU_CDF_OLD = "0.5 * A * p_erfc(A * -0.70710678118654752)"
UNARY = {
    "neg": ("-A", "-A", "same"),
    "abs": ("abs(A)", "abs(A)", "same"),
    "exp": ("p_expf(A)", None, "float"),  # kernels/mathlib.py: WGSL exp is 3 + 2|x| ULP
    "exp2": ("exp2(A)", None, "float"),
    # kernels/mathlib.py: WGSL log is 2^-21 absolute near 1 and misreads subnormals
    "log": ("p_logf(A)", None, "float"),
    "log2": ("p_log2f(A)", None, "float"),
    "log10": ("p_log10f(A)", None, "float"),
    "log1p": ("p_log1p(A)", None, "float"),
    "expm1": ("p_expm1(A)", None, "float"),
    "sqrt": ("sqrt(A)", None, "float"),
    "rsqrt": ("inverseSqrt(A)", None, "float"),
    "sin": ("p_sinf(A)", None, "float"),  # kernels/mathlib.py: WGSL sin/cos lose all digits at 1e7
    "cos": ("p_cosf(A)", None, "float"),
    "tan": ("p_tanf(A)", None, "float"),  # kernels/mathlib.py: WGSL tan 1e-4 off on the H200
    "asin": ("p_asinf(A)", None, "float"),  # kernels/mathlib.py: WGSL asin 4e-4 off
    "acos": ("p_acosf(A)", None, "float"),
    "atan": ("p_atanf(A)", None, "float"),
    "sinh": ("p_sinhf(A)", None, "float"),
    "cosh": ("p_coshf(A)", None, "float"),
    "tanh": ("p_tanh(A)", None, "float"),
    "sigmoid": ("p_sigmoid(A)", None, "float"),
    # NaN by its bits: NVIDIA's compiler turns a plain select into max(A, 0), which drops NaN
    "relu": ("select(select(A, 0.0, A < 0.0), A, p_isnan(A))", "max(A, 0)", "same"),
    # gelu through the normal CDF and sigmoid: 0.5·x·(1 + erf(x/√2)) cancels to 0 for x < -4
    # (its relative error there was 100 %); 0.5·(1 + tanh(y)) = sigmoid(2y) likewise for the tanh
    # form. The CDF is kernels/common.py's branch-free p_gelu_cdf (GELU_CDF_OLD: the erfc form
    # it replaced, as accurate on 5M points of [-14, 14] but divergent, for the A/B).
    "gelu": ("A * p_gelu_cdf(A)", None, "float"),
    "gelu_tanh": ("A * p_sigmoid(1.5957691216057308 * (A + 0.044715 * A * A * A))", None, "float"),
    "silu": ("A * p_sigmoid(A)", None, "float"),
    "mish": ("A * p_tanh(p_softplus(A, 1.0, 20.0))", None, "float"),
    "erf": ("p_erf(A)", None, "float"),
    "sign": ("p_signf(A)", "sign(A)", "same"),
    "floor": ("floor(A)", "A", "same"),
    "ceil": ("ceil(A)", "A", "same"),
    "round": ("p_round(A)", "A", "same"),
    "trunc": ("trunc(A)", "A", "same"),
    "frac": ("A - trunc(A)", None, "same"),
    "square": ("A * A", "A * A", "same"),
    "reciprocal": ("1.0 / A", None, "float"),
    "isnan": ("p_isnan(A)", "false", "bool"),
    "isinf": ("p_isinf(A)", "false", "bool"),
    "isfinite": ("!(p_isnan(A) || p_isinf(A))", "true", "bool"),
    "logical_not": ("!p_nz(A)", "A == 0", "bool"),
    "bitwise_not": (None, "~A", "same"),
}


# Unary ops PyTorch refuses on bool tensors (neg: RuntimeError; the rest "not implemented for
# 'Bool'"); frac is refused on every integer dtype too
_NO_BOOL = {
    "neg": "pyrite: negation, the `-` operator, on a bool tensor is not supported; to invert a "
    "mask use `~` or logical_not()",
    "relu": "pyrite: Boolean inputs not supported for relu",
    **{
        n: f"pyrite: {n} is not implemented for pyrite.bool"
        for n in ("abs", "floor", "ceil", "round", "trunc", "frac")
    },
}


def _wgsl(expr, names):
    for k, v in names.items():
        expr = expr.replace(k, v)
    return expr


def unary(name: str, x, scalars=(), s_ctypes=(), out=None):
    if _rg(x) and is_grad_enabled():  # recorded for backward (elementwise_grads)
        recorded_unary = _grads().recorded_unary

        return recorded_unary(name, x, scalars, s_ctypes, out)
    pre = None
    if type(x) is not Tensor:  # (a tensor as it is: as_tensor_arg is a wrapped public op)
        x = as_tensor_arg(x)
    if out is not None:  # (unrecorded, as under no_grad: a tensor saved for a backward
        mark_written(out)  # must still see the write, or the backward reads the new values)
        pre = range_rules.capture(out, x)
    fexpr, iexpr, kind = UNARY[name]
    dt = x.dtype
    if dt.is_bool and name in ("logical_not", "bitwise_not"):
        return run_map("!x0", (x,), ("bool",), _out(out, x._shape, D.bool_), "bool")
    if dt.is_bool and name == "sign":  # torch: sign of a bool tensor is itself, a bool
        return run_map("x0", (x,), ("bool",), _out(out, x._shape, D.bool_), "bool")
    if name in _NO_BOOL and dt.is_bool or name == "frac" and dt.kind != "f":
        raise DtypeError(_NO_BOOL.get(name, f"pyrite: {name} is not implemented for {dt!r}"))
    if dt.kind == "f" or iexpr is None:
        if fexpr is None:
            raise DtypeError(f"pyrite: {name} is not defined for {dt!r}")
        ctype, expr = "f32", fexpr
        res = dt if dt.kind == "f" else D.float32
    else:
        ctype, expr = "i32", iexpr
        res = D.int32
    if kind == "same" and dt.kind != "f" and iexpr is not None:
        res = dt if not dt.is_bool else D.int32
    if kind == "bool":
        res = D.bool_
    out_ctype = "bool" if kind == "bool" else ctype
    r = run_map(
        _wgsl(expr, {"A": "x0"}),
        (x,),
        (ctype,),
        _out(out, x._shape, res),
        out_ctype,
        scalars,
        s_ctypes,
    )
    if res.kind == "i":
        range_rules.after_unary(name, x, r, pre)
    return r


# unary as defined here, for this module's own ops (ops/__init__ wraps the public name)
_unary = unary


def _out(out, shape, dtype):
    if out is None:
        return empty(shape, dtype)
    if out._shape != tuple(shape):
        from ..errors import ShapeError

        raise ShapeError(f"pyrite: out has shape {tuple(out._shape)}, the result {tuple(shape)}")
    return out


# ---- binary --------------------------------------------------------------------------------
# name: (f32 expr, i32 expr, bool expr or None, result: promote|float|bool)
BINARY = {
    "add": ("A + B", "A + B", "A || B", "promote"),
    "sub": ("A - B", "A - B", None, "promote"),
    "mul": ("A * B", "A * B", "A && B", "promote"),
    "div": ("p_divf(A, B)", None, None, "float"),
    # float //, % and fmod as PyTorch's CPU computes them, from an exact fmod (kernels/mathlib.py);
    # integer division by zero is refused before these run (ops/division.py)
    "floor_divide": ("p_floordivf(A, B)", "p_floordiv_i(A, B)", None, "promote"),
    "div_trunc": ("trunc(p_divf(A, B))", "A / B", None, "promote"),
    # div(rounding_mode="floor"): floor_divide's kernel under its own name, since torch gives it
    # zero gradients while floor_divide itself has no derivative
    "div_floor": ("p_floordivf(A, B)", "p_floordiv_i(A, B)", None, "promote"),
    "remainder": ("p_remf(A, B)", "p_mod_i(A, B)", None, "promote"),
    "fmod": ("p_fmodf(A, B)", "p_fmod_i(A, B)", None, "promote"),
    "pow": ("p_powf(A, B)", "p_powi(A, B)", None, "promote"),
    "maximum": ("p_maxf(A, B)", "max(A, B)", "A || B", "promote"),
    "minimum": ("p_minf(A, B)", "min(A, B)", "A && B", "promote"),
    "atan2": ("p_atan2f(A, B)", None, None, "float"),
    "eq": ("p_feq(A, B)", "A == B", "A == B", "bool"),
    # !(A == B): lavapipe compiles `!=` on floats as an ordered compare (NaN != x came out false)
    "ne": ("!p_feq(A, B)", "A != B", "A != B", "bool"),
    "lt": ("p_flt(A, B)", "A < B", "!A && B", "bool"),
    "le": ("p_fle(A, B)", "A <= B", "!A || B", "bool"),
    "gt": ("p_flt(B, A)", "A > B", "A && !B", "bool"),
    "ge": ("p_fle(B, A)", "A >= B", "A || !B", "bool"),
    "bitwise_and": (None, "A & B", "A && B", "promote"),
    "bitwise_or": (None, "A | B", "A || B", "promote"),
    "bitwise_xor": (None, "A ^ B", "A != B", "promote"),
    # floats are true by their bits (p_nz): NaN is true, as in PyTorch
    "logical_and": ("p_nz(A) && p_nz(B)", "(A != 0) && (B != 0)", "A && B", "bool"),
    "logical_or": ("p_nz(A) || p_nz(B)", "(A != 0) || (B != 0)", "A || B", "bool"),
    "logical_xor": ("p_nz(A) != p_nz(B)", "(A != 0) != (B != 0)", "A != B", "bool"),
}
_CT = {"f": "f32", "i": "i32", "b": "bool"}


@plain
def as_tensor_arg(x):
    if isinstance(x, Tensor):
        return x
    from .creation import tensor

    return tensor(x)


_SCALARS = (int, float, bool)


def _is_scalar(x):
    t = type(x)
    if t in _SCALARS:
        return True
    if t is Tensor:
        return False  # (a Tensor subclass, Parameter, ends at the isinstance below)
    return isinstance(x, (numbers.Number, np.bool_)) and not isinstance(x, Tensor)


# What a Python operator takes as its other operand, as PyTorch's: tensors, numbers and numpy
# arrays/scalars. For anything else (None, str, list, tuple, ...) the operators return
# NotImplemented, so Python answers as it does for PyTorch: `x == None` is False, `x != "a"`
# True, `x + [1, 2]` and `x < None` raise TypeError. (Functions, pr.add(x, [1, 2]), take lists.)
_OPERAND_TYPES = (Tensor, numbers.Number, np.ndarray, np.generic)


@plain
def is_operand(other) -> bool:
    return type(other) in _SCALARS or isinstance(other, _OPERAND_TYPES)


def result_dtype(a, b):
    """PyTorch's promotion: scalars and 0-d tensors only raise the category, not the width."""
    if _is_scalar(a):
        return D.promote_with_scalar(b.dtype, a)
    if _is_scalar(b):
        return D.promote_with_scalar(a.dtype, b)
    return _promote_tensors(a.dtype, not a._shape, b.dtype, not b._shape)


def _promote_tensors(da, a0, db, b0):
    """Two tensors' result dtype from their dtypes and whether each is 0-d (a0, b0)."""
    if da is db:
        return da
    if a0 != b0:
        dim, zero = (db, da) if a0 else (da, db)
        if "bif".index(zero.kind) > "bif".index(dim.kind):
            return zero  # torch: int tensor + 0-d float16 tensor -> float16
        return dim
    return D.result_type_of(da, db)


def _is_bool_operand(x):
    return isinstance(x, (bool, np.bool_)) or (isinstance(x, Tensor) and x.dtype.is_bool)


# (name, operand signature) -> (expression, compute type, result dtype, output compute type):
# the type decisions of `binary`, made once per signature (the eager per-op budget is ~20 µs).
_typed: dict = {}


def _sig(x):
    t = type(x)
    if t is Tensor or (t not in _SCALARS and isinstance(x, Tensor)):  # Parameter too
        return (x.dtype, not x._shape)
    return t


def _rg(x) -> bool:
    # (a view taken before an in-place op gave its base a history: autograd.fresh_view)
    return isinstance(x, Tensor) and (x.requires_grad or (x._base is not None and _requires(x)))


_grads_module = None


def _grads():
    """ops/elementwise_grads, imported on first use (it imports this module): a function-level
    import statement costs ~0.5 µs a call on the recorded path of every operator."""
    global _grads_module
    if _grads_module is None:
        from . import elementwise_grads

        _grads_module = elementwise_grads
    return _grads_module


def binary(name: str, a, b, out=None):
    if (_rg(a) or _rg(b)) and is_grad_enabled():  # recorded for backward (elementwise_grads)
        recorded_binary = _grads().recorded_binary

        return recorded_binary(name, a, b, out)
    if out is None:
        r = _binary_map(name, a, b, None)
        if r.dtype.kind == "i":  # (the range its values have by construction: range_rules)
            range_rules.after_binary(name, a, b, r)
        return r
    mark_written(out)  # (see unary)
    pre = range_rules.capture(out, a, b)  # (in place: taken before the kernel forgets them)
    r = _binary_map(name, a, b, out)
    if r.dtype.kind == "i":
        range_rules.after_binary(name, a, b, r, pre)
    return r


def _binary_map(name, a, b, out):
    key = (name, _sig(a), _sig(b))
    hit = _typed.get(key)
    if hit is not None:
        expr, ct, res, out_ct, side, conv = hit
        if side == 1:
            if conv is not None:
                b = conv(b)
            return run_map(expr, (a,), (ct,), _out(out, a._shape, res), out_ct, (b,), (ct,))
        if side == 2:
            shape = a._shape if a._shape == b._shape else broadcast_shapes(a._shape, b._shape)
            return run_map(expr, (a, b), (ct, ct), _out(out, shape, res), out_ct)
        if side == 3:  # (a Python number first: `1 - x`)
            if conv is not None:
                a = conv(a)
            return run_map(expr, (b,), (ct,), _out(out, b._shape, res), out_ct, (a,), (ct,))
    return _binary(name, a, b, out, key)


def _one_value(x) -> bool:
    """Whether operand x reads one value everywhere: a Python number, or a tensor whose every
    dim of more than one element has stride 0 (PyTorch's TensorIterator.is_scalar)."""
    if not isinstance(x, Tensor):
        return True
    return all(n == 1 or st == 0 for n, st in zip(x._shape, x._strides))


def _cast_0d(x, rt):
    if isinstance(x, Tensor) and x.dtype is not rt and not x._shape and x.dtype.kind != "b":
        return x.to(rt)
    return x


def _binary(name, a, b, out, key):
    fexpr, iexpr, bexpr, kind = BINARY[name]
    sa, sb = _is_scalar(a), _is_scalar(b)
    if sa and sb:
        raise TypeError(f"pyrite: {name} needs at least one tensor")
    if not sa and not isinstance(a, Tensor):
        a = as_tensor_arg(a)
    if not sb and not isinstance(b, Tensor):
        b = as_tensor_arg(b)
    rt = result_dtype(a, b)
    cat = rt.kind
    if kind == "float" and cat != "f":
        cat = "f"
        rt = D.float32
    if name == "sub" and any(_is_bool_operand(x) for x in (a, b)):
        raise DtypeError(
            "pyrite: subtraction, the `-` operator, with a bool tensor is not "
            "supported; to invert a mask use `~` or logical_not()"
        )
    expr = {"f": fexpr, "i": iexpr, "b": bexpr}[cat]
    if expr is None and cat == "b":  # PyTorch: "floor_divide" not implemented for 'Bool'
        raise DtypeError(f"pyrite: {name} is not defined for two bool operands (pyrite.bool)")
    if expr is None and cat == "i" and fexpr is not None and name != "bitwise_and":
        cat, expr, rt = "f", fexpr, D.float32
    if expr is None:
        raise DtypeError(f"pyrite: {name} is not defined for {rt!r}")
    if name == "div_trunc" and cat == "f" and rt in (D.float16, D.bfloat16):
        # torch truncates the quotient rounded to the half type (Half / Half is a Half): -5 /
        # 0.08 is -62.5 in f16 (trunc -62) but -62.49 in f32 (trunc -62 too; 9 / -0.02 not).
        # Not for a divisor that is one value (a Python number, a 0-d or one-element tensor, an
        # expanded one): its reduced-float kernel divides in f32 by the divisor's original value
        # and truncates that (div_trunc_kernel's iter.is_scalar(2) path; bf16 17.125 / f32
        # 5.7183 is 2, where the bf16 quotient 3.0 truncates to 3)
        key = None  # (the text depends on the divisor's strides, which the cache key omits)
        if not _one_value(b):
            q = "p_divf(A, B)"
            q = f"p_f16r({q})" if rt is D.float16 else f"bitcast<f32>(p_bf16({q}) << 16u)"
            expr = f"trunc({q})"
    if (rt.is_small_int and cat == "i") or (
        rt in (D.float16, D.bfloat16) and name in _ROUND_SCALAR
    ):
        # a 0-d tensor of another dtype is cast to the computing result type first, as torch
        # does: maximum(uint8 x, int16(-10)) compares with 246, not -10; bf16 x == f32(0.1)
        # compares with bf16(0.1); a float one only where torch rounds a Python scalar too
        # (f16 x // f32 0-d keeps the divisor in f32, as for x // 5.7493)
        ca, cb = _cast_0d(a, rt), _cast_0d(b, rt)
        if ca is not a or cb is not b:
            a, b, key = ca, cb, None  # not cached: the fast path would skip the cast
    ct = _CT[cat]
    res = (
        D.bool_
        if kind == "bool"
        else (rt if cat == rt.kind else (D.int32 if cat == "i" else D.float32))
    )
    out_ct = "bool" if kind == "bool" else ct
    if sb:
        shape = a._shape
        o = _out(out, shape, res)
        text = _wgsl(expr, {"A": "x0", "B": "s0"})
        conv = _scalar_cast(name, rt, ct)
        if key is not None and isinstance(a, Tensor) and type(b) in _SCALARS:
            _typed[key] = (text, ct, res, out_ct, 1, conv)
        if conv is not None:
            b = conv(b)
        return run_map(text, (a,), (ct,), o, out_ct, (b,), (ct,))
    if sa:
        shape = b._shape
        o = _out(out, shape, res)
        text = _wgsl(expr, {"A": "s0", "B": "x0"})
        conv = _scalar_cast(name, rt, ct)
        if key is not None and isinstance(b, Tensor) and type(a) in _SCALARS:
            _typed[key] = (text, ct, res, out_ct, 3, conv)
        if conv is not None:
            a = conv(a)
        return run_map(text, (b,), (ct,), o, out_ct, (a,), (ct,))
    shape = a._shape if a._shape == b._shape else broadcast_shapes(a._shape, b._shape)
    o = _out(out, shape, res)
    text = _wgsl(expr, {"A": "x0", "B": "x1"})
    if key is not None and key[1] is not None and isinstance(a, Tensor) and isinstance(b, Tensor):
        _typed[key] = (text, ct, res, out_ct, 2, None)
    return run_map(text, (a, b), (ct, ct), o, out_ct)


# Binary ops whose Python-scalar operand PyTorch first casts to a float16/bfloat16 result type
# (measured, torch 2.13 CPU: x_bf16 + 0.1 adds bf16(0.1); x_bf16 * 0.1 multiplies by the f32
# 0.1 — mul, div, pow and floor_divide keep the scalar in f32, as here)
_ROUND_SCALAR = {
    "add", "sub", "remainder", "fmod", "atan2", "maximum", "minimum",
    "eq", "ne", "lt", "le", "gt", "ge",
}  # fmt: skip


def _scalar_cast(name, rt, ct):
    """How a Python scalar operand is cast to the op's dtype `rt` first, as PyTorch does (None:
    it is used as it is). An int scalar with uint8/int8/int16 wraps (uint8 < 1000 compares with
    232, uint8 // 300 divides by 44); a float scalar rounds to float16/bfloat16 for the ops in
    _ROUND_SCALAR."""
    if rt.is_small_int and ct == "i32":

        def conv(v):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                return v
            return D.wrap_int(int(v), rt)

        return conv
    if rt in (D.bfloat16, D.float16) and name in _ROUND_SCALAR:
        return lambda v: D.round_scalar(v, rt) if not isinstance(v, (bool, np.bool_)) else v
    return None


def _inplace(name, a, b, alpha=1):
    """a <op>= b (or alpha·b for add and sub), written into a's own buffer (a may be a view)."""
    scaled = alpha != 1 or type(alpha) is bool
    if scaled:
        c = _scaled(name, a, b, alpha, a, check_only=True) if name in ("add", "sub") else None
        if c is None:  # (an integer or bool result: alpha·b first, as torch)
            return _inplace(name, a, _times_alpha(name, a, b, alpha))
        b = c
    rt = result_dtype(a, b)
    if BINARY[name][3] == "float" and not rt.is_floating_point:
        rt = D.float32
    if "bif".index(rt.kind) > "bif".index(a.dtype.kind):
        raise DtypeError(
            f"pyrite: result type {rt!r} of {name} can't be cast to the desired "
            f"output type {a.dtype!r}"
        )
    if not _is_scalar(b):
        b = as_tensor_arg(b)
        shape = broadcast_shapes(a._shape, b._shape)
        if shape != a._shape:
            from ..errors import ShapeError

            raise ShapeError(
                f"pyrite: in-place {name}: shape {tuple(b._shape)} does not "
                f"broadcast to the tensor's {tuple(a._shape)}"
            )
    if scaled:
        return _scaled(name, a, b, alpha, a)
    return binary(name, a, b, out=a)


# ---- functions in PyTorch's spelling --------------------------------------------------------
def add(input, other, *, alpha=1, out=None):
    if alpha != 1 or type(alpha) is bool:  # alpha=True is checked too (bool results only)
        if _scaled("add", input, other, alpha, out, check_only=True) is not None:
            return _scaled("add", input, other, alpha, out)
        other = _times_alpha("add", input, other, alpha)
    return binary("add", input, other, out)


def sub(input, other, *, alpha=1, out=None):
    if alpha != 1 or type(alpha) is bool:  # alpha=True is checked too (bool results only)
        if _scaled("sub", input, other, alpha, out, check_only=True) is not None:
            return _scaled("sub", input, other, alpha, out)
        other = _times_alpha("sub", input, other, alpha)
    return binary("sub", input, other, out)


def rsub(input, other, *, alpha=1):
    """other - alpha · input (here, not in ops/mathops, so bfloat16 takes add's kernel and its
    rounding instead of the float32 fallback's: 2,579 of 10,007 elements 1 ulp off)."""
    return sub(other, input, alpha=alpha)


def _scaled(name, input, other, alpha, out, check_only=False):
    """input ± alpha·other with a float result, as one map: torch's add kernel rounds alpha (and
    a Python-number operand) to the result dtype, computes fma(other, alpha, input) in f32 and
    rounds once (a float16 x.add_(y, alpha=0.3) rounded alpha·y to float16 first here: 2,060 of
    10,007 elements 1 ulp off). None where the result is not a float (the int and bool paths
    multiply first, exactly), or an out= of another dtype would round twice. With check_only:
    the operand to pass on (other, a 0-d tensor cast as torch casts it) or None."""
    if isinstance(alpha, (bool, np.bool_)):
        return None
    if name == "sub" and any(_is_bool_operand(x) for x in (input, other)):
        return None  # (binary raises torch's refusal of bool subtraction)
    if _is_scalar(input) and _is_scalar(other):
        return None
    if not _is_scalar(input):
        input = as_tensor_arg(input)
    if not _is_scalar(other):
        other = as_tensor_arg(other)
    rt = result_dtype(input, other)
    if rt.kind != "f" or not (out is None or out.dtype is rt or rt is D.float32):
        return None  # (an f32 result rounds once into any out; a half one would round twice)
    if rt in (D.float16, D.bfloat16):  # (a 0-d tensor of another dtype is cast first, as torch)
        input, other = _cast_0d(input, rt), _cast_0d(other, rt)
    if check_only:
        return other
    from .casts import fill_value

    # (alpha becomes a c10 value of the result dtype: via f32, checked for overflow)
    a = D.round_scalar(float(np.float32(fill_value(alpha, rt))), rt)
    a = -a if name == "sub" else a  # (torch's sub is add with -alpha)
    if (_rg(input) or _rg(other)) and is_grad_enabled():
        return _grads().recorded_scaled(name, input, other, a, out)
    return _scaled_map(input, other, a, out)


def _scaled_map(input, other, alpha, out=None):
    """out = fma(other, alpha, input), alpha already the result dtype's value; either operand
    may be a Python number (rounded to the result dtype here)."""
    if out is not None:
        mark_written(out)
    rt = result_dtype(input, other)
    f32 = ("f32",)
    if _is_scalar(other):
        b = D.round_scalar(float(np.float32(other)), rt)
        o = _out(out, input._shape, rt)
        return run_map("fma(s0, s1, x0)", (input,), f32, o, "f32", (b, alpha), f32 * 2)
    if _is_scalar(input):
        a = D.round_scalar(float(np.float32(input)), rt)
        o = _out(out, other._shape, rt)
        return run_map("fma(x0, s1, s0)", (other,), f32, o, "f32", (a, alpha), f32 * 2)
    shape = input._shape
    if shape != other._shape:
        shape = broadcast_shapes(shape, other._shape)
    o = _out(out, shape, rt)
    return run_map("fma(x1, s0, x0)", (input, other), f32 * 2, o, "f32", (alpha,), f32)


def _times_alpha(name, input, other, alpha):
    """alpha·other in the dtype input <name> other has (torch's: alpha does not promote;
    bool + bool·2 stays bool, uint8 + int8·2 is an int16 sum)."""
    if name == "sub" and any(_is_bool_operand(x) for x in (input, other)):
        binary("sub", input, other)  # raises torch's refusal of bool subtraction
    if not _is_scalar(input):
        input = as_tensor_arg(input)
    if not _is_scalar(other):
        other = as_tensor_arg(other)
    rt = result_dtype(input, other)
    if isinstance(alpha, (bool, np.bool_)) and not rt.is_bool:  # (torch's class: RuntimeError)
        raise RuntimeError(
            f"pyrite: Boolean alpha only supported for Boolean results. (result {rt!r})"
        )
    if rt.kind != "f" and D.scalar_kind(alpha) == "f":
        raise RuntimeError(
            "pyrite: For integral input tensors, argument alpha must not be a floating point "
            f"number. (alpha={alpha!r}, result {rt!r})"
        )
    if _is_scalar(other):  # (a bool result stays bool: True + False·2 is True, not 1)
        return bool(other) and bool(alpha) if rt.is_bool else other * alpha
    if other.dtype is not rt:
        other = other.to(rt)
    if rt.is_bool:
        return logical_and(other, bool(alpha))
    return mul(other, alpha)


subtract = sub


def mul(input, other, *, out=None):
    return binary("mul", input, other, out)


multiply = mul


def div(input, other, *, out=None):
    """True division (the rounding modes, and integer division by zero: ops/division.py)."""
    return binary("div", input, other, out)


def pow(input, exponent):
    if _is_scalar(exponent) and isinstance(input, Tensor):
        if input.dtype.kind in "ib" and D.scalar_kind(exponent) in "ib" and exponent < 0:
            raise RuntimeError(  # torch's class
                "pyrite: integers to negative integer powers are not allowed "
                f"({input.dtype!r} ** {exponent})"
            )
        if input.dtype.is_bool and isinstance(exponent, (bool, np.bool_)):
            # torch's shortcut for exponents 0 and 1 (before its bool check): ones, or a copy
            from .creation import full

            return input.clone() if exponent else full(input._shape, True, dtype=D.bool_)
        # the shortcuts only where the scalar leaves the dtype alone (int ** 2.0 is a float)
        if D.promote_with_scalar(input.dtype, exponent) is input.dtype:
            if exponent == 2 and not input.dtype.is_bool:
                return unary("square", input)
            if exponent == 0.5 and input.dtype.is_floating_point:
                return unary("sqrt", input)
            if exponent == 1:
                return input.clone()
    return binary("pow", input, exponent)


def float_power(input, exponent):
    """input ** exponent in float64 (float32 here), whatever the operands' dtypes, as torch."""
    if isinstance(exponent, Tensor):
        exponent = exponent.float()
    return pow(input.float() if isinstance(input, Tensor) else input, exponent)


def bitwise_not(input):
    return unary("bitwise_not", input)


def logical_not(input):
    return unary("logical_not", input)


def _make_binary(name):
    def fn(input, other, *, out=None):
        return binary(name, input, other, out)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name} with broadcasting, as torch.{name}."
    return fn


maximum = _make_binary("maximum")
minimum = _make_binary("minimum")
atan2 = _make_binary("atan2")
eq = _make_binary("eq")
ne = _make_binary("ne")
lt = _make_binary("lt")
le = _make_binary("le")
gt = _make_binary("gt")
ge = _make_binary("ge")
bitwise_and = _make_binary("bitwise_and")
bitwise_or = _make_binary("bitwise_or")
bitwise_xor = _make_binary("bitwise_xor")
logical_and = _make_binary("logical_and")
logical_or = _make_binary("logical_or")
logical_xor = _make_binary("logical_xor")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
arctan2 = atan2


def _make_unary(name):
    def fn(input, *, out=None):
        # (unary unwrapped: fn is wrapped itself, so a complex input never gets here, and the
        # module attribute would run the complex check a second time, ~0.4 µs a call)
        return _unary(name, input, out=out)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise {name}, as torch.{name}."
    return fn


neg = _make_unary("neg")
negative = neg
abs = _make_unary("abs")
absolute = abs
exp = _make_unary("exp")
exp2 = _make_unary("exp2")
log = _make_unary("log")
log2 = _make_unary("log2")
log10 = _make_unary("log10")
log1p = _make_unary("log1p")
expm1 = _make_unary("expm1")
sqrt = _make_unary("sqrt")
rsqrt = _make_unary("rsqrt")
sin = _make_unary("sin")
cos = _make_unary("cos")
tan = _make_unary("tan")
asin = arcsin = _make_unary("asin")
acos = arccos = _make_unary("acos")
atan = arctan = _make_unary("atan")
sinh = _make_unary("sinh")
cosh = _make_unary("cosh")
tanh = _make_unary("tanh")
sigmoid = _make_unary("sigmoid")
relu = _make_unary("relu")
silu = _make_unary("silu")
mish = _make_unary("mish")
erf = _make_unary("erf")
sign = _make_unary("sign")
sgn = sign
floor = _make_unary("floor")
ceil = _make_unary("ceil")
trunc = _make_unary("trunc")
fix = trunc
frac = _make_unary("frac")
square = _make_unary("square")
reciprocal = _make_unary("reciprocal")
isnan = _make_unary("isnan")
isinf = _make_unary("isinf")
isfinite = _make_unary("isfinite")


def round(input, *, decimals=0):
    if decimals == 0:
        return unary("round", input)
    x = as_tensor_arg(input)
    if not x.dtype.is_floating_point:
        raise DtypeError(f"pyrite: round with decimals is not implemented for {x.dtype!r}")
    # one map in f32, rounded once to x's dtype, as torch's kernel (x * 10^d stored in float16
    # first would round twice); negative decimals divide first, as torch
    expr = "p_divf(p_round(x0 * s0), s0)" if decimals > 0 else "p_round(p_divf(x0, s0)) * s0"
    scale = 10.0 ** (decimals if decimals > 0 else -decimals)  # (this module's abs is the op)
    return run_map(expr, (x,), ("f32",), empty(x._shape, x.dtype), "f32", (scale,), ("f32",))


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ArgumentError(
            f"pyrite: gelu approximate must be 'none' or 'tanh', got {approximate!r}"
        )
    return _unary("gelu" if approximate == "none" else "gelu_tanh", input)  # (as _make_unary)


def softplus(input, beta=1.0, threshold=20.0):
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        x = x.float()
    return run_map(
        "p_softplus(x0, s0, s1)",
        (x,),
        ("f32",),
        empty(x._shape, x.dtype),
        "f32",
        (beta, threshold),
        ("f32", "f32"),
    )


def signbit(input):
    x = as_tensor_arg(input)
    if x.dtype.kind != "f":
        return lt(x, 0)
    return run_map(
        "(bitcast<u32>(x0) >> 31u) == 1u", (x,), ("f32",), empty(x._shape, D.bool_), "bool"
    )


def _fold_dtype(xs):
    """PyTorch's result_type over tensors and Python scalars: the dimensioned tensors promote
    among themselves; 0-d tensors, then Python scalars, change that only when of a higher
    category (clamp(bool x, int32 0-d, int16 y) is int16; where(c, 1.0, int x) is float32)."""
    dims = zeros = None
    scal = None  # the highest category among the scalars
    for x in xs:
        if _is_scalar(x):
            k = D.scalar_kind(x)
            scal = k if scal is None or "bif".index(k) > "bif".index(scal) else scal
        elif x._shape:
            dims = x.dtype if dims is None else D.result_type_of(dims, x.dtype)
        else:
            zeros = x.dtype if zeros is None else D.result_type_of(zeros, x.dtype)
    dt = dims
    if zeros is not None and (dt is None or "bif".index(zeros.kind) > "bif".index(dt.kind)):
        dt = zeros
    if scal is not None and (dt is None or "bif".index(scal) > "bif".index(dt.kind)):
        dt = {"f": D.float32, "i": D.int32, "b": D.bool_}[scal]
    return dt


def _check_int_scalars(dt, values):
    """PyTorch refuses a Python int operand that overflows an integer dtype in clamp and where
    (uint8.clamp(0, 300): "value cannot be converted to type uint8_t without overflow"), where
    arithmetic would wrap it."""
    if dt.kind == "i":
        from .casts import fill_value

        for v in values:
            if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                fill_value(v, dt)


def _ternary(expr_f, expr_i, xs, out_dtype=None, cond=None):
    """A map over up to three operands, any of which may be Python scalars."""
    dt = _fold_dtype(xs)
    _check_int_scalars(dt, [x for x in xs if _is_scalar(x)])
    ct = _CT[dt.kind]
    if ct == "bool":
        ct = "i32"
    expr = expr_f if ct == "f32" else expr_i
    tens, ctypes, scal, sct = [], [], [], []
    names = {}
    for letter, x in zip("ABC", xs):
        if _is_scalar(x):
            names[letter] = f"s{len(scal)}"
            scal.append(x)
            sct.append(ct)
        else:
            x = as_tensor_arg(x)
            names[letter] = f"x{len(tens)}"
            tens.append(x)
            ctypes.append(ct)
    if cond is not None:
        names["K"] = f"x{len(tens)}"
        tens.append(cond)
        ctypes.append("bool")
    shape = broadcast_shapes(*(t._shape for t in tens))
    res = out_dtype or dt
    return run_map(
        _wgsl(expr, names),
        tens,
        ctypes,
        empty(shape, res),
        ct if res is dt else ("bool" if res.is_bool else ct),
        scal,
        sct,
    )


def _scalar_tensor(x, dtype):
    """A 0-d tensor of `dtype` holding the Python scalar `x`."""
    from .creation import full

    return full((), x, dtype=dtype)


def where(condition, input=None, other=None):
    if input is None and other is None:
        from .indexing import nonzero

        return nonzero(condition, as_tuple=True)
    condition = as_tensor_arg(condition)
    if not condition.dtype.is_bool:
        condition = condition != 0
    xs = [input, other]
    if all(_is_scalar(x) for x in xs):
        # torch.where(cond, 1.0, 0.0): scalars make the default dtype of their category
        kind = max((D.scalar_kind(x) for x in xs), key="bif".index)
        dt = {"f": D.float32, "i": D.int32, "b": D.bool_}[kind]
        xs = [_scalar_tensor(x, dt) for x in xs]
    return _where(condition, *xs)


def _where(condition, input, other):
    # the map, with its own rule (Tensor.where's METHODS entry has another argument order)
    r = _ternary("select(B, A, K)", "select(B, A, K)", [input, other], cond=condition)
    if r.dtype.kind == "i":
        range_rules.after_where(r, input, other)
    return r


def lerp(input, end, weight):
    # torch requires one dtype for input, end and a tensor weight ("expected dtype float for
    # `end` but got dtype c10::Half"), and a floating one
    input, end = as_tensor_arg(input), as_tensor_arg(end)
    for what, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not input.dtype:
            raise DtypeError(
                f"pyrite: lerp: expected dtype {input.dtype!r} for `{what}` but got {t.dtype!r}"
            )
    if not input.dtype.is_floating_point:
        raise DtypeError(f"pyrite: lerp is not implemented for {input.dtype!r}")
    return _lerp(input, end, weight)


def _lerp(input, end, weight):
    # the map itself (its own GRADS entry: the in-place methods of ops/operators.py call the
    # public functions unwrapped, and still record through this one)
    # torch's form: the nearer end is the anchor (exact at weight 1; inf ends as torch's), each
    # side one fma as torch's CPU kernel (float16 weight 0.3: 14 of 10,007 elements 1 ulp off
    # unfused). lavapipe computes fma as a multiply and an add (measured): there nothing moves;
    # whether a GPU's driver fuses it is not measured yet
    expr = "select(fma(A - B, 1.0 - C, B), fma(C, B - A, A), abs(C) < 0.5)"
    return _ternary(expr, expr, [input, end, weight])


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2, in one pass (one rounding to a float16/bfloat16
    result, as torch's kernel)."""
    return _addcmul(input, tensor1, tensor2, value)


def _addcmul(input, tensor1, tensor2, value):
    # torch's CPU kernel: fma(value·t1, t2, input) in f32 (value·(t1·t2) rounds another way)
    return _addc("addcmul", "fma(s0 * B, C, A)", input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2, in one pass."""
    return _addcdiv(input, tensor1, tensor2, value)


def _addcdiv(input, tensor1, tensor2, value):
    # torch's order, value·t1 first; p_divf: a correctly rounded quotient on every device
    return _addc("addcdiv", "A + p_divf(s0 * B, C)", input, tensor1, tensor2, value)


def _addc(name, expr, input, t1, t2, value):
    xs = [as_tensor_arg(x) for x in (input, t1, t2)]
    dt = _fold_dtype(xs)
    if name == "addcdiv" and dt.kind != "f":
        raise RuntimeError(
            "pyrite: Integer division with addcdiv is no longer supported; use true division "
            "(addcmul(input, tensor1, 1 / tensor2)) or torch.div(..., rounding_mode=...)"
        )
    if dt.kind != "f" and D.scalar_kind(value) == "f":
        value = int(value)  # torch casts value to the integer type (0.5 -> 0)
    if dt.is_bool:
        raise DtypeError(f"pyrite: {name} is not implemented for pyrite.bool")
    ct = _CT[dt.kind]
    shape = broadcast_shapes(*(t._shape for t in xs))
    if ct == "i32":
        expr = "A + s0 * B * C" if name == "addcmul" else expr  # (no integer fma in WGSL)
    text = _wgsl(expr, {"A": "x0", "B": "x1", "C": "x2"})
    return run_map(text, xs, (ct,) * 3, empty(shape, dt), ct, (value,), (ct,))


def clamp(input, min=None, max=None, *, out=None):
    x = as_tensor_arg(input)
    if min is None and max is None:
        raise RuntimeError("pyrite: torch.clamp: At least one of 'min' or 'max' must not be None")
    if x.dtype.is_bool and any(_is_scalar(v) for v in (min, max)):
        if _fold_dtype([x] + [v for v in (min, max) if v is not None]).is_bool:
            # torch: "clamp_min_scalar_cpu" not implemented for 'Bool' (a float bound promotes)
            raise DtypeError("pyrite: clamp with a bool result is not implemented for pyrite.bool")
    _check_int_scalars(x.dtype, (min, max))
    # one result type over the three, as torch's (clamp(bool, int32 0-d, int16) is int16):
    # pairwise maximum then minimum would promote in two steps
    bounds = [as_tensor_arg(v) if isinstance(v, (list, np.ndarray)) else v for v in (min, max)]
    min, max = bounds
    rt = _fold_dtype([x] + [v for v in bounds if v is not None])
    r = _clamp(x if rt is x.dtype else x.to(rt), min, max)
    if out is not None:
        out.copy_(r)
        return out
    return r


def _clamp(x, min, max):
    # the map itself, with its own rule (torch's clamp_backward: the gradient passes where
    # min <= x <= max, bounds included, not split as maximum/minimum split ties)
    if min is not None:
        x = binary("maximum", x, min)
    if max is not None:
        x = binary("minimum", x, max)
    return x


clip = clamp


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    x = as_tensor_arg(input)
    if not x.dtype.is_floating_point:
        return x.clone()
    big = {D.float16: 65504.0, D.bfloat16: D.bf16_value(0x7F7F)}.get(x.dtype, 3.4028234663852886e38)
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    return _nan_to_num(x, nan, posinf, neginf)


def _nan_to_num(x, nan, posinf, neginf):
    expr = (
        "select(select(select(x0, s2, p_isinf(x0) && x0 < 0.0), s1, p_isinf(x0) && x0 > 0.0),"
        " s0, p_isnan(x0))"
    )
    return run_map(
        expr,
        (x,),
        ("f32",),
        empty(x._shape, x.dtype),
        "f32",
        (nan, posinf, neginf),
        ("f32", "f32", "f32"),
    )


def _where_method(self, condition, other):
    """Tensor.where(condition, y): torch.where(condition, self, y)."""
    return where(condition, self, other)


FUNCS = {
    "add": add,
    "sub": sub,
    "subtract": sub,
    "rsub": rsub,
    "mul": mul,
    "multiply": mul,
    "pow": pow,
    "float_power": float_power,
    "maximum": maximum,
    "minimum": minimum,
    "atan2": atan2,
    "arctan2": atan2,
    "eq": eq,
    "ne": ne,
    "lt": lt,
    "le": le,
    "gt": gt,
    "ge": ge,
    "greater": gt,
    "greater_equal": ge,
    "less": lt,
    "less_equal": le,
    "not_equal": ne,
    "bitwise_and": bitwise_and,
    "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor,
    "bitwise_not": bitwise_not,
    "logical_and": logical_and,
    "logical_or": logical_or,
    "logical_xor": logical_xor,
    "logical_not": logical_not,
    "neg": neg,
    "negative": neg,
    "abs": abs,
    "absolute": abs,
    "exp": exp,
    "exp2": exp2,
    "log": log,
    "log2": log2,
    "log10": log10,
    "log1p": log1p,
    "expm1": expm1,
    "sqrt": sqrt,
    "rsqrt": rsqrt,
    "sin": sin,
    "cos": cos,
    "tan": tan,
    "asin": asin,
    "arcsin": asin,
    "acos": acos,
    "arccos": acos,
    "atan": atan,
    "arctan": atan,
    "sinh": sinh,
    "cosh": cosh,
    "tanh": tanh,
    "sigmoid": sigmoid,
    "relu": relu,
    "silu": silu,
    "mish": mish,
    "erf": erf,
    "sign": sign,
    "sgn": sign,
    "floor": floor,
    "ceil": ceil,
    "trunc": trunc,
    "fix": trunc,
    "frac": frac,
    "square": square,
    "reciprocal": reciprocal,
    "isnan": isnan,
    "isinf": isinf,
    "isfinite": isfinite,
    "round": round,
    "gelu": gelu,
    "softplus": softplus,
    "signbit": signbit,
    "where": where,
    "lerp": lerp,
    "addcmul": addcmul,
    "addcdiv": addcdiv,
    "clamp": clamp,
    "clip": clamp,
    "clamp_min": clamp_min,
    "clamp_max": clamp_max,
    "nan_to_num": nan_to_num,
}

__all__ = sorted(FUNCS)

METHODS = {k: v for k, v in FUNCS.items() if k != "rsub"}  # (+ operators: ops/operators.py)
METHODS["where"] = _where_method


# ---- backward rules (autograd.install wraps these functions; unary/binary record themselves:
# ops/elementwise_grads.py). Formulas are torch's (tools/autograd/derivatives.yaml).
def _g_where(ctx, g):
    c = ctx.args[0]  # bool: where() converted it
    return (
        None,
        where(c, g, 0.0) if ctx.needs[1] else None,
        where(c, 0.0, g) if ctx.needs[2] else None,
    )


_g_where.saves = frozenset({0})


def _g_lerp(ctx, g):
    a, b, w = ctx.args  # (a and b are None unless w needs a gradient)
    return (
        g * (1.0 - w) if ctx.needs[0] else None,
        g * w if ctx.needs[1] else None,
        g * (b - a) if ctx.needs[2] else None,
    )


_g_lerp.saves = frozenset({0, 1, 2})
# (autograd._drop_unread: start and end are read only for weight's gradient; torch keeps weight,
# which two gradients read, whatever needs a gradient)
_g_lerp.reads_for = {0: 2, 1: 2}


def _g_addcmul(ctx, g):
    _, t1, t2, value = ctx.args
    return (
        g,
        g * (t2 * value) if ctx.needs[1] else None,
        g * (t1 * value) if ctx.needs[2] else None,
    )


_g_addcmul.saves = frozenset({1, 2})
_g_addcmul.reads_for = {1: 2, 2: 1}


def _g_addcdiv(ctx, g):
    _, t1, t2, value = ctx.args
    return (
        g,
        g * value / t2 if ctx.needs[1] else None,
        -g * value * t1 / (t2 * t2) if ctx.needs[2] else None,
    )


_g_addcdiv.saves = frozenset({1, 2})
_g_addcdiv.reads_for = {1: 2}  # (tensor2, read by both gradients, is always kept)


def _g_clamp(ctx, g):
    # torch's clamp_backward / clamp_backward_min_max: x gets g where min <= x <= max; a tensor
    # min gets it where x < min (and min < max), a tensor max where x > max (or max < min)
    x, lo, hi = ctx.args
    gx = glo = ghi = None
    if lo is not None and hi is not None:
        if ctx.needs[0]:
            gx = where(logical_and(ge(x, lo), le(x, hi)), g, 0.0)
        if ctx.needs[1]:
            glo = where(logical_and(lt(x, lo), lt(lo, hi)), g, 0.0)
        if ctx.needs[2]:
            ghi = where(logical_or(gt(x, hi), lt(hi, lo)), g, 0.0)
    elif lo is not None:
        gx = where(ge(x, lo), g, 0.0) if ctx.needs[0] else None
        glo = where(lt(x, lo), g, 0.0) if ctx.needs[1] else None
    else:
        gx = where(le(x, hi), g, 0.0) if ctx.needs[0] else None
        ghi = where(gt(x, hi), g, 0.0) if ctx.needs[2] else None
    return gx, glo, ghi


_g_clamp.saves = frozenset({0, 1, 2})


def _g_nan_to_num(ctx, g):
    return (where(isfinite(ctx.args[0]), g, 0.0),)


_g_nan_to_num.saves = frozenset({0})


def _g_softplus(ctx, g):
    # torch's softplus_backward: g where beta·x > threshold, else g·σ(beta·x)
    x = ctx.args[0]
    beta = ctx.args[1] if len(ctx.args) > 1 else ctx.kwargs.get("beta", 1.0)
    threshold = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("threshold", 20.0)
    bx = x * beta
    return (where(bx > threshold, g, g * sigmoid(bx)),)


_g_softplus.saves = frozenset({0})


def _g_round(ctx, g):
    from .creation import zeros_like

    return (zeros_like(g),)


_g_round.saves = frozenset()

GRADS = {
    "_where": _g_where,
    "_lerp": _g_lerp,
    "_addcmul": _g_addcmul,
    "_addcdiv": _g_addcdiv,
    "_clamp": _g_clamp,
    "_nan_to_num": _g_nan_to_num,
    "softplus": _g_softplus,
    "round": _g_round,
}

# the engine records for backward itself (elementwise_grads): autograd.install leaves these be
binary.records_itself = unary.records_itself = True
