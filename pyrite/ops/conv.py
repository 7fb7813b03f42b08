"""Convolution and pooling with PyTorch's signatures: conv1d, conv2d (stride, padding incl.
'same'/'valid', dilation, groups, bias), max/avg pool 1d/2d, adaptive avg/max pool 1d/2d.

conv is im2col (kernels/conv.py gathers the column matrix, zero padding included) followed by one
batched GEMM (ops/matmul.gemm) with the groups as a batch dim and the bias added in the GEMM's
epilogue. Pools are one direct kernel. Inputs batched (N, C, ...) or unbatched (C, ...) as torch;
1-D ops run the 2-D kernels with H = 1.
"""

from __future__ import annotations

from .. import backend
from ..errors import ShapeError
from ..kernels.common import grid_for
from ..kernels.conv import im2col, pool2d
from ..tensor import Tensor
from .core import empty
from .elementwise import as_tensor_arg
from .matmul import gemm


def _pair(v, n=2, what="argument"):
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return tuple(int(v[0]) for _ in range(n))
        if len(v) != n:
            raise ValueError(f"pyrite: {what} must be an int or a tuple of {n} ints, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


def _x_info(x: Tensor):
    return [x._offset, *x._strides]


def _batched(x: Tensor, dims: int, what: str):
    """(N, C, H, W) view of x, and whether x was unbatched; `dims` spatial dims (1 or 2)."""
    if x.ndim not in (dims + 1, dims + 2):
        raise ShapeError(
            f"pyrite: {what}: expected a {dims + 1}D (unbatched) or {dims + 2}D "
            f"(batched) input, got shape {tuple(x._shape)}"
        )
    unbatched = x.ndim == dims + 1
    if unbatched:
        x = x._view((1,) + x._shape, (0,) + x._strides, x._offset)
    if dims == 1:
        n, c, w = x._shape
        x = x._view((n, c, 1, w), (x._strides[0], x._strides[1], 0, x._strides[2]), x._offset)
    return x, unbatched


def _finish(out: Tensor, dims: int, unbatched: bool):
    shape = out._shape
    if dims == 1:
        shape = shape[:2] + shape[3:]
    if unbatched:
        shape = shape[1:]
    return out.reshape(*shape) if shape != out._shape else out


# ---- convolution -------------------------------------------------------------------------------
def _conv(x, weight, bias, stride, padding, dilation, groups, dims, what):
    x, w = as_tensor_arg(x), as_tensor_arg(weight)
    if x.dtype is not w.dtype:
        raise TypeError(
            f"pyrite: {what}: input ({x.dtype!r}) and weight ({w.dtype!r}) must have the same dtype"
        )
    if x.dtype.is_bool:
        raise TypeError(f"pyrite: {what} is not implemented for {x.dtype!r}")
    if w.ndim != dims + 2:
        raise ShapeError(f"pyrite: {what}: weight must be {dims + 2}D, got shape {tuple(w._shape)}")
    xb, unbatched = _batched(x, dims, what)
    if dims == 1:
        w = w._view(
            (w._shape[0], w._shape[1], 1, w._shape[2]),
            (w._strides[0], w._strides[1], 0, w._strides[2]),
            w._offset,
        )
    N, C, H, W = xb._shape
    O, Cg, KH, KW = w._shape
    g = int(groups)
    if g < 1 or C != Cg * g or O % g:
        raise ShapeError(
            f"pyrite: {what}: input of shape {tuple(x._shape)} and weight of shape "
            f"{tuple(weight._shape)} do not fit with groups={g} (expected "
            f"{Cg * g} input channels and out_channels divisible by groups)"
        )
    sh, sw = (1,) + _pair(stride, 1, "stride") if dims == 1 else _pair(stride, 2, "stride")
    dh, dw = (1,) + _pair(dilation, 1, "dilation") if dims == 1 else _pair(dilation, 2, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            ph = pw = 0
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError(
                    f"pyrite: {what}: padding='same' is not supported for strided convolutions"
                )
            ph, pw = (dh * (KH - 1)) // 2, (dw * (KW - 1)) // 2  # the extra goes right, as torch
        else:
            raise ValueError(
                f"pyrite: {what}: invalid padding string {padding!r}; expected 'same' or 'valid'"
            )
        OH, OW = (H, W) if padding == "same" else (H - dh * (KH - 1), W - dw * (KW - 1))
    else:
        ph, pw = (0,) + _pair(padding, 1, "padding") if dims == 1 else _pair(padding, 2, "padding")
        OH = (H + 2 * ph - dh * (KH - 1) - 1) // sh + 1
        OW = (W + 2 * pw - dw * (KW - 1) - 1) // sw + 1
    if OH <= 0 or OW <= 0:
        raise ShapeError(
            f"pyrite: {what}: input of shape {tuple(x._shape)} is smaller than the "
            f"(dilated) kernel of shape {tuple(weight._shape)}"
        )
    L = OH * OW
    CK = Cg * KH * KW
    cols = empty((N, C * KH * KW, L), x.dtype)  # rows (c, ki, kj), columns (oh, ow)
    n = cols.numel()
    if n:
        info = [n, C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, *_x_info(xb)]
        backend.current().dispatch(
            im2col(x.dtype.wgsl), [xb._storage.buffer, cols._storage.buffer], info, grid_for(n)
        )
    # (1, g, O/g, CK) @ (N, g, CK, L) -> (N, g, O/g, L): weight rows are (c, ki, kj) like cols
    wc = w if w.is_contiguous() else w.contiguous()
    a = wc._view((1, g, O // g, CK), (0, (O // g) * CK, CK, 1), wc._offset)
    b = cols._view((N, g, CK, L), (C * KH * KW * L, CK * L, L, 1), 0)
    e = None
    if bias is not None:
        bt = as_tensor_arg(bias)
        if bt._shape != (O,):
            raise ShapeError(f"pyrite: {what}: bias of shape {tuple(bt._shape)}, expected ({O},)")
        if bt.dtype is not x.dtype:
            bt = bt.to(x.dtype)
        s = bt._strides[0]
        e = bt._view((N, g, O // g, L), (0, (O // g) * s, s, 0), bt._offset)
    out = gemm(a, b, e)
    out = out._view((N, O, OH, OW), (O * L, L, OW, 1), 0)
    return _finish(out, dims, unbatched)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


# ---- pooling -----------------------------------------------------------------------------------
def _out_size(size, k, s, p, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (o - 1) * s >= size + p:  # the last window must start inside input or left pad
        o -= 1
    return o


def _pool(
    mode,
    input,
    dims,
    what,
    kernel_size=1,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
    out_size=None,
):
    x = as_tensor_arg(input)
    if not x.dtype.is_floating_point:
        raise TypeError(f"pyrite: {what} is not implemented for {x.dtype!r}")
    xb, unbatched = _batched(x, dims, what)
    N, C, H, W = xb._shape
    if out_size is not None:
        if dims == 1:
            OH, OW = 1, _pair(out_size, 1, "output_size")[0]
        else:
            os_ = out_size if isinstance(out_size, (list, tuple)) else (out_size, out_size)
            OH, OW = (H if os_[0] is None else int(os_[0])), (W if os_[1] is None else int(os_[1]))
        KH = KW = sh = sw = ph = pw = dh = dw = 1
    else:

        def two(v, name, lead=1):
            return (lead,) + _pair(v, 1, name) if dims == 1 else _pair(v, 2, name)

        KH, KW = two(kernel_size, "kernel_size")
        sh, sw = two(
            kernel_size if stride is None or stride == [] or stride == () else stride, "stride"
        )
        ph, pw = two(padding, "padding", 0)
        dh, dw = two(dilation, "dilation")
        if ph > KH // 2 or pw > KW // 2:
            raise ValueError(
                f"pyrite: {what}: pad should be at most half of the effective kernel "
                f"size, but got padding={padding} and kernel_size={kernel_size}"
            )
        OH = _out_size(H, KH, sh, ph, dh, ceil_mode)
        OW = _out_size(W, KW, sw, pw, dw, ceil_mode)
        if OH <= 0 or OW <= 0:
            raise ShapeError(
                f"pyrite: {what}: output size is too small for input of shape "
                f"{tuple(x._shape)} and kernel_size={kernel_size}"
            )
    out = empty((N, C, OH, OW), x.dtype)
    n = out.numel()
    idx = empty((N, C, OH, OW), _int32()) if mode.endswith("max") else None
    if n:
        info = [
            n,
            C,
            H,
            W,
            KH,
            KW,
            OH,
            OW,
            sh,
            sw,
            ph,
            pw,
            dh,
            dw,
            *_x_info(xb),
            int(bool(count_include_pad)),
            int(divisor_override or 0),
        ]
        bufs = [xb._storage.buffer, out._storage.buffer]
        if idx is not None:
            bufs.append(idx._storage.buffer)
        backend.current().dispatch(pool2d(mode, x.dtype.wgsl), bufs, info, grid_for(n))
    res = _finish(out, dims, unbatched)
    if idx is None:
        return res
    return res, _finish(idx, dims, unbatched)


def _int32():
    from .. import dtypes

    return dtypes.int32


def max_pool2d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    out, idx = _pool(
        "max", input, 2, "max_pool2d", kernel_size, stride, padding, dilation, ceil_mode
    )
    return (out, idx) if return_indices else out


def max_pool1d(
    input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    out, idx = _pool(
        "max", input, 1, "max_pool1d", kernel_size, stride, padding, dilation, ceil_mode
    )
    return (out, idx) if return_indices else out


def avg_pool2d(
    input,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    return _pool(
        "avg",
        input,
        2,
        "avg_pool2d",
        kernel_size,
        stride,
        padding,
        1,
        ceil_mode,
        count_include_pad,
        divisor_override,
    )


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _pool(
        "avg", input, 1, "avg_pool1d", kernel_size, stride, padding, 1, ceil_mode, count_include_pad
    )


def adaptive_avg_pool2d(input, output_size):
    return _pool("adaptive_avg", input, 2, "adaptive_avg_pool2d", out_size=output_size)


def adaptive_avg_pool1d(input, output_size):
    return _pool("adaptive_avg", input, 1, "adaptive_avg_pool1d", out_size=output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    out, idx = _pool("adaptive_max", input, 2, "adaptive_max_pool2d", out_size=output_size)
    return (out, idx) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    out, idx = _pool("adaptive_max", input, 1, "adaptive_max_pool1d", out_size=output_size)
    return (out, idx) if return_indices else out


__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "conv2d",
    "max_pool1d",
    "max_pool2d",
]

METHODS: dict = {}
