"""Text into token ids: the encoders every corpus and file reader shares.

Word level: whitespace tokens with an end-of-line symbol after each line (the PTB formats);
character level: one id per character (a lookup table on the bytes for ASCII text); byte
level: one id per byte. Long texts are encoded a piece at a time, never as one Python list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

from ..errors import DataError
from .vocab import EOS, Vocabulary


def line_tokens(text: str, eos: str = EOS) -> list[str]:
    """Whitespace tokens of each line followed by ``eos`` (PTB word and char formats)."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(line.split())
        out.append(eos)
    return out


def line_chunks(text: str, size: int = 1 << 22) -> Iterator[str]:
    """Pieces of ``text`` of about ``size`` characters, each ending after a line feed.

    ``line_tokens`` of the pieces, joined, equals ``line_tokens(text)``: a cut after ``\\n``
    never splits a line break.
    """
    start = 0
    while start < len(text):
        end = text.find("\n", start + size - 1) + 1 or len(text)
        yield text[start:end]
        start = end


def count_words(text: str) -> Counter[str]:
    """Counts of ``line_tokens(text)``, a piece at a time (no list of every token)."""
    counts: Counter[str] = Counter()
    for piece in line_chunks(text):
        counts.update(line_tokens(piece))
    return counts


def encode_words(text: str, vocab: Vocabulary) -> Tensor:
    """Ids of ``line_tokens(text)``, a piece at a time: 8 bytes a token, not a Python list."""
    parts = [np.asarray(vocab.encode(line_tokens(piece)), np.int64) for piece in line_chunks(text)]
    return torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, np.int64))


def byte_vocabulary() -> Vocabulary:
    """All 256 byte values, symbol ``chr(b)`` (Latin-1), so any byte stream encodes."""
    return Vocabulary([chr(b) for b in range(256)], "byte")


def encode_bytes(data: bytes) -> Tensor:
    return torch.from_numpy(np.frombuffer(data, dtype=np.uint8).astype(np.int64))


def encode_chars(text: str, vocab: Vocabulary) -> Tensor:
    """Character ids; a lookup table on the raw bytes when the text is ASCII (fast path)."""
    if text.isascii() and all(len(s) == 1 for s in vocab.symbols if s not in (vocab.unk,)):
        table = symbol_table(vocab, 128)
        ids = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
        if (ids < 0).any():
            unk = vocab.index.get(vocab.unk) if vocab.unk else None
            if unk is None:
                bad = chr(np.frombuffer(text.encode("ascii"), dtype=np.uint8)[ids < 0][0])
                raise DataError(f"character {bad!r} is not in the vocabulary")
            ids[ids < 0] = unk
        return torch.from_numpy(ids)
    return torch.tensor(vocab.encode(text), dtype=torch.long)


def symbol_table(vocab: Vocabulary, size: int) -> np.ndarray:
    """Id of each one-character symbol by code point below ``size``; -1 for the others."""
    table = np.full(size, -1, dtype=np.int64)
    for symbol, idx in vocab.index.items():
        if len(symbol) == 1 and ord(symbol) < size:
            table[ord(symbol)] = idx
    return table
