"""What `pr.compile`'s guards compare (compile/__init__.py): the structure and the tensors of a
call's arguments, and the state of the modules, optimizers and schedules a function uses."""

from __future__ import annotations

import weakref

from ..tensor import Tensor


def flatten(obj, leaves, key):
    """The structure of `obj` with its tensors pulled out into `leaves`; `key` gets what the
    guards compare."""
    if isinstance(obj, Tensor):
        leaves.append(obj)
        key.append((obj._shape, obj.dtype, obj.requires_grad))
        return None
    if type(obj) in (list, tuple):
        key.append((type(obj), len(obj)))
        return (type(obj), [flatten(o, leaves, key) for o in obj])
    if type(obj) is dict:
        key.append((dict, tuple(obj)))
        return (dict, {k: flatten(v, leaves, key) for k, v in obj.items()})
    try:
        hash(obj)
        key.append(("v", type(obj), obj))
    except TypeError:
        key.append(("id", id(obj)))
    return ("v", obj)


def unflatten(spec, leaves):
    if spec is None:
        return next(leaves)
    kind, body = spec
    if kind == "v":
        return body
    if kind is dict:
        return {k: unflatten(v, leaves) for k, v in body.items()}
    return kind(unflatten(s, leaves) for s in body)


def byte_span(t: Tensor):
    """(first byte, bytes) of a contiguous tensor's elements, rounded out to whole words, or
    None where a plain copy cannot move it (not contiguous, not word-aligned)."""
    sb = t.dtype.storage_bytes
    start = t._offset * sb
    n = (t.numel() * sb + 3) & ~3
    if not t.is_contiguous() or start % 4 or start + n > t._storage.buffer.size:
        return None
    return start, n


# ---- state the guards watch ------------------------------------------------------------------
def stateful(obj) -> bool:
    from ..nn.module import Module
    from ..optim.lr_scheduler import LRScheduler
    from ..optim.optimizer import Optimizer

    return isinstance(obj, (Module, Optimizer, LRScheduler))


def found_in(fn) -> list:
    """Modules, optimizers and schedules a function names: its closure, the globals its code
    (and the code of functions nested in it) names, its defaults, a bound method's object and
    that object's attributes; one level into lists, tuples and dicts."""
    seen: dict[int, object] = {}

    def add(v, depth=0):
        if stateful(v):
            seen.setdefault(id(v), v)
        elif depth == 0 and isinstance(v, (list, tuple)):
            for x in v[:64]:
                add(x, 1)
        elif depth == 0 and isinstance(v, dict):
            for x in list(v.values())[:64]:
                add(x, 1)

    target = getattr(fn, "__self__", None)
    if target is not None:
        add(target)
        for v in getattr(target, "__dict__", {}).values():
            add(v)
    func = getattr(fn, "__func__", fn)
    code = getattr(func, "__code__", None)
    if code is None:  # a callable object
        for v in getattr(fn, "__dict__", {}).values():
            add(v)
        return list(seen.values())
    for cell in getattr(func, "__closure__", None) or ():
        try:
            add(cell.cell_contents)
        except ValueError:
            pass
    glob = getattr(func, "__globals__", {})
    codes = [code]
    while codes:
        c = codes.pop()
        for name in c.co_names:
            if name in glob:
                add(glob[name])
        codes += [k for k in c.co_consts if hasattr(k, "co_names")]
    for v in getattr(func, "__defaults__", None) or ():
        add(v)
    return list(seen.values())


class Watch:
    """What a guard reads of one object: its submodules and parameters, held by weak reference
    (so a replaced parameter dies and the recordings naming it go stale), walked again at every
    trace."""

    def __init__(self, obj):
        self.obj = obj
        self.walk()

    def walk(self):
        from ..nn.module import Module
        from ..optim.optimizer import Optimizer

        obj = self.obj
        self.mods = [weakref.ref(m) for m in obj.modules()] if isinstance(obj, Module) else []
        self.params = [weakref.ref(p) for p in obj.parameters()] if isinstance(obj, Module) else []
        self.opt = obj if isinstance(obj, Optimizer) else None

    def ids(self):
        return [id(r()) for r in self.mods]

    def state(self, grads=True):
        """What the guards compare; `grads=False` leaves out which parameters have a `.grad`
        (a compiled module's backward hands its gradients to the engine, which accumulates)."""
        s = []
        for r in self.mods:
            m = r()
            s.append(None if m is None else m.training)
        for r in self.params:
            p = r()
            if p is None:
                s.append(None)
            else:
                s.append((p.grad is None, p.requires_grad) if grads else p.requires_grad)
        if self.opt is not None:
            s.append((len(self.opt.state), tuple(len(g["params"]) for g in self.opt.param_groups)))
            s.append(tuple(_rule_shape(g) for g in self.opt.param_groups))
            s.append(tuple(_scalar_classes(g, self.opt.state) for g in self.opt.param_groups))
        return tuple(s)


def _scalar_classes(group: dict, state):
    """Which parameters of a group have the same optimizer step count (Adam's `step`, a host
    number; the other host numbers of torch's optimizers, NAdam's `mu_product`, ASGD's `eta`
    and `mu`, follow from it within a group): the group's size where all do (the usual case),
    else per parameter the index of the first with its count. A recording fuses the update of
    parameters whose counts were equal at its trace into one kernel with one set of scalars;
    once their counts part (a parameter frozen for some calls, then trained again) a replay of
    it cannot give them their own, so that is another guard. (Called every call: ~12 µs for
    200 parameters.)"""
    steps = []
    for st in map(state.get, group["params"]):
        s = st.get("step") if st else None
        steps.append(s if type(s) is int or type(s) is float else None)  # (a tensor: on device)
    if steps.count(steps[0] if steps else None) == len(steps):
        return len(steps)
    first: dict = {}
    return tuple(first.setdefault(s, i) for i, s in enumerate(steps))


def _rule_shape(group: dict) -> tuple:
    """What of a param group's hyperparameters chooses an update's kernel, not its scalars:
    whether each number is zero and each flag's value (`weight_decay` 0 -> 0.1, `nesterov`,
    `maximize` change the rule a replay would run; a new nonzero value is only a scalar)."""
    out = []
    for k, v in group.items():
        if k == "params" or k.endswith("lr"):  # (schedules move these, to 0 too: a scalar)
            continue
        if isinstance(v, (bool, int, float)) or v is None:
            out.append((k, type(v), bool(v)))
        elif isinstance(v, tuple) and all(isinstance(x, (int, float)) for x in v):
            out.append((k, tuple(bool(x) for x in v)))
        elif isinstance(v, str):
            out.append((k, v))
    return tuple(out)


def alias_groups(leaves):
    """Arguments that share a storage (`f(x, x)`, `f(x, x[1:])`): ([indices of each group of two
    or more], a guard word pinning their layout: each one's place in the group's words and its
    strides), or ([], None). Their slots share one storage laid out the same way (_slots), so a
    write through one argument is seen through the others, as in eager code."""
    by: dict[int, list[int]] = {}
    for i, t in enumerate(leaves):
        by.setdefault(id(t._storage.buffer), []).append(i)
    groups = [ix for ix in by.values() if len(ix) > 1]
    if not groups:
        return [], None
    words = []
    for ix in groups:
        lo = group_start(leaves[i] for i in ix)
        words.append(
            tuple(
                (i, leaves[i]._offset * leaves[i].dtype.storage_bytes - lo, leaves[i]._strides)
                for i in ix
            )
        )
    return groups, ("alias", tuple(words))


def group_start(tensors) -> int:
    """The first byte of the words a group of views of one storage reaches, 8-aligned (so every
    view's first element sits a whole number of elements past it)."""
    return min(reach(t)[0] for t in tensors) & ~7


def reach(t: Tensor):
    """(first byte, bytes, element offset within them) of the words `t`'s view reaches."""
    sb = t.dtype.storage_bytes
    reach = sum((d - 1) * st for d, st in zip(t._shape, t._strides) if d > 0)
    lo = t._offset * sb
    start = lo & ~3
    end = ((t._offset + reach + 1) * sb + 3) & ~3 if t.numel() else start + 4
    return start, max(end - start, 4), (lo - start) // sb
