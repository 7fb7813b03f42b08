"""The export trace and the ONNX graph built from it.

The trace: the forward runs with grad mode on, the example inputs and every parameter requiring
grad, so every public op on a value derived from them passes autograd's `record()` (the wrapper's
slow path; the bound fast paths in ops/bound.py step aside for tensors autograd records), where
`_state.tracer` sees the op as called: its public name, arguments, keyword arguments and
outputs. An op that calls other public ops records once (the wrapper turns recording off inside
it), so the trace holds the ops the model called, at the level the model called them.

Tensors are identified by object: a traced output's ONNX name is kept under `id(tensor)` (the
trace holds every tensor it saw, so an id is never reused while the graph is built). A tensor
the trace did not make is a constant: a parameter or buffer of the model is an initializer
named by its state_dict name, anything else (a mask built with pr.ones) an initializer of its
values.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..tensor import Tensor
from .errors import OnnxExporterError


class Event:
    """One recorded op call: `alt` is the same call in the second trace (dynamic axes), `check`
    in the trace on the inputs' values permuted, or None."""

    __slots__ = ("name", "args", "kwargs", "out", "inplace", "alt", "check")

    def __init__(self, name, args, kwargs, out, inplace):
        self.name, self.args, self.kwargs, self.out = name, args, kwargs, out
        self.inplace, self.alt, self.check = inplace, None, None

    def bind(self, params, defaults=None):
        """The call's arguments by name: `params` are the op's parameter names in order,
        `defaults` the values of those not given."""
        got = dict(defaults or {})
        for k, v in zip(params, self.args):
            got[k] = v
        got.update(self.kwargs)
        return got


class Tracer:
    """autograd.record's observer during an export (autograd._state.tracer)."""

    def __init__(self, handled=()):
        self.events: list[Event] = []
        self.depth = 0  # > 0 inside a call recorded whole (an nn.LSTM: pyrite/onnx/_rnn.py)
        self.handled = handled  # the op names export maps
        self.marked: list = []  # integer and bool tensors marked as requiring grad (traced())

    def op(self, name, args, kwargs, out, inplace):
        if self.depth:
            return
        self.events.append(Event(name, tuple(args), dict(kwargs), out, inplace))
        traced(out, self.marked)

    def enter(self) -> int:
        """A public op without a gradient rule of its own (autograd._guard) begins: its body
        records the ops it is made of."""
        return len(self.events)

    def leave(self, mark, name, args, kwargs, out, inplace):
        """...and ends: it replaces what its body recorded where export maps it whole, or where
        its body recorded a bare kernel (whose name would mean nothing to the caller) or the op
        itself without its arguments (an output with no gradient path)."""
        if self.depth:
            return
        inner = self.events[mark:]
        if (
            name in self.handled
            or any(e.name.startswith("<") for e in inner)
            or any(e.name == name and not e.args for e in inner)
            or (not inner and _new_tensor(out, args))  # (an integer result: argmax)
        ):
            del self.events[mark:]
            self.events.append(Event(name, tuple(args), dict(kwargs), out, inplace))
            traced(out, self.marked)


def traced(out, marked):
    """Integer and bool tensors the trace made or took as inputs are marked as requiring grad
    (the slot itself: requires_grad_() refuses them), so the ops on them take autograd's
    recording path too, where the trace sees them; autograd gives them no node (not
    differentiable), and the float results of ops on them get one with no edges. `marked`
    collects them, to be unmarked when the trace ends (an integer buffer written in place)."""
    for o in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(o, Tensor) and o.dtype.kind not in "fc" and not o.requires_grad:
            o.requires_grad = True
            marked.append(o)


def _new_tensor(out, args) -> bool:
    """Whether `out` holds a tensor that is none of `args` (an op that returns its input, as
    x.cpu() does, made nothing)."""
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return any(isinstance(o, Tensor) and all(o is not a for a in args) for o in outs)


_ONNX_DTYPES = {
    "float32": 1,  # TensorProto.FLOAT
    "float16": 10,
    "bfloat16": 16,
    "int32": 7,  # pyrite's int64 is int32: exported as INT64, PyTorch's index type
    "int16": 7,
    "int8": 7,
    "uint8": 2,
    "bool": 9,
}


def onnx_dtype(dt) -> int:
    t = _ONNX_DTYPES.get(dt.name if isinstance(dt, D.dtype) else str(dt))
    if t is None:
        raise TypeError(f"pyrite: exporting a tensor of dtype {dt!r} to ONNX is not supported")
    return t


def host(t: Tensor) -> np.ndarray:
    """A tensor's values as numpy, in its exported dtype (integers as int64)."""
    if t.dtype.name == "bfloat16":  # (numpy has none: ml_dtypes', which onnx installs)
        return t.detach().float().numpy().astype(host_dtype(t.dtype))
    a = t.detach().cpu().numpy()
    if a.dtype.kind in "iu" and a.dtype != np.uint8:
        a = a.astype(np.int64)
    return a


class Graph:
    """ONNX nodes, initializers and the names of traced tensors, built op by op."""

    def __init__(self, onnx, opset: int, named: dict):
        self.onnx, self.h, self.opset = onnx, onnx.helper, opset
        self.nodes: list = []
        self.inits: dict = {}  # name -> TensorProto
        self.env: dict = {}  # id(tensor) -> ONNX name
        self.named = named  # id(parameter or buffer) -> state_dict name
        # (input name, dim, size in the first trace, size in the second) of each dynamic axis
        self.sources: list = []
        self._n = 0

    def fresh(self, hint="v") -> str:
        self._n += 1
        return f"/{hint}_{self._n}"

    # -- values -----------------------------------------------------------------------------
    def name(self, t) -> str:
        """The ONNX name of tensor `t`: traced, a parameter or buffer, or a new constant."""
        got = self.env.get(id(t))
        if got is not None:
            return got
        if not isinstance(t, Tensor):
            raise TypeError(f"pyrite: ONNX export expected a tensor, got {type(t).__name__}")
        nm = self.named.get(id(t))
        if nm is None and t._base is not None and id(t._base) in self.named:
            base = t._base
            if t._shape == base._shape or t.numel() == base.numel():
                # a view of a buffer (batch_norm's (1, C, 1, 1) running stats): the buffer
                # under its own name, reshaped
                src = self.param(base)
                if t._shape == base._shape:
                    return src
                out = self.node("Reshape", [src, self.ints(list(t._shape))])
                self.env[id(t)] = out
                return out
        if nm is not None:
            return self.param(t)
        base = t._base
        if base is not None and id(base) in self.env:
            # (a view of a traced tensor the trace did not see made: its values would be the
            # example's)
            raise OnnxExporterError(
                f"pyrite: onnx export: a view of the traced tensor '{self.env[id(base)]}' was "
                "made by an op the trace does not see (under no_grad, or of a detach()ed value)"
            )
        out = self.const(host(t), "const")
        self.env[id(t)] = out
        return out

    def param(self, t) -> str:
        nm = self.named[id(t)]
        if nm not in self.inits:
            self.inits[nm] = self.onnx.numpy_helper.from_array(host(t), nm)
        self.env[id(t)] = nm
        return nm

    def const(self, a, hint="const") -> str:
        a = np.asarray(a)
        nm = self.fresh(hint)
        self.inits[nm] = self.onnx.numpy_helper.from_array(a, nm)
        return nm

    def ints(self, values) -> str:
        return self.const(np.asarray(values, dtype=np.int64), "shape")

    def scalar(self, v, like) -> str:
        """Python number `v` as a 0-d constant of tensor `like`'s exported dtype."""
        return self.const(np.asarray(v, dtype=host_dtype(like.dtype)), "scalar")

    def dyn_shape(self, shape, alt):
        """A shape tensor: `shape` (the first trace's sizes) where the second trace (`alt`)
        agrees, the size of the input dim whose sizes were the same pair where it does not
        (Shape, Gather); a list of ints where they all agree, None where a size follows no
        input's."""
        if list(shape) == list(alt):
            return self.ints(list(shape))
        parts = []
        for n1, n2 in zip(shape, alt):
            if n1 == n2:
                parts.append(self.ints([n1]))
                continue
            src = next(((nm, d) for nm, d, a, b in self.sources if (a, b) == (n1, n2)), None)
            if src is None:
                return None
            parts.append(self.node("Gather", [self.node("Shape", [src[0]]), self.ints([src[1]])]))
        return self.node("Concat", parts, axis=0) if len(parts) > 1 else parts[0]

    def bind(self, t, name):
        self.env[id(t)] = name

    # -- nodes ------------------------------------------------------------------------------
    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.fresh(op) for _ in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.h.make_node(op, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def reduce(self, op, x, axes, keepdims):
        """op (ReduceMean, ReduceSum, ReduceMax, ...) over `axes` (None: all): the axes are an
        attribute before opset 18 (13 for ReduceSum), an input from then on."""
        since = 13 if op == "ReduceSum" else 18
        if axes is None:
            return self.node(op, [x], keepdims=int(keepdims))
        if self.opset >= since:
            return self.node(op, [x, self.ints(list(axes))], keepdims=int(keepdims))
        return self.node(op, [x], axes=list(axes), keepdims=int(keepdims))


def host_dtype(dt):
    if dt.name == "float16":
        return np.float16
    if dt.name == "bfloat16":
        import ml_dtypes  # (onnx's own dependency)

        return ml_dtypes.bfloat16
    if dt.kind == "f":
        return np.float32
    if dt.is_bool:
        return np.bool_
    return np.uint8 if dt.name == "uint8" else np.int64
