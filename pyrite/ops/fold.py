"""im2col and col2im with PyTorch's signatures: F.unfold (the sliding blocks of (N, C, H, W) as
the columns of (N, C*kh*kw, L)), F.fold (the inverse sum) and Tensor.unfold (a strided view of
the slices along one dim, no copy). unfold is kernels/conv.py's im2col alone, fold its col2im
(the half of a transposed convolution ops/conv.py shares).
"""

from __future__ import annotations

from .. import backend
from .. import dtypes as D
from ..kernels.common import grid_for
from ..kernels.conv import IM2COL_PER_THREAD, im2col
from ..tensor import Tensor
from .conv import _col2im
from .core import empty
from .elementwise import as_tensor_arg
from .spatial import SpatialError, as_ncdhw, ntuple, widened


# ---- unfold / fold -----------------------------------------------------------------------------
def _blocks_msg(sp, ker, dil, pad, blocks):
    return (
        f"spatial size {tuple(sp)}, kernel_size={ker}, dilation={dil}, padding={pad}, "
        f"calculated shape of the array of sliding blocks as {tuple(blocks)}"
    )


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """F.unfold (im2col): (N, C, H, W) or (C, H, W) to (N, C*kh*kw, L) or (C*kh*kw, L), L the
    number of sliding blocks."""
    return widened(_unfold, as_tensor_arg(input), kernel_size, dilation, padding, stride)


def _unfold(input, kernel_size, dilation, padding, stride):
    x = as_tensor_arg(input)
    what = "unfold"
    if not x.dtype.is_floating_point:
        raise TypeError(f'pyrite: "im2col" not implemented for {x.dtype!r}')
    if x.ndim not in (3, 4) or any(s == 0 for s in x._shape[-3:]):
        raise SpatialError(
            "pyrite: unfold: expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
            f"and other non-zero dimensions for input, but got: {list(x._shape)}"
        )
    ker, dil, pad, strd = _geometry(kernel_size, dilation, padding, stride, what)
    xb, unbatched = as_ncdhw(x, 2, what)
    N, C, _, H, W = xb._shape
    blocks = _blocks((H, W), ker, dil, pad, strd)
    if any(b < 1 for b in blocks):
        raise SpatialError(
            f"pyrite: Given input with {_blocks_msg((H, W), ker, dil, pad, blocks)}, but its "
            "components must be at least one."
        )
    L = blocks[0] * blocks[1]
    K = ker[0] * ker[1]
    cols = empty((N, C * K, L), x.dtype)
    if cols.numel():
        info = [
            cols.numel(),
            C,
            1,
            H,
            W,
            1,
            *ker,
            1,
            *blocks,
            1,
            *strd,
            0,
            *pad,
            1,
            *dil,
            xb._offset,
            *xb._strides,
            0,
            0,
            L,
        ]
        backend.current().dispatch(
            im2col(x.dtype.wgsl),
            [xb._storage.buffer, cols._storage.buffer],
            info,
            grid_for(-(-cols.numel() // IM2COL_PER_THREAD)),
        )
    return cols._view(cols._shape[1:], cols._strides[1:], 0) if unbatched else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """F.fold (col2im): (N, C*kh*kw, L) or (C*kh*kw, L) to (N, C, H, W) or (C, H, W),
    summing the entries of overlapping blocks."""
    return widened(_fold, as_tensor_arg(input), output_size, kernel_size, dilation, padding, stride)


def _fold(input, output_size, kernel_size, dilation, padding, stride):
    x = as_tensor_arg(input)
    what = "fold"
    if not x.dtype.is_floating_point:
        raise TypeError(f'pyrite: "col2im" not implemented for {x.dtype!r}')
    if x.ndim not in (2, 3) or any(s == 0 for s in x._shape[-2:]):
        raise SpatialError(
            "pyrite: fold: expected 2D or 3D (batch mode) tensor for input with possibly 0 "
            f"batch size and non-zero dimensions for input, but got: {list(x._shape)}"
        )
    osz = ntuple(output_size, 2, "output_size", what)
    ker, dil, pad, strd = _geometry(kernel_size, dilation, padding, stride, what)
    if any(o <= 0 for o in osz):
        raise SpatialError(f"pyrite: fold: output_size must be positive, got {osz}")
    unbatched = x.ndim == 2
    xb = x._view((1,) + x._shape, (0,) + x._strides, x._offset) if unbatched else x
    N, CK, L = xb._shape
    K = ker[0] * ker[1]
    if CK % K:
        raise SpatialError(
            "pyrite: fold: expected size of input's dimension 1 to be divisible by the product "
            f"of kernel_size, but got input.size(1)={CK} and kernel_size={ker}."
        )
    blocks = _blocks(osz, ker, dil, pad, strd)
    if any(b < 1 for b in blocks):
        raise SpatialError(
            f"pyrite: Given output_size={osz}, kernel_size={ker}, dilation={dil}, "
            f"padding={pad}, stride={strd}, calculated shape of the array of sliding blocks "
            f"as {tuple(blocks)}, which is invalid"
        )
    if blocks[0] * blocks[1] != L:
        raise SpatialError(
            f"pyrite: Given output_size={osz}, kernel_size={ker}, dilation={dil}, "
            f"padding={pad}, stride={strd}, expected size of input's dimension 2 to match the "
            f"calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
            f"{blocks[0] * blocks[1]}, but got input.size(2)={L}."
        )
    C = CK // K
    out = empty((N, C, 1) + osz, x.dtype)
    geo = {
        "groups": 1,
        "kernel": (1, *ker),
        "blocks": (1, *blocks),
        "stride": (1, *strd),
        "padding": (0, *pad),
        "dilation": (1, *dil),
    }
    _col2im(xb, out, geo)
    shape = (N, C) + osz
    out = out._view(shape, (C * osz[0] * osz[1], osz[0] * osz[1], osz[1], 1), 0)
    return out._view(shape[1:], out._strides[1:], 0) if unbatched else out


def _geometry(kernel_size, dilation, padding, stride, what):
    """(ker, dil, pad, strd), each a pair, checked as torch's im2col/col2im check them."""
    ker = ntuple(kernel_size, 2, "kernel_size", what)
    dil = ntuple(dilation, 2, "dilation", what)
    pad = ntuple(padding, 2, "padding", what)
    strd = ntuple(stride, 2, "stride", what)
    if any(k <= 0 for k in ker):
        raise SpatialError(f"pyrite: {what}: kernel size should be greater than zero, got {ker}")
    if any(d <= 0 for d in dil):
        raise SpatialError(f"pyrite: {what}: dilation should be greater than zero, got {dil}")
    if any(s <= 0 for s in strd):
        raise SpatialError(f"pyrite: {what}: stride should be greater than zero, got {strd}")
    if any(p < 0 for p in pad):
        raise SpatialError(f"pyrite: {what}: padding should be non-negative, got {pad}")
    return ker, dil, pad, strd


def _blocks(sizes, ker, dil, pad, strd):
    """The sliding blocks along each dim of spatial size `sizes`."""
    return [
        (i + 2 * p - d * (k - 1) - 1) // s + 1 for i, p, d, k, s in zip(sizes, pad, dil, ker, strd)
    ]


def tensor_unfold(self: Tensor, dimension, size, step) -> Tensor:
    """Tensor.unfold: every slice of length `size` along `dimension`, `step` apart, as a new
    last dim. A view (no copy), as PyTorch's."""
    size, step = int(size), int(step)
    nd = self.ndim
    d = self._dim(dimension)
    if size < 0:
        raise SpatialError(f"pyrite: unfold: size is {size} but must be >= 0")
    if step <= 0:
        raise SpatialError(f"pyrite: unfold: step is {step} but must be > 0")
    length = self._shape[d] if nd else 1
    if size > length:
        raise SpatialError(
            f"pyrite: unfold: maximum size for tensor at dimension {d} is {length} but size "
            f"is {size}"
        )
    if nd == 0:
        return self._view((size,), (1,), self._offset)
    s = self._strides[d]
    shape = list(self._shape)
    strides = list(self._strides)
    shape[d] = (length - size) // step + 1
    strides[d] = s * step
    return self._view(tuple(shape) + (size,), tuple(strides) + (s,), self._offset)


# ---- backward rules (pyrite/autograd.py) ------------------------------------------------------
def _g_unfold(ctx, g):
    """unfold's adjoint is fold: each column entry goes back (summed) to the pixel it read."""
    shape = ctx.meta[0][0]
    geo = [
        ctx.arg(i, n, dv) for i, n, dv in ((2, "dilation", 1), (3, "padding", 0), (4, "stride", 1))
    ]
    return (fold(g, tuple(shape[-2:]), ctx.arg(1, "kernel_size"), *geo),)


_g_unfold.saves = frozenset()


def _g_fold(ctx, g):
    """fold's adjoint is unfold: each column entry reads the gradient of the pixel it summed
    into."""
    geo = [
        ctx.arg(i, n, dv) for i, n, dv in ((3, "dilation", 1), (4, "padding", 0), (5, "stride", 1))
    ]
    return (unfold(g, ctx.arg(2, "kernel_size"), *geo),)


_g_fold.saves = frozenset()


def _g_tensor_unfold(ctx, g):
    """Tensor.unfold: window w's entry k came from index w*step + k along `dimension`; one
    index_add of the windows laid end to end sums overlapping windows' gradients."""
    from .creation import tensor, zeros
    from .scatter import index_add

    shape, dtype = ctx.meta[0]
    if len(shape) == 0:
        return (g.sum(),)
    nd = len(shape)
    d = ctx.arg(1, "dimension")
    d = d + nd if d < 0 else d
    size, step = int(ctx.arg(2, "size")), int(ctx.arg(3, "step"))
    nw = g._shape[d]
    idx = [w * step + k for w in range(nw) for k in range(size)]
    src = g.movedim(-1, d + 1).reshape(*shape[:d], nw * size, *shape[d + 1 :])
    base = zeros(tuple(shape), dtype=g.dtype)
    return (index_add(base, d, tensor(idx, dtype=D.int64), src),)


_g_tensor_unfold.saves = frozenset()

GRADS = {"unfold": _g_unfold, "fold": _g_fold, "tensor_unfold": _g_tensor_unfold}

__all__: list = []

METHODS: dict = {"unfold": tensor_unfold}
