"""embedding (max_norm renormalises the looked-up rows of the weight in place, as torch's
embedding_renorm_) and embedding_bag (sum / mean / max bags, offsets, per-sample weights,
padding_idx) against torch CPU (float64).

Tolerance: a row's p-norm of D terms is within ~D·u relative, so a renormalised row is within
(D + 4)·u of torch's; a bag of L rows sums L terms: L·u·Σ|rows|.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from tests.optable import EPS32, assert_close

U = EPS32


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_embedding_max_norm_renormalises_looked_up_rows(norm_type, rng):
    V, D = 13, 6
    w = _f32(rng.standard_normal((V, D)) * 2)
    idx = rng.integers(0, V, (3, 5))
    idx[0, :2] = idx[1, 0]  # a row looked up several times
    tw = torch.from_numpy(w.copy())
    want = TF.embedding(torch.from_numpy(idx), tw, max_norm=1.5, norm_type=norm_type)
    pw = pr.tensor(w.astype(np.float32))
    got = F.embedding(pr.tensor(idx), pw, max_norm=1.5, norm_type=norm_type)
    tol = (D + 8) * U * 4
    assert got.shape == tuple(want.shape)
    assert_close(got.numpy(), want.numpy(), tol, 0, "output")
    # the weight changed in place, in the looked-up rows only
    assert_close(pw.numpy(), tw.numpy(), tol, 0, "weight after renorm")
    untouched = np.setdiff1d(np.arange(V), idx)
    np.testing.assert_array_equal(pw.numpy()[untouched], w[untouched].astype(np.float32))
    norms = np.linalg.norm(pw.numpy().astype(np.float64)[np.unique(idx)], ord=norm_type, axis=1)
    assert (norms <= 1.5 * (1 + 8 * U)).all()


def test_embedding_plain_and_errors(rng):
    w = _f32(rng.standard_normal((11, 4)))
    idx = rng.integers(0, 11, (2, 3))
    want = TF.embedding(torch.from_numpy(idx), torch.from_numpy(w), padding_idx=3)
    got = F.embedding(pr.tensor(idx), pr.tensor(w.astype(np.float32)), padding_idx=3)
    assert_close(got.numpy(), want.numpy(), 0, 0, "padding_idx changes only the gradient")
    got = pr.embedding(pr.tensor(w.astype(np.float32)), pr.tensor(idx))  # torch.embedding order
    assert_close(
        got.numpy(),
        torch.embedding(torch.from_numpy(w), torch.from_numpy(idx)).numpy(),
        0,
        0,
        "pr.embedding(weight, indices)",
    )
    with pytest.raises(ValueError, match="Padding_idx .* must be within num_embeddings"):
        F.embedding(pr.tensor(idx), pr.ones(11, 4), padding_idx=11)
    with pytest.raises(IndexError, match="out of bounds"):
        F.embedding(pr.tensor([0, 11]), pr.ones(11, 4), max_norm=1.0)
    with pytest.raises(pr.ShapeError, match="weight must be 2-D"):
        F.embedding(pr.tensor([0]), pr.ones(11))


def _bag_case(rng, V=17, D=5):
    w = _f32(rng.standard_normal((V, D)))
    return w, torch.from_numpy(w.copy()), pr.tensor(w.astype(np.float32))


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_and_offsets(mode, rng):
    w, tw, pw = _bag_case(rng)
    idx2 = rng.integers(0, 17, (4, 6))
    want = TF.embedding_bag(torch.from_numpy(idx2), tw, mode=mode)
    got = F.embedding_bag(pr.tensor(idx2), pw, mode=mode)
    assert_close(got.numpy(), want.numpy(), 8 * U * 6 * 4, 0, f"2-D {mode}")
    idx = rng.integers(0, 17, 14)
    for offs, last in (([0, 3, 3, 9], False), ([0, 5, 5, 14], True), ([0], False)):
        want = TF.embedding_bag(
            torch.from_numpy(idx), tw, torch.tensor(offs), mode=mode, include_last_offset=last
        )
        got = F.embedding_bag(
            pr.tensor(idx), pw, pr.tensor(offs), mode=mode, include_last_offset=last
        )
        assert_close(got.numpy(), want.numpy(), 8 * U * 14 * 4, 0, f"offsets {offs} {mode}")
    for pad in (3, -1):
        idp = idx.copy()
        idp[:4] = 17 + pad if pad < 0 else pad  # a bag of padding only, among others
        want = TF.embedding_bag(
            torch.from_numpy(idp), tw, torch.tensor([0, 4, 9]), mode=mode, padding_idx=pad
        )
        got = F.embedding_bag(pr.tensor(idp), pw, pr.tensor([0, 4, 9]), mode=mode, padding_idx=pad)
        assert_close(got.numpy(), want.numpy(), 8 * U * 14 * 4, 0, f"padding_idx {pad} {mode}")


def test_embedding_bag_weights_max_norm_and_errors(rng):
    w, tw, pw = _bag_case(rng)
    idx = rng.integers(0, 17, (3, 4))
    psw = _f32(rng.random((3, 4)))
    want = TF.embedding_bag(
        torch.from_numpy(idx), tw, mode="sum", per_sample_weights=torch.from_numpy(psw)
    )
    got = F.embedding_bag(pr.tensor(idx), pw, mode="sum", per_sample_weights=pr.tensor(psw))
    assert_close(got.numpy(), want.numpy(), 64 * U, 0, "per_sample_weights")
    want = TF.embedding_bag(torch.from_numpy(idx), tw, max_norm=0.8)
    got = F.embedding_bag(pr.tensor(idx), pw, max_norm=0.8)
    assert_close(got.numpy(), want.numpy(), 64 * U, 0, "max_norm output")
    assert_close(pw.numpy(), tw.numpy(), 64 * U, 0, "max_norm weight")
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(pr.tensor(idx), pw, pr.tensor([0, 2]))
    with pytest.raises(ValueError, match="offsets has to be a 1D Tensor but got None"):
        F.embedding_bag(pr.tensor([1, 2]), pw)
    with pytest.raises(RuntimeError, match="offsets\\[0\\] has to be 0"):
        F.embedding_bag(pr.tensor([1, 2]), pw, pr.tensor([1]))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(pr.tensor(idx), pw, per_sample_weights=pr.tensor(psw))
    with pytest.raises(ValueError, match="mode has to be one of sum, mean or max"):
        F.embedding_bag(pr.tensor(idx), pw, mode="min")


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("layout", ["2d", "offsets"])
@pytest.mark.parametrize("padding_idx", [None, 3])
def test_embedding_bag_gradients(mode, layout, padding_idx, rng):
    """The weight's gradient (and per_sample_weights', mode 'sum') against torch's, with
    padding entries and an empty bag (offsets). It raised NotImplementedError before."""
    V, D = 11, 6
    w = rng.standard_normal((V, D)).astype(np.float32)
    if layout == "2d":
        inp, off = rng.integers(0, V, (4, 5)), None
    else:
        inp, off = rng.integers(0, V, (9,)), np.array([0, 2, 2, 6])
    inp.reshape(-1)[::4] = 3  # some padding entries where padding_idx = 3
    psw = rng.standard_normal(inp.shape).astype(np.float32) if mode == "sum" else None
    g = rng.standard_normal((4, D)).astype(np.float32)
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    pw = pr.tensor(w).requires_grad_()
    tp = None if psw is None else torch.tensor(psw, dtype=torch.float64, requires_grad=True)
    pp = None if psw is None else pr.tensor(psw).requires_grad_()
    kw = {"mode": mode, "padding_idx": padding_idx}
    to = TF.embedding_bag(
        torch.tensor(inp),
        tw,
        None if off is None else torch.tensor(off),
        per_sample_weights=tp,
        **kw,
    )
    po = F.embedding_bag(
        pr.tensor(inp), pw, None if off is None else pr.tensor(off), per_sample_weights=pp, **kw
    )
    (to * torch.tensor(g, dtype=torch.float64)).sum().backward()
    (po * pr.tensor(g)).sum().backward()
    # each gradient entry sums at most 20 products (or divides one by a count): 32 ulps
    assert_close(pw.grad.numpy(), tw.grad.numpy(), atol=32 * EPS32 * np.abs(g).sum())
    if tp is not None:
        scale = np.abs(g).sum() * np.abs(w).max()
        assert_close(pp.grad.numpy(), tp.grad.numpy(), atol=32 * EPS32 * scale)
