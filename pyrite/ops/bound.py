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
subclass takes the full path), `other` one of those or a Python int or float; no compile
recording under way (the tape); the same device as the plan was made on.

Calls autograd records (grad mode on, an operand requiring grad) are bound too, for + - * / and
the unary methods: the plan's dispatch computes what the full path computes (its map runs with
recording off), and the node is the one the full path records — op name, the rule's static
function (mul's choice of which operand to save included), the operands' edges in order, no
keywords — kept per layout and pattern of operands requiring grad once a full call was seen to
record exactly that (`_static_node`); autograd.record then saves, versions and links it as for
any op (a reflected call, `2 - x`, records its operands in the full path's order, (2, x)).
Views of a tensor that requires grad (autograd may rebase their history first: fresh_view) and
the comparisons keep the full path. Measured on the 2-core
development machine with the recording C calls stubbed: a recorded `y + 1` 21.5 -> 10.1 µs of
Python, the small GPT's training step (bench/train._gpt) 5.32 -> 4.54 ms.

New results are poisoned where core.POISON asks (the test suite's switch), as core.empty does.
A result of an integer dtype is never bound (integer results carry value ranges,
ops/range_rules.py, set on the full path). Anything else, and a layout not yet seen, takes the
full path, so what a bound call computes is what the full path computed for that layout.

The unary ops' Tensor methods (UNARY_METHODS) are bound the same way where called with the
tensor alone; their plan is learned from the one map the call dispatched (core._capture), which
must read that tensor and write the returned result.

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
from ..autograd import record as _record
from ..tensor import Tensor
from . import core
from .core import _F32, _I32, PlanCache, empty_laid, f32_bits
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
# The operators whose calls autograd records are bound too (the plan's dispatch, then the node
# the full path would make: `_operator.recorded`); the comparisons' results need no node.
RECORDED = ("add", "sub", "mul", "div")
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


def _run(plan, dev, a, b, number):
    """The result of a ⊕ b by its bound plan's one dispatch."""
    _, src, static, grid, n, res, shape, lay, conv, isf = plan
    out = empty_laid(dev, shape, res, lay)
    if number:  # (the number after the map's words, as _map_command puts it)
        if conv is not None:
            b = conv(b)
        if not isf:
            word = int(b)
        else:
            try:  # (f32_bits's struct round trip inline; it handles what overflows)
                word = _I32.unpack(_F32.pack(b))[0]
            except OverflowError:
                word = f32_bits(b)
        info = (n, 0, a._offset, *static, word)  # (a tuple: dispatch's tuple() keeps it)
        bufs = [a._storage.buffer, out._storage.buffer]
    else:
        info = (n, 0, a._offset, b._offset, *static)
        bufs = [a._storage.buffer, b._storage.buffer, out._storage.buffer]
    dev.dispatch(src, bufs, info, grid)
    return out


def _grads():
    """ops/elementwise_grads (imported when the methods are installed: it imports the op
    stack): its rules and the shared empty keywords the full path records."""
    from . import elementwise_grads

    return elementwise_grads


def _binary_rules(name):
    """The autograd rule the full path records `name` under, by which operands require grad
    (ops/elementwise_grads.recorded_binary's choice), or None for an op not recorded here."""
    if name not in RECORDED:
        return None
    eg = _grads()
    rule = eg.BINARY_RULES[name]
    if name != "mul":
        return lambda pattern: rule
    keep_a, keep_b = eg._mul_keep_a, eg._mul_keep_b
    return lambda p: keep_b if not p[1] else keep_a if not p[0] else rule


def _static_node(r, name, rule, args) -> bool:
    """Whether the full call that returned `r` recorded the one node a bound call would: op
    `name`, `rule`, the edges of `args` in their order, no keywords, one output, `r` itself."""
    node = getattr(r, "grad_fn", None) if type(r) is Tensor else None
    if (
        node is None
        or node._name != name
        or node.rule is not rule
        or node.kwargs
        or node.n_out != 0
        or r._out_nr != 0
        or len(node.edges) != len(args)
    ):
        return False
    for e, a in zip(node.edges, args):
        if type(a) is not Tensor and type(a) is not _Parameter:
            if e is not None:
                return False
        elif a.grad_fn is not None:
            if e is None or e[0] != "node" or e[1] is not a.grad_fn or e[2] != a._out_nr:
                return False
        elif a.requires_grad:
            if e is None or e[0] != "leaf" or e[1] is not a:
                return False
        elif e is not None:
            return False
    return True


def _operator(name, meth, slow):
    """`slow` (the Tensor method the op stack installed) with a bound plan in front of it."""
    table = _table()
    reflected = meth.startswith("__r")
    rules = _binary_rules(name)
    no_kw = _grads()._NO_KW
    verified = _table()  # (key, pattern) -> the rule a full call was seen to record

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
        rec = False
        if number:
            ok = to
        elif to is Tensor or to is _Parameter:
            if reflected:
                return slow(self, other)
            rec = _grad.enabled and _recorded(other)
            ok = (other.dtype, other._shape, other._strides, other._offset & 3)
        else:
            return slow(self, other)
        ts = type(self)
        if ts is not Tensor and ts is not _Parameter:
            return slow(self, other)
        if rec or (
            _grad.enabled
            and (self.requires_grad or (self._base is not None and self._base.requires_grad))
        ):  # (_recorded(self) written out: the call costs ~0.1 µs of every bound call's ~5)
            return recorded(self, other, number, ok)
        key = (self.dtype, self._shape, self._strides, self._offset & 3, ok)
        plan = table.get(key)
        dev = _backend._current
        if plan is None or plan[0] is not dev or dev._tape is not None:
            return _full(self, other, key)
        return _run(plan, dev, self, other, number)

    def recorded(self, other, number, ok):
        """A call autograd records: the bound plan's dispatch, then the node the full path
        makes (its op name, rule and arguments), where a full call of this layout and pattern
        of operands requiring grad was seen to make exactly that node (`verified`; a reflected
        call, `2 - x`, records (2, x) as the full path does). Views of a tensor that requires
        grad and the comparisons take the full path."""
        if not rules or (self._base is not None and _recorded(self)):
            return slow(self, other)
        if reflected:  # (other is a number: a tensor's reflected call took the full path)
            pattern, args = (False, self.requires_grad), (other, self)
        elif number:
            pattern, args = (self.requires_grad, False), (self, other)
        elif other._base is not None and _recorded(other):
            return slow(self, other)
        else:
            pattern, args = (self.requires_grad, other.requires_grad), (self, other)
        key = (self.dtype, self._shape, self._strides, self._offset & 3, ok)
        plan = table.get(key)
        dev = _backend._current
        rule = rules(pattern)
        if (
            plan is None
            or plan[0] is not dev
            or dev._tape is not None
            or (verified.get((key, pattern)) is not rule)
        ):
            r = _full(self, other, key)
            if _static_node(r, name, rule, args):
                verified.keep((key, pattern), rule, LIMIT)
            return r
        return _record(name, rule, args, no_kw, _run(plan, dev, self, other, number))

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


def _run_unary(plan, dev, x):
    """The result of a unary op on x by its bound plan's one dispatch."""
    _, src, static, grid, n, res, shape, lay = plan
    out = empty_laid(dev, shape, res, lay)
    dev.dispatch(src, [x._storage.buffer, out._storage.buffer], (n, 0, x._offset, *static), grid)
    return out


def _unary(label, slow):
    """`slow` (a unary op's Tensor method `label`) with a bound plan in front of it."""
    table = _table()
    verified = _table()  # layout -> (op name, rule) a full recorded call was seen to record
    eg = _grads()
    no_kw, unary_rules = eg._NO_KW, eg.UNARY_RULES

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
        if args or kwargs or (tx is not Tensor and tx is not _Parameter):
            return slow(x, *args, **kwargs)
        if _grad.enabled and (
            x.requires_grad or (x._base is not None and x._base.requires_grad)
        ):  # (_recorded(x) written out, as in _operator's fn)
            return recorded(x)
        key = (x.dtype, x._shape, x._strides, x._offset & 3)
        plan = table.get(key)
        dev = _backend._current
        if plan is None or plan[0] is not dev or dev._tape is not None:
            return _full(x, key)
        return _run_unary(plan, dev, x)

    def recorded(x):
        """A call autograd records: the plan's dispatch, then the node a full call of this
        layout was seen to record (`verified`: its op name and static rule); a view of a
        tensor that requires grad takes the full path."""
        if x._base is not None:
            return slow(x)
        key = (x.dtype, x._shape, x._strides, x._offset & 3)
        plan = table.get(key)
        dev = _backend._current
        seen = verified.get(key)
        if plan is None or plan[0] is not dev or dev._tape is not None or seen is None:
            r = _full(x, key)
            node = getattr(r, "grad_fn", None) if type(r) is Tensor else None
            rule = unary_rules.get(node._name) if node is not None else None
            if rule is not None and _static_node(r, node._name, rule, (x,)):
                verified.keep(key, (node._name, rule), LIMIT)
            return r
        return _record(seen[0], seen[1], (x,), no_kw, _run_unary(plan, dev, x))

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
