"""Training end to end: a PyTorch script with `torch` spelled `pyrite` gives PyTorch's loss curve
from the same initial weights and batches, and a long run holds memory and pipelines flat."""

from __future__ import annotations

import gc

import numpy as np
import torch

import pyrite as pr


def _same_weights(pmodel, tmodel):
    pmodel.load_state_dict({k: v.detach().numpy() for k, v in tmodel.state_dict().items()})


def _curve(L, model, opt, sched, batches, loss_fn):
    out = []
    for xb, yb in batches:
        loss = loss_fn(model(L.tensor(xb)), L.tensor(yb))
        opt.zero_grad()
        loss.backward()
        L.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if sched is not None:
            sched.step()
        out.append(float(loss.item()))
    return np.array(out)


def _mlp(L):
    nn = L.nn
    return nn.Sequential(
        nn.Linear(23, 37), nn.GELU(), nn.LayerNorm(37), nn.Linear(37, 37), nn.Tanh(),
        nn.Linear(37, 7),
    )  # fmt: skip


def test_ported_mlp_script_matches_torch_loss_curve(rng):
    """30 steps of AdamW + cosine schedule + clip_grad_norm_ on cross-entropy: the losses agree
    to f32 rounding grown over the steps (each step's update is a few ulps of the weights off
    torch's; 30 steps of a contracting optimisation keep that within ~1e-4 relative)."""
    teacher = rng.standard_normal((23, 7)).astype(np.float32)
    xs = [rng.standard_normal((19, 23)).astype(np.float32) for _ in range(30)]
    batches = [(x, (x @ teacher).argmax(1)) for x in xs]  # labels a model can learn
    curves = []
    torch.manual_seed(0)
    tmodel = _mlp(torch)
    pmodel = _mlp(pr)
    _same_weights(pmodel, tmodel)  # before torch trains its copy
    for L, model in ((torch, tmodel), (pr, pmodel)):
        opt = L.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
        sched = L.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30)
        curves.append(_curve(L, model, opt, sched, batches, L.nn.functional.cross_entropy))
    t, p = curves
    assert t[-1] < t[0] * 0.7  # it learns
    np.testing.assert_allclose(p, t, rtol=2e-4, atol=1e-5)


def test_long_training_holds_memory_and_pipelines_flat(rng):
    """1,000 steps of a small MLP with AdamW: live bytes and the pipeline count are the same
    after step 1,000 as after step 100, pooled bytes within a quarter (nothing accumulates:
    graph, saved tensors, optimizer state, pipelines)."""
    nn = pr.nn
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = pr.optim.AdamW(model.parameters(), lr=1e-3)
    x = pr.tensor(rng.standard_normal((8, 16)).astype(np.float32))
    y = pr.tensor(rng.integers(0, 4, 8))

    def step():
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for _ in range(100):
        step()
    pr.synchronize()
    gc.collect()
    before = pr.memory_stats()
    for _ in range(900):
        loss = step()
    last = loss.item()
    del loss
    pr.synchronize()
    gc.collect()
    after = pr.memory_stats()
    assert np.isfinite(last)
    for key in ("live_bytes", "pipelines"):
        assert after[key] == before[key], (key, before[key], after[key])
    assert after["pooled_bytes"] <= before["pooled_bytes"] * 1.25 + (1 << 20)


def _cnn(L):
    nn = L.nn
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 2 * 2, 5),
    )  # fmt: skip


class _LM:
    @staticmethod
    def build(L, vocab=31, d=16, T=9):
        nn = L.nn

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok = nn.Embedding(vocab, d)
                self.pos = nn.Parameter(L.zeros(T, d))
                self.block = nn.TransformerEncoderLayer(
                    d, 2, 32, dropout=0.0, batch_first=True, norm_first=True
                )
                self.head = nn.Linear(d, vocab)

            def forward(self, idx):
                mask = nn.Transformer.generate_square_subsequent_mask(T)
                h = self.block(self.tok(idx) + self.pos, src_mask=mask, is_causal=True)
                return self.head(h)

        return LM()


def _train_both(make, batches, opt_fn, loss_fn, steps):
    torch.manual_seed(0)
    tmodel = make(torch)
    pmodel = make(pr)
    _same_weights(pmodel, tmodel)
    curves = []
    for L, model in ((torch, tmodel), (pr, pmodel)):
        opt = opt_fn(L, model)
        curves.append(_curve(L, model, opt, None, batches[:steps], loss_fn(L)))
    return curves


def test_ported_cnn_with_batchnorm_matches_torch(rng):
    """A CNN with BatchNorm (batch statistics in training, running ones updated) and SGD with
    momentum: 30 steps, torch's losses to the f32 rounding grown over the steps. (Three batches
    in turn, so that the loss falls whatever the draw: thirty fresh batches of six from a random
    teacher did not always teach it anything in 30 steps.)"""
    teacher = rng.standard_normal((64, 5)).astype(np.float32)
    xs = [rng.standard_normal((6, 1, 8, 8)).astype(np.float32) for _ in range(3)] * 10
    batches = [(x, (x.reshape(6, 64) @ teacher).argmax(1)) for x in xs]
    t, p = _train_both(
        _cnn,
        batches,
        lambda L, m: L.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
        lambda L: L.nn.functional.cross_entropy,
        30,
    )
    assert t[-5:].mean() < t[:5].mean()
    np.testing.assert_allclose(p, t, rtol=5e-4, atol=1e-5)


def test_ported_transformer_lm_matches_torch(rng):
    """A one-block causal transformer LM (Embedding, pre-norm TransformerEncoderLayer with its
    attention, Linear head) with AdamW on next-token cross-entropy: 30 steps match torch's."""
    T, vocab = 9, 31
    seqs = [rng.integers(0, vocab, (4, T + 1)) for _ in range(30)]
    batches = [(s[:, :-1], s[:, 1:]) for s in seqs]

    def ce(L):
        return lambda logits, y: L.nn.functional.cross_entropy(
            logits.reshape(-1, vocab), y.reshape(-1)
        )

    t, p = _train_both(
        lambda L: _LM.build(L, vocab, 16, T),
        batches,
        lambda L, m: L.optim.AdamW(m.parameters(), lr=3e-3),
        ce,
        30,
    )
    np.testing.assert_allclose(p, t, rtol=5e-4, atol=1e-5)
