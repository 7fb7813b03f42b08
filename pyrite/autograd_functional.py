"""torch.autograd.functional (as `pyrite.autograd.functional`): jacobian, hessian, vjp, jvp,
hvp and vhp of a function of tensors, built on pyrite.autograd.grad.

`jacobian` runs one backward pass per output element (torch's vectorize=False strategy; there is
no vmap to batch them), so it suits small outputs. `jvp` and `hvp` use the double-backward
trick: a vector-Jacobian product is linear in its vector, so its gradient with respect to that
vector is the Jacobian-vector product."""

from __future__ import annotations

from . import autograd
from .tensor import Tensor


def _tuple(x, what):
    if isinstance(x, Tensor):
        return (x,), True
    if isinstance(x, (tuple, list)) and all(isinstance(t, Tensor) for t in x):
        return tuple(x), False
    raise TypeError(
        f"pyrite: autograd.functional: the {what} must be a Tensor or a tuple of Tensors, got "
        f"{type(x).__name__}"
    )


def _prepare(inputs, create_graph):
    """Inputs as leaves that require grad (a detached view of each, unless create_graph keeps
    their history so the result can be differentiated again)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(True))
    return tuple(out)


def _zeros_for(grads, inputs):
    from .ops.creation import zeros_like

    return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, inputs))


def _check_strict(grads, strict, what):
    if strict and any(g is None for g in grads):
        raise RuntimeError(
            f"pyrite: autograd.functional.{what}: the output is independent of an input "
            "(strict=True)"
        )


def _grad(outputs, inputs, grad_outputs, create_graph):
    outs = tuple(o for o in outputs if o.requires_grad)
    gos = tuple(g for o, g in zip(outputs, grad_outputs) if o.requires_grad)
    if not outs:
        return (None,) * len(inputs)
    return autograd.grad(
        outs, inputs, gos, retain_graph=True, create_graph=create_graph, allow_unused=True
    )


def _detach_all(ts, create_graph):
    return tuple(t if create_graph else t.detach() for t in ts)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·J): v shaped as the outputs (may be omitted for a one-element output)."""
    from .ops.creation import ones_like

    inputs, one_in = _tuple(inputs, "inputs")
    with autograd.enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, one_out = _tuple(func(*xs), "outputs of func")
        if v is None:
            if len(outputs) != 1 or outputs[0].numel() != 1:
                raise RuntimeError(
                    "pyrite: autograd.functional.vjp: v may be omitted only when func returns a "
                    "single one-element tensor"
                )
            vs = (ones_like(outputs[0]),)
        else:
            vs, _ = _tuple(v, "v")
        grads = _grad(outputs, xs, vs, create_graph)
    _check_strict(grads, strict, "vjp")
    res = _detach_all(_zeros_for(grads, inputs), create_graph)
    outs = _detach_all(outputs, create_graph)
    return (outs[0] if one_out else outs), (res[0] if one_in else res)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J·v): v shaped as the inputs (may be omitted for a one-element input)."""
    from .ops.creation import ones_like, zeros_like

    inputs, one_in = _tuple(inputs, "inputs")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError(
                "pyrite: autograd.functional.jvp: v may be omitted only for a single "
                "one-element input"
            )
        vs = (ones_like(inputs[0]),)
    else:
        vs, _ = _tuple(v, "v")
    with autograd.enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, one_out = _tuple(func(*xs), "outputs of func")
        # u ↦ uᵀJ is linear in u: its gradient with respect to u, taken against v, is J·v
        us = tuple(zeros_like(o).requires_grad_(True) for o in outputs)
        g = _grad(outputs, xs, us, True)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
        if pairs:
            jv = autograd.grad(
                tuple(p[0] for p in pairs),
                us,
                tuple(p[1] for p in pairs),
                retain_graph=True,
                create_graph=create_graph,
                allow_unused=True,
            )
        else:
            jv = (None,) * len(us)
    _check_strict(jv, strict, "jvp")
    res = _detach_all(_zeros_for(jv, outputs), create_graph)
    outs = _detach_all(outputs, create_graph)
    return (outs[0] if one_out else outs), (res[0] if one_out else res)


def jacobian_blocks(outputs, xs, create_graph=False, strict=False, what="jacobian"):
    """[[∂outputs[i]/∂xs[j], shaped outputs[i].shape + xs[j].shape, for each j] for each i]:
    one reverse pass per output element, the graph kept between them (the xs are tensors that
    require grad and the outputs were computed from them). Zeros where an output does not
    depend on an input (strict=True raises instead). Shared with pyrite.func's jacrev."""
    from .ops.combine import stack
    from .ops.creation import zeros, zeros_like

    per_out = []
    for o in outputs:
        rows = [[] for _ in xs]
        flat = o.reshape(-1)
        for k in range(flat.numel()):
            if o.requires_grad:
                g = autograd.grad(
                    flat[k], xs, retain_graph=True, create_graph=create_graph, allow_unused=True
                )
            else:
                g = (None,) * len(xs)
            _check_strict(g, strict, what)
            for j, (gj, x) in enumerate(zip(g, xs)):
                rows[j].append(zeros_like(x) if gj is None else gj)
        blocks = []
        for j, x in enumerate(xs):
            if rows[j]:
                b = stack(rows[j]).reshape(*o.shape, *x.shape)
            else:
                b = zeros(*o.shape, *x.shape, dtype=x.dtype)
            blocks.append(b if create_graph else b.detach())
        per_out.append(blocks)
    return per_out


def jacobian(
    func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"
):
    """∂func(inputs)/∂inputs: for output i and input j a tensor of shape
    outputs[i].shape + inputs[j].shape, nested as torch nests them (a Tensor for one input and
    one output, tuples otherwise). `vectorize` and `strategy` are accepted; it is always one
    reverse pass per output element."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError(
            'pyrite: autograd.functional.jacobian: strategy must be "forward-mode" or '
            f'"reverse-mode", got {strategy!r}'
        )
    inputs, one_in = _tuple(inputs, "inputs")
    with autograd.enable_grad():
        xs = _prepare(inputs, create_graph)
        outputs, one_out = _tuple(func(*xs), "outputs of func")
        per_out = jacobian_blocks(outputs, xs, create_graph, strict)
    per_out = [blocks[0] if one_in else tuple(blocks) for blocks in per_out]
    return per_out[0] if one_out else tuple(per_out)


def hessian(
    func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy=None
):
    """∂²func/∂inputs² of a function returning one element: (n, n) blocks nested as torch's
    (a Tensor of shape inputs.shape * 2 for one input)."""
    inputs_t, one_in = _tuple(inputs, "inputs")

    def grad_of(*xs):
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(
                "pyrite: autograd.functional.hessian: func must return a single one-element tensor"
            )
        g = autograd.grad(out, xs, create_graph=True, allow_unused=True)
        from .ops.creation import zeros_like

        g = tuple(zeros_like(x) if gi is None else gi for gi, x in zip(g, xs))
        return g[0] if one_in else g

    return jacobian(grad_of, inputs_t[0] if one_in else inputs_t, create_graph, strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·H) for a function returning one element."""
    inputs, one_in = _tuple(inputs, "inputs")
    vs, _ = _tuple(v, "v") if v is not None else (None, None)
    with autograd.enable_grad():
        xs = _prepare(inputs, create_graph)
        out = func(*xs)
        if not isinstance(out, Tensor) or out.numel() != 1:
            raise RuntimeError(
                "pyrite: autograd.functional.vhp: func must return a single one-element tensor"
            )
        g = autograd.grad(out, xs, create_graph=True, allow_unused=True)
        if vs is None:
            from .ops.creation import ones_like

            vs = tuple(ones_like(x) for x in xs)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
        if pairs:
            from .ops.reduce import sum as _sum

            dot = None
            for gi, vi in pairs:
                t = _sum(gi * vi)
                dot = t if dot is None else dot + t
            h = autograd.grad(
                dot, xs, retain_graph=True, create_graph=create_graph, allow_unused=True
            )
        else:
            h = (None,) * len(xs)
    _check_strict(h, strict, "vhp")
    res = _detach_all(_zeros_for(h, inputs), create_graph)
    o = out if create_graph else out.detach()
    return o, (res[0] if one_in else res)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H·v): the Hessian is symmetric, so this is vhp."""
    return vhp(func, inputs, v, create_graph, strict)


__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
