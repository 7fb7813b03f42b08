"""Resampling (ops/resample.py) against torch.nn.functional on the same f32 inputs.

PyTorch's CPU kernels compute source indices and weights in f32 and pyrite's do the same
arithmetic, so nearest modes must match exactly (indices), and interpolating modes are within
(4·taps + 4·(size + 1))·u·max|x|: each of the `taps` products and sums rounds once (Σ|w| <= 1.25
a dim for cubic weights), and a compiler contracting scale·(o + 0.5) - 0.5 into an fma moves the
source coordinate by up to an ulp of the input size, which moves a weight by as much (times at
most 2·max|x|). grid_sample: the same argument with the unnormalised grid coordinate.
Antialiased resampling is compared with an independent float64 numpy implementation of the
separable filter (PIL's, which PyTorch follows) as well as with torch.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import pyrite as pr
import pyrite.nn.functional as F
from pyrite import backend
from pyrite.kernels import resample as K
from pyrite.testing.tolerance import assert_close

U = 2.0**-24


def _dev(x, layout="c"):
    if layout == "t" and x.ndim >= 3:  # channels-last storage viewed as (N, C, ...)
        perm = (0,) + tuple(range(2, x.ndim)) + (1,)
        back = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
        return pr.tensor(np.ascontiguousarray(x.transpose(perm))).permute(*back)
    return pr.tensor(x)


def _tol(x, taps, sizes):
    return (4 * taps + 4 * (max(sizes) + 1)) * U * float(np.abs(x).max(initial=0.0))


@pytest.fixture
def small_budget():
    dev = backend.current()
    before = dev._loop_budget
    dev._loop_budget = 16  # max_loop_iterations() = 8
    yield
    dev._loop_budget = before


INTERP = [
    # (shape, kwargs)
    ((2, 3, 11), {"scale_factor": 1.7}),
    ((1, 2, 13), {"scale_factor": 0.6}),
    ((2, 1, 5), {"size": 17}),
    ((1, 1, 1), {"size": 4}),  # a single input sample
    ((2, 3, 9, 11), {"scale_factor": 2}),
    ((1, 2, 7, 5), {"scale_factor": (1.7, 0.6)}),
    ((2, 2, 13, 6), {"size": (5, 11)}),
    ((1, 3, 8, 9), {"scale_factor": 0.5}),
    ((1, 1, 5, 7), {"scale_factor": (2.5, 1.3), "recompute_scale_factor": True}),
    ((1, 2, 10, 9), {"scale_factor": 1.05}),  # out = in with a scale: PyTorch's shortcuts
    ((1, 2, 5, 4), {"scale_factor": 2.1}),  # out = 2 in with a scale
    ((1, 2, 4, 5, 6), {"scale_factor": 1.7}),
    ((2, 1, 5, 3, 7), {"size": (3, 7, 2)}),
    ((1, 2, 3, 4, 5), {"scale_factor": (0.6, 2, 1.5)}),
]
_LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


@pytest.mark.parametrize("shape,kw", INTERP, ids=[f"{s}-{list(k.values())}" for s, k in INTERP])
def test_interpolate(shape, kw, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    t = torch.tensor(x)
    dims = len(shape) - 2
    sizes = list(shape[2:])
    for mode in ("nearest", "nearest-exact"):
        want = TF.interpolate(t, mode=mode, **kw).numpy()
        got = F.interpolate(_dev(x, "t"), mode=mode, **kw)
        np.testing.assert_array_equal(got.numpy(), want, err_msg=mode)
    modes = [_LINEAR[dims]] + (["bicubic"] if dims == 2 else [])
    for mode in modes:
        taps = (2 if mode != "bicubic" else 4) ** dims
        for ac in (False, True):
            want = TF.interpolate(t, mode=mode, align_corners=ac, **kw).numpy()
            got = F.interpolate(_dev(x), mode=mode, align_corners=ac, **kw)
            sz = sizes + list(want.shape[2:])
            assert_close(got.numpy(), want, atol=_tol(x, taps, sz), msg=f"{mode} {ac}")
    want = TF.interpolate(t, mode="area", **kw).numpy()
    got = F.interpolate(_dev(x), mode="area", **kw)
    assert_close(got.numpy(), want, atol=_tol(x, 8, sizes), msg="area")


def test_interpolate_hot_case_and_f16(rng):
    """A diffusion UNet's 2x nearest upsampling, and f16 storage (computed in f32)."""
    x = rng.standard_normal((2, 32, 16, 16)).astype(np.float32)
    got = F.interpolate(pr.tensor(x), scale_factor=2.0, mode="nearest")
    np.testing.assert_array_equal(got.numpy(), np.repeat(np.repeat(x, 2, 2), 2, 3))
    h = x[:, :3].astype(np.float16)
    got = F.interpolate(pr.tensor(h), scale_factor=1.5, mode="bilinear")
    assert got.dtype is pr.float16
    want = TF.interpolate(torch.tensor(h.astype(np.float32)), scale_factor=1.5, mode="bilinear")
    assert_close(got.numpy().astype(np.float32), want.numpy(), atol=1e-6, rtol=2.0**-11)
    np.testing.assert_array_equal(
        F.interpolate(pr.tensor(h), size=(7, 9)).numpy(),
        TF.interpolate(torch.tensor(h), size=(7, 9)).numpy(),
    )


def _aa_ref(x, out_sp, mode, align, scales):
    """Antialiased resampling in float64: per dim (W then H), PIL's separable filter."""

    def filt(t):
        t = np.abs(t)
        if mode == "bilinear":
            return np.maximum(0.0, 1.0 - t)
        if mode == "lanczos":
            return np.where(t < 3, np.sinc(t) * np.sinc(t / 3), 0.0)
        a = -0.5
        return np.where(
            t < 1,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0),
        )

    support0 = {"bilinear": 1.0, "bicubic": 2.0, "lanczos": 3.0}[mode]
    y = x.astype(np.float64)
    for axis in (3, 2):
        n_in, n_out = y.shape[axis], out_sp[axis - 2]
        if n_in == n_out:
            continue
        s = scales[axis - 2]
        if align:
            scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            scale = 1.0 / s if s else n_in / n_out
        sup = support0 * max(scale, 1.0)
        mat = np.zeros((n_out, n_in))
        for i in range(n_out):
            c = scale * (i + 0.5)
            lo, hi = max(int(c - sup + 0.5), 0), min(int(c + sup + 0.5), n_in)
            w = filt((np.arange(lo, hi) - c + 0.5) / max(scale, 1.0))
            mat[i, lo:hi] = w / w.sum() if w.sum() != 0 else w
        y = np.moveaxis(np.tensordot(mat, np.moveaxis(y, axis, 0), axes=1), 0, axis)
    return y


AA = [
    ((2, 3, 20, 17), {"scale_factor": 0.3}),
    ((1, 2, 9, 31), {"size": (4, 5)}),
    ((1, 1, 8, 6), {"scale_factor": 1.7}),
    ((2, 2, 12, 5), {"size": (3, 1)}),  # PyTorch 2.13's CPU kernel gets a width of 1 wrong
    ((1, 2, 16, 16), {"scale_factor": (0.25, 2.0)}),
]


def _torch_has_lanczos() -> bool:
    """Older torch builds (the H200 machine's) refuse antialiased lanczos; the numpy reference
    above is the oracle there."""
    try:
        TF.interpolate(torch.zeros(1, 1, 4, 4), size=(2, 2), mode="lanczos", antialias=True)
    except (ValueError, NotImplementedError, RuntimeError):
        return False
    return True


@pytest.mark.parametrize("shape,kw", AA, ids=[str(a[0]) for a in AA])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias(shape, kw, mode, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    aligns = (False,) if mode == "lanczos" else (False, True)
    for ac in aligns:
        got = F.interpolate(_dev(x, "t"), mode=mode, align_corners=ac, antialias=True, **kw)
        out_sp = got.shape[2:]
        sf = kw.get("scale_factor")
        scales = list(sf) if isinstance(sf, tuple) else [sf, sf]
        want = _aa_ref(x, out_sp, mode, ac, scales)
        taps = max(2 * math.ceil(3 * max(a / b, 1.0)) + 1 for a, b in zip(shape[2:], out_sp))
        tol = _tol(x, 2 * taps, list(shape[2:]))
        assert_close(got.numpy(), want, atol=tol, msg=f"{mode} {ac} (numpy)")
        if out_sp[-1] != 1 and (mode != "lanczos" or _torch_has_lanczos()):
            tw = TF.interpolate(torch.tensor(x), mode=mode, align_corners=ac, antialias=True, **kw)
            assert_close(got.numpy(), tw.numpy(), atol=tol, msg=f"{mode} {ac} (torch)")


GRID = [
    # (input shape, grid shape)
    ((2, 3, 7, 9), (2, 5, 6, 2)),
    ((1, 20, 4, 5), (1, 3, 7, 2)),  # channels in two blocks
    ((2, 1, 1, 6), (2, 4, 4, 2)),  # an input of height 1
    ((2, 3, 4, 5, 6), (2, 3, 2, 4, 3)),
    ((1, 2, 1, 3, 2), (1, 2, 2, 2, 3)),
]


@pytest.mark.parametrize("xs,gs", GRID, ids=[str(g[0]) for g in GRID])
def test_grid_sample(xs, gs, rng):
    x = rng.standard_normal(xs).astype(np.float32)
    g = (rng.random(gs) * 3.0 - 1.5).astype(np.float32)
    g.reshape(-1)[::5] = np.round(g.reshape(-1)[::5] * 4) / 4  # exact ties for rounding
    rank = len(xs) - 2
    modes = ("bilinear", "nearest", "bicubic") if rank == 2 else ("bilinear", "nearest")
    for mode in modes:
        for pm in ("zeros", "border", "reflection"):
            for ac in (False, True):
                want = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode, pm, ac).numpy()
                got = F.grid_sample(_dev(x, "t"), pr.tensor(g), mode, pm, ac)
                taps = {"bilinear": 2, "nearest": 1, "bicubic": 4}[mode] ** rank
                tol = _tol(x, taps, list(xs[2:]))
                assert_close(got.numpy(), want, atol=tol, msg=f"{mode} {pm} {ac}")


def test_grid_sample_strided_grid_and_f16(rng):
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    g = (rng.random((2, 2, 5, 4)) * 2.2 - 1.1).astype(np.float32)  # (N, 2, H, W) permuted
    want = TF.grid_sample(torch.tensor(x), torch.tensor(g).permute(0, 2, 3, 1), align_corners=False)
    got = F.grid_sample(pr.tensor(x), pr.tensor(g).permute(0, 2, 3, 1), align_corners=False)
    assert_close(got.numpy(), want.numpy(), atol=_tol(x, 4, [7]))
    xh, gh = x.astype(np.float16), g.transpose(0, 2, 3, 1).astype(np.float16)
    got = F.grid_sample(pr.tensor(xh), pr.tensor(gh), align_corners=True)
    assert got.dtype is pr.float16
    want = TF.grid_sample(torch.tensor(xh).float(), torch.tensor(gh).float(), align_corners=True)
    assert_close(got.numpy().astype(np.float32), want.numpy(), atol=1e-5, rtol=2.0**-11)


def test_grid_sample_warns_without_align_corners():
    with pytest.warns(UserWarning, match="align_corners=False since 1.3.0"):
        F.grid_sample(pr.ones(1, 1, 3, 3), pr.zeros(1, 2, 2, 2))


@pytest.mark.parametrize("size", [(2, 3, 5, 7), (1, 1, 1, 4), (2, 3, 4, 5, 6), (1, 2, 1, 3, 1)])
def test_affine_grid(size, rng):
    k = len(size) - 2
    theta = rng.standard_normal((size[0], k, k + 1)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unit-size grids with align_corners=True warn
        for ac in (False, True):
            want = TF.affine_grid(torch.tensor(theta), size, ac).numpy()
            got = F.affine_grid(pr.tensor(theta), size, ac)
            # k+1 products and sums of |θ|·|base| <= Σ|θ| each, plus a rounding of the base
            tol = (2 * k + 4) * U * np.abs(theta).sum(-1).max()
            assert_close(got.numpy(), want, atol=tol, msg=str(ac))


def test_pixel_and_channel_shuffle(rng):
    for shape, r in (((2, 12, 3, 4), 2), ((18, 2, 5), 3), ((2, 3, 8, 2, 3), 2), ((1, 5, 2, 2), 1)):
        x = rng.standard_normal(shape).astype(np.float32)
        want = TF.pixel_shuffle(torch.tensor(x), r).numpy()
        np.testing.assert_array_equal(F.pixel_shuffle(_dev(x, "t"), r).numpy(), want)
        np.testing.assert_array_equal(pr.pixel_shuffle(pr.tensor(x), r).numpy(), want)
        np.testing.assert_array_equal(F.pixel_unshuffle(pr.tensor(want), r).numpy(), x)
    x = rng.standard_normal((2, 6, 4, 6)).astype(np.float32)
    want = TF.pixel_unshuffle(torch.tensor(x), 2).numpy()
    np.testing.assert_array_equal(pr.pixel_unshuffle(pr.tensor(x), 2).numpy(), want)
    want = TF.channel_shuffle(torch.tensor(x), 3).numpy()
    np.testing.assert_array_equal(F.channel_shuffle(pr.tensor(x), 3).numpy(), want)
    np.testing.assert_array_equal(pr.native_channel_shuffle(pr.tensor(x), 3).numpy(), want)
    xi = rng.integers(0, 9, (1, 4, 2, 3))
    np.testing.assert_array_equal(
        F.pixel_shuffle(pr.tensor(xi, dtype=pr.int32), 2).numpy(),
        TF.pixel_shuffle(torch.tensor(xi), 2).numpy(),
    )


def test_deprecated_upsample_names(rng):
    x = rng.standard_normal((1, 2, 4, 5)).astype(np.float32)
    t = torch.tensor(x)
    with pytest.warns(UserWarning, match="deprecated"):
        got = F.upsample(pr.tensor(x), scale_factor=2, mode="bilinear")
    assert_close(
        got.numpy(), TF.interpolate(t, scale_factor=2, mode="bilinear"), atol=_tol(x, 4, [8])
    )
    with pytest.warns(UserWarning, match="deprecated"):
        got = F.upsample_nearest(pr.tensor(x), size=(3, 7))
    np.testing.assert_array_equal(got.numpy(), TF.interpolate(t, size=(3, 7)).numpy())
    with pytest.warns(UserWarning, match="deprecated"):
        got = F.upsample_bilinear(pr.tensor(x), scale_factor=1.5)
    want = TF.interpolate(t, scale_factor=1.5, mode="bilinear", align_corners=True)
    assert_close(got.numpy(), want.numpy(), atol=_tol(x, 4, [8]))


# ---- the loop budget ---------------------------------------------------------------------------
def test_resample_kernels_loop_free():
    """interpolate's kernels unroll their taps: no loop, nothing for the budget to stop."""
    for mode, rank in (("nearest", 2), ("nearest-exact", 3), ("linear", 3), ("cubic", 2)):
        src = K.interp(mode, rank, "f32").wgsl
        assert "for (" not in src and "loop" not in src


def test_antialias_past_loop_budget(rng):
    """100,000 columns to 2: each output's window holds 100,001 taps (split into dispatches)."""
    x = rng.standard_normal((1, 2, 2, 100000)).astype(np.float32)
    got = F.interpolate(pr.tensor(x), size=(2, 2), mode="bilinear", antialias=True)
    want = TF.interpolate(torch.tensor(x), size=(2, 2), mode="bilinear", antialias=True).numpy()
    ref = _aa_ref(x, (2, 2), "bilinear", False, [None, None])
    assert_close(got.numpy(), ref, atol=1e-5 * np.abs(x).max())
    assert_close(want, ref, atol=1e-5 * np.abs(x).max())


def test_loops_under_a_tiny_budget(small_budget, rng):
    x = rng.standard_normal((1, 20, 9, 17)).astype(np.float32)
    got = F.interpolate(pr.tensor(x), scale_factor=0.3, mode="bicubic", antialias=True)
    want = TF.interpolate(torch.tensor(x), scale_factor=0.3, mode="bicubic", antialias=True)
    assert_close(got.numpy(), want.numpy(), atol=_tol(x, 40, [17]))
    g = (rng.random((1, 3, 4, 2)) * 2.2 - 1.1).astype(np.float32)
    got = F.grid_sample(pr.tensor(x), pr.tensor(g), "bicubic", "reflection", False)
    want = TF.grid_sample(torch.tensor(x), torch.tensor(g), "bicubic", "reflection", False)
    assert_close(got.numpy(), want.numpy(), atol=_tol(x, 16, [17]))


# ---- errors ------------------------------------------------------------------------------------
def test_interpolate_errors():
    x = pr.ones(1, 1, 4, 4)
    with pytest.raises(RuntimeError, match=r"sizes should be greater than 0.*input \(W: 4\)"):
        F.interpolate(pr.ones(1, 1, 4), size=0)
    with pytest.raises(RuntimeError, match="sizes should be greater than 0"):
        F.interpolate(pr.ones(1, 1, 4), scale_factor=0.1)
    with pytest.raises(NotImplementedError, match="Only 3D, 4D and 5D"):
        F.interpolate(pr.ones(4, 4), scale_factor=2)
    with pytest.raises(NotImplementedError, match=r"\(got foo\)"):
        F.interpolate(x, scale_factor=2, mode="foo")
    with pytest.raises(NotImplementedError, match="Got 4D input, but linear mode needs 3D"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(NotImplementedError, match="bilinear mode needs 4D"):
        F.interpolate(pr.ones(1, 1, 4), scale_factor=2, mode="bilinear")
    with pytest.raises(ValueError, match="Anti-alias option is restricted"):
        F.interpolate(x, scale_factor=2, antialias=True)
    with pytest.raises(ValueError, match="Lanczos mode requires antialias=True"):
        F.interpolate(x, scale_factor=2, mode="lanczos")
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 3, 4))
    with pytest.raises(ValueError, match="not meaningful with an explicit size"):
        F.interpolate(x, size=2, recompute_scale_factor=True)
    with pytest.raises(TypeError, match="expected size to be one of int"):
        F.interpolate(x, size=(2.5, 3))
    with pytest.raises(NotImplementedError, match="not implemented for"):
        F.interpolate(pr.ones(1, 1, 4, 4, dtype=pr.int32), scale_factor=2)
    assert F.interpolate(pr.ones(1, 1, 1, 2), scale_factor=0.33, mode="area").shape == (1, 1, 0, 0)


def test_grid_sample_and_affine_grid_errors():
    with pytest.raises(RuntimeError, match="expected grid to have size 2 in last dimension"):
        F.grid_sample(pr.ones(1, 1, 4, 4), pr.ones(1, 4, 4, 3), align_corners=False)
    with pytest.raises(RuntimeError, match="same batch size"):
        F.grid_sample(pr.ones(2, 1, 4, 4), pr.ones(1, 4, 4, 2), align_corners=False)
    with pytest.raises(RuntimeError, match="bicubic interpolation only supports 4D"):
        F.grid_sample(
            pr.ones(1, 1, 4, 4, 4), pr.ones(1, 4, 4, 4, 3), "bicubic", align_corners=False
        )
    with pytest.raises(ValueError, match="expected mode to be 'bilinear', 'nearest' or 'bicubic'"):
        F.grid_sample(pr.ones(1, 1, 4, 4), pr.ones(1, 4, 4, 2), mode="area")
    with pytest.raises(ValueError, match="expected padding_mode"):
        F.grid_sample(pr.ones(1, 1, 4, 4), pr.ones(1, 4, 4, 2), padding_mode="wrap")
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(pr.ones(2, 3, 3), (2, 1, 4, 4), align_corners=False)
    with pytest.raises(NotImplementedError, match="only supports 4D and 5D sizes"):
        F.affine_grid(pr.ones(2, 2, 3), (2, 1, 4), align_corners=False)
    with pytest.raises(ValueError, match="floating point"):
        F.affine_grid(pr.ones(2, 2, 3, dtype=pr.int32), (2, 1, 4, 4), align_corners=False)
    with pytest.raises(RuntimeError, match="batch"):
        F.affine_grid(pr.ones(2, 2, 3), (3, 1, 4, 4), align_corners=False)


def test_shuffle_errors():
    with pytest.raises(RuntimeError, match="at least 3 dimensions"):
        F.pixel_shuffle(pr.ones(4, 4), 2)
    with pytest.raises(RuntimeError, match=r"input.size\(-3\)=3 is not divisible by 4"):
        F.pixel_shuffle(pr.ones(1, 3, 4, 4), 2)
    with pytest.raises(RuntimeError, match="positive upscale_factor"):
        F.pixel_shuffle(pr.ones(1, 4, 4, 4), 0)
    with pytest.raises(RuntimeError, match=r"height to be divisible.*input.size\(-2\)=5"):
        F.pixel_unshuffle(pr.ones(1, 3, 5, 4), 2)
    with pytest.raises(RuntimeError, match="divisible by groups"):
        F.channel_shuffle(pr.ones(1, 5, 2, 2), 2)
