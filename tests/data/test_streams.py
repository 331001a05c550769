"""Long texts a piece at a time (``data/streams.py``): pieces decode to the whole text and end
only where their cut allows, ids read back the same from memory or a temporary file."""

from __future__ import annotations

import random

import numpy as np
import pytest

from highway_transformer.data.streams import (
    TokenFile,
    cut_after_line,
    cut_after_space,
    cut_anywhere,
    cut_before_space,
    read_chunks,
    text_pieces,
)
from highway_transformer.errors import DataError

ALPHABET = "ab Z9.,'\n\t  \n\r\x0bäé∑😀"


def _random_text(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def _chunks(data: bytes, size: int):
    return (data[i : i + size] for i in range(0, len(data), size))


#: Where each cut may fall: between ``before`` (a piece's last character) and ``after``
#: (the next piece's first).
ALLOWED = {
    cut_anywhere: lambda before, after: True,
    cut_after_line: lambda before, after: before == "\n",
    cut_after_space: lambda before, after: before in " \n",
    cut_before_space: lambda before, after: "!" <= before <= "~" and after in " \n",
}


@pytest.mark.parametrize("cut", list(ALLOWED))
@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_pieces_are_the_text_cut_where_allowed(cut, size: int) -> None:
    text = _random_text(500, seed=size)
    pieces = list(text_pieces(_chunks(text.encode("utf-8"), size), cut))
    assert "".join(pieces) == text  # code points split between chunks are joined
    assert all(pieces) and (len(pieces) > 5 or size == 64)
    for piece, after in zip(pieces[:-1], pieces[1:], strict=True):
        assert ALLOWED[cut](piece[-1], after[0])


def test_a_text_without_a_cut_is_one_piece_and_bad_utf8_is_named() -> None:
    assert list(text_pieces(_chunks(b"no-line-end", 2), cut_after_line)) == ["no-line-end"]
    with pytest.raises(DataError, match="not UTF-8"):
        list(text_pieces(_chunks(b"ok\n\xff\xfe", 2), cut_after_line))


def test_read_chunks_names_a_missing_file(tmp_path) -> None:
    with pytest.raises(DataError, match="cannot read"):
        list(read_chunks(tmp_path / "missing.txt"))


@pytest.mark.parametrize("spill", [1 << 20, 10])
def test_token_file_reads_back_in_memory_or_spilled(spill: int) -> None:
    ids = np.arange(40, dtype=np.int64) * 1000
    with TokenFile(np.dtype(np.uint16), spill) as tokens:
        for part in np.array_split(ids, 7):
            tokens.append(part)
        tokens.finish()
        assert tokens.on_disk == (spill == 10) and len(tokens) == 40
        for start, stop in [(0, 40), (3, 9), (39, 45), (40, 41)]:
            assert tokens.read(start, stop).tolist() == ids[start:stop].tolist()


@pytest.mark.parametrize("level", ["bpe", "unigram"])
def test_subword_pieces_tokenise_like_the_whole_text(level: str) -> None:
    """A byte-level tokenizer gives the pieces cut before white space the whole text's ids."""
    pytest.importorskip("tokenizers")
    from highway_transformer.data.vocab import SubwordVocabulary

    rng = random.Random(0)
    words = ["the", " gate", "  skips", "\n\n", "layers.", " 9", "'s", "\t", " ", "é"]
    text = "".join(rng.choice(words) + _random_text(2, rng.random()) for _ in range(1500))
    vocab = SubwordVocabulary.train(text, level, 320)
    whole = vocab.encode_text(text).tolist()
    for size in (1, 4, 17, 200):
        pieces = list(text_pieces(_chunks(text.encode("utf-8"), size), cut_before_space))
        assert len(pieces) > 10
        assert [i for piece in pieces for i in vocab.encode_text(piece).tolist()] == whole
