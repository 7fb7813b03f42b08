"""A language model's decoding as a browser bundle (pyrite.web): one token a run over a static
KV cache, and a page (generate.html) that generates with it, token by token, in the browser."""

from __future__ import annotations

import json

import numpy as np

from ..ops import creation as C
from ..web import export
from ..web._export import _write, copy_page
from ._generate import static_step


def _ids(v):
    return C.tensor(np.asarray(v, np.int32))


def export_decoder(model, folder, max_length=256, prompt=(), decode=None) -> dict:
    """Write `model`'s one-token decoding step over a cache of `max_length` positions to
    `folder` as a browser bundle (inputs `token` (1, 1), `slot` (1,) and `position` (1, 1),
    the cache position and rotary position of the token; output `logits` (vocab,)), with
    generate.html and generate.json: the prompt's ids (`prompt`), the eos id, and with
    `decode` (a tokenizer's ids -> text) each token's text, for the page to show. The model's
    weights are exported as they are (float32, bf16 or packed int8/int4). Returns
    pyrite.web.export's summary."""
    was = model.training
    model.eval()
    dtype = model.get_input_embeddings().weight.dtype
    step, _, _ = static_step(model, 1, max_length, dtype)
    prompt = [int(t) for t in prompt]
    first = prompt[0] if prompt else 0
    try:
        summary = export(
            lambda token, slot, position: step(token, slot, position)[0, -1],
            (_ids([[first]]), _ids([0]), _ids([[0]])),
            folder,
            input_names=["token", "slot", "position"],
            output_names=["logits"],
        )
    finally:
        model.train(was)
    cfg = model.config
    vocab = summary["outputs"][0][1][0]
    meta = {
        "max_length": max_length,
        "vocab_size": vocab,
        "eos_token_id": getattr(cfg, "eos_token_id", None),
        "prompt": prompt,
        "prompt_text": decode(prompt) if decode is not None and prompt else None,
        "pieces": _pieces(decode, vocab) if decode is not None else None,
    }
    text = json.dumps(meta)
    _write(folder, "generate.json", lambda fh: fh.write(text.encode()))
    copy_page(folder, "generate.html")
    return summary


def _pieces(decode, vocab) -> list:
    """Each token's text as it reads after other text (a leading space kept): decode([a, i])
    less decode([a]) for an anchor token a that decodes to text of its own."""
    anchor = next((a for a in range(min(vocab, 1000)) if decode([a])), None)
    if anchor is None:
        return [decode([i]) for i in range(vocab)]
    base = decode([anchor])
    out = []
    for i in range(vocab):
        both = decode([anchor, i])
        out.append(both[len(base) :] if both.startswith(base) else decode([i]))
    return out
