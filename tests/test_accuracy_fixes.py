"""Results that were silently less accurate than float32 allows, or different from torch (CPU),
each pinned against an independent float64 / mpmath reference (and torch where it is the bar)."""

from __future__ import annotations

import mpmath
import numpy as np
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F

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


# ---- F.normalize over a size-1 dim with p != 2: the norm kernel's pow (exp2/log2) made the
# norm of one element 4-11 ulp off |x| (torch's is exactly |x|), and the gradient, 0 in exact
# arithmetic, a residue of 7e-6 (torch's f32 1e-6). The norm of one element is |x| now.
def test_normalize_size_one_dim(rng):
    a = rng.standard_normal((5, 1, 7)).astype(np.float32)
    a[0, 0, :3] = 0.0  # below eps: x / eps, as torch
    g = rng.standard_normal(a.shape).astype(np.float32)
    for p in (3.0, 0.5, -1.0, 1.0, float("inf")):
        t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        yt = TF.normalize(t, p=p, dim=1)
        (yt * torch.tensor(g, dtype=torch.float64)).sum().backward()
        x = pr.tensor(a, requires_grad=True)
        y = F.normalize(x, p=p, dim=1)
        (y * pr.tensor(g)).sum().backward()
        # x / max(|x|, eps): one rounding of an exact quotient (+-1 or 0 here)
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=U, atol=0)
        # the gradient g/b - (g·x/b^2)·sign(x), b = |x| >= eps: a few roundings of g/|x|
        bound = 4 * U * np.abs(g) / np.maximum(np.abs(a), 1e-12)
        assert (np.abs(x.grad.numpy() - t.grad.numpy()) <= bound).all(), p
