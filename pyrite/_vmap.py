"""torch.func.vmap / torch.vmap for pyrite, as a loop: the function runs once per batch
element, on each input's slice `x.select(in_dim, i)`, and each output is the `stack` of the
per-element results along its out_dim. That is correct for every function torch's vmap runs
(the same values, shapes, dtypes and gradients: slices and stack are recorded ops), but it
costs batch-size calls of the function instead of one batched call, so it is a convenience
(per-sample gradients of a small model, Jacobian-vector batches), not a fast path. A loop is
also more permissive: data-dependent Python control flow and `.item()` inside the function,
which torch's vmap refuses, work here. `chunk_size` is accepted (the loop is chunks of 1).

Where the loop cannot be torch's vmap it refuses rather than differ: an in-place change of an
unmapped input (in_dim None) would repeat once per element (torch's runs it once, or refuses
a mapped value written into it), so it raises after the first element of a batch of two or
more; an output with out_dim None must be the same in every element (torch refuses a mapped
one; the loop sees values only, so a mapped output whose elements happen to be equal, or a
batch of one, passes).

randomness (torch's three modes): "error" refuses a function that draws from the default
generator, "different" lets each element draw its own numbers (the loop does that by itself),
"same" gives every element the numbers the first draws (the generator is rewound before each
call).
"""

from __future__ import annotations

import functools

from ._pytree import broadcast_prefix, tree_flatten, tree_unflatten
from .errors import PyriteError
from .tensor import Tensor

__all__ = ["vmap"]


def _name(func) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def check_randomness(randomness):
    if randomness not in ("error", "different", "same"):
        raise PyriteError(
            "pyrite: Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )


def _generator():
    from .ops.random import default_generator

    return default_generator


def rng_state():
    """The default generator's (seed, offset): it moves whenever a random op draws."""
    g = _generator()
    return g._seed, g.offset


def _set_rng_state(state):
    g = _generator()
    g._seed, g.offset = state


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.func.vmap(func, in_dims=0, out_dims=0, randomness="error", chunk_size=None): func
    mapped over a dimension of its inputs (`in_dims`: an int for every input, or a pytree
    matching the arguments with an int or None per input; None leaves it unmapped, as keyword
    arguments are), the results stacked along `out_dims`.

    Implemented as a loop over the batch dimension that stacks the results (see
    pyrite/_vmap.py): torch's values and errors, batch-size times the calls."""
    check_randomness(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(
            f"pyrite: vmap: chunk_size should be None or greater than 0. (got {chunk_size})"
        )

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return _vmap_call(func, in_dims, out_dims, randomness, args, kwargs)

    return wrapped


def _check_out_dims(out_dims, func):
    if isinstance(out_dims, int):
        return
    for d in tree_flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise ValueError(
                f"pyrite: vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an "
                "int, None or a python collection of ints representing where in the outputs the "
                "vmapped dimension should appear."
            )


def _batched_inputs(in_dims, args, func):
    """(batch size, each leaf's in_dim or None, the leaves, the arguments' spec)."""
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(
            f"pyrite: vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be "
            "int or a (potentially nested) tuple matching the structure of inputs, got: "
            f"{type(in_dims)}."
        )
    if not args:
        raise ValueError(
            f"pyrite: vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or "
            "you are trying to vmap over a function with no inputs. The latter is unsupported."
        )
    flat_args, spec = tree_flatten(args)
    flat_dims = broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError(
            f"pyrite: vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not "
            f"compatible with the structure of `inputs`. in_dims has structure "
            f"{tree_flatten(in_dims)[1]} but inputs has structure {spec}."
        )
    where = f"pyrite: vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={{}}"
    for i, (arg, d) in enumerate(zip(flat_args, flat_dims)):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(
                where.format(d) + " for an input but in_dim must be either an integer dimension "
                "or None."
            )
        if not isinstance(arg, Tensor):
            raise ValueError(
                where.format(d) + f" for an input but the input is of type {type(arg)}. We "
                "cannot vmap over non-Tensor arguments, please use None as the respective in_dim"
            )
        if not -arg.dim() <= d < arg.dim():
            raise ValueError(
                where.format(d) + f" for some input, but that input is a Tensor of "
                f"dimensionality {arg.dim()} so expected in_dim to satisfy -{arg.dim()} <= "
                f"in_dim < {arg.dim()}."
            )
        flat_dims[i] = d % arg.dim()
    sizes = [arg.shape[d] for arg, d in zip(flat_args, flat_dims) if d is not None]
    if not sizes:
        raise ValueError("pyrite: vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(
            "pyrite: vmap: Expected all tensors to have the same size in the mapped dimension, "
            f"got sizes {sizes} for the mapped dimension"
        )
    return sizes[0], flat_dims, flat_args, spec


def _slices(flat_args, flat_dims, i):
    return [a if d is None else a.select(d, i) for a, d in zip(flat_args, flat_dims)]


def _empty_batch_slices(flat_args, flat_dims):
    """Stand-ins for element 0 of an empty batch: zeros of each slice's shape (the function
    runs once on them for the output structure; its values are not used)."""
    from .ops.creation import zeros

    out = []
    for a, d in zip(flat_args, flat_dims):
        if d is None:
            out.append(a)
        else:
            shape = list(a.shape)
            del shape[d]
            out.append(zeros(shape, dtype=a.dtype))
    return out


def _out_dims_flat(out_dims, output, spec, func):
    def incompatible():
        raise ValueError(
            f"pyrite: vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
            f"compatible with the structure of `outputs`. out_dims has structure "
            f"{tree_flatten(out_dims)[1]} but outputs has structure {spec}."
        )

    if isinstance(output, Tensor):  # (torch's special case: a 1-tuple out_dims is allowed)
        if isinstance(out_dims, int) or out_dims is None:
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        incompatible()
    flat = broadcast_prefix(out_dims, spec)
    if flat is None:
        incompatible()
    return flat


def _check_unmapped_untouched(unmapped, func):
    """An in-place change of an unmapped input (in_dim None) would run once per batch element
    in the loop, where torch's vmap runs it once (or refuses it, when the value written is
    mapped): refused after the first element (the change happened once, as torch's would)."""
    for a, version in unmapped:
        if a._version != version:
            raise PyriteError(
                f"pyrite: vmap({_name(func)}): the function changed an unmapped input (in_dim "
                "None) in place; pyrite's vmap runs the function once per batch element, so the "
                "change would repeat batch-size times (clone the input inside the function, or "
                "map it)"
            )


def _check_unmapped(leaves, name):
    """An output with out_dim None must not depend on the mapped inputs (torch refuses a
    BatchedTensor there). The loop sees only the per-element results: tensors that differ
    between elements (in shape or value) are refused; equal ones, and a batch of one, pass
    (the one place pyrite cannot tell a mapped result from an unmapped one)."""
    first = leaves[0]
    if not isinstance(first, Tensor):
        return
    for other in leaves[1:]:
        if other is first:
            continue
        if not (
            isinstance(other, Tensor)
            and tuple(other.shape) == tuple(first.shape)
            and other.dtype == first.dtype
            and bool(((other == first) | ((other != other) & (first != first))).all())
        ):
            raise ValueError(
                f"pyrite: vmap({name}, ...): `{name}` can not return a BatchedTensor when "
                "out_dim is None"
            )


def _vmap_call(func, in_dims, out_dims, randomness, args, kwargs):
    from .ops.combine import stack

    _check_out_dims(out_dims, func)
    batch, flat_dims, flat_args, spec = _batched_inputs(in_dims, args, func)
    start = rng_state()
    unmapped = [(a, a._version) for a, d in zip(flat_args, flat_dims)
                if d is None and isinstance(a, Tensor)]  # fmt: skip
    results = []
    for i in range(max(batch, 1)):
        if randomness == "same":
            _set_rng_state(start)
        before = rng_state()
        if batch:
            pieces = _slices(flat_args, flat_dims, i)
        else:
            pieces = _empty_batch_slices(flat_args, flat_dims)
        results.append(func(*tree_unflatten(pieces, spec), **kwargs))
        if i == 0 and batch > 1:
            _check_unmapped_untouched(unmapped, func)
        if randomness == "error" and rng_state() != before:
            raise PyriteError(
                "pyrite: vmap: called random operation while in randomness error mode. Please "
                "either use the 'same' or 'different' randomness flags on vmap or perform the "
                "randomness operation out of vmap"
            )
    if not batch:
        _set_rng_state(start)  # (the stand-in call's draws are not the caller's)
    flat0, out_spec = tree_flatten(results[0])
    flat_out_dims = _out_dims_flat(out_dims, results[0], out_spec, func)
    per_leaf = [[leaf] for leaf in flat0]
    for r in results[1:]:
        flat, s = tree_flatten(r)
        if s != out_spec:
            raise PyriteError(
                f"pyrite: vmap({_name(func)}): the function returned {s} for one batch element "
                f"and {out_spec} for another (pyrite's vmap runs it once an element)"
            )
        for acc, leaf in zip(per_leaf, flat):
            acc.append(leaf)
    name = _name(func)
    outs = []
    for leaves, d in zip(per_leaf, flat_out_dims):
        if d is None:
            _check_unmapped(leaves, name)
            outs.append(leaves[0])  # unmapped: every element gave the same (torch's contract)
            continue
        if not isinstance(leaves[0], Tensor):
            raise ValueError(
                f"pyrite: vmap({name}, ...): `{name}` must only return Tensors, got type "
                f"{type(leaves[0])}. Did you mean to set out_dims= to None for output?"
            )
        nd = leaves[0].dim() + 1
        if not -nd <= d < nd:
            raise IndexError(
                f"pyrite: Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                f"but got {d})"
            )
        if batch:
            outs.append(stack(leaves, d % nd))
        else:
            shape = list(leaves[0].shape)
            shape.insert(d % nd, 0)
            outs.append(leaves[0].new_empty(shape))
    return tree_unflatten(outs, out_spec)
