"""einsum: PyTorch's equation syntax ('...' ellipsis, implicit output, repeated labels as
diagonals) parsed into per-operand label lists, then planned as a left-to-right chain of pairwise
contractions, each one batched GEMM (ops/matmul.py `gemm`) over operands permuted and reshaped to
(batch, M, K) x (batch, K, N); labels that appear in one operand only and not in the output are
summed first (a GEMM with a ones vector), so no kernel of its own is needed. Its gradient is
that of the pieces (views, diagonal, matmul), each recorded.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor
from . import matmul as _matmul
from .elementwise import as_tensor_arg
from .matmul import _check_dtypes


def gemm(a, b):
    # ops/matmul.py's matmul, looked up at call time: the recorded op (autograd.install wraps
    # the module attribute), so einsum is differentiable, twice, through its own pieces
    return _matmul.matmul(a, b)


def _sum_labels(t: Tensor, labels: list, drop: set):
    """Sum `t` over the dims whose label is in `drop` (as a GEMM with a ones vector)."""
    from .creation import ones

    keep = [i for i, c in enumerate(labels) if c not in drop]
    gone = [i for i, c in enumerate(labels) if c in drop]
    if not gone:
        return t, labels
    p = t.permute(*keep, *gone)
    kshape = tuple(t._shape[i] for i in keep)
    s = math.prod(t._shape[i] for i in gone)
    flat = p.reshape(math.prod(kshape), s)
    red = gemm(flat, ones(s, 1, dtype=t.dtype))  # (P, 1)
    return red.reshape(*kshape), [labels[i] for i in keep]


def _diagonals(t: Tensor, labels: list):
    """Repeated labels in one operand ('ii') become a diagonal view."""
    from .views import diagonal

    while True:
        seen = {}
        for i, c in enumerate(labels):
            if c in seen:
                j = seen[c]
                t = diagonal(t, 0, j, i)  # the diagonal goes last
                labels = [x for k, x in enumerate(labels) if k not in (i, j)] + [c]
                break
            seen[c] = i
        else:
            return t, labels


def _contract(a, la, b, lb, keep, sizes):
    """a (labels la) x b (labels lb) -> tensor with labels: batch, a's kept, b's kept."""
    a, la = _sum_labels(a, la, {c for c in la if c not in lb and c not in keep})
    b, lb = _sum_labels(b, lb, {c for c in lb if c not in la and c not in keep})
    batch = [c for c in la if c in lb and c in keep]
    con = [c for c in la if c in lb and c not in keep]
    am = [c for c in la if c not in lb]
    bn = [c for c in lb if c not in la]
    a = a.permute(*[la.index(c) for c in batch + am + con])
    b = b.permute(*[lb.index(c) for c in batch + con + bn])
    a = a.expand(*[sizes[c] for c in batch + am + con])
    b = b.expand(*[sizes[c] for c in batch + con + bn])
    bs = [sizes[c] for c in batch]
    m = math.prod(sizes[c] for c in am)
    k = math.prod(sizes[c] for c in con)
    n = math.prod(sizes[c] for c in bn)
    res = gemm(a.reshape(*bs, m, k), b.reshape(*bs, k, n))
    return res.reshape(*bs, *[sizes[c] for c in am + bn]), batch + am + bn


def _sublist_letters(sub):
    """A sublist (ints in [0, 52) and Ellipsis) as equation letters: 0-25 -> A-Z, 26-51 -> a-z."""
    out = []
    for s in sub:
        if s is Ellipsis:
            out.append("...")
        elif isinstance(s, int) and 0 <= s < 26:
            out.append(chr(ord("A") + s))
        elif isinstance(s, int) and 26 <= s < 52:
            out.append(chr(ord("a") + s - 26))
        else:
            raise ValueError(
                f"pyrite: einsum(): expected subscript to be within the range [0, 52) but got {s}"
            )
    return "".join(out)


def _from_sublists(args):
    """einsum(op1, sub1, op2, sub2, ..., [sub_out]) -> (equation, operands)."""
    ops, terms = list(args[0:-1:2]), [_sublist_letters(s) for s in args[1::2]]
    if len(args) % 2 == 1:  # a trailing output sublist
        ops = list(args[0:-1:2])
        terms = [_sublist_letters(s) for s in args[1:-1:2]]
        return ",".join(terms) + "->" + _sublist_letters(args[-1]), ops
    return ",".join(terms), ops


def einsum(equation, *operands):
    """PyTorch's einsum: '...' ellipsis, implicit output, diagonals ('ii->i'), sums over labels
    that appear once, and any number of operands contracted left to right, each contraction one
    batched GEMM (operands permuted and reshaped to (batch, M, K) x (batch, K, N)). The sublist
    form einsum(op1, [0, 1], op2, [1, 2], [0, 2]) is accepted too, as torch's."""
    if not isinstance(equation, str):
        equation, operands = _from_sublists((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    ts = [as_tensor_arg(t) for t in operands]
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ts):
        raise ArgumentError(
            f"pyrite: einsum(): {len(terms)} operands in the equation {equation!r} "
            f"but {len(ts)} given"
        )
    for t in ts[1:]:
        _check_dtypes(ts[0], t, "einsum")
    n_ell = 0
    for term, t in zip(terms, ts):
        if "..." in term:
            n_ell = max(n_ell, t.ndim - (len(term) - 3))
    ell = [chr(0x100 + i) for i in range(n_ell)]
    labels = []
    for term, t in zip(terms, ts):
        if "..." in term:
            pre, post = term.split("...")
            e = t.ndim - len(pre) - len(post)
            lab = list(pre) + ell[n_ell - e :] + list(post)
        else:
            lab = list(term)
        if len(lab) != t.ndim or not all(c.isalpha() or c in ell for c in lab):
            raise ShapeError(
                f"pyrite: einsum(): the subscripts {term!r} do not fit an operand "
                f"of shape {tuple(t._shape)}"
            )
        labels.append(lab)
    if arrow:
        if "..." in rhs:
            pre, post = rhs.split("...")
            out = list(pre) + ell + list(post)
        else:
            out = list(rhs)
    else:
        counts = {}
        for lab in labels:
            for c in lab:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, k in counts.items() if k == 1 and c not in ell)
    sizes = {}
    for lab, t in zip(labels, ts):
        for c, d in zip(lab, t._shape):
            if sizes.get(c, 1) != 1 and d != 1 and sizes[c] != d:
                raise ShapeError(
                    f"pyrite: einsum(): label {c!r} has sizes {sizes[c]} and {d} "
                    f"(shapes {[tuple(x._shape) for x in ts]})"
                )
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
    for c in out:
        if c not in sizes:
            raise ShapeError(f"pyrite: einsum(): output label {c!r} appears in no operand")
    pairs = [_diagonals(t, lab) for t, lab in zip(ts, labels)]
    cur, lc = pairs[0]
    for i in range(1, len(pairs)):
        keep = set(out)
        for _, lab in pairs[i + 1 :]:
            keep.update(lab)
        cur, lc = _contract(cur, lc, pairs[i][0], pairs[i][1], keep, sizes)
    cur, lc = _sum_labels(cur, lc, {c for c in lc if c not in out})
    cur = cur.permute(*[lc.index(c) for c in out]) if lc else cur
    return cur.expand(*[sizes[c] for c in out]) if out else cur


__all__ = ["einsum"]

METHODS = {}
