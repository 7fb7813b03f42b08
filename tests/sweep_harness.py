"""The differential sweep's machinery: random cases run through torch CPU and pyrite, compared.

A case is an op (`fn(L, *args, **kwargs)`, where `L` is the `torch` or the `pyrite` module, so
one lambda drives both) and arguments drawn by the op's generator. Tensor arguments are `Arg`s:
a numpy array of values both sides can hold exactly, a dtype name and a layout. Each side builds
its own tensor from an Arg the same way (contiguous; a permuted view of a contiguous tensor; a
slice with a step or an offset; an expanded size-1 dimension), so strides agree too.

What is compared (`compare`): that both raise or neither does (pyrite's error of torch's class,
or of a class `ERROR_CLASSES` pairs with it); the result's structure (tensor, tuple, named
fields, Python scalar, Size); each tensor's dtype (pyrite's int64 is int32, float64 float32:
`EXPECT_DTYPE`), shape and values: integer and bool results exactly, float ones within
`Tol(ulps, atol, sum_terms)` of torch's result on the same dtypes, or of torch's float64 result
rounded to the output dtype (torch CPU computes some half ops in half; the tolerance is a
rounding bound of the op, so either reference is honest).

Pure test machinery: imports torch, numpy and pyrite only.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable

import numpy as np
import torch

import pyrite as pr
from tests.oracle import ORACLE_TORCH

# ---- dtypes ---------------------------------------------------------------------------------
DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)
INTS = ("uint8", "int8", "int16", "int32", "int64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
# pyrite's documented narrowing (README, "Differences from PyTorch")
EXPECT_DTYPE = {"int64": "int32", "float64": "float32"}
U32 = 2.0**-24
UNIT = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": U32, "float64": U32}
INT_RANGE = {
    "uint8": (0, 255),
    "int8": (-128, 127),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**31), 2**31 - 1),  # pyrite stores int64 as int32
}


def tdt(name):
    return getattr(torch, name)


def pdt(name):
    return getattr(pr, name)


def lib_dtype(L, name):
    return getattr(L, name)


class Dt:
    """A dtype argument: `torch.<name>` on one side, `pyrite.<name>` on the other."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Dt({self.name})"


@dataclasses.dataclass
class Arg:
    """A tensor argument: values (float64 / int64 / bool numpy array), dtype name, layout."""

    a: np.ndarray
    dtype: str
    layout: tuple = ("c",)

    def __repr__(self):
        return f"Arg({self.dtype}{list(self.a.shape)}, {self.layout})"


def round_values(a: np.ndarray, name: str) -> np.ndarray:
    """The values `name` holds for `a` (float64 array for floats)."""
    if name in FLOATS:
        r = torch.from_numpy(np.asarray(a, dtype=np.float64)).to(tdt(name)).to(torch.float64)
        if name == "float64":  # pyrite holds float32: give both sides float32 values
            r = r.to(torch.float32).to(torch.float64)
        return r.numpy()
    if name == "bool":
        return np.asarray(a).astype(bool)
    return np.asarray(a).astype(np.int64)


def make_tensor(L, arg: Arg):
    """`arg` as an `L` tensor with arg.layout's strides."""
    a, kind = arg.a, arg.layout[0]
    dt = lib_dtype(L, arg.dtype)

    def mk(x):
        x = np.array(x, order="C", copy=True)  # (np.ascontiguousarray makes a 0-d array 1-d)
        if L is torch:
            if x.size == 0:  # (a tensor from an empty numpy array has strides of 0)
                return torch.empty(x.shape, dtype=dt)
            return torch.from_numpy(x.copy()).to(dt)
        return pr.tensor(x, dtype=dt)

    if kind == "p":  # a permuted view: t = base.permute(perm)
        perm = arg.layout[1]
        inv = tuple(int(i) for i in np.argsort(perm))
        return mk(a.transpose(inv)).permute(*perm)
    if kind == "s":  # a slice with a step (and a start) along dim
        dim, step, start = arg.layout[1:]
        n = a.shape[dim]
        wide_shape = list(a.shape)
        wide_shape[dim] = start + n * step + 1
        wide = np.zeros(wide_shape, dtype=a.dtype)
        idx = (slice(None),) * dim + (slice(start, start + n * step, step),)
        wide[idx] = a
        return mk(wide)[idx]
    if kind == "e":  # expanded size-1 dimensions (the values are constant along them)
        dims = arg.layout[1]
        base = a[tuple(slice(0, 1) if d in dims else slice(None) for d in range(a.ndim))]
        return mk(base).expand(*a.shape)
    return mk(a)


def build(L, x):
    """An argument tree with Args and Dts made into `L`'s tensors and dtypes."""
    if isinstance(x, Arg):
        return make_tensor(L, x)
    if isinstance(x, Dt):
        return lib_dtype(L, x.name)
    if isinstance(x, list):
        return [build(L, v) for v in x]
    if isinstance(x, tuple):
        return tuple(build(L, v) for v in x)
    if isinstance(x, dict):
        return {k: build(L, v) for k, v in x.items()}
    return x


def args_in_f64(x):
    """The argument tree with float Args and float dtypes taken to float64 (the reference)."""
    if isinstance(x, Arg):
        return Arg(x.a, "float64", x.layout) if x.dtype in FLOATS else x
    if isinstance(x, Dt):
        return Dt("float64") if x.name in FLOATS else x
    if isinstance(x, list):
        return [args_in_f64(v) for v in x]
    if isinstance(x, tuple):
        return tuple(args_in_f64(v) for v in x)
    if isinstance(x, dict):
        return {k: args_in_f64(v) for k, v in x.items()}
    return x


def _torch_f64_build(x):
    # float64 Args carry values of their original dtype: build them in float64 unrounded
    if isinstance(x, Arg) and x.dtype == "float64":
        a = x.a
        t = make_tensor(torch, Arg(a, "float64", x.layout))
        return t
    if isinstance(x, list):
        return [_torch_f64_build(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_torch_f64_build(v) for v in x)
    if isinstance(x, dict):
        return {k: _torch_f64_build(v) for k, v in x.items()}
    return build(torch, x)


# ---- random values and shapes ---------------------------------------------------------------
SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan)


@dataclasses.dataclass
class Dom:
    """Where an op's float inputs are drawn from; `specials`: chance an element is 0/±inf/NaN."""

    lo: float = -4.0
    hi: float = 4.0
    specials: float = 0.03
    ilo: int = -20  # integer inputs (clipped to the dtype's range)
    ihi: int = 20
    nan: bool = True  # NaN among the specials (not for ops that read a NaN's sign bit)


def values(rng, shape, name, dom: Dom = Dom()) -> np.ndarray:
    if name == "bool":
        return rng.random(shape) < 0.5
    if name in INTS:
        lo, hi = INT_RANGE[name]
        lo, hi = max(lo, dom.ilo), min(hi, dom.ihi)
        return rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
    a = rng.uniform(dom.lo, dom.hi, size=shape)
    if dom.specials and a.size:
        hit = rng.random(shape) < dom.specials
        specials = np.array(SPECIALS if dom.nan else SPECIALS[:-1])
        a = np.where(hit, rng.choice(specials, size=shape), a)
    return round_values(a, name)


SIZES = (0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 11, 13, 17)


def shape(rng, ndim=None, max_ndim=4, zero=0.04, max_numel=4096, sizes=SIZES):
    """A random shape: sizes from SIZES (1s and primes), a 0 with chance `zero` a dim."""
    if ndim is None:
        ndim = int(rng.integers(0, max_ndim + 1))
    while True:
        s = [int(rng.choice(sizes[1:])) for _ in range(ndim)]
        for i in range(ndim):
            if rng.random() < zero:
                s[i] = 0
        if math.prod(s) <= max_numel:
            return tuple(s)


def broadcast_partner(rng, s, bad=0.03):
    """A shape that broadcasts with `s` (drop leading dims, set dims to 1, add leading dims);
    with chance `bad` one that does not."""
    s = list(s)
    if rng.random() < 0.3:
        s = s[int(rng.integers(0, len(s) + 1)) :]
    s = [1 if rng.random() < 0.3 else d for d in s]
    if rng.random() < 0.15:
        s = [int(rng.choice((1, 2, 3)))] + s
    if rng.random() < bad and s:
        i = int(rng.integers(0, len(s)))
        s[i] = s[i] + 2 if s[i] != 1 else 3
    return tuple(s)


def layout(rng, a: np.ndarray, p=0.45):
    """A random layout for array `a` (and `a` made constant along expanded dims)."""
    if rng.random() > p or a.ndim == 0:
        return a, ("c",)
    kind = rng.choice(["p", "s", "e"]) if a.ndim >= 2 else rng.choice(["s", "e"])
    if kind == "p":
        perm = tuple(int(i) for i in rng.permutation(a.ndim))
        if perm == tuple(range(a.ndim)):
            perm = perm[::-1]
        return a, ("p", perm)
    if kind == "s":
        return a, (
            "s",
            int(rng.integers(0, a.ndim)),
            int(rng.integers(2, 4)),
            int(rng.integers(0, 3)),
        )
    dims = [d for d in range(a.ndim) if a.shape[d] > 1]
    if not dims:
        return a, ("c",)
    chosen = tuple(
        int(d)
        for d in rng.choice(dims, size=min(len(dims), int(rng.integers(1, 3))), replace=False)
    )
    base = a[tuple(slice(0, 1) if d in chosen else slice(None) for d in range(a.ndim))]
    return np.broadcast_to(base, a.shape).copy(), ("e", chosen)


def arg(rng, shp, name, dom=Dom(), lay=True):
    a = values(rng, shp, name, dom)
    if lay:
        a, lo = layout(rng, a)
        return Arg(a, name, lo)
    return Arg(a, name)


def pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


# ---- tolerances -----------------------------------------------------------------------------
@dataclasses.dataclass
class Tol:
    """|got - want| <= atol + (ulps·u32 + 2·u_out)·|want| + sum_terms·n·u32·scale.

    ulps: the op's error in f32 units of the last place; atol: an absolute floor (functions
    accurate only absolutely, like WGSL's sin); sum_terms: for reductions and dots, n·u·Σ|x|
    (Higham) with n the terms an output sums and scale the largest |input|·n; `exact`: nearest/
    max/index results must match bit for bit (up to NaN)."""

    ulps: float = 4
    atol: float = 2.0**-120
    sum_terms: bool = False
    exact: bool = False
    scale: Callable = None  # (numpy inputs, want) -> magnitude for sum_terms
    u_out: float = 2  # roundings of a float16/bfloat16 result (chains that store each step: more)


def _tensors_np(x, out):
    if isinstance(x, Arg):
        if x.dtype != "bool":
            out.append(np.asarray(x.a, dtype=np.float64))
    elif isinstance(x, (list, tuple)):
        for v in x:
            _tensors_np(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _tensors_np(v, out)
    return out


# ---- comparison -----------------------------------------------------------------------------
def to_np(t):
    """A torch or pyrite tensor's values as float64 / int64 / bool numpy."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.dtype == torch.bool:
            return t.numpy()
        if t.is_floating_point():
            return t.to(torch.float64).numpy()
        return t.to(torch.int64).numpy()
    if t.dtype is pr.bfloat16:
        t = t.float()
    a = t.numpy()
    if a.dtype == np.bool_:
        return a
    return a.astype(np.float64 if a.dtype.kind == "f" else np.int64)


def close(got, want, tol: Tol, out_dtype: str, inputs, n_terms: int):
    """Boolean mask of elements of `got` within tolerance of `want` (float64 arrays)."""
    u_out = UNIT.get(out_dtype, U32)
    if tol.exact:
        return (got == want) | (np.isnan(got) & np.isnan(want))
    rtol = tol.ulps * 2 * U32 + tol.u_out * u_out
    atol = tol.atol + 2 * (2.0**-126 if out_dtype != "float16" else 2.0**-14)
    if tol.sum_terms:
        scale = 1.0
        for a in inputs:
            f = np.abs(a[np.isfinite(a)])
            scale = max(scale, float(f.max(initial=0.0)))
        if tol.scale is not None:
            scale = tol.scale(inputs, want)
        atol = atol + (n_terms + 2) * 2 * U32 * scale * max(1, n_terms) + tol.u_out * u_out * scale
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(got - want) <= atol + rtol * np.abs(want)
        ok |= got == want  # infinities
        ok |= np.isnan(got) & np.isnan(want)
    return ok


class Mismatch(Exception):
    pass


def _fmt(a, limit=8):
    return np.array2string(np.asarray(a).ravel()[:limit], precision=8, threshold=limit)


def compare(t_out, p_out, tol: Tol, inputs, ref64=None, path="out", n_terms=1):
    """Raise Mismatch describing the first difference between torch's `t_out` and pyrite's."""
    if isinstance(t_out, torch.Tensor):
        if not isinstance(p_out, pr.Tensor):
            raise Mismatch(f"{path}: torch gives a Tensor, pyrite {type(p_out).__name__}")
        want_dt = str(t_out.dtype).replace("torch.", "")
        want_dt = EXPECT_DTYPE.get(want_dt, want_dt)
        if p_out.dtype.name != want_dt:
            raise Mismatch(f"{path}: dtype {p_out.dtype.name}, torch {want_dt}")
        if tuple(p_out.shape) != tuple(t_out.shape):
            raise Mismatch(f"{path}: shape {tuple(p_out.shape)}, torch {tuple(t_out.shape)}")
        if not isinstance(p_out.shape, pr.Size):
            raise Mismatch(f"{path}: .shape is {type(p_out.shape).__name__}")
        if t_out.numel() == 0:
            return
        w = to_np(t_out)
        g = to_np(p_out)
        if w.dtype.kind in "biu":
            bad = g != w
        else:
            n = max(1, n_terms)
            ok = close(g, w, tol, want_dt, inputs, n)
            if ref64 is not None and not ok.all() and isinstance(ref64, torch.Tensor):
                r = ref64.detach()
                if r.is_floating_point() and tuple(r.shape) == tuple(t_out.shape):
                    r = r.to(t_out.dtype if want_dt != "float32" else torch.float32)
                    ok |= close(g, to_np(r), tol, want_dt, inputs, n)
            bad = ~ok
        if bad.any():
            i = tuple(np.argwhere(bad)[0])
            raise Mismatch(
                f"{path}: {int(bad.sum())}/{bad.size} values differ; first at {i}: "
                f"pyrite {g[i]!r}, torch {w[i]!r}\n  pyrite {_fmt(g)}\n  torch  {_fmt(w)}"
            )
        return
    if isinstance(t_out, torch.Size):
        if tuple(p_out) != tuple(t_out) or not isinstance(p_out, tuple):
            raise Mismatch(f"{path}: {p_out!r}, torch {t_out!r}")
        return
    if isinstance(t_out, (tuple, list)):
        if not isinstance(p_out, (tuple, list)) or len(p_out) != len(t_out):
            raise Mismatch(
                f"{path}: torch gives {type(t_out).__name__} of {len(t_out)}, pyrite {p_out!r:.200}"
            )
        for name in getattr(t_out, "_fields", ()):
            if not hasattr(p_out, name):
                raise Mismatch(f"{path}: pyrite's result has no field .{name}")
        r64 = (
            ref64
            if isinstance(ref64, (tuple, list)) and len(ref64) == len(t_out)
            else [None] * len(t_out)
        )
        for i, (tv, pv, rv) in enumerate(zip(t_out, p_out, r64)):
            compare(tv, pv, tol, inputs, rv, f"{path}[{i}]", n_terms)
        return
    if isinstance(t_out, bool):
        if not isinstance(p_out, (bool, np.bool_)) or bool(p_out) != t_out:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        return
    if isinstance(t_out, int):
        if isinstance(p_out, bool) or not isinstance(p_out, (int, np.integer)) or p_out != t_out:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        return
    if isinstance(t_out, float):
        if not isinstance(p_out, (float, int)) or isinstance(p_out, bool):
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        ok = close(np.float64(p_out), np.float64(t_out), tol, "float32", inputs, n_terms)
        if not ok:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        return
    if t_out is None:
        if p_out is not None:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch None")
        return
    if isinstance(t_out, torch.dtype):
        want = EXPECT_DTYPE.get(str(t_out)[6:], str(t_out)[6:])
        if getattr(p_out, "name", None) != want:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        return
    if isinstance(t_out, str):
        if p_out != t_out:
            raise Mismatch(f"{path}: pyrite {p_out!r}, torch {t_out!r}")
        return


# ---- errors ---------------------------------------------------------------------------------
# torch's class -> pyrite classes accepted beside its own subclasses, with the reason
ERROR_CLASSES = {
    # torch raises RuntimeError for bad dtypes ("not implemented for 'Bool'", "result type
    # Float can't be cast to Long"): pyrite's convention (DESIGN.md, Errors) is TypeError naming
    # the dtype
    RuntimeError: (TypeError,),
    NotImplementedError: (TypeError,),
}


def error_ok(t_exc: BaseException, p_exc: BaseException) -> bool:
    if isinstance(p_exc, type(t_exc)):
        return True
    for cls, also in ERROR_CLASSES.items():
        if isinstance(t_exc, cls) and isinstance(p_exc, also):
            return True
    return False


@dataclasses.dataclass
class Op:
    """One public name under test: fn(L, *args, **kwargs) and a generator of its arguments."""

    name: str
    fn: Callable
    gen: Callable  # (rng, i) -> (args, kwargs); i is the case number (cycle categoricals by it)
    tol: Tol = dataclasses.field(default_factory=Tol)
    n_terms: Callable = None  # (args) -> terms per output, for sum tolerances
    allow: Callable = None  # (args, kwargs, t_exc, p_exc, mismatch) -> reason or None
    # a comparison of its own (t_out, p_out, args, kwargs, tol, inputs) raising Mismatch: for
    # results where ties leave a choice (the index of a median among equal values)
    check: Callable = None


@dataclasses.dataclass
class Outcome:
    op: str
    case: int
    status: str  # "ok", "both-raise", "allowed", "unsupported", "FAIL"
    detail: str = ""


def run_case(op: Op, rng, i: int) -> Outcome:
    """One case; a crash of the comparison itself (pyrite's result unreadable) is a FAIL."""
    try:
        return _run_case(op, rng, i)
    except Exception as e:  # noqa: BLE001
        return Outcome(
            op.name, i, "FAIL", f"reading pyrite's result raised {type(e).__name__}: {str(e)[:300]}"
        )


def _call(L, op, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return op.fn(L, *build(L, args), **build(L, kwargs))


def _run_case(op: Op, rng, i: int) -> Outcome:
    args, kwargs = op.gen(rng, i)
    desc = f"args={args!r} kwargs={kwargs!r}"
    t_exc = p_exc = None
    try:
        t_out = _call(torch, op, args, kwargs)
    except Exception as e:  # noqa: BLE001 - torch's verdict is the oracle
        t_exc = e
    try:
        p_out = _call(pr, op, args, kwargs)
    except Exception as e:  # noqa: BLE001
        p_exc = e
    if lacks_f16(p_exc):
        # float16 on a device without shader-f16 (Dawn on the H200): pyrite's refusal is the
        # documented one (asserted in test_errors.py); the case runs where the feature is
        return Outcome(op.name, i, "unsupported", str(p_exc)[:120])
    if t_exc is not None or p_exc is not None:
        reason = op.allow(args, kwargs, t_exc, p_exc, None) if op.allow else None
        reason = reason or allowed_error(args, kwargs, t_exc, p_exc, None if t_exc else t_out)
        if not reason and t_exc is not None and p_exc is None:
            if _as_documented(op, args, kwargs, p_out, _tensors_np((args, kwargs), []), 1):
                reason = DOCUMENTED
        if not reason and t_exc is not None and p_exc is None:
            if _torch_layout_bug(op, args, kwargs, p_out, _tensors_np((args, kwargs), []), 1):
                reason = "torch raises for this layout only (a torch bug: kron of a permuted view); pyrite matches torch on contiguous inputs"
        if reason:
            return Outcome(op.name, i, "allowed", reason)
        if t_exc is not None and p_exc is not None:
            if error_ok(t_exc, p_exc):
                return Outcome(op.name, i, "both-raise")
            return Outcome(
                op.name,
                i,
                "FAIL",
                f"error class: torch {type(t_exc).__name__}({str(t_exc)[:160]!r}), pyrite "
                f"{type(p_exc).__name__}({str(p_exc)[:200]!r})\n  {desc}",
            )
        if t_exc is not None:
            return Outcome(
                op.name,
                i,
                "FAIL",
                f"torch raises {type(t_exc).__name__}({str(t_exc)[:160]!r}), pyrite returns "
                f"{_short(p_out)}\n  {desc}",
            )
        return Outcome(
            op.name,
            i,
            "FAIL",
            f"pyrite raises {type(p_exc).__name__}({str(p_exc)[:300]!r}), torch returns "
            f"{_short(t_out)}\n  {desc}",
        )
    ref64 = None
    inputs = _tensors_np((args, kwargs), [])
    n_terms = op.n_terms(args, kwargs) if op.n_terms else 1
    try:
        if op.check is not None:
            op.check(t_out, p_out, args, kwargs, op.tol, inputs)
        else:
            compare(t_out, p_out, op.tol, inputs, None, n_terms=n_terms)
    except Mismatch as first:
        if _as_documented(op, args, kwargs, p_out, inputs, n_terms):
            return Outcome(op.name, i, "allowed", DOCUMENTED)
        if _torch_layout_bug(op, args, kwargs, p_out, inputs, n_terms):
            return Outcome(
                op.name,
                i,
                "allowed",
                "torch's result depends on the layout (a torch bug); pyrite matches torch on contiguous inputs",
            )
        try:
            a64, k64 = args_in_f64(args), args_in_f64(kwargs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref64 = op.fn(torch, *_torch_f64_build(a64), **_torch_f64_build(k64))
            compare(t_out, p_out, op.tol, inputs, ref64, n_terms=n_terms)
        except Mismatch:
            reason = op.allow(args, kwargs, None, None, str(first)) if op.allow else None
            if reason:
                return Outcome(op.name, i, "allowed", reason)
            return Outcome(op.name, i, "FAIL", f"{first}\n  {desc}")
        except Exception:  # noqa: BLE001 - the float64 reference may not exist (int-only ops)
            reason = op.allow(args, kwargs, None, None, str(first)) if op.allow else None
            if reason:
                return Outcome(op.name, i, "allowed", reason)
            return Outcome(op.name, i, "FAIL", f"{first}\n  {desc}")
    return Outcome(op.name, i, "ok")


_AS_PYRITE = {"int64": "int32", "float64": "float32"}


def _as_pyrite_dtypes(x):
    """The argument tree with int64/float64 as the int32/float32 pyrite holds them."""
    if isinstance(x, Arg):
        return Arg(x.a, _AS_PYRITE.get(x.dtype, x.dtype), x.layout)
    if isinstance(x, Dt):
        return Dt(_AS_PYRITE.get(x.name, x.name))
    if isinstance(x, list):
        return [_as_pyrite_dtypes(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_as_pyrite_dtypes(v) for v in x)
    if isinstance(x, dict):
        return {k: _as_pyrite_dtypes(v) for k, v in x.items()}
    return x


def _has_wide(x) -> bool:
    if isinstance(x, (Arg, Dt)):
        return (x.dtype if isinstance(x, Arg) else x.name) in _AS_PYRITE
    if isinstance(x, (list, tuple)):
        return any(_has_wide(v) for v in x)
    if isinstance(x, dict):
        return any(_has_wide(v) for v in x.values())
    return False


def _as_documented(op, args, kwargs, p_out, inputs, n_terms) -> bool:
    """Whether torch, given int32/float32 where the case has int64/float64 (what pyrite
    documents it holds), answers as pyrite did."""
    if not _has_wide((args, kwargs)):
        return False
    try:
        t = _call(torch, op, _as_pyrite_dtypes(args), _as_pyrite_dtypes(kwargs))
    except Exception:  # noqa: BLE001
        return False
    try:
        if op.check is not None:
            op.check(t, p_out, args, kwargs, op.tol, inputs)
        else:
            compare(t, p_out, op.tol, inputs, None, n_terms=n_terms)
    except Exception:  # noqa: BLE001 - including Mismatch on a dtype name (int32 vs int32)
        return False
    return True


DOCUMENTED = "int64 is int32 and float64 is float32 here (README); torch given those dtypes agrees"


def _contiguous_args(x):
    if isinstance(x, Arg):
        return Arg(x.a, x.dtype)
    if isinstance(x, list):
        return [_contiguous_args(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_contiguous_args(v) for v in x)
    if isinstance(x, dict):
        return {k: _contiguous_args(v) for k, v in x.items()}
    return x


def _torch_layout_bug(op, args, kwargs, p_out, inputs, n_terms):
    """Whether torch itself answers differently for contiguous copies of the same inputs, and
    pyrite agrees with that answer (torch CPU's median of an all-expanded tensor is garbage)."""
    layouts = [a.layout for a in _int_args((args, kwargs), [])]
    if all(lo == ("c",) for lo in layouts):
        return False
    try:
        t_c = _call(torch, op, _contiguous_args(args), _contiguous_args(kwargs))
        if op.check is not None:
            op.check(t_c, p_out, args, kwargs, op.tol, inputs)
        else:
            compare(t_c, p_out, op.tol, inputs, None, n_terms=n_terms)
    except Exception:  # noqa: BLE001
        return False
    return True


def _short(x):
    if isinstance(x, (torch.Tensor, pr.Tensor)):
        return f"{type(x).__module__.split('.')[0]} tensor {x.dtype} {tuple(x.shape)}"
    return f"{x!r:.120}"


# ---- documented differences (the allow-list) ------------------------------------------------
def _int_args(x, out):
    if isinstance(x, Arg):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _int_args(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _int_args(v, out)
    return out


def _empty(x):
    if isinstance(x, torch.Tensor):
        return x.numel() == 0
    if isinstance(x, (tuple, list)):
        return any(_empty(v) for v in x)
    return False


def lacks_f16(p_exc) -> bool:
    from pyrite import backend
    from pyrite.errors import DeviceError

    return (
        isinstance(p_exc, DeviceError)
        and "shader-f16" in str(p_exc)
        and not backend.current().has_f16
    )


def allowed_error(args, kwargs, t_exc, p_exc, t_out=None):
    """A reason when an error difference is one pyrite documents, else None."""
    if t_exc is not None and p_exc is None and not torch.__version__.startswith(ORACLE_TORCH):
        # another torch (the GPU machine's) refuses calls 2.13 takes (prod(x, dim=None),
        # nansum(x, dtype=int16)); values are still compared wherever both return
        return f"torch {torch.__version__} refuses what torch {ORACLE_TORCH}x accepts"
    if p_exc is not None and t_exc is None and isinstance(p_exc, TypeError) and _empty(t_out):
        # torch.mm(bool (0, 13), ...) returns an empty bool tensor: its dtype checks sit in
        # kernels that never run for an empty result
        return "torch skips its dtype check when the result is empty"
    if p_exc is not None and t_exc is None and isinstance(p_exc, IndexError) and _empty(t_out):
        # torch.roll(x of shape (0, 6), 3, dims=3), x[[11], 2:1] of 11 rows: no element is
        # read, so torch never checks the dim or the index
        return "torch skips its dim/index range check when the result is empty"
    if t_exc is not None and p_exc is None:
        msg = str(t_exc)
        kinds = {a.dtype for a in _int_args((args, kwargs), [])}
        if ("Long" in msg and "Int" in msg and kinds & {"int64"} and kinds & {"int32"}) or (
            ("double" in msg or "Double" in msg) and "float64" in kinds
        ):
            return "int64 is int32 and float64 float32 here, so torch's mixed-dtype refusal has no case"
    if t_exc is not None and p_exc is None:
        msg = str(t_exc)
        # torch CPU lacks some kernels for half/bfloat16/small ints that CUDA has ("not
        # implemented for 'Half'"); a ported script on a GPU runs them, and so does pyrite
        if "not implemented for" in msg and ("'Half'" in msg or "'BFloat16'" in msg):
            return "torch CPU lacks a kernel for this dtype; pyrite (like CUDA) has it"
    if t_exc is not None and p_exc is None and isinstance(t_exc, TypeError):
        # torch.atan2(x, 2), torch.maximum(x, 0.5): torch's function wants a Tensor there;
        # pyrite takes the Python scalar as its operators do (more permissive, never wrong)
        if "must be Tensor, not" in str(t_exc):
            return "pyrite accepts a Python scalar where torch's function requires a Tensor"
    if t_exc is not None and p_exc is None and ("double" in str(t_exc) or "Double" in str(t_exc)):
        if any(a.dtype == "float64" for a in _int_args((args, kwargs), [])):
            # torch.lerp(f64, f32): torch refuses mixing double and float; pyrite's float64 is
            # float32 (README), so the two are one dtype here
            return "float64 is float32 here, so no double/float mismatch exists"
    if p_exc is not None and t_exc is None and isinstance(p_exc, TypeError):
        tensors = _int_args((args, kwargs), [])
        if tensors and all(a.a.size == 0 for a in tensors):
            # torch.log_softmax(int32 of 0 elements) returns an empty int32 tensor: its dtype
            # check sits in the kernel, which never runs
            return "torch skips its dtype check on empty inputs"
    if p_exc is not None and t_exc is None and isinstance(p_exc, OverflowError):
        # README: values outside int32 are refused at the boundary, never wrapped
        return "int64 value outside int32 refused (README: integers are 32-bit)"
    return None


def check_index_ties(t_out, p_out, args, kwargs, tol, inputs):
    """(values, indices) results where equal values leave the index open (median, mode,
    kthvalue, topk, unstable sort): values as usual; pyrite's indices need only pick elements
    of the input equal to its values (torch documents its own choice as unspecified)."""
    if not isinstance(t_out, tuple) or len(t_out) != 2:
        return compare(t_out, p_out, tol, inputs)
    compare(t_out[0], p_out[0], tol, inputs, path="values")
    tv, ti = t_out
    pi = p_out[1]
    compare(ti.new_zeros(ti.shape), pi.float().mul(0).to(pi.dtype), tol, inputs, path="indices")
    x = make_tensor(torch, Arg(args[0].a, args[0].dtype))
    if x.dim() == 0 or ti.numel() == 0:
        return compare(ti, pi, tol, inputs, path="indices")
    dim = kwargs.get("dim", -1)
    if len(args) > 2 and isinstance(args[2], int):  # kthvalue(x, k, dim) / topk(x, k, dim)
        dim = args[2]
    d = dim % x.dim()
    idx = torch.from_numpy(to_np(pi)).to(torch.int64)
    if idx.dim() < x.dim():
        idx = idx.unsqueeze(d)
    got = torch.gather(x, d, idx).to(torch.float64)
    want = tv.to(torch.float64)
    if want.dim() < got.dim():
        want = want.unsqueeze(d)
    same = (got == want) | (got.isnan() & want.isnan())
    if not bool(same.all()):
        raise Mismatch(
            f"indices: pyrite's pick {got.flatten()[:6].tolist()}, values {want.flatten()[:6].tolist()}"
        )
