"""The layers, optimizer and schedules added over existing functional forms (nn.Unfold, Fold,
CosineSimilarity, PairwiseDistance, LocalResponseNorm, MaxUnpool1d/2d/3d, LPPool1d/2d/3d,
ChannelShuffle, FractionalMaxPool2d/3d; optim.Rprop; lr_scheduler.CyclicLR; optim.swa_utils)
against torch CPU: forward and input gradients on fresh awkward inputs (torch in float64),
optimizer trajectories and state, schedule sequences, reprs and constructor errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.testing.tolerance import F32_U, assert_close
from tests.oracle import OLDER_TORCH, assert_repr_matches, older_torch_mark
from tests.test_lr_scheduler import _assert_same, _optimizers, _record
from tests.test_optim import (
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
)

tnn = torch.nn


# ---- layers: forward and gradient against torch ----------------------------------------------
def _samples(shape, rng):
    """FractionalMaxPool's _random_samples, the same numbers on both sides."""
    return rng.uniform(0.0, 1.0, size=shape).astype(np.float32)


def _pool_indices(dims, shape, kw, rng):
    """(pooled values, their indices): what a MaxUnpool takes, from torch's max_pool."""
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    pool = getattr(torch.nn.functional, f"max_pool{dims}d")
    out, idx = pool(x, return_indices=True, **kw)
    return out.numpy(), idx.numpy()


# id, constructor (given the nn namespace and the rng's shared arrays), inputs (given rng:
# float arrays, gradients taken, but for FractionalMaxPool, whose backward pyrite lacks; int
# arrays, not), forward kwargs, longest reduction K
CASES = [
    (
        "unfold",
        lambda nn, a: nn.Unfold(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        lambda rng: [rng.standard_normal((2, 3, 7, 9)).astype(np.float32)],
        {},
        1,
    ),
    (
        "unfold_unbatched",
        lambda nn, a: nn.Unfold(3, stride=2),
        lambda rng: [rng.standard_normal((5, 7, 6)).astype(np.float32)],
        {},
        1,
    ),
    (
        "fold",
        # L = 6 x 3 blocks of (2, 3) in (5, 7) padded (1, 0) with stride (1, 2)
        lambda nn, a: nn.Fold((5, 7), (2, 3), padding=(1, 0), stride=(1, 2)),
        lambda rng: [rng.standard_normal((2, 3 * 6, 18)).astype(np.float32)],
        {},
        6,
    ),
    (
        "fold_unbatched_dilated",
        # L = 3 x 5 blocks of (2, 2) dilated 2 in (5, 6), stride 1
        lambda nn, a: nn.Fold(output_size=(5, 6), kernel_size=2, dilation=2),
        lambda rng: [rng.standard_normal((4 * 2, 3 * 4)).astype(np.float32)],
        {},
        4,
    ),
    (
        "cosine_similarity",
        lambda nn, a: nn.CosineSimilarity(dim=1, eps=1e-6),
        lambda rng: [rng.standard_normal((3, 5, 4)).astype(np.float32) for _ in range(2)],
        {},
        5,
    ),
    (
        "cosine_similarity_broadcast",
        lambda nn, a: nn.CosineSimilarity(dim=-1),
        lambda rng: [
            rng.standard_normal((4, 7)).astype(np.float32),
            rng.standard_normal((1, 7)).astype(np.float32),
        ],
        {},
        7,
    ),
    (
        "pairwise_distance",
        lambda nn, a: nn.PairwiseDistance(),
        lambda rng: [rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2)],
        {},
        7,
    ),
    (
        "pairwise_distance_p1_keepdim",
        lambda nn, a: nn.PairwiseDistance(p=1.0, eps=1e-3, keepdim=True),
        lambda rng: [rng.standard_normal((3, 11)).astype(np.float32) for _ in range(2)],
        {},
        11,
    ),
    (
        "pairwise_distance_p3",
        lambda nn, a: nn.PairwiseDistance(p=3),
        lambda rng: [rng.standard_normal((2, 3, 5)).astype(np.float32) for _ in range(2)],
        {},
        5,
    ),
    (
        "local_response_norm",
        lambda nn, a: nn.LocalResponseNorm(3),
        lambda rng: [rng.standard_normal((2, 5, 4, 3)).astype(np.float32)],
        {},
        3,
    ),
    (
        "local_response_norm_wide",
        lambda nn, a: nn.LocalResponseNorm(4, alpha=0.1, beta=0.6, k=2.0),
        lambda rng: [rng.standard_normal((3, 7, 5)).astype(np.float32)],
        {},
        4,
    ),
    (
        "max_unpool1d",
        lambda nn, a: nn.MaxUnpool1d(3, stride=2, padding=1),
        lambda rng: list(
            _pool_indices(1, (2, 3, 11), {"kernel_size": 3, "stride": 2, "padding": 1}, rng)
        ),
        {},
        1,
    ),  # fmt: skip
    (
        "max_unpool2d_output_size",
        lambda nn, a: nn.MaxUnpool2d(2),
        lambda rng: list(_pool_indices(2, (2, 3, 7, 9), {"kernel_size": 2}, rng)),
        {"output_size": [7, 9]},
        1,
    ),
    (
        "max_unpool2d_unbatched",
        lambda nn, a: nn.MaxUnpool2d((2, 3), stride=(2, 1)),
        lambda rng: list(
            _pool_indices(2, (3, 6, 7), {"kernel_size": (2, 3), "stride": (2, 1)}, rng)
        ),
        {},
        1,
    ),  # fmt: skip
    (
        "max_unpool3d",
        lambda nn, a: nn.MaxUnpool3d(2, stride=2),
        lambda rng: list(_pool_indices(3, (1, 2, 5, 6, 7), {"kernel_size": 2, "stride": 2}, rng)),
        {"output_size": (5, 6, 7)},
        1,
    ),  # fmt: skip
    (
        "lp_pool1d",
        lambda nn, a: nn.LPPool1d(2, 3, stride=2),
        lambda rng: [rng.standard_normal((2, 3, 11)).astype(np.float32)],
        {},
        3,
    ),
    (
        "lp_pool2d_fractional_p_ceil",
        lambda nn, a: nn.LPPool2d(1.5, (2, 3), stride=(1, 2), ceil_mode=True),
        lambda rng: [rng.uniform(0.1, 2.0, (2, 3, 7, 8)).astype(np.float32)],
        {},
        6,
    ),
    (
        "lp_pool2d_unbatched",
        lambda nn, a: nn.LPPool2d(3, 2),
        lambda rng: [rng.uniform(0.1, 2.0, (3, 5, 7)).astype(np.float32)],
        {},
        4,
    ),
    (
        "lp_pool3d",
        lambda nn, a: nn.LPPool3d(2, 2, stride=(1, 2, 2)),
        lambda rng: [rng.standard_normal((1, 2, 5, 6, 7)).astype(np.float32)],
        {},
        8,
    ),
    (
        "channel_shuffle",
        lambda nn, a: nn.ChannelShuffle(3),
        lambda rng: [rng.standard_normal((2, 6, 5, 3)).astype(np.float32)],
        {},
        1,
    ),
    (
        "channel_shuffle_1d",
        lambda nn, a: nn.ChannelShuffle(2),
        lambda rng: [rng.standard_normal((3, 10, 7)).astype(np.float32)],
        {},
        1,
    ),
    (
        "fractional_max_pool2d",
        lambda nn, a: nn.FractionalMaxPool2d(3, output_size=(4, 5), _random_samples=a),
        lambda rng: [rng.standard_normal((2, 3, 11, 9)).astype(np.float32)],
        {},
        1,
    ),
    (
        "fractional_max_pool2d_ratio_indices",
        lambda nn, a: nn.FractionalMaxPool2d(
            (2, 3), output_ratio=(0.5, 0.6), return_indices=True, _random_samples=a
        ),
        lambda rng: [rng.standard_normal((2, 3, 10, 13)).astype(np.float32)],
        {},
        1,
    ),
    (
        "fractional_max_pool3d",
        lambda nn, a: nn.FractionalMaxPool3d(
            2, output_size=3, return_indices=True, _random_samples=a
        ),
        lambda rng: [rng.standard_normal((1, 2, 7, 8, 9)).astype(np.float32)],
        {},
        1,
    ),  # fmt: skip
]


def _shared(case_id, rng):
    """The arrays both constructors take (FractionalMaxPool's samples: (N, C, dims))."""
    if case_id.startswith("fractional_max_pool3d"):
        return _samples((1, 2, 3), rng)
    if case_id.startswith("fractional_max_pool2d"):
        return _samples((2, 3, 2), rng)
    return None


def _as(module, a):
    if a is None:
        return None
    return torch.from_numpy(a) if module is tnn else pr.tensor(a)


def _flat(out):
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_layer_matches_torch(case, rng):
    name, make, inputs, kwargs, k = case
    shared = _shared(name, rng)
    tm, pm = make(tnn, _as(tnn, shared)), make(pr.nn, _as(pr.nn, shared))
    assert_repr_matches(pm, tm)
    assert list(pm.state_dict()) == list(tm.state_dict())
    arrays = inputs(rng)
    grad = not name.startswith("fractional")
    t_in = [torch.from_numpy(a) for a in arrays]
    t_in = [t.double().requires_grad_(grad) if t.is_floating_point() else t for t in t_in]
    p_in = [pr.tensor(a) for a in arrays]
    p_in = [p.requires_grad_(grad) if p.is_floating_point() else p for p in p_in]
    ref, got = _flat(tm.double()(*t_in, **kwargs)), _flat(pm(*p_in, **kwargs))
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        r = r.detach().numpy()
        if r.dtype == np.int64:  # FractionalMaxPool's indices: exact
            np.testing.assert_array_equal(g.numpy(), r)
            continue
        scale = max(1.0, float(np.abs(r).max()) if r.size else 1.0)
        assert_close(g, r, atol=8 * k * F32_U * scale)

    if not grad:
        return
    # the input gradients under a random upstream gradient
    up = rng.standard_normal(ref[0].shape).astype(np.float32)
    ref[0].backward(torch.from_numpy(up).double())
    got[0].backward(pr.tensor(up))
    for t, p in zip(t_in, p_in):
        if not t.requires_grad:
            continue
        r = t.grad.numpy()
        scale = max(1.0, float(np.abs(r).max()))
        assert p.grad is not None, name
        assert_close(p.grad, r, atol=64 * k * F32_U * scale)


def test_unpool_default_and_inferred_output_size(rng):
    """The output size forward's `output_size` picks (one of the sizes the pool could have
    come from), given as the spatial sizes or the full shape."""
    out, idx = _pool_indices(2, (2, 3, 9, 8), {"kernel_size": 2}, rng)
    tm, pm = tnn.MaxUnpool2d(2), pr.nn.MaxUnpool2d(2)
    for size in (None, [9, 8], (2, 3, 9, 9)):
        ref = tm(torch.from_numpy(out), torch.from_numpy(idx), output_size=size)
        got = pm(pr.tensor(out), pr.tensor(idx), output_size=size)
        np.testing.assert_array_equal(got.numpy(), ref.numpy())


def test_lppool_stride_none_repr_and_norm_type_int(rng):
    x = rng.uniform(0.1, 1.0, (2, 3, 7)).astype(np.float32)
    tm, pm = tnn.LPPool1d(2, 3), pr.nn.LPPool1d(2, 3)
    assert_repr_matches(pm, tm)
    assert pm.stride is None and pm.norm_type == 2
    assert_close(pm(pr.tensor(x)), tm(torch.from_numpy(x)).numpy(), atol=64 * F32_U)


def test_fractional_max_pool_fresh_samples(rng):
    """Without _random_samples each forward draws new ones: outputs are still window maxima
    of the right shape (every value an input value)."""
    x = rng.standard_normal((2, 3, 11, 9)).astype(np.float32)
    m = pr.nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True)
    out, idx = m(pr.tensor(x))
    assert out.shape == (2, 3, 5, 4) and idx.shape == (2, 3, 5, 4)
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(
        out.numpy().reshape(2, 3, -1), np.take_along_axis(flat, idx.numpy().reshape(2, 3, -1), -1)
    )


# ---- layers: reprs and constructor errors ------------------------------------------------------
REPRS = [
    lambda nn: nn.Unfold(3),
    lambda nn: nn.Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1),
    lambda nn: nn.CosineSimilarity(),
    lambda nn: nn.PairwiseDistance(p=1.5, keepdim=True),
    lambda nn: nn.LocalResponseNorm(2, alpha=0.5),
    lambda nn: nn.MaxUnpool1d(3),
    lambda nn: nn.MaxUnpool2d((2, 3), stride=1, padding=(0, 1)),
    lambda nn: nn.MaxUnpool3d(2, padding=1),
    lambda nn: nn.LPPool1d(1.5, 3, stride=2, ceil_mode=True),
    lambda nn: nn.LPPool2d(2, (2, 3)),
    lambda nn: nn.LPPool3d(4, 2, stride=(1, 2, 2)),
    lambda nn: nn.ChannelShuffle(4),
    lambda nn: nn.FractionalMaxPool2d(3, output_ratio=0.5),
    lambda nn: nn.FractionalMaxPool3d((2, 2, 3), output_size=(3, 4, 5)),
]


@pytest.mark.parametrize("make", REPRS, ids=range(len(REPRS)))
def test_repr_and_attributes_match_torch(make):
    tm, pm = make(tnn), make(pr.nn)
    assert_repr_matches(pm, tm)
    for key in getattr(type(tm), "__constants__", []):
        assert getattr(pm, key) == getattr(tm, key), key


_KERNEL_SIZE_TEXT = older_torch_mark("words it 'kernel_size must greater than 0'")


@pytest.mark.parametrize(
    "call",
    [
        "nn.FractionalMaxPool2d(2)",
        "nn.FractionalMaxPool2d(2, output_size=3, output_ratio=0.5)",
        "nn.FractionalMaxPool2d(2, output_ratio=(0.5, 1.0))",
        "nn.FractionalMaxPool3d(2)",
        pytest.param("nn.FractionalMaxPool3d(0, output_size=3)", marks=_KERNEL_SIZE_TEXT),
        pytest.param("nn.FractionalMaxPool3d((2, 0, 2), output_size=3)", marks=_KERNEL_SIZE_TEXT),
        "nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, 1.5))",
    ],
)
def test_constructor_errors_match_torch(call):
    with pytest.raises(ValueError) as want:
        eval(call, {"nn": tnn})
    with pytest.raises(ValueError) as got:
        eval(call, {"nn": pr.nn})
    assert str(got.value) == str(want.value)


def test_forward_errors(rng):
    x = pr.tensor(rng.standard_normal((2, 6, 5)).astype(np.float32))
    with pytest.raises(RuntimeError, match="divisible by groups"):
        pr.nn.ChannelShuffle(4)(x)
    with pytest.raises(ValueError, match="3D or higher"):
        pr.nn.LocalResponseNorm(2)(x[0, 0])
    idx = pr.tensor(np.zeros((2, 6, 5), np.float32))
    with pytest.raises(TypeError, match="integer type"):
        pr.nn.MaxUnpool1d(2)(x, idx)


# ---- Rprop ---------------------------------------------------------------------------------
RPROP = [
    ("Rprop", {}),
    # the step sizes reach step_sizes' maximum within the steps
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.1)}),
    # ... and its minimum
    ("Rprop", {"lr": 1e-3, "etas": (0.1, 1.1), "step_sizes": (5e-4, 1.0)}),
    ("Rprop", {"lr": 0.02, "maximize": True, "foreach": False}),
]


@pytest.mark.parametrize("config", RPROP, ids=_ids)
def test_rprop_matches_torch(config, rng):
    pair = Pair(*config, rng)
    pair.step(rng, STEPS)
    _compare(pair, STEPS)


def test_rprop_sign_branches(rng):
    """Gradients that keep their sign, flip it and are exactly zero, element by element: all
    three factors (etaplus, etaminus, 1) and the skipped move after a flip."""
    w = rng.standard_normal((3, 7)).astype(np.float32)
    p, t = pr.tensor(w).requires_grad_(), torch.tensor(w).requires_grad_()
    po, to = pr.optim.Rprop([p], lr=0.1), torch.optim.Rprop([t], lr=0.1)
    base = rng.standard_normal((3, 7)).astype(np.float32)
    for s in range(6):
        g = base * np.where(rng.random((3, 7)) < 0.3, -1.0, 1.0).astype(np.float32)
        g[0, : s + 1] = 0.0
        p.grad, t.grad = pr.tensor(g), torch.tensor(g)
        po.step()
        to.step()
        _close(p.numpy(), _t_np(t), s + 1, f"param, step {s}")
        for key in ("prev", "step_size"):
            _close(po.state[p][key].numpy(), _t_np(to.state[t][key]), s + 1, key)


def test_rprop_state_dict_round_trips(rng):
    pair = Pair(*RPROP[1], rng)
    pair.step(rng, 3)
    sd, t_sd = pair.pr_opt.state_dict(), pair.t_opt.state_dict()
    assert sd["param_groups"] == t_sd["param_groups"]
    for k, s in t_sd["state"].items():
        assert list(sd["state"][k]) == list(s)
    copies = [pr.tensor(_t_np(t)).requires_grad_() for t in pair.t_params]
    from_torch = pair.make(pr.optim, copies)
    from_torch.load_state_dict(_torch_sd_to_pyrite(t_sd))
    t_copies = [torch.tensor(p.numpy()).requires_grad_() for p in pair.pr_params]
    t_from_pr = pair.make(torch.optim, t_copies)
    t_from_pr.load_state_dict(_pyrite_sd_to_torch(sd))
    for _ in range(2):
        gs = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        for params, opt, wrap in (
            (pair.t_params, pair.t_opt, torch.tensor),
            (copies, from_torch, pr.tensor),
            (t_copies, t_from_pr, torch.tensor),
        ):
            for p, g in zip(params, gs):
                p.grad = wrap(g)
            opt.step()
    for i, t in enumerate(pair.t_params):
        _close(copies[i].numpy(), _t_np(t), 5, "from torch's state dict")
        _close(_t_np(t_copies[i]), _t_np(t), 5, "torch from pyrite's state dict")
        for key in ("prev", "step_size"):
            _close(_value(from_torch.state[copies[i]][key]), _t_np(pair.t_opt.state[t][key]), 5, key)  # fmt: skip
    assert from_torch.state[copies[0]]["step"] == 5


def test_rprop_errors(rng):
    a = pr.tensor(rng.standard_normal(3).astype(np.float32)).requires_grad_()
    ta = torch.zeros(3, requires_grad=True)
    for kw in ({"lr": -1}, {"etas": (1.5, 2.0)}, {"etas": (0.5, 0.9)}, {"etas": (0.0, 1.2)}):
        with pytest.raises(ValueError) as want:
            torch.optim.Rprop([ta], **kw)
        with pytest.raises(ValueError) as got:
            pr.optim.Rprop([a], **kw)
        assert str(got.value) == str(want.value)
    assert pr.optim.Rprop([a]).defaults == torch.optim.Rprop([ta]).defaults


# ---- CyclicLR ------------------------------------------------------------------------------
class _Halving:
    """A callable object scale_fn (its __dict__ goes into the state dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base ** (x - 1)


CYCLIC = {
    "triangular": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "triangular-down": lambda m, o: m.CyclicLR(
        o, base_lr=[0.01, 0.002], max_lr=[0.1, 0.03], step_size_up=3, step_size_down=7
    ),
    "triangular2": lambda m, o: m.CyclicLR(
        o, base_lr=0.001, max_lr=0.05, step_size_up=5, step_size_down=2, mode="triangular2"
    ),
    "exp_range": lambda m, o: m.CyclicLR(
        o, base_lr=0.01, max_lr=0.2, step_size_up=4, mode="exp_range", gamma=0.95
    ),
    "scale_fn-cycle": lambda m, o: m.CyclicLR(
        o, 0.01, 0.1, step_size_up=3, scale_fn=_Halving(), scale_mode="cycle"
    ),
    "scale_fn-iterations": lambda m, o: m.CyclicLR(
        o,
        0.01,
        0.1,
        step_size_up=6,
        scale_fn=lambda x: 0.9**x,
        scale_mode="iterations",
        base_momentum=0.7,
        max_momentum=0.95,
    ),  # fmt: skip
    "no-momentum": lambda m, o: m.CyclicLR(
        o, 0.05, 0.5, step_size_up=2, step_size_down=5, cycle_momentum=False
    ),
}


@pytest.mark.parametrize(
    "name,kind", [(n, "SGD") for n in CYCLIC] + [("triangular", "Adam"), ("exp_range", "Adam")]
)
def test_cyclic_sequence_matches_torch(name, kind):
    o_pr, o_t = _optimizers(kind)
    s_pr = CYCLIC[name](pr.optim.lr_scheduler, o_pr)
    s_t = CYCLIC[name](torch.optim.lr_scheduler, o_t)
    assert s_pr.get_last_lr() == pytest.approx(s_t.get_last_lr(), rel=1e-12)
    assert s_pr.base_lrs == s_t.base_lrs and s_pr.max_lrs == s_t.max_lrs
    assert (s_pr.total_size, s_pr.step_ratio, s_pr.scale_mode) == (
        s_t.total_size,
        s_t.step_ratio,
        s_t.scale_mode,
    )
    for g_pr, g_t in zip(o_pr.param_groups, o_t.param_groups):
        assert {k: v for k, v in g_pr.items() if k != "params"} == {
            k: v for k, v in g_t.items() if k != "params"
        }
    _assert_same(_record(o_pr, s_pr, 30), _record(o_t, s_t, 30))


@pytest.mark.parametrize("name", ["triangular2", "exp_range", "scale_fn-cycle"])
def test_cyclic_state_dict_resumes(name):
    o_pr, o_t = _optimizers()
    s_pr = CYCLIC[name](pr.optim.lr_scheduler, o_pr)
    s_t = CYCLIC[name](torch.optim.lr_scheduler, o_t)
    _record(o_pr, s_pr, 10)
    _record(o_t, s_t, 10)
    sd, t_sd = s_pr.state_dict(), s_t.state_dict()
    assert set(sd) == set(t_sd)
    assert sd["_scale_fn_custom"] == t_sd["_scale_fn_custom"]
    o2, _ = _optimizers()
    o2.load_state_dict(o_pr.state_dict())
    s2 = CYCLIC[name](pr.optim.lr_scheduler, o2)
    s2.load_state_dict(sd)
    _assert_same(_record(o2, s2, 12), _record(o_t, s_t, 12))


def test_cyclic_errors():
    for module, opt in (
        (pr.optim, pr.optim.SGD([pr.zeros(2).requires_grad_()], lr=0.1, momentum=0.9)),
        (torch.optim, torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1, momentum=0.9)),
    ):  # fmt: skip
        m = module.lr_scheduler
        with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
            m.CyclicLR(opt, 0.01, 0.1, mode="sawtooth")
        with pytest.raises(ValueError, match="base_lr must have the same length"):
            m.CyclicLR(opt, [0.01, 0.02], 0.1)
        with pytest.raises(TypeError, match="is not an Optimizer"):
            m.CyclicLR(object(), 0.01, 0.1)
    for opt in (
        pr.optim.Rprop([pr.zeros(2).requires_grad_()]),
        torch.optim.Rprop([torch.zeros(2, requires_grad=True)]),
    ):
        m = (
            pr.optim.lr_scheduler
            if isinstance(opt, pr.optim.Optimizer)
            else torch.optim.lr_scheduler
        )
        with pytest.raises(ValueError, match="must support momentum or beta1"):
            m.CyclicLR(opt, 0.01, 0.1)
        m.CyclicLR(opt, 0.01, 0.1, cycle_momentum=False)  # fine without momentum cycling


# ---- swa_utils -----------------------------------------------------------------------------
def _models(rng):
    """A Linear -> BatchNorm1d model in torch and the same weights in pyrite."""
    tm = tnn.Sequential(tnn.Linear(5, 3), tnn.BatchNorm1d(3))
    pm = pr.nn.Sequential(pr.nn.Linear(5, 3), pr.nn.BatchNorm1d(3))
    _copy_weights(tm, pm, rng)
    return tm, pm


def _copy_weights(tm, pm, rng):
    """Fresh random values into both models' parameters (and running statistics)."""
    with torch.no_grad(), pr.no_grad():
        for (_, t), (_, p) in zip(tm.state_dict().items(), pm.state_dict().items()):
            if t.is_floating_point():
                a = rng.uniform(0.5, 1.5, tuple(t.shape)).astype(np.float32)
                t.copy_(torch.from_numpy(a))
                p.copy_(pr.tensor(a))


SWA = {
    "default": {},
    "avg_fn-ema": {"avg_fn_ema": 0.8},
    "multi_avg_fn-ema": {"multi_ema": 0.9},
    "use_buffers": {"use_buffers": True},
    "ema-use_buffers": {"multi_ema": 0.7, "use_buffers": True},
}


def _averaged(mod, model, opts):
    kw = {"use_buffers": opts.get("use_buffers", False)}
    if "avg_fn_ema" in opts:
        kw["avg_fn"] = mod.get_ema_avg_fn(opts["avg_fn_ema"])
    if "multi_ema" in opts:
        kw["multi_avg_fn"] = mod.get_ema_multi_avg_fn(opts["multi_ema"])
    return mod.AveragedModel(model, **kw)


@pytest.mark.parametrize("name", list(SWA))
def test_averaged_model_matches_torch(name, rng):
    tm, pm = _models(rng)
    ta = _averaged(torch.optim.swa_utils, tm, SWA[name])
    pa = _averaged(pr.optim.swa_utils, pm, SWA[name])
    assert list(pa.state_dict()) == list(ta.state_dict())
    for _ in range(4):
        _copy_weights(tm, pm, rng)
        ta.update_parameters(tm)
        pa.update_parameters(pm)
    assert int(pa.n_averaged.item()) == int(ta.n_averaged.item()) == 4
    for (k, t), (_, p) in zip(ta.state_dict().items(), pa.state_dict().items()):
        if t.is_floating_point():
            assert_close(p, t.numpy(), atol=32 * F32_U, msg=k)
    # the copy is independent of the model it was made from
    assert all(p is not q for p, q in zip(pa.module.parameters(), pm.parameters()))
    x = rng.standard_normal((4, 5)).astype(np.float32)
    ta.eval()
    pa.eval()
    with torch.no_grad():
        ref = ta(torch.from_numpy(x)).numpy()
    assert_close(pa(pr.tensor(x)), ref, atol=64 * F32_U * max(1.0, float(np.abs(ref).max())))


def test_update_bn_matches_torch(rng):
    tm, pm = _models(rng)
    tm.eval()
    pm.eval()
    batches = [rng.standard_normal((n, 5)).astype(np.float32) for n in (4, 7, 3)]
    torch.optim.swa_utils.update_bn([(torch.from_numpy(b), 0) for b in batches], tm)
    pr.optim.swa_utils.update_bn([(pr.tensor(b), 0) for b in batches], pm)
    assert not pm.training and pm[1].momentum == tm[1].momentum == 0.1
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        t, p = tm[1].state_dict()[key], pm[1].state_dict()[key]
        assert_close(p, t.numpy(), atol=64 * F32_U, msg=key)
    pr.optim.swa_utils.update_bn([], pr.nn.Linear(2, 2))  # no BatchNorm: nothing to do


SWALR = {
    "cos": lambda m, o: m.SWALR(o, swa_lr=0.05, anneal_epochs=5),
    "linear-per-group": lambda m, o: m.SWALR(
        o, swa_lr=[0.02, 0.005], anneal_epochs=7, anneal_strategy="linear"
    ),
    "no-anneal": lambda m, o: m.SWALR(o, swa_lr=0.03, anneal_epochs=0),
}


@pytest.mark.parametrize("name", list(SWALR))
def test_swalr_sequence_matches_torch(name):
    o_pr, o_t = _optimizers()
    s_pr = SWALR[name](pr.optim.swa_utils, o_pr)
    s_t = SWALR[name](torch.optim.swa_utils, o_t)
    assert s_pr.get_last_lr() == pytest.approx(s_t.get_last_lr(), rel=1e-12)
    _assert_same(_record(o_pr, s_pr, 30), _record(o_t, s_t, 30))
    assert set(s_pr.state_dict()) == set(s_t.state_dict())


def test_swa_errors():
    for mod, opt in (
        (pr.optim.swa_utils, pr.optim.SGD([pr.zeros(2).requires_grad_()], lr=0.1)),
        (torch.optim.swa_utils, torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1)),
    ):
        strategy = "anneal_strategy must be one of"
        if OLDER_TORCH and mod is torch.optim.swa_utils:  # torch < 2.13: "must by one of"
            strategy = "anneal_strategy must b[ey] one of"
        with pytest.raises(ValueError, match=strategy):
            mod.SWALR(opt, 0.01, anneal_strategy="step")
        with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0"):
            mod.SWALR(opt, 0.01, anneal_epochs=-1)
        with pytest.raises(ValueError, match="Invalid decay value 1.5"):
            mod.get_ema_avg_fn(1.5)
        with pytest.raises(ValueError, match="Invalid decay value -0.1"):
            mod.get_ema_multi_avg_fn(-0.1)
    lin = pr.nn.Linear(2, 2)
    fn = pr.optim.swa_utils.get_swa_avg_fn()
    with pytest.raises(AssertionError, match="Only one of avg_fn and multi_avg_fn"):
        pr.optim.swa_utils.AveragedModel(lin, avg_fn=fn, multi_avg_fn=fn)


def test_exported_names():
    assert set(pr.optim.swa_utils.__all__) == set(torch.optim.swa_utils.__all__)
    for name in ("Rprop", "swa_utils"):
        assert name in pr.optim.__all__
    assert "CyclicLR" in pr.optim.lr_scheduler.__all__
    for name in (
        "Unfold", "Fold", "CosineSimilarity", "PairwiseDistance", "LocalResponseNorm",
        "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d",
        "ChannelShuffle", "FractionalMaxPool2d", "FractionalMaxPool3d",
    ):  # fmt: skip
        assert name in pr.nn.__all__ and getattr(pr.nn, name).__name__ == name
