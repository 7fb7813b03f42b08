"""ONNX import: neural-network ops (Conv, ConvTranspose, pools, normalizations, Pad, Resize,
LRN). Recurrent ops are in _import_rnn.py. See _import.py for the rules."""

from __future__ import annotations

import math

import numpy as np

import pyrite as pr
import pyrite.nn.functional as F

from ._import_ops import dev, host, ints, is_host, norm_axis, opt, register, shape_of


def _spatial_pads(node, spatial, k, s, d):
    """(begins, ends) of the padding of each spatial dim: `pads`, or what auto_pad asks for."""
    nd = len(spatial)
    auto = node.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(node.get("pads", [0] * (2 * nd)))
        return pads[:nd], pads[nd:]
    if auto == "VALID":
        return [0] * nd, [0] * nd
    begins, ends = [], []
    for n, kk, ss, dd in zip(spatial, k, s, d):
        total = max((-(-n // ss) - 1) * ss + (kk - 1) * dd + 1 - n, 0)
        small = total // 2
        begins.append(small if auto == "SAME_UPPER" else total - small)
        ends.append(total - small if auto == "SAME_UPPER" else small)
    return begins, ends


def _torch_pads(begins, ends) -> list:
    """ONNX per-dim (begins, ends) as F.pad's list, last dim first."""
    out = []
    for b, e in zip(reversed(begins), reversed(ends)):
        out += [b, e]
    return out


def _geometry(node, x, w_spatial=None):
    nd = x.dim() - 2
    k = list(node.get("kernel_shape", w_spatial))
    s = list(node.get("strides", [1] * nd))
    d = list(node.get("dilations", [1] * nd))
    b, e = _spatial_pads(node, list(x.shape[2:]), k, s, d)
    return nd, k, s, d, b, e


@register("Conv")
def _conv(node):
    groups = int(node.get("group", 1))

    def run(ins):
        x, w, bias = dev(ins[0]), dev(ins[1]), dev(opt(ins, 2))
        nd, k, s, d, pb, pe = _geometry(node, x, list(w.shape[2:]))
        if nd not in (1, 2, 3):
            raise node.error(f"a {nd}-d convolution (pyrite has 1-, 2- and 3-d)")
        pad = pb
        if pb != pe:
            x, pad = F.pad(x, _torch_pads(pb, pe)), [0] * nd
        conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]
        return [conv(x, w, bias, s, pad, d, groups)]

    return run


@register("ConvTranspose")
def _conv_transpose(node):
    groups = int(node.get("group", 1))

    def run(ins):
        x, w, bias = dev(ins[0]), dev(ins[1]), dev(opt(ins, 2))
        nd = x.dim() - 2
        k = list(node.get("kernel_shape", w.shape[2:]))
        s = list(node.get("strides", [1] * nd))
        d = list(node.get("dilations", [1] * nd))
        op = list(node.get("output_padding", [0] * nd))
        full = [(n - 1) * ss + (kk - 1) * dd + 1 for n, ss, kk, dd in zip(x.shape[2:], s, k, d)]
        auto = node.get("auto_pad", "NOTSET")
        if "output_shape" in node.attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
            want = list(node.get("output_shape", [n * ss for n, ss in zip(x.shape[2:], s)]))[-nd:]
            total = [f + o - w_ for f, o, w_ in zip(full, op, want)]
            small = [t // 2 for t in total]
            # (ONNX: SAME_UPPER puts the smaller half first, NOTSET and SAME_LOWER the larger)
            upper = auto == "SAME_UPPER"
            pb = [t - sm if not upper else sm for t, sm in zip(total, small)]
            pe = [t - b for t, b in zip(total, pb)]
        elif auto == "VALID":
            pb, pe = [0] * nd, [0] * nd
        else:
            pads = list(node.get("pads", [0] * (2 * nd)))
            pb, pe = pads[:nd], pads[nd:]
        convt = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[nd - 1]
        y = convt(x, w, None, s, 0, 0, groups, d)  # (N, C_out, *full)
        # the full output, output_padding more zeros at each end, cropped by the pads
        out = [f + o - b - e for f, o, b, e in zip(full, op, pb, pe)]
        grow = [max(o - e, 0) for o, e in zip(op, pe)]
        if any(grow) or any(b < 0 for b in pb):
            y = F.pad(y, _torch_pads([max(-b, 0) for b in pb], grow))
            pb = [max(b, 0) for b in pb]
        for i in range(nd):
            y = y.narrow(2 + i, pb[i], out[i])
        if bias is not None:
            y = y + bias.reshape([1, -1] + [1] * nd)
        return [y]

    return run


def _pool_direct_ok(k, pb, pe):
    return pb == pe and all(2 * p <= kk for p, kk in zip(pb, k))


def _ceil_cropped(y, x, k, s, d, pb, pe):
    """A ceil_mode pool of the explicitly padded x cropped to ONNX's sizes: a window may not
    start in the end padding, which torch's rule counts as input there."""
    for i, (n, kk, ss, dd, b, e) in enumerate(zip(x.shape[2:], k, s, d, pb, pe)):
        out = -(-(n + b + e - (kk - 1) * dd - 1) // ss) + 1
        if (out - 1) * ss >= n + b:
            out -= 1
        if y.shape[2 + i] > out:
            y = y.narrow(2 + i, 0, out)
    return y


@register("MaxPool")
def _max_pool(node):
    if len(node.outputs) > 1 and node.outputs[1]:
        raise node.unsupported("the Indices output")
    if node.get("storage_order", 0):
        raise node.unsupported("storage_order=1")
    ceil = bool(node.get("ceil_mode", 0))

    def run(ins):
        x = dev(ins[0])
        nd, k, s, d, pb, pe = _geometry(node, x)
        pool = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[nd - 1]
        if _pool_direct_ok(k, pb, pe):
            return [pool(x, k, s, pb, d, ceil_mode=ceil)]
        xp = F.pad(x, _torch_pads(pb, pe), value=-math.inf)
        y = pool(xp, k, s, 0, d, ceil_mode=ceil)
        return [_ceil_cropped(y, x, k, s, d, pb, pe) if ceil else y]

    return run


@register("AveragePool", "LpPool")
def _avg_pool(node):
    ceil = bool(node.get("ceil_mode", 0))
    include = bool(node.get("count_include_pad", 0)) or node.op == "LpPool"
    if any(v != 1 for v in node.get("dilations", [1])):
        raise node.unsupported("dilations other than 1 (pyrite's avg_pool has none)")
    p = float(node.get("p", 2))

    def run(ins):
        x = dev(ins[0])
        nd, k, s, d, pb, pe = _geometry(node, x)
        pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[nd - 1]
        if node.op == "LpPool":
            # (ceil_mode: zeros past the end, so that no window is clipped and mean * k is
            # its sum)
            xp = F.pad(x.abs().pow(p), _torch_pads(pb, [e + kk * ceil for e, kk in zip(pe, k)]))
            y = pool(xp, k, s, 0, ceil_mode=ceil) * float(np.prod(k))
            return [(_ceil_cropped(y, x, k, s, d, pb, pe) if ceil else y).pow(1.0 / p)]
        # (avg_pool3d refuses an input smaller than the kernel, padding not counted, as torch's)
        small = nd == 3 and any(n < kk for n, kk in zip(x.shape[2:], k))
        if _pool_direct_ok(k, pb, pe) and (include or not any(pb) or not ceil) and not small:
            return [pool(x, k, s, pb, ceil_mode=ceil, count_include_pad=include)]
        xp = F.pad(x, _torch_pads(pb, pe))
        y = pool(xp, k, s, 0, ceil_mode=ceil)
        if not include:
            ones = F.pad(pr.ones((1, 1) + tuple(x.shape[2:])), _torch_pads(pb, pe))
            y = y / pool(ones, k, s, 0, ceil_mode=ceil)
        return [_ceil_cropped(y, x, k, s, d, pb, pe) if ceil else y]

    return run


@register("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(node):
    def run(ins):
        x = dev(ins[0])
        dims = tuple(range(2, x.dim()))
        if node.op == "GlobalAveragePool":
            return [x.mean(dim=dims, keepdim=True)]
        return [x.amax(dim=dims, keepdim=True)]

    return run


def _channel_view(v, rank):
    return v.reshape([1, -1] + [1] * (rank - 2))


@register("BatchNormalization")
def _batch_norm(node):
    if node.get("training_mode", 0) or len([o for o in node.outputs if o]) > 1:
        raise node.unsupported("training_mode=1 (pyrite imports inference graphs)")
    eps = float(node.get("epsilon", 1e-5))

    def run(ins):
        x, scale, bias, mean, var = (dev(v) for v in ins[:5])
        r = x.dim()
        inv = (_channel_view(var, r) + eps).rsqrt() * _channel_view(scale, r)
        return [(x - _channel_view(mean, r)) * inv + _channel_view(bias, r)]

    return run


@register("LayerNormalization")
def _layer_norm(node):
    axis, eps = int(node.get("axis", -1)), float(node.get("epsilon", 1e-5))
    extra = len([o for o in node.outputs if o]) > 1

    def run(ins):
        x, scale, bias = dev(ins[0]), dev(ins[1]), dev(opt(ins, 2))
        ax = norm_axis(axis, x.dim(), node)
        ns = tuple(x.shape[ax:])
        plain = tuple(scale.shape) == ns and (bias is None or tuple(bias.shape) == ns)
        if plain and not extra:
            return [F.layer_norm(x, ns, scale, bias, eps)]
        dims = tuple(range(ax, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        c = x - mean
        inv = ((c * c).mean(dim=dims, keepdim=True) + eps).rsqrt()
        y = c * inv * scale
        if bias is not None:
            y = y + bias
        return [y, mean, inv]

    return run


@register("InstanceNormalization")
def _instance_norm(node):
    eps = float(node.get("epsilon", 1e-5))

    def run(ins):
        x, scale, bias = (dev(v) for v in ins[:3])
        if math.prod(x.shape[2:]) == 1:  # (y = bias; F.instance_norm refuses it, as torch's)
            return [(x - x) * _channel_view(scale, x.dim()) + _channel_view(bias, x.dim())]
        return [F.instance_norm(x, weight=scale, bias=bias, eps=eps)]

    return run


@register("GroupNormalization")
def _group_norm(node):
    g, eps = int(node.get("num_groups")), float(node.get("epsilon", 1e-5))

    def run(ins):
        x, scale, bias = (dev(v) for v in ins[:3])
        c = x.shape[1]
        if scale.numel() != c:  # (opset 18-20: a scale and bias per group)
            scale = scale.repeat_interleave(c // g)
            bias = bias.repeat_interleave(c // g)
        if c // g * math.prod(x.shape[2:]) == 1:  # (y = bias; F.group_norm refuses it, as torch's)
            return [(x - x) * _channel_view(scale, x.dim()) + _channel_view(bias, x.dim())]
        return [F.group_norm(x, g, scale, bias, eps)]

    return run


@register("LRN")
def _lrn(node):
    size = int(node.get("size"))
    alpha, beta, bias = (float(node.get(k, v)) for k, v in
                         (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))  # fmt: skip

    def run(ins):
        x = dev(ins[0])
        n, c = x.shape[0], x.shape[1]
        sq = (x * x).reshape(n, 1, c, -1)  # (N, 1, C, prod(spatial))
        sq = F.pad(sq, [0, 0, (size - 1) // 2, size // 2])
        total = F.avg_pool2d(sq, (size, 1), 1) * float(size)
        return [x / (total.reshape(x.shape) * (alpha / size) + bias).pow(beta)]

    return run


# ---------------------------------------------------------------------------------------------
# Pad


def _pad_index(n: int, b: int, e: int, mode: str) -> np.ndarray:
    """Source indices of a dim of size n padded by b before and e after (negative pads crop
    first, and the padding repeats the cropped dim)."""
    lo, hi = max(-b, 0), max(-e, 0)
    return lo + _pad_index_cropped(n - lo - hi, max(b, 0), max(e, 0), mode)


def _pad_index_cropped(n: int, b: int, e: int, mode: str) -> np.ndarray:
    i = np.arange(-b, n + e, dtype=np.int64)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    period = 2 * (n - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    j = np.mod(i, period) if period else np.zeros_like(i)
    return np.where(j >= n, period - j, j)


@register("Pad")
def _pad(node):
    mode = node.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise node.unsupported(f"mode={mode!r}")

    def run(ins):
        x = ins[0]
        shape = shape_of(x)
        r = len(shape)
        pads = list(node.get("pads")) if "pads" in node.attrs else ints(ins[1])
        axes = ints(ins[3]) if opt(ins, 3) is not None else list(range(r))
        axes = [norm_axis(a, r, node) for a in axes]
        b, e = [0] * r, [0] * r
        for j, a in enumerate(axes):
            b[a], e[a] = pads[j], pads[j + len(axes)]
        value = node.get("value", 0.0)
        if opt(ins, 2) is not None:
            value = host(ins[2]).item()
        if is_host(x):
            h = host(x)[
                tuple(slice(max(-bb, 0), n - max(-ee, 0)) for n, bb, ee in zip(shape, b, e))
            ]
            pw = [(max(bb, 0), max(ee, 0)) for bb, ee in zip(b, e)]
            if mode == "constant":
                return [np.pad(h, pw, constant_values=value)]
            return [
                np.pad(h, pw, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])
            ]
        t = dev(x)
        if mode == "constant":
            for a in range(r):  # (negative pads crop first)
                lo, hi = max(-b[a], 0), max(-e[a], 0)
                if lo or hi:
                    t = t.narrow(a, lo, shape[a] - lo - hi)
            grow = [max(v, 0) for v in b], [max(v, 0) for v in e]
            if any(grow[0]) or any(grow[1]):
                t = F.pad(t, _torch_pads(*grow), value=float(value))
            return [t]
        for a in range(r):
            if b[a] or e[a]:
                kept = shape[a] - max(-b[a], 0) - max(-e[a], 0)
                if kept <= 0 or (mode == "reflect" and max(b[a], e[a]) >= kept):
                    raise node.error(f"{mode} padding {b[a]}, {e[a]} of a dim of size {shape[a]}")
                t = t.index_select(a, dev(_pad_index(shape[a], b[a], e[a], mode)))
        return [t]

    return run


# ---------------------------------------------------------------------------------------------
# Resize: separable, one axis at a time, each output position a weighted sum of n neighbours
# whose indices and weights are computed here on the host by ONNX's own formulas
# (onnx.reference's op_resize), so every coordinate mode and nearest mode is exact.

_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                "half_pixel_symmetric", "tf_crop_and_resize")  # fmt: skip
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coords(mode, out_n: int, scale: float, in_n: int, roi):
    y = np.arange(out_n, dtype=np.float64)
    out_w = scale * in_n
    if mode == "align_corners":
        return np.zeros(out_n) if out_w == 1 else y * (in_n - 1) / (out_w - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "pytorch_half_pixel":
        return np.full(out_n, -0.5) if out_w == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = in_n / 2 * (1 - out_n / out_w)
        return offset + (y + 0.5) / scale - 0.5
    lo, hi = roi  # tf_crop_and_resize
    if out_w == 1:
        x = np.full(out_n, (hi - lo) * (in_n - 1) / 2)
    else:
        x = y * (hi - lo) * (in_n - 1) / (out_w - 1)
    return x + lo * (in_n - 1)


def _coeffs(kind, ratio, a, nearest_mode):
    if kind == "nearest":
        if float(ratio).is_integer():
            return [0.0, 1.0]
        r = ratio
        return {
            "round_prefer_floor": [r <= 0.5, r > 0.5],
            "round_prefer_ceil": [r < 0.5, r >= 0.5],
            "floor": [1, 0],
            "ceil": [0, 1],
        }[nearest_mode]
    if kind == "linear":
        return [1 - ratio, ratio]
    r = ratio
    return [
        ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
        ((a + 2) * r - (a + 3)) * r * r + 1,
        ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
        ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a,
    ]


def _axis_table(node, in_n, out_n, scale, roi):
    """(indices (out_n, n), weights (out_n, n), outside mask or None) for one axis."""
    kind = node.get("mode", "nearest")
    cmode = node.get("coordinate_transformation_mode", "half_pixel")
    x = _source_coords(cmode, out_n, scale, in_n, roi)
    xi = np.floor(x).astype(np.int64)
    ratios = np.where(x == xi, 1.0, x - xi)
    a = float(node.get("cubic_coeff_a", -0.75))
    nm = node.get("nearest_mode", "round_prefer_floor")
    if node.opset < 11:  # (Resize-10, Upsample: floor growing, ceil shrinking, as onnxruntime)
        nm = "floor" if scale >= 1 else "ceil"
    n = 4 if kind == "cubic" else 2
    w = np.array([_coeffs(kind, float(r), a, nm) for r in ratios], np.float64).reshape(out_n, n)
    pad = -(-n // 2)
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    idx = (p + off)[:, None] + np.arange(n)[None, :] - pad
    if node.get("exclude_outside", 0):
        w = np.where((idx < 0) | (idx >= in_n), 0.0, w)
        s = w.sum(axis=-1, keepdims=True)
        w = w / np.where(s == 0, 1.0, s)
    outside = None
    if cmode == "tf_crop_and_resize":
        outside = (x < 0) | (x > in_n - 1)
    return np.clip(idx, 0, in_n - 1), w, outside


def _resize_axis(t, ax, idx, w, outside, extrapolation):
    out_n, n = idx.shape
    r = t.dim()
    if n == 2 and np.all((w == 0) | (w == 1)):  # (nearest: one neighbour each)
        pick = idx[np.arange(out_n), np.argmax(w, axis=1)] if out_n else idx[:, 0]
        y = t.index_select(ax, dev(pick))
    else:
        g = t.index_select(ax, dev(idx.reshape(-1)))
        g = g.reshape(tuple(t.shape[:ax]) + (out_n, n) + tuple(t.shape[ax + 1 :]))
        wv = pr.tensor(w.astype(np.float32)).reshape([out_n, n] + [1] * (r - ax - 1))
        y = (g * wv.to(t.dtype)).sum(dim=ax + 1)
    if outside is not None and outside.any():
        mask = pr.tensor(outside).reshape([out_n] + [1] * (r - ax - 1))
        y = pr.where(mask, float(extrapolation), y)
    return y


@register("Resize")
def _resize(node):
    if node.opset < 11:  # (Resize-10 names no coordinate mode: asymmetric, as Upsample's)
        node.attrs.setdefault("coordinate_transformation_mode", "asymmetric")
    kind = node.get("mode", "nearest")
    cmode = node.get("coordinate_transformation_mode", "half_pixel")
    if kind not in ("nearest", "linear", "cubic"):
        raise node.unsupported(f"mode={kind!r}")
    if cmode not in _COORD_MODES:
        raise node.unsupported(f"coordinate_transformation_mode={cmode!r}")
    if node.get("nearest_mode", "round_prefer_floor") not in _NEAREST_MODES:
        raise node.unsupported(f"nearest_mode={node.get('nearest_mode')!r}")
    if node.get("antialias", 0):
        raise node.unsupported("antialias=1")
    policy = node.get("keep_aspect_ratio_policy", "stretch")

    def run(ins):
        x = dev(ins[0])
        shape = tuple(x.shape)
        r = len(shape)
        axes = [norm_axis(a, r, node) for a in node.get("axes", range(r))]
        roi = ints_or_none(opt(ins, 1), float)
        scales = ints_or_none(opt(ins, 2) if len(ins) > 2 else opt(ins, 1), float)
        if len(ins) == 2:  # (opset 10: X, scales)
            roi = None
        sizes = ints_or_none(opt(ins, 3), int)
        if sizes:
            sc = [sizes[i] / shape[a] for i, a in enumerate(axes)]
            if policy != "stretch":
                s = min(sc) if policy == "not_larger" else max(sc)
                sc = [s] * len(axes)
                sizes = [int(s * shape[a] + 0.5) for a in axes]
        elif scales:
            sc = list(scales)
            sizes = [int(s * shape[a]) for s, a in zip(sc, axes)]
        else:
            raise node.error("neither scales nor sizes is given")
        t = x
        for i, a in enumerate(axes):
            if math.isclose(sc[i], 1.0) and sizes[i] == shape[a] and cmode != "tf_crop_and_resize":
                continue
            lohi = (roi[i], roi[i + len(axes)]) if roi else (0.0, 1.0)
            idx, w, outside = _axis_table(node, shape[a], sizes[i], sc[i], lohi)
            t = _resize_axis(t, a, idx, w, outside, node.get("extrapolation_value", 0.0))
        return [t]

    return run


def ints_or_none(v, kind):
    if v is None:
        return None
    h = host(v).reshape(-1)
    return [kind(i) for i in h] if h.size else None


@register("Upsample")
def _upsample(node):
    # (Upsample, deprecated since opset 10: out[i] = in[floor(i / scale)], the asymmetric
    # coordinates of Resize)
    node.attrs.setdefault("coordinate_transformation_mode", "asymmetric")
    node.attrs.setdefault("nearest_mode", "floor")
    resize = _resize(node)
    if "scales" in node.attrs:  # (Upsample-7: scales an attribute)
        scales = np.asarray(node.attrs["scales"], np.float32)
        return lambda ins: resize([ins[0], None, scales])
    return lambda ins: resize([ins[0], None, ins[1]])


from . import _import_rnn  # noqa: E402, F401  (registers LSTM, GRU, RNN)
