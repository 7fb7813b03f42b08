"""The fused fast paths (nn/_fastpaths.py, kernels/fastpaths.py): flash-attn's apply_rotary_emb
and causal-conv1d's causal_conv1d_fn against references written with torch ops from their
definitions (as those libraries' own tests do), on awkward shapes and strided inputs, with
gradients against torch autograd of the reference, the dispatch counts, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.ops import core
from pyrite.testing.tolerance import assert_close

U32 = 2.0**-24
U16 = 2.0**-11
HAS_F16 = backend.current().has_f16


# ---- references (torch, float64) ------------------------------------------------------------
def rotary_ref(x, cos, sin, interleaved=False, offsets=0):
    """flash-attn's apply_rotary_emb_torch, with seqlen_offsets (rows past seqlen_ro: identity,
    as flash-attn's masked loads)."""
    B, T = x.shape[:2]
    half = cos.shape[1]
    ro = 2 * half
    if isinstance(offsets, torch.Tensor):
        idx = torch.arange(T)[None, :] + offsets.long()[:, None]  # (B, T)
    else:
        idx = (torch.arange(T) + offsets)[None, :].expand(B, T)
    ok = (idx < cos.shape[0])[..., None]
    c = torch.where(ok, cos[idx.clamp(max=cos.shape[0] - 1)], torch.ones(()))
    s = torch.where(ok, sin[idx.clamp(max=cos.shape[0] - 1)], torch.zeros(()))
    c, s = c[:, :, None], s[:, :, None]  # (B, T, 1, half)
    xr = x[..., :ro]
    if interleaved:
        C, S = c.repeat_interleave(2, -1), s.repeat_interleave(2, -1)
        rot = torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2)
    else:
        C, S = torch.cat((c, c), -1), torch.cat((s, s), -1)
        x1, x2 = xr.chunk(2, -1)
        rot = torch.cat((-x2, x1), -1)
    return torch.cat((xr * C + rot * S, x[..., ro:]), -1)


def conv_ref(x, w, b=None, activation=None):
    """causal-conv1d's causal_conv1d_ref."""
    T = x.shape[-1]
    out = TF.conv1d(x, w.unsqueeze(1), b, padding=w.shape[1] - 1, groups=w.shape[0])[..., :T]
    return out if activation is None else TF.silu(out)


def _t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def _f(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _cos_sin(rng, seqlen_ro, half):
    ang = rng.uniform(-4, 4, (seqlen_ro, half))
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def _rot_tol(x, dtype="f32"):
    # two products and a sum of |x|·1 terms: 3 roundings of |x0| + |x1| (cos² + sin² = 1)
    u = U32 if dtype == "f32" else U16
    return 8 * u * float(np.abs(x).max()) + 1e-30


def _x_view(rng, B, T, H, Dh, kind):
    """x of shape (B, T, H, Dh) as a contiguous tensor, q/k sliced from a fused qkv, or a
    transposed (B, H, T, Dh) tensor; with its numpy value."""
    if kind == "contiguous":
        a = _f(rng, (B, T, H, Dh))
        return pr.tensor(a), a
    if kind == "qkv":
        a = _f(rng, (B, T, 3, H, Dh))
        return pr.tensor(a)[:, :, 1], a[:, :, 1]
    a = _f(rng, (B, H, T, Dh))
    return pr.tensor(a).transpose(1, 2), a.transpose(0, 2, 1, 3)


# ---- rotary: forward ---------------------------------------------------------------------
ROT_SHAPES = [  # (batch, seqlen, nheads, headdim, rotary_dim / 2)
    (1, 1, 1, 2, 1),
    (2, 7, 3, 5, 2),
    (3, 13, 2, 64, 31),
    (1, 31, 4, 128, 32),
    (2, 3, 1, 17, 8),
]


@pytest.mark.parametrize("shape", ROT_SHAPES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("kind", ["contiguous", "qkv", "transposed"])
def test_rotary_matches_reference(shape, interleaved, kind, rng):
    B, T, H, Dh, half = shape
    x, xa = _x_view(rng, B, T, H, Dh, kind)
    off = int(rng.integers(0, 4))
    c, s = _cos_sin(rng, T + off + 2, half)
    got = F.apply_rotary_emb(x, pr.tensor(c), pr.tensor(s), interleaved, seqlen_offsets=off)
    assert got.is_contiguous() and tuple(got.shape) == (B, T, H, Dh)
    want = rotary_ref(_t64(xa), _t64(c), _t64(s), interleaved, off).numpy()
    assert_close(got.numpy(), want, atol=_rot_tol(xa), rtol=0)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_tensor_offsets_and_rows_past_seqlen_ro(interleaved, rng):
    """A KV cache's per-sequence positions; a row past seqlen_ro stays unrotated."""
    B, T, H, Dh, half = 4, 5, 3, 12, 4
    x, xa = _x_view(rng, B, T, H, Dh, "qkv")
    seqlen_ro = 11
    c, s = _cos_sin(rng, seqlen_ro, half)
    offs = np.array([0, 3, 6, 9], dtype=np.int32)  # 9 + 4 = 13 > 10: rows past the table
    got = F.apply_rotary_emb(
        x, pr.tensor(c), pr.tensor(s), interleaved, seqlen_offsets=pr.tensor(offs)
    )
    want = rotary_ref(_t64(xa), _t64(c), _t64(s), interleaved, torch.tensor(offs)).numpy()
    assert_close(got.numpy(), want, atol=_rot_tol(xa), rtol=0)


def test_rotary_strided_cos_sin(rng):
    """cos and sin read through their strides (slices of one (seqlen, rotary_dim) table)."""
    B, T, H, Dh, half = 2, 7, 2, 10, 3
    xa = _f(rng, (B, T, H, Dh))
    ang = rng.uniform(-3, 3, (T + 1, 2 * half))
    tab = np.concatenate([np.cos(ang), np.sin(ang)], 1).astype(np.float32)
    tp = pr.tensor(tab)
    c, s = tp[:, 1 : 2 * half : 2], tp[:, 2 * half + 1 :: 2]
    got = F.apply_rotary_emb(pr.tensor(xa), c, s)
    want = rotary_ref(_t64(xa), _t64(tab[:, 1 : 2 * half : 2]), _t64(tab[:, 2 * half + 1 :: 2]))
    assert_close(got.numpy(), want.numpy(), atol=_rot_tol(xa), rtol=0)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_inplace_writes_only_its_view(interleaved, rng):
    B, T, H, Dh, half = 2, 5, 3, 9, 3
    qkv_a = _f(rng, (B, T, 3, H, Dh))
    qkv = pr.tensor(qkv_a)
    k = qkv[:, :, 1]
    c, s = _cos_sin(rng, T, half)
    r = F.apply_rotary_emb(k, pr.tensor(c), pr.tensor(s), interleaved, inplace=True)
    assert r is k
    want = qkv_a.astype(np.float64).copy()
    want[:, :, 1] = rotary_ref(_t64(qkv_a[:, :, 1]), _t64(c), _t64(s), interleaved).numpy()
    assert_close(qkv.numpy(), want, atol=_rot_tol(qkv_a), rtol=0)


def test_rotary_varlen(rng):
    """cu_seqlens: a packed batch, each sequence from its own start (and offset)."""
    lens = [3, 0, 7, 1]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    H, Dh, half = 2, 8, 3
    xa = _f(rng, (cu[-1], H, Dh))
    c, s = _cos_sin(rng, 12, half)
    offs = np.array([1, 0, 4, 2], dtype=np.int32)
    got = F.apply_rotary_emb(
        pr.tensor(xa), pr.tensor(c), pr.tensor(s), seqlen_offsets=pr.tensor(offs),
        cu_seqlens=pr.tensor(cu), max_seqlen=max(lens),
    )  # fmt: skip
    parts = []
    for i, n in enumerate(lens):
        seq = _t64(xa[cu[i] : cu[i + 1]])[None]
        parts.append(rotary_ref(seq, _t64(c), _t64(s), False, int(offs[i]))[0])
    assert_close(got.numpy(), torch.cat(parts).numpy(), atol=_rot_tol(xa), rtol=0)


@pytest.mark.skipif(not HAS_F16, reason="the device has no shader-f16")
@pytest.mark.parametrize("interleaved", [False, True])
def test_rotary_f16(interleaved, rng):
    B, T, H, Dh, half = 2, 7, 3, 20, 7
    xa = _f(rng, (B, T, H, Dh)).astype(np.float16)
    c, s = (a.astype(np.float16) for a in _cos_sin(rng, T, half))
    got = F.apply_rotary_emb(pr.tensor(xa), pr.tensor(c), pr.tensor(s), interleaved)
    assert got.dtype is pr.float16
    want = rotary_ref(_t64(xa), _t64(c), _t64(s), interleaved).numpy()
    # f32 arithmetic, one f16 rounding of the result
    assert_close(got.numpy().astype(np.float64), want, atol=_rot_tol(xa, "f16"), rtol=0)


# ---- rotary: gradients and dispatches ------------------------------------------------------
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("tensor_offsets", [False, True])
def test_rotary_grad(interleaved, tensor_offsets, rng):
    B, T, H, Dh, half = 3, 7, 2, 11, 4
    base = _f(rng, (B, T, 3, H, Dh))
    c, s = _cos_sin(rng, T + 5, half)
    offs = np.array([0, 5, 3], dtype=np.int32) if tensor_offsets else 2
    w = _f(rng, (B, T, H, Dh))
    P = pr.tensor(base).requires_grad_()
    out = F.apply_rotary_emb(
        P[:, :, 0], pr.tensor(c), pr.tensor(s), interleaved,
        seqlen_offsets=pr.tensor(offs) if tensor_offsets else offs,
    )  # fmt: skip
    (out * pr.tensor(w)).sum().backward()
    Tt = _t64(base).requires_grad_()
    o = torch.tensor(offs) if tensor_offsets else offs
    (rotary_ref(Tt[:, :, 0], _t64(c), _t64(s), interleaved, o) * _t64(w)).sum().backward()
    assert_close(P.grad.numpy(), Tt.grad.numpy(), atol=_rot_tol(w), rtol=0)


def test_rotary_inplace_grad(rng):
    """inplace on a recorded (non-leaf) tensor: recorded as the op and a copy_ into it."""
    B, T, H, Dh, half = 2, 5, 2, 8, 2
    a = _f(rng, (B, T, H, Dh))
    c, s = _cos_sin(rng, T, half)
    w = _f(rng, (B, T, H, Dh))
    P = pr.tensor(a).requires_grad_()
    y = P * 2.0
    r = F.apply_rotary_emb(y, pr.tensor(c), pr.tensor(s), inplace=True)
    (r * pr.tensor(w)).sum().backward()
    Tt = _t64(a).requires_grad_()
    (rotary_ref(Tt * 2.0, _t64(c), _t64(s)) * _t64(w)).sum().backward()
    assert_close(P.grad.numpy(), Tt.grad.numpy(), atol=2 * _rot_tol(w), rtol=0)


def test_rotary_double_backward(rng):
    """grad of |R x|² is 2x (R orthogonal): its own backward goes through the rule again."""
    B, T, H, Dh, half = 2, 3, 2, 6, 2
    a = _f(rng, (B, T, H, Dh))
    c, s = _cos_sin(rng, T, half)
    w = _f(rng, (B, T, H, Dh))
    P = pr.tensor(a).requires_grad_()
    out = F.apply_rotary_emb(P, pr.tensor(c), pr.tensor(s), True)
    (gx,) = pr.autograd.grad((out * out).sum(), [P], create_graph=True)
    (gx * pr.tensor(w)).sum().backward()
    Tt = _t64(a).requires_grad_()
    o = rotary_ref(Tt, _t64(c), _t64(s), True)
    (gt,) = torch.autograd.grad((o * o).sum(), [Tt], create_graph=True)
    (gt * _t64(w)).sum().backward()
    assert_close(gx.detach().numpy(), gt.detach().numpy(), atol=4 * _rot_tol(a), rtol=0)
    assert_close(P.grad.numpy(), Tt.grad.numpy(), atol=8 * _rot_tol(w), rtol=0)


def test_rotary_one_dispatch(rng, monkeypatch):
    monkeypatch.setattr(core, "POISON", False)
    dev = backend.current()
    x, _ = _x_view(rng, 2, 7, 3, 16, "qkv")
    c, s = (pr.tensor(a) for a in _cos_sin(rng, 9, 5))
    offs = pr.tensor(np.array([1, 2], dtype=np.int32))
    for kw in ({}, {"interleaved": True}, {"seqlen_offsets": offs}, {"inplace": True}):
        before = dev.dispatches
        F.apply_rotary_emb(x, c, s, **kw)
        assert dev.dispatches - before == 1, kw
    P = pr.tensor(_f(rng, (2, 7, 3, 16))).requires_grad_()
    out = F.apply_rotary_emb(P, c, s)
    g = pr.tensor(_f(rng, (2, 7, 3, 16)))
    before = dev.dispatches
    out.backward(g)
    assert dev.dispatches - before == 1  # the conjugate rotation, kept as P.grad


def test_rotary_errors(rng):
    x = pr.tensor(_f(rng, (2, 5, 3, 8)))
    c, s = (pr.tensor(a) for a in _cos_sin(rng, 6, 3))
    with pytest.raises(ValueError, match=r"rotary_dim must be <= headdim"):
        F.apply_rotary_emb(x, *(pr.tensor(a) for a in _cos_sin(rng, 6, 5)))
    with pytest.raises(ValueError, match=r"cos and sin must both be \(seqlen_ro"):
        F.apply_rotary_emb(x, c, pr.tensor(_f(rng, (6, 2))))
    with pytest.raises(ValueError, match=r"cos and sin must both be"):
        F.apply_rotary_emb(x, c[None], s[None])
    with pytest.raises(ValueError, match=r"x must be \(batch, seqlen, nheads, headdim\)"):
        F.apply_rotary_emb(x[0], c, s)
    with pytest.raises(ValueError, match=r"seqlen_offsets \+ seqlen must be <= seqlen_ro"):
        F.apply_rotary_emb(x, c, s, seqlen_offsets=2)
    with pytest.raises(ValueError, match=r"seqlen_offsets must have shape \(batch,\)"):
        F.apply_rotary_emb(x, c, s, seqlen_offsets=pr.tensor(np.zeros(3, np.int32)))
    with pytest.raises(TypeError, match=r"seqlen_offsets must be an int"):
        F.apply_rotary_emb(x, c, s, seqlen_offsets=pr.tensor(np.zeros(2, np.float32)))
    with pytest.raises(TypeError, match=r"x must be a float32 or float16"):
        F.apply_rotary_emb(pr.tensor(np.zeros((2, 5, 3, 8), np.int32)), c, s)
    with pytest.raises(ValueError, match=r"max_seqlen must be given"):
        F.apply_rotary_emb(x[0], c, s, cu_seqlens=pr.tensor(np.array([0, 5], np.int32)))
    cg = c.clone().requires_grad_()
    out = F.apply_rotary_emb(x, cg, s)
    with pytest.raises(NotImplementedError, match=r"apply_rotary_emb.*cos and sin"):
        out.sum().backward()


# ---- causal conv1d -------------------------------------------------------------------------
CONV_SHAPES = [  # (batch, dim, seqlen, width)
    (1, 1, 1, 2),
    (2, 5, 7, 3),
    (3, 130, 13, 4),
    (2, 17, 1, 4),
    (1, 3, 31, 1),
    (2, 4, 3, 5),  # width past seqlen
]


def _conv_x(rng, B, Dm, T, kind, leaf=False):
    """x (batch, dim, seqlen) contiguous, channels-last (a transposed (batch, seqlen, dim)) or
    sliced; with the tensor it views (a leaf requiring grad when `leaf`) and x's numpy value."""
    if kind == "contiguous":
        a = _f(rng, (B, Dm, T))
        base = pr.tensor(a).requires_grad_(leaf)
        return base, base, a
    if kind == "channels_last":
        a = _f(rng, (B, T, Dm))
        base = pr.tensor(a).requires_grad_(leaf)
        return base.transpose(1, 2), base, a.transpose(0, 2, 1)
    a = _f(rng, (B, 2 * Dm, T + 1))  # sliced: every other channel, a time offset
    base = pr.tensor(a).requires_grad_(leaf)
    return base[:, ::2, 1:], base, a[:, ::2, 1:]


def _conv_tol(xa, wa, ba, W):
    # W + 1 terms of |w·x| (and the bias): a sum's rounding, silu's few ulps on top
    m = W * float(np.abs(wa).max()) * float(np.abs(xa).max() if xa.size else 0)
    m += float(np.abs(ba).max()) if ba is not None else 0.0
    return (W + 8) * 2 * U32 * m + 1e-30


@pytest.mark.parametrize("shape", CONV_SHAPES)
@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("kind", ["contiguous", "channels_last", "sliced"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_matches_reference(shape, activation, kind, with_bias, rng):
    B, Dm, T, W = shape
    x, _, xa = _conv_x(rng, B, Dm, T, kind)
    wa = _f(rng, (Dm, W))
    ba = _f(rng, (Dm,)) if with_bias else None
    got = F.causal_conv1d(
        x, pr.tensor(wa), pr.tensor(ba) if with_bias else None, activation=activation
    )
    if kind == "channels_last" and Dm > 1:
        assert got.stride()[1] == 1  # the output keeps x's layout, as torch.empty_like
    want = conv_ref(_t64(xa), _t64(wa), _t64(ba) if with_bias else None, activation).numpy()
    assert_close(got.numpy(), want, atol=_conv_tol(xa, wa, ba, W), rtol=0)


def test_conv_swish_is_silu_and_fn_alias(rng):
    x = pr.tensor(_f(rng, (2, 3, 9)))
    w = pr.tensor(_f(rng, (3, 4)))
    a = F.causal_conv1d_fn(x, w, None, activation="swish").numpy()
    b = F.causal_conv1d(x, w, activation="silu").numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not HAS_F16, reason="the device has no shader-f16")
def test_conv_f16(rng):
    B, Dm, T, W = 2, 7, 11, 4
    xa = _f(rng, (B, Dm, T)).astype(np.float16)
    wa = _f(rng, (Dm, W)).astype(np.float16)
    ba = _f(rng, (Dm,))  # an f32 bias with f16 x and weight
    got = F.causal_conv1d(pr.tensor(xa), pr.tensor(wa), pr.tensor(ba), activation="silu")
    assert got.dtype is pr.float16
    want = conv_ref(_t64(xa), _t64(wa), _t64(ba), "silu").numpy()
    tol = _conv_tol(xa.astype(np.float32), wa.astype(np.float32), ba, W)
    assert_close(got.numpy().astype(np.float64), want, atol=tol, rtol=2 * U16)


def _conv_grads(rng, B, Dm, T, W, activation, kind, with_bias=True):
    # the pyrite leaf is the tensor x views (its .grad is compared through the same view)
    x, base, xa = _conv_x(rng, B, Dm, T, kind, leaf=True)
    wa = _f(rng, (Dm, W))
    ba = _f(rng, (Dm,))
    ga = _f(rng, (B, Dm, T))
    P = [pr.tensor(wa).requires_grad_(), pr.tensor(ba).requires_grad_() if with_bias else None]
    out = F.causal_conv1d(x, P[0], P[1], activation=activation)
    (out * pr.tensor(ga)).sum().backward()
    Tx = _t64(xa).requires_grad_()
    Tw, Tb = _t64(wa).requires_grad_(), _t64(ba).requires_grad_() if with_bias else None
    (conv_ref(Tx, Tw, Tb, activation) * _t64(ga)).sum().backward()
    return base, x, P, Tx, Tw, Tb, xa, wa, ba, ga


def _check_conv_grads(got, W):
    base, x, P, Tx, Tw, Tb, xa, wa, ba, ga = got
    B, Dm, T = xa.shape
    gx = base.grad
    # the view's part of the base's gradient
    gxv = pr.Tensor._make(gx._storage, x._shape, x._strides, x._offset, gx.dtype).numpy()
    gmax = float(np.abs(ga).max())
    assert_close(
        gxv,
        Tx.grad.numpy(),
        atol=(W + 8) * 2 * U32 * W * gmax * float(np.abs(wa).max()) * 2,
        rtol=0,
    )
    n = B * T
    tw = (n + 8) * 2 * U32 * gmax * max(float(np.abs(xa).max()), 1.0) * 2
    assert_close(P[0].grad.numpy(), Tw.grad.numpy(), atol=tw * (1 + W), rtol=0)
    if Tb is not None:
        assert_close(P[1].grad.numpy(), Tb.grad.numpy(), atol=tw * (1 + W), rtol=0)


@pytest.mark.parametrize("shape", [(1, 1, 1, 2), (2, 5, 7, 3), (3, 19, 13, 4), (2, 3, 2, 4)])
@pytest.mark.parametrize("activation", [None, "silu"])
@pytest.mark.parametrize("kind", ["contiguous", "channels_last", "sliced"])
def test_conv_grads(shape, activation, kind, rng):
    _check_conv_grads(_conv_grads(rng, *shape, activation, kind), shape[3])


def test_conv_grads_without_bias_and_many_chunks(rng):
    """B·T past one workgroup's chunk (CONV_WG · 64 elements): partial sums, then a sum."""
    _check_conv_grads(_conv_grads(rng, 2, 3, 2500, 4, "silu", "contiguous", False), 4)


def test_conv_dispatches(rng, monkeypatch):
    monkeypatch.setattr(core, "POISON", False)
    dev = backend.current()
    x = pr.tensor(_f(rng, (2, 7, 13))).requires_grad_()
    w = pr.tensor(_f(rng, (7, 4))).requires_grad_()
    b = pr.tensor(_f(rng, (7,))).requires_grad_()
    with pr.no_grad():
        before = dev.dispatches
        F.causal_conv1d(x, w, b, activation="silu")
        assert dev.dispatches - before == 1
    out = F.causal_conv1d(x, w, b, activation="silu")
    g = pr.tensor(_f(rng, (2, 7, 13)))
    before = dev.dispatches
    out.backward(g)
    assert dev.dispatches - before == 2  # dx; dw and db together (one chunk: no sum)


def test_conv_double_backward(rng):
    """A gradient penalty through the rule: create_graph records the composite formulas."""
    B, Dm, T, W = 2, 3, 6, 3
    xa, wa, ba = _f(rng, (B, Dm, T)), _f(rng, (Dm, W)), _f(rng, (Dm,))
    ga = _f(rng, (B, Dm, T))
    P = [pr.tensor(a).requires_grad_() for a in (xa, wa, ba)]
    Tt = [_t64(a).requires_grad_() for a in (xa, wa, ba)]
    for ins, f, ten, ag in (
        (P, F.causal_conv1d, pr.tensor, pr.autograd),
        (Tt, conv_ref, _t64, torch.autograd),
    ):
        out = f(*ins, activation="silu")
        gx, gw = ag.grad((out * ten(ga)).sum(), ins[:2], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
    for p, t in zip(P, Tt):
        ref = t.grad.numpy()
        assert_close(p.grad.numpy(), ref, atol=1e-4 * max(1.0, float(np.abs(ref).max())), rtol=0)


def test_conv_past_the_loop_budget_composes(rng, loop_budget, monkeypatch):
    """A width past what the budget admits takes the composite, forward and backward."""
    monkeypatch.setattr(core, "POISON", False)
    loop_budget(12)  # max_loop_iterations() = 6: the forward's W + 1 = 6 fits, W = 6 does not
    B, Dm, T, W = 2, 3, 9, 6
    xa, wa, ba = _f(rng, (B, Dm, T)), _f(rng, (Dm, W)), _f(rng, (Dm,))
    dev = backend.current()
    before = dev.dispatches
    got = F.causal_conv1d(pr.tensor(xa), pr.tensor(wa), pr.tensor(ba), activation="silu")
    assert dev.dispatches - before > 1
    want = conv_ref(_t64(xa), _t64(wa), _t64(ba), "silu").numpy()
    assert_close(got.numpy(), want, atol=_conv_tol(xa, wa, ba, W), rtol=0)
    _check_conv_grads(_conv_grads(rng, 2, 3, 9, 6, "silu", "channels_last"), 6)


def test_conv_errors(rng):
    x = pr.tensor(_f(rng, (2, 5, 7)))
    w = pr.tensor(_f(rng, (5, 4)))
    with pytest.raises(NotImplementedError, match="activation must be None, silu, or swish"):
        F.causal_conv1d(x, w, activation="gelu")
    with pytest.raises(ValueError, match=r"weight must be \(dim, width\) with dim = 5"):
        F.causal_conv1d(x, pr.tensor(_f(rng, (4, 4))))
    with pytest.raises(ValueError, match=r"weight must be \(dim, width\)"):
        F.causal_conv1d(x, pr.tensor(_f(rng, (5, 1, 4))))
    with pytest.raises(ValueError, match=r"bias must be \(dim,\) = \(5,\)"):
        F.causal_conv1d(x, w, pr.tensor(_f(rng, (4,))))
    with pytest.raises(ValueError, match=r"x must be \(batch, dim, seqlen\)"):
        F.causal_conv1d(x[0], w)
    with pytest.raises(TypeError, match=r"x must be a float32 or float16"):
        F.causal_conv1d(pr.tensor(np.zeros((2, 5, 7), np.int32)), w)
    with pytest.raises(NotImplementedError, match="initial_states"):
        F.causal_conv1d(x, w, initial_states=pr.tensor(_f(rng, (2, 5, 3))))


# ---- the 3-D rotary embedding of video models --------------------------------------------
def wan_rope_ref(x, grid, sections, freqs, offsets=(0, 0, 0)):
    """Wan's rope_apply, written from its definition: x's pairs (2k, 2k + 1) as complex numbers,
    times freqs[position along the section's axis, k] (unit complex numbers, (rows, half)),
    the sections of pairs by frame, row and column; tokens past the grid unchanged."""
    T, H, W = grid
    B, L, N, D = x.shape
    half = sum(sections)
    xc = torch.view_as_complex(x[..., : 2 * half].reshape(B, L, N, half, 2).contiguous())
    t, h, w = torch.meshgrid(torch.arange(T), torch.arange(H), torch.arange(W), indexing="ij")
    pos = [t.flatten() + offsets[0], h.flatten() + offsets[1], w.flatten() + offsets[2]]
    parts = freqs.split(list(sections), dim=1)
    f = torch.cat([p[q] for p, q in zip(parts, pos)], dim=1)  # (THW, half)
    rot = torch.view_as_real(xc[:, : T * H * W] * f[None, :, None, :]).flatten(-2)
    head = torch.cat([rot, x[:, : T * H * W, :, 2 * half :]], -1)
    return torch.cat([head, x[:, T * H * W :]], 1)


ROT3_CASES = [  # (batch, seqlen, nheads, headdim, grid, sections, offsets)
    (2, 24, 3, 16, (2, 3, 4), (2, 3, 3), (0, 0, 0)),
    (1, 70, 2, 22, (3, 4, 5), (4, 3, 3), (1, 2, 0)),  # 10 padding tokens, 2 features past
    (2, 7, 1, 8, (7, 1, 1), (4, 0, 0), (0, 0, 0)),  # time only
]


@pytest.mark.parametrize("case", ROT3_CASES)
def test_rotary_3d_matches_wans_rope(case, rng):
    """Interleaved pairs against Wan's complex-number rope_apply; forward and x's gradient."""
    B, L, N, D, grid, sections, offs = case
    half = sum(sections)
    rows = max(grid) + max(offs) + 2
    ang = rng.uniform(-4, 4, (rows, half))
    xa = rng.standard_normal((B, L, N, D)).astype(np.float32)
    x = pr.tensor(xa).requires_grad_()
    got = F.apply_rotary_emb_3d(
        x, pr.tensor(np.cos(ang)), pr.tensor(np.sin(ang)), grid, sections, True, offs
    )
    tx = _t64(xa).requires_grad_()
    freqs = torch.polar(torch.ones(rows, half, dtype=torch.float64), _t64(ang))
    want = wan_rope_ref(tx, grid, sections, freqs, offs)
    assert_close(got.detach().numpy(), want.detach().numpy(), atol=8 * U32 * 4, rtol=0)
    w = rng.standard_normal((B, L, N, D))
    (got * pr.tensor(w.astype(np.float32))).sum().backward()
    (want * _t64(w)).sum().backward()
    assert_close(x.grad.numpy(), tx.grad.numpy(), atol=8 * U32 * 4, rtol=0)


def test_rotary_3d_half_split_is_the_1d_form_with_gathered_rows(rng, monkeypatch):
    """With (k, k + half) pairs the 3-D form is apply_rotary_emb with each token's cos/sin row
    gathered section by section; one dispatch; x read through its strides."""
    B, L, N, D = 2, 30, 2, 20
    grid, sections, offs = (2, 3, 5), (3, 2, 4), (0, 1, 2)
    half = sum(sections)
    ang = rng.uniform(-4, 4, (9, half))
    qkv = rng.standard_normal((B, L, 3, N, D)).astype(np.float32)
    x = pr.tensor(qkv)[:, :, 1]  # (a strided view: k of a fused qkv)
    t, h, w = np.meshgrid(np.arange(2), np.arange(3), np.arange(5), indexing="ij")
    pos = [t.ravel() + offs[0], h.ravel() + offs[1], w.ravel() + offs[2]]
    cols = np.split(np.arange(half), np.cumsum(sections)[:-1])
    full = np.zeros((L, half))
    for p, c in zip(pos, cols):
        full[: len(p), c] = ang[p][:, c]
    pc, ps = pr.tensor(np.cos(ang)), pr.tensor(np.sin(ang))
    monkeypatch.setattr(core, "POISON", False)  # (the test suite's NaN fill is a dispatch)
    dev = backend.current()
    assert dev.loop_budget is not ...  # (its one-off probe dispatch happens before the count)
    before = dev.dispatches
    got = F.apply_rotary_emb_3d(x, pc, ps, grid, sections, False, offs)
    assert dev.dispatches - before == 1
    got = got.numpy()
    want = rotary_ref(_t64(qkv[:, :, 1]), _t64(np.cos(full)), _t64(np.sin(full))).numpy()
    assert_close(got, want, atol=8 * U32 * 4, rtol=0)


def test_rotary_3d_errors():
    x = pr.randn(1, 10, 1, 8)
    c = pr.randn(6, 4)
    with pytest.raises(ValueError, match="fewer than the grid"):
        F.apply_rotary_emb_3d(x, c, c, (2, 3, 2), (2, 1, 1))
    with pytest.raises(ValueError, match="sum\\(sections\\) = 3"):
        F.apply_rotary_emb_3d(x, c, c, (1, 2, 5), (1, 1, 1))
    with pytest.raises(ValueError, match="reads positions up to 6"):
        F.apply_rotary_emb_3d(x, c, c, (1, 2, 5), (2, 1, 1), offsets=(0, 0, 2))
    with pytest.raises(TypeError, match="three ints"):
        F.apply_rotary_emb_3d(x, c, c, (1, 2), (2, 1, 1))


# ---- ReLU² (BitNet's feed-forward activation) -------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (7, 13), (3, 5, 129), (2, 0, 4)])
@pytest.mark.parametrize("kind", ["contiguous", "transposed"])
def test_relu_squared_matches_torch(shape, kind, rng):
    """relu(x)² against torch's F.relu(x) ** 2 in float64 on f32 inputs (one rounding of a
    product: 1 ULP), with NaN, ±inf and -0 among them."""
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    for i, v in enumerate([np.nan, np.inf, -np.inf, -0.0, 0.0][: flat.size]):
        flat[i] = v
    p = pr.tensor(x)
    if kind == "transposed" and x.ndim >= 2:
        p = pr.tensor(np.ascontiguousarray(np.swapaxes(x, 0, -1))).transpose(0, -1)
    got = F.relu_squared(p).numpy()
    want = (TF.relu(torch.tensor(x, dtype=torch.float64)) ** 2).numpy()
    assert_close(got, want, rtol=U32, atol=0, equal_nan=True)
    assert pr.nn.ReLUSquared()(p).numpy().tobytes() == got.tobytes()


def test_relu_squared_grads_one_dispatch_each_way(rng, monkeypatch):
    monkeypatch.setattr(core, "POISON", False)
    dev = backend.current()
    x = rng.standard_normal((5, 33)).astype(np.float32)
    x[0, :3] = [np.nan, 0.0, -0.0]
    g = rng.standard_normal((5, 33)).astype(np.float32)
    px = pr.tensor(x).requires_grad_()
    before = dev.dispatches
    y = F.relu_squared(px)
    assert dev.dispatches - before == 1
    before = dev.dispatches
    y.backward(pr.tensor(g))
    assert dev.dispatches - before == 1
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (TF.relu(tx) ** 2).backward(torch.tensor(g, dtype=torch.float64))
    assert_close(px.grad.numpy(), tx.grad.numpy(), rtol=2 * U32, atol=0, equal_nan=True)


def test_relu_squared_double_backward_and_inplace(rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    v = rng.standard_normal((4, 9)).astype(np.float32)
    px = pr.tensor(x).requires_grad_()
    (gx,) = pr.autograd.grad(F.relu_squared(px).sum(), px, create_graph=True)
    (gx * pr.tensor(v)).sum().backward()
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    (tgx,) = torch.autograd.grad((TF.relu(tx) ** 2).sum(), tx, create_graph=True)
    (tgx * torch.tensor(v, dtype=torch.float64)).sum().backward()
    assert_close(gx.detach().numpy(), tgx.detach().numpy(), rtol=2 * U32, atol=0)
    assert_close(px.grad.numpy(), tx.grad.numpy(), rtol=2 * U32, atol=0)
    # in place, through a leaf's non-leaf copy: the gradient flows as out of place
    a = pr.tensor(x).requires_grad_()
    b = a * 1.0
    F.relu_squared_(b)
    b.sum().backward()
    assert_close(a.grad.numpy(), np.where(x > 0, 2 * x, 0.0), rtol=2 * U32, atol=0)
    with pytest.raises(TypeError, match="relu_squared"):
        F.relu_squared(pr.tensor([1, 2, 3]))
