"""torch.autograd.graph: hooks on what the graph saves and on its nodes.

`saved_tensors_hooks(pack, unpack)`: inside the block, every tensor a recorded op keeps for its
backward rule (its inputs, its output) and every tensor a custom Function's
`ctx.save_for_backward` gets goes through `pack`; the rule (or `ctx.saved_tensors`) gets
`unpack(packed)` back, each time it runs. pyrite's ops keep what their rules read, which is not
always the set torch's kernels save (an op may keep its output where torch keeps its input):
`pack` sees pyrite's set. The in-place version check still holds each saved tensor, so a pack
that drops a tensor's device memory does not free it.

`save_on_cpu`: pyrite has one device and its tensors live in that device's buffers, so "CPU"
has nowhere else to put them: the pack keeps the tensor as it is (a no-op; `pin_memory` is
accepted and ignored). Code that uses it for memory runs unchanged, saving nothing.

`disable_saved_tensors_hooks(message)`: inside it, entering saved_tensors_hooks (or save_on_cpu)
raises RuntimeError(message), and so does entering it while such hooks are active, as torch.

`get_gradient_edge(t)`: a `GradientEdge(node, output_nr)` naming where t's gradient is computed
(t.grad_fn, or a leaf's AccumulateGrad); `autograd.grad` takes edges as inputs and outputs,
`backward(inputs=...)` edges into leaves, so a gradient can be asked for after the tensor itself
is gone (pipeline schedules that split the weight gradient from the input gradient do).
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

from . import autograd as _ag
from .autograd import Node  # noqa: F401  (isinstance(t.grad_fn, torch.autograd.graph.Node))

_DISABLED: list = [None]  # the message entering saved_tensors_hooks raises now (None: allowed)


class saved_tensors_hooks:
    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        if _DISABLED[0] is not None:
            raise RuntimeError(_DISABLED[0])
        _ag._PACK_HOOKS.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc):
        _ag._PACK_HOOKS.pop()


class save_on_cpu(saved_tensors_hooks):
    """A no-op pack on pyrite's one device (see the module docstring)."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t, lambda t: t)


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message):
    """Saved tensor hooks refused inside (the module docstring)."""
    prev = _DISABLED[0]
    try:
        if _ag._PACK_HOOKS:
            raise RuntimeError(error_message)
        _DISABLED[0] = error_message
        yield
    finally:
        _DISABLED[0] = prev


class GradientEdge(NamedTuple):
    """Where a tensor's gradient is computed: a node and which of its outputs."""

    node: object
    output_nr: int
    ownership_token: object = None  # (torch's keeps a C++ graph alive; the node does here)


def get_gradient_edge(tensor) -> GradientEdge:
    if not tensor.requires_grad:
        raise RuntimeError(
            "pyrite: It is not possible to get the gradient edge for a Tensor that does not "
            "require gradients"
        )
    fn = tensor.grad_fn
    if fn is None:
        return GradientEdge(_ag.grad_accumulator(tensor), 0)
    return GradientEdge(fn, tensor._out_nr)


class _MultiHandle:
    def __init__(self, handles):
        self._handles = handles

    def remove(self):
        for h in self._handles:
            h.remove()


def _will_get_grad(run, t) -> bool:
    """Whether the backward `run` reaches tensor t (its node, or an edge into the leaf)."""
    if t.grad_fn is not None:
        return id(t.grad_fn) in run.nodes
    if id(t) in getattr(run, "leaves", ()):
        return True
    return any(
        e is not None and e[0] == "leaf" and e[1] is t for n in run.nodes.values() for e in n.edges
    )


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """mode="all": fn(grads) once per backward, grads[i] the gradient of tensors[i] (None where
    this backward computes none), as soon as the last one this backward reaches has arrived;
    mode="any": fn(grad) once per backward, with the first of the tensors' gradients."""
    if mode not in ("all", "any"):
        raise ValueError(f"pyrite: Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {}  # id(engine run) -> [grads, how many still to come] ("all"), True ("any")

    def hook_for(i):
        def hook(g):
            run = _ag._ENGINE_RUNS[-1] if _ag._ENGINE_RUNS else None
            key = id(run)
            if mode == "any":
                if key not in state:
                    state[key] = True
                    if run is not None:
                        run.append(lambda: state.pop(key, None))
                    fn(g)
                return None
            entry = state.get(key)
            if entry is None:
                todo = sum(1 for t in tensors if run is None or _will_get_grad(run, t))
                entry = state[key] = [[None] * len(tensors), todo, False]

                def fire():
                    e = state.pop(key, None)
                    if e is not None and not e[2]:
                        fn(tuple(e[0]))

                if run is not None:
                    run.append(fire)  # (a reached tensor whose gradient came out None)
            entry[0][i] = g if entry[0][i] is None else entry[0][i] + g
            entry[1] -= 1
            if entry[1] <= 0 and not entry[2]:
                entry[2] = True
                fn(tuple(entry[0]))
            return None

        return hook

    handles = [t.register_hook(hook_for(i)) for i, t in enumerate(tensors) if t.requires_grad]
    return _MultiHandle(handles)
