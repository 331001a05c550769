"""The user's own corpus (``data.corpus=file``): a text file split 90/5/5, or a folder with
train/valid/test.txt, at character, word or byte level or with a BPE/unigram tokenizer trained
on its training split; the token ids are cached, memory-mapped (:mod:`.token_cache`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ..config import SUBWORD_LEVELS, DataConfig
from ..errors import DataError
from ..files import read_text
from .download import sha256_of
from .encoding import byte_vocabulary, count_words, encode_bytes, encode_chars, encode_words
from .token_cache import SPLITS, cache_key, cached_splits, vocab_digest
from .vocab import EOS, UNK, SubwordVocabulary, Vocabulary


def split_fractions(n: int) -> tuple[int, int]:
    """Boundaries of a 90/5/5 split."""
    return int(n * 0.9), int(n * 0.95)


def read_corpus_text(path: Path) -> str:
    """A corpus text file: UTF-8 and not empty (a binary file wants ``data.level=byte``)."""
    return read_text(
        path,
        DataError,
        binary_fix=None,
        utf8_fix="use data.level=byte for binary files",
        empty_fix="give a text file with some content",
    )


def _file_sources(path: Path) -> list[Path]:
    """The file, or a folder's train/valid/test.txt (all three must exist)."""
    if path.is_dir():
        files = [path / f"{s}.txt" for s in SPLITS]
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise DataError(f"missing {', '.join(missing)}; a corpus folder needs all three")
        return files
    if path.is_file():
        return [path]
    raise DataError(f"data.path={path} does not exist")


def file_corpus_splits(
    config: DataConfig, vocab: Vocabulary | None
) -> tuple[Vocabulary, Tensor, Tensor, Tensor]:
    """The vocabulary and the train, valid and test ids of ``data.path`` (cached unless
    ``data.cache=false``; with ``vocab``, a checkpoint's, its ids)."""
    if not config.path:
        raise DataError("corpus=file needs data.path=FILE (or a folder with train/valid/test.txt)")
    sources = _file_sources(Path(config.path))
    if config.cache is False:
        splits, vocab = _encode_file(config, sources, vocab)
    else:
        spec = {
            "corpus": "file",
            "layout": "folder" if len(sources) > 1 else "90/5/5",
            "level": config.level,
            "subword_vocab_size": config.subword_vocab_size,
            "vocab": vocab_digest(vocab),
        }
        key = cache_key([sha256_of(p) for p in sources], spec)
        splits, vocab = cached_splits(key, lambda: _encode_file(config, sources, vocab))
    return vocab, splits["train"], splits["valid"], splits["test"]


def _encode_file(
    config: DataConfig, sources: list[Path], vocab: Vocabulary | None
) -> tuple[dict[str, Tensor], Vocabulary]:
    """Read, split and encode a user corpus in memory (the token cache stores the result)."""
    path = Path(config.path or "")
    if len(sources) == 3:
        raw = {s: p.read_bytes() for s, p in zip(SPLITS, sources, strict=True)}
    elif config.level != "byte":  # split decoded text: a cut never falls inside a character
        text = read_corpus_text(path)
        a, b = split_fractions(len(text))
        parts = {"train": text[:a], "valid": text[a:b], "test": text[b:]}
        raw = {k: v.encode("utf-8") for k, v in parts.items()}
    else:
        data = path.read_bytes()
        a, b = split_fractions(len(data))
        raw = {"train": data[:a], "valid": data[a:b], "test": data[b:]}
    if not raw["train"].strip():
        raise DataError(f"{path} is empty; give a text file with some content")
    level = config.level
    if level == "byte":
        vocab = vocab or byte_vocabulary()
        return {s: encode_bytes(raw[s]) for s in SPLITS}, vocab
    texts = {}
    for split in SPLITS:
        try:
            texts[split] = raw[split].decode("utf-8")
        except UnicodeDecodeError:
            raise DataError(
                f"{path} is not UTF-8 text ({split} part); use data.level=byte for binary files"
            ) from None
    if level in SUBWORD_LEVELS:
        return _encode_subword(config, texts, vocab)
    if level == "char":
        vocab = vocab or Vocabulary.build(texts["train"], "char", unk=UNK)
        return {s: encode_chars(texts[s], vocab) for s in SPLITS}, vocab
    vocab = vocab or Vocabulary.build(count_words(texts["train"]), "word", unk=UNK, eos=EOS)
    return {s: encode_words(texts[s], vocab) for s in SPLITS}, vocab


def _encode_subword(
    config: DataConfig, texts: dict[str, str], vocab: Vocabulary | None
) -> tuple[dict[str, Tensor], Vocabulary]:
    """A BPE/unigram tokenizer trained on the training split (or the checkpoint's)."""
    if vocab is None:
        vocab = SubwordVocabulary.train(texts["train"], config.level, config.subword_vocab_size)
    elif not isinstance(vocab, SubwordVocabulary) or vocab.level != config.level:
        raise DataError(
            f"data.level={config.level} needs a {config.level} tokenizer, but the given "
            f"vocabulary is {vocab.level}-level; use the checkpoint's own data settings"
        )
    return {s: torch.from_numpy(vocab.encode_text(texts[s])) for s in SPLITS}, vocab
