"""Ported text-generation scripts (`import torch` spelled `pyrite`) against torch CPU: KV caches
grown by cat or written in place, rotary embeddings, causal masks, attention variants, sampling
filters, logits processors and the bookkeeping of a decode loop, each a minimised pattern from a
real script run on fresh awkward inputs."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import pyrite as pr
from pyrite.errors import ShapeError


def _np(t):
    if hasattr(t, "detach"):
        t = t.detach()
        return t.float().numpy() if t.dtype in (torch.bfloat16, pr.bfloat16) else t.numpy()
    return np.asarray(t)


def _both(fn, rtol=1e-4, atol=1e-5):
    """Run fn(torch) and fn(pyrite) and compare every output (exactly when rtol = atol = 0)."""
    want, got = fn(torch), fn(pr)
    if not isinstance(want, (tuple, list)):
        want, got = [want], [got]
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        w, g = _np(w), _np(g)
        assert w.shape == g.shape, (i, w.shape, g.shape)
        if rtol == atol == 0:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")


def _load(pmodel, tmodel):
    pmodel.load_state_dict({k: v.detach().numpy().copy() for k, v in tmodel.state_dict().items()})


# ---- GPT-2 (HF modeling_gpt2 shape): Conv1D via addmm, a cache grown by torch.cat -------------
def _gpt2(L, V, C, nh, T_max, nl=2):
    nn, F = L.nn, L.nn.functional

    class Conv1D(nn.Module):
        def __init__(self, nf, nx):
            super().__init__()
            self.nf = nf
            self.weight = nn.Parameter(L.empty(nx, nf))
            self.bias = nn.Parameter(L.zeros(nf))
            nn.init.normal_(self.weight, std=0.2)

        def forward(self, x):
            size_out = x.size()[:-1] + (self.nf,)
            x = L.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = Conv1D(3 * C, C)
            self.c_proj = Conv1D(C, C)
            tri = L.tril(L.ones((T_max, T_max), dtype=L.bool)).view(1, 1, T_max, T_max)
            self.register_buffer("bias", tri, persistent=False)

        def _split(self, t):
            return t.view(t.size()[:-1] + (nh, C // nh)).permute(0, 2, 1, 3)

        def forward(self, x, layer_past=None):
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = self._split(q), self._split(k), self._split(v)
            if layer_past is not None:
                k = L.cat((layer_past[0], k), dim=-2)
                v = L.cat((layer_past[1], v), dim=-2)
            w = L.matmul(q, k.transpose(-1, -2))
            w = w / L.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
            ql, kl = q.size(-2), k.size(-2)
            causal = self.bias[:, :, kl - ql : kl, :kl]
            mask_value = L.full([], L.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
            w = L.where(causal, w.to(w.dtype), mask_value)
            w = F.softmax(w, dim=-1).type(v.dtype)
            o = L.matmul(w, v).permute(0, 2, 1, 3).contiguous()
            return self.c_proj(o.view(o.size()[:-2] + (C,))), (k, v)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C)
            self.attn = Attn()
            self.fc, self.proj = Conv1D(4 * C, C), Conv1D(C, 4 * C)

        def forward(self, x, past=None):
            a, present = self.attn(self.ln_1(x), past)
            x = x + a
            return x + self.proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")), present

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T_max, C)
            self.h = nn.ModuleList([Block() for _ in range(nl)])
            self.ln_f = nn.LayerNorm(C)
            self.lm_head = nn.Linear(C, V, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, ids, past=None):
            past_len = 0 if past is None else past[0][0].size(-2)
            pos = L.arange(past_len, ids.shape[-1] + past_len, dtype=L.long, device=ids.device)
            x = self.wte(ids) + self.wpe(pos.unsqueeze(0).view(-1, ids.shape[-1]))
            presents = ()
            for i, blk in enumerate(self.h):
                x, pres = blk(x, None if past is None else past[i])
                presents = presents + (pres,)
            return self.lm_head(self.ln_f(x)), presents

    return Model


def _gpt2_greedy(L, m, ids, steps):
    out = []
    with L.no_grad():
        full = L.tensor(ids)
        logits, past = m(full)
        for _ in range(steps):
            nxt = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            out.append(logits[:, -1, :].numpy())
            full = L.cat((full, nxt), dim=1)
            logits, past = m(nxt, past)
        again, _ = m(full)  # one full pass over the whole sequence
        stacked = L.stack([L.stack(kv) for kv in past])  # (layers, 2, B, nh, T, hd)
    return out, full.numpy(), again.numpy(), stacked.numpy()


def test_gpt2_cat_kv_cache_greedy_decode_matches_torch(rng):
    V, C, nh, T0 = int(rng.integers(30, 60)), 20, 4, int(rng.integers(3, 8))
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _gpt2(torch, V, C, nh, 32)().eval()
    pm = _gpt2(pr, V, C, nh, 32)().eval()
    assert sorted(tm.state_dict()) == sorted(pm.state_dict())
    _load(pm, tm)
    assert pm.lm_head.weight is pm.wte.weight
    ids = rng.integers(0, V, (3, T0))
    want = _gpt2_greedy(torch, tm, ids, 6)
    got = _gpt2_greedy(pr, pm, ids, 6)
    for g, w in zip(got[0], want[0]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[3], want[3], rtol=1e-4, atol=1e-5)
    # the cached decode is the full pass's last positions (within each framework)
    np.testing.assert_allclose(got[2][:, T0 - 1 : -1][:, -1], got[0][-1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cast", ["bfloat16", "half"])
def test_gpt2_half_casts_keep_ties_and_match_torch(rng, cast):
    """model.half()/.bfloat16() of a tied model: one parameter, the bool buffer left bool, and the
    logits within the storage type's rounding of torch's."""
    if cast == "half" and not pr.backend.current().has_f16:
        pytest.skip("no shader-f16 on this device")
    V, C = int(rng.integers(30, 60)), 20
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _gpt2(torch, V, C, 4, 16)().eval()
    pm = _gpt2(pr, V, C, 4, 16)().eval()
    _load(pm, tm)
    tm, pm = getattr(tm, cast)(), getattr(pm, cast)()
    assert pm.lm_head.weight is pm.wte.weight and len(list(pm.parameters())) == len(
        list(tm.parameters())
    )
    assert pm.h[0].attn.bias.dtype == pr.bool and pm.wte.weight.dtype == getattr(pr, cast)
    ids = rng.integers(0, V, (2, 9))
    with torch.no_grad():
        want, _ = tm(torch.tensor(ids))
    with pr.no_grad():
        got, _ = pm(pr.tensor(ids))
    assert got.dtype == getattr(pr, cast)
    w = want.float().numpy()
    eps = 2.0**-7 if cast == "bfloat16" else 2.0**-10
    # both round each op's f32 result once to the half type: the same values but where an
    # accumulation order flips a rounding (an ulp of some intermediate, carried through the two
    # blocks: measured < 0.1 eps of the logits' scale; 4 eps allowed)
    np.testing.assert_allclose(got.float().numpy(), w, rtol=0, atol=4 * eps * np.abs(w).max())


# ---- Llama reference (meta's llama/generation.py) with real-valued interleaved rotary -------
def _llama_ref(L, V, C, nh, max_seq, max_bsz):
    nn, F = L.nn, L.nn.functional
    hd = C // nh

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(L.ones(dim))

        def _norm(self, x):
            return x * L.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

        def forward(self, x):
            return self._norm(x.float()).type_as(x) * self.weight

    def rope(xq, cos, sin):
        a, b = xq.float().reshape(*xq.shape[:-1], -1, 2).unbind(-1)
        c, s = cos.view(1, xq.shape[1], 1, -1), sin.view(1, xq.shape[1], 1, -1)
        return L.stack((a * c - b * s, a * s + b * c), -1).flatten(3).type_as(xq)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.wv, self.wo = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
            self.cache_k = L.zeros((max_bsz, max_seq, nh, hd))
            self.cache_v = L.zeros((max_bsz, max_seq, nh, hd))

        def forward(self, x, start_pos, cos, sin, mask):
            bsz, seqlen, _ = x.shape
            xq = self.wq(x).view(bsz, seqlen, nh, hd)
            xk = self.wk(x).view(bsz, seqlen, nh, hd)
            xv = self.wv(x).view(bsz, seqlen, nh, hd)
            xq, xk = rope(xq, cos, sin), rope(xk, cos, sin)
            self.cache_k, self.cache_v = self.cache_k.to(xq), self.cache_v.to(xq)
            self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
            self.cache_v[:bsz, start_pos : start_pos + seqlen] = xv
            keys = self.cache_k[:bsz, : start_pos + seqlen].transpose(1, 2)
            values = self.cache_v[:bsz, : start_pos + seqlen].transpose(1, 2)
            scores = L.matmul(xq.transpose(1, 2), keys.transpose(2, 3)) / math.sqrt(hd)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            out = L.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            return self.wo(out)

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(V, C)
            self.attention = Attention()
            self.attention_norm, self.ffn_norm, self.norm = RMSNorm(C), RMSNorm(C), RMSNorm(C)
            self.w1, self.w3 = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, 3 * C, bias=False)
            self.w2 = nn.Linear(3 * C, C, bias=False)
            self.output = nn.Linear(C, V, bias=False)
            f = 1.0 / (10000.0 ** (L.arange(0, hd, 2)[: (hd // 2)].float() / hd))
            f = L.outer(L.arange(max_seq * 2, device=f.device, dtype=L.float32), f).float()
            self.fc, self.fs = L.cos(f), L.sin(f)

        @L.inference_mode()
        def forward(self, tokens, start_pos):
            _bsz, seqlen = tokens.shape
            h = self.tok_embeddings(tokens)
            cos = self.fc[start_pos : start_pos + seqlen]
            sin = self.fs[start_pos : start_pos + seqlen]
            mask = None
            if seqlen > 1:
                mask = L.full((seqlen, seqlen), float("-inf"), device=tokens.device)
                mask = L.triu(mask, diagonal=1)
                zeros = L.zeros((seqlen, start_pos), device=tokens.device)
                mask = L.hstack([zeros, mask]).type_as(h)
            h = h + self.attention(self.attention_norm(h), start_pos, cos, sin, mask)
            g = self.ffn_norm(h)
            h = h + self.w2(F.silu(self.w1(g)) * self.w3(g))
            return self.output(self.norm(h)).float()

    return Transformer


def _sample_top_p(L, probs, p, u):
    probs_sort, probs_idx = L.sort(probs, dim=-1, descending=True)
    probs_sum = L.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    # torch.multinomial's draw made deterministic: the inverse CDF at given uniforms
    cdf = probs_sort.cumsum(-1)
    nxt = (cdf < u[:, None]).sum(-1, keepdim=True).clamp(max=probs.shape[-1] - 1)
    return L.gather(probs_idx, -1, nxt)


def _llama_generate(L, model, prompts, max_gen_len, pad_id, eos, U, temperature, top_p=0.9):
    bsz = len(prompts)
    min_p, max_p = min(len(t) for t in prompts), max(len(t) for t in prompts)
    total_len = max_gen_len + max_p
    tokens = L.full((bsz, total_len), pad_id, dtype=L.long)
    for k, t in enumerate(prompts):
        tokens[k, : len(t)] = L.tensor(t, dtype=L.long)
    token_logprobs = L.zeros_like(tokens, dtype=L.float)
    prev_pos = 0
    eos_reached = L.tensor([False] * bsz)
    input_text_mask = tokens != pad_id
    for cur_pos in range(min_p, total_len):
        logits = model.forward(tokens[:, prev_pos:cur_pos], prev_pos)
        if temperature > 0:
            probs = L.softmax(logits[:, -1] / temperature, dim=-1)
            next_token = _sample_top_p(L, probs, top_p, L.tensor(U[cur_pos]))
        else:
            next_token = L.argmax(logits[:, -1], dim=-1)
        next_token = next_token.reshape(-1)
        next_token = L.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
        tokens[:, cur_pos] = next_token
        token_logprobs[:, prev_pos + 1 : cur_pos + 1] = -L.nn.functional.cross_entropy(
            input=logits.transpose(1, 2),
            target=tokens[:, prev_pos + 1 : cur_pos + 1],
            reduction="none",
            ignore_index=pad_id,
        )
        eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == eos)
        prev_pos = cur_pos
        if all(eos_reached):
            break
    return tokens.numpy(), token_logprobs.numpy(), eos_reached.numpy()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_llama_reference_generate_matches_torch(rng, temperature):
    """Slice-assigned cache, hstack'ed -inf mask with an empty block at start_pos = 0, top-p by
    sort/cumsum/bool-assign/div_, logprobs by cross_entropy over (B, V, T) with ignore_index,
    `eos_reached |= ...` and `all(tensor)`."""
    V = int(rng.integers(20, 50))
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _llama_ref(torch, V, 16, 2, 24, 4)()
    pm = _llama_ref(pr, V, 16, 2, 24, 4)()
    _load(pm, tm)
    prompts = [list(rng.integers(1, V, n)) for n in rng.integers(2, 8, 3)]
    U = rng.random((40, 3)).astype(np.float32)
    eos = int(rng.integers(1, V))
    want = _llama_generate(torch, tm, prompts, 7, 0, eos, U, temperature)
    got = _llama_generate(pr, pm, prompts, 7, 0, eos, U, temperature)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[2], want[2])


# ---- rotary embeddings and RMSNorm as written by hand ------------------------------------------
def test_rotary_half_split_and_interleaved_with_position_offset(rng):
    B, T, H, D = 2, int(rng.integers(2, 9)), 3, 2 * int(rng.integers(2, 9))
    x = rng.standard_normal((B, T, H, D)).astype(np.float32)
    off = int(rng.integers(1, 50))
    partial = D // 2 + (D // 2) % 2  # GPT-NeoX's rotary_ndims: rotate a part, pass the rest

    def fn(L):
        t = L.tensor(x)
        inv = 1.0 / (10000 ** (L.arange(0, D, 2, dtype=L.int64).float() / D))
        pos = L.arange(off, off + T, dtype=L.float32)
        freqs = L.einsum("i,j->ij", pos, inv)
        emb = L.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]

        def rotate_half(v):
            x1, x2 = v[..., : v.shape[-1] // 2], v[..., v.shape[-1] // 2 :]
            return L.cat((-x2, x1), dim=-1)

        half = t * cos + rotate_half(t) * sin
        xr = t.float().reshape(*t.shape[:-1], -1, 2)
        x0, x1 = xr[..., 0], xr[..., 1]
        c, s = freqs.cos().view(1, T, 1, D // 2), freqs.sin().view(1, T, 1, D // 2)
        inter = L.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1).flatten(3).type_as(t)
        inv_p = 1.0 / (10000 ** (L.arange(0, partial, 2).float() / partial))
        fp = L.outer(pos, inv_p)
        ep = L.cat((fp, fp), dim=-1)
        rot, pas = t[..., :partial], t[..., partial:]
        cp, sp = ep.cos().unsqueeze(1), ep.sin().unsqueeze(1)  # (T, 1, partial)
        neox = L.cat((rot * cp + rotate_half(rot) * sp, pas), dim=-1)
        var = t.pow(2).mean(-1, keepdim=True)
        rms = (t * L.rsqrt(var + 1e-6)).to(t.dtype) * (1.0 + L.arange(D).float() / D)
        return half, inter, neox, rms

    # angles up to ~60 rad: sin/cos of f32 arguments lose ~60·2^-24 absolute
    _both(fn, rtol=1e-4, atol=2e-5)


# ---- attention: masks and scaled_dot_product_attention -----------------------------------------
def test_causal_masks_from_triu_tril_masked_fill(rng):
    T = int(rng.integers(3, 10))
    s = rng.standard_normal((2, 3, T, T)).astype(np.float32)

    def fn(L):
        x = L.tensor(s)
        a = x.masked_fill(L.triu(L.ones(T, T, dtype=L.bool), diagonal=1), float("-inf"))
        tri = L.tril(L.ones(T, T)).view(1, 1, T, T)
        b = x.masked_fill(tri[:, :, :T, :T] == 0, float("-inf"))
        c = x + L.full((T, T), float("-inf")).triu(1)
        return a.softmax(-1), L.nn.functional.softmax(b, dim=-1), c.softmax(dim=-1)

    _both(fn, 1e-5, 1e-6)


SDPA_KINDS = [
    "gqa", "bool", "float", "neg_inf_float", "causal_rect", "causal_scale", "causal_gqa",
    "bool_gqa", "decode_row", "dead_row", "batched3d", "noncontig_q", "expanded_kv", "value_dim",
]  # fmt: skip


@pytest.mark.parametrize("kind", SDPA_KINDS)
def test_sdpa_masks_causal_rectangular_and_gqa(rng, kind):
    B, Hk, D = 2, 2, int(rng.integers(3, 17))
    H = Hk * int(rng.integers(1, 4))
    Lq = int(rng.integers(1, 6))
    S = Lq + int(rng.integers(0, 6))
    q = rng.standard_normal((B, H, Lq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hk, S, D)).astype(np.float32)
    v = rng.standard_normal((B, Hk, S, D + 3)).astype(np.float32)
    bm = rng.random((B, 1, Lq, S)) > 0.3
    bm[..., 0] = True
    fm = rng.standard_normal((Lq, S)).astype(np.float32)

    def fn(L):
        F = L.nn.functional
        Q, K0, V0 = L.tensor(q), L.tensor(k), L.tensor(v[..., :D])
        K, V = K0.repeat_interleave(H // Hk, dim=1), V0.repeat_interleave(H // Hk, dim=1)
        sdpa = F.scaled_dot_product_attention
        if kind == "gqa":
            return sdpa(Q, K0, V0, enable_gqa=True)
        if kind == "bool":
            return sdpa(Q, K, V, attn_mask=L.tensor(bm))
        if kind == "float":
            return sdpa(Q, K, V, attn_mask=L.tensor(fm))
        if kind == "neg_inf_float":
            m = L.zeros(Lq, S).masked_fill(~L.tensor(bm[0, 0]), float("-inf"))
            return sdpa(Q, K, V, attn_mask=m)
        if kind == "causal_rect":  # L != S: the top-left triangle, as torch
            return sdpa(Q, K, V, is_causal=True)
        if kind == "causal_scale":
            return sdpa(Q, K, V, is_causal=True, scale=0.3)
        if kind == "causal_gqa":
            return sdpa(Q, K0, V0, is_causal=True, enable_gqa=True)
        if kind == "bool_gqa":
            return sdpa(Q, K0, V0, attn_mask=L.tensor(bm), enable_gqa=True)
        if kind == "decode_row":
            return sdpa(Q[:, :, -1:], K, V)
        if kind == "dead_row":  # a query with every key masked gives 0 (torch's safe softmax)
            m = L.tensor(bm).clone()
            m[:, :, 0] = False
            return sdpa(Q, K, V, attn_mask=m)
        if kind == "batched3d":
            return sdpa(Q[0], K[0], V[0], is_causal=True)
        if kind == "noncontig_q":
            qt = L.tensor(np.ascontiguousarray(q.transpose(0, 2, 1, 3))).transpose(1, 2)
            return sdpa(qt, K, V, attn_mask=L.tensor(fm))
        if kind == "expanded_kv":
            Ke = K0[:, :1].expand(B, H, S, D)
            return sdpa(Q, Ke, Ke, attn_mask=L.tensor(bm))
        if kind == "value_dim":
            return sdpa(Q, K, L.tensor(v).repeat_interleave(H // Hk, dim=1), is_causal=True)
        raise AssertionError(kind)

    _both(fn, 1e-4, 1e-5)


def test_sdpa_refuses_integer_mask_and_mixed_dtypes():
    """An integer attn_mask (a tokenizer's 0/1 attention_mask passed straight in) was added to
    the scores as a float bias, so padding was attended to and the output silently differed
    from what the script meant; torch raises. q/k/v of different dtypes raised from inside
    matmul ("matmul: expected both operands ..."), not naming the attention call."""
    q = torch.randn(1, 2, 3, 8)
    am = torch.ones(3, 3, dtype=torch.long)
    with pytest.raises(RuntimeError, match="attn_mask dtype"):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=am)
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.nn.functional.scaled_dot_product_attention(q, q.bfloat16(), q.bfloat16())
    p = pr.tensor(q.numpy())
    sdpa = pr.nn.functional.scaled_dot_product_attention
    for dt in (pr.long, pr.int32, pr.uint8):
        with pytest.raises(TypeError, match="pyrite: scaled_dot_product_attention: .*attn_mask"):
            sdpa(p, p, p, attn_mask=pr.ones(3, 3, dtype=dt))
    p.requires_grad_(True)  # the recorded (autograd) path checks too
    with pytest.raises(TypeError, match="attn_mask"):
        sdpa(p, p, p, attn_mask=pr.ones(3, 3, dtype=pr.long))
    with pytest.raises(TypeError, match="pyrite: scaled_dot_product_attention: .*same dtype"):
        sdpa(p.detach(), p.detach().bfloat16(), p.detach().bfloat16())
    # bool and float masks stay accepted
    assert sdpa(p, p, p, attn_mask=pr.ones(3, 3, dtype=pr.bool)).shape == (1, 2, 3, 8)
    assert sdpa(p, p, p, attn_mask=pr.zeros(3, 3)).shape == (1, 2, 3, 8)


def test_sdpa_kernel_context_managers():
    """`from torch.nn.attention import SDPBackend, sdpa_kernel` (gpt-fast, HF, diffusers) raised
    AttributeError/ImportError (no pyrite.nn.attention), as did the older
    torch.backends.cuda.sdp_kernel(...) and enable_cudnn_sdp/cudnn_sdp_enabled. They set the
    backend switches inside the block and restore them after, as torch's do."""
    from pyrite.nn.attention import SDPBackend, sdpa_kernel

    q = np.random.default_rng(0).standard_normal((1, 2, 5, 8)).astype(np.float32)
    ys = []
    for L, sk, Bk in ((torch, torch.nn.attention.sdpa_kernel, torch.nn.attention.SDPBackend),
                      (pr, sdpa_kernel, SDPBackend)):  # fmt: skip
        cuda = L.backends.cuda
        assert int(Bk.MATH) == 0 and int(Bk.FLASH_ATTENTION) == 1 and int(Bk.ERROR) == -1
        with sk(Bk.MATH):
            assert cuda.math_sdp_enabled() and not cuda.flash_sdp_enabled()
            assert not cuda.mem_efficient_sdp_enabled() and not cuda.cudnn_sdp_enabled()
            t = L.tensor(q)
            y = L.nn.functional.scaled_dot_product_attention(t, t, t, is_causal=True)
        with sk([Bk.FLASH_ATTENTION, Bk.EFFICIENT_ATTENTION], set_priority=True):
            assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled()
        assert cuda.flash_sdp_enabled() and cuda.math_sdp_enabled() and cuda.cudnn_sdp_enabled()
        if L is pr:
            with cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
                assert not cuda.flash_sdp_enabled() and cuda.math_sdp_enabled()
            assert cuda.flash_sdp_enabled() and cuda.mem_efficient_sdp_enabled()
        ys.append(y.numpy())
    np.testing.assert_allclose(ys[1], ys[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="pyrite: sdpa_kernel"):
        with sdpa_kernel("math"):
            pass
    assert pr.backends.cuda.flash_sdp_enabled()


# ---- sampling and logits processors ------------------------------------------------------------
def test_sampling_filters_and_logits_processors(rng):
    B, V = int(rng.integers(2, 6)), int(rng.integers(20, 90))
    logits = (rng.standard_normal((B, V)) * 3).astype(np.float32)
    ids = rng.integers(0, V, (B, int(rng.integers(3, 12))))
    k = int(rng.integers(2, 9))

    def fn(L):
        F = L.nn.functional
        lg = L.tensor(logits) / 0.7
        out = []
        # nanoGPT: topk then write -inf below the k-th value
        v, _ = L.topk(lg, min(k, lg.size(-1)))
        a = lg.clone()
        a[a < v[:, [-1]]] = -float("Inf")
        out += [v, F.softmax(a, dim=-1)]
        # gpt-fast: pivot via select, where(cond, python float, tensor)
        pivot = v.select(-1, -1).unsqueeze(-1)
        out.append(L.where(lg < pivot, -float("Inf"), lg))
        # topk scattered back into a -inf canvas
        tv, ti = lg.topk(k, dim=-1)
        out.append(L.full_like(lg, float("-inf")).scatter(1, ti, tv))
        # top-p, descending (shift right) and HF's ascending TopPLogitsWarper
        sl, si = L.sort(lg, descending=True)
        cp = L.cumsum(L.softmax(sl, dim=-1), dim=-1)
        rm = cp > 0.8
        rm[..., 1:] = rm[..., :-1].clone()
        rm[..., 0] = 0
        out.append(lg.masked_fill(rm.scatter(1, si, rm), -float("inf")))
        sl, si = L.sort(lg, descending=False)
        rm = sl.softmax(dim=-1).cumsum(dim=-1) <= (1 - 0.9)
        rm[..., -1:] = 0
        out.append(lg.masked_fill(rm.scatter(1, si, rm), L.finfo(lg.dtype).min))
        # min-p
        probs = L.softmax(lg, dim=-1)
        top, _ = probs.max(dim=-1, keepdim=True)
        out.append(lg.masked_fill(probs < 0.1 * top, -float("inf")))
        # typical decoding
        nl = F.log_softmax(lg, dim=-1)
        ent = -(nl * nl.exp()).nansum(-1, keepdim=True)
        ss, sidx = L.sort(L.abs(-nl - ent), descending=False)
        cps = lg.gather(-1, sidx).softmax(dim=-1).cumsum(dim=-1)
        last = (cps < 0.9).sum(dim=1)
        last.clamp_(max=ss.shape[-1] - 1)
        rmt = ss > ss.gather(1, last.view(-1, 1))
        rmt[..., :1] = 0
        out.append(lg.masked_fill(rmt.scatter(1, sidx, rmt), -float("inf")))
        # repetition penalty (duplicate ids scatter equal values), frequency/presence penalty
        input_ids = L.tensor(ids)
        sc = L.gather(lg, 1, input_ids)
        sc = L.where(sc < 0, sc * 1.3, sc / 1.3)
        out.append(lg.scatter(1, input_ids, sc))
        out.append(lg.clone().scatter_(1, input_ids, sc))
        ones = L.ones_like(input_ids, dtype=lg.dtype)
        counts = L.zeros_like(lg).scatter_add_(1, input_ids, ones)
        out.append(lg - 0.5 * counts - 0.2 * (counts > 0).float())
        out.append(L.bincount(input_ids[0], minlength=V))
        # beam search step: log_softmax + beam scores, topk over (beams * V), div/mod
        beam_scores = -L.arange(B, dtype=L.float32)
        nxt = (nl + beam_scores[:, None].expand_as(nl)).view(1, B * V)
        bsc, btk = L.topk(nxt, 2 * B, dim=1, largest=True, sorted=True)
        out += [bsc, L.div(btk, V, rounding_mode="floor"), btk % V]
        return out

    _both(fn, 1e-5, 1e-5)


def test_multinomial_and_gumbel_draws_follow_the_distribution(rng):
    """torch.multinomial (rows, replacement, generator) and gpt-fast's exponential_-Gumbel argmax
    against the probabilities: each frequency within 5 binomial standard deviations."""
    V = int(rng.integers(5, 15))
    p = rng.random(V).astype(np.float32)
    p[rng.choice(V, 2, replace=False)] = 0
    p /= p.sum()
    n = 20000
    tol = 5 * np.sqrt(p * (1 - p) / n) + 1e-9
    s = pr.multinomial(pr.tensor(p), n, replacement=True)
    assert s.shape == (n,) and s.dtype == pr.long
    np.testing.assert_array_less(np.abs(np.bincount(s.numpy(), minlength=V) / n - p), tol)
    rows = pr.tensor(np.tile(p * 3.5, (n, 1)))  # unnormalised rows, one draw each
    s = pr.multinomial(rows, num_samples=1)
    assert s.shape == (n, 1)
    np.testing.assert_array_less(np.abs(np.bincount(s.numpy()[:, 0], minlength=V) / n - p), tol)
    q = pr.empty_like(rows).exponential_(1)
    s = pr.argmax(rows / q, dim=-1, keepdim=True).to(dtype=pr.int)
    np.testing.assert_array_less(np.abs(np.bincount(s.numpy()[:, 0], minlength=V) / n - p), tol)
    # without replacement: distinct, nonzero categories first
    nz = int((p > 0).sum())
    s = pr.multinomial(pr.tensor(p), nz, replacement=False).numpy()
    assert len(set(s.tolist())) == nz and (p[s] > 0).all()
    # a fixed generator (or seed) repeats its draws
    draws = []
    for _ in range(2):
        g = pr.Generator().manual_seed(42)
        draws.append(pr.multinomial(pr.tensor(p), 7, replacement=True, generator=g).numpy())
    np.testing.assert_array_equal(draws[0], draws[1])
    # a -inf logit's softmax is 0 and never drawn
    lg = pr.tensor([[1.0, float("-inf"), 2.0]] * 500)
    assert (pr.multinomial(pr.softmax(lg, -1), 1) != 1).all()
    for L in (torch, pr):
        with pytest.raises(RuntimeError, match="sum of probabilities"):
            L.multinomial(L.zeros(2, 3), 1)
        with pytest.raises(RuntimeError, match="inf.*nan.*< 0"):
            L.multinomial(L.tensor([[0.2, float("nan"), 0.3]]), 1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_argmax_and_stable_sort_on_tied_logits(rng, dtype):
    """Greedy decoding of half-precision logits meets ties: argmax/max/min must give the first
    index, stable sort the original order, as torch."""
    if dtype == "float16" and not pr.backend.current().has_f16:
        pytest.skip("no shader-f16 on this device")
    x = np.round(rng.standard_normal((int(rng.integers(2, 7)), int(rng.integers(20, 90)))) * 2)
    x = (x / 2).astype(np.float32)

    def fn(L):
        t = L.tensor(x).to(getattr(L, dtype))
        return (t.argmax(-1), t.argmin(-1), t.max(-1).indices, t.min(dim=-1)[1],
                L.max(t, dim=1, keepdim=True)[1],
                L.sort(t, dim=-1, descending=True, stable=True)[1],
                L.sort(t, dim=-1, stable=True)[1])  # fmt: skip

    _both(fn, 0, 0)


def test_nan_and_all_masked_logits(rng):
    """A NaN logit wins argmax/max/topk and sorts first descending (torch propagates it); an
    all -inf row softmaxes to NaN."""
    x = rng.standard_normal((4, 23)).astype(np.float32)
    x[1, 7] = np.nan
    x[2, [3, 11]] = np.nan

    def fn(L):
        t = L.tensor(x)
        m = L.full((3, 6), float("-inf"))
        m[1, 2] = 1.0
        return (t.argmax(-1), t.max(-1).values, t.max(-1).indices, t.topk(3).values,
                t.sort(dim=-1, descending=True, stable=True).indices,
                m.softmax(-1), m.argmax(-1), m.log_softmax(-1), L.logsumexp(m, -1))  # fmt: skip

    _both(fn, 0, 0)


# ---- HF-style masks, position ids and decode-loop bookkeeping ----------------------------------
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_hf_4d_causal_mask_and_position_ids(rng, dtype):
    if dtype == "float16" and not pr.backend.current().has_f16:
        pytest.skip("no shader-f16 on this device")
    bsz, tgt, past = 2, int(rng.integers(2, 6)), int(rng.integers(0, 5))
    am_np = np.ones((bsz, tgt + past), np.int64)
    am_np[0, : int(rng.integers(1, tgt + past))] = 0

    def fn(L):
        dt = getattr(L, dtype)
        mask = L.full((tgt, tgt), L.finfo(dt).min)
        cond = L.arange(mask.size(-1))
        mask.masked_fill_(cond < (cond + 1).view(mask.size(-1), 1), 0)
        mask = L.cat([L.zeros(tgt, past, dtype=dt), mask.to(dt)], dim=-1)
        causal = mask[None, None, :, :].expand(bsz, 1, tgt, tgt + past)
        am = L.tensor(am_np)
        expanded = am[:, None, None, :].expand(bsz, 1, tgt, tgt + past).to(dt)
        inv = 1.0 - expanded
        inv = inv.masked_fill(inv.to(L.bool), L.finfo(dt).min)
        pid = am.long().cumsum(-1) - 1
        pid.masked_fill_(am == 0, 1)
        p2 = L.arange(past, past + tgt, dtype=L.long).unsqueeze(0).expand(bsz, -1)
        nxt = pid[:, -1].unsqueeze(-1) + 1
        am2 = L.nn.functional.pad(am, (0, 1), value=1)
        am3 = L.cat([am, am.new_ones((am.shape[0], 1))], dim=-1)
        return (inv + causal).float(), causal.float(), pid, p2 + 0, nxt, am2, am3

    _both(fn, 0, 0)


def test_decode_loop_bookkeeping(rng):
    """eos detection, nonzero/where(cond), isin stop ids, beam expansion, index_select reorder of
    the cache, a legacy empty cat, roll for a sliding window, perplexity with -100 labels."""
    B, T, V = 3, int(rng.integers(5, 11)), int(rng.integers(10, 40))
    lg = (rng.standard_normal((B, T, V)) * 2).astype(np.float32)
    ids = rng.integers(0, V, (B, T))
    cache = rng.standard_normal((B, 2, T, 4)).astype(np.float32)
    eos = int(ids[0, 2])

    def fn(L):
        t = L.tensor(ids)
        out = [(t == eos).nonzero(as_tuple=True)[1], L.where(t == eos)[0], (t == eos).nonzero()]
        out += [(t == eos).int().argmax(-1), (t == eos).any(dim=-1), (t != eos).cumprod(-1)]
        out.append(L.isin(t, L.tensor([eos, 0])))
        unfinished = L.ones(B, dtype=L.long)
        nt = L.tensor(lg[:, -1]).argmax(-1)
        nt = nt * unfinished + 0 * (1 - unfinished)
        unfinished = unfinished.mul((nt != eos).long())
        out += [nt, unfinished, unfinished.max() == 0]
        out += [t.repeat_interleave(2, dim=0), t.repeat_interleave(L.tensor([1, 3, 2]), dim=0)]
        c = L.tensor(cache)
        out.append(c.index_select(0, L.tensor([2, 2, 0])))
        out.append(L.cat([L.tensor([]), c], dim=-2))
        out.append(L.cat([L.empty(B, 2, 0, 4), c], dim=2))
        out.append(L.roll(c, shifts=-1, dims=-2)[..., -3:, :])
        logits, labels = L.tensor(lg), t.clone()
        labels[:, :2] = -100
        labels[1, -1] = -100
        sl, slb = logits[..., :-1, :].contiguous(), labels[..., 1:].contiguous()
        loss = L.nn.functional.cross_entropy(sl.view(-1, sl.size(-1)), slb.view(-1))
        out += [loss, L.exp(loss), (slb != -100).sum()]
        out.append(logits.log_softmax(-1).gather(-1, t.unsqueeze(-1)).squeeze(-1))
        return out

    _both(fn, 1e-5, 1e-5)


def test_grad_mode_decorators_on_generators_and_bare():
    """Streaming generation decorates a generator function with @torch.no_grad() or
    @torch.inference_mode(): pyrite wrapped only the call that made the generator, so every step
    ran with gradients on (recording a graph per token). Also `@torch.no_grad` and
    `@torch.inference_mode` without parentheses raised TypeError, and `@set_grad_enabled(False)`
    left grad mode off after the decoration and raised TypeError when the function was called."""
    res = []
    for L in (torch, pr):
        w = L.ones(3, requires_grad=True)
        got = []

        @L.no_grad()
        def stream(n, w=w, L=L):
            for i in range(n):
                yield (w * i).requires_grad, L.is_grad_enabled()

        @L.inference_mode()
        def stream2(n, w=w, L=L):
            for i in range(n):
                yield (w * i).requires_grad, L.is_inference_mode_enabled()

        got += [r + (L.is_grad_enabled(),) for r in stream(3)]
        got += [r + (L.is_grad_enabled(),) for r in stream2(2)]

        class Gen:
            @L.no_grad()
            def chat(self, L=L):
                reply = yield L.is_grad_enabled()
                yield reply, L.is_grad_enabled()
                return "done"

        g = Gen().chat()
        got += [next(g), g.send("hi"), L.is_grad_enabled()]
        with pytest.raises(StopIteration) as stop:
            next(g)
        got.append(stop.value.value)

        @L.no_grad
        def bare(L=L):
            return L.is_grad_enabled(), (w * 2).requires_grad

        @L.inference_mode
        def bare_inf(L=L):
            return L.is_inference_mode_enabled(), L.is_grad_enabled()

        got += [bare(), bare_inf(), L.is_grad_enabled()]

        @L.set_grad_enabled(False)
        def frozen(L=L):
            return L.is_grad_enabled()

        got += [L.is_grad_enabled(), frozen(), L.is_grad_enabled()]
        with L.no_grad():

            @L.enable_grad()
            def grads(L=L):
                return L.is_grad_enabled()

            got += [grads(), L.is_grad_enabled()]
        res.append(got)
    assert res[1] == res[0]


# ---- weights: padding_idx, ties, checkpoints, weight-only quantization -------------------------
def test_embedding_padding_idx_and_tied_state_dict_round_trip(rng, tmp_path):
    V, C = int(rng.integers(5, 20)), int(rng.integers(2, 9))
    w = rng.standard_normal((V, C)).astype(np.float32)
    ids = rng.integers(0, V, (3, 5))
    ids[0, 0] = 1

    def fn(L):
        nn = L.nn
        e = nn.Embedding.from_pretrained(L.tensor(w), freeze=True, padding_idx=1)
        e2 = nn.Embedding(V, C, padding_idx=-2)
        e3 = nn.Embedding(V, C, padding_idx=0)
        with L.no_grad():
            e3.weight.copy_(L.tensor(w))
        e3(L.tensor(ids)).pow(2).sum().backward()
        f = L.nn.functional.embedding(L.tensor(ids), L.tensor(w), padding_idx=1)
        return e(L.tensor(ids)), e2.weight[V - 2], e2.padding_idx, e3.weight.grad, f

    _both(fn, 1e-5, 1e-6)

    class LM(pr.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = pr.nn.Embedding(V, C, padding_idx=0)
            self.head = pr.nn.Linear(C, V, bias=False)
            self.head.weight = self.embed.weight

    m = LM()
    path = tmp_path / "lm.safetensors"
    pr.save(m.state_dict(), path)
    m2 = LM()
    m2.load_state_dict(pr.load(path))
    assert m2.head.weight is m2.embed.weight
    np.testing.assert_array_equal(m2.embed.weight.detach().numpy(), m.head.weight.detach().numpy())
    x = pr.tensor(ids)
    np.testing.assert_array_equal(
        m2.head(m2.embed(x)).detach().numpy(), m.head(m.embed(x)).detach().numpy()
    )


def test_weight_only_int8_and_int4_dequant(rng):
    """gpt-fast's int8 per-channel and packed-int4 weight-only quantization: round/clamp/to(int8),
    shifts and masks of uint8, dequantize in the linear."""
    N, K = int(rng.integers(3, 20)), 2 * int(rng.integers(4, 20))
    W = rng.standard_normal((N, K)).astype(np.float32)
    X = rng.standard_normal((3, K)).astype(np.float32)

    def fn(L):
        w, x = L.tensor(W), L.tensor(X)
        scales = w.abs().amax(dim=1, keepdim=True) / 127
        q8 = L.clamp(L.round(w / scales), -128, 127).to(L.int8)
        y8 = L.nn.functional.linear(x, q8.to(dtype=x.dtype)) * scales.squeeze(1)
        mn, mx = w.amin(1, keepdim=True), w.amax(1, keepdim=True)
        sc = (mx - mn).clamp(min=1e-6) / 15
        q4 = L.clamp(L.round((w - mn) / sc), 0, 15).to(L.uint8)
        packed = (q4[:, ::2] << 4 | q4[:, 1::2]).to(L.uint8)
        un = L.stack([packed >> 4, packed & 0xF], dim=-1).view(N, K)
        y4 = x @ (un.to(L.float32) * sc + mn).T
        return q8, y8, packed, un, y4

    # the quantized values exactly (rounding of w / scale in f32 as torch), the products within
    # f32 sums of K terms
    _both(fn, 1e-5, 1e-4)


def test_decode_token_indices_need_no_readback(rng):
    """A decode loop feeds `argmax`/`topk`/`sort`/`multinomial` indices (and their `clone()` or
    `cat` with the prompt ids) into an embedding, gather or scatter. Their range is known by
    construction, but only uploads, arange and randint recorded it: every step read the index
    back for its range check (a GPU round trip per token, and a graph break in pr.compile).
    The values are compared with torch's too."""
    V, C, B = int(rng.integers(20, 60)), 8, 3
    w = rng.standard_normal((V, C)).astype(np.float32)
    lg = rng.standard_normal((B, V)).astype(np.float32)
    ids = rng.integers(0, V, (B, 4))

    def fn(L):
        emb = L.nn.Embedding.from_pretrained(L.tensor(w))
        logits, prompt = L.tensor(lg), L.tensor(ids)
        nxt = logits.argmax(-1, keepdim=True)
        seq = L.cat([prompt, nxt.clone()], dim=-1)
        v, i = logits.topk(5)
        sv, si = logits.sort(-1, descending=True)
        return (emb(nxt), emb(seq), emb(logits.max(-1).indices), logits.gather(-1, i),
                sv.scatter(1, si, sv), emb(i.view(-1)).sum(0))  # fmt: skip

    _both(fn, 1e-6, 1e-6)
    emb = pr.nn.Embedding.from_pretrained(pr.tensor(w))
    logits, prompt = pr.tensor(lg), pr.tensor(ids)
    probs = logits.softmax(-1)
    emb(prompt), logits.argmax(-1), logits.topk(2)  # warm: one-time device probes
    pr.synchronize()
    before = pr.memory_stats()["readbacks"]
    for _ in range(3):
        nxt = logits.argmax(-1, keepdim=True)
        prompt = pr.cat([prompt, nxt.clone()], dim=-1)
        emb(prompt)
        emb(logits.max(-1).indices)
        logits.gather(-1, logits.topk(4).indices)
        sv, si = logits.sort(-1, descending=True)
        sv.scatter(1, si, sv)
        probs.gather(-1, pr.argsort(probs, -1)[:, :2])
    assert pr.memory_stats()["readbacks"] == before
    # multinomial reads its own validity flags back (as torch's CPU checks), its draw no more
    drawn = pr.multinomial(probs, 1)
    pr.synchronize()
    before = pr.memory_stats()["readbacks"]
    emb(drawn)
    pr.cat([prompt, drawn], -1).clone()
    emb(pr.cat([prompt, drawn], -1).clone())
    assert pr.memory_stats()["readbacks"] == before


def test_set_default_tensor_type_and_cuda_legacy_types():
    """Llama's reference loader calls torch.set_default_tensor_type(torch.cuda.HalfTensor) and
    older scripts torch.cuda.FloatTensor: both raised AttributeError. A float32 type is accepted
    (the default dtype), float16 refused as set_default_dtype refuses it, a non-float type with
    torch's words."""
    pr.set_default_tensor_type(pr.cuda.FloatTensor)
    pr.set_default_tensor_type("torch.cuda.FloatTensor")
    assert pr.get_default_dtype() == pr.float32
    assert isinstance(pr.ones(2), pr.cuda.FloatTensor)
    assert pr.cuda.LongTensor([1, 2]).tolist() == [1, 2]
    with pytest.raises(TypeError, match="pyrite: the default dtype must be float32"):
        pr.set_default_tensor_type(pr.cuda.HalfTensor)
    with pytest.raises(TypeError, match="only floating-point types"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation notice
        torch.set_default_tensor_type(torch.LongTensor)
    with pytest.raises(TypeError, match="pyrite: only floating-point types"):
        pr.set_default_tensor_type(pr.LongTensor)
    with pytest.raises(TypeError, match="pyrite: set_default_tensor_type: invalid type"):
        pr.set_default_tensor_type("torch.NoSuchTensor")
    assert pr.get_default_dtype() == pr.float32


def test_causal_lower_right_bias_for_chunked_prefill(rng):
    """torch.nn.attention.bias.causal_lower_right(L, S) is the mask of a chunk of L new queries
    against past + L cached keys (is_causal=True aligns top-left, wrong there): it was missing
    (ImportError). Compared with torch, GQA and a gradient included, and with the same chunked
    prefill written with an explicit tril(diagonal=S - L) mask."""
    import torch.nn.attention.bias as tbias

    from pyrite.nn.attention import bias as pbias

    B, Hk, D = 2, 2, int(rng.integers(3, 17))
    H = Hk * int(rng.integers(1, 4))
    Lq = int(rng.integers(1, 7))
    S = Lq + int(rng.integers(0, 9))
    q = rng.standard_normal((B, H, Lq, D)).astype(np.float32)
    k = rng.standard_normal((B, Hk, S, D)).astype(np.float32)
    v = rng.standard_normal((B, Hk, S, D)).astype(np.float32)
    outs = []
    for L, bias in ((torch, tbias), (pr, pbias)):
        Q = L.tensor(q, requires_grad=True)
        K, V = L.tensor(k), L.tensor(v)
        sdpa = L.nn.functional.scaled_dot_product_attention
        lr = sdpa(Q, K, V, attn_mask=bias.causal_lower_right(Lq, S), enable_gqa=True)
        ul = sdpa(Q, K, V, attn_mask=bias.causal_upper_left(Lq, S), enable_gqa=True)
        tri = L.tril(L.ones(Lq, S, dtype=L.bool), diagonal=S - Lq)
        explicit = sdpa(Q, K, V, attn_mask=tri, enable_gqa=True)
        (lr * L.tensor(v[:, :1, :Lq].repeat(H, 1))).sum().backward()
        outs.append([lr, ul, explicit, Q.grad, bias.causal_lower_right(Lq, S)._materialize()])
        with pytest.raises(ValueError, match="CausalBias"):
            sdpa(Q, K, V, attn_mask=bias.causal_lower_right(Lq, S), is_causal=True)
    for w, g in zip(*outs):
        np.testing.assert_allclose(_np(g), _np(w), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(_np(outs[1][0]), _np(outs[1][2]), rtol=1e-5, atol=1e-6)
    with pytest.raises(ShapeError, match="CausalBias of"):
        p = pr.tensor(q)
        pr.nn.functional.scaled_dot_product_attention(
            p, p, p, attn_mask=pbias.causal_lower_right(Lq, S + 1)
        )


def test_torch_accelerator_device_selection():
    """`device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available()
    else "cpu"` (torch >= 2.6 scripts and tutorials) raised AttributeError: no pr.accelerator.
    It answers as pr.cuda does (a GPU adapter is the accelerator; lavapipe is not, as a CPU-only
    torch has none), and the chosen device string works either way."""
    acc = pr.accelerator
    assert acc.is_available() == pr.cuda.is_available()
    assert acc.device_count() == pr.cuda.device_count()
    cur = acc.current_accelerator()
    if acc.is_available():
        assert cur.type == "cuda" and cur == pr.device("cuda")
    else:
        assert cur is None
    assert torch.accelerator.current_accelerator() is None or torch.accelerator.is_available()
    dev = acc.current_accelerator().type if acc.is_available() else "cpu"
    x = pr.ones(3, device=dev).to(dev)
    acc.synchronize()
    assert x.sum().item() == 3.0 and acc.current_device_index() == 0
    caps = acc.get_device_capability()["supported_dtypes"]
    assert pr.float32 in caps and pr.bfloat16 in caps
    assert (pr.float16 in caps) == pr.backend.current().has_f16
    with pytest.raises(Exception, match="pyrite"):
        acc.set_device_index(3)


# ---- gpt-fast: a static KV cache in module buffers, a compiled decode step ---------------------
def _fast(L, V, C, nh, S):
    nn, F = L.nn, L.nn.functional
    hd = C // nh

    class KVCache(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k_cache", L.zeros(1, nh, S, hd))
            self.register_buffer("v_cache", L.zeros(1, nh, S, hd))

        def update(self, input_pos, k_val, v_val):
            k_out, v_out = self.k_cache, self.v_cache
            k_out[:, :, input_pos] = k_val
            v_out[:, :, input_pos] = v_val
            return k_out, v_out

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, C)
            self.wqkv = nn.Linear(C, 3 * C, bias=False)
            self.wo = nn.Linear(C, C, bias=False)
            self.out = nn.Linear(C, V, bias=False)
            self.kv = KVCache()
            self.register_buffer("causal_mask", L.tril(L.ones(S, S, dtype=L.bool)))

        def forward(self, idx, input_pos):
            x = self.emb(idx)
            b, t, _ = x.shape
            q, k, v = self.wqkv(x).split([C, C, C], dim=-1)
            q, k, v = (z.view(b, t, nh, hd).transpose(1, 2) for z in (q, k, v))
            k, v = self.kv.update(input_pos, k, v)
            mask = self.causal_mask[None, None, input_pos]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)
            return self.out(x + self.wo(y.transpose(1, 2).contiguous().view(b, t, C)))

    return M


def _fast_generate(L, m, prompt, steps, compiled):
    def decode_one_token(model, x, input_pos):
        logits = model(x, input_pos)
        return logits[:, -1].argmax(-1, keepdim=True).to(dtype=L.int), logits

    step = L.compile(decode_one_token, mode="reduce-overhead") if compiled else decode_one_token
    with L.no_grad():
        T = prompt.shape[-1]
        tok, lg = decode_one_token(m, L.tensor(prompt), L.arange(0, T))
        toks, lgs = [tok], [lg[:, -1].numpy()]
        input_pos = L.tensor([T], dtype=L.int)
        for _ in range(steps):
            tok, lg = step(m, tok.clone(), input_pos)
            input_pos += 1
            toks.append(tok.clone())
            lgs.append(lg[:, -1].numpy())
    return L.cat(toks, dim=-1).numpy(), lgs


def test_gpt_fast_static_cache_decode_eager_and_compiled(rng):
    """Module-buffer KV cache written at `input_pos` (advanced-index assignment), a bool causal
    buffer indexed by the positions as SDPA's mask, `input_pos += 1`; the decode step also under
    pr.compile (`input_pos += 1` keeps the positions' range and the step's tokens carry argmax's,
    so it replays with no graph break and no readback a token: tests/test_index_ranges.py counts
    them; the tokens and logits must be torch's)."""
    import warnings

    V, S = int(rng.integers(15, 40)), 12
    torch.manual_seed(int(rng.integers(1 << 30)))
    tm = _fast(torch, V, 16, 2, S)().eval()
    prompt = rng.integers(0, V, (1, int(rng.integers(2, 5))))
    want = _fast_generate(torch, tm, prompt, 5, False)
    for compiled in (False, True):
        pm = _fast(pr, V, 16, 2, S)().eval()
        _load(pm, tm)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the graph-break notice
            got = _fast_generate(pr, pm, prompt, 5, compiled)
        np.testing.assert_array_equal(got[0], want[0])
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
