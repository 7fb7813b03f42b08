"""Order statistics and binning (ops/quantiles.py) against torch CPU: quantile and nanquantile
(every interpolation, dim, keepdim, scalar and 1-D q, NaN rows), mode, nanmean, trapezoid,
cumulative_trapezoid, histogram and histogramdd; and median of an empty tensor.

quantile moves values (sorted, gathered) and interpolates once in f32 with PyTorch's lerp, so
the tolerance is a few ULP of the values; mode, histogram counts and edges are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from tests.optable import assert_close, has_f16

ULP = 2.0**-23


def _close(got, want, atol=1e-6, rtol=4 * ULP, what=""):
    if isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            _close(g, w, atol, rtol, what)
        return
    g, w = got.numpy(), want.numpy()
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}"
    assert_close(g.astype(np.float64), w.astype(np.float64), atol, rtol, what)


def _with_nans(rng, shape, frac=0.15):
    x = rng.standard_normal(shape).astype(np.float32)
    x[rng.random(shape) < frac] = np.nan
    return x


SHAPES = [(1,), (7,), (5, 13), (3, 4, 6), (2, 1, 3), (3, 300)]


@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile(rng, fn, interpolation):
    # every shape for linear; the other interpolations differ only in the rank's rounding
    for shape in SHAPES if interpolation == "linear" else SHAPES[1:4]:
        x = _with_nans(rng, shape)
        xp, xt = pr.tensor(x), torch.from_numpy(x)
        for dim in [None, *range(-len(shape), len(shape))]:
            for keepdim in (False, True):
                for q in (0.3, 0.0, 1.0, [0.1, 0.5, 0.99, 0.25])[
                    :: 1 if interpolation == "linear" else 3
                ]:
                    qp = pr.tensor(q) if isinstance(q, list) else q
                    qt = torch.tensor(q) if isinstance(q, list) else q
                    kw = dict(dim=dim, keepdim=keepdim, interpolation=interpolation)
                    want = getattr(torch, fn)(xt, qt, **kw)
                    got = getattr(pr, fn)(xp, qp, **kw)
                    _close(got, want, what=f"{fn} {shape} {kw} q={q}")


def test_quantile_layouts_and_forms(rng):
    x = rng.standard_normal((6, 9)).astype(np.float32)
    xt = torch.from_numpy(x)
    xp = pr.tensor(x.T.copy()).t()  # a transposed view
    _close(xp.quantile(0.7, dim=1), xt.quantile(0.7, dim=1))
    _close(
        pr.quantile(xp[:, ::2], pr.tensor(0.4), 0), torch.quantile(xt[:, ::2], torch.tensor(0.4), 0)
    )
    _close(pr.quantile(pr.tensor(3.0), 0.5), torch.quantile(torch.tensor(3.0), 0.5))
    _close(
        pr.quantile(pr.tensor(3.0), pr.tensor([0.5, 0.7]), dim=0, keepdim=True),
        torch.quantile(torch.tensor(3.0), torch.tensor([0.5, 0.7]), dim=0, keepdim=True),
    )
    _close(
        pr.tensor([[1.0, 2], [3, 4]]).quantile(0.5, keepdim=True),
        torch.tensor([[1.0, 2], [3, 4]]).quantile(0.5, keepdim=True),
    )


def test_quantile_errors():
    x = pr.tensor([1.0, 2.0])
    cases = [
        (lambda: pr.quantile(pr.tensor([]), 0.5), "non-empty"),
        (lambda: pr.quantile(pr.tensor([1, 2]), 0.5), "float"),
        (lambda: pr.quantile(x, 1.4), r"range \[0, 1\]"),
        (lambda: pr.quantile(x, pr.tensor([0.5, 1.5])), r"range \[0, 1\]"),
        (lambda: pr.quantile(x, pr.tensor([[0.5]])), "scalar or 1D"),
        (lambda: pr.quantile(x, 0.5, interpolation="foo"), "interpolation"),
        (lambda: pr.quantile(x, pr.tensor([0.5], dtype=pr.float16)), "same dtype"),
    ]
    for fn, match in cases:
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            if "shader-f16" in str(e) and not has_f16():
                continue  # float16 is refused by the device before quantile sees it
            assert isinstance(e, RuntimeError), repr(e)
            assert match in str(e) or __import__("re").search(match, str(e)), str(e)
        else:
            raise AssertionError(f"no error for {match}")


def test_mode(rng):
    for shape in SHAPES:
        xi = rng.integers(-3, 4, shape).astype(np.int32)
        xf = (rng.integers(-4, 4, shape) * 0.5).astype(np.float32)
        xb = rng.integers(0, 2, shape).astype(bool)
        for a in (xi, xf, xb):
            for dim in range(-len(shape), len(shape)):
                for keepdim in (False, True):
                    v, i = pr.mode(pr.tensor(a), dim, keepdim)
                    tv, ti = torch.mode(torch.from_numpy(a), dim, keepdim)
                    np.testing.assert_array_equal(v.numpy(), tv.numpy())
                    if shape[dim] <= 16:
                        # torch's CPU index is the last occurrence only where its std::sort is
                        # an insertion sort (rows <= 16); pyrite's always is
                        np.testing.assert_array_equal(i.numpy(), ti.numpy().astype(np.int32))
                    taken = np.take_along_axis(
                        a, np.expand_dims(i.numpy(), dim) if not keepdim else i.numpy(), dim
                    )
                    np.testing.assert_array_equal(
                        taken.squeeze(dim) if not keepdim else taken, v.numpy()
                    )
    r = pr.tensor([7, 1, 7, 1, 7, 1]).mode()
    assert (r.values.item(), r.indices.item()) == (1, 5)
    assert pr.mode(pr.tensor(5)).values.item() == 5
    with pytest.raises(IndexError, match="non-zero size"):
        pr.mode(pr.tensor([]))


def test_nanmean(rng):
    for shape in SHAPES:
        x = _with_nans(rng, shape, 0.3)
        for dim in [None, *range(len(shape))]:
            for keepdim in (False, True):
                kw = {} if dim is None else dict(dim=dim, keepdim=keepdim)
                _close(
                    pr.nanmean(pr.tensor(x), **kw),
                    torch.nanmean(torch.from_numpy(x), **kw),
                    what=f"nanmean {shape} {kw}",
                )
    assert np.isnan(pr.nanmean(pr.tensor([])).item())
    with pytest.raises(RuntimeError, match="floating point"):
        pr.nanmean(pr.tensor([1, 2]))


def test_trapezoid(rng):
    for shape in [(1,), (2,), (7,), (3, 5), (2, 3, 9)]:
        y = rng.standard_normal(shape).astype(np.float32)
        xs = np.sort(rng.standard_normal(shape[-1])).astype(np.float32)
        yp, yt = pr.tensor(y), torch.from_numpy(y)
        for fn in ("trapezoid", "cumulative_trapezoid"):
            f, g = getattr(pr, fn), getattr(torch, fn)
            _close(f(yp), g(yt), what=fn)
            _close(f(yp, dx=0.3), g(yt, dx=0.3), what=fn)
            _close(f(yp, pr.tensor(xs)), g(yt, torch.from_numpy(xs)), what=fn)
            _close(f(yp, dim=0), g(yt, dim=0), what=fn)
    _close(
        pr.trapz(pr.tensor([1.0, 2, 3]), pr.tensor([0.0, 1, 3])),
        torch.trapz(torch.tensor([1.0, 2, 3]), torch.tensor([0.0, 1, 3])),
    )
    assert pr.trapezoid(pr.tensor([1, 2, 3])).item() == 4.0
    assert pr.trapezoid(pr.tensor([])).item() == 0.0
    assert pr.cumulative_trapezoid(pr.tensor([1.0])).shape == (0,)


@pytest.mark.parametrize(
    "kw",
    [
        dict(bins=5),
        dict(bins=3, range=(-1.0, 1.0)),
        # odd counts: a lone point (lo == hi) then sits mid-bin, not on an edge that the two
        # linspaces may round to either side of it
        dict(bins=5, density=True),
        dict(bins=7, weight="w"),
        dict(bins="edges"),
        dict(bins="edges", density=True, weight="w"),
        dict(bins=1),
    ],
)
def test_histogram(rng, kw):
    for shape in [(50,), (7, 3), (1,), (0,)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.random(shape).astype(np.float32)

        def args(mod, kw=kw, w=w):
            k = dict(kw)
            if k.get("weight") == "w":
                k["weight"] = mod.tensor(w)
            if k.get("bins") == "edges":
                k["bins"] = mod.tensor([-1.0, -0.2, 0.1, 2.0])
            return k

        got = pr.histogram(pr.tensor(x), **args(pr))
        want = torch.histogram(torch.from_numpy(x), **args(torch))
        if shape == (0,) and kw.get("density"):
            continue  # 0/0 either way
        _close(got.hist, want.hist, what=f"hist {shape} {kw}")
        _edges_close(got.bin_edges, want.bin_edges)


def _edges_close(got, want):
    """linspace edges bit for bit: torch's CPU linspace computes each edge as one fused
    multiply-add (start + step*i, the second half end - step*(n-1-i)), as pyrite's does."""
    g, w = got.numpy(), want.numpy()
    assert g.shape == w.shape and np.array_equal(g, w), (g, w)


def test_histogram_specials():
    for x, kw in [
        ([1.0, 1.0], dict(bins=2)),
        ([1.0, np.nan, 5.0], dict(bins=2, range=(0, 2))),
        ([0.0, 2.0, 2.0, 1.0], dict(bins=2)),  # the rightmost edge closes the last bin
    ]:
        got = pr.histogram(pr.tensor(x), **kw)
        want = torch.histogram(torch.tensor(x), **kw)
        np.testing.assert_array_equal(got.hist.numpy(), want.hist.numpy())
        np.testing.assert_array_equal(got.bin_edges.numpy(), want.bin_edges.numpy())
    with pytest.raises(RuntimeError, match="not finite"):
        pr.histogram(pr.tensor([1.0, np.nan]), 2)
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        pr.histogram(pr.tensor([1.0]), 0)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        pr.histogram(pr.tensor([1.0]), 2, range=(3, 1))
    with pytest.raises(TypeError, match="int32"):
        pr.histogram(pr.tensor([1, 2]), 2)


def test_histogramdd(rng):
    pts = rng.standard_normal((40, 3)).astype(np.float32)
    pp, pt = pr.tensor(pts), torch.from_numpy(pts)
    w = rng.random(40).astype(np.float32)
    for kw in [
        dict(bins=[3, 4, 2]),
        dict(bins=2, density=True, range=[-1.0, 1, -2, 2, 0, 1]),
        dict(bins=[3, 3, 3], weight="w"),
        dict(bins="edges"),
    ]:

        def args(mod, kw=kw):
            k = dict(kw)
            if k.get("weight") == "w":
                k["weight"] = mod.tensor(w)
            if k.get("bins") == "edges":
                k["bins"] = [
                    mod.tensor([-1.0, 0, 1]),
                    mod.tensor([-2.0, 2]),
                    mod.tensor([-3.0, 0, 0.5, 3]),
                ]
            return k

        got = pr.histogramdd(pp, **args(pr))
        want = torch.histogramdd(pt, **args(torch))
        _close(got.hist, want.hist, what=f"histogramdd {kw}")
        for g, t in zip(got.bin_edges, want.bin_edges):
            _edges_close(g, t)


def test_median_of_empty_is_nan():
    assert np.isnan(pr.median(pr.tensor([])).item())
    assert np.isnan(pr.nanmedian(pr.zeros(0, 3)).item())
    assert pr.median(pr.zeros(0, 3), dim=1).values.shape == (0,)
    with pytest.raises(IndexError, match="non-zero size"):
        pr.median(pr.zeros(0, 3), dim=0)


def test_under_a_tiny_loop_budget(monkeypatch, rng):
    """These ops are compositions (sort, cumsum, sums, scatter_add, searchsorted): with the
    device's loop budget forced to 300 (planners then split every long axis), they still match
    torch on rows far longer than the budget."""
    from pyrite import backend

    monkeypatch.setattr(backend.current(), "_loop_budget", 300)
    x = _with_nans(rng, (3, 2311), 0.05)
    xp, xt = pr.tensor(x), torch.from_numpy(x)
    _close(pr.nanquantile(xp, 0.37, dim=1), torch.nanquantile(xt, 0.37, dim=1))
    _close(pr.nanmean(xp, 1), torch.nanmean(xt, 1))
    y = np.nan_to_num(x)
    _close(
        pr.cumulative_trapezoid(pr.tensor(y), dim=1),
        torch.cumulative_trapezoid(torch.from_numpy(y), dim=1),
        atol=2e-4,
        rtol=1e-5,
    )
    xi = rng.integers(0, 50, (2, 3001)).astype(np.int32)
    np.testing.assert_array_equal(
        pr.mode(pr.tensor(xi), 1).values.numpy(), torch.mode(torch.from_numpy(xi), 1).values.numpy()
    )
    h = pr.histogram(pr.tensor(y.reshape(-1)), 9)
    np.testing.assert_array_equal(
        h.hist.numpy(), torch.histogram(torch.from_numpy(y.reshape(-1)), 9).hist.numpy()
    )


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_nanmean_wants_a_float_dtype():
    with pytest.raises(TypeError, match="floating point"):
        pr.nanmean(pr.ones(3), dtype=pr.uint8)


def test_sweep_quantile_picks_infinite_elements():
    # lower/higher/nearest interpolated with weight 0: inf + 0 * (inf - inf) gave NaN
    inf = float("inf")
    for data in ([1.0, inf, inf, 2.0], [-inf, -inf, 1.0]):
        for m in ("linear", "lower", "higher", "midpoint", "nearest"):
            for q in (1.0, 0.9, 0.2):
                want = torch.quantile(torch.tensor(data), q, interpolation=m).item()
                got = pr.quantile(pr.tensor(data), q, interpolation=m).item()
                assert got == want or (got != got and want != want), (data, m, q)
