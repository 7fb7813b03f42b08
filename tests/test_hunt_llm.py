"""Ported LLM inference code (`import torch` spelled `pyrite`) against torch CPU: attention
helpers that ask torch's global state, and a Llama-style decode with a KV cache, left padding
and grouped-query attention, compared step by step."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import pyrite as pr


def test_autocast_and_inference_mode_queries_at_top_level():
    """Attention code asks `torch.is_autocast_enabled()` / `torch.get_autocast_gpu_dtype()` to
    pick a dtype, and `torch.is_inference_mode_enabled()`/`param.is_meta` while loading: these
    raised AttributeError (they lived only in pyrite.amp, or not at all)."""
    for L in (torch, pr):
        assert not L.is_autocast_enabled()
        assert L.get_autocast_dtype("cpu") == L.bfloat16
        assert L.get_autocast_dtype("cuda") == L.float16
        with L.autocast("cpu", dtype=L.float16):
            assert L.is_autocast_enabled("cpu")
            assert L.get_autocast_dtype("cpu") == L.float16
        assert not L.is_inference_mode_enabled()
        with L.inference_mode():
            assert L.is_inference_mode_enabled() and not L.is_grad_enabled()
            with L.inference_mode(False):
                assert not L.is_inference_mode_enabled()
            assert L.is_inference_mode_enabled()

        @L.inference_mode()
        def step():
            return L.is_inference_mode_enabled(), L.is_grad_enabled()

        assert step() == (True, False)
        assert not L.is_inference_mode_enabled() and L.is_grad_enabled()
        assert L.ones(2).is_meta is False
    assert pr.get_autocast_gpu_dtype() == pr.float16


def _llama(L, mode, V=37, C=24, nh=4, nkv=2, H=40):
    nn, F = L.nn, L.nn.functional

    def rotate_half(x):
        return L.cat((-x[..., x.shape[-1] // 2 :], x[..., : x.shape[-1] // 2]), dim=-1)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.hd = C // nh
            self.q_proj = nn.Linear(C, C, bias=False)
            self.k_proj = nn.Linear(C, nkv * self.hd, bias=False)
            self.v_proj = nn.Linear(C, nkv * self.hd, bias=False)
            self.o_proj = nn.Linear(C, C, bias=False)

        def forward(self, x, cos, sin, mask, cache, pos):
            B, T, _ = x.shape
            q = self.q_proj(x).view(B, T, nh, self.hd).transpose(1, 2)  # (B, nh, T, hd)
            k = self.k_proj(x).view(B, T, nkv, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(B, T, nkv, self.hd).transpose(1, 2)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            cache[0].index_copy_(2, pos, k)
            cache[1][:, :, pos] = v
            if mode == "sdpa":
                o = F.scaled_dot_product_attention(
                    q, cache[0], cache[1], attn_mask=mask, enable_gqa=True
                )
            else:
                k = cache[0].repeat_interleave(nh // nkv, dim=1)
                v = cache[1].repeat_interleave(nh // nkv, dim=1)
                s = q @ k.transpose(2, 3) / math.sqrt(self.hd) + mask
                o = F.softmax(s, dim=-1, dtype=L.float32).to(q.dtype) @ v
            return self.o_proj(o.transpose(1, 2).reshape(B, T, C))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, C)
            self.attn = Attn()
            self.norm = nn.RMSNorm(C, eps=1e-6)
            self.gate_proj = nn.Linear(C, H, bias=False)
            self.up_proj = nn.Linear(C, H, bias=False)
            self.down_proj = nn.Linear(H, C, bias=False)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.embed_tokens.weight
            inv = 1.0 / (10000 ** (L.arange(0, C // nh, 2).float() / (C // nh)))
            self.register_buffer("inv_freq", inv, persistent=False)

        def forward(self, ids, position_ids, mask, cache, pos):
            x = self.embed_tokens(ids)
            freqs = position_ids[..., None].float() * self.inv_freq  # (B, T, hd/2)
            emb = L.cat((freqs, freqs), dim=-1)
            x = x + self.attn(self.norm(x), emb.cos(), emb.sin(), mask, cache, pos)
            h = self.norm(x)
            x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
            return self.lm_head(self.norm(x))

    return Model


def _decode(L, model, ids, pad, steps, max_len, hd):
    """Greedy decode with a preallocated cache, left padding and an additive mask."""
    B, T = ids.shape
    am = L.tensor(pad)
    cache = [L.zeros(B, 2, max_len, hd) for _ in range(2)]
    pos_ids = (am.cumsum(-1) - 1).clamp(min=0)
    cur, start, out = L.tensor(ids), 0, []
    with L.inference_mode():
        for _ in range(steps):
            T = cur.shape[1]
            causal = L.triu(L.full((T, max_len), float("-inf")), diagonal=start + 1)
            full = L.zeros(B, max_len, dtype=am.dtype)
            full[:, : am.shape[1]] = am
            mask = (
                causal[None, None] + (1 - full[:, None, None, :].float()) * L.finfo(L.float32).min
            )
            logits = model(
                cur,
                pos_ids,
                mask.clamp(min=L.finfo(L.float32).min),
                cache,
                L.arange(start, start + T),
            )
            out.append(logits[:, -1].detach().numpy())
            cur = logits[:, -1].argmax(-1, keepdim=True)
            start += T
            am = L.cat([am, L.ones(B, 1, dtype=am.dtype)], 1)
            pos_ids = am.sum(-1, keepdim=True) - 1
    return out


@pytest.mark.parametrize("mode", ["sdpa", "explicit"])
def test_llama_kv_cache_decode_left_padding_matches_torch(rng, mode):
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _llama(torch, mode)().eval()
    pm = _llama(pr, mode)().eval()
    pm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()}, strict=True)
    assert pm.lm_head.weight is pm.embed_tokens.weight
    ids = rng.integers(1, 37, (3, 7))
    pad = np.ones((3, 7), np.int64)
    pad[1, :2] = 0
    pad[2, :5] = 0
    ids[pad == 0] = 0
    want = _decode(torch, tm, ids, pad, 4, 16, 6)
    got = _decode(pr, pm, ids, pad, 4, 16, 6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_functional_multi_head_attention_forward_matches_torch():
    """F.multi_head_attention_forward (ported CLIP-style code calls it directly) is reachable
    from pyrite.nn.functional and gives torch's output and averaged weights, (L, N, E) layout,
    with a key padding mask."""
    rng = np.random.default_rng(3)
    L, S, N, E, H = 5, 7, 2, 12, 3
    q = rng.standard_normal((L, N, E)).astype(np.float32)
    kv = rng.standard_normal((S, N, E)).astype(np.float32)
    w_in = (rng.standard_normal((3 * E, E)) * 0.2).astype(np.float32)
    b_in = rng.standard_normal(3 * E).astype(np.float32)
    w_out = (rng.standard_normal((E, E)) * 0.2).astype(np.float32)
    b_out = rng.standard_normal(E).astype(np.float32)
    pad = np.zeros((N, S), bool)
    pad[1, -2:] = True
    outs = []
    for L_, F_ in ((torch, torch.nn.functional), (pr, pr.nn.functional)):
        t = L_.tensor
        out, w = F_.multi_head_attention_forward(
            t(q), t(kv), t(kv), E, H, t(w_in), t(b_in), None, None, False, 0.0, t(w_out),
            t(b_out), training=False, key_padding_mask=t(pad),
        )  # fmt: skip
        outs.append((np.asarray(out.detach().numpy()), np.asarray(w.detach().numpy())))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-4, atol=1e-6)
