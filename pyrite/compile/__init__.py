"""`pr.compile`: trace a function (or a Module's forward) once, replay it in one submission.

The first call of a compiled function runs it eagerly while the device records what it does
(backend/replay.py's Tape): every dispatch, copy and upload, and every buffer those name. The
recording becomes a Graph — info words in one buffer, bind groups built once, buffers held for
the graph — and later calls with the same guards replay it: no Python op runs, each kernel costs
two or three C calls, and the whole step goes to the GPU as one submission (or `chunk` kernels at
a time).

Guards, checked at every call, choose the recording to replay or trace a new one:
- the arguments: each tensor's shape, dtype and requires_grad; every other argument's value;
- grad mode (`pr.no_grad()`);
- the state of the modules, optimizers and schedules the function uses (found in its closure,
  its globals and its arguments, and heard from while it runs): each submodule's `training`,
  which parameters have a `.grad`, which have `requires_grad`, how much optimizer state exists.
  An object first met during a trace makes that trace unreplayable (its state when the call
  began was not known), so such a function runs eagerly once more, then replays.
- a tensor the recording reads but did not make dying (a parameter replaced, a state dict
  loaded): the recording is stale and the next call traces again.
- integer ranges (compile/_ranges.py): each index check the trace passed on a known range
  (ops/ranges.py) is a need evaluated against this call's argument ranges (`input_pos` moving
  each call still replays; one past the end traces again, and that trace raises as eager code
  does); an argument whose range is not known, or too wide for a need, is read back first (one
  round trip, the check eager code would make). A replay leaves the ranges its ops would have
  given on its outputs, the arguments it writes and the outside tensors it writes.

Values that change every call without changing the graph are refreshed, not frozen: an
optimizer's and a schedule's `step()` rerun their host side before each replay and hand the
recorded kernels their new info words (a learning rate, Adam's bias corrections); random kernels
draw a new counter from their generator.

Graph breaks. A function that reads a value back (`.item()`, `print(loss)`, `if t > 0:`) or makes
a tensor from host data (`pr.tensor(list)`, a DataLoader batch) keeps its recording, cut at each
such place. Later calls run its Python again over the recording (backend/replay.Rerun): nothing
is encoded; each kernel's info words and each upload's bytes are taken fresh; at each read the
recording's commands up to it are submitted, then the read runs. So the kernels between breaks
are the recording's (fused, planned, prebuilt) and every value read back or given from the host
is this call's. Where the Python takes another way than the trace did (a branch on a value read
back), the call goes on eagerly from there, with the same results as eager; a function that does
so twice runs eagerly from then on. With `fullgraph=True` a graph break is an error naming the
line instead.

Changing Python numbers. An int or float argument is a guard; when a call brings a new value and
a recording exists for another, that recording is rerun with the new value instead of tracing
again: where only info words change (a position, a learning rate, a scale) it serves every value
from then on (each call reruns its Python). A value the passes baked into a fused kernel makes
the next trace leave that kernel unfused.

A function that replaces a tensor it read (state kept by rebinding, `h = f(h)` across calls) runs
eagerly with a warning naming the line (with `fullgraph=True`: an error there). Tensor arguments
are copied into buffers the graph owns (arguments sharing a storage, `f(x, x)` or `f(x[:-1],
x[1:])`, into views of one buffer laid out as theirs, so a write through one is seen through the
other; the sharing is a guard); tensors it returns are copied out, fresh and detached, so a
result from one call is never overwritten by the next.
"""

from __future__ import annotations

import time
import types
import warnings

from .. import autograd, backend
from ..backend.replay import Graph, GraphBreak, Rerun, Tape
from ..ops.ranges import note_leaf
from ..tensor import Tensor
from . import _ranges, _state
from ._guards import (
    Watch,
    alias_groups,
    byte_span,
    flatten,
    found_in,
    group_start,
    reach,
    unflatten,
)
from .fusion import optimize

__all__ = ["CompiledFunction", "GraphBreak", "compile"]

CACHE_LIMIT = 8  # recordings a compiled function keeps (torch's recompile limit is also 8)
# reruns of a recording with graph breaks that may take another way than the trace before the
# function runs eagerly (each such call runs the rest of itself eagerly)
DIVERGE_LIMIT = 2


def compile(
    model=None,
    *,
    fullgraph=False,
    dynamic=None,
    backend=None,
    mode=None,
    options=None,
    disable=False,
    chunk=None,
    captures=None,
):
    """Compile a function or a Module (PyTorch's torch.compile).

    Args:
        model: a function (a whole training step: forward, backward, optimizer step, schedule)
            or a Module; omitted, `compile` returns a decorator.
        fullgraph (bool): raise `GraphBreak` where the function does something a replay cannot
            repeat, instead of running it eagerly.
        chunk (int, optional): submit the replay in pieces of this many kernels with a wait
            after each (a display sharing the GPU stays responsive).
        captures (list of str, optional): names of submodules (`"blocks.0.attn"`, in the
            modules the function uses) whose outputs every call also returns, fresh, in the
            compiled function's `captured` dict.
        options (dict, optional): {"fusion": False} keeps every kernel the trace ran (no
            elementwise fusion): a replay is then bit-identical to eager.
        dynamic, backend, mode: accepted for PyTorch's signature; pyrite records static
            shapes (a new shape is a new recording).
        disable (bool): return `model` unchanged.
    """
    if model is None:
        return lambda m: compile(
            m,
            fullgraph=fullgraph,
            dynamic=dynamic,
            disable=disable,
            chunk=chunk,
            captures=captures,
            options=options,
        )
    if disable:
        return model
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"pyrite: compile(chunk=) must be a positive int, not {chunk!r}")
    from ..nn.module import Module

    if isinstance(model, Module):
        from ..nn._compiled import CompiledModule

        return CompiledModule(
            model, fullgraph=fullgraph, chunk=chunk, captures=captures, options=options
        )
    if not callable(model):
        raise TypeError(f"pyrite: compile() expects a function or a Module, not {type(model)}")
    return CompiledFunction(
        model, fullgraph=fullgraph, chunk=chunk, captures=captures, options=options
    )


# Eager variants (calls whose trace broke) kept per guard key; older ones are dropped.
EAGER_VARIANTS_KEPT = 8


class _Trace:
    """The trace running now (compile/_state.active): the objects it hears from."""

    def __init__(self, tape):
        self.tape = tape
        self.objects: dict[int, object] = {}

    def saw(self, obj):
        if id(obj) not in self.objects:
            self.objects[id(obj)] = obj


class _Variant:
    """One recording and the guards that choose it (graph None: this call runs eagerly)."""

    def __init__(self, watches, snapshot):
        self.watches = watches
        self.snapshot = snapshot
        self.graph = None
        self.reasons = []
        self.slots = []
        # [(weak parameter, its .grad when the trace ended)]: restored after each replay
        self.grads_out = []
        # [(weak parameter, id of its .grad's buffer when the trace began)]: gradients the
        # recording reads (accumulates into, steps with) that it did not make
        self.grads_in = []
        self.out_spec = None
        self.outputs = []  # per output leaf: ("own", tensor) | ("ext", tensor)
        self.mutated = []  # (argument number, slot) of inputs the recording writes
        self.replays = 0
        self.build_s = 0.0
        self.kernels_traced = 0  # dispatches the trace ran, before fusion and dead-code removal
        self.fused = 0
        # the integer ranges the trace's index checks needed and what its replays leave
        # (compile/_ranges.py): a guard, and the ranges a replay's outputs get
        self.ranges = None
        # "replay": calls replay the graph; "rerun": calls run the Python over it (graph breaks,
        # or a Python number that changes: Rerun)
        self.mode = "replay"
        self.kept = frozenset()  # ids of the buffers the passes kept for after a replay
        self.fixed = False  # a rerun with a new Python number diverged: the numbers are guards
        self.reruns = 0
        self.divergences = 0
        self.diverged = None  # why the last rerun that diverged did

    def matches(self, call):
        return (
            tuple(w.state() for w in self.watches) == self.snapshot
            and all(_grad_buffer(r()) == b for r, b in self.grads_in)
            and (self.ranges is None or self.ranges.holds(call))
        )


class CompiledFunction:
    """A function under `pr.compile`: call it as the function; `graph` and `stats()` describe
    the recording."""

    def __init__(self, fn, fullgraph=False, chunk=None, known=(), captures=(), options=None):
        self.fn = fn
        options = dict(options or {})
        self.fusion = bool(options.pop("fusion", True))
        if options:
            raise ValueError(
                f"pyrite: compile(options=...) knows 'fusion' (bool), not {sorted(options)}"
            )
        self.captures = list(captures or ())
        self.captured: dict = {}  # name -> the output of that module in the last call
        self.fullgraph = fullgraph
        self.chunk = chunk
        self._watches: dict[int, Watch] = {}
        for obj in (*known, *found_in(fn)):
            self._watch(obj)
        if self._watches:  # (names are checked now where the modules are known already)
            for name in self.captures:
                self._capture_module(name)
        self._variants: dict[tuple, list[_Variant]] = {}
        # guards with Python numbers left out -> the recordings made under them (a new number
        # reruns one of these before tracing again); and the dispatch numbers whose info words
        # changed in a rerun where fusion had baked them: the next trace leaves them unfused
        self._numbers: dict[tuple, list[_Variant]] = {}
        self._protect: dict[tuple, set] = {}
        self.traces = 0
        self.eager_calls = 0
        self._warned = set()
        self._last = None
        try:
            self.__wrapped__ = fn
            self.__name__ = getattr(fn, "__name__", "compiled")
            self.__doc__ = getattr(fn, "__doc__", None)
        except AttributeError:
            pass

    def __get__(self, obj, objtype=None):
        """`@pr.compile` on a method: bound, it is called with the instance first (a guard)."""
        if obj is None:
            return self
        return types.MethodType(self, obj)

    def _watch(self, obj):
        if id(obj) not in self._watches:
            self._watches[id(obj)] = Watch(obj)

    # ---- calling ---------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if _state.inside():  # inside another compiled function's trace or rerun: part of it
            return self.fn(*args, **kwargs)
        leaves, key = [], [autograd.is_grad_enabled(), id(backend.current())]
        spec = flatten((args, kwargs), leaves, key)
        groups, alias = alias_groups(leaves)
        if alias is not None:
            key.append(alias)
        key = tuple(key)
        call = _ranges.Call(leaves)
        variants = self._variants.get(key)
        if variants:
            for v in list(variants):
                g = v.graph
                if g is not None and g.tape.stale:
                    variants.remove(v)
                    g.close()
                elif v.matches(call):
                    if g is None:
                        self.eager_calls += 1
                        return self.fn(*args, **kwargs)
                    if v.mode == "rerun":
                        return self._rerun(v, key, spec, call)
                    return self._replay(v, call)
        dkey = _number_free(key)
        if dkey != key:  # a new Python number: rerun a recording made for another one
            for v in self._numbers.get(dkey, ()):
                g = v.graph
                if g is not None and not g.tape.stale and not v.fixed and v.matches(call):
                    return self._rerun(v, key, spec, call)
        if sum(len(vs) for vs in self._variants.values()) >= CACHE_LIMIT:
            self._warn_once(
                "limit",
                f"pyrite: compile: {getattr(self.fn, '__name__', 'a function')} has been traced "
                f"for {CACHE_LIMIT} different guards (shapes, dtypes, Python values, module "
                "modes); new ones run eagerly. Pass values that change every call as tensors.",
            )
            self.eager_calls += 1
            return self.fn(*args, **kwargs)
        return self._trace(key, spec, leaves, groups)

    def _trace(self, key, spec, leaves, groups=()):
        t0 = time.perf_counter()
        dev = backend.current()
        watches = list(self._watches.values())
        for w in watches:
            w.walk()
        v = _Variant(watches, tuple(w.state() for w in watches))
        grads_in = _grad_buffers(watches)
        grads_before = [(r, r().grad) for w in watches for r in w.params if r() is not None]
        tape = Tape(dev, fullgraph=self.fullgraph, segmented=True)
        tape.protect = set(self._protect.get(_number_free(key), ()))
        slots = _slots(tape, leaves, groups)
        trace = _Trace(tape)
        hooks, seen = self._capture_hooks()
        _state.active = trace
        try:
            with dev.record(tape):
                a, kw = unflatten(spec, iter(slots))
                out = self.fn(*a, **kw)
        except BaseException:
            tape.close()
            raise
        finally:
            _state.active = None
            for h in hooks:
                h.remove()
        self.traces += 1
        covered = set(self._watches)
        for w in self._watches.values():
            covered.update(w.ids())
        new = [o for i, o in trace.objects.items() if i not in covered]
        for o in new:
            self._watch(o)
        out_leaves, out_key = [], []
        v.out_spec = flatten(out, out_leaves, out_key)
        v.captured = [n for n in self.captures if isinstance(seen.get(n), Tensor)]
        results = []
        for t in (*out_leaves, *(seen[n] for n in v.captured)):
            if id(t._storage.buffer) in tape.owned:  # (a bare view: no autograd graph kept)
                v.outputs.append(
                    ("own", Tensor._make(t._storage, t._shape, t._strides, t._offset, t.dtype))
                )
                results.append(_copy_out(dev, t))
                _ranges.carry(t, results[-1])
            else:
                v.outputs.append(("ext", t))
                results.append(t)
        self._set_captured(v, results)
        writes = tape.writes()
        # the buffers whose ranges a replay sets: what it writes that the caller sees again
        finals = [t._storage.buffer for k, t in v.outputs if k == "own"]
        finals += [s._storage.buffer for s in slots if id(s._storage.buffer) in writes]
        finals += [b for i, b in tape.external.items() if i in writes]
        v.ranges = _ranges.Ranges(tape, slots, {id(b): b for b in finals}.values())
        for i, (t, s) in enumerate(zip(leaves, slots)):
            if id(s._storage.buffer) in writes:
                v.mutated.append((i, s))
                _copy_back(s, t)
        reasons = [f"{what} (at {where})" for what, where in tape.breaks]
        if tape.stale:
            reasons.append("a tensor it read died while it ran")
        if reasons or new:
            tape.close()
            v.mutated = []
            if reasons:  # remember: calls with these guards run eagerly
                v.reasons = reasons
                kept = self._variants.setdefault(key, [])
                kept.append(v)
                eager = [x for x in kept if x.reasons]
                if len(eager) > EAGER_VARIANTS_KEPT:  # (bounded: stats()' graph_breaks grew a
                    kept.remove(eager[0])  # copy a call where each call traced again)
                self._warn_once(
                    reasons[0],
                    "pyrite: compile: "
                    f"{getattr(self.fn, '__name__', 'the function')} runs eagerly: it "
                    + "; ".join(reasons[:3]),
                )
            self.eager_calls += 1
            return unflatten(v.out_spec, iter(results))
        v.kernels_traced = tape.dispatches
        # the parameters' .grad the trace set (a replay runs no Python: it sets them again; a
        # .grad it left alone is the caller's, not put back: a forward compiled beside the
        # step, replayed, must not hand back the gradients there were at its trace), and the
        # gradients it read that were there when it began (a replay needs the same ones there:
        # the caller's zero_grad() or a new .grad outside makes it trace again)
        v.grads_out = [
            (r, r().grad) for r, g in grads_before if r() is not None and r().grad is not g
        ]
        v.grads_in = [(r, b) for r, b in grads_in if b in tape.external]
        keep = {id(s._storage.buffer) for s in slots}
        keep.update(id(t._storage.buffer) for kind, t in v.outputs if kind == "own")
        v.kept = frozenset(keep)
        if not tape.soft:
            tape.strip_cuts()  # (it replays whole)
        raw = tape.snapshot()
        v.fused = optimize(tape, dev, keep, fuse=self.fusion)
        g = Graph(dev, tape)
        g.raw = raw
        v.slots = slots
        v.graph = g
        v.build_s = time.perf_counter() - t0
        if tape.soft:
            v.mode = "rerun"
            what, where = tape.soft[0]
            self._warn_once(
                "breaks",
                f"pyrite: compile: {getattr(self.fn, '__name__', 'the function')} has "
                f"{len(tape.soft)} graph break(s), the first where it {what.split(': ', 1)[-1]} "
                f"(at {where}): its Python runs every call and the kernels between breaks "
                "replay. Return tensors and read them after the call to replay it whole.",
            )
        self._variants.setdefault(key, []).append(v)
        self._numbers.setdefault(_number_free(key), []).append(v)
        self._last = v
        return unflatten(v.out_spec, iter(results))

    def _rerun(self, v, key, spec, call):
        """Run the function's Python over v's recording (backend/replay.Rerun) with this call's
        arguments; see the module docstring."""
        dev = backend.current()
        g = v.graph
        leaves = call.leaves
        trying = v.mode != "rerun"  # (a new Python number on a replayed recording)
        saved = (g.info.copy(), dict(g.moved)) if trying else None
        before = _copies_in(leaves, v.slots)
        v.ranges.enter(call, v.slots)
        rr = Rerun(g, before, self.chunk, uploads=not trying)
        hooks, seen = self._capture_hooks()
        a, kw = unflatten(spec, iter(v.slots))
        _state.rerunning = True
        with dev._lock:
            dev._tape = rr
            dev.pool.tape = rr
        try:
            out = self.fn(*a, **kw)
        except BaseException:
            with dev._lock:
                rr.abort()
            raise
        finally:
            _state.rerunning = False
            for h in hooks:
                h.remove()
        out_leaves = []
        out_spec = flatten(out, out_leaves, [])
        captured = [n for n in self.captures if isinstance(seen.get(n), Tensor)]
        tensors = [*out_leaves, *(seen[n] for n in captured)]
        owned = g.tape.owned
        own = [id(t._storage.buffer) in owned for t in tensors]
        with dev._lock:
            following = rr.end(v.kept, {id(t._storage.buffer) for t, o in zip(tensors, own) if o})
        after, results = _copies_out(dev, list(zip(tensors, own)))
        late, copied = [], []
        for i, s in v.mutated:
            t = leaves[i]
            copy = _plain_copy(s, t)
            if copy is None or not following:
                late.append((s, t))
            else:
                after.append(copy)
                copied.append((i, s))
        if following:
            with dev._lock:
                rr.submit_last(after)
        else:
            for copy in after:
                dev.copy(*copy)
        _settle(call, copied, tensors, own, results)
        for s, t in late:
            _copy_back(s, t)
        for i, _ in v.mutated:
            autograd.mark_written(leaves[i])
        v.reruns += 1
        self._last = v
        if rr.off:
            self._diverged(v, key, rr, saved)
        elif trying:
            v.mode = "rerun"  # (from now on every call reruns it: its info words move)
        v.captured = captured
        self._set_captured(v, results)
        return unflatten(out_spec, iter(results))

    def _diverged(self, v, key, rr, saved):
        """A rerun went another way than the trace (it finished eagerly): what that means for
        the recording."""
        v.divergences += 1
        v.diverged = rr.why
        name = getattr(self.fn, "__name__", "the function")
        if rr.changed:  # a value fusion baked in changed: trace again, those kernels unfused
            self._protect.setdefault(_number_free(key), set()).update(rr.changed)
            self._drop(v)
            return
        if saved is not None:  # a new Python number changed the program: numbers stay guards
            v.graph.info[:], v.graph.moved = saved
            v.graph.dirty = [0, v.graph.kernels]
            v.fixed = True
            return
        if v.divergences >= DIVERGE_LIMIT:
            v.graph.close()
            v.graph = None
            v.reasons = [f"its Python went another way than the trace: it {rr.why}"]
            self._warn_once(
                "diverged",
                f"pyrite: compile: {name} runs eagerly: {v.reasons[0]} in {v.divergences} "
                "calls (control flow on a value read back)",
            )

    def _drop(self, v):
        for table in (self._variants, self._numbers):
            for vs in table.values():
                if v in vs:
                    vs.remove(v)
        if v.graph is not None:
            v.graph.close()
            v.graph = None

    def _replay(self, v, call):
        dev = backend.current()
        g = v.graph
        g.refresh()
        leaves = call.leaves
        before = _copies_in(leaves, v.slots)
        v.ranges.enter(call, v.slots)
        outs = [(t, kind == "own") for kind, t in v.outputs]
        after, results = _copies_out(dev, outs)
        late, copied = [], []
        for i, s in v.mutated:
            t = leaves[i]
            copy = _plain_copy(s, t)
            if copy is None:
                late.append((s, t))
            else:
                after.append(copy)
                copied.append((i, s))
        dev.replay(g, before, after, self.chunk)
        v.ranges.settle(call)  # (no Python ran: the ranges its ops would have noted)
        _settle(call, copied, [t for t, _ in outs], [o for _, o in outs], results)
        for s, t in late:
            _copy_back(s, t)
        for r, grad in v.grads_out:  # (the Python-side state the trace left: `p.grad`)
            p = r()
            if p is not None and p.grad is not grad:
                p.grad = grad
        for i, _ in v.mutated:
            autograd.mark_written(leaves[i])
        v.replays += 1
        self._last = v
        self._set_captured(v, results)
        return unflatten(v.out_spec, iter(results))

    def _capture_hooks(self):
        """Forward hooks on the modules named in `captures` (resolved in the modules this
        function uses), storing each one's output into the dict returned."""
        seen, hooks = {}, []
        for name in self.captures:
            mod = self._capture_module(name)

            def hook(_m, _args, out, name=name):
                seen[name] = out

            hooks.append(mod.register_forward_hook(hook))
        return hooks, seen

    def _capture_module(self, name):
        """The submodule `name` of the first module this function uses that has one."""
        for w in self._watches.values():
            get = getattr(w.obj, "get_submodule", None)
            if get is not None:
                try:
                    return get(name)
                except AttributeError:
                    continue
        names = ", ".join(type(w.obj).__name__ for w in self._watches.values()) or "none found"
        raise ValueError(
            f"pyrite: compile(captures=...): no module named {name!r} in the modules this "
            f"function uses ({names})"
        )

    def _set_captured(self, v, results):
        k = len(results) - len(v.captured)
        self.captured = dict(zip(v.captured, results[k:]))
        del results[k:]

    def _warn_once(self, tag, message):
        warn_once(self._warned, tag, message, stacklevel=4)

    # ---- what it holds ---------------------------------------------------------------------
    def reset(self):
        """Forget every recording (the next call traces again)."""
        for vs in self._variants.values():
            for v in vs:
                if v.graph is not None:
                    v.graph.close()
        self._variants.clear()
        self._numbers.clear()
        self._last = None

    @property
    def graph(self):
        """The recording replayed or built last, printable (None before one exists)."""
        from ._report import GraphView

        return None if self._last is None else GraphView(self._last)

    def stats(self) -> dict:
        """Counts for the recording replayed or built last, and for this function."""
        from ._report import stats

        return stats(self)

    def __del__(self):
        try:
            self.reset()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _grad_buffer(p):
    """id of the buffer of parameter `p`'s .grad (None: no parameter, or no .grad)."""
    g = None if p is None else p.grad
    return None if g is None else id(g._storage.buffer)


def _grad_buffers(watches):
    """[(weak parameter, id of its .grad's buffer)] for the watched parameters with a .grad."""
    out = []
    for w in watches:
        for r in w.params:
            b = _grad_buffer(r())
            if b is not None:
                out.append((r, b))
    return out


def _number_free(key):
    """The guards `key` with the values of int and float arguments left out."""
    return tuple(
        ("v", k[1], None)
        if type(k) is tuple and len(k) == 3 and k[0] == "v" and k[1] in (int, float)
        else k
        for k in key
    )


def _slots(tape, leaves, groups=()):
    """The graph's own buffers for the arguments, filled outside the tape. Arguments sharing a
    storage (`groups`, alias_groups) get views of one new storage holding the words they reach,
    laid out as theirs are. An integer argument's range known without reading it becomes its
    slot's, as a leaf of the trace's range expressions (compile/_ranges.py: what the index
    checks needed is then a guard)."""
    from ..ops.core import empty

    dev = backend.current()
    shared = {}
    for ix in groups:
        lo = group_start(leaves[i] for i in ix)
        hi = max(sum(reach(leaves[i])[:2]) for i in ix)
        st = dev.pool.allocate(hi - lo)
        dev.copy(leaves[ix[0]]._storage.buffer, lo, st.buffer, 0, hi - lo)
        tape.adopt(st.buffer)
        for i in ix:
            t = leaves[i]
            sb = t.dtype.storage_bytes
            shared[i] = Tensor._make(st, t._shape, t._strides, t._offset - lo // sb, t.dtype)
    slots = []
    for i, t in enumerate(leaves):
        s = shared.get(i)
        if s is None:
            s = empty(t._shape, t.dtype)
            with autograd.no_grad():
                s.copy_(t)
            tape.adopt(s._storage.buffer)
        if t.requires_grad:
            s.requires_grad_(True)
        hit = tape.pool.bounds.get(id(t._storage.buffer))
        if hit is not None and t.dtype.kind == "i":
            note_leaf(tape, s, hit[0], hit[1])
        slots.append(s)
    return slots


def _settle(call, copied, tensors, own, results):
    """After a call: the ranges of what it hands back. Fresh outputs copied from the recording's
    own buffers, and arguments given their slots' values by a plain copy, take those buffers'
    ranges (as the recording left them); `copied`: (argument number, slot) of the latter."""
    for t, o, r in zip(tensors, own, results):
        if o and t is not None:
            _ranges.carry(t, r)
    for i, s in copied:
        _ranges.carry_into(s, call.leaves[i], call.entry(i))


def _copies_in(tensors, slots):
    """Copies (device.replay's `before`) of `tensors` into the graph's `slots`; a tensor a plain
    copy cannot move (a view, another dtype) is copied by a kernel into the pending batch
    instead, which the replay submits first."""
    before = []
    for t, s in zip(tensors, slots):
        if t._storage is s._storage:
            continue
        copy = _plain_copy(t, s)
        if copy is None:
            with autograd.no_grad():
                s.copy_(t)
        else:
            before.append(copy)
    return before


def _plain_copy(src: Tensor, dst: Tensor):
    """A byte copy (device.copy's arguments) moving `src`'s elements into `dst`'s, or None where
    a kernel must: not both contiguous and word-aligned, another dtype or shape. (Slots of
    arguments sharing a storage are views of theirs: neither side need start at byte 0.)"""
    if src.dtype is not dst.dtype or src._shape != dst._shape:
        return None
    a, b = byte_span(src), byte_span(dst)
    if a is None or b is None:
        return None
    return (src._storage.buffer, a[0], dst._storage.buffer, b[0], a[1])


def warn_once(warned: set, tag, message, stacklevel):
    """warnings.warn(message) the first time `tag` is met (`warned` remembers)."""
    if tag not in warned:
        warned.add(tag)
        warnings.warn(message, UserWarning, stacklevel=stacklevel)


def _copies_out(dev, outputs):
    """(copies for device.replay's `after`, results) for `outputs`, (tensor, the graph's own):
    a fresh tensor the replay fills for each of the graph's own; the rest (None, the caller's
    own tensors) as they are."""
    after, results = [], []
    for t, own in outputs:
        if t is None or not own:
            results.append(t)
        else:
            copy, fresh = _fresh_copy(dev, t)
            after.append(copy)
            results.append(fresh)
    return after, results


def _fresh_copy(dev, t: Tensor):
    """(the copy's arguments, a fresh tensor): the same view of new storage that the copy fills
    with the words `t` reaches."""
    start, n, offset = reach(t)
    st = dev.pool.allocate(n)
    fresh = Tensor._make(st, t._shape, t._strides, offset, t.dtype)
    return (t._storage.buffer, start, st.buffer, 0, n), fresh


def _copy_out(dev, t: Tensor) -> Tensor:
    """A fresh tensor holding the same view of a copy of the words `t` reaches (now)."""
    copy, fresh = _fresh_copy(dev, t)
    dev.copy(*copy)
    return fresh


def _copy_back(slot: Tensor, t: Tensor):
    """The argument `t` takes the value the recording wrote into its slot."""
    with autograd.no_grad():
        t.copy_(slot)
