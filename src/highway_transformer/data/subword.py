"""Subword vocabularies (BPE, unigram) trained on the user's text with ``tokenizers``.

Both kinds work on bytes (the GPT-2 byte-level pre-tokeniser and decoder): every text
encodes without ``<unk>`` and decodes back to itself, spaces, line ends and all. The
tokenizer is saved beside ``vocab.json`` as ``tokenizer.json``; ``vocab.json`` records its
SHA-256, checked when it is loaded, so a checkpoint never runs with another tokenizer.
"""

from __future__ import annotations

import hashlib
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
