"""Ported training-script utilities (`import torch` spelled `pyrite`) against torch CPU: LR
schedules and their combinations, optimizer groups and state dicts, gradient clipping and
accumulation, parameter vectors, weight EMA, torch.utils.data, amp and train/eval switches.
Each test is a minimised real-script pattern, run step by step on fresh awkward inputs."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr


def _np(x):
    if hasattr(x, "detach"):
        return x.detach().numpy()
    return np.asarray(x)


def _close(p, t, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(p), _np(t), rtol=rtol, atol=atol)


def _twin_params(rng, shapes):
    """The same random values as a list of torch and a list of pyrite parameters."""
    vals = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    tp = [torch.nn.Parameter(torch.tensor(v)) for v in vals]
    pp = [pr.nn.Parameter(pr.tensor(v)) for v in vals]
    return tp, pp


def _same_weights(pmodel, tmodel):
    pmodel.load_state_dict({k: v.detach().numpy().copy() for k, v in tmodel.state_dict().items()})


def _groups_lrs(opt):
    return [g["lr"] for g in opt.param_groups]


def _run_schedule(make, n_steps, groups=2, metric=None, opt_cls="SGD", opt_kw=None):
    """Build the same optimizer + schedule in both libraries (make(L, opt) -> scheduler), step
    both n_steps times, and compare every group's lr (and momentum/betas) after each step."""
    opt_kw = opt_kw or {"lr": 0.1, "momentum": 0.9}
    out = []
    for L in (torch, pr):
        ps = [L.nn.Parameter(L.zeros(2)) for _ in range(groups)]
        opt = getattr(L.optim, opt_cls)([{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)], **opt_kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sched = make(L, opt)
            trace = [(_groups_lrs(opt), list(sched.get_last_lr()))]
            for i in range(n_steps):
                opt.step()
                if metric is None:
                    sched.step()
                else:
                    sched.step(metric[i])
                mom = [g.get("momentum", g.get("betas", (None,))[0]) for g in opt.param_groups]
                trace.append((_groups_lrs(opt), list(sched.get_last_lr()), mom))
        out.append(trace)
    for i, (t, p) in enumerate(zip(*out)):
        for a, b in zip(t, p):
            np.testing.assert_allclose(
                np.asarray(b, np.float64), np.asarray(a, np.float64), rtol=1e-12, atol=1e-15,
                err_msg=f"step {i}",
            )
    return out


# ---- LR schedules ----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("three_phase", [False, True])
def test_onecycle_strategies_and_phases(rng, strategy, three_phase):
    """OneCycleLR over its whole run, per-group max_lr, both anneal strategies, three_phase."""
    total = int(rng.integers(17, 60))
    pct = float(rng.uniform(0.1, 0.45))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.OneCycleLR(
            o, max_lr=[0.5, 0.03], total_steps=total, pct_start=pct, anneal_strategy=strategy,
            three_phase=three_phase, div_factor=7.0, final_div_factor=300.0,
        ),
        total - 1,
    )


def test_onecycle_adam_betas_and_epochs_form(rng):
    """OneCycleLR with epochs × steps_per_epoch cycling Adam's beta1."""
    epochs, spe = int(rng.integers(2, 5)), int(rng.integers(3, 9))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.OneCycleLR(
            o, max_lr=0.2, epochs=epochs, steps_per_epoch=spe
        ),
        epochs * spe - 1,
        opt_cls="AdamW",
        opt_kw={"lr": 1e-3},
    )


@pytest.mark.parametrize("T_mult", [1, 2, 3])
def test_cosine_warm_restarts_tmult(rng, T_mult):
    T0 = int(rng.integers(2, 6))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(
            o, T_0=T0, T_mult=T_mult, eta_min=1e-4
        ),
        int(rng.integers(40, 80)),
    )


def test_cosine_warm_restarts_fractional_epochs(rng):
    """The documented per-batch form: scheduler.step(epoch + i / iters)."""
    T0, iters = int(rng.integers(2, 5)), int(rng.integers(3, 7))
    out = []
    for L in (torch, pr):
        p = L.nn.Parameter(L.zeros(2))
        opt = L.optim.SGD([p], lr=0.3)
        s = L.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=T0, T_mult=2)
        tr = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in range(9):
                for i in range(iters):
                    opt.step()
                    s.step(epoch + i / iters)
                    tr.append((opt.param_groups[0]["lr"], s.last_epoch, s.T_i, s.T_cur))
        out.append(tr)
    np.testing.assert_allclose(np.array(out[1]), np.array(out[0]), rtol=1e-12, atol=1e-15)


def test_sequential_warmup_then_cosine(rng):
    """The usual warm-up: SequentialLR(LinearLR, CosineAnnealingLR), milestone = warm-up."""
    warm, total = int(rng.integers(2, 7)), int(rng.integers(20, 40))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.SequentialLR(
            o,
            [
                L.optim.lr_scheduler.LinearLR(o, start_factor=0.01, total_iters=warm),
                L.optim.lr_scheduler.CosineAnnealingLR(o, T_max=total - warm, eta_min=1e-5),
            ],
            milestones=[warm],
        ),
        total + 5,
    )


def test_sequential_three_schedules(rng):
    m1, m2 = int(rng.integers(2, 6)), int(rng.integers(8, 14))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.SequentialLR(
            o,
            [
                L.optim.lr_scheduler.ConstantLR(o, factor=0.25, total_iters=3),
                L.optim.lr_scheduler.ExponentialLR(o, gamma=0.9),
                L.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
            ],
            milestones=[m1, m2],
        ),
        30,
    )


def test_chained_scheduler(rng):
    k = int(rng.integers(2, 5))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.ChainedScheduler(
            [
                L.optim.lr_scheduler.ConstantLR(o, factor=0.1, total_iters=k),
                L.optim.lr_scheduler.ExponentialLR(o, gamma=0.93),
                L.optim.lr_scheduler.MultiStepLR(o, milestones=[4, 9, 9], gamma=0.5),
            ]
        ),
        25,
    )


def test_lambda_and_multiplicative(rng):
    warm = int(rng.integers(3, 9))

    def lam(e):
        return min(1.0, (e + 1) / warm) * 0.97**e

    _run_schedule(lambda L, o: L.optim.lr_scheduler.LambdaLR(o, [lam, lambda e: 1 / (1 + e)]), 20)
    _run_schedule(lambda L, o: L.optim.lr_scheduler.MultiplicativeLR(o, lambda e: 0.95), 20)


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("threshold_mode", ["rel", "abs"])
def test_reduce_on_plateau(rng, mode, threshold_mode):
    n = 60
    patience, cooldown = int(rng.integers(0, 4)), int(rng.integers(0, 3))
    metric = list(np.cumsum(rng.standard_normal(n) * 0.1) + 3.0)
    metric[10:20] = [metric[9]] * 10  # a true plateau
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(
            o, mode=mode, factor=0.5, patience=patience, threshold=0.01,
            threshold_mode=threshold_mode, cooldown=cooldown, min_lr=[1e-3, 0.02],
        ),
        n,
        metric=metric,
    )


def test_reduce_on_plateau_tensor_metric(rng):
    """A validation loss passed as a 0-d tensor (the usual `scheduler.step(val_loss)`)."""
    vals = rng.uniform(1, 2, 15).astype(np.float32)
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(o, patience=1),
        15,
        metric=[float(v) for v in vals],
    )
    out = []
    for L in (torch, pr):
        p = L.nn.Parameter(L.zeros(2))
        opt = L.optim.SGD([p], lr=0.3)
        s = L.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.3)
        for v in vals:
            s.step(L.tensor(v))
        out.append((opt.param_groups[0]["lr"], s.best, s.num_bad_epochs))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-7)


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_modes(rng, mode):
    up, down = int(rng.integers(2, 7)), int(rng.integers(2, 9))
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.CyclicLR(
            o, base_lr=[0.01, 0.001], max_lr=[0.1, 0.05], step_size_up=up, step_size_down=down,
            mode=mode, gamma=0.97,
        ),
        50,
    )


def test_cyclic_custom_scale_fn_and_adam(rng):
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.CyclicLR(
            o, base_lr=0.001, max_lr=0.01, step_size_up=4, scale_fn=lambda x: 0.9**x,
            scale_mode="iterations",
        ),
        30,
        opt_cls="Adam",
        opt_kw={"lr": 1e-3},
    )


def _resume(make, n_total, n_first, opt_cls="SGD", opt_kw=None, metric=None):
    """Train n_first steps, save optimizer and scheduler state dicts, build everything afresh,
    load, continue: the lr trace must equal the uninterrupted run's (torch's trace as oracle)."""
    opt_kw = opt_kw or {"lr": 0.1, "momentum": 0.9}

    def build(L):
        p = L.nn.Parameter(L.zeros(2))
        opt = getattr(L.optim, opt_cls)([p], **opt_kw)
        return p, opt, make(L, opt)

    traces = []
    for L in (torch, pr):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, opt, s = build(L)
            tr = []
            for i in range(n_first):
                opt.step()
                s.step() if metric is None else s.step(metric[i])
                tr.append(_groups_lrs(opt) + list(s.get_last_lr()))
            osd, ssd = copy.deepcopy(opt.state_dict()), copy.deepcopy(s.state_dict())
            _, opt, s = build(L)
            opt.load_state_dict(osd)
            s.load_state_dict(ssd)
            for i in range(n_first, n_total):
                opt.step()
                s.step() if metric is None else s.step(metric[i])
                tr.append(_groups_lrs(opt) + list(s.get_last_lr()))
        traces.append(tr)
    for i, (t, p) in enumerate(zip(*traces)):
        np.testing.assert_allclose(p, t, rtol=1e-12, atol=1e-15, err_msg=f"step {i}")


@pytest.mark.parametrize(
    "name",
    ["onecycle", "cyclic", "warm_restarts", "sequential", "chained", "lambda", "plateau", "poly"],
)
def test_scheduler_resume_mid_run(rng, name):
    n_total = int(rng.integers(25, 40))
    n_first = int(rng.integers(3, n_total - 3))
    metric = None
    S = "optim.lr_scheduler"

    def sch(L):
        return getattr(L.optim, "lr_scheduler")

    makes = {
        "onecycle": lambda L, o: sch(L).OneCycleLR(o, max_lr=0.4, total_steps=n_total + 1),
        "cyclic": lambda L, o: sch(L).CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="triangular2"),
        "warm_restarts": lambda L, o: sch(L).CosineAnnealingWarmRestarts(o, 3, T_mult=2),
        "sequential": lambda L, o: sch(L).SequentialLR(
            o,
            [sch(L).LinearLR(o, 0.1, total_iters=4), sch(L).CosineAnnealingLR(o, T_max=20)],
            milestones=[4],
        ),
        "chained": lambda L, o: sch(L).ChainedScheduler(
            [sch(L).StepLR(o, 3, 0.7), sch(L).ExponentialLR(o, 0.95)]
        ),
        "lambda": lambda L, o: sch(L).LambdaLR(o, lambda e: 1 / (1 + 0.1 * e)),
        "plateau": lambda L, o: sch(L).ReduceLROnPlateau(o, patience=1, cooldown=1),
        "poly": lambda L, o: sch(L).PolynomialLR(o, total_iters=15, power=2.0),
    }
    del S
    if name == "plateau":
        metric = list(rng.uniform(0, 1, n_total))
    _resume(makes[name], n_total, n_first, metric=metric)
