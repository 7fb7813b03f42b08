"""ONNX import: matrix products (MatMul, Gemm, Einsum), Softmax/LogSoftmax/Hardmax and the
Reduce*/ArgMax/ArgMin ops. See _import.py for the rules."""

from __future__ import annotations

import numpy as np

import pyrite as pr

from ._import_ops import attr_or_input, dev, host, is_host, norm_axis, opt, register, shape_of

# ---------------------------------------------------------------------------------------------
# matrix products and softmax


@register("MatMul")
def _matmul(node):
    def run(ins):
        a, b = ins
        if is_host(a) and is_host(b):
            return [np.matmul(host(a), host(b))]
        return [pr.matmul(dev(a), dev(b))]

    return run


@register("Gemm")
def _gemm(node):
    alpha, beta = float(node.get("alpha", 1.0)), float(node.get("beta", 1.0))
    ta, tb = int(node.get("transA", 0)), int(node.get("transB", 0))

    def run(ins):
        a, b, c = dev(ins[0]), dev(ins[1]), opt(ins, 2)
        y = pr.matmul(a.t() if ta else a, b.t() if tb else b)
        if alpha != 1.0:
            y = y * alpha
        if c is not None and beta != 0.0:
            c = dev(c)
            y = y + (c if beta == 1.0 else c * beta)
        return [y]

    return run


@register("Einsum")
def _einsum(node):
    eq = node.get("equation")
    return lambda ins: [pr.einsum(eq.replace(" ", ""), *(dev(v) for v in ins))]


@register("Softmax", "LogSoftmax", "Hardmax")
def _softmax(node):
    old = node.opset < 13
    axis = int(node.get("axis", 1 if old else -1))

    def apply(x, dim):
        if node.op == "Softmax":
            return x.softmax(dim)
        if node.op == "LogSoftmax":
            return x.log_softmax(dim)
        n = x.shape[dim]
        return (x.argmax(dim, keepdim=True) == pr.arange(n).reshape(n, *([1] * (x.dim() - dim - 1)))).to(x.dtype)  # fmt: skip

    def run(ins):
        x = dev(ins[0])
        ax = norm_axis(axis, x.dim(), node)
        if not old:
            return [apply(x, ax)]
        shape = tuple(x.shape)
        outer = int(np.prod(shape[:ax], dtype=np.int64))
        return [apply(x.reshape(outer, -1), 1).reshape(shape)]

    return run


# ---------------------------------------------------------------------------------------------
# reductions


def _np_reduce(op, x, axes, keep):
    f = {
        "ReduceSum": lambda: np.sum(x, axis=axes, keepdims=keep),
        "ReduceMean": lambda: np.mean(x, axis=axes, keepdims=keep),
        "ReduceMax": lambda: np.max(x, axis=axes, keepdims=keep),
        "ReduceMin": lambda: np.min(x, axis=axes, keepdims=keep),
        "ReduceProd": lambda: np.prod(x, axis=axes, keepdims=keep),
        "ReduceL1": lambda: np.sum(np.abs(x), axis=axes, keepdims=keep),
        "ReduceL2": lambda: np.sqrt(np.sum(x * x, axis=axes, keepdims=keep)),
        "ReduceSumSquare": lambda: np.sum(x * x, axis=axes, keepdims=keep),
        "ReduceLogSum": lambda: np.log(np.sum(x, axis=axes, keepdims=keep)),
        "ReduceLogSumExp": lambda: np.log(np.sum(np.exp(x), axis=axes, keepdims=keep)),
    }[op]
    return np.asarray(f()).astype(x.dtype)


def _pr_reduce(op, x, axes, keep):
    if op == "ReduceProd":
        for a in sorted(axes, reverse=True):
            x = x.prod(dim=a, keepdim=True)
        return x if keep else x.reshape([s for i, s in enumerate(x.shape) if i not in axes])
    if op in ("ReduceMax", "ReduceMin"):
        return (x.amax if op == "ReduceMax" else x.amin)(dim=axes, keepdim=keep)
    if op == "ReduceLogSumExp":
        return pr.logsumexp(x, dim=axes, keepdim=keep)
    pre = {"ReduceL1": lambda v: v.abs(), "ReduceL2": lambda v: v * v,
           "ReduceSumSquare": lambda v: v * v}.get(op, lambda v: v)  # fmt: skip
    y = (x.mean if op == "ReduceMean" else pre(x).sum)(dim=axes, keepdim=keep)
    if op == "ReduceL2":
        y = y.sqrt()
    elif op == "ReduceLogSum":
        y = y.log()
    return y


@register("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
          "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")  # fmt: skip
def _reduce(node):
    keep = bool(node.get("keepdims", 1))
    noop = bool(node.get("noop_with_empty_axes", 0))

    def run(ins):
        x = ins[0]
        rank = len(shape_of(x))
        axes = attr_or_input(node, ins, "axes", 1) or []
        if not axes and not noop:
            axes = list(range(rank))
        axes = sorted({norm_axis(a, rank, node) for a in axes})
        if not axes:
            # (nothing to reduce, a 0-d input or noop_with_empty_axes, but L1's abs, SumSquare's
            # square, LogSum's log... still apply: the spec as onnx#7394 clarified it)
            if is_host(x):
                return [_np_reduce(node.op, host(x)[..., None], (rank,), False)]
            return [_pr_reduce(node.op, dev(x).unsqueeze(-1), (rank,), False)]
        if is_host(x):
            return [_np_reduce(node.op, host(x), tuple(axes), keep)]
        return [_pr_reduce(node.op, dev(x), tuple(axes), keep)]

    return run


@register("ArgMax", "ArgMin")
def _argmax(node):
    axis, keep = int(node.get("axis", 0)), bool(node.get("keepdims", 1))
    last = bool(node.get("select_last_index", 0))
    big = node.op == "ArgMax"

    def run(ins):
        x = ins[0]
        ax = norm_axis(axis, len(shape_of(x)), node)
        if is_host(x):
            h = host(x)
            f = np.argmax if big else np.argmin
            i = h.shape[ax] - 1 - f(np.flip(h, ax), axis=ax) if last else f(h, axis=ax)
            return [np.expand_dims(i, ax).astype(np.int64) if keep else i.astype(np.int64)]
        t = dev(x)
        if last:
            t = t.flip(ax)
        i = t.argmax(dim=ax, keepdim=keep) if big else t.argmin(dim=ax, keepdim=keep)
        return [(t.shape[ax] - 1) - i if last else i]

    return run
