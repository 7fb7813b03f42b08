"""Regressions of the session-46 differential fuzz of the sequence modules
(scripts/fuzz_seq_modules.py: RNN / LSTM / GRU and their cells, packing, MultiheadAttention,
the Transformer family, Embedding in a small model) against torch 2.13 CPU, each minimized to
a named parity test, plus a small seeded run of the fuzz itself.

Found and fixed by it:
- RNN / LSTM / GRU on a sequence of length 0 raised pyrite's "stack() expects a non-empty list
  of tensors" from inside the recurrence; torch refuses it first with "Expected sequence length
  to be larger than 0 in RNN" (nn/modules/rnn.py);
- MultiheadAttention with is_causal=True, need_weights=False and no key_padding_mask took an
  attn_mask of an int dtype: the functional drops the mask for sdpa's causal path before
  checking it, and torch's module checks (canonicalizes) both masks first
  (nn/modules/attention.py now does as well).
The fuzz's other differences are documented choices or torch's bugs (the script's docstring);
one of them, torch's inference fast path reading a finite float mask as bool, has a test below
pinning pyrite's behaviour (torch's documented one: the mask is added).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pyrite as pr
from tests import fuzzing

torch = pytest.importorskip("torch")


def _fuzz():
    return fuzzing.load_script("fuzz_seq_modules")


# ---- an empty sequence is refused with torch's words -------------------------------------------
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layout", ["seq_first", "batch_first", "unbatched"])
def test_recurrent_layer_refuses_an_empty_sequence(cls, layout, rng):
    n, i, h = 3, 5, 7
    shape = {"seq_first": (0, n, i), "batch_first": (n, 0, i), "unbatched": (0, i)}[layout]
    x = rng.standard_normal(shape).astype(np.float32)
    msgs = []
    for T in (torch, pr):
        mod = getattr(T.nn, cls)(i, h, batch_first=layout == "batch_first", bidirectional=True)
        with pytest.raises(RuntimeError) as err:
            mod(T.tensor(x))
        msgs.append(str(err.value))
    assert msgs[0] == "Expected sequence length to be larger than 0 in RNN"
    assert msgs[1] == "pyrite: " + msgs[0]


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_recurrent_layer_takes_an_empty_batch(cls, rng):
    """(the other empty extent: torch takes a batch of 0, and so does pyrite)"""
    x = rng.standard_normal((4, 0, 3)).astype(np.float32)
    shapes = []
    for T in (torch, pr):
        out = getattr(T.nn, cls)(3, 5, num_layers=2)(T.tensor(x))
        shapes.append([tuple(t.shape) for t in _flat(out)])
    assert shapes[1] == shapes[0]


def _flat(x):
    if isinstance(x, (tuple, list)):
        return [y for v in x for y in _flat(v)]
    return [x]


# ---- MultiheadAttention checks its masks' dtypes before the causal path drops them -----------
@pytest.mark.parametrize("which", ["attn_mask", "key_padding_mask"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8"])
def test_multihead_attention_refuses_an_int_mask_on_the_causal_path(which, dtype, rng):
    e, h, n, l = 6, 3, 2, 5
    x = rng.standard_normal((n, l, e)).astype(np.float32)
    causal = np.triu(np.ones((l, l), bool), 1)
    bad = {"attn_mask": causal.astype(dtype), "key_padding_mask": np.zeros((n, l), dtype)}

    def call(T):
        torch.manual_seed(0)
        m = T.nn.MultiheadAttention(e, h, batch_first=True)
        masks = {"attn_mask": T.tensor(causal)}
        masks[which] = T.tensor(bad[which])
        t = T.tensor(x)
        return m(t, t, t, need_weights=False, is_causal=True, **masks)

    types = fuzzing.raises_alike(call)
    assert types[1] is not None and issubclass(types[1], types[0]), types


def test_multihead_attention_causal_path_still_matches_torch(rng):
    """(the canonicalized masks change no value: a bool causal mask on the sdpa path and a
    float padding mask on the weights path)"""
    e, h, n, l = 6, 2, 3, 7
    x = rng.standard_normal((n, l, e)).astype(np.float32)
    causal = np.triu(np.ones((l, l), bool), 1)
    kpm = np.where(rng.random((n, l)) < 0.3, -np.inf, 0.0).astype(np.float32)
    kpm[:, 0] = 0.0
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(e, h, batch_first=True)
    pm = pr.nn.MultiheadAttention(e, h, batch_first=True)
    pm.load_state_dict(tm.state_dict())
    for kw in ({"need_weights": False}, {"need_weights": True, "key_padding_mask": kpm}):
        res = []
        for T, m in ((torch, tm), (pr, pm)):
            args = {k: T.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
            t = T.tensor(x)
            out = m(t, t, t, attn_mask=T.tensor(causal), is_causal=True, **args)
            res.append([o.detach().numpy() for o in out if o is not None])
        for got, want in zip(res[1], res[0]):
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1, np.abs(want).max()))


# ---- a finite float mask in inference: added, as torch documents ---------------------------------
@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("which", ["src_key_padding_mask", "src_mask"])
def test_encoder_layer_adds_a_finite_float_mask_in_inference(which, rng):
    """torch 2.13's TransformerEncoderLayer fast path (eval, no grad) reads a float mask as
    bool (masked where not 0), against its docs and its own ordinary path, which add it (the
    fuzz's torch_bug class). pyrite adds it in inference as in training: checked against torch
    with gradients enabled (its ordinary path)."""
    n, l, e, h = 3, 7, 6, 2
    x = rng.standard_normal((n, l, e)).astype(np.float32)
    shape = (n, l) if which == "src_key_padding_mask" else (l, l)
    m = (-rng.uniform(0.1, 2.0, shape) * (rng.random(shape) < 0.5)).astype(np.float32)
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(e, h, 11, 0.0, batch_first=True).eval()
    pl = pr.nn.TransformerEncoderLayer(e, h, 11, 0.0, batch_first=True).eval()
    pl.load_state_dict(tl.state_dict())
    want = tl(torch.tensor(x), **{which: torch.tensor(m)}).detach().numpy()
    with pr.no_grad():
        got = pl(pr.tensor(x), **{which: pr.tensor(m)}).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))


# ---- the seeded fuzz ------------------------------------------------------------------------------
def test_seeded_fuzz_of_sequence_modules_agrees_with_torch(rng):
    fz = _fuzz()
    seeds = [int(s) for s in rng.integers(0, 2**31, 400)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fails = fuzzing.seeded_failures(fz, seeds)
    assert not fails, "\n".join(fails)
