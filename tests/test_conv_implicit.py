"""Convolution as an implicit GEMM (ops/conv.py `_conv_implicit`, kernels/matmul.gemm_fast with
`conv`): the GEMM's tiles gather the column matrix from the input, nothing of size C·k·L is
stored. Checked against torch in float64 with test_conv's per-output bound, on shapes drawn at
random (1-, 2- and 3-D, strides, padding, dilation, groups, bias, channels-last and sliced
inputs, output sizes that no tile divides), each tile of the GEMM's tables forced in turn; and
the rule's refusals (unaligned weights, half storage, the loop budget, few output positions),
which must fall back to im2col with the same results."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.ops import conv as C
from tests.test_conv import _check, _f32, small_budget  # noqa: F401 - a fixture

# the fast GEMM's tiles (ops/matmul.py FAST_GPU, FAST_CPU): (bm, bn, tm, tn, bk, dbuf)
TILES = [
    (64, 64, 4, 4, 16, True),
    (32, 32, 4, 4, 16, True),
    (16, 64, 4, 4, 16, True),
    (64, 64, 8, 8, 16, True),
    (128, 128, 8, 8, 16, False),
    (128, 256, 8, 16, 8, True),
]
TF_OF = {1: TF.conv1d, 2: TF.conv2d, 3: TF.conv3d}
PF_OF = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


@pytest.fixture
def implicit(monkeypatch):
    """Force the implicit GEMM on, with a given tile: yields a setter."""
    monkeypatch.setattr(C, "IMPLICIT", True)

    def use(tile):
        monkeypatch.setattr(C, "IMPLICIT_PARAMS", tile)

    return use


def _draw(r: np.random.Generator, tile):
    """A convolution the tile can run: O/groups a multiple of bm, C/groups·k of bk."""
    bm, _, _, _, bk, _ = tile
    dims = int(r.integers(1, 4))
    ker = tuple(int(k) for k in r.integers(1, 4 if dims == 3 else 6, dims))
    kprod = int(np.prod(ker))
    groups = int(r.choice([1, 1, 2, 3]))
    step = bk // np.gcd(bk, kprod)  # C/groups a multiple of this makes C/groups·k one of bk
    cg = step * int(r.integers(1, 3 if step > 4 else 5))
    og = bm * int(r.integers(1, 3 if bm >= 64 else 4))
    stride = tuple(int(s) for s in r.integers(1, 4, dims))
    dil = tuple(int(d) for d in r.integers(1, 3, dims))
    pad = tuple(int(p) for p in r.integers(0, 3, dims))
    ext = [d * (k - 1) + 1 for d, k in zip(dil, ker)]
    lo = 3 if dims == 3 else 5
    hi = 9 if dims == 3 else (23 if dims == 2 else 200)
    sp = tuple(max(e - 2 * p, int(r.integers(lo, hi))) for e, p in zip(ext, pad))
    n = int(r.integers(1, 4))
    kw = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups}
    return dims, (n, cg * groups) + sp, (og * groups, cg) + ker, kw


@pytest.mark.parametrize("tile", TILES, ids=[f"{t[0]}x{t[1]}" for t in TILES])
@pytest.mark.parametrize("draw", range(3))
def test_implicit_gemm_matches_torch(implicit, tile, draw):
    r = np.random.default_rng(1000 * TILES.index(tile) + draw)
    implicit(tile)
    dims, xs, ws, kw = _draw(r, tile)
    x, w = _f32(r.standard_normal(xs)), _f32(r.standard_normal(ws))
    b = _f32(r.standard_normal(ws[0])) if draw != 1 else None
    _check(TF_OF[dims], PF_OF[dims], x, w, b, kw, "t" if draw == 2 else "c")
    assert C.LAST_IMPLICIT == tile, (dims, xs, ws, kw)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_implicit_gemm_reads_sliced_inputs_and_same_padding(implicit, rng):
    """The input is gathered by scalars through its strides: a slice at an odd offset and a
    permuted view need no copy; padding='same' pads the odd one out on the right."""
    implicit((64, 64, 4, 4, 16, True))
    big = _f32(rng.standard_normal((3, 21, 15, 19)))
    w = _f32(rng.standard_normal((64, 16, 3, 4)))
    b = _f32(rng.standard_normal(64))
    xv = pr.tensor(big, dtype=pr.float32)[1:, 3:19, 1:, 2:]
    ref = torch.tensor(big)[1:, 3:19, 1:, 2:]
    for kw in ({"padding": (1, 2), "stride": (2, 1)}, {"padding": "same", "dilation": (2, 1)}):
        got = F.conv2d(xv, pr.tensor(w, dtype=pr.float32), pr.tensor(b, dtype=pr.float32), **kw)
        assert C.LAST_IMPLICIT is not None
        want = TF.conv2d(ref, torch.tensor(w), torch.tensor(b), **kw).numpy()
        absref = TF.conv2d(ref.abs(), torch.tensor(np.abs(w)), torch.tensor(np.abs(b)), **kw)
        bound = (16 * 12 + 1) * 2.0**-24 * absref.numpy()
        np.testing.assert_array_less(np.abs(got.numpy() - want), bound + 1e-30)


def test_implicit_gemm_gradients(implicit, rng):
    """A convolution taken by the implicit GEMM records as any other: its input, weight and bias
    gradients match torch's."""
    implicit((32, 32, 4, 4, 16, True))
    x = rng.standard_normal((2, 16, 11, 9)).astype(np.float32)
    w = rng.standard_normal((64, 8, 3, 2)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    g = rng.standard_normal((2, 64, 6, 10)).astype(np.float32)
    kw = {"stride": (2, 1), "padding": (1, 1), "groups": 2}
    px, pw, pb = (pr.tensor(a).requires_grad_() for a in (x, w, b))
    y = F.conv2d(px, pw, pb, **kw)
    assert C.LAST_IMPLICIT is not None
    (y * pr.tensor(g)).sum().backward()
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    ty = TF.conv2d(tx, tw, tb, **kw)
    (ty * torch.tensor(g, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    for p, t in ((px, tx), (pw, tw), (pb, tb)):
        np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "xs,ws,dtype,why",
    [
        ((2, 3, 12, 12), (64, 3, 3, 3), np.float32, "C·k = 27 is no multiple of the K step"),
        ((2, 16, 12, 12), (48, 16, 3, 3), np.float32, "O = 48 is no multiple of a tile's rows"),
    ],
)
def test_unaligned_convolutions_take_im2col(implicit, xs, ws, dtype, why, rng):
    implicit((64, 64, 4, 4, 16, True))
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    got = F.conv2d(pr.tensor(x), pr.tensor(w), padding=1)
    assert C.LAST_IMPLICIT is None, why
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    want = TF.conv2d(torch.tensor(x64), torch.tensor(w64), padding=1).numpy()
    absref = TF.conv2d(torch.tensor(np.abs(x64)), torch.tensor(np.abs(w64)), padding=1).numpy()
    u = 2.0**-11 if dtype == np.float16 else 2.0**-24
    bound = (ws[1] * 9 + 1) * 2.0**-24 * absref + (u * absref if dtype == np.float16 else 0)
    assert np.all(np.abs(got.numpy().astype(np.float64) - want) <= bound + 1e-30), why


def test_implicit_gemm_respects_the_loop_budget(implicit, small_budget, rng):  # noqa: F811
    """Under a budget of 150 iterations the implicit GEMM's K loop (K / 16 steps) fits for
    K = 144 but not for K = 4,608: that one takes im2col, whose GEMM splits K."""
    implicit((64, 64, 4, 4, 16, True))
    for c, taken in ((16, True), (512, False)):
        x, w = _f32(rng.standard_normal((1, c, 9, 9))), _f32(rng.standard_normal((64, c, 3, 3)))
        _check(TF.conv2d, F.conv2d, x, w, None, {"padding": 1})
        assert (C.LAST_IMPLICIT is not None) == taken, c


def test_the_rule_takes_the_implicit_gemm_for_big_convolutions(monkeypatch, rng):
    """Unforced: an aligned convolution with enough outputs for the device's fast table takes
    it; one with fewer than IMPLICIT_MIN_L output positions an image (the weight gradient's
    convolution, whose output is the kernel box) keeps im2col."""
    monkeypatch.setattr(C, "IMPLICIT", None)
    x, w = _f32(rng.standard_normal((2, 32, 32, 32))), _f32(rng.standard_normal((128, 32, 3, 3)))
    _check(TF.conv2d, F.conv2d, x, w, None, {"padding": 1})
    assert C.LAST_IMPLICIT is not None
    x = _f32(rng.standard_normal((2, 32, 7, 7)))
    _check(TF.conv2d, F.conv2d, x, w, None, {"padding": 0})
    assert C.LAST_IMPLICIT is None
    monkeypatch.setattr(C, "IMPLICIT", False)
    x = _f32(rng.standard_normal((2, 32, 32, 32)))
    _check(TF.conv2d, F.conv2d, x, w, None, {"padding": 1})
    assert C.LAST_IMPLICIT is None


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize(
    "xs,ws,kw",
    [
        ((2, 6, 9, 8), (6, 2, 3, 2), {"groups": 3, "padding": (1, 1), "dilation": (2, 1)}),
        ((1, 4, 7, 9), (6, 4, 3, 3), {"padding": 0}),
        ((2, 3, 11), (5, 3, 4), {"padding": 3, "dilation": 2}),
        ((1, 2, 4, 5, 6), (3, 2, 2, 3, 3), {"padding": (1, 2, 1)}),
        # asymmetric 'same' padding, padding past the kernel, stride 2 (col2im)
        ((1, 3, 8, 9), (4, 3, 2, 2), {"padding": "same"}),
        ((1, 3, 6, 7), (4, 3, 2, 2), {"padding": 2}),
        ((2, 4, 9, 9), (4, 2, 3, 3), {"groups": 2, "stride": 2, "padding": 1}),
    ],
)
def test_convolution_gradients_through_either_transposed_path(xs, ws, kw, rng):
    """dx of a convolution is a transposed convolution of g: an implicit GEMM at stride 1 (for
    those big enough), col2im otherwise. Both match torch, 'same' padding's slice included."""
    dims = len(xs) - 2
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = TF_OF[dims](tx, tw, **kw)
    g = rng.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    px = pr.tensor(x.astype(np.float32)).requires_grad_()
    pw = pr.tensor(w.astype(np.float32)).requires_grad_()
    (PF_OF[dims](px, pw, **kw) * pr.tensor(g.astype(np.float32))).sum().backward()
    # each gradient element sums at most (O or N·L)·k products of magnitude ~1: a loose bound
    for got, want in ((px.grad, tx.grad), (pw.grad, tw.grad)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tile", TILES[:3], ids=[f"{t[0]}x{t[1]}" for t in TILES[:3]])
@pytest.mark.parametrize("draw", range(2))
def test_stride_one_transposed_convolution_is_an_implicit_gemm(implicit, tile, draw):
    """conv_transpose of stride 1 (output_padding below the dilation) gathers its input as a
    convolution does, each group's weight block with its channel dims exchanged."""
    r = np.random.default_rng(7000 + 10 * TILES.index(tile) + draw)
    implicit(tile)
    bm, bk = tile[0], tile[4]
    dims = int(r.integers(1, 4))
    ker = tuple(int(k) for k in r.integers(1, 4, dims))
    groups = int(r.choice([1, 2]))
    cig = bk // np.gcd(bk, int(np.prod(ker))) * int(r.integers(1, 3))
    dil = tuple(int(d) for d in r.integers(1, 3, dims))
    kw = {
        "stride": 1,
        "padding": tuple(int(p) for p in r.integers(0, 2, dims)),
        "output_padding": tuple(int(r.integers(0, d)) for d in dil),
        "groups": groups,
        "dilation": dil,
    }
    sp = tuple(int(v) for v in r.integers(3, 6 if dims == 3 else 14, dims))
    x = _f32(r.standard_normal((2, cig * groups) + sp))
    w = _f32(r.standard_normal((cig * groups, bm) + ker))
    b = _f32(r.standard_normal(bm * groups)) if draw else None
    tf = {1: TF.conv_transpose1d, 2: TF.conv_transpose2d, 3: TF.conv_transpose3d}[dims]
    pf = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    _check(tf, pf, x, w, b, kw, "t" if draw else "c")
    assert C.LAST_IMPLICIT == tile, (dims, x.shape, w.shape, kw)


@pytest.mark.parametrize("tile", TILES[:4], ids=[f"{t[0]}x{t[1]}" for t in TILES[:4]])
@pytest.mark.parametrize("draw", range(3))
def test_strided_transposed_convolution_runs_by_phases(implicit, tile, draw, monkeypatch):
    """A stride-s transposed convolution is one implicit GEMM per output phase (the outputs
    equal modulo the stride): a stride-1 convolution by the kernel offsets that reach it,
    flipped, stored through the output's strides (ops/conv.py `_conv_transpose_phases`).
    Random strides, paddings, output paddings, dilations (sharing factors with the stride or
    not), groups; NaN-poisoned outputs show every position written."""
    r = np.random.default_rng(8000 + 10 * TILES.index(tile) + draw)
    implicit(tile)
    monkeypatch.setattr(C, "PHASES", True)  # (the rule takes phases on CPU adapters only)
    bm, bk = tile[0], tile[4]
    dims = int(r.integers(1, 4))
    while True:
        ker = tuple(int(k) for k in r.integers(1, 5 if dims < 3 else 4, dims))
        stride = tuple(int(v) for v in r.integers(1, 4, dims))
        dil = tuple(int(v) for v in r.integers(1, 3, dims))
        # every phase needs a kernel offset reaching it (else col2im: tested below)
        if max(stride) > 1 and all(
            any((q - kk * d) % s == 0 for kk in range(k))
            for k, s, d in zip(ker, stride, dil)
            for q in range(s)
        ):
            break
    groups = int(r.choice([1, 2]))
    kw = {
        "stride": stride,
        "padding": tuple(int(v) for v in r.integers(0, 3, dims)),
        "output_padding": tuple(int(r.integers(0, max(s, d))) for s, d in zip(stride, dil)),
        "groups": groups,
        "dilation": dil,
    }
    while True:  # (an input big enough for an output: torch refuses an empty one)
        sp = tuple(int(v) for v in r.integers(2, 5 if dims == 3 else 10, dims))
        geo = zip(sp, stride, kw["padding"], dil, ker, kw["output_padding"])
        if all((i - 1) * s - 2 * p + d * (k - 1) + o + 1 > 0 for i, s, p, d, k, o in geo):
            break
    x = _f32(r.standard_normal((2, bk * groups) + sp))
    w = _f32(r.standard_normal((bk * groups, bm) + ker))
    b = _f32(r.standard_normal(bm * groups)) if draw else None
    tf = {1: TF.conv_transpose1d, 2: TF.conv_transpose2d, 3: TF.conv_transpose3d}[dims]
    pf = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[dims]
    _check(tf, pf, x, w, b, kw, "t" if draw == 2 else "c")
    assert C.LAST_IMPLICIT == tile, (dims, x.shape, w.shape, kw)


def test_transposed_convolution_with_unreached_phases_keeps_col2im(implicit, rng):
    """A 1x1 kernel at stride 2 reaches only every other output (the rest are the bias): no
    phase GEMM for those, so col2im runs it."""
    implicit((64, 64, 4, 4, 16, True))
    x, w = _f32(rng.standard_normal((2, 16, 7, 6))), _f32(rng.standard_normal((16, 64, 1, 1)))
    b = _f32(rng.standard_normal(64))
    _check(TF.conv_transpose2d, F.conv_transpose2d, x, w, b, {"stride": 2})
    assert C.LAST_IMPLICIT is None


def test_strided_transposed_convolution_on_gpus_takes_col2im(rng, monkeypatch):
    """On GPU adapters (C.PHASES's rule: measured slower there) a strided transposed
    convolution and a strided convolution's input gradient run by col2im, and agree with
    torch; on CPU adapters by phases."""
    x = _f32(rng.standard_normal((2, 16, 9, 7)))
    w = _f32(rng.standard_normal((16, 32, 4, 4)))
    b = _f32(rng.standard_normal(32))
    monkeypatch.setattr(backend.current(), "adapter_type", "DiscreteGPU")
    _check(TF.conv_transpose2d, F.conv_transpose2d, x, w, b, {"stride": 2, "padding": 1})
    assert C.LAST_IMPLICIT is None
    monkeypatch.setattr(backend.current(), "adapter_type", "CPU")
    monkeypatch.setattr(C, "IMPLICIT", True)
    _check(TF.conv_transpose2d, F.conv_transpose2d, x, w, b, {"stride": 2, "padding": 1})
    assert C.LAST_IMPLICIT is not None


@pytest.mark.skipif(not backend.current().has_f16, reason="the device has no shader-f16")
def test_float16_implicit_gemm(implicit, rng):
    """f16 storage, f32 sums: the f32 bound plus one f16 rounding of each output (a convolution
    and a stride-1 transposed one)."""
    implicit((64, 64, 4, 4, 16, True))
    x = rng.standard_normal((2, 32, 13, 11)).astype(np.float16)
    b = rng.standard_normal(64).astype(np.float16)
    x64, b64 = torch.tensor(x, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    for tf, pf, ws in (
        (TF.conv2d, F.conv2d, (64, 32, 3, 3)),
        (TF.conv_transpose2d, F.conv_transpose2d, (32, 64, 3, 3)),
    ):
        w = (rng.standard_normal(ws) / 8).astype(np.float16)
        w64 = torch.tensor(w, dtype=torch.float64)
        got = pf(pr.tensor(x), pr.tensor(w), pr.tensor(b), padding=1)
        assert C.LAST_IMPLICIT is not None and got.dtype is pr.float16
        want = tf(x64, w64, b64, padding=1).numpy()
        absref = tf(x64.abs(), w64.abs(), b64.abs(), padding=1).numpy()
        bound = (32 * 9 + 1) * 2.0**-24 * absref + 2.0**-11 * np.abs(want)
        assert np.all(np.abs(got.numpy().astype(np.float64) - want) <= bound + 1e-30)


@pytest.mark.parametrize("tile", TILES, ids=[f"{t[0]}x{t[1]}" for t in TILES])
@pytest.mark.parametrize("splits", [1, 2])
def test_weight_gradient_is_an_implicit_gemm(implicit, tile, splits, monkeypatch):
    """dW = Σ_{n,l} g[n, o, l]·x[n, c, l·stride - pad + k·dil] as one implicit GEMM a group
    (columns: input channel × kernel offset; K: image × output position, in `splits` chunks of
    whole images), against torch's weight gradient in float64. Shapes drawn at random."""
    r = np.random.default_rng(9000 + 10 * TILES.index(tile) + splits)
    implicit(tile)
    monkeypatch.setattr(C, "WGRAD_SPLITS", splits)
    bm, bk = tile[0], tile[4]
    dims = int(r.integers(1, 4))
    ker = tuple(int(k) for k in r.integers(1, 4, dims))
    groups = int(r.choice([1, 2]))
    stride = tuple(int(v) for v in r.integers(1, 3, dims))
    dil = tuple(int(v) for v in r.integers(1, 3, dims))
    pad = tuple(min(int(v), d * (k - 1) // 2) for v, d, k in zip(r.integers(0, 2, dims), dil, ker))
    n = 2 * splits
    # output sizes drawn, the last stretched so a chunk's output positions fill whole K steps;
    # the input sized to give them (plus a remainder the stride leaves unused)
    osp = [int(v) for v in r.integers(1, 5 if dims == 3 else 9, dims)]
    osp[-1] *= bk // np.gcd(bk, n // splits * int(np.prod(osp)))
    sp = tuple(
        (o - 1) * s + d * (k - 1) + 1 - 2 * p + int(r.integers(0, s))
        for o, s, d, k, p in zip(osp, stride, dil, ker, pad)
    )
    x = r.standard_normal((n, 3 * groups) + sp)
    w = r.standard_normal((bm * groups, 3) + ker)
    kw = {"stride": stride, "padding": pad, "dilation": dil, "groups": groups}
    tw = torch.tensor(w, requires_grad=True)
    ty = TF_OF[dims](torch.tensor(x), tw, **kw)
    g = r.standard_normal(tuple(ty.shape))
    (ty * torch.tensor(g)).sum().backward()
    pw = pr.tensor(w.astype(np.float32)).requires_grad_()
    py = PF_OF[dims](pr.tensor(x.astype(np.float32)), pw, **kw)
    (py * pr.tensor(g.astype(np.float32))).sum().backward()
    assert C.LAST_WGRAD == (tile, splits), (dims, x.shape, w.shape, kw)
    # each entry sums n·L products of two f32-rounded values: (n·L + 2)·u·Σ|g||x|, Σ|g||x| the
    # weight gradient of |x| under |g|
    tx = torch.tensor(np.abs(x))
    tw2 = torch.zeros_like(tw, requires_grad=True)
    (TF_OF[dims](tx, tw2, **kw) * torch.tensor(np.abs(g))).sum().backward()
    nl = n * int(np.prod(ty.shape[2:]))
    bound = (nl + 2) * 2.0**-24 * tw2.grad.numpy()
    np.testing.assert_array_less(np.abs(pw.grad.numpy() - tw.grad.numpy()), bound + 1e-30)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
def test_weight_gradient_same_padding_half_and_double_backward(implicit, rng):
    """'same' padding with an even kernel (right side padded more) needs nothing: past the
    input reads 0. A double backward (create_graph) takes the recorded composite."""
    implicit((32, 32, 4, 4, 16, True))
    x, w = rng.standard_normal((4, 6, 9, 8)), rng.standard_normal((32, 6, 2, 4))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = TF.conv2d(tx, tw, padding="same")
    g = rng.standard_normal(tuple(ty.shape))
    (gw,) = torch.autograd.grad((ty * torch.tensor(g)).sum(), tw, create_graph=True)
    px = pr.tensor(x.astype(np.float32)).requires_grad_()
    pw = pr.tensor(w.astype(np.float32)).requires_grad_()
    py = F.conv2d(px, pw, padding="same")
    (pgw,) = pr.autograd.grad((py * pr.tensor(g.astype(np.float32))).sum(), pw, create_graph=True)
    assert C.LAST_WGRAD is None  # (recorded)
    np.testing.assert_allclose(pgw.detach().numpy(), gw.detach().numpy(), rtol=1e-4, atol=1e-4)
    pw.grad = None
    (pgw * pgw).sum().backward()
    (gw * gw).sum().backward()
    np.testing.assert_allclose(px.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-3)
    pw2 = pr.tensor(w.astype(np.float32)).requires_grad_()
    (
        F.conv2d(pr.tensor(x.astype(np.float32)), pw2, padding="same")
        * pr.tensor(g.astype(np.float32))
    ).sum().backward()
    assert C.LAST_WGRAD is not None
    np.testing.assert_allclose(pw2.grad.numpy(), gw.detach().numpy(), rtol=1e-4, atol=1e-4)
    if backend.current().has_f16:
        pw3 = pr.tensor(w.astype(np.float16)).requires_grad_()
        y3 = F.conv2d(pr.tensor(x.astype(np.float16)), pw3, padding="same")
        (y3 * pr.tensor(g.astype(np.float16))).sum().backward()
        assert C.LAST_WGRAD is not None and pw3.grad.dtype is pr.float16
        want = gw.detach().numpy()
        np.testing.assert_allclose(pw3.grad.numpy().astype(np.float64), want, rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize(
    "xs,ws",
    [
        ((1, 32, 12, 12), (64, 32, 3, 3)),
        ((2, 64, 33, 31), (64, 64, 3, 3)),
        ((1, 16, 9), (32, 16, 5)),
    ],
)
def test_gpu_rule_convolutions_of_few_outputs(monkeypatch, xs, ws, rng):
    """The GPU table of the implicit GEMM (ops/matmul.py CONV_GPU) on small convolutions, run
    here with the adapter taken for a GPU: every tile it offers builds with `conv` (the K-group
    rows of the GEMM's table once leaked into it, and every GPU convolution of fewer than 1M
    outputs raised an unpacking error), and the results match torch's."""
    from pyrite.ops import matmul as mm

    dev = backend.current()
    monkeypatch.setattr(dev, "adapter_type", "DiscreteGPU")
    monkeypatch.setattr(C, "IMPLICIT", None)
    mm._plans.clear()
    for outputs in (1, 5_000, 300_000, 2_000_000, 5_000_000):
        for params in C._implicit_tiles(dev, 64, outputs):
            assert len(params) == 6 and params[5] in (True, False), params
    x, w = _f32(rng.standard_normal(xs)), _f32(rng.standard_normal(ws))
    fn = (TF.conv2d, F.conv2d) if len(xs) == 4 else (TF.conv1d, F.conv1d)
    _check(*fn, x, w, None, {"padding": 1})
    mm._plans.clear()
