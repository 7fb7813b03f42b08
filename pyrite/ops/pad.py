"""`pad` (torch.nn.functional.pad), every mode: constant, reflect, replicate, circular.

Negative padding is a crop (a narrow view): constant and circular crop first and pad what is left,
reflect and replicate pad the whole input and then crop, as torch does (reflect (2, -2) of
[1, 2, 3, 4, 5] is [3, 2, 1, 2, 3], circular's is [2, 3, 1, 2, 3]). With no kernel of its own:
- constant: one fill of the output plus one strided copy (ops/core.py `run_map`) of the input
  into the output's inner narrow view;
- reflect, replicate, circular: per padded dim, one `cat` (ops/combine.py) of three views:
  reflect's edges are negative-stride narrow views (the edge element itself left out),
  replicate's are the edge element expanded with stride 0, circular's are the far edges.

Reached as `pyrite.nn.functional.pad`; not exported as `pyrite.pad` nor as a Tensor method.
"""

from __future__ import annotations

from ..errors import ShapeError
from .casts import clone, fill_
from .combine import _copy_into, _flip_view, cat
from .core import empty
from .views import narrow


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` pairs (left, right) from the last dim backwards."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ShapeError(f"pyrite: pad: padding length must be divisible by 2, got {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(
            f"pyrite: pad: padding length {len(pad)} is too large for an input of "
            f"{input.ndim} dims (shape {tuple(input._shape)})"
        )
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(
            f"pyrite: Unrecognised padding mode {mode!r}; expected "
            "'constant', 'reflect', 'replicate' or 'circular'"
        )
    if mode != "constant" and value not in (None, 0, 0.0):
        raise ShapeError(f"pyrite: pad: padding mode {mode!r} doesn't take in value argument")
    pairs = [(input.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]
    grow = [(d, max(0, lft), max(0, rgt)) for d, lft, rgt in pairs]
    if mode in ("reflect", "replicate"):
        # torch's reflection/replication kernels index the whole input: pad, then crop
        return _crop(_pad_edges(input, grow, mode), pairs, input)
    x = _crop(input, pairs, input)
    pairs = grow
    if mode == "constant":
        shape = list(x._shape)
        for d, lft, rgt in pairs:
            shape[d] += lft + rgt
        out = empty(tuple(shape), x.dtype)
        # F.pad's value is a float (torch: -2 into uint8 overflows rather than wrapping);
        # with nothing to pad torch never uses it
        if any(lft or rgt for _, lft, rgt in pairs):
            fill_(out, 0 if value is None else float(value))
        inner = out
        for d, lft, _ in pairs:
            inner = narrow(inner, d, lft, x._shape[d])
        if x.numel():
            _copy_into(inner, x)
        return out
    return _pad_edges(x, pairs, mode)


def _crop(x, pairs, input):
    """x narrowed by the negative parts of `pairs` ((dim, left, right) pads)."""
    for d, lft, rgt in pairs:
        if lft < 0 or rgt < 0:
            n = x._shape[d]
            lo, hi = max(0, -lft), max(0, -rgt)
            if lo + hi > n:
                raise ShapeError(
                    f"pyrite: pad: negative padding ({lft}, {rgt}) of dim {d} "
                    f"leaves a negative size from input shape "
                    f"{tuple(input._shape)}"
                )
            x = narrow(x, d, lo, n - lo - hi)
    return x


def _pad_edges(x, pairs, mode):
    """x padded by the (non-negative) `pairs` in reflect, replicate or circular mode."""
    input = x
    changed = False
    for d, lft, rgt in pairs:
        if not lft and not rgt:
            continue
        n = x._shape[d]
        if mode == "reflect":
            if lft >= n or rgt >= n:
                raise ShapeError(
                    f"pyrite: pad: padding size should be less than the "
                    f"corresponding input dimension, but got: padding ({lft}, "
                    f"{rgt}) at dimension {d} of input {tuple(input._shape)}"
                )
            left = _flip_view(narrow(x, d, 1, lft), [d])
            right = _flip_view(narrow(x, d, n - 1 - rgt, rgt), [d])
        elif mode == "replicate":
            if n == 0:
                raise ShapeError(
                    f"pyrite: pad: cannot replicate-pad an empty dim {d} of "
                    f"input {tuple(input._shape)}"
                )
            left = _expand_dim(narrow(x, d, 0, 1), d, lft)
            right = _expand_dim(narrow(x, d, n - 1, 1), d, rgt)
        else:  # circular
            if lft > n or rgt > n:
                raise ShapeError(
                    f"pyrite: pad: padding value causes wrapping around more than "
                    f"once: padding ({lft}, {rgt}) at dimension {d} of size {n}"
                )
            left = narrow(x, d, n - lft, lft)
            right = narrow(x, d, 0, rgt)
        x = cat([left, x, right], d)
        changed = True
    return x if changed else clone(x)


def _expand_dim(x, d, n):
    shape = list(x._shape)
    shape[d] = n
    return x._view(tuple(shape), x._strides[:d] + (0,) + x._strides[d + 1 :], x._offset)


# ---- backward (autograd.install records it) --------------------------------------------------
def _pad_dim(t, d, lo, hi):
    """t zero-padded by (lo, hi) along dim d (the constant pad, itself recorded)."""
    widths = [0, 0] * (t.ndim - d)
    widths[2 * (t.ndim - 1 - d)] = lo
    widths[2 * (t.ndim - 1 - d) + 1] = hi
    return pad(t, widths)


def _g_pad(ctx, g):
    """The adjoint of the pad: each padded element's gradient goes back to the input element it
    copied (constant: to none), and the cropped borders of negative padding get zeros (before
    that for reflect and replicate, which crop after padding; after it for circular)."""
    from .reduce import sum as _sum

    widths = tuple(int(p) for p in ctx.args[1])
    mode = ctx.args[2] if len(ctx.args) > 2 else ctx.kwargs.get("mode", "constant")
    nd = g.ndim
    pairs = [(nd - 1 - i, widths[2 * i], widths[2 * i + 1]) for i in range(len(widths) // 2)]
    if mode == "constant":
        return (pad(g, [-w for w in widths]),)
    crops = [max(0, -w) for w in widths]
    gx = g
    if mode != "circular" and any(crops):
        gx = pad(gx, crops)
    for d, lft, rgt in pairs:
        lft, rgt = max(0, lft), max(0, rgt)
        if not lft and not rgt:
            continue
        n = gx._shape[d] - lft - rgt  # the (cropped) input's size along d
        # (Tensor methods, not this module's imported functions: those are the unrecorded
        # originals, and the rule must record for double backward)
        mid = gx.narrow(d, lft, n)
        left, right = gx.narrow(d, 0, lft), gx.narrow(d, lft + n, rgt)
        if mode == "replicate":
            parts = [
                _pad_dim(_sum(left, dim=d, keepdim=True), d, 0, n - 1) if lft else None,
                _pad_dim(_sum(right, dim=d, keepdim=True), d, n - 1, 0) if rgt else None,
            ]
        elif mode == "reflect":
            # out[i] = x[lft - i] on the left, out[lft + n + j] = x[n - 2 - j] on the right
            parts = [
                _pad_dim(left.flip(d), d, 1, n - 1 - lft) if lft else None,
                _pad_dim(right.flip(d), d, n - 1 - rgt, 1) if rgt else None,
            ]
        else:  # circular: the left pad copied x's last lft, the right pad its first rgt
            parts = [
                _pad_dim(left, d, n - lft, 0) if lft else None,
                _pad_dim(right, d, 0, n - rgt) if rgt else None,
            ]
        for p in parts:
            if p is not None:
                mid = mid + p
        gx = mid
    if mode == "circular" and any(crops):
        gx = pad(gx, crops)
    return (gx,)


_g_pad.saves = frozenset()

GRADS = {"pad": _g_pad}

__all__: list[str] = []

METHODS: dict = {}
