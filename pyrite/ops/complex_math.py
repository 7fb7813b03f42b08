"""Elementwise functions of complex64 tensors (logs, roots, powers, trig and hyperbolic
functions and their inverses), each a composition of recorded float32 ops on the real and
imaginary parts, so autograd gives torch's conjugate-Wirtinger gradient (ops/complex.py).

Conventions, as torch's CPU kernels (glibc's c*f functions and c10's complex division):
principal branches; the cuts lie on the real or imaginary axis, and a signed zero on a cut
picks its side (sqrt(-4 - 0j) = -2j, log(-1 - 0j) = -πi). Each function is built from parts
whose float32 error is stated beside it; "ulp" there means 2⁻²⁴ times the magnitude named.
Every part is computed in the forms that keep float32 honest: |z| scaled (hypot), log|z| by
log1p near |z| = 1, sqrt by the half-angle formula with no cancellation, reciprocals by Smith's
scaling, tanh by Kahan's form, and the inverse functions by Kahan's square-root products
("Branch cuts for complex elementary functions", 1987).

Where an intermediate could be NaN or inf in a branch that `where` does not select, the branch's
operands are made safe first, so no NaN leaks into the other branch's gradient.
"""

from __future__ import annotations

import cmath
import math

from ..tensor import Tensor
from .complex import _C, _PYCOMPLEX, _R, _float, _is_c, as_complex

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# ---- parts ------------------------------------------------------------------------------------
def _parts(z):
    """(re, im) float32 views of a complex tensor (a real tensor: itself and zeros)."""
    if not _is_c(z):
        from .creation import zeros_like

        x = _float(z)
        return x, zeros_like(x)
    p = _R(z)
    return p[..., 0], p[..., 1]


def _make(re, im):
    """The complex tensor re + i·im (broadcast)."""
    from .combine import stack

    if re._shape != im._shape:
        from .core import broadcast_shapes

        shape = broadcast_shapes(re._shape, im._shape)
        re, im = re.expand(shape), im.expand(shape)
    return _C(stack([re, im], -1))


def _where(c, a, b):
    from .elementwise import where

    return where(c, a, b)


def _max(a, b):
    from .elementwise import maximum

    return maximum(a, b)


def _min(a, b):
    from .elementwise import minimum

    return minimum(a, b)


def _hypot(x, y):
    """|x + iy| without overflow or underflow (hypot: within ~1 ulp)."""
    from .mathops import hypot

    return hypot(x, y)


def _copysign(a, b):
    from .mathops import copysign

    return copysign(a, b)


def _atan2(y, x):
    from .elementwise import atan2

    return atan2(y, x)


def _full_like(x, value):
    from .creation import full_like

    return full_like(x, value)


def _finite(x):
    return x.isfinite()


def _inf(x):
    return x.isinf()


# ---- |z|, 1/z -----------------------------------------------------------------------------------
def abs_(z):
    """|z|, float32, within ~1.5 ulp of |z|; z scaled by max(|re|, |im|) (held constant, so the
    gradient is z/|z|'s, and 0 at z = 0 as torch's) so no square overflows or underflows.
    An infinite part gives inf even beside a NaN (C's hypot, torch's: |NaN + inf·i| = inf)."""
    from .linalg_norms import vector_norm

    p = _R(z)
    with _no_grad():
        s = p.abs().amax(-1, keepdim=True)
        s = _where((s == 0) | (s == math.inf) | (s != s), 1.0, s)
        inf = (p.abs() == math.inf).any(-1)
    return _where(inf, math.inf, vector_norm(p / s, 2, dim=-1) * s[..., 0])


def _no_grad():
    from .. import autograd

    return autograd.no_grad()


def _cdiv_parts(a, b, c, d):
    """(a + ib)/(c + id) by Smith's scaling, term for term c10's complex division (what torch's
    CPU divides and takes reciprocals with, so its signed zeros too): within ~3 ulp of
    |quotient| for every finite operands whose quotient is a normal float32. A zero divisor
    gives (a/0, b/0) as c10's: 1/0 = inf + NaN·i. a, b may be Python floats."""
    first = c.abs() >= d.abs()
    big = _where(first, c, d)
    small = _where(first, d, c)
    # A divisor below 2^-60 is scaled by 2^64 first (exact) and the quotient by 2^64 after:
    # where both parts sit near float32's smallest normal, small·rat is subnormal, and a GPU
    # that flushes subnormals dropped it (the H100: 1/(1.196e-38 - 1.297e-38i) came out
    # 7.11e37 + 7.71e37i, torch 3.84e37 + 4.17e37i). The same bits elsewhere.
    k = _where((big.abs() < 2.0**-60) & (big != 0), 2.0**64, 1.0)
    big, small = big * k, small * k
    bs = _where(big == 0, 1.0, big)  # (no 0/0 in the unused branch: its gradient stays finite)
    rat = small / bs
    scl = k / (bs + small * rat)
    # |c| >= |d|: ((a + b·rat)·scl, (b - a·rat)·scl); else ((a·rat + b)·scl, (b·rat - a)·scl)
    re = _where(first, (a + b * rat) * scl, (a * rat + b) * scl)
    im = _where(first, (b - a * rat) * scl, (b * rat - a) * scl)
    zero = (c == 0) & (d == 0)
    with _no_grad():  # (a/0 has no gradient to give, and its NaN would leak through where)
        zr = _full_like(c, 0.0)
        za = (a.detach() if isinstance(a, Tensor) else a) / zr
        zb = (b.detach() if isinstance(b, Tensor) else b) / zr
    return _where(zero, za, re), _where(zero, zb, im)


def _recip_parts(x, y):
    """1/(x + iy): _cdiv_parts(1, 0, x, y)."""
    return _cdiv_parts(1.0, 0.0, x, y)


def div(z, w):
    """z / w for complex tensors (broadcast), by _cdiv_parts."""
    a, b = _parts(z)
    c, d = _parts(w)
    return _make(*_cdiv_parts(a, b, c, d))


def reciprocal(z):
    """1/z (Smith's scaling; see _recip_parts)."""
    return _make(*_recip_parts(*_parts(z)))


# ---- exp, log -----------------------------------------------------------------------------------
def _exp_parts(x, y):
    """e^x (cos y, sin y): each part within ~2 ulp of |e^z| (exp, cos, sin each ~1 ulp on
    lavapipe); overflows where e^x does (x > 88.7) though |e^z| may not; exp(-inf + iy) = 0 for
    any y, as C's."""
    m = x.exp()
    re, im = m * y.cos(), m * y.sin()
    fy = _finite(y)
    # exp(-inf + iy) = ±0 ± 0i (signs of cos y, sin y; of y itself when y is inf or NaN), and
    # exp(+inf + iy) = inf + NaN·i for an infinite or NaN y, as C's
    dead = x == -math.inf
    ys = _where(fy, y, 0.0)
    re = _where(dead, _where(fy, 0.0 * ys.cos(), 0.0), re)
    im = _where(dead, _where(fy, 0.0 * ys.sin(), _copysign(_full_like(y, 0.0), y)), im)
    re = _where((x == math.inf) & ~fy, math.inf, re)
    real = y == 0  # exp(x ± 0i) = e^x ± 0i, also where e^x overflows (inf·0 is no NaN)
    return _where(real, m, re), _where(real, y, im)


def exp(z):
    return _make(*_exp_parts(*_parts(z)))


def _log_abs(x, y):
    """log|x + iy| without overflow: log(m) + log1p((n/m)^2)/2 for m = max(|x|, |y|) outside
    [0.5, 2], else log1p((m - 1)(m + 1) + n^2)/2, which keeps the digits of log|z| near |z| = 1
    (m - 1 is exact there). Error: ~2 ulp of |log|z||, except on |z| ~ 1 with both parts large,
    where (m - 1)(m + 1) + n^2 cancels: ~2 ulp absolute there (glibc carries extra precision)."""
    ax, ay = x.abs(), y.abs()
    m, n = _max(ax, ay), _min(ax, ay)
    near = (m >= 0.5) & (m <= 2.0)
    r_near = ((m - 1.0) * (m + 1.0) + n * n).log1p() * 0.5
    ms = _where(near | (m == 0) | (m == math.inf), 1.0, m)  # (safe in the unused branches)
    q = n / ms
    r_far = ms.log() + (q * q).log1p() * 0.5
    r = _where(near, r_near, r_far)
    r = _where(m == 0, -math.inf, r)
    return _where((ax == math.inf) | (ay == math.inf), math.inf, r)


def _log_parts(x, y):
    """(log|z|, arg z): arg by atan2 (~2 ulp of pi), so arg(-1 ± 0i) = ±π."""
    return _log_abs(x, y), _atan2(y, x)


def log(z):
    """Principal log: real part as _log_abs states, imaginary part atan2(im, re) in [-π, π]."""
    return _make(*_log_parts(*_parts(z)))


def log2(z):
    """log(z) / ln 2 (torch's form): one more rounding than log."""
    re, im = _log_parts(*_parts(z))
    return _make(re / _LN2, im / _LN2)


def log10(z):
    """log(z) / ln 10 (torch's form): one more rounding than log."""
    re, im = _log_parts(*_parts(z))
    return _make(re / _LN10, im / _LN10)


def log1p(z):
    """log(1 + z) by torch's CPU form (numpy's): u = 1 + z; z where u == 1; log(u) where
    u - 1 == z; else log(u)·z/(u - 1), which restores the digits the sum 1 + z rounded away.
    Within ~4 ulp of |log1p z| away from the circle |1 + z| = 1, where log|u|'s cancellation
    leaves ~2 ulp absolute (as log's)."""
    x, y = _parts(z)
    ur = x + 1.0
    d = ur - 1.0  # exact (Sterbenz), so u - 1 = d + iy
    lr, li = _log_parts(ur, y)
    one = (ur == 1.0) & (y == 0)
    same = ((d == x) & (y == y)) | one  # (u - 1 == z: a NaN part compares unequal)
    ds = _where(same, 1.0, d)  # (safe: the ratio is only used where d != x)
    # z/(u - 1) = (x + iy)/(d + iy)
    qr, qi = _cdiv_parts(x, y, ds, y)
    cr, ci = lr * qr - li * qi, lr * qi + li * qr
    re = _where(one, x, _where(same, lr, cr))
    im = _where(one, y, _where(same, li, ci))
    return _make(re, im)


def expm1(z):
    """e^z - 1 by c10's form: (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y; the real part is
    within ~3 ulp of max(|expm1 x|, |1 - cos y|) (cancellation between the two terms aside)."""
    x, y = _parts(z)
    a = (y * 0.5).sin()
    re = x.expm1() * y.cos() - 2.0 * a * a
    im = x.exp() * y.sin()
    return _make(re, im)


# ---- sqrt, rsqrt ----------------------------------------------------------------------------------
def _sqrt_parts(x, y):
    """Principal sqrt by the half-angle form with no cancellation: t = sqrt((|x| + |z|)/2);
    x >= 0: (t, y/2t); x < 0: (|y|/2t, copysign(t, y)). Each part within ~2 ulp of
    |sqrt z|; sqrt(x ± 0i) for x < 0 is ±i·sqrt(-x); an infinite imaginary part gives
    (inf, that inf), as C's.

    z is first scaled by an even power of two, so the root scales back exactly: by 1/4 where
    max(|x|, |y|) >= 2^126 (|z| itself, up to sqrt(2)·FLT_MAX, overflowed in the hypot: sqrt
    of 3e38 + 3e38i was inf; torch's is finite) and by 2^50 below 2^-100 (subnormal parts and
    the halvings lost their low bits: ~1e4 ulp at |z| ~ 1e-41, sqrt(-1e-45) was 0). Cost:
    six elementwise ops more, unrecorded but the two scalings."""
    with _no_grad():
        m = _max(x.abs(), y.abs())  # (NaN: neither test holds, no scaling)
        big, tiny = m >= 2.0**126, m < 2.0**-100
        s = _where(big, 0.25, _where(tiny, 2.0**50, 1.0))
        r = _where(big, 2.0, _where(tiny, 2.0**-25, 1.0))  # 1/sqrt(s), exact
    re, im = _sqrt_parts_unscaled(x * s, y * s)
    return re * r, im * r


def _sqrt_parts_unscaled(x, y):
    """_sqrt_parts on z with max(|x|, |y|) in [2^-100, 2^126) (or inf or NaN)."""
    ax = x.abs()
    t = (ax * 0.5 + _hypot(x, y) * 0.5).sqrt()
    ts = _where(t == 0, 1.0, t)
    q = y / (2.0 * ts)
    q = _where(t == 0, y, q)  # (sqrt(±0 ± 0i) = 0 ± 0i)
    pos = x >= 0  # (-0 too)
    re = _where(pos, t, q.abs())
    im = _where(pos, q, _copysign(t, y))
    yinf = y.abs() == math.inf
    return _where(yinf, math.inf, re), _where(yinf, y, im)


def sqrt(z):
    return _make(*_sqrt_parts(*_parts(z)))


def rsqrt(z):
    """1/sqrt(z) (torch's form): ~5 ulp of |z|^-1/2."""
    return _make(*_recip_parts(*_sqrt_parts(*_parts(z))))


# ---- hyperbolic and circular -------------------------------------------------------------------
def _sinh_parts(x, y):
    """(sinh x cos y, cosh x sin y): each within ~2 ulp of cosh x (sinh/cosh/cos/sin ~1 ulp).
    Overflows where cosh x does (|x| > 89.4), as a float32 product; glibc scales and stays
    finite a little further. C's special cases on the axes: sinh(x ± 0i) = sinh x ± 0i for any
    x, and sinh(±0 + iy) keeps its ±0 for an infinite or NaN y."""
    re = x.sinh() * y.cos()
    im = x.cosh() * y.sin()
    re = _where((x == 0) & ~_finite(y), x, re)
    re = _where(_inf(x) & ~_finite(y), math.inf, re)  # (sinh(±inf + i·inf) = inf + NaN·i)
    return _where(y == 0, x.sinh(), re), _where(y == 0, y, im)


def _cosh_parts(x, y):
    """(cosh x cos y, sinh x sin y): as _sinh_parts; cosh(x ± 0i) = cosh x + (sign x)(±0)i."""
    re = x.cosh() * y.cos()
    im = x.sinh() * y.sin()
    im = _where((x == 0) & ~_finite(y), 0.0, im)  # (cosh(±0 + i·inf) = NaN + 0i)
    re = _where(_inf(x) & ~_finite(y), math.inf, re)
    signed_zero = _copysign(_full_like(x, 0.0), x) * y  # (sign x)·(±0), NaN-free
    return _where(y == 0, x.cosh(), re), _where(y == 0, signed_zero, im)


def sinh(z):
    return _make(*_sinh_parts(*_parts(z)))


def cosh(z):
    return _make(*_cosh_parts(*_parts(z)))


def sin(z):
    """sin z = -i sinh(iz) = (sin x cosh y, cos x sinh y)."""
    x, y = _parts(z)
    a, b = _sinh_parts(-y, x)
    return _make(b, -a)


def cos(z):
    """cos z = cosh(iz) = (cos x cosh y, -sin x sinh y)."""
    x, y = _parts(z)
    return _make(*_cosh_parts(-y, x))


# tanh(x) rounds to ±1 in float32 past |x| = 9 (1 - tanh 9 = 3.0e-8 < 2^-25), where the
# imaginary part is 2 sin(2y) e^(-2|x|) to float32 precision (relative error 2e^(-2|x|) < 2^-24)
_TANH_BIG = 9.0


def _tanh_parts(x, y):
    """Kahan's form: t = tan y, b = 1 + t^2, s = sinh x; tanh z = (b s sqrt(1 + s^2) + i t) /
    (1 + b s^2), no cancellation near the poles (x = 0, y = π/2 + kπ); past |x| = 9,
    (±1, 4 sin y cos y e^(-2|x|)). Each part within ~6 ulp of |tanh z| away from the poles."""
    big = x.abs() > _TANH_BIG
    xs = _where(big, 0.0, x)  # (the unused branch stays finite)
    t = y.tan()
    b = 1.0 + t * t
    s = xs.sinh()
    den = 1.0 + b * s * s
    re = b * s * (1.0 + s * s).sqrt() / den
    im = t / den
    e = (x.abs() * -2.0).exp()
    re_big = _copysign(_full_like(x, 1.0), x)
    im_big = 4.0 * y.sin() * y.cos() * e
    # tanh(±inf + i·inf) = ±1 ± 0i (the sign of y)
    im_big = _where(_inf(x) & ~_finite(y), _copysign(_full_like(y, 0.0), y), im_big)
    re, im = _where(big, re_big, re), _where(big, im_big, im)
    re = _where((x == 0) & ~_finite(y), x, re)  # tanh(±0 + i·inf) = ±0 + NaN·i
    re = _where(_finite(x) & (x != 0) & ~_finite(y), math.nan, re)  # (C's NaN + NaN·i)
    return re, _where(y == 0, y, im)  # tanh(x ± 0i) = tanh x ± 0i (x NaN too)


def tanh(z):
    return _make(*_tanh_parts(*_parts(z)))


def tan(z):
    """tan z = -i tanh(iz)."""
    x, y = _parts(z)
    a, b = _tanh_parts(-y, x)
    return _make(b, -a)


def sigmoid(z):
    """1/(1 + e^-z) (torch's form): Smith's reciprocal of 1 + exp(-z); ~5 ulp of |sigmoid z|
    away from its poles (z = iπ(2k + 1))."""
    x, y = _parts(z)
    er, ei = _exp_parts(-x, -y)
    return _make(*_recip_parts(er + 1.0, ei))


# ---- inverse functions (Kahan) -------------------------------------------------------------------
def _asin_parts(x, y):
    """asin z = (atan2(x, Re(s1 s2)), asinh(Im(conj(s1) s2))), s1 = sqrt(1 - z), s2 = sqrt(1 + z):
    each part within ~6 ulp of |asin z| (the products never cancel: their terms share signs)."""
    ar, ai = _sqrt_parts(1.0 - x, -y)
    br, bi = _sqrt_parts(1.0 + x, y)
    re = _atan2(x, ar * br - ai * bi)
    im = (ar * bi - ai * br).asinh()
    # an infinite z (C's values): (copysign(atan2(|x|, |y|), x), copysign(inf, y))
    big = _inf(x) | _inf(y)
    re_inf = _copysign(_atan2(x.abs(), y.abs()), x)
    im_inf = _copysign(_full_like(x, math.inf), y)
    re = _where((x == 0) & y.isnan(), x, re)  # asin(±0 + NaN·i) = ±0 + NaN·i
    return _where(big, re_inf, re), _where(big, im_inf, im)


def asin(z):
    return _make(*_asin_parts(*_parts(z)))


def acos(z):
    """acos z = (2 atan2(Re s1, Re s2), asinh(Im(conj(s2) s1))), s1 = sqrt(1 - z),
    s2 = sqrt(1 + z): within ~6 ulp of max(|acos z|, 1)."""
    x, y = _parts(z)
    ar, ai = _sqrt_parts(1.0 - x, -y)
    br, bi = _sqrt_parts(1.0 + x, y)
    re = 2.0 * _atan2(ar, br)
    im = (br * ai - bi * ar).asinh()
    # an infinite z (C's values): (atan2(|y|, x), -copysign(inf, y))
    big = _inf(x) | _inf(y)
    re_inf = _atan2(y.abs(), x)
    im_inf = -_copysign(_full_like(x, math.inf), y)
    re = _where((x == 0) & y.isnan(), math.pi / 2, re)  # acos(±0 + NaN·i) = π/2 + NaN·i
    return _make(_where(big, re_inf, re), _where(big, im_inf, im))


def asinh(z):
    """asinh z = -i asin(iz)."""
    x, y = _parts(z)
    a, b = _asin_parts(-y, x)
    return _make(b, -a)


def acosh(z):
    """acosh z = (asinh(Re(conj(s1) s2)), 2 atan2(Im s1, Re s2)), s1 = sqrt(z - 1),
    s2 = sqrt(z + 1): within ~6 ulp of max(|acosh z|, 1)."""
    x, y = _parts(z)
    ar, ai = _sqrt_parts(x - 1.0, y)
    br, bi = _sqrt_parts(x + 1.0, y)
    re = (ar * br + ai * bi).asinh()
    im = 2.0 * _atan2(ai, br)
    # an infinite z (C's values): (inf, copysign(atan2(|y|, x), y))
    big = _inf(x) | _inf(y)
    im_inf = _copysign(_atan2(y.abs(), x), y)
    im = _where((x == 0) & y.isnan(), math.pi / 2, im)  # acosh(±0 + NaN·i) = NaN + iπ/2
    return _make(_where(big, math.inf, re), _where(big, im_inf, im))


def _atanh_parts(x, y):
    """atanh z = (log1p(4x / ((1 - x)^2 + y^2))/4, atan2(2y, (1 - x)(1 + x) - y^2)/2), every
    term divided by s = max(|x|, |y|, 1) first (no overflow; the ratios are unchanged by it),
    and the real part computed for |x| then signed (atanh is odd), so log1p's argument is never
    near -1: the real part within ~8 ulp of itself, the imaginary part ~3 ulp of π (the
    denominator cancels only near z = ±1, where atanh is singular)."""
    big = _inf(x) | _inf(y)
    xf, yf = _where(big, 0.0, x), _where(big, 0.0, y)  # (the unused branch stays finite)
    sgn = _where(xf < 0, -1.0, 1.0)  # (a constant: xa's gradient is sgn, even at x = 0)
    xa = xf * sgn
    s = _max(_max(xa, yf.abs()), _full_like(x, 1.0))
    xs, ys, us, vs = xa / s, yf / s, (1.0 - xa) / s, (1.0 + xa) / s
    re = (4.0 * xs / (us * us + ys * ys) / s).log1p() * 0.25
    # near z = ±1 the ratio overflows (or its denominator underflows): there the real part is
    # past 1 and (log|1 + z| - log|1 - z|)/2 loses nothing to cancellation
    re_near = (_log_abs(1.0 + xa, yf) - _log_abs(1.0 - xa, yf)) * 0.5
    re = _where(re_near > 1.0, re_near, re) * sgn
    im = _atan2(2.0 * ys / s, us * vs - ys * ys) * 0.5
    re = _where((x == 0) & y.isnan(), x, re)  # atanh(±0 + NaN·i) = ±0 + NaN·i
    # an infinite z (C's values): (copysign(0, x), copysign(π/2, y); NaN for a NaN y)
    re_inf = _copysign(_full_like(x, 0.0), x)
    im_inf = _where(y.isnan(), math.nan, _copysign(_full_like(x, math.pi / 2), y))
    return _where(big, re_inf, re), _where(big, im_inf, im)


def atanh(z):
    return _make(*_atanh_parts(*_parts(z)))


def atan(z):
    """atan z = -i atanh(iz); for an infinite z the zero imaginary part is copysign(0, y), as
    C's, read from y's own sign bit: atanh's copysign(0, -y) negated gave it through -y, and
    NVIDIA's negation of a NaN is its canonical +NaN whatever the sign (the H100's atan(±inf
    + NaN·i) had imaginary part -0, torch +0)."""
    x, y = _parts(z)
    a, b = _atanh_parts(-y, x)
    big = _inf(x) | _inf(y)
    return _make(b, _where(big, _copysign(_full_like(y, 0.0), y), -a))


# ---- powers ----------------------------------------------------------------------------------------
def _mul_parts(a, b, c, d):
    return a * c - b * d, a * d + b * c


def _exp_of_product(wr, wi, lr, li):
    """exp(w · log z) from parts, the product formed as C's is (at z = 0, w·(-inf + iθ) has a
    NaN part whenever a zero meets the -inf; _zero_base then gives cpow's values)."""
    pr, pi = _mul_parts(wr, wi, lr, li)
    return _exp_parts(pr, pi)


def pow_(base, exponent):
    """base ** exponent with either or both complex (tensor or Python scalar): torch's CPU
    rules. A scalar exponent 0 gives ones, 1 a copy, 0.5 sqrt, -0.5 rsqrt, -1 reciprocal,
    2 z·z, 3 z·z·z, -2 1/(z·z); any other exponent exp(w·log z) (glibc's cpow), whose error
    is ~|w log z|·2 ulp relative (exp amplifies log's absolute error)."""
    if not isinstance(base, Tensor):
        return _scalar_base_pow(base, exponent)
    if not isinstance(exponent, Tensor):
        return _scalar_pow(as_complex(base) if not _is_c(base) else base, exponent)
    br, bi = _parts(base)
    wr, wi = _parts(exponent)
    lr, li = _log_parts(br, bi)
    re, im = _exp_of_product(wr, wi, lr, li)
    return _zero_base(br, bi, wr, wi, re, im)


def _zero_base(br, bi, wr, wi, re, im):
    """0 ** w = 0 where Re w > 0 (cpow's exp(-inf + iθ) = 0 even for Im w != 0, where w·log 0
    has a NaN), its imaginary part +0 for Im w < 0 and -0 otherwise, as glibc's cpowf; 0 ** 0
    stays NaN, as torch's cpow (a scalar exponent 0 gives ones)."""
    zero = (br == 0) & (bi == 0) & (wr > 0)
    return _make(_where(zero, 0.0, re), _where(zero, _where(wi < 0, 0.0, -0.0), im))


def _scalar_pow(z, w):
    from .complex_impls import _mul

    c = _PYCOMPLEX(w)
    if c == 0:
        from .creation import ones_like

        one = ones_like(_R(z)[..., 0])
        return _make(one, one * 0.0)
    if c == 1:
        return _C(_R(z).clone())
    if c == 0.5:
        return sqrt(z)
    if c == -0.5:
        return rsqrt(z)
    if c == -1:
        return reciprocal(z)
    if c == 2:
        return _mul(z, z)
    if c == 3:
        return _mul(_mul(z, z), z)
    if c == -2:
        return reciprocal(_mul(z, z))
    br, bi = _parts(z)
    lr, li = _log_parts(br, bi)
    re, im = _exp_of_product(c.real, c.imag, lr, li)
    if c.real > 0:  # 0 ** w = 0 (see _zero_base)
        zero = (br == 0) & (bi == 0)
        re, im = _where(zero, 0.0, re), _where(zero, 0.0 if c.imag < 0 else -0.0, im)
    return _make(re, im)


def _scalar_base_pow(a, w):
    """Python scalar a ** complex tensor w: exp(w · log a), log a in float64 on the host."""
    c = _PYCOMPLEX(a)
    wr, wi = _parts(w)
    if c == 0:  # log 0 = -inf + 0i, then as a tensor base (C's products, NaNs and all)
        zr = _full_like(wr, 0.0)
        re, im = _exp_of_product(wr, wi, zr - math.inf, zr)
        return _zero_base(zr, zr, wr, wi, re, im)
    lc = cmath.log(c)
    return _make(*_exp_parts(wr * lc.real - wi * lc.imag, wr * lc.imag + wi * lc.real))


# ---- predicates ---------------------------------------------------------------------------------
def isnan(z):
    x, y = _parts(z)
    return x.isnan() | y.isnan()


def isinf(z):
    x, y = _parts(z)
    return x.isinf() | y.isinf()


def isfinite(z):
    x, y = _parts(z)
    return x.isfinite() & y.isfinite()


# ---- the table ------------------------------------------------------------------------------------
def _pow_impl(swap=False):
    def impl(orig, a, b, **kw):
        if kw.get("out") is not None or set(kw) - {"out"}:
            raise _unsupported(f"pow({', '.join(sorted(kw))}=...)")
        return pow_(b, a) if swap else pow_(a, b)

    return impl


def _unsupported(name):
    from .complex import unsupported

    return unsupported(name)


def register(IMPLS, unary, inplace):
    """Adds this module's functions to ops/complex_impls.py's table (unary: its wrapper that
    refuses extra arguments; inplace: its in-place writer)."""
    for name, fn in (
        ("log", log), ("log2", log2), ("log10", log10), ("log1p", log1p), ("expm1", expm1),
        ("exp", exp), ("sqrt", sqrt), ("rsqrt", rsqrt), ("reciprocal", reciprocal),
        ("sin", sin), ("cos", cos), ("tan", tan), ("sinh", sinh), ("cosh", cosh),
        ("tanh", tanh), ("sigmoid", sigmoid), ("asin", asin), ("acos", acos), ("atan", atan),
        ("asinh", asinh), ("acosh", acosh), ("atanh", atanh), ("arcsin", asin),
        ("arccos", acos), ("arctan", atan), ("arcsinh", asinh), ("arccosh", acosh),
        ("arctanh", atanh), ("isnan", isnan), ("isinf", isinf), ("isfinite", isfinite),
    ):  # fmt: skip
        IMPLS[name] = unary(fn)
    for name in ("pow", "__pow__", "float_power"):
        IMPLS[name] = _pow_impl()
    IMPLS["__rpow__"] = _pow_impl(swap=True)
    for name in ("pow_", "__ipow__", "float_power_"):
        IMPLS[name] = inplace(name, pow_)
    for name in ("log_", "exp_", "sqrt_", "sin_", "cos_", "tanh_", "sigmoid_", "reciprocal_"):
        fn = IMPLS[name[:-1]]
        IMPLS[name] = _inplace_unary(name, fn, inplace)


def _inplace_unary(name, impl, inplace):
    write = inplace(name, lambda self, _: impl(None, self))

    def op(orig, self):
        return write(None, self, None)

    return op
