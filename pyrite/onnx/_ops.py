"""Each recorded op (autograd's public name for it) as ONNX nodes.

A handler takes the graph and the event (`ev.bind(...)` names its arguments as PyTorch's
signature does) and binds the event's outputs to the ONNX names it made. Ops with no handler
here are not exportable: export raises naming them.
"""

from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from ._graph import host_dtype, onnx_dtype
from .errors import UnsupportedOperatorError

HANDLERS: dict = {}
_BIG = 2**62  # a Slice end meaning "to the end"


def unsupported(name, opset, why=""):
    return UnsupportedOperatorError(
        f"pyrite: Exporting the operator '{name}' to ONNX opset version {opset} is not "
        f"supported{': ' + why if why else ''}. See README.md's ONNX export section for the "
        "ops pyrite exports."
    )


def op(*names):
    def reg(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn

    return reg


def _tup(v, n):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v] if len(v) == n else [int(v[0])] * n
    return [int(v)] * n


def _dim(d, rank):
    return d + rank if d < 0 else d


def _val(g, v, like):
    """An operand: a tensor's name, or a Python number as a constant of `like`'s dtype."""
    return g.name(v) if isinstance(v, Tensor) else g.scalar(v, like)


# ---- elementwise ----------------------------------------------------------------------------
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
           "maximum": "Max", "minimum": "Min"}  # fmt: skip
_CMP = {"eq": "Equal", "lt": "Less", "gt": "Greater", "le": "LessOrEqual", "ge": "GreaterOrEqual"}


@op(*_BINARY, *(k + "_" for k in ("add", "sub", "mul", "div")), *_CMP)
def _binary(g, ev):
    name = ev.name.rstrip("_")
    a, b = ev.args[0], ev.args[1]
    like = ev.out
    if name == "div" and ev.kwargs.get("rounding_mode") is not None:
        raise unsupported(f"div(rounding_mode={ev.kwargs['rounding_mode']!r})", g.opset)
    if name in _CMP:  # (compare in the operands' dtype, not the bool result's)
        like = a if isinstance(a, Tensor) else b
    if name == "pow" and not isinstance(b, Tensor):
        like = a
    xa, xb = _val(g, a, like), _val(g, b, like)
    alpha = ev.kwargs.get("alpha", ev.args[2] if len(ev.args) > 2 else 1)
    if name in ("add", "sub") and alpha != 1:
        xb = g.node("Mul", [xb, g.scalar(alpha, like)])
    g.bind(ev.out, g.node(_BINARY.get(name) or _CMP[name], [xa, xb]))


_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
          "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs", "erf": "Erf", "sin": "Sin", "cos": "Cos",
          "floor": "Floor", "ceil": "Ceil", "reciprocal": "Reciprocal", "sign": "Sign",
          "__neg__": "Neg", "__abs__": "Abs"}  # fmt: skip


@op(*_UNARY, *(k + "_" for k in ("relu", "sigmoid", "tanh", "exp")))
def _unary(g, ev):
    g.bind(ev.out, g.node(_UNARY[ev.name.rstrip("_")], [g.name(ev.args[0])]))


@op("square")
def _square(g, ev):
    x = g.name(ev.args[0])
    g.bind(ev.out, g.node("Mul", [x, x]))


@op("rsqrt")
def _rsqrt(g, ev):
    g.bind(ev.out, g.node("Reciprocal", [g.node("Sqrt", [g.name(ev.args[0])])]))


@op("silu", "silu_")
def _silu(g, ev):
    x = g.name(ev.args[0])
    g.bind(ev.out, g.node("Mul", [x, g.node("Sigmoid", [x])]))


@op("gelu")
def _gelu(g, ev):
    # 0.5 x (1 + erf(x / sqrt 2)), as torch's exporter writes it below opset 20
    t = ev.args[0]
    if ev.kwargs.get("approximate", ev.args[1] if len(ev.args) > 1 else "none") == "tanh":
        return _gelu_tanh(g, ev)
    x = g.name(t)
    e = g.node("Erf", [g.node("Div", [x, g.scalar(math.sqrt(2.0), t)])])
    y = g.node("Mul", [x, g.node("Add", [e, g.scalar(1.0, t)])])
    g.bind(ev.out, g.node("Mul", [y, g.scalar(0.5, t)]))


@op("gelu_tanh")
def _gelu_tanh(g, ev):
    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    t = ev.args[0]
    x = g.name(t)
    x3 = g.node("Mul", [g.node("Mul", [x, x]), x])
    inner = g.node("Add", [x, g.node("Mul", [x3, g.scalar(0.044715, t)])])
    th = g.node("Tanh", [g.node("Mul", [inner, g.scalar(math.sqrt(2.0 / math.pi), t)])])
    y = g.node("Mul", [x, g.node("Add", [th, g.scalar(1.0, t)])])
    g.bind(ev.out, g.node("Mul", [y, g.scalar(0.5, t)]))


@op("_leaky_relu", "leaky_relu", "leaky_relu_")
def _leaky(g, ev):
    a = ev.bind(["input", "negative_slope"], {"negative_slope": 0.01})
    g.bind(ev.out, g.node("LeakyRelu", [g.name(a["input"])], alpha=float(a["negative_slope"])))


@op("_elu", "elu", "elu_")
def _elu(g, ev):
    a = ev.bind(["input", "alpha"], {"alpha": 1.0})
    g.bind(ev.out, g.node("Elu", [g.name(a["input"])], alpha=float(a["alpha"])))


@op("softplus")
def _softplus(g, ev):
    a = ev.bind(["input", "beta", "threshold"], {"beta": 1.0, "threshold": 20.0})
    t, x, beta = a["input"], g.name(a["input"]), float(a["beta"])
    if beta == 1.0:  # (torch's exporter, too, leaves out the threshold's linear branch)
        g.bind(ev.out, g.node("Softplus", [x]))
        return
    y = g.node("Softplus", [g.node("Mul", [x, g.scalar(beta, t)])])
    g.bind(ev.out, g.node("Div", [y, g.scalar(beta, t)]))


@op("hardtanh", "hardtanh_", "_hardtanh", "relu6", "clamp", "clip", "clamp_", "_clamp")
def _clip(g, ev):
    if ev.name == "relu6":
        lo, hi = 0.0, 6.0
    elif "hardtanh" in ev.name:
        a = ev.bind(["input", "min_val", "max_val"], {"min_val": -1.0, "max_val": 1.0})
        lo, hi = a["min_val"], a["max_val"]
    else:
        a = ev.bind(["input", "min", "max"], {"min": None, "max": None})
        lo, hi = a["min"], a["max"]
    t = ev.args[0]
    ins = [g.name(t), "" if lo is None else _val(g, lo, t), "" if hi is None else _val(g, hi, t)]
    g.bind(ev.out, g.node("Clip", ins))


@op("softmax", "log_softmax")
def _softmax(g, ev):
    a = ev.bind(["input", "dim", "dtype"])
    kind = "Softmax" if ev.name == "softmax" else "LogSoftmax"
    g.bind(ev.out, g.node(kind, [g.name(a["input"])], axis=int(a["dim"])))


@op("contiguous", "clone", "detach")
def _identity(g, ev):
    g.bind(ev.out, g.node("Identity", [g.name(ev.args[0])]))


@op("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d")
def _dropout(g, ev):
    # (in eval mode a dropout module returns its input unrecorded: one recorded here was called
    # with training=True, torch's default for the functions, and would drop at random)
    a = ev.bind(["input", "p", "training"], {"p": 0.5, "training": True})
    if a["training"] and float(a["p"]) > 0:
        raise unsupported(f"{ev.name}(training=True)", g.opset, "a dropout that drops at random")
    g.bind(ev.out, g.node("Identity", [g.name(a["input"])]))


@op("where", "_where")
def _where(g, ev):
    c, a, b = ev.args[:3]
    if (
        not (isinstance(c, Tensor) and c.dtype.is_bool)
        and isinstance(a, Tensor)
        and a.dtype.is_bool
    ):
        a, c = c, a  # (Tensor.where(condition, other): self first)
    like = a if isinstance(a, Tensor) else b
    g.bind(ev.out, g.node("Where", [g.name(c), _val(g, a, like), _val(g, b, like)]))


@op("masked_fill")
def _masked_fill(g, ev):
    x, mask, v = ev.args[:3]
    g.bind(ev.out, g.node("Where", [g.name(mask), _val(g, v, x), g.name(x)]))


# ---- linear algebra --------------------------------------------------------------------------
@op("linear")
def _linear(g, ev):
    a = ev.bind(["input", "weight", "bias"], {"bias": None})
    x, w, b = a["input"], a["weight"], a["bias"]
    if x.dim() == 2 and w.dim() == 2:
        ins = [g.name(x), g.name(w)] + ([g.name(b)] if b is not None else [])
        g.bind(ev.out, g.node("Gemm", ins, transB=1))
        return
    y = g.node("MatMul", [g.name(x), g.node("Transpose", [g.name(w)], perm=[1, 0])])
    if b is not None:
        y = g.node("Add", [y, g.name(b)])
    g.bind(ev.out, y)


@op("matmul", "mm", "bmm", "__matmul__")
def _matmul(g, ev):
    g.bind(ev.out, g.node("MatMul", [g.name(ev.args[0]), g.name(ev.args[1])]))


@op("addmm")
def _addmm(g, ev):
    a = ev.bind(["input", "mat1", "mat2"], {"beta": 1, "alpha": 1})
    ins = [g.name(a["mat1"]), g.name(a["mat2"]), g.name(a["input"])]
    g.bind(ev.out, g.node("Gemm", ins, alpha=float(a["alpha"]), beta=float(a["beta"])))


@op("embedding")
def _embedding(g, ev):
    a = ev.bind(["input", "weight", "padding_idx", "max_norm"], {"max_norm": None})
    idx, w = a["input"], a["weight"]
    if idx.dtype.kind == "f":  # (torch.embedding(weight, indices): the other order)
        idx, w = w, idx
    elif a["max_norm"] is not None:
        raise unsupported("embedding(max_norm=...)", g.opset)
    g.bind(ev.out, g.node("Gather", [g.name(w), g.name(idx)], axis=0))


# ---- convolution and pooling -----------------------------------------------------------------
def _batched(g, x, n):
    """x's name with a batch dim where it has none (torch takes (C, *spatial) unbatched; ONNX
    always wants (N, C, *spatial)), and whether it was added."""
    if x.dim() == n + 1:
        return g.node("Unsqueeze", [g.name(x), g.ints([0])]), True
    return g.name(x), False


def _unbatched(g, y, added):
    return g.node("Squeeze", [y, g.ints([0])]) if added else y


@op("conv1d", "conv2d", "conv3d")
def _conv(g, ev):
    n = int(ev.name[4])
    a = ev.bind(["input", "weight", "bias", "stride", "padding", "dilation", "groups"],
                {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1})  # fmt: skip
    w = a["weight"]
    k = list(w.shape[2:])
    dil = _tup(a["dilation"], n)
    pad = a["padding"]
    if pad == "valid":
        pad = [0] * n
    if pad == "same":  # (the odd one on the end side, as torch)
        tot = [d * (kk - 1) for d, kk in zip(dil, k)]
        pads = [t // 2 for t in tot] + [t - t // 2 for t in tot]
    else:
        pads = _tup(pad, n) * 2
    xn, added = _batched(g, a["input"], n)
    ins = [xn, g.name(w)] + ([g.name(a["bias"])] if a["bias"] is not None else [])
    y = g.node("Conv", ins, kernel_shape=k, strides=_tup(a["stride"], n), pads=pads,
               dilations=dil, group=int(a["groups"]))  # fmt: skip
    g.bind(ev.out, _unbatched(g, y, added))


@op("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_t(g, ev):
    n = int(ev.name[-2])
    a = ev.bind(
        ["input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"],
        {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1},
    )
    w = a["weight"]
    xn, added = _batched(g, a["input"], n)
    ins = [xn, g.name(w)] + ([g.name(a["bias"])] if a["bias"] is not None else [])
    y = g.node("ConvTranspose", ins, kernel_shape=list(w.shape[2:]),
               strides=_tup(a["stride"], n), pads=_tup(a["padding"], n) * 2,
               output_padding=_tup(a["output_padding"], n), dilations=_tup(a["dilation"], n),
               group=int(a["groups"]))  # fmt: skip
    g.bind(ev.out, _unbatched(g, y, added))


@op("max_pool1d", "max_pool2d", "max_pool3d")
def _max_pool(g, ev):
    n = int(ev.name[-2])
    a = ev.bind(["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode",
                 "return_indices"], {"stride": None, "padding": 0, "dilation": 1,
                 "ceil_mode": False, "return_indices": False})  # fmt: skip
    if a["return_indices"]:
        raise unsupported(f"{ev.name}(return_indices=True)", g.opset)
    k = _tup(a["kernel_size"], n)
    s = _tup(a["stride"], n) if a["stride"] not in (None, (), []) else k
    xn, added = _batched(g, a["input"], n)
    y = g.node("MaxPool", [xn], kernel_shape=k, strides=s,
               pads=_tup(a["padding"], n) * 2, dilations=_tup(a["dilation"], n),
               ceil_mode=int(bool(a["ceil_mode"])))  # fmt: skip
    g.bind(ev.out, _unbatched(g, y, added))


@op("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(g, ev):
    n = int(ev.name[-2])
    a = ev.bind(["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                 "divisor_override"], {"stride": None, "padding": 0, "ceil_mode": False,
                 "count_include_pad": True, "divisor_override": None})  # fmt: skip
    if a["divisor_override"] is not None:
        raise unsupported(f"{ev.name}(divisor_override=...)", g.opset)
    k = _tup(a["kernel_size"], n)
    s = _tup(a["stride"], n) if a["stride"] not in (None, (), []) else k
    xn, added = _batched(g, a["input"], n)
    y = g.node("AveragePool", [xn], kernel_shape=k, strides=s,
               pads=_tup(a["padding"], n) * 2, ceil_mode=int(bool(a["ceil_mode"])),
               count_include_pad=int(bool(a["count_include_pad"])))  # fmt: skip
    g.bind(ev.out, _unbatched(g, y, added))


@op("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")  # fmt: skip
def _adaptive(g, ev):
    x = ev.args[0]
    n = int(ev.name[-2])
    if isinstance(ev.out, (tuple, list)):
        raise unsupported(f"{ev.name}(return_indices=True)", g.opset)
    xn, added = _batched(g, x, n)
    out = list(ev.out.shape[-n:])
    ins = list(x.shape[-n:])
    kind = "Average" if "avg" in ev.name else "Max"
    if all(o == 1 for o in out):
        y = g.node(f"Global{kind}Pool", [xn])
    elif any(i % o for i, o in zip(ins, out)):
        raise unsupported(ev.name, g.opset, "an output size that does not divide the input's")
    else:
        k = [i // o for i, o in zip(ins, out)]
        y = g.node(f"{kind}Pool", [xn], kernel_shape=k, strides=k, pads=[0] * 2 * n)
    g.bind(ev.out, _unbatched(g, y, added))


# ---- reductions ------------------------------------------------------------------------------
@op("mean", "sum", "amax", "amin")
def _reduce(g, ev):
    a = ev.bind(["input", "dim", "keepdim"], {"dim": None, "keepdim": False})
    x = a["input"]
    xn = g.name(x)
    if ev.out.dtype != x.dtype:  # (dtype=..., or an integer or bool sum: in the result's type)
        xn = g.node("Cast", [xn], to=onnx_dtype(ev.out.dtype))
    kind = {"mean": "ReduceMean", "sum": "ReduceSum", "amax": "ReduceMax", "amin": "ReduceMin"}
    dim = a["dim"]
    if dim is None or dim == () or dim == []:
        axes = None
    else:
        axes = [_dim(int(d), x.dim()) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    g.bind(ev.out, g.reduce(kind[ev.name], xn, axes, a["keepdim"]))


# ---- normalization ---------------------------------------------------------------------------
@op("layer_norm")
def _layer_norm(g, ev):
    a = ev.bind(["input", "normalized_shape", "weight", "bias", "eps"],
                {"weight": None, "bias": None, "eps": 1e-5})  # fmt: skip
    x = a["input"]
    ns = a["normalized_shape"]
    ns = [int(ns)] if isinstance(ns, int) else [int(v) for v in ns]
    axis = x.dim() - len(ns)
    xn = g.name(x)
    w = g.name(a["weight"]) if a["weight"] is not None else None
    b = g.name(a["bias"]) if a["bias"] is not None else None
    eps = float(a["eps"])
    if g.opset >= 17:
        w = w or g.const(np.ones(ns, dtype=host_dtype(x.dtype)), "ones")
        ins = [xn, w] + ([b] if b else [])
        g.bind(ev.out, g.node("LayerNormalization", ins, axis=axis, epsilon=eps))
        return
    g.bind(ev.out, _normalize(g, x, xn, list(range(axis, x.dim())), eps, w, b))


def _normalize(g, x, xn, axes, eps, w=None, b=None):
    """(x - mean) / sqrt(var + eps) over `axes` (biased variance), then * w + b."""
    mu = g.reduce("ReduceMean", xn, axes, True)
    d = g.node("Sub", [xn, mu])
    var = g.reduce("ReduceMean", g.node("Mul", [d, d]), axes, True)
    y = g.node("Div", [d, g.node("Sqrt", [g.node("Add", [var, g.scalar(eps, x)])])])
    if w:
        y = g.node("Mul", [y, w])
    if b:
        y = g.node("Add", [y, b])
    return y


@op("_Normalization")
def _normalization(g, ev):
    """batch_norm (eval), instance_norm and group_norm: pyrite runs them as one autograd
    Function whose last argument says which (the statistics' dims, the groups' shape)."""
    x, weight, bias = ev.args[0], ev.args[1], ev.args[2]
    spec = ev.args[4] if len(ev.args) > 4 else {}
    stats, groups = spec.get("stats"), spec.get("group_shape")
    eps = float(spec.get("eps", 1e-5))
    c = x.shape[1] if x.dim() > 1 else x.shape[0]
    xn = g.name(x)

    def vec(t, fill):
        if t is None:
            return g.const(np.full([c], fill, dtype=host_dtype(x.dtype)), "ones")
        nm = g.name(t)
        return nm if t.dim() == 1 else g.node("Reshape", [nm, g.ints([c])])

    if stats is not None:  # batch_norm with running statistics
        ins = [xn, vec(weight, 1.0), vec(bias, 0.0), vec(stats[0], 0.0), vec(stats[1], 1.0)]
        if g.opset >= 14:
            g.bind(ev.out, g.node("BatchNormalization", ins, epsilon=eps))
            return
        # (BatchNormalization-9's momentum default makes onnx's reference evaluator take batch
        # statistics: written out instead, (x - mean) * scale / sqrt(var + eps) + bias)
        view = g.ints([c] + [1] * (x.dim() - 2))
        w, b, mean, var = (g.node("Reshape", [v, view]) for v in ins[1:])
        inv = g.node("Div", [w, g.node("Sqrt", [g.node("Add", [var, g.scalar(eps, x)])])])
        y = g.node("Mul", [g.node("Sub", [xn, mean]), inv])
        g.bind(ev.out, g.node("Add", [y, b]))
        return
    dims = tuple(spec.get("stat_dims", ()))
    if groups is None and 0 not in dims and x.dim() > 2:  # instance_norm
        ins = [xn, vec(weight, 1.0), vec(bias, 0.0)]
        g.bind(ev.out, g.node("InstanceNormalization", ins, epsilon=eps))
        return
    if groups is not None:  # group_norm: (N, G, rest) normalised over rest
        ng = int(groups[1])
        r = g.node("Reshape", [xn, g.ints([0, ng, -1])])
        y = _normalize(g, x, r, [2], eps)
        y = g.node("Reshape", [y, g.node("Shape", [xn])])
        view = [c] + [1] * (x.dim() - 2)
        if weight is not None:
            y = g.node("Mul", [y, g.node("Reshape", [g.name(weight), g.ints(view)])])
        if bias is not None:
            y = g.node("Add", [y, g.node("Reshape", [g.name(bias), g.ints(view)])])
        g.bind(ev.out, y)
        return
    raise unsupported("batch_norm", g.opset, "batch statistics (training mode); call model.eval()")


# ---- attention -------------------------------------------------------------------------------
@op("_flash", "scaled_dot_product_attention")
def _sdpa(g, ev):
    """softmax(q k^T * scale + mask) v, decomposed (pyrite's fused attention records as
    `_flash(q, k, v, mask, is_causal, scale, ...)`)."""
    if ev.name == "_flash":
        q, k, v, mask, causal, scale = ev.args[:6]
    else:
        a = ev.bind(["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"],
                    {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None})  # fmt: skip
        q, k, v, mask, causal, scale = (a[n] for n in ("query", "key", "value", "attn_mask",
                                                       "is_causal", "scale"))  # fmt: skip
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    rank = k.dim()
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    kt = g.node("Transpose", [g.name(k)], perm=perm)
    s = g.node("Mul", [g.node("MatMul", [g.name(q), kt]), g.scalar(scale, q)])
    L, S = q.shape[-2], k.shape[-2]
    if causal:
        tri = np.triu(np.full((L, S), -np.inf, dtype=host_dtype(q.dtype)), 1)
        s = g.node("Add", [s, g.const(tri, "causal")])
    if mask is not None:
        if mask.dtype.is_bool:
            ninf = g.scalar(-np.inf, q)
            s = g.node("Where", [g.name(mask), s, ninf])
        else:
            s = g.node("Add", [s, g.name(mask)])
    p = g.node("Softmax", [s], axis=-1)
    y = g.node("MatMul", [p, g.name(v)])
    out = ev.out[0] if isinstance(ev.out, (tuple, list)) else ev.out
    g.bind(out, y)
