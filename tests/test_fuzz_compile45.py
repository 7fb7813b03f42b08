"""Regressions found by scripts/fuzz_compile.py (session 45: `pr.compile` against eager pyrite over
training steps whose surroundings change between calls), and a quick run of the fuzzer."""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import pytest

import pyrite as pr
import pyrite.nn as nn
import pyrite.nn.functional as F
from tests import fuzzing

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _fuzzer():
    return fuzzing.load_script("fuzz_compile")


def _data(r):
    x = pr.tensor(r.standard_normal((2, 4)).astype(np.float32))
    y = pr.tensor(r.standard_normal((2, 3)).astype(np.float32))
    return x, y


def _compiled_matches_eager(program):
    """program(compiled) -> a list of arrays; the compiled run's equal eager's (to float32
    rounding: replays run the same kernels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = program(False), program(True)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7, err_msg=str(i))


def test_a_forward_compiled_beside_the_step_leaves_grad_alone():
    """A no_grad forward compiled beside the training step, its trace made while the step's
    first gradients were there: every replay of it set each parameter's `.grad` back to those
    (a replay restored the `.grad` of every watched parameter as its trace had found it, not
    only the ones the trace set), so `.grad` read after it was the first call's."""

    def program(compiled):
        pr.manual_seed(0)
        m = nn.Linear(4, 3)
        opt = pr.optim.SGD(m.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            return loss

        def predict(x):
            with pr.no_grad():
                return m(x)

        if compiled:
            step, predict = pr.compile(step), pr.compile(predict)
        r = np.random.default_rng(0)
        out = []
        for _ in range(4):
            x, y = _data(r)
            out.append(step(x, y).numpy())
            out.append(predict(x).numpy())
            out += [p.grad.numpy().copy() for p in m.parameters()]
        return out

    _compiled_matches_eager(program)


def test_a_compiled_module_under_no_grad_leaves_grad_alone():
    """The same through `pr.compile(model)`: its inference recording (no_grad) also put back the
    `.grad` its trace had found."""
    pr.manual_seed(0)
    m = nn.Linear(4, 3)
    cm = pr.compile(m)
    r = np.random.default_rng(1)
    for i in range(4):
        x, y = _data(r)
        m.zero_grad()
        F.mse_loss(m(x), y).backward()
        want = m.bias.grad.numpy().copy()
        with pr.no_grad():
            cm(x)
        np.testing.assert_array_equal(m.bias.grad.numpy(), want, err_msg=str(i))


@pytest.mark.parametrize("seeds", ["1,8,20,34", "40:44"])
def test_fuzz_compile_seeds(seeds):
    """A few seeds of the fuzzer (8, 20 and 34 failed before the fix above)."""
    fz = _fuzzer()
    for seed in fz.parse_seeds(seeds):
        plan = fz.Plan(seed)
        status, detail = fz.check(plan)
        assert status != "fail", f"seed {seed}: {detail}\n{plan.text()}"


@pytest.mark.parametrize("opt_name", ["Adam", "AdamW"])
def test_a_parameter_frozen_for_some_calls_then_trained_again(opt_name):
    """Adam-style state keeps a step count per parameter. Frozen for some calls, a parameter's
    count falls behind the others'; unfrozen, the guards matched the first recording again,
    whose fused update gives all its parameters one set of bias corrections, and the replay
    raised "updated different parameters, or with different scalars" where eager trains on
    (which parameters share their step counts is a guard now: it traces again)."""

    def program(compiled):
        pr.manual_seed(0)
        m = nn.Sequential(nn.Linear(4, 5), nn.Linear(5, 3))
        opt = getattr(pr.optim, opt_name)(m.parameters(), lr=0.01)

        def step(x, y):
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        f = pr.compile(step) if compiled else step
        r = np.random.default_rng(2)
        out = []
        for i in range(8):
            if i in (2, 5):
                m[1].weight.requires_grad_(i == 5)
            out.append(f(*_data(r)).numpy())
        out += [p.numpy() for p in m.parameters()]
        out += [s["exp_avg_sq"].numpy() for s in opt.state.values()]
        return out

    _compiled_matches_eager(program)
