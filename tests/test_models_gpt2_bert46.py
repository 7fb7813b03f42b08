"""pyrite.models' GPT-2 and BERT against transformers' GPT2LMHeadModel, BertModel,
BertForSequenceClassification and BertForMaskedLM (CPU, random tiny configs of awkward sizes):
logits and hidden states, padded batches with attention masks, greedy generation token for
token (prompts of equal length and left-padded ones), the KV cache, loading from a Hugging Face
folder (save_pretrained), and the gradients of a loss (so fine-tuning is right).

Tolerance (the Llama tests' rule): pyrite computes in float32; the reference is the transformers
model in float64 on the same weights, and pyrite may differ from it by 4x transformers' own
float32 distance from it plus 64 float32 ulps of the values' scale."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr
from pyrite.errors import ShapeError
from pyrite.models import (
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    GPT2Model,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from tests.test_models_llama46 import check_cache_in_chunks  # noqa: E402


def _within(got, t32, t64, where=None):
    """|got - t64| <= 4·|t32 - t64| + 64·u·scale, over `where` (a bool mask) if given."""
    got, t32, t64 = (np.asarray(a, np.float64) for a in (got, t32, t64))
    if where is not None:
        got, t32, t64 = got[where], t32[where], t64[where]
    bound = 4 * np.abs(t32 - t64).max() + 64 * 2**-24 * np.abs(t64).max()
    err = np.abs(got - t64).max()
    assert err <= bound, (err, bound)


def _both(hf, fn):
    """fn(hf) in float32 and in float64 (numpy float64 arrays, or tuples of them)."""
    with torch.no_grad():
        t32 = fn(hf)
        t64 = fn(hf.double())
        hf.float()
    return t32, t64


def _randomize(hf, scale=0.3):
    """transformers starts biases at 0 and norms at 1: make them count."""
    with torch.no_grad():
        for n, p in hf.named_parameters():
            if n.endswith("bias") or "ln" in n or "LayerNorm" in n:
                p.add_(torch.randn_like(p) * scale)
    return hf.eval()


def _load(pm, hf, tied=()):
    sd = {k: v.detach().numpy() for k, v in hf.state_dict().items() if k not in tied}
    missing, unexpected = pm.load_state_dict(sd, strict=False)
    assert set(missing) <= set(tied) and not unexpected, (missing, unexpected)
    return pm.eval()


# ---- GPT-2 -------------------------------------------------------------------------------------
V = 61  # (vocabulary: a prime)


def _gpt2(seed=0, **over):
    torch.manual_seed(seed)
    base = dict(
        vocab_size=V,
        n_embd=36,
        n_layer=2,
        n_head=3,
        n_positions=40,
        initializer_range=0.2,  # (0.02 gives logits too flat for greedy decoding to mean much)
        bos_token_id=0,
        eos_token_id=0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    base.update(over)
    cfg = transformers.GPT2Config(**base)
    cfg._attn_implementation = "eager"
    return _randomize(transformers.GPT2LMHeadModel(cfg))


def _pyrite_gpt2(hf):
    pm = GPT2LMHeadModel(GPT2Config.from_dict(hf.config.to_dict()))
    tied = ("lm_head.weight",) if hf.config.tie_word_embeddings else ()
    return _load(pm, hf, tied)


def _hf_greedy(hf, ids, n, mask=None):
    t = torch.tensor(ids)
    m = torch.ones_like(t) if mask is None else torch.tensor(mask)
    with torch.no_grad():
        return hf.generate(
            t, attention_mask=m, max_new_tokens=n, do_sample=False, eos_token_id=None,
            pad_token_id=0,
        ).numpy()  # fmt: skip


def _check_head_training(hf, pm, names, ids, mask, types, labels):
    """A BERT head's loss, logits and the gradients of `names` in train mode (dropout 0):
    pyrite against transformers float32 and float64 on the same inputs (`_within`)."""

    def run(m):
        m.train()
        m.zero_grad()
        out = m(
            torch.tensor(ids), attention_mask=torch.tensor(mask),
            token_type_ids=torch.tensor(types), labels=torch.tensor(labels),
        )  # fmt: skip
        out.loss.backward()
        params = dict(m.named_parameters())
        grads = [params[n].grad.numpy().astype(np.float64) for n in names]
        return out.logits.detach().numpy().astype(np.float64), out.loss.item(), grads

    with torch.enable_grad():
        (o32, l32, g32), (o64, l64, g64) = run(hf), run(hf.double())
    hf.float()
    pm.train()
    loss, logits = pm(pr.tensor(ids), pr.tensor(mask), pr.tensor(types), labels=pr.tensor(labels))
    loss.backward()
    _within(logits.numpy(), o32, o64)
    _within(loss.item(), l32, l64)
    params = dict(pm.named_parameters())
    for n, a, b in zip(names, g32, g64):
        _within(params[n].grad.numpy(), a, b)


@pytest.mark.parametrize(
    "over",
    [
        {},
        {"n_inner": 50, "activation_function": "gelu", "tie_word_embeddings": False},
        {
            "scale_attn_weights": False,
            "scale_attn_by_inverse_layer_idx": True,
            "activation_function": "relu",
            "layer_norm_epsilon": 1e-3,
            "n_head": 4,
        },
    ],
)
def test_gpt2_logits_and_greedy_generation_match_transformers(rng, over):
    hf = _gpt2(int(rng.integers(1 << 20)), **over)
    pm = _pyrite_gpt2(hf)
    assert (pm.lm_head.weight is pm.transformer.wte.weight) == hf.config.tie_word_embeddings
    ids = rng.integers(0, V, (2, 11))
    t32, t64 = _both(hf, lambda m: m(torch.tensor(ids)).logits.numpy().astype(np.float64))
    _within(pm(pr.tensor(ids)).numpy(), t32, t64)
    got = pm.generate(pr.tensor(ids), max_new_tokens=7, eos_token_id=-1).numpy()
    np.testing.assert_array_equal(got, _hf_greedy(hf, ids, 7))


def _padding(B, T, rng, side):
    """A (B, T) 0/1 mask: the first row full, the others with 1..T-2 pads on `side`."""
    mask = np.ones((B, T), np.int64)
    for b in range(1, B):
        n = int(rng.integers(1, T - 1))
        if side == "left":
            mask[b, :n] = 0
        else:
            mask[b, T - n :] = 0
    return mask


@pytest.mark.parametrize("side", ["left", "right"])
def test_gpt2_padded_batch_matches_transformers_where_tokens_are_kept(rng, side):
    hf = _gpt2(int(rng.integers(1 << 20)))
    pm = _pyrite_gpt2(hf)
    ids = rng.integers(1, V, (3, 11))
    mask = _padding(3, 11, rng, side)
    t32, t64 = _both(
        hf,
        lambda m: (
            m(torch.tensor(ids), attention_mask=torch.tensor(mask))
            .logits.numpy()
            .astype(np.float64)
        ),
    )
    got = pm(pr.tensor(ids), attention_mask=pr.tensor(mask)).numpy()
    _within(got, t32, t64, where=mask.astype(bool))  # (a padded query's values are arbitrary)
    if side == "left":  # generation continues left-padded prompts as transformers' does
        got = pm.generate(
            pr.tensor(ids), 6, attention_mask=pr.tensor(mask), eos_token_id=-1
        ).numpy()
        np.testing.assert_array_equal(got, _hf_greedy(hf, ids, 6, mask))


def test_gpt2_cache_in_chunks_gives_the_whole_forward(rng):
    pm = _pyrite_gpt2(_gpt2(3))
    check_cache_in_chunks(pm, pr.tensor(rng.integers(0, V, (2, 13))))
    with pytest.raises(ValueError, match="n_positions"):
        pm(pr.tensor(rng.integers(0, V, (1, 41))))


def test_gpt2_generate_shares_llama_s_options(rng):
    """generate is the Llama models' (pyrite/models/_generate.py): top_k=1 sampling is greedy,
    a seeded generator repeats itself, eos stops a sequence and pads it."""
    pm = _pyrite_gpt2(_gpt2(5))
    ids = pr.tensor(rng.integers(1, V, (2, 6)))
    greedy = pm.generate(ids, 6, eos_token_id=-1).numpy()
    got = pm.generate(ids, 6, do_sample=True, top_k=1, eos_token_id=-1).numpy()
    np.testing.assert_array_equal(got, greedy)
    a, b = (
        pm.generate(ids, 6, do_sample=True, top_p=0.9, generator=pr.Generator().manual_seed(7))
        for _ in range(2)
    )
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    eos = int(greedy[0, 7])  # the first row's second new token
    got = pm.generate(ids, 6, eos_token_id=eos, pad_token_id=V - 1).numpy()
    first = list(greedy[0, 6:]).index(eos)
    np.testing.assert_array_equal(got[0, : 6 + first + 1], greedy[0, : 6 + first + 1])
    assert (got[0, 6 + first + 1 :] == V - 1).all()
    with pytest.raises(ShapeError, match="attention_mask"):
        pm.generate(ids, 2, attention_mask=pr.ones((2, 5), dtype=pr.int32))


def test_llama_generate_takes_an_attention_mask():
    from pyrite.models import LlamaConfig, LlamaForCausalLM

    pm = LlamaForCausalLM(
        LlamaConfig(vocab_size=11, hidden_size=8, intermediate_size=12, num_hidden_layers=1,
                    num_attention_heads=2)
    )  # fmt: skip
    ids = pr.tensor([[1, 2, 3]])
    assert pm.generate(ids, 2, attention_mask=pr.ones((1, 3), dtype=pr.int32)).shape == (1, 5)
    # (a padded prompt generates too: tests/test_models_llama46.py checks it against transformers)
    assert pm.generate(ids, 2, attention_mask=pr.tensor([[0, 1, 1]])).shape == (1, 5)


def test_gpt2_from_pretrained_and_gradients_match_transformers(tmp_path, rng):
    """A save_pretrained folder loads (tied lm_head), and a language-model loss (labels with
    -100) and its gradients match transformers' in training mode without dropout."""
    hf = _gpt2(int(rng.integers(1 << 20)))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    pm = GPT2LMHeadModel.from_pretrained(tmp_path)
    assert pm.lm_head.weight is pm.transformer.wte.weight and not pm.training
    ids = rng.integers(0, V, (2, 9))
    labels = ids.copy()
    labels[1, 4:] = -100
    names = [
        "transformer.wte.weight",  # (tied: the lookup's gradient plus the head's)
        "transformer.wpe.weight",
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.1.mlp.c_fc.bias",
        "transformer.ln_f.weight",
    ]

    def run(m):
        m.train()
        m.zero_grad()
        out = m(torch.tensor(ids), labels=torch.tensor(labels))
        out.loss.backward()
        params = dict(m.named_parameters())
        return out.loss.item(), [params[n].grad.numpy().astype(np.float64) for n in names]

    with torch.enable_grad():
        (l32, g32), (l64, g64) = run(hf), run(hf.double())
    hf.float()
    pm.train()
    loss, logits = pm(pr.tensor(ids), labels=pr.tensor(labels))
    loss.backward()
    _within(loss.item(), l32, l64)
    params = dict(pm.named_parameters())
    for n, a, b in zip(names, g32, g64):
        _within(params[n].grad.numpy(), a, b)
    with pytest.raises(FileNotFoundError, match="config.json"):
        GPT2LMHeadModel.from_pretrained(tmp_path / "nothing")


# ---- BERT --------------------------------------------------------------------------------------
BV = 53


def _bert_config(**over):
    base = dict(
        vocab_size=BV,
        hidden_size=30,
        num_hidden_layers=2,
        num_attention_heads=5,
        intermediate_size=47,
        max_position_embeddings=31,
        type_vocab_size=3,
        num_labels=3,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        initializer_range=0.2,
    )
    base.update(over)
    cfg = transformers.BertConfig(**base)
    cfg._attn_implementation = "eager"
    return cfg


def _bert(cls, seed, **over):
    torch.manual_seed(seed)
    return _randomize(getattr(transformers, cls)(_bert_config(**over)))


def _inputs(rng, B=3, T=13):
    ids = rng.integers(1, BV, (B, T))
    types = rng.integers(0, 3, (B, T))
    return ids, types, _padding(B, T, rng, "right")


@pytest.mark.parametrize("over", [{}, {"hidden_act": "gelu_new", "layer_norm_eps": 1e-5}])
def test_bert_model_hidden_states_and_pooled_match_transformers(rng, over):
    hf = _bert("BertModel", int(rng.integers(1 << 20)), **over)
    pm = _load(BertModel(BertConfig.from_dict(hf.config.to_dict())), hf)
    ids, types, mask = _inputs(rng)

    def fwd(m):
        o = m(
            torch.tensor(ids), attention_mask=torch.tensor(mask), token_type_ids=torch.tensor(types)
        )
        return o.last_hidden_state.numpy().astype(np.float64), o.pooler_output.numpy().astype(
            np.float64
        )

    (h32, p32), (h64, p64) = _both(hf, fwd)
    h, pooled = pm(pr.tensor(ids), pr.tensor(mask), pr.tensor(types))
    # (a padded query still attends to the kept keys, in both: every position compares)
    _within(h.numpy(), h32, h64)
    _within(pooled.numpy(), p32, p64)


def test_bert_sequence_classification_logits_loss_and_gradients(tmp_path, rng):
    hf = _bert("BertForSequenceClassification", int(rng.integers(1 << 20)))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    pm = BertForSequenceClassification.from_pretrained(tmp_path)
    assert pm.config.num_labels == 3
    ids, types, mask = _inputs(rng)
    labels = rng.integers(0, 3, 3)
    names = [
        "bert.embeddings.word_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.1.output.LayerNorm.bias",
        "bert.pooler.dense.weight",
        "classifier.weight",
    ]
    _check_head_training(hf, pm, names, ids, mask, types, labels)


def test_bert_masked_lm_logits_loss_gradients_and_folder(tmp_path, rng):
    hf = _bert("BertForMaskedLM", int(rng.integers(1 << 20)))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    pm = BertForMaskedLM.from_pretrained(tmp_path)
    dec = pm.cls.predictions.decoder
    assert dec.weight is pm.bert.embeddings.word_embeddings.weight
    assert dec.bias is pm.cls.predictions.bias
    ids, types, mask = _inputs(rng)
    labels = np.where(rng.random(ids.shape) < 0.3, ids, -100)
    labels[0, 0] = ids[0, 0]
    names = [
        "bert.embeddings.word_embeddings.weight",  # (tied to the decoder)
        "cls.predictions.bias",
        "cls.predictions.transform.dense.weight",
        "bert.encoder.layer.1.attention.output.dense.weight",
    ]
    _check_head_training(hf, pm, names, ids, mask, types, labels)


def test_bert_folders_load_across_heads(tmp_path, rng):
    """A masked-LM folder gives a BertModel its encoder (the pooler, absent, is left as
    initialised with a warning), and a classifier the same with a new classifier."""
    hf = _bert("BertForMaskedLM", int(rng.integers(1 << 20)))
    hf.save_pretrained(tmp_path, safe_serialization=True)
    ids, types, mask = _inputs(rng)
    with pytest.warns(UserWarning, match="pooler"):
        pm = BertModel.from_pretrained(tmp_path)
    t32, t64 = _both(
        hf.bert,
        lambda m: m(
            torch.tensor(ids), attention_mask=torch.tensor(mask),
            token_type_ids=torch.tensor(types),
        ).last_hidden_state.numpy().astype(np.float64),
    )  # fmt: skip
    _within(pm(pr.tensor(ids), pr.tensor(mask), pr.tensor(types))[0].numpy(), t32, t64)
    with pytest.warns(UserWarning, match="classifier"):
        cls = BertForSequenceClassification.from_pretrained(tmp_path)
    assert cls(pr.tensor(ids), pr.tensor(mask)).shape == (3, 3)  # (id2label's 3)
    with pytest.raises(ShapeError, match="attention_mask"):
        pm(pr.tensor(ids), pr.tensor(mask[:, :5]))


@pytest.mark.parametrize("kind", ["regression", "multi_label_classification"])
def test_bert_classification_losses_follow_transformers_problem_type(rng, kind):
    n = 1 if kind == "regression" else 3
    hf = _bert("BertForSequenceClassification", int(rng.integers(1 << 20)), num_labels=n)
    pm = _load(BertForSequenceClassification(BertConfig.from_dict(hf.config.to_dict())), hf)
    ids, types, mask = _inputs(rng)
    labels = rng.random((3, n)).astype(np.float32)
    if kind == "regression":
        labels = labels[:, 0]
    l32, l64 = _both(
        hf,
        lambda m: m(
            torch.tensor(ids), attention_mask=torch.tensor(mask),
            labels=torch.tensor(labels).to(m.dtype),
        ).loss.item(),
    )  # fmt: skip
    loss, _ = pm(pr.tensor(ids), pr.tensor(mask), labels=pr.tensor(labels))
    _within(loss.item(), l32, l64)


def test_original_checkpoint_layouts_load(tmp_path, rng):
    """The hub's first files: GPT-2's keys without "transformer." and with the causal-mask
    buffers attn.bias / attn.masked_bias (openai-community/gpt2), BERT's LayerNorm.gamma /
    .beta, position_ids buffer and next-sentence head (a BertForPreTraining file)."""
    from safetensors.torch import save_file

    hf = _gpt2(int(rng.integers(1 << 20)))
    sd = {k: v.contiguous() for k, v in hf.transformer.state_dict().items()}
    for i in range(hf.config.n_layer):
        sd[f"h.{i}.attn.bias"] = torch.ones(1, 1, 40, 40).tril()
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    (tmp_path / "g").mkdir()
    save_file(sd, str(tmp_path / "g" / "model.safetensors"))
    hf.config.to_json_file(str(tmp_path / "g" / "config.json"))
    pm = GPT2LMHeadModel.from_pretrained(tmp_path / "g")
    ids = rng.integers(0, V, (1, 7))
    t32, t64 = _both(hf, lambda m: m(torch.tensor(ids)).logits.numpy().astype(np.float64))
    _within(pm(pr.tensor(ids)).numpy(), t32, t64)
    bare = GPT2Model.from_pretrained(tmp_path / "g")
    t32, t64 = _both(
        hf.transformer,
        lambda m: m(torch.tensor(ids)).last_hidden_state.numpy().astype(np.float64),
    )
    _within(bare(pr.tensor(ids)).numpy(), t32, t64)

    hf = _bert("BertForMaskedLM", int(rng.integers(1 << 20)))
    sd = {}
    for k, v in hf.state_dict().items():
        if k.startswith("cls.predictions.decoder"):
            continue
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
            "LayerNorm.bias", "LayerNorm.beta"
        )
        sd[k] = v.contiguous()
    sd["bert.embeddings.position_ids"] = torch.arange(31)[None]
    sd["cls.seq_relationship.weight"] = torch.zeros(2, 30)
    sd["cls.seq_relationship.bias"] = torch.zeros(2)
    (tmp_path / "b").mkdir()
    save_file(sd, str(tmp_path / "b" / "model.safetensors"))
    hf.config.to_json_file(str(tmp_path / "b" / "config.json"))
    pm = BertForMaskedLM.from_pretrained(tmp_path / "b")
    ids, types, mask = _inputs(rng)
    t32, t64 = _both(
        hf,
        lambda m: m(torch.tensor(ids), attention_mask=torch.tensor(mask)).logits.numpy()
        .astype(np.float64),
    )  # fmt: skip
    _within(pm(pr.tensor(ids), pr.tensor(mask)).numpy(), t32, t64)
