"""`pyrite.onnx.export`: a model to an ONNX file (torch.onnx.export's counterpart).

The model runs once on the example inputs under pyrite's export trace (pyrite/onnx/_graph.py),
and the ops it called become ONNX nodes (pyrite/onnx/_ops.py, _shape_ops.py, _more_ops.py,
_rnn.py; pyrite/onnx/_exporter.py runs it, imported on the first export). Writing the file needs
the `onnx` package (`pip install onnx`, or pyrite's `onnx` extra).

`pyrite.onnx.load_model`: the other direction, an ONNX model as a trainable pyrite.nn.Module
(`OnnxModule`; pyrite/onnx/_import.py, imported on first use, says what it supports).
"""

from __future__ import annotations

import enum

from . import errors
from .errors import OnnxExporterError, UnsupportedOperatorError

__all__ = [
    "export",
    "is_in_onnx_export",
    "errors",
    "OnnxExporterError",
    "UnsupportedOperatorError",
    "TrainingMode",
    "OperatorExportTypes",
    "load_model",
    "OnnxModule",
    "OnnxImportError",
    "supported_ops",
]

_IMPORT_NAMES = ("load_model", "OnnxModule", "supported_ops")


def __getattr__(name):
    # (the importer loads on first use, so `import pyrite` needs neither it nor onnx)
    if name in _IMPORT_NAMES:
        from . import _import

        return getattr(_import, name)
    if name == "OnnxImportError":
        from ._import_ops import OnnxImportError

        return OnnxImportError
    raise AttributeError(f"module 'pyrite.onnx' has no attribute {name!r}")


class TrainingMode(enum.IntEnum):
    """torch.onnx.TrainingMode: the modules' mode during the trace (EVAL: eval, restored after;
    PRESERVE: as they are; TRAINING: train, restored after)."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    """torch.onnx.OperatorExportTypes: accepted; pyrite writes standard ONNX ops only."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


_exporting = [False]  # (set by _exporter while a trace runs)


def is_in_onnx_export() -> bool:
    """Whether an export's trace is running (torch.onnx.is_in_onnx_export)."""
    return _exporting[0]


def export(
    model,
    args=(),
    f=None,
    *,
    kwargs=None,
    verbose=None,
    input_names=None,
    output_names=None,
    opset_version=None,
    dynamo=True,
    external_data=True,
    dynamic_shapes=None,
    export_params=True,
    keep_initializers_as_inputs=False,
    dynamic_axes=None,
    training=None,
    do_constant_folding=True,
    **ignored,
):
    """Export `model` (an nn.Module or a function of tensors) run on `args` to the ONNX file `f`
    (a path or a binary file object), as torch.onnx.export; returns None.

    Parameters and buffers become initializers named by their state_dict names
    (export_params=False: graph inputs instead); the tensors in `args` (and `kwargs`) become the
    graph's inputs, named `input_names` (default: the forward's parameter names), and the
    outputs `output_names` (default output, output_1, ...). `dynamic_axes` ({name: [dims]} or
    {name: {dim: "label"}}; or torch.export's `dynamic_shapes`, by parameter name or position)
    makes those dims symbolic (a second trace with other sizes there
    shows which reshape targets follow them). `opset_version` 13..20 (default 17). The model is
    traced in eval mode (`training`: TrainingMode.EVAL; PRESERVE and TRAINING as torch's; the
    modes are restored after). `dynamo` is accepted and ignored: pyrite always uses its own
    tracer and returns None (torch returns an ONNXProgram for dynamo=True).
    An op without an ONNX mapping raises UnsupportedOperatorError naming it; the file is
    written atomically, so a failed export leaves no file (and a previous one as it was).
    """
    from ._exporter import axes_from_shapes, write

    if dynamic_axes is None and dynamic_shapes is not None:
        dynamic_axes = axes_from_shapes(model, args, kwargs, input_names, dynamic_shapes)
    write(model, args, f, kwargs, input_names, output_names, opset_version, dynamic_axes,
           export_params, keep_initializers_as_inputs, training)  # fmt: skip
    return None


def _export(model, args=(), f=None, **kwargs):
    """Old PyTorch's torch.onnx._export (fast_neural_style's `output = torch.onnx._export(model,
    x, path)`; gone from torch 2.x): export, and return the model's outputs on `args` (computed
    in eval mode, detached)."""
    from ._exporter import detached, write

    names = ("kwargs", "input_names", "output_names", "opset_version", "dynamic_axes")
    got = {k: kwargs.get(k) for k in names}
    outs = write(model, args, f, *got.values(), kwargs.get("export_params", True),
                  kwargs.get("keep_initializers_as_inputs", False),
                  kwargs.get("training"))  # fmt: skip
    return detached(outs)
