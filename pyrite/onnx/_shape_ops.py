"""Shape ops as ONNX nodes: views, joins and splits, indexing, padding, resizing.

A reshape's target is the traced shape; under dynamic axes the second trace (other sizes on
those axes) shows which entries follow them: such an entry is written 0 (copy the input's dim)
where it equals the input's dim at that position in both traces, else -1; where that leaves
two -1, each such size is read from the input whose dynamic axis it follows (Shape, Gather), as
an expand's sizes are.
"""

from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._graph import onnx_dtype
from ._ops import _BIG, _dim, op, unsupported


def _shape_arg(args):
    """view(x, 2, 3) and view(x, (2, 3)) alike: the target as a list."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return [int(v) for v in args[0]]
    return [int(v) for v in args]


def _target(g, ev, x, shape):
    """The Reshape target (a shape tensor's name): the traced one, with the entries that follow
    a dynamic axis made 0 or -1 (from the second trace), or read from the inputs' shapes where
    that leaves two -1."""
    alt = ev.alt
    if alt is None:
        return g.ints(shape)
    xs, x2 = list(x.shape), list(alt.args[0].shape)
    other = [int(v) for v in alt.out.shape]
    mine = [int(v) for v in ev.out.shape]
    out = []
    for i, (a, b) in enumerate(zip(mine, other)):
        if a == b:  # (a size the dynamic axes leave alone: written out, -1 or not)
            out.append(a)
        elif i < len(xs) and xs[i] == a and x2[i] == b:
            out.append(0)
        else:
            out.append(-1)
    if out.count(-1) > 1:  # (then each size from the input whose dynamic axis it follows)
        dyn = g.dyn_shape(mine, other)
        if dyn is None:
            raise unsupported(
                ev.name, g.opset, f"a target shape {shape} whose sizes follow no input's"
            )
        return dyn
    return g.ints(out)


@op("view", "reshape", "_reshape_alias", "view_as", "reshape_as")
def _reshape(g, ev):
    x = ev.args[0]
    if ev.name.endswith("_as"):
        shape = list(ev.args[1].shape)
    else:
        shape = _shape_arg(ev.args[1:] or (ev.kwargs.get("shape") or ev.kwargs.get("size"),))
    g.bind(ev.out, g.node("Reshape", [g.name(x), _target(g, ev, x, shape)]))


@op("flatten")
def _flatten(g, ev):
    a = ev.bind(["input", "start_dim", "end_dim"], {"start_dim": 0, "end_dim": -1})
    x = a["input"]
    r = x.dim()
    if r == 0:
        g.bind(ev.out, g.node("Reshape", [g.name(x), g.ints([1])]))
        return
    s, e = _dim(int(a["start_dim"]), r), _dim(int(a["end_dim"]), r)
    t = [0] * s + [-1] + [int(d) for d in x.shape[e + 1 :]]
    g.bind(ev.out, g.node("Reshape", [g.name(x), g.ints(t)]))


@op("permute")
def _permute(g, ev):
    x = ev.args[0]
    dims = _shape_arg(ev.args[1:] or (ev.kwargs["dims"],))
    g.bind(ev.out, g.node("Transpose", [g.name(x)], perm=[_dim(d, x.dim()) for d in dims]))


@op("transpose", "swapdims", "swapaxes", "t", "T", "mT")
def _transpose(g, ev):
    x = ev.args[0]
    r = x.dim()
    perm = list(range(r))
    if ev.name == "T":  # (every dim reversed)
        perm.reverse()
    elif ev.name in ("t", "mT"):  # (the last two; t of a 0-d or 1-d tensor is itself)
        if r >= 2:
            perm[-2], perm[-1] = perm[-1], perm[-2]
    else:
        a = ev.bind(["input", "dim0", "dim1"])
        d0, d1 = _dim(int(a["dim0"]), r), _dim(int(a["dim1"]), r)
        perm[d0], perm[d1] = perm[d1], perm[d0]
    g.bind(ev.out, g.node("Transpose", [g.name(x)], perm=perm))


@op("unsqueeze")
def _unsqueeze(g, ev):
    a = ev.bind(["input", "dim"])
    d = _dim(int(a["dim"]), a["input"].dim() + 1)
    g.bind(ev.out, g.node("Unsqueeze", [g.name(a["input"]), g.ints([d])]))


@op("squeeze")
def _squeeze(g, ev):
    a = ev.bind(["input", "dim"], {"dim": None})
    x = a["input"]
    dim = a["dim"]
    if dim is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    else:
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        axes = [_dim(int(d), x.dim()) for d in dims if x.shape[_dim(int(d), x.dim())] == 1]
    if not axes:
        g.bind(ev.out, g.node("Identity", [g.name(x)]))
        return
    g.bind(ev.out, g.node("Squeeze", [g.name(x), g.ints(axes)]))


@op("cat", "concat", "concatenate", "stack")
def _cat(g, ev):
    a = ev.bind(["tensors", "dim"], {"dim": 0})
    ts = [t for t in a["tensors"] if not (ev.name != "stack" and t.shape == (0,))]
    rank = ts[0].dim() + (1 if ev.name == "stack" else 0)
    d = _dim(int(a["dim"]), rank)
    names = [g.name(t) for t in ts]
    if ev.name == "stack":
        names = [g.node("Unsqueeze", [n, g.ints([d])]) for n in names]
    g.bind(ev.out, g.node("Concat", names, axis=d))


@op("split", "chunk", "tensor_split", "unbind", "split_with_sizes")
def _split(g, ev):
    x = ev.args[0]
    outs = list(ev.out)
    if ev.name == "unbind":
        d = _dim(int(ev.bind(["input", "dim"], {"dim": 0})["dim"]), x.dim())
    elif ev.name in ("chunk", "tensor_split"):
        d = _dim(int(ev.bind(["input", "chunks", "dim"], {"dim": 0})["dim"]), x.dim())
    else:
        d = _dim(int(ev.bind(["input", "split_size", "dim"], {"dim": 0})["dim"]), x.dim())
    sizes = [int(o.shape[d]) if ev.name != "unbind" else 1 for o in outs]
    parts = g.node("Split", [g.name(x), g.ints(sizes)], n_out=len(outs), axis=d)
    parts = parts if isinstance(parts, list) else [parts]
    for o, p in zip(outs, parts):
        if ev.name == "unbind":
            p = g.node("Squeeze", [p, g.ints([d])])
        g.bind(o, p)


@op("expand")
def _expand(g, ev):
    x = ev.args[0]
    shape = _shape_arg(ev.args[1:] or (ev.kwargs.get("size"),))
    target = list(ev.out.shape)
    if ev.alt is not None:  # (a size that follows a dynamic axis: read from that input)
        dyn = g.dyn_shape(target, list(ev.alt.out.shape))
        if dyn is None:
            raise unsupported("expand", g.opset, "a size that follows no input's dynamic axis")
        g.bind(ev.out, g.node("Expand", [g.name(x), dyn]))
        return
    full = [1] * (len(shape) - x.dim()) + list(x.shape)
    t = [1 if s == -1 or s == f else s for s, f in zip(shape, full)]  # (1: the input's dim)
    g.bind(ev.out, g.node("Expand", [g.name(x), g.ints(t)]))


@op("getitem", "__getitem__")
def _getitem(g, ev):
    x, idx = ev.args[0], ev.args[1]
    idx = idx if isinstance(idx, tuple) else (idx,)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if any(i is Ellipsis for i in idx):
        e = next(k for k, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:e] + (slice(None),) * (x.dim() - n_real) + idx[e + 1 :]
    adv = [k for k, i in enumerate(idx) if isinstance(i, (Tensor, list))]
    if adv:
        g.bind(ev.out, _gather_index(g, x, idx, adv))
        return
    starts, ends, axes, steps, gathers, news = [], [], [], [], [], []
    d = 0  # the input's dim
    o = 0  # the output's dim (after ints drop theirs, Nones add theirs)
    for i in idx:
        if i is None:
            news.append(o)
            o += 1
            continue
        if isinstance(i, bool) or not isinstance(i, (int, slice)):
            raise unsupported("index", g.opset, f"an index of type {type(i).__name__}")
        if isinstance(i, int):
            gathers.append((d, i))
        elif i != slice(None):
            step = 1 if i.step is None else int(i.step)
            lo = i.start if i.start is not None else (0 if step > 0 else -1)
            hi = i.stop if i.stop is not None else (_BIG if step > 0 else -_BIG)
            starts.append(int(lo))
            ends.append(int(hi))
            axes.append(d)
            steps.append(step)
            o += 1
        else:
            o += 1
        d += 1
    y = g.name(x)
    if axes:
        y = g.node("Slice", [y, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)])
    for dim, i in reversed(gathers):  # (from the last, so earlier dims keep their numbers)
        y = g.node("Gather", [y, g.const(np.asarray(i, dtype=np.int64), "index")], axis=dim)
    if news:
        y = g.node("Unsqueeze", [y, g.ints(news)])
    if y == g.name(x):
        y = g.node("Identity", [y])
    g.bind(ev.out, y)


def _gather_index(g, x, idx, adv):
    """x[:, ..., t] with one integer tensor (or list of ints) t and full slices: Gather."""
    k = adv[0]
    t = idx[k]
    if isinstance(t, list):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in t):
            raise unsupported("index", g.opset, "a list index of other than ints")
        t_name = g.const(np.asarray(t, dtype=np.int64), "index")
    elif t.dtype.kind == "i":
        t_name = g.name(t)
    else:
        raise unsupported("index", g.opset, f"a {t.dtype} tensor index (a mask)")
    others = [i for j, i in enumerate(idx) if j != k]
    if len(adv) > 1 or any(not isinstance(i, slice) or i != slice(None) for i in others):
        raise unsupported("index", g.opset, "advanced indexing beyond one integer index")
    return g.node("Gather", [g.name(x), t_name], axis=k)


@op("select")
def _select(g, ev):
    a = ev.bind(["input", "dim", "index"])
    x = a["input"]
    i = g.const(np.asarray(int(a["index"]), dtype=np.int64), "index")
    g.bind(ev.out, g.node("Gather", [g.name(x), i], axis=_dim(int(a["dim"]), x.dim())))


@op("narrow")
def _narrow(g, ev):
    a = ev.bind(["input", "dim", "start", "length"])
    x = a["input"]
    d, s = _dim(int(a["dim"]), x.dim()), int(a["start"])
    ins = [g.name(x), g.ints([s]), g.ints([s + int(a["length"])]), g.ints([d])]
    g.bind(ev.out, g.node("Slice", ins))


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@op("pad")
def _pad(g, ev):
    a = ev.bind(["input", "pad", "mode", "value"], {"mode": "constant", "value": None})
    x = a["input"]
    mode = _PAD_MODES.get(a["mode"])
    if mode is None or (mode == "wrap" and g.opset < 19):
        raise unsupported(f"pad(mode={a['mode']!r})", g.opset)
    p = [int(v) for v in a["pad"]]
    r = x.dim()
    begin, end = [0] * r, [0] * r
    for j in range(len(p) // 2):  # (torch: the last dim's pair first)
        begin[r - 1 - j], end[r - 1 - j] = p[2 * j], p[2 * j + 1]
    if any(v < 0 for v in p):
        raise unsupported("pad", g.opset, "negative padding")
    ins = [g.name(x), g.ints(begin + end)]
    if mode == "constant" and a["value"]:
        ins.append(g.scalar(float(a["value"]), x))
    g.bind(ev.out, g.node("Pad", ins, mode=mode))


@op("interpolate", "upsample", "upsample_nearest", "upsample_bilinear")
def _interpolate(g, ev):
    a = ev.bind(["input", "size", "scale_factor", "mode", "align_corners"],
                {"size": None, "scale_factor": None, "mode": "nearest", "align_corners": None})  # fmt: skip
    if ev.name == "upsample_nearest":
        a["mode"] = "nearest"
    if ev.name == "upsample_bilinear":
        a["mode"], a["align_corners"] = "bilinear", True
    x = a["input"]
    mode = a["mode"]
    n = x.dim() - 2
    sf = a["scale_factor"]
    xn = g.name(x)
    if sf is not None:
        scales = [float(s) for s in (sf if isinstance(sf, (list, tuple)) else [sf] * n)]
        sizing = [g.const(np.asarray([1.0, 1.0, *scales], dtype=np.float32), "scales")]
    else:  # (the sizes themselves: a scale out/in would round the size down where inexact)
        lead = g.node("Slice", [g.node("Shape", [xn]), g.ints([0]), g.ints([2])])
        sizing = ["", g.node("Concat", [lead, g.ints(list(ev.out.shape[2:]))], axis=0)]
    if mode == "nearest":
        attrs = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor")  # fmt: skip
    elif mode == "nearest-exact":  # (src = floor((dst + 0.5) * in / out))
        attrs = dict(mode="nearest", coordinate_transformation_mode="half_pixel",
                     nearest_mode="round_prefer_ceil")  # fmt: skip
    elif mode in ("linear", "bilinear", "trilinear", "bicubic"):
        ct = "align_corners" if a["align_corners"] else "pytorch_half_pixel"
        attrs = dict(mode="cubic" if mode == "bicubic" else "linear",
                     coordinate_transformation_mode=ct)  # fmt: skip
        if mode == "bicubic":
            attrs["cubic_coeff_a"] = -0.75
    else:
        raise unsupported(f"interpolate(mode={mode!r})", g.opset)
    if ev.kwargs.get("antialias"):
        raise unsupported("interpolate(antialias=True)", g.opset)
    g.bind(ev.out, g.node("Resize", [xn, "", *sizing], **attrs))


@op("pixel_shuffle")
def _pixel_shuffle(g, ev):
    a = ev.bind(["input", "upscale_factor"])
    x = a["input"]
    if x.dim() != 4:
        raise unsupported("pixel_shuffle", g.opset, "an input that is not 4-d")
    g.bind(ev.out, g.node("DepthToSpace", [g.name(x)], blocksize=int(a["upscale_factor"]),
                          mode="CRD"))  # fmt: skip


@op("to", "type_as", "float", "half", "int", "long", "bool", "double")
def _cast(g, ev):
    g.bind(ev.out, g.node("Cast", [g.name(ev.args[0])], to=onnx_dtype(ev.out.dtype)))
