"""Reductions and scans: one generator for every reduction (sum .. norm), one for cumsum/cumprod.

The op (pyrite/ops/reduce.py) permutes the reduced dims to the end as a view, coalesces the kept
("outer") dims and the reduced ("inner") dims separately, and asks for a kernel of those two
ranks. Sizes and strides come from the info words, so one pipeline serves every shape of a rank.

Each reduction is a small state machine written once in WGSL:
  struct S           the running state (a sum; (value, index); Welford's (n, mean, M2); ...)
  s_init()           the identity
  s_step(s, x, j)    fold in element x, the j-th of its row in row-major order of the reduced dims
  s_merge(a, b)      combine two partial states (order-free: argmax ties compare indices)
  finals             WGSL expressions in `s`, `L` (row length, f32) and `p` (the op's scalar)

Two kernel shapes (`mode`):
  "serial"  one invocation per output element loops over its row: no barriers; neighbouring
            invocations read neighbouring outputs' elements, so a reduction over a leading dim
            reads memory contiguously across the workgroup.
  "row"     one 256-wide workgroup per output element: invocation t folds j = t, t+256, ...;
            then 16 invocations merge 16 partials each and invocation 0 merges those 16 (two
            barriers instead of a log2(256) = 8-step tree: barriers are costly on lavapipe).
Workgroups fold over (x, y, z) above 65,535 (kernels/common.fold_grid).

Split reductions (few outputs, long rows: one workgroup per output would leave the GPU idle) run
the same state machine in two dispatches (`stage`):
  "partial" unit u = o·P + c (a workgroup in "row" mode, an invocation in "serial" mode) folds
            chunk c = [c·C, min((c+1)·C, L)) of output o's row, stepping with the element's
            index j in the whole row (so argmax keeps global indices), and stores its state to
            `part: array<S>` at u (S's fields are all 4-byte, so the scratch is i32 words).
  "merge"   each output folds its P states part[o·P ..] with s_merge and writes the finals. The
            merges are exact where the op is (max, any, argmax: ties and NaNs pick the lower
            global index, whatever the merge order), and Chan's formula for Welford's triples.

One-pass split ("fused", GPUs; ops/reduce.FUSED): the "partial" units in one dispatch, each
  workgroup storing its state's words to a persistent scratch `part: array<atomic<u32>>` (NaNs
  canonical, so no state word is ever FUSED_EMPTY) and counting itself in its output's counter;
  the workgroup that counts last for an output merges that output's P states (one an invocation,
  each word waited for until it reads other than FUSED_EMPTY, then set back to it) and writes the
  finals, and sets the counter back to 0. No workgroup waits for one that has not counted (the
  last waits only for stores already issued), so no assumption about workgroups running at once;
  the wait covers the relaxed atomics' ordering (a state's words may land after its count).
  Only for states of f32 fields (FUSED_EMPTY is a NaN pattern no canonical f32 has).

Info words (i32), reductions:
  [0] outputs  [1] row length L  [2] input offset  [3] p (f32 bits)
  [4 ..] outer shape[Ro], outer strides[Ro], inner shape[Ri], inner strides[Ri]
  then, "partial" only: chunk length C, chunks P ("fused": then the counters' first word in
  `part`).   "merge": [0] outputs [1] L [2] P [3] p
Scans (cumsum/cumprod) run along one dim:
  [0] rows  [1] L  [2] input offset  [3] input stride along dim  [4] output stride along dim
  [5 ..] outer shape[Ro], input outer strides[Ro], output outer strides[Ro]
"""

from __future__ import annotations

from functools import lru_cache

from .common import (
    SG_ENABLE,
    WG,
    KernelSource,
    header,
    helpers_for,
    load,
    sg_offsets,
    store,
    trusted,
)

# ---- the reductions as state machines ------------------------------------------------------
_NEG = {"f32": "-p_inf()", "i32": "i32(-2147483647 - 1)"}
_POS = {"f32": "p_inf()", "i32": "2147483647"}
_MAX = {"f32": "p_maxf", "i32": "max"}
_MIN = {"f32": "p_minf", "i32": "min"}


def _better(kind: str, t: str) -> str:
    """fn better(v, i, w, k): is (v at i) preferred over (w at k)? NaN first, then ties → lower i."""
    cmp = ">" if kind == "max" else "<"
    if t == "f32":
        return (
            f"fn better(v: f32, i: i32, w: f32, k: i32) -> bool {{\n"
            f"  let nv = p_isnan(v); let nw = p_isnan(w);\n"
            f"  if (nv || nw) {{ return nv && (!nw || i < k); }}\n"
            f"  return v {cmp} w || (v == w && i < k);\n}}\n"
        )
    return (
        f"fn better(v: i32, i: i32, w: i32, k: i32) -> bool {{\n"
        f"  return v {cmp} w || (v == w && i < k);\n}}\n"
    )


def _compensated_sum(op: str, x: str):
    """f32 sum / nansum / mean as Neumaier's compensated sum: (a, c) with the rounding error of
    each addition carried in c, and TwoSum when two partial states merge.

    A plain f32 loop over a long run drifts by up to n·2⁻²⁴ relative, systematically when the
    terms are alike: sum() of 16M copies of 0.1 was off by 8.1e-5 relative, of 100,000 by 5.4e-5
    (lavapipe, 2026-12-01); compensated, both are within a few ulps of the float64 sum, as torch's
    cascade sum and numpy's pairwise sum are. Reductions are bound by memory, not arithmetic: on
    lavapipe the 16M sum took 19.8 ms before and after. Once a is inf or NaN, c is meaningless
    (inf - inf) and the result is a alone. The rounded sum and the differences that recover its
    error pass through p_opaque (kernels/common.py): NVIDIA's compiler otherwise folds the error
    term to 0 (the H200's sum of 100,000 copies of 0.1 was 4 ULP off, 2026-12-01).
    """
    fns = (
        "fn s_init() -> S { return S(0.0, 0.0); }\n"
        "fn two_sum(s: S, x: f32) -> S {\n"
        "  let t = p_opaque(s.a + x);\n"
        "  let e = select(p_opaque(x - t) + s.a, p_opaque(s.a - t) + x, abs(s.a) >= abs(x));\n"
        "  return S(t, s.c + e);\n}\n"
        f"fn s_step(s: S, x: f32, j: i32) -> S {{ return two_sum(s, {x}); }}\n"
        "fn s_merge(a: S, b: S) -> S { let m = two_sum(a, b.a); return S(m.a, m.c + b.c); }\n"
        "fn s_total(s: S) -> f32 {\n"
        "  if (p_isnan(s.a) || p_isinf(s.a)) { return s.a; }\n  return s.a + s.c;\n}\n"
    )
    final = "select(p_cmean(s.a, s.c, L), p_nan(), L == 0.0)" if op == "mean" else "s_total(s)"
    return "a: f32, c: f32", "f32", fns, (final,)


# Welford's scaled units (_welford_spec): a spread of 2^40 switches to units of 2^-81
W_BIG = 2.0**40
W_SC = 2.0**-81
W_UN = 2.0**81


def _welford_spec(op: str):
    """var / std (n, m, q, k) and var_mean / std_mean (n, m, q, k, a, c): Welford's update and
    Chan et al.'s merge, plus for the _mean ops the compensated sum (a, c) of x that gives
    the returned mean.

    Welford's state is stable where E[x²] − E[x]² cancels. Its mean m is of x - k, k the first
    element (shifted data): with data far from 0 (x ~ 1e4, spread 0.5: raw inputs to a first
    BatchNorm) an unshifted running mean carries the rounding of 1e4's ulp into every deviation
    (mean ~5 ulp off, the variance ~1e-3 relative); x - k is exact there (Sterbenz). A merge
    moves b's mean to a's shift (b.k - a.k: the difference of two data values).

    The mean var_mean returns is not k + m: m's every update rounds at the data's scale, so
    where the data cancels that mean was off by ~1 ulp of the data, thousands of ulps of the
    mean. It is (a + c) / L, mean()'s compensated sum of x (_compensated_sum), merged in the
    same order, so var_mean's mean equals mean() bit for bit where the row is finite (an inf
    or NaN keeps Welford's k + m, torch's answer: s_mean). Measured (lavapipe, 2026-12, max
    ulps of the float64 mean over rows of 13 x 1031, 2 x 100,003, 64 x 37 and the serial, row,
    split, one-pass, wide and GPU-split paths; torch CPU var_mean, double sums: <= 0.5):
    normal data before 68 .. 35,755, now <= 0.8; data cancelling to 1e-3 of its spread 20 ..
    8,777, now <= 0.7; uniform(-1, 1) 14 .. 10,883, now <= 1.02; 1e4 + N(0, 0.5) (the shift's
    case) <= 0.5 before and after. The variance is unchanged. Cost: two words more a state (6;
    var and std keep their 4) and a TwoSum a step: var_mean of 1000 x 1000 along dim 1 on
    lavapipe (2 shared cores, min of 15) ~18 ms before, ~23 after (var's own ~18; noisy). H100
    (wgpu-native, 2026-12, µs a call back-to-back): the same errors (<= 1.29 ulp, mean()'s);
    BatchNorm's var_mean of (256, 64, 56, 56) over (0, 2, 3) 261.7 before and after (var
    211.5 / 216.7), of 16.7M f32s var_mean / var 1.30x before, 1.32x after.

    Spread past 2^40 (W_BIG): Σ(x - mean)² passes float32's range long before the variance
    does (1000 values ~1e19 apart: var ~1e38, M2 ~1e41 was inf; torch's double Welford is
    finite), and std of data ~1e38 apart overflowed with it. A state whose data spread that far
    (|x - k| >= 2^40 in a step, |b.k - a.k| or |d| >= 2^40 in a merge) holds m, k and q in
    units of 2^-81 (W_SC; q in 2^-162) and marks it by a negative n; the finals scale back
    (var by 2^81 twice, so it overflows only where it is past float32's range; std by 2^81
    after the root). Below 2^40 nothing changes: q < 2^30 rows·(6·2^40)² stays finite; above
    it, scaled values stay < 2^48, q < 2^30·2^98, and M2 >= (2^40)²/2 (two data 2^40 apart),
    so the terms that underflow in the scaled units (< 2^-126, 2^36 unscaled) are below 2^-40
    of it. Cost: one comparison a step and a merge (the scaled path runs only where the spread
    is that wide), no state word more, no kernel more. Lavapipe (2 shared cores, min of 15,
    two runs each, noisy): 1000 x 1000 var_mean along dim 1 28-29 ms before, 30-32 after; var
    along dim 1 21-22 / 18-21; var of all 1M 20-22 / 24-25.
    """
    with_mean = op.endswith("_mean")
    fields = "n: f32, m: f32, q: f32, k: f32" + (", a: f32, c: f32" if with_mean else "")
    ext = ", t.x, t.y" if with_mean else ""
    ext_s = ", s.a, s.c" if with_mean else ""
    fns = (
        f"const W_BIG: f32 = {W_BIG!r};\nconst W_SC: f32 = {W_SC!r};\nconst W_UN: f32 = {W_UN!r};\n"
        "fn s_init() -> S { return S(0.0, 0.0, 0.0, 0.0"
        + (", 0.0, 0.0" if with_mean else "")
        + "); }\n"
        # the state in units of W_SC (n negated: the mark); its mean's sum (a, c) as it was.
        # (2^-162 and 2^162 are no float32s: each scaling is two products, the first through
        # p_opaque, or lavapipe's compiler folds the two constants into one: q·0, var·inf)
        f"fn w_scaled(s: S) -> S {{ return S(-s.n, s.m * W_SC, p_opaque(s.q * W_SC) * W_SC, s.k * W_SC{ext_s}); }}\n"
    )
    if with_mean:
        fns += (
            # (a, c) + x by Neumaier's step (as _compensated_sum's two_sum)
            "fn c_add(a: f32, c: f32, x: f32) -> vec2<f32> {\n"
            "  let t = p_opaque(a + x);\n"
            "  let e = select(p_opaque(x - t) + a, p_opaque(a - t) + x, abs(a) >= abs(x));\n"
            "  return vec2<f32>(t, c + e);\n}\n"
            "fn c_total(a: f32, c: f32) -> f32 {\n"
            "  if (p_isnan(a) || p_isinf(a)) { return a; }\n  return a + c;\n}\n"
            # an inf or NaN in the row (or a sum past float32's range): Welford's k + m, as
            # torch's own Welford (double sums) has it: NaN once an inf is followed by any
            # element, so [inf, 1] gives NaN where mean() gives inf
            "fn s_mean(s: S, n: f32) -> f32 {\n"
            "  let v = p_cmean(s.a, s.c, n);\n"
            "  if (p_isnan(v) || p_isinf(v)) { return (s.k + s.m) * select(1.0, W_UN, s.n < 0.0); }\n"
            "  return v;\n}\n"
        )
    fns += (
        # (the first element starts the state as PyTorch's Welford does: mean x, also for
        # an infinite x, where x - k would be NaN; its q is NaN then, as inf·(inf − inf))
        "fn s_step(s: S, x: f32, j: i32) -> S {\n"
        + ("  let t = c_add(s.a, s.c, x);\n" if with_mean else "")
        + "  if (s.n == 0.0) {\n"
        f"    return S(1.0, 0.0, select(0.0, p_nan(), p_isinf(x) || p_isnan(x)), x{ext});\n  }}\n"
        "  var u = s;\n  var y = x - s.k;\n"
        "  if (s.n < 0.0 || abs(y) >= W_BIG) {  // (a spread past 2^40: units of 2^-81)\n"
        "    if (s.n > 0.0) { u = w_scaled(s); }\n    y = x * W_SC - u.k;\n  }\n"
        "  let n = abs(u.n) + 1.0; let d = y - u.m; let m = u.m + d / n;\n"
        f"  return S(select(n, -n, u.n < 0.0), m, u.q + d * (y - m), u.k{ext});\n}}\n"
        "fn s_merge(a0: S, b0: S) -> S {\n"
        "  if (b0.n == 0.0) { return a0; }\n  if (a0.n == 0.0) { return b0; }\n"
        "  var a = a0; var b = b0;\n"
        "  let wide = abs(b.k - a.k) >= W_BIG || abs((b.m + (b.k - a.k)) - a.m) >= W_BIG;\n"
        "  let sc = a.n < 0.0 || b.n < 0.0 || wide;\n"
        "  if (sc && a.n > 0.0) { a = w_scaled(a); }\n  if (sc && b.n > 0.0) { b = w_scaled(b); }\n"
        "  let an = abs(a.n); let bn = abs(b.n);\n"
        # (b's compensation added after the step, in mean()'s order: the same sum bit for bit)
        + (
            "  let t0 = c_add(a.a, a.c, b.a);\n  let t = vec2<f32>(t0.x, t0.y + b.c);\n"
            if with_mean
            else ""
        )
        + "  let n = an + bn; let d = (b.m + (b.k - a.k)) - a.m;\n"
        "  return S(select(n, -n, sc), a.m + d * (bn / n), a.q + b.q + d * d * (an * bn / n), "
        f"a.k{ext});\n}}\n"
        # divisor max(0, n - correction), as PyTorch: 0/0 → NaN, q/0 → inf; in the state's units
        "fn s_var(s: S, c: f32) -> f32 {\n"
        "  let den = max(abs(s.n) - c, 0.0);\n"
        "  if (den == 0.0) { return select(p_inf(), p_nan(), s.q == 0.0 || p_isnan(s.q)); }\n"
        "  return s.q / den;\n}\n"
    )
    if op.startswith("std"):
        v = "sqrt(s_var(s, p)) * select(1.0, W_UN, s.n < 0.0)"
    else:
        v = "select(s_var(s, p), p_opaque(s_var(s, p) * W_UN) * W_UN, s.n < 0.0)"
    if not with_mean:
        return fields, "f32", fns, (v,)
    mean = "select(s_mean(s, L), p_nan(), L == 0.0)"  # (mean()'s final, L the row length)
    return fields, "f32", fns, (v, mean)


def _normp_spec():
    """(Σ|x|^p)^(1/p) for p not in {0, 1, 2, ±inf}, accurate and without overflow.

    State (e, a, c): e = log2 of the dominant |x| so far (the largest for p > 0, the smallest
    for p < 0; the high part of p_log2_dd's pair), a + c = Σ 2^(p·(log2|x| − e)) summed as
    Neumaier's (each term at most ~1, so no term overflows or underflows where the norm does
    not). An element that dominates moves the state to its scale: the sum so far times
    2^(p·(e_old − e_new)) (O(log n) times in a serial loop on random data), as a merge does to
    its lesser state. Each power is p_exp2_dd of p times a pair (hi, lo) of the log2
    difference (p_log2_dd: ~2^-30 relative), ~1 ulp; the result 2^(e + log2(a + c)/p), the
    exponent as a pair, also through p_exp2_dd.

    Before: |x|^p and the root as WGSL's exp2(p·log2|x|) (a few ulp on lavapipe and GPUs, and
    p·log2|x| rounded in f32), summed plainly. Measured (lavapipe, 2026-12, max ulps of the
    float64 norm over rows of 7, 13 x 1031, 2 x 100,003 and the serial, row, split, one-pass,
    wide and GPU-split paths; torch CPU 2.13's float32 in brackets): normal data p = 3 20.3 →
    1.08 (218), p = 0.5 53.9 → 1.68 (189), 1.5 12.8 → 1.00 (85), 4 14.1 → 0.85 (205), 7 11.3 →
    0.56 (106), -1 9.4 → 0.91 (60), -2.5 31.5 → 0.82 (108); the same data times 1e30: inf for
    p = 1.5, 3, 4, 7, -2.5 (|x|^p overflowed; torch's too) → <= 1.14; times 1e-30: 0 or
    subnormal garbage (1.6e7 ulp; torch's too) → <= 2.55. So pyrite's norm is finite where
    torch CPU's float32 overflows (vector_norm([1e30] * 3, 3): torch inf, pyrite 1.44e30;
    norm2, Σx² unscaled, still overflows as torch's). Errors of the terms grow by 1/|p| through
    the root: p = 0.01 was up to ~8 ulp (torch 45). H100 (wgpu-native and Dawn, 2026-12, same
    rows): <= 2.55 ulp as here. Cost: on lavapipe (2 shared cores, min of 15) the norm of 1M
    f32s 23 → ~45 ms (norm2: 24), arithmetic bound there; on the H100 (wgpu-native, µs a call,
    back-to-back) x.norm(3) of 16.7M f32s 266 before, 272 after (norm2 ~50-70: the old
    exp2/log2 was as costly), 4096 x 4096 along dim 1 276 / 280.
    Special values as torch's: a NaN anywhere gives NaN; an infinite term (|x| = inf with
    p > 0, x = 0 with p < 0) gives inf (p > 0) or 0 (p < 0); only zero terms (0^p, p > 0, or
    inf^p, p < 0; the empty row) give 0 (p > 0) or inf (p < 0). e = ±inf marks both: the
    initial state's p·e is −inf, an infinite term's +inf.
    """
    fns = (
        "fn s_init() -> S { return S(select(p_inf(), -p_inf(), p_sp > 0.0), 0.0, 0.0); }\n"
        # does log2 value u dominate e (p·u > p·e)?
        "fn n_over(u: f32, e: f32) -> bool { return select((u < e), (u > e), p_sp > 0.0); }\n"
        # a + b = s + err exactly (Knuth's TwoSum: any magnitudes, no branch)
        "fn n_two_sum(a: f32, b: f32) -> vec2<f32> {\n"
        "  let s = p_opaque(a + b);\n  let bb = p_opaque(s - a);\n"
        "  return vec2<f32>(s, (a - p_opaque(s - bb)) + (b - bb));\n}\n"
        # 2^(p·(u.x + u.y − v)), v finite: the difference as a renormalised pair (its high
        # part 0 only where the whole is: p_exp2_dd takes a high part of 0 for 2^0)
        "fn n_exp2_diff(u: vec2<f32>, v: f32) -> f32 {\n"
        "  let d = n_two_sum(u.x, -v);\n"
        "  return p_exp2_dd(p_sp, n_two_sum(d.x, d.y + u.y));\n}\n"
        # the state plus a term t, compensated (Neumaier)
        "fn n_add(s: S, t: f32) -> S {\n"
        "  let v = p_opaque(s.a + t);\n"
        "  let e = select(p_opaque(t - v) + s.a, p_opaque(s.a - v) + t, abs(s.a) >= abs(t));\n"
        "  return S(s.e, v, s.c + e);\n}\n"
        "fn s_step(s: S, x: f32, j: i32) -> S {\n"
        "  let b = bitcast<u32>(x) & 0x7fffffffu;  // (NaN, 0 and inf by bits, as lavapipe needs)\n"
        "  if (p_isnan(s.a)) { return s; }\n"
        "  if (b > 0x7f800000u) { return S(s.e, p_nan(), 0.0); }\n"
        "  if (b == 0u || b == 0x7f800000u) {  // log2|x| = ∓inf: a zero or an infinite term\n"
        "    let u = select(-p_inf(), p_inf(), b != 0u);\n"
        "    if (n_over(u, s.e)) { return S(u, 1.0, 0.0); }\n    return s;\n  }\n"
        "  let l = p_log2_dd(bitcast<f32>(b));\n"
        "  if (n_over(l.x, s.e)) {  // x sets the scale (from the empty state: f = 0)\n"
        "    var f = 0.0;\n"
        "    if (!p_isinf(s.e)) { f = n_exp2_diff(vec2<f32>(s.e, 0.0), l.x); }\n"
        "    return n_add(S(l.x, s.a * f, s.c * f), p_exp2_dd(p_sp, vec2<f32>(l.y, 0.0)));\n"
        "  }\n"
        "  if (p_isinf(s.e)) { return s; }  // an infinite term already\n"
        "  return n_add(s, n_exp2_diff(l, s.e));\n}\n"
        "fn s_merge(a: S, b: S) -> S {\n"
        "  if (p_isnan(a.a) || p_isnan(b.a)) { return S(a.e, p_nan(), 0.0); }\n"
        "  var hi = a;\n  var lo = b;\n"
        "  if (n_over(b.e, a.e)) { hi = b; lo = a; }\n"
        "  if (p_isinf(hi.e) || p_isinf(lo.e)) { return hi; }  // an infinite term, or lo empty\n"
        "  let f = n_exp2_diff(vec2<f32>(lo.e, 0.0), hi.e);\n"
        "  let m = n_add(hi, lo.a * f);\n"
        "  return S(m.e, m.a, m.c + lo.c * f);\n}\n"
        "fn n_final(s: S, p: f32) -> f32 {\n"
        "  if (p_isnan(s.a)) { return s.a; }\n"
        "  if (p_isinf(s.e)) {  // an infinite term (p·e = +inf), or none but zero terms\n"
        "    let hit = select((s.e < 0.0), (s.e > 0.0), p > 0.0);\n"
        "    return select(0.0, p_inf(), hit == (p > 0.0));\n  }\n"
        # Σ = t.x + t.y in [1, n]; log2 Σ as a pair, divided by p as a pair (q1 + q2: q1's
        # residual exact by p_two_prod), e added exactly
        "  let t = n_two_sum(s.a, s.c);\n"
        "  let l = p_log2_dd(t.x);\n"
        "  let q1 = l.x / p;\n"
        "  let r = p_two_prod(q1, p);\n"
        "  let q2 = (((l.x - r.x) - r.y) + (l.y + t.y / t.x * 1.44269504)) / p;\n"
        "  let h = n_two_sum(s.e, q1);\n"
        "  return p_exp2_dd(1.0, n_two_sum(h.x, h.y + q2));\n}\n"
    )
    return "e: f32, a: f32, c: f32", "f32", fns, ("n_final(s, p)",)


# the ops whose vec4 loop may add each vec4 plainly before one TwoSum (reduce_kernel `sum4`)
SUM4_OPS = ("sum", "mean")


def _spec(op: str, t: str):
    """(struct fields, x's compute type, WGSL functions, final expressions) of one reduction.

    `t` is the accumulator type (f32 or i32) where the op has one.
    """
    if op in ("isum", "iprod"):
        return _exact_int_spec(op)
    if op in ("sum", "nansum", "mean", "prod"):
        one = "1.0" if t == "f32" else "1"
        zero = "0.0" if t == "f32" else "0"
        ident, fold = (one, "*") if op == "prod" else (zero, "+")
        x = "select(x, 0.0, p_isnan(x))" if op == "nansum" and t == "f32" else "x"
        if t == "f32" and op != "prod":
            return _compensated_sum(op, x)
        fns = (
            f"fn s_init() -> S {{ return S({ident}); }}\n"
            f"fn s_step(s: S, x: {t}, j: i32) -> S {{ return S(s.a {fold} {x}); }}\n"
            f"fn s_merge(a: S, b: S) -> S {{ return S(a.a {fold} b.a); }}\n"
        )
        final = "select(s.a / L, p_nan(), L == 0.0)" if op == "mean" else "s.a"
        return f"a: {t}", t, fns, (final,)
    if op in ("amax", "amin"):
        ident = _NEG[t] if op == "amax" else _POS[t]
        f = _MAX[t] if op == "amax" else _MIN[t]
        fns = (
            f"fn s_init() -> S {{ return S({ident}); }}\n"
            f"fn s_step(s: S, x: {t}, j: i32) -> S {{ return S({f}(s.a, x)); }}\n"
            f"fn s_merge(a: S, b: S) -> S {{ return S({f}(a.a, b.a)); }}\n"
        )
        return f"a: {t}", t, fns, ("s.a",)
    if op in ("max_dim", "min_dim", "argmax", "argmin"):
        kind = "max" if op in ("max_dim", "argmax") else "min"
        ident = _NEG[t] if kind == "max" else _POS[t]
        fns = (
            _better(kind, t) + f"fn s_init() -> S {{ return S({ident}, 2147483647); }}\n"
            f"fn s_step(s: S, x: {t}, j: i32) -> S {{\n"
            f"  if (better(x, j, s.v, s.i)) {{ return S(x, j); }}\n  return s;\n}}\n"
            f"fn s_merge(a: S, b: S) -> S {{\n"
            f"  if (better(b.v, b.i, a.v, a.i)) {{ return b; }}\n  return a;\n}}\n"
        )
        finals = ("s.v", "s.i") if op.endswith("_dim") else ("s.i",)
        return f"v: {t}, i: i32", t, fns, finals
    if op == "aminmax":
        fns = (
            f"fn s_init() -> S {{ return S({_POS[t]}, {_NEG[t]}); }}\n"
            f"fn s_step(s: S, x: {t}, j: i32) -> S {{ return S({_MIN[t]}(s.lo, x), "
            f"{_MAX[t]}(s.hi, x)); }}\n"
            f"fn s_merge(a: S, b: S) -> S {{ return S({_MIN[t]}(a.lo, b.lo), "
            f"{_MAX[t]}(a.hi, b.hi)); }}\n"
        )
        return f"lo: {t}, hi: {t}", t, fns, ("s.lo", "s.hi")
    if op in ("var", "std", "var_mean", "std_mean"):
        return _welford_spec(op)
    if op == "logsumexp":
        # (running max m, Σ exp(x − m)); an infinite or NaN max needs no sum
        fns = (
            "fn s_init() -> S { return S(-p_inf(), 0.0); }\n"
            "fn s_merge(a: S, b: S) -> S {\n"
            "  let m = p_maxf(a.m, b.m);\n"
            "  if (p_isinf(m) || p_isnan(m)) { return S(m, a.s + b.s); }\n"
            "  return S(m, a.s * exp(a.m - m) + b.s * exp(b.m - m));\n}\n"
            "fn s_step(s: S, x: f32, j: i32) -> S { return s_merge(s, S(x, 1.0)); }\n"
        )
        return "m: f32, s: f32", "f32", fns, ("select(s.m + log(s.s), s.m, p_isinf(s.m))",)
    if op in ("all", "any"):
        ident, f = ("1u", "&") if op == "all" else ("0u", "|")
        fns = (
            f"fn s_init() -> S {{ return S({ident}); }}\n"
            f"fn s_step(s: S, x: bool, j: i32) -> S {{ return S(s.a {f} select(0u, 1u, x)); }}\n"
            f"fn s_merge(a: S, b: S) -> S {{ return S(a.a {f} b.a); }}\n"
        )
        return "a: u32", "bool", fns, ("s.a != 0u",)
    if op == "count_nonzero":
        fns = (
            "fn s_init() -> S { return S(0); }\n"
            "fn s_step(s: S, x: bool, j: i32) -> S { return S(s.a + select(0, 1, x)); }\n"
            "fn s_merge(a: S, b: S) -> S { return S(a.a + b.a); }\n"
        )
        return "a: i32", "bool", fns, ("s.a",)
    if op in ("norm2", "norm1"):  # (Σx² or Σ|x| compensated, as the sum: a plain Σx² of
        # 11,107 normal f32s in one invocation drifted 1e-6 relative, torch's 1e-7)
        fields, xt, fns, finals = _compensated_sum("sum", "x * x" if op == "norm2" else "abs(x)")
        return fields, xt, fns, ("sqrt(s_total(s))",) if op == "norm2" else finals
    if op == "normp":
        return _normp_spec()
    if op.startswith("norm"):
        # norminf / normninf: max / min |x|;  norm0: count ≠ 0
        ident, term, fold, final = {
            # (NaN counts, as torch's; lavapipe took `x != 0.0` as ordered here: NaN gave 0)
            "norm0": ("0.0", "select(0.0, 1.0, x != 0.0 || p_isnan(x))", "+", "s.a"),
            "norminf": ("0.0", "abs(x)", "max", "s.a"),
            "normninf": ("p_inf()", "abs(x)", "min", "s.a"),
        }[op]
        comb = {"+": "{a} + {b}", "max": "p_maxf({a}, {b})", "min": "p_minf({a}, {b})"}[fold]
        fns = (
            f"fn s_init() -> S {{ return S({ident}); }}\n"
            f"fn s_step(s: S, x: f32, j: i32) -> S {{ return S("
            f"{comb.format(a='s.a', b=term)}); }}\n"
            f"fn s_merge(a: S, b: S) -> S {{ return S({comb.format(a='a.a', b='b.a')}); }}\n"
        )
        return "a: f32", "f32", fns, (final,)
    raise ValueError(f"pyrite: unknown reduction {op!r}")


# ---- exact integer sum and product (ops/reduce.py `_exact_int_reduce`) -----------------------
def _exact_int_spec(op: str):
    """Integer sum / product that know whether their result fits int32: the value (int32 bits)
    and a `fits` flag, so the op can refuse a result PyTorch would give as int64 instead of
    wrapping it. isum accumulates in 64 bits (lo: u32, hi: i32 with carry; |sum| < 2^62 for any
    row a binding can hold). iprod keeps the magnitude (u32, at most 2^31 while valid), the sign,
    whether a zero was seen and a sticky overflow bit: with no zero factor |product| never
    shrinks, so once past 2^31 the result cannot fit; a zero anywhere makes it 0."""
    if op == "isum":
        fns = (
            "fn s_init() -> S { return S(0u, 0); }\n"
            "fn s_add(s: S, lo: u32, hi: i32) -> S {\n"
            "  let l = s.lo + lo;\n  return S(l, s.hi + hi + select(0, 1, l < lo));\n}\n"
            "fn s_step(s: S, x: i32, j: i32) -> S { return s_add(s, bitcast<u32>(x), x >> 31u); }\n"
            "fn s_merge(a: S, b: S) -> S { return s_add(a, b.lo, b.hi); }\n"
        )
        finals = ("bitcast<i32>(s.lo)", "s.hi == (bitcast<i32>(s.lo) >> 31u)")
        return "lo: u32, hi: i32", "i32", fns, finals
    fns = (
        "fn s_init() -> S { return S(1u, 0u, 0u, 0u); }\n"
        "fn s_mul(s: S, m: u32, n: u32, z: u32, o: u32) -> S {\n"
        "  let ov = select(0u, 1u, m != 0u && s.m > 0x80000000u / m);\n"
        "  return S(s.m * m, s.n ^ n, s.z | z, s.o | o | ov);\n}\n"
        "fn s_step(s: S, x: i32, j: i32) -> S {\n"
        "  if (x == 0) { return S(s.m, s.n, 1u, s.o); }\n"
        "  let ax = select(bitcast<u32>(x), 0u - bitcast<u32>(x), x < 0);\n"
        "  return s_mul(s, ax, select(0u, 1u, x < 0), 0u, 0u);\n}\n"
        "fn s_merge(a: S, b: S) -> S { return s_mul(a, b.m, b.n, b.z, b.o); }\n"
    )
    finals = (
        "select(select(bitcast<i32>(s.m), bitcast<i32>(0u - s.m), s.n == 1u), 0, s.z == 1u)",
        "s.z == 1u || (s.o == 0u && (s.m < 0x80000000u || (s.m == 0x80000000u && s.n == 1u)))",
    )
    return "m: u32, n: u32, z: u32, o: u32", "i32", fns, finals


# lavapipe (gallivm) ends a shader's loops after about 65,535 iterations in all (measured: a
# serial sum of 200,003 ones gave 65,535; splitting the loop into nested chunks gave 65,533, so the
# count is not per loop). The ops keep every invocation's loop count below that on CPU adapters
# (ops/reduce.py: serial rows <= 32,768; the row kernel gives each invocation L/256 iterations).


def _loop(var: str, start: str, end: str, step: int, body: str, indent: str = "  ") -> str:
    """for (var = start; var < end; var += step) { body }"""
    return (
        f"{indent}for (var {var} = {start}; {var} < {end}; {var} = {var} + {step}) {{\n"
        f"{body}{indent}}}\n"
    )


def _ilp_loop(ilp: int, start: str, stride: int, step) -> list[str]:
    """`s` from `ilp` independent states: state k takes the elements at j + k·stride for j from
    `start` in steps of ilp·stride (step(state, index expression) is one element's lines), the
    tail goes to state 0, and the states are merged pairwise into s (the caller's `var s`)."""
    lines = ["  " + " ".join(f"var s{k} = s_init();" for k in range(ilp)) + "\n"]
    lines.append(f"  var j = {start};\n")
    body = "".join(
        "    {\n" + step(f"s{k}", f"(j + {k * stride})") + "    }\n" for k in range(ilp)
    )  # (a block each: the steps' own `let`s)
    lines.append(
        f"  for (; j + {(ilp - 1) * stride} < j1; j = j + {ilp * stride}) {{\n{body}  }}\n"
    )
    lines.append(f"  for (; j < j1; j = j + {stride}) {{\n{step('s0', 'j')}  }}\n")
    states = [f"s{k}" for k in range(ilp)]
    while len(states) > 1:
        states = [f"s_merge({a}, {b})" for a, b in zip(states[::2], states[1::2])] + (
            [states[-1]] if len(states) % 2 else []
        )
    lines.append(f"  s = {states[0]};\n")
    return lines


# row mode: one workgroup per output; 16 partial mergers of 16 states each, then one of 16
_ROW_SPLIT = 16


def _offset(prefix: str, var: str, rank: int, shape_at: int, stride_at: int) -> list[str]:
    """Lines computing `{prefix}` = Σ coord_d · stride_d for flat index `var` over a rank-R box."""
    if rank == 0:
        return [f"  let {prefix} = 0;\n"]
    if rank == 1:
        return [f"  let {prefix} = {var} * info[{stride_at}];\n"]
    lines = [f"  var {prefix}_r = {var};\n"]
    terms = []
    for d in range(rank - 1, 0, -1):
        lines.append(
            f"  let {prefix}_c{d} = {prefix}_r % info[{shape_at + d}]; "
            f"{prefix}_r = {prefix}_r / info[{shape_at + d}];\n"
        )
        terms.append(f"{prefix}_c{d} * info[{stride_at + d}]")
    terms.append(f"{prefix}_r * info[{stride_at}]")
    lines.append(f"  let {prefix} = {' + '.join(terms)};\n")
    return lines


def state_words(op: str, acc: str) -> int:
    """i32 words of one partial state S of `op` (every field is a 4-byte f32, i32 or u32)."""
    return _spec(op, acc)[0].count(":")


# the fused stage's scratch: a state word not yet stored (a NaN pattern p_word never writes)
FUSED_EMPTY = 0xFFFFFFFF
# spins of a wait for one state word before it gives up (the word then reads as FUSED_EMPTY:
# a NaN, so a lost store would poison the result rather than pass unseen). The store waited
# for was issued before its workgroup counted, so it lands within microseconds; 8,192 spins of
# an L2 round trip are milliseconds. Bounded so that an invocation's spins for a state of up to
# 6 words (49,152) stay inside lavapipe's ~65,535-iteration loop budget (fused_loop_iterations).
FUSED_SPINS = 1 << 13


def fused_ok(op: str, acc: str) -> bool:
    """Whether `op`'s state is all f32 fields (the fused stage's precondition)."""
    fields = _spec(op, acc)[0]
    return all(f.split(":")[1].strip() == "f32" for f in fields.split(","))


def _fused_fns(fields: str) -> str:
    """p_wait (a scratch word once stored, then cleared) for the fused stage, and s_load(i):
    the state at scratch unit i (the stores use common.HELPERS' p_word)."""
    names = [f.split(":")[0].strip() for f in fields.split(",")]
    w = len(names)
    load = ", ".join(f"bitcast<f32>(p_wait(i * {w} + {k}))" for k in range(w))
    return (
        "fn p_wait(i: i32) -> u32 {\n"
        "  var v = atomicLoad(&part[i]);\n"
        f"  for (var n = 0; v == {FUSED_EMPTY:#x}u && n < {FUSED_SPINS}; n++) "
        "{ v = atomicLoad(&part[i]); }\n"
        f"  atomicStore(&part[i], {FUSED_EMPTY:#x}u);\n"
        "  return v;\n}\n"
        f"fn s_load(i: i32) -> S {{ return S({load}); }}\n"
    )


def _fused_tail(tree: list[str], fields: str, lanes: int, parts_at: int) -> list[str]:
    """The fused stage after each invocation's state `s`: the unit's tree, its state stored and
    counted, then (the output's last workgroup only) the P states merged by the same tree."""
    names = [f.split(":")[0].strip() for f in fields.split(",")]
    w = len(names)
    cut = tree.index("  if (t != 0 || !live) { return; }\n")
    L = tree[:cut] + ["  if (t == 0 && live) {\n"] + ["  " + ln for ln in tree[cut + 1 :]]
    L += [f"    atomicStore(&part[u * {w} + {k}], p_word(s.{n}));\n" for k, n in enumerate(names)]
    L += [
        f"    let counted = atomicAdd(&part[info[{parts_at + 1}] + o], 1u);\n",
        "    fused_last = select(0u, 1u, counted == u32(P - 1));\n",
        "  }\n",
        "  if (workgroupUniformLoad(&fused_last) == 0u) { return; }\n",
        "  s = s_init();\n",
        f"  for (var k = t; k < P; k = k + {lanes}) {{ s = s_merge(s, s_load(o * P + k)); }}\n",
    ]
    L += ["  {\n"] + tree + ["  }\n"]  # (a block: the tree's `let`s again)
    L.append(f"  atomicStore(&part[info[{parts_at + 1}] + o], 0u);\n")
    return L


def _tree(wg: int) -> list[str]:
    """Merge each row's `sh[g·wg .. g·wg + wg)` (g = `grp`, its row in the workgroup; `wg`
    invocations a row) into `s` on the row's invocation 0 (two barriers): sp groups of wg / sp
    states, then the sp partials (sp = 16 for 256)."""
    sp = _ROW_SPLIT if wg == 256 else 1 << ((wg.bit_length()) // 2)
    per = wg // sp
    return [
        f"  let g0 = grp * {wg};\n",
        "  sh[g0 + t] = s;\n",
        "  workgroupBarrier();\n",
        (
            f"  if (t < {sp}) {{\n    var u = sh[g0 + t * {per}];\n"
            f"    for (var k = 1; k < {per}; k = k + 1) "
            f"{{ u = s_merge(u, sh[g0 + t * {per} + k]); }}\n"
            f"    sh[g0 + t * {per}] = u;\n  }}\n"
        ),
        "  workgroupBarrier();\n",
        "  if (t != 0 || !live) { return; }\n",
        (
            f"  s = sh[g0];\n  for (var k = 1; k < {sp}; k = k + 1) "
            f"{{ s = s_merge(s, sh[g0 + k * {per}]); }}\n"
        ),
    ]


def _sg_tree(wg: int, fields: str) -> list[str]:
    """`_tree`'s merge by subgroup operations (the device's `subgroups`): each field of S
    shuffled across a butterfly within the subgroup (offsets below min(wg, SG_MAX), in uniform
    control flow; one past the span min(sgs, wg) discarded), one state a subgroup into `sh`,
    one barrier, then the row's invocation 0 merges its wg / span states in order. One barrier
    where `_tree` takes two, and no serial merges of 16 states (kernels/rowops._sg_reduce does
    the same for the row ops; the mapping of subgroups to local indices is probed,
    backend/quirks.subgroup_size)."""
    names = [f.split(":")[0].strip() for f in fields.split(",")]
    L = [f"  let span = min(sgs, {wg}u);\n"]
    for o in sg_offsets(wg):
        shuf = ", ".join(f"subgroupShuffleXor(s.{n}, {o}u)" for n in names)
        L.append(f"  {{ let o = S({shuf}); if ({o}u < span) {{ s = s_merge(s, o); }} }}\n")
    L += [
        f"  let nsub = {wg}u / span; let slot0 = u32(grp) * nsub;\n",
        "  if (u32(t) % span == 0u) { sh[slot0 + u32(t) / span] = s; }\n",
        "  workgroupBarrier();\n",
        "  if (t != 0 || !live) { return; }\n",
        "  s = sh[slot0];\n  for (var k = 1u; k < nsub; k++) { s = s_merge(s, sh[slot0 + k]); }\n",
    ]
    return L


@lru_cache(maxsize=1024)
def reduce_kernel(
    op: str,
    in_stype: str,
    acc: str,
    out_stypes: tuple,
    out_ctypes: tuple,
    rank_out: int,
    rank_in: int,
    mode: str,
    stage: str = "full",
    vec: int = 1,
    rows: int = 1,
    lanes: int = WG,
    ilp: int = 1,
    sg: int = 0,
    sum4: bool = False,
) -> KernelSource:
    """One reduction kernel. `acc`: accumulator type (f32|i32); out_ctypes: each final's type.

    `stage` "full" reduces whole rows; "partial" and "merge" are the two dispatches of a split
    reduction (see the module docstring): "partial" writes one state S per (output, chunk) to
    `part: array<S>` and ignores out_stypes; "merge" reads `part` instead of the input and ignores
    in_stype and the ranks.

    `vec` 4 ("row" mode, "full" or "partial", one reduced dim of unit stride, a 4-byte input
    type; the caller checks the input's offset, the kept dims' strides, the row length and the
    chunk are multiples of 4): the input as vec4s, one 16-byte load a step and four s_step()s
    (the scalar loop's strided loads reached 1,679 GB/s in x.sum() of 67M f32 on the H200,
    against torch CUDA's 3,881, 2026-12-03). `sum4` (ops in SUM4_OPS, with `vec` 4): each vec4
    added plainly, then one TwoSum into the compensated state (ops/reduce.SUM4).

    `rows` ("row" mode): units a workgroup of WG, WG / rows invocations each (short rows: a
    unit of 256 invocations over 1,024 elements left the H200 waiting on its merge tree: row
    sums of 65,536 x 1024 ran 914 GB/s, torch CUDA 3,680).

    `lanes` ("row" mode, one row a workgroup): the workgroup's size, WG or more (1,024: one
    workgroup reading a whole mid-sized vector, where a split's second dispatch would cost more
    than it saves); `ilp` (with `lanes`, "full" stage): independent states an invocation, each
    stepping over its own loads so several loads are in flight, merged before the tree.

    `sg` ("row" mode): the device's `subgroups`; 1 or 2 merge a unit's states by subgroup
    operations (`_sg_tree`), 0 by workgroup memory (`_tree`).
    """
    assert vec == 1 or (mode == "row" and stage != "merge" and rank_in == 1)
    assert rows == 1 or mode == "row"
    assert (lanes == WG and ilp == 1) or (mode == "row" and rows == 1 and stage == "full")
    fields, xtype, fns, finals = _spec(op, acc)
    fns = fns.replace("p_sp", "bitcast<f32>(info[3])")
    outs = [(f"out{k}", st, "w") for k, st in enumerate(out_stypes)]
    in_elem = f"vec4<{in_stype}>" if vec == 4 else in_stype
    fused = stage == "fused"
    if fused:
        assert mode == "row" and rows == 1 and lanes == WG and ilp == 1
        buffers = [("inp", in_elem, "r"), ("part", "atomic<u32>", "w")] + outs
    elif stage == "partial":
        buffers = [("inp", in_elem, "r"), ("part", "S", "w")]
    elif stage == "merge":
        buffers = [("part", "S", "r")] + outs
    else:
        buffers = [("inp", in_elem, "r")] + outs
    outer_shape, outer_stride = 4, 4 + rank_out
    inner_shape, inner_stride = 4 + 2 * rank_out, 4 + 2 * rank_out + rank_in
    chunk_at, parts_at = 4 + 2 * rank_out + 2 * rank_in, 5 + 2 * rank_out + 2 * rank_in
    row = mode == "row"
    wg = lanes // rows  # (invocations a unit in row mode)
    # `u`: this workgroup's (row) or invocation's (serial) unit: an output, or an (output, chunk)
    body = [
        "  let wg_flat = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);\n",
        f"  let units = info[0]{f' * info[{parts_at}]' if stage in ('partial', 'fused') else ''};\n",
    ]
    if row:
        # every invocation of a workgroup shares `u`, so the barriers below stay uniform
        body += [
            f"  let grp = i32(lid.x) / {wg};\n",
            f"  let u = wg_flat * {rows} + grp;\n",
            f"  let t = i32(lid.x) % {wg};\n",
        ]
    else:
        body += [f"  let u = wg_flat * {wg} + i32(lid.x);\n", "  if (u >= units) { return; }\n"]
    body += ["  let live = u < units;\n"]
    if stage == "merge":
        # info: [0] outputs [1] L [2] chunks P [3] p; part[o·P + c] is chunk c's state
        body += [
            "  let P = info[2];\n",
            "  let pbase = min(u, units - 1) * P;\n",
            "  let k1 = select(0, P, live);\n  var s = s_init();\n",
            _loop(
                "k",
                "t" if row else "0",
                "k1",
                wg if row else 1,
                "      s = s_merge(s, part[pbase + k]);\n",
            ),
        ]
    else:
        if stage in ("partial", "fused"):
            # unit u = o·P + c reduces the chunk [c·C, min((c+1)·C, L)) of output o's row
            body += [
                f"  let P = info[{parts_at}];\n",
                f"  let C = info[{chunk_at}];\n",
                "  let uc = min(u, units - 1);\n  let o = uc / P;\n",
                "  let j0 = (uc % P) * C;\n",
                "  let j1 = select(j0, min(j0 + C, info[1]), live);\n",
            ]
        else:
            body += [
                "  let o = min(u, units - 1);\n",
                "  let j0 = 0;\n",
                "  let j1 = select(0, info[1], live);\n",
            ]
        body += _offset("ob", "o", rank_out, outer_shape, outer_stride)
        body.append("  let base = info[2] + ob;\n  var s = s_init();\n")
        if vec == 4 and sum4 and op in SUM4_OPS:  # (ops/reduce.SUM4)

            def step(sv, at):
                a, b, c, d = (load(f"q.{c}", in_stype, xtype) for c in "xyzw")
                return (
                    f"      let q = inp[(base + {at}) >> 2u];\n"
                    f"      {sv} = two_sum({sv}, ({a} + {b}) + ({c} + {d}));\n"
                )

            start, stride = "j0 + 4 * t", 4 * wg
        elif vec == 4:  # (j0, j1 and base multiples of 4: whole vec4s)

            def step(sv, at):
                return f"      let q = inp[(base + {at}) >> 2u];\n" + "".join(
                    f"      {sv} = s_step({sv}, {load(f'q.{c}', in_stype, xtype)}, {at} + {i});\n"
                    for i, c in enumerate("xyzw")
                )

            start, stride = "j0 + 4 * t", 4 * wg
        else:

            def step(sv, at):
                lines = _offset("jo", at, rank_in, inner_shape, inner_stride)
                return "".join("    " + ln for ln in lines) + (
                    f"      {sv} = s_step({sv}, {load('inp[base + jo]', in_stype, xtype)}, {at});\n"
                )

            start, stride = ("j0 + t", wg) if row else ("j0", 1)
        if ilp == 1:
            body.append(_loop("j", start, "j1", stride, step("s", "j")))
        else:
            body += _ilp_loop(ilp, start, stride, step)
    sg = sg if row else 0
    if fused:
        body += _fused_tail(_sg_tree(wg, fields) if sg else _tree(wg), fields, lanes, parts_at)
        fns += _fused_fns(fields)
    elif row:
        body += _sg_tree(wg, fields) if sg else _tree(wg)
    if stage == "partial":
        body.append("  part[u] = s;\n")
    else:
        body.append("  let Lf = f32(info[1]);\n  let p = bitcast<f32>(info[3]);\n")
        at = "o" if fused else "u"
        for k, (fin, st, ct) in enumerate(zip(finals, out_stypes, out_ctypes)):
            fin = fin.replace("L", "Lf")
            body.append(f"  out{k}[{at}] = {store(fin, ct, st)};\n")
    text = fns + "".join(finals)
    src = (
        (SG_ENABLE if sg == 2 else "")
        + header(buffers)
        + helpers_for(text, "".join(body), "p_isnan(x)", "p_inf()", "p_nan()")
        + f"struct S {{ {fields} }}\n"
        + fns
        + (f"var<workgroup> sh: array<S, {lanes}>;\n" if row else "")
        + ("var<workgroup> fused_last: u32;\n" if fused else "")
        + f"@compute @workgroup_size({lanes})\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
        "@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(num_workgroups) nwg: vec3<u32>"
        + (", @builtin(subgroup_size) sgs: u32" if sg else "")
        + ") {\n"
        + "".join(body)
        + "}\n"
    )
    return trusted(KernelSource(src, "r" + "w" * (len(buffers) - 1)))


# ---- scans ---------------------------------------------------------------------------------
# A row-mode scan unit (a row, or a chunk) of at most SCAN_STAGED elements may be staged through
# workgroup memory (scan_kernel's `staged`): read and written by consecutive invocations
# (coalesced), each invocation's block of SCAN_STAGED / WG scanned there. Unstaged, invocation t
# reads its block [t·B, (t+1)·B) itself: neighbours B elements apart, a warp's loads 32 lines.
SCAN_STAGED = 2048


def _pad(k: str) -> str:
    """A staged element's slot: one spare word every 16, so invocation t's block of 8 or 16
    (slots 16t + i + t...) falls on distinct banks across a warp."""
    return f"{k} + ({k} >> 4u)"


# One-pass scans ("lookback", GPUs): one workgroup a staged chunk of SCAN_STAGED elements,
# taken by ticket (an atomic counter), so every chunk before it has started. It scans its chunk
# in workgroup memory, stores the chunk's total A[u] (one f32 word, FUSED_EMPTY until stored:
# the word is its own ready flag, so the relaxed atomics need no ordering between words), and
# starts its scan from the totals of the chunks before it, combined in a fixed order so that
# every run gives the same bits (a decoupled look-back's sum depends on which predecessor it
# finds done):
#   prefix(c) = tree(SB[0 .. S)) (op) tree(A[sb S .. c)),   S = c / sb,
# SB[s] = the pairwise tree of A[sb s .. sb s + sb), stored by chunk sb s + sb - 1 (it waits for
# the other sb - 1 anyway); sb (a power of two up to WG) is 256 but where a test shrinks it. A
# chunk waits only for totals that chunks with earlier tickets store right after their own reads
# (never after their prefixes), so no chain of waits runs through a row. A wait that outlasts
# `spins` polls computes the word itself, in the same order as its owner (lb_chunk: a chunk's
# total is the pairwise tree of its WG blocks' serial sums, which is what the Hillis-Steele
# scan's last slot holds; lb_sb: the pairwise tree of a superblock's totals): the result never
# depends on scheduling, and no wait can hang. The workgroup that counts itself last in the
# done counter (every other has finished its waits) sets the words this scan used back to
# empty and both counters to 0.
# Scratch words (`part`): [0] ticket [1] done, [2 + u] A[u] for u = o P + c, [2 + U + o SBP + s]
# SB[s] of row o (SBP = ceil(P / sb); the host keeps rows P <= U).
# A chunk is SCAN_STAGED elements, or `unit` (4,096 or 8,192: fewer, longer workgroups, the
# ~30 barriers and three L2 round trips of a chunk spread over more elements) where the
# device's workgroup memory holds scan_shared_bytes(unit, lookback=True).


def scan_shared_bytes(unit: int, lookback: bool = False) -> int:
    """Workgroup memory of a staged scan of units of `unit`: the padded staged unit (xs) and
    its block totals (sh), and for a look-back scan also its three trees (lw, lg, lq)."""
    return 4 * (unit + unit // 16 + (4 if lookback else 1) * WG)


def _register_loads(x, ks: list[str]) -> str:
    """WGSL: `let r<i> = x(ks[i]);` for each i, all issued before any is used."""
    return "".join(f"    let r{i} = {x(k)};\n" for i, k in enumerate(ks))


def _staged_load(x, unit: int, unroll: bool) -> str:
    """WGSL: the unit's n elements (x(k): element k's load) into workgroup memory xs, element k
    by invocation k mod WG. `unroll`: where the unit is full (n == unit), each invocation's
    unit / WG loads are issued together before their stores, so that many are in flight where
    the loop keeps one (an SM's reads in flight, not its bandwidth, bound a staged scan: the
    H100's staged chunks read at ~2 TB/s with the loop, its copy kernel at 2.9)."""
    looped = _loop("k", "t", "n", WG, f"      xs[{_pad('k')}] = {x('k')};\n")
    if not unroll:
        return looped
    ks = [f"(t + {i * WG})" for i in range(unit // WG)]
    loads = _register_loads(x, ks)
    stores = "".join(f"    xs[{_pad(k)}] = r{i};\n" for i, k in enumerate(ks))
    return f"  if (n == {unit}) {{\n{loads}{stores}  }} else {{\n{looped}  }}\n"


def _lookback_fns(
    acc: str, ident: str, f: str, x: str, sb: int, spins: int, unit: int = SCAN_STAGED
) -> str:
    """The look-back scan's workgroup variables and its waits (x: the element load at `j` of
    the row at `ib`; `unit` the chunk's elements)."""
    e = f"{FUSED_EMPTY:#x}u"
    wait = (
        ""
        if spins < 0
        # (spins < 0: never read, always computed: tests)
        else (
            "  var v = atomicLoad(&part[i]);\n"
            f"  for (var n = 0; v == {e} && n < {spins}; n++) {{ v = atomicLoad(&part[i]); }}\n"
            f"  if (v != {e}) {{ return bitcast<f32>(v); }}\n"
        )
    )

    def tree(count: str, leaf: str, ret: str = "st[0]") -> str:
        """The pairwise tree of `count` leaves, by a stack; `ret`: what of it is returned."""
        return (
            f"  var st: array<{acc}, 10>;\n  var top = 0;\n"
            f"  for (var b = 0; b < {count}; b++) {{\n{leaf}"
            f"    for (var c = b; (c & 1) == 1; c = c >> 1u) {{ top--; v = st[top] {f} v; }}\n"
            f"    st[top] = v;\n    top++;\n  }}\n  return {ret};\n"
        )

    # a computed word as its owner stores it (p_word: a NaN canonical), so a waiter's prefix
    # has the same bits whether it read the word or computed it (x86's inf - inf is 0xFFC00000)
    canon = "bitcast<f32>(p_word(st[0]))"

    block = unit // WG
    chunk_leaf = (
        f"    var v = {ident};\n"
        f"    for (var k = 0; k < {block}; k++) {{\n"
        f"      let j = q * {unit} + b * {block} + k;\n      v = v {f} {x};\n    }}\n"
    )
    return (
        "var<workgroup> tick: u32;\nvar<workgroup> lb_last: u32;\n"
        + "".join(f"var<workgroup> {n}: array<{acc}, {WG}>;\n" for n in ("lw", "lg", "lq"))
        + "fn lb_chunk(ib: i32, q: i32) -> f32 {  // chunk q's total, as its workgroup sums it\n"
        + tree(str(WG), chunk_leaf)
        + "}\nfn lb_a(i: i32, ib: i32, q: i32) -> f32 {  // A word i: chunk q's total\n"
        + wait
        + "  return bitcast<f32>(p_word(lb_chunk(ib, q)));\n}\n"
        + "fn lb_sb(i: i32, a0: i32, ib: i32, q0: i32) -> f32 {  // SB word i: chunks q0.. at a0..\n"
        + wait
        + tree(str(sb), "    var v = lb_a(a0 + b, ib, q0 + b);\n", canon)
        + "}\n"
    )


def _lookback_prefix(ident: str, f: str, sb: int, early: bool = False) -> list[str]:
    """A look-back scan's lines once its chunk's Hillis-Steele scan is in `sh`: the chunk's
    total stored, `prefix` (the chunks before it, in the fixed order above) and, from a
    superblock's last chunk, the superblock's total stored. `early`: that total is stored
    before the chunk waits for the earlier superblocks' totals (two trees, the same bits), so
    no chain of waits runs from superblock to superblock; else one tree does both."""
    w = WG
    pairs = f"let e = t + d;\n    if ((t & (2 * d - 1)) == 0 && e < {w}) {{"  # (adjacent pairs)

    def tree(*lines: str) -> str:
        return (
            f"  for (var d = 1; d < {w}; d = d << 1u) {{\n"
            f"    workgroupBarrier();\n    {pairs}\n" + "".join(lines) + "    }\n  }\n"
            "  workgroupBarrier();\n"
        )

    store_sb = (
        f"  if (t == 0 && live && m == {sb - 1}) "
        "{ atomicStore(&part[2 + U + o * SBP + S], p_word(lg[0])); }\n"
    )
    lq_wait = _loop(
        "k",
        "t",
        "S",
        w,
        f"      lbq = lbq {f} lb_sb(2 + U + o * SBP + k, arow + k * {sb}, ib, k * {sb});\n",
    )
    lw_lg = (
        f"      lw[t] = lw[t] {f} lw[e];\n",
        f"      if (d < {sb}) {{ lg[t] = lg[t] {f} lg[e]; }}\n",
    )
    lq = f"      lq[t] = lq[t] {f} lq[e];\n"
    head = [
        f"  let total = sh[{w - 1}];\n",
        "  if (t == 0 && live) { atomicStore(&part[2 + u], p_word(total)); }\n",
        f"  let s0 = cidx / {sb} * {sb};\n",
        "  let m = select(0, cidx - s0, live);\n",
        f"  let S = select(0, cidx / {sb}, live);\n",
        f"  let SBP = (P + {sb - 1}) / {sb};\n",
        "  let arow = 2 + o * P;\n",
        f"  var lbw = {ident};\n",
        "  if (t < m) { lbw = lb_a(arow + s0 + t, ib, s0 + t); }\n",
        f"  var lbq = {ident};\n",
    ]
    tail = [f"  let prefix = lq[0] {f} lw[0];\n"]
    if early:
        return (
            head
            + [
                "  lw[t] = lbw;\n  lg[t] = select(lbw, total, t == m);\n",
                tree(*lw_lg),
                store_sb,
                lq_wait,
                "  lq[t] = lbq;\n",
                tree(lq),
            ]
            + tail
        )
    return (
        head
        + [
            lq_wait,
            "  lw[t] = lbw;\n  lg[t] = select(lbw, total, t == m);\n  lq[t] = lbq;\n",
            tree(lw_lg[0], lq, lw_lg[1]),
            store_sb,
        ]
        + tail
    )


def _lookback_release() -> list[str]:
    """A look-back scan's last lines: the workgroup that counts itself last (every other has
    finished its waits) empties the words this scan used and zeroes both counters."""
    e = f"{FUSED_EMPTY:#x}u"
    return [
        "  if (t == 0) {\n",
        "    let done = atomicAdd(&part[1], 1u);\n",
        "    lb_last = select(0u, 1u, done == nwg.x * nwg.y * nwg.z - 1u);\n",
        "  }\n",
        "  if (workgroupUniformLoad(&lb_last) == 1u) {\n",
        _loop("k", "t", "units", WG, f"      atomicStore(&part[2 + k], {e});\n", "    "),
        "    let sbs = info[0] * SBP;\n",
        _loop("k", "t", "sbs", WG, f"      atomicStore(&part[2 + U + k], {e});\n", "    "),
        "    if (t == 0) { atomicStore(&part[0], 0u); atomicStore(&part[1], 0u); }\n",
        "  }\n",
    ]


@lru_cache(maxsize=256)
def scan_kernel(
    op: str,
    in_stype: str,
    acc: str,
    out_stype: str,
    rank_out: int,
    mode: str,
    stage: str = "",
    staged: bool = False,
    sb: int = WG,
    spins: int = FUSED_SPINS,
    order: str = "ticket",
    reset: str = "last",
    unit: int = SCAN_STAGED,
    early: bool = False,
    unroll: bool = True,
) -> KernelSource:
    """cumsum / cumprod along one dim, `acc` the compute type (f32|i32).

    "serial": one invocation per row runs the scan. "row": one workgroup per row; invocation t
    owns the contiguous block [t·B, (t+1)·B) of the row (B = ceil(L/256)): it totals its block,
    the 256 totals are scanned in workgroup memory (Hillis-Steele, 8 steps), and each invocation
    rescans its block from its exclusive prefix, writing outputs.

    Chunked scans (`stage`, row mode only) cut each row into P chunks of C elements, one
    workgroup a chunk, for rows too long for one workgroup's loops (lavapipe's loop budget) or
    too few to fill a GPU:
      "total"  part[u] = the chunk's total, u = o·P + c (buffers inp, part);
      "apply"  the chunk's scan, started from carry[u - 1], the inclusive scan of the totals
               (the identity for c = 0) (buffers inp, carry, out).
      "lookback" the two in one dispatch (GPUs; f32 compute, staged chunks of SCAN_STAGED):
               the notes above _lookback_fns (buffers inp, part: the scratch, out); `sb`
               chunks a superblock, `spins` polls a wait before the waiter computes the word
               (< 0: never polls); `order` "ticket" (a chunk by the ticket counter) or "id"
               (by workgroup id: no same-address atomic, and a chunk whose predecessors have
               not started computes their totals itself); `reset` "last" (the done counter's
               last workgroup empties the words) or "pass" (the caller dispatches
               lookback_clear_kernel after it); `unit` (staged chunks) the elements a staged
               chunk at most (a multiple of WG: SCAN_STAGED, or more where the device's
               workgroup memory holds them); `early` (_lookback_prefix) a superblock's
               total stored before the waits for the superblocks before it.
    `unroll` (staged): a full unit's loads are issued all at once, into registers, before any
    is written to workgroup memory (_staged_load).
    Info words, after the scan's own: [5 + 3R] C, [6 + 3R] P ("lookback": then [7 + 3R] the
    scratch's capacity U).

    `staged` (row mode, the caller's unit of at most `unit` elements): the unit passes
    through workgroup memory, so every load and store of the input and output is coalesced;
    "total" sums invocation t's elements t, t + WG, .. (coalesced, no staging needed).
    """
    ident = ("0.0" if acc == "f32" else "0") if op == "cumsum" else ("1.0" if acc == "f32" else "1")
    f = "+" if op == "cumsum" else "*"
    shape_at = 5
    in_at, out_at = 5 + rank_out, 5 + 2 * rank_out
    c_at = 5 + 3 * rank_out
    x = load("inp[ib + j * info[3]]", in_stype, acc)
    row = mode == "row"
    if stage and not row:
        raise ValueError("pyrite: chunked scans run in row mode")
    lookback = stage == "lookback"
    if lookback and not (staged and acc == "f32"):
        raise ValueError("pyrite: a look-back scan runs staged chunks in f32")
    if unit % WG or (unit != SCAN_STAGED and not (staged and stage)):
        raise ValueError(f"pyrite: a scan unit of {unit} (staged chunks: a multiple of {WG})")
    body = ["  let wg_flat = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x);\n"]
    if lookback:  # (the chunk from a ticket: every chunk before it has started)
        assert order in ("ticket", "id") and reset in ("last", "pass")
        if order == "ticket":
            body += [
                "  if (lid.x == 0u) { tick = atomicAdd(&part[0], 1u); }\n",
                "  let u = i32(workgroupUniformLoad(&tick));\n",
            ]
        else:
            body.append("  let u = wg_flat;\n")
        body += [
            f"  let C = info[{c_at}];\n  let P = info[{c_at + 1}];\n  let U = info[{c_at + 2}];\n",
            "  let units = info[0] * P;\n  let uc = min(u, units - 1);\n",
            "  let o = select(info[0], uc / P, u < units);\n  let cidx = uc % P;\n",
            "  let t = i32(lid.x);\n",
        ]
    elif stage:
        body += [
            f"  let C = info[{c_at}];\n  let P = info[{c_at + 1}];\n",
            "  let u = wg_flat;\n  let o = u / P;\n  let cidx = u % P;\n  let t = i32(lid.x);\n",
        ]
    elif row:
        body += ["  let o = wg_flat;\n  let t = i32(lid.x);\n"]
    else:
        body += [f"  let o = wg_flat * {WG} + i32(lid.x);\n", "  if (o >= info[0]) { return; }\n"]
    body += [
        "  let live = o < info[0];\n",
        "  let L = select(0, info[1], live);\n",
        "  var r = min(o, info[0] - 1);\n  var ib = info[2];\n  var obase = 0;\n",
    ]
    for d in range(rank_out - 1, -1, -1):
        body.append(
            f"  {{ let c = r % info[{shape_at + d}]; r = r / info[{shape_at + d}]; "
            f"ib = ib + c * info[{in_at + d}]; obase = obase + c * info[{out_at + d}]; }}\n"
        )
    write = f"out[obase + j * info[4]] = {store('a', acc, out_stype)};"
    if not row:
        body += [
            f"  var a = {ident};\n",
            _loop("j", "0", "L", 1, f"      a = a {f} {x}; {write}\n"),
        ]
    else:
        # this workgroup's range [lo, hi) of the row: the whole row, or chunk cidx of it
        if stage:
            body.append("  let lo = min(cidx * C, L);\n  let hi = min(lo + C, L);\n")
        else:
            body.append("  let lo = 0;\n  let hi = L;\n")
        start = ident
        if lookback:
            start = "prefix"
        if stage == "apply":  # (max: select reads both sides, and u - 1 is -1 at u = 0)
            body.append(f"  let start = select({ident}, carry[max(u - 1, 0)], cidx > 0);\n")
            start = "start"
        if staged and stage == "total":  # (any order: the total alone)
            looped = _loop("j", "lo + t", "hi", WG, f"      a = a {f} {x};\n")
            if unroll:  # (a full chunk's loads together, summed in the loop's order)
                js = [f"(lo + t + {i * WG})" for i in range(unit // WG)]
                loads = _register_loads(
                    lambda j: load(f"inp[ib + {j} * info[3]]", in_stype, acc), js
                )
                sums = "".join(f"    a = a {f} r{i};\n" for i in range(len(js)))
                looped = f"  if (hi - lo == {unit}) {{\n{loads}{sums}  }} else {{\n{looped}  }}\n"
            body += [f"  var a = {ident};\n", looped]
        elif staged:
            body += [
                f"  let n = hi - lo;\n  let B = {unit // WG};\n",
                _staged_load(
                    lambda k: load(f"inp[ib + (lo + {k}) * info[3]]", in_stype, acc), unit, unroll
                ),  # fmt: skip
                "  workgroupBarrier();\n",
                "  let k0 = min(t * B, n);\n  let k1 = min(k0 + B, n);\n",
                f"  var a = {ident};\n",
                _loop("k", "k0", "k1", 1, f"      a = a {f} xs[{_pad('k')}];\n"),
            ]
        else:
            body += [
                f"  let B = (hi - lo + {WG - 1}) / {WG};\n",
                "  let j0 = min(lo + t * B, hi);\n  let j1 = min(j0 + B, hi);\n",
                f"  var a = {ident};\n",
                _loop("j", "j0", "j1", 1, f"      a = a {f} {x};\n"),
            ]
        body += [
            # the blocks' totals scanned in parallel (Hillis-Steele: log2(WG) steps, two
            # barriers each), where one invocation walked all WG of them
            "  var v = a;\n  sh[t] = v;\n",
            f"  for (var d = 1; d < {WG}; d = d << 1u) {{\n"
            f"    workgroupBarrier();\n    if (t >= d) {{ v = sh[t - d] {f} v; }}\n"
            "    workgroupBarrier();\n    sh[t] = v;\n  }\n",
            "  workgroupBarrier();\n",
        ]
        if lookback:
            body += _lookback_prefix(ident, f, sb, early)
        if stage == "total":
            body.append(f"  if (t == 0 && live) {{ part[u] = sh[{WG - 1}]; }}\n")
        elif staged:  # (scanned in place, then written out by consecutive invocations)
            slot = f"xs[{_pad('k')}]"
            wk = f"out[obase + (lo + k) * info[4]] = {store(slot, acc, out_stype)};"
            body += [
                f"  a = select({start}, {start} {f} sh[max(t - 1, 0)], t > 0);\n",
                _loop("k", "k0", "k1", 1, f"      a = a {f} {slot}; {slot} = a;\n"),
                "  workgroupBarrier();\n",
                _loop("k", "t", "n", WG, f"      {wk}\n"),
            ]
        else:
            body += [
                f"  a = select({start}, {start} {f} sh[max(t - 1, 0)], t > 0);\n",
                _loop("j", "j0", "j1", 1, f"      a = a {f} {x}; {write}\n"),
            ]
    if lookback and reset == "last":
        body += _lookback_release()
    bufs = [("inp", in_stype, "r")]
    if stage == "total":
        bufs.append(("part", acc, "w"))
    elif lookback:
        bufs += [("part", "atomic<u32>", "w"), ("out", out_stype, "w")]
    else:
        if stage == "apply":
            bufs.append(("carry", acc, "r"))
        bufs.append(("out", out_stype, "w"))
    src = (
        header(bufs)
        + (
            _lookback_fns(acc, ident, f, x, sb, spins, unit) + helpers_for("".join(body))
            if lookback
            else ""
        )
        + (f"var<workgroup> sh: array<{acc}, {WG}>;\n" if row else "")
        + (
            f"var<workgroup> xs: array<{acc}, {unit + unit // 16}>;\n"
            if staged and stage != "total"
            else ""
        )
        + f"@compute @workgroup_size({WG})\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
        "@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(num_workgroups) nwg: vec3<u32>) {\n" + "".join(body) + "}\n"
    )
    return trusted(KernelSource(src, "".join(m for _, _, m in bufs)))


@lru_cache(maxsize=1)
def lookback_clear_kernel() -> KernelSource:
    """Empties the look-back scratch's words a scan used and zeroes its counters, after a scan
    built with reset "pass". Info: [0] chunk words [1] superblock words [2] the capacity U."""
    e = f"{FUSED_EMPTY:#x}u"
    src = (
        header([("part", "u32", "w")]) + f"@compute @workgroup_size({WG})\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
        "@builtin(local_invocation_id) lid: vec3<u32>, "
        "@builtin(num_workgroups) nwg: vec3<u32>) {\n"
        f"  let i = i32((wid.z * nwg.y + wid.y) * nwg.x + wid.x) * {WG} + i32(lid.x);\n"
        f"  if (i < info[0]) {{ part[2 + i] = {e}; }}\n"
        f"  if (i < info[1]) {{ part[2 + info[2] + i] = {e}; }}\n"
        "  if (i < 2) { part[i] = 0u; }\n"
        "}\n"
    )
    return trusted(KernelSource(src, "w"))


def lookback_loop_iterations(
    rows: int, parts: int, sb: int, spins: int, unit: int = SCAN_STAGED
) -> int:
    """Loop iterations of one invocation of a look-back scan at worst: its staged chunk of
    `unit` elements, a chunk total and its share of superblock totals each waited for in full
    and then computed (a superblock from its chunks' totals, each computed too), the trees'
    steps, and the last workgroup's resets."""
    tree = lambda n, leaf: n * (leaf + WG.bit_length() + 1) + 1  # noqa: E731
    a = spins + 1 + tree(WG, unit // WG + 1)
    sbs = -(-(parts // sb) // WG) * (spins + 1 + tree(sb, a)) + 1
    resets = -(-rows * parts // WG) + -(-rows * -(-parts // sb) // WG) + 2
    trees = 2 * (WG.bit_length() + 1)  # (one, or two with `early`)
    return scan_loop_iterations("row", unit, unit) + a + sbs + trees + resets


def reduce_loop_iterations(mode: str, length: int) -> int:
    """Loop iterations of one invocation of reduce_kernel over a row (or chunk) of `length`,
    each loop's exit test included (lavapipe counts it against its budget): the serial loop, or
    the row kernel's stride loop and its two _ROW_SPLIT-step merges."""
    if mode == "serial":
        return length + 1
    return -(-length // WG) + 1 + 2 * (_ROW_SPLIT + 1)


def fused_loop_iterations(chunk: int, parts: int, words: int) -> int:
    """Loop iterations of one invocation of the fused stage at worst: its chunk's row loops,
    the last workgroup's merge of `parts` states, and a full wait (FUSED_SPINS) for each of a
    state's `words` words."""
    return reduce_loop_iterations("row", chunk) + -(-parts // WG) + 1 + words * (FUSED_SPINS + 1)


def scan_loop_iterations(mode: str, length: int, unit: int = SCAN_STAGED) -> int:
    """Loop iterations of one invocation of scan_kernel over a row (or chunk) of `length`,
    each loop's exit test included (lavapipe counts it against its budget): the block's two
    passes (unstaged) or the staged unit's load, block and store loops, and the totals'
    log2(WG) parallel-prefix steps."""
    if mode == "serial":
        return length + 1
    steps = -(-length // WG) + 1
    passes = 3 * max(steps, unit // WG + 1) if length <= unit else 2 * steps
    return passes + WG.bit_length() + 1
