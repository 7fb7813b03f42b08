"""Randomized differential hunt (session 39) of scans and reductions against torch CPU in float64:
cumsum, cumprod, cummax, cummin and logcumsumexp (functions, methods, in-place, out=, dtype=),
their gradients, the one-pass look-back scan (ops/reduce.SCAN_LOOKBACK, forced on lavapipe with
superblocks of 2 or 4 chunks so its superblock waits run at small sizes; its bits the same when
every wait is computed by the waiter, SCAN_LOOKBACK_SPINS = -1; its scratch left clean), and
sum / mean / prod / amax / amin / argmax / argmin / var / std / logsumexp / norm over random dims,
on long rows (the split, fused and wide kernels forced) and many rows.

Inputs: awkward sizes (1, primes, 2048 +- 1, multiples of the 2048-element staged chunk), 1-D to
4-D, random (negative) dims, transposed / stepped / expanded / permuted views, float32, float16,
bfloat16 and integer inputs, NaN / +-inf / -0.0. Each case draws from the `rng` fixture (seeded
from the test's id, printed on failure). Tolerances are rounding bounds computed in float64 from
the operands: a prefix of n f32 terms within 2·n·2⁻²³·Σ|x| (cumsum), 2·n·2⁻²³·|product|
(cumprod), a variance perturbed by |δx_i| <= n·2⁻²³·|x_i| within 4·n·2⁻²³·Σ|x_i - m|·|x_i| / (N - c),
plus the output type's rounding.

Found and fixed by it: the look-back's computed waits kept a raw NaN where the stored word is
canonical (bits differing with SCAN_LOOKBACK_SPINS = -1); logcumsumexp's second derivative (the
saved output used without its graph); out= of sum / prod / cumsum / cumprod not taking its
dtype as torch's does; cumsum(dtype=bool) giving a running any where torch refuses it; and
SCAN_LAST_PATH naming a chunked scan's inner scan."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite import backend
from pyrite.kernels.reduce import SCAN_STAGED
from pyrite.ops import reduce as R
from tests.oracle import flush_subnormals

EPS32 = 2.0**-23
# the output type's rounding, beyond f32's (f32's own is inside every bound below)
EPS_OUT = {"float32": 0.0, "float16": 2.0**-10, "bfloat16": 2.0**-7}
TINY_OUT = {"float32": 1e-38, "float16": 2.0**-24, "bfloat16": 1e-38}  # (subnormal steps)
PR = {"float32": pr.float32, "float16": pr.float16, "bfloat16": pr.bfloat16,
      "int32": pr.int32, "uint8": pr.uint8, "bool": pr.bool}  # fmt: skip
TH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
      "int32": torch.int32, "uint8": torch.uint8, "bool": torch.bool}  # fmt: skip
SCAN_LENS = [1, 2, 7, 31, 257, 2047, 2048, 2049, 4096, 2 * SCAN_STAGED + 1, 5 * SCAN_STAGED + 3]


# ---- inputs ------------------------------------------------------------------------------------
def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _values(rng, shape, dt, kind="normal", special=0.0):
    if dt == "bool":
        return rng.random(shape) < 0.5
    if dt in ("int32", "uint8"):
        lo = 0 if dt == "uint8" else -20
        if kind == "near1":  # (products that stay inside int32)
            return rng.choice([1, 1, 1, 0] if dt == "uint8" else [-1, 1, 1, 0], shape).astype(
                np.int32
            )
        return rng.integers(lo, 21, shape).astype(np.int32)
    if kind == "near1":  # (long products stay in range; signs mixed)
        a = (1 + 0.02 * rng.standard_normal(shape)) * np.where(rng.random(shape) < 0.1, -1, 1)
    else:
        a = 3 * rng.standard_normal(shape)
    a = a.astype(np.float32)
    if special:
        m = rng.random(shape) < special
        pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
        a[m] = rng.choice(pool, int(m.sum()))
    return a


def _pair(rng, shape, dt, view, kind="normal", special=0.0):
    """(pyrite view, torch view, text): the same values and the same view calls on each side
    (a base made of float32 values and converted by each framework)."""
    nd = len(shape)
    base, fn, text = list(shape), (lambda x: x), "contiguous"
    if view == "T" and nd >= 2:
        i, j = (int(v) for v in rng.choice(nd, 2, replace=False))
        base[i], base[j] = base[j], base[i]
        fn, text = (lambda x: x.transpose(i, j)), f"transpose({i}, {j})"
    elif view == "step":
        k = int(rng.integers(nd))
        base[k] = 2 * shape[k] + 1
        sl = tuple(slice(1, None, 2) if i == k else slice(None) for i in range(nd))
        fn, text = (lambda x: x[sl]), f"[1::2] along {k}"
    elif view == "expand":
        k = int(rng.integers(nd))
        base[k] = 1
        fn, text = (lambda x: x.expand(*shape)), f"expanded along {k}"
    a = _values(rng, base, dt, kind, special)
    p, t = pr.tensor(a), torch.tensor(a)
    if dt in ("float16", "bfloat16", "uint8"):
        p, t = p.to(PR[dt]), t.to(TH[dt])
    return fn(p), fn(t), text


def _flushes() -> bool:
    return backend.current().flushes_subnormals


def _f64(x):
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float64).numpy()
    return np.asarray(x.float().numpy() if x.dtype.kind == "f" else x.numpy(), np.float64)


def _close(got, want, tol, what):
    got, want = _f64(got) if not isinstance(got, np.ndarray) else got, np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), (what, "NaN positions differ")
    inf = np.isinf(want)
    assert (got[inf] == want[inf]).all(), (what, "infinities differ")
    ok = nan | inf
    err = np.where(ok, 0.0, np.abs(got - np.where(ok, 0.0, want)))
    tol = np.broadcast_to(np.asarray(tol, np.float64), want.shape)
    bad = ~(err <= tol) & ~ok
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: at {i} got {got[i]!r}, want {want[i]!r}, tol {tol[i]:.3g}")


@pytest.fixture(autouse=True)
def _staged_chunks(monkeypatch):
    """Look-back chunks of SCAN_STAGED on every device (the cases' chunk counts assume it; a
    GPU's rule takes longer chunks for long rows: tests/test_scan_lookback.py)."""
    monkeypatch.setattr(R, "SCAN_LOOKBACK_CHUNK", SCAN_STAGED)


@pytest.fixture
def lookback(monkeypatch):
    """The one-pass look-back scan wherever it fits, superblocks of 4 chunks."""
    monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
    monkeypatch.setattr(R, "SCAN_LOOKBACK_SB", 4)
    return monkeypatch


def _scratch_clean():
    dev = pr.backend.current()
    st = R._lookback_scratch(dev)
    words = 2 + 2 * R.SCAN_LOOKBACK_UNITS
    data = np.frombuffer(dev.read(st.buffer, 0, 4 * words), np.uint32)
    return bool((data[:2] == 0).all() and (data[2:] == R.FUSED_EMPTY).all())


# ---- scans: values -----------------------------------------------------------------------------
def _scan_want(op, t, d):
    """torch's float64 result (values, indices or None) and the tolerance."""
    if op in ("cummax", "cummin"):
        v, i = getattr(torch, op)(t, d)
        return _f64(v), 0.0, i.numpy()
    x = t.to(torch.float64)
    want = getattr(torch, op)(x, d).numpy()
    n = t.shape[d]
    dt = str(t.dtype).removeprefix("torch.")
    e, tiny = EPS_OUT.get(dt, 0.0), TINY_OUT.get(dt, 0.0)
    if op == "cumsum":
        scale = torch.cumsum(torch.nan_to_num(x.abs(), posinf=0.0), d).numpy()
    elif op == "cumprod":
        scale = np.abs(want)
    else:  # logcumsumexp: ceil(log2 n) passes, each a rounding relative to the running |result|
        fin = np.where(np.isfinite(want), np.abs(want), 0.0)
        scale = 2 * (math.ceil(math.log2(max(n, 2))) + 1) * (1 + np.maximum.accumulate(fin, d)) / n
    with np.errstate(invalid="ignore"):  # (0 · inf where the want is infinite: not compared)
        tol = 2 * n * EPS32 * np.nan_to_num(scale, posinf=0.0) + e * np.abs(want) + tiny
    return want, np.nan_to_num(tol, nan=0.0, posinf=0.0), None


@pytest.mark.parametrize("lb", ["default", "lookback", "lookback computed"])
@pytest.mark.parametrize("k", range(16))
def test_scan_random(k, lb, rng, monkeypatch):
    if lb != "default":
        monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
        monkeypatch.setattr(R, "SCAN_LOOKBACK_SB", _pick(rng, [2, 4]))
    if lb == "lookback computed":
        monkeypatch.setattr(R, "SCAN_LOOKBACK_SPINS", -1)
    op = _pick(rng, ["cumsum", "cumsum", "cumprod", "cumprod", "cummax", "cummin", "logcumsumexp"])
    nd = int(rng.integers(1, 5))
    d = int(rng.integers(nd))
    shape = [_pick(rng, [1, 2, 3, 5]) for _ in range(nd)]
    shape[d] = _pick(rng, SCAN_LENS)
    while math.prod(shape) > 40_000:
        i = max((i for i in range(nd) if i != d), key=lambda i: shape[i])
        shape[i] = 1
    floats = ["float32", "float32", "float16", "bfloat16"]
    dt = _pick(rng, floats if op == "logcumsumexp" else floats + ["int32", "uint8", "bool"])
    view = _pick(rng, ["contiguous", "contiguous", "T", "step", "expand"])
    special = 0.0 if dt not in floats else _pick(rng, [0.0, 0.0, 0.002])
    kind = "near1" if op == "cumprod" else "normal"
    p, t, text = _pair(rng, shape, dt, view, kind, special)
    dim = d - nd if rng.random() < 0.5 else d
    how = _pick(rng, ["function", "method", "out"])
    what = f"{op} {dt} {tuple(shape)} dim={dim} {text} {how} special={special} {lb}"
    if how == "method":
        got = getattr(p, op)(dim)
    elif how == "out" and op in ("cummax", "cummin"):
        got = (pr.empty(shape, dtype=p.dtype), pr.empty(shape, dtype=pr.int64))
        getattr(pr, op)(p, dim, out=got)
    elif how == "out":
        got = pr.empty(0, dtype=pr.int64 if dt in ("int32", "uint8", "bool") else p.dtype)
        assert getattr(pr, op)(p, dim, out=got) is got
    else:
        got = getattr(pr, op)(p, dim)
    want, tol, idx = _scan_want(op, t, dim)
    if op in ("cummax", "cummin"):
        _close(got[0], want, 0.0, what)
        np.testing.assert_array_equal(got[1].numpy(), idx, err_msg=what)
        return
    tw = getattr(torch, op)(t, dim)  # (dtype: torch's int64 is pyrite's int32)
    expect = {torch.int64: pr.int32}.get(tw.dtype) or PR[str(tw.dtype).removeprefix("torch.")]
    assert got.dtype == expect, what
    if dt == "float16":  # (past float16's range the result is inf, in torch too)
        want = np.where(np.isinf(_f64(tw)), _f64(tw), want)
    _close(got, want, tol, what)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_dtype_argument(op, dtype, rng, lookback):
    # dtype= casts each element first (torch: x.to(dtype) then the scan), from float32, int32
    # and bool inputs, on rows that take the look-back path where the result is a float
    n = 2 * SCAN_STAGED + 17
    for src in ("float32", "int32", "bool"):
        if dtype == "int32" and src == "float32":
            src = "int32"
        a = _values(rng, (3, n), src, "near1" if op == "cumprod" else "normal")
        p, t = pr.tensor(a), torch.tensor(a)
        got = getattr(p, op)(1, dtype=PR[dtype])
        assert got.dtype == PR[dtype]
        x = t.to(TH[dtype])
        if dtype == "int32":
            np.testing.assert_array_equal(got.numpy(), getattr(torch, op)(x, 1).numpy())
            continue
        want = getattr(torch, op)(x.double(), 1).numpy()
        scale = np.cumsum(np.abs(x.double().numpy()), 1) if op == "cumsum" else np.abs(want)
        tol = 2 * n * EPS32 * scale + EPS_OUT[dtype] * np.abs(want) + TINY_OUT[dtype]
        if dtype == "float16":
            want = np.where(np.abs(want) > 65504, np.copysign(np.inf, want), want)
        _close(got, want, tol, f"{op} {src} dtype={dtype}")


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_scan_inplace_on_views(op, rng, lookback):
    # x.cumsum_(d) on a strided view writes through to its base (two scans: along the row, then
    # across rows); on an expanded view torch refuses (one element, several places), as pyrite
    a = _values(rng, (4, 2 * SCAN_STAGED + 5), "float32", "near1" if op == "cumprod" else "")
    n = a.shape[1] + a.shape[0]
    for text, view in (("whole", lambda x: x), ("[1::2]", lambda x: x[1::2]), ("t()", lambda x: x.t())):  # fmt: skip
        p, t = pr.tensor(a), torch.tensor(a, dtype=torch.float64)
        s = torch.tensor(np.abs(a), dtype=torch.float64)  # (the bound: the same on |a|)
        for dim in (-1, 0):
            vp = view(p)
            assert getattr(vp, op + "_")(dim) is vp
            getattr(view(t), op + "_")(dim)
            getattr(view(s), op + "_")(dim)
        _close(p, t.numpy(), 4 * n * EPS32 * s.numpy(), f"{op}_ on {text}")
    with pytest.raises(RuntimeError):
        getattr(torch.tensor(a[:1]).expand(3, -1), op + "_")(1)
    with pytest.raises(RuntimeError):
        getattr(pr.tensor(a[:1]).expand(3, -1), op + "_")(1)


def test_scan_specials():
    # NaN reaches every later element, inf - inf is NaN, a zero in a product stays zero until
    # an inf (0 * inf = NaN), cummax's index follows the latest NaN and ties (>=), as torch
    inf, nan = math.inf, math.nan
    rows = [
        [1.0, nan, 2.0, -inf, nan, 3.0],
        [inf, 2.0, -inf, 1.0, 0.0, -0.0],
        [2.0, 0.0, 3.0, inf, -1.0, 5.0],
        [-0.0, 0.0, -0.0, 0.0, 7.0, 7.0],
        [-inf, -inf, 1e30, -1e30, 3e38, 1e-40],
    ]
    a = np.array(rows, np.float32)
    # (a device that flushes subnormals reads 1e-40 as 0: -inf·0 is NaN there, so its oracle
    # takes the flushed row; the H100 did)
    p, t = pr.tensor(a), torch.tensor(flush_subnormals(a) if _flushes() else a)
    for op in ("cumsum", "cumprod", "logcumsumexp"):
        got, want = _f64(getattr(p, op)(1)), _f64(getattr(torch, op)(t.double(), 1))
        if op != "cumsum":  # (cumsum's last row: 3e38 + 1e30 differs from float64's past f32)
            _close(got, want, 6 * EPS32 * np.abs(np.nan_to_num(want)), op)
        else:
            _close(got[:4], want[:4], 6 * EPS32 * np.abs(np.nan_to_num(want[:4])), op)
    for op in ("cummax", "cummin"):
        v, i = getattr(p, op)(1)
        tv, ti = getattr(torch, op)(t, 1)
        _close(v, _f64(tv), 0.0, op)
        np.testing.assert_array_equal(i.numpy(), ti.numpy(), err_msg=op)


# ---- the look-back scan ------------------------------------------------------------------------
@pytest.mark.parametrize("k", range(10))
def test_lookback_random(k, rng, monkeypatch):
    # rows of P chunks around the superblock sizes (sb, sb + 1, 2 sb - 1, ...), rows stepped or
    # offset in their base, half inputs; the same bits whichever waits read a stored word, the
    # scratch clean after, within the scan's bound
    sb = _pick(rng, [2, 4, 8])
    monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
    monkeypatch.setattr(R, "SCAN_LOOKBACK_SB", sb)
    op = _pick(rng, ["cumsum", "cumprod"])
    parts = max(2, _pick(rng, [2, 3, sb, sb + 1, 2 * sb - 1, 2 * sb + 1, 9]))
    n = (parts - 1) * SCAN_STAGED + int(rng.integers(1, SCAN_STAGED + 1))
    rows = _pick(rng, [1, 2, 3])
    dt = _pick(rng, ["float32", "float32", "float16", "bfloat16"])
    a = _values(rng, (rows, n), "float32", "near1" if op == "cumprod" else "normal", 0.0005)
    form = _pick(rng, ["plain", "stepped rows", "offset"])
    if form == "stepped rows":
        big = np.zeros((2 * rows, n), np.float32)
        big[::2] = a
        x = pr.tensor(big).to(PR[dt])[::2]
    elif form == "offset":
        big = np.zeros((rows, n + 3), np.float32)
        big[:, 3:] = a
        x = pr.tensor(big).to(PR[dt])[:, 3:]
    else:
        x = pr.tensor(a).to(PR[dt])
    runs = []
    for spins in (None, -1, 0):
        monkeypatch.setattr(R, "SCAN_LOOKBACK_SPINS", spins)
        runs.append(getattr(x, op)(-1).float().numpy())
        assert R.SCAN_LAST_PATH == f"lookback P={parts}", R.SCAN_LAST_PATH
    what = f"{op} {dt} rows={rows} n={n} sb={sb} {form}"
    for r in runs[1:]:
        assert (r.view(np.uint32) == runs[0].view(np.uint32)).all(), what
    assert _scratch_clean(), what
    ref = torch.tensor(a).to(TH[dt])
    want, tol, _ = _scan_want(op, ref, 1)
    if dt == "float16":
        want = np.where(np.abs(want) > 65504, np.copysign(np.inf, want), want)
    _close(runs[0], want, tol, what)


def test_lookback_nan_same_bits_whoever_computes(lookback):
    # a chunk whose total is NaN from inf + -inf or -inf · 0 (x86: 0xFFC00000) is stored canonical
    # (0x7FC00000); a waiter that computed the total itself used the raw NaN, so the later
    # chunks' NaNs differed in their sign bit from a run whose waits read the stored word
    # (fixed: the computed words are canonicalized as the stored ones are)
    a = np.ones((2, 9 * SCAN_STAGED + 3), np.float32)
    a[0, 10], a[0, 20], a[0, 30] = np.inf, -np.inf, 0.0  # (a product's NaN: -inf · 0)
    a[1, 5 * SCAN_STAGED + 1], a[1, 5 * SCAN_STAGED + 2] = -np.inf, np.inf
    x = pr.tensor(a)
    for op in ("cumsum", "cumprod"):
        lookback.setattr(R, "SCAN_LOOKBACK_SPINS", None)
        read = getattr(x, op)(1).numpy().view(np.uint32)
        lookback.setattr(R, "SCAN_LOOKBACK_SPINS", -1)
        computed = getattr(x, op)(1).numpy().view(np.uint32)
        assert R.SCAN_LAST_PATH == "lookback P=10"
        assert np.isnan(read.view(np.float32)[0, 30:]).all()
        assert (read == computed).all(), op
    assert _scratch_clean()


def test_lookback_back_to_back_shapes(rng, lookback):
    # scans of different row counts and chunk counts queued before any read share the scratch
    # one after another: each resets what it used
    shapes = [(1, 3 * SCAN_STAGED), (5, 2 * SCAN_STAGED + 1), (2, 9 * SCAN_STAGED - 1)]
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    outs = [pr.tensor(a).cumsum(1) for a in arrays]
    for a, o in zip(arrays, outs):
        b = a.astype(np.float64)
        tol = 2 * a.shape[1] * EPS32 * np.cumsum(np.abs(b), 1)
        _close(o, np.cumsum(b, 1), tol, f"cumsum {a.shape}")
    assert _scratch_clean()


def test_chunked_scan_names_its_path(rng, monkeypatch):
    # SCAN_LAST_PATH (read by scripts/scan_ab.py and the look-back tests) named the chunked
    # scan's inner scan of its chunk totals ("rows") instead of the chunked scan itself
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", 300)
    a = rng.standard_normal((3, 1001)).astype(np.float32)
    got = pr.tensor(a).cumsum(1)
    assert R.SCAN_LAST_PATH == "chunked C=300"
    b = a.astype(np.float64)
    _close(got, np.cumsum(b, 1), 2 * 1001 * EPS32 * np.cumsum(np.abs(b), 1), "chunked cumsum")


# ---- scans: gradients --------------------------------------------------------------------------
@pytest.mark.parametrize("k", range(14))
def test_scan_grad_random(k, rng, monkeypatch):
    # d(Σ g·op(view(x)))/dx through the view back to its base, against torch float64; the
    # bound: the same gradient of Σ|g|·op(|x|) (every term positive), times the rounding
    if k % 2:
        monkeypatch.setattr(R, "SCAN_LOOKBACK", True)
        monkeypatch.setattr(R, "SCAN_LOOKBACK_SB", 2)
    op = _pick(rng, ["cumsum", "cumprod", "cumprod", "cummax", "cummin", "logcumsumexp"])
    nd = int(rng.integers(1, 4))
    d = int(rng.integers(nd))
    shape = [_pick(rng, [1, 2, 3]) for _ in range(nd)]
    shape[d] = _pick(rng, [1, 2, 13, 257, 2049, 2 * SCAN_STAGED + 3])
    dt = _pick(rng, ["float32", "float32", "float16"])
    view = _pick(rng, ["contiguous", "T", "step", "expand"])
    kind = "near1" if op == "cumprod" else "normal"
    if view == "expand" and op == "cumprod":  # (x^n of one value: out of f16's range fast)
        view = "step"
    nd_ = len(shape)
    base, fn = list(shape), (lambda x: x)
    if view == "T" and nd_ >= 2:
        base[0], base[-1] = base[-1], base[0]
        fn = lambda x: x.transpose(0, -1)  # noqa: E731
    elif view == "step":
        base[d] = 2 * shape[d] + 1
        sl = tuple(slice(1, None, 2) if i == d else slice(None) for i in range(nd_))
        fn = lambda x: x[sl]  # noqa: E731
    elif view == "expand":
        k0 = (d + 1) % nd_ if nd_ > 1 else d
        base[k0] = 1
        fn = lambda x: x.expand(*shape)  # noqa: E731
    a = _values(rng, base, "float32", kind)
    if op == "cumprod" and rng.random() < 0.5:  # zeros: cumprod's own rule
        a[rng.random(a.shape) < 0.01] = 0.0
    a = torch.tensor(a).to(TH[dt]).float().numpy()
    g = rng.standard_normal(shape).astype(np.float32)
    g = torch.tensor(g).to(TH[dt]).float().numpy()
    dim = d - nd if rng.random() < 0.5 else d

    p = pr.tensor(a).to(PR[dt]).requires_grad_(True)
    y = getattr(pr, op)(fn(p), dim)
    y = y[0] if op in ("cummax", "cummin") else y
    (y * pr.tensor(g).to(PR[dt])).sum().backward()

    x = torch.tensor(a, dtype=torch.float64).requires_grad_(True)
    y = getattr(torch, op)(fn(x), dim)
    idx = y[1] if op in ("cummax", "cummin") else None
    y = y[0] if op in ("cummax", "cummin") else y
    (y * torch.tensor(g, dtype=torch.float64)).sum().backward()
    xa = torch.tensor(np.abs(a), dtype=torch.float64).requires_grad_(True)
    ga = torch.tensor(np.abs(g), dtype=torch.float64)
    if op in ("cummax", "cummin"):  # (the gradient sums g at each running extreme's index)
        z = torch.zeros(shape, dtype=torch.float64).scatter_add(dim % nd, idx, ga)
        fn(xa).backward(z)
    elif op == "logcumsumexp":  # Σ_j |g_j|·exp(x_i - y_j): the gradient of Σ |g_j|·y_j
        xa = x.detach().clone().requires_grad_(True)
        (ga * torch.logcumsumexp(fn(xa), dim)).sum().backward()
    else:
        (ga * getattr(torch, op)(fn(xa), dim)).sum().backward()
    n = shape[d]
    rel = 4 * n * EPS32 + 4 * EPS_OUT[dt]
    if op == "logcumsumexp":  # (the output's rounding in exp(x - y): |y|·eps)
        ymax = float(np.abs(y.detach().numpy()).max()) + float(np.abs(a).max())
        rel += 4 * (math.ceil(math.log2(max(n, 2))) + 1) * EPS32 * (1 + ymax)
        rel += EPS_OUT[dt] * ymax
    want = x.grad.numpy()
    if dt == "float16":
        want = np.where(np.abs(want) > 65504, np.copysign(np.inf, want), want)
    tol = rel * xa.grad.numpy() + TINY_OUT[dt]
    _close(p.grad, want, tol, f"d {op} {dt} {tuple(shape)} dim={dim} {view}")


@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp", "cummax"])
def test_scan_double_backward(op, rng):
    # second derivatives against torch float64: logcumsumexp's backward used the saved output
    # (an alias without a graph), so its second derivative missed the path through the output
    # ([0.134, 0.073, -0.440] where torch's is [0.098, 0.110, -0.207]; fixed: recomputed while a
    # double backward is recorded)
    a = _values(rng, (3, 13), "float32", "near1" if op == "cumprod" else "normal")
    if op == "cumprod":
        a[1, 4] = 0.0
    g, h = (rng.standard_normal((3, 13)).astype(np.float32) for _ in range(2))

    def run(lib, grad, make):
        x = make(a).requires_grad_(True)
        y = getattr(lib, op)(x, 1)
        y = y[0] if op == "cummax" else y
        (gx,) = grad((y * make(g)).sum(), x, create_graph=True)
        if op in ("cumsum", "cummax"):  # (linear in x: no second derivative, in torch too)
            return gx, None
        (gxx,) = grad((gx * make(h)).sum(), x)
        return gx, gxx

    got = run(pr, pr.autograd.grad, pr.tensor)
    want = run(torch, torch.autograd.grad, lambda v: torch.tensor(v, dtype=torch.float64))
    for gp, gt in zip(got, want):
        if gt is None:
            continue
        gt = gt.detach().numpy()
        _close(gp, gt, 64 * 13 * EPS32 * (np.abs(gt).max() + 1), f"{op} second derivative")


# ---- out= and dtype= ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "sum", "prod"])
def test_out_sets_the_dtype(op):
    # torch's out= variants of sum, prod, cumsum and cumprod take their dtype= from out: an int
    # out truncates each element first, a float16 out rounds each element first (pyrite refused
    # the int out - "result type Float can't be cast" - and rounded only the result)
    a = np.array([[1.7, -2.6, 3.2], [0.5, 0.25, -1.5]], np.float32)
    for odt in ("int32", "float16"):
        po, to = pr.empty(0, dtype=PR[odt]), torch.empty(0, dtype=TH[odt])
        assert getattr(pr, op)(pr.tensor(a), 1, out=po) is po
        getattr(torch, op)(torch.tensor(a), 1, out=to)
        assert po.dtype == PR[odt]
        if op == "prod" and odt == "float16":  # (torch multiplies in float16: pyrite in f32)
            continue
        np.testing.assert_array_equal(_f64(po), _f64(to), err_msg=f"{op} out={odt}")


def test_scan_bool_dtype_refused():
    # torch: "cumsum_out_cpu" not implemented for 'Bool'; pyrite gave a running any
    x = pr.tensor([[1.0, 0.0, 2.0]])
    for op in ("cumsum", "cumprod"):
        with pytest.raises(NotImplementedError):
            getattr(torch, op)(torch.tensor([[1.0, 0.0, 2.0]]), 1, dtype=torch.bool)
        with pytest.raises(TypeError, match="bool"):
            getattr(x, op)(1, dtype=pr.bool)
        with pytest.raises(TypeError, match="bool"):
            getattr(pr, op)(x, 1, out=pr.empty(1, 3, dtype=pr.bool))


# ---- reductions --------------------------------------------------------------------------------
def _reduce_want(op, t, dim, keepdim, dims, c, p):
    """torch's float64 results and tolerances."""
    x = t.to(torch.float64)
    n = max(1, math.prod(t.shape[d] for d in dims))
    kd = {"dim": dim, "keepdim": keepdim}
    e = EPS_OUT.get(str(t.dtype).removeprefix("torch."), 0.0)

    def s(v):  # Σ|v| over the reduced dims (infinities left out: the want is inf there)
        return torch.sum(torch.nan_to_num(v.abs(), nan=0.0, posinf=0.0), **kd)

    if op in ("amax", "amin"):
        return [_f64(getattr(torch, op)(t, **kd))], [0.0]
    if op in ("argmax", "argmin"):
        return [_f64(getattr(torch, op)(t, dim[0], keepdim))], [0.0]
    if not t.dtype.is_floating_point:  # (integer sums and products: exact)
        return [_f64(getattr(torch, op)(t, **kd) if op == "sum" else torch.prod(t, dim[0], keepdim))], [0.0]  # fmt: skip
    if op == "sum":
        w = torch.sum(x, **kd)
        return [w], [2 * n * EPS32 * s(x) + e * w.abs()]
    if op == "mean":
        w = torch.mean(x, **kd)
        return [w], [2 * n * EPS32 * s(x) / n + (e + EPS32) * w.abs()]
    if op == "prod":
        w = torch.prod(x, dim[0], keepdim)
        return [w], [(2 * n * EPS32 + e) * w.abs()]
    if op in ("var", "std"):
        v = torch.var(x, correction=c, **kd)
        m = torch.mean(x, dim=dim, keepdim=True)
        tv = 4 * n * EPS32 * s((x - m).abs() * x.abs()) / max(n - c, 1) + (e + EPS32) * v.abs()
        if op == "var":
            return [v], [tv]
        sd = torch.sqrt(v)
        ts = torch.minimum(torch.sqrt(tv), torch.where(sd > 0, tv / (2 * sd), math.inf))
        return [sd], [ts + (e + EPS32) * sd]
    if op == "logsumexp":  # d lse / d x_i = softmax_i: exp's error eps·|x_i|, the sum's n·eps
        w = torch.logsumexp(x, **kd)
        mx = torch.amax(torch.nan_to_num(x.abs(), nan=0.0, posinf=0.0), **kd)
        return [w], [4 * (n + mx) * EPS32 + (e + EPS32) * w.abs()]
    # norm: (Σ|x|^p)^(1/p); |x|^p relative to eps·(1 + |p·ln|x||), then the root's 1/p
    w = torch.linalg.vector_norm(x, ord=p, **kd)
    if p in (math.inf, -math.inf, 0):
        return [w], [e * w.abs()]
    lg = torch.where(x != 0, (p * torch.log(x.abs())).abs(), 0.0)
    lg = torch.amax(torch.nan_to_num(lg, posinf=0.0), **kd)
    return [w], [(4 * (n * EPS32 + EPS32 * (1 + lg)) / abs(p) + EPS32 + e) * w.abs()]


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")  # (correction >= n: both warn)
@pytest.mark.parametrize(
    "path", [{}, {"FUSED": True}, {"WIDE": True}, {"FORCE_SPLIT": 3}, {"FORCE_MODE": "row"}]
)
@pytest.mark.parametrize("k", range(7))
def test_reduce_random(k, path, rng, monkeypatch):
    for name, value in path.items():
        monkeypatch.setattr(R, name, value)
    op = _pick(rng, ["sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "var", "std",
                     "logsumexp", "norm"])  # fmt: skip
    nd = int(rng.integers(1, 5))
    dims = sorted(int(v) for v in rng.choice(nd, int(rng.integers(1, nd + 1)), replace=False))
    if op in ("prod", "argmax", "argmin"):
        dims = dims[:1]
    shape = [_pick(rng, [1, 2, 3]) for _ in range(nd)]
    if rng.random() < 0.5:  # long rows (>= 16384 elements: the split / fused / wide kernels)
        shape[dims[-1]] = _pick(rng, [16384, 16411, 20000])
    else:  # many rows
        shape[dims[-1]] = _pick(rng, [1, 7, 257, 2049])
        kept = [i for i in range(nd) if i not in dims]
        if kept:
            shape[kept[0]] = _pick(rng, [257, 1031])
    while math.prod(shape) > 60_000:
        i = int(np.argmax(shape))
        shape[i] = max(1, shape[i] // 2)
    floats = ["float32", "float32", "float16", "bfloat16"]
    float_only = op in ("mean", "var", "std", "logsumexp", "norm")
    dt = _pick(rng, floats if float_only else floats + ["int32", "uint8"])
    view = _pick(rng, ["contiguous", "T", "step", "expand"])
    special = _pick(rng, [0.0, 0.0, 0.001]) if dt in floats else 0.0
    if special and op not in ("amax", "amin", "argmax", "argmin"):
        special = 0.0 if op == "prod" else special
    p, t, text = _pair(rng, shape, dt, view, "near1" if op == "prod" else "normal", special)
    keepdim = bool(rng.random() < 0.5)
    dim = tuple(d - nd if rng.random() < 0.5 else d for d in rng.permutation(dims))
    c, pw = _pick(rng, [0, 1, 2]), _pick(rng, [2.0, 1.0, 3.0, 0.5, math.inf, 0.0])
    what = f"{op} {dt} {tuple(shape)} dim={dim} keepdim={keepdim} {text} {path}"
    if op in ("prod", "argmax", "argmin"):
        dim = dim[0]
    if op in ("var", "std"):
        got = getattr(pr, op)(p, dim, correction=c, keepdim=keepdim)
    elif op == "norm":
        got = pr.linalg.vector_norm(p, ord=pw, dim=dim, keepdim=keepdim)
    else:
        got = getattr(pr, op)(p, dim, keepdim=keepdim)
    wants, tols = _reduce_want(op, t, dim if isinstance(dim, tuple) else (dim,), keepdim,
                               dims, c, pw)  # fmt: skip
    want, tol = wants[0], tols[0]
    want = _f64(want) if isinstance(want, torch.Tensor) else want
    tol = _f64(tol) if isinstance(tol, torch.Tensor) else tol
    if op in ("sum", "prod") and dt == "float16":  # (float16's range: inf in torch too)
        want = np.where(np.abs(want) > 65504, np.copysign(np.inf, want), want)
    assert tuple(got.shape) == want.shape, what
    _close(got, want, tol, what)
