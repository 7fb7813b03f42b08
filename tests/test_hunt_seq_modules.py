"""A hunt over torch.nn's composite sequence modules as a ported script uses them
(`import pyrite as torch`): MultiheadAttention with every option, the Transformer family, the
recurrent layers and cells with nn.utils.rnn's packing, Embedding and EmbeddingBag.

Each case builds the module in torch and in pyrite with the same arguments, copies torch's
weights through state_dict (whose keys and order must be torch's), runs both on the same fresh
random inputs of awkward sizes (odd lengths, batch 1, sequence 1) and compares the outputs,
then the gradients of a random-weighted sum of them w.r.t. every input leaf and parameter.
Bad input must raise torch's exception class (or a subclass) with torch's words.

Tolerances are f32 rounding bounds (pyrite/testing/tolerance.py): a sum of K terms is within
K·u·Σ|terms| (u = 2⁻²⁴), so a chain of ops is within (Σ K_op)·u times the scale of the values,
`k` below the sum of the reduction lengths along the longest chain of a case (projections of
length E, softmax and P·V over S keys, the feed-forward's d_ff, LayerNorm's E, a recurrence's
(I + H) per step times its steps). `_SLACK` covers what is not a reduction: WGSL's built-ins
(exp, tanh, sigmoid, division: a few ULP each, spec "Floating Point Accuracy") and the gain of
LayerNorm and softmax, each a few units. Gradients reduce over the batch and time rows as well,
so their k adds the number of rows a weight's gradient sums.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn

import pyrite as pr
import pyrite.nn as pnn
import pyrite.nn.functional as PF
import pyrite.nn.utils.rnn as prnn
from pyrite.testing.tolerance import F32_U, assert_close
from tests.test_hunt_modules import _flat

tnn = torch.nn
TF = torch.nn.functional
_SLACK = 8

pytestmark = [
    # ported scripts mix a bool padding mask with a float attention mask: both libraries warn
    pytest.mark.filterwarnings("ignore:Support for mismatched"),
    pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors"),
    pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN"),
]


# ---- the harness ---------------------------------------------------------------------------
def G(*shape):
    """A float input leaf with a gradient."""
    return lambda rng: (rng.standard_normal(shape).astype(np.float32), True)


def C(array):
    """A constant input (a mask, indices): an array, or rng -> array."""
    return lambda rng: (array(rng) if callable(array) else np.asarray(array), False)


def _lib(x):
    """torch or pyrite, whichever the tensor or module x belongs to."""
    return torch if isinstance(x, (torch.Tensor, tnn.Module)) else pr


def _pair(build):
    torch.manual_seed(0)
    tm, pm = build(tnn), build(pnn)
    tsd, psd = tm.state_dict(), pm.state_dict()
    assert list(psd) == list(tsd)
    for key in tsd:
        assert tuple(psd[key].shape) == tuple(tsd[key].shape), key
    pm.load_state_dict(tsd)
    return tm, pm


def _close(got, want, k, what):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert tuple(got.shape) == want.shape, f"{what}: shape {tuple(got.shape)} != {want.shape}"
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got.numpy(), want, err_msg=what)
        return
    finite = want[np.isfinite(want)]
    scale = max(float(np.abs(finite).max()) if finite.size else 0.0, 1.0)
    assert_close(got, want, atol=_SLACK * k * F32_U * scale, msg=what)


def _compare(build, specs, rng, call=None, k=16, k_grad=None, train=False, infer=False):
    """Forward (and, unless `infer`: eval under no_grad, backward) of torch's module and
    pyrite's on the same inputs. `call(module, inputs)` defaults to module(*inputs)."""
    tm, pm = _pair(build)
    tm.train(train)
    pm.train(train)
    call = call or (lambda m, xs: m(*xs))
    arrays = [spec(rng) for spec in specs]
    tx = [torch.tensor(a, requires_grad=g and not infer) for a, g in arrays]
    px = [pr.tensor(a, requires_grad=g and not infer) for a, g in arrays]
    with torch.no_grad() if infer else contextlib.nullcontext():
        touts = _flat(call(tm, tx))
    with pr.no_grad() if infer else contextlib.nullcontext():
        pouts = _flat(call(pm, px))
    assert len(pouts) == len(touts)
    for i, (p, t) in enumerate(zip(pouts, touts)):
        _close(p, t, k, f"output {i}")
    if infer:
        return
    pairs = [(p, t) for p, t in zip(pouts, touts) if t.requires_grad]
    if not pairs:
        return
    cots = [rng.standard_normal(tuple(t.shape)).astype(np.float32) for _, t in pairs]
    torch.autograd.backward([t for _, t in pairs], [torch.tensor(c) for c in cots])
    sum((p * pr.tensor(c)).sum() for (p, _), c in zip(pairs, cots)).backward()
    kg = k_grad or 2 * k
    for i, (p, t) in enumerate(zip(px, tx)):
        if t.grad is not None:
            assert p.grad is not None, f"input {i} has no gradient"
            _close(p.grad, t.grad, kg, f"grad of input {i}")
    for (n, p), (_, t) in zip(pm.named_parameters(), tm.named_parameters()):
        if t.grad is None:
            assert p.grad is None or not np.any(p.grad.numpy()), f"{n}: torch has no gradient"
        else:
            assert p.grad is not None, f"{n} has no gradient"
            _close(p.grad, t.grad, kg, f"grad of {n}")


def _same_error(fn):
    """fn(lib) raises in torch and in pyrite: pyrite's exception is an instance of torch's
    class and its message holds torch's words (sizes printed as pyrite.Size)."""
    with pytest.raises(Exception) as t_info:
        fn(torch)
    with pytest.raises(Exception) as p_info:
        fn(pr)
    assert isinstance(p_info.value, t_info.type), (p_info.value, t_info.value)
    want = str(t_info.value).replace("torch.", "pyrite.").split("\n")[0]
    want = want.replace(" Please open a feature request on GitHub.", "")
    got = str(p_info.value).replace("pyrite.tensor.Tensor", "pyrite.Tensor")
    assert want in got, (got, want)


def _kpm(n, s, mid=False):
    """A bool key padding mask (True = padded): every sequence's last key, and the first
    sequence's second-to-last (or, with mid, a key in the middle); no row fully padded."""

    def make(rng):
        m = np.zeros((n, s), bool)
        m[:, -1] = True
        m[0, s // 2 if mid else -2] = True
        return m

    return make


def _causal_float(n):
    return np.triu(np.full((n, n), -np.inf, np.float32), 1)


def _causal_bool(n, s=None):
    return np.triu(np.ones((n, s or n), bool), 1)


# ---- MultiheadAttention ----------------------------------------------------------------------
E, H = 6, 3  # head_dim 2, an odd number of heads
L, S, N = 5, 7, 3


def _mha(**kw):
    return lambda nn: nn.MultiheadAttention(E, H, **kw)


def _attn_mask(kind, n=N, lq=L, s=S, heads=H):
    """2d/3d, bool (True = masked, never a whole row) or float."""
    shape = (lq, s) if kind.startswith("2d") else (n * heads, lq, s)

    def make(rng):
        if kind.endswith("bool"):
            m = rng.random(shape) < 0.4
            m[..., 0] = False
            return m
        return rng.standard_normal(shape).astype(np.float32)

    return make


# (id, constructor kwargs, input specs, forward kwargs by name -> index of the spec)
_MHA_CASES = [
    ("self", {}, [G(L, N, E)], dict(self_attn=True)),
    ("self_bf_batch1", dict(batch_first=True), [G(1, L, E)], dict(self_attn=True)),
    ("cross_bf_seq1", dict(batch_first=True), [G(N, 1, E), G(N, S, E), G(N, S, E)], {}),
    ("kdim_vdim", dict(kdim=5, vdim=3), [G(L, N, E), G(S, N, 5), G(S, N, 3)], {}),
    (
        "kdim_vdim_bf_kpm",
        dict(kdim=5, vdim=3, batch_first=True),
        [G(N, L, E), G(N, S, 5), G(N, S, 3), C(_kpm(N, S))],
        dict(key_padding_mask=3),
    ),
    ("nobias", dict(bias=False), [G(L, N, E), G(S, N, E), G(S, N, E)], {}),
    (
        "bias_kv_zero_attn_masks",
        dict(add_bias_kv=True, add_zero_attn=True),
        [G(L, N, E), G(S, N, E), G(S, N, E), C(_kpm(N, S)), C(_attn_mask("2dfloat"))],
        dict(key_padding_mask=3, attn_mask=4),
    ),
    (
        "nobias_bias_kv_3dmask",
        dict(bias=False, add_bias_kv=True),
        [G(L, N, E), G(S, N, E), G(S, N, E), C(_attn_mask("3dbool"))],
        dict(attn_mask=3),
    ),
    (
        "zero_attn_kpm_float",
        dict(add_zero_attn=True),
        [G(L, N, E), G(S, N, E), G(S, N, E), C(lambda r: r.standard_normal((N, S)).astype("f"))],
        dict(key_padding_mask=3),
    ),
    (
        "mask_2d_bool",
        {},
        [G(L, N, E), G(S, N, E), G(S, N, E), C(_attn_mask("2dbool"))],
        dict(attn_mask=3),
    ),
    (
        "mask_3d_float",
        {},
        [G(L, N, E), G(S, N, E), G(S, N, E), C(_attn_mask("3dfloat"))],
        dict(attn_mask=3),
    ),
    (
        "mask_3d_bool_kpm_bool",
        {},
        [G(L, N, E), G(S, N, E), G(S, N, E), C(_attn_mask("3dbool")), C(_kpm(N, S))],
        dict(attn_mask=3, key_padding_mask=4),
    ),
    # a learned additive bias (a float mask with a gradient) beside a bool padding mask: the
    # merged mask holds -inf where the bias has a gradient (pyrite's was NaN everywhere)
    (
        "learned_bias_kpm",
        {},
        [G(L, N, E), G(S, N, E), G(S, N, E), G(L, S), C(_kpm(N, S))],
        dict(attn_mask=3, key_padding_mask=4),
    ),
    (
        "learned_bias_3d_causal",
        dict(batch_first=True),
        [G(N, S, E), G(N * H, S, S), C(_causal_bool(S))],
        dict(self_attn=True, attn_mask=1, _add_causal=2),
    ),
    (
        "causal_hint",
        dict(batch_first=True),
        [G(N, S, E), C(_causal_float(S))],
        dict(self_attn=True, attn_mask=1, is_causal=True),
    ),
    (
        "causal_hint_kpm",
        dict(batch_first=True),
        [G(N, S, E), C(_causal_bool(S)), C(_kpm(N, S, mid=True))],
        dict(self_attn=True, attn_mask=1, key_padding_mask=2, is_causal=True),
    ),
    # is_causal is a hint: with neither weights nor a padding mask torch drops attn_mask and
    # runs causal attention, whatever the mask held
    (
        "causal_hint_drops_mask",
        {},
        [G(S, N, E), C(_attn_mask("2dfloat", lq=S))],
        dict(self_attn=True, attn_mask=1, is_causal=True, _weights=(False,)),
    ),
    ("unbatched", {}, [G(L, E), G(S, E), G(S, E), C(np.arange(S) == 2)], dict(key_padding_mask=3)),
    (
        "unbatched_bf_3dmask",
        dict(batch_first=True),
        [G(L, E), G(S, E), G(S, E), C(_attn_mask("3dfloat", n=1))],
        dict(attn_mask=3),
    ),
    ("seq1_batch1", {}, [G(1, 1, E), G(1, 1, E), G(1, 1, E)], {}),
]
_MHA_IDS = [c[0] for c in _MHA_CASES]


def _mha_call(fwd, need_weights, average):
    def call(m, xs):
        q, k, v = (xs[0],) * 3 if fwd.get("self_attn") else xs[:3]
        kw = {n: xs[i] for n, i in fwd.items() if n in ("key_padding_mask", "attn_mask")}
        if "_add_causal" in fwd:  # the learned bias plus a causal mask, as a model builds it
            causal = xs[fwd["_add_causal"]]
            kw["attn_mask"] = kw["attn_mask"].masked_fill(causal, float("-inf"))
        return m(q, k, v, need_weights=need_weights, average_attn_weights=average,
                 is_causal=fwd.get("is_causal", False), **kw)  # fmt: skip

    return call


def _mha_params():
    out = []
    for id_, ctor, specs, fwd in _MHA_CASES:
        for nw in fwd.get("_weights", (True, False)):
            for avg in (True, False) if nw else (True,):
                out.append(pytest.param(id_, nw, avg, id=f"{id_}-w{int(nw)}{int(avg)}"))
    return out


@pytest.mark.parametrize("id_,need_weights,average", _mha_params())
def test_multihead_attention(id_, need_weights, average, rng):
    _, ctor, specs, fwd = _MHA_CASES[_MHA_IDS.index(id_)]
    call = _mha_call(fwd, need_weights, average)
    # q/k/v projections (E or kdim), softmax and P·V over S + 2 keys, the out projection; a
    # weight's gradient sums over the N·S rows too
    k = 3 * E + 2 * (S + 2)
    _compare(_mha(**ctor), specs, rng, call, k=k, k_grad=2 * k + N * S)


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_eval_dropout_and_fast_path(batch_first, rng):
    """dropout=0.5 in eval is no dropout; eval under no_grad is where torch takes its native
    attention (self-attention, batch_first, an even number of heads)."""
    x = G(N, S, 4) if batch_first else G(S, N, 4)
    build = lambda nn: nn.MultiheadAttention(4, 2, dropout=0.5, batch_first=batch_first)  # noqa: E731
    call = lambda m, xs: m(xs[0], xs[0], xs[0], key_padding_mask=xs[1])  # noqa: E731
    _compare(build, [x, C(_kpm(N, S))], rng, call, k=3 * 4 + 2 * S)
    _compare(build, [x, C(_kpm(N, S))], rng, call, k=3 * 4 + 2 * S, infer=True)
    nw = lambda m, xs: m(xs[0], xs[0], xs[0], key_padding_mask=xs[1], need_weights=False)  # noqa: E731
    _compare(build, [x, C(_kpm(N, S))], rng, nw, k=3 * 4 + 2 * S, infer=True)


def test_multi_head_attention_forward_static_kv(rng):
    """F.multi_head_attention_forward with static_k / static_v (N·H, S, head_dim) in place of
    the projected keys and values (pyrite refused them)."""

    def call(m, xs):
        f = TF if _lib(m) is torch else PF
        return f.multi_head_attention_forward(
            xs[0], xs[1], xs[1], E, H, m.in_proj_weight, m.in_proj_bias, None, None, False,
            0.0, m.out_proj.weight, m.out_proj.bias, training=False, static_k=xs[2],
            static_v=xs[3],
        )  # fmt: skip

    specs = [G(L, N, E), G(S, N, E), G(N * H, S, E // H), G(N * H, S, E // H)]
    _compare(_mha(), specs, rng, call, k=3 * E + 2 * S)


def test_multihead_attention_state_dict_layouts(rng):
    """in_proj_weight when kdim == vdim == embed_dim (given or not), q/k/v_proj_weight
    otherwise, in torch's order; a checkpoint of one layout refused by the other with torch's
    report; a loaded checkpoint gives torch's output."""
    for kw in ({}, dict(kdim=E, vdim=E), dict(kdim=4), dict(vdim=5, add_bias_kv=True)):
        t, p = tnn.MultiheadAttention(E, H, **kw), pnn.MultiheadAttention(E, H, **kw)
        assert list(p.state_dict()) == list(t.state_dict()), kw
        assert p._qkv_same_embed_dim == t._qkv_same_embed_dim
    packed = tnn.MultiheadAttention(E, H).state_dict()
    errors = []
    for lib in (torch, pr):
        with pytest.raises(RuntimeError) as info:
            lib.nn.MultiheadAttention(E, H, kdim=4).load_state_dict(packed)
        errors.append(str(info.value))
    assert errors[1] == errors[0]
    _compare(_mha(kdim=4, vdim=E), [G(L, N, E), G(S, N, 4), G(S, N, E)], rng, k=3 * E + 2 * S)


def _mha_error_cases():
    def mha(lib, *a, **kw):
        return lib.nn.MultiheadAttention(4, 2, *a, **kw)

    r = lambda lib, *s: lib.randn(*s)  # noqa: E731
    q3, kv3 = (3, 2, 4), (5, 2, 4)
    return {
        "4d_query": lambda lib: mha(lib)(r(lib, 2, *q3), r(lib, 2, *kv3), r(lib, 2, *kv3)),
        "batched_query_2d_key": lambda lib: mha(lib)(r(lib, *q3), r(lib, 5, 4), r(lib, 5, 4)),
        "unbatched_query_3d_key": lambda lib: mha(lib)(r(lib, 3, 4), r(lib, *kv3), r(lib, *kv3)),
        "unbatched_kpm_2d": lambda lib: mha(lib)(
            r(lib, 3, 4),
            r(lib, 5, 4),
            r(lib, 5, 4),
            key_padding_mask=lib.zeros(1, 5, dtype=lib.bool),
        ),  # fmt: skip
        "unbatched_3d_mask_shape": lambda lib: mha(lib)(
            r(lib, 3, 4), r(lib, 5, 4), r(lib, 5, 4), attn_mask=lib.zeros(1, 3, 5)
        ),
        "batched_kpm_3d": lambda lib: mha(lib)(
            r(lib, *q3),
            r(lib, *kv3),
            r(lib, *kv3),
            key_padding_mask=lib.zeros(2, 1, 5, dtype=lib.bool),
        ),  # fmt: skip
        "mask_4d": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *kv3), r(lib, *kv3), attn_mask=lib.zeros(1, 1, 3, 5)
        ),
        "mask_2d_shape": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *kv3), r(lib, *kv3), attn_mask=lib.zeros(3, 4)
        ),
        "mask_3d_shape": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *kv3), r(lib, *kv3), attn_mask=lib.zeros(2, 3, 5)
        ),
        "kpm_shape": lambda lib: mha(lib)(
            r(lib, *q3),
            r(lib, *kv3),
            r(lib, *kv3),
            key_padding_mask=lib.zeros(2, 4, dtype=lib.bool),
        ),  # fmt: skip
        "kpm_int": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *kv3), r(lib, *kv3), key_padding_mask=lib.zeros(2, 5).long()
        ),
        "mask_int": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *kv3), r(lib, *kv3), attn_mask=lib.zeros(3, 5).long()
        ),
        "embed_dim": lambda lib: mha(lib)(r(lib, 3, 2, 5), r(lib, 5, 2, 5), r(lib, 5, 2, 5)),
        "key_value_shapes": lambda lib: mha(lib)(r(lib, *q3), r(lib, *kv3), r(lib, 6, 2, 4)),
        "kdim_weights": lambda lib: mha(lib, kdim=3, vdim=3)(
            r(lib, *q3), r(lib, *kv3), r(lib, 5, 2, 3)
        ),
        "kdim_seq_dims": lambda lib: mha(lib, kdim=3, vdim=3)(
            r(lib, *q3), r(lib, 5, 2, 3), r(lib, 6, 2, 3)
        ),
        "is_causal_without_mask": lambda lib: mha(lib)(
            r(lib, *q3), r(lib, *q3), r(lib, *q3), is_causal=True
        ),
        "heads_divide": lambda lib: lib.nn.MultiheadAttention(5, 2),
        "static_k_size": lambda lib: lib.nn.functional.multi_head_attention_forward(
            r(lib, *q3),
            r(lib, *kv3),
            r(lib, *kv3),
            4,
            2,
            r(lib, 12, 4),
            None,
            None,
            None,
            False,
            0.0,
            r(lib, 4, 4),
            None,
            static_k=r(lib, 3, 5, 2),
        ),  # fmt: skip
    }


@pytest.mark.parametrize("name", list(_mha_error_cases()))
def test_multihead_attention_errors(name):
    _same_error(_mha_error_cases()[name])


def test_multihead_attention_mismatched_mask_types_warn():
    q = G(3, 2, 4)(np.random.default_rng(0))[0]
    for lib in (torch, pr):
        m = lib.nn.MultiheadAttention(4, 2)
        x = lib.tensor(q)
        with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "):
            m(x, x, x, key_padding_mask=lib.zeros(2, 3, dtype=lib.bool), attn_mask=lib.zeros(3, 3))


# ---- the Transformer family ------------------------------------------------------------------
D_MODEL, NHEAD, FF = 6, 2, 7


def _activation(nn, kind):
    f = TF if nn is tnn else PF
    return {
        "relu": "relu",
        "gelu": "gelu",
        "F.gelu": f.gelu,
        "GELU()": nn.GELU(),
        "ReLU()": nn.ReLU(),
        "lambda": lambda x: x.tanh() * 2.0,
    }[kind]


def _layer_kwargs(nn, act, **kw):
    return dict(dim_feedforward=FF, activation=_activation(nn, act), **kw)


# k: the attention's (3·d + 2·S), the feed-forward's d + d_ff, two LayerNorms of d, per layer
_K_LAYER = 3 * D_MODEL + 2 * 8 + D_MODEL + FF + 2 * D_MODEL


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize(
    "act,norm_first,batch_first",
    [("relu", False, False), ("gelu", True, True), ("F.gelu", False, True),
     ("GELU()", True, False), ("lambda", False, True), ("ReLU()", True, True)],
)  # fmt: skip
def test_encoder_layer(act, norm_first, batch_first, train, rng):
    """eval with the default dropout (0.1), train with dropout 0; masks from
    generate_square_subsequent_mask and a bool padding mask."""
    n, s = 2, 5
    drop = 0.0 if train else 0.1

    def build(nn):
        kw = _layer_kwargs(nn, act, norm_first=norm_first, batch_first=batch_first)
        return nn.TransformerEncoderLayer(D_MODEL, NHEAD, dropout=drop, **kw)

    def call(m, xs):
        mask = _lib(m).nn.Transformer.generate_square_subsequent_mask(s)
        return m(xs[0], src_mask=mask, src_key_padding_mask=xs[1])

    x = G(n, s, D_MODEL) if batch_first else G(s, n, D_MODEL)
    _compare(build, [x, C(_kpm(n, s))], rng, call, k=_K_LAYER, train=train)


@pytest.mark.parametrize(
    "nested,norm_first,mode",
    [(True, False, "eval"), (True, False, "infer"), (False, False, "infer"),
     (True, True, "train"), (False, True, "infer")],
)  # fmt: skip
def test_encoder_stack(nested, norm_first, mode, rng):
    """3 layers and a final norm; enable_nested_tensor on and off, in eval, train (dropout 0)
    and eval under no_grad (torch's nested-tensor path, where padded positions come out as
    0 before the norm), with a right-padded and a not left-aligned padding mask."""
    n, s = 3, 5

    def build(nn):
        layer = nn.TransformerEncoderLayer(
            D_MODEL, NHEAD, FF, dropout=0.0 if mode == "train" else 0.1, batch_first=True,
            norm_first=norm_first,
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # enable_nested_tensor with norm_first
            return nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(D_MODEL), enable_nested_tensor=nested)  # fmt: skip

    for mid in (False, True):
        call = lambda m, xs: m(xs[0], src_key_padding_mask=xs[1])  # noqa: E731
        _compare(build, [G(n, s, D_MODEL), C(_kpm(n, s, mid))], rng, call, k=3 * _K_LAYER,
                 train=mode == "train", infer=mode == "infer")  # fmt: skip


def test_encoder_causal_hint_and_unbatched(rng):
    build = lambda nn: nn.TransformerEncoder(  # noqa: E731
        nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, dropout=0.0), 2, enable_nested_tensor=False
    )
    call = lambda m, xs: m(xs[0], mask=xs[1], is_causal=True)  # noqa: E731
    _compare(build, [G(5, 2, D_MODEL), C(_causal_float(5))], rng, call, k=2 * _K_LAYER)
    _compare(build, [G(1, D_MODEL)], rng, k=2 * _K_LAYER)  # unbatched, one token


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("norm_first,batch_first", [(False, False), (True, True)])
def test_decoder_layer_and_stack(norm_first, batch_first, train, rng):
    """tgt/memory masks of every kind: a causal bool tgt_mask, a float memory_mask, padding
    masks of both; then a 2-layer decoder with a final norm and tgt_is_causal."""
    n, t, s = 2, 3, 5
    drop = 0.0 if train else 0.1
    tgt = G(n, t, D_MODEL) if batch_first else G(t, n, D_MODEL)
    mem = G(n, s, D_MODEL) if batch_first else G(s, n, D_MODEL)

    def layer(nn):
        return nn.TransformerDecoderLayer(
            D_MODEL, NHEAD, FF, drop, "gelu", batch_first=batch_first, norm_first=norm_first
        )

    def call(m, xs):
        return m(xs[0], xs[1], tgt_mask=xs[2], memory_mask=xs[3], tgt_key_padding_mask=xs[4],
                 memory_key_padding_mask=xs[5])  # fmt: skip

    mm = C(lambda r: r.standard_normal((t, s)).astype(np.float32))
    specs = [tgt, mem, C(_causal_bool(t)), mm, C(_kpm(n, t)), C(_kpm(n, s))]
    k = 2 * _K_LAYER
    _compare(layer, specs, rng, call, k=k, train=train)

    def stack(nn):
        return nn.TransformerDecoder(layer(nn), 2, norm=nn.LayerNorm(D_MODEL))

    def call2(m, xs):
        return m(xs[0], xs[1], tgt_mask=xs[2], memory_key_padding_mask=xs[3], tgt_is_causal=True)

    _compare(stack, [tgt, mem, C(_causal_float(t)), C(_kpm(n, s))], rng, call2, k=2 * k, train=train)  # fmt: skip


def test_decoder_memory_is_causal_rectangular(rng):
    """memory_is_causal with an (T, S) causal memory_mask, T != S: torch hands the hint to
    scaled_dot_product_attention (top-left aligned) and drops the mask."""
    build = lambda nn: nn.TransformerDecoderLayer(D_MODEL, NHEAD, FF, dropout=0.0)  # noqa: E731
    call = lambda m, xs: m(xs[0], xs[1], memory_mask=xs[2], memory_is_causal=True)  # noqa: E731
    specs = [G(3, 2, D_MODEL), G(5, 2, D_MODEL), C(_causal_bool(3, 5))]
    _compare(build, specs, rng, call, k=2 * _K_LAYER)


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer(batch_first, rng):
    """nn.Transformer in eval with its default dropout and in train with dropout 0: a causal
    tgt_mask from generate_square_subsequent_mask, padding masks for src, tgt and memory;
    unbatched; batch 1 with one token each."""
    n, s, t = 2, 3, 4
    src = G(n, s, D_MODEL) if batch_first else G(s, n, D_MODEL)
    tgt = G(n, t, D_MODEL) if batch_first else G(t, n, D_MODEL)

    def call(m, xs):
        tmask = type(m).generate_square_subsequent_mask(t)
        return m(xs[0], xs[1], tgt_mask=tmask, src_key_padding_mask=xs[2],
                 tgt_key_padding_mask=xs[3], memory_key_padding_mask=xs[2])  # fmt: skip

    specs = [src, tgt, C(_kpm(n, s)), C(_kpm(n, t))]
    k = 6 * _K_LAYER
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # enable_nested_tensor without batch_first
        for train in (False, True):

            def build(nn, drop=0.0 if train else 0.1):
                return nn.Transformer(D_MODEL, NHEAD, 2, 2, FF, drop, batch_first=batch_first)

            _compare(build, specs, rng, call, k=k, train=train)

        def pre_norm(nn):
            return nn.Transformer(
                D_MODEL, NHEAD, 1, 1, FF, 0.0, "gelu", batch_first=batch_first, norm_first=True
            )

        _compare(pre_norm, [G(s, D_MODEL), G(t, D_MODEL)], rng, k=k)
        _compare(pre_norm, [G(1, 1, D_MODEL), G(1, 1, D_MODEL)], rng, k=k)


def test_generate_square_subsequent_mask():
    for size in (1, 4):
        want = tnn.Transformer.generate_square_subsequent_mask(size)
        got = pnn.Transformer.generate_square_subsequent_mask(size)
        assert got.dtype is pr.float32
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    got = pnn.Transformer.generate_square_subsequent_mask(3, dtype=pr.float16)
    assert got.dtype is pr.float16  # (the dtype was ignored)
    want = tnn.Transformer.generate_square_subsequent_mask(3, dtype=torch.float16)
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_encoder_nested_tensor_flag():
    """use_nested_tensor and the warning of why not, in torch's words; activation_relu_or_gelu."""
    cases = [
        dict(batch_first=True),
        dict(batch_first=True, norm_first=True),
        dict(batch_first=False),
        dict(batch_first=True, activation=lambda x: x),
        dict(batch_first=True, bias=False),
    ]
    for kw in cases:
        got = []
        for nn in (tnn, pnn):
            layer = nn.TransformerEncoderLayer(4, 2, 8, **kw)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                enc = nn.TransformerEncoder(layer, 1)
            got.append(
                (enc.use_nested_tensor, enc.enable_nested_tensor, layer.activation_relu_or_gelu,
                 [str(w.message) for w in caught if "nested" in str(w.message)])
            )  # fmt: skip
        assert got[1] == got[0], kw
    for act, want in (("gelu", 2), (pnn.ReLU(), 1), (PF.relu, 1), (pnn.Tanh(), 0)):
        assert pnn.TransformerEncoderLayer(4, 2, 8, activation=act).activation_relu_or_gelu == want


def _transformer_error_cases():
    def tr(lib, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return lib.nn.Transformer(4, 2, 1, 1, 8, **kw)

    r = lambda lib, *s: lib.randn(*s)  # noqa: E731
    return {
        "batch": lambda lib: tr(lib)(r(lib, 3, 2, 4), r(lib, 3, 3, 4)),
        "batch_first_batch": lambda lib: tr(lib, batch_first=True)(
            r(lib, 2, 3, 4), r(lib, 3, 3, 4)
        ),
        "d_model": lambda lib: tr(lib)(r(lib, 3, 2, 5), r(lib, 3, 2, 5)),
        "activation": lambda lib: lib.nn.TransformerEncoderLayer(4, 2, activation="tanh"),
        "encoder_mask_shape": lambda lib: lib.nn.TransformerEncoder(
            lib.nn.TransformerEncoderLayer(4, 2, 8), 1, enable_nested_tensor=False
        )(r(lib, 3, 2, 4), mask=lib.zeros(2, 2)),
    }


@pytest.mark.parametrize("name", list(_transformer_error_cases()))
def test_transformer_errors(name):
    _same_error(_transformer_error_cases()[name])


# ---- recurrent layers ------------------------------------------------------------------------
I_IN, HID = 3, 5


def _rnn_k(steps, layers=1, dirs=1):
    """The recurrence's bound grows with the steps a value went through (test_nn_rnn)."""
    return (I_IN + HID + 2) * steps * layers * dirs + 8


_RNN_CASES = [
    ("RNN", dict(nonlinearity="relu", num_layers=2, bidirectional=True)),
    ("RNN", dict(bias=False, batch_first=True)),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True, proj_size=2)),
    ("LSTM", dict(bias=False, proj_size=3)),
    ("GRU", dict(num_layers=3, bidirectional=True)),
    ("GRU", dict(bias=False, batch_first=True, dropout=0.3, num_layers=2)),
]


def _states(cls, kw, batch, rng_shape=None):
    d = 2 if kw.get("bidirectional") else 1
    layers = kw.get("num_layers", 1)
    h = kw.get("proj_size") or HID
    b = () if batch is None else (batch,)
    specs = [G(layers * d, *b, h)]
    if cls == "LSTM":
        specs.append(G(layers * d, *b, HID))
    return specs


def _with_state(cls):
    if cls == "LSTM":
        return lambda m, xs: m(xs[0], (xs[1], xs[2]))
    return lambda m, xs: m(xs[0], xs[1])


@pytest.mark.parametrize("cls,kw", _RNN_CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(_RNN_CASES)])  # fmt: skip
@pytest.mark.parametrize("steps,batch", [(1, 1), (4, 1), (1, 3), (3, None)])
def test_recurrent(cls, kw, steps, batch, rng):
    """Sequence 1, batch 1 and unbatched, with and without initial states, in eval (the GRU's
    dropout between layers is off there)."""
    bf = kw.get("batch_first", False)
    if batch is None:
        x = G(steps, I_IN)
    else:
        x = G(batch, steps, I_IN) if bf else G(steps, batch, I_IN)
    build = lambda nn: getattr(nn, cls)(I_IN, HID, **kw)  # noqa: E731
    k = _rnn_k(steps, kw.get("num_layers", 1), 2 if kw.get("bidirectional") else 1)
    kg = k + 3 * steps * (batch or 1) * 8
    _compare(build, [x], rng, k=k, k_grad=kg)
    _compare(build, [x, *_states(cls, kw, batch)], rng, _with_state(cls), k=k, k_grad=kg)


def test_recurrent_positional_arguments(rng):
    """torch's positional order: (input_size, hidden_size, num_layers, [nonlinearity,] bias,
    batch_first, dropout, bidirectional[, proj_size])."""
    k = _rnn_k(3, 2, 2)
    _compare(lambda nn: nn.RNN(I_IN, HID, 2, "relu", False, True, 0.0, True), [G(2, 3, I_IN)], rng, k=k)  # fmt: skip
    _compare(lambda nn: nn.LSTM(I_IN, HID, 2, True, True, 0.0, True, 2), [G(2, 3, I_IN)], rng, k=k)  # fmt: skip
    _compare(lambda nn: nn.GRU(I_IN, HID, 2, False, False, 0.0, True), [G(3, 2, I_IN)], rng, k=k)  # fmt: skip


def test_recurrent_usage_patterns(rng):
    """flatten_parameters() before the forward (a no-op); (h, c) passed as a list; a
    non-contiguous h0; truncated BPTT (the state of one call, detached, starts the next); a
    gradient for h0 only; state_dict and _flat_weights_names / _all_weights as torch's."""

    def fp(m, xs):
        m.flatten_parameters()
        return m(xs[0], [xs[1], xs[2]])

    k = _rnn_k(3, 2)
    _compare(lambda nn: nn.LSTM(I_IN, HID, 2), [G(3, 2, I_IN), G(2, 2, HID), G(2, 2, HID)], rng, fp, k=k)  # fmt: skip
    gru = lambda nn: nn.GRU(I_IN, HID, num_layers=2)  # noqa: E731
    _compare(gru, [G(3, 2, I_IN), G(2, 2, HID)], rng, lambda m, xs: m(xs[0], xs[1].transpose(0, 1)), k=k)  # fmt: skip
    _compare(gru, [G(3, 2, I_IN), G(2, 2, HID)], rng, lambda m, xs: m(xs[0].detach(), xs[1]), k=k)  # fmt: skip

    def tbptt(m, xs):
        out1, h = m(xs[0])
        out2, h2 = m(xs[1], tuple(t.detach() for t in h))
        return out1, out2, h2

    lstm = lambda nn: nn.LSTM(I_IN, HID, batch_first=True, proj_size=2)  # noqa: E731
    _compare(lstm, [G(2, 3, I_IN), G(2, 2, I_IN)], rng, tbptt, k=_rnn_k(5))
    for cls, kw in _RNN_CASES:
        t, p = getattr(tnn, cls)(I_IN, HID, **kw), getattr(pnn, cls)(I_IN, HID, **kw)
        assert list(p.state_dict()) == list(t.state_dict())
        assert p._flat_weights_names == t._flat_weights_names
        assert p._all_weights == t._all_weights


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("enforce_sorted,batch_first", [(True, False), (False, True)])
def test_packed(cls, enforce_sorted, batch_first, rng):
    """pack_padded_sequence (lengths a list, then a tensor) -> module -> pad_packed_sequence
    with a padding_value and total_length; pack_sequence of the same sequences."""
    lengths = [5, 3, 3, 1] if enforce_sorted else [2, 5, 1, 3]
    n, t = len(lengths), max(lengths)
    kw = dict(num_layers=2, bidirectional=True, batch_first=batch_first)
    if cls == "LSTM":
        kw["proj_size"] = 2
    x = G(n, t, I_IN) if batch_first else G(t, n, I_IN)

    def call(m, xs):
        u = trnn if _lib(m) is torch else prnn
        lens = _lib(m).tensor(lengths) if batch_first else lengths
        packed = u.pack_padded_sequence(xs[0], lens, batch_first, enforce_sorted)
        out, h = m(packed)
        padded, out_lengths = u.pad_packed_sequence(
            out, batch_first=batch_first, padding_value=-1.0, total_length=t + 2
        )
        seqs = [(xs[0][b, :j] if batch_first else xs[0][:j, b]) for b, j in enumerate(lengths)]
        out2, h2 = m(u.pack_sequence(seqs, enforce_sorted=enforce_sorted))
        return padded, out_lengths, h, out2.data, h2

    build = lambda nn: getattr(nn, cls)(I_IN, HID, **kw)  # noqa: E731
    k = _rnn_k(t, 2, 2)
    _compare(build, [x], rng, call, k=k, k_grad=k + 3 * t * n * 8)


@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells(cls, rng):
    """bias on and off, batch 1 and 1-D input, with and without states; a loop of steps."""
    is_lstm = cls == "LSTMCell"

    def with_state(m, xs):
        return m(xs[0], (xs[1], xs[2]) if is_lstm else xs[1])

    for bias in (True, False):
        build = lambda nn: getattr(nn, cls)(I_IN, HID, bias=bias)  # noqa: E731
        _compare(build, [G(1, I_IN)], rng, k=_rnn_k(1))
        _compare(build, [G(I_IN), G(HID), G(HID)], rng, with_state, k=_rnn_k(1))

    def loop(m, xs):
        state = None
        outs = []
        for x in xs[0].unbind(0):
            state = m(x, state)
            outs.append(state[0] if is_lstm else state)
        return outs

    _compare(lambda nn: getattr(nn, cls)(I_IN, HID), [G(4, 2, I_IN)], rng, loop, k=_rnn_k(4))
    if cls == "RNNCell":
        relu = lambda nn: nn.RNNCell(I_IN, HID, nonlinearity="relu")  # noqa: E731
        _compare(relu, [G(3, I_IN), G(3, HID)], rng, with_state, k=_rnn_k(1))


def _rnn_error_cases():
    r = lambda lib, *s: lib.randn(*s)  # noqa: E731
    return {
        "cell_batch": lambda lib: lib.nn.GRUCell(3, 4)(r(lib, 2, 3), r(lib, 3, 4)),
        "cell_hidden_size": lambda lib: lib.nn.RNNCell(3, 4)(r(lib, 2, 3), r(lib, 2, 3)),
        "cell_1d_input_2d_state": lambda lib: lib.nn.RNNCell(3, 4)(r(lib, 3), r(lib, 1, 4)),
        "lstm_cell_c_batch": lambda lib: lib.nn.LSTMCell(3, 4)(
            r(lib, 2, 3), (r(lib, 2, 4), r(lib, 3, 4))),
        "lstm_c_size_with_proj": lambda lib: lib.nn.LSTM(3, 4, proj_size=2)(
            r(lib, 2, 1, 3), (r(lib, 1, 1, 2), r(lib, 1, 1, 2))),
        "hidden_layers": lambda lib: lib.nn.GRU(3, 4, num_layers=2)(r(lib, 2, 1, 3), r(lib, 1, 1, 4)),
        "hidden_2d_for_batched": lambda lib: lib.nn.RNN(3, 4)(r(lib, 2, 1, 3), r(lib, 1, 4)),
        "input_1d": lambda lib: lib.nn.RNN(3, 4)(r(lib, 3)),
        "input_size": lambda lib: lib.nn.GRU(3, 4)(r(lib, 2, 1, 5)),
        "pack_unsorted": lambda lib: lib.nn.utils.rnn.pack_padded_sequence(r(lib, 3, 2, 1), [1, 3]),
        "pack_zero_length": lambda lib: lib.nn.utils.rnn.pack_padded_sequence(r(lib, 3, 2, 1), [3, 0]),
        "pad_total_length": lambda lib: lib.nn.utils.rnn.pad_packed_sequence(
            lib.nn.utils.rnn.pack_padded_sequence(r(lib, 3, 2, 1), [3, 2]), total_length=2),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_rnn_error_cases()))
def test_recurrent_errors(name):
    _same_error(_rnn_error_cases()[name])


# ---- Embedding and EmbeddingBag --------------------------------------------------------------
V, DIM = 11, 5


def _idx(*shape, dup=True):
    def make(rng):
        a = rng.integers(0, V, shape)
        if dup:  # repeated indices (their gradients add) and the padding candidates 0 and 2
            a.reshape(-1)[:3] = 2
            a.reshape(-1)[-1] = 0
        return a

    return make


@pytest.mark.parametrize("padding_idx", [None, 0, 2, -1])
@pytest.mark.parametrize("freq", [False, True])
def test_embedding(padding_idx, freq, rng):
    """padding_idx's row gets no gradient; scale_grad_by_freq divides each row's gradient by
    its count in the batch; sparse=False."""
    build = lambda nn: nn.Embedding(V, DIM, padding_idx, scale_grad_by_freq=freq, sparse=False)  # noqa: E731
    _compare(build, [C(_idx(3, 7))], rng, k=1, k_grad=21)
    _compare(build, [C(_idx(1, dup=False))], rng, k=1)


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (0.5, 1.0), (2.0, 3.0)])
def test_embedding_max_norm(max_norm, norm_type, rng):
    """The looked-up rows are renormalised in place (the table after two calls is torch's);
    padding_idx still gets no gradient."""

    def call(m, xs):
        return m(xs[0]), m(xs[0][:, :2]), m.weight * 1.0

    build = lambda nn: nn.Embedding(V, DIM, padding_idx=2, max_norm=max_norm, norm_type=norm_type)  # noqa: E731
    _compare(build, [C(_idx(3, 4))], rng, call, k=2 * DIM, k_grad=24)


def test_embedding_from_pretrained_and_tied(rng):
    table = rng.standard_normal((V, DIM)).astype(np.float32)

    def pretrained(nn):
        lib = torch if nn is tnn else pr
        return nn.Embedding.from_pretrained(lib.tensor(table), freeze=False, padding_idx=1)

    _compare(pretrained, [C(_idx(2, 5))], rng, k=1, k_grad=10)

    def tied(nn):
        emb, head = nn.Embedding(V, DIM), nn.Linear(DIM, V, bias=False)
        head.weight = emb.weight  # weight tying, as language models do
        return nn.ModuleDict({"emb": emb, "head": head})

    _compare(tied, [C(_idx(2, 5))], rng, lambda m, xs: m["head"](m["emb"](xs[0])), k=DIM, k_grad=DIM + 10)  # fmt: skip


_OFFSETS = np.array([0, 2, 2, 5])  # 4 bags of a 9-entry input: sizes 2, 0 (empty), 3, 4


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_bag(mode, padding_idx, rng):
    """1-D input with offsets (and include_last_offset), 2-D input; an empty bag."""
    flat = C(lambda r: np.concatenate([r.integers(0, V, 3), [1], r.integers(0, V, 5)]))
    for last in (False, True):
        off = np.append(_OFFSETS, 9) if last else _OFFSETS
        build = lambda nn: nn.EmbeddingBag(  # noqa: E731
            V, DIM, mode=mode, padding_idx=padding_idx, include_last_offset=last
        )
        _compare(build, [flat, C(off)], rng, k=4, k_grad=9)
    build = lambda nn: nn.EmbeddingBag(V, DIM, mode=mode, padding_idx=padding_idx)  # noqa: E731
    _compare(build, [C(_idx(3, 7))], rng, k=7, k_grad=21)
    _compare(build, [C(_idx(1, 1, dup=False))], rng, k=1)


def test_embedding_bag_per_sample_weights_and_max_norm(rng):
    flat = C(lambda r: r.integers(0, V, 9))
    psw = lambda m, xs: m(xs[0], xs[1], per_sample_weights=xs[2])  # noqa: E731
    for last, pad in ((False, None), (True, 3)):
        off = np.append(_OFFSETS, 9) if last else _OFFSETS
        build = lambda nn: nn.EmbeddingBag(  # noqa: E731
            V, DIM, mode="sum", include_last_offset=last, padding_idx=pad
        )
        _compare(build, [flat, C(off), G(9)], rng, psw, k=4, k_grad=9)
    build = lambda nn: nn.EmbeddingBag(V, DIM, mode="sum")  # noqa: E731
    _compare(build, [C(_idx(3, 7)), G(3, 7)], rng, lambda m, xs: m(xs[0], per_sample_weights=xs[1]), k=7, k_grad=21)  # fmt: skip
    for mode in ("sum", "mean", "max"):
        build = lambda nn: nn.EmbeddingBag(V, DIM, mode=mode, max_norm=1.0)  # noqa: E731
        call = lambda m, xs: (m(xs[0], xs[1]), m.weight * 1.0)  # noqa: E731
        _compare(build, [flat, C(_OFFSETS)], rng, call, k=2 * DIM, k_grad=9)


def _embedding_error_cases():
    t = lambda lib, v: lib.tensor(v)  # noqa: E731
    bag = lambda lib, **kw: lib.nn.EmbeddingBag(5, 3, **kw)  # noqa: E731
    return {
        "index_out_of_range": lambda lib: lib.nn.Embedding(5, 3)(t(lib, [5])),
        "negative_index": lambda lib: lib.nn.Embedding(5, 3)(t(lib, [-1])),
        "padding_idx_range": lambda lib: lib.nn.Embedding(5, 3, padding_idx=5),
        "bag_psw_mean": lambda lib: bag(lib)(t(lib, [1, 2]), t(lib, [0]), per_sample_weights=lib.ones(2)),
        "bag_2d_with_offsets": lambda lib: bag(lib)(t(lib, [[1, 2]]), t(lib, [0])),
        "bag_1d_without_offsets": lambda lib: bag(lib)(t(lib, [1, 2])),
        "bag_mode": lambda lib: bag(lib, mode="min")(t(lib, [[1, 2]])),
        "bag_first_offset": lambda lib: bag(lib)(t(lib, [1, 2]), t(lib, [1])),
        "bag_last_offset": lambda lib: bag(lib)(t(lib, [1, 2]), t(lib, [0, 3])),
        "bag_psw_shape": lambda lib: bag(lib, mode="sum")(t(lib, [1, 2]), t(lib, [0]), per_sample_weights=lib.ones(3)),
        "bag_3d": lambda lib: bag(lib)(lib.zeros(1, 1, 1).long()),
        "bag_max_freq": lambda lib: bag(lib, mode="max", scale_grad_by_freq=True)(t(lib, [[1, 2]])),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_embedding_error_cases()))
def test_embedding_errors(name):
    if name in ("index_out_of_range", "negative_index"):
        # torch's words ("index out of range in self") name no index; pyrite's name it
        for lib in (torch, pr):
            with pytest.raises(IndexError):
                _embedding_error_cases()[name](lib)
        return
    _same_error(_embedding_error_cases()[name])
