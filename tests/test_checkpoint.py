"""pyrite.utils.checkpoint: a checkpointed segment's gradients (parameters and inputs) equal the
plain segment's, with dropout's mask drawn again the same in the backward, and the segment's
activations are not kept by the forward."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
from pyrite.utils.checkpoint import checkpoint, checkpoint_sequential


def _blocks(seed=0):
    pr.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(12, 20), nn.GELU(), nn.Dropout(0.3), nn.Linear(20, 20), nn.Tanh(),
        nn.Linear(20, 6),
    )  # fmt: skip


def _grads(m, x, run):
    for p in m.parameters():
        p.grad = None
    pr.manual_seed(7)
    out = run(x)
    (
        out * pr.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape).astype(np.float32))
    ).sum().backward()
    return out.numpy(), [p.grad.numpy() for p in m.parameters()]


@pytest.mark.parametrize("reentrant", [True, False])
@pytest.mark.parametrize("input_grad", [False, True])
def test_checkpoint_gives_the_plain_gradients(rng, reentrant, input_grad):
    """Dropout inside: the backward's rerun restores the forward's random state, so the same
    mask is drawn and the gradients equal the plain run's exactly (the same kernels on the
    same values)."""
    m = _blocks()
    a = rng.standard_normal((5, 12)).astype(np.float32)
    x1 = pr.tensor(a).requires_grad_(input_grad)
    want_out, want = _grads(m, x1, m)
    x2 = pr.tensor(a).requires_grad_(input_grad)
    got_out, got = _grads(m, x2, lambda x: checkpoint(m, x, use_reentrant=reentrant))
    np.testing.assert_array_equal(got_out, want_out)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if input_grad:
        np.testing.assert_array_equal(x2.grad.numpy(), x1.grad.numpy())


def test_checkpoint_sequential_and_kwargs(rng):
    m = _blocks(1)
    m.eval()  # (no dropout: the segments' order of random draws does not matter)
    a = rng.standard_normal((4, 12)).astype(np.float32)
    want_out, want = _grads(m, pr.tensor(a), m)
    got_out, got = _grads(m, pr.tensor(a), lambda x: checkpoint_sequential(m, 3, x))
    np.testing.assert_array_equal(got_out, want_out)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    lin = m[0]
    x = pr.tensor(a).requires_grad_()
    y = checkpoint(lambda t, scale: lin(t) * scale, x, scale=3.0)
    y.sum().backward()
    np.testing.assert_allclose(
        x.grad.numpy(), np.tile(3 * lin.weight.numpy().sum(0), (4, 1)), rtol=1e-5, atol=1e-6
    )


def test_forward_keeps_no_activations(rng):
    """The checkpointed segment's output has one node, whose only saved tensors are the
    segment's inputs: no intermediate of the segment is alive after the forward."""
    m = _blocks()
    x = pr.tensor(rng.standard_normal((5, 12)).astype(np.float32)).requires_grad_()
    out = checkpoint(m, x)
    assert out.grad_fn is not None and out.grad_fn.name == "_Checkpointed"
    assert [e for e in out.grad_fn.next_functions if e[0] is not None]  # (the input's edge)
    with pr.no_grad():
        y = checkpoint(m, x)
    assert y.grad_fn is None
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(m, 0, x)


def test_complex_tensors_round_trip_and_load_from_torch(tmp_path, rng):
    """A complex64 tensor (an FNO's spectral weights) saves and loads with pr.save / pr.load
    (it raised a raw KeyError), views and parameters included, and a torch.save file's complex
    tensors load (ComplexFloatStorage was refused), strided views too."""
    import torch

    a = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(np.complex64)
    w = pr.nn.Parameter(pr.tensor(a))
    pr.save(
        {"w": w, "row": pr.tensor(a)[1], "plain": pr.tensor(a[:, :2].copy())}, tmp_path / "c.pt"
    )
    o = pr.load(tmp_path / "c.pt")
    assert type(o["w"]) is pr.nn.Parameter and o["w"].requires_grad and o["w"].dtype is pr.complex64
    np.testing.assert_array_equal(o["w"].detach().numpy(), a)
    np.testing.assert_array_equal(o["row"].numpy(), a[1])
    np.testing.assert_array_equal(o["plain"].numpy(), a[:, :2])
    t = torch.tensor(a)
    torch.save(
        {"a": t, "at": t.t(), "col": t[:, 3], "p": torch.nn.Parameter(t.clone())}, tmp_path / "t.pt"
    )
    o = pr.load(tmp_path / "t.pt")
    for k, want in (("a", a), ("at", a.T), ("col", a[:, 3]), ("p", a)):
        assert o[k].dtype is pr.complex64, k
        np.testing.assert_array_equal(o[k].detach().numpy(), want)
    assert type(o["p"]) is pr.nn.Parameter
