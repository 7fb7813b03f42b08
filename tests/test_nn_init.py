"""nn.init and the layers' reset_parameters, checked statistically against the formulas:
sample mean and standard deviation within 5 standard errors of the distribution's (SE of the
mean σ/√n; of the std σ·√((κ-1)/4n), κ the kurtosis: 3 normal, 9/5 uniform), and bounds exact.
The generator differs from torch's, so values are never compared; gains and fans are."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn as pnn
from pyrite.nn import init

Z = 5.0  # standard errors allowed


def check_uniform(arr, a, b):
    x = np.asarray(arr, np.float64).ravel()
    n = x.size
    assert x.min() >= a and x.max() <= b
    sd = (b - a) / math.sqrt(12)
    assert abs(x.mean() - (a + b) / 2) < Z * sd / math.sqrt(n)
    assert abs(x.std() - sd) < Z * sd * math.sqrt((1.8 - 1) / (4 * n))


def check_normal(arr, mean, sd):
    x = np.asarray(arr, np.float64).ravel()
    n = x.size
    assert abs(x.mean() - mean) < Z * sd / math.sqrt(n)
    assert abs(x.std() - sd) < Z * sd * math.sqrt((3 - 1) / (4 * n))


def param(*shape):
    return pnn.Parameter(pr.empty(*shape))


@pytest.mark.parametrize(
    "nl,param_",
    [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
     ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)],
)  # fmt: skip
def test_calculate_gain_matches_torch(nl, param_):
    assert init.calculate_gain(nl, param_) == torch.nn.init.calculate_gain(nl, param_)


def test_gain_and_fan_errors():
    with pytest.raises(ValueError, match="Unsupported nonlinearity foo"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(param(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(param(3, 4), mode="fan_avg")


@pytest.mark.parametrize("shape", [(7, 3), (6, 4, 3, 5), (2, 9, 7)])
def test_fans_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(
        param(*shape)
    ) == torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_uniform_normal_constant():
    p = param(300, 211)
    check_uniform(init.uniform_(p, -0.3, 0.7).detach().numpy(), -0.3, 0.7)
    check_normal(init.normal_(p, 0.5, 2.0).detach().numpy(), 0.5, 2.0)
    assert np.all(init.constant_(p, 0.25).detach().numpy() == 0.25)
    assert np.all(init.ones_(p).detach().numpy() == 1) and np.all(
        init.zeros_(p).detach().numpy() == 0
    )
    assert p.requires_grad  # in place, under no_grad: still the leaf it was


def test_xavier_and_kaiming():
    p = param(256, 100, 3)  # fan_in 300, fan_out 768
    fan_in, fan_out = 300, 768
    a = 1.7 * math.sqrt(6.0 / (fan_in + fan_out))
    check_uniform(init.xavier_uniform_(p, gain=1.7).detach().numpy(), -a, a)
    check_normal(init.xavier_normal_(p).detach().numpy(), 0, math.sqrt(2.0 / (fan_in + fan_out)))
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + 5)) / math.sqrt(fan_in)  # a=√5
    check_uniform(init.kaiming_uniform_(p, a=math.sqrt(5)).detach().numpy(), -bound, bound)
    sd = math.sqrt(2.0) / math.sqrt(fan_out)
    check_normal(
        init.kaiming_normal_(p, mode="fan_out", nonlinearity="relu").detach().numpy(), 0, sd
    )


def test_trunc_normal():
    p = param(400, 250)
    x = init.trunc_normal_(p, mean=0.2, std=0.5, a=-0.3, b=1.0).detach().numpy()
    assert x.min() >= -0.3 and x.max() <= 1.0
    # the truncated normal's mean and std (scipy-free closed form)
    al, be = (-0.3 - 0.2) / 0.5, (1.0 - 0.2) / 0.5
    phi = lambda t: math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda t: 0.5 * (1 + math.erf(t / math.sqrt(2)))  # noqa: E731
    zz = cdf(be) - cdf(al)
    mean = 0.2 + 0.5 * (phi(al) - phi(be)) / zz
    var = 0.25 * (1 + (al * phi(al) - be * phi(be)) / zz - ((phi(al) - phi(be)) / zz) ** 2)
    n = x.size
    assert abs(x.mean() - mean) < Z * math.sqrt(var / n)
    assert abs(x.std() - math.sqrt(var)) < Z * math.sqrt(var) * math.sqrt(2 / (4 * n))


@pytest.mark.parametrize("shape", [(7, 4), (3, 8), (4, 2, 3)])
def test_orthogonal(shape):
    p = param(*shape)
    init.orthogonal_(p, gain=2.0)
    m = p.detach().numpy().reshape(shape[0], -1) / 2.0
    small = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(small, np.eye(small.shape[0]), atol=1e-5)


def test_eye_and_dirac():
    p = param(3, 5)
    np.testing.assert_array_equal(init.eye_(p).detach().numpy(), np.eye(3, 5))
    w = param(4, 2, 3, 3)
    init.dirac_(w, groups=2)
    ref = torch.nn.init.dirac_(torch.empty(4, 2, 3, 3), groups=2)
    np.testing.assert_array_equal(w.detach().numpy(), ref.numpy())
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(param(2, 2, 2))


def test_layers_initialise_as_torch():
    lin = pnn.Linear(300, 200)
    b = 1 / math.sqrt(300)
    check_uniform(lin.weight.detach().numpy(), -b, b)
    check_uniform(lin.bias.detach().numpy(), -b, b)
    conv = pnn.Conv2d(16, 40, 5, groups=2)  # fan_in = 8·25
    b = 1 / math.sqrt(8 * 25)
    check_uniform(conv.weight.detach().numpy(), -b, b)
    bil = pnn.Bilinear(20, 30, 40)
    check_uniform(bil.weight.detach().numpy(), -1 / math.sqrt(20), 1 / math.sqrt(20))
    emb = pnn.Embedding(500, 64, padding_idx=0)
    w = emb.weight.detach().numpy()
    check_normal(w[1:], 0.0, 1.0)
    assert np.all(w[0] == 0)
    mha = pnn.MultiheadAttention(96, 4)
    a = math.sqrt(6.0 / (96 + 288))  # xavier on (3E, E)
    check_uniform(mha.in_proj_weight.detach().numpy(), -a, a)
    assert np.all(mha.in_proj_bias.detach().numpy() == 0)
    assert np.all(mha.out_proj.bias.detach().numpy() == 0)
    bn = pnn.BatchNorm2d(7)
    assert np.all(bn.weight.detach().numpy() == 1) and np.all(bn.running_var.numpy() == 1)
    assert np.all(pnn.PReLU(3).weight.detach().numpy() == np.float32(0.25))
