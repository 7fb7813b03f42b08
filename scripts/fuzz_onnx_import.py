"""Randomized differential fuzz of pyrite.onnx.load_model (pyrite/onnx/_import*.py) against
onnx's reference evaluator (onnx.reference.ReferenceEvaluator, onnx 1.23), session 47.

A case is a random ONNX model built with onnx.helper: a chain / DAG of 1-6 "steps", each one
op of the importer's (some steps add a node or two before it to keep its input in the op's
domain: Abs + Add before Log, Tanh before Asin), at one default-domain opset drawn per seed
(2-21, mostly 13-21) where the op's form exists (Reduce* axes as attribute or input, Clip
min/max as attributes before 11, Split / Squeeze / Unsqueeze axes, Slice's attribute form
before 10, Softmax's pre-13 flattening, TopK's k, Pad's pads, Resize's input lists and
modes by opset...). Step inputs are earlier values (the latest one most often: a chain) or
new ones: graph inputs (device tensors in pyrite), float initializers (Parameters), int64
initializers and Constant nodes (host constants in pyrite: its numpy paths and load-time
folding), of awkward sizes (1, 2, 3, 5, 7, 11); floats uniform, Gaussian, positive or
integer-valued (ties for ArgMax / TopK / Equal). Ops drawn: about 60 elementwise ones
(unary math and activations with their attributes, broadcasting Add/Sub/Mul/Div/Pow/Max/Min/
Sum/Mean/Mod/PRelu, comparisons, And/Or/Xor/Not, Bitwise*, Where, IsNaN/IsInf, Clip, Cast
and CastLike, float16 round trips), the ten Reduce*, ArgMax/ArgMin (select_last_index),
MatMul (vector and batched, broadcast), Gemm (transA/transB/alpha/beta, C broadcast or
omitted), Einsum (a dozen equations, ellipses), Softmax/LogSoftmax/Hardmax, Conv and
ConvTranspose (1-3-d, groups, strides, dilations, asymmetric pads, auto_pad, output_padding,
output_shape), MaxPool/AveragePool/LpPool (pads, strides, dilations, ceil_mode,
count_include_pad, auto_pad), GlobalAverage/MaxPool, Batch/Layer/Instance/Group
normalization, LRN, Reshape (0, -1, allowzero, a Shape subgraph target), Flatten, Transpose,
Squeeze, Unsqueeze, Concat, Split (sizes, equal, num_outputs), Slice (negative and
out-of-range starts/ends, INT64 sentinels, negative steps), Gather / GatherElements /
GatherND (negative indices, device indices), ScatterElements / ScatterND (reductions),
Expand, Tile, Pad (constant/reflect/edge/wrap, negative pads, axes), DepthToSpace /
SpaceToDepth, Trilu, CumSum (exclusive / reverse), TopK (largest, sorted), OneHot, NonZero,
Shape / Size, Range, ConstantOfShape, Identity, Dropout, Resize (nearest / linear / cubic,
every coordinate mode, nearest modes, exclude_outside, axes, keep_aspect_ratio_policy, sizes or
scales), Upsample, LSTM / GRU / RNN. Every node output is a graph output (a failure names
the first wrong one).

The reference. The graph runs node by node through ReferenceEvaluator (one single-node model
per node) in float64 (float inputs, initializers, Constant values and Cast-to-float widened;
Resize's scales / roi stay float32, as the spec types them), which gives the values the
builder draws from (domains, ranks, shapes; a step whose values leave float32's comfortable
range, 1e5 or subnormal, is drawn again) and the reference outputs. Where the reference is
known to be wrong for a form, the node also runs an oracle (numpy, or torch float64); the
oracle is used, and the case is "known", only where the two differ or the reference raises.
Two reference limits are worked around silently: its unary ops and ReduceLogSumExp fail on a
0-d input (numpy returns a scalar), so those run on the value as shape (1,).

Tolerance: a float output must be within
    4·max_t |trial_t - ref| + 4·u·|ref| + 2^-120,   u = 2^-24,
elementwise, where the trials t rerun the float64 graph with each node's outputs moved by
sign·xi·(that node's error budget), xi = +-[0.5, 1] drawn per element, in two mirrored pairs
(sign +1 and -1 with the same xi; four pairs where ArgMax / ArgMin / Hardmax / TopK read
values: a pair never makes the middle of a three-way near-tie the largest, and values
upsampled from a size-1 axis make such ties): a rounding early in the chain is carried
through the ops after it (their condition numbers) as pyrite's own rounding would be, and a
value that sits
within its budget of a discontinuity (a comparison, Floor, Shrink's threshold, Where, ArgMax,
a Cast to int) crosses it in one trial of each pair, making the tolerance there as wide as
the jump. A node's budget: none for ops that move or pick values (exact: pyrite must give
the reference's values to 4 ulps); for elementwise and normalizing ops
2·s + k·u·(|y| + max|y|), s the change of y when its float inputs move by k·u relatively
(their conditioning: k = 2 for Add/Mul, 4-16 for transcendental ones, about n for softmax /
normalizations / LogSumExp over n elements, 16 per step for recurrent ones); for the linear
ones (sums, means, matmul, Gemm, convolutions, Einsum, CumSum, average pools) 2·n·u times
the same op run on |inputs| (the sum of the magnitudes of its n terms). Integer and bool
outputs must be equal except where a trial differs from the reference (a tie decided by
rounding); a wrong shape or dtype kind (float / int / bool; int64 is pyrite's int32) is a
failure, and so is any exception from pyrite other than the refusals below. Over seeds
0:40000 the largest err / tol of a passing output was 0.65 (Pow), most ops below 0.3.

Classified, counted but not failures:
- skip: pyrite refuses, with UnsupportedOperatorError, a form it documents as unsupported
  (MaxPool's Indices output, AveragePool's dilations, Resize's antialias, BatchNormalization's
  training_mode=1, recurrent ops' clip and short sequence_lens), or an int64 value outside
  int32 on its way to the device (_import.py's docstring: "a range check that raises
  OnnxImportError naming the value").
- known: a node's reference is wrong (it differs from the oracle, or raises) and pyrite
  agrees with the oracle. onnx.reference 1.23's errors found so far:
  Softmax / LogSoftmax / Hardmax before opset 13 get opset 13's per-axis semantics (the spec
  flattens to 2-D at `axis`); LRN sums channel windows over range(batch size); GlobalMaxPool
  reduces axes (r-2, r-1) counted from r - 2, right only for 4-d inputs; BatchNormalization-9
  (opsets 9-13) computes batch statistics (its momentum default makes it train) where one
  output means inference; ConvTranspose with group > 1 (it slices W by output channel and
  adds the whole bias per group) and with output_shape beside pads; MaxPool / AveragePool /
  LpPool in the forms tallied (the oracle: the spec's formulas, which match torch wherever
  torch can express the case; onnx.reference's MaxPool, the older pool code at every opset,
  reads a 2-d `pads` as (top, bottom, left, right) and raises on 1-d pads and on
  SAME_LOWER); Resize-10's scales read as roi (the
  oracle: asymmetric coordinates, nearest rounding down when the axis grows and up when it
  shrinks, as onnxruntime's Resize-10 and Upsample); Resize, GatherElements, Squeeze-11 and
  Unsqueeze-11 with negative axes; Pad with negative pads (numpy.pad refuses them); Sum /
  Mean / Max / Min accumulate in place into their first input (a smaller one fails to
  broadcast); Shape-15 does not clamp a start below -rank; Upsample's linear mode past 2-d
  and Scatter (opset 9-10) are not implemented. Also tallied: a reference error while
  drawing (the step is dropped): MaxPool with its Indices output at opset < 11 or 3-d.

Found and fixed in pyrite/onnx/_import*.py (tests/test_fuzz_onnx_import47.py has each as a
named test and its seeds): IsInf with a detect flag off was True at NaNs; 0-d reductions and
noop_with_empty_axes dropped the elementwise part (L1's abs, SumSquare's square, LogSum's log;
the spec as onnx#7394 clarified it); ConvTranspose with a negative total padding (auto_pad SAME
with a stride past the kernel's extent, or output_shape past the full output) was an element
short; InstanceNormalization of one spatial element and GroupNormalization of one element per
group raised (torch's F.instance_norm / group_norm refuse them in training mode); pools with
ceil_mode and end padding had a window starting in the end padding (and LpPool scaled clipped
windows as whole ones); 3-d AveragePool of an input smaller than its kernel raised; Resize-10
used half_pixel coordinates; Upsample-7's attribute scales raised IndexError; Resize to a
zero-size axis raised a numpy error. Seeds 0:40000 after the fixes: no failure (33703 ok,
6056 known, 241 skip, in 342 s here); the importer as it was fails 473 of seeds 0:20000.

    .venv/bin/python scripts/fuzz_onnx_import.py --seeds 0:500 [--show 17] [--verbose]
"""

from __future__ import annotations

import math
import re
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import pyrite as pr
from pyrite.onnx import OnnxImportError, load_model
from pyrite.onnx.errors import UnsupportedOperatorError

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import fuzz_driver  # noqa: E402

U = 2.0**-24
WORST: dict = {}  # op -> the largest err / tol of its outputs in the cases that passed
DRAWN: dict = {}  # op -> nodes drawn (every node, domain helpers too)
TINY = 2.0**-120
SIZES = (1, 1, 2, 2, 3, 3, 4, 5, 5, 6, 7, 7, 11)
I64MAX, I64MIN = 2**63 - 1, -(2**63)


def _elem(arr) -> int:
    return helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)


def _kind(arr) -> str:
    k = np.asarray(arr).dtype.kind
    return "f" if k == "f" else ("b" if k == "b" else "i")


class Reject(Exception):
    """A drawn step that does not fit (values out of range, a bad shape): drawn again."""


class RefError(Exception):
    """onnx.reference raised on a node the builder believes valid."""


# ---- running one node --------------------------------------------------------------------------
def _wide_attrs(node, wide):
    attrs = dict(node["attrs"])
    if not wide:
        return attrs
    if node["op"] == "Cast" and attrs.get("to") == TP.FLOAT:
        attrs["to"] = TP.DOUBLE
    for key in ("value",):
        v = attrs.get(key)
        if isinstance(v, np.ndarray) and v.dtype == np.float32:
            attrs[key] = v.astype(np.float64)
    return attrs


def _proto_attrs(attrs):
    out = {}
    for k, v in attrs.items():
        out[k] = numpy_helper.from_array(v, k) if isinstance(v, np.ndarray) else v
    return out


def _single_model(node, ins, opset, wide):
    names, feeds, inputs, seen = [], {}, [], set()
    for i, (nm, v) in enumerate(zip(node["ins"], ins)):
        if not nm:
            names.append("")
            continue
        names.append(nm)
        if nm in seen:
            continue
        seen.add(nm)
        inputs.append(helper.make_tensor_value_info(nm, _elem(v), np.shape(v)))
        feeds[nm] = v
    n = helper.make_node(node["op"], names, node["outs"], **_proto_attrs(_wide_attrs(node, wide)))
    outs = [helper.make_empty_tensor_value_info(o) for o in node["outs"] if o]
    g = helper.make_graph([n], "g", inputs, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, feeds


def run_node(node, ins, opset, wide, oracle_ok=True):
    """The node's outputs (a list, None for an omitted one) from its oracle or onnx.reference."""
    if node.get("oracle") and oracle_ok:
        outs = ORACLES[node["oracle"][0]](node, ins, opset)
    elif node["op"] in _UNARY and np.ndim(ins[0]) == 0:
        # (onnx.reference's unary ops fail on 0-d inputs, numpy giving scalars: run as (1,))
        outs = run_node(node, [np.reshape(ins[0], (1,))], opset, wide)
        outs = [o.reshape(()) for o in outs]
    elif node["op"].startswith("Reduce") and np.ndim(ins[0]) == 0:
        # (and its ReduceLogSumExp: a 0-d input is reduced as a (1,) one over its axis 0)
        attrs = {**node["attrs"], "keepdims": 0}
        attrs.pop("noop_with_empty_axes", None)
        one = [np.reshape(ins[0], (1,))]
        if "axes" in attrs or len(ins) < 2:
            attrs["axes"] = [0]
        else:
            one.append(np.zeros(1, np.int64))
        outs = run_node(dict(node, attrs=attrs, _ev={}), one, opset, wide)
    else:
        m, feeds = _single_model(node, ins, opset, wide)
        key = (wide, tuple(str(np.asarray(v).dtype) for v in feeds.values()))
        cache = node.setdefault("_ev", {})
        if key not in cache:
            cache[key] = ReferenceEvaluator(m)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = cache[key].run(None, feeds)
    res, it = [], iter(outs)
    for o in node["outs"]:
        res.append(np.asarray(next(it)) if o else None)
    return res


def _same(a, b):
    """Two lists of outputs equal up to float64 rounding."""
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is None:
            continue
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            atol = 1e-12 * (np.abs(y64[np.isfinite(y64)]).max(initial=1.0))
            with np.errstate(all="ignore"):
                if not np.allclose(x64, y64, rtol=1e-9, atol=atol, equal_nan=True):
                    return False
        elif not np.array_equal(x, y):
            return False
    return True


def _widen(v, narrow=False):
    v = np.asarray(v)
    return v.astype(np.float64) if v.dtype == np.float32 and not narrow else v


# ---- oracles (where onnx.reference is known wrong) ---------------------------------------------
def _or_softmax_old(node, ins, opset):
    x = np.asarray(ins[0], np.float64)
    axis = node["attrs"].get("axis", 1)
    axis = axis % max(x.ndim, 1) if x.ndim else 0
    x2 = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
    if node["op"] == "Hardmax":
        y = np.zeros_like(x2)
        if x2.size:
            y[np.arange(x2.shape[0]), np.argmax(x2, axis=1)] = 1.0
    else:
        e = np.exp(x2 - x2.max(1, keepdims=True)) if x2.size else x2
        s = e.sum(1, keepdims=True)
        y = (x2 - x2.max(1, keepdims=True) - np.log(s)) if node["op"] == "LogSoftmax" else e / s
    return [y.reshape(x.shape).astype(ins[0].dtype)]


def _or_lrn(node, ins, opset):
    x = np.asarray(ins[0], np.float64)
    a = node["attrs"]
    size, alpha = a["size"], a.get("alpha", 1e-4)
    beta, bias = a.get("beta", 0.75), a.get("bias", 1.0)
    c = x.shape[1]
    sq = np.zeros(x.shape)
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + -(-(size - 1) // 2) + 1)
        sq[:, i] = (x[:, lo:hi] ** 2).sum(1)
    return [(x / (bias + alpha / size * sq) ** beta).astype(ins[0].dtype)]


def _or_conv_transpose(node, ins, opset):
    import torch

    x = torch.tensor(np.ascontiguousarray(ins[0], np.float64))
    w = torch.tensor(np.ascontiguousarray(ins[1], np.float64))
    a = node["attrs"]
    nd = x.dim() - 2
    k = list(a.get("kernel_shape", w.shape[2:]))
    s = list(a.get("strides", [1] * nd))
    d = list(a.get("dilations", [1] * nd))
    op = list(a.get("output_padding", [0] * nd))
    full = [(n - 1) * ss + (kk - 1) * dd + 1 for n, ss, kk, dd in zip(x.shape[2:], s, k, d)]
    auto = a.get("auto_pad", "NOTSET")
    if "output_shape" in a or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(a.get("output_shape", [n * ss for n, ss in zip(x.shape[2:], s)]))[-nd:]
        total = [f + o - w_ for f, o, w_ in zip(full, op, want)]
        if auto == "SAME_UPPER":
            pb = [t // 2 for t in total]
        else:
            pb = [t - t // 2 for t in total]
        pe = [t - b for t, b in zip(total, pb)]
    elif auto == "VALID":
        pb = pe = [0] * nd
    else:
        pads = list(a.get("pads", [0] * (2 * nd)))
        pb, pe = pads[:nd], pads[nd:]
    f = (torch.nn.functional.conv_transpose1d, torch.nn.functional.conv_transpose2d,
         torch.nn.functional.conv_transpose3d)[nd - 1]  # fmt: skip
    y = f(x, w, None, s, 0, 0, a.get("group", 1), d)
    pad = []
    for i in reversed(range(nd)):
        pad += [max(-pb[i], 0), max(op[i] - pe[i], 0) if op[i] >= pe[i] else 0]
    y = torch.nn.functional.pad(y, pad)
    for i in range(nd):
        lo = max(pb[i], 0)
        n = full[i] + op[i] - pb[i] - pe[i]
        y = y.narrow(2 + i, lo, n)
    if len(ins) > 2 and ins[2] is not None:
        y = y + torch.tensor(np.ascontiguousarray(ins[2], np.float64)).reshape([1, -1] + [1] * nd)
    return [y.numpy().astype(ins[0].dtype)]


def _or_pad(node, ins, opset):
    x = np.asarray(ins[0])
    a = node["attrs"]
    mode = a.get("mode", "constant")
    r = x.ndim
    pads = list(a["pads"]) if "pads" in a else [int(v) for v in np.asarray(ins[1]).reshape(-1)]
    axes = list(range(r))
    if len(ins) > 3 and ins[3] is not None:
        axes = [int(v) % r for v in np.asarray(ins[3]).reshape(-1)]
    b, e = [0] * r, [0] * r
    for j, ax in enumerate(axes):
        b[ax], e[ax] = pads[j], pads[j + len(axes)]
    value = a.get("value", 0.0)
    if len(ins) > 2 and ins[2] is not None:
        value = np.asarray(ins[2]).item()
    h = x[tuple(slice(max(-bb, 0), n - max(-ee, 0)) for n, bb, ee in zip(x.shape, b, e))]
    pw = [(max(bb, 0), max(ee, 0)) for bb, ee in zip(b, e)]
    if mode == "constant":
        return [np.pad(h, pw, constant_values=value)]
    return [np.pad(h, pw, mode=mode)]


def _pool_geometry(a, n, i, nd, k, s, d):
    """(begin pad, end pad, output size) of spatial dim i (the spec's formulas)."""
    span = (k - 1) * d + 1
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-n // s)
        total = max((out - 1) * s + span - n, 0)
        b = total // 2 if auto == "SAME_UPPER" else total - total // 2
        return b, total - b, out
    if auto == "VALID":
        return 0, 0, (n - span) // s + 1
    pads = a.get("pads", [0] * (2 * nd))
    b, e = pads[i], pads[i + nd]
    v = (n + b + e - span) / s + 1
    if a.get("ceil_mode", 0):
        out = math.ceil(v)
        if (out - 1) * s >= n + b:  # (a window may not start in the end padding)
            out -= 1
    else:
        out = math.floor(v)
    return b, e, out


def _or_pool(node, ins, opset):
    """MaxPool / AveragePool / LpPool as the spec says: each window's input elements (pads:
    -inf for max, 0 for Lp; counted in an average's divisor only with count_include_pad, and
    only inside the padded extent)."""
    x = np.asarray(ins[0], np.float64)
    a, op = node["attrs"], node["op"]
    nd = x.ndim - 2
    ks = list(a["kernel_shape"])
    ss = list(a.get("strides", [1] * nd))
    ds = list(a.get("dilations", [1] * nd))
    geo = [_pool_geometry(a, x.shape[2 + i], i, nd, ks[i], ss[i], ds[i]) for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(o for _, _, o in geo))
    p = a.get("p", 2)
    incl = a.get("count_include_pad", 0)
    for pos in np.ndindex(*out.shape[2:]):
        idx, inside, padded = [], [], []
        for i, o in enumerate(pos):
            b, e, _ = geo[i]
            n = x.shape[2 + i]
            j = o * ss[i] - b + np.arange(ks[i]) * ds[i]
            idx.append(j)
            inside.append((j >= 0) & (j < n))
            padded.append((j >= -b) & (j < n + e))
        mask = np.ones((), bool)
        cnt = np.ones((), bool)
        for m, q in zip(inside, padded):
            mask = np.multiply.outer(mask, m)
            cnt = np.multiply.outer(cnt, q)
        sel = [np.clip(j, 0, x.shape[2 + i] - 1) for i, j in enumerate(idx)]
        win = x[(slice(None), slice(None)) + np.ix_(*sel)]
        if op == "MaxPool":
            v = np.where(mask, win, -np.inf).reshape(x.shape[:2] + (-1,)).max(-1)
        elif op == "LpPool":
            v = (np.where(mask, np.abs(win), 0.0) ** p).reshape(x.shape[:2] + (-1,)).sum(-1)
            v = v ** (1.0 / p)
        else:
            tot = np.where(mask, win, 0.0).reshape(x.shape[:2] + (-1,)).sum(-1)
            v = tot / (cnt.sum() if incl else mask.sum())
        out[(slice(None), slice(None)) + pos] = v
    return [out.astype(ins[0].dtype)]


def _or_upsample(node, ins, opset):
    """Upsample as Resize with asymmetric coordinates (and floor for nearest), as
    onnxruntime and pyrite read it."""
    a = node["attrs"]
    scales = np.asarray(a["scales"] if "scales" in a else ins[1], np.float32)
    mode = a.get("mode", "nearest")
    rn = dict(op="Resize", ins=["x", "", "s"], outs=["y"], attrs={
        "mode": mode, "coordinate_transformation_mode": "asymmetric",
        **({"nearest_mode": "floor"} if mode == "nearest" else {})})  # fmt: skip
    return run_node(rn, [ins[0], None, scales], 13, True)


def _or_batch_norm(node, ins, opset):
    x, sc, b, m, v = (np.asarray(t, np.float64) for t in ins[:5])
    eps = node["attrs"].get("epsilon", 1e-5)
    view = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - m.reshape(view)) / np.sqrt(v.reshape(view) + eps) * sc.reshape(view)
    return [(y + b.reshape(view)).astype(ins[0].dtype)]


def _or_variadic(node, ins, opset):
    f = {"Sum": np.add, "Mean": np.add, "Max": np.maximum, "Min": np.minimum}[node["op"]]
    out = ins[0]
    for v in ins[1:]:
        out = f(out, v)
    return [out / len(ins) if node["op"] == "Mean" else out]


def _norm_axes(node, rank):
    a = dict(node["attrs"])
    if "axis" in a:
        a["axis"] = a["axis"] % rank
    if "axes" in a:
        a["axes"] = [int(x) % rank for x in a["axes"]]
    return a


def _or_axes(node, ins, opset):
    """The reference run with the axis / axes attributes made non-negative."""
    nd = dict(node, attrs=_norm_axes(node, np.ndim(ins[0])), oracle=None, _ev={})
    return run_node(nd, ins, opset, True)


def _or_gather_elements(node, ins, opset):
    x, idx = np.asarray(ins[0]), np.asarray(ins[1], np.int64)
    ax = node["attrs"].get("axis", 0) % x.ndim
    return [np.take_along_axis(x, np.where(idx < 0, idx + x.shape[ax], idx), axis=ax)]


def _or_squeeze(node, ins, opset):
    axes = _norm_axes(node, np.ndim(ins[0])).get("axes")
    return [np.squeeze(ins[0], axis=None if axes is None else tuple(axes))]


def _or_resize10(node, ins, opset):
    """Resize-10 as onnxruntime runs it (the spec names no coordinate mode; onnx.reference
    reads its scales as roi): asymmetric coordinates; nearest takes floor(x) when the axis
    grows and ceil(x) when it shrinks. Axis by axis (nearest and linear are separable)."""
    mode = node["attrs"].get("mode", "nearest")
    x, scales = ins[0], np.asarray(ins[1], np.float32)
    for ax, sc in enumerate(scales):
        if sc == 1:
            continue
        one = np.ones_like(scales)
        one[ax] = sc
        attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric"}
        if mode == "nearest":
            attrs["nearest_mode"] = "floor" if sc >= 1 else "ceil"
        rn = dict(op="Resize", ins=["x", "", "s"], outs=["y"], attrs=attrs)
        (x,) = run_node(rn, [x, None, one], 13, True)
    return [x]


def _or_shape(node, ins, opset):
    a = node["attrs"]
    return [np.array(np.shape(ins[0])[a.get("start", 0) : a.get("end")], np.int64)]


def _or_global_max_pool(node, ins, opset):
    x = np.asarray(ins[0])
    return [x.max(axis=tuple(range(2, x.ndim)), keepdims=True)]


def _or_unsqueeze(node, ins, opset):
    return [np.expand_dims(ins[0], tuple(node["attrs"]["axes"]))]


def _or_scatter(node, ins, opset):
    return run_node(dict(node, op="ScatterElements", oracle=None, _ev={}), ins, 11, True)


ORACLES = {
    "gather_elements": _or_gather_elements,
    "unsqueeze": _or_unsqueeze,
    "scatter": _or_scatter,
    "shape": _or_shape,
    "batch_norm": _or_batch_norm,
    "variadic": _or_variadic,
    "axes": _or_axes,
    "squeeze": _or_squeeze,
    "resize10": _or_resize10,
    "pool": _or_pool,
    "upsample": _or_upsample,
    "global_max_pool": _or_global_max_pool,
    "softmax_old": _or_softmax_old,
    "lrn": _or_lrn,
    "conv_transpose": _or_conv_transpose,
    "pad": _or_pad,
}


# ---- the case builder -------------------------------------------------------------------------
class Gen(fuzz_driver.Draws):
    def __init__(self, seed):
        super().__init__(seed)
        u = self.rng.random()
        if u < 0.62:
            self.opset = 13 + self.r(9)
        elif u < 0.93:
            self.opset = 7 + self.r(6)
        else:
            self.opset = 2 + self.r(5)
        self.inputs, self.inits, self.nodes = [], [], []
        self.vals: dict = {}
        self.order: list = []  # values a later step may read, oldest first
        self.narrow: set = set()  # float values kept float32 in the wide run (Resize's scales)
        self.special: set = set()  # values holding NaN / inf (read only by IsNaN / IsInf)
        self.ref_errors: list = []
        self.k = 0

    # -- draws --
    def size(self):
        return self.pick(SIZES)

    def shape(self, lo=0, hi=4):
        return tuple(self.size() for _ in range(lo + self.r(hi - lo + 1)))

    def floats(self, shape, style=None):
        style = style or self.pick(("u", "u", "n", "n", "int", "pos"))
        rng = self.rng
        if style == "u":
            a = rng.uniform(-2, 2, shape)
        elif style == "n":
            a = rng.standard_normal(shape)
        elif style == "int":
            a = rng.integers(-4, 5, shape).astype(np.float64)
        elif style == "pos":
            a = rng.uniform(0.25, 3.0, shape)
        elif style == "away":
            a = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            raise ValueError(style)
        return np.asarray(a, np.float32)

    def fresh(self, base="v"):
        self.k += 1
        return f"{base}{self.k}"

    # -- values --
    def _value(self, name, arr, readable=True, narrow=False):
        self.vals[name] = _widen(arr, narrow)
        if narrow:
            self.narrow.add(name)
        if readable:
            self.order.append(name)

    def src(self, arr, how=None, readable=True, narrow=False):
        """A new value holding arr: a graph input, an initializer or a Constant node."""
        arr = np.asarray(arr)
        if how is None:
            how = self.pick(("input", "input", "input", "init", "const"))
        name = self.fresh("in" if how == "input" else "k")
        if how == "input":
            self.inputs.append((name, arr))
        elif how == "init":
            self.inits.append((name, arr))
        else:
            node = dict(op="Constant", ins=[], outs=[name], err=None, attrs={"value": arr})
            self.nodes.append(node)
        self._value(name, arr, readable, narrow)
        return name

    def fsrc(self, shape, style=None, how=None, readable=True):
        return self.src(self.floats(shape, style), how, readable)

    def ints(self, vals, how=None):
        """An int64 constant (an initializer mostly: a host constant in pyrite)."""
        how = how or self.pick(("init", "init", "init", "const", "input"))
        return self.src(np.asarray(vals, np.int64), how, readable=False)

    def kind_of(self, name):
        """f (float32; float64 in the wide run), i (int64), b (bool), or the dtype's name for
        the others (float16, int8... from Cast: read by no later step, whose types must match)."""
        v = self.vals[name]
        if name in self.narrow or v.dtype not in (np.float64, np.int64, np.bool_):
            return str(v.dtype)
        return _kind(v)

    def shape_of(self, name):
        return tuple(np.shape(self.vals[name]))

    def x(self, kind="f", pred=None, make=None):
        """A value to read: an earlier one (the latest most often), or a new one."""
        cands = [
            n
            for n in self.order
            if n not in self.special
            and self.kind_of(n) == kind
            and np.size(self.vals[n]) > 0
            and (pred is None or pred(self.shape_of(n)))
        ]
        if cands and not self.chance(0.12):
            if self.chance(0.65):
                return cands[-1]
            return self.pick(cands)
        shape = make() if make is not None else self.shape()
        if pred is not None and not pred(shape):
            raise Reject("no input of the shape wanted")
        if kind == "f":
            return self.fsrc(shape)
        if kind == "b":
            return self.src(self.rng.random(shape) < 0.5, "input")
        return self.src(self.rng.integers(-6, 7, shape).astype(np.int64), "input")

    def add(self, op, ins, attrs=None, n_out=1, err=None, oracle=None, outs=None):
        """Append a node, run it through the reference (or its oracle), check its values."""
        outs = outs if outs is not None else [self.fresh() for _ in range(n_out)]
        attrs = {k: v for k, v in (attrs or {}).items() if v is not None}
        node = dict(op=op, ins=list(ins), outs=outs, attrs=attrs, err=err, oracle=oracle)
        vals = [self.vals[i] if i else None for i in ins]
        if oracle is not None:
            try:
                res = run_node(node, vals, self.opset, True)
            except Exception as e:  # noqa: BLE001 (tallied: a harness error to fix)
                raise RefError(f"the oracle of {op}: {type(e).__name__}: {str(e)[:200]}") from e
            try:  # (the oracle stands where the reference raises or differs from it)
                ref = run_node(node, vals, self.opset, True, oracle_ok=False)
                if _same(ref, res):
                    node["oracle"] = None
            except Exception as e:  # noqa: BLE001
                node["oracle"] = (oracle[0], f"{oracle[1]} (it raises {type(e).__name__})")
        else:
            try:
                res = run_node(node, vals, self.opset, True)
            except Exception as e:  # noqa: BLE001 (the reference's failures are tallied)
                raise RefError(f"{op}: {type(e).__name__}: {str(e)[:200]}") from e
        for o, v in zip(outs, res):
            if not o:
                continue
            if v.dtype.kind == "f" and v.size:
                fin = np.isfinite(v)
                if not fin.all() or np.abs(v.astype(np.float64)).max() > 1e5:
                    raise Reject(f"{op} gives values out of range")
                tiny = (v != 0) & (np.abs(v) < 1e-30)
                if tiny.any():
                    raise Reject(f"{op} gives subnormal values")
            if v.dtype.kind in "iu" and v.size and np.abs(v).max() > 2**31 - 1:
                raise Reject(f"{op} gives int values past int32")
        self.nodes.append(node)
        for o, v in zip(outs, res):
            if o:
                self._value(o, v, readable=v.ndim <= 6)
        return outs if n_out > 1 or len(outs) > 1 else outs[0]

    # -- the build --
    def build(self):
        steps = 1 + self.r(6)
        tries = 0
        while sum(1 for n in self.nodes if n.get("step")) < steps and tries < 60:
            tries += 1
            gens = [g for g in GENERATORS if g[1] <= self.opset <= g[2]]
            w = np.array([g[3] for g in gens], np.float64)
            g = gens[int(self.rng.choice(len(gens), p=w / w.sum()))]
            snap = (len(self.inputs), len(self.inits), len(self.nodes), list(self.order),
                    dict(self.vals), set(self.narrow), set(self.special), self.k)  # fmt: skip
            try:
                g[0](self)
                self.nodes[-1]["step"] = True
            except (Reject, RefError) as e:
                if isinstance(e, RefError):
                    self.ref_errors.append(str(e))
                (ni, nk, nn, self.order, self.vals, self.narrow, self.special, self.k) = snap
                del self.inputs[ni:], self.inits[nk:], self.nodes[nn:]
        return self.finish()

    def finish(self):
        nodes = [
            helper.make_node(n["op"], n["ins"], n["outs"], name=f"n{i}_{n['op']}",
                             **_proto_attrs(n["attrs"]))
            for i, n in enumerate(self.nodes)
        ]  # fmt: skip
        inputs = [helper.make_tensor_value_info(nm, _elem(a), a.shape) for nm, a in self.inputs]
        inits = [numpy_helper.from_array(a, nm) for nm, a in self.inits]
        out_names = [o for n in self.nodes if n["op"] != "Constant" for o in n["outs"] if o]
        outputs = [helper.make_empty_tensor_value_info(o) for o in out_names]
        g = helper.make_graph(nodes, f"fuzz{self.seed}", inputs, outputs, inits)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
            types = {vi.name: vi.type for vi in inferred.graph.value_info}
        except Exception:  # noqa: BLE001 (the types are only declared where known)
            types = {}
        del model.graph.output[:]
        for o in out_names:
            if o in types and types[o].tensor_type.elem_type:
                elem = types[o].tensor_type.elem_type
            else:
                v = self.vals[o]
                elem = TP.FLOAT if v.dtype == np.float64 else _elem(v)
            model.graph.output.append(
                helper.make_tensor_value_info(o, elem, np.shape(self.vals[o]))
            )
        return dict(seed=self.seed, opset=self.opset, inputs=self.inputs, inits=self.inits,
                    nodes=self.nodes, vals=self.vals, narrow=self.narrow, outputs=out_names,
                    model=model.SerializeToString(), ref_errors=self.ref_errors)  # fmt: skip


# ---- error budgets ------------------------------------------------------------------------------
def _float_ins(ins, narrow_names, names):
    return [
        v is not None and np.asarray(v).dtype.kind == "f" and nm not in narrow_names
        for v, nm in zip(ins, names)
    ]


def budgets(case, node, ins, outs, rng):
    """Per output, the array a trial perturbs it by (times a draw in [-1, 1]), or None."""
    err = node.get("err")
    if err is None:
        return [None] * len(outs)
    kind, k = err[0], float(err[1])
    fl = _float_ins(ins, case["narrow"], node["ins"])
    res = []
    if kind == "lin":
        abs_ins = [np.abs(v) if f else v for v, f in zip(ins, fl)]
        attrs = node["attrs"]
        nd = dict(node, attrs={**attrs, **{a: abs(attrs[a]) for a in ("alpha", "beta")
                                          if a in attrs}}, _ev={})  # fmt: skip
        absout = run_node(nd, abs_ins, case["opset"], True)
        for o, a in zip(outs, absout):
            if o is None or o.dtype.kind != "f":
                res.append(None)
            else:
                res.append(k * U * (np.abs(a) + np.abs(o)))
        return res
    sens = [np.zeros(np.shape(o)) if o is not None else None for o in outs]
    if kind == "cond" and any(fl):
        for _ in range(2):
            moved = [
                v * (1 + k * U * rng.uniform(-1, 1, np.shape(v))) if f else v
                for v, f in zip(ins, fl)
            ]
            try:
                outs2 = run_node(node, moved, case["opset"], True)
            except Exception:  # noqa: BLE001
                continue
            for i, (o, o2) in enumerate(zip(outs, outs2)):
                if o is not None and o.dtype.kind == "f" and np.shape(o2) == np.shape(o):
                    with np.errstate(all="ignore"):
                        d = np.abs(np.asarray(o2, np.float64) - o)
                    sens[i] = np.maximum(sens[i], np.where(np.isfinite(d), d, 0))
    for o, s in zip(outs, sens):
        if o is None or o.dtype.kind != "f" or not o.size:
            res.append(None)
            continue
        scale = np.abs(o).max()
        if kind == "rel":
            res.append(k * U * np.abs(o))
        else:
            res.append(2 * s + k * U * (np.abs(o) + scale))
    return res


def evaluate(case, trial=None):
    """All values of the graph by the reference in float64; `trial`: (budgets, seed, sign) to
    move each node's outputs by sign * xi * budget, xi = +-[0.5, 1] drawn from seed (a trial
    and its mirror, sign -1, move every output the other way: a value that sits within its
    budget of a threshold crosses it in one of the two)."""
    env = {nm: _widen(a) for nm, a in list(case["inputs"]) + list(case["inits"])}
    rng = np.random.default_rng(trial[1]) if trial is not None else None
    for node in case["nodes"]:
        ins = [env[i] if i else None for i in node["ins"]]
        narrow = [i in case["narrow"] for i in node["ins"]]
        ins = [v if v is None or nw else _widen(v) for v, nw in zip(ins, narrow)]
        outs = run_node(node, ins, case["opset"], True)
        if trial is not None:
            bud, sign = trial[0], trial[2]
            moved = []
            for o, b in zip(outs, bud.get(id(node), [None] * len(outs))):
                if b is not None and o is not None:
                    xi = rng.uniform(0.5, 1, np.shape(o)) * rng.choice([-1.0, 1.0], np.shape(o))
                    o = o + sign * b * xi
                moved.append(o)
            outs = moved
        for o, v in zip(node["outs"], outs):
            if o:
                env[o] = v
    return env


# ---- the check ----------------------------------------------------------------------------------
def _first_clause(msg):
    return str(msg).split("\n")[0][:300]


def _pyrite_outputs(case):
    m = load_model(case["model"])
    feeds = []
    for _, a in case["inputs"]:
        feeds.append(pr.tensor(a) if a.dtype.kind in "fb" else a)
    outs = m(*feeds)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [o.detach().numpy() for o in outs]


def _node_of(case, name):
    for i, n in enumerate(case["nodes"]):
        if name in n["outs"]:
            return i, n
    return -1, None


_TIE_OPS = ("ArgMax", "ArgMin", "Hardmax", "TopK")


def check(case):
    try:
        onnx.checker.check_model(onnx.load_from_string(case["model"]))
    except Exception as e:  # noqa: BLE001
        # (the checker calls GroupNormalization-18 deprecated at opset 18-20; pyrite takes it)
        if "GroupNormalization is deprecated" not in str(e):
            return "fail", f"harness: the model is invalid: {_first_clause(e)}"
    if not case["outputs"]:
        return "skip", "no node drawn"
    ref = case["vals"]
    rng = np.random.default_rng(case["seed"] + 7919)
    bud = {}
    for node in case["nodes"]:
        ins = [ref[i] if i else None for i in node["ins"]]
        outs = [ref[o] if o else None for o in node["outs"]]
        bud[id(node)] = budgets(case, node, ins, outs, rng)
    # (a pair never makes the middle element of a three-way near-tie the largest: four pairs
    # where an arg-max-like op reads values)
    pairs = 4 if any(n["op"] in _TIE_OPS for n in case["nodes"]) else 2
    trials = [
        evaluate(case, (bud, case["seed"] * 8 + k, sign)) for k in range(pairs) for sign in (1, -1)
    ]
    try:
        got = _pyrite_outputs(case)
    except UnsupportedOperatorError as e:
        m = re.search(r"op '(\w+)' \(node [^)]*\)(?: with (.*) is not supported)?", str(e))
        what = f"{m.group(1)} with {m.group(2)}" if m and m.group(2) else _first_clause(e)
        return "skip", f"pyrite refuses {what}"
    except OnnxImportError as e:
        if "do not fit in int32" in str(e):
            return "skip", "pyrite refuses an int64 value outside int32 (documented)"
        return "fail", f"pyrite raises OnnxImportError: {_first_clause(e)}"
    except Exception as e:  # noqa: BLE001
        return "fail", f"pyrite raises {type(e).__name__}: {_first_clause(e)}"
    if len(got) != len(case["outputs"]):
        return "fail", f"{len(got)} outputs, want {len(case['outputs'])}"
    fragile = 0
    for name, g in zip(case["outputs"], got):
        i, node = _node_of(case, name)
        where = f"output {name} of node {i} ({node['op']})"
        w = np.asarray(ref[name])
        if g.shape != w.shape:
            shapes = {np.shape(t[name]) for t in trials}
            if len(shapes) > 1:
                return "known", f"a rounding tie decides the shape of {where}"
            return "fail", f"{where}: shape {g.shape}, want {w.shape}"
        if _kind(g) != _kind(w):
            return "fail", f"{where}: dtype {g.dtype}, want {w.dtype}"
        others = [t[name] for t in trials]
        others = [np.asarray(o) for o in others if np.shape(o) == w.shape]
        if w.dtype.kind != "f":
            moved = np.zeros(w.shape, bool)
            for o in others:
                moved |= o.astype(w.dtype) != w
            bad = (g.astype(np.int64) != w.astype(np.int64)) & ~moved
            fragile += int(moved.sum())
            if bad.any():
                j = np.argwhere(bad)[0]
                return "fail", (
                    f"{where}: {int(bad.sum())} of {w.size} differ, first at {tuple(j)}: "
                    f"pyrite {g[tuple(j)]}, want {w[tuple(j)]}"
                )
            continue
        w64 = w.astype(np.float64)
        tol = 4 * U * np.abs(w64) + TINY
        with np.errstate(all="ignore"):
            for o in others:
                d = np.abs(o.astype(np.float64) - w64)
                tol = tol + 4 * np.where(np.isfinite(d), d, 0)
            err = np.abs(g.astype(np.float64) - w64)
        same_nan = np.isnan(g) & np.isnan(w64)
        bad = ~(err <= tol) & ~same_nan & ~(g.astype(np.float64) == w64)
        if w.size and not bad.any():
            ratio = float(np.max(np.where(same_nan, 0, err / tol)))
            WORST[node["op"]] = max(WORST.get(node["op"], 0.0), ratio)
        if bad.any():
            j = tuple(np.argwhere(bad)[0])
            worst = tuple(np.unravel_index(np.argmax(np.where(bad, err / tol, 0)), w.shape))
            return "fail", (
                f"{where}: {int(bad.sum())} of {w.size} off, e.g. at {j}: pyrite "
                f"{float(g[j])!r}, want {float(w64[j])!r} (tol {float(tol[j]):.3g}); worst "
                f"err/tol {float(err[worst] / tol[worst]):.3g}"
            )
    known = [n["oracle"][1] for n in case["nodes"] if n.get("oracle")]
    if case["ref_errors"]:
        return "known", f"onnx.reference raises on {case['ref_errors'][0]}"
    if known:
        return "known", f"{known[0]}; pyrite agrees with the oracle"
    return "ok", f"{fragile} tie-decided elements" if fragile else ""


def _short(a):
    a = np.asarray(a)
    if a.size <= 8:
        return np.array2string(a.reshape(-1), precision=4, separator=",")
    return f"{a.dtype}{list(a.shape)}"


def describe(case) -> str:
    lines = [f"# seed {case['seed']}: opset {case['opset']}"]
    for nm, a in case["inputs"]:
        lines.append(f"  input {nm}: {a.dtype} {list(a.shape)} {_short(a) if a.size <= 8 else ''}")
    for nm, a in case["inits"]:
        lines.append(f"  init  {nm}: {a.dtype} {list(a.shape)} {_short(a)}")
    for i, n in enumerate(case["nodes"]):
        attrs = {k: (_short(v) if isinstance(v, np.ndarray) else v) for k, v in n["attrs"].items()}
        outs = ", ".join(f"{o}{list(np.shape(case['vals'][o]))}" if o else "_" for o in n["outs"])
        extra = f"  [oracle: {n['oracle'][0]}]" if n.get("oracle") else ""
        lines.append(f"  n{i}: {outs} = {n['op']}({', '.join(n['ins'])}) {attrs}{extra}")
    if case["ref_errors"]:
        lines.append(f"  (reference errors while drawing: {case['ref_errors']})")
    return "\n".join(lines)


# ---- the generators -----------------------------------------------------------------------------
GENERATORS = []


def gen(since=1, until=99, weight=1.0):
    def deco(f):
        GENERATORS.append((f, since, until, weight))
        return f

    return deco


def _const(g, v, how=None):
    """A float constant (0-d, or shaped) as a Constant node or initializer."""
    return g.src(np.asarray(v, np.float32), how or g.pick(("const", "init")), readable=False)


def _pow2_scale(g, x, bound):
    """x scaled by a power of two (exact) so that max|x| <= bound."""
    m = float(np.abs(g.vals[x]).max()) if np.size(g.vals[x]) else 0.0
    if m <= bound:
        return x
    c = 2.0 ** -math.ceil(math.log2(m / bound))
    return g.add("Mul", [x, _const(g, c)], err=None)


def _positive(g, x, lo=0.5):
    a = g.add("Abs", [x])
    return g.add("Add", [a, _const(g, lo)], err=("cond", 2))


_UNARY = {
    # op: (since, domain, err)
    "Abs": (6, None, None), "Neg": (6, None, None), "Relu": (6, None, None),
    "Floor": (6, None, None), "Ceil": (6, None, None), "Round": (11, None, None),
    "Sign": (9, None, None), "Sqrt": (6, "pos0", ("cond", 4)), "Exp": (6, "exp", ("cond", 8)),
    "Log": (6, "pos", ("cond", 8)), "Reciprocal": (6, "pos", ("cond", 4)),
    "Sin": (7, "trig", ("cond", 8)), "Cos": (7, "trig", ("cond", 8)),
    "Tan": (7, "tan", ("cond", 8)), "Asin": (7, "unit", ("cond", 8)),
    "Acos": (7, "unit", ("cond", 8)), "Atan": (7, None, ("cond", 8)),
    "Sinh": (9, "exp", ("cond", 8)), "Cosh": (9, "exp", ("cond", 8)),
    "Asinh": (9, None, ("cond", 8)), "Acosh": (9, "ge1", ("cond", 8)),
    "Atanh": (9, "unit", ("cond", 8)), "Erf": (9, None, ("cond", 8)),
    "Sigmoid": (6, None, ("cond", 8)), "Tanh": (6, None, ("cond", 8)),
    "Softplus": (1, "exp", ("cond", 8)), "Softsign": (1, None, ("cond", 4)),
    "Mish": (18, "exp", ("cond", 16)), "HardSwish": (14, None, ("cond", 4)),
    "LeakyRelu": (6, None, ("cond", 2)), "Elu": (6, None, ("cond", 8)),
    "Celu": (12, None, ("cond", 8)), "Selu": (6, None, ("cond", 8)),
    "ThresholdedRelu": (10, None, None), "HardSigmoid": (6, None, ("cond", 4)),
    "Shrink": (9, None, ("cond", 2)), "Gelu": (20, None, ("cond", 16)),
}  # fmt: skip


def _f32(v):
    return float(np.float32(v))


def _unary_attrs(g, op):
    a = {}
    if op == "LeakyRelu" and g.chance(0.7):
        a["alpha"] = _f32(g.pick((0.01, 0.1, 0.3, 1.5, -0.2)))
    elif op in ("Elu", "Celu") and g.chance(0.7):
        a["alpha"] = _f32(g.pick((0.5, 1.0, 1.7, 0.1)))
    elif op == "Selu" and g.chance(0.5):
        a["alpha"], a["gamma"] = _f32(g.rng.uniform(0.5, 2)), _f32(g.rng.uniform(0.5, 2))
    elif op == "ThresholdedRelu" and g.chance(0.7):
        a["alpha"] = _f32(g.pick((0.0, 0.5, 1.0, -1.0, 2.0)))
    elif op == "HardSigmoid" and g.chance(0.7):
        a["alpha"], a["beta"] = _f32(g.rng.uniform(0.05, 1)), _f32(g.rng.uniform(-0.5, 1))
    elif op == "Shrink" and g.chance(0.7):
        a["lambd"], a["bias"] = _f32(g.pick((0.0, 0.5, 1.0))), _f32(g.pick((0.0, 0.2, 1.5)))
    elif op == "Gelu" and g.chance(0.5):
        a["approximate"] = g.pick(("none", "tanh"))
    return a


@gen(1, 99, 6.0)
def g_unary(g):
    ops = [op for op, s in _UNARY.items() if s[0] <= g.opset]
    op = g.pick(ops)
    _, dom, err = _UNARY[op]
    x = g.x()
    if dom == "pos":
        x = _positive(g, x, g.pick((0.25, 0.5, 1.0)))
    elif dom == "pos0":
        x = g.add("Abs", [x])
    elif dom == "exp":
        x = _pow2_scale(g, x, 8.0)
    elif dom == "trig":
        x = _pow2_scale(g, x, 16.0)
    elif dom == "tan":
        x = _pow2_scale(g, x, 1.25)
    elif dom == "unit":
        t = g.add("Tanh", [x], err=("cond", 8))
        x = g.add("Mul", [t, _const(g, 0.875)], err=("cond", 2))
    elif dom == "ge1":
        x = _positive(g, x, 1.0)
    g.add(op, [x], _unary_attrs(g, op), err=err)


@gen(9, 99, 0.6)
def g_isnan_isinf(g):
    shape = g.shape(1, 3)
    a = g.floats(shape)
    mask = g.rng.random(shape)
    a[mask < 0.2] = np.nan
    a[(mask >= 0.2) & (mask < 0.3)] = np.inf
    a[(mask >= 0.3) & (mask < 0.4)] = -np.inf
    x = g.src(a, g.pick(("input", "input", "const")), readable=False)
    g.special.add(x)
    if g.opset >= 10 and g.chance(0.6):
        attrs = {}
        if g.chance(0.5):
            attrs["detect_positive"] = g.r(2)
        if g.chance(0.5):
            attrs["detect_negative"] = g.r(2)
        g.add("IsInf", [x], attrs)
    else:
        g.add("IsNaN", [x])


def _broadcast_partner(g, shape):
    """A shape that broadcasts with `shape` (either way)."""
    s = list(shape)
    u = g.r(4)
    if u == 0 and s:  # drop leading dims
        s = s[g.r(len(s) + 1) :]
    elif u == 1:  # ones here and there
        s = [1 if g.chance(0.4) else n for n in s]
    elif u == 2 and len(s) < 5:  # a longer one: x broadcasts
        s = [g.size() for _ in range(1 + g.r(2))] + [n if n != 1 else g.size() for n in s]
    return tuple(s)


def _operand(g, x, style=None, shape=None):
    """A second operand broadcasting with x (or with `shape`): an earlier value, or a new one."""
    sx = g.shape_of(x) if shape is None else shape
    if style is None and g.chance(0.3):
        cands = [
            n
            for n in g.order
            if n != x and g.kind_of(n) == "f" and n not in g.special and np.size(g.vals[n])
        ]
        ok = []
        for n in cands:
            try:
                np.broadcast_shapes(sx, g.shape_of(n))
                ok.append(n)
            except ValueError:
                pass
        if ok:
            return g.pick(ok)
    shape = () if g.chance(0.15) else _broadcast_partner(g, sx)
    return g.fsrc(shape, style, g.pick(("input", "input", "init", "const")))


@gen(7, 99, 5.0)
def g_binary(g):
    op = g.pick(("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Add", "Mul", "Sub"))
    if op in ("Max", "Min") and g.opset < 8:
        op = "Add"
    if op == "Mod" and g.opset < 10:
        op = "Sub"
    if op in ("Add", "Sub", "Mul", "Div") and g.chance(0.15):  # integers (Div truncates)
        shape = g.shape(0, 3)
        a = g.src(g.rng.integers(-30, 31, shape).astype(np.int64))
        s2 = _broadcast_partner(g, shape)
        bv = g.rng.integers(-30, 31, s2) if op != "Div" else g.rng.choice([-7, -3, -2, 2, 5], s2)
        b = g.src(np.asarray(bv, np.int64))
        g.add(op, [a, b] if g.chance(0.5) or op == "Div" else [b, a])
        return
    x = g.x()
    if op == "Div":
        b = _operand(g, x, "away") if g.chance(0.7) else _positive(g, _operand(g, x))
        if g.chance(0.3):
            x, b = b, x
            x = _positive(g, x) if g.chance(0.5) else x
            b = _positive(g, b)
        g.add("Div", [x, b], err=("cond", 4))
    elif op == "Pow":
        if g.chance(0.5):  # an integer exponent: any base
            edt = np.int64 if g.opset >= 12 and g.chance(0.4) else np.float32
            e = g.src(np.asarray(g.rng.integers(-2, 4, _broadcast_partner(g, g.shape_of(x))
                                                if g.chance(0.5) else ()), edt),
                      g.pick(("init", "const", "input")), readable=False)  # fmt: skip
            x = _pow2_scale(g, x, 4.0)
            if np.any(g.vals[e] < 0):
                x = _positive(g, x)
        else:
            x = _pow2_scale(g, _positive(g, x, 0.25), 4.0)
            e = _operand(g, x, "u")
        g.add("Pow", [x, e], err=("cond", 16))
    elif op == "Mod":
        if g.chance(0.6):
            b = _operand(g, x, "away")
            g.add("Mod", [x, b], {"fmod": 1}, err=("cond", 4))
        else:  # integers
            shape = g.shape(0, 3)
            a = g.src(g.rng.integers(-20, 21, shape).astype(np.int64))
            b = g.src(np.asarray(g.rng.choice([-7, -3, -2, 2, 3, 5], _broadcast_partner(g, shape)),
                                 np.int64))  # fmt: skip
            g.add("Mod", [a, b], {"fmod": g.r(2)})
    elif op in ("Max", "Min") and g.chance(0.4):
        g.add(op, _operands(g, x), oracle=_VARIADIC_ORACLE)
    else:
        b = _operand(g, x)
        if g.chance(0.3):
            x, b = b, x
        g.add(op, [x, b], err=None if op in ("Max", "Min") else ("cond", 2))


def _operands(g, x):
    """x and 0-2 more operands, all broadcasting together."""
    ins, shape = [x], g.shape_of(x)
    for _ in range(g.r(3)):
        ins.append(_operand(g, x, shape=shape))
        shape = np.broadcast_shapes(shape, g.shape_of(ins[-1]))
    return ins


@gen(8, 99, 1.0)
def g_variadic(g):
    op = g.pick(("Sum", "Mean", "Max", "Min"))
    ins = _operands(g, g.x())
    g.add(
        op,
        ins,
        err=("lin", 2 * len(ins)) if op in ("Sum", "Mean") else None,
        oracle=_VARIADIC_ORACLE,
    )


_VARIADIC_ORACLE = (
    "variadic",
    "onnx.reference's variadic ops accumulate into the first input "
    "(a smaller first input fails to broadcast)",
)


@gen(9, 99, 1.0)
def g_prelu(g):
    x = g.x(pred=lambda s: len(s) >= 1)
    sx = g.shape_of(x)
    k = 1 + g.r(len(sx))
    slope_shape = tuple(1 if g.chance(0.3) else n for n in sx[-k:])
    if g.chance(0.3) and len(sx) >= 2:  # the channel form: (C, 1, 1)
        slope_shape = (sx[1],) + (1,) * (len(sx) - 2)
    s = g.fsrc(slope_shape, "u", g.pick(("init", "input")), readable=False)
    g.add("PRelu", [x, s], err=("cond", 2))


@gen(7, 99, 2.0)
def g_compare_where(g):
    ops = ["Less", "Greater"] + (["LessOrEqual", "GreaterOrEqual"] if g.opset >= 12 else [])
    ops += ["Equal"] if g.opset >= 11 else []
    op = g.pick(ops)
    x = g.x()
    b = _operand(g, x, "int" if op == "Equal" or g.chance(0.3) else None)
    if op == "Equal" or g.chance(0.3):
        x = g.add("Round" if g.opset >= 11 else "Floor", [x])
    if g.chance(0.3):
        x, b = b, x
    c = g.add(op, [x, b])
    if g.opset >= 9 and g.chance(0.7):
        y = _operand(g, c)
        ins = [c, x, y] if g.chance(0.5) else [c, y, x]
        g.add("Where", ins)


@gen(7, 99, 0.8)
def g_logical(g):
    op = g.pick(("And", "Or", "Xor", "Not"))
    a = g.x("b")
    if op == "Not":
        g.add("Not", [a])
        return
    s = _broadcast_partner(g, g.shape_of(a))
    b = g.src(g.rng.random(s) < 0.5, g.pick(("input", "init", "const")))
    g.add(op, [a, b] if g.chance(0.5) else [b, a])


@gen(18, 99, 0.5)
def g_bitwise(g):
    op = g.pick(("BitwiseAnd", "BitwiseOr", "BitwiseXor"))
    dt = g.pick((np.int64, np.int32))
    shape = g.shape(0, 3)
    a = g.src(g.rng.integers(-100, 100, shape).astype(dt))
    b = g.src(g.rng.integers(-100, 100, _broadcast_partner(g, shape)).astype(dt))
    g.add(op, [a, b])


@gen(6, 99, 1.5)
def g_clip(g):
    x = g.x()
    lo = _f32(g.rng.uniform(-1.5, 0.5)) if g.chance(0.8) else None
    hi = _f32(g.rng.uniform(-0.5, 1.5)) if g.chance(0.8) else None
    if g.opset < 11:
        attrs = {}
        if lo is not None:
            attrs["min"] = lo
        if hi is not None:
            attrs["max"] = hi
        g.add("Clip", [x], attrs)
        return
    if g.opset >= 12 and g.chance(0.2):  # integers
        x = g.src(g.rng.integers(-9, 10, g.shape(0, 3)).astype(np.int64))
        lo = None if lo is None else int(lo * 4)
        hi = None if hi is None else int(hi * 4)
        mk = lambda v: g.src(np.asarray(v, np.int64), g.pick(("init", "const")), False)  # noqa: E731
    else:
        mk = lambda v: _const(g, v)  # noqa: E731
    ins = [x, mk(lo) if lo is not None else "", mk(hi) if hi is not None else ""]
    while ins and ins[-1] == "":
        ins.pop()
    g.add("Clip", ins)


_CAST_TO = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.INT64: np.int64, TP.INT32: np.int32,
            TP.BOOL: np.bool_, TP.FLOAT16: np.float16, TP.INT8: np.int8, TP.UINT8: np.uint8,
            TP.INT16: np.int16}  # fmt: skip


@gen(6, 99, 1.5)
def g_cast(g):
    src_kind = g.pick(("f", "f", "f", "i", "b"))
    x = g.x(src_kind)
    to = g.pick(list(_CAST_TO))
    v = g.vals[x]
    if to in (TP.INT8, TP.INT16, TP.UINT8, TP.INT32, TP.INT64) and v.dtype.kind == "f":
        lim = {TP.INT8: (-128, 127), TP.UINT8: (0, 255), TP.INT16: (-32768, 32767)}
        lo, hi = lim.get(to, (-(2**31), 2**31 - 1))
        if v.size and (v.min() <= lo - 1 or v.max() >= hi + 1):
            raise Reject("cast out of range")
    if to == TP.UINT8 and v.dtype.kind in "iu" and v.size and v.min() < 0:
        raise Reject("negative to uint8")
    if to == TP.FLOAT16:
        h = g.add("Cast", [x], {"to": to})
        g.add("Cast", [h], {"to": TP.FLOAT})
        return
    if g.opset >= 15 and g.chance(0.25):
        like = g.src(np.zeros((1,), _CAST_TO[to]), g.pick(("init", "const", "input")), False)
        y = g.add("CastLike", [x, like])
    else:
        y = g.add("Cast", [x], {"to": to})
    if to == TP.DOUBLE:  # (a double: no later step may mix it with floats)
        g.order.remove(y)


# -- reductions --
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")  # fmt: skip


def _axes_subset(g, r, neg=True, nonempty=True):
    ax = [a for a in range(r) if g.chance(0.5)]
    if nonempty and not ax and r:
        ax = [g.r(r)]
    if neg:
        ax = [a - r if g.chance(0.4) else a for a in ax]
    g.rng.shuffle(ax)
    return [int(a) for a in ax]


@gen(1, 99, 3.0)
def g_reduce(g):
    op = g.pick(_REDUCE)
    x = g.x(pred=lambda s: len(s) >= 1 or g.chance(0.2))
    r = len(g.shape_of(x))
    if op == "ReduceLogSum":
        x = _positive(g, x, 0.25)
    elif op == "ReduceProd":
        x = _pow2_scale(g, x, 2.0)
    elif op == "ReduceLogSumExp":
        x = _pow2_scale(g, x, 16.0)
    attrs = {}
    if g.chance(0.7):
        attrs["keepdims"] = g.r(2)
    input_form = g.opset >= (13 if op == "ReduceSum" else 18)
    u = g.r(10)
    ins = [x]
    if u < 7:
        axes = _axes_subset(g, r, neg=g.opset >= 11)
        if input_form:
            ins.append(g.ints(axes))
        elif axes:
            attrs["axes"] = axes
    elif u < 9 and input_form:  # empty axes: all, or none with noop_with_empty_axes
        ins.append(g.ints(np.zeros(0, np.int64), g.pick(("init", "const"))))
        if g.chance(0.5):
            attrs["noop_with_empty_axes"] = 1
    elif input_form and g.chance(0.5):
        attrs["noop_with_empty_axes"] = g.r(2)
    shape = g.shape_of(x)
    raxes = attrs.get("axes") or (g.vals[ins[1]].tolist() if len(ins) > 1 else [])
    if not raxes and not attrs.get("noop_with_empty_axes"):
        raxes = list(range(r))
    n = int(np.prod([shape[a] for a in raxes], dtype=np.int64)) if raxes else 1
    errs = {
        "ReduceSum": ("lin", 2 * n), "ReduceMean": ("lin", 2 * n + 2),
        "ReduceL1": ("lin", 2 * n), "ReduceSumSquare": ("lin", 2 * n + 2),
        "ReduceL2": ("cond", n + 4), "ReduceProd": ("rel", 2 * n + 2),
        "ReduceLogSum": ("cond", n + 8), "ReduceLogSumExp": ("cond", n + 8),
    }  # fmt: skip
    g.add(op, ins, attrs, err=errs.get(op))


@gen(1, 99, 1.5)
def g_argmax(g):
    op = g.pick(("ArgMax", "ArgMin"))
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    if g.chance(0.3):
        x = g.add("Floor", [x])
    r = len(g.shape_of(x))
    attrs = {}
    if g.chance(0.8):
        attrs["axis"] = g.r(r) - (r if g.opset >= 11 and g.chance(0.4) else 0)
    if g.chance(0.6):
        attrs["keepdims"] = g.r(2)
    if g.opset >= 12 and g.chance(0.6):
        attrs["select_last_index"] = g.r(2)
    g.add(op, [x], attrs)


# -- products --
@gen(1, 99, 2.5)
def g_matmul(g):
    x = g.x(pred=lambda s: 1 <= len(s) <= 4)
    sx = g.shape_of(x)
    left = g.chance(0.7)
    if left:  # x @ B
        k = sx[-1]
        u = g.r(4)
        if u == 0:
            sb = (k,)
        elif u == 1:
            sb = (k, g.size())
        else:
            batch = tuple(1 if g.chance(0.3) else n for n in sx[:-2])
            if g.chance(0.3):
                batch = (g.size(),) + batch
            sb = batch + (k, g.size())
        b = g.fsrc(sb, None, g.pick(("input", "init", "init")))
        ins = [x, b]
    else:  # A @ x
        k = sx[-2] if len(sx) >= 2 else sx[0]
        batch = tuple(1 if g.chance(0.3) else n for n in sx[:-2][g.r(max(len(sx) - 1, 1)) :])
        sa = (k,) if g.chance(0.3) else batch + (g.size(), k)
        a = g.fsrc(sa, None, g.pick(("input", "init")))
        ins = [a, x]
    g.add("MatMul", ins, err=("lin", 2 * k + 2))


@gen(7, 99, 1.5)
def g_gemm(g):
    x = g.x(pred=lambda s: len(s) == 2)
    ta, tb = g.r(2), g.r(2)
    sx = g.shape_of(x)
    if g.chance(0.6):  # x is A
        m, k = sx[::-1] if ta else sx
        n = g.size()
        a, b = x, g.fsrc((n, k) if tb else (k, n), None, g.pick(("init", "input")))
    else:
        k, n = sx[::-1] if tb else sx
        m = g.size()
        b, a = x, g.fsrc((k, m) if ta else (m, k), None, g.pick(("init", "input")))
    attrs = {"transA": ta or None, "transB": tb or None}
    if g.chance(0.5):
        attrs["alpha"] = _f32(g.pick((0.5, 2.0, -1.0, 0.0, 0.3)))
    if g.chance(0.5):
        attrs["beta"] = _f32(g.pick((0.5, 2.0, -1.0, 0.0, 0.3)))
    ins = [a, b]
    if g.opset < 11 or g.chance(0.75):
        sc = g.pick(((), (n,), (1, n), (m, 1), (m, n), (1, 1)))
        ins.append(g.fsrc(sc, None, g.pick(("init", "input", "const"))))
    g.add("Gemm", ins, attrs, err=("lin", 2 * k + 4))


_EINSUM = [
    ("ij->ji", 2, None, 1), ("ij->i", 2, None, 0), ("ij->", 2, None, 0),
    ("ii->i", 2, None, 1), ("...ij->...ji", 3, None, 1), ("bij->bji", 3, None, 1),
    ("ijk->ikj", 3, None, 1), ("ij,jk->ik", 2, "jk", 0), ("bij,bjk->bik", 3, "bjk", 0),
    ("i,i->", 1, "i", 0), ("i,j->ij", 1, "j", 0), ("ij,ij->ij", 2, "ij", 0),
    ("...ij,...jk->...ik", 3, "...jk", 0), ("ij,kj->ik", 2, "kj", 0),
    ("ijk,ik->ij", 3, "ik", 0), ("ij,j->i", 2, "j", 0),
]  # fmt: skip


@gen(12, 99, 1.2)
def g_einsum(g):
    eq, rank, second, _ = g.pick(_EINSUM)
    x = g.x(pred=lambda s: len(s) == rank and 0 not in s)
    sx = g.shape_of(x)
    lhs = eq.split("->")[0].split(",")[0]
    if eq == "ii->i" and sx[0] != sx[1]:
        raise Reject("not square")
    letters = {}
    if lhs.startswith("..."):
        for c, n in zip(lhs[3:], sx[-(len(lhs) - 3) :]):
            letters[c] = n
    else:
        for c, n in zip(lhs, sx):
            letters[c] = n
    ins = [x]
    length = 1
    if second is not None:
        shape = []
        if second.startswith("..."):
            shape += list(sx[: len(sx) - (len(lhs) - 3)])
            second = second[3:]
        for c in second:
            shape.append(letters.setdefault(c, g.size()))
        ins.append(g.fsrc(tuple(shape), None, g.pick(("init", "input"))))
    out = eq.split("->")[1]
    summed = set(lhs.replace(".", "")) | set((second or "").replace(".", ""))
    for c in summed - set(out):
        length *= letters.get(c, 1)
    if eq == "ii->i":
        length = 1
    g.add("Einsum", ins, {"equation": eq}, err=("lin", 2 * length + 2))


@gen(1, 99, 2.0)
def g_softmax(g):
    op = g.pick(("Softmax", "LogSoftmax", "Softmax", "Hardmax"))
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    r = len(g.shape_of(x))
    if op != "Hardmax":
        x = _pow2_scale(g, x, 16.0)
    attrs = {}
    if g.chance(0.7):
        attrs["axis"] = g.r(r) - (r if g.opset >= 11 and g.chance(0.4) else 0)
    axis = attrs.get("axis", 1 if g.opset < 13 else -1)
    if axis >= r or axis < -r:
        raise Reject("axis")
    sx = g.shape_of(x)
    ax = axis % r
    n = int(np.prod(sx[ax:])) if g.opset < 13 else sx[ax]
    oracle = None
    if g.opset < 13:
        oracle = ("softmax_old", f"onnx.reference ignores {op}'s pre-13 flattening")
    err = None if op == "Hardmax" else ("cond", n + 8 if op == "Softmax" else 2 * n + 16)
    g.add(op, [x], attrs, err=err, oracle=oracle)


# -- convolution and pooling --
def _spatial_x(g, lo_nd=1, hi_nd=3, chans=None):
    nd = lo_nd + g.r(hi_nd - lo_nd + 1)
    if g.chance(0.4) and nd == 3:
        nd = 2

    def make():
        c = chans or g.pick((1, 2, 3, 4, 6))
        return (g.pick((1, 1, 2, 3)), c) + tuple(g.pick((1, 2, 3, 4, 5, 7)) for _ in range(nd))

    return g.x(pred=lambda s: len(s) == nd + 2 and min(s) > 0 and np.prod(s) <= 2000, make=make)


def _window(g, n, allow_dil=True):
    k = g.pick((1, 2, 2, 3, 3))
    d = g.pick((1, 1, 1, 2)) if allow_dil else 1
    s = g.pick((1, 1, 2, 3))
    return k, d, s


def _pads_for(g, spatial, ks, ds, max_pad=None):
    pads_b, pads_e = [], []
    for n, k, d in zip(spatial, ks, ds):
        lim = max_pad(k) if max_pad else (k - 1) * d + 1
        pads_b.append(g.r(lim + 1) if g.chance(0.6) else 0)
        pads_e.append(g.r(lim + 1) if g.chance(0.6) else 0)
    return pads_b, pads_e


def _geometry_ok(spatial, ks, ds, ss, pb, pe):
    return all(n + b + e >= (k - 1) * d + 1 for n, k, d, b, e in zip(spatial, ks, ds, pb, pe))


def _conv_geometry(g, sx):
    """(groups, a multiplier of the output channels (1-3), kernel, dilations, strides, attrs)
    of a Conv or ConvTranspose over an input of shape sx: groups dividing the channels, each
    spatial axis's window (_window), the attributes stated (defaults left out now and then)."""
    c = sx[1]
    groups = g.pick([d for d in range(1, c + 1) if c % d == 0])
    mult = g.pick((1, 2, 3))
    win = [_window(g, n) for n in sx[2:]]
    ks, ds, ss = [w[0] for w in win], [w[1] for w in win], [w[2] for w in win]
    attrs = {"group": groups if groups > 1 or g.chance(0.3) else None}
    if g.chance(0.5):
        attrs["kernel_shape"] = ks
    if any(s != 1 for s in ss) or g.chance(0.3):
        attrs["strides"] = ss
    if any(d != 1 for d in ds) or g.chance(0.2):
        attrs["dilations"] = ds
    return groups, mult, ks, ds, ss, attrs


@gen(1, 99, 2.0)
def g_conv(g):
    x = _spatial_x(g)
    sx = g.shape_of(x)
    nd, c = len(sx) - 2, sx[1]
    groups, mult, ks, ds, ss, attrs = _conv_geometry(g, sx)
    m = groups * mult
    auto = g.pick(("NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    pb = pe = [0] * nd
    if auto == "NOTSET":
        pb, pe = _pads_for(g, sx[2:], ks, ds)
        if any(pb) or any(pe) or g.chance(0.3):
            attrs["pads"] = pb + pe
        if not _geometry_ok(sx[2:], ks, ds, ss, pb, pe):
            raise Reject("kernel larger than the padded input")
    else:
        attrs["auto_pad"] = auto
        if auto == "VALID" and not _geometry_ok(sx[2:], ks, ds, ss, pb, pe):
            raise Reject("kernel larger than the input")
    w = g.fsrc((m, c // groups) + tuple(ks), None, g.pick(("init", "init", "input")))
    ins = [x, w]
    if g.chance(0.6):
        ins.append(g.fsrc((m,), None, g.pick(("init", "input"))))
    n = c // groups * int(np.prod(ks))
    g.add("Conv", ins, attrs, err=("lin", 2 * n + 4))


@gen(1, 99, 1.5)
def g_conv_transpose(g):
    x = _spatial_x(g)
    sx = g.shape_of(x)
    c = sx[1]
    groups, mg, ks, ds, ss, attrs = _conv_geometry(g, sx)
    full = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(sx[2:], ss, ks, ds)]
    u = g.r(6)
    if u < 3:
        op = [g.r(max(s, d)) if g.chance(0.4) else 0 for s, d in zip(ss, ds)]
        pb = [g.r(f) if g.chance(0.5) else 0 for f in full]
        pe = [g.r(max(f - b + o, 1)) if g.chance(0.5) else 0 for f, b, o in zip(full, pb, op)]
        if any(f + o - b - e < 1 for f, o, b, e in zip(full, op, pb, pe)):
            raise Reject("empty output")
        if any(op):
            attrs["output_padding"] = op
        if any(pb) or any(pe) or g.chance(0.3):
            attrs["pads"] = pb + pe
    elif u == 3:
        attrs["output_shape"] = [max(1, f + g.r(3) - g.r(3)) for f in full]
        if any(o > f + max(s, d) - 1 for o, f, s, d in zip(attrs["output_shape"], full, ss, ds)):
            raise Reject("output_shape beyond full + output_padding's range")
    elif u == 4:
        attrs["auto_pad"] = g.pick(("SAME_UPPER", "SAME_LOWER"))
        if any(n * s > f + max(s, d) - 1 for n, s, d, f in zip(sx[2:], ss, ds, full)):
            raise Reject("SAME output beyond reach")
    else:
        attrs["auto_pad"] = "VALID"
    w = g.fsrc((c, mg) + tuple(ks), None, g.pick(("init", "init", "input")))
    ins = [x, w]
    if g.chance(0.5):
        ins.append(g.fsrc((mg * groups,), None, g.pick(("init", "input"))))
    feats = [f for f, on in (("group > 1", groups > 1), ("output_shape", "output_shape" in attrs),
                             (str(attrs.get("auto_pad")), "auto_pad" in attrs)) if on]  # fmt: skip
    oracle = ("conv_transpose", "onnx.reference's ConvTranspose mishandles "
              f"{', '.join(feats) or 'this case'}")  # fmt: skip
    n = c // groups * int(np.prod(ks))
    g.add("ConvTranspose", ins, attrs, err=("lin", 2 * n + 4), oracle=oracle)


def _pool_attrs(g, sx, op):
    nd = len(sx) - 2
    win = [_window(g, n, allow_dil=op == "MaxPool" and g.opset >= 10) for n in sx[2:]]
    ks, ds, ss = [w[0] for w in win], [w[1] for w in win], [w[2] for w in win]
    attrs = {"kernel_shape": ks}
    if any(s != 1 for s in ss) or g.chance(0.3):
        attrs["strides"] = ss
    if any(d != 1 for d in ds):
        attrs["dilations"] = ds
    if op == "AveragePool" and g.opset >= 19 and g.chance(0.1):
        attrs["dilations"] = [2] * nd
    auto = g.pick(("NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"))
    pb = pe = [0] * nd
    if auto == "NOTSET":
        pb, pe = _pads_for(g, sx[2:], ks, ds, max_pad=lambda k: k - 1)
        if any(pb) or any(pe) or g.chance(0.3):
            attrs["pads"] = pb + pe
    else:
        attrs["auto_pad"] = auto
    if not _geometry_ok(sx[2:], ks, ds, ss, pb, pe):
        raise Reject("window larger than the padded input")
    ceil_ok = g.opset >= (10 if op != "LpPool" else 18)
    if ceil_ok and auto == "NOTSET" and g.chance(0.4):
        attrs["ceil_mode"] = 1
    return attrs, ks


@gen(1, 99, 2.0)
def g_pool(g):
    op = g.pick(("MaxPool", "MaxPool", "AveragePool", "AveragePool", "LpPool"))
    if op == "LpPool" and g.opset < 2:
        op = "MaxPool"
    x = _spatial_x(g)
    sx = g.shape_of(x)
    attrs, ks = _pool_attrs(g, sx, op)
    n_out = 1
    err = None
    if op == "MaxPool":
        if g.opset >= 8 and g.chance(0.05):
            n_out = 2  # (the Indices output: pyrite refuses it)
    elif op == "AveragePool":
        if g.opset >= 7 and g.chance(0.5):
            attrs["count_include_pad"] = g.r(2)
        err = ("lin", 2 * int(np.prod(ks)) + 4)
    else:
        if g.chance(0.7):
            attrs["p"] = g.pick((1, 2, 3))
        err = ("cond", 4 * int(np.prod(ks)) + 8)
    feats = [f for f, on in (("ceil_mode", attrs.get("ceil_mode")),
                             (str(attrs.get("auto_pad")), "auto_pad" in attrs),
                             ("dilations", "dilations" in attrs), ("pads", "pads" in attrs),
                             (f"{len(sx) - 2}-d", len(sx) != 4), ("opset < 11", g.opset < 11))
             if on]  # fmt: skip
    oracle = ("pool", f"onnx.reference's {op} differs from the spec's formulas "
              f"({', '.join(feats) or 'plain'})")  # fmt: skip
    g.add(op, [x], attrs, n_out=n_out, err=err, oracle=oracle if n_out == 1 else None)


@gen(1, 99, 0.7)
def g_global_pool(g):
    op = g.pick(("GlobalAveragePool", "GlobalMaxPool"))
    x = _spatial_x(g)
    n = int(np.prod(g.shape_of(x)[2:]))
    oracle = None
    if op == "GlobalMaxPool":
        oracle = ("global_max_pool", "onnx.reference's GlobalMaxPool reduces axes (r-2, r-1) "
                  "from r - 2, right for 4-d inputs only")  # fmt: skip
    g.add(op, [x], err=("lin", 2 * n + 2) if op == "GlobalAveragePool" else None, oracle=oracle)


# -- normalization --
@gen(9, 99, 1.2)
def g_batch_norm(g):
    x = g.x(pred=lambda s: 2 <= len(s) <= 5 and 0 not in s)
    c = g.shape_of(x)[1]
    how = g.pick(("init", "init", "input"))
    ins = [x, g.fsrc((c,), None, how), g.fsrc((c,), None, how), g.fsrc((c,), None, how),
           g.fsrc((c,), "pos", how)]  # fmt: skip
    attrs = {"epsilon": _f32(g.pick((1e-5, 1e-3, 0.1)))} if g.chance(0.6) else {}
    if g.opset >= 14 and g.chance(0.05):
        attrs["training_mode"] = 1  # (pyrite refuses: inference graphs)
        g.add("BatchNormalization", ins, attrs, n_out=3, err=("cond", 16))
        return
    oracle = None
    if g.opset < 14:
        oracle = ("batch_norm", "onnx.reference's BatchNormalization-9 computes batch statistics "
                  "(the momentum default makes it train) where one output means inference")  # fmt: skip
    g.add("BatchNormalization", ins, attrs, err=("cond", 8), oracle=oracle)


@gen(17, 99, 1.5)
def g_layer_norm(g):
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    attrs = {}
    axis = -1
    if g.chance(0.6):
        axis = g.r(r) - (r if g.chance(0.4) else 0)
        attrs["axis"] = axis
    ns = sx[axis % r :]
    sshape = ns if g.chance(0.7) else tuple(1 if g.chance(0.4) else n for n in ns)[g.r(len(ns)) :]
    how = g.pick(("init", "init", "input"))
    ins = [x, g.fsrc(sshape, None, how)]
    if g.chance(0.7):
        ins.append(g.fsrc(sshape if g.chance(0.7) else ns, None, how))
    if g.chance(0.5):
        attrs["epsilon"] = _f32(g.pick((1e-5, 1e-3, 0.1)))
    n = int(np.prod(ns))
    g.add("LayerNormalization", ins, attrs, n_out=1 + g.r(3) if g.chance(0.3) else 1,
          err=("cond", 2 * n + 16))  # fmt: skip


@gen(6, 99, 0.8)
def g_instance_norm(g):
    x = _spatial_x(g)
    c = g.shape_of(x)[1]
    n = int(np.prod(g.shape_of(x)[2:]))
    how = g.pick(("init", "input"))
    attrs = {"epsilon": _f32(g.pick((1e-5, 1e-3, 0.1)))} if g.chance(0.5) else {}
    g.add("InstanceNormalization", [x, g.fsrc((c,), None, how), g.fsrc((c,), None, how)], attrs,
          err=("cond", 2 * n + 16))  # fmt: skip


@gen(18, 99, 0.8)
def g_group_norm(g):
    x = g.x(pred=lambda s: len(s) >= 3 and 0 not in s, make=lambda: (2, 6, 5))
    sx = g.shape_of(x)
    c = sx[1]
    ng = g.pick([d for d in range(1, c + 1) if c % d == 0])
    per = c if g.opset >= 21 else ng
    how = g.pick(("init", "input"))
    attrs = {"num_groups": ng}
    if g.chance(0.5):
        attrs["epsilon"] = _f32(g.pick((1e-5, 1e-3, 0.1)))
    n = c // ng * int(np.prod(sx[2:]))
    g.add("GroupNormalization", [x, g.fsrc((per,), None, how), g.fsrc((per,), None, how)], attrs,
          err=("cond", 2 * n + 16))  # fmt: skip


@gen(1, 99, 0.6)
def g_lrn(g):
    x = g.x(pred=lambda s: len(s) == 4 and 0 not in s, make=lambda: (2, 5, 3, 2))
    attrs = {"size": g.pick((1, 2, 3, 4, 5))}
    if g.chance(0.6):
        attrs["alpha"] = _f32(g.pick((1e-4, 0.01, 0.5)))
    if g.chance(0.6):
        attrs["beta"] = _f32(g.pick((0.75, 0.5, 1.0)))
    if g.chance(0.6):
        attrs["bias"] = _f32(g.pick((1.0, 2.0, 0.5)))
    g.add("LRN", [x], attrs, err=("cond", 32),
          oracle=("lrn", "onnx.reference's LRN sums a window of the batch dim's size"))  # fmt: skip


# -- shapes and data movement --
def _factor_shape(g, n):
    """A random shape with n elements."""
    dims = g.prime_factors(n)
    g.rng.shuffle(dims)
    out = []
    for d in dims:
        if out and g.chance(0.5):
            out[-1] *= d
        else:
            out.append(d)
    while g.chance(0.25):
        out.insert(g.r(len(out) + 1), 1)
    return out or ([1] if g.chance(0.5) else [])


@gen(5, 99, 2.0)
def g_reshape(g):
    x = g.x(kind=g.pick(("f", "f", "f", "i")), pred=lambda s: 0 not in s and len(s) <= 5)
    sx = g.shape_of(x)
    want = _factor_shape(g, int(np.prod(sx)))
    tgt = list(want)
    for i in range(min(len(tgt), len(sx))):  # 0: copy the input's dim
        if tgt[i] == sx[i] and g.chance(0.3):
            tgt[i] = 0
    if tgt and g.chance(0.4):
        j = g.r(len(tgt))
        if tgt[j] != 0:
            tgt[j] = -1
    attrs = {}
    if g.opset >= 14 and g.chance(0.3):
        attrs["allowzero"] = 0 if 0 in tgt else g.r(2)
    if g.chance(0.15):  # the target from a Shape subgraph: Shape(x) -> Slice/Gather -> Concat
        s = g.add("Shape", [x])
        if len(sx) >= 1 and g.opset >= 11:
            head = g.add("Gather", [s, g.ints([0])], {"axis": 0})
            t = g.add("Concat", [head, g.ints([-1])], {"axis": 0})
            g.add("Reshape", [x, t], attrs)
            return
    g.add("Reshape", [x, g.ints(tgt, g.pick(("init", "init", "const", "input")))], attrs)


@gen(1, 99, 1.0)
def g_flatten(g):
    x = g.x(pred=lambda s: len(s) >= 1)
    r = len(g.shape_of(x))
    attrs = {}
    if g.chance(0.8):
        a = g.r(r + 1)
        if g.opset >= 11 and g.chance(0.4):
            a -= r
        attrs["axis"] = a
    g.add("Flatten", [x], attrs)


@gen(1, 99, 1.5)
def g_transpose(g):
    x = g.x(kind=g.pick(("f", "f", "i", "b")), pred=lambda s: len(s) >= 2)
    r = len(g.shape_of(x))
    attrs = {"perm": [int(p) for p in g.rng.permutation(r)]} if g.chance(0.8) else {}
    g.add("Transpose", [x], attrs)


@gen(1, 99, 1.2)
def g_squeeze(g):
    def make():
        s = list(g.shape(1, 3))
        for _ in range(1 + g.r(2)):
            s.insert(g.r(len(s) + 1), 1)
        return tuple(s)

    op = g.pick(("Squeeze", "Unsqueeze"))
    if op == "Squeeze":
        x = g.x(pred=lambda s: 1 in s, make=make)
        sx = g.shape_of(x)
        r = len(sx)
        ones = [i for i, n in enumerate(sx) if n == 1]
        axes = [i for i in ones if g.chance(0.6)] or ones[:1]
        axes = [a - r if g.opset >= 11 and g.chance(0.4) else a for a in axes]
        if g.chance(0.2):
            g.add("Squeeze", [x])
            return
    else:
        x = g.x(pred=lambda s: len(s) <= 4)
        r = len(g.shape_of(x)) + 1 + g.r(2)
        axes = sorted(int(a) for a in g.rng.choice(r, r - len(g.shape_of(x)), replace=False))
        axes = [a - r if g.opset >= 11 and g.chance(0.4) else a for a in axes]
    if g.opset >= 13:
        g.add(op, [x, g.ints(axes)])
    else:
        oracle = ("unsqueeze", "onnx.reference's Unsqueeze-1/11 inserts its axes one by one "
                  "(a negative axis then points elsewhere)")  # fmt: skip
        if op == "Squeeze":
            oracle = ("squeeze", "onnx.reference's Squeeze-1/11 squeezes its axes one by one "
                      "(a negative axis then points elsewhere)")  # fmt: skip
        g.add(op, [x], {"axes": axes}, oracle=oracle)


@gen(4, 99, 1.5)
def g_concat(g):
    x = g.x(kind=g.pick(("f", "f", "f", "i")), pred=lambda s: len(s) >= 1)
    sx = g.shape_of(x)
    r = len(sx)
    ax = g.r(r)
    ins = [x]
    for _ in range(1 + g.r(2)):
        if g.chance(0.2):
            ins.append(x)
            continue
        s = list(sx)
        s[ax] = g.pick((1, 2, 3, 0)) if g.chance(0.9) else 0
        if g.kind_of(x) == "f":
            ins.append(g.fsrc(tuple(s), None, g.pick(("input", "init", "const"))))
        else:
            ins.append(g.src(g.rng.integers(-9, 9, s).astype(np.int64)))
    if g.chance(0.5):
        g.rng.shuffle(ins)
    axis = ax - r if g.opset >= 11 and g.chance(0.4) else ax
    g.add("Concat", ins, {"axis": axis})


@gen(2, 99, 1.2)
def g_split(g):
    x = g.x(pred=lambda s: len(s) >= 1 and max(s) >= 2)
    sx = g.shape_of(x)
    r = len(sx)
    cands = [i for i in range(r) if sx[i] >= 2]
    ax = g.pick(cands)
    n = sx[ax]
    attrs = {}
    if ax != 0 or g.chance(0.5):
        attrs["axis"] = ax - r if g.opset >= 11 and g.chance(0.4) else ax
    u = g.r(3)
    ins = [x]
    if u == 0:  # sizes
        k = 2 + g.r(min(n, 3) - 1)
        cuts = sorted(int(c) for c in g.rng.choice(np.arange(1, n), k - 1, replace=False))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
        if g.chance(0.1):
            sizes.insert(g.r(len(sizes)), 0)
        if g.opset >= 13:
            ins.append(g.ints(sizes))
        else:
            attrs["split"] = sizes
        n_out = len(sizes)
    elif u == 1 or g.opset < 18:  # equal parts
        divs = [d for d in range(2, n + 1) if n % d == 0]
        n_out = g.pick(divs)
    else:
        n_out = 2 + g.r(min(n, 4) - 1)
        if -(-n // n_out) * (n_out - 1) >= n:
            raise Reject("num_outputs leaves an output empty")
        attrs["num_outputs"] = n_out
    g.add("Split", ins, attrs, n_out=n_out)


def _slice_params(g, sx, opset):
    r = len(sx)
    k = 1 + g.r(r)
    axes = [int(a) for a in g.rng.choice(r, k, replace=False)]
    starts, ends, steps = [], [], []
    for a in axes:
        n = sx[a]
        step = 1
        if opset >= 10 and g.chance(0.4):
            step = g.pick((2, 3, -1, -2, -1))
        choices = [g.r(n + 1), -g.r(n + 1) - 1 + 1, n + g.r(5), -n - g.r(5)]
        st = g.pick(choices) if g.chance(0.8) else (I64MAX if step < 0 else 0)
        en_choices = [g.r(n + 1), -g.r(n) - 1, n + g.r(5), -n - 1 - g.r(3)]
        en = g.pick(en_choices)
        if g.chance(0.2):
            en = I64MIN if step < 0 else I64MAX
        if g.chance(0.1) and step < 0:
            en = -I64MAX
        starts.append(int(st))
        ends.append(int(en))
        steps.append(step)
    if opset >= 11:
        axes = [a - r if g.chance(0.3) else a for a in axes]
    return starts, ends, axes, steps


@gen(1, 99, 2.0)
def g_slice(g):
    x = g.x(kind=g.pick(("f", "f", "f", "i")), pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    starts, ends, axes, steps = _slice_params(g, sx, g.opset)
    if g.opset < 10:
        attrs = {"starts": starts, "ends": ends}
        if g.chance(0.7) or axes != list(range(len(axes))):
            attrs["axes"] = axes
        g.add("Slice", [x], attrs)
        return
    big = any(abs(v) > 2**31 - 1 for v in starts + ends)
    how = "input" if not big and g.chance(0.15) else g.pick(("init", "init", "const"))
    ins = [x, g.ints(starts, how), g.ints(ends, how)]
    default_axes = axes == list(range(len(axes)))
    if not default_axes or g.chance(0.5) or any(s != 1 for s in steps):
        ins.append(g.ints(axes, how))
        if any(s != 1 for s in steps) or g.chance(0.5):
            ins.append(g.ints(steps, how))
    g.add("Slice", ins)


@gen(1, 99, 1.5)
def g_gather(g):
    x = g.x(kind=g.pick(("f", "f", "f", "i")), pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    ax = g.r(r)
    n = sx[ax]
    ishape = g.pick(((), (1,), (3,), (2, 2), (4,), (2, 1, 3)))
    lo = -n if g.opset >= 11 else 0
    idx = g.rng.integers(lo, n, ishape).astype(np.int64)
    how = g.pick(("init", "init", "const", "input"))
    i = g.ints(idx, how)
    if g.chance(0.15):  # indices from an ArgMax (computed on the device)
        y = g.x(pred=lambda s: len(s) >= 1 and max(s) <= n and 0 not in s)
        if g.shape_of(y)[-1] <= n:
            i = g.add("ArgMax", [y], {"axis": -1 + len(g.shape_of(y))})
    attrs = (
        {"axis": ax - r if g.opset >= 11 and g.chance(0.3) else ax} if ax or g.chance(0.5) else {}
    )
    g.add("Gather", [x, i], attrs)


@gen(11, 99, 1.0)
def g_gather_elements(g):
    x = g.x(kind=g.pick(("f", "f", "i")), pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    ax = g.r(r)
    ishape = list(sx)
    ishape[ax] = g.pick((1, 2, 3, sx[ax]))
    idx = g.rng.integers(-sx[ax], sx[ax], ishape).astype(np.int64)
    i = g.ints(idx, g.pick(("init", "const", "input")))
    g.add(
        "GatherElements",
        [x, i],
        {"axis": ax - r if g.chance(0.3) else ax},
        oracle=(
            "gather_elements",
            "onnx.reference's GatherElements misreads a negative axis (and its np.choose "
            "takes at most 64 choices)",
        ),
    )


@gen(11, 99, 0.8)
def g_gather_nd(g):
    x = g.x(kind=g.pick(("f", "f", "i")), pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    b = g.r(r) if g.opset >= 12 and r >= 2 and g.chance(0.4) else 0
    q = 1 + g.r(r - b)
    lead = tuple(sx[:b]) + tuple(g.pick((1, 2, 3)) for _ in range(g.r(2)))
    idx = np.stack([g.rng.integers(-n, n, lead) for n in sx[b : b + q]], axis=-1).astype(np.int64)
    attrs = {"batch_dims": b} if b or (g.opset >= 12 and g.chance(0.2)) else {}
    g.add("GatherND", [x, g.ints(idx, g.pick(("init", "input")))], attrs)


def _unique_along(g, shape, ax, n):
    """Indices of `shape` into a dim of size n along ax, distinct along ax (shape[ax] <= n)."""
    idx = np.zeros(shape, np.int64)
    other = [s for i, s in enumerate(shape) if i != ax]
    for pos in np.ndindex(*other):
        perm = g.rng.permutation(n)[: shape[ax]]
        sl = list(pos)
        sl.insert(ax, slice(None))
        idx[tuple(sl)] = perm
    return idx


@gen(9, 99, 1.0)
def g_scatter(g):
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    old = g.opset < 11  # (Scatter, ScatterElements' name before 11: no negative indices)
    sx = g.shape_of(x)
    r = len(sx)
    reds = ["none"] + (["add", "mul"] if g.opset >= 16 else []) + (
        ["max", "min"] if g.opset >= 18 else [])  # fmt: skip
    red = g.pick(reds)
    if old or g.chance(0.6):
        ax = g.r(r)
        ishape = [g.r(n) + 1 for n in sx]
        if red == "none":
            idx = _unique_along(g, ishape, ax, sx[ax])
        else:
            idx = g.rng.integers(0, sx[ax], ishape)
        if not old:
            idx = np.where(g.rng.random(ishape) < 0.3, idx - sx[ax], idx)
        idx = idx.astype(np.int64)
        upd = g.fsrc(tuple(ishape), None, g.pick(("input", "init")))
        attrs = {"axis": ax - r if g.chance(0.3) and not old else ax}
        if red != "none" or (g.opset >= 16 and g.chance(0.2)):
            attrs["reduction"] = red
        op = "Scatter" if old else "ScatterElements"
        oracle = ("scatter", "onnx.reference has no Scatter (run as its ScatterElements)")
        g.add(
            op,
            [x, g.ints(idx, g.pick(("init", "input"))), upd],
            attrs,
            err=("cond", 4) if red != "none" else None,
            oracle=oracle if old else None,
        )
        return
    q = 1 + g.r(r)
    cells = int(np.prod(sx[:q]))
    k = 1 + g.r(min(cells, 4))
    flat = g.rng.permutation(cells)[:k] if red == "none" else g.rng.integers(0, cells, k)
    idx = np.stack(np.unravel_index(flat, sx[:q]), axis=-1).astype(np.int64)
    idx = np.where(g.rng.random(idx.shape) < 0.2, idx - np.array(sx[:q]), idx)
    upd = g.fsrc((k,) + tuple(sx[q:]), None, g.pick(("input", "init")))
    attrs = {"reduction": red} if red != "none" or (g.opset >= 16 and g.chance(0.2)) else {}
    g.add("ScatterND", [x, g.ints(idx, g.pick(("init", "input"))), upd], attrs,
          err=("cond", 4) if red != "none" else None)  # fmt: skip


@gen(8, 99, 1.0)
def g_expand(g):
    x = g.x(kind=g.pick(("f", "f", "i")), pred=lambda s: len(s) <= 4)
    sx = g.shape_of(x)
    tgt = [g.size() if n == 1 and g.chance(0.6) else (1 if g.chance(0.2) else n) for n in sx]
    tgt = [g.size() for _ in range(g.r(3))] + tgt
    if np.prod(np.broadcast_shapes(sx, tuple(tgt))) > 4000:
        raise Reject("too big")
    g.add("Expand", [x, g.ints(tgt, g.pick(("init", "init", "const", "input")))])


@gen(6, 99, 1.0)
def g_tile(g):
    x = g.x(kind=g.pick(("f", "f", "i")), pred=lambda s: 1 <= len(s) <= 4)
    reps = [g.pick((1, 1, 2, 3)) for _ in g.shape_of(x)]
    if np.prod(g.shape_of(x)) * np.prod(reps) > 4000:
        raise Reject("too big")
    g.add("Tile", [x, g.ints(reps, g.pick(("init", "const", "input")))])


@gen(2, 99, 1.5)
def g_pad(g):
    x = g.x(kind=g.pick(("f", "f", "f", "i")), pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    modes = ["constant", "reflect", "edge"] + (["wrap"] if g.opset >= 19 else [])
    mode = g.pick(modes)
    axes = list(range(r))
    if g.opset >= 18 and g.chance(0.3):
        axes = sorted(int(a) for a in g.rng.choice(r, 1 + g.r(r), replace=False))
    b, e = [], []
    neg = g.opset >= 11 and g.chance(0.2)
    for a in axes:
        n = sx[a]
        lim = n - 1 if mode == "reflect" else (n + 1 if mode == "wrap" else 3)
        b.append(g.r(lim + 1) if g.chance(0.7) else 0)
        e.append(g.r(lim + 1) if g.chance(0.7) else 0)
        if neg and n > 2 and g.chance(0.5):
            if g.chance(0.5):
                b[-1] = -g.r(n // 2 + 1)
            else:
                e[-1] = -g.r(n // 2 + 1)
    if mode == "reflect":  # (the cropped dim must stay longer than its padding)
        for j, a in enumerate(axes):
            kept = sx[a] - max(-b[j], 0) - max(-e[j], 0)
            if max(b[j], e[j]) >= kept and (b[j] > 0 or e[j] > 0):
                raise Reject("reflect padding past the dim")
    if np.prod([n + bb + ee for n, bb, ee in zip(sx, b, e)]) > 4000:
        raise Reject("too big")
    attrs = {}
    if mode != "constant" or g.chance(0.3):
        attrs["mode"] = mode
    value = _f32(g.pick((0.0, 1.5, -2.0))) if g.kind_of(x) == "f" else int(g.pick((0, 3, -1)))
    oracle = ("pad", "onnx.reference's Pad (numpy.pad) refuses negative pads") if neg and min(
        b + e) < 0 else None  # fmt: skip
    if g.opset < 11:
        attrs["pads"] = b + e
        if mode == "constant" and g.chance(0.5) and g.kind_of(x) == "f":
            attrs["value"] = value
        g.add("Pad", [x], attrs, oracle=oracle)
        return
    ins = [x, g.ints(b + e, g.pick(("init", "init", "const", "input")))]
    if mode == "constant" and g.chance(0.5):
        dt = np.float32 if g.kind_of(x) == "f" else np.int64
        ins.append(g.src(np.asarray(value, dt), g.pick(("init", "const")), readable=False))
    if axes != list(range(r)):
        while len(ins) < 3:
            ins.append("")
        ins.append(g.ints([a - r if g.chance(0.3) else a for a in axes]))
    g.add("Pad", ins, attrs, oracle=oracle)


@gen(1, 99, 0.7)
def g_depth_space(g):
    b = g.pick((2, 2, 3))
    op = g.pick(("DepthToSpace", "SpaceToDepth"))
    if op == "DepthToSpace":
        x = g.x(pred=lambda s: len(s) == 4 and s[1] % (b * b) == 0 and 0 not in s,
                make=lambda: (g.pick((1, 2)), b * b * g.pick((1, 2)), g.pick((1, 2, 3)),
                              g.pick((1, 2, 3))))  # fmt: skip
        attrs = {"blocksize": b}
        if g.opset >= 11 and g.chance(0.6):
            attrs["mode"] = g.pick(("DCR", "CRD"))
    else:
        x = g.x(pred=lambda s: len(s) == 4 and s[2] % b == 0 and s[3] % b == 0 and 0 not in s,
                make=lambda: (g.pick((1, 2)), g.pick((1, 2, 3)), b * g.pick((1, 2)),
                              b * g.pick((1, 2, 3))))  # fmt: skip
        attrs = {"blocksize": b}
    g.add(op, [x], attrs)


@gen(14, 99, 1.0)
def g_trilu(g):
    x = g.x(kind=g.pick(("f", "f", "i")), pred=lambda s: len(s) >= 2 and 0 not in s)
    ins = [x]
    if g.chance(0.7):
        ins.append(g.ints(np.int64(g.r(9) - 4), g.pick(("init", "const", "input"))))
    attrs = {"upper": g.r(2)} if g.chance(0.7) else {}
    g.add("Trilu", ins, attrs)


@gen(11, 99, 1.2)
def g_cumsum(g):
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    sx = g.shape_of(x)
    r = len(sx)
    ax = g.r(r) - (r if g.chance(0.3) else 0)
    axis = g.ints(np.int64(ax), g.pick(("init", "const", "input")))
    attrs = {}
    if g.chance(0.5):
        attrs["exclusive"] = g.r(2)
    if g.chance(0.5):
        attrs["reverse"] = g.r(2)
    g.add("CumSum", [x, axis], attrs, err=("lin", 2 * sx[ax] + 2))


@gen(1, 99, 1.2)
def g_topk(g):
    x = g.x(pred=lambda s: len(s) >= 1 and 0 not in s)
    if g.chance(0.3):
        x = g.add("Floor", [x])
    sx = g.shape_of(x)
    r = len(sx)
    ax = g.r(r)
    k = g.r(sx[ax]) + 1
    attrs = {}
    if ax != r - 1 or g.chance(0.4):
        attrs["axis"] = ax - r if g.opset >= 11 and g.chance(0.4) else ax
    if g.opset >= 11:
        if g.chance(0.5):
            attrs["largest"] = g.r(2)
        if g.chance(0.2):
            attrs["sorted"] = 1
    if g.opset < 10:
        attrs["k"] = k
        g.add("TopK", [x], attrs, n_out=2)
    else:
        g.add("TopK", [x, g.ints([k], g.pick(("init", "const", "input")))], attrs, n_out=2)


@gen(11, 99, 0.7)
def g_one_hot(g):
    depth = g.pick((1, 2, 3, 5))
    shape = g.shape(0, 2)
    idx = g.rng.integers(-depth, depth, shape).astype(np.int64)
    i = g.src(idx, g.pick(("input", "init")))
    d = g.src(np.asarray(depth, g.pick((np.int64, np.float32))), g.pick(("init", "const")), False)
    vals = g.src(np.asarray([g.pick((0.0, -1.0)), g.pick((1.0, 2.5))], np.float32),
                 g.pick(("init", "const", "input")), readable=False)  # fmt: skip
    r = len(shape) + 1
    attrs = {"axis": g.r(r + 1) - r} if g.chance(0.6) else {}
    g.add("OneHot", [i, d, vals], attrs)


@gen(9, 99, 0.6)
def g_nonzero(g):
    if g.chance(0.5):
        a = g.src(g.rng.random(g.shape(1, 3)) < 0.5, g.pick(("input", "const")))
    else:
        a = g.src(np.where(g.rng.random(g.shape(1, 3)) < 0.5, 0.0, g.floats(())).astype(np.float32),
                  g.pick(("input", "const")))  # fmt: skip
    g.add("NonZero", [a])


@gen(1, 99, 0.8)
def g_shape_size(g):
    x = g.x(kind=g.pick(("f", "i")))
    r = len(g.shape_of(x))
    if g.chance(0.3):
        g.add("Size", [x])
        return
    attrs = {}
    if g.opset >= 15 and g.chance(0.5):
        attrs["start"] = g.r(2 * r + 3) - r - 1
        if g.chance(0.5):
            attrs["end"] = g.r(2 * r + 3) - r - 1
    s = g.add(
        "Shape",
        [x],
        attrs,
        oracle=("shape", "onnx.reference's Shape-15 does not clamp a start below -rank"),
    )
    if g.opset >= 9 and g.chance(0.5) and np.size(g.vals[s]) <= 4 and np.prod(g.vals[s]) <= 500:
        v = np.asarray(g.pick((0.0, 1.5, -2.0)), np.float32).reshape(1)
        c = g.add("ConstantOfShape", [s], {"value": v} if g.chance(0.7) else {})
        if not attrs:
            g.add("Add", [x, c] if g.kind_of(x) == "f" else [c, c], err=("cond", 2))


@gen(11, 99, 0.6)
def g_range(g):
    if g.chance(0.5):
        st, lim, d = g.r(5) - 2, g.r(12) - 3, g.pick((1, 2, 3, -1, -2))
        dt = np.int64
    else:
        st, lim, d = g.pick((0.0, 0.5, -1.5)), g.pick((2.0, 4.25, -3.0)), g.pick((0.5, 0.25, -1.0))
        dt = np.float32
    ins = [
        g.src(np.asarray(v, dt), g.pick(("init", "const", "input")), False) for v in (st, lim, d)
    ]
    r = g.add("Range", ins)
    n = np.size(g.vals[r])
    if dt == np.float32 and n:
        x = g.x(pred=lambda s: len(s) >= 1 and s[-1] == n, make=lambda: (g.size(), n))
        g.add("Add", [x, r], err=("cond", 2))


@gen(7, 99, 0.6)
def g_identity_dropout(g):
    x = g.x(kind=g.pick(("f", "f", "i")))
    if g.chance(0.5):
        g.add("Identity", [x])
        return
    if g.kind_of(x) != "f":
        raise Reject("dropout of ints")
    n_out = 1 + g.r(2)
    if g.opset >= 12:
        ins = [x]
        if g.chance(0.5):
            ins.append(_const(g, g.pick((0.0, 0.5))))
        g.add("Dropout", ins, n_out=n_out)
    else:
        g.add("Dropout", [x], {"ratio": 0.3} if g.chance(0.5) else {}, n_out=n_out)


# -- Resize / Upsample --
_SCALES = (0.5, 0.6, 0.75, 1.0, 1.5, 1.7, 2.0, 3.0, 0.4, 2.5)


@gen(10, 99, 1.5)
def g_resize(g):
    x = g.x(pred=lambda s: 1 <= len(s) <= 4 and 0 not in s and np.prod(s) <= 300,
            make=lambda: (1, g.pick((1, 2)), g.pick((1, 2, 3, 4, 5)), g.pick((1, 2, 3, 5, 7))))  # fmt: skip
    sx = g.shape_of(x)
    r = len(sx)
    modes = ["nearest", "linear"] + (["cubic"] if g.opset >= 11 else [])
    mode = g.pick(modes)
    attrs = {"mode": mode} if mode != "nearest" or g.chance(0.5) else {}
    axes = list(range(r))
    if g.opset >= 18 and g.chance(0.3):
        axes = sorted(int(a) for a in g.rng.choice(r, 1 + g.r(r), replace=False))
        attrs["axes"] = [a - r if g.chance(0.3) else a for a in axes]
    resized = [a for a in axes if a >= r - 2 or g.chance(0.2)]
    use_sizes = g.opset >= 11 and g.chance(0.35)
    if g.opset >= 11:
        cmodes = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                  "tf_crop_and_resize"] + (["half_pixel_symmetric"] if g.opset >= 19 else [])  # fmt: skip
        if g.chance(0.8):
            attrs["coordinate_transformation_mode"] = g.pick(cmodes)
        if mode == "nearest" and g.chance(0.7):
            attrs["nearest_mode"] = g.pick(("round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil"))  # fmt: skip
        if mode == "cubic" and g.chance(0.5):
            attrs["cubic_coeff_a"] = _f32(g.pick((-0.5, -0.75)))
        if mode != "nearest" and g.chance(0.3):
            attrs["exclude_outside"] = 1
        if g.opset >= 18 and mode != "nearest" and g.chance(0.05):
            attrs["antialias"] = 1
    cm = attrs.get("coordinate_transformation_mode", "half_pixel")
    if cm == "tf_crop_and_resize":
        if g.chance(0.5):
            attrs["extrapolation_value"] = _f32(g.pick((0.0, -1.0, 2.5)))
    ins = [x]
    if g.opset >= 11:
        if cm == "tf_crop_and_resize":
            lo = [g.pick((0.0, 0.1, -0.2, 0.25)) if a in resized else 0.0 for a in axes]
            hi = [g.pick((1.0, 0.9, 1.2, 0.75)) if a in resized else 1.0 for a in axes]
            ins.append(g.src(np.asarray(lo + hi, np.float32), g.pick(("init", "const")), False,
                             narrow=True))  # fmt: skip
        elif g.opset < 13:  # (roi, and scales beside sizes, are required before 13: empty)
            ins.append(g.src(np.zeros(0, np.float32), "init", False, narrow=True))
        else:
            ins.append("")
    if use_sizes:
        sizes = [max(1, int(sx[a] * g.pick(_SCALES) + 0.5)) if a in resized else sx[a]
                 for a in axes]  # fmt: skip
        empty = "" if g.opset >= 13 else g.src(np.zeros(0, np.float32), "init", False, narrow=True)
        ins += [empty, g.ints(sizes, g.pick(("init", "const")))]
        if g.opset >= 18 and len(resized) >= 2 and g.chance(0.3):
            attrs["keep_aspect_ratio_policy"] = g.pick(("not_larger", "not_smaller"))
    else:
        sc = [g.pick(_SCALES) if a in resized else 1.0 for a in axes]
        if any(int(s * sx[a]) < 1 for s, a in zip(sc, axes)):
            raise Reject("an empty output")
        ins.append(g.src(np.asarray(sc, np.float32), g.pick(("init", "const")), False,
                         narrow=True))  # fmt: skip
    while ins and ins[-1] == "":
        ins.pop()
    oracle = None
    if g.opset < 11:
        oracle = ("resize10", "onnx.reference's Resize reads Resize-10's scales as roi "
                  "(checked against onnxruntime's Resize-10 semantics)")  # fmt: skip
    elif "axes" in attrs:
        oracle = ("axes", "onnx.reference's Resize refuses negative axes")
    g.add("Resize", ins, attrs, err=None if mode == "nearest" else ("cond", 32), oracle=oracle)


@gen(7, 9, 0.6)
def g_upsample(g):
    x = g.x(pred=lambda s: 1 <= len(s) <= 4 and 0 not in s and np.prod(s) <= 300)
    r = len(g.shape_of(x))
    sc = [1.0] * (r - 2) + [g.pick((1.0, 2.0, 3.0, 1.5)) for _ in range(min(r, 2))]
    attrs = {"mode": g.pick(("nearest", "linear"))} if g.chance(0.7) else {}
    if g.opset < 9:
        attrs["scales"] = [float(s) for s in sc]
        g.add("Upsample", [x], attrs, err=("cond", 16), oracle=_UPSAMPLE_ORACLE)
    else:
        s = g.src(np.asarray(sc, np.float32), g.pick(("init", "const")), False, narrow=True)
        g.add("Upsample", [x, s], attrs, err=("cond", 16), oracle=_UPSAMPLE_ORACLE)


_UPSAMPLE_ORACLE = (
    "upsample",
    "onnx.reference's Upsample raises on linear modes past 2-d "
    "(checked against its Resize with asymmetric coordinates)",
)


@gen(7, 99, 0.8)
def g_rnn(g):
    op = g.pick(("LSTM", "GRU", "RNN"))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    t, b, i, h = g.pick((1, 2, 3)), g.pick((1, 2)), g.pick((1, 2, 3)), g.pick((1, 2, 3))
    direction = g.pick(("forward", "reverse", "bidirectional"))
    nd = 2 if direction == "bidirectional" else 1
    layout = g.r(2) if g.opset >= 14 and g.chance(0.3) else 0
    xs = (b, t, i) if layout else (t, b, i)
    x = g.x(pred=lambda s: s == xs, make=lambda: xs)
    how = g.pick(("init", "input"))
    ins = [x, g.fsrc((nd, gates * h, i), "u", how), g.fsrc((nd, gates * h, h), "u", how)]
    extra = [g.fsrc((nd, 2 * gates * h), "u", how) if g.chance(0.7) else "", ""]
    hs = (b, nd, h) if layout else (nd, b, h)
    extra.append(g.fsrc(hs, "u", how) if g.chance(0.5) else "")
    if op == "LSTM" and g.chance(0.4):
        extra.append(g.fsrc(hs, "u", how))
    if g.chance(0.04):  # (pyrite refuses per-sequence lengths)
        extra[1] = g.src(g.rng.integers(1, t + 1, (b,)).astype(np.int32), "init", False)
    ins += extra
    while ins[-1] == "":
        ins.pop()
    attrs = {"hidden_size": h}
    if g.chance(0.03):
        attrs["clip"] = 5.0  # (refused too)
    if g.chance(0.1):
        acts = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
        attrs["activations"] = acts[op] * nd
    if direction != "forward" or g.chance(0.3):
        attrs["direction"] = direction
    if layout:
        attrs["layout"] = layout
    if op == "GRU" and g.chance(0.5):
        attrs["linear_before_reset"] = g.r(2)
    n_out = (3 if op == "LSTM" else 2) if g.chance(0.6) else 1
    g.add(op, ins, attrs, n_out=n_out, err=("cond", 16 * t + 16))


# ---- the driver's interface ----------------------------------------------------------------------
def build(seed):
    case = Gen(seed).build()
    for n in case["nodes"]:
        DRAWN[n["op"]] = DRAWN.get(n["op"], 0) + 1
    return case


def main(argv=None):
    rc = fuzz_driver.run(__doc__, build, check, describe, argv)
    print(f"ops drawn ({len(DRAWN)}):", dict(sorted(DRAWN.items(), key=lambda kv: -kv[1])))
    print(
        "largest err / tol:",
        {k: round(v, 3) for k, v in sorted(WORST.items(), key=lambda kv: -kv[1])[:12]},
    )
    return rc


if __name__ == "__main__":
    sys.exit(main())
