"""Module backward hooks (Module.register_full_backward_hook, register_full_backward_pre_hook),
as torch's BackwardHook: the module's tensor inputs and outputs pass through identity nodes of
the graph. The outputs' node sees grad_output first (the pre-hooks may replace it); the
inputs' node then sees grad_input and runs the hooks (which may replace it). When no input
needs a gradient, the hooks run from the outputs' node with grad_input all None."""

from __future__ import annotations

from .. import autograd
from ..tensor import Tensor


def wanted(args) -> bool:
    """Hooks take part only while a graph is recorded."""
    return autograd.is_grad_enabled()


class _State:
    __slots__ = ("module", "n_in", "grad_output", "ran")

    def __init__(self, module, n_in):
        self.module = module
        self.n_in = n_in
        self.grad_output = None
        self.ran = False


def _alias(t: Tensor) -> Tensor:
    with autograd.no_grad():
        return t._view(t._shape, t._strides, t._offset)


def _through(tensors, rule, name):
    """Identity over `tensors` (those requiring grad get new aliases recorded with `rule`)."""
    outs = tuple(_alias(t) for t in tensors)
    autograd.record(name, rule, tuple(tensors), {}, outs)
    return outs


def _run_hooks(st: _State, grad_input):
    for hook in list(st.module._backward_hooks.values()):
        res = hook(st.module, grad_input, st.grad_output)
        if res is not None:
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_input):
                raise RuntimeError(
                    f"pyrite: backward hook returned an invalid number of grad_input, got "
                    f"{len(res)}, but expected {len(grad_input)}"
                )
            grad_input = res
    st.ran = True
    return grad_input


def call_with_backward_hooks(module, args, kwargs, forward):
    idx = [
        i
        for i, a in enumerate(args)
        if isinstance(a, Tensor) and a.requires_grad and a.dtype.is_floating_point
    ]
    st = _State(module, len(args))
    if idx:

        def in_rule(ctx, g):
            grad_input = [None] * st.n_in
            for k, i in enumerate(idx):
                grad_input[i] = g[k]
            new = _run_hooks(st, tuple(grad_input)) if module._backward_hooks else grad_input
            return tuple(new[i] for i in idx)

        in_rule.saves = frozenset()
        through = _through([args[i] for i in idx], in_rule, "BackwardHookFunctionBackward")
        args = list(args)
        for k, i in enumerate(idx):
            args[i] = through[k]
        args = tuple(args)
    result = forward(*args, **kwargs)
    single = isinstance(result, Tensor)
    outs = (result,) if single else tuple(result) if isinstance(result, (tuple, list)) else None
    if outs is None:
        return result
    oidx = [
        i
        for i, o in enumerate(outs)
        if isinstance(o, Tensor) and o.requires_grad and o.dtype.is_floating_point
    ]
    if not oidx:
        return result

    def out_rule(ctx, g):
        grad_output = [None] * len(outs)
        for k, i in enumerate(oidx):
            grad_output[i] = g[k]
        grad_output = tuple(grad_output)
        for hook in list(module._backward_pre_hooks.values()):
            res = hook(module, grad_output)
            if res is not None:
                grad_output = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        st.grad_output = grad_output
        if not idx and module._backward_hooks:
            _run_hooks(st, (None,) * st.n_in)
        return tuple(grad_output[i] for i in oidx)

    out_rule.saves = frozenset()
    through = _through([outs[i] for i in oidx], out_rule, "BackwardHookFunctionBackward")
    new = list(outs)
    for k, i in enumerate(oidx):
        new[i] = through[k]
    if single:
        return new[0]
    return type(result)(new) if isinstance(result, list) else tuple(new)
