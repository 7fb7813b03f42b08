"""`pad` (torch.nn.functional.pad), every mode: constant, reflect, replicate, circular.

Negative padding crops first (a narrow view). Then, with no kernel of its own:
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
    # negative padding crops first
    x = input
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
    pairs = [(d, max(0, lft), max(0, rgt)) for d, lft, rgt in pairs]
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


__all__: list[str] = []

METHODS: dict = {}
