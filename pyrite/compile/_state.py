"""The trace running now, for the code that `pr.compile` must hear from while it records
(modules, optimizers, schedules, random kernels). Imports nothing, so any layer may import it."""

from __future__ import annotations

import functools

active = None  # compile._Trace while a compiled function is being traced, else None
rerunning = False  # while a compiled function's Python runs again over its recording (Rerun)


def inside() -> bool:
    """Whether a compiled function is being traced or rerun now: a compiled function or module
    called within is part of it (its Python runs, its commands are the outer one's)."""
    return active is not None or rerunning


def rerun_on_replay(method):
    """Decorate a host-side step (an optimizer's or a schedule's `step`): inside a trace its
    call is a region of the recording, rerun before every replay, so the host state it keeps (a
    step count, a learning rate) advances and the info words of its kernels are fresh."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        trace = active
        if trace is None:
            return method(self, *args, **kwargs)
        trace.saw(self)
        rerun = functools.partial(method, self, *args, **kwargs)
        grads = _grads_of(self)
        if grads:  # (an optimizer: its step reads .grad, which a zero_grad() after it in the
            rerun = functools.partial(_with_grads, grads, rerun)  # function took away: the
        with trace.tape.region(rerun):  # rerun before a replay sees the traced ones again)
            return method(self, *args, **kwargs)

    return wrapper


def _grads_of(obj):
    """(parameter, its .grad) for an optimizer's parameters that have one, else []."""
    groups = getattr(obj, "param_groups", None)
    if not groups:
        return []
    return [(p, p.grad) for g in groups for p in g["params"] if p.grad is not None]


def _with_grads(grads, fn):
    """fn() with each parameter's .grad the traced tensor (the one the replayed backward
    writes), put back as it was after."""
    before = [(p, p.grad) for p, _ in grads]
    for p, g in grads:
        p.grad = g
    try:
        return fn()
    finally:
        for p, g in before:
            p.grad = g
