"""Recurrent layers: RNN (tanh/relu), LSTM (with proj_size), GRU and their cells.

PyTorch's constructor arguments, parameter names and shapes (weight_ih_l0, weight_hh_l0,
bias_ih_l0, bias_hh_l0, weight_hr_l0, ..._reverse), initialisation U(-1/√hidden, 1/√hidden),
gate order (LSTM i, f, g, o; GRU r, z, n) and forward signatures.

How it runs. Per layer and direction, the input projection of the whole sequence is one matmul
(x·W_ihᵀ + b_ih over all time steps at once, (T, N, G)); then a Python loop over the time steps
does the hidden matmul and the gate math with ordinary pyrite ops, so autograd differentiates
the recurrence by composition. For RNN and LSTM b_hh is folded into that projection (it is added
to every step anyway) and the hidden matmul of a step is one addmm; GRU keeps b_hh with the
hidden matmul because its reset gate multiplies (W_hn·h + b_hn). The projected sequence is
split into steps by one `unbind` (whose backward is one stack: slicing step by step would build
a full-size gradient per step).

A PackedSequence input runs the same recurrence on the packed rows (`_run_packed`): the
projection is one linear over all of them, split into steps of batch_sizes[t] rows; the forward
direction drops the rows of finished sequences from the running state (keeping them for h_n),
the reverse direction adds each sequence's initial state at its own last step.
"""

from __future__ import annotations

import math
import numbers

from ...errors import warn
from ...ops import combine as _combine
from ...ops import creation as _creation
from ...ops import matmul as _matmul
from ...ops import scatter as _scatter
from .. import functional as F
from .. import init
from ..module import Module, Parameter
from ._util import new_empty

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNBase", "RNNCell", "RNNCellBase"]


# ---- the per-step math (shared by the sequence modules and the cells) ----------------------
def _lstm_pointwise(gates, c):
    """(h, c) from the pre-activations (N, 4H) in torch's gate order i, f, g, o."""
    gi, gf, gg, go = gates.chunk(4, 1)
    c = gf.sigmoid() * c + gi.sigmoid() * gg.tanh()
    return go.sigmoid() * c.tanh(), c


def _gru_pointwise(gx, gh, h):
    """h' from x·W_ihᵀ + b_ih and h·W_hhᵀ + b_hh (both (N, 3H), gates r, z, n)."""
    xr, xz, xn = gx.chunk(3, 1)
    hr, hz, hn = gh.chunk(3, 1)
    r = (xr + hr).sigmoid()
    z = (xz + hz).sigmoid()
    n = (xn + r * hn).tanh()
    return n + z * (h - n)  # (1 - z)·n + z·h with one op fewer


def _activation(mode):
    return (lambda t: t.tanh()) if mode == "RNN_TANH" else (lambda t: t.relu())


# ---- sequence modules ----------------------------------------------------------------------
class RNNBase(Module):
    """Base class of RNN, LSTM and GRU (torch.nn.RNNBase): the parameters of every layer and
    direction, their initialisation, the argument checks and the repr.

    Args:
        mode (str): 'LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU'.
        input_size (int): features of the input x.
        hidden_size (int): features of the hidden state h.
        num_layers (int): stacked recurrent layers. Default: 1.
        bias (bool): use b_ih and b_hh. Default: True.
        batch_first (bool): input and output are (N, L, H) instead of (L, N, H). Default: False.
        dropout (float): dropout on the outputs of every layer but the last, in training.
            Default: 0.
        bidirectional (bool): a second pass over the reversed sequence. Default: False.
        proj_size (int): LSTM only: project h to this size (weight_hr). Default: 0.
    """

    __constants__ = [
        "mode",
        "input_size",
        "hidden_size",
        "num_layers",
        "bias",
        "batch_first",
        "dropout",
        "bidirectional",
        "proj_size",
    ]

    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                "an element being zeroed"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        if dropout > 0 and num_layers == 1:
            warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}"
            )
        for name, value, kind in (
            ("bias", bias, bool),
            ("batch_first", batch_first, bool),
            ("input_size", input_size, int),
            ("hidden_size", hidden_size, int),
        ):
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(
                    f"{name} should be of type {kind.__name__}, got: {type(value).__name__}"
                )
            if kind is int and value <= 0:
                raise ValueError(f"{name} must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        gates = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
        if mode not in gates:
            raise ValueError("Unrecognized RNN mode: " + mode)
        gate_size = gates[mode] * hidden_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size

        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * num_directions
            for direction in range(num_directions):
                shapes = [(gate_size, layer_input), (gate_size, real_hidden)]
                names = ["weight_ih_l{}{}", "weight_hh_l{}{}"]
                if bias:
                    shapes += [(gate_size,), (gate_size,)]
                    names += ["bias_ih_l{}{}", "bias_hh_l{}{}"]
                if proj_size > 0:
                    shapes.append((proj_size, hidden_size))
                    names.append("weight_hr_l{}{}")
                suffix = "_reverse" if direction == 1 else ""
                names = [n.format(layer, suffix) for n in names]
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(new_empty(*shape, dtype=dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def flatten_parameters(self):
        """A no-op (cuDNN's weight packing has no counterpart here)."""

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(state)
        if "proj_size" not in state:
            self.proj_size = 0

    # -- argument checks (torch's wording) --
    def check_input(self, input, batch_sizes=None):
        w = self._flat_weights[0]
        if input.dtype != w.dtype:
            raise ValueError(
                f"RNN input dtype ({input.dtype}) does not match weight dtype ({w.dtype}). "
                f"Convert input: input.to({w.dtype}), or convert model: model.to({input.dtype})"
            )
        expected = 2 if batch_sizes is not None else 3
        if input.dim() != expected:
            raise RuntimeError(f"input must have {expected} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(
                "input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {input.size(-1)}"
            )

    def get_expected_hidden_size(self, input, batch_sizes=None):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * num_directions, mini_batch, size)

    def check_hidden_size(self, hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.size()) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.size())))

    def check_forward_args(self, input, hidden, batch_sizes=None):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    def permute_hidden(self, hx, permutation):
        """hx with its batch rows (dim 1) in the order `permutation` (None: as it is); a
        PackedSequence's sorted_indices/unsorted_indices go through here."""
        if permutation is None:
            return hx
        if isinstance(hx, tuple):  # LSTM's (h, c)
            return tuple(_scatter.index_select(t, 1, permutation) for t in hx)
        return _scatter.index_select(hx, 1, permutation)

    # -- the shared forward: (T, N, F) input, per-layer states -> output, final states --
    def _prepare(self, input, hx, what):
        """Unbatched input to a batch of one; a zero state when hx is None (count tensors)."""
        if input.dim() not in (2, 3):
            raise ValueError(
                f"{what}: Expected input to be 2D or 3D, got {input.dim()}D tensor instead"
            )
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
        return input, batched, batch_dim

    def _zeros(self, input, size):
        n = input.size(0) if self.batch_first else input.size(1)
        d = 2 if self.bidirectional else 1
        return _creation.zeros(self.num_layers * d, n, size, dtype=input.dtype)

    def _run(self, input, h0, c0=None):
        """The recurrence over every layer and direction. input (N, T, F) if batch_first
        else (T, N, F); h0/c0 (L·D, N, H). Returns output, h_n (and c_n for LSTM)."""
        x = input.transpose(0, 1) if self.batch_first else input
        if x.size(0) == 0:  # (torch's words; there would be no step to stack)
            raise RuntimeError("pyrite: Expected sequence length to be larger than 0 in RNN")
        lstm, gru = self.mode == "LSTM", self.mode == "GRU"
        act = None if lstm or gru else _activation(self.mode)
        num_directions = 2 if self.bidirectional else 1
        h0s = h0.unbind(0)
        c0s = c0.unbind(0) if lstm else None
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                k = layer * num_directions + direction
                names = self._all_weights[k]
                w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
                b_ih = getattr(self, names[2]) if self.bias else None
                b_hh = getattr(self, names[3]) if self.bias else None
                w_hr = getattr(self, names[-1]) if self.proj_size > 0 else None
                if gru:
                    xs = F.linear(x, w_ih, b_ih).unbind(0)
                else:  # b_hh joins the one projection of the whole sequence
                    b = None if b_ih is None else b_ih + b_hh
                    xs = F.linear(x, w_ih, b).unbind(0)
                    w_hh_t = w_hh.t()
                h = h0s[k]
                c = c0s[k] if lstm else None
                steps = range(len(xs) - 1, -1, -1) if direction == 1 else range(len(xs))
                ys = [None] * len(xs)
                for t in steps:
                    if lstm:
                        h, c = _lstm_pointwise(_matmul.addmm(xs[t], h, w_hh_t), c)
                        if w_hr is not None:
                            h = F.linear(h, w_hr)
                    elif gru:
                        h = _gru_pointwise(xs[t], F.linear(h, w_hh, b_hh), h)
                    else:
                        h = act(_matmul.addmm(xs[t], h, w_hh_t))
                    ys[t] = h
                outs.append(_combine.stack(ys, 0))
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if num_directions == 1 else _combine.cat(outs, 2)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        output = x.transpose(0, 1) if self.batch_first else x
        if lstm:
            return output, _combine.stack(h_n, 0), _combine.stack(c_n, 0)
        return output, _combine.stack(h_n, 0)

    def _run_packed(self, data, bs, h0, c0=None):
        """The recurrence over a packed batch: data (sum(bs), F), bs the batch sizes (host
        ints, decreasing); h0/c0 (L·D, bs[0], H) in the sorted order. At step t only the
        first bs[t] rows advance; a sequence's state leaves the running block at its last
        step (forward) and joins it at its own last step (reverse), so h_n holds every
        sequence's state at its own end. Returns packed output, h_n (and c_n for LSTM)."""
        lstm, gru = self.mode == "LSTM", self.mode == "GRU"
        act = None if lstm or gru else _activation(self.mode)
        num_directions = 2 if self.bidirectional else 1
        steps = len(bs)
        h0s = h0.unbind(0)
        c0s = c0.unbind(0) if lstm else None
        h_n, c_n = [], []
        x = data
        for layer in range(self.num_layers):
            outs = []
            for direction in range(num_directions):
                k = layer * num_directions + direction
                names = self._all_weights[k]
                w_ih, w_hh = getattr(self, names[0]), getattr(self, names[1])
                b_ih = getattr(self, names[2]) if self.bias else None
                b_hh = getattr(self, names[3]) if self.bias else None
                w_hr = getattr(self, names[-1]) if self.proj_size > 0 else None
                if gru:
                    xs = F.linear(x, w_ih, b_ih).split(bs, 0)
                else:  # b_hh joins the one projection of the whole sequence
                    b = None if b_ih is None else b_ih + b_hh
                    xs = F.linear(x, w_ih, b).split(bs, 0)
                    w_hh_t = w_hh.t()

                def step(xt, h, c):
                    if lstm:
                        h, c = _lstm_pointwise(_matmul.addmm(xt, h, w_hh_t), c)
                        if w_hr is not None:
                            h = F.linear(h, w_hr)
                        return h, c
                    if gru:
                        return _gru_pointwise(xt, F.linear(h, w_hh, b_hh), h), None
                    return act(_matmul.addmm(xt, h, w_hh_t)), None

                h_full = h0s[k]
                c_full = c0s[k] if lstm else None
                ys = [None] * steps
                if direction == 0:
                    h, c, last = h_full, c_full, bs[0]
                    done_h, done_c = [], []
                    for t in range(steps):
                        n = bs[t]
                        if n < last:  # rows n..last ended at step t - 1
                            done_h.append(h.narrow(0, n, last - n))
                            h = h.narrow(0, 0, n)
                            if lstm:
                                done_c.append(c.narrow(0, n, last - n))
                                c = c.narrow(0, 0, n)
                            last = n
                        h, c = step(xs[t], h, c)
                        ys[t] = h
                    done_h.append(h)
                    done_c.append(c)
                    h = done_h[0] if len(done_h) == 1 else _combine.cat(done_h[::-1], 0)
                    if lstm:
                        c = done_c[0] if len(done_c) == 1 else _combine.cat(done_c[::-1], 0)
                else:
                    last = bs[-1]
                    h = h_full.narrow(0, 0, last)
                    c = c_full.narrow(0, 0, last) if lstm else None
                    for t in range(steps - 1, -1, -1):
                        n = bs[t]
                        if n > last:  # rows last..n start here, at their own last step
                            h = _combine.cat([h, h_full.narrow(0, last, n - last)], 0)
                            if lstm:
                                c = _combine.cat([c, c_full.narrow(0, last, n - last)], 0)
                            last = n
                        h, c = step(xs[t], h, c)
                        ys[t] = h
                outs.append(_combine.cat(ys, 0))
                h_n.append(h)
                c_n.append(c)
            x = outs[0] if num_directions == 1 else _combine.cat(outs, 1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        if lstm:
            return x, _combine.stack(h_n, 0), _combine.stack(c_n, 0)
        return x, _combine.stack(h_n, 0)


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t·W_ihᵀ + b_ih + h_{t-1}·W_hhᵀ + b_hh) (or relu).

    Args:
        input_size, hidden_size, num_layers, nonlinearity ('tanh' or 'relu'), bias,
        batch_first, dropout, bidirectional: as torch.nn.RNN.

    Inputs: input (L, N, H_in) (or (N, L, H_in) with batch_first, or unbatched (L, H_in)),
    h_0 (D·num_layers, N, H_out) (or (D·num_layers, H_out)), zeros when omitted.
    Outputs: output (L, N, D·H_out), h_n (D·num_layers, N, H_out).
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(
                f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        if isinstance(input, _packed_type()):
            return _forward_packed(self, input, hx)
        input, batched, batch_dim = self._prepare(input, hx, "RNN")
        if hx is not None:
            if not batched and hx.dim() != 2:
                raise RuntimeError(
                    f"For unbatched 2-D input, hx should also be 2-D but got {hx.dim()}-D tensor"
                )
            if batched and hx.dim() != 3:
                raise RuntimeError(
                    f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D tensor"
                )
            if not batched:
                hx = hx.unsqueeze(1)
        else:
            hx = self._zeros(input, self.hidden_size)
        self.check_forward_args(input, hx)
        output, h_n = self._run(input, hx)
        if not batched:
            output, h_n = output.squeeze(batch_dim), h_n.squeeze(1)
        return output, h_n


class LSTM(RNNBase):
    """Long short-term memory: gates i, f, g, o (torch's order) from x_t·W_ihᵀ + b_ih +
    h_{t-1}·W_hhᵀ + b_hh; c_t = f⊙c_{t-1} + i⊙g, h_t = o⊙tanh(c_t) (then ·W_hrᵀ with proj_size).

    Inputs: input, (h_0, c_0) optional. Outputs: output, (h_n, c_n); h has proj_size features
    when proj_size > 0, c always hidden_size.
    """

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def get_expected_cell_size(self, input, batch_sizes=None):
        if batch_sizes is not None:
            mini_batch = int(batch_sizes[0])
        else:
            mini_batch = input.size(0) if self.batch_first else input.size(1)
        num_directions = 2 if self.bidirectional else 1
        return (self.num_layers * num_directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input, hidden, batch_sizes=None):
        self.check_input(input, batch_sizes)
        self.check_hidden_size(
            hidden[0],
            self.get_expected_hidden_size(input, batch_sizes),
            "Expected hidden[0] size {}, got {}",
        )
        self.check_hidden_size(
            hidden[1],
            self.get_expected_cell_size(input, batch_sizes),
            "Expected hidden[1] size {}, got {}",
        )

    def forward(self, input, hx=None):
        if isinstance(input, _packed_type()):
            return _forward_packed(self, input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(f"LSTM: Expected input to be 2D or 3D, got {input.dim()}D instead")
        input, batched, batch_dim = self._prepare(input, hx, "LSTM")
        if hx is None:
            real = self.proj_size if self.proj_size > 0 else self.hidden_size
            hx = (self._zeros(input, real), self._zeros(input, self.hidden_size))
        else:
            h0, c0 = hx
            if batched and (h0.dim() != 3 or c0.dim() != 3):
                raise RuntimeError(
                    "For batched 3-D input, hx and cx should also be 3-D but got "
                    f"({h0.dim()}-D, {c0.dim()}-D) tensors"
                )
            if not batched:
                if h0.dim() != 2 or c0.dim() != 2:
                    raise RuntimeError(
                        "For unbatched 2-D input, hx and cx should also be 2-D but got "
                        f"({h0.dim()}-D, {c0.dim()}-D) tensors"
                    )
                hx = (h0.unsqueeze(1), c0.unsqueeze(1))
        self.check_forward_args(input, hx)
        output, h_n, c_n = self._run(input, hx[0], hx[1])
        if not batched:
            output, h_n, c_n = output.squeeze(batch_dim), h_n.squeeze(1), c_n.squeeze(1)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit: r = σ(W_ir x + b_ir + W_hr h + b_hr), z likewise,
    n = tanh(W_in x + b_in + r⊙(W_hn h + b_hn)), h' = (1 - z)⊙n + z⊙h.

    Inputs: input, h_0 optional. Outputs: output, h_n (shapes as RNN).
    """

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    forward = RNN.forward

    def _prepare(self, input, hx, what):
        return super()._prepare(input, hx, "GRU")


# ---- cells ---------------------------------------------------------------------------------
class RNNCellBase(Module):
    """Base of the cells: weight_ih (chunks·H, in), weight_hh (chunks·H, H), bias_ih, bias_hh
    (chunks·H), all U(-1/√H, 1/√H)."""

    __constants__ = ["input_size", "hidden_size", "bias"]

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(new_empty(num_chunks * hidden_size, input_size, dtype=dtype))
        self.weight_hh = Parameter(new_empty(num_chunks * hidden_size, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(new_empty(num_chunks * hidden_size, dtype=dtype))
            self.bias_hh = Parameter(new_empty(num_chunks * hidden_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _cell_input(self, input, states, what):
        """Checks the ranks and sizes (torch's words); a batch of one for 1-D inputs; zero
        states when none are given. Returns (input, states, batched)."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{what}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.size(1) != self.input_size:
            raise RuntimeError(
                f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}"
            )
        n = input.size(0)
        out = []
        for k, s in enumerate(states):
            if s is None:
                s = _creation.zeros(n, self.hidden_size, dtype=input.dtype)
            else:
                if not batched:
                    s = s.unsqueeze(0)
                # (torch numbers the state even where there is one: "hidden0")
                if s.size(0) != n:
                    raise RuntimeError(
                        f"Input batch size {n} doesn't match hidden{k} batch size {s.size(0)}"
                    )
                if s.size(1) != self.hidden_size:
                    raise RuntimeError(
                        f"hidden{k} has inconsistent hidden_size: got {s.size(1)}, expected "
                        f"{self.hidden_size}"
                    )
            out.append(s)
        return input, out, batched

    def _check_hidden_rank(self, hx, what, label="hidden"):
        if hx is not None and hx.dim() not in (1, 2):
            raise ValueError(f"{what}: Expected {label} to be 1D or 2D, got {hx.dim()}D instead")


class RNNCell(RNNCellBase):
    """h' = tanh(x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh) (or relu). Input (N, in) or (in);
    hx (N, H) or (H), zeros when omitted. Returns h' (N, H) or (H)."""

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]

    def __init__(
        self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None
    ):
        super().__init__(input_size, hidden_size, bias, num_chunks=1, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        self._check_hidden_rank(hx, "RNNCell")
        input, (h,), batched = self._cell_input(input, (hx,), "RNNCell")
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        act = _activation("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU")
        ret = act(
            F.linear(input, self.weight_ih, self.bias_ih)
            + F.linear(h, self.weight_hh, self.bias_hh)
        )
        return ret if batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o). Input (N, in) or (in); hx = (h, c), zeros when
    omitted. Returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=4, dtype=dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"LSTMCell: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if hx is not None:
            for idx, value in enumerate(hx):
                if value.dim() not in (1, 2):
                    raise ValueError(
                        f"LSTMCell: Expected hx[{idx}] to be 1D or 2D, got {value.dim()}D instead"
                    )
        states = (None, None) if hx is None else tuple(hx)
        input, (h, c), batched = self._cell_input(input, states, "LSTMCell")
        gates = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(
            h, self.weight_hh, self.bias_hh
        )
        h, c = _lstm_pointwise(gates, c)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n; r multiplies W_hn·h + b_hn). Input (N, in) or (in);
    hx (N, H) or (H), zeros when omitted. Returns h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, num_chunks=3, dtype=dtype)

    def forward(self, input, hx=None):
        self._check_hidden_rank(hx, "GRUCell")
        input, (h,), batched = self._cell_input(input, (hx,), "GRUCell")
        ret = _gru_pointwise(
            F.linear(input, self.weight_ih, self.bias_ih),
            F.linear(h, self.weight_hh, self.bias_hh),
            h,
        )
        return ret if batched else ret.squeeze(0)


# ---- packed sequences ----------------------------------------------------------------------
def _packed_type():
    from ..utils.rnn import PackedSequence

    return PackedSequence


def _forward_packed(module, packed, hx):
    """torch's packed path: hx is given in the caller's batch order (permuted to the sorted
    order here, and h_n back by unsorted_indices); the output is a PackedSequence of the same
    batch_sizes and indices."""
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    bs = [int(b) for b in batch_sizes.tolist()]
    lstm = module.mode == "LSTM"
    if hx is None:
        real = module.proj_size if module.proj_size > 0 else module.hidden_size
        d = 2 if module.bidirectional else 1
        shape = (module.num_layers * d, bs[0])

        def zeros(size):
            return _creation.zeros(*shape, size, dtype=data.dtype)

        hx = (zeros(real), zeros(module.hidden_size)) if lstm else zeros(real)
    else:
        if lstm:
            hx = tuple(hx)
        hx = module.permute_hidden(hx, sorted_indices)
    module.check_forward_args(data, hx, batch_sizes)
    if lstm:
        output, h_n, c_n = module._run_packed(data, bs, hx[0], hx[1])
        hidden = (h_n, c_n)
    else:
        output, hidden = module._run_packed(data, bs, hx)
    out = _packed_type()(output, batch_sizes, sorted_indices, unsorted_indices)
    return out, module.permute_hidden(hidden, unsorted_indices)
