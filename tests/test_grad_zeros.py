"""prod and cumprod gradients where the input holds zeros, with inf and NaN beside them, against
torch (CPU) on fresh random inputs of awkward sizes.

pyrite divided the output by each element (out / x): 0 / 0 at a zero, inf / inf beside an inf.
torch takes the product of the other elements wherever the tensor has a zero (prod), and masks
each row's cumulative sums at its first zero (cumprod), so its values are not NaN there
([1, 0, inf, 2].prod(): torch's gradient [nan, inf, 0, nan], pyrite's was [nan, inf, nan, nan];
[inf, 0, 2, 0, 5].cumprod(0): torch [nan, inf, 0, 0, 0], pyrite's [nan, nan, 0, 0, 0]). Double
backward through either with a zero in the input gave wrong second derivatives ([2, 0, 0, 3]
.prod(): torch's [0, 9, 6, 0], pyrite's [0, 0, 0, 0]).

Where torch's gradient is NaN and the math's is not (out / x at the inf or NaN itself:
[inf, 2].prod() -> torch [nan, inf], the math [2, inf]), pyrite follows the math (ops/reduce.py
_g_prod, _g_cumprod), and so does the oracle here: torch's gradient with those elements taken
from the term-by-term product of the other factors (tests/test_fuzz_random_shapes.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.test_fuzz_random_shapes import _cumprod_math, _prod_math, _TorchOrMath

INF, NAN = float("inf"), float("nan")
# powers of two, so every product is exact in every dtype and only sums round
VALUES = np.array([0.0, 0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, INF, -INF, NAN], np.float32)
SHAPES = [(1,), (2,), (7,), (3, 5), (1, 6), (4, 1), (2, 3, 5), (5, 2, 1, 3)]
DTYPES = ["float32", "float16", "bfloat16"]
# a few ulp of the dtype: the gradients' only rounding is a cumulative sum of up to 7 terms
TOL = {"float32": 2.0**-20, "float16": 2.0**-8, "bfloat16": 2.0**-5}


def _draw(rng, shape, special: bool):
    if special:  # zeros, infs and NaNs
        return rng.choice(VALUES, size=shape)
    x = rng.choice(VALUES[2:8], size=shape)  # finite, nonzero ...
    x.flat[rng.integers(0, x.size, size=rng.integers(1, 3))] = 0.0  # ... with one or two zeros
    return x


def _pair(a, dtype):
    t = torch.tensor(a).to(getattr(torch, dtype)).requires_grad_()
    p = pr.tensor(a).to(getattr(pr, dtype)).requires_grad_()
    return t, p


def _check(got, want, dtype, what, atol=0):
    got = got.detach().float().numpy()
    want = want.detach().float().numpy()
    assert got.shape == want.shape, what
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=what)
    ok = np.isnan(want) | (got == want)  # (infinities equal)
    bound = TOL[dtype] * np.abs(want) + atol
    with np.errstate(invalid="ignore"):  # (inf - inf where both are inf: `ok` holds them)
        bad = ~ok & ~(np.abs(got.astype(np.float64) - want) <= bound)
    assert not bad.any(), (
        f"{what}: {got[bad]} against {want[bad]} (bound {np.broadcast_to(bound, want.shape)[bad]})"
    )


def _sum_bound(fn, a, w):
    """An f32 rounding bound for d/dx Σ w·fn(x) where that gradient is a sum of signed terms
    (cumprod's: each a product of the others): (n + 2)·2^-24 times the same gradient of the
    terms' magnitudes, Σ |w|·fn(|x|) in float64 (cancellation leaves no elementwise rtol)."""
    t = torch.tensor(np.abs(a), dtype=torch.float64, requires_grad=True)
    y = fn(torch, t)
    wa = torch.tensor(np.abs(w[: y.numel()]).reshape(y.shape), dtype=torch.float64)
    (g,) = torch.autograd.grad((y * wa).sum(), t)
    return (a.size + 2) * 2.0**-24 * g.numpy()


def _grads(fn, a, w, dtype):
    """d/dx Σ w·fn(x) in torch and pyrite."""
    t, p = _pair(a, dtype)
    yt, yp = fn(torch, t), fn(pr, p)
    wt = torch.tensor(w[: yt.numel()].reshape(yt.shape)).to(yt.dtype)
    wp = pr.tensor(w[: yt.numel()].reshape(yt.shape)).to(yp.dtype)
    (gt,) = torch.autograd.grad((yt * wt).sum(), t)
    (gp,) = pr.autograd.grad((yp * wp).sum(), p)
    return gp, gt


def _op(T, t, kind, d=None, keep=False):
    """prod or cumprod; torch's through _TorchOrMath (its gradient, the math's where it is NaN
    and the math's is not)."""
    if kind == "prod":
        prog = (lambda v: v.prod()) if d is None else (lambda v: v.prod(d, keepdim=keep))
        math = lambda v, g: _prod_math(v, g, d, keep)  # noqa: E731
    else:
        prog = lambda v: v.cumprod(d)  # noqa: E731
        math = lambda v, g: _cumprod_math(v, g, d)  # noqa: E731
    return _TorchOrMath.apply(t, prog, math, kind == "cumprod") if T is torch else prog(t)


def _cases(x):
    """(name, fn) for prod over everything, over each dim (with and without keepdim), and
    cumprod along each dim, negative dims included."""
    out = [("prod()", lambda T, t: _op(T, t, "prod"))]
    for d in range(-x.ndim, x.ndim):
        out += [
            (f"prod({d})", lambda T, t, d=d: _op(T, t, "prod", d)),
            (f"prod({d}, keepdim)", lambda T, t, d=d: _op(T, t, "prod", d, True)),
            (f"cumprod({d})", lambda T, t, d=d: _op(T, t, "cumprod", d)),
        ]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("special", [True, False], ids=["inf_nan", "finite"])
def test_prod_cumprod_grad_with_zeros(rng, dtype, special):
    for shape in SHAPES:
        for _ in range(3):
            a = _draw(rng, shape, special)
            w = rng.choice(np.array([1.0, -1.0, 0.5, 2.0], np.float32), size=a.size)
            for name, fn in _cases(a):
                gp, gt = _grads(fn, a, w, dtype)
                _check(gp, gt, dtype, f"{name} of {a.tolist()} ({dtype})")


def test_prod_grad_picks_the_rule_from_the_whole_tensor():
    # a zero in one row sends every row through the exclusive products, as in torch: [inf, 2]
    # gives [2, inf] there (out / x would give [nan, inf], torch's value without the zero)
    a = np.array([[INF, 2.0, 3.0], [1.0, 0.0, 0.0]], np.float32)
    gp, gt = _grads(lambda T, t: T.prod(t, 1), a, np.ones(3, np.float32), "float32")
    np.testing.assert_array_equal(gt.numpy(), [[6.0, INF, INF], [0.0, 0.0, 0.0]])
    _check(gp, gt, "float32", "prod(1)")
    # a whole-tensor prod with two zeros: zeros, even beside an inf (torch's shortcut)
    gp, gt = _grads(
        lambda T, t: T.prod(t),
        np.array([0.0, 0.0, INF], np.float32),
        np.ones(1, np.float32),
        "float32",
    )
    np.testing.assert_array_equal(gp.numpy(), [0.0, 0.0, 0.0])
    _check(gp, gt, "float32", "prod()")


def test_prod_cumprod_grad_of_one_element():
    # one element (or a dim of one): the gradient passes through, even for an inf (not inf / inf;
    # torch's prod(0) of [inf] is NaN there, the math's and pyrite's 3: see _op)
    for a in (np.array([INF], np.float32), np.array([[INF, 0.0]], np.float32)):
        for fn in (lambda T, t: _op(T, t, "cumprod", 0), lambda T, t: _op(T, t, "prod", 0)):
            gp, gt = _grads(fn, a, np.full(2, 3.0, np.float32), "float32")
            _check(gp, gt, "float32", str(a))


@pytest.mark.parametrize(
    "op", ["prod()", "prod(1)", "prod(0, keepdim)", "cumprod(1)", "cumprod(0)"]
)
def test_prod_cumprod_double_backward_with_zeros(rng, op):
    # second derivatives (create_graph=True): torch's exclusive products are differentiable,
    # and its cumprod takes the O(n²) products of the others where x has a zero
    fns = {
        "prod()": lambda T, t: T.prod(t),
        "prod(1)": lambda T, t: T.prod(t, 1),
        "prod(0, keepdim)": lambda T, t: T.prod(t, 0, keepdim=True),
        "cumprod(1)": lambda T, t: T.cumprod(t, 1),
        "cumprod(0)": lambda T, t: T.cumprod(t, 0),
    }
    fn = fns[op]
    for shape in [(3, 4), (1, 7), (5, 2), (2, 9)]:
        for zeros in (0, 1, 2, 3):
            a = rng.choice(VALUES[2:8], size=shape)
            a.flat[rng.choice(a.size, size=min(zeros, a.size), replace=False)] = 0.0
            w = rng.standard_normal(a.size).astype(np.float32)
            v = rng.standard_normal(shape).astype(np.float32)
            t, p = _pair(a, "float32")
            yt, yp = fn(torch, t), fn(pr, p)
            wt = torch.tensor(w[: yt.numel()].reshape(yt.shape))
            wp = pr.tensor(w[: yt.numel()].reshape(yt.shape))
            (gt,) = torch.autograd.grad((yt * wt).sum(), t, create_graph=True)
            (gp,) = pr.autograd.grad((yp * wp).sum(), p, create_graph=True)
            _check(gp, gt, "float32", f"{op} first of {a.tolist()}", _sum_bound(fn, a, w))
            if not gt.requires_grad:  # a dim of one: the gradient is g itself, constant in x
                continue
            (ht,) = torch.autograd.grad((gt * torch.tensor(v)).sum(), t)
            (hp,) = pr.autograd.grad((gp * pr.tensor(v)).sum(), p)
            np.testing.assert_allclose(
                hp.numpy(), ht.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"{op} of {a.tolist()}"
            )


def test_random_draws_have_torchs_zero_gradient():
    """bernoulli (p from the input) and poisson: the draw requires grad where its input does
    and backpropagates zeros into it, as torch's (a loss built only on the draw used to raise
    'does not require grad'); x.bernoulli(0.3) requires grad too, and its backward raises, as
    torch's; under no_grad, or without grad, nothing records."""
    for lib in (torch, pr):
        p = lib.rand(6).requires_grad_()
        for f in (lambda: lib.bernoulli(p), lambda: lib.poisson(p * 3)):  # noqa: B023
            p.grad = None
            out = f()
            assert out.requires_grad, lib
            out.sum().backward()
            assert p.grad is not None and not bool((p.grad != 0).any()), lib
        out = p.bernoulli(0.3)
        assert out.requires_grad
        with pytest.raises((RuntimeError, NotImplementedError), match="bernoulli"):
            out.sum().backward()
        with lib.no_grad():
            assert not lib.bernoulli(p).requires_grad and not lib.poisson(p).requires_grad
        assert not lib.bernoulli(p.detach()).requires_grad
