"""NAdam (PyTorch's torch.optim.NAdam): Adam with Nesterov momentum, its momentum decay, L2 or
decoupled weight decay; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import nadam_rule
from ..ops.creation import zeros
from . import _fused
from ._host_scalars import HostScalars, f32
from .adamax import check_betas
from .optimizer import Optimizer, check_hyper

__all__ = ["NAdam"]


class NAdam(HostScalars, Optimizer):
    """NAdam (PyTorch's torch.optim.NAdam).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 2e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages of the
            gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay (default: 0).
        momentum_decay (float, optional): momentum decay, psi (default: 4e-3).
        decoupled_weight_decay (bool, optional): decay the weights directly, as AdamW does
            (NAdamW) (default: False).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, capturable, differentiable: accepted for PyTorch's signature.
    """

    _host_scalars = ("mu_product",)

    def __init__(
        self,
        params,
        lr=2e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        momentum_decay=4e-3,
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
        check_hyper("momentum_decay value", momentum_decay)
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        psi = group["momentum_decay"]
        rule, names = nadam_rule(wd != 0, bool(group["decoupled_weight_decay"]), group["maximize"])
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["mu_product"] = 1.0
                state["exp_avg"] = zeros(p.shape, dtype=p.dtype)
                state["exp_avg_sq"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            step = state["step"]
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
            # torch holds mu_product in a 0-d float32 tensor: multiplied in float32
            mu_product = f32(f32(state["mu_product"]) * f32(mu))
            state["mu_product"] = mu_product
            values = {
                "wd": wd,
                "decay": 1 - lr * wd,
                "w1": 1 - beta1,
                "beta2": beta2,
                "omb2": 1 - beta2,
                "bc2": 1 - beta2**step,
                "eps": group["eps"],
                "c_g": -lr * (1.0 - mu) / (1.0 - mu_product),
                "c_m": (-lr * mu_next) / (1.0 - mu_product * mu_next),
            }
            written = {"p": p, "m": state["exp_avg"], "v": state["exp_avg_sq"]}
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
