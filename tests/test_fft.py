"""pyrite.fft against torch.fft (CPU) and numpy's float64 FFT: values, options and gradients.

Tolerance: a DFT output is a sum of n terms of size |x|, computed here as a few short float32
dot products (four-step, pyrite/fft.py) and by torch as a float32 FFT; with random signs each
result's rounding error grows like sqrt(n)·eps·max|x| (measured: ~5·sqrt(n)·eps·rms|x| at
n = 4096). TOL(n) = 32·sqrt(n)·eps·max|x| allows ~6x that, for both libraries' errors together.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr

EPS = 2.0**-24


def tol(n, x):
    return 32 * math.sqrt(n) * EPS * float(np.abs(x).max())


def crandn(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def close(got, want, n, x):
    g = got.detach().numpy() if isinstance(got, pr.Tensor) else got
    w = want.detach().numpy()
    assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
    err = np.abs(g.astype(np.complex128) - w).max() if g.size else 0.0
    assert err <= tol(n, x), f"err {err}, tol {tol(n, x)}"


SIZES = [1, 2, 7, 13, 64, 65, 97, 128, 1000]


@pytest.mark.parametrize("n", SIZES)
def test_fft_ifft_parity(rng, n):
    x = crandn(rng, 3, n)
    p, t = pr.tensor(x), torch.tensor(x)
    for norm in (None, "backward", "ortho", "forward"):
        close(pr.fft.fft(p, norm=norm), torch.fft.fft(t, norm=norm), n, x)
        close(pr.fft.ifft(p, norm=norm), torch.fft.ifft(t, norm=norm), n, x)


@pytest.mark.parametrize("n", SIZES)
def test_rfft_irfft_parity(rng, n):
    x = rng.standard_normal((2, 3, n)).astype(np.float32)
    p, t = pr.tensor(x), torch.tensor(x)
    for norm in (None, "ortho", "forward"):
        y = torch.fft.rfft(t, norm=norm)
        close(pr.fft.rfft(p, norm=norm), y, n, x)
        close(
            pr.fft.irfft(pr.tensor(y.numpy()), n, norm=norm),
            torch.fft.irfft(y, n, norm=norm),
            n,
            y.abs().numpy(),
        )
        m = y.shape[-1]  # default length 2(m - 1); odd n: a different length, as torch
        if m > 1:
            close(
                pr.fft.irfft(pr.tensor(y.numpy()), norm=norm),
                torch.fft.irfft(y, norm=norm),
                2 * m,
                y.abs().numpy(),
            )


def test_n_dim_and_views(rng):
    x = crandn(rng, 5, 11, 6)
    p, t = pr.tensor(x), torch.tensor(x)
    for n, dim in [(8, 1), (17, 1), (3, 0), (None, -3), (70, 2)]:
        close(pr.fft.fft(p, n, dim), torch.fft.fft(t, n, dim), 70, x)
        close(pr.fft.ifft(p, n, dim, "ortho"), torch.fft.ifft(t, n, dim, "ortho"), 70, x)
    v, tv = p.transpose(0, 2)[:, ::2], t.transpose(0, 2)[:, ::2]  # non-contiguous input
    close(pr.fft.fft(v, dim=1), torch.fft.fft(tv, dim=1), 6, x)
    r = rng.standard_normal((7, 9)).astype(np.float32)
    pr_, tr = pr.tensor(r).T, torch.tensor(r).T
    close(pr.fft.rfft(pr_, 12, 0), torch.fft.rfft(tr, 12, 0), 12, r)
    close(pr.fft.fft(pr_), torch.fft.fft(tr), 7, r)  # real input to fft: complex output
    ri = torch.randint(-5, 5, (6,))
    close(pr.fft.fft(pr.tensor(ri.numpy())), torch.fft.fft(ri), 6, 5.0)  # integers: as floats


def test_nd_transforms(rng):
    x = crandn(rng, 3, 6, 5, 4)
    r = rng.standard_normal((3, 6, 5, 4)).astype(np.float32)
    p, t, pr_, tr = pr.tensor(x), torch.tensor(x), pr.tensor(r), torch.tensor(r)
    for name in ("fft2", "ifft2", "fftn", "ifftn"):
        for kw in (
            {},
            {"s": (7, 3)},
            {"dim": (0, 2)},
            {"s": (4, 8, -1), "dim": (0, 1, 3)},
            {"norm": "ortho"},
        ):
            if name.endswith("2") and "dim" in kw and len(kw["dim"]) == 3:
                continue
            close(getattr(pr.fft, name)(p, **kw), getattr(torch.fft, name)(t, **kw), 360, x)
    for kw in ({}, {"s": (7, 6)}, {"dim": (0, 2)}, {"norm": "forward"}):
        close(pr.fft.rfft2(pr_, **kw), torch.fft.rfft2(tr, **kw), 360, r)
        close(pr.fft.rfftn(pr_, **kw), torch.fft.rfftn(tr, **kw), 360, r)
        y = torch.fft.rfftn(tr, **kw)
        close(
            pr.fft.irfftn(pr.tensor(y.numpy()), **kw),
            torch.fft.irfftn(y, **kw),
            360,
            y.abs().numpy(),
        )
        y2 = torch.fft.rfft2(tr, **kw)
        close(
            pr.fft.irfft2(pr.tensor(y2.numpy()), **kw),
            torch.fft.irfft2(y2, **kw),
            360,
            y2.abs().numpy(),
        )


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_hermitian_transforms(rng, norm):
    """hfft/ihfft and their 2-D / n-D forms: odd and even output lengths, trimming and padding,
    non-last dims, a real input to hfft; the same TOL as the transforms they are made of."""
    z = crandn(rng, 5, 6, 17)
    r = rng.standard_normal((5, 6, 17)).astype(np.float32)
    cases = [
        ("hfft", lambda L, Z, R: L.fft.hfft(Z, norm=norm), z, 32),
        ("hfft n odd", lambda L, Z, R: L.fft.hfft(Z, n=29, dim=1, norm=norm), z, 29),
        ("hfft real", lambda L, Z, R: L.fft.hfft(R, n=9, norm=norm), r, 9),
        ("ihfft", lambda L, Z, R: L.fft.ihfft(R, norm=norm), r, 17),
        ("ihfft n", lambda L, Z, R: L.fft.ihfft(R, n=8, dim=0, norm=norm), r, 8),
        ("hfft2", lambda L, Z, R: L.fft.hfft2(Z, norm=norm), z, 6 * 32),
        ("ihfft2", lambda L, Z, R: L.fft.ihfft2(R, s=(4, 9), norm=norm), r, 36),
        ("hfftn", lambda L, Z, R: L.fft.hfftn(Z, s=(7, 11), dim=(0, 2), norm=norm), z, 77),
        ("ihfftn", lambda L, Z, R: L.fft.ihfftn(R, norm=norm), r, 5 * 6 * 17),
    ]
    for what, fn, x, n in cases:
        want = fn(torch, torch.tensor(z), torch.tensor(r))
        got = fn(pr, pr.tensor(z), pr.tensor(r))
        w = want.resolve_conj()
        # TOL(n) of the input, times the factor `norm` scales the sum of n terms by
        factor = {None: 1.0, "ortho": 1 / math.sqrt(n), "forward": 1.0 / n}[norm]
        if what.startswith("ihfft"):
            factor = {None: 1.0 / n, "ortho": 1 / math.sqrt(n), "forward": 1.0}[norm]
        close(got, w, n, np.abs(x).max() * factor)


def test_freqs_and_shifts(rng):
    for n in (1, 6, 7):
        for d in (1.0, 0.3):
            np.testing.assert_allclose(
                pr.fft.fftfreq(n, d).numpy(), torch.fft.fftfreq(n, d).numpy(), rtol=2 * EPS
            )
            np.testing.assert_allclose(
                pr.fft.rfftfreq(n, d).numpy(), torch.fft.rfftfreq(n, d).numpy(), rtol=2 * EPS
            )
    x = crandn(rng, 5, 4, 7)
    r = rng.standard_normal((5, 4, 7)).astype(np.float32)
    for dim in (None, 0, (1, 2), -1):
        for f in ("fftshift", "ifftshift"):
            np.testing.assert_array_equal(
                getattr(pr.fft, f)(pr.tensor(x), dim).numpy(),
                getattr(torch.fft, f)(torch.tensor(x), dim).numpy(),
            )
            np.testing.assert_array_equal(
                getattr(pr.fft, f)(pr.tensor(r), dim).numpy(),
                getattr(torch.fft, f)(torch.tensor(r), dim).numpy(),
            )


@pytest.mark.parametrize("n,limit", [(4096, 8e-7), (1000, 8e-7), (1009, 8e-7)])
def test_error_against_float64(rng, n, limit):
    """The docstring's figures (pyrite/fft.py): four-step (and Bluestein for the prime 1009)
    keep the relative l2 error near eps·(a few), measured 2-4e-7, where one product of length
    n measured 1.15e-6 already at n = 2048."""
    x = crandn(rng, 4, n)
    want = np.fft.fft(x.astype(np.complex128))
    got = pr.fft.fft(pr.tensor(x)).numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < limit
    back = pr.fft.ifft(pr.tensor(got)).numpy()
    assert np.linalg.norm(back - x) / np.linalg.norm(x) < 2 * limit


# ---- autograd ---------------------------------------------------------------------------------
GRAD_CASES = {
    "fft": lambda L, z, r: (L.fft.fft(z, norm="ortho") * L.fft.fft(r)).abs().sum(),
    "ifft_n": lambda L, z, r: L.view_as_real(L.fft.ifft(z, 80, dim=0)).pow(2).sum(),
    "rfft": lambda L, z, r: L.fft.rfft(r, 70).abs().sum(),
    "irfft": lambda L, z, r: (L.fft.irfft(z, 9, dim=0) * L.fft.irfft(z * (1 - 2j), 9, dim=0)).sum(),
    "irfft_default": lambda L, z, r: L.fft.irfft(z * z).pow(2).sum(),
    "fft2": lambda L, z, r: (L.fft.fft2(z) * L.fft.ifft2(r, norm="forward")).real.sum(),
    "rfftn_irfftn": lambda L, z, r: (L.fft.irfftn(L.fft.rfftn(r) * z[:, :3], s=(67, 5)) ** 2).sum(),
    "shift": lambda L, z, r: (L.fft.fftshift(L.fft.fft(r.T), -1) * L.fft.fftfreq(67)).real.sum(),
    "hfft": lambda L, z, r: (L.fft.hfft(z, n=9, dim=0) * L.fft.hfft(z.T, n=9)[:, :67].T).sum(),
    "ihfft2": lambda L, z, r: (L.fft.ihfft2(r) * z[:, :3]).imag.sum(),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_torch(rng, name):
    z = crandn(rng, 67, 5).T.copy().T  # a non-contiguous complex leaf
    r = rng.standard_normal((67, 5)).astype(np.float32)
    outs = {}
    for L in (pr, torch):
        lz, lr = L.tensor(z, requires_grad=True), L.tensor(r, requires_grad=True)
        loss = GRAD_CASES[name](L, lz, lr)
        loss.backward()
        outs[L.__name__] = (loss, lz.grad, lr.grad)
    (lp, gzp, grp), (lt, gzt, grt) = outs["pyrite"], outs["torch"]
    np.testing.assert_allclose(lp.item(), lt.item(), rtol=1e-4)
    for g, w in ((gzp, gzt), (grp, grt)):
        if w is None:
            assert g is None
            continue
        w = w.numpy()
        # a gradient is a transform of a transform (two roundings of the TOL kind)
        np.testing.assert_allclose(
            g.numpy(), w, atol=2 * tol(80 * 67, np.abs(w).max() / math.sqrt(80)), rtol=1e-4
        )


STFT_CASES = [
    {"n_fft": 64, "hop_length": 16, "win_length": 48, "window": "hann"},
    {"n_fft": 31},
    {"n_fft": 32, "hop_length": 7, "window": "hann", "center": False, "normalized": True},
    {"n_fft": 16, "window": "hann", "pad_mode": "constant", "onesided": False},
]


def _stft_kw(lib, kw):
    kw = dict(kw)
    if kw.get("window") == "hann":
        kw["window"] = lib.tensor(torch.hann_window(kw.get("win_length", kw["n_fft"])).numpy())
    return kw


@pytest.mark.parametrize("case", range(len(STFT_CASES)))
def test_stft_istft(rng, case):
    x = rng.standard_normal((2, 301)).astype(np.float32)
    kw = STFT_CASES[case]
    kp, kt = _stft_kw(pr, kw), _stft_kw(torch, kw)
    xp, xt = pr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    sp = pr.stft(xp, return_complex=True, **kp)
    st = torch.stft(xt, return_complex=True, **kt)
    close(sp, st, kw["n_fft"], x)
    ikw = {k: v for k, v in kp.items() if k != "pad_mode"}
    ikt = {k: v for k, v in kt.items() if k != "pad_mode"}
    if kw.get("center", True):  # (torch's NOLA check refuses the uncentred Hann frames' ends)
        yp = pr.istft(sp, length=301, **ikw)
        yt = torch.istft(st, length=301, **ikt)
        close(yp, yt, kw["n_fft"], x)
        # the round trip is the identity: its gradient through both transforms is the upstream
        g = rng.standard_normal((2, 301)).astype(np.float32)
        (yp * pr.tensor(g)).sum().backward()
        (yt * torch.tensor(g)).sum().backward()
    else:
        (sp.abs() ** 2).sum().backward()
        (st.abs() ** 2).sum().backward()
    np.testing.assert_allclose(
        xp.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=tol(4 * kw["n_fft"], xt.grad.numpy())
    )
    assert (
        pr.tensor(x).stft(16, return_complex=True).shape
        == torch.tensor(x).stft(16, return_complex=True).shape
    )


def test_errors():
    x = pr.ones(4)
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        pr.fft.fft(x, norm="bogus")
    with pytest.raises(RuntimeError, match="expects a real input"):
        pr.fft.rfft(pr.ones(4, dtype=pr.complex64))
    with pytest.raises(RuntimeError, match="Invalid number of data points"):
        pr.fft.fft(x, 0)
    with pytest.raises(RuntimeError, match="ihfft expects a real input"):
        pr.fft.ihfft(pr.ones(4, dtype=pr.complex64))
    with pytest.raises(ValueError, match="Invalid normalization mode"):
        pr.fft.hfft(x, norm="bogus")
    with pytest.raises(IndexError):
        pr.fft.fft(x, dim=1)
