"""torch.onnx.errors: what a failed export raises."""

from __future__ import annotations

__all__ = ["OnnxExporterError", "UnsupportedOperatorError"]


class OnnxExporterError(RuntimeError):
    """An export that cannot be written (torch.onnx.errors.OnnxExporterError)."""


class UnsupportedOperatorError(OnnxExporterError):
    """An op with no ONNX mapping (torch.onnx.errors.UnsupportedOperatorError)."""
