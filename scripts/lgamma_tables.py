"""The tables and fits behind kernels/mathlib.py's lgamma (p_lgamma, p_lgamma_pos), from mpmath:

- p_lgamma_root: lgamma's negative roots r (|Gamma(r)| = 1; two in each (-k, -k + 1), k >= 3,
  none on (-2, 0), where |Gamma| > 2.3) for k = K0..K, each as f32 hi + f32 lo (r to ~2^-48
  relative) beside f32(cot(pi r)) and f32(1 / sin(pi r)), as a select tree. Row 2(k - K0) is the
  root nearer -k + 1, row 2(k - K0) + 1 the one nearer -k. Each root is bisected in its distance
  to its pole with 40 digits past that distance (1/k! for large k).
- _LGAMMA_M3: on (-3, -2), |Gamma(x)| - 1 = (x - r1)(x - r2)·M(x) / (p q) with p = -2 - x,
  q = x + 3 (from |Gamma(x)| = Gamma(x + 4) / (x (x + 1) p q)); M is analytic on (-4, -1), a
  Chebyshev series in s = 2x + 5. Printed with the two roots as hi + lo.
- _LGAMMA_TC: on [1.25, 1.75], lgamma(x) = lgamma(tc) + (x - tc)^2·Q(x) about the minimum
  tc = 1.46163... (digamma's positive root); Q is analytic beyond (0, 2.4), a Chebyshev series
  in s = 4x - 6. Printed with tc and lgamma(tc) as hi + lo.

Each Chebyshev series is interpolated at 72 nodes (40 digits) and cut where |c_k| < 1e-9·max|c|
(below f32 rounding).

    .venv/bin/python scripts/lgamma_tables.py   # prints p_lgamma_root's body and the fits
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

K0, K = 4, 19  # p_lgamma_root's intervals (-k, -k + 1), k = K0..K: 32 rows


def _lg(x):
    return mp.log(abs(mp.gamma(x)))


def _digits(k):
    return 40 + int(math.lgamma(k + 1) / math.log(10))


def roots(k):
    """lgamma's two roots in (-k, -k + 1), k >= 3, as mpf (the one nearer -k + 1 first)."""
    with mp.workdps(_digits(k)):
        # |Gamma| falls from inf at either end to its minimum at digamma's root m, below 1
        m = mp.findroot(mp.digamma, -k + 0.5 - 0.5 / math.log(k + 1))
        assert -k < m < -k + 1 and _lg(m) < 0, (k, m)
        out = []
        for pole in (-k + 1, -k):
            # bisect the distance e = |x - pole| geometrically: lgamma decreases from inf at e = 0
            side = 1 if m > pole else -1
            lo, hi = mp.mpf(10) ** -(_digits(k) - 35), abs(m - pole)
            assert _lg(pole + side * lo) > 0
            for _ in range(300):  # to the working precision
                mid = mp.sqrt(lo * hi)
                if _lg(pole + side * mid) > 0:
                    lo = mid
                else:
                    hi = mid
            out.append(pole + side * (lo + hi) / 2)
        return out


def _f32(v):
    """v as an f32 whose shortest digits read back (as f64, then rounded to f32, as naga may)
    to the same f32."""
    f = np.float32(float(v))
    assert np.isfinite(f) and np.float32(float(str(f))) == f, v
    return f


def _split(v):
    hi = _f32(v)
    return hi, _f32(v - mp.mpf(float(hi)))


def table():
    rows = []
    for k in range(K0, K + 1):
        for r in roots(k):
            with mp.workdps(_digits(k)):
                hi, lo = _split(r)
                rows.append((hi, lo, _f32(mp.cot(mp.pi * r)), _f32(1 / mp.sinpi(r))))
    return rows


def cheb(f, n=72, cut=1e-9):
    """c_k of f(s) ~ sum c_k T_k(s) on [-1, 1] (c_0 halved, as kernels/mathlib._cheb wants)."""
    nodes = [mp.cos(mp.pi * (j + mp.mpf(1) / 2) / n) for j in range(n)]
    vals = [f(s) for s in nodes]
    cs = []
    for k in range(n):
        s = mp.fsum(v * mp.cos(mp.pi * k * (j + mp.mpf(1) / 2) / n) for j, v in enumerate(vals))
        cs.append(2 * s / n)
    cs[0] /= 2
    big = max(abs(c) for c in cs)
    last = max(k for k, c in enumerate(cs) if abs(c) >= cut * big)
    return [float(c) for c in cs[: last + 1]]


def m3_fit():
    r1, r2 = roots(3)
    with mp.workdps(40):

        def m(s):
            x = s / 2 - mp.mpf(5) / 2
            p, q = -2 - x, x + 3
            return (mp.gamma(x + 4) / (x * (x + 1)) - p * q) / ((x - r1) * (x - r2))

        return cheb(m), [_split(r1), _split(r2)]


def tc_fit():
    with mp.workdps(40):
        tc = mp.findroot(mp.digamma, 1.46)
        tf = mp.loggamma(tc)

        def q(s):
            x = (s + 6) / 4
            return (mp.loggamma(x) - tf) / (x - tc) ** 2

        return cheb(q), _split(tc), _split(tf)


def table_rows(rows):
    """The rows as kernels/mathlib.py keeps them (_LGAMMA_ROOTS: each row's components, comma-separated;
    mathlib's _select_table makes the WGSL)."""
    return [f'    "{", ".join(str(v) for v in row)}",' for row in rows]


def _tuple(name, cs):
    return f"{name} = (" + ", ".join(f"{c:.9e}" for c in cs) + ")  # fmt: skip"


if __name__ == "__main__":
    print("_LGAMMA_ROOTS = [\n" + "\n".join(table_rows(table())) + "\n]")
    cs, split = m3_fit()
    print(_tuple("_LGAMMA_M3", cs))
    print("roots of (-3, -2):", ", ".join(f"{str(hi)} + {str(lo)}" for hi, lo in split))
    cs, tc, tf = tc_fit()
    print(_tuple("_LGAMMA_TC", cs))
    print(f"tc = {str(tc[0])} + {str(tc[1])}, lgamma(tc) = {str(tf[0])} + {str(tf[1])}")
