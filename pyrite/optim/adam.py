"""Adam (and, with decoupled weight decay, AdamW) as PyTorch's torch.optim.Adam: betas, eps,
weight decay, AMSGrad, maximize; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import adam_rule
from ..ops.creation import zeros
from . import _fused
from .optimizer import Optimizer, check_fused, check_hyper

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam (PyTorch's torch.optim.Adam).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages of the
            gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        amsgrad (bool, optional): the AMSGrad variant (default: False).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        decoupled_weight_decay (bool, optional): decay the weights directly, as AdamW
            (default: False).
        foreach, capturable, differentiable, fused: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=0,
        amsgrad=False,
        *,
        foreach=None,
        maximize=False,
        capturable=False,
        differentiable=False,
        fused=None,
        decoupled_weight_decay=False,
    ):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        check_hyper("weight_decay value", weight_decay)
        defaults = {
            "lr": lr,
            "betas": tuple(betas),
            "eps": eps,
            "weight_decay": weight_decay,
            "amsgrad": amsgrad,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
            "fused": fused,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)
        check_fused(fused, foreach, differentiable)  # (after the groups, as torch)

    def _step_group(self, group):
        lr, wd = group["lr"], group["weight_decay"]
        beta1, beta2 = group["betas"]
        amsgrad = group["amsgrad"]
        decoupled = group["decoupled_weight_decay"]
        rule, names = adam_rule(wd != 0, bool(decoupled), bool(amsgrad), group["maximize"])
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = zeros(p.shape, dtype=p.dtype)
                state["exp_avg_sq"] = zeros(p.shape, dtype=p.dtype)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            step = state["step"]
            # the bias corrections in double on the host, as torch's non-capturable path
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            written = {"p": p, "m": state["exp_avg"], "v": state["exp_avg_sq"]}
            if amsgrad:
                written["vmax"] = state["max_exp_avg_sq"]
            values = {
                "wd": wd,
                "decay": 1 - lr * wd,
                "w1": 1 - beta1,
                "beta2": beta2,
                "omb2": 1 - beta2,
                "bc2s": bias_correction2**0.5,
                "eps": group["eps"],
                "neg_step": -(lr / bias_correction1),
            }
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
