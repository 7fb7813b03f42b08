"""pyrite.optim's further optimizers (Adadelta, Adamax, NAdam, RAdam, ASGD, LBFGS) against
torch.optim (CPU) step for step: every option that changes a formula, awkward shapes, two
parameter groups with their own lrs, state dicts both ways, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from tests.test_optim import (  # the same parameter pairs, tolerances and comparisons
    SHAPES,
    STEPS,
    Pair,
    _close,
    _compare,
    _ids,
    _pyrite_sd_to_torch,
    _t_np,
    _torch_sd_to_pyrite,
    _value,
    batched_dispatches,
)

CONFIGS = [
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4}),
    ("Adadelta", {"weight_decay": 0.1, "maximize": True}),
    ("Adamax", {}),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-4, "weight_decay": 0.1}),
    ("Adamax", {"lr": 0.01, "maximize": True}),
    ("NAdam", {}),
    ("NAdam", {"lr": 0.01, "momentum_decay": 0.3, "betas": (0.8, 0.95), "eps": 1e-4}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1}),
    ("NAdam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True, "maximize": True}),
    # RAdam: the SMA length passes 5 at step 6 (beta2 = 0.99, 0.999): RAdam runs 8 steps
    ("RAdam", {"lr": 0.01}),
    ("RAdam", {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-4}),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.99), "weight_decay": 0.1}),
    (
        "RAdam",
        {"lr": 0.01, "betas": (0.9, 0.99), "weight_decay": 0.1, "decoupled_weight_decay": True},
    ),
    ("RAdam", {"lr": 0.01, "betas": (0.9, 0.999), "maximize": True}),
    ("ASGD", {}),
    # t0 = 2: averaging (mu < 1) starts within the 5 steps
    ("ASGD", {"lr": 0.05, "lambd": 0.1, "alpha": 0.5, "t0": 2, "weight_decay": 0.1}),
    ("ASGD", {"lr": 0.05, "t0": 1, "maximize": True}),
]


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_matches_torch(config, rng):
    steps = 8 if config[0] == "RAdam" else STEPS
    pair = Pair(*config, rng)
    pair.step(rng, steps)
    _compare(pair, steps)


@pytest.mark.parametrize("config", CONFIGS[::2], ids=_ids)
def test_state_dict_round_trips(config, rng):
    pair = Pair(*config, rng)
    pair.step(rng, 3)
    sd = pair.pr_opt.state_dict()
    t_sd = pair.t_opt.state_dict()
    assert sd["param_groups"] == t_sd["param_groups"]
    assert list(sd["state"]) == list(t_sd["state"])
    for k, s in t_sd["state"].items():
        assert list(sd["state"][k]) == list(s)
        for name, tv in s.items():
            if tv.dim() == 0:  # step and the other 0-d entries: 0-d float32 tensors, as torch
                v = sd["state"][k][name]
                assert isinstance(v, pr.Tensor) and v.shape == () and v.dtype == pr.float32
                _close(v.item(), tv.item(), 3, name)

    copies = [pr.tensor(p.numpy()).requires_grad_() for p in pair.pr_params]
    fresh = pair.make(pr.optim, copies)
    fresh.load_state_dict(sd)
    copies2 = [pr.tensor(_t_np(t)).requires_grad_() for t in pair.t_params]
    from_torch = pair.make(pr.optim, copies2)
    from_torch.load_state_dict(_torch_sd_to_pyrite(t_sd))
    t_copies = [torch.tensor(p.numpy()).requires_grad_() for p in pair.pr_params]
    t_from_pr = pair.make(torch.optim, t_copies)
    t_from_pr.load_state_dict(_pyrite_sd_to_torch(sd))

    for _ in range(2):
        gs = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        for params, opt, wrap in (
            (pair.t_params, pair.t_opt, torch.tensor),
            (copies, fresh, pr.tensor),
            (copies2, from_torch, pr.tensor),
            (t_copies, t_from_pr, torch.tensor),
        ):
            for p, g in zip(params, gs):
                p.grad = wrap(g)
            opt.step()
    for i, t in enumerate(pair.t_params):
        for name, p in (("pyrite", copies[i]), ("torch sd", copies2[i]), ("to torch", t_copies[i])):
            _close(p.numpy() if isinstance(p, pr.Tensor) else _t_np(p), _t_np(t), 5, name)
        for key, tv in pair.t_opt.state[t].items():
            if key != "step":
                _close(_value(fresh.state[copies[i]][key]), _t_np(tv), 5, key)
                _close(_value(from_torch.state[copies2[i]][key]), _t_np(tv), 5, key)
    assert fresh.state[copies[0]]["step"] == 5


def test_step_reads_nothing_back_one_dispatch(rng, monkeypatch):
    dev = backend.current()
    pairs = [Pair(*c, rng) for c in CONFIGS]
    for pair in pairs:
        pair.step(rng)  # the first step, before the check: buffers and pipelines exist
        for p in pair.pr_params:
            p.grad = pr.tensor(rng.standard_normal(p.shape).astype(np.float32))

    def refuse(*args, **kwargs):
        raise AssertionError("a step read from the device")

    monkeypatch.setattr(dev, "read", refuse)
    pipelines = dev.pipeline_count
    for pair in pairs:
        before = dev.dispatches
        pair.pr_opt.param_groups[0]["lr"] *= 0.5  # a new lr is a scalar, not a new pipeline
        pair.pr_opt.step()
        state = pair.pr_opt.state[pair.pr_params[0]]
        k = 2 + sum(isinstance(v, pr.Tensor) for v in state.values())  # p, its state, g
        groups = [len(g["params"]) for g in pair.pr_opt.param_groups]
        assert dev.dispatches - before == sum(batched_dispatches(n, k) for n in groups), pair.name
    assert dev.pipeline_count == pipelines
    monkeypatch.undo()


def test_errors(rng):
    a = pr.tensor(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        pr.optim.Adadelta([a], lr=-1)
    with pytest.raises(ValueError, match="Invalid rho value: 1.5"):
        pr.optim.Adadelta([a], rho=1.5)
    with pytest.raises(ValueError, match="Invalid epsilon value: -0.1"):
        pr.optim.Adadelta([a], eps=-0.1)
    with pytest.raises(ValueError, match="Invalid weight_decay value: -0.1"):
        pr.optim.Adadelta([a], weight_decay=-0.1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 0: 1.0"):
        pr.optim.Adamax([a], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Invalid epsilon value: -1"):
        pr.optim.Adamax([a], eps=-1)
    with pytest.raises(ValueError, match="Invalid momentum_decay value: -0.5"):
        pr.optim.NAdam([a], momentum_decay=-0.5)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: -0.1"):
        pr.optim.RAdam([a], betas=(0.9, -0.1))
    with pytest.raises(ValueError, match="Invalid weight_decay value: -1"):
        pr.optim.RAdam([a], weight_decay=-1)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.5"):
        pr.optim.ASGD([a], lr=-0.5)
    with pytest.raises(ValueError, match="Invalid weight_decay value: -2"):
        pr.optim.ASGD([a], weight_decay=-2)


def test_radam_rectification_switch():
    """The SMA length passes 5 at step 6 for the test configs' beta2 (their 8 steps see both
    branches of the update)."""
    for beta2 in (0.99, 0.999):
        rho_inf = 2 / (1 - beta2) - 1
        rho = [rho_inf - 2 * s * beta2**s / (1 - beta2**s) for s in range(1, 9)]
        assert [r > 5 for r in rho] == [False] * 5 + [True] * 3


# ---- LBFGS -------------------------------------------------------------------------------------


def _quadratic(mod, params, A, b):
    """0.5 x'Ax - b'x over the parameters flattened into one x (A symmetric positive
    definite)."""
    x = mod.cat([p.reshape(-1) for p in params])
    return 0.5 * (x @ (A @ x)) - (b * x).sum()


def _rosenbrock(mod, params, A, b):
    """The chained Rosenbrock function sum(100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2)."""
    x = mod.cat([p.reshape(-1) for p in params])
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


LBFGS_CONFIGS = [
    # (few iterations a step: converged, the stopping tests compare roundoff-sized changes)
    ("quadratic", {"max_iter": 5}),
    ("quadratic", {"max_iter": 4, "line_search_fn": "strong_wolfe"}),
    ("quadratic", {"lr": 0.5, "max_iter": 4, "history_size": 2}),
    ("quadratic", {"history_size": 3, "max_iter": 5, "line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"lr": 0.1, "max_iter": 5}),
    ("rosenbrock", {"max_iter": 6, "line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"max_iter": 5, "history_size": 2, "line_search_fn": "strong_wolfe"}),
    ("rosenbrock", {"lr": 0.05, "max_iter": 8, "max_eval": 5, "tolerance_change": 1e-3}),
]


def _lbfgs_ids(c):
    return c[0] + "-" + (",".join(f"{k}={v}" for k, v in c[1].items()) or "default")


@pytest.mark.parametrize("config", LBFGS_CONFIGS, ids=_lbfgs_ids)
def test_lbfgs_matches_torch(config, rng):
    """Three steps of L-BFGS on the same function from the same start: the parameters, the
    losses and the counters agree. The tolerance is looser than the elementwise optimizers':
    each iteration's dot products and sums reduce in another order than torch's, and the
    updates feed back (a Hessian estimate), so the differences of a few roundings grow; the
    functions are well enough conditioned that every branch (line search, stopping) is the
    same."""
    kind, kw = config
    fn = _quadratic if kind == "quadratic" else _rosenbrock
    shapes = [(5, 7), (1,), (4,)] if kind == "quadratic" else [(2, 3), (1,), (2,)]
    n = sum(int(np.prod(s)) for s in shapes)
    # eigenvalues from 1 to 100: slow enough that three steps do not converge
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = ((q * np.logspace(0, 2, n)) @ q.T).astype(np.float32)
    A = (A + A.T) / 2
    b = rng.standard_normal(n).astype(np.float32)
    if kind == "quadratic":
        starts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    else:
        starts = [(rng.uniform(-0.5, 0.5, s)).astype(np.float32) for s in shapes]
    pr_p = [pr.tensor(w).requires_grad_() for w in starts]
    t_p = [torch.tensor(w).requires_grad_() for w in starts]
    pr_opt = pr.optim.LBFGS(pr_p, **kw)
    t_opt = torch.optim.LBFGS(t_p, **kw)
    pA, pb, tA, tb = pr.tensor(A), pr.tensor(b), torch.tensor(A), torch.tensor(b)

    def closure_for(mod, opt, params, A, b):
        def closure():
            opt.zero_grad()
            loss = fn(mod, params, A, b)
            loss.backward()
            return loss

        return closure

    for step in range(3):
        pl = pr_opt.step(closure_for(pr, pr_opt, pr_p, pA, pb))
        tl = t_opt.step(closure_for(torch, t_opt, t_p, tA, tb))
        tol = 2e-4
        np.testing.assert_allclose(float(pl), float(tl), rtol=tol, atol=tol, err_msg=f"step {step}")
        x = np.concatenate([p.numpy().ravel() for p in pr_p])
        tx = np.concatenate([_t_np(p).ravel() for p in t_p])
        np.testing.assert_allclose(x, tx, rtol=tol, atol=tol * np.abs(tx).max(), err_msg=f"{step}")
        ps, ts = pr_opt.state[pr_p[0]], t_opt.state[t_p[0]]
        assert ps["n_iter"] == ts["n_iter"] and ps["func_evals"] == ts["func_evals"]
    assert sorted(ps) == sorted(ts)
    assert len(ps["old_dirs"]) == len(ts["old_dirs"]) <= kw.get("history_size", 100)


def test_lbfgs_state_dict_and_errors(rng):
    n = 6
    m = rng.standard_normal((n, n)).astype(np.float32)
    A = (m @ m.T / n + np.eye(n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)

    def run(mod, opt, params, A, b, steps):
        def closure():
            opt.zero_grad()
            loss = _quadratic(mod, params, A, b)
            loss.backward()
            return loss

        for _ in range(steps):
            opt.step(closure)

    kw = {"max_iter": 2, "history_size": 3}
    t_p = [torch.tensor(w).requires_grad_()]
    t_opt = torch.optim.LBFGS(t_p, **kw)
    run(torch, t_opt, t_p, torch.tensor(A), torch.tensor(b), 2)
    # torch's state (0-d tensors in the history) loads, and the run continues the same way
    p = [pr.tensor(_t_np(t_p[0])).requires_grad_()]
    opt = pr.optim.LBFGS(p, **kw)
    opt.load_state_dict(_torch_sd_to_pyrite(t_opt.state_dict()))
    assert opt.state_dict()["param_groups"] == t_opt.state_dict()["param_groups"]
    run(pr, opt, p, pr.tensor(A), pr.tensor(b), 1)
    run(torch, t_opt, t_p, torch.tensor(A), torch.tensor(b), 1)
    np.testing.assert_allclose(p[0].numpy(), _t_np(t_p[0]), rtol=1e-4, atol=1e-4)
    assert opt.state[p[0]]["n_iter"] == t_opt.state[t_p[0]]["n_iter"]

    a = pr.tensor(w).requires_grad_()
    c = pr.tensor(w).requires_grad_()
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        pr.optim.LBFGS([a], lr=-1)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        pr.optim.LBFGS([{"params": [a]}, {"params": [c]}])
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt = pr.optim.LBFGS([a], line_search_fn="armijo")
        run(pr, opt, [a], pr.tensor(A), pr.tensor(b), 1)
    assert pr.optim.LBFGS([a], max_iter=8).defaults["max_eval"] == 10
