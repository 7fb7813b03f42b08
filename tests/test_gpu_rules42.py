"""The matmul planner's GPU-only paths run on lavapipe by calling it a discrete GPU: here the
ragged rows (an aligned product plus GEMVs for the last M % 16 rows). Found by the first
run of the whole suite on an H100 (2026-12-07): a product of operands with leading dims of size
1 — `(1, M, K) @ (K, N)`, addbmm's gradient — took the ragged path, which read the leading 1 as
M and failed gemm's K check (an AssertionError from any batch-1 matmul with M % 16 != 0 on a
GPU). Parity against numpy float64 within the f32 dot-product bound."""

import numpy as np
import pytest

import pyrite as pr
from pyrite import backend
from pyrite.ops import matmul as mmod


@pytest.fixture
def gpu_rules(monkeypatch):
    monkeypatch.setattr(backend.current(), "adapter_type", "DiscreteGPU")
    mmod._plans.clear()
    yield
    mmod._plans.clear()


def _close(got, want, a_abs_b):
    bound = 2 * a_abs_b.shape[-1] * 2.0**-24 * a_abs_b.max() + 1e-30 if a_abs_b.size else 0
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


@pytest.mark.parametrize("M", [17, 33, 100, 301])
@pytest.mark.parametrize("lead_a,lead_b", [((1,), ()), ((1,), (1,)), ((1, 1), ()), ((), (1,))])
def test_batch_one_ragged_products(gpu_rules, rng, M, lead_a, lead_b):
    K, N = 64, 64  # (N a multiple of the fast tiles: the ragged path wants one)
    a = rng.standard_normal(lead_a + (M, K)).astype(np.float32)
    b = rng.standard_normal(lead_b + (K, N)).astype(np.float32)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    # a as it is, and as the transpose of a (.., K, M) tensor (a view that cannot be folded)
    at = pr.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2))).mT
    for pa in (pr.tensor(a), at):
        got = pa @ pr.tensor(b)
        assert tuple(got.shape) == want.shape
        _close(got.numpy(), want, np.matmul(np.abs(a), np.abs(b)))
    c = rng.standard_normal(N).astype(np.float32)
    a3, b3 = a.reshape((1, M, K)), b.reshape((1, K, N))
    got = pr.baddbmm(pr.tensor(c), pr.tensor(a3), pr.tensor(b3), beta=0.5, alpha=-2.0)
    want = 0.5 * c + -2.0 * np.matmul(a3.astype(np.float64), b3.astype(np.float64))
    _close(got.numpy(), want, 2 * np.matmul(np.abs(a3), np.abs(b3)) + np.abs(c))


def test_addbmm_gradients_through_the_ragged_path(gpu_rules, rng):
    """The failing case: addbmm's batch2 gradient, batch1.mT @ g with batch1 (1, 64, 300)."""
    x = rng.standard_normal(64).astype(np.float32)
    b1 = rng.standard_normal((1, 64, 300)).astype(np.float32)
    b2 = rng.standard_normal((1, 64, 300)).astype(np.float32).transpose(0, 2, 1)
    px, pb2 = pr.tensor(x).requires_grad_(), pr.tensor(b2).requires_grad_()
    out = pr.addbmm(px, pr.tensor(b1), pb2, beta=1.5, alpha=1.5)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(pr.tensor(g))
    want_b2 = 1.5 * np.matmul(b1[0].T.astype(np.float64), g)
    _close(pb2.grad.numpy()[0], want_b2, 1.5 * np.abs(b1[0].T) @ np.abs(g))
    np.testing.assert_allclose(px.grad.numpy(), 1.5 * g.sum(0), rtol=1e-6, atol=1e-5)
