"""torch.func for pyrite: `functional_call` (pyrite/nn/utils/_functional_call.py). The
function transforms (grad, vmap, jacrev, ...) are not here; pyrite.autograd.functional has
jacobian, hessian, vjp and jvp in torch.autograd.functional's form."""

from __future__ import annotations

from .nn.utils._functional_call import functional_call

__all__ = ["functional_call"]
