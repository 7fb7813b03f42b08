"""Results that were silently wrong, each against torch CPU (or numpy float64) on fresh random
inputs of awkward sizes: interpolate's backward with non-finite gradients, sin/cos/tan of large
arguments, scatter with an empty index, matrix_exp's gradient through every public route, and
half-precision mean with dtype=."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.testing.tolerance import F32_U

# ---- interpolate backward: a NaN/inf in g reaches only the inputs its output read ----------
INTERP_BACK = [
    ((2, 3, 7), dict(size=11, mode="linear")),
    ((2, 3, 7), dict(size=5, mode="linear", align_corners=True)),
    ((1, 2, 9), dict(size=3, mode="linear")),  # src lands on integers: taps of weight 0
    ((2, 3, 5, 7), dict(size=(9, 4), mode="bilinear")),
    ((1, 2, 5, 7), dict(scale_factor=(1.7, 0.6), mode="bilinear", align_corners=True)),
    ((1, 2, 5, 7), dict(size=(9, 13), mode="bicubic")),
    ((1, 2, 5, 7), dict(size=(5, 11), mode="bicubic", align_corners=True)),  # H kept: 4 taps
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 7), mode="trilinear")),
    ((1, 2, 9, 7), dict(size=(4, 3), mode="area")),
    ((2, 3, 11), dict(size=4, mode="area")),
    ((1, 2, 5, 7), dict(size=(9, 4), mode="nearest")),
    ((1, 2, 5), dict(scale_factor=2.0001, mode="nearest")),  # torch's out = 2*in shortcut
    ((2, 3, 7), dict(size=12, mode="nearest-exact")),
    ((1, 2, 3, 4, 5), dict(scale_factor=(2, 1.5, 0.5), mode="nearest")),
    ((1, 2, 9, 11), dict(size=(4, 5), mode="bilinear", antialias=True)),
    ((1, 2, 11, 13), dict(size=(5, 6), mode="bicubic", antialias=True)),
    ((1, 1, 6, 7), dict(size=(6, 3), mode="bilinear", antialias=True)),  # H kept: still a window
]


def _torch_rows(shape, kw):
    """|J| (outputs, inputs) of one (n, c) plane, from torch's own backward of each one-hot g."""
    sp = shape[2:]
    x = torch.zeros((1, 1, *sp), requires_grad=True)
    osp = TF.interpolate(x, **kw).shape[2:]
    n_out = int(np.prod(osp))
    xb = torch.zeros((n_out, 1, *sp), requires_grad=True)
    y = TF.interpolate(xb, **kw)
    y.backward(torch.eye(n_out).reshape(y.shape))
    return np.abs(xb.grad.reshape(n_out, -1).double().numpy())


@pytest.mark.parametrize("shape,kw", INTERP_BACK, ids=[f"{s}-{k}" for s, k in INTERP_BACK])
def test_interpolate_backward_nonfinite(rng, shape, kw):
    x = rng.standard_normal(shape).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    yt = TF.interpolate(xt, **kw)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    flat = g.reshape(-1)
    spots = rng.choice(flat.size, size=4, replace=False)
    flat[spots] = [np.nan, np.nan, np.inf, -np.inf]
    yt.backward(torch.tensor(g))
    want = xt.grad.numpy()
    xp = pr.tensor(x, requires_grad=True)
    F.interpolate(xp, **kw).backward(pr.tensor(g))
    got = xp.grad.numpy()
    for name, test in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        np.testing.assert_array_equal(test(got), test(want), err_msg=f"{name} positions")
    # finite elements: a sum of at most n products g·w (n the most outputs reading one input),
    # within (n + rank + 2)·u·Σ|g||w| in f32, Σ|g||w| from torch's |J| in float64
    J = _torch_rows(shape, kw)
    n = int((J > 0).sum(0).max())
    gf = np.where(np.isfinite(g), g, 0.0).reshape(shape[0] * shape[1], -1).astype(np.float64)
    mag = (np.abs(gf) @ J).reshape(shape)
    fin = np.isfinite(want)
    tol = 2 * (n + len(shape) + 2) * F32_U * mag + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert (err[fin] <= tol[fin]).all(), f"max err {err[fin].max()} tol {tol[fin].min()}"


def test_interpolate_backward_double(rng):
    """The backward stays differentiable (create_graph): its own backward is the resampling."""
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    v = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    res = []
    for mod, fn, mk in ((torch, TF, torch.tensor), (pr, F, pr.tensor)):
        xt = mk(x).requires_grad_()
        y = fn.interpolate(xt, size=(9, 4), mode="bicubic")
        (g,) = mod.autograd.grad((y * y).sum(), xt, create_graph=True)
        (h,) = mod.autograd.grad((g * mk(v)).sum(), xt)
        res.append(np.asarray(h.detach().numpy() if mod is torch else h.numpy(), np.float64))
    # Σ over ≤ 8·4 taps twice (the forward, then its transpose) of products of |y|, |v|, w
    tol = 2 * 64 * F32_U * np.abs(res[0]).max()
    np.testing.assert_allclose(res[1], res[0], atol=tol, rtol=0)


def test_interpolate_backward_split_and_strided(rng, loop_budget):
    """Many outputs a tap (3 -> 40: ~14 each) gathered in several dispatches under a small loop
    budget, from a non-contiguous g, and a float16 g: the same as torch."""
    loop_budget(4)
    x = rng.standard_normal((2, 3, 3, 5)).astype(np.float32)
    g = rng.standard_normal((2, 3, 7, 40)).astype(np.float32)
    for mode in ("nearest", "bilinear", "bicubic"):
        xp = pr.tensor(x, requires_grad=True)
        F.interpolate(xp, size=(40, 7), mode=mode).backward(pr.tensor(g).transpose(-1, -2))
        xt = torch.tensor(x, requires_grad=True)
        TF.interpolate(xt, size=(40, 7), mode=mode).backward(torch.tensor(g).transpose(-1, -2))
        want = xt.grad.numpy()
        # ≤ 16·5 products a sum, |w| ≤ 1.25 a dim
        tol = 2 * (80 + 4) * F32_U * 1.6 * np.abs(g).sum(axis=(2, 3)).max()
        np.testing.assert_allclose(xp.grad.numpy(), want, atol=tol, rtol=0, err_msg=mode)
    h = x.astype(np.float16)
    xp = pr.tensor(h, requires_grad=True)
    F.interpolate(xp, size=(40, 7), mode="bilinear").backward(pr.tensor(g.astype(np.float16)).mT)
    xt = torch.tensor(h, requires_grad=True)
    TF.interpolate(xt, size=(40, 7), mode="bilinear").backward(
        torch.tensor(g.astype(np.float16)).mT
    )
    assert xp.grad.dtype == pr.float16
    # both sum in f32 and round once to f16: one f16 rounding apart, plus the f32 sums' error
    want = xt.grad.float().numpy()
    tol = 2.0**-11 * np.abs(want) + 2 * 84 * F32_U * np.abs(g).sum(axis=(2, 3), keepdims=True)
    assert (np.abs(xp.grad.numpy().astype(np.float32) - want) <= tol).all()


# ---- sin / cos / tan of large arguments: exact argument reduction --------------------------
def _ulps(got, x, fn):
    """|got - fn(x)| in ULPs of the float32 nearest the float64 value."""
    ref = fn(x.astype(np.float64))
    return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref).astype(np.float32))


def test_trig_large_arguments(rng):
    # |x| log-uniform over each decade band up to 3.4e38, both signs; the floats on either side
    # of k·pi/2 (the reduced argument is smallest there); Muller's hardest float for pi/2
    # (16367173·2^72); the largest float
    bands = [(1e-3, 3.2), (3.2, 6400), (6400, 1e6), (1e6, 1e12), (1e12, 1e24), (1e24, 3.4e38)]
    parts = [
        np.exp(rng.uniform(np.log(lo), np.log(hi), 20000)) * rng.choice([-1.0, 1.0], 20000)
        for lo, hi in bands
    ]
    k = rng.integers(1, 3_000_000, 20000).astype(np.float64)
    near = (k * np.pi / 2).astype(np.float32)
    parts += [near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))]
    parts.append(np.array([16367173 * 2.0**72, -(2.0**127) * 1.9999999, 6399.9995, 6400.0]))
    x = np.concatenate(parts).astype(np.float32)
    t = pr.tensor(x)
    # the f64 value rounded once (0.5 ULP) plus the kernels' own error: r carried as a pair
    # (~48 bits) and polynomials whose rounding adds < 0.3 ULP; tan divides two such pairs
    for name, fn, bound in (("sin", np.sin, 1.0), ("cos", np.cos, 1.0), ("tan", np.tan, 1.5)):
        err = _ulps(getattr(pr, name)(t).numpy(), x, fn)
        worst = int(np.argmax(err))
        assert err[worst] <= bound, f"{name}({x[worst]!r}): {err[worst]:.2f} ULP"


def test_trig_special_values():
    x = np.array([0.0, -0.0, 1e-40, -1e-40, np.inf, -np.inf, np.nan], np.float32)
    t = pr.tensor(x)
    for name, fn in (("sin", np.sin), ("cos", np.cos), ("tan", np.tan)):
        got = getattr(pr, name)(t).numpy()
        with np.errstate(invalid="ignore"):
            want = fn(x.astype(np.float64)).astype(np.float32)
        assert np.isnan(got[4:]).all(), name
        # zeros keep their sign; a subnormal is its own sine (or flushed to a zero of its sign)
        ok = (got[:4] == want[:4]) | ((got[:4] == 0) & (np.abs(x[:4]) < 2.0**-126))
        assert ok.all() and (np.signbit(got[:4]) == np.signbit(want[:4])).all(), name


def test_inverse_trig_edges(rng):
    """asin/acos/atan at and next to their domain's ends: ±1 exactly, 1 - 2^-k, just past 1
    (NaN), signed zeros and tiny values, huge and infinite atan arguments."""
    one = np.float32(1)
    near1 = (one - np.exp2(-rng.uniform(1, 24, 4000))).astype(np.float32)
    steps = (one - np.spacing(one) * rng.integers(1, 1 << 16, 4000)).astype(np.float32)
    tiny = np.exp2(-rng.uniform(0, 120, 4000)).astype(np.float32)
    x = np.concatenate([near1, -near1, steps, -steps, tiny, -tiny, [1, -1, 0, -0.0]])
    x = x.astype(np.float32)
    # tests/test_special.py holds these to 4 ULP (mathlib: asin 3.5, acos 3.3, atan 2.4 measured)
    for name, fn in (("asin", np.arcsin), ("acos", np.arccos), ("atan", np.arctan)):
        got = getattr(pr, name)(pr.tensor(x)).numpy()
        err = _ulps(got, x, fn)
        assert err.max() <= 4, f"{name}({x[np.argmax(err)]!r}): {err.max():.2f} ULP"
        assert (np.signbit(got[-4:]) == np.signbit(fn(x[-4:].astype(np.float64)))).all()
    past = pr.tensor(np.array([1.0000001, -1.0000001, np.nan], np.float32))
    assert np.isnan(pr.asin(past).numpy()).all() and np.isnan(pr.acos(past).numpy()).all()
    big = np.concatenate([np.exp2(rng.uniform(24, 127, 2000)), [np.inf]]).astype(np.float32)
    big = np.concatenate([big, -big])
    err = _ulps(pr.atan(pr.tensor(big)).numpy(), big, np.arctan)
    assert err.max() <= 4


# ---- scatter family with an empty index: the input unchanged, as torch ---------------------
EMPTY_INDEX = [(0,), (0, 5), (3, 0), (0, 2, 2)]


@pytest.mark.parametrize("ishape", EMPTY_INDEX, ids=[str(s) for s in EMPTY_INDEX])
def test_scatter_empty_index(rng, ishape):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    src = rng.standard_normal((4, 9)).astype(np.float32)
    calls = [
        ("scatter", lambda m, a, i, s: a.scatter(1, i, s)),
        ("scatter value", lambda m, a, i, s: a.scatter(0, i, 2.5)),
        ("scatter_", lambda m, a, i, s: a.clone().scatter_(-1, i, s)),
        ("scatter_ multiply", lambda m, a, i, s: a.clone().scatter_(0, i, 3.0, reduce="multiply")),
        ("scatter_add", lambda m, a, i, s: a.scatter_add(0, i, s)),
        ("scatter_add_", lambda m, a, i, s: a.clone().scatter_add_(1, i, s)),
        ("gather", lambda m, a, i, s: a.gather(1, i)),
    ]
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            calls.append(
                (
                    f"scatter_reduce {red} {inc}",
                    lambda m, a, i, s, r=red, c=inc: a.scatter_reduce(0, i, s, r, include_self=c),
                )
            )
    for name, fn in calls:
        want = fn(torch, torch.tensor(x), torch.empty(ishape, dtype=torch.int64), torch.tensor(src))
        got = fn(pr, pr.tensor(x), pr.empty(ishape, dtype=pr.int64), pr.tensor(src))
        assert tuple(got.shape) == tuple(want.shape), name
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=name)
    # torch checks the dtype of a non-empty index only
    got = pr.tensor(x).scatter(0, pr.empty(ishape, dtype=pr.float32), 1.0)
    np.testing.assert_array_equal(got.numpy(), x)


def test_scatter_empty_index_grad(rng):
    """The empty scatter's gradients: g for the input, zeros for src (torch's own backward
    raises here: its gather of nothing is not src's shape)."""
    x = pr.tensor(rng.standard_normal((3, 7)).astype(np.float32), requires_grad=True)
    s = pr.tensor(rng.standard_normal((3, 7)).astype(np.float32), requires_grad=True)
    w = rng.standard_normal((3, 7)).astype(np.float32)
    for op in (
        lambda: x.scatter(0, pr.empty((0,), dtype=pr.int64), s),
        lambda: x.scatter_add(1, pr.empty((0, 4), dtype=pr.int64), s),
        lambda: x.scatter_reduce(0, pr.empty((2, 0), dtype=pr.int64), s, "amax"),
    ):
        x.grad = s.grad = None
        (op() * pr.tensor(w)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), w)
        np.testing.assert_array_equal(s.grad.numpy(), np.zeros_like(w))


def test_scatter_index_dtype_errors():
    """A non-empty index of another dtype: torch's text ("scatter(): Expected dtype int32/int64
    for index"; torch before 2.x said int64); an unknown reduce as torch's."""
    x = np.zeros((3, 4), np.float32)
    for dt in ("float32", "int16", "uint8", "bool"):
        idx = np.zeros((1, 4), dt)
        for name, fn in (
            ("scatter", lambda m, i: m.tensor(x).scatter(0, i, 1.0)),
            ("scatter", lambda m, i: m.tensor(x).scatter_add(0, i, m.ones(1, 4))),
            ("scatter", lambda m, i: m.tensor(x).scatter_reduce(0, i, m.ones(1, 4), "sum")),
            ("gather", lambda m, i: m.tensor(x).gather(0, i)),
        ):
            with pytest.raises(RuntimeError) as want:
                fn(torch, torch.tensor(idx))
            with pytest.raises(TypeError, match=f"{name}\\(\\): Expected dtype") as got:
                fn(pr, pr.tensor(idx))
            assert str(want.value) in str(got.value)
    with pytest.raises(ValueError, match="reduce argument must be either add or multiply"):
        pr.zeros(3, 4).scatter(0, pr.zeros(1, 4, dtype=pr.int64), 1.0, reduce="sum")


# ---- matrix_exp: every route differentiates -----------------------------------------------
def _matrix_exp_routes():
    from pyrite.ops import linalg_solve, linalg_top

    return {
        "pr.linalg.matrix_exp": pr.linalg.matrix_exp,
        "pr.matrix_exp": pr.matrix_exp,
        "Tensor.matrix_exp": lambda a: a.matrix_exp(),
        "ops.linalg_top.matrix_exp": linalg_top.matrix_exp,
        # the unwrapped function: its own graph was only the NaN guard (a zero gradient)
        "ops.linalg_solve.matrix_exp": linalg_solve.matrix_exp,
    }


def _expm_abs(blocks, n):
    """exp(|M|) in float64 (torch), M given as {(row block, col block): n x n array}."""
    k = 1 + max(max(ij) for ij in blocks)
    M = np.zeros(blocks[(0, 0)].shape[:-2] + (k * n, k * n))
    for (i, j), b in blocks.items():
        M[..., i * n : (i + 1) * n, j * n : (j + 1) * n] = np.abs(b)
    return torch.linalg.matrix_exp(torch.tensor(M)).numpy()


MEXP = [((1, 1), 1.0), ((1, 1), 30.0), ((3, 3), 1.0), ((3, 3), 12.0), ((5, 5), 0.7)]
MEXP += [((2, 3, 4, 4), 4.0)]


@pytest.mark.parametrize("shape,scale", MEXP, ids=[f"{s}x{c}" for s, c in MEXP])
def test_matrix_exp_gradient_routes(rng, shape, scale):
    n = shape[-1]
    A = (rng.standard_normal(shape) * scale / np.sqrt(n)).astype(np.float32)
    if len(shape) > 2:
        A[0, 0] *= 0.01  # the batch's matrices take different numbers of squarings
    W = rng.standard_normal(shape).astype(np.float32)
    at = torch.tensor(A.astype(np.float64), requires_grad=True)
    (torch.linalg.matrix_exp(at) * torch.tensor(W.astype(np.float64))).sum().backward()
    want = at.grad.numpy()
    # gA = the upper-right block of exp(M), M = [[Aᵀ, W], [0, Aᵀ]], an f32 Padé [7/7] and s
    # squarings: each term of its series is bounded elementwise by exp(|M|)'s, so the error
    # is ~(2n + s)·u times exp(|M|)'s block
    At = np.swapaxes(A, -1, -2)
    mag = _expm_abs({(0, 0): At, (0, 1): W, (1, 1): At}, n)[..., :n, n:]
    sq = np.ceil(np.log2(max(2 * np.abs(A).sum(-2).max() + np.abs(W).sum(-2).max(), 1.0)))
    tol = 16 * (2 * n + sq + 8) * F32_U * mag
    for name, fn in _matrix_exp_routes().items():
        a = pr.tensor(A, requires_grad=True)
        out = fn(a)
        assert out.grad_fn is not None and out.grad_fn.name == "matrix_exp", name
        (out * pr.tensor(W)).sum().backward()
        err = np.abs(a.grad.numpy() - want)
        assert (err <= tol).all(), f"{name}: {err.max()} (tol {tol.min()})"


def test_matrix_exp_double_backward(rng):
    A = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
    W = rng.standard_normal((3, 3)).astype(np.float32)
    V = rng.standard_normal((3, 3)).astype(np.float32)
    res = []
    for mod, fn in ((torch, torch.linalg.matrix_exp), (pr, pr.linalg.matrix_exp)):
        cast = (lambda m: m.astype(np.float64)) if mod is torch else (lambda m: m)
        a = mod.tensor(cast(A)).requires_grad_()
        (g,) = mod.autograd.grad((fn(a) * mod.tensor(cast(W))).sum(), a, create_graph=True)
        (h,) = mod.autograd.grad((g * mod.tensor(cast(V))).sum(), a)
        res.append(np.asarray(h.detach().numpy() if mod is torch else h.numpy(), np.float64))
    # the second derivative is a block of the exponential of a block matrix with Aᵀ on the
    # diagonal and W, V above it (the backward's exp of [[Aᵀ, W], [0, Aᵀ]], differentiated):
    # bounded as above by the same block of exp(|.|), two exponentials deep
    At = A.T
    blocks = {(k, k): At for k in range(4)}
    blocks.update({(0, 1): W, (2, 3): W, (0, 2): V, (1, 3): V})
    mag = _expm_abs(blocks, 3)[:3, 9:]
    tol = 16 * 2 * (12 + 8) * F32_U * mag
    assert (np.abs(res[1] - res[0]) <= tol).all()


# ---- mean(dtype=half): the f32 mean rounded once, as torch CPU ------------------------------
MEAN_CASES = [
    ("float32", "float16"),
    ("float32", "bfloat16"),
    ("float16", "bfloat16"),
    ("bfloat16", "float16"),
    ("float16", "float16"),
    ("int32", "float16"),
]


@pytest.mark.parametrize("src,dst", MEAN_CASES, ids=[f"{a}-{b}" for a, b in MEAN_CASES])
def test_mean_half_dtype(rng, src, dst):
    tdt, pdt = getattr(torch, dst), getattr(pr, dst)
    for shape, dim in (((257,), None), ((13, 31), 1), ((37, 5), 0), ((3, 7, 11), (0, 2))):
        x = rng.standard_normal(shape) * rng.choice([1.0, 30.0]) + rng.choice([0.0, 2.5])
        x = np.round(x * 10) if src == "int32" else x
        xt = torch.tensor(x).to(getattr(torch, src))
        xp = pr.tensor(x.astype(np.float32)).to(getattr(pr, src))
        got = (xp.mean(dtype=pdt) if dim is None else xp.mean(dim, dtype=pdt)).float().numpy()
        assert (xp.mean(dtype=pdt) if dim is None else xp.mean(dim, dtype=pdt)).dtype == pdt
        # the input's own values (no rounding to dst first), summed in f32 in any order and
        # divided: within d = ((n - 1)·Σ|x|/n + |mean|)·2^-24 of the float64 mean; one rounding
        # to dst then gives round(m - d) or round(m + d) (rounding is monotone), nothing else
        xv = xt.double().numpy()
        axes = tuple(range(xv.ndim)) if dim is None else dim
        n = np.prod([xv.shape[a] for a in np.atleast_1d(axes)])
        m = xv.mean(axis=axes)
        d = ((n - 1) * np.abs(xv).mean(axis=axes) + np.abs(m)) * F32_U

        def rnd(v):
            return torch.tensor(v).to(tdt).double().numpy()

        lo, hi = rnd(m - d), rnd(m + d)
        assert ((got >= lo) & (got <= hi)).all(), f"{shape} {dim}"
        # and torch's own answer, wherever the bound leaves one choice
        want = (xt.mean(dtype=tdt) if dim is None else xt.mean(dim, dtype=tdt)).double().numpy()
        np.testing.assert_array_equal(np.where(lo == hi, got, 0), np.where(lo == hi, want, 0))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("case", ["norm2", "norm3", "cosine"])
def test_norm_backward_of_small_half_vectors(dtype, case, rng):
    """The gradient of a p-norm of small half vectors (norms near 1e-4 .. 1e-3, so g / norm
    overflowed float16) is taken in float32 and rounded once: finite, and torch's within the
    half's rounding, for x.norm(dim=1), p = 3, and cosine_similarity (found by the module hunt:
    inf gradients where torch's are finite)."""
    tdt, pdt = getattr(torch, dtype), getattr(pr, dtype)
    x = (rng.standard_normal((3, 41)) * 1e-4).astype(np.float32)
    y = (rng.standard_normal((3, 41)) * 1e-3).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    u = 2.0**-11 if dtype == "float16" else 2.0**-8
    fns = {
        "norm2": (lambda a, b: a.norm(dim=1), lambda a, b: a.norm(dim=1)),
        "norm3": (lambda a, b: a.norm(p=3, dim=1), lambda a, b: a.norm(p=3, dim=1)),
        "cosine": (F.cosine_similarity, TF.cosine_similarity),
    }
    pf, tf = fns[case]
    pa, pb = pr.tensor(x).to(pdt).requires_grad_(), pr.tensor(y).to(pdt)
    (pf(pa, pb).float() * pr.tensor(w)).sum().backward()
    # the reference: float64 on the same (half-rounded) values; torch's own float16 p = 3
    # gradient is NaN / inf here (it overflows in the half type)
    ta = torch.tensor(x).to(tdt).double().requires_grad_()
    tb = torch.tensor(y).to(tdt).double()
    (tf(ta, tb) * torch.tensor(w, dtype=torch.float64)).sum().backward()
    got, ref = pa.grad.float().numpy(), ta.grad.numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=8 * u, atol=8 * u * np.abs(ref).max())
