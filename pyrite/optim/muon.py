"""Muon (PyTorch's torch.optim.Muon, torch >= 2.9): momentum SGD whose update is orthogonalised
by a quintic Newton–Schulz iteration, for the 2-D weights of hidden layers (embeddings, biases
and heads go to AdamW beside it).

As torch's, step by step: the momentum buffer is an exponential average of the gradients
(`buf.lerp_(grad, 1 - momentum)`; the Nesterov form orthogonalises `grad.lerp(buf,
momentum)`), the iteration runs in bfloat16 on the update scaled to a Frobenius norm of at most
1 (transposed to wide when tall), each of its ns_steps steps X ← aX + (bA + cA²)X with A = XXᵀ
as two addmm; the weight decays by 1 - lr·weight_decay and moves by -lr·adjust(shape)·O. Not
one fused dispatch: a step is a few pyrite ops and 3·ns_steps small GEMMs a parameter.
"""

from __future__ import annotations

import math

from ..ops.creation import zeros_like
from ..ops.matmul import addmm
from ..tensor import Tensor
from .optimizer import Optimizer, check_hyper

__all__ = ["Muon"]

# Keller Jordan's coefficients and step count (torch.optim._muon's defaults)
EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _zeropower_via_newtonschulz(grad: Tensor, ns_coefficients, ns_steps: int, eps: float):
    """An approximately orthogonal matrix US'Vᵀ for grad = USVᵀ (S' about 0.5-1.5), in
    bfloat16: torch's quintic iteration, op for op."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    ortho_grad = grad.bfloat16()
    tall = grad.size(0) > grad.size(1)
    if tall:
        ortho_grad = ortho_grad.T  # (cols, rows): the Gram matrix below is the smaller one
    ortho_grad.div_(ortho_grad.norm().clamp(min=eps))  # spectral norm <= Frobenius norm <= 1
    for _ in range(ns_steps):
        gram_matrix = ortho_grad @ ortho_grad.T  # A = X Xᵀ
        gram_update = addmm(gram_matrix, gram_matrix, gram_matrix, beta=b, alpha=c)  # bA + cA²
        ortho_grad = addmm(ortho_grad, gram_update, ortho_grad, beta=a)  # aX + (bA + cA²) X
    if tall:
        ortho_grad = ortho_grad.T
    return ortho_grad


def _adjust_lr(lr: float, adjust_lr_fn, param_shape) -> float:
    """torch's: "original" (None) sqrt(max(1, A/B)), Keller's; "match_rms_adamw"
    0.2·sqrt(max(A, B)), Moonshot's, so AdamW's lr and weight decay carry over."""
    A, B = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, A / B))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(A, B))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """Muon (PyTorch's torch.optim.Muon): orthogonalised momentum for 2-D parameters.

    Args:
        params (iterable): 2-D parameters to optimize, or dicts defining parameter groups
            (optimize biases, embeddings and other parameters with AdamW beside it).
        lr (float, optional): learning rate (default: 1e-3).
        weight_decay (float, optional): decoupled weight decay (default: 0.1).
        momentum (float, optional): momentum factor (default: 0.95).
        nesterov (bool, optional): orthogonalise the Nesterov form (default: True).
        ns_coefficients (tuple of three floats, optional): (a, b, c) of the Newton–Schulz
            polynomial (default: (3.4445, -4.775, 2.0315)).
        eps (float, optional): the least norm the update is divided by (default: 1e-7).
        ns_steps (int, optional): Newton–Schulz steps, fewer than 100 (default: 5).
        adjust_lr_fn (str, optional): "original" (the default, None) or "match_rms_adamw".
    """

    def __init__(
        self,
        params,
        lr=1e-3,
        weight_decay=0.1,
        momentum=0.95,
        nesterov=True,
        ns_coefficients=(DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps=EPS,
        ns_steps=DEFAULT_NS_STEPS,
        adjust_lr_fn=None,
    ):
        if isinstance(lr, Tensor):  # refused, as by the other optimizers (a readback a step)
            check_hyper("learning rate", lr)
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)
        # (torch checks the parameters given here only: a later add_param_group is not
        # checked, and its non-2-D parameters raise at step)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(
                        "Muon only supports 2D parameters whereas we found a parameter with "
                        f"size: {p.size()}"
                    )

    def _step_group(self, group):
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        for p, grad in self._with_grad(group):
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = zeros_like(grad)
            if grad.ndim != 2:
                raise ValueError("Param gradient must be a 2D matrix")
            buf = state["momentum_buffer"]
            buf.lerp_(grad, 1 - momentum)
            update = grad.lerp(buf, momentum) if group["nesterov"] else buf
            update = _zeropower_via_newtonschulz(
                update, group["ns_coefficients"], group["ns_steps"], group["eps"]
            )
            adjusted_lr = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
            p.mul_(1 - lr * wd)
            p.add_(update, alpha=-adjusted_lr)
