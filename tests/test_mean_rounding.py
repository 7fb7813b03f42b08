"""The mean of a compensated sum is divided once, from the exact residual (kernels/common.py
p_cmean), so it is within one rounding of the exact mean, and the mean of n copies of a float
is that float on every reduction path: mean(), var_mean's and std_mean's mean, and the norms
that take them (instance_norm of constant rows is 0, where torch CPU gives ~1e-5)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.ops import reduce as R

PATHS = {
    "adapter": {},
    "row": {"FORCE_MODE": "row"},
    "split": {"FORCE_SPLIT": 3},
    "fused": {"FUSED": True, "FUSED_MIN_CHUNK": 256},
    "wide": {"WIDE": True},
}


@pytest.mark.parametrize("path", list(PATHS))
def test_mean_of_copies_is_the_value(path, rng, monkeypatch):
    for k, v in PATHS[path].items():
        monkeypatch.setattr(R, k, v)
    for n in (2, 3, 5, 7, 10, 33, 1000, 5003):
        v = (rng.standard_normal(6) * 10.0 ** rng.integers(-3, 4, 6)).astype(np.float32)
        a = np.repeat(v[:, None], n, 1)
        x = pr.tensor(a)
        np.testing.assert_array_equal(x.mean(1).numpy(), v, err_msg=f"{path} n={n}")
        np.testing.assert_array_equal(pr.var_mean(x, 1)[1].numpy(), v, err_msg=f"var_mean n={n}")
        np.testing.assert_array_equal(pr.std_mean(x, 1)[1].numpy(), v, err_msg=f"std_mean n={n}")


@pytest.mark.parametrize("path", list(PATHS))
def test_mean_within_one_rounding(path, rng, monkeypatch):
    # random rows, cancelling ones too: within 1 ulp of float64's mean of the same floats
    # (the compensated sum is within ~2 ulp of its own total, divided once)
    for k, v in PATHS[path].items():
        monkeypatch.setattr(R, k, v)
    for n in (3, 17, 4099):
        a = rng.standard_normal((5, n)).astype(np.float32)
        a[1] += 1e3  # (alike terms)
        a[2] -= a[2].mean()  # (cancelling)
        got = pr.tensor(a).mean(1).numpy().astype(np.float64)
        want = a.astype(np.float64).mean(1)
        ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
        sum_ulp = np.spacing(np.abs(a.astype(np.float64).sum(1)).astype(np.float32)) / n
        assert (np.abs(got - want) <= ulp + 2 * sum_ulp).all(), (path, n, got - want, ulp)


def test_instance_norm_of_constant_rows_is_zero(rng):
    v = (rng.standard_normal((4, 3, 1)) * 10).astype(np.float32)
    for n in (5, 7, 64):
        x = pr.tensor(np.repeat(v, n, 2))
        out = pr.nn.functional.instance_norm(x, eps=1e-3).numpy()
        np.testing.assert_array_equal(out, np.zeros_like(out))


@pytest.mark.parametrize("path", list(PATHS))
def test_empty_rows_on_every_path(path, monkeypatch):
    # rows of no elements: the identity (sum 0, norm 0) or NaN (mean, var), whatever path is
    # forced (a forced split or one-pass plan of an empty row divided by zero)
    for k, v in PATHS[path].items():
        monkeypatch.setattr(R, k, v)
    x = pr.empty(3, 0)
    assert x.sum(1).tolist() == [0.0] * 3 and x.norm(dim=1).tolist() == [0.0] * 3
    assert all(np.isnan(x.mean(1).numpy())) and all(np.isnan(x.var(1).numpy()))


@pytest.mark.parametrize("path", list(PATHS))
def test_mean_of_infinities_and_nan(path, monkeypatch):
    # an inf makes the mean inf (its compensation term is inf - inf: never added), inf and -inf
    # or a NaN make it NaN, as torch's
    for k, v in PATHS[path].items():
        monkeypatch.setattr(R, k, v)
    n = 700
    a = np.ones((4, n), np.float32)
    a[0, 3] = np.inf
    a[1, [3, 9]] = [np.inf, -np.inf]
    a[2, 5] = np.nan
    a[3, 7] = -np.inf
    got = pr.tensor(a).mean(1).numpy()
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2]) and got[3] == -np.inf
