"""The import statements of ported scripts (`import torch.backends.cudnn as cudnn`, `from
torch.cuda.amp import autocast, GradScaler`, `from torch.nn.parameter import Parameter`, ...)
with `torch` spelled `pyrite`: each imports the object the attribute spelling names."""

from __future__ import annotations

import importlib

import pytest

import pyrite as pr


@pytest.mark.parametrize(
    "path, names, same",
    [
        ("pyrite.backends", ("cudnn",), lambda: pr.backends),
        ("pyrite.backends.cudnn", ("benchmark",), lambda: pr.backends.cudnn),
        ("pyrite.cuda", ("is_available",), lambda: pr.cuda),
        ("pyrite.cuda.amp", ("autocast", "GradScaler"), lambda: pr.cuda.amp),
        ("pyrite.cpu", ("is_available",), lambda: pr.cpu),
        ("pyrite.cpu.amp", ("autocast",), lambda: pr.cpu.amp),
        ("pyrite.nn.parameter", ("Parameter", "Buffer"), lambda: None),
        ("pyrite.nn.modules.activation", ("MultiheadAttention", "ReLU"), lambda: None),
        ("pyrite.nn.modules", ("Module", "Linear"), lambda: None),
    ],
)
def test_ported_import_statements(path, names, same):
    mod = importlib.import_module(path)
    if same() is not None:
        assert mod is same()
    for n in names:
        assert hasattr(mod, n), f"{path}.{n}"
    if path == "pyrite.nn.parameter":
        assert mod.Parameter is pr.nn.Parameter
    if path == "pyrite.nn.modules.activation":
        assert mod.MultiheadAttention is pr.nn.MultiheadAttention
