"""Packed sequences against torch CPU: pack_padded_sequence / pad_packed_sequence /
pack_sequence give torch's data, batch_sizes, indices and padded tensors (sorted and unsorted
lengths, both layouts), and RNN/LSTM/GRU on a PackedSequence give torch's packed output, h_n
(c_n) and gradients (parameters, padded input, initial states) with torch's weights loaded.

Tolerances: packing and padding only move elements (exact, and so is their backward: each
element's gradient is one cotangent entry). The recurrences use the bound of test_nn_rnn (per
step dot-product rounding, linear in the number of steps a value has gone through).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn

import pyrite as pr
import pyrite.nn.utils.rnn as prnn
from pyrite.testing.tolerance import assert_close
from tests.test_nn_rnn import _flat, _pair, _step_bound

RNG = np.random.default_rng(20250706)


def _t(a, requires_grad=False):
    return torch.tensor(np.asarray(a, np.float32), requires_grad=requires_grad)


def _p(a, requires_grad=False):
    return pr.tensor(np.asarray(a, np.float32), requires_grad=requires_grad)


def _same_packed(pp, tp):
    assert_close(pp.data, tp.data.detach().numpy(), atol=0.0, msg="data")
    assert pp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    for name in ("sorted_indices", "unsorted_indices"):
        a, b = getattr(tp, name), getattr(pp, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert b.tolist() == a.tolist(), name


LENGTHS = [
    ([7, 5, 5, 2, 1], True),
    ([3, 7, 1, 5, 5], False),
    ([4], True),
    ([2, 2, 2], False),
]


@pytest.mark.parametrize("lengths,enforce_sorted", LENGTHS)
@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_pad_round_trip_matches_torch(lengths, enforce_sorted, batch_first):
    T, B = max(lengths) + 1, len(lengths)  # one step of padding past the longest
    x = RNG.standard_normal((T, B, 3, 2)).astype(np.float32)
    if batch_first:
        x = x.transpose(1, 0, 2, 3).copy()
    tx, px = _t(x, True), _p(x, True)
    for lens in (lengths, torch.tensor(lengths)):
        plens = lens if isinstance(lens, list) else pr.tensor(lengths)
        tp = trnn.pack_padded_sequence(tx, lens, batch_first, enforce_sorted)
        pp = prnn.pack_padded_sequence(px, plens, batch_first, enforce_sorted)
        _same_packed(pp, tp)
    for total in (None, T + 2):
        ta, tl = trnn.pad_packed_sequence(tp, batch_first, -2.5, total)
        pa, pl = prnn.pad_packed_sequence(pp, batch_first, -2.5, total)
        assert tuple(pa.shape) == tuple(ta.shape)
        assert_close(pa, ta.detach().numpy(), atol=0.0)
        assert pl.tolist() == tl.tolist()
    # backward of pack then pad: the cotangent lands on the live elements only
    cot = RNG.standard_normal(tuple(ta.shape)).astype(np.float32)
    (ta * _t(cot)).sum().backward()
    (pa * _p(cot)).sum().backward()
    assert_close(px.grad, tx.grad.numpy(), atol=0.0)


def test_non_contiguous_input_packs():
    x = RNG.standard_normal((4, 6, 3)).astype(np.float32)  # (B, T, F) viewed as (T, B, F)
    tp = trnn.pack_padded_sequence(_t(x).transpose(0, 1), [6, 3, 2, 2])
    pp = prnn.pack_padded_sequence(_p(x).transpose(0, 1), [6, 3, 2, 2])
    _same_packed(pp, tp)


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack(enforce_sorted):
    lens = [5, 4, 1] if enforce_sorted else [2, 5, 3, 3]
    seqs = [RNG.standard_normal((n, 3)).astype(np.float32) for n in lens]
    tp = trnn.pack_sequence([_t(s) for s in seqs], enforce_sorted)
    pp = prnn.pack_sequence([_p(s) for s in seqs], enforce_sorted)
    _same_packed(pp, tp)
    for a, b in zip(trnn.unpack_sequence(tp), prnn.unpack_sequence(pp)):
        assert_close(b, a.numpy(), atol=0.0)


def test_packed_sequence_methods():
    pp = prnn.pack_sequence([_p(RNG.standard_normal((3, 2))), _p(RNG.standard_normal((1, 2)))])
    assert pp.is_cuda is False and pp.is_pinned() is False
    assert pp.to(pr.float32) is pp and pp.cpu() is pp and pp.cuda() is pp
    assert isinstance(pp.to(pr.float16), prnn.PackedSequence)
    assert pp.to(pr.float16).data.dtype == pr.float16
    assert pp.sorted_indices is None and pp.unsorted_indices is None
    q = prnn.PackedSequence(pp.data, pp.batch_sizes, pr.tensor([1, 2, 0]))
    assert q.unsorted_indices.tolist() == [2, 0, 1]
    data, bs = q[:2]
    assert data is pp.data and bs is pp.batch_sizes


@pytest.mark.parametrize(
    "lengths,kwargs,match",
    [
        ([3, 5, 2], {}, "must be sorted in decreasing order when `enforce_sorted` is True"),
        ([5, 3, 0], {}, "Length of all samples has to be greater than 0"),
        ([0, 5, 3], dict(enforce_sorted=False), "Length of all samples has to be greater"),
        ([5, 3], {}, r"Expected `len\(lengths\)` to be equal to batch_size, but got 2"),
        ([[5, 3, 2]], {}, "'lengths' argument should be a 1D"),
    ],
)
def test_pack_errors_match_torch(lengths, kwargs, match):
    x = RNG.standard_normal((5, 3, 2)).astype(np.float32)
    with pytest.raises(RuntimeError, match=match):
        trnn.pack_padded_sequence(_t(x), lengths, **kwargs)
    with pytest.raises(RuntimeError, match=match):
        prnn.pack_padded_sequence(_p(x), lengths, **kwargs)


def test_pad_and_empty_errors_match_torch():
    x = RNG.standard_normal((5, 3, 2)).astype(np.float32)
    tp = trnn.pack_padded_sequence(_t(x), [5, 3, 2])
    pp = prnn.pack_padded_sequence(_p(x), [5, 3, 2])
    match = "Expected total_length to be at least the length of the longest sequence in input"
    for mod, p in ((trnn, tp), (prnn, pp)):
        with pytest.raises(ValueError, match=match):
            mod.pad_packed_sequence(p, total_length=4)
    with pytest.raises(RuntimeError, match="Cannot pack empty tensors."):
        prnn.pack_padded_sequence(pr.zeros(0, 3, 2), [1, 1, 1])
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        prnn.pack_sequence([])


# (class, constructor kwargs, pass initial states, enforce_sorted)
CONFIGS = [
    ("LSTM", dict(num_layers=2, bidirectional=True), True, False),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), False, True),
    ("LSTM", dict(proj_size=3, bidirectional=True), True, False),
    ("GRU", dict(num_layers=2, bidirectional=True), True, False),
    ("GRU", dict(num_layers=2, bidirectional=True, bias=False), False, True),
    ("RNN", dict(num_layers=2, bidirectional=True), True, False),
    ("RNN", dict(num_layers=2, bidirectional=True, nonlinearity="relu"), False, True),
]


@pytest.mark.parametrize("cls,kwargs,with_state,enforce_sorted", CONFIGS)
def test_modules_on_packed_input_match_torch(cls, kwargs, with_state, enforce_sorted):
    I, H = 5, 6
    lengths = [7, 6, 3, 3, 1] if enforce_sorted else [3, 7, 1, 6, 3]
    T, N = max(lengths) + 1, len(lengths)
    tm, pm = _pair(cls, I, H, **kwargs)
    bf = kwargs.get("batch_first", False)
    x = RNG.standard_normal((N, T, I) if bf else (T, N, I)).astype(np.float32)
    tx, px = _t(x, True), _p(x, True)
    leaves = [(tx, px)]
    t_args, p_args = [], []
    if with_state:
        D = 2 if kwargs.get("bidirectional") else 1
        L = kwargs.get("num_layers", 1)
        hsize = kwargs.get("proj_size") or H
        h0 = RNG.standard_normal((L * D, N, hsize)).astype(np.float32) * 0.5
        th, ph = _t(h0, True), _p(h0, True)
        leaves.append((th, ph))
        if cls == "LSTM":
            c0 = RNG.standard_normal((L * D, N, H)).astype(np.float32)
            tc, pc = _t(c0, True), _p(c0, True)
            leaves.append((tc, pc))
            t_args, p_args = [(th, tc)], [(ph, pc)]
        else:
            t_args, p_args = [th], [ph]
    tpk = trnn.pack_padded_sequence(tx, lengths, bf, enforce_sorted)
    ppk = prnn.pack_padded_sequence(px, lengths, bf, enforce_sorted)
    t_res, p_res = tm(tpk, *t_args), pm(ppk, *p_args)
    assert isinstance(p_res[0], prnn.PackedSequence)
    for name in ("batch_sizes", "sorted_indices", "unsorted_indices"):
        a, b = getattr(t_res[0], name), getattr(p_res[0], name)
        assert (a is None) == (b is None) and (a is None or b.tolist() == a.tolist()), name
    # outputs padded back (zeros past each length), and the final states
    t_out = [trnn.pad_packed_sequence(t_res[0], bf)[0], *_flat(t_res[1])]
    p_out = [prnn.pad_packed_sequence(p_res[0], bf)[0], *_flat(p_res[1])]
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    fwd = _step_bound(tm, float(np.abs(x).max())) * T * layers
    for k, (a, b) in enumerate(zip(t_out, p_out)):
        assert tuple(b.shape) == tuple(a.shape), f"result {k}"
        assert_close(b, a.detach().numpy(), atol=fwd, msg=f"result {k}")
    cots = [RNG.standard_normal(tuple(a.shape)).astype(np.float32) for a in t_out]
    torch.autograd.backward(t_out, [_t(c) for c in cots])
    sum((b * _p(c)).sum() for b, c in zip(p_out, cots)).backward()
    ref = [tp.grad.numpy() for _, tp in tm.named_parameters()] + [t.grad.numpy() for t, _ in leaves]
    g_abs = max(float(np.abs(c).max()) for c in cots)
    bwd = 2 * fwd * (max(float(np.abs(r).max()) for r in ref) + g_abs)
    for (name, tp), (pname, pp) in zip(tm.named_parameters(), pm.named_parameters()):
        assert name == pname
        assert pp.grad is not None, name
        assert_close(pp.grad, tp.grad.numpy(), atol=bwd, msg=f"grad {name}")
    for k, (ti, pi) in enumerate(leaves):
        assert_close(pi.grad, ti.grad.numpy(), atol=bwd, msg=f"grad of input {k}")


def test_packed_equals_each_sequence_alone():
    # a sequence in a packed batch gives what it gives run by itself (its own length)
    m = pr.nn.GRU(3, 4, bidirectional=True)
    seqs = [_p(RNG.standard_normal((n, 3))) for n in (2, 5, 3)]
    out, h = m(prnn.pack_sequence(seqs, enforce_sorted=False))
    padded, lens = prnn.pad_packed_sequence(out)
    for b, s in enumerate(seqs):
        o1, h1 = m(s.unsqueeze(1))
        n = s.size(0)
        assert_close(padded[:n, b], o1[:, 0].numpy(), atol=1e-5)
        assert_close(h[:, b], h1[:, 0].numpy(), atol=1e-5)


def test_packed_hidden_size_error_matches_torch():
    tm, pm = _pair("GRU", 3, 4)
    x = RNG.standard_normal((4, 3, 3)).astype(np.float32)
    h0 = RNG.standard_normal((1, 2, 4)).astype(np.float32)
    match = r"Expected hidden size \(1, 3, 4\), got \[1, 2, 4\]"
    with pytest.raises(RuntimeError, match=match):
        tm(trnn.pack_padded_sequence(_t(x), [4, 2, 1]), _t(h0))
    with pytest.raises(RuntimeError, match=match):
        pm(prnn.pack_padded_sequence(_p(x), [4, 2, 1]), _p(h0))
