"""Randomized differential fuzzing of pyrite's spatial nn.functional ops against torch (CPU).

    .venv/bin/python scripts/fuzz_spatial.py --n 200 --seed 0 [--family conv,pool] [--verbose]

Each case draws one op with random valid (and now and then invalid) parameters and an awkward
shape (sizes 1, primes, odd; batch 1 and more; channels not multiples of 4), runs it in torch
float32, torch float64 and pyrite float32, and compares output shapes, values, and gradients of
sum(out * g) (g a random cotangent) w.r.t. every floating input (and a module's parameters).
Where torch raises, pyrite must raise (any error); where torch accepts, pyrite must accept.

Tolerance kinds (the case says which):
  lin     the op is linear in each input (conv, avg pools, interpolate, fold, grid_sample in its
          input): the same op in float64 on |inputs| with |g| bounds the summation, so the
          error is judged as err / (eps32 * bound), allowed 16 + 4 sqrt(K) (K: terms per sum).
  exact   a selection (max pools, pad, pixel_shuffle, unfold, nearest): values and indices
          equal torch float32's bit for bit; gradients (sums of routed g) within 64 eps of the
          largest |gradient|.
  smooth  nonlinear (lp_pool, affine_grid, grid_sample in its grid): within 1e-4 of the
          largest |value| (relative), against torch float64.
A case reports the worst ratio; the mismatches list names the op, its parameters and the seed,
so `--seed S --n 1 --family F` reruns it.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import torch

import pyrite as pr

EPS = float(np.finfo(np.float32).eps)
LAYOUTS = True  # pyrite's inputs as non-contiguous views now and then (--contiguous: never)
SIZES = (1, 2, 3, 4, 5, 7, 8, 11, 13)
SMALL = (1, 2, 3, 5, 7)


# torch refusals pyrite documents as accepted (README, "A few things torch refuses are accepted")
EXTENSIONS = ("Supported combinations for non-constant padding",)


@dataclass
class Case:
    op: str
    params: dict
    fn: object  # fn(T, *tensors) -> output | tuple | Mod
    inputs: list
    grad: list  # per input: differentiable?
    kind: str = "lin"
    K: int = 16
    gkinds: list | None = None  # per-input gradient kind, default `kind`
    coord: float = 4.0  # eps of the largest bound allowed on top (interpolate: f32 coordinates)
    keep: tuple = ()
    torch_bug: object = None  # torch_bug(torch outputs) -> True where torch's own answer is wrong  # inputs not made absolute for the bound (grid_sample's grid)


@dataclass
class Mod:
    out: object
    params: list = field(default_factory=list)


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _rand(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


def _tup(rng, d, lo, hi):
    return tuple(int(rng.integers(lo, hi + 1)) for _ in range(d))


def _maybe_int(rng, t):
    """An int instead of a tuple when every entry agrees, half the time."""
    if len(set(t)) == 1 and rng.random() < 0.5:
        return t[0]
    return t


def _spatial(rng, d, cap=None):
    cap = cap or {1: 13, 2: 11, 3: 7}[d]
    return tuple(int(_pick(rng, [s for s in SIZES if s <= cap])) for _ in range(d))


# ---- conv ------------------------------------------------------------------------------------


def gen_conv(rng):
    d = int(rng.integers(1, 4))
    transpose = rng.random() < 0.4
    module = (not transpose) and rng.random() < 0.25
    g = int(_pick(rng, (1, 1, 2, 3)))
    cin, cout = g * int(rng.integers(1, 4)), g * int(rng.integers(1, 4))
    n = int(_pick(rng, (1, 1, 2, 3)))
    kmax = {1: 5, 2: 4, 3: 3}[d]
    k = _tup(rng, d, 1, kmax)
    stride = _tup(rng, d, 1, 3) if rng.random() < 0.6 else (1,) * d
    dil = _tup(rng, d, 1, 3) if rng.random() < 0.4 else (1,) * d
    sp = _spatial(rng, d)
    unbatched = rng.random() < 0.1
    if rng.random() < 0.03:
        n = 0
    xshape = (cin, *sp) if unbatched else (n, cin, *sp)
    bias = rng.random() < 0.6
    x = _rand(rng, xshape)
    if transpose:
        pad = tuple(int(rng.integers(0, dil[i] * (k[i] - 1) + 1)) for i in range(d))
        opad = tuple(int(rng.integers(0, max(stride[i], dil[i]))) for i in range(d))
        if rng.random() < 0.05:
            opad = tuple(max(stride[i], dil[i]) for i in range(d))  # torch refuses
        w = _rand(rng, (cin, cout // g, *k))
        b = _rand(rng, (cout,)) if bias else None
        p = dict(d=d, stride=stride, padding=pad, output_padding=opad, dilation=dil, groups=g,
                 x=xshape, w=w.shape, bias=bias)  # fmt: skip
        name = f"conv_transpose{d}d"
        args = dict(stride=_maybe_int(rng, stride), padding=_maybe_int(rng, pad),
                    output_padding=_maybe_int(rng, opad), groups=g, dilation=_maybe_int(rng, dil))  # fmt: skip

        def fn(T, x, w, *b, args=args, name=name):
            return getattr(T.nn.functional, name)(x, w, b[0] if b else None, **args)

        ins = [x, w] + ([b] if bias else [])
        return Case(name, p, fn, ins, [True] * len(ins), "lin", K=cin * math.prod(k))
    r = rng.random()
    if r < 0.15:
        pad = "same"
    elif r < 0.25:
        pad = "valid"
    else:
        pad = tuple(int(rng.integers(0, dil[i] * (k[i] - 1) // 2 + 2)) for i in range(d))
    w = _rand(rng, (cout, cin // g, *k))
    b = _rand(rng, (cout,)) if bias else None
    ins = [x, w] + ([b] if bias else [])
    if module:
        mode = _pick(rng, ("zeros", "reflect", "replicate", "circular"))
        p = dict(d=d, stride=stride, padding=pad, dilation=dil, groups=g, x=xshape, w=w.shape,
                 bias=bias, padding_mode=mode)  # fmt: skip
        name = f"nn.Conv{d}d"

        def fn(T, x, w, *b, d=d, p=p, k=k, mode=mode, pad=pad):
            cls = getattr(T.nn, f"Conv{d}d")
            m = cls(cin, cout, k, stride=p["stride"], padding=pad, dilation=p["dilation"],
                    groups=g, bias=bool(b), padding_mode=mode).to(x.dtype)  # fmt: skip
            with T.no_grad():
                m.weight.copy_(w)
                if b:
                    m.bias.copy_(b[0])
            return Mod(m(x), [m.weight] + ([m.bias] if b else []))

        # w and b are copied into the module's parameters: their gradients are the module's
        return Case(name, p, fn, ins, [True] + [False] * (len(ins) - 1), "lin",
                    K=cin // g * math.prod(k))  # fmt: skip
    p = dict(d=d, stride=stride, padding=pad, dilation=dil, groups=g, x=xshape, w=w.shape,
             bias=bias)  # fmt: skip
    name = f"conv{d}d"
    args = dict(stride=_maybe_int(rng, stride),
                padding=pad if isinstance(pad, str) else _maybe_int(rng, pad),
                dilation=_maybe_int(rng, dil), groups=g)  # fmt: skip

    def fn(T, x, w, *b, args=args, name=name):
        return getattr(T.nn.functional, name)(x, w, b[0] if b else None, **args)

    return Case(name, p, fn, ins, [True] * len(ins), "lin", K=cin // g * math.prod(k))


# ---- pool ------------------------------------------------------------------------------------


def gen_pool(rng):
    d = int(rng.integers(1, 4))
    kind = _pick(rng, ("max", "max", "avg", "avg", "amax", "aavg", "lp"))
    c = int(_pick(rng, (1, 2, 3, 5)))
    n = int(_pick(rng, (1, 2, 3)))
    sp = _spatial(rng, d)
    xshape = (c, *sp) if rng.random() < 0.15 else (n, c, *sp)
    x = _rand(rng, xshape)
    if kind in ("max", "amax", "avg", "aavg") and rng.random() < 0.3:
        x = rng.integers(-2, 3, xshape).astype(np.float32)  # ties: the first maximum wins
        if kind in ("max", "amax") and rng.random() < 0.3:
            x[rng.random(xshape) < 0.2] = -np.inf
    F = "T.nn.functional"
    if kind in ("amax", "aavg"):
        osz = tuple(int(rng.integers(1, s + 3)) for s in sp)
        if d > 1 and rng.random() < 0.2:
            osz = tuple(None if rng.random() < 0.5 else o for o in osz)
        osz_arg = osz[0] if d == 1 else _maybe_int(rng, osz)
        if kind == "amax":
            ri = rng.random() < 0.5
            name = f"adaptive_max_pool{d}d"

            def fn(T, x, name=name, o=osz_arg, ri=ri):
                return getattr(T.nn.functional, name)(x, o, return_indices=ri)

            return Case(name, dict(x=xshape, output_size=osz_arg, return_indices=ri), fn, [x],
                        [True], "exact")  # fmt: skip
        name = f"adaptive_avg_pool{d}d"

        def fn(T, x, name=name, o=osz_arg):
            return getattr(T.nn.functional, name)(x, o)

        kk = math.prod(-(-s // max(1, o or s)) + 1 for s, o in zip(sp, osz))
        return Case(name, dict(x=xshape, output_size=osz_arg), fn, [x], [True], "lin", K=kk)
    kmax = {1: 5, 2: 4, 3: 3}[d]
    k = _tup(rng, d, 1, kmax)
    stride = None if rng.random() < 0.3 else _tup(rng, d, 1, 3)
    pad = tuple(int(rng.integers(0, k[i] // 2 + 1)) for i in range(d))
    if rng.random() < 0.05:
        pad = tuple(k[i] // 2 + 1 for i in range(d))  # torch refuses
    ceil = rng.random() < 0.4
    del F
    if kind == "max":
        dil = _tup(rng, d, 1, 3) if rng.random() < 0.4 else (1,) * d
        ri = rng.random() < 0.5
        name = f"max_pool{d}d"
        args = dict(kernel_size=_maybe_int(rng, k), stride=stride and _maybe_int(rng, stride),
                    padding=_maybe_int(rng, pad), dilation=_maybe_int(rng, dil), ceil_mode=ceil,
                    return_indices=ri)  # fmt: skip

        def fn(T, x, name=name, args=args):
            return getattr(T.nn.functional, name)(x, **args)

        return Case(name, dict(x=xshape, **args), fn, [x], [True], "exact")
    if kind == "avg":
        cip = rng.random() < 0.5
        args = dict(kernel_size=_maybe_int(rng, k), stride=stride and _maybe_int(rng, stride),
                    padding=_maybe_int(rng, pad), ceil_mode=ceil, count_include_pad=cip)  # fmt: skip
        if d > 1 and rng.random() < 0.3:
            args["divisor_override"] = int(rng.integers(1, 7))
        name = f"avg_pool{d}d"

        def fn(T, x, name=name, args=args):
            return getattr(T.nn.functional, name)(x, **args)

        return Case(name, dict(x=xshape, **args), fn, [x], [True], "lin", K=math.prod(k))
    # lp
    p = _pick(rng, (1, 2, 3, 1.5, 2.5))
    if p != int(p) or rng.random() < 0.5:
        x = np.abs(x) + np.float32(0.1)
    # torch's lp_pool1d multiplies by kernel_size itself: a tuple fails there (torch's bug)
    kernel = k[0] if d == 1 else _maybe_int(rng, k)
    args = dict(norm_type=p, kernel_size=kernel, stride=stride and _maybe_int(rng, stride),
                ceil_mode=ceil)  # fmt: skip
    name = f"lp_pool{d}d"

    def fn(T, x, name=name, args=args):
        return getattr(T.nn.functional, name)(x, **args)

    return Case(name, dict(x=xshape, **args), fn, [x], [True], "smooth")


# ---- interpolate -----------------------------------------------------------------------------

MODES = {1: ("nearest", "nearest-exact", "linear", "area"),
         2: ("nearest", "nearest-exact", "bilinear", "bicubic", "area"),
         3: ("nearest", "nearest-exact", "trilinear", "area")}  # fmt: skip


def gen_interp(rng):
    d = int(rng.integers(1, 4))
    mode = _pick(rng, MODES[d])
    if rng.random() < 0.03:
        mode = _pick(rng, ("linear", "bilinear", "trilinear", "bicubic"))  # maybe mismatched dim
    n, c = int(_pick(rng, (1, 2))), int(_pick(rng, (1, 2, 3, 5)))
    sp = _spatial(rng, d)
    x = _rand(rng, (n, c, *sp))
    args = dict(mode=mode)
    if rng.random() < 0.5:
        size = tuple(int(rng.integers(1, 2 * s + 4)) for s in sp)
        args["size"] = _maybe_int(rng, size)
    else:
        sf = tuple(
            float(_pick(rng, (0.5, 1.0, 1.5, 1.7, 2.0, 3.0, 0.3, 1 / 3, 2.5, 0.75))) for _ in sp
        )
        args["scale_factor"] = _maybe_int(rng, sf)
        rsf = _pick(rng, (None, True, False))
        if rsf is not None:
            args["recompute_scale_factor"] = rsf
    linear = mode in ("linear", "bilinear", "bicubic", "trilinear")
    if linear and rng.random() < 0.6:
        args["align_corners"] = bool(rng.random() < 0.5)
    if mode in ("bilinear", "bicubic") and rng.random() < 0.3:
        args["antialias"] = True
    if rng.random() < 0.02:
        args["align_corners"] = True  # torch refuses for nearest/area
    kind = "exact" if mode.startswith("nearest") else "lin"

    def fn(T, x, args=args):
        return T.nn.functional.interpolate(x, **args)

    def width1(outs):
        # torch's antialiased resize to a width of 1 skips the height's pass (output rows equal)
        return args.get("antialias") and outs[0].shape[-1] == 1

    return Case("interpolate", dict(x=x.shape, **args), fn, [x], [True], kind, K=16, coord=64.0,
                torch_bug=width1)  # fmt: skip


# ---- pad / fold / pixel shuffle --------------------------------------------------------------


def gen_pad(rng):
    mode = _pick(rng, ("constant", "constant", "reflect", "replicate", "circular"))
    nd = int(rng.integers(1, 6))
    shape = tuple(int(_pick(rng, (1, 2, 3, 4, 5, 7))) for _ in range(nd))
    while math.prod(shape) > 4000:
        shape = shape[1:]
    m = int(rng.integers(1, min(3, len(shape)) + 1))
    pads = []
    for i in range(m):
        s = shape[-1 - i]
        lo = -s + 1 if rng.random() < 0.3 else 0
        hi = s if mode in ("reflect", "circular") else s + 2
        pair = [int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))]
        if mode == "circular":
            # wrapping past the cropped size: torch reads memory it never wrote (its bug)
            left = s + min(0, pair[0]) + min(0, pair[1])
            pair = [min(v, max(left, 0)) for v in pair]
        pads += pair
    x = _rand(rng, shape)
    args = dict(mode=mode)
    if mode == "constant" and rng.random() < 0.5:
        args["value"] = float(rng.standard_normal())

    def fn(T, x, pads=tuple(pads), args=args):
        return T.nn.functional.pad(x, pads, **args)

    return Case("pad", dict(x=shape, pad=tuple(pads), **args), fn, [x], [True], "exact")


def gen_fold(rng):
    k = _tup(rng, 2, 1, 4)
    dil = _tup(rng, 2, 1, 2)
    pad = _tup(rng, 2, 0, 2)
    st = _tup(rng, 2, 1, 3)
    sp = _spatial(rng, 2)
    n, c = int(_pick(rng, (1, 2, 3))), int(_pick(rng, (1, 2, 3, 5)))
    args = dict(kernel_size=_maybe_int(rng, k), dilation=_maybe_int(rng, dil),
                padding=_maybe_int(rng, pad), stride=_maybe_int(rng, st))  # fmt: skip
    batched = rng.random() < 0.85
    if rng.random() < 0.5:
        x = _rand(rng, (n, c, *sp) if batched else (c, *sp))

        def fn(T, x, args=args):
            return T.nn.functional.unfold(x, **args)

        return Case("unfold", dict(x=x.shape, **args), fn, [x], [True], "exact")
    L = 1
    for i in range(2):
        L *= max(0, (sp[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1)
    if rng.random() < 0.05:
        L += 1  # torch refuses
    x = _rand(rng, (n, c * k[0] * k[1], L) if batched else (c * k[0] * k[1], L))

    def fn(T, x, args=args, osz=_maybe_int(rng, sp)):
        return T.nn.functional.fold(x, osz, **args)

    return Case("fold", dict(x=x.shape, output_size=sp, **args), fn, [x], [True], "lin",
                K=math.prod(k))  # fmt: skip


def gen_shuffle(rng):
    r = int(rng.integers(1, 4))
    lead = tuple(int(_pick(rng, (1, 2, 3))) for _ in range(int(rng.integers(0, 3))))
    if rng.random() < 0.5:
        c = int(_pick(rng, (1, 2, 3))) * r * r
        if rng.random() < 0.05:
            c += 1
        shape = (*lead, c, int(_pick(rng, SMALL)), int(_pick(rng, SMALL)))

        def fn(T, x, r=r):
            return T.nn.functional.pixel_shuffle(x, r)

        name = "pixel_shuffle"
    else:
        h, w = int(_pick(rng, SMALL)) * r, int(_pick(rng, SMALL)) * r
        if rng.random() < 0.05:
            h += 1
        shape = (*lead, int(_pick(rng, (1, 2, 3))), h, w)

        def fn(T, x, r=r):
            return T.nn.functional.pixel_unshuffle(x, r)

        name = "pixel_unshuffle"
    return Case(name, dict(x=shape, r=r), fn, [_rand(rng, shape)], [True], "exact")


# ---- grid_sample / affine_grid / embedding_bag -----------------------------------------------


def gen_grid(rng):
    if rng.random() < 0.25:
        d = int(_pick(rng, (2, 3)))
        n = int(_pick(rng, (1, 2, 3)))
        theta = _rand(rng, (n, d, d + 1))
        size = (n, int(_pick(rng, (1, 2, 3))), *_spatial(rng, d, cap=7))
        ac = bool(rng.random() < 0.5)

        def fn(T, th, size=size, ac=ac):
            return T.nn.functional.affine_grid(th, list(size), align_corners=ac)

        return Case("affine_grid", dict(theta=theta.shape, size=size, align_corners=ac), fn,
                    [theta], [True], "smooth")  # fmt: skip
    d = int(_pick(rng, (2, 2, 3)))
    mode = _pick(rng, ("bilinear", "nearest", "bicubic") if d == 2 else ("bilinear", "nearest"))
    pm = _pick(rng, ("zeros", "border", "reflection"))
    ac = bool(rng.random() < 0.5)
    n, c = int(_pick(rng, (1, 2))), int(_pick(rng, (1, 2, 3, 5)))
    sp = _spatial(rng, d, cap=9 if d == 2 else 5)
    osp = _spatial(rng, d, cap=7 if d == 2 else 4)
    x = _rand(rng, (n, c, *sp))
    grid = (rng.uniform(-1.3, 1.3, (n, *osp, d))).astype(np.float32)
    if rng.random() < 0.3:  # pixel centres and corners exactly, and far outside
        snap = np.array([-1, 1, 0, -3, 2.5, -0.5, 0.5], np.float32)
        pick = rng.random(grid.shape) < 0.4
        grid[pick] = snap[rng.integers(0, len(snap), int(pick.sum()))]

    def fn(T, x, g, mode=mode, pm=pm, ac=ac):
        return T.nn.functional.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac)

    # the weights come from f32 coordinates (error ~eps * size): judged against the output's scale
    kind = "exact" if mode == "nearest" else "smooth"
    gk = "exact" if mode == "nearest" else "smooth"
    return Case("grid_sample", dict(x=x.shape, grid=grid.shape, mode=mode, padding_mode=pm,
                                    align_corners=ac), fn, [x, grid], [True, mode != "nearest"],
                kind, K=16, gkinds=[kind, gk], keep=(1,))  # fmt: skip


def gen_bag(rng):
    num, dim = int(_pick(rng, (1, 3, 7, 10))), int(_pick(rng, (1, 2, 3, 5)))
    mode = _pick(rng, ("sum", "mean", "max"))
    w = _rand(rng, (num, dim))
    pidx = int(rng.integers(-num, num)) if rng.random() < 0.3 else None
    args = dict(mode=mode, padding_idx=pidx)
    psw = mode == "sum" and rng.random() < 0.4
    if rng.random() < 0.5:
        b, L = int(_pick(rng, (1, 2, 3))), int(_pick(rng, (1, 2, 4)))
        idx = rng.integers(0, num, (b, L)).astype(np.int64)
        offs = None
    else:
        total = int(rng.integers(0, 9))
        idx = rng.integers(0, num, (total,)).astype(np.int64)
        nb = int(rng.integers(1, 5))
        offs = np.sort(rng.integers(0, total + 1, nb)).astype(np.int64)
        offs[0] = 0
        ilo = rng.random() < 0.3
        if ilo:
            offs = np.concatenate([offs, [total]]).astype(np.int64)
        args["include_last_offset"] = ilo
    ins, grads = [w, idx], [True, False]
    if offs is not None:
        ins.append(offs)
        grads.append(False)
    if psw:
        ins.append(_rand(rng, idx.shape))
        grads.append(True)

    def fn(T, w, idx, *rest, args=args, has_offs=offs is not None, psw=psw):
        offs = rest[0] if has_offs else None
        ps = rest[-1] if psw else None
        return T.nn.functional.embedding_bag(idx, w, offs, per_sample_weights=ps, **args)

    kind = "exact" if mode == "max" else "lin"
    p = dict(weight=w.shape, idx=idx.tolist(), offsets=None if offs is None else offs.tolist(), **args,
             psw=psw)  # fmt: skip
    return Case("embedding_bag", p, fn, ins, grads, kind, K=16)


FAMILIES = {"conv": gen_conv, "pool": gen_pool, "interp": gen_interp, "pad": gen_pad,
            "fold": gen_fold, "shuffle": gen_shuffle, "grid": gen_grid, "bag": gen_bag}  # fmt: skip


# ---- running and judging ---------------------------------------------------------------------


def _to(T, a, dtype, grad, layout=None):
    """(leaf, the tensor the op gets, leaf gradient -> input-shaped gradient). layout: None
    (contiguous), ("perm", p) (a permuted view of a tensor stored in order p) or "step" (every
    other element of a tensor twice as long in its last dim)."""
    a = a.astype(dtype) if a.dtype.kind == "f" else a
    ident = lambda g: g  # noqa: E731
    if layout is None or a.ndim == 0:
        leaf, view, back = T.tensor(a), None, ident
    elif layout == "step":
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        big[..., ::2] = a
        leaf, back = T.tensor(big), (lambda g: g[..., ::2])
        view = "step"
    else:
        p = layout[1]
        inv = tuple(int(i) for i in np.argsort(p))
        leaf = T.tensor(np.ascontiguousarray(a.transpose(p)))
        view, back = ("perm", inv), (lambda g: g.transpose(inv))
    if grad:
        leaf.requires_grad_(True)
    if view == "step":
        t = leaf[..., ::2]
    elif view is not None:
        t = leaf.permute(*view[1])
    else:
        t = leaf
    return leaf, t, back


def run(T, case, dtype, cots=None, absin=False, layouts=None):
    """Returns (outputs as numpy, gradients as numpy (None where absent), output tensors)."""
    arrays = [
        np.abs(a) if absin and a.dtype.kind == "f" and i not in case.keep else a
        for i, a in enumerate(case.inputs)
    ]
    layouts = layouts or [None] * len(arrays)
    made = [_to(T, a, dtype, g, lay) for a, g, lay in zip(arrays, case.grad, layouts)]
    res = case.fn(T, *[m[1] for m in made])
    params = []
    if isinstance(res, Mod):
        res, params = res.out, res.params
    outs = list(res) if isinstance(res, tuple) else [res]
    if cots is None:
        return outs, None, params
    leaves = [m for m, g in zip(made, case.grad) if g] + [(v, v, lambda g: g) for v in params]
    loss = None
    for o, c in zip(outs, cots):
        if c is None:
            continue
        cc = np.abs(c) if absin else c
        ct = _to(T, cc, dtype, False)[1]
        if T is not torch and params:
            ct = ct.to(o.dtype)
        term = (o * ct).sum()
        loss = term if loss is None else loss + term
    grads = []
    if loss is not None and any(getattr(m[0], "requires_grad", False) for m in leaves):
        loss.backward()
        grads = [
            None if v.grad is None else back(v.grad.detach().numpy().astype(np.float64))
            for v, _, back in leaves
        ]
    return [o.detach().numpy() for o in outs], grads, params


def _layouts(case, rng):
    """Random non-contiguous layouts for pyrite's float inputs (a third of the cases)."""
    if rng.random() > 0.33:
        return None
    out = []
    for a in case.inputs:
        if a.dtype.kind != "f" or a.ndim == 0 or rng.random() < 0.3:
            out.append(None)
        elif rng.random() < 0.5:
            out.append("step")
        else:
            out.append(("perm", tuple(int(i) for i in rng.permutation(a.ndim))))
    return out


def judge(kind, got, ref32, ref64, bound, K, coord):
    """Worst ratio of error to allowance (> 1 fails), and a note."""
    if got.shape != ref32.shape:
        return math.inf, f"shape {got.shape} vs {ref32.shape}"
    if got.size == 0:
        return 0.0, ""
    g = got.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(ref32)
    if (nan_g != nan_r).any():
        return math.inf, f"NaN pattern differs at {int((nan_g != nan_r).sum())} of {g.size}"
    g, r32, r64 = g[~nan_r], ref32[~nan_r].astype(np.float64), ref64[~nan_r]
    if kind == "exact":
        if r32.dtype.kind in "iu" or ref32.dtype.kind in "iu":
            bad = (g != r32).sum()
            return (math.inf if bad else 0.0), f"{bad} of {g.size} differ"
        err = np.abs(g - r32)
        ratio = float(err.max() / (EPS * max(np.abs(r32).max(), 1e-30)) / 64)
        if err.max() == 0:
            return 0.0, ""
        return ratio, f"max err {err.max():.3g}, max |ref| {np.abs(r32).max():.3g}"
    err = np.abs(g - r64)
    if kind == "lin":
        b = bound[~nan_r]
        # the sum's rounding, plus a few eps of the largest bound (weights computed in f32)
        allow = EPS * ((b + 1e-30) * (16 + 4 * math.sqrt(K)) + coord * b.max())
        ratio = float((err / allow).max())
        i = int(np.argmax(err / allow))
        return (
            ratio,
            f"max err {err[i]:.3g} at bound {b[i]:.3g} (max |ref| {np.abs(r64).max():.3g})",
        )
    scale = max(np.abs(r64).max(), 1e-2)  # (inputs are ~N(0, 1): 1e-6 absolute at least)
    ratio = float(err.max() / (1e-4 * scale))
    return ratio, f"max err {err.max():.3g}, max |ref| {scale:.3g}"


def check(case, rng):
    """Returns None (agreed) or a string describing the mismatch."""
    try:
        t_outs, _, _ = run(torch, case, np.float32)
    except Exception as exc:  # noqa: BLE001 - torch's refusal is what pyrite must match
        try:
            p_outs, _, _ = run(pr, case, np.float32)
            [np.asarray(o) for o in p_outs]
        except Exception:  # noqa: BLE001
            return None
        if any(m in str(exc) for m in EXTENSIONS):
            return None
        if "Output size is too small" in str(exc) and any(o.numel() == 0 for o in p_outs):
            return None  # an output size of exactly 0: torch's mkldnn path returns it, its
            # slow path refuses (tests/test_fuzz_nn_regressions.py pins pyrite's empty answer)
        return f"torch raises ({type(exc).__name__}: {str(exc)[:120]}), pyrite accepts"
    if case.torch_bug and case.torch_bug(t_outs):
        return None
    cots = [_rand(rng, o.shape) if o.dtype.is_floating_point else None for o in t_outs]
    if any(o.numel() == 0 for o in t_outs):
        cots = [None] * len(cots)  # torch's backward of some empty outputs raises
    t32_o, t32_g, _ = run(torch, case, np.float32, cots)
    try:
        t64_o, t64_g, _ = run(torch, case, np.float64, cots)
    except RuntimeError as exc:
        if "Output size is too small" in str(exc):
            return None  # torch f32's mkldnn path returns an empty output, f64's refuses
        raise
    tb_o, tb_g, _ = run(torch, case, np.float64, cots, absin=True)
    layouts = _layouts(case, rng) if LAYOUTS else None
    try:
        p_o, p_g, _ = run(pr, case, np.float32, cots, layouts=layouts)
    except Exception as exc:  # noqa: BLE001
        return f"pyrite raises {type(exc).__name__}: {str(exc)[:300]}"
    worst, notes = 0.0, []
    if len(p_o) != len(t32_o):
        return f"{len(p_o)} outputs vs {len(t32_o)}"
    for i, (g, r32, r64, b) in enumerate(zip(p_o, t32_o, t64_o, tb_o)):
        kind = case.kind if r32.dtype.kind == "f" else "exact"
        ratio, note = judge(kind, g, r32, r64.astype(np.float64), np.abs(b), case.K, case.coord)
        if ratio > 1:
            notes.append(f"out[{i}] {note} (ratio {ratio:.3g})")
        worst = max(worst, ratio)
    gk = case.gkinds or [case.kind] * len(case.inputs)
    gk = [k for k, g in zip(gk, case.grad) if g]
    gk += [case.kind] * (len(t32_g) - len(gk))
    if len(p_g) != len(t32_g):
        return f"gradients: {len(p_g)} vs {len(t32_g)}"
    for i, (g, r32, r64, b, kind) in enumerate(zip(p_g, t32_g, t64_g, tb_g, gk)):
        if r32 is None and g is None:
            continue
        if (r32 is None) != (g is None):
            rz = r32 if r32 is not None else g
            if np.abs(rz).max(initial=0) == 0:
                continue
            notes.append(f"grad[{i}] None in one of them")
            continue
        kk = "smooth" if kind == "exact" else kind  # routed sums: order may differ
        ratio, note = judge(kk, g, r32, r64, np.abs(b), max(case.K, 64), case.coord)
        if ratio > 1:
            notes.append(f"grad[{i}] {note} (ratio {ratio:.3g})")
    if notes and layouts:
        notes.append(f"layouts {layouts}")
    return "; ".join(notes) or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="cases per family")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", default=",".join(FAMILIES))
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--budget", type=int, default=0,
                    help="half the cases plan pyrite's kernels as if a loop could run only this "
                    "many times (the split paths; tests/conftest.py loop_budget)")  # fmt: skip
    ap.add_argument("--contiguous", action="store_true", help="no non-contiguous inputs")
    a = ap.parse_args(argv)
    global LAYOUTS
    LAYOUTS = not a.contiguous
    from pyrite import backend

    dev = backend.current()
    real_budget = dev.loop_budget
    total, bad = {}, []
    for fam in a.family.split(","):
        t0 = time.time()
        for i in range(a.n):
            seed = a.seed + i
            rng = np.random.default_rng([seed, list(FAMILIES).index(fam)])
            case = FAMILIES[fam](rng)
            budget = a.budget if a.budget and rng.random() < 0.5 else None
            dev._loop_budget = budget or real_budget
            if budget:
                case.params["loop_budget"] = budget
            try:
                msg = check(case, rng)
            except Exception:  # noqa: BLE001 - a crash of the harness is a finding too
                msg = "harness: " + traceback.format_exc(limit=3)[-400:]
            total[case.op] = total.get(case.op, 0) + 1
            if msg:
                bad.append((fam, seed, case.op, case.params, msg))
                print(f"MISMATCH {fam} seed={seed} {case.op} {case.params}\n    {msg}", flush=True)
            elif a.verbose:
                print(f"ok {fam} seed={seed} {case.op} {case.params}", flush=True)
        print(f"# {fam}: {a.n} cases in {time.time() - t0:.0f} s", flush=True)
    print("# cases per op:", dict(sorted(total.items())))
    print(f"# {len(bad)} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
