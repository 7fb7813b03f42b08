"""Every layer against torch.nn: the same constructor arguments give the same state_dict
(keys, shapes, dtypes); torch's state_dict loaded into pyrite's module (through numpy, or as
torch tensors) gives torch's output on the same random input, train and eval where they differ.

The reference is torch's module run in float64 on the same weights; the tolerance is the
dot-product bound K·u·scale (Higham §3.1) with K the longest reduction the layer does, u the
f32 unit roundoff, scale the largest |output| (at least 1), times a small constant for the
few extra roundings (normalisation, softmax) a layer adds."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn as pnn
from pyrite.testing.tolerance import F32_U, assert_close
from tests.oracle import assert_repr_matches

tnn = torch.nn

# torch dtypes as pyrite stores them (int64 is int32 on WebGPU)
_DT = {torch.float32: pr.float32, torch.int64: pr.int32, torch.float16: pr.float16}


def _inputs(specs, rng):
    out = []
    for s in specs:
        if not isinstance(s[0], str):  # a float input of this shape
            out.append(rng.standard_normal(s).astype(np.float32))
        elif s[0] == "int":
            out.append(rng.integers(0, s[2], size=s[1]).astype(np.int64))
        elif s[0] == "prob":
            out.append(rng.uniform(0.05, 0.95, size=s[1]).astype(np.float32))
        elif s[0] == "bool":
            out.append(rng.random(s[1]) < s[2])
        else:
            raise ValueError(s)
    return out


def _to_torch(a):
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t.double() if t.dtype == torch.float32 else t


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


def check_state_dict(tm, pm):
    ts, ps = tm.state_dict(), pm.state_dict()
    assert list(ps.keys()) == list(ts.keys())
    for k in ts:
        assert tuple(ps[k].shape) == tuple(ts[k].shape), k
        assert ps[k].dtype is _DT[ts[k].dtype], k


def load_from_torch(tm, pm, via="numpy"):
    sd = tm.state_dict()
    if via == "numpy":
        sd = OrderedDict((k, v.detach().numpy()) for k, v in sd.items())
    result = pm.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []


def compare(tm, pm, arrays, k, slack=8.0, kwargs=None):
    kwargs = kwargs or {}
    tm64 = tm.double() if any(p.is_floating_point() for p in tm.parameters()) else tm
    with torch.no_grad():
        ref = _flat(tm64(*[_to_torch(a) for a in arrays], **kwargs))
    got = _flat(pm(*[pr.tensor(a) for a in arrays], **kwargs))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        if r is None:
            assert g is None
            continue
        r = r.numpy()
        scale = max(1.0, float(np.abs(r).max()) if r.size else 1.0)
        assert_close(g, r, atol=slack * k * F32_U * scale)
    tm.float()


CASES = [
    # id, constructor (given the nn namespace), input specs, longest reduction K
    ("linear", lambda nn: nn.Linear(7, 5), [(3, 7)], 7),
    ("linear_nobias_3d", lambda nn: nn.Linear(7, 5, bias=False), [(2, 3, 7)], 7),
    ("bilinear", lambda nn: nn.Bilinear(4, 3, 5), [(6, 4), (6, 3)], 12),
    ("identity", lambda nn: nn.Identity(3, foo=1), [(2, 3)], 1),
    ("embedding", lambda nn: nn.Embedding(11, 4, padding_idx=2), [("int", (3, 5), 11)], 1),
    ("conv1d", lambda nn: nn.Conv1d(3, 4, 3, stride=2, padding=1), [(2, 3, 11)], 9),
    (
        "conv2d_same_reflect_groups",
        lambda nn: nn.Conv2d(4, 6, 3, groups=2, dilation=2, padding="same", padding_mode="reflect"),
        [(2, 4, 9, 7)],
        18,
    ),  # fmt: skip
    (
        "conv2d_circular",
        lambda nn: nn.Conv2d(3, 5, (3, 2), stride=(2, 1), padding=(1, 1), padding_mode="circular"),
        [(2, 3, 7, 5)],
        18,
    ),  # fmt: skip
    (
        "conv2d_replicate",
        lambda nn: nn.Conv2d(2, 3, 3, padding=2, padding_mode="replicate"),
        [(1, 2, 5, 6)],
        18,
    ),
    (
        "conv2d_valid_nobias",
        lambda nn: nn.Conv2d(3, 5, 3, padding="valid", bias=False),
        [(3, 6, 5)],
        27,
    ),  # fmt: skip
    (
        "convtranspose2d",
        lambda nn: nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1),
        [(2, 4, 5, 6)],
        36,
    ),
    (
        "convtranspose2d_groups",
        lambda nn: nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2),
        [(1, 4, 3, 3)],
        8,
    ),  # fmt: skip
    ("layernorm", lambda nn: nn.LayerNorm(5), [(3, 5)], 10),
    (
        "layernorm_2d_noaffine",
        lambda nn: nn.LayerNorm([3, 5], elementwise_affine=False),
        [(2, 3, 5)],
        30,
    ),  # fmt: skip
    ("layernorm_nobias", lambda nn: nn.LayerNorm(6, bias=False), [(4, 6)], 12),
    ("rmsnorm", lambda nn: nn.RMSNorm(5), [(3, 5)], 10),
    ("rmsnorm_eps", lambda nn: nn.RMSNorm([2, 5], eps=1e-3), [(3, 2, 5)], 20),
    ("groupnorm", lambda nn: nn.GroupNorm(2, 6), [(3, 6, 5)], 30),
    ("groupnorm_noaffine", lambda nn: nn.GroupNorm(3, 3, affine=False), [(2, 3, 4, 4)], 32),
    ("instancenorm2d", lambda nn: nn.InstanceNorm2d(3), [(2, 3, 4, 5)], 40),
    ("flatten", lambda nn: nn.Flatten(), [(2, 3, 4)], 1),
    ("flatten_range", lambda nn: nn.Flatten(0, 1), [(2, 3, 4)], 1),
    ("unflatten", lambda nn: nn.Unflatten(1, (2, 3)), [(4, 6)], 1),
    ("maxpool1d", lambda nn: nn.MaxPool1d(3, 2), [(2, 3, 11)], 1),
    (
        "maxpool2d",
        lambda nn: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
        [(2, 3, 7, 6)],
        1,
    ),  # fmt: skip
    ("avgpool1d", lambda nn: nn.AvgPool1d(3), [(2, 3, 10)], 3),
    ("avgpool2d", lambda nn: nn.AvgPool2d(3, 2, 1, count_include_pad=False), [(2, 3, 7, 5)], 9),
    ("adaptiveavgpool1d", lambda nn: nn.AdaptiveAvgPool1d(4), [(2, 3, 11)], 4),
    ("adaptiveavgpool2d", lambda nn: nn.AdaptiveAvgPool2d((3, None)), [(2, 3, 7, 5)], 3),
    ("adaptivemaxpool2d", lambda nn: nn.AdaptiveMaxPool2d(2), [(1, 2, 5, 5)], 1),
    ("zeropad2d", lambda nn: nn.ZeroPad2d((1, 2, 0, 3)), [(2, 3, 4, 5)], 1),
    ("reflectionpad1d", lambda nn: nn.ReflectionPad1d(2), [(2, 3, 5)], 1),
    ("upsample_nearest", lambda nn: nn.Upsample(scale_factor=2), [(1, 2, 3, 4)], 1),
    (
        "upsample_bilinear",
        lambda nn: nn.Upsample(size=(5, 7), mode="bilinear"),
        [(1, 2, 3, 4)],
        4,
    ),  # fmt: skip
    ("prelu", lambda nn: nn.PReLU(3, init=0.1), [(2, 3, 4)], 1),
    ("dropout_eval", lambda nn: nn.Dropout(0.3).eval(), [(3, 4)], 1),
    ("dropout2d_eval", lambda nn: nn.Dropout2d(0.3).eval(), [(2, 3, 4, 4)], 1),
    ("mha", lambda nn: nn.MultiheadAttention(8, 2), [(5, 3, 8), (7, 3, 8), (7, 3, 8)], 24),
    (
        "mha_batch_first_kvdim",
        lambda nn: nn.MultiheadAttention(8, 4, kdim=5, vdim=3, batch_first=True),
        [(2, 5, 8), (2, 6, 5), (2, 6, 3)],
        24,
    ),
    (
        "mha_bias_kv_zero_attn",
        lambda nn: nn.MultiheadAttention(6, 3, add_bias_kv=True, add_zero_attn=True, bias=False),
        [(4, 2, 6), (3, 2, 6), (3, 2, 6)],
        24,
    ),
    ("mha_unbatched", lambda nn: nn.MultiheadAttention(4, 1), [(3, 4), (5, 4), (5, 4)], 12),
    (
        "encoder_layer",
        lambda nn: nn.TransformerEncoderLayer(8, 2, 16).eval(),
        [(5, 3, 8)],
        64,
    ),
    (
        "encoder_layer_norm_first_gelu_batch_first",
        lambda nn: nn.TransformerEncoderLayer(
            8, 2, 12, activation="gelu", norm_first=True, batch_first=True
        ).eval(),
        [(3, 5, 8)],
        64,
    ),
    (
        "encoder",
        lambda nn: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2, norm=nn.LayerNorm(8)
        ),
        [(4, 2, 8)],
        128,
    ),
    (
        "decoder_layer",
        lambda nn: nn.TransformerDecoderLayer(8, 2, 16).eval(),
        [(4, 2, 8), (6, 2, 8)],
        96,
    ),
    (
        "sequential",
        lambda nn: nn.Sequential(
            OrderedDict(fc=nn.Linear(6, 5), act=nn.Tanh(), blocks=nn.ModuleList([nn.Linear(5, 5)]))
        ),
        None,
        0,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_torch(case, rng):
    _, make, specs, k = case
    torch.manual_seed(0)
    tm = make(tnn)
    pm = make(pnn)
    check_state_dict(tm, pm)
    load_from_torch(tm, pm, via="torch" if len(tm.state_dict()) % 2 else "numpy")
    assert_repr_matches(pm, tm)
    if specs is not None:
        compare(tm, pm, _inputs(specs, rng), k)


ACTIVATIONS = [
    lambda nn: nn.ReLU(),
    lambda nn: nn.ReLU6(),
    lambda nn: nn.LeakyReLU(0.2),
    lambda nn: nn.GELU(),
    lambda nn: nn.GELU(approximate="tanh"),
    lambda nn: nn.SiLU(),
    lambda nn: nn.Mish(),
    lambda nn: nn.Hardswish(),
    lambda nn: nn.Hardsigmoid(),
    lambda nn: nn.Hardtanh(-0.5, 1.5),
    lambda nn: nn.Tanh(),
    lambda nn: nn.Sigmoid(),
    lambda nn: nn.Softmax(dim=1),
    lambda nn: nn.LogSoftmax(dim=-1),
    lambda nn: nn.Softmin(dim=0),
    lambda nn: nn.Softplus(beta=2.0, threshold=3.0),
    lambda nn: nn.ELU(alpha=0.7),
    lambda nn: nn.CELU(alpha=1.3),
    lambda nn: nn.SELU(),
    lambda nn: nn.GLU(dim=1),
    lambda nn: nn.Hardshrink(0.3),
    lambda nn: nn.Softshrink(0.4),
    lambda nn: nn.Tanhshrink(),
    lambda nn: nn.Softsign(),
    lambda nn: nn.LogSigmoid(),
    lambda nn: nn.Threshold(0.1, 20.0),
    lambda nn: nn.RReLU().eval(),
    lambda nn: nn.PReLU(),
    lambda nn: nn.ReLU(inplace=True),
]


@pytest.mark.parametrize("make", ACTIVATIONS, ids=[f"act{i}" for i in range(len(ACTIVATIONS))])
def test_activation_matches_torch(make, rng):
    tm, pm = make(tnn), make(pnn)
    assert_repr_matches(pm, tm)
    check_state_dict(tm, pm)
    load_from_torch(tm, pm)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) * 3
    with torch.no_grad():
        ref = tm.double()(torch.from_numpy(x.copy()).double()).numpy()
    got = pm(pr.tensor(x))
    # elementwise: a few ULPs of the transcendental (WGSL's exp/tanh bounds), row sums of 5
    assert_close(got, ref, atol=64 * F32_U * max(1.0, np.abs(ref).max()), rtol=32 * F32_U)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"momentum": None},
        {"momentum": 0.3, "affine": False},
        {"track_running_stats": False},
    ],
    ids=["default", "cumulative", "noaffine", "untracked"],
)
@pytest.mark.parametrize("dims", [1, 2])
def test_batchnorm_train_then_eval(kw, dims, rng):
    cls = "BatchNorm1d" if dims == 1 else "BatchNorm2d"
    tm, pm = getattr(tnn, cls)(5, **kw), getattr(pnn, cls)(5, **kw)
    check_state_dict(tm, pm)
    assert_repr_matches(pm, tm)
    with torch.no_grad():  # non-trivial affine parameters, from torch
        for p in tm.parameters():
            p.uniform_(0.5, 1.5)
    load_from_torch(tm, pm)
    shape = (6, 5, 3) if dims == 1 else (4, 5, 3, 2)
    tm.double()
    for _step in range(3):  # training: batch statistics, running ones updated
        x = rng.standard_normal(shape).astype(np.float32) * 2 + 1
        ref = tm(torch.from_numpy(x).double()).detach().numpy()
        assert_close(pm(pr.tensor(x)), ref, atol=256 * F32_U * max(1, np.abs(ref).max()))
    for name, buf in tm.state_dict().items():
        if buf.is_floating_point():
            assert_close(pm.state_dict()[name], buf.numpy(), atol=64 * F32_U * 10, msg=name)
        else:
            assert int(pm.state_dict()[name].item()) == int(buf.item()) == 3
    tm.eval()
    pm.eval()
    assert not pm.training
    x = rng.standard_normal(shape).astype(np.float32)
    ref = tm(torch.from_numpy(x).double()).detach().numpy()
    assert_close(pm(pr.tensor(x)), ref, atol=256 * F32_U * max(1, np.abs(ref).max()))


def test_batchnorm_errors():
    with pytest.raises(ValueError, match=r"expected 4D input \(got 3D input\)"):
        pnn.BatchNorm2d(3)(pr.randn(2, 3, 4))
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        pnn.BatchNorm1d(3)(pr.randn(2, 3, 4, 1))


def test_batchnorm_loads_old_checkpoint_without_num_batches_tracked():
    # a dict without _metadata is an old (version < 2) checkpoint: torch fills the count in
    tm, pm = tnn.BatchNorm1d(3), pnn.BatchNorm1d(3)
    sd = {k: v for k, v in tm.state_dict().items() if k != "num_batches_tracked"}
    assert repr(pm.load_state_dict(sd)) == repr(tm.load_state_dict(sd))
    assert "num_batches_tracked" in pm.state_dict()
    # a current one (version 2 in its _metadata) missing the key is reported, as torch
    cur = pm.state_dict()
    del cur["num_batches_tracked"]
    with pytest.raises(
        RuntimeError, match='Missing key\\(s\\) in state_dict: "num_batches_tracked"'
    ):
        pm.load_state_dict(cur)


def test_dropout_train_statistics(rng):
    p, n = 0.3, 20000
    d = pnn.Dropout(p)
    y = d(pr.ones(n)).numpy()
    kept = y != 0
    # the kept fraction is Binomial(n, 1-p)/n: within 5 standard deviations
    assert abs(kept.mean() - (1 - p)) < 5 * np.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=4 * F32_U)
    d2 = pnn.Dropout2d(0.5)
    y2 = d2(pr.ones(4, 64, 3, 3)).numpy()
    per_channel = y2.reshape(4, 64, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))  # whole channels


def test_embedding_padding_idx_and_from_pretrained(rng):
    e = pnn.Embedding(7, 3, padding_idx=-2)
    assert e.padding_idx == 5
    assert np.all(e.weight.detach().numpy()[5] == 0)
    w = pr.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    f = pnn.Embedding.from_pretrained(w)
    assert not f.weight.requires_grad
    assert pnn.Embedding.from_pretrained(w, freeze=False).weight.requires_grad
    idx = np.array([[3, 0], [1, 1]])
    np.testing.assert_array_equal(f(pr.tensor(idx)).numpy(), w.numpy()[idx])
    assert repr(f) == repr(tnn.Embedding.from_pretrained(torch.from_numpy(w.numpy())))
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        pnn.Embedding(3, 2, padding_idx=3)


def test_conv_errors():
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        pnn.Conv2d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        pnn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        pnn.Conv1d(1, 1, 1, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported'):
        pnn.ConvTranspose2d(1, 1, 1, padding_mode="reflect")


def test_convtranspose_output_size(rng):
    torch.manual_seed(1)
    tm, pm = (
        tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
        pnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1),
    )
    load_from_torch(tm, pm)
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    ref = tm.double()(torch.from_numpy(x).double(), output_size=[8, 10]).detach().numpy()
    got = pm(pr.tensor(x), output_size=[8, 10])
    assert_close(got, ref, atol=8 * 18 * F32_U * max(1, np.abs(ref).max()))
    with pytest.raises(ValueError, match="requested an output size of"):
        pm(pr.tensor(x), output_size=[12, 10])


def test_mha_masks_and_weights(rng):
    torch.manual_seed(2)
    tm, pm = (
        tnn.MultiheadAttention(8, 2, batch_first=True),
        pnn.MultiheadAttention(8, 2, batch_first=True),
    )
    load_from_torch(tm, pm)
    tm.double()
    N, L, S = 3, 4, 5
    q = rng.standard_normal((N, L, 8)).astype(np.float32)
    kv = rng.standard_normal((N, S, 8)).astype(np.float32)
    kpm = np.zeros((N, S), bool)
    kpm[0, -2:] = True
    kpm[2, 0] = True
    attn_bool = np.triu(np.ones((L, S), bool), 2)
    attn_float = rng.standard_normal((N * 2, L, S)).astype(np.float32)
    for mask in (attn_bool, attn_float, None):
        for need, avg in ((True, True), (True, False), (False, True)):
            kw = {"need_weights": need, "average_attn_weights": avg}
            t_args = [torch.from_numpy(a).double() for a in (q, kv, kv)]
            tmask = None if mask is None else torch.from_numpy(mask)
            if tmask is not None and tmask.is_floating_point():
                tmask = tmask.double()
            with torch.no_grad():
                ro, rw = tm(*t_args, key_padding_mask=torch.from_numpy(kpm),
                            attn_mask=tmask, **kw)  # fmt: skip
            po, pw = pm(pr.tensor(q), pr.tensor(kv), pr.tensor(kv),
                        key_padding_mask=pr.tensor(kpm),
                        attn_mask=None if mask is None else pr.tensor(mask), **kw)  # fmt: skip
            assert_close(po, ro.numpy(), atol=16 * 24 * F32_U * max(1, ro.abs().max().item()))
            if rw is None:
                assert pw is None
            else:
                assert_close(pw, rw.numpy(), atol=16 * 24 * F32_U)


def test_encoder_layer_masks(rng):
    torch.manual_seed(3)
    tm = tnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    pm = pnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    load_from_torch(tm, pm)
    tm.double()
    x = rng.standard_normal((2, 5, 8)).astype(np.float32)
    causal = tnn.Transformer.generate_square_subsequent_mask(5)
    np.testing.assert_array_equal(
        pnn.Transformer.generate_square_subsequent_mask(5).numpy(), causal.numpy()
    )
    kpm = np.zeros((2, 5), bool)
    kpm[1, 3:] = True
    with torch.no_grad():
        ref = tm(torch.from_numpy(x).double(), src_mask=causal.double(),
                 src_key_padding_mask=torch.from_numpy(kpm), is_causal=True)  # fmt: skip
    got = pm(pr.tensor(x), src_mask=pr.tensor(causal.numpy()),
             src_key_padding_mask=pr.tensor(kpm), is_causal=True)  # fmt: skip
    assert_close(got, ref.numpy(), atol=16 * 64 * F32_U * max(1, ref.abs().max().item()))


LOSSES = [
    ("ce", lambda nn, w: nn.CrossEntropyLoss(), [(6, 5), ("int", (6,), 5)]),
    (
        "ce_weight_ignore_smooth",
        lambda nn, w: nn.CrossEntropyLoss(weight=w(5), ignore_index=1, label_smoothing=0.1),
        [(6, 5, 3), ("int", (6, 3), 5)],
    ),
    ("ce_sum", lambda nn, w: nn.CrossEntropyLoss(reduction="sum"), [(4, 3), ("int", (4,), 3)]),
    ("ce_probs", lambda nn, w: nn.CrossEntropyLoss(), [(4, 3), ("prob", (4, 3))]),
    ("nll", lambda nn, w: nn.NLLLoss(weight=w(4)), [(5, 4), ("int", (5,), 4)]),
    ("mse", lambda nn, w: nn.MSELoss(), [(3, 7), (3, 7)]),
    ("mse_none", lambda nn, w: nn.MSELoss(reduction="none"), [(3, 7), (3, 7)]),
    ("l1", lambda nn, w: nn.L1Loss(reduction="sum"), [(3, 7), (3, 7)]),
    ("smoothl1", lambda nn, w: nn.SmoothL1Loss(beta=0.5), [(4, 5), (4, 5)]),
    ("huber", lambda nn, w: nn.HuberLoss(delta=0.7), [(4, 5), (4, 5)]),
    ("bce", lambda nn, w: nn.BCELoss(weight=w(5)), [("prob", (3, 5)), ("prob", (3, 5))]),
    (
        "bce_logits_pos_weight",
        lambda nn, w: nn.BCEWithLogitsLoss(pos_weight=w(5)),
        [(3, 5), ("prob", (3, 5))],
    ),
    ("kldiv", lambda nn, w: nn.KLDivLoss(reduction="batchmean"), [(3, 5), ("prob", (3, 5))]),
    ("kldiv_logt", lambda nn, w: nn.KLDivLoss(log_target=True), [(3, 5), (3, 5)]),
]


@pytest.mark.parametrize("case", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(case, rng):
    _, make, specs = case
    weights = {}

    def w_t(n):
        weights[n] = rng.uniform(0.5, 2.0, n).astype(np.float32)
        return torch.from_numpy(weights[n]).double()

    tm = make(tnn, w_t)
    pm = make(pnn, lambda n: pr.tensor(weights[n]))
    assert list(pm.state_dict()) == list(tm.state_dict())  # weight/pos_weight are buffers
    assert_repr_matches(pm, tm)
    arrays = _inputs(specs, rng)
    if case[0] == "kldiv":
        arrays[0] = np.log(rng.uniform(0.1, 1, (3, 5))).astype(np.float32)
    with torch.no_grad():
        ref = tm(*[_to_torch(a) for a in arrays]).numpy()
    got = pm(*[pr.tensor(a) for a in arrays])
    n = arrays[0].size
    assert_close(got, ref, atol=32 * n * F32_U * max(1, np.abs(ref).max()))
