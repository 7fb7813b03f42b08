"""`pr.compile(module)` (compile/ makes it; it lives here because it is a Module): a Module whose
forward replays a recording — of the forward alone where nothing needs its autograd graph, of the
forward and its backward where the caller will call `backward()` (compile/_aot.py)."""

from __future__ import annotations

from .. import autograd
from ..compile import CompiledFunction, _state
from ..compile._aot import TrainingGraphs
from ..tensor import Tensor
from .module import Module


class CompiledModule(Module):
    """PyTorch's OptimizedModule: the original is `_orig_mod` (so `state_dict()` keys carry the
    `_orig_mod.` prefix, as torch's do); attributes it does not have come from the original.

    Under `no_grad()`, in inference, or with frozen parameters it replays a recording of the
    forward. With grad enabled while a parameter or an input requires grad it replays a recording
    of the forward whose output's backward replays a recording of the backward
    (compile/_aot.py): `loss.backward()` and the optimizer work as eagerly.
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
        fusion = bool((options or {}).get("fusion", True))
        object.__setattr__(
            self, "_training", TrainingGraphs(mod, fusion=fusion, chunk=chunk, fullgraph=fullgraph)
        )

    def forward(self, *args, **kwargs):
        if _state.inside():  # inside a compiled function's trace or rerun: part of it
            return self._orig_mod(*args, **kwargs)
        if autograd.is_grad_enabled() and (
            any(p.requires_grad for p in self._orig_mod.parameters())  # (stops at the first)
            or any(isinstance(a, Tensor) and a.requires_grad for a in (*args, *kwargs.values()))
        ):
            return self._training(*args, **kwargs)
        return self._compiled(*args, **kwargs)

    @property
    def captured(self) -> dict:
        return self._compiled.captured

    @property
    def graph(self):
        return self._compiled.graph

    def stats(self) -> dict:
        """The inference recording's counts, and under "training" the forward and backward
        recordings' (compile/_aot.py)."""
        out = self._compiled.stats()
        out["training"] = self._training.stats()
        return out

    def reset(self):
        self._compiled.reset()
        self._training.reset()

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            mod = self.__dict__.get("_modules", {}).get("_orig_mod")
            if mod is None:
                raise
            return getattr(mod, name)
