"""generate's options (pyrite/models/_generate.py), for both causal families (Llama / Qwen2 and
GPT-2), against transformers' generate with the same option, greedy, token for token:
repetition_penalty, min_new_tokens, max_length (prompts of equal length and left-padded ones);
and the on_token hook a streamer uses. Tiny random models (tests/test_models_llama46.py's and
tests/test_models_gpt2_bert46.py's)."""

from __future__ import annotations

import numpy as np
import pytest

import pyrite as pr

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from tests.test_models_gpt2_bert46 import _gpt2, _pyrite_gpt2  # noqa: E402
from tests.test_models_llama46 import _hf, _left_padding, _pyrite  # noqa: E402

_FAMILIES = ["llama", "qwen2", "gpt2"]


def _models(family, seed):
    """(transformers model, pyrite model, vocabulary size) of one family, the same weights."""
    if family == "gpt2":
        hf = _gpt2(seed)
        return hf, _pyrite_gpt2(hf), hf.config.vocab_size
    hf = _hf(family, seed)
    return hf, _pyrite(hf), hf.config.vocab_size


def _hf_generate(hf, ids, mask=None, **kw):
    """transformers' greedy generate; every prompt token attended unless `mask` says."""
    t = torch.tensor(ids)
    m = torch.ones_like(t) if mask is None else torch.tensor(mask)
    kw.setdefault("eos_token_id", None)
    kw.setdefault("pad_token_id", 0)
    with torch.no_grad():
        return hf.generate(t, attention_mask=m, do_sample=False, **kw).numpy()


@pytest.mark.parametrize("family", _FAMILIES)
@pytest.mark.parametrize("penalty", [1.6, 0.6])
def test_repetition_penalty_matches_transformers(rng, family, penalty):
    """HF's rule: a token already in the row (prompt and output) has its logit divided by the
    penalty where positive, multiplied where negative; leading pads do not count, as in theirs
    (transformers 5: generate passes prompt_ignore_length)."""
    hf, pm, V = _models(family, int(rng.integers(1 << 20)))
    ids = rng.integers(1, V, (2, 7))
    got = pm.generate(pr.tensor(ids), 9, repetition_penalty=penalty, eos_token_id=-1).numpy()
    want = _hf_generate(hf, ids, max_new_tokens=9, repetition_penalty=penalty)
    np.testing.assert_array_equal(got, want)
    plain = pm.generate(pr.tensor(ids), 9, eos_token_id=-1).numpy()
    assert (got != plain).any()  # (the penalty changed something: the test can tell)
    mask = _left_padding(3, 8, rng)
    ids = rng.integers(1, V, (3, 8))
    got = pm.generate(
        pr.tensor(ids), 6, attention_mask=mask, repetition_penalty=penalty, eos_token_id=-1
    ).numpy()
    want = _hf_generate(hf, ids, mask, max_new_tokens=6, repetition_penalty=penalty)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("family", _FAMILIES)
def test_min_new_tokens_bans_eos_until_then(rng, family):
    """An eos the model would give at once is banned for min_new_tokens tokens; then the row
    stops at it and is padded, as transformers' (the same length when every row is done)."""
    hf, pm, V = _models(family, int(rng.integers(1 << 20)))
    ids = rng.integers(1, V, (2, 6))
    free = pm.generate(pr.tensor(ids), 8, eos_token_id=-1).numpy()
    eos = int(free[0, 6])  # the first row's first new token
    for n in (0, 3):
        got = pm.generate(
            pr.tensor(ids), 8, min_new_tokens=n, eos_token_id=eos, pad_token_id=0
        ).numpy()
        want = _hf_generate(
            hf, ids, max_new_tokens=8, min_new_tokens=n, eos_token_id=eos, pad_token_id=0
        )
        np.testing.assert_array_equal(got, want)
        assert (got[:, 6 : 6 + n] != eos).all()
    assert got.shape[1] > 6 + 1 and got[0, 6] != eos


@pytest.mark.parametrize("family", _FAMILIES)
def test_max_length_counts_the_prompt(rng, family):
    hf, pm, V = _models(family, int(rng.integers(1 << 20)))
    ids = rng.integers(1, V, (2, 5))
    got = pm.generate(pr.tensor(ids), max_length=12, eos_token_id=-1).numpy()
    np.testing.assert_array_equal(got, _hf_generate(hf, ids, max_length=12))
    assert got.shape == (2, 12)
    # max_new_tokens wins where both are given, as transformers'
    got = pm.generate(pr.tensor(ids), 3, max_length=12, eos_token_id=-1)
    assert got.shape == (2, 8)
    with pytest.raises(ValueError, match="max_length"):
        pm.generate(pr.tensor(ids), max_length=5)
    with pytest.raises(ValueError, match="max_length"):
        hf.generate(torch.tensor(ids), max_length=5, pad_token_id=0)


@pytest.mark.parametrize("family", ["llama", "gpt2"])
def test_on_token_sees_each_step(rng, family):
    """on_token gets each step's (batch,) tokens as they come: together, the new columns of
    the result, a finished row's pads included, and no call after the last step."""
    hf, pm, V = _models(family, int(rng.integers(1 << 20)))
    ids = rng.integers(1, V, (2, 5))
    seen = []
    out = pm.generate(pr.tensor(ids), 6, eos_token_id=-1, on_token=seen.append).numpy()
    assert len(seen) == 6 and all(s.shape == (2,) for s in seen)
    np.testing.assert_array_equal(np.stack(seen, 1), out[:, 5:])
    eos = int(out[0, 6])
    seen = []
    out = pm.generate(pr.tensor(ids), 6, eos_token_id=eos, pad_token_id=0, on_token=seen.append)
    np.testing.assert_array_equal(np.stack(seen, 1), out.numpy()[:, 5:])


def test_generation_options_are_checked():
    pm = pr.models.LlamaForCausalLM(
        pr.models.LlamaConfig(
            vocab_size=11, hidden_size=8, intermediate_size=12, num_hidden_layers=1,
            num_attention_heads=2,
        )
    )  # fmt: skip
    ids = pr.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="repetition_penalty"):
        pm.generate(ids, 2, repetition_penalty=0.0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        pm.generate(ids, -1)
    assert pm.generate(ids, 0).shape == (1, 3)
    assert pm.generate(ids, eos_token_id=-1).shape == (1, 23)  # (20 new tokens by default)


@pytest.mark.parametrize("family", [*_FAMILIES, "qwen3"])
@pytest.mark.parametrize("padded", [False, True])
def test_compiled_decoding_gives_transformers_tokens(rng, family, padded):
    """generate(compile=True): the prompt eagerly, then every token through one pr.compile'd
    step over a static cache (device position, mask and rotary positions): transformers'
    greedy tokens, padded prompts too, with the step traced once and replayed after."""
    hf, pm, V = _models(family, int(rng.integers(1 << 20)))
    for _ in range(2):  # (the second generation replays the first's recording)
        ids = rng.integers(0, V, (3, 8))
        mask = _left_padding(3, 8, rng) if padded else None
        got = pm.generate(pr.tensor(ids), 9, attention_mask=mask, eos_token_id=-1, compile=True)
        np.testing.assert_array_equal(got.numpy(), _hf_generate(hf, ids, mask, max_new_tokens=9))


def test_compiled_decoding_is_refused_where_there_is_no_static_form(rng):
    from pyrite.models._generate import GenerationMixin

    class NoStatic(GenerationMixin):  # (a model whose forward has no cache_position)
        config = None

    with pytest.raises(NotImplementedError, match="static"):
        NoStatic().generate(pr.tensor(rng.integers(0, 5, (1, 4))), 2, compile=True)


def test_the_compiled_step_is_traced_once(rng):
    """StaticDecoding's step: one trace at the first new token, replays after (the position,
    the mask and the rotary positions are device tensors, so nothing the trace read changes),
    and a second generation of the same batch and length replays the same recording, its
    prompt of other tokens and padding notwithstanding."""
    from pyrite.models._generate import StaticDecoding

    _, pm, V = _models("llama", int(rng.integers(1 << 20)))
    static = StaticDecoding(pm, 2, 12, pr.float32)
    for mask in (None, np.array([[1] * 5, [0, 0, 1, 1, 1]])):
        step = static.start(mask, 5)
        with pr.inference_mode():
            cur = pr.tensor(rng.integers(0, V, (2, 5)))
            for _ in range(7):
                cur = step(cur)[:, -1].argmax(-1, keepdim=True)
    st = static.compiled.stats()
    assert (st["traces"], st["replays"], st["eager_calls"]) == (1, 11, 0), st


def test_cli_generate_from_a_hugging_face_folder(tmp_path, rng, capsys):
    """`pyrite generate <folder>`: config.json's model_type picks GPT-2, the folder's
    tokenizer.json (the tokenizers library) encodes the prompt and decodes the text; the ids
    are generate's."""
    tk = pytest.importorskip("tokenizers")
    from pyrite.cli import main

    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    corpus = [" ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat"], 6)) for _ in range(50)]
    trainer = tk.trainers.BpeTrainer(
        vocab_size=300, initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(corpus, trainer)
    hf = _gpt2(int(rng.integers(1 << 20)), vocab_size=tok.get_vocab_size())
    hf.save_pretrained(tmp_path, safe_serialization=True)
    tok.save(str(tmp_path / "tokenizer.json"))
    args = ["generate", str(tmp_path), "--prompt", "the cat sat", "--max-new-tokens", "6"]
    assert main(args) == 0
    printed = capsys.readouterr().out.strip()
    pm = pr.models.GPT2LMHeadModel.from_pretrained(tmp_path)
    ids = tok.encode("the cat sat").ids
    want = pm.generate(pr.tensor([ids]), 6).numpy()[0].tolist()
    assert printed == tok.decode(want)
