"""torch.autograd.functional (as `pyrite.autograd.functional`): jacobian, hessian, vjp, jvp,
hvp and vhp of a function of tensors, built on pyrite.autograd.grad.

`jacobian` runs one backward pass per output element (torch's vectorize=False strategy; there is
no batched backward to vectorize with: `vectorize=True` and `strategy="forward-mode"` give the
same values by that loop, with torch's checks of the combinations), so it suits small outputs.
`jvp` and `hvp` use the double-backward trick: a vector-Jacobian product is linear in its
vector, so its gradient with respect to that vector is the Jacobian-vector product.

The arguments are checked as torch checks them: `inputs` and `v` are a Tensor or a tuple of
Tensors, `v` matches the inputs (jvp, hvp, vhp) or the outputs (vjp) in count and shapes, and
strict=True refuses an output that does not require grad, an output independent of an input,
and (with create_graph) a derivative independent of the inputs, at the stage torch does."""

from __future__ import annotations

from . import autograd
from .errors import ArgumentAssertionError, ArgumentTypeError, PyriteError, ShapeError
from .tensor import Tensor


def _as_tuple(x, arg_name, fn_name):
    """(whether x was a tuple, x as a tuple of Tensors): torch's _as_tuple (a list is not a
    tuple here: it is refused as a non-Tensor, as torch refuses it)."""
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, el in enumerate(xs):
        if not isinstance(el, Tensor):
            where = (
                f"the value at index {i} has type" if is_tuple else f"the given {arg_name} has type"
            )
            raise ArgumentTypeError(
                f"pyrite: The {arg_name} given to {fn_name} must be either a Tensor or a tuple of "
                f"Tensors but {where} {type(el)}."
            )
    return is_tuple, xs


def _tuple_postprocess(res, to_unpack):
    """Undo _as_tuple: a bool, or (outputs were a tuple, inputs were a tuple) for nested results."""
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    """Fresh tensors for the inputs: a view (keeping their history) where create_graph and they
    require grad, else detached (requiring grad where need_graph)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view_as(t))
        else:
            out.append(t.detach().requires_grad_(need_graph))
    return tuple(out)


def _grad_postprocess(ts, create_graph):
    if ts and isinstance(ts[0], Tensor):
        return ts if create_graph else tuple(t.detach() for t in ts)
    return tuple(_grad_postprocess(t, create_graph) for t in ts)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise ShapeError(
                f"pyrite: v is a tuple of invalid length: should be {len(other)} but got {len(v)}."
            )
        raise ShapeError("pyrite: The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise ShapeError(
                f"pyrite: {prepend}v has invalid size: should be {tuple(el_other.shape)} but got "
                f"{tuple(el_v.shape)}."
            )


def _check_requires_grad(ts, kind, strict):
    """strict=True: every one of `ts` (outputs, grad_inputs, jacobian, hessian) exists and
    requires grad (torch's _check_requires_grad, its messages)."""
    if not strict:
        return
    for i, t in enumerate(ts):
        if t is None:
            raise PyriteError(
                f"pyrite: The output of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode."
            )
        if t.requires_grad:
            continue
        if kind == "hessian":
            msg = (
                f"The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode."
            )
        elif kind == "jacobian":
            msg = (
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode."
            )
        elif kind == "grad_inputs":
            msg = (
                f"The gradient with respect to input {i} is independent of the inputs of the "
                "user-provided function. This is not allowed in strict mode."
            )
        else:
            msg = (
                f"Output {i} of the user-provided function does not require gradients. The "
                "outputs must be computed in a differentiable manner from the input when "
                "running in strict mode."
            )
        raise PyriteError("pyrite: " + msg)


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that require grad (None entries and the others left
    out); (None,) * len(inputs) when none does."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    gos = [g for _, g in pairs]
    return autograd.grad(
        tuple(o for o, _ in pairs),
        inputs,
        None if all(g is None for g in gos) else tuple(gos),
        retain_graph=retain_graph,
        create_graph=create_graph,
        allow_unused=True,
    )


_STAGE_MSG = {
    "back": "The output of the user-provided function is independent of input {i}. This is not "
    "allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
    "grad_outputs when using the double backward trick to compute forward mode gradients. This "
    "is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
    "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} "
    "in the grad_jacobian. This is not allowed in strict mode as it prevents from using the "
    "double backward trick to replace forward mode AD.",
}


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    """Zeros like refs[i] where grads[i] is None (strict=True raises instead, and with
    create_graph also where a result does not require grad)."""
    from .ops.creation import zeros_like

    res = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise PyriteError("pyrite: " + _STAGE_MSG[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise PyriteError(
                f"pyrite: The {what} of the user-provided function is independent of input {i}. "
                "This is not allowed in strict mode when create_graph=True."
            )
        res.append(g)
    return tuple(res)


def _v_or_default(v, others, is_others_tuple, fn_name, create_graph, what):
    """v checked against `others` (the inputs or outputs), or ones for a single one-element
    tensor where v is omitted."""
    from .ops.creation import ones_like

    if v is not None:
        _, vs = _as_tuple(v, "v", fn_name)
        vs = _grad_preprocess(vs, create_graph=create_graph, need_graph=False)
        _validate_v(vs, others, is_others_tuple)
        return vs
    if len(others) != 1 or others[0].numel() != 1:
        raise PyriteError(
            f"pyrite: The vector v can only be None if {what} is a single Tensor with a single "
            "element."
        )
    return (ones_like(others[0]),)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·J): v shaped as the outputs (may be omitted for a one-element output)."""
    with autograd.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(
            func(*inputs), "outputs of the user-provided function", "vjp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        vs = _v_or_default(
            v, outputs, is_outputs_tuple, "vjp", create_graph,
            "the user-provided function returns a single Tensor with a single element"
        )  # fmt: skip
    with autograd.set_grad_enabled(True if create_graph else autograd.is_grad_enabled()):
        grad_res = _autograd_grad(outputs, inputs, vs, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(res, is_inputs_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J·v): v shaped as the inputs (may be omitted for a one-element input)."""
    from .ops.creation import zeros_like

    with autograd.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        vs = _v_or_default(
            v, inputs, is_inputs_tuple, "jvp", create_graph,
            "the input to the user-provided function"
        )  # fmt: skip
        is_outputs_tuple, outputs = _as_tuple(
            func(*inputs), "outputs of the user-provided function", "jvp"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        # u ↦ uᵀJ is linear in u: its gradient with respect to u, taken against v, is J·v
        us = tuple(zeros_like(o).requires_grad_(True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, us, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with autograd.set_grad_enabled(True if create_graph else autograd.is_grad_enabled()):
        grad_res = _autograd_grad(grad_inputs, us, vs, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outputs, is_outputs_tuple), _tuple_postprocess(res, is_outputs_tuple)


def jacobian_blocks(outputs, xs, create_graph=False, strict=False, what="jacobian"):
    """[[∂outputs[i]/∂xs[j], shaped outputs[i].shape + xs[j].shape, for each j] for each i]:
    one reverse pass per output element, the graph kept between them (the xs are tensors that
    require grad and the outputs were computed from them). Zeros where an output does not
    depend on an input (strict=True raises instead, as torch's jacobian does). Shared with
    pyrite.func's jacrev."""
    from .ops.combine import stack
    from .ops.creation import zeros, zeros_like

    per_out = []
    for i, o in enumerate(outputs):
        rows = [[] for _ in xs]
        flat = o.reshape(-1)
        for k in range(flat.numel()):
            if o.requires_grad:
                g = autograd.grad(
                    flat[k], xs, retain_graph=True, create_graph=create_graph, allow_unused=True
                )
            else:
                g = (None,) * len(xs)
            for j, (gj, x) in enumerate(zip(g, xs)):
                if gj is None:
                    if strict:
                        raise PyriteError(
                            f"pyrite: Output {i} of the user-provided function is independent "
                            f"of input {j}. This is not allowed in strict mode."
                        )
                    gj = zeros_like(x)
                elif strict and create_graph and not gj.requires_grad:
                    raise PyriteError(
                        f"pyrite: The jacobian of the user-provided function is independent of "
                        f"input {i}. This is not allowed in strict mode when create_graph=True."
                    )
                rows[j].append(gj)
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
    one output, tuples otherwise). `vectorize` and `strategy` are checked as torch checks them
    (forward-mode needs vectorize=True and takes neither strict nor create_graph; vectorize
    does not take strict); the values are always one reverse pass per output element."""
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ArgumentAssertionError(
            'pyrite: Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If '
            'your function has more outputs than inputs, "forward-mode" tends to be more '
            'performant. Otherwise, prefer to use "reverse-mode".'
        )
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "pyrite: torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet).'
            )
        if strict:
            raise PyriteError(
                "pyrite: torch.autograd.functional.jacobian: `strict=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `strict=False` or `strategy="reverse-mode"`.'
            )
        _as_tuple(inputs, "inputs", "jacobian")
        if not vectorize:
            raise NotImplementedError(
                "pyrite: Computing Jacobian using forward-AD or forward-over-reverse Hessian is "
                "only implemented for `vectorize=True`."
            )
    with autograd.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        xs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(
            func(*xs), "outputs of the user-provided function", "jacobian"
        )
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize and strict:
            raise PyriteError(
                "pyrite: torch.autograd.functional.jacobian: `strict=True` and "
                "`vectorized=True` are not supported together. Please either set "
                "`strict=False` or `vectorize=False`."
            )
        per_out = jacobian_blocks(outputs, xs, create_graph, strict)
    return _tuple_postprocess(tuple(tuple(b) for b in per_out), (is_outputs_tuple, is_inputs_tuple))


def hessian(
    func,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """∂²func/∂inputs² of a function returning one element: blocks of shape
    inputs[i].shape + inputs[j].shape nested as torch's (a Tensor for one input): the
    jacobian of the gradient, the outer one with torch's `vectorize` and
    `outer_jacobian_strategy` checks."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise ArgumentAssertionError(
            'pyrite: Expected strategy to be either "forward-mode" or "reverse-mode".'
        )

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function", "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise PyriteError("pyrite: The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise PyriteError(
                "pyrite: The Tensor returned by the function given to hessian should contain a "
                "single element"
            )
        return out.squeeze()

    def jac_func(*inp):
        if outer_jacobian_strategy == "forward-mode":
            inp = tuple(t.requires_grad_(True) for t in inp)
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(
        jac_func,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _hv(func, inputs, v, create_graph, strict, name):
    """vhp's and hvp's common part: (is_inputs_tuple, inputs, vs, outputs, is_outputs_tuple,
    the gradient with a graph)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
    inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
    vs = _v_or_default(
        v, inputs, is_inputs_tuple, name, create_graph, "the input to the user-provided function"
    )
    is_outputs_tuple, outputs = _as_tuple(
        func(*inputs), "outputs of the user-provided function", name
    )
    _check_requires_grad(outputs, "outputs", strict=strict)
    if is_outputs_tuple:
        raise PyriteError(f"pyrite: The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise PyriteError(
            f"pyrite: The Tensor returned by the function given to {name} should contain a "
            "single element"
        )
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict=strict)
    return is_inputs_tuple, inputs, vs, outputs, is_outputs_tuple, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), vᵀ·H) for a function returning one element."""
    with autograd.enable_grad():
        is_in, inputs, vs, outputs, is_out, jac = _hv(func, inputs, v, create_graph, strict, "vhp")
    with autograd.set_grad_enabled(True if create_graph else autograd.is_grad_enabled()):
        grad_res = _autograd_grad(jac, inputs, vs, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outputs, is_out), _tuple_postprocess(res, is_in)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H·v) for a function returning one element, by the double-backward trick
    on the gradient (as torch computes it)."""
    from .ops.creation import zeros_like

    with autograd.enable_grad():
        is_in, inputs, vs, outputs, is_out, jac = _hv(func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(zeros_like(x).requires_grad_(True) for x in inputs)
        double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict=strict)
    with autograd.set_grad_enabled(True if create_graph else autograd.is_grad_enabled()):
        grad_res = _autograd_grad(double_back, grad_jac, vs, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return _tuple_postprocess(outputs, is_out), _tuple_postprocess(res, is_in)


__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
