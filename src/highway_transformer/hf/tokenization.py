"""Our vocabularies as Transformers tokenizers (``PreTrainedTokenizerFast``), saved as
``tokenizer.json``: JSON only, loaded by ``AutoTokenizer`` without any code of ours.

* BPE / unigram runs: the saved ``tokenizers`` tokenizer itself.
* character, word and byte runs: a ``WordLevel`` model over our symbols (ids unchanged),
  with the rules of :func:`~highway_transformer.models.generation.tokenize_prompt` and
  :func:`~highway_transformer.models.generation.detokenize`: characters (line ends as the
  end-of-line symbol, spaces as ``_`` for character PTB), whitespace-separated words, or
  the UTF-8 bytes of the text. Words differ in one respect: a line end is the end-of-line
  word, as in the corpus and ``highway eval --file`` (a prompt of ours drops it).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..data.subword import tokenizers_module
from ..data.vocab import SubwordVocabulary, Vocabulary
from ..errors import CheckpointError
from ..extras import import_extra
from ..models.generation import spells_spaces

transformers = import_extra("transformers", "the Transformers integration (highway_transformer.hf)")


@cache
def byte_symbols() -> tuple[str, ...]:
    """GPT-2's printable character of each byte 0..255 (what the ``ByteLevel``
    pre-tokenizer of ``tokenizers`` turns a byte into)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = {}, 0
    for byte in range(256):
        if byte in kept:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return tuple(chars[b] for b in range(256))


def _word_level(vocab: Vocabulary, keys: list[str]) -> Any:
    tk = tokenizers_module()
    table = {key: i for i, key in enumerate(keys)}
    return tk.Tokenizer(tk.models.WordLevel(table, unk_token=vocab.unk or "<unk>"))


def _byte_tokenizer(vocab: Vocabulary) -> Any:
    tk = tokenizers_module()
    mapped = byte_symbols()
    keys = [mapped[ord(s)] if len(s) == 1 and ord(s) < 256 else s for s in vocab.symbols]
    tokenizer = _word_level(vocab, keys)
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Sequence(
        [
            tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            tk.pre_tokenizers.Split(tk.Regex("."), behavior="isolated"),
        ]
    )
    tokenizer.decoder = tk.decoders.ByteLevel()
    return tokenizer


def _char_tokenizer(vocab: Vocabulary) -> Any:
    tk = tokenizers_module()
    tokenizer = _word_level(vocab, vocab.symbols)
    replaces = []
    if spells_spaces(vocab):
        replaces.append(tk.normalizers.Replace(" ", "_"))
    if vocab.eos is not None:
        replaces.append(tk.normalizers.Replace("\n", vocab.eos))
    if replaces:
        tokenizer.normalizer = tk.normalizers.Sequence(replaces)
    one = r"[\s\S]" if vocab.eos is None else re.escape(vocab.eos) + r"|[\s\S]"
    tokenizer.pre_tokenizer = tk.pre_tokenizers.Split(tk.Regex(one), behavior="isolated")
    decoders = [] if vocab.eos is None else [tk.decoders.Replace(vocab.eos, "\n")]
    if spells_spaces(vocab):
        decoders.append(tk.decoders.Replace("_", " "))
    tokenizer.decoder = tk.decoders.Sequence([*decoders, tk.decoders.Fuse()])
    return tokenizer


def _word_tokenizer(vocab: Vocabulary) -> Any:
    tk = tokenizers_module()
    tokenizer = _word_level(vocab, vocab.symbols)
    if vocab.eos is not None:  # a line ends with the end-of-line word, as in the corpus
        tokenizer.normalizer = tk.normalizers.Replace("\n", f" {vocab.eos} ")
    tokenizer.pre_tokenizer = tk.pre_tokenizers.WhitespaceSplit()
    # words joined by spaces: WordPiece puts one before every token not starting with its
    # prefix, and no word split at whitespace starts with a space
    decoders = [] if vocab.eos is None else [tk.decoders.Replace(vocab.eos, "\n")]
    tokenizer.decoder = tk.decoders.Sequence(
        [*decoders, tk.decoders.WordPiece(prefix=" ", cleanup=False)]
    )
    return tokenizer


def backend_tokenizer(vocab: Vocabulary) -> Any:
    """The ``tokenizers.Tokenizer`` that encodes and decodes text as ``vocab`` does."""
    if isinstance(vocab, SubwordVocabulary):
        return tokenizers_module().Tokenizer.from_str(vocab.json)
    builders = {"byte": _byte_tokenizer, "char": _char_tokenizer, "word": _word_tokenizer}
    if vocab.level not in builders:
        raise CheckpointError(f"no Transformers tokenizer for vocabulary level {vocab.level!r}")
    return builders[vocab.level](vocab)


def build_tokenizer(vocab: Vocabulary) -> Any:
    """A ``PreTrainedTokenizerFast`` of ``vocab``: the same ids, ``<eos>`` (the line end,
    where there is one) its end-of-sequence token, padding on the right with a symbol of the
    vocabulary (a causal model never reads it; a new padding symbol would have no weights)."""
    pad = vocab.eos or vocab.unk or vocab.symbols[0]
    specials = {"unk_token": vocab.unk, "eos_token": vocab.eos, "pad_token": pad}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend_tokenizer(vocab),
        clean_up_tokenization_spaces=False,
        padding_side="right",
        model_input_names=["input_ids", "attention_mask"],
        **{name: token for name, token in specials.items() if token is not None},
    )
