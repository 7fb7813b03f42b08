"""Fused fast paths with the APIs PyTorch users already call for them (kernels/fastpaths.py):

  apply_rotary_emb, apply_rotary   flash-attn's rotary embedding (flash_attn.layers.rotary and
                                   flash_attn.ops.triton.rotary): one dispatch forward, one
                                   backward (the conjugate rotation of the gradient)
  apply_rotary_emb_3d              the 3-D rotary embedding of video transformers (Wan's
                                   rope_apply): the same kernel, a token's (frame, row, column)
                                   choosing the cos/sin row of each section of pairs
  causal_conv1d (causal_conv1d_fn) the causal-conv1d package's depthwise causal conv1d with an
                                   optional SiLU: one dispatch forward; backward one for dx
                                   and one (plus a sum past one chunk) for weight and bias

Composed from ops these cost several dispatches and intermediate tensors a layer (rotate_half's
two slices, a negation, a cat, two products and a sum; a grouped conv1d, a slice and a silu).
Both read their inputs through their strides (q or k sliced from a fused qkv, a channels-last x)
and compute in f32 over f32 or f16 storage.
"""

from __future__ import annotations

from .. import autograd as _autograd
from .. import backend
from .. import dtypes as D
from ..errors import ShapeError
from ..kernels.common import fold_grid, grid_for
from ..kernels.fastpaths import (
    CONV_WG,
    MAX_SHARED_FLOATS,
    conv_dw_kernel,
    conv_dx_kernel,
    conv_kernel,
    conv_loop_iterations,
    rotary_kernel,
)
from ..ops.core import empty, f32_bits, max_loop_iterations
from ..tensor import Tensor


# ---- rotary embedding ---------------------------------------------------------------------
def _float_tensor(name, what, t):
    if not isinstance(t, Tensor):
        raise TypeError(
            f"pyrite: {name}(): argument '{what}' must be Tensor, not {type(t).__name__}"
        )
    if not t.dtype.is_floating_point or t.dtype is D.bfloat16:
        raise TypeError(
            f"pyrite: {name}(): {what} must be a float32 or float16 tensor, not {t.dtype!r}"
        )
    return t


def _rotary_args(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, name, grid=None):
    """Validate as flash-attn's apply_rotary; returns (batch, seqlen, nheads, headdim, half,
    offsets tensor or None, int offset, cu tensor or None)."""
    _float_tensor(name, "x", x)
    _float_tensor(name, "cos", cos)
    _float_tensor(name, "sin", sin)
    if cu_seqlens is None:
        if x.ndim != 4:
            raise ShapeError(
                f"pyrite: {name}(): x must be (batch, seqlen, nheads, headdim), got shape "
                f"{tuple(x._shape)}"
            )
        batch, seqlen, nheads, headdim = x._shape
    else:
        if not isinstance(cu_seqlens, Tensor) or cu_seqlens.dtype.kind != "i":
            raise TypeError(f"pyrite: {name}(): cu_seqlens must be an int32 tensor (batch + 1,)")
        if x.ndim != 3:
            raise ShapeError(
                f"pyrite: {name}(): with cu_seqlens, x must be (total_seqlen, nheads, headdim), "
                f"got shape {tuple(x._shape)}"
            )
        if max_seqlen is None:
            raise ValueError(f"pyrite: {name}(): max_seqlen must be given with cu_seqlens")
        if cu_seqlens.ndim != 1 or cu_seqlens._shape[0] < 1:
            raise ShapeError(
                f"pyrite: {name}(): cu_seqlens must be 1-D (batch + 1,), got shape "
                f"{tuple(cu_seqlens._shape)}"
            )
        total, nheads, headdim = x._shape
        batch, seqlen = cu_seqlens._shape[0] - 1, int(max_seqlen)
    if cos.ndim != 2 or tuple(sin._shape) != tuple(cos._shape):
        raise ShapeError(
            f"pyrite: {name}(): cos and sin must both be (seqlen_ro, rotary_dim / 2), got "
            f"shapes {tuple(cos._shape)} and {tuple(sin._shape)}"
        )
    seqlen_ro, half = cos._shape
    if 2 * half > headdim:
        raise ShapeError(
            f"pyrite: {name}(): rotary_dim must be <= headdim: cos and sin of shape "
            f"{tuple(cos._shape)} give rotary_dim {2 * half} (twice their last dim) for x of "
            f"headdim {headdim}; flash-attn's cos/sin hold rotary_dim / 2 columns, not the "
            "repeated rotary_dim of rotate_half code (pass cos[..., : rotary_dim // 2])"
        )
    offs, off = None, 0
    if isinstance(seqlen_offsets, Tensor):
        if seqlen_offsets.dtype.kind != "i":
            raise TypeError(
                f"pyrite: {name}(): seqlen_offsets must be an int or an int32/int64 tensor, not "
                f"{seqlen_offsets.dtype!r}"
            )
        if tuple(seqlen_offsets._shape) != (batch,):
            raise ShapeError(
                f"pyrite: {name}(): seqlen_offsets must have shape (batch,) = ({batch},), got "
                f"{tuple(seqlen_offsets._shape)}"
            )
        offs = seqlen_offsets
        if seqlen_ro < seqlen:
            raise ShapeError(
                f"pyrite: {name}(): seqlen_ro must be >= seqlen: cos has {seqlen_ro} rows for "
                f"{seqlen} positions"
            )
    elif grid is None:
        off = int(seqlen_offsets)
        if off + seqlen > seqlen_ro:
            raise ShapeError(
                f"pyrite: {name}(): seqlen_offsets + seqlen must be <= seqlen_ro: {off} + "
                f"{seqlen} > {seqlen_ro} rows of cos and sin"
            )
    return batch, seqlen, nheads, headdim, half, offs, off, cu_seqlens


def _rotary_raw(
    x, cos, sin, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None, interleaved=False,
    conjugate=False, inplace=False, grid=None,
):  # fmt: skip
    """One dispatch of kernels/fastpaths.rotary_kernel; `inplace` writes x (no autograd).
    `grid`: (T, H, W, s1, s1 + s2, offset t, h, w) of the 3-D form (apply_rotary_emb_3d)."""
    name = "apply_rotary_emb_3d" if grid is not None else "apply_rotary"
    batch, seqlen, nheads, headdim, half, offs, off, cu = _rotary_args(
        x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, name, grid
    )
    out = x if inplace else empty(x._shape, x.dtype)
    U = half if inplace else headdim - half
    n = batch * seqlen * nheads * U
    if n == 0:
        return out
    if cu is None:
        xs, os_ = x._strides, out._strides
    else:  # (total, nheads, headdim): no batch stride, rows by cu_seqlens
        xs, os_ = (0, *x._strides), (0, *out._strides)
    info = [n, U, nheads, seqlen, half, cos._shape[0]]
    info += [x._offset, *xs, out._offset, *os_]
    info += [cos._offset, *cos._strides, sin._offset, *sin._strides]
    info += [offs._offset, offs._strides[0]] if offs is not None else [off, 0]
    info += [f32_bits(-1.0 if conjugate else 1.0)]
    info += [cu._offset, cu._strides[0]] if cu is not None else [0, 0]
    if grid is not None:
        info += list(grid)
    src = rotary_kernel(
        x.dtype.wgsl,
        cos.dtype.wgsl,
        sin.dtype.wgsl,
        out.dtype.wgsl,
        bool(interleaved),
        bool(inplace),
        offs is not None,
        cu is not None,
        grid is not None,
    )
    bufs = [] if inplace else [x._storage.buffer]
    bufs += [cos._storage.buffer, sin._storage.buffer]
    if offs is not None:
        bufs.append(offs._storage.buffer)
    if cu is not None:
        bufs.append(cu._storage.buffer)
    bufs.append(out._storage.buffer)
    backend.current().dispatch(src, bufs, info, grid_for(n))
    if inplace:
        _autograd.mark_written(x)
    return out


def _g_rotary(ctx, g):
    """The rotation is orthogonal: x's gradient is g rotated by the conjugate (-sin), one
    dispatch (recorded when a double backward is being built: the same op, so it nests)."""
    a = ctx.args
    if ctx.needs[1] or ctx.needs[2]:
        raise NotImplementedError(
            "pyrite: apply_rotary_emb: the gradient with respect to cos and sin is not "
            "implemented (pass cos and sin that do not require grad, e.g. .detach())"
        )
    grid = a[9] if len(a) > 9 else None
    gx = None
    if ctx.needs[0]:
        gx = _rotary(g, a[1], a[2], a[3], a[4], a[5], a[6], not a[7], False, grid)
    return (gx,) + (None,) * (len(a) - 1)


_g_rotary.saves = frozenset((1, 2, 3, 4))
_rotary = _autograd.wrap(_rotary_raw, "apply_rotary_emb", _g_rotary)


def apply_rotary(
    x, cos, sin, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None, interleaved=False,
    inplace=False, conjugate=False,
):  # fmt: skip
    r"""apply_rotary(x, cos, sin, seqlen_offsets=0, cu_seqlens=None, max_seqlen=None,
    interleaved=False, inplace=False, conjugate=False) -> Tensor

    flash-attn's ``flash_attn.ops.triton.rotary.apply_rotary``: the rotary embedding of
    :func:`apply_rotary_emb` with the rotation's direction exposed (``conjugate=True`` rotates
    by -sin, the inverse rotation).
    """
    if inplace and _autograd.needs_grad(x, cos, sin):
        # recorded as the out-of-place op and a copy_ into x (the engine handles x's history)
        out = _rotary(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, interleaved, conjugate)
        return x.copy_(out)
    if inplace:
        return _rotary_raw(
            x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, interleaved, conjugate, True
        )
    return _rotary(x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, interleaved, conjugate)


def apply_rotary_emb(
    x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0, cu_seqlens=None,
    max_seqlen=None,
):  # fmt: skip
    r"""apply_rotary_emb(x, cos, sin, interleaved=False, inplace=False, seqlen_offsets=0,
    cu_seqlens=None, max_seqlen=None) -> Tensor

    Applies the rotary position embedding (RoFormer, as LLaMA, GPT-NeoX and GPT-J use it) to
    the first ``rotary_dim`` features of every head, in one kernel. Follows flash-attn's
    ``flash_attn.layers.rotary.apply_rotary_emb`` (its arguments and semantics), so code
    written for it ports by changing the import.

    With ``half = rotary_dim / 2`` and row ``r = t + seqlen_offsets`` of ``cos`` and ``sin``,
    each pair ``(x_i, x_j)`` of a head becomes
    ``(x_i·cos[r, k] - x_j·sin[r, k], x_i·sin[r, k] + x_j·cos[r, k])``: pairs ``(k, k + half)``
    (GPT-NeoX / LLaMA "rotate_half") unless ``interleaved``, then ``(2k, 2k + 1)`` (GPT-J).
    Features past ``rotary_dim`` pass through unchanged.

    Args:
        x (Tensor): ``(batch, seqlen, nheads, headdim)``, float32 or float16, any strides (a q
            or k sliced from a fused qkv is read in place); ``(total_seqlen, nheads, headdim)``
            with ``cu_seqlens``.
        cos, sin (Tensor): ``(seqlen_ro, rotary_dim / 2)``, ``rotary_dim <= headdim``.
        interleaved (bool): rotate even/odd pairs (GPT-J) instead of the two halves.
        inplace (bool): write the result into ``x`` and return it.
        seqlen_offsets (int or Tensor): every sequence shifted by this many positions, or a
            ``(batch,)`` int tensor, one offset a sequence (a KV cache's lengths). Rows past
            ``seqlen_ro`` are left unrotated (flash-attn's masked loads).
        cu_seqlens (Tensor, optional): ``(batch + 1,)`` int32 cumulative sequence lengths of a
            packed (varlen) batch; needs ``max_seqlen``.
        max_seqlen (int, optional): the longest sequence of a varlen batch.

    Returns:
        Tensor: a new contiguous tensor of x's shape and dtype (``x`` itself if ``inplace``);
        arithmetic in float32.

    The gradient with respect to ``x`` is the conjugate rotation of the output's gradient (one
    kernel, twice differentiable); ``cos`` and ``sin`` get none (their backward raises
    NotImplementedError when they require grad).
    """
    return apply_rotary(
        x, cos, sin, seqlen_offsets, cu_seqlens, max_seqlen, interleaved, inplace, False
    )


def apply_rotary_emb_3d(x, cos, sin, grid_sizes, sections, interleaved=False, offsets=(0, 0, 0)):
    r"""apply_rotary_emb_3d(x, cos, sin, grid_sizes, sections, interleaved=False,
    offsets=(0, 0, 0)) -> Tensor

    The 3-D rotary position embedding of video transformers (Wan's ``rope_apply``,
    HunyuanVideo's and CogVideoX's 3-D RoPE), in one kernel: a token's position in a
    ``(T, H, W)`` grid of patches rotates three sections of each head's pairs — the first
    ``sections[0]`` pairs by its frame ``t``, the next ``sections[1]`` by its row ``h``, the last
    ``sections[2]`` by its column ``w`` — with the pairs of :func:`apply_rotary_emb`.

    Tokens are ordered ``t·H·W + h·W + w`` (a ``(T, H, W)`` patch grid flattened); tokens past
    ``T·H·W`` (padding) pass through unchanged, as do features past ``2·sum(sections)``.

    Args:
        x (Tensor): ``(batch, seqlen, nheads, headdim)``, float32 or float16, any strides,
            ``seqlen >= T·H·W``.
        cos, sin (Tensor): ``(rows, sum(sections))``: column ``k`` of row ``p`` holds the cosine
            and sine of position ``p`` times the frequency of pair ``k`` — the three axes'
            tables side by side along the columns (as Wan builds its ``freqs``), so section
            ``a``'s columns are read at the token's position along axis ``a``.
        grid_sizes (tuple): ``(T, H, W)``.
        sections (tuple): pairs rotated by time, height and width.
        interleaved (bool): rotate ``(2k, 2k + 1)`` (Wan's complex pairs) instead of
            ``(k, k + half)``.
        offsets (tuple): added to the three positions (a clip's first frame, a crop's corner).

    Returns:
        Tensor: a new contiguous tensor of x's shape and dtype; arithmetic in float32. The
        gradient with respect to ``x`` is the conjugate rotation (one kernel).
    """
    name = "apply_rotary_emb_3d"
    try:
        T, H, W = (int(v) for v in grid_sizes)
        s1, s2, s3 = (int(v) for v in sections)
        ot, oh, ow = (int(v) for v in offsets)
    except (TypeError, ValueError):
        raise TypeError(
            f"pyrite: {name}(): grid_sizes, sections and offsets must be three ints each, got "
            f"{grid_sizes!r}, {sections!r}, {offsets!r}"
        ) from None
    _float_tensor(name, "x", x)
    _float_tensor(name, "cos", cos)
    if min(T, H, W) < 1 or min(s1, s2, s3, ot, oh, ow) < 0:
        raise ValueError(
            f"pyrite: {name}(): grid_sizes must be positive and sections, offsets non-negative, "
            f"got {(T, H, W)}, {(s1, s2, s3)}, {(ot, oh, ow)}"
        )
    if x.ndim == 4 and x._shape[1] < T * H * W:
        raise ShapeError(
            f"pyrite: {name}(): x has {x._shape[1]} tokens, fewer than the grid's "
            f"{T}·{H}·{W} = {T * H * W}"
        )
    if cos.ndim == 2 and cos._shape[1] != s1 + s2 + s3:
        raise ShapeError(
            f"pyrite: {name}(): cos and sin need sum(sections) = {s1 + s2 + s3} columns, got "
            f"shape {tuple(cos._shape)}"
        )
    rows = max(T + ot if s1 else 0, H + oh if s2 else 0, W + ow if s3 else 0)
    if cos.ndim == 2 and cos._shape[0] < rows:
        raise ShapeError(
            f"pyrite: {name}(): cos and sin have {cos._shape[0]} rows; the grid {(T, H, W)} "
            f"at offsets {(ot, oh, ow)} reads positions up to {rows - 1}"
        )
    grid = (T, H, W, s1, s1 + s2, ot, oh, ow)
    return _rotary(x, cos, sin, 0, None, None, bool(interleaved), False, False, grid)


# these record themselves (through _rotary, and copy_ for inplace): install leaves them unwrapped
apply_rotary.records_itself = True
apply_rotary_emb.records_itself = True
apply_rotary_emb_3d.records_itself = True


# ---- causal depthwise conv1d --------------------------------------------------------------
_ACTIVATIONS = (None, "silu", "swish")


def _conv_args(x, weight, bias, activation, name="causal_conv1d"):
    if activation not in _ACTIVATIONS:
        raise NotImplementedError(
            f"pyrite: {name}(): activation must be None, silu, or swish, got {activation!r}"
        )
    _float_tensor(name, "x", x)
    _float_tensor(name, "weight", weight)
    if x.ndim != 3:
        raise ShapeError(
            f"pyrite: {name}(): x must be (batch, dim, seqlen), got shape {tuple(x._shape)}"
        )
    dim = x._shape[1]
    if weight.ndim != 2 or weight._shape[0] != dim:
        raise ShapeError(
            f"pyrite: {name}(): weight must be (dim, width) with dim = {dim} (x's dim 1), got "
            f"shape {tuple(weight._shape)}"
        )
    if weight._shape[1] < 1:
        raise ShapeError(f"pyrite: {name}(): weight's width must be at least 1, got 0")
    if bias is not None:
        _float_tensor(name, "bias", bias)
        if tuple(bias._shape) != (dim,):
            raise ShapeError(
                f"pyrite: {name}(): bias must be (dim,) = ({dim},), got shape {tuple(bias._shape)}"
            )
    return weight._shape[1], activation is not None


def _like(x: Tensor) -> Tensor:
    """A new (batch, dim, seqlen) tensor in x's layout: channels-last when x is a transposed
    (batch, seqlen, dim) view (torch.empty_like's choice, as causal-conv1d's output)."""
    B, Dm, T = x._shape
    if x._strides[1] == 1 and x._strides[2] != 1 and Dm > 1:
        t = empty((B, T, Dm), x.dtype)
        return Tensor._make(t._storage, (B, Dm, T), (T * Dm, 1, Dm), 0, x.dtype)
    return empty(x._shape, x.dtype)


def _d_fastest(x: Tensor) -> bool:
    return x._strides[1] < x._strides[2]


def _conv_composite(x, weight, bias, width, act):
    """The definition, from recorded ops (double backward, and widths past the kernels'
    limits): z = bias + Σ_k w[:, k]·x[..., t - (W - 1) + k], then silu."""
    from ..ops.pad import pad

    T = x._shape[2]
    xp = pad(x.float(), (width - 1, 0))
    w = weight.float()
    z = None
    for k in range(width):
        term = w[:, k : k + 1] * xp[:, :, k : k + T]
        z = term if z is None else z + term
    if bias is not None:
        z = z + bias.float()[:, None]
    return z


def _conv_fits(kind, width, act, per=1):
    return conv_loop_iterations(kind, width, act, per) <= max_loop_iterations()


def _dispatch_conv(x, weight, bias, width, act):
    out = _like(x)
    B, Dm, T = x._shape
    n = B * Dm * T
    if n == 0:
        return out
    src = conv_kernel(
        x.dtype.wgsl,
        weight.dtype.wgsl,
        bias.dtype.wgsl if bias is not None else None,
        out.dtype.wgsl,
        width,
        act,
        _d_fastest(x),
    )
    info = _conv_info(n, x, out, weight, bias, None)
    bufs = [x._storage.buffer, weight._storage.buffer]
    if bias is not None:
        bufs.append(bias._storage.buffer)
    bufs.append(out._storage.buffer)
    backend.current().dispatch(src, bufs, info, grid_for(n))
    return out


def _conv_info(n, x, out, weight, bias, g, bt=0, chunks=0):
    info = [n, x._shape[1], x._shape[2], x._offset, *x._strides]
    info += [out._offset, *out._strides] if out is not None else [0, 0, 0, 0]
    info += [weight._offset, *weight._strides]
    info += [bias._offset, bias._strides[0]] if bias is not None else [0, 0]
    info += [g._offset, *g._strides] if g is not None else [0, 0, 0, 0]
    return info + [bt, chunks]


def causal_conv1d(
    x, weight, bias=None, seq_idx=None, initial_states=None, return_final_states=False,
    final_states_out=None, activation=None,
):  # fmt: skip
    r"""causal_conv1d(x, weight, bias=None, seq_idx=None, initial_states=None,
    return_final_states=False, final_states_out=None, activation=None) -> Tensor

    A causal depthwise 1-D convolution (the short-convolution mixer of Mamba-, Hyena- and
    LFM2-style models) with an optional SiLU, in one kernel. Follows the causal-conv1d
    package's ``causal_conv1d_fn`` (its arguments and semantics), so code written for it ports
    by changing the import:

    .. math::
        \text{out}[b, d, t] = \text{act}\Big(\text{bias}[d] + \sum_{k=0}^{W-1}
        \text{weight}[d, k]\, x[b, d, t - (W - 1) + k]\Big), \quad x[\cdot, \cdot, t < 0] = 0

    which is ``F.conv1d(x, weight.unsqueeze(1), bias, padding=W - 1, groups=dim)[..., :seqlen]``.

    Args:
        x (Tensor): ``(batch, dim, seqlen)``, float32 or float16, any strides; a channels-last
            x (``x_bsd.transpose(1, 2)``) is read in place and gives a channels-last output.
        weight (Tensor): ``(dim, width)``.
        bias (Tensor, optional): ``(dim,)``.
        activation (str, optional): ``None``, ``"silu"`` or ``"swish"`` (the same).
        seq_idx, initial_states, return_final_states, final_states_out: not supported yet
            (NotImplementedError when given).

    Returns:
        Tensor: ``(batch, dim, seqlen)`` in x's dtype (and layout), arithmetic in float32.

    Differentiable in ``x``, ``weight`` and ``bias`` (one kernel for x's gradient, one for the
    weight's and bias's sums over batch and time).
    """
    if seq_idx is not None or initial_states is not None or return_final_states:
        raise NotImplementedError(
            "pyrite: causal_conv1d(): seq_idx, initial_states and return_final_states are not "
            "supported yet"
        )
    if final_states_out is not None:
        raise NotImplementedError("pyrite: causal_conv1d(): final_states_out is not supported yet")
    width, act = _conv_args(x, weight, bias, activation)
    if not _conv_fits("fwd", width, act):
        z = _conv_composite(x, weight, bias, width, act)
        if act:
            z = z * z.sigmoid()
        out = _like(x)
        out.copy_(z)
        return out
    return _dispatch_conv(x, weight, bias, width, act)


causal_conv1d_fn = causal_conv1d


def _conv_ctx(ctx):
    a = list(ctx.args) + [None] * (8 - len(ctx.args))
    x, w, b = a[0], a[1], a[2]
    act = a[7] if len(ctx.args) > 7 else ctx.kwargs.get("activation")
    return x, w, b, w._shape[1], act is not None


def _g_conv_composite(ctx, g, x, w, b, width, act):
    """The gradients from recorded ops (a double backward), gz = g·act'(z):
    dx[t] = Σ_k w[:, k]·gz[t + W - 1 - k], dw[:, k] = Σ_{b,t} gz·x[t - (W - 1) + k], db = Σ gz."""
    from ..ops.pad import pad

    T = x._shape[2]
    gz = g.float()
    if act:
        z = _conv_composite(x, w, b, width, act)
        s = z.sigmoid()
        gz = gz * (s * (1.0 + z * (1.0 - s)))
    gx = gw = gb = None
    if ctx.needs[0]:
        gp = pad(gz, (0, width - 1))
        wf = w.float()
        for k in range(width):
            j = width - 1 - k
            term = wf[:, k : k + 1] * gp[:, :, j : j + T]
            gx = term if gx is None else gx + term
    if ctx.needs[1]:
        from ..ops.combine import stack

        xp = pad(x.float(), (width - 1, 0))
        gw = stack([(gz * xp[:, :, k : k + T]).sum((0, 2)) for k in range(width)], 1)
    if b is not None and ctx.needs[2]:
        gb = gz.sum((0, 2))
    return gx, gw, gb


def _g_causal_conv1d(ctx, g):
    x, w, b, width, act = _conv_ctx(ctx)
    B, Dm, T = x._shape
    fused = (
        not _autograd.is_grad_enabled()
        and g.dtype.is_floating_point
        and g.dtype is not D.bfloat16
        and tuple(g._shape) == tuple(x._shape)
        and _conv_fits("dx", width, act)
        and _conv_fits("dw", width, act)
        and CONV_WG * (width + 1) <= MAX_SHARED_FLOATS
    )
    if not fused or B * Dm * T == 0:
        gx, gw, gb = _g_conv_composite(ctx, g, x, w, b, width, act)
        return (gx, gw, gb, None, None, None, None, None)
    dev = backend.current()
    bt = b.dtype.wgsl if b is not None else None
    bufs = [x._storage.buffer, w._storage.buffer] + ([b._storage.buffer] if b is not None else [])
    gx = gw = gb = None
    if ctx.needs[0]:
        gx = _like(x)
        n = B * Dm * T
        src = conv_dx_kernel(
            x.dtype.wgsl, w.dtype.wgsl, bt, g.dtype.wgsl, gx.dtype.wgsl, width, act, _d_fastest(x)
        )
        info = _conv_info(n, x, gx, w, b, g)
        dev.dispatch(src, [*bufs, g._storage.buffer, gx._storage.buffer], info, grid_for(n))
    if ctx.needs[1] or (b is not None and ctx.needs[2]):
        # elements per invocation: up to 64, fewer where the loop budget says so
        per = 64
        while per > 1 and not _conv_fits("dw", width, act, per):
            per //= 2
        bt_n = B * T
        chunk = CONV_WG * per
        chunks = -(-bt_n // chunk)
        w1 = width + 1
        part = empty((chunks, Dm * w1), D.float32)
        src = conv_dw_kernel(x.dtype.wgsl, w.dtype.wgsl, bt, g.dtype.wgsl, width, act)
        info = _conv_info(chunk, x, None, w, b, g, bt_n, chunks)
        dev.dispatch(
            src, [*bufs, g._storage.buffer, part._storage.buffer], info, fold_grid(Dm * chunks)
        )
        tot = part.sum(0) if chunks > 1 else part.reshape(Dm * w1)
        if ctx.needs[1]:
            gw = tot[: Dm * width].reshape(Dm, width)
        if b is not None and ctx.needs[2]:
            gb = tot[Dm * width :]
    return (gx, gw, gb, None, None, None, None, None)


_g_causal_conv1d.saves = frozenset((0, 1, 2))

__all__ = ["apply_rotary", "apply_rotary_emb", "causal_conv1d", "causal_conv1d_fn"]

GRADS = {"causal_conv1d": _g_causal_conv1d, "causal_conv1d_fn": _g_causal_conv1d}
