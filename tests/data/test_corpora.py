"""Batching (every target counted once), vocabularies, corpora and checked downloads."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from highway_transformer.config import DataConfig
from highway_transformer.data.batching import (
    IGNORE,
    eval_rows,
    train_rows,
    window_bounds,
    windows,
)
from highway_transformer.data.corpora import count_words, encode_words, line_tokens, load_corpus
from highway_transformer.data.download import fetch, sha256_of
from highway_transformer.data.encoding import line_chunks
from highway_transformer.data.vocab import EOS, UNK, Vocabulary, count_symbols
from highway_transformer.errors import CheckpointError, ConfigError, DataError

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

# ------------------------------------------------------------------ batching


@pytest.mark.parametrize(
    ("length", "batch", "seq_len", "context"),
    [
        (2, 4, 5, 0),  # a single target
        (17, 1, 5, 0),
        (33, 4, 8, 0),  # ragged last row
        (33, 4, 8, 3),  # ragged tail and context
        (50, 3, 6, 5),  # context = seq_len - 1
        (101, 7, 9, 4),
        (64, 5, 100, 10),  # windows longer than the rows
        (9, 16, 4, 2),  # more rows asked than targets
    ],
)
def test_eval_windows_count_every_target_once(
    length: int, batch: int, seq_len: int, context: int
) -> None:
    ids = torch.arange(1000, 1000 + length)  # distinct ids: each names its own position
    inputs, targets = eval_rows(ids, batch)
    counted: list[int] = []
    for window in windows(inputs, targets, seq_len, context):
        assert window.inputs.shape == window.targets.shape
        assert window.inputs.shape[1] <= seq_len
        y = window.targets[:, window.loss_start :]
        x = window.inputs[:, window.loss_start :]
        valid = y != IGNORE
        counted.extend(y[valid].tolist())
        # each counted target is predicted from its own predecessor in the stream
        assert torch.equal(x[valid], y[valid] - 1)
    assert Counter(counted) == Counter(ids[1:].tolist())
    assert sorted(counted) == ids[1:].tolist()


def test_eval_rows_layout() -> None:
    ids = torch.arange(11)
    inputs, targets = eval_rows(ids, 3)
    assert inputs.shape == targets.shape == (3, 4)  # 10 targets in 3 rows of 4, 2 padded
    assert targets[0].tolist() == [1, 2, 3, 4]
    assert targets[2].tolist() == [9, 10, IGNORE, IGNORE]
    assert inputs[1].tolist() == [4, 5, 6, 7]
    with pytest.raises(DataError, match="at least 2 tokens"):
        eval_rows(torch.arange(1), 4)


def test_window_bounds() -> None:
    assert window_bounds(10, 4, 1) == [(0, 4, 0), (3, 7, 1), (6, 10, 1)]
    assert window_bounds(9, 4, 1) == [(0, 4, 0), (3, 7, 1), (5, 9, 2)]  # ragged tail
    assert window_bounds(8, 4, 0) == [(0, 4, 0), (4, 8, 0)]
    assert window_bounds(3, 8, 2) == [(0, 3, 0)]
    # with memory (XL) the ragged last window is shorter instead of reaching back
    assert window_bounds(9, 4, 0, memory=True) == [(0, 4, 0), (4, 8, 0), (8, 9, 0)]
    assert window_bounds(9, 4, 1, memory=True) == [(0, 4, 0), (3, 7, 1), (6, 9, 1)]
    assert window_bounds(10, 4, 1, memory=True) == window_bounds(10, 4, 1)  # no ragged tail
    bounds = window_bounds(400, 400 // 2, 80)
    assert bounds[0] == (0, 200, 0)  # the first window counts all its positions
    assert all(loss_start == 80 for _, _, loss_start in bounds[1:-1])
    for context in (-1, 4):
        with pytest.raises(DataError, match="context"):
            window_bounds(10, 4, context)


@pytest.mark.parametrize("memory", [False, True])
def test_window_bounds_tile_the_positions(memory: bool) -> None:
    for length, seq_len, context in [(37, 6, 2), (100, 10, 9), (5, 5, 0), (23, 4, 0)]:
        counted = []
        for start, end, loss_start in window_bounds(length, seq_len, context, memory):
            assert end - start <= seq_len
            assert not memory or loss_start <= context  # never history the memory holds
            counted.extend(range(start + loss_start, end))
        assert counted == list(range(length))


def test_train_rows() -> None:
    ids = torch.arange(23)
    inputs, targets = train_rows(ids, 4, 3)
    assert inputs.shape == targets.shape == (4, 5)
    assert torch.equal(targets, inputs + 1)
    assert inputs[1, 0].item() == 5  # contiguous rows, remainder dropped


@pytest.mark.parametrize(("n", "batch", "seq_len"), [(5, 4, 8), (1, 1, 1), (8, 4, 4)])
def test_train_rows_too_short(n: int, batch: int, seq_len: int) -> None:
    with pytest.raises(DataError, match="too few"):
        train_rows(torch.arange(n), batch, seq_len)


# ------------------------------------------------------------------ vocabulary


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


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab \n\r\x0c\u2028", max_size=60), st.integers(1, 8))
def test_word_pieces_tokenise_like_the_whole_text(text: str, size: int) -> None:
    pieces = list(line_chunks(text, size))
    assert "".join(pieces) == text
    assert [t for piece in pieces for t in line_tokens(piece)] == line_tokens(text)
    vocab = Vocabulary.build(line_tokens(text) or ["a"], "word", unk=UNK, eos=EOS)
    assert vocab == Vocabulary.build(count_words(text) or {"a": 1}, "word", unk=UNK, eos=EOS)
    assert encode_words(text, vocab).tolist() == vocab.encode(line_tokens(text))


def test_fast_character_counts_match_counter() -> None:
    text = "the quick brown fox\njumps over the lazy dog  \t" * 50
    assert count_symbols(text) == Counter(text)
    assert count_symbols("naïve ∑") == Counter("naïve ∑")  # not ASCII: the general path
    assert Vocabulary.build(text, "char", unk=UNK).symbols[:3] == [UNK, " ", "o"]


# ------------------------------------------------------------------ corpora


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


# ------------------------------------------------------------------ downloads


def test_fetch_file_url_checked_and_cached(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    payload = b"corpus bytes " * 100
    source.write_bytes(payload)
    digest = hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "cache" / "copy.bin"
    assert fetch(source.as_uri(), digest, dest) == dest
    assert dest.read_bytes() == payload and sha256_of(dest) == digest
    source.unlink()  # a second fetch must not need the source: the checked file is cached
    assert fetch(source.as_uri(), digest, dest) == dest
    assert dest.read_bytes() == payload
    assert sorted(p.name for p in dest.parent.iterdir()) == ["copy.bin"]


def test_fetch_wrong_checksum_leaves_nothing(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"tampered")
    dest = tmp_path / "cache" / "copy.bin"
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch(source.as_uri(), "0" * 64, dest)
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no partial download left behind


def test_fetch_replaces_a_corrupt_cached_file(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"good")
    dest = tmp_path / "copy.bin"
    dest.write_bytes(b"corrupt")
    fetch(source.as_uri(), hashlib.sha256(b"good").hexdigest(), dest)
    assert dest.read_bytes() == b"good"


def test_fetch_unreachable_source_is_a_data_error(tmp_path: Path) -> None:
    dest = tmp_path / "copy.bin"
    with pytest.raises(DataError, match="could not download"):
        fetch((tmp_path / "missing.bin").as_uri(), None, dest)
    assert not dest.exists()
