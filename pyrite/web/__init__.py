"""pyrite in a browser tab: `export` writes a function's compiled recording — pyrite's own WGSL
kernels, their grids and info words, the weights they read — as a folder a page replays with
WebGPU through `pyrite.js`; `load` replays such a folder on pyrite's device from Python."""

from ._export import ExportError, export
from ._run import Bundle, load, write_example

__all__ = ["Bundle", "ExportError", "export", "load", "write_example"]
