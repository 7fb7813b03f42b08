"""More WGSL math helpers (exact fmod, floor division and remainder as PyTorch computes them,
erfinv, lgamma, digamma, Bessel I0/I1, ...), merged into kernels/common.py `HELPERS`, so an
expression that names `p_<name>(` gets the function text (and its dependencies) as usual.

Each helper's accuracy is measured against float64 references and written beside it, with the
device and the test that repeats the measurement.
"""

from __future__ import annotations


def _select_table(name: str, ty: str, rows: list[str]) -> str:
    """WGSL `fn name(i: i32) -> ty`: row i of `rows` (each the comma-separated components of a
    `ty`), by a tree of selects on i's bits (no loop, no private array: see p_digamma's note)."""
    n = 1
    while n < len(rows):
        n *= 2
    rows = rows + [rows[-1]] * (n - len(rows))
    lines = [f"fn {name}(i: i32) -> {ty} {{"]
    level = [f"{ty}({r})" for r in rows]
    d = 0
    while len(level) > 1:
        nxt = []
        for k in range(0, len(level), 2):
            t = f"t{d}_{k // 2}"
            lines.append(f"  let {t} = select({level[k]}, {level[k + 1]}, (i & {1 << d}) != 0);")
            nxt.append(t)
        level, d = nxt, d + 1
    lines.append(f"  return {level[0]};")
    return "\n".join(lines) + "\n}"


# p_lgamma_root's rows (scripts/lgamma_tables.py prints them)
_LGAMMA_ROOTS = [
    "-3.143581, 2.519372e-08, -2.0645003, 2.29394",
    "-3.9552944, 8.579265e-08, 7.073239, 7.143578",
    "-4.039362, 1.13994815e-07, -8.045502, -8.10741",
    "-4.9915447, 8.295069e-08, 37.637077, -37.65036",
    "-5.0082183, 1.2009903e-07, -38.723854, 38.736763",
    "-5.9986076, 1.5541717e-07, 228.58406, 228.58624",
    "-6.001385, -8.250858e-08, -229.77634, -229.7785",
    "-6.9998016, 1.2785155e-07, 1603.6398, -1603.6401",
    "-7.0001984, 3.0850487e-08, -1604.923, 1604.9233",
    "-7.999975, 7.371953e-09, 12833.573, 12833.573",
    "-8.000025, -4.7384554e-09, -12834.936, -12834.936",
    "-8.999997, -1.0527393e-07, 115507.58, -115507.58",
    "-9.000003, 1.05308125e-07, -115509.01, 115509.01",
    "-10.0, 2.7557337e-07, 1.1550821e+06, 1.1550821e+06",
    "-10.0, -2.75573e-07, -1.1550836e+06, -1.1550836e+06",
    "-11.0, 2.505211e-08, 1.2705911e+07, -1.2705911e+07",
    "-11.0, -2.5052106e-08, -1.2705913e+07, 1.2705913e+07",
    "-12.0, 2.0876758e-09, 1.5247094e+08, 1.5247094e+08",
    "-12.0, -2.0876756e-09, -1.5247094e+08, -1.5247094e+08",
    "-13.0, 1.6059044e-10, 1.9821222e+09, -1.9821222e+09",
    "-13.0, -1.6059044e-10, -1.9821222e+09, 1.9821222e+09",
    "-14.0, 1.1470745e-11, 2.7749712e+10, 2.7749712e+10",
    "-14.0, -1.1470745e-11, -2.7749712e+10, -2.7749712e+10",
    "-15.0, 7.6471636e-13, 4.1624568e+11, -4.1624568e+11",
    "-15.0, -7.6471636e-13, -4.1624568e+11, 4.1624568e+11",
    "-16.0, 4.7794773e-14, 6.659931e+12, 6.659931e+12",
    "-16.0, -4.7794773e-14, -6.659931e+12, -6.659931e+12",
    "-17.0, 2.8114574e-15, 1.1321883e+14, -1.1321883e+14",
    "-17.0, -2.8114574e-15, -1.1321883e+14, 1.1321883e+14",
    "-18.0, 1.5619207e-16, 2.0379389e+15, 2.0379389e+15",
    "-18.0, -1.5619207e-16, -2.0379389e+15, -2.0379389e+15",
    "-19.0, 8.220635e-18, 3.872084e+16, -3.872084e+16",
]
# p_digamma_root's rows (scripts/digamma_roots.py prints them)
_DIGAMMA_ROOTS = [
    "-0.50408304, 2.9111948e-08, -3.1418512",
    "-1.5734985, 1.4310143e-08, 3.2272427",
    "-2.6107209, 4.4348836e-09, -3.3417244",
    "-3.6352935, 1.1729723e-07, 3.4484205",
    "-4.653238, 5.792849e-08, -3.5444448",
    "-5.6671624, -2.3191408e-08, 3.6308682",
    "-6.678418, -5.3588565e-08, -3.709169",
    "-7.6877885, 1.6144908e-07, 3.780651",
    "-8.695765, 3.7780958e-07, -3.846376",
    "-9.702673, 4.1837217e-07, 3.9071937",
    "-10.708741, 3.4979516e-07, -3.963788",
    "-11.714133, 2.0140533e-07, 4.016712",
    "-12.718971, 2.266922e-07, -4.0664196",
    "-13.723348, 2.0651557e-07, 4.1132846",
    "-14.727334, -3.9349655e-07, -4.157621",
    "-15.7309885, -4.0383043e-07, 4.199693",
    "-16.734356, -7.9744206e-07, -4.239725",
    "-17.737474, -7.1844926e-07, 4.2779107",
    "-18.740376, 5.740187e-07, -4.314416",
    "-19.743082, 3.7391857e-07, 4.3493857",
    "-20.745617, 4.923427e-08, -4.382947",
    "-21.748, 4.2308304e-07, 4.4152117",
    "-22.750242, -7.510297e-07, -4.4462786",
    "-23.752363, 2.6757087e-07, 4.476235",
    "-24.75437, -5.221052e-07, -4.5051594",
    "-25.756275, 9.623092e-08, 4.533123",
    "-26.758087, 8.715418e-07, -4.5601883",
    "-27.759811, -2.944595e-07, 4.5864124",
    "-28.761457, -7.840276e-07, -4.611848",
    "-29.763033, 8.840805e-07, 4.6365414",
    "-30.764538, -7.754389e-07, -4.6605363",
    "-31.765984, 7.690847e-07, 4.6838717",
    "-32.76737, -8.0463485e-07, -4.7065835",
    "-33.7687, -1.8482065e-06, 4.7287054",
    "-34.769985, 1.6668479e-06, -4.7502675",
    "-35.771217, -1.1555513e-06, 4.7712984",
    "-36.772408, -1.8429984e-06, -4.7918243",
    "-37.77356, 7.0880094e-07, 4.8118687",
    "-38.77467, 2.0693267e-07, -4.831455",
    "-39.77574, -1.8051452e-06, 4.850604",
    "-40.776783, 2.1577559e-07, -4.8693347",
    "-41.77779, 5.347305e-07, 4.8876657",
    "-42.778767, 1.1953114e-06, -4.905614",
    "-43.779713, 5.608534e-07, 4.923196",
    "-44.780632, 9.308555e-07, -4.940426",
    "-45.781525, 9.0011997e-07, 4.9573183",
    "-46.78239, -8.367135e-07, -4.9738865",
    "-47.783234, -1.679502e-06, 4.990143",
    "-48.784058, 1.0546568e-06, -5.006099",
    "-49.784855, -1.319854e-06, 5.021766",
    "-50.785637, 1.6539742e-06, -5.037155",
    "-51.786396, 1.4230297e-06, 5.052275",
    "-52.787136, 9.364686e-07, -5.0671363",
    "-53.787857, -6.177522e-07, 5.081747",
    "-54.788563, -1.877023e-07, -5.096116",
    "-55.789253, 1.5093074e-06, 5.1102514",
    "-56.789925, -1.6737285e-08, -5.124161",
    "-57.79058, -1.5876042e-06, 5.1378508",
    "-58.791225, 1.0931661e-08, -5.151329",
    "-59.791855, 3.9709013e-07, 5.1646023",
    "-60.79247, -9.651981e-07, -5.1776757",
    "-61.79307, -7.6846237e-07, 5.1905565",
    "-62.793663, 5.069263e-07, -5.2032504",
    "-63.79424, -1.4090657e-06, 5.2157617",
]

HELPERS = {
    # fmod(x, y) exactly, as C's fmod (PyTorch's CPU): WGSL's `%` on f32 is x - y*trunc(x/y),
    # which is off once x/y rounds (fmod(1, 0.1) came out 0, not 0.09999999). Both values as
    # integers m * 2^(e-150) (e >= 1, subnormals included), the remainder by integer % on the
    # 24-bit mantissas, 8 exponent bits a step: at most ceil(253/8) = 32 loop iterations an
    # element (x/y = 2^253 at worst), then the bits of r * 2^(ey-150) built directly (no ldexp,
    # which may flush subnormal factors).
    # x^k as torch's float32 cumprod (and so torch.vander) computes it: the product of k copies
    # of x in a double accumulator (each product rounded to 53 bits, nearest even), rounded to
    # float32 once at the end (a float32 running product was 1-2 ulp off from x^3 on). By
    # integers: the double is M·2^e, M in [2^52, 2^53) as (hi: 21 bits, lo: 32); M times x's
    # 24-bit significand in 16-bit limbs (each column's sum < 2^19 before its carry), then
    # rounded back to 53 bits. The loop stops once the value is past float32's range for good
    # (|x|^i is monotone in i); k iterations otherwise (the caller bounds k by lavapipe's
    # loop budget).
    "p_pow_cumprod": """fn p_pow_cumprod(x: f32, k: i32) -> f32 {
  if (k == 0) { return 1.0; }
  let ux = bitcast<u32>(x);
  let ax = ux & 0x7fffffffu;
  // the result's sign bit: x's where k is odd, by integer arithmetic. (With the bool form,
  // `neg = sign && (k & 1) == 1` through p_with_sign, the H100 wrote -0.0 for even powers of a
  // negative x that underflow, where lavapipe and torch give +0.0; why is not known, and this
  // form, the same on lavapipe, has not yet run there: tests/test_numerics41.py vander.)
  let sb = (ux & 0x80000000u) * (u32(k) & 1u);
  if (ax > 0x7f800000u) { return x; }
  if (ax == 0u || ax == 0x7f800000u) { return bitcast<f32>(ax | sb); }
  var ex = i32(ax >> 23u);
  var mx = ax & 0x7fffffu;
  if (ex == 0) {  // a subnormal x: its significand normalised
    ex = 1;
    loop {
      if ((mx & 0x800000u) != 0u) { break; }
      mx = mx << 1u;
      ex = ex - 1;
    }
  } else {
    mx = mx | 0x800000u;
  }
  let e1 = ex - 150;  // |x| = mx·2^e1
  var hi = mx >> 3u;
  var lo = mx << 29u;
  var e = e1 - 29;
  let b0 = mx & 0xffffu;
  let b1 = mx >> 16u;
  for (var i = 1; i < k; i = i + 1) {
    if (e > 200 || e < -400) { break; }
    let a0 = lo & 0xffffu; let a1 = lo >> 16u; let a2 = hi & 0xffffu; let a3 = hi >> 16u;
    let p00 = a0 * b0; let p10 = a1 * b0; let p20 = a2 * b0; let p30 = a3 * b0;
    let p01 = a0 * b1; let p11 = a1 * b1; let p21 = a2 * b1; let p31 = a3 * b1;
    var c = (p00 >> 16u) + (p10 & 0xffffu) + (p01 & 0xffffu);
    let r1 = c & 0xffffu;
    c = (c >> 16u) + (p10 >> 16u) + (p01 >> 16u) + (p20 & 0xffffu) + (p11 & 0xffffu);
    let r2 = c & 0xffffu;
    c = (c >> 16u) + (p20 >> 16u) + (p11 >> 16u) + (p30 & 0xffffu) + (p21 & 0xffffu);
    let r3 = c & 0xffffu;
    c = (c >> 16u) + (p30 >> 16u) + (p21 >> 16u) + (p31 & 0xffffu);
    let r4 = c & 0xffffu;
    let r5 = (c >> 16u) + (p31 >> 16u);
    let q0 = (p00 & 0xffffu) | (r1 << 16u);
    let q1 = r2 | (r3 << 16u);
    let q2 = r4 | (r5 << 16u);
    var sh = 23u;  // the product is in [2^75, 2^77): 53 bits kept
    if ((q2 >> 12u) != 0u) { sh = 24u; }
    var nlo = (q0 >> sh) | (q1 << (32u - sh));
    var nhi = (q1 >> sh) | (q2 << (32u - sh));
    let rem = q0 & ((1u << sh) - 1u);
    let half = 1u << (sh - 1u);
    if (rem > half || (rem == half && (nlo & 1u) == 1u)) {
      nlo = nlo + 1u;
      if (nlo == 0u) { nhi = nhi + 1u; }
    }
    e = e + e1 + i32(sh);
    if (nhi == 0x200000u) { nhi = 0x100000u; e = e + 1; }  // rounded up to 2^53
    hi = nhi;
    lo = nlo;
  }
  // M·2^e to float32, nearest even: 29 bits dropped, more for a subnormal result
  let be = e + 52 + 127;
  if (be > 254) { return bitcast<f32>(0x7f800000u | sb); }
  var d = 29;
  if (be < 1) { d = 30 - be; }
  if (d > 53) { return bitcast<f32>(sb); }
  var qv: u32;
  var up: bool;
  if (d < 32) {
    let du = u32(d);
    qv = (hi << (32u - du)) | (lo >> du);
    let rem = lo & ((1u << du) - 1u);
    let half = 1u << (du - 1u);
    up = rem > half || (rem == half && (qv & 1u) == 1u);
  } else {
    let du = u32(d - 32);
    qv = hi >> du;
    if (du == 0u) {
      up = lo > 0x80000000u || (lo == 0x80000000u && (qv & 1u) == 1u);
    } else {
      let rh = hi & ((1u << du) - 1u);
      let hh = 1u << (du - 1u);
      up = rh > hh || (rh == hh && (lo > 0u || (qv & 1u) == 1u));
    }
  }
  if (up) { qv = qv + 1u; }
  var bits = qv;
  if (be >= 1) { bits = (u32(be) << 23u) + qv - 0x800000u; }
  if (bits >= 0x7f800000u) { return bitcast<f32>(0x7f800000u | sb); }
  return bitcast<f32>(bits | sb);
}""",
    "p_fmodf": """fn p_fmodf(x: f32, y: f32) -> f32 {
  let bx = bitcast<u32>(x);
  let ax = bx & 0x7fffffffu;
  let ay = bitcast<u32>(y) & 0x7fffffffu;
  let sign = bx & 0x80000000u;
  if (ay == 0u || ax >= 0x7f800000u || ay > 0x7f800000u) { return p_nan(); }
  if (ax < ay) { return x; }
  var ex = i32(ax >> 23u);
  var ey = i32(ay >> 23u);
  var mx = ax & 0x7fffffu;
  var my = ay & 0x7fffffu;
  if (ex == 0) { ex = 1; } else { mx = mx | 0x800000u; }
  if (ey == 0) { ey = 1; } else { my = my | 0x800000u; }
  var r = mx % my;
  var d = ex - ey;
  loop {
    if (d <= 0 || r == 0u) { break; }
    let k = min(d, 8);
    r = (r << u32(k)) % my;
    d = d - k;
  }
  if (r == 0u) { return bitcast<f32>(sign); }
  let s = i32(countLeadingZeros(r)) - 8;
  let e = ey - s;
  var bits = r << u32(ey - 1);
  if (e >= 1) { bits = (u32(e) << 23u) | ((r << u32(s)) & 0x7fffffu); }
  return bitcast<f32>(bits | sign);
}""",
    # PyTorch's floor division of floats (c10 div_floor_floating): from the exact fmod, so
    # 1 // 0.1 is 9 (as Python), -5 // inf is -1, and a zero quotient keeps the sign of a / b.
    "p_floordivf": """fn p_floordivf(a: f32, b: f32) -> f32 {
  if (p_isnan(a) || p_isnan(b)) { return p_nan(); }
  if ((bitcast<u32>(b) & 0x7fffffffu) == 0u) { return a / b; }
  let m = p_fmodf(a, b);
  var d = p_divf(a - m, b);  // correctly rounded, as C's
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
  if (d == 0.0) { return bitcast<f32>((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u); }
  var f = floor(d);
  if (d - f > 0.5) { f = f + 1.0; }
  return f;
}""",
    # PyTorch's remainder of floats: the exact fmod, moved into the divisor's sign
    "p_remf": """fn p_remf(a: f32, b: f32) -> f32 {
  var m = p_fmodf(a, b);
  if (!p_isnan(m) && m != 0.0 && ((b < 0.0) != (m < 0.0))) { m = m + b; }
  return m;
}""",
    # Euclid on |a|, |b|: at most 46 steps for 32-bit values (consecutive Fibonacci numbers are
    # the worst case), so an invocation's loop stays far inside the loop budget
    "p_gcd_i": """fn p_gcd_i(a: i32, b: i32) -> i32 {
  var x = abs(a);
  var y = abs(b);
  loop { if (y == 0) { break; } let t = x % y; x = y; y = t; }
  return x;
}""",
    # erfinv: Giles' single-precision approximation ("Approximating the erfinv function", GPU
    # Computing Gems Jade, 2011: a polynomial in w = -log(1 - x^2), two branches), then one Newton
    # step on erf(y) = |x| (erfc(y) = 1 - |x| in the tail, where 1 - |x| is exact), so the result
    # is as good as p_erf/p_erfc_pos. w by log1p for |x| < 0.5 (1 - x^2 would round x^2 away).
    # Max error against torch float64 of the same f32 inputs, lavapipe (2026-12): 1.17 ULP (the
    # H200: 1.65, 2026-12-01) over 6M points of (-1, 1) (uniform, 1 - 2^-U(1,24) near ±1,
    # 2^-U(0,120) near 0); without the Newton step (Giles alone, w by log1p near 0) 3.7 ULP. tests/test_special.py holds it to
    # ERFINV_MAX_ULP (ops/special.py).
    "p_erfinv": """fn p_erfinv(x: f32) -> f32 {
  let a = abs(x);
  if (p_isnan(x) || a > 1.0) { return p_nan(); }
  if (a == 1.0) { return select(-p_inf(), p_inf(), x > 0.0); }
  if (a < 0.000244140625) {
    // sqrt(pi)/2·x·(1 + pi/12·x^2): below 2^-12 the next term is < 2^-50 relative. (Newton's
    // correction erf(y) - |x| is subnormal for |x| < 1e-30, flushed to 0 by some GPUs.)
    let s = a * (0.886226925 + 0.232013666 * a * a);
    return bitcast<f32>(bitcast<u32>(s) | (bitcast<u32>(x) & 0x80000000u));
  }
  var w: f32;
  if (a < 0.5) { w = -p_log1p(-a * a); } else { w = -log((1.0 - a) * (1.0 + a)); }
  var y = p_giles_erfinv(w) * a;
  let d = 1.1283791670955126 * exp(-y * y);
  if (y < 0.84375) { y = y - (p_erf_small(y) - a) / d; } else { y = y + (p_erfc_pos(y) - (1.0 - a)) / d; }
  return bitcast<f32>(bitcast<u32>(y) | (bitcast<u32>(x) & 0x80000000u));
}""",
    # exp(x) to ~1 ULP for any x: Cody-Waite reduction x = n·ln2 + r (ln2 in two parts, the
    # high one with 9 trailing zero bits so n·LN2_HI is exact for |n| < 2^9), Taylor to r^7 on
    # |r| <= ln2/2 (the next term is 0.09 ULP), times 2^n built from bits in two halves (so
    # results down to 2^-149 need no subnormal factor). WGSL's exp is only 3 + 2|x| ULP (it
    # goes through exp2(x·log2 e), whose product rounds): lavapipe's exp(-16) was ~25 ULP off,
    # which made erfc(4) 42 ULP off.
    "p_expf": """fn p_expf(x: f32) -> f32 {
  if (p_isnan(x)) { return x; }
  if (x > 88.7228394) { return p_inf(); }
  if (x < -103.972084) { return 0.0; }
  let n = round(x * 1.44269504);
  let r = p_opaque(x - n * 0.693145752) - n * 1.42860677e-06;
  let p = 1.0 + r * (1.0 + r * (0.5 + r * (0.166666672 + r * (0.0416666679 + r * (0.00833333377 + r * (0.00138888892 + r * 0.000198412701))))));
  let ni = i32(n);
  let h = ni / 2;
  return p_opaque(p * bitcast<f32>(u32(h + 127) << 23u)) * bitcast<f32>(u32(ni - h + 127) << 23u);
}""",
    # log, log2, log10 to ~1 ULP over the whole range, subnormals included: x = 2^e·(1 + f)
    # from the bits (a subnormal's leading bit moved up first), 1 + f in [sqrt(1/2), sqrt(2))
    # so f is exact, Cephes logf's degree-9 polynomial for the tail log(1 + f) - f, and e·ln 2
    # (e·log10 2, e) added in two parts, the high part with trailing zero bits so that e·hi is
    # exact. WGSL's log is only 2^-21 absolute on [0.5, 2]: lavapipe's log(0.99999946) was 10 %
    # off (log(1 - 1e-4) 3e-4 relative), and it read a subnormal's exponent as -127
    # (log(1e-45) = -88.03, not -103.28).
    "p_log_split": """fn p_log_split(x: f32) -> vec2<f32> {
  var b = bitcast<u32>(x) & 0x7fffffffu;
  var e = i32(b >> 23u) - 127;
  if ((b >> 23u) == 0u) {  // subnormal: b·2^-149 = 1.f·2^(-126 - s), s = clz(b) - 8
    let s = countLeadingZeros(b) - 8u;
    b = b << s;
    e = -126 - i32(s);
  }
  var m = bitcast<f32>((b & 0x7fffffu) | 0x3f800000u);
  if (m > 1.41421356) { m = 0.5 * m; e = e + 1; }
  return vec2<f32>(f32(e), m - 1.0);
}""",
    "p_log_tail": """fn p_log_tail(f: f32) -> f32 {
  let z = f * f;
  let p = ((((((((7.0376836292e-2 * f - 1.1514610310e-1) * f + 1.1676998740e-1) * f - 1.2420140846e-1) * f + 1.4249322787e-1) * f - 1.6668057665e-1) * f + 2.0000714765e-1) * f - 2.4999993993e-1) * f + 3.3333331174e-1);
  return p * f * z - 0.5 * z;
}""",
    # the special values of log: nan below 0 (by the sign bit, so a negative subnormal is not
    # taken for zero), -inf at ±0, inf at inf; 0 where x is ordinary
    "p_log_special": """fn p_log_special(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) == 0u) { return -p_inf(); }
  if (u >= 0x7f800000u) { return select(p_nan(), x, u == 0x7f800000u); }
  return 0.0;
}""",
    "p_logf": """fn p_logf(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) == 0u || u >= 0x7f800000u) { return p_log_special(x); }
  let ef = p_log_split(x);
  let e = ef.x;
  let f = ef.y;
  return ((p_log_tail(f) + e * -2.12194440e-4) + f) + e * 0.693359375;
}""",
    "p_log2f": """fn p_log2f(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) == 0u || u >= 0x7f800000u) { return p_log_special(x); }
  let ef = p_log_split(x);
  let f = ef.y;
  let t = p_log_tail(f);
  // log2 e = 1 + 0.44269504...: the 1 added exactly
  return (((t * 0.44269504088896341 + f * 0.44269504088896341) + t) + f) + ef.x;
}""",
    "p_log10f": """fn p_log10f(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) == 0u || u >= 0x7f800000u) { return p_log_special(x); }
  let ef = p_log_split(x);
  let e = ef.x;
  let f = ef.y;
  let t = p_log_tail(f);
  // log10 e = 0.43359375 + 7.0073e-4 and log10 2 = 0.30078125 + 2.4875e-4 (Cephes log10f)
  let lo = (t * 7.00731903251827651e-4 + f * 7.00731903251827651e-4) + e * 2.48745663981195214e-4;
  return ((lo + t * 0.43359375) + f * 0.43359375) + e * 0.30078125;
}""",
    # Giles' polynomial: erfinv(x) ~ p(w)·x, w = -log((1 - x)(1 + x)), for w < 16 (|x| within
    # 2^-24 of 1)
    "p_giles_erfinv": """fn p_giles_erfinv(w: f32) -> f32 {
  var p: f32;
  if (w < 5.0) {
    let v = w - 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * v;
    p = -3.5233877e-06 + p * v;
    p = -4.39150654e-06 + p * v;
    p = 0.00021858087 + p * v;
    p = -0.00125372503 + p * v;
    p = -0.00417768164 + p * v;
    p = 0.246640727 + p * v;
    p = 1.50140941 + p * v;
  } else {
    let v = sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * v;
    p = 0.00134934322 + p * v;
    p = -0.00367342844 + p * v;
    p = 0.00573950773 + p * v;
    p = -0.0076224613 + p * v;
    p = 0.00943887047 + p * v;
    p = 1.00167406 + p * v;
    p = 2.83297682 + p * v;
  }
  return p;
}""",
    # erfc^-1(q), q in [0, 2]: for q >= 5.6e-8 (w < 16) Giles' approximation and one Newton step
    # on erfc(y) = q, with q itself (exact) in the tail; below, where Giles' polynomial no longer
    # holds, y0 from erfc(y) ~ exp(-y^2)/(y·sqrt(pi)) and three Newton steps on
    # log erfc(y) = log q (log q from the bits for a subnormal q; log erfc by its asymptotic
    # series past y = 9, where erfc leaves the normal range). So ndtri(p) = -sqrt(2)·erfcinv(2p)
    # keeps its relative accuracy for tiny p (ndtri(1e-30) = -11.46, not -inf).
    "p_erfcinv": """fn p_erfcinv(q0: f32) -> f32 {
  if (p_isnan(q0) || q0 < 0.0 || q0 > 2.0) { return p_nan(); }
  let neg = q0 > 1.0;
  let q = select(q0, 2.0 - q0, neg);
  let bq = bitcast<u32>(q) & 0x7fffffffu;  // erfcinv(-0) = inf, as erfcinv(0) (ndtri(-0) = -inf)
  if (bq == 0u) { return select(p_inf(), -p_inf(), neg); }
  let a = 1.0 - q;
  var w: f32;
  if (a < 0.5) { w = -p_log1p(-a * a); } else { w = -log(q * (2.0 - q)); }
  var y: f32;
  if (w < 16.0) {
    y = p_giles_erfinv(w) * a;
    let d = 1.1283791670955126 * p_expf(-y * y);
    if (y < 0.84375) { y = y - (p_erf_small(y) - a) / d; } else { y = y + (p_erfc_pos(y) - q) / d; }
  } else {
    var lq = log(q);
    if ((bq >> 23u) == 0u) { lq = log(f32(bq)) - 103.27892990343185; }
    y = sqrt(-lq - 0.5 * log(-3.14159265 * lq));
    for (var k = 0; k < 3; k++) {
      let z = 1.0 / (y * y);
      let series = 1.0 - z * (0.5 - z * (0.75 - z * 1.875));
      var le: f32;
      var slope: f32;
      if (y < 9.0) {
        let c = p_erfc_pos(y);
        le = log(c);
        slope = -1.1283791670955126 * p_expf(-y * y) / c;
      } else {
        le = -y * y - log(y * 1.7724538509055159) + log(series);
        slope = -2.0 * y / series;
      }
      y = y - (le - lq) / slope;
    }
  }
  return select(y, -y, neg);
}""",
    # (sin(pi·x), cos(pi·x)) exactly reduced: x mod 2 by the exact fmod, then to a quarter
    # period f in [-1/4, 1/4] (x - n/2 is exact), then Taylor series in f (to f^13 and f^12: the
    # next terms are < 2^-26). sin's leading pi·f is pi_hi·f as an exact pair (p_two_prod:
    # lavapipe's fma() is not fused, fma(x, x, -x·x) gave 0) plus f·(pi_lo + ...), pi = pi_hi +
    # pi_lo in f32; cos's leading -pi^2/2·f^2 likewise from f^2 and -pi^2/2 as exact pairs. So
    # neither pi's rounding (2.8e-8 relative) nor that of pi·f enters: sin 0.65 ulp, cos 0.76
    # (they were 1.5-2.0 and 1.1 with pi·f rounded first; 5000 points in each of four quarter
    # periods, lavapipe). Integers give exact zeros (sinc(1) = 0, where torch's float32
    # sin(pi·x)/(pi·x) gives -2.8e-08).
    "p_sincospi": """fn p_sincospi(x: f32) -> vec2<f32> {
  if (p_isnan(x) || p_isinf(x)) { return vec2<f32>(p_nan(), p_nan()); }
  return p_sincospi_red(p_fmodf(x, 2.0));
}""",
    # p_sincospi's kernel for |r| < 2 (no reduction)
    "p_sincospi_red": """fn p_sincospi_red(r: f32) -> vec2<f32> {
  let n = round(2.0 * r);
  let f = r - 0.5 * n;
  let q = i32(n) & 3;
  let f2 = f * f;
  let ph = p_two_prod(f, 3.1415927);
  let s = ph.x + (ph.y + f * (-8.742278e-08 + f2 * (-5.1677127 + f2 * (2.550164 + f2 * (-0.5992645 + f2 * (0.082145885 + f2 * (-0.007370431 + f2 * 0.0004663028)))))));
  let t = p_two_prod(f, f);
  let h = p_two_prod(t.x, -4.934802);
  let c = 1.0 + (h.x + (h.y + t.y * -4.934802 + t.x * (-1.451858e-07 + t.x * (4.058712 + t.x * (-1.3352628 + t.x * (0.23533063 + t.x * (-0.02580689 + t.x * 0.0019295743)))))));
  if (q == 1) { return vec2<f32>(c, -s); }
  if (q == 2) { return vec2<f32>(-s, -c); }
  if (q == 3) { return vec2<f32>(-c, s); }
  return vec2<f32>(s, c);
}""",
    "p_sinpi": "fn p_sinpi(x: f32) -> f32 { return p_sincospi(x).x; }",
    "p_cospi": "fn p_cospi(x: f32) -> f32 { return p_sincospi(x).y; }",
    # hypot without overflow or underflow: max·sqrt(1 + (min/max)^2); inf wins over nan (C99)
    "p_hypot": """fn p_hypot(x: f32, y: f32) -> f32 {
  let a = abs(x);
  let b = abs(y);
  if (p_isinf(a) || p_isinf(b)) { return p_inf(); }
  if (p_isnan(a) || p_isnan(b)) { return p_nan(); }
  let m = max(a, b);
  if (m == 0.0) { return 0.0; }
  let r = min(a, b) / m;
  return m * sqrt(1.0 + r * r);
}""",
    # atan, asin, acos, atan2, sinh, cosh to a few ULP: lavapipe's WGSL built-ins were 2e-5
    # (atan, atan2), 4e-4 (asin, acos) and 1.7e-4 (sinh near 0) relative. atan: Cephes atanf's
    # reduction to |x| <= tan(pi/8) (x > tan(3pi/8): pi/2 - atan(1/x); x > tan(pi/8):
    # pi/4 + atan((x-1)/(x+1))) and its degree-9 odd polynomial; asin(x) = atan(x/sqrt(1-x^2))
    # with 1 - x^2 as (1-x)(1+x); acos(x) = 2·atan(sqrt((1-x)/(1+x))); sinh by expm1 below 1/2,
    # and e^a/2 as (e^(a/2)/2)·e^(a/2) past 80 (no overflow, no rounded a - ln 2). Measured
    # (tests/test_special.py): asin 3.5, acos 3.3, atan 2.4, atan2 2.9, sinh/cosh <= 4 ULP.
    "p_atanf": """fn p_atanf(x0: f32) -> f32 {
  if (p_isnan(x0)) { return x0; }
  var x = abs(x0);
  var y0 = 0.0;
  if (x > 2.414213562373095) { y0 = 1.5707963267948966; x = -1.0 / x; }
  else if (x > 0.4142135623730950) { y0 = 0.7853981633974483; x = (x - 1.0) / (x + 1.0); }
  let z = x * x;
  let y = y0 + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * x + x);
  return p_xorsign(y, x0);
}""",
    "p_asinf": """fn p_asinf(x: f32) -> f32 {
  if (p_isnan(x) || abs(x) > 1.0) { return p_nan(); }
  return p_atanf(x / sqrt((1.0 - x) * (1.0 + x)));
}""",
    "p_acosf": """fn p_acosf(x: f32) -> f32 {
  if (p_isnan(x) || abs(x) > 1.0) { return p_nan(); }
  return 2.0 * p_atanf(sqrt((1.0 - x) / (1.0 + x)));
}""",
    # atan2 from the octant: r = atan(small/large) of the magnitudes, then pi/2 - r, pi - r and
    # the sign of y; zeros and infinities as C's atan2 (atan2(0, -0) = pi, atan2(inf, inf) = pi/4).
    # Magnitudes past 2^126 are quartered first (the ratio is the same): NVIDIA's division is a
    # times 1/b, and 1/b past 2^126 is subnormal, flushed, so atan2(-3.4e38, -3.4e38) came out
    # -pi on the H100 (complex log's angle; tests/test_numerics41.py)
    "p_atan2f": """fn p_atan2f(y: f32, x: f32) -> f32 {
  if (p_isnan(x) || p_isnan(y)) { return p_nan(); }
  var ay = abs(y);
  var ax = abs(x);
  if (max(ax, ay) > 8.507059e37) { ay = ay * 0.25; ax = ax * 0.25; }
  let xneg = (bitcast<u32>(x) >> 31u) == 1u;
  var r: f32;
  if (ay == 0.0) { r = 0.0; }
  else if (p_isinf(ax) && p_isinf(ay)) { r = 0.7853981633974483; }
  else if (ay <= ax) { r = p_atanf(ay / ax); }
  else { r = 1.5707963267948966 - p_atanf(ax / ay); }
  if (xneg) { r = 3.141592653589793 - r; }
  return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(y) & 0x80000000u));
}""",
    # sin, cos and tan to within 1 ULP for every finite f32 (WGSL's built-ins are 2^-11
    # absolute on [-pi, pi] and unbounded beyond: lavapipe's cos(1e4) was 46 ULP off and
    # sin(1e7) had no correct digit). x = n·pi/2 + r, |r| <= pi/4, r as a pair of floats:
    # - |x| <= pi/4: r = x;
    # - |x| < 6400 (n < 2^12): Cody-Waite with pi/2 in five 12-bit parts and a sixth, so every
    #   n·part is exact; the first two differences are exact too (Sterbenz, then a multiple of
    #   2^-23 below 2), the later ones two-sums, so r keeps ~70 bits even next to a multiple
    #   of pi/2;
    # - beyond, Payne-Hanek in integers, exact up to 3.4e38: |x| = m·2^e (m 24 bits) times the
    #   160 bits of 2/pi from the one worth 2m (those above give multiples of 4), the quadrant
    #   from the product's integer bits, its fraction rounded to the nearest quadrant, 48 bits
    #   kept after its leading zeros (a float's fraction is never below 2^-64; the bits left
    #   out are worth < 2^-72), then r = f·pi/2 by Dekker's product with pi/2 in two parts.
    # Then Taylor series to r^11 and r^12 (the next terms < 2^-36) with r's low part and the
    # rounding of cos's 1 - r^2/2 carried as pairs (fdlibm's trick); tan is (s/c or -c/s) of
    # those pairs, one residual step after the quotient. Every rounding the algebra relies on
    # goes through p_opaque (lavapipe reassociated rh + (t + u): 1 ULP). Measured against
    # float64 rounded to f32 (tests/test_known_wrong.py, lavapipe, 2M points a decade to
    # 3.4e38 and the floats next to k·pi/2, k < 2e6): sin, cos <= 0.77 ULP, tan <= 0.97 (torch
    # CPU 0.6). Cost on lavapipe, which runs both sides of the branch: 4M sin 50 ms, the
    # built-in 11 ms (Payne-Hanek's side is ~30 of them).
    "p_mul24x32": """fn p_mul24x32(m: u32, t: u32) -> vec2<u32> {
  // m·t (m < 2^24) as (low word, high word), from 16-bit halves (every partial product fits)
  let ml = m & 0xffffu;
  let mh = m >> 16u;
  let tl = t & 0xffffu;
  let th = t >> 16u;
  let mid = ml * th + mh * tl;
  let cm = select(0u, 0x10000u, mid < ml * th);
  let lo = ml * tl + (mid << 16u);
  let cl = select(0u, 1u, lo < ml * tl);
  return vec2<u32>(lo, mh * th + (mid >> 16u) + cm + cl);
}""",
    "p_rem_pio2_cw": """fn p_rem_pio2_cw(a: f32) -> vec3<f32> {
  // pi/4 < a < 6400 (n < 2^12): as p_rem_pio2, pi/2 in five 12-bit parts and a sixth
  let n = round(a * 0.636619772);
  var s = p_opaque(a - n * bitcast<f32>(0x3fc90000u));  // exact: n·P1 has 24 bits, Sterbenz
  s = p_opaque(s - n * bitcast<f32>(0x39fda000u));      // exact: a multiple of 2^-23 below 2
  let p3 = p_two_sum(s, -n * bitcast<f32>(0x33a22000u));  // exact below 2^-11, else carried
  let p4 = p_two_sum(p3.x, -n * bitcast<f32>(0x2c340000u));
  let p5 = p_two_sum(p4.x, -n * bitcast<f32>(0x27c23000u));
  let r = p_two_sum(p5.x, ((p3.y + p4.y) + p5.y) - n * bitcast<f32>(0x211898ccu));
  return vec3<f32>(r.x, r.y, f32(u32(i32(n) & 3)));
}""",
    # a + b = s + e exactly (Knuth's two-sum; s and b - (s - a) through p_opaque)
    "p_two_sum": """fn p_two_sum(a: f32, b: f32) -> vec2<f32> {
  let s = p_opaque(a + b);
  let bb = p_opaque(s - a);
  return vec2<f32>(s, (a - p_opaque(s - bb)) + (b - bb));
}""",
    "p_rem_pio2": """fn p_rem_pio2(a: f32) -> vec3<f32> {
  // a > pi/4, finite: (r_hi, r_lo, n) with a = n·pi/2 + r_hi + r_lo (mod 2pi), |r| <= pi/4
  let bits = bitcast<u32>(a);
  let e = i32(bits >> 23u) - 150;  // a = m·2^e
  let m = (bits & 0x7fffffu) | 0x800000u;
  // bits j <= e - 2 of 2/pi give multiples of 4: the five words from the one holding bit e - 1
  let k = ((e - 2) >> 5) + 1;
  let p0 = p_mul24x32(m, p_2opi_word(k));
  let p1 = p_mul24x32(m, p_2opi_word(k + 1));
  let p2 = p_mul24x32(m, p_2opi_word(k + 2));
  let p3 = p_mul24x32(m, p_2opi_word(k + 3));
  let p4 = p_mul24x32(m, p_2opi_word(k + 4));
  // q = m·(those 160 bits) in words q0 (the lowest) .. q5; a·2/pi = q·2^-L
  let q0 = p4.x;
  let q1 = p4.y + p3.x;
  var c = select(0u, 1u, q1 < p3.x);
  var s = p3.y + p2.x;
  let q2 = s + c;
  c = select(0u, 1u, s < p2.x) + select(0u, 1u, q2 < s);
  s = p2.y + p1.x;
  let q3 = s + c;
  c = select(0u, 1u, s < p1.x) + select(0u, 1u, q3 < s);
  s = p1.y + p0.x;
  let q4 = s + c;
  c = select(0u, 1u, s < p0.x) + select(0u, 1u, q4 < s);
  let q5 = p0.y + c;
  // L = 32k + 128 - e in [127, 158]: the quadrant is bits L, L + 1 of q and the fraction the
  // 96 bits below, read from q1.. (L >= 128) or q0.. (L = 127) shifted right by sh
  let L = 32 * k + 128 - e;
  let hi = L >= 128;
  let a0 = select(q0, q1, hi);
  let a1 = select(q1, q2, hi);
  let a2 = select(q2, q3, hi);
  let a3 = select(q3, q4, hi);
  let a4 = select(q4, q5, hi);
  let sh = u32(L - 96) & 31u;
  var n = p_funnel(a3, a4, sh) & 3u;
  var f1 = p_funnel(a2, a3, sh);
  var f2 = p_funnel(a1, a2, sh);
  var f3 = p_funnel(a0, a1, sh);
  // to the nearest quadrant: a fraction of 1/2 or more is n + 1 and -(1 - f)
  let neg = (f1 >> 31u) == 1u;
  if (neg) {
    n = (n + 1u) & 3u;
    f1 = ~f1;
    f2 = ~f2;
    f3 = ~f3 + 1u;
    if (f3 == 0u) { f2 = f2 + 1u; if (f2 == 0u) { f1 = f1 + 1u; } }
  }
  var lz = countLeadingZeros(f1);
  if (f1 == 0u) { f1 = f2; f2 = f3; f3 = 0u; lz = 32u + countLeadingZeros(f1); }
  let z = lz & 31u;
  f1 = p_funnel(f2, f1, 32u - z);
  f2 = p_funnel(f3, f2, 32u - z);
  // f = fh + fl, 24 bits each (exact: integers times powers of two built from bits)
  let fh = f32(f1 >> 8u) * bitcast<f32>((103u - lz) << 23u);
  let fl = f32(((f1 & 0xffu) << 16u) | (f2 >> 16u)) * bitcast<f32>((79u - lz) << 23u);
  // r = f·pi/2: pi/2 = PH + PL, f·PH exactly as p.x + p.y
  let ph = bitcast<f32>(0x3fc90fdbu);
  let p = p_two_prod(fh, ph);
  let cr = p.y + (fh * bitcast<f32>(0xb33bbd2eu) + fl * ph);
  let rh = p_opaque(p.x + cr);
  let rl = cr - p_opaque(rh - p.x);
  return vec3<f32>(select(rh, -rh, neg), select(rl, -rl, neg), f32(n));
}""",
    # bits sh .. sh + 31 of the 64-bit (hi, lo): (lo >> sh) | (hi << (32 - sh)), sh in [0, 32]
    # (WGSL takes a shift count mod 32, so 0 and 32 are their own cases)
    "p_funnel": """fn p_funnel(lo: u32, hi: u32, sh: u32) -> u32 {
  if (sh == 0u) { return lo; }
  if (sh >= 32u) { return hi; }
  return (lo >> sh) | (hi << (32u - sh));
}""",
    # word i of 2/pi's binary expansion after a zero word 0: word i > 0 holds the bits of
    # weight 2^-(32i - 31) .. 2^-32i (mpmath, 300 bits)
    "p_2opi_word": """fn p_2opi_word(i: i32) -> u32 {
  switch i {
    case 1: { return 0xa2f9836eu; }
    case 2: { return 0x4e441529u; }
    case 3: { return 0xfc2757d1u; }
    case 4: { return 0xf534ddc0u; }
    case 5: { return 0xdb629599u; }
    case 6: { return 0x3c439041u; }
    case 7: { return 0xfe5163abu; }
    case 8: { return 0xdebbc561u; }
    default: { return 0u; }
  }
}""",
    "p_sincosf": """fn p_sincosf(x: f32) -> vec2<f32> {
  // (sin x, cos x); NaN for NaN and ±inf
  let a = abs(x);
  if (a >= p_inf() || p_isnan(x)) { return vec2<f32>(p_nan(), p_nan()); }
  var r = vec3<f32>(a, 0.0, 0.0);
  if (a >= 6400.0) { r = p_rem_pio2(a); } else if (a > bitcast<f32>(0x3f490fdbu)) { r = p_rem_pio2_cw(a); }
  let k = p_sincos_kernel(r.x, r.y);
  let sc = vec2<f32>(k.x, k.z);
  let n = u32(r.z);
  var v = sc;
  if (n == 1u) { v = vec2<f32>(sc.y, -sc.x); }
  if (n == 2u) { v = vec2<f32>(-sc.x, -sc.y); }
  if (n == 3u) { v = vec2<f32>(-sc.y, sc.x); }
  return vec2<f32>(p_xorsign(v.x, x), v.y);
}""",
    "p_sincos_kernel": """fn p_sincos_kernel(rh: f32, rl: f32) -> vec4<f32> {
  // (sin, cos) of rh + rl as pairs (s, s_lo, c, c_lo); |rh| <= pi/4, |rl| <= ulp(rh)/2. The
  // small terms through p_opaque: a compiler that reassociates rh + (t + u) into (rh + t) + u
  // rounds twice (lavapipe did: 1 ULP)
  let z = rh * rh;
  let ps = -0.166666667 + z * (0.00833333333 + z * (-0.000198412698 + z * (2.75573192e-06 + z * -2.50521084e-08)));
  let ts = p_opaque(rh * z * ps + rl * (1.0 - 0.5 * z));
  let s = p_opaque(rh + ts);
  let pc = 0.0416666667 + z * (-0.00138888889 + z * (2.48015873e-05 + z * (-2.75573192e-07 + z * 2.08767570e-09)));
  let hz = 0.5 * z;
  let w = p_opaque(1.0 - hz);
  let tc = p_opaque(((1.0 - w) - hz) + (z * z * pc - rh * rl));
  let c = p_opaque(w + tc);
  return vec4<f32>(s, ts - (s - rh), c, tc - (c - w));
}""",
    "p_sinf": "fn p_sinf(x: f32) -> f32 { return p_sincosf(x).x; }",
    "p_cosf": "fn p_cosf(x: f32) -> f32 { return p_sincosf(x).y; }",
    "p_tanf": """fn p_tanf(x: f32) -> f32 {
  let a = abs(x);
  if (a >= p_inf() || p_isnan(x)) { return p_nan(); }
  var r = vec3<f32>(a, 0.0, 0.0);
  if (a >= 6400.0) { r = p_rem_pio2(a); } else if (a > bitcast<f32>(0x3f490fdbu)) { r = p_rem_pio2_cw(a); }
  // (s + s_lo) / (c + c_lo), or -(c + c_lo) / (s + s_lo) in an odd quadrant: the quotient q of
  // the high parts and one correction from the exact residual num - q·den
  let k = p_sincos_kernel(r.x, r.y);
  let odd = (u32(r.z) & 1u) == 1u;
  let num = select(k.xy, -k.zw, odd);
  let den = select(k.zw, k.xy, odd);
  let q = p_opaque(num.x / den.x);
  let p = p_two_prod(q, den.x);
  let res = (((num.x - p.x) - p.y) + num.y) - q * den.y;
  return p_xorsign(q + res / den.x, x);
}""",
    "p_sinhf": """fn p_sinhf(x: f32) -> f32 {
  let a = abs(x);
  var r: f32;
  if (a < 0.5) { let e = p_expm1(a); r = 0.5 * (e + e / (e + 1.0)); }
  else if (a < 80.0) { let e = p_expf(a); r = 0.5 * (e - 1.0 / e); }
  else { let h = p_expf(0.5 * a); r = p_opaque(0.5 * h) * h; }
  if (p_isnan(x)) { return x; }
  return p_xorsign(r, x);
}""",
    "p_coshf": """fn p_coshf(x: f32) -> f32 {
  let a = abs(x);
  if (a < 80.0) { let e = p_expf(a); return 0.5 * (e + 1.0 / e); }
  let h = p_expf(0.5 * a);  // e^a / 2 without overflowing e^a
  return p_opaque(0.5 * h) * h;
}""",
    # asinh, acosh, atanh without the cancellation of WGSL's log(x + sqrt(x*x + 1)) forms (which
    # give 0 for asinh(1e-10)) or their overflow (x*x for x > 1.8e19): through log1p, and
    # log(2x) = log(x) + ln 2 for large x.
    "p_asinh": """fn p_asinh(x: f32) -> f32 {
  let a = abs(x);
  var r: f32;
  if (a > 4096.0) { r = log(a) + 0.693147181; } else { r = p_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a))); }
  if (p_isnan(x)) { return x; }
  return p_xorsign(r, x);
}""",
    "p_acosh": """fn p_acosh(x: f32) -> f32 {
  if (p_isnan(x) || x < 1.0) { return p_nan(); }
  if (x > 4096.0) { return log(x) + 0.693147181; }
  let t = x - 1.0;
  return p_log1p(t + sqrt(2.0 * t + t * t));
}""",
    "p_atanh": """fn p_atanh(x: f32) -> f32 {
  let a = abs(x);
  if (p_isnan(x) || a > 1.0) { return p_nan(); }
  if (a == 1.0) { return select(p_inf(), -p_inf(), x < 0.0); }
  let r = 0.5 * p_log1p(2.0 * a / (1.0 - a));
  return p_xorsign(r, x);
}""",
    # lgamma for x >= 0.5. x >= 8: Stirling's series (4 terms; next term < 2^-30 at x = 8), its
    # (x - 1/2)·log x - x in two-f32 pieces (log x from p_logf's parts, hi + lo, the product by
    # p_two_prod, the difference by p_two_sum): with WGSL's log (3 ulp at best) and one rounding
    # a step it was 2.8 ulp on [100, 1e30] and made the reflection 3-5 ulp below -20; now 1.0
    # (up to 1e34; beyond, the plain form: x·log x would overflow the split). [1.25, 1.75]:
    # lgamma(tc) + (x - tc)^2·Q(x) about the minimum tc = 1.4616 (Q a Chebyshev fit, `_cheb`
    # below), where t·h(t) - log1p(t) below had cancelled to 11 ulp; below 1.25 that form
    # (log1p through p_logf: 2.4 ulp -> 0.8), t = x - 1; else the recurrence down to
    # lgamma(2 + t) = t·h(t), t in [-0.25, 1.5], h a Chebyshev fit, so the zeros at 1 and 2
    # keep their relative accuracy. Measured (lavapipe, against mpmath; scripts/lgamma_check.py):
    # 2.3 ulp on [0.5, 100], 1.0 beyond (torch's float32 0.8, 0.5).
    "p_lgamma_pos": """fn p_lgamma_pos(x: f32) -> f32 {
  if (x >= 8.0) {
    let z = 1.0 / x;
    let z2 = z * z;
    let ser = 0.918938533 + z * (0.0833333333 + z2 * (-0.00277777778 + z2 * (0.000793650794 + z2 * -0.000595238095)));
    if (x > 1e34) { return (x - 0.5) * p_logf(x) - x + ser; }
    let ef = p_log_split(x);
    let lh = p_two_sum(ef.x * 0.693359375, ef.y);
    let ll = lh.y + (p_log_tail(ef.y) + ef.x * -2.12194440e-4);
    let xm = x - 0.5;
    let pr = p_two_prod(xm, lh.x);
    let sm = p_two_sum(pr.x, -x);
    return sm.x + (((sm.y + pr.y) + xm * ll) + ser);
  }
  if (x >= 1.25 && x <= 1.75) {
    let d = p_opaque(x - 1.4616321) - 1.243815e-08;
    return -0.12148629 + (d * d * p_lgamma_tc(4.0 * x - 6.0) + 7.5347995e-10);
  }
  if (x < 1.25) {
    let t = x - 1.0;
    return t * p_lgamma_h(t - 0.5) - p_log1p_fine(t);
  }
  var y = x;
  var acc = 1.0;
  for (var k = 0; k < 5; k++) { if (y >= 3.5) { y = y - 1.0; acc = acc * y; } }
  let t = y - 2.0;
  return t * p_lgamma_h(t - 0.5) + p_logf(acc);
}""",
    # lgamma(1 + a), a in [0, 1), without rounding 1 + a first: below 1/4 p_lgamma_pos's form
    # for [0.5, 1.25) with t = a itself. (The incomplete gamma's Q = -expm1(a log x -
    # lgamma(1 + a)) cancels to Q ~ 5e-4 at a = 1.2e-3, x = 0.64, where 1 + a's rounding, 5e-5
    # of a, put Q 5e-5 relative off.)
    "p_lgamma1p": """fn p_lgamma1p(a: f32) -> f32 {
  if (a < 0.25) { return a * p_lgamma_h(a - 0.5) - p_log1p_fine(a); }
  return p_lgamma_pos(1.0 + a);
}""",
    # log1p(y), y > -1, to 0.8 ulp (p_log1p's atanh series is 2.4): log(u) by p_logf, u = 1 + y,
    # plus the rounding of 1 + y, exact for u < 2^24 (u - 1 is exact, and so is y - (u - 1))
    "p_log1p_fine": """fn p_log1p_fine(y: f32) -> f32 {
  let u = p_opaque(1.0 + y);
  return p_logf(u) + (y - p_opaque(u - 1.0)) / u;
}""",
    # lgamma's negative roots r (|Gamma(r)| = 1) in (-k, -k + 1), k = 4..19, two an interval:
    # row 2(k - 4) is the one nearer -k + 1, row 2(k - 4) + 1 the one nearer -k, as (f32 hi,
    # f32 lo, f32 cot(pi r), f32 1/sin(pi r)); mpmath: scripts/lgamma_tables.py prints the rows
    "p_lgamma_root": _select_table("p_lgamma_root", "vec4<f32>", _LGAMMA_ROOTS),
    # lgamma. x < 0.5 by the reflection log|Gamma(x)| = log(pi/|sin(pi x)|) - lgamma(1 - x),
    # whose two O(1) terms cancel next to lgamma's negative roots (two in each (-k, -k + 1),
    # k >= 3; for large k they crowd against the integers): that plain form was 1.6e7 ulp
    # relative off at the roots' f32 neighbours, 1.6e5 within their distance to the poles, 250
    # on uniform (-70, 0.5) (torch's float32: 9.6e4, 166, 2.3). Now:
    # - (-3, -2), the interval whose terms cancel most (up to 2.4x even about its roots):
    #   |Gamma(x)| - 1 = (x - r1)(x - r2)·M(x)/(p q), p = -2 - x, q = x + 3, with M analytic on
    #   (-4, -1) (a 12-term Chebyshev fit, `_cheb` below); lgamma = log1p of that, the root
    #   factors as exact f32 products (p_two_prod) with the roots' lo parts added.
    # - (-19, -3): the reflection written about the nearer root r = hi + lo (p_lgamma_root;
    #   split at -k + 0.36, near |Gamma|'s minimum), lgamma(x) = lgamma(x) - lgamma(r):
    #     -log(sin(pi x)/sin(pi r)) - (lgamma(1 - x) - lgamma(1 - r)),
    #   d = x - r (x - hi exact, then - lo). The ratio is 1 + y, y = cot(pi r)·sinpi(d) -
    #   2 sinpi(d/2)^2, by log1p while y >= -0.5, else |sin(pi x)|·(1/sin(pi r)) itself; the
    #   lgamma difference at A = 1 - x, B = 1 - r >= 4 by Stirling's series differenced term by
    #   term: (A - B)(log A - 1) + (B - 1/2)·log1p((A - B)/B) plus the series' divided
    #   difference (Horner's scheme run on both points), every term proportional to d.
    # - elsewhere ((-3, 0.5) less the above, and below -19, where every f32 x is more than an
    #   f32 spacing from the root next to its integer) the plain reflection, log(pi) as hi + lo
    #   and 1 - x's rounding put back through psi(1 - x) ~ log z - 1/(2z) - 1/(12z^2).
    # Measured (lavapipe, against mpmath, scripts/lgamma_check.py): at most 2.5 ulp at the 81 f32
    # neighbours of each root in (-30, -2), 3.0 within each root's distance to its pole, 2.1
    # next to the poles -1..-70, 2.7 on uniform (-70, 0.5) (torch's float32 0.5 away from the
    # roots). The cost: lgamma on 2M points went 0.093 s -> 0.19 s on lavapipe, whose masked
    # SIMD runs the x < 0.5 branches for x > 0 too (p_lgamma_pos alone is unchanged, 0.08 s).
    "p_lgamma": """fn p_lgamma(x: f32) -> f32 {
  if (p_isnan(x)) { return x; }
  if (p_isinf(x)) { return p_inf(); }
  // |x| < 2^-24: -log|x| (the next term, -gamma·x, is below its rounding); from the bits, so a
  // subnormal is not flushed to the pole at 0 (lgamma(1e-40) = 92.1) and pi·x cannot underflow:
  // a subnormal's log is log(its bits as an integer) - 149·ln 2, no subnormal arithmetic (GPUs
  // that flush them, as the H100 through both implementations, gave inf)
  let ax = bitcast<u32>(x) & 0x7fffffffu;
  if (ax != 0u && ax < 0x00800000u) { return 103.278929903 - p_logf(f32(ax)); }
  if (ax != 0u && ax < 0x33800000u) { return -p_logf(abs(x)); }
  var z = x;        // the argument of p_lgamma_pos: x, or 1 - x for the plain reflection
  var refl = vec2<f32>(0.0, 0.0);  // the plain reflection's log(pi / |sin(pi x)|), hi + lo
  if (x < 0.5) {
    let fl = floor(x);
    if (x == fl) { return p_inf(); }
    if (fl == -3.0) {
      let e1 = x + 2.4570248;
      let e2 = x + 2.7476826;
      let g = p_two_prod(e1, e2);
      let gg = g.x + (((g.y - 7.447756e-08 * e2) + 7.531628e-08 * e1) - 5.6093728e-15);
      return p_log1p_fine(gg * p_lgamma_m3(2.0 * x + 5.0) / ((-2.0 - x) * (x + 3.0)));
    }
    let sx = p_sinpi(x);
    if (fl <= -4.0 && fl >= -19.0) {
      let r = p_lgamma_root(2 * (i32(-fl) - 4) + select(0, 1, x - fl < 0.36));
      let d = p_opaque(x - r.x) - r.y;
      let h = p_sincospi_red(0.5 * d);
      let y = 2.0 * h.x * (r.z * h.y - h.x);
      // -log of the ratio: log1p's compensated form near the root, the ratio itself further out
      let u = p_opaque(1.0 + y);
      let far = y < -0.5;
      let ue = select(y - p_opaque(u - 1.0), 0.0, far);
      let t1 = -(p_logf(select(u, abs(sx * r.w), far)) + ue / u);
      let a = 1.0 - x;
      let b = 1.0 - r.x;
      let wa = 1.0 / a;
      let wb = 1.0 / b;
      let ua = wa * wa;
      let ub = wb * wb;
      var gb = 0.000841750842;
      var q = 0.0;
      q = gb + ua * q; gb = -0.000595238095 + ub * gb;
      q = gb + ua * q; gb = 0.000793650794 + ub * gb;
      q = gb + ua * q; gb = -0.00277777778 + ub * gb;
      q = gb + ua * q; gb = 0.0833333333 + ub * gb;
      let fd = -wa * wb * ((gb + (ua - ub) * q) + wb * (wa + wb) * q);
      return t1 - ((b - 0.5) * p_log1p_fine(-d / b) - d * (p_logf(a) - 1.0 + fd));
    }
    z = p_opaque(1.0 - x);
    let ze = (1.0 - z) - x;
    refl = p_two_sum(1.1447299, -p_logf(abs(sx)));
    refl.y = (refl.y + 3.317301e-08) - ze * (log(z) - 0.5 / z - 0.0833333333 / (z * z));
  }
  let lp = p_lgamma_pos(z);
  return select(lp, (refl.x - lp) + refl.y, x < 0.5);
}""",
    # digamma on [1, 2]: (x - r)·h(x - 1.5) + psi(r), r = f32(1.4616321449683623) next to its
    # root (x - r exact), psi(r) = -1.2036e-8, h a degree-10 least-squares fit of
    # (psi(x) - psi(r))/(x - r) in float64 at Chebyshev nodes (the root as hi + lo instead lost
    # its lo: (x - hi) - lo reassociated on lavapipe); 2.5 ulp relative in f32 evaluation
    # away from the root. The recurrence below cancels to ~2.4e-7 absolute near
    # the root (psi(1.5) 0.03648968 for 0.03648997, 8e-6 relative; torch 0.03648992;
    # tests/test_fuzz_nn.py test_unary at PYRITE_FUZZ_SEED=101)
    # digamma's root r_k in (-k, -k + 1), k = i + 1 <= 64, as (f32 hi, f32 lo,
    # f32(pi / sin(pi r_k))); mpmath, 40 digits: scripts/digamma_roots.py prints the rows
    "p_digamma_root": _select_table("p_digamma_root", "vec3<f32>", _DIGAMMA_ROOTS),
    # digamma. PyTorch's specials: psi(0) = -inf, psi(-0) = inf, negative integers and -inf give
    # nan. x > 0: the fit above on [1, 2]; elsewhere the recurrence psi(x) = psi(x + 1) - 1/x up
    # to x >= 10 (at most 10 steps), then the asymptotic series (next term < 2^-32 at 10).
    # x < 0 by reflection, psi(x) = psi(1 - x) - pi·cot(pi x), whose two terms cancel near each
    # of psi's negative roots r_k (one in each (-k, -k + 1)): that plain form was 1e6-3e7 ulp
    # relative off at the f32 neighbours of the first roots (torch's f32 as much). So on
    # (-64, 0) the reflection is written about the interval's root, psi(x) = psi(x) - psi(r_k):
    #   psi(x) = pi·sinpi(d) / (sinpi(x)·sinpi(r_k)) - d·(psi(1 - x) - psi(1 - r_k))/(r_k - x),
    # d = x - r_k (x - hi exact near the root by Sterbenz, then - lo), the cot difference by
    # cot(u) - cot(v) = sin(v - u)/(sin u sin v), the psi difference divided out term by term
    # (below). No term cancels: the second is at most 0.17 of the first (psi'(1 - x) <= psi'(1)
    # = 1.64 against pi^2/sin^2 >= 9.87), so the result is as relative-accurate as its factors.
    # Measured (lavapipe, against mpmath): 2.3 ulp at the 81 f32 nearest each of the first six
    # roots (torch's f32 5.4e7), 3.5 ulp on 20000 uniform points of (-64, 0) (torch 1.6e4).
    # Below -64 the plain reflection, as torch, whose error near a root grows with k (10 ulp
    # where |psi| > 1 on (-1000, -64), torch 8: the terms' own rounding, ~5 times the result).
    # The table's cost: a select tree (63 vec3 selects) beat a switch (lavapipe scalarises it
    # per lane) and a private array (40x slower); digamma on 2M points went 0.020 s -> 0.044 s
    # on lavapipe for x > 0, whose masked SIMD runs the x < 0 branch regardless.
    # The divided difference (psi(a) - psi(b))/(a - b), a = 1 - x, b = 1 - r_k, a - b = -d
    # (given exactly; a and b themselves may be rounded): the recurrence's sum 1/((a+j)(b+j)),
    # then at A, B >= 10 the asymptotic series' differences: log(A/B)/(A - B) = log1p(t)/t / B
    # (t = (A - B)/B, |t| <= 0.1, as log1p's 2s·p(s^2), s = t/(2 + t)), 1/(2AB),
    # (A + B)/(12 A^2 B^2), and psi' 's remaining terms at the midpoint M. One loop serves both
    # forms (a lane's branches all run under lavapipe's SIMD masks: a second loop cost 3x).
    "p_digamma": """fn p_digamma(x: f32) -> f32 {
  if (p_isnan(x)) { return x; }
  if (x == 0.0) { return select(-p_inf(), p_inf(), (bitcast<u32>(x) >> 31u) == 1u); }
  if (p_isinf(x)) { return select(p_nan(), x, x > 0.0); }
  var a = x;          // the argument of psi at which the series are summed
  var b = x;          // the divided difference's second argument (1 - r_k), else a copy of a
  var d = 0.0;        // x - r_k
  var refl = 0.0;     // the reflection's term
  var at_root = false;
  if (x < 0.0) {
    let fl = floor(x);
    if (x == fl) { return p_nan(); }
    let sx = p_sincospi(x);
    a = 1.0 - x;
    b = a;
    if (fl < -64.0) {
      refl = -3.14159265 * sx.y / sx.x;
    } else {
      let r = p_digamma_root(i32(-fl) - 1);
      d = p_opaque(x - r.x) - r.y;
      refl = p_sincospi_red(d).x * r.z / sx.x;
      b = 1.0 - r.x;
      at_root = true;
    }
  } else if (x >= 1.0 && x <= 2.0) {
    let u = x - 1.5;
    var h = 0.0112328762;
    h = h * u - 0.016387783; h = h * u + 0.0169091672; h = h * u - 0.0257789437;
    h = h * u + 0.0408948809; h = h * u - 0.0620574616; h = h * u + 0.0949807018;
    h = h * u - 0.148398757; h = h * u + 0.240542665; h = h * u - 0.423627496;
    h = h * u + 0.951055884;
    return (x - 1.46163213) * h - 1.20360523e-8;
  }
  var acc = 0.0;
  var g = 0.0;
  for (var k = 0; k < 10; k++) {
    if (min(a, b) < 10.0) { let ia = 1.0 / a; acc = acc - ia; g = g + ia / b; a = a + 1.0; b = b + 1.0; }
  }
  if (at_root) {
    let t = -d / b;
    let s = t / (2.0 + t);
    let z = s * s;
    let l = 2.0 * (1.0 + z * (0.333333333 + z * (0.2 + z * (0.142857143 + z * 0.111111111)))) / (2.0 + t);
    let ab = a * b;
    let m2 = 4.0 / ((a + b) * (a + b));
    let m5 = m2 * m2 * 2.0 / (a + b);
    g = g + l / b + 0.5 / ab + (a + b) / (12.0 * ab * ab) - m5 * (0.0333333333 - 0.0238095238 * m2);
    return refl - d * g;
  }
  let z = 1.0 / (a * a);
  return refl + acc + p_logf(a) - 0.5 / a - z * (0.0833333333 - z * (0.00833333333 - z * (0.00396825397 - z * 0.00416666667)));
}""",
    # trigamma psi'(x) (digamma's derivative): the recurrence psi'(x) = psi'(x + 1) + 1/x^2 up
    # to x >= 10, then the asymptotic 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7) - 1/(30x^9);
    # below 0 the reflection psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x). inf at the poles (0 and
    # the negative integers), as PyTorch's polygamma(1, x).
    "p_trigamma": """fn p_trigamma(x0: f32) -> f32 {
  if (p_isnan(x0)) { return x0; }
  // (-inf before the poles: floor(-inf) == -inf made it a pole, inf; torch's trigamma is NaN)
  if (p_isinf(x0)) { return select(p_nan(), 0.0, x0 > 0.0); }
  if (x0 <= 0.0 && x0 == floor(x0)) { return p_inf(); }
  var x = x0;
  var sgn = 1.0;
  var acc = 0.0;
  if (x < 0.0) {
    let sc = p_sincospi(x);
    acc = 9.8696044 / (sc.x * sc.x);
    sgn = -1.0;
    x = 1.0 - x;
  }
  var t = 0.0;
  for (var k = 0; k < 10; k++) { if (x < 10.0) { t = t + 1.0 / (x * x); x = x + 1.0; } }
  let z = 1.0 / (x * x);
  t = t + 1.0 / x + 0.5 * z + z / x * (0.166666667 - z * (0.0333333333 - z * (0.0238095238 - z * 0.0333333333)));
  return acc + sgn * t;
}""",
    # log(ndtr(x)): log1p of the upper tail for x > 0; log(erfc/2) down to -12 (erfc(8.5) is
    # still normal); below, the asymptotic log(phi(x)/|x|) + log(1 - 1/x^2 + 3/x^4 - 15/x^6),
    # whose next term is < 2^-22 of 1 at x = -12.
    "p_log_ndtr": """fn p_log_ndtr(x: f32) -> f32 {
  if (p_isnan(x)) { return x; }
  if (x > 0.0) { return p_log1p(-0.5 * p_erfc(x * 0.707106781)); }
  if (x > -12.0) { return log(0.5 * p_erfc(-x * 0.707106781)); }
  let z = 1.0 / (x * x);
  return -0.5 * x * x - log(-x) - 0.918938533 + p_log1p(-z * (1.0 - z * (3.0 - z * 15.0)));
}""",
    # nextafter by bits; the direction from an order-preserving integer key, since comparing
    # subnormals as floats may flush them to zero
    "p_nextafter": """fn p_nextafter(a: f32, b: f32) -> f32 {
  if (p_isnan(a) || p_isnan(b)) { return p_nan(); }
  let ua = bitcast<u32>(a);
  let ub = bitcast<u32>(b);
  if (ua == ub || ((ua | ub) & 0x7fffffffu) == 0u) { return b; }
  if ((ua & 0x7fffffffu) == 0u) { return bitcast<f32>((ub & 0x80000000u) | 1u); }
  let ia = bitcast<i32>(ua);
  let ib = bitcast<i32>(ub);
  let ka = select(ia, ia ^ 0x7fffffff, ia < 0);
  let kb = select(ib, ib ^ 0x7fffffff, ib < 0);
  let away = (ka < kb) == (ia >= 0);
  return bitcast<f32>(select(ua - 1u, ua + 1u, away));
}""",
    # x · 2^n exactly (up to overflow / underflow of the result), as three power-of-two factors
    # built from bits, each within the normal range
    "p_ldexpf": """fn p_ldexpf(x: f32, n0: i32) -> f32 {
  let n = clamp(n0, -378, 378);
  let k = n / 3;
  let r = n - 2 * k;
  let f = bitcast<f32>(u32(k + 127) << 23u);
  return x * f * f * bitcast<f32>(u32(r + 127) << 23u);
}""",
    # frexp: x = m · 2^e with |m| in [0.5, 1); zero, inf and nan give (x, 0)
    "p_frexp_e": """fn p_frexp_e(x: f32) -> i32 {
  let b = bitcast<u32>(x) & 0x7fffffffu;
  if (b == 0u || b >= 0x7f800000u) { return 0; }
  let e = i32(b >> 23u);
  if (e == 0) { return -125 - (i32(countLeadingZeros(b)) - 8); }
  return e - 126;
}""",
    "p_frexp_m": """fn p_frexp_m(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  let b = u & 0x7fffffffu;
  if (b == 0u || b >= 0x7f800000u) { return x; }
  var frac = b & 0x7fffffu;
  if ((b >> 23u) == 0u) { frac = (b << u32(i32(countLeadingZeros(b)) - 8)) & 0x7fffffu; }
  return bitcast<f32>((u & 0x80000000u) | (126u << 23u) | frac);
}""",
}


def _cheb(name: str, coeffs) -> str:
    """WGSL `fn name(t: f32) -> f32` = sum_k c_k T_k(t) on [-1, 1], Clenshaw's recurrence
    unrolled (stable where the monomial form of a degree-19 fit would not be)."""
    lines = [
        f"fn {name}(t: f32) -> f32 {{",
        "  let t2 = 2.0 * t;",
        "  var b1 = 0.0;",
        "  var b2 = 0.0;",
    ]
    for c in reversed(coeffs[1:]):
        lines.append(f"  {{ let b0 = {c:.9e} + t2 * b1 - b2; b2 = b1; b1 = b0; }}")
    lines.append(f"  return {coeffs[0]:.9e} + t * b1 - b2;")
    return "\n".join(lines) + "\n}"


def _series(name: str, ratio, n: int) -> str:
    """WGSL `fn name(z: f32) -> f32` = 1 + z·r(1)·(1 + z·r(2)·(1 + ...)), n terms: a power series
    whose term ratio is z·r(k), nested so every step adds positive terms (no cancellation)."""
    lines = [f"fn {name}(z: f32) -> f32 {{", "  var p = 1.0;"]
    for k in range(n, 0, -1):
        lines.append(f"  p = 1.0 + z * {ratio(k):.9e} * p;")
    lines.append("  return p;")
    return "\n".join(lines) + "\n}"


# Bessel I0, I1: the power series in z = x²/4 for |x| <= 4 (18 terms: the next is < 2^-40 of
# the sum), Chebyshev fits of i0e, i1e on [4, 8] and of sqrt(x)·i0e(x), sqrt(x)·i1e(x) in
# t = 16/x - 1 beyond. Measured on lavapipe against torch float64 (tests/test_special.py): <= 4
# ULP for i0, i0e, i1, i1e (z's rounding alone is x/2 ULP of sensitivity at x = 4; one
# Chebyshev fit over [0, 8] had been 19 ULP for i1).
# The fits: mpmath (30 digits) interpolated at 200 Chebyshev nodes, truncated where
# |c_k| < 3e-10·max|c| (the truncated series' relative error < 6e-10); h(s) = lgamma(2 + t)/t
# with t = s + 1/2 in [-1/2, 3/2] the same way.
_I0E_MID = (1.708286183e-01, -3.110541540e-02, 4.276522520e-03, -6.606521864e-04, 1.084313064e-04, -1.843856491e-05, 3.184579631e-06, -5.481154487e-07, 9.242241680e-08, -1.506250489e-08, 2.350265312e-09, -3.490419375e-10)  # fmt: skip
_I1E_MID = (1.542368478e-01, -2.209877417e-02, 2.198396839e-03, -2.070559989e-04, 1.226218488e-05, 1.432396873e-06, -7.917174042e-07, 2.153685452e-07, -4.706647748e-08, 9.042154416e-09, -1.576084995e-09, 2.529641459e-10)  # fmt: skip
_I0E_LARGE = (4.022452055e-01, 3.369116478e-03, 6.889758347e-05, 2.891370521e-06, 2.048918589e-07, 2.266668991e-08, 3.396232028e-09, 4.940602446e-10)  # fmt: skip
_I1E_LARGE = (3.892881175e-01, -9.761097491e-03, -1.105889388e-04, -3.882564809e-06, -2.512236238e-07, -2.631468847e-08, -3.835380388e-09, -5.589743482e-10)  # fmt: skip
_LGAMMA_H = (5.456921123e-01, 2.764062434e-01, -2.411678760e-02, 3.059740738e-03, -4.554446417e-04, 7.397945223e-05, -1.268262264e-05, 2.253800857e-06, -4.107683225e-07, 7.626396961e-08, -1.435929880e-08, 2.733335286e-09, -5.248566867e-10)  # fmt: skip
# lgamma's fits (scripts/lgamma_tables.py, cut at 1e-9·max|c|): M on (-3, -2) in s = 2x + 5 and
# Q on [1.25, 1.75] in s = 4x - 6 (p_lgamma, p_lgamma_pos)
_LGAMMA_M3 = (1.311262517e+00, 1.186054566e-01, 2.764572751e-02, 4.593704032e-03, 9.406800614e-04, 1.485870123e-04, 2.911422398e-05, 4.517382788e-06, 8.719299146e-07, 1.344595727e-07, 2.581991958e-08, 3.973257096e-09)  # fmt: skip
_LGAMMA_TC = (4.801972093e-01, -3.605161365e-02, 1.938464836e-03, -1.206885488e-04, 8.115171096e-06, -5.713868212e-07, 4.145872731e-08, -3.071774287e-09)  # fmt: skip

HELPERS.update(
    {
        "p_i0_series": _series("p_i0_series", lambda k: 1.0 / (k * k), 18),
        "p_i1_series": _series("p_i1_series", lambda k: 1.0 / (k * (k + 1)), 18),
        "p_i0e_mid": _cheb("p_i0e_mid", _I0E_MID),
        "p_i1e_mid": _cheb("p_i1e_mid", _I1E_MID),
        "p_i0e_large": _cheb("p_i0e_large", _I0E_LARGE),
        "p_i1e_large": _cheb("p_i1e_large", _I1E_LARGE),
        "p_lgamma_h": _cheb("p_lgamma_h", _LGAMMA_H),
        "p_lgamma_m3": _cheb("p_lgamma_m3", _LGAMMA_M3),
        "p_lgamma_tc": _cheb("p_lgamma_tc", _LGAMMA_TC),
        # exp(-|x|)·I0(x) and exp(-|x|)·I1(x) (i1e is odd); I0, I1 unscaled up to |x| = 4,
        # where the series needs no exp
        "p_i0e": """fn p_i0e(x: f32) -> f32 {
  let a = abs(x);
  if (a <= 4.0) { return p_i0_series(0.25 * a * a) * p_expf(-a); }
  if (a <= 8.0) { return p_i0e_mid(0.5 * a - 3.0); }
  return p_divf(p_i0e_large(16.0 / a - 1.0), sqrt(a));
}""",
        "p_i0": """fn p_i0(x: f32) -> f32 {
  let a = abs(x);
  if (a <= 4.0) { return p_i0_series(0.25 * a * a); }
  if (a <= 80.0) { return p_i0e(a) * p_expf(a); }
  let h = p_expf(0.5 * a);  // e^a in two halves: i0(88.8) = 1.6e37 is finite, e^88.8 is not
  return p_opaque(p_i0e(a) * h) * h;
}""",
        "p_i1e": """fn p_i1e(x: f32) -> f32 {
  let a = abs(x);
  var r: f32;
  if (a <= 4.0) { r = 0.5 * a * p_i1_series(0.25 * a * a) * p_expf(-a); }
  else if (a <= 8.0) { r = p_i1e_mid(0.5 * a - 3.0); }
  else { r = p_divf(p_i1e_large(16.0 / a - 1.0), sqrt(a)); }
  return select(r, -r, x < 0.0);  // torch's i1(-0) is +0
}""",
        "p_i1": """fn p_i1(x: f32) -> f32 {
  let a = abs(x);
  var r: f32;
  if (a <= 4.0) { r = 0.5 * a * p_i1_series(0.25 * a * a); }
  else if (a <= 80.0) { r = p_i1e(a) * p_expf(a); }
  else { let h = p_expf(0.5 * a); r = p_opaque(p_i1e(a) * h) * h; }
  return select(r, -r, x < 0.0);  // torch's i1(-0) is +0
}""",
    }
)

# the special functions of ops/special_more.py (Bessel J/Y/K, Airy, incomplete gamma, the
# orthogonal polynomials) keep their helpers in kernels/special_more.py
from .special_more import HELPERS as _SPECIAL_MORE  # noqa: E402

HELPERS.update(_SPECIAL_MORE)
