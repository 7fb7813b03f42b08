"""nn.utils.parametrize, nn.utils.parametrizations.weight_norm / spectral_norm and the older
hook-based nn.utils.weight_norm / spectral_norm, against torch: state-dict keys (so checkpoints
move between the two), forward values and parameter gradients with torch's weights loaded
(spectral norm's power-iteration vectors included, over two training-mode calls), removal,
and a user parametrization with right_inverse."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr

TOL = 2e-5


def _load(pm, tm):
    pm.load_state_dict({k: pr.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})


def _close(a, b, what=""):
    b = b.detach().numpy() if isinstance(b, torch.Tensor) else b
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL * max(1.0, np.abs(b).max()), err_msg=what)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("api", ["parametrizations", "hooks"])
@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm"])
@pytest.mark.parametrize("dim", [0, 1, None])
@pytest.mark.parametrize("layer", ["conv", "conv_transpose", "linear"])
def test_norms_match_torch(api, kind, dim, layer, rng):
    make = {
        "conv": lambda lib: lib.nn.Conv2d(4, 5, 3),
        "conv_transpose": lambda lib: lib.nn.ConvTranspose2d(4, 5, 3, stride=2),
        "linear": lambda lib: lib.nn.Linear(7, 3),
    }[layer]
    x = rng.standard_normal((3, 7) if layer == "linear" else (2, 4, 6, 5)).astype(np.float32)
    tm, pm = make(torch), make(pr)
    tfn = getattr(torch.nn.utils.parametrizations if api != "hooks" else torch.nn.utils, kind)
    pfn = getattr(pr.nn.utils.parametrizations if api != "hooks" else pr.nn.utils, kind)
    tfn(tm, dim=dim)
    pfn(pm, dim=dim)
    assert sorted(pm.state_dict()) == sorted(tm.state_dict())
    _load(pm, tm)
    for step in range(2):  # spectral norm: one power-iteration step a training-mode call
        ty, py = tm(torch.tensor(x)), pm(pr.tensor(x))
        _close(py.detach().numpy(), ty, f"forward {step}")
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        (ty * torch.tensor(g)).sum().backward()
        (py * pr.tensor(g)).sum().backward()
        tp, pp = dict(tm.named_parameters()), dict(pm.named_parameters())
        assert sorted(tp) == sorted(pp)
        for k in tp:
            _close(pp[k].grad.numpy(), tp[k].grad, f"grad {k} {step}")
    for k, v in tm.state_dict().items():  # (the power iteration's vectors moved alike)
        _close(pm.state_dict()[k].numpy(), v, k)
    tm.eval()
    pm.eval()
    _close(pm(pr.tensor(x)).detach().numpy(), tm(torch.tensor(x)), "eval")


def test_removal_keeps_the_current_weight(rng):
    lin = pr.nn.Linear(5, 4)
    pr.nn.utils.parametrizations.weight_norm(lin)
    assert type(lin).__name__ == "ParametrizedLinear"
    assert pr.nn.utils.parametrize.is_parametrized(lin, "weight")
    w = lin.weight.detach().numpy().copy()
    pr.nn.utils.parametrize.remove_parametrizations(lin, "weight")
    assert type(lin) is pr.nn.Linear and isinstance(lin.weight, pr.nn.Parameter)
    np.testing.assert_allclose(lin.weight.detach().numpy(), w, rtol=1e-6)
    assert sorted(lin.state_dict()) == ["bias", "weight"]
    conv = pr.nn.Conv1d(3, 2, 3)
    pr.nn.utils.weight_norm(conv)
    w = conv.weight.detach().numpy().copy()
    pr.nn.utils.remove_weight_norm(conv)
    np.testing.assert_allclose(conv.weight.detach().numpy(), w, rtol=1e-6)
    assert sorted(conv.state_dict()) == ["bias", "weight"]
    with pytest.raises(ValueError, match="not found"):
        pr.nn.utils.remove_weight_norm(conv)
    with pytest.raises(RuntimeError, match="two weight_norm"):
        pr.nn.utils.weight_norm(pr.nn.utils.weight_norm(pr.nn.Linear(2, 2)))


class _Symmetric:
    """torch's tutorial parametrization: X ↦ triu(X) + triu(X, 1)ᵀ, right_inverse triu."""

    @staticmethod
    def make(lib):
        class Symmetric(lib.nn.Module):
            def forward(self, X):
                return X.triu() + X.triu(1).transpose(-1, -2)

            def right_inverse(self, A):
                return A.triu()

        return Symmetric()


def test_user_parametrization_with_right_inverse_and_cache(rng):
    a = rng.standard_normal((4, 4)).astype(np.float32)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    mods = []
    for lib in (torch, pr):
        m = lib.nn.Linear(4, 4)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(a))
        lib.nn.utils.parametrize.register_parametrization(m, "weight", _Symmetric.make(lib))
        mods.append(m)
    tm, pm = mods
    _close(pm.weight.detach().numpy(), tm.weight)
    w = pm.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    assert sorted(pm.state_dict()) == sorted(tm.state_dict())
    # assigning goes through right_inverse
    sym = (a + a.T) / 2
    with torch.no_grad():
        tm.weight = torch.tensor(sym)
    with pr.no_grad():
        pm.weight = pr.tensor(sym)
    _close(
        pm.parametrizations.weight.original.detach().numpy(), tm.parametrizations.weight.original
    )
    with pr.nn.utils.parametrize.cached():
        assert pm.weight is pm.weight
    assert pm.weight is not pm.weight
    ty, py = tm(torch.tensor(x)), pm(pr.tensor(x))
    ty.sum().backward()
    py.sum().backward()
    _close(
        pm.parametrizations.weight.original.grad.numpy(), tm.parametrizations.weight.original.grad
    )
    with pytest.raises(ValueError, match="does not have a parameter"):
        pr.nn.utils.parametrize.register_parametrization(pm, "nope", _Symmetric.make(pr))
