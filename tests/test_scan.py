"""cumsum / cumprod through every scan path (ops/reduce.py _scan, kernels/reduce.scan_kernel):
serial rows, row-mode rows staged through workgroup memory (at most SCAN_STAGED elements) and
not, chunked rows with staged and unstaged chunks, strided inputs and outputs along the dim,
against float64 numpy, with a tolerance of the operation's own: a prefix of n terms is within
n·eps·(Σ|x| over the prefix) for cumsum and n·eps·|prefix product| (×2: the parallel prefix
adds one rounding a level) for cumprod."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.kernels.reduce import SCAN_STAGED
from pyrite.ops import reduce as R

EPS32 = float(np.finfo(np.float32).eps)


def _check(a, dim, op):
    x = pr.tensor(a)
    got = getattr(x, op)(dim).numpy().astype(np.float64)
    b = a.astype(np.float64)
    n = a.shape[dim]
    if op == "cumsum":
        want = np.cumsum(b, dim)
        tol = 2 * n * EPS32 * np.cumsum(np.abs(b), dim) + 1e-30
    else:
        want = np.cumprod(b, dim)
        tol = 2 * n * EPS32 * np.abs(want) + 1e-30
    err = np.abs(got - want)
    assert (err <= tol).all(), (op, a.shape, dim, float((err / tol).max()))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize(
    "mode,chunk,length",
    [
        ("row", None, 7),  # (staged, one element a block for most invocations)
        ("row", None, SCAN_STAGED),  # staged, every block full
        ("row", None, SCAN_STAGED + 1),  # past the stage: each invocation walks its block
        ("row", 300, 1001),  # chunks of 300 staged (a ragged last chunk)
        ("row", SCAN_STAGED + 256, 3 * SCAN_STAGED + 17),  # chunks past the stage
        (None, None, 513),  # the adapter's own choice
    ],
)
def test_scan_paths(op, mode, chunk, length, rng, monkeypatch):
    monkeypatch.setattr(R, "FORCE_MODE", mode)
    monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", chunk)
    # values near 1 so long cumprods stay in range; signs mixed so cumsum cancels
    a = (1 + 0.01 * rng.standard_normal((3, length))).astype(np.float32)
    if op == "cumsum":
        a = a - 1.0
    _check(a, 1, op)
    _check(np.ascontiguousarray(a.T), 0, op)  # (along dim 0: strided)
    t = pr.tensor(a.T.copy()).t()  # a transposed view: stride 3 along the scanned dim
    got = getattr(t, op)(1).numpy()
    want = getattr(pr.tensor(a), op)(1).numpy()
    np.testing.assert_array_equal(got, want)


def test_staged_off_matches(rng, monkeypatch):
    # SCAN_STAGE off (A/B) takes the unstaged kernels on the same rows: both within the bound
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    a = rng.standard_normal((5, 1500)).astype(np.float32)
    _check(a, 1, "cumsum")
    monkeypatch.setattr(R, "SCAN_STAGE", False)
    _check(a, 1, "cumsum")


def test_int_scans_exact(rng, monkeypatch):
    monkeypatch.setattr(R, "FORCE_MODE", "row")
    for chunk in (None, 256):
        monkeypatch.setattr(R, "FORCE_SCAN_CHUNK", chunk)
        a = rng.integers(-50, 50, (4, 1999)).astype(np.int32)
        np.testing.assert_array_equal(pr.tensor(a).cumsum(1).numpy(), np.cumsum(a, 1))
