"""Vocabularies: symbol <-> id maps saved beside every checkpoint."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..config import SUBWORD_LEVELS
from ..errors import CheckpointError, DataError

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
        from ..config import first_line, read_text

        text = read_text(path, CheckpointError, "vocabulary")
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise CheckpointError(f"cannot parse vocabulary {path}: {first_line(exc)}") from None
        if isinstance(data, dict) and data.get("level") in SUBWORD_LEVELS:
            from .subword import SubwordVocabulary

            return SubwordVocabulary.from_saved(data, Path(path).parent)
        try:
            return cls.from_dict(data)
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from None
