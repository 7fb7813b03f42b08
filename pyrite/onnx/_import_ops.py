"""ONNX import: values, nodes, and the converters of elementwise ops (products, softmax and
reductions are in _import_math.py, shape ops in _import_shape.py, neural-network ops in
_import_nn.py, recurrent ones in _import_rnn.py). See _import.py's docstring for the rules.

A converter is `build(node) -> run`, called once at load time (attributes parsed and checked
there, so a refusal names the node before any input exists); `run(ins) -> list` maps the node's
input values (None for an omitted optional input) to its outputs. A value is a pyrite Tensor, a
host `np.ndarray`, or a `Const` (a load-time constant: a host array whose device copy is made
once). Ops whose inputs are all host values compute with numpy where they have a host rule.
"""

from __future__ import annotations

import numpy as np

import pyrite as pr

from .. import dtypes as D
from ..tensor import Tensor
from .errors import UnsupportedOperatorError

CONVERTERS: dict = {}


class OnnxImportError(ValueError):
    """An ONNX model pyrite cannot load or run as given (values, not op types: those raise
    UnsupportedOperatorError)."""


# ---------------------------------------------------------------------------------------------
# values


class Const:
    """A load-time constant: `host` (numpy, int64 kept) and its device copy, made once."""

    __slots__ = ("host", "name", "_dev")

    def __init__(self, arr, name: str):
        self.host = np.asarray(arr)
        self.name = name
        self._dev = None

    def dev(self) -> Tensor:
        if self._dev is None:
            self._dev = upload(self.host, repr(self.name))
        return self._dev


def int32_ok(arr: np.ndarray) -> bool:
    return not arr.size or (int(arr.min()) >= D.INT32_MIN and int(arr.max()) <= D.INT32_MAX)


def upload(arr, what: str) -> Tensor:
    """A host array as a pyrite tensor: int64 (and other wide ints) as int32 after a range
    check, float64 as float32."""
    arr = np.asarray(arr)
    if arr.dtype.kind in "iu" and arr.dtype != np.int32:
        if arr.dtype.itemsize >= 4 or arr.dtype == np.uint16:
            if not int32_ok(arr):
                raise OnnxImportError(
                    f"pyrite: onnx import: {what} is {arr.dtype} with values in "
                    f"[{int(arr.min())}, {int(arr.max())}], which do not fit in int32, pyrite's "
                    "integer storage (WebGPU has no 64-bit integers)"
                )
            arr = arr.astype(np.int32)
    elif arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind not in "biufc":
        raise OnnxImportError(
            f"pyrite: onnx import: {what} has dtype {arr.dtype}, which pyrite lacks"
        )
    return pr.tensor(np.ascontiguousarray(arr).reshape(arr.shape))  # (0-d stays 0-d)


def is_host(v) -> bool:
    return isinstance(v, (np.ndarray, Const))


def host(v) -> np.ndarray:
    """A value on the host (a device tensor is read back: a shape computed on the device)."""
    if isinstance(v, Const):
        return v.host
    if isinstance(v, Tensor):
        a = v.detach().numpy()
        return a.astype(np.int64) if a.dtype.kind in "iu" else a
    return np.asarray(v)


def dev(v, what: str = "a value") -> Tensor | None:
    if v is None or isinstance(v, Tensor):
        return v
    if isinstance(v, Const):
        return v.dev()
    return upload(v, what)


def ints(v) -> list[int]:
    return [int(i) for i in host(v).reshape(-1)]


def shape_of(v) -> tuple:
    return tuple(host(v).shape) if is_host(v) else tuple(v.shape)


def as_output(v, name: str) -> Tensor:
    return dev(v, f"output {name!r}")


def scalar_or_dev(v, what="a value"):
    """A 0-d host value as a Python scalar (no upload, no broadcast change), else a tensor."""
    if is_host(v) and host(v).ndim == 0:
        return host(v).item()
    return dev(v, what)


_ONNX_TO_PYRITE = {1: D.float32, 2: D.uint8, 3: D.int8, 4: D.int32, 5: D.int16, 6: D.int32,
                   7: D.int32, 9: D.bool_, 10: D.float16, 11: D.float32, 12: D.int32,
                   13: D.int32, 16: D.bfloat16}  # fmt: skip
_ONNX_TO_NUMPY = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32,
                  7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32,
                  13: np.uint64, 16: np.float32}  # fmt: skip


def pyrite_dtype(elem: int, node) -> D.dtype:
    if elem not in _ONNX_TO_PYRITE:
        raise node.unsupported(f"element type {elem}")
    return _ONNX_TO_PYRITE[elem]


# ---------------------------------------------------------------------------------------------
# nodes


class Node:
    """One ONNX node: op type, name, input and output names, attributes as Python values."""

    def __init__(self, op, name, index, inputs, outputs, attrs, opset):
        self.op, self.name, self.index = op, name, index
        self.inputs, self.outputs, self.attrs, self.opset = inputs, outputs, attrs, opset

    @classmethod
    def from_proto(cls, n, index: int, opset: int) -> Node:
        from onnx import helper, numpy_helper

        attrs = {}
        for a in n.attribute:
            if a.type in (a.GRAPH, a.GRAPHS):
                attrs[a.name] = "<subgraph>"
                continue
            if a.type == a.TENSOR:
                attrs[a.name] = numpy_helper.to_array(a.t)
                continue
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [s.decode() for s in v]
            attrs[a.name] = v
        return cls(n.op_type, n.name, index, list(n.input), list(n.output), attrs, opset)

    @property
    def label(self) -> str:
        return repr(self.name) if self.name else f"#{self.index} (unnamed)"

    def get(self, key, default=None):
        return self.attrs.get(key, default)

    def unsupported(self, what: str) -> UnsupportedOperatorError:
        return UnsupportedOperatorError(
            f"pyrite: onnx import: op {self.op!r} (node {self.label}, opset {self.opset}) with "
            f"{what} is not supported"
        )

    def error(self, what: str) -> OnnxImportError:
        return OnnxImportError(f"pyrite: onnx import: op {self.op!r} (node {self.label}): {what}")


def register(*ops):
    def deco(build):
        for o in ops:
            CONVERTERS[o] = build
        return build

    return deco


def opt(ins, i):
    return ins[i] if len(ins) > i else None


def attr_or_input(node, ins, key, i):
    """An attribute in older opsets, an input in newer ones: whichever the node has."""
    if key in node.attrs:
        return list(node.attrs[key])
    v = opt(ins, i)
    return None if v is None else ints(v)


def norm_axis(a: int, rank: int, node) -> int:
    if not -rank <= a < max(rank, 1):
        raise node.error(f"axis {a} is out of range for rank {rank}")
    return a % rank if rank else 0


# ---------------------------------------------------------------------------------------------
# elementwise


def _elementwise(np_fn, pr_fn):
    def build(node):
        a = node.attrs

        def run(ins):
            x = ins[0]
            if np_fn is not None and is_host(x):
                return [np.asarray(np_fn(host(x), a))]
            return [pr_fn(dev(x), a)]

        return run

    return build


def _isinf(x, pos, neg):
    if pos and neg:
        return pr.isinf(x)
    if pos or neg:
        return pr.isposinf(x) if pos else pr.isneginf(x)
    return pr.zeros(tuple(x.shape), dtype=pr.bool)


def _hs(x, alpha, beta):
    return (x * alpha + beta).clamp(0.0, 1.0)


_UNARY = {
    "Abs": (lambda x, a: np.abs(x), lambda x, a: x.abs()),
    "Neg": (lambda x, a: -x, lambda x, a: -x),
    "Sqrt": (lambda x, a: np.sqrt(x), lambda x, a: x.sqrt()),
    "Exp": (lambda x, a: np.exp(x), lambda x, a: x.exp()),
    "Log": (lambda x, a: np.log(x), lambda x, a: x.log()),
    "Reciprocal": (lambda x, a: np.reciprocal(x), lambda x, a: x.reciprocal()),
    "Floor": (lambda x, a: np.floor(x), lambda x, a: x.floor()),
    "Ceil": (lambda x, a: np.ceil(x), lambda x, a: x.ceil()),
    "Round": (lambda x, a: np.round(x), lambda x, a: x.round()),
    "Sign": (lambda x, a: np.sign(x), lambda x, a: x.sign()),
    "Not": (lambda x, a: np.logical_not(x), lambda x, a: pr.logical_not(x)),
    "IsNaN": (lambda x, a: np.isnan(x), lambda x, a: pr.isnan(x)),
    "Sin": (None, lambda x, a: x.sin()),
    "Cos": (None, lambda x, a: x.cos()),
    "Tan": (None, lambda x, a: x.tan()),
    "Asin": (None, lambda x, a: x.asin()),
    "Acos": (None, lambda x, a: x.acos()),
    "Atan": (None, lambda x, a: x.atan()),
    "Sinh": (None, lambda x, a: x.sinh()),
    "Cosh": (None, lambda x, a: x.cosh()),
    "Asinh": (None, lambda x, a: x.asinh()),
    "Acosh": (None, lambda x, a: x.acosh()),
    "Atanh": (None, lambda x, a: x.atanh()),
    "Erf": (None, lambda x, a: x.erf()),
    "Relu": (None, lambda x, a: pr.relu(x)),
    "Sigmoid": (None, lambda x, a: x.sigmoid()),
    "Tanh": (None, lambda x, a: x.tanh()),
    "Softplus": (None, lambda x, a: pr.nn.functional.softplus(x)),
    "Softsign": (None, lambda x, a: x / (x.abs() + 1.0)),
    "Mish": (None, lambda x, a: pr.nn.functional.mish(x)),
    "HardSwish": (None, lambda x, a: pr.nn.functional.hardswish(x)),
    "LeakyRelu": (None, lambda x, a: pr.nn.functional.leaky_relu(x, a.get("alpha", 0.01))),
    "Elu": (None, lambda x, a: pr.nn.functional.elu(x, a.get("alpha", 1.0))),
    "Celu": (None, lambda x, a: pr.nn.functional.celu(x, a.get("alpha", 1.0))),
    "Selu": (
        None,
        lambda x, a: (
            pr.nn.functional.elu(x, a.get("alpha", 1.67326319217681884765625))
            * a.get("gamma", 1.05070102214813232421875)
        ),
    ),  # fmt: skip
    "ThresholdedRelu": (None, lambda x, a: pr.where(x > a.get("alpha", 1.0), x, 0.0)),
    "HardSigmoid": (None, lambda x, a: _hs(x, a.get("alpha", 0.2), a.get("beta", 0.5))),
    "Shrink": (
        None,
        lambda x, a: pr.where(
            x < -a.get("lambd", 0.5),
            x + a.get("bias", 0.0),
            pr.where(x > a.get("lambd", 0.5), x - a.get("bias", 0.0), 0.0),
        ),
    ),  # fmt: skip
    "IsInf": (
        None,
        lambda x, a: _isinf(x, a.get("detect_positive", 1), a.get("detect_negative", 1)),
    ),
}
for _k, (_h, _d) in _UNARY.items():
    CONVERTERS[_k] = _elementwise(_h, _d)


@register("Gelu")
def _gelu(node):
    approx = node.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise node.unsupported(f"approximate={approx!r}")
    return lambda ins: [pr.nn.functional.gelu(dev(ins[0]), approximate=approx)]


@register("PRelu")
def _prelu(node):
    def run(ins):
        x, slope = dev(ins[0]), scalar_or_dev(ins[1])
        return [pr.where(x < 0, x * slope, x)]

    return run


@register("Identity", "Dropout")
def _identity(node):
    def run(ins):
        x = ins[0]
        if node.op == "Dropout" and len(node.outputs) > 1 and node.outputs[1]:
            return [x, np.ones(shape_of(x), np.bool_)]
        return [x]

    return run


def _int_div(a, b):
    q = np.floor_divide(a, b)
    return q + ((np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)


def _np_pow(a, b):
    return np.power(a, b).astype(a.dtype)


_BINARY = {
    "Add": (np.add, lambda a, b: a + b),
    "Sub": (np.subtract, lambda a, b: a - b),
    "Mul": (np.multiply, lambda a, b: a * b),
    "Div": (lambda a, b: _int_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b), None),
    "Pow": (_np_pow, lambda a, b: pr.pow(a, b)),
    "Equal": (np.equal, lambda a, b: pr.eq(a, b)),
    "Less": (np.less, lambda a, b: pr.lt(a, b)),
    "LessOrEqual": (np.less_equal, lambda a, b: pr.le(a, b)),
    "Greater": (np.greater, lambda a, b: pr.gt(a, b)),
    "GreaterOrEqual": (np.greater_equal, lambda a, b: pr.ge(a, b)),
    "And": (np.logical_and, lambda a, b: pr.logical_and(a, b)),
    "Or": (np.logical_or, lambda a, b: pr.logical_or(a, b)),
    "Xor": (np.logical_xor, lambda a, b: pr.logical_xor(a, b)),
    "BitwiseAnd": (np.bitwise_and, lambda a, b: pr.bitwise_and(a, b)),
    "BitwiseOr": (np.bitwise_or, lambda a, b: pr.bitwise_or(a, b)),
    "BitwiseXor": (np.bitwise_xor, lambda a, b: pr.bitwise_xor(a, b)),
}


# (ops that take a Python scalar for a 0-d constant operand, saving an upload)
_SCALAR_OK = ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual", "Greater",
              "GreaterOrEqual")  # fmt: skip


def _binary(np_fn, pr_fn, op):
    def build(node):
        def run(ins):
            a, b = ins
            if is_host(a) and is_host(b):
                return [np.asarray(np_fn(host(a), host(b)))]
            ta = dev(a)
            tb = scalar_or_dev(b) if op in _SCALAR_OK else dev(b)
            if op == "Div":
                if ta.dtype.is_floating_point:
                    return [ta / tb]
                return [pr.div(ta, dev(b), rounding_mode="trunc")]
            return [pr_fn(ta, tb)]

        return run

    return build


for _k, (_h, _d) in _BINARY.items():
    CONVERTERS[_k] = _binary(_h, _d, _k)


@register("Mod")
def _mod(node):
    fmod = node.get("fmod", 0)

    def run(ins):
        a, b = ins
        if is_host(a) and is_host(b):
            return [np.fmod(host(a), host(b)) if fmod else np.mod(host(a), host(b))]
        return [(pr.fmod if fmod else pr.remainder)(dev(a), dev(b))]

    return run


@register("Max", "Min", "Sum", "Mean")
def _variadic(node):
    nps = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add, "Mean": np.add}
    prs = {"Max": pr.maximum, "Min": pr.minimum, "Sum": pr.add, "Mean": pr.add}

    def run(ins):
        ins = [v for v in ins if v is not None]
        if all(is_host(v) for v in ins):
            out = host(ins[0])
            for v in ins[1:]:
                out = nps[node.op](out, host(v))
            return [out / len(ins) if node.op == "Mean" else out]
        out = dev(ins[0])
        for v in ins[1:]:
            out = prs[node.op](out, dev(v))
        return [out / len(ins) if node.op == "Mean" else out]

    return run


@register("Where")
def _where(node):
    def run(ins):
        if all(is_host(v) for v in ins):
            return [np.where(*(host(v) for v in ins))]
        c = dev(ins[0])
        a, b = dev(ins[1]), dev(ins[2])
        return [pr.where(c, a, b)]

    return run


@register("Clip")
def _clip(node):
    def bound(ins, i, key):
        if key in node.attrs:
            return float(node.attrs[key])
        v = opt(ins, i)
        return None if v is None else host(v).item()

    def run(ins):
        lo, hi = bound(ins, 1, "min"), bound(ins, 2, "max")
        if is_host(ins[0]):
            return [np.clip(host(ins[0]), lo, hi)]
        x = dev(ins[0])
        if lo is None and hi is None:
            return [x]
        return [x.clamp(lo, hi)]

    return run


@register("Cast")
def _cast(node):
    to = int(node.get("to", 0))
    if to not in _ONNX_TO_NUMPY:
        raise node.unsupported(f"to={to} (an element type pyrite lacks)")

    def run(ins):
        x = ins[0]
        if is_host(x):
            return [host(x).astype(_ONNX_TO_NUMPY[to])]
        return [dev(x).to(pyrite_dtype(to, node))]

    return run


@register("CastLike")
def _cast_like(node):
    def run(ins):
        x, like = ins
        if is_host(x) and is_host(like):
            return [host(x).astype(host(like).dtype)]
        want = dev(like).dtype if not is_host(like) else dev(Const(host(like)[:0], "like")).dtype
        return [dev(x).to(want)]

    return run


# imported last: they register their converters in CONVERTERS
from . import _import_math, _import_nn, _import_shape  # noqa: E402, F401
