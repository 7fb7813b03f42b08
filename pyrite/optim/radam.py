"""RAdam (PyTorch's torch.optim.RAdam): Adam with the variance rectification term, L2 or
decoupled weight decay; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import radam_rule
from ..ops.creation import zeros
from . import _fused
from .adamax import check_betas
from .optimizer import Optimizer, check_hyper

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam (PyTorch's torch.optim.RAdam). The rectification term and whether it applies
    (the approximated SMA length past 5) depend only on the step count: computed on the host,
    passed to the fused update as scalars.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay (default: 0).
        decoupled_weight_decay (bool, optional): decay the weights directly, as AdamW does
            (default: False).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, capturable, differentiable: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        decoupled_weight_decay=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
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
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        rule, names = radam_rule(wd != 0, bool(group["decoupled_weight_decay"]), group["maximize"])
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = zeros(p.shape, dtype=p.dtype)
                state["exp_avg_sq"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            step = state["step"]
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            # the maximum and the current length of the approximated SMA (torch, in double)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
            rectified = rho_t > 5.0
            rect = 0.0
            if rectified:
                rect = (
                    (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
                ) ** 0.5
            values = {
                "wd": wd,
                "decay": 1 - lr * wd,
                "w1": 1 - beta1,
                "beta2": beta2,
                "omb2": 1 - beta2,
                "bc1": bias_correction1,
                "bc2s": bias_correction2**0.5,
                "eps": group["eps"],
                "lr": lr,
                "rect": rect,
                "rectified": 1.0 if rectified else 0.0,
            }
            written = {"p": p, "m": state["exp_avg"], "v": state["exp_avg_sq"]}
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
