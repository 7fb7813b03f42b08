"""Tensor attributes ported code reads (ops/tensor_attrs.py), against torch CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.ops.tensor_attrs import _FALSE_FLAGS


def test_flags_match_torch():
    t, tt = pr.zeros(3), torch.zeros(3)
    for flag in _FALSE_FLAGS:
        assert getattr(t, flag) is getattr(tt, flag) is False, flag
    assert t.is_distributed() is tt.is_distributed() is False
    assert t.name is tt.name is None


def test_output_nr():
    x, tx = pr.zeros(4, requires_grad=True), torch.zeros(4, requires_grad=True)
    assert x.output_nr == tx.output_nr == 0
    got = [p.output_nr for p in (x * 2).split(2)]
    assert got == [p.output_nr for p in (tx * 2).split(2)] == [0, 1]


def test_apply_and_map():
    x, tx = pr.arange(5.0), torch.arange(5.0)
    np.testing.assert_array_equal(
        x.apply_(lambda v: v * 2 + 1).numpy(), tx.apply_(lambda v: v * 2 + 1).numpy()
    )
    y, ty = pr.ones(5), torch.ones(5)
    assert x.map_(y, lambda a, b: a + b) is x
    np.testing.assert_array_equal(x.numpy(), tx.map_(ty, lambda a, b: a + b).numpy())
    i, ti = pr.arange(3), torch.arange(3)
    np.testing.assert_array_equal(
        i.apply_(lambda v: v * 1.7).numpy(), ti.apply_(lambda v: v * 1.7).numpy()
    )
    m = pr.zeros(2, 3)
    m.map_(pr.tensor([1.0, 2.0, 3.0]), lambda a, b: a - b)  # broadcast over rows
    np.testing.assert_array_equal(m.numpy(), -np.tile([1.0, 2.0, 3.0], (2, 1)))
    with pytest.raises(RuntimeError):
        pr.zeros(2, requires_grad=True).apply_(lambda v: v)
