"""pyrite.optim against torch.optim (CPU) step for step: every option that changes a formula,
awkward shapes, two parameter groups with their own lrs, state dicts both ways, the errors, and
that a step reads nothing back and builds no pipeline after the first."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from pyrite.testing.tolerance import unit_roundoff

SHAPES = [(7, 13), (1,), (3, 1, 5)]
STEPS = 5

CONFIGS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.05}),
    ("SGD", {"lr": 0.1, "weight_decay": 0.1, "maximize": True}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "betas": (0.8, 0.95), "eps": 1e-6}),
    ("Adam", {"lr": 0.01, "maximize": True, "amsgrad": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.3}),
    ("AdamW", {"lr": 0.01, "maximize": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0}),
    ("RMSprop", {}),
    ("RMSprop", {"centered": True}),
    ("RMSprop", {"momentum": 0.9}),
    ("RMSprop", {"momentum": 0.9, "centered": True, "weight_decay": 0.1, "alpha": 0.9}),
    ("RMSprop", {"maximize": True, "eps": 1e-4}),
    ("Adagrad", {}),
    ("Adagrad", {"lr_decay": 0.1}),
    ("Adagrad", {"initial_accumulator_value": 0.3, "weight_decay": 0.1}),
    ("Adagrad", {"lr_decay": 0.05, "initial_accumulator_value": 0.1, "maximize": True}),
]


def _ids(c):
    name, kw = c
    return name + "-" + (",".join(f"{k}={v}" for k, v in kw.items()) or "default")


class Pair:
    """The same parameters in pyrite and torch, two groups (the second with a tenth of the lr),
    and the two optimizers."""

    def __init__(self, name, kw, rng, dtype=np.float32):
        self.name, self.kw = name, kw
        self.weights = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        self.pr_params = [pr.tensor(w).requires_grad_() for w in self.weights]
        self.t_params = [torch.tensor(w).requires_grad_() for w in self.weights]
        self.pr_opt = self.make(pr.optim, self.pr_params)
        self.t_opt = self.make(torch.optim, self.t_params)

    def make(self, module, params):
        # the second group's lr is a tenth of the first's (torch's default lr where not given)
        lr = self.kw.get("lr", getattr(torch.optim, self.name)([torch.zeros(1)]).defaults["lr"])
        groups = [{"params": params[:2]}, {"params": params[2:], "lr": lr / 10}]
        return getattr(module, self.name)(groups, **self.kw)

    def step(self, rng, n=1):
        for _ in range(n):
            for p, t in zip(self.pr_params, self.t_params):
                g = rng.standard_normal(t.shape).astype(self.weights[0].dtype)
                p.grad = pr.tensor(g)
                t.grad = torch.tensor(g)
            self.pr_opt.step()
            self.t_opt.step()


def _close(actual, expected, steps, what, u=unit_roundoff("float32")):
    """Within 16 unit roundoffs a step, relative to the value and to the array's scale (the
    update's few roundings per step accumulate in the parameter and the state)."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, what
    tol = 16 * steps * u
    scale = max(float(np.abs(expected).max(initial=0.0)), 1e-30)
    np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol * scale, err_msg=what)


def _t_np(x):
    return x.detach().float().numpy()


def _value(x):
    """A state value as numpy: a pyrite tensor, or a host number (a 0-d state entry kept on the
    host: NAdam's mu_product, ASGD's eta and mu)."""
    return x.float().numpy() if isinstance(x, pr.Tensor) else np.asarray(x)


def _compare(pair, steps, u=unit_roundoff("float32")):
    for i, (p, t) in enumerate(zip(pair.pr_params, pair.t_params)):
        _close(p.float().numpy(), _t_np(t), steps, f"param {i}", u)
        ps, ts = pair.pr_opt.state[p], pair.t_opt.state[t]
        assert list(ps) == list(ts), f"state keys of param {i}"
        for key, tv in ts.items():
            if key == "step":
                assert ps["step"] == int(tv.item())
            else:
                _close(_value(ps[key]), _t_np(tv), steps, f"state {key} of param {i}", u)


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_matches_torch(config, rng):
    pair = Pair(*config, rng)
    pair.step(rng, STEPS)
    _compare(pair, STEPS)


def _torch_sd_to_pyrite(sd):
    """torch's state dict with every tensor converted through numpy."""
    state = {
        k: {n: (pr.tensor(v.numpy()) if isinstance(v, torch.Tensor) else v) for n, v in s.items()}
        for k, s in sd["state"].items()
    }
    return {"state": state, "param_groups": sd["param_groups"]}


def _pyrite_sd_to_torch(sd):
    state = {
        k: {n: (torch.tensor(v.numpy()) if isinstance(v, pr.Tensor) else v) for n, v in s.items()}
        for k, s in sd["state"].items()
    }
    return {"state": state, "param_groups": sd["param_groups"]}


@pytest.mark.parametrize(
    "config",
    [c for c in CONFIGS if c[1].get("momentum") or c[0] != "SGD"][::2] + [CONFIGS[1]],
    ids=_ids,
)
def test_state_dict_round_trips(config, rng):
    pair = Pair(*config, rng)
    pair.step(rng, 3)
    sd = pair.pr_opt.state_dict()
    t_sd = pair.t_opt.state_dict()
    # the format: integer ids, torch's keys, the step a 0-d float32 tensor
    assert sd["param_groups"] == t_sd["param_groups"]
    assert list(sd["state"]) == list(t_sd["state"])
    for k, s in t_sd["state"].items():
        assert list(sd["state"][k]) == list(s)
        if "step" in s:
            step = sd["state"][k]["step"]
            assert isinstance(step, pr.Tensor) and step.shape == () and step.dtype == pr.float32
            assert step.item() == s["step"].item() == 3.0

    # pyrite -> pyrite: a new optimizer over copies of the parameters continues the same way
    copies = [pr.tensor(p.numpy()).requires_grad_() for p in pair.pr_params]
    fresh = pair.make(pr.optim, copies)
    fresh.load_state_dict(sd)
    # torch -> pyrite through numpy: another optimizer over other copies
    copies2 = [pr.tensor(_t_np(t)).requires_grad_() for t in pair.t_params]
    from_torch = pair.make(pr.optim, copies2)
    from_torch.load_state_dict(_torch_sd_to_pyrite(t_sd))
    # pyrite -> torch: torch continues from pyrite's state too
    t_copies = [torch.tensor(p.numpy()).requires_grad_() for p in pair.pr_params]
    t_from_pr = pair.make(torch.optim, t_copies)
    t_from_pr.load_state_dict(_pyrite_sd_to_torch(sd))

    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(2)]
    for gs in grads:
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
                _close(fresh.state[copies[i]][key].numpy(), _t_np(tv), 5, key)
                _close(from_torch.state[copies2[i]][key].numpy(), _t_np(tv), 5, key)
    assert fresh.state[copies[0]].get("step", 5) == 5


def test_state_dict_loads_lr_and_groups(rng):
    pair = Pair("SGD", {"lr": 0.1, "momentum": 0.9}, rng)
    pair.step(rng, 1)
    sd = pair.pr_opt.state_dict()
    sd["param_groups"][1]["lr"] = 0.123
    other = pair.make(pr.optim, [pr.tensor(w).requires_grad_() for w in pair.weights])
    other.load_state_dict(sd)
    assert other.param_groups[1]["lr"] == 0.123
    assert other.param_groups[0]["params"][0] is not pair.pr_params[0]
    with pytest.raises(ValueError, match="different number of parameter groups"):
        pr.optim.SGD([pr.tensor(pair.weights[0])]).load_state_dict(sd)
    bad = {
        "state": {},
        "param_groups": [dict(sd["param_groups"][0], params=[0]), sd["param_groups"][1]],
    }
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        other.load_state_dict(bad)


def test_adamw_state_dict_keeps_decoupled_decay(rng):
    p = pr.tensor(rng.standard_normal(5).astype(np.float32)).requires_grad_()
    sd = pr.optim.Adam([p], weight_decay=0.1).state_dict()
    opt = pr.optim.AdamW([p])
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_grad_none_is_skipped(rng):
    pair = Pair("Adam", {"lr": 0.01}, rng)
    pair.pr_params[1].grad = None
    for p, t in zip(pair.pr_params, pair.t_params):
        g = rng.standard_normal(t.shape).astype(np.float32)
        if p is not pair.pr_params[1]:
            p.grad, t.grad = pr.tensor(g), torch.tensor(g)
    pair.pr_opt.step()
    pair.t_opt.step()
    assert pair.pr_params[1] not in pair.pr_opt.state
    np.testing.assert_array_equal(pair.pr_params[1].numpy(), pair.weights[1])
    _compare(pair, 1)


def test_non_contiguous_param_and_grad(rng):
    w = rng.standard_normal((13, 7)).astype(np.float32)
    g = rng.standard_normal((7, 13)).astype(np.float32)
    p = pr.tensor(w).t().requires_grad_()  # a leaf viewed transposed
    t = torch.tensor(w).t().requires_grad_()
    opt, t_opt = pr.optim.Adam([p], lr=0.1), torch.optim.Adam([t], lr=0.1)
    for _ in range(2):
        p.grad = pr.tensor(np.ascontiguousarray(g.T)).t()  # a strided gradient
        t.grad = torch.tensor(g)
        opt.step()
        t_opt.step()
    _close(p.numpy(), _t_np(t), 2, "param")
    _close(opt.state[p]["exp_avg"].numpy(), _t_np(t_opt.state[t]["exp_avg"]), 2, "exp_avg")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["SGD", "AdamW", "RMSprop"])
def test_low_precision_params(name, dtype, rng):
    """float16 / bfloat16 parameters and state, computed in f32 and stored back: torch rounds
    after each of its ops, pyrite once, so they agree within a few of the type's ulps a step."""
    kw = {"lr": 0.05, "momentum": 0.9} if name != "AdamW" else {"lr": 0.05}
    w = rng.standard_normal((5, 3)).astype(np.float32)
    p = pr.tensor(w, dtype=getattr(pr, dtype)).requires_grad_()
    t = torch.tensor(w, dtype=getattr(torch, dtype)).requires_grad_()
    opt, t_opt = getattr(pr.optim, name)([p], **kw), getattr(torch.optim, name)([t], **kw)
    for _ in range(3):
        g = rng.standard_normal((5, 3)).astype(np.float32)
        p.grad = pr.tensor(g, dtype=getattr(pr, dtype))
        t.grad = torch.tensor(g, dtype=getattr(torch, dtype))
        opt.step()
        t_opt.step()
    assert p.dtype == getattr(pr, dtype)
    _close(p.float().numpy(), _t_np(t), 3, "param", u=4 * unit_roundoff(dtype))
    for key, tv in t_opt.state[t].items():
        if key != "step":
            assert opt.state[p][key].dtype == p.dtype
            _close(opt.state[p][key].float().numpy(), _t_np(tv), 3, key, u=4 * unit_roundoff(dtype))


def test_step_reads_nothing_back(rng, monkeypatch):
    dev = backend.current()
    pairs = [Pair(*c, rng) for c in CONFIGS[::3]]
    pairs[0].step(rng)  # the first step, before the check: buffers and pipelines exist

    def refuse(*args, **kwargs):
        raise AssertionError("a step read from the device")

    for pair in pairs:
        for p in pair.pr_params:
            p.grad = pr.tensor(rng.standard_normal(p.shape).astype(np.float32))
    monkeypatch.setattr(dev, "read", refuse)
    for pair in pairs:
        pair.pr_opt.step()
        pair.pr_opt.step()
    monkeypatch.undo()
    assert np.isfinite(pairs[-1].pr_params[0].numpy()).all()


def test_one_dispatch_a_parameter_and_no_new_pipelines(rng):
    dev = backend.current()
    pair = Pair("AdamW", {"lr": 0.01, "amsgrad": True}, rng)
    pair.step(rng)
    grads = [pr.tensor(rng.standard_normal(s).astype(np.float32)) for s in SHAPES]
    for p, g in zip(pair.pr_params, grads):
        p.grad = g
    pipelines = dev.pipeline_count
    before = dev.dispatches
    pair.pr_opt.param_groups[0]["lr"] = 0.5  # a new lr is a scalar, not a new pipeline
    pair.pr_opt.step()
    groups = [len(g["params"]) for g in pair.pr_opt.param_groups]
    assert dev.dispatches - before == sum(batched_dispatches(n, 5) for n in groups)  # p m v vmax g
    assert dev.pipeline_count == pipelines


def batched_dispatches(n_params, n_operands):
    """Dispatches of one step over n_params parameters of one group: as many share a dispatch
    as the device binds storage buffers (one binding is the info window), at most 16."""
    limit = backend.current().limits["max-storage-buffers-per-shader-stage"]
    cap = min(16, (limit - 1) // n_operands)
    return -(-n_params // cap)


def test_many_parameters_share_dispatches(rng):
    """29 parameters (f32 and f16 where the device has it, odd sizes, a non-contiguous gradient
    that is staged) step as torch's do, in fewer dispatches than parameters."""
    dev = backend.current()
    dtypes = [np.float32] + ([np.float16] if dev.has_f16 else [])
    shapes = [(int(rng.integers(1, 40)),) * int(rng.integers(1, 3)) for _ in range(29)]
    arrays = [rng.standard_normal(s).astype(dtypes[i % len(dtypes)]) for i, s in enumerate(shapes)]
    pp = [pr.tensor(a).requires_grad_() for a in arrays]
    tp = [torch.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]
    popt = pr.optim.AdamW(pp, lr=0.01, weight_decay=0.1)
    topt = torch.optim.AdamW(tp, lr=0.01, weight_decay=0.1)
    for step in range(3):
        for i, (p, t) in enumerate(zip(pp, tp)):
            g = rng.standard_normal(p.shape).astype(np.float32)
            if i == 5 and g.ndim == 2:
                p.grad = pr.tensor(g.T.copy()).t().to(p.dtype)  # non-contiguous: staged
            else:
                p.grad = pr.tensor(g).to(p.dtype)
            t.grad = torch.tensor(p.grad.float().numpy())
        before = dev.dispatches
        popt.step()
        topt.step()
        if step:
            assert dev.dispatches - before < len(pp)
        for p, t in zip(pp, tp):
            tol = 2e-3 if p.dtype is pr.float16 else 1e-6
            np.testing.assert_allclose(
                p.float().numpy(), t.detach().numpy().astype(p.numpy().dtype), rtol=tol, atol=tol
            )
            if p.dtype is pr.float16:  # torch kept f32: round its value as pyrite stores it
                t.data = torch.tensor(p.float().numpy())


def test_sgd_momentum_buffer_starts_as_the_gradient(rng):
    p = pr.tensor(rng.standard_normal(4).astype(np.float32)).requires_grad_()
    g = rng.standard_normal(4).astype(np.float32)
    p.grad = pr.tensor(g)
    opt = pr.optim.SGD([p], lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.0)
    opt.step()
    np.testing.assert_array_equal(opt.state[p]["momentum_buffer"].numpy(), g)
    assert pr.optim.SGD([p]).state_dict()["state"] == {}  # no momentum: no state, as torch


def test_zero_grad_and_add_param_group(rng):
    a = pr.tensor(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    b = pr.tensor(rng.standard_normal(2).astype(np.float32)).requires_grad_()
    opt = pr.optim.SGD([a], lr=0.5)
    a.grad = pr.tensor(np.ones(3, np.float32))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3))
    opt.zero_grad()
    assert a.grad is None
    opt.add_param_group({"params": b, "lr": 0.25, "momentum": 0.5})
    g = opt.param_groups[1]
    assert g["lr"] == 0.25 and g["momentum"] == 0.5 and g["dampening"] == 0
    b0 = b.numpy()
    b.grad = pr.tensor(np.full(2, 2.0, np.float32))
    opt.step()
    np.testing.assert_allclose(b.numpy(), b0 - 0.25 * 2.0, rtol=1e-6)
    assert "lr: 0.25" in repr(opt)


def test_named_parameters_and_closure(rng):
    a = pr.tensor(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    opt = pr.optim.Adam([("w", a)])
    assert opt.param_groups[0]["param_names"] == ["w"]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["w"]
    assert opt.step(lambda: 1.5) == 1.5


def test_errors(rng):
    a = pr.tensor(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        pr.optim.SGD([])
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts"):
        pr.optim.SGD(a)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        pr.optim.Adam([a, 3.0])
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        pr.optim.SGD([{"params": [a]}, {"params": [a], "lr": 0.1}])
    with pytest.raises(
        ValueError, match="Nesterov momentum requires a momentum and zero dampening"
    ):
        pr.optim.SGD([a], nesterov=True)
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        pr.optim.AdamW([a], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        pr.optim.Adam([a], betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="ordered collections"):
        pr.optim.SGD([{"params": {a}}])
    y = a * 2.0
    if y.is_leaf:  # autograd not on this branch yet: make a non-leaf by hand
        y.grad_fn = object()
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        pr.optim.SGD([y])
    opt = pr.optim.SGD([a])
    a.grad = pr.tensor(np.ones(4, np.float32))
    with pytest.raises(
        RuntimeError, match=r"gradient of a parameter of shape \(3,\) has shape \(4,\)"
    ):
        opt.step()


def test_update_kernel_text():
    """The generated WGSL, without a GPU: no loops (the loop budget cannot bite), every scalar
    from the info words (nothing per step baked in), each written operand stored once."""
    from pyrite.kernels.optim import adam_rule, update_kernel

    rule, names = adam_rule(True, True, True, False)
    ops = (("p", "f16", True), ("m", "f32", True), ("v", "f32", True), ("vmax", "f32", True))
    src = update_kernel((*ops, ("g", "f16", False)), rule, names).wgsl
    assert "for (" not in src and "loop" not in src and "while" not in src
    for j, s in enumerate(names):
        assert f"let {s} = bitcast<f32>(info[{1 + 5 + j}]);" in src
    for name, _, _ in ops:
        assert src.count(f"b_{name}[i_{name}] =") == 1
    assert "enable f16;" in src and "p_f16(p)" in src
    assert "var<storage, read> b_g" in src
    # the flags choose the text; the numbers never do
    assert adam_rule(True, True, True, False) == (rule, names)
    assert adam_rule(False, True, True, False)[0] != rule
