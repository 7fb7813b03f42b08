"""Adadelta (PyTorch's torch.optim.Adadelta): rho, eps, weight decay, maximize; one fused
dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import adadelta_rule
from ..ops.creation import zeros
from . import _fused
from .optimizer import Optimizer, check_hyper

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (PyTorch's torch.optim.Adadelta).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): coefficient that scales delta before it is applied to the
            parameters (default: 1.0).
        rho (float, optional): coefficient of the running average of squared gradients
            (default: 0.9).
        eps (float, optional): added to the denominator (default: 1e-6).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, capturable, differentiable: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1.0,
        rho=0.9,
        eps=1e-6,
        weight_decay=0,
        foreach=None,
        *,
        capturable=False,
        maximize=False,
        differentiable=False,
    ):
        check_hyper("learning rate", lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_hyper("epsilon value", eps)
        check_hyper("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        rule, names = adadelta_rule(group["weight_decay"] != 0, group["maximize"])
        rho = group["rho"]
        values = {
            "wd": group["weight_decay"],
            "rho": rho,
            "omr": 1 - rho,
            "eps": group["eps"],
            "neg_lr": -group["lr"],
        }
        scalars = {k: values[k] for k in names}
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["square_avg"] = zeros(p.shape, dtype=p.dtype)
                state["acc_delta"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            written = {"p": p, "sq": state["square_avg"], "acc": state["acc_delta"]}
            _fused.update(rule, written, {"g": g}, scalars)
