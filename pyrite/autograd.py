"""Reverse-mode automatic differentiation: grad mode, the graph, `backward`, `grad`, `Function`.

How a gradient is recorded. An op whose inputs require grad (and grad mode on) attaches a `Node`
to its output: the op's name, its backward *rule*, the arguments it was called with and an alias
of its output. A rule is a plain Python function `rule(ctx, grad) -> grads` written with pyrite
ops (so a traced training step records forward, backward and update alike, and a rule run with
`create_graph=True` is itself recorded: double backward). Rules live beside each op's forward:
the elementwise engine records inside `binary`/`unary` (ops/elementwise.py, so every operator,
in-place method and composite built on them is covered), and other op modules list theirs in a
module-level `GRADS = {function name: rule}` that `install` wraps around the public functions
and Tensor methods (the forward then runs with recording off, so its internals add nothing).

A public op with neither gives an output whose backward raises NotImplementedError naming the op:
a missing rule is an error, never a silently absent gradient.

Cost: with grad mode off or no input requiring grad, a wrapped op pays one mode check and one
scan of its arguments (~0.3 µs of the ~11 µs eager op). Recording adds one Node (slots) and a
reference to the arguments.

The engine: `backward(tensors, grad_tensors)` orders the graph reachable from the roots (an
iterative depth-first search: deep graphs do not hit Python's recursion limit), walks it from the
roots, sums each node's incoming gradients, calls its rule, sums broadcast gradients back to each
input's shape (`_unbroadcast`), and accumulates into the leaves' `.grad`. Saved tensors carry
their storage's version (bumped by every in-place op): a rule whose inputs were modified after
the forward raises PyTorch's error instead of computing a wrong gradient.
"""

from __future__ import annotations

import functools
import inspect
import math
import threading
import weakref

import numpy as np

from . import dtypes as D
from .tensor import Tensor


class _State(threading.local):
    """Per-thread autograd state. The defaults live on the class: a thread that never set a
    value reads them as plain attributes (getattr with a default on a bare threading.local
    raises and catches an AttributeError inside, ~0.6 µs, and every public op asks `enabled`)."""

    enabled = True  # grad mode
    inference = False
    anomaly = False
    guarded = 0  # depth of _guard bodies running
    guard_names = None  # their op names, innermost last (a list once a guard ran)
    tracer = None  # pyrite.onnx's export trace: sees every op record() is asked to record


_state = _State()


# ---- grad mode -----------------------------------------------------------------------------
def is_grad_enabled() -> bool:
    return _state.enabled


def _set(mode: bool):
    _state.enabled = bool(mode)


class _GradMode:
    """A context manager that is also a decorator, as torch's: `@no_grad()` and `@no_grad`
    (no parentheses) both wrap the function, and a generator function is wrapped step by step
    (the mode holds inside each resumption, not between them, so a streaming `yield` loop
    decorated with no_grad/inference_mode records nothing)."""

    mode = True

    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and cls._no_param_decorator:
            return cls()(args[0])  # used bare: @no_grad
        return super().__new__(cls)

    _no_param_decorator = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self.mode)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def _fresh(self):
        """A new manager with this one's settings (each call of the decorated function
        enters its own)."""
        return type(self)()

    def __call__(self, fn):
        fresh = self._fresh
        if inspect.isgeneratorfunction(fn):
            return _wrap_generator(fresh, fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with fresh():
                return fn(*args, **kwargs)

        return wrapper


def _wrap_generator(fresh, fn):
    """torch's _wrap_generator: run each step of the generator (send, throw, close) inside a
    fresh manager, and hand the values across unchanged."""

    @functools.wraps(fn)
    def generator_context(*args, **kwargs):
        gen = fn(*args, **kwargs)
        try:
            with fresh():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with fresh():
                        gen.close()
                    raise
                except BaseException as exc:
                    with fresh():
                        response = gen.throw(exc)
                else:
                    with fresh():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator_context


class no_grad(_GradMode):
    """Disable gradient recording inside the block (PyTorch's torch.no_grad)."""

    mode = False


class enable_grad(_GradMode):
    mode = True


def is_inference_mode_enabled() -> bool:
    return _state.inference


class inference_mode(_GradMode):
    """no_grad that also reports itself to `is_inference_mode_enabled()` (torch's)."""

    mode = False

    def __new__(cls, mode=True):
        if mode is None or isinstance(mode, bool):
            return object.__new__(cls)
        return cls()(mode)  # used bare: @inference_mode

    def __init__(self, mode=True):
        self.mode = not mode
        self.inference = bool(mode)

    def __enter__(self):
        self._prev_inference = is_inference_mode_enabled()
        _state.inference = self.inference
        return super().__enter__()

    def __exit__(self, *exc):
        _state.inference = self._prev_inference
        return super().__exit__(*exc)

    def _fresh(self):
        return inference_mode(self.inference)


class set_grad_enabled(_GradMode):
    """Set the mode now (a function call), and restore it when used as a context manager. As a
    decorator it puts the mode back at once (torch's) and sets it inside each call."""

    _no_param_decorator = False

    def __init__(self, mode: bool):
        self._prev = is_grad_enabled()
        self.mode = bool(mode)
        _set(mode)

    def __enter__(self):
        return self

    def _fresh(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        _set(self._prev)
        return super().__call__(fn)


# ---- anomaly detection ---------------------------------------------------------------------
class set_detect_anomaly:
    """Check every gradient a rule returns for NaN/inf and name the op that made it: set now
    (a function call), and restored on exit when used as a context manager, as torch's."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = is_anomaly_enabled()
        _state.anomaly = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _state.anomaly = self._prev
        return False


def is_anomaly_enabled() -> bool:
    return _state.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    return is_anomaly_enabled()


class detect_anomaly:
    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = is_anomaly_enabled()
        set_detect_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc):
        set_detect_anomaly(self._prev)
        return False


# ---- version counters ----------------------------------------------------------------------
def _version(t) -> int:
    return getattr(t._storage, "version", 0)


def mark_written(t):
    """Record that `t`'s storage was written in place (every view of it sees the new version);
    not for a `.data` alias (torch's has a version counter of its own)."""
    if getattr(t, "_untracked", False):
        return
    s = t._storage
    s.version = getattr(s, "version", 0) + 1


# ---- the graph -----------------------------------------------------------------------------
_FREED = object()


class Node:
    """One recorded op: `rule(ctx, grad)` gives the gradients of its inputs.

    `edges[i]` is where the gradient of input i goes: None (no gradient), ("leaf", tensor) or
    ("node", node, output number); `meta[i]` the input's (shape, dtype) for the sum back to it.
    """

    __slots__ = (
        "_name",
        "rule",
        "args",
        "kwargs",
        "out",
        "edges",
        "meta",
        "versions",
        "n_out",
        "outs",
        "needs",
        "saved",
        "__weakref__",
    )

    def __repr__(self):
        return f"<{self._name}Backward>"

    # `name` reads as the op's name ("mul", == comparisons) and, called, as torch's
    # `grad_fn.name()` ("mulBackward"; torch's would be "MulBackward0")
    @property
    def name(self):
        return _OpName(self._name)

    @name.setter
    def name(self, value):
        self._name = value

    def name_(self):
        return f"{self._name}Backward"

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) after this node ran; may return new grad_inputs
        (torch.autograd.graph.Node.register_hook)."""
        return _node_hook_list(self, 1).append_handle(fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) before this node runs; may return new grad_outputs."""
        return _node_hook_list(self, 0).append_handle(fn)

    @property
    def metadata(self):
        return _node_hooks(self, create=True)[3]

    @property
    def next_functions(self):
        out = []
        for e in self.edges:
            if e is None:
                out.append((None, 0))
            elif e[0] == "leaf":
                out.append((_keep_accumulator(self, e[1]), 0))
            else:
                out.append((e[1], e[2]))
        return tuple(out)

    # the rule's view of the call
    @property
    def saved_tensors(self):
        if type(self.saved) is FunctionCtx:
            return self.saved.saved_tensors
        return self.saved

    def arg(self, i, name, default=None):
        """The forward's argument at position `i` or keyword `name` (rules read dims, sizes and
        flags through this: a caller may pass them either way)."""
        a = self.args
        if a is not _FREED and len(a) > i:
            return a[i]
        return self.kwargs.get(name, default)


class AccumulateGrad:
    """What a leaf's gradient flows into: one per leaf while anything holds it (a node whose
    `next_functions` named it, a GradientEdge, the caller), as torch's, so hooks registered on it
    run at every backward that accumulates into the leaf: prehooks fn((grad,)) after the
    tensor's own hooks (a tuple returned replaces the gradient), posthooks fn((), (grad,)) after
    `.grad` is written and the post-accumulate hooks ran. `autograd.grad` runs neither (it
    accumulates nothing)."""

    next_functions = ()
    __slots__ = ("variable", "_hooks", "__weakref__")

    def __init__(self, variable):
        self.variable = variable
        self._hooks = None  # [prehooks, posthooks, metadata] once asked for

    def __repr__(self):
        return "<AccumulateGrad>"

    def name(self):
        return "torch::autograd::AccumulateGrad"

    def _lists(self):
        if self._hooks is None:
            self._hooks = [_HookList(), _HookList(), {}]
        return self._hooks

    def register_prehook(self, fn):
        return self._lists()[0].append_handle(fn)

    def register_hook(self, fn):
        return self._lists()[1].append_handle(fn)

    @property
    def metadata(self):
        return self._lists()[2]

    def _pre(self, g):
        for h in list(self._hooks[0]):
            r = h((g,))
            if r is not None:
                _check_hook_count(h, r, 1)
                g = r[0]
        return g

    def _post(self, g):
        for h in list(self._hooks[1]):
            r = h((), (g,))
            if r is not None:
                _check_hook_count(h, r, 0)


def _check_hook_count(h, r, n):
    if len(r) != n:
        raise RuntimeError(
            f"pyrite: hook '{getattr(h, '__name__', h)}' has returned an incorrect number of "
            f"values (got {len(r)}, but expected {n})"
        )


_ACCUMULATORS: dict = {}  # id(leaf) -> [weakref(leaf), weakref(its AccumulateGrad)]
_KEPT_ACCUMULATORS: dict = {}  # id(node) -> [weakref(node), [accumulators it keeps alive]]


def grad_accumulator(t, create=True):
    """Leaf t's AccumulateGrad (made on first request; None where none lives and not `create`)."""
    entry = _ACCUMULATORS.get(id(t))
    acc = entry[1]() if entry is not None and entry[0]() is t else None
    if acc is None and create:
        acc = AccumulateGrad(t)
        key = id(t)
        ref = weakref.ref(t, lambda _r, key=key: _ACCUMULATORS.pop(key, None))
        _ACCUMULATORS[key] = [ref, weakref.ref(acc)]
    return acc


def _keep_accumulator(node, t):
    """t's AccumulateGrad, kept alive by `node` (torch's graph holds it while it lives)."""
    acc = grad_accumulator(t)
    kept = _side_entry(_KEPT_ACCUMULATORS, node, True, lambda: ([],))[1]
    if not any(a is acc for a in kept):
        kept.append(acc)
    return acc


def _accumulator_hooks(t):
    """Leaf t's AccumulateGrad where it has hooks, else None."""
    if not _ACCUMULATORS:
        return None
    acc = grad_accumulator(t, create=False)
    return acc if acc is not None and acc._hooks and (acc._hooks[0] or acc._hooks[1]) else None


class _OpName(str):
    """A node's op name that, called, gives torch's `grad_fn.name()` form."""

    __slots__ = ()

    def __call__(self):
        return f"{self}Backward"


# ---- hooks on nodes: torch.autograd.graph.Node.register_hook / register_prehook --------------
_NODE_HOOKS: dict = {}  # id(node) -> (weakref, [prehooks], [posthooks], metadata)


class _HookList(list):
    def append_handle(self, fn):
        self.append(fn)
        return _HookHandle(self, fn)


def _side_entry(table, obj, create, fields):
    """obj's entry in a side table keyed by id (weakref first, then `fields()`), dropped with
    obj; None when it has none and `create` is false."""
    entry = table.get(id(obj))
    if entry is not None and entry[0]() is obj:
        return entry
    if not create:
        return None
    key = id(obj)
    ref = weakref.ref(obj, lambda _r, key=key, d=table: d.pop(key, None))
    entry = table[key] = [ref, *fields()]
    return entry


def _node_hooks(node, create=False):
    return _side_entry(_NODE_HOOKS, node, create, lambda: (_HookList(), _HookList(), {}))


def _node_hook_list(node, which):
    return _node_hooks(node, create=True)[1 + which]


def _run_prehooks(entry, gs):
    got = tuple(gs)
    for h in list(entry[1]):
        r = h(got)
        if r is not None:
            got = tuple(r)
    return list(got)


def _run_node_posthooks(node, entry, grads, gs):
    """The node's post hooks see torch's grad_inputs: each input's gradient summed to its shape,
    None where the input takes none."""
    g_in = []
    for i, e in enumerate(node.edges):
        g = grads[i] if i < len(grads) else None
        if e is None or not isinstance(g, Tensor):
            g_in.append(None)
            continue
        shape, dtype = node.meta[i]
        if g._shape != shape or g.dtype is not dtype:
            g = _unbroadcast(g, shape, dtype)
        g_in.append(g)
    g_in = tuple(g_in)
    g_out = tuple(gs) if isinstance(gs, (list, tuple)) else (gs,)
    for h in list(entry[2]):
        r = h(g_in, g_out)
        if r is not None:
            g_in = tuple(r)
    return list(g_in)


# ---- saved tensor hooks: torch.autograd.graph.saved_tensors_hooks ---------------------------
_PACK_HOOKS: list = []  # stack of (pack, unpack); the innermost applies


class _Packed:
    __slots__ = ("value", "unpack")

    def __init__(self, value, unpack):
        self.value, self.unpack = value, unpack


class _PackedArgs(tuple):
    """A node's arguments with its saved tensors packed (unpacked for each run of its rule)."""


def _pack(t):
    pack, unpack = _PACK_HOOKS[-1]
    return _Packed(pack(t), unpack)


def _pack_one(a):
    if isinstance(a, Tensor):
        return _pack(a)
    if isinstance(a, tuple) and any(isinstance(x, Tensor) for x in a):
        return tuple(_pack(x) if isinstance(x, Tensor) else x for x in a)
    return a


def _unpack_one(a):
    if isinstance(a, _Packed):
        return a.unpack(a.value)
    if isinstance(a, tuple) and any(isinstance(x, _Packed) for x in a):
        return tuple(x.unpack(x.value) if isinstance(x, _Packed) else x for x in a)
    return a


def _pack_node(node):
    """Hand every tensor `node` keeps for its rule (arguments, its output) to the active pack
    hook. The version check still holds the tensors themselves (see autograd_graph.py)."""
    with no_grad():
        node.args = _PackedArgs(_pack_one(a) for a in node.args)
        if node.out is not None:
            node.out = _pack_one(node.out)


def _alias(t):
    """A view of t's storage without its autograd identity (a node saving its own output must
    not hold the output itself: that would be a reference cycle through grad_fn)."""
    return Tensor._make(t._storage, t._shape, t._strides, t._offset, t.dtype)


def output_of(node):
    """`node`'s saved output as a tensor of the graph a double backward records: an alias whose
    grad_fn is the node itself, as torch's saved result (its gradient goes back through the
    node's own rule: no recomputation from the inputs, which may have been written in place
    since, and a hook on the output sees it)."""
    o = _alias(node.out)
    o.grad_fn, o._out_nr, o.requires_grad = node, 0, True
    return o


def _edge(t):
    fn = t.grad_fn
    if fn is not None:
        return ("node", fn, t._out_nr)
    if t.requires_grad:
        return ("leaf", t)
    return None


def needs_grad(*xs) -> bool:
    """Whether recording is on and any of `xs` (tensors or anything else) requires grad."""
    if not _state.enabled:
        return False
    for x in xs:
        if getattr(x, "requires_grad", False) is True:
            return True
    return False


def _differentiable_dtype(t) -> bool:
    return t.dtype.kind in "fc"  # floats and complex64 (ops/complex.py)


def record(name, rule, args, kwargs, out, inplace=False):
    """Attach a Node for `rule` to `out` (a tensor, or a tuple/list of them); returns `out`.

    `args` are the positional arguments of the forward call; the tensors among them that
    require grad become the node's edges. Integer and bool outputs get no node (they are not
    differentiable). An in-place op passes inplace=True: args[0] is the tensor written, and its
    edge is the autograd identity it had before the write (the caller captured it).
    (This runs once per recorded op: it is kept lean.)
    """
    if _state.tracer is not None:  # (pyrite.onnx.export: the op as called, before its node)
        _state.tracer.op(name, args, kwargs, out, inplace)
    node = Node()
    node._name = name
    node.rule = rule
    saves = getattr(rule, "saves", None)
    edges, meta, versions, needs = [], [], [], []
    # a rule marked list_arg takes its tensors from a list in args[0] (cat, stack): the edges
    # are those tensors, then the other positional arguments
    inputs = (*args[0], *args[1:]) if getattr(rule, "list_arg", False) else args
    kept = [] if saves is not None else None
    for i, a in enumerate(inputs):
        if isinstance(a, Tensor):
            e = None
            if a._base is not None and getattr(a, "_agen", 0) != getattr(a._base, "_agen", 0):
                fresh_view(a)
            if a.dtype.kind in "fc":  # (complex: view_as_real / view_as_complex's edges)
                fn = a.grad_fn
                if fn is not None:
                    e = ("node", fn, a._out_nr)
                elif a.requires_grad:
                    e = ("leaf", a)
            edges.append(e)
            meta.append((a._shape, a.dtype))
            needs.append(e is not None)
            if saves is None or i in saves:
                versions.append((i, a, a._storage.version))
                if kept is not None:
                    kept.append(a)
            elif kept is not None:
                # tensors the rule does not read are dropped (memory, and no version check);
                # one whose geometry alone it reads (`rule.geometry`) leaves that behind
                kept.append(Geometry(a) if i in getattr(rule, "geometry", ()) else None)
        else:
            edges.append(None)
            meta.append(None)
            needs.append(False)
            if kept is not None:
                kept.append(a)  # dims, sizes, indices: kept
    reads_for = getattr(rule, "reads_for", None)
    if reads_for is not None and kept is not None and False in needs:
        _drop_unread(reads_for, needs, kept, versions)  # (not when every input needs its grad)
    node.edges = edges
    node.meta = meta
    node.needs = needs
    node.kwargs = kwargs
    node.args = args if kept is None else tuple(kept)
    if inputs is not args:  # list_arg: the rule sees the call's shape, (list, *rest)
        k = len(args[0])
        node.args = (tuple(node.args[:k]), *node.args[k:])
    node.versions = versions
    node.saved = ()
    if isinstance(out, (tuple, list)):
        outs = list(out)
        node.n_out = len(outs)
    else:
        outs = (out,)
        node.n_out = 0
    refs = []
    for k, o in enumerate(outs):
        if isinstance(o, Tensor) and o.dtype.kind in "fc":
            if _HOOKS and o.grad_fn is not None:
                _retire_hooks(o)  # (an in-place write or a view's new history: a new version)
            o.grad_fn = node
            o._out_nr = k
            o.requires_grad = True
            refs.append(weakref.ref(o))
            if o._base is not None and not inplace:
                _own_result(o, inputs)
        else:
            refs.append(None)
    node.outs = refs
    if saves is None or "out" in saves:
        if node.n_out:
            node.out = tuple(_alias(o) if isinstance(o, Tensor) else o for o in outs)
        else:
            node.out = _alias(out)
        # the version check reads the aliases (same storage): holding `o` itself here would be
        # a reference cycle through o.grad_fn, so a step's graph and the buffers it saved would
        # wait for the garbage collector instead of going back to the pool when it dies
        # a rule of a multi-output op may read only some outputs (sort's indices, not its
        # values: `rule.out_reads`); writing the others in place is then allowed, as in torch
        reads = getattr(rule, "out_reads", None) if node.n_out else None
        for k, a in enumerate(node.out if node.n_out else (node.out,)):
            if isinstance(a, Tensor) and (reads is None or k in reads):
                versions.append(("out", a, a._storage.version))
    else:
        node.out = None
    if _PACK_HOOKS:
        _pack_node(node)
    return out


def _own_result(o, inputs):
    """An op's result that is a view of a tensor the op made itself (linear of a 1-D input: a
    view of its 2-D GEMM output; attention's output in its inputs' head layout) is, to the
    caller, a new tensor: it loses the internal base, so an in-place op on it rebases its own
    history instead of the invisible base's (which would drop its gradient). A view of an
    input (reshape, transpose, ...) keeps its base."""
    st = o._storage
    for a in inputs:
        if isinstance(a, Tensor) and a._storage is st:
            return
        if isinstance(a, (list, tuple)) and any(
            isinstance(x, Tensor) and x._storage is st for x in a
        ):
            return
    o._base = None


def _drop_unread(reads_for, needs, kept, versions):
    """Drop the saved inputs read only for gradients no input needs: `reads_for[i]` is the
    input whose gradient alone reads input i (a product's operand is read for the other's:
    torch saves mat2 only when mat1 requires grad, so `y = x @ w` with x data lets an optimizer
    step write w before a second backward through y, as torch does). In place, after record's
    loop has found which inputs need a gradient (a few list reads: this runs on every product)."""
    n = len(needs)
    for i, j in reads_for.items():
        if i < n and kept[i] is not None and not (j < n and needs[j]):
            kept[i] = None
            for k, v in enumerate(versions):  # (input i's entry: one at most)
                if v[0] == i:
                    del versions[k]
                    break


class Geometry:
    """What a rule that reads an input's layout but not its values keeps of it (as_strided's
    gradient: its shape, strides and offset), in place of the tensor: no storage held, no
    version check, so writing the input in place before the backward is allowed, as in torch
    (a double backward through an in-place write into a view: `v[1:4].mul_(3)`)."""

    __slots__ = ("_shape", "_strides", "_offset", "dtype")

    def __init__(self, t):
        self._shape, self._strides, self._offset, self.dtype = (
            tuple(t._shape),
            tuple(t._strides),
            t._offset,
            t.dtype,
        )

    @property
    def shape(self):
        return self._shape

    def numel(self) -> int:
        return math.prod(self._shape)

    def is_contiguous(self) -> bool:
        from .tensor import _is_contiguous

        return _is_contiguous(self._shape, self._strides)


def saves(*what):
    """Decorator for a rule: the argument positions (and "out") it reads. Others are not kept
    alive by the graph, and modifying them in place after the forward is allowed."""

    def deco(rule):
        rule.saves = frozenset(what)
        return rule

    return deco


# ---- hooks and retained gradients (side tables: Tensor has fixed slots) ---------------------
_HOOKS: dict = {}  # id(tensor) -> (weakref, [hooks], retains_grad)


def _hooks_of(t, create=False):
    return _side_entry(_HOOKS, t, create, lambda: ([], False))


# id(node) -> (weakref, {output number: [hooks]}): the hooks a tensor had when it was given a
# new history, kept with the node of the version they were registered on (_retire_hooks)
_VERSION_HOOKS: dict = {}


def _retire_hooks(t):
    """t is given a new history (an in-place write into it or into its base, or a view's history
    re-derived from its base's): the hooks registered on it so far stay with its old version's
    node and see that version's gradient, as torch's do; hooks registered from now on, and
    retain_grad, follow t's new version (the engine runs t's own only at t.grad_fn)."""
    entry = _hooks_of(t)
    if entry is None or not entry[1]:
        return
    kept = _side_entry(_VERSION_HOOKS, t.grad_fn, True, lambda: ({},))[1]
    k = t._out_nr
    if k in kept:
        kept[k].extend(entry[1])
    else:
        kept[k] = entry[1]  # (the list itself: a handle's remove() still reaches its hook)
    entry[1] = []


class _HookHandle:
    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _current(t):
    """t; if it is a view whose base was written in place since its history was taken, with its
    current history (fresh_view), as torch's grad_fn regenerates it on any access: autograd's
    inputs and outputs, hooks and retain_grad name that version (`v = h[0]; h.mul_(2);
    grad(out, v)` is the gradient of the new v)."""
    return t if t._base is None else fresh_view(t)  # (fresh_view: nothing if up to date)


def register_hook(t, hook):
    _current(t)
    if not t.requires_grad:
        raise RuntimeError(
            "pyrite: cannot register a hook on a tensor that doesn't require gradient"
        )
    entry = _hooks_of(t, create=True)
    entry[1].append(hook)
    return _HookHandle(entry[1], hook)


_POST_HOOKS: dict = {}  # id(leaf) -> (weakref, [hooks]): run after .grad is accumulated


def register_post_accumulate_grad_hook(t, hook):
    """hook(t) after backward has accumulated into leaf t's .grad (torch's; optimizer-in-backward
    recipes step a parameter there)."""
    if not t.requires_grad:
        raise RuntimeError(
            "pyrite: cannot register a hook on a tensor that doesn't require gradient"
        )
    if t.grad_fn is not None:
        raise RuntimeError(
            "pyrite: post accumulate grad hooks cannot be registered on non-leaf tensors"
        )
    entry = _side_entry(_POST_HOOKS, t, True, lambda: ([],))
    entry[1].append(hook)
    return _HookHandle(entry[1], hook)


def _run_post_hooks(t):
    entry = _side_entry(_POST_HOOKS, t, False, None)
    if entry is not None:
        for h in list(entry[1]):
            h(t)


def retain_grad(t):
    _current(t)
    if not t.requires_grad:
        raise RuntimeError("pyrite: can't retain_grad on Tensor that has requires_grad=False")
    if t.grad_fn is None:
        return  # a leaf keeps its .grad anyway
    _hooks_of(t, create=True)[2] = True


def retains_grad(t) -> bool:
    if t.grad_fn is None:
        return False
    entry = _hooks_of(t)
    return bool(entry and entry[2])


def _run_hooks(t, g):
    entry = _hooks_of(t)
    if entry is None:
        return g
    return _call_hooks(entry[1], g)


def _call_hooks(hooks, g):
    for h in list(hooks):
        r = h(g)
        if r is not None:
            g = r
    return g


# ---- the engine ----------------------------------------------------------------------------
def _unbroadcast(g, shape, dtype):
    """g summed back to `shape` (the input was broadcast to g's shape), cast to `dtype`."""
    from .ops.reduce import sum as _sum

    gs = tuple(g._shape)
    if gs != tuple(shape):
        lead = len(gs) - len(shape)
        if lead < 0:  # (a value of leading 1-dims assigned into fewer dims: x[i, j] = v of (1,))
            g = g.reshape((1,) * -lead + gs)
            gs, lead = tuple(g._shape), 0
        dims = list(range(lead))
        for i, n in enumerate(shape):
            if n == 1 and gs[lead + i] != 1:
                dims.append(lead + i)
        if dims:
            g = _sum(g, dim=dims, keepdim=True)
        if lead:
            g = g.reshape(shape)
        elif tuple(g._shape) != tuple(shape):
            g = g.reshape(shape)
    if g.dtype is not dtype and dtype.is_floating_point:
        g = g.to(dtype)
    return g


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _topo(roots):
    """Nodes reachable from `roots`, each after every node that feeds it a gradient."""
    order, seen = [], set()
    stack = [(n, False) for n in roots]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for e in node.edges:
            if e is not None and e[0] == "node" and id(e[1]) not in seen:
                stack.append((e[1], False))
    order.reverse()  # roots first
    return order


def _needed(order, cap_ids, cap_nodes) -> dict:
    """id(node) -> whether its rule must run, for the nodes a capture needs (absent: neither
    it nor what it feeds leads to a captured gradient). A node whose output is captured is
    needed for that; its rule runs only where one of its edges leads on to another."""
    has_cap = {k[0] for k in cap_nodes}
    needed: dict = {}
    for node in reversed(order):  # (what a node feeds comes after it in `order`)
        run = False
        for e in node.edges:
            if e is None:
                continue
            if e[0] == "leaf":
                run = id(e[1]) in cap_ids
            else:
                run = id(e[1]) in needed
            if run:
                break
        if run or id(node) in has_cap:
            needed[id(node)] = run
    return needed


def _check_versions(node, only=None):
    """PyTorch's error where a saved tensor was modified in place after the forward. Tensors a
    rule keeps only to recompute its output in a double backward (`rule.soft`) are checked
    when that happens (`only`), not for a first-order backward that does not read them."""
    soft = getattr(node.rule, "soft", ())
    for key, t, v in node.versions:
        if t._storage.version == v:  # (the common case first: this runs for every node)
            continue
        if (key in soft) if only is None else (key not in only):
            continue
        now = _version(t)
        if now != v:
            what = "output" if key == "out" else f"input {key}"
            raise RuntimeError(
                "pyrite: one of the variables needed for gradient computation has been modified "
                f"by an inplace operation: [{t.dtype!r} of shape {list(t._shape)}] ({what} of "
                f"{node.name}) is at version {now}; expected version {v} instead. Hint: make "
                "the in-place op out of place, or clone() the tensor first."
            )


def _check_finite(node, grads):
    from .ops.elementwise import isfinite

    for i, g in enumerate(grads):
        if g is not None and g.numel() and not bool(isfinite(g).all().item()):
            raise RuntimeError(
                f"pyrite: Function '{node.name}Backward' returned nan values in its {i}th output."
            )


def _span(t):
    """The element range [first, past last] a tensor's view covers in its storage."""
    if not t.numel():
        return t._offset, t._offset
    far = sum((n - 1) * abs(s) for n, s in zip(t._shape, t._strides))
    return t._offset, t._offset + far + 1


def _take(taken: dict, t):
    taken.setdefault(id(t._storage), []).append(_span(t))


def _overlaps(taken: dict, t) -> bool:
    lo, hi = _span(t)
    return any(a < hi and lo < b for a, b in taken.get(id(t._storage), ()))


_ENGINE_RUNS: list = []  # one list per backward in progress: callbacks run when it ends


class _Run(list):
    """One backward in progress: callbacks to run when it ends, and the ids of the nodes it
    walks (`nodes`, set once ordered)."""

    nodes: dict = {}


def _backward_run(roots, retain_graph, create_graph, capture=None):
    """`_engine` with the backward's end callbacks (the profiler finds `_engine`'s frame)."""
    run = _Run()
    _ENGINE_RUNS.append(run)
    try:
        got = _engine(roots, retain_graph, create_graph, capture)
    finally:
        _ENGINE_RUNS.pop()
    for cb in run:  # (register_multi_grad_hook's "all" mode)
        cb()
    return got


def _engine(roots, retain_graph, create_graph, capture=None):
    """Run backward from `roots` [(tensor, grad)]. With `capture` (a list of tensors), return
    their gradients instead of accumulating into leaves (autograd.grad)."""
    pending: dict = {}  # id(node) -> [grads per output]
    leaf: dict = {}  # id(tensor) -> [tensor, grad]
    captured: dict = {}
    cap_ids = {id(t): t for t in capture} if capture is not None else {}
    cap_nodes = {}
    for t in capture or ():
        if t.grad_fn is not None:
            cap_nodes[(id(t.grad_fn), t._out_nr)] = t
    root_nodes = []
    for t, g in roots:
        if t.grad_fn is None:
            if not t.requires_grad:
                raise RuntimeError(
                    "pyrite: element 0 of tensors does not require grad and does not have a grad_fn"
                )
            if id(t) in cap_ids:
                captured[id(t)] = _add(captured.get(id(t)), g)
            else:
                slot = leaf.setdefault(id(t), [t, None])
                slot[1] = _add(slot[1], g)
            continue
        fn = t.grad_fn
        slots = pending.setdefault(id(fn), [None] * max(fn.n_out, 1))
        slots[t._out_nr] = _add(slots[t._out_nr], g)
        root_nodes.append(fn)
    anomaly = is_anomaly_enabled()
    order = _topo(root_nodes)
    runs = None if capture is None else _needed(order, cap_ids, cap_nodes)
    if runs is not None:  # (autograd.grad: only the nodes on a path to its inputs, as torch)
        order = [n for n in order if id(n) in runs]
    if _ENGINE_RUNS:
        _ENGINE_RUNS[-1].nodes = {id(n): n for n in order}
        _ENGINE_RUNS[-1].leaves = {id(t) for t in leaf}
    with set_grad_enabled(create_graph):
        for node in order:
            gs = pending.pop(id(node), None)
            if gs is None:
                continue
            if _HOOKS or cap_nodes or _VERSION_HOOKS:  # (else nothing to run or capture)
                old = _side_entry(_VERSION_HOOKS, node, False, None) if _VERSION_HOOKS else None
                for k, ref in enumerate(node.outs):
                    if gs[k] is None:
                        continue
                    key = (id(node), k)
                    # an input of autograd.grad whose node runs on (its gradient goes further,
                    # to another input) is captured before its tensor's hooks, which run as
                    # the node does; one whose node stops here, after them (torch's engine:
                    # "NOTE [Hooks ordering]")
                    early = key in cap_nodes and runs[id(node)]
                    if early:
                        c = id(cap_nodes[key])
                        captured[c] = _add(captured.get(c), gs[k])
                    if old is not None and k in old[1]:  # an earlier version's hooks
                        gs[k] = _call_hooks(old[1][k], gs[k])
                    t = ref() if ref is not None else None
                    # t's own hooks and retain_grad belong to its current version: a node it
                    # had before an in-place write runs only what was registered then (above)
                    if t is not None and t.grad_fn is node:
                        gs[k] = _run_hooks(t, gs[k])
                        if retains_grad(t):  # (accumulates across backward calls, as torch)
                            g_ = gs[k] if create_graph else gs[k].detach()
                            t.grad = g_ if t.grad is None else t.grad + g_
                    if key in cap_nodes and not early:
                        c = id(cap_nodes[key])
                        captured[c] = _add(captured.get(c), gs[k])
            if runs is not None and not runs[id(node)]:
                continue  # (an input's own node: its gradient is captured, not passed on)
            if node.args is _FREED:
                raise RuntimeError(
                    "pyrite: Trying to backward through the graph a second time (or directly "
                    "access saved tensors after they have already been freed). Saved "
                    "intermediate values of the graph are freed when you call .backward() or "
                    "autograd.grad(). Specify retain_graph=True if you need to backward through "
                    "the graph a second time."
                )
            _check_versions(node)
            hooks = _node_hooks(node) if _NODE_HOOKS else None
            if hooks is not None and hooks[1]:
                gs = _run_prehooks(hooks, gs)
            packed = type(node.args) is _PackedArgs
            if packed:
                kept = node.args, node.out
                node.args = tuple(_unpack_one(a) for a in kept[0])
                node.out = _unpack_one(kept[1])
            try:
                res = node.rule(node, gs if node.n_out else gs[0])
            finally:
                if packed:
                    node.args, node.out = kept
            if isinstance(res, dict):
                grads = [res.get(i) for i in range(len(node.edges))]
            elif isinstance(res, (tuple, list)):
                grads = list(res) + [None] * (len(node.edges) - len(res))
            else:
                grads = [res] + [None] * (len(node.edges) - 1)
            if hooks is not None and hooks[2]:
                grads = _run_node_posthooks(node, hooks, grads, gs if node.n_out else gs[0])
            if anomaly:
                _check_finite(node, grads)
            for i, e in enumerate(node.edges):
                g = grads[i]
                if e is None or g is None:
                    continue
                if not isinstance(g, Tensor):
                    raise TypeError(
                        f"pyrite: the backward of {node.name} returned {type(g).__name__} for "
                        f"input {i}, not a Tensor"
                    )
                shape, dtype = node.meta[i]
                if g._shape != shape or g.dtype is not dtype:
                    g = _unbroadcast(g, shape, dtype)
                if not create_graph and g.requires_grad:
                    g = g.detach()
                if e[0] == "leaf":
                    t = e[1]
                    if id(t) in cap_ids:
                        captured[id(t)] = _add(captured.get(id(t)), g)
                    else:
                        slot = leaf.setdefault(id(t), [t, None])
                        slot[1] = _add(slot[1], g)
                else:
                    fn, k = e[1], e[2]
                    slots = pending.setdefault(id(fn), [None] * max(fn.n_out, 1))
                    slots[k] = _add(slots[k], g)
            if not retain_graph:
                node.args = _FREED
                node.out = None
                if type(node.saved) is FunctionCtx:  # (reading them now raises, as torch)
                    node.saved._saved = _FREED
                    node.saved._versions = ()
                else:
                    node.saved = ()
    if capture is not None:  # (a leaf's own hooks run on its captured gradient, as torch)
        got = [captured.get(id(t)) for t in capture]
        if _HOOKS:
            got = [
                _run_hooks(t, g) if g is not None and t.grad_fn is None else g
                for t, g in zip(capture, got)
            ]
        return got
    # memory a leaf's .grad may not adopt: the caller's own gradients, and any already given to
    # another leaf (an add's rule hands both inputs the same g: an RNN's b_ih and b_hh, whose
    # in-place clip_grad_norm_ then scaled the shared storage twice). By element range, not
    # storage: one kernel's outputs may share a buffer side by side (a conv's dw and db)
    taken: dict = {}
    for _, g in roots:
        _take(taken, g)
    for t, g in leaf.values():
        g = _run_hooks(t, g)
        if g is None:
            continue
        acc = _accumulator_hooks(t)
        if acc is not None:
            g = acc._pre(g)
        if not create_graph:
            g = g.detach()
        if t.grad is None:
            # a fresh, contiguous gradient the optimizer may update in place (an expanded or
            # aliased one would refuse writes, or write the graph's own tensors)
            own = g._base is None and g.is_contiguous() and not _overlaps(taken, g)
            t.grad = g if create_graph or own else g.clone()
            _take(taken, t.grad)
        else:
            _accumulate(t, g, create_graph)
        if _POST_HOOKS:
            _run_post_hooks(t)
        if acc is not None:
            acc._post(g)
    return None


def _accumulate(t, g, create_graph) -> None:
    """t.grad += g as torch's AccumulateGrad: in place when the backward builds no graph (so a
    reference to t.grad taken before sees the sum, and the same tensor object stays t.grad),
    a new tensor t.grad + g when it does (create_graph: the sum is part of the graph) or when
    the two differ in shape or dtype, or t.grad cannot take a write (an expanded .grad set by
    hand)."""
    from .ops.overlap import has_internal_overlap

    old = t.grad
    if (
        create_graph
        or old.requires_grad
        or old._shape != g._shape
        or old.dtype is not g.dtype
        or has_internal_overlap(old)
    ):
        t.grad = old + g
        return
    with no_grad():
        old.add_(g)


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, Tensor) or _is_edge(x):
        return [x]
    return list(x)


def _is_edge(x) -> bool:
    return isinstance(x, tuple) and type(x).__name__ == "GradientEdge" and hasattr(x, "node")


class _EdgeEnd:
    """A GradientEdge into a node's output, where the engine takes a tensor (its grad_fn and
    output number; the output's shape where it is still alive)."""

    requires_grad = True

    def __init__(self, node, nr):
        self.grad_fn, self._out_nr = node, nr
        ref = node.outs[nr] if nr < len(node.outs) else None
        o = ref() if ref is not None else None
        self._shape = None if o is None else o._shape
        self.dtype = None if o is None else o.dtype

    def numel(self):
        return 0 if self._shape is None else math.prod(self._shape)


def _ends(xs, what):
    """Tensors and GradientEdges (torch.autograd.graph.get_gradient_edge) as the engine's
    targets: an edge into a leaf's AccumulateGrad is the leaf."""
    out = []
    for x in xs:
        if _is_edge(x):
            node = x.node
            if isinstance(node, AccumulateGrad):
                x = node.variable
            elif isinstance(node, Node):
                x = _EdgeEnd(node, x.output_nr)
            else:
                raise TypeError(f"pyrite: a GradientEdge's node must be a graph node, got {node!r}")
        elif not isinstance(x, Tensor):
            raise TypeError(
                f"pyrite: {what} must be Tensors or GradientEdges, got {type(x).__name__}"
            )
        else:
            _current(x)
        out.append(x)
    return out


def _default_grad(t, g):
    from .ops.creation import ones, ones_like

    if g is None:
        if t.numel() != 1:  # (an edge whose output is gone: its shape is not known here)
            raise RuntimeError("pyrite: grad can be implicitly created only for scalar outputs")
        if not t.dtype.is_floating_point:
            raise RuntimeError(
                "pyrite: grad can be implicitly created only for real scalar outputs"
            )
        return ones_like(t) if isinstance(t, Tensor) else ones(t._shape, dtype=t.dtype)
    if not isinstance(g, Tensor):
        from .ops.creation import tensor

        g = tensor(g, dtype=t.dtype)
    if t._shape is not None and tuple(g._shape) != tuple(t._shape):
        from .errors import ShapeError

        raise ShapeError(
            f"pyrite: Mismatch in shape: grad_output[0] has a shape of {list(g._shape)} and "
            f"output[0] has a shape of {list(t._shape)}."
        )
    return g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaves) into the leaves' `.grad` (torch.autograd.backward)."""
    ts = _ends(_as_list(tensors), "tensors")
    gs = _as_list(grad_tensors) or [None] * len(ts)
    if len(gs) != len(ts):
        raise RuntimeError(
            f"pyrite: grad_tensors has {len(gs)} tensors, tensors has {len(ts)}: one gradient each"
        )
    if retain_graph is None:
        retain_graph = create_graph
    roots = [(t, _default_grad(t, g)) for t, g in zip(ts, gs)]
    if inputs is not None:
        inputs = _ends(_as_list(inputs), "inputs")
        if any(isinstance(t, _EdgeEnd) for t in inputs):
            raise RuntimeError(
                "pyrite: backward(inputs=...) takes GradientEdges into leaves only (a node's "
                "gradient has no .grad to accumulate into): use autograd.grad for those"
            )
        got = _backward_run(roots, retain_graph, create_graph, capture=inputs)
        for t, g in zip(inputs, got):
            if g is not None:
                acc = _accumulator_hooks(t) if t.grad_fn is None else None
                if acc is not None:
                    g = acc._pre(g)
                if t.grad is None:
                    t.grad = g
                else:
                    _accumulate(t, g, create_graph)
                if _POST_HOOKS:
                    _run_post_hooks(t)
                if acc is not None:
                    acc._post(g)
        return
    _backward_run(roots, retain_graph, create_graph)


def grad(
    outputs,
    inputs,
    grad_outputs=None,
    retain_graph=None,
    create_graph=False,
    only_inputs=True,
    allow_unused=None,
    is_grads_batched=False,
    materialize_grads=False,
):
    """d(outputs)/d(inputs), returned as a tuple (torch.autograd.grad); `.grad` is untouched."""
    outs = _ends(_as_list(outputs), "outputs")
    given = _as_list(inputs)
    ins = _ends(given, "inputs")
    gos = _as_list(grad_outputs) or [None] * len(outs)
    if retain_graph is None:
        retain_graph = create_graph
    for t in ins:
        if not t.requires_grad:
            raise RuntimeError("pyrite: One of the differentiated Tensors does not require grad")
    roots = [(t, _default_grad(t, g)) for t, g in zip(outs, gos)]
    got = _backward_run(roots, retain_graph, create_graph, capture=ins)
    res = []
    for x, t, g in zip(given, ins, got):
        if g is None:
            if materialize_grads and _is_edge(x):
                raise RuntimeError(
                    "pyrite: materialize_grads cannot be used when the given input is a "
                    "GradientEdge"
                )
            if materialize_grads:
                from .ops.creation import zeros_like

                g = zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    "pyrite: One of the differentiated Tensors appears to not have been used in "
                    "the graph. Set allow_unused=True if this is the desired behavior."
                )
        res.append(g)
    return tuple(res)


# ---- wrapping public ops -------------------------------------------------------------------
def zero_gradient(name, input, out, defined=True):
    """`out`, a random draw made from `input`'s probabilities or rates (bernoulli, poisson),
    recorded with torch's zero gradient to `input` where input requires grad (so a loss built
    on the draw still backpropagates, with zeros, as torch's does); `defined=False`: with a
    backward that raises, where torch defines none (x.bernoulli(0.3): input gives only a
    shape)."""
    if not (_state.enabled and input.requires_grad):
        return out
    return record(name, _g_zero_draw if defined else _not_implemented(name), (input,), {}, out)


def _g_zero_draw(ctx, g):
    return (g.new_zeros(g.shape),)


_g_zero_draw.saves = frozenset()


def _not_implemented(name):
    def rule(ctx, g):
        raise NotImplementedError(
            f"pyrite: the gradient of {name} is not implemented yet (its inputs require grad); "
            "compute it under pyrite.no_grad(), or detach() its inputs"
        )

    rule.saves = frozenset()
    rule._placeholder = True
    return rule


def _tensor_kwargs(fn):
    """Names and positions of fn's parameters, to move tensor keyword arguments to positions."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    pos = {}
    for i, p in enumerate(params):
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos[p.name] = i
    return pos, params


def wrap(fn, name, rule, inplace=False):
    """`fn` recording `rule` when its inputs require grad (rule None: a guard that makes the
    backward raise NotImplementedError naming `name`)."""
    if getattr(fn, "_pyrite_grad", False):
        return fn
    if rule is None:
        return _guard(fn, name)
    sig_cache = []

    def positional(args, kwargs):
        # tensors passed by keyword (F.layer_norm(x, s, weight=w)) become positional arguments,
        # so rules see one calling convention
        if not kwargs or not any(isinstance(v, Tensor) for v in kwargs.values()):
            return args, kwargs
        if not sig_cache:
            sig_cache.append(_tensor_kwargs(fn))
        info = sig_cache[0]
        if info is None:
            return args, kwargs
        pos, params = info
        args = list(args)
        rest = {}
        for k, v in kwargs.items():
            i = pos.get(k)
            if i is None:
                rest[k] = v
                continue
            while len(args) < i:
                p = params[len(args)]
                args.append(p.default if p.default is not p.empty else None)
            if len(args) == i:
                args.append(v)
            else:
                args[i] = v
        return tuple(args), rest

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not _state.enabled:
            if inplace and args and isinstance(args[0], Tensor):
                r = fn(*args, **kwargs)
                mark_written(args[0])
                return r
            return fn(*args, **kwargs)
        hit = _any_requires(args, kwargs)
        if not hit:
            r = fn(*args, **kwargs)
            if inplace and args and isinstance(args[0], Tensor):
                mark_written(args[0])
            return r
        if kwargs.get("out") is not None:
            raise RuntimeError(
                f"pyrite: {name}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad."
            )
        args, kwargs = positional(args, kwargs)
        if inplace:
            return _inplace_call(fn, name, rule, args, kwargs)
        _state.enabled = False  # no_grad(), without a context manager's calls (the hot path)
        try:
            out = fn(*args, **kwargs)
        finally:
            _state.enabled = True  # (recording runs only with grad mode on)
        for a in args:
            if out is a:
                # the input itself (x.to(x.dtype), x.float(), x.contiguous(): torch returns
                # self): it keeps its own grad_fn; a node attached to it would make a leaf a
                # non-leaf whose edge is itself, and its gradient would count twice
                return out
        return record(name, rule, args, kwargs, out)

    wrapper._pyrite_grad = True
    wrapper._pyrite_raw = fn
    wrapper._pyrite_unrecorded = None if inplace else fn
    return wrapper


def guarded_op_name():
    """The public op (without a rule of its own) whose body is running, innermost, or None:
    a kernel it runs without a gradient names it in the error its backward raises."""
    names = _state.guard_names
    return names[-1] if names else None


def _is_placeholder(fn) -> bool:
    return fn is not None and getattr(fn.rule, "_placeholder", False)


def _guard(fn, name):
    """A public op without its own rule: it runs with recording on (its internals may record,
    a composite of recorded ops is differentiable as it stands); a floating output that still
    has no gradient path, or only a kernel's placeholder, gets a backward that raises naming
    `name`."""
    inplace = name.endswith("_") and not name.endswith("__")

    @functools.wraps(fn)
    def guard(*args, **kwargs):
        if not _state.enabled or not _any_requires(args, kwargs):
            out = fn(*args, **kwargs)
            if inplace and args and isinstance(args[0], Tensor):
                mark_written(args[0])
            return out
        tracer = _state.tracer  # (pyrite.onnx.export: the op as one, where it maps it whole)
        mark = tracer.enter() if tracer is not None else 0
        v0 = None
        if inplace and args and isinstance(args[0], Tensor):
            check_inplace(args[0], name, True)
            v0 = getattr(args[0]._storage, "version", 0)
        depth = _state.guarded
        _state.guarded = depth + 1
        names = _state.__dict__.setdefault("guard_names", [])
        names.append(name)
        try:
            out = fn(*args, **kwargs)
        except ViewWriteError:
            if inplace or kwargs.get("out") is not None:
                # the write is into the caller's tensor (x.mul_(y) on a view reaches
                # binary(..., out=x)): run unrecorded, it would leave the view's base with its
                # old graph, a silently wrong gradient
                raise
            # its internals write in place into views of recorded tensors: no gradient path
            # through them; run it unrecorded, and its output's backward raises naming it
            with no_grad():
                out = fn(*args, **kwargs)
        finally:
            _state.guarded = depth
            names.pop()
        if v0 is not None and getattr(args[0]._storage, "version", 0) == v0:
            # (bumped once: an in-place op inside that recorded itself has bumped it already,
            # and its node expects that version)
            mark_written(args[0])
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if not isinstance(o, Tensor) or not o.dtype.is_floating_point:
                continue
            if o.grad_fn is None and not o.requires_grad:
                record(name, _not_implemented(name), (), {}, o)
            elif _is_placeholder(o.grad_fn):
                o.grad_fn.name = name
                o.grad_fn.rule = _not_implemented(name)
        if tracer is not None:
            tracer.leave(mark, name, args, kwargs, out, inplace)
        return out

    guard._pyrite_grad = True
    guard._pyrite_raw = fn
    # what the wrapper runs when nothing records (grad mode off, or no argument requires grad):
    # a wrapper around it (ops/complex.py) calls it directly then, one call layer less; None for
    # an in-place op, which marks its tensor written
    guard._pyrite_unrecorded = None if inplace else fn
    return guard


# argument types that never carry requires_grad: skipped without an attribute lookup (every
# public op asks _any_requires of every argument, a failing getattr costs ~0.3 µs)
_PLAIN = frozenset((int, float, bool, str, slice, type(None), type(Ellipsis), D.dtype))


def _any_requires(args, kwargs) -> bool:
    for a in args:
        t = type(a)
        if t is Tensor:  # (the common case: its slots read directly, ~0.15 µs an argument)
            if a.requires_grad is True or (a._base is not None and _requires(a)):
                return True
            continue
        if t in _PLAIN:
            continue
        if t is tuple or t is list or isinstance(a, (list, tuple)):
            for x in a:
                if type(x) not in _PLAIN and _requires(x):
                    return True
        elif _requires(a):
            return True
    if kwargs:
        for a in kwargs.values():
            t = type(a)
            # (a tuple or list keyword, dim=(0, 1), has no requires_grad: no getattr misses)
            if t not in _PLAIN and t is not tuple and t is not list and _requires(a):
                return True
    return False


def _requires(a) -> bool:
    if getattr(a, "requires_grad", False) is True:
        return True
    # a view taken before its base was given a history by an in-place op (buf[:2].copy_(w))
    base = getattr(a, "_base", None)
    return base is not None and base.requires_grad and fresh_view(a).requires_grad


def fresh_view(v):
    """torch's lazily regenerated view history: a view whose base has been rebased by an
    in-place op recorded since the view's history was taken (`v = h[0]; h.mul_(2)`, or a write
    through another view of h) reads through the base's new history, as a strided window of it.
    Returns v."""
    b = v._base
    gen = getattr(b, "_agen", 0)
    if getattr(v, "_agen", 0) == gen:
        return v
    v._agen = gen
    if b.requires_grad and is_grad_enabled():
        record("view", _window_rule(b, v), (b,), {}, v)
    return v


def _window_rule(b, v):
    """The backward of `v` (a view of `b`'s storage) as a function of b: v's gradient put into
    zeros shaped like b, summed where v's elements alias (an expanded or unfolded view)."""
    from .tensor import contiguous_strides

    shape = tuple(b._shape)
    window = (tuple(v._shape), tuple(v._strides), v._offset - b._offset)
    if tuple(b._strides) == contiguous_strides(shape) and _injective(window[0], window[1]):

        def view_of_base(ctx, g):
            from .ops.creation import zeros
            from .ops.views import as_strided

            gb = zeros(shape, dtype=g.dtype)
            as_strided(gb, *window).copy_(g)
            return (gb,)

    else:
        # a base laid out otherwise, or a view whose elements alias: v's elements found among
        # b's by storage position (host metadata only), their gradients summed into them
        where = {p: i for i, p in enumerate(_positions(b).tolist())}
        flat = np.array([where[p] for p in _positions(v).tolist()], dtype=np.int32)

        def view_of_base(ctx, g):
            from .ops.creation import tensor, zeros

            gb = zeros(b.numel(), dtype=g.dtype)
            gb.index_add_(0, tensor(flat), g.reshape(-1))
            return (gb.reshape(shape),)

    view_of_base.saves = frozenset()
    return view_of_base


def _positions(t):
    """The storage position of each element of t, in t's element order (numpy int64)."""
    pos = np.full(tuple(t._shape), t._offset, dtype=np.int64)
    for d, (n, st) in enumerate(zip(t._shape, t._strides)):
        pos = pos + (np.arange(n, dtype=np.int64) * st).reshape(
            [-1 if k == d else 1 for k in range(len(t._shape))]
        )
    return pos.reshape(-1)


def _injective(shape, strides) -> bool:
    """No two elements of the view share a storage position: with the dims sorted by |stride|,
    each stride passes the extent of the smaller ones (sufficient; other layouts are checked
    element by element)."""
    span = 0
    dims = sorted(((abs(st), n) for n, st in zip(shape, strides) if n > 1))
    if any(n == 0 for n in shape):
        return True
    for st, n in dims:
        if st <= span:
            break
        span += (n - 1) * st
    else:
        return True
    pos = np.zeros(1, dtype=np.int64)
    for n, st in zip(shape, strides):
        pos = (pos[:, None] + np.arange(n, dtype=np.int64)[None, :] * st).reshape(-1)
    return len(np.unique(pos)) == len(pos)


class ViewWriteError(NotImplementedError):
    """An in-place write into a view of a tensor that requires grad (not recorded yet)."""


def check_inplace(t, name, inputs_need=False):
    """PyTorch's refusals for an in-place write into `t` while recording (`inputs_need`: another
    input of the op requires grad)."""
    if not is_grad_enabled():
        return
    if t.requires_grad and t.grad_fn is None:
        raise RuntimeError(
            f"pyrite: a leaf Variable that requires grad is being used in an in-place operation "
            f"({name})."
        )
    base = t._base
    if base is not None and (base.requires_grad or t.requires_grad or inputs_need):
        raise ViewWriteError(
            f"pyrite: {name} writes in place into a view of a tensor that requires grad; "
            "gradients through in-place writes into views are not supported yet: use the "
            "out-of-place op (or torch.where / index_put) instead"
        )


def _aliased_operands(t, operands) -> dict:
    """Copies, taken before `t` is written, of the operands that are other views of t's storage
    (`x3.mul_(x2)` where x3 = x2.view(3)), each with the operand's autograd identity: the
    backward reads the values the forward read, not the ones written over them."""
    got = {}
    for a in operands:
        if isinstance(a, Tensor) and a is not t and a._storage is t._storage:
            if a._base is not None:
                fresh_view(a)
            with no_grad():
                c = a.clone()
            c.requires_grad = a.requires_grad
            if a.grad_fn is not None:
                c.grad_fn, c._out_nr = a.grad_fn, a._out_nr
            got[id(a)] = c
    return got


def _inplace_call(fn, name, rule, args, kwargs):
    """An in-place op while recording: args[0] is written; its old autograd identity becomes the
    edge of input 0, and a copy of its old value is saved where the rule reads it."""
    t = args[0]
    others_need = needs_grad(*args[1:], *kwargs.values())
    base = t._base
    if base is not None and (base.requires_grad or t.requires_grad or others_need):
        return _inplace_view_call(fn, name, rule, args, kwargs)
    check_inplace(t, name, others_need)
    saves_ = getattr(rule, "saves", None)
    old = t
    if saves_ is None or 0 in saves_ or any(a is t for a in args[1:]):
        with no_grad():
            old = t.clone()
        if t.grad_fn is not None:
            old.grad_fn, old._out_nr, old.requires_grad = t.grad_fn, t._out_nr, True
    else:
        old = Tensor._make(t._storage, t._shape, t._strides, t._offset, t.dtype)
        old.requires_grad = t.requires_grad
        if t.grad_fn is not None:
            old.grad_fn, old._out_nr = t.grad_fn, t._out_nr
    before = _aliased_operands(t, args[1:])
    with no_grad():
        out = fn(*args, **kwargs)
    mark_written(t)
    # an operand that is the written tensor itself (y.mul_(y)), or another view of its storage
    # (x.mul_(x.T)), is read as its old value
    rest = tuple(old if a is t else before.get(id(a), a) for a in args[1:])
    record(name, rule, (old, *rest), kwargs, t)
    if base is None:
        t._agen = getattr(t, "_agen", 0) + 1  # its views' histories are re-derived (fresh_view)
    return out


def _inplace_view_call(fn, name, rule, args, kwargs):
    """An in-place op into a view `v` of a base `b` while recording (PyTorch's CopySlices): the
    base's history is rebased. b's new node takes b's old identity and the op's other operands;
    its rule cuts v's region out of b's gradient, runs the op's own rule on it, and puts the
    gradient for v's old value back into the region (the rest of b passes through). v becomes a
    view of the new b. Needs a contiguous base (v's region is then an as_strided window of b's
    gradient); other bases raise ViewWriteError."""
    from .tensor import contiguous_strides

    v = args[0]
    b = v._base
    if _state.guarded:
        # inside a public op without a rule (its own kernels may also write b unrecorded):
        # refuse, so the op runs unrecorded and its backward raises naming it — a rebased
        # history there could give a silently wrong gradient
        raise ViewWriteError(f"pyrite: {name} into a view inside an op without a backward rule")
    # a leaf among the views (v itself, or a view it was taken from, made to require grad while
    # its base does not: `t.reshape(2, 2).requires_grad_()`) is a leaf all the same
    if (b.requires_grad and b.grad_fn is None) or (
        v.requires_grad and (v.grad_fn is None or not b.requires_grad)
    ):
        raise RuntimeError(
            f"pyrite: a view of a leaf Variable that requires grad is being used in an in-place "
            f"operation ({name})."
        )
    if tuple(b._strides) != contiguous_strides(tuple(b._shape)):
        raise ViewWriteError(
            f"pyrite: {name} writes in place into a view of a non-contiguous tensor that "
            "requires grad; not supported yet: use the out-of-place op"
        )
    window = (tuple(v._shape), tuple(v._strides), v._offset - b._offset)
    saves_ = getattr(rule, "saves", None)
    self_operand = any(a is v for a in args[1:])  # v.add_(v): read as v's old value
    with no_grad():
        v_old = v.clone() if saves_ is None or 0 in saves_ or self_operand else None
    b_old = Tensor._make(b._storage, b._shape, b._strides, b._offset, b.dtype)
    b_old.requires_grad = b.requires_grad
    if b.grad_fn is not None:
        b_old.grad_fn, b_old._out_nr = b.grad_fn, b._out_nr
    if v_old is None:
        v_old = Tensor._make(v._storage, v._shape, v._strides, v._offset, v.dtype)
    if b.requires_grad:
        # v's old value is a window of b's old history: the inner rule reads it (mul_'s
        # gradient for its other operand), and a double backward differentiates through it; as
        # an operand of the op itself (v.add_(v)) its gradient goes back to b's old history
        record("view", _window_rule(b_old, v), (b_old,), {}, v_old)
    before = _aliased_operands(v, args[1:])
    with no_grad():
        out = fn(*args, **kwargs)
    mark_written(v)
    rest = tuple(v_old if a is v else before.get(id(a), a) for a in args[1:])
    # the op's own node, on a throwaway alias of the written view: its ctx for the inner rule
    inner = record(name, rule, (v_old, *rest), kwargs, _alias(v)).grad_fn

    def copy_slices(ctx, g):
        from .ops.views import as_strided

        gb = g.contiguous() if not g.is_contiguous() else g.clone()
        region = as_strided(gb, *window)
        got = inner.rule(inner, region.clone())
        grads = list(got) if isinstance(got, (tuple, list)) else [got]
        grads += [None] * (len(inner.edges) - len(grads))
        gv = grads[0]
        if gv is None:
            region.fill_(0.0)
        else:
            region.copy_(_unbroadcast(gv, window[0], v.dtype))
        return (gb, *grads[1:])

    copy_slices.saves = frozenset()
    record(f"CopySlices[{name}]", copy_slices, (b_old, *rest), kwargs, b)
    # every other view of b now reads through b's new history (fresh_view)
    b._agen = v._agen = getattr(b, "_agen", 0) + 1
    record("view", _window_rule(b, v), (b,), {}, v)
    return out


def plain(fn):
    """Mark a public helper that neither computes on tensors nor records (a predicate, an
    argument conversion, a check): install() and the bf16 fallback leave it unwrapped, so the
    ops that call it on every call pay no guard for it."""
    fn._pyrite_plain = True
    return fn


def forwards(fn):
    """Mark a public function whose whole body is a call of one public op, looked up at call
    time (F.linear calling ops.matmul.linear): that op carries the guard, the rule and the bf16
    fallback, so install() and the fallback leave the forwarder unwrapped (one layer of each a
    call, not two)."""
    fn._pyrite_plain = True
    return fn


def install(modules, tensor_cls, skip=(), namespaces=(), any_origin=False):
    """Wrap every public function of `modules` (module attributes, so calls looked up at call
    time get the wrapper) and the Tensor methods bound to them: those a module lists in its
    `GRADS` with their rule, the others with the guard. Modules in `skip` (the elementwise
    engine records inside binary/unary) get only their GRADS entries."""
    import types

    # Tensor methods by every function in their wrapper chains (fallback's and aliases' wrappers
    # sit around the module functions): a method is wrapped as a whole, keeping those layers
    methods: dict = {}
    for meth, mfn in vars(tensor_cls).items():
        f = mfn
        while isinstance(f, types.FunctionType):
            methods.setdefault(id(f), []).append(meth)
            f = getattr(f, "__wrapped__", None)
    for mod in modules:
        short = mod.__name__.rsplit(".", 1)[-1]
        table = getattr(mod, "GRADS", {}) or {}
        # OPAQUE: functions whose internals write kernel outputs into tensors that recorded ops
        # made (a work buffer copied from the input, then factored in place): recorded as
        # they run, their outputs would carry the copy's gradient, silently wrong. Without a
        # rule they run unrecorded and their backward raises.
        opaque = getattr(mod, "OPAQUE", frozenset())
        names = set(table) | set(opaque)
        if short not in skip:
            names |= {
                k
                for k, v in vars(mod).items()
                if not k.startswith("_")
                and isinstance(v, types.FunctionType)
                and (any_origin or v.__module__ == mod.__name__)
            }
        extra = {m: f for m, f in getattr(mod, "METHODS", {}).items() if m in table}
        for fname in sorted(names):
            fn = getattr(mod, fname, None)
            if not isinstance(fn, types.FunctionType) or getattr(fn, "_pyrite_grad", False):
                continue
            if getattr(fn, "_pyrite_plain", False) and fname not in table:
                continue
            if getattr(fn, "records_itself", False) and fname not in table:
                continue  # (binary, unary: the elementwise engine records inside)
            raw = getattr(fn, "__wrapped__", fn)
            inplace = (fname.endswith("_") and not fname.endswith("__")) or fname in getattr(
                mod, "INPLACE", ()
            )
            rule = table.get(fname)
            if rule is None and fname in opaque:
                rule = _not_implemented(fname)
            w = wrap(fn, fname, rule, inplace=inplace)
            setattr(mod, fname, w)
            for ns in namespaces:  # names bound by `from module import fn` before this ran
                for k, v in list(ns.items()):
                    if v is fn:
                        ns[k] = w
            for meth in {*methods.get(id(fn), ()), *methods.get(id(raw), ())}:
                m = tensor_cls.__dict__.get(meth)
                if m is fn:
                    setattr(tensor_cls, meth, w)
                elif isinstance(m, types.FunctionType) and not getattr(m, "_pyrite_grad", False):
                    setattr(tensor_cls, meth, wrap(m, fname, rule, inplace=inplace))
        for meth, fn in extra.items():  # a method name with its own rule (__getitem__)
            if isinstance(fn, types.FunctionType) and tensor_cls.__dict__.get(meth) is fn:
                setattr(tensor_cls, meth, wrap(fn, meth, table[meth]))


# ---- custom functions ----------------------------------------------------------------------
class FunctionCtx:
    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"pyrite: save_for_backward can only save tensors, but argument {tensors.index(t)} "
                    f"is of type {type(t).__name__}"
                )
        self._saved = tensors  # (packed by apply once forward returns, as torch)
        self._versions = tuple((t, t._storage.version) for t in tensors if t is not None)

    @property
    def saved_tensors(self):
        saved = getattr(self, "_saved", ())
        if saved is _FREED:
            raise RuntimeError(
                "pyrite: Trying to backward through the graph a second time (or directly access "
                "saved tensors after they have already been freed). Specify retain_graph=True "
                "if you need to backward through the graph a second time or if you need to "
                "access saved tensors after calling backward."
            )
        for t, v in getattr(self, "_versions", ()):
            if t._storage.version != v:
                raise RuntimeError(
                    "pyrite: one of the variables needed for gradient computation has been "
                    f"modified by an inplace operation: [{t.dtype!r} of shape {list(t._shape)}] "
                    f"is at version {t._storage.version}; expected version {v} instead."
                )
        if any(isinstance(x, _Packed) for x in saved):
            with no_grad():
                return tuple(_unpack_one(x) for x in saved)
        return tuple(saved)

    def mark_non_differentiable(self, *tensors):
        self._non_diff = {id(t) for t in tensors}

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = value


class _FunctionMeta(type):
    pass


def _uses_setup_context(cls) -> bool:
    return cls.setup_context is not _NO_SETUP


class Function(metaclass=_FunctionMeta):
    """A custom differentiable op, as torch.autograd.Function: subclass with static
    `forward(ctx, *args)` and `backward(ctx, *grads)`, or `forward(*args)` with a static
    `setup_context(ctx, inputs, output)`; call `YourFn.apply(*args)` (non-tensor arguments get
    no gradient: backward returns None for them)."""

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(  # (grad mode aside, as torch)
            isinstance(a, Tensor) and a.requires_grad and a.dtype.is_floating_point for a in args
        )
        with no_grad():
            if _uses_setup_context(cls):
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        dirty = getattr(ctx, "_dirty", ())
        for t in dirty:
            if needs_grad(t) and t.grad_fn is None:
                raise RuntimeError(
                    "pyrite: a leaf Variable that requires grad is being used in an in-place "
                    "operation."
                )
            mark_written(t)  # (torch bumps a dirty tensor's version once more)
        if not needs_grad(*args):
            return out
        if _PACK_HOOKS and getattr(ctx, "_saved", ()):
            with no_grad():
                ctx._saved = tuple(None if t is None else _pack(t) for t in ctx._saved)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        shapes = [(o._shape, o.dtype) if isinstance(o, Tensor) else None for o in outs]

        def rule(node, g):
            gs = g if isinstance(g, (list, tuple)) else (g,)
            if getattr(ctx, "materialize_grads", True):
                from .ops.creation import zeros

                gs = tuple(
                    zeros(m[0], dtype=m[1]) if gi is None and m is not None else gi
                    for gi, m in zip(gs, shapes)
                )
            r = cls.backward(ctx, *gs)
            r = r if isinstance(r, tuple) else (r,)
            if len(r) != len(args):
                raise RuntimeError(
                    f"pyrite: function {cls.__name__}Backward returned an incorrect number of "
                    f"gradients (expected {len(args)}, got {len(r)})"
                )
            return r

        rule.saves = frozenset()
        res = record(cls.__name__, rule, args, kwargs, out)
        node = next(
            (o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None), None
        )
        if node is not None:
            node.saved = ctx  # (freed with the graph: the engine drops ctx's saved tensors)
        non_diff = getattr(ctx, "_non_diff", set())
        for o in outs:
            if isinstance(o, Tensor) and id(o) in non_diff:
                o.grad_fn = None
                o.requires_grad = False
        return res

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError


_NO_SETUP = Function.__dict__["setup_context"].__func__


_TWICE = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn):
    """A backward that is not itself differentiable: it runs with recording off. Under
    create_graph=True with an incoming gradient that requires grad, its results are tied to an
    `Error` node, as torch's: a double backward that reaches them raises (one that does not
    reach them, or gradients that require nothing, run as before)."""

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        with no_grad():
            out = fn(ctx, *grads)
        if not is_grad_enabled() or not any(
            isinstance(g, Tensor) and g.requires_grad for g in grads
        ):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        fakes = []
        for o in outs:
            if isinstance(o, Tensor) and o.dtype.is_floating_point:
                o = o.detach()
                o.requires_grad = True  # (a stand-in input: the Error node needs an edge)
            fakes.append(o)
        res = [_alias(o) if isinstance(o, Tensor) else o for o in fakes]
        record("Error", _differentiated_twice, tuple(fakes), {}, res if len(res) > 1 else res[0])
        return tuple(res) if isinstance(out, tuple) else res[0]

    return wrapper


def _differentiated_twice(ctx, g):
    raise RuntimeError(f"pyrite: {_TWICE}")


_differentiated_twice.saves = frozenset()


def __getattr__(name):  # (PEP 562: `pr.autograd.forward_ad` loads on first use, no cycle)
    if name == "forward_ad":
        from . import autograd_forward_ad

        return autograd_forward_ad
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
