"""More WGSL math helpers (exact fmod, floor division and remainder as PyTorch computes them,
erfinv, lgamma, digamma, Bessel I0/I1, ...), merged into kernels/common.py `HELPERS`, so an
expression that names `p_<name>(` gets the function text (and its dependencies) as usual.

Each helper's accuracy is measured against float64 references and written beside it, with the
device and the test that repeats the measurement.
"""

from __future__ import annotations

HELPERS = {
    # fmod(x, y) exactly, as C's fmod (PyTorch's CPU): WGSL's `%` on f32 is x - y*trunc(x/y),
    # which is off once x/y rounds (fmod(1, 0.1) came out 0, not 0.09999999). Both values as
    # integers m * 2^(e-150) (e >= 1, subnormals included), the remainder by integer % on the
    # 24-bit mantissas, 8 exponent bits a step: at most ceil(253/8) = 32 loop iterations an
    # element (x/y = 2^253 at worst), then the bits of r * 2^(ey-150) built directly (no ldexp,
    # which may flush subnormal factors).
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
  var d = (a - m) / b;
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
}
