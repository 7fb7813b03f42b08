"""scaled_dot_product_attention's plan cache (nn/_attention._PLANS): a call that needs no
gradient reuses the kernels, info words and grids planned for the same operand layout. A reused
plan must give torch's result on new values, follow every module constant that chooses a
kernel, stay out of the way of gradients, dropout and grouped-query heads, and stay bounded."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_attention_fused import _tol

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.nn import _attention
from pyrite.testing.tolerance import assert_close

TF = torch.nn.functional


def _case(rng, lead, L, S, E, mask):
    q, k, v = (rng.standard_normal((*lead, n, E)).astype(np.float32) for n in (L, S, S))
    m = None
    if mask == "bool":
        m = rng.random((L, S)) < 0.8
        m[:, 0] = True
    elif mask == "float":
        m = rng.standard_normal((1, L, S)).astype(np.float32)
    return q, k, v, m


def _both(q, k, v, m, **kw):
    pm = None if m is None else pr.tensor(m)
    got = F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v), pm, **kw)
    tm = None if m is None else torch.tensor(m)
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                           tm, **kw)  # fmt: skip
    return got.numpy(), want.numpy()


@pytest.mark.parametrize(
    "lead,L,S,E,mask,kw",
    [
        ((2, 3), 1, 700, 64, None, {}),  # decode (split on a GPU)
        ((3,), 5, 37, 24, "bool", {}),
        ((2, 2), 33, 33, 16, "float", {"scale": 0.3}),
        ((1, 4), 17, 29, 8, None, {"is_causal": True}),
    ],
    ids=["decode", "bool", "float-scale", "causal"],
)
def test_reused_plan_is_right_on_new_values(rng, lead, L, S, E, mask, kw):
    """The second and third calls of a layout take the kept plan (no new entry) and still match
    torch on fresh values, masks included."""
    _attention._PLANS.clear()
    for i in range(3):
        q, k, v, m = _case(rng, lead, L, S, E, mask)
        got, want = _both(q, k, v, m, **kw)
        assert_close(got, want, atol=_tol(want, E, S)[0])
        assert len(_attention._PLANS) == 1


def test_views_with_other_strides_get_their_own_plan(rng):
    """A transposed (B, L, H, E) view and a sliced cache have other strides and offsets than the
    contiguous tensors of the same shape: each gets its plan, and each is right."""
    _attention._PLANS.clear()
    q, k, v, _ = _case(rng, (2, 3), 1, 600, 32, None)
    got, want = _both(q, k, v, None)
    assert_close(got, want, atol=_tol(want, 32, 600)[0])
    cache = rng.standard_normal((2, 3, 800, 32)).astype(np.float32)
    pc, tc = pr.tensor(cache), torch.tensor(cache)
    for lo in (0, 200, 200):
        got = F.scaled_dot_product_attention(
            pr.tensor(q), pc[:, :, lo : lo + 600], pc[:, :, 100:700]
        )
        want = TF.scaled_dot_product_attention(
            torch.tensor(q), tc[:, :, lo : lo + 600], tc[:, :, 100:700]
        )
        assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 32, 600)[0])
    assert len(_attention._PLANS) == 3
    qt = rng.standard_normal((2, 5, 3, 32)).astype(np.float32)  # (B, L, H, E)
    got = F.scaled_dot_product_attention(pr.tensor(qt).transpose(1, 2), pr.tensor(k), pr.tensor(v))
    want = TF.scaled_dot_product_attention(torch.tensor(qt).transpose(1, 2), torch.tensor(k),
                                           torch.tensor(v))  # fmt: skip
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 32, 600)[0])
    assert len(_attention._PLANS) == 4


def test_constants_choose_again(rng, monkeypatch):
    """A module constant changed after a plan was kept (as tests and A/B scripts do) gives a new
    plan: forcing the decode kernel on, off (the flash kernel in 2 key ranges) and on again
    dispatches what each setting chooses, and each is right."""
    _attention._PLANS.clear()
    q, k, v, _ = _case(rng, (2,), 1, 300, 16, None)
    pq, pk, pv = pr.tensor(q), pr.tensor(k), pr.tensor(v)
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    dev = backend.current()
    kernels = []
    orig = dev.dispatch

    def capture(src, buffers, info, grid):
        kernels[-1].append(src.wgsl)
        orig(src, buffers, info, grid)

    monkeypatch.setattr(dev, "dispatch", capture)
    for force in (True, False, True):
        monkeypatch.setattr(_attention, "FORCE_DECODE", force)
        monkeypatch.setattr(_attention, "FORCE_SPLITS", None if force else 2)
        kernels.append([])
        got = F.scaled_dot_product_attention(pq, pk, pv)
        assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 16, 300)[0])
    assert len(_attention._PLANS) == 2
    decode, flash, again = (set(w for w in ks if "q_" in w) for ks in kernels)
    assert len(decode) == len(flash) == 1 and decode != flash and again == decode
    decode = decode.pop()  # (the two-pass kernel's scores, or the one-pass kernel's merge)
    assert "var<workgroup> sc:" in decode or "var<workgroup> rm:" in decode


def test_gradients_dropout_and_grouped_heads_bypass_the_plans(rng):
    """Inputs that require grad get the recorded op (a grad_fn and right gradients) even when
    the same layout has a plan; dropout never makes one; grouped-query heads with several
    queries a head are marked to run unkept, and are right."""
    _attention._PLANS.clear()
    q, k, v, _ = _case(rng, (2,), 3, 40, 16, None)
    F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v))
    assert len(_attention._PLANS) == 1
    pq = pr.tensor(q).requires_grad_()
    out = F.scaled_dot_product_attention(pq, pr.tensor(k), pr.tensor(v))
    assert out.grad_fn is not None
    out.sum().backward()
    tq = torch.tensor(q).requires_grad_()
    TF.scaled_dot_product_attention(tq, torch.tensor(k), torch.tensor(v)).sum().backward()
    assert_close(pq.grad.numpy(), tq.grad.numpy(), atol=4 * _tol(tq.grad.numpy(), 16, 40)[0])
    with pr.no_grad():  # (no recording: the plan serves)
        F.scaled_dot_product_attention(pq, pr.tensor(k), pr.tensor(v))
    F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v), dropout_p=0.5)
    qg = rng.standard_normal((4, 3, 16)).astype(np.float32)
    kg = rng.standard_normal((2, 40, 16)).astype(np.float32)
    got = F.scaled_dot_product_attention(pr.tensor(qg), pr.tensor(kg), pr.tensor(kg),
                                         enable_gqa=True)  # fmt: skip
    want = TF.scaled_dot_product_attention(torch.tensor(qg), torch.tensor(kg), torch.tensor(kg),
                                           enable_gqa=True)  # fmt: skip
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 16, 40)[0])
    assert sorted(p[0] for p in _attention._PLANS.values()) == ["flash", "unkept"]


def test_plans_stay_bounded(rng, monkeypatch):
    """A decode against a growing cache (a new S each step) does not grow the cache past
    PLANS_MAX, and every step is right."""
    _attention._PLANS.clear()
    monkeypatch.setattr(_attention, "PLANS_MAX", 4)
    q = rng.standard_normal((1, 2, 1, 8)).astype(np.float32)
    kv = rng.standard_normal((1, 2, 30, 8)).astype(np.float32)
    for S in range(20, 30):
        got, want = _both(q, kv[:, :, :S], kv[:, :, :S], None)
        assert_close(got, want, atol=_tol(want, 8, S)[0])
        assert len(_attention._PLANS) <= 4


def test_grouped_heads_decode_keeps_its_fold(rng, monkeypatch):
    """One query a head over grouped key/value heads keeps its folded plan (where the one-pass
    decode kernel runs): later calls are right on new values, with a shared padding mask and a
    per-head float mask; grouped heads with several queries run unkept, and are right too."""
    dev = backend.current()
    if not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", True)
    _attention._PLANS.clear()
    B, hq, hk, S, E = 2, 6, 2, 280, 16
    for L, mask in ((1, None), (1, "shared"), (1, "per-head"), (3, None)):
        for _ in range(2):
            q = rng.standard_normal((B, hq, L, E)).astype(np.float32)
            k, v = (rng.standard_normal((B, hk, S, E)).astype(np.float32) for _ in range(2))
            m = None
            if mask == "shared":
                m = rng.random((B, 1, 1, S)) < 0.7
                m[..., 0] = True
            elif mask == "per-head":
                m = rng.standard_normal((B, hq, L, S)).astype(np.float32)
            got, want = _both(q, k, v, m, enable_gqa=True)
            assert_close(got, want, atol=_tol(want, E, S)[0])
    kinds = sorted(p[0] for p in _attention._PLANS.values())
    assert kinds == ["fold", "fold", "fold", "unkept"]
