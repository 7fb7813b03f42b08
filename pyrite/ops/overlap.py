"""Writes through overlapping memory, refused as PyTorch refuses them (ATen's MemoryOverlap.cpp:
`assert_no_internal_overlap`, `assert_no_partial_overlap`, `assert_no_overlap`).

Every in-place write, `out=` argument, `copy_`, setitem and the scatter / index family asks here
before it writes, with the written-to tensor and the tensors it reads:

- internal overlap: several elements of the written-to tensor share memory through a stride 0
  on a dim of more than one element (an expanded view): refused. Other self-overlapping strides
  (`as_strided((3, 2), (1, 1))`) are torch's TOO_HARD: allowed.
- an input and the written-to tensor in one storage: when either is not non-overlapping and
  dense (a strided slice, an expanded input) torch says TOO_HARD and allows it (pyrite's map
  reads such an input from a copy). When both are dense: the same first element, extent and
  strides is a full overlap (`x.add_(x)`, `pr.add(x, y, out=x)`: allowed); ranges that
  intersect otherwise are a partial overlap (`x[1:].add_(x[:-1])`): refused. The index family
  (`full_ok=False`, torch's assert_no_overlap) refuses the full overlap too.

Metadata only (storage identity, offsets, shapes, strides): no GPU work and no readback, so it
costs nothing beside the op and raises the same way while pr.compile traces. Offsets and
extents compare in elements: views sharing a storage have one element size (view(dtype)
shares only float32 <-> int32, both 4 bytes).
"""

from __future__ import annotations

import functools

from ..tensor import Tensor

NO, FULL, PARTIAL, TOO_HARD = "no", "full", "partial", "too hard"

_PARTIAL_MSG = (
    "pyrite: unsupported operation: some elements of the input tensor and the written-to tensor "
    "refer to a single memory location. Please clone() the tensor before performing the "
    "operation."
)


def is_dense(t: Tensor) -> bool:
    """torch's is_non_overlapping_and_dense: the strides, sorted, are the contiguous strides of
    the sizes so ordered (dims of size 0 or 1 ignored)."""
    need = 1
    dims = sorted((st, d) for d, st in zip(t._shape, t._strides) if d >= 2)
    for st, d in dims:
        if st != need:
            return False
        need *= d
    return True


def has_internal_overlap(t: Tensor) -> bool:
    """Whether two elements of `t` share memory through a 0 stride (an expanded view): torch's
    `has_internal_overlap` YES case (other overlapping strides are torch's TOO_HARD: allowed)."""
    if 0 in t._shape:  # no element to write twice (torch writes an empty expanded view)
        return False
    return any(st == 0 and d > 1 for d, st in zip(t._shape, t._strides))


def check_writable(t: Tensor):
    """RuntimeError, in torch's words, for writing a computed result into an expanded view."""
    if has_internal_overlap(t):
        raise RuntimeError(
            "pyrite: unsupported operation: more than one element of the written-to tensor "
            "refers to a single memory location. Please clone() the tensor before performing "
            f"the operation (shape {tuple(t._shape)}, strides {tuple(t._strides)})."
        )


def _numel(t: Tensor) -> int:
    n = 1
    for d in t._shape:
        n *= d
    return n


def overlap_status(a: Tensor, b: Tensor) -> str:
    """torch's get_overlap_status(a, b): NO, FULL, PARTIAL or TOO_HARD."""
    if a is b:
        return FULL
    if a._storage is not b._storage:
        return NO
    na, nb = _numel(a), _numel(b)
    if na == 0 or nb == 0:
        return NO
    if not is_dense(a) or not is_dense(b):
        return TOO_HARD
    a0, b0 = a._offset, b._offset
    a1, b1 = a0 + na, b0 + nb  # (dense: the elements fill [offset, offset + numel))
    if a0 == b0 and a1 == b1:
        # the same elements in the same order: a dim of one element steps nowhere, so its
        # stride is not compared (pyrite's unsqueeze / reshape give such dims other strides
        # than torch's, whose FULL compares every stride); one element is one element, of any
        # shape (torch's copy_ expands a 0-d source first, which makes it TOO_HARD: allowed)
        same = (
            na == 1
            or tuple(a._shape) == tuple(b._shape)
            and all(sa == sb for d, sa, sb in zip(a._shape, a._strides, b._strides) if d != 1)
        )
        return FULL if same else PARTIAL
    return PARTIAL if a0 < b1 and b0 < a1 else NO


def check_overlap(out: Tensor, inputs, full_ok: bool = True):
    """Refuse, as torch, writing `out` while reading `inputs` (tensors; anything else is
    skipped) that partially overlap it, or with `full_ok=False` overlap it at all."""
    ostore = out._storage
    for t in inputs:
        if not isinstance(t, Tensor) or t._storage is not ostore:
            continue
        s = overlap_status(out, t)
        if s == PARTIAL or (s == FULL and not full_ok):
            raise RuntimeError(
                f"{_PARTIAL_MSG} (written-to: shape {tuple(out._shape)}, strides "
                f"{tuple(out._strides)}, offset {out._offset}; input: shape {tuple(t._shape)}, "
                f"strides {tuple(t._strides)}, offset {t._offset})"
            )


def tensors_in(args, kwargs=None):
    """The tensors among call arguments, one level of lists and tuples opened (cat's list)."""
    found = []
    for a in (*args, *(kwargs.values() if kwargs else ())):
        if isinstance(a, Tensor):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if isinstance(x, Tensor))
    return found


# ---- in-place methods ---------------------------------------------------------------------
# Most in-place methods compute their result and copy_ it into self (ops/mathops.inplace_of,
# ops/compat, ops/operators): copy_ sees a fresh tensor, so the check is made on the call's own
# arguments, by one wrapper around every in-place method of Tensor (guard_inplace_methods).
# Left out: methods with checks of their own (copy_ through run_map; the index and scatter
# family, full_ok=False), methods torch runs without the check (measured against torch 2.13 CPU:
# fill_, masked_fill_ and index_fill_ read a tensor value as value.item(); masked_scatter_,
# the addmm_ family, bernoulli_ and ldexp_ read overlapping inputs unchecked), and those that
# write no computed values (set_, resize_, requires_grad_, ...).
_UNCHECKED = frozenset(
    "copy_ fill_ zero_ masked_fill_ index_fill_ masked_scatter_ index_put_ index_add_ "
    "index_copy_ index_reduce_ scatter_ scatter_add_ scatter_reduce_ put_ fill_diagonal_ "
    "addmm_ addmv_ addbmm_ baddbmm_ bernoulli_ ldexp_ set_ resize_ resize_as_ "
    "requires_grad_ share_memory_ detach_ retain_grad_ uniform_ normal_ random_ "
    "exponential_ geometric_ cauchy_ log_normal_ as_strided_ unsqueeze_ squeeze_ t_ "
    "transpose_ swapaxes_ swapdims_".split()
)


# Python's augmented assignments (x[1:] += x[:-1])
_AUGMENTED = frozenset(
    f"__i{op}__"
    for op in "add sub mul matmul truediv floordiv mod pow lshift rshift and xor or".split()
)


def _is_inplace(name: str) -> bool:
    return name in _AUGMENTED or (name.endswith("_") and not name.startswith("_"))


def _guarded(fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        store = self._storage
        for a in args:
            if isinstance(a, Tensor) and a._storage is store:
                check_overlap(self, args)
                break
        if kwargs:
            for a in kwargs.values():
                if isinstance(a, Tensor) and a._storage is store:
                    check_overlap(self, kwargs.values())
                    break
        return fn(self, *args, **kwargs)

    method._pyrite_overlap = True
    return method


def guard_inplace_methods(cls):
    """Wrap every in-place method of `cls` (x.add_(y), x += y, x.clamp_(min=t), ...) not in
    _UNCHECKED with torch's partial-overlap refusal of its tensor arguments."""
    for name, fn in list(vars(cls).items()):
        if not _is_inplace(name) or name in _UNCHECKED or not callable(fn):
            continue
        if isinstance(fn, (staticmethod, classmethod, type)) or getattr(fn, "_pyrite_overlap", 0):
            continue
        setattr(cls, name, _guarded(fn))
