"""The export itself: the trace (pyrite/onnx/_graph.py), the op mappings (_ops.py,
_shape_ops.py, _more_ops.py, _rnn.py) and the file. Imported on the first export."""

from __future__ import annotations

import inspect
import os
import warnings

import numpy as np

from .._fs import write_atomic
from ..random import get_rng_state, set_rng_state
from ..tensor import Tensor

# (_more_ops, _rnn and _shape_ops each register their handlers in _ops.HANDLERS)
from . import TrainingMode, _exporting, _more_ops, _rnn, _shape_ops  # noqa: F401
from ._graph import Graph, Tracer, host, onnx_dtype, traced
from ._ops import HANDLERS, unsupported
from .errors import OnnxExporterError

DEFAULT_OPSET = 17
OPSETS = range(13, 21)


def _onnx():
    try:
        import onnx
    except ImportError as e:
        raise ImportError(
            "pyrite: pyrite.onnx.export writes the file with the `onnx` package, which is not "
            "installed: pip install onnx (or pip install 'pyrite[onnx]')"
        ) from e
    return onnx


def detached(o):
    if isinstance(o, Tensor):
        return o.detach()
    if isinstance(o, (list, tuple)):
        return type(o)(detached(v) for v in o)
    return o


def write(model, args, f, kwargs, input_names, output_names, opset_version, dynamic_axes,
           export_params, keep_initializers_as_inputs, training):  # fmt: skip
    """The export; returns the traced forward's outputs."""
    onnx = _onnx()
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if opset not in OPSETS:
        raise ValueError(f"pyrite: onnx export supports opset versions 13 to 20, not {opset}")
    if f is None:
        raise ValueError("pyrite: onnx.export needs `f`, a path or a binary file object")
    args, kwargs = _normalized(args, kwargs)
    proto, outs = _build(model, args, kwargs, opset, input_names, output_names, dynamic_axes,
                         export_params, onnx, _mode(training))  # fmt: skip
    if keep_initializers_as_inputs:
        g = proto.graph
        g.input.extend(
            onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
            for t in g.initializer
        )
    if proto.ByteSize() >= 2**31:  # (protobuf's limit on one message)
        raise OnnxExporterError(
            "pyrite: onnx export: the model is 2 GiB or more, protobuf's limit for one file; "
            "pyrite does not write ONNX external data yet"
        )
    onnx.checker.check_model(proto)
    data = proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        write_atomic(f, lambda fh: fh.write(data))
    else:
        f.write(data)
    return outs


def _normalized(args, kwargs):
    """torch's spellings of the example inputs: a tensor, a tuple, a tuple ending in a dict of
    keyword arguments."""
    if isinstance(args, Tensor) or not isinstance(args, (tuple, list)):
        args = (args,)
    args = tuple(args)
    if kwargs is None and args and isinstance(args[-1], dict):
        args, kwargs = args[:-1], args[-1]
    return args, dict(kwargs or {})


def axes_from_shapes(model, args, kwargs, input_names, dynamic_shapes):
    """torch.export's `dynamic_shapes` as dynamic_axes: by the forward's parameter names (a
    dict) or by position (a tuple); a tensor's spec maps dims (a dict) or lists them (a tuple),
    each a torch.export.Dim (labelled by its name), a string label, or None (static)."""
    args, kwargs = _normalized(args, kwargs)
    values = list(args) + list(kwargs.values())
    params = _params(model)
    keys = [params[i] if i < len(params) else None for i in range(len(args))] + list(kwargs)
    if isinstance(dynamic_shapes, dict):
        specs = [dynamic_shapes.get(k) for k in keys]
    else:
        specs = list(dynamic_shapes) + [None] * (len(values) - len(dynamic_shapes))
    flat, _ = _flatten(values)
    names = _input_names(model, args, kwargs, len(flat), input_names)
    got, at = {}, 0
    for v, spec in zip(values, specs):
        if isinstance(v, Tensor) and spec is not None:
            items = spec.items() if isinstance(spec, dict) else enumerate(spec)
            nm = names[at]
            dims = {int(d): _label(x, nm, d) for d, x in items if x is not None}
            if dims:
                got[nm] = dims
        at += len(_flatten([v])[0])
    return got


def _label(dim, name, d) -> str:
    if isinstance(dim, str):
        return dim
    return getattr(dim, "__name__", None) or f"{name}_dim_{d}"


def _modules(model):
    from ..nn import Module

    return model if isinstance(model, Module) else None


def _build(model, args, kwargs, opset, input_names, output_names, dynamic_axes, export_params,
           onnx, mode):  # fmt: skip
    """The ModelProto of `model` run on args/kwargs, and the traced forward's outputs."""
    while getattr(model, "_orig_mod", None) is not None:
        # (a pr.compile'd module replays recorded dispatches, no ops: its original is traced)
        model = model._orig_mod
    module = _modules(model)
    named = {}
    params = []
    if module is not None:
        for nm, t in module.state_dict(keep_vars=True).items():
            named.setdefault(id(t), nm)
        params = list(module.parameters())
    flat, _ = _flatten(list(args) + list(kwargs.values()))
    names = _input_names(model, args, kwargs, len(flat), input_names)
    axes = _axes(dynamic_axes)
    rng_state = get_rng_state()  # (each trace draws the same random numbers)
    restore = _buffers(module)  # (and starts from the same buffers)
    events, outs, inputs = _trace(model, module, params, args, kwargs, mode)
    restore()
    _check_trace(events, model, module, params, args, kwargs, mode, rng_state)
    restore()
    alt_outs, alt_inputs = outs, inputs
    if axes:  # (a second trace, each dynamic axis one longer)
        alt_args, alt_kwargs = _resized(args, kwargs, flat, names, axes, dynamic_axes)
        set_rng_state(rng_state)
        alt_events, alt_outs, alt_inputs = _trace(model, module, params, alt_args, alt_kwargs, mode)
        restore()
        if [e.name for e in alt_events] != [e.name for e in events]:
            raise OnnxExporterError(
                "pyrite: onnx export: the model calls other ops when the dynamic axes' sizes "
                "change; export it without dynamic_axes"
            )
        for e, a in zip(events, alt_events):
            e.alt = a
    g = Graph(onnx, opset, named)
    h = onnx.helper
    graph_inputs = []
    sources = []  # (input name, dim, size in the first trace, in the second) of dynamic axes
    for t, t2, nm in zip(inputs, alt_inputs, names):
        g.bind(t, nm)
        graph_inputs.append(_value_info(h, nm, t, axes.get(nm)))
        for d in axes.get(nm, {}):
            d = d if d >= 0 else d + t.dim()
            sources.append((nm, d, t.shape[d], t2.shape[d]))
    if not export_params:
        for p in params:
            nm = named.get(id(p))
            if nm is not None:
                g.bind(p, nm)
                graph_inputs.append(_value_info(h, nm, p, None))
    g.sources = sources
    _convert(g, events)
    out_flat, _ = _flatten([outs])
    alt_flat, _ = _flatten([alt_outs])
    onames = list(output_names or [])
    onames += [("output" if i == 0 else f"output_{i}") for i in range(len(onames), len(out_flat))]
    graph_outputs = []
    for t, t2, nm in zip(out_flat, alt_flat, onames):
        g.nodes.append(h.make_node("Identity", [g.name(t)], [nm]))
        # (dims that follow the dynamic axes without a label of their own: torch's spelling)
        dyn = {d: f"{nm}_dim_{d}" for d in range(t.dim()) if t.shape[d] != t2.shape[d]}
        dyn.update(axes.get(nm, {}))
        graph_outputs.append(_value_info(h, nm, t, dyn))
    nodes, inits = _live(g.nodes, g.inits, [o.name for o in graph_outputs])
    _warn_unread(nodes, graph_inputs[: len(inputs)], onames)
    graph = h.make_graph(nodes, "pyrite", graph_inputs, graph_outputs, initializer=inits)
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)],
                         producer_name="pyrite")  # fmt: skip
    proto.ir_version = min(proto.ir_version, 8 if opset <= 18 else 9)
    return proto, outs


def _buffers(module):
    """A function that puts the module's buffers back as they are now: each trace starts from
    them, and the file and the model keep them (a forward that writes a buffer in place runs
    more than once here)."""
    from ..autograd import no_grad

    kept = [(b, b.detach().clone()) for b in module.buffers()] if module is not None else []

    def restore():
        with no_grad():
            for b, v in kept:
                b.copy_(v)

    return restore


def _check_trace(events, model, module, params, args, kwargs, mode, rng_state):
    """Trace again on the inputs' values permuted (the same values, so indices stay in range,
    each moved one place on; floats also halved): a constant an op reads whose values then differ was computed from the inputs by
    ops the trace does not see, and _convert refuses it. Skipped where the model refuses those
    inputs; a model that calls other ops for them takes a branch on its inputs' values, which
    the file keeps as the example took it (a warning, as torch's tracer)."""
    from .. import tensor as _tensor

    def permuted(o):  # (rolled by one: the same values, each elsewhere unless all alike)
        if isinstance(o, Tensor):
            a = np.roll(host(o).ravel(), 1).reshape(o.shape)
            if o.dtype.kind == "f":  # (and halved: a max or a sum of them moves too)
                a = a * 0.5
            return _tensor(a, dtype=o.dtype)
        if isinstance(o, (list, tuple)):
            return type(o)(permuted(v) for v in o)
        if isinstance(o, dict):
            return {k: permuted(v) for k, v in o.items()}
        return o

    set_rng_state(rng_state)
    try:
        checked, _, _ = _trace(model, module, params, permuted(args), permuted(kwargs), mode)
    except Exception:  # (the model refuses such inputs: no check)
        return
    if [e.name for e in checked] != [e.name for e in events]:
        warnings.warn(
            "pyrite: onnx export: the model calls other ops for other input values (a branch "
            "on its inputs' values); the file keeps the ops the example input took",
            stacklevel=5,
        )
        return
    for e, c in zip(events, checked):
        e.check = c


def _convert(g, events):
    """Each recorded op as ONNX nodes, in order."""
    for ev in events:
        inplace = ev.inplace or (ev.name.endswith("_") and not ev.name.endswith("__"))
        handler = HANDLERS.get(ev.name)
        if handler is None and inplace:
            handler = HANDLERS.get(ev.name[:-1])  # (relu_: an in-place op as its own)
        if handler is None:
            raise unsupported(ev.name, g.opset)
        if inplace and ev.args and isinstance(ev.args[0], Tensor) and ev.args[0] is not ev.out:
            # (args[0] stands for the written tensor's value before the write)
            if id(ev.args[0]) not in g.env:
                g.bind(ev.args[0], g.name(ev.out))
        if ev.check is not None:
            _check_constants(g, ev)
        if ev.alt is not None:
            _dynamic_constants(g, ev)
        handler(g, ev)


def _check_constants(g, ev):
    """Refuse a constant the op reads whose values the inputs' values change."""
    mine, _ = _flatten([ev.args, ev.kwargs])
    other, _ = _flatten([ev.check.args, ev.check.kwargs])
    for t, t2 in zip(mine, other):
        base = t._base
        if id(t) in g.env or id(t) in g.named or (base is not None and id(base) in g.named):
            continue
        if t.shape != t2.shape or t.dtype != t2.dtype:
            continue
        if not np.array_equal(host(t), host(t2), equal_nan=True):
            raise OnnxExporterError(
                f"pyrite: onnx export: '{ev.name}' reads a tensor computed from the model's "
                "inputs by ops the trace does not see (run under no_grad or on detach()ed "
                "values), which would be written as the example's values"
            )


def _warn_unread(nodes, inputs, outputs):
    used = {i for n in nodes for i in n.input}
    for vi in inputs:
        if vi.name not in used and vi.name not in outputs:
            warnings.warn(
                f"pyrite: onnx export: the graph does not read input '{vi.name}' (the model "
                "ignores it, or reads it only under no_grad or through detach())",
                stacklevel=5,
            )


def _dynamic_constants(g, ev):
    """Constants the op reads whose shape follows a dynamic axis (an RNN's zero initial state
    made with the batch's size): a uniform one becomes that value expanded to a shape read from
    the input that carries the axis; another cannot follow it and raises."""
    mine, _ = _flatten([ev.args, ev.kwargs])
    other, _ = _flatten([ev.alt.args, ev.alt.kwargs])
    for t, t2 in zip(mine, other):
        if t.shape == t2.shape or id(t) in g.env or id(t) in g.named:
            continue
        a = host(t)
        if a.size == 0 or not (a == a.flat[0]).all():
            raise OnnxExporterError(
                f"pyrite: onnx export: '{ev.name}' reads a constant tensor whose shape follows a "
                "dynamic axis; export it without dynamic_axes"
            )
        full = g.dyn_shape(list(t.shape), list(t2.shape))
        if full is None:
            raise OnnxExporterError(
                f"pyrite: onnx export: '{ev.name}' reads a constant tensor whose shape follows "
                "the dynamic axes by no input's size; export it without dynamic_axes"
            )
        one = g.const(a.reshape(-1)[:1].reshape(()), "fill")
        g.bind(t, g.node("Expand", [one, full]))


def _flatten(obj):
    """The tensors in nested tuples/lists/dicts, in order."""
    got = []

    def walk(o):
        if isinstance(o, Tensor):
            got.append(o)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)

    walk(obj)
    return got, None


def _params(model) -> list:
    """The forward's positional parameter names."""
    fn = getattr(model, "forward", model)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in sig.parameters.values() if p.kind in kinds]


def _input_names(model, args, kwargs, n, given):
    """`given`, then the forward's parameter names: a tensor argument by its parameter's name, the
    tensors of a tuple argument (an LSTM's (h, c)) as name_0, name_1, ..."""
    names = list(given or [])
    params = _params(model)
    auto = []
    for i, a in enumerate(list(args) + list(kwargs.values())):
        base = list(kwargs)[i - len(args)] if i >= len(args) else None
        base = base or (params[i] if i < len(params) else f"input_{i}")
        flat, _ = _flatten([a])
        if isinstance(a, Tensor):
            auto.append(base)
        else:
            auto.extend(f"{base}_{j}" for j in range(len(flat)))
    names += auto[len(names) : n]
    return names[:n]


def _axes(dynamic_axes):
    """{name: {dim: label}} from torch's two spellings ({name: [dims]} labels them itself)."""
    got = {}
    for nm, spec in (dynamic_axes or {}).items():
        if isinstance(spec, dict):
            got[nm] = {int(d): str(v) for d, v in spec.items()}
        else:
            got[nm] = {int(d): f"{nm}_dynamic_axes_{i + 1}" for i, d in enumerate(spec)}
    return got


def _value_info(h, nm, t, dyn):
    dims = list(t.shape)
    for d, label in (dyn or {}).items():
        dims[d if d >= 0 else d + len(dims)] = label
    return h.make_tensor_value_info(nm, onnx_dtype(t.dtype), dims)


def _resized(args, kwargs, flat, names, axes, spec):
    """The example inputs with each dynamic axis longer (a second trace's inputs): by 1, 2, ...
    a label where dynamic_axes gave labels (one label, one size: the batch of an input and of
    its hidden state), else by 1 + the dim's position, so two axes rarely grow alike (a size is
    traced to its input by the pair of sizes it took)."""
    from .. import zeros
    from ..ops.random import randn

    labelled = any(isinstance(v, dict) for v in (spec or {}).values())
    order: dict = {}
    swap = {}
    for t, nm in zip(flat, names):
        dyn = axes.get(nm)
        if not dyn:
            continue
        shape = list(t.shape)
        for d, label in dyn.items():
            grow = order.setdefault(label, len(order) + 1) if labelled else 1 + d % t.dim()
            shape[d] += grow
        swap[id(t)] = randn(shape) if t.dtype.kind == "f" else zeros(shape, dtype=t.dtype)

    def sub(o):
        if isinstance(o, Tensor):
            return swap.get(id(o), o)
        if isinstance(o, (list, tuple)):
            return type(o)(sub(v) for v in o)
        if isinstance(o, dict):
            return {k: sub(v) for k, v in o.items()}
        return o

    return sub(args), sub(kwargs)


def _mode(training) -> TrainingMode:
    if training is None or training is False:
        return TrainingMode.EVAL
    if training is True:
        return TrainingMode.TRAINING
    return TrainingMode(int(training))


def _trace(model, module, params, args, kwargs, mode=TrainingMode.EVAL):
    """Run the model under the export trace: (events, outputs, the traced input tensors)."""
    from ..autograd import _state, enable_grad

    modes = [(m, m.training) for m in module.modules()] if module is not None else []
    was = [(p, p.requires_grad) for p in params]
    tracer = Tracer(HANDLERS)

    def leaf(o):  # (inputs require grad so the ops on them record)
        if isinstance(o, Tensor):
            t = o.detach()
            if t.dtype.kind == "f":
                # (a copy made from a leaf: the forward may write into its input in place,
                # which autograd refuses on a leaf that requires grad)
                t = t.requires_grad_(True).clone()
            else:
                traced(t, tracer.marked)
            return t
        if isinstance(o, (list, tuple)):
            return type(o)(leaf(v) for v in o)
        if isinstance(o, dict):
            return {k: leaf(v) for k, v in o.items()}
        return o

    with enable_grad():
        targs, tkwargs = leaf(args), leaf(kwargs)
    inputs, _ = _flatten(list(targs) + list(tkwargs.values()))
    try:
        if mode != TrainingMode.PRESERVE:
            for m, _ in modes:
                m.training = mode == TrainingMode.TRAINING
        for p in params:
            p.requires_grad_(True)
        _exporting[0] = True
        _state.tracer = tracer
        with enable_grad(), _rnn.captured(tracer):
            out = model(*targs, **tkwargs)
    finally:
        _state.tracer = None
        _exporting[0] = False
        for m, t in modes:
            m.training = t
        for p, r in was:
            p.requires_grad_(r)
        for t in tracer.marked:
            t.requires_grad = False
    return tracer.events, out, inputs


def _live(nodes, inits, outputs):
    """The nodes the outputs depend on, in order, and the initializers they read."""
    need = set(outputs)
    keep = []
    for n in reversed(nodes):
        if any(o in need for o in n.output):
            keep.append(n)
            need.update(i for i in n.input if i)
    keep.reverse()
    return keep, [t for nm, t in inits.items() if nm in need]
