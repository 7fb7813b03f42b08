"""pyrite.optim.lr_scheduler against torch.optim.lr_scheduler: the lr (and momentum) sequence
over 30 steps for each schedule, and state dicts that resume the same sequence. The schedules are
host arithmetic in double on both sides, so the sequences agree to the last bit but for the
order of a few operations (rtol 1e-12)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr

N = 30


def _lam(e):
    return 0.95**e


def _mul(e):
    return 0.9 if e % 3 else 1.0


SCHEDULES = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=_lam),
    "LambdaLR-per-group": lambda m, o: m.LambdaLR(o, lr_lambda=[_lam, lambda e: 1 / (e + 1)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=_mul),
    "StepLR": lambda m, o: m.StepLR(o, step_size=7, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 11, 11, 20], gamma=0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=11, eta_min=0.001),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=5, T_mult=2, eta_min=0.0005
    ),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=13),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.4, total_iters=6),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=17, power=2.0),
    "OneCycleLR-cos": lambda m, o: m.OneCycleLR(o, max_lr=[0.5, 0.05], total_steps=N + 1),
    "OneCycleLR-linear-3phase": lambda m, o: m.OneCycleLR(
        o, max_lr=0.3, epochs=4, steps_per_epoch=8, anneal_strategy="linear", three_phase=True
    ),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o,
        schedulers=[
            m.LinearLR(o, start_factor=0.1, total_iters=5),
            m.ExponentialLR(o, gamma=0.9),
            m.CosineAnnealingLR(o, T_max=7),
        ],
        milestones=[6, 17],
    ),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.93)]
    ),
}


def _optimizers(kind="SGD"):
    groups_pr = [
        {"params": [pr.tensor(np.ones(3, np.float32)).requires_grad_()]},
        {"params": [pr.tensor(np.ones(2, np.float32)).requires_grad_()], "lr": 0.01},
    ]
    groups_t = [
        {"params": [torch.ones(3, requires_grad=True)]},
        {"params": [torch.ones(2, requires_grad=True)], "lr": 0.01},
    ]
    if kind == "SGD":
        return pr.optim.SGD(groups_pr, lr=0.1, momentum=0.9), torch.optim.SGD(
            groups_t, lr=0.1, momentum=0.9
        )
    return pr.optim.Adam(groups_pr, lr=0.1), torch.optim.Adam(groups_t, lr=0.1)


def _record(opt, sched, n, metrics=None):
    out = []
    for i in range(n):
        opt.step()  # no gradients: nothing moves, but the order torch asks for is kept
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[i])
        g = opt.param_groups
        out.append(
            (
                list(sched.get_last_lr()),
                [x["lr"] for x in g],
                [x.get("momentum") for x in g],
                [x.get("betas") for x in g],
            )
        )
    return out


def _assert_same(a, b):
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        for u, v in zip(x, y):
            for p, q in zip(u, v):
                if p is None or q is None:
                    assert p is q, i
                else:
                    np.testing.assert_allclose(
                        np.asarray(p), np.asarray(q), rtol=1e-12, err_msg=f"step {i}"
                    )


# the optimizer matters only to OneCycleLR's momentum (Adam's beta1)
@pytest.mark.parametrize(
    "name,kind",
    [(n, "SGD") for n in SCHEDULES] + [(n, "Adam") for n in SCHEDULES if n.startswith("OneCycle")],
)
def test_sequence_matches_torch(name, kind):
    o_pr, o_t = _optimizers(kind)
    s_pr = SCHEDULES[name](pr.optim.lr_scheduler, o_pr)
    s_t = SCHEDULES[name](torch.optim.lr_scheduler, o_t)
    assert s_pr.get_last_lr() == pytest.approx(s_t.get_last_lr(), rel=1e-12)
    assert [g["initial_lr"] for g in o_pr.param_groups] == [
        g["initial_lr"] for g in o_t.param_groups
    ]
    assert getattr(s_pr, "last_epoch", None) == getattr(s_t, "last_epoch", None)
    if hasattr(s_t, "base_lrs"):
        assert s_pr.base_lrs == pytest.approx(s_t.base_lrs, rel=1e-12)
    n = N if not name.startswith("OneCycleLR-linear") else 31
    _assert_same(_record(o_pr, s_pr, n), _record(o_t, s_t, n))


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_state_dict_resumes(name):
    o_pr, o_t = _optimizers()
    s_pr = SCHEDULES[name](pr.optim.lr_scheduler, o_pr)
    s_t = SCHEDULES[name](torch.optim.lr_scheduler, o_t)
    _record(o_pr, s_pr, 10)
    _record(o_t, s_t, 10)
    sd = s_pr.state_dict()
    assert "optimizer" not in sd
    assert set(sd) == set(s_t.state_dict())
    # a fresh optimizer and schedule, resumed from the two state dicts
    o2, _ = _optimizers()
    o2.load_state_dict(o_pr.state_dict())
    s2 = SCHEDULES[name](pr.optim.lr_scheduler, o2)
    s2.load_state_dict(sd)
    o2.load_state_dict(o_pr.state_dict())  # (the lrs the schedule's constructor changed)
    assert s2.get_last_lr() == s_pr.get_last_lr()
    _assert_same(_record(o2, s2, 20), _record(o_t, s_t, 20))


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"mode": "max", "factor": 0.5, "patience": 2},
        {"threshold_mode": "abs", "threshold": 0.05, "patience": 1, "cooldown": 2},
        {"mode": "max", "threshold_mode": "abs", "patience": 0, "min_lr": [0.02, 0.001]},
        {"patience": 1, "eps": 0.05, "factor": 0.7},
    ],
)
def test_reduce_lr_on_plateau(kw, rng):
    # a noisy, plateauing metric; some steps as 0-d tensors (pyrite's, read once by step)
    metric = list(1.0 / (1 + np.arange(N) / 5) + rng.uniform(0, 0.1, N))
    o_pr, o_t = _optimizers()
    s_pr = pr.optim.lr_scheduler.ReduceLROnPlateau(o_pr, **kw)
    s_t = torch.optim.lr_scheduler.ReduceLROnPlateau(o_t, **kw)
    m_pr = [
        pr.tensor(np.float32(m)) if i % 4 == 0 else float(np.float32(m))
        for i, m in enumerate(metric)
    ]
    m_t = [float(np.float32(m)) for m in metric]
    a = _record(o_pr, s_pr, 15, m_pr)
    b = _record(o_t, s_t, 15, m_t)
    _assert_same(a, b)
    sd = s_pr.state_dict()
    assert set(sd) == set(s_t.state_dict())
    o2, _ = _optimizers()
    s2 = pr.optim.lr_scheduler.ReduceLROnPlateau(o2, **kw)
    o2.load_state_dict(o_pr.state_dict())
    s2.load_state_dict(sd)
    _assert_same(_record(o2, s2, 15, m_pr[15:]), _record(o_t, s_t, 15, m_t[15:]))
    if kw.get("mode") == "max":  # a falling metric in max mode: the lr must have dropped
        assert a[-1][1][0] < 0.1


def test_closed_form_with_epoch():
    o_pr, o_t = _optimizers()
    s_pr = pr.optim.lr_scheduler.StepLR(o_pr, step_size=3, gamma=0.5)
    s_t = torch.optim.lr_scheduler.StepLR(o_t, step_size=3, gamma=0.5)
    for e in (4, 9, 2):
        with pytest.warns(UserWarning, match="epoch parameter"):
            s_pr.step(e)
        s_t.step(e)
        assert s_pr.get_last_lr() == s_t.get_last_lr()
    w_pr = pr.optim.lr_scheduler.CosineAnnealingWarmRestarts(_optimizers()[0], T_0=3, T_mult=2)
    w_t = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(_optimizers()[1], T_0=3, T_mult=2)
    for e in (0.5, 4.25, 11, 2):
        w_pr.step(e)
        w_t.step(e)
        assert w_pr.get_last_lr() == pytest.approx(w_t.get_last_lr(), rel=1e-12)


def test_cosine_recursive_form_follows_outside_changes():
    """The recursive form carries a change made to the lr between steps (torch's behaviour;
    the closed form would forget it)."""
    o_pr, o_t = _optimizers()
    s_pr = pr.optim.lr_scheduler.CosineAnnealingLR(o_pr, T_max=10)
    s_t = torch.optim.lr_scheduler.CosineAnnealingLR(o_t, T_max=10)
    for i in range(9):  # (past T_max the restart branch adds base_lr terms back)
        if i == 4:
            for o in (o_pr, o_t):
                o.param_groups[0]["lr"] *= 0.5
        s_pr.step()
        s_t.step()
        assert s_pr.get_last_lr() == pytest.approx(s_t.get_last_lr(), rel=1e-12)
    assert not math.isclose(s_pr.get_last_lr()[0], s_pr._get_closed_form_lr()[0])


def test_errors():
    o, _ = _optimizers()
    lrs = pr.optim.lr_scheduler
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lrs.StepLR(object(), step_size=2)
    with pytest.raises(KeyError, match="initial_lr"):
        lrs.StepLR(_optimizers()[0], step_size=2, last_epoch=3)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        lrs.ReduceLROnPlateau(o, factor=1.5)
    with pytest.raises(ValueError, match="mode sideways is unknown"):
        lrs.ReduceLROnPlateau(o, mode="sideways")
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        lrs.LambdaLR(o, lr_lambda=[_lam])
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        lrs.SequentialLR(o, schedulers=[lrs.ExponentialLR(o, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau`"):
        lrs.ChainedScheduler([lrs.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="either total_steps OR"):
        lrs.OneCycleLR(o, max_lr=0.1)
    s = lrs.OneCycleLR(o, max_lr=0.1, total_steps=2)
    s.step()
    s.step()
    with pytest.raises(ValueError, match="Tried to step 3 times"):
        s.step()
