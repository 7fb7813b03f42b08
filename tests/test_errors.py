"""Errors name what was wrong and the way out; after each, the next op still works."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.errors import DeviceError, OutOfMemoryError, ShapeError
from pyrite.testing import NON_BROADCASTABLE_PAIRS


def _still_works():
    x = pr.arange(5, dtype=pr.float32)
    assert (x * 2 + 1).tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]


@pytest.mark.parametrize("sa, sb", NON_BROADCASTABLE_PAIRS)
@pytest.mark.parametrize("op", ["add", "mul", "where", "copy_", "iadd"])
def test_shapes_that_do_not_broadcast(sa, sb, op):
    a, b = pr.ones(sa), pr.ones(sb)
    with pytest.raises(ShapeError) as info:
        if op == "where":
            pr.where(a > 0, a, b)
        elif op == "copy_":
            a.copy_(b)
        elif op == "iadd":
            a += b
        else:
            getattr(pr, op)(a, b)
    msg = str(info.value)
    assert msg.startswith("pyrite: ")
    assert str(tuple(sa)) in msg and str(tuple(sb)) in msg, msg
    assert isinstance(info.value, ValueError)
    _still_works()


def test_index_errors_name_index_and_size():
    x = pr.zeros(4, 3)
    with pytest.raises(IndexError, match=r"index 4 is out of bounds for dimension 0 with size 4"):
        x[4]
    with pytest.raises(IndexError, match=r"index -4 is out of bounds for dimension 1 with size 3"):
        x[:, -4]
    with pytest.raises(IndexError, match=r"\[-2, 1\], but got 3"):
        x.sum(3) if hasattr(x, "sum") else x.transpose(0, 3)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds .* size 4"):
        x[5] = 1.0
    _still_works()


@pytest.mark.parametrize("bad", ["complex64", np.complex64, "uint64x", object])
def test_unsupported_dtype(bad):
    with pytest.raises(TypeError, match=r"pyrite: unsupported dtype") as info:
        pr.zeros(3, dtype=bad)
    assert str(bad) in str(info.value) or repr(bad) in str(info.value)
    _still_works()


def test_unsupported_host_data():
    with pytest.raises(TypeError, match=r"complex128"):
        pr.tensor(np.array([1 + 2j]))
    with pytest.raises(ValueError, match=r"pyrite: .*rectangular"):
        pr.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"bitwise_and is not defined for pyrite.float32"):
        pr.ones(3) & pr.ones(3)
    _still_works()


def test_float16_without_shader_f16(monkeypatch):
    dev = backend.current()
    monkeypatch.setattr(dev, "has_f16", False)
    for make in (lambda: pr.zeros(3, dtype=pr.float16), lambda: pr.ones(3).half(),
                 lambda: pr.tensor(np.ones(3, np.float16))):
        with pytest.raises(DeviceError, match=r"shader-f16") as info:
            make()
        msg = str(info.value)
        assert "float32" in msg and ("PYRITE_BACKEND" in msg or "set_device" in msg), msg
    _still_works()


def test_tensor_larger_than_a_binding():
    dev = backend.current()
    limit = dev.max_binding
    n = limit // 4 + 1
    with pytest.raises(OutOfMemoryError, match=f"{limit:,}") as info:
        pr.empty(n)
    assert "maxStorageBufferBindingSize" in str(info.value)
    assert isinstance(info.value, MemoryError)
    _still_works()


def test_other_value_errors():
    with pytest.raises(ValueError, match="12 elements"):
        pr.zeros(3, 4).item()
    with pytest.raises(ShapeError, match=r"invalid for input of size 12"):
        pr.zeros(3, 4).view(5, 3)
    with pytest.raises(ValueError, match="approximate"):
        pr.gelu(pr.ones(2), approximate="fast")
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(pr.ones(2))
    with pytest.raises(ValueError, match="negative dimension"):
        pr.zeros(-1)
    _still_works()
