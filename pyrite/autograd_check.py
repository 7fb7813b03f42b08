"""torch.autograd.gradcheck and gradgradcheck: analytical gradients (first, and second through
a double backward) against central differences.

WebGPU has no float64, so the differences are taken in float32 and the defaults suit it
(eps 1e-3, atol 1e-3, rtol 1e-2; torch's, for float64, are 1e-6, 1e-5, 1e-3). Each check
projects the outputs on one fixed random direction w (one backward of Σ w·f, where torch
builds the whole Jacobian row by row) and compares that gradient with its central differences,
element by element: a wrong Jacobian entry shows unless w happens to cancel it. The error names
the input and the element.
"""

from __future__ import annotations

import numpy as np

from .autograd import enable_grad, grad, no_grad
from .tensor import Tensor


class GradcheckError(RuntimeError):
    """gradcheck / gradgradcheck found analytical and numerical gradients that differ
    (torch.autograd.gradcheck.GradcheckError)."""


def _as_tuple(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def gradcheck(func, inputs, *, eps=1e-3, atol=1e-3, rtol=1e-2, raise_exception=True, **_):
    """Check the gradients of `func` at `inputs` (those that require grad) against central
    differences in float32; True if they agree, else raise GradcheckError (False with
    raise_exception=False). torch's other keywords are accepted and ignored."""
    from .ops.creation import tensor

    inputs = _as_tuple(inputs)
    diff = [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a.requires_grad]
    if not diff:
        raise ValueError(
            "pyrite: gradcheck expects at least one input tensor to require gradient, but none "
            "of them have requires_grad=True."
        )
    outs = _as_tuple(func(*inputs))
    host = [o.detach().numpy().astype(np.float64) for o in outs]
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(h.shape) for h in host]
    total = sum((o * tensor(w.astype(np.float32))).sum() for o, w in zip(outs, weights))
    analytic = grad(total, [inputs[i] for i in diff], allow_unused=True)

    def scalar(args):
        with no_grad():
            rs = _as_tuple(func(*args))
        return sum(
            float((ri.detach().numpy().astype(np.float64) * w).sum()) for ri, w in zip(rs, weights)
        )

    for k, i in enumerate(diff):
        x = inputs[i].detach().numpy().astype(np.float32)
        num = np.zeros(x.shape, np.float64)
        for j in np.ndindex(x.shape):
            for sgn in (1, -1):
                xp = x.copy()
                xp[j] += sgn * eps
                args = list(inputs)
                args[i] = tensor(xp)
                num[j] += sgn * scalar(args) / (2 * eps)
        a = analytic[k]
        a = np.zeros(x.shape) if a is None else a.numpy().astype(np.float64)
        bad = np.abs(a - num) > atol + rtol * np.abs(num)
        if bad.any():
            j = tuple(int(v) for v in np.argwhere(bad)[0])
            msg = (
                f"pyrite: gradcheck: Jacobian mismatch for input {i} at {j}: analytical "
                f"{a[j]:.6g}, numerical {num[j]:.6g}"
            )
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-3,
    atol=1e-3,
    rtol=1e-2,
    gen_non_contig_grad_outputs=False,
    raise_exception=True,
    **_,
):
    """Check the second derivatives of `func` (torch.autograd.gradgradcheck): gradcheck of
    (inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs,
    create_graph=True), so a backward whose own derivative is wrong fails. `grad_outputs`
    defaults to random values in [-1, 1) that require grad (the derivative in them is checked
    too). True if all agree, else GradcheckError (False with raise_exception=False)."""
    from .ops.creation import tensor

    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        with enable_grad():
            outs = [o for o in _as_tuple(func(*inputs)) if o.requires_grad]
        rng = np.random.default_rng(1)
        grad_outputs = tuple(
            tensor(
                rng.uniform(-1.0, 1.0, tuple(o.shape)).astype(np.float32), dtype=o.dtype
            ).requires_grad_(True)
            for o in outs
        )
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)
    diff_in = {i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad}
    diff_go = {i for i, x in enumerate(grad_outputs) if x.requires_grad}

    def first_derivatives(*args):
        # gradcheck evaluates its differences under no_grad and with fresh inputs: the
        # requires_grad of each argument is restored, and the graph is built regardless
        with enable_grad():
            ins = tuple(
                x.requires_grad_() if i in diff_in else x for i, x in enumerate(args[:-n_out])
            )
            outs = [o for o in _as_tuple(func(*ins)) if o.requires_grad]
            gos = tuple(
                x.requires_grad_() if i in diff_go else x for i, x in enumerate(args[-n_out:])
            )
            wrt = tuple(x for i, x in enumerate(ins) if i in diff_in)
            gs = grad(outs, wrt, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(
        first_derivatives,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
