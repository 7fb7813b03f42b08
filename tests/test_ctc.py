"""ctc_loss against torch CPU (float64): padded and concatenated targets, batched and unbatched,
every reduction, zero_infinity, impossible alignments, lengths as tensors and lists, strided
log_probs, and the time steps chained over several dispatches under a small loop budget.

Tolerance: each alpha step is a logsumexp of at most three terms plus one log-probability, so a
step adds a few ULP of the running log-likelihood's magnitude; over T steps |error| <=
T·8·u·(|loss| + T·max|lp|) absolute (the log-likelihood is a sum of T log-probabilities).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from tests.optable import EPS32, assert_close

U = EPS32


@pytest.fixture(params=["serial", "workgroup"])
def kernel(request, monkeypatch):
    """Both alpha kernels (kernels/ctc.py) on any device: serial is CPU adapters' choice."""
    from pyrite.nn import _ctc

    monkeypatch.setattr(_ctc, "FORCE_KERNEL", request.param)
    return request.param


def _case(rng, T, N, C, S, blank=0):
    lp = torch.from_numpy(rng.standard_normal((T, N, C)) * 2).log_softmax(2)
    lp = lp.float().double()  # the values the device holds
    labels = [c for c in range(C) if c != blank]
    tl = rng.integers(0, S + 1, N)
    il = rng.integers(np.minimum(np.maximum(1, tl), T), T + 1) if N else np.zeros(0, np.int64)
    tg = rng.choice(labels, (N, S))
    return lp, tg, il, tl


def _tol(lp, T, want):
    mag = float(np.abs(want[np.isfinite(want)]).max(initial=1.0))
    return T * 8 * U * (mag + T * float(lp.abs().max())) + 1e-6


def _compare(got, want, lp, T, what):
    w = want.numpy()
    g = got.numpy().astype(np.float64)
    assert g.shape == w.shape, f"{what}: shape {g.shape} vs {w.shape}"
    assert np.array_equal(np.isinf(g), np.isinf(w)), f"{what}: infinities {g} vs {w}"
    fin = np.isfinite(w)
    assert_close(g[fin], w[fin], _tol(lp, T, w), 64 * U, what)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("TNCS", [(1, 1, 2, 1), (7, 3, 5, 3), (31, 4, 13, 9), (50, 2, 3, 20)])
def test_ctc_padded_and_concatenated(reduction, TNCS, rng, kernel):
    T, N, C, S = TNCS
    lp, tg, il, tl = _case(rng, T, N, C, S)
    want = TF.ctc_loss(
        lp, torch.from_numpy(tg), torch.from_numpy(il), torch.from_numpy(tl), reduction=reduction
    )
    lpp = pr.tensor(lp.numpy().astype(np.float32))
    got = F.ctc_loss(lpp, pr.tensor(tg), pr.tensor(il), pr.tensor(tl), reduction=reduction)
    _compare(got, want, lp, T, f"padded {TNCS}")
    cat = np.concatenate([tg[n, : tl[n]] for n in range(N)]).astype(np.int64)
    got = F.ctc_loss(lpp, pr.tensor(cat), il.tolist(), tuple(tl.tolist()), reduction=reduction)
    _compare(got, want, lp, T, f"concatenated {TNCS}")


def test_ctc_blank_unbatched_and_strided(rng, kernel):
    T, N, C, S = 12, 3, 6, 4
    lp, tg, il, tl = _case(rng, T, N, C, S, blank=5)
    args = (torch.from_numpy(tg), torch.from_numpy(il), torch.from_numpy(tl))
    want = TF.ctc_loss(lp, *args, blank=5, reduction="none")
    # (N, T, C) storage viewed as (T, N, C): a strided read, no copy
    nt = pr.tensor(np.ascontiguousarray(lp.numpy().transpose(1, 0, 2)).astype(np.float32))
    got = F.ctc_loss(
        nt.transpose(0, 1), pr.tensor(tg), pr.tensor(il), pr.tensor(tl), blank=5, reduction="none"
    )
    _compare(got, want, lp, T, "strided, blank=5")
    # unbatched: (T, C) log_probs, the target itself (of exactly its length), 0-d lengths
    t1 = np.ascontiguousarray(tg[1, : tl[1]])
    want1 = TF.ctc_loss(
        lp[:, 1],
        torch.from_numpy(t1),
        torch.tensor(int(il[1])),
        torch.tensor(int(tl[1])),
        blank=5,
        reduction="none",
    )
    got1 = F.ctc_loss(
        pr.tensor(lp[:, 1].numpy().astype(np.float32)),
        pr.tensor(t1),
        pr.tensor(int(il[1])),
        pr.tensor(int(tl[1])),
        blank=5,
        reduction="none",
    )
    _compare(got1, want1, lp, T, "unbatched")
    assert got1.shape == ()


def test_ctc_impossible_and_zero_infinity(rng, kernel):
    T, C = 6, 5
    lp = torch.from_numpy(rng.standard_normal((T, 4, C))).log_softmax(2).float().double()
    tg = np.array([[1, 1, 1, 1], [1, 2, 3, 4], [2, 2, 0, 0], [3, 0, 0, 0]])
    il = np.array([3, 6, 0, 0])  # repeats need blanks between: 1,1,1,1 in 3 frames is impossible
    tl = np.array([4, 4, 2, 0])
    for zi in (False, True):
        for red in ("none", "mean", "sum"):
            want = TF.ctc_loss(
                lp,
                torch.from_numpy(tg),
                torch.from_numpy(il),
                torch.from_numpy(tl),
                reduction=red,
                zero_infinity=zi,
            )
            got = F.ctc_loss(
                pr.tensor(lp.numpy().astype(np.float32)),
                pr.tensor(tg),
                pr.tensor(il),
                pr.tensor(tl),
                reduction=red,
                zero_infinity=zi,
            )
            _compare(got, want, lp, T, f"impossible zero_infinity={zi} {red}")
    # targets that name the blank: allowed, as in torch (the alignment just can't emit them)
    tgb = np.zeros((4, 4), np.int64)
    want = TF.ctc_loss(
        lp,
        torch.from_numpy(tgb),
        torch.from_numpy(np.full(4, 6)),
        torch.from_numpy(np.array([4, 2, 1, 0])),
        reduction="none",
    )
    got = F.ctc_loss(
        pr.tensor(lp.numpy().astype(np.float32)),
        pr.tensor(tgb),
        [6] * 4,
        [4, 2, 1, 0],
        reduction="none",
    )
    _compare(got, want, lp, T, "blank in targets")


def test_ctc_chains_dispatches_past_the_loop_budget(rng, monkeypatch, kernel):
    """Under a budget of 300 iterations (150 for the main loop) a step costs 3 (workgroup: one
    pass of S' <= 32 states) or S' + 2 (serial), so T = 400 steps need several dispatches;
    the result must not change."""
    T, N, C, S = 400, 3, 7, 10
    lp, tg, il, tl = _case(rng, T, N, C, S)
    il[0] = T
    want = TF.ctc_loss(
        lp, torch.from_numpy(tg), torch.from_numpy(il), torch.from_numpy(tl), reduction="none"
    )
    dev = backend.current()
    monkeypatch.setattr(dev, "_loop_budget", 300)  # max_loop_iterations() -> 150
    from pyrite.ops import core

    limit = core.max_loop_iterations()
    assert limit < T * 3, "the budget must force more than one dispatch"
    before = dev.dispatches
    got = F.ctc_loss(
        pr.tensor(lp.numpy().astype(np.float32)),
        pr.tensor(tg),
        pr.tensor(il),
        pr.tensor(tl),
        reduction="none",
    )
    _compare(got, want, lp, T, "chained")
    assert dev.dispatches - before >= 2


def test_ctc_long_sequence_past_the_device_budget(rng, kernel):
    """T = 22,000 frames of a 200-label target: S' = 401 states, so a step costs two 256-wide
    passes, the inner loop's exit test and the outer back edge: 88,000 counted iterations in
    one invocation without the chaining (lavapipe stops at 65,535; unchained, and chained at
    3 a step, the loss came out 41,808 and 46,085 where torch's is 57,654). The serial kernel
    takes 403 a step: 146 dispatches."""
    T, N, C, S = 22_000, 1, 6, 200
    lp, tg, il, tl = _case(rng, T, N, C, S)
    il[:], tl[:] = T, S
    want = TF.ctc_loss(
        lp, torch.from_numpy(tg), torch.from_numpy(il), torch.from_numpy(tl), reduction="sum"
    )
    got = F.ctc_loss(
        pr.tensor(lp.numpy().astype(np.float32)),
        pr.tensor(tg),
        pr.tensor(il),
        pr.tensor(tl),
        reduction="sum",
    )
    _compare(got, want, lp, T, "long")


def test_ctc_errors():
    lp = pr.randn(6, 3, 5).log_softmax(2)
    tg = pr.tensor([[1, 2, 3, 4]] * 3)
    il, tl = pr.tensor([6, 5, 6]), pr.tensor([4, 2, 0])
    with pytest.raises(ValueError, match="input_lengths"):
        F.ctc_loss(lp, tg, pr.tensor([7, 5, 6]), tl)
    with pytest.raises(pr.ShapeError, match="size at least 5 at dimension 1"):
        F.ctc_loss(lp, tg, il, pr.tensor([5, 2, 0]))
    with pytest.raises(ValueError, match="target_lengths to have value at least 0"):
        F.ctc_loss(lp, tg, il, pr.tensor([-1, 2, 0]))
    with pytest.raises(ValueError, match="blank .* must be in label range"):
        F.ctc_loss(lp, tg, il, tl, blank=5)
    with pytest.raises(pr.ShapeError, match="input_lengths must be of size batch_size"):
        F.ctc_loss(lp, tg, il[:2], tl)
    with pytest.raises(pr.ShapeError, match="target_lengths must be of size batch_size"):
        F.ctc_loss(lp, tg, il, [4, 2])
    with pytest.raises(pr.ShapeError, match="Expected tensor to have size 6 at dimension 0"):
        F.ctc_loss(lp, pr.tensor([1, 2, 3, 4, 1]), il, tl)
    with pytest.raises(TypeError, match="input_lengths must be integral"):
        F.ctc_loss(lp, tg, il.float(), tl)
    with pytest.raises(TypeError, match="not implemented for"):
        F.ctc_loss(pr.ones(6, 3, 5, dtype=pr.int32), tg, il, tl)
    with pytest.raises(IndexError, match="out of range"):
        F.ctc_loss(lp, tg + 10, il, tl)
    with pytest.raises(pr.ShapeError, match="Expected 1 to 2 dimensions"):
        F.ctc_loss(lp, tg.unsqueeze(0), il, tl)
    with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
        F.ctc_loss(lp, tg, il, tl, reduction="avg")
    got = pr.ctc_loss(lp, tg, il, tl, 0, 2, False)  # torch.ctc_loss: reduction as an int
    want = F.ctc_loss(lp, tg, il, tl, reduction="sum")
    assert abs(got.item() - want.item()) <= 1e-5 * abs(want.item())


def test_ctc_kernels_as_text():
    """The generators without a GPU: the workgroup kernel separates steps by a storage barrier,
    the serial one has none; both read sizes from info words (one pipeline for every shape)."""
    from pyrite.kernels.ctc import ctc_alpha_kernel, ctc_alpha_serial_kernel, workgroup_size

    wgk = ctc_alpha_kernel("f32", 64).wgsl
    ser = ctc_alpha_serial_kernel("f16", 8).wgsl
    assert "storageBarrier()" in wgk and "storageBarrier" not in ser
    assert "enable f16;" in ser and "enable f16;" not in wgk
    assert "@workgroup_size(64)" in wgk and "@workgroup_size(8)" in ser
    assert [workgroup_size(s) for s in (1, 33, 129, 401)] == [32, 64, 256, 256]
