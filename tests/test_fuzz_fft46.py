"""Regressions of the session-46 differential fuzz of pyrite.fft, stft / istft and the window
functions (scripts/fuzz_fft.py) against torch 2.13 CPU, each minimized to a named parity test,
plus a small seeded run of the fuzz itself.

Found and fixed by it:
- `n` of a bool or a float (fft(x, n=4.0), n=True) and `s` holding a float were accepted (read
  through int()): torch raises TypeError; an int `s` (torch reads s=5 as (5,)) raised a raw
  "object of type 'int' has no len()" (pyrite/fft.py `_int_n`, `_int_s`);
- istft accepted a spectrum whose frequency count is neither n_fft // 2 + 1 (one-sided) nor
  n_fft (two-sided), and a hop_length longer than win_length, returning numbers: torch raises;
- istft of a two-sided spectrum (onesided=False) into a real signal took the real part of its
  ifft; torch inverts its first n_fft // 2 + 1 bins through irfft, which differs for a spectrum
  that is not Hermitian (pyrite/stft.py);
- stft of an integer signal was computed: torch refuses it;
- stft with a complex window raised from rfft: torch gives the two-sided complex spectrum (and
  refuses onesided=True; istft refuses a complex window for a real result);
- pr.signal.windows took a float M (7.5 gave a window of 8 points): torch raises TypeError.
The fuzz's other differences are documented choices or torch CPU limits (the script's docstring).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")
U = 2.0**-24


def _crandn(rng, *shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


# ---- n and s: ints only, an int s is (s,) --------------------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda L, x: L.fft.fft(x, n=4.0),
        lambda L, x: L.fft.rfft(x, n=True),
        lambda L, x: L.fft.irfft(x, n=6.0),
        lambda L, x: L.fft.hfft(x, n=False),
        lambda L, x: L.fft.fftn(x, s=(3.0,), dim=(0,)),
        lambda L, x: L.fft.irfft2(x, s=(2, 4.5)),
    ],
    ids=["fft", "rfft", "irfft", "hfft", "fftn", "irfft2"],
)
def test_transform_lengths_of_other_types_are_refused(call, rng):
    x = rng.standard_normal((5, 7)).astype(np.float32)
    assert fuzzing.raises_alike(lambda L: call(L, L.tensor(x))) == [TypeError, TypeError]


@pytest.mark.parametrize("name", ["fftn", "rfftn", "ifft2", "irfftn", "hfftn", "ihfftn"])
def test_an_int_s_is_one_length(name, rng):
    real_in = name in ("rfftn", "ihfftn")
    x = rng.standard_normal((4, 11)).astype(np.float32) if real_in else _crandn(rng, 4, 11)
    n = 13
    dim = (-1,) if name != "ifft2" else (0, 1)
    s = n if name != "ifft2" else None
    if name == "ifft2":  # (an int s needs one dim; fft2's default has two: both refuse)
        assert fuzzing.raises_alike(lambda L: L.fft.ifft2(L.tensor(x), s=n))[0] is not None
        return
    want = getattr(torch.fft, name)(torch.tensor(x), s=s, dim=dim).resolve_conj().numpy()
    got = getattr(pr.fft, name)(pr.tensor(x), s=s, dim=dim).numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    # one transform of length 13: the fuzz's bound K·u·G·s·||x_line||, G = sqrt(13), K = 8
    bound = 8 * U * math.sqrt(n) * np.linalg.norm(x, axis=-1).max() * 2
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


# ---- istft's checks ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_fft,F,onesided", [(16, 8, None), (16, 16, True), (16, 9, False),
                                              (9, 6, None), (9, 5, False)])  # fmt: skip
def test_istft_refuses_a_frequency_count_that_is_not_n_fft_s(n_fft, F, onesided, rng):
    z = _crandn(rng, F, 7)
    w = np.hanning(n_fft + 2)[1:-1].astype(np.float32)

    def fn(L):
        return L.istft(L.tensor(z), n_fft, window=L.tensor(w), onesided=onesided)

    assert fuzzing.raises_alike(fn) == [RuntimeError, RuntimeError]


def test_istft_refuses_a_hop_longer_than_the_window(rng):
    z = _crandn(rng, 9, 6)

    def fn(L):
        return L.istft(L.tensor(z), 16, hop_length=13, win_length=12, window=L.ones(12))

    assert fuzzing.raises_alike(fn) == [RuntimeError, RuntimeError]


@pytest.mark.parametrize("n_fft,hop", [(31, 7), (16, 4), (65, 16)])
def test_istft_of_a_two_sided_spectrum_inverts_its_first_half_as_torch(n_fft, hop, rng):
    """A random (not Hermitian) two-sided spectrum: torch keeps bins 0 .. n_fft // 2 and irffts
    them; the real part of its ifft is another signal."""
    z = _crandn(rng, 2, n_fft, 9)
    w = rng.uniform(0.3, 1.2, n_fft).astype(np.float32)
    kw = dict(hop_length=hop, onesided=False)
    want = torch.istft(torch.tensor(z).cdouble(), n_fft, window=torch.tensor(w).double(), **kw)
    got = pr.istft(pr.tensor(z), n_fft, window=pr.tensor(w), **kw).numpy()
    want = want.numpy()
    assert got.shape == want.shape
    # each sample: an overlap-add of ceil(n_fft / hop) windowed irffts divided by the window's
    # squared sum env (>= min w^2 here): the fuzz's istft bound, coarsened to its maximum
    frames = math.ceil(n_fft / hop)
    line = np.sqrt((np.abs(z[:, : n_fft // 2 + 1]) ** 2).sum(1)).max()
    core = 8 * U * frames * (math.sqrt(n_fft) * math.sqrt(2) * line / n_fft * w.max())
    bound = core * math.sqrt(n_fft) / float(w.min() ** 2) + 8 * U * frames * np.abs(want)
    np.testing.assert_array_less(np.abs(got - want), bound)


def _t(L, kw):
    return {k: L.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}


# ---- stft: integer signals, complex windows ---------------------------------------------------
def test_stft_refuses_an_integer_signal(rng):
    x = rng.integers(-5, 5, 40).astype(np.int32)
    assert fuzzing.raises_alike(lambda L: L.stft(L.tensor(x), 8, return_complex=True)) == [
        RuntimeError,
        RuntimeError,
    ]


@pytest.mark.parametrize("return_complex", [True, False])
def test_stft_with_a_complex_window_is_two_sided(return_complex, rng):
    x = rng.standard_normal((2, 53)).astype(np.float32)
    w = _crandn(rng, 13)
    kw = dict(hop_length=5, win_length=13, return_complex=return_complex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.stft(torch.tensor(x).double(), 16, window=torch.tensor(w).cdouble(), **kw)
    got = pr.stft(pr.tensor(x), 16, window=pr.tensor(w), **kw).numpy()
    want = want.numpy()
    assert got.shape == want.shape
    # one 16-point DFT of x·w per frame: K·u·G·||x_frame·w||, G = sqrt(16)
    bound = 8 * U * 4 * np.abs(w).max() * math.sqrt(13) * np.abs(x).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=bound + U * np.abs(want).max())
    kw = dict(hop_length=5, win_length=13, window=w)
    one = fuzzing.raises_alike(
        lambda L: L.stft(L.tensor(x), 16, onesided=True, return_complex=True, **_t(L, kw))
    )
    assert one == [RuntimeError, RuntimeError]
    spec = torch.stft(torch.tensor(x), 16, return_complex=True, **_t(torch, kw)).numpy()
    back = fuzzing.raises_alike(lambda L: L.istft(L.tensor(spec), 16, **_t(L, kw)))
    assert back == [RuntimeError, RuntimeError]


# ---- the windows' length -------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hann", "kaiser", "gaussian", "bartlett", "cosine"])
def test_signal_window_of_a_float_length_is_refused(name):
    assert fuzzing.raises_alike(lambda L: getattr(L.signal.windows, name)(7.5)) == [
        TypeError,
        TypeError,
    ]
    assert fuzzing.raises_alike(lambda L: getattr(L.signal.windows, name)(np.int64(5)))[0] is None


# ---- the fuzz itself, a small seeded run ---------------------------------------------------------
def _fuzz():
    return fuzzing.load_script("fuzz_fft")


def test_seeded_fuzz_of_fft_stft_and_windows_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 300)]
    fails = fuzzing.seeded_failures(fz, seeds)
    assert not fails, "\n".join(fails)


def test_kaiser_window_takes_beta_only_after_periodic():
    """torch's overloads: kaiser_window(N, beta=b) is a TypeError; (N, periodic, beta) takes
    any beta, a negative one too."""
    with pytest.raises(TypeError):
        torch.kaiser_window(7, beta=-1.0)
    with pytest.raises(TypeError, match="periodic"):
        pr.kaiser_window(7, beta=-1.0)
    for args in ((7,), (7, True, -1.0), (9, False, 5.0), (1, False, 3.0)):
        np.testing.assert_allclose(
            pr.kaiser_window(*args).numpy(),
            torch.kaiser_window(*args).numpy(),
            rtol=2e-6,
            atol=1e-7,
        )
