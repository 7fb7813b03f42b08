"""A differential hunt for checkpoint interop with PyTorch: files made by torch.save and
safetensors.torch load into `pyrite.nn` modules and `pyrite.optim` optimizers and give torch's
outputs and next steps; files pyrite saves load back into torch; broken files give pyrite errors.

1. torch module (fixed seed, BatchNorm stats from a train-mode forward) -> torch.save(state_dict)
   (zip and legacy formats) and safetensors.torch.save_file -> pr.load -> the same pyrite.nn
   module, load_state_dict(strict=True) -> eval forward == torch's eval forward.
2. A training checkpoint {"model", "optimizer", "epoch", "extra"} after one optimizer step.
3. pyrite -> torch: pr.save's file read by safetensors.torch into the torch module (the same
   outputs); dtypes, views and tied weights round trip.
4. Optimizer state: torch's Adam/AdamW/SGD(momentum) state_dict into pyrite's, then one more
   step on the same gradients gives torch's parameters.
5. Truncated/corrupt files and wrong keys give pyrite errors; a failed save leaves no file.

The tolerance of a forward is the f32 bound of its longest reduction (k terms, k·2⁻²⁴ relative
to the output's scale) times a small constant for the ops in series (`depth`).
"""

from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
import safetensors.torch
import torch

import pyrite as pr
import pyrite.nn as pnn
from pyrite.io import CheckpointError
from pyrite.testing.tolerance import F32_U
from tests.oracle import OLDER_TORCH

tnn = torch.nn


# ---- the cases -------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    build: Callable  # nn namespace -> module (the same code for torch.nn and pyrite.nn)
    inputs: Callable  # rng -> list of numpy arrays
    k: int  # the longest reduction of the forward
    depth: int = 4  # ops in series, each adding its rounding
    call: Callable | None = None  # (module, *inputs) -> output; default module(*inputs)
    train_steps: int = 0  # train-mode forwards before saving (BatchNorm running stats)
    dtype: str = "float32"  # the module's dtype (module.to(dtype) on both sides)


def _f(*shape):
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _i(high, *shape):
    return lambda rng: rng.integers(0, high, shape).astype(np.int64)


def _ins(*makers):
    return lambda rng: [m(rng) for m in makers]


class _Buffers:
    """A module with a persistent and a non-persistent buffer (built from either namespace)."""

    @staticmethod
    def build(nn):
        class WithBuffers(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(5, 3)
                self.register_buffer("scale", _arange(nn, 3) * 0.5 + 1.0)
                self.register_buffer("cache", _arange(nn, 3), persistent=False)

            def forward(self, x):
                return self.lin(x) * self.scale + self.cache

        return WithBuffers()


def _arange(nn, n):
    lib = torch if nn is tnn else pr
    return lib.arange(n, dtype=lib.float32)


def _tied(nn):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.head = nn.Linear(6, 11, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            return self.head(self.emb(ids))

    return Tied()


def _nest(nn):
    class Nest(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(
                [nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.LayerNorm(6)) for _ in range(2)]
            )
            self.heads = nn.ModuleDict({"a": nn.Linear(6, 2), "b": nn.Linear(6, 3)})
            self.gain = nn.Parameter(_arange(nn, 6) * 0.1)

        def forward(self, x):
            for b in self.blocks:
                x = b(x) * self.gain
            return self.heads["a"](x), self.heads["b"](x)

    return Nest()


def _weight_norm(nn):
    return nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 2), dim=0)


def _weight_norm_old(nn):
    return nn.utils.weight_norm(nn.Linear(5, 4), dim=None)


def _spectral_norm(nn):
    return nn.utils.parametrizations.spectral_norm(nn.Linear(5, 4), n_power_iterations=2)


def _spectral_norm_old(nn):
    return nn.utils.spectral_norm(nn.Conv2d(2, 3, 2))


CASES = [
    Case("linear", lambda nn: nn.Linear(7, 5), _ins(_f(3, 7)), 7),
    Case("conv1d", lambda nn: nn.Conv1d(3, 4, 3, padding=1, stride=2), _ins(_f(2, 3, 9)), 9),
    Case("conv2d", lambda nn: nn.Conv2d(3, 4, 3, padding=1, groups=1), _ins(_f(2, 3, 6, 5)), 27),
    Case("conv2d_groups", lambda nn: nn.Conv2d(4, 6, (2, 3), groups=2), _ins(_f(1, 4, 5, 6)), 12),
    Case("conv3d", lambda nn: nn.Conv3d(2, 3, 2), _ins(_f(1, 2, 4, 3, 4)), 16),
    Case(
        "conv_transpose2d",
        lambda nn: nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1),
        _ins(_f(2, 3, 4, 3)),
        27,
    ),
    Case(
        "batchnorm1d",
        lambda nn: nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4)),
        _ins(_f(6, 5)),
        5,
        train_steps=2,
    ),
    Case(
        "batchnorm2d",
        lambda nn: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3, momentum=None)),
        _ins(_f(2, 2, 5, 5)),
        18,
        train_steps=3,
    ),
    Case("layernorm", lambda nn: nn.LayerNorm((4, 5)), _ins(_f(3, 4, 5)), 20),
    Case("groupnorm", lambda nn: nn.GroupNorm(2, 6), _ins(_f(2, 6, 3, 2)), 18),
    Case("embedding", lambda nn: nn.Embedding(10, 4, padding_idx=2), _ins(_i(10, 3, 5)), 1),
    Case(
        "embedding_bag",
        lambda nn: nn.EmbeddingBag(10, 4, mode="mean"),
        _ins(_i(10, 3, 4)),
        4,
    ),
    Case("lstm", lambda nn: nn.LSTM(4, 5, num_layers=2, batch_first=True), _ins(_f(2, 3, 4)), 9),
    Case(
        "lstm_bidir_proj",
        lambda nn: nn.LSTM(4, 6, num_layers=2, bidirectional=True, proj_size=3),
        _ins(_f(3, 2, 4)),
        12,
        depth=12,
    ),
    Case(
        "gru_bidir",
        lambda nn: nn.GRU(4, 5, num_layers=2, bidirectional=True),
        _ins(_f(3, 2, 4)),
        10,
    ),
    Case(
        "rnn_relu", lambda nn: nn.RNN(4, 5, nonlinearity="relu", bias=False), _ins(_f(3, 2, 4)), 9
    ),
    Case(
        "mha",
        lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
        _ins(_f(2, 3, 8), _f(2, 4, 8), _f(2, 4, 8)),
        8,
        depth=8,
    ),
    Case(
        "mha_kdim_bias_kv",
        lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True),
        _ins(_f(3, 2, 8), _f(4, 2, 5), _f(4, 2, 3)),
        8,
        depth=8,
    ),
    Case(
        "transformer_encoder",
        lambda nn: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, dim_feedforward=12, batch_first=True), 2
        ),
        _ins(_f(2, 5, 8)),
        12,
        depth=24,
    ),
    Case(
        "transformer_decoder_layer",
        lambda nn: nn.TransformerDecoderLayer(8, 2, dim_feedforward=10, norm_first=True),
        _ins(_f(4, 2, 8), _f(5, 2, 8)),
        10,
        depth=24,
    ),
    Case(
        "transformer",
        lambda nn: nn.Transformer(8, 2, 1, 1, dim_feedforward=10, batch_first=True),
        _ins(_f(2, 5, 8), _f(2, 3, 8)),
        10,
        depth=48,
    ),
    Case(
        "bn_no_stats",
        lambda nn: nn.Sequential(
            nn.BatchNorm1d(4, affine=False, track_running_stats=False),
            nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
        ),
        _ins(_f(3, 4, 5)),
        5,
        train_steps=1,
    ),
    Case("weight_norm", _weight_norm, _ins(_f(2, 3, 5)), 6),
    Case("weight_norm_old", _weight_norm_old, _ins(_f(3, 5)), 20),
    Case("spectral_norm", _spectral_norm, _ins(_f(3, 5)), 20, train_steps=2),
    Case("spectral_norm_old", _spectral_norm_old, _ins(_f(1, 2, 4, 4)), 12, train_steps=2),
    Case("linear_bf16", lambda nn: nn.Linear(7, 5), _ins(_f(3, 7)), 7, dtype="bfloat16"),
    Case(
        "conv_bn_f16",
        lambda nn: nn.Sequential(nn.Conv2d(2, 3, 3, bias=False), nn.BatchNorm2d(3)),
        _ins(_f(2, 2, 4, 4)),
        18,
        train_steps=1,
        dtype="float16",
    ),
    Case("buffers", _Buffers.build, _ins(_f(4, 5)), 5),
    Case("tied", _tied, _ins(_i(11, 2, 3)), 6),
    Case("nest", _nest, _ins(_f(3, 6)), 6, depth=12),
]


# ---- helpers ---------------------------------------------------------------------------------
def _torch_module(case: Case, seed=0):
    torch.manual_seed(seed)
    m = case.build(tnn).to(getattr(torch, case.dtype))
    if case.train_steps:
        g = np.random.default_rng(seed + 1)
        m.train()
        with torch.no_grad():
            for _ in range(case.train_steps):
                m(*_tensors(case, case.inputs(g), torch))
    return m.eval()


def _pyrite_module(case: Case):
    pr.manual_seed(123)  # a different init: every value must come from the checkpoint
    return case.build(pnn).to(getattr(pr, case.dtype))


def _tensors(case, arrays, lib):
    dt = getattr(lib, case.dtype)
    return [lib.tensor(a).to(dt) if a.dtype.kind == "f" else lib.tensor(a) for a in arrays]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flat(x)]
    return [] if out is None else [out]


def _np(t):  # a torch or pyrite tensor as float32 numpy
    return t.detach().float().numpy()


def _forward(m, case, arrays, lib):
    xs = _tensors(case, arrays, lib)
    with torch.no_grad() if lib is torch else pr.no_grad():
        out = case.call(m, *xs) if case.call else m(*xs)
    return [_np(y) for y in _flat(out)]


def _assert_outputs(case, got, want):
    assert len(got) == len(want), case.name
    for g, w in zip(got, want):
        assert g.shape == w.shape, (case.name, g.shape, w.shape)
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        u = {"float32": F32_U, "float16": 2.0**-11, "bfloat16": 2.0**-8}[case.dtype]
        atol = case.depth * 4 * case.k * u * scale
        np.testing.assert_allclose(g, w, rtol=0, atol=atol, err_msg=case.name)


def _assert_state_equal(psd, tsd):
    assert list(psd) == list(tsd)
    for k, v in tsd.items():
        got = psd[k]
        assert tuple(got.shape) == tuple(v.shape), k
        want = v.detach()
        if want.dtype == torch.int64:
            assert got.dtype is pr.int32, k
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        else:
            np.testing.assert_array_equal(_np(got), want.float().numpy(), err_msg=k)


# ---- 1. torch -> pyrite ----------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["zip", "legacy", "safetensors"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_torch_checkpoint_into_pyrite_module(rng, tmp_path, case, fmt):
    tm = _torch_module(case)
    sd = tm.state_dict()
    path = tmp_path / f"{case.name}.{fmt}"
    if fmt == "safetensors":
        safetensors.torch.save_model(tm, str(path))  # (dedups tied weights, as torch's docs say)
    else:
        torch.save(sd, path, _use_new_zipfile_serialization=fmt == "zip")
    loaded = pr.load(path)
    pm = _pyrite_module(case)
    if fmt == "safetensors":  # save_model drops tied copies: load_file then reports them missing
        want = _torch_module(case, seed=5).load_state_dict(
            safetensors.torch.load_file(str(path)), strict=False
        )
        got = pm.load_state_dict(loaded, strict=False)
        assert (got.missing_keys, got.unexpected_keys) == (
            want.missing_keys,
            want.unexpected_keys,
        )
    else:
        pm.load_state_dict(loaded, strict=True)
    pm.eval()
    _assert_state_equal(pm.state_dict(), sd)
    arrays = case.inputs(rng)
    _assert_outputs(case, _forward(pm, case, arrays, pr), _forward(tm, case, arrays, torch))


# ---- 2 and 4. a training checkpoint, with the optimizer's state --------------------------------
def _train_net(nn):
    return nn.Sequential(nn.Linear(5, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 3))


OPTIMIZERS = {
    "adam": ("Adam", dict(lr=0.01, betas=(0.8, 0.95), weight_decay=0.01)),
    "adam_amsgrad": ("Adam", dict(lr=0.02, amsgrad=True)),
    "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    "sgd_momentum": ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)),
    "sgd_nesterov": ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
}


def _torch_grads(model, x, y):
    model.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_training_checkpoint_resumes(rng, tmp_path, opt_name, fmt):
    cls, kw = OPTIMIZERS[opt_name]
    torch.manual_seed(0)
    tm = _train_net(tnn)
    topt = getattr(torch.optim, cls)(tm.parameters(), **kw)
    x, y = torch.tensor(rng.standard_normal((8, 5), dtype=np.float32)), torch.randn(8, 3)
    for _ in range(2):  # two steps: the optimizer's state is not its first step's
        _torch_grads(tm, x, y)
        topt.step()
    extra = {"losses": [1.5, 0.25], "cfg": {"betas": (0.9, 0.99), "name": "run"}, "best": None}
    ckpt = {"model": tm.state_dict(), "optimizer": topt.state_dict(), "epoch": 3, "extra": extra}
    path = tmp_path / "ckpt.pt"
    torch.save(ckpt, path, _use_new_zipfile_serialization=fmt == "zip")

    got = pr.load(path)
    assert got["epoch"] == 3 and got["extra"] == extra
    pm = _train_net(pnn)
    pm.load_state_dict(got["model"], strict=True)
    popt = getattr(pr.optim, cls)(pm.parameters(), **kw)
    popt.load_state_dict(got["optimizer"])
    # the next step, from the same gradients, lands where torch's does
    grads = _torch_grads(tm, x, y)
    topt.step()
    for p, g in zip(pm.parameters(), grads):
        p.grad = pr.tensor(g.numpy())
    popt.step()
    for (name, tp), pp in zip(tm.named_parameters(), pm.parameters()):
        scale = max(1.0, float(tp.detach().abs().max()))
        np.testing.assert_allclose(
            pp.detach().numpy(), tp.detach().numpy(), rtol=0, atol=16 * F32_U * scale, err_msg=name
        )
    # and pyrite's state dict of the resumed optimizer, through pyrite's file, resumes torch's
    out = tmp_path / "resumed.pt"
    pr.save({"model": pm.state_dict(), "optimizer": popt.state_dict()}, out)
    back = pr.load(out)
    tm2 = _train_net(tnn)
    tm2.load_state_dict(_to_torch(back["model"]))
    topt2 = getattr(torch.optim, cls)(tm2.parameters(), **kw)
    topt2.load_state_dict(_to_torch(back["optimizer"]))
    grads = _torch_grads(tm, x, y)
    topt.step()
    for p, g in zip(tm2.parameters(), grads):
        p.grad = g.clone()
    topt2.step()
    for (name, tp), tp2 in zip(tm.named_parameters(), tm2.parameters()):
        scale = max(1.0, float(tp.detach().abs().max()))
        np.testing.assert_allclose(
            tp2.detach().numpy(), tp.detach().numpy(), rtol=0, atol=32 * F32_U * scale, err_msg=name
        )


def _to_torch(obj):
    """pyrite tensors in a loaded object as torch tensors (what torch.load would have made)."""
    if isinstance(obj, pr.Tensor):
        return torch.from_numpy(obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return type(obj)((k, _to_torch(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_torch(v) for v in obj)
    return obj


# ---- 3. pyrite -> torch ----------------------------------------------------------------------
# Deliberate differences, each with its reason (README "Differences from PyTorch").
ALLOWED = {
    "torch.load of pr.save's .safetensors file": "a name ending .safetensors makes pr.save "
    "write safetensors (documented): torch.load reads it (torch >= 2.13 hands such paths to "
    "safetensors.torch) as a flat dict; nested checkpoints need pyrite (other names are "
    "torch.save's zip format, which torch.load reads whole)",
    "storage sharing of distinct views": "in a .safetensors file: it has no storages, so views "
    "of one storage are saved as separate tensors; the same view (tied weights) is stored once",
    "int64 buffers": "pyrite has no int64 (documented): num_batches_tracked and other int64 "
    "buffers come back from pyrite's file as int32, which torch's load_state_dict casts",
}


def _torch_load_safetensors(path):
    """torch.load(path, weights_only=True) of a .safetensors file, which torch >= 2.13 hands to
    safetensors.torch.load_file. An older torch has no such branch: it reads any safetensors
    file (pyrite's or not) as a legacy pickle whose first opcode is the low byte of the header's
    length ('Unsupported operand N', or a KeyError where that byte is BINGET); there the file is
    read as 2.13's torch.load reads it."""
    if OLDER_TORCH:
        return safetensors.torch.load_file(str(path))
    return torch.load(path, weights_only=True)


def _pyrite_trained(case: Case):
    pm = _pyrite_module(case)
    if case.train_steps:
        g = np.random.default_rng(7)
        pm.train()
        with pr.no_grad():
            for _ in range(case.train_steps):
                pm(*_tensors(case, case.inputs(g), pr))
    return pm.eval()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pyrite_checkpoint_into_torch_module(rng, tmp_path, case):
    pm = _pyrite_trained(case)
    path = tmp_path / f"{case.name}.safetensors"
    pr.save(pm.state_dict(), path)
    tm = _torch_module(case, seed=9)
    # load_model re-ties what pr.save stored once (tied weights), as for safetensors' own files
    safetensors.torch.load_model(tm, str(path), strict=True)
    tm.eval()
    sd = tm.state_dict()
    psd = pm.state_dict()
    assert list(sd) == list(psd)
    for k, v in sd.items():
        assert v.dtype == getattr(torch, case.dtype) or not v.is_floating_point(), k
        np.testing.assert_array_equal(v.float().numpy(), _np(psd[k]), err_msg=k)
    arrays = case.inputs(rng)
    _assert_outputs(case, _forward(pm, case, arrays, pr), _forward(tm, case, arrays, torch))
    # torch.load itself reads the file (by its suffix): every tensor but the tied copies
    plain = _torch_load_safetensors(path)
    tied = {"head.weight"} if case.name == "tied" else set()
    assert sorted(plain) == sorted(k for k in sd if k not in tied)  # (safetensors sorts keys)
    for k, v in plain.items():
        assert v.dtype == sd[k].dtype or sd[k].dtype == torch.int64, k
        assert torch.equal(v.to(sd[k].dtype), sd[k]), k


def test_torch_load_of_a_pyrite_pt_file(tmp_path):
    """A name without the .safetensors suffix is torch.save's zip format: torch.load reads the
    nested checkpoint whole (weights_only=True); ALLOWED["torch.load of pr.save's .safetensors
    file"]: with the suffix it comes back flattened."""
    path = tmp_path / "ckpt.pt"
    pr.save({"model": {"w": pr.ones(2) * 0.5}, "epoch": 3}, path)
    got = torch.load(path, weights_only=True)
    assert got["epoch"] == 3 and list(got) == ["model", "epoch"]
    assert torch.equal(got["model"]["w"], torch.full((2,), 0.5))
    st = tmp_path / "ckpt.safetensors"
    pr.save({"model": {"w": pr.ones(2)}, "epoch": 3}, st)
    assert list(_torch_load_safetensors(st)) == ["model.w"]
    assert pr.load(st)["epoch"] == 3


def test_dtypes_and_sharing_round_trip(tmp_path):
    """pyrite -> file -> torch and pyrite: every dtype survives; a tied (identical) tensor is
    stored once and comes back as one tensor; distinct views of one storage do not share
    (ALLOWED["storage sharing of distinct views"])."""
    base = pr.arange(24, dtype=pr.float32).reshape(4, 6)
    sd = collections.OrderedDict(
        f32=base,
        f16=(base / 7).half(),
        bf16=(base / 7).bfloat16(),
        i32=pr.arange(-3, 4),
        i8=pr.tensor([-128, 0, 127], dtype=pr.int8),
        u8=pr.tensor([0, 255], dtype=pr.uint8),
        flag=pr.tensor([True, False]),
        tied=base,
        view_t=base.T,
        view_slice=base[1:, ::2],
    )
    path = tmp_path / "d.safetensors"
    pr.save(sd, path)
    th = safetensors.torch.load_file(str(path))
    want_dtypes = dict(f32=torch.float32, f16=torch.float16, bf16=torch.bfloat16,
                       i32=torch.int32, i8=torch.int8, u8=torch.uint8, flag=torch.bool)  # fmt: skip
    for k, dt in want_dtypes.items():
        assert th[k].dtype == dt, k
        np.testing.assert_array_equal(th[k].float().numpy(), _np(sd[k]), err_msg=k)
    assert "tied" not in th  # stored once, under its first name
    for k in ("view_t", "view_slice"):
        assert th[k].is_contiguous()
        np.testing.assert_array_equal(th[k].numpy(), sd[k].numpy())
    got = pr.load(path)
    assert list(got) == list(sd)
    for k, v in sd.items():
        assert got[k].dtype is v.dtype and tuple(got[k].shape) == tuple(v.shape), k
        np.testing.assert_array_equal(_np(got[k]), _np(v), err_msg=k)
    assert got["tied"] is got["f32"]
    got["f32"][0, 0] = 100.0
    assert got["view_t"][0, 0].item() == 0.0  # ALLOWED["storage sharing of distinct views"]


def test_pyrite_sharing_survives_into_torch(tmp_path):
    """pr.save to a .pt name keeps one storage for tied weights and views, as torch.save does:
    torch.load and pr.load both give views of one storage (a write through one shows in the
    others), with their strides and offsets."""
    base = pr.arange(24, dtype=pr.float32).reshape(4, 6)
    sd = collections.OrderedDict(
        f32=base, tied=base, view_t=base.T, view_slice=base[1:, ::2], row=base[2]
    )
    path = tmp_path / "d.pt"
    pr.save(sd, path)
    for lib, got in (("torch", torch.load(path, weights_only=True)), ("pyrite", pr.load(path))):
        for k, v in sd.items():
            np.testing.assert_array_equal(got[k].numpy(), v.numpy(), err_msg=f"{lib} {k}")
        assert tuple(got["view_t"].stride()) == (1, 6), lib
        assert tuple(got["view_slice"].stride()) == (6, 2), lib
        got["f32"][2, 4] = 100.0
        assert got["view_t"][4, 2].item() == 100.0 and got["view_slice"][1, 2].item() == 100.0
        assert got["row"][4].item() == 100.0 and got["tied"][2, 4].item() == 100.0, lib


def test_torch_sharing_survives_into_pyrite(tmp_path):
    """torch.save keeps one storage for tied weights and views; pyrite's load keeps it too."""
    torch.manual_seed(0)
    tm = _tied(tnn)
    qkv = torch.randn(9, 4)
    path = tmp_path / "tied.pt"
    torch.save({"model": tm.state_dict(), "q": qkv[:3], "kT": qkv[3:6].t(), "qkv": qkv}, path)
    got = pr.load(path)
    assert got["model"]["head.weight"] is got["model"]["emb.weight"] or (
        got["model"]["head.weight"]._storage is got["model"]["emb.weight"]._storage
    )
    assert got["kT"].stride() == (1, 4)
    got["qkv"][4, 1] = 50.0
    assert got["kT"][1, 1].item() == 50.0 and got["q"].shape == (3, 4)


def test_int64_buffers_round_trip(tmp_path):
    """num_batches_tracked (int64 in torch) comes back int32 from pyrite's file; torch's
    load_state_dict casts it (ALLOWED["int64 buffers"])."""
    torch.manual_seed(0)
    tm = tnn.BatchNorm1d(3)
    tm(torch.randn(4, 3))
    tm.num_batches_tracked += 2**31 - 10  # still fits in int32
    path = tmp_path / "bn.pt"
    torch.save(tm.state_dict(), path)
    pm = pnn.BatchNorm1d(3)
    pm.load_state_dict(pr.load(path))
    assert pm.num_batches_tracked.item() == 2**31 - 9
    out = tmp_path / "bn.safetensors"
    pr.save(pm.state_dict(), out)
    back = safetensors.torch.load_file(str(out))
    assert back["num_batches_tracked"].dtype == torch.int32
    tm2 = tnn.BatchNorm1d(3)
    tm2.load_state_dict(back)
    assert (
        tm2.num_batches_tracked.dtype == torch.int64 and tm2.num_batches_tracked.item() == 2**31 - 9
    )


# ---- 5. damaged files, wrong keys, failed saves ----------------------------------------------
def _checkpoint_bytes(kind):
    import io

    torch.manual_seed(0)
    m = _train_net(tnn)
    opt = torch.optim.Adam(m.parameters())
    m(torch.randn(3, 5)).sum().backward()
    opt.step()
    obj = {"model": m.state_dict(), "optimizer": opt.state_dict(), "epoch": 3}
    if kind == "safetensors":
        return safetensors.torch.save(m.state_dict())
    buf = io.BytesIO()
    if kind == "pyrite":
        pr.save(pr.load(io.BytesIO(_checkpoint_bytes("zip"))), buf)
    else:
        torch.save(obj, buf, _use_new_zipfile_serialization=kind == "zip")
    return buf.getvalue()


@pytest.mark.parametrize("kind", ["zip", "legacy", "safetensors", "pyrite"])
def test_damaged_files_give_checkpoint_errors(tmp_path, kind):
    """Every cut and many flipped bytes give CheckpointError (or the unpickler's refusal)
    naming the file, never an exception from zipfile or pickle. Regressions: a damaged zip
    raised UnicodeDecodeError, NotImplementedError ('compression method') or BadZipFile (a bad
    CRC of `byteorder`), a damaged legacy file OverflowError or MemoryError."""
    from pyrite.errors import PyriteError

    data = _checkpoint_bytes(kind)
    rng = np.random.default_rng(0)
    n = len(data)
    damaged = [data[:c] for c in np.unique(np.linspace(1, n - 1, 40).astype(int))]
    for pos in rng.integers(0, n, 150):
        d = bytearray(data)
        d[pos] ^= 0xFF
        damaged.append(bytes(d))
    path = tmp_path / f"bad.{kind}"
    for d in damaged:
        path.write_bytes(d)
        try:
            pr.load(path)
        except PyriteError as exc:
            assert "bad." in str(exc), str(exc)
        # (a flipped byte in tensor data without a checksum loads: safetensors, legacy)


@pytest.mark.parametrize(
    "kind, offset",
    [("zip", 0x2B), ("zip", 0x1E), ("legacy", 0x40)],
)
def test_pinned_damage(tmp_path, kind, offset):
    """Single flipped bytes that raised raw exceptions (see above), pinned."""
    data = bytearray(_checkpoint_bytes(kind))
    path = tmp_path / "pinned.pt"
    for pos in range(offset, offset + 24):
        d = bytearray(data)
        d[pos] ^= 0xFF
        path.write_bytes(bytes(d))
        try:
            pr.load(path)
        except (CheckpointError, pr.io.UnpicklingError) as exc:
            assert "pinned.pt" in str(exc)


def test_wrong_keys_match_torch(tmp_path):
    """A DataParallel checkpoint ("module." keys) and a checkpoint of another width: pyrite's
    load_state_dict reports the keys and shapes torch's does."""
    torch.manual_seed(0)
    tm = _train_net(tnn)
    path = tmp_path / "dp.pt"
    torch.save({f"module.{k}": v for k, v in tm.state_dict().items()}, path)
    pm = _train_net(pnn)
    with pytest.raises(RuntimeError) as got:
        pm.load_state_dict(pr.load(path))
    with pytest.raises(RuntimeError) as want:
        _train_net(tnn).load_state_dict(torch.load(path, weights_only=True))
    assert str(got.value) == str(want.value)
    r_got = pm.load_state_dict(pr.load(path), strict=False)
    r_want = _train_net(tnn).load_state_dict(torch.load(path, weights_only=True), strict=False)
    assert r_got.missing_keys == r_want.missing_keys
    assert r_got.unexpected_keys == r_want.unexpected_keys

    other = tmp_path / "wide.pt"
    torch.save(tnn.Sequential(tnn.Linear(5, 7)).state_dict(), other)
    with pytest.raises(RuntimeError) as got:
        pnn.Sequential(pnn.Linear(5, 6)).load_state_dict(pr.load(other))
    with pytest.raises(RuntimeError) as want:
        tnn.Sequential(tnn.Linear(5, 6)).load_state_dict(torch.load(other, weights_only=True))
    assert str(got.value).replace("pyrite.Size", "torch.Size") == str(want.value)


def test_failed_save_keeps_the_previous_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    pr.save({"w": pr.ones(3)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="cannot pickle"):  # (pickle's error, as torch's)
        pr.save({"w": pr.zeros(5), "opt": {"sched": threading.Lock()}}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["ckpt.pt"]


def test_version_metadata_survives(tmp_path):
    """torch.save keeps a state dict's `_metadata` (each module's version), which
    load_state_dict reads: an InstanceNorm checkpoint with running stats, versioned, loads into
    one that tracks none with them reported unexpected, as torch's; unversioned it is refused.
    Regression: pr.load dropped `_metadata`, so pyrite refused the versioned file too."""
    tm = tnn.Sequential(tnn.InstanceNorm1d(4, track_running_stats=True))
    path = tmp_path / "inorm.pt"
    torch.save(tm.state_dict(), path)
    got = pr.load(path)
    want = torch.load(path, weights_only=True)
    assert got._metadata == want._metadata
    r_want = tnn.Sequential(tnn.InstanceNorm1d(4)).load_state_dict(want, strict=False)
    r_got = pnn.Sequential(pnn.InstanceNorm1d(4)).load_state_dict(got, strict=False)
    assert r_got.unexpected_keys == r_want.unexpected_keys
    assert r_want.unexpected_keys[:2] == ["0.running_mean", "0.running_var"]
    with pytest.raises(RuntimeError) as e_got:
        pnn.Sequential(pnn.InstanceNorm1d(4)).load_state_dict(got)
    with pytest.raises(RuntimeError) as e_want:
        tnn.Sequential(tnn.InstanceNorm1d(4)).load_state_dict(want)
    assert str(e_got.value) == str(e_want.value)
    plain = dict(got)  # no metadata: refused, strict or not, in both
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        pnn.Sequential(pnn.InstanceNorm1d(4)).load_state_dict(plain, strict=False)
    with pytest.raises(RuntimeError, match="Unexpected running stats buffer"):
        tnn.Sequential(tnn.InstanceNorm1d(4)).load_state_dict(dict(want), strict=False)


def test_pyrite_save_keeps_version_metadata(tmp_path):
    """pr.save keeps a state dict's `_metadata` (each module's version) as torch.save does, so a
    versioned InstanceNorm checkpoint with running stats saved by pyrite loads as torch's own
    file does (stats reported unexpected, not refused); the file stays a plain safetensors state
    dict to safetensors.torch."""
    from safetensors.torch import load_file

    pm = pnn.Sequential(pnn.InstanceNorm1d(4, track_running_stats=True))
    sd = pm.state_dict()
    path = tmp_path / "inorm.safetensors"
    pr.save(sd, path)
    got = pr.load(path)
    assert list(got) == list(sd) and got._metadata == sd._metadata
    tm = tnn.Sequential(tnn.InstanceNorm1d(4, track_running_stats=True))
    assert dict(got._metadata) == dict(tm.state_dict()._metadata)
    r = pnn.Sequential(pnn.InstanceNorm1d(4)).load_state_dict(got, strict=False)
    assert r.unexpected_keys[:2] == ["0.running_mean", "0.running_var"]
    assert sorted(load_file(str(path))) == sorted(sd)
