"""ONNX import: shape, indexing and data-movement ops (Shape, Reshape, Slice, Gather, Scatter*,
Concat, Split, TopK, ...). Host values stay on the host (numpy, int64); see _import.py."""

from __future__ import annotations

import numpy as np

import pyrite as pr

from ._import_ops import (
    Const,
    attr_or_input,
    dev,
    host,
    ints,
    is_host,
    norm_axis,
    opt,
    register,
    shape_of,
)


def _all_host(ins) -> bool:
    return all(v is None or is_host(v) for v in ins)


def _index(v, n: int, what: str):
    """Indices into a dim of size n, negatives wrapped: host int64 stays host; a device tensor
    is wrapped with where()."""
    if is_host(v):
        h = host(v).astype(np.int64)
        return np.where(h < 0, h + n, h)
    t = dev(v)
    return pr.where(t < 0, t + n, t)


@register("Constant")
def _constant(node):
    a = node.attrs
    if "value" in a:
        v = a["value"]
    elif "value_float" in a:
        v = np.array(a["value_float"], np.float32)
    elif "value_floats" in a:
        v = np.array(a["value_floats"], np.float32)
    elif "value_int" in a:
        v = np.array(a["value_int"], np.int64)
    elif "value_ints" in a:
        v = np.array(a["value_ints"], np.int64)
    else:
        raise node.unsupported(f"attribute {sorted(a)} (string or sparse constants)")
    if np.asarray(v).dtype.kind not in "biuf":
        raise node.unsupported(f"a value of dtype {np.asarray(v).dtype}")
    c = Const(v, node.outputs[0])
    return lambda ins: [c]


@register("Shape")
def _shape(node):
    start, end = node.get("start", 0), node.get("end", None)

    def run(ins):
        s = shape_of(ins[0])
        return [np.array(s[start:end] if end is not None else s[start:], np.int64)]

    return run


@register("Size")
def _size(node):
    return lambda ins: [np.array(int(np.prod(shape_of(ins[0]), dtype=np.int64)), np.int64)]


@register("Reshape")
def _reshape(node):
    allowzero = bool(node.get("allowzero", 0))

    def run(ins):
        x, want = ins[0], ints(ins[1]) if len(ins) > 1 else list(node.get("shape"))
        shape = shape_of(x)
        out = [shape[i] if s == 0 and not allowzero else s for i, s in enumerate(want)]
        if is_host(x):
            return [host(x).reshape(out)]
        return [dev(x).reshape(out)]

    return run


@register("Flatten")
def _flatten(node):
    axis = int(node.get("axis", 1))

    def run(ins):
        shape = shape_of(ins[0])
        ax = axis + len(shape) if axis < 0 else axis
        out = (int(np.prod(shape[:ax], dtype=np.int64)), int(np.prod(shape[ax:], dtype=np.int64)))
        return [host(ins[0]).reshape(out) if is_host(ins[0]) else dev(ins[0]).reshape(out)]

    return run


@register("Transpose")
def _transpose(node):
    perm = node.get("perm")

    def run(ins):
        p = perm if perm is not None else list(range(len(shape_of(ins[0]))))[::-1]
        if is_host(ins[0]):
            return [np.transpose(host(ins[0]), p)]
        return [dev(ins[0]).permute(*p)]

    return run


@register("Squeeze")
def _squeeze(node):
    def run(ins):
        x = ins[0]
        shape = shape_of(x)
        axes = attr_or_input(node, ins, "axes", 1)
        if axes is None:
            axes = [i for i, s in enumerate(shape) if s == 1]
        axes = {norm_axis(a, len(shape), node) for a in axes}
        bad = [a for a in axes if shape[a] != 1]
        if bad:
            raise node.error(f"cannot squeeze axes {bad} of shape {shape}: their sizes are not 1")
        out = [s for i, s in enumerate(shape) if i not in axes]
        return [host(x).reshape(out) if is_host(x) else dev(x).reshape(out)]

    return run


@register("Unsqueeze")
def _unsqueeze(node):
    def run(ins):
        x = ins[0]
        shape = list(shape_of(x))
        axes = attr_or_input(node, ins, "axes", 1)
        rank = len(shape) + len(axes)
        for a in sorted(norm_axis(a, rank, node) for a in axes):
            shape.insert(a, 1)
        return [host(x).reshape(shape) if is_host(x) else dev(x).reshape(shape)]

    return run


@register("Concat")
def _concat(node):
    axis = int(node.get("axis"))

    def run(ins):
        ins = [v for v in ins if v is not None]
        ax = norm_axis(axis, len(shape_of(ins[0])), node)
        if _all_host(ins):
            return [np.concatenate([host(v) for v in ins], axis=ax)]
        return [pr.cat([dev(v) for v in ins], dim=ax)]

    return run


@register("Split")
def _split(node):
    axis, n_out = int(node.get("axis", 0)), len(node.outputs)

    def run(ins):
        x = ins[0]
        shape = shape_of(x)
        ax = norm_axis(axis, len(shape), node)
        sizes = attr_or_input(node, ins, "split", 1)
        if sizes is None:
            n = shape[ax]
            k = node.get("num_outputs", n_out)
            if "num_outputs" in node.attrs:
                step = -(-n // k)
                sizes = [min(step, n - i * step) for i in range(k)]
            elif n % k:
                raise node.error(f"dim {ax} (size {n}) does not split into {k} equal parts")
            else:
                sizes = [n // k] * k
        if sum(sizes) != shape[ax]:
            raise node.error(f"split sizes {sizes} do not add up to dim {ax} of {shape}")
        if is_host(x):
            return np.split(host(x), np.cumsum(sizes)[:-1], axis=ax)
        return list(pr.split(dev(x), sizes, dim=ax))

    return run


def _slices(node, ins, shape):
    """Per-dim Python slices (ONNX's clamping of starts/ends is Python's)."""
    if len(ins) > 1:
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if opt(ins, 3) is not None else list(range(len(starts)))
        steps = ints(ins[4]) if opt(ins, 4) is not None else [1] * len(starts)
    else:
        starts, ends = list(node.get("starts")), list(node.get("ends"))
        axes = list(node.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    sl = [slice(None)] * len(shape)
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        if sp == 0:
            raise node.error("a slice step of 0")
        sl[norm_axis(ax, len(shape), node)] = slice(st, en, sp)
    return sl


@register("Slice")
def _slice(node):
    def run(ins):
        x = ins[0]
        shape = shape_of(x)
        sl = _slices(node, ins, shape)
        if is_host(x):
            return [host(x)[tuple(sl)]]
        t = dev(x)
        for ax, s in enumerate(sl):
            if s.step is not None and s.step < 0:
                idx = np.arange(*s.indices(shape[ax]), dtype=np.int64)
                t = t.index_select(ax, dev(idx)) if idx.size else t.narrow(ax, 0, 0)
                sl[ax] = slice(None)
        return [t[tuple(sl)]]

    return run


def _gather_dev(data, idx, ax):
    ishape = shape_of(idx)
    flat = dev(idx).reshape(-1)
    y = data.index_select(ax, flat)
    return y.reshape(tuple(data.shape[:ax]) + tuple(ishape) + tuple(data.shape[ax + 1 :]))


@register("Gather")
def _gather(node):
    axis = int(node.get("axis", 0))

    def run(ins):
        x, idx = ins
        shape = shape_of(x)
        ax = norm_axis(axis, len(shape), node)
        i = _index(idx, shape[ax], "indices")
        if is_host(x) and isinstance(i, np.ndarray):
            return [np.take(host(x), i, axis=ax)]
        return [_gather_dev(dev(x), i, ax)]

    return run


@register("GatherElements")
def _gather_elements(node):
    axis = int(node.get("axis", 0))

    def run(ins):
        x, idx = ins
        shape = shape_of(x)
        ax = norm_axis(axis, len(shape), node)
        i = _index(idx, shape[ax], "indices")
        if is_host(x) and isinstance(i, np.ndarray):
            return [np.take_along_axis(host(x), i, axis=ax)]
        return [pr.gather(dev(x), ax, dev(i))]

    return run


def _nd_linear(node, shape, idx, b):
    """GatherND/ScatterND: the index tuples (batch dims `b` first) as row numbers into the data
    viewed as (prod(batch) * prod(indexed dims), *rest)."""
    ishape = shape_of(idx)
    r = ishape[-1]
    dims = shape[b : b + r]
    if not is_host(idx):
        idx = host(idx)  # (an index computed on the device: read back once)
    h = host(idx).astype(np.int64)
    h = np.where(h < 0, h + np.array(dims, np.int64), h)
    lin = np.zeros(ishape[:-1], np.int64)
    for j, n in enumerate(dims):
        lin = lin * n + h[..., j]
    m = int(np.prod(dims, dtype=np.int64))
    nb = int(np.prod(shape[:b], dtype=np.int64))
    lin = lin.reshape(nb, -1) + (np.arange(nb, dtype=np.int64) * m)[:, None]
    return lin.reshape(-1), ishape[:-1], tuple(shape[b + r :])


@register("GatherND")
def _gather_nd(node):
    b = int(node.get("batch_dims", 0))

    def run(ins):
        x, idx = ins
        shape = shape_of(x)
        lin, lead, rest = _nd_linear(node, shape, idx, b)
        if is_host(x):
            y = host(x).reshape((-1,) + rest)[lin]
            return [y.reshape(tuple(lead) + rest)]
        y = dev(x).reshape((-1,) + rest).index_select(0, dev(lin))
        return [y.reshape(tuple(lead) + rest)]

    return run


_REDUCTIONS = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@register("ScatterElements", "Scatter")
def _scatter_elements(node):
    axis = int(node.get("axis", 0))
    red = node.get("reduction", "none")
    if red not in _REDUCTIONS:
        raise node.unsupported(f"reduction={red!r}")

    def run(ins):
        x, idx, upd = ins
        shape = shape_of(x)
        ax = norm_axis(axis, len(shape), node)
        i = dev(_index(idx, shape[ax], "indices"))
        if red == "none":
            return [pr.scatter(dev(x), ax, i, dev(upd))]
        return [pr.scatter_reduce(dev(x), ax, i, dev(upd), _REDUCTIONS[red], include_self=True)]

    return run


@register("ScatterND")
def _scatter_nd(node):
    red = node.get("reduction", "none")
    if red not in _REDUCTIONS:
        raise node.unsupported(f"reduction={red!r}")

    def run(ins):
        x, idx, upd = ins
        shape = shape_of(x)
        lin, lead, rest = _nd_linear(node, shape, idx, 0)
        width = int(np.prod(rest, dtype=np.int64))
        flat = dev(x).reshape(-1, width)
        u = dev(upd).reshape(-1, width)
        i = dev(np.repeat(lin[:, None], width, axis=1))
        if red == "none":
            y = pr.scatter(flat, 0, i, u)
        else:
            y = pr.scatter_reduce(flat, 0, i, u, _REDUCTIONS[red], include_self=True)
        return [y.reshape(shape)]

    return run


@register("Expand")
def _expand(node):
    def run(ins):
        x, want = ins[0], ints(ins[1])
        out = np.broadcast_shapes(shape_of(x), tuple(want))
        if is_host(x):
            return [np.broadcast_to(host(x), out).copy()]
        return [dev(x).expand(*out)]

    return run


@register("Tile")
def _tile(node):
    def run(ins):
        x, reps = ins[0], ints(ins[1])
        if is_host(x):
            return [np.tile(host(x), reps)]
        return [dev(x).repeat(*reps)]

    return run


@register("ConstantOfShape")
def _constant_of_shape(node):
    v = node.get("value", np.zeros(1, np.float32))

    def run(ins):
        return [np.full(ints(ins[0]), np.asarray(v).reshape(-1)[0], dtype=np.asarray(v).dtype)]

    return run


@register("Range")
def _range(node):
    def run(ins):
        start, limit, delta = (host(v) for v in ins)
        return [np.arange(start.item(), limit.item(), delta.item()).astype(start.dtype)]

    return run


@register("NonZero")
def _nonzero(node):
    def run(ins):
        if is_host(ins[0]):
            return [np.array(np.nonzero(host(ins[0])), np.int64).reshape(len(shape_of(ins[0])), -1)]
        return [pr.nonzero(dev(ins[0])).t()]

    return run


@register("TopK")
def _topk(node):
    axis = int(node.get("axis", -1))
    largest = bool(node.get("largest", 1))  # (sorted=0 allows any order: sorted is one)

    def run(ins):
        x = dev(ins[0])
        k = ints(ins[1])[0] if len(ins) > 1 else int(node.get("k"))
        ax = norm_axis(axis, x.dim(), node)
        v, i = pr.topk(x, k, dim=ax, largest=largest, sorted=True)
        return [v, i]

    return run


@register("CumSum")
def _cumsum(node):
    exclusive, reverse = bool(node.get("exclusive", 0)), bool(node.get("reverse", 0))

    def run(ins):
        x = dev(ins[0])
        ax = norm_axis(ints(ins[1])[0], x.dim(), node)
        if reverse:
            x = x.flip(ax)
        y = x.cumsum(ax)
        if exclusive:
            n = x.shape[ax]
            zero = pr.zeros_like(x.narrow(ax, 0, min(1, n)))
            y = pr.cat([zero, y.narrow(ax, 0, max(n - 1, 0))], dim=ax)
        return [y.flip(ax) if reverse else y]

    return run


@register("Trilu")
def _trilu(node):
    upper = bool(node.get("upper", 1))

    def run(ins):
        k = ints(ins[1])[0] if opt(ins, 1) is not None else 0
        x = ins[0]
        if is_host(x):
            return [(np.triu if upper else np.tril)(host(x), k)]
        return [(pr.triu if upper else pr.tril)(dev(x), k)]

    return run


@register("OneHot")
def _one_hot(node):
    axis = int(node.get("axis", -1))

    def run(ins):
        idx, depth, values = ins
        d = int(host(depth).reshape(-1)[0])
        rank = len(shape_of(idx)) + 1
        ax = norm_axis(axis, rank, node)
        i = dev(_index(idx, d, "indices")).unsqueeze(ax)
        view = [1] * rank
        view[ax] = d
        hit = i == pr.arange(d).reshape(view)
        off, on = dev(values)[0], dev(values)[1]
        return [pr.where(hit, on, off)]

    return run


@register("DepthToSpace", "SpaceToDepth")
def _depth_to_space(node):
    b = int(node.get("blocksize"))
    mode = node.get("mode", "DCR")

    def run(ins):
        x = dev(ins[0])
        n, c, h, w = x.shape
        if node.op == "SpaceToDepth":
            y = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
            return [y.reshape(n, c * b * b, h // b, w // b)]
        if mode == "DCR":
            y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
        return [y.reshape(n, c // (b * b), h * b, w * b)]

    return run
