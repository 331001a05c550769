"""Token encoding (``data/encoding.py``): word pieces tokenise like the whole text, bytes are
their own ids, and the fast character path equals the vocabulary's lookup."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from highway_transformer.data.encoding import (
    byte_vocabulary,
    count_words,
    encode_bytes,
    encode_chars,
    encode_words,
    line_chunks,
    line_tokens,
    symbol_table,
)
from highway_transformer.data.vocab import EOS, UNK, Vocabulary
from highway_transformer.errors import DataError


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab \n\r\x0c\u2028", max_size=60), st.integers(1, 8))
def test_word_pieces_tokenise_like_the_whole_text(text: str, size: int) -> None:
    pieces = list(line_chunks(text, size))
    assert "".join(pieces) == text
    assert [t for piece in pieces for t in line_tokens(piece)] == line_tokens(text)
    vocab = Vocabulary.build(line_tokens(text) or ["a"], "word", unk=UNK, eos=EOS)
    assert vocab == Vocabulary.build(count_words(text) or {"a": 1}, "word", unk=UNK, eos=EOS)
    assert encode_words(text, vocab).tolist() == vocab.encode(line_tokens(text))


def test_bytes_are_their_own_ids_under_a_latin1_vocabulary() -> None:
    vocab = byte_vocabulary()
    assert len(vocab) == 256 and vocab.symbols[65] == "A" and vocab.level == "byte"
    assert encode_bytes(b"\x00A\xff").tolist() == [0, 65, 255]


def test_fast_character_ids_equal_the_vocabularys_lookup() -> None:
    vocab = Vocabulary.build("hello world", "char", unk=UNK)
    for text in ("hello", "held owl", "hello wörld", "xyz"):  # ASCII fast path and the other
        assert encode_chars(text, vocab).tolist() == vocab.encode(text)
    strict = Vocabulary(list("ab"), "char")
    with pytest.raises(DataError, match="^character 'c' is not in the vocabulary$"):
        encode_chars("abc", strict)
    table = symbol_table(strict, 128)
    assert (table[ord("a")], table[ord("b")], table[ord("c")]) == (0, 1, -1)
