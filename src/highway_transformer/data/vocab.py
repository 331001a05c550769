"""Vocabularies: symbol <-> id maps saved beside every checkpoint."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..config import SUBWORD_LEVELS
from ..errors import CheckpointError, DataError
from ..storage.folder import TOKENIZER_FILE, VOCAB_FILE, read_json, resolve, verify
from .subword import tokenizers_module, train_tokenizer

UNK = "<unk>"
LEVELS = ("char", "word", "byte")
EOS = "<eos>"


def count_symbols(tokens: Iterable[str]) -> Counter[str]:
    """Symbol counts; an ASCII text is counted with numpy (100M characters in a second)."""
    if isinstance(tokens, str) and tokens.isascii():
        counts = np.bincount(np.frombuffer(tokens.encode("ascii"), np.uint8), minlength=128)
        return Counter({chr(i): int(n) for i, n in enumerate(counts) if n})
    return Counter(tokens)


class Vocabulary:
    """An ordered list of symbols; ``level`` is one of :data:`~highway_transformer.config.LEVELS`.

    ``eos`` is the line-end symbol appended to every line (word and PTB char levels; counted
    as a symbol in bpc, as the papers do). ``unk`` maps symbols outside the vocabulary.
    """

    def __init__(
        self, symbols: Sequence[str], level: str, unk: str | None = None, eos: str | None = None
    ) -> None:
        if len(set(symbols)) != len(symbols):
            raise DataError("vocabulary symbols must be unique")
        self.symbols = list(symbols)
        self.level = level
        self.unk = unk
        self.eos = eos
        self.index = {s: i for i, s in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.to_dict() == other.to_dict()

    @classmethod
    def build(
        cls,
        tokens: Iterable[str],
        level: str,
        unk: str | None = None,
        eos: str | None = None,
        extra: Iterable[str] = (),
    ) -> Vocabulary:
        """Symbols sorted by frequency (ties by symbol), specials first.

        ``tokens`` are the symbols of the text, or a :class:`~collections.Counter` of them.
        """
        counts = count_symbols(tokens)
        specials = [s for s in (unk, eos, *extra) if s is not None]
        for special in specials:
            counts.pop(special, None)
        ordered = sorted(counts, key=lambda s: (-counts[s], s))
        return cls(specials + ordered, level, unk, eos)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        index, unk_id = self.index, self.index.get(self.unk) if self.unk else None
        out = []
        for token in tokens:
            idx = index.get(token, unk_id)
            if idx is None:
                raise DataError(
                    f"symbol {token!r} is not in the vocabulary of {len(self)} symbols "
                    "(and the vocabulary has no <unk>)"
                )
            out.append(idx)
        return out

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.symbols[i] for i in ids]

    def to_dict(self) -> dict:
        return {"level": self.level, "unk": self.unk, "eos": self.eos, "symbols": self.symbols}

    @classmethod
    def from_dict(cls, data: dict) -> Vocabulary:
        """A vocabulary from its saved form; every field's type is checked."""
        if not isinstance(data, dict):
            raise CheckpointError("malformed vocabulary: expected a JSON object")
        symbols, level = data.get("symbols"), data.get("level")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise CheckpointError("malformed vocabulary: 'symbols' must be a list of strings")
        if level not in LEVELS:
            raise CheckpointError(f"malformed vocabulary: 'level' must be one of {LEVELS}")
        specials = {k: data.get(k) for k in ("unk", "eos")}
        for key, value in specials.items():
            if value is not None and value not in symbols:
                raise CheckpointError(f"malformed vocabulary: {key} {value!r} is not a symbol")
        try:
            return cls(symbols, level, specials["unk"], specials["eos"])
        except DataError as exc:
            raise CheckpointError(f"malformed vocabulary: {exc}") from None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocabulary:
        """A saved vocabulary of either kind (a subword one with the tokenizer beside it)."""
        data = read_json(Path(path), "vocabulary")
        if isinstance(data, dict) and data.get("level") in SUBWORD_LEVELS:
            return SubwordVocabulary.from_saved(data, Path(path).parent)
        try:
            return cls.from_dict(data)
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from None


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
        """Train a ``level`` (bpe | unigram) tokenizer of at most ``size`` tokens on ``text``
        (:func:`~highway_transformer.data.subword.train_tokenizer`)."""
        return cls(train_tokenizer(text, level, size), level)

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
            tokenizer = tokenizers_module().Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # the Rust library raises its own exception type
            raise CheckpointError(f"cannot read {path}: {exc}") from None
        vocab = cls(tokenizer, data["level"])
        vocab.json, vocab.sha256 = raw.decode("utf-8"), data["tokenizer_sha256"]
        if vocab.symbols != data.get("symbols"):
            raise CheckpointError(f"{path} does not hold the symbols listed in vocab.json")
        return vocab


def read_vocab(folder: str | Path, size: int | None = None) -> Vocabulary:
    """A checkpoint's vocabulary, verified against the folder's manifest; ``size``, the
    model's ``vocab_size``: a vocabulary of another size belongs to another run."""
    path = verify(resolve(folder), VOCAB_FILE)
    vocab = Vocabulary.load(path)
    if size is not None and len(vocab) != size:
        raise CheckpointError(
            f"{path} has {len(vocab)} symbols but the model was built for {size}; the "
            "vocabulary belongs to another run: restore the checkpoint's own vocab.json or "
            "use the weights it was saved with"
        )
    return vocab
