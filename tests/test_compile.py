"""pr.compile: a recorded step replays what eager pyrite would have done.

Without fusion a replay runs the very kernels the eager trace ran, in the same order, on the
same bytes, with only their info words refreshed (learning rates, step counts, random counters)
— so a compiled step and the same step run eagerly must agree bit for bit, and those tests compare
exactly (options=EXACT). The fusion tests compare within rounding bounds.
"""

from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F

# Without fusion a replay runs the eager kernels on the same bytes: bit-identical results. With
# it, a shader compiler may contract or reorder float algebra across what were two kernels
# (NVIDIA's does), so the fusion tests compare within a rounding bound instead.
EXACT = {"fusion": False}


def _params(m):
    return [p.detach().numpy() for p in m.parameters()]


def _mlp(seed=0, dropout=0.0):
    pr.manual_seed(seed)
    m = nn.Sequential(nn.Linear(13, 24), nn.ReLU(), nn.Dropout(dropout), nn.Linear(24, 5))
    opt = pr.optim.AdamW(m.parameters(), lr=2e-2, weight_decay=0.01)
    sched = pr.optim.lr_scheduler.StepLR(opt, 3, 0.5)
    return m, opt, sched


def _batches(n, rows=11, seed=1):
    rng = np.random.default_rng(seed)
    return [
        (
            pr.tensor(rng.standard_normal((rows, 13)).astype(np.float32)),
            pr.tensor(rng.integers(0, 5, rows)),
        )
        for _ in range(n)
    ]


def _step_fn(m, opt, sched=None):
    """The training step the tests compile: zero_grad, cross-entropy forward, backward, the
    optimizer's step and the schedule's."""

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        return loss

    return step


def _run(compiled, n=9, dropout=0.3, options=EXACT, **kw):
    m, opt, sched = _mlp(dropout=dropout)
    step = _step_fn(m, opt, sched)
    f = pr.compile(step, options=options, **kw) if compiled else step
    losses = [float(f(x, y).item()) for x, y in _batches(n)]
    return losses, _params(m), opt, f


@pytest.mark.parametrize("per_dispatch", [16, 3, 1])
def test_training_step_matches_eager_exactly(per_dispatch, monkeypatch):
    """AdamW with weight decay, a StepLR schedule and dropout: losses and parameters after 9
    steps equal eager's bit for bit; the replays actually happened. With the optimizer's
    parameters a dispatch capped (Dawn binds 3 Adam parameters a dispatch: a batch of 3 and a
    single update, whose info words are laid out differently)."""
    from pyrite.optim import _fused

    monkeypatch.setattr(_fused, "MAX_BATCH", per_dispatch)
    n = 50 if per_dispatch == 16 else 9
    le, pe, opt_e, _ = _run(False, n=n)
    lc, pc, opt_c, f = _run(True, n=n)
    assert le == lc
    for a, b in zip(pe, pc):
        np.testing.assert_array_equal(a, b)
    assert opt_c.param_groups[0]["lr"] == opt_e.param_groups[0]["lr"] == 2e-2 * 0.5 ** (n // 3)
    s = f.stats()
    # the first call records (the model and optimizer are found in the step's closure) with no
    # gradients yet; the second, with gradients, records again; the rest replay
    assert s["traces"] == 2 and s["replays"] == n - 2 and s["graph_breaks"] == []
    assert s["regions"] == 2  # the optimizer's step and the schedule's


def test_training_step_with_fusion_near_eager():
    """The same step with fusion on (the default): fused kernels round each intermediate to
    f32 as eager does, but a compiler may contract across them (one rounding each, 2^-24
    relative). Adam's update is lr * m / sqrt(v): such perturbations of the gradient move each
    step by far less than lr * 2^-10, so after n steps parameters agree within n * lr * 2^-10."""
    le, pe, _, _ = _run(False)
    lc, pc, _, f = _run(True, options=None)  # (fusion on)
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for a, b in zip(pe, pc):
        np.testing.assert_allclose(b, a, rtol=0, atol=9 * 2e-2 * 2**-10)
    assert f.stats()["replays"] == 7


def test_chunked_replay_same_result():
    le, pe, _, _ = _run(False)
    lc, pc, _, f = _run(True, chunk=3)
    assert le == lc
    for a, b in zip(pe, pc):
        np.testing.assert_array_equal(a, b)
    assert f.stats()["replays"] == 7


def test_transformer_lm_matches_eager():
    """The bench's small GPT (embeddings, layer norms, causal attention, GELU, AdamW): fifty
    steps compiled give eager's parameters exactly."""
    from pyrite.bench.train import _gpt

    rng = np.random.default_rng(3)
    # distinct tokens: the embedding's backward adds by atomics, in no fixed order on a GPU,
    # and three or more adds into one row would round differently run to run (two commute)
    idx = pr.tensor(rng.permutation(50)[:32].reshape(2, 16))
    tgt = pr.tensor(rng.integers(0, 50, (2, 16)))
    out = []
    for compiled in (False, True):
        pr.manual_seed(0)
        step = _gpt(pr, idx, tgt, d=32, heads=2, layers=1, T=16, vocab=50)
        f = pr.compile(step, options=EXACT) if compiled else step
        for _ in range(50):
            f()
        out.append(_params(step.model))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)
    assert f.stats()["replays"] >= 4


def test_cnn_batchnorm_running_stats():
    """BatchNorm's running statistics are updated in place by every replay, as eagerly: fifty
    steps of a CNN give eager's losses, parameters and statistics exactly."""
    rng = np.random.default_rng(5)
    xs = [pr.tensor(rng.standard_normal((4, 3, 9, 9)).astype(np.float32)) for _ in range(50)]
    ys = [pr.tensor(rng.integers(0, 3, 4)) for _ in range(50)]
    res = []
    for compiled in (False, True):
        pr.manual_seed(2)
        m = nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(196, 3)
        )
        opt = pr.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        step = _step_fn(m, opt)
        f = pr.compile(step, options=EXACT) if compiled else step
        losses = [f(x, y).item() for x, y in zip(xs, ys)]
        bn = m[1]
        res.append((losses, _params(m), bn.running_mean.numpy(), bn.running_var.numpy()))
    assert res[0][0] == res[1][0]
    for a, b in zip(res[0][1], res[1][1]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(res[0][2], res[1][2])
    np.testing.assert_array_equal(res[0][3], res[1][3])
    assert int(m[1].num_batches_tracked.item()) == 50


def test_compiled_module_inference_and_training():
    pr.manual_seed(0)
    m = nn.Sequential(nn.Linear(7, 9), nn.GELU(), nn.Linear(9, 3))
    cm = pr.compile(m, options=EXACT)
    rng = np.random.default_rng(0)
    x = pr.tensor(rng.standard_normal((5, 7)).astype(np.float32))
    with pr.no_grad():
        want = m(x).numpy()
        a = cm(x)
        b = cm(x)
    np.testing.assert_array_equal(a.numpy(), want)
    np.testing.assert_array_equal(b.numpy(), want)
    assert cm.stats()["replays"] == 1
    assert a._storage is not b._storage  # each call's result is its own
    assert list(cm.state_dict()) == ["_orig_mod." + k for k in m.state_dict()]
    # with grad: the training recordings (tests/test_compile_module.py), backward works
    out = cm(x)
    out.sum().backward()
    assert m[0].weight.grad is not None


def test_guards_retrace_on_shape_and_mode_and_rerun_on_a_new_number():
    pr.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    calls = []

    def f(x, scale):
        calls.append(1)
        return m(x) * scale

    g = pr.compile(f, options=EXACT)
    rng = np.random.default_rng(0)
    x4 = pr.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    x5 = pr.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    with pr.no_grad():
        m.eval()
        r1 = g(x4, 2.0).numpy()
        g(x4, 2.0)
        assert len(calls) == 1  # replayed: the Python body did not run
        assert g.stats()["mode"] == "replay"
        # a new number: the recording is rerun with it (the body runs), not traced again
        np.testing.assert_array_equal(g(x4, 3.0).numpy(), r1 / 2 * 3)
        assert len(calls) == 2 and g.stats()["traces"] == 1
        assert g.stats()["mode"] == "rerun" and g.stats()["reruns"] == 1
        # from then on it serves every number, the first one too (never a stale scale)
        for s in (2.0, 0.25, -1.5, 2.0):
            np.testing.assert_array_equal(g(x4, s).numpy(), r1 / 2 * s)
        assert g.stats()["traces"] == 1 and g.stats()["reruns"] == 5
        n = len(calls)
        assert g(x5, 2.0).shape == (5, 4)  # a new shape: traced
        assert len(calls) == n + 1 and g.stats()["traces"] == 2
        m.train()  # dropout on: a different recording
        t = g(x4, 2.0).numpy()
        assert g.stats()["traces"] == 3
        assert (t == 0).any() or not np.array_equal(t, r1)
        m.eval()
        np.testing.assert_array_equal(g(x4, 2.0).numpy(), r1)
        assert g.stats()["traces"] == 3


def test_replaced_parameter_makes_it_stale():
    pr.manual_seed(0)
    lin = nn.Linear(3, 2)
    f = pr.compile(lambda x: lin(x))
    x = pr.tensor(np.ones((1, 3), np.float32))
    with pr.no_grad():
        f(x)
        f(x)
        lin.weight = nn.Parameter(pr.zeros(2, 3))
        lin.bias = nn.Parameter(pr.ones(2))
        np.testing.assert_array_equal(f(x).numpy(), np.ones((1, 2), np.float32))


def test_inputs_mutated_in_place_reach_the_caller():
    f = pr.compile(lambda x, y: x.add_(y))
    x = pr.tensor(np.arange(6, dtype=np.float32))
    y = pr.tensor(np.full(6, 0.5, np.float32))
    for i in range(3):
        f(x, y)
    np.testing.assert_array_equal(x.numpy(), np.arange(6) + 1.5)
    # a strided argument (not a plain copy): through copy_
    base = pr.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    col = base[:, 1]
    f(col, pr.tensor(np.ones(3, np.float32)))
    f(col, pr.tensor(np.ones(3, np.float32)))
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    want[:, 1] += 2
    np.testing.assert_array_equal(base.numpy(), want)


def test_arguments_sharing_a_storage_see_each_others_writes(rng):
    """f(x, x) and f(x[:k], x[j:]) with a write through one argument: the other sees it, as in
    eager code (each argument had its own slot: the read saw the old values), call after call;
    the aliasing is a guard (the same function with two distinct tensors traces apart)."""
    import torch

    def f(a, b):
        a.mul_(1.5).add_(0.25)
        return b * 2 - a.sum()

    cf = pr.compile(f)
    n = 13
    for call in range(4):
        a0 = rng.standard_normal(n).astype(np.float32)
        for lo, hi in ((0, n), (0, 9), (3, n)):
            t, tt = pr.tensor(a0), torch.tensor(a0)
            if (lo, hi) == (0, n):
                got, want = cf(t, t), f(tt, tt)
            else:
                got, want = cf(t[:hi], t[lo:]), f(tt[:hi], tt[lo:])
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=1e-6)
        u, v = pr.tensor(a0), pr.tensor(a0)  # distinct storages: no sharing
        uu, vv = torch.tensor(a0), torch.tensor(a0)
        np.testing.assert_allclose(cf(u, v).numpy(), f(uu, vv).numpy(), rtol=1e-5, atol=1e-5)
    s = cf.stats()
    # one recording a sharing pattern, each replayed after its trace (stats: the last one's)
    assert s["traces"] == 4 and s["eager_calls"] == 0 and s["replays"] == 3


def test_an_index_written_through_another_argument_is_checked():
    """emb(b) after a.add_(100) where a is b: the lookup reads the new, out-of-range ids and
    raises as eager code does (it gathered the old ids' rows)."""
    emb = pr.nn.Embedding(5, 3)

    def f(a, b):
        a.add_(100)
        return emb(b)

    cf = pr.compile(f)
    ids = pr.tensor(np.array([0, 3, 1], np.int64))
    with pytest.raises(IndexError):
        f(ids, ids)
    ids = pr.tensor(np.array([0, 3, 1], np.int64))
    with pytest.raises(IndexError):
        cf(ids, ids)


def assert_memory_flat(f, args, calls):
    """After warm calls, `calls` more calls of f(*args) make no buffer and leave the live and
    the held bytes as they were."""
    dev = pr._backend.current()
    for _ in range(5):
        f(*args)
    pr.synchronize()
    gc.collect()
    live, made, held = dev.pool.live_bytes, dev.pool.allocations, dev.pool.held_bytes
    for _ in range(calls):
        f(*args)
    pr.synchronize()
    gc.collect()
    assert dev.pool.allocations == made  # no new buffer: every call reuses the pool's
    assert dev.pool.live_bytes == live
    assert dev.pool.held_bytes == held


def test_memory_is_flat_over_many_replays():
    _, _, _, f = _run(True, n=3, dropout=0.0)
    assert_memory_flat(f, _batches(1)[0], 200)


def test_graph_and_stats_describe_the_recording():
    _, _, _, f = _run(True, n=3, dropout=0.0)
    text = str(f.graph)
    assert "Linear.forward" in text and "Tensor.backward" in text
    s = f.stats()
    assert s["kernels"] == text.count("grid (")
    assert s["planned_bytes"] <= s["unplanned_bytes"]
    assert s["pipelines"] <= s["kernels"]


def test_reset_and_decorator():
    @pr.compile(fullgraph=True)
    def f(x):
        return (x * 2).relu()

    x = pr.tensor(np.array([-1.0, 2.0], np.float32))
    np.testing.assert_array_equal(f(x).numpy(), [0.0, 4.0])
    np.testing.assert_array_equal(f(x).numpy(), [0.0, 4.0])
    f.reset()
    assert f.graph is None
    np.testing.assert_array_equal(f(x).numpy(), [0.0, 4.0])
    with pytest.raises(ValueError, match="chunk"):
        pr.compile(f, chunk=0)


def test_eval_function_beside_the_step_shares_parameters():
    """A forward compiled beside the training step reads the same parameter buffers: after each
    replayed step it sees the updated weights, with no copy."""
    m, opt, sched = _mlp(dropout=0.0)
    step = pr.compile(_step_fn(m, opt), options=EXACT)

    @pr.compile(options=EXACT)
    def evaluate(x):
        with pr.no_grad():
            return m(x).argmax(-1)

    data = _batches(6)
    for x, y in data:
        step(x, y)
        x0 = data[0][0]
        with pr.no_grad():
            want = m(x0).argmax(-1).numpy()
        np.testing.assert_array_equal(evaluate(x0).numpy(), want)
    assert evaluate.stats()["replays"] >= 4


def test_captures_return_module_outputs():
    pr.manual_seed(0)
    m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    cm = pr.compile(m, captures=["1"], options=EXACT)
    x = pr.tensor(np.random.default_rng(0).standard_normal((3, 6)).astype(np.float32))
    with pr.no_grad():
        want = m[1](m[0](x)).numpy()
        for _ in range(3):
            cm(x)
            np.testing.assert_array_equal(cm.captured["1"].numpy(), want)
    assert cm.stats()["replays"] == 2
    with pytest.raises(ValueError, match="no module named 'nope'"):
        pr.compile(m, captures=["nope"])(x)


def test_output_view_copies_only_what_it_reaches():
    big = pr.tensor(np.arange(4096, dtype=np.float32).reshape(64, 64))

    @pr.compile
    def last_column(x):
        return (x * 2)[:, -1]

    for _ in range(3):
        out = last_column(big)
    np.testing.assert_array_equal(out.numpy(), np.arange(63, 4096, 64) * 2)
    assert out._storage.nbytes < 64 * 64 * 4


def test_nested_compiled_function_is_part_of_the_outer_recording():
    inner = pr.compile(lambda x: x * 3, options=EXACT)
    outer = pr.compile(lambda x: inner(x) + 1, options=EXACT)
    x = pr.tensor(np.arange(5, dtype=np.float32))
    for _ in range(3):
        np.testing.assert_array_equal(outer(x).numpy(), np.arange(5) * 3 + 1)
    assert outer.stats()["replays"] == 2 and inner.stats()["traces"] == 0


def test_dataloader_inside_runs_eagerly():
    from pyrite.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(pr.tensor(np.arange(8, dtype=np.float32).reshape(8, 1)))
    it = iter(DataLoader(ds, batch_size=2))

    def f():
        (xb,) = next(it)
        return xb.sum()

    g = pr.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = [g().item() for _ in range(4)]
    assert got == [1.0, 5.0, 9.0, 13.0]  # every batch, none frozen


def _k(n):
    """Kernels of n maps: under PYRITE_POISON each new output is first filled with NaN (one
    more kernel a map)."""
    from pyrite.ops import core

    return 2 * n if core.POISON else n


def test_elementwise_chain_fuses_into_one_kernel():
    """(x * w + b).relu() * 0.5 + y: five maps whose intermediates nothing else reads become
    one kernel; the result matches numpy within one f32 rounding an op (fusion keeps every
    intermediate's f32 value; a compiler may contract a multiply-add into one fma)."""
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal((37, 19)).astype(np.float32) for _ in range(3)]
    w, b = rng.standard_normal(19).astype(np.float32), rng.standard_normal(19).astype(np.float32)
    x, y, tw, tb = pr.tensor(xs[0]), pr.tensor(xs[1]), pr.tensor(w), pr.tensor(b)

    def f(x, y):
        return (x * tw + tb).relu() * 0.5 + y

    g = pr.compile(f)
    for _ in range(3):
        got = g(x, y).numpy()
    x64 = xs[0].astype(np.float64)
    want = np.maximum(x64 * w + b, 0) * 0.5 + xs[1]
    scale = (np.abs(x64 * w) + np.abs(b)) * 0.5 + np.abs(xs[1])
    np.testing.assert_allclose(got, want, rtol=0, atol=float(4 * 2**-24 * scale.max()) + 1e-30)
    s = g.stats()
    assert s["kernels_traced"] == _k(5) and s["kernels"] == _k(1) and s["fused"] == 4
    unfused = pr.compile(f, options={"fusion": False})
    for _ in range(2):
        out = unfused(x, y)
    assert unfused.stats()["kernels"] == _k(5)
    np.testing.assert_array_equal(out.numpy(), f(x, y).numpy())  # no fusion: eager's bits
    with pytest.raises(ValueError, match="fusion"):
        pr.compile(f, options={"fuse": True})


def test_intermediate_read_twice_is_not_fused_and_dead_code_goes():
    rng = np.random.default_rng(8)
    x = pr.tensor(rng.standard_normal((5, 6)).astype(np.float32))

    def f(x):
        h = x * 3  # read by two maps: stays
        unused = (h + 7).exp()  # never reaches an output: removed
        del unused
        return h + 1, h * 2

    g = pr.compile(f)
    for _ in range(3):
        a, b = g(x)
    x64 = x.numpy().astype(np.float64)
    # two f32 roundings each (h, then the result), relative to the magnitudes involved
    err = np.abs(a.numpy() - (x64 * 3 + 1))
    assert (err <= 2 * 2**-24 * (np.abs(3 * x64) + 1)).all()
    np.testing.assert_allclose(b.numpy(), x64 * 6, rtol=2 * 2**-24)
    s = g.stats()
    # h + 7 fuses into exp (its only reader), and that kernel, read by nothing, goes
    assert s["kernels_traced"] == _k(5) and s["kernels"] == _k(3) and s["fused"] == 1


@pytest.mark.parametrize(
    "tile", [(64, 64, 8, 8, 16, True), (32, 32, 4, 4, 32, True, 4)], ids=["64x64", "k-groups"]
)
def test_map_fuses_into_the_gemm_store(monkeypatch, tile):
    """relu(x @ w.T + b) * 0.5 + r on the fast GEMM: the three maps run in the product's store,
    one kernel instead of four; within the dot-product bound of float64 numpy (the maps add one
    f32 rounding each: 2^-24 of their magnitudes). Also on a tile of K groups (gemm_fast's `kg`:
    group 0 stores, so runs the maps, after the groups' sums are merged)."""
    from pyrite.ops import matmul as mm

    monkeypatch.setattr(mm, "FORCE", ("fast", tile))
    rng = np.random.default_rng(11)
    x = rng.standard_normal((128, 96)).astype(np.float32)
    w = rng.standard_normal((64, 96)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    r = rng.standard_normal((2, 64, 64)).astype(np.float32)
    tx, tw, tb, tr = (pr.tensor(v) for v in (x, w, bias, r))

    def f(x, r):
        y = F.linear(x, tw, tb).relu() * 0.5
        return y.reshape(2, 64, 64) + r

    F.linear(tx, tw, tb)
    assert mm.LAST == ("fast", tile)  # (the forced tile applies to this product)
    g = pr.compile(f)
    for _ in range(3):
        got = g(tx, tr).numpy()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    lin = x64 @ w64.T + bias
    want = (np.maximum(lin, 0) * 0.5).reshape(2, 64, 64) + r
    bound = 96 * 2**-24 * (np.abs(x64) @ np.abs(w64.T) + np.abs(bias))
    tol = (bound * 0.5).reshape(2, 64, 64) + 2 * 2**-24 * (np.abs(want) + np.abs(r))
    assert (np.abs(got - want) <= tol).all()
    s = g.stats()
    assert s["kernels_traced"] == _k(4) and s["kernels"] == _k(1) and s["fused"] == 3
    assert "gemm_plan+run_map" in str(g.graph) or "gemm+run_map" in str(g.graph)


def test_map_fuses_into_the_split_k_sum(monkeypatch):
    """x @ w.T + b + r with K split in two: the residual add runs in the partial products'
    sum (kernels/matmul.splitk_sum post), 2 kernels instead of 3, within the dot bound."""
    from pyrite.ops import matmul as mm

    monkeypatch.setattr(mm, "FORCE_SPLIT", (2, ("fast", (64, 64, 8, 8, 16, True))))
    rng = np.random.default_rng(12)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w = rng.standard_normal((64, 256)).astype(np.float32)
    bias = rng.standard_normal(64).astype(np.float32)
    r = rng.standard_normal((64, 64)).astype(np.float32)
    tw, tb = pr.tensor(w), pr.tensor(bias)
    g = pr.compile(lambda x, r: F.linear(x, tw, tb) + r)
    for _ in range(3):
        got = g(pr.tensor(x), pr.tensor(r)).numpy()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    want = x64 @ w64.T + bias + r
    tol = 256 * 2**-24 * (np.abs(x64) @ np.abs(w64.T) + np.abs(bias)) + 2**-24 * np.abs(want)
    assert (np.abs(got - want) <= 2 * tol).all()
    s = g.stats()
    assert s["kernels_traced"] == _k(3) and s["kernels"] == _k(2) and s["fused"] == 1


@pytest.mark.parametrize("vec", [4, 1])
def test_maps_fuse_into_the_gemv_store(monkeypatch, vec):
    """A decoding step's pattern on the matrix-vector kernel (kernels/matmul.gemv_rows: one
    row): silu(x @ wg.T) * (x @ wu.T), then (. @ wd.T) + x, the residual. The SiLU fuses into
    the gate's store, the product of the two into the up projection's, the residual into the
    down projection's: 3 kernels instead of 6, within the dot bound of float64 numpy."""
    from pyrite.ops import matmul as mm

    monkeypatch.setattr(mm, "FORCE", ("gemv", (1, vec)))
    rng = np.random.default_rng(14)
    d, h = 96, 160
    x = rng.standard_normal((1, d)).astype(np.float32)
    wg, wu = (rng.standard_normal((h, d)).astype(np.float32) / 8 for _ in range(2))
    wd = rng.standard_normal((d, h)).astype(np.float32) / 8
    tg, tu, td = (pr.tensor(w) for w in (wg, wu, wd))

    def f(x):
        return F.linear(F.silu(F.linear(x, tg)) * F.linear(x, tu), td) + x

    F.linear(pr.tensor(x), tg)
    assert mm.LAST[0] == "gemv"
    g = pr.compile(f)
    for _ in range(3):
        got = g(pr.tensor(x)).numpy()
    x64 = x.astype(np.float64)
    a, b = x64 @ wg.T.astype(np.float64), x64 @ wu.T.astype(np.float64)
    m = a / (1 + np.exp(-a)) * b
    want = m @ wd.T.astype(np.float64) + x64
    ab = np.abs(x64) @ np.abs(wg.T) + np.abs(x64) @ np.abs(wu.T)
    bound = (d + 8) * 2**-24 * ab  # (the dots, and the maps' roundings, over |inputs|)
    tol = (h + 4) * 2**-24 * (np.abs(m) + bound) @ np.abs(wd.T) + 2**-23 * np.abs(want)
    assert (np.abs(got - want) <= tol).all()
    s = g.stats()
    assert s["kernels_traced"] == _k(6) and s["kernels"] == _k(3) and s["fused"] == 3, s


@pytest.mark.parametrize("bits", [4, 8])
def test_maps_fuse_into_the_quantized_gemv_store(bits):
    """The same pattern on packed weights (kernels/quant.qgemv, int4 in groups of 32 or int8
    by rows), the down projection's product y read twice (y + x and y * 2): 4 kernels instead
    of 7 (one of the two maps runs in y's store beside it, a second output; the other reads
    y), with the eager step's values (the fused maps are the same f32 operations on the same
    products)."""
    from pyrite.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_

    rng = np.random.default_rng(15)
    d, h = 96, 160
    mlp = pr.nn.ModuleDict(
        {"g": pr.nn.Linear(d, h, bias=False), "u": pr.nn.Linear(d, h, bias=False),
         "d": pr.nn.Linear(h, d, bias=False)}
    )  # fmt: skip
    quantize_(mlp, Int4WeightOnlyConfig(group_size=32) if bits == 4 else Int8WeightOnlyConfig())
    assert isinstance(mlp["g"], pr.quantization.QuantizedLinear)

    def f(x):
        y = mlp["d"](F.silu(mlp["g"](x)) * mlp["u"](x))
        return y + x, y * 2

    x = pr.tensor(rng.standard_normal((1, d)).astype(np.float32))
    with pr.no_grad():
        want = [t.numpy() for t in f(x)]
        g = pr.compile(f)
        for _ in range(3):
            got = [t.numpy() for t in g(x)]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2**-22, atol=2**-22 * np.abs(b).max())
    s = g.stats()
    assert s["kernels_traced"] == _k(7) and s["kernels"] == _k(4) and s["fused"] == 3, s


@pytest.mark.parametrize("split", [False, True])
def test_map_of_a_product_read_elsewhere_fuses_as_a_second_output(split, monkeypatch):
    """GELU of a product whose value is also returned (the pre-activation a backward saves):
    the product's store writes both (gemm_fast / splitk_sum `dual`), one kernel fewer, the
    product within the dot bound of float64 and the GELU within its f32 rounding of that."""
    from pyrite.ops import matmul as mm

    # (a 4x4 tile: GELU, a transcendental map, fuses into tiles of at most
    # fusion.HEAVY_POST_MAX_SUMS sums an invocation; a split's sum takes it whatever the tile)
    fast = ("fast", (64, 64, 8, 8, 16, True) if split else (64, 64, 4, 4, 16, True))
    if split:
        monkeypatch.setattr(mm, "FORCE_SPLIT", (2, fast))
    else:
        monkeypatch.setattr(mm, "FORCE", fast)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((64, 256)).astype(np.float32)
    w = (rng.standard_normal((128, 256)) / 16).astype(np.float32)
    tw = pr.tensor(w)

    def f(x):
        h = F.linear(x, tw)
        return h, F.gelu(h) * 2

    g = pr.compile(f)
    for _ in range(3):
        h, y = (t.numpy() for t in g(pr.tensor(x)))
    import math

    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    lin = x64 @ w64.T
    bound = 256 * 2**-24 * (np.abs(x64) @ np.abs(w64.T))
    assert (np.abs(h - lin) <= 2 * bound).all()
    erf = np.vectorize(math.erf)
    want = lin * (1 + erf(lin / math.sqrt(2)))  # (gelu * 2)
    assert (np.abs(y - want) <= 4 * bound + 2**-20 * (np.abs(want) + 1e-6)).all()
    s = g.stats()
    # the GELU map and the * 2 become one map, which runs in the product's store
    assert s["kernels"] == _k(1 + split) and s["fused"] == 2
    assert "+run_map" in str(g.graph)


def test_transcendental_map_stays_out_of_a_big_tiles_store(monkeypatch):
    """GELU of a product on a tile of more than fusion.HEAVY_POST_MAX_SUMS sums an invocation
    (8x8) runs as its own kernel (fused there it cost more than apart on an H100), and the
    result is still GELU of the product; a cheap map (* 2 + 1) still fuses into the same tile."""
    from pyrite.compile import fusion
    from pyrite.ops import matmul as mm

    monkeypatch.setattr(mm, "FORCE", ("fast", (64, 64, 8, 8, 16, True)))
    assert 64 > fusion.HEAVY_POST_MAX_SUMS
    rng = np.random.default_rng(14)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    w = (rng.standard_normal((64, 128)) / 11).astype(np.float32)
    tw = pr.tensor(w)
    heavy = pr.compile(lambda x: F.gelu(F.linear(x, tw)))
    cheap = pr.compile(lambda x: F.linear(x, tw) * 2 + 1)
    for _ in range(2):
        y, z = heavy(pr.tensor(x)).numpy(), cheap(pr.tensor(x)).numpy()
    import math

    lin = x.astype(np.float64) @ w.astype(np.float64).T
    bound = 128 * 2**-24 * (np.abs(x.astype(np.float64)) @ np.abs(w.T))
    erf = np.vectorize(math.erf)
    assert (np.abs(y - 0.5 * lin * (1 + erf(lin / math.sqrt(2)))) <= 2 * bound + 1e-6).all()
    assert (np.abs(z - (2 * lin + 1)) <= 4 * bound + 2**-22 * np.abs(2 * lin + 1)).all()
    assert heavy.stats()["kernels"] == _k(2) and heavy.stats()["fused"] == 0
    assert cheap.stats()["kernels"] == _k(1)


OPTIMIZERS = [
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-3}),
    ("Adam", {"lr": 1e-2, "amsgrad": True}),
    ("AdamW", {"lr": 1e-2}),
    ("RMSprop", {"lr": 1e-2, "centered": True, "momentum": 0.5}),
    ("Adagrad", {"lr": 0.1}),
    ("Adadelta", {"lr": 1.0}),
    ("Adamax", {"lr": 1e-2}),
    ("NAdam", {"lr": 1e-2}),
    ("RAdam", {"lr": 1e-2}),
    ("ASGD", {"lr": 0.05}),
]
SCHEDULES = [
    lambda o: pr.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=20),
    lambda o: pr.optim.lr_scheduler.LambdaLR(o, lambda k: 1.0 / (1 + k)),
    lambda o: pr.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4),
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[n for n, _ in OPTIMIZERS])
def test_every_optimizer_replays_as_eagerly(name, kw):
    """Each optimizer's step, replayed (its host-side step counts and scalars rerun, its fused
    updates handed new scalar words), gives eager's parameters bit for bit after 7 steps, with a
    schedule changing the learning rate every step."""
    data = _batches(7)
    out = []
    for compiled in (False, True):
        pr.manual_seed(3)
        m = nn.Sequential(nn.Linear(13, 8), nn.Tanh(), nn.Linear(8, 5))
        opt = getattr(pr.optim, name)(m.parameters(), **kw)
        sched = SCHEDULES[len(name) % len(SCHEDULES)](opt) if name != "Adadelta" else None

        step = _step_fn(m, opt, sched)
        f = pr.compile(step, options=EXACT) if compiled else step
        losses = [f(x, y).item() for x, y in data]
        out.append((losses, _params(m)))
    assert out[0][0] == out[1][0]
    for a, b in zip(out[0][1], out[1][1]):
        np.testing.assert_array_equal(a, b)
    assert f.stats()["replays"] == 5


def test_constants_fold_and_writes_to_arguments_do_not():
    """Commands whose results are the same every replay (an arange, a fill of ones, a map of
    those) run once, at the trace; a fill of an argument, refreshed from the caller every call,
    runs every replay."""
    rng = np.random.default_rng(4)

    def f(x):
        pos = pr.arange(x.shape[-1], dtype=pr.float32) * 0.5  # constant: folded
        return x * pos + pr.ones(x.shape[-1])

    g = pr.compile(f)
    for _ in range(4):
        a = rng.standard_normal((3, 11)).astype(np.float32)
        want = f(pr.tensor(a)).numpy()
        # (one rounding: a shader compiler may contract the fused multiply-add)
        np.testing.assert_allclose(g(pr.tensor(a)).numpy(), want, rtol=2**-23, atol=2**-23)
    st = g.stats()
    assert st["folded"] >= 2 and st["replays"] == 3
    assert st["kernels"] == _k(1)  # (the multiply-add alone: its operands are constants)

    def h(x):
        x.fill_(2.0)
        return x * 3

    k = pr.compile(h)
    for _ in range(3):
        x = pr.tensor(rng.standard_normal(5).astype(np.float32))
        np.testing.assert_array_equal(k(x).numpy(), np.full(5, 6, np.float32))
        np.testing.assert_array_equal(x.numpy(), np.full(5, 2, np.float32))
    assert k.stats()["replays"] == 2


def test_residual_add_fuses_into_the_norm_backward():
    """The small GPT's backward with fusion on: the residual gradient adds after each layer
    norm's backward run in the row gradient kernel's store (compile/fusion.py fuse_row). A
    replay's gradients equal eager's but for the roundings fusion moves (a shader compiler may
    contract a fused add into a multiply: one f32 rounding, 2^-24 relative, at each of the
    backward's few tens of ops): within 2^-14 of each gradient's largest magnitude."""
    from pyrite.bench.train import _gpt

    rng = np.random.default_rng(3)
    # distinct tokens: the embedding's backward adds by atomics, in no fixed order on a GPU,
    # and three or more adds into one row would round differently run to run (two commute)
    idx = pr.tensor(rng.permutation(50)[:32].reshape(2, 16))
    tgt = pr.tensor(rng.integers(0, 50, (2, 16)))
    pr.manual_seed(0)
    step = _gpt(pr, idx, tgt, d=32, heads=2, layers=2, T=16, vocab=50)
    model = step.model

    def grads():
        for p in model.parameters():
            p.grad = None
        loss = F.cross_entropy(model(idx).reshape(-1, 50), tgt.reshape(-1))
        loss.backward()
        return loss

    f = pr.compile(grads)
    for _ in range(3):
        f()
    got = [p.grad.numpy() for p in model.parameters()]
    grads()
    for g, p in zip(got, model.parameters()):
        want = p.grad.numpy()
        assert np.abs(g - want).max() <= 2**-14 * np.abs(want).max() + 1e-12
    names = [line.split()[1] for line in str(f.graph).splitlines()[1:] if line[:6].strip()]
    assert sum(name == "_row_grad+run_map" for name in names) >= 2


def test_common_subexpressions_run_once():
    """The same maps twice on the same input (x * 2 + 1, written twice) run once; the result
    is the eager one's (no rounding moves: the twin is the same kernel on the same bytes)."""
    rng = np.random.default_rng(6)

    def f(x):
        a = x * 2 + 1
        b = x * 2 + 1
        return a * b

    g = pr.compile(f)
    for _ in range(3):
        x = rng.standard_normal((5, 7)).astype(np.float32)
        want = f(pr.tensor(x)).numpy()
        np.testing.assert_allclose(g(pr.tensor(x)).numpy(), want, rtol=2**-22, atol=0)
    st = g.stats()
    # the second + 1 is the first's twin (its input, a temporary in a reused buffer, holds the
    # same value); the second x * 2 then has no reader and goes as dead code
    assert st["common"] == 1
    assert st["kernels"] == _k(2)  # x * 2 + 1 fused into one map, then the product


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_zero_grad_after_the_step_inside_the_compiled_function(opt_name):
    """backward, step, zero_grad() (set_to_none): the step rerun before a replay sees the
    traced gradients (zero_grad took them away); it raised "updated different parameters" on
    the second call. The losses follow eager's, and the later calls replay."""

    def run(compiled):
        pr.manual_seed(0)
        m = pr.nn.Linear(4, 3)
        opt = getattr(pr.optim, opt_name)(m.parameters(), lr=1e-2)

        def step(x):
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        f = pr.compile(step) if compiled else step
        x = pr.ones(5, 4)
        losses = [float(f(x).item()) for _ in range(6)]
        return losses, (f.stats()["replays"] if compiled else None)

    (eager, _), (comp, replays) = run(False), run(True)
    np.testing.assert_allclose(comp, eager, rtol=1e-6)
    assert replays >= 3
