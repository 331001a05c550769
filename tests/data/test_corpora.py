"""Corpora (``data/corpora.py``): the pydoc corpus, truncation, user files at every level,
the Penn Treebank and its character streams, and their one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from highway_transformer.config import DataConfig
from highway_transformer.data.corpora import load_corpus
from highway_transformer.data.vocab import EOS, UNK
from highway_transformer.errors import ConfigError, DataError

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_pydoc_corpus() -> None:
    corpus = load_corpus(DataConfig(corpus="pydoc"))
    sizes = [corpus.train.numel(), corpus.valid.numel(), corpus.test.numel()]
    total = sum(sizes)
    assert 400_000 < total < 550_000  # ~465k characters (varies a little by Python version)
    assert sizes[0] / total == pytest.approx(0.90, abs=1e-4)
    assert sizes[1] / total == pytest.approx(0.05, abs=1e-4)
    assert corpus.vocab.level == "char" and corpus.vocab.unk == UNK
    assert int(corpus.train.max()) < len(corpus.vocab)
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    assert len(text) == total
    decoded = "".join(corpus.vocab.decode(corpus.train[:500].tolist()))
    assert decoded == text[:500]


def test_truncation_knobs() -> None:
    corpus = load_corpus(DataConfig(corpus="pydoc", max_train_tokens=1000, max_eval_tokens=100))
    assert corpus.train.numel() == 1000
    assert corpus.valid.numel() == corpus.test.numel() == 100
    with pytest.raises(ConfigError, match="split"):
        corpus.split("dev")


TEXT = "the cat sat on the mat\nthe dog sat on the log\n" * 30


def test_file_corpus_char_level(tmp_path: Path) -> None:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level="char"))
    n = len(TEXT)
    assert corpus.train.numel() == int(n * 0.9)
    assert corpus.valid.numel() == int(n * 0.95) - int(n * 0.9)
    assert corpus.test.numel() == n - int(n * 0.95)
    decoded = "".join(corpus.vocab.decode(torch.cat([corpus.train, corpus.valid]).tolist()))
    assert decoded == TEXT[: int(n * 0.95)]


def test_file_corpus_word_level(tmp_path: Path) -> None:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level="word"))
    assert corpus.vocab.level == "word" and corpus.vocab.eos == EOS
    assert set(corpus.vocab.symbols) == {UNK, EOS, "the", "cat", "sat", "on", "mat", "dog", "log"}
    first = corpus.vocab.decode(corpus.train[:7].tolist())
    assert first == ["the", "cat", "sat", "on", "the", "mat", EOS]


def test_file_corpus_byte_level(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level="byte"))
    assert len(corpus.vocab) == 256
    joined = torch.cat([corpus.train, corpus.valid, corpus.test])
    assert joined.tolist() == list(data)


def test_file_corpus_folder(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("a b c a b\n" * 10, encoding="utf-8")
    (tmp_path / "valid.txt").write_text("a b z\n", encoding="utf-8")
    (tmp_path / "test.txt").write_text("c c\n", encoding="utf-8")
    words = load_corpus(DataConfig(corpus="file", path=str(tmp_path), level="word"))
    assert words.valid.numel() == 4 and words.test.numel() == 3
    assert words.vocab.decode(words.valid.tolist()) == ["a", "b", UNK, EOS]
    chars = load_corpus(DataConfig(corpus="file", path=str(tmp_path), level="char"))
    assert chars.train.numel() == 100 and chars.valid.numel() == 6
    assert chars.vocab.decode(chars.valid.tolist()) == ["a", " ", "b", " ", UNK, "\n"]
    raw = load_corpus(DataConfig(corpus="file", path=str(tmp_path), level="byte"))
    assert raw.test.tolist() == list(b"c c\n")
    (tmp_path / "test.txt").unlink()
    with pytest.raises(DataError, match="test.txt"):
        load_corpus(DataConfig(corpus="file", path=str(tmp_path)))


def test_file_corpus_utf8_text_with_multibyte_characters(tmp_path: Path) -> None:
    path = tmp_path / "accents.txt"
    text = "a" + "é" * 100  # 201 bytes: the 90% cut (byte 180) falls inside an 'é'
    path.write_text(text, encoding="utf-8")
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level="char"))
    joined = torch.cat([corpus.train, corpus.valid, corpus.test])
    assert "".join(corpus.vocab.decode(joined.tolist())) == text


@pytest.mark.parametrize("content", [b"", b"  \n\n  "])
def test_empty_file_is_a_data_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    with pytest.raises(DataError, match="empty"):
        load_corpus(DataConfig(corpus="file", path=str(path), level="char"))


def test_non_utf8_file_at_char_level(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"\xff\xfe\xfa caf\xe9 " * 50)
    with pytest.raises(DataError, match="data.level=byte"):
        load_corpus(DataConfig(corpus="file", path=str(path), level="char"))
    corpus = load_corpus(DataConfig(corpus="file", path=str(path), level="byte"))
    assert corpus.train.numel() > 0


def test_file_corpus_needs_an_existing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="data.path"):
        load_corpus(DataConfig(corpus="file", path=None))
    with pytest.raises(DataError, match="does not exist"):
        load_corpus(DataConfig(corpus="file", path=str(tmp_path / "nope.txt")))


def test_unknown_corpus() -> None:
    with pytest.raises(ConfigError, match="ptb-word"):
        load_corpus(DataConfig(corpus="ptb"))


@pytest.mark.parametrize("corpus", ["ptb-word", "ptb-char", "ptb-char-rt"])
def test_missing_ptb_folder_names_data_path(tmp_path: Path, corpus: str) -> None:
    with pytest.raises(DataError, match="data.path"):
        load_corpus(DataConfig(corpus=corpus, path=str(tmp_path / "ptb")), download=True)


PTB = SHARED_DATA / "ptb"


@pytest.mark.skipif(
    not (PTB / "ptb.train.txt").is_file(), reason=f"Penn Treebank files not present at {PTB}"
)
@pytest.mark.parametrize(
    ("corpus", "sizes", "n_symbols"),
    [
        ("ptb-word", (929_589, 73_760, 82_430), 10_000),
        ("ptb-char", (5_059_550, 396_412, 446_184), 50),
    ],
)
def test_ptb_token_counts(corpus: str, sizes: tuple[int, int, int], n_symbols: int) -> None:
    loaded = load_corpus(DataConfig(corpus=corpus, path=str(PTB)))
    got = (loaded.train.numel(), loaded.valid.numel(), loaded.test.numel())
    assert got == sizes
    assert len(loaded.vocab) == n_symbols
    assert EOS in loaded.vocab.index


@pytest.mark.skipif(
    not (PTB / "ptb.char.train.txt").is_file(), reason=f"Penn Treebank files not present at {PTB}"
)
def test_a_folder_of_the_char_files_alone_serves_char_ptb(tmp_path: Path) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.char.{split}.txt").symlink_to(PTB / f"ptb.char.{split}.txt")
    loaded = load_corpus(DataConfig(corpus="ptb-char", path=str(tmp_path)))
    assert loaded.valid.numel() == 396_412
    with pytest.raises(DataError, match=r"expected ptb\.train\.txt and its valid/test twins"):
        load_corpus(DataConfig(corpus="ptb-word", path=str(tmp_path)))


@pytest.mark.skipif(
    not (PTB / "ptb.train.txt").is_file(), reason=f"Penn Treebank files not present at {PTB}"
)
def test_ptb_char_rt_is_the_r_transformer_codes_character_stream() -> None:
    """language_char/utils.py reads the word files through observations.ptb: every line feed
    becomes the five characters <eos>, one symbol per character (49 in all)."""
    loaded = load_corpus(DataConfig(corpus="ptb-char-rt", path=str(PTB)))
    assert (loaded.train.numel(), loaded.valid.numel(), loaded.test.numel()) == (
        5_269_890, 413_262, 464_989
    )  # fmt: skip
    assert len(loaded.vocab) == 49 and EOS not in loaded.vocab.index
    text = (PTB / "ptb.valid.txt").read_text(encoding="utf-8")
    first_lines = text[: text.index("\n", text.index("\n") + 1) + 1].replace("\n", "<eos>")
    decoded = "".join(loaded.vocab.symbols[i] for i in loaded.valid[: len(first_lines)].tolist())
    assert decoded == first_lines
