"""Session 39: known differences from torch made torch's, each checked against torch 2.13 CPU.

1. addmm / addmv / addbmm / baddbmm / addr at alpha = 0 with inf or NaN in the multiplied
   operands. torch's float32 (and float64) addmm, addmv and addbmm go through BLAS, which skips
   the product when alpha is 0: the result is beta·input (zeros at beta = 0), the inf and NaN
   never read. baddbmm does so only from M·K·N = 400 a batch up (below, torch's own loop
   computes beta·input + 0·product, NaN included); addr never skips, nor does any float16 or
   bfloat16 product. At beta = 0 the input is ignored (a NaN or inf in it does not propagate).
2. scaled_dot_product_attention's argument checks, where pyrite was more lenient:
   a. the mask's dtype: bool, float32 or the query's (torch: "Expected attn_mask dtype to be
      bool or float or to match query dtype"; pyrite's float64 is float32, so a float64 mask
      with float32 queries, which torch refuses, cannot be told apart and is taken);
   b. a mask whose leading dims would broadcast the scores larger (torch adds it to the scores
      in place: "output with shape ... doesn't match the broadcast shape");
   c. enable_gqa=True with a 2-D query, key or value (torch: IndexError, dim -3);
   d. grouped-query heads with different key and value head counts, each dividing the query's:
      torch takes them (key and value repeated separately), and refuses counts that do not
      divide ("Number of heads in key and value must divide the number of heads in query").

Every comparison runs torch on the same values (rounded to the dtype) as the oracle, and every
refusal checks that torch refuses the same call.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_attention_fused import _tol

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.errors import ShapeError
from pyrite.testing.tolerance import assert_close, unit_roundoff
from tests.oracle import skip_older_torch

TF = torch.nn.functional
U32 = unit_roundoff("float32")
DTYPES = ["float32", "float16", "bfloat16"]


# ---- helpers -------------------------------------------------------------------------------
def _rounded(a, dt):
    """float64 numpy values rounded to `dt` (both sides see the same values)."""
    return torch.tensor(np.asarray(a, np.float64)).to(getattr(torch, dt)).double().numpy()


def _pair(a, dt):
    """(pyrite tensor, torch tensor) of the same values in dtype `dt`."""
    t = torch.tensor(np.asarray(a, np.float64)).to(getattr(torch, dt))
    return pr.tensor(t.double().numpy().astype(np.float32)).to(getattr(pr, dt)), t


def _np(t):
    return t.detach().float().numpy()


def _poison(rng, a, count):
    """a with `count` of its elements (at least one) set to inf, -inf or NaN, at random places."""
    a = a.copy()
    flat = a.reshape(-1)
    for i in rng.choice(flat.size, size=min(count, flat.size), replace=False):
        flat[i] = (np.inf, -np.inf, np.nan)[int(rng.integers(0, 3))]
    return a


def _product_tol(dt, beta, alpha, c, a, b, k, roundings=1):
    """The bound on |pyrite - torch| for beta·c + alpha·(a @ b), a K-term product: each side is
    within alpha·K·u32·Σ|a||b| of the exact value (f32 accumulation, half inputs too) plus
    `roundings` roundings of the result to dt (half: after the f32 one), so twice that apart."""
    u = unit_roundoff(dt)
    tiny = 2.0**-24 if dt == "float16" else 2.0**-126
    with np.errstate(invalid="ignore"):
        prod = np.nan_to_num(np.abs(a) @ np.abs(b), nan=0.0, posinf=0.0)
        mag = np.abs(beta) * np.nan_to_num(np.abs(c), nan=0.0, posinf=0.0) + abs(alpha) * prod
        one_side = abs(alpha) * k * U32 * prod + roundings * (u + U32) * mag + tiny
    return 2 * one_side


# ---- 1. the addmm family at alpha = 0 --------------------------------------------------------
def _family(rng, op, M, K, N, B=3):
    """(args as float64 numpy, the input's index, the matrix operands' shapes for the bound)."""
    if op == "addmm":
        return [
            rng.standard_normal((M, N)),
            rng.standard_normal((M, K)),
            rng.standard_normal((K, N)),
        ]
    if op == "addmv":
        return [rng.standard_normal(M), rng.standard_normal((M, K)), rng.standard_normal(K)]
    if op == "addbmm":
        c = rng.standard_normal((M, N))
        return [c, rng.standard_normal((B, M, K)), rng.standard_normal((B, K, N))]
    if op == "baddbmm":
        c = rng.standard_normal((B, M, N))
        return [c, rng.standard_normal((B, M, K)), rng.standard_normal((B, K, N))]
    return [rng.standard_normal((M, N)), rng.standard_normal(M), rng.standard_normal(N)]  # addr


def _bound(op, dt, beta, alpha, c, a, b):
    """_product_tol for each op's product (addbmm: a K·B-term sum; addr: one-term products,
    each step rounded to dt on both sides: torch's half addr rounds alpha·v1, then ·v2, then
    beta·c and the sum; pyrite's v1·v2, then ·alpha, beta·c and the sum)."""
    if op == "addmv":
        return _product_tol(dt, beta, alpha, c[:, None], a, b[:, None], a.shape[1])[..., 0]
    if op == "addbmm":
        aa = np.concatenate(list(a), axis=1)  # (M, B·K)
        return _product_tol(dt, beta, alpha, c, aa, np.concatenate(list(b), axis=0), aa.shape[1])
    if op == "addr":
        return _product_tol(dt, beta, alpha, c, a[:, None], b[None, :], 1, roundings=3)
    return _product_tol(dt, beta, alpha, c, a, b, a.shape[-1])


def _run_family(op, dt, vals, beta, alpha):
    ps, ts = zip(*(_pair(v, dt) for v in vals))
    got = getattr(pr, op)(*ps, beta=beta, alpha=alpha)
    want = getattr(torch, op)(*ts, beta=beta, alpha=alpha)
    assert str(got.dtype) == f"pyrite.{dt}"
    return got, want


SIZES = [(1, 1, 1), (3, 5, 4), (7, 13, 11), (1, 399, 1), (1, 400, 1), (19, 1, 21), (20, 1, 20),
         (33, 17, 65)]  # fmt: skip


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["addmm", "addmv", "addbmm", "baddbmm", "addr"])
@pytest.mark.parametrize("M,K,N", SIZES)
def test_alpha_zero_with_inf_and_nan_in_the_operands(rng, op, dt, M, K, N):
    if op == "baddbmm" and dt != "float32":  # (2.13's half baddbmm multiplies: NaN, as pyrite)
        skip_older_torch("skips a large half-type baddbmm's product at alpha = 0")
    vals = _family(rng, op, M, K, N)
    vals[1] = _poison(rng, vals[1], 1 + vals[1].size // 7)
    vals[2] = _poison(rng, vals[2], 1 + vals[2].size // 11)
    vals = [_rounded(v, dt) for v in vals]
    # torch 2.13's half baddbmm multiplies at alpha = 0 (NaN where a poisoned element meets it,
    # as pyrite) on CI's CPUs; on an AVX-512 FP16/BF16 one (2026-12-07) it skipped the product
    # at beta != 0 and returned uninitialized memory at beta = 0. So pyrite is judged there by
    # the product taken, IEEE's result: beta·input (ignored at beta = 0) + 0·(b1 @ b2)
    taken = op == "baddbmm" and dt != "float32"
    for beta in (2.5, 1, -0.75, 0):
        got, want = _run_family(op, dt, vals, beta, 0)
        tol = _bound(op, dt, beta, 0, *vals)
        if taken:
            with np.errstate(invalid="ignore"):
                ieee = 0.0 * np.matmul(vals[1], vals[2]) + (beta * vals[0] if beta else 0.0)
            want = torch.tensor(ieee, dtype=torch.float32)
        assert_close(_np(got), _np(want), atol=tol, msg=f"{op} {dt} {(M, K, N)} beta={beta}")
    # which of them torch skips (the point of the fix): an f32 BLAS product is never read; the
    # others give NaN where a poisoned element meets alpha = 0
    skips = dt == "float32" and op != "addr" and (op != "baddbmm" or M * K * N >= 400)
    assert bool(torch.isnan(want).any()) == (not skips)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", ["addmm", "addmv", "addbmm", "baddbmm", "addr"])
def test_beta_zero_ignores_inf_and_nan_in_the_input(rng, op, dt):
    M, K, N = 6, 9, 5
    vals = _family(rng, op, M, K, N)
    vals[0] = _poison(rng, vals[0], 1 + vals[0].size // 3)
    vals = [_rounded(v, dt) for v in vals]
    for alpha in (1.5, 1, 0, -2):
        got, want = _run_family(op, dt, vals, 0, alpha)
        assert not torch.isnan(want).any()
        tol = _bound(op, dt, 0, alpha, *vals)
        assert_close(_np(got), _np(want), atol=tol, msg=f"{op} {dt} alpha={alpha}")


@pytest.mark.parametrize("dt", DTYPES)
def test_alpha_zero_in_place_out_and_method_forms(rng, dt):
    """x.addmm_ / addmv_ / addbmm_ / baddbmm_, torch.addmv_ and out=: the same rule (a bf16
    tensor's product widened to float32 must not be skipped as a float32 one is)."""
    M, K, N, B = 7, 23, 5, 2  # (baddbmm: 805 >= 400, BLAS in torch)
    a = _rounded(_poison(rng, rng.standard_normal((M, K)), 4), dt)
    bm = _rounded(_poison(rng, rng.standard_normal((B, M, K)), 3), dt)
    v = _rounded(_poison(rng, rng.standard_normal(K), 2), dt)
    b, b2 = _rounded(rng.standard_normal((K, N)), dt), _rounded(rng.standard_normal((B, K, N)), dt)
    c, c3 = _rounded(rng.standard_normal((M, N)), dt), _rounded(rng.standard_normal((B, M, N)), dt)
    cases = [("addmm_", c, (a, b)), ("addmv_", c[:, 0].copy(), (a, v)),
             ("addbmm_", c, (bm, b2)), ("baddbmm_", c3, (bm, b2))]  # fmt: skip
    for name, x, operands in cases:
        px, tx = _pair(x, dt)
        ops = [_pair(o, dt) for o in operands]
        getattr(px, name)(*(p for p, _ in ops), beta=-1.5, alpha=0)
        getattr(tx, name)(*(t for _, t in ops), beta=-1.5, alpha=0)
        assert_close(_np(px), _np(tx), atol=4 * unit_roundoff(dt) * np.abs(1.5 * x), msg=name)
    px, tx = _pair(c[:, 0].copy(), dt)
    (pa, ta), (pv, tv) = _pair(a, dt), _pair(v, dt)
    pr.addmv_(px, pa, pv, beta=3, alpha=0)
    torch.addmv_(tx, ta, tv, beta=3, alpha=0)
    assert_close(_np(px), _np(tx), atol=4 * unit_roundoff(dt) * np.abs(3 * c[:, 0]), msg="addmv_")
    (pc, tc), (pb, tb) = _pair(c, dt), _pair(b, dt)
    po, to = _pair(np.zeros((M, N)), dt)
    pr.addmm(pc, pa, pb, beta=0.5, alpha=0, out=po)
    torch.addmm(tc, ta, tb, beta=0.5, alpha=0, out=to)
    assert_close(_np(po), _np(to), atol=4 * unit_roundoff(dt) * np.abs(c), msg="out=")


def test_alpha_zero_gradients_as_torch(rng):
    """The skipped product still has torch's gradients: beta·g for the input, alpha·(g @ m2ᵀ)
    (NaN where m2's inf meets alpha = 0) for the operands."""
    M, K, N, B = 5, 13, 7, 3  # (baddbmm: 455 >= 400, BLAS in torch)
    for op in ("addmm", "baddbmm", "addbmm", "addmv"):
        vals = _family(rng, op, M, K, N, B)
        vals[2] = _poison(rng, vals[2], 2)
        ps = [pr.tensor(x.astype(np.float32)).requires_grad_() for x in vals]
        ts = [torch.tensor(x.astype(np.float32)).requires_grad_() for x in vals]
        got = getattr(pr, op)(*ps, beta=0.75, alpha=0)
        want = getattr(torch, op)(*ts, beta=0.75, alpha=0)
        g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        got.backward(pr.tensor(g))
        want.backward(torch.tensor(g))
        assert_close(_np(got), _np(want), atol=2 * U32 * np.abs(0.75 * vals[0]), msg=op)
        for name, p, t in zip(("input", "1", "2"), ps, ts):
            tol = 4 * K * B * U32 * max(1.0, float(np.nanmax(np.abs(_np(t.grad)))))
            assert_close(_np(p.grad), _np(t.grad), atol=tol, msg=f"{op}: grad {name}")


# ---- 2a. the mask's dtype ----------------------------------------------------------------------
@pytest.mark.parametrize("qdt", DTYPES)
@pytest.mark.parametrize("mdt", ["float32", "float16", "bfloat16", "bool"])
def test_mask_dtype_as_torch(rng, qdt, mdt):
    L, S, E = 5, 13, 7
    q, k, v = (rng.standard_normal((2, 3, n, E)) for n in (L, S, S))
    (pq, tq), (pk, tk), (pv, tv) = (_pair(x, qdt) for x in (q, k, v))
    if mdt == "bool":
        m = rng.random((L, S)) < 0.7
        m[:, 0] = True
        pm, tm = pr.tensor(m), torch.tensor(m)
    else:
        pm, tm = _pair(rng.standard_normal((L, S)), mdt)
    torch_takes = mdt in ("bool", "float32", qdt)
    if not torch_takes:
        with pytest.raises(RuntimeError, match="attn_mask dtype"):
            TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
        for _ in range(2):  # (a refused call keeps no plan: the second is refused too)
            with pytest.raises(RuntimeError, match="attn_mask") as err:  # (torch's class)
                F.scaled_dot_product_attention(pq, pk, pv, attn_mask=pm)
            assert isinstance(err.value, TypeError)
        return
    want = TF.scaled_dot_product_attention(tq.float(), tk.float(), tv.float(), tm.float()
                                           if mdt != "bool" else tm)  # fmt: skip
    got = F.scaled_dot_product_attention(pq, pk, pv, attn_mask=pm)
    assert str(got.dtype) == f"pyrite.{qdt}"
    a, r = _tol(_np(want), E, S, qdt)
    assert_close(_np(got), _np(want), atol=a, rtol=r)


# ---- 2b. a mask with more (or wider) leading dims than the scores -----------------------------
MASK_SHAPES = [
    # (query lead, key lead, mask shape, torch takes it)
    ((2, 3), (2, 3), (4, 2, 3, 5, 13), False),
    ((2, 3), (2, 3), (1, 2, 3, 5, 13), False),
    ((2, 3), (2, 3), (4, 1, 1, 5, 13), False),
    ((2, 3), (2, 3), (1, 1, 1, 1, 5, 13), False),
    ((2, 3), (2, 3), (2, 3, 5, 13), True),
    ((2, 3), (2, 3), (3, 1, 13), True),
    ((), (), (13,), True),  # (torch refuses (S,) with 4-D operands: its flash check reads dim -2)
    ((3,), (3,), (2, 3, 5, 13), False),
    ((3,), (3,), (1, 3, 5, 13), False),
    ((1, 3), (2, 1), (2, 3, 5, 13), True),  # (the scores are (2, 3) from q and k together)
    ((1, 3), (1, 1), (2, 3, 5, 13), False),
    ((), (), (2, 5, 13), False),
    ((), (), (1, 5, 13), False),
    ((), (), (5, 13), True),
    ((3,), (2, 3), (1, 2, 3, 5, 13), False),
]


@pytest.mark.parametrize("mask_dtype", ["bool", "float32"])
@pytest.mark.parametrize("lead_q,lead_k,ms,takes", MASK_SHAPES)
def test_mask_leading_dims_as_torch(rng, lead_q, lead_k, ms, takes, mask_dtype):
    L, S, E = 5, 13, 6
    q = rng.standard_normal((*lead_q, L, E)).astype(np.float32)
    k, v = (rng.standard_normal((*lead_k, S, E)).astype(np.float32) for _ in range(2))
    if mask_dtype == "bool":
        m = rng.random(ms) < 0.7
        m[..., 0] = True
    else:
        m = rng.standard_normal(ms).astype(np.float32)
    ps = [pr.tensor(x) for x in (q, k, v, m)]
    ts = [torch.tensor(x) for x in (q, k, v, m)]
    if not takes:
        with pytest.raises(RuntimeError):
            TF.scaled_dot_product_attention(*ts)
        for _ in range(2):
            with pytest.raises(ShapeError, match="attn_mask"):
                F.scaled_dot_product_attention(*ps)
        return
    want = TF.scaled_dot_product_attention(*ts)
    got = F.scaled_dot_product_attention(*ps)
    a, r = _tol(_np(want), E, S)
    assert_close(_np(got), _np(want), atol=a, rtol=r)


def test_mask_does_not_widen_the_scores_with_gradients(rng):
    """The composite (recorded) path refuses it too, and a value with more leading dims still
    widens the output as torch's (the mask is checked against the scores, not the output)."""
    qa = rng.standard_normal((3, 5, 4)).astype(np.float32)
    ka = rng.standard_normal((3, 7, 4)).astype(np.float32)
    va = rng.standard_normal((2, 3, 7, 4)).astype(np.float32)
    q, k, v = pr.tensor(qa).requires_grad_(), pr.tensor(ka), pr.tensor(va)
    tq, tk, tv = torch.tensor(qa).requires_grad_(), torch.tensor(ka), torch.tensor(va)
    m = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    with pytest.raises(RuntimeError):
        TF.scaled_dot_product_attention(tq, tk, tv, torch.tensor(m))
    with pytest.raises(ShapeError, match="attn_mask"):
        F.scaled_dot_product_attention(q, k, v, pr.tensor(m))
    m1 = m[:1, :, :, :][0]  # (3, 5, 7): fits the scores; v widens the output to (2, 3, 5, 4)
    want = TF.scaled_dot_product_attention(tq, tk, tv, torch.tensor(m1))
    got = F.scaled_dot_product_attention(q, k, v, pr.tensor(m1))
    assert tuple(got.shape) == tuple(want.shape) == (2, 3, 5, 4)
    a, r = _tol(_np(want), 4, 7)
    assert_close(_np(got), _np(want), atol=a, rtol=r)


# ---- 2c. enable_gqa on 2-D operands -----------------------------------------------------------
@pytest.mark.parametrize("dims", [(2, 2, 2), (3, 2, 2), (2, 3, 3), (3, 3, 2), (3, 2, 3), (3, 3, 3)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_gqa_needs_a_head_dim(rng, dims, with_mask):
    L, S, E = 4, 9, 5
    shapes = [(3, n, E)[3 - d :] for d, n in zip(dims, (L, S, S))]
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    m = rng.standard_normal((L, S)).astype(np.float32) if with_mask else None
    ps = [pr.tensor(x) for x in arrs] + [None if m is None else pr.tensor(m)]
    ts = [torch.tensor(x) for x in arrs] + [None if m is None else torch.tensor(m)]
    if min(dims) < 3:
        with pytest.raises(IndexError, match="-3"):
            TF.scaled_dot_product_attention(*ts, enable_gqa=True)
        for _ in range(2):
            with pytest.raises(IndexError, match="enable_gqa"):
                F.scaled_dot_product_attention(*ps, enable_gqa=True)
        return
    want = TF.scaled_dot_product_attention(*ts, enable_gqa=True)
    got = F.scaled_dot_product_attention(*ps, enable_gqa=True)
    a, r = _tol(_np(want), E, S)
    assert_close(_np(got), _np(want), atol=a, rtol=r)


# ---- 2d. grouped-query heads: key and value head counts apart ---------------------------------
HEADS = [  # (query, key, value heads)
    (8, 4, 2), (8, 2, 4), (8, 8, 2), (8, 2, 8), (8, 4, 1), (8, 1, 4), (8, 1, 8), (8, 8, 1),
    (6, 3, 2), (6, 2, 3), (4, 2, 2), (4, 4, 4),
]  # fmt: skip
BAD_HEADS = [(8, 3, 3), (8, 4, 3), (8, 3, 1), (8, 8, 16), (8, 16, 16), (8, 16, 8), (6, 4, 2)]


@pytest.mark.parametrize("hq,hk,hv", HEADS)
@pytest.mark.parametrize("kind", ["plain", "causal", "mask", "decode", "ev"])
def test_gqa_key_and_value_heads_may_differ(rng, hq, hk, hv, kind):
    L, S, E = (1 if kind == "decode" else 5), 11, 8
    Ev = 3 if kind == "ev" else E
    q = rng.standard_normal((2, hq, L, E)).astype(np.float32)
    k = rng.standard_normal((2, hk, S, E)).astype(np.float32)
    v = rng.standard_normal((2, hv, S, Ev)).astype(np.float32)
    ps, ts = [pr.tensor(x) for x in (q, k, v)], [torch.tensor(x) for x in (q, k, v)]
    kw = {"enable_gqa": True, "is_causal": kind == "causal"}
    if kind == "mask":
        m = rng.random((2, hq, L, S)) < 0.75
        m[..., 0] = True
        ps.append(pr.tensor(m))
        ts.append(torch.tensor(m))
    want = TF.scaled_dot_product_attention(*ts, **kw)
    for _ in range(2):  # (the second: a kept plan where the call keeps one)
        got = F.scaled_dot_product_attention(*ps, **kw)
        a, r = _tol(_np(want), E, S)
        assert_close(_np(got), _np(want), atol=a, rtol=r, msg=f"{(hq, hk, hv)} {kind}")


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16"])
def test_gqa_key_and_value_heads_differ_half_and_gradients(rng, dt):
    hq, hk, hv, L, S, E = 6, 2, 3, 7, 9, 5
    vals = [rng.standard_normal(s) for s in ((2, hq, L, E), (2, hk, S, E), (2, hv, S, E))]
    pairs = [_pair(x, dt) for x in vals]
    ps = [p.requires_grad_() for p, _ in pairs]
    ts = [t.float().requires_grad_() for _, t in pairs]  # (the f32 reference on the same values)
    want = TF.scaled_dot_product_attention(*ts, enable_gqa=True)
    got = F.scaled_dot_product_attention(*ps, enable_gqa=True)
    g = _rounded(rng.standard_normal(tuple(want.shape)), dt)
    want.backward(torch.tensor(g, dtype=torch.float32))
    got.backward(_pair(g, dt)[0])
    a, r = _tol(_np(want), E, S, dt)
    assert_close(_np(got), _np(want), atol=a, rtol=r, msg="out")
    for name, p, t in zip("qkv", ps, ts):
        assert p.grad is not None and tuple(p.grad.shape) == tuple(t.grad.shape)
        # (test_attention_fused's bound for gradients, with the sums over a key's or a value's
        # group of hq / h query heads: L·hq/h terms)
        a, r = _tol(_np(t.grad), E, max(S, L * hq // min(hk, hv)), dt)
        assert_close(_np(p.grad), _np(t.grad), atol=4 * a, rtol=2 * r, msg=f"grad {name}")


@pytest.mark.parametrize("hq,hk,hv", BAD_HEADS)
def test_gqa_head_counts_that_do_not_divide(rng, hq, hk, hv):
    q = rng.standard_normal((2, hq, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, hk, 6, 8)).astype(np.float32)
    v = rng.standard_normal((2, hv, 6, 8)).astype(np.float32)
    with pytest.raises(RuntimeError, match="Number of heads"):
        TF.scaled_dot_product_attention(*map(torch.tensor, (q, k, v)), enable_gqa=True)
    for _ in range(2):
        with pytest.raises(ShapeError, match="must each divide"):
            F.scaled_dot_product_attention(*map(pr.tensor, (q, k, v)), enable_gqa=True)
