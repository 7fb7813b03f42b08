"""nn.LSTM, nn.GRU and nn.RNN as ONNX's LSTM, GRU and RNN ops.

pyrite runs a recurrent layer as its gate arithmetic, step by step; exported that way the graph
would be unrolled over the example's sequence length. During an export the layers' forward is
captured whole instead (the ops inside are not recorded) and written as one ONNX node a layer,
its weights taken from the parameters under their state_dict names and put in ONNX's gate order
by Split/Concat nodes (torch's LSTM gates are i, f, g, o, ONNX's i, o, f, c; GRU's r, z, n and
z, r, h, with linear_before_reset=1 for torch's n = tanh(W_in x + b_in + r * (W_hn h + b_hn))).
A packed sequence or an LSTM with proj_size is not captured (it exports unrolled, or raises).
"""

from __future__ import annotations

import contextlib

from ..tensor import Tensor
from ._ops import op

_ORDER = {"LSTM": (0, 3, 1, 2), "GRU": (1, 0, 2), "RNN": (0,)}


@contextlib.contextmanager
def captured(tracer):
    """nn.LSTM / GRU / RNN's forward recorded as one event each ('nn.LSTM', ...)."""
    from ..nn.modules import rnn

    saved = []
    for cls in (rnn.LSTM, rnn.GRU, rnn.RNN):
        orig = cls.__dict__["forward"]
        saved.append((cls, orig))
        cls.forward = _capture(tracer, cls.__name__, orig)
    try:
        yield
    finally:
        for cls, orig in saved:
            cls.forward = orig


def _capture(tracer, kind, orig):
    def forward(self, input, hx=None):
        if not isinstance(input, Tensor) or getattr(self, "proj_size", 0) or tracer.depth:
            return orig(self, input, hx)
        tracer.depth += 1
        try:
            out = orig(self, input, hx)
        finally:
            tracer.depth -= 1
        tracer.op(f"nn.{kind}", (self, input, hx), {}, out, False)
        return out

    return forward


def _gates(g, w, kind, hidden):
    """`w` (G*H, ...) with its gate blocks in ONNX's order, as (1, G*H, ...)."""
    order = _ORDER[kind]
    name = g.name(w)
    if len(order) > 1:
        parts = g.node("Split", [name, g.ints([hidden] * len(order))], n_out=len(order), axis=0)
        name = g.node("Concat", [parts[i] for i in order], axis=0)
    return g.node("Unsqueeze", [name, g.ints([0])])


@op("nn.LSTM", "nn.GRU", "nn.RNN")
def _recurrent(g, ev):
    m, x, hx = ev.args
    kind = ev.name[3:]
    H, L = m.hidden_size, m.num_layers
    D = 2 if m.bidirectional else 1
    unbatched = x.dim() == 2
    y = g.name(x)
    if unbatched:  # (T, C) -> (T, 1, C)
        y = g.node("Unsqueeze", [y, g.ints([1])])
    elif m.batch_first:  # (N, T, C) -> (T, N, C)
        y = g.node("Transpose", [y], perm=[1, 0, 2])
    if kind == "LSTM":
        h0, c0 = hx if hx is not None else (None, None)
    else:
        h0, c0 = hx, None

    def state(t, layer):  # (L*D, N, H) -> this layer's (D, N, H)
        if t is None:
            return ""
        s = g.name(t)
        if unbatched:
            s = g.node("Unsqueeze", [s, g.ints([1])])
        return g.node("Slice", [s, g.ints([layer * D]), g.ints([(layer + 1) * D]), g.ints([0])])

    hs, cs = [], []
    for layer in range(L):
        ws, rs, bs = [], [], []
        for d in range(D):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            ws.append(_gates(g, getattr(m, "weight_ih" + sfx), kind, H))
            rs.append(_gates(g, getattr(m, "weight_hh" + sfx), kind, H))
            if m.bias:
                bi = _gates(g, getattr(m, "bias_ih" + sfx), kind, H)
                bh = _gates(g, getattr(m, "bias_hh" + sfx), kind, H)
                bs.append(g.node("Concat", [bi, bh], axis=1))
        cat = (lambda v: v[0]) if D == 1 else (lambda v: g.node("Concat", v, axis=0))
        ins = [y, cat(ws), cat(rs), cat(bs) if bs else "", "", state(h0, layer)]
        attrs = {"hidden_size": H, "direction": "bidirectional" if D == 2 else "forward"}
        if kind == "LSTM":
            ins.append(state(c0, layer))
            outs = g.node("LSTM", ins, n_out=3, **attrs)
        elif kind == "GRU":
            outs = g.node("GRU", ins, n_out=2, linear_before_reset=1, **attrs)
        else:
            act = "Relu" if m.nonlinearity == "relu" else "Tanh"
            outs = g.node("RNN", ins, n_out=2, activations=[act] * D, **attrs)
        # Y (T, D, N, H) -> (T, N, D*H)
        y = g.node("Transpose", [outs[0]], perm=[0, 2, 1, 3])
        y = g.node("Reshape", [y, g.ints([0, 0, -1])])
        hs.append(outs[1])
        if kind == "LSTM":
            cs.append(outs[2])

    def last(states):  # (L*D, N, H)
        s = states[0] if L == 1 else g.node("Concat", states, axis=0)
        return g.node("Squeeze", [s, g.ints([1])]) if unbatched else s

    if unbatched:
        y = g.node("Squeeze", [y, g.ints([1])])
    elif m.batch_first:
        y = g.node("Transpose", [y], perm=[1, 0, 2])
    out, hidden = ev.out
    g.bind(out, y)
    if kind == "LSTM":
        g.bind(hidden[0], last(hs))
        g.bind(hidden[1], last(cs))
    else:
        g.bind(hidden, last(hs))
