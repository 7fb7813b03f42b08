"""Session 46: gradient accumulation as torch's AccumulateGrad — in place into the existing
`.grad` when the backward builds no graph (a reference taken before sees the sum, and `.grad`
stays the same tensor object), a new tensor when it does (create_graph) or when the existing
`.grad` cannot take the sum in place (another shape, dtype, or an expanded tensor set by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def _run(T, x0, w0, create_graph, inputs):
    x = T.tensor(x0, requires_grad=True)
    w = T.tensor(w0)
    kw = {"inputs": [x]} if inputs else {}
    (x * w).sum().backward(create_graph=create_graph, **kw)
    first = x.grad
    ((x * x) * w).sum().backward(create_graph=create_graph, **kw)
    return first, x.grad


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("inputs", [False, True])
def test_accumulation_in_place_as_torch(rng, create_graph, inputs):
    x0 = rng.standard_normal((3, 5)).astype(np.float32)
    w0 = rng.standard_normal((3, 5)).astype(np.float32)
    tf, tg = _run(torch, x0, w0, create_graph, inputs)
    pf, pg = _run(pr, x0, w0, create_graph, inputs)
    assert (pf is pg) == (tf is tg)
    np.testing.assert_allclose(pf.detach().numpy(), tf.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(pg.detach().numpy(), tg.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_a_grad_set_by_hand_that_cannot_take_the_sum_in_place_is_replaced(rng):
    """(torch raises here: "more than one element of the written-to tensor refers to a single
    memory location"; pyrite's choice is the sum in a new tensor, the hand-set one untouched)"""
    x = pr.tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    hand = pr.ones(1).expand(4)  # (stride 0: an in-place add would write one element 4 times)
    x.grad = hand
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 3.0, np.float32))
    assert x.grad is not hand and hand.numpy().tolist() == [1.0] * 4
