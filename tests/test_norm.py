"""Normalisation against torch CPU (float64): batch_norm (training and eval, running statistics
updated in place), instance_norm, group_norm, local_response_norm, on 2-D to 5-D inputs,
strided inputs, optional weight/bias, float16, groups past 65,535 elements, and torch's errors.

Tolerance: a mean and variance over n elements (Welford, Chan's merge) are within ~n·u of their
magnitudes; the normalised value (x - mean)·rsqrt(var + eps) then carries about
(n + 8)·u·(|x| + |mean|)/std relative to 1, times |weight|, plus |bias|·u.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from tests.optable import EPS16, EPS32, assert_close

U = EPS32


def _t(a):
    return None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))


def _p(a):
    return None if a is None else pr.tensor(np.asarray(a, dtype=np.float32))


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _tol(x, n, w=None, b=None):
    x = np.asarray(x)
    spread = float(np.abs(x).max(initial=1.0)) / max(float(x.std()), 1e-3)
    wmax = 1.0 if w is None else float(np.abs(w).max(initial=1.0))
    bmax = 0.0 if b is None else float(np.abs(b).max(initial=0.0))
    return 4 * (n + 16) * U * spread * wmax + 4 * U * bmax


SHAPES = [(5, 3), (4, 3, 7), (2, 3, 5, 4), (2, 3, 2, 3, 4), (1, 7, 13)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("affine", [False, True])
def test_batch_norm_training_updates_running_stats(shape, affine, rng):
    C = shape[1]
    x = _f32(rng.standard_normal(shape) * 3 + 1.5)
    w = _f32(rng.standard_normal(C)) if affine else None
    b = _f32(rng.standard_normal(C)) if affine else None
    rm0, rv0 = _f32(rng.standard_normal(C)), _f32(rng.random(C) + 0.5)
    trm, trv = _t(rm0).clone(), _t(rv0).clone()  # torch updates them in place
    prm, prv = _p(rm0), _p(rv0)
    want = TF.batch_norm(_t(x), trm, trv, _t(w), _t(b), training=True, momentum=0.3, eps=1e-4)
    got = F.batch_norm(_p(x), prm, prv, _p(w), _p(b), training=True, momentum=0.3, eps=1e-4)
    n = x.size // C
    assert_close(got.numpy(), want.numpy(), _tol(x, n, w, b), 0, f"batch_norm {shape}")
    assert_close(prm.numpy(), trm.numpy(), 4 * (n + 8) * U * 5, 0, "running_mean")
    assert_close(prv.numpy(), trv.numpy(), 4 * (n + 8) * U * 20, 0, "running_var (unbiased)")
    # eval mode with the updated statistics
    want = TF.batch_norm(_t(x), trm, trv, _t(w), _t(b), training=False)
    got = F.batch_norm(_p(x), prm, prv, _p(w), _p(b), training=False)
    assert_close(got.numpy(), want.numpy(), _tol(x, 8, w, b), 0, "batch_norm eval")


def test_batch_norm_without_running_stats_and_strided(rng):
    x = _f32(rng.standard_normal((6, 5, 4, 3)))
    want = TF.batch_norm(_t(x), None, None, training=True)
    got = F.batch_norm(_p(x), None, None, training=True)
    assert_close(got.numpy(), want.numpy(), _tol(x, 72), 0, "no running stats")
    # channels-last storage: (N, H, W, C) viewed as (N, C, H, W)
    nhwc = pr.tensor(np.ascontiguousarray(x.transpose(0, 2, 3, 1)).astype(np.float32))
    got = F.batch_norm(nhwc.permute(0, 3, 1, 2), None, None, training=True)
    assert_close(got.numpy(), want.numpy(), _tol(x, 72), 0, "channels-last")
    rm, rv = pr.zeros(5), pr.ones(5)
    got = pr.batch_norm(_p(x), None, None, rm, rv, True, 0.1, 1e-5, True)  # torch.* order
    assert_close(got.numpy(), want.numpy(), _tol(x, 72), 0, "pr.batch_norm")
    assert abs(rm.numpy()).max() > 0


def test_batch_norm_float16(rng):
    x = (rng.standard_normal((4, 3, 9)) * 2 + 100).astype(np.float16)
    want = TF.batch_norm(torch.from_numpy(x).double(), None, None, training=True)
    got = F.batch_norm(pr.tensor(x), None, None, training=True)
    assert got.dtype is pr.float16
    # statistics in f32: only the f16 output rounding (and the input's) remain; a mean rounded
    # to f16 (100 ± 2^-4) would be off by ~0.03 std here
    assert_close(got.numpy().astype(np.float64), want.numpy(), 4 * EPS16 * 3, 0, "f16")


def test_batch_norm_errors():
    x = pr.randn(4, 3, 5)
    with pytest.raises(RuntimeError, match="running_mean must be defined in evaluation mode"):
        F.batch_norm(x, None, None)
    with pytest.raises(RuntimeError, match="running_var must be defined in evaluation mode"):
        F.batch_norm(x, pr.zeros(3), None)
    with pytest.raises(ValueError, match="both be None or neither"):
        F.batch_norm(x, pr.zeros(3), None, training=True)
    with pytest.raises(pr.ShapeError, match="running_mean should contain 3 elements not 5"):
        F.batch_norm(x, pr.zeros(5), pr.ones(5))
    with pytest.raises(pr.ShapeError, match="weight should contain 3 elements not 4"):
        F.batch_norm(x, pr.zeros(3), pr.ones(3), pr.ones(4))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(pr.randn(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="eps must be positive during training"):
        F.batch_norm(x, None, None, training=True, eps=0.0)
    with pytest.raises(TypeError, match="floating point"):
        F.batch_norm(pr.ones(4, 3, dtype=pr.int32), pr.zeros(3), pr.ones(3))
    assert F.batch_norm(pr.randn(0, 3), pr.zeros(3), pr.ones(3), training=True).shape == (0, 3)


# ---- instance_norm -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4, 7), (2, 3, 5, 6), (2, 2, 3, 2, 4)], ids=str)
def test_instance_norm(shape, rng):
    N, C = shape[:2]
    x = _f32(rng.standard_normal(shape) * 2 - 1)
    w, b = _f32(rng.standard_normal(C)), _f32(rng.standard_normal(C))
    rm0, rv0 = _f32(rng.standard_normal(C)), _f32(rng.random(C) + 0.5)
    n = x.size // (N * C)
    want = TF.instance_norm(_t(x))
    assert_close(F.instance_norm(_p(x)).numpy(), want.numpy(), _tol(x, n), 0, "plain")
    trm, trv, prm, prv = _t(rm0).clone(), _t(rv0).clone(), _p(rm0), _p(rv0)
    want = TF.instance_norm(_t(x), trm, trv, _t(w), _t(b), momentum=0.2)
    got = F.instance_norm(_p(x), prm, prv, _p(w), _p(b), momentum=0.2)
    assert_close(got.numpy(), want.numpy(), _tol(x, n, w, b), 0, "affine, running")
    assert_close(prm.numpy(), trm.numpy(), 4 * (n + 8) * U * 5, 0, "running_mean")
    assert_close(prv.numpy(), trv.numpy(), 4 * (n + 8) * U * 20, 0, "running_var")
    want = TF.instance_norm(_t(x), trm, trv, _t(w), _t(b), use_input_stats=False)
    got = F.instance_norm(_p(x), prm, prv, _p(w), _p(b), use_input_stats=False)
    assert_close(got.numpy(), want.numpy(), _tol(x, 8, w, b), 0, "running stats")
    got = pr.instance_norm(_p(x), None, None, None, None, True, 0.1, 1e-5, True)
    assert_close(got.numpy(), TF.instance_norm(_t(x)).numpy(), _tol(x, n), 0, "pr.instance_norm")


def test_instance_norm_errors():
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(pr.randn(2, 3))
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(pr.randn(2, 3, 1))
    with pytest.raises(RuntimeError, match="running_mean and running_var to be defined"):
        F.instance_norm(pr.randn(2, 3, 4), use_input_stats=False)


# ---- group_norm ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,G", [((2, 6, 4), 3), ((3, 4, 5, 7), 2), ((2, 6), 6), ((1, 8, 3, 3, 2), 4), ((5, 3), 1)]
)
def test_group_norm(shape, G, rng):
    C = shape[1]
    x = _f32(rng.standard_normal(shape) * 4 + 2)
    w, b = _f32(rng.standard_normal(C)), _f32(rng.standard_normal(C))
    n = x.size // (shape[0] * G)
    for kw in ({}, {"weight": w}, {"weight": w, "bias": b}, {"eps": 0.1}):
        tkw = {k: (_t(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        pkw = {k: (_p(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
        want = TF.group_norm(_t(x), G, **tkw)
        got = F.group_norm(_p(x), G, **pkw)
        assert_close(got.numpy(), want.numpy(), _tol(x, n, w, b), 0, f"group_norm {list(kw)}")
    xt = pr.tensor(np.ascontiguousarray(np.swapaxes(x, 0, -1)).astype(np.float32))
    got = F.group_norm(xt.transpose(0, -1), G)
    assert_close(got.numpy(), TF.group_norm(_t(x), G).numpy(), _tol(x, n), 0, "strided")
    got = pr.group_norm(_p(x), G, _p(w), _p(b), 1e-5, True)
    want = TF.group_norm(_t(x), G, _t(w), _t(b))
    assert_close(got.numpy(), want.numpy(), _tol(x, n, w, b), 0, "pr.group_norm")


def test_group_norm_errors():
    with pytest.raises(pr.ShapeError, match="divisible by num_groups"):
        F.group_norm(pr.randn(2, 6, 4), 4)
    with pytest.raises(pr.ShapeError, match="Expected weight to be a vector of size equal"):
        F.group_norm(pr.randn(2, 6, 4), 3, pr.ones(5))
    with pytest.raises(pr.ShapeError, match="Expected at least 2 dimensions"):
        F.group_norm(pr.randn(6), 3)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.group_norm(pr.randn(1, 1), 1)


def test_norms_past_the_loop_budget(rng):
    """Groups of 2·3·111·113 = 75,258 (group_norm) and channels of 2·111·113 = 25,086 over 3
    channels (batch_norm, instance over 12,543): one invocation walking a group serially
    would pass lavapipe's 65,535 iterations; the reductions split it."""
    x = _f32(rng.standard_normal((2, 6, 111, 113)) * 2 + 3)
    want = TF.group_norm(_t(x), 2)
    got = F.group_norm(_p(x), 2)
    assert_close(got.numpy(), want.numpy(), _tol(x, 75_258), 0, "group_norm big")
    x = _f32(rng.standard_normal((6, 2, 120, 113)) - 1)  # 81,360 a channel
    rm, rv = pr.zeros(2), pr.ones(2)
    trm, trv = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    want = TF.batch_norm(_t(x), trm, trv, training=True)
    got = F.batch_norm(_p(x), rm, rv, training=True)
    assert_close(got.numpy(), want.numpy(), _tol(x, 81_360), 0, "batch_norm big")
    assert_close(rv.numpy(), trv.numpy(), 1e-4, 0, "running_var big")


# ---- local_response_norm -------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 7, 5), (2, 9, 4, 3), (1, 6, 2, 3, 4)], ids=str)
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_local_response_norm(shape, size, rng):
    x = _f32(rng.standard_normal(shape) * 3)
    for kw in ({}, {"alpha": 0.5, "beta": 0.6, "k": 2.0}):
        want = TF.local_response_norm(_t(x), size, **kw)
        got = F.local_response_norm(_p(x), size, **kw)
        # x² window means (size terms), then pow: exp2(β·log2(·)) ~ 8 ULP relative
        assert_close(got.numpy(), want.numpy(), 2.0**-120, (size + 24) * 2 * U, f"lrn {kw}")
    with pytest.raises(ValueError, match="Expected 3D or higher"):
        F.local_response_norm(pr.randn(2, 3), 2)


# ---- layer_norm / rms_norm / normalize (the existing row kernels) --------------------------
def test_layer_norm_rms_norm_normalize(rng):
    x = _f32(rng.standard_normal((3, 5, 17)))
    w, b = _f32(rng.standard_normal(17)), _f32(rng.standard_normal(17))
    assert_close(
        F.layer_norm(_p(x), (17,), _p(w), _p(b)).numpy(),
        TF.layer_norm(_t(x), (17,), _t(w), _t(b)).numpy(),
        _tol(x, 17, w, b),
        0,
        "ln",
    )
    assert_close(
        pr.layer_norm(_p(x), (5, 17), None, None, 1e-5, True).numpy(),
        torch.layer_norm(_t(x), (5, 17)).numpy(),
        _tol(x, 85),
        0,
        "pr.layer_norm",
    )
    assert_close(
        F.rms_norm(_p(x), (17,), _p(w)).numpy(),
        TF.rms_norm(_t(x), (17,), _t(w), eps=2.0**-23).numpy(),
        40 * U * 4,
        0,
        "rms",
    )
    for p, dim in ((2.0, 1), (1.0, -1), (float("inf"), 0)):
        assert_close(
            F.normalize(_p(x), p, dim).numpy(),
            TF.normalize(_t(x), p, dim).numpy(),
            64 * U,
            64 * U,
            f"normalize p={p}",
        )
    with pytest.raises(TypeError, match="floating point"):
        F.normalize(pr.ones(3, dtype=pr.int32))


def test_norms_under_a_tiny_loop_budget(rng, monkeypatch):
    """With the device's budget at 300 iterations every statistic takes the split reduction
    paths (ops/reduce.py plans against max_loop_iterations()); the results must not change."""
    from pyrite import backend

    monkeypatch.setattr(backend.current(), "_loop_budget", 300)
    x = _f32(rng.standard_normal((3, 4, 37, 11)) * 2 + 1)
    w, b = _f32(rng.standard_normal(4)), _f32(rng.standard_normal(4))
    assert_close(
        F.group_norm(_p(x), 2, _p(w), _p(b)).numpy(),
        TF.group_norm(_t(x), 2, _t(w), _t(b)).numpy(),
        _tol(x, 814, w, b),
        0,
        "gn",
    )
    rm, rv = pr.zeros(4), pr.ones(4)
    trm, trv = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64)
    assert_close(
        F.batch_norm(_p(x), rm, rv, _p(w), _p(b), training=True).numpy(),
        TF.batch_norm(_t(x), trm, trv, _t(w), _t(b), training=True).numpy(),
        _tol(x, 1221, w, b),
        0,
        "bn",
    )
    assert_close(rv.numpy(), trv.numpy(), 1e-5, 0, "running_var")
    assert_close(
        F.instance_norm(_p(x)).numpy(), TF.instance_norm(_t(x)).numpy(), _tol(x, 407), 0, "in"
    )
