"""AdamW: Adam with decoupled weight decay (PyTorch's torch.optim.AdamW)."""

from __future__ import annotations

from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """AdamW (PyTorch's torch.optim.AdamW): Adam whose weight decay multiplies the weights by
    1 - lr * weight_decay each step instead of entering the gradient.

    Args:
        params (iterable): parameters to optimize, or dicts defining parameter groups.
        lr (float, optional): learning rate (default: 1e-3).
        betas (Tuple[float, float], optional): (default: (0.9, 0.999)).
        eps (float, optional): (default: 1e-8).
        weight_decay (float, optional): weight decay coefficient (default: 1e-2).
        amsgrad (bool, optional): the AMSGrad variant (default: False).
        maximize (bool, optional): maximize the objective instead of minimizing it.
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        betas=(0.9, 0.999),
        eps=1e-8,
        weight_decay=1e-2,
        amsgrad=False,
        *,
        maximize=False,
        foreach=None,
        capturable=False,
        differentiable=False,
        fused=None,
    ):
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            capturable=capturable,
            differentiable=differentiable,
            fused=fused,
            decoupled_weight_decay=True,
        )

    def _fix_group(self, group):
        # torch: a state dict loaded into AdamW always decays decoupled
        group["decoupled_weight_decay"] = True
