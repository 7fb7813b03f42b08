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


def test_old_scripts_names():
    """torch.autograd.Variable (a tensor, requires_grad set where asked; every tensor is one),
    torch.autograd.profiler's profile and record_function, and
    nn.modules.utils.consume_prefix_in_state_dict_if_present (a DDP checkpoint's "module.")."""
    from pyrite.autograd.profiler import profile, record_function

    from pyrite.autograd import Variable
    from pyrite.nn.modules.utils import consume_prefix_in_state_dict_if_present

    t = pr.ones(3)
    v = Variable(t, requires_grad=True)
    assert v is t and v.requires_grad and isinstance(pr.zeros(1), Variable)
    assert not isinstance(3, Variable)
    with profile() as prof, record_function("block"):
        (pr.ones(4) * 2).sum().item()
    assert prof is not None
    m = pr.nn.Linear(2, 3)
    sd = pr.nn.DataParallel(m).state_dict()
    assert all(k.startswith("module.") for k in sd)
    consume_prefix_in_state_dict_if_present(sd, "module.")
    assert sorted(sd) == ["bias", "weight"]
    m.load_state_dict(sd)
