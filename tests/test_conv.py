"""Convolutions, F.unfold / F.fold and Tensor.unfold against torch.nn.functional in float64 on
f32-rounded inputs.

Tolerance per output: (K + 1)·u·Σ|w||x| over its window (K = C/groups·prod(kernel) products and
the bias; Higham's dot-product bound), computed by running the same op on |x|, |w|, |b| in
float64. unfold is a gather (exact); fold sums at most prod(kernel) entries an output.
The loop budget: col2im (fold, conv_transpose) over a 256x256 kernel (65,536 offsets an output)
and a tiny budget forced on the device; im2col has no loop, and conv's GEMM K loop is the GEMM's
(kernels/matmul.py) to bound, so conv shapes here keep C·prod(kernel) small.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.ops import conv as C
from pyrite.testing.tolerance import assert_close

U = 2.0**-24


def _f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def _T(a):
    return None if a is None else torch.tensor(a)


def _P(a, layout="c"):
    if a is None:
        return None
    if layout == "t" and a.ndim >= 3:  # channels-last storage viewed as (N, C, ...)
        perm = (0,) + tuple(range(2, a.ndim)) + (1,)
        back = (0, a.ndim - 1) + tuple(range(1, a.ndim - 1))
        return pr.tensor(np.ascontiguousarray(a.transpose(perm)), dtype=pr.float32).permute(*back)
    return pr.tensor(a, dtype=pr.float32)


def _check(tf, pf, x, w, b, kw, layout="c"):
    want = tf(_T(x), _T(w), _T(b), **kw).numpy()
    absref = tf(_T(np.abs(x)), _T(np.abs(w)), None if b is None else _T(np.abs(b)), **kw).numpy()
    K = int(np.prod(w.shape[1:])) + 1
    got = pf(_P(x, layout), _P(w), _P(b), **kw)
    assert_close(got.numpy(), want, atol=K * U * absref + 1e-30, msg=str((x.shape, w.shape, kw)))


@pytest.fixture
def small_budget():
    """Make the device behave as one whose invocations may loop only 300 times (the GEMM's
    smallest K chunk, 64, needs ~141 iterations: its planner stops there)."""
    dev = backend.current()
    before = dev._loop_budget
    dev._loop_budget = 300  # max_loop_iterations() = 150
    yield
    dev._loop_budget = before


CONV = [
    # (dims, x shape, weight shape, kwargs)
    (1, (2, 3, 17), (4, 3, 3), {}),
    (1, (1, 4, 20), (6, 2, 5), {"groups": 2, "padding": 2, "stride": 3, "dilation": 2}),
    (1, (3, 11), (2, 3, 4), {"padding": "same"}),  # unbatched
    (2, (2, 3, 9, 11), (5, 3, 3, 3), {}),
    (2, (1, 4, 8, 7), (6, 2, 3, 2), {"groups": 2, "padding": 1, "stride": 2}),
    (2, (2, 6, 13, 10), (6, 1, 3, 3), {"groups": 6, "dilation": 2, "padding": (2, 1)}),
    (2, (1, 2, 7, 9), (4, 2, 4, 3), {"padding": "same", "dilation": (1, 2)}),
    (2, (3, 2, 5, 5), (3, 2, 5, 5), {"padding": "valid"}),
    (2, (2, 3, 17, 17), (65, 3, 3, 3), {"stride": (2, 3), "padding": (0, 2)}),
    (2, (3, 8, 8), (4, 3, 1, 1), {}),  # unbatched 1x1
    (2, (2, 5, 7, 6), (7, 5, 1, 1), {}),  # 1x1: no im2col
    (2, (2, 6, 7, 6), (9, 2, 1, 1), {"groups": 3}),
    (3, (2, 3, 5, 6, 7), (4, 3, 3, 2, 3), {"padding": 1, "stride": 2}),
    (
        3,
        (1, 4, 7, 5, 6),
        (6, 2, 2, 3, 2),
        {"groups": 2, "dilation": (2, 1, 2), "padding": (1, 0, 2)},
    ),
    (3, (3, 5, 4, 6), (2, 3, 3, 3, 3), {"padding": "same"}),  # unbatched
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("case", CONV, ids=[str(i) for i in range(len(CONV))])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv(case, with_bias, rng):
    dims, xs, ws, kw = case
    x, w = _f32(rng.standard_normal(xs)), _f32(rng.standard_normal(ws))
    b = _f32(rng.standard_normal(ws[0])) if with_bias else None
    tf = {1: TF.conv1d, 2: TF.conv2d, 3: TF.conv3d}[dims]
    pf = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[dims]
    _check(tf, pf, x, w, b, kw, "t" if with_bias else "c")


def test_conv_top_level_and_integers(rng):
    x = rng.integers(-5, 5, (2, 3, 6, 7))
    w = rng.integers(-3, 3, (4, 3, 3, 3))
    got = pr.conv2d(pr.tensor(x, dtype=pr.int32), pr.tensor(w, dtype=pr.int32), padding=1)
    np.testing.assert_array_equal(
        got.numpy(), TF.conv2d(torch.tensor(x), torch.tensor(w), padding=1)
    )
    assert pr.conv3d is F.conv3d and pr.conv_transpose2d is F.conv_transpose2d


def test_conv_float16(rng):
    x = rng.standard_normal((2, 3, 8, 9)).astype(np.float16)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float16)
    got = F.conv2d(pr.tensor(x), pr.tensor(w), padding=1)
    assert got.dtype is pr.float16
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    want = TF.conv2d(_T(x64), _T(w64), padding=1).numpy()
    absref = TF.conv2d(_T(np.abs(x64)), _T(np.abs(w64)), padding=1).numpy()
    assert_close(got.numpy().astype(np.float64), want, atol=28 * U * absref + 2.0**-11 * absref)


def test_conv_in_chunks(monkeypatch, rng):
    """Column matrices past COLS_MAX_BYTES are built and multiplied in chunks: of batches, of
    columns, of output channels (conv_transpose)."""
    x, w, b = (_f32(rng.standard_normal(s)) for s in ((3, 4, 9, 8), (5, 4, 3, 3), (5,)))
    for limit in (4 * 4 * 9 * 72 * 2, 4 * 4 * 9 * 13):  # two batches a chunk; 13 columns
        monkeypatch.setattr(C, "COLS_MAX_BYTES", limit)
        _check(TF.conv2d, F.conv2d, x, w, b, {"padding": 1})
    wt = _f32(rng.standard_normal((4, 3, 3, 3)))
    bt = _f32(rng.standard_normal(3))
    for limit in (4 * 3 * 9 * 72 * 2, 4 * 9 * 72):  # two batches; one output channel a chunk
        monkeypatch.setattr(C, "COLS_MAX_BYTES", limit)
        _check(TF.conv_transpose2d, F.conv_transpose2d, x, wt, bt, {"stride": 2, "padding": 1})


CONV_T = [
    (1, (2, 3, 7), (3, 4, 3), {}),
    (
        1,
        (1, 4, 9),
        (4, 3, 5),
        {"groups": 2, "stride": 3, "padding": 2, "output_padding": 1, "dilation": 2},
    ),
    (1, (3, 5), (3, 2, 4), {"stride": 2}),  # unbatched
    (2, (2, 3, 5, 6), (3, 2, 4, 4), {"stride": 2, "padding": 1}),  # a VAE/GAN decoder's 4x4/2
    (2, (1, 6, 4, 5), (6, 1, 3, 2), {"groups": 3, "stride": (2, 3), "output_padding": (1, 2)}),
    (
        2,
        (2, 4, 5, 5),
        (4, 5, 3, 3),
        {"dilation": 2, "padding": (1, 2), "output_padding": 1, "stride": 2},
    ),
    (2, (2, 5, 6, 7), (5, 7, 1, 1), {}),
    (2, (3, 4, 4), (3, 2, 3, 3), {"stride": 3, "padding": 1}),  # unbatched
    (3, (2, 3, 3, 4, 5), (3, 2, 3, 2, 3), {"stride": 2, "padding": 1, "output_padding": (1, 0, 1)}),
    (
        3,
        (1, 4, 3, 3, 3),
        (4, 1, 2, 2, 2),
        {"groups": 4, "dilation": (1, 2, 1), "stride": (1, 2, 2)},
    ),
]


@pytest.mark.parametrize("case", CONV_T, ids=[str(i) for i in range(len(CONV_T))])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_transpose(case, with_bias, rng):
    dims, xs, ws, kw = case
    x, w = _f32(rng.standard_normal(xs)), _f32(rng.standard_normal(ws))
    g = kw.get("groups", 1)
    b = _f32(rng.standard_normal(ws[1] * g)) if with_bias else None
    tf = {1: TF.conv_transpose1d, 2: TF.conv_transpose2d, 3: TF.conv_transpose3d}[dims]
    pf = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    want = tf(_T(x), _T(w), _T(b), **kw).numpy()
    absref = tf(_T(np.abs(x)), _T(np.abs(w)), None if b is None else _T(np.abs(b)), **kw).numpy()
    got = pf(_P(x, "t" if with_bias else "c"), _P(w), _P(b), **kw)
    K = xs[-dims - 1] // g * int(np.prod(ws[2:])) + 1
    assert_close(got.numpy(), want, atol=K * U * absref + 1e-30, msg=str(case))


UNFOLD = [
    ((2, 3, 9, 11), {"kernel_size": 3}),
    ((1, 2, 8, 7), {"kernel_size": (2, 3), "dilation": (2, 1), "padding": 1, "stride": (2, 3)}),
    ((3, 5, 5), {"kernel_size": 5}),  # unbatched, one block
    ((2, 1, 7, 13), {"kernel_size": (1, 4), "stride": 3, "padding": (0, 2)}),
]


@pytest.mark.parametrize("xs,kw", UNFOLD, ids=[str(u[0]) for u in UNFOLD])
def test_unfold_fold(xs, kw, rng):
    x = _f32(rng.standard_normal(xs))
    want = TF.unfold(_T(x), **kw)
    np.testing.assert_array_equal(F.unfold(_P(x, "t"), **kw).numpy(), want.numpy())
    cols = _f32(rng.standard_normal(tuple(want.shape)))
    osz = xs[-2:]
    wf = TF.fold(_T(cols), osz, **kw).numpy()
    absref = TF.fold(_T(np.abs(cols)), osz, **kw).numpy()
    k = kw["kernel_size"]
    n = int(np.prod(k if isinstance(k, tuple) else (k, k)))
    got = F.fold(_P(cols), osz, **kw)
    assert_close(got.numpy(), wf, atol=n * U * absref + 1e-30)
    # a strided (transposed) view of the column matrix
    ct = pr.tensor(np.ascontiguousarray(np.swapaxes(cols, -1, -2)), dtype=pr.float32)
    assert_close(F.fold(ct.transpose(-1, -2), osz, **kw).numpy(), wf, atol=n * U * absref + 1e-30)


def test_tensor_unfold_is_a_view(rng):
    a = rng.standard_normal((4, 11, 3)).astype(np.float32)
    x = pr.tensor(a)
    for dim, size, step in ((1, 3, 2), (1, 11, 1), (0, 1, 3), (-1, 2, 1), (1, 0, 4)):
        got = x.unfold(dim, size, step)
        want = torch.tensor(a).unfold(dim, size, step)
        assert got.shape == tuple(want.shape) and got.stride() == want.stride()
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert got._storage is x._storage  # no copy
    np.testing.assert_array_equal(
        x.transpose(0, 1).unfold(0, 4, 3).numpy(),
        torch.tensor(a).transpose(0, 1).unfold(0, 4, 3).numpy(),
    )
    s = pr.tensor(3.0).unfold(0, 1, 1)
    assert s.shape == (1,) and s.item() == 3.0
    with pytest.raises(RuntimeError, match="maximum size for tensor at dimension 1 is 11"):
        x.unfold(1, 12, 1)
    with pytest.raises(RuntimeError, match="step is 0 but must be > 0"):
        x.unfold(1, 2, 0)
    with pytest.raises(RuntimeError, match="size is -1 but must be >= 0"):
        x.unfold(1, -1, 1)
    with pytest.raises(IndexError):
        x.unfold(3, 2, 1)


# ---- the loop budget ---------------------------------------------------------------------------
def test_col2im_past_loop_budget(rng):
    """A 256x256 kernel: every output of col2im gathers from 65,536 kernel offsets (one block),
    and a transposed conv of a 1x1 input with it (its GEMM's K is 1: C_in)."""
    cols = _f32(rng.standard_normal((1, 65536, 1)))
    got = F.fold(_P(cols), (256, 256), 256)
    np.testing.assert_array_equal(got.numpy(), TF.fold(_T(cols), (256, 256), 256).numpy())
    x, w = _f32(rng.standard_normal((1, 1, 2, 1))), _f32(rng.standard_normal((1, 1, 256, 256)))
    want = TF.conv_transpose2d(_T(x), _T(w), stride=(200, 1)).numpy()
    absref = TF.conv_transpose2d(_T(np.abs(x)), _T(np.abs(w)), stride=(200, 1)).numpy()
    got = F.conv_transpose2d(_P(x), _P(w), stride=(200, 1))
    assert_close(got.numpy(), want, atol=3 * U * absref + 1e-30)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_col2im_tiles_under_a_tiny_budget(small_budget, rng):
    """Kernel boxes whose col2im loops pass 150 iterations run as several tiles, each adding
    into the output."""
    x, b = _f32(rng.standard_normal((2, 3, 5, 6))), _f32(rng.standard_normal(4))
    w = _f32(rng.standard_normal((3, 2, 11, 13)))
    _check(TF.conv_transpose2d, F.conv_transpose2d, x, w, b[:2], {"stride": 2, "padding": 1})
    assert C.LAST_COL2IM_TILES != (1, 11, 13)
    wt = _f32(rng.standard_normal((3, 4, 12, 12)))
    want = TF.conv_transpose2d(_T(x), _T(wt), _T(b), dilation=2).numpy()
    absref = TF.conv_transpose2d(_T(np.abs(x)), _T(np.abs(wt)), _T(np.abs(b)), dilation=2)
    got = F.conv_transpose2d(_P(x), _P(wt), _P(b), dilation=2)
    assert_close(got.numpy(), want, atol=4 * U * 145 * absref.numpy())
    cols = _f32(rng.standard_normal((2, 3 * 143, 4)))
    want = TF.fold(_T(cols), (12, 14), (11, 13)).numpy()
    absref = TF.fold(_T(np.abs(cols)), (12, 14), (11, 13)).numpy()
    got = F.fold(_P(cols), (12, 14), (11, 13)).numpy()
    assert_close(got, want, atol=4 * U * absref)


# ---- errors ------------------------------------------------------------------------------------
def test_conv_errors():
    x, w = pr.ones(1, 3, 5, 5), pr.ones(4, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"expected input\[1, 3, 5, 5\] to have 2 channels"):
        F.conv2d(x, w)
    with pytest.raises(pr.ShapeError, match="divisible by 2 at dimension 0"):
        F.conv2d(pr.ones(1, 4, 5, 5), pr.ones(3, 2, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input"):
        F.conv2d(pr.ones(1, 2, 2, 2), w)
    with pytest.raises(ValueError, match="padding"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, padding="full")
    with pytest.raises(RuntimeError, match="negative padding"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, padding=-1)
    with pytest.raises(RuntimeError, match="non-positive stride"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, stride=0)
    with pytest.raises(RuntimeError, match="dilation should be greater than zero"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, dilation=0)
    with pytest.raises(RuntimeError, match="not supported for strided convolutions"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, padding="same", stride=2)
    with pytest.raises(RuntimeError, match="expected bias to be 1-dimensional with 4 elements"):
        F.conv2d(pr.ones(1, 2, 5, 5), w, pr.ones(3))
    with pytest.raises(RuntimeError, match=r"3D \(unbatched\) or 4D \(batched\) input to conv2d"):
        F.conv2d(pr.ones(2, 3), w)
    with pytest.raises(RuntimeError, match=r"4D \(unbatched\) or 5D"):
        F.conv3d(pr.ones(2, 3), pr.ones(1, 2, 1, 1, 1))
    with pytest.raises(TypeError, match="same dtype"):
        F.conv2d(pr.ones(1, 2, 5, 5), pr.ones(4, 2, 3, 3, dtype=pr.int32))
    assert F.conv2d(pr.ones(1, 2, 5, 5), w).shape == (1, 4, 3, 3)
    assert F.conv2d(pr.ones(0, 2, 5, 5), w).shape == (0, 4, 3, 3)
    with pytest.raises(RuntimeError, match="expected weight to be at least 1 at dimension 0"):
        F.conv1d(pr.ones(2, 3, 5), pr.ones(0, 3, 2))


def test_conv_transpose_errors():
    w = pr.ones(4, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"transposed=1.*to have 4 channels"):
        F.conv_transpose2d(pr.ones(1, 3, 5, 5), w)
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride"):
        F.conv_transpose2d(pr.ones(1, 4, 5, 5), w, output_padding=1)
    with pytest.raises(RuntimeError, match="divisible by 3 at dimension 0"):
        F.conv_transpose2d(pr.ones(1, 4, 5, 5), w, groups=3)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.conv_transpose2d(pr.ones(1, 4, 2, 2), w, padding=3)
    with pytest.raises(TypeError, match="must be tuple of ints, not str"):
        F.conv_transpose2d(pr.ones(1, 4, 2, 2), w, padding="same")
    with pytest.raises(RuntimeError, match="with 2 elements"):
        F.conv_transpose2d(pr.ones(1, 4, 5, 5), w, pr.ones(3))


def test_unfold_fold_errors():
    with pytest.raises(RuntimeError, match=r"3D or 4D \(batch mode\)"):
        F.unfold(pr.ones(2, 3, 4, 4, 4), 2)
    with pytest.raises(RuntimeError, match="components must be at least one"):
        F.unfold(pr.ones(1, 2, 3, 3), 4)
    with pytest.raises(RuntimeError, match=r"2D or 3D \(batch mode\)"):
        F.fold(pr.ones(2, 3, 4, 4), (4, 4), 2)
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(pr.ones(1, 7, 9), (4, 4), 2)
    with pytest.raises(RuntimeError, match=r"number of sliding blocks 3 \* 3 = 9"):
        F.fold(pr.ones(1, 8, 10), (4, 4), 2)
    with pytest.raises(TypeError, match="im2col"):
        F.unfold(pr.ones(1, 2, 3, 3, dtype=pr.int32), 2)


def test_conv_tbc(rng):
    x, w, b = (_f32(rng.standard_normal(s)) for s in ((9, 2, 3), (3, 3, 4), (4,)))
    for pad in (0, 1, 2):
        want = TF.conv_tbc(_T(x), _T(w), _T(b), pad).numpy()
        absref = TF.conv_tbc(_T(np.abs(x)), _T(np.abs(w)), _T(np.abs(b)), pad).numpy()
        got = F.conv_tbc(_P(x), _P(w), _P(b), pad)
        assert got.is_contiguous()
        assert_close(got.numpy(), want, atol=10 * U * absref)
    with pytest.raises(RuntimeError, match="input channels"):
        F.conv_tbc(_P(x), _P(w[:, :2]), _P(b))
    with pytest.raises(RuntimeError, match="time, batch, in_channel"):
        F.conv_tbc(_P(x[0]), _P(w), _P(b))


def test_conv_past_loop_budget_in_its_gemm(rng):
    """conv's GEMM has a K of C/groups·prod(kernel) = 69,000 here: past lavapipe's budget, the
    GEMM must split K (ops/matmul.py)."""
    x, w = _f32(rng.standard_normal((1, 23000, 7))), _f32(rng.standard_normal((3, 23000, 3)))
    _check(TF.conv1d, F.conv1d, x, w, None, {"padding": 1})


def test_dtypes_the_kernels_cannot_read_are_widened(monkeypatch, rng):
    """A dtype stored in a way the spatial kernels do not read (bfloat16, 8-bit ints, as other
    issues add them) is widened to float32/int32 and the result narrowed back: here float32
    itself is declared unreadable, so the widening path runs and must give the same results."""
    from pyrite.ops import spatial

    x = pr.tensor(rng.standard_normal((2, 4, 7, 8)).astype(np.float32))
    w, wt = pr.randn(3, 4, 3, 3), pr.randn(4, 2, 3, 3)
    g = pr.rand(2, 3, 5, 2) * 2 - 1
    calls = [
        lambda: F.conv2d(x, w, padding=1),
        lambda: F.conv_transpose2d(x, wt, stride=2),
        lambda: F.unfold(x, 3),
        lambda: F.max_pool2d(x, 3, 2, 1, return_indices=True)[1],
        lambda: F.interpolate(x, scale_factor=1.5, mode="bicubic"),
        lambda: F.grid_sample(x, g, align_corners=False),
    ]
    want = [c().numpy() for c in calls]
    monkeypatch.setattr(spatial, "KERNEL_STYPES", ("i32",))
    for c, ref in zip(calls, want):
        np.testing.assert_array_equal(c().numpy(), ref)


# ---- regressions found by the differential sweep (tests/test_sweep.py) -------------------------
def test_sweep_conv_transpose_of_a_permuted_input():
    # conv's _mergeable skipped the size-1 dim between (8, ., 5) and read it as one run
    rng = np.random.default_rng(11)
    base = rng.standard_normal((5, 2, 1, 8, 1)).astype(np.float32)  # permuted below
    w = rng.standard_normal((1, 2, 2, 1, 1)).astype(np.float32)
    kw = dict(stride=(3, 1, 1), padding=(1, 0, 1), output_padding=(1, 0, 0), dilation=(2, 2, 1))
    t = torch.from_numpy(base).permute(1, 2, 3, 4, 0)  # (2, 1, 8, 1, 5), not contiguous
    p = pr.tensor(base).permute(1, 2, 3, 4, 0)
    want = TF.conv_transpose3d(t, torch.from_numpy(w), **kw)
    got = F.conv_transpose3d(p, pr.tensor(w), **kw)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
