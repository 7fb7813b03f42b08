"""pr.testing.make_tensor against torch.testing.make_tensor: the same shapes, dtypes, layouts,
bounds and errors (the values are pyrite's generator's, so they are checked by range and by
distribution, not one by one)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.testing import make_tensor

PAIRS = [
    (pr.bool, torch.bool),
    (pr.uint8, torch.uint8),
    (pr.int8, torch.int8),
    (pr.int16, torch.int16),
    (pr.int32, torch.int32),
    (pr.float16, torch.float16),
    (pr.bfloat16, torch.bfloat16),
    (pr.float32, torch.float32),
    (pr.complex64, torch.complex64),
]


def _values(t):
    """The tensor's values as float64 numpy, complex split into (real, imaginary) pairs."""
    a = t.detach().cpu()
    if a.dtype in (pr.complex64, torch.complex64):
        a = a.real, a.imag
        return np.concatenate([np.asarray(p.float().numpy(), np.float64).ravel() for p in a])
    return np.asarray(a.float().numpy(), np.float64).ravel()


@pytest.mark.parametrize("pdt,tdt", PAIRS, ids=lambda d: str(d))
@pytest.mark.parametrize("bounds", [(None, None), (-3, 5), (0.5, 2.5)], ids=str)
def test_default_and_given_bounds_as_torch(pdt, tdt, bounds):
    low, high = bounds
    if tdt is torch.bool and bounds != (None, None):
        low, high = 0, 2
    if tdt is torch.uint8 and bounds == (-3, 5):
        low = 0
    shape = (37, 29)
    pr.manual_seed(17)
    got = make_tensor(shape, dtype=pdt, device="cpu", low=low, high=high)
    want = torch.testing.make_tensor(shape, dtype=tdt, device="cpu", low=low, high=high)
    assert tuple(got.shape) == tuple(want.shape) and got.dtype is pdt
    g, w = _values(got), _values(want)
    # torch's range rule (integers: [ceil(low), ceil(high))), read off torch's own draws
    # and the documented defaults; pyrite's draws stay inside it and fill it out
    lo = {torch.bool: 0, torch.uint8: 0}.get(tdt, -9) if low is None else low
    hi = {torch.bool: 2, torch.uint8: 10}.get(tdt, 10 if not tdt.is_floating_point else 9)
    hi = hi if high is None else high
    if tdt.is_complex:
        hi = 9 if high is None else high
    if not (tdt.is_floating_point or tdt.is_complex):
        lo, hi = np.ceil(lo), np.ceil(hi) - 1
        assert g.min() == w.min() == lo and g.max() == w.max() == hi
        assert set(np.unique(g)) == set(np.unique(w))
    else:
        # a rounded draw may land on `high` itself in a low-precision dtype (torch's too)
        assert lo <= g.min() and g.max() <= hi and lo <= w.min() and w.max() <= hi
        width = hi - lo
        assert abs(g.mean() - (lo + hi) / 2) < 0.05 * width  # (n ≥ 1,073: 5 sigma is 0.044)
        assert g.min() < lo + 0.02 * width and g.max() > hi - 0.02 * width


@pytest.mark.parametrize("pdt", [pr.float32, pr.int16, pr.complex64])
def test_noncontiguous_exclude_zero_and_shape_spellings(pdt):
    pr.manual_seed(3)
    t = make_tensor(5, 7, dtype=pdt, device="cpu", noncontiguous=True)
    w = torch.testing.make_tensor(5, 7, dtype=torch.float32, device="cpu", noncontiguous=True)
    assert tuple(t.shape) == (5, 7) and not t.is_contiguous() and not w.is_contiguous()
    assert t.stride() == w.stride() and t.storage_offset() == w.storage_offset() == 1
    assert make_tensor(1, dtype=pdt, noncontiguous=True).is_contiguous()  # (one element)
    assert tuple(make_tensor([2, 3], dtype=pdt).shape) == (2, 3)
    assert tuple(make_tensor(pr.Size([4]), dtype=pdt).shape) == (4,)
    assert tuple(make_tensor((), dtype=pdt).shape) == ()
    # exclude_zero: a range holding mostly zero (integers) or a float range's zeros replaced
    z = make_tensor(400, dtype=pdt, low=0, high=1, exclude_zero=True)
    v = _values(z)
    assert (v != 0).all() if pdt is not pr.complex64 else (v.reshape(2, -1) != 0).any(0).all()
    if pdt is pr.int16:
        assert set(np.unique(v)) == {1.0}
    nz = make_tensor(400, dtype=pr.bool, exclude_zero=True)
    assert bool(nz.all())


def test_requires_grad_and_errors_as_torch():
    t = make_tensor(3, dtype=pr.float32, requires_grad=True)
    assert t.requires_grad and t.is_leaf
    cases = [
        (dict(dtype="int32", requires_grad=True), ValueError, "is not supported for boolean"),
        (dict(dtype="float32", low=2, high=1), ValueError, "must be less than"),
        (dict(dtype="float32", low=float("nan")), ValueError, "cannot be NaN"),
        (dict(dtype="uint8", low=-5, high=-1), ValueError, "only supports"),
        (dict(dtype="float32", noncontiguous=True, memory_format="cl"), ValueError, "exclusive"),
    ]
    for kw, exc, text in cases:
        for L in (pr, torch):
            kw2 = dict(kw, dtype=getattr(L, kw["dtype"]))
            if "memory_format" in kw2:
                kw2["memory_format"] = L.channels_last
            f = pr.testing.make_tensor if L is pr else torch.testing.make_tensor
            with pytest.raises(exc, match=text):
                f(2, 3, device="cpu", **kw2)
    with pytest.raises(TypeError, match="not supported by torch.testing.make_tensor"):
        make_tensor(2, dtype=None)
    for L in (pr, torch):  # low == high for floats: torch's deprecation warning, then a fill
        f = pr.testing.make_tensor if L is pr else torch.testing.make_tensor
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = f(4, dtype=L.float32, device="cpu", low=1.5, high=1.5)
        assert any(issubclass(x.category, FutureWarning) for x in w)
        assert (_values(out) == 1.5).all()


def test_wide_float_range_is_finite():
    """A range wider than the dtype's max (torch draws half of it and doubles)."""
    for pdt, big in ((pr.float16, 6e4), (pr.float32, 3e38)):
        v = _values(make_tensor(1000, dtype=pdt, low=-big, high=big))
        assert np.isfinite(v).all() and v.min() < -0.5 * big and v.max() > 0.5 * big
