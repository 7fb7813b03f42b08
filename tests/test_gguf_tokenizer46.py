"""pyrite.models.GGUFTokenizer: a GGUF file's tokenizer rebuilt from its metadata.

- "llama" (SentencePiece BPE) against llama.cpp's own algorithm written out here
  (llm_tokenizer_spm: pieces merge pairwise, the best-scored result first, leftmost on ties;
  what stays outside the vocabulary becomes <0xXX> byte tokens), on random vocabularies with
  random scores and random texts with characters outside them;
- "gpt2" (byte-level BPE) against the `tokenizers` tokenizer its vocabulary and merges were
  trained as (GPT-2's own pre-tokenizer), the file holding only what llama.cpp's converter
  writes."""

from __future__ import annotations

import numpy as np
import pytest

from pyrite.models import GGUFTokenizer
from tests.test_gguf46 import _write as write_gguf

gguf = pytest.importorskip("gguf")
tk = pytest.importorskip("tokenizers")


def _write(path, meta, arch="llama"):
    """A GGUF file of `meta` and one placeholder tensor."""
    return write_gguf(path, {"v": (np.zeros(2, np.float32), None)}, arch, meta)


# ---- SentencePiece BPE ("llama") ----------------------------------------------------------------
def _spm_reference(text, tokens, scores, types, add_space_prefix=True):
    """llama.cpp's llm_tokenizer_spm on `text` (no special tokens): ids."""
    index = {t: i for i, t in enumerate(tokens) if types[i] in (1, 4)}
    byte_id = {int(t[3:5], 16): i for i, t in enumerate(tokens) if types[i] == 6}
    text = text.replace(" ", "▁")
    if add_space_prefix:
        text = "▁" + text
    syms = list(text)
    while True:
        best = None
        for k in range(len(syms) - 1):
            i = index.get(syms[k] + syms[k + 1])
            if i is not None and (best is None or scores[i] > best[0]):
                best = (scores[i], k)
        if best is None:
            break
        k = best[1]
        syms[k : k + 2] = [syms[k] + syms[k + 1]]
    out = []
    for s in syms:
        if s in index:
            out.append(index[s])
        else:
            out += [byte_id[b] for b in s.encode("utf-8")]
    return out


def _spm_vocab(rng):
    alphabet = list("▁abcdeflmnorst,.")
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    tokens += alphabet
    types += [1] * len(alphabet)
    seen = set(tokens)
    while len(tokens) < 259 + len(alphabet) + 120:
        piece = "".join(rng.choice(alphabet, int(rng.integers(2, 6))))
        if piece not in seen:
            seen.add(piece)
            tokens.append(piece)
            types.append(1)
    scores = [0.0] * 259 + list(-rng.permutation(len(tokens) - 259).astype(float) - 1)
    return tokens, [float(s) for s in scores], types


def test_spm_tokenizer_matches_llama_cpp_s_algorithm(tmp_path, rng):
    tokens, scores, types = _spm_vocab(rng)
    p = _write(
        tmp_path / "spm.gguf",
        {
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.scores": scores,
            "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": 1,
            "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.ggml.unknown_token_id": 0,
        },
    )
    tok = GGUFTokenizer.from_gguf(p)
    chars = list("abcdeflmnorst,. ") + ["é", "中", "q", "\n"]
    for _ in range(60):
        text = "".join(rng.choice(chars, int(rng.integers(1, 40))))
        want = _spm_reference(text, tokens, scores, types)
        assert tok.encode(text, add_special_tokens=False) == want, repr(text)
        assert tok.encode(text) == [1, *want]  # (llama's add_bos_token defaults to true)
        assert tok.decode(tok.encode(text)) == text
    # control tokens in the text are matched whole
    assert tok.encode("ab</s>", add_special_tokens=False)[-1] == 2


# ---- byte-level BPE ("gpt2") --------------------------------------------------------------------
def _corpus(rng, n):
    words = ["the", "cat", "sat", "on", "mat", "naïve", "1234", "café", "don't", "x", "中文"]
    return [" ".join(rng.choice(words, int(rng.integers(1, 12)))) for _ in range(n)]


@pytest.mark.parametrize("pre", ["gpt-2", "smollm"])
def test_byte_level_bpe_matches_the_tokenizer_it_was_trained_as(tmp_path, rng, pre):
    ref = tk.Tokenizer(tk.models.BPE())
    steps = [tk.pre_tokenizers.Digits(individual_digits=True)] if pre == "smollm" else []
    steps.append(tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
    ref.pre_tokenizer = tk.pre_tokenizers.Sequence(steps)
    ref.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    ref.train_from_iterator(_corpus(rng, 300), trainer)
    import json

    model = json.loads(ref.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    types = [3 if t == "<|endoftext|>" else 1 for t in tokens]
    p = _write(
        tmp_path / "bpe.gguf",
        {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.pre": pre,
            "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.merges": merges,
            "tokenizer.ggml.eos_token_id": tokens.index("<|endoftext|>"),
        },
        arch="qwen2",
    )
    tok = GGUFTokenizer.from_gguf(p)
    for text in _corpus(rng, 40) + ["  two  spaces\tand tab", "ünïcödé 98765 !!"]:
        assert tok.encode(text) == ref.encode(text).ids, repr(text)
        assert tok.decode(tok.encode(text)) == text
    eos = tokens.index("<|endoftext|>")
    assert tok.encode("cat<|endoftext|>")[-1] == eos
    assert tok.decode([eos], skip_special_tokens=False) == "<|endoftext|>"


def test_refusals(tmp_path):
    p = _write(tmp_path / "none.gguf", {"general.name": "x"})
    with pytest.raises(ValueError, match="no tokenizer"):
        GGUFTokenizer.from_gguf(p)
    p = _write(
        tmp_path / "bert.gguf",
        {"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["a"]},
    )
    with pytest.raises(NotImplementedError, match="bert"):
        GGUFTokenizer.from_gguf(p)
    p = _write(
        tmp_path / "pre.gguf",
        {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.pre": "mystery",
            "tokenizer.ggml.tokens": ["a", "b"],
            "tokenizer.ggml.merges": ["a b"],
        },
    )
    with pytest.raises(NotImplementedError, match="mystery"):
        GGUFTokenizer.from_gguf(p)
    p = _write(
        tmp_path / "merges.gguf",
        {
            "tokenizer.ggml.model": "gpt2",
            "tokenizer.ggml.tokens": ["a", "b"],
            "tokenizer.ggml.merges": ["a b"],
        },
    )
    with pytest.raises(ValueError, match="damaged"):
        GGUFTokenizer.from_gguf(p)
