"""Results that were silently less accurate than float32 allows, or different from torch (CPU),
each pinned against an independent float64 / mpmath reference (and torch where it is the bar)."""

from __future__ import annotations

import mpmath
import numpy as np
import torch

import pyrite as pr

U = 2.0**-24  # f32's unit roundoff


def _ulps(got, want):
    """|got - want| in units of the f32 spacing at want (the error relative to the result)."""
    want = np.asarray(want, np.float64)
    spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    return np.abs(np.asarray(got, np.float64) - want) / spacing


# ---- digamma near its negative roots: psi(1 - x) - pi·cot(pi x) cancelled there, ~1e7 ulp off
# at the f32 neighbours of the roots (torch's f32 5e7). The reflection is written about the
# interval's root now (kernels/mathlib.py p_digamma). Its bound: sinpi(d) 0.65 ulp, sinpi(x)
# 0.76, the table's pi/sin(pi r) 0.5, two roundings, the psi-difference term (<= 0.17 of the
# result, a few ulp of its own) and the final sum, amplified by <= 1/(1 - 0.17): 5 ulp.
DIGAMMA_ULPS = 5.0


def _digamma_mp(xs):
    mpmath.mp.dps = 30
    return np.array([float(mpmath.digamma(mpmath.mpf(float(v)))) for v in xs])


def test_digamma_at_its_negative_roots(rng):
    ks = sorted({1, 2, 3, 4, 5, 6, 17, 40, 64, *rng.integers(7, 64, 3).tolist()})
    xs = []
    for k in ks:
        # the root of (-k, -k + 1), found in float64 by bisection on torch's float64 digamma
        lo, hi = -float(k) + 1e-9, -float(k) + 1.0 - 1e-9
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (
                (mid, hi)
                if torch.digamma(torch.tensor(mid, dtype=torch.float64)) < 0
                else (lo, mid)
            )
        bits = np.float32(0.5 * (lo + hi)).view(np.int32)
        xs.append((bits + np.arange(-20, 21)).astype(np.int32).view(np.float32))
    x = np.concatenate(xs)
    want = _digamma_mp(x)
    err = _ulps(pr.digamma(pr.tensor(x)).numpy(), want)
    assert err.max() <= DIGAMMA_ULPS, (x[err.argmax()], err.max())
    err0 = _ulps(pr.polygamma(0, pr.tensor(x)).numpy(), want)
    assert err0.max() <= DIGAMMA_ULPS
    # torch's own f32 is far off here: the bar pyrite now beats
    assert _ulps(torch.digamma(torch.tensor(x)).numpy(), want).max() > 1e3


def test_digamma_negative_uniform(rng):
    x = rng.uniform(-64.0, 0.0, 3001).astype(np.float32)
    x = x[x != np.floor(x)]
    want = torch.digamma(torch.tensor(x, dtype=torch.float64)).numpy()
    err = _ulps(pr.digamma(pr.tensor(x)).numpy(), want)
    assert err.max() <= DIGAMMA_ULPS, (x[err.argmax()], err.max())
    # below -64, the plain reflection (as torch): an absolute bound of a few ulp of its terms,
    # psi(1 - x) ~ log|x| and pi·cot(pi x), each ~2 ulp
    x = rng.uniform(-3000.0, -64.0, 2003).astype(np.float32)
    x = x[x != np.floor(x)]
    want = torch.digamma(torch.tensor(x, dtype=torch.float64)).numpy()
    got = pr.digamma(pr.tensor(x)).numpy().astype(np.float64)
    terms = np.log(1.0 - x.astype(np.float64)) + np.abs(
        np.pi / np.tan(np.pi * x.astype(np.float64))
    )
    assert (np.abs(got - want) <= 8 * U * terms).all()
