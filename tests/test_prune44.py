"""nn.utils.prune against torch's: the masks of the deterministic methods (exactly torch's, on
fresh random weights, whose absolute values and channel norms are distinct, so topk's choice is
well-defined), the reparametrization's names (`weight_orig` parameter, `weight_mask` buffer,
`weight` attribute) and state-dict keys, forward values and the masked gradient of
`weight_orig`, repeated pruning through the container, global pruning over several modules,
remove, is_pruned, and the errors. The random methods draw from pyrite's generator, so their
masks are checked by count and by reproducibility under pr.manual_seed, not against torch's."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.utils.prune as tprune

import pyrite as pr
import pyrite.nn.utils.prune as prune

TOL = 2e-5


def _make(layer, lib):
    if layer == "linear":
        return lib.nn.Linear(7, 5)
    return lib.nn.Conv2d(3, 6, (3, 2))


def _input(layer, rng):
    shape = (3, 7) if layer == "linear" else (2, 3, 5, 4)
    return rng.standard_normal(shape).astype(np.float32)


def _pair(layer, rng):
    """A torch module and a pyrite one holding the same fresh random weights."""
    tm, pm = _make(layer, torch), _make(layer, pr)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    pm.load_state_dict({k: pr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return tm, pm


def _np(t):
    return t.detach().numpy()  # (a torch tensor or a pyrite one)


def _close(a, b, what=""):
    a, b = _np(a), _np(b)
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL * max(1.0, np.abs(b).max()), err_msg=what)


def _same_mask(pm, tm, name="weight"):
    pmask, tmask = _np(getattr(pm, name + "_mask")), _np(getattr(tm, name + "_mask"))
    assert pmask.dtype == tmask.dtype
    np.testing.assert_array_equal(pmask, tmask)


def _both(fn, tm, pm, *args, **kwargs):
    """Call torch's prune.<fn> and pyrite's on the pair (tensor kwargs given as numpy)."""
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    pkw = {k: pr.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    assert getattr(tprune, fn)(tm, *args, **tkw) is tm
    assert getattr(prune, fn)(pm, *args, **pkw) is pm


def _check_reparametrized(pm, tm, name="weight"):
    assert name + "_orig" in pm._parameters and name not in pm._parameters
    assert name + "_mask" in pm._buffers and name not in pm._buffers
    assert isinstance(pm._parameters[name + "_orig"], pr.nn.Parameter)
    assert not isinstance(getattr(pm, name), pr.nn.Parameter)
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in pm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in pm.named_buffers()] == [n for n, _ in tm.named_buffers()]
    orig, mask = getattr(pm, name + "_orig"), getattr(pm, name + "_mask")
    np.testing.assert_array_equal(_np(getattr(pm, name)), _np(orig) * _np(mask))


def _check_forward_and_grad(pm, tm, layer, rng, name="weight"):
    x = _input(layer, rng)
    ty, py = tm(torch.tensor(x)), pm(pr.tensor(x))
    _close(py, ty, "forward")
    g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    (ty * torch.tensor(g)).sum().backward()
    (py * pr.tensor(g)).sum().backward()
    tgrads = dict(tm.named_parameters())
    for k, p in pm.named_parameters():
        _close(p.grad, tgrads[k].grad, f"grad {k}")
    grad = _np(getattr(pm, name + "_orig").grad)
    assert np.all(grad[_np(getattr(pm, name + "_mask")) == 0] == 0)  # masked


def test_import_paths():
    import pyrite.nn.utils.prune as by_import

    assert by_import is pr.nn.utils.prune is prune
    for public in (
        "BasePruningMethod PruningContainer Identity RandomUnstructured L1Unstructured "
        "RandomStructured LnStructured CustomFromMask identity random_unstructured "
        "l1_unstructured random_structured ln_structured global_unstructured custom_from_mask "
        "remove is_pruned"
    ).split():
        assert hasattr(prune, public) and hasattr(tprune, public), public


DETERMINISTIC = [
    ("identity", {}),
    ("l1_unstructured", {"amount": 0.37}),
    ("l1_unstructured", {"amount": 5}),
    ("l1_unstructured", {"amount": 0}),
    ("l1_unstructured", {"amount": 1.0}),
    ("ln_structured", {"amount": 2, "n": 2, "dim": 0}),
    ("ln_structured", {"amount": 0.5, "n": 1, "dim": -1}),
    ("ln_structured", {"amount": 1, "n": math.inf, "dim": 1}),
    ("ln_structured", {"amount": 0.4, "n": -math.inf, "dim": 0}),
    ("ln_structured", {"amount": 0, "n": 3, "dim": 0}),
    ("custom_from_mask", {"mask": None}),
]


@pytest.mark.parametrize("layer", ["linear", "conv"])
@pytest.mark.parametrize("fn, kwargs", DETERMINISTIC, ids=lambda v: str(v))
def test_deterministic_matches_torch(layer, fn, kwargs, rng):
    tm, pm = _pair(layer, rng)
    weight_param = pm.weight
    if "mask" in kwargs:
        kwargs = {"mask": (rng.random(tuple(tm.weight.shape)) < 0.6).astype(np.float32)}
    assert not prune.is_pruned(pm)
    _both(fn, tm, pm, "weight", **kwargs)
    assert prune.is_pruned(pm) and tprune.is_pruned(tm)
    assert pm.weight_orig is weight_param  # the parameter itself moved
    _same_mask(pm, tm)
    _check_reparametrized(pm, tm)
    hooks = [h for h in pm._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hooks) == 1 and hooks[0]._tensor_name == "weight"
    assert type(hooks[0]).__name__ == type(next(iter(tm._forward_pre_hooks.values()))).__name__
    _check_forward_and_grad(pm, tm, layer, rng)


def test_l1_importance_scores_and_bias(rng):
    tm, pm = _pair("conv", rng)
    scores = rng.standard_normal(tuple(tm.weight.shape)).astype(np.float32)
    _both("l1_unstructured", tm, pm, "weight", amount=0.5, importance_scores=scores)
    _same_mask(pm, tm)
    _both("l1_unstructured", tm, pm, "bias", amount=2)
    _same_mask(pm, tm, "bias")
    _both("ln_structured", tm, pm, "weight", amount=2, n=1, dim=0, importance_scores=scores)
    _same_mask(pm, tm)
    _check_reparametrized(pm, tm)
    _check_reparametrized(pm, tm, "bias")
    _check_forward_and_grad(pm, tm, "conv", rng)


def test_repeated_pruning_combines_masks(rng):
    tm, pm = _pair("conv", rng)
    steps = [
        ("l1_unstructured", {"amount": 0.3}),
        ("ln_structured", {"amount": 2, "n": 2, "dim": 0}),
        ("l1_unstructured", {"amount": 7}),
        ("ln_structured", {"amount": 0.34, "n": 1, "dim": 1}),
        ("identity", {}),
        ("custom_from_mask", {"mask": (rng.random((6, 3, 3, 2)) < 0.8).astype(np.float32)}),
        ("ln_structured", {"amount": 1, "n": math.inf, "dim": -1}),
    ]
    for i, (fn, kwargs) in enumerate(steps):
        _both(fn, tm, pm, "weight", **kwargs)
        _same_mask(pm, tm)
        hooks = list(pm._forward_pre_hooks.values())
        assert len(hooks) == 1
        if i:
            assert isinstance(hooks[0], prune.PruningContainer) and len(hooks[0]) == i + 1
            assert [type(m).__name__ for m in hooks[0]] == [
                type(m).__name__ for m in next(iter(tm._forward_pre_hooks.values()))
            ]
    _check_reparametrized(pm, tm)
    _check_forward_and_grad(pm, tm, "conv", rng)


def test_global_unstructured_matches_torch(rng):
    pairs = [_pair("linear", rng), _pair("conv", rng), _pair("linear", rng)]
    # one already pruned: the global pass works on what its mask still keeps
    _both("ln_structured", pairs[1][0], pairs[1][1], "weight", amount=1, n=2, dim=0)
    names = ["weight", "weight", "bias"]
    scores = rng.standard_normal((5, 7)).astype(np.float32)
    for tm_or_pm, lib in ((0, torch), (1, pr)):
        params = [(pair[tm_or_pm], n) for pair, n in zip(pairs, names, strict=True)]
        P = tprune if lib is torch else prune
        scored = {params[0]: lib.tensor(scores)}
        P.global_unstructured(
            iter(params) if lib is pr else params,  # (pyrite also takes a generator)
            pruning_method=P.L1Unstructured,
            importance_scores=scored,
            amount=0.45,
        )
    for (tm, pm), n in zip(pairs, names, strict=True):
        _same_mask(pm, tm, n)
        _check_reparametrized(pm, tm, n)
        assert list(pm.state_dict()) == list(tm.state_dict())
    # an int amount, on top of the masks above
    for idx, (P, lib) in enumerate(((tprune, torch), (prune, pr))):
        params = [(pair[idx], n) for pair, n in zip(pairs, names, strict=True)]
        P.global_unstructured(params, pruning_method=P.RandomUnstructured, amount=0)
        P.global_unstructured(params, pruning_method=P.L1Unstructured, amount=9)
    for (tm, pm), n in zip(pairs, names, strict=True):
        _same_mask(pm, tm, n)
    _check_forward_and_grad(pairs[1][1], pairs[1][0], "conv", rng)


def test_remove_makes_pruning_permanent(rng):
    tm, pm = _pair("linear", rng)
    weight_param = pm.weight
    _both("l1_unstructured", tm, pm, "weight", amount=0.4)
    _both("ln_structured", tm, pm, "weight", amount=1, n=2, dim=0)
    _both("l1_unstructured", tm, pm, "bias", amount=2)
    masked = _np(pm.weight).copy()
    _both("remove", tm, pm, "weight")
    assert pm.weight is weight_param and isinstance(pm.weight, pr.nn.Parameter)
    np.testing.assert_array_equal(_np(pm.weight), masked)
    np.testing.assert_array_equal(_np(pm.weight), _np(tm.weight))
    assert "weight_orig" not in pm._parameters and "weight_mask" not in pm._buffers
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert prune.is_pruned(pm)  # the bias still is
    _both("remove", tm, pm, "bias")
    assert not prune.is_pruned(pm) and not tprune.is_pruned(tm)
    assert list(pm.state_dict()) == list(tm.state_dict()) == ["weight", "bias"]
    assert not pm._forward_pre_hooks
    _check_forward_and_grad_plain(pm, tm, rng)


def _check_forward_and_grad_plain(pm, tm, rng):
    x = _input("linear", rng)
    ty, py = tm(torch.tensor(x)), pm(pr.tensor(x))
    _close(py, ty, "forward")
    ty.sum().backward()
    py.sum().backward()
    _close(pm.weight.grad, tm.weight.grad, "grad")  # no longer masked


def test_is_pruned_sees_submodules(rng):
    seq = pr.nn.Sequential(pr.nn.Linear(4, 3), pr.nn.ReLU(), pr.nn.Sequential(pr.nn.Linear(3, 2)))
    assert not prune.is_pruned(seq)
    prune.random_unstructured(seq[2][0], "weight", amount=0.5)
    assert prune.is_pruned(seq) and not prune.is_pruned(seq[0])


def test_state_dict_round_trip_and_training_step(rng):
    tm, pm = _pair("conv", rng)
    _both("l1_unstructured", tm, pm, "weight", amount=0.5)
    # torch's pruned checkpoint (with another mask) loads into the pruned pyrite module
    with torch.no_grad():
        tm.weight_mask.copy_(torch.tensor((rng.random((6, 3, 3, 2)) < 0.5).astype(np.float32)))
    pm.load_state_dict({k: pr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    topt = torch.optim.SGD(tm.parameters(), lr=0.1)
    popt = pr.optim.SGD(pm.parameters(), lr=0.1)
    x = _input("conv", rng)
    for step in range(2):  # the pre-hook recomputes `weight` from the updated weight_orig
        ty, py = tm(torch.tensor(x)), pm(pr.tensor(x))
        _close(py, ty, f"forward {step}")
        _close(pm.weight, tm.weight, f"weight {step}")
        topt.zero_grad()
        popt.zero_grad()
        (ty**2).sum().backward()
        (py**2).sum().backward()
        topt.step()
        popt.step()
    _close(pm.weight_orig, tm.weight_orig, "weight_orig after steps")


def test_prune_method_on_a_tensor(rng):
    t = rng.standard_normal((4, 6)).astype(np.float32)
    s = rng.standard_normal((4, 6)).astype(np.float32)
    m = (rng.random((4, 6)) < 0.7).astype(np.float32)
    cases = [
        lambda P, lib: P.L1Unstructured(amount=0.5).prune(lib.tensor(t)),
        lambda P, lib: P.L1Unstructured(3).prune(lib.tensor(t), importance_scores=lib.tensor(s)),
        lambda P, lib: P.LnStructured(2, n=1, dim=1).prune(lib.tensor(t), lib.tensor(m)),
        lambda P, lib: P.CustomFromMask(lib.tensor(m)).prune(lib.tensor(t)),
        lambda P, lib: P.Identity().prune(lib.tensor(t)),
    ]
    for i, case in enumerate(cases):
        np.testing.assert_array_equal(_np(case(prune, pr)), _np(case(tprune, torch)), str(i))


def _zero_channels(mask, dim):
    other = tuple(d for d in range(mask.ndim) if d != dim)
    per_channel = mask.sum(axis=other)
    full = np.prod([mask.shape[d] for d in other])
    assert set(per_channel.tolist()) <= {0.0, float(full)}  # whole channels only
    return int((per_channel == 0).sum())


@pytest.mark.parametrize("amount", [0.3, 4, 0, 1.0, 36])
def test_random_unstructured_counts_and_seed(amount):
    masks = []
    for seed in (3, 3, 4):
        pr.manual_seed(seed)
        m = pr.nn.Conv2d(3, 6, (2, 1))  # 36 weights
        prune.random_unstructured(m, "weight", amount=amount)
        masks.append(_np(m.weight_mask))
    want = amount if isinstance(amount, int) else round(amount * 36)
    for mask in masks:
        assert int((mask == 0).sum()) == want and set(np.unique(mask)) <= {0.0, 1.0}
    np.testing.assert_array_equal(masks[0], masks[1])
    if 0 < want < 36:
        assert not np.array_equal(masks[0], masks[2])


@pytest.mark.parametrize("amount, dim", [(2, 0), (0.5, 1), (1, -1), (0, 0), (6, 0)])
def test_random_structured_counts_and_seed(amount, dim):
    masks = []
    for seed in (7, 7):
        pr.manual_seed(seed)
        m = pr.nn.Conv2d(4, 6, (3, 2))
        prune.random_structured(m, "weight", amount=amount, dim=dim)
        masks.append(_np(m.weight_mask))
    size = (6, 4, 3, 2)[dim]
    want = amount if isinstance(amount, int) else round(amount * size)
    assert _zero_channels(masks[0], dim % 4) == want
    np.testing.assert_array_equal(masks[0], masks[1])


def test_random_methods_on_top_of_a_mask(rng):
    _, pm = _pair("conv", rng)  # 108 weights
    prune.l1_unstructured(pm, "weight", amount=10)
    before = _np(pm.weight_mask).copy()
    pr.manual_seed(0)
    prune.random_unstructured(pm, "weight", amount=0.5)  # half of the 98 left
    after = _np(pm.weight_mask)
    assert np.all(after[before == 0] == 0) and int((after == 0).sum()) == 10 + 49
    prune.random_structured(pm, "weight", amount=2, dim=0)
    final = _np(pm.weight_mask)
    assert np.all(final[after == 0] == 0)
    per_channel = final.reshape(6, -1).sum(axis=1)
    assert int((per_channel == 0).sum()) >= 2
    kept = after.reshape(6, -1).sum(axis=1) != 0  # channels still alive before
    assert int((kept & (per_channel == 0)).sum()) == 2  # two more whole channels went
    assert list(pm.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    np.testing.assert_array_equal(_np(pm.weight), _np(pm.weight_orig) * final)


# ---- errors: torch's exception types (and messages where they name no shape or module) ------
def _errors(call):
    """The exception torch raises and pyrite's, for `call(prune_module, lib, module)`."""
    out = []
    for P, lib in ((tprune, torch), (prune, pr)):
        m = lib.nn.Linear(7, 5)
        with pytest.raises(Exception) as info:
            call(P, lib, m)
        out.append(info.value)
    return out


ERRORS = {
    "negative int": (lambda P, lib, m: P.l1_unstructured(m, "weight", -1), True),
    "float above 1": (lambda P, lib, m: P.random_unstructured(m, "weight", 1.5), True),
    "negative float": (lambda P, lib, m: P.ln_structured(m, "weight", -0.1, 2, 0), True),
    "string amount": (lambda P, lib, m: P.l1_unstructured(m, "weight", "0.5"), True),
    "None amount": (lambda P, lib, m: P.random_structured(m, "weight", None, 0), True),
    "bool amount": (lambda P, lib, m: P.l1_unstructured(m, "weight", True), True),
    "too many entries": (lambda P, lib, m: P.l1_unstructured(m, "weight", 36), True),
    "too many channels": (lambda P, lib, m: P.ln_structured(m, "weight", 6, 2, 0), True),
    "too many random channels": (lambda P, lib, m: P.random_structured(m, "weight", 8, 1), True),
    "missing name": (lambda P, lib, m: P.l1_unstructured(m, "nope", 0.5), True),
    "remove unpruned": (lambda P, lib, m: P.remove(m, "weight"), False),
    "structured 1-d": (lambda P, lib, m: P.ln_structured(m, "bias", 1, 2, 0), False),
    "dim too large": (lambda P, lib, m: P.ln_structured(m, "weight", 1, 2, 2), False),
    "dim too negative": (lambda P, lib, m: P.random_structured(m, "weight", 1, -3), True),
    "scores shape": (
        lambda P, lib, m: P.l1_unstructured(m, "weight", 1, importance_scores=lib.ones(5, 6)),
        False,
    ),
    "global structured": (
        lambda P, lib, m: P.global_unstructured(
            [(m, "weight")], P.LnStructured, amount=1, n=2, dim=0
        ),
        False,
    ),
    "global not iterable": (lambda P, lib, m: P.global_unstructured(m, P.L1Unstructured), True),
    "global scores list": (
        lambda P, lib, m: P.global_unstructured(
            [(m, "weight")], P.L1Unstructured, importance_scores=[], amount=1
        ),
        True,
    ),
    "container other name": (
        lambda P, lib, m: P.PruningContainer(
            P.l1_unstructured(m, "weight", 1)._forward_pre_hooks.popitem()[1]
        ).add_pruning_method(P.l1_unstructured(m, "bias", 1)._forward_pre_hooks.popitem()[1]),
        False,
    ),
    "container not a method": (
        lambda P, lib, m: P.PruningContainer(
            P.identity(m, "weight")._forward_pre_hooks.popitem()[1]
        ).add_pruning_method(3),
        False,
    ),
    "custom mask shape": (lambda P, lib, m: P.custom_from_mask(m, "weight", lib.ones(7, 5)), False),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_match_torch(case):
    call, same_text = ERRORS[case]
    terr, perr = _errors(call)
    assert type(perr) is type(terr), (perr, terr)
    if same_text:
        assert str(perr) == str(terr)
    else:  # the same but for "pyrite.Size" and the like, and object addresses
        strip = lambda e: re.sub(r"0x[0-9a-f]+", "0x", str(e).replace("pyrite", "torch"))  # noqa: E731
        assert strip(perr) == strip(terr), (str(perr), str(terr))


def test_failed_pruning_rolls_back_as_torch(rng):
    tm, pm = _pair("linear", rng)
    weight_param = pm.weight
    for P, m in ((tprune, tm), (prune, pm)):
        with pytest.raises(ValueError):
            P.l1_unstructured(m, "weight", amount=40)
    assert pm.weight is weight_param and list(pm.state_dict()) == list(tm.state_dict())
    assert not prune.is_pruned(pm)
    # a failure on top of earlier pruning leaves what torch leaves: the reparametrization
    # without its hook
    _both("l1_unstructured", tm, pm, "weight", amount=3)
    for P, m in ((tprune, tm), (prune, pm)):
        with pytest.raises(ValueError, match="prune=32"):
            P.l1_unstructured(m, "weight", amount=33)
    assert list(pm.state_dict()) == list(tm.state_dict())
    assert prune.is_pruned(pm) == tprune.is_pruned(tm) is False
    _same_mask(pm, tm)
