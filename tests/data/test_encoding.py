"""Token encoding (``data/encoding.py``): word pieces tokenise like the whole text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from highway_transformer.data.encoding import count_words, encode_words, line_chunks, line_tokens
from highway_transformer.data.vocab import EOS, UNK, Vocabulary


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab \n\r\x0c\u2028", max_size=60), st.integers(1, 8))
def test_word_pieces_tokenise_like_the_whole_text(text: str, size: int) -> None:
    pieces = list(line_chunks(text, size))
    assert "".join(pieces) == text
    assert [t for piece in pieces for t in line_tokens(piece)] == line_tokens(text)
    vocab = Vocabulary.build(line_tokens(text) or ["a"], "word", unk=UNK, eos=EOS)
    assert vocab == Vocabulary.build(count_words(text) or {"a": 1}, "word", unk=UNK, eos=EOS)
    assert encode_words(text, vocab).tolist() == vocab.encode(line_tokens(text))
