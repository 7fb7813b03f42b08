"""Regressions of the session-45 differential fuzz of optimizers and learning-rate schedules
(scripts/fuzz_optim.py) against torch 2.13 CPU, each minimized to a named parity test, plus a
small seeded run of the fuzz itself.

Found and fixed by it:
- a schedule whose lrs come from its base lrs (CosineAnnealingLR's, CosineAnnealingWarmRestarts',
  LambdaLR's, CyclicLR's, ...) stepped after `add_param_group` silently left the new group's lr
  as it was: torch zips groups and values strictly and raises ValueError
  (optim/lr_scheduler.py, `zip(..., strict=True)` where torch has it);
- SparseAdam stepped a parameter of shape (0, 3) into a ShapeError (`reshape(0, -1)` of its
  row mask): it now steps it as torch does (optim/sparse_adam.py `_row_mask`);
- `fused=True` with `foreach=True` (or with `differentiable=True`) was accepted by SGD, Adam,
  AdamW and Adagrad: torch raises RuntimeError (optim/optimizer.py `check_fused`);
- after `load_state_dict`, torch's defaults hold "differentiable" (its __setstate__), so a group
  added later has the key; SparseAdam's and LBFGS's did not (optim/optimizer.py).
The fuzz's other differences are documented choices or torch CPU bugs (the script's docstring).
"""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")


def _t(T, a, grad=False):
    t = T.tensor(np.asarray(a, np.float32))
    return t.requires_grad_() if grad else t


# ---- strict zips in the schedules after add_param_group ----------------------------------------
@pytest.mark.parametrize(
    "make",
    [
        lambda S, opt: S.CosineAnnealingWarmRestarts(opt, T_0=3),
        lambda S, opt: S.CosineAnnealingLR(opt, T_max=2),
        lambda S, opt: S.LambdaLR(opt, lambda e: 0.9**e),
        lambda S, opt: S.MultiplicativeLR(opt, lambda e: 0.9),
        lambda S, opt: S.CyclicLR(opt, 0.01, 0.1, step_size_up=2, cycle_momentum=False),
        lambda S, opt: S.StepLR(opt, 1),  # (chainable from group["lr"]: steps the new group too)
    ],
    ids=["warm_restarts", "cosine", "lambda", "multiplicative", "cyclic", "steplr"],
)
def test_schedule_after_add_param_group_raises_where_torch_does(make, rng):
    a, b = rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (3,))

    def fn(T):
        p, q = _t(T, a, True), _t(T, b, True)
        opt = T.optim.SGD([p], lr=0.1)
        sched = make(T.optim.lr_scheduler, opt)
        opt.add_param_group({"params": [q], "lr": 0.05})
        for _ in range(3):
            opt.step()
            sched.step()
        return [g["lr"] for g in opt.param_groups]

    got = fuzzing.raises_alike(fn)
    if got[0] is None:
        np.testing.assert_allclose(fn(pr), fn(torch), rtol=1e-12)
    else:
        assert got == [ValueError, ValueError]


# ---- SparseAdam and a parameter with no rows --------------------------------------------------
def test_sparse_adam_steps_a_parameter_of_zero_rows(rng):
    w, g = rng.uniform(-1, 1, (4, 3)).astype("f4"), rng.normal(0, 1, (4, 3)).astype("f4")
    g[1] = 0
    out = []
    for T in (torch, pr):
        p, e = _t(T, w, True), _t(T, np.zeros((0, 3)), True)
        opt = T.optim.SparseAdam([p, e], lr=0.1)
        for _ in range(2):
            gp, ge = _t(T, g), _t(T, np.zeros((0, 3)))
            if T is torch:
                gp, ge = gp.to_sparse(sparse_dim=1), ge.to_sparse(sparse_dim=1)
            p.grad, e.grad = gp, ge
            opt.step()
        steps = [float(s["step"]) for s in opt.state_dict()["state"].values()]
        out.append((p.detach().numpy().copy(), tuple(e.shape), steps))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-6, atol=1e-7)
    assert out[1][1:] == out[0][1:]


# ---- fused with foreach / differentiable -------------------------------------------------------
@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adagrad"])
@pytest.mark.parametrize("flag", ["foreach", "differentiable"])
def test_fused_with_foreach_or_differentiable_is_refused(name, flag):
    def fn(T):
        p = _t(T, np.ones(3), True)
        getattr(T.optim, name)([p], lr=0.1, fused=True, **{flag: True})

    assert fuzzing.raises_alike(fn) == [RuntimeError, RuntimeError]
    p = _t(pr, np.ones(3), True)  # (fused alone, or with foreach=False, is accepted)
    getattr(pr.optim, name)([p], lr=0.1, fused=True, foreach=False)


# ---- "differentiable" in the defaults after load_state_dict ---------------------------------------
@pytest.mark.parametrize("name", ["SparseAdam", "LBFGS", "Adam"])
def test_group_added_after_load_state_dict_has_torchs_keys(name, rng):
    a, b = rng.uniform(-1, 1, (3,)), rng.uniform(-1, 1, (2,))
    keys = []
    for T in (torch, pr):
        p, q = _t(T, a, True), _t(T, b, True)
        opt = getattr(T.optim, name)([p], lr=0.1)
        opt.load_state_dict(opt.state_dict())
        opt.add_param_group({"params": [q]})
        keys.append((sorted(opt.defaults), sorted(opt.param_groups[1])))
    assert keys[1] == keys[0]


# ---- the fuzz itself, a small seeded run ---------------------------------------------------------
def _fuzz():
    return fuzzing.load_script("fuzz_optim")


def test_seeded_fuzz_of_optimizers_and_schedules_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 40)]
    fails = fuzzing.seeded_failures(fz, seeds)
    assert not fails, "\n".join(fails)
