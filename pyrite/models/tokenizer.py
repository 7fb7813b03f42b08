"""Text to token ids and back for a GGUF file's model: its tokenizer, rebuilt from the file's
`tokenizer.ggml.*` metadata as a Hugging Face `tokenizers.Tokenizer` (the library made for the
job, `pip install tokenizers`; imported only here).

    gg = pr.io.load_gguf("model.gguf")
    tok = pr.models.GGUFTokenizer.from_gguf(gg)
    ids = tok.encode("The capital of France is")         # [bos, ...] as llama.cpp tokenizes
    text = tok.decode(model.generate(pr.tensor([ids]), 20)[0].tolist())

Two of llama.cpp's tokenizer models:

- "llama" (SentencePiece's BPE: Llama 1/2, TinyLlama, Mistral): a space becomes "▁", one is
  prepended (`tokenizer.ggml.add_space_prefix`, default true), and adjacent pieces merge, best
  score first, into the longest pieces the vocabulary has (llama.cpp's llm_tokenizer_spm); a
  character outside the vocabulary becomes its UTF-8 bytes' <0xXX> tokens. As a BPE model:
  every split of a vocabulary piece into two vocabulary pieces is a merge, ranked by the whole
  piece's score.
- "gpt2" (byte-level BPE: GPT-2, Llama 3, Qwen 2, SmolLM): the text split by the
  pre-tokenizer's regular expression that `tokenizer.ggml.pre` names, bytes mapped to GPT-2's
  printable characters, then the file's ranked merges.

Control tokens (`tokenizer.ggml.token_type` 3: "<s>", "<|im_start|>", ...) and user-defined
ones (4) are matched whole in the text. `encode` adds BOS (and EOS) where the file's
`add_bos_token` / `add_eos_token` say (llama: BOS by default; gpt2: neither).
"""

from __future__ import annotations

# llama.cpp's pre-tokenizer regular expressions (llama-vocab.cpp), by tokenizer.ggml.pre
_GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
_LLAMA3 = (
    r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+"""
    r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
_QWEN2 = _LLAMA3.replace(r"\p{N}{1,3}", r"\p{N}")
# name -> (regex, split digits one by one first)
PRE_TOKENIZERS = {
    "default": (_GPT2, False),
    "gpt-2": (_GPT2, False),
    "llama-bpe": (_LLAMA3, False),
    "llama3": (_LLAMA3, False),
    "qwen2": (_QWEN2, False),
    "smollm": (_GPT2, True),
    "starcoder": (_GPT2, True),
    "refact": (_GPT2, True),
}
_CONTROL, _USER, _BYTE = 3, 4, 6


def _tokenizers():
    try:
        import tokenizers
    except ImportError as e:
        raise ImportError(
            "pyrite: GGUFTokenizer needs the `tokenizers` package: pip install tokenizers"
        ) from e
    return tokenizers


def _spm_merges(tokens, scores, types):
    """The BPE merges equivalent to SentencePiece's score-ordered merging: (left, right) for
    each split of a normal piece into two vocabulary pieces, best-scored whole piece first
    (ties: the earlier piece in the vocabulary, then the shorter left part)."""
    index = {t: i for i, t in enumerate(tokens) if types[i] in (1, _USER)}
    found = []
    for piece, i in index.items():
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in index and right in index:
                found.append((-scores[i], i, k, left, right))
    found.sort()
    return [(left, right) for *_, left, right in found]


class GGUFTokenizer:
    """A GGUF model's tokenizer: `encode(text) -> list[int]`, `decode(ids) -> str`, and its
    special ids (`bos_token_id`, `eos_token_id`, `pad_token_id`, `unk_token_id`)."""

    def __init__(self, tokenizer, *, add_bos, add_eos, bos, eos, pad, unk, chat_template=None):
        self.tokenizer = tokenizer
        self.add_bos_token, self.add_eos_token = add_bos, add_eos
        self.bos_token_id, self.eos_token_id = bos, eos
        self.pad_token_id, self.unk_token_id = pad, unk
        self.chat_template = chat_template

    @classmethod
    def from_gguf(cls, gguf) -> GGUFTokenizer:
        """The tokenizer of a GGUF file (a path, or what `pyrite.io.load_gguf` read)."""
        from ..io import load_gguf
        from ..io._gguf import GGUFFile

        g = gguf if isinstance(gguf, GGUFFile) else load_gguf(gguf)
        m = g.metadata
        kind = m.get("tokenizer.ggml.model")
        tokens = m.get("tokenizer.ggml.tokens")
        if kind is None or tokens is None:
            raise ValueError(f"pyrite: GGUFTokenizer: {g.path!r} holds no tokenizer")
        types = m.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        if kind == "llama":
            tok = cls._spm(m, tokens, types)
            default_bos = True
        elif kind == "gpt2":
            tok = cls._byte_bpe(m, tokens)
            default_bos = False
        else:
            raise NotImplementedError(
                f"pyrite: GGUFTokenizer: tokenizer model {kind!r} is not supported (llama and "
                "gpt2 are)"
            )
        tk = _tokenizers()
        special = [
            tk.AddedToken(t, special=types[i] == _CONTROL, normalized=False)
            for i, t in enumerate(tokens)
            if types[i] in (_CONTROL, _USER)
        ]
        tok.add_special_tokens([s for s in special if s.special])
        tok.add_tokens([s for s in special if not s.special])
        return cls(
            tok,
            add_bos=bool(m.get("tokenizer.ggml.add_bos_token", default_bos)),
            add_eos=bool(m.get("tokenizer.ggml.add_eos_token", False)),
            bos=m.get("tokenizer.ggml.bos_token_id"),
            eos=m.get("tokenizer.ggml.eos_token_id"),
            pad=m.get("tokenizer.ggml.padding_token_id"),
            unk=m.get("tokenizer.ggml.unknown_token_id"),
            chat_template=m.get("tokenizer.chat_template"),
        )

    @staticmethod
    def _spm(m, tokens, types):
        tk = _tokenizers()
        scores = m.get("tokenizer.ggml.scores") or [0.0] * len(tokens)
        vocab = {t: i for i, t in enumerate(tokens)}
        unk_id = m.get("tokenizer.ggml.unknown_token_id", 0)
        model = tk.models.BPE(
            vocab=vocab,
            merges=_spm_merges(tokens, scores, types),
            unk_token=tokens[unk_id] if unk_id is not None and unk_id < len(tokens) else None,
            fuse_unk=True,
            byte_fallback=any(t == _BYTE for t in types),
        )
        tok = tk.Tokenizer(model)
        norm = [tk.normalizers.Replace(" ", "▁")]
        if m.get("tokenizer.ggml.add_space_prefix", True):
            norm.insert(0, tk.normalizers.Prepend("▁"))
        tok.normalizer = tk.normalizers.Sequence(norm)
        dec = [tk.decoders.Replace("▁", " "), tk.decoders.ByteFallback(), tk.decoders.Fuse()]
        if m.get("tokenizer.ggml.add_space_prefix", True):
            dec.append(tk.decoders.Strip(" ", 1, 0))
        tok.decoder = tk.decoders.Sequence(dec)
        return tok

    @staticmethod
    def _byte_bpe(m, tokens):
        tk = _tokenizers()
        pre = m.get("tokenizer.ggml.pre", "default")
        if pre not in PRE_TOKENIZERS:
            raise NotImplementedError(
                f"pyrite: GGUFTokenizer: pre-tokenizer {pre!r} is not known (known: "
                f"{', '.join(sorted(PRE_TOKENIZERS))})"
            )
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = [tuple(x.split(" ", 1)) for x in m.get("tokenizer.ggml.merges") or []]
        for pair in merges:  # (the tokenizers library panics on these)
            if len(pair) != 2 or any(t not in vocab for t in (*pair, "".join(pair))):
                raise ValueError(
                    f"pyrite: GGUFTokenizer: merge {' '.join(pair)!r} names pieces outside "
                    "the vocabulary: the file's tokenizer is damaged"
                )
        tok = tk.Tokenizer(tk.models.BPE(vocab=vocab, merges=merges))
        regex, digits = PRE_TOKENIZERS[pre]
        steps = [tk.pre_tokenizers.Digits(individual_digits=True)] if digits else []
        steps += [
            tk.pre_tokenizers.Split(tk.Regex(regex), behavior="isolated"),
            tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
        tok.pre_tokenizer = tk.pre_tokenizers.Sequence(steps)
        tok.decoder = tk.decoders.ByteLevel()
        return tok

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """The token ids of `text`, with BOS / EOS where the file asks for them."""
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        if add_special_tokens:
            if self.add_bos_token and self.bos_token_id is not None:
                ids = [self.bos_token_id, *ids]
            if self.add_eos_token and self.eos_token_id is not None:
                ids = [*ids, self.eos_token_id]
        return ids

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """The text of token ids (a list, or a 1-d tensor)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def __len__(self):
        return self.tokenizer.get_vocab_size(with_added_tokens=True)
