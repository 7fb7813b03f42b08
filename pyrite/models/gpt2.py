"""GPT-2 (OpenAI's, and the models shaped like it: DistilGPT2, DialoGPT, ...), built from
`pyrite.nn`, with a KV cache and `generate`.

    model = GPT2LMHeadModel.from_pretrained("path/to/gpt2/")     # config.json + safetensors
    out = model.generate(pr.tensor([[464, 2068, 7586]]), max_new_tokens=32)

Parameter names are Hugging Face's (`transformer.h.0.attn.c_attn.weight`, ...), so a
`transformers` state dict loads with `load_state_dict`, and the forward gives what
`transformers.GPT2LMHeadModel` gives for the same weights (tests/test_models_gpt2_bert46.py).
The projections are HF's `Conv1D`: weights stored (in, out), used as stored (x @ W + b).

A block (pre-norm): x + c_proj(attention(split(c_attn(ln_1(x))))), then
x + mlp.c_proj(act(mlp.c_fc(ln_2(x)))); learned position embeddings (wpe) added to the token
embeddings (wte); lm_head tied to wte. A padded batch takes an `attention_mask` (batch, keys;
1 keep, 0 pad) as transformers': keys at 0 are masked, queries at padded positions give values
nobody should read.

What the Hugging Face families share beyond generation is in _hf.py.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import dtypes as D
from ..errors import ShapeError
from ..nn import functional as F
from ..nn.module import Module, Parameter
from ..nn.modules.container import ModuleList
from ..nn.modules.dropout import Dropout
from ..nn.modules.linear import Linear
from ..nn.modules.norm import LayerNorm
from ..nn.modules.sparse import Embedding
from ..ops import creation as C
from ._generate import GenerationMixin, KVCache, causal_mask, static_step_mask
from ._hf import activation, load_checkpoint, read_folder


# ---- GPT-2 ------------------------------------------------------------------------------------
@dataclass
class GPT2Config:
    """GPT-2's hyperparameters, in Hugging Face's `config.json` names (n_embd, n_layer, ...;
    `from_dict` reads the aliases hidden_size, num_hidden_layers, ... too)."""

    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    n_inner: int | None = None
    activation_function: str = "gelu_new"
    resid_pdrop: float = 0.1
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    # (the same sum in float32, scaled before the product: float32 throughout here already)
    reorder_and_upcast_attn: bool = False
    tie_word_embeddings: bool = True
    bos_token_id: int | None = 50256
    eos_token_id: int | list | None = 50256
    pad_token_id: int | None = None

    _ALIASES = {
        "hidden_size": "n_embd",
        "max_position_embeddings": "n_positions",
        "num_attention_heads": "n_head",
        "num_hidden_layers": "n_layer",
    }

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(
                f"pyrite: GPT2Config: n_embd {self.n_embd} is not a multiple of n_head {self.n_head}"
            )
        activation(self.activation_function)

    @classmethod
    def from_dict(cls, d: dict) -> GPT2Config:
        """A config from Hugging Face's config.json contents; unknown keys are ignored."""
        if d.get("add_cross_attention"):
            raise NotImplementedError("pyrite: GPT2Config: cross-attention is not supported")
        names = {f.name for f in fields(cls)}
        kw = {cls._ALIASES.get(k, k): v for k, v in d.items()}
        return cls(**{k: v for k, v in kw.items() if k in names})

    # the names the KV cache and generate read (Llama's)
    hidden_size = property(lambda self: self.n_embd)
    num_hidden_layers = property(lambda self: self.n_layer)
    num_attention_heads = property(lambda self: self.n_head)
    num_key_value_heads = property(lambda self: self.n_head)
    head_dim = property(lambda self: self.n_embd // self.n_head)
    max_position_embeddings = property(lambda self: self.n_positions)


class Conv1D(Module):
    """Hugging Face's Conv1D: a linear layer whose weight is stored (in, out): x @ W + b."""

    def __init__(self, nf: int, nx: int):
        super().__init__()
        self.nf = nf
        self.weight = Parameter(C.empty(nx, nf))
        self.bias = Parameter(C.zeros(nf))
        self.reset_parameters()

    def reset_parameters(self):
        from ..nn import init

        init.normal_(self.weight, std=0.02)
        init.zeros_(self.bias)

    def forward(self, x):
        return F.linear(x, self.weight.t(), self.bias)  # (.., nx) @ (nx, nf) + (nf)

    def extra_repr(self):
        return f"nf={self.nf}, nx={self.weight.shape[0]}"


class GPT2Attention(Module):
    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.num_heads, self.head_dim = cfg.n_head, cfg.head_dim
        self.c_attn = Conv1D(3 * cfg.n_embd, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, cfg.n_embd)
        self.attn_dropout = Dropout(cfg.attn_pdrop)
        self.resid_dropout = Dropout(cfg.resid_pdrop)
        self.scaling = self.head_dim**-0.5 if cfg.scale_attn_weights else 1.0
        if cfg.scale_attn_by_inverse_layer_idx:
            self.scaling /= float(layer_idx + 1)
        self.layer_idx = layer_idx

    def forward(self, x, mask, causal, start, cache=None):
        B, T, Cn = x.shape
        qkv = self.c_attn(x).view(B, T, 3, self.num_heads, self.head_dim)
        # (B, nh, T, hs) each
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        if cache is not None:
            k, v = cache.update(self.layer_idx, k, v, start)
        p = self.attn_dropout.p if self.training else 0.0
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scaling
        )
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, Cn)))


class GPT2MLP(Module):
    def __init__(self, cfg: GPT2Config):
        super().__init__()
        inner = cfg.n_inner if cfg.n_inner is not None else 4 * cfg.n_embd
        self.c_fc = Conv1D(inner, cfg.n_embd)
        self.c_proj = Conv1D(cfg.n_embd, inner)
        self.act = activation(cfg.activation_function)
        self.dropout = Dropout(cfg.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(Module):
    def __init__(self, cfg: GPT2Config, layer_idx: int):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = GPT2Attention(cfg, layer_idx)
        self.ln_2 = LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x, mask, causal, start, cache=None):
        x = x + self.attn(self.ln_1(x), mask, causal, start, cache)
        return x + self.mlp(self.ln_2(x))


class GPT2Model(Module):
    """The stack: embeddings, blocks, final LayerNorm; forward gives the last hidden states
    (batch, tokens, n_embd)."""

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.wte = Embedding(config.vocab_size, config.n_embd)
        self.wpe = Embedding(config.n_positions, config.n_embd)
        self.drop = Dropout(config.embd_pdrop)
        self.h = ModuleList([GPT2Block(config, i) for i in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

    def forward(
        self,
        input_ids,
        cache=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        cache_position=None,
    ):
        """Hidden states of `input_ids` (batch, tokens). With a `cache`, the tokens continue
        those it holds and it keeps them; `attention_mask` (batch, cached + tokens) then covers
        the cached positions too. `position_ids` default to cache.length onwards.
        `cache_position` (a device int tensor (1,)): the static decode step (one token a row,
        written there; the attention over the whole cache under `attention_mask` (batch,
        max_length); `position_ids` (batch, 1) given), whose shapes never change, so
        generate(compile=True) replays it (_generate.StaticDecoding)."""
        if input_ids.ndim != 2:
            raise ShapeError(
                f"pyrite: GPT2Model: input_ids must be (batch, tokens), got shape "
                f"{tuple(input_ids.shape)}"
            )
        B, T = input_ids.shape
        if cache_position is not None:
            mask = static_step_mask(cache, T, attention_mask, position_ids, B, "GPT2Model")
            x = self.drop(self.wte(input_ids) + self.wpe(position_ids))
            for block in self.h:
                x = block(x, mask, False, cache_position, cache)
            return self.ln_f(x)
        start = 0 if cache is None else cache.length
        if cache is not None and start + T > cache.max_length:
            raise ValueError(
                f"pyrite: GPT2Model: {start} cached + {T} new tokens exceed the cache's "
                f"{cache.max_length} positions"
            )
        if position_ids is None:
            if start + T > self.config.n_positions:
                raise ValueError(
                    f"pyrite: GPT2Model: {start + T} positions exceed the model's "
                    f"n_positions={self.config.n_positions}"
                )
            position_ids = C.arange(start, start + T, dtype=D.int32)[None]
        x = self.wte(input_ids) + self.wpe(position_ids)
        if token_type_ids is not None:
            x = x + self.wte(token_type_ids)
        x = self.drop(x)
        mask, causal = causal_mask(attention_mask, B, T, start, "GPT-2")
        for block in self.h:
            x = block(x, mask, causal, start, cache)
        if cache is not None:
            cache.length = start + T
        return self.ln_f(x)

    @classmethod
    def from_pretrained(cls, path, dtype=None) -> GPT2Model:
        """The stack from a local Hugging Face checkpoint folder (GPT2Model's or
        GPT2LMHeadModel's). No download."""
        return _from_pretrained(cls, path, dtype)


class GPT2LMHeadModel(GenerationMixin, Module):
    """GPT-2 with its language-model head (tied to the token embeddings): `forward` gives the
    logits, `generate` continues prompts (greedy or sampled, with a KV cache; left-padded
    prompts with an attention_mask)."""

    supports_static_cache = True  # (generate(compile=True): forward takes cache_position)

    def __init__(self, config: GPT2Config):
        super().__init__()
        self.config = config
        self.transformer = GPT2Model(config)
        self.lm_head = Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.transformer.wte.weight

    def forward(
        self,
        input_ids,
        cache: KVCache | None = None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        labels=None,
        cache_position=None,
    ):
        """Logits (batch, tokens, vocab) of `input_ids` (batch, tokens) (arguments as
        GPT2Model's). Given `labels` (batch, tokens; -100 ignored), (loss, logits): the mean
        cross-entropy of each position's logits against the next position's label."""
        h = self.transformer(
            input_ids, cache, attention_mask, token_type_ids, position_ids, cache_position
        )
        logits = self.lm_head(h)
        if labels is None:
            return logits
        V = logits.shape[-1]
        loss = F.cross_entropy(
            logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1).long(), ignore_index=-100
        )
        return loss, logits

    def get_input_embeddings(self):
        """The token embedding (transformers' name; generate's cache takes its dtype)."""
        return self.transformer.wte

    @classmethod
    def from_pretrained(cls, path, dtype=None) -> GPT2LMHeadModel:
        """A model from a local Hugging Face checkpoint folder: config.json and its
        model*.safetensors files (GPT2LMHeadModel's or GPT2Model's; the old files' causal-mask
        buffers `attn.bias` / `attn.masked_bias` are skipped). No download."""
        return _from_pretrained(cls, path, dtype)


def _from_pretrained(cls, path, dtype):
    d, sd = read_folder(path)
    cfg = GPT2Config.from_dict(d)
    model = cls(cfg)
    sd = {k: v for k, v in sd.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    tied = ("lm_head.weight",) if cfg.tie_word_embeddings else ()
    load_checkpoint(model, sd, "transformer.", tied=tied, ignored=("lm_head.",))
    model.eval()  # (as transformers: dropout off until train())
    return model if dtype is None else model.to(dtype)
