"""A differential hunt over `pyrite.nn` modules against `torch.nn`: every module class both have,
built with the same constructor arguments (several non-default ones), must agree with torch's on

1. state_dict keys / order / shapes / dtypes, named_parameters / named_buffers / named_modules
   names and order, the parameter count;
2. forward outputs after loading torch's state_dict, in train() and eval() modes, and the
   gradients of a random-weighted sum of the outputs w.r.t. inputs and parameters;
3. buffers after one train-mode forward (BatchNorm's running stats, num_batches_tracked);
4. repr / extra_repr text;
5. load_state_dict's errors (missing / unexpected key, wrong shape) and strict=False's report.

The forward runs in train mode on contiguous and on strided (non-contiguous view) inputs, in
eval mode where a module reads self.training, and in eval under no_grad where torch has an
inference fast path (native attention, the nested-tensor encoder). Beside the table of cases:
constructor and forward signatures, constructor errors, the torch.nn.init/utils names,
bfloat16 modules (forward and gradients) and bf16 Parameters written in place, rms_norm's
default eps on half inputs, and InstanceNorm's refusal of unversioned running stats.

Shapes are small but awkward (1s, primes). The tolerance of a comparison is the f32 rounding
bound of a sum of `k` terms (pyrite/testing/tolerance.py): k·2⁻²⁴ relative to the output's
scale, k the case's longest reduction (a conv's C_in·kernel, a norm's group size, ...), times a
small constant for the few ops in series.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn as pnn
from pyrite.testing.tolerance import F32_U
from tests.oracle import IS_ORACLE, OLDER_TORCH, older_torch_reason

tnn = torch.nn
TF_embedding = torch.nn.functional.embedding

# ---- inputs ------------------------------------------------------------------------------------
# An input is made by a spec: F(shape) a float input with a gradient, C(shape) a float constant,
# U(shape) uniform in (0, 1) (probabilities), Idx(high, shape) int64 class indices, B(shape) 0/1
# floats (binary targets), S(shape, values) a sign target (±1), or any callable rng -> array.


def F(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32), True)


def C(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32), False)


def P(*shape):  # a positive float with a gradient
    return lambda rng: ((rng.random(shape) + 0.1).astype(np.float32), True)


def U(*shape, grad=True):
    return lambda rng: ((rng.random(shape) * 0.9 + 0.05).astype(np.float32), grad)


def Idx(high, *shape):
    return lambda rng: (rng.integers(0, high, shape).astype(np.int64), False)


def B(*shape):
    return lambda rng: (rng.integers(0, 2, shape).astype(np.float32), False)


def S(*shape):
    return lambda rng: ((rng.integers(0, 2, shape) * 2 - 1).astype(np.float32), False)


def R(*shape):  # small integers as floats, with a gradient: ties everywhere
    return lambda rng: (rng.integers(-1, 2, shape).astype(np.float32), True)


def Fv(array):  # given float values, with a gradient
    return lambda rng: (np.asarray(array, np.float32), True)


def Const(array):
    return lambda rng: (np.asarray(array), False)


@dataclass
class Case:
    id: str
    build: Callable  # nn -> module (nn is torch.nn or pyrite.nn)
    inputs: list = field(default_factory=list)
    k: int = 16  # the longest reduction of the forward (tolerance)
    train: bool = True  # compare the train-mode forward (False where it is random)
    grad: bool = True
    call: Callable | None = None  # (module, inputs) -> output; default module(*inputs)
    contiguous: tuple = ()  # inputs never passed as strided views
    strided: bool = True  # also run train mode on non-contiguous inputs


def _ones(nn):
    return torch.ones if nn is tnn else pr.ones


def _w(nn, *values):
    return (torch.tensor if nn is tnn else pr.tensor)(list(values), dtype=_f32(nn))


def _f32(nn):
    return torch.float32 if nn is tnn else pr.float32


# ---- the cases -------------------------------------------------------------------------------
CASES: list[Case] = []


def case(id, build, inputs, **kw):
    CASES.append(Case(id, build, inputs, **kw))


# containers
case("Identity", lambda nn: nn.Identity(3, x=4), [F(2, 3)])
case(
    "Sequential",
    lambda nn: nn.Sequential(nn.Linear(5, 3), nn.ReLU(), nn.Linear(3, 2, bias=False)),
    [F(7, 5)],
)
case(
    "SequentialDict",
    lambda nn: nn.Sequential(
        __import__("collections").OrderedDict(
            [("fc", nn.Linear(5, 3)), ("act", nn.Tanh()), ("bn", nn.BatchNorm1d(3))]
        )
    ),
    [F(7, 5)],
)
case(
    "ModuleList",
    lambda nn: nn.ModuleList([nn.Linear(3, 3), nn.GELU(), nn.Linear(3, 1)]),
    [F(2, 3)],
    call=lambda m, xs: m[2](m[1](m[0](xs[0]))),
)
case(
    "ModuleDict",
    lambda nn: nn.ModuleDict({"b": nn.Linear(3, 2), "a": nn.LayerNorm(2)}),
    [F(2, 3)],
    call=lambda m, xs: m["a"](m["b"](xs[0])),
)
case(
    "ParameterList",
    lambda nn: nn.ParameterList([nn.Parameter(_ones(nn)(3)), nn.Parameter(_ones(nn)(2, 3))]),
    [F(2, 3)],
    call=lambda m, xs: xs[0] * m[0] + m[1],
)
case(
    "ParameterDict",
    lambda nn: nn.ParameterDict({"w": nn.Parameter(_ones(nn)(3)), "b": nn.Parameter(_ones(nn)(3))}),
    [F(2, 3)],
    call=lambda m, xs: xs[0] * m["w"] + m["b"],
)

# linear
case("Linear", lambda nn: nn.Linear(7, 5), [F(3, 7)], k=7)
case("Linear_nobias_3d", lambda nn: nn.Linear(7, 1, bias=False), [F(2, 1, 7)], k=7)
case("Linear_1in", lambda nn: nn.Linear(1, 3), [F(5, 1)])
case("Bilinear", lambda nn: nn.Bilinear(3, 4, 5), [F(2, 3), F(2, 4)], k=12)
case("Bilinear_nobias", lambda nn: nn.Bilinear(2, 2, 1, bias=False), [F(3, 2), F(3, 2)], k=4)

# convolutions
for pm in ["zeros", "reflect", "replicate", "circular"]:
    case(
        f"Conv1d_{pm}",
        lambda nn, pm=pm: nn.Conv1d(
            3, 6, 3, stride=2, padding=2, dilation=2, groups=3, padding_mode=pm
        ),  # fmt: skip
        [F(2, 3, 11)],
        k=9,
    )
    case(
        f"Conv2d_{pm}",
        lambda nn, pm=pm: nn.Conv2d(
            2, 4, (3, 2), stride=(2, 1), padding=(1, 2), bias=False, padding_mode=pm
        ),  # fmt: skip
        [F(2, 2, 7, 5)],
        k=12,
    )
    case(
        f"Conv3d_{pm}",
        lambda nn, pm=pm: nn.Conv3d(2, 3, 2, padding=1, padding_mode=pm),
        [F(1, 2, 3, 5, 4)],
        k=16,
    )
case("Conv1d_same", lambda nn: nn.Conv1d(2, 3, 4, padding="same", dilation=2), [F(3, 2, 7)], k=8)
case("Conv2d_valid", lambda nn: nn.Conv2d(3, 5, 3, padding="valid"), [F(1, 3, 5, 7)], k=27)
case(
    "Conv2d_same_groups",
    lambda nn: nn.Conv2d(4, 6, (2, 3), padding="same", groups=2, padding_mode="reflect"),
    [F(2, 4, 5, 6)],
    k=12,
)
case("Conv2d_unbatched", lambda nn: nn.Conv2d(2, 3, 3, stride=2), [F(2, 7, 7)], k=18)
case("Conv3d_groups_stride", lambda nn: nn.Conv3d(4, 2, 3, stride=2, groups=2), [F(2, 4, 5, 5, 7)], k=54)  # fmt: skip
case(
    "ConvTranspose1d",
    lambda nn: nn.ConvTranspose1d(
        4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2
    ),  # fmt: skip
    [F(2, 4, 5)],
    k=12,
)
case(
    "ConvTranspose2d",
    lambda nn: nn.ConvTranspose2d(
        3, 2, (3, 2), stride=(2, 3), padding=(1, 0), output_padding=(1, 2), bias=False
    ),  # fmt: skip
    [F(2, 3, 4, 3)],
    k=18,
)
case("ConvTranspose2d_unbatched", lambda nn: nn.ConvTranspose2d(2, 3, 3), [F(2, 3, 5)], k=18)
case(
    "ConvTranspose3d",
    lambda nn: nn.ConvTranspose3d(2, 4, 2, stride=2, groups=2, dilation=1),
    [F(1, 2, 3, 2, 3)],
    k=16,
)
case(
    "ConvTranspose1d_output_size",
    lambda nn: nn.ConvTranspose1d(2, 3, 3, stride=3),
    [F(2, 2, 4)],
    k=6,
    call=lambda m, xs: m(xs[0], output_size=[13]),
)

# normalization
case("BatchNorm1d", lambda nn: nn.BatchNorm1d(5), [F(4, 5)], k=8)
case("BatchNorm1d_3d", lambda nn: nn.BatchNorm1d(3, momentum=0.3, eps=1e-3), [F(2, 3, 7)], k=16)
case("BatchNorm1d_noaffine", lambda nn: nn.BatchNorm1d(3, affine=False), [F(5, 3)], k=8)
case(
    "BatchNorm1d_nostats",
    lambda nn: nn.BatchNorm1d(3, track_running_stats=False),
    [F(5, 3, 2)],
    k=16,
)
case("BatchNorm1d_cma", lambda nn: nn.BatchNorm1d(3, momentum=None), [F(5, 3)], k=8)
case("BatchNorm2d", lambda nn: nn.BatchNorm2d(3), [F(2, 3, 5, 7)], k=70)
case("BatchNorm2d_nobias", lambda nn: nn.BatchNorm2d(3, bias=False), [F(2, 3, 5, 7)], k=70)
# (without a process group SyncBatchNorm is BatchNorm, also in train mode, as torch's)
case(
    "SyncBatchNorm", lambda nn: nn.SyncBatchNorm(3, momentum=0.2, bias=False), [F(2, 3, 4, 5)], k=40
)
case("BatchNorm3d", lambda nn: nn.BatchNorm3d(2, affine=False), [F(2, 2, 3, 1, 5)], k=30)
case("InstanceNorm1d", lambda nn: nn.InstanceNorm1d(3), [F(2, 3, 7)], k=8)
case(
    "InstanceNorm1d_stats",
    lambda nn: nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
    [F(2, 3, 7)],
    k=16,
)
case("InstanceNorm2d_affine", lambda nn: nn.InstanceNorm2d(3, affine=True), [F(2, 3, 5, 4)], k=20)
case(
    "InstanceNorm2d_stats",
    lambda nn: nn.InstanceNorm2d(2, momentum=0.5, track_running_stats=True),
    [F(3, 2, 3, 5)],
    k=16,
)
case("InstanceNorm2d_unbatched", lambda nn: nn.InstanceNorm2d(2), [F(2, 3, 5)], k=16)
case(
    "InstanceNorm3d",
    lambda nn: nn.InstanceNorm3d(2, affine=True, track_running_stats=True),
    [F(2, 2, 3, 2, 3)],
    k=18,
)
case("GroupNorm", lambda nn: nn.GroupNorm(2, 6), [F(3, 6, 5)], k=16)
case("GroupNorm_noaffine", lambda nn: nn.GroupNorm(3, 3, eps=1e-3, affine=False), [F(2, 3, 2, 3)], k=8)  # fmt: skip
case("GroupNorm_2d_input", lambda nn: nn.GroupNorm(1, 4), [F(3, 4)], k=4)
case("LayerNorm", lambda nn: nn.LayerNorm(7), [F(3, 7)], k=8)
case("LayerNorm_2d", lambda nn: nn.LayerNorm((3, 7), eps=1e-3), [F(2, 3, 7)], k=21)
case("LayerNorm_noaffine", lambda nn: nn.LayerNorm(5, elementwise_affine=False), [F(2, 3, 5)], k=8)
case("LayerNorm_nobias", lambda nn: nn.LayerNorm([5], bias=False), [F(3, 5)], k=8)
case("RMSNorm", lambda nn: nn.RMSNorm(7), [F(3, 7)], k=8)
case("RMSNorm_eps_2d", lambda nn: nn.RMSNorm([2, 5], eps=1e-3), [F(3, 2, 5)], k=10)
case("RMSNorm_noaffine", lambda nn: nn.RMSNorm(5, elementwise_affine=False), [F(2, 5)], k=8)
case("LocalResponseNorm", lambda nn: nn.LocalResponseNorm(3, alpha=0.1, beta=0.7, k=2.0), [F(2, 5, 3, 4)], k=8)  # fmt: skip
case("LocalResponseNorm_3d", lambda nn: nn.LocalResponseNorm(2), [F(2, 4, 5)], k=8)

# embeddings
case("Embedding", lambda nn: nn.Embedding(11, 5), [Idx(11, 3, 4)])
case("Embedding_pad", lambda nn: nn.Embedding(7, 3, padding_idx=2), [Const([[2, 0, 2], [6, 2, 1]])])
case("Embedding_negpad", lambda nn: nn.Embedding(7, 3, padding_idx=-1), [Const([6, 0, 6, 5])])
case(
    "Embedding_maxnorm",
    lambda nn: nn.Embedding(7, 4, max_norm=1.0, norm_type=1.5),
    [Const([[1, 3, 1], [0, 6, 3]])],
)
case(
    "Embedding_freq",
    lambda nn: nn.Embedding(5, 3, scale_grad_by_freq=True),
    [Const([1, 1, 3, 1, 4, 3])],
)
for mode in ["sum", "mean", "max"]:
    case(
        f"EmbeddingBag_{mode}_2d",
        lambda nn, mode=mode: nn.EmbeddingBag(11, 4, mode=mode),
        [Idx(11, 3, 5)],
        k=5,
    )
    case(
        f"EmbeddingBag_{mode}_offsets",
        lambda nn, mode=mode: nn.EmbeddingBag(7, 3, mode=mode, padding_idx=1),
        [Const([1, 2, 4, 1, 5, 6, 0, 3]), Const([0, 3, 3, 6])],
        k=5,
    )
case(
    "EmbeddingBag_psw",
    lambda nn: nn.EmbeddingBag(7, 3, mode="sum", include_last_offset=True),
    [Const([1, 2, 4, 1, 5, 6, 0, 3]), Const([0, 2, 5, 8]), F(8)],
    k=5,
    call=lambda m, xs: m(xs[0], xs[1], per_sample_weights=xs[2]),
)

# recurrent
for cls in ["RNN", "LSTM", "GRU"]:
    case(f"{cls}", lambda nn, cls=cls: getattr(nn, cls)(5, 7), [F(3, 2, 5)], k=24)
    case(
        f"{cls}_2layer_bi_bf",
        lambda nn, cls=cls: getattr(nn, cls)(
            3, 4, num_layers=2, bidirectional=True, batch_first=True
        ),  # fmt: skip
        [F(2, 5, 3)],
        k=48,
    )
    case(
        f"{cls}_nobias_h0",
        lambda nn, cls=cls: getattr(nn, cls)(3, 2, bias=False, num_layers=2),
        [F(4, 1, 3), F(2, 1, 2)] + ([F(2, 1, 2)] if cls == "LSTM" else []),
        k=24,
        call=(lambda m, xs: m(xs[0], (xs[1], xs[2])))
        if cls == "LSTM"
        else (lambda m, xs: m(xs[0], xs[1])),
    )
    case(f"{cls}_unbatched", lambda nn, cls=cls: getattr(nn, cls)(3, 4), [F(5, 3)], k=24)
case("RNN_relu", lambda nn: nn.RNN(3, 4, nonlinearity="relu", bidirectional=True), [F(4, 2, 3)], k=24)  # fmt: skip
case(
    "LSTM_proj",
    lambda nn: nn.LSTM(3, 5, proj_size=2, num_layers=2, bidirectional=True),
    [F(4, 2, 3)],
    k=48,
)
case("LSTM_proj_bf", lambda nn: nn.LSTM(3, 4, proj_size=3, batch_first=True), [F(2, 3, 3)], k=48)
for cls in ["RNNCell", "LSTMCell", "GRUCell"]:
    case(f"{cls}", lambda nn, cls=cls: getattr(nn, cls)(5, 3), [F(2, 5)], k=16)
    case(f"{cls}_nobias_1d", lambda nn, cls=cls: getattr(nn, cls)(4, 3, bias=False), [F(4)], k=16)
case("RNNCell_relu_h", lambda nn: nn.RNNCell(3, 2, nonlinearity="relu"), [F(3, 3), F(3, 2)], k=8)
case(
    "LSTMCell_hc",
    lambda nn: nn.LSTMCell(3, 2),
    [F(3, 3), F(3, 2), F(3, 2)],
    k=8,
    call=lambda m, xs: m(xs[0], (xs[1], xs[2])),
)
case("GRUCell_h", lambda nn: nn.GRUCell(3, 2), [F(3, 3), F(3, 2)], k=8)

# transformers (dropout 0: the train-mode forward is deterministic)
_EL = dict(d_model=8, nhead=2, dim_feedforward=12, dropout=0.0)
case("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(**_EL), [F(5, 2, 8)], k=64)
case(
    "TransformerEncoderLayer_bf_nf_gelu",
    lambda nn: nn.TransformerEncoderLayer(
        **_EL, batch_first=True, norm_first=True, activation="gelu", layer_norm_eps=1e-4
    ),  # fmt: skip
    [F(2, 3, 8)],
    k=64,
)
case(
    "TransformerEncoderLayer_nobias",
    lambda nn: nn.TransformerEncoderLayer(**_EL, bias=False, batch_first=True),
    [F(3, 1, 8)],
    k=64,
)
case(
    "TransformerEncoder",
    lambda nn: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**_EL), 2, norm=nn.LayerNorm(8), enable_nested_tensor=False
    ),
    [F(3, 2, 8)],
    k=128,
)
case("TransformerDecoderLayer", lambda nn: nn.TransformerDecoderLayer(**_EL), [F(3, 2, 8), F(5, 2, 8)], k=64)  # fmt: skip
case(
    "TransformerDecoderLayer_bf_nf",
    lambda nn: nn.TransformerDecoderLayer(
        **_EL, batch_first=True, norm_first=True, activation="gelu"
    ),  # fmt: skip
    [F(2, 3, 8), F(2, 4, 8)],
    k=64,
)
case(
    "TransformerDecoder",
    lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(**_EL), 2, norm=nn.LayerNorm(8)),
    [F(3, 2, 8), F(4, 2, 8)],
    k=128,
)
case(
    "Transformer",
    lambda nn: nn.Transformer(8, 2, 1, 2, 12, dropout=0.0),
    [F(4, 2, 8), F(3, 2, 8)],
    k=128,
)
case(
    "Transformer_bf_nf",
    lambda nn: nn.Transformer(
        8, 2, 2, 1, 12, dropout=0.0, batch_first=True, norm_first=True, bias=False
    ),  # fmt: skip
    [F(2, 4, 8), F(2, 3, 8)],
    k=128,
)
case("MultiheadAttention", lambda nn: nn.MultiheadAttention(8, 2), [F(3, 2, 8), F(5, 2, 8), F(5, 2, 8)], k=32)  # fmt: skip
case(
    "MultiheadAttention_kv",
    lambda nn: nn.MultiheadAttention(6, 3, kdim=4, vdim=5, batch_first=True),
    [F(2, 3, 6), F(2, 5, 4), F(2, 5, 5)],
    k=32,
)
case(
    "MultiheadAttention_biaskv_zero",
    lambda nn: nn.MultiheadAttention(4, 1, bias=False, add_bias_kv=True, add_zero_attn=True),
    [F(3, 2, 4), F(2, 2, 4), F(2, 2, 4)],
    k=32,
)
case(
    "MultiheadAttention_noavg",
    lambda nn: nn.MultiheadAttention(4, 2),
    [F(3, 4), F(5, 4), F(5, 4)],
    k=32,
    call=lambda m, xs: m(*xs, average_attn_weights=False),
)

# activations (the ones with parameters or arguments)
case("PReLU", lambda nn: nn.PReLU(), [F(3, 4)])
case("PReLU_channels", lambda nn: nn.PReLU(3, init=0.1), [F(2, 3, 5)])
for make in [
    "ReLU()", "ReLU6()", "ELU(alpha=0.7)", "CELU(alpha=1.3)", "GELU()", "GELU('tanh')",
    "GLU(dim=1)", "Hardshrink(0.3)", "Hardsigmoid()", "Hardswish()", "Hardtanh(-0.5, 1.5)",
    "LeakyReLU(0.2)", "LogSigmoid()", "LogSoftmax(dim=1)", "Mish()", "SELU()", "SiLU()",
    "Sigmoid()", "Softmax(dim=0)", "Softmax(dim=-1)", "Softmin(dim=1)", "Softplus(beta=2, threshold=1)",
    "Softshrink(0.4)", "Softsign()", "Tanh()", "Tanhshrink()", "Threshold(0.1, -2.0)",
    "RReLU(0.1, 0.3)", "Softmax2d()", "Softmax()",
]:  # fmt: skip
    case(
        make,
        lambda nn, make=make: eval("nn." + make),
        [F(3, 4, 2, 5) if make.startswith("Softmax") else F(3, 4, 5)],
        train=not make.startswith("RReLU"),
    )

# dropout (p=0 in train mode: deterministic; p > 0 only in eval)
for cls in ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]:  # fmt: skip
    shape = {"Dropout1d": (2, 3, 4), "Dropout2d": (2, 3, 4, 2), "Dropout3d": (2, 3, 2, 2, 2)}
    case(f"{cls}_p0", lambda nn, cls=cls: getattr(nn, cls)(p=0.0), [F(*shape.get(cls, (3, 4, 5)))])
    case(
        f"{cls}_eval",
        lambda nn, cls=cls: getattr(nn, cls)(0.3, inplace=False),
        [F(*shape.get(cls, (3, 4, 5)))],
        train=False,
    )

# pooling
case("MaxPool1d", lambda nn: nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True), [F(2, 3, 10)])
case("MaxPool1d_idx", lambda nn: nn.MaxPool1d(2, return_indices=True), [F(2, 3, 7)])
case("MaxPool2d", lambda nn: nn.MaxPool2d((3, 2), stride=(2, 1), padding=1), [F(2, 3, 7, 5)])
case("MaxPool2d_idx_ceil", lambda nn: nn.MaxPool2d(2, return_indices=True, ceil_mode=True), [F(1, 2, 5, 7)])  # fmt: skip
case("MaxPool3d", lambda nn: nn.MaxPool3d(2, stride=1, dilation=(1, 2, 1)), [F(1, 2, 3, 5, 4)])
case("AvgPool1d", lambda nn: nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), [F(2, 3, 10)])  # fmt: skip
case("AvgPool2d", lambda nn: nn.AvgPool2d((3, 2), stride=(2, 1), padding=1), [F(2, 3, 7, 5)])
case("AvgPool2d_div", lambda nn: nn.AvgPool2d(2, divisor_override=3, ceil_mode=True), [F(1, 2, 5, 7)])  # fmt: skip
case("AvgPool3d", lambda nn: nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=False), [F(1, 2, 3, 5, 4)])  # fmt: skip
for d in (1, 2, 3):
    shp = (2, 3) + (5, 7, 4)[:d]
    case(f"AdaptiveAvgPool{d}d", lambda nn, d=d: getattr(nn, f"AdaptiveAvgPool{d}d")(3), [F(*shp)])
    case(
        f"AdaptiveMaxPool{d}d",
        lambda nn, d=d: getattr(nn, f"AdaptiveMaxPool{d}d")(3, return_indices=True),
        [F(*shp)],
    )
    case(
        f"LPPool{d}d",
        lambda nn, d=d: getattr(nn, f"LPPool{d}d")(2, 2, ceil_mode=d == 2),
        [P(*shp)],
    )
case("AdaptiveAvgPool2d_none", lambda nn: nn.AdaptiveAvgPool2d((None, 2)), [F(2, 3, 5, 7)])
case("AdaptiveMaxPool2d_none", lambda nn: nn.AdaptiveMaxPool2d((4, None)), [F(2, 3, 5, 7)])
case("LPPool1d_p3", lambda nn: nn.LPPool1d(3, 3, stride=2), [P(2, 3, 8)])
case(
    "FractionalMaxPool2d",
    lambda nn: nn.FractionalMaxPool2d(2, output_size=(3, 4), return_indices=True),
    [F(2, 3, 7, 8), U(2, 3, 2, grad=False)],
    call=lambda m, xs: (setattr(m, "_random_samples", xs[1]), m(xs[0]))[1],
)
case(
    "FractionalMaxPool3d",
    lambda nn: nn.FractionalMaxPool3d(2, output_ratio=0.5),
    [F(1, 2, 5, 6, 7), U(1, 2, 3, grad=False)],
    call=lambda m, xs: (setattr(m, "_random_samples", xs[1]), m(xs[0]))[1],
)


def _unpool(d, shape, kernel, stride=None):
    def call(m, xs):
        nn = tnn if isinstance(m, tnn.Module) else pnn
        pool = getattr(nn, f"MaxPool{d}d")(kernel, stride, return_indices=True)
        out, idx = pool(xs[0])
        return m(out, idx, output_size=xs[0].shape[-d:])

    return call


case("MaxUnpool1d", lambda nn: nn.MaxUnpool1d(2), [F(2, 3, 9)], call=_unpool(1, (2, 3, 9), 2))
case("MaxUnpool2d", lambda nn: nn.MaxUnpool2d(3, 2), [F(2, 1, 7, 5)], call=_unpool(2, None, 3, 2))
case("MaxUnpool3d", lambda nn: nn.MaxUnpool3d(2), [F(1, 2, 4, 5, 3)], call=_unpool(3, None, 2))

# padding
for d in (1, 2, 3):
    shp = (2, 3) + (5, 4, 3)[:d]
    pads = (1, 2, 0, 1, 2, 1)[: 2 * d]
    for cls in ["ConstantPad", "ZeroPad", "ReflectionPad", "ReplicationPad", "CircularPad"]:
        args = f"{pads}, 0.5" if cls == "ConstantPad" else f"{pads}"
        case(f"{cls}{d}d", lambda nn, cls=cls, d=d, args=args: eval(f"nn.{cls}{d}d({args})"), [F(*shp)])  # fmt: skip
    case(f"ReflectionPad{d}d_int", lambda nn, d=d: getattr(nn, f"ReflectionPad{d}d")(1), [F(*shp)])
case("ZeroPad2d_neg", lambda nn: nn.ZeroPad2d((-1, 2, 1, -2)), [F(2, 3, 5, 4)])
case("ConstantPad1d_unbatched", lambda nn: nn.ConstantPad1d(2, -1.0), [F(3, 5)])

# shape and resampling
case("PixelShuffle", lambda nn: nn.PixelShuffle(2), [F(2, 12, 3, 5)])
case("PixelUnshuffle", lambda nn: nn.PixelUnshuffle(3), [F(1, 2, 6, 3)])
case("ChannelShuffle", lambda nn: nn.ChannelShuffle(3), [F(2, 6, 2, 3)])
case("Flatten", lambda nn: nn.Flatten(), [F(2, 3, 5)])
case("Flatten_dims", lambda nn: nn.Flatten(0, -2), [F(2, 3, 5, 1)])
case("Unflatten", lambda nn: nn.Unflatten(1, (3, 5)), [F(2, 15)])
case("Fold", lambda nn: nn.Fold((5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [F(2, 12, 12)], k=6)  # fmt: skip
case("Unfold", lambda nn: nn.Unfold((2, 3), dilation=(2, 1), padding=(1, 0), stride=2), [F(2, 2, 7, 5)])  # fmt: skip
case("Upsample_nearest", lambda nn: nn.Upsample(scale_factor=2), [F(2, 3, 5)])
case("Upsample_size", lambda nn: nn.Upsample(size=(5, 7)), [F(1, 2, 3, 4)])
case("Upsample_bilinear", lambda nn: nn.Upsample(scale_factor=1.5, mode="bilinear"), [F(1, 2, 3, 5)])  # fmt: skip
case(
    "Upsample_bilinear_ac",
    lambda nn: nn.Upsample(size=(4, 7), mode="bilinear", align_corners=True),
    [F(2, 1, 3, 5)],
)
case("Upsample_bicubic", lambda nn: nn.Upsample(scale_factor=(2, 1.5), mode="bicubic"), [F(1, 2, 3, 4)])  # fmt: skip
case("Upsample_linear", lambda nn: nn.Upsample(size=7, mode="linear"), [F(2, 3, 4)])
case("Upsample_trilinear", lambda nn: nn.Upsample(scale_factor=2, mode="trilinear"), [F(1, 2, 2, 3, 2)])  # fmt: skip
case("Upsample_nearest_exact", lambda nn: nn.Upsample(scale_factor=1.7, mode="nearest-exact"), [F(1, 2, 3, 5)])  # fmt: skip
case("UpsamplingNearest2d", lambda nn: nn.UpsamplingNearest2d(scale_factor=3), [F(1, 2, 3, 2)])
case("UpsamplingBilinear2d", lambda nn: nn.UpsamplingBilinear2d(size=(5, 4)), [F(2, 1, 3, 2)])

# distances
case("CosineSimilarity", lambda nn: nn.CosineSimilarity(dim=1, eps=1e-6), [F(3, 5, 2), F(3, 5, 2)], k=8)  # fmt: skip
# (norms under eps: torch clamps them unrecorded, the gradient still flows through the norm)
case("CosineSimilarity_clamped", lambda nn: nn.CosineSimilarity(dim=0, eps=1.0), [F(3, 2), F(3, 2)])  # fmt: skip
case("PairwiseDistance", lambda nn: nn.PairwiseDistance(p=3.0, keepdim=True), [F(3, 5), F(3, 5)], k=8)  # fmt: skip
case("PairwiseDistance_1", lambda nn: nn.PairwiseDistance(p=1, eps=1e-3), [F(5), F(3, 5)], k=8)

# losses (with and without parameters / weight buffers)
for red in ["mean", "sum", "none"]:
    case(f"L1Loss_{red}", lambda nn, red=red: nn.L1Loss(reduction=red), [F(3, 5), C(3, 5)], k=16)
    case(f"MSELoss_{red}", lambda nn, red=red: nn.MSELoss(reduction=red), [F(3, 5), F(3, 5)], k=16)
    case(
        f"CrossEntropyLoss_{red}",
        lambda nn, red=red: nn.CrossEntropyLoss(
            weight=_w(nn, 0.2, 1.0, 3.0), ignore_index=1, reduction=red, label_smoothing=0.1
        ),
        [F(7, 3), Const([0, 1, 2, 2, 0, 1, 2])],
        k=32,
    )
    case(
        f"NLLLoss_{red}",
        lambda nn, red=red: nn.NLLLoss(weight=_w(nn, 0.5, 2.0, 1.0, 0.1), reduction=red),
        [F(3, 4, 5), Idx(4, 3, 5)],
        k=32,
    )
    case(
        f"BCELoss_{red}",
        lambda nn, red=red: nn.BCELoss(weight=_w(nn, 0.5, 2.0, 1.0), reduction=red),
        [U(4, 3), U(4, 3, grad=False)],
        k=16,
    )
    case(
        f"BCEWithLogitsLoss_{red}",
        lambda nn, red=red: nn.BCEWithLogitsLoss(
            weight=_w(nn, 0.5, 2.0, 1.0), reduction=red, pos_weight=_w(nn, 3.0, 1.0, 0.2)
        ),
        [F(4, 3), U(4, 3, grad=False)],
        k=16,
    )
    case(
        f"MultiMarginLoss_{red}",
        lambda nn, red=red: nn.MultiMarginLoss(
            p=2, margin=0.7, weight=_w(nn, 0.5, 2.0, 1.0, 3.0), reduction=red
        ),  # fmt: skip
        [F(5, 4), Idx(4, 5)],
        k=16,
    )
    case(
        f"MultiLabelSoftMarginLoss_{red}",
        lambda nn, red=red: nn.MultiLabelSoftMarginLoss(
            weight=_w(nn, 0.5, 2.0, 1.0), reduction=red
        ),  # fmt: skip
        [F(4, 3), B(4, 3)],
        k=16,
    )
    case(f"HuberLoss_{red}", lambda nn, red=red: nn.HuberLoss(reduction=red, delta=0.6), [F(3, 5), F(3, 5)])  # fmt: skip
    case(f"SmoothL1Loss_{red}", lambda nn, red=red: nn.SmoothL1Loss(reduction=red, beta=0.4), [F(3, 5), F(3, 5)])  # fmt: skip
    case(f"SoftMarginLoss_{red}", lambda nn, red=red: nn.SoftMarginLoss(reduction=red), [F(3, 5), S(3, 5)])  # fmt: skip
    case(f"KLDivLoss_{red}", lambda nn, red=red: nn.KLDivLoss(reduction=red), [F(3, 5), U(3, 5)])
    case(
        f"PoissonNLLLoss_{red}",
        lambda nn, red=red: nn.PoissonNLLLoss(log_input=False, full=True, reduction=red),
        [P(3, 5), P(3, 5)],
    )
    case(
        f"GaussianNLLLoss_{red}",
        lambda nn, red=red: nn.GaussianNLLLoss(full=True, eps=1e-3, reduction=red),
        [F(3, 5), F(3, 5), P(3, 1)],
    )
    case(f"HingeEmbeddingLoss_{red}", lambda nn, red=red: nn.HingeEmbeddingLoss(margin=0.5, reduction=red), [F(3, 5), S(3, 5)])  # fmt: skip
    case(
        f"CosineEmbeddingLoss_{red}",
        lambda nn, red=red: nn.CosineEmbeddingLoss(margin=0.1, reduction=red),
        [F(4, 5), F(4, 5), S(4)],
        k=16,
    )
    case(
        f"MarginRankingLoss_{red}",
        lambda nn, red=red: nn.MarginRankingLoss(margin=0.2, reduction=red),
        [F(6), F(6), S(6)],
    )
    case(
        f"TripletMarginLoss_{red}",
        lambda nn, red=red: nn.TripletMarginLoss(margin=0.5, p=1.5, swap=True, reduction=red),
        [F(4, 5), F(4, 5), F(4, 5)],
        k=16,
    )
    case(
        f"TripletMarginWithDistanceLoss_{red}",
        lambda nn, red=red: nn.TripletMarginWithDistanceLoss(margin=0.5, swap=True, reduction=red),
        [F(4, 5), F(4, 5), F(4, 5)],
        k=16,
    )
    case(
        f"MultiLabelMarginLoss_{red}",
        lambda nn, red=red: nn.MultiLabelMarginLoss(reduction=red),
        [F(3, 4), Const([[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]])],
    )
    case(
        f"CTCLoss_{red}",
        lambda nn, red=red: nn.CTCLoss(blank=0, reduction=red, zero_infinity=True),
        [
            lambda rng: (
                np.log(rng.dirichlet(np.ones(5), size=(7, 2))).astype(np.float32),
                True,
            ),
            Const([[1, 2, 2], [3, 4, 1]]),
            Const([7, 6]),
            Const([3, 2]),
        ],
        k=64,
    )
case(
    "AdaptiveLogSoftmaxWithLoss",
    lambda nn: nn.AdaptiveLogSoftmaxWithLoss(8, 13, cutoffs=[3, 7], div_value=2.0),
    [F(5, 8), Const([0, 4, 12, 2, 8])],
    k=32,
)
case(
    "AdaptiveLogSoftmaxWithLoss_headbias",
    lambda nn: nn.AdaptiveLogSoftmaxWithLoss(6, 9, cutoffs=[2], head_bias=True),
    [F(4, 6), Const([1, 0, 8, 3])],
    k=32,
)

# lazy modules: the first forward sizes the parameters; compared after it
for cls, args, inp in [
    ("LazyLinear", "5", F(3, 7)),
    ("LazyConv1d", "4, 3", F(2, 3, 7)),
    ("LazyConv2d", "2, 3, padding=1", F(2, 3, 5, 4)),
    ("LazyConv3d", "2, 2", F(1, 3, 3, 4, 3)),
    ("LazyConvTranspose1d", "4, 3", F(2, 3, 7)),
    ("LazyConvTranspose2d", "2, 3, stride=2", F(2, 3, 3, 4)),
    ("LazyConvTranspose3d", "2, 2", F(1, 3, 3, 2, 3)),
    ("LazyBatchNorm1d", "", F(4, 3)),
    ("LazyBatchNorm2d", "momentum=0.2", F(2, 3, 4, 5)),
    ("LazyBatchNorm3d", "", F(2, 3, 2, 2, 3)),
    ("LazyInstanceNorm1d", "affine=True", F(2, 3, 7)),
    ("LazyInstanceNorm2d", "track_running_stats=True", F(2, 3, 4, 5)),
    ("LazyInstanceNorm3d", "", F(2, 3, 2, 2, 3)),
]:
    CASES.append(Case(cls, lambda nn, cls=cls, args=args: eval(f"nn.{cls}({args})"), [inp], k=64))


# ---- more configurations: call variants, legacy arguments, in-place activations --------------
def _nnof(m):
    return tnn if isinstance(m, tnn.Module) else pnn


def _lib(m):
    return torch if isinstance(m, tnn.Module) else pr


def _rnn_utils(m):
    return torch.nn.utils.rnn if isinstance(m, tnn.Module) else pnn.utils.rnn


# in-place activations on a non-leaf (the autograd of in-place writes)
for make in [
    "ReLU(inplace=True)", "ReLU6(inplace=True)", "LeakyReLU(0.1, inplace=True)",
    "ELU(inplace=True)", "CELU(0.5, inplace=True)", "SELU(inplace=True)", "SiLU(inplace=True)",
    "Mish(inplace=True)", "Hardtanh(-0.3, 0.4, inplace=True)", "Hardswish(inplace=True)",
    "Hardsigmoid(inplace=True)", "Threshold(0.2, 5.0, inplace=True)", "Dropout(0.0, inplace=True)",
    "Dropout2d(0.0, inplace=True)", "AlphaDropout(0.0, inplace=True)",
]:  # fmt: skip
    case(
        "inplace_" + make,
        lambda nn, make=make: eval("nn." + make),
        [F(3, 4, 5)],
        call=lambda m, xs: m(xs[0] * 1.5),
    )
case("RReLU_inplace_eval", lambda nn: nn.RReLU(inplace=True), [F(3, 4)], train=False, call=lambda m, xs: m(xs[0] * 1.0))  # fmt: skip
case("Hardtanh_legacy_names", lambda nn: nn.Hardtanh(min_value=-0.2, max_value=0.3), [F(3, 4)])
# (the kinks' own points: torch's one-sided choices there)
_KINKS = [-6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0]
for make in ["Hardswish()", "Hardsigmoid()", "Hardtanh()", "ReLU6()", "ReLU()", "Hardshrink()", "Softshrink()", "Threshold(0.5, 2.0)", "LeakyReLU()", "ELU()", "CELU()", "Softplus(threshold=1.0)", "RReLU()"]:  # fmt: skip
    case(
        f"kinks_{make}",
        lambda nn, make=make: eval("nn." + make),
        [Fv([_KINKS])],
        train=make != "RReLU()",
    )
case("Softmax_implicit_3d", lambda nn: nn.Softmax(), [F(3, 4, 5)])
case("Softmax_implicit_1d", lambda nn: nn.Softmax(), [F(7)])
case("LogSoftmax_implicit", lambda nn: nn.LogSoftmax(), [F(3, 4, 2, 2)])
case("Softmin_implicit", lambda nn: nn.Softmin(), [F(2, 5)])
case("GLU_default", lambda nn: nn.GLU(), [F(3, 4, 6)])
case("PReLU_2d_input", lambda nn: nn.PReLU(4), [F(3, 4)])
case("PReLU_1d_input", lambda nn: nn.PReLU(), [F(5)])
case("Linear_1d_input", lambda nn: nn.Linear(7, 3), [F(7)], k=7)
case("Bilinear_leading", lambda nn: nn.Bilinear(3, 2, 4), [F(2, 3, 3), F(2, 3, 2)], k=6)
case(
    "Sequential_nested_slice",
    lambda nn: nn.Sequential(
        nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)), nn.Sigmoid()
    ),  # fmt: skip
    [F(3, 4)],
    call=lambda m, xs: m[1:](m[0](xs[0])),
)
case(
    "Embedding_from_pretrained",
    lambda nn: nn.Embedding.from_pretrained(
        _lib_nn(nn).arange(12.0).reshape(4, 3) / 7, freeze=False, padding_idx=1
    ),  # fmt: skip
    [Const([[0, 1, 3], [2, 2, 1]])],
)
case(
    "EmbeddingBag_from_pretrained",
    lambda nn: nn.EmbeddingBag.from_pretrained(
        _lib_nn(nn).arange(12.0).reshape(4, 3) / 7, freeze=False, mode="max"
    ),  # fmt: skip
    [Const([[0, 1, 3], [2, 2, 1]])],
)
case("EmbeddingBag_mean_pad_2d", lambda nn: nn.EmbeddingBag(5, 3, mode="mean", padding_idx=0), [Const([[0, 0, 1], [2, 0, 4]])])  # fmt: skip
# (no entries at all: zeros that still give the weight a zero gradient)
case("EmbeddingBag_empty_2d", lambda nn: nn.EmbeddingBag(5, 3, mode="max"), [Const(np.zeros((0, 4), np.int64))])  # fmt: skip
case(
    "EmbeddingBag_empty_offsets",
    lambda nn: nn.EmbeddingBag(5, 3, mode="sum", include_last_offset=True),
    [Const(np.zeros(0, np.int64)), Const([0, 0, 0]), F(0)],
    call=lambda m, xs: m(xs[0], xs[1], per_sample_weights=xs[2]),
)
# (ties: torch's max gives the whole gradient to the first entry of the bag holding the max)
case(
    "EmbeddingBag_max_ties",
    lambda nn: nn.EmbeddingBag.from_pretrained(
        _lib_nn(nn).tensor([[1.0, 0], [1, 2], [0, 2], [1, 1]]), freeze=False, mode="max"
    ),  # fmt: skip
    [Const([[0, 1, 3], [2, 1, 0]])],
)
case(
    "EmbeddingBag_max_ties_pad_offsets",
    lambda nn: nn.EmbeddingBag.from_pretrained(
        _lib_nn(nn).tensor([[1.0, 0], [1, 2], [0, 2], [1, 1]]),
        freeze=False,
        mode="max",
        padding_idx=3,
    ),  # fmt: skip
    [Const([3, 1, 0, 2, 1, 0, 3]), Const([0, 3, 6])],
)
case("MaxPool2d_ties", lambda nn: nn.MaxPool2d(3, 2, 1, return_indices=True), [R(2, 3, 7, 6)])
case("AdaptiveMaxPool2d_ties", lambda nn: nn.AdaptiveMaxPool2d((3, 2), return_indices=True), [R(2, 3, 7, 5)])  # fmt: skip
case("Embedding_int32", lambda nn: nn.Embedding(5, 3), [lambda rng: (np.array([[4, 0], [1, 1]], np.int32), False)])  # fmt: skip


# recurrent: packed sequences, given states, dropout between layers in eval
def _packed(m, xs):
    u = _rnn_utils(m)
    packed = u.pack_padded_sequence(xs[0], [3, 5, 1], enforce_sorted=False)
    out, h = m(packed)
    padded, lengths = u.pad_packed_sequence(out, total_length=6)
    return padded, lengths, h


for cls in ["RNN", "LSTM", "GRU"]:
    case(f"{cls}_packed", lambda nn, cls=cls: getattr(nn, cls)(3, 4, num_layers=2, bidirectional=True), [F(5, 3, 3)], k=48, call=_packed)  # fmt: skip
    case(f"{cls}_dropout_eval", lambda nn, cls=cls: getattr(nn, cls)(3, 2, num_layers=3, dropout=0.5), [F(4, 2, 3)], k=48, train=False)  # fmt: skip
    # (p = 1 in train mode: deterministic, every layer but the last dropped to 0)
    case(f"{cls}_dropout1_train", lambda nn, cls=cls: getattr(nn, cls)(3, 2, num_layers=2, dropout=1.0), [F(4, 2, 3)], k=48)  # fmt: skip
case(
    "LSTM_proj_h0",
    lambda nn: nn.LSTM(3, 4, proj_size=2, bidirectional=True, batch_first=True),
    [F(2, 5, 3), F(2, 2, 2), F(2, 2, 4)],
    k=48,
    call=lambda m, xs: m(xs[0], (xs[1], xs[2])),
)
case("GRU_unbatched_h0", lambda nn: nn.GRU(3, 4, num_layers=2), [F(5, 3), F(2, 4)], k=48)
case("RNNCell_unbatched_h", lambda nn: nn.RNNCell(3, 2), [F(3), F(2)], k=8)


# transformer and attention call variants
def _causal(n):
    return lambda rng: (np.triu(np.full((n, n), -np.inf, np.float32), 1), False)


def _kpm(*shape):
    def make(rng):
        m = np.zeros(shape, bool)
        m[..., -1] = True
        m[0, -2] = True
        return m, False

    return make


case(
    "MultiheadAttention_masks",
    lambda nn: nn.MultiheadAttention(6, 2),
    [F(4, 3, 6), F(5, 3, 6), F(5, 3, 6), _kpm(3, 5), C(4, 5)],
    k=32,
    call=lambda m, xs: m(xs[0], xs[1], xs[2], key_padding_mask=xs[3], attn_mask=xs[4]),
)
case(
    "MultiheadAttention_boolmask_noweights",
    lambda nn: nn.MultiheadAttention(4, 2, batch_first=True),
    [F(2, 3, 4), _kpm(3, 3)],
    k=32,
    call=lambda m, xs: m(xs[0], xs[0], xs[0], attn_mask=xs[1], need_weights=False),
)
case(
    "MultiheadAttention_causal",
    lambda nn: nn.MultiheadAttention(4, 2, batch_first=True),
    [F(2, 5, 4), _causal(5)],
    k=32,
    call=lambda m, xs: m(xs[0], xs[0], xs[0], attn_mask=xs[1], is_causal=True),
)
case(
    "MultiheadAttention_3dmask",
    lambda nn: nn.MultiheadAttention(4, 2),
    [F(3, 2, 4), F(2, 2, 4), F(2, 2, 4), C(4, 3, 2)],
    k=32,
    call=lambda m, xs: m(xs[0], xs[1], xs[2], attn_mask=xs[3]),
)
case(
    "MultiheadAttention_empty_query",
    lambda nn: nn.MultiheadAttention(8, 2),
    [F(0, 2, 8), F(3, 2, 8), F(3, 2, 8)],
    call=lambda m, xs: m(*xs, need_weights=False),
)
case("TransformerEncoderLayer_empty_seq", lambda nn: nn.TransformerEncoderLayer(**_EL, batch_first=True), [F(2, 0, 8)], k=64)  # fmt: skip
case(
    "TransformerEncoderLayer_masks",
    lambda nn: nn.TransformerEncoderLayer(**_EL, batch_first=True),
    [F(3, 5, 8), _causal(5), _kpm(3, 5)],
    k=64,
    call=lambda m, xs: m(xs[0], src_mask=xs[1], src_key_padding_mask=xs[2]),
)
# (dropout p = 1 in train mode: deterministic, every dropped value 0)
case("MultiheadAttention_dropout1", lambda nn: nn.MultiheadAttention(4, 2, dropout=1.0), [F(3, 2, 4), F(5, 2, 4), F(5, 2, 4)], k=32)  # fmt: skip
case("TransformerEncoderLayer_dropout1", lambda nn: nn.TransformerEncoderLayer(8, 2, 12, dropout=1.0), [F(3, 2, 8)], k=64)  # fmt: skip
case(
    "TransformerEncoder_padding_nested",
    lambda nn: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**_EL, batch_first=True), 2, norm=nn.LayerNorm(8)
    ),  # fmt: skip
    [F(3, 5, 8), _kpm(3, 5)],
    k=128,
    call=lambda m, xs: m(xs[0], src_key_padding_mask=xs[1]),
)
case(
    "MultiheadAttention_bf_kpm_selfattn",
    lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
    [F(3, 5, 8), _kpm(3, 5)],
    k=32,
    call=lambda m, xs: m(xs[0], xs[0], xs[0], key_padding_mask=xs[1]),
)
case(
    "TransformerEncoder_causal",
    lambda nn: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(**_EL), 2, enable_nested_tensor=False
    ),  # fmt: skip
    [F(4, 2, 8), _causal(4)],
    k=128,
    call=lambda m, xs: m(xs[0], mask=xs[1], is_causal=True),
)
case(
    "TransformerDecoderLayer_masks",
    lambda nn: nn.TransformerDecoderLayer(**_EL),
    [F(4, 2, 8), F(3, 2, 8), _causal(4), _kpm(2, 3), _kpm(2, 4)],
    k=64,
    call=lambda m, xs: m(
        xs[0], xs[1], tgt_mask=xs[2], memory_key_padding_mask=xs[3], tgt_key_padding_mask=xs[4]
    ),  # fmt: skip
)
case(
    "Transformer_masks",
    lambda nn: nn.Transformer(8, 2, 1, 1, 12, dropout=0.0, batch_first=True),
    [F(2, 5, 8), F(2, 4, 8), _kpm(2, 5)],
    k=128,
    call=lambda m, xs: m(
        xs[0],
        xs[1],
        tgt_mask=type(m).generate_square_subsequent_mask(4),
        src_key_padding_mask=xs[2],
        memory_key_padding_mask=xs[2],
        tgt_is_causal=True,
    ),  # fmt: skip
)
case(
    "Transformer_custom_parts",
    lambda nn: nn.Transformer(
        8,
        2,
        dropout=0.0,
        custom_encoder=nn.Sequential(nn.Linear(8, 8)),
        custom_decoder=nn.TransformerDecoder(nn.TransformerDecoderLayer(**_EL), 1),
    ),  # fmt: skip
    [F(3, 2, 8), F(2, 2, 8)],
    k=128,
    call=lambda m, xs: m.decoder(xs[1], m.encoder(xs[0])),
)

# convolutions and pooling: more argument forms
case("Conv3d_same_dil", lambda nn: nn.Conv3d(2, 2, (3, 2, 1), padding="same", dilation=(1, 2, 3), padding_mode="circular"), [F(1, 2, 4, 5, 3)], k=12)  # fmt: skip
case("Conv1d_k1", lambda nn: nn.Conv1d(1, 1, 1), [F(1, 1, 1)])
case("Conv2d_tuple_padding", lambda nn: nn.Conv2d(3, 1, 1, padding=(0, 2), stride=(1, 3)), [F(2, 3, 4, 5)])  # fmt: skip
case(
    "ConvTranspose2d_output_size",
    lambda nn: nn.ConvTranspose2d(2, 4, 3, stride=2, padding=1, dilation=2, groups=2),
    [F(2, 2, 3, 4)],
    k=18,
    call=lambda m, xs: m(xs[0], output_size=(8, 9)),
)
case("ConvTranspose3d_pad", lambda nn: nn.ConvTranspose3d(1, 2, (2, 3, 1), stride=(1, 2, 3), padding=(1, 1, 0), output_padding=(0, 1, 2)), [F(2, 1, 3, 3, 2)], k=8)  # fmt: skip
case("MaxPool2d_idx_dil", lambda nn: nn.MaxPool2d(2, 1, dilation=2, return_indices=True), [F(2, 2, 5, 6)])  # fmt: skip
case("MaxPool3d_idx_ceil", lambda nn: nn.MaxPool3d(2, return_indices=True, ceil_mode=True), [F(1, 2, 3, 5, 3)])  # fmt: skip
case("MaxPool1d_unbatched", lambda nn: nn.MaxPool1d(3, 1, 1), [F(3, 7)])
case("AvgPool1d_unbatched", lambda nn: nn.AvgPool1d(2), [F(3, 7)])
case("AvgPool3d_div", lambda nn: nn.AvgPool3d((1, 2, 3), divisor_override=2), [F(1, 2, 3, 5, 7)])
case("AvgPool2d_unbatched", lambda nn: nn.AvgPool2d(3, 2, 1, count_include_pad=False), [F(2, 5, 6)])  # fmt: skip
case("AdaptiveAvgPool3d_none", lambda nn: nn.AdaptiveAvgPool3d((None, 2, 3)), [F(1, 2, 3, 5, 4)])
case("AdaptiveMaxPool1d_up", lambda nn: nn.AdaptiveMaxPool1d(7), [F(2, 3, 5)])
case("AdaptiveAvgPool2d_unbatched", lambda nn: nn.AdaptiveAvgPool2d((2, 3)), [F(3, 5, 7)])
# (empty dims torch accepts: dim 0 of any input; the channels of adaptive_avg 1d/2d, whose
# backward torch refuses there)
case("AdaptiveAvgPool2d_unbatched_empty", lambda nn: nn.AdaptiveAvgPool2d(2), [F(0, 5, 7)])
case("AdaptiveMaxPool1d_unbatched_empty", lambda nn: nn.AdaptiveMaxPool1d(2), [F(0, 5)])
case("AdaptiveAvgPool1d_no_channels", lambda nn: nn.AdaptiveAvgPool1d(3), [F(2, 0, 5)], grad=False)  # fmt: skip
# (a window of zeros: pow(0, 1/p)'s infinite derivative meets sign's and relu's zero ones)
case(
    "LPPool1d_zero_window", lambda nn: nn.LPPool1d(2, 2), [Fv([[[0.0, 0.0, 1.0, -2.0, 0.0, 3.0]]])]
)
case("LPPool2d_zero_window", lambda nn: nn.LPPool2d(3, 2), [Fv(np.kron([[0, 1], [1, 0]], np.ones((2, 2)))[None, None] * 0.5)])  # fmt: skip
case("LPPool2d_float", lambda nn: nn.LPPool2d(1.5, (2, 3), stride=(1, 2)), [P(1, 2, 5, 7)])
case("Fold_int", lambda nn: nn.Fold(4, 2), [F(2, 12, 9)], k=4)
case("Unfold_int", lambda nn: nn.Unfold(3, padding=1), [F(1, 2, 4, 5)])
case("Fold_unbatched", lambda nn: nn.Fold((3, 4), 2), [F(8, 6)], k=4)
case("Upsample_recompute", lambda nn: nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [F(1, 2, 3, 5)])  # fmt: skip
case("Upsample_bicubic_ac", lambda nn: nn.Upsample(size=(5, 2), mode="bicubic", align_corners=True), [F(1, 2, 3, 4)])  # fmt: skip
case("Upsample_nearest3d", lambda nn: nn.Upsample(size=(3, 4, 5)), [F(1, 2, 2, 3, 2)])
case("ZeroPad1d_int", lambda nn: nn.ZeroPad1d(3), [F(2, 3, 4)])
case("CircularPad2d_unbatched", lambda nn: nn.CircularPad2d((1, 0, 2, 1)), [F(2, 3, 4)])
case("ReplicationPad3d_unbatched", lambda nn: nn.ReplicationPad3d(1), [F(2, 3, 2, 4)])
case("CosineSimilarity_bcast", lambda nn: nn.CosineSimilarity(dim=-1), [F(3, 1, 5), F(1, 4, 5)], k=8)  # fmt: skip
case("PairwiseDistance_inf", lambda nn: nn.PairwiseDistance(p=float("inf")), [F(3, 5), F(3, 5)])
case("PairwiseDistance_1d", lambda nn: nn.PairwiseDistance(), [F(5), F(5)])

# losses: legacy arguments, probability targets, K-dim inputs, ignore_index
case("MSELoss_size_average", lambda nn: nn.MSELoss(size_average=False), [F(3, 5), F(3, 5)])
case("L1Loss_reduce", lambda nn: nn.L1Loss(reduce=False), [F(3, 5), F(3, 5)])
case("NLLLoss_legacy", lambda nn: nn.NLLLoss(size_average=False, reduce=True), [F(4, 3), Idx(3, 4)])
case("BCELoss_legacy", lambda nn: nn.BCELoss(reduce=False, size_average=True), [U(4, 3), U(4, 3, grad=False)])  # fmt: skip
case("CrossEntropyLoss_probs", lambda nn: nn.CrossEntropyLoss(label_smoothing=0.2), [F(4, 3), U(4, 3, grad=False)], k=16)  # fmt: skip
case(
    "CrossEntropyLoss_kdim_ignore",
    lambda nn: nn.CrossEntropyLoss(weight=_w(nn, 1.0, 2.0, 0.5)),
    [
        F(2, 3, 4, 5),
        Const(
            np.where(
                np.arange(40).reshape(2, 4, 5) % 7 == 0, -100, np.arange(40).reshape(2, 4, 5) % 3
            )
        ),
    ],  # fmt: skip
    k=64,
)
case("CrossEntropyLoss_unbatched", lambda nn: nn.CrossEntropyLoss(), [F(5), Const(np.int64(3))])
case(
    "LinearCrossEntropyLoss_kdim",
    lambda nn: nn.LinearCrossEntropyLoss(5, 3, out_features=(2,), bias=True, label_smoothing=0.1),
    [F(4, 5), Const(np.arange(8).reshape(4, 2) % 3)],
    k=32,
)
case(
    "LinearCrossEntropyLoss_probs",
    lambda nn: nn.LinearCrossEntropyLoss(7, 4, reduction="sum", weight=_w(nn, 1.0, 2.0, 0.5, 1.5)),
    [F(3, 7), U(3, 4, grad=False)],
    k=32,
)
case(
    "NLLLoss_ignore_all_mean",
    lambda nn: nn.NLLLoss(ignore_index=2),
    [F(3, 4), Const([2, 2, 2])],
)
case("KLDivLoss_batchmean_logt", lambda nn: nn.KLDivLoss(reduction="batchmean", log_target=True), [F(3, 5), F(3, 5)])  # fmt: skip
case("PoissonNLLLoss_log", lambda nn: nn.PoissonNLLLoss(), [F(3, 5), P(3, 5)])
case("BCEWithLogitsLoss_posw_bcast", lambda nn: nn.BCEWithLogitsLoss(pos_weight=_w(nn, 3.0, 1.0, 0.2)), [F(2, 4, 3), B(2, 4, 3)])  # fmt: skip
case("GaussianNLLLoss_samevar", lambda nn: nn.GaussianNLLLoss(), [F(3, 5), F(3, 5), P(3, 5)])
case("GaussianNLLLoss_unbatched", lambda nn: nn.GaussianNLLLoss(reduction="sum"), [F(5), F(5), P(1)])  # fmt: skip
case("MultiMarginLoss_default", lambda nn: nn.MultiMarginLoss(), [F(5, 4), Idx(4, 5)])
case("MultiMarginLoss_1d", lambda nn: nn.MultiMarginLoss(), [F(4), Const(np.int64(2))])
case("MultiLabelMarginLoss_1d", lambda nn: nn.MultiLabelMarginLoss(), [F(4), Const([2, 1, -1, 0])])  # fmt: skip
case(
    "TripletMarginWithDistanceLoss_fn",
    lambda nn: nn.TripletMarginWithDistanceLoss(
        distance_function=nn.PairwiseDistance(p=1), margin=2.0
    ),  # fmt: skip
    [F(4, 5), F(4, 5), F(4, 5)],
    k=16,
)
case("TripletMarginLoss_default", lambda nn: nn.TripletMarginLoss(), [F(4, 5), F(4, 5), F(4, 5)], k=16)  # fmt: skip
case("HingeEmbeddingLoss_default", lambda nn: nn.HingeEmbeddingLoss(), [F(3, 5), S(3, 5)])
case(
    "CTCLoss_concat_targets",
    lambda nn: nn.CTCLoss(blank=4),
    [
        lambda rng: (np.log(rng.dirichlet(np.ones(5), size=(6, 2))).astype(np.float32), True),
        Const([1, 2, 2, 3, 0]),
        Const([6, 5]),
        Const([3, 2]),
    ],
    k=64,
    # torch 2.13's CPU ctc_loss misreads a strided 1-d concatenated targets tensor (a [::2] view
    # of [1, 2, 2, 3, 0] gives another loss than the same values contiguous; pyrite's does not)
    contiguous=(1,),
)
case(
    "CTCLoss_unbatched",
    lambda nn: nn.CTCLoss(reduction="sum"),
    [
        lambda rng: (np.log(rng.dirichlet(np.ones(4), size=(5,))).astype(np.float32), True),
        Const([1, 3]),
        Const(np.int64(5)),
        Const(np.int64(2)),
    ],
    k=64,
)
case(
    "AdaptiveLogSoftmaxWithLoss_log_prob",
    lambda nn: nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[2, 5], div_value=3.0),
    [F(4, 6)],
    k=32,
    call=lambda m, xs: m.log_prob(xs[0]),
)
case(
    "AdaptiveLogSoftmaxWithLoss_predict",
    lambda nn: nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[2, 5], head_bias=True),
    [F(7, 6)],
    k=32,
    grad=False,
    call=lambda m, xs: m.predict(xs[0]),
)
case(
    "AdaptiveLogSoftmaxWithLoss_unbatched",
    lambda nn: nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[2, 5]),
    [F(6), Const(np.int64(7))],
    k=32,
)


def _lib_nn(nn):
    return torch if nn is tnn else pr


# (time: the strided run of a loss's 'sum' is its 'mean' one's, and of a whole transformer is
# its layers': a few cases keep them)
# Elementwise activations read strides through the one strided map, so a few of them stand for
# all (kinks_, inplace_ and the activation list); the row ops (softmax family) all keep theirs.
_ACTIVATION_IDS = {
    c.id
    for c in CASES
    if "(" in c.id
    and "Loss" not in c.id
    and not c.id.startswith(("Softmax", "LogSoftmax", "Softmin"))
}
for c in CASES:
    if (
        c.id.endswith(("_sum", "_none"))
        or (c.id in _ACTIVATION_IDS and c.id not in ("GELU('tanh')", "GLU(dim=1)"))
        or (
            c.id.startswith("Transformer")
            and c.id not in ("Transformer_masks", "TransformerEncoderLayer")
        )
    ):
        c.strided = False

ALL_IDS = [c.id for c in CASES]
assert len(set(ALL_IDS)) == len(ALL_IDS), "duplicate case ids"


def _torch_cannot_build(c):
    """Under a torch older than the oracle, why it cannot build case `c` (a constructor argument
    2.13 added, BatchNorm's bias=; a module 2.13 added, nn.LinearCrossEntropyLoss), else None.
    Under the oracle every case builds or fails."""
    if not OLDER_TORCH:
        return None
    try:
        c.build(tnn)
    except (TypeError, AttributeError) as e:
        return str(e)
    return None


# case id -> the error an older torch's constructor raised (such a case is skipped there)
OLDER_TORCH_CANNOT_BUILD = {c.id: why for c in CASES if (why := _torch_cannot_build(c))}


# ---- helpers ---------------------------------------------------------------------------------
def _is_lazy(m):
    return any(type(s).__name__.startswith("Lazy") for s in m.modules())


def _make_inputs(case, rng):
    return [spec(rng) for spec in case.inputs]


def _strided(a):
    """The same values as a non-contiguous view: a transposed copy transposed back (an
    every-other-element slice for 1-d)."""
    if a.ndim >= 2:
        return np.ascontiguousarray(np.swapaxes(a, -1, -2)), lambda t: t.transpose(-1, -2)
    if a.ndim == 1:
        b = np.zeros((2 * a.shape[0],), a.dtype)
        b[::2] = a
        return b, lambda t: t[::2]
    return a, lambda t: t


def _tensors(lib, arrays, strided=False, contiguous=()):
    """(leaves, inputs): the leaves hold the gradients; the inputs are views of them."""
    leaves, inputs = [], []
    for i, (a, grad) in enumerate(arrays):
        base, view = _strided(a) if strided and i not in contiguous else (a, lambda t: t)
        t = lib.tensor(base)
        if grad and t.is_floating_point():
            t.requires_grad_(True)
        leaves.append(t)
        inputs.append(view(t))
    return leaves, inputs


def _to_torch(arrays):
    return _tensors(torch, arrays)[1]


def _to_pyrite(arrays):
    return _tensors(pr, arrays)[1]


def _flat(out):
    """The tensors of a module's output, in order (tuples, lists, named tuples nest)."""
    if out is None:
        return []
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


def _call(case, m, xs):
    return case.call(m, xs) if case.call else m(*xs)


def _tol(case, ref):
    scale = max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1.0)
    tol = 64 * max(case.k, 8) * F32_U
    return tol, tol * scale


def _close(case, got, want, what):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = got.numpy()
    assert got.shape == want.shape, f"{what}: shape {got.shape} != torch's {want.shape}"
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    rtol, atol = _tol(case, want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _same_dtype(p, t):
    return getattr(pr, str(t.dtype).split(".")[-1]) is p.dtype


def _build_pair(case):
    torch.manual_seed(0)
    tm = case.build(tnn)
    pm = case.build(pnn)
    return tm, pm


def _materialize(case, tm, pm, rng):
    """Lazy modules are sized by one forward (under no_grad) before anything is compared."""
    if _is_lazy(tm):
        arrays = _make_inputs(case, rng)
        with torch.no_grad():
            _call(case, tm, _to_torch(arrays))
        with pr.no_grad():
            _call(case, pm, _to_pyrite(arrays))


def _code_reads(code, name):
    return name in code.co_names or any(
        _code_reads(c, name) for c in code.co_consts if inspect.iscode(c)
    )


@functools.lru_cache(maxsize=None)
def _class_reads_training(klass):
    """Whether a method of the torch class (or of a base below nn.Module) reads an attribute
    named `training` (self.training: the names its bytecode loads)."""
    for k in klass.__mro__:
        if k in (tnn.Module, object):
            break
        for f in vars(k).values():
            f = getattr(f, "__func__", f)
            if inspect.isfunction(f) and _code_reads(f.__code__, "training"):
                return True
    return False


def _reads_training(case):
    """Whether any module of the case may behave differently in eval()."""
    if case.id in OLDER_TORCH_CANNOT_BUILD:
        return False  # (its tests skip)
    return any(_class_reads_training(type(m)) for m in case.build(tnn).modules())


def _case(id_):
    if id_ in OLDER_TORCH_CANNOT_BUILD:
        pytest.skip(older_torch_reason(f"cannot build it: {OLDER_TORCH_CANNOT_BUILD[id_]}"))
    return CASES[ALL_IDS.index(id_)]


def assert_repr_matches(p, t):
    """repr(p) is torch's text, but for dtypes named as pyrite names them (ParameterList shows
    `pyrite.float32` where torch shows `torch.float32`)."""
    if IS_ORACLE:
        assert repr(p).replace("pyrite.", "torch.") == repr(t)
    else:  # torch < 2.13 words some extra_repr fields differently (LayerNorm's bias=...)
        assert repr(p).split("(")[0] == repr(t).split("(")[0]


# ---- 1 and 4: structure and repr ---------------------------------------------------------------
@pytest.mark.parametrize("id_", ALL_IDS)
def test_structure_and_repr(id_, rng):
    case = _case(id_)
    tm, pm = _build_pair(case)
    if not _is_lazy(tm):  # a lazy module's repr before its first call has no sizes in torch
        assert_repr_matches(pm, tm)
    _materialize(case, tm, pm, rng)
    assert_repr_matches(pm, tm)
    tsd, psd = tm.state_dict(), pm.state_dict()
    assert list(psd) == list(tsd)
    assert dict(psd._metadata) == dict(tsd._metadata)  # each module's version, as saved
    for k in tsd:
        assert tuple(psd[k].shape) == tuple(tsd[k].shape), k
        assert _same_dtype(psd[k], tsd[k]), (k, psd[k].dtype, tsd[k].dtype)
    assert [n for n, _ in pm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in pm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    assert [(n, type(m).__name__) for n, m in pm.named_modules()] == [
        (n, type(m).__name__) for n, m in tm.named_modules()
    ]
    assert len(list(pm.parameters())) == len(list(tm.parameters()))
    for (n, p), (_, t) in zip(pm.named_parameters(), tm.named_parameters()):
        assert p.requires_grad == t.requires_grad, n
        assert isinstance(p, pnn.Parameter), n


# ---- 2 and 3: forward, gradients, buffers ----------------------------------------------------
def _has_fast_path(case):
    """Whether torch may take an inference fast path for the case (eval under no_grad): its
    native attention and the nested-tensor encoder."""
    kinds = (tnn.MultiheadAttention, tnn.TransformerEncoderLayer, tnn.TransformerEncoder)
    if case.id in OLDER_TORCH_CANNOT_BUILD:
        return False
    return any(isinstance(m, kinds) for m in case.build(tnn).modules())


def _forward_params():
    """(case, mode) pairs: train and train-strided where the train forward is deterministic,
    eval where some module of the case reads self.training (elsewhere it is train's forward),
    infer where torch has an inference fast path."""
    out = []
    for c in CASES:
        modes = (["train"] + ["train-strided"] * c.strided if c.train else []) + (
            ["eval"] if _reads_training(c) else []
        )
        if _has_fast_path(c):
            modes.append("infer")
        out += [pytest.param(c.id, m, id=f"{c.id}-{m}") for m in modes]
    return out


@pytest.mark.parametrize("id_,mode", _forward_params())
def test_forward_backward_buffers(id_, mode, rng):
    """`train-strided` feeds every input as a non-contiguous view of its leaf; `infer` is eval
    under no_grad (where torch takes its inference fast paths: the native attention, the
    nested-tensor encoder)."""
    case = _case(id_)
    tm, pm = _build_pair(case)
    _materialize(case, tm, pm, rng)
    pm.load_state_dict(tm.state_dict())  # torch tensors are accepted as they are
    tm.train(mode.startswith("train"))
    pm.train(mode.startswith("train"))
    assert pm.training == tm.training
    arrays = _make_inputs(case, rng)
    strided = mode.endswith("strided")
    tleaves, txs = _tensors(torch, arrays, strided, case.contiguous)
    pleaves, pxs = _tensors(pr, arrays, strided, case.contiguous)
    infer = mode == "infer"
    with torch.no_grad() if infer else contextlib.nullcontext():
        touts = _flat(_call(case, tm, txs))
    with pr.no_grad() if infer else contextlib.nullcontext():
        pouts = _flat(_call(case, pm, pxs))
    assert len(pouts) == len(touts)
    for i, (p, t) in enumerate(zip(pouts, touts)):
        assert _same_dtype(p, t), (i, p.dtype, t.dtype)
        _close(case, p, t, f"output {i}")
    # 3: buffers (and parameters a forward may change, Embedding's max_norm) after the forward
    tsd, psd = tm.state_dict(), pm.state_dict()
    for k in tsd:
        _close(case, psd[k], tsd[k], f"state_dict[{k!r}] after the forward")
    if not case.grad or infer:
        return
    weights = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in touts]
    pairs = [(p, t, w) for p, t, w in zip(pouts, touts, weights) if t.requires_grad]
    assert [p.requires_grad for p, _, _ in pairs] == [True] * len(pairs)
    if not pairs:
        return
    sum(((t * torch.tensor(w)).sum() for _, t, w in pairs)).backward()
    sum(((p * pr.tensor(w)).sum() for p, _, w in pairs)).backward()
    for i, (p, t) in enumerate(zip(pleaves, tleaves)):
        if t.requires_grad:
            assert (p.grad is None) == (t.grad is None), f"input {i} grad"
            if t.grad is not None:
                _close(case, p.grad, t.grad, f"grad of input {i}")
    for (n, p), (_, t) in zip(pm.named_parameters(), tm.named_parameters()):
        assert (p.grad is None) == (t.grad is None), f"{n}.grad"
        if t.grad is not None:
            _close(case, p.grad, t.grad, f"grad of {n}")


# ---- 5: load_state_dict's errors and report --------------------------------------------------
def _load_error(m, sd, **kw):
    with pytest.raises(Exception) as info:
        m.load_state_dict(sd, **kw)
    return info.type, str(info.value).replace("pyrite.Size", "torch.Size")


_WITH_STATE = [c.id for c in CASES if (c.id in OLDER_TORCH_CANNOT_BUILD or list(c.build(tnn).state_dict())) and not c.id.startswith("Lazy")]  # fmt: skip


@pytest.mark.parametrize("id_", _WITH_STATE)
def test_load_state_dict_errors(id_):
    case = _case(id_)
    tm, pm = _build_pair(case)
    sd = tm.state_dict()
    keys = list(sd)
    # missing
    missing = {k: v for k, v in sd.items() if k != keys[0]}
    t_err = _load_error(tm, missing)
    assert _load_error(pm, missing) == t_err
    r_t, r_p = tm.load_state_dict(missing, strict=False), pm.load_state_dict(missing, strict=False)
    assert type(r_p).__name__ == type(r_t).__name__ and r_p._fields == r_t._fields
    assert (r_p.missing_keys, r_p.unexpected_keys) == (r_t.missing_keys, r_t.unexpected_keys)
    assert repr(r_p) == repr(r_t)
    # unexpected
    extra = dict(sd)
    extra["bogus.weight"] = torch.zeros(2)
    extra[keys[-1].rpartition(".")[0] + (".extra" if "." in keys[-1] else "extra")] = torch.ones(1)
    assert _load_error(pm, extra) == _load_error(tm, extra)
    r_t, r_p = tm.load_state_dict(extra, strict=False), pm.load_state_dict(extra, strict=False)
    assert (r_p.missing_keys, r_p.unexpected_keys) == (r_t.missing_keys, r_t.unexpected_keys)
    assert repr(r_p) == repr(r_t)
    # wrong shape (also with strict=False: shape errors are raised regardless)
    for strict in (True, False):
        bad = dict(sd)
        bad[keys[-1]] = torch.zeros(tuple(sd[keys[-1]].shape) + (2, 3))
        assert _load_error(pm, bad, strict=strict) == _load_error(tm, bad, strict=strict)
    # all keys matched
    r_t, r_p = tm.load_state_dict(sd), pm.load_state_dict(sd)
    assert repr(r_p) == repr(r_t)


def test_load_state_dict_from_numpy(rng):
    """A state_dict of numpy arrays loads as torch's tensors do."""
    tm, pm = _build_pair(_case("LSTM_proj"))
    pm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    _close(_case("LSTM_proj"), pm(pr.tensor(x))[0], tm(torch.tensor(x))[0], "output")


def test_every_shared_module_class_is_covered():
    """Every nn.Module class both torch.nn and pyrite.nn export has a case above (or is listed
    here with the reason it has none)."""
    no_case = {
        "Module": "the base class (every case exercises it)",
        "RNNBase": "the base of RNN/LSTM/GRU",
        "RNNCellBase": "the base of the cells",
        "DataParallel": "one device: a wrapper over the module",
        # (deprecated or legacy torch classes, against torch in tests/test_more_names.py)
        "Container": "torch's deprecated Module alias: test_more_names.py",
        "NLLLoss2d": "torch's deprecated NLLLoss alias: test_more_names.py",
        "CrossMapLRN2d": "legacy LRN with its own gradient: test_more_names.py",
    }
    shared = {
        n
        for n in dir(tnn)
        if inspect.isclass(getattr(tnn, n))
        and issubclass(getattr(tnn, n), tnn.Module)
        and hasattr(pnn, n)
    }
    covered = set()
    for c in CASES:  # (pyrite's module where an older torch cannot build the case)
        tm = c.build(pnn if c.id in OLDER_TORCH_CANNOT_BUILD else tnn)
        covered.update(type(m).__name__ for m in tm.modules())
    missing = sorted(shared - covered - set(no_case))
    assert not missing, missing


def _shared_classes():
    return sorted(
        n
        for n in dir(tnn)
        if inspect.isclass(getattr(tnn, n))
        and issubclass(getattr(tnn, n), tnn.Module)
        and hasattr(pnn, n)
    )


def _params(fn):
    def default(p):
        d = p.default
        return getattr(d, "__name__", None) if callable(d) else repr(d)  # F.relu: by name

    sig = inspect.signature(fn)
    return [
        (p.name, p.kind, default(p)) for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD
    ]


@pytest.mark.parametrize("name", _shared_classes())
def test_constructor_and_forward_signatures(name):
    """torch's parameters of __init__ and forward (names, kinds, defaults), in order, open
    pyrite's: a port passing arguments by position or keyword means the same."""
    for meth in ("__init__", "forward"):
        tf, pf = getattr(getattr(tnn, name), meth), getattr(getattr(pnn, name), meth)
        if tf is getattr(tnn.Module, meth) or tf is object.__init__:
            continue
        want = _params(tf)
        got = _params(pf)
        assert got[: len(want)] == want, (meth, got, want)


_BAD_CONSTRUCTORS = [
    "nn.Hardtanh(1.0, 0.0)", "nn.Conv2d(3, 4, 3, groups=2)", "nn.Conv2d(2, 2, 3, padding='same', stride=2)",
    "nn.Conv2d(2, 2, 3, padding='foo')", "nn.ConvTranspose2d(2, 2, 3, padding_mode='reflect')",
    "nn.LSTM(3, 4, proj_size=4)", "nn.GRU(3, 4, proj_size=2)", "nn.RNN(3, 4, nonlinearity='gelu')",
    "nn.RNN(3, 4, dropout=1.5)", "nn.RNN(3, 4, num_layers=0)", "nn.Dropout(1.5)", "nn.AlphaDropout(1.1)",
    "nn.Embedding(5, 3, padding_idx=5)", "nn.MultiheadAttention(5, 2)",
    "nn.TransformerEncoderLayer(8, 2, activation='tanh')", "nn.GroupNorm(4, 6)",
    "nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[5, 3])", "nn.TripletMarginWithDistanceLoss(margin=0)",
    "nn.Linear(-1, 3)", "nn.Bilinear(2, 2, -1)",
    "nn.Conv1d(2, -2, 3)", "nn.Embedding(-1, 3)",
    "nn.FractionalMaxPool2d(2)", "nn.FractionalMaxPool2d(2, output_ratio=1.5)", "nn.Transformer(8, 3)",
]  # fmt: skip


@pytest.mark.parametrize("call", _BAD_CONSTRUCTORS)
def test_constructor_errors(call):
    """A constructor torch refuses raises the same type with torch's words."""
    errors = []
    for nn in (tnn, pnn):
        with pytest.raises(Exception) as info:
            eval(call, {"nn": nn})
        errors.append((info.type, str(info.value).replace("pyrite: ", "").replace("pyrite.", "torch.")))  # fmt: skip
    assert errors[1] == errors[0]


# ---- bfloat16 parameters: in-place ops of the f32-widening fallback (ops/fallback.py) ---------
_BF16_IN_PLACE = [
    "w.index_copy_(0, lib.tensor([1]), lib.full((1, 4), 0.5).to(w.dtype))",
    "w.index_fill_(0, lib.tensor([1]), 0.5)",
    "w.index_add_(0, lib.tensor([1, 1]), lib.full((2, 4), 0.5).to(w.dtype))",
    "w.scatter_(0, lib.tensor([[1, 2, 1, 1]]), lib.full((1, 4), 0.5).to(w.dtype))",
    "w.__setitem__(lib.tensor([1, 2]), 0.5)",
    "w.__setitem__(w > 1.5, 0.5)",
    "w.masked_fill_(w > 1.5, 0.5)",
    "w.cumsum_(0)",
]


@pytest.mark.parametrize("op", _BF16_IN_PLACE)
@pytest.mark.parametrize("kind", ["Parameter", "Buffer"])
def test_bf16_parameter_in_place_writes(kind, op):
    """An in-place op on a bf16 Parameter or Buffer writes it (the fallback ran on a widened
    copy and copied back only into plain Tensors: the write was lost)."""
    got = []
    for lib in (torch, pr):
        a = np.arange(28, dtype=np.float32).reshape(7, 4) / 10
        w = getattr(lib.nn, kind)(lib.tensor(a).to(lib.bfloat16))
        with lib.no_grad():
            eval(op, {"w": w, "lib": lib})
        got.append(w.detach().float().numpy())
    np.testing.assert_array_equal(got[1], got[0])


def test_bf16_embedding_max_norm_renormalises_the_table():
    """nn.Embedding(max_norm=...).bfloat16(): the looked-up rows of the weight are renormalised
    in place, as in f32 (they were left unchanged)."""
    torch.manual_seed(0)
    tm = tnn.Embedding(7, 4, max_norm=1.0, norm_type=1.5).bfloat16()
    pm = pnn.Embedding(7, 4, max_norm=1.0, norm_type=1.5).bfloat16()
    pm.load_state_dict(tm.state_dict())
    idx = [[1, 3, 1], [0, 6, 3]]
    out_t, out_p = tm(torch.tensor(idx)), pm(pr.tensor(idx))
    bf16_u = 2.0**-8
    for p, t in ((out_p, out_t), (pm.weight, tm.weight)):
        np.testing.assert_allclose(
            p.detach().float().numpy(), t.detach().float().numpy(), rtol=4 * bf16_u, atol=1e-6
        )


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rms_norm_default_eps_of_half_inputs(dtype, rng):
    """nn.RMSNorm(eps=None) on f16/bf16 input takes float32's machine epsilon, as torch 2.13's
    (its opmath type's): f16's own 2^-10 changed rows of 1e-3-scale values entirely."""
    a = (rng.standard_normal((3, 8)) * 1e-3).astype(np.float32)
    outs, grads = [], []
    for lib in (torch, pr):
        torch.manual_seed(0)
        m = lib.nn.RMSNorm(8).to(getattr(lib, dtype))
        x = lib.tensor(a).to(getattr(lib, dtype)).requires_grad_(True)
        y = m(x)
        y.float().sum().backward()
        outs.append(y.detach().float().numpy())
        grads.append(x.grad.float().numpy())
    u = 2.0**-11 if dtype == "float16" else 2.0**-8
    np.testing.assert_allclose(outs[1], outs[0], rtol=8 * u, atol=8 * u)
    np.testing.assert_allclose(grads[1], grads[0], rtol=0, atol=8 * u * np.abs(grads[0]).max())


# ---- bfloat16 modules: forward and gradients (ops without a bf16 kernel run widened) ----------
_BF16_IDS = [
    "Linear", "Conv2d_reflect", "BatchNorm2d", "LayerNorm_2d", "GRU", "Embedding_pad",
    "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "LPPool2d", "LPPool1d_p3", "MaxUnpool2d",
    "FractionalMaxPool3d", "Upsample_bilinear", "CrossEntropyLoss_mean",
]  # fmt: skip


@pytest.mark.parametrize("id_", _BF16_IDS)
def test_bf16_forward_backward(id_, rng):
    """The module in bfloat16 (module.bfloat16(), bf16 inputs): outputs and the gradients of
    inputs and parameters as torch's, within bf16 roundings. (Ops composed of others under the
    autograd guard lost their gradient path through the fallback's unrecorded f32 widening:
    pixel_shuffle, lp_pool, max_unpool ... raised 'not implemented' at backward.)"""
    case = _case(id_)
    tm, pm = _build_pair(case)
    pm.load_state_dict(tm.state_dict())
    tm.bfloat16()
    pm.bfloat16()
    arrays = _make_inputs(case, rng)
    txs, pxs = [], []
    for a, grad in arrays:
        for lib, xs in ((torch, txs), (pr, pxs)):
            t = lib.tensor(a)
            if t.is_floating_point():
                t = t.to(lib.bfloat16).requires_grad_(grad)
            xs.append(t)
    touts, pouts = _flat(_call(case, tm, txs)), _flat(_call(case, pm, pxs))
    bf16_u = 2.0**-8

    def close(p, t, what):
        p, t = p.detach(), t.detach()
        assert _same_dtype(p, t), what
        want = t.float().numpy() if t.is_floating_point() else t.numpy()
        got = p.float().numpy() if p.dtype.is_floating_point else p.numpy()
        scale = max(float(np.abs(want).max()) if want.size else 0.0, 1.0)
        tol = 16 * bf16_u  # a few bf16 roundings in series (the f32 work between is exact)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, err_msg=what)

    for i, (p, t) in enumerate(zip(pouts, touts)):
        close(p, t, f"output {i}")
    weights = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for t in touts]
    sum((t.float() * torch.tensor(w)).sum() for t, w in zip(touts, weights) if t.requires_grad).backward()  # fmt: skip
    sum((p.float() * pr.tensor(w)).sum() for p, t, w in zip(pouts, touts, weights) if t.requires_grad).backward()  # fmt: skip
    for i, (p, t) in enumerate(zip(pxs, txs)):
        if t.requires_grad:
            close(p.grad, t.grad, f"grad of input {i}")
    for (n, p), (_, t) in zip(pm.named_parameters(), tm.named_parameters()):
        close(p.grad, t.grad, f"grad of {n}")


@pytest.mark.parametrize("where", ["init", "utils", "utils.rnn", "utils.parametrize", "utils.parametrizations"])  # fmt: skip
def test_nn_namespaces_have_torch_names(where):
    """The public functions and classes of torch.nn.<where> exist in pyrite.nn.<where> (names
    torch imports there for its own use, typing helpers among them, are not its API)."""
    import importlib

    tmod = importlib.import_module(f"torch.nn.{where}")
    pmod = importlib.import_module(f"pyrite.nn.{where}")
    own = {
        n
        for n in dir(tmod)
        if not n.startswith("_")
        and (inspect.isfunction(getattr(tmod, n)) or inspect.isclass(getattr(tmod, n)))
        and getattr(getattr(tmod, n), "__module__", "").startswith("torch.nn")
    }
    internal = {"PackedSequence_", "bind", "Module"}  # utils.rnn's base tuple and helper
    missing = sorted(n for n in own - internal if not hasattr(pmod, n))
    assert not missing, missing


@pytest.mark.parametrize("strict", [True, False])
def test_instance_norm_refuses_unversioned_running_stats(strict):
    """A state_dict without version metadata (a plain dict, a converted file) with running
    stats for an InstanceNorm that tracks none raises torch's error, also with strict=False
    (pyrite ignored them there, and reported only 'Unexpected key(s)' when strict)."""
    errors = []
    for lib in (torch, pr):
        m = lib.nn.Sequential(lib.nn.InstanceNorm2d(3, affine=True))
        sd = {"0.weight": lib.ones(3), "0.bias": lib.zeros(3), "0.running_mean": lib.zeros(3)}
        with pytest.raises(RuntimeError) as info:
            m.load_state_dict(sd, strict=strict)
        errors.append(str(info.value))
    assert errors[1] == errors[0]


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq(mode, rng):
    """EmbeddingBag(scale_grad_by_freq=True): each looked-up row's gradient is divided by its
    index's count in the batch, as F.embedding's (pyrite ignored the flag). The reference is
    torch's embedding then the bag's reduction: torch 2.13's CPU embedding_bag divides by the
    count of another index ([[0, 0, 1]]: row 1 gets 1/2)."""
    idx = [[0, 1, 1, 4], [2, 1, 0, 1], [3, 3, 3, 3]]
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    g = rng.standard_normal((3, 3)).astype(np.float32)
    wt = torch.tensor(w0, requires_grad=True)
    e = TF_embedding(torch.tensor(idx), wt, scale_grad_by_freq=True)
    (e.sum(1) if mode == "sum" else e.mean(1)).backward(torch.tensor(g))
    pm = pnn.EmbeddingBag.from_pretrained(pr.tensor(w0), freeze=False, mode=mode, scale_grad_by_freq=True)  # fmt: skip
    pm(pr.tensor(idx)).backward(pr.tensor(g))
    np.testing.assert_allclose(pm.weight.grad.numpy(), wt.grad.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="max mode does not support scaling the gradient"):
        pnn.EmbeddingBag(5, 3, mode="max", scale_grad_by_freq=True)(pr.tensor(idx))
