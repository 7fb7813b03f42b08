"""Pools driven by indices, with PyTorch's signatures: fractional_max_pool2d/3d (windows at
pseudo-random fractional strides from `_random_samples`, PyTorch's interval sequences) and
max_unpool1d/2d/3d (values put back at max_pool's indices).

fractional_max_pool runs the pool kernel (kernels/pool.py, loop budget and all) with its window
starts read from a table made on the device; max_unpool is one scatter into zeros
(ops/scatter.py), which checks the indices.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from .core import empty
from .elementwise import as_tensor_arg
from .pool import _check_dtype, _from_5d, _run
from .spatial import SpatialError, as_ncdhw, ntuple, pad3


# ---- fractional max pools -----------------------------------------------------------------------
def _fractional(dims, input, kernel_size, output_size, output_ratio, return_indices, samples):
    """Max over k-windows starting at PyTorch's pseudo-random sequence per plane and dim:
    start_i = int((i + u)·α) - int(u·α), α = (I - k)/(O - 1), the last one I - k (f32 math,
    FractionalMaxPool2d.cpp `generate_intervals`), u the plane's sample for that dim."""
    from .combine import cat
    from .core import run_map
    from .creation import arange, rand

    what = f"fractional_max_pool{dims}d"
    x = as_tensor_arg(input)
    _check_dtype(x, what, False)
    if x.ndim not in (dims + 1, dims + 2):
        raise SpatialError(
            f"pyrite: {what}(): expected a {dims + 1}D or {dims + 2}D input, got shape "
            f"{tuple(x._shape)}"
        )
    if output_size is None and output_ratio is None:
        raise ValueError(
            f"pyrite: {what} requires specifying either an output_size or an output_ratio"
        )
    in_sp = x._shape[-dims:]
    ker = ntuple(kernel_size, dims, "kernel_size", what)
    if output_size is None:
        if isinstance(output_ratio, (list, tuple)) and len(output_ratio) > dims:
            raise ValueError(
                f"pyrite: {what} requires output_ratio to either be a single Int or tuple of Ints."
            )
        ratio = output_ratio if isinstance(output_ratio, (list, tuple)) else (output_ratio,)
        ratio = tuple(ratio) * (dims if len(ratio) == 1 else 1)
        osz = tuple(int(i * float(r)) for i, r in zip(in_sp, ratio))
    else:
        osz = ntuple(output_size, dims, "output_size", what)
    names = ("time", "height", "width")[3 - dims :]
    for nm, o, k, i in zip(names, osz, ker, in_sp):
        if o + k - 1 > i:
            raise SpatialError(
                f"pyrite: {what}(): pool {nm} {k} too large relative to input {nm} {i}"
            )
    xb, unbatched = as_ncdhw(x, dims, what)
    N, C = xb._shape[:2]
    if samples is None:
        samples = rand(N, C, dims, dtype=x.dtype)
    u = as_tensor_arg(samples)
    if u.ndim != 3 or u._shape[2] != dims or u._shape[0] < N or u._shape[1] < C:
        raise SpatialError(
            f"pyrite: {what}: expected _random_samples of shape ({N}, {C}, {dims}), got "
            f"{tuple(u._shape)}"
        )
    # the table: per plane, W's starts, then H's, then D's; sample j of a plane is its dim
    # names[j]'s (2-D: [0] W, [1] H; 3-D: [0] T, [1] H, [2] W, as PyTorch)
    order = {2: (0, 1), 3: (2, 1, 0)}[dims]  # the sample index for W, H, D
    parts = []
    for j, (i, o, k) in enumerate(zip(reversed(in_sp), reversed(osz), reversed(ker))):
        alpha = float(np.float32(i - k) / np.float32(o - 1)) if o > 1 else 0.0
        sample = u[:N, :C, order[j] : order[j] + 1].float()  # (N, C, 1)
        pos = arange(o, dtype=D.float32).reshape(1, 1, o)
        seq = empty((N, C, o), D.int32)
        expr = "select(i32((x0 + x1) * s0) - i32(x1 * s0), i32(s1), x0 == s2)"
        run_map(
            expr,
            (pos, sample),
            ("f32", "f32"),
            seq,
            "i32",
            (alpha, i - k, o - 1),
            ("f32", "f32", "f32"),
        )
        parts.append(seq)
    starts = cat(parts, -1)  # (N, C, OW + OH (+ OD))
    pad_out = pad3(osz, 1)
    one = (1, 1, 1)
    out, idx = _run(
        "fractional_max",
        xb,
        pad_out,
        pad3(ker, 1),
        one,
        (0, 0, 0),
        one,
        True,
        None,
        bool(return_indices),
        dims,
        starts,
    )
    out, idx = _from_5d(out, idx, dims, unbatched, None)
    return (out, idx) if return_indices else out


def fractional_max_pool2d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    """Max over k x k windows at pseudo-random fractional strides (Graham, 2014) of (N, C, H,
    W) or (C, H, W), to `output_size` or input size times `output_ratio`."""
    out, idx = _fractional_pair(2, input, kernel_size, output_size, output_ratio, _random_samples)
    return (out, idx) if return_indices else out


def fractional_max_pool3d(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    """Max over k x k x k windows at pseudo-random fractional strides of (N, C, D, H, W) or
    (C, D, H, W)."""
    out, idx = _fractional_pair(3, input, kernel_size, output_size, output_ratio, _random_samples)
    return (out, idx) if return_indices else out


def fractional_max_pool2d_with_indices(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    return _fractional_pair(2, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool3d_with_indices(
    input,
    kernel_size,
    output_size=None,
    output_ratio=None,
    return_indices=False,
    _random_samples=None,
):
    return _fractional_pair(3, input, kernel_size, output_size, output_ratio, _random_samples)


def _fractional_pair(dims, input, kernel_size, output_size, output_ratio, samples):
    """(values, indices): the one recorded op of the fractional pools (GRADS): the backward
    reads the forward's indices (random windows: recomputing them would draw others)."""
    return _fractional(dims, input, kernel_size, output_size, output_ratio, True, samples)


def _g_fractional_pair(ctx, g):
    """Each output's gradient into the input element its window's max came from."""
    from ..autograd import _check_versions
    from .pool import _scatter_back

    gv = g[0] if isinstance(g, (list, tuple)) else g
    if gv is None or not ctx.needs[1]:
        return None, None
    _check_versions(ctx, only=frozenset(("out",)))
    dims = ctx.args[0]
    return None, _scatter_back(gv, ctx.out[1], tuple(ctx.meta[1][0]), dims)


_g_fractional_pair.saves = frozenset(("out",))
_g_fractional_pair.out_reads = frozenset((1,))


# ---- max unpooling ----------------------------------------------------------------------------
def _unpool(dims, input, indices, kernel_size, stride, padding, output_size):
    """Scatter each value of `input` to its index (d*H*W + h*W + w) in zero output planes."""
    from .creation import zeros
    from .scatter import scatter_

    what = f"max_unpool{dims}d"
    x, idx = as_tensor_arg(input), as_tensor_arg(indices)
    if idx.dtype.kind != "i":
        raise TypeError(
            f"pyrite: {what}: elements in indices should be an integer type but got {idx.dtype!r}"
        )
    if x._shape != idx._shape:
        raise SpatialError(
            f"pyrite: {what}: expected shape of indices to be same as that of the input "
            f"tensor ({tuple(x._shape)}) but got indices tensor with shape {tuple(idx._shape)}"
        )
    if x.ndim not in (dims + 1, dims + 2):
        raise SpatialError(
            f"pyrite: {what}: expected a {dims + 1}D or {dims + 2}D input, got shape "
            f"{tuple(x._shape)}"
        )
    ker = ntuple(kernel_size, dims, "kernel_size", what)
    strd = ker if stride is None else ntuple(stride, dims, "stride", what)
    pad = ntuple(padding, dims, "padding", what)
    in_sp = x._shape[-dims:]
    default = [(i - 1) * s + k - 2 * p for i, s, k, p in zip(in_sp, strd, ker, pad)]
    if output_size is None:
        out_sp = default
    else:
        out_sp = [int(v) for v in output_size]
        if len(out_sp) == dims + 2 or (len(out_sp) == dims + 1 and x.ndim == dims + 1):
            out_sp = out_sp[-dims:]
        if len(out_sp) != dims:
            raise ValueError(
                f"pyrite: {what}: output_size should be a sequence containing {dims} or "
                f"{dims + 2} elements, but it has a length of '{len(out_sp)}'"
            )
        for d in range(dims):
            lo, hi = default[d] - strd[d], default[d] + strd[d]
            if not lo < out_sp[d] < hi:
                raise ValueError(
                    f'pyrite: {what}: invalid output_size "{tuple(output_size)}" (dim {d} must '
                    f"be between {lo} and {hi})"
                )
    lead = x._shape[:-dims]
    plane = math.prod(out_sp)
    out = zeros(*lead, plane, dtype=x.dtype)
    flat = lead + (math.prod(in_sp),)
    scatter_(out, -1, idx.reshape(*flat), x.reshape(*flat))
    return out.reshape(*lead, *out_sp)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: each value put back at its index, zeros elsewhere."""
    return _unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value put back at its index, zeros elsewhere."""
    return _unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: each value put back at its index, zeros elsewhere."""
    return _unpool(3, input, indices, kernel_size, stride, padding, output_size)


__all__: list = []

METHODS: dict = {}

GRADS = {"_fractional_pair": _g_fractional_pair}
