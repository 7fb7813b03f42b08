"""ASGD (PyTorch's torch.optim.ASGD): averaged stochastic gradient descent; one fused dispatch
a parameter."""

from __future__ import annotations

from ..kernels.optim import asgd_rule
from ..ops.creation import zeros
from . import _fused
from ._host_scalars import HostScalars, f32
from .optimizer import Optimizer, check_hyper

__all__ = ["ASGD"]


class ASGD(HostScalars, Optimizer):
    """Averaged stochastic gradient descent (PyTorch's torch.optim.ASGD). The step size eta
    and the averaging weight mu are 0-d float32 state entries in torch; pyrite keeps them on
    the host (float32-rounded) and gives them as 0-d tensors in `state_dict()`.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-2).
        lambd (float, optional): decay term (default: 1e-4).
        alpha (float, optional): power for the eta update (default: 0.75).
        t0 (float, optional): the point at which to start averaging (default: 1e6).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, differentiable, capturable: accepted for PyTorch's signature.
    """

    _host_scalars = ("eta", "mu")

    def __init__(
        self,
        params,
        lr=1e-2,
        lambd=1e-4,
        alpha=0.75,
        t0=1e6,
        weight_decay=0,
        foreach=None,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_hyper("learning rate", lr)
        check_hyper("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, lambd = group["lr"], group["lambd"]
        rule, names = asgd_rule(group["weight_decay"] != 0, group["maximize"])
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["eta"] = f32(lr)
                state["mu"] = 1.0
                state["ax"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            eta, mu = state["eta"], state["mu"]
            values = {
                "wd": group["weight_decay"],
                "decay": 1 - lambd * eta,
                "neg_eta": -eta,
                "mu": mu,
                "averaging": 1.0 if mu != 1 else 0.0,
            }
            _fused.update(
                rule, {"p": p, "ax": state["ax"]}, {"g": g}, {k: values[k] for k in names}
            )
            step = state["step"]
            state["eta"] = f32(lr / ((1 + lambd * lr * step) ** group["alpha"]))
            state["mu"] = f32(1 / max(1, step - group["t0"]))
