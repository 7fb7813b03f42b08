"""Cases tests/test_fuzz_nn.py found wrong, minimised and pinned against torch (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F


def _np(t):
    return t.detach().double().numpy()


# ---- conv_transpose with an output size of exactly 0 raised; torch returns an empty tensor ----
def test_conv_transpose_empty_output():
    x = pr.randn(2, 6, 1, 1, requires_grad=True)
    w = pr.randn(6, 2, 4, 4, requires_grad=True)
    y = F.conv_transpose2d(x, w, None, (1, 3), (2, 1), 0, 3)  # H: (1-1) - 4 + 3 + 1 = 0
    assert tuple(y.shape) == (2, 6, 0, 2)
    y.sum().backward()
    assert not x.grad.numpy().any() and not w.grad.numpy().any()
    assert tuple(F.conv_transpose1d(pr.randn(2, 6, 1), pr.randn(6, 2, 4), None, 1, 2).shape) == (
        2,
        2,
        0,
    )
    with pytest.raises(ValueError):  # (a negative size is refused, as torch)
        F.conv_transpose1d(pr.randn(2, 6, 1), pr.randn(6, 2, 4), None, 1, 3)


# ---- f16 conv_transpose (col2im path) rounded each kernel tap's sum into f16 -----------------
# A bias cancelling the sum left the f16 rounding of the sum: -0.00708 for -0.006775 (80 ulp;
# torch -0.006836). The columns are f32 now and the result is rounded once.
def test_conv_transpose_f16_rounds_once(rng):
    def q(a):
        return torch.tensor(a.astype(np.float32)).half().double()

    x, w = q(rng.standard_normal((3, 6, 5, 1))), q(rng.standard_normal((6, 2, 3, 3)))
    no_bias = torch.nn.functional.conv_transpose2d(x, w, None, 1, (2, 1), 0, 3)
    b = q(-no_bias[0, :, 0, 0].numpy() + 0.001)  # output (0, :, 0, 0) cancels to ~0.001
    want = torch.nn.functional.conv_transpose2d(x, w, b, 1, (2, 1), 0, 3).numpy()
    got = F.conv_transpose2d(
        pr.tensor(x.float().numpy()).half(),
        pr.tensor(w.float().numpy()).half(),
        pr.tensor(b.float().numpy()).half(),
        1,
        (2, 1),
        0,
        3,
    )
    # once rounded from f32: within an f16 ulp of each value plus f32's sum error
    tol = 2.0**-11 * np.abs(want) + 1e-6 * np.abs(want).max()
    assert (np.abs(_np(got) - want) <= tol).all()


# ---- half-precision sdpa off the fused path (value dim != head dim, bf16) rounded its scores
# and weights into the half type: 1.4 ulp of the result off, torch 0.4
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_half_composite_in_f32(rng, dtype):
    u = 2.0**-11 if dtype == "float16" else 2.0**-8
    q, k = rng.integers(-64, 65, (2, 13, 16)) / 16, rng.integers(-64, 65, (1, 13, 16)) / 16
    v = rng.integers(-64, 65, (1, 13, 8)) / 16  # (Ev 8 != E 16: not the fused kernel)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.tensor(a) for a in (q, k, v)), is_causal=True, enable_gqa=True
    ).numpy()
    ps = [
        pr.tensor(a.astype(np.float32)).to(getattr(pr, dtype)).requires_grad_() for a in (q, k, v)
    ]
    got = F.scaled_dot_product_attention(*ps, is_causal=True, enable_gqa=True)
    assert got.dtype is getattr(pr, dtype)
    assert (np.abs(_np(got) - want) <= u * np.abs(want) + 1e-5).all()  # rounded once from f32
    got.sum().backward()
    assert all(p.grad is not None and p.grad.dtype is p.dtype for p in ps)


# ---- logsigmoid (and the log1p(exp(-|x|)) of the logit losses) took WGSL's exp, 3 + 2|x| ULP:
# logsigmoid(30.2) was 26 ULP off (torch 0.5); kernels/mathlib.py's p_expf now
def test_logsigmoid_exp_precise():
    x = np.array([31.0, 31.5, 25.0, 30.2, 17.0, -31.0, 60.0], dtype=np.float32)
    want = torch.nn.functional.logsigmoid(torch.tensor(x, dtype=torch.float64)).numpy()
    got = _np(F.logsigmoid(pr.tensor(x)))
    np.testing.assert_allclose(got, want, rtol=4 * 2.0**-24)
    t = np.abs(x) / 64
    for fn in (
        lambda T, a, b: T.nn.functional.binary_cross_entropy_with_logits(a, b, reduction="none"),
        lambda T, a, b: T.nn.functional.poisson_nll_loss(a / 4, b, reduction="none"),
        lambda T, a, b: T.nn.functional.kl_div(a, b, reduction="none", log_target=True),
    ):
        want = fn(torch, torch.tensor(x).double(), torch.tensor(t).double()).numpy()
        got = _np(fn(pr, pr.tensor(x), pr.tensor(t)))
        np.testing.assert_allclose(got, want, rtol=16 * 2.0**-24)


# ---- relu's and threshold's gradient at NaN: torch's threshold_backward passes g (x <= t is
# false there); pyrite's x > t gave 0
@pytest.mark.parametrize("lib_fn", ["relu", "threshold"])
def test_relu_threshold_grad_at_nan(lib_fn):
    x = np.array([np.nan, -1.0, 0.0, 2.0, -np.inf, np.inf, 1.5], dtype=np.float32)
    w = np.arange(1, 8, dtype=np.float32)
    grads = []
    for lib in (torch, pr):
        t = lib.tensor(x).requires_grad_()
        fn = getattr(lib.nn.functional, lib_fn)
        y = fn(t) if lib_fn == "relu" else fn(t, 1.5, -2.0)
        (y * lib.tensor(w)).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])


# ---- normalize (no autograd) and gaussian_nll_loss took WGSL's max(NaN, eps) = eps: a row with
# a NaN gave x / eps (1e12) beside the NaN, torch NaN everywhere; a NaN variance gave 5e5
def test_nan_not_clamped_to_eps():
    x = np.array([[1.0, np.nan, 2.0], [1.0, 2.0, -3.0]], dtype=np.float32)
    for p in (2.0, float("inf")):
        want = torch.nn.functional.normalize(torch.tensor(x), p, 1).numpy()
        got = F.normalize(pr.tensor(x), p, 1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6)  # (NaN where torch has NaN)
    ones = np.ones_like(x)
    want = torch.nn.functional.gaussian_nll_loss(
        torch.tensor(ones), torch.zeros(2, 3), torch.tensor(np.abs(x)), reduction="none"
    ).numpy()
    got = F.gaussian_nll_loss(
        pr.tensor(ones), pr.zeros(2, 3), pr.tensor(np.abs(x)), reduction="none"
    )
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


# ---- digamma's gradient (the trigamma kernel) at -inf: the pole test (x == floor(x)) took
# -inf first and gave inf; torch's trigamma(-inf) is NaN
def test_digamma_grad_at_minus_inf():
    x = np.array([-np.inf, np.inf, -1.0, -2.5, 0.5, 3.0], dtype=np.float32)
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    torch.digamma(t).sum().backward()
    p = pr.tensor(x).requires_grad_()
    pr.digamma(p).sum().backward()
    got, want = _np(p.grad), t.grad.numpy()
    assert np.isnan(got[0]) and got[1] == 0.0 and np.isinf(got[2])  # (torch: 6.6e32 at -1)
    np.testing.assert_allclose(got[3:], want[3:], rtol=1e-5)


def test_polygamma_one_is_the_trigamma_kernel():
    """polygamma(1, x) as torch's trigamma: 0 at inf (the Hurwitz-zeta form gave NaN), 1/x at
    x = 1e30 (it gave 0), NaN at -inf; its first and second derivatives as torch's."""
    x = [float("inf"), 1e30, 1e10, 3.5, 0.5, -0.5, float("-inf"), float("nan"), 1.7, -3.3]
    got = pr.polygamma(1, pr.tensor(x)).numpy()
    want = torch.polygamma(1, torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=4e-6, atol=0)  # (a series' few ulp)
    a = np.array([0.7, 2.5, -1.3, 12.0], np.float32)
    xp, xt = pr.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (gp,) = pr.autograd.grad(pr.polygamma(1, xp).sum(), xp, create_graph=True)
    (gt,) = torch.autograd.grad(torch.polygamma(1, xt).sum(), xt, create_graph=True)
    np.testing.assert_allclose(gp.detach().numpy(), gt.detach().numpy(), rtol=4e-6)
    (hp,) = pr.autograd.grad(gp.sum(), xp)
    (ht,) = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(hp.numpy(), ht.numpy(), rtol=4e-6)


# ---- bfloat16 layer_norm/rms_norm backward (the composite: bfloat16 skips the row kernel) rounded
# each of its ops into bfloat16: mean(g·w) 1 ulp off, times a variance-0 row's 1/std (316), put
# dx 0.1 off (-1.08 for float64's -0.98, 12 ulp). It runs in float32 and rounds once now.
@pytest.mark.parametrize("name", ["layer_norm", "rms_norm"])
def test_bf16_norm_backward_rounds_once(rng, name):
    n = 13
    x = np.concatenate([np.full((2, n), rng.uniform(1, 8)), rng.standard_normal((2, n)) * 4])
    w, g = rng.standard_normal(n), rng.integers(-8, 9, (4, n)) / 8.0
    x, w = (torch.tensor(a).bfloat16().double().numpy() for a in (x, w))
    eps = 1e-5

    def run(lib, dt):
        xt = lib.tensor(x, dtype=dt, requires_grad=True)
        wt = lib.tensor(w, dtype=dt, requires_grad=True)
        fn = getattr(lib.nn.functional, name)
        y = fn(xt, (n,), wt, eps=eps) if name == "rms_norm" else fn(xt, (n,), wt, None, eps)
        y.backward(lib.tensor(g, dtype=dt))
        return [np.asarray(t.grad.to(lib.float32).tolist(), np.float64) for t in (xt, wt)]

    want = run(torch, torch.float64)
    got = run(pr, pr.bfloat16)
    for a, b in zip(got, want):
        # rounded once into bfloat16 (half an ulp, 2^-9 relative) after float32 sums of n terms
        tol = 2.0**-8 * np.abs(b) + 16 * n * 2.0**-24 * np.abs(b).max()
        assert (np.abs(a - b) <= tol).all(), (a, b)


# ---- the inf-norm's gradient gave g only to the maxima (a where); torch multiplies by the mask,
# so a NaN or infinite g (normalize(p=inf) over a row holding an inf) is NaN over the whole row
def test_inf_norm_grad_spreads_nan_as_torch(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[0, rng.integers(5)] = np.inf
    x[1, rng.integers(5)] = -np.inf
    g = rng.standard_normal((3, 5)).astype(np.float32)
    gn = np.array([np.nan, np.inf, rng.standard_normal()], np.float32)
    for case in ("normalize", "norm"):
        xt, xp = torch.tensor(x, requires_grad=True), pr.tensor(x, requires_grad=True)
        if case == "normalize":
            torch.nn.functional.normalize(xt, float("inf"), 1).backward(torch.tensor(g))
            F.normalize(xp, float("inf"), 1).backward(pr.tensor(g))
        else:
            xt.norm(float("inf"), 1).backward(torch.tensor(gn))
            xp.norm(float("inf"), 1).backward(pr.tensor(gn))
        want, got = xt.grad.numpy(), _np(xp.grad)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)  # (a few f32 ops)


# ---- cumprod's double backward over a zero and an inf: its one cumprod with x_k as 1 (the
# blocked O(n²) rule) differentiated through (g·out)/x, 0·inf = NaN where torch's slices,
# prod(x[:k])·cumprod(x[k+1:]), give finite values (x = [1, 0, inf]: torch 4, pyrite NaN)
def _cumprod_hx_math(x, g, v, dim):
    """d/dx_m Σ_i v_i·gx_i for gx = cumprod's first derivative, term by term in float64:
    Σ_i Σ_{k >= max(i, m), i != m} v_i·g_k·Π_{j <= k, j not in (i, m)} x_j (NaN where a term
    is 0·inf)."""
    xm, gm, vm = (np.moveaxis(a.astype(np.float64), dim, -1) for a in (x, g, v))
    out = np.zeros_like(xm)
    n = xm.shape[-1]
    with np.errstate(all="ignore"):
        for r in range(xm.shape[0]):
            for m in range(n):
                tot = 0.0
                for i in range(n):
                    for k in range(max(i, m), n) if i != m else ():
                        p = np.prod([xm[r, j] for j in range(k + 1) if j not in (i, m)])
                        tot = tot + vm[r, i] * gm[r, k] * p
                out[r, m] = tot
    return np.moveaxis(out, -1, dim)


@pytest.mark.parametrize("dim", [0, 1])
def test_cumprod_double_backward_zero_and_inf(rng, dim):
    x = rng.uniform(0.5, 2.0, (4, 5)).astype(np.float32) * rng.choice([-1, 1], (4, 5))
    for row in range(4):  # a zero and an inf in each row of dim, at random places
        i, j = rng.choice(5 if dim == 1 else 4, 2, replace=False)
        idx = (row, i) if dim == 1 else (i, row)
        x[idx] = 0.0
        idx = (row, j) if dim == 1 else (j, row % 5)
        x[idx] = rng.choice([np.inf, -np.inf])
    g = rng.standard_normal(x.shape).astype(np.float32)
    v = rng.standard_normal(x.shape).astype(np.float32)
    res = []
    for lib in (torch, pr):
        xt, gt = lib.tensor(x, requires_grad=True), lib.tensor(g, requires_grad=True)
        (gx,) = lib.autograd.grad(lib.cumprod(xt, dim), xt, gt, create_graph=True)
        hx, hg = lib.autograd.grad((gx * lib.tensor(v)).sum(), [xt, gt])
        res.append([np.asarray(t.detach().double().tolist()) for t in (gx, hx, hg)])
    # gx and hx: torch's, except where torch's is NaN and the math's is finite (a row's first
    # inf before its zero: ops/reduce.py _g_cumprod takes the math there, as
    # tests/test_fuzz_random_shapes.py's _TorchOrMath oracle does, and its double backward
    # differentiates that); hg: torch's
    from tests.test_fuzz_random_shapes import _cumprod_math

    math = _cumprod_math(torch.tensor(x, dtype=torch.float64), torch.tensor(g).double(), dim)
    for k, m in ((0, math.numpy()), (1, _cumprod_hx_math(x, g, v, dim))):
        t = res[0][k]
        res[0][k] = np.where(np.isnan(t) & np.isfinite(m), m, t)
    for want, got in zip(*res):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # (products of 5 in f32)


# ---- log_softmax and cross_entropy's row kernels took v - (M + log(S)), rounding the sum at the
# max M's ulp: the max's -0.00144 was 3.9e-7 off (2.7e-4 relative) at M = 9; torch's order is
# (v - M) - log(S), cross_entropy's log(S) - (x_t - M)
def test_log_softmax_subtracts_max_first(rng):
    x = (rng.standard_normal((16, 5)) * 10).astype(np.float32)
    x[:, 0] = np.abs(x[:, 0]) + 20.0  # one dominant max: log(S) small beside M
    t = rng.integers(0, 5, 16)
    xd = torch.tensor(x, dtype=torch.float64)
    want_ls = torch.log_softmax(xd, 1).numpy()
    want_ce = torch.nn.functional.cross_entropy(xd, torch.tensor(t), reduction="none").numpy()
    got_ls = _np(F.log_softmax(pr.tensor(x), 1))
    got_ce = _np(F.cross_entropy(pr.tensor(x), pr.tensor(t), reduction="none"))
    # a few roundings of values of the result's size (v - M is exact near M), not of M's (the
    # old error at M ~ 30: ulp(30) / 2 = 9.5e-7)
    u = 2.0**-24
    np.testing.assert_allclose(got_ls, want_ls, rtol=4 * u, atol=4 * u)
    np.testing.assert_allclose(got_ce, want_ce, rtol=4 * u, atol=4 * u)


# ---- digamma near its positive root (1.4616...) by the recurrence to x >= 10 cancelled to
# ~2.4e-7 absolute: psi(1.5) was 0.03648968 for 0.03648997 (8e-6 relative, torch's f32
# 0.03648992); [1, 2] is a fit around the root now, a few ulp relative
def test_digamma_near_its_root(rng):
    x = np.concatenate([rng.uniform(1.0, 2.0, 2000), 1.4616321 + rng.uniform(-1e-3, 1e-3, 200)])
    x = np.concatenate([x, [1.0, 1.5, 2.0, -0.5]]).astype(np.float32)
    got = _np(pr.digamma(pr.tensor(x)))
    want = torch.digamma(torch.tensor(x, dtype=torch.float64)).numpy()
    # the fit's 2.5 ulp in f32 evaluation, doubled; the f32 root's psi, -1.2e-8, is exact to 1e-15
    np.testing.assert_allclose(got, want, rtol=5 * 2.0**-24, atol=1e-14)
