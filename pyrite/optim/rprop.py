"""Rprop (PyTorch's torch.optim.Rprop): resilient backpropagation, per-element step sizes grown
or shrunk by the sign of successive gradients; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import rprop_rule
from ..ops.creation import full, zeros
from . import _fused
from .optimizer import Optimizer, check_hyper

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """The resilient backpropagation algorithm (PyTorch's torch.optim.Rprop). Each element
    keeps its own step size (state "step_size", starting at lr): times etas[1] while the
    gradient keeps its sign, times etas[0] when it flips (and no move that step), clamped to
    step_sizes; the parameter moves by -sign(grad)·step_size. State "prev" is the last
    gradient used.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): the initial step size (default: 1e-2).
        etas (Tuple[float, float], optional): (etaminus, etaplus), the multiplicative decrease
            and increase factors, 0 < etaminus < 1 < etaplus (default: (0.5, 1.2)).
        step_sizes (Tuple[float, float], optional): the minimal and maximal step sizes
            (default: (1e-6, 50)).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        capturable, foreach, differentiable: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        etas=(0.5, 1.2),
        step_sizes=(1e-6, 50),
        *,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        check_hyper("learning rate", lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {
            "lr": lr,
            "etas": etas,
            "step_sizes": step_sizes,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        rule, _ = rprop_rule(group["maximize"])
        scalars = {"etaminus": etaminus, "etaplus": etaplus, "lo": lo, "hi": hi}
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["prev"] = zeros(p.shape, dtype=p.dtype)
                state["step_size"] = full(p.shape, group["lr"], dtype=p.dtype)
            state["step"] += 1
            written = {"p": p, "prev": state["prev"], "ss": state["step_size"]}
            _fused.update(rule, written, {"g": g}, scalars)
