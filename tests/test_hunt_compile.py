"""Compiled against eager, side by side over several calls with changing inputs: training steps
whose Python-side state (`p.grad`) or optimizer hyperparameters change between calls outside
the compiled function. Each case was a silently wrong replay."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F


def _model():
    pr.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))


def _data(i):
    r = np.random.default_rng(i)
    x = r.standard_normal((3, 4)).astype(np.float32)
    y = r.standard_normal((3, 2)).astype(np.float32)
    return pr.tensor(x), pr.tensor(y)


def _side_by_side(program):
    """program(compiled) -> list of tensors; eager's and compiled's must agree."""
    want, got = program(False), program(True)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        assert (a is None) == (b is None), i
        if a is not None:
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=str(i))


def test_gradient_accumulation_with_zero_grad_outside():
    """The step only calls backward; `opt.step(); opt.zero_grad()` run outside every second
    call. A replay ran no Python, so `p.grad` stayed None after the caller's zero_grad (the
    replay wrote the trace's gradient tensor, which no parameter held any more): the next
    `opt.step()` saw no gradients."""

    def program(compiled):
        m = _model()
        opt = pr.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

        def step(x, y):
            loss = F.mse_loss(m(x), y) / 2
            loss.backward()
            return loss

        f = pr.compile(step) if compiled else step
        out = []
        for i in range(8):
            out.append(f(*_data(i)))
            out += [p.grad.clone() for p in m.parameters()]
            if i % 2 == 1:
                opt.step()
                opt.zero_grad()
        if compiled:
            assert f.stats()["traces"] <= 3  # (8 calls: the rest replay)
        return out + list(m.parameters())

    _side_by_side(program)


def test_optimizer_step_every_other_call_by_a_flag():
    def program(compiled):
        m = _model()
        opt = pr.optim.AdamW(m.parameters(), lr=0.01)

        def step(x, y, last):
            loss = F.mse_loss(m(x), y) / 2
            loss.backward()
            if last:
                opt.step()
                opt.zero_grad()
            return loss

        f = pr.compile(step) if compiled else step
        out = [f(*_data(i), i % 2 == 1) for i in range(8)]
        return out + list(m.parameters()) + [p.grad for p in m.parameters()]

    _side_by_side(program)


def test_a_gradient_replaced_outside_is_read_not_the_traced_one():
    """A recording that accumulates into `p.grad` read the trace's gradient buffer; the caller
    replacing `.grad` with another tensor makes it trace again instead of reading the old one."""

    def program(compiled):
        m = _model()

        def step(x, y):
            F.mse_loss(m(x), y).backward()
            return m[0].weight.grad * 1

        f = pr.compile(step) if compiled else step
        out = []
        for i in range(5):
            out.append(f(*_data(i)))
            for p in m.parameters():
                p.grad = p.grad * 0.5
        return out

    _side_by_side(program)


@pytest.mark.parametrize(
    "opt_name,kw,key,value",
    [
        ("Adam", {"lr": 0.01}, "weight_decay", 0.1),
        ("SGD", {"lr": 0.05, "momentum": 0.9}, "weight_decay", 0.1),
        ("SGD", {"lr": 0.05, "momentum": 0.9}, "nesterov", True),
        ("SGD", {"lr": 0.05}, "maximize", True),
    ],
)
def test_a_hyperparameter_that_changes_the_update_rule(opt_name, kw, key, value):
    """`param_groups[0][key]` changed between calls from 0 / False: the fused update's kernel
    differs (not only its scalars), so the replay of the old rule was silently wrong."""

    def program(compiled):
        m = _model()
        opt = getattr(pr.optim, opt_name)(m.parameters(), **kw)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        f = pr.compile(step) if compiled else step
        out = []
        for i in range(6):
            if i == 3:
                opt.param_groups[0][key] = value
            out.append(f(*_data(i)))
        return out + list(m.parameters())

    _side_by_side(program)


def test_a_new_nonzero_hyperparameter_value_still_replays():
    """A weight decay moved from one nonzero value to another is a scalar: no new trace."""
    m = _model()
    opt = pr.optim.Adam(m.parameters(), lr=0.01, weight_decay=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    f = pr.compile(step)
    for i in range(5):
        opt.param_groups[0]["weight_decay"] = 0.1 * (i + 1)
        f(*_data(i))
    assert f.stats()["traces"] == 2  # (the first call, then the first with a .grad)


def test_compile_as_a_method_decorator():
    """`@pr.compile` on a Module's forward (torch.compile's spelling) binds the instance; each
    instance's parameters are its own."""

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        @pr.compile
        def forward(self, x):
            return self.lin(x) * 2

    pr.manual_seed(0)
    a, b = M(), M()
    with pr.no_grad():
        for i in range(3):
            x = pr.tensor(np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32))
            for m in (a, b):
                want = (m.lin(x) * 2).numpy()
                np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-6, atol=1e-6)
