"""Adamax (PyTorch's torch.optim.Adamax): Adam with an infinity-norm second moment; one fused
dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import adamax_rule
from ..ops.creation import zeros
from . import _fused
from .optimizer import Optimizer, check_hyper

__all__ = ["Adamax"]


def check_betas(betas) -> None:
    for i in (0, 1):
        if not 0.0 <= betas[i] < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")


class Adamax(Optimizer):
    """Adamax, a variant of Adam based on the infinity norm (PyTorch's torch.optim.Adamax).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 2e-3).
        betas (Tuple[float, float], optional): coefficients of the running average of the
            gradient and of the infinity norm (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, differentiable, capturable: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        capturable=False,
    ):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_betas(betas)
        check_hyper("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        rule, names = adamax_rule(group["weight_decay"] != 0, group["maximize"])
        beta1, beta2 = group["betas"]
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = zeros(p.shape, dtype=p.dtype)
                state["exp_inf"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            values = {
                "wd": group["weight_decay"],
                "w1": 1 - beta1,
                "beta2": beta2,
                "eps": group["eps"],
                "neg_clr": -(group["lr"] / (1 - beta1 ** state["step"])),
            }
            written = {"p": p, "m": state["exp_avg"], "u": state["exp_inf"]}
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
