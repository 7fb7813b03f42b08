"""Bound plans for Python's arithmetic and comparison operators (`x + y`, `x * 0.5`, `2 - x`,
`x > 0`) and the unary ops' methods (`x.relu()`, `x.exp()`, `-x`) on plain tensors: the eager
per-op path near its floor.

An operator call through the op stack passes five layers (the complex guard, autograd's check,
the elementwise op's dtype rules, the map's plan lookup, the output's allocation) before its one
dispatch, each deciding again what depends only on the operands' dtypes, shapes and strides.
Here the first call with a new operand layout takes that whole path, and if it ran as one
dispatch of the elementwise map (checked: one dispatch, of the kernel the map's plan names), the
decisions are kept under the layout: the kernel, its static info words, the grid, the result's
dtype and layout, and the scalar's conversion. A later call with the same layout allocates the
result and records the dispatch, nothing else.

Only calls whose every operand is plain take it: `self` a Tensor or an nn.Parameter (another
subclass takes the full path), `other` one of those or a Python int or float; where grad mode
is on, neither requiring grad nor a view of a base that does (autograd would record them: a
parameter is bound under no_grad, or with requires_grad off); no compile recording under way
(the tape); the same device as the plan was made on. New results are poisoned where
core.POISON asks (the test suite's switch), as core.empty does. A result of an integer dtype is
never bound (integer results carry value ranges, ops/range_rules.py, set on the full path).
Anything else, and a layout not yet seen, takes the full path, so what a bound call computes is
what the full path computed for that layout.

The unary ops' Tensor methods (UNARY_METHODS) are bound the same way where called with the
tensor alone;
their plan is learned from the one map the call dispatched (core._capture), which must read that
tensor and write the returned result.

Measured: the bench's chain of 1,000 dependent adds on a lent H100 (2026-12-06,
`scripts/bound_ab.py`, on and off in one process, µs an add to completion): wgpu-native
6.95-7.40 bound / 9.99-10.03 not, Dawn 6.85-7.17 / 9.79-9.97 (torch CUDA 6.77). Python a call
on the 2-core development machine, recording stubbed (`scripts/python_cost.py`): `x + x`
10.1 -> 6.7 µs, `x.relu()` 10.5 -> 6.1; the floor there (the result's allocation and one
recorded dispatch) is 4.7. Later the same day, with the complex guard no longer installed a
second time in front of these methods (pyrite/__init__.py): `x + x` 6.0 µs, `x.relu()` 5.7.
"""

from __future__ import annotations

import os

from .. import backend as _backend
from ..autograd import _state as _grad
from ..tensor import Tensor
from . import core
from .core import PlanCache, empty_laid, f32_bits
from .operators import name_method

# (name of the elementwise op, the Tensor methods bound to it; a reflected one, `2 - x`, binds
# only a Python number as its other operand)
OPERATORS = {
    "add": ("__add__", "__radd__"),
    "sub": ("__sub__", "__rsub__"),
    "mul": ("__mul__", "__rmul__"),
    "div": ("__truediv__", "__rtruediv__"),
    "eq": ("__eq__",),
    "ne": ("__ne__",),
    "lt": ("__lt__",),
    "le": ("__le__",),
    "gt": ("__gt__",),
    "ge": ("__ge__",),
}
LIMIT = 4096  # layouts kept an operator (the table empties when full)
_SCALAR_TYPES = (int, float)


class _Parameter:
    """nn.Parameter once nn/module.py has registered it (the ops layer does not import nn):
    a parameter is bound as a plain tensor where autograd would not record the call."""


_TABLES: list = []  # every bound method's plans (PlanCache: emptied when full)


def clear():
    """Forget every bound plan (the next call of each layout takes the full path)."""
    for table in _TABLES:
        table.clear()


def _recorded(t) -> bool:
    """Whether autograd records an op on `t` (in grad mode): it or its view's base requires
    grad."""
    return t.requires_grad or (t._base is not None and t._base.requires_grad)


def _table():
    table = PlanCache()
    _TABLES.append(table)
    return table


def _keep(table, key, dev, before, plan_of):
    """Keep plan_of() under `key` where the full call just made (dev.dispatches was `before`)
    ran as one dispatch: the map's, after its poisoning fill where core.POISON asks for one."""
    if dev.dispatches == before + (2 if core.POISON else 1):
        plan = plan_of()
        if plan is not None:
            table.keep(key, plan, LIMIT)


def _operator(name, meth, slow):
    """`slow` (the Tensor method the op stack installed) with a bound plan in front of it."""
    table = _table()
    reflected = meth.startswith("__r")

    def _full(self, other, key):
        """The full path, whose plan is kept under `key` where it ran as the elementwise map
        alone."""
        dev = _backend.current()
        if dev._tape is not None:
            return slow(self, other)
        before = dev.dispatches
        r = slow(self, other)
        _keep(table, key, dev, before, lambda: _learn(name, dev, self, other, r, reflected))
        return r

    def fn(self, other):
        to = type(other)
        number = to is float or to is int
        if number:
            ok = to
        elif to is Tensor or to is _Parameter:
            if reflected or (_grad.enabled and _recorded(other)):
                return slow(self, other)
            ok = (other.dtype, other._shape, other._strides, other._offset & 3)
        else:
            return slow(self, other)
        ts = type(self)
        if (ts is not Tensor and ts is not _Parameter) or (_grad.enabled and _recorded(self)):
            return slow(self, other)
        key = (self.dtype, self._shape, self._strides, self._offset & 3, ok)
        plan = table.get(key)
        dev = _backend._current
        if plan is None or plan[0] is not dev or dev._tape is not None:
            return _full(self, other, key)
        _, src, static, grid, n, res, shape, lay, conv, isf = plan
        out = empty_laid(dev, shape, res, lay)
        if number:  # (the number after the map's words, as _map_command puts it)
            if conv is not None:
                other = conv(other)
            word = f32_bits(other) if isf else int(other)
            info = [n, 0, self._offset, *static, word]
            bufs = [self._storage.buffer, out._storage.buffer]
        else:
            info = [n, 0, self._offset, other._offset, *static]
            bufs = [self._storage.buffer, other._storage.buffer, out._storage.buffer]
        dev.dispatch(src, bufs, info, grid)
        return out

    name_method(fn, meth)  # (as the method it fronts: pr.profiler and pr.compile name ops so)
    fn.__doc__ = getattr(slow, "__doc__", None)
    fn.__wrapped__ = slow
    fn._pyrite_bound = slow
    fn._pyrite_table = table  # (its plans: tests)
    return fn


def _learn(name, dev, a, b, r, reflected=False):
    """The plan of the call a ⊕ b (b ⊕ a where `reflected`) that just returned `r` by one
    dispatch, or None where that dispatch was not the elementwise map's (another rule ran) or
    the result is not bindable."""
    from .elementwise import _sig, _typed

    if not _new_result(r):
        return None
    hit = _typed.get((name, _sig(b), _sig(a)) if reflected else (name, _sig(a), _sig(b)))
    if hit is None:
        return None
    text, ct, res, out_ct, side, conv = hit
    scalar = type(b) in _SCALAR_TYPES
    if res is not r.dtype or side != (3 if reflected else 1 if scalar else 2):
        return None
    if side != 2:  # (the tensor is the map's one input, the number its scalar)
        inputs, ctypes, s_ctypes = (a,), (ct,), (ct,)
    else:
        inputs, ctypes, s_ctypes = (a, b), (ct, ct), ()
    plan = _map_plan(dev, text, inputs, ctypes, r, out_ct, s_ctypes)
    if plan is None:
        return None
    # (the scalar's word as _map_command writes it: after the op's cast, f32 bits or an int)
    return (*plan, conv, ct == "f32")


def _new_result(r) -> bool:
    """Whether a call's result can be bound: a new tensor (no view, no offset) of a float or
    bool dtype (integer results carry value ranges, set on the full path)."""
    return type(r) is Tensor and r.dtype.kind != "i" and not r._offset and r._base is None


def _map_plan(dev, expr, inputs, ctypes, r, out_ct, s_ctypes):
    """(device, kernel, static words, grid, elements, result dtype, shape, layout) of the map
    that just wrote new result `r` as the last dispatch, or None where it is not bindable."""
    plan = core.map_plan(expr, inputs, ctypes, r, out_ct, s_ctypes)
    if plan is None:
        return None
    src, static, grid, n, aliased = plan
    if any(aliased) or n == 0:
        return None
    kept = dev._pipelines.get(src.wgsl)
    if kept is None or kept[0] is not dev._last_pipeline:  # (the dispatch was not this kernel)
        return None
    lay = core._layouts.get((r._shape, r.dtype))
    if lay is None or lay[3] != r._strides:
        return None
    return (dev, src, static, grid, n, r.dtype, r._shape, lay)


# Unary ops bound the same way, called with the tensor alone (no other argument, no keyword):
# their Tensor methods. Not their functions (pyrite.exp, pyrite.nn.functional.relu): a wrapper
# there is another function object, and code compares them by identity (a TransformerEncoderLayer
# made with `activation=F.relu` checks `activation is F.relu` for torch's fast path; binding F.relu
# broke that comparison in tests/test_hunt_modules.py). The plan is learned from the one map the
# call ran (core._capture), which must read the call's tensor and write the call's result.
UNARY = (
    "relu sigmoid tanh exp exp2 expm1 log log2 log1p sqrt rsqrt abs neg sin cos square "
    "reciprocal erf floor ceil trunc sign silu"
).split()
UNARY_METHODS = ("__neg__", "__abs__", *UNARY)


def _unary(label, slow):
    """`slow` (a unary op's Tensor method `label`) with a bound plan in front of it."""
    table = _table()

    def _full(x, key):
        dev = _backend.current()
        if dev._tape is not None:
            return slow(x)
        before = dev.dispatches
        core._capture = cap = []
        try:
            r = slow(x)
        finally:
            core._capture = None
        _keep(table, key, dev, before, lambda: _learn_map(dev, cap, x, r))
        return r

    def fn(x, *args, **kwargs):
        tx = type(x)
        if (
            args
            or kwargs
            or (tx is not Tensor and tx is not _Parameter)
            or (_grad.enabled and _recorded(x))
        ):
            return slow(x, *args, **kwargs)
        key = (x.dtype, x._shape, x._strides, x._offset & 3)
        plan = table.get(key)
        dev = _backend._current
        if plan is None or plan[0] is not dev or dev._tape is not None:
            return _full(x, key)
        _, src, static, grid, n, res, shape, lay = plan
        out = empty_laid(dev, shape, res, lay)
        info = [n, 0, x._offset, *static]
        dev.dispatch(src, [x._storage.buffer, out._storage.buffer], info, grid)
        return out

    fn.__doc__ = getattr(slow, "__doc__", None)
    fn.__wrapped__ = slow  # (inspect.signature reads the op's own)
    fn._pyrite_bound = slow
    fn._pyrite_table = table
    name_method(fn, label)
    return fn


def _learn_map(dev, captured, x, r):
    """The plan of a unary call on `x` that returned `r` by the one map in `captured` (what
    run_map appended during the call), or None where it ran other maps, or its map read anything
    but x, took scalars, or wrote anything but a new r."""
    if len(captured) != 1:
        return None
    expr, inputs, ctypes, out, out_ct, scalars, s_ctypes = captured[0]
    if out is not r or len(inputs) != 1 or inputs[0] is not x or scalars:
        return None
    if not _new_result(r):
        return None
    return _map_plan(dev, expr, inputs, ctypes, r, out_ct, s_ctypes)


def install(tensor_cls=Tensor):
    """Put the bound plans in front of the operators' and unary ops' Tensor methods (once the op
    stack's wrappers are all installed: this layer is outermost); none under PYRITE_BOUND=0."""
    if os.environ.get("PYRITE_BOUND", "1") == "0":
        return
    for name, methods in OPERATORS.items():
        for meth in methods:
            slow = getattr(tensor_cls, meth)
            if getattr(slow, "_pyrite_bound", None) is None:
                setattr(tensor_cls, meth, _operator(name, meth, slow))
    for meth in UNARY_METHODS:
        slow = getattr(tensor_cls, meth, None)
        if slow is not None and getattr(slow, "_pyrite_bound", None) is None:
            setattr(tensor_cls, meth, _unary(meth, slow))
