"""Randomized differential hunt (session 35) against torch CPU: Python operators and unary
Tensor methods called repeatedly on one operand layout (the bound plans of ops/bound.py take the
second and third calls), with in-place writes to an operand between calls; gradients after a
layout was bound without grad; scaled_dot_product_attention forward and backward over random
shapes, masks, grouped heads and kernels; weight-only quantized linear over random formats."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn.functional as F
from pyrite.nn import _attention
from pyrite.ops.quantized import QuantizedWeight, qlinear, quantize_weight

TF = torch.nn.functional

# ---- operators and unary methods, repeated on one layout -------------------------------------
DTYPES = ["float32", "float16", "bfloat16", "int32", "int64", "bool", "int8", "uint8", "int16"]
BINARY = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
UNARY = (
    "relu sigmoid tanh exp exp2 expm1 log log2 log1p sqrt rsqrt abs neg sin cos square "
    "reciprocal erf floor ceil trunc sign silu __neg__ __abs__"
).split()
LAYOUTS = ["contig", "T", "step", "narrow", "expand"]


def _values(rng, shape, dt):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt == "uint8":
        return rng.integers(0, 250, shape)
    if dt == "int8":
        return rng.integers(-100, 100, shape)
    if dt in ("int32", "int64", "int16"):
        return rng.integers(-20, 20, shape)
    a = rng.standard_normal(shape) * 3
    if a.size and rng.random() < 0.3:
        a.flat[rng.integers(0, a.size)] = 0.0
    return a


def _pair(rng, shape, dt, layout):
    """(pyrite, torch) tensors of `shape` with equal values, both the same kind of view."""
    shape = tuple(shape)
    if layout == "T" and len(shape) < 2 or layout != "contig" and not shape:
        layout = "contig"
    if layout == "expand" and 0 in shape:
        layout = "contig"
    base = list(shape)
    if layout == "T":
        base[-1], base[-2] = base[-2], base[-1]
    elif layout == "step":
        base[-1] = 2 * shape[-1] + 1
    elif layout == "narrow":
        off = int(rng.integers(1, 4))
        base[0] = shape[0] + off + 1
    elif layout == "expand":
        d = int(rng.integers(0, len(shape)))
        base[d] = 1
    a = np.asarray(_values(rng, tuple(base), dt))
    a = (
        a.astype(np.float32)
        if a.dtype.kind == "f"
        else a.astype(np.int64)
        if a.dtype.kind in "iu"
        else a
    )
    out = []
    for lib in (pr, torch):
        t = lib.from_numpy(a.copy()).to(getattr(lib, dt))
        if layout == "T":
            t = t.transpose(-1, -2)
        elif layout == "step":
            t = t[..., ::2][..., : shape[-1]]
        elif layout == "narrow":
            t = t.narrow(0, off, shape[0])
        elif layout == "expand":
            t = t.expand(*shape)
        out.append(t)
    return out[0], out[1], layout


def _np(t):
    return (t.float() if t.dtype in (pr.bfloat16, torch.bfloat16) else t).numpy()


def _dtype_name(t):
    n = str(t.dtype).split(".")[1]
    return {"int64": "int32", "float64": "float32"}.get(n, n)  # pyrite's int64 is int32


def _check(p, t, what):
    assert _dtype_name(p) == _dtype_name(t), (what, p.dtype, t.dtype)
    assert tuple(p.shape) == tuple(t.shape), (what, tuple(p.shape), tuple(t.shape))
    a, b = _np(p), _np(t)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        rtol, atol = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}.get(
            _dtype_name(t), (3e-6, 1e-6)
        )
        np.testing.assert_allclose(
            a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol, err_msg=what
        )
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def _rand_shape(rng):
    nd = int(rng.integers(0, 4))
    return tuple(
        int(rng.integers(0, 5)) if rng.random() < 0.05 else int(rng.integers(1, 6))
        for _ in range(nd)
    )


def _broadcastable(rng, shape):
    s = [1 if rng.random() < 0.3 else d for d in shape]
    return tuple(s[int(rng.integers(0, len(s) + 1)) if rng.random() < 0.3 else 0 :])


def _raises(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - torch's refusal is the reference
        return None, e


def _one_operator_case(rng):
    """One random call, three times on the same operands, then once more after an in-place
    write to one operand; each result against torch's."""
    op = str(rng.choice(list(BINARY) + UNARY)) if rng.random() < 0.7 else str(rng.choice(UNARY))
    dt = str(rng.choice(DTYPES))
    shape = _rand_shape(rng)
    px, tx, lay = _pair(rng, shape, dt, str(rng.choice(LAYOUTS)))
    mx, mt, mlay = px, tx, lay  # (the operand written in place)
    if op in UNARY:
        if op == "silu" and dt not in ("float32", "float16", "bfloat16"):
            return  # (torch refuses silu of an integer tensor; pyrite computes it in float)
        what = f"x.{op}() x: {dt}{shape} {lay}"

        def fp():
            return getattr(px, op)()

        def ft():
            return TF.silu(tx) if op == "silu" else getattr(tx, op)()
    else:
        fn = BINARY[op]
        kind = str(rng.choice(["tensor", "scalar", "rscalar", "0d"]))
        if kind == "tensor":
            dt2 = str(rng.choice(DTYPES)) if rng.random() < 0.5 else dt
            py, ty, lay2 = _pair(rng, _broadcastable(rng, shape), dt2, str(rng.choice(LAYOUTS)))
            if rng.random() < 0.5:
                px, py, tx, ty = py, px, ty, tx
            what = f"x {op} y, x: {px.dtype}{tuple(px.shape)} y: {py.dtype}{tuple(py.shape)}"
        elif kind == "0d":
            dt2 = str(rng.choice(DTYPES))
            v = _values(rng, (), dt2).item()
            py, ty = (
                pr.tensor(v, dtype=getattr(pr, dt2)),
                torch.tensor(v, dtype=getattr(torch, dt2)),
            )
            if rng.random() < 0.5:
                px, py, tx, ty = py, px, ty, tx
            what = f"x {op} y (a 0-d {dt2} {v!r}), {dt}{shape} {lay}"
        else:
            st = str(rng.choice(["int", "float", "bool"]))
            v = (
                int(rng.integers(-5, 6))
                if st == "int"
                else float(rng.choice([0.5, -1.25, 2.0, 0.1, 3.7, -0.0, 1e-3]))
                if st == "float"
                else bool(rng.random() < 0.5)
            )
            py = ty = v
            if kind == "rscalar":
                px, py, tx, ty = v, px, v, tx
            what = f"{kind} {op} {v!r}, x: {dt}{shape} {lay}"

        def fp():
            return fn(px, py)

        def ft():
            return fn(tx, ty)

    want, err = _raises(ft)
    for call in range(3):
        if err is not None:
            with pytest.raises(Exception):
                fp()
            return
        got = fp()
        _check(got, want, f"call {call}: {what}")
        assert got._storage is not mx._storage, f"result aliases an input: {what}"
    if not mt.numel() or mlay == "expand" or dt == "bool":
        return
    how = str(rng.choice(["add_", "setitem", "data.copy_"]))
    if how == "add_":
        mt.add_(1)
        mx.add_(1)
    elif how == "setitem":
        idx = (0,) * mt.ndim
        mt[idx] = 5
        mx[idx] = 5
    else:
        mt.data.copy_(mt.data * 2)
        mx.data.copy_(mx.data * 2)
    want, err = _raises(ft)
    if err is None:
        _check(fp(), want, f"after {how}: {what}")


@pytest.mark.parametrize("draw", range(6))
def test_operators_and_unary_methods_repeated(rng, draw):
    for _ in range(50):
        _one_operator_case(rng)


SCALARS_INT = [0, 1, -3, 7, 127, 128, 255, 256, 1000, -129]
SCALARS_FLOAT = [0.5, -0.0, 1e-8, 3.4e38, float("inf"), float("-inf"), float("nan"), 65504.0]
SCALARS_FLOAT += [65520.0, 1e5, 0.1, 2.0**24 + 1, 300.7]


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int32", "int8", "uint8", "bool"])
def test_python_scalars_vary_on_one_bound_layout(dt):
    """The bound plan keys a scalar by its type only: every value after the first must still be
    converted as the full path does (wrapping for small ints, rounding for halves)."""
    rng = np.random.default_rng(35)
    if dt == "bool":
        a = rng.random((3, 5)) < 0.5
    elif dt == "uint8":
        a = rng.integers(0, 255, (3, 5))
    elif dt in ("int32", "int8"):
        a = rng.integers(-3, 4, (3, 5))
    else:
        a = np.concatenate(
            [rng.standard_normal((3, 3)) * 2, [[65504.0, 1e5], [np.nan, -0.0], [1.5, np.inf]]], 1
        ).astype(np.float32)
    px = pr.from_numpy(a).to(getattr(pr, dt))
    tx = torch.from_numpy(a).to(getattr(torch, dt))
    for name, fn in BINARY.items():
        for vals in (SCALARS_INT, SCALARS_FLOAT):
            for reflected in (False, True):
                if reflected and name in ("eq", "ne", "lt", "le", "gt", "ge"):
                    continue
                for v in [vals[1], vals[1], *vals]:
                    args = (v, tx) if reflected else (tx, v)
                    want, err = _raises(lambda: fn(*args))
                    pargs = (v, px) if reflected else (px, v)
                    if err is not None:
                        with pytest.raises(Exception):
                            fn(*pargs)
                        continue
                    got = fn(*pargs)
                    _check(got, want, f"{dt} {name} {v!r} reflected={reflected}")


def test_sliding_offsets_share_one_plan():
    """Views of one shape at every offset (the plan key keeps offset % 4): each reads its own."""
    rng = np.random.default_rng(7)
    for dt in ("float32", "float16", "bfloat16", "int32", "bool"):
        a = (rng.standard_normal(120) * 3).astype(np.float32)
        b = (rng.standard_normal(120) * 3).astype(np.float32)
        if dt == "int32":
            a, b = np.rint(a), np.abs(np.rint(b)) + 1
        if dt == "bool":
            a, b = a > 0, b > 0
        pa, ta = pr.from_numpy(a).to(getattr(pr, dt)), torch.from_numpy(a).to(getattr(torch, dt))
        pb, tb = pr.from_numpy(b).to(getattr(pr, dt)), torch.from_numpy(b).to(getattr(torch, dt))
        fns = [lambda x, y: x + y, lambda x, y: x * 2, lambda x, y: x < y, lambda x, y: x / y]
        fns += [lambda x, y: x.exp(), lambda x, y: abs(x), lambda x, y: x.view(-1, 1) - 1.5]
        for f in fns:
            for o in [*range(9), 1, 0, 5]:
                o2 = (o * 7 + 3) % 13
                n = 13
                want, err = _raises(lambda: f(ta[o : o + n], tb[o2 : o2 + n]))
                if err is None:
                    _check(f(pa[o : o + n], pb[o2 : o2 + n]), want, f"{dt} offsets {o}/{o2}")


def test_gradients_after_the_layout_was_bound_without_grad():
    rng = np.random.default_rng(3)
    a = (np.abs(rng.standard_normal((3, 4))) + 0.5).astype(np.float32)
    b = (np.abs(rng.standard_normal((3, 4))) + 0.5).astype(np.float32)
    forms = {
        "tt": lambda f: lambda x, y: f(x, y),
        "ts": lambda f: lambda x, y: f(x, 1.5),
        "st": lambda f: lambda x, y: f(2.5, x),
    }
    for name in ("add", "sub", "mul", "div"):
        for form, make in forms.items():
            f = make(BINARY[name])
            x, y = pr.from_numpy(a.copy()), pr.from_numpy(b.copy())
            for _ in range(3):
                f(x, y)
            xr, yr = (pr.from_numpy(t.copy()).requires_grad_() for t in (a, b))
            xt, yt = (torch.from_numpy(t.copy()).requires_grad_() for t in (a, b))
            with pr.no_grad():  # (bound with the leaves themselves, grad mode off)
                for _ in range(3):
                    assert not f(xr, yr).requires_grad
            rp, rt = f(xr, yr), f(xt, yt)
            assert rp.requires_grad and rp.grad_fn is not None
            (rp * rp).sum().backward()
            (rt * rt).sum().backward()
            np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-5)
            if form == "tt":
                np.testing.assert_allclose(yr.grad.numpy(), yt.grad.numpy(), rtol=1e-5, atol=1e-5)
            # a view of a base that requires grad, its layout bound on a plain twin first
            base = pr.from_numpy(a.copy()).requires_grad_()
            tbase = torch.from_numpy(a.copy()).requires_grad_()
            plain = base.detach()
            for _ in range(3):
                f(plain[:, 1:], plain[:, 1:])
            f(base[:, 1:], base[:, 1:]).sum().backward()
            f(tbase[:, 1:], tbase[:, 1:]).sum().backward()
            np.testing.assert_allclose(base.grad.numpy(), tbase.grad.numpy(), rtol=1e-5, atol=1e-5)
    for u in ("relu", "sigmoid", "tanh", "exp", "neg", "abs", "sin", "square", "silu", "rsqrt"):
        x = pr.from_numpy(a.copy())
        for _ in range(3):
            getattr(x, u)()
        xr = pr.from_numpy(a.copy()).requires_grad_()
        xt = torch.from_numpy(a.copy()).requires_grad_()
        rp = getattr(xr, u)()
        rt = TF.silu(xt) if u == "silu" else getattr(xt, u)()
        (rp * rp).sum().backward()
        (rt * rt).sum().backward()
        np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    # a Parameter: bound under no_grad, recorded again outside
    w = pr.nn.Parameter(pr.from_numpy(a.copy()))
    wt = torch.nn.Parameter(torch.from_numpy(a.copy()))
    x, xt = pr.from_numpy(b.copy()), torch.from_numpy(b.copy())
    with pr.no_grad():
        for _ in range(3):
            r = (w * x, x * w, w.exp(), -w)
            assert not any(t.requires_grad for t in r)
    (w * x + x * w - w.exp() + (-w)).sum().backward()
    (wt * xt + xt * wt - wt.exp() + (-wt)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_writes_between_bound_calls_are_seen():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    x, y = pr.from_numpy(a.copy()), pr.from_numpy(b.copy())
    for _ in range(3):
        x + y
    y.add_(10.0)
    np.testing.assert_allclose((x + y).numpy(), a + b + 10, rtol=1e-6)
    y.data = pr.from_numpy(b * 3)
    np.testing.assert_allclose((x + y).numpy(), a + b * 3, rtol=1e-6)
    x.data.copy_(pr.ones(3, 4))
    np.testing.assert_allclose((x * y).numpy(), b * 3, rtol=1e-6)
    x[1] = 7.0
    want = np.exp(np.where(np.arange(3)[:, None] == 1, 7.0, 1.0) * np.ones((3, 4)))
    np.testing.assert_allclose(x.exp().numpy(), want, rtol=1e-6)
    r1, r2 = x + 0.0, x + 0.0
    assert r1._storage is not r2._storage and r1._storage is not x._storage
    r1.add_(1)
    np.testing.assert_array_equal(r2.numpy(), x.numpy())


# ---- scaled_dot_product_attention ------------------------------------------------------------
SDPA_KERNELS = {
    "default": {},
    "flash-split": dict(FORCE_TILED=False, FORCE_DECODE=False, FORCE_SPLITS=3),
    "tiled": dict(FORCE_TILED=True, FORCE_DECODE=False),
    "decode": dict(FORCE_TILED=False, FORCE_DECODE=True, DECODE_SG=False),
    "tiled-bwd": dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BWD=True, DS_GEMM=False),
}


def _sdpa_operand(rng, shape, layout, dt):
    a = rng.standard_normal(shape).astype(np.float32)
    if dt == "float16":
        a = a.astype(np.float16).astype(np.float32)
    t = torch.from_numpy(a.astype(np.float64))
    if layout == "bnhe" and len(shape) == 4:  # (B, N, H, E) seen as (B, H, N, E)
        p = pr.from_numpy(np.ascontiguousarray(a.transpose(0, 2, 1, 3))).transpose(1, 2)
    elif layout == "offset":
        flat = np.concatenate([np.ones(3, np.float32), a.reshape(-1)])
        p = pr.from_numpy(flat)[3:].view(*shape)
    else:
        p = pr.from_numpy(a.copy())
    return p.to(getattr(pr, dt)), t


def _sdpa_case(rng, kernel):
    B, Hk = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    gqa = rng.random() < 0.3
    H = Hk * (2 if gqa else 1)
    E = int(rng.choice([8, 16, 32, 64, 80]))
    if kernel == "tiled-bwd":
        E = min(E, 32)
    if kernel == "decode" or rng.random() < 0.25:
        L, S = 1, int(rng.integers(256 if kernel == "decode" else 1, 600))
    else:
        L, S = int(rng.integers(1, 24)), int(rng.integers(1, 24))
    dt = "float16" if rng.random() < 0.3 else "float32"
    mode = str(rng.choice(["none", "causal", "bool", "float"]))
    scale = float(rng.uniform(0.05, 0.5)) if rng.random() < 0.3 else None
    lay = str(rng.choice(["bhne", "bnhe", "offset"]))
    q, tq = _sdpa_operand(rng, (B, H, L, E), lay, dt)
    k, tk = _sdpa_operand(rng, (B, Hk, S, E), lay, dt)
    v, tv = _sdpa_operand(rng, (B, Hk, S, E), str(rng.choice(["bhne", "bnhe"])), dt)
    pm = tm = None
    if mode in ("bool", "float"):
        ms = [(L, S), (1, 1, L, S), (B, 1, L, S), (1, H, L, S), (B, H, L, S), (1, S)]
        ms = ms[int(rng.integers(0, len(ms)))]
        if mode == "bool":
            m = rng.random(ms) < 0.7
            if rng.random() < 0.7:
                m.reshape(-1, S)[:, 0] = True  # (else some rows may have no key: torch gives 0)
            pm, tm = pr.from_numpy(m.copy()), torch.from_numpy(m.copy())
        else:
            m = (rng.standard_normal(ms) * 2).astype(np.float32)
            if rng.random() < 0.4:
                m[rng.random(ms) < 0.3] = -np.inf
                m.reshape(-1, S)[:, 0] = 0.0
            pm, tm = pr.from_numpy(m.copy()), torch.from_numpy(m.astype(np.float64))
    what = f"{kernel} q{(B, H, L, E)} S={S} {dt} {mode} {None if tm is None else tuple(tm.shape)}"
    what += f" scale={scale} gqa={gqa} {lay}"
    kw = dict(is_causal=mode == "causal", scale=scale, enable_gqa=gqa)
    atol = 3e-3 if dt == "float16" else 3e-5
    ref = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kw).numpy()
    for call in range(3):  # (the plan cache serves calls after the first)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=pm, **kw)
        assert str(out.dtype) == f"pyrite.{dt}" and tuple(out.shape) == ref.shape, what
        err = np.abs(out.float().numpy() - ref).max()
        assert err <= atol * max(1.0, np.abs(ref).max()), (call, err, what)
    q.mul_(-1.5)  # (in place: the next kept-plan call reads the new values)
    ref = TF.scaled_dot_product_attention(tq * -1.5, tk, tv, attn_mask=tm, **kw).numpy()
    err = np.abs(F.scaled_dot_product_attention(q, k, v, attn_mask=pm, **kw).float().numpy() - ref)
    assert err.max() <= atol * max(1.0, np.abs(ref).max()), ("after q.mul_", err.max(), what)
    # gradients of a random subset of q, k, v (and of the float mask)
    need = [rng.random() < 0.8 for _ in range(3)]
    need[int(rng.integers(0, 3))] = True
    mgrad = mode == "float" and rng.random() < 0.3
    tl = [t.detach().clone().requires_grad_(n) for t, n in zip((tq * -1.5, tk, tv), need)]
    pl = [t.detach().clone().requires_grad_(n) for t, n in zip((q, k, v), need)]
    tm2 = tm.detach().clone().requires_grad_() if mgrad else tm
    pm2 = pm.detach().clone().requires_grad_() if mgrad else pm
    ref = TF.scaled_dot_product_attention(*tl, attn_mask=tm2, **kw)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    if dt == "float16":
        g = g.astype(np.float16).astype(np.float32)
    ref.backward(torch.from_numpy(g.astype(np.float64)))
    F.scaled_dot_product_attention(*pl, attn_mask=pm2, **kw).backward(
        pr.from_numpy(g).to(getattr(pr, dt))
    )
    pairs = list(zip("qkv", pl, tl)) + ([("mask", pm2, tm2)] if mgrad else [])
    for name, p, t in pairs:
        assert (p.grad is None) == (t.grad is None), (name, what)
        if t.grad is None:
            continue
        want = t.grad.numpy()
        assert tuple(p.grad.shape) == want.shape, (name, what)
        tol = (6e-3 if dt == "float16" else 1e-4) * max(1.0, np.abs(want).max())
        err = np.abs(p.grad.float().numpy() - want).max()
        assert err <= tol, (name, err, what)


@pytest.mark.parametrize("kernel", list(SDPA_KERNELS))
def test_sdpa_random(rng, monkeypatch, kernel):
    for name, val in SDPA_KERNELS[kernel].items():
        monkeypatch.setattr(_attention._KD if name == "DECODE_SG" else _attention, name, val)
    for _ in range(2):
        _sdpa_case(rng, kernel)


# ---- weight-only quantized linear ------------------------------------------------------------
def _dequantized(w, bits, gs):
    """The float64 weight quantize_weight's rules give (ops/quantized.py's docstring)."""
    w = w.astype(np.float64)
    N, K = w.shape
    g = K if gs is None else gs
    groups = max(1, -(-K // g))
    wp = np.empty((N, groups * g))
    wp[:, :K] = w
    wp[:, K:] = w[:, -1:]
    bl = wp.reshape(N, groups, g)
    if bits == 8:
        amax = np.abs(bl).max(2)
        sc = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32).astype(np.float64)
        d = np.clip(np.rint(bl / sc[..., None]), -127, 127) * sc[..., None]
    else:
        lo, hi = bl.min(2), bl.max(2)
        sc = np.where(hi > lo, (hi - lo) / 15.0, 1.0).astype(np.float32).astype(np.float64)
        off = lo.astype(np.float32).astype(np.float64)
        q = np.clip(np.rint((bl - off[..., None]) / sc[..., None]), 0, 15)
        d = q * sc[..., None] + off[..., None]
    return d.reshape(N, groups * g)[:, :K]


def _quant_case(rng):
    bits = int(rng.choice([8, 4]))
    gs = [None, 32, 64, 128][int(rng.integers(0, 4))]
    K = int(rng.integers(1, 32)) if rng.random() < 0.4 else int(rng.integers(32, 300))
    N = int(rng.integers(1, 70)) | (1 if rng.random() < 0.5 else 0)
    M = int(rng.integers(1, 13))
    lead = (M,) if rng.random() < 0.7 else (int(rng.integers(1, 3)), M)
    xdt = str(rng.choice(["float32", "float32", "float16", "bfloat16"]))
    wscale = float(rng.choice([1.0, 0.02, 30.0]))
    w = (rng.standard_normal((N, K)) * wscale).astype(np.float32)
    if rng.random() < 0.15:
        w[0] = 0.0
    x = rng.standard_normal((*lead, K)).astype(np.float32)
    x = torch.from_numpy(x).to(getattr(torch, xdt)).float().numpy()
    bias = rng.standard_normal(N).astype(np.float32) if rng.random() < 0.5 else None
    what = f"int{bits} gs={gs} N={N} K={K} x{lead} {xdt} bias={bias is not None}"
    qw = quantize_weight(pr.from_numpy(w), bits=bits, group_size=gs)
    d = _dequantized(w, bits, gs)
    got = qw.dequantize().numpy()
    np.testing.assert_allclose(
        got, d, rtol=1e-6, atol=1e-6 * max(1.0, np.abs(d).max()), err_msg=what
    )
    xl = str(rng.choice(["contig", "offset", "T"]))
    if xl == "T" and len(lead) == 1:
        px = pr.from_numpy(np.ascontiguousarray(x.T)).to(getattr(pr, xdt)).t()
    elif xl == "offset":
        px = pr.from_numpy(np.concatenate([np.ones(5, np.float32), x.ravel()]))[5:].view(*x.shape)
        px = px.to(getattr(pr, xdt))
    else:
        px = pr.from_numpy(x.copy()).to(getattr(pr, xdt))
    pb = None if bias is None else pr.from_numpy(bias.copy())
    ref = x.astype(np.float64) @ d.T + (0 if bias is None else bias.astype(np.float64))
    # a K-term f32 dot product, then the bias: sqrt(K)·eps of Σ|x||w|, plus the result's eps
    tol = np.abs(x).astype(np.float64) @ np.abs(d).T * (np.sqrt(K) * 3e-7 + 1e-7)
    tol += 1e-6 * wscale + np.abs(ref) * 3e-7
    if xdt != "float32":  # (the result is rounded to the input's dtype)
        tol += np.abs(ref) * (1e-3 if xdt == "float16" else 8e-3) + 1e-3
    for _ in range(2):
        y = qlinear(px, qw, pb)
        assert str(y.dtype) == f"pyrite.{xdt}" and tuple(y.shape) == ref.shape, what
        err = np.abs(y.float().numpy() - ref)
        assert (err <= tol).all(), (what, float((err - tol).max()))
    xr = pr.from_numpy(x.copy()).requires_grad_()
    br = None if bias is None else pr.from_numpy(bias.copy()).requires_grad_()
    g = rng.standard_normal(ref.shape).astype(np.float32)
    qlinear(xr, qw, br).backward(pr.from_numpy(g))
    gx = g.astype(np.float64) @ d
    np.testing.assert_allclose(
        xr.grad.numpy(), gx, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(gx).max())
    )
    if br is not None:
        np.testing.assert_allclose(br.grad.numpy(), g.reshape(-1, N).sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("draw", range(3))
def test_qlinear_random(rng, draw):
    for _ in range(6):
        _quant_case(rng)


def test_qlinear_from_values_extremes_and_odd_x_layouts():
    rng = np.random.default_rng(11)
    for bits in (8, 4):
        for gs in (None, 4 if bits == 8 else 8, 32):
            N, K = 5, 19
            lo, hi = (-128, 127) if bits == 8 else (0, 15)
            q = rng.integers(lo, hi + 1, (N, K))
            q[0], q[1] = lo, hi
            groups = 1 if gs is None else -(-K // gs)
            s = (rng.random((N, groups)) + 0.1).astype(np.float32)
            o = rng.standard_normal((N, groups)).astype(np.float32) if bits == 4 else None
            qw = QuantizedWeight.from_values(q, s, o, bits=bits, group_size=gs)
            col = np.arange(K) // (gs or K)
            d = q * s[:, col].astype(np.float64) + (0 if o is None else o[:, col])
            for M in (1, 3, 9):
                big = rng.standard_normal((2 * M, K + 4)).astype(np.float32)
                views = {
                    "stepped rows, sliced cols": (
                        pr.from_numpy(big)[::2, 3 : 3 + K],
                        big[::2, 3 : 3 + K],
                    ),
                    "expanded row": (
                        pr.from_numpy(big[0, :K].copy()).expand(M, K),
                        np.tile(big[0, :K], (M, 1)),
                    ),
                }
                for name, (px, xn) in views.items():
                    ref = xn.astype(np.float64) @ d.T
                    got = qlinear(px, qw).numpy()
                    np.testing.assert_allclose(
                        got, ref, rtol=1e-5, atol=1e-4, err_msg=f"{bits} {gs} {M} {name}"
                    )


def test_scalars_beyond_float32_round_to_inf():
    """A Python float past float32's range is ±inf as the op's scalar (torch casts it so), on
    the full path and on a bound call, for every op that takes one (it raised struct's
    OverflowError); a float16 operand gives no numpy overflow warning."""
    import warnings

    x = np.array([1.0, -2.0, 0.5], np.float32)
    xi = np.array([1, 2, -3], np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):  # (the first call learns the layout; the rest take the bound plan)
            t, ti = pr.tensor(x), pr.tensor(xi)
            np.testing.assert_array_equal((t + 1e39).numpy(), x + np.inf)
            np.testing.assert_array_equal((t * -1e39).numpy(), x * -np.inf)
            np.testing.assert_array_equal((1e39 - t).numpy(), np.inf - x)
            np.testing.assert_array_equal((t < 1e39).numpy(), np.ones(3, bool))
            np.testing.assert_array_equal((ti + 1e39).numpy(), np.full(3, np.inf, np.float32))
            np.testing.assert_array_equal((t.half() * 1e39).float().numpy(), x * np.inf)
            np.testing.assert_array_equal(t.pow(1e39).numpy(), np.float32([1, np.inf, 0]))
            np.testing.assert_array_equal(t.add_(1e39).numpy(), x + np.inf)
    # the largest float that still rounds to float32's max stays finite
    got = (pr.tensor(np.zeros(2, np.float32)) + 3.4028235e38).numpy()
    np.testing.assert_array_equal(got, np.full(2, np.finfo(np.float32).max, np.float32))
