"""Dropout inside the fused attention kernels (F.scaled_dot_product_attention(dropout_p=...)):
the keep bits against an independent numpy hash, each forward kernel (flash, tiled, decode) and
the fused backward against torch's math with the very mask the kernels drew, the mask's
statistics, fresh masks per call and per pr.compile replay, and the math form of the backward
(double backward) with the same mask."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.nn import _attention
from pyrite.testing.hashes import dropout_keep_mask
from pyrite.testing.tolerance import assert_close, unit_roundoff

TF = torch.nn.functional


@pytest.fixture
def keys(monkeypatch):
    """Every _DropKey made while the test runs, in order."""
    made = []
    real = _attention._DropKey

    class Recorded(real):
        def __init__(self, p):
            super().__init__(p)
            made.append(self)

    monkeypatch.setattr(_attention, "_DropKey", Recorded)
    return made


def _mask_of(drop, lead, L, S):
    return _attention._drop_mask(lead, L, S, drop, pr.float32).numpy()


def _reference(q, k, v, m, scale, keep_scaled, causal=False, bool_mask=None):
    """torch f64: (softmax(q·kᵀ·scale + mask) ⊙ M)·v, M the kernels' mask (0 or 1/(1-p))."""
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    s = tq @ tk.transpose(-2, -1) * scale
    L, S = q.shape[-2], k.shape[-2]
    if causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)
    if bool_mask is not None:
        s = s.masked_fill(~torch.tensor(bool_mask), -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    out = (p * torch.tensor(keep_scaled, dtype=torch.float64)) @ tv
    return out, (tq, tk, tv)


def test_keep_bits_match_the_reference(keys):
    """The mask kernel's bits are the numpy hash's, and about 1 - p of the pairs are kept."""
    p = 0.3
    drop = _attention._DropKey(p)
    L, S = 37, 301
    got = _mask_of(drop, (2, 3), L, S).reshape(6 * L, S)
    want = dropout_keep_mask(6 * L, S, drop.key, p)
    np.testing.assert_array_equal(got != 0, want)
    assert_close(got[want], np.full(want.sum(), 1 / (1 - p), np.float32), atol=0, rtol=1e-7)
    n = want.size
    sd = math.sqrt(n * p * (1 - p))
    assert abs((~want).sum() - n * p) < 5 * sd  # binomial, 5 sigma
    # rows and columns alike: no row or column far from 1 - p
    assert abs(want.mean(1) - (1 - p)).max() < 5 * math.sqrt(p * (1 - p) / S)
    assert abs(want.mean(0) - (1 - p)).max() < 5 * math.sqrt(p * (1 - p) / (6 * L))


KERNELS = {
    "flash": dict(FORCE_TILED=False, FORCE_DECODE=False),
    "tiled": dict(FORCE_TILED=True, FORCE_DECODE=False),
    "decode": dict(FORCE_TILED=False, FORCE_DECODE=True, DECODE_SG=False),
    # the one-pass decode kernel (several lanes a key: where the device has subgroups)
    "decode-lanes": dict(FORCE_TILED=False, FORCE_DECODE=True, DECODE_SG=True),
    # the register-tiled backward (E <= 32 on lavapipe's workgroup memory)
    "tiled-bwd": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BWD=True, DS_GEMM=False),
    "tiled-bwd16": dict(
        FORCE_TILED=True,
        FORCE_DECODE=False,
        FORCE_TILED_BWD=True,
        FORCE_TILED_BWD_TB=16,
        DS_GEMM=False,
    ),
    # dq from the stored dS by a GEMM (nn/_attention.py DS_GEMM)
    "tiled-bwd-dsgemm": dict(
        FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BWD=True, DS_GEMM=True
    ),  # fmt: skip
    # ... and dk, dv by GEMMs too, from the stored P with the dropout applied (GEMM_PRODUCTS)
    "tiled-bwd-gemm3": dict(
        FORCE_TILED=True,
        FORCE_DECODE=False,
        FORCE_TILED_BWD=True,
        DS_GEMM=True,
        GEMM_PRODUCTS=True,
    ),  # fmt: skip
}


CASES = {
    "plain": (3, 300, 40, {}),
    "split": (70, 200, 24, {"splits": 3}),  # key ranges merged (the flash and tiled forwards)
    "causal": (67, 45, 16, {"is_causal": True}),
    "bool-mask": (4, 290, 64, {"mask": True}),
}


@pytest.mark.parametrize(
    "kernel,case",
    [
        (k, c)
        for k in KERNELS
        for c in CASES
        if not (k == "decode" and c in ("causal", "split"))
        and not (k.startswith("tiled-bwd") and CASES[c][2] > 32)
    ],
)
def test_forward_and_gradients_with_the_drawn_mask(rng, monkeypatch, keys, kernel, case):
    """Each forward kernel and the fused backward give torch's math with the mask they drew
    (materialized by the same hash), forward and dq, dk, dv."""
    L, S, E, kw = CASES[case]  # (decode: up to DECODE_MAX_L queries)
    for name, val in KERNELS[kernel].items():
        monkeypatch.setattr(_attention._KD if name == "DECODE_SG" else _attention, name, val)
    monkeypatch.setattr(_attention, "FORCE_SPLITS", kw.get("splits"))
    lead = (2, 3)
    q, k, v = (rng.standard_normal((*lead, n, E)).astype(np.float32) for n in (L, S, S))
    bm = None
    pkw = {"is_causal": kw.get("is_causal", False)}
    if kw.get("mask"):
        bm = rng.random((2, 1, L, S)) > 0.4
        pkw["attn_mask"] = pr.tensor(bm)
    pq, pk, pv = (pr.tensor(a).requires_grad_() for a in (q, k, v))
    p = 0.25
    got = F.scaled_dot_product_attention(pq, pk, pv, dropout_p=p, **pkw)
    assert got.grad_fn.name == "_flash" and len(keys) == 1
    m = _mask_of(keys[0], lead, L, S)
    want, (tq, tk, tv) = _reference(q, k, v, None, 1 / math.sqrt(E), m, pkw["is_causal"], bm)
    tol = (
        16
        * (E + S)
        * unit_roundoff("float32")
        * max(1.0, float(want.detach().abs().max()))
        / (1 - p)
    )
    assert_close(got.detach().numpy(), want.detach().numpy(), atol=tol, rtol=0)
    w = rng.standard_normal(want.shape).astype(np.float32)
    (got * pr.tensor(w)).sum().backward()
    (want * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for name, a, t in zip("qkv", (pq, pk, pv), (tq, tk, tv)):
        ref = t.grad.numpy()
        atol = 64 * (E + max(L, S)) * unit_roundoff("float32") * max(1.0, abs(ref).max())
        assert_close(a.grad.numpy(), ref, atol=atol, rtol=0, msg=f"d{name} ({kernel})")


def test_fresh_masks_and_reproducible_seeds(rng, keys):
    """Each call draws a new mask; pr.manual_seed reproduces a call's mask."""
    q = pr.tensor(rng.standard_normal((1, 2, 40, 16)).astype(np.float32))
    pr.manual_seed(7)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    pr.manual_seed(7)
    c = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5).numpy()
    assert not np.allclose(a, b) and np.array_equal(a, c)
    assert keys[0].key != keys[1].key and keys[0].key == keys[2].key
    # dropout_p = 0 is the plain forward; p = 1 (nothing kept) takes the composite: zeros
    z = F.scaled_dot_product_attention(q, q, q, dropout_p=1.0).numpy()
    np.testing.assert_array_equal(z, np.zeros_like(z))


def test_double_backward_uses_the_same_mask(rng, keys):
    """With create_graph the math form runs, multiplying by the same mask: its first gradient
    equals the fused backward's."""
    q, k, v = (rng.standard_normal((2, 2, 9, 8)).astype(np.float32) for _ in range(3))
    grads = []
    for create in (False, True):
        pr.manual_seed(3)
        pq, pk, pv = (pr.tensor(a).requires_grad_() for a in (q, k, v))
        out = F.scaled_dot_product_attention(pq, pk, pv, dropout_p=0.4)
        g = pr.autograd.grad(out.sum(), (pq, pk, pv), create_graph=create)
        grads.append([t.detach().numpy() for t in g])
    for a, b in zip(*grads):
        assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_compiled_replays_draw_new_masks(rng, keys):
    """Under pr.compile every replay draws a new key before its forward, and the backward
    recorded beside it reads the same key: q's gradient is torch's with that replay's mask."""
    L, S, E = 20, 33, 16
    q, k, v = (rng.standard_normal((1, 2, n, E)).astype(np.float32) for n in (L, S, S))
    pq = pr.tensor(q).requires_grad_()
    pk, pv = pr.tensor(k), pr.tensor(v)
    w = rng.standard_normal((1, 2, L, E)).astype(np.float32)
    pw = pr.tensor(w)

    @pr.compile
    def step():
        pq.grad = None
        out = F.scaled_dot_product_attention(pq, pk, pv, dropout_p=0.3)
        loss = (out * pw).sum()
        loss.backward()
        return loss

    seen = []
    for _ in range(4):
        loss = step().item()
        drop = keys[-1]  # (the trace's key object, redrawn by every replay)
        m = _mask_of(drop, (1, 2), L, S)
        want, (tq, _, _) = _reference(q, k, v, None, 1 / math.sqrt(E), m)
        wl = (want * torch.tensor(w, dtype=torch.float64)).sum()
        wl.backward()
        assert abs(loss - wl.item()) < 1e-3 * max(1.0, abs(wl.item()))
        assert_close(pq.grad.numpy(), tq.grad.numpy(), atol=1e-4, rtol=1e-4)
        seen.append(tuple(drop.key))
    assert len(set(seen)) == 4
    assert step.stats()["replays"] >= 2


def test_grouped_query_heads(rng, keys):
    """With grouped-query heads (6 query heads over 2 key/value heads) each query head draws its
    own mask rows, and the gradients flow back into the shared key/value heads."""
    B, Hq, Hk, L, S, E = 2, 6, 2, 11, 37, 16
    q = rng.standard_normal((B, Hq, L, E)).astype(np.float32)
    k, v = (rng.standard_normal((B, Hk, S, E)).astype(np.float32) for _ in range(2))
    pq, pk, pv = (pr.tensor(a).requires_grad_() for a in (q, k, v))
    got = F.scaled_dot_product_attention(pq, pk, pv, dropout_p=0.2, enable_gqa=True)
    m = _mask_of(keys[0], (B, Hk, Hq // Hk), L, S).reshape(B, Hq, L, S)
    kr, vr = (np.repeat(a, Hq // Hk, axis=1) for a in (k, v))
    want, (tq, tk, tv) = _reference(q, kr, vr, None, 1 / math.sqrt(E), m)
    assert_close(got.detach().numpy(), want.detach().numpy(), atol=1e-5, rtol=1e-5)
    got.sum().backward()
    want.sum().backward()
    assert_close(pq.grad.numpy(), tq.grad.numpy(), atol=1e-4, rtol=1e-4)
    dk = tk.grad.numpy().reshape(B, Hk, Hq // Hk, S, E).sum(2)
    dv = tv.grad.numpy().reshape(B, Hk, Hq // Hk, S, E).sum(2)
    assert_close(pk.grad.numpy(), dk, atol=1e-4, rtol=1e-4)
    assert_close(pv.grad.numpy(), dv, atol=1e-4, rtol=1e-4)
