"""torch's top-level aten spellings of nn ops that exported graphs and older scripts call, each a
composition of pyrite's functional ops returning what torch returns:

- `native_layer_norm` / `native_batch_norm` / `native_group_norm`: (output, mean, rstd) — the
  statistics as torch's kernels save them (rstd = 1/√(biased var + eps));
- `native_dropout`: (output, keep mask); `native_norm`, `norm_except_dim` (weight norm's);
- `rnn_tanh_cell` / `rnn_relu_cell` / `gru_cell` / `lstm_cell`: one step of the recurrent cells
  from explicit weights (nn.RNNCell's math, modules/rnn.py);
- `embedding_renorm_` and torch's `embedding_bag(weight, indices, offsets, ...)`, with its four
  outputs;
- `F.grouped_mm`: the mixture-of-experts grouped matmul (torch 2.13's semantics, any dtype).

`pyrite/nn/_toplevel.py` exports TOPLEVEL as `pyrite.<name>`.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..ops import creation as _creation
from . import _norm, _sparse


# ---- normalization with its saved statistics ---------------------------------------------------
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    """(layer_norm(input), mean, rstd), the statistics over the last len(normalized_shape) dims
    kept as size-1 dims: (*lead, 1, ..., 1)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if tuple(input.shape[input.ndim - k :]) != shape or k > input.ndim:
        raise ShapeError(
            f"pyrite: native_layer_norm: Given normalized_shape={list(shape)}, expected input "
            f"with shape [*, {', '.join(str(d) for d in shape)}], but got input of size "
            f"{list(input.shape)}"
        )
    out = _norm.layer_norm(input, shape, weight, bias, eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    var, mean = _stats(input, dims)
    return out, mean, (var + eps).rsqrt()


def _stats(x, dims):
    """(biased var, mean) over dims, keepdim, in x's float dtype."""
    from ..ops.reduce import var_mean

    if not dims:  # (normalized_shape=[]: each element its own group)
        return x * 0, x
    return var_mean(x, dims, correction=0, keepdim=True)


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(batch_norm(input), save_mean (C,), save_invstd (C,)); training updates the running
    statistics in place as F.batch_norm does. In evaluation the saved statistics are empty
    (0,) tensors, as torch's CPU kernel returns."""
    if input.ndim < 2:
        raise ShapeError(
            f"pyrite: native_batch_norm: expected an input of at least 2 dims (N, C, *), got "
            f"{list(input.shape)}"
        )
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(
            "pyrite: native_batch_norm: running_mean and running_var must be defined in "
            "evaluation mode"
        )
    out = _norm.batch_norm(
        input, running_mean, running_var, weight, bias, bool(training), momentum, eps
    )
    if not training:
        empty = _creation.empty(0, dtype=input.dtype)
        return out, empty, empty.clone()
    dims = (0, *range(2, input.ndim))
    var, mean = _stats(input, dims)
    return out, mean.reshape(-1), (var + eps).rsqrt().reshape(-1)


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    """(group_norm(input), mean (N, group), rstd (N, group)) for an input of N·C·HxW
    elements."""
    if input.numel() != N * C * HxW:
        raise RuntimeError(
            f"pyrite: native_group_norm: Expected X.numel() == N * C * HxW ({input.numel()} vs "
            f"{N} * {C} * {HxW})"
        )
    if C % group:
        raise RuntimeError(
            f"pyrite: Expected number of channels in input to be divisible by num_groups, but "
            f"got input of shape {list(input.shape)} and num_groups={group}"
        )
    out = _norm.group_norm(input, group, weight, bias, eps)
    var, mean = _stats(input.reshape(N, group, -1), (2,))
    return out, mean.reshape(N, group), (var + eps).rsqrt().reshape(N, group)


def native_dropout(input, p, train):
    """(output, mask): in training (train True or None) each element kept with probability
    1 - p and scaled by 1/(1 - p), mask the bool keep mask; otherwise (a copy of input, all
    True)."""
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"pyrite: dropout probability has to be between 0 and 1, but got {p}")
    if train is False:
        return input.clone(), _creation.ones(input.shape, dtype=D.bool_)
    from ..ops.random import rand_like

    keep = rand_like(input, dtype=input.dtype if input.is_floating_point() else D.float32) < (
        1.0 - p
    )
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return input * keep.to(input.dtype) * scale, keep


def native_norm(input, p=2, dim=None, keepdim=False, dtype=None):
    """The p-norm of all of input (or over `dim`): linalg.vector_norm (torch's native_norm,
    its sparse-tensor norm)."""
    from ..ops.linalg_norms import vector_norm

    return vector_norm(input, 2 if p is None else p, dim, keepdim, dtype=dtype)


def norm_except_dim(v, pow=2, dim=0):
    """weight_norm's norm: over every dim but `dim`, keeping all dims (size 1 but `dim`);
    dim=-1: the norm of all of v, 0-d."""
    from ..ops.linalg_norms import vector_norm

    if dim == -1:
        return vector_norm(v, pow)
    d = v._dim(dim)
    others = tuple(i for i in range(v.ndim) if i != d)
    return vector_norm(v, pow, others, keepdim=True) if others else vector_norm(v, pow, (), True)


# ---- recurrent cells ---------------------------------------------------------------------------
def _check_cell(name, input, hx, w_ih, w_hh, chunks):
    H = hx.size(1)
    if input.size(1) != w_ih.size(1):
        raise RuntimeError(
            f"pyrite: input has inconsistent input_size: got {input.size(1)} expected "
            f"{w_ih.size(1)}"
        )
    if input.size(0) != hx.size(0):
        raise RuntimeError(
            f"pyrite: Input batch size {input.size(0)} doesn't match hidden0 batch size "
            f"{hx.size(0)}"
        )
    for wname, w in (("weight_ih", w_ih), ("weight_hh", w_hh)):
        if w.size(0) != chunks * H:
            raise RuntimeError(
                f"pyrite: {wname} first dim must be {chunks} * hidden_size = {chunks * H}, but "
                f"got {w.size(0)}"
            )


def _gates(input, hx, w_ih, w_hh, b_ih, b_hh):
    from . import functional as F

    return F.linear(input, w_ih, b_ih), F.linear(hx, w_hh, b_hh)


def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """tanh(input·w_ihᵀ + b_ih + hx·w_hhᵀ + b_hh): one nn.RNNCell step, (N, H)."""
    _check_cell("rnn_tanh_cell", input, hx, w_ih, w_hh, 1)
    gx, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gx + gh).tanh()


def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """relu(input·w_ihᵀ + b_ih + hx·w_hhᵀ + b_hh), (N, H)."""
    _check_cell("rnn_relu_cell", input, hx, w_ih, w_hh, 1)
    gx, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return (gx + gh).relu()


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One nn.GRUCell step (gates r, z, n), (N, H)."""
    from .modules.rnn import _gru_pointwise

    _check_cell("gru_cell", input, hx, w_ih, w_hh, 3)
    gx, gh = _gates(input, hx, w_ih, w_hh, b_ih, b_hh)
    return _gru_pointwise(gx, gh, hx)


def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One nn.LSTMCell step from hx = (h, c) (gates i, f, g, o): (h', c'), each (N, H)."""
    from .modules.rnn import _lstm_pointwise

    if len(hx) != 2:
        raise RuntimeError("pyrite: lstm_cell expects two hidden states")
    h, c = hx
    _check_cell("lstm_cell", input, h, w_ih, w_hh, 4)
    gx, gh = _gates(input, h, w_ih, w_hh, b_ih, b_hh)
    return _lstm_pointwise(gx + gh, c)


# ---- embeddings ----------------------------------------------------------------------------------
def embedding_renorm_(input, indices, max_norm, norm_type):
    """Scales the rows input[indices] in place to a norm_type-norm of at most max_norm (by
    max_norm / (norm + 1e-7), as torch's), unrecorded; returns input."""
    from ..autograd import no_grad

    if input.ndim != 2:
        raise ShapeError(f"pyrite: embedding_renorm_: weight must be 2-D, got {input.ndim}-D")
    with no_grad():
        _sparse._renorm_rows(input, indices.reshape(-1), max_norm, norm_type)
    return input


def embedding_bag(
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=None,
):
    """torch.embedding_bag: (output, offset2bag, bag_size, max_indices) with mode 0 sum,
    1 mean, 2 max, indices 1-D and offsets the bags' starts. The output is F.embedding_bag's;
    the other three as torch's CPU kernel gives them: offset2bag each index's bag (empty for
    sum without padding_idx), bag_size each bag's count of non-padding indices (zeros for sum), max_indices the
    row that gave each maximum (mode 2; bag_size for mean, zeros for sum)."""
    from . import functional as F

    if mode not in (0, 1, 2):
        raise ValueError(
            f"pyrite: embedding_bag: mode has to be 0 (sum), 1 (mean) or 2 (max), got {mode}"
        )
    if indices.ndim != 1 or offsets is None or offsets.ndim != 1:
        raise ValueError(
            "pyrite: embedding_bag: expected 1-D indices and 1-D offsets (F.embedding_bag "
            "takes 2-D input)"
        )
    # (aten's convention: None or a negative padding_idx is none; F.embedding_bag wraps -1 first)
    pad = None if padding_idx is None or padding_idx < 0 else int(padding_idx)
    out = F.embedding_bag(
        indices,
        weight,
        offsets,
        scale_grad_by_freq=scale_grad_by_freq,
        mode=("sum", "mean", "max")[mode],
        per_sample_weights=per_sample_weights,
        include_last_offset=include_last_offset,
        padding_idx=pad,
    )
    B = out.shape[0]
    idx = indices.numpy().astype(np.int64)
    off = offsets.numpy().astype(np.int64)
    n = idx.size
    starts = off[:B]
    ends = np.append(off[1:], n)[:B] if not include_last_offset else off[1 : B + 1]

    def upload(host, _dtype):  # (int64 as torch returns them)
        return _creation.tensor(host, dtype=D.int64)

    int64 = D.int64
    bag_of = np.zeros(n, np.int64)
    for b in range(B):
        bag_of[starts[b] : ends[b]] = b
    if mode == 0:  # (torch's CPU sum fills offset2bag only on its padding path)
        zeros = np.zeros(B, np.int64)
        o2b = bag_of if pad is not None else np.zeros(0, np.int64)
        return out, upload(o2b, int64), upload(zeros, int64), upload(zeros, int64)
    wpad = pad
    counts = np.array(
        [
            int(np.sum(idx[s:e] != wpad)) if wpad is not None else int(e - s)
            for s, e in zip(starts, ends)
        ],
        np.int64,
    )
    if mode == 1:
        return out, upload(bag_of, int64), upload(counts, int64), upload(counts, int64)
    w = weight.detach().numpy()
    best = np.zeros((B, w.shape[1]), np.int64)
    for b in range(B):
        rows = [i for i in idx[starts[b] : ends[b]] if i != wpad]
        if rows:
            r = np.asarray(rows)
            best[b] = r[np.argmax(w[r], axis=0)]
    return out, upload(bag_of, int64), upload(counts, int64), upload(best, int64)


# ---- grouped matmul ------------------------------------------------------------------------------
def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """F.grouped_mm (mixture-of-experts GEMM), torch 2.13's cases:

    - a (M, K), b (G, K, N), offs (G,): rows [offs[g-1], offs[g]) of a times b[g] → (M, N)
      (rows after offs[-1]: zeros, where torch leaves them unwritten);
    - a (G, M, K), b (G, K, N), no offs: the batched product (G, M, N);
    - a (M, K), b (K, N), offs (G,): K split by offs, a[:, Kg] @ b[Kg] for each group →
      (G, M, N) (an empty group gives zeros);
    - a (G, M, K), b (K, N), offs (G,): N split by offs, a[g] @ b[:, Ng] → (M, N).

    offs are cumulative ends (int32), read back once. bias is added to each group's product.
    Any float dtype; differentiable (torch's CPU backward is not)."""
    from ..ops.combine import cat

    if mat_a.ndim not in (2, 3) or mat_b.ndim not in (2, 3):
        raise ShapeError(
            f"pyrite: grouped_mm: expected 2-D or 3-D operands, got {list(mat_a.shape)} and "
            f"{list(mat_b.shape)}"
        )
    if mat_a.dtype != mat_b.dtype:
        raise TypeError(
            f"pyrite: grouped_mm: expected mat_a and mat_b of one dtype, got {mat_a.dtype!r} "
            f"and {mat_b.dtype!r}"
        )
    three = (mat_a.ndim == 3, mat_b.ndim == 3)
    if three == (True, True):
        if offs is not None:
            raise ValueError("pyrite: grouped_mm: offs must be None when both operands are 3-D")
        out = mat_a @ mat_b
    else:
        if offs is None:
            raise ValueError("pyrite: grouped_mm: offs is required when an operand is 2-D")
        if offs.ndim != 1 or offs.dtype.kind != "i":
            raise TypeError("pyrite: grouped_mm: offs must be a 1-D integer tensor")
        ends = [int(e) for e in offs.tolist()]
        if any(b < a for a, b in zip([0] + ends, ends)):
            raise ValueError(f"pyrite: grouped_mm: offs must be non-decreasing, got {ends}")
        bounds = list(zip([0] + ends[:-1], ends))
        G = len(ends)
        if three == (False, True):  # (M, K) x (G, K, N)
            if mat_b.shape[0] != G or ends[-1] > mat_a.shape[0]:
                raise ShapeError(
                    f"pyrite: grouped_mm: offs {ends} do not fit a {list(mat_a.shape)} x "
                    f"{list(mat_b.shape)} product"
                )
            parts = [mat_a[s:e] @ mat_b[g] for g, (s, e) in enumerate(bounds)]
            rest = mat_a.shape[0] - ends[-1]
            if rest:
                parts.append(_creation.zeros(rest, mat_b.shape[-1], dtype=mat_a.dtype))
            out = cat(parts, 0)
        elif three == (False, False):  # (M, K) x (K, N), K split
            if ends[-1] > mat_a.shape[1] or mat_a.shape[1] != mat_b.shape[0]:
                raise ShapeError(
                    f"pyrite: grouped_mm: offs {ends} do not fit a {list(mat_a.shape)} x "
                    f"{list(mat_b.shape)} product"
                )
            out = cat([(mat_a[:, s:e] @ mat_b[s:e]).unsqueeze(0) for s, e in bounds], 0)
        else:  # (G, M, K) x (K, N), N split
            if mat_a.shape[0] != G or ends[-1] > mat_b.shape[1]:
                raise ShapeError(
                    f"pyrite: grouped_mm: offs {ends} do not fit a {list(mat_a.shape)} x "
                    f"{list(mat_b.shape)} product"
                )
            parts = [mat_a[g] @ mat_b[:, s:e] for g, (s, e) in enumerate(bounds)]
            rest = mat_b.shape[1] - ends[-1]
            if rest:
                parts.append(_creation.zeros(mat_a.shape[1], rest, dtype=mat_a.dtype))
            out = cat(parts, 1)
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.to(out_dtype)


TOPLEVEL = {
    fn.__name__: fn
    for fn in (
        native_layer_norm,
        native_batch_norm,
        native_group_norm,
        native_dropout,
        native_norm,
        norm_except_dim,
        rnn_tanh_cell,
        rnn_relu_cell,
        gru_cell,
        lstm_cell,
        embedding_renorm_,
        embedding_bag,
    )
}
__all__ = ["TOPLEVEL", "grouped_mm"]
