"""`pyrite.onnx.load_model`: an ONNX model as a trainable `pyrite.nn.Module` (the other direction
of pyrite.onnx.export).

    model = pyrite.onnx.load_model("resnet.onnx")  # a path, bytes, or an onnx.ModelProto
    y = model(x)                                   # graph inputs in order, or by ONNX name
    opt = pyrite.optim.AdamW(model.parameters())   # float initializers are Parameters

**What comes in.** The graph's float initializers (float32/16, bfloat16, float64 as float32)
become `Parameter`s (requires_grad=True, so the model fine-tunes with pyrite's autograd and
optimizers), except 0-d ones (the graph's numbers: `x * 2`'s 2, an epsilon) and those used
only as BatchNormalization's mean and var (running statistics: buffers, as in torch's
BatchNorm), which are buffers, and the others (integers, bool) buffers (int64 values outside
int32, such as Slice's INT64_MAX ends, stay host constants and are not registered), registered under sanitized names (every
character outside [A-Za-z0-9_] becomes "_", a clash gets a numeric suffix): `state_dict()` keys
are those names, and `model.onnx_names` maps each back to its ONNX name (`model.param_names`
the other way). Graph inputs that are also initializers (old exporters'
keep_initializers_as_inputs) are initializers, not forward arguments.
`forward(*inputs, **by_onnx_name)` takes pyrite tensors (or anything `pyrite.tensor` takes) and
returns one tensor, or a tuple when the graph has several outputs.

**How it runs.** Each node becomes a converter closure at load time (attributes parsed and
checked once: _import_ops.py elementwise, _import_math.py products/softmax/reductions,
_import_shape.py shapes and indexing, _import_nn.py conv/pool/norm/Pad/Resize, _import_rnn.py
LSTM/GRU/RNN), run in the graph's order by
`forward`. Values are pyrite tensors (on the device, differentiable) or host numpy arrays:
Constant nodes, non-float initializers, `Shape`/`Size` results and whatever is computed only from
those (Gather, Concat, Unsqueeze, Cast, arithmetic, Range, ConstantOfShape, ...) are computed
with numpy on the host, so shape subgraphs (Shape -> Gather -> Concat -> Reshape) give Python
ints and never read the device back. Nodes whose inputs are all constants are folded once at
load time; a host constant that a device op needs is uploaded once and cached.

**Supported ops** (132, `pyrite.onnx.supported_ops()`):
Abs, Acos, Acosh, Add, And, ArgMax, ArgMin, Asin, Asinh, Atan, Atanh, AveragePool,
BatchNormalization, BitwiseAnd, BitwiseOr, BitwiseXor, Cast, CastLike, Ceil, Celu, Clip, Concat,
Constant, ConstantOfShape, Conv, ConvTranspose, Cos, Cosh, CumSum, DepthToSpace, Div, Dropout,
Einsum, Elu, Equal, Erf, Exp, Expand, Flatten, Floor, GRU, Gather, GatherElements, GatherND,
Gelu, Gemm, GlobalAveragePool, GlobalMaxPool, Greater, GreaterOrEqual, GroupNormalization,
HardSigmoid, HardSwish, Hardmax, Identity, InstanceNormalization, IsInf, IsNaN, LRN, LSTM,
LayerNormalization, LeakyRelu, Less, LessOrEqual, Log, LogSoftmax, LpPool, MatMul, Max, MaxPool,
Mean, Min, Mish, Mod, Mul, Neg, NonZero, Not, OneHot, Or, PRelu, Pad, Pow, RNN, Range,
Reciprocal, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceMax, ReduceMean, ReduceMin,
ReduceProd, ReduceSum, ReduceSumSquare, Relu, Reshape, Resize, Round, Scatter, ScatterElements,
ScatterND, Selu, Shape, Shrink, Sigmoid, Sign, Sin, Sinh, Size, Slice, Softmax, Softplus,
Softsign, SpaceToDepth, Split, Sqrt, Squeeze, Sub, Sum, Tan, Tanh, ThresholdedRelu, Tile, TopK,
Transpose, Trilu, Unsqueeze, Upsample, Where, Xor.
Resize computes each axis's neighbour indices and weights on the host by ONNX's own formulas
(every coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside, axes,
keep_aspect_ratio_policy), then gathers and weighs on the device: exact, not mapped onto
interpolate. LSTM/GRU/RNN unroll over time (default activations, no peepholes or clip).

**Opsets.** The model's default-domain opset (opset_import) picks each node's semantics:
opset 13-21 is what is tested, older models load where the attribute forms are implemented
(Split/Squeeze/Unsqueeze axes and ReduceSum axes as attributes before 13, other Reduce* before
18; Clip min/max as attributes before 11; Pad pads as an attribute before 11; Softmax/
LogSoftmax/Hardmax flatten to 2-D at `axis` before 13 and default axis=1; Split's
num_outputs from 18; GroupNormalization's per-group scale before 21; Gelu from 20; Resize-10,
which names no coordinate mode, and Upsample use asymmetric coordinates, nearest rounding down
where an axis grows and up where it shrinks, as onnxruntime). scripts/fuzz_onnx_import.py
checks opsets 2-21 against onnx's reference evaluator.

**int64.** pyrite's integers are int32 (WebGPU has no 64-bit integers): int64 values stay int64
while they live on the host (shapes, axes, indices from constants), and become int32 when they
go to the device, after a range check that raises OnnxImportError naming the value. ONNX
outputs declared int64 (ArgMax, TopK indices, NonZero, Cast to int64, ...) are pyrite int32
tensors; float64 computes as float32.

**Refused**, at load time with `UnsupportedOperatorError` naming the op type, the node and the
opset: ops not in `supported_ops()`, non-default domains (com.microsoft, ai.onnx.ml), ops with
subgraphs (If, Loop, Scan), string tensors, and attribute values a converter cannot map exactly
(Resize's antialias, BatchNormalization's training_mode=1, MaxPool's Indices output,
AveragePool/LpPool dilations, LSTM/GRU/RNN activations other than the default, clip,
peepholes, ...). At forward time: a wrong number of inputs (TypeError), an unknown keyword, or
an input whose rank or static dims differ from the graph's (pyrite.ShapeError), each naming
the input; recurrent sequence_lens shorter than the sequence (UnsupportedOperatorError).
"""

from __future__ import annotations

import os
import re

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..nn.module import Module, Parameter
from ..tensor import Tensor
from ._import_ops import CONVERTERS, Const, Node, OnnxImportError, as_output, int32_ok, upload
from .errors import UnsupportedOperatorError

__all__ = ["load_model", "OnnxModule", "supported_ops"]

_DEFAULT_DOMAINS = ("", "ai.onnx")


def _onnx():
    try:
        import onnx
    except ImportError as e:
        raise ImportError(
            "pyrite: pyrite.onnx.load_model reads the file with the `onnx` package, which is "
            "not installed: pip install onnx (or pip install 'pyrite[onnx]')"
        ) from e
    return onnx


def supported_ops() -> list[str]:
    """The ONNX op types load_model converts (default domain)."""
    return sorted(CONVERTERS)


def load_model(f) -> OnnxModule:
    """An ONNX model (a path, a binary file object, bytes, or an onnx.ModelProto) as an
    OnnxModule; refuses an op it cannot convert here, naming it."""
    onnx = _onnx()
    if isinstance(f, onnx.ModelProto):
        proto = f
    elif isinstance(f, (bytes, bytearray, memoryview)):
        proto = onnx.load_from_string(bytes(f))
    elif isinstance(f, (str, os.PathLike)):
        proto = onnx.load(os.fspath(f))
    elif hasattr(f, "read"):
        proto = onnx.load_from_string(f.read())
    else:
        raise TypeError(
            "pyrite: onnx.load_model takes a path, bytes, a binary file or an onnx.ModelProto, "
            f"not {type(f).__name__}"
        )
    return OnnxModule(proto)


def _opset(proto) -> int:
    for imp in proto.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 1


def _sanitized(name: str, taken: set) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name) or "_"
    if base[0].isdigit():
        base = "_" + base
    out, k = base, 1
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def _running_stats(g) -> set:
    """Float initializers used only as BatchNormalization's mean and var (running statistics,
    buffers as in torch's BatchNorm, not Parameters)."""
    bn, other = set(), set()
    for n in g.node:
        for i, nm in enumerate(n.input):
            (bn if n.op_type == "BatchNormalization" and i in (3, 4) else other).add(nm)
    return bn - other


def _input_spec(vi, elem_names):
    """(elem type, dims) of a graph input; dims: int, or None where symbolic/unknown."""
    t = vi.type.tensor_type
    dims = None
    if t.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    return int(t.elem_type), dims


class OnnxModule(Module):
    """An ONNX graph run with pyrite ops (made by pyrite.onnx.load_model). `input_names` and
    `output_names` are the graph's; `onnx_names` maps state_dict names to initializer names."""

    def __init__(self, proto):
        super().__init__()
        onnx = _onnx()
        from onnx import numpy_helper

        self.opset = _opset(proto)
        g = proto.graph
        inits = {t.name: t for t in g.initializer}
        self.input_names = [vi.name for vi in g.input if vi.name not in inits]
        self.output_names = [vi.name for vi in g.output]
        self._input_specs = {vi.name: _input_spec(vi, onnx) for vi in g.input}
        self.onnx_names: dict[str, str] = {}
        self.param_names: dict[str, str] = {}
        self._consts: dict[str, Const] = {}
        taken: set = set()
        stats = _running_stats(g)
        for name, t in inits.items():
            if t.data_type == onnx.TensorProto.STRING:
                raise OnnxImportError(f"pyrite: onnx import: initializer {name!r} holds strings")
            arr = numpy_helper.to_array(t)
            key = _sanitized(name, taken)
            self.onnx_names[key], self.param_names[name] = name, key
            floating = arr.dtype.kind == "f" or t.data_type == onnx.TensorProto.BFLOAT16
            # (a 0-d float initializer is a number of the graph, `x * 2`'s 2 or an epsilon,
            # as exporters write them: a buffer, or an optimizer's weight decay would move it)
            if floating and name not in stats and arr.ndim > 0:
                self.register_parameter(key, Parameter(upload(arr, repr(name)), requires_grad=True))
            elif floating:
                self.register_buffer(key, upload(arr, repr(name)))
            else:
                self._consts[name] = Const(arr, name)
                if int32_ok(arr) if arr.dtype.kind in "iu" else True:
                    self.register_buffer(key, self._consts[name].dev())
                else:  # (an int64 sentinel such as Slice's INT64_MAX: host only)
                    del self.onnx_names[key], self.param_names[name]
        self._nodes = []
        for i, n in enumerate(g.node):
            node = Node.from_proto(n, i, self.opset)
            self._check_domain(node, n.domain, proto)
            conv = CONVERTERS.get(node.op)
            if conv is None:
                raise UnsupportedOperatorError(
                    f"pyrite: onnx import: op {node.op!r} (node {node.label}, opset "
                    f"{self.opset}) is not supported; supported ops: pyrite.onnx.supported_ops()"
                )
            self._nodes.append((node, conv(node)))
        self._fold_constants()

    def _check_domain(self, node, domain, proto):
        if domain not in _DEFAULT_DOMAINS:
            version = next((i.version for i in proto.opset_import if i.domain == domain), "?")
            raise UnsupportedOperatorError(
                f"pyrite: onnx import: op {domain}::{node.op} (node {node.label}, opset "
                f"{domain} {version}) is not supported: only the default ONNX domain is"
            )

    def _fold_constants(self):
        """Nodes whose inputs are all constants run once here, on the host where they can."""
        kept = []
        for node, run in self._nodes:
            ins = [self._consts.get(nm) if nm else None for nm in node.inputs]
            if node.op in ("Dropout",) or any(
                nm and ins[i] is None for i, nm in enumerate(node.inputs)
            ):
                kept.append((node, run))
                continue
            outs = run(ins)
            if not all(isinstance(o, (np.ndarray, Const)) for o in outs if o is not None):
                kept.append((node, run))  # (a device result: recomputed each forward)
                continue
            for nm, o in zip(node.outputs, outs):
                if nm and o is not None:
                    self._consts[nm] = o if isinstance(o, Const) else Const(o, nm)
        self._nodes = kept

    def extra_repr(self) -> str:
        return (
            f"opset={self.opset}, inputs={self.input_names}, outputs={self.output_names}, "
            f"nodes={len(self._nodes)}"
        )

    def _bound(self, args, kwargs) -> dict:
        names = self.input_names
        if len(args) > len(names):
            raise TypeError(
                f"pyrite: OnnxModule.forward takes {len(names)} input(s) {names}, got "
                f"{len(args)} positional"
            )
        got = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise TypeError(f"pyrite: OnnxModule.forward: no graph input named {k!r} ({names})")
            if k in got:
                raise TypeError(f"pyrite: OnnxModule.forward: input {k!r} given twice")
            got[k] = v
        missing = [n for n in names if n not in got]
        if missing:
            raise TypeError(
                f"pyrite: OnnxModule.forward takes {len(names)} input(s) {names}; missing {missing}"
            )
        return {k: self._checked(k, v) for k, v in got.items()}

    def _checked(self, name, v) -> Tensor:
        if not isinstance(v, Tensor):
            v = upload(np.asarray(v), f"input {name!r}")
        elem, dims = self._input_specs[name]
        want_float = elem in (1, 10, 11, 16)
        if elem and want_float != v.dtype.is_floating_point and v.dtype is not D.complex64:
            raise TypeError(
                f"pyrite: OnnxModule.forward: input {name!r} is {v.dtype}, the graph declares "
                f"{'a float' if want_float else 'an integer/bool'} type"
            )
        if dims is not None:
            shape = tuple(v.shape)
            if len(shape) != len(dims) or any(
                d is not None and d > 0 and d != s for d, s in zip(dims, shape)
            ):
                want = tuple("?" if d is None or d <= 0 else d for d in dims)
                raise ShapeError(
                    f"pyrite: OnnxModule.forward: input {name!r} has shape {shape}, the graph "
                    f"declares {want}"
                )
        return v

    def forward(self, *args, **kwargs):
        env: dict = dict(self._consts)
        for name, key in self.param_names.items():
            if name not in self._consts:
                env[name] = getattr(self, key)
        env.update(self._bound(args, kwargs))
        for node, run in self._nodes:
            ins = [env[nm] if nm else None for nm in node.inputs]
            outs = run(ins)
            for nm, o in zip(node.outputs, outs):
                if nm:
                    env[nm] = o
        outs = tuple(as_output(env[nm], nm) for nm in self.output_names)
        return outs[0] if len(outs) == 1 else outs
