"""WGSL helpers for the special functions in ops/special_more.py: Bessel J0, J1, Y0, Y1 and K0,
K1 (plain and exp-scaled), Airy Ai, the regularized incomplete gamma functions, and torch's
orthogonal-polynomial recurrences. Merged into kernels/common.py `HELPERS` through
kernels/mathlib.py, so an expression naming `p_<name>(` gets the function text as usual.

The Chebyshev fits (scripts/special_more_fits.py: mpmath at 72 nodes, truncated below 1e-9 of
the largest coefficient) are evaluated by mathlib's Clenshaw `_cheb`:
- on [0, 2]: (1 - J0)·4/x^2, J1/x and the regular parts Y0 - (2/pi)·log(x)·J0,
  (Y1 - (2/pi)(log(x)·J1 - 1/x))/x in t = x^2/2 - 1; on [2, 5] and [5, 8]: f/(x - z) with z
  the zero of f inside, in t = (x - 3.5)/1.5 or (x - 6.5)/1.5 (f = (x - z)·h keeps its relative
  accuracy at z: x - z = (x - z_hi) - z_lo, exact next to it); beyond 8, Hankel's P and x·Q in t = 128/x^2 - 1, with sin x and cos x
  from the exactly reduced p_sincosf (so J0(1e6) keeps its digits; torch's float32 rounds
  x - pi/4 first).
- K0 + log(x/2)·I0 and x·(K1 - log(x/2)·I1) in t = x^2/2 - 1 on [0, 2] (Cephes' split);
  sqrt(x)·e^x·K0, sqrt(x)·e^x·K1 in t = 4/x - 1 beyond.
- Ai on [-4, 0] directly; Ai(x)·e^(1.15x) on [0, 2]; past 2, 2·sqrt(pi)·x^(1/4)·e^zeta·Ai
  (zeta = 2/3·x^(3/2)) in 2·zeta(2)/zeta - 1; below -4 the modulus form
  Ai(-a) = (sin(zeta + pi/4)·f - cos(zeta + pi/4)·g/zeta) / (sqrt(pi)·a^(1/4)), f and g in
  2·(zeta(4)/zeta)^2 - 1.
Accuracy, measured (tests/test_special_more.py repeats it): see ops/special_more.py.
"""

from __future__ import annotations

from .mathlib import _cheb

_J0_SMALL = (8.848926547e-01, -1.118953074e-01, 3.161449615e-03, -5.007858177e-05, 5.061004672e-07, -3.543637670e-09)  # fmt: skip
_J1_SMALL = (3.895860088e-01, -1.057206372e-01, 4.593945470e-03, -9.815037116e-05, 1.247641673e-06, -1.052222006e-08)  # fmt: skip
_J0_A = (-3.287880631e-01, 2.531722118e-01, 1.817495558e-02, -1.104391223e-02, -1.307146678e-04, 1.840977980e-04, -3.957112564e-07, -1.662018982e-06, 1.134068665e-08, 9.471351317e-09)  # fmt: skip
_J0_B = (2.348644696e-01, -1.444795557e-01, -3.003324683e-02, 8.505145503e-03, 5.217093737e-04, -1.594804969e-04, -4.366913408e-06, 1.528274445e-06, 2.143518386e-08, -9.015402070e-09)  # fmt: skip
_J1_A = (-3.544492347e-01, 1.876213283e-02, 5.824805327e-02, -1.562900016e-03, -1.439816985e-03, 3.394372182e-05, 1.729274407e-05, -3.558521196e-07, -1.232272303e-07, 2.234321005e-09, 5.823209413e-10)  # fmt: skip
_J1_B = (2.480924118e-01, 3.904717259e-02, -4.895540097e-02, -1.143378088e-03, 1.316607830e-03, 1.047690614e-05, -1.652639476e-05, -3.159909748e-08, 1.208266993e-07, -1.062862115e-10, -5.802500363e-10)  # fmt: skip
_Y0_A = (-3.442619674e-01, -1.555386600e-02, 6.730330633e-02, -2.095347567e-03, -1.412796724e-03, 7.576253715e-06, 2.366625355e-05, -1.454815266e-06, 9.288197103e-08, -4.329976557e-08, 1.004056925e-08, -1.972227456e-09, 4.082478811e-10)  # fmt: skip
_Y0_B = (2.445468461e-01, 4.998987355e-02, -4.967217538e-02, -1.669681245e-03, 1.373487288e-03, 1.546921689e-05, -1.716159045e-05, -6.877454483e-08, 1.260084975e-07, -4.630178167e-11, -5.937204764e-10)  # fmt: skip
_Y1_A = (3.058114754e-01, -2.532278435e-01, -8.521621178e-03, 8.414376128e-03, 5.251933378e-04, -2.667908493e-04, 2.213458642e-05, -3.429846227e-06, 1.132264821e-06, -2.688635207e-07, 5.902004750e-08, -1.331616773e-08, 3.020322759e-09, -6.828237035e-10)  # fmt: skip
_Y1_B = (-2.289954103e-01, 1.494769669e-01, 2.663357579e-02, -8.314127546e-03, -4.508197932e-04, 1.529023965e-04, 3.908561181e-06, -1.479854256e-06, -1.785943560e-08, 8.573155614e-09)  # fmt: skip
_Y0_LOG = (1.950967400e-01, 2.417572405e-01, -2.619230929e-02, 9.342775328e-04, -1.701690806e-05, 1.894416213e-07, -1.426572701e-09)  # fmt: skip
_Y1_LOG = (-1.037259802e-01, 8.709669826e-02, -5.104399388e-03, 1.281821300e-04, -1.813976486e-06, 1.655539637e-08, -1.057676936e-10)  # fmt: skip
# (hi, lo) f32 pairs of the zeros in [2, 5] and [5, 8] (scripts/special_more_fits.py)
_ZEROS = {
    "J0": (2.404825449e00, 1.087059047e-07, 5.520078182e00, -7.193414575e-08),
    "J1": (3.831706047e00, -7.685058989e-08, 7.015586853e00, -1.832117249e-07),
    "Y0": (3.957678318e00, 1.012911781e-07, 7.086050987e00, 7.305811778e-08),
    "Y1": (2.197141409e00, -8.288927233e-08, 5.429680824e00, 2.165143513e-07),
}
_P0_LARGE = (9.994603493e-01, -5.365220468e-04, 3.075184788e-06, -5.170594538e-08, 1.630646464e-09)  # fmt: skip
_Q0_LARGE = (-1.244468368e-01, 5.470815954e-04, -5.931598729e-06, 1.437796580e-07, -5.817532749e-09, 3.376097524e-10)  # fmt: skip
_P1_LARGE = (1.000903041e+00, 8.989898331e-04, -3.987284300e-06, 6.177633961e-08, -1.871890749e-09)  # fmt: skip
_Q1_LARGE = (3.742222966e-01, -7.702178839e-04, 7.310892206e-06, -1.676782511e-07, 6.583354662e-09, -3.749090951e-10)  # fmt: skip
_K0_SMALL = (-2.676636966e-01, 3.442898999e-01, 3.597993652e-02, 1.264615411e-03, 2.286212103e-05, 2.534791079e-07, 1.904516377e-09)  # fmt: skip
_K1_SMALL = (7.626501137e-01, -3.531559608e-01, -1.226111808e-01, -6.975723860e-03, -1.730288958e-04, -2.433406142e-06, -2.213387631e-08)  # fmt: skip
_K0E_LARGE = (1.220151541e+00, -3.144810131e-02, 1.569883886e-03, -1.284954958e-04, 1.394981372e-05, -1.831755523e-06, 2.766813639e-07, -4.660489898e-08, 8.574034017e-09, -1.697534509e-09)  # fmt: skip
_K1E_LARGE = (1.360313095e+00, 1.039237366e-01, -2.857816860e-03, 1.952155185e-04, -1.936197974e-05, 2.406484948e-06, -3.501960603e-07, 5.741084125e-08, -1.034576247e-08, 2.015049755e-09)  # fmt: skip
_AI_NEG = (1.144775865e-01, 4.212778842e-01, -2.773459710e-02, -2.336579611e-01, 6.939559565e-02, 2.446177201e-02, -1.476643769e-02, 8.023889780e-04, 1.023029574e-03, -2.514931207e-04, -1.215247692e-05, 1.446891292e-05, -1.865453687e-06, -2.599357802e-07, 1.034171066e-07, -6.957126687e-09, -1.951709352e-09, 4.440109839e-10)  # fmt: skip
_AI_MID = (3.887173149e-01, -5.178796922e-03, -3.779026569e-02, 1.903350715e-03, 7.643615660e-04, -6.992491116e-05, -7.583874715e-06, 1.180062679e-06, 2.416153016e-08, -1.149633942e-08)  # fmt: skip
_AI_POS = (9.844053049e-01, -1.479278485e-02, 7.327177465e-04, -6.125954234e-05, 6.834766976e-06, -9.237229735e-07, 1.436225340e-07, -2.489319422e-08, 4.709793440e-09)  # fmt: skip
_AI_F = (9.993708891e-01, -6.216836584e-04, 7.181193774e-06, -2.316269814e-07, 1.321628389e-08, -1.093873617e-09)  # fmt: skip
_AI_G = (6.882170556e-02, -6.089151841e-04, 1.317415101e-05, -6.014071913e-07, 4.327537342e-08, -4.247731733e-09, 5.232285377e-10, -7.672290975e-11)  # fmt: skip

# Iteration bounds of the loops below; `cap` arguments come from ops/special_more.py (the
# device's loop budget: lavapipe stops an invocation after 65,535 iterations of all its loops).
HELPERS = {
    f"p_{name.lower()}": _cheb(f"p_{name.lower()}", coeffs)
    for name, coeffs in {
        "J0_SMALL": _J0_SMALL,
        "J1_SMALL": _J1_SMALL,
        "J0_A": _J0_A,
        "J0_B": _J0_B,
        "J1_A": _J1_A,
        "J1_B": _J1_B,
        "Y0_A": _Y0_A,
        "Y0_B": _Y0_B,
        "Y1_A": _Y1_A,
        "Y1_B": _Y1_B,
        "Y0_LOG": _Y0_LOG,
        "Y1_LOG": _Y1_LOG,
        "P0_LARGE": _P0_LARGE,
        "Q0_LARGE": _Q0_LARGE,
        "P1_LARGE": _P1_LARGE,
        "Q1_LARGE": _Q1_LARGE,
        "K0_SMALL": _K0_SMALL,
        "K1_SMALL": _K1_SMALL,
        "K0E_LARGE": _K0E_LARGE,
        "K1E_LARGE": _K1E_LARGE,
        "AI_NEG": _AI_NEG,
        "AI_MID": _AI_MID,
        "AI_POS": _AI_POS,
        "AI_F": _AI_F,
        "AI_G": _AI_G,
    }.items()
}


def _mid(name: str) -> str:
    """WGSL `p_bessel_<name>_mid(x)` on [2, 8] (x >= 0): f = (x - z)·h(t) on [2, 5] and [5, 8],
    z the zero inside and h the fit _<NAME>_A or _B in t = (x - 3.5)/1.5 or (x - 6.5)/1.5."""
    za_hi, za_lo, zb_hi, zb_lo = _ZEROS[name]
    n = name.lower()
    return f"""fn p_bessel_{n}_mid(x: f32) -> f32 {{
  if (x <= 5.0) {{ return ((x - {za_hi}) - {za_lo}) * p_{n}_a((x - 3.5) * 0.6666666666666666); }}
  return ((x - {zb_hi}) - {zb_lo}) * p_{n}_b((x - 6.5) * 0.6666666666666666);
}}"""


HELPERS.update({f"p_bessel_{name.lower()}_mid": _mid(name) for name in _ZEROS})
HELPERS.update(
    {
        # (J, Y) of order 0 or 1 for x > 8 from Hankel's P and Q: with s = sin x, c = cos x,
        # sqrt(pi x)·J0 = P(c + s) - Q(s - c), sqrt(pi x)·Y0 = P(s - c) + Q(c + s), and
        # sqrt(pi x)·J1 = P(s - c) + Q(s + c), sqrt(pi x)·Y1 = Q(s - c) - P(s + c)
        # (cos(x - pi/4) = (c + s)/sqrt 2, cos(x - 3pi/4) = (s - c)/sqrt 2, ...)
        "p_bessel_hankel": """fn p_bessel_hankel(x: f32, order: i32) -> vec2<f32> {
  let t = 128.0 / (x * x) - 1.0;
  let sc = p_sincosf(x);
  let s = sc.x;
  let c = sc.y;
  let k = 0.5641895835477563 / sqrt(x);
  if (order == 0) {
    let p = p_p0_large(t);
    let q = p_q0_large(t) / x;
    return k * vec2<f32>(p * (c + s) - q * (s - c), p * (s - c) + q * (c + s));
  }
  let p = p_p1_large(t);
  let q = p_q1_large(t) / x;
  return k * vec2<f32>(p * (s - c) + q * (s + c), q * (s - c) - p * (s + c));
}""",
        # J0 = 1 - x^2/4·g and J1/x on [0, 2] in x^2/2 - 1 (x = |x|)
        "p_bessel_j0_small": """fn p_bessel_j0_small(x: f32) -> f32 {
  let x2 = x * x;
  return 1.0 - 0.25 * x2 * p_j0_small(0.5 * x2 - 1.0);
}""",
        # torch: nan at +-inf (its float kernels take sin/cos of inf), J0 even, J1 odd
        "p_bessel_j0": """fn p_bessel_j0(x0: f32) -> f32 {
  let x = abs(x0);
  if (p_isnan(x0) || p_isinf(x0)) { return p_nan(); }
  if (x <= 2.0) { return p_bessel_j0_small(x); }
  if (x <= 8.0) { return p_bessel_j0_mid(x); }
  return p_bessel_hankel(x, 0).x;
}""",
        "p_bessel_j1": """fn p_bessel_j1(x0: f32) -> f32 {
  let x = abs(x0);
  if (p_isnan(x0) || p_isinf(x0)) { return p_nan(); }
  if (x <= 2.0) { return x0 * p_j1_small(0.5 * x * x - 1.0); }
  if (x <= 8.0) { return p_xorsign(p_bessel_j1_mid(x), x0); }
  return p_xorsign(p_bessel_hankel(x, 1).x, x0);
}""",
        # Y0, Y1: nan below 0 and at inf (torch), -inf at +-0; up to 2 the log form with the
        # regular parts Y0 - (2/pi)·log(x)·J0 and (Y1 - (2/pi)(log(x)·J1 - 1/x))/x in x^2/2 - 1
        "p_bessel_y0": """fn p_bessel_y0(x: f32) -> f32 {
  if (p_isnan(x) || p_isinf(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return -p_inf(); }
  if (x <= 2.0) {
    return p_y0_log(x * x * 0.5 - 1.0) + 0.6366197723675814 * p_logf(x) * p_bessel_j0_small(x);
  }
  if (x <= 8.0) { return p_bessel_y0_mid(x); }
  return p_bessel_hankel(x, 0).y;
}""",
        "p_bessel_y1": """fn p_bessel_y1(x: f32) -> f32 {
  if (p_isnan(x) || p_isinf(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return -p_inf(); }
  if (x <= 2.0) {
    let j1 = x * p_j1_small(x * x * 0.5 - 1.0);
    return x * p_y1_log(x * x * 0.5 - 1.0) + 0.6366197723675814 * (p_logf(x) * j1 - 1.0 / x);
  }
  if (x <= 8.0) { return p_bessel_y1_mid(x); }
  return p_bessel_hankel(x, 1).y;
}""",
        # K0, K1 and their exp(x)-scaled forms: nan below 0, inf at 0, 0 at inf (torch)
        "p_bessel_k0e": """fn p_bessel_k0e(x: f32) -> f32 {
  if (p_isnan(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return p_inf(); }
  if (x <= 2.0) { return (p_k0_small(0.5 * x * x - 1.0) - p_logf(0.5 * x) * p_i0(x)) * p_expf(x); }
  return p_k0e_large(4.0 / x - 1.0) / sqrt(x);
}""",
        "p_bessel_k0": """fn p_bessel_k0(x: f32) -> f32 {
  if (p_isnan(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return p_inf(); }
  if (x <= 2.0) { return p_k0_small(0.5 * x * x - 1.0) - p_logf(0.5 * x) * p_i0(x); }
  let h = p_expf(-0.5 * x);  // e^-x in two halves: K(100) is subnormal, e^-100 too
  return p_opaque(p_k0e_large(4.0 / x - 1.0) / sqrt(x) * h) * h;
}""",
        "p_bessel_k1e": """fn p_bessel_k1e(x: f32) -> f32 {
  if (p_isnan(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return p_inf(); }
  if (x <= 2.0) { return (p_k1_small(0.5 * x * x - 1.0) / x + p_logf(0.5 * x) * p_i1(x)) * p_expf(x); }
  return p_k1e_large(4.0 / x - 1.0) / sqrt(x);
}""",
        "p_bessel_k1": """fn p_bessel_k1(x: f32) -> f32 {
  if (p_isnan(x) || x < 0.0) { return p_nan(); }
  if (x == 0.0) { return p_inf(); }
  if (x <= 2.0) { return p_k1_small(0.5 * x * x - 1.0) / x + p_logf(0.5 * x) * p_i1(x); }
  let h = p_expf(-0.5 * x);  // e^-x in two halves: K(100) is subnormal, e^-100 too
  return p_opaque(p_k1e_large(4.0 / x - 1.0) / sqrt(x) * h) * h;
}""",
        # Airy Ai: nan at +-inf (torch), 0 once e^-zeta underflows
        "p_airy_ai": """fn p_airy_ai(x: f32) -> f32 {
  if (p_isnan(x) || p_isinf(x)) { return p_nan(); }
  if (x > 2.0) {
    let r = sqrt(x);
    let zeta = 0.6666666666666666 * x * r;
    if (zeta > 110.0) { return 0.0; }
    let f = p_ai_pos(3.771236166328254 / zeta - 1.0);
    return f * 0.28209479177387814 / sqrt(r) * p_expf(-zeta);
  }
  if (x >= 0.0) { return p_ai_mid(x - 1.0) * p_expf(-1.15 * x); }
  if (x >= -4.0) { return p_ai_neg(0.5 * x + 1.0); }
  let a = -x;
  let r = sqrt(a);
  let zeta = 0.6666666666666666 * a * r;
  let w = 5.333333333333333 / zeta;
  let t = 2.0 * w * w - 1.0;
  let sc = p_sincosf(zeta);
  let f = p_ai_f(t);
  let g = p_ai_g(t) / zeta;
  // sin(zeta + pi/4) = (s + c)/sqrt 2, cos(zeta + pi/4) = (c - s)/sqrt 2
  return 0.3989422804014327 / sqrt(r) * ((sc.x + sc.y) * f - (sc.y - sc.x) * g);
}""",
    }
)


# ---- orthogonal polynomials: torch's special cases and recurrences (ATen Math.h), n from an
# f32 (nan or negative: 0, fractions truncated). `cap`: the most recurrence steps one element
# may take on this device; an element needing more gives nan (ops/special_more.py documents it).
# A recurrence stops at the first nan: nan is absorbing, so the result is the one the full loop
# gives (torch's float32 reaches nan the same way once a value overflows).
def _rec3(name: str, first: str, step: str, special: str = "") -> str:
    """WGSL of a polynomial by its three-term recurrence: n < 0 gives 0, `special` (WGSL
    returning torch's exact values) next, then P_0 = 1, P_1 = `first`, and P_{k+1} = `step` (of
    x, q = P_k, p = P_{k-1}, fk = k); NaN when the n - 1 steps pass `cap` (the loop budget), and
    the loop stops at the first NaN (absorbing)."""
    return f"""fn {name}(x: f32, nf: f32, cap: i32) -> f32 {{
  let n = p_poly_n(nf);
  if (n < 0) {{ return 0.0; }}
{special}  if (n == 0) {{ return 1.0; }}
  if (n == 1) {{ return {first}; }}
  if (n - 1 > cap) {{ return p_nan(); }}
  var p = 1.0;
  var q = {first};
  for (var k = 1; k < n; k++) {{
    let fk = f32(k);
    let r = {step};
    p = q;
    q = r;
    if (p_isnan(r)) {{ break; }}
  }}
  return q;
}}"""


HELPERS.update(
    {
        "p_poly_n": """fn p_poly_n(nf: f32) -> i32 {
  if (p_isnan(nf) || nf < 0.0) { return -1; }
  return i32(min(trunc(nf), 2147483520.0));
}""",
        # q_{k+1} = 2x·q_k - q_{k-1} from (q0, q1) = (1, q1), n >= 2 steps to q_n
        "p_cheb_rec": """fn p_cheb_rec(x: f32, q1: f32, n: i32, cap: i32) -> f32 {
  if (n - 1 > cap) { return p_nan(); }
  var p = 1.0;
  var q = q1;
  for (var k = 2; k <= n; k++) {
    let r = (x + x) * q - p;
    p = q;
    q = r;
    if (p_isnan(r)) { break; }
  }
  return q;
}""",
        "p_cheb_t": """fn p_cheb_t(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || n % 2 == 0); }
  if (n > 6 && abs(x) < 1.0) { return p_cosf(f32(n) * p_acosf(x)); }
  if (n == 0) { return 1.0; }
  if (n == 1) { return x; }
  return p_cheb_rec(x, x, n, cap);
}""",
        "p_cheb_u": """fn p_cheb_u(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  let m = f32(n) + 1.0;
  if (abs(x) == 1.0) { return select(-m, m, x > 0.0 || n % 2 == 0); }
  if (n > 8 && abs(x) < 1.0) {
    let th = p_acosf(x);
    let s = p_sinf(th);
    if (s != 0.0) { return p_sinf(m * th) / s; }
    return m * p_cosf(m * th);
  }
  if (n == 0) { return 1.0; }
  if (n == 1) { return x + x; }
  return p_cheb_rec(x, x + x, n, cap);
}""",
        "p_cheb_v": """fn p_cheb_v(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  let m = 2.0 * f32(n) + 1.0;
  if (abs(x) == 1.0) {
    if (x > 0.0) { return 1.0; }
    return select(-m, m, n % 2 == 0);
  }
  if (n > 8 && abs(x) < 1.0) {
    let th = p_acosf(x);
    return p_cosf((f32(n) + 0.5) * th) / p_cosf(0.5 * th);
  }
  if (n == 0) { return 1.0; }
  if (n == 1) { return x + x - 1.0; }
  return p_cheb_rec(x, x + x - 1.0, n, cap);
}""",
        "p_cheb_w": """fn p_cheb_w(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  let m = 2.0 * f32(n) + 1.0;
  if (abs(x) == 1.0) {
    if (x > 0.0) { return m; }
    return select(-1.0, 1.0, n % 2 == 0);
  }
  if (n > 8 && abs(x) < 1.0) {
    let th = p_acosf(x);
    return p_sinf((f32(n) + 0.5) * th) / p_sinf(0.5 * th);
  }
  if (n == 0) { return 1.0; }
  if (n == 1) { return x + x + 1.0; }
  return p_cheb_rec(x, x + x + 1.0, n, cap);
}""",
        # shifted: the polynomial at 2x - 1, with torch's exact values at x = 0 and x = 1
        "p_scheb_t": """fn p_scheb_t(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  if (x == 1.0) { return 1.0; }
  if (x == 0.0) { return select(-1.0, 1.0, n % 2 == 0); }
  return p_cheb_t(x + x - 1.0, f32(n), cap);
}""",
        "p_scheb_u": """fn p_scheb_u(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  let m = f32(n) + 1.0;
  if (x == 1.0) { return m; }
  if (x == 0.0) { return select(-m, m, n % 2 == 0); }
  return p_cheb_u(x + x - 1.0, f32(n), cap);
}""",
        "p_scheb_v": """fn p_scheb_v(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  let m = 2.0 * f32(n) + 1.0;
  if (x == 1.0) { return 1.0; }
  if (x == 0.0) { return select(-m, m, n % 2 == 0); }
  return p_cheb_v(x + x - 1.0, f32(n), cap);
}""",
        "p_scheb_w": """fn p_scheb_w(x: f32, nf: f32, cap: i32) -> f32 {
  let n = p_poly_n(nf);
  if (n < 0) { return 0.0; }
  if (x == 1.0) { return 2.0 * f32(n) + 1.0; }
  if (x == 0.0) { return select(-1.0, 1.0, n % 2 == 0); }
  return p_cheb_w(x + x - 1.0, f32(n), cap);
}""",
        # physicists' Hermite: H_{k+1} = 2x·H_k - 2k·H_{k-1}
        "p_hermite_h": _rec3("p_hermite_h", "x + x", "(x + x) * q - 2.0 * fk * p"),
        # probabilists' Hermite: He_{k+1} = x·He_k - k·He_{k-1}
        "p_hermite_he": _rec3("p_hermite_he", "x", "x * q - fk * p"),
        # Laguerre: (k+1)·L_{k+1} = (2k + 1 - x)·L_k - k·L_{k-1}; 1 at x = 0
        "p_laguerre_l": _rec3(
            "p_laguerre_l",
            "1.0 - x",
            "((fk + fk + (1.0 - x)) * q - fk * p) / (fk + 1.0)",
            "  if (x == 0.0) { return 1.0; }\n",
        ),
        # Legendre: (k+1)·P_{k+1} = (2k+1)·x·P_k - k·P_{k-1}; +-1 at x = +-1
        "p_legendre_p": _rec3(
            "p_legendre_p",
            "x",
            "((fk + fk + 1.0) * x * q - fk * p) / (fk + 1.0)",
            "  if (abs(x) == 1.0) { return select(-1.0, 1.0, x > 0.0 || n % 2 == 0); }\n",
        ),
    }
)

# ---- regularized incomplete gamma P(a, x) (gammainc) and Q = 1 - P (gammaincc) -------------
# Three regions, each computing the smaller of P, Q without cancellation:
# - a < 1, x < 2: P = x^a/Gamma(a+1)·(1 + a·T), T = sum_k>=1 (-x)^k/(k!(a+k)) (30 terms: 2^30/30!
#   is 4e-24), and Q = -expm1(a log x - lgamma(a+1)) - x^a/Gamma(a+1)·a·T (DiDonato & Morris'
#   form: 1 - P would lose Q's digits for small a);
# - x < a + 1: the power series P = x^a e^-x/Gamma(a+1)·sum_k x^k/((a+1)...(a+k));
# - else Legendre's continued fraction for Q by the modified Lentz method.
# The series and fraction take O(sqrt(a)) steps near x = a; `cap` bounds them (the device's loop
# budget), and an element that has not converged within it gives nan.
# The prefactor x^a e^-x/Gamma(a) is exp(a log x - x - lgamma(a)) for a < 8; beyond, where those
# terms are large and cancel, sqrt(a/(2 pi))·exp(a·(log1p(u) - u) - s(a)) with u = (x - a)/a and
# s(a) = lgamma(a) - (a - 1/2) log a + a - log(2 pi)/2 by Stirling's series (next term < 1e-11 at 8).
HELPERS.update(
    {
        "p_log1pmx": """fn p_log1pmx(u: f32) -> f32 {
  if (abs(u) >= 0.25) { return p_log1p(u) - u; }
  // -u^2/2 + u^3/3 - ...: to u^16 (0.25^17/17 is 2e-12 of u^2/2)
  var s = -1.0 / 16.0;
  for (var k = 15; k >= 2; k--) { s = select(1.0, -1.0, k % 2 == 0) / f32(k) + u * s; }
  return u * u * s;
}""",
        "p_igam_logfac": """fn p_igam_logfac(a: f32, x: f32) -> f32 {
  if (a < 8.0) { return a * p_logf(x) - x - p_lgamma(a); }
  let u = (x - a) / a;
  let ia = 1.0 / a;
  let ia2 = ia * ia;
  let s = ia * (0.08333333333333333 - ia2 * (0.002777777777777778 - ia2 * (0.0007936507936507937 - ia2 * 0.0005952380952380952)));
  // log1p(u) - u; far from a as log(x/a) - u (u's rounding would swamp 1 + u = x/a near x = 0)
  var d = p_log1pmx(u);
  if (abs(u) >= 0.25) { d = p_logf(x / a) - u; }
  return a * d - s + 0.5 * p_logf(a * 0.15915494309189535);
}""",
        "p_igamma_pq": """fn p_igamma_pq(a: f32, x: f32, cap: i32) -> vec2<f32> {
  if (p_isnan(a) || p_isnan(x) || a < 0.0 || x < 0.0) { return vec2<f32>(p_nan(), p_nan()); }
  if (a == 0.0) {
    if (x > 0.0) { return vec2<f32>(1.0, 0.0); }
    return vec2<f32>(p_nan(), p_nan());
  }
  if (x == 0.0) { return vec2<f32>(0.0, 1.0); }
  if (p_isinf(a)) {
    if (p_isinf(x)) { return vec2<f32>(p_nan(), p_nan()); }
    return vec2<f32>(0.0, 1.0);
  }
  if (p_isinf(x)) { return vec2<f32>(1.0, 0.0); }
  if (a < 1.0 && x < 2.0) {
    var t = 0.0;
    var term = 1.0;
    for (var k = 1; k <= 30; k++) {
      term = term * -x / f32(k);
      t = t + term / (a + f32(k));
    }
    // lgamma(1 + a): by its Taylor series -gamma·a + (pi^2/12)·a^2 below 2^-10, where 1 + a
    // would round a's digits away (Q(1e-30, 1) = 0.22e-30 hinges on them); above, p_lgamma1p,
    // which does not form 1 + a either (p_lgamma(1.0 + a) was right only where the compiler
    // folded (1 + a) - 1 back to a)
    var lg1 = p_lgamma1p(a);
    if (a < 0.0009765625) { lg1 = a * (-0.5772156649015329 + a * 0.8224670334241132); }
    let lg = a * p_logf(x) - lg1;
    let e = p_expf(lg);
    return vec2<f32>(e * (1.0 + a * t), -p_expm1(lg) - e * a * t);
  }
  if (x < a + 1.0) {
    var sum = 1.0;
    var term = 1.0;
    var ap = a;
    var done = false;
    for (var k = 0; k < cap; k++) {
      ap = ap + 1.0;
      term = term * x / ap;
      sum = sum + term;
      if (term <= sum * 3e-8) { done = true; break; }
    }
    if (!done) { return vec2<f32>(p_nan(), p_nan()); }
    var pre: f32;
    if (a < 8.0) { pre = p_expf(a * p_logf(x) - x - p_lgamma(a + 1.0)); }
    else { pre = p_expf(p_igam_logfac(a, x)) / a; }
    let p = pre * sum;
    return vec2<f32>(p, 1.0 - p);
  }
  // Q = exp(lf)·h with h < 1 here (x >= a + 1): below e^-104 that rounds to 0 in float32
  // whatever the fraction (and x near float32's top would make 1/b subnormal, flushed to 0 on
  // GPUs, so the fraction would never converge)
  let lf = p_igam_logfac(a, x);
  if (lf < -104.0) { return vec2<f32>(1.0, 0.0); }
  var b = x + 1.0 - a;
  var c = 1e30;
  var d = 1.0 / b;
  var h = d;
  var done = false;
  var prev = 0.0;
  for (var i = 1; i <= cap; i++) {
    let fi = f32(i);
    let an = -fi * (fi - a);
    b = b + 2.0;
    d = an * d + b;
    if (abs(d) < 1e-30) { d = 1e-30; }
    c = b + an / c;
    if (abs(c) < 1e-30) { c = 1e-30; }
    d = 1.0 / d;
    let del = d * c;
    h = h * del;
    // within 3e-8 of 1, or two steps in a row within 2^-23: for x far past a (b = x + 1 - a
    // above ~1e25) d·c rounds one ulp below 1 at every step and never gets closer (x =
    // 4.5802348e25 gave nan)
    let off = abs(del - 1.0);
    if (off < 3e-8 || (off <= 1.2e-7 && prev <= 1.2e-7 && i > 1)) { done = true; break; }
    prev = off;
  }
  if (!done) { return vec2<f32>(p_nan(), p_nan()); }
  let q = p_expf(lf) * h;
  return vec2<f32>(1.0 - q, q);
}""",
    }
)
