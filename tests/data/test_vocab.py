"""Vocabularies (``data/vocab.py``): build, save/load round trip, encode/decode, fast character
counts, and one-line errors for bad vocabularies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from highway_transformer.data.vocab import EOS, UNK, Vocabulary, count_symbols
from highway_transformer.errors import CheckpointError, DataError


def test_vocab_round_trip(tmp_path: Path) -> None:
    vocab = Vocabulary.build("abracadabra ", "char", unk=UNK, eos=EOS)
    assert vocab.symbols[:2] == [UNK, EOS]
    assert vocab.symbols[2] == "a"  # most frequent first
    path = tmp_path / "vocab.json"
    vocab.save(path)
    loaded = Vocabulary.load(path)
    assert loaded == vocab and len(loaded) == len(vocab)
    assert loaded.unk == UNK and loaded.eos == EOS and loaded.level == "char"
    ids = loaded.encode("cab!")
    assert loaded.decode(ids) == ["c", "a", "b", UNK]
    no_unk = Vocabulary(["x", "y"], "char")
    with pytest.raises(DataError, match="not in the vocabulary"):
        no_unk.encode("xz")
    with pytest.raises(DataError, match="unique"):
        Vocabulary(["x", "x"], "char")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CheckpointError):
        Vocabulary.load(tmp_path / "bad.json")
    (tmp_path / "partial.json").write_text('{"level": "char"}', encoding="utf-8")
    with pytest.raises(CheckpointError, match="malformed"):
        Vocabulary.load(tmp_path / "partial.json")


def test_fast_character_counts_match_counter() -> None:
    text = "the quick brown fox\njumps over the lazy dog  \t" * 50
    assert count_symbols(text) == Counter(text)
    assert count_symbols("naïve ∑") == Counter("naïve ∑")  # not ASCII: the general path
    assert Vocabulary.build(text, "char", unk=UNK).symbols[:3] == [UNK, " ", "o"]
