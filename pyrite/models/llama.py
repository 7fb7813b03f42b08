"""The Llama family of decoder-only language models (Llama 2 / 3, Mistral, Qwen 2 / 3,
TinyLlama, SmolLM: the same block with different sizes), built from `pyrite.nn`, with a KV
cache and `generate`.

    model = LlamaForCausalLM.from_gguf("tinyllama-1.1b-q4_0.gguf")        # llama.cpp's file
    model = LlamaForCausalLM.from_pretrained("path/to/hf-checkpoint/")    # config.json + safetensors
    out = model.generate(pr.tensor([[1, 450, 4996]]), max_new_tokens=32)

Parameter names are Hugging Face's (`model.layers.0.self_attn.q_proj.weight`, ...), so a
`transformers` state dict loads with `load_state_dict`, and the forward gives the logits
`transformers.LlamaForCausalLM` (and `Qwen2ForCausalLM`) gives for the same weights
(tests/test_models_llama46.py checks both, and greedy generation token for token). Prompts of
different lengths go in one batch left-padded, with an `attention_mask` (1 keep, 0 pad), as
transformers' generate takes them: positions count kept tokens only (`position_ids`, which
forward takes too, gather the rotary tables' rows per token).

A block: x + o_proj(attention(rope(q_proj(n)), rope(k_proj(n)), v_proj(n))) with n =
RMSNorm(x), then x + down_proj(silu(gate_proj(n)) * up_proj(n)) with n = RMSNorm(x); grouped-
query attention (num_key_value_heads <= num_attention_heads) through
`F.scaled_dot_product_attention(enable_gqa=True)`; the rotary embedding through one kernel
(`F.apply_rotary_emb`), in Hugging Face's half-split pairs, or GGUF's interleaved pairs for a
llama.cpp Llama file (`rope_interleaved`: its converter permuted Q's and K's rows to match,
so the file's weights are used as stored, packed ones too).

Weights llama.cpp keeps as Q8_0 / Q4_0 / Q4_1 stay packed (`QuantizedLinear`: the int8 / int4
GEMV for decoding, a dequantized GEMM for a prompt); other formats are dequantized on load
(`pyrite.io.load_gguf`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..nn import functional as F
from ..nn.module import Module
from ..nn.modules.container import ModuleList
from ..nn.modules.linear import Linear
from ..nn.modules.norm import RMSNorm
from ..nn.modules.sparse import Embedding
from ..ops import creation as C
from ..ops import ranges
from ..quantization import QuantizedLinear
from ..tensor import Tensor
from ._generate import GenerationMixin, KVCache, causal_mask, static_step_mask
from ._hf import load_checkpoint, read_folder

_ARCHS = ("llama", "qwen2", "qwen3")


@dataclass
class LlamaConfig:
    """A Llama-family model's hyperparameters, in Hugging Face's `config.json` names (so
    `LlamaConfig.from_dict(json.load(f))` reads one; unknown keys are ignored)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # Llama's: q, k, v and o projections
    qkv_bias: bool = False  # Qwen 2's: q, k and v only
    qk_norm: bool = False  # Qwen 3's: an RMSNorm over each head of q and of k, before the rotary
    mlp_bias: bool = False
    # GGUF's interleaved rotary pairs (a llama.cpp Llama file's Q/K row order), not HF's halves
    rope_interleaved: bool = False
    # Llama 3's per-frequency divisors (GGUF's rope_freqs tensor, HF's rope_scaling "llama3")
    rope_freq_factors: list | None = field(default=None, repr=False)
    bos_token_id: int | None = None
    eos_token_id: int | list | None = None
    pad_token_id: int | None = None

    def __post_init__(self):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"pyrite: LlamaConfig: {self.num_attention_heads} attention heads do not "
                f"share evenly among {self.num_key_value_heads} key/value heads"
            )
        if self.head_dim % 2:
            raise ValueError(f"pyrite: LlamaConfig: head_dim must be even, not {self.head_dim}")

    @classmethod
    def from_dict(cls, d: dict) -> LlamaConfig:
        """A config from Hugging Face's config.json contents (Llama, Mistral, Qwen2): its keys
        that name fields here; Qwen2's q/k/v biases (model_type "qwen2"), the rotary base and
        Llama 3's frequency scaling (rope_type "llama3"), from `rope_theta` and `rope_scaling`
        or from transformers 5's `rope_parameters`, are read too."""
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if d.get("model_type") == "qwen2":
            kw["qkv_bias"] = True
        if d.get("model_type") == "qwen3":
            kw["qk_norm"] = True
        rope = dict(d.get("rope_scaling") or {})
        rope.update(d.get("rope_parameters") or {})
        if "rope_theta" in rope:
            kw["rope_theta"] = rope["rope_theta"]
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind not in ("default", "llama3"):
            raise NotImplementedError(
                f"pyrite: LlamaConfig: rope scaling {rope!r} is not supported (llama3 is)"
            )
        cfg = cls(**kw)
        if kind == "llama3":
            cfg.rope_freq_factors = _llama3_factors(cfg, rope).tolist()
        return cfg


def _llama3_factors(cfg, s) -> np.ndarray:
    """HF's _compute_llama3_parameters as divisors of the plain inverse frequencies."""
    dim = cfg.head_dim
    inv = 1.0 / cfg.rope_theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    smooth = (old / wavelen - lo) / (hi - lo)
    scaled = np.where(wavelen > old / lo, inv / factor, inv)
    mid = (wavelen <= old / lo) & (wavelen >= old / hi)
    scaled = np.where(mid, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
    return inv / scaled


class LlamaAttention(Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.num_heads, self.num_kv = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = cfg.head_dim
        h, q, kv = (
            cfg.hidden_size,
            cfg.num_attention_heads * cfg.head_dim,
            self.num_kv * cfg.head_dim,
        )
        qkv = cfg.attention_bias or cfg.qkv_bias
        self.q_proj = Linear(h, q, bias=qkv)
        self.k_proj = Linear(h, kv, bias=qkv)
        self.v_proj = Linear(h, kv, bias=qkv)
        self.o_proj = Linear(q, h, bias=cfg.attention_bias)
        self.interleaved = cfg.rope_interleaved
        if cfg.qk_norm:
            self.q_norm = RMSNorm(cfg.head_dim, eps=cfg.rms_norm_eps)
            self.k_norm = RMSNorm(cfg.head_dim, eps=cfg.rms_norm_eps)
        self.qk_norm = cfg.qk_norm

    def forward(self, x, rope, mask, causal, start, cache=None, layer=0):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(B, T, self.num_kv, self.head_dim)
        v = self.v_proj(x).view(B, T, self.num_kv, self.head_dim)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = _rotate(q, rope, self.interleaved), _rotate(k, rope, self.interleaved)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, hd)
        if cache is not None:
            k, v = cache.update(layer, k, v, start)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=self.num_kv != self.num_heads
        )
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.num_heads * self.head_dim))


def _rotate(x, rope, interleaved):
    """The rotary embedding of x (B, T, heads, head_dim) by `rope` = (cos, sin, offset): with
    an int offset, token t of every row takes row t + offset of the (positions, head_dim / 2)
    tables; with None, the tables were gathered per token (B * T rows, in x's order) and x is
    seen as one sequence of B * T tokens."""
    cos, sin, offset = rope
    if offset is not None:
        return F.apply_rotary_emb(x, cos, sin, interleaved=interleaved, seqlen_offsets=offset)
    B, T = x.shape[:2]
    flat = x.reshape(1, B * T, *x.shape[2:])
    return F.apply_rotary_emb(flat, cos, sin, interleaved=interleaved).view(x.shape)


class LlamaMLP(Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        h, m, b = cfg.hidden_size, cfg.intermediate_size, cfg.mlp_bias
        self.gate_proj = Linear(h, m, bias=b)
        self.up_proj = Linear(h, m, bias=b)
        self.down_proj = Linear(m, h, bias=b)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def forward(self, x, rope, mask, causal, start, cache=None, layer=0):
        x = x + self.self_attn(self.input_layernorm(x), rope, mask, causal, start, cache, layer)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.embed_tokens = Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = ModuleList([LlamaDecoderLayer(cfg) for _ in range(cfg.num_hidden_layers)])
        self.norm = RMSNorm(cfg.hidden_size, eps=cfg.rms_norm_eps)

    def forward(self, input_ids, rope, mask, causal, start, cache=None):
        """Hidden states (B, T, hidden) of input_ids (B, T): `rope` (cos, sin, offset) as
        _rotate takes it, the attention `mask` and `causal` flag as causal_mask gives them,
        `start` the cache's length."""
        x = self.embed_tokens(input_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, rope, mask, causal, start, cache, i)
        return self.norm(x)


class LlamaForCausalLM(GenerationMixin, Module):
    """A Llama-family causal language model: `forward(input_ids)` gives the logits,
    `generate` continues prompts (greedy or sampled, with a KV cache)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self._rope = None

    def _cos_sin(self, n):
        """cos and sin of every position below n, (n, head_dim / 2) float32 (computed in
        float64 on the host, grown by doubling as longer sequences come)."""
        if self._rope is None or self._rope[0] < n:
            cfg = self.config
            m = max(n, cfg.max_position_embeddings, 1 if self._rope is None else 2 * self._rope[0])
            inv = 1.0 / cfg.rope_theta ** (
                np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim
            )
            if cfg.rope_freq_factors is not None:
                inv = inv / np.asarray(cfg.rope_freq_factors, np.float64)
            ang = np.outer(np.arange(m, dtype=np.float64), inv)
            cos = C.tensor(np.cos(ang).astype(np.float32))
            sin = C.tensor(np.sin(ang).astype(np.float32))
            self._rope = (m, cos, sin)
        return self._rope[1], self._rope[2]

    supports_static_cache = True  # (generate(compile=True): forward takes cache_position)

    def forward(
        self,
        input_ids,
        cache: KVCache | None = None,
        attention_mask=None,
        position_ids=None,
        cache_position=None,
    ):
        """Logits (batch, tokens, vocab) of `input_ids` (batch, tokens), as transformers'
        LlamaForCausalLM: with a `cache`, the tokens continue those it holds and it keeps them;
        `attention_mask` (batch, cached + tokens; 1 keep, 0 pad) masks the keys at 0 (a query
        with none left, a left pad's, gives values nobody should read); `position_ids` (batch
        or 1, tokens) place each token for the rotary embedding, by default cache.length
        onwards (transformers' default too, mask or not: generate passes the cumsum of the
        mask - 1 for left-padded prompts)."""
        if cache_position is not None:
            return self._static_forward(
                input_ids, cache, attention_mask, position_ids, cache_position
            )
        if input_ids.ndim != 2:
            raise ShapeError(
                f"pyrite: LlamaForCausalLM: input_ids must be (batch, tokens), got shape "
                f"{tuple(input_ids.shape)}"
            )
        B, T = input_ids.shape
        start = 0 if cache is None else cache.length
        if cache is not None and start + T > cache.max_length:
            raise ValueError(
                f"pyrite: LlamaForCausalLM: {start} cached + {T} new tokens exceed the cache's "
                f"{cache.max_length} positions"
            )
        if attention_mask is not None and not isinstance(attention_mask, Tensor):
            attention_mask = C.tensor(np.asarray(attention_mask))
        mask, causal = causal_mask(attention_mask, B, T, start, "LlamaForCausalLM")
        rope = self._rope_for(position_ids, B, T, start)
        h = self.model(input_ids, rope, mask, causal, start, cache)
        if cache is not None:
            cache.length = start + T
        return self.lm_head(h)

    def _static_forward(self, input_ids, cache, attention_mask, position_ids, cache_position):
        """forward's static form (one token a row, shapes that never change, so a compiled
        step replays): its keys and values written at the device position `cache_position`
        (1,), the attention over the whole cache under `attention_mask` (B, max_length; the
        keys written so far), the rotary embedding at `position_ids` (B, 1)."""
        B, T = input_ids.shape
        mask = static_step_mask(cache, T, attention_mask, position_ids, B, "LlamaForCausalLM")
        self._cos_sin(cache.max_length)  # (the tables cover every position the cache has)
        rope = self._rope_for(position_ids, B, T, 0)
        return self.lm_head(self.model(input_ids, rope, mask, False, cache_position, cache))

    def _rope_for(self, position_ids, B, T, start):
        """(cos, sin, offset) for _rotate. Positions start.. of every row: the tables and an
        int offset. Given position_ids: the tables' rows gathered per token ((B * T, head_dim
        / 2), offset None), which is exact for any positions (a row's need not be consecutive,
        nor the same across rows) and costs one gather for all layers; apply_rotary_emb's
        (batch,) seqlen_offsets would cover left padding only (t + offset[b] is consecutive),
        and would take pads' rows below 0."""
        if position_ids is None:
            cos, sin = self._cos_sin(start + T)
            return cos, sin, start
        if not isinstance(position_ids, Tensor):
            position_ids = C.tensor(np.asarray(position_ids, np.int32))
        if position_ids.ndim == 1:
            position_ids = position_ids[None]
        if (
            position_ids.ndim != 2
            or position_ids.shape[1] != T
            or position_ids.shape[0] not in (1, B)
        ):
            raise ShapeError(
                f"pyrite: LlamaForCausalLM: position_ids of shape {tuple(position_ids.shape)} "
                f"for input_ids of shape {(B, T)} (expected ({B} or 1, {T}))"
            )
        # the tables must reach the largest position: known without a readback for positions
        # uploaded or made by arithmetic on known ones (ops/ranges.py), else read back once
        known = ranges.known_bounds(position_ids)
        hi = known[1] if known is not None else int(position_ids.max())
        cos, sin = self._cos_sin(max(hi + 1, start + T))
        rows = position_ids.expand(B, T).reshape(-1).long()
        return cos[rows], sin[rows], None

    # ---- generation (GenerationMixin.generate) --------------------------------------------
    def get_input_embeddings(self):
        """The token embedding (transformers' name; generate's cache takes its dtype)."""
        return self.model.embed_tokens

    # ---- loading -------------------------------------------------------------------------
    @classmethod
    def from_pretrained(cls, path, dtype=None) -> LlamaForCausalLM:
        """A model from a local Hugging Face checkpoint folder: config.json and its
        model*.safetensors files (sharded ones too). No download: `path` is a folder."""
        config, sd = read_folder(path)
        cfg = LlamaConfig.from_dict(config)
        model = cls(cfg)
        sd = {k: v for k, v in sd.items() if not k.endswith("rotary_emb.inv_freq")}
        tied = ("lm_head.weight",) if cfg.tie_word_embeddings else ()
        load_checkpoint(model, sd, "model.", tied=tied)
        return model if dtype is None else model.to(dtype)

    @classmethod
    def from_gguf(cls, gguf, *, dequantize: bool = False) -> LlamaForCausalLM:
        """A model from a llama.cpp GGUF file (a path, or what `pyrite.io.load_gguf` read):
        architectures "llama" (Llama, Mistral, TinyLlama, SmolLM, ...), "qwen2" and "qwen3". Packed
        Q8_0 / Q4_0 / Q4_1 projections stay packed (`QuantizedLinear`) unless `dequantize`;
        a packed token embedding is dequantized for the lookup (and kept packed for a tied
        output projection)."""
        from ..io import load_gguf
        from ..io._gguf import GGUFFile
        from ..ops.quantized import QuantizedWeight

        g = gguf if isinstance(gguf, GGUFFile) else load_gguf(gguf, dequantize=dequantize)
        arch, m, t = g.architecture, g.metadata, g.tensors
        if arch not in _ARCHS:
            raise NotImplementedError(
                f"pyrite: from_gguf: architecture {arch!r} is not supported ({', '.join(_ARCHS)} are)"
            )

        def meta(key, default=None):
            return m.get(f"{arch}.{key}", default)

        emb = t["token_embd.weight"]
        heads = meta("attention.head_count")
        factors = t.get("rope_freqs.weight")
        cfg = LlamaConfig(
            vocab_size=int(emb.shape[0]),
            hidden_size=int(meta("embedding_length")),
            intermediate_size=int(meta("feed_forward_length")),
            num_hidden_layers=int(meta("block_count")),
            num_attention_heads=int(heads),
            num_key_value_heads=int(meta("attention.head_count_kv", heads)),
            head_dim=meta("attention.key_length"),
            rms_norm_eps=float(meta("attention.layer_norm_rms_epsilon", 1e-6)),
            rope_theta=float(meta("rope.freq_base", 10000.0)),
            max_position_embeddings=int(meta("context_length", 2048)),
            tie_word_embeddings="output.weight" not in t,
            attention_bias="blk.0.attn_output.bias" in t,
            qkv_bias="blk.0.attn_q.bias" in t,
            qk_norm="blk.0.attn_q_norm.weight" in t,
            mlp_bias="blk.0.ffn_up.bias" in t,
            rope_interleaved=arch == "llama",  # (llama.cpp: LLAMA_ROPE_TYPE_NORM; qwen NEOX)
            rope_freq_factors=None if factors is None else factors.numpy().tolist(),
            bos_token_id=m.get("tokenizer.ggml.bos_token_id"),
            eos_token_id=m.get("tokenizer.ggml.eos_token_id"),
        )
        model = cls(cfg)
        dense = {}

        def put(module_path, name, packed_ok=True):
            w = t[name]
            parent, attr = (
                model.get_submodule(module_path.rpartition(".")[0]),
                module_path.rpartition(".")[2],
            )
            layer = getattr(parent, attr)
            if isinstance(w, QuantizedWeight) and packed_ok and isinstance(layer, Linear):
                bias = t.get(name.replace(".weight", ".bias"))
                setattr(parent, attr, QuantizedLinear(w, bias))
                return
            dense[f"{module_path}.weight"] = w.dequantize() if isinstance(w, QuantizedWeight) else w
            bname = name.replace(".weight", ".bias")
            if bname in t and isinstance(layer, Linear):
                dense[f"{module_path}.bias"] = t[bname]

        dense["model.embed_tokens.weight"] = (
            emb.dequantize() if isinstance(emb, QuantizedWeight) else emb
        )
        for i in range(cfg.num_hidden_layers):
            p, b = f"model.layers.{i}", f"blk.{i}"
            for mod, name in (
                ("self_attn.q_proj", "attn_q"),
                ("self_attn.k_proj", "attn_k"),
                ("self_attn.v_proj", "attn_v"),
                ("self_attn.o_proj", "attn_output"),
                ("mlp.gate_proj", "ffn_gate"),
                ("mlp.up_proj", "ffn_up"),
                ("mlp.down_proj", "ffn_down"),
            ):
                put(f"{p}.{mod}", f"{b}.{name}.weight")
            dense[f"{p}.input_layernorm.weight"] = t[f"{b}.attn_norm.weight"]
            dense[f"{p}.post_attention_layernorm.weight"] = t[f"{b}.ffn_norm.weight"]
            if cfg.qk_norm:
                dense[f"{p}.self_attn.q_norm.weight"] = t[f"{b}.attn_q_norm.weight"]
                dense[f"{p}.self_attn.k_norm.weight"] = t[f"{b}.attn_k_norm.weight"]
        dense["model.norm.weight"] = t["output_norm.weight"]
        if cfg.tie_word_embeddings:
            if isinstance(emb, QuantizedWeight):
                model.lm_head = QuantizedLinear(emb)
        else:
            put("lm_head", "output.weight")
        missing, unexpected = model.load_state_dict(
            {k: v.float() if v.dtype is not D.float32 else v for k, v in dense.items()},
            strict=False,
        )
        left = [k for k in missing if not (cfg.tie_word_embeddings and k == "lm_head.weight")]
        left = [k for k in left if not _replaced(model, k)]
        if left or unexpected:
            raise ValueError(
                f"pyrite: from_gguf: the file's tensors do not fill the model: missing {left}, "
                f"unexpected {unexpected}"
            )
        return model


def _replaced(model, key) -> bool:
    """Whether state-dict key `key` belonged to a Linear that from_gguf replaced by a
    QuantizedLinear (whose buffers are named otherwise)."""
    mod = model.get_submodule(key.rpartition(".")[0])
    return isinstance(mod, QuantizedLinear)
