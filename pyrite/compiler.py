"""torch.compiler's questions and decorators, answered for `pr.compile` (pyrite/compile/)."""

from __future__ import annotations

from .compile import _state


def is_compiling() -> bool:
    """True while `pr.compile` traces a function or reruns its Python over a recording."""
    return _state.inside()


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    return False


def disable(fn=None, recursive=True, *, reason=None):
    """`@torch.compiler.disable`: accepted; the function runs as it is (inside a compiled
    function it is part of the recording, as everything the function calls)."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def reset():
    """Nothing to clear: each compiled function holds its own recordings."""


def cudagraph_mark_step_begin():
    pass
