"""dtypes: from_any over names, numpy and torch dtypes; promotion against torch.result_type."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import dtypes as D


@pytest.mark.parametrize(
    "spec, want",
    [
        ("float32", pr.float32),
        ("float", pr.float32),
        ("float64", pr.float32),
        ("double", pr.float32),
        ("float16", pr.float16),
        ("half", pr.float16),
        ("int32", pr.int32),
        ("int64", pr.int32),
        ("long", pr.int32),
        ("int", pr.int32),
        ("bool", pr.bool),
        (np.float32, pr.float32),
        (np.float64, pr.float32),
        (np.float16, pr.float16),
        (np.int32, pr.int32),
        (np.int64, pr.int32),
        (np.bool_, pr.bool),
        (np.dtype("float16"), pr.float16),
        (torch.float32, pr.float32),
        (torch.float64, pr.float32),
        (torch.float16, pr.float16),
        (torch.int32, pr.int32),
        (torch.int64, pr.int32),
        (torch.bool, pr.bool),
        (float, pr.float32),
        (int, pr.int32),
        (bool, pr.bool),
        (None, pr.float32),
        (pr.float16, pr.float16),
    ],
)
def test_from_any(spec, want):
    assert D.from_any(spec) is want


@pytest.mark.parametrize(
    "spec", ["complex64", np.complex128, torch.complex64, "bfloat16x", "string"]
)
def test_from_any_rejects(spec):
    with pytest.raises(TypeError, match=r"pyrite: unsupported dtype .*supported: float32"):
        D.from_any(spec)


def test_aliases():
    assert pr.int64 is pr.int32 and pr.long is pr.int32 and pr.double is pr.float32
    assert pr.half is pr.float16
    assert repr(pr.float16) == "pyrite.float16" and repr(pr.bool) == "pyrite.bool"
    assert pr.float32.itemsize == 4 and pr.float16.itemsize == 2
    assert pr.float32.is_floating_point and not pr.int32.is_floating_point


TORCH = {
    "float32": torch.float32,
    "float16": torch.float16,
    "int32": torch.int32,
    "bool": torch.bool,
}
NAMES = list(TORCH)


def _name(td):
    return {"int64": "int32"}.get(str(td).replace("torch.", ""), str(td).replace("torch.", ""))


@pytest.mark.parametrize("a, b", list(itertools.product(NAMES, NAMES)))
def test_promotion_table(a, b):
    """Tensor-tensor, tensor-0d, and tensor-scalar promotion against torch.result_type."""
    pa, pb = getattr(pr, a if a != "bool" else "bool"), getattr(pr, b if b != "bool" else "bool")
    ta, tb = TORCH[a], TORCH[b]
    assert pr.promote_types(pa, pb).name == _name(torch.promote_types(ta, tb))
    x1, y1 = pr.ones(3, dtype=pa), pr.ones(3, dtype=pb)
    t1, u1 = torch.ones(3, dtype=ta), torch.ones(3, dtype=tb)
    assert pr.result_type(x1, y1).name == _name(torch.result_type(t1, u1))
    y0, u0 = pr.ones((), dtype=pb), torch.ones((), dtype=tb)
    assert pr.result_type(x1, y0).name == _name(torch.result_type(t1, u0)), "tensor, 0-d"
    assert pr.result_type(y0, x1).name == _name(torch.result_type(u0, t1)), "0-d, tensor"
    for scalar in (True, 2, 2.5):
        assert pr.result_type(x1, scalar).name == _name(torch.result_type(t1, scalar)), scalar
    # the op itself gives that dtype
    if "bool" not in (a, b):
        assert (x1 * y0).dtype.name == _name((t1 * u0).dtype)
        assert (x1 + y1).dtype.name == _name((t1 + u1).dtype)
