"""`pr.compile(module)` (compile/ makes it; it lives here because it is a Module): a Module whose forward replays a recording where nothing needs its
autograd graph."""

from __future__ import annotations

from .. import autograd
from ..compile import CompiledFunction
from ..tensor import Tensor
from .module import Module


class CompiledModule(Module):
    """PyTorch's OptimizedModule: the original is `_orig_mod` (so `state_dict()` keys carry the
    `_orig_mod.` prefix, as torch's do); attributes it does not have come from the original.

    A forward with grad enabled while a parameter or an input requires grad runs eagerly: the
    caller's `backward()` needs the autograd graph, which a replay does not build. Under
    `no_grad()`, in inference, or with frozen parameters it replays the recording.
    """

    def __init__(self, mod: Module, fullgraph=False, chunk=None, captures=None, options=None):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(
            self,
            "_compiled",
            CompiledFunction(
                mod,
                fullgraph=fullgraph,
                chunk=chunk,
                known=[mod],
                captures=captures,
                options=options,
            ),
        )
        object.__setattr__(self, "_params", list(mod.parameters()))

    def forward(self, *args, **kwargs):
        if autograd.is_grad_enabled() and (
            any(p.requires_grad for p in self._params)
            or any(isinstance(a, Tensor) and a.requires_grad for a in (*args, *kwargs.values()))
        ):
            self._compiled.eager_calls += 1
            return self._orig_mod(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    @property
    def captured(self) -> dict:
        return self._compiled.captured

    @property
    def graph(self):
        return self._compiled.graph

    def stats(self) -> dict:
        return self._compiled.stats()

    def reset(self):
        self._compiled.reset()

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            mod = self.__dict__.get("_modules", {}).get("_orig_mod")
            if mod is None:
                raise
            return getattr(mod, name)
