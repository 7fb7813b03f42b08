"""The `pyrite` command's argument handling, with pyrite's device and bench replaced by fakes."""

from __future__ import annotations

import os
import sys
import types

import pytest

import pyrite
from pyrite import cli

INFO = {
    "name": "llvmpipe (LLVM 15.0.6, 256 bits)",
    "implementation": "wgpu",
    "backend": "Vulkan",
    "type": "CPU",
    "driver": "Mesa 22.3.6",
    "vendor": "llvmpipe",
    "features": ["shader-f16", "subgroup", "texture-compression-bc"],
    "limits": {
        "max-storage-buffer-binding-size": 134217728,
        "max_buffer_size": 2**31 - 1,
        "max-compute-workgroups-per-dimension": 65535,
    },
}


def test_help_needs_no_gpu(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--help"])
    assert exit_.value.code == 0
    assert "bench" in capsys.readouterr().out


def test_info_is_readable(monkeypatch, capsys):
    monkeypatch.setattr(pyrite, "device_info", lambda: INFO, raising=False)
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "llvmpipe" in out and "shader-f16" in out and "(+1 more; --all)" in out
    assert "128 MiB" in out and "65535" in out and "2 GiB" in out


def test_bench_gets_its_arguments(monkeypatch):
    seen = []
    fake = types.ModuleType("pyrite.bench")
    fake.main = lambda argv: seen.append(argv) or 0
    monkeypatch.setitem(sys.modules, "pyrite.bench", fake)
    monkeypatch.setattr(pyrite, "bench", fake, raising=False)
    monkeypatch.setenv("PYRITE_BACKEND", "dawn")  # restored after the test
    assert cli.main(["--backend", "wgpu", "bench", "--json", "out.json", "--quick"]) == 0
    assert seen == [["--json", "out.json", "--quick"]]
    assert os.environ["PYRITE_BACKEND"] == "wgpu"


def test_unknown_arguments_rejected():
    with pytest.raises(SystemExit) as exit_:
        cli.main(["info", "--bogus"])
    assert exit_.value.code == 2
