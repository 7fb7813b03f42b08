"""RNN, LSTM, GRU, their cells and nn.utils.rnn.pad_sequence against torch CPU: torch's weights
loaded by state_dict give torch's outputs, final states and gradients (parameters, input,
initial states) for a random cotangent.

Tolerances. One step computes each pre-activation as a dot product of length K = in + hidden
(plus the bias), so its rounding error is within ~(K + 2)·u·Σ|wᵢxᵢ| (Higham §3.1), and the
pointwise gate math adds a few ULP (sigmoid/tanh are WGSL built-ins: allow 8). The initial
weights make the recurrence contractive, so the error of step t is at most the sum of the
per-step errors before it: the bound grows linearly with the number of steps a value has gone
through, T per layer and direction. A gradient sums T·N such products more (the weight
gradients are sums over every step and batch row).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import pyrite as pr
import pyrite.nn as nn
from pyrite.nn.utils.rnn import pad_sequence, unpad_sequence
from pyrite.testing.tolerance import F32_U, assert_close

RNG = np.random.default_rng(20250705)


def _t(a, requires_grad=False):
    return torch.tensor(np.asarray(a, np.float32), requires_grad=requires_grad)


def _p(a, requires_grad=False):
    return pr.tensor(np.asarray(a, np.float32), requires_grad=requires_grad)


def _flat(out):
    """(output, h) / (output, (h, c)) / h / (h, c) as a flat list."""
    if not isinstance(out, (tuple, list)):
        return [out]
    flat = []
    for o in out:
        flat.extend(_flat(o))
    return flat


def _step_bound(tm, x_abs):
    """Per-step error bound of a pre-activation, (K + 8)·u·(Σⱼ|w_ij||v_j| + |b_i|), worst row
    and worst layer-direction: v is the input x (|x| ≤ x_abs) for layer 0's W_ih, a hidden
    state (|h| ≤ 1 for tanh/sigmoid gates) otherwise."""
    groups = {}
    for name, p in tm.named_parameters():
        kind, _, where = name.partition("_l")
        key = where if kind.split("_")[0] in ("weight", "bias") and where else ""
        groups.setdefault(key, []).append((kind, p.detach().numpy()))
    worst, k_max = 0.0, 0
    for key, params in groups.items():
        total, k = 0.0, 0
        for kind, w in params:
            w = np.abs(w)
            if w.ndim == 2:
                k += w.shape[1]
                first = kind == "weight_ih" and key in ("", "0", "0_reverse")
                total += w.sum(axis=1).max() * (max(x_abs, 1.0) if first else 1.0)
            else:
                total += w.max()
        worst, k_max = max(worst, total), max(k_max, k)
    return (k_max + 8) * F32_U * worst


def _compare(tm, pm, t_args, p_args, steps, rows, grad_inputs):
    """Forward and backward parity for one module call; grad_inputs: (torch, pyrite) leaves."""
    t_out = _flat(tm(*t_args))
    p_out = _flat(pm(*p_args))
    assert len(t_out) == len(p_out)
    x_abs = float(np.abs(t_args[0].detach().numpy()).max())
    layers = getattr(tm, "num_layers", 1) * (2 if getattr(tm, "bidirectional", False) else 1)
    fwd = _step_bound(tm, x_abs) * steps * layers
    for k, (a, b) in enumerate(zip(t_out, p_out)):
        assert tuple(b.shape) == tuple(a.shape), f"result {k}"
        assert_close(b, a.detach().numpy(), atol=fwd, msg=f"result {k}")
    cots = [RNG.standard_normal(tuple(a.shape)).astype(np.float32) for a in t_out]
    torch.autograd.backward(t_out, [_t(c) for c in cots])
    sum((b * _p(c)).sum() for b, c in zip(p_out, cots)).backward()
    g_abs = max(float(np.abs(c).max()) for c in cots)
    # the backward runs the same recurrence in reverse: the forward's relative bound once more,
    # relative to the gradient's own size (it sums T·N rows of products)
    ref = [tp.grad.numpy() for _, tp in tm.named_parameters()] + [
        t.grad.numpy() for t, _ in grad_inputs
    ]
    bwd = 2 * fwd * (max(float(np.abs(r).max()) for r in ref) + g_abs)
    for (name, tp), (pname, pp) in zip(tm.named_parameters(), pm.named_parameters()):
        assert name == pname
        assert pp.grad is not None, name
        assert_close(pp.grad, tp.grad.numpy(), atol=bwd, msg=f"grad {name}")
    for k, (ti, pi) in enumerate(grad_inputs):
        assert_close(pi.grad, ti.grad.numpy(), atol=bwd, msg=f"grad of input {k}")


def _pair(cls, *args, **kwargs):
    tm = getattr(torch.nn, cls)(*args, **kwargs)
    pm = getattr(nn, cls)(*args, **kwargs)
    assert list(pm.state_dict()) == list(tm.state_dict())
    for (tn, tp), (pn, pp) in zip(tm.state_dict().items(), pm.state_dict().items()):
        assert tuple(pp.shape) == tuple(tp.shape), tn
    pm.load_state_dict(tm.state_dict())
    return tm, pm


# (class, constructor kwargs, batched, pass initial states)
CONFIGS = [
    ("LSTM", {}, True, False),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), True, True),
    ("LSTM", dict(bias=False), False, True),
    ("LSTM", dict(proj_size=3, bidirectional=True), True, True),
    ("GRU", dict(num_layers=2, bidirectional=True), True, False),
    ("GRU", dict(batch_first=True, bias=False), True, True),
    ("GRU", {}, False, False),
    ("RNN", dict(num_layers=2), True, True),
    ("RNN", dict(nonlinearity="relu", bidirectional=True, batch_first=True), True, False),
    ("RNN", dict(batch_first=True), False, True),
]


@pytest.mark.parametrize("cls,kwargs,batched,with_state", CONFIGS)
def test_sequence_module_matches_torch(cls, kwargs, batched, with_state):
    T, N, I, H = 7, 3, 5, 6
    tm, pm = _pair(cls, I, H, **kwargs)
    bf = kwargs.get("batch_first", False)
    shape = ((N, T, I) if bf else (T, N, I)) if batched else (T, I)
    x = RNG.standard_normal(shape).astype(np.float32)
    tx, px = _t(x, True), _p(x, True)
    t_args, p_args, leaves = [tx], [px], [(tx, px)]
    if with_state:
        D = 2 if kwargs.get("bidirectional") else 1
        L = kwargs.get("num_layers", 1)
        hsize = kwargs.get("proj_size") or H
        bshape = (N,) if batched else ()
        h0 = RNG.standard_normal((L * D, *bshape, hsize)).astype(np.float32) * 0.5
        th, ph = _t(h0, True), _p(h0, True)
        leaves.append((th, ph))
        if cls == "LSTM":
            c0 = RNG.standard_normal((L * D, *bshape, H)).astype(np.float32)
            tc, pc = _t(c0, True), _p(c0, True)
            leaves.append((tc, pc))
            t_args.append((th, tc))
            p_args.append((ph, pc))
        else:
            t_args.append(th)
            p_args.append(ph)
    _compare(tm, pm, t_args, p_args, T, N, leaves)


def test_non_contiguous_input_and_long_sequence():
    # a permuted view as input, and a longer sequence (the bound grows with T)
    T, N, I, H = 41, 2, 3, 4
    tm, pm = _pair("LSTM", I, H, num_layers=2)
    x = RNG.standard_normal((N, I, T)).astype(np.float32)
    tx, px = _t(x, True), _p(x, True)
    _compare(tm, pm, [tx.permute(2, 0, 1)], [px.permute(2, 0, 1)], T, N, [(tx, px)])


@pytest.mark.parametrize(
    "cls,kwargs",
    [
        ("RNNCell", {}),
        ("RNNCell", dict(nonlinearity="relu", bias=False)),
        ("LSTMCell", {}),
        ("LSTMCell", dict(bias=False)),
        ("GRUCell", {}),
        ("GRUCell", dict(bias=False)),
    ],
)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [True, False])
def test_cells_match_torch(cls, kwargs, batched, with_state):
    N, I, H = 5, 7, 3
    tm, pm = _pair(cls, I, H, **kwargs)
    x = RNG.standard_normal((N, I) if batched else (I,)).astype(np.float32)
    tx, px = _t(x, True), _p(x, True)
    t_args, p_args, leaves = [tx], [px], [(tx, px)]
    if with_state:
        shape = (N, H) if batched else (H,)
        hs = [RNG.standard_normal(shape).astype(np.float32) for _ in range(2)]
        pairs = [(_t(h, True), _p(h, True)) for h in hs]
        if cls == "LSTMCell":
            t_args.append(tuple(a for a, _ in pairs))
            p_args.append(tuple(b for _, b in pairs))
            leaves += pairs
        else:
            t_args.append(pairs[0][0])
            p_args.append(pairs[0][1])
            leaves.append(pairs[0])
    _compare(tm, pm, t_args, p_args, 1, N, leaves)


def test_cell_loop_equals_module():
    # LSTMCell stepped by hand gives LSTM's output (same weights, the module's fast path)
    T, N, I, H = 6, 2, 4, 5
    m = nn.LSTM(I, H)
    cell = nn.LSTMCell(I, H)
    cell.load_state_dict({k[:-3]: v for k, v in m.state_dict().items()})
    x = _p(RNG.standard_normal((T, N, I)))
    out, (h_n, c_n) = m(x)
    h = c = pr.zeros(N, H)
    for t in range(T):
        h, c = cell(x[t], (h, c))
        assert_close(out[t], h.numpy(), atol=1e-5)
    assert_close(h_n[0], h.numpy(), atol=1e-5)
    assert_close(c_n[0], c.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    "cls,args,kwargs",
    [
        ("RNN", (3, 4), {}),
        ("RNN", (3, 4, 2), dict(nonlinearity="relu", dropout=0.25)),
        ("LSTM", (3, 4), dict(num_layers=3, bias=False, batch_first=True, bidirectional=True)),
        ("LSTM", (3, 4), dict(proj_size=2)),
        ("GRU", (10, 20, 2), {}),
        ("RNNCell", (3, 4), dict(nonlinearity="relu")),
        ("LSTMCell", (3, 4), dict(bias=False)),
        ("GRUCell", (3, 4), {}),
    ],
)
def test_repr_and_init(cls, args, kwargs):
    tm = getattr(torch.nn, cls)(*args, **kwargs)
    pm = getattr(nn, cls)(*args, **kwargs)
    assert repr(pm) == repr(tm)
    bound = 1 / np.sqrt(args[1])
    values = np.concatenate([p.detach().numpy().ravel() for p in pm.parameters()])
    assert np.abs(values).max() <= bound
    assert values.std() > bound / 4  # uniform on (-b, b) has std b/√3: not left empty/zero


def test_all_weights_and_names():
    tm = torch.nn.GRU(3, 4, num_layers=2, bidirectional=True)
    pm = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    assert pm._flat_weights_names == tm._flat_weights_names
    assert [[tuple(w.shape) for w in ws] for ws in pm.all_weights] == [
        [tuple(w.shape) for w in ws] for ws in tm.all_weights
    ]


def test_dropout_between_layers_in_training():
    # dropout=1 zeroes the input of layer 2 in training (deterministic); eval ignores it
    T, N, I, H = 4, 2, 3, 5
    tm, pm = _pair("GRU", I, H, num_layers=2, dropout=1.0)
    x = RNG.standard_normal((T, N, I)).astype(np.float32)
    for train in (True, False):
        tm.train(train)
        pm.train(train)
        to, th = tm(_t(x))
        po, ph = pm(_p(x))
        assert_close(po, to.detach().numpy(), atol=1e-5, msg=f"train={train}")
        assert_close(ph, th.detach().numpy(), atol=1e-5, msg=f"train={train}")
    # with p=0.5 the output differs from eval's in training, but is torch's shape
    pm.dropout = 0.5
    pm.train()
    assert tuple(pm(_p(x))[0].shape) == (T, N, H)


def test_errors():
    m = nn.LSTM(3, 4)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        m(pr.randn(5, 2, 7))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D, got 4D"):
        m(pr.randn(5, 2, 3, 1))
    with pytest.raises(
        RuntimeError, match=r"Expected hidden\[0\] size \(1, 2, 4\), got \[1, 2, 5\]"
    ):
        m(pr.randn(5, 2, 3), (pr.randn(1, 2, 5), pr.randn(1, 2, 4)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 3-D"):
        m(pr.randn(5, 2, 3), (pr.randn(2, 4), pr.randn(2, 4)))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 4\), got \[1, 3, 4\]"):
        nn.GRU(3, 4)(pr.randn(5, 2, 3), pr.randn(1, 3, 4))
    with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx should also be 2-D"):
        nn.RNN(3, 4)(pr.randn(5, 3), pr.randn(1, 1, 4))
    with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.GRU(3, 4, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(3, 4, proj_size=4)
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.LSTM(3, 0)
    with pytest.raises(TypeError, match="hidden_size should be of type int, got: float"):
        nn.LSTM(3, 4.0)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)
    with pytest.raises(ValueError, match="LSTMCell: Expected input to be 1D or 2D, got 3D"):
        nn.LSTMCell(3, 4)(pr.randn(1, 2, 3))
    with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 5 expected 3"):
        nn.GRUCell(3, 4)(pr.randn(2, 5))
    with pytest.raises(RuntimeError, match="hidden0 has inconsistent hidden_size: got 3"):
        nn.RNNCell(3, 4)(pr.randn(2, 3), pr.randn(2, 3))


# ---- pad_sequence --------------------------------------------------------------------------
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("trailing", [(), (3,), (2, 1)])
def test_pad_sequence_matches_torch(batch_first, side, trailing):
    lengths = [5, 1, 7, 7, 2]
    seqs = [RNG.standard_normal((n, *trailing)).astype(np.float32) for n in lengths]
    ts = [_t(s, True) for s in seqs]
    ps = [_p(s, True) for s in seqs]
    kw = dict(batch_first=batch_first, padding_value=-2.5, padding_side=side)
    tout = torch.nn.utils.rnn.pad_sequence(ts, **kw)
    pout = pad_sequence(ps, **kw)
    assert_close(pout, tout.detach().numpy())  # copies: exact
    g = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
    tout.backward(_t(g))
    (pout * _p(g)).sum().backward()
    for k, (a, b) in enumerate(zip(ts, ps)):
        assert_close(b.grad, a.grad.numpy(), msg=f"grad of sequence {k}")


def test_unpad_sequence_round_trip_and_errors():
    seqs = [_p(RNG.standard_normal((n, 2))) for n in (3, 1, 4)]
    for bf in (False, True):
        back = unpad_sequence(pad_sequence(seqs, batch_first=bf), [3, 1, 4], batch_first=bf)
        for a, b in zip(back, seqs):
            assert_close(a, b.numpy())
    with pytest.raises(RuntimeError, match="received an empty list of sequences"):
        pad_sequence([])
    with pytest.raises(RuntimeError, match="Expected padding_side to be one of left or right"):
        pad_sequence(seqs, padding_side="up")
    with pytest.raises(RuntimeError, match="trailing shape"):
        pad_sequence([pr.randn(2, 3), pr.randn(3, 4)])


# ---- a short training run ------------------------------------------------------------------
def test_char_lm_training_follows_torch():
    text = "the quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. "
    vocab = sorted(set(text))
    ids = np.array([vocab.index(c) for c in text], np.int64)
    V, E, H, T, B = len(vocab), 8, 16, 12, 4
    starts = RNG.integers(0, len(ids) - T - 1, size=(10, B))

    def build(lib):
        class LM(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = lib.nn.Embedding(V, E)
                self.rnn = lib.nn.LSTM(E, H, num_layers=2, batch_first=True)
                self.head = lib.nn.Linear(H, V)

            def forward(self, x):
                y, _ = self.rnn(self.emb(x))
                return self.head(y)

        return LM()

    tm, pm = build(torch), build(pr)
    pm.load_state_dict(tm.state_dict())
    topt = torch.optim.Adam(tm.parameters(), lr=0.01)
    popt = pr.optim.Adam(pm.parameters(), lr=0.01)
    t_losses, p_losses = [], []
    for step in range(10):
        xb = np.stack([ids[s : s + T] for s in starts[step]])
        yb = np.stack([ids[s + 1 : s + T + 1] for s in starts[step]])
        for lib, m, opt, losses in ((torch, tm, topt, t_losses), (pr, pm, popt, p_losses)):
            opt.zero_grad()
            logits = m(lib.tensor(xb))
            loss = lib.nn.functional.cross_entropy(
                logits.reshape(-1, V), lib.tensor(yb).reshape(-1)
            )
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
    assert t_losses[-1] < t_losses[0]
    # the same weights and batches: each loss is a mean of B·T cross-entropies whose forward
    # and backward round as the parity tests above bound (~1e-7 relative a step); ten Adam steps
    # of size ~lr keep that order, so 1e-5 relative leaves a margin for the compounding
    np.testing.assert_allclose(p_losses, t_losses, rtol=1e-5)
