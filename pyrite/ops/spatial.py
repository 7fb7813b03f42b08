"""What convolution, pooling and resampling share: their error class, PyTorch's int-or-tuple
arguments, and the (N, C, D, H, W) view every spatial kernel reads (1-D and 2-D inputs get size-1
dims with stride 0, unbatched inputs a batch of one), so one kernel serves ranks 1 to 3.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..tensor import Tensor


class SpatialError(ShapeError, RuntimeError):
    """Sizes or parameters of a convolution, pool or resampling call that do not fit. A
    ShapeError (pyrite's convention) and also the RuntimeError PyTorch raises for them, so a
    ported `except RuntimeError` still catches it."""


def ntuple(v, n: int, name: str, what: str) -> tuple:
    """An int, or a sequence of 1 or n ints, as n ints (PyTorch's `_single/_pair/_triple`)."""
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = v[0]
        elif len(v) != n:
            raise SpatialError(
                f"pyrite: {what}: expected {name} to be a single integer value or a list of "
                f"{n} values to match the {n}-D spatial dimensions, but got {name}={list(v)}"
            )
        else:
            return tuple(_int(x, name, what) for x in v)
    return (_int(v, name, what),) * n


def _int(x, name, what):
    if isinstance(x, bool) or not hasattr(x, "__index__"):
        if isinstance(x, float) and x.is_integer():
            return int(x)
        raise TypeError(f"pyrite: {what}: {name} must be an int or a tuple of ints, got {x!r}")
    return int(x)


def pad3(t: tuple, fill: int) -> tuple:
    """A per-spatial-dim tuple of 1..3 entries as (d, h, w), missing leading dims `fill`."""
    return (fill,) * (3 - len(t)) + tuple(t)


def as_ncdhw(x: Tensor, dims: int, what: str, batched_only: bool = False):
    """x (C, *spatial) or (N, C, *spatial) with `dims` spatial dims, viewed (N, C, D, H, W);
    and whether x came unbatched."""
    ranks = (dims + 2,) if batched_only else (dims + 1, dims + 2)
    if x.ndim not in ranks:
        want = (
            f"{dims + 2}D" if batched_only else f"{dims + 1}D (unbatched) or {dims + 2}D (batched)"
        )
        raise SpatialError(f"pyrite: {what}: expected a {want} input, got shape {tuple(x._shape)}")
    shape, strides = x._shape, x._strides
    unbatched = x.ndim == dims + 1
    if unbatched:
        shape, strides = (1,) + shape, (0,) + strides
    lead = 3 - dims
    shape = shape[:2] + (1,) * lead + shape[2:]
    strides = strides[:2] + (0,) * lead + strides[2:]
    return x._view(shape, strides, x._offset), unbatched


def from_ncdhw(out: Tensor, dims: int, unbatched: bool) -> Tensor:
    """The (N, C, D, H, W) result `out` in the caller's rank (a view)."""
    shape = out._shape[:2] + out._shape[5 - dims :]
    if unbatched:
        shape = shape[1:]
    return out.reshape(*shape) if shape != out._shape else out


KERNEL_STYPES = ("f32", "f16", "i32")


def native(x: Tensor):
    """x in a storage type the spatial kernels read (f32, f16, i32), and the dtype to give the
    result back in (None: x's own). A dtype stored otherwise is widened to float32 or int32 and
    the result narrowed again: exact for every op here (max, sums of integers, float math)."""
    if x.dtype.wgsl in KERNEL_STYPES:
        return x, None
    from .. import dtypes as D

    wide = D.float32 if x.dtype.is_floating_point else D.int32
    return x.to(wide), x.dtype


# ---- loops against the device's loop budget -------------------------------------------------
def box_loop_cost(td: int, th: int, tw: int) -> int:
    """Loop iterations lavapipe counts for three nested loops over a td x th x tw box (an upper
    bound; two-level and one-level nests cost a few less). Measured on Mesa 22.3 / llvmpipe 15
    (this machine, 2026-12-01, the largest trip counts whose loops all completed under the
    65,535 budget): (1, 1, n) n = 65,535; (1, n, 1) 21,845 = 65,535 / 3; (n, 1, 1) 10,923 =
    65,535 / 6; (n, 2, 1) 7,282 = / 9; (n, 1, 2) 9,362 = / 7; (n, 3, 3) 3,641 = / 18;
    (2, n, 5) 4,681 = 65,535 / (2·7). So a loop's exit test counts as an iteration, a pass of
    the middle loop costs tw + 2 and a pass of the outer loop th·(tw + 2) + 3."""
    return td * (th * (tw + 2) + 3) + 3


def fit_box(ext: tuple, limit: int) -> tuple:
    """The largest (td, th, tw) tile of a (KD, KH, KW) box, filled innermost first, whose
    nested loops stay within `limit` iterations (the box itself when it fits)."""
    KD, KH, KW = ext
    if box_loop_cost(KD, KH, KW) <= limit:
        return ext
    tw = min(KW, max(1, limit - 8))  # td = th = 1: tw + 8
    th = min(KH, max(1, (limit - 6) // (tw + 2)))  # td = 1: th (tw + 2) + 6
    td = min(KD, max(1, (limit - 3) // (th * (tw + 2) + 3)))
    return td, th, tw


def widened(fn, x, *others, **kwargs):
    """fn(x, *others) with x and the tensors among `others` of x's dtype widened (see `native`)
    where the kernels cannot read x's storage, and the result narrowed back. Tensors of another
    dtype are passed unchanged, so fn's own dtype errors still name them."""
    if not isinstance(x, Tensor) or x.dtype.wgsl in KERNEL_STYPES:
        return fn(x, *others, **kwargs)
    wide, back = native(x)
    args = [o.to(wide.dtype) if isinstance(o, Tensor) and o.dtype is x.dtype else o for o in others]
    out = fn(wide, *args, **kwargs)
    if isinstance(out, tuple):
        return type(out)(
            o.to(back) if isinstance(o, Tensor) and o.dtype is wide.dtype else o for o in out
        )
    return out.to(back)
