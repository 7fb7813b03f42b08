"""More recorded ops as ONNX nodes: the rarer activations, reductions with indices, statistics,
norms, cumulative sums, triangles, repeats and flips, and a few fused arithmetic ops."""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._ops import _BIG, _dim, _val, op, unsupported


def _x(g, ev):
    return ev.args[0], g.name(ev.args[0])


@op("_hardsigmoid", "hardsigmoid")
def _hardsigmoid(g, ev):
    _, x = _x(g, ev)
    g.bind(ev.out, g.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5))


@op("_hardswish", "hardswish")
def _hardswish(g, ev):
    _, x = _x(g, ev)
    if g.opset >= 14:
        g.bind(ev.out, g.node("HardSwish", [x]))
        return
    g.bind(ev.out, g.node("Mul", [x, g.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)]))


@op("mish")
def _mish(g, ev):
    _, x = _x(g, ev)
    g.bind(ev.out, g.node("Mul", [x, g.node("Tanh", [g.node("Softplus", [x])])]))


@op("logsigmoid")
def _logsigmoid(g, ev):
    _, x = _x(g, ev)
    g.bind(ev.out, g.node("Neg", [g.node("Softplus", [g.node("Neg", [x])])]))


@op("softsign")
def _softsign(g, ev):
    g.bind(ev.out, g.node("Softsign", [g.name(ev.args[0])]))


@op("_selu", "selu")
def _selu(g, ev):  # (ONNX's default alpha and gamma are torch's constants)
    g.bind(ev.out, g.node("Selu", [g.name(ev.args[0])]))


@op("_celu", "celu")
def _celu(g, ev):
    a = ev.bind(["input", "alpha"], {"alpha": 1.0})
    g.bind(ev.out, g.node("Celu", [g.name(a["input"])], alpha=float(a["alpha"])))


@op("prelu")
def _prelu(g, ev):
    x, w = ev.args[0], ev.args[1]
    slope = g.name(w)
    if w.numel() > 1 and x.dim() > 2:  # (C,) -> (C, 1, ..., 1): ONNX broadcasts from the end
        slope = g.node("Reshape", [slope, g.ints([w.numel()] + [1] * (x.dim() - 2))])
    g.bind(ev.out, g.node("PRelu", [g.name(x), slope]))


@op("glu")
def _glu(g, ev):
    a = ev.bind(["input", "dim"], {"dim": -1})
    x = a["input"]
    d = _dim(int(a["dim"]), x.dim())
    h = x.shape[d] // 2
    p, q = g.node("Split", [g.name(x), g.ints([h, h])], n_out=2, axis=d)
    g.bind(ev.out, g.node("Mul", [p, g.node("Sigmoid", [q])]))


# ---- reductions --------------------------------------------------------------------------------
@op("max", "min")
def _max(g, ev):
    kind = "Max" if ev.name == "max" else "Min"
    x = ev.args[0]
    other = ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("other")
    if isinstance(other, Tensor):  # max(x, y): elementwise
        g.bind(ev.out, g.node(kind, [g.name(x), g.name(other)]))
        return
    a = ev.bind(["input", "dim", "keepdim"], {"dim": None, "keepdim": False})
    if a["dim"] is None:
        g.bind(ev.out, g.reduce(f"Reduce{kind}", g.name(x), None, False))
        return
    d, keep = _dim(int(a["dim"]), x.dim()), int(bool(a["keepdim"]))
    values, indices = ev.out
    g.bind(values, g.reduce(f"Reduce{kind}", g.name(x), [d], keep))
    g.bind(indices, g.node(f"Arg{kind}", [g.name(x)], axis=d, keepdims=keep))


@op("argmax", "argmin")
def _argmax(g, ev):
    a = ev.bind(["input", "dim", "keepdim"], {"dim": None, "keepdim": False})
    x = g.name(a["input"])
    kind = "ArgMax" if ev.name == "argmax" else "ArgMin"
    if a["dim"] is None:  # (over the flattened tensor)
        flat = g.node("Reshape", [x, g.ints([-1])])
        g.bind(ev.out, g.node(kind, [flat], axis=0, keepdims=0))
        return
    d = _dim(int(a["dim"]), a["input"].dim())
    g.bind(ev.out, g.node(kind, [x], axis=d, keepdims=int(bool(a["keepdim"]))))


def _axes(x, dim):
    if dim is None or dim == () or dim == []:
        return list(range(x.dim()))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return [_dim(int(d), x.dim()) for d in dims]


@op("logsumexp", "prod")
def _reduce_more(g, ev):
    a = ev.bind(["input", "dim", "keepdim"], {"dim": None, "keepdim": False})
    if a.get("dtype") is not None:
        raise unsupported(f"{ev.name}(dtype=...)", g.opset)
    x = a["input"]
    kind = "ReduceLogSumExp" if ev.name == "logsumexp" else "ReduceProd"
    axes = None if a["dim"] is None else _axes(x, a["dim"])
    g.bind(ev.out, g.reduce(kind, g.name(x), axes, a["keepdim"]))


@op("var", "std")
def _var(g, ev):
    a = ev.bind(["input", "dim", "unbiased", "keepdim"], {"dim": None, "keepdim": False})
    x = a["input"]
    correction = a.get("correction")
    if correction is None:
        unbiased = a.get("unbiased")
        if isinstance(unbiased, (list, tuple)) or not isinstance(unbiased, (bool, type(None))):
            raise unsupported(ev.name, g.opset, "these arguments")
        correction = 0 if unbiased is False else 1
    axes = _axes(x, a["dim"])
    n = int(np.prod([x.shape[d] for d in axes]))
    xn = g.name(x)
    d = g.node("Sub", [xn, g.reduce("ReduceMean", xn, axes, True)])
    s = g.reduce("ReduceSum", g.node("Mul", [d, d]), axes, bool(a["keepdim"]))
    v = g.node("Div", [s, g.scalar(float(max(n - correction, 0)), x)])
    g.bind(ev.out, g.node("Sqrt", [v]) if ev.name == "std" else v)


@op("norm")
def _norm(g, ev):
    a = ev.bind(["input", "p", "dim", "keepdim"], {"p": "fro", "dim": None, "keepdim": False})
    x, p = a["input"], a["p"]
    if p in ("fro", 2, 2.0, None):
        kind = "ReduceL2"
    elif p in (1, 1.0):
        kind = "ReduceL1"
    else:
        raise unsupported(f"norm(p={p!r})", g.opset)
    g.bind(ev.out, g.reduce(kind, g.name(x), _axes(x, a["dim"]), bool(a["keepdim"])))


@op("cumsum")
def _cumsum(g, ev):
    a = ev.bind(["input", "dim"])
    if a.get("dtype") is not None:
        raise unsupported("cumsum(dtype=...)", g.opset)
    x = a["input"]
    axis = g.const(np.asarray(_dim(int(a["dim"]), x.dim()), dtype=np.int64), "axis")
    g.bind(ev.out, g.node("CumSum", [g.name(x), axis]))


# ---- shapes ------------------------------------------------------------------------------------
@op("tril", "triu")
def _trilu(g, ev):
    a = ev.bind(["input", "diagonal"], {"diagonal": 0})
    x, k = a["input"], int(a["diagonal"])
    upper = int(ev.name == "triu")
    if g.opset >= 14:
        kk = g.const(np.asarray(k, dtype=np.int64), "k")
        g.bind(ev.out, g.node("Trilu", [g.name(x), kk], upper=upper))
        return
    rows, cols = x.shape[-2:]  # (Trilu is opset 14: a mask of the traced size before it)
    keep = (np.triu if upper else np.tril)(np.ones((rows, cols), dtype=bool), k)
    zero = g.scalar(0, x)
    g.bind(ev.out, g.node("Where", [g.const(keep, "mask"), g.name(x), zero]))


@op("repeat", "tile")
def _repeat(g, ev):
    x = ev.args[0]
    reps = ev.args[1:] or (ev.kwargs.get("repeats") or ev.kwargs.get("dims"),)
    reps = [int(r) for r in (reps[0] if isinstance(reps[0], (list, tuple)) else reps)]
    if len(reps) < x.dim():  # (tile: leading ones)
        reps = [1] * (x.dim() - len(reps)) + reps
    y = g.name(x)
    if len(reps) > x.dim():
        y = g.node("Reshape", [y, g.ints([1] * (len(reps) - x.dim()) + list(x.shape))])
    g.bind(ev.out, g.node("Tile", [y, g.ints(reps)]))


@op("flip")
def _flip(g, ev):
    x = ev.args[0]
    dims = ev.args[1:] or (ev.kwargs.get("dims"),)
    dims = dims[0] if isinstance(dims[0], (list, tuple)) else dims
    axes = [_dim(int(d), x.dim()) for d in dims]
    n = len(axes)
    ins = [g.name(x), g.ints([-1] * n), g.ints([-_BIG] * n), g.ints(axes), g.ints([-1] * n)]
    g.bind(ev.out, g.node("Slice", ins))


@op("moveaxis", "movedim")
def _movedim(g, ev):
    a = ev.bind(["input", "source", "destination"])
    x = a["input"]
    r = x.dim()
    src, dst = a["source"], a["destination"]
    src = [_dim(int(s), r) for s in (src if isinstance(src, (list, tuple)) else [src])]
    dst = [_dim(int(d), r) for d in (dst if isinstance(dst, (list, tuple)) else [dst])]
    perm = [None] * r
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(i for i in range(r) if i not in src)
    perm = [p if p is not None else next(rest) for p in perm]
    g.bind(ev.out, g.node("Transpose", [g.name(x)], perm=perm))


@op("index_select")
def _index_select(g, ev):
    a = ev.bind(["input", "dim", "index"])
    x = a["input"]
    d = _dim(int(a["dim"]), x.dim())
    g.bind(ev.out, g.node("Gather", [g.name(x), g.name(a["index"])], axis=d))


# ---- fused arithmetic --------------------------------------------------------------------------
@op("_addcmul", "addcmul", "_addcdiv", "addcdiv")
def _addcmul(g, ev):
    a = ev.bind(["input", "tensor1", "tensor2", "value"], {"value": 1})
    x = a["input"]
    kind = "Mul" if "mul" in ev.name else "Div"
    t = g.node(kind, [_val(g, a["tensor1"], x), _val(g, a["tensor2"], x)])
    if a["value"] != 1:
        t = g.node("Mul", [t, g.scalar(a["value"], x)])
    g.bind(ev.out, g.node("Add", [g.name(x), t]))


@op("baddbmm", "addbmm")
def _baddbmm(g, ev):
    a = ev.bind(["input", "batch1", "batch2"], {"beta": 1, "alpha": 1})
    x = a["input"]
    y = g.node("MatMul", [g.name(a["batch1"]), g.name(a["batch2"])])
    if ev.name == "addbmm":
        y = g.reduce("ReduceSum", y, [0], False)
    if a["alpha"] != 1:
        y = g.node("Mul", [y, g.scalar(a["alpha"], x)])
    if a["beta"] != 0:
        b = g.name(x)
        if a["beta"] != 1:
            b = g.node("Mul", [b, g.scalar(a["beta"], x)])
        y = g.node("Add", [y, b])
    g.bind(ev.out, y)


@op("ger", "outer")
def _outer(g, ev):
    a, b = g.name(ev.args[0]), g.name(ev.args[1])
    col = g.node("Unsqueeze", [a, g.ints([1])])
    row = g.node("Unsqueeze", [b, g.ints([0])])
    g.bind(ev.out, g.node("Mul", [col, row]))


@op("floor_divide")
def _floor_divide(g, ev):
    a, b = ev.args[0], ev.args[1]
    like = a if isinstance(a, Tensor) else b
    xa, xb = _val(g, a, like), _val(g, b, like)
    if like.dtype.kind != "f":  # (floored, not truncated as Div's: in float64, exact for int32)
        xa, xb = g.node("Cast", [xa], to=11), g.node("Cast", [xb], to=11)
        q = g.node("Floor", [g.node("Div", [xa, xb])])
        g.bind(ev.out, g.node("Cast", [q], to=7))
        return
    g.bind(ev.out, g.node("Floor", [g.node("Div", [xa, xb])]))


@op("_threshold", "threshold")
def _threshold(g, ev):
    # y = x where x > threshold, else value
    a = ev.bind(["input", "threshold", "value"])
    x = a["input"]
    xn = g.name(x)
    keep = g.node("Greater", [xn, g.scalar(a["threshold"], x)])
    g.bind(ev.out, g.node("Where", [keep, xn, g.scalar(a["value"], x)]))


@op("softshrink", "hardshrink")
def _shrink(g, ev):
    a = ev.bind(["input", "lambd"], {"lambd": 0.5})
    lam = float(a["lambd"])
    bias = lam if ev.name == "softshrink" else 0.0
    g.bind(ev.out, g.node("Shrink", [g.name(a["input"])], lambd=lam, bias=bias))


@op("tanhshrink")
def _tanhshrink(g, ev):
    _, x = _x(g, ev)
    g.bind(ev.out, g.node("Sub", [x, g.node("Tanh", [x])]))


@op("rms_norm")
def _rms_norm(g, ev):
    # x / sqrt(mean(x^2) + eps) * weight, over the normalized dims
    a = ev.bind(["input", "normalized_shape", "weight", "eps"], {"weight": None, "eps": None})
    x = a["input"]
    ns = a["normalized_shape"]
    n = 1 if isinstance(ns, int) else len(ns)
    eps = a["eps"]
    if eps is None:  # (torch: the dtype's machine epsilon)
        eps = float(np.finfo(np.float16 if x.dtype.name == "float16" else np.float32).eps)
        if x.dtype.name == "bfloat16":
            eps = 2.0**-7
    xn = g.name(x)
    axes = list(range(x.dim() - n, x.dim()))
    ms = g.reduce("ReduceMean", g.node("Mul", [xn, xn]), axes, True)
    y = g.node("Div", [xn, g.node("Sqrt", [g.node("Add", [ms, g.scalar(float(eps), x)])])])
    if a["weight"] is not None:
        y = g.node("Mul", [y, g.name(a["weight"])])
    g.bind(ev.out, y)


@op("unflatten")
def _unflatten(g, ev):
    a = ev.bind(["input", "dim", "sizes"])
    x = a["input"]
    d = _dim(int(a["dim"]), x.dim())
    sizes = [int(s) for s in a["sizes"]]
    # (0: the input's dim at that position, as it is: the dims before `dim` only)
    target = [0] * d + sizes + [int(n) for n in x.shape[d + 1 :]]
    if -1 not in sizes and ev.alt is not None and ev.alt.args[0].shape[d] != x.shape[d]:
        raise unsupported("unflatten", g.opset, "sizes that follow a dynamic axis")
    g.bind(ev.out, g.node("Reshape", [g.name(x), g.ints(target)]))


# ---- integer and bool arithmetic (integer inputs and masks are traced too) ---------------------
@op("remainder", "fmod")
def _remainder(g, ev):
    a, b = ev.args[0], ev.args[1]
    like = a if isinstance(a, Tensor) else b
    x, y = _val(g, a, like), _val(g, b, like)
    if like.dtype.kind != "f":  # (Mod: the divisor's sign for remainder, the dividend's for fmod)
        g.bind(ev.out, g.node("Mod", [x, y], fmod=int(ev.name == "fmod")))
        return
    if ev.name == "fmod":
        g.bind(ev.out, g.node("Mod", [x, y], fmod=1))
        return
    q = g.node("Floor", [g.node("Div", [x, y])])  # (x - floor(x / y) * y, torch's remainder)
    g.bind(ev.out, g.node("Sub", [x, g.node("Mul", [q, y])]))


_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
            "bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor",
            "__and__": "And", "__or__": "Or", "__xor__": "Xor"}  # fmt: skip


@op(*_LOGICAL)
def _logical(g, ev):
    a, b = ev.args[0], ev.args[1]
    like = a if isinstance(a, Tensor) else b
    if ev.name.startswith("bitwise") or ev.name.startswith("__"):
        if like.dtype.kind != "b":
            raise unsupported(ev.name, g.opset, "integer bitwise ops (bools only)")
    xa, xb = _val(g, a, like), _val(g, b, like)
    if ev.name.startswith("logical"):  # (any dtype: nonzero is true)
        xa, xb = (n if t.dtype.kind == "b" else g.node("Cast", [n], to=9)
                  for n, t in ((xa, like), (xb, like)))  # fmt: skip
    g.bind(ev.out, g.node(_LOGICAL[ev.name], [xa, xb]))


@op("logical_not", "bitwise_not", "__invert__")
def _not(g, ev):
    x = ev.args[0]
    xn = g.name(x)
    if x.dtype.kind != "b":
        if ev.name != "logical_not":
            raise unsupported(ev.name, g.opset, "integer bitwise ops (bools only)")
        xn = g.node("Cast", [xn], to=9)
    g.bind(ev.out, g.node("Not", [xn]))


@op("ne")
def _ne(g, ev):
    a, b = ev.args[0], ev.args[1]
    like = a if isinstance(a, Tensor) else b
    g.bind(ev.out, g.node("Not", [g.node("Equal", [_val(g, a, like), _val(g, b, like)])]))
