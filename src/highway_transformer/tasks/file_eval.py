"""Score a whole text file with a trained language model (``highway eval RUN --file TEXT``).

The file is tokenised the way the model's vocabulary was built (characters, PTB-style lines
with an end-of-line symbol, words, bytes, the saved BPE/unigram tokenizer; plain text for a
character-PTB model has its spaces spelled ``_``) and every symbol of it is a target exactly once:
vocabularies with a line-end symbol start from it (a file begins where a line ended), so
even the first symbol is predicted; without one the first symbol can only be context.
Symbols outside the vocabulary are counted (and scored as ``<unk>`` where there is one).

Any size of file is scored in bounded memory: it is read and tokenised a piece at a time
(:mod:`~highway_transformer.data.streams`: pieces cut where the tokens cannot change), its ids
kept as ``uint16``/``uint32``, in a temporary file once they pass
:data:`~highway_transformer.data.streams.SPILL_BYTES`, and the evaluation reads them one
window at a time, Transformer-XL memory carried from window to window as for a split held in
memory: the score is the one :func:`~highway_transformer.tasks.lm_scoring.evaluate` gives for
the file's ids as one tensor.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..config import Config
from ..data.encoding import line_tokens, symbol_table
from ..data.streams import (
    SPILL_BYTES,
    TokenFile,
    cut_after_line,
    cut_after_space,
    cut_anywhere,
    cut_before_space,
    read_chunks,
    text_pieces,
)
from ..data.token_cache import id_dtype
from ..data.vocab import SubwordVocabulary, Vocabulary
from ..errors import DataError
from ..models.families import memory_policy
from ..models.generation import spells_spaces
from ..models.lm import LanguageModel
from .lm_scoring import EvalResult, evaluate
from .progress import EvalBar, on_terminal

#: Bytes read at a time for a BPE/unigram tokenizer.
SUBWORD_READ_BYTES = 1 << 16
#: Tokens of the file's start that decide whether plain text or the char-PTB format is given.
FORMAT_SAMPLE = 1000


@dataclass
class FileScore:
    result: EvalResult
    symbols: int  # symbols in the file (at the vocabulary's level)
    oov: int  # of which outside the vocabulary

    def as_dict(self) -> dict[str, float]:
        return {**self.result.as_dict(), "symbols": self.symbols, "oov": self.oov}


@dataclass
class FileTokens:
    """A file's ids (starting with the line-end symbol where the vocabulary has one), its
    symbol count and how many of them are outside the vocabulary."""

    ids: TokenFile
    symbols: int
    oov: int


def spelled_out(text: str) -> bool:
    """Whether ``text`` is in the char-PTB format (single symbols separated by spaces)."""
    return all(len(token) == 1 for token in text.split()[:FORMAT_SAMPLE])


class _Counter:
    """Ids of symbol pieces with the unknown ones counted: their number and the five
    alphabetically first, for the error of a vocabulary without ``<unk>``."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.unk = vocab.index.get(vocab.unk) if vocab.unk is not None else None
        self.ascii = symbol_table(vocab, 128).astype(np.int32)  # ASCII characters by code
        self.symbols = self.oov = 0
        self.examples: list[str] = []

    def chars(self, piece: str) -> np.ndarray:
        if not piece.isascii():
            return self.symbols_of(list(piece))
        codes = np.frombuffer(piece.encode("ascii"), np.uint8)
        return self._counted(self.ascii[codes], lambda where: {chr(c) for c in codes[where]})

    def symbols_of(self, symbols: list[str]) -> np.ndarray:
        index = self.vocab.index
        ids = np.fromiter((index.get(s, -1) for s in symbols), np.int64, len(symbols))
        return self._counted(ids, lambda where: {symbols[i] for i in where})

    def _counted(self, ids: np.ndarray, unknown: Callable[[np.ndarray], set[str]]) -> np.ndarray:
        self.symbols += ids.size
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            self.oov += bad.size
            self.examples = sorted(set(self.examples) | unknown(bad))[:5]
            if self.unk is not None:
                ids[bad] = self.unk
        return ids


def _symbol_reader(
    vocab: Vocabulary, chunks: Iterator[bytes], counter: _Counter
) -> Iterator[np.ndarray]:
    """Ids of the file's symbols at the vocabulary's level, a piece at a time (-1 where
    unknown without ``<unk>``)."""
    if spells_spaces(vocab):  # plain text for a char-PTB model, or the char-PTB format
        pieces = text_pieces(chunks, cut_after_line)
        sample: list[str] = []
        for piece in pieces:  # the format is read from the file's first tokens
            sample.append(piece)
            if sum(len(p.split()) for p in sample) >= FORMAT_SAMPLE:
                break
        plain = not spelled_out("".join(sample))
        for piece in itertools.chain(sample, pieces):
            if plain:
                lines = piece.splitlines()
                symbols = [s for line in lines for s in [*"_".join(line.split()), vocab.eos]]
            else:
                symbols = line_tokens(piece, vocab.eos)
            yield counter.symbols_of(symbols)
    elif vocab.eos is not None:  # PTB word/char formats: whitespace tokens + a line-end symbol
        for piece in text_pieces(chunks, cut_after_line):
            yield counter.symbols_of(line_tokens(piece, vocab.eos))
    elif vocab.level == "char":
        for piece in text_pieces(chunks, cut_anywhere):
            yield counter.chars(piece)
    else:
        for piece in text_pieces(chunks, cut_after_space):
            yield counter.symbols_of(piece.split())


def tokenise_file(
    path: str | Path,
    vocab: Vocabulary,
    spill_bytes: int = SPILL_BYTES,
    on_bytes: Callable[[int], object] | None = None,
) -> FileTokens:
    """The ids of the file at ``path`` at the vocabulary's level, read a piece at a time
    (``on_bytes`` is told the size of each piece read: a progress display)."""

    def chunks(size: int | None = None) -> Iterator[bytes]:
        for chunk in read_chunks(path, size):
            yield chunk
            if on_bytes is not None:
                on_bytes(len(chunk))

    ids = TokenFile(id_dtype(len(vocab)), spill_bytes)
    try:
        if vocab.level == "byte":
            for chunk in chunks():
                ids.append(np.frombuffer(chunk, np.uint8))
            return FileTokens(ids.finish(), len(ids), 0)
        if isinstance(vocab, SubwordVocabulary):  # the saved tokenizer: every text encodes
            # smaller pieces: an encoding keeps offsets and token strings, ~300 bytes a token
            for piece in text_pieces(chunks(SUBWORD_READ_BYTES), cut_before_space):
                ids.append(vocab.encode_text(piece))
            return FileTokens(ids.finish(), len(ids), 0)
        counter = _Counter(vocab)
        if vocab.eos is not None:
            ids.append(np.array(vocab.encode([vocab.eos])))
        for piece in _symbol_reader(vocab, chunks(), counter):
            if counter.oov and counter.unk is None:
                continue  # counted for the error below, not kept
            ids.append(piece)
        if not counter.symbols:
            raise DataError(f"{path} holds no symbols to score; give a file with some text")
        if counter.oov and counter.unk is None:
            raise DataError(
                f"{path} has {counter.oov} symbols outside the model's vocabulary (e.g. "
                f"{counter.examples}) and the vocabulary has no <unk>; remove or replace them"
            )
        return FileTokens(ids.finish(), counter.symbols, counter.oov)
    except BaseException:
        ids.close()
        raise


def evaluate_file(
    model: LanguageModel,
    vocab: Vocabulary,
    path: str | Path,
    config: Config,
    device: torch.device | str = "cpu",
    progress: bool = False,
    spill_bytes: int = SPILL_BYTES,
) -> FileScore:
    """Mean NLL over every symbol of the file, with the evaluation batching and memory
    settings of ``config``; ``progress``: bars for the reading and the scoring on stderr."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}; give a text file") from None
    bars, started = progress and on_terminal(), time.monotonic()
    with tqdm(total=size, desc="reading", unit="B", unit_scale=True, disable=not bars) as bar:
        tokens = tokenise_file(path, vocab, spill_bytes, bar.update)
    if progress and not bars:  # piped: a plain line, no bar's cursor codes
        print(f"reading: {size:,} B in {time.monotonic() - started:.0f} s", file=sys.stderr)
    with tokens.ids as ids:
        if len(ids) < 2:
            raise DataError(f"{path} is too short to score: it needs at least 2 symbols")
        policy = memory_policy(config.model, evaluation=True)
        with EvalBar("scoring", "tok", progress) as bar:
            result = evaluate(
                model, ids, config.data, device, config.train.precision, policy=policy,
                progress=bar.report,
            )  # fmt: skip
    return FileScore(result, tokens.symbols, tokens.oov)
