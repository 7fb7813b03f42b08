"""Generation shared by the causal language models (Llama, GPT-2): the KV cache, the choice of
the next token (greedy, or sampled with temperature / top-k / top-p) and the decoding loop.

A model inherits `GenerationMixin` and gives `_decoder(ids, max_length, attention_mask)`: a
function from the newest tokens (batch, t) to their logits (batch, t, vocab) that keeps its own
cache of what it has seen. `generate` runs the prompt through it once, then one token at a time.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..ops import creation as C
from ..ops.combine import cat
from ..ops.stats import multinomial
from ..tensor import Tensor


class KVCache:
    """Keys and values of every layer for `max_length` positions: (batch, kv heads,
    max_length, head_dim) tensors written in place as tokens arrive; `length` positions are
    filled. `config` names num_hidden_layers, num_key_value_heads and head_dim."""

    def __init__(self, config, batch: int, max_length: int, dtype=D.float32):
        shape = (batch, config.num_key_value_heads, max_length, config.head_dim)
        self.keys = [C.zeros(shape, dtype=dtype) for _ in range(config.num_hidden_layers)]
        self.values = [C.zeros(shape, dtype=dtype) for _ in range(config.num_hidden_layers)]
        self.max_length = max_length
        self.length = 0

    def update(self, layer: int, k, v, start: int):
        """Write k and v (batch, kv heads, t, head_dim) at positions start.. of `layer`; return
        that layer's keys and values up to the last one written."""
        end = start + k.shape[2]
        self.keys[layer][:, :, start:end] = k
        self.values[layer][:, :, start:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


class GenerationMixin:
    """`generate` for a model that defines `_decoder` (see the module's docstring) and has a
    `config` with eos_token_id and pad_token_id."""

    def generate(
        self,
        input_ids,
        max_new_tokens: int = 20,
        *,
        attention_mask=None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        eos_token_id=None,
        pad_token_id=None,
        generator=None,
        progress: bool = False,
    ) -> Tensor:
        """Continue each prompt of `input_ids` (batch, tokens) by up to `max_new_tokens`
        tokens, as `transformers`' generate: greedy (argmax) unless `do_sample`, then sampled
        from softmax(logits / temperature) restricted to the `top_k` likeliest tokens and to
        the smallest set whose probability reaches `top_p`. Stops when every sequence has
        produced `eos_token_id` (default: the config's); a finished sequence is padded with
        `pad_token_id` (default: the config's, else the first eos). Prompts are of equal
        length, or left-padded with an `attention_mask` (batch, tokens; 1 keep, 0 pad) for a
        model that takes one (GPT-2). Returns (batch, tokens + new) int32 token ids. The
        prompt runs in one forward, each new token in one more, over a KV cache."""
        from ..autograd import inference_mode

        ids = input_ids if isinstance(input_ids, Tensor) else C.tensor(input_ids)
        if ids.ndim == 1:
            ids = ids[None]
        if do_sample and temperature <= 0:
            raise ValueError(f"pyrite: generate: temperature must be > 0, not {temperature}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"pyrite: generate: top_p must lie in (0, 1], not {top_p}")
        eos = self.config.eos_token_id if eos_token_id is None else eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        pad = self.config.pad_token_id if pad_token_id is None else pad_token_id
        pad = eos[0] if pad is None and eos else pad
        B, T = ids.shape
        if attention_mask is not None:
            if not isinstance(attention_mask, Tensor):
                attention_mask = C.tensor(np.asarray(attention_mask))
            if tuple(attention_mask.shape) != (B, T):
                raise ShapeError(
                    f"pyrite: generate: attention_mask of shape {tuple(attention_mask.shape)} "
                    f"for input_ids of shape {(B, T)}"
                )
        out = [ids.to(D.int32)]
        done = np.zeros(B, bool)
        steps = range(max_new_tokens)
        if progress:
            from tqdm.auto import tqdm

            steps = tqdm(steps, desc="generate", unit="token")
        with inference_mode():
            step = self._decoder(out[0], T + max_new_tokens, attention_mask)
            cur = out[0]
            for _ in steps:
                logits = step(cur)[:, -1].float()
                nxt = pick(logits, do_sample, temperature, top_k, top_p, generator)
                host = nxt.numpy()
                if eos:
                    host = np.where(done, pad, host)
                    done |= np.isin(host, eos)
                cur = C.tensor(host.astype(np.int32)[:, None])
                out.append(cur)
                if eos and done.all():
                    break
        return cat(out, 1) if len(out) > 1 else out[0]


def pick(logits, do_sample, temperature, top_k, top_p, generator):
    """The next token of each row of `logits` (batch, vocab): argmax, or a sample."""
    if not do_sample:
        return logits.argmax(-1)
    logits = logits / temperature
    V = logits.shape[-1]
    if top_k is not None and 0 < top_k < V:
        kth = logits.topk(top_k, -1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        srt, order = logits.sort(-1, descending=True)
        probs = srt.softmax(-1)
        # drop a token when the likelier ones before it already reach top_p (the first stays)
        drop = (probs.cumsum(-1) - probs) >= top_p
        srt = srt.masked_fill(drop, float("-inf"))
        logits = C.full(logits.shape, float("-inf")).scatter(-1, order, srt)
    return multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]
