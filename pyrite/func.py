"""torch.func for pyrite: `functional_call` (pyrite/nn/utils/_functional_call.py) and
`stack_module_state` (an ensemble's weights stacked for `vmap`), the reverse-mode
transforms `grad`, `grad_and_value`, `vjp`, `jacrev`, `jacfwd` and `hessian`, `jvp` and
`linearize` (by two reverse passes), and `vmap` (pyrite/_vmap.py).

They are built on pyrite's tape autograd, not on functorch's levels: a transform makes its
inputs fresh leaves that require grad (or views of them, when they require grad already, so
the path to the caller's graph stays), runs the function, and differentiates with
`autograd.grad`. The result keeps a graph (`create_graph=True`) only when the caller could
differentiate it: grad mode is on and the function's graph reaches a tensor requiring grad
from outside the transform (an outer transform's input, a captured parameter). So
`grad(grad(f))`, `jacrev(jacrev(f))`, `hessian(f)`, `vmap(grad(f))` and a loss built from a
`grad` result compose as in torch. Arguments and results may be pytrees (tuples, lists, dicts,
namedtuples of tensors: a `functional_call` parameter dict, say).

Differences from torch.func (README): `jacfwd` is computed in reverse mode (forward-mode AD is
not implemented), the same as `jacrev`; a Jacobian costs one backward pass per output element;
`vmap` runs the function once per batch element (see pyrite/_vmap.py).
"""

from __future__ import annotations

import functools

from . import autograd
from ._pytree import tree_flatten, tree_map, tree_unflatten
from ._vmap import check_randomness, rng_state, vmap
from .autograd_functional import jacobian_blocks
from .errors import PyriteError
from .nn.utils._functional_call import functional_call
from .tensor import Tensor

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "hessian",
    "jacfwd",
    "jacrev",
    "jvp",
    "linearize",
    "stack_module_state",
    "vjp",
    "vmap",
]

_RANDOM_IN_ERROR_MODE = (
    "vmap: called random operation while in randomness error mode. Please either use the "
    "'same' or 'different' randomness flags on vmap or perform the randomness operation out "
    "of vmap"
)


# ---- argnums, as torch.func checks them ------------------------------------------------------
def _wrap_argnum(argnum, num_args: int) -> int:
    if not isinstance(argnum, int):
        raise PyriteError(f"pyrite: argnum must be int, got: {type(argnum)}")
    if -num_args <= argnum < num_args:
        return argnum % num_args
    raise PyriteError(f"pyrite: Got argnum={argnum}, but only {num_args} positional inputs")


def _argnums(argnums, num_args: int):
    """argnums made non-negative (an int, or a tuple of unique ints)."""
    if not isinstance(argnums, (int, tuple)):
        raise PyriteError(f"pyrite: argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    if isinstance(argnums, int):
        return _wrap_argnum(argnums, num_args)
    wrapped = tuple(_wrap_argnum(a, num_args) for a in argnums)
    if not wrapped:
        raise PyriteError("pyrite: argnums must be non-empty")
    if len(set(wrapped)) != len(wrapped):
        raise PyriteError(f"pyrite: argnums elements must be unique, got {wrapped}")
    return wrapped


def _selected(args, argnums):
    """The argument (an int argnums) or tuple of arguments to differentiate."""
    if isinstance(argnums, int):
        return args[argnums]
    return tuple(args[i] for i in argnums)


def _replaced(args, argnums, new):
    args = list(args)
    if isinstance(argnums, int):
        args[argnums] = new
    else:
        for i, v in zip(argnums, new):
            args[i] = v
    return tuple(args)


# ---- inputs made differentiable, and whether the caller can see the graph ------------------
def _differentiable(x):
    """x as a tensor this transform differentiates against: a view of it when it requires
    grad already (an outer transform's input: the path back to it stays), else a fresh leaf."""
    if not isinstance(x, Tensor):
        raise ValueError(f"pyrite: Thing passed to transform API must be Tensor, got {type(x)}")
    if x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def _reaches_outside(roots, own) -> bool:
    """Whether the graph of the tensors `roots` reaches a tensor that requires grad other than
    the transform's own fresh leaves `own`: then the caller may differentiate the result (an
    outer transform, a captured parameter) and the transform must keep the graph."""
    own_ids = {id(t) for t in own}
    stack, seen = [], set()
    for t in roots:
        if not isinstance(t, Tensor) or not t.requires_grad:
            continue
        if t.grad_fn is None:
            if id(t) not in own_ids:
                return True
        else:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge in node.edges:  # (None, ("leaf", tensor) or ("node", node, k): autograd.Node)
            if edge is None:
                continue
            if edge[0] == "leaf":
                if id(edge[1]) not in own_ids:
                    return True
            else:
                stack.append(edge[1])
    return False


def _released(tree, keep: bool):
    """A result pytree as the caller gets it: detached unless the graph is kept."""
    if keep:
        return tree
    return tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def _aux_tensors(aux):
    for leaf in tree_flatten(aux)[0]:
        if not isinstance(leaf, Tensor):
            raise PyriteError(f"pyrite: Expected tensors, got unsupported type {type(leaf)}")


def _zeros_where_none(grads, xs):
    from .ops.creation import zeros_like

    return [zeros_like(x) if g is None else g for g, x in zip(grads, xs)]


# ---- grad and grad_and_value -----------------------------------------------------------------
def _grad_and_value(func, argnums, has_aux, args, kwargs):
    outer = autograd.is_grad_enabled()
    argnums = _argnums(argnums, len(args))
    with autograd.enable_grad():
        flat, spec = tree_flatten(_selected(args, argnums))
        xs = [_differentiable(x) for x in flat]
        output = func(*_replaced(args, argnums, tree_unflatten(xs, spec)), **kwargs)
        aux = None
        if has_aux:
            if not (isinstance(output, tuple) and len(output) == 2):
                raise PyriteError(
                    "pyrite: grad_and_value(f)(*args): output of function f should be a tuple: "
                    "(output, aux) if has_aux is True"
                )
            output, aux = output
        if not isinstance(output, Tensor):
            raise PyriteError(
                "pyrite: grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got "
                f"{type(output)}"
            )
        if output.dim() != 0:
            raise PyriteError(
                "pyrite: grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, "
                f"got tensor with {output.dim()} dims. Maybe you wanted to use the vjp or "
                "jacrev APIs instead?"
            )
        if has_aux:
            _aux_tensors(aux)
        keep = outer and _reaches_outside([output], xs)
        if output.requires_grad:
            grads = autograd.grad(output, xs, create_graph=keep, allow_unused=True)
        else:
            grads = (None,) * len(xs)
        grads = _zeros_where_none(grads, xs)
    result = _released(tree_unflatten(grads, spec), keep)
    value = _released(output, keep)
    if has_aux:
        return result, (value, _released(aux, keep))
    return result, value


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: a function returning (the gradient of func's scalar output
    with respect to the arguments at `argnums`, that output) — ((gradient, (output, aux)) with
    has_aux). The gradient has the structure of those arguments (a tuple for a tuple
    argnums); an argument the output does not depend on gets zeros."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value(func, argnums, has_aux, args, kwargs)

    return wrapper


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: a function returning the gradient of func's scalar output with respect
    to the arguments at `argnums` ((gradient, aux) with has_aux). Composes with itself and the
    other transforms (see the module docstring)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value(func, argnums, has_aux, args, kwargs)
        return (g, value[1]) if has_aux else g

    return wrapper


# ---- vjp -------------------------------------------------------------------------------------
def _outputs_checked(out, api, forward=False):
    """The outputs' leaves and spec, checked: tensors, and floating-point or complex ones for
    the reverse-mode transforms. `forward` (jvp, linearize, jacfwd: torch's forward mode) takes
    an integer or bool output too: it carries no tangent (a zero one of its dtype)."""
    flat_out, out_spec = tree_flatten(out)
    if not flat_out:
        raise PyriteError(
            f"pyrite: {api}: Expected f to be a function that has non-empty output (got output "
            f"= {flat_out!r})"
        )
    for o in flat_out:
        if not isinstance(o, Tensor):
            raise PyriteError(
                f"pyrite: {api}: expected f(*primals) to return only tensors, got unsupported "
                f"type {type(o)}"
            )
        if not forward and not _differentiable_dtype(o):
            raise PyriteError(
                "pyrite: vjp(f, ...): All outputs of f must be floating-point or complex "
                f"Tensors, got Tensor with dtype {o.dtype}"
            )
    return flat_out, out_spec


def _differentiable_dtype(t) -> bool:
    return t.is_floating_point() or t.is_complex()


def _split_aux(out, has_aux):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise PyriteError(
            "pyrite: vjp(f, *primals): output of function f should be a tuple: (output, aux) "
            "if has_aux is True"
        )
    _aux_tensors(out[1])
    return out


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn) — (output, vjp_fn, aux) with has_aux.
    `vjp_fn(cotangents, retain_graph=True, create_graph=None)` takes cotangents shaped as the
    output (the same pytree) and returns a tuple with one vector-Jacobian product per primal;
    it may be called more than once."""
    outer = autograd.is_grad_enabled()
    with autograd.enable_grad():
        flat_in, in_spec = tree_flatten(primals)
        xs = [_differentiable(x) for x in flat_in]
        out, aux = _split_aux(func(*tree_unflatten(xs, in_spec)), has_aux)
        flat_out, out_spec = _outputs_checked(out, "vjp(f, *primals)")
        keep = outer and _reaches_outside(flat_out, xs)

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        if create_graph is None:
            create_graph = autograd.is_grad_enabled()
        flat_ct, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise PyriteError(
                "pyrite: Expected pytree structure of cotangents to be the same as pytree "
                f"structure of outputs to the function. cotangents: {ct_spec}, primal output: "
                f"{out_spec}"
            )
        for i, (c, o) in enumerate(zip(flat_ct, flat_out)):
            if not isinstance(c, Tensor):
                raise PyriteError(f"pyrite: Expected tensors, got unsupported type {type(c)}")
            if tuple(c.shape) != tuple(o.shape):
                raise PyriteError(
                    f"pyrite: Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and "
                    f"output[{i}] has a shape of {o.shape}."
                )
        # a graph for the caller where it can reach something outside: the primals' callers
        # or the cotangents (a transform over vjp_fn's argument)
        graph = create_graph and (keep or _reaches_outside(flat_ct, ()))
        pairs = [(o, c) for o, c in zip(flat_out, flat_ct) if o.requires_grad]
        with autograd.enable_grad():
            if pairs:
                grads = autograd.grad(
                    [o for o, _ in pairs],
                    xs,
                    [c.to(o.dtype) for o, c in pairs],
                    retain_graph=retain_graph or graph,
                    create_graph=graph,
                    allow_unused=True,
                )
            else:
                grads = (None,) * len(xs)
            grads = _zeros_where_none(grads, xs)
        return _released(tree_unflatten(grads, in_spec), graph)

    result = _released(out, keep)
    if has_aux:
        return result, vjp_fn, _released(aux, keep)
    return result, vjp_fn


# ---- jvp, linearize (the double-vjp trick) ---------------------------------------------------
def _jvp_checked(primals, tangents):
    if not isinstance(primals, tuple):
        raise PyriteError(
            "pyrite: jvp(f, primals, tangents): Expected primals to be a tuple. E.g. it should "
            "be valid to call f(*primals)."
        )
    flat_p, p_spec = tree_flatten(primals)
    flat_t, t_spec = tree_flatten(tangents)
    if not flat_p:
        raise PyriteError(
            "pyrite: jvp(f, primals, tangents): Expected primals to contain at least one Tensor."
        )
    if p_spec != t_spec:
        raise PyriteError(
            "pyrite: jvp(f, primals, tangents): Expected primals and tangents to have the same "
            f"python structure. For example, if primals is a tuple of 3 tensors, tangents also "
            f"must be. Got primals with structure {p_spec} and tangents with structure {t_spec}"
        )
    for p, t in zip(flat_p, flat_t):
        if not isinstance(p, Tensor) or not isinstance(t, Tensor):
            raise PyriteError(
                "pyrite: jvp(f, primals, tangents): expected primals and tangents to be "
                f"tensors, got {type(p).__name__} and {type(t).__name__}"
            )
        if tuple(p.shape) != tuple(t.shape):
            raise PyriteError(
                "pyrite: jvp(f, primals, tangents): Expected primals and tangents to have the "
                f"same shape. Got primal shape {tuple(p.shape)} and tangent shape "
                f"{tuple(t.shape)}"
            )
    return flat_p, p_spec, flat_t


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """torch.func.jvp: (func(*primals), J·tangents) — with has_aux (output, jvp_out, aux) —
    the outputs' pytree for both. An integer or bool output gets a zero tangent of its dtype;
    strict=True refuses an output that does not depend on the primals (an integer one, or one
    computed without them), as torch's. Computed in reverse mode (pyrite has no forward-mode
    AD): u ↦ uᵀJ is linear in u, so its gradient against the tangents is J·tangents — two
    backward passes, where torch's forward mode takes one forward pass. Composes with grad,
    vjp and jacrev (a Hessian-vector product: jvp(grad(f), (x,), (v,)))."""
    from .ops.creation import zeros_like

    flat_p, p_spec, flat_t = _jvp_checked(primals, tangents)
    outer = autograd.is_grad_enabled()
    with autograd.enable_grad():
        xs = [_differentiable(x) for x in flat_p]
        out, aux = _split_aux(func(*tree_unflatten(xs, p_spec)), has_aux)
        flat_out, out_spec = _outputs_checked(out, "jvp(f, primals, tangents)", forward=True)
        keep = outer and (_reaches_outside(flat_out, xs) or _reaches_outside(flat_t, ()))
        us = [zeros_like(o).requires_grad_(_differentiable_dtype(o)) for o in flat_out]
        jv = [None] * len(us)
        pairs = [(o, u) for o, u in zip(flat_out, us) if o.requires_grad]
        if pairs:
            g = autograd.grad([o for o, _ in pairs], xs, [u for _, u in pairs],
                              create_graph=True, allow_unused=True)  # fmt: skip
            lin = [(gi, ti) for gi, ti in zip(g, flat_t) if gi is not None and gi.requires_grad]
            if lin:
                wrt = [u for _, u in pairs]
                got = autograd.grad([a for a, _ in lin], wrt, [t.to(a.dtype) for a, t in lin],
                                    retain_graph=keep, create_graph=keep, allow_unused=True)  # fmt: skip
                by_id = {id(u): j for u, j in zip(wrt, got)}
                jv = [by_id.get(id(u)) for u in us]
        if strict and any(j is None for j in jv):
            raise PyriteError(
                "pyrite: jvp(f, primals, tangents, strict=True): The output of f is independent "
                "of the inputs. This is not allowed with strict=True."
            )
        jv = [zeros_like(o) if j is None else j for j, o in zip(jv, flat_out)]
    result = (_released(out, keep), _released(tree_unflatten(jv, out_spec), keep))
    return (*result, _released(aux, keep)) if has_aux else result


def linearize(func, *primals):
    """torch.func.linearize: (func(*primals), jvp_fn), jvp_fn(*tangents) giving J·tangents at
    the primals (each call runs jvp again: pyrite keeps no linearized graph)."""
    _jvp_checked(primals, primals)
    with autograd.no_grad():
        out = func(*primals)

    def jvp_fn(*tangents):
        return jvp(func, primals, tangents)[1]

    return out, jvp_fn


# ---- jacrev, jacfwd, hessian -----------------------------------------------------------------
def _jacobian(func, argnums, has_aux, args, randomness=None):
    outer = autograd.is_grad_enabled()
    argnums = _argnums(argnums, len(args))
    with autograd.enable_grad():
        flat_in, in_spec = tree_flatten(_selected(args, argnums))
        xs = [_differentiable(x) for x in flat_in]
        before = rng_state()
        out, aux = _split_aux(func(*_replaced(args, argnums, tree_unflatten(xs, in_spec))), has_aux)
        if randomness == "error" and rng_state() != before:
            raise PyriteError("pyrite: " + _RANDOM_IN_ERROR_MODE)
        forward = randomness is not None  # (jacfwd: torch's forward mode)
        flat_out, out_spec = _outputs_checked(out, "vjp(f, *primals)", forward=forward)
        keep = outer and _reaches_outside(flat_out, xs)
        per_out = jacobian_blocks(flat_out, xs, create_graph=keep)
        # an integer or bool output has no tangent: jacfwd's block is zeros of its dtype
        per_out = [
            blocks if _differentiable_dtype(o) else [b.to(o.dtype) for b in blocks]
            for o, blocks in zip(flat_out, per_out)
        ]
    jac = tree_unflatten([tree_unflatten(blocks, in_spec) for blocks in per_out], out_spec)
    if has_aux:
        return jac, _released(aux, keep)
    return jac


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """torch.func.jacrev: a function returning the Jacobian of func's output(s) with respect to
    the arguments at `argnums`: for each output leaf, a tensor of shape output.shape +
    input.shape per input leaf, nested as torch nests them ((jacobian, aux) with has_aux).
    One reverse pass per output element (chunk_size is accepted)."""
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError("pyrite: jacrev: `chunk_size` should be greater than 0.")

    @functools.wraps(func)
    def wrapper(*args):
        return _jacobian(func, argnums, has_aux, args)

    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd, computed in reverse mode: pyrite has no forward-mode AD, so this is
    jacrev's computation (one backward pass per output element, where torch's forward mode
    costs one pass per input element) with jacfwd's signature and results (an integer or bool
    output gets a zero block of its dtype, as torch's forward mode gives it). `randomness` is
    vmap's: "error" (the default) refuses a func that draws random numbers, as torch's."""

    @functools.wraps(func)
    def wrapper(*args):
        check_randomness(randomness)  # (at the call, as torch's vmap inside jacfwd checks it)
        return _jacobian(func, argnums, has_aux, args, randomness)

    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func, argnums), argnums), the matrix of second
    derivatives (both Jacobians in reverse mode here)."""
    return jacfwd(jacrev(func, argnums), argnums)


# ---- model ensembling ------------------------------------------------------------------------
def stack_module_state(models):
    """torch.func.stack_module_state: ({name: stacked parameter}, {name: stacked buffer}) of
    models of one class and mode, each entry the models' tensors stacked on a new dim 0 (as
    `vmap(functional_call-ing fn, in_dims=(0, 0, None))` takes them). Stacked parameters are
    new leaves requiring grad (detached from the models'); buffers are plain stacks."""
    from .ops.combine import stack

    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or all(not m.training for m in models)):
        raise RuntimeError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")

    def stacked(tensors, name):
        grads = [t.requires_grad for t in tensors]
        if any(grads) and not all(grads):
            raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
        out = stack(tensors)
        return out.detach().requires_grad_() if all(grads) else out

    params = [dict(m.named_parameters()) for m in models]
    buffers = [dict(m.named_buffers()) for m in models]
    return (
        {k: stacked([p[k] for p in params], k) for k in params[0]},
        {k: stacked([b[k] for b in buffers], k) for k in buffers[0]},
    )
