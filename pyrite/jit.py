"""torch.jit's decorators for ported code: pyrite has no TorchScript, so `script` and `trace`
return what they were given (warning once) and `ignore`, `unused`, `export` are identities.
`pr.compile` is pyrite's way to make a function or module faster."""

from __future__ import annotations

import typing
import warnings

_warned = set()


def _warn_once(what: str):
    if what not in _warned:
        _warned.add(what)
        warnings.warn(
            f"pyrite: there is no TorchScript; torch.jit.{what} returns its argument unchanged "
            "(pr.compile records and replays a function instead)",
            stacklevel=3,
        )


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    _warn_once("script")
    return obj


def trace(func, example_inputs=None, *args, **kwargs):
    _warn_once("trace")
    return func


def trace_module(mod, inputs=None, *args, **kwargs):
    _warn_once("trace_module")
    return mod


def _identity_decorator(fn=None, **kwargs):
    """`@ignore`, `@ignore(drop=True)`: the function itself."""
    if fn is None:
        return lambda f: f
    return fn


ignore = unused = export = _identity_decorator
script_method = _identity_decorator


def interface(obj):
    return obj


def annotate(the_type, the_value):
    return the_value


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    return mod


def optimize_for_inference(mod, other_methods=None):
    return mod


Final = typing.Final  # `x: torch.jit.Final[int]` in a module
