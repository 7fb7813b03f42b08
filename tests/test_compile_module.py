"""`model = pr.compile(model)` under autograd (compile/_aot.py): the forward and its backward
replay as two recordings, and an ordinary eager training loop around the compiled model gives
eager's losses and parameters. Without fusion (EXACT) a replay runs the eager kernels on the same
bytes, so those comparisons are exact."""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest
from test_compile import EXACT, _params
from test_compile import _batches as _data

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F


def _mlp(seed=0, dropout=0.3):
    pr.manual_seed(seed)
    return nn.Sequential(nn.Linear(13, 24), nn.GELU(), nn.Dropout(dropout), nn.Linear(24, 5))


def _train(m, run, batches, opt_cls=pr.optim.AdamW, **kw):
    opt = opt_cls(m.parameters(), lr=2e-2, **kw)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.cross_entropy(run(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("options", [EXACT, None])
def test_mlp_training_loop_matches_eager(options):
    """AdamW, GELU and dropout (its counter refreshed every replay): eight steps through the
    compiled module equal eager's exactly without fusion; with fusion within Adam's bound (see
    test_compile.test_training_step_with_fusion_near_eager)."""
    batches = _data(8)
    m = _mlp()
    want = _train(m, m, batches), _params(m)
    m = _mlp()
    cm = pr.compile(m, options=options)
    got = _train(m, cm, batches), _params(m)
    st = cm.stats()["training"]
    assert st["traces"] == 1 and st["replays"] == 7 and st["eager_calls"] == 0
    assert st["kernels_forward"] > 0 and st["kernels_backward"] > 0
    if options is EXACT:
        assert got[0] == want[0]
        for a, b in zip(want[1], got[1]):
            np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        for a, b in zip(want[1], got[1]):
            np.testing.assert_allclose(b, a, rtol=0, atol=8 * 2e-2 * 2**-10)


def test_transformer_lm_with_compiled_model_matches_eager():
    """The bench's small GPT (embeddings, layer norms, causal attention, GELU) with
    `model = pr.compile(model)` and the step eager around it: parameters after six AdamW steps
    equal eager's exactly."""
    from pyrite.bench.train import _gpt

    rng = np.random.default_rng(3)
    # distinct tokens: the embedding's backward adds by atomics, in no fixed order on a GPU,
    # and three or more adds into one row would round differently run to run (two commute)
    idx = pr.tensor(rng.permutation(50)[:32].reshape(2, 16))
    tgt = pr.tensor(rng.integers(0, 50, (2, 16)))
    out = []
    for compiled in (False, True):
        pr.manual_seed(0)
        opts = EXACT if compiled else False
        step = _gpt(pr, idx, tgt, d=32, heads=2, layers=1, T=16, vocab=50, compile_model=opts)
        for _ in range(6):
            step()
        out.append(_params(step.model._orig_mod if compiled else step.model))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    assert step.model.stats()["training"]["replays"] == 5


def test_batchnorm_running_stats_and_eval_variant():
    """BatchNorm's running statistics advance once a call, as eagerly; `eval()` is its own
    guard (the running statistics used, not updated) and `train()` goes back to the first."""
    rng = np.random.default_rng(5)
    xs = [pr.tensor(rng.standard_normal((4, 3, 9, 9)).astype(np.float32)) for _ in range(5)]
    ys = [pr.tensor(rng.integers(0, 3, 4)) for _ in range(5)]
    res = []
    for compiled in (False, True):
        pr.manual_seed(2)
        m = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(196, 3)
        )
        run = pr.compile(m, options=EXACT) if compiled else m
        losses = _train(m, run, list(zip(xs, ys)), pr.optim.SGD, momentum=0.9)
        m.eval()
        x = pr.tensor(rng.standard_normal((2, 3, 9, 9)).astype(np.float32)).requires_grad_()
        run(x).sum().backward()  # (eval under autograd: a gradient for the input)
        m.train()
        losses += _train(m, run, list(zip(xs[:2], ys[:2])), pr.optim.SGD)
        bn = m[1]
        res.append((losses, _params(m), bn.running_mean.numpy(), x.grad.numpy()))
        rng = np.random.default_rng(5)
        [rng.standard_normal((4, 3, 9, 9)) for _ in range(5)]
        [rng.integers(0, 3, 4) for _ in range(5)]
    assert res[0][0] == res[1][0]
    for a, b in zip(res[0][1], res[1][1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res[0][2], res[1][2])
    np.testing.assert_array_equal(res[0][3], res[1][3])
    assert run.stats()["training"]["traces"] == 2  # (train and eval)


def test_input_gradient_and_accumulation_over_micro_batches():
    """An input that requires grad gets its gradient; two backward passes without zero_grad
    accumulate, as eagerly; a second forward while the first's backward is pending runs
    eagerly (the saved activations serve one call at a time), and both gradients are right."""
    batches = _data(3)
    grads = []
    for compiled in (False, True):
        m = _mlp(dropout=0.0)
        run = pr.compile(m, options=EXACT) if compiled else m
        xs = [pr.tensor(x.numpy()).requires_grad_() for x, _ in batches]
        for _ in range(2):  # two rounds: the second replays
            for p in m.parameters():
                p.grad = None
            l0 = F.cross_entropy(run(xs[0]), batches[0][1])
            l1 = F.cross_entropy(run(xs[1]), batches[1][1])  # (the first still pending)
            (l0 + l1).backward()
            F.cross_entropy(run(xs[2]), batches[2][1]).backward()  # accumulates into .grad
        grads.append([p.grad.numpy() for p in m.parameters()] + [x.grad.numpy() for x in xs])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
    st = run.stats()["training"]
    assert st["replays"] >= 2 and st["eager_calls"] >= 2


def test_stale_backward_and_double_backward_raise():
    m = _mlp(dropout=0.0)
    cm = pr.compile(m, options=EXACT)
    (x, y), (x2, y2) = _data(2)
    first = F.cross_entropy(cm(x), y)  # the trace
    first.backward(retain_graph=True)  # (records the backward)
    w = m[0].weight.grad.numpy().copy()
    first.backward()  # (replays it: the trace's activations are still the graph's)
    np.testing.assert_array_equal(m[0].weight.grad.numpy(), 2 * w)
    loss = F.cross_entropy(cm(x), y)  # a replay
    loss.backward(retain_graph=True)
    F.cross_entropy(cm(x2), y2).backward()  # the forward graph runs again
    with pytest.raises(RuntimeError, match="called again"):
        loss.backward()
    out = cm(x)
    (g,) = pr.autograd.grad(out.sum(), [m[0].weight], create_graph=False)
    assert g.shape == m[0].weight.shape
    with pytest.raises(RuntimeError, match="double backward"):
        pr.autograd.grad(cm(x).sum(), [m[0].weight], create_graph=True)


def test_replaced_parameter_traces_again():
    ((x, y),) = _data(1)
    m = _mlp(dropout=0.0)
    cm = pr.compile(m, options=EXACT)
    for _ in range(3):
        F.cross_entropy(cm(x), y).backward()
    m[0].weight = nn.Parameter(pr.tensor(np.ones((24, 13), np.float32) * 0.01))
    m[0].weight.grad = None
    F.cross_entropy(cm(x), y).backward()
    got = m[0].weight.grad.numpy()
    m[0].weight.grad = None
    F.cross_entropy(m(x), y).backward()
    np.testing.assert_array_equal(got, m[0].weight.grad.numpy())
    assert cm.stats()["training"]["traces"] == 2


def test_readback_in_forward_runs_eagerly_with_a_warning():
    class Peek(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(13, 5)

        def forward(self, x):
            out = self.lin(x)
            if out.sum().item() > 1e9:  # data-dependent Python: not replayable
                out = out * 0
            return out

    ((x, y),) = _data(1)
    pr.manual_seed(0)
    m = Peek()
    cm = pr.compile(m)
    with pytest.warns(UserWarning, match="run eagerly"):
        F.cross_entropy(cm(x), y).backward()
    got = m.lin.weight.grad.numpy()
    m.lin.weight.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.cross_entropy(cm(x), y).backward()
    np.testing.assert_array_equal(got, m.lin.weight.grad.numpy())
    st = cm.stats()["training"]
    assert st["eager_calls"] == 1 and st["graph_breaks"]


def test_forward_writing_its_input_in_place_reaches_the_caller(rng):
    """A compiled module (under autograd) whose forward writes its argument in place: the
    caller's tensor takes the write on every call, as in eager code (the trace wrote its own
    slot only); such a forward runs eagerly, with a warning naming why."""

    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(7, 3)

        def forward(self, x):
            x.mul_(0.5)
            return self.lin(x)

    pr.manual_seed(0)
    m = Scale()
    cm = pr.compile(m)
    a = rng.standard_normal((4, 7)).astype(np.float32)
    for call in range(3):
        x, xe = pr.tensor(a), pr.tensor(a)
        if call == 0:
            with pytest.warns(UserWarning, match="in place"):
                got = cm(x)
        else:
            got = cm(x)
        want = m(xe)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6)
        np.testing.assert_array_equal(x.numpy(), xe.numpy())
        np.testing.assert_array_equal(x.numpy(), a * 0.5)


def test_memory_is_flat_over_many_training_replays():
    m = _mlp()
    cm = pr.compile(m)
    opt = pr.optim.AdamW(m.parameters(), lr=1e-3)
    ((x, y),) = _data(1)
    pool = pr.backend.current().pool

    def step():
        opt.zero_grad()
        F.cross_entropy(cm(x), y).backward()
        opt.step()

    for _ in range(5):
        step()
    gc.collect()  # (earlier tests' garbage must not leave during the measurement)
    pr.synchronize()
    before = (pool.live_bytes, pool.held_bytes, len(pool.pins), pool.allocations)
    for _ in range(300):
        step()
    gc.collect()
    pr.synchronize()
    assert (pool.live_bytes, pool.held_bytes, len(pool.pins), pool.allocations) == before
    assert cm.stats()["training"]["replays"] == 304
