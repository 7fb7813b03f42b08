"""The gradient sweep's machinery: each forward-sweep case run backward through torch and pyrite.

A case is the forward sweep's (tests/sweep_ops.py: the op's generator, its lambda) with every
float tensor argument taken to float32, its non-finite values replaced and every value nudged by
a relative 1e-3 (away from exact zeros, ties and integer points: kinks of abs/relu/max/round),
then made a leaf that requires grad. The argument's layout is applied to the leaf (a permuted
view, a slice with a step, an expanded size-1 dimension), so each layout's backward (permute,
strided slice, expand's sum) is exercised too; the gradient is compared at the leaf.

Both sides backprop `sum(out_i * w_i)` over the float outputs torch records a graph for, with one
random cotangent w_i per output, and every leaf's `.grad` is compared with torch's:

- `ok`: within tolerance (the op's forward Tol, times `FACTOR` for the backward's arithmetic, and
  an absolute floor of the largest gradient times the terms summed), of torch's float32 gradient
  or of its float64 one;
- `documented`: pyrite raises NotImplementedError naming the op (a missing rule: the to-do list);
- `FAIL`: a wrong value, a gradient pyrite leaves None where torch has a nonzero one, an output
  torch records and pyrite does not, or any other error in pyrite's backward;
- `skip`: no float input, torch refuses the call or its backward, no output has a gradient in
  torch, torch's gradient is not finite (a pole or kink the nudge did not leave), or pyrite's
  forward disagrees with torch's (the forward sweep's business).

Pure test machinery: imports torch, numpy and pyrite only.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import torch

import pyrite as pr
from tests.sweep_harness import FLOATS, U32, Arg, Dt, Op

FACTOR = 8  # the backward's extra roundings over the forward's (a chain rule of a few steps)
_NOT_IMPL = re.compile(r"gradient of (\S+) is not implemented")


@dataclasses.dataclass
class GOutcome:
    op: str
    case: int
    status: str  # "ok", "documented", "skip", "FAIL"
    detail: str = ""


# ---- arguments ------------------------------------------------------------------------------
def _nudge(rng, a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64).copy()
    if a.size == 0:
        return a.astype(np.float32).astype(np.float64)
    bad = ~np.isfinite(a)
    if bad.any():
        fin = a[~bad]
        hi = float(np.abs(fin).max()) if fin.size else 1.0
        a[bad] = rng.uniform(-hi, hi, size=int(bad.sum())) if hi > 0 else 0.5
    u = rng.uniform(-1.0, 1.0, size=a.shape)
    # (zeros move to distinct values of 0.5e-3..1e-3 magnitude: one shared ±1e-3 would leave
    # ties among them, and sort/max route a tie's gradient either way)
    a = a * (1.0 + 1e-3 * u) + 1e-3 * np.sign(u) * (0.5 + 0.5 * np.abs(u)) * (np.abs(a) < 1e-3)
    return a.astype(np.float32).astype(np.float64)


def _grad_arg(rng, x: Arg, flat: bool) -> Arg:
    lo = x.layout
    if lo[0] == "e" and not flat:
        dims = lo[1]
        base = x.a[tuple(slice(0, 1) if d in dims else slice(None) for d in range(x.a.ndim))]
        a = np.broadcast_to(_nudge(rng, base), x.a.shape).copy()
        return Arg(a, "float32", lo)
    if lo[0] == "e":
        lo = ("c",)
    return Arg(_nudge(rng, x.a), "float32", lo)


def grad_args(rng, x, flat=False):
    """The argument tree with float Args float32, nudged (`flat`: expanded layouts contiguous,
    so no ties along them) and float dtype arguments float32."""
    if isinstance(x, Arg):
        return _grad_arg(rng, x, flat) if x.dtype in FLOATS else x
    if isinstance(x, Dt):
        return Dt("float32") if x.name in FLOATS else x
    if isinstance(x, list):
        return [grad_args(rng, v, flat) for v in x]
    if isinstance(x, tuple):
        return tuple(grad_args(rng, v, flat) for v in x)
    if isinstance(x, dict):
        return {k: grad_args(rng, v, flat) for k, v in x.items()}
    return x


def _float_args(x, out):
    if isinstance(x, Arg):
        if x.dtype in FLOATS and x.a.size:
            out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _float_args(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _float_args(v, out)
    return out


def _leaf_and_view(L, arg: Arg, dtype, clone: bool):
    """A leaf requiring grad holding `arg`'s base values, and the view of it the op gets."""
    a, kind = arg.a, arg.layout[0]
    if kind == "p":
        perm = arg.layout[1]
        base = a.transpose(tuple(int(i) for i in np.argsort(perm)))
    elif kind == "s":
        dim, step, start = arg.layout[1:]
        wide_shape = list(a.shape)
        wide_shape[dim] = start + a.shape[dim] * step + 1
        base = np.zeros(wide_shape)
        idx = (slice(None),) * dim + (slice(start, start + a.shape[dim] * step, step),)
        base[idx] = a
    elif kind == "e":
        dims = arg.layout[1]
        base = a[tuple(slice(0, 1) if d in dims else slice(None) for d in range(a.ndim))]
    else:
        base = a
    base = np.array(base, dtype=np.float32, order="C", copy=True)
    if L is torch:
        leaf = torch.tensor(base, dtype=dtype, requires_grad=True)
    else:
        leaf = pr.tensor(base).requires_grad_()
    t = leaf.clone() if clone else leaf
    if kind == "p":
        t = t.permute(*arg.layout[1])
    elif kind == "s":
        t = t[idx]
    elif kind == "e":
        t = t.expand(*a.shape)
    return leaf, t


def _build(L, x, leaves, clone, dtype):
    if isinstance(x, Arg):
        if x.dtype == "float32" and x.a.size:
            leaf, t = _leaf_and_view(L, x, dtype, clone)
            leaves.append(leaf)
            return t
        from tests.sweep_harness import make_tensor

        if x.dtype == "float32_const":  # (an integer operand as float, not differentiated)
            return make_tensor(L, Arg(x.a, "float32", x.layout))
        return make_tensor(L, x)
    if isinstance(x, Dt):
        return getattr(L, x.name) if L is pr or dtype is torch.float32 else torch.float64
    if isinstance(x, list):
        return [_build(L, v, leaves, clone, dtype) for v in x]
    if isinstance(x, tuple):
        return tuple(_build(L, v, leaves, clone, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _build(L, v, leaves, clone, dtype) for k, v in x.items()}
    return x


def _flat_out(x, out):
    if isinstance(x, (torch.Tensor, pr.Tensor)):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat_out(v, out)
    else:
        out.append(None)
    return out


# ---- one side -------------------------------------------------------------------------------
class _Refused(Exception):
    pass


def _torch_side(op, args, kwargs, ws, clone, dtype=torch.float32):
    """torch's output positions with a graph, cotangents and leaf gradients (or _Refused)."""
    leaves = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = op.fn(
                torch,
                *_build(torch, args, leaves, clone, dtype),
                **_build(torch, kwargs, leaves, clone, dtype),
            )
    except Exception as e:  # noqa: BLE001 - torch's verdict is the oracle
        raise _Refused(f"torch refuses: {type(e).__name__}: {str(e)[:80]}") from e
    outs = _flat_out(out, [])
    pos = [
        i
        for i, o in enumerate(outs)
        if isinstance(o, torch.Tensor) and o.is_floating_point() and o.requires_grad and o.numel()
    ]
    if not pos:
        raise _Refused("no output has a gradient in torch")
    loss = sum(
        (outs[i] * torch.from_numpy(ws(k, tuple(outs[i].shape))).to(outs[i].dtype)).sum()
        for k, i in enumerate(pos)
    )
    try:
        loss.backward()
    except Exception as e:  # noqa: BLE001
        raise _Refused(f"torch's backward refuses: {type(e).__name__}: {str(e)[:80]}") from e
    grads = [
        None if lf.grad is None else lf.grad.detach().to(torch.float64).numpy() for lf in leaves
    ]
    return pos, grads


def _pyrite_side(op, args, kwargs, pos, ws, clone):
    leaves = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = op.fn(
            pr, *_build(pr, args, leaves, clone, None), **_build(pr, kwargs, leaves, clone, None)
        )
    outs = _flat_out(out, [])
    loss = None
    for k, i in enumerate(pos):
        o = outs[i] if i < len(outs) else None
        if not isinstance(o, pr.Tensor):
            return f"output {i}: torch records a graph, pyrite gives {type(o).__name__}", None
        if not o.requires_grad:
            return (
                f"missing gradient: output {i} ({o.dtype.name}{list(o.shape)}) has no grad_fn "
                "where torch's has one",
                None,
            )
        term = (o * pr.tensor(ws(k, tuple(o.shape)).astype(np.float32))).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    return None, [None if lf.grad is None else lf.grad.numpy().astype(np.float64) for lf in leaves]


# ---- comparison -----------------------------------------------------------------------------
def _close(g, w, rtol, atol):
    with np.errstate(invalid="ignore", over="ignore"):
        return (np.abs(g - w) <= atol + rtol * np.abs(w)) | (g == w)


def _compare(op, args, kwargs, t_grads, p_grads, ref64):
    tol = op.tol
    n = op.n_terms(args, kwargs) if op.n_terms else 1
    n = max(1, int(n))
    rtol = FACTOR * max(tol.ulps, 4) * 2 * U32
    for k, (w, g) in enumerate(zip(t_grads, p_grads)):
        if w is None:
            continue
        if g is None:
            if np.any(w != 0):
                return f"missing gradient: input {k} has .grad None, torch's is nonzero"
            continue
        if g.shape != w.shape:
            return f"input {k}: grad shape {g.shape}, torch {w.shape}"
        gmax = float(np.abs(w).max(initial=0.0))
        atol = FACTOR * tol.atol * max(1.0, gmax) + 64 * (n + 2) * U32 * gmax + 2.0**-100
        ok = _close(g, w, rtol, atol)
        if ref64 is not None and ref64[k] is not None and not ok.all():
            ok |= _close(g, ref64[k], rtol, atol)
        if not ok.all():
            i = tuple(np.argwhere(~ok)[0])
            zero = " (pyrite's is all zero)" if not np.any(g) else ""
            return (
                f"input {k} grad: {int((~ok).sum())}/{ok.size} differ{zero}; first at {i}: "
                f"pyrite {g[i]!r}, torch {w[i]!r}"
            )
    return None


def _args64(x):
    if isinstance(x, Arg):
        return x
    if isinstance(x, Dt):
        return Dt("float64") if x.name == "float32" else x
    if isinstance(x, (list, tuple)):
        return type(x)(_args64(v) for v in x)
    if isinstance(x, dict):
        return {k: _args64(v) for k, v in x.items()}
    return x


def _pyrite_forward_raises(op, args, kwargs) -> bool:
    """Whether pyrite's forward raises without any input requiring grad (an error the forward
    sweep judges: an out-of-range index torch CPU reads anyway)."""
    from tests.sweep_harness import build

    plain = _plain_args((args, kwargs))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op.fn(pr, *build(pr, plain[0]), **build(pr, plain[1]))
    except Exception:  # noqa: BLE001
        return True
    return False


def _plain_args(x):
    if isinstance(x, Arg) and x.dtype == "float32_const":
        return Arg(x.a, "float32", x.layout)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain_args(v) for v in x)
    if isinstance(x, dict):
        return {k: _plain_args(v) for k, v in x.items()}
    return x


def run_grad_case(op: Op, rng, i: int) -> GOutcome:
    """One case; a crash of the harness itself (pyrite's result unreadable) is a FAIL."""
    try:
        args0, kwargs0 = op.gen(rng, i)
    except Exception as e:  # noqa: BLE001
        return GOutcome(op.name, i, "FAIL", f"generator: {type(e).__name__}: {str(e)[:200]}")
    jit = np.random.default_rng([i, 12345])
    try:
        out = _run_grad_case(op, args0, kwargs0, jit, i, False)
        expanded = any(
            a.layout[0] == "e" for a in _float_args(grad_args(jit, (args0, kwargs0)), [])
        )
        if out.status == "FAIL" and expanded and not out.detail.startswith("missing"):
            # an expanded argument is constant along its expanded dims: ties for max/sort/
            # median, whose gradient goes to one of them; the case again with those dims
            # materialised (distinct values) decides
            again = _run_grad_case(op, args0, kwargs0, np.random.default_rng([i, 99]), i, True)
            if again.status != "FAIL":
                return again
        return out
    except Exception as e:  # noqa: BLE001
        return GOutcome(op.name, i, "FAIL", f"harness: {type(e).__name__}: {str(e)[:200]}")


def _pool_window_in_padding(op, args, kwargs) -> bool:
    """A max-pool case with an output window wholly in the padding (depth 1, padding 1,
    dilation 2): torch CPU's forward returns indices past the input and its backward then
    writes out of bounds (a double free, a crash of the process), so torch is not run."""
    if not op.name.startswith("F.max_pool") or not args or not isinstance(args[0], Arg):
        return False
    shp = args[0].a.shape
    nd = int(op.name[len("F.max_pool")])
    sp = shp[-nd:]

    def per(v, default):
        v = default if v is None else v
        return (v,) * nd if isinstance(v, int) else tuple(v)

    k = per(kwargs.get("kernel_size"), 1)
    st = per(kwargs.get("stride"), None) if kwargs.get("stride") is not None else k
    pad, dil = per(kwargs.get("padding"), 0), per(kwargs.get("dilation"), 1)
    for n, kk, s_, p_, d_ in zip(sp, k, st, pad, dil):
        span = d_ * (kk - 1) + 1
        num = n + 2 * p_ - span
        if num < 0:
            continue
        n_out = (-(-num // s_) if kwargs.get("ceil_mode") else num // s_) + 1
        if kwargs.get("ceil_mode") and (n_out - 1) * s_ >= n + p_:
            n_out -= 1
        for o in range(n_out):
            if all(not 0 <= o * s_ - p_ + j * d_ < n for j in range(kk)):
                return True
    return False


def _run_grad_case(op, args0, kwargs0, jit, i, flat):
    args, kwargs = grad_args(jit, args0, flat), grad_args(jit, kwargs0, flat)
    if not _float_args((args, kwargs), []):
        return GOutcome(op.name, i, "skip", "no float input")
    if _pool_window_in_padding(op, args, kwargs):
        return GOutcome(op.name, i, "skip", "torch's pool indices point outside the input")
    desc = f"args={args!r} kwargs={kwargs!r}"

    def ws(k, shp):
        return np.random.default_rng([i, k, 7]).standard_normal(shp)

    # torch: the leaf in the op, else (an in-place op on a leaf) a clone of it
    clone = False
    try:
        pos, t_grads = _torch_side(op, args, kwargs, ws, clone)
    except _Refused as r:
        if "leaf" not in str(r):
            return GOutcome(op.name, i, "skip", str(r))
        clone = True
        try:
            pos, t_grads = _torch_side(op, args, kwargs, ws, clone)
        except _Refused as r2:
            return GOutcome(op.name, i, "skip", str(r2))
    if any(g is not None and not np.isfinite(g).all() for g in t_grads):
        return GOutcome(op.name, i, "skip", "torch's gradient is not finite")
    try:
        why, p_grads = _pyrite_side(op, args, kwargs, pos, ws, clone)
    except NotImplementedError as e:
        m = _NOT_IMPL.search(str(e))
        return GOutcome(op.name, i, "documented", m.group(1) if m else str(e)[:120])
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ == "IndexOutOfBounds" and op.name.startswith("F.max_pool"):
            # a window wholly in the padding (depth 1, padding 1, dilation 2): torch's forward
            # returns indices past the input and its backward corrupts memory; pyrite's
            # backward refuses them
            return GOutcome(op.name, i, "skip", "torch's pool indices point outside the input")
        if _pyrite_forward_raises(op, args, kwargs):
            return GOutcome(
                op.name, i, "skip", "pyrite's forward raises (the forward sweep's case)"
            )
        return GOutcome(
            op.name, i, "FAIL", f"pyrite raises {type(e).__name__}: {str(e)[:200]}\n  {desc}"
        )
    if why:
        return GOutcome(op.name, i, "FAIL", f"{why}\n  {desc}")
    bad = _compare(op, args, kwargs, t_grads, p_grads, None)
    if bad and not bad.startswith("missing"):
        try:
            _, g64 = _torch_side(op, _args64(args), _args64(kwargs), ws, clone, torch.float64)
        except _Refused:
            g64 = None
        if g64 is not None:
            bad = _compare(op, args, kwargs, t_grads, p_grads, g64)
    if bad and op.name in INT_AS_FLOAT:
        # torch's rule squares an integer operand in its own dtype (atan2(uint8 200, x): 200²
        # wraps); pyrite's is the derivative: torch given that operand as float decides
        a_f, k_f = _ints_as_float((args, kwargs))
        try:
            _, g_f = _torch_side(op, a_f, k_f, ws, clone)
        except _Refused:
            g_f = None
        if g_f is not None and len(g_f) == len(t_grads):
            bad = _compare(op, args, kwargs, g_f, p_grads, None)
    if bad and kwargs.get("dim", None) == () and re.search(r"\b(std|var)", op.name):
        # torch's var/std backward takes dim=() as n = 1 (its forward reduces everything):
        # torch given dim=None is the reference
        try:
            _, g_n = _torch_side(op, args, {**kwargs, "dim": None}, ws, clone)
        except _Refused:
            g_n = None
        if g_n is not None and any(g is not None and not np.isfinite(g).all() for g in g_n):
            # (no degrees of freedom left: that reference is NaN/inf, as above)
            return GOutcome(op.name, i, "skip", "torch's gradient is not finite")
        if g_n is not None:
            bad = _compare(op, args, kwargs, g_n, p_grads, None)
    if (
        bad
        and op.name == "scatter(reduce)"
        and kwargs.get("reduce") in ("amax", "amin")
        and args[2].a.size % 2 == 0  # (the op's include_self=False)
    ):
        # src is taken from x, so a scattered value ties with the self value it replaces; torch
        # counts that excluded self value among the ties it divides a gradient by, then zeroes
        # its share: the gradients no longer add up to the output's (README "Differences")
        return GOutcome(op.name, i, "skip", "torch's amin/amax scatter_reduce loses a tie's share")
    if bad:
        return GOutcome(op.name, i, "FAIL", f"{bad}\n  {desc}")
    return GOutcome(op.name, i, "ok")


# ops whose torch backward does integer arithmetic on an integer operand (a documented torch
# defect, not pyrite's): their reference is torch with those operands as float32 constants
# (ldexp: torch's 2 ** e of a negative integer e is 0, so its gradient is; pyrite's is 2^e,
# README "Differences")
INT_AS_FLOAT = {"atan2", "ldexp", "addcdiv"}


def _ints_as_float(x):
    if isinstance(x, Arg) and x.dtype not in FLOATS and x.dtype != "bool":
        return Arg(x.a.astype(np.float64), "float32_const", x.layout)
    if isinstance(x, (list, tuple)):
        return type(x)(_ints_as_float(v) for v in x)
    if isinstance(x, dict):
        return {k: _ints_as_float(v) for k, v in x.items()}
    return x
