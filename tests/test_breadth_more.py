"""More of torch's training-script APIs against torch (CPU): conv/linear + BatchNorm fusion,
DistributedSampler, Adafactor and SparseAdam, AdaptiveLogSoftmaxWithLoss and the orthogonal
parametrization. Fresh random inputs of awkward sizes; weights copied from torch via numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


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
