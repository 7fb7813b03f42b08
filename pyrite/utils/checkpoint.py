"""Activation checkpointing (torch.utils.checkpoint): a segment's activations are not kept for
the backward; the backward runs the segment's forward again, with grad, and differentiates that.

    h = checkpoint(block, x, use_reentrant=False)

The forward runs under `no_grad` (nothing of it is saved but its inputs); the backward restores
the random state the forward began with (so dropout draws the same mask, `preserve_rng_state`),
reruns the segment with grad on detached copies of the inputs and runs the backward through it:
the parameters the segment uses get their gradients accumulated into `.grad` as they would
without checkpointing, and the inputs' gradients go on to the rest of the graph. Both of
torch's `use_reentrant` modes give these gradients here (pyrite has one implementation).
"""

from __future__ import annotations

from .. import autograd
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Checkpointed(autograd.Function):
    @staticmethod
    def forward(ctx, run, preserve, n_args, *args):
        from .. import get_rng_state

        ctx.run = run
        ctx.rng = get_rng_state() if preserve else None
        ctx.args = args[:n_args]  # (after them: the anchor, when no input requires grad)
        ctx.extra = len(args) - n_args
        return run(*ctx.args)

    @staticmethod
    def backward(ctx, *grads):
        from .. import get_rng_state, set_rng_state

        inputs = [
            a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
            for a in ctx.args
        ]
        saved = None
        if ctx.rng is not None:
            saved = get_rng_state()
            set_rng_state(ctx.rng)
        try:
            with autograd.enable_grad():
                out = ctx.run(*inputs)
        finally:
            if saved is not None:
                set_rng_state(saved)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [
            (o, g)
            for o, g in zip(outs, grads)
            if isinstance(o, Tensor) and o.requires_grad and g is not None
        ]
        if pairs:
            autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        got = [a.grad if isinstance(a, Tensor) and a.requires_grad else None for a in inputs]
        return (None, None, None, *got, *([None] * ctx.extra))


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, **kwargs):
    """`function(*args, **kwargs)`, its activations recomputed in the backward instead of kept
    (torch.utils.checkpoint.checkpoint)."""
    if kwargs:
        run = lambda *a: function(*a, **kwargs)  # noqa: E731
    else:
        run = function
    if not autograd.is_grad_enabled():
        return function(*args, **kwargs)  # (nothing will be differentiated: a plain call)
    anchor = ()
    if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
        if not _uses_parameters(function):
            return function(*args, **kwargs)
        # no input requires grad but parameters inside do (the first block of a model): an
        # edge to an empty leaf makes the backward reach this segment
        from ..ops.creation import empty

        anchor = (empty(0).requires_grad_(),)
    return _Checkpointed.apply(run, bool(preserve_rng_state), len(args), *args, *anchor)


def _uses_parameters(function) -> bool:
    """Whether `function` (a Module, or a bound method of one) has parameters that require grad:
    then its gradients are wanted even when no input requires grad."""
    from ..nn.module import Module

    mod = function if isinstance(function, Module) else getattr(function, "__self__", None)
    if isinstance(mod, Module):
        return any(p.requires_grad for p in mod.parameters())
    return True  # (a plain function may close over parameters: checkpoint it)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run `functions` (a Sequential or a list of modules) in `segments` checkpointed chunks
    (torch.utils.checkpoint.checkpoint_sequential); the last chunk runs without checkpointing,
    as torch's does."""
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if segments < 1:
        raise ValueError(f"pyrite: checkpoint_sequential: segments must be >= 1, not {segments}")
    size = max(1, len(fns) // segments)

    def chunk(lo, hi):
        def run(x):
            for f in fns[lo:hi]:
                x = f(x)
            return x

        return run

    end = 0
    x = input
    for start in range(0, size * (segments - 1), size):
        end = start + size
        x = checkpoint(chunk(start, end), x, use_reentrant=use_reentrant, **kwargs)
    return chunk(end, len(fns))(x)
