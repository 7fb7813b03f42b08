"""Stochastic weight averaging (PyTorch's torch.optim.swa_utils): AveragedModel (a running
average of a model's parameters: equal weights by default, or an EMA), update_bn (recompute
BatchNorm's running statistics for the averaged weights) and SWALR (anneal each group's lr to a
constant swa_lr). The averages are pyrite tensor ops (lerp_ a tensor); `n_averaged` is a 0-d
integer buffer, as torch's, read back once an update."""

from __future__ import annotations

import itertools
import math
from copy import deepcopy

from .. import autograd
from .. import dtypes as D
from ..nn.module import Module
from ..nn.modules.norm import _BatchNorm
from ..ops.creation import tensor
from .lr_scheduler import LRScheduler, _per_group

__all__ = [
    "AveragedModel",
    "SWALR",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay=0.999):
    """fn(averaged list, current list, n_averaged): each averaged tensor lerped toward the
    current one by 1 - decay, in place."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with autograd.no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """fn(averaged list, current list, n_averaged): the equal-weight running mean, in place
    (integer tensors: the mean truncated, as torch's copy_ of a float result)."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with autograd.no_grad():
            n = _host_int(num_averaged)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                if p_avg.is_floating_point():
                    p_avg.lerp_(p_model, 1 / (n + 1))
                else:
                    p_avg.copy_(p_avg + (p_model - p_avg) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    """fn(averaged, current, n_averaged) -> decay·averaged + (1 - decay)·current."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with autograd.no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    """fn(averaged, current, n_averaged) -> averaged + (current - averaged) / (n + 1)."""

    def swa_update(averaged_param, current_param, num_averaged):
        with autograd.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _host_int(n) -> int:
    return int(n.item()) if hasattr(n, "item") else int(n)


class AveragedModel(Module):
    """A deep copy of `model` whose parameters (and, with use_buffers, buffers) hold a running
    average of `model`'s, advanced by `update_parameters(model)`: the equal-weight mean by
    default (SWA), or `avg_fn(averaged, current, n_averaged)` a tensor, or
    `multi_avg_fn(averaged list, current list, n_averaged)` in place (get_ema_multi_avg_fn for
    an EMA). Without use_buffers the buffers are copied from `model` each update. `forward`
    runs the copy.

    Args:
        model (Module): the model to average.
        device: accepted for PyTorch's signature (pyrite has one device).
        avg_fn, multi_avg_fn: the averaging rule (at most one).
        use_buffers (bool): average the buffers too (default: False).
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        self.register_buffer("n_averaged", tensor(0, dtype=D.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average `model`'s current parameters into this copy's (the first call copies)."""
        if self.use_buffers:
            self_param = itertools.chain(self.module.parameters(), self.module.buffers())
            model_param = itertools.chain(model.parameters(), model.buffers())
        else:
            self_param, model_param = self.parameters(), model.parameters()
        # (averaged, current) lists a dtype, as torch groups them for its multi-tensor rules
        groups = {}
        n = _host_int(self.n_averaged)  # the one read back of an update
        with autograd.no_grad():
            for p_averaged, p_model in zip(self_param, model_param):
                averaged, current = groups.setdefault(p_averaged.dtype, ([], []))
                averaged.append(p_averaged.detach())
                current.append(p_model.detach())
                if n == 0:
                    p_averaged.detach().copy_(p_model.detach())
            if n > 0:
                for averaged, current in groups.values():
                    if self.avg_fn is None:
                        multi = self.multi_avg_fn or get_swa_multi_avg_fn()
                        multi(averaged, current, self.n_averaged)
                    else:
                        for p_averaged, p_model in zip(averaged, current):
                            p_averaged.copy_(self.avg_fn(p_averaged, p_model, self.n_averaged))
            if not self.use_buffers:
                for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                    b_swa.detach().copy_(b_model.detach())
            self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recompute the BatchNorm running statistics of `model` with one pass over `loader`
    (batches, or (input, ...) tuples whose first item is the input): the statistics are reset
    and accumulated as a cumulative average (momentum None), the momenta and the training
    mode restored afterwards. `device` is accepted for PyTorch's signature."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with autograd.no_grad():
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            model(input)
    for bn_module in momenta:
        bn_module.momentum = momenta[bn_module]
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr from its current value to `swa_lr` over `anneal_epochs` steps
    ('cos' or 'linear'), then hold it there (the schedule of SWA's averaging phase)."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _per_group("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        self._warn_get_lr()
        # the lr the previous step would have started from, then this step's point on the curve
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [
            self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
            for group in self.optimizer.param_groups
        ]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [
            group["swa_lr"] * alpha + lr * (1 - alpha)
            for group, lr in zip(self.optimizer.param_groups, prev_lrs)
        ]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        if anneal_strategy == "cos":
            self.anneal_func = self._cosine_anneal
        else:
            self.anneal_func = self._linear_anneal

    def state_dict(self):
        return {
            key: value
            for key, value in self.__dict__.items()
            if key not in ("optimizer", "anneal_func")
        }

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
