"""More of torch's training-script APIs against torch (CPU): conv/linear + BatchNorm fusion,
DistributedSampler, Adafactor and SparseAdam, AdaptiveLogSoftmaxWithLoss and the orthogonal
parametrization. Fresh random inputs of awkward sizes; weights copied from torch via numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def _np(t):
    return t if isinstance(t, np.ndarray) else t.detach().numpy()  # (torch or pyrite)


def _copy_module(t_mod, p_mod):
    """Load torch module's state dict into the pyrite module (through numpy)."""
    sd = {k: pr.tensor(v.detach().numpy()) for k, v in t_mod.state_dict().items()}
    p_mod.load_state_dict(sd)


def _close(a, b, rtol=1e-5, atol=1e-5, what=""):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol, err_msg=what)


# ---- nn.utils.fusion ------------------------------------------------------------------------


def _bn_stats(t_bn, rng):
    c = t_bn.num_features
    with torch.no_grad():
        t_bn.running_mean.copy_(torch.from_numpy(rng.standard_normal(c).astype(np.float32)))
        t_bn.running_var.copy_(torch.from_numpy(rng.uniform(0.3, 2.0, c).astype(np.float32)))
        if t_bn.affine:
            t_bn.weight.copy_(torch.from_numpy(rng.standard_normal(c).astype(np.float32)))
            t_bn.bias.copy_(torch.from_numpy(rng.standard_normal(c).astype(np.float32)))


@pytest.mark.parametrize(
    "kind", ["conv2d", "conv1d_nobias", "convT2d", "linear", "linear_nobias", "bn_not_affine"]
)
def test_fuse_bn_matches_torch(kind, rng):
    if kind.startswith("conv1d"):
        mods = lambda nn: (nn.Conv1d(3, 5, 3, bias=False), nn.BatchNorm1d(5))  # noqa: E731
        x = rng.standard_normal((2, 3, 11))
    elif kind == "convT2d":
        mods = lambda nn: (nn.ConvTranspose2d(3, 7, 2), nn.BatchNorm2d(7))  # noqa: E731
        x = rng.standard_normal((2, 3, 5, 4))
    elif kind.startswith("conv") or kind == "bn_not_affine":
        affine = kind != "bn_not_affine"
        mods = lambda nn: (nn.Conv2d(3, 7, 3), nn.BatchNorm2d(7, affine=affine))  # noqa: E731
        x = rng.standard_normal((2, 3, 6, 5))
    else:
        bias = kind == "linear"
        mods = lambda nn: (nn.Linear(13, 7, bias=bias), nn.BatchNorm1d(7))  # noqa: E731
        x = rng.standard_normal((5, 13))
    t_layer, t_bn = mods(torch.nn)
    p_layer, p_bn = mods(pr.nn)
    _bn_stats(t_bn, rng)
    _copy_module(t_layer, p_layer)
    _copy_module(t_bn, p_bn)
    for m in (t_layer, t_bn, p_layer, p_bn):
        m.eval()
    transpose = kind == "convT2d"
    if kind.startswith("linear"):
        t_f = torch.nn.utils.fuse_linear_bn_eval(t_layer, t_bn)
        p_f = pr.nn.utils.fuse_linear_bn_eval(p_layer, p_bn)
    else:
        t_f = torch.nn.utils.fuse_conv_bn_eval(t_layer, t_bn, transpose=transpose)
        p_f = pr.nn.utils.fuse_conv_bn_eval(p_layer, p_bn, transpose=transpose)
    assert type(p_f) is type(p_layer) and p_f is not p_layer
    assert set(p_f.state_dict()) == set(t_f.state_dict())
    for k, v in t_f.state_dict().items():
        _close(p_f.state_dict()[k], v, what=k)
    assert isinstance(p_f.weight, pr.nn.Parameter) and isinstance(p_f.bias, pr.nn.Parameter)
    xt = torch.from_numpy(x.astype(np.float32))
    xp = pr.tensor(x.astype(np.float32))
    with torch.no_grad():
        ref = t_bn(t_layer(xt))
    _close(p_f(xp), ref, 1e-4, 1e-4)
    _close(p_f(xp), t_f(xt), 1e-4, 1e-4)
    # the originals are untouched
    _close(p_layer.weight, t_layer.weight)


def test_fuse_bn_refuses_training_mode():
    conv, bn = pr.nn.Conv2d(2, 3, 1), pr.nn.BatchNorm2d(3)
    with pytest.raises(AssertionError, match="eval"):
        pr.nn.utils.fuse_conv_bn_eval(conv, bn)
    lin, bn = pr.nn.Linear(2, 3).eval(), pr.nn.BatchNorm1d(4).eval()
    with pytest.raises(AssertionError, match="out_features"):
        pr.nn.utils.fuse_linear_bn_eval(lin, bn)


def test_fuse_weights_functions(rng):
    w = rng.standard_normal((4, 3, 2, 2)).astype(np.float32)
    stats = [rng.standard_normal(4).astype(np.float32) for _ in range(4)]
    stats[1] = np.abs(stats[1]) + 0.5
    t_args = [torch.from_numpy(a) for a in [w, *stats]]
    p_args = [pr.tensor(a) for a in [w, *stats]]
    tw, tb = torch.nn.utils.fuse_conv_bn_weights(
        t_args[0], None, *t_args[1:3], 1e-3, *t_args[3:], None
    )
    pw, pb = pr.nn.utils.fuse_conv_bn_weights(
        p_args[0], None, *p_args[1:3], 1e-3, *p_args[3:], None
    )
    _close(pw, tw)
    _close(pb, tb)
    lw = rng.standard_normal((4, 6)).astype(np.float32)
    lb = rng.standard_normal(4).astype(np.float32)
    tw, tb = torch.nn.utils.fuse_linear_bn_weights(
        torch.from_numpy(lw), torch.from_numpy(lb), *t_args[1:3], 1e-5, *t_args[3:]
    )
    pw, pb = pr.nn.utils.fuse_linear_bn_weights(
        pr.tensor(lw), pr.tensor(lb), *p_args[1:3], 1e-5, *p_args[3:]
    )
    _close(pw, tw)
    _close(pb, tb)


# ---- utils.data.DistributedSampler ----------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 13, 100])
@pytest.mark.parametrize("replicas", [1, 3, 4])
def test_distributed_sampler_index_lists_are_torchs(n, replicas):
    """Every option, every rank, two epochs: the same index lists as torch's (the shuffle is
    torch's CPU randperm reproduced on the host)."""
    data = list(range(n))
    for shuffle in (False, True):
        for drop_last in (False, True):
            for seed in (0, 1234567):
                for rank in range(replicas):
                    kw = dict(num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed)
                    t = torch.utils.data.DistributedSampler(data, drop_last=drop_last, **kw)
                    p = pr.utils.data.DistributedSampler(data, drop_last=drop_last, **kw)
                    assert len(p) == len(t)
                    for epoch in (0, 5):
                        t.set_epoch(epoch)
                        p.set_epoch(epoch)
                        assert list(p) == list(t), (shuffle, drop_last, seed, rank, epoch)


def test_distributed_sampler_partition(rng):
    n, replicas = 29, 4
    shares = [
        list(pr.utils.data.DistributedSampler(range(n), replicas, r, drop_last=True, seed=3))
        for r in range(replicas)
    ]
    flat = sum(shares, [])
    assert len(flat) == len(set(flat)) == 28 and all(len(s) == 7 for s in shares)
    padded = [list(pr.utils.data.DistributedSampler(range(n), replicas, r)) for r in range(4)]
    assert set(sum(padded, [])) == set(range(n)) and all(len(s) == 8 for s in padded)
    s = pr.utils.data.DistributedSampler(range(n), replicas, 0)
    first = list(s)
    assert list(s) == first  # the same epoch: the same order
    s.set_epoch(1)
    assert list(s) != first
    # the single-process defaults (world size 1, rank 0) and torch's rank check
    assert sorted(pr.utils.data.DistributedSampler(range(5))) == list(range(5))
    with pytest.raises(ValueError, match="Invalid rank"):
        pr.utils.data.DistributedSampler(range(5), num_replicas=2, rank=2)
    # in a DataLoader
    ds = pr.utils.data.TensorDataset(pr.arange(10))
    loader = pr.utils.data.DataLoader(
        ds, batch_size=2, sampler=pr.utils.data.DistributedSampler(ds, 2, 1, seed=9)
    )
    got = [int(v) for (b,) in loader for v in b.tolist()]
    ref = list(torch.utils.data.DistributedSampler(range(10), 2, 1, seed=9))
    assert got == ref


# ---- optim.Adafactor and optim.SparseAdam ---------------------------------------------------


def _torch_sd_to_pyrite(sd):
    state = {
        k: {n: (pr.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v) for n, v in s.items()}
        for k, s in sd["state"].items()
    }
    return {"state": state, "param_groups": sd["param_groups"]}


def _pyrite_sd_to_torch(sd):
    state = {
        k: {n: (torch.tensor(v.numpy()) if isinstance(v, pr.Tensor) else v) for n, v in s.items()}
        for k, s in sd["state"].items()
    }
    return {"state": state, "param_groups": sd["param_groups"]}


ADAFACTOR_SHAPES = [(5, 7), (13,), (2, 3, 4), (1, 1), ()]
ADAFACTOR_CONFIGS = [
    {},
    {"lr": 0.05, "weight_decay": 0.1, "maximize": True},
    {"lr": 0.5, "beta2_decay": -0.5, "eps": (1e-3, 1e-2), "d": 1.5},
    {"lr": 1e-3, "eps": (1e-30, 0.0)},  # rho_t = lr; the clip bites on the first step
]


def _adafactor_pair(rng, kw):
    ws = [rng.standard_normal(s).astype(np.float32) for s in ADAFACTOR_SHAPES]
    tps = [torch.nn.Parameter(torch.from_numpy(w.copy())) for w in ws]
    pps = [pr.nn.Parameter(pr.tensor(w)) for w in ws]
    groups_t = [{"params": tps[:3]}, {"params": tps[3:], "lr": 0.02}]
    groups_p = [{"params": pps[:3]}, {"params": pps[3:], "lr": 0.02}]
    return tps, pps, torch.optim.Adafactor(groups_t, **kw), pr.optim.Adafactor(groups_p, **kw)


def _step_both(rng, tps, pps, t_opt, p_opt, steps, scale=1.0):
    for _ in range(steps):
        for tp, pp in zip(tps, pps):
            g = np.asarray(rng.standard_normal(tuple(tp.shape)) * scale, np.float32)
            tp.grad = torch.from_numpy(g)
            pp.grad = pr.tensor(g)
        t_opt.step()
        p_opt.step()


def _params_close(tps, pps, rtol=2e-5, atol=2e-6):
    for i, (tp, pp) in enumerate(zip(tps, pps)):
        _close(pp, tp, rtol, atol, f"parameter {i} {tuple(tp.shape)}")


@pytest.mark.parametrize("kw", ADAFACTOR_CONFIGS, ids=range(len(ADAFACTOR_CONFIGS)))
def test_adafactor_matches_torch(kw, rng):
    tps, pps, t_opt, p_opt = _adafactor_pair(rng, kw)
    _step_both(rng, tps, pps, t_opt, p_opt, 5)
    _params_close(tps, pps)
    t_sd, p_sd = t_opt.state_dict(), p_opt.state_dict()
    assert p_sd["param_groups"] == t_sd["param_groups"]
    for k, s in t_sd["state"].items():
        assert set(p_sd["state"][k]) == set(s)
        for name, v in s.items():
            assert tuple(p_sd["state"][k][name].shape) == tuple(v.shape), name
            _close(p_sd["state"][k][name], v, 2e-5, 1e-7, name)


def test_adafactor_state_dict_round_trips(rng):
    kw = {"lr": 0.05, "weight_decay": 0.01}
    tps, pps, t_opt, p_opt = _adafactor_pair(rng, kw)
    _step_both(rng, tps, pps, t_opt, p_opt, 3)
    # torch's state into a fresh pyrite optimizer, pyrite's into a fresh torch one: both go on
    # as the originals
    pps2 = [pr.nn.Parameter(pr.tensor(tp.detach().numpy())) for tp in tps]
    groups = [{"params": pps2[:3]}, {"params": pps2[3:]}]
    p_opt2 = pr.optim.Adafactor(groups, **kw)
    p_opt2.load_state_dict(_torch_sd_to_pyrite(t_opt.state_dict()))
    tps2 = [torch.nn.Parameter(torch.from_numpy(pp.numpy())) for pp in pps]
    t_opt2 = torch.optim.Adafactor([{"params": tps2[:3]}, {"params": tps2[3:]}], **kw)
    t_opt2.load_state_dict(_pyrite_sd_to_torch(p_opt.state_dict()))
    assert p_opt2.param_groups[1]["lr"] == 0.02
    for _ in range(2):
        grads = [np.asarray(rng.standard_normal(tuple(tp.shape)), np.float32) for tp in tps]
        for ps, make in ((tps, torch.from_numpy), (tps2, torch.from_numpy)):
            for p, g in zip(ps, grads):
                p.grad = make(g)
        for ps in (pps, pps2):
            for p, g in zip(ps, grads):
                p.grad = pr.tensor(g)
        for opt in (t_opt, t_opt2, p_opt, p_opt2):
            opt.step()
    _params_close(tps, pps2)
    _params_close(tps2, pps)
    _params_close(tps, pps)


def test_adafactor_errors():
    p = [pr.nn.Parameter(pr.ones(3))]
    for kw, msg in [
        ({"lr": -1.0}, "Learning rate"),
        ({"beta2_decay": 0.5}, "beta2_decay"),
        ({"eps": (-1.0, 1e-3)}, "epsilon1"),
        ({"eps": (None, -1.0)}, "epsilon2"),
        ({"d": 0.5}, "Clipping threshold"),
        ({"weight_decay": -0.1}, "weight_decay"),
    ]:
        with pytest.raises(ValueError, match=msg):
            pr.optim.Adafactor(p, **kw)


@pytest.mark.parametrize("maximize", [False, True])
def test_sparse_adam_matches_torch_on_sparse_embedding(maximize, rng):
    """An Embedding(sparse=True) (pyrite's gradient is dense, zero off the looked-up rows) and a
    dense bag of rows: torch's SparseAdam numbers, rows never looked up left alone."""
    V, D = 23, 6
    kw = dict(num_embeddings=V, embedding_dim=D, sparse=True, padding_idx=3)
    te, pe = torch.nn.Embedding(**kw), pr.nn.Embedding(**kw)
    _copy_module(te, pe)
    t_lin, p_lin = torch.nn.Linear(D, 3), pr.nn.Linear(D, 3)
    _copy_module(t_lin, p_lin)
    t_opt = torch.optim.SparseAdam(list(te.parameters()), lr=0.03, maximize=maximize)
    p_opt = pr.optim.SparseAdam(list(pe.parameters()), lr=0.03, maximize=maximize)
    t_opt2 = torch.optim.Adam(t_lin.parameters(), lr=0.01)  # the dense part, as scripts pair them
    p_opt2 = pr.optim.Adam(p_lin.parameters(), lr=0.01)
    w0 = pe.weight.numpy()
    seen = set()
    for _ in range(5):
        idx = rng.integers(0, V // 2, (4, 5))  # the upper half is never looked up
        seen |= set(idx.ravel().tolist())
        y = rng.standard_normal((4, 5, 3)).astype(np.float32)
        t_loss = ((t_lin(te(torch.from_numpy(idx))) - torch.from_numpy(y)) ** 2).mean()
        p_loss = ((p_lin(pe(pr.tensor(idx))) - pr.tensor(y)) ** 2).mean()
        for opt in (t_opt, p_opt, t_opt2, p_opt2):
            opt.zero_grad()
        t_loss.backward()
        p_loss.backward()
        for opt in (t_opt, p_opt, t_opt2, p_opt2):
            opt.step()
        _close(p_loss, t_loss, 1e-5, 1e-6)
    _close(pe.weight, te.weight, 1e-5, 1e-6)
    _close(p_lin.weight, t_lin.weight, 1e-5, 1e-6)
    untouched = sorted(set(range(V)) - seen | {3})
    np.testing.assert_array_equal(pe.weight.numpy()[untouched], w0[untouched])
    t_sd, p_sd = t_opt.state_dict(), p_opt.state_dict()
    assert p_sd["param_groups"] == t_sd["param_groups"]
    assert p_sd["state"][0]["step"] == t_sd["state"][0]["step"] == 5
    for name in ("exp_avg", "exp_avg_sq"):
        _close(p_sd["state"][0][name], t_sd["state"][0][name], 1e-5, 1e-8, name)
    # torch's state dict into a fresh pyrite optimizer, then one more step on both
    pe2 = pr.nn.Embedding(**kw)
    _copy_module(te, pe2)
    p_opt3 = pr.optim.SparseAdam(list(pe2.parameters()), lr=0.03, maximize=maximize)
    p_opt3.load_state_dict(_torch_sd_to_pyrite(t_sd))
    idx = rng.integers(0, V, (7,))
    t_opt.zero_grad()
    te(torch.from_numpy(idx)).sum().backward()
    pe2(pr.tensor(idx)).sum().backward()
    t_opt.step()
    p_opt3.step()
    _close(pe2.weight, te.weight, 1e-5, 1e-6)


def test_sparse_adam_errors():
    p = [pr.nn.Parameter(pr.ones(3))]
    with pytest.raises(ValueError, match="learning rate"):
        pr.optim.SparseAdam(p, lr=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        pr.optim.SparseAdam(p, eps=0.0)
    with pytest.raises(ValueError, match="beta parameter at index 1"):
        pr.optim.SparseAdam(p, betas=(0.9, 1.0))


# ---- nn.AdaptiveLogSoftmaxWithLoss ----------------------------------------------------------


def _asm_pair(rng, in_f=70, n_classes=41, cutoffs=(3, 10, 29), **kw):
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(in_f, n_classes, list(cutoffs), **kw)
    p = pr.nn.AdaptiveLogSoftmaxWithLoss(in_f, n_classes, list(cutoffs), **kw)
    assert set(p.state_dict()) == set(t.state_dict())
    for k, v in t.state_dict().items():
        assert tuple(p.state_dict()[k].shape) == tuple(v.shape), k
    _copy_module(t, p)
    return t, p


@pytest.mark.parametrize(
    "case", ["mixed", "shortlist_only", "one_cluster", "head_bias_div2", "single_row"]
)
def test_adaptive_log_softmax_matches_torch(case, rng):
    kw = {"div_value": 2.0, "head_bias": True} if case == "head_bias_div2" else {}
    t, p = _asm_pair(rng, **kw)
    n = 1 if case == "single_row" else 11
    x = rng.standard_normal((n, 70)).astype(np.float32)
    if case == "shortlist_only":
        y = rng.integers(0, 3, n)
    elif case == "one_cluster":
        y = rng.integers(10, 29, n)
    else:
        y = rng.integers(0, 41, n)
        if n > 4:
            y[:4] = [0, 3, 10, 40]  # every cluster's edges
    xt = torch.from_numpy(x).requires_grad_()
    xp = pr.tensor(x).requires_grad_()
    t_out = t(xt, torch.from_numpy(y))
    p_out = p(xp, pr.tensor(y))
    assert type(p_out).__name__ == "_ASMoutput" and p_out._fields == ("output", "loss")
    _close(p_out.output, t_out.output, 1e-5, 1e-5)
    _close(p_out.loss, t_out.loss, 1e-5, 1e-5)
    (t_out.loss * 3 + t_out.output.sum()).backward()
    (p_out.loss * 3 + p_out.output.sum()).backward()
    _close(xp.grad, xt.grad, 1e-4, 1e-5, "input grad")
    for (name, tp), (_, pp) in zip(t.named_parameters(), p.named_parameters()):
        if tp.grad is None:  # a cluster no target falls in
            assert pp.grad is None, name
        else:
            _close(pp.grad, tp.grad, 1e-4, 1e-5, name)
    with torch.no_grad():
        _close(p.log_prob(xp.detach()), t.log_prob(xt.detach()), 1e-5, 1e-5)
        assert p.predict(xp.detach()).tolist() == t.predict(xt.detach()).tolist()


def test_adaptive_log_softmax_unbatched_predict_and_errors(rng):
    t, p = _asm_pair(rng, in_f=16, n_classes=20, cutoffs=(4, 9))
    x = rng.standard_normal(16).astype(np.float32)
    t_out = t(torch.from_numpy(x), torch.tensor(13))
    p_out = p(pr.tensor(x), pr.tensor(13))
    assert p_out.output.shape == () and p_out.loss.shape == ()
    _close(p_out.output, t_out.output, 1e-5, 1e-5)
    # predict's three paths: every row's head argmax in the shortlist, none, some (a large
    # head weight on feature 0, which is 1.0 in every row, decides)
    xs = rng.standard_normal((7, 16)).astype(np.float32)
    xs[:, 0] = 1.0
    xs[:3, 1] = 4.0
    w0 = t.head.weight.detach().numpy().copy()
    for col0, col1 in (([9] * 4 + [-9] * 2, 0), ([-9] * 4 + [9] * 2, 0), ([9] * 4 + [-9] * 2, 1)):
        w = w0.copy()
        w[:, 0] = col0
        w[:, 1] = [-9] * 4 + [9] * 2 if col1 else 0.0  # rows 0-2 to the clusters
        with torch.no_grad():
            t.head.weight.copy_(torch.from_numpy(w))
        p.head.weight = pr.nn.Parameter(pr.tensor(w))
        with torch.no_grad():
            ref = t.predict(torch.from_numpy(xs))
            assert ref.tolist() == t.log_prob(torch.from_numpy(xs)).argmax(1).tolist()
        assert p.predict(pr.tensor(xs)).tolist() == ref.tolist(), (col0, col1)
    with pytest.raises(RuntimeError, match="Target values should be in"):
        p(pr.tensor(rng.standard_normal((2, 16)).astype(np.float32)), pr.tensor([1, 20]))
    with pytest.raises(RuntimeError, match="same size in the batch"):
        p(pr.zeros(3, 16), pr.tensor([1, 2]))
    with pytest.raises(ValueError, match="cutoffs"):
        pr.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [9, 4])


# ---- nn.utils.parametrizations.orthogonal ---------------------------------------------------

ORTH_CASES = [
    ((5, 5), "matrix_exp", True),
    ((7, 3), "matrix_exp", True),
    ((3, 7), "matrix_exp", False),
    ((5, 5), "cayley", True),
    ((3, 7), "cayley", True),
    ((7, 3), "cayley", False),
    ((7, 3), "householder", True),
    ((4, 6), "householder", False),
    ((6, 6), None, True),
]


@pytest.mark.parametrize("case", ORTH_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_orthogonal_matches_torch(case, rng):
    (out_f, in_f), omap, triv = case
    t = torch.nn.Linear(in_f, out_f)
    p = pr.nn.Linear(in_f, out_f)
    torch.nn.utils.parametrizations.orthogonal(t, orthogonal_map=omap, use_trivialization=triv)
    pr.nn.utils.parametrizations.orthogonal(p, orthogonal_map=omap, use_trivialization=triv)
    assert set(p.state_dict()) == set(t.state_dict())
    assert ("parametrizations.weight.0.base" in p.state_dict()) == triv
    # registration alone: an orthogonal weight (the Linear's own, orthogonalised)
    w = p.weight.detach().numpy()
    gram = w.T @ w if out_f >= in_f else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(out_f, in_f)), atol=2e-6)
    _copy_module(t, p)  # torch's checkpoint: original, base, bias
    _close(p.weight, t.weight, 1e-5, 1e-6)
    t_opt = torch.optim.SGD(t.parameters(), lr=0.05)
    p_opt = pr.optim.SGD(p.parameters(), lr=0.05)
    for _ in range(3):
        x = rng.standard_normal((4, in_f)).astype(np.float32)
        c = rng.standard_normal((4, out_f)).astype(np.float32)
        t_loss = (t(torch.from_numpy(x)) * torch.from_numpy(c)).sum()
        p_loss = (p(pr.tensor(x)) * pr.tensor(c)).sum()
        for opt in (t_opt, p_opt):
            opt.zero_grad()
        t_loss.backward()
        p_loss.backward()
        _close(p_loss, t_loss, 1e-5, 1e-5)
        original = "parametrizations.weight.original"
        tg = dict(t.named_parameters())[original].grad
        pg = dict(p.named_parameters())[original].grad
        _close(pg, tg, 1e-4, 2e-5, "original's gradient")
        t_opt.step()
        p_opt.step()
    _close(p.weight, t.weight, 1e-4, 2e-5)
    w = p.weight.detach().numpy()
    gram = w.T @ w if out_f >= in_f else w @ w.T
    np.testing.assert_allclose(gram, np.eye(min(out_f, in_f)), atol=1e-5)


def test_orthogonal_assign_and_errors(rng):
    p = pr.nn.Linear(4, 4)
    pr.nn.utils.parametrizations.orthogonal(p, orthogonal_map="cayley")
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    p.weight = pr.tensor(q.astype(np.float32))  # orthogonal: kept as the new base
    _close(p.weight, q.astype(np.float32), 1e-5, 1e-6)
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        pr.nn.utils.parametrizations.orthogonal(pr.nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix"):
        pr.nn.utils.parametrizations.orthogonal(pr.nn.Linear(3, 3), name="bias")
    m = pr.nn.Linear(3, 3)
    pr.nn.utils.parametrizations.orthogonal(m, use_trivialization=False)  # matrix_exp
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = pr.eye(3)
