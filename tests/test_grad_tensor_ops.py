"""Backward rules of the tensor ops outside the elementwise engine (ops/elementwise.py's where,
clamp, lerp, addcmul/addcdiv, nan_to_num, softplus; the activations of nn/_activation.py; ...),
each against torch's autograd on the same random inputs: awkward sizes (primes, 1), inputs made
non-contiguous by a transpose before the op, away from the points where the op is not
differentiable, with a few gradient penalties (double backward) through the rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.testing.tolerance import unit_roundoff

U = unit_roundoff("float32")


def _f32(rng, *shape, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


def check(rng, fn_pr, fn_torch, arrays, ulps=16, terms=1, transpose=False, create_graph=False):
    """Compare d(sum(w * fn(inputs)))/d(inputs) with torch's for random weights w.

    The tolerance: `ulps` roundings relative to each gradient element, plus `terms` (how many
    products a gradient element sums) roundings of the largest gradient magnitude absolute,
    for the cancellation in sums. `transpose`: the first input reaches the op as a transposed
    (non-contiguous) view."""
    P = [pr.tensor(a).requires_grad_() for a in arrays]
    T = [torch.tensor(a, requires_grad=True) for a in arrays]
    vp = [p.transpose(0, -1) if transpose and i == 0 else p for i, p in enumerate(P)]
    vt = [t.transpose(0, -1) if transpose and i == 0 else t for i, t in enumerate(T)]
    out_p, out_t = fn_pr(*vp), fn_torch(*vt)
    assert tuple(out_p.shape) == tuple(out_t.shape)
    w = rng.standard_normal(tuple(out_t.shape)).astype(np.float32)
    lp, lt = (out_p * pr.tensor(w)).sum(), (out_t * torch.tensor(w)).sum()
    if create_graph:
        # a gradient penalty: sum(grad²) differentiated again
        gp = pr.autograd.grad(lp, P, create_graph=True)
        gt = torch.autograd.grad(lt, T, create_graph=True)
        sum(((g * g).sum() for g in gp), pr.tensor(0.0)).backward()
        sum((g * g).sum() for g in gt).backward()
    else:
        lp.backward()
        lt.backward()
    for i, (p, t) in enumerate(zip(P, T)):
        if t.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), f"input {i}"
            continue
        assert p.grad is not None, f"input {i} got no gradient"
        want = t.grad.numpy()
        fin = want[np.isfinite(want)]  # (NaN where torch's gradient is NaN: compared as NaN)
        big = float(np.abs(fin).max()) if fin.size else 0.0
        rtol = ulps * 2 * U
        atol = terms * ulps * 2 * U * big + 1e-30
        np.testing.assert_allclose(p.grad.numpy(), want, rtol=rtol, atol=atol, err_msg=f"input {i}")
    return P


# ---- ops/elementwise.py --------------------------------------------------------------------
def test_where_tensor_and_scalar_branches(rng):
    a, b = _f32(rng, 5, 7), _f32(rng, 7)
    m = rng.random((5, 7)) > 0.4
    mp, mt = pr.tensor(m), torch.tensor(m)
    check(rng, lambda x, y: pr.where(mp, x, y), lambda x, y: torch.where(mt, x, y), [a, b])
    check(rng, lambda x: pr.where(mp, 1.5, x), lambda x: torch.where(mt, 1.5, x), [a])
    check(rng, lambda x: x.where(mp.T, 0.0), lambda x: x.where(mt.T, 0.0), [a], transpose=True)


@pytest.mark.parametrize("lo,hi", [(-0.5, 0.7), (-0.3, None), (None, 0.2), (0.4, -0.4)], ids=str)
def test_clamp_number_bounds(rng, lo, hi):
    a = _f32(rng, 11, 3)
    check(rng, lambda x: pr.clamp(x, lo, hi), lambda x: torch.clamp(x, lo, hi), [a])
    check(rng, lambda x: x.clip(lo, hi), lambda x: x.clip(lo, hi), [a], transpose=True)


def test_clamp_bounds_on_the_boundary_pass_the_gradient(rng):
    # torch: x == min or x == max passes the gradient (not the half of maximum's tie rule)
    a = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0], np.float32)
    check(rng, lambda x: x.clamp(-0.5, 1.0), lambda x: x.clamp(-0.5, 1.0), [a])


def test_clamp_tensor_bounds(rng):
    a, lo, hi = _f32(rng, 5, 7), _f32(rng, 5, 7, shift=-0.5), _f32(rng, 7, shift=0.5)
    check(rng, pr.clamp, torch.clamp, [a, lo, hi])  # some min > max: max wins
    check(rng, lambda x, m: pr.clamp_min(x, m), lambda x, m: torch.clamp_min(x, m), [a, lo])
    check(rng, lambda x, m: pr.clamp(x, max=m), lambda x, m: torch.clamp(x, max=m), [a, hi])
    check(
        rng,
        lambda x, m: pr.clamp(x, -0.2, m),
        lambda x, m: torch.clamp(x, torch.tensor(-0.2), m),
        [a, hi],
    )


def test_lerp_addcmul_addcdiv(rng):
    a, b, w = _f32(rng, 5, 7), _f32(rng, 5, 7), _f32(rng, 1, 7)
    check(rng, pr.lerp, torch.lerp, [a, b, w])
    check(rng, lambda x, y: x.lerp(y, 0.3), lambda x, y: x.lerp(y, 0.3), [a, b.T], transpose=True)
    c = _f32(rng, 7, shift=3.0)
    for fp, ft in ((pr.addcmul, torch.addcmul), (pr.addcdiv, torch.addcdiv)):
        check(
            rng,
            lambda x, y, z: fp(x, y, z, value=0.7),
            lambda x, y, z: ft(x, y, z, value=0.7),
            [a, b, c],
        )
    # the in-place methods record too (input 0 is not read by their rules)
    check(
        rng,
        lambda x, y, z: (x * 1).addcmul_(y, z, value=-2),
        lambda x, y, z: (x * 1).addcmul_(y, z, value=-2),
        [a, b, c],
    )
    check(
        rng,
        lambda x, y, z: (x * 1).addcdiv_(y, z),
        lambda x, y, z: (x * 1).addcdiv_(y, z),
        [a, b, c],
    )


def test_nan_to_num_softplus_round(rng):
    a = _f32(rng, 13)
    a[[0, 3]] = 0.0  # log(0) = -inf, log(<0) = nan: no gradient there
    check(rng, lambda x: pr.nan_to_num(pr.log(x)), lambda x: torch.nan_to_num(torch.log(x)), [a])
    check(
        rng,
        lambda x: pr.nan_to_num(x / 0.0, nan=1.0, posinf=2.0),
        lambda x: torch.nan_to_num(x / 0.0, nan=1.0, posinf=2.0),
        [_f32(rng, 3, 5)],
    )
    s = _f32(rng, 7, 3, scale=4.0)
    check(rng, pr.nn.functional.softplus, TF.softplus, [s], transpose=True)
    check(rng, lambda x: F.softplus(x, 2.0, 3.0), lambda x: TF.softplus(x, 2.0, 3.0), [s])
    check(rng, lambda x: pr.round(x, decimals=1), lambda x: torch.round(x, decimals=1), [s])


def test_double_backward_through_where_clamp_lerp(rng):
    a, b = _f32(rng, 5, 3), _f32(rng, 5, 3)
    m = rng.random((5, 3)) > 0.5
    mp, mt = pr.tensor(m), torch.tensor(m)
    check(
        rng,
        lambda x, y: pr.where(mp, x * x, y.sin()).clamp(-1.0, 2.0) * x,
        lambda x, y: torch.where(mt, x * x, y.sin()).clamp(-1.0, 2.0) * x,
        [a, b],
        create_graph=True,
    )
    check(
        rng,
        lambda x, y: pr.lerp(x, y, x),
        lambda x, y: torch.lerp(x, y, x),
        [a, b],
        create_graph=True,
    )


# ---- nn/_activation.py ---------------------------------------------------------------------
ACTS = [
    ("leaky_relu", dict(negative_slope=0.2), True),
    ("leaky_relu", dict(negative_slope=-0.3), False),
    ("elu", dict(alpha=0.7), True),
    ("selu", {}, True),
    ("celu", dict(alpha=1.3), True),
    ("hardtanh", dict(min_val=-1.5, max_val=2.0), True),
    ("relu6", {}, True),
    ("hardswish", {}, True),
    ("hardsigmoid", {}, True),
    ("threshold", dict(threshold=0.3, value=-2.0), True),
    ("logsigmoid", {}, False),
    ("softsign", {}, False),
    ("tanhshrink", {}, False),
    ("softshrink", dict(lambd=0.6), False),
    ("hardshrink", dict(lambd=0.6), False),
    # through the elementwise engine
    ("relu", {}, True),
    ("gelu", {}, False),
    ("gelu", dict(approximate="tanh"), False),
    ("silu", {}, True),
    ("mish", {}, True),
    ("softplus", dict(beta=0.5), False),
    ("sigmoid", {}, False),
    ("tanh", {}, False),
]


def _away_from_kinks(rng, shape):
    # every kink these have is at 0, ±3, ±lambd, a bound or the threshold: keep a margin
    a = _f32(rng, *shape, scale=3.0)
    for k in (0.0, 3.0, -3.0, 0.6, -0.6, 0.3, -1.5, 2.0, 6.0, 1.0, -1.0):
        near = np.abs(a - k) < 1e-2
        a[near] = k + 0.05
    return a


@pytest.mark.parametrize("name,kw,has_inplace", ACTS, ids=lambda v: str(v))
def test_activation(rng, name, kw, has_inplace):
    a = _away_from_kinks(rng, (7, 11))
    fp, ft = getattr(F, name), getattr(TF, name)
    check(rng, lambda x: fp(x, **kw), lambda x: ft(x, **kw), [a], ulps=32, transpose=True)
    if has_inplace:
        check(
            rng,
            lambda x: fp(x * 1, **kw, inplace=True),
            lambda x: ft(x * 1, **kw, inplace=True),
            [a],
            ulps=32,
        )


@pytest.mark.parametrize("name", ["elu", "selu", "softsign", "logsigmoid", "hardswish"])
def test_activation_double_backward(rng, name):
    a = _away_from_kinks(rng, (3, 5))
    fp, ft = getattr(F, name), getattr(TF, name)
    check(rng, fp, ft, [a], ulps=64, create_graph=True)


def test_inplace_activation_on_leaf_raises(rng):
    x = pr.tensor(_f32(rng, 4)).requires_grad_()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.leaky_relu(x, inplace=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.elu_(x)


def test_glu_and_prelu(rng):
    check(rng, lambda x: F.glu(x, 0), lambda x: TF.glu(x, 0), [_f32(rng, 5, 6)], transpose=True)
    check(rng, F.glu, TF.glu, [_f32(rng, 3, 1, 4)], create_graph=True)
    x = _away_from_kinks(rng, (2, 3, 5))
    for w in (_f32(rng, 3), _f32(rng, 1)):
        check(rng, F.prelu, TF.prelu, [x, w], terms=10)
    check(rng, F.prelu, TF.prelu, [_away_from_kinks(rng, (7,)), _f32(rng, 1)], terms=7)


def test_rrelu_training_gradient_is_its_drawn_slope(rng):
    a = _away_from_kinks(rng, (5, 9))
    x = pr.tensor(a).requires_grad_()
    y = F.rrelu(x, 0.1, 0.4, training=True)
    y.sum().backward()
    yn = y.detach().numpy()
    want = np.where(a >= 0, 1.0, yn / np.where(a >= 0, 1.0, a))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=8 * U)
    assert np.all((want >= 0.1 - 1e-6) & (want <= 1.0))


# ---- ops/scatter.py and ops/indexing.py ------------------------------------------------------
def _idx(a):
    return pr.tensor(np.asarray(a).astype(np.int32)), torch.tensor(np.asarray(a).astype(np.int64))


def test_gather_scatter_scatter_add(rng):
    a = _f32(rng, 5, 7)
    ip, it = _idx(rng.integers(0, 5, (3, 7)))  # repeated indices: gather's gradient adds up
    check(rng, lambda x: x.gather(0, ip), lambda x: x.gather(0, it), [a])
    jp, jt = _idx(rng.integers(0, 5, (7, 2)))
    check(rng, lambda x: x.gather(1, jp), lambda x: x.gather(1, jt), [a], transpose=True)
    # scatter: distinct indices per column (with repeats torch leaves the winner unspecified)
    pp, pt = _idx(np.stack([rng.permutation(5)[:3] for _ in range(7)], 1))
    src = _f32(rng, 3, 7)
    check(rng, lambda x, s: x.scatter(0, pp, s), lambda x, s: x.scatter(0, pt, s), [a, src])
    check(rng, lambda x: x.scatter(0, pp, 2.0), lambda x: x.scatter(0, pt, 2.0), [a])
    check(
        rng,
        lambda x, s: pr.scatter(x, 0, pp, value=-1.0) * s.sum(),
        lambda x, s: torch.scatter(x, 0, pt, value=-1.0) * s.sum(),
        [a, src],
    )
    check(rng, lambda x, s: x.scatter_add(0, ip, s), lambda x, s: x.scatter_add(0, it, s), [a, src])
    check(
        rng,
        lambda x, s: (x * 1).scatter_add_(0, ip, s),
        lambda x, s: (x * 1).scatter_add_(0, it, s),
        [a, src],
    )
    # twice differentiable: a gradient penalty through gather and its rule (scatter_add)
    check(
        rng,
        lambda x: x.gather(0, ip) ** 3,
        lambda x: x.gather(0, it) ** 3,
        [a],
        create_graph=True,
    )


def test_index_select_add_copy_fill(rng):
    a = _f32(rng, 5, 7)
    ip, it = _idx([4, 0, 4, 2])
    check(rng, lambda x: x.index_select(0, ip), lambda x: x.index_select(0, it), [a])
    check(
        rng, lambda x: x.index_select(1, ip), lambda x: x.index_select(1, it), [a], transpose=True
    )
    s = _f32(rng, 4, 7)
    check(
        rng,
        lambda x, s: x.index_add(0, ip, s, alpha=2.0),
        lambda x, s: x.index_add(0, it, s, alpha=2.0),
        [a, s],
    )
    check(
        rng,
        lambda x, s: (x * 1).index_add_(0, ip, s),
        lambda x, s: (x * 1).index_add_(0, it, s),
        [a, s],
    )
    cp, ct = _idx([3, 0, 1])
    check(rng, lambda x, s: x.index_copy(0, cp, s), lambda x, s: x.index_copy(0, ct, s), [a, s[:3]])
    check(rng, lambda x: x.index_fill(1, ip, -1.0), lambda x: x.index_fill(1, it, -1.0), [a])
    v = np.array(0.5, np.float32)
    check(rng, lambda x, v: x.index_fill(1, ip, v), lambda x, v: x.index_fill(1, it, v), [a, v])
    x1 = _f32(rng, 1)
    check(rng, lambda x: x.index_select(0, ip * 0), lambda x: x.index_select(0, it * 0), [x1])


def test_masked_fill_select_scatter(rng):
    a = _f32(rng, 5, 7)
    m = rng.random((5, 7)) > 0.5
    mp, mt = pr.tensor(m), torch.tensor(m)
    check(rng, lambda x: x.masked_fill(mp, 3.0), lambda x: x.masked_fill(mt, 3.0), [a])
    check(
        rng,
        lambda x: x.masked_fill(mp.T, 3.0),
        lambda x: x.masked_fill(mt.T, 3.0),
        [a],
        transpose=True,
    )
    v = np.array(0.5, np.float32)
    check(
        rng, lambda x, v: x.masked_fill(mp, v), lambda x, v: x.masked_fill(mt, v), [a, v], terms=35
    )
    # x broadcast against the mask: its gradient sums over the broadcast rows
    check(rng, lambda x: x.masked_fill(mp, 3.0), lambda x: x.masked_fill(mt, 3.0), [a[:1]], terms=5)
    check(rng, lambda x: x.masked_select(mp), lambda x: x.masked_select(mt), [a])
    check(rng, lambda x: x.masked_select(mp), lambda x: x.masked_select(mt), [a[0]], terms=5)
    src = _f32(rng, 6, 7)  # more elements than the mask selects: the rest get 0
    check(rng, lambda x, s: x.masked_scatter(mp, s), lambda x, s: x.masked_scatter(mt, s), [a, src])
    check(
        rng,
        lambda x, s: (x * 1).masked_fill_(mp, 0.0) + s,
        lambda x, s: (x * 1).masked_fill_(mt, 0.0) + s,
        [a, a],
    )


def test_take_take_along_dim_index_put(rng):
    a = _f32(rng, 5, 7)
    tp, tt = _idx([[0, -1], [34, 3], [3, 3]])  # negative and repeated
    check(rng, lambda x: x.take(tp), lambda x: x.take(tt), [a])
    ap, at = _idx(rng.integers(0, 7, (5, 3)))
    check(rng, lambda x: pr.take_along_dim(x, ap, 1), lambda x: torch.take_along_dim(x, at, 1), [a])
    bp, bt = _idx(rng.integers(0, 7, (1, 3)))  # indices broadcast over the rows
    check(rng, lambda x: pr.take_along_dim(x, bp, 1), lambda x: torch.take_along_dim(x, bt, 1), [a])
    check(rng, lambda x: pr.take_along_dim(x, ap), lambda x: torch.take_along_dim(x, at), [a])
    ip = (pr.tensor(np.array([0, 2, 2], np.int32)), pr.tensor(np.array([1, 3, 3], np.int32)))
    it = (torch.tensor([0, 2, 2]), torch.tensor([1, 3, 3]))
    v = _f32(rng, 3)
    check(
        rng,
        lambda x, v: x.index_put(ip, v, accumulate=True),
        lambda x, v: x.index_put(it, v, accumulate=True),
        [a, v],
    )
    rp, rt = (pr.tensor(np.array([0, 2, 4], np.int32)),), (torch.tensor([0, 2, 4]),)
    row = _f32(rng, 7)  # broadcast over the three rows: its gradient sums them
    check(rng, lambda x, v: x.index_put(rp, v), lambda x, v: x.index_put(rt, v), [a, row], terms=3)
    check(
        rng,
        lambda x, v: (x * 1).index_put_(rp, v),
        lambda x, v: (x * 1).index_put_(rt, v),
        [a, row],
        terms=3,
    )


@pytest.mark.parametrize(
    "kw",
    [{}, dict(padding_idx=3), dict(padding_idx=-1, scale_grad_by_freq=True), dict(max_norm=1.0)],
    ids=str,
)
def test_embedding_weight_gradient(rng, kw):
    e = np.array([[1, 3, 0, 7], [3, 3, 7, 2], [5, 3, 1, 1]])
    ep, et = _idx(e)
    w = _f32(rng, 8, 5)
    # (w * 1: max_norm renormalises weight in place, which a leaf may not be)
    check(
        rng,
        lambda w: F.embedding(ep, w * 1, **kw),
        lambda w: TF.embedding(et, w * 1, **kw),
        [w],
        terms=4,
    )


# ---- ops/reduce.py: scans and norms ----------------------------------------------------------
def test_cumsum(rng):
    a = _f32(rng, 5, 7)
    check(rng, lambda x: x.cumsum(1), lambda x: x.cumsum(1), [a], terms=7)
    check(
        rng, lambda x: pr.cumsum(x, 0), lambda x: torch.cumsum(x, 0), [a], terms=7, transpose=True
    )
    check(rng, lambda x: x.cumsum(0), lambda x: x.cumsum(0), [_f32(rng, 1)])
    check(
        rng,
        lambda x: x.cumsum(0) ** 2,
        lambda x: x.cumsum(0) ** 2,
        [_f32(rng, 11)],
        terms=11,
        create_graph=True,
    )


def test_cumprod_with_and_without_zeros(rng):
    a = _f32(rng, 5, 7, scale=0.5, shift=1.0)
    check(rng, lambda x: x.cumprod(1), lambda x: x.cumprod(1), [a], ulps=64, terms=7)
    z = a.copy()
    z[1, 2] = z[2, 0] = z[2, 4] = z[3, 6] = z[4, 0] = z[4, 1] = 0.0  # one, two, last, first
    check(rng, lambda x: x.cumprod(1), lambda x: x.cumprod(1), [z], ulps=64, terms=7)
    check(
        rng,
        lambda x: x.cumprod(0),
        lambda x: x.cumprod(0),
        [z.T.copy()],
        ulps=64,
        terms=7,
        transpose=True,
    )
    check(
        rng,
        lambda x: x.cumprod(1),
        lambda x: x.cumprod(1),
        [a[:2, :4]],
        ulps=64,
        terms=4,
        create_graph=True,
    )


@pytest.mark.parametrize("p", [2, "fro", 1, 3, 0.5, float("inf"), float("-inf")], ids=str)
def test_norm(rng, p):
    a = _f32(rng, 5, 7)
    check(rng, lambda x: x.norm(p), lambda x: x.norm(p), [a], ulps=32, terms=35)
    check(
        rng,
        lambda x: x.norm(p, dim=1),
        lambda x: x.norm(p, dim=1),
        [a],
        ulps=32,
        terms=7,
        transpose=True,
    )
    check(
        rng,
        lambda x: x.norm(p, dim=(0,), keepdim=True),
        lambda x: x.norm(p, dim=(0,), keepdim=True),
        [a],
        ulps=32,
        terms=5,
    )


def test_linalg_norms_and_zero_norm(rng):
    a = _f32(rng, 5, 7)
    for fp, ft in (
        (
            lambda x: pr.linalg.vector_norm(x, 3, dim=0),
            lambda x: torch.linalg.vector_norm(x, 3, dim=0),
        ),
        (pr.linalg.matrix_norm, torch.linalg.matrix_norm),
        (lambda x: pr.linalg.matrix_norm(x, 1), lambda x: torch.linalg.matrix_norm(x, 1)),
        (
            lambda x: pr.linalg.matrix_norm(x, float("inf")),
            lambda x: torch.linalg.matrix_norm(x, float("inf")),
        ),
        (pr.linalg.norm, torch.linalg.norm),
    ):
        check(rng, fp, ft, [a], ulps=32, terms=35)
    z = a.copy()
    z[2] = 0.0  # a zero row's 2-norm: gradient 0, not NaN
    check(rng, lambda x: x.norm(dim=1), lambda x: x.norm(dim=1), [z], ulps=32, terms=7)
    check(
        rng,
        lambda x: x.norm(dim=1) ** 3,  # (the penalty of the norm itself is constant)
        lambda x: x.norm(dim=1) ** 3,
        [a],
        ulps=64,
        terms=7,
        create_graph=True,
    )


# ---- rearranging: flip, roll, repeat, tile, repeat_interleave, tril/triu, pad, einsum --------
def test_flip_roll_repeat_tile(rng):
    a = _f32(rng, 5, 7)
    check(rng, lambda x: x.flip(0, 1), lambda x: x.flip(0, 1), [a], transpose=True)
    check(rng, pr.fliplr, torch.fliplr, [a])
    check(
        rng,
        lambda x: x.roll((2, -1), (0, 1)),
        lambda x: x.roll((2, -1), (0, 1)),
        [a],
        transpose=True,
    )
    check(rng, lambda x: x.roll(3), lambda x: x.roll(3), [a])
    check(
        rng, lambda x: x.repeat(2, 1, 3), lambda x: x.repeat(2, 1, 3), [a], terms=6, transpose=True
    )
    check(rng, lambda x: x.tile(2), lambda x: x.tile(2), [a], terms=2)
    check(rng, lambda x: x.repeat(4), lambda x: x.repeat(4), [_f32(rng, 1)], terms=4)
    check(
        rng,
        lambda x: x.flip(0).roll(1, 0) ** 2,
        lambda x: x.flip(0).roll(1, 0) ** 2,
        [a],
        create_graph=True,
    )


def test_repeat_interleave_tril_triu(rng):
    a = _f32(rng, 5, 7)
    check(
        rng,
        lambda x: x.repeat_interleave(3, dim=1),
        lambda x: x.repeat_interleave(3, dim=1),
        [a],
        terms=3,
    )
    check(rng, lambda x: x.repeat_interleave(2), lambda x: x.repeat_interleave(2), [a], terms=2)
    rp = pr.tensor(np.array([1, 0, 2, 3, 1], np.int32))
    rt = torch.tensor([1, 0, 2, 3, 1])
    check(
        rng,
        lambda x: x.repeat_interleave(rp, dim=0),
        lambda x: x.repeat_interleave(rt, dim=0),
        [a],
        terms=3,
    )
    check(rng, lambda x: x.tril(1), lambda x: x.tril(1), [a], transpose=True)
    check(rng, lambda x: pr.triu(x, -1), lambda x: torch.triu(x, -1), [_f32(rng, 2, 3, 4)])


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(rng, mode):
    b = _f32(rng, 2, 3, 5, 7)
    for widths in ((2, 3, 1, 4), (-2, 3, 1, -1), (0, 1, 1, 0)):
        check(
            rng,
            lambda x: F.pad(x, widths, mode=mode),
            lambda x: TF.pad(x, widths, mode=mode),
            [b],
            terms=5,
        )
    check(
        rng,
        lambda x: F.pad(x, (1, 2), mode=mode) ** 2,
        lambda x: TF.pad(x, (1, 2), mode=mode) ** 2,
        [b[0, 0]],
        terms=3,
        create_graph=True,
    )


def test_pad_constant_value_and_transposed(rng):
    a = _f32(rng, 5, 7)
    check(
        rng,
        lambda x: F.pad(x, (2, 3), value=1.5),
        lambda x: TF.pad(x, (2, 3), value=1.5),
        [a],
        transpose=True,
    )


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij,jk->ik", [(5, 7), (7, 3)]),
        ("bij,bjk->bik", [(2, 5, 7), (2, 7, 3)]),
        ("ii->", [(5, 5)]),
        ("ii->i", [(5, 5)]),
        ("i,j->ij", [(5,), (3,)]),
        ("ij,jk,k->i", [(5, 7), (7, 3), (3,)]),
        ("...ij->...ji", [(2, 3, 5)]),
        ("ij->", [(5, 7)]),
        ("bi,bi->b", [(3, 7), (1, 7)]),  # a broadcast operand
    ],
)
def test_einsum(rng, eq, shapes):
    arrays = [_f32(rng, *s) for s in shapes]
    fp = lambda *xs: pr.einsum(eq, *xs)  # noqa: E731
    ft = lambda *xs: torch.einsum(eq, *xs)  # noqa: E731
    check(rng, fp, ft, arrays, ulps=32, terms=21)


def test_einsum_double_backward(rng):
    a, b = _f32(rng, 5, 7), _f32(rng, 7, 3)
    check(
        rng,
        lambda x, y: pr.einsum("ij,jk->ik", x, y) ** 2,
        lambda x, y: torch.einsum("ij,jk->ik", x, y) ** 2,
        [a, b],
        ulps=64,
        terms=21,
        create_graph=True,
    )


# ---- sorting.py: values to their indices -----------------------------------------------------
def _distinct(rng, *shape):
    # a permutation of spaced values: no ties (the gradient of a tie depends on the sort order)
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.37 - n * 0.1).astype(np.float32)


def test_sort_topk_kthvalue_median(rng):
    a = _distinct(rng, 5, 7)
    check(rng, lambda x: x.sort(1).values, lambda x: x.sort(1).values, [a], transpose=True)
    check(
        rng, lambda x: x.sort(0, descending=True)[0], lambda x: x.sort(0, descending=True)[0], [a]
    )
    check(rng, pr.msort, torch.msort, [a])
    check(rng, lambda x: x.topk(3).values, lambda x: x.topk(3).values, [a])
    check(
        rng,
        lambda x: x.topk(2, dim=0, largest=False)[0],
        lambda x: x.topk(2, dim=0, largest=False)[0],
        [a],
        transpose=True,
    )
    check(rng, lambda x: x.kthvalue(3, 1).values, lambda x: x.kthvalue(3, 1).values, [a])
    check(
        rng,
        lambda x: x.kthvalue(2, 0, keepdim=True).values,
        lambda x: x.kthvalue(2, 0, keepdim=True).values,
        [a],
    )
    check(rng, lambda x: x.median(), lambda x: x.median(), [a])
    check(rng, lambda x: x.median(1).values, lambda x: x.median(1).values, [a])
    check(
        rng,
        lambda x: x.nanmedian(0, keepdim=True)[0],
        lambda x: x.nanmedian(0, keepdim=True)[0],
        [a],
    )
    check(
        rng,
        lambda x: x.sort(0).values ** 3,
        lambda x: x.sort(0).values ** 3,
        [a[:, 0].copy()],
        create_graph=True,
    )


def test_median_of_ties_shares_the_gradient(rng):
    a = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 2.0], np.float32)
    check(rng, lambda x: x.median(), lambda x: x.median(), [a])
