"""Subword tokenizers (BPE, unigram) trained on the user's text with ``tokenizers``.

Both kinds work on bytes (the GPT-2 byte-level pre-tokeniser and decoder): every text
encodes without ``<unk>`` and decodes back to itself, spaces, line ends and all. A trained
tokenizer becomes a :class:`~highway_transformer.data.vocab.SubwordVocabulary`, which saves
and checks it.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import DataError
from ..extras import import_extra

DEFAULT_SIZE = 1000  # data.subword_vocab_size when not set


def tokenizers_module() -> Any:
    return import_extra("tokenizers", "subword vocabularies (data.level=bpe|unigram)")


def _canonical_unigram(tk: Any, tokenizer: Any) -> Any:
    """The trained unigram model with reproducible ids and scores.

    The trainer lists equally scored pieces in any order, and appends the characters it must
    keep (bytes absent from the text or pruned) with scores 1e-4 apart, then equal, in a
    different order each run. Here that tail is sorted by character, keeping its scores; the
    rest by score (rounded to 1e-6), then piece: the same text gives the same tokenizer.json.
    """
    pieces = json.loads(tokenizer.to_str())["model"]["vocab"]
    ranked = sorted(((round(score, 6), piece) for piece, score in pieces), key=lambda x: -x[0])
    tail = len(ranked) - 1
    while tail > 0 and len(ranked[tail - 1][1]) == 1:
        step = ranked[tail - 1][0] - ranked[tail][0]
        if min(abs(step), abs(step - 1e-4)) > 1e-6:  # the tail's steps: 1e-4, then 0
            break
        tail -= 1
    head = sorted(ranked[:tail], key=lambda x: (-x[0], x[1]))
    chars = sorted(piece for _, piece in ranked[tail:])
    scores = [score for score, _ in ranked[tail:]]
    return tk.models.Unigram(
        [(p, sc) for sc, p in head] + list(zip(chars, scores, strict=True)), None, False
    )


def train_tokenizer(text: str, level: str, size: int | None = None) -> Any:
    """A byte-level ``level`` (bpe | unigram) tokenizer of at most ``size`` tokens (default
    :data:`DEFAULT_SIZE`) trained on ``text``."""
    tk = tokenizers_module()
    size = size or DEFAULT_SIZE
    alphabet = tk.pre_tokenizers.ByteLevel.alphabet()  # all 256 bytes: nothing is unknown
    if size < len(alphabet):
        raise DataError(
            f"data.subword_vocab_size={size} is below the {len(alphabet)} byte symbols a "
            f"byte-level tokenizer needs; use at least {len(alphabet)}"
        )
    if level == "bpe":
        model = tk.models.BPE()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=size, initial_alphabet=alphabet, show_progress=False
        )
    else:
        model = tk.models.Unigram()
        trainer = tk.trainers.UnigramTrainer(
            vocab_size=size, initial_alphabet=alphabet, show_progress=False
        )
    tokenizer = tk.Tokenizer(model)
    tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tk.decoders.ByteLevel()
    tokenizer.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    if level == "unigram":
        tokenizer.model = _canonical_unigram(tk, tokenizer)
    return tokenizer
