"""A compiled Module under autograd: `model = pr.compile(model)`, then `loss.backward()`.

Where the caller needs the autograd graph (grad mode on, a parameter or an input requiring grad),
`CompiledModule` calls a `TrainingGraphs`. Its first call with a new guard runs the forward eagerly
while a tape records it; the outputs the caller gets are fresh copies joined to one autograd node
(edges: the inputs and the parameters that require grad). When the caller's backward reaches that
node, its first run records the backward of the traced forward (`autograd.grad` from the node's
incoming gradients, copied into slots the backward tape owns, to the argument slots and the
parameters) on a second tape, which reads the forward's saved tensors where the forward left them
(`Tape.borrow`). Then both tapes are optimized — the forward keeps every buffer its backward
reads — and become graphs. Later calls replay the forward graph and return fresh outputs joined to
a node whose backward replays the backward graph and hands the gradients to the engine, which
accumulates them into `.grad` as for any op (so `zero_grad`, gradient accumulation over
micro-batches and `set_to_none` all behave as eagerly).

The forward graph's saved buffers serve one outstanding call at a time: while the output of a
replay is alive and its backward has not run, another call runs eagerly (two micro-batches in
flight, an evaluation in grad mode kept around). A backward through an output whose forward
graph ran again since (`retain_graph=True`, then a new call) raises instead of reading the newer
call's activations. A double backward (`create_graph=True`) through a compiled module is refused:
call `_orig_mod` for that.

Guards are the inference path's, without which parameters have a `.grad` (the gradients are the
engine's to accumulate): the arguments' shapes, dtypes and requires_grad, every other argument's
value, the device, each submodule's `training` and each parameter's `requires_grad`. What a replay
cannot repeat in the forward or the backward (a readback, host data) makes that guard's calls run
eagerly, with a warning naming the line.
"""

from __future__ import annotations

import time
import weakref

from .. import autograd, backend
from ..backend.replay import Graph, Tape
from . import (
    _copies_in,
    _copies_out,
    _copy_back,
    _copy_out,
    _ranges,
    _settle,
    _slots,
    _state,
    _Trace,
    warn_once,
)
from ._guards import Watch, alias_groups, flatten, unflatten
from .fusion import _buffers, optimize

CACHE_LIMIT = 8


class _Token:
    """One call's claim on the forward graph's saved buffers (held by its autograd node)."""

    __slots__ = ("__weakref__", "done", "gen")

    def __init__(self, gen):
        self.gen = gen
        self.done = False


class _Pair:
    """The forward and backward recordings of one guard (graphs None until the first backward
    has been recorded; `reasons`: this guard's calls run eagerly)."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.ftape = self.btape = None
        self.fgraph = self.bgraph = None
        self.slots = []  # the forward's argument slots
        self.ranges = None  # its index checks' needs, what it leaves: compile/_ranges.py
        self.wrt = []  # argument numbers whose tensors require grad
        self.params = []  # weak references to the parameters that require grad
        self.out_spec = None
        self.outs = []  # per output leaf: ("grad" | "own", alias) or ("ext", tensor)
        self.inner = None  # the traced forward's outputs that get a gradient (until recorded)
        self.inner_wrt = None  # its slots and parameters the backward differentiates
        self.gslots = []  # the backward's slots for the gradients of the outputs
        self.grads = []  # per edge: the backward's gradient (alias) or None
        self.reasons = []
        self.gen = 0
        self.token = None
        self.kernels_traced = 0
        self.fused = 0
        self.replays = 0
        self.build_s = 0.0

    def busy(self) -> bool:
        tok = self.token() if self.token is not None else None
        return tok is not None and not tok.done

    def stale(self) -> bool:
        return any(t is not None and t.stale for t in (self.ftape, self.btape)) or any(
            r() is None for r in self.params
        )

    def close(self):
        for g, t in ((self.bgraph, self.btape), (self.fgraph, self.ftape)):
            if g is not None:
                g.close()
            elif t is not None:
                t.close()
        self.fgraph = self.bgraph = self.ftape = self.btape = None
        self.inner = self.inner_wrt = None


class TrainingGraphs:
    """The recordings a CompiledModule replays under autograd (see the module docstring)."""

    def __init__(self, mod, fusion=True, chunk=None, fullgraph=False):
        self.mod = mod
        self.fusion = fusion
        self.chunk = chunk
        self.fullgraph = fullgraph
        self.watch = Watch(mod)
        self.pairs: dict[tuple, list[_Pair]] = {}
        self.traces = 0
        self.eager_calls = 0
        self.last = None
        self._warned = set()

    # ---- calling -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        leaves, key = [], [id(backend.current())]
        spec = flatten((args, kwargs), leaves, key)
        groups, alias = alias_groups(leaves)
        if alias is not None:
            key.append(alias)
        key = tuple(key)
        snapshot = self.watch.state(grads=False)
        pairs = self.pairs.setdefault(key, [])
        call = _ranges.Call(leaves)
        for p in list(pairs):
            if p.stale() or (p.fgraph is None and not p.reasons and not p.busy()):
                pairs.remove(p)  # (stale, or traced and never backward: trace again)
                p.close()
            elif p.snapshot == snapshot and (p.ranges is None or p.ranges.holds(call)):
                if p.reasons or p.busy():
                    self.eager_calls += 1
                    return self.mod(*args, **kwargs)
                return self._replay(p, call)
        if sum(len(ps) for ps in self.pairs.values()) >= CACHE_LIMIT:
            self._warn(
                "limit",
                f"pyrite: compile: {type(self.mod).__name__} has been traced for training with "
                f"{CACHE_LIMIT} different guards; new ones run eagerly",
            )
            self.eager_calls += 1
            return self.mod(*args, **kwargs)
        return self._trace(pairs, snapshot, spec, leaves, groups)

    def _trace(self, pairs, snapshot, spec, leaves, groups=()):
        t0 = time.perf_counter()
        dev = backend.current()
        self.watch.walk()
        p = _Pair(snapshot)
        tape = Tape(dev, fullgraph=self.fullgraph)
        p.slots = _slots(tape, leaves, groups)
        p.wrt = [i for i, t in enumerate(leaves) if t.requires_grad]
        params = [q for q in self.mod.parameters() if q.requires_grad]
        p.params = [weakref.ref(q) for q in params]
        _state.active = _Trace(tape)
        try:
            with dev.record(tape):
                a, kw = unflatten(spec, iter(p.slots))
                out = self.mod(*a, **kw)
        except BaseException:
            tape.close()
            raise
        finally:
            _state.active = None
        self.traces += 1
        p.ftape = tape
        p.kernels_traced = tape.dispatches
        p.reasons = [f"{what} (at {where})" for what, where in tape.breaks]
        if tape.stale:
            p.reasons.append("a tensor it read died while it ran")
        out_leaves = []
        p.out_spec = flatten(out, out_leaves, [])
        inner, results = [], []
        for t in out_leaves:
            own = id(t._storage.buffer) in tape.owned
            if t.requires_grad and t.dtype.is_floating_point:
                if not own:
                    p.reasons.append("an output needing a gradient is a tensor it did not make")
                p.outs.append(("grad", autograd._alias(t)))
                inner.append(t)
                results.append(_copy_out(dev, t))
            elif own:
                p.outs.append(("own", autograd._alias(t)))
                results.append(_copy_out(dev, t))
                _ranges.carry(t, results[-1])
            else:
                p.outs.append(("ext", t))
                results.append(t)
        writes = tape.writes()
        if any(id(s._storage.buffer) in writes for s in p.slots):
            # (its replays hand the caller no argument back; this trace wrote the slots only)
            p.reasons.append("it writes an argument in place")
            for t, s in zip(leaves, p.slots):
                if id(s._storage.buffer) in writes:
                    _copy_back(s, t)
                    autograd.mark_written(t)
        finals = [t._storage.buffer for kind, t in p.outs if kind != "ext"]
        finals += [s._storage.buffer for s in p.slots if id(s._storage.buffer) in writes]
        finals += [b for i, b in tape.external.items() if i in writes]
        p.ranges = _ranges.Ranges(tape, p.slots, {id(b): b for b in finals}.values())
        p.inner = inner
        p.inner_wrt = [p.slots[i] for i in p.wrt] + params
        p.build_s = time.perf_counter() - t0
        if p.reasons:
            self._warn_eager(p.reasons)
            tape.close()
            p.ftape = None
        pairs.append(p)
        self.last = p
        edges = [leaves[i] for i in p.wrt] + params
        token = _Token(p.gen)  # (a second call before this one's backward runs eagerly)
        p.token = weakref.ref(token)

        def rule(_ctx, g):
            if p.bgraph is not None:  # (a second backward, retain_graph=True: recorded now)
                return self._replay_backward(p, token, g)
            got = self._record_backward(p, g)
            token.done = True
            return got

        return self._join(p, edges, results, rule)

    def _join(self, p, edges, results, rule):
        """The caller's outputs, the ones that get a gradient joined to one node over `edges`."""
        grad_outs = [r for (kind, _), r in zip(p.outs, results) if kind == "grad"]
        if grad_outs and edges:
            rule.saves = frozenset()
            autograd.record(f"Compiled{type(self.mod).__name__}", rule, tuple(edges), {}, grad_outs)
        return unflatten(p.out_spec, iter(results))

    # ---- the backward ------------------------------------------------------------------------
    def _record_backward(self, p, gs):
        """The trace's backward: run it (recording it where the forward was recorded)."""
        from ..ops.core import empty
        from ..ops.creation import zeros_like

        _refuse_double_backward()
        if p.inner is None:
            raise RuntimeError(
                "pyrite: Trying to backward through the graph a second time (a compiled "
                "module's traced call); specify retain_graph=True on the first backward"
            )
        t0 = time.perf_counter()
        dev = backend.current()
        gs = [zeros_like(o) if g is None else g for g, o in zip(gs, p.inner)]
        inner, wrt = p.inner, p.inner_wrt
        if p.ftape is None:  # (the forward broke: nothing to record)
            p.inner = p.inner_wrt = None
            got = autograd.grad(inner, wrt, grad_outputs=gs, allow_unused=True)
            return [None if g is None else _copy_out(dev, g) for g in got]
        tape = Tape(dev, fullgraph=self.fullgraph)
        tape.borrow(p.ftape)
        # the ranges of the forward's buffers as expressions over the forward's arguments (an
        # index the backward checks is a need checked as the forward is called), not the
        # trace's values: a replay with other ids read past a table silently
        tape.ranges.update(p.ftape.ranges)
        for g, o in zip(gs, inner):
            s = empty(o._shape, o.dtype)
            with autograd.no_grad():
                s.copy_(g)
            tape.adopt(s._storage.buffer)
            p.gslots.append(s)
        _state.active = _Trace(tape)
        try:
            with dev.record(tape):
                got = autograd.grad(inner, wrt, grad_outputs=p.gslots, allow_unused=True)
        except BaseException:
            tape.close()
            p.close()
            p.reasons.append("its backward failed while it was recorded")
            raise
        finally:
            _state.active = None
        p.inner = p.inner_wrt = None
        reasons = [f"its backward {what} (at {where})" for what, where in tape.breaks]
        results = []
        for g in got:
            if g is None:
                p.grads.append(None)
                results.append(None)
                continue
            if id(g._storage.buffer) not in tape.owned:
                reasons.append("its backward returned a gradient it did not make")
            p.grads.append(autograd._alias(g))
            results.append(_copy_out(dev, g))
        if tape.stale:
            reasons.append("a tensor its backward read died while it ran")
        if reasons:
            p.reasons = reasons
            tape.close()
            p.close()
            self._warn_eager(reasons)
            return results
        p.btape = tape
        p.ranges.add_needs(tape)  # (checked as the forward is called: the backward follows it)
        # the forward keeps what the caller and the backward read after a replay
        ftape = p.ftape
        keep = {id(s._storage.buffer) for s in p.slots}
        keep.update(id(t._storage.buffer) for kind, t in p.outs if kind != "ext")
        for op in tape.ops:
            keep.update(i for i in _buffers(op)[0] if i in ftape.owned)
        bkeep = {id(s._storage.buffer) for s in p.gslots}
        bkeep.update(id(g._storage.buffer) for g in p.grads if g is not None)
        p.kernels_traced += tape.dispatches
        p.fused = optimize(ftape, dev, keep, fuse=self.fusion)
        p.fused += optimize(tape, dev, bkeep, fuse=self.fusion)
        p.fgraph = Graph(dev, ftape)
        p.bgraph = Graph(dev, tape)
        p.build_s += time.perf_counter() - t0
        return results

    # ---- replaying ---------------------------------------------------------------------------
    def _replay(self, p, call):
        dev = backend.current()
        leaves = call.leaves
        params = [r() for r in p.params]
        g = p.fgraph
        g.refresh()
        before = _copies_in(leaves, p.slots)
        p.ranges.enter(call, p.slots)
        outs = [(t, kind != "ext") for kind, t in p.outs]
        after, results = _copies_out(dev, outs)
        dev.replay(g, before, after, self.chunk)
        p.ranges.settle(call)
        _settle(call, (), [t for t, _ in outs], [o for _, o in outs], results)
        p.gen += 1
        p.replays += 1
        token = _Token(p.gen)
        p.token = weakref.ref(token)
        self.last = p

        def rule(_ctx, gs):
            return self._replay_backward(p, token, gs)

        return self._join(p, [leaves[i] for i in p.wrt] + params, results, rule)

    def _replay_backward(self, p, token, gs):
        _refuse_double_backward()
        if token.gen != p.gen or p.bgraph is None:
            raise RuntimeError(
                "pyrite: compile: backward through the output of a compiled module's call "
                "after the module was called again: its saved activations belong to the newer "
                "call now. Call backward before the next forward (or use the module eagerly, "
                "`_orig_mod`)"
            )
        dev = backend.current()
        before = []
        for g, s in zip(gs, p.gslots):
            if g is None:
                with autograd.no_grad():
                    s.zero_()
            else:
                before += _copies_in((g,), (s,))
        after, results = _copies_out(dev, [(t, True) for t in p.grads])
        dev.replay(p.bgraph, before, after, self.chunk)
        token.done = True
        return results

    # ---- what it holds -----------------------------------------------------------------------
    def _warn(self, tag, message):
        warn_once(self._warned, tag, message, stacklevel=5)

    def _warn_eager(self, reasons):
        message = (
            f"pyrite: compile: {type(self.mod).__name__}'s training calls run eagerly: "
            + "; ".join(reasons[:3])
        )
        warn_once(self._warned, reasons[0], message, stacklevel=5)

    def reset(self):
        for ps in self.pairs.values():
            for p in ps:
                p.close()
        self.pairs.clear()
        self.last = None

    def stats(self) -> dict:
        p = self.last
        out = {
            "traces": self.traces,
            "eager_calls": self.eager_calls,
            "graph_breaks": [r for ps in self.pairs.values() for x in ps for r in x.reasons],
        }
        if p is None or p.fgraph is None:
            return out
        out.update(
            kernels_forward=p.fgraph.kernels,
            kernels_backward=p.bgraph.kernels,
            kernels=p.fgraph.kernels + p.bgraph.kernels,
            kernels_traced=p.kernels_traced,
            fused=p.fused,
            replays=p.replays,
            build_ms=round(p.build_s * 1e3, 2),
        )
        return out


def _refuse_double_backward():
    if autograd.is_grad_enabled():
        raise RuntimeError(
            "pyrite: compile: a double backward (create_graph=True) through a compiled module "
            "is not supported; call the original module (`compiled._orig_mod`) for that"
        )
