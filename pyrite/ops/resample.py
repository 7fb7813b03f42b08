"""Resampling with PyTorch's signatures: interpolate (nearest, nearest-exact, linear, bilinear,
bicubic, trilinear, area; antialias for bilinear, bicubic and lanczos), the deprecated upsample,
upsample_nearest and upsample_bilinear, pixel_shuffle, pixel_unshuffle and channel_shuffle.
(grid_sample and affine_grid: ops/grid.py.)

interpolate follows torch.nn.functional.interpolate's own argument logic line by line (which of
size / scale_factor, recompute_scale_factor, the per-mode rank checks), then runs one kernel
(kernels/resample.py) over the (N, C, D, H, W) view; 'area' is adaptive_avg_pool (as PyTorch).
Antialiased modes run one pass per resized dim with weights computed here as PyTorch computes
them (`_compute_indices_min_size_weights_aa`). The backward gathers, for each input position,
the outputs whose taps read it (tables of torch's backward taps and weights, kernels/resample.py
`gather_pass`), so a NaN/inf in the gradient reaches only those inputs, as in torch. uint8
images: the nearest modes are gathers; bilinear, bicubic and lanczos run PyTorch's fixed-point
passes (ops/resample_u8.py). pixel/channel shuffles are a view and one strided copy.
"""

from __future__ import annotations

import math

import numpy as np

from pyrite.errors import warn as _warn

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.resample import INTERP_PER_THREAD, aa_pass, gather_pass, interp
from ..tensor import Tensor
from .core import empty, f32_bits, max_loop_iterations, upload
from .elementwise import as_tensor_arg
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
    'bilinear', 'bicubic' and 'lanczos' (4-D). Computed in f32 for every float dtype; uint8
    images in PyTorch's fixed point (its exact results: ops/resample_u8.py).
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
        # uint8 images (torch's only integer dtype here): nearest is a gather, exact; the
        # 2-D filters in PyTorch's fixed point (ops/resample_u8.py)
        if mode in ("nearest", "nearest-exact") and x.dtype == D.uint8:
            return _nearest_gather(x, out_sp, mode, scales)
        if mode in ("bilinear", "bicubic", "lanczos") and x.dtype == D.uint8:
            from .resample_u8 import resize_u8

            return resize_u8(x, out_sp, mode, bool(antialias), bool(align_corners), scales)
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
def _aa_filter(mode: str, a: float = -0.5):
    """(interp_size, filter) of PyTorch's HelperInterpLinear / Cubic / Lanczos, in float64.
    `a`: Keys' cubic parameter, -0.5 for antialiasing as PyTorch and Pillow (-0.75, OpenCV's,
    for uint8 bicubic without antialias: ops/resample_u8.py)."""
    if mode == "bilinear":
        return 2, lambda t: np.maximum(0.0, 1.0 - np.abs(t))

    if mode == "bicubic":

        def cubic(t):
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


def device_table(cache: dict, key, make, limit: int = 32):
    """cache[key]'s table on the current device, made by make() where it is missing or was
    made for another device (a table lives on the device it was uploaded to); the cache empties
    at `limit` entries. A resize in a data pipeline repeats the same few sizes, and an upload
    makes a new buffer each time."""
    dev = backend.current()
    hit = cache.get(key)
    if hit is None or hit[1] is not dev:
        if len(cache) >= limit:
            cache.clear()
        hit = cache[key] = (make(), dev)
    return hit[0]


_AA_TABLES: dict = {}  # (sizes, align_corners, scale, mode) -> (weights' words, widest window)


def _aa_table_on_device(i, o, align, scale, mode):
    def make():
        words, maxk = _aa_table(i, o, align, scale, mode)
        return upload(words, D.int32), maxk

    return device_table(_AA_TABLES, (i, o, align, scale, mode), make)


def _merged_stride(shape, strides):
    """The one stride that walks dims `shape` as a single flattened dim, or None (they do not
    merge). Size-1 dims do not count."""
    dims = [(n, st) for n, st in zip(shape, strides) if n != 1]
    for (_, a), (n, b) in zip(dims, dims[1:]):
        if a != b * n:
            return None
    return dims[-1][1] if dims else 0


def _window_pass(
    cur: Tensor, axis: int, tab: Tensor, maxk: int, o: int, kernel=aa_pass, bits=None
) -> Tensor:
    """cur resampled along `axis` to o positions by `kernel` (aa_pass: out[l] = Σ_j w[l, j]·
    cur[xmin_l + j]; gather_pass: Σ_j w[l, j]·cur[t[l, j]]) and its table `tab`, as a new
    contiguous f32 tensor (uint8 for aa_pass_u8, whose weights have `bits` fraction bits).
    cur is read through its strides when its dims before and after `axis` each flatten to one
    stride."""
    shape = cur._shape
    xs_b = _merged_stride(shape[:axis], cur._strides[:axis])
    xs_i = _merged_stride(shape[axis + 1 :], cur._strides[axis + 1 :])
    if xs_b is None or xs_i is None:
        cur = cur.contiguous()
        xs_b = _merged_stride(shape[:axis], cur._strides[:axis])
        xs_i = _merged_stride(shape[axis + 1 :], cur._strides[axis + 1 :])
    inner = math.prod(shape[axis + 1 :])
    out = empty((*shape[:axis], o, *shape[axis + 1 :]), D.float32 if bits is None else D.uint8)
    n = out.numel()
    if not n:
        return out
    dev = backend.current()
    step = max(1, min(maxk, max_loop_iterations() - 1))  # its loop: step iterations + exit test
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
            cur._strides[axis],
            xs_i,
        ]
        if bits is not None:  # aa_pass_u8: the weights' fraction bits; the window's last chunk
            info += [bits, int(j0 + step >= maxk)]
        dev.dispatch(
            kernel(cur.dtype.wgsl),
            [cur._storage.buffer, tab._storage.buffer, out._storage.buffer],
            info,
            grid_for(n),
        )
    return out


def _antialias(x: Tensor, out_sp, mode, align, scales) -> Tensor:
    x, back = native(x)
    dtype = x.dtype
    cur = x
    # W first, then H, skipping a dim whose size does not change (as PyTorch)
    for axis in (3, 2):
        i, o = cur._shape[axis], out_sp[axis - 2]
        if i == o:
            continue
        tab, maxk = _aa_table_on_device(i, o, align, scales[axis - 2], mode)
        cur = _window_pass(cur, axis, tab, maxk, o)
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
# The backward is a gather, not a dense product with each axis's (in, out) weight matrix: a
# matmul multiplies every input position by every output's gradient, so one NaN or inf in g made
# a whole row of NaN (0·NaN); torch's backward kernels add g·w only into the taps each output
# read. Each axis's taps and weights are recomputed here in f32 exactly as PyTorch's backward
# kernels compute them (UpSample.h, UpSampleKernel.cpp, UpSampleBicubic2d.cpp, AdaptiveAvgPool,
# the antialiased tables), taps of weight 0 included (torch adds 0·g into them too), then
# transposed: input position l gathers the K outputs that read it.
def _cubic1(x, a):
    return ((a + np.float32(2)) * x - (a + np.float32(3))) * x * x + np.float32(1)


def _cubic2(x, a):
    return ((a * x - np.float32(5) * a) * x + np.float32(8) * a) * x - np.float32(4) * a


def _fma(a, b, c):
    """a·b + c rounded once to f32 (a, b f32: their product is exact in float64)."""
    return (np.asarray(a, np.float64) * b + np.asarray(c, np.float64)).astype(np.float32)


def _cubic1_fma(x, a):  # _cubic1 as torch's vectorised build evaluates it
    return _fma(_fma(a + np.float32(2), x, -(a + np.float32(3))) * x, x, np.float32(1))


def _cubic2_fma(x, a):
    r = _fma(_fma(a, x, -(np.float32(5) * a)), x, np.float32(8) * a)
    return _fma(r, x, -(np.float32(4) * a))


def _axis_taps(kind: str, i: int, o: int, align: bool, scale, equal_all: bool):
    """(idx, w), each (o, T): the input positions output t reads along one axis (-1: none) and
    their f32 weights, as PyTorch's backward of `kind` ("nearest", "nearest-exact", "linear",
    "cubic", "area", or "aa-" + an antialiased mode) computes them."""
    t = np.arange(o, dtype=np.int64)
    one = np.ones((o, 1), np.float32)
    if kind == "nearest":  # nearest_idx: its shortcuts for out = in and out = 2*in in every rank
        if o == i:
            return t[:, None], one
        if o == 2 * i:
            return (t >> 1)[:, None], one
        src = np.floor(t.astype(np.float32) * _scale(i, o, False, scale)).astype(np.int64)
        return np.minimum(src, i - 1)[:, None], one
    if kind == "nearest-exact":  # floorf((t + 0.5) * scale), the product in double
        prod = (t + 0.5) * np.float64(_scale(i, o, False, scale))
        src = np.floor(prod.astype(np.float32)).astype(np.int64)
        return np.minimum(src, i - 1)[:, None], one
    if kind == "area":  # adaptive_avg_pool's windows [floor(t*i/o), ceil((t+1)*i/o))
        start, end = (t * i) // o, -((-(t + 1) * i) // o)
        T = int((end - start).max())
        j = np.arange(T)
        idx = np.where(j[None, :] < (end - start)[:, None], start[:, None] + j[None, :], -1)
        w = np.broadcast_to(np.float32(1) / (end - start).astype(np.float32)[:, None], idx.shape)
        return idx, np.ascontiguousarray(w)
    if kind.startswith("aa-"):
        return _aa_back_taps(i, o, align, scale, kind[3:])
    sc = _scale(i, o, align, scale)
    tf = t.astype(np.float32)
    src = sc * tf if align else sc * (tf + np.float32(0.5)) - np.float32(0.5)
    if kind == "linear":  # compute_source_index_and_lambda
        if o == i:  # (torch's taps: t twice, weights 1 and 0)
            return np.stack([t, t], 1), np.stack([one[:, 0], np.zeros(o, np.float32)], 1)
        if not align:  # torch's build contracts this one to an FMA (measured: bit for bit)
            src = (np.float64(sc) * (tf + np.float32(0.5)) - 0.5).astype(np.float32)
        src = np.maximum(src, np.float32(0))
        i0 = np.minimum(np.floor(src).astype(np.int64), i - 1)
        l1 = np.minimum(np.maximum(src - i0.astype(np.float32), np.float32(0)), np.float32(1))
        i1 = i0 + (i0 < i - 1)
        return np.stack([i0, i1], 1), np.stack([np.float32(1) - l1, l1], 1)
    # cubic: upsample_bicubic2d_backward (a plain copy when every dim keeps its size)
    if equal_all:
        return t[:, None], one
    f = np.minimum(np.floor(src).astype(np.int64), i - 1)
    x1 = np.minimum(np.maximum(src - f.astype(np.float32), np.float32(0)), np.float32(1))
    x2 = np.float32(1) - x1
    a = np.float32(-0.75)
    w = np.stack(
        [
            _cubic2(x1 + np.float32(1), a),
            _cubic1(x1, a),
            _cubic1(x2, a),
            _cubic2(x2 + np.float32(1), a),
        ],
        1,
    )
    idx = np.clip(f[:, None] + np.arange(-1, 3)[None, :], 0, i - 1)
    return idx, w.astype(np.float32)


def _aa_back_taps(i: int, o: int, align: bool, scale, mode: str):
    """(idx, w) of the antialiased modes as torch's backward (cpu_upsample_genNd_backward_aa)
    computes them: its window bounds in f32 arithmetic (the forward's tables use double, and
    a window can differ by a tap of weight 0), every dim resampled, a kept size included."""
    interp_size, filt = _aa_filter(mode)
    sc = _scale(i, o, align, scale)
    f64 = np.float64
    support = np.float32((interp_size * 0.5) * f64(sc)) if sc >= 1 else np.float32(interp_size / 2)
    maxk = int(np.ceil(support)) * 2 + 1
    inv = np.float32(1.0 / f64(sc)) if sc >= 1 else np.float32(1)
    t = np.arange(o, dtype=np.int64)
    center = ((t + 0.5) * f64(sc)).astype(np.float32)
    xmin = np.maximum(((center - support).astype(f64) + 0.5).astype(np.int64), 0)
    xmax = np.minimum(((center + support).astype(f64) + 0.5).astype(np.int64), i)
    xsize = np.clip(xmax - xmin, 0, maxk)
    j = np.arange(maxk, dtype=np.int64)
    pos = (j[None, :] + xmin[:, None]).astype(np.float32) - center[:, None]  # f32
    arg = ((pos.astype(f64) + 0.5) * f64(inv)).astype(np.float32)
    inside = j[None, :] < xsize[:, None]
    if mode == "bicubic":  # f32 with torch's build's FMAs (bit for bit, measured): a weight
        a, x = np.float32(-0.5), np.abs(arg)  # that cancels to 0 there is 0 here
        w = np.where(x < 1, _cubic1_fma(x, a), np.where(x < 2, _cubic2_fma(x, a), np.float32(0)))
    else:  # (1 - |x| is exact in f32; Lanczos' sines cannot match torch's libm bit for bit)
        w = filt(arg.astype(f64)).astype(np.float32)
    w = np.where(inside, w, np.float32(0))
    total = np.zeros(o, np.float32)
    for k in range(maxk):  # the f32 running sum, in torch's order
        total = total + w[:, k]
    w = np.where(total[:, None] != 0, w / np.where(total == 0, 1, total)[:, None], w)
    return np.where(inside, xmin[:, None] + j[None, :], -1), w.astype(np.float32)


def _gather_table(idx, w, i: int, o: int):
    """The transpose of (idx, w) as `gather_pass`'s table (words, K), or None when the axis is
    the identity: input position l gathers its K terms (output t, weight), in torch's order of
    accumulation (by t, then tap). A tap repeated by a clamp stays a term of its own, as in
    torch (inf·1 + inf·0 is NaN there, and so here)."""
    T = idx.shape[1]
    ok = (idx >= 0).ravel()
    src = idx.ravel()[ok]
    dst = np.repeat(np.arange(o, dtype=np.int64), T)[ok]
    wt = w.ravel()[ok]
    if T == 1 and np.array_equal(src, np.arange(i)) and (wt == 1).all():
        return None
    order = np.lexsort((np.arange(len(src)), src))  # by input, then (t, tap) as listed
    src, dst, wt = src[order], dst[order], wt[order]
    counts = np.bincount(src, minlength=i)
    K = max(int(counts.max()), 1)
    pos = np.arange(len(src)) - np.concatenate([[0], np.cumsum(counts)[:-1]])[src]
    gt = np.zeros((i, K), np.int32)
    gw = np.zeros((i, K), np.float32)
    gt[src, pos] = dst
    gw[src, pos] = wt
    words = np.concatenate([counts.astype(np.int32), gt.ravel(), gw.view(np.int32).ravel()])
    return words, K


_GATHER_TABLES: dict = {}  # (kind, sizes, align_corners, scale, equal) -> table or None (identity)


def _gather_table_on_device(kind, i, o, align, scale, equal_all):
    def make():
        table = _gather_table(*_axis_taps(kind, i, o, align, scale, equal_all), i, o)
        return None if table is None else (upload(table[0], D.int32), table[1])

    return device_table(_GATHER_TABLES, (kind, i, o, align, scale, equal_all), make, 64)


def _backward_axes(ctx, in_sp, out_sp):
    """(kind, align, scale) of each resampled axis, as the forward chose them."""
    dim = len(in_sp)
    mode = ctx.arg(3, "mode", "nearest")
    align = bool(ctx.arg(4, "align_corners", None))
    antialias = ctx.arg(6, "antialias", False)
    size, sf = ctx.arg(1, "size", None), ctx.arg(2, "scale_factor", None)
    if size is not None or mode == "area" or ctx.arg(5, "recompute_scale_factor", None):
        scales = [None] * dim
    else:
        scales = [float(s) for s in (sf if isinstance(sf, (list, tuple)) else [sf] * dim)]
    if antialias:
        kind = "aa-" + mode
    else:
        kind = {"bilinear": "linear", "trilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    if kind not in ("linear", "cubic") and not antialias:
        align = False
    return [(kind, align, s) for s in scales]


def _g_interpolate(ctx, g):
    """The transposed resampling, one axis at a time: input position l of the axis gathers
    Σ_j g[t[l, j]]·w[l, j] over the outputs that read it (`gather_pass`, in f32). While a double
    backward is recorded, the result's own backward is the forward resampling (it is linear
    in g)."""
    shape = tuple(ctx.meta[0][0])
    in_sp, out_sp = shape[2:], tuple(g._shape[2:])
    axes = _backward_axes(ctx, in_sp, out_sp)
    gx, _ = native(g)  # (bfloat16 is read as f32)
    for d, (kind, align, scale) in enumerate(axes):
        table = _gather_table_on_device(kind, in_sp[d], out_sp[d], align, scale, in_sp == out_sp)
        if table is not None:
            gx = _window_pass(gx, 2 + d, table[0], table[1], in_sp[d], gather_pass)
    gx = gx.to(g.dtype) if gx.dtype is not g.dtype else (gx.clone() if gx is g else gx)
    if _autograd.needs_grad(g):
        cfg = [ctx.arg(k, n, v) for k, n, v in _INTERP_ARGS]

        def rule(ctx2, gg):
            return (interpolate(gg, *cfg),)

        rule.saves = frozenset()
        _autograd.record("interpolate_backward", rule, (g,), {}, gx)
    return (gx,)


# interpolate's arguments after the input: (position, name, default)
_INTERP_ARGS = (
    (1, "size", None),
    (2, "scale_factor", None),
    (3, "mode", "nearest"),
    (4, "align_corners", None),
    (5, "recompute_scale_factor", None),
    (6, "antialias", False),
)


_g_interpolate.saves = frozenset()

GRADS = {"interpolate": _g_interpolate}

__all__ = ["channel_shuffle", "native_channel_shuffle", "pixel_shuffle", "pixel_unshuffle"]

METHODS: dict = {}
