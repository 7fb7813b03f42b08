"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (PyTorch's
torch.optim.SGD), one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import sgd_rule
from ..ops.core import empty
from . import _fused
from .optimizer import Optimizer, check_fused, check_hyper

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, optionally with momentum (PyTorch's torch.optim.SGD).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        momentum (float, optional): momentum factor (default: 0).
        dampening (float, optional): dampening for momentum (default: 0).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        nesterov (bool, optional): Nesterov momentum (default: False).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, differentiable, fused: accepted for PyTorch's signature; pyrite's update is
            always one fused dispatch a parameter.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        momentum=0,
        dampening=0,
        weight_decay=0,
        nesterov=False,
        *,
        maximize=False,
        foreach=None,
        differentiable=False,
        fused=None,
    ):
        check_hyper("learning rate", lr)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        check_fused(fused, foreach, differentiable)  # (after the groups, as torch)

    def _step_group(self, group):
        momentum = group["momentum"]
        rule, names = sgd_rule(
            group["weight_decay"] != 0, momentum != 0, bool(group["nesterov"]), group["maximize"]
        )
        for p, g in self._with_grad(group):
            written = {"p": p}
            first = 0.0
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:  # torch: buf = clone(grad) on the first step
                    buf = empty(p.shape, p.dtype)
                    state["momentum_buffer"] = buf
                    first = 1.0
                written["buf"] = buf
            values = {
                "neg_lr": -group["lr"],
                "wd": group["weight_decay"],
                "mom": momentum,
                "damp1": 1 - group["dampening"],
                "first": first,
            }
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
