"""pyrite.signal.windows against torch.signal.windows in float64 (each window's points within
a few float32 ulps of the float64 window), symmetric and periodic, every length from 0 to 9 and
awkward longer ones, with each window's parameters; torch's refusals; and the small top-level
names torch has beside them (torch.GradScaler, torch.is_storage)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

CASES = {
    "bartlett": {},
    "blackman": {},
    "cosine": {},
    "exponential": {"tau": 2.5},
    "gaussian": {"std": 1.7},
    "general_cosine": {"a": [0.46, 0.23, 0.31]},
    "general_hamming": {"alpha": 0.6},
    "hamming": {},
    "hann": {},
    "kaiser": {"beta": 8.6},
    "nuttall": {},
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("sym", [True, False])
def test_windows_match_torch(name, sym):
    kw = CASES[name]
    for M in (*range(10), 31, 64, 257):
        want = getattr(torch.signal.windows, name)(M, sym=sym, dtype=torch.float64, **kw)
        got = getattr(pr.signal.windows, name)(M, sym=sym, **kw)
        assert got.dtype is pr.float32 and tuple(got.shape) == (M,), (name, M)
        w = want.numpy()
        tol = 8 * 2.0**-24 * max(1.0, float(np.abs(w).max(initial=0.0)))
        np.testing.assert_allclose(got.numpy(), w, rtol=0, atol=tol, err_msg=f"{name} M={M}")
    assert getattr(pr.signal.windows, name)(4, requires_grad=True, **kw).requires_grad


def test_exponential_center_and_refusals():
    want = torch.signal.windows.exponential(9, center=2.0, sym=False, dtype=torch.float64)
    got = pr.signal.windows.exponential(9, center=2.0, sym=False)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=1e-6)
    bad = [
        ("exponential", dict(M=5, center=1.0)),  # center with a symmetric window
        ("exponential", dict(M=5, tau=0.0)),
        ("gaussian", dict(M=5, std=-1.0)),
        ("kaiser", dict(M=5, beta=-1.0)),
        ("hann", dict(M=-1)),
        ("general_cosine", dict(M=5, a=[])),
        ("hann", dict(M=5, dtype="int32")),
    ]
    for name, kw in bad:
        M = kw.pop("M")
        tkw = dict(kw, dtype=getattr(torch, kw["dtype"])) if "dtype" in kw else kw
        with pytest.raises(ValueError) as t_err:
            getattr(torch.signal.windows, name)(M, **tkw)
        pkw = dict(kw, dtype=getattr(pr, kw["dtype"])) if "dtype" in kw else kw
        with pytest.raises(ValueError) as p_err:
            getattr(pr.signal.windows, name)(M, **pkw)
        assert str(t_err.value).split(",")[0][:25] in str(p_err.value), name
    with pytest.raises(TypeError):
        pr.signal.windows.general_cosine(5, a=0.5)


def test_small_top_level_names():
    assert pr.GradScaler is pr.amp.GradScaler
    x = pr.ones(3)
    assert pr.is_storage(x.untyped_storage()) and pr.is_storage(x.storage())
    assert not pr.is_storage(x) and not pr.is_storage([1.0])
