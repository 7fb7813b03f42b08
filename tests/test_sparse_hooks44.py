"""pyrite.sparse (torch.sparse's functions over pyrite's dense-stored COO tensors) and
pyrite.utils.hooks against torch 2.13: values of sparse.mm / addmm / sum / softmax / log_softmax
on random COO tensors with duplicate and unspecified entries (rows with none), their gradients
to the values and to the dense operand, the refusals of dense inputs; RemovableHandle as what
hooks return, unserializable_hook and warn_if_has_hooks' warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")


def _coo(rng, shape, nnz, empty_row=True):
    """Random COO indices (duplicates possible; with `empty_row`, row 0 unspecified) and values."""
    lo = 1 if empty_row else 0
    idx = np.stack([rng.integers(lo, shape[0], nnz), rng.integers(0, shape[1], nnz)])
    return idx, rng.standard_normal(nnz).astype(np.float32)


def _pair(idx, vals, shape):
    tv = torch.tensor(vals, requires_grad=True)
    ts = torch.sparse_coo_tensor(torch.tensor(idx), tv, shape)
    pv = pr.tensor(vals).requires_grad_()
    ps = pr.sparse_coo_tensor(pr.tensor(idx.astype(np.int32)), pv, shape)
    return (tv, ts), (pv, ps)


def _dense(t):
    return (t.to_dense() if t.is_sparse else t).detach().numpy()


U = 2.0**-24


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_masked_row_functions(rng, name, dim):
    shape = (7, 11)
    idx, vals = _coo(rng, shape, 23)
    (tv, ts), (pv, ps) = _pair(idx, vals, shape)
    want = getattr(torch.sparse, name)(ts, dim)
    got = getattr(pr.sparse, name)(ps, dim)
    np.testing.assert_allclose(got.detach().numpy(), _dense(want), rtol=64 * U, atol=64 * U)
    w = rng.standard_normal(shape).astype(np.float32)
    (want.to_dense() * torch.tensor(w)).sum().backward()
    (got * pr.tensor(w)).sum().backward()
    np.testing.assert_allclose(pv.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_products_and_sums(rng):
    shape = (6, 9)
    idx, vals = _coo(rng, shape, 17)
    (tv, ts), (pv, ps) = _pair(idx, vals, shape)
    x = rng.standard_normal((9, 5)).astype(np.float32)
    tx, px = torch.tensor(x, requires_grad=True), pr.tensor(x).requires_grad_()
    want, got = torch.sparse.mm(ts, tx), pr.sparse.mm(ps, px)
    bound = 4 * 9 * U * (np.abs(_dense(ts)) @ np.abs(x)).max()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), atol=bound, rtol=0)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    (want * torch.tensor(w)).sum().backward()
    (got * pr.tensor(w)).sum().backward()
    np.testing.assert_allclose(pv.grad.numpy(), tv.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    m = rng.standard_normal((6, 5)).astype(np.float32)
    want = torch.sparse.addmm(torch.tensor(m), ts.detach(), tx.detach(), beta=0.5, alpha=-2.0)
    got = pr.sparse.addmm(pr.tensor(m), ps.detach(), px.detach(), beta=0.5, alpha=-2.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=4 * bound + 1e-6, rtol=0)
    for dim in (None, 0, 1, (0, 1)):
        want = torch.sparse.sum(ts) if dim is None else torch.sparse.sum(ts, dim)
        got = pr.sparse.sum(ps) if dim is None else pr.sparse.sum(ps, dim)
        np.testing.assert_allclose(
            np.asarray(got.detach().numpy()), _dense(want), rtol=64 * U, atol=64 * U
        )


def test_dense_inputs_are_refused_with_the_way_out():
    for fn in (lambda x: pr.sparse.softmax(x, 1), lambda x: pr.sparse.sum(x)):
        with pytest.raises(RuntimeError, match="sparse COO tensor"):
            fn(pr.ones(2, 3))
    with pytest.raises(NotImplementedError, match="reduce"):
        pr.sparse.mm(pr.ones(2, 2).to_sparse(), pr.ones(2, 2), reduce="max")


def test_check_sparse_tensor_invariants_as_torch():
    C = pr.sparse.check_sparse_tensor_invariants
    assert not C.is_enabled()
    with C():
        assert C.is_enabled()
        with C(enable=False):
            assert not C.is_enabled()
        assert C.is_enabled()
    assert not C.is_enabled()

    @C()
    def f():
        return C.is_enabled()

    assert f() and not C.is_enabled()


def test_hooks_module():
    from pyrite.utils.hooks import RemovableHandle, unserializable_hook, warn_if_has_hooks

    m = pr.nn.Linear(2, 2)
    calls = []
    h = m.register_forward_hook(lambda *a: calls.append(1))
    assert isinstance(h, RemovableHandle)
    m(pr.ones(1, 2))
    h.remove()
    m(pr.ones(1, 2))
    assert calls == [1]
    for lib in (torch, pr):
        x = lib.ones(2, requires_grad=True)
        x.register_hook(lambda g: g)
        y = lib.ones(2, requires_grad=True)
        y.register_hook(unserializable_hook(lambda g: g))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            (lib.utils.hooks.warn_if_has_hooks if lib is torch else warn_if_has_hooks)(x)
            (lib.utils.hooks.warn_if_has_hooks if lib is torch else warn_if_has_hooks)(y)
        assert len(w) == 1 and "will not be serialized" in str(w[0].message), lib
