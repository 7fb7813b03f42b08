"""Spatial nn.functional cases scripts/fuzz_spatial.py found wrong, minimised and pinned against
torch (CPU), plus a small seeded run of that fuzzer itself (forward, gradient, refusals)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
from tests import fuzzing


def _grad_check(rng, fn, x, atol=1e-6):
    """fn(T, tensor) in torch and pyrite on x: equal outputs, and gradients of sum(out * g)."""
    tx = torch.tensor(x, requires_grad=True)
    want = fn(torch, tx)
    px = pr.tensor(x)
    px.requires_grad_(True)
    got = fn(pr, px)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=atol)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.tensor(g)).sum().backward()
    (got * pr.tensor(g)).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=atol)


# ---- pad: reflect/replicate with one side negative cropped before padding --------------------
# torch's reflection and replication kernels pad the whole input and then crop: reflect (2, -4)
# of [1, 2, 3, 4, 5] is [3, 2, 1]. pyrite cropped first and then refused whenever the crop left
# no more than the pad ("padding size should be less than the input dimension": 2 against the
# cropped size 1; replicate (3, -7) cropped everything). Where both orders are defined they
# agree, so this was a refusal, never a wrong value. Circular crops first in torch too (kept).
PAD_CASES = [
    ((4, 4, 3, 1), (0, 0, 2, -2), "reflect"),  # the fuzzer's find: refused
    ((1, 1, 5), (2, -4), "reflect"),
    ((1, 1, 5), (-1, 3), "reflect"),
    ((1, 1, 5), (4, -5), "reflect"),
    ((1, 1, 5), (3, -7), "reflect"),
    ((2, 5, 6), (-2, 4, 1, -1), "reflect"),
    ((1, 1, 5), (2, -4), "replicate"),
    ((1, 1, 5), (3, -7), "replicate"),
    ((2, 3, 4, 5), (-3, 2, 1, -3), "replicate"),
    ((2, 3, 4, 5), (1, -2, -1, 2, 2, -1), "replicate"),
    ((1, 1, 5), (2, -2), "circular"),
    ((2, 5, 6), (-1, 3, 2, -3), "circular"),
    ((1, 1, 5), (2, -4), "constant"),
]


@pytest.mark.parametrize("shape,pads,mode", PAD_CASES)
def test_pad_mixed_sign(rng, shape, pads, mode):
    x = rng.standard_normal(shape).astype(np.float32)
    _grad_check(rng, lambda T, t: T.nn.functional.pad(t, pads, mode=mode), x)


# ---- grid_sample: the grid's gradient at the clip edges -----------------------------------------
# border/reflection clip the pixel coordinate to [0, size - 1]; torch's gradient of that clip
# (clip_coordinates_set_grad) is 0 at either edge, pyrite's clamp passed 1: a grid value of
# exactly 1 with align_corners=True had gradient -1.28 where torch's is 0 (reflection: +1.28,
# and -3 reflected onto the edge likewise). Found by the fuzzer's snapped grid values.
GRID_EDGE = [
    ((1, 1, 3, 4), [[1.0, 0.1]], "border", True),
    ((1, 1, 3, 4), [[-1.0, 0.1], [0.3, 1.0]], "border", True),
    ((1, 1, 3, 4), [[1.0, 0.1]], "reflection", True),
    ((1, 1, 3, 4), [[-3.0, -0.2], [0.2, 3.0]], "reflection", True),
    ((1, 2, 5, 3), [[1.0, -1.0], [0.5, 0.0], [-0.5, 1.2]], "border", True),
    ((2, 1, 4, 5), [[-2.5, 1.5], [1.0, 0.25]], "reflection", False),
    ((1, 2, 2, 3, 4), [[1.0, -1.0, 0.5], [-0.3, 1.0, -1.0]], "border", True),
]


@pytest.mark.parametrize("xshape,points,padding_mode,align", GRID_EDGE)
def test_grid_sample_grad_at_clip_edge(rng, xshape, points, padding_mode, align):
    x = rng.standard_normal(xshape).astype(np.float32)
    rank = len(xshape) - 2
    pts = np.asarray(points, np.float32)
    grid = np.broadcast_to(
        pts.reshape((1,) + (1,) * (rank - 1) + pts.shape),
        (xshape[0],) + (1,) * (rank - 1) + pts.shape,
    ).copy()
    kw = dict(mode="bilinear", padding_mode=padding_mode, align_corners=align)
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    want = torch.nn.functional.grid_sample(tx, tg, **kw)
    px, pg = pr.tensor(x), pr.tensor(grid)
    px.requires_grad_(True)
    pg.requires_grad_(True)
    got = pr.nn.functional.grid_sample(px, pg, **kw)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.tensor(g)).sum().backward()
    (got * pr.tensor(g)).sum().backward()
    np.testing.assert_allclose(pg.grad.numpy(), tg.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


# ---- conv_transpose2d's weight gradient hung under a loop budget --------------------------------
# The GEMM's K-split (ops/matmul.py _split_k_chunk) searched the largest fitting multiple of 64
# over K itself, and its midpoint rounded down to lo forever at lo = 64(q - 1), hi = K = 64q + r.
# The fuzzer's case: x (2, 3, 8, 11), w (3, 1, 1, 3), stride (2, 3), padding (0, 2),
# output_padding (1, 0) under a budget of 300 (the weight gradient's K is 190).
def test_split_k_chunk_terminates(loop_budget):
    from pyrite.ops.core import max_loop_iterations
    from pyrite.ops.matmul import _split_k_chunk, k_loop_iterations

    for raw in (150, 300, 1000, 5000):
        loop_budget(raw)
        budget = max_loop_iterations()
        for K in (65, 127, 128, 129, 190, 191, 255, 300, 1000, 4097, 9999):
            chunk = _split_k_chunk("direct", None, K)
            if chunk is None:
                assert k_loop_iterations("direct", None, K) <= budget or K <= 64
                continue
            assert chunk % 64 == 0 and 64 <= chunk < K
            fits = k_loop_iterations("direct", None, chunk) <= budget
            assert fits or chunk == 64
            assert k_loop_iterations("direct", None, chunk + 64) > budget or chunk + 64 >= K


def test_conv_transpose_grad_under_budget(rng, loop_budget):
    loop_budget(300)
    x = rng.standard_normal((2, 3, 8, 11)).astype(np.float32)
    w = rng.standard_normal((3, 1, 1, 3)).astype(np.float32)
    args = ((2, 3), (0, 2), (1, 0))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    px, pw = pr.tensor(x), pr.tensor(w)
    px.requires_grad_(True)
    pw.requires_grad_(True)
    want = torch.nn.functional.conv_transpose2d(tx, tw, None, *args)
    got = pr.nn.functional.conv_transpose2d(px, pw, None, *args)
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    (want * torch.tensor(g)).sum().backward()
    (got * pr.tensor(g)).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-4)


# ---- the fuzzer itself, a few seeded cases of every family ------------------------------------
def _fuzzer():
    return fuzzing.load_script("fuzz_spatial")


FUZZ = _fuzzer()


@pytest.mark.parametrize("family", sorted(FUZZ.FAMILIES))
def test_fuzz_spatial_seeded(rng, family):
    seed = int(rng.integers(1 << 30))
    bad = []
    for i in range(4):
        case_rng = np.random.default_rng([seed, i])
        case = FUZZ.FAMILIES[family](case_rng)
        msg = FUZZ.check(case, case_rng)
        if msg:
            bad.append(f"{case.op} {case.params}: {msg}")
    assert not bad, "\n".join(bad)
