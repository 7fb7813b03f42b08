"""torch.amp as training scripts use it: GradScaler's scale dynamics, skipped steps and
unscaled gradients equal torch's CPU GradScaler step for step; autocast is a scope that
computes in float32 (pyrite/amp.py); torch.backends switches are accepted."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr


def _run(L, scaler_cls, w0, grads_scale, steps):
    w = L.tensor(w0.copy(), requires_grad=True)
    opt = L.optim.SGD([w], lr=0.1, momentum=0.9)
    scaler = scaler_cls(init_scale=8.0, growth_interval=3)
    scales, ws = [], []
    for k in range(steps):
        x = L.tensor(np.full(w0.shape, grads_scale[k], np.float32))
        with L.autocast("cpu" if L is torch else "cuda"):
            loss = (w * x).sum()
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        L.nn.utils.clip_grad_norm_([w], 100.0)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        ws.append(w.detach().numpy().copy())
    return scales, ws, scaler.state_dict()


def test_grad_scaler_matches_torch(rng):
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    # finite steps grow the scale every 3; an inf gradient (x = inf) skips the step, backs off
    xs = [0.5, -1.0, 2.0, 1.5, np.inf, 0.25, -0.75, 1.0, 3.0, np.nan, 0.5]
    t = _run(torch, lambda **k: torch.amp.GradScaler("cpu", **k), w0, xs, len(xs))
    p = _run(pr, lambda **k: pr.amp.GradScaler("cuda", **k), w0, xs, len(xs))
    assert p[0] == t[0]
    for a, b in zip(p[1], t[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert p[2] == t[2]


def test_grad_scaler_state_dict_and_errors():
    s = pr.amp.GradScaler(init_scale=4.0)
    s.load_state_dict(torch.amp.GradScaler("cpu", init_scale=32.0).state_dict())
    assert s.get_scale() == 32.0
    w = pr.tensor([1.0, 2.0], requires_grad=True)
    opt = pr.optim.SGD([w], lr=0.1)
    s.scale((w * w).sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])
    off = pr.amp.GradScaler(enabled=False)
    assert off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(ValueError, match="growth factor"):
        pr.amp.GradScaler(growth_factor=0.5)


def test_autocast_scope_and_backend_switches():
    assert not pr.amp.is_autocast_enabled()
    with pr.autocast("cuda", dtype=pr.bfloat16):
        assert pr.amp.is_autocast_enabled()
        y = pr.ones(3, 4) @ pr.ones(4, 2)
        assert y.dtype is pr.float32  # computed in float32 (pyrite/amp.py)
    assert not pr.amp.is_autocast_enabled()

    @pr.cuda.amp.autocast()
    def f():
        return pr.amp.is_autocast_enabled()

    assert f()
    pr.backends.cudnn.benchmark = True
    pr.backends.cuda.matmul.allow_tf32 = True
    pr.set_float32_matmul_precision("high")
    assert pr.get_float32_matmul_precision() == "high"
    pr.set_float32_matmul_precision("highest")
