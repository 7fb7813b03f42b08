"""Adafactor (PyTorch's torch.optim.Adafactor, torch >= 2.5): Adam without the first moment and
with the second moment of a matrix factored into a row and a column average (O(R + C) state for
an R×C weight), the step scaled by the parameter's RMS and clipped by the update's RMS.

Not one fused dispatch: the factored moments are reductions over rows and columns, so a step is
a few pyrite ops a parameter. Where torch reads ‖p‖ and ‖update‖ back to the host (`.item()`)
to form the step size, pyrite keeps them as 0-d device tensors: no readback, the same formula
in float32 (torch's in float64, rounded to float32 once: a last-bit difference).
"""

from __future__ import annotations

from ..ops.creation import zeros, zeros_like
from ..runtime import finfo
from ..tensor import Tensor
from .optimizer import Optimizer, check_hyper

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor (PyTorch's torch.optim.Adafactor).

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): the step size's upper bound, rho_t = min(lr, 1/sqrt(t))
            (default: 1e-2).
        beta2_decay (float, optional): the second moment's weight at step t is t**beta2_decay
            (default: -0.8).
        eps (Tuple[float | None, float], optional): eps1 under the variance (None: the
            dtype's machine epsilon) and eps2, the least parameter RMS the step scales by
            (default: (None, 1e-3)).
        d (float, optional): the update's RMS is clipped to d (default: 1.0).
        weight_decay (float, optional): decoupled weight decay (default: 0.0).
        foreach (bool, optional): accepted for PyTorch's signature.
        maximize (bool, optional): maximize the objective instead of minimizing it.
    """

    def __init__(
        self,
        params,
        lr=1e-2,
        beta2_decay=-0.8,
        eps=(None, 1e-3),
        d=1.0,
        weight_decay=0.0,
        *,
        foreach=None,
        maximize=False,
    ):
        if isinstance(lr, Tensor):  # refused, as by the other optimizers (a readback a step)
            check_hyper("learning rate", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": eps,
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _step_group(self, group):
        lr, wd, d = group["lr"], group["weight_decay"], group["d"]
        beta2_decay = group["beta2_decay"]
        eps1, eps2 = group["eps"]
        for p, g in self._with_grad(group):
            if group["maximize"]:
                g = -g
            state = self.state[p]
            if len(state) == 0:
                state["step"] = 0
                if g.ndim > 1:
                    row_shape = list(g.shape)
                    row_shape[-1] = 1
                    state["row_var"] = zeros(row_shape, dtype=g.dtype)  # (..., R, 1)
                    col_shape = list(g.shape)
                    col_shape[-2] = 1
                    state["col_var"] = zeros(col_shape, dtype=g.dtype)  # (..., 1, C)
                else:
                    state["variance"] = zeros_like(g)
            e1 = finfo(p.dtype).eps if eps1 is None else eps1
            state["step"] += 1
            t = float(state["step"])
            # host scalars in double, as torch's (it reads its step tensor back)
            w = t**beta2_decay  # 1 - beta2_t
            rho_t = min(lr, 1 / t**0.5)
            n = p.numel()
            # alpha = max(eps2, RMS(p)) * rho_t, on the device
            alpha = (p.norm(2) / n**0.5).clamp(min=eps2) * rho_t
            if wd != 0:
                p.mul_(1 - lr * wd)
            if g.ndim > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                row_var.lerp_(g.norm(dim=-1, keepdim=True).square() / g.shape[-1], w)
                col_var.lerp_(g.norm(dim=-2, keepdim=True).square() / g.shape[-2], w)
                var_estimate = row_var @ col_var  # (..., R, C)
                var_estimate = var_estimate / row_var.mean(dim=-2, keepdim=True).clamp(min=e1)
            else:
                variance = state["variance"]
                variance.lerp_(g * g, w)
                var_estimate = variance
            update = var_estimate.clamp(min=e1 * e1).rsqrt() * g
            # the update's RMS clipped to d: denom = max(1, RMS(update) / d)
            denom = (update.norm(2) / (n**0.5 * d)).clamp(min=1.0)
            p.add_(update * (-alpha / denom))
