"""Errors name what was wrong and the way out; after each, the next op still works."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.errors import DeviceError, OutOfMemoryError, ShapeError
from pyrite.testing import NON_BROADCASTABLE_PAIRS


def _message(exc_type, fn, match=None):
    """The message of the `exc_type` that fn() raises. Not `pytest.raises(...) as info`: a kept
    ExceptionInfo makes a reference cycle (info -> traceback -> this frame -> info), so the
    tensors in the traceback die later in a gc pass rather than at once (see test_leak.py's
    test_tensors_freed_by_gc_cycle)."""
    try:
        fn()
    except exc_type as e:
        msg = str(e)
        assert isinstance(e, exc_type)
    else:
        raise AssertionError(f"{exc_type.__name__} not raised")
    if match is not None:
        assert re.search(match, msg), msg
    return msg


def _still_works():
    x = pr.arange(5, dtype=pr.float32)
    assert (x * 2 + 1).tolist() == [1.0, 3.0, 5.0, 7.0, 9.0]


@pytest.mark.parametrize("sa, sb", NON_BROADCASTABLE_PAIRS)
@pytest.mark.parametrize("op", ["add", "mul", "where", "copy_", "iadd"])
def test_shapes_that_do_not_broadcast(sa, sb, op):
    a, b = pr.ones(sa), pr.ones(sb)

    def call():
        nonlocal a
        if op == "where":
            pr.where(a > 0, a, b)
        elif op == "copy_":
            a.copy_(b)
        elif op == "iadd":
            a += b
        else:
            getattr(pr, op)(a, b)

    msg = _message(ShapeError, call)
    assert issubclass(ShapeError, ValueError)
    assert msg.startswith("pyrite: ")
    assert str(tuple(sa)) in msg and str(tuple(sb)) in msg, msg
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


@pytest.mark.parametrize("bad", ["complex32", np.clongdouble, "uint64x", object])
def test_unsupported_dtype(bad):
    msg = _message(TypeError, lambda: pr.zeros(3, dtype=bad), r"pyrite: unsupported dtype")
    assert str(bad) in msg or repr(bad) in msg
    _still_works()


def test_unsupported_host_data():
    with pytest.raises(TypeError, match=r"datetime64"):
        pr.tensor(np.array(["2026-12-06"], dtype="datetime64[D]"))
    with pytest.raises(ValueError, match=r"pyrite: .*rectangular"):
        pr.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match=r"bitwise_and is not defined for pyrite.float32"):
        pr.ones(3) & pr.ones(3)
    _still_works()


def test_float16_without_shader_f16(monkeypatch):
    dev = backend.current()
    monkeypatch.setattr(dev, "has_f16", False)
    for make in (
        lambda: pr.zeros(3, dtype=pr.float16),
        lambda: pr.ones(3).half(),
        lambda: pr.tensor(np.ones(3, np.float16)),
    ):
        msg = _message(DeviceError, make, r"shader-f16")
        assert "float32" in msg and ("PYRITE_BACKEND" in msg or "set_device" in msg), msg
    _still_works()


def test_tensor_larger_than_a_binding():
    dev = backend.current()
    limit = dev.max_binding
    n = limit // 4 + 1
    msg = _message(OutOfMemoryError, lambda: pr.empty(n), f"{limit:,}")
    assert "maxStorageBufferBindingSize" in msg
    assert issubclass(OutOfMemoryError, MemoryError)
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
    with pytest.raises(RuntimeError, match="negative dimension"):
        pr.zeros(-1)
    _still_works()


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_shape_errors_are_runtime_errors_too():
    # torch raises RuntimeError for shapes that do not broadcast; a ported `except RuntimeError`
    assert issubclass(ShapeError, RuntimeError) and issubclass(ShapeError, ValueError)
    with pytest.raises(RuntimeError, match="broadcast"):
        pr.ones(3) + pr.ones(4)
