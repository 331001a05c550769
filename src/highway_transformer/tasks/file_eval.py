"""Score a whole text file with a trained language model (``highway eval RUN --file TEXT``).

The file is tokenised the way the model's vocabulary was built (characters, PTB-style lines
with an end-of-line symbol, words, bytes, the saved BPE/unigram tokenizer; plain text for a
character-PTB model has its spaces spelled ``_``) and every symbol of it is a target exactly once:
vocabularies with a line-end symbol start from it (a file begins where a line ended), so
even the first symbol is predicted; without one the first symbol can only be context.
Symbols outside the vocabulary are counted (and scored as ``<unk>`` where there is one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import Config
from ..data.encoding import encode_bytes, line_tokens
from ..data.vocab import SubwordVocabulary, Vocabulary
from ..errors import DataError
from ..models.families import memory_policy
from ..models.generation import spells_spaces
from ..models.lm import LanguageModel
from .lm_eval import EvalResult, evaluate


@dataclass
class FileScore:
    result: EvalResult
    symbols: int  # symbols in the file (at the vocabulary's level)
    oov: int  # of which outside the vocabulary

    def as_dict(self) -> dict[str, float]:
        return {**self.result.as_dict(), "symbols": self.symbols, "oov": self.oov}


def file_symbols(text: bytes, vocab: Vocabulary) -> list[str]:
    """The file's symbols at the vocabulary's level (bytes as Latin-1 characters)."""
    if vocab.level == "byte":
        return [chr(b) for b in text]
    decoded = _decoded(text)
    if spells_spaces(vocab) and not spelled_out(decoded):  # plain text for a char-PTB model
        return [s for line in decoded.splitlines() for s in [*"_".join(line.split()), vocab.eos]]
    if vocab.eos is not None:  # PTB word/char formats: whitespace tokens + a line-end symbol
        return line_tokens(decoded, vocab.eos)
    return list(decoded) if vocab.level == "char" else decoded.split()


def _decoded(text: bytes) -> str:
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError("the file is not UTF-8 text; this model reads text, not bytes") from None


def spelled_out(text: str) -> bool:
    """Whether ``text`` is in the char-PTB format (single symbols separated by spaces)."""
    return all(len(token) == 1 for token in text.split()[:1000])


def encode_file(path: str | Path, vocab: Vocabulary) -> tuple[torch.Tensor, int, int]:
    """``(ids, symbols, oov)``; ids start with the line-end symbol where the vocabulary has one."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}; give a text file") from None
    if vocab.level == "byte":
        ids = encode_bytes(raw)
        return ids, ids.numel(), 0
    if isinstance(vocab, SubwordVocabulary):  # the saved tokenizer: every text encodes
        ids = torch.from_numpy(vocab.encode_text(_decoded(raw)))
        return ids, ids.numel(), 0
    symbols = file_symbols(raw, vocab)
    if not symbols:
        raise DataError(f"{path} holds no symbols to score; give a file with some text")
    unknown = [s for s in symbols if s not in vocab.index]
    if unknown and vocab.unk is None:
        examples = sorted(set(unknown))[:5]
        raise DataError(
            f"{path} has {len(unknown)} symbols outside the model's vocabulary (e.g. {examples})"
            " and the vocabulary has no <unk>; remove or replace them"
        )
    start = [vocab.eos] if vocab.eos is not None else []
    ids = torch.tensor(vocab.encode(start + symbols), dtype=torch.long)
    return ids, len(symbols), len(unknown)


def evaluate_file(
    model: LanguageModel,
    vocab: Vocabulary,
    path: str | Path,
    config: Config,
    device: torch.device | str = "cpu",
) -> FileScore:
    """Mean NLL over every symbol of the file, with the evaluation batching and memory
    settings of ``config``."""
    ids, symbols, oov = encode_file(path, vocab)
    if ids.numel() < 2:
        raise DataError(f"{path} is too short to score: it needs at least 2 symbols")
    policy = memory_policy(config.model, evaluation=True)
    result = evaluate(model, ids, config.data, device, config.train.precision, policy=policy)
    return FileScore(result, symbols, oov)
