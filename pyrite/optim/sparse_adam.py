"""SparseAdam (PyTorch's torch.optim.SparseAdam): Adam that updates only the rows a sparse
gradient holds (an Embedding(sparse=True)'s looked-up rows), leaving the moments and values of
every other row as they are; one fused dispatch a parameter.

pyrite has no sparse tensors: Embedding(sparse=True) gives a dense gradient, zero outside the
rows looked up (and on padding_idx, which torch's sparse gradient leaves out too). So the rows
updated here are the rows (along dim 0) whose gradient has a non-zero element. The one
difference from torch: a row that was looked up but whose gradient is exactly zero in every
element is skipped here, where torch decays its moments and moves it. torch refuses a dense
gradient; pyrite accepts any gradient and reads it as row-sparse in the same way.
"""

from __future__ import annotations

import math

from .. import dtypes as D
from ..kernels.optim import sparse_adam_rule
from ..ops.creation import zeros
from ..tensor import Tensor
from . import _fused
from ._hooks import hooked_state_dict
from .optimizer import Optimizer, check_hyper

__all__ = ["SparseAdam"]


def _row_mask(g: Tensor) -> Tensor:
    """1.0 where the row (index along dim 0) of `g` has a non-zero element, as g's shape."""
    nz = g != 0
    if g.ndim >= 2:
        # (the row length spelled out: -1 cannot be inferred for a gradient of 0 rows)
        rows = nz.reshape(g.shape[0], math.prod(g.shape[1:])).any(dim=1)  # (R,)
        nz = rows.reshape(g.shape[0], *([1] * (g.ndim - 1))).expand(*g.shape)
    return nz.to(D.float32)


class SparseAdam(Optimizer):
    """SparseAdam (PyTorch's torch.optim.SparseAdam): a lazy Adam for row-sparse gradients
    (nn.Embedding(sparse=True)); see the module's note on dense gradients.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): coefficients of the running averages of the
            gradient and its square (default: (0.9, 0.999)).
        eps (float, optional): added to the denominator (default: 1e-8).
        maximize (bool, optional): maximize the objective instead of minimizing it.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(lr, Tensor):
            check_hyper("learning rate", lr)
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)

    def _step_group(self, group):
        beta1, beta2 = group["betas"]
        rule, names = sparse_adam_rule(bool(group.get("maximize", False)))
        for p, g in self._with_grad(group):
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                state["exp_avg"] = zeros(p.shape, dtype=p.dtype)
                state["exp_avg_sq"] = zeros(p.shape, dtype=p.dtype)
            state["step"] += 1
            step = state["step"]
            # the step size in double on the host, as torch's
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            step_size = group["lr"] * bias_correction2**0.5 / bias_correction1
            values = {
                "w1": 1 - beta1,
                "omb2": 1 - beta2,
                "eps": group["eps"],
                "neg_step": -step_size,
            }
            written = {"p": p, "m": state["exp_avg"], "v": state["exp_avg_sq"]}
            read = {"g": g, "k": _row_mask(g)}
            _fused.update(rule, written, read, {k: values[k] for k in names})

    @hooked_state_dict  # (torch's SparseAdam has no override: the hooks see the result)
    def state_dict(self) -> dict:
        """As Optimizer.state_dict, but the step count stays a Python int (torch's SparseAdam
        keeps it so)."""
        sd = super().state_dict()
        # (the base class lists self.state in its order)
        for s, live in zip(sd["state"].values(), self.state.values()):
            if "step" in s:
                s["step"] = live["step"]
        return sd
