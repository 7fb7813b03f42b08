"""The Chebyshev fits behind kernels/special_more.py (Bessel J/Y/K of orders 0 and 1, Airy Ai):
each function interpolated with mpmath (40 digits) at 72 Chebyshev nodes of its interval, the
coefficients truncated where |c_k| < 1e-9·max|c| (the truncated tail is below f32 rounding).

    .venv/bin/python scripts/special_more_fits.py   # prints the tuples pasted into the kernels
"""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 40
N = 72
CUT = 1e-9


def cheb(f):
    """c_k of f(t) ~ sum' c_k T_k(t) on [-1, 1] (c_0 halved, as kernels/mathlib._cheb wants)."""
    nodes = [mp.cos(mp.pi * (j + mp.mpf(1) / 2) / N) for j in range(N)]
    vals = [f(t) for t in nodes]
    cs = []
    for k in range(N):
        s = mp.fsum(v * mp.cos(mp.pi * k * (j + mp.mpf(1) / 2) / N) for j, v in enumerate(vals))
        cs.append(2 * s / N)
    cs[0] /= 2
    big = max(abs(c) for c in cs)
    last = max(k for k, c in enumerate(cs) if abs(c) >= CUT * big)
    return [float(c) for c in cs[: last + 1]]


def pq(order, x):
    """Hankel's P, Q: J = sqrt(2/(pi x))(P cos chi - Q sin chi), Y = ...(P sin chi + Q cos chi)."""
    chi = x - (2 * order + 1) * mp.pi / 4
    s = mp.sqrt(mp.pi * x / 2)
    j, y = mp.besselj(order, x), mp.bessely(order, x)
    return s * (j * mp.cos(chi) + y * mp.sin(chi)), s * (y * mp.cos(chi) - j * mp.sin(chi))


def x_small(t):  # t = x^2/32 - 1 on [0, 8]
    return mp.sqrt(32 * (t + 1))


def x_log(t):  # t = x^2/2 - 1 on [0, 2] (Y0, Y1's log form)
    return mp.sqrt(2 * (t + 1))


def x_a(t):  # t = (x - 3.5)/1.5 on [2, 5]
    return mp.mpf(3) / 2 * t + mp.mpf(7) / 2


def x_b(t):  # t = (x - 6.5)/1.5 on [5, 8]
    return mp.mpf(3) / 2 * t + mp.mpf(13) / 2


# the zero inside each of [2, 5] and [5, 8]: f = (x - z)·h with h smooth and of one sign, so f
# keeps its relative accuracy at its zero (x - z as (x - z_hi) - z_lo: exact next to it)
ZEROS = {
    "J0": [mp.besseljzero(0, 1), mp.besseljzero(0, 2)],
    "J1": [mp.besseljzero(1, 1), mp.besseljzero(1, 2)],
    "Y0": [mp.besselyzero(0, 2), mp.besselyzero(0, 3)],
    "Y1": [mp.besselyzero(1, 1), mp.besselyzero(1, 2)],
}
FNS = {"J0": (mp.besselj, 0), "J1": (mp.besselj, 1), "Y0": (mp.bessely, 0), "Y1": (mp.bessely, 1)}


def over_zero(name, piece):
    fn, order = FNS[name]
    xf = x_a if piece == 0 else x_b
    z = ZEROS[name][piece]
    return lambda t: fn(order, xf(t)) / (xf(t) - z)


def f32_pair(z):
    """z = hi + lo with hi the float32 nearest z and lo the float32 nearest z - hi."""
    import numpy as np

    hi = np.float32(float(z))
    lo = np.float32(float(z - mp.mpf(float(hi))))
    return float(hi), float(lo)


def x_large(t):  # t = 2·64/x^2 - 1 on [8, inf)
    return 8 / mp.sqrt((t + 1) / 2)


def x_k(t):  # t = x^2/2 - 1 on [0, 2]
    return mp.sqrt(2 * (t + 1))


ZETA_P = mp.mpf(2) / 3 * mp.mpf(2) ** 1.5  # zeta at x = 2
ZETA_N = mp.mpf(16) / 3  # zeta at x = -4


def x_airy_pos(t):  # w = ZETA_P / zeta in (0, 1], t = 2w - 1
    zeta = ZETA_P / ((t + 1) / 2)
    return (3 * zeta / 2) ** (mp.mpf(2) / 3)


def airy_fg(t):  # x <= -4: w = (ZETA_N / zeta)^2, t = 2w - 1
    zeta = ZETA_N / mp.sqrt((t + 1) / 2)
    a = (3 * zeta / 2) ** (mp.mpf(2) / 3)
    r = mp.sqrt(mp.pi) * mp.root(a, 4)
    A, B = mp.airyai(-a) * r, mp.airybi(-a) * r
    phi = zeta + mp.pi / 4
    return A * mp.sin(phi) + B * mp.cos(phi), zeta * (B * mp.sin(phi) - A * mp.cos(phi))


FITS = {
    # J0 = 1 - x^2/4·g and J1/x on [0, 2] in t = x^2/2 - 1
    "J0_SMALL": lambda t: (1 - mp.besselj(0, x_log(t))) * 4 / x_log(t) ** 2,
    "J1_SMALL": lambda t: mp.besselj(1, x_log(t)) / x_log(t),
    **{f"{n}_{p}": over_zero(n, i) for n in ZEROS for i, p in enumerate("AB")},
    "Y0_LOG": lambda t: (
        mp.bessely(0, x_log(t)) - 2 / mp.pi * mp.log(x_log(t)) * mp.besselj(0, x_log(t))
    ),
    "Y1_LOG": lambda t: (
        (
            mp.bessely(1, x_log(t))
            - 2 / mp.pi * (mp.log(x_log(t)) * mp.besselj(1, x_log(t)) - 1 / x_log(t))
        )
        / x_log(t)
    ),
    "P0_LARGE": lambda t: pq(0, x_large(t))[0],
    "Q0_LARGE": lambda t: pq(0, x_large(t))[1] * x_large(t),
    "P1_LARGE": lambda t: pq(1, x_large(t))[0],
    "Q1_LARGE": lambda t: pq(1, x_large(t))[1] * x_large(t),
    "K0_SMALL": lambda t: mp.besselk(0, x_k(t)) + mp.log(x_k(t) / 2) * mp.besseli(0, x_k(t)),
    "K1_SMALL": lambda t: (
        x_k(t) * (mp.besselk(1, x_k(t)) - mp.log(x_k(t) / 2) * mp.besseli(1, x_k(t)))
    ),
    "K0E_LARGE": lambda t: mp.sqrt(4 / (t + 1)) * mp.exp(4 / (t + 1)) * mp.besselk(0, 4 / (t + 1)),
    "K1E_LARGE": lambda t: mp.sqrt(4 / (t + 1)) * mp.exp(4 / (t + 1)) * mp.besselk(1, 4 / (t + 1)),
    "AI_NEG": lambda t: mp.airyai(2 * (t - 1)),  # x = 2t - 2 on [-4, 0]
    "AI_MID": lambda t: mp.airyai(t + 1) * mp.exp(mp.mpf("1.15") * (t + 1)),  # x on [0, 2]
    "AI_POS": lambda t: (
        mp.airyai(x_airy_pos(t))
        * 2
        * mp.sqrt(mp.pi)
        * mp.root(x_airy_pos(t), 4)
        * mp.exp(ZETA_P / ((t + 1) / 2))
    ),
    "AI_F": lambda t: airy_fg(t)[0],
    "AI_G": lambda t: airy_fg(t)[1],
}

if __name__ == "__main__":
    for name, zs in ZEROS.items():
        body = ", ".join(f"{v:.9e}" for z in zs for v in f32_pair(z))
        print(f"# {name} zeros (hi, lo, hi, lo): {body}")
    for name, f in FITS.items():
        cs = cheb(f)
        body = ", ".join(f"{c:.9e}" for c in cs)
        print(f"_{name} = ({body})  # fmt: skip")
