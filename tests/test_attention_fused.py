"""The fused attention kernels (kernels/attention.py) through F.scaled_dot_product_attention:
forward and the three gradients against torch CPU, the path actually taken (one dispatch, no
L×S buffer), the composite kept for double backward and past the loop budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.nn import _attention
from pyrite.ops import core
from pyrite.testing.tolerance import assert_close, unit_roundoff

TF = torch.nn.functional


def _tol(ref, E, S, dtype="float32"):
    """An absolute bound for attention over S keys of head dim E: a score is a length-E dot
    product (E·u relative to |q||k|·scale, ~1 for these unit-normal inputs), exp turns that into a
    relative error of each weight, and the weighted sums over S keys add S·u; 16 covers exp's
    3 + 2|x| ULP and the second sums of the gradients (dq = Σ p·(dp - D)·k). Results stored in
    float16 add one rounding of the value itself (rtol)."""
    u = unit_roundoff("float32")
    mag = max(1.0, float(np.abs(ref).max()))
    rtol = 2 * unit_roundoff(dtype) if dtype != "float32" else 0.0
    if dtype != "float32":  # inputs rounded to float16: the f32 reference sees the same values
        u = unit_roundoff(dtype)
    return 16 * (E + S) * u * mag, rtol


def _check(rng, q, k, v, dtype="float32", grads=True, **kw):
    """Forward and dq, dk, dv of pyrite against torch (f32 reference on the same values)."""
    tdt = getattr(torch, dtype)
    tq, tk, tv = (torch.tensor(a).to(tdt).float().requires_grad_() for a in (q, k, v))
    pkw, tkw = dict(kw), dict(kw)
    m = kw.get("attn_mask")
    if m is not None:
        pkw["attn_mask"] = pr.tensor(m)
        tkw["attn_mask"] = torch.tensor(m)
        if m.dtype != np.bool_:
            pkw["attn_mask"] = pkw["attn_mask"].to(getattr(pr, dtype))
            tkw["attn_mask"] = tkw["attn_mask"].to(tdt).float()
    transform = kw.pop("_transform", None)
    pkw.pop("_transform", None)
    tkw.pop("_transform", None)
    pq, pk, pv = (pr.tensor(a).to(getattr(pr, dtype)).requires_grad_() for a in (q, k, v))
    ins_p, ins_t = (pq, pk, pv), (tq, tk, tv)
    if transform is not None:
        ins_p, ins_t = tuple(map(transform, ins_p)), tuple(map(transform, ins_t))
    want = TF.scaled_dot_product_attention(*ins_t, **tkw)
    got = F.scaled_dot_product_attention(*ins_p, **pkw)
    # the fused op's node (grouped-query heads: the reshape of its output back to Hq heads)
    assert got.grad_fn is not None and got.grad_fn.name in ("_flash", "reshape")
    E, S = q.shape[-1], k.shape[-2]
    a, r = _tol(want.detach().numpy(), E, S, dtype)
    assert_close(got.float().detach().numpy(), want.detach().numpy(), atol=a, rtol=r)
    if not grads:
        return
    w = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (got.float() * pr.tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for name, p, t in zip("qkv", (pq, pk, pv), (tq, tk, tv)):
        ref = t.grad.numpy()
        a, r = _tol(ref, E, max(S, q.shape[-2]), dtype)
        assert_close(p.grad.float().numpy(), ref, atol=4 * a, rtol=2 * r, msg=f"d{name}")


def _qkv(rng, lead, L, S, E):
    return (
        rng.standard_normal((*lead, L, E)).astype(np.float32),
        rng.standard_normal((*lead, S, E)).astype(np.float32),
        rng.standard_normal((*lead, S, E)).astype(np.float32),
    )


def _masked(rng, kw, L, S, dead):
    """kw with its "mask" kind ("bool": (2, 1, L, S), half the pairs, query `dead` with every key
    masked (0 and lse = +inf); "float": (L, S) normal, every 7th key -inf) as attn_mask."""
    kw = dict(kw)
    mask = kw.pop("mask", None)
    if mask == "bool":
        m = rng.random((2, 1, L, S)) > 0.5
        m[0, 0, dead] = False
        kw["attn_mask"] = m
    elif mask == "float":
        m = rng.standard_normal((L, S)).astype(np.float32)
        m[:, ::7] = -np.inf
        kw["attn_mask"] = m
    return kw


# every L, S in {1, 7, 64, 129} and E in {8, 32, 64, 80} appears, with batch and heads (2, 3)
SHAPES = [
    (1, 1, 8),
    (1, 129, 32),
    (7, 7, 80),
    (7, 64, 8),
    (64, 1, 64),
    (64, 129, 80),
    (129, 7, 32),
    (129, 64, 64),
]


@pytest.mark.parametrize("L,S,E", SHAPES)
def test_parity_plain(rng, L, S, E):
    _check(rng, *_qkv(rng, (2, 3), L, S, E))


@pytest.mark.parametrize("L,S,E", [(64, 64, 32), (7, 129, 8), (129, 7, 64), (1, 64, 80)])
def test_parity_causal(rng, L, S, E):
    _check(rng, *_qkv(rng, (2, 3), L, S, E), is_causal=True)


def test_bool_padding_mask_broadcast_and_scale(rng):
    L, S, E = 7, 64, 32
    m = rng.random((2, 1, 1, S)) > 0.3  # a padding mask over batch, broadcast over heads and L
    m[..., 0] = True
    _check(rng, *_qkv(rng, (2, 3), L, S, E), attn_mask=m, scale=0.37)


def test_bool_mask_with_a_fully_masked_query(rng):
    L, S, E = 7, 129, 8
    m = rng.random((3, L, S)) > 0.5
    m[1, 4, :] = False  # query 4 of head 1 attends to nothing: 0 out, no gradient through it
    _check(rng, *_qkv(rng, (2, 3), L, S, E), attn_mask=m)


def test_float_mask_broadcast(rng):
    L, S, E = 64, 7, 80
    m = rng.standard_normal((1, 3, 1, S)).astype(np.float32)
    m[0, 1, 0, 2] = -np.inf
    _check(rng, *_qkv(rng, (2, 3), L, S, E), attn_mask=m)


def test_float_mask_gradient(rng):
    q, k, v = _qkv(rng, (2, 3), 7, 9, 8)
    m = rng.standard_normal((3, 7, 9)).astype(np.float32)
    pm, tm = pr.tensor(m).requires_grad_(), torch.tensor(m, requires_grad=True)
    got = F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v), attn_mask=pm)
    want = TF.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=tm
    )
    got.sum().backward()
    want.sum().backward()
    assert_close(pm.grad.numpy(), tm.grad.numpy(), atol=_tol(tm.grad.numpy(), 8, 9)[0])


def test_noncontiguous_inputs(rng):
    """(B, L, H, E) projections transposed to (B, H, L, E), as models do: read by strides."""
    B, L, H, E = 2, 7, 3, 32
    q, k, v = (rng.standard_normal((B, L, H, E)).astype(np.float32) for _ in range(3))
    _check(rng, q, k, v, is_causal=True, _transform=lambda t: t.transpose(1, 2))


def test_outputs_in_the_inputs_head_layout(rng):
    """With (B, L, H, E) projections transposed to (B, H, L, E), the output and dq, dk, dv are
    written in that layout too: the model's transpose(1, 2).reshape(B, L, H·E) after attention,
    and the same on the way back, are views rather than copies (values: the test above)."""
    B, L, H, E = 2, 9, 3, 16
    qkv = pr.tensor(rng.standard_normal((B, L, 3 * H * E)).astype(np.float32)).requires_grad_()
    q, k, v = (t.reshape(B, L, H, E).transpose(1, 2) for t in qkv.split(H * E, dim=-1))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert out.shape == (B, H, L, E)
    assert out.transpose(1, 2).is_contiguous()
    seen = {}
    for name, t in zip("qkv", (q, k, v)):
        t.register_hook(lambda g, name=name: seen.__setitem__(name, g))
    out.transpose(1, 2).reshape(B, L, H * E).sum().backward()
    for name in "qkv":
        assert seen[name].transpose(1, 2).is_contiguous(), name
    cq = pr.tensor(rng.standard_normal((B, H, L, E)).astype(np.float32))
    assert F.scaled_dot_product_attention(cq, cq, cq).is_contiguous()  # q's own layout


def test_float16(rng):
    if not backend.current().has_f16:
        pytest.skip("the device has no shader-f16")
    m = rng.random((1, 1, 64, 64)) > 0.2
    m[..., 0] = True
    _check(rng, *_qkv(rng, (2, 3), 64, 64, 64), dtype="float16", attn_mask=m)


def test_grouped_query_heads(rng):
    q = rng.standard_normal((2, 6, 7, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 9, 16)).astype(np.float32) for _ in range(2))
    _check(rng, q, k, v, enable_gqa=True, is_causal=True)


def test_one_dispatch_and_no_score_matrix(rng, monkeypatch):
    """The forward is one dispatch, and neither it nor the backward allocates L×S. (Unsplit:
    on a GPU these 3 query blocks would take the key-split form, two dispatches, tested below.)"""
    monkeypatch.setattr(core, "POISON", False)
    monkeypatch.setattr(_attention, "FORCE_SPLITS", 1)
    L = S = 129
    E = 8
    q, k, v = (pr.tensor(a).requires_grad_() for a in _qkv(rng, (1,), L, S, E))
    m = pr.tensor(rng.random((L, S)) > 0.2)
    dev = backend.current()
    assert dev.loop_budget is not ...  # (its one-off probe dispatch happens before the counts)
    sizes = []
    real = dev.pool.allocate

    def allocate(nbytes, *a, **kw):
        sizes.append(nbytes)
        return real(nbytes, *a, **kw)

    monkeypatch.setattr(dev.pool, "allocate", allocate)
    calls = []
    fused = _attention._flash_backward

    def spy(*a):
        r = fused(*a)
        calls.append(r is not None)
        return r

    monkeypatch.setattr(_attention, "_flash_backward", spy)
    for kw in ({"is_causal": True}, {"attn_mask": m}):
        with pr.no_grad():
            before = dev.dispatches
            F.scaled_dot_product_attention(q, k, v, **kw)
            assert dev.dispatches - before == 1
        out = F.scaled_dot_product_attention(q, k, v, **kw)
        g = pr.tensor(rng.standard_normal((1, L, E)).astype(np.float32))
        before = dev.dispatches
        calls.clear()
        out.backward(g)
        assert calls == [True]
        # the two kernels, and one copy each as dq, dk, dv become .grad
        assert dev.dispatches - before <= 5
    assert max(sizes) < L * S * 4


def test_double_backward_through_the_composite(rng):
    """A gradient penalty: create_graph=True records the composite's math, so it differentiates."""
    q, k, v = _qkv(rng, (2, 3), 7, 9, 8)
    m = rng.random((7, 9)) > 0.3
    m[:, 0] = True
    P = [pr.tensor(a).requires_grad_() for a in (q, k, v)]
    T = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    w = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)

    def torch_math(q, k, v, attn_mask):  # torch's CPU flash kernel has no double backward
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            return TF.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)

    for ins, f, mask, ten, ag in (
        (P, F.scaled_dot_product_attention, pr.tensor(m), pr.tensor, pr.autograd),
        (T, torch_math, torch.tensor(m), torch.tensor, torch.autograd),
    ):
        out = f(*ins, attn_mask=mask)
        gq, gk = ag.grad((out * ten(w)).sum(), ins[:2], create_graph=True)
        ((gq * gq).sum() + (gk * gk).sum()).backward()
    for p, t in zip(P, T):
        ref = t.grad.numpy()
        assert_close(p.grad.numpy(), ref, atol=4 * _tol(ref, 8, 9)[0])


def test_past_the_loop_budget_falls_back(rng, monkeypatch, loop_budget):
    """A key loop past the budget takes the composite (several dispatches), still correct."""
    monkeypatch.setattr(core, "POISON", False)
    loop_budget(4096 + 64)  # max_loop_iterations() = budget // 2 = 2080: S = 129 · E = 64 fits
    q, k, v = _qkv(rng, (2,), 64, 4000, 8)
    dev = backend.current()
    before = dev.dispatches
    got = F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v))
    assert dev.dispatches - before > 1
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 8, 4000)[0])


def test_longest_key_loop_within_the_budget(rng):
    """On a loop-budget device (lavapipe) the longest S the planner admits must run to the end:
    an undercounted loop would be cut short there and the later keys silently dropped."""
    from pyrite.kernels import attention as K

    if backend.current().loop_budget is None:
        pytest.skip("loops are unbounded on this device")
    budget = core.max_loop_iterations()
    S = 1
    while K.fwd_loop_iterations(2 * S, 8, K.block_for(1)) <= budget:
        S *= 2
    lo, hi = S, 2 * S  # the largest S that fits, by bisection
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if K.fwd_loop_iterations(mid, 8, K.block_for(1)) <= budget else (lo, mid)
    q, k, v = _qkv(rng, (1,), 1, lo, 8)
    v[0, -1] += 100.0  # the last key's value: visible only if the loop reached it
    k[0, -1] = q[0, 0] * 3.0
    _check(rng, q, k, v)


@pytest.mark.parametrize("splits", [2, 3, 8])
@pytest.mark.parametrize(
    "L,S,E,kw",
    [
        (7, 129, 32, {}),
        (64, 200, 64, {"is_causal": True}),
        (33, 150, 80, {"mask": "bool"}),
        (5, 96, 8, {"mask": "float"}),
    ],
    ids=["plain", "causal", "bool-mask", "float-mask"],
)
def test_key_split_forward(rng, monkeypatch, splits, L, S, E, kw):
    """The forward with its keys cut into ranges and merged (what a GPU takes when the query
    blocks are too few to fill it), forced here whatever the device: forward and gradients
    within the same bounds, ranges that get no key (causal, 8 ranges) included."""
    monkeypatch.setattr(_attention, "FORCE_SPLITS", splits)
    q, k, v = _qkv(rng, (2, 3), L, S, E)
    kw = dict(kw)
    mask = kw.pop("mask", None)
    if mask == "bool":
        m = rng.random((2, 1, L, S)) > 0.3
        m[0, 0, 1] = False  # a query with every key masked: 0 and lse = +inf
        kw["attn_mask"] = m
    elif mask == "float":
        kw["attn_mask"] = rng.standard_normal((L, S)).astype(np.float32)
    _check(rng, q, k, v, **kw)


@pytest.mark.parametrize(
    "L,S,E,kw",
    [
        (1, 1, 8, {}),
        (1, 300, 64, {}),
        (1, 2049, 64, {"mask": "bool"}),  # two key ranges of 1,280
        (3, 700, 80, {"mask": "float"}),  # E = 80: 20 lanes a key, 12 keys at once
        (2, 4100, 128, {"is_causal": True}),  # causal: only key 0, 0..1 seen; empty ranges
        (4, 513, 5, {"mask": "bool"}),
        (1, 257, 1, {}),
        (11, 900, 32, {"is_causal": True}),  # (one-pass kernel: two blocks of up to 8 queries)
        (9, 640, 48, {"mask": "float"}),
    ],
    ids=[
        "one-key",
        "plain",
        "bool-split",
        "float-mask",
        "causal-E128",
        "E5",
        "E1",
        "causal-11",
        "float-9",
    ],  # fmt: skip
)
@pytest.mark.parametrize("lanes", [True, False], ids=["lanes", "one-a-key"])
def test_decode_forward(rng, monkeypatch, L, S, E, kw, lanes):
    """The decode kernel (few queries over many keys: a workgroup a query and key range, what a
    GPU takes for L <= DECODE_MAX_L), forced here whatever the device: forward and the three
    gradients (the flash backward from its lse) within the flash kernel's bounds, with masks,
    a query with every key masked, ranges that get no key, and head dims that do not fill a
    vec4 or the workgroup's lanes; its first pass with several lanes a key (where the device
    has subgroups: lavapipe's hold 8) and with one invocation a key."""
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", lanes)
    q, k, v = _qkv(rng, (2, 3), L, S, E)
    kw = _masked(rng, kw, L, S, dead=0)
    dev = backend.current()
    assert _attention._decode_splits(dev, 6, L, S, E) >= 1
    if dev.subgroups and E > 4:  # (E <= 4: one vec4 a row, no lanes to share it)
        assert (_attention._decode_lanes(dev, E) >= 2) == lanes
    _check(rng, q, k, v, **kw)


def test_decode_layouts_and_grouped_heads(rng, monkeypatch):
    """The decode kernel reads (B, L, H, E) projections by strides, writes its output in that
    layout, and serves grouped-query heads (4 query heads over 2 key/value heads) and a KV cache
    sliced from a longer buffer."""
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    B, L, H, E, S = 2, 1, 3, 32, 600
    q, k, v = (rng.standard_normal((B, n, H, E)).astype(np.float32) for n in (L, S, S))
    _check(rng, q, k, v, _transform=lambda t: t.transpose(1, 2))
    q = rng.standard_normal((2, 4, 2, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 900, 16)).astype(np.float32) for _ in range(2))
    _check(rng, q, k, v, enable_gqa=True)
    cache = rng.standard_normal((2, 3, 1000, 16)).astype(np.float32)
    q = rng.standard_normal((2, 3, 1, 16)).astype(np.float32)
    pc, tc = pr.tensor(cache), torch.tensor(cache)
    got = F.scaled_dot_product_attention(pr.tensor(q), pc[:, :, :777], pc[:, :, 100:877])
    want = TF.scaled_dot_product_attention(torch.tensor(q), tc[:, :, :777], tc[:, :, 100:877])
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), 16, 777)[0])


@pytest.mark.parametrize("mask", ["none", "bool-shared", "float-per-head", "flat"])
def test_decode_grouped_heads_folded(rng, monkeypatch, mask):
    """One query a head over grouped key/value heads takes the one-pass decode kernel with each
    group's query heads as rows of one key head (each key row read once for them): forward and
    gradients match torch, with no mask, a padding mask shared by the heads, a float mask per
    query head and a (1, S) mask."""
    dev = backend.current()
    if not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", True)
    B, hq, hk, S, E = 2, 8, 2, 333, 24
    q = rng.standard_normal((B, hq, 1, E)).astype(np.float32)
    k, v = (rng.standard_normal((B, hk, S, E)).astype(np.float32) for _ in range(2))
    kw = {}
    if mask == "bool-shared":
        m = rng.random((B, 1, 1, S)) < 0.7
        m[..., 0] = True
        kw["attn_mask"] = m
    elif mask == "float-per-head":
        kw["attn_mask"] = rng.standard_normal((B, hq, 1, S)).astype(np.float32)
    elif mask == "flat":  # (torch's grouped heads refuse a 1-D mask)
        kw["attn_mask"] = rng.random((1, S)) < 0.5
    m = kw.get("attn_mask")
    folded = _attention._fold_heads(
        pr.tensor(q), pr.tensor(k), pr.tensor(v), None if m is None else pr.tensor(m), False, None
    )
    assert folded is not None and tuple(folded[0].shape) == (B, hk, hq // hk, E)
    _check(rng, q, k, v, enable_gqa=True, **kw)


def test_decode_float16(rng, monkeypatch):
    if not backend.current().has_f16:
        pytest.skip("the device has no shader-f16")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    _check(rng, *_qkv(rng, (2, 3), 2, 1500, 64), dtype="float16", is_causal=False)


def test_decode_rule(monkeypatch):
    """Which calls take the decode kernel on a GPU and with how many key ranges: the fewest that
    keep a range's scores in workgroup memory, doubled toward DECODE_FILL workgroups and
    DECODE_MAX_STEPS values a group of lanes while every range keeps keys; none for more than
    DECODE_MAX_L queries (DECODE_CPU_MAX_L on a CPU adapter), few keys or past
    DECODE_MAX_SPLITS ranges."""
    K = _attention._KD

    class Dev:
        adapter_type = "DiscreteGPU"
        limits = {"max-compute-invocations-per-workgroup": 1024}
        subgroup_size = subgroups = 0

    gpu, cpu = Dev(), Dev()
    cpu.adapter_type = "CPU"
    dec = _attention._decode_splits
    assert dec(cpu, 16, 1, 4096, 64) >= 1  # (one query: measured faster on lavapipe too)
    assert dec(cpu, 16, _attention.DECODE_CPU_MAX_L + 1, 4096, 64) == 0
    assert dec(gpu, 16, _attention.DECODE_MAX_L + 1, 4096, 64) == 0
    assert dec(gpu, 16, 1, _attention.DECODE_MIN_S - 1, 64) == 0
    # past E = 64, where the tiled forward fits (48 KiB), one query only (DECODE_MAX_L_WIDE)
    big = Dev()
    big.limits = {**gpu.limits, "max-compute-workgroup-storage-size": 49152}
    assert dec(big, 32, 1, 4096, 128) >= 1 and dec(big, 16, 4, 4096, 64) >= 1
    assert dec(big, 32, _attention.DECODE_MAX_L_WIDE + 1, 2048, 128) == 0
    cases = [(16, 1, 4096, 64), (1, 1, 256, 8), (512, 1, 4096, 64), (32, 4, 20000, 128),
             (1, 2, 9000, 96), (128, 4, 2048, 128)]  # fmt: skip
    for nbh, L, S, E in cases:
        p = dec(gpu, nbh, L, S, E)
        assert 1 <= p <= _attention.DECODE_MAX_SPLITS
        assert K.decode_span(S, p) <= K.DECODE_MAX_SPAN
        assert K.decode_span(S, p) * (p - 1) < S  # every range holds keys
        fewer = p // 2
        assert fewer == 0 or (
            K.decode_span(S, fewer) > K.DECODE_MAX_SPAN
            or nbh * L * fewer < _attention.DECODE_FILL
            or K.decode_span(S, fewer) > _attention.DECODE_MAX_STEPS * K.decode_groups(E)
        )
    # (8 groups of lanes walk 256 keys each at one range: measured the fastest on the H100)
    assert dec(gpu, 128, 4, 2048, 128) == 1
    assert dec(gpu, 16, 1, 4096, 64) == 8  # (128 workgroups: one an SM, measured best)
    assert dec(gpu, 1, 1, K.DECODE_MAX_SPAN * _attention.DECODE_MAX_SPLITS + 1, 64) == 0


@pytest.mark.parametrize(
    "L,S,E,kw,splits",
    [
        (64, 32, 64, {}, 1),  # one block, one tile
        (70, 129, 64, {}, 1),  # a block of 6 queries, a tile of 1 key
        (130, 77, 48, {"is_causal": True}, 1),
        (100, 300, 33, {"mask": "bool"}, 3),  # key ranges of whole tiles, merged
        (65, 200, 64, {"mask": "float"}, 1),
        (200, 64, 8, {"is_causal": True}, 4),  # causal with ranges that get no key
        (17, 1, 1, {}, 1),
    ],
    ids=["one-tile", "ragged", "causal-E48", "bool-split", "float-mask", "causal-split", "E1"],
)
@pytest.mark.parametrize("sg", [True, False], ids=["subgroup-rows", "workgroup-rows"])
def test_tiled_forward(rng, monkeypatch, L, S, E, kw, splits, sg):
    """The register-tiled forward (kernels/attention_tiled.py: 64 queries a workgroup, what a GPU
    takes for E <= 64), forced here whatever the device: forward and gradients (the flash
    backward from its lse) within the same bounds, with ragged blocks and tiles, masks, a query
    with every key masked, key splits and head dims padded to 64; its rows' maxima and sums
    merged by subgroup shuffles (where the device has subgroups of 8 or more, as lavapipe) and
    through workgroup memory."""
    monkeypatch.setattr(_attention, "FORCE_TILED", True)
    monkeypatch.setattr(_attention, "SUBGROUP_ROWS", sg)
    dev = backend.current()
    if sg and dev.subgroups:
        from pyrite.backend import quirks

        assert bool(_attention._row_subgroups(dev)) == (quirks.subgroup_size(dev) >= 8)
    if not sg:
        assert _attention._row_subgroups(dev) == 0
    monkeypatch.setattr(_attention, "FORCE_SPLITS", splits)
    q, k, v = _qkv(rng, (2, 3), L, S, E)
    kw = _masked(rng, kw, L, S, dead=min(2, L - 1))
    assert _attention._use_tiled(backend.current(), 6, L, S, E)
    _check(rng, q, k, v, **kw)


@pytest.mark.parametrize("flag,E", [("FORCE_TILED", 64), ("FORCE_TILED_BWD", 32)])
def test_tiled_layouts_grouped_heads_and_float16(rng, monkeypatch, flag, E):
    """The tiled forward (backward) reads (B, L, H, E) projections by strides and writes its
    output (gradients) in that layout; grouped-query heads; float16 storage where the device has
    it. (E: what lavapipe's workgroup memory holds of each.)"""
    monkeypatch.setattr(_attention, flag, True)
    B, L, H = 2, 67, 3
    q, k, v = (rng.standard_normal((B, L, H, E)).astype(np.float32) for _ in range(3))
    _check(rng, q, k, v, is_causal=True, _transform=lambda t: t.transpose(1, 2))
    q = rng.standard_normal((2, 4, 40, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 90, 16)).astype(np.float32) for _ in range(2))
    _check(rng, q, k, v, enable_gqa=True)
    if backend.current().has_f16:
        _check(rng, *_qkv(rng, (2, 3), 80, 100, E), dtype="float16", is_causal=True)


def _devices(storage, small_storage):
    """Stand-ins for the rules: a GPU with `storage` bytes of workgroup memory and 256
    invocations, a CPU adapter with the same limits, and a GPU with `small_storage` bytes (none
    with subgroups)."""
    from types import SimpleNamespace

    lim = {"max-compute-workgroup-storage-size": storage,
           "max-compute-invocations-per-workgroup": 256}  # fmt: skip
    sg = dict(subgroup_size=0, subgroups=0)
    return (
        SimpleNamespace(adapter_type="DiscreteGPU", limits=lim, **sg),
        SimpleNamespace(adapter_type="CPU", limits=lim, **sg),
        SimpleNamespace(
            adapter_type="DiscreteGPU",
            limits={**lim, "max-compute-workgroup-storage-size": small_storage},
            **sg,
        ),
    )


def test_tiled_rule(monkeypatch):
    """The tiled forward runs on GPUs for E <= 64 where its workgroup memory fits (past 64,
    where 48 KiB do), whatever the queries and blocks; never on a CPU adapter unless forced, nor
    past E = 128."""
    gpu, cpu, small = _devices(32768, 16384)
    use = _attention._use_tiled
    many = 528  # batch·heads
    assert use(gpu, many, 63, 512, 64) and use(gpu, 1, 5, 5, 1)
    assert use(gpu, 12, 128, 128, 64)  # 24 query blocks
    assert use(gpu, many, 4096, 4096, 64)  # 34,000 query blocks
    assert not use(gpu, 12, 128, 128, 65) and not use(cpu, 12, 128, 128, 64)
    assert not use(small, 12, 128, 128, 64)
    # head dims 65 .. 128: blocks of 32 queries, 48 KiB (the H100/H200 through both
    # implementations)
    big = _devices(49152, 0)[0]
    assert use(big, 32, 512, 512, 128) and use(big, 1, 7, 9, 65) and not use(big, 1, 7, 9, 129)
    assert not use(gpu, 32, 512, 512, 80)  # (32 KiB)
    monkeypatch.setattr(_attention, "FORCE_TILED", True)
    assert use(cpu, many, 1000, 128, 64) and not use(cpu, 1, 1, 128, 80)


def test_tiled_forward_rows_rule():
    """The tiled forward's rows an invocation: 2 over at most TILED_RPT2_MAX_S keys at every head
    dim, else 4 up to E = 64 and 2 past it (kernels/attention_tiled.tiled_rpt)."""
    cut, cpu = _attention.TILED_RPT2_MAX_S, _devices(49152, 0)[1]
    assert _attention._tiled_shape(cpu, 384, 64, cut, 64) == (64, 2)
    assert _attention._tiled_shape(cpu, 384, 64, cut + 1, 32) == (64, 4)
    assert _attention._tiled_shape(cpu, 384, 4096, 4096, 64) == (64, 4)
    assert _attention._tiled_shape(cpu, 384, 4096, 4096, 128) == (32, 2)


def test_tiled_forward_wide_blocks_rule():
    """Blocks of 128 queries (TILED_WIDE_BQ) on a GPU whose 48 KiB of workgroup memory hold them
    (with subgroups: P·V by shuffles, no pᵀ tile), at head dims 33 .. 64, for at least
    TILED_WIDE_MIN_L queries in at least TILED_WIDE_MIN_BLOCKS blocks; otherwise the blocks of
    before."""
    from types import SimpleNamespace

    lim = {"max-compute-workgroup-storage-size": 49152,
           "max-compute-invocations-per-workgroup": 256}  # fmt: skip
    gpu = SimpleNamespace(adapter_type="DiscreteGPU", limits=lim, subgroup_size=32, subgroups=1)
    shape = _attention._tiled_shape
    wide, few = _attention.TILED_WIDE_BQ, _attention.TILED_WIDE_MIN_BLOCKS
    L = _attention.TILED_WIDE_MIN_L
    assert shape(gpu, 384, 128, 128, 64) == (wide, 4)  # BERT-base at batch 32
    assert shape(gpu, 16, 4096, 4096, 33) == (wide, 4)
    assert shape(gpu, few, L, 512, 64) == (wide, 4)
    assert shape(gpu, few - 1, L, 512, 64) == (64, 4)  # (too few blocks)
    assert shape(gpu, 384, L - 1, 128, 64) == (64, 2)  # (too few queries)
    assert shape(gpu, 384, 512, 512, 32) == (64, 4)  # (E = 32)
    assert shape(gpu, 384, 512, 512, 128) == (32, 2)  # (E = 128)
    small = SimpleNamespace(
        **{**vars(gpu), "limits": {**lim, "max-compute-workgroup-storage-size": 32768}}
    )
    assert shape(small, 384, 128, 128, 64) == (64, 2)
    nosg = SimpleNamespace(**{**vars(gpu), "subgroup_size": 0, "subgroups": 0})
    assert shape(nosg, 384, 128, 128, 64) == (64, 2)  # (pᵀ's tile: 56 KiB)
    cpu = SimpleNamespace(**{**vars(gpu), "adapter_type": "CPU"})
    assert shape(cpu, 384, 128, 128, 64) == (64, 2)
    assert _attention._use_tiled(gpu, 384, 128, 128, 64)
    # causal calls: from TILED_WIDE_MIN_BLOCKS_CAUSAL blocks
    causal = _attention.TILED_WIDE_MIN_BLOCKS_CAUSAL
    assert shape(gpu, causal // 4, 512, 512, 64, True) == (wide, 4)
    assert shape(gpu, causal // 4 - 1, 512, 512, 64, True) == (64, 4)
    assert shape(gpu, causal // 4 - 1, 512, 512, 64) == (wide, 4)


def test_tiled_forward_refuses_more_invocations_than_a_key_tile(monkeypatch):
    """A forced shape whose workgroup has more invocations than a staged key tile has vec4s
    (blocks of 128 queries, 2 rows an invocation: 512 invocations against 256 at E <= 32) is
    refused by the rule (another kernel runs) and by the kernel's generator: its staging would
    leave the tiles empty (the H100 gave results off by 5.4)."""
    from types import SimpleNamespace

    from pyrite.kernels import attention_tiled as KT

    lim = {"max-compute-workgroup-storage-size": 49152,
           "max-compute-invocations-per-workgroup": 1024}  # fmt: skip
    gpu = SimpleNamespace(adapter_type="DiscreteGPU", limits=lim, subgroup_size=32, subgroups=1)
    monkeypatch.setattr(_attention, "FORCE_TILED_BQ", 128)
    monkeypatch.setattr(_attention, "FORCE_TILED_RPT", 2)
    assert not _attention._use_tiled(gpu, 32, 64, 64, 32)
    assert _attention._use_tiled(gpu, 32, 64, 64, 64)  # (512 vec4s at E = 64)
    args = (32, 4, True, "none", "f32", "f32", "f32", None, "f32")
    with pytest.raises(ValueError, match="do not divide"):
        KT.attn_fwd_tiled_kernel(*args, bq=128, rpt=2, sg=1, pshfl=True)


@pytest.mark.parametrize("bq,rpt", [(16, 4), (32, 4), (32, 2), (64, 2), (64, 4), (128, 4)])
def test_tiled_forward_smaller_query_blocks(rng, monkeypatch, bq, rpt):
    """The tiled forward with blocks of 32 queries, 2 rows an invocation (what head dims
    65 .. 128 take on a GPU, in 48 KiB: not on lavapipe's 32), 4 rows, blocks of 16 (a workgroup
    of 32 smaller than the padded head dim, so an invocation's staged places differ from one tile
    read to the next) and of 64 with 2 rows, forced at E <= 64: ragged blocks, causal, a bool mask
    with a query whose every key is masked, key splits."""
    monkeypatch.setattr(_attention, "FORCE_TILED", True)
    monkeypatch.setattr(_attention, "FORCE_TILED_BQ", bq)
    monkeypatch.setattr(_attention, "FORCE_TILED_RPT", rpt)
    _check(rng, *_qkv(rng, (2, 3), 70, 45, 40), is_causal=True)
    kw = _masked(rng, {"mask": "bool"}, 33, 97, dead=3)
    _check(rng, *_qkv(rng, (2, 3), 33, 97, 64), **kw)
    monkeypatch.setattr(_attention, "FORCE_SPLITS", 3)
    _check(rng, *_qkv(rng, (2, 3), 40, 200, 24), grads=False)


@pytest.mark.parametrize("prefetch", [True, False])
def test_tiled_prefetch_variants(rng, monkeypatch, prefetch):
    """Both spellings of the tiled forward's staging (the next tile's reads in flight during the
    products, or read at the top of each tile) give the same results, E = 32 and 64 padded."""
    from pyrite.kernels import attention_tiled

    monkeypatch.setattr(_attention, "FORCE_TILED", True)
    monkeypatch.setattr(attention_tiled, "PREFETCH", prefetch)
    m = rng.random((1, 3, 50, 97)) > 0.3
    _check(rng, *_qkv(rng, (2, 3), 50, 97, 40), attn_mask=m, grads=False)
    _check(rng, *_qkv(rng, (2, 3), 70, 45, 20), is_causal=True, grads=False)


def test_tiled_longest_key_loop_within_the_budget(rng, monkeypatch):
    """On a loop-budget device the longest S the tiled rule admits (tiled_loop_iterations, past
    the flash kernel's budget: the tiled forward keeps the call fused) runs to its last key: the last key, made the one query's best match with a distinct value,
    dominates the output only if the loop reached it."""
    from pyrite.kernels import attention_tiled as KT

    if backend.current().loop_budget is None:
        pytest.skip("loops are unbounded on this device")
    monkeypatch.setattr(_attention, "FORCE_TILED", True)
    budget = core.max_loop_iterations()
    S = KT.TILED_BK
    while KT.tiled_loop_iterations(S + KT.TILED_BK, 40) <= budget:
        S += KT.TILED_BK
    assert _attention._use_tiled(backend.current(), 1, 1, S, 40)
    assert not _attention._use_tiled(backend.current(), 1, 1, S + KT.TILED_BK, 40)
    q, k, v = _qkv(rng, (1,), 1, S, 40)
    v[0, -1] += 100.0
    k[0, -1] = q[0, 0] * 3.0
    _check(rng, q, k, v)  # (the backward past the flash kernels' budget: the math form)


def test_decode_past_the_flash_kernels_loop_budget(rng, monkeypatch, loop_budget):
    """One query over more keys than the flash kernel's loop budget allows stays fused where the
    decode kernel takes it (its loops are bounded by its key range), and is right."""
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    loop_budget(4096 + 64)
    S, E = 5000, 16
    assert _attention._K.fwd_loop_iterations(S, E, _attention._K.block_for(1)) > 2080
    q, k, v = _qkv(rng, (2,), 1, S, E)
    pq, pk, pv = pr.tensor(q), pr.tensor(k), pr.tensor(v)
    monkeypatch.setattr(core, "POISON", False)
    dev = backend.current()
    before = dev.dispatches
    got = F.scaled_dot_product_attention(pq, pk, pv)
    assert dev.dispatches - before <= 2  # the decode kernel and its merge (the composite: 4)
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), E, S)[0])


def test_decode_lanes_rule():
    """The one-pass kernel's ranges on a GPU with subgroups of 32: the fewest reaching
    DECODE_LANES_FILL (query row, range) pairs while a range keeps DECODE_LANES_MIN_SPAN keys,
    at most DECODE_LANES_MAX_SPLITS; up to DECODE_LANES_MAX_L queries at any head dim."""
    K = _attention._KD

    class Dev:
        adapter_type = "DiscreteGPU"
        limits = {"max-compute-invocations-per-workgroup": 1024}
        subgroup_size, subgroups = 32, 1

    dev, A = Dev(), _attention
    cases = [(16, 1, 4096, 64), (32, 1, 4096, 128), (64, 1, 16384, 64), (8, 4, 4096, 128),
             (128, 4, 2048, 128), (96, 8, 512, 64), (32, 2, 1024, 64), (3, 1, 100000, 96)]  # fmt: skip
    for nbh, L, S, E in cases:
        lanes = A._decode_lanes(dev, E)
        c = K.padded_dim(E) // 4  # (lanes: the largest power of two within c and the subgroup)
        assert lanes & (lanes - 1) == 0 and lanes <= min(32, c) < 2 * lanes
        p = A._decode_splits(dev, nbh, L, S, E)
        rows = A._decode_rows(L)
        pairs = nbh * -(-L // rows) * rows
        assert 1 <= p <= A.DECODE_LANES_MAX_SPLITS
        assert K.lanes_span(S, p, lanes) * (p - 1) < S  # every range holds keys
        assert p == 1 or K.lanes_span(S, p, lanes) >= A.DECODE_LANES_MIN_SPAN
        more = 2 * p
        assert (
            pairs * p >= A.DECODE_LANES_FILL
            or more > A.DECODE_LANES_MAX_SPLITS
            or K.lanes_span(S, more, lanes) < A.DECODE_LANES_MIN_SPAN
            or K.lanes_span(S, more, lanes) * (more - 1) >= S  # (a range would get no key)
        )
    # (the measured choices: 16 ranges for one query a head at 16 and 32 heads over 4,096 keys)
    assert A._decode_splits(dev, 16, 1, 4096, 64) == A._decode_splits(dev, 32, 1, 4096, 128) == 16
    assert A._decode_splits(dev, 128, 4, 2048, 128) == 2
    assert A._decode_splits(dev, 96, 8, 512, 64) == 1  # (8 queries a key: compute-bound)
    assert A._decode_splits(dev, 16, A.DECODE_LANES_MAX_L, 4096, 128) >= 1
    assert A._decode_splits(dev, 16, A.DECODE_LANES_MAX_L + 1, 4096, 128) == 0


@pytest.mark.parametrize("lanes", [False, True], ids=["two-pass", "one-pass"])
def test_decode_within_the_loop_budget(monkeypatch, lanes):
    """The decode rule admits its ranges only where their loops fit the device's budget
    (decode_loop_iterations, decode_lanes_loop_iterations): one iteration short of them, the
    two-pass kernel's call goes to another kernel; the one-pass kernel's takes more ranges, each
    within the budget, or goes to another kernel."""
    K = _attention._KD
    dev = backend.current()
    if lanes and not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(K, "DECODE_SG", lanes)
    S, E, L = 4096, 64, 3
    lanes = _attention._decode_lanes(dev, E)
    p = _attention._decode_splits(dev, 1, L, S, E)
    assert p >= 1

    def need(p):
        if lanes:
            return K.decode_lanes_loop_iterations(S, p, E, lanes, _attention._decode_rows(L))
        return K.decode_loop_iterations(S, p, E)

    monkeypatch.setattr(_attention, "max_loop_iterations", lambda: need(p))
    assert _attention._decode_splits(dev, 1, L, S, E) == p
    monkeypatch.setattr(_attention, "max_loop_iterations", lambda: need(p) - 1)
    more = _attention._decode_splits(dev, 1, L, S, E)
    if not lanes:
        assert more == 0
    else:
        assert more == 0 or (more > p and need(more) <= need(p) - 1)
        monkeypatch.setattr(_attention, "max_loop_iterations", lambda: 1)
        assert _attention._decode_splits(dev, 1, L, S, E) == 0  # (no count of ranges fits)


@pytest.mark.parametrize(
    "L,S,E,kw",
    [
        (32, 32, 32, {}),  # one block, one tile
        (70, 45, 20, {"is_causal": True}),  # ragged blocks and tiles, causal tiles skipped
        (7, 129, 8, {"is_causal": True}),  # fewer queries than keys: keys past every query
        (129, 7, 32, {}),
        (33, 65, 32, {"mask": "bool"}),  # with a query whose every key is masked
        (40, 50, 17, {"mask": "float"}),  # -inf columns
        (1, 1, 1, {}),
    ],
    ids=["one-tile", "causal-ragged", "causal-wide", "tall", "bool-mask", "float-mask", "E1"],
)
def test_tiled_backward(rng, monkeypatch, L, S, E, kw):
    """The register-tiled backward (kernels/attention_tiled_bwd.py: blocks of 32 rows, what a
    GPU takes for E <= 64), forced here whatever the device (E <= 32 fits lavapipe's workgroup
    memory): dq, dk, dv against torch within the flash kernels' bounds, with ragged tiles,
    causal skipping, masks and a query with every key masked."""
    from pyrite.kernels import attention_tiled_bwd as KB

    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", True)
    assert _attention._use_tiled_bwd(backend.current(), L, S, E)
    made = []
    for name in ("attn_dq_tiled_kernel", "attn_dkv_tiled_kernel"):
        real = getattr(KB, name)
        monkeypatch.setattr(KB, name, lambda *a, _r=real, **k: made.append(1) or _r(*a, **k))
    kw = _masked(rng, kw, L, S, dead=min(2, L - 1))
    _check(rng, *_qkv(rng, (2, 3), L, S, E), **kw)
    assert len(made) == 2  # (both gradients came from the tiled kernels)


def test_tiled_backward_rule(monkeypatch):
    """The tiled backward runs on GPUs for E <= 128 where its workgroup memory (43 KiB at E = 64,
    27 KiB at E <= 32, 36 KiB in blocks of 16 past 64) fits; at E <= 32 only with few per-row
    workgroups; never on a CPU adapter unless forced, nor past E = 128 or the loop budget."""
    from pyrite.kernels import attention_tiled_bwd as KB

    gpu, cpu, small = _devices(49152, 32768)
    use = _attention._use_tiled_bwd
    assert KB.bwd_shared_bytes(64) <= 49152 < KB.bwd_shared_bytes(64) + 16384
    assert KB.bwd_shared_bytes(32) <= 32768 < KB.bwd_shared_bytes(33)
    assert use(gpu, 128, 128, 64) and use(gpu, 4096, 4096, 64) and use(gpu, 1, 1, 1)
    assert use(gpu, 128, 128, 64, 32 * 12)  # (E > 32: whatever the workgroups)
    assert use(gpu, 128, 128, 128) and use(gpu, 512, 512, 80, 32)  # (blocks of 16: 36 KiB)
    assert KB.bwd_shared_bytes(128) <= 49152 and KB.bwd_tb(128) == 16 and KB.bwd_tb(64) == 32
    assert not use(gpu, 128, 128, 129) and not use(cpu, 128, 128, 64)
    assert use(small, 128, 128, 32) and not use(small, 128, 128, 33)
    # E <= 32: only while the per-row kernels would have too few workgroups
    few = _attention.TILED_BWD_SMALL_E_GROUPS
    assert use(gpu, 64, 64, 32, 32) and use(gpu, 512, 512, 32, few // 8 - 1)
    assert not use(gpu, 512, 512, 32, few // 8) and not use(gpu, 64, 64, 16, few)
    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", True)
    assert use(cpu, 128, 128, 64)
    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", False)
    assert not use(gpu, 128, 128, 64)


@pytest.mark.parametrize("rpt,tb", [(2, 32), (4, 32), (2, 16), (4, 16)])
def test_tiled_backward_variants(rng, monkeypatch, rpt, tb):
    """Every spelling of the tiled backward (2 rows an invocation or 4; blocks of 32 rows, or of
    16 as head dims past 64 take on a GPU, each invocation then holding 2 columns) gives torch's
    gradients: ragged causal tiles, a bool mask with a query whose every key is masked (dropout:
    tests/test_attention_dropout.py's "tiled-bwd" kernels)."""
    from pyrite.kernels import attention_tiled_bwd as KB

    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", True)
    monkeypatch.setattr(_attention, "FORCE_TILED_BWD_TB", tb)
    monkeypatch.setattr(KB, "BWD_RPT", rpt)
    _check(rng, *_qkv(rng, (2, 3), 70, 45, 20), is_causal=True)
    kw = _masked(rng, {"mask": "bool"}, 33, 97, dead=3)
    _check(rng, *_qkv(rng, (2, 3), 33, 97, 32), **kw)


DS_CASES = {
    "causal-ragged": ((2, 3), 70, 45, 20, {"is_causal": True}),
    "causal-tall": ((1, 2), 150, 140, 24, {"is_causal": True}),
    "bool-mask": ((2, 3), 33, 97, 32, {"mask": "bool"}),
    "float-mask": ((2, 3), 40, 29, 16, {"mask": "float"}),
    "one-row": ((1, 1), 1, 1, 1, {}),
    "heads-inside": ((2, 3), 37, 53, 8, {"_transform": lambda x: x.transpose(1, 2)}),
    "broadcast-kv": ((2, 3), 45, 31, 16, {"kv_lead": (2, 1)}),
    "float16": ((2, 3), 33, 40, 16, {"dtype": "float16", "is_causal": True}),
}


@pytest.mark.parametrize("gemm3", [False, True], ids=["dq-gemm", "three-gemms"])
@pytest.mark.parametrize("rpt,tb", [(2, 32), (4, 16)])
@pytest.mark.parametrize("case", list(DS_CASES))
def test_ds_gemm_backward(rng, monkeypatch, case, rpt, tb, gemm3):
    """dq from the stored dS (nn/_attention.py DS_GEMM: the dk/dv kernel writes dS, dq is one
    GEMM), and with GEMM_PRODUCTS dk and dv too (the kernel writes P beside dS and sums
    nothing), give torch's gradients: ragged and skipped causal tiles (their dS and P written
    as 0), masks with a dead query, the heads-inside layout, keys broadcast over heads; and the
    dq kernel does not run."""
    from pyrite.kernels import attention_tiled_bwd as KB

    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", True)
    monkeypatch.setattr(_attention, "FORCE_TILED_BWD_TB", tb)
    monkeypatch.setattr(_attention, "DS_GEMM", True)
    monkeypatch.setattr(_attention, "GEMM_PRODUCTS", gemm3)
    monkeypatch.setattr(KB, "BWD_RPT", rpt)
    made = []
    real_dq, real_dkv = KB.attn_dq_tiled_kernel, KB.attn_dkv_tiled_kernel
    monkeypatch.setattr(
        KB, "attn_dq_tiled_kernel", lambda *a, **k: made.append("dq") or real_dq(*a, **k)
    )
    monkeypatch.setattr(KB, "attn_dkv_tiled_kernel",
                        lambda *a, **k: made.append((k.get("ds_out"), k.get("p_out")))
                        or real_dkv(*a, **k))  # fmt: skip
    lead, L, S, E, kw = DS_CASES[case]
    kw = _masked(rng, kw, L, S, dead=min(2, L - 1))
    q, k, v = _qkv(rng, lead, L, S, E)
    kv_lead = kw.pop("kv_lead", None)
    if kv_lead is not None:
        k, v = k[:, :1], v[:, :1]
    if "_transform" in kw:  # (B, H, L, E) stored as (B, L, H, E)
        q, k, v = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v))
    _check(rng, q, k, v, **kw)
    assert made == [(True, gemm3)]


def test_ds_gemm_rule(monkeypatch):
    """The stored-dS backward is taken by its measured rule (head dim above DS_GEMM_MIN_E, dS
    between DS_GEMM_MIN_BYTES and DS_GEMM_MAX_BYTES), and DS_GEMM forces it either way within
    the cap."""
    use = _attention._use_ds_gemm
    assert use(384, 128, 128, 64)  # BERT-base: 25 MB
    assert not use(384, 128, 128, 32)  # E = 32: the dq kernel's recomputation is cheap
    assert not use(12, 128, 128, 64)  # BERT-base batch 1: 0.8 MB
    lo, cap = _attention.DS_GEMM_MIN_BYTES, _attention.DS_GEMM_MAX_BYTES
    assert use(1, lo // 4 // 64, 64, 64) and not use(1, lo // 4 // 64 - 1, 64, 64)
    assert use(1, cap // 4 // 64, 64, 64) and not use(1, cap // 4 // 64 + 1, 64, 64)
    assert not use(16, 4096, 4096, 64)  # causal 4096 x 16 heads: 1 GiB
    monkeypatch.setattr(_attention, "DS_GEMM", True)
    assert use(12, 128, 128, 32)
    assert not use(1, cap // 4 // 64 + 1, 64, 64)
    monkeypatch.setattr(_attention, "DS_GEMM", False)
    assert not use(384, 128, 128, 64)


@pytest.mark.parametrize("heavy_first", [True, False])
@pytest.mark.parametrize("tiled", [False, True], ids=["flash", "tiled"])
def test_causal_block_order(rng, monkeypatch, heavy_first, tiled):
    """Causal kernels number their workgroups heaviest block first, batch·heads inside
    (kernels/attention.HEAVY_FIRST), or batch·head-major: both give torch's forward and
    gradients, over several heads and ragged blocks (the tiled kernels forced, E <= 32)."""
    from pyrite.kernels import attention as K

    monkeypatch.setattr(K, "HEAVY_FIRST", heavy_first)
    monkeypatch.setattr(_attention, "FORCE_TILED", tiled)
    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", tiled)
    monkeypatch.setattr(_attention, "FORCE_SPLITS", 1)
    _check(rng, *_qkv(rng, (2, 3), 150, 140, 24), is_causal=True)


def test_tiled_backward_longest_loop_within_the_budget(rng, monkeypatch, loop_budget):
    """Under a small loop budget the longest key and query walks the tiled backward's rule admits
    (bwd_loop_iterations) run to their last tile: dq, dk and dv against torch, with the last key
    the queries' best match (its gradient is large only if the walks reached it); one tile more
    and the rule refuses (the math form takes the backward)."""
    from pyrite.kernels import attention_tiled_bwd as KB

    monkeypatch.setattr(_attention, "FORCE_TILED_BWD", True)
    loop_budget(400)
    budget, E = core.max_loop_iterations(), 24
    n = 32
    while KB.bwd_loop_iterations(n + 32, E) <= budget:
        n += 32
    dev = backend.current()
    assert _attention._use_tiled_bwd(dev, n, n, E) and not _attention._use_tiled_bwd(
        dev, n + 32, n, E
    )
    made = []
    real = KB.attn_dq_tiled_kernel
    monkeypatch.setattr(KB, "attn_dq_tiled_kernel", lambda *a, **k: made.append(1) or real(*a, **k))
    q, k, v = _qkv(rng, (1, 2), 40, n, E)
    k[..., -1, :] = q[..., :1, :].mean(-2) * 2.0
    v[..., -1, :] += 10.0
    _check(rng, q, k, v)
    assert made  # (the tiled kernels took it)


def test_bfloat16_with_a_float32_mask_and_gradients(rng):
    """bf16 q, k, v that require grad with a float32 additive mask (nn.Transformer(...)
    .bfloat16() with generate_square_subsequent_mask): the recorded composite adds the mask in
    float32 and rounds once to bf16, as the no-grad path does; forward and gradients as torch's
    within bf16's rounding (it raised a matmul dtype error)."""
    q, k, v = _qkv(rng, (2, 3), 9, 7, 8)
    m = np.triu(np.full((9, 7), -np.inf, np.float32), 1)
    m[:, 0] = 0.0
    m += rng.standard_normal((9, 7)).astype(np.float32) * (np.isfinite(m))
    pq, pk, pv = (pr.tensor(a).to(pr.bfloat16).requires_grad_() for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a).to(torch.bfloat16).requires_grad_() for a in (q, k, v))
    got = F.scaled_dot_product_attention(pq, pk, pv, attn_mask=pr.tensor(m))
    want = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.tensor(m))
    assert got.dtype is pr.bfloat16 and want.dtype is torch.bfloat16
    u = unit_roundoff("bfloat16")
    # (each of softmax's inputs and both products round to bf16: a few ulps of the output)
    tol = dict(atol=16 * u * (1 + float(want.detach().float().abs().max())), rtol=8 * u)
    assert_close(got.float().detach().numpy(), want.float().detach().numpy(), **tol)
    w = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (got.float() * pr.tensor(w)).sum().backward()
    (want.float() * torch.tensor(w)).sum().backward()
    for name, p_, t_ in zip("qkv", (pq, pk, pv), (tq, tk, tv)):
        ref = t_.grad.float().numpy()
        g = dict(atol=64 * u * (1 + float(np.abs(ref).max())), rtol=16 * u)
        assert_close(p_.grad.float().numpy(), ref, msg=f"d{name}", **g)


def test_shuffle_variants_as_text():
    """The tiled kernels' subgroup-shuffle spellings (P_SHUFFLE: lavapipe has no subgroups, so
    their results are tested on the GPUs, where scripts/gpu_session.sh attn-db and attn-bwd-shfl
    run this file with them forced on): the forward's P·V and the backward's products take their
    weights by shuffles, with no transposed tile in workgroup memory and fewer barriers."""
    from pyrite.kernels import attention_tiled as KT
    from pyrite.kernels import attention_tiled_bwd as KB

    def text(k):
        return k.wgsl if hasattr(k, "wgsl") else str(k)

    args = (64, 4, False, "bool", "f32", "f32", "f32", "u32", "f32")
    plain, shfl = (text(KT.attn_fwd_tiled_kernel(*args, sg=1, pshfl=p)) for p in (False, True))
    loop = lambda s: s[s.index("for (var tt") :]  # noqa: E731
    assert loop(plain).count("workgroupBarrier") == loop(shfl).count("workgroupBarrier") + 2
    assert "subgroupShuffleXor(p0, 7u)" in shfl and "kp[(tx * 4" not in shfl
    bargs = (32, 4, True, "none", "f32", "f32", "f32", None, "f32", "f32", "f32")
    for ds_out in (False, True):
        plain, shfl = (
            text(KB.attn_dkv_tiled_kernel(*bargs, ds_out=ds_out, sg=sg)) for sg in (0, 2)
        )
        assert "var<workgroup> pt:" in plain and "var<workgroup> pt:" not in shfl
        assert ("var<workgroup> dst:" in shfl) == ds_out
        assert "subgroupShuffle(ds0, sl)" in shfl and shfl.startswith("enable subgroups;")
        fewer = 0 if ds_out else 1
        assert plain.count("workgroupBarrier") == shfl.count("workgroupBarrier") + fewer
    plain, shfl = (text(KB.attn_dq_tiled_kernel(*bargs, sg=sg)) for sg in (0, 1))
    assert (
        "var<workgroup> dst:" in plain and "dst" not in shfl and "@builtin(subgroup_size)" in shfl
    )


@pytest.mark.parametrize(
    "B,H,L,S,E,kw",
    [
        (1, 3, 1, 700, 64, {}),
        (2, 2, 3, 900, 32, {"mask": "bool"}),  # (a query with every key masked: l = 0)
        (1, 2, 9, 1500, 20, {"is_causal": True}),  # two blocks of rows, causal
        (1, 4, 1, 3000, 128, {"mask": "float"}),
    ],
    ids=["one-row", "bool", "causal-9", "float-E128"],
)
def test_decode_fused_merge(rng, monkeypatch, B, H, L, S, E, kw):
    """The one-pass decode kernel merging its key ranges in the same dispatch (the last
    workgroup of a block waits for the others' partials in a persistent scratch): forward and
    gradients match torch over several calls in turn (the scratch and the counters are left
    clean for the next call), with masks, causal blocks and a query with every key masked; no
    merge kernel runs."""
    dev = backend.current()
    if not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention, "DECODE_FUSED_MERGE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", True)
    monkeypatch.setattr(_attention._KD, "MERGE_SPINS", 64)  # (lavapipe's loop budget)
    monkeypatch.setattr(_attention, "FORCE_SPLITS", None)
    p = _attention._decode_splits(dev, B * H, L, S, E)
    lanes, rows = _attention._decode_lanes(dev, E), _attention._decode_rows(L)
    assert p >= 2 and _attention._fused_merge(dev, B * H, L, S, E, p, lanes, rows)
    for _ in range(2):
        q, k, v = _qkv(rng, (B, H), L, S, E)
        kws = _masked(rng, dict(kw), L, S, dead=0)
        _check(rng, q, k, v, **kws)
    kernels = []
    orig = dev.dispatch

    def capture(src, buffers, info, grid):
        kernels.append(src.wgsl)
        orig(src, buffers, info, grid)

    monkeypatch.setattr(dev, "dispatch", capture)
    q, k, v = _qkv(rng, (B, H), L, S, E)
    got = F.scaled_dot_product_attention(pr.tensor(q), pr.tensor(k), pr.tensor(v))
    want = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v))
    assert_close(got.numpy(), want.numpy(), atol=_tol(want.numpy(), E, S)[0])
    attn = [w for w in kernels if "q_" in w or "part" in w]
    assert len(attn) == 1 and "atomicAdd(&mp[" in attn[0]


@pytest.mark.parametrize("step", [2, 8])
def test_decode_keys_a_step(rng, monkeypatch, step):
    """The one-pass kernel with other than 4 keys a key slot's step (DECODE_STEP, an A/B knob)
    stays right: ranges, the online softmax's rescale a step and the loop budget follow it."""
    dev = backend.current()
    if not dev.subgroups:
        pytest.skip("the one-pass decode kernel needs subgroups")
    monkeypatch.setattr(_attention, "FORCE_DECODE", True)
    monkeypatch.setattr(_attention._KD, "DECODE_SG", True)
    monkeypatch.setattr(_attention._KD, "DECODE_STEP", step)
    q, k, v = _qkv(rng, (2, 3), 3, 1100, 40)
    _check(rng, q, k, v, **_masked(rng, {"mask": "bool"}, 3, 1100, dead=0))


def test_decode_fused_merge_within_the_loop_budget(monkeypatch):
    """The in-kernel merge is taken only where an invocation's walk and its merge's waits at
    their worst (decode_lanes_loop_iterations + fused_merge_loop_iterations) fit the device's
    loop budget: at exactly that budget it is taken, one iteration short the merge kernel runs."""
    K = _attention._KD
    dev = backend.current()
    monkeypatch.setattr(_attention, "DECODE_FUSED_MERGE", True)
    nbh, L, S, E, splits, lanes = 4, 3, 4000, 64, 8, 8
    rows = _attention._decode_rows(L)
    need = K.decode_lanes_loop_iterations(S, splits, E, lanes, rows)
    need += K.fused_merge_loop_iterations(splits, rows, E, K.MERGE_SPINS)
    monkeypatch.setattr(_attention, "max_loop_iterations", lambda: need)
    assert _attention._fused_merge(dev, nbh, L, S, E, splits, lanes, rows)
    monkeypatch.setattr(_attention, "max_loop_iterations", lambda: need - 1)
    assert not _attention._fused_merge(dev, nbh, L, S, E, splits, lanes, rows)
    assert not _attention._fused_merge(dev, nbh, L, S, E, 1, lanes, rows)  # (nothing to merge)
