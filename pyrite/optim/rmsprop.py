"""RMSprop (PyTorch's torch.optim.RMSprop): alpha, eps, weight decay, momentum, centered,
maximize; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import rmsprop_rule
from ..ops.creation import zeros
from . import _fused
from .optimizer import Optimizer, check_hyper

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (PyTorch's torch.optim.RMSprop).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-2).
        alpha (float, optional): smoothing constant (default: 0.99).
        eps (float, optional): added to the denominator (default: 1e-8).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        momentum (float, optional): momentum factor (default: 0).
        centered (bool, optional): normalize by an estimate of the gradient's variance.
        maximize (bool, optional): maximize the objective instead of minimizing it.
        capturable, foreach, differentiable: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        alpha=0.99,
        eps=1e-8,
        weight_decay=0,
        momentum=0,
        centered=False,
        capturable=False,
        foreach=None,
        maximize=False,
        differentiable=False,
    ):
        check_hyper("learning rate", lr)
        check_hyper("epsilon value", eps)
        check_hyper("momentum value", momentum)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("alpha value", alpha)
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "capturable": capturable,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        momentum, centered = group["momentum"], bool(group["centered"])
        rule, names = rmsprop_rule(
            group["weight_decay"] != 0, momentum > 0, centered, group["maximize"]
        )
        alpha = group["alpha"]
        values = {
            "wd": group["weight_decay"],
            "alpha": alpha,
            "oma": 1 - alpha,
            "eps": group["eps"],
            "mom": momentum,
            "neg_lr": -group["lr"],
        }
        scalars = {k: values[k] for k in names}
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["square_avg"] = zeros(p.shape, dtype=p.dtype)
                if momentum > 0:
                    state["momentum_buffer"] = zeros(p.shape, dtype=p.dtype)
                if centered:
                    state["grad_avg"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            written = {"p": p, "sq": state["square_avg"]}
            if momentum > 0:
                written["buf"] = state["momentum_buffer"]
            if centered:
                written["ga"] = state["grad_avg"]
            _fused.update(rule, written, {"g": g}, scalars)
