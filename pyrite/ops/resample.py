"""Resampling with PyTorch's signatures: interpolate (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear, area; antialias for bilinear, bicubic and lanczos), the deprecated upsample,
upsample_nearest and upsample_bilinear, pixel_shuffle, pixel_unshuffle and channel_shuffle.
(grid_sample and affine_grid: ops/grid.py.)

interpolate follows torch.nn.functional.interpolate's own argument logic line by line (which of
size / scale_factor, recompute_scale_factor, the per-mode rank checks), then runs one kernel
(kernels/resample.py) over the (N, C, D, H, W) view; 'area' is adaptive_avg_pool (as PyTorch).
Antialiased modes run one pass per resized dim with weights computed here as PyTorch computes
them (`_compute_indices_min_size_weights_aa`). pixel/channel shuffles are a view and one strided
copy.
"""

from __future__ import annotations

import math

import numpy as np

from pyrite.errors import warn as _warn

from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.resample import INTERP_PER_THREAD, aa_pass, interp
from ..tensor import Tensor
from .core import empty, f32_bits, max_loop_iterations, upload
from .elementwise import as_tensor_arg
from .matmul import matmul
from .pool import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from .spatial import SpatialError, as_ncdhw, from_ncdhw, native

_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def _is_int(v) -> bool:
    return not isinstance(v, bool) and hasattr(v, "__index__")


def _f32(x) -> np.float32:
    return np.float32(x)


def _scale(i: int, o: int, align: bool, scale) -> np.float32:
    """PyTorch's area_pixel_compute_scale in f32 (align) / compute_scales_value."""
    if align:
        return _f32(i - 1) / _f32(o - 1) if o > 1 else _f32(0.0)
    if scale is not None and scale > 0:
        return _f32(1.0 / scale)
    return _f32(i) / _f32(o)


def _sizes_msg(i_sp, o_sp):
    names = ("D", "H", "W")[3 - len(i_sp) :]
    fmt = lambda sp: ", ".join(f"{n}: {s}" for n, s in zip(names, sp))  # noqa: E731
    sep = " and output" if len(i_sp) == 1 else " output"
    return (
        "pyrite: Input and output sizes should be greater than 0, but got "
        f"input ({fmt(i_sp)}){sep} ({fmt(o_sp)})"
    )


def interpolate(
    input,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
    antialias=False,
):
    """Resample (N, C, *spatial) with 1-3 spatial dims to `size` or by `scale_factor`.

    Modes as torch.nn.functional.interpolate: 'nearest' (floor(o * in/out), as PyTorch's, not
    the pixel-centre 'nearest-exact'), 'linear' (3-D input), 'bilinear' (4-D), 'bicubic'
    (4-D), 'trilinear' (5-D), 'area' (adaptive average pooling), and with antialias=True
    'bilinear', 'bicubic' and 'lanczos' (4-D). Computed in f32 for every float dtype.
    """
    x = as_tensor_arg(input)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError(
                "pyrite: align_corners option can only be set with the interpolating modes: "
                "linear | bilinear | bicubic | trilinear"
            )
    elif align_corners is None:
        align_corners = False
    dim = x.ndim - 2
    if size is not None and scale_factor is not None:
        raise ValueError("pyrite: only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(
                    "pyrite: Input and output must have the same number of spatial dimensions, "
                    f"but got input with spatial dimensions of {list(x._shape[2:])} and output "
                    f"size of {size}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                    "format and output size in (o1, o2, ...,oK) format."
                )
            if not all(_is_int(v) for v in size):
                raise TypeError(
                    "pyrite: expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    f"Tuple[int, int, int], but got size with types {[type(v) for v in size]}"
                )
            out_size = [int(v) for v in size]
        else:
            if not _is_int(size):
                raise TypeError(f"pyrite: expected size to be an int or a tuple, got {size!r}")
            out_size = [int(size)] * max(dim, 0)
    elif scale_factor is not None:
        out_size = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(
                    "pyrite: Input and scale_factor must have the same number of spatial "
                    f"dimensions, but got input with spatial dimensions of {list(x._shape[2:])} "
                    f"and scale_factor of shape {scale_factor}. Please provide input tensor in "
                    "(N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format."
                )
            scales = [float(s) for s in scale_factor]
        else:
            scales = [float(scale_factor)] * max(dim, 0)
    else:
        raise ValueError("pyrite: either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("pyrite: recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out_size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        out_size = [int(math.floor(float(x._shape[i + 2]) * scales[i])) for i in range(dim)]
        scales = None
    if antialias and not (mode in ("bilinear", "bicubic", "lanczos") and x.ndim == 4):
        raise ValueError(
            "pyrite: Anti-alias option is restricted to bilinear, bicubic, and lanczos modes "
            "and requires a 4-D tensor as input"
        )
    want = {"linear": 3, "bilinear": 4, "trilinear": 5, "bicubic": 4, "lanczos": 4}
    if mode in ("nearest", "nearest-exact", "area") and x.ndim in (3, 4, 5):
        pass
    elif mode in want and x.ndim in (3, 4, 5):
        if x.ndim != want[mode]:
            raise NotImplementedError(
                f"pyrite: Got {x.ndim}D input, but {mode} mode needs {want[mode]}D input"
            )
    else:
        raise NotImplementedError(
            f"pyrite: Input Error: Only 3D, 4D and 5D input Tensors supported (got {x.ndim}D) "
            f"for the modes: {_MODES} (got {mode})"
        )
    if mode == "lanczos":
        if align_corners:
            raise ValueError("pyrite: Lanczos mode does not support align_corners=True")
        if not antialias:
            raise ValueError("pyrite: Lanczos mode requires antialias=True")
    in_sp = tuple(x._shape[2:])
    if out_size is None:  # C++'s compute_output_size: the product truncated
        out_size = [int(float(i) * s) for i, s in zip(in_sp, scales)]
    out_sp = tuple(out_size)
    if mode == "area":  # PyTorch calls the adaptive pool directly (an output size 0 is empty)
        pool = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}[dim]
        return pool(x, out_sp)
    if any(i <= 0 for i in in_sp) or any(o <= 0 for o in out_sp):
        raise SpatialError(_sizes_msg(in_sp, out_sp))
    scales = scales or [None] * dim
    if not x.dtype.is_floating_point:
        # uint8 images (torch's only integer dtype here): nearest is a gather, exact
        if mode in ("nearest", "nearest-exact") and x.dtype == D.uint8:
            return _nearest_gather(x, out_sp, mode, scales)
        raise NotImplementedError(f'pyrite: "upsample_{mode}" not implemented for {x.dtype!r}')
    if antialias:
        return _antialias(x, out_sp, mode, bool(align_corners), scales)
    kmode = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    align = bool(align_corners) if kmode in ("linear", "cubic") else False
    return _interp(x, out_sp, kmode, align, scales)


def _interp(x: Tensor, out_sp: tuple, kmode: str, align: bool, scales) -> Tensor:
    dim = len(out_sp)
    x, back = native(x)
    xb, _ = as_ncdhw(x, dim, "interpolate", batched_only=True)
    N, C = xb._shape[:2]
    i3 = xb._shape[2:]
    o3 = (1,) * (3 - dim) + out_sp
    s3 = [0.0] * (3 - dim) + [
        _scale(i, o, align, s) for i, o, s in zip(i3[3 - dim :], out_sp, scales)
    ]
    out = empty((N, C) + o3, x.dtype)
    n = out.numel()
    if n:
        # nearest: PyTorch's 2-D kernel takes shortcuts for out = in and out = 2*in
        flag = int(align) if kmode in ("linear", "cubic") else int(kmode == "nearest" and dim == 2)
        info = [
            n,
            C,
            *i3,
            *o3,
            *(f32_bits(float(s)) for s in s3),
            flag,
            xb._offset,
            *xb._strides,
        ]
        backend.current().dispatch(
            interp(kmode, dim, x.dtype.wgsl),
            [xb._storage.buffer, out._storage.buffer],
            info,
            grid_for(-(-n // INTERP_PER_THREAD)),
        )
    out = from_ncdhw(out, dim, False)
    return out.to(back) if back is not None else out


def _nearest_gather(x: Tensor, out_sp: tuple, mode: str, scales) -> Tensor:
    """Nearest modes for uint8 inputs (torch supports them; the kernel reads floats): nearest
    is separable, so each axis's source indices come from the float kernel run on an
    arange laid along that axis (the same index arithmetic, exact below 2**24), then an
    index_select per axis."""
    from .creation import arange

    dim = len(out_sp)
    for d in range(dim):
        shape, size, sc = [1] * dim, [1] * dim, [None] * dim
        shape[d], size[d], sc[d] = x._shape[2 + d], out_sp[d], scales[d]
        pos = arange(x._shape[2 + d], dtype=D.float32).reshape(1, 1, *shape)
        src = _interp(pos, tuple(size), mode, False, sc).reshape(out_sp[d])
        x = x.index_select(2 + d, src.to(D.int32))
    return x


# ---- antialiasing ------------------------------------------------------------------------------
def _aa_filter(mode: str):
    if mode == "bilinear":
        return 2, lambda t: np.maximum(0.0, 1.0 - np.abs(t))

    if mode == "bicubic":  # Keys' kernel with a = -0.5 for antialiasing, as PyTorch and Pillow

        def cubic(t, a=-0.5):
            t = np.abs(t)
            w1 = ((a + 2) * t - (a + 3)) * t * t + 1
            w2 = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
            return np.where(t < 1, w1, np.where(t < 2, w2, 0.0))

        return 4, cubic

    def lanczos(t):  # Lanczos-3: sinc(t) sinc(t/3) on |t| < 3
        return np.where(np.abs(t) < 3, np.sinc(t) * np.sinc(t / 3), 0.0)

    return 6, lanczos


def _aa_table(i: int, o: int, align: bool, scale, mode: str):
    """(table words, max taps): PyTorch's antialiased window of each output (xmin, xsize) and its
    normalised weights, in f32 as its kernel computes them."""
    interp_size, filt = _aa_filter(mode)
    sc = float(_scale(i, o, align, scale))
    support = (interp_size * 0.5) * sc if sc >= 1.0 else interp_size * 0.5
    maxk = int(math.ceil(support)) * 2 + 1
    inv = 1.0 / sc if sc >= 1.0 else 1.0
    idx = np.arange(o, dtype=np.float64)
    center = (sc * (idx + 0.5)).astype(np.float32).astype(np.float64)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)
    xsize = np.clip(np.minimum((center + support + 0.5).astype(np.int64), i) - xmin, 0, maxk)
    j = np.arange(maxk, dtype=np.float64)
    w = filt((j[None, :] + xmin[:, None] - center[:, None] + 0.5) * inv)
    w = np.where(j[None, :] < xsize[:, None], w, 0.0)
    total = w.sum(axis=1, keepdims=True)
    w = np.where(total != 0.0, w / np.where(total == 0.0, 1.0, total), w)
    words = np.concatenate(
        [xmin.astype(np.int32), xsize.astype(np.int32), w.astype(np.float32).view(np.int32).ravel()]
    )
    return words, maxk


# Weight tables on the device, by (device, sizes, align_corners, scale, mode): a resize in a
# data pipeline repeats the same few, and an upload makes a new buffer each time.
_AA_TABLES: dict = {}


def _aa_table_on_device(i, o, align, scale, mode):
    dev = backend.current()
    key = (i, o, align, scale, mode)
    hit = _AA_TABLES.get(key)
    if hit is None or hit[2] is not dev:  # a table lives on the device it was uploaded to
        words, maxk = _aa_table(i, o, align, scale, mode)
        if len(_AA_TABLES) >= 32:
            _AA_TABLES.clear()
        hit = _AA_TABLES[key] = (upload(words, D.int32), maxk, dev)
    return hit[0], hit[1]


def _antialias(x: Tensor, out_sp, mode, align, scales) -> Tensor:
    x, back = native(x)
    dtype = x.dtype
    N, C, H, W = x._shape
    cur = x
    dev = backend.current()
    budget = max_loop_iterations()
    # W first, then H, skipping a dim whose size does not change (as PyTorch)
    for axis in (3, 2):
        i, o = cur._shape[axis], out_sp[axis - 2]
        if i == o:
            continue
        tab, maxk = _aa_table_on_device(i, o, align, scales[axis - 2], mode)
        B = math.prod(cur._shape[:axis])
        inner = math.prod(cur._shape[axis + 1 :])
        st = cur._strides
        # (B, L, inner) strides of cur: the leading dims of an NCHW view flatten when mergeable
        xs_b = st[axis - 1] if B > 1 else 0
        if B > 1 and not all(
            cur._strides[k] == cur._strides[k + 1] * cur._shape[k + 1]
            for k in range(axis - 1)
            if cur._shape[k] != 1
        ):
            cur = cur.contiguous()
            st = cur._strides
            xs_b = st[axis - 1]
        xs_i = st[3] if axis == 2 else 1
        shape = list(cur._shape)
        shape[axis] = o
        out = empty(tuple(shape), D.float32)
        n = out.numel()
        step = max(1, min(maxk, budget - 1))  # its loop: step iterations + the exit test
        for j0 in range(0, maxk, step):
            info = [
                n,
                o,
                inner,
                maxk,
                j0,
                min(maxk, j0 + step),
                int(j0 > 0),
                cur._offset,
                xs_b,
                st[axis],
                xs_i,
            ]
            dev.dispatch(
                aa_pass(cur.dtype.wgsl),
                [cur._storage.buffer, tab._storage.buffer, out._storage.buffer],
                info,
                grid_for(n),
            )
        cur = out
    if cur is x:
        cur = x.contiguous() if x.dtype is D.float32 else x.to(D.float32)
    res = cur if dtype is D.float32 else cur.to(dtype)
    return res.to(back) if back is not None else res


# ---- the deprecated names ----------------------------------------------------------------------
def _deprecated(name):
    _warn(
        f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.",
        stacklevel=3,  # the caller of upsample*
    )


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---- shuffles ----------------------------------------------------------------------------------
def _at_least_3d(x, what):
    if x.ndim < 3:
        raise SpatialError(
            f"pyrite: {what} expects input to have at least 3 dimensions, but got input "
            f"with {x.ndim} dimension(s)"
        )


def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) to (*, C, H*r, W*r): the sub-pixel rearrangement of ESPCN."""
    x = as_tensor_arg(input)
    r = int(upscale_factor)
    _at_least_3d(x, "pixel_shuffle")
    if r <= 0:
        raise SpatialError(f"pyrite: pixel_shuffle expects a positive upscale_factor, but got {r}")
    *B, C, H, W = x._shape
    if C % (r * r):
        raise SpatialError(
            "pyrite: pixel_shuffle expects its input's 'channel' dimension to be divisible by "
            f"the square of upscale_factor, but input.size(-3)={C} is not divisible by {r * r}"
        )
    nb = len(B)
    y = x.reshape(*B, C // (r * r), r, r, H, W)
    perm = list(range(nb)) + [nb, nb + 3, nb + 1, nb + 4, nb + 2]
    return y.permute(*perm).contiguous().reshape(*B, C // (r * r), H * r, W * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) to (*, C*r*r, H, W): the inverse of pixel_shuffle."""
    x = as_tensor_arg(input)
    r = int(downscale_factor)
    _at_least_3d(x, "pixel_unshuffle")
    if r <= 0:
        raise SpatialError(
            f"pyrite: pixel_unshuffle expects a positive downscale_factor, but got {r}"
        )
    *B, C, H, W = x._shape
    for name, s, k in (("height", H, -2), ("width", W, -1)):
        if s % r:
            raise SpatialError(
                f"pyrite: pixel_unshuffle expects {name} to be divisible by downscale_factor, "
                f"but input.size({k})={s} is not divisible by {r}"
            )
    nb = len(B)
    y = x.reshape(*B, C, H // r, r, W // r, r)
    perm = list(range(nb)) + [nb, nb + 2, nb + 4, nb + 1, nb + 3]
    return y.permute(*perm).contiguous().reshape(*B, C * r * r, H // r, W // r)


def channel_shuffle(input, groups):
    """(N, C, *) with channels (g, C/g) reordered to (C/g, g) (ShuffleNet)."""
    x = as_tensor_arg(input)
    g = int(groups)
    _at_least_3d(x, "channel_shuffle")
    if g <= 0:
        raise SpatialError(
            f"pyrite: Number of groups to divide channels in must be positive. Value of groups:{g}"
        )
    N, C, *rest = x._shape
    if C % g:
        raise SpatialError(
            f"pyrite: Number of channels must be divisible by groups. Got {C} channels and "
            f"{g} groups."
        )
    y = x.reshape(N, g, C // g, *rest).transpose(1, 2)
    return y.contiguous().reshape(N, C, *rest)


def native_channel_shuffle(input, groups):
    """channel_shuffle (PyTorch's native entry point, same result)."""
    return channel_shuffle(input, groups)


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _axis_matrix(ctx, dim: int, d: int, i: int, o: int):
    """The (i, o) matrix of resampled axis d: column t holds the weights output t takes from each
    input index. Every mode is separable (one 1-D map per axis, bicubic's border clamp and
    antialiasing's windows included), so the matrix is the forward itself run on an identity
    laid along that axis: the same kernel, the same f32 index arithmetic, the same weights."""
    from .creation import eye

    mode = ctx.arg(3, "mode", "nearest")
    align = ctx.arg(4, "align_corners", None)
    antialias = ctx.arg(6, "antialias", False)
    size = ctx.arg(1, "size", None)
    shape = [1] * dim
    shape[d] = i
    e = eye(i, dtype=D.float32).reshape(1, i, *shape)
    if size is not None:
        sz = [1] * dim
        sz[d] = o
        r = interpolate(e, sz, None, mode, align, None, antialias)
    else:
        sf = ctx.arg(2, "scale_factor", None)
        s = list(sf) if isinstance(sf, (list, tuple)) else [sf] * dim
        sc = [1.0] * dim
        sc[d] = float(s[d])
        r = interpolate(e, None, sc, mode, align, ctx.arg(5, "recompute_scale_factor"), antialias)
    if r._shape[2 + d] != o:  # (the recomputed size of the call itself: it is g's)
        raise RuntimeError("pyrite: interpolate backward: inconsistent output size")
    return r.reshape(i, o)


def _g_interpolate(ctx, g):
    """The transposed resampling: g contracted with each axis's weight matrix in turn (exact:
    nearest's scatter-add, (bi/tri)linear's and bicubic's weights, area's windows)."""
    shape = ctx.meta[0][0]
    dim = len(shape) - 2
    gx = g
    for d in range(dim):
        i, o = shape[2 + d], g._shape[2 + d]
        m = _axis_matrix(ctx, dim, d, i, o).to(g.dtype)
        gx = matmul(gx.movedim(2 + d, -1), m.mT).movedim(-1, 2 + d)
    return (gx,)


_g_interpolate.saves = frozenset()

GRADS = {"interpolate": _g_interpolate}

__all__ = ["channel_shuffle", "native_channel_shuffle", "pixel_shuffle", "pixel_unshuffle"]

METHODS: dict = {}
