"""A user's corpus files (``data/user_files.py``): one file split 90/5/5 on characters, a folder
of train/valid/test.txt taken as it is, a checkpoint's vocabulary reused, and one-line errors
for what is missing, empty or not text."""

from __future__ import annotations

from pathlib import Path

import pytest

from highway_transformer.config import DataConfig
from highway_transformer.data.user_files import (
    file_corpus_splits,
    read_corpus_text,
    split_fractions,
)
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import DataError


def test_split_fractions_are_90_5_5() -> None:
    assert split_fractions(100) == (90, 95)
    assert split_fractions(7) == (6, 6)


def _decode(vocab: Vocabulary, ids: object) -> str:
    return "".join(vocab.decode(ids.tolist()))


def test_one_file_is_split_on_characters_never_inside_one(tmp_path: Path) -> None:
    text = "é" * 50 + "a" * 50  # two-byte characters: the cut is on characters, not bytes
    (tmp_path / "c.txt").write_text(text, encoding="utf-8")
    config = DataConfig(corpus="file", path=str(tmp_path / "c.txt"), cache=False)
    vocab, train, valid, test = file_corpus_splits(config, None)
    assert (train.numel(), valid.numel(), test.numel()) == (90, 5, 5)
    assert _decode(vocab, train) + _decode(vocab, valid) + _decode(vocab, test) == text


@pytest.mark.parametrize("cache", [False, True])
def test_a_folder_of_three_files_is_taken_as_it_is(tmp_path: Path, cache: bool) -> None:
    for split, words in (("train", "a b c a b"), ("valid", "a c"), ("test", "b d")):
        (tmp_path / f"{split}.txt").write_text(words + "\n", encoding="utf-8")
    config = DataConfig(corpus="file", path=str(tmp_path), level="word", cache=cache)
    vocab, train, valid, test = file_corpus_splits(config, None)
    assert vocab.decode(test.tolist()) == ["b", "<unk>", "<eos>"]  # d: unseen in training
    assert (train.numel(), valid.numel()) == (6, 3)
    again = file_corpus_splits(config, vocab)  # a checkpoint's vocabulary: the same ids
    assert [t.tolist() for t in again[1:]] == [t.tolist() for t in (train, valid, test)]


def test_bytes_need_no_text(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 4)
    config = DataConfig(corpus="file", path=str(tmp_path / "b.bin"), level="byte", cache=False)
    vocab, train, valid, test = file_corpus_splits(config, None)
    assert len(vocab) == 256 and train[:3].tolist() == [0, 1, 2]
    assert train.numel() + valid.numel() + test.numel() == 1024


def test_missing_empty_and_binary_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="^corpus=file needs data.path=FILE"):
        file_corpus_splits(DataConfig(corpus="file"), None)
    with pytest.raises(DataError, match="nowhere does not exist"):
        file_corpus_splits(DataConfig(corpus="file", path=str(tmp_path / "nowhere")), None)
    (tmp_path / "train.txt").write_text("x")
    with pytest.raises(DataError, match="valid.txt.*a corpus folder needs all three"):
        file_corpus_splits(DataConfig(corpus="file", path=str(tmp_path)), None)
    (tmp_path / "e.txt").write_text(" \n")
    with pytest.raises(DataError, match="is empty; give a text file with some content"):
        read_corpus_text(tmp_path / "e.txt")
    (tmp_path / "l.txt").write_bytes(b"caf\xe9")
    with pytest.raises(DataError, match="use data.level=byte for binary files"):
        read_corpus_text(tmp_path / "l.txt")
    (tmp_path / "z.txt").write_bytes(b"a\0b")
    assert read_corpus_text(tmp_path / "z.txt") == "a\0b"  # NUL is text here
