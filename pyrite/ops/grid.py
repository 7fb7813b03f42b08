"""Sampling at given coordinates, with PyTorch's signatures: grid_sample (bilinear, nearest,
bicubic; padding zeros, border, reflection; 4-D and 5-D) and affine_grid (the grid of an
affine map, 2-D and 3-D). grid_sample is one kernel (kernels/resample.py); affine_grid is the
base grid (PyTorch's coordinates, built here in f32) times θᵀ on the device.
"""

from __future__ import annotations

import math

import numpy as np

from pyrite.errors import warn as _warn

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.resample import grid_sample as _gs_kernel
from .core import empty, max_loop_iterations, upload
from .elementwise import as_tensor_arg
from .spatial import SpatialError, as_ncdhw, widened


def _f32(x) -> np.float32:
    return np.float32(x)


# ---- grid_sample / affine_grid -----------------------------------------------------------------
# Channels one grid_sample invocation loops over (its weights computed once for all of them):
# fewer leave a GPU more invocations, more share the grid read and weight arithmetic. An ESTIMATE
# (not measured); the loop budget caps it too.
GRID_SAMPLE_CHANNELS = 16

_ALIGN_WARNING = (
    "Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. "
    "Please specify align_corners=True if the old behavior is desired. See the documentation of "
    "grid_sample for details."
)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample (N, C, H, W) at grid (N, H_out, W_out, 2) (or 5-D: (N, C, D, H, W) at (N, D_out,
    H_out, W_out, 3)) of normalised (x, y[, z]) in [-1, 1]."""
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(
            "pyrite: nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or "
            f"'bicubic', but got: '{mode}'"
        )
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(
            "pyrite: nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
            f"'border', or 'reflection', but got: '{padding_mode}'"
        )
    if align_corners is None:
        _warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    x, g = as_tensor_arg(input), as_tensor_arg(grid)
    if _autograd.needs_grad(x, g):
        _grid_sample(x.detach(), g.detach(), mode, padding_mode, align_corners)  # (its checks)
        return _grid_sample_recorded(x, g, mode, padding_mode, align_corners)
    return widened(_grid_sample, x, g, mode, padding_mode, align_corners)


def _reflect(c, twice_low: int, twice_high: int):
    """PyTorch's reflect_coordinates, in recorded ops."""
    if twice_low == twice_high:
        return c * 0.0
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    c = (c - lo).abs()
    flips = (c / span).floor()
    extra = c - flips * span  # fmod(c, span) for c >= 0
    even = flips.remainder(2.0) == 0.0
    from .elementwise import where

    return where(even, extra + lo, span - extra + lo)


def _grid_sample_recorded(x, g, mode, padding_mode, align):
    """grid_sample written with recorded ops, so autograd differentiates it as torch's
    grid_sampler_backward does: the input's gradient scattered to the taps, the grid's through
    the weights (bilinear: and the border clamp / reflection of the coordinates; bicubic pads
    each tap's integer index instead, so its grid gradient is the cubic coefficients' alone).
    Holds 2**rank (bicubic: 16) gathered (N, C, *out) tensors."""
    from .scatter import gather

    rank = x.ndim - 2
    N, C = x._shape[:2]
    sp = list(x._shape[2:])
    out_sp = list(g._shape[1:-1])
    S = math.prod(out_sp)
    xf = x.reshape(N, C, math.prod(sp))
    coords = []
    for k in range(rank):  # grid's last dim is (x, y[, z]): coordinate k indexes dim -1 - k
        size = sp[rank - 1 - k]
        c = g.select(-1, k).reshape(N, S)
        c = ((c + 1.0) / 2.0) * (size - 1) if align else ((c + 1.0) * size - 1.0) / 2.0
        if mode != "bicubic":
            c = _pad_coordinate(c, size, padding_mode, align)
        coords.append((c, size))
    # strides of the flattened spatial dims, coordinate k's first
    strides = [math.prod(sp[rank - k :]) for k in range(rank)]
    if mode == "nearest":
        corners = [[(c.round(), None)] for c, _ in coords]
    elif mode == "bicubic":
        corners = []
        for c, size in coords:
            f = c.detach().floor()
            weights = _cubic_weights(c - f)
            taps = []
            for j in range(4):
                i = _pad_coordinate(f + float(j - 1), size, padding_mode, align)
                taps.append((i, weights[j]))
            corners.append(taps)
    else:
        corners = []
        for c, _ in coords:
            i0 = c.floor()
            w1 = c - i0
            corners.append([(i0, 1.0 - w1), (i0 + 1.0, w1)])
    out = None
    for combo in _product(*corners):
        lin = None
        w = None
        valid = None
        for k, (i, wk) in enumerate(combo):
            size = coords[k][1]
            ok = (i >= 0.0) & (i <= size - 1.0)
            valid = ok if valid is None else valid & ok
            t = i.detach().clamp(0.0, size - 1.0) * float(strides[k])
            lin = t if lin is None else lin + t
            if wk is not None:
                w = wk if w is None else w * wk
        idx = lin.to(D.int64).unsqueeze(1).expand(N, C, S)
        m = valid.to(x.dtype)
        w = m if w is None else w * m
        term = gather(xf, 2, idx) * w.unsqueeze(1)
        out = term if out is None else out + term
    out = out.reshape(N, C, *out_sp)
    if mode == "nearest" and g.requires_grad:  # torch's grid gradient there: zeros, not None
        out = out + g.sum() * 0.0
    return out


def _pad_coordinate(c, size, padding_mode, align):
    """PyTorch's compute_coordinates: the padding mode's reflection and clip of a coordinate."""
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align else _reflect(c, -1, 2 * size - 1)
    if padding_mode in ("border", "reflection"):
        # torch's clip_coordinates_set_grad: the clipped coordinate's gradient is 1 strictly
        # inside (0, size - 1) and 0 at either edge, where clamp's would pass it (a grid value
        # of exactly +-1 with align_corners gave the one-sided slope, torch 0)
        from .elementwise import where

        inside = (c > 0.0) & (c < size - 1.0)
        c = where(inside, c, c.detach().clamp(0.0, size - 1.0))
    return c


_CUBIC_A = -0.75  # PyTorch's grid_sample / interpolate bicubic


def _cubic_weights(t):
    """PyTorch's get_cubic_upsample_coefficients: the taps floor - 1 .. floor + 2 at fraction t
    (Keys' cubic convolution, A = -0.75), in recorded ops."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def _product(*lists):
    import itertools

    return itertools.product(*lists)


def _grid_sample(x, g, mode, padding_mode, align_corners):
    if not x.dtype.is_floating_point or x.dtype is not g.dtype:
        raise TypeError(
            f"pyrite: grid_sample: input ({x.dtype!r}) and grid ({g.dtype!r}) must be floating "
            "point tensors of the same dtype"
        )
    if x.ndim not in (4, 5) or g.ndim != x.ndim:
        raise SpatialError(
            "pyrite: grid_sampler(): expected 4D or 5D input and grid with same number of "
            f"dimensions, but got input with sizes {list(x._shape)} and grid with sizes "
            f"{list(g._shape)}"
        )
    rank = x.ndim - 2
    if g._shape[-1] != rank:
        raise SpatialError(
            f"pyrite: grid_sampler(): expected grid to have size {rank} in last dimension, but "
            f"got grid with sizes {list(g._shape)}"
        )
    if x._shape[0] != g._shape[0]:
        raise SpatialError(
            "pyrite: grid_sampler(): expected grid and input to have same batch size, but got "
            f"input with sizes {list(x._shape)} and grid with sizes {list(g._shape)}"
        )
    if mode == "bicubic" and rank != 2:
        raise SpatialError("pyrite: grid_sampler(): bicubic interpolation only supports 4D input")
    if any(s == 0 for s in x._shape[2:]):
        raise SpatialError(
            "pyrite: grid_sampler(): expected input to have non-empty spatial dimensions, but "
            f"input has sizes {list(x._shape)}"
        )
    xb, _ = as_ncdhw(x, rank, "grid_sample", batched_only=True)
    N, C = xb._shape[:2]
    if rank == 2:
        gv = g._view((N, 1) + g._shape[1:], (g._strides[0], 0) + g._strides[1:], g._offset)
    else:
        gv = g
    o3 = gv._shape[1:4]
    out = empty((N, C) + o3, x.dtype)
    S = math.prod(o3)
    cb = max(1, min(C, GRID_SAMPLE_CHANNELS, max_loop_iterations() - 1))  # + the exit test
    nb = -(-C // cb) if C else 0
    units = N * nb * S
    if units:
        info = [
            units,
            C,
            cb,
            nb,
            *xb._shape[2:],
            *o3,
            int(bool(align_corners)),
            xb._offset,
            *xb._strides,
            gv._offset,
            *gv._strides,
        ]
        backend.current().dispatch(
            _gs_kernel(mode, padding_mode, rank, x.dtype.wgsl),
            [xb._storage.buffer, gv._storage.buffer, out._storage.buffer],
            info,
            grid_for(units),
        )
    return out if rank == 3 else out._view((N, C) + o3[1:], out._strides[:2] + out._strides[3:], 0)


def _linspace_from_neg_one(n: int, align: bool) -> np.ndarray:
    """PyTorch's affine_grid base coordinates in f32: linspace(-1, 1, n) (its symmetric
    formula), times (n - 1) / n without align_corners."""
    if n <= 1:
        return np.zeros(1, dtype=np.float32)
    step = _f32(2.0) / _f32(n - 1)
    idx = np.arange(n)
    half = n // 2
    r = np.where(
        idx < half,
        _f32(-1.0) + step * idx.astype(np.float32),
        _f32(1.0) - step * (n - idx - 1).astype(np.float32),
    ).astype(np.float32)
    if not align:
        r = (r * _f32(n - 1)).astype(np.float32) / _f32(n)
    return r.astype(np.float32)


def affine_grid(theta, size, align_corners=None):
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of affine maps θ (N, 2, 3) (or
    (N, 3, 4)) for an output of `size` (N, C, H, W) (or (N, C, D, H, W)); feeds grid_sample."""
    from .matmul import matmul

    if align_corners is None:
        _warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    th = as_tensor_arg(theta)
    if not th.dtype.is_floating_point:
        raise ValueError(f"pyrite: Expected theta to have floating point type, but got {th.dtype}")
    size = [int(s) for s in size]
    if len(size) == 4:
        if th.ndim != 3 or th._shape[-2:] != (2, 3):
            raise ValueError(
                "pyrite: Expected a batch of 2D affine matrices of shape Nx2x3 for size "
                f"{tuple(size)}. Got {tuple(th._shape)}."
            )
        spatial = size[-2:]
    elif len(size) == 5:
        if th.ndim != 3 or th._shape[-2:] != (3, 4):
            raise ValueError(
                "pyrite: Expected a batch of 3D affine matrices of shape Nx3x4 for size "
                f"{tuple(size)}. Got {tuple(th._shape)}."
            )
        spatial = size[-3:]
    else:
        raise NotImplementedError(
            "pyrite: affine_grid only supports 4D and 5D sizes, for 2D and 3D affine "
            f"transforms, respectively. Got size {tuple(size)}."
        )
    if align_corners and min(spatial) == 1:
        _warn(
            "Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
            "align_corners=True. This is not an intended use case of affine_grid. See the "
            "documentation of affine_grid for details.",
            stacklevel=2,
        )
    elif min(size) <= 0:
        raise ValueError(f"pyrite: Expected non-zero, positive output size. Got {tuple(size)}")
    if th._shape[0] != size[0]:
        raise SpatialError(
            f"pyrite: affine_grid: theta holds {th._shape[0]} matrices but size asks for a batch "
            f"of {size[0]}"
        )
    axes = [_linspace_from_neg_one(s, bool(align_corners)) for s in reversed(spatial)]  # x, y, z
    mesh = np.meshgrid(*reversed(axes), indexing="ij")  # over (d,) h, w
    base = np.stack([*reversed(mesh), np.ones_like(mesh[0])], axis=-1).astype(np.float32)
    k = len(spatial) + 1
    base_t = upload(base.reshape(1, -1, k), D.float32)
    if th.dtype is not D.float32:
        base_t = base_t.to(th.dtype)
    grid = matmul(base_t, th.transpose(1, 2))  # (N, prod(spatial), k - 1)
    return grid.reshape(size[0], *spatial, k - 1)


__all__: list = []

METHODS: dict = {}
