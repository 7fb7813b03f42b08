"""ONNX import: LSTM, GRU and RNN, unrolled over time with pyrite ops (the input projection of
every step in one matmul, then one small matmul a step). Default activations only; no clip,
peepholes, input_forget or per-sequence lengths. See _import.py for the rules."""

from __future__ import annotations

import pyrite as pr

from ._import_ops import dev, host, opt, register

_DEFAULT_ACTS = {
    "LSTM": ["Sigmoid", "Tanh", "Tanh"],
    "GRU": ["Sigmoid", "Tanh"],
    "RNN": ["Tanh"],
}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _check(node):
    acts = node.get("activations")
    dirs = 2 if node.get("direction", "forward") == "bidirectional" else 1
    if acts is not None and [a.lower() for a in acts] != [
        a.lower() for a in _DEFAULT_ACTS[node.op] * dirs
    ]:
        raise node.unsupported(f"activations={acts}")
    if node.get("clip") is not None:
        raise node.unsupported("clip")
    if node.get("input_forget", 0):
        raise node.unsupported("input_forget=1")
    if node.get("direction", "forward") not in ("forward", "reverse", "bidirectional"):
        raise node.unsupported(f"direction={node.get('direction')!r}")


def _cell(op, gx, h, c, r, rb, lbr):
    """One step: gx (B, G*H) the input projection (with its bias), h/c (B, H) the state."""
    hs = h.shape[-1]
    if op == "RNN":
        return (gx + h @ r.t() + rb).tanh(), None
    if op == "LSTM":
        g = gx + h @ r.t() + rb
        i, o, f, cc = (g[:, k * hs : (k + 1) * hs] for k in range(4))  # ONNX order: i o f c
        c = f.sigmoid() * c + i.sigmoid() * cc.tanh()
        return o.sigmoid() * c.tanh(), c
    # GRU, ONNX order z r h
    rz = gx[:, : 2 * hs] + h @ r[: 2 * hs].t() + rb[: 2 * hs]
    z, rr = rz[:, :hs].sigmoid(), rz[:, hs:].sigmoid()
    rh, bh = r[2 * hs :], rb[2 * hs :]
    if lbr:
        n = (gx[:, 2 * hs :] + rr * (h @ rh.t() + bh)).tanh()
    else:
        n = (gx[:, 2 * hs :] + (rr * h) @ rh.t() + bh).tanh()
    return (1 - z) * n + z * h, c


@register("LSTM", "GRU", "RNN")
def _rnn(node):
    _check(node)
    op = node.op
    layout = int(node.get("layout", 0))
    direction = node.get("direction", "forward")
    lbr = bool(node.get("linear_before_reset", 0))

    def run(ins):
        x, w, r = dev(ins[0]), dev(ins[1]), dev(ins[2])
        if layout:
            x = x.transpose(0, 1)  # (T, B, I)
        b = opt(ins, 3)
        if opt(ins, 4) is not None:
            lens = host(ins[4]).reshape(-1)
            if (lens != x.shape[0]).any():
                raise node.unsupported("sequence_lens shorter than the sequence")
        if op == "LSTM" and opt(ins, 7) is not None:
            raise node.unsupported("peepholes (input P)")
        t_len, batch = x.shape[0], x.shape[1]
        dirs, gh = w.shape[0], w.shape[1]
        hs = gh // _GATES[op]
        h0 = dev(opt(ins, 5))
        c0 = dev(opt(ins, 6)) if op == "LSTM" else None
        if layout:
            h0 = h0.transpose(0, 1) if h0 is not None else None
            c0 = c0.transpose(0, 1) if c0 is not None else None
        ys, hn, cn = [], [], []
        for d in range(dirs):
            reverse = direction == "reverse" or d == 1
            bd = dev(b)[d] if b is not None else pr.zeros(2 * gh)
            wb, rb = bd[:gh], bd[gh:]
            gx = (x.reshape(t_len * batch, -1) @ w[d].t() + wb).reshape(t_len, batch, gh)
            h = h0[d] if h0 is not None else pr.zeros(batch, hs)
            c = c0[d] if c0 is not None else pr.zeros(batch, hs)
            outs = [None] * t_len
            for t in range(t_len - 1, -1, -1) if reverse else range(t_len):
                h, c = _cell(op, gx[t], h, c, r[d], rb, lbr)
                outs[t] = h
            ys.append(pr.stack(outs, 0) if t_len else pr.zeros(0, batch, hs))
            hn.append(h)
            cn.append(c)
        y = pr.stack(ys, 1)  # (T, dirs, B, H)
        yh = pr.stack(hn, 0)  # (dirs, B, H)
        yc = pr.stack(cn, 0) if op == "LSTM" else None
        if layout:
            y = y.permute(2, 0, 1, 3)  # (B, T, dirs, H)
            yh = yh.transpose(0, 1)
            yc = yc.transpose(0, 1) if yc is not None else None
        return [y, yh, yc]

    return run
