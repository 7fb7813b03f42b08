"""A language model's decoding as a browser bundle (`model.export_web`, `pyrite generate --web`):
the one-token step over a static KV cache, replayed from the bundle's files in Python and by
generate.html in headless Chromium, gives greedy tokens equal to `generate`'s — for Llama and
GPT-2 built from transformers models, and for a Llama read from a GGUF file with packed Q4_1
weights (the quantized kernels in the browser). Token equality is the check (greedy argmax of
logits that pyrite's other tests hold to transformers' within float32 rounding)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import pyrite as pr
from pyrite import web
from pyrite.models import LlamaForCausalLM
from pyrite.web._browser import run_page

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
from tests.test_models_gpt2_bert46 import _gpt2, _pyrite_gpt2  # noqa: E402
from tests.test_models_llama46 import _hf, _pyrite, _write_gguf  # noqa: E402
from tests.test_web47 import chromium  # noqa: E402


def _i32(v):
    return pr.tensor(np.asarray(v, np.int32))


def _replayed(folder, prompt, n):
    """Greedy decoding through the bundle's files (pyrite.web.load): the prompt one token a
    run, then n new tokens (no stop at eos)."""
    b = web.load(folder)
    ids = list(prompt)
    pos = 0
    while len(ids) - len(prompt) < n:
        logits = b(_i32([[ids[pos]]]), _i32([pos]), _i32([[pos]])).numpy()
        pos += 1
        if pos >= len(prompt):
            ids.append(int(logits.argmax()))
    return ids


def _in_browser(folder, n, want):
    """generate.html's greedy tokens from the exported prompt: `want`'s, up to an eos."""
    r = run_page(folder, "generate.html", {"n": str(n)}, timeout=240, chromium=chromium())
    assert "error" not in r, r["error"]
    got = r["ids"]
    meta = json.loads((folder / "generate.json").read_text())
    assert got == want[: len(got)]
    assert len(got) == len(want) or got[-1] == meta["eos_token_id"], (got, want)
    assert r["tokens_per_s"] > 0


def _model(name, tmp_path, rng):
    """(pyrite model, vocabulary size) of each kind the test exports."""
    seed = int(rng.integers(1 << 20))
    if name == "llama":
        hf = _hf("llama", seed)
        return _pyrite(hf), hf.config.vocab_size
    if name == "gpt2":
        hf = _gpt2(seed=seed, n_layer=2, n_embd=24, n_head=3, vocab_size=53)
        return _pyrite_gpt2(hf), hf.config.vocab_size
    hf = _hf("llama", seed, hidden_size=64, intermediate_size=96, num_attention_heads=4)
    _write_gguf(tmp_path / "q.gguf", hf, "llama", "Q4_1")
    return LlamaForCausalLM.from_gguf(tmp_path / "q.gguf"), hf.config.vocab_size


@pytest.mark.parametrize("name", ["llama", "gpt2", "gguf-q4_1"])
def test_exported_decoding_generates_generate_s_tokens(tmp_path, rng, name):
    pm, vocab = _model(name, tmp_path, rng)
    prompt = rng.integers(0, vocab, 5).tolist()
    n = 8
    folder = tmp_path / name
    s = pm.export_web(folder, max_length=len(prompt) + n + 3, prompt=prompt)
    assert [x[0] for x in s["inputs"]] == ["token", "slot", "position"]
    assert s["outputs"] == [("logits", (vocab,), "float32")]
    want = pm.generate(pr.tensor([prompt]), n, eos_token_id=-1).numpy()[0].tolist()
    assert _replayed(folder, prompt, n) == want
    _in_browser(folder, n, want)


def test_cli_generate_web_exports_a_gguf_model_with_its_tokenizer(tmp_path, rng, capsys):
    from pyrite.cli import main

    hf = _hf("llama", int(rng.integers(1 << 20)), hidden_size=64, intermediate_size=96,
             num_attention_heads=4)  # fmt: skip
    tokens = [chr(i) for i in range(33, 100)]  # (67: the vocabulary; 'a' 'b' 'c' at 64-66)
    _write_gguf(tmp_path / "m.gguf", hf, "llama", "Q8_0", tokens)
    folder = tmp_path / "web"
    argv = ["generate", str(tmp_path / "m.gguf"), "--prompt", "abc", "--web", str(folder)]
    assert main([*argv, "--max-length", "16"]) == 0
    assert "pyrite web" in capsys.readouterr().out
    meta = json.loads((folder / "generate.json").read_text())
    assert meta["prompt"] == [64, 65, 66] and meta["prompt_text"] == "abc"
    assert meta["max_length"] == 16 and meta["eos_token_id"] == 2
    assert meta["pieces"] == tokens  # (each token's own text)
    pm = LlamaForCausalLM.from_gguf(tmp_path / "m.gguf")
    want = pm.generate(pr.tensor([[64, 65, 66]]), 6, eos_token_id=-1).numpy()[0].tolist()
    assert _replayed(folder, [64, 65, 66], 6) == want
    _in_browser(folder, 6, want)
