"""Index sets and placements (ops/indices.py) against torch CPU, exactly: triu/tril_indices,
combinations, unravel_index, fill_diagonal_, rot90, vander, put_/put and the *_scatter family."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr

CASES = [
    "t.triu_indices(3, 4, 1)",
    "t.tril_indices(3, 3, -1)",
    "t.tril_indices(0, 3)",
    "t.triu_indices(3, 3, 10)",
    "t.tril_indices(4, 2, offset=-5)",
    "t.tril_indices(5, 7, 2)",
    "t.triu_indices(6, 2, -3)",
    "t.triu_indices(17, 13)",
    "t.combinations(t.tensor([1, 2, 3]))",
    "t.combinations(t.tensor([1, 2, 3]), r=3)",
    "t.combinations(t.tensor([1, 2, 3]), r=4)",
    "t.combinations(t.tensor([1, 2]), with_replacement=True)",
    "t.combinations(t.tensor([4.0, 5, 6, 7]), r=3, with_replacement=True)",
    "t.combinations(t.tensor([1.0, 2]), r=1)",
    "t.combinations(t.arange(9)[::2], 2)",
    "t.zeros(3, 4).fill_diagonal_(5)",
    "t.zeros(7, 3).fill_diagonal_(5, wrap=True)",
    "t.zeros(8, 3).fill_diagonal_(5, wrap=True)",
    "t.zeros(7, 3).fill_diagonal_(5)",
    "t.zeros(2, 2, 2).fill_diagonal_(1)",
    "t.zeros(3, 7).fill_diagonal_(5, wrap=True)",
    "t.zeros(4, 6)[:, ::2].fill_diagonal_(2)",
    "t.zeros(9, 2).fill_diagonal_(3, wrap=True)",
    "t.zeros(3, 3, dtype=t.int32).fill_diagonal_(-4)",
    "t.rot90(t.arange(6).reshape(2, 3))",
    "t.rot90(t.arange(6).reshape(2, 3), -1, (1, 0))",
    "t.rot90(t.arange(6).reshape(2, 3), 2)",
    "t.rot90(t.arange(24).reshape(2, 3, 4), 3, (2, 0))",
    "t.arange(6).reshape(2, 3).rot90(4)",
    "t.vander(t.tensor([1, 2, 3]))",
    "t.vander(t.tensor([1.0, 2, 3]), N=2, increasing=True)",
    "t.vander(t.tensor([1.5, -2, 3]), N=5)",
    "t.vander(t.tensor([1, 2]), N=0)",
    "t.unravel_index(t.tensor([4, 1, -1]), (2, 3))",
    "t.unravel_index(t.tensor(5), (2, 3))",
    "t.unravel_index(t.tensor([6, 23, 7]), (2, 3, 4))",
    "t.unravel_index(t.tensor([[3], [8]]), 5)",
    "t.zeros(2, 3).put_(t.tensor([0, -1]), t.tensor([1.0, 2]))",
    "t.zeros(2, 3).put_(t.tensor([0, 0]), t.tensor([1.0, 2]), accumulate=True)",
    "t.zeros(2, 3).put(t.tensor([[5]]), t.tensor([[9.0]]))",
    "t.zeros(3, 2).t().put_(t.tensor([1, 4]), t.tensor([7.0, 8]))",
    "t.select_scatter(t.zeros(2, 3), t.tensor([1.0, 2, 3]), 0, 1)",
    "t.slice_scatter(t.zeros(4, 3), t.ones(2, 3), 0, 1, 3)",
    "t.slice_scatter(t.zeros(4, 3), t.ones(4, 2), dim=1, start=1)",
    "t.slice_scatter(t.zeros(5, 3), t.ones(3, 3), step=2)",
    "t.diagonal_scatter(t.zeros(3, 3), t.tensor([1.0, 2]), 1)",
    "t.diagonal_scatter(t.zeros(3, 4), t.tensor([1.0, 2]), -1)",
]


def _np(r):
    if isinstance(r, (tuple, list)):
        return [_np(v) for v in r]
    a = r.numpy()
    return a.astype(np.int32) if a.dtype == np.int64 else a


@pytest.mark.parametrize("case", CASES)
def test_matches_torch(case):
    want = _np(eval(case, {"t": torch}))
    got = _np(eval(case, {"t": pr}))
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_array_equal(g, w)
    else:
        assert got.shape == want.shape, case
        np.testing.assert_array_equal(got, want)


def test_fill_diagonal_wrap_on_a_view():
    # torch 2.13 refuses this view (a setStorage bound error); the answer is the contiguous one
    x = pr.zeros(2, 9).t()
    x.fill_diagonal_(3.0, wrap=True)
    np.testing.assert_array_equal(
        x.numpy(), torch.zeros(9, 2).fill_diagonal_(3.0, wrap=True).numpy()
    )


def test_fill_diagonal_returns_self_and_large():
    x = pr.zeros(300, 200)
    assert x.fill_diagonal_(1.5, wrap=True) is x
    want = torch.zeros(300, 200).fill_diagonal_(1.5, wrap=True)
    np.testing.assert_array_equal(x.numpy(), want.numpy())


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: pr.triu_indices(-1, 3), RuntimeError, "row must be non-negative"),
        (lambda: pr.combinations(pr.tensor([[1, 2]])), RuntimeError, "1D vector"),
        (lambda: pr.zeros(2, 3, 2).fill_diagonal_(1), RuntimeError, "equal length"),
        (lambda: pr.zeros(3).fill_diagonal_(1), RuntimeError, "larger than 1"),
        (lambda: pr.rot90(pr.arange(3)), RuntimeError, "total dims >= 2"),
        (lambda: pr.rot90(pr.zeros(2, 2), 1, (0, 0)), RuntimeError, "different"),
        (lambda: pr.rot90(pr.zeros(2, 2), 1, (0, 1, 1)), RuntimeError, "rotation dims == 2"),
        (lambda: pr.unravel_index(pr.tensor([1.0]), (2, 3)), TypeError, "integer dtype"),
        (lambda: pr.select_scatter(pr.zeros(2, 3), pr.ones(2), 0, 1), RuntimeError, "slice size"),
        (
            lambda: pr.zeros(3).put_(pr.tensor([0, 1]), pr.tensor([1.0])),
            RuntimeError,
            "same number",
        ),
        (lambda: pr.zeros(3).put_(pr.tensor([5]), pr.tensor([1.0])), IndexError, "out of bounds"),
    ],
)
def test_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
