"""ctc_loss: torch.nn.functional.ctc_loss's forward, the alpha recursion on the device
(kernels/ctc.py: one workgroup per batch item walking the time steps, chained over as many
dispatches as the device's loop budget asks for).

The lengths are read on the host (torch's CPU kernel checks them against T and the target size
before it starts, and the kernel's per-item target offsets come from them): tensors cost one
readback for both; lists and tuples cost none. Targets are range-checked against the classes
with one more (a min/max kernel): torch's CPU kernel reads out-of-range labels from wherever
they point.
"""

from __future__ import annotations

import numpy as np

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..errors import ArgumentError, ShapeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.ctc import (
    ctc_alpha_kernel,
    ctc_alpha_serial_kernel,
    ctc_table_kernel,
    workgroup_size,
)
from ..ops import indexing as _indexing
from ..ops.core import empty, max_loop_iterations, upload
from ..tensor import Tensor
from ._common import check_reduction, fmap, need_tensor


def _lengths(name, lengths, n):
    """A host int64 array of N lengths from a tensor, list, tuple or int."""
    if isinstance(lengths, Tensor):
        if lengths.dtype.kind != "i":
            raise TypeError(f"pyrite: ctc_loss: {name} must be integral, not {lengths.dtype!r}")
        arr = lengths.numpy().astype(np.int64).reshape(-1)
    else:
        arr = np.asarray(lengths)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"pyrite: ctc_loss: {name} must be integral")
        arr = arr.astype(np.int64).reshape(-1)
    if arr.size != n:
        raise ShapeError(
            f"pyrite: ctc_loss: {name} must be of size batch_size ({n}), got {arr.size}"
        )
    return arr


def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank=0,
    reduction="mean",
    zero_infinity=False,
):
    """The Connectionist Temporal Classification loss.

    log_probs: (T, N, C) or unbatched (T, C), log-probabilities (log_softmax over C; any
    values are accepted, as torch). targets: padded (N, S) or the N targets
    concatenated (sum(target_lengths),) (unbatched: the target itself). input_lengths, target_lengths: N lengths (tensors,
    lists or tuples). reduction 'mean' divides each loss by its target length (at least 1) and
    averages over the batch; zero_infinity turns infinite losses (impossible alignments) into 0.
    """
    check_reduction(reduction)
    need_tensor("ctc_loss", "log_probs", log_probs)
    need_tensor("ctc_loss", "targets", targets)
    if not log_probs.dtype.is_floating_point:
        raise TypeError(f"pyrite: ctc_loss: not implemented for {log_probs.dtype!r} log_probs")
    unbatched = log_probs.ndim == 2
    if log_probs.ndim not in (2, 3):
        raise ShapeError(
            f"pyrite: ctc_loss: log_probs must be (T, N, C) or (T, C), got "
            f"{tuple(log_probs._shape)}"
        )
    lp = log_probs.unsqueeze(1) if unbatched else log_probs  # (T, N, C)
    T, N, C = lp._shape
    if T == 0 or C == 0:
        raise ValueError(
            f"pyrite: ctc_loss: log_probs tensor must not be empty, got {tuple(log_probs._shape)}"
        )
    if not 0 <= blank < C:
        raise ValueError(f"pyrite: ctc_loss: blank ({blank}) must be in label range [0, {C})")
    il = _lengths("input_lengths", input_lengths, N)
    tl = _lengths("target_lengths", target_lengths, N)
    if il.size and (il.max() > T or il.min() < 0):
        bad = il.max() if il.max() > T else il.min()
        raise ArgumentError(
            f"pyrite: ctc_loss: Expected input_lengths to have value at most {T}, but got "
            f"value {bad} (lengths are in [0, {T}])"
        )
    if tl.size and tl.min() < 0:
        raise ArgumentError(
            f"pyrite: ctc_loss: Expected target_lengths to have value at least 0, but got "
            f"value {tl.min()}"
        )
    if not targets.dtype.kind == "i":
        targets = targets.to(D.int32)  # torch accepts float targets and truncates them
    tg = targets  # unbatched: (S,) is the one target, concatenated form (as torch)
    if tg.ndim == 2:  # padded (N, S)
        if tg._shape[0] != N:
            raise ShapeError(
                f"pyrite: ctc_loss: padded targets {tuple(targets._shape)} must have batch size {N}"
            )
        S = tg._shape[1]
        if tl.size and tl.max() > S:
            raise ShapeError(
                f"pyrite: ctc_loss: Expected tensor to have size at least {tl.max()} at "
                f"dimension 1, but got size {S} for argument #2 'targets'"
            )
        toff = tg._offset + np.arange(N, dtype=np.int64) * tg._strides[0]
        tstride = tg._strides[1]
    elif tg.ndim == 1:  # concatenated
        if tg._shape[0] != int(tl.sum()):
            raise ShapeError(
                f"pyrite: ctc_loss: Expected tensor to have size {int(tl.sum())} at dimension "
                f"0, but got size {tg._shape[0]} for argument #2 'targets'"
            )
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]]) if N else np.zeros(0, np.int64)
        toff = tg._offset + starts * tg._strides[0]
        tstride = tg._strides[0]
    else:
        raise ShapeError(
            f"pyrite: ctc_loss: Expected 1 to 2 dimensions, but got {tg.ndim}-dimensional "
            "tensor for argument #2 'targets'"
        )
    if tg.numel():
        lo, hi = _indexing._minmax(tg)
        used = int(tl.max()) if tl.size else 0
        if used and (lo < 0 or hi >= C):
            raise IndexError(
                f"pyrite: ctc_loss: target label {lo if lo < 0 else hi} is out of range for "
                f"{C} classes"
            )
    if _autograd.needs_grad(log_probs):
        # the losses as a recorded op of lp (the rule below: torch's alpha-beta gradient), the
        # reductions after it in recorded ops (their gradients are autograd's)
        with _autograd.no_grad():
            nll = _alpha(lp.detach(), tg, il, tl, toff, tstride, blank)
        plan = (tg, il, tl, toff, tstride, blank, bool(zero_infinity))
        nll = _autograd.record("ctc_loss", _nll_rule(plan), (lp,), {}, nll)
        return _reduced(nll, tl, reduction, zero_infinity, unbatched, log_probs.dtype)
    loss = _alpha(lp, tg, il, tl, toff, tstride, blank)  # (N,) f32
    if zero_infinity:
        loss = fmap("select(x0, 0.0, p_isinf(x0) && x0 > 0.0)", [loss])
    if reduction == "none":
        out = loss.reshape(()) if unbatched else loss
        return out.to(log_probs.dtype) if out.dtype is not log_probs.dtype else out
    if reduction == "sum":
        return loss.sum().to(log_probs.dtype)
    div = upload(np.maximum(tl, 1).astype(np.float32), D.float32)
    return fmap("p_divf(x0, x1)", [loss, div]).mean().to(log_probs.dtype)


# Which kernel walks the states (kernels/ctc.py). Measured on lavapipe (2 cores, f32, reduction
# 'sum' incl. the readback; torch CPU 2 threads beside it): (T, N, C, S) = (500, 16, 30, 50):
# workgroup 129 ms, serial 18.6, torch 15.7-27; (2000, 32, 40, 100): 1,684 / 266 / 221-312. A
# GPU wants the states of a step spread over a workgroup (not yet timed on the H200). Tests set
# FORCE_KERNEL to "serial" or "workgroup" to reach both on any device.
FORCE_KERNEL = None
SERIAL_WG = 8  # lavapipe's 256-bit SIMD: 8 f32 lanes


def _kernel_choice(sp_max):
    if FORCE_KERNEL is not None:
        return FORCE_KERNEL
    cpu = backend.current().adapter_type == "CPU"
    # serial needs a whole step (S' passes) within the budget, with room for many steps
    return "serial" if cpu and 64 * (sp_max + 2) <= max_loop_iterations() else "workgroup"


def _alpha(lp, tg, il, tl, toff, tstride, blank):
    """(N,) losses from the alpha recursion, the time steps chained over dispatches."""
    T, N, C = lp._shape
    loss = empty((N,), D.float32)
    if N == 0:
        return loss
    if lp.dtype is not D.float32 and lp.dtype is not D.float16:
        lp = lp.float()
    if tg.numel() == 0:
        tg = upload(np.zeros(1, np.int32), D.int32)  # a binding needs a buffer
    sp_max = 2 * int(tl.max()) + 1
    items = upload(np.stack([il, tl, toff], 1).astype(np.int32), D.int32)
    # What a step costs of an invocation's loop budget: its inner passes (ceil(S'max / wg) for
    # the workgroup kernel, S'max for the serial one), the inner loop's exit test and the outer
    # back edge. Lavapipe counts a loop's exit test too (DESIGN.md's two nested loops of 400
    # stopped after 65,209 inner iterations: 163 outer passes of 400 + 1 + 1 = 65,526, then 9;
    # a probe of 30,000 x 1 counted 21,845 = 65,535 / 3): without it T = 22,000 steps of
    # S' = 401 ran 4 a step past 65,535 and came out wrong (tests/test_ctc.py).
    if _kernel_choice(sp_max) == "serial":
        alpha = empty((N * sp_max,), D.float32)
        per_step = sp_max + 2
        src = ctc_alpha_serial_kernel(lp.dtype.wgsl, SERIAL_WG)
        grid = grid_for(N, SERIAL_WG)
    else:
        alpha = empty((N * 2 * sp_max,), D.float32)
        wg = workgroup_size(sp_max)
        per_step = -(-sp_max // wg) + 2
        src = ctc_alpha_kernel(lp.dtype.wgsl, wg)
        grid = fold_grid(N)
    steps = max(1, min(max(T, 1), max_loop_iterations() // per_step))
    dev = backend.current()
    bufs = [
        lp._storage.buffer,
        tg._storage.buffer,
        items._storage.buffer,
        alpha._storage.buffer,
        loss._storage.buffer,
    ]
    t0 = 0
    while True:
        t1 = min(T, t0 + steps)
        last = 1 if t1 >= T else 0
        info = [N, sp_max, t0, t1, last, blank, lp._offset, *lp._strides, tstride]
        dev.dispatch(src, bufs, info, grid)
        if last:
            return loss
        t0 = t1


# ---- the gradient -----------------------------------------------------------------------------
def _reduced(nll, tl, reduction, zero_infinity, unbatched, dtype):
    """The forward's reductions of the (N,) losses in recorded ops (ATen's ctc_loss: 'mean'
    divides by the target lengths clamped to 1, then averages over the batch)."""
    if zero_infinity:
        nll = nll.masked_fill(nll == float("inf"), 0.0)
    if reduction == "none":
        out = nll.reshape(()) if unbatched else nll
    elif reduction == "sum":
        out = nll.sum()
    else:
        div = upload(np.maximum(tl, 1).astype(np.float32), D.float32)
        out = (nll / div).mean()
    return out.to(dtype) if out.dtype is not dtype else out


def _nll_rule(plan):
    """The backward of the (N,) losses: torch's ctc_loss_backward (LossCTC.cpp), for each
    t < T_n and class c
        grad[t, n, c] = (exp(lp[t, n, c]) - exp(lcab(t, c) + nll_n - lp[t, n, c])) * g_n
    with lcab(t, c) = logsumexp of alpha_t(s) + beta_t(s) over the states s labelled c, 0 at
    t >= T_n; an infinite loss gives nan there (torch's -inf + inf), or 0 with zero_infinity.
    Gradients reach log_probs only. Torch does not differentiate this backward again: with
    create_graph, its part that depends on log_probs raises at a second backward (g's part,
    the gradient times g, records as usual)."""

    def rule(ctx, g):
        lp, nll = ctx.args[0], ctx.out
        with _autograd.no_grad():
            core = _ctc_grad(lp.detach(), nll.detach(), *plan)
        if _autograd.is_grad_enabled():  # create_graph: say it where torch does
            core = _autograd.record(
                "ctc_loss_backward",
                _autograd._not_implemented("ctc_loss_backward"),
                (lp,),
                {},
                core,
            )
        T, N, C = lp._shape
        return (core * g.reshape(1, N, 1),)

    rule.saves = frozenset({0, "out"})
    return rule


def _ctc_grad(lp, nll, tg, il, tl, toff, tstride, blank, zero_infinity):
    """(T, N, C) f32: the per-unit-loss gradient (the rule's formula without g_n)."""
    from ..ops.combine import cat
    from ..ops.creation import full
    from ..ops.elementwise import where
    from ..ops.scatter import gather, scatter_add, take

    T, N, C = lp._shape
    if N == 0:
        return full((T, N, C), 0.0, dtype=D.float32)
    l_max = int(tl.max())
    sp_max = 2 * l_max + 1
    lpf = lp if lp.dtype is D.float32 else lp.float()
    # the extended labels l' (N, S'max): the targets' flat positions at odd s < S'_n, a blank
    # appended after them everywhere else
    n_tg = tg.numel()
    j = np.arange(l_max)
    if tg.ndim == 2:  # padded (N, S)
        pos = np.arange(N)[:, None] * tg._shape[1] + j[None, :]
    else:
        starts = np.concatenate([[0], np.cumsum(tl)[:-1]])
        pos = starts[:, None] + j[None, :]
    pos = np.where(j[None, :] < tl[:, None], pos, n_tg)
    ext_pos = np.full((N, sp_max), n_tg, dtype=np.int64)
    ext_pos[:, 1::2] = pos
    flat = tg.reshape(-1).to(D.int64)
    flat = cat([flat, upload(np.array([blank], D.int64.np), D.int64)])
    ext = take(flat, upload(ext_pos.astype(D.int64.np), D.int64))  # (N, S'max)
    ext3 = ext.unsqueeze(0).expand(T, N, sp_max)
    alpha = _table(lp, tg, il, tl, toff, tstride, blank, sp_max, beta=False)
    beta = _table(lp, tg, il, tl, toff, tstride, blank, sp_max, beta=True)
    e = gather(lpf, 2, ext3)
    nll3 = nll.reshape(1, N, 1)
    # exp(alpha + beta - lp + nll) per state: the state's share of the paths at step t
    occ = (alpha + beta - e + nll3).exp()
    per_class = scatter_add(full((T, N, C), 0.0, dtype=D.float32), 2, ext3, occ)
    grad = lpf.exp() - per_class
    steps = np.arange(T)[:, None, None] < il[None, :, None]  # (T, N, 1)
    steps = upload(steps.astype(D.bool_.np), D.bool_)
    inf = nll3 == float("inf")
    zero = full((), 0.0, dtype=D.float32)
    if zero_infinity:
        return where(steps & ~inf, grad, zero)
    return where(steps, where(inf, full((), float("nan"), dtype=D.float32), grad), zero)


def _table(lp, tg, il, tl, toff, tstride, blank, sp_max, beta):
    """(T, N, S'max) f32: alpha or beta at every step (kernels/ctc.py ctc_table_kernel), -inf
    at steps t >= T_n and states s >= S'_n."""
    from ..ops.creation import full

    T, N, C = lp._shape
    table = full((T, N, sp_max), float("-inf"), dtype=D.float32)
    t_max = int(il.max())
    if t_max == 0:
        return table
    if lp.dtype is not D.float32 and lp.dtype is not D.float16:
        lp = lp.float()
    if tg.numel() == 0:
        tg = upload(np.zeros(1, np.int32), D.int32)  # a binding needs a buffer
    items = upload(np.stack([il, tl, toff], 1).astype(np.int32), D.int32)
    if _kernel_choice(sp_max) == "serial":
        per_step = sp_max + 2
        src = ctc_table_kernel(lp.dtype.wgsl, SERIAL_WG, beta, True)
        grid = grid_for(N, SERIAL_WG)
    else:
        wg = workgroup_size(sp_max)
        per_step = -(-sp_max // wg) + 2
        src = ctc_table_kernel(lp.dtype.wgsl, wg, beta, False)
        grid = fold_grid(N)
    steps = max(1, max_loop_iterations() // per_step)
    dev = backend.current()
    bufs = [lp._storage.buffer, tg._storage.buffer, items._storage.buffer, table._storage.buffer]
    for k0 in range(0, t_max, steps):
        k1 = min(t_max, k0 + steps)
        info = [N, sp_max, k0, k1, 0, blank, lp._offset, *lp._strides, tstride]
        dev.dispatch(src, bufs, info, grid)
    return table
