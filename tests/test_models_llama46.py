"""pyrite.models.LlamaForCausalLM against transformers' LlamaForCausalLM and Qwen2ForCausalLM
(CPU, random tiny configs of awkward sizes): logits, greedy generation token for token, the KV
cache, loading from a Hugging Face folder (save_pretrained) and from GGUF files written here the
way llama.cpp's converter writes them (its names, its Q/K row permutation for Llama, F32 and
Q8_0 / Q4_1 blocks).

Tolerance: pyrite computes in float32; the reference is the transformers model in float64 on the
same weights, and pyrite may differ from it by 4x transformers' own float32 distance from it plus
a few float32 ulps of the logits' scale (the fuzzers' rule)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.models import KVCache, LlamaConfig, LlamaForCausalLM

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")


def _hf(kind="llama", seed=0, **over):
    torch.manual_seed(seed)
    base = dict(
        vocab_size=67,
        hidden_size=48,
        intermediate_size=88,
        num_hidden_layers=2,
        num_attention_heads=6,
        num_key_value_heads=2,
        rms_norm_eps=1e-5,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    base.update(over)
    if kind == "qwen2":
        cfg = transformers.Qwen2Config(**base)
        model = transformers.Qwen2ForCausalLM(cfg)
    elif kind == "qwen3":
        cfg = transformers.Qwen3Config(**{"head_dim": 10, **base})
        model = transformers.Qwen3ForCausalLM(cfg)
    else:
        cfg = transformers.LlamaConfig(**base)
        model = transformers.LlamaForCausalLM(cfg)
    cfg._attn_implementation = "eager"
    with torch.no_grad():  # (biases start at 0 in transformers: make them count)
        for n, p in model.named_parameters():
            if n.endswith("bias") or "norm" in n:
                p.add_(torch.randn_like(p) * 0.3)
    return model.eval()


def _pyrite(hf):
    pm = LlamaForCausalLM(LlamaConfig.from_dict(hf.config.to_dict()))
    sd = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
    if hf.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    pm.load_state_dict(sd, strict=not hf.config.tie_word_embeddings)
    return pm


def _check_logits(got, hf, ids):
    with torch.no_grad():
        t32 = hf(torch.tensor(ids)).logits.numpy().astype(np.float64)
        t64 = hf.double()(torch.tensor(ids)).logits.numpy()
        hf.float()
    scale = np.abs(t64).max()
    bound = 4 * np.abs(t32 - t64).max() + 64 * 2**-24 * scale
    err = np.abs(np.asarray(got, np.float64) - t64).max()
    assert err <= bound, (err, bound)


def _hf_greedy(hf, ids, n):
    """transformers' greedy generate (every prompt token attended: with no attention_mask it
    would take the tokens equal to pad_token_id for padding)."""
    t = torch.tensor(ids)
    return hf.generate(
        t,
        attention_mask=torch.ones_like(t),
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
    ).numpy()


_LLAMA3_ROPE = {
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 5000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8,
    }
}


@pytest.mark.parametrize(
    "kind,over",
    [
        ("llama", {}),
        ("llama", {"tie_word_embeddings": True, "num_key_value_heads": 6}),
        ("llama", {"attention_bias": True, "mlp_bias": True, "num_key_value_heads": 3}),
        ("llama", {"head_dim": 10, "num_attention_heads": 4, "num_key_value_heads": 1}),
        ("llama", _LLAMA3_ROPE),
        ("qwen2", {}),
        ("qwen3", {}),
        ("qwen3", {"head_dim": 16, "num_key_value_heads": 3, "tie_word_embeddings": True}),
    ],
)
def test_logits_and_greedy_generation_match_transformers(rng, kind, over):
    hf = _hf(kind, int(rng.integers(1 << 20)), **over)
    pm = _pyrite(hf)
    ids = rng.integers(0, 67, (2, 11))
    _check_logits(pm(pr.tensor(ids)).numpy(), hf, ids)
    got = pm.generate(pr.tensor(ids), max_new_tokens=7, eos_token_id=-1).numpy()
    with torch.no_grad():
        want = _hf_greedy(hf, ids, 7)
    np.testing.assert_array_equal(got, want)


def check_cache_in_chunks(pm, ids):
    """pm's logits of ids (B, 13) fed in chunks of 5, 1 and 7 tokens over a KV cache of 20 are
    the whole forward's; 8 more tokens overflow the cache."""
    whole = pm(ids).numpy()
    cache = KVCache(pm.config, ids.shape[0], 20)
    parts = [pm(ids[:, a:b], cache).numpy() for a, b in ((0, 5), (5, 6), (6, 13))]
    assert cache.length == 13
    np.testing.assert_allclose(
        np.concatenate(parts, 1), whole, rtol=0, atol=2e-5 * np.abs(whole).max()
    )
    with pytest.raises(ValueError, match="cache"):
        pm(ids[:, :8], cache)


def test_cache_in_chunks_gives_the_whole_forward(rng):
    check_cache_in_chunks(_pyrite(_hf(seed=3)), pr.tensor(rng.integers(0, 67, (3, 13))))


def test_from_pretrained_reads_a_hugging_face_folder(tmp_path, rng):
    hf = _hf(seed=5, tie_word_embeddings=True)
    hf.save_pretrained(tmp_path, safe_serialization=True)
    pm = LlamaForCausalLM.from_pretrained(tmp_path)
    assert pm.lm_head.weight is pm.model.embed_tokens.weight
    ids = rng.integers(0, 67, (1, 9))
    _check_logits(pm(pr.tensor(ids)).numpy(), hf, ids)
    with pytest.raises(FileNotFoundError, match="config.json"):
        LlamaForCausalLM.from_pretrained(tmp_path / "nothing")


def test_from_pretrained_of_a_tied_model_refuses_a_missing_weight(tmp_path):
    """A tied model's lm_head.weight is absent from its files, and only it may be: another
    missing weight is refused, not left as initialised (a strict=False load took it)."""
    from safetensors.torch import save_file

    hf = _hf(seed=5, tie_word_embeddings=True)
    hf.config.save_pretrained(tmp_path)
    sd = {k: v.contiguous() for k, v in hf.state_dict().items()}
    del sd["lm_head.weight"], sd["model.layers.1.mlp.up_proj.weight"]
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="layers.1.mlp.up_proj.weight"):
        LlamaForCausalLM.from_pretrained(tmp_path)


def test_from_pretrained_reads_pytorch_model_bin(tmp_path, rng):
    """A folder of the older layout (config.json and pytorch_model.bin, a torch.save zip of the
    state dict) loads through pyrite.load, without torch."""
    hf = _hf(seed=6)
    hf.config.save_pretrained(tmp_path)
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    pm = LlamaForCausalLM.from_pretrained(tmp_path)
    ids = rng.integers(0, 67, (2, 7))
    _check_logits(pm(pr.tensor(ids)).numpy(), hf, ids)


# ---- padded batches: prompts of different lengths ----------------------------------------------
def _left_padding(B, T, rng):
    """A (B, T) 0/1 mask: the first row full, the others with 1..T-2 pads on the left."""
    mask = np.ones((B, T), np.int64)
    for b in range(1, B):
        mask[b, : int(rng.integers(1, T - 1))] = 0
    return mask


def _generation_positions(mask):
    """transformers' generate's position ids of a padded prompt: cumsum(mask) - 1, 0 at pads."""
    return np.where(mask != 0, mask.cumsum(-1) - 1, 0)


def _check_logits_where(got, hf, ids, mask, position_ids=None):
    """_check_logits at the kept positions only (a left pad's query has every key masked:
    its values are arbitrary). The references run each row's kept tokens alone, at the
    positions they had (the given ones, else their indices, transformers' forward's default):
    the same logits as the padded batch's where kept, and transformers in float64 gives NaN
    for a padded batch (its fully masked rows)."""
    got = np.asarray(got, np.float64)
    for b in range(ids.shape[0]):
        keep = mask[b] != 0
        pos = np.nonzero(keep)[0] if position_ids is None else position_ids[b, keep]
        kw = {"position_ids": torch.tensor(pos)[None]}
        with torch.no_grad():
            t32 = hf(torch.tensor(ids[b, keep])[None], **kw).logits.numpy().astype(np.float64)
            t64 = hf.double()(torch.tensor(ids[b, keep])[None], **kw).logits.numpy()
            hf.float()
        scale = np.abs(t64).max()
        bound = 4 * np.abs(t32 - t64).max() + 64 * 2**-24 * scale
        err = np.abs(got[b, keep] - t64[0]).max()
        assert err <= bound, (b, err, bound)


@pytest.mark.parametrize(
    "kind,over",
    [
        ("llama", {}),
        ("llama", {"head_dim": 10, "num_attention_heads": 4, "num_key_value_heads": 1}),
        ("llama", {"tie_word_embeddings": True, **_LLAMA3_ROPE}),
        ("qwen2", {}),
        ("qwen2", {"num_key_value_heads": 6}),
        ("qwen3", {}),
    ],
)
def test_left_padded_prompts_match_transformers(rng, kind, over):
    """Prompts of different lengths, left-padded: the logits at kept positions (with the mask
    alone, positions 0.. as transformers' forward; and with generate's positions) and greedy
    generation token for token, as transformers' with the same attention_mask."""
    hf = _hf(kind, int(rng.integers(1 << 20)), **over)
    pm = _pyrite(hf)
    ids = rng.integers(0, 67, (3, 11))
    mask = _left_padding(3, 11, rng)
    pos = _generation_positions(mask)
    got = pm(pr.tensor(ids), attention_mask=pr.tensor(mask)).numpy()
    _check_logits_where(got, hf, ids, mask)
    got = pm(pr.tensor(ids), attention_mask=pr.tensor(mask), position_ids=pr.tensor(pos)).numpy()
    _check_logits_where(got, hf, ids, mask, pos)
    got = pm.generate(pr.tensor(ids), 7, attention_mask=pr.tensor(mask), eos_token_id=-1)
    t = torch.tensor(ids)
    with torch.no_grad():
        want = hf.generate(
            t, attention_mask=torch.tensor(mask), max_new_tokens=7, do_sample=False,
            eos_token_id=None, pad_token_id=0,
        ).numpy()  # fmt: skip
    np.testing.assert_array_equal(got.numpy(), want)


def test_position_ids_and_mask_over_a_cache(rng):
    """forward in chunks over a KV cache, with the mask covering cached + new keys and
    positions given per row (not consecutive, not equal across rows), gives the one forward
    with the same mask and positions; a mask of all ones gives the unmasked forward."""
    hf = _hf(seed=13)
    pm = _pyrite(hf)
    ids = rng.integers(0, 67, (2, 9))
    mask = np.array([[1] * 9, [0, 0, 1, 1, 0, 1, 1, 1, 1]])  # (a hole: positions skip it)
    pos = _generation_positions(mask) + np.array([[0], [3]])
    whole = pm(pr.tensor(ids), attention_mask=pr.tensor(mask), position_ids=pr.tensor(pos))
    whole = whole.numpy()
    _check_logits_where(whole, hf, ids, mask, pos)
    cache = KVCache(pm.config, 2, 12)
    parts = [
        pm(
            pr.tensor(ids[:, a:b]),
            cache,
            attention_mask=pr.tensor(mask[:, :b]),
            position_ids=pr.tensor(pos[:, a:b]),
        ).numpy()
        for a, b in ((0, 4), (4, 5), (5, 9))
    ]
    keep = mask.astype(bool)
    np.testing.assert_allclose(
        np.concatenate(parts, 1)[keep], whole[keep], rtol=0, atol=2e-5 * np.abs(whole).max()
    )
    plain = pm(pr.tensor(ids)).numpy()
    ones = pm(pr.tensor(ids), attention_mask=np.ones((2, 9), np.int32)).numpy()
    np.testing.assert_allclose(ones, plain, rtol=0, atol=2e-5 * np.abs(plain).max())
    with pytest.raises(pr.ShapeError, match="attention_mask"):
        pm(pr.tensor(ids), attention_mask=pr.tensor(mask[:, :5]))
    with pytest.raises(pr.ShapeError, match="position_ids"):
        pm(pr.tensor(ids), position_ids=pr.tensor(pos[:, :5]))


# ---- GGUF, as llama.cpp's convert_hf_to_gguf.py writes it --------------------------------------
_GGUF_NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
}


def _converter_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute, as it is written there."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def _write_gguf(path, hf, arch, qtype, tokens=None):
    """hf's weights in a GGUF file: 2-D projections in `qtype`, the rest F32 (and, given
    `tokens`, a byte-level BPE tokenizer of those tokens, no merges). Returns the state dict
    transformers needs to compute with exactly the values the file holds."""
    c = hf.config
    w = gguf.GGUFWriter(str(path), arch)
    if tokens is not None:
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", "gpt-2")
        w.add_array("tokenizer.ggml.tokens", tokens)
        w.add_array("tokenizer.ggml.merges", [])
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    used = {}
    for name, p in hf.state_dict().items():
        a = p.detach().numpy().astype(np.float32)
        if name == "model.embed_tokens.weight":
            g = "token_embd.weight"
        elif name == "model.norm.weight":
            g = "output_norm.weight"
        elif name == "lm_head.weight":
            g = "output.weight"
        else:
            i, rest = name.split(".")[2], ".".join(name.split(".")[3:])
            mod, _, leaf = rest.rpartition(".")
            g = f"blk.{i}.{_GGUF_NAMES[mod]}.{leaf}"
        stored = a
        if arch == "llama" and g.split(".")[-2] in ("attn_q", "attn_k"):
            heads = c.num_attention_heads if "attn_q" in g else c.num_key_value_heads
            stored = _converter_permute(a, heads)
        if qtype != "F32" and a.ndim == 2 and "token_embd" not in g:
            q = gguf.quants.quantize(stored, gguf.GGMLQuantizationType[qtype])
            w.add_tensor(g, q, raw_dtype=gguf.GGMLQuantizationType[qtype])
            deq = gguf.quants.dequantize(q, gguf.GGMLQuantizationType[qtype])
            if stored is not a:  # back in transformers' row order
                heads = c.num_attention_heads if "attn_q" in g else c.num_key_value_heads
                deq = pr.io.unpermute_qk(pr.tensor(deq), heads).numpy()
            used[name] = deq
        else:
            w.add_tensor(g, stored)
            used[name] = a
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return used


@pytest.mark.parametrize(
    "kind,qtype",
    [("llama", "F32"), ("llama", "Q8_0"), ("llama", "Q4_1"), ("qwen2", "Q8_0"), ("qwen3", "Q8_0")],
)
def test_from_gguf_matches_transformers_on_the_file_s_values(tmp_path, rng, kind, qtype):
    # (rows of whole 32-element blocks: Qwen 3's own head_dim, else hidden / heads = 16)
    extra = {"head_dim": 16} if kind == "qwen3" else {}
    hf = _hf(
        kind,
        int(rng.integers(1 << 20)),
        **extra,
        hidden_size=64,
        intermediate_size=96,
        num_attention_heads=4,
    )
    used = _write_gguf(tmp_path / "m.gguf", hf, kind, qtype)
    hf.load_state_dict({k: torch.tensor(v) for k, v in used.items()})
    pm = LlamaForCausalLM.from_gguf(tmp_path / "m.gguf")
    assert pm.config.rope_interleaved == (kind == "llama")
    assert pm.config.eos_token_id == 2
    packed = isinstance(pm.model.layers[0].self_attn.q_proj, pr.quantization.QuantizedLinear)
    assert packed == (qtype != "F32")
    ids = rng.integers(0, 67, (2, 10))
    _check_logits(pm(pr.tensor(ids)).numpy(), hf, ids)
    got = pm.generate(pr.tensor(ids), max_new_tokens=5, eos_token_id=-1).numpy()
    with torch.no_grad():
        want = _hf_greedy(hf, ids, 5)
    np.testing.assert_array_equal(got, want)


def test_from_gguf_refuses_other_architectures(tmp_path, rng):
    w = gguf.GGUFWriter(str(tmp_path / "b.gguf"), "bert")
    w.add_tensor("token_embd.weight", rng.standard_normal((5, 8)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(NotImplementedError, match="bert"):
        LlamaForCausalLM.from_gguf(tmp_path / "b.gguf")


# ---- sampling --------------------------------------------------------------------------------
def test_sampling_options(rng):
    pm = _pyrite(_hf(seed=9))
    ids = pr.tensor(rng.integers(0, 67, (2, 6)))
    greedy = pm.generate(ids, max_new_tokens=6, eos_token_id=-1).numpy()
    # one candidate left: top_k=1, or a top_p no second token is needed for
    for kw in ({"top_k": 1}, {"top_p": 1e-6}):
        got = pm.generate(ids, 6, do_sample=True, eos_token_id=-1, **kw).numpy()
        np.testing.assert_array_equal(got, greedy)
    # a seeded generator repeats itself
    a = pm.generate(
        ids, 6, do_sample=True, eos_token_id=-1, generator=pr.Generator().manual_seed(4)
    )
    b = pm.generate(
        ids, 6, do_sample=True, eos_token_id=-1, generator=pr.Generator().manual_seed(4)
    )
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.shape == (2, 12) and int(a.numpy().max()) < 67
    with pytest.raises(ValueError, match="temperature"):
        pm.generate(ids, 2, do_sample=True, temperature=0.0)
    with pytest.raises(ValueError, match="top_p"):
        pm.generate(ids, 2, do_sample=True, top_p=1.5)


def test_generation_stops_at_eos_and_pads(rng):
    pm = _pyrite(_hf(seed=11))
    ids = pr.tensor(rng.integers(0, 67, (2, 5)))
    free = pm.generate(ids, max_new_tokens=8, eos_token_id=-1).numpy()
    eos = int(free[0, 6])  # the first row's second new token
    got = pm.generate(ids, max_new_tokens=8, eos_token_id=eos, pad_token_id=0).numpy()
    row = list(free[0, 5:])
    first = row.index(eos)
    np.testing.assert_array_equal(got[0, : 5 + first + 1], free[0, : 5 + first + 1])
    assert (got[0, 5 + first + 1 :] == 0).all()
    if eos not in free[1, 5:]:
        assert got.shape[1] == free.shape[1]


def test_cli_generate_continues_a_gguf_prompt(tmp_path, rng, capsys):
    """`pyrite generate model.gguf --prompt ...`: the file's tokenizer encodes the prompt, the
    model continues it greedily, the text is printed (the same ids as generate's)."""
    from pyrite.cli import main

    hf = _hf(
        "llama",
        int(rng.integers(1 << 20)),
        hidden_size=64,
        intermediate_size=96,
        num_attention_heads=4,
    )
    tokens = [chr(i) for i in range(33, 100)]  # (67: the vocabulary; 'a' 'b' 'c' at 64-66)
    _write_gguf(tmp_path / "m.gguf", hf, "llama", "Q8_0", tokens)
    assert (
        main(["generate", str(tmp_path / "m.gguf"), "--prompt", "abc", "--max-new-tokens", "5"])
        == 0
    )
    printed = capsys.readouterr().out.strip()
    pm = LlamaForCausalLM.from_gguf(tmp_path / "m.gguf")
    want = pm.generate(pr.tensor([[64, 65, 66]]), 5, eos_token_id=2).numpy()[0]
    assert printed == "".join(tokens[i] for i in want)
    assert main(["generate", str(tmp_path / "none.gguf")]) == 1


def test_cli_generate_prints_as_it_goes(tmp_path, rng, monkeypatch):
    """`pyrite generate` writes the prompt, then each token's text as generate gives it
    (on_token), not all at the end: the pieces join to the whole text."""
    import io
    import sys

    from pyrite.cli import main

    class Recorder(io.StringIO):
        def __init__(self):
            super().__init__()
            self.pieces = []

        def write(self, s):
            self.pieces.append(s)
            return super().write(s)

    hf = _hf("llama", int(rng.integers(1 << 20)), hidden_size=64, num_attention_heads=4)
    tokens = [chr(i) for i in range(33, 100)]
    _write_gguf(tmp_path / "m.gguf", hf, "llama", "F32", tokens)
    out = Recorder()
    monkeypatch.setattr(sys, "stdout", out)
    assert (
        main(["generate", str(tmp_path / "m.gguf"), "--ids", "64,65,66", "--max-new-tokens", "4"])
        == 0
    )
    pm = LlamaForCausalLM.from_gguf(tmp_path / "m.gguf")
    want = pm.generate(pr.tensor([[64, 65, 66]]), 4, eos_token_id=2).numpy()[0]
    text = "".join(tokens[i] for i in want)
    assert out.getvalue() == text + "\n"
    pieces = [p for p in out.pieces if p]
    assert pieces[0] == "abc" and "".join(pieces[1 : 1 + len(want) - 3]) == text[3:]
    assert len(pieces) >= len(want) - 3 + 1  # (one write a token at least, an eos's empty)


def test_cli_printer_waits_for_split_characters(capsys):
    """A character whose bytes two tokens carry prints once both came (the text of the first
    alone ends in U+FFFD); without a tokenizer, the ids print as they come."""
    from pyrite.cli import _Printer

    table = {1: b"a", 2: "é".encode()[:1], 3: "é".encode()[1:], 4: b"!"}

    def decode(ids):
        return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")

    p = _Printer(decode, [1])
    assert capsys.readouterr().out == "a"
    p.step([2])
    assert capsys.readouterr().out == ""
    p.step([3])
    assert capsys.readouterr().out == "é"
    p.step([4])
    p.end()
    assert capsys.readouterr().out == "!\n"
    p = _Printer(None, [5, 6])
    p.step([7])
    p.end()
    assert capsys.readouterr().out == "5 6 7\n"
