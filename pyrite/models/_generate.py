"""Generation shared by the causal language models (Llama, GPT-2): the KV cache, the attention
mask over cached and new keys, the choice of the next token (greedy, or sampled with
temperature / top-k / top-p, after a repetition penalty and min_new_tokens' eos ban) and the
decoding loop.

A model inherits `GenerationMixin`, has `config` and `get_input_embeddings()`, and a forward
that takes `(input_ids, cache, attention_mask=, position_ids=)`. The mixin's `_decoder(ids,
max_length, attention_mask)` is a function from the newest tokens (batch, t) to their logits
(batch, t, vocab) that keeps its own cache of what it has seen (`attention_mask`: None, or a
(batch, t) numpy array with zeros: left padding, through `padded_decoder`). `generate` runs the
prompt through it once, then one token at a time.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import dtypes as D
from ..errors import ShapeError
from ..ops import creation as C
from ..ops.combine import cat
from ..ops.elementwise import where
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
        that layer's keys and values up to the last one written. `start` a device int tensor
        (t,) of positions instead (a compiled decode step's: the values change, the shapes do
        not): k and v are written there and the whole cache is returned (the attention masks
        what is not yet written)."""
        if isinstance(start, Tensor):
            self.keys[layer].index_copy_(2, start, k)
            self.values[layer].index_copy_(2, start, v)
            return self.keys[layer], self.values[layer]
        end = start + k.shape[2]
        self.keys[layer][:, :, start:end] = k
        self.values[layer][:, :, start:end] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


def causal_mask(attention_mask, B, T, start, who):
    """(bool mask (B, 1, T, start + T) or None, is_causal) for T queries after `start` cached
    positions: causal, and keys where attention_mask (B, start + T) is 0 masked, as
    transformers' (a query whose keys are all masked, a left pad's, gets zeros: nobody should
    read it). `who` names the model in the error."""
    S = start + T
    if attention_mask is not None:
        if tuple(attention_mask.shape) != (B, S):
            raise ShapeError(
                f"pyrite: {who}: attention_mask of shape {tuple(attention_mask.shape)} for "
                f"{B} sequences of {start} cached + {T} new tokens (expected ({B}, {S}))"
            )
        keep = (attention_mask != 0)[:, None, None, :]  # (B, 1, 1, S)
        return keep & C.ones((T, S), dtype=D.bool_).tril(start), False
    if T > 1 and start > 0:  # a chunk after cached tokens: each sees the cache and its past
        return C.ones((T, S), dtype=D.bool_).tril(start), False
    return None, T > 1


def padded_decoder(model, cache, attention_mask):
    """generate's step for prompts left-padded under `attention_mask` (B, T numpy; 1 keep, 0
    pad):
    transformers' positions (cumsum of the mask - 1, 0 at pads; each new token one further than
    its row's last) and a mask that grows by one kept key per token. Both are made on the host
    and uploaded (a few bytes a step), so the positions' range is known to the gather that
    reads through them without a readback. `model(new, cache, attention_mask=,
    position_ids=)` gives the logits."""
    full, positions = _prompt_layout(np.asarray(attention_mask) != 0, cache.max_length, 1)
    last = [positions]

    def step(new):
        start, t = cache.length, new.shape[1]
        pos = last[0] if start == 0 else last[0][:, -1:] + np.arange(1, t + 1)
        last[0] = pos
        return model(
            new,
            cache,
            attention_mask=C.tensor(full[:, : start + t]),
            position_ids=C.tensor(pos.astype(np.int32)),
        )

    return step


def _prompt_layout(keep, max_length: int, later: int):
    """(the (B, max_length) int32 key mask: the prompt's `keep` (B, T) then `later` in every
    position after it; the prompt's positions, transformers': cumsum(keep) - 1, 0 at pads)."""
    B, T = keep.shape
    full = np.full((B, max_length), later, np.int32)
    full[:, :T] = keep
    return full, np.where(keep, keep.cumsum(-1) - 1, 0)


def static_step_mask(cache, T, attention_mask, position_ids, B, who):
    """The static decode step's arguments checked (a model's forward with cache_position), and
    its attention mask: the keys `attention_mask` (B, max_length) keeps, (B, 1, 1,
    max_length) bool."""
    if cache is None or T != 1 or position_ids is None or attention_mask is None:
        raise ValueError(
            f"pyrite: {who}: cache_position (the static decode step) takes one token a row, a "
            "cache, its attention_mask (batch, max_length) and position_ids"
        )
    if tuple(attention_mask.shape) != (B, cache.max_length):
        raise ShapeError(
            f"pyrite: {who}: a static step's attention_mask must be ({B}, {cache.max_length}), "
            f"got {tuple(attention_mask.shape)}"
        )
    return (attention_mask != 0)[:, None, None, :]


# each model's last StaticDecoding (beside the model, not in it: a saved or copied model
# carries no cache and no recording)
_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def static_step(model, batch, max_length, dtype):
    """(step, cache, keys): one decoding step of fixed shapes over a static KV cache of
    max_length positions. step(new (batch, 1) ids, slot (1,) the cache position written,
    pos (batch, 1) each row's rotary position) marks the slot in `keys` (batch, max_length: the
    keys written, the attention's mask), writes the new keys and values there and returns the
    logits (batch, 1, vocab). Nothing of it is a Python number, so one recording serves every
    position (StaticDecoding compiles it; pyrite.web exports it)."""
    cache = KVCache(model.config, batch, max_length, dtype)
    keys = C.zeros((batch, max_length), dtype=D.int32)

    def step(new, slot, pos):
        keys.index_fill_(1, slot, 1)
        return model(new, cache, attention_mask=keys, position_ids=pos, cache_position=slot)

    return step, cache, keys


class StaticDecoding:
    """generate's decoding compiled (`generate(compile=True)`) for `batch` rows and `max_length`
    positions: the prompt runs eagerly (as padded_decoder's), then every new token through one
    `pr.compile`d function of fixed shapes, replayed as one submission a token: the keys and
    values go to the cache at a device position (KVCache.update with a tensor), the attention
    reads the whole cache under a device mask of the keys written so far (batch, max_length),
    and the rotary embedding takes each row's position from a device tensor. Only those three
    small tensors change between tokens, so the trace is made once, and a model keeps its last
    StaticDecoding, so a later generate of the same batch and length replays it too.
    `model(new, cache, attention_mask=, position_ids=, cache_position=)` takes the static form
    (Llama's)."""

    def __init__(self, model, batch, max_length, dtype):
        from ..compile import compile as _compile

        self.key = (batch, max_length, dtype)
        decode, self.cache, self.keys = static_step(model, batch, max_length, dtype)
        self.model, self.compiled = model, _compile(decode)

    def start(self, attention_mask, T):
        """The step function of one generation (a prompt of T tokens, `attention_mask` None or
        a (batch, T) numpy array with zeros)."""
        model, cache, decode = self.model, self.cache, self.compiled
        B, L = self.key[:2]
        keep = np.ones((B, T), bool) if attention_mask is None else np.asarray(attention_mask) != 0
        full, positions = _prompt_layout(keep, L, 0)
        self.keys.copy_(C.tensor(full))
        cache.length = 0
        last = [positions]

        def step(new):
            start, t = cache.length, new.shape[1]
            if start == 0:  # the prompt
                return model(
                    new,
                    cache,
                    attention_mask=C.tensor(full[:, :t]),
                    position_ids=C.tensor(last[0].astype(np.int32)),
                )
            pos = last[0][:, -1:] + 1
            last[0] = pos
            slot = C.tensor(np.array([start], np.int32))
            out = decode(new, slot, C.tensor(pos.astype(np.int32)))
            cache.length = start + t
            return out

        step.compiled = decode
        return step


class GenerationMixin:
    """`generate` for a model that defines `_decoder` (see the module's docstring) and has a
    `config` with eos_token_id and pad_token_id."""

    def _decoder(self, ids, max_length, attention_mask=None):
        """generate's step: the logits of the newest tokens, over a KV cache of max_length (in
        the token embedding's dtype); with left padding (`attention_mask`, a (B, T) numpy array
        with zeros), transformers' positions and a mask that grows by one kept key per token
        (padded_decoder)."""
        dtype = self.get_input_embeddings().weight.dtype
        cache = KVCache(self.config, ids.shape[0], max_length, dtype)
        if attention_mask is None:
            return lambda new: self(new, cache)
        return padded_decoder(self, cache, attention_mask)

    def export_web(self, folder, max_length: int = 256, prompt=(), decode=None) -> dict:
        """Export one-token decoding as a browser bundle with a page that generates
        (generate.html; pyrite.web): see models/_web.export_decoder."""
        from ._web import export_decoder

        return export_decoder(self, folder, max_length, prompt, decode)

    def generate(
        self,
        input_ids,
        max_new_tokens: int | None = None,
        *,
        max_length: int | None = None,
        min_new_tokens: int = 0,
        attention_mask=None,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        repetition_penalty: float = 1.0,
        eos_token_id=None,
        pad_token_id=None,
        generator=None,
        on_token=None,
        progress: bool = False,
        compile: bool = False,
    ) -> Tensor:
        """Continue each prompt of `input_ids` (batch, tokens), as `transformers`' generate.

        Length: up to `max_new_tokens` new tokens (default 20), or, given only `max_length`,
        up to that many tokens in all, prompt included (a prompt that long already is a
        ValueError, as transformers'). Stops when every sequence has produced `eos_token_id`
        (default: the config's; an int or a list); a finished sequence is padded with
        `pad_token_id` (default: the config's, else the first eos). Before `min_new_tokens`
        new tokens, eos is banned (its logits -inf).

        Choice: greedy (argmax) unless `do_sample`, then sampled from softmax(logits /
        temperature) restricted to the `top_k` likeliest tokens and to the smallest set whose
        probability reaches `top_p`. First, `repetition_penalty` != 1 divides the positive
        logits of every token already in the row (prompt after its leading pads, and output) by
        it and multiplies the negative ones (transformers 5's RepetitionPenaltyLogitsProcessor,
        with generate's prompt_ignore_length).

        Prompts are of equal length, or left-padded with an `attention_mask` (batch, tokens;
        1 keep, 0 pad): positions count kept tokens only, pads are masked. `on_token(ids)`, if
        given, is called after each step with that step's tokens, a (batch,) int numpy array
        (a finished row's pad included): a streamer's hook.

        Returns (batch, tokens + new) int32 token ids. The prompt runs in one forward, each new
        token in one more, over a KV cache. `compile=True` (models with a static cache form:
        Llama, GPT-2) records the one-token step once with `pr.compile` and replays it for every
        token (StaticDecoding): one submission a token instead of an eager op at a time."""
        from ..autograd import inference_mode

        if compile and not getattr(self, "supports_static_cache", False):
            raise NotImplementedError(
                f"pyrite: generate(compile=True): {type(self).__name__} has no static cache form "
                "(LlamaForCausalLM and GPT2LMHeadModel have)"
            )
        ids = input_ids if isinstance(input_ids, Tensor) else C.tensor(input_ids)
        if ids.ndim == 1:
            ids = ids[None]
        B, T = ids.shape
        n_new = _new_tokens(max_new_tokens, max_length, T)
        if do_sample and temperature <= 0:
            raise ValueError(f"pyrite: generate: temperature must be > 0, not {temperature}")
        if top_p is not None and not 0 < top_p <= 1:
            raise ValueError(f"pyrite: generate: top_p must lie in (0, 1], not {top_p}")
        if not repetition_penalty > 0:
            raise ValueError(
                f"pyrite: generate: repetition_penalty must be > 0, not {repetition_penalty}"
            )
        eos = self.config.eos_token_id if eos_token_id is None else eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        pad = self.config.pad_token_id if pad_token_id is None else pad_token_id
        pad = eos[0] if pad is None and eos else pad
        if attention_mask is not None:
            keep = np.asarray(
                attention_mask.numpy() if isinstance(attention_mask, Tensor) else attention_mask
            )
            if keep.shape != (B, T):
                raise ShapeError(
                    f"pyrite: generate: attention_mask of shape {keep.shape} for input_ids of "
                    f"shape {(B, T)}"
                )
            # every token kept: the unpadded path (the same positions, no mask to build)
            attention_mask = None if (keep != 0).all() else keep
        # each row's leading pads (transformers' repetition penalty does not count them)
        lead = np.zeros(B, int) if attention_mask is None else (attention_mask != 0).argmax(1)
        out = [ids.to(D.int32)]
        done = np.zeros(B, bool)
        steps = range(n_new)
        if progress:
            from tqdm.auto import tqdm

            steps = tqdm(steps, desc="generate", unit="token")
        with inference_mode():
            if compile:
                key = (B, T + n_new, self.get_input_embeddings().weight.dtype)
                static = _STATIC.get(self)
                if static is None or static.key != key:
                    static = _STATIC[self] = StaticDecoding(self, *key)
                step = static.start(attention_mask, T)
            else:
                step = self._decoder(out[0], T + n_new, attention_mask)
            seen = ban = None
            cur = out[0]
            for i in steps:
                logits = step(cur)[:, -1].float()
                if i == 0:
                    V = logits.shape[-1]
                    if repetition_penalty != 1.0:
                        seen = _prompt_tokens(out[0], lead, V)
                    ban = _eos_ban(eos, V) if min_new_tokens > 0 else None
                if seen is not None:
                    penalized = where(
                        logits < 0, logits * repetition_penalty, logits / repetition_penalty
                    )
                    logits = where(seen, penalized, logits)
                if ban is not None and i < min_new_tokens:
                    logits = logits.masked_fill(ban, float("-inf"))
                nxt = pick(logits, do_sample, temperature, top_k, top_p, generator)
                host = nxt.numpy()
                if eos:
                    host = np.where(done, pad, host)
                    done |= np.isin(host, eos)
                cur = C.tensor(host.astype(np.int32)[:, None])
                out.append(cur)
                if seen is not None:
                    seen = seen.scatter(-1, nxt[:, None].long(), True)
                if on_token is not None:
                    on_token(host)
                if eos and done.all():
                    break
        return cat(out, 1) if len(out) > 1 else out[0]


def _new_tokens(max_new_tokens, max_length, T) -> int:
    """How many tokens generate may add to prompts of T: max_new_tokens where given (as
    transformers, it wins over max_length), else max_length - T, else 20."""
    if max_new_tokens is not None:
        if max_new_tokens < 0:
            raise ValueError(f"pyrite: generate: max_new_tokens must be >= 0, not {max_new_tokens}")
        return int(max_new_tokens)
    if max_length is None:
        return 20
    if T >= max_length:
        raise ValueError(
            f"pyrite: generate: the prompts are {T} tokens long already, and max_length is "
            f"{max_length} (the whole length, prompt included): raise it, or pass max_new_tokens"
        )
    return int(max_length) - T


def _prompt_tokens(ids, lead, vocab: int):
    """(B, vocab) bool: the tokens of each row of the prompt `ids` (B, T) after its `lead`
    leading pads, those in range (read back once, marked on the host)."""
    host = ids.numpy()
    seen = np.zeros((host.shape[0], vocab), bool)
    for b, row in enumerate(host):
        row = row[lead[b] :]
        seen[b, row[(row >= 0) & (row < vocab)]] = True
    return C.tensor(seen)


def _eos_ban(eos, vocab: int):
    """A (vocab,) bool mask of the eos ids (those in range): what min_new_tokens bans."""
    ban = np.zeros(vocab, bool)
    ids = [e for e in eos if 0 <= e < vocab]
    if not ids:
        return None
    ban[ids] = True
    return C.tensor(ban)


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
