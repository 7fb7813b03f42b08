"""Adagrad (PyTorch's torch.optim.Adagrad): lr decay, weight decay, initial accumulator value,
eps, maximize; one fused dispatch a parameter."""

from __future__ import annotations

from ..kernels.optim import adagrad_rule
from ..ops.creation import full
from . import _fused
from .optimizer import Optimizer, check_fused, check_hyper

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (PyTorch's torch.optim.Adagrad). Its state exists from construction, as torch's.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-2).
        lr_decay (float, optional): learning rate decay (default: 0).
        weight_decay (float, optional): weight decay, an L2 penalty (default: 0).
        initial_accumulator_value (float, optional): the sum of squares' start (default: 0).
        eps (float, optional): added to the denominator (default: 1e-10).
        maximize (bool, optional): maximize the objective instead of minimizing it.
        foreach, differentiable, fused: accepted for PyTorch's signature.
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        lr_decay=0,
        weight_decay=0,
        initial_accumulator_value=0,
        eps=1e-10,
        foreach=None,
        *,
        maximize=False,
        differentiable=False,
        fused=None,
    ):
        check_hyper("learning rate", lr)
        check_hyper("lr_decay value", lr_decay)
        check_hyper("weight_decay value", weight_decay)
        check_hyper("initial_accumulator_value value", initial_accumulator_value)
        check_hyper("epsilon value", eps)
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        check_fused(fused, foreach, differentiable)  # (after the groups, as torch)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group):
        state = self.state[p]
        state["step"] = 0
        state["sum"] = full(p.shape, group["initial_accumulator_value"], dtype=p.dtype)

    def _step_group(self, group):
        rule, names = adagrad_rule(group["weight_decay"] != 0, group["maximize"])
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:  # a group added after construction
                self._init_state(p, group)
            state["step"] += 1
            clr = group["lr"] / (1 + (state["step"] - 1) * group["lr_decay"])
            values = {"wd": group["weight_decay"], "eps": group["eps"], "neg_clr": -clr}
            written = {"p": p, "acc": state["sum"]}
            _fused.update(rule, written, {"g": g}, {k: values[k] for k in names})
