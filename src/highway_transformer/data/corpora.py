"""Language-modelling corpora.

==================  =====================================================================
name                what
==================  =====================================================================
``pydoc``           embedded default, no download: the English text of CPython's
                    documentation topics (``pydoc_data.topics``, ~465k characters),
                    character level, fixed 90/5/5 split
``ptb-word``        Penn Treebank, Mikolov's LM version: 10k words, ``<eos>`` at line ends
``ptb-char``        its character-level derivative (50 symbols counting the line end)
``ptb-char-rt``     the R-Transformer code's character PTB: the characters of the word-level
                    files, each line end spelled as the five characters ``<eos>``
``enwik8``          first 10^8 bytes of Wikipedia, byte level, 90M/5M/5M split
``enwik8-xl``       the same as the Transformer-XL pipeline reads it (``prep_enwik8.py``,
                    ``add_eos=False``): every line-feed byte dropped, the vocabulary the
                    bytes of all three splits (``data.vocab_splits``)
``text8``           cleaned Wikipedia, 27 characters, 90M/5M/5M split; the vocabulary
                    counts all three splits (``data.vocab_splits``)
``wikitext-103``    WikiText-103 word level (use with adaptive softmax)
``file``            any text file (split 90/5/5) or folder with train/valid/test.txt, at
                    ``char``, ``word`` or ``byte`` level or with a ``bpe``/``unigram``
                    tokenizer trained on it; token ids are cached (memory-mapped)
==================  =====================================================================
"""

from __future__ import annotations

import hashlib
import tarfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..config import DataConfig
from ..errors import DataError, unknown_choice
from .archives import (
    ENWIK8,
    TEXT8,
    WIKITEXT103_SHA256,
    WIKITEXT103_URL,
    Archive,
    check_member,
    extract_archive,
)
from .download import cache_dir, fetch, fetch_archive, sha256_of, staged_folder
from .encoding import (
    byte_vocabulary,
    count_words,
    encode_bytes,
    encode_chars,
    encode_words,
    line_tokens,
    symbol_table,
)
from .user_files import SPLITS, file_corpus_splits, read_corpus_text, split_fractions
from .vocab import EOS, UNK, Vocabulary, count_symbols

PTB_URL = "https://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz"
#: SHA-256 of the PTB files (Mikolov's simple-examples/data), checked after extraction.
PTB_SHA256 = {
    "ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
    "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
    "ptb.char.train.txt": "4204600bf26e26a5a446900efa17e8f2e5a6ea37e9c0096fd3ed89e657f3c76d",
    "ptb.char.valid.txt": "8d3e6b4fbc7f1f6bc26cf89f1286212349a5a90d0fd6e97d2e260d2edd602d9e",
    "ptb.char.test.txt": "04ee2179928640500040c93ea22229b54df38bb04075b84c4afae9e0705f941e",
}
#: Where the PTB files lie in Mikolov's archive.
PTB_MEMBER_DIR = "./simple-examples/data/"


@dataclass
class Corpus:
    """Token ids of the three splits and the vocabulary that encodes them.

    Ids are ``int64`` tensors, or for a cached user corpus (``corpus=file``) ``uint16``/
    ``uint32`` tensors mapped from disk; batching converts one window at a time.
    """

    name: str
    vocab: Vocabulary
    train: Tensor
    valid: Tensor
    test: Tensor

    def split(self, name: str) -> Tensor:
        if name not in SPLITS:
            raise unknown_choice("split", name, SPLITS)
        return getattr(self, name)


#: The corpora whose vocabulary is counted from a choice of splits. Transformer-XL's ``Corpus``
#: (``pytorch/data_utils.py``) counts train, valid and test of enwik8 and text8, and so does
#: ``auto``; ``train`` is the rule of this library's earlier versions.
COUNTED_VOCABULARIES = ("enwik8-xl", "text8")


def vocab_splits(config: DataConfig) -> tuple[str, ...]:
    """The splits whose symbols the vocabulary of a :data:`COUNTED_VOCABULARIES` corpus
    counts."""
    return ("train",) if config.vocab_splits == "train" else SPLITS


def _truncate(corpus: Corpus, config: DataConfig) -> Corpus:
    if config.max_train_tokens:
        corpus.train = corpus.train[: config.max_train_tokens]
    if config.max_eval_tokens:
        corpus.valid = corpus.valid[: config.max_eval_tokens]
        corpus.test = corpus.test[: config.max_eval_tokens]
    return corpus


# ------------------------------------------------------------------ corpora


def _pydoc(config: DataConfig, vocab: Vocabulary | None) -> Corpus:
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    a, b = split_fractions(len(text))
    parts = {"train": text[:a], "valid": text[a:b], "test": text[b:]}
    vocab = vocab or Vocabulary.build(parts["train"], "char", unk=UNK)
    return Corpus("pydoc", vocab, *(encode_chars(parts[s], vocab) for s in SPLITS))


def ptb_folder(config: DataConfig, download: bool, needed: str = "ptb.train.txt") -> Path:
    """The PTB folder, holding ``needed`` (a character corpus needs only the char files)."""
    folder = Path(config.path) if config.path else cache_dir() / "ptb"
    if not (folder / needed).is_file():
        if download and not config.path:
            download_ptb(folder)
        else:
            raise DataError(
                f"Penn Treebank not found in {folder} (expected {needed} and its valid/test"
                f" twins); put Mikolov's files there (simple-examples/data from {PTB_URL}) or run"
                " `highway download ptb`, and pass data.path=FOLDER"
            )
    return folder


def download_ptb(folder: Path) -> Path:
    """Fetch Mikolov's archive (no SHA-256 of it is published: it is pinned by the SHA-256 of
    the six PTB files it holds) and extract them, each checked again."""
    members = {f"{PTB_MEMBER_DIR}{name}": digest for name, digest in PTB_SHA256.items()}
    archive = fetch_archive(PTB_URL, members, cache_dir() / "simple-examples.tgz")
    with tarfile.open(archive) as tar, staged_folder(folder) as tmp:
        for name, digest in PTB_SHA256.items():
            member = tar.extractfile(f"{PTB_MEMBER_DIR}{name}") or None
            if member is None:
                raise DataError(f"{archive} does not contain {name}")
            data = member.read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise DataError(f"{name} from {PTB_URL} fails its SHA-256 check; not used")
            (tmp / name).write_bytes(data)
    return folder


def _ptb_text(folder: Path, name: str) -> str:
    """One of Mikolov's PTB files, checked by SHA-256."""
    path = folder / name
    if not path.is_file():
        raise DataError(f"{path} is missing; the PTB folder needs all three splits")
    if sha256_of(path) != PTB_SHA256[name]:
        raise DataError(
            f"{path} is not Mikolov's {name} (SHA-256 differs); replace it with the "
            "original (`highway download ptb`), or use corpus=file for other text"
        )
    return read_corpus_text(path)


def _ptb(config: DataConfig, vocab: Vocabulary | None, download: bool, char: bool) -> Corpus:
    prefix = "ptb.char." if char else "ptb."
    folder = ptb_folder(config, download, f"{prefix}train.txt")
    tokens = {s: line_tokens(_ptb_text(folder, f"{prefix}{s}.txt")) for s in SPLITS}
    if vocab is None:
        vocab = Vocabulary.build(
            tokens["train"], "char" if char else "word", unk=None if char else UNK, eos=EOS
        )
    name = "ptb-char" if char else "ptb-word"
    return Corpus(name, vocab, *(torch.tensor(vocab.encode(tokens[s])) for s in SPLITS))


def _ptb_char_rt(config: DataConfig, vocab: Vocabulary | None, download: bool) -> Corpus:
    """Character PTB as the R-Transformer code reads it (``language_char/utils.py`` through
    ``observations.ptb``): the word-level files' text with every line feed replaced by
    ``<eos>`` (five characters), one symbol per character (``<unk>`` is five characters
    too); the vocabulary holds every character of the three splits, as the code's."""
    folder = ptb_folder(config, download)
    texts = {s: _ptb_text(folder, f"ptb.{s}.txt").replace("\n", EOS) for s in SPLITS}
    vocab = vocab or Vocabulary.build("".join(texts[s] for s in SPLITS), "char")
    return Corpus("ptb-char-rt", vocab, *(encode_chars(texts[s], vocab) for s in SPLITS))


def _hutter_file(config: DataConfig, download: bool, archive: Archive) -> bytes:
    """The checked bytes of a Hutter-prize file (unzipped from a local archive or fetched)."""
    folder = Path(config.path) if config.path else cache_dir()
    path = folder / archive.member
    zipped = folder / Path(archive.url).name
    if not path.is_file() and zipped.is_file():  # a local copy of the archive: unzip it
        extract_archive(archive, folder, zipped)
    if not path.is_file():
        if not download or config.path:
            raise DataError(
                f"{archive.member} not found at {path}; download {archive.url}, put it (or its"
                " unzipped file) there and pass data.path=FOLDER, or run `highway download "
                f"{archive.member}`"
            )
        extract_archive(archive, folder)
    data = path.read_bytes()
    check_member(archive, data, str(path))
    return data


def _hutter_splits(data: bytes) -> tuple[bytes, bytes, bytes]:
    """The 90% / 5% / 5% split of the papers (90M / 5M / 5M bytes of the 10^8)."""
    a, b = len(data) * 9 // 10, len(data) * 19 // 20
    return data[:a], data[a:b], data[b:]


def _hutter(
    config: DataConfig, vocab: Vocabulary | None, download: bool, archive: Archive
) -> Corpus:
    splits = _hutter_splits(_hutter_file(config, download, archive))
    if archive.member == "enwik8":
        vocab = vocab or byte_vocabulary()
        return Corpus(archive.member, vocab, *(encode_bytes(part) for part in splits))
    texts = dict(zip(SPLITS, (part.decode("ascii") for part in splits), strict=True))
    if vocab is None:
        counts = sum((count_symbols(texts[s]) for s in vocab_splits(config)), Counter())
        vocab = Vocabulary.build(counts, "char")
    return Corpus(archive.member, vocab, *(encode_chars(texts[s], vocab) for s in SPLITS))


def _enwik8_xl(config: DataConfig, vocab: Vocabulary | None, download: bool) -> Corpus:
    """enwik8 as ``prep_enwik8.py`` and the Transformer-XL ``Corpus`` read it: each split's
    bytes become whitespace-separated numbers with the line feeds as line breaks, and
    ``encode_file(..., add_eos=False)`` drops the breaks; the vocabulary counts the bytes of
    train, valid and test (no line feed), or of ``data.vocab_splits``."""
    parts = _hutter_splits(_hutter_file(config, download, ENWIK8))
    splits = dict(zip(SPLITS, (part.replace(b"\n", b"") for part in parts), strict=True))
    if vocab is None:
        counted = (splits[s] for s in vocab_splits(config))
        counts = sum(np.bincount(np.frombuffer(p, dtype=np.uint8), minlength=256) for p in counted)
        seen = Counter({chr(byte): int(n) for byte, n in enumerate(counts) if n})
        vocab = Vocabulary.build(seen, "byte")
    table = symbol_table(vocab, 256)
    encoded = []
    for name, part in splits.items():
        raw = np.frombuffer(part, dtype=np.uint8)
        ids = table[raw]
        if (ids < 0).any():
            byte = raw[ids < 0][0]
            raise DataError(
                f"byte {byte} of enwik8's {name} split is not in the vocabulary of "
                f"{len(vocab)} symbols; count every split (data.vocab_splits=all) or use "
                "data.corpus=enwik8, which keeps all 256 bytes"
            )
        encoded.append(torch.from_numpy(ids))
    return Corpus("enwik8-xl", vocab, *encoded)


def _wikitext103(config: DataConfig, vocab: Vocabulary | None, download: bool) -> Corpus:
    folder = Path(config.path) if config.path else cache_dir() / "wikitext-103"
    names = {s: folder / f"wiki.{s}.tokens" for s in SPLITS}
    if not names["train"].is_file():
        if not download or config.path:
            raise DataError(
                f"WikiText-103 not found in {folder} (wiki.train.tokens ...); download "
                f"{WIKITEXT103_URL}, unzip it and pass data.path=FOLDER"
            )
        zipped = fetch(WIKITEXT103_URL, WIKITEXT103_SHA256, cache_dir() / "wikitext-103-v1.zip")
        try:
            with zipfile.ZipFile(zipped) as zf, staged_folder(folder) as tmp:
                for split, path in names.items():
                    (tmp / path.name).write_bytes(zf.read(f"wikitext-103/wiki.{split}.tokens"))
        except (zipfile.BadZipFile, KeyError) as exc:
            raise DataError(f"cannot unzip WikiText-103 from {zipped}: {exc}") from None
    texts = {s: read_corpus_text(names[s]) for s in SPLITS}
    vocab = vocab or Vocabulary.build(count_words(texts["train"]), "word", unk=UNK, eos=EOS)
    return Corpus("wikitext-103", vocab, *(encode_words(texts[s], vocab) for s in SPLITS))


CORPORA: dict[str, Callable[[DataConfig, Vocabulary | None, bool], Corpus]] = {
    "pydoc": lambda c, v, d: _pydoc(c, v),
    "ptb-word": lambda c, v, d: _ptb(c, v, d, char=False),
    "ptb-char": lambda c, v, d: _ptb(c, v, d, char=True),
    "ptb-char-rt": _ptb_char_rt,
    "enwik8": lambda c, v, d: _hutter(c, v, d, ENWIK8),
    "enwik8-xl": _enwik8_xl,
    "text8": lambda c, v, d: _hutter(c, v, d, TEXT8),
    "wikitext-103": _wikitext103,
    "file": lambda c, v, d: Corpus("file", *file_corpus_splits(c, v)),
}


def load_corpus(
    config: DataConfig, vocab: Vocabulary | None = None, download: bool = False
) -> Corpus:
    """Load and encode a corpus; with ``vocab`` (e.g. from a checkpoint) reuse its ids."""
    if config.corpus not in CORPORA:
        raise unknown_choice("corpus", config.corpus, CORPORA)
    corpus = CORPORA[config.corpus](config, vocab, download)
    return _truncate(corpus, config)


def verify_files(paths: Iterable[Path], expected: dict[str, str]) -> dict[str, bool]:
    """SHA-256 check of local files against ``expected`` (by file name)."""
    return {p.name: sha256_of(p) == expected.get(p.name) for p in paths}
