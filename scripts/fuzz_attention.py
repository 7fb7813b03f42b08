"""Randomized differential fuzz of pyrite's scaled_dot_product_attention against torch 2.13 CPU
(session 43).

    .venv/bin/python scripts/fuzz_attention.py --n 300 --seed 1 [--verbose] [--case I]

Each case draws one call: 0 to 2 batch dims (sizes 1..3), query heads H 1..6 (key/value heads
dividing them under enable_gqa), L queries and S keys 1..300 (1, primes, 33, 64, 65, 128, 129
often), head dim E 1..128 (1, 8, 31, 32, 33, 63, 64, 65, 100, 128 often; now and then a value
head dim Ev != E), float32 mostly and float16 sometimes, is_causal (also with L != S), a bool or
float mask of a shape that broadcasts ((L, S), (1, 1, L, S), (B, 1, 1, S), (B, H, L, S), ...),
now and then with query rows whose keys are all masked (torch 2.13's safe softmax gives 0 there,
as pyrite documents in nn/_attention.py: the two must agree), a random scale, and pyrite's
operands as transposed views ((B, L, H, E) storage), column or row slices, strided or expanded
views (the storage outside a view is NaN: a kernel reading past it shows). B·H·L·S·E stays
below CAP. A few cases are invalid on purpose (head dims, key counts, heads, mask shapes and
dtypes, is_causal with a mask): where torch raises pyrite must raise a clear error (a pyrite
error naming the problem, not a driver's), and the other way round, save pyrite's documented
extensions (README "Differences from PyTorch": a 1-D mask of the keys' length).

Every case runs pyrite under the kernel choice of the rule and two more drawn from: the flash
forward forced, the tiled forward forced with a (queries a block, rows an invocation) of
TILED_SHAPES (on lavapipe it does not fit 32 KiB at the larger head dims: pyrite then takes
another kernel silently, which is fine), the decode kernel (two-pass or one-pass lanes, merge
fused or not) for L <= 8, the keys cut into 2 or 3 ranges; the module constants of
pyrite.nn._attention (and kernels/attention_decode.DECODE_SG) are set for the call and restored
after it. A subset of the float32 cases also compares dq, dk and dv of sum(out * w), w random,
with the tiled backward (blocks of 16 or 32, dq from a stored dS or not) forced or not.

Reference: torch in float64 on the same rounded inputs. Tolerances follow the rounding of the
case's dtype (u = 2^-24 for float32, 2^-11 for float16) through the computation, per element:
a score's error D = u·((16 + 4√E)·|scale|·Σ|q||k| + 8|s| + 8), the weights' errors
|δp| = p·(D + Σ p·D), the output's |δp|·|v| + u·(16 + 4√S)·p·|v| + 4u·|o|; the gradients'
likewise through dP = w·vᵀ, dS = p·(dP - Σ w·o), dq = scale·dS·k, dk = scale·dSᵀ·q, dv = pᵀ·w
(with √L for the sums over queries). A case fails where an error passes twice its bound; the
report gives the worst ratio (> 1) and where.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import torch

import pyrite as pr
from pyrite import backend
from pyrite.nn import _attention as A

CAP = 2_000_000  # B·H·L·S·E of a case
U = {"float32": 2.0**-24, "float16": 2.0**-11}
PR_DT = {"float32": pr.float32, "float16": pr.float16}
NP_DT = {"float32": np.float32, "float16": np.float16}
TH_DT = {"float32": torch.float32, "float16": torch.float16}
LENS = (1, 1, 2, 3, 5, 7, 13, 17, 31, 33, 37, 63, 64, 65, 97, 127, 128, 129, 191, 256, 257, 300)
HEAD_DIMS = (1, 8, 31, 32, 33, 63, 64, 65, 100, 128)
TILED_SHAPES = ((16, 4), (32, 4), (32, 2), (64, 2), (64, 4), (128, 4))
KD_KNOBS = ("DECODE_SG",)  # (kernels/attention_decode's; the rest are nn/_attention's)
# pyrite's documented acceptances of calls torch refuses (README, "Differences from PyTorch")
EXTENSIONS = ("mask1d",)
# invalid calls torch 2.13 CPU takes (its bug): values more keys than keys. Its fused kernel reads
# the first S value rows' worth of something else (0.48 off v[..., :S, :] at (3, 1, 30, 37/38, 7),
# in float64 too) where its math path cannot multiply; and a mask with is_causal=True, which its
# docs and its math path refuse ("An error is thrown if both attn_mask and is_causal are set")
# and its fused CPU kernel applies both (seed 4401 case 86); pyrite's refusal is what is checked
TORCH_LAX = ("S", "causal_mask")


@dataclass
class Case:
    desc: dict  # what was drawn (printed with a mismatch)
    dtype: str
    q: np.ndarray  # the operands' values (already in `dtype`)
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray | None
    kw: dict  # is_causal, scale, enable_gqa (those passed)
    layouts: dict = field(default_factory=dict)  # operand -> list of view ops (pyrite's side)
    grad: bool = False
    configs: list = field(default_factory=list)  # [(name, {knob: value})]
    invalid: str | None = None  # the kind of invalid call drawn, if any


def pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _len(rng):
    return int(pick(rng, LENS)) if rng.random() < 0.6 else int(rng.integers(1, 301))


def _head_dim(rng):
    return int(pick(rng, HEAD_DIMS)) if rng.random() < 0.7 else int(rng.integers(1, 129))


# ---- views: the operands as pyrite receives them ----------------------------------------------
# A layout is a list of ops applied in turn to a stored base tensor: ("swap", a, b),
# ("slice", dim, start, stop, step, size) (the base's dim has `size`), ("expand", shape).
# `_base` makes the base whose view holds the operand's values (NaN where the view does not
# reach, so a kernel reading past its view shows).


def _apply(ops, t, numpy=False):
    for op in ops:
        if op[0] == "swap":
            t = np.swapaxes(t, op[1], op[2]) if numpy else t.transpose(op[1], op[2])
        elif op[0] == "slice":
            ix = [slice(None)] * t.ndim
            ix[op[1]] = slice(op[2], op[3], op[4])
            t = t[tuple(ix)]
        elif op[0] == "expand":
            t = np.broadcast_to(t, op[1]) if numpy else t.expand(*op[1])
    return t


def _base(ops, arr):
    """The stored array whose view by `ops` is `arr`."""
    if not ops:
        return arr
    op, pre = ops[0], _base(ops[1:], arr)  # (pre: what the rest of the ops view)
    if op[0] == "swap":
        return np.ascontiguousarray(np.swapaxes(pre, op[1], op[2]))
    if op[0] == "slice":
        d, start, stop, step, size = op[1:]
        shape = list(pre.shape)
        shape[d] = size
        fill = np.nan if pre.dtype.kind == "f" else 0
        b = np.full(shape, fill, pre.dtype)
        ix = [slice(None)] * len(shape)
        ix[d] = slice(start, stop, step)
        b[tuple(ix)] = pre
        return b
    # expand: the values are equal along the expanded dims (the case made them so)
    ix = tuple(slice(0, 1) if n == 1 else slice(None) for n in op[2])
    return np.ascontiguousarray(pre[ix])


def _slice(d, n, start, step=1, gap=0):
    """A slice op viewing n entries of dim d from `start` by `step`, `gap` more after."""
    stop = start + step * (n - 1) + 1
    return ("slice", d, start, stop, step, stop + gap)


def _layout(rng, arr, grad, is_mask=False):
    """(view ops, the array) for one operand: contiguous 40 %; else a (B, L, H, E) storage
    transposed, a column slice (a packed qkv's third), a strided or a row slice, or (without
    grad) a batch dim expanded from 1 (the array made equal along it)."""
    nd = arr.ndim
    if rng.random() < 0.4 or nd < 2:
        return [], arr
    if is_mask:
        start = int(rng.integers(0, 9))
        return [_slice(nd - 1, arr.shape[-1], start, gap=int(rng.integers(0, 9)))], arr
    kind = pick(rng, ("bhle", "bhle", "cols", "step", "rows", "expand"))
    ops = []
    if kind == "bhle" and nd >= 3:
        ops.append(("swap", nd - 3, nd - 2))
        if rng.random() < 0.3:
            kind = "cols"
    if kind == "cols":
        E = arr.shape[-1]
        start = int(rng.integers(0, 2 * E + 1))
        ops.insert(0, _slice(nd - 1, E, start, gap=int(rng.integers(0, 2 * E + 1))))
    elif kind == "step":
        ops.append(_slice(nd - 1, arr.shape[-1], int(rng.integers(0, 2)), step=2))
    elif kind == "rows":
        ops.append(_slice(nd - 2, arr.shape[-2], int(rng.integers(0, 4)), gap=2))
    elif kind == "expand" and not grad and nd >= 3 and arr.shape[0] > 1:
        arr = np.ascontiguousarray(np.broadcast_to(arr[:1], arr.shape))
        ops.append(("expand", arr.shape, (1,) + arr.shape[1:]))
    return ops, arr


def _make_view(M, ops, arr, grad):
    """(leaf, the operand): the base stored in M (pyrite or torch), its view."""
    leaf = M.tensor(_base(ops, arr))
    if grad:
        leaf.requires_grad_(True)
    return leaf, _apply(ops, leaf)


# ---- drawing a case ----------------------------------------------------------------------------
def _shrink(rng, B, H, L, S, E):
    """L and S cut (to drawn lengths) until B·H·L·S·E <= CAP."""
    while B * H * L * S * E > CAP:
        if L >= S and L > 1:
            L = int(pick(rng, [n for n in LENS if n < L] or [1]))
        elif S > 1:
            S = int(pick(rng, [n for n in LENS if n < S] or [1]))
        elif H > 1:
            H -= 1
        else:
            B = 1
            break
    return B, H, L, S


def _mask(rng, lead, L, S, dtype, causal):
    """(mask array or None, description): `lead` the scores' leading dims (batch, heads)."""
    if causal and rng.random() < 0.95:
        return None, None
    r = rng.random()
    if r < 0.35:
        return None, None
    kind = "bool" if r < 0.7 else "float"
    full = (*lead, L, S)
    # each dim its size or 1; leading dims dropped now and then
    shape = [n if rng.random() < 0.5 else 1 for n in full[:-2]]
    shape += [L if rng.random() < 0.7 else 1, S if rng.random() < 0.9 else 1]
    drop = int(rng.integers(0, len(full) - 1)) if rng.random() < 0.4 else 0
    shape = tuple(shape[drop:])
    if len(shape) < 2:
        shape = (L, S)
    if kind == "bool":
        dens = rng.uniform(0.1, 0.95)
        m = rng.random(shape) < dens
        if rng.random() < 0.3 and shape[-1] > 0:  # rows (query rows, or every row) all masked
            rows = rng.random(shape[:-1]) < rng.uniform(0.05, 0.5)
            m[rows] = False
        if rng.random() < 0.2:
            m[...] = True
        desc = dict(kind="bool", shape=shape, density=round(float(m.mean()), 2) if m.size else 0)
    else:
        mdt = "float32" if dtype == "float32" or rng.random() < 0.5 else dtype
        style = pick(rng, ("normal", "normal", "padding", "inf", "big"))
        m = rng.standard_normal(shape) * rng.uniform(0.1, 3.0)
        if style in ("padding", "inf", "big"):
            fill = {"padding": -1e4, "inf": -np.inf, "big": float(np.finfo(NP_DT[mdt]).min)}[style]
            m[rng.random(shape) < rng.uniform(0.1, 0.6)] = fill
            if rng.random() < 0.3:
                rows = rng.random(shape[:-1]) < 0.3
                m[rows] = fill
        m = m.astype(NP_DT[mdt])
        desc = dict(kind="float", dtype=mdt, shape=shape, style=style)
    return m, desc


def _invalid(rng, q, k, v, mask, kw, dtype):
    """Makes the call invalid one way (torch refuses, or in one documented case accepts)."""
    how = pick(rng, ("E", "S", "heads", "causal_mask", "mask_shape", "mask_dtype", "dtype",
                     "rank", "mask1d"))  # fmt: skip
    if how == "E":
        k = np.concatenate([k, k[..., :1]], -1)
    elif how == "S":
        v = np.concatenate([v, v[..., :1, :]], -2)
    elif how == "heads":
        if q.ndim < 3:
            how = "rank"
        else:
            kw["enable_gqa"] = bool(rng.random() < 0.5)
            hk = q.shape[-3] + int(rng.integers(1, 3))
            k = np.broadcast_to(k[..., :1, :, :], (*k.shape[:-3], hk, *k.shape[-2:])).copy()
            v = np.broadcast_to(v[..., :1, :, :], (*v.shape[:-3], hk, *v.shape[-2:])).copy()
    elif how == "causal_mask":
        kw["is_causal"] = True
        if mask is None:
            mask = rng.random((q.shape[-2], k.shape[-2])) < 0.5
    elif how == "mask_shape":
        L, S = q.shape[-2], k.shape[-2]
        mask = rng.random(pick(rng, [(L + 1, S), (L, S + 1), (2, 1, 1, L, S + 2), (S + 3,)])) < 0.5
        if q.ndim + 1 < 5 and rng.random() < 0.5:
            mask = rng.random((2, *q.shape[:-1], S)) < 0.5  # more dims than the scores
        kw.pop("is_causal", None)
    elif how == "mask_dtype":
        L, S = q.shape[-2], k.shape[-2]
        if dtype == "float32" and rng.random() < 0.5:
            mask = rng.standard_normal((L, S)).astype(np.float16)
        else:
            mask = rng.integers(0, 2, (L, S)).astype(np.int32)
        kw.pop("is_causal", None)
    elif how == "dtype":
        k = k.astype(np.float16 if dtype == "float32" else np.float32)
    if how == "rank":
        q = q.reshape(-1)[: q.shape[-1]]
    if how == "mask1d":  # a 1-D mask of the keys' length (pyrite's documented extension)
        mask = rng.random(k.shape[-2]) < 0.7
        mask[0] = True
        kw.pop("is_causal", None)
    return q, k, v, mask, how


def _configs(rng, L, E, grad):
    """The rule's kernel choice and two more: [(name, knobs)]."""
    opts = ["flash", "tiled", "tiled", "splits"]
    if L <= 8:
        opts += ["decode", "decode"]
    chosen = [str(c) for c in rng.choice(opts, size=2, replace=False)]
    out = [("rule", {})]
    for c in chosen:
        if c == "flash":
            kn = dict(FORCE_TILED=False, FORCE_DECODE=False)
            name = "flash"
        elif c == "tiled":
            bq, rpt = TILED_SHAPES[int(rng.integers(len(TILED_SHAPES)))]
            kn = dict(FORCE_TILED=True, FORCE_DECODE=False, FORCE_TILED_BQ=bq, FORCE_TILED_RPT=rpt)
            name = f"tiled{bq}x{rpt}"
            if rng.random() < 0.3:
                kn["SUBGROUP_ROWS"] = False
                name += "-nosg"
            if rng.random() < 0.3:
                kn["FORCE_SPLITS"] = int(rng.integers(2, 4))
                name += f"-split{kn['FORCE_SPLITS']}"
        elif c == "splits":
            sp = int(rng.integers(2, 4))
            kn = dict(FORCE_SPLITS=sp, FORCE_DECODE=False, FORCE_TILED=bool(rng.random() < 0.3))
            name = f"split{sp}" + ("-tiled" if kn["FORCE_TILED"] else "")
        else:
            lanes = bool(rng.random() < 0.5)
            kn = dict(FORCE_DECODE=True, FORCE_TILED=False, DECODE_SG=lanes)
            name = "decode-lanes" if lanes else "decode"
            if lanes and rng.random() < 0.5:
                kn["DECODE_FUSED_MERGE"] = True
                name += "-fused"
        out.append((name, kn))
    if grad:  # the backward's choice too (the forward's is kept)
        for i, (name, kn) in enumerate(out):
            r = rng.random()
            if r < 0.5 and i > 0:
                tb = int(pick(rng, (16, 32)))
                ds = bool(rng.random() < 0.4)
                g3 = ds and bool(rng.random() < 0.5)  # (dk, dv by GEMMs too: GEMM_PRODUCTS)
                kn = dict(kn, FORCE_TILED_BWD=True, FORCE_TILED_BWD_TB=tb, DS_GEMM=ds)
                kn["GEMM_PRODUCTS"] = g3
                name += f"+bwd{tb}" + ("-gemm3" if g3 else "-ds" if ds else "")
            elif r < 0.6:
                kn = dict(kn, FORCE_TILED_BWD=False)
                name += "+bwdrows"
            out[i] = (name, kn)
    return out


def gen_case(rng):
    dtype = "float16" if rng.random() < 0.2 else "float32"
    nlead = int(pick(rng, (0, 1, 1, 2)))
    lead = tuple(int(rng.integers(1, 4)) for _ in range(nlead))
    heads = rng.random() < 0.9
    H = int(rng.integers(1, 7)) if heads else 1
    L, S, E = _len(rng), _len(rng), _head_dim(rng)
    Ev = E if rng.random() < 0.9 else _head_dim(rng)
    B = math.prod(lead)
    B, H, L, S = _shrink(rng, B, H, L, S, max(E, Ev))
    if math.prod(lead) != B:
        lead = (1,) * nlead
    gqa = heads and rng.random() < 0.3
    Hk = H
    if gqa and rng.random() < 0.8:
        Hk = int(pick(rng, [d for d in range(1, H + 1) if H % d == 0]))
    causal = rng.random() < 0.25
    sigma = float(pick(rng, (0.5, 1.0, 1.0, 2.0, 4.0)))
    nd = NP_DT[dtype]

    def arr(*shape, s=sigma):
        return (rng.standard_normal(shape) * s).astype(nd)

    hq = (H,) if heads else ()
    hk = (Hk,) if heads else ()
    q, k, v = arr(*lead, *hq, L, E), arr(*lead, *hk, S, E), arr(*lead, *hk, S, Ev, s=1.0)
    mask, mdesc = _mask(rng, (*lead, *hq), L, S, dtype, causal)
    kw = {}
    if causal and mask is None:
        kw["is_causal"] = True
    r = rng.random()
    if r < 0.3:
        kw["scale"] = float(rng.uniform(0.01, 2.0) * (1 if rng.random() < 0.85 else -1))
    elif r < 0.35:
        kw["scale"] = 0.0 if rng.random() < 0.3 else float(rng.uniform(2.0, 10.0))
    if gqa:
        kw["enable_gqa"] = True
    invalid = None
    if rng.random() < 0.07:
        q, k, v, mask, invalid = _invalid(rng, q, k, v, mask, kw, dtype)
    grad = dtype == "float32" and invalid is None and rng.random() < 0.35
    layouts = {}
    for name in ("q", "k", "v"):
        a = {"q": q, "k": k, "v": v}[name]
        ops, a = _layout(rng, a, grad) if a.ndim >= 2 else ([], a)
        layouts[name] = ops
        if name == "q":
            q = a
        elif name == "k":
            k = a
        else:
            v = a
    if mask is not None and mask.ndim >= 1:
        layouts["mask"], _ = _layout(rng, mask, False, is_mask=True)
    desc = dict(dtype=dtype, q=q.shape, k=k.shape, v=v.shape, mask=mdesc, sigma=sigma, **kw)
    if invalid:
        desc["invalid"] = invalid
        desc["mask_shape"] = None if mask is None else (mask.shape, str(mask.dtype))
    if grad:
        desc["grad"] = True
    layouts = {n: o for n, o in layouts.items() if o}
    if layouts:
        desc["layouts"] = layouts
    c = Case(desc, dtype, q, k, v, mask, kw, layouts, grad, invalid=invalid)
    c.configs = _configs(rng, L, E, grad)
    return c


# ---- running -----------------------------------------------------------------------------------
@contextlib.contextmanager
def knobs(cfg):
    """nn/_attention's constants (and kernels/attention_decode's DECODE_SG) set, then restored."""
    saved = []
    try:
        for name, val in cfg.items():
            mod = A._KD if name in KD_KNOBS else A
            saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, val)
        yield
    finally:
        for mod, name, val in reversed(saved):
            setattr(mod, name, val)


def _call(M, q, k, v, mask, kw):
    return M.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)


def run_torch(case, dtype=None, mask=None, grad_w=None):
    """torch's output (and with grad_w, (dq, dk, dv) of sum(out * w)) in `dtype` (float64 for the
    reference, default the case's dtype); contiguous operands."""
    tdt = torch.float64 if dtype == "float64" else None
    kw, flip = case.kw, 1.0
    if tdt is not None and (case.kw.get("scale") or 0.0) < 0:
        # torch's math path scales q and k by sqrt(scale) each: NaN for a negative scale (with
        # is_causal in float32 too). The reference takes -q at -scale: the same scores
        kw, flip = dict(case.kw, scale=-case.kw["scale"]), -1.0
    ts = []
    for i, a in enumerate((case.q, case.k, case.v)):
        t = torch.tensor(-a if i == 0 and flip < 0 else a)
        t = t.to(tdt) if tdt is not None and a.dtype.kind == "f" else t
        if grad_w is not None:
            t.requires_grad_(True)
        ts.append(t)
    m = case.mask if mask is None else mask
    tm = None
    if m is not None:
        tm = torch.tensor(m)
        if tdt is not None and m.dtype.kind == "f" and case.invalid is None:
            tm = tm.to(tdt)
    out = _call(torch, *ts, tm, kw)
    if grad_w is None:
        return out, None
    (out * torch.tensor(grad_w, dtype=out.dtype)).sum().backward()
    return out, [t.grad * flip if i == 0 else t.grad for i, t in enumerate(ts)]


def run_pyrite(case, cfg, mask=None, grad_w=None):
    """pyrite's output as numpy (its dtype name) and the gradients (None without grad_w)."""
    with knobs(cfg):
        made = []
        for name, a in (("q", case.q), ("k", case.k), ("v", case.v)):
            made.append(_make_view(pr, case.layouts.get(name, []), a, grad_w is not None))
        m = case.mask if mask is None else mask
        pm = None
        if m is not None:
            pm = _make_view(pr, case.layouts.get("mask", []), m, False)[1]
        out = _call(pr, *[x[1] for x in made], pm, case.kw)
        res = out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)
        dt = str(out.dtype).replace("pyrite.", "").replace("torch.", "")
        if grad_w is None:
            return res, dt, None
        (out * pr.tensor(grad_w.astype(NP_DT[case.dtype]))).sum().backward()
        grads = []
        for (leaf, _), name in zip(made, "qkv"):
            g = None if leaf.grad is None else leaf.grad.numpy().astype(np.float64)
            grads.append(None if g is None else _apply(case.layouts.get(name, []), g, numpy=True))
        return res, dt, grads


def which_kernel(case, cfg):
    """The forward kernel the call takes under `cfg` (for the coverage counts; best effort)."""
    try:
        with knobs(cfg):
            q, k, v = (pr.tensor(a) for a in (case.q, case.k, case.v))
            m = None if case.mask is None else pr.tensor(case.mask)
            gqa = bool(case.kw.get("enable_gqa"))
            if not A._fusable(q, k, v, m, gqa) or case.q.dtype != case.k.dtype:
                return "composite"
            L, E = case.q.shape[-2:]
            S = case.k.shape[-2]
            nbh = math.prod(A._lead_shape(q, k, v, m, gqa and q.ndim >= 3 and
                                          k.shape[-3] != q.shape[-3]))  # fmt: skip
            dev = backend.current()
            if A._decode_splits(dev, nbh, L, S, E):
                return "decode" + ("-lanes" if A._decode_lanes(dev, E) else "")
            causal = bool(case.kw.get("is_causal"))
            if A._use_tiled(dev, nbh, L, S, E, causal):
                return "tiled%dx%d" % A._tiled_shape(dev, nbh, L, S, E, causal)
            return "flash"
    except Exception:  # noqa: BLE001
        return "?"


# ---- judging -----------------------------------------------------------------------------------
def _expand_heads(t, hq, gqa):
    if not gqa or t.ndim < 3 or t.shape[-3] == hq:
        return t
    return t.repeat_interleave(hq // t.shape[-3], dim=-3)


def bounds(case, w=None, mask=None):
    """Per-element error bounds (float64 numpy) of the output and, with w, of dq, dk, dv."""
    u = U[case.dtype]
    q = torch.tensor(case.q.astype(np.float64))
    k = torch.tensor(case.k.astype(np.float64))
    v = torch.tensor(case.v.astype(np.float64))
    gqa = bool(case.kw.get("enable_gqa"))
    hq = q.shape[-3] if q.ndim >= 3 else 1
    k, v = _expand_heads(k, hq, gqa), _expand_heads(v, hq, gqa)
    L, E = q.shape[-2:]
    S = k.shape[-2]
    scale = case.kw.get("scale")
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    cE, cS, cL = 16 + 4 * math.sqrt(E), 16 + 4 * math.sqrt(S), 16 + 4 * math.sqrt(L)
    s = scale * (q @ k.transpose(-2, -1))
    a = abs(scale) * (q.abs() @ k.abs().transpose(-2, -1))
    m = case.mask if mask is None else mask
    if case.kw.get("is_causal"):
        m = np.tril(np.ones((L, S), bool))
    if m is not None:
        mt = torch.tensor(m)
        madd = (
            torch.where(mt, 0.0, -math.inf).to(torch.float64)
            if mt.dtype == torch.bool
            else mt.to(torch.float64)
        )
        s = s + madd
        a = a + torch.zeros_like(madd)
    dead = torch.isneginf(s).all(-1, keepdim=True)
    p = torch.softmax(torch.where(dead, 0.0, s), -1) * (~dead)
    fin = torch.isfinite(s)
    # (capped: a score past 0.5 off is no bound; rows all at a mask's most negative float
    # round alike in both and would otherwise pass anything)
    D = (u * (cE * a + 8 * torch.where(fin, s.abs(), 0.0) + 8)).clamp(max=0.5) * fin
    r = (p * D).sum(-1, keepdim=True)
    dp = p * (D + r)  # |δp|
    o = p @ v
    va = v.abs()
    tol_o = dp @ va + u * cS * (p @ va) + 4 * u * o.abs()
    if w is None:
        return tol_o.numpy(), None
    wt = torch.tensor(w.astype(np.float64))
    wa = wt.abs()
    dP = wt @ v.transpose(-2, -1)
    dPa = wa @ va.transpose(-2, -1)
    Dl = (wt * o).sum(-1, keepdim=True)
    eDl = u * cE * (wa * o.abs()).sum(-1, keepdim=True) + (wa * tol_o).sum(-1, keepdim=True)
    g = dP - Dl
    dS = p * g
    edS = dp * g.abs() + p * (u * cE * dPa + eDl) + 4 * u * dS.abs()
    sa = abs(scale)
    e_dq = sa * (edS @ k.abs() + u * cS * (dS.abs() @ k.abs())) + 4 * u * (scale * dS @ k).abs()
    dsT = dS.abs().transpose(-2, -1)
    e_dk = sa * (edS.transpose(-2, -1) @ q.abs() + u * cL * (dsT @ q.abs()))
    e_dv = dp.transpose(-2, -1) @ wa + u * cL * (p.transpose(-2, -1) @ wa)

    def fold(e, shape):  # (summed over a group's query heads, and over broadcast dims)
        if gqa and e.ndim >= 3 and e.shape[-3] != shape[-3]:
            e = e.reshape(*e.shape[:-3], shape[-3], -1, *e.shape[-2:]).sum(-3)
        while e.ndim > len(shape):
            e = e.sum(0)
        for d, n in enumerate(shape):
            if n == 1 and e.shape[d] != 1:
                e = e.sum(d, keepdim=True)
        return e.numpy()

    return tol_o.numpy(), [
        fold(e_dq, case.q.shape),
        fold(e_dk, case.k.shape),
        fold(e_dv, case.v.shape),
    ]


def _dead_rows(case, shape, mask=None):
    """Bool (broadcast to `shape`'s rows, (..., L, 1)) of the query rows whose keys are all
    masked, or None."""
    m = case.mask if mask is None else mask
    if m is None or case.kw.get("is_causal"):
        return None
    dead = ~m.any(-1, keepdims=True) if m.dtype == bool else np.isneginf(m).all(-1, keepdims=True)
    try:
        return np.broadcast_to(dead, (*shape[:-1], 1))
    except ValueError:
        return None


def compare(name, got, ref, tol, dead=None):
    """(ratio, note): the worst error / (2 · its bound); inf for shape or NaN pattern."""
    if got.shape != ref.shape:
        return math.inf, f"{name}: shape {got.shape} vs torch {ref.shape}"
    if got.size == 0:
        return 0.0, ""
    g = got.astype(np.float64)
    nan_g, nan_r = ~np.isfinite(g), ~np.isfinite(ref)
    if dead is not None:  # (torch NaN where pyrite 0 on a row with every key masked: documented)
        ok = nan_r & ~nan_g & (g == 0) & np.broadcast_to(dead, g.shape)
        nan_r = nan_r & ~ok
        ref = np.where(ok, 0.0, ref)
    if (nan_g != nan_r).any():
        i = np.argwhere(nan_g != nan_r)[0]
        return math.inf, (
            f"{name}: non-finite pattern differs at {int((nan_g != nan_r).sum())} of {g.size} "
            f"(first {tuple(int(x) for x in i)}: pyrite {g[tuple(i)]}, torch {ref[tuple(i)]})"
        )
    fin = ~nan_r
    err = np.abs(g - ref)[fin]
    if err.size == 0 or err.max() == 0:
        return 0.0, ""
    # (twice the bound, and a floor for float32's underflow of exp: weights below 2^-126 times
    # the inputs' sums are lost; the inputs are ~N(0, 4) at most)
    t = np.broadcast_to(tol, g.shape)[fin] * 2 + 1e-30
    q = err / t
    i = int(np.argmax(q))
    where = tuple(int(x) for x in np.argwhere(fin)[i])
    return float(q[i]), (
        f"{name}: err {err[i]:.3g} at {where} (pyrite {g[where]:.6g}, torch {ref[where]:.6g}), "
        f"bound {t[i] / 2:.3g}, max |ref| {np.abs(ref[fin]).max():.3g}"
    )


def _clear(exc):
    """Whether pyrite's refusal is a clear error (a pyrite error or message, not a driver's)."""
    msg = str(exc)
    if isinstance(exc, (AssertionError, AttributeError, KeyError, ZeroDivisionError)):
        return False
    return "pyrite" in msg or type(exc).__module__.startswith("pyrite")


def _pyrite_or_refusal(case, name, cfg, msgs):
    """pyrite's output under `cfg`, or None where it refused the call (a refusal that is not a
    clear pyrite error noted in `msgs`)."""
    try:
        return run_pyrite(case, cfg)[0]
    except Exception as exc:  # noqa: BLE001 - a refusal is judged, not raised
        if not _clear(exc):
            msgs.append(f"[{name}] unclear refusal {type(exc).__name__}: {str(exc)[:300]}")
        return None


def check(case, rng):
    """None (agreed) or a string describing the mismatches; counts kernels in case.desc."""
    msgs = []
    # does torch (in the case's dtype, with grad where the case has it) take the call?
    w = None
    try:
        t_out, _ = run_torch(case)
        terr = None
    except Exception as exc:  # noqa: BLE001 - torch's refusal is what pyrite must match
        terr = exc
    ref_mask = None
    if terr is None and case.invalid in TORCH_LAX:
        for name, cfg in case.configs:
            res = _pyrite_or_refusal(case, name, cfg, msgs)
            if res is not None:
                msgs.append(
                    f"[{name}] pyrite accepts an invalid call ({case.invalid}): {res.shape}"
                )
        return "; ".join(msgs) or None
    if terr is not None:
        for name, cfg in case.configs:
            res = _pyrite_or_refusal(case, name, cfg, msgs)
            if res is None:
                continue
            if case.invalid in EXTENSIONS and case.mask is not None and case.mask.ndim == 1:
                ref_mask = case.mask[None, :]  # judged as the (1, S) mask torch takes
                break
            msgs.append(
                f"[{name}] torch raises ({type(terr).__name__}: {str(terr)[:160]}), pyrite "
                f"accepts (shape {res.shape})"
            )
        if ref_mask is None:
            return "; ".join(msgs) or None
    if case.grad:
        w = rng.standard_normal(tuple(t_out.shape) if terr is None else (1,)).astype(np.float32)
    ref, ref_g = run_torch(case, "float64", mask=ref_mask, grad_w=w)
    ref = ref.detach().numpy()
    ref_g = None if ref_g is None else [None if g is None else g.numpy() for g in ref_g]
    tol, tol_g = bounds(case, w, mask=ref_mask)
    dead = _dead_rows(case, ref.shape, ref_mask)
    worst = 0.0
    kernels = []
    for name, cfg in case.configs:
        kernels.append(which_kernel(case, cfg))
        try:
            got, dt, grads = run_pyrite(case, cfg, mask=ref_mask, grad_w=w)
        except Exception as exc:  # noqa: BLE001
            msgs.append(f"[{name}] pyrite raises {type(exc).__name__}: {str(exc)[:300]}")
            continue
        if dt != case.dtype:
            msgs.append(f"[{name}] output dtype {dt}, expected {case.dtype}")
        ratio, note = compare("out", got, ref, tol, dead)
        worst = max(worst, ratio)
        if ratio > 1:
            msgs.append(f"[{name}] {note} (ratio {ratio:.3g})")
        if w is not None:
            for gname, g, rg, tg in zip(("dq", "dk", "dv"), grads, ref_g, tol_g):
                if g is None or rg is None:
                    if (g is None) != (rg is None):
                        msgs.append(f"[{name}] {gname}: None in one of them")
                    continue
                ratio, note = compare(gname, g, rg, tg, None)
                worst = max(worst, ratio)
                if ratio > 1:
                    msgs.append(f"[{name}] {note} (ratio {ratio:.3g})")
    case.desc["kernels"] = kernels
    case.desc["worst"] = round(worst, 4)
    return "; ".join(msgs) or None


def describe(case):
    return (
        " ".join(f"{k}={v}" for k, v in case.desc.items())
        + " configs="
        + str([n for n, _ in case.configs])
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--case", type=int, default=None, help="run only case I of the seed")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--max-report", type=int, default=60)
    args = ap.parse_args(argv)
    idx = [args.case] if args.case is not None else range(args.n)
    counts, fails, kern = collections.Counter(), 0, collections.Counter()
    reported, t0, worst = 0, time.time(), 0.0
    for i in idx:
        rng = np.random.default_rng([args.seed, i])
        try:
            case = gen_case(rng)
        except Exception:  # noqa: BLE001
            print(f"[{i}] generator crashed\n{traceback.format_exc()}", flush=True)
            fails += 1
            continue
        tc = time.time()
        try:
            msg = check(case, rng)
        except Exception:  # noqa: BLE001 - a crash of the harness is a finding too
            msg = "harness: " + traceback.format_exc(limit=4)[-800:]
        kind = "invalid" if case.invalid else ("grad" if case.grad else "forward")
        counts[kind] += 1
        for kname in case.desc.get("kernels", []):
            kern[kname.split("-")[0] if kname.startswith("decode") else kname] += 1
        worst = max(worst, case.desc.get("worst", 0.0) if msg is None else 0.0)
        if args.verbose:
            print(f"[{i}] {'ok' if msg is None else 'FAIL'} {time.time() - tc:.2f}s "
                  f"{describe(case)}", flush=True)  # fmt: skip
        if msg is not None:
            fails += 1
            if reported < args.max_report:
                reported += 1
                print(f"---- case {i} (seed {args.seed}): {describe(case)}\n    {msg}\n",
                      flush=True)  # fmt: skip
    n = sum(counts.values())
    print(f"# {n} cases ({dict(counts)}) in {time.time() - t0:.0f} s, seed {args.seed}")
    print(f"# forward kernels taken (all configs): {dict(sorted(kern.items()))}")
    print(f"# worst passing ratio {worst:.3g}")
    print(f"# {fails} mismatches")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
