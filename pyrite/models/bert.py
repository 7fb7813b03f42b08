"""BERT (and the checkpoints shaped like it: bert-base/large, MiniLM, many sentence encoders),
built from `pyrite.nn`: the encoder (`BertModel`), a sequence classifier
(`BertForSequenceClassification`) and the masked language model (`BertForMaskedLM`).

    model = BertForSequenceClassification.from_pretrained("path/to/bert/")  # config + safetensors
    logits = model(ids, attention_mask=mask)                                # (batch, num_labels)

Parameter names are Hugging Face's (`bert.encoder.layer.0.attention.self.query.weight`, ...),
so a `transformers` state dict loads with `load_state_dict`, and the forward gives what
`transformers`' classes give for the same weights (tests/test_models_gpt2_bert46.py).

A layer (post-norm): a = LayerNorm(x + attention.output.dense(attention(query(x), key(x),
value(x)))), then LayerNorm(a + output.dense(act(intermediate.dense(a)))). The embeddings sum
word, position and token-type vectors, then LayerNorm. `attention_mask` (batch, tokens) is
transformers': 1 keep, 0 pad; padded keys are masked out of every query's attention.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from .. import dtypes as D
from ..errors import ShapeError
from ..nn import functional as F
from ..nn.module import Module
from ..nn.modules.container import ModuleList
from ..nn.modules.dropout import Dropout
from ..nn.modules.linear import Linear
from ..nn.modules.norm import LayerNorm
from ..nn.modules.sparse import Embedding
from ..ops import creation as C
from ._hf import activation, load_checkpoint, read_folder


@dataclass
class BertConfig:
    """BERT's hyperparameters, in Hugging Face's `config.json` names (`from_dict` reads one;
    num_labels comes from id2label when that is given)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    classifier_dropout: float | None = None
    num_labels: int = 2
    problem_type: str | None = None
    tie_word_embeddings: bool = True
    position_embedding_type: str = "absolute"

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"pyrite: BertConfig: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.position_embedding_type != "absolute":
            raise NotImplementedError(
                f"pyrite: BertConfig: position_embedding_type {self.position_embedding_type!r} "
                "is not supported (absolute is)"
            )
        activation(self.hidden_act)

    @classmethod
    def from_dict(cls, d: dict) -> BertConfig:
        """A config from Hugging Face's config.json contents; unknown keys are ignored."""
        if d.get("is_decoder") or d.get("add_cross_attention"):
            raise NotImplementedError(
                "pyrite: BertConfig: BERT as a decoder (is_decoder, cross-attention) is not "
                "supported"
            )
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if d.get("id2label"):
            kw["num_labels"] = len(d["id2label"])
        return cls(**kw)


class BertEmbeddings(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word_embeddings = Embedding(cfg.vocab_size, cfg.hidden_size, cfg.pad_token_id)
        self.position_embeddings = Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout_prob)
        self.max_positions = cfg.max_position_embeddings

    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        B, T = input_ids.shape
        if position_ids is None:
            if T > self.max_positions:
                raise ValueError(
                    f"pyrite: BERT: {T} tokens exceed max_position_embeddings={self.max_positions}"
                )
            position_ids = C.arange(T, dtype=D.int32)[None]
        if token_type_ids is None:
            token_type_ids = C.zeros((1, T), dtype=D.int32)
        x = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        h = cfg.hidden_size
        self.num_heads, self.head_dim = cfg.num_attention_heads, h // cfg.num_attention_heads
        self.query = Linear(h, h)
        self.key = Linear(h, h)
        self.value = Linear(h, h)
        self.dropout = Dropout(cfg.attention_probs_dropout_prob)

    def forward(self, x, mask):
        B, T, H = x.shape

        def heads(t):  # (B, T, H) -> (B, nh, T, hs)
            return t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

        p = self.dropout.p if self.training else 0.0
        y = F.scaled_dot_product_attention(
            heads(self.query(x)), heads(self.key(x)), heads(self.value(x)), mask, p
        )
        return y.transpose(1, 2).reshape(B, T, H)


class BertSelfOutput(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.hidden_size)
        self.LayerNorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, y, x):
        return self.LayerNorm(self.dropout(self.dense(y)) + x)


class BertAttention(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, x, mask):
        return self.output(self.self(x, mask), x)


class BertIntermediate(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.intermediate_size)
        self.act = activation(cfg.hidden_act)

    def forward(self, x):
        return self.act(self.dense(x))


class BertOutput(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.intermediate_size, cfg.hidden_size)
        self.LayerNorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, y, x):
        return self.LayerNorm(self.dropout(self.dense(y)) + x)


class BertLayer(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertOutput(cfg)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.layer = ModuleList([BertLayer(cfg) for _ in range(cfg.num_hidden_layers)])

    def forward(self, x, mask):
        for layer in self.layer:
            x = layer(x, mask)
        return x


class BertPooler(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x):
        return F.tanh(self.dense(x[:, 0]))  # the first token's ([CLS]) state


class BertModel(Module):
    """The encoder: `forward` gives (last hidden states (batch, tokens, hidden), pooled
    (batch, hidden) or None without a pooler), transformers' tuple."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None):
        """`input_ids` (batch, tokens); `attention_mask` (batch, tokens; 1 keep, 0 pad);
        `token_type_ids` (segment A = 0, B = 1; default 0) and `position_ids` (default
        0..tokens-1) broadcast against them."""
        if input_ids.ndim != 2:
            raise ShapeError(
                f"pyrite: BertModel: input_ids must be (batch, tokens), got shape "
                f"{tuple(input_ids.shape)}"
            )
        B, T = input_ids.shape
        mask = None
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (B, T):
                raise ShapeError(
                    f"pyrite: BertModel: attention_mask of shape {tuple(attention_mask.shape)} "
                    f"for input_ids of shape {(B, T)}"
                )
            mask = (attention_mask != 0)[:, None, None, :]  # (B, 1, 1, T): keys kept
        x = self.embeddings(input_ids, token_type_ids, position_ids)
        x = self.encoder(x, mask)
        return x, (None if self.pooler is None else self.pooler(x))

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        """A model from a local Hugging Face checkpoint folder (config.json + safetensors);
        a head model's file (BertForMaskedLM's, ...) gives its encoder (a file without the
        pooler leaves it as initialised, with a warning). No download."""
        return _from_pretrained(cls, path, dtype, optional=("pooler.",))


def _classification_loss(cfg, logits, labels):
    """transformers' choice: regression (one label), single-label (integer labels) or
    multi-label (float labels) classification, unless config.problem_type names one."""
    kind = cfg.problem_type
    if kind is None:
        if cfg.num_labels == 1:
            kind = "regression"
        elif not labels.dtype.is_floating_point:
            kind = "single_label_classification"
        else:
            kind = "multi_label_classification"
    if kind == "regression":
        if cfg.num_labels == 1:
            return F.mse_loss(logits.squeeze(), labels.squeeze().float())
        return F.mse_loss(logits, labels.float())
    if kind == "single_label_classification":
        return F.cross_entropy(logits.reshape(-1, cfg.num_labels), labels.reshape(-1).long())
    return F.binary_cross_entropy_with_logits(logits, labels.float())


class BertForSequenceClassification(Module):
    """BERT with a classifier on its pooled [CLS] state: `forward` gives the logits (batch,
    num_labels), or (loss, logits) given `labels`."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        p = config.classifier_dropout
        self.dropout = Dropout(config.hidden_dropout_prob if p is None else p)
        self.classifier = Linear(config.hidden_size, config.num_labels)

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, labels=None
    ):
        _, pooled = self.bert(input_ids, attention_mask, token_type_ids, position_ids)
        logits = self.classifier(self.dropout(pooled))
        if labels is None:
            return logits
        return _classification_loss(self.config, logits, labels), logits

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        """A model from a local Hugging Face checkpoint folder. A checkpoint without a
        classifier (a pretrained encoder) leaves it as initialised, for fine-tuning, as
        transformers does. No download."""
        return _from_pretrained(cls, path, dtype, optional=("classifier.", "bert.pooler."))


class BertPredictionHeadTransform(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.dense = Linear(cfg.hidden_size, cfg.hidden_size)
        self.act = activation(cfg.hidden_act)
        self.LayerNorm = LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)

    def forward(self, x):
        return self.LayerNorm(self.act(self.dense(x)))


class BertLMPredictionHead(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg)
        self.decoder = Linear(cfg.hidden_size, cfg.vocab_size)
        self.bias = self.decoder.bias  # (transformers' name for the decoder's bias too)

    def forward(self, x):
        return self.decoder(self.transform(x))


class BertOnlyMLMHead(Module):
    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg)

    def forward(self, x):
        return self.predictions(x)


class BertForMaskedLM(Module):
    """BERT with its masked-language-model head (the decoder tied to the word embeddings):
    `forward` gives the logits (batch, tokens, vocab), or (loss, logits) given `labels`
    (batch, tokens; -100 where no token is predicted)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        if config.tie_word_embeddings:
            self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, position_ids=None, labels=None
    ):
        h, _ = self.bert(input_ids, attention_mask, token_type_ids, position_ids)
        logits = self.cls(h)
        if labels is None:
            return logits
        V = self.config.vocab_size
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1).long(), ignore_index=-100)
        return loss, logits

    @classmethod
    def from_pretrained(cls, path, dtype=None):
        """A model from a local Hugging Face checkpoint folder (BertForMaskedLM's or
        BertForPreTraining's). No download."""
        return _from_pretrained(cls, path, dtype)


def _from_pretrained(cls, path, dtype, optional=()):
    d, sd = read_folder(path)
    cfg = BertConfig.from_dict(d)
    model = cls(cfg)
    tied = ["cls.predictions.decoder.bias"]
    if cfg.tie_word_embeddings:
        tied.append("cls.predictions.decoder.weight")
    # the heads of a file that the model has no place for, and transformers' old buffers
    ignored = ("cls.", "classifier.", "pooler.", "bert.pooler.")
    ignored += ("bert.embeddings.position_ids", "embeddings.position_ids")
    load_checkpoint(model, sd, "bert.", tied=tuple(tied), optional=optional, ignored=ignored)
    model.eval()  # (as transformers: dropout off until train())
    return model if dtype is None else model.to(dtype)
