"""The table behind kernels/mathlib.py's p_digamma_root: digamma's negative roots r_k, one in
each interval (-k, -k + 1), found with mpmath (40 digits), each as f32 hi + f32 lo (hi + lo is
r_k to ~2^-48 relative) beside f32(pi / sin(pi r_k)), as the select tree p_digamma_root is.

    .venv/bin/python scripts/digamma_roots.py   # prints p_digamma_root's body
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 40
K = 64  # roots in (-64, 0); below, p_digamma's plain reflection (see its comment)


def root(k):
    # psi increases from -inf to +inf on (-k, -k + 1): bisect, then polish
    lo, hi = mp.mpf(-k) + mp.mpf("1e-30"), mp.mpf(-k + 1) - mp.mpf("1e-30")
    for _ in range(200):
        mid = (lo + hi) / 2
        if mp.digamma(mid) < 0:
            lo = mid
        else:
            hi = mid
    return mp.findroot(mp.digamma, (lo + hi) / 2)


def table():
    rows = []
    for k in range(1, K + 1):
        r = root(k)
        hi = np.float32(float(r))
        lo = np.float32(float(r - mp.mpf(float(hi))))
        s = np.float32(float(mp.pi / mp.sinpi(r)))
        rows.append((hi, lo, s))
    # shortest round-trip digits; a decimal read as f64 and then rounded to f32 (as naga may)
    # must give the same f32
    for v in (hi, lo, s):
        assert np.float32(float(str(v))) == v
    return rows


def table_rows(rows):
    """The rows as kernels/mathlib.py keeps them (_DIGAMMA_ROOTS: each row's components, comma-separated;
    mathlib's _select_table makes the WGSL)."""
    return [f'    "{", ".join(str(v) for v in row)}",' for row in rows]


if __name__ == "__main__":
    print("_DIGAMMA_ROOTS = [\n" + "\n".join(table_rows(table())) + "\n]")
