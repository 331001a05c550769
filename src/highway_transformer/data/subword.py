"""Subword vocabularies (BPE, unigram) trained on the user's text with ``tokenizers``.

Both kinds work on bytes (the GPT-2 byte-level pre-tokeniser and decoder): every text
encodes without ``<unk>`` and decodes back to itself, spaces, line ends and all. The
tokenizer is saved beside ``vocab.json`` as ``tokenizer.json``; ``vocab.json`` records its
SHA-256, checked when it is loaded, so a checkpoint never runs with another tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from ..config import SUBWORD_LEVELS
from ..errors import CheckpointError, DataError
from ..extras import import_extra
from .vocab import Vocabulary

TOKENIZER_FILE = "tokenizer.json"
DEFAULT_SIZE = 1000  # data.subword_vocab_size when not set


def _tokenizers() -> Any:
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


class SubwordVocabulary(Vocabulary):
    """A :class:`Vocabulary` whose symbols are a trained tokenizer's tokens, in id order."""

    def __init__(self, tokenizer: Any, level: str) -> None:
        if level not in SUBWORD_LEVELS:
            raise DataError(f"subword level must be one of {SUBWORD_LEVELS}, got {level!r}")
        size = tokenizer.get_vocab_size()
        super().__init__([tokenizer.id_to_token(i) for i in range(size)], level)
        self.tokenizer = tokenizer
        self.json = tokenizer.to_str()
        self.sha256 = hashlib.sha256(self.json.encode("utf-8")).hexdigest()

    @classmethod
    def train(cls, text: str, level: str, size: int | None = None) -> SubwordVocabulary:
        """Train a ``level`` (bpe | unigram) tokenizer of at most ``size`` tokens on ``text``."""
        tk = _tokenizers()
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
        return cls(tokenizer, level)

    def encode_text(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (int64)."""
        return np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)

    def decode_text(self, ids: Any) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def to_dict(self) -> dict:
        return {**super().to_dict(), "tokenizer": TOKENIZER_FILE, "tokenizer_sha256": self.sha256}

    def save(self, path: str | Path) -> None:
        """``vocab.json`` at ``path`` and ``tokenizer.json`` beside it."""
        (Path(path).parent / TOKENIZER_FILE).write_text(self.json, encoding="utf-8")
        super().save(path)

    @classmethod
    def from_saved(cls, data: dict, folder: Path) -> SubwordVocabulary:
        """The vocabulary described by ``data`` (a ``vocab.json``) with its tokenizer file."""
        path = folder / data.get("tokenizer", TOKENIZER_FILE)
        try:
            raw = path.read_bytes()
        except OSError:
            raise CheckpointError(
                f"{path} is missing; a {data.get('level')} vocabulary needs the tokenizer file "
                "saved with it"
            ) from None
        if hashlib.sha256(raw).hexdigest() != data.get("tokenizer_sha256"):
            raise CheckpointError(
                f"{path} does not match the SHA-256 recorded in vocab.json; restore the "
                "tokenizer.json saved with this checkpoint"
            )
        try:
            tokenizer = _tokenizers().Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # the Rust library raises its own exception type
            raise CheckpointError(f"cannot read {path}: {exc}") from None
        vocab = cls(tokenizer, data["level"])
        vocab.json, vocab.sha256 = raw.decode("utf-8"), data["tokenizer_sha256"]
        if vocab.symbols != data.get("symbols"):
            raise CheckpointError(f"{path} does not hold the symbols listed in vocab.json")
        return vocab
