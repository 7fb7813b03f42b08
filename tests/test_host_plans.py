"""The host-side plan caches of eager ops (linear's views, the row ops' kernels): a call whose
layout was seen before reuses the plan, and every input the plan does not cover still decides
the result or the error (offsets, eps, bias layouts, the module constants tests change)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.ops import rowops

F = pr.nn.functional


def _ref_linear(x, w, b=None):
    r = x.astype(np.float64) @ w.astype(np.float64).T
    return r if b is None else r + b


def test_linear_plan_reused_with_new_offsets_and_biases():
    rng = np.random.default_rng(0)
    big = rng.standard_normal((2, 7, 13)).astype(np.float32)
    w = rng.standard_normal((5, 13)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    pb, pw, pbias = pr.tensor(big), pr.tensor(w), pr.tensor(b)
    for _ in range(2):  # (the second call takes the plan)
        got = F.linear(pb[:, 1:4], pw, pbias).numpy()
        np.testing.assert_allclose(got, _ref_linear(big[:, 1:4], w, b), rtol=1e-5, atol=1e-5)
    # the same layouts at another offset (x and the bias): the views follow them
    bias2 = pr.tensor(np.concatenate([b, b + 1]))[5:]
    got = F.linear(pb[:, 3:6], pw, bias2).numpy()
    np.testing.assert_allclose(got, _ref_linear(big[:, 3:6], w, b + 1), rtol=1e-5, atol=1e-5)
    # without a bias, and with a bias that broadcasts from 2-D (not kept as a plan)
    got = F.linear(pb[:, 1:4], pw).numpy()
    np.testing.assert_allclose(got, _ref_linear(big[:, 1:4], w), rtol=1e-5, atol=1e-5)
    b2 = rng.standard_normal((3, 5)).astype(np.float32)
    for _ in range(2):
        got = F.linear(pb[:, 1:4], pw, pr.tensor(b2)).numpy()
        np.testing.assert_allclose(got, _ref_linear(big[:, 1:4], w, b2), rtol=1e-5, atol=1e-5)
    # a Python-number bias is never looked up under the tensor bias's plan
    got = F.linear(pb[:, 1:4], pw, 2.0).numpy()
    np.testing.assert_allclose(got, _ref_linear(big[:, 1:4], w, 2.0), rtol=1e-5, atol=1e-5)


def test_linear_plan_keeps_errors():
    x, w = pr.ones(3, 4), pr.ones(2, 4)
    F.linear(x, w, pr.ones(2))
    with pytest.raises(TypeError, match="same dtype"):
        F.linear(x, w, pr.ones(2, dtype=pr.float16))
    with pytest.raises(pr.ShapeError, match="does not match"):
        F.linear(x, w, pr.ones(3))
    with pytest.raises(pr.ShapeError, match="cannot be multiplied"):
        F.linear(pr.ones(3, 5), w)


def test_linear_plan_gradient():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    for _ in range(2):
        px = pr.tensor(x, requires_grad=True)
        pw = pr.tensor(w, requires_grad=True)
        pb = pr.tensor(b, requires_grad=True)
        F.linear(px, pw, pb).sum().backward()
        np.testing.assert_allclose(px.grad.numpy(), np.broadcast_to(w.sum(0), x.shape), rtol=1e-5)
        np.testing.assert_allclose(
            pw.grad.numpy(), np.tile(x.reshape(-1, 4).sum(0), (5, 1)), rtol=1e-5
        )
        np.testing.assert_allclose(pb.grad.numpy(), np.full(5, 6.0), rtol=1e-6)


def _ref_ln(x, eps):
    x = x.astype(np.float64)
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + eps)


def test_row_plan_follows_eps_offsets_and_constants(monkeypatch):
    rng = np.random.default_rng(2)
    big = rng.standard_normal((4, 40)).astype(np.float32) * 1e-3
    t = pr.tensor(big)
    for eps in (1e-5, 1e-5, 1.0, 0.0, -0.0):
        got = F.layer_norm(t[1:3, 3:35], (32,), eps=eps).numpy()
        np.testing.assert_allclose(got, _ref_ln(big[1:3, 3:35], eps), rtol=1e-4, atol=1e-4)
    got = F.layer_norm(t[2:4, 5:37], (32,), eps=1e-5).numpy()  # (another offset)
    np.testing.assert_allclose(got, _ref_ln(big[2:4, 5:37], 1e-5), rtol=1e-4, atol=1e-4)
    calls = []
    held = rowops._held_shape
    monkeypatch.setattr(rowops, "_held_shape", lambda n, wg: calls.append(n) or held(n, wg))
    F.layer_norm(t[1:3, 3:35], (32,), eps=1e-5)
    assert calls == [32], "a replaced rule is a new plan"
    monkeypatch.setattr(rowops, "HELD", not rowops.HELD)
    got = F.layer_norm(t[1:3, 3:35], (32,), eps=1e-5).numpy()
    assert calls == [32, 32], "a changed constant is a new plan"
    np.testing.assert_allclose(got, _ref_ln(big[1:3, 3:35], 1e-5), rtol=1e-4, atol=1e-4)
