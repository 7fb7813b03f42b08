"""Randomized differential fuzz of pyrite's indexing, scatter, sorting and set ops against torch
2.13 CPU (session 41): advanced indexing get/set, index_put_, scatter / scatter_add /
scatter_reduce, index_add / index_copy / index_fill / index_reduce, gather, take /
take_along_dim / put_, masked_scatter, nonzero, where, sort / argsort / msort / topk /
kthvalue / median / nanmedian / mode, unique / unique_consecutive, searchsorted / bucketize,
cummax / cummin, flip / roll, diag / diagonal / diag_embed, tril / triu.

Each case is one closure `build(M, T)` run once with M=torch and once with M=pyrite; T turns a
numpy array into a tensor of the library. Results are compared for shape, dtype (torch's int64
is pyrite's int32, float64 its float32) and values: exactly where the op only moves values,
within the rounding of the arithmetic elsewhere. Index results whose tie-breaking torch leaves
unspecified are checked to select the values torch returns. A call torch refuses must be
refused by pyrite, and the other way round. Gradients of the differentiable cases are compared
through sum(out * w) with random weights w.

    .venv/bin/python scripts/fuzz_index.py --n 2000 --seed 0 [--family sort] [--verbose]
"""

from __future__ import annotations

import argparse
import collections
import sys
import traceback

import numpy as np
import torch

import pyrite as pr

DT = ("float32", "int32", "int64", "bool", "float16", "bfloat16")
FLOATS = ("float32", "float16", "bfloat16")
TH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
      "int32": torch.int32, "int64": torch.int64, "bool": torch.bool}  # fmt: skip
PR = {"float32": pr.float32, "float16": pr.float16, "bfloat16": pr.bfloat16,
      "int32": pr.int32, "int64": pr.int64, "bool": pr.bool}  # fmt: skip
# the pyrite dtype name expected for a torch result dtype
EXPECT = {"torch.int64": "int32", "torch.float64": "float32"}
EPS = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}
SIZES = (0, 1, 1, 2, 3, 3, 5, 7)
# refusals of torch that pyrite documents taking (README, "Differences from PyTorch")
ACCEPTED = ("Index put requires the source and destination dtypes match",  # x[idx] = v casts
            "step must be greater than zero",
            "view size is not compatible")  # take_along_dim(dim=None) views where pyrite copies  # fmt: skip


class Case:
    """One fuzz case: `build(M, T)` returns a tensor, a tuple/list of them, or a python value.
    mode: "exact" | "tol" (rounding of `dtype`, `terms` terms) | "select" (the second output is
    indices whose tie choice is unspecified: check x.gather(dim, idx) equals torch's values).
    grad: names of the inputs (keys of `arrays`) to differentiate, None for none."""

    def __init__(self, family, desc, arrays, build, mode="exact", grad=None, dtype=None,
                 terms=1, select=None, unordered=False):  # fmt: skip
        self.family, self.desc, self.arrays, self.build = family, desc, arrays, build
        self.mode, self.grad, self.dtype, self.terms = mode, grad or (), dtype, terms
        self.select = select  # (input key, dim) for "select" mode
        self.unordered = unordered


# ---- inputs ------------------------------------------------------------------------------------
def pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def shape_of(rng, lo=0, hi=4, sizes=SIZES, max_numel=200):
    while True:
        s = tuple(int(pick(rng, sizes)) for _ in range(int(rng.integers(lo, hi + 1))))
        if int(np.prod(s)) <= max_numel:
            return s


def values(rng, shape, dt, ties=False, special=False):
    """(array, dtype name): float32 data in `dt`'s range (each side converts it)."""
    if dt == "bool":
        return np.asarray(rng.random(shape) < 0.5), dt
    if dt in ("int32", "int64"):
        hi = 4 if ties else 60
        return np.asarray(rng.integers(-hi, hi + 1, shape), np.int64), dt
    if ties:
        a = rng.integers(-3, 4, shape).astype(np.float32)
    else:
        a = (rng.standard_normal(shape) * 4).astype(np.float32)
    if special and a.size:
        m = rng.random(shape) < 0.2
        sp = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], np.float32)
        a = np.where(m, sp[rng.integers(0, len(sp), shape)], a).astype(np.float32)
    return np.asarray(a), dt


def conv(M, a, dt, rg=False):
    if M is torch:
        t = torch.tensor(a)
        t = t.to(TH[dt])
        if rg:
            t.requires_grad_(True)
        return t
    t = pr.tensor(a, dtype=PR[dt])
    if rg:
        t.requires_grad_(True)
    return t


def idx_arr(rng, shape, size, neg=True):
    lo = -size if neg else 0
    if size == 0:
        return np.zeros(shape, np.int64)
    return np.asarray(rng.integers(lo, size, shape), np.int64)


# ---- comparison --------------------------------------------------------------------------------
class Mismatch(Exception):
    pass


def as_np(t):
    if t.dtype in (torch.bfloat16,) or str(t.dtype) == "pyrite.bfloat16":
        return t.detach().float().numpy()
    return t.detach().numpy()


def dtname(t):
    return str(t.dtype).split(".")[-1]


def is_tensor(v):
    return isinstance(v, (torch.Tensor, pr.Tensor))


def flatten(v):
    if isinstance(v, (tuple, list)):
        out = []
        for e in v:
            out.extend(flatten(e))
        return out
    return [v]


def close(a, b, case, what):
    if a.shape != b.shape:
        raise Mismatch(f"{what}: shape torch {a.shape} pyrite {b.shape}")
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        nan_a, nan_b = np.isnan(a64), np.isnan(b64)
        if (nan_a != nan_b).any():
            raise Mismatch(f"{what}: NaN pattern differs\n torch {a}\n pyrite {b}")
        a64, b64 = np.where(nan_a, 0, a64), np.where(nan_b, 0, b64)
        if case.mode == "tol":
            eps = EPS.get(case.dtype, 2.0**-23)
            # rounding of each step, relative to the result and to the terms' magnitude
            tol = 2 * case.terms * eps * (np.abs(a64) + case.mag) + 1e-30
            inf_ok = np.isinf(a64) | np.isinf(b64)
            bad = (np.abs(a64 - b64) > tol) & ~(inf_ok & (a64 == b64))
            bad |= inf_ok & (a64 != b64)
        else:
            bad = a64 != b64
            if case.mode == "exact_sign":
                bad |= np.signbit(a64) != np.signbit(b64)
        if bad.any():
            raise Mismatch(f"{what}: values differ at {np.argwhere(bad)[:4].tolist()}\n"
                           f" torch {a}\n pyrite {b}")  # fmt: skip
    elif not np.array_equal(a, b):
        raise Mismatch(f"{what}: values differ\n torch {a}\n pyrite {b}")


def compare(case, tv, pv, what="out"):
    tl, pl = flatten(tv), flatten(pv)
    if len(tl) != len(pl):
        raise Mismatch(f"{what}: {len(tl)} outputs in torch, {len(pl)} in pyrite")
    for k, (a, b) in enumerate(zip(tl, pl)):
        w = f"{what}[{k}]"
        if is_tensor(a) != is_tensor(b):
            raise Mismatch(f"{w}: torch {type(a)} pyrite {type(b)}")
        if not is_tensor(a):
            if isinstance(a, float) and np.isnan(a) and np.isnan(b):
                continue
            if a != b:
                raise Mismatch(f"{w}: torch {a!r} pyrite {b!r}")
            continue
        want = EXPECT.get(str(a.dtype), dtname(a))
        if dtname(b) != want:
            raise Mismatch(f"{w}: dtype torch {a.dtype} pyrite {b.dtype}")
        if tuple(a.shape) != tuple(b.shape):
            raise Mismatch(f"{w}: shape torch {tuple(a.shape)} pyrite {tuple(b.shape)}")
        an, bn = as_np(a), as_np(b)
        if case.mode == "select" and k == 1 and what == "out":
            key, dim = case.select
            a_, d_ = case.arrays[key]
            src = as_np(torch.tensor(a_).to(TH[d_])).astype(np.float64)
            got = as_np(pl[0]).astype(np.float64)
            ix = bn.astype(np.int64)
            if src.ndim == 0:
                src = src.reshape(1)
            if ix.ndim < src.ndim:
                ix, got = np.expand_dims(ix, dim), np.expand_dims(got, dim)
            vals = np.take_along_axis(src, ix, axis=dim)
            same = (vals == got) | (np.isnan(vals) & np.isnan(got))
            if not same.all():
                raise Mismatch(f"{w}: indices do not select the values\n idx {bn}\n"
                               f" selected {vals}\n values {got}")  # fmt: skip
            continue
        if case.unordered:
            an, bn = np.sort(an.reshape(-1)), np.sort(bn.reshape(-1))
        close(an, bn, case, w)


def laid_out(M, a, d, g, layout):
    """(leaf, view): the tensor of `a` as a transposed or stepped view of a leaf, or the leaf."""
    a = np.asarray(a)
    if layout == "T" and a.ndim >= 2:
        leaf = conv(M, np.ascontiguousarray(np.transpose(a)), d, g)
        return leaf, leaf.permute(*reversed(range(a.ndim)))
    if layout == "step" and a.ndim >= 1:
        wide = np.repeat(a, 2, axis=-1)
        leaf = conv(M, wide, d, g)
        return leaf, leaf[..., ::2]
    leaf = conv(M, a, d, g)
    return leaf, leaf


def run_side(case, M):
    leaves = {}

    def T(key, dt=None, rg=None):
        a, d = case.arrays[key]
        d = dt or d
        g = key in case.grad if rg is None else rg
        leaf, t = laid_out(M, a, d, g, case.layout.get(key))
        if g:
            leaves[key] = leaf
        return t

    out = case.build(M, T)
    return out, leaves


def grads(case, out, leaves, M, weights):
    if not leaves:
        return None
    outs = [o for o in flatten(out) if is_tensor(o) and o.dtype.is_floating_point]
    if not outs:
        return None
    o = outs[0]
    w = conv(M, weights[: o.numel()].reshape(tuple(o.shape)), "float32")
    loss = (o.float() * w).sum()
    loss.backward()
    return [leaves[k].grad for k in case.grad]


def check(case, rng):
    """None if pyrite agrees with torch, else a message."""
    case.layout = {k: pick(rng, (None, None, "T", "step")) for k in case.arrays}
    finite = [np.abs(a[np.isfinite(a)]) for a, d in case.arrays.values() if d in FLOATS]
    case.mag = max([float(f.max()) for f in finite if f.size] + [0.0])
    weights = rng.standard_normal(4096).astype(np.float32)
    try:
        tout, tleaves = run_side(case, torch)
        terr = None
    except Exception as e:  # noqa: BLE001
        terr = e
    try:
        pout, pleaves = run_side(case, pr)
        perr = None
    except Exception as e:  # noqa: BLE001
        perr = e
        ptb = traceback.format_exc()
    if terr is not None and perr is None:
        if any(k in str(terr) for k in ACCEPTED):
            return None
        return f"pyrite accepted what torch refused: {type(terr).__name__}: {terr}"
    if terr is None and perr is not None:
        return f"pyrite refused: {type(perr).__name__}: {perr}\n{ptb[-1500:]}"
    if terr is not None:
        tcls = {IndexError, RuntimeError, ValueError, TypeError} & set(type(terr).__mro__)
        if not any(isinstance(perr, c) for c in tcls):
            return f"error class: torch {type(terr).__name__} pyrite {type(perr).__mro__}"
        return None
    try:
        compare(case, tout, pout)
    except Mismatch as e:
        return str(e)
    except Exception:  # noqa: BLE001
        return "comparison crashed:\n" + traceback.format_exc()[-1500:]
    if case.grad:
        try:
            tg = grads(case, tout, tleaves, torch, weights)
            terr = None
        except Exception as e:  # noqa: BLE001
            terr = e
        if terr is None and tg is not None:
            try:
                pg = grads(case, pout, pleaves, pr, weights)
            except Exception:  # noqa: BLE001
                return "pyrite backward failed:\n" + traceback.format_exc()[-1500:]
            saved = case.mode
            case.mode = "tol"
            case.dtype = case.dtype or "float32"
            case.terms = max(case.terms, 8)
            try:
                for k, (a, b) in enumerate(zip(tg, pg)):
                    if (a is None) != (b is None):
                        return f"grad[{k}]: torch {a} pyrite {b}"
                    if a is not None:
                        compare(case, a, b, f"grad[{case.grad[k]}]")
            except Mismatch as e:
                return str(e)
            finally:
                case.mode = saved
    return None


# ---- index expressions -------------------------------------------------------------------------
def rand_index(rng, shape, for_set=False):
    """A random index tuple for x of `shape`, as ('kind', data) items; the same items are turned
    into each library's index by `realize`."""
    items = []
    d = 0
    nd = len(shape)
    used_ell = False
    bshape = shape_of(rng, 0, 2, sizes=(1, 2, 3), max_numel=6)
    while d < nd and len(items) < 5:
        r = rng.random()
        size = shape[d]
        if r < 0.15 and size > 0:
            items.append(("int", int(rng.integers(-size, size))))
            d += 1
        elif r < 0.35:
            lo = int(rng.integers(-size - 1, size + 2)) if rng.random() < 0.6 else None
            hi = int(rng.integers(-size - 1, size + 2)) if rng.random() < 0.6 else None
            st = pick(rng, (None, 1, 2, 3))  # torch refuses negative steps; pyrite takes them
            items.append(("slice", (lo, hi, st)))
            d += 1
        elif r < 0.42:
            items.append(("none", None))
        elif r < 0.47 and not used_ell:
            used_ell = True
            items.append(("ellipsis", None))
            d = nd - int(rng.integers(0, nd - d + 1))
        elif r < 0.72:
            s = tuple(pick(rng, (b, 1)) for b in bshape)[int(rng.integers(0, len(bshape) + 1)) :]
            kind = "list" if (rng.random() < 0.25 and len(s) == 1) else "itensor"
            items.append((kind, idx_arr(rng, s, size).tolist() if kind == "list" else
                          idx_arr(rng, s, size)))  # fmt: skip
            d += 1
        elif r < 0.82:
            k = int(rng.integers(1, min(2, nd - d) + 1))
            m = rng.random(shape[d : d + k]) < 0.5
            items.append(("mask", np.asarray(m)))
            d += k
        elif r < 0.86 and size > 0:
            items.append(("int0d", int(rng.integers(-size, size))))
            d += 1
        elif r < 0.89:
            items.append(("boolscalar", bool(rng.random() < 0.7)))
        else:
            items.append(("slice", (None, None, None)))
            d += 1
    if rng.random() < 0.05 and nd > 0:
        items.append(("int", shape[min(d, nd - 1)] + int(rng.integers(0, 3))))  # out of range
    return items


def realize(M, items):
    out = []
    for kind, v in items:
        if kind == "int":
            out.append(v)
        elif kind == "slice":
            out.append(slice(*v))
        elif kind == "none":
            out.append(None)
        elif kind == "ellipsis":
            out.append(Ellipsis)
        elif kind == "list":
            out.append(list(v))
        elif kind == "itensor":
            out.append(conv(M, v, "int64"))
        elif kind == "mask":
            out.append(conv(M, v, "bool"))
        elif kind == "int0d":
            out.append(conv(M, np.array(v, np.int64), "int64"))
        elif kind == "boolscalar":
            out.append(v)
    return tuple(out)


def show(items):
    parts = []
    for kind, v in items:
        if kind == "slice":
            parts.append(":".join("" if e is None else str(e) for e in v))
        elif kind in ("itensor", "mask"):
            parts.append(f"{kind}{np.asarray(v).tolist()}")
        else:
            parts.append(f"{kind}({v})" if v is not None else kind)
    return "[" + ", ".join(parts) + "]"


# ---- families ----------------------------------------------------------------------------------
def fam_getitem(rng):
    dt = pick(rng, DT)
    shape = shape_of(rng, 0, 4)
    a = values(rng, shape, dt)
    items = rand_index(rng, shape)
    grad = ("x",) if dt == "float32" else None

    def build(M, T):
        return T("x")[realize(M, items)]

    return Case("getitem", f"x{shape} {dt} {show(items)}", {"x": a}, build, grad=grad)


def _targets(shape, items):
    """Flat positions x[items] addresses, by torch (to see duplicates), or None if it raises."""
    try:
        pos = torch.arange(int(np.prod(shape))).reshape(shape)[realize(torch, items)]
    except Exception:  # noqa: BLE001
        return None
    return pos


def fam_setitem(rng):
    dt = pick(rng, DT)
    shape = shape_of(rng, 1, 4)
    a = values(rng, shape, dt)
    items = rand_index(rng, shape, for_set=True)
    pos = _targets(shape, items)
    dup = pos is not None and pos.numel() != pos.unique().numel()
    arrays = {"x": a}
    vkind = "scalar"
    if pos is not None and not dup and rng.random() < 0.7:
        rs = tuple(pos.shape)
        k = int(rng.integers(0, len(rs) + 1))
        vs = tuple(pick(rng, (s, 1)) if rng.random() < 0.3 else s for s in rs[k:])
        vdt = dt if rng.random() < 0.8 else pick(rng, DT)
        if {dt, vdt} == {"int32", "int64"}:  # one dtype in pyrite
            vdt = dt
        arrays["v"] = values(rng, vs, vdt)
        vkind = f"v{vs} {vdt}"
    scalar = float(rng.integers(-5, 6)) if dt != "bool" else True
    grad = ("x", "v") if dt == "float32" and "v" in arrays and arrays["v"][1] == "float32" \
        else None  # fmt: skip

    def build(M, T):
        x = T("x")
        if grad:
            x = x * 1
        else:
            x = x.clone()
        v = T("v") if "v" in arrays else scalar
        x[realize(M, items)] = v
        return x

    return Case("setitem", f"x{shape} {dt} {show(items)} = {vkind}", arrays, build, grad=grad)


def fam_index_put(rng):
    dt = pick(rng, DT)
    shape = shape_of(rng, 1, 3)
    a = values(rng, shape, dt)
    k = int(rng.integers(1, len(shape) + 1))
    bshape = shape_of(rng, 0, 2, sizes=(1, 2, 3, 4))
    arrays = {"x": a}
    for j in range(k):
        s = tuple(pick(rng, (b, 1)) for b in bshape)
        arrays[f"i{j}"] = (idx_arr(rng, s, shape[j]), "int64")
    acc = bool(rng.random() < 0.6)
    rshape = bshape + shape[k:]
    vshape = rshape[int(rng.integers(0, len(rshape) + 1)) :]
    arrays["v"] = values(rng, vshape, dt)
    pos = torch.arange(int(np.prod(shape))).reshape(shape)
    try:
        p = pos[tuple(torch.tensor(arrays[f"i{j}"][0]) for j in range(k))]
        dup = p.numel() != p.unique().numel()
    except Exception:  # noqa: BLE001
        dup = False
    if dup and not acc:
        arrays["v"] = values(rng, (), dt)
    grad = ("x", "v") if dt == "float32" else None

    def build(M, T):
        x = T("x")
        x = x * 1 if grad else x.clone()
        ind = tuple(T(f"i{j}") for j in range(k))
        return x.index_put_(ind, T("v"), accumulate=acc)

    mode = "tol" if acc and dt in FLOATS else "exact"
    return Case("index_put", f"x{shape} {dt} k={k} b={bshape} v={vshape} acc={acc}", arrays,
                build, mode=mode, grad=grad, dtype=dt, terms=8)  # fmt: skip


def _scatter_index(rng, shape, dim, unique):
    """index of shape <= shape (per dim), values in [0, shape[dim])."""
    ishape = tuple(int(rng.integers(0, s + 1)) if rng.random() < 0.5 else s for s in shape)
    if unique and shape[dim] > 0:
        ishape = list(ishape)
        ishape[dim] = min(ishape[dim], shape[dim])
        ishape = tuple(ishape)
        idx = np.zeros(ishape, np.int64)
        it = np.moveaxis(idx, dim, -1)
        for pos in np.ndindex(it.shape[:-1]):
            it[pos] = rng.permutation(shape[dim])[: it.shape[-1]]
        return idx
    return idx_arr(rng, ishape, shape[dim], neg=False)


def fam_scatter(rng):
    op = pick(rng, ("scatter", "scatter_value", "scatter_reduce_arg", "scatter_add",
                    "scatter_reduce"))  # fmt: skip
    dt = pick(rng, DT if op in ("scatter", "scatter_value") else
              ("float32", "float32", "int32", "int64", "float16", "bfloat16"))  # fmt: skip
    shape = shape_of(rng, 0, 3)
    nd = max(len(shape), 1)
    dim = int(rng.integers(-nd, nd))
    dd = dim % nd
    if not shape:
        shape_eff = (1,)
    else:
        shape_eff = shape
    x = values(rng, shape, dt, ties=rng.random() < 0.3)
    idx = _scatter_index(rng, shape_eff, dd, unique=op in ("scatter", "scatter_value"))
    if not shape and idx.size == 1 and rng.random() < 0.5:
        idx = idx.reshape(())
    if rng.random() < 0.04 and idx.size:
        idx.flat[0] = shape_eff[dd] + int(rng.integers(0, 2))  # out of range
    sshape = tuple(s + int(rng.integers(0, 2)) for s in idx.shape)
    src = values(rng, sshape, dt, ties=rng.random() < 0.3)
    reduce = pick(rng, ("sum", "prod", "mean", "amax", "amin"))
    inc = bool(rng.random() < 0.5)
    rarg = pick(rng, ("add", "multiply"))
    arrays = {"x": x, "i": (idx, "int64"), "s": src}
    # (a src larger than index: torch's backward broadcasts or refuses, so grads only for equal)
    diff = dt == "float32" and op != "scatter_reduce_arg" and sshape == idx.shape
    if op == "scatter_reduce" and reduce in ("amax", "amin", "prod"):
        diff = diff and len(np.unique(src[0])) == src[0].size and not np.isin(x[0], src[0]).any()
    grad = ("x", "s") if diff else None
    val = float(rng.integers(-3, 4))

    def build(M, T):
        xx = T("x")
        xx = xx * 1 if grad else xx.clone()
        if op == "scatter":
            return xx.scatter_(dim, T("i"), T("s"))
        if op == "scatter_value":
            return xx.scatter(dim, T("i"), val)
        if op == "scatter_reduce_arg":
            return xx.scatter_(dim, T("i"), T("s"), reduce=rarg)
        if op == "scatter_add":
            return xx.scatter_add(dim, T("i"), T("s"))
        return xx.scatter_reduce(dim, T("i"), T("s"), reduce, include_self=inc)

    mode = "tol" if dt in FLOATS and op not in ("scatter", "scatter_value") else "exact"
    desc = f"{op} x{shape} {dt} dim={dim} i{idx.shape} s{sshape} red={reduce}/{rarg} inc={inc}"
    return Case("scatter", desc, arrays, build, mode=mode, grad=grad, dtype=dt,
                terms=max(8, max(shape_eff)))  # fmt: skip


def fam_index_ops(rng):
    op = pick(rng, ("index_add", "index_copy", "index_fill", "index_reduce", "index_select"))
    dt = pick(rng, DT if op in ("index_copy", "index_fill", "index_select") else
              ("float32", "float32", "int32", "int64", "float16", "bfloat16"))  # fmt: skip
    shape = shape_of(rng, 0, 3)
    nd = max(len(shape), 1)
    dim = int(rng.integers(-nd, nd))
    dd = dim % nd
    size = shape[dd] if shape else 1
    x = values(rng, shape, dt, ties=rng.random() < 0.3)
    n = int(rng.integers(0, 6))
    if op == "index_copy":
        n = min(n, size)
        idx = np.asarray(rng.permutation(size)[:n], np.int64)
    else:
        idx = idx_arr(rng, (n,), size, neg=False)
    if rng.random() < 0.15 and idx.size == 1:
        idx = idx.reshape(())
    if rng.random() < 0.04:
        idx = np.append(idx.reshape(-1), size + int(rng.integers(0, 2)))
    sshape = list(shape if shape else ())
    if shape:
        sshape[dd] = idx.size
    src = values(rng, tuple(sshape), dt, ties=rng.random() < 0.3)
    alpha = pick(rng, (1, 2, -1)) if dt != "bool" else 1
    reduce = pick(rng, ("prod", "mean", "amax", "amin"))
    inc = bool(rng.random() < 0.5)
    val = float(rng.integers(-3, 4)) if dt != "bool" else True
    arrays = {"x": x, "i": (idx, "int64"), "s": src}
    grad = ("x", "s") if dt == "float32" and op in ("index_add", "index_copy") else None
    if dt == "float32" and op in ("index_fill", "index_select"):
        grad = ("x",)

    def build(M, T):
        xx = T("x")
        xx = xx * 1 if grad else xx.clone()
        if op == "index_add":
            return xx.index_add(dim, T("i"), T("s"), alpha=alpha)
        if op == "index_copy":
            return xx.index_copy(dim, T("i"), T("s"))
        if op == "index_fill":
            return xx.index_fill(dim, T("i"), val)
        if op == "index_select":
            return xx.index_select(dim, T("i"))
        return xx.index_reduce(dim, T("i"), T("s"), reduce, include_self=inc)

    mode = "tol" if dt in FLOATS and op in ("index_add", "index_reduce") else "exact"
    desc = f"{op} x{shape} {dt} dim={dim} i={idx.tolist()} alpha={alpha} red={reduce} inc={inc}"
    return Case("index_ops", desc, arrays, build, mode=mode, grad=grad, dtype=dt, terms=8)


def fam_gather_take(rng):
    op = pick(rng, ("gather", "take", "take_along_dim", "take_along_none", "put_", "put_acc"))
    dt = pick(rng, DT)
    shape = shape_of(rng, 0, 3)
    nd = max(len(shape), 1)
    dim = int(rng.integers(-nd, nd))
    dd = dim % nd
    se = shape if shape else (1,)
    x = values(rng, shape, dt)
    arrays = {"x": x}
    numel = int(np.prod(shape))
    if op == "gather":
        ishape = tuple(int(rng.integers(0, s + 2)) if k != dd else int(rng.integers(0, 5))
                       for k, s in enumerate(se))  # fmt: skip
        ishape = tuple(min(s, se[k]) if k != dd and rng.random() < 0.9 else s
                       for k, s in enumerate(ishape))  # fmt: skip
        if not shape and rng.random() < 0.5:
            ishape = ()
        idx = idx_arr(rng, ishape, se[dd], neg=rng.random() < 0.1)
    elif op == "take_along_dim":
        ishape = tuple(pick(rng, (s, 1)) if k != dd else int(rng.integers(0, 5))
                       for k, s in enumerate(se))  # fmt: skip
        if not shape:
            ishape = ()
        idx = idx_arr(rng, ishape, se[dd])
    else:
        ishape = shape_of(rng, 0, 2, sizes=(0, 1, 2, 3, 5))
        idx = idx_arr(rng, ishape, numel if op != "put_" else numel)
        if op == "put_" and idx.size:  # unique positions: duplicates are undefined without acc
            flat = np.unique(idx % max(numel, 1))
            idx = flat[: idx.size].astype(np.int64)
            ishape = idx.shape
    if rng.random() < 0.04 and idx.size and op != "take_along_dim":
        # (take_along_dim: torch wraps any index modulo the size, pyrite refuses: README)
        idx.flat[0] = max(numel, 1) + 3
    arrays["i"] = (idx, "int64")
    arrays["s"] = values(rng, idx.shape, dt)
    grad = ("x",) if dt == "float32" else None
    if dt == "float32" and op.startswith("put"):
        grad = ("x", "s")

    def build(M, T):
        xx = T("x")
        if op == "gather":
            return xx.gather(dim, T("i"))
        if op == "take":
            return xx.take(T("i"))
        if op == "take_along_dim":
            return M.take_along_dim(xx, T("i"), dim=dim)
        if op == "take_along_none":
            return M.take_along_dim(xx, T("i"))
        xx = xx * 1 if grad else xx.clone()
        return xx.put_(T("i"), T("s"), accumulate=op == "put_acc")

    mode = "tol" if dt in FLOATS and op == "put_acc" else "exact"
    desc = f"{op} x{shape} {dt} dim={dim} i={idx.tolist()}"
    return Case("gather_take", desc, arrays, build, mode=mode, grad=grad, dtype=dt, terms=8)


def fam_masked(rng):
    op = pick(rng, ("masked_scatter", "nonzero", "nonzero_tuple", "where3", "where1",
                    "masked_select", "argwhere"))  # fmt: skip
    dt = pick(rng, DT)
    shape = shape_of(rng, 0, 4)
    x = values(rng, shape, dt)
    arrays = {"x": x}
    mshape = shape[int(rng.integers(0, len(shape) + 1)) :]
    mshape = tuple(pick(rng, (s, 1)) if rng.random() < 0.3 else s for s in mshape)
    arrays["m"] = (np.asarray(rng.random(mshape) < 0.5), "bool")
    n = int(np.prod(np.broadcast_shapes(shape, mshape)))
    arrays["s"] = values(
        rng, (max(0, n + int(rng.integers(-1 if rng.random() < 0.05 else 0, 3))),), dt
    )
    yshape = shape[int(rng.integers(0, len(shape) + 1)) :]
    ydt = dt if rng.random() < 0.7 else pick(rng, DT)
    arrays["y"] = values(rng, yshape, ydt)
    scal = rng.random() < 0.2
    grad = ("x",) if dt == "float32" and op in ("masked_scatter", "where3", "masked_select") \
        else None  # fmt: skip
    if op == "masked_scatter" and grad and arrays["s"][1] == "float32":
        grad = ("x", "s")

    def build(M, T):
        xx = T("x")
        if op == "masked_scatter":
            return xx.masked_scatter(T("m"), T("s"))
        if op == "nonzero":
            return xx.nonzero()
        if op == "nonzero_tuple":
            return xx.nonzero(as_tuple=True)
        if op == "argwhere":
            return M.argwhere(xx)
        if op == "masked_select":
            return xx.masked_select(T("m"))
        if op == "where1":
            return M.where(xx)
        return M.where(T("m"), xx, 2.5 if scal else T("y"))

    desc = f"{op} x{shape} {dt} m{mshape} y{yshape} {ydt} scal={scal} s{arrays['s'][0].shape}"
    return Case("masked", desc, arrays, build, grad=grad)


def fam_sort(rng):
    op = pick(
        rng,
        (
            "sort",
            "sort_stable",
            "argsort",
            "msort",
            "topk",
            "kthvalue",
            "median",
            "median_all",
            "nanmedian",
            "nanmedian_all",
            "mode",
            "cummax",
            "cummin",
        ),
    )
    dt = pick(rng, ("float32", "float32", "int32", "int64", "bool", "float16", "bfloat16"))
    if dt == "bool" and "median" in op:  # torch: not implemented for Bool (but empty input)
        dt = "int32"
    shape = shape_of(rng, 0, 3, sizes=(0, 1, 2, 3, 5, 7, 13, 17, 20))
    if op.endswith("median_all") and 0 in shape and dt.startswith("int"):
        dt = "float32"  # torch: the int64 minimum (a garbage value), pyrite int32's
    ties = rng.random() < 0.6
    special = rng.random() < 0.4 and op != "mode"
    # (mode: torch's sort-and-count with NaN is undefined behaviour; README documents pyrite's)
    x = values(rng, shape, dt, ties=ties, special=special)
    ties = ties or special  # (equal infinities, NaNs, +-0: the gradient's route is torch's choice)
    nd = max(len(shape), 1)
    dim = int(rng.integers(-nd, nd))
    se = shape if shape else (1,)
    size = se[dim % nd]
    desc_ = bool(rng.random() < 0.5)
    stable = op == "sort_stable" or (op == "argsort" and rng.random() < 0.5)
    k = int(rng.integers(0, size + 1)) if op == "topk" else int(rng.integers(1, size + 1)) \
        if size else 1  # fmt: skip
    if rng.random() < 0.03:
        k = size + 1
    largest = bool(rng.random() < 0.5)
    srt = bool(rng.random() < 0.7)
    keep = bool(rng.random() < 0.3)
    grad = ("x",) if dt == "float32" and op in ("sort", "sort_stable", "msort", "topk",
                                                 "kthvalue", "cummax", "cummin") \
        and not ties else None  # fmt: skip
    # (msort is unstable, and the median's zero is either of equal ones: no sign compared)
    mode, select, unordered = ("exact_sign" if op in ("sort_stable", "argsort", "cummax", "cummin")
                               else "exact"), None, False  # fmt: skip
    dimc = dim % nd if shape else 0
    if op in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode") or (
        op == "argsort" and not stable
    ):
        mode, select = "select", ("x", dimc)
    if op == "topk" and not srt:
        unordered = True
    if op in ("kthvalue", "median", "nanmedian", "mode", "topk") and not keep:
        pass

    def build(M, T):
        xx = T("x")
        if op == "sort":
            return tuple(xx.sort(dim=dim, descending=desc_))
        if op == "sort_stable":
            return tuple(xx.sort(dim=dim, descending=desc_, stable=True))
        if op == "argsort":
            i = xx.argsort(dim=dim, descending=desc_, stable=stable)
            return i if stable else (xx.gather(dim, i), i)  # (ties: only the values defined)
        if op == "msort":
            return M.msort(xx)
        if op == "topk":
            return tuple(xx.topk(k, dim=dim, largest=largest, sorted=srt))
        if op == "kthvalue":
            return tuple(xx.kthvalue(k, dim=dim, keepdim=keep))
        if op == "median":
            return tuple(xx.median(dim=dim, keepdim=keep))
        if op == "median_all":
            return xx.median()
        if op == "nanmedian":
            return tuple(xx.nanmedian(dim=dim, keepdim=keep))
        if op == "nanmedian_all":
            return xx.nanmedian()
        if op == "mode":
            return tuple(xx.mode(dim=dim, keepdim=keep))
        if op == "cummax":
            return tuple(xx.cummax(dim=dim))
        return tuple(xx.cummin(dim=dim))

    desc = (f"{op} x{shape} {dt} dim={dim} desc={desc_} k={k} largest={largest} sorted={srt} "
            f"keepdim={keep}")  # fmt: skip
    c = Case("sort", desc, {"x": x}, build, mode=mode, grad=grad, dtype=dt, select=select,
             unordered=unordered)  # fmt: skip
    return c


def fam_unique(rng):
    op = pick(rng, ("unique", "unique_dim", "unique_consecutive", "unique_consecutive_dim"))
    dt = pick(rng, ("float32", "int32", "int64", "bool", "float16", "bfloat16"))
    shape = shape_of(rng, 0, 3, sizes=(0, 1, 2, 3, 5, 7))
    x = values(rng, shape, dt, ties=True, special=rng.random() < 0.15 and "dim" not in op)
    nd = max(len(shape), 1)
    dim = int(rng.integers(-nd, nd))
    srt = True
    inv, cnt = bool(rng.random() < 0.5), bool(rng.random() < 0.5)

    def build(M, T):
        xx = T("x")
        if op == "unique":
            return M.unique(xx, sorted=srt, return_inverse=inv, return_counts=cnt)
        if op == "unique_dim":
            return M.unique(xx, sorted=srt, return_inverse=inv, return_counts=cnt, dim=dim)
        if op == "unique_consecutive":
            return M.unique_consecutive(xx, return_inverse=inv, return_counts=cnt)
        return M.unique_consecutive(xx, return_inverse=inv, return_counts=cnt, dim=dim)

    desc = f"{op} x{shape} {dt} dim={dim} inverse={inv} counts={cnt}"
    return Case("unique", desc, {"x": x}, build)


def fam_search(rng):
    op = pick(rng, ("searchsorted", "bucketize"))
    dt = pick(rng, ("float32", "float32", "int32", "int64", "float16", "bfloat16"))
    nb = int(pick(rng, (0, 1, 2, 3, 5, 7, 13)))
    batched = op == "searchsorted" and rng.random() < 0.4
    lead = shape_of(rng, 1, 2, sizes=(1, 2, 3)) if batched else ()
    b = values(rng, lead + (nb,), dt, ties=rng.random() < 0.5, special=rng.random() < 0.1)[0]
    use_sorter = op == "searchsorted" and rng.random() < 0.3
    bs = np.sort(b, axis=-1)
    sorter = None
    if use_sorter:
        sorter = np.argsort(b, axis=-1, kind="stable").astype(np.int64)
        bs = b
    vshape = (lead + (int(pick(rng, (0, 1, 2, 4, 6))),)) if batched else \
        shape_of(rng, 0, 2, sizes=(0, 1, 2, 4, 6))  # fmt: skip
    v = values(rng, vshape, dt, ties=True, special=rng.random() < 0.2)[0]
    scal = op != "bucketize" and not batched and rng.random() < 0.1
    right = bool(rng.random() < 0.5)
    side = pick(rng, (None, None, "left", "right"))
    if side is not None and side != ("right" if right else "left"):
        right = side == "right"
    oi32 = bool(rng.random() < 0.3)
    arrays = {"b": (bs, dt), "v": (v, dt)}
    if sorter is not None:
        arrays["sorter"] = (sorter, "int64")
    sv = float(v.reshape(-1)[0]) if v.size else 1.0

    def build(M, T):
        if op == "bucketize":
            return M.bucketize(T("v"), T("b"), right=right, out_int32=oi32)
        kw = {"right": right, "out_int32": oi32}
        if side is not None:
            kw["side"] = side
        if sorter is not None:
            kw["sorter"] = T("sorter")
        return M.searchsorted(T("b"), sv if scal else T("v"), **kw)

    desc = (
        f"{op} b{bs.shape}={bs.tolist()} v{vshape}={v.tolist()} {dt} right={right} "
        f"side={side} sorter={sorter is not None} out_int32={oi32} scalar={scal}"
    )
    return Case("search", desc, arrays, build)


def fam_shape(rng):
    op = pick(rng, ("flip", "roll", "roll_flat", "diag", "diagonal", "diag_embed", "tril",
                    "triu"))  # fmt: skip
    dt = pick(rng, DT)
    lo = {"diag": 1, "tril": 2, "triu": 2, "diagonal": 2}.get(op, 0)
    hi = 2 if op == "diag" else 4
    shape = shape_of(rng, lo, hi)
    x = values(rng, shape, dt)
    nd = max(len(shape), 1)
    dims = tuple(int(d) for d in rng.permutation(nd)[: int(rng.integers(0, nd + 1))])
    dims = tuple(d - nd if rng.random() < 0.3 else d for d in dims)
    shifts = tuple(int(rng.integers(-7, 8)) for _ in dims)
    off = int(rng.integers(-4, 5))
    d1, d2 = (int(e) for e in rng.permutation(max(nd, 2))[:2]) if nd >= 2 else (0, 1)
    e1, e2 = (int(e) for e in rng.permutation(nd + 1)[:2]) if True else (0, 1)
    grad = ("x",) if dt == "float32" else None

    def build(M, T):
        xx = T("x")
        if op == "flip":
            return xx.flip(dims)
        if op == "roll":
            if not dims:
                return xx.roll(shifts[:1] or 3)
            return xx.roll(shifts, dims)
        if op == "roll_flat":
            return xx.roll(off)
        if op == "diag":
            return xx.diag(off)
        if op == "diagonal":
            return xx.diagonal(off, d1, d2)
        if op == "diag_embed":
            return M.diag_embed(xx, off, e1 - (nd + 1) if rng_flag else e1, e2)
        if op == "tril":
            return xx.tril(off)
        return xx.triu(off)

    rng_flag = bool(rng.random() < 0.3)
    desc = f"{op} x{shape} {dt} dims={dims} shifts={shifts} off={off} d=({d1},{d2}) e=({e1},{e2})"
    return Case("shape", desc, {"x": x}, build, grad=grad)


def fam_big(rng):
    """Lengths past one workgroup's chunk (sort: 2,048; nonzero: 1,024), to reach the multi-pass
    kernels; fewer cases (lavapipe)."""
    op = pick(rng, ("sort_stable", "argsort_stable", "topk", "kthvalue", "median", "unique",
                    "unique_consecutive", "searchsorted", "nonzero", "cummax", "scatter_add",
                    "index_put_acc", "masked_select", "msort"))  # fmt: skip
    dt = pick(rng, ("float32", "float32", "int32", "float16", "bfloat16"))
    n = int(pick(rng, (1025, 2049, 2500, 4097, 5000)))
    shape = (n,) if rng.random() < 0.6 else (int(pick(rng, (2, 3))), n // 2)
    ties = rng.random() < 0.5
    x = values(rng, shape, dt, ties=ties, special=rng.random() < 0.3 and op != "unique")
    dim = -1 if rng.random() < 0.8 else 0
    k = int(rng.integers(1, shape[dim] + 1))
    desc_ = bool(rng.random() < 0.5)
    arrays = {"x": x}
    m = int(rng.integers(1, 3000))
    arrays["i"] = (idx_arr(rng, (m,), shape[-1], neg=False), "int64")
    arrays["s"] = values(rng, (m,), dt)
    arrays["b"] = (np.sort(values(rng, (n // 3,), dt, ties=ties)[0]), dt)
    mode, select = "exact_sign", None
    if op in ("topk", "kthvalue", "median"):
        mode, select = "select", ("x", dim % len(shape))
    if op in ("scatter_add", "index_put_acc"):
        mode = "tol" if dt in FLOATS else "exact"
    if op in ("unique", "msort"):
        mode = "exact"

    def build(M, T):
        xx = T("x")
        if op == "sort_stable":
            return tuple(xx.sort(dim=dim, descending=desc_, stable=True))
        if op == "argsort_stable":
            return xx.argsort(dim=dim, descending=desc_, stable=True)
        if op == "msort":
            return M.msort(xx)
        if op == "topk":
            return tuple(xx.topk(k, dim=dim, largest=desc_))
        if op == "kthvalue":
            return tuple(xx.kthvalue(k, dim=dim))
        if op == "median":
            return tuple(xx.median(dim=dim))
        if op == "unique":
            return M.unique(xx, return_inverse=True, return_counts=True)
        if op == "unique_consecutive":
            return M.unique_consecutive(xx, return_inverse=True, return_counts=True)
        if op == "searchsorted":
            return M.searchsorted(T("b"), xx, right=desc_)
        if op == "nonzero":
            return (xx > 0).nonzero() if dt != "bool" else xx.nonzero()
        if op == "cummax":
            return tuple(xx.cummax(dim=dim))
        if op == "masked_select":
            return xx.masked_select(xx > 0)
        flat = xx.reshape(-1)[: shape[-1]].clone()
        if op == "scatter_add":
            return flat.scatter_add(0, T("i"), T("s"))
        return flat.index_put_((T("i"),), T("s"), accumulate=True)

    desc = f"big {op} x{shape} {dt} dim={dim} k={k} desc={desc_} ties={ties} m={m}"
    return Case("big", desc, arrays, build, mode=mode, dtype=dt, select=select, terms=64)


FAMILIES = {
    "getitem": fam_getitem,
    "setitem": fam_setitem,
    "index_put": fam_index_put,
    "scatter": fam_scatter,
    "index_ops": fam_index_ops,
    "gather_take": fam_gather_take,
    "masked": fam_masked,
    "sort": fam_sort,
    "unique": fam_unique,
    "search": fam_search,
    "shape": fam_shape,
    "big": fam_big,
}
WEIGHTS = {"getitem": 3, "setitem": 3, "index_put": 1, "scatter": 2, "index_ops": 2,
           "gather_take": 2, "masked": 1.5, "sort": 3, "unique": 1, "search": 1, "shape": 1.5, "big": 0.6}  # fmt: skip


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", default=None, help="comma-separated families")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--max-report", type=int, default=60)
    args = ap.parse_args(argv)
    fams = args.family.split(",") if args.family else list(FAMILIES)
    w = np.array([WEIGHTS[f] for f in fams], float)
    w /= w.sum()
    counts, fails = collections.Counter(), collections.Counter()
    reported = 0
    for i in range(args.n):
        rng = np.random.default_rng([args.seed, i])
        fam = fams[int(rng.choice(len(fams), p=w))]
        counts[fam] += 1
        try:
            case = FAMILIES[fam](rng)
        except Exception:  # noqa: BLE001
            print(f"[{i}] {fam}: generator crashed\n{traceback.format_exc()}")
            continue
        msg = check(case, rng)
        if msg is not None:
            msg = f"layout {case.layout}\n{msg}"
        if args.verbose:
            print(f"[{i}] {case.desc}: {'ok' if msg is None else 'FAIL'}", flush=True)
        if msg is not None:
            fails[fam] += 1
            if reported < args.max_report:
                reported += 1
                print(f"---- case {i} (seed {args.seed}) {fam}: {case.desc}\n{msg}\n", flush=True)
    print("family       cases  mismatches")
    for f in fams:
        print(f"{f:12s} {counts[f]:6d} {fails[f]:6d}")
    print(f"total        {sum(counts.values()):6d} {sum(fails.values()):6d}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
