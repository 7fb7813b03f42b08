"""Randomized differential hunt (session 40) of sorting, searching and indexing ops against torch
2.13 CPU: sort / argsort / msort / topk / kthvalue / median / nanmedian / mode, unique and
unique_consecutive, searchsorted / bucketize, histc / histogram / bincount, gather / scatter /
scatter_add / scatter_reduce, index_select / index_add / index_copy / index_fill / index_reduce /
index_put_, masked_fill / masked_scatter / masked_select, take / take_along_dim / put_, nonzero,
advanced indexing (ints, slices, None, Ellipsis, bool and integer tensors mixed), their out=
arguments, their gradients and their refusals of bad indices.

Inputs: awkward sizes (0, 1, primes), 0-d to 3-d, random (negative) dims, transposed / stepped
views, float32 / float16 / bfloat16 / int32 / uint8 / int8 / bool, NaN / +-inf / -0.0, ties.
Each case draws from the `rng` fixture (seeded from the test's id, printed on failure).
Integer and index results are compared exactly; so are float results that only move values
(sorts, gathers, scatters without arithmetic). Arithmetic results are compared within their
rounding: a scatter-add of m terms in f32 within m·2⁻²⁴·Σ|terms| of float64's.
Where torch's answer among equal values is its algorithm's artefact (README, "Differences from
PyTorch"), the values are compared exactly and the indices checked to select those values.

Found and fixed by it: take_along_dim refusing a negative index along a dim (torch 2.13 takes it
from the end) and taking one with dim=None (torch's flattened gather refuses it); searchsorted
taking a sorter of another shape than the boundaries, naming gather in a bad sorter's refusal,
and raising ValueError for a bad or contradicting `side` (torch: RuntimeError); out= refused
by msort, take_along_dim, scatter, scatter_add, scatter_reduce, index_add, index_copy and
index_reduce; histc of data with an inf or NaN (min == max) counting nothing or raising an index
error, where torch refuses the range as not finite; index_add of an integer tensor scaling by a
float alpha (torch truncates it: 1.5 adds once); bincount of bfloat16 weights giving bfloat16
(torch: float64, float32 here)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")

EPS32 = 2.0**-24
PR = {"float32": pr.float32, "float16": pr.float16, "bfloat16": pr.bfloat16, "int32": pr.int32,
      "uint8": pr.uint8, "int8": pr.int8, "bool": pr.bool}  # fmt: skip
TH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
      "int32": torch.int32, "uint8": torch.uint8, "int8": torch.int8, "bool": torch.bool}  # fmt: skip
FLOATS = ("float32", "float16", "bfloat16")
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)


# ---- inputs ------------------------------------------------------------------------------------
def _pick(rng, seq):
    return seq[int(rng.integers(0, len(seq)))]


def _shape(rng, lo=0, hi=3, sizes=(0, 1, 2, 3, 5, 7, 13)):
    return tuple(int(_pick(rng, sizes)) for _ in range(int(rng.integers(lo, hi + 1))))


def _values(rng, shape, dt, ties=False, special=0.0):
    """float32 values of `dt`'s range (each side converts them): small integers when `ties`."""
    if dt == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dt in ("int32", "uint8", "int8"):
        lo, hi = {"int32": (-50, 50), "uint8": (0, 255), "int8": (-100, 100)}[dt]
        if ties:
            lo, hi = max(lo, -3), min(hi, 3)
        return np.asarray(rng.integers(lo, hi + 1, shape), np.float32)
    a = np.asarray(rng.integers(-3, 4, shape) if ties else 3 * rng.standard_normal(shape))
    a = a.astype(np.float32)
    if special and a.size:
        m = rng.random(shape) < special
        a[m] = rng.choice(SPECIALS, int(m.sum()))
    return a


def _pair(a, dt):
    """(pyrite tensor, torch tensor) of numpy values `a` in dtype `dt`."""
    return pr.tensor(a).to(PR[dt]), torch.tensor(a).to(TH[dt])


def _view(rng, p, t):
    """The same random view of both: transposed, stepped or as is."""
    kind = _pick(rng, ("T", "step", "none"))
    if kind == "T" and p.ndim >= 2:
        return p.transpose(0, -1), t.transpose(0, -1)
    if kind == "step" and p.ndim >= 1:
        return p[::2], t[::2]
    return p, t


def _np(x):
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return (
            x.numpy() if x.dtype in (torch.bool, torch.int64, torch.int32) else x.double().numpy()
        )
    x = x.detach()
    return x.numpy() if x.dtype in (pr.bool, pr.int32) else x.float().numpy().astype(np.float64)


def _same(p, t, what, signed_zero=True):
    """Exact equality: shape, values (NaN where NaN), and the sign of zeros if `signed_zero`."""
    a, b = _np(p), _np(t)
    assert a.shape == b.shape, (what, a.shape, b.shape)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.array_equal(a64, b64, equal_nan=True), (what, a, b)
    if signed_zero:  # (a NaN's sign means nothing)
        num = ~np.isnan(b64)
        assert np.array_equal(np.signbit(a64[num]), np.signbit(b64[num])), (what, "zero signs")


def _both(fp, ft):
    """(pyrite's result or exception, torch's result or exception)."""
    out = []
    for f in (fp, ft):
        try:
            out.append(f())
        except Exception as e:  # noqa: BLE001 (the exception is the result compared)
            out.append(e)
    return out


# ---- sort / argsort / msort / topk ------------------------------------------------------------
def test_sort_stable_matches_torch_values_and_indices(rng):
    """A stable sort's values and indices are fully determined: both equal torch's, for every
    dtype, NaN (largest), -0.0 before 0.0 only by position, descending or not, any dim."""
    for case in range(70):
        dt = _pick(rng, list(PR))
        shape = _shape(rng)
        if case % 13 == 0:
            shape = (2, int(_pick(rng, (2047, 2049, 4100))))  # rows past one workgroup's sort
        p, t = _pair(_values(rng, shape, dt, ties=rng.random() < 0.5, special=0.2), dt)
        p, t = _view(rng, p, t)
        nd = max(p.ndim, 1)
        d = int(rng.integers(-nd, nd))
        desc = bool(rng.random() < 0.5)
        pv, pi = pr.sort(p, dim=d, descending=desc, stable=True)
        tv, ti = torch.sort(t, dim=d, descending=desc, stable=True)
        what = f"sort {dt} {tuple(t.shape)} dim={d} desc={desc}"
        _same(pv, tv, what)
        _same(pi, ti, what + " indices")
        _same(pr.argsort(p, d, descending=desc, stable=True), ti, what + " argsort")
        if dt != "bool":
            _same(pr.msort(p), torch.msort(t), what + " msort", signed_zero=False)


def test_topk_values_match_and_indices_select_them(rng):
    """topk's values equal torch's (ties, NaN as largest, sorted or as a set when unsorted); its
    indices are distinct and select those values (torch's order among ties is its sort's)."""
    for _ in range(60):
        dt = _pick(rng, ("float32", "float16", "int32", "uint8"))
        shape = _shape(rng, 1, 3, (1, 2, 3, 5, 7, 13, 40))
        p, t = _pair(_values(rng, shape, dt, ties=True, special=0.15), dt)
        p, t = _view(rng, p, t)
        d = int(rng.integers(-p.ndim, p.ndim))
        k = int(rng.integers(0, p.shape[d] + 1))
        largest, srt = bool(rng.random() < 0.5), bool(rng.random() < 0.7)
        pv, pi = pr.topk(p, k, d, largest=largest, sorted=srt)
        tv, ti = torch.topk(t, k, d, largest=largest, sorted=srt)
        what = f"topk {dt} {tuple(t.shape)} k={k} dim={d} largest={largest} sorted={srt}"
        a, b = _np(pv), _np(tv)
        if not srt:
            a, b = np.sort(a, axis=d), np.sort(b, axis=d)
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), (what, a, b)
        src = _np(t)
        idx = _np(pi).astype(np.int64)
        picked = np.take_along_axis(src, idx, axis=d)
        assert np.array_equal(picked, _np(pv), equal_nan=True), what
        srt_idx = np.sort(idx, axis=d)
        assert not (np.diff(srt_idx, axis=d) == 0).any(), (what, "repeated index")


def test_kthvalue_median_mode_values_and_indices(rng):
    """kthvalue / median / nanmedian / mode along a dim: values equal torch's (NaN rules
    included); median's and nanmedian's indices equal torch's, kthvalue's and mode's select the
    value (torch's among ties are its quickselect's / sort's). keepdim and negative dims."""
    for _ in range(50):
        dt = _pick(rng, ("float32", "float16", "bfloat16", "int32", "uint8"))
        shape = _shape(rng, 1, 3, (1, 2, 3, 5, 7, 13))
        p, t = _pair(_values(rng, shape, dt, ties=True, special=0.2), dt)
        p, t = _view(rng, p, t)
        d = int(rng.integers(-p.ndim, p.ndim))
        k = int(rng.integers(1, p.shape[d] + 1))
        keep = bool(rng.random() < 0.5)
        what = f"{dt} {tuple(t.shape)} dim={d} k={k} keepdim={keep}"
        src = _np(t)
        for name in ("median", "nanmedian"):
            pv, pi = getattr(pr, name)(p, d, keepdim=keep)
            tv, ti = getattr(torch, name)(t, d, keepdim=keep)
            _same(pv, tv, f"{name} {what}", signed_zero=False)
            _same(pi, ti, f"{name} {what} indices")
        for name, pres, tres in (
            ("kthvalue", pr.kthvalue(p, k, d, keepdim=keep), torch.kthvalue(t, k, d, keepdim=keep)),
            ("mode", pr.mode(p, d, keepdim=keep), torch.mode(t, d, keepdim=keep)),
        ):
            if name == "mode" and dt in FLOATS and np.isnan(src).any():
                continue  # (README: mode counts NaNs once)
            _same(pres.values, tres.values, f"{name} {what}", signed_zero=False)
            idx = _np(pres.indices).astype(np.int64)
            assert idx.shape == _np(tres.indices).shape, (name, what)
            idx = idx if keep else np.expand_dims(idx, d)
            picked = np.take_along_axis(src, idx, axis=d)
            want = _np(tres.values) if keep else np.expand_dims(_np(tres.values), d)
            assert np.array_equal(picked, want, equal_nan=True), (name, what)
        _same(pr.median(p), torch.median(t), f"median all {what}", signed_zero=False)
        _same(pr.nanmedian(p), torch.nanmedian(t), f"nanmedian all {what}", signed_zero=False)


# ---- searchsorted / bucketize -----------------------------------------------------------------
def test_searchsorted_bucketize_match_torch(rng):
    """Positions in sorted boundaries (1-d or batched rows), left/right/side=, a sorter, NaN and
    inf queries and boundaries, int and float mixed, 0-d and empty queries: equal torch's."""
    for _ in range(50):
        dt = _pick(rng, ("float32", "int32", "float16"))
        n = int(_pick(rng, (0, 1, 2, 5, 17, 100))) if rng.random() < 0.8 else 1
        batched = rng.random() < 0.4 and n > 0
        lead = (int(rng.integers(1, 4)),) if batched else ()
        b = np.sort(_values(rng, lead + (n,), dt, ties=True, special=0.1), axis=-1)
        bp, bt = _pair(b, dt)
        qshape = lead + (int(rng.integers(0, 6)),) if batched else _shape(rng, 0, 2)
        qp, qt = _pair(_values(rng, qshape, dt, ties=True, special=0.2), dt)
        right = bool(rng.random() < 0.5)
        what = f"{dt} boundaries {b.shape} queries {qshape} right={right}"
        _same(pr.searchsorted(bp, qp, right=right), torch.searchsorted(bt, qt, right=right), what)
        side = "right" if right else "left"
        _same(pr.searchsorted(bp, qp, side=side), torch.searchsorted(bt, qt, side=side), what)
        if not batched:
            _same(pr.bucketize(qp, bp, right=right), torch.bucketize(qt, bt, right=right), what)
            s = float(_values(rng, (), "float32", ties=True))
            _same(pr.searchsorted(bp, s), torch.searchsorted(bt, s), what + " scalar")
        perm = np.argsort(rng.random(b.shape), axis=-1)
        shuffled = np.take_along_axis(b, perm, axis=-1)
        sp, st = _pair(shuffled, dt)
        order = np.argsort(shuffled, axis=-1, kind="stable")
        _same(
            pr.searchsorted(sp, qp, right=right, sorter=pr.tensor(order)),
            torch.searchsorted(st, qt, right=right, sorter=torch.tensor(order)),
            what + " sorter",
        )


def test_searchsorted_refusals_match_torch(rng):
    """torch's refusals, with its error classes: a sorter of another shape, or an index out of
    range (negative too), a non-integer sorter, a side other than left/right, side='left' with
    right=True. Before the fix pyrite took the short sorter and raised ValueError for side."""
    b = np.sort(rng.standard_normal(5).astype(np.float32))
    q = rng.standard_normal(3).astype(np.float32)
    cases = {
        "sorter shape": dict(sorter=np.array([0, 1, 2, 3])),
        "sorter 2-d": dict(sorter=np.arange(5)[None]),
        "sorter big": dict(sorter=np.array([0, 1, 2, 3, 5])),
        "sorter negative": dict(sorter=np.array([0, 1, 2, 3, -1])),
        "sorter float": dict(sorter=np.arange(5, dtype=np.float32)),
        "side": dict(side="middle"),
        "side and right": dict(side="left", right=True),
    }
    for name, kw in cases.items():
        pk = {k: pr.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tk = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        got, want = _both(
            lambda pk=pk: pr.searchsorted(pr.tensor(b), pr.tensor(q), **pk),
            lambda tk=tk: torch.searchsorted(torch.tensor(b), torch.tensor(q), **tk),
        )
        assert isinstance(want, RuntimeError), (name, want)
        # (README: pyrite's dtype refusals are TypeError, its shape ones ShapeError)
        ok = (TypeError,) if "float" in name else (RuntimeError, ValueError)
        assert isinstance(got, ok) and not isinstance(got, AssertionError), (name, got)
        assert "searchsorted" in str(got), (name, got)
        if "sorter" in name and "float" not in name:
            assert "sorter" in str(got), (name, got)
        if name.startswith("side"):
            assert isinstance(got, RuntimeError), (name, got)


# ---- unique / unique_consecutive --------------------------------------------------------------
def test_unique_and_unique_consecutive_match_torch(rng):
    """Values, inverse and counts, flat and along a dim (negative too), NaN (each its own
    value), -0.0 == 0.0, bool / int / half dtypes, 0-d and empty inputs."""
    for _ in range(40):
        dt = _pick(rng, ("float32", "int32", "bool", "uint8", "float16"))
        shape = _shape(rng, 0, 3, (0, 1, 2, 3, 5, 7))
        nan = dt in FLOATS and rng.random() < 0.4
        p, t = _pair(_values(rng, shape, dt, ties=True, special=0.2 if nan else 0.0), dt)
        p, t = _view(rng, p, t)
        what = f"{dt} {tuple(t.shape)}"
        kw = dict(return_inverse=True, return_counts=True)
        for name in ("unique", "unique_consecutive"):
            got, want = getattr(pr, name)(p, **kw), getattr(torch, name)(t, **kw)
            for g, w, part in zip(got, want, ("values", "inverse", "counts")):
                _same(g, w, f"{name} {what} {part}", signed_zero=False)
            if p.ndim == 0 or (nan and name == "unique"):
                continue  # (README: unique(dim=) orders NaN-holding slices its own way)
            d = int(rng.integers(-p.ndim, p.ndim))
            got, want = _both(
                lambda: getattr(pr, name)(p, dim=d, **kw),
                lambda: getattr(torch, name)(t, dim=d, **kw),
            )
            if isinstance(want, Exception):
                assert isinstance(got, RuntimeError), (name, what, d, got, want)
                continue
            for g, w, part in zip(got, want, ("values", "inverse", "counts")):
                _same(g, w, f"{name} {what} dim={d} {part}", signed_zero=False)


# ---- histc / histogram / bincount -------------------------------------------------------------
def test_histc_histogram_bincount_match_torch(rng):
    """Counts are exact (histc's and histogram's bins of torch's edges: the edges within one
    ULP of the range's ends, README); weighted sums within m·2⁻²⁴·Σ|w|; bincount's minlength
    and weights, int and float weights."""
    for _ in range(25):
        n = int(_pick(rng, (0, 1, 2, 7, 100, 500)))
        x = _values(rng, (n,), "float32", special=0.05 if rng.random() < 0.5 else 0.0)
        xp, xt = pr.tensor(x), torch.tensor(x)
        bins = int(_pick(rng, (1, 3, 10, 64)))
        lo, hi = sorted(float(v) for v in rng.standard_normal(2))
        for mn, mx in ((lo, hi), (-1.0, 1.0), (2.0, 2.0)):
            # (min == max: the data's range; torch refuses one not finite, as pyrite now)
            got, want = _both(
                lambda: pr.histc(xp, bins, mn, mx), lambda: torch.histc(xt, bins, mn, mx)
            )
            if isinstance(want, RuntimeError):
                assert isinstance(got, RuntimeError) and "not finite" in str(got), (got, want)
                continue
            _same(got, want, f"histc {n} {bins} [{mn}, {mx}]")
        finite = x[np.isfinite(x)]
        fp, ft = pr.tensor(finite), torch.tensor(finite)
        w = rng.standard_normal(finite.size).astype(np.float32)
        for kw in (dict(), dict(range=(lo, hi)), dict(range=(-2.0, 2.0), weight=w, density=True)):
            pk = {k: pr.tensor(v) if k == "weight" else v for k, v in kw.items()}
            tk = {k: torch.tensor(v) if k == "weight" else v for k, v in kw.items()}
            ph, pe = pr.histogram(fp, bins, **pk)
            th, te = torch.histogram(ft, bins, **tk)
            e, f = _np(pe), _np(te)
            assert e.shape == f.shape
            assert (
                np.abs(e - f) <= np.spacing(np.abs(f).max(initial=1.0).astype(np.float32))
            ).all()
            if "weight" in kw:
                if finite.size == 0 or not np.isfinite(_np(th)).all():
                    continue
                tol = 4 * finite.size * EPS32 * np.abs(_np(th)).max(initial=1.0)
                np.testing.assert_allclose(_np(ph), _np(th), rtol=1e-5, atol=tol)
            else:
                _same(ph, th, f"histogram {n} {bins} {kw}")
        idx = rng.integers(0, int(rng.integers(1, 12)), n)
        ml = int(rng.integers(0, 15))
        ip, it = pr.tensor(idx), torch.tensor(idx)
        _same(pr.bincount(ip, minlength=ml), torch.bincount(it, minlength=ml), "bincount")
        wi = rng.integers(-5, 5, n).astype(np.int32)
        _same(pr.bincount(ip, pr.tensor(wi)), torch.bincount(it, torch.tensor(wi)), "bincount w")
        wf = rng.standard_normal(n).astype(np.float32)
        got = _np(pr.bincount(ip, pr.tensor(wf), minlength=ml))
        want = torch.bincount(it, torch.tensor(wf, dtype=torch.float64), minlength=ml).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=4 * n * EPS32 * np.abs(wf).sum() + 1e-30)


def test_bincount_weight_dtypes_as_torch(rng):
    """bincount's weighted counts: torch sums float32 weights in float32 and any other weights
    (half, bfloat16, integer, bool) in float64, pyrite's float32 (README) — bfloat16 weights
    gave a bfloat16 result before (the bf16 fallback narrowed it). Values exact (small sums)."""
    n = 40
    idx = rng.integers(0, 6, n)
    for dt in PR:
        w = _values(rng, (n,), dt, ties=True)
        wp, wt = _pair(w, dt)
        for ip, it in ((pr.tensor(idx), torch.tensor(idx)), _pair(idx.astype(np.float32), "uint8")):
            got, want = pr.bincount(ip, wp), torch.bincount(it, wt)
            assert want.dtype in (torch.float32, torch.float64), (dt, want.dtype)
            assert got.dtype is pr.float32, (dt, got.dtype)
            _same(got, want, f"bincount weights {dt}")


# ---- gather / scatter family ------------------------------------------------------------------
def _dim_index(rng, shape, d, *, negative=False, bigger_src=True):
    """An index for gather/scatter along d of a tensor of `shape`: no larger than shape outside
    d, any length along d, and a source at least the index's size."""
    ishape = tuple(
        int(rng.integers(0, 6)) if i == d % len(shape) else int(rng.integers(0, s + 1))
        for i, s in enumerate(shape)
    )
    n = shape[d]
    idx = rng.integers(-n if negative else 0, n, ishape) if n else np.zeros(ishape, np.int64)
    sshape = tuple(s + int(rng.integers(0, 2)) if bigger_src else s for s in ishape)
    return idx, sshape


def test_gather_scatter_scatter_reduce_match_torch(rng):
    """gather, scatter (src, value=, reduce=), scatter_add and scatter_reduce (every reduce,
    include_self or not) with duplicate indices, a source larger than the index, float32 /
    float16 / int32 / uint8; exact where torch's answer is (integer data: sums and products of
    small integers are exact in every order), NaN / inf for amax / amin."""
    for _ in range(40):
        dt = _pick(rng, ("float32", "float16", "int32", "uint8"))
        shape = _shape(rng, 1, 3, (1, 2, 3, 5, 7))
        d = int(rng.integers(-len(shape), len(shape)))
        idx, sshape = _dim_index(rng, shape, d)
        p, t = _pair(_values(rng, shape, dt, ties=True), dt)
        sp, st = _pair(_values(rng, sshape, dt, ties=True), dt)
        ip, it = pr.tensor(idx), torch.tensor(idx)
        what = f"{dt} {shape} dim={d} index {idx.shape}"
        _same(pr.gather(p, d, ip), torch.gather(t, d, it), "gather " + what)
        _same(pr.scatter_add(p, d, ip, sp), torch.scatter_add(t, d, it, st), "scatter_add " + what)
        _same(pr.scatter(p, d, ip, 2, reduce="add"), torch.scatter(t, d, it, 2, reduce="add"), what)
        _same(
            pr.scatter(p, d, ip, sp, reduce="multiply"),
            torch.scatter(t, d, it, st, reduce="multiply"),
            "scatter multiply " + what,
        )
        for red in ("sum", "prod", "mean", "amax", "amin"):
            for inc in (True, False):
                _same(
                    pr.scatter_reduce(p, d, ip, sp, red, include_self=inc),
                    torch.scatter_reduce(t, d, it, st, red, include_self=inc),
                    f"scatter_reduce {red} include_self={inc} {what}",
                )
        # unique positions along d: scatter's result is defined
        n = shape[d]
        perm = np.argsort(
            rng.random(idx.shape[: d % len(shape)] + (n,) + idx.shape[d % len(shape) + 1 :]), axis=d
        )
        uidx = np.take(perm, range(min(n, idx.shape[d])), axis=d)
        _same(
            pr.scatter(p, d, pr.tensor(uidx), sp),
            torch.scatter(t, d, torch.tensor(uidx), st),
            "scatter " + what,
        )
    # NaN / inf / signed zeros meeting in amax / amin: values as torch's (README: a zero's sign)
    for _ in range(20):
        a, src = rng.choice(SPECIALS[:3], (3, 4)), rng.choice(SPECIALS, (3, 6))
        idx = rng.integers(0, 4, (3, 6))
        for red in ("amax", "amin", "sum", "prod", "mean"):
            for inc in (True, False):
                got = pr.scatter_reduce(
                    pr.tensor(a), 1, pr.tensor(idx), pr.tensor(src), red, include_self=inc
                )
                want = torch.scatter_reduce(
                    torch.tensor(a), 1, torch.tensor(idx), torch.tensor(src), red, include_self=inc
                )
                _same(got, want, f"scatter_reduce specials {red} {inc}", signed_zero=False)


def test_index_ops_match_torch(rng):
    """index_select (negative indices refused as torch), index_add (alpha, a float one
    truncated for int32 as torch's, duplicates),
    index_copy (distinct indices), index_fill (negative indices, 0-d tensor value),
    index_reduce (every reduce, include_self or not) on every dtype they take, any dim."""
    for _ in range(35):
        dt = _pick(rng, ("float32", "int32", "bool", "float16", "uint8"))
        shape = _shape(rng, 1, 3, (1, 2, 3, 5, 7))
        d = int(rng.integers(-len(shape), len(shape)))
        n = shape[d]
        p, t = _pair(_values(rng, shape, dt, ties=True), dt)
        p, t = _view(rng, p, t)
        shape = tuple(t.shape)
        n = shape[d]
        k = int(rng.integers(0, 7))
        idx = rng.integers(0, n, k) if n else np.zeros(0, np.int64)
        neg = rng.integers(-n, n, k) if n else idx
        sshape = list(shape)
        sshape[d] = k
        sp, st = _pair(_values(rng, tuple(sshape), dt, ties=True), dt)
        ip, it = pr.tensor(idx), torch.tensor(idx)
        what = f"{dt} {shape} dim={d} index {idx.tolist()}"
        _same(pr.index_select(p, d, ip), torch.index_select(t, d, it), "index_select " + what)
        _same(
            pr.index_fill(p, d, pr.tensor(neg), 1),
            torch.index_fill(t, d, torch.tensor(neg), 1),
            "index_fill " + what,
        )
        vp, vt = _pair(np.array(2, np.float32), dt)
        _same(pr.index_fill(p, d, ip, vp), torch.index_fill(t, d, it, vt), "index_fill 0-d " + what)
        u = rng.permutation(n)[: min(n, k)]
        ushape = list(shape)
        ushape[d] = len(u)
        up, ut = _pair(_values(rng, tuple(ushape), dt), dt)
        _same(
            pr.index_copy(p, d, pr.tensor(u), up),
            torch.index_copy(t, d, torch.tensor(u), ut),
            "index_copy " + what,
        )
        if dt == "bool":
            continue
        # (an integer tensor takes a float alpha truncated, as torch: 1.5 adds once)
        alpha = {"int32": _pick(rng, (2, 1.5, -1.7)), "float32": _pick(rng, (2, -0.5))}.get(dt, 1)
        _same(
            pr.index_add(p, d, ip, sp, alpha=alpha),
            torch.index_add(t, d, it, st, alpha=alpha),
            "index_add " + what,
        )
        for red in ("prod", "mean", "amax", "amin"):
            for inc in (True, False):
                got, want = _both(
                    lambda: pr.index_reduce(p, d, ip, sp, red, include_self=inc),
                    lambda: torch.index_reduce(t, d, it, st, red, include_self=inc),
                )
                if isinstance(want, RuntimeError) and "INTERNAL ASSERT" in str(want):
                    continue  # (torch 2.13's own bug: uint8 "mean")
                _same(got, want, f"index_reduce {red} {inc} {what}")


def test_masked_take_put_nonzero_match_torch(rng):
    """masked_fill / masked_select / masked_scatter with broadcast masks, take (negative
    indices), take_along_dim, put_ / put (accumulate with duplicates), nonzero (as_tuple),
    argwhere, count_nonzero: 0-d and empty inputs, every dtype, non-contiguous views."""
    for _ in range(35):
        dt = _pick(rng, list(PR))
        shape = _shape(rng)
        p, t = _pair(_values(rng, shape, dt, ties=True, special=0.1), dt)
        p, t = _view(rng, p, t)
        shape = tuple(t.shape)
        m = rng.random(shape[-1:] if shape and rng.random() < 0.3 else shape) < 0.5
        mp, mt = pr.tensor(m), torch.tensor(m)
        what = f"{dt} {shape}"
        _same(pr.masked_fill(p, mp, 1), torch.masked_fill(t, mt, 1), "masked_fill " + what)
        _same(pr.masked_select(p, mp), torch.masked_select(t, mt), "masked_select " + what)
        n = int(np.prod(shape))
        sp, st = _pair(_values(rng, (n + 2,), dt), dt)
        _same(
            pr.masked_scatter(p, mp, sp), torch.masked_scatter(t, mt, st), "masked_scatter " + what
        )
        _same(pr.nonzero(p), torch.nonzero(t), "nonzero " + what)
        for g, w in zip(pr.nonzero(p, as_tuple=True), torch.nonzero(t, as_tuple=True)):
            _same(g, w, "nonzero as_tuple " + what)
        _same(pr.argwhere(p), torch.argwhere(t), "argwhere " + what)
        _same(pr.count_nonzero(p), torch.count_nonzero(t), "count_nonzero " + what)
        if n == 0:
            continue
        ti = rng.integers(-n, n, _shape(rng, 0, 2, (1, 2, 3)))
        _same(pr.take(p, pr.tensor(ti)), torch.take(t, torch.tensor(ti)), "take " + what)
        if dt != "bool":
            vp, vt = _pair(_values(rng, ti.shape, dt, ties=True), dt)
            got = p.clone().put_(pr.tensor(ti), vp, accumulate=True)
            want = t.clone().put_(torch.tensor(ti), vt, accumulate=True)
            _same(got, want, "put_ accumulate " + what)
        u = rng.permutation(n)[: int(rng.integers(0, n + 1))] - n * (rng.random() < 0.5)
        vp, vt = _pair(_values(rng, u.shape, dt), dt)
        _same(pr.put(p, pr.tensor(u), vp), torch.put(t, torch.tensor(u), vt), "put " + what)
        if p.ndim:
            d = int(rng.integers(-p.ndim, p.ndim))
            ishape = list(shape)
            ishape[d] = int(rng.integers(0, 4))
            ii = rng.integers(-shape[d], shape[d], ishape)
            _same(
                pr.take_along_dim(p, pr.tensor(ii), d),
                torch.take_along_dim(t, torch.tensor(ii), d),
                f"take_along_dim {what} dim={d}",
            )
            flat = rng.integers(0, n, (3,))
            _same(  # (torch's flat form views its input: contiguous only)
                pr.take_along_dim(p, pr.tensor(flat)),
                torch.take_along_dim(t.contiguous(), torch.tensor(flat)),
                "take_along_dim flat " + what,
            )


def test_take_along_dim_negative_indices_as_torch(rng):
    """torch 2.13's take_along_dim along a dim takes a negative index from the end (pyrite
    refused it); with dim=None it gathers from the flattened input and refuses a negative
    index (pyrite took it). Gradients follow the same indices."""
    for _ in range(10):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 6)))
        a = rng.standard_normal(shape).astype(np.float32)
        d = int(rng.integers(-2, 2))
        ishape = list(shape)
        ishape[d] = int(rng.integers(1, 5))
        if rng.random() < 0.5:  # (broadcast outside d)
            ishape[(d + 1) % 2] = 1
        ii = rng.integers(-shape[d], shape[d], ishape)
        x, tx = pr.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        got = pr.take_along_dim(x, pr.tensor(ii), d)
        want = torch.take_along_dim(tx, torch.tensor(ii), d)
        _same(got, want, f"take_along_dim {shape} dim={d} {ii.tolist()}")
        g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
        (got * pr.tensor(g)).sum().backward()
        (want * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(_np(x.grad), _np(tx.grad), rtol=1e-6, atol=1e-6)
        big = ii.copy()
        big.flat[0] = shape[d]  # (torch wraps it unchecked: README)
        with pytest.raises(IndexError, match="out of bounds"):
            pr.take_along_dim(pr.tensor(a), pr.tensor(big), d)
        neg = np.array([0, -1])
        got, want = _both(
            lambda: pr.take_along_dim(pr.tensor(a), pr.tensor(neg)),
            lambda: torch.take_along_dim(torch.tensor(a), torch.tensor(neg)),
        )
        assert isinstance(want, RuntimeError) and isinstance(got, RuntimeError), (got, want)
        assert "out of bounds" in str(got)


# ---- advanced indexing ------------------------------------------------------------------------
def _index_items(rng, shape):
    """A random index: ints, slices (steps, negative ends), integer arrays (broadcasting),
    bool arrays over one or two dims, None, Ellipsis, bool scalars."""
    items, d, nd = [], 0, len(shape)
    while d < nd and len(items) < nd + 2:
        r, s = rng.random(), shape[d]
        if r < 0.2:
            start = int(rng.integers(-s - 1, s + 2)) if rng.random() < 0.5 else None
            items.append(("slice", (start, None, int(rng.integers(1, 3)))))
            d += 1
        elif r < 0.35 and s:
            items.append(("int", int(rng.integers(-s, s))))
            d += 1
        elif r < 0.6:
            ishape = _shape(rng, 0, 2, (1, 2, 3))
            items.append(("arr", rng.integers(-s, s, ishape) if s else np.zeros((0,), np.int64)))
            d += 1
        elif r < 0.7:
            items.append(("none", None))
        elif r < 0.82:
            k = int(rng.integers(1, min(2, nd - d) + 1))
            items.append(("bool", rng.random(shape[d : d + k]) < 0.5))
            d += k
        elif r < 0.87 and not any(k == "ellipsis" for k, _ in items):
            items.append(("ellipsis", None))
            d = nd
        elif r < 0.92:
            items.append(("boolscalar", bool(rng.random() < 0.5)))
        else:
            items.append(("slice", (None, None, None)))
            d += 1
    return items


def _build(items, lib):
    conv = {"slice": lambda v: slice(*v), "int": lambda v: v, "arr": lib.tensor, "bool": lib.tensor,
            "none": lambda v: None, "ellipsis": lambda v: Ellipsis, "boolscalar": lambda v: v}  # fmt: skip
    return tuple(conv[k](v) for k, v in items)


def test_advanced_indexing_get_and_set_match_torch(rng):
    """x[idx] and x[idx] = v / scalar for random mixes of ints, slices, None, Ellipsis, integer
    and bool tensors (adjacent or separated advanced indices, which move the result's dims):
    the same values and shapes, and the same refusals."""
    for _ in range(120):
        shape = _shape(rng, 0, 3, (0, 1, 2, 3, 5))
        a = _values(rng, shape, "float32", ties=True)
        items = _index_items(rng, shape)
        pi, ti = _build(items, pr), _build(items, torch)
        got, want = _both(lambda: pr.tensor(a)[pi], lambda: torch.tensor(a)[ti])
        if isinstance(want, Exception):
            assert isinstance(got, (IndexError, RuntimeError, TypeError, ValueError)), (items, got)
            continue
        assert not isinstance(got, Exception), (shape, items, got)
        _same(got, want, f"getitem {shape} {items}")
        v = _values(rng, tuple(want.shape), "float32", ties=True)
        x, tx = pr.tensor(a), torch.tensor(a)
        if any(k == "arr" and np.size(val) > 1 for k, val in items):
            continue  # (a repeated index's write is torch's loop order's)
        x[pi] = pr.tensor(v)
        tx[ti] = torch.tensor(v)
        _same(x, tx, f"setitem {shape} {items}")
        x[pi] = 2.5
        tx[ti] = 2.5
        _same(x, tx, f"setitem scalar {shape} {items}")


def test_index_put_accumulate_matches_torch(rng):
    """index_put_ / index_put with integer index tuples (duplicates, negative, broadcast) or a
    bool mask, accumulate or not, values broadcast from a trailing shape, float32 / int32 /
    float16 (accumulated integers: exact in any order)."""
    for _ in range(30):
        dt = _pick(rng, ("float32", "int32", "float16"))
        shape = _shape(rng, 1, 3, (1, 2, 3, 5))
        p, t = _pair(_values(rng, shape, dt, ties=True), dt)
        k = int(rng.integers(1, len(shape) + 1))
        ishape = _shape(rng, 0, 2, (1, 2, 3))
        if rng.random() < 0.3:
            idx = [rng.random(shape[:k]) < 0.5]
            acc_only = False
        else:
            idx = [rng.integers(-shape[i], shape[i], ishape) for i in range(k)]
            acc_only = True
        res = torch.tensor(_values(rng, shape, "float32"))[tuple(torch.tensor(i) for i in idx)]
        vshape = tuple(res.shape)[int(rng.integers(0, res.ndim + 1)) :]
        vp, vt = _pair(_values(rng, vshape, dt, ties=True), dt)
        pidx, tidx = tuple(pr.tensor(i) for i in idx), tuple(torch.tensor(i) for i in idx)
        for acc in (True, False) if not acc_only else (True,):
            what = f"index_put {dt} {shape} {[i.shape for i in idx]} values {vshape} acc={acc}"
            _same(
                p.clone().index_put_(pidx, vp, accumulate=acc),
                t.clone().index_put_(tidx, vt, accumulate=acc),
                what,
            )
            _same(
                pr.index_put(p, pidx, vp, accumulate=acc),
                torch.index_put(t, tidx, vt, accumulate=acc),
                what,
            )


# ---- out= -------------------------------------------------------------------------------------
def test_out_arguments_match_torch(rng):
    """out= of the sorting and indexing functions torch gives one (values-and-indices pairs
    too): the result written into out, out returned. msort, take_along_dim, scatter,
    scatter_add, scatter_reduce, index_add, index_copy and index_reduce refused out= before."""
    a = rng.standard_normal((3, 5)).astype(np.float32)
    idx = rng.integers(0, 5, (3, 4))
    u = rng.permutation(5)[:3]
    uniq = np.argsort(rng.random((3, 5)), axis=1)[:, :4]
    cases = {
        "sort": (lambda m, x, i: m.sort(x, 1, out=_outs(m, 2)), 2),
        "topk": (lambda m, x, i: m.topk(x, 2, out=_outs(m, 2)), 2),
        "kthvalue": (lambda m, x, i: m.kthvalue(x, 2, 1, out=_outs(m, 2)), 2),
        "median": (lambda m, x, i: m.median(x, 1, out=_outs(m, 2)), 2),
        "mode": (lambda m, x, i: m.mode(x, 1, out=_outs(m, 2)), 2),
        "msort": (lambda m, x, i: m.msort(x, out=_outs(m, 1)), 1),
        "gather": (lambda m, x, i: m.gather(x, 1, i, out=_outs(m, 1)), 1),
        "take_along_dim": (lambda m, x, i: m.take_along_dim(x, i, 1, out=_outs(m, 1)), 1),
        "index_select": (lambda m, x, i: m.index_select(x, 1, i[0], out=_outs(m, 1)), 1),
        "masked_select": (lambda m, x, i: m.masked_select(x, x > 0, out=_outs(m, 1)), 1),
        "take": (lambda m, x, i: m.take(x, i, out=_outs(m, 1)), 1),
        "nonzero": (lambda m, x, i: m.nonzero(x > 0, out=_outs(m, 1, m.int64)), 1),
        "searchsorted": (
            lambda m, x, i: m.searchsorted(m.sort(x, 1).values, x, out=_outs(m, 1, m.int64)),
            1,
        ),
        "bucketize": (
            lambda m, x, i: m.bucketize(x, m.sort(x[0]).values, out=_outs(m, 1, m.int64)),
            1,
        ),
        "histc": (lambda m, x, i: m.histc(x, 4, out=_outs(m, 1)), 1),
        # (scatter's indices unique in each row: which duplicate wins is unspecified in torch,
        # and a GPU's invocations write in another order than lavapipe's; the H100 differed)
        "scatter": (lambda m, x, i: m.scatter(x, 1, m.tensor(uniq), x, out=_outs(m, 1)), 1),
        "scatter value": (lambda m, x, i: m.scatter(x, 1, i, value=2.0, out=_outs(m, 1)), 1),
        "scatter_add": (lambda m, x, i: m.scatter_add(x, 1, i, x, out=_outs(m, 1)), 1),
        "scatter_reduce": (
            lambda m, x, i: m.scatter_reduce(x, 1, i, x, "amax", out=_outs(m, 1)),
            1,
        ),
        "index_add": (
            lambda m, x, i: m.index_add(x, 1, i[0], x[:, :4], alpha=2, out=_outs(m, 1)),
            1,
        ),
        "index_copy": (
            lambda m, x, i: m.index_copy(x, 1, m.tensor(u), x[:, :3], out=_outs(m, 1)),
            1,
        ),
        "index_reduce": (
            lambda m, x, i: m.index_reduce(x, 1, i[0], x[:, :4], "prod", out=_outs(m, 1)),
            1,
        ),
    }
    for name, (fn, k) in cases.items():
        got = fn(pr, pr.tensor(a), pr.tensor(idx))
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == k and all(g is o for g, o in zip(got, _LAST_OUTS)), name
        want = fn(torch, torch.tensor(a), torch.tensor(idx))
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want):
            _same(g, w, f"{name} out=")


_LAST_OUTS: list = []


def _outs(m, k, dtype=None):
    """k empty out tensors of library m (values, then indices: int64), remembered."""
    outs = [m.empty(0, dtype=dtype) if dtype is not None else m.empty(0)]
    if k == 2:
        outs.append(m.empty(0, dtype=m.int64))
    _LAST_OUTS[:] = outs
    return tuple(outs) if k == 2 else outs[0]


# ---- gradients --------------------------------------------------------------------------------
def _grad_case(rng, fp, ft, arrays, what):
    """Gradients of sum(f(inputs) · g) for a random g, float inputs only: torch's within f32."""
    px = [pr.tensor(a, requires_grad=a.dtype == np.float32) for a in arrays]
    tx = [torch.tensor(a, requires_grad=a.dtype == np.float32) for a in arrays]
    rp, rt = fp(*px), ft(*tx)
    rp, rt = (rp[0], rt[0]) if isinstance(rt, tuple) else (rp, rt)
    g = rng.standard_normal(tuple(rt.shape)).astype(np.float32)
    (rp * pr.tensor(g)).sum().backward()
    (rt * torch.tensor(g)).sum().backward()
    for i, (a, b) in enumerate(zip(px, tx)):
        if not b.requires_grad:
            continue
        want = np.zeros(b.shape) if b.grad is None else b.grad.double().numpy()
        got = np.zeros(b.shape) if a.grad is None else _np(a.grad)
        tol = 8 * EPS32 * (np.abs(g).sum() + 1)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=tol, err_msg=f"{what} input {i}")


def test_gradients_match_torch(rng):
    """Backward of the selections (sort, topk, kthvalue, median, nanmedian, mode: distinct
    values so the selected index is torch's), the gathers (gather, index_select, take,
    take_along_dim, masked_select, advanced getitem) and the scatters (scatter, scatter_add,
    scatter_reduce with every reduce, index_add, index_copy, index_fill, masked_fill,
    masked_scatter, put, index_put_ accumulate), through any dim."""
    for _ in range(6):
        shape = (int(rng.integers(1, 5)), int(rng.integers(1, 7)))
        x = rng.permutation(np.arange(np.prod(shape), dtype=np.float32)).reshape(shape) / 3
        d = int(rng.integers(-2, 2))
        n = shape[d]
        k = int(rng.integers(1, n + 1))
        idx = rng.integers(0, n, shape)
        src = rng.standard_normal(shape).astype(np.float32)
        ii = rng.integers(0, n, 5)
        sh = list(shape)
        sh[d] = 5
        s5 = rng.standard_normal(sh).astype(np.float32)
        m = rng.random(shape) < 0.5
        ti = rng.integers(-x.size, x.size, (3, 2))
        cases = {
            "sort": (lambda L, t: L.sort(t, d, descending=True), [x]),
            "topk": (lambda L, t: L.topk(t, k, d, largest=False), [x]),
            "kthvalue": (lambda L, t: L.kthvalue(t, k, d, keepdim=True), [x]),
            "median": (lambda L, t: L.median(t, d), [x]),
            "median all": (lambda L, t: L.median(t), [x]),
            "nanmedian": (lambda L, t: L.nanmedian(t, d), [x]),
            "mode": (lambda L, t: L.mode(t, d), [np.round(x)]),
            "gather": (lambda L, t, i: L.gather(t, d, i), [x, idx]),
            "take_along_dim": (lambda L, t, i: L.take_along_dim(t, i - n * (i % 2), d), [x, idx]),
            "index_select": (lambda L, t, i: L.index_select(t, d, i), [x, ii]),
            "take": (lambda L, t, i: L.take(t, i), [x, ti]),
            "masked_select": (lambda L, t, m: L.masked_select(t, m), [x, m]),
            "getitem": (
                lambda L, t, i: t[None, ..., i],
                [x, rng.integers(-shape[1], shape[1], (2, 3))],
            ),
            "scatter_add": (lambda L, t, i, s: L.scatter_add(t, d, i, s), [x, idx, src]),
            "index_add": (lambda L, t, i, s: L.index_add(t, d, i, s, alpha=1.5), [x, ii, s5]),
            "index_fill": (lambda L, t, i: L.index_fill(t, d, i - n * (i % 2), 2.0), [x, ii]),
            "masked_fill": (lambda L, t, m: L.masked_fill(t, m, 1.0), [x, m]),
            "masked_scatter": (lambda L, t, m, s: L.masked_scatter(t, m, s), [x, m, src]),
            "put acc": (
                lambda L, t, i, s: L.put(t, i, s, accumulate=True),
                [x, ti, src.reshape(-1)[:1].repeat(6).reshape(3, 2)],
            ),
        }
        for red in ("sum", "prod", "mean", "amax", "amin"):
            for inc in (True, False):
                cases[f"scatter_reduce {red} {inc}"] = (
                    lambda L, t, i, s, red=red, inc=inc: L.scatter_reduce(
                        t, d, i, s, red, include_self=inc
                    ),
                    [x, idx, src],
                )
        for name, (f, arrays) in cases.items():
            _grad_case(
                rng,
                lambda *a, f=f: f(pr, *a),
                lambda *a, f=f: f(torch, *a),
                arrays,
                f"{name} {shape} dim={d}",
            )


# ---- bad indices ------------------------------------------------------------------------------
def test_out_of_range_indices_refused_at_the_call(rng):
    """An index past either end (and a negative one where torch takes none) raises at the call,
    an IndexError or RuntimeError as torch's RuntimeError / IndexError, never a value."""
    a = rng.standard_normal((3, 4)).astype(np.float32)
    for bad in (np.array([0, 4]), np.array([0, -5]), np.array([0, -1])):
        ops = {
            "gather": lambda m, b: m.gather(m.tensor(a), 1, m.tensor(np.stack([b] * 3))),
            "index_select": lambda m, b: m.index_select(m.tensor(a), 1, m.tensor(b)),
            "scatter": lambda m, b: m.scatter(m.tensor(a), 1, m.tensor(b[None]), 1.0),
            "scatter_add": lambda m, b: m.scatter_add(
                m.tensor(a), 1, m.tensor(b[None]), m.tensor(a)
            ),
            "scatter_reduce": lambda m, b: m.scatter_reduce(
                m.tensor(a), 1, m.tensor(b[None]), m.tensor(a), "amin"
            ),
            "index_add": lambda m, b: m.index_add(m.tensor(a), 1, m.tensor(b), m.tensor(a[:, :2])),
            "index_copy": lambda m, b: m.index_copy(
                m.tensor(a), 1, m.tensor(b), m.tensor(a[:, :2])
            ),
            "index_fill": lambda m, b: m.index_fill(m.tensor(a), 1, m.tensor(b), 2.0),
            "take": lambda m, b: m.take(m.tensor(a), m.tensor(b * 4)),
            "put_": lambda m, b: m.tensor(a).put_(m.tensor(b * 4), m.ones(2)),
            "getitem": lambda m, b: m.tensor(a)[:, m.tensor(b)],
            "index_put": lambda m, b: m.tensor(a).index_put_(
                (m.tensor(b),), m.tensor(1.0), accumulate=True
            ),
            "bincount": lambda m, b: m.bincount(m.tensor(b)),
            "one_hot": lambda m, b: (torch if m is torch else pr).nn.functional.one_hot(
                m.tensor(b), 4
            ),
        }
        for name, f in ops.items():
            got, want = _both(lambda f=f: f(pr, bad), lambda f=f: f(torch, bad))
            what = f"{name} {bad.tolist()}"
            if isinstance(want, Exception):
                assert isinstance(got, (IndexError, RuntimeError, ValueError)), (what, got, want)
            else:
                assert not isinstance(got, Exception), (what, got)
                _same(got, want, what)
