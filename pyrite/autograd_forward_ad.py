"""torch.autograd.forward_ad for pyrite: `dual_level`, `enter_dual_level`, `exit_dual_level`,
`make_dual`, `unpack_dual` and `UnpackedDualTensor`, as `pr.autograd.forward_ad`.

pyrite has no forward-mode AD, so a dual tensor is a reverse-mode construction (the idea of
`pr.func.jvp`, pyrite/func.py). `make_dual(x, t)` makes a private leaf L standing for x and
returns a tensor with x's value (an alias of its storage, as torch's) whose graph reaches L and,
when x requires grad, x's own graph, so `backward` through anything computed from the dual
still reaches x and the parameters as without forward AD. The level remembers (L, t).
`unpack_dual(y)` gives y's tangent Σᵢ Jᵢ·tᵢ over the level's live duals by the double-vjp
trick: u ↦ uᵀJᵢ is linear in u, so with u a zero cotangent that requires grad, one
`grad(y, Lᵢ, u, create_graph=True)` and one `grad(that, u, tᵢ)` give Jᵢ·tᵢ. During the first
pass a dual's node sends its gradient to L only, so a dual's primal, and the primal
`unpack_dual` returns (which passes its gradient on to y's graph outside that pass), carry no
tangent. The result is cached per output tensor (its storage version and grad_fn the key), and
`unpack_dual` of a dual itself returns its tangent as given. On exit of the level the
bookkeeping is dropped: unpack_dual returns no tangent, and the duals whose primal did not
require grad are detached in place (plain tensors again).

Cost: each `unpack_dual` of a computed tensor runs two backward passes over the part of its
graph that reaches the duals (the first recording a graph), where torch's forward mode carries
the tangent along the forward pass at about the cost of the forward. The forward graph is
recorded while a level is open even where nothing requires grad, and kept until the outputs
die.

Differences from torch (README): a dual, and everything computed from it, has
`requires_grad=True` and a `grad_fn` (the dual's is `_MakeDualBackward`); ops run under
`no_grad` or `inference_mode` inside the level record nothing, so their results carry no
tangent (torch's forward AD ignores grad mode); unpacking needs the output's graph, so unpack
before a `backward` without `retain_graph` through it (the dual itself survives one: a hook
revives its node, which saves nothing); an op on the path whose backward has no double
backward raises at the unpack (a `once_differentiable` Function); a derived tangent has the
output's dtype (torch keeps a float64 tangent float64 — pyrite has no float64); tensors
computed inside the level keep their graph after exit, only the duals become plain.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from typing import NamedTuple

from . import autograd
from .errors import ArgumentError, ArgumentTypeError, PyriteError, ShapeError
from .tensor import Tensor

__all__ = [
    "UnpackedDualTensor",
    "dual_level",
    "enter_dual_level",
    "exit_dual_level",
    "make_dual",
    "unpack_dual",
]

_NO_LEVEL = (
    "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
    "enter_dual_level() first."
)


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal and the tangent (None for a non-dual tensor)."""

    primal: Tensor
    tangent: Tensor | None


class _Level:
    """One open forward-AD level: its duals' leaves and tangents, and the tangents computed."""

    def __init__(self, index: int):
        self.index = index
        self.duals: dict = {}  # id(leaf) -> (weakref to the leaf, tangent); dropped with the leaf
        self.cache: dict = {}  # id(tensor) -> (weakref, version, grad_fn, with graph, tangent)
        self.made: list = []  # weakrefs to the duals to detach on exit (primal needed no grad)

    def remember(self, t, tangent, graph: bool):
        key = id(t)

        def forget(ref, cache=self.cache, key=key):
            if cache.get(key, (None,))[0] is ref:
                del cache[key]

        entry = (weakref.ref(t, forget), t._storage.version, t.grad_fn, graph, tangent)
        self.cache[key] = entry

    def cached(self, t, graph: bool):
        entry = self.cache.get(id(t))
        if entry is None or entry[0]() is not t:
            return None
        _, version, fn, has_graph, tangent = entry
        if version != t._storage.version or fn is not t.grad_fn or (graph and not has_graph):
            return None  # (written in place since, or now wanted with a graph)
        return (tangent,)

    def add_dual(self, leaf, tangent):
        key = id(leaf)

        def forget(ref, duals=self.duals, key=key):
            if duals.get(key, (None,))[0] is ref:
                del duals[key]

        self.duals[key] = (weakref.ref(leaf, forget), tangent)

    def live(self):
        pairs = [(ref(), t) for ref, t in list(self.duals.values())]
        return [(leaf, t) for leaf, t in pairs if leaf is not None]


_current: _Level | None = None  # (one level, process-wide, as torch's `_current_level`)
_lock = threading.Lock()


class _Pass(threading.local):
    tangent = False  # inside unpack_dual's backward passes


_pass = _Pass()


# ---- levels --------------------------------------------------------------------------------
def enter_dual_level() -> int:
    """Open the forward-AD level (torch allows one at a time) and return its index, 0."""
    global _current
    with _lock:
        if _current is not None:
            raise PyriteError("pyrite: Nested forward mode AD is not supported at the moment")
        _current = _Level(0)
        return _current.index


def exit_dual_level(*, level=None) -> None:
    """Close the level: every tangent of it is dropped, and its duals become plain tensors."""
    global _current
    with _lock:
        index = -1 if _current is None else _current.index
        if level is None:
            level = index
        if level != index:
            raise PyriteError(
                "pyrite: Trying to exit a forward AD level that was not the last one that was "
                "created. This is not supported."
            )
        if _current is None:
            raise PyriteError("pyrite: Dual level must be a positive number.")
        closing, _current = _current, None
    for ref in closing.made:
        d = ref()
        if d is not None and _is_dual_node(d.grad_fn):
            d.detach_()  # (not written in place since: still the dual itself)
    closing.duals.clear()
    closing.cache.clear()


class dual_level(contextlib.ContextDecorator):
    """`with dual_level():` opens the level and closes it on the way out (also a decorator).
    Nesting raises, as torch's: use `pr.func.jvp` for higher-order forward derivatives."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, exc_type, exc_value, traceback):
        exit_dual_level()


def _level_for(level, op: str):
    """The open level that `level` (None: the current one) names, for make_dual."""
    cur = _current
    if level is None:
        level = -1 if cur is None else cur.index
    if level < 0:
        raise PyriteError("pyrite: " + _NO_LEVEL)
    if cur is None:
        raise PyriteError(
            "pyrite: Trying to access a forward AD level with an invalid index. This index was "
            "either not created or is already deleted."
        )
    if level != cur.index:
        raise PyriteError(f"pyrite: Invalid level given to {op}")
    return cur


# ---- the graph pieces ----------------------------------------------------------------------
class _MakeDual(autograd.Function):
    """primal's value, the gradient sent to the primal's graph, or, inside unpack_dual's
    passes, to the dual's leaf."""

    @staticmethod
    def forward(ctx, primal, leaf):
        return primal.detach()  # (an alias, as torch's dual is a view of the primal)

    @staticmethod
    def backward(ctx, g):
        if _pass.tangent:
            return None, g
        return g, None  # (the leaf stands for nothing outside: no .grad for it)


class _Primal(autograd.Function):
    """y's value, differentiable as y outside unpack_dual's passes and carrying no tangent."""

    @staticmethod
    def forward(ctx, y):
        return y.detach()

    @staticmethod
    def backward(ctx, g):
        return None if _pass.tangent else g


def _is_dual_node(fn) -> bool:
    """Whether `fn` is the node _MakeDual.apply attached (named after the class)."""
    return isinstance(fn, autograd.Node) and fn.name == "_MakeDual"


def _reviver(node_ref):
    """A hook on the dual that makes its node runnable again after a backward without
    retain_graph freed it. The node saves nothing, so it can run any number of times (torch's
    dual has no reverse node when its primal needs no grad: a later backward through it, or a
    later unpack, works there). The engine runs a tensor's hooks before it checks its node."""

    def hook(g):
        node = node_ref()
        if node is not None and node.args is autograd._FREED:
            node.args = (None, None)  # (the kept arguments of a rule that saves nothing)

    return hook


def _reaches(t, leaf_ids) -> bool:
    """Whether t's graph reaches one of the leaves `leaf_ids` (an iterative walk)."""
    if t.grad_fn is None:
        return id(t) in leaf_ids
    stack, seen = [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node.edges:  # (None, ("leaf", tensor) or ("node", node, k): autograd.Node)
            if e is None:
                continue
            if e[0] == "leaf":
                if id(e[1]) in leaf_ids:
                    return True
            else:
                stack.append(e[1])
    return False


# ---- make_dual, unpack_dual ----------------------------------------------------------------
def _check_tensor(x, fn: str, name: str, position: int):
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(
            f"pyrite: {fn}(): argument '{name}' (position {position}) must be Tensor, not "
            f"{type(x).__name__}"
        )


def make_dual(tensor, tangent, *, level=None):
    """A tensor with `tensor`'s value (an alias of its storage) and `tangent` as its forward
    gradient; differentiable in reverse mode as `tensor` is."""
    _check_tensor(tensor, "make_dual", "tensor", 1)
    _check_tensor(tangent, "make_dual", "tangent", 2)
    lvl = _level_for(level, "_make_dual")
    for what, x in (("primal", tensor), ("tangent", tangent)):
        if x.dtype.kind not in "fc":
            raise ArgumentError(
                f"pyrite: Expected {what} to be floating point or complex, but got: {x.dtype!r}"
            )
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise ShapeError(
            "pyrite: Trying to set a forward gradient that has a different size than that of "
            "the original Tensor, this is not supported. Tensor is of size "
            f"{list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}."
        )
    if tensor.requires_grad and _reaches(tensor, set(lvl.duals)):
        raise PyriteError(
            "pyrite: Making a dual Tensor based on a Tensor that already has a forward gradient "
            f"at the same level {lvl.index} is not supported."
        )
    leaf = tensor.detach().requires_grad_(True)
    with autograd.enable_grad():  # (a dual whatever the grad mode, as torch's)
        dual = _MakeDual.apply(tensor, leaf)
    dual.register_hook(_reviver(weakref.ref(dual.grad_fn)))
    lvl.add_dual(leaf, tangent)
    lvl.remember(dual, tangent, graph=True)
    if not tensor.requires_grad:
        lvl.made.append(weakref.ref(dual))
    return dual


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """(primal, tangent) of `tensor`: its value, carrying no tangent, and its forward gradient
    at the level (None where it reaches no dual of the level). Two backward passes the first
    time a computed tensor is unpacked (see the module's docstring); cached after."""
    _check_tensor(tensor, "_unpack_dual", "dual", 1)
    cur = _current
    if level is None:
        level = -1 if cur is None else cur.index
    if level < 0 or cur is None:
        return UnpackedDualTensor(tensor, None)
    if level != cur.index:
        if tensor.requires_grad and _reaches(tensor, set(cur.duals)):
            raise PyriteError("pyrite: Invalid level given to _fw_primal")
        return UnpackedDualTensor(tensor, None)  # (torch's answer for a tensor without one)
    tangent = _tangent(cur, tensor)
    return UnpackedDualTensor(_primal(cur, tensor, tangent), tangent)


def _primal(lvl, t, tangent):
    """t's value without its tangent: t itself if it has none, a detached alias if nothing
    else needs its graph, else t through a _Primal node (differentiable, no tangent)."""
    if tangent is None or not t.requires_grad:
        return t
    from .func import _reaches_outside

    if not _reaches_outside([t], [leaf for leaf, _ in lvl.live()]):
        return t.detach()
    with autograd.enable_grad():
        return _Primal.apply(t)


def _tangent(lvl, y):
    """Σᵢ Jᵢ·tᵢ of y over the level's live duals (None where y reaches none of them)."""
    if not y.requires_grad or y.grad_fn is None or y.dtype.kind not in "fc":
        return None
    from .func import _reaches_outside
    from .ops.creation import zeros_like

    duals = lvl.live()
    leaves = [leaf for leaf, _ in duals]
    outer = autograd.is_grad_enabled()
    graph = outer and (
        _reaches_outside([y], leaves) or any(t.requires_grad for _, t in duals)
    )  # (a tangent the caller can differentiate: torch's unpack_dual is differentiable)
    hit = lvl.cached(y, graph)
    if hit is not None:
        return hit[0]
    if not leaves:
        return None
    tangent = None
    prev, _pass.tangent = _pass.tangent, True
    try:
        with autograd.enable_grad():
            u = zeros_like(y).requires_grad_(True)  # (the cotangent: uᵀJ is linear in u)
            g = autograd.grad([y], leaves, [u], create_graph=True, allow_unused=True)
            used = [(gi, t) for gi, (_, t) in zip(g, duals) if gi is not None]
            if used:
                lin = [(gi, t) for gi, t in used if gi.requires_grad]
                if lin:
                    (tangent,) = autograd.grad(
                        [gi for gi, _ in lin],
                        [u],
                        [t.to(gi.dtype) for gi, t in lin],
                        retain_graph=graph,
                        create_graph=graph,
                        allow_unused=True,
                    )
                if tangent is None:  # (reached, with a zero Jacobian: round, sign, ...)
                    tangent = zeros_like(y)
    finally:
        _pass.tangent = prev
    if tangent is not None and not graph:
        tangent = tangent.detach()
    lvl.remember(y, tangent, graph)
    return tangent


# `import pyrite.autograd.forward_ad` once `pr.autograd.forward_ad` has loaded this module
sys.modules.setdefault(__name__.rsplit(".", 1)[0] + ".autograd.forward_ad", sys.modules[__name__])
