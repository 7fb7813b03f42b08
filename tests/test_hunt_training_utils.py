"""Ported training-script utilities (`import torch` spelled `pyrite`) against torch CPU: LR
schedules and their combinations, optimizer groups and state dicts, gradient clipping and
accumulation, parameter vectors, weight EMA, torch.utils.data, amp and train/eval switches.
Each test is a minimised real-script pattern, run step by step on fresh awkward inputs."""

from __future__ import annotations

import collections
import copy
import functools
import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.oracle import OLDER_TORCH


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
        opt = getattr(L.optim, opt_cls)(
            [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)], **opt_kw
        )
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
                np.asarray(b, np.float64),
                np.asarray(a, np.float64),
                rtol=1e-12,
                atol=1e-15,
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
            o,
            max_lr=[0.5, 0.03],
            total_steps=total,
            pct_start=pct,
            anneal_strategy=strategy,
            three_phase=three_phase,
            div_factor=7.0,
            final_div_factor=300.0,
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
            o,
            mode=mode,
            factor=0.5,
            patience=patience,
            threshold=0.01,
            threshold_mode=threshold_mode,
            cooldown=cooldown,
            min_lr=[1e-3, 0.02],
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
            o,
            base_lr=[0.01, 0.001],
            max_lr=[0.1, 0.05],
            step_size_up=up,
            step_size_down=down,
            mode=mode,
            gamma=0.97,
        ),
        50,
    )


def test_cyclic_custom_scale_fn_and_adam(rng):
    _run_schedule(
        lambda L, o: L.optim.lr_scheduler.CyclicLR(
            o,
            base_lr=0.001,
            max_lr=0.01,
            step_size_up=4,
            scale_fn=lambda x: 0.9**x,
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


# ---- optimizers: groups, zero_grad, state dicts, accumulation --------------------------------


class _Net:
    """A small MLP with a LayerNorm, built in either library (bias and norm weights are the
    usual no-decay parameters)."""

    @staticmethod
    def make(L, d_in, d_h, d_out):
        return L.nn.Sequential(
            L.nn.Linear(d_in, d_h),
            L.nn.LayerNorm(d_h),
            L.nn.GELU(),
            L.nn.Linear(d_h, d_out),
        )


def _twin_nets(rng, d_in=7, d_h=13, d_out=5):
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _Net.make(torch, d_in, d_h, d_out)
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # LayerNorm's 1/0 made non-trivial
    pm = _Net.make(pr, d_in, d_h, d_out)
    _same_weights(pm, tm)
    return tm, pm


def _no_decay_groups(L, model, wd):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "bias" in n else decay).append(p)
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def _loss(L, model, x, y):
    return L.nn.functional.cross_entropy(model(L.tensor(x)), L.tensor(y))


def _compare_models(pm, tm, rtol=2e-4, atol=2e-5):
    for (n, p), (_, t) in zip(pm.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(_np(p), _np(t), rtol=rtol, atol=atol, err_msg=n)


def _batches(rng, n, b, d_in=7, classes=5):
    return [
        (rng.standard_normal((b, d_in)).astype(np.float32), rng.integers(0, classes, b))
        for _ in range(n)
    ]


@pytest.mark.parametrize(
    "opt_name,kw",
    [
        ("AdamW", {"lr": 3e-3, "betas": (0.8, 0.95)}),
        ("Adam", {"lr": 2e-3, "amsgrad": True}),
        ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
        ("RMSprop", {"lr": 1e-3, "momentum": 0.5, "centered": True}),
        ("Adagrad", {"lr": 0.05, "lr_decay": 0.01}),
        ("NAdam", {"lr": 2e-3}),
        ("RAdam", {"lr": 2e-3, "decoupled_weight_decay": True}),
    ],
)
def test_no_decay_groups_train(rng, opt_name, kw):
    """named_parameters filtered into decay / no-decay groups, a few steps of training."""
    tm, pm = _twin_nets(rng)
    wd = float(rng.uniform(0.01, 0.2))
    topt = getattr(torch.optim, opt_name)(_no_decay_groups(torch, tm, wd), **kw)
    popt = getattr(pr.optim, opt_name)(_no_decay_groups(pr, pm, wd), **kw)
    for x, y in _batches(rng, 6, int(rng.integers(3, 11))):
        for L, m, o in ((torch, tm, topt), (pr, pm, popt)):
            o.zero_grad()
            _loss(L, m, x, y).backward()
            o.step()
    _compare_models(pm, tm)


@pytest.mark.parametrize("opt_name", ["AdamW", "SGD", "Adam", "RMSprop"])
def test_optimizer_state_dict_resume_equals_uninterrupted(rng, opt_name):
    """Train k steps, save model + optimizer state dicts (deep copies, as a checkpoint would
    be), build everything afresh, load, continue: equals torch's uninterrupted run."""
    kw = {"lr": 5e-3, "weight_decay": 0.05}
    if opt_name == "SGD":
        kw.update(momentum=0.9, dampening=0.1)
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 8, int(rng.integers(2, 9)))
    k = int(rng.integers(1, 7))
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kw)
    for x, y in batches:
        topt.zero_grad()
        _loss(torch, tm, x, y).backward()
        topt.step()
    popt = getattr(pr.optim, opt_name)(pm.parameters(), **kw)
    for x, y in batches[:k]:
        popt.zero_grad()
        _loss(pr, pm, x, y).backward()
        popt.step()
    msd = copy.deepcopy(pm.state_dict())
    osd = copy.deepcopy(popt.state_dict())
    del pm, popt
    pm2 = _Net.make(pr, 7, 13, 5)
    pm2.load_state_dict(msd)
    popt2 = getattr(pr.optim, opt_name)(pm2.parameters(), **kw)
    popt2.load_state_dict(osd)
    for x, y in batches[k:]:
        popt2.zero_grad()
        _loss(pr, pm2, x, y).backward()
        popt2.step()
    _compare_models(pm2, tm)


def test_add_param_group_mid_training_unfreezes_backbone(rng):
    """Fine-tuning: the head trains first, then the backbone is unfrozen and added as a new
    group with its own lr (and a schedule over both groups continues)."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 9, int(rng.integers(2, 9)))
    switch = int(rng.integers(2, 6))
    for L, m in ((torch, tm), (pr, pm)):
        for p in m[0].parameters():
            p.requires_grad_(False)
        head = [p for n, p in m.named_parameters() if not n.startswith("0.")]
        opt = L.optim.AdamW(head, lr=1e-2, weight_decay=0.1)
        for i, (x, y) in enumerate(batches):
            if i == switch:
                m[0].requires_grad_(True)
                opt.add_param_group({"params": list(m[0].parameters()), "lr": 1e-3})
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
        assert len(opt.param_groups) == 2 and opt.param_groups[1]["weight_decay"] == 0.1
    _compare_models(pm, tm)


def test_zero_grad_set_to_none_false_keeps_decaying_unused_params(rng):
    """zero_grad(set_to_none=False) leaves zero gradients on parameters a step did not use,
    so weight decay and momentum keep moving them; set_to_none=True skips them."""
    for set_to_none in (False, True):
        tm, pm = _twin_nets(rng)
        extra_t = torch.nn.Parameter(torch.tensor(rng.standard_normal(4).astype(np.float32)))
        extra_p = pr.nn.Parameter(pr.tensor(extra_t.detach().numpy()))
        batches = _batches(rng, 5, 4)
        for L, m, e in ((torch, tm, extra_t), (pr, pm, extra_p)):
            opt = L.optim.SGD([*m.parameters(), e], lr=0.1, momentum=0.9, weight_decay=0.1)
            for i, (x, y) in enumerate(batches):
                opt.zero_grad(set_to_none=set_to_none)
                loss = _loss(L, m, x, y)
                if i < 2:
                    loss = loss + (e**2).sum()
                loss.backward()
                opt.step()
            if set_to_none:
                assert e.grad is None
            else:
                assert e.grad is not None and float(e.grad.abs().sum()) == 0.0
        _compare_models(pm, tm)
        _close(extra_p, extra_t, 1e-5, 1e-6)


@pytest.mark.parametrize("accum", [2, 3, 5])
def test_gradient_accumulation_equals_big_batch(rng, accum):
    """loss / accum over micro-batches, one step every accum: torch's trajectory, and the
    accumulated gradient equals the big batch's."""
    tm, pm = _twin_nets(rng)
    mb = int(rng.integers(1, 6))
    batches = _batches(rng, accum * 3, mb)
    for L, m in ((torch, tm), (pr, pm)):
        opt = L.optim.Adam(m.parameters(), lr=3e-3)
        for i, (x, y) in enumerate(batches):
            (_loss(L, m, x, y) / accum).backward()
            if (i + 1) % accum == 0:
                opt.step()
                opt.zero_grad()
    _compare_models(pm, tm)
    # the accumulated gradient vs one big batch, on pyrite alone
    xs = np.concatenate([b[0] for b in batches[:accum]])
    ys = np.concatenate([b[1] for b in batches[:accum]])
    pm.zero_grad()
    for x, y in batches[:accum]:
        (_loss(pr, pm, x, y) / accum).backward()
    acc = [p.grad.numpy().copy() for p in pm.parameters()]
    pm.zero_grad()
    _loss(pr, pm, xs, ys).backward()
    for a, p in zip(acc, pm.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-4, atol=1e-6)


# ---- clipping, parameter vectors, EMA ----------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, "inf", 1.0, 3.0, float("inf")])
def test_clip_grad_norm_types(rng, norm_type):
    tm, pm = _twin_nets(rng)
    ((x, y),) = _batches(rng, 1, int(rng.integers(3, 12)))
    for L, m in ((torch, tm), (pr, pm)):
        _loss(L, m, x, y).backward()
    tn = torch.nn.utils.get_total_norm([p.grad for p in tm.parameters()], norm_type)
    max_norm = float(tn) * float(rng.uniform(0.2, 0.9))  # clipping happens
    t_total = torch.nn.utils.clip_grad_norm_(tm.parameters(), max_norm, norm_type=norm_type)
    p_total = pr.nn.utils.clip_grad_norm_(pm.parameters(), max_norm, norm_type=norm_type)
    _close(p_total, t_total, 1e-5, 1e-7)
    assert tuple(p_total.shape) == ()
    for (n, p), t in zip(pm.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(_np(p.grad), _np(t.grad), rtol=1e-5, atol=1e-7, err_msg=n)
    # a max_norm above the norm leaves the gradients alone
    g0 = [_np(p.grad).copy() for p in pm.parameters()]
    pr.nn.utils.clip_grad_norm_(pm.parameters(), float(p_total) * 10, norm_type=norm_type)
    for g, p in zip(g0, pm.parameters()):
        np.testing.assert_allclose(_np(p.grad), g, rtol=1e-6)


def test_clip_grad_norm_nonfinite_and_generator(rng):
    """error_if_nonfinite raises RuntimeError on inf/nan as torch's; without it, the NaN
    norm is returned. A generator of parameters (model.parameters()) is consumed once."""
    vals = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,))]
    for bad in (np.inf, np.nan):
        res = []
        for L in (torch, pr):
            ps = [L.nn.Parameter(L.tensor(v)) for v in vals]
            g = vals[0].copy()
            g[1, 2] = bad
            ps[0].grad = L.tensor(g)
            ps[1].grad = L.tensor(vals[1])
            with pytest.raises(RuntimeError):
                L.nn.utils.clip_grad_norm_(ps, 1.0, error_if_nonfinite=True)
            total = L.nn.utils.clip_grad_norm_((p for p in ps), 1.0)
            res.append((float(total), _np(ps[1].grad).copy()))
        np.testing.assert_array_equal(np.isnan(res[1][0]), np.isnan(res[0][0]))
        np.testing.assert_allclose(res[1][1], res[0][1], equal_nan=True)


def test_clip_grad_value_and_single_tensor(rng):
    v = rng.standard_normal((6, 7)).astype(np.float32) * 3
    g = rng.standard_normal((6, 7)).astype(np.float32) * 3
    clip = float(rng.uniform(0.1, 2))
    out = []
    for L in (torch, pr):
        p = L.nn.Parameter(L.tensor(v))
        p.grad = L.tensor(g)
        L.nn.utils.clip_grad_value_(p, clip)
        q = L.nn.Parameter(L.tensor(v))
        q.grad = L.tensor(g)
        n = L.nn.utils.clip_grad_norm_(q, 1.5)
        out.append((_np(p.grad).copy(), _np(q.grad).copy(), float(n)))
    for a, b in zip(*out):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-7)


def test_parameters_to_vector_and_back(rng):
    """A flat-parameter trick (e.g. for a line search / evolution strategy): flatten, perturb,
    write back, forward again."""
    tm, pm = _twin_nets(rng)
    x = rng.standard_normal((4, 7)).astype(np.float32)
    tv = torch.nn.utils.parameters_to_vector(tm.parameters())
    pv = pr.nn.utils.parameters_to_vector(pm.parameters())
    _close(pv, tv, 0, 0)
    noise = rng.standard_normal(tv.numel()).astype(np.float32) * 0.01
    torch.nn.utils.vector_to_parameters(tv + torch.tensor(noise), tm.parameters())
    pr.nn.utils.vector_to_parameters(pv + pr.tensor(noise), pm.parameters())
    _compare_models(pm, tm, 0, 0)
    _close(pm(pr.tensor(x)), tm(torch.tensor(x)), 1e-5, 1e-6)
    # training after the write-back still works (the parameters are leaves with grads)
    for L, m in ((torch, tm), (pr, pm)):
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        m(L.tensor(x)).square().mean().backward()
        opt.step()
    _compare_models(pm, tm, 1e-5, 1e-6)


def test_weight_ema_under_no_grad(rng):
    """An EMA copy of the weights updated after every step with p.mul_(d).add_(q, alpha=1-d)
    under no_grad; the EMA model in eval gives torch's outputs."""
    tm, pm = _twin_nets(rng)
    decay = float(rng.uniform(0.9, 0.999))
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        ema = copy.deepcopy(m)
        for p in ema.parameters():
            p.requires_grad_(False)
        opt = L.optim.AdamW(m.parameters(), lr=1e-2)
        for x, y in _batches(np.random.default_rng(7), 5, 6):
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
            with L.no_grad():
                for pe, pm_ in zip(ema.parameters(), m.parameters()):
                    pe.mul_(decay).add_(pm_.detach(), alpha=1 - decay)
                for be, bm in zip(ema.buffers(), m.buffers()):
                    be.copy_(bm)
        ema.eval()
        xe = np.random.default_rng(8).standard_normal((3, 7)).astype(np.float32)
        res.append((ema, _np(ema(L.tensor(xe))).copy()))
    _compare_models(res[1][0], res[0][0])
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-4, atol=1e-5)
    assert all(not p.requires_grad for p in res[1][0].parameters())
    assert all(p.requires_grad for p in pm.parameters())


# ---- torch.utils.data --------------------------------------------------------------------------


def _data_lib(L):
    return L.utils.data


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_dataloader_tensordataset_batches_and_coverage(rng, drop_last, shuffle):
    """Batch shapes, number of batches, len(loader) and index coverage as torch's; a seeded
    generator makes the shuffle reproducible and two epochs differ."""
    n, bs = int(rng.integers(11, 60)), int(rng.integers(2, 9))
    X = rng.standard_normal((n, 3, 2)).astype(np.float32)
    ids = np.arange(n)
    runs = {}
    for L in (torch, pr):
        D = _data_lib(L)
        ds = D.TensorDataset(L.tensor(X), L.tensor(ids))
        g = L.Generator().manual_seed(1234)
        dl = D.DataLoader(ds, batch_size=bs, shuffle=shuffle, drop_last=drop_last, generator=g)
        epochs = []
        for _ in range(2):
            batches = [(tuple(x.shape), _np(i).tolist(), _np(x)) for x, i in dl]
            epochs.append(batches)
        runs[L.__name__] = (len(dl), epochs)
        for xb, ib in ((b[2], b[1]) for b in epochs[0]):
            np.testing.assert_array_equal(xb, X[ib])  # each sample's rows stay together
    (lt, et), (lp, ep) = runs["torch"], runs["pyrite"]
    assert lp == lt == len(ep[0])
    for e_t, e_p in zip(et, ep):
        assert [b[0] for b in e_p] == [b[0] for b in e_t]
        seen_t = sorted(i for b in e_t for i in b[1])
        seen_p = sorted(i for b in e_p for i in b[1])
        if drop_last and shuffle:
            assert len(seen_p) == len(seen_t) and len(set(seen_p)) == len(seen_p)
        else:
            assert seen_p == seen_t
        if not shuffle:
            assert [b[1] for b in e_p] == [b[1] for b in e_t]
    if shuffle:
        assert [b[1] for b in ep[0]] != [b[1] for b in ep[1]]
        # the same seed again gives the same order
        D = pr.utils.data
        ds = D.TensorDataset(pr.tensor(X), pr.tensor(ids))
        dl = D.DataLoader(ds, bs, shuffle=True, generator=pr.Generator().manual_seed(1234))
        again = [_np(i).tolist() for _, i in dl]
        assert again[: len(ep[0])] == [b[1] for b in ep[0]] or drop_last


class _DictDS:
    """A map-style dataset of dict samples mixing numpy arrays, Python numbers and strings."""

    def __init__(self, L, X, y):
        self.L, self.X, self.y = L, X, y

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return {
            "x": self.X[i],
            "label": int(self.y[i]),
            "w": float(self.X[i].sum()),
            "name": f"s{i}",
            "pair": (self.L.tensor(self.X[i, :2]), i),
        }


def test_dataloader_dict_samples_and_custom_collate(rng):
    """The default collate of dict samples (numpy arrays, ints, floats, strings, tuples), and a
    custom collate_fn that pads variable-length sequences and returns a tuple."""
    n, bs = int(rng.integers(7, 25)), int(rng.integers(2, 6))
    X = rng.standard_normal((n, 4)).astype(np.float32)
    y = rng.integers(0, 3, n)
    got = []
    for L in (torch, pr):
        D = _data_lib(L)
        Ds = type("DS", (D.Dataset,), dict(_DictDS.__dict__))
        dl = D.DataLoader(Ds(L, X, y), batch_size=bs)
        got.append(list(dl))
    for bt, bp in zip(*got):
        assert set(bp) == set(bt)
        _close(bp["x"], bt["x"], 0, 0)
        np.testing.assert_array_equal(_np(bp["label"]), _np(bt["label"]))
        _close(bp["w"], bt["w"], 1e-6, 1e-6)
        assert bp["name"] == bt["name"]
        assert isinstance(bp["pair"], list) and len(bp["pair"]) == 2
        _close(bp["pair"][0], bt["pair"][0], 0, 0)
        np.testing.assert_array_equal(_np(bp["pair"][1]), _np(bt["pair"][1]))
        assert bp["x"].dtype == pr.float32 and bp["label"].dtype == pr.int64

    seqs = [rng.standard_normal(int(rng.integers(1, 7))).astype(np.float32) for _ in range(n)]

    def make_collate(L):
        def collate(batch):
            lens = L.tensor([len(s) for s, _ in batch])
            padded = L.nn.utils.rnn.pad_sequence(
                [L.tensor(s) for s, _ in batch], batch_first=True, padding_value=-1.0
            )
            return padded, lens, L.tensor([t for _, t in batch])

        return collate

    out = []
    for L in (torch, pr):
        D = _data_lib(L)
        data = list(zip(seqs, y.tolist()))
        out.append(list(D.DataLoader(data, batch_size=bs, collate_fn=make_collate(L))))
    for bt, bp in zip(*out):
        for a, b in zip(bp, bt):
            _close(a, b, 0, 0)


@pytest.mark.parametrize("kind", ["lengths", "fractions"])
def test_random_split_lengths_and_fractions(rng, kind):
    n = int(rng.integers(10, 80))
    if kind == "lengths":
        a = int(rng.integers(1, n - 2))
        b = int(rng.integers(1, n - a))
        lengths = [a, b, n - a - b]
    else:
        f = float(rng.uniform(0.05, 0.6))
        lengths = [f, 0.3, 0.7 - f]
    sizes = []
    for L in (torch, pr):
        D = _data_lib(L)
        ds = D.TensorDataset(L.arange(n), L.arange(n) * 2)
        parts = D.random_split(ds, lengths, generator=L.Generator().manual_seed(3))
        sizes.append([len(p) for p in parts])
        got = sorted(int(p[i][0]) for p in parts for i in range(len(p)))
        assert got == list(range(n))
        for p in parts:
            for i in range(len(p)):
                assert int(p[i][1]) == 2 * int(p[i][0])
        # a Subset through a DataLoader, indices shuffled
        tl = D.DataLoader(parts[0], batch_size=4, shuffle=True)
        assert sorted(int(v) for xb, _ in tl for v in _np(xb)) == sorted(
            int(parts[0][i][0]) for i in range(len(parts[0]))
        )
    assert sizes[1] == sizes[0]


def test_subset_with_tensor_indices_and_concat(rng):
    """Subset(ds, torch.randperm(n)[:k]) (indices a tensor, as scripts often write) and a
    ConcatDataset of two TensorDatasets and a Subset, through a DataLoader."""
    n, k = int(rng.integers(12, 40)), int(rng.integers(3, 10))
    X = rng.standard_normal((n, 3)).astype(np.float32)
    perm = rng.permutation(n)[:k]
    out = []
    for L in (torch, pr):
        D = _data_lib(L)
        ds = D.TensorDataset(L.tensor(X))
        sub = D.Subset(ds, L.tensor(perm))
        a = [_np(b[0]) for b in D.DataLoader(sub, batch_size=4)]
        cat = D.ConcatDataset([ds, D.TensorDataset(L.tensor(X[:5] + 100)), sub])
        c = [_np(b[0]) for b in D.DataLoader(cat, batch_size=7)]
        last = _np(cat[-1][0])
        out.append((np.concatenate(a), np.concatenate(c), len(cat), last))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_samplers_semantics(rng):
    n = int(rng.integers(9, 30))
    bs = int(rng.integers(2, 6))
    for L in (torch, pr):
        D = _data_lib(L)
        seq = D.SequentialSampler(range(n))
        assert list(seq) == list(range(n)) and len(seq) == n
        for drop in (False, True):
            bsamp = D.BatchSampler(seq, batch_size=bs, drop_last=drop)
            tb = list(torch.utils.data.BatchSampler(range(n), bs, drop))
            assert list(bsamp) == tb and len(bsamp) == len(tb)
        # a DataLoader driven by a batch_sampler
        ds = D.TensorDataset(L.arange(n))
        dl = D.DataLoader(ds, batch_sampler=D.BatchSampler(seq, bs, False))
        assert [_np(b[0]).tolist() for b in dl] == list(
            torch.utils.data.BatchSampler(range(n), bs, False)
        )
        rs = D.RandomSampler(range(n), replacement=True, num_samples=3 * n)
        draws = list(rs)
        assert len(draws) == 3 * n == len(rs) and all(0 <= d < n for d in draws)
        rs = D.RandomSampler(range(n), num_samples=n + 3)
        draws = list(rs)
        assert len(draws) == n + 3 and sorted(set(draws)) == list(range(n))


def test_weighted_random_sampler_balances_classes(rng):
    """The class-balancing recipe: weight each sample by 1 / its class's count; the drawn
    classes come out about uniform, as torch's; without replacement every index once."""
    n = int(rng.integers(200, 400))
    y = (rng.uniform(size=n) < 0.1).astype(np.int64) + (rng.uniform(size=n) < 0.05)
    counts = np.bincount(y, minlength=3)
    w = 1.0 / counts[y]
    draws = 6000
    for L in (torch, pr):
        D = _data_lib(L)
        s = D.WeightedRandomSampler(L.tensor(w), num_samples=draws, replacement=True)
        idx = np.array(list(s))
        assert len(s) == draws and idx.min() >= 0 and idx.max() < n
        frac = np.bincount(y[idx], minlength=3) / draws
        np.testing.assert_allclose(frac, 1 / 3, atol=0.05)
        s = D.WeightedRandomSampler(w.tolist(), num_samples=n, replacement=False)
        assert sorted(s) == list(range(n))
        dl = D.DataLoader(
            D.TensorDataset(L.tensor(y)),
            batch_size=50,
            sampler=D.WeightedRandomSampler(w, 500, generator=L.Generator().manual_seed(0)),
        )
        assert len(dl) == 10 and sum(len(b[0]) for b in dl) == 500


# ---- amp, train/eval, freezing -----------------------------------------------------------------


def test_grad_scaler_loop_matches_torch_cpu_scaler(rng):
    """The AMP recipe: scale(loss).backward(), unscale_, clip, step, update, with an overflow
    step that must be skipped and back the scale off; growth after growth_interval. On this
    adapter autocast computes in float32, so torch's CPU scaler with autocast off is the
    oracle (scale trajectory, skipped steps, parameters)."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 9, int(rng.integers(2, 8)))
    blow_up = {int(rng.integers(1, 4)), 6}
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        dev = "cpu" if L is torch else "cuda"
        scaler = L.amp.GradScaler(dev, init_scale=2.0**10, growth_interval=2)
        opt = L.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        scales, norms = [], []
        for i, (x, y) in enumerate(batches):
            opt.zero_grad()
            with L.autocast(device_type=dev, enabled=L is not torch, dtype=L.float16):
                loss = _loss(L, m, x, y)
            if i in blow_up:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            n = L.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
            norms.append(float(n))
        res.append((scales, norms, scaler.state_dict()))
    assert res[1][0] == res[0][0]
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-4)
    for k in ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"):
        assert float(res[1][2][k]) == float(res[0][2][k]), k
    _compare_models(pm, tm)


def test_dropout_train_eval_switch(rng):
    """model.train()/eval() reaches nested Dropout; train zeroes about p and scales the rest by
    1/(1-p); eval is the identity; the flag is restored after a `with no_grad()` eval."""
    p = float(rng.uniform(0.2, 0.7))
    x = rng.standard_normal((64, 50)).astype(np.float32) + 3
    for L in (torch, pr):
        m = L.nn.Sequential(L.nn.Linear(50, 50), L.nn.Sequential(L.nn.Dropout(p)))
        m.eval()
        assert not m[1][0].training
        with L.no_grad():
            a = _np(m(L.tensor(x)))
            b = _np(m[0](L.tensor(x)))
        np.testing.assert_allclose(a, b, rtol=1e-6)
        m.train()
        assert m[1][0].training
        d = _np(m[1](L.tensor(x)))
        zero = d == 0
        assert abs(zero.mean() - p) < 0.03
        np.testing.assert_allclose(d[~zero], x[~zero] / (1 - p), rtol=1e-5)
        f = _np(L.nn.functional.dropout(L.tensor(x), p=p, training=False))
        np.testing.assert_array_equal(f, x)


@pytest.mark.parametrize("momentum", [0.1, None, 0.37])
def test_batchnorm_running_stats_train_eval(rng, momentum):
    """BatchNorm running stats over a few training batches (momentum, cumulative average with
    momentum=None), num_batches_tracked, eval with the running stats, and a frozen backbone
    whose BN still updates in train mode unless put in eval."""
    C = int(rng.integers(2, 7))
    xs = [
        (rng.standard_normal((int(rng.integers(2, 9)), C, 3)) * 2 + 1.5).astype(np.float32)
        for _ in range(4)
    ]
    res = []
    for L in (torch, pr):
        torch.manual_seed(0)
        m = L.nn.Sequential(L.nn.Conv1d(C, C, 1), L.nn.BatchNorm1d(C, momentum=momentum))
        res.append(m)
    _same_weights(res[1], res[0])
    for x in xs:
        for m, L in zip(res, (torch, pr)):
            m.train()
            m(L.tensor(x)).sum().backward()
    bt, bp = res[0][1], res[1][1]
    _close(bp.running_mean, bt.running_mean, 1e-5, 1e-6)
    _close(bp.running_var, bt.running_var, 1e-5, 1e-6)
    assert int(bp.num_batches_tracked) == int(bt.num_batches_tracked) == len(xs)
    assert set(res[1].state_dict()) == set(res[0].state_dict())
    xe = rng.standard_normal((5, C, 3)).astype(np.float32)
    outs = []
    for m, L in zip(res, (torch, pr)):
        m.eval()
        with L.no_grad():
            outs.append(_np(m(L.tensor(xe))))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-5)
    # freeze with requires_grad_(False): BN still tracks in train mode, not in eval
    for m, L in zip(res, (torch, pr)):
        m.requires_grad_(False)
        m.train()
        m(L.tensor(xs[0]))
        m[1].eval()
        m(L.tensor(xs[1]))
        assert all(not q.requires_grad for q in m.parameters())
    _close(bp.running_mean, bt.running_mean, 1e-5, 1e-6)
    assert int(bp.num_batches_tracked) == int(bt.num_batches_tracked)


def test_freeze_submodule_grads_and_optimizer(rng):
    """requires_grad_(False) on the first layer: it gets no .grad, an optimizer over
    filter(lambda p: p.requires_grad, ...) trains the rest as torch's, the frozen weights stay."""
    tm, pm = _twin_nets(rng)
    frozen = _np(pm[0].weight).copy()
    for L, m in ((torch, tm), (pr, pm)):
        m[0].requires_grad_(False)
        opt = L.optim.Adam(filter(lambda q: q.requires_grad, m.parameters()), lr=1e-2)
        for x, y in _batches(np.random.default_rng(5), 4, 6):
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
        assert m[0].weight.grad is None and m[3].weight.grad is not None
    np.testing.assert_array_equal(_np(pm[0].weight), frozen)
    _compare_models(pm, tm)


# ---- more schedules, optimizer edges, SWA, distributed sampler ---------------------------------


def test_cosine_annealing_past_t_max_and_closed_form_steps(rng):
    """CosineAnnealingLR stepped well past T_max (the recursive form climbs back up, as
    torch's), and step(epoch) with an explicit epoch (deprecated closed form) on StepLR,
    MultiStepLR, ExponentialLR, CosineAnnealingLR, LinearLR, ConstantLR."""
    T = int(rng.integers(2, 7))
    _run_schedule(lambda L, o: L.optim.lr_scheduler.CosineAnnealingLR(o, T, eta_min=0.01), 5 * T)
    epochs = [int(e) for e in rng.integers(0, 30, 12)]
    for name, kw in [
        ("StepLR", {"step_size": 4, "gamma": 0.5}),
        ("MultiStepLR", {"milestones": [3, 7, 7, 20], "gamma": 0.3}),
        ("ExponentialLR", {"gamma": 0.9}),
        ("CosineAnnealingLR", {"T_max": 9, "eta_min": 0.001}),
        ("LinearLR", {"start_factor": 0.2, "total_iters": 6}),
        ("ConstantLR", {"factor": 0.5, "total_iters": 6}),
        ("PolynomialLR", {"total_iters": 12, "power": 1.5}),
    ]:
        out = []
        for L in (torch, pr):
            p = L.nn.Parameter(L.zeros(1))
            o = L.optim.SGD([p], lr=0.2)
            s = getattr(L.optim.lr_scheduler, name)(o, **kw)
            tr = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for e in epochs:
                    o.step()
                    s.step(e)
                    tr.append((o.param_groups[0]["lr"], s.last_epoch))
            out.append(tr)
        np.testing.assert_allclose(out[1], out[0], rtol=1e-12, err_msg=name)


def test_two_schedulers_stepped_by_hand_and_manual_lr(rng):
    """A per-batch warm-up LambdaLR and a per-epoch StepLR on one optimizer, both stepped by
    the script (no ChainedScheduler); then a manual `group['lr'] = ...` override that the
    next optimizer step must use."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 4, 5)
    warm = int(rng.integers(2, 6))
    for L, m in ((torch, tm), (pr, pm)):
        opt = L.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s1 = L.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / warm))
            s2 = L.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
            for epoch in range(3):
                for x, y in batches:
                    opt.zero_grad()
                    _loss(L, m, x, y).backward()
                    opt.step()
                    s1.step()
                s2.step()
            for g in opt.param_groups:
                g["lr"] = 0.3
            opt.zero_grad()
            _loss(L, m, *batches[0]).backward()
            opt.step()
    _compare_models(pm, tm)


@pytest.mark.parametrize("opt_name", ["Adam", "SGD", "AdamW", "RMSprop", "Adagrad"])
def test_maximize_and_torch_state_dict_continues(rng, opt_name):
    """maximize=True, and a torch optimizer's state dict (tensors through numpy) loaded into
    pyrite mid-run: continuing there equals torch's uninterrupted run."""
    kw = {"lr": 1e-2, "weight_decay": 0.01, "maximize": True}
    if opt_name == "SGD":
        kw["momentum"] = 0.8
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 7, 5)
    k = int(rng.integers(1, 6))
    topt = getattr(torch.optim, opt_name)(tm.parameters(), **kw)
    for i, (x, y) in enumerate(batches):
        if i == k:
            sd = topt.state_dict()
            sd = {
                "state": {
                    pid: {n: (v.numpy().copy() if torch.is_tensor(v) else v) for n, v in s.items()}
                    for pid, s in sd["state"].items()
                },
                "param_groups": copy.deepcopy(sd["param_groups"]),
            }
            _same_weights(pm, tm)
            popt = getattr(pr.optim, opt_name)(pm.parameters(), **kw)
            popt.load_state_dict(sd)
        topt.zero_grad()
        (-_loss(torch, tm, x, y)).backward()
        topt.step()
        if i >= k:
            popt.zero_grad()
            (-_loss(pr, pm, x, y)).backward()
            popt.step()
    _compare_models(pm, tm)


def test_reduce_on_plateau_after_add_param_group(rng):
    """ReduceLROnPlateau made before add_param_group: the new group is reduced too (torch
    extends the default min_lr to it)."""
    metric = [1.0] * 12
    out = []
    for L in (torch, pr):
        a, b = L.nn.Parameter(L.zeros(2)), L.nn.Parameter(L.zeros(2))
        o = L.optim.SGD([a], lr=0.1)
        s = L.optim.lr_scheduler.ReduceLROnPlateau(o, patience=1, min_lr=1e-3)
        tr = []
        for i, v in enumerate(metric):
            if i == 3:
                o.add_param_group({"params": [b], "lr": 0.5})
            s.step(v)
            tr.append(_groups_lrs(o) + [None] * (2 - len(o.param_groups)))
        out.append(tr)
    assert out[1] == out[0]


def test_swa_averaged_model_swalr_update_bn(rng):
    """The SWA recipe: AveragedModel (equal weights, and an EMA with use_buffers), SWALR after
    a swa_start epoch, update_bn over a loader; the averaged model's eval output as torch's."""
    C = 4
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = torch.nn.Sequential(torch.nn.Linear(6, C), torch.nn.BatchNorm1d(C), torch.nn.Linear(C, 3))
    pm = pr.nn.Sequential(pr.nn.Linear(6, C), pr.nn.BatchNorm1d(C), pr.nn.Linear(C, 3))
    _same_weights(pm, tm)
    X = rng.standard_normal((24, 6)).astype(np.float32)
    Y = rng.integers(0, 3, 24)
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        SW = L.optim.swa_utils
        swa = SW.AveragedModel(m)
        ema = SW.AveragedModel(m, multi_avg_fn=SW.get_ema_multi_avg_fn(0.9), use_buffers=True)
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        sched = SW.SWALR(opt, swa_lr=0.02, anneal_epochs=3, anneal_strategy="cos")
        D = L.utils.data
        dl = D.DataLoader(D.TensorDataset(L.tensor(X), L.tensor(Y)), batch_size=8)
        lrs = []
        for epoch in range(6):
            for x, y in dl:
                opt.zero_grad()
                L.nn.functional.cross_entropy(m(x), y).backward()
                opt.step()
                ema.update_parameters(m)
            if epoch >= 2:
                swa.update_parameters(m)
                sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        SW.update_bn(dl, swa)
        swa.eval()
        ema.eval()
        with L.no_grad():
            xe = L.tensor(X[:5])
            res.append((lrs, _np(swa(xe)).copy(), _np(ema(xe)).copy(), int(swa.n_averaged)))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-12)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res[1][2], res[0][2], rtol=1e-4, atol=1e-5)
    assert res[1][3] == res[0][3]


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_shares(rng, drop_last, shuffle):
    n, R = int(rng.integers(5, 40)), int(rng.integers(2, 5))
    for epoch in (0, 3):
        for r in range(R):
            got = []
            for L in (torch, pr):
                s = L.utils.data.DistributedSampler(
                    range(n), num_replicas=R, rank=r, shuffle=shuffle, seed=11, drop_last=drop_last
                )
                s.set_epoch(epoch)
                got.append((list(s), len(s)))
            assert got[1] == got[0]


def test_dataloader_no_batching_iterable_and_seeded_global(rng):
    """batch_size=None (samples converted, not collated), an IterableDataset with drop_last,
    and pr.manual_seed fixing a shuffle that has no explicit generator."""
    n = int(rng.integers(7, 20))
    X = rng.standard_normal((n, 3)).astype(np.float32)
    out = []
    for L in (torch, pr):
        D = L.utils.data
        a = [_np(x) for x in D.DataLoader(list(X), batch_size=None)]

        class Stream(D.IterableDataset):
            def __iter__(self):
                for i in range(n):
                    yield {"x": X[i], "i": i}

        b = [
            (_np(d["x"]).shape, _np(d["i"]).tolist())
            for d in D.DataLoader(Stream(), 3, drop_last=True)
        ]
        out.append((np.stack(a), b))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    assert out[1][1] == out[0][1]
    orders = []
    for _ in range(2):
        pr.manual_seed(5)
        dl = pr.utils.data.DataLoader(pr.utils.data.TensorDataset(pr.arange(n)), 4, shuffle=True)
        orders.append([_np(b[0]).tolist() for b in dl])
    assert orders[0] == orders[1]


# ---- custom optimizers and schedules (a script's own subclasses) -------------------------------


def _custom_classes(L):
    class Lion(L.optim.Optimizer):
        """A script's own optimizer (Lion), its step count a tensor as torch's built-ins keep
        it, read with .item()."""

        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @L.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with L.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    state = self.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = L.zeros_like(p)
                        state["step"] = L.tensor(0.0)
                        state["count"] = 0
                    state["step"] += 1
                    state["count"] += 1
                    beta1, beta2 = group["betas"]
                    lr = group["lr"] * min(1.0, state["step"].item() / 3)
                    update = state["exp_avg"] * beta1 + p.grad * (1 - beta1)
                    p.add_(L.sign(update), alpha=-lr)
                    state["exp_avg"].mul_(beta2).add_(p.grad, alpha=1 - beta2)
            return loss

    class WarmupCosine(L.optim.lr_scheduler._LRScheduler):
        def __init__(self, optimizer, warmup, total, last_epoch=-1):
            self.warmup, self.total = warmup, total
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            if self.last_epoch < self.warmup:
                return [b * (self.last_epoch + 1) / self.warmup for b in self.base_lrs]
            t = (self.last_epoch - self.warmup) / max(1, self.total - self.warmup)
            return [b * 0.5 * (1 + math.cos(math.pi * t)) for b in self.base_lrs]

    return Lion, WarmupCosine


def test_custom_optimizer_and_scheduler_train_and_resume(rng):
    """A script's own Optimizer subclass (its own step) and _LRScheduler subclass: trains as
    torch's, no false "lr_scheduler.step() before optimizer.step()" warning (torch marks any
    subclass's step), and its state dict round trip keeps the state's types (the tensor step
    stayed a tensor and the int count an int: pyrite turned them into a float32 tensor / a
    Python number, so the resumed step's `.item()` raised AttributeError)."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 8, int(rng.integers(2, 7)))
    k = int(rng.integers(2, 6))
    lrs = []
    for L, m in ((torch, tm), (pr, pm)):
        Lion, WarmupCosine = _custom_classes(L)
        opt = Lion(m.parameters(), lr=3e-3, weight_decay=0.1)
        sched = WarmupCosine(opt, 3, len(batches))
        tr = []
        for i, (x, y) in enumerate(batches):
            if i == k:
                osd = copy.deepcopy(opt.state_dict())
                ssd = copy.deepcopy(sched.state_dict())
                st = osd["state"][0]
                assert L.is_tensor(st["step"]) and type(st["count"]) is int
                opt = Lion(m.parameters(), lr=1.0)
                sched = WarmupCosine(opt, 3, len(batches))
                opt.load_state_dict(osd)
                sched.load_state_dict(ssd)
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                sched.step()
            tr.append(sched.get_last_lr()[0])
        st = opt.state[next(iter(m.parameters()))]
        assert L.is_tensor(st["step"]) and type(st["count"]) is int
        lrs.append(tr)
    np.testing.assert_allclose(lrs[1], lrs[0], rtol=1e-12)
    _compare_models(pm, tm)


def test_step_hooks_run_for_custom_optimizer(rng):
    """register_step_pre_hook / register_step_post_hook on a script's own optimizer run around
    its step, as torch's (it wraps every subclass's step; pyrite ran them only inside its
    built-in step, so a custom optimizer's hooks never ran). A subclass of a built-in whose
    step calls super().step() runs them once (torch runs them once or twice, depending on
    whether a plain instance of the parent class was made earlier in the process)."""
    calls = {}
    for L in (torch, pr):
        Lion, _ = _custom_classes(L)
        log = []
        p = L.nn.Parameter(L.ones(3))
        opt = Lion([p], lr=0.1)
        opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
        opt.register_step_post_hook(lambda o, a, k: log.append("post"))
        for _ in range(2):
            p.grad = L.ones(3)
            opt.step()
        calls[L.__name__] = log
    assert calls["pyrite"] == calls["torch"] == ["pre", "post"] * 2

    class Adam2(pr.optim.Adam):
        def step(self, closure=None):
            return super().step(closure)

    log = []
    p = pr.nn.Parameter(pr.ones(3))
    opt = Adam2([p], lr=0.1)
    opt.register_step_pre_hook(lambda o, a, k: log.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: log.append("post"))
    p.grad = pr.ones(3)
    opt.step()
    assert log == ["pre", "post"]
    assert float(p[0]) == pytest.approx(0.9, rel=1e-6)


# ---- state-dict patterns: EMA through state_dict(), early-stopping snapshots, checkpoints -----


def _bn_net(L):
    # (BatchNorm first: a bias just before one has a zero gradient, and Adam turns its
    # rounding noise into full-size steps of either sign)
    return L.nn.Sequential(L.nn.BatchNorm1d(7), L.nn.Linear(7, 6), L.nn.Tanh(), L.nn.Linear(6, 5))


def _twin_bn_nets(rng):
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm, pm = _bn_net(torch), _bn_net(pr)
    _same_weights(pm, tm)
    return tm, pm


def test_state_dict_ema_and_best_snapshot(rng):
    """timm's ModelEmaV2 updates the EMA through state_dict() (its tensors alias the weights
    and buffers: ev.copy_(ev * d + (1 - d) * mv), integer buffers copied); early stopping keeps
    copy.deepcopy(model.state_dict()) (a copy: later steps do not reach it) and reloads it."""
    tm, pm = _twin_bn_nets(rng)
    d = float(rng.uniform(0.8, 0.99))
    batches = _batches(rng, 5, int(rng.integers(2, 9)))
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        ema = copy.deepcopy(m)
        opt = L.optim.AdamW(m.parameters(), lr=1e-2)
        alias = m.state_dict()
        best = None
        for i, (x, y) in enumerate(batches):
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
            with L.no_grad():
                msd = m.state_dict()
                for k, ev in ema.state_dict().items():
                    mv = msd[k].detach()
                    if ev.dtype.is_floating_point:
                        ev.copy_(ev * d + (1.0 - d) * mv)
                    else:
                        ev.copy_(mv)
            if i == 2:
                best = copy.deepcopy(m.state_dict())
        _close(alias["1.weight"], m[1].weight, 0, 0)  # state_dict() aliases the weights
        last = _np(m[1].weight).copy()
        m.load_state_dict(best)
        assert not np.array_equal(_np(m[1].weight), last)
        res.append((ema.state_dict(), m.state_dict()))
    for k in res[0][0]:
        _close(res[1][0][k], res[0][0][k], 2e-4, 2e-5)
        _close(res[1][1][k], res[0][1][k], 2e-4, 2e-5)


def test_checkpoint_save_load_resume_equals_uninterrupted(rng, tmp_path):
    """The usual checkpoint: {'epoch', 'model', 'optimizer', 'scheduler', 'scaler'} through
    pr.save / pr.load mid-run, everything rebuilt and loaded, training continued: equals torch's
    uninterrupted run (lr trace and weights)."""
    tm, pm = _twin_bn_nets(rng)
    batches = _batches(rng, 10, int(rng.integers(2, 9)))
    k = int(rng.integers(2, 8))
    total = len(batches)

    def build(L, m):
        opt = L.optim.AdamW(
            [
                {"params": [p for n, p in m.named_parameters() if p.ndim > 1]},
                {"params": [p for n, p in m.named_parameters() if p.ndim <= 1], "weight_decay": 0},
            ],
            lr=1e-3,
            weight_decay=0.05,
            betas=(0.9, 0.98),
        )
        sched = L.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-2, total_steps=total)
        dev = "cpu" if L is torch else "cuda"
        scaler = L.amp.GradScaler(dev, init_scale=256.0, growth_interval=3)
        return opt, sched, scaler

    def train_step(L, m, opt, sched, scaler, x, y):
        opt.zero_grad()
        scaler.scale(_loss(L, m, x, y)).backward()
        scaler.step(opt)
        scaler.update()
        sched.step()
        return sched.get_last_lr()

    tr_t = []
    opt, sched, scaler = build(torch, tm)
    for x, y in batches:
        tr_t.append(train_step(torch, tm, opt, sched, scaler, x, y))
    tr_p = []
    opt, sched, scaler = build(pr, pm)
    for x, y in batches[:k]:
        tr_p.append(train_step(pr, pm, opt, sched, scaler, x, y))
    path = tmp_path / "ckpt.pt"
    pr.save(
        {
            "epoch": k,
            "model": pm.state_dict(),
            "optimizer": opt.state_dict(),
            "scheduler": sched.state_dict(),
            "scaler": scaler.state_dict(),
        },
        path,
    )
    ck = pr.load(path)
    pm2 = _bn_net(pr)
    pm2.load_state_dict(ck["model"])
    opt, sched, scaler = build(pr, pm2)
    opt.load_state_dict(ck["optimizer"])
    sched.load_state_dict(ck["scheduler"])
    scaler.load_state_dict(ck["scaler"])
    assert ck["epoch"] == k
    for x, y in batches[k:]:
        tr_p.append(train_step(pr, pm2, opt, sched, scaler, x, y))
    np.testing.assert_allclose(tr_p, tr_t, rtol=1e-12)
    assert isinstance(opt.param_groups[0]["betas"], tuple)
    _compare_models(pm2, tm)


def test_grad_scaler_two_optimizers_gan_pattern(rng):
    """A GAN step: two losses, two optimizers, one scaler (scale/backward/step each, one
    update); an overflow in one optimizer's gradients skips only its step and backs off."""
    tm1, pm1 = _twin_nets(rng)
    tm2, pm2 = _twin_nets(rng, d_in=5, d_h=9, d_out=7)
    batches = _batches(rng, 5, 4)
    bad = int(rng.integers(1, 4))
    scales = []
    for L, g, dnet in ((torch, tm1, tm2), (pr, pm1, pm2)):
        dev = "cpu" if L is torch else "cuda"
        scaler = L.amp.GradScaler(dev, init_scale=64.0, growth_interval=2)
        og = L.optim.Adam(g.parameters(), lr=1e-2)
        od = L.optim.SGD(dnet.parameters(), lr=1e-2, momentum=0.9)
        tr = []
        for i, (x, y) in enumerate(batches):
            od.zero_grad()
            fake = g(L.tensor(x)).detach()
            ld = dnet(fake).square().mean()
            if i == bad:
                ld = ld * float("nan")
            scaler.scale(ld).backward()
            scaler.step(od)
            og.zero_grad()
            lg = -dnet(g(L.tensor(x))).mean()
            scaler.scale(lg).backward()
            scaler.step(og)
            scaler.update()
            tr.append(scaler.get_scale())
        scales.append(tr)
    assert scales[1] == scales[0]
    _compare_models(pm1, tm1)
    _compare_models(pm2, tm2)


def test_cpu_amp_autocast_spelling_trains_as_torch(rng):
    """A CPU training script's `with torch.cpu.amp.autocast(enabled=False):` (and
    torch.cpu.is_available()): pr.cpu was missing (AttributeError). The scope is entered as
    torch's (a FutureWarning for the deprecated spelling) and a step in it equals torch's."""
    tm, pm = _twin_nets(rng)
    ((x, y),) = _batches(rng, 1, int(rng.integers(2, 9)))
    for L, m in ((torch, tm), (pr, pm)):
        assert L.cpu.is_available()
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        with pytest.warns(FutureWarning):
            ctx = L.cpu.amp.autocast(enabled=False)
        with ctx:
            assert not L.is_autocast_enabled()
            loss = _loss(L, m, x, y)
        loss.backward()
        opt.step()
    _compare_models(pm, tm)
    with pytest.warns(FutureWarning):
        ctx = pr.cpu.amp.autocast(dtype=pr.bfloat16)
    with ctx:
        assert pr.is_autocast_enabled("cpu") and pr.get_autocast_dtype("cpu") == pr.bfloat16
        assert not pr.is_autocast_enabled()  # (None: "cuda", as torch's)


@pytest.mark.parametrize("half", ["float16", "bfloat16"])
def test_grad_scaler_scales_a_half_loss_in_float32(rng, half):
    """scaler.scale(loss) of a float16 loss (what an f16 autocast region returns): torch
    multiplies by its float32 scale tensor, so the scaled loss is float32; pyrite multiplied
    by a Python float and kept float16, so 2**16 times any loss above 1 was inf, every step
    was skipped and the scale backed off until it fit."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 4, int(rng.integers(2, 9)))
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        scaler = L.amp.GradScaler("cpu" if L is torch else "cuda")
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        tr = []
        for x, y in batches:
            opt.zero_grad()
            loss = _loss(L, m, x, y).to(getattr(L, half)) * 3
            scaled = scaler.scale(loss)
            assert scaled.dtype == L.float32
            tr.append(float(scaled))
            scaled.backward()
            scaler.step(opt)
            scaler.update()
            tr.append(scaler.get_scale())
        res.append(tr)
    np.testing.assert_allclose(res[1], res[0], rtol=1e-5)
    assert all(np.isfinite(res[1]))
    _compare_models(pm, tm, 1e-3, 1e-4)


def _lam(e, k=3):
    return 1.0 / (1 + e / k)


_TORCH_CKPT_SCHEDULES = {
    "multistep": lambda L, o: L.optim.lr_scheduler.MultiStepLR(o, [2, 5, 5, 7], 0.5),
    "onecycle": lambda L, o: L.optim.lr_scheduler.OneCycleLR(o, 0.5, total_steps=12),
    "cyclic": lambda L, o: L.optim.lr_scheduler.CyclicLR(o, 0.01, 0.1, 3),
    "plateau": lambda L, o: L.optim.lr_scheduler.ReduceLROnPlateau(o, patience=0),
    "sequential": lambda L, o: L.optim.lr_scheduler.SequentialLR(
        o,
        [
            L.optim.lr_scheduler.LinearLR(o, 0.2, total_iters=3),
            L.optim.lr_scheduler.MultiStepLR(o, [2, 4], 0.5),
        ],
        [3],
    ),
    "lambda_partial": lambda L, o: L.optim.lr_scheduler.LambdaLR(o, functools.partial(_lam, k=4)),
    "warm_restarts": lambda L, o: L.optim.lr_scheduler.CosineAnnealingWarmRestarts(o, 2, 2),
}


@pytest.mark.parametrize("name", list(_TORCH_CKPT_SCHEDULES))
def test_torch_checkpoint_with_scheduler_resumes_in_pyrite(rng, name):
    """A checkpoint torch.save'd by a torch run ({'opt', 'sched', 'w'}) loaded with pr.load
    and resumed in pyrite: the lr, Adam's beta1 and the weights follow torch's uninterrupted
    run. MultiStepLR's state holds its milestones as a collections.Counter, which
    torch.load(weights_only=True) admits and pr.load refused (UnpicklingError), so no torch
    checkpoint with a MultiStepLR (alone or inside SequentialLR) could be resumed."""
    import io

    mk = _TORCH_CKPT_SCHEDULES[name]
    k = int(rng.integers(2, 8))
    w0 = rng.standard_normal(3).astype(np.float32)
    metric = rng.uniform(0, 1, 10)
    traces = {}
    blob = None
    for L in (torch, pr):
        w = L.nn.Parameter(L.tensor(w0))
        o = L.optim.Adam([w], lr=0.1)
        s = mk(L, o)
        tr = []
        for i in range(10):
            if i == k:
                if L is torch:
                    buf = io.BytesIO()
                    torch.save({"o": o.state_dict(), "s": s.state_dict(), "w": w.detach()}, buf)
                    blob = buf.getvalue()
                else:
                    ck = pr.load(io.BytesIO(blob))
                    w = pr.nn.Parameter(ck["w"])
                    o = pr.optim.Adam([w], lr=0.1)
                    s = mk(pr, o)
                    o.load_state_dict(ck["o"])
                    s.load_state_dict(ck["s"])
            if L is pr and i < k:
                continue
            o.zero_grad()
            (w**2).sum().backward()
            o.step()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s.step(float(metric[i])) if name == "plateau" else s.step()
            tr.append([o.param_groups[0]["lr"], o.param_groups[0]["betas"][0], *_np(w).tolist()])
        traces[L.__name__] = tr
    np.testing.assert_allclose(traces["pyrite"], traces["torch"][k:], rtol=1e-5, atol=1e-7)


def test_pyrite_checkpoint_keeps_multistep_counter(rng, tmp_path):
    """pr.save / pr.load of a MultiStepLR state dict gives its milestones back as a Counter
    (they came back a plain dict, so the resumed schedule's step(epoch), whose closed form
    reads milestones.elements(), raised AttributeError)."""
    ms = sorted(int(m) for m in rng.integers(1, 12, 4))
    out = []
    for L in (torch, pr):
        w = L.nn.Parameter(L.zeros(2))
        o = L.optim.SGD([w], lr=0.3)
        s = L.optim.lr_scheduler.MultiStepLR(o, ms, 0.5)
        if L is pr:
            pr.save({"s": s.state_dict()}, tmp_path / "s.pt")
            s = L.optim.lr_scheduler.MultiStepLR(o, [1], 0.9)
            s.load_state_dict(pr.load(tmp_path / "s.pt")["s"])
            assert type(s.milestones) is type(collections.Counter())
        tr = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for e in (3, 7, 12, 5):
                o.step()
                s.step(e)
                tr.append(o.param_groups[0]["lr"])
        out.append(tr)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, float("inf"), 1.0])
def test_clip_grad_norm_bfloat16_returns_the_grads_dtype(rng, norm_type):
    """clip_grad_norm_ of a bfloat16 model: torch's total norm (and so its clip coefficient)
    is bfloat16; pyrite returned float32 and scaled by the unrounded coefficient. Mixed
    bfloat16/float32 gradients give float32, as torch's promotion. Values within bf16's
    rounding of torch's (pyrite sums in float32 and rounds once)."""
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(2, 9))), (int(rng.integers(1, 20)),)]
    gs = [(rng.standard_normal(s) * 3).astype(np.float32) for s in shapes]
    for dtypes in (("bfloat16", "bfloat16"), ("bfloat16", "float32")):
        out = []
        for L in (torch, pr):
            ps = []
            for g, dt in zip(gs, dtypes):
                p = L.nn.Parameter(L.zeros(g.shape, dtype=getattr(L, dt)))
                p.grad = L.tensor(g).to(getattr(L, dt))
                ps.append(p)
            n = L.nn.utils.clip_grad_norm_(ps, 0.5, norm_type=norm_type)
            out.append((str(n.dtype).split(".")[-1], float(n), [_np(p.grad.float()) for p in ps]))
        assert out[1][0] == out[0][0]
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=2**-7)
        for a, b in zip(out[1][2], out[0][2]):
            np.testing.assert_allclose(a, b, rtol=2**-6, atol=1e-6)


def test_grad_scaler_misuse_raises_as_torch(rng):
    """scaler.step(opt) twice before update() (a gradient-accumulation loop with the step in
    the wrong place) raises as torch's; pyrite stepped twice with the same gradients. And
    unscale_ after step raises, as torch's."""
    for L in (torch, pr):
        dev = "cpu" if L is torch else "cuda"
        w = L.nn.Parameter(L.tensor(rng.standard_normal(3).astype(np.float32)))
        opt = L.optim.SGD([w], lr=0.1)
        scaler = L.amp.GradScaler(dev)
        scaler.scale((w**2).sum()).backward()
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="already been called since the last update"):
            scaler.step(opt)
        with pytest.raises(RuntimeError, match="after step"):
            scaler.unscale_(opt)
        scaler.update()
        opt.zero_grad()
        scaler.scale((w**2).sum()).backward()
        scaler.unscale_(opt)
        with pytest.raises(RuntimeError, match="already been called"):
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()


_GROUP_CONFIGS = [
    (
        "SGD",
        {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "maximize": True},
        {"momentum": 0.5, "dampening": 0.3, "nesterov": False},
    ),
    (
        "RMSprop",
        {"lr": 1e-3, "alpha": 0.9, "centered": True, "momentum": 0.3, "weight_decay": 0.02},
        {"centered": False, "eps": 1e-4},
    ),
    (
        "Adagrad",
        {"lr": 0.05, "initial_accumulator_value": 0.3, "lr_decay": 0.05, "weight_decay": 0.01},
        {"eps": 1e-3},
    ),
    ("Adamax", {"lr": 2e-3, "betas": (0.8, 0.9), "weight_decay": 0.05}, {"betas": (0.5, 0.99)}),
    (
        "NAdam",
        {"lr": 2e-3, "momentum_decay": 0.01, "decoupled_weight_decay": True, "weight_decay": 0.1},
        {"decoupled_weight_decay": False},
    ),
    ("RAdam", {"lr": 2e-3, "weight_decay": 0.1}, {"decoupled_weight_decay": True}),
    ("Rprop", {"lr": 0.01, "etas": (0.3, 1.5), "step_sizes": (1e-4, 0.1)}, {"maximize": True}),
    ("ASGD", {"lr": 0.01, "t0": 2, "lambd": 0.01, "alpha": 0.6, "weight_decay": 0.01}, {"t0": 1e6}),
    ("Adadelta", {"lr": 0.9, "rho": 0.8, "weight_decay": 0.05}, {"maximize": True}),
    (
        "Adam",
        {"lr": 2e-3, "amsgrad": True, "weight_decay": 0.05, "maximize": True},
        {"amsgrad": False, "betas": (0.0, 0.5)},
    ),
    ("AdamW", {"lr": 2e-3, "amsgrad": True}, {"weight_decay": 0.0, "eps": 1e-2}),
]


@pytest.mark.parametrize("name,kw,g2", _GROUP_CONFIGS, ids=[c[0] for c in _GROUP_CONFIGS])
def test_param_groups_with_their_own_options(rng, name, kw, g2):
    """Two groups, the second overriding some of the defaults (nesterov off, amsgrad off,
    other betas/eps, maximize...), trained a dozen steps: torch's trajectory."""
    tm, pm = _twin_nets(rng)
    batches = _batches(rng, 12, int(rng.integers(2, 9)))
    for L, m in ((torch, tm), (pr, pm)):
        ps = list(m.parameters())
        opt = getattr(L.optim, name)([{"params": ps[:3]}, {"params": ps[3:], **g2}], **kw)
        for x, y in batches:
            opt.zero_grad()
            _loss(L, m, x, y).backward()
            opt.step()
    _compare_models(pm, tm, 1e-4, 1e-5)


@pytest.mark.parametrize("kind", ["spectral", "spectral_param", "weight_norm", "weight_norm_param"])
def test_normalised_layers_train_as_torch(rng, kind):
    """A GAN discriminator's spectral_norm (power iteration state in train mode, frozen in
    eval) and weight_norm, old and parametrization spellings, trained a few steps from torch's
    state dict (u, v included)."""
    X = rng.standard_normal((int(rng.integers(2, 9)), 5)).astype(np.float32)
    res = []
    sd = None
    n_out = int(rng.integers(2, 7))
    for L in (torch, pr):
        torch.manual_seed(0)
        lin = L.nn.Linear(5, n_out)
        U = L.nn.utils
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = {
                "spectral": lambda: U.spectral_norm(lin, n_power_iterations=2),
                "spectral_param": lambda: U.parametrizations.spectral_norm(lin),
                "weight_norm": lambda: U.weight_norm(lin, dim=0),
                "weight_norm_param": lambda: U.parametrizations.weight_norm(lin),
            }[kind]()
        if L is torch:
            sd = {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
        else:
            m.load_state_dict({k: pr.tensor(v) for k, v in sd.items()})
        opt = L.optim.SGD(m.parameters(), lr=0.1)
        outs = []
        for _ in range(3):
            m.train()
            opt.zero_grad()
            y = m(L.tensor(X))
            (y**2).sum().backward()
            opt.step()
            outs.append(_np(y).copy())
        m.eval()
        with L.no_grad():
            outs.append(_np(m(L.tensor(X))).copy())
        res.append((outs, sorted(m.state_dict())))
    assert res[1][1] == res[0][1]
    for a, b in zip(res[1][0], res[0][0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_autocast_disabled_inside_enabled_scope(rng):
    """Model code that keeps a numerically sensitive part out of autocast (rotary
    embeddings, losses): `with autocast(dev, enabled=False):` inside the training step's
    autocast region, and code that asks `is_autocast_enabled(dev)` to pick its dtype. pyrite's
    inner disabled scope still reported autocast on (one depth counter for all scopes), so such
    code cast to bfloat16 where torch stays in float32; a scope of one device type also
    reported the others on."""
    x = rng.standard_normal((int(rng.integers(2, 9)), 6)).astype(np.float32) * 100 + 0.123
    res = []
    for L in (torch, pr):

        def sensitive(t):
            if L.is_autocast_enabled("cpu"):
                t = t.to(L.get_autocast_dtype("cpu"))
            return t.sin() * t.float().cos()

        flags = []
        with L.autocast("cpu", dtype=L.bfloat16):
            flags.append(L.is_autocast_enabled("cpu"))
            with L.autocast("cpu", enabled=False):
                flags.append(L.is_autocast_enabled("cpu"))
                flags.append(str(L.get_autocast_dtype("cpu")).split(".")[-1])
                y = sensitive(L.tensor(x))
            flags.append(L.is_autocast_enabled("cpu"))
            flags.append(L.is_autocast_enabled("cuda"))  # a cpu scope leaves cuda's alone
            with L.autocast("cpu", dtype=L.float16):
                flags.append(str(L.get_autocast_dtype("cpu")).split(".")[-1])
            flags.append(str(L.get_autocast_dtype("cpu")).split(".")[-1])
        flags.append(L.is_autocast_enabled("cpu"))
        res.append((flags, str(y.dtype).split(".")[-1], _np(y)))
    assert res[1][0] == res[0][0]
    assert res[1][1] == res[0][1] == "float32"
    np.testing.assert_allclose(res[1][2], res[0][2], rtol=1e-4, atol=1e-4)


def test_generator_device_attribute(rng):
    """`torch.Generator(device=...)` and `generator.device` (diffusers' randn_tensor reads
    `generator.device.type` to choose where to draw): pyrite's Generator had no .device
    (AttributeError). A seeded cuda-spelled generator still drives a loader's shuffle."""
    n = int(rng.integers(5, 30))
    for L in (torch, pr):
        assert L.Generator().device.type == "cpu"
        assert str(L.Generator(device="cpu").device) == "cpu"
    g = pr.Generator(device="cuda").manual_seed(int(rng.integers(1 << 30)))
    assert g.device.type == "cuda"
    D = pr.utils.data
    got = [
        int(v)
        for b in D.DataLoader(D.TensorDataset(pr.arange(n)), 4, True, generator=g)
        for v in b[0]
    ]
    assert sorted(got) == list(range(n))


# ---- torch._foreach_* (multi-tensor updates in custom optimizers and EMA helpers) -------------

_FOREACH_UNARY = (
    "abs acos asin atan ceil cos cosh erf erfc exp expm1 floor frac lgamma log log10 log1p "
    "log2 neg reciprocal round rsqrt sigmoid sign sin sinh sqrt tan tanh trunc"
).split()


def _fe_lists(rng, lo=-0.9, hi=0.9):
    shapes = [(int(rng.integers(1, 6)), int(rng.integers(1, 6))), (int(rng.integers(1, 9)),), ()]
    vals = [rng.uniform(lo, hi, s).astype(np.float32) for s in shapes]
    return vals, [torch.tensor(v) for v in vals], [pr.tensor(v) for v in vals]


def _same_lists(p, t, rtol=1e-5, atol=1e-6):
    assert len(p) == len(t)
    for a, b in zip(p, t):
        np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", _FOREACH_UNARY)
def test_foreach_unary(rng, op):
    """torch._foreach_<op> and its in-place form (pyrite had none of the _foreach_ family:
    AttributeError in every custom optimizer or EMA helper using them)."""
    lo = 0.05 if op in ("log", "log10", "log2", "sqrt", "rsqrt", "lgamma", "reciprocal") else -0.9
    _, ts, ps = _fe_lists(rng, lo)
    t_out, p_out = getattr(torch, f"_foreach_{op}")(ts), getattr(pr, f"_foreach_{op}")(ps)
    assert type(p_out) is type(t_out)
    _same_lists(p_out, t_out, 2e-5, 2e-6)
    ret = getattr(pr, f"_foreach_{op}_")(ps)
    getattr(torch, f"_foreach_{op}_")(ts)
    assert ret is ps
    _same_lists(ps, ts, 2e-5, 2e-6)


@pytest.mark.parametrize(
    "op", ["add", "sub", "mul", "div", "clamp_min", "clamp_max", "maximum", "minimum", "pow"]
)
def test_foreach_binary_operand_forms(rng, op):
    """A scalar, a list of scalars, a list of tensors, and (where torch takes it) one 0-d
    tensor; alpha for add/sub with tensors; the in-place forms return their list."""
    vals, ts, ps = _fe_lists(rng, 0.2, 1.5)
    n = len(vals)
    scal = [float(v) for v in rng.uniform(0.5, 2, n)]
    other = [rng.uniform(0.5, 2, v.shape).astype(np.float32) for v in vals]
    forms = [
        (1.5, 1.5),
        (scal, scal),
        ([torch.tensor(o) for o in other], [pr.tensor(o) for o in other]),
    ]
    if op in ("add", "sub", "mul", "div"):
        forms.append((torch.tensor(1.75), pr.tensor(1.75)))
    for to, po in forms:
        _same_lists(getattr(pr, f"_foreach_{op}")(ps, po), getattr(torch, f"_foreach_{op}")(ts, to))
    if op in ("add", "sub"):
        to, po = forms[2]
        _same_lists(
            getattr(pr, f"_foreach_{op}")(ps, po, alpha=-0.5),
            getattr(torch, f"_foreach_{op}")(ts, to, alpha=-0.5),
        )
    if op == "pow":
        _same_lists(pr._foreach_pow(2.5, ps), torch._foreach_pow(2.5, ts))
    to, po = forms[2]
    ret = getattr(pr, f"_foreach_{op}_")(ps, po)
    getattr(torch, f"_foreach_{op}_")(ts, to)
    assert ret is ps
    _same_lists(ps, ts)
    with pytest.raises(RuntimeError):
        getattr(pr, f"_foreach_{op}")(ps, scal[:-1])
    with pytest.raises(RuntimeError):
        getattr(pr, f"_foreach_{op}")([], 1.0)


def test_foreach_ternary_reductions_and_copies(rng):
    vals, ts, ps = _fe_lists(rng, 0.2, 1.5)
    n = len(vals)
    a = [rng.uniform(0.5, 2, v.shape).astype(np.float32) for v in vals]
    b = [rng.uniform(0.5, 2, v.shape).astype(np.float32) for v in vals]
    ta, pa = [torch.tensor(x) for x in a], [pr.tensor(x) for x in a]
    tb, pb = [torch.tensor(x) for x in b], [pr.tensor(x) for x in b]
    sc = [float(v) for v in rng.uniform(-1, 1, n)]
    for op in ("addcmul", "addcdiv"):
        for tv, pv in ((1, 1), (-0.3, -0.3), (sc, sc), (torch.tensor(sc), pr.tensor(sc))):
            _same_lists(getattr(pr, f"_foreach_{op}")(ps, pa, pb, pv),
                        getattr(torch, f"_foreach_{op}")(ts, ta, tb, tv))  # fmt: skip
    for tw, pw in ((0.3, 0.3), (sc, sc), (tb, pb)):
        _same_lists(pr._foreach_lerp(ps, pa, pw), torch._foreach_lerp(ts, ta, tw))
    for ordv in (2, 1, float("inf")):
        _same_lists(pr._foreach_norm(ps, ordv), torch._foreach_norm(ts, ordv))
    _same_lists(pr._foreach_max(ps), torch._foreach_max(ts))
    # (torch < 2.13 lacks _foreach_clone: there the reference is each tensor's clone)
    clones = [t.clone() for t in ts] if OLDER_TORCH else torch._foreach_clone(ts)
    _same_lists(pr._foreach_clone(ps), clones)
    pr._foreach_addcmul_(ps, pa, pb, value=0.5)
    torch._foreach_addcmul_(ts, ta, tb, value=0.5)
    pr._foreach_lerp_(ps, pa, 0.25)
    torch._foreach_lerp_(ts, ta, 0.25)
    _same_lists(ps, ts)
    pr._foreach_copy_(ps, pb)
    _same_lists(ps, tb)
    assert pr._foreach_zero_(ps) is ps and all(float(p.abs().sum()) == 0 for p in ps)


def test_foreach_ema_and_custom_optimizer(rng):
    """diffusers' EMAModel(foreach=True) step (lerp_ of the shadow weights toward the model's
    under no_grad) and a custom momentum-SGD written with _foreach_ ops train as torch's."""
    tm, pm = _twin_nets(rng)
    d = float(rng.uniform(0.8, 0.99))
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        shadow = [p.detach().clone() for p in m.parameters()]
        bufs = [L.zeros_like(p) for p in m.parameters()]
        for x, y in _batches(np.random.default_rng(3), 5, 6):
            for p in m.parameters():
                p.grad = None
            _loss(L, m, x, y).backward()
            with L.no_grad():
                params = list(m.parameters())
                grads = [p.grad for p in params]
                L._foreach_mul_(bufs, 0.9)
                L._foreach_add_(bufs, grads)
                L._foreach_add_(params, bufs, alpha=-0.05)
                L._foreach_lerp_(shadow, [p.detach() for p in params], 1 - d)
        res.append(shadow)
    _compare_models(pm, tm)
    _same_lists(res[1], res[0], 1e-4, 1e-5)


def test_autocast_state_functions(rng):
    """torch's autocast state functions that model code calls (is_autocast_cpu_enabled,
    get_autocast_cpu_dtype, set_autocast_enabled/dtype, the cache switches): missing at
    pyrite's top level (AttributeError). States as torch's, restored by hand after."""
    out = []
    for L in (torch, pr):
        r = [L.is_autocast_cpu_enabled(), str(L.get_autocast_cpu_dtype()).split(".")[-1]]
        with L.autocast("cpu", dtype=L.float16):
            r += [L.is_autocast_cpu_enabled(), str(L.get_autocast_cpu_dtype()).split(".")[-1]]
        L.set_autocast_enabled("cpu", True)
        L.set_autocast_dtype("cpu", L.bfloat16)
        r += [L.is_autocast_enabled("cpu"), str(L.get_autocast_dtype("cpu")).split(".")[-1]]
        with L.autocast("cpu", enabled=False):
            r.append(L.is_autocast_enabled("cpu"))
        r.append(L.is_autocast_enabled("cpu"))
        L.set_autocast_enabled("cpu", False)
        r += [L.is_autocast_enabled("cpu"), L.is_autocast_cache_enabled()]
        L.set_autocast_cache_enabled(False)
        r.append(L.is_autocast_cache_enabled())
        L.set_autocast_cache_enabled(True)
        L.clear_autocast_cache()
        out.append(r)
    assert out[1] == out[0]


def test_functional_call_maml_inner_loop(rng):
    """MAML's inner loop: fast weights = params - lr * grad (create_graph=True), the loss of
    torch.func.functional_call(model, fast_weights, x_query) backpropagated into the meta
    parameters (pr.func was missing: AttributeError). Also: buffers replaced, tied weights,
    strict's error, the module's own tensors back afterwards."""
    tm, pm = _twin_bn_nets(rng)
    xs, ys = _batches(rng, 1, int(rng.integers(3, 9)))[0]
    xq, yq = _batches(rng, 1, int(rng.integers(3, 9)))[0]
    alpha = float(rng.uniform(0.05, 0.3))
    res = []
    for L, m in ((torch, tm), (pr, pm)):
        params = dict(m.named_parameters())
        loss = L.nn.functional.cross_entropy(
            L.func.functional_call(m, params, (L.tensor(xs),)), L.tensor(ys)
        )
        grads = L.autograd.grad(loss, list(params.values()), create_graph=True)
        fast = {n: p - alpha * g for (n, p), g in zip(params.items(), grads)}
        qloss = L.nn.functional.cross_entropy(
            L.func.functional_call(m, fast, L.tensor(xq)), L.tensor(yq)
        )
        qloss.backward()
        assert all(type(p).__name__ == "Parameter" for p in m.parameters())
        res.append((float(qloss), [_np(p.grad).copy() for p in m.parameters()], m))
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=1e-5)
    for a, b in zip(res[1][1], res[0][1]):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    _compare_models(pm, tm, 0, 0)
    # buffers (eval BN with other running stats), and strict's error
    out = []
    x = rng.standard_normal((3, 7)).astype(np.float32)
    rm = rng.standard_normal(7).astype(np.float32)
    for L, m in ((torch, tm), (pr, pm)):
        m.eval()
        y = L.func.functional_call(m, {"0.running_mean": L.tensor(rm)}, (L.tensor(x),))
        out.append(_np(y).copy())
        with pytest.raises(RuntimeError, match="Missing key"):
            L.func.functional_call(m, {"1.weight": m[1].weight}, (L.tensor(x),), strict=True)
    np.testing.assert_allclose(out[1], out[0], rtol=1e-5, atol=1e-6)
    _close(pm[0].running_mean, tm[0].running_mean, 1e-5, 1e-7)  # its own stats back
    # tied weights: the value given for one name reaches the other
    outs = []
    for L in (torch, pr):
        emb, head = L.nn.Embedding(5, 4), L.nn.Linear(4, 5, bias=False)
        head.weight = emb.weight
        tied = L.nn.Sequential(emb, head)
        w = L.tensor(np.arange(20, dtype=np.float32).reshape(5, 4) / 10)
        outs.append(_np(L.func.functional_call(tied, {"0.weight": w}, L.tensor([1, 3]))).copy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-6)


def test_grad_scaler_setters_change_the_dynamics(rng):
    """set_growth_factor / set_backoff_factor / set_growth_interval (missing: AttributeError)
    take effect on the next updates, as torch's."""
    out = []
    for L in (torch, pr):
        dev = "cpu" if L is torch else "cuda"
        w = L.nn.Parameter(L.ones(3))
        opt = L.optim.SGD([w], lr=0.01)
        s = L.amp.GradScaler(dev, init_scale=8.0, growth_interval=100)
        s.set_growth_factor(3.0)
        s.set_backoff_factor(0.25)
        s.set_growth_interval(2)
        tr = []
        for i in range(6):
            opt.zero_grad()
            loss = (w**2).sum() * (float("inf") if i == 3 else 1.0)
            s.scale(loss).backward()
            s.step(opt)
            s.update()
            tr.append(s.get_scale())
        out.append((tr, s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()))
    assert out[1] == out[0]


@pytest.mark.parametrize("opt_name", ["AdamW", "NAdam", "SparseAdam", "LBFGS", "custom"])
def test_optimizer_state_dict_hooks(rng, opt_name):
    """register_state_dict_pre/post_hook and register_load_state_dict_pre/post_hook (missing:
    AttributeError; checkpoint helpers add and strip entries with them): called in torch's
    order, a post hook's returned dict is the state dict, a load pre hook's returned dict is
    what loads, handles remove, prepend puts a hook first. Once each for optimizers whose
    state_dict builds on the base's (NAdam's host scalars); a script's own subclass adds its
    entries after the hooks ran, as torch's hooks see the base's dict."""
    logs = []
    for L in (torch, pr):
        log = []
        p = L.nn.Parameter(L.tensor(rng.standard_normal(3).astype(np.float32)))
        if opt_name == "custom":
            Lion, _ = _custom_classes(L)

            class Opt(Lion):
                def state_dict(self):
                    sd = super().state_dict()
                    sd["mine"] = 1
                    return sd

            opt = Opt([p], lr=0.1)
        else:
            opt = getattr(L.optim, opt_name)([p], lr=0.1)
        opt.register_state_dict_pre_hook(lambda o: log.append("pre"))
        opt.register_state_dict_pre_hook(lambda o: log.append("pre0"), prepend=True)
        opt.register_state_dict_post_hook(
            lambda o, sd: (log.append(("post", sorted(sd))), {**sd, "extra": 1})[1]
        )
        opt.register_load_state_dict_pre_hook(
            lambda o, sd: (
                log.append(("lpre", sorted(sd))),
                {k: v for k, v in sd.items() if k != "extra"},
            )[1]  # fmt: skip
        )
        h = opt.register_load_state_dict_post_hook(lambda o: log.append("lpost"))
        sd = opt.state_dict()
        log.append(sorted(sd))
        opt.load_state_dict(sd)
        h.remove()
        opt.load_state_dict(sd)
        logs.append(log)
    assert logs[1] == logs[0]
