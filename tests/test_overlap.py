"""Writes through overlapping memory against torch CPU (ops/overlap.py): each case runs the same
code on torch and on pyrite, and either both raise torch's RuntimeError ("some elements of the
input tensor and the written-to tensor refer to a single memory location", or "more than one
element of the written-to tensor refers to a single memory location") or both give the same
values. The allowed cases are those torch allows with a result that does not depend on the
order its loop writes in (a full overlap, disjoint views of one storage, strided views)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import pyrite as pr

PARTIAL = "some elements of the input tensor and the written-to tensor refer to a single memory"
INTERNAL = "more than one element of the written-to tensor refers to a single memory location"


# (name, fn(lib, x) with x = lib.arange(6.)) -> the case mutates x (or raises)
RAISES_PARTIAL = [
    ("add_shifted", lambda t, x: x[1:].add_(x[:-1])),
    ("iadd_shifted", lambda t, x: x[1:].__iadd__(x[:-1])),
    ("sub_alpha", lambda t, x: x[1:].sub_(x[:-1], alpha=2)),
    ("mul_0d_inside", lambda t, x: x.mul_(x[2])),
    ("mul_1elem_inside", lambda t, x: x.mul_(x[2:3])),
    ("copy_shifted", lambda t, x: x[1:].copy_(x[:-1])),
    ("copy_shift_left", lambda t, x: x[:4].copy_(x[2:])),
    ("copy_transposed", lambda t, x: x.view(2, 3).t().copy_(x.view(3, 2))),
    ("add_transposed", lambda t, x: x[:4].view(2, 2).add_(x[:4].view(2, 2).t())),
    ("add_other_strides", lambda t, x: x.view(1, 6).add_(x)),
    ("setitem_shifted", lambda t, x: x.__setitem__(slice(1, None), x[:-1])),
    ("setitem_augmented", lambda t, x: x[1:].__iadd__(x[:-1])),
    ("clamp_min_tensor", lambda t, x: x[1:].clamp_(min=x[:-1])),
    ("clamp_max_tensor", lambda t, x: x[1:].clamp_(max=x[:-1])),
    ("addcmul_", lambda t, x: x[1:].addcmul_(x[:-1], x[:-1])),
    ("addcdiv_", lambda t, x: x[1:].addcdiv_(x[:-1], t.ones(5))),
    ("lerp_", lambda t, x: x[1:].lerp_(x[:-1], 0.5)),
    ("lerp_weight", lambda t, x: x[1:].lerp_(t.ones(5), x[:-1])),
    ("pow_", lambda t, x: x[1:].pow_(x[:-1])),
    ("atan2_", lambda t, x: x[1:].atan2_(x[:-1])),
    ("div_floor", lambda t, x: x[1:].div_(x[:-1], rounding_mode="floor")),
    ("hypot_", lambda t, x: x[1:].hypot_(x[:-1])),
    ("eq_", lambda t, x: x[1:].eq_(x[:-1])),
    ("add_out", lambda t, x: t.add(x[:4], 1, out=x[1:5])),
    ("add_out_tensor", lambda t, x: t.add(x[:4], t.ones(4), out=x[1:5])),
    ("sin_out", lambda t, x: t.sin(x[:5], out=x[1:])),
    ("where_out", lambda t, x: t.where(x[1:] > 2, x[:5], t.zeros(5), out=x[1:])),
    ("cumsum_out", lambda t, x: t.cumsum(x[:5], 0, out=x[1:])),
    ("cat_out", lambda t, x: t.cat([x[:2], x[2:4]], out=x[1:5])),
    ("index_select_out", lambda t, x: t.index_select(x, 0, t.tensor([0, 1]), out=x[1:3])),
    ("index_add_self_part", lambda t, x: x.index_add_(0, t.tensor([0, 1]), x[2:4])),
    ("index_add_full", lambda t, x: x.index_add_(0, t.arange(6), x)),
    ("index_copy_full", lambda t, x: x.index_copy_(0, t.arange(6), x)),
    ("index_copy_part", lambda t, x: x.index_copy_(0, t.tensor([0]), x[5:6])),
    ("scatter_", lambda t, x: x.scatter_(0, t.tensor([0, 1]), x[2:4])),
    ("scatter_add_", lambda t, x: x.scatter_add_(0, t.tensor([0, 1]), x[:2])),
    ("scatter_reduce_", lambda t, x: x.scatter_reduce_(0, t.tensor([0, 1]), x[1:3], "sum")),
    ("index_reduce_", lambda t, x: x.index_reduce_(0, t.tensor([0, 1]), x[1:3], "prod")),
    ("index_put_", lambda t, x: x.index_put_((t.tensor([0, 1]),), x[1:3])),
    ("index_put_accumulate", lambda t, x: x.index_put_((t.tensor([0, 1]),), x[4:], True)),
    ("setitem_index", lambda t, x: x.__setitem__(t.tensor([0, 1]), x[1:3])),
    ("setitem_index_0d", lambda t, x: x.__setitem__(t.tensor([0, 1]), x[0])),
    ("setitem_mask_values", lambda t, x: x.__setitem__(x > 2, x[:3])),
    ("put_", lambda t, x: x.put_(t.tensor([0, 1]), x[1:3])),
]

ALLOWED = [
    ("add_self", lambda t, x: x.add_(x)),
    ("add_same_view", lambda t, x: x[1:4].mul_(x[1:4].view(3, 1).view(3))),
    ("add_transposed_self", lambda t, x: x.view(2, 3).t().add_(x.view(2, 3).t())),
    ("add_out_self", lambda t, x: t.add(x, 1, out=x)),
    ("add_out_both_self", lambda t, x: t.add(x, x, out=x)),
    ("sin_out_self", lambda t, x: t.sin(x, out=x)),
    ("disjoint_halves", lambda t, x: x[:3].add_(x[3:])),
    ("disjoint_0d", lambda t, x: x[1:].add_(x[0])),
    ("disjoint_copy", lambda t, x: x[:2].copy_(x[4:])),
    ("disjoint_out", lambda t, x: t.mul(x[:3], 2, out=x[3:])),
    ("strided_copy", lambda t, x: x[::2].copy_(x[1::2])),
    ("strided_rows", lambda t, x: x.view(2, 3)[:, :2].copy_(x.view(2, 3)[:, 1:])),
    ("strided_add", lambda t, x: x.view(3, 2)[:, 0].add_(x.view(3, 2)[:, 1])),
    ("expanded_input", lambda t, x: x[:2].add_(x[1:2].expand(2))),
    ("fill_0d_of_self", lambda t, x: x.fill_(x[3])),
    ("masked_fill_0d_of_self", lambda t, x: x.masked_fill_(x > 2, x[1])),
    ("index_fill_0d_of_self", lambda t, x: x.index_fill_(0, t.tensor([0]), x[1])),
    ("setitem_mask_0d_of_self", lambda t, x: x.__setitem__(x > 3, x[0])),
    ("setitem_mask_1elem_of_self", lambda t, x: x.__setitem__(x > 3, x[0:1])),
    ("setitem_row_from_other_row", lambda t, x: _setitem_rows(t, x)),
    ("setitem_copy_of_self", lambda t, x: x.__setitem__(slice(2, None), x[:2].repeat(2))),
    ("index_copy_disjoint", lambda t, x: x[:3].index_copy_(0, t.tensor([0, 1]), x[3:5])),
    ("scatter_add_disjoint", lambda t, x: x[:3].scatter_add_(0, t.tensor([0, 1]), x[3:5])),
    ("index_add_strided", lambda t, x: x.index_add_(0, t.tensor([0, 1]), x[::2][:2])),
    ("setitem_index_strided", lambda t, x: x.__setitem__([0, 1], x[::2][:2])),
    ("masked_scatter_", lambda t, x: x.masked_scatter_(x > 2, x[:3])),
    ("int32_view_of_self", lambda t, x: x.view(t.int32).copy_(x.view(t.int32))),
    ("int32_view_cast_copy", lambda t, x: x.view(t.int32).copy_(x)),  # (a full overlap)
    ("empty_views", lambda t, x: x[1:1].add_(x[:0])),
]

RAISES_INTERNAL = [
    ("expand_add_", lambda t, x: x[:4].expand(3, 4).add_(1)),
    ("as_strided_0_add_", lambda t, x: t.as_strided(x, (3,), (0,)).add_(1)),
    ("expand_copy_", lambda t, x: x[:1].expand(3).copy_(t.arange(3.0))),
    ("expand_setitem", lambda t, x: x[:1].expand(3).__setitem__(slice(0, 2), 1.0)),
    ("expand_out", lambda t, x: t.add(t.ones(3), 1, out=x[:1].expand(3))),
    ("expand_index_add_", lambda t, x: x[:1].expand(3).index_add_(0, t.tensor([0]), t.ones(1))),
    ("expand_scatter_", lambda t, x: x[:1].expand(3).scatter_(0, t.tensor([0, 1]), t.ones(2))),
    ("expand_index_copy_", lambda t, x: x[:1].expand(3).index_copy_(0, t.tensor([0]), t.ones(1))),
    ("expand_masked_scatter_", lambda t, x: _expand_masked_scatter(t, x)),
]

ALLOWED_INTERNAL = [
    ("expand_fill_", lambda t, x: x[:1].expand(3).fill_(2.0)),
    ("expand_zero_", lambda t, x: x[:1].expand(3).zero_()),
    ("expand_size1", lambda t, x: x.view(6, 1).expand(6, 1).add_(1)),
    ("expand_empty", lambda t, x: x[:0].expand(3, 0).add_(1)),
    ("as_strided_too_hard", lambda t, x: t.as_strided(x, (2, 2), (2, 1)).mul_(2)),
]


def _setitem_rows(t, x):
    y = x.view(2, 3)
    y[0, t.tensor([0, 1])] = y[1, :2]  # writes x[0]'s row, reads x[1]'s: no overlap


def _expand_masked_scatter(t, x):
    return x[:1].expand(3).masked_scatter_(t.tensor([True, False, True]), t.ones(3))


def _run(lib, fn):
    x = lib.arange(6.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's deprecation warnings for expanded writes)
        fn(lib, x)
    return x


def _both_raise(fn, words):
    with pytest.raises(RuntimeError, match=words):
        _run(torch, fn)
    with pytest.raises(RuntimeError, match=words):
        _run(pr, fn)


def _same_values(fn):
    want = _run(torch, fn).numpy()
    got = _run(pr, fn).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name,fn", RAISES_PARTIAL, ids=[c[0] for c in RAISES_PARTIAL])
def test_partial_overlap_raises(name, fn):
    _both_raise(fn, PARTIAL)


@pytest.mark.parametrize("name,fn", ALLOWED, ids=[c[0] for c in ALLOWED])
def test_allowed_overlap_computes(name, fn):
    _same_values(fn)


@pytest.mark.parametrize("name,fn", RAISES_INTERNAL, ids=[c[0] for c in RAISES_INTERNAL])
def test_internal_overlap_raises(name, fn):
    _both_raise(fn, INTERNAL)


@pytest.mark.parametrize("name,fn", ALLOWED_INTERNAL, ids=[c[0] for c in ALLOWED_INTERNAL])
def test_internal_overlap_allowed(name, fn):
    _same_values(fn)


def test_index_aliasing_self_raises():
    """An index tensor that is (part of) the written tensor: torch's assert_no_overlap."""

    def cases(t):
        x = t.tensor([1, 0, 2, 3, 1, 0])
        yield lambda: x.scatter_(0, x, t.zeros(6, dtype=x.dtype))
        yield lambda: x.index_add_(0, x[:2], t.ones(2, dtype=x.dtype))
        yield lambda: x.__setitem__(x[:2], 5)

    for tcase, pcase in zip(cases(torch), cases(pr)):
        with pytest.raises(RuntimeError, match=PARTIAL):
            tcase()
        with pytest.raises(RuntimeError, match=PARTIAL):
            pcase()


def test_refused_write_leaves_tensor_unchanged():
    x = pr.arange(6.0)
    with pytest.raises(RuntimeError, match=PARTIAL):
        x[1:].add_(x[:-1])
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0, dtype=np.float32))


def test_autograd_inplace_overlap_raises():
    """The refusal comes before autograd records anything (a non-leaf written through a view)."""
    a = pr.arange(6.0, requires_grad=True)
    b = a * 1
    with pytest.raises(RuntimeError, match=PARTIAL):
        b[1:].mul_(b[:-1])
    b.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(6, dtype=np.float32))


def test_compiled_function_raises_at_trace():
    def step(x):
        x[1:].add_(x[:-1])
        return x

    with pytest.raises(RuntimeError, match=PARTIAL):
        pr.compile(step)(pr.arange(6.0))

    def allowed(x):
        x[:3].add_(x[3:])
        return x * 1

    f = pr.compile(allowed)
    for _ in range(2):
        got = f(pr.arange(6.0)).numpy()
        np.testing.assert_array_equal(got, [3, 5, 7, 3, 4, 5])


def test_reductions_out_overlap_not_refused():
    """torch writes a reduction's out= without the check: so does pyrite (computing the result
    first, where torch's may read elements it has already written)."""
    x = pr.arange(6.0)
    pr.sum(x.view(2, 3), 0, out=x[3:])
    np.testing.assert_array_equal(x.numpy(), [0, 1, 2, 3, 5, 7])


@pytest.mark.parametrize("dtype", ["int32", "bfloat16", "uint8"])
def test_partial_overlap_raises_other_dtypes(dtype):
    """The check reads no values: every dtype's in-place paths (the bf16 and small-int fallbacks
    compute on widened copies) refuse alike."""

    def fn(t, x):
        y = x.to(getattr(t, dtype))
        y[1:].mul_(y[:-1])

    _both_raise(fn, PARTIAL)


def test_bool_logical_inplace_raises():
    def fn(t, x):
        m = x > 2
        m[1:].logical_and_(m[:-1])

    _both_raise(fn, PARTIAL)


@pytest.mark.parametrize(
    "name", ["cat", "concat", "concatenate", "hstack", "vstack", "dstack", "column_stack"]
)
def test_cat_family_refuses_out_that_is_an_input(name):
    """torch's cat checks out= against every input, full overlap included: `cat([a, b], out=a)`
    raises in both (and a fresh out of the right shape is written)."""
    for m in (torch, pr):
        a, b = m.zeros(2, 2), m.ones(2, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (torch warns that it resizes out first)
            with pytest.raises(RuntimeError, match="single memory location"):
                getattr(m, name)([a, b], out=a)
    a, b = pr.zeros(2, 2), pr.ones(2, 2)
    want = getattr(torch, name)([torch.zeros(2, 2), torch.ones(2, 2)])
    out = pr.empty(*want.shape)
    getattr(pr, name)([a, b], out=out)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
