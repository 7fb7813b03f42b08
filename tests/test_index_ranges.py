"""Index ranges carried through integer ops and across `pr.compile` calls (ops/ranges.py,
compile/_ranges.py): every range pyrite knows must hold the tensor's values (checked here against
the values read back), an op that cannot know its result's range must leave none (so a bad index
still raises pyrite's IndexError), and gpt-fast's decode loop replays one recording per token
with no readback and no graph break."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.ops.core import known_bounds

sys.path.insert(0, str(Path(__file__).parent))
from test_hunt_generation import _fast, _fast_generate, _load  # noqa: E402


def _readbacks():
    return pr.memory_stats()["readbacks"]


def _holds(t, expect_known=True):
    """The range pyrite knows for int tensor `t` holds its values (and is known, if asked)."""
    b = known_bounds(t)
    if b is None:
        assert not expect_known, "no range known"
        return None
    v = t.numpy()
    if v.size:
        assert b[0] <= v.min() and v.max() <= b[1], (b, v.min(), v.max())
    return b


# ---- rules: each op's range holds its values ------------------------------------------------
def _ops():
    """name -> (function of an int32 tensor x in [-7, 40] and y in [1, 9], expected range)."""
    return {
        "add scalar": (lambda x, y: x + 5, (-2, 45)),
        "radd scalar": (lambda x, y: 5 + x, (-2, 45)),
        "sub scalar": (lambda x, y: x - 3, (-10, 37)),
        "rsub scalar": (lambda x, y: 3 - x, (-37, 10)),
        "add tensor": (lambda x, y: x + y, (-6, 49)),
        "sub tensor": (lambda x, y: x - y, (-16, 39)),
        "add alpha": (lambda x, y: pr.add(x, y, alpha=-2), (-25, 38)),
        "mul positive": (lambda x, y: x * 3, (-21, 120)),
        "mul negative": (lambda x, y: x * -2, (-80, 14)),
        "mul tensor": (lambda x, y: x * y, (-63, 360)),
        "neg": (lambda x, y: -x, (-40, 7)),
        "abs": (lambda x, y: x.abs(), (0, 40)),
        "clamp": (lambda x, y: x.clamp(0, 11), (0, 11)),
        "clamp_min": (lambda x, y: x.clamp_min(2), (2, 40)),
        "clamp_max": (lambda x, y: x.clamp(max=4), (-7, 4)),
        "clamp tensor": (lambda x, y: pr.clamp(x, min=y), (1, 40)),
        "remainder": (lambda x, y: x % 6, (0, 5)),
        "remainder tensor": (lambda x, y: x % y, (0, 8)),
        "fmod": (lambda x, y: pr.fmod(x, 6), (-5, 5)),
        "floor_divide": (lambda x, y: x // 4, (-2, 10)),
        "floor_divide negative": (lambda x, y: x // -4, (-10, 1)),
        "floor_divide tensor": (lambda x, y: x // y, (-7, 40)),
        "div trunc": (lambda x, y: pr.div(x, 4, rounding_mode="trunc"), (-1, 10)),
        "where": (lambda x, y: pr.where(x > 3, x, y), (-7, 40)),
        "where scalar": (lambda x, y: pr.where(x > 3, x, 100), (-7, 100)),
        "maximum": (lambda x, y: pr.maximum(x, y), (1, 40)),
        "to int16": (lambda x, y: x.to(pr.int16), (-7, 40)),
        "to uint8": (lambda x, y: x.to(pr.uint8), (0, 255)),  # (it wraps: the type's range)
        "view": (lambda x, y: x.view(2, -1)[1], (-7, 40)),
        "expand": (lambda x, y: x[:1].expand(4, 3), (-7, 40)),
        "index": (lambda x, y: x[::3], (-7, 40)),
        "contiguous": (lambda x, y: x.view(2, -1).t().contiguous(), (-7, 40)),
        "max": (lambda x, y: x.max(), (-7, 40)),
        "amin dim": (lambda x, y: x.view(2, -1).amin(1), (-7, 40)),
        "max dim values": (lambda x, y: x.view(2, -1).max(1).values, (-7, 40)),
        "chain": (lambda x, y: ((x + 7) * 2 - y) // 3, (-3, 31)),
        "sum": (lambda x, y: x.sum(), (-168, 960)),
        "sum dim": (lambda x, y: x.view(2, -1).sum(1), (-84, 480)),
        "nansum": (lambda x, y: pr.nansum(y), (24, 216)),
        "cumsum": (lambda x, y: x.view(2, -1).cumsum(1), (-84, 480)),
        "cumsum positive": (lambda x, y: y.cumsum(0), (1, 216)),
        "sort values": (lambda x, y: x.view(2, -1).sort(0, descending=True).values, (-7, 40)),
        "topk values": (lambda x, y: x.topk(3).values, (-7, 40)),
        "kthvalue values": (lambda x, y: x.kthvalue(5).values, (-7, 40)),
        "bool to int": (lambda x, y: (x > 3).int(), (0, 1)),
        "bool to uint8": (lambda x, y: (x > 3).to(pr.uint8), (0, 1)),
    }


@pytest.mark.parametrize("name", list(_ops()))
def test_rule_holds_the_values(name, rng):
    fn, want = _ops()[name]
    a = rng.integers(-7, 41, 24)
    a[:2] = (-7, 40)  # the range's ends are there
    x = pr.tensor(a, dtype=pr.int32)
    y = pr.tensor(np.r_[1, 9, rng.integers(1, 10, 22)], dtype=pr.int32)
    out = fn(x, y)
    assert _holds(out) == want


@pytest.mark.parametrize(
    "name, fn, want",
    [
        ("+=", lambda t: t.__iadd__(3), (3, 12)),
        ("-=", lambda t: t.__isub__(3), (-3, 6)),
        ("add_", lambda t: t.add_(2, alpha=3), (6, 15)),
        ("sub_", lambda t: t.sub_(pr.tensor([1, 2, 1, 2, 1])), (-2, 8)),
        ("mul_", lambda t: t.mul_(-1), (-9, 0)),
        ("clamp_", lambda t: t.clamp_(2, 4), (2, 4)),
        ("remainder_", lambda t: t.remainder_(4), (0, 3)),
        ("fill_", lambda t: t.fill_(7), (7, 7)),
        ("copy_", lambda t: t.copy_(pr.arange(5)), (0, 4)),
        ("neg_", lambda t: t.neg_(), (-9, 0)),
    ],
)
def test_in_place_rules(name, fn, want):
    t = pr.tensor([0, 9, 3, 4, 5])
    fn(t)
    assert _holds(t) == want


def test_a_write_into_part_of_a_storage_keeps_the_union():
    t = pr.tensor([0, 9, 3, 4, 5, 1])
    t[:2].add_(100)  # the rest keeps its old values
    assert _holds(t) == (0, 109)
    t[2:4].fill_(-3)
    assert _holds(t) == (-3, 109)
    u = pr.tensor([0, 9, 3, 4])
    u[1:].add_((pr.randn(3) * 4).to(pr.int32))  # unknown: the whole storage forgets
    _holds(u, expect_known=False)


def test_fills_and_index_writes_keep_the_union():
    t = pr.tensor([1, 2, 3, 4])
    m = pr.tensor([True, False, True, False])
    assert _holds(t.masked_fill(m, -100)) == (-100, 4)  # (a loss's ignored targets)
    assert _holds(t.masked_fill(m, pr.tensor(9))) == (1, 9)
    c = pr.zeros(6, dtype=pr.int32)
    c[pr.tensor([1, 3])] = pr.tensor([7, 8])
    assert _holds(c) == (0, 8)
    c.index_fill_(0, pr.tensor([0]), -2)
    assert _holds(c) == (-2, 8)
    c[2:4] += 10  # (a view added to, then copied into itself)
    assert _holds(c) == (-2, 18)
    c.masked_fill_(c > 5, 5)
    assert _holds(c) == (-2, 18)  # (the hull of its old range and the fill: not tighter)
    c[pr.tensor([5])] = (pr.randn(1) * 50).to(pr.int32)
    _holds(c, expect_known=False)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + (2**31 - 40),  # past int32's top
        lambda x: x * 2**26,
        lambda x: x - (2**31 - 1) - 2,
        lambda x: -x.to(pr.uint8),  # negative uint8 values wrap
        lambda x: x.to(pr.uint8) + 250,  # wraps mod 256
        lambda x: x.to(pr.int8) * 8,  # past int8
        lambda x: x.to(pr.int16) * 10000,  # past int16
        lambda x: (x + 1) // pr.tensor([-1, 2] * 12),  # a divisor changing sign
        lambda x: x * (pr.randn(24) * 3).to(pr.int32),  # an operand with no range
        lambda x: x.float().mul(2).to(pr.int32),  # through a float
    ],
)
def test_an_op_that_may_overflow_leaves_no_range(fn, rng):
    a = rng.integers(0, 41, 24)
    a[:2] = (0, 40)
    out = fn(pr.tensor(a, dtype=pr.int32))
    _holds(out, expect_known=False)


def test_int_min_divided_by_minus_one_leaves_no_range():
    x = pr.tensor([-(2**31), 5], dtype=pr.int32)
    _holds(x // -1, expect_known=False)  # 2**31 wraps
    assert _holds(x % -1) == (0, 0)


def test_a_divisor_known_nonzero_reads_nothing():
    x = pr.tensor([7, -9, 30, 4])
    d = (pr.randn(4) * 5).to(pr.int32).abs().clamp(min=1)  # known: [1, 2**31 - 1]
    x // d  # (warm)
    pr.synchronize()
    before = _readbacks()
    q, r = x // d, x % (pr.arange(4) - 7)
    assert _readbacks() == before
    np.testing.assert_array_equal(q.numpy(), x.numpy() // d.numpy())
    np.testing.assert_array_equal(r.numpy(), x.numpy() % (np.arange(4) - 7))
    with pytest.raises(ZeroDivisionError):
        x // (pr.arange(4) - 1)  # (its range holds 0: checked, and it is there)


def test_bounded_whatever_the_input():
    """clamp and % bound their result even where nothing is known of the input."""
    x = (pr.randn(50) * 1000).to(pr.int32)
    assert known_bounds(x) is None
    assert _holds(x.clamp(0, 9)) == (0, 9)
    assert _holds(x % 7) == (0, 6)
    assert _holds(pr.fmod(x, 7)) == (-6, 6)
    assert _holds(x.clamp_min(0)) == (0, 2**31 - 1)  # (a bound, if not an index range)


def test_chained_index_ops_read_nothing(rng):
    """A decode loop's position bookkeeping: no readback for any of these index checks."""
    V, S = 11, 16
    emb, cache = pr.nn.Embedding(V, 4), pr.zeros(S, 4)
    mask = pr.tril(pr.ones(S, S, dtype=pr.bool))
    pos = pr.tensor([3], dtype=pr.int32)
    ids = pr.tensor(rng.integers(0, V, (2, 5)))
    emb(ids), cache[pos], mask[pos]  # warm: one-time device probes
    pr.synchronize()
    before = _readbacks()
    for _ in range(4):
        cache[pos] = emb(ids[:, -1:]).sum(0)
        mask[None, pos]
        pos += 1
        emb((ids + pos) % V)
        emb(pr.where(ids > 3, ids.clamp(min=1) - 1, ids.clamp(0, 2)))
        emb(pr.cat([ids, ids.max(-1, keepdim=True).values], -1))
        cache[(pos - 1).clamp(0, S - 1).expand(3)]
        cache[pr.arange(S)[-2:].flip(0) - pos // 8]
    assert _readbacks() == before
    assert _holds(pos) == (7, 7)


def test_position_ids_from_a_mask_read_nothing(rng):
    """HF's create_position_ids_from_input_ids (`mask = ids.ne(pad).int()`, its cumsum times
    the mask, plus pad) and a mask's lengths: bool casts, cumsum and sum carry their ranges,
    so the position embedding's check and the sums' overflow checks read nothing back."""
    pad, S = 1, 9
    pos_emb = pr.nn.Embedding(S + pad + 1, 3)
    a = rng.integers(0, 12, (3, S))
    a[:, -3:] = pad
    ids = pr.tensor(a)

    def positions(ids):
        mask = ids.ne(pad).int()
        return (pr.cumsum(mask, dim=1).type_as(mask) * mask).long() + pad

    pos_emb(positions(ids)), ids.ne(pad).int().sum(1)  # (warm)
    pr.synchronize()
    before = _readbacks()
    pos, lengths = positions(ids), ids.ne(pad).int().sum(1)
    pos_emb(pos)
    assert _readbacks() == before
    t = torch.tensor(a)
    m = t.ne(pad).int()
    want = (torch.cumsum(m, dim=1).type_as(m) * m).long() + pad
    np.testing.assert_array_equal(pos.numpy(), want.numpy())
    np.testing.assert_array_equal(lengths.numpy(), m.sum(1).numpy())
    assert _holds(pos) == (pad, S + pad) and _holds(lengths) == (0, S)


def test_an_int_sum_known_to_fit_reads_nothing_and_one_that_may_not_is_checked():
    small = pr.tensor([5, -3, 7])
    small.sum(), small.cumsum(0)  # (warm: one-time device probes)
    pr.synchronize()
    before = _readbacks()
    s, c = small.sum(), small.cumsum(0)
    assert _readbacks() == before
    np.testing.assert_array_equal(c.numpy(), [5, 2, 9])
    assert s.item() == 9
    for big in (pr.tensor([2**30, 2**30, 1]), (pr.ones(3) * 2**30).to(pr.int32)):
        with pytest.raises(OverflowError, match="does not fit in int32"):
            big.sum()
        with pytest.raises(OverflowError, match="does not fit in int32"):
            big.cumsum(0)
    step = pr.compile(lambda x: x.sum(0) + x.cumsum(0))
    for k in range(3):
        assert _quiet(step, pr.tensor([k, 1, 2])).numpy().tolist() == [
            2 * k + 3,
            2 * k + 4,
            2 * k + 6,
        ]
    st = step.stats()  # (the overflow checks' readbacks were graph breaks)
    assert st["graph_breaks"] == [] and st["mode"] == "replay" and st["replays"] == 2
    with pytest.raises(OverflowError, match="does not fit in int32"):
        _quiet(step, pr.tensor([2**30, 2**30, 2**30]))  # (the need fails: checked again)


def test_a_bool_copied_into_part_of_an_int_storage_keeps_the_union():
    t = pr.tensor([4, 5, 6, 7])
    t[:2] = pr.tensor([True, False])
    assert _holds(t) == (0, 7)
    u = pr.empty(5, dtype=pr.bool).int()  # (any words: the cast still gives 0 and 1)
    assert _holds(u) == (0, 1)


# ---- a range must never be wrong: writes it cannot know of forget it ------------------------
@pytest.mark.parametrize(
    "how",
    [
        lambda t, c: t.add_((pr.ones(t.shape) * c).to(pr.int32)),  # an operand with no range
        lambda t, c: t.copy_(pr.ones(t.shape) * c),  # a float source
        lambda t, c: t.mul_(2**30).mul_(4).add_(c * 2),  # overflows, then lands out of range
        lambda t, c: t[:3].add_(c),  # part of it, past the end
        lambda t, c: t.view(3, 4)[1].fill_(c),
        lambda t, c: t.__setitem__(slice(0, 2), pr.tensor([c, 0]) * 1),
        lambda t, c: t.scatter_(0, pr.tensor([5]), pr.tensor([c]) + 1),
        lambda t, c: pr.mul(t, c, out=t),
    ],
)
def test_an_out_of_range_write_still_raises(how, rng):
    c = 9
    emb = pr.nn.Embedding(c, 3)
    t = pr.tensor(np.r_[0, 1, rng.integers(0, 2, 10)])
    emb(t)
    how(t, c)
    b = known_bounds(t)
    assert b is None or b[1] >= c  # (a known range says it may not fit)
    with pytest.raises(IndexError, match="out of bounds"):
        emb(t)


def test_a_readback_range_is_kept_and_forgotten():
    """A checked index keeps the range read back (its next check reads nothing) until written."""
    emb = pr.nn.Embedding(10, 2)
    t = (pr.arange(6).float() * 1.5).to(pr.int32)  # a float cast: no range known
    emb(t)
    pr.synchronize()
    before = _readbacks()
    emb(t)
    assert _readbacks() == before
    t.add_((pr.ones(6) * 9).to(pr.int32))
    with pytest.raises(IndexError, match="out of bounds"):
        emb(t)


# ---- pr.compile: needs as guards, outputs' ranges, written tensors ----------------------------
def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def test_compiled_outputs_carry_the_ranges_their_ops_give():
    def f(x, pos):
        return x.argmax(-1), pos + 1, (pos * 2).clamp(0, 9), x.float().mul(3).to(pr.int32)

    step = pr.compile(f)
    x = pr.randn(3, 7)
    for p in range(5):
        a, q, c, u = _quiet(step, x, pr.tensor([p, p + 1], dtype=pr.int32))
        assert _holds(a) == (0, 6)
        assert _holds(q) == (p + 1, p + 2)  # this call's, not the trace's
        assert _holds(c) == (min(2 * p, 9), min(2 * p + 2, 9))
        _holds(u, expect_known=False)
    assert step.stats()["mode"] == "replay" and step.stats()["replays"] >= 3


def test_a_moving_position_replays_one_recording():
    """The index checks' needs are the guard, not the trace's exact range: a position that
    moves each call replays, and one past the end raises as eager code does."""
    S = 6
    cache = pr.zeros(S, 3)

    def f(pos, val):
        cache[pos] = val
        return cache[pos - 1].sum()

    step = pr.compile(f)
    for p in range(1, S):
        _quiet(step, pr.tensor([p]), pr.ones(3) * p)
    st = step.stats()
    assert st["graph_breaks"] == [] and st["mode"] == "replay" and st["replays"] == S - 2
    np.testing.assert_array_equal(cache.numpy()[:, 0], np.arange(S))
    with pytest.raises(IndexError, match="out of bounds"):
        _quiet(step, pr.tensor([S]), pr.ones(3))
    with pytest.raises(IndexError, match="out of bounds"):
        _quiet(step, pr.tensor([-S]), pr.ones(3))  # (pos - 1 is -S - 1)


def test_an_argument_of_unknown_range_is_checked_by_one_readback():
    emb = pr.nn.Embedding(5, 2)
    step = pr.compile(lambda idx: emb(idx))
    for _ in range(3):
        _quiet(step, pr.tensor([1, 4]))
    assert step.stats()["replays"] >= 1
    ok = (pr.ones(2) * 3).to(pr.int32)  # in range, not known
    pr.synchronize()
    before = _readbacks()
    got = _quiet(step, ok)
    assert _readbacks() == before + 1
    np.testing.assert_array_equal(got.numpy(), emb.weight.detach().numpy()[[3, 3]])
    bad = (pr.ones(2) * 7).to(pr.int32)
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        _quiet(step, bad)


def test_an_argument_whose_known_range_is_too_wide_is_read_back_not_traced_again():
    table = pr.arange(10) * 3
    step = pr.compile(lambda i: table[i] + 1)
    for p in range(3):
        _quiet(step, pr.tensor([p, p + 2]))
    loose = pr.tensor([4, 5]).clamp_min(0)  # known: [0, 2**31 - 1]
    pr.synchronize()
    before = _readbacks()
    np.testing.assert_array_equal(_quiet(step, loose).numpy(), [13, 16])
    assert _readbacks() == before + 1
    st = step.stats()
    assert st["traces"] == 1 and st["replays"] == 3


def test_a_compiled_module_in_training_guards_its_ids_too():
    """pr.compile(model) under autograd (compile/_aot.py): new id ranges replay, a bad id
    raises, ids of unknown range are read back once."""

    class M(pr.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = pr.nn.Embedding(10, 4)
            self.lin = pr.nn.Linear(4, 1)

        def forward(self, ids):
            return self.lin(self.emb(ids)).sum()

    m = M()
    cm = pr.compile(m)
    opt = pr.optim.SGD(m.parameters(), lr=0.1)
    for k in range(4):
        _quiet(cm, pr.tensor([k, k + 3])).backward()
        opt.step()
        opt.zero_grad()
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        _quiet(cm, pr.tensor([3, 10]))
    _quiet(cm, (pr.ones(2) * 9).to(pr.int32)).backward()
    st = cm.stats()["training"]
    assert st["traces"] == 1 and st["replays"] == 4 and st["graph_breaks"] == []


def test_a_compiled_write_into_an_argument_leaves_its_range():
    """An argument the recording writes takes the range the replay's ops give (none where they
    give none): before, a replay left the trace's range on it and a bad index read zeros."""
    emb = pr.nn.Embedding(5, 2)

    def f(idx, shift):
        idx.add_(shift)
        return idx.sum()

    step = pr.compile(f)
    for k in range(4):
        idx = pr.tensor([1, 2])
        shift = (pr.ones(2) * 7).to(pr.int32)  # 7: no range known
        _quiet(step, idx, shift)
        np.testing.assert_array_equal(idx.numpy(), [8, 9])
        with pytest.raises(IndexError, match="out of bounds"):
            emb(idx)

    def g(idx):
        idx.add_(1)
        return idx.sum()

    step = pr.compile(g)
    for k in range(4):
        idx = pr.tensor([k, k + 2])
        _quiet(step, idx)
        assert _holds(idx) == (k + 1, k + 3)


def test_a_compiled_write_into_a_module_buffer_moves_its_range():
    class Pos(pr.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", pr.tensor([0]))
            self.register_buffer("table", pr.arange(4) * 10)

        def forward(self):
            self.pos += 1
            return self.table[self.pos]

    m = Pos()
    step = pr.compile(m)
    got = [int(_quiet(step).numpy()[0]) for _ in range(3)]
    assert got == [10, 20, 30]
    assert _holds(m.pos) == (3, 3)  # after replays: the replay's range, not the trace's
    with pytest.raises(IndexError, match="out of bounds"):
        _quiet(step)


def test_a_rerun_forgets_what_its_kernels_write():
    """A recording with a graph break reruns its Python over the recorded kernels: a kernel the
    rerun matches writes its buffer as the recorded one will, so the range noted there before
    (an arange's) is forgotten. It was not, and a bad index read zeros."""
    emb = pr.nn.Embedding(5, 2)
    w = pr.randn(3)

    def f(x):
        w.sum().item()  # a graph break: later calls rerun the Python
        idx = pr.arange(3)
        idx.add_(x.to(pr.int32))  # no range known
        return emb(idx)

    step = pr.compile(f)
    _quiet(step, pr.tensor([1.0, 0.0, 1.0]))
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        _quiet(step, pr.tensor([9.0, 0.0, 1.0]))


def test_an_outside_index_changed_between_calls_is_checked_again():
    emb = pr.nn.Embedding(5, 2)
    ids = pr.tensor([0, 3])  # read by the function, not an argument

    def f(scale):
        return emb(ids) * scale

    step = pr.compile(f)
    for _ in range(3):
        _quiet(step, pr.ones(1))
    assert step.stats()["replays"] >= 1
    ids.copy_(pr.tensor([4, 1]))  # a new range, still in bounds: replays
    np.testing.assert_array_equal(
        _quiet(step, pr.ones(1)).numpy(), emb.weight.detach().numpy()[[4, 1]]
    )
    ids.add_((pr.ones(2) * 6).to(pr.int32))  # unknown and out of range
    with pytest.raises(IndexError, match="out of bounds"):
        _quiet(step, pr.ones(1))


def test_an_outside_tensor_whose_exact_range_sized_the_result_is_a_guard():
    """one_hot's class count comes from its input's exact max without a readback; a replay after
    the input changed would keep the old count (it did: a row of zeros for class 4)."""
    labels = pr.tensor([0, 2, 1])
    step = pr.compile(lambda scale: pr.nn.functional.one_hot(labels) * scale)
    for _ in range(3):
        assert _quiet(step, pr.ones(1, dtype=pr.int32)).shape == (3, 3)
    labels.copy_(pr.tensor([0, 4, 1]))
    got = _quiet(step, pr.ones(1, dtype=pr.int32))
    np.testing.assert_array_equal(got.numpy(), np.eye(5, dtype=np.int64)[[0, 4, 1]])


def test_a_long_chain_in_a_trace_evaluates_without_recursion():
    table = pr.arange(3000)

    def f(pos):
        for _ in range(1200):  # (past Python's default recursion limit)
            pos = pos + 1
        return table[pos]

    step = pr.compile(f)
    for k in range(3):
        r = _quiet(step, pr.tensor([k]))
        assert r.numpy().tolist() == [1200 + k] and _holds(r) == (0, 2999)
    assert step.stats()["mode"] == "replay" and step.stats()["replays"] == 2


# ---- gpt-fast's decode loop ------------------------------------------------------------------
def test_gpt_fast_decode_replays_without_readbacks(rng):
    """gpt-fast's `decode_one_token` under pr.compile(mode="reduce-overhead"): `input_pos += 1`
    keeps the positions' range and the compiled step's tokens carry argmax's, so after the trace
    every token is one replay with no readback and no graph break; tokens and logits are
    torch's. (Before: 4 readbacks a token, every call rerunning its Python.)"""
    V, S = int(rng.integers(15, 40)), 12
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _fast(torch, V, 16, 2, S)().eval()
    pm = _fast(pr, V, 16, 2, S)().eval()
    _load(pm, tm)
    prompt = rng.integers(0, V, (1, 3))
    steps = S - 4

    def decode_one_token(model, x, input_pos):
        logits = model(x, input_pos)
        return logits[:, -1].argmax(-1, keepdim=True).to(dtype=pr.int), logits

    step = pr.compile(decode_one_token, mode="reduce-overhead")
    with pr.no_grad():
        tok, _ = decode_one_token(pm, pr.tensor(prompt), pr.arange(0, 3))
        input_pos = pr.tensor([3], dtype=pr.int)
        toks, lgs, counts = [], [], []
        for _ in range(steps):
            pr.synchronize()
            before = _readbacks()
            tok, lg = _quiet(step, pm, tok.clone(), input_pos)
            input_pos += 1
            toks.append(tok.clone())
            lgs.append(lg)
            counts.append(_readbacks() - before)
    st = step.stats()
    assert st["graph_breaks"] == [] and st["mode"] == "replay"
    assert st["replays"] >= steps - 2  # (a call that met the module first runs eagerly)
    assert counts[-4:] == [0] * 4, counts  # (the trace's calls may read; replays do not)
    assert _holds(input_pos) == (3 + steps, 3 + steps)
    want = _fast_generate(torch, tm, prompt, steps, False)
    np.testing.assert_array_equal(pr.cat(toks, -1).numpy(), want[0][:, 1:])
    for g, w in zip(lgs, want[1][1:]):
        np.testing.assert_allclose(g[:, -1].numpy(), w, rtol=1e-4, atol=1e-5)
    # fullgraph=True: nothing in the step is a graph break any more
    full = pr.compile(decode_one_token, fullgraph=True)
    with pr.no_grad():
        tok, pos = pr.tensor(prompt[:, -1:]), pr.tensor([3], dtype=pr.int)
        for _ in range(4):
            tok, _ = _quiet(full, pm, tok.clone(), pos)
            pos += 1
    assert full.stats()["mode"] == "replay" and full.stats()["replays"] >= 2
    # the same loop as the hunt test runs it (its logits read each token): still torch's
    pm2 = _fast(pr, V, 16, 2, S)().eval()
    _load(pm2, tm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _fast_generate(pr, pm2, prompt, 5, True)
    np.testing.assert_array_equal(got[0], _fast_generate(torch, tm, prompt, 5, False)[0])


def test_a_compiled_module_s_backward_checks_its_indices_at_each_call():
    """An index only the backward reads (a Function saving ids its backward gathers through)
    is checked against each call's ids: the backward's recording read the forward's ranges as
    the trace's constants, and a replay with ids past the table gathered through them silently
    (ones, here) instead of raising as eager code does."""

    class Pick(pr.autograd.Function):
        @staticmethod
        def forward(ctx, w, idx):
            ctx.save_for_backward(idx)
            return w * 2

        @staticmethod
        def backward(ctx, g):
            (idx,) = ctx.saved_tensors
            return (g * pr.arange(5).float()).index_select(0, idx), None

    class M(pr.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = pr.nn.Parameter(pr.randn(5))

        def forward(self, ids):
            return Pick.apply(self.w, (ids + 1) % 100).sum()

    m = M()
    cm = pr.compile(m)
    for ids in ([0, 1, 2, 3, 0], [0, 1, 2, 3, 2], [3, 2, 1, 0, 1], [1, 1, 1, 1, 1]):
        _quiet(cm, pr.tensor(ids)).backward()  # (a new range in bounds: replayed)
        want = (np.array(ids) + 1).astype(np.float32)
        np.testing.assert_array_equal(m.w.grad.numpy(), want)
        m.w.grad = None
    st = cm.stats()["training"]
    assert st["traces"] == 1 and st["replays"] == 3
    with pytest.raises(IndexError, match="index 41 is out of bounds"):
        _quiet(cm, pr.tensor([0, 1, 2, 3, 40])).backward()
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        _quiet(cm, (pr.ones(5) * 8).to(pr.int32)).backward()  # (unknown: read back)
