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
                    bytes of the training split
``text8``           cleaned Wikipedia, 27 characters, 90M/5M/5M split
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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from ..config import SUBWORD_LEVELS, DataConfig
from ..errors import DataError, unknown_choice
from .download import cache_dir, fetch, sha256_of, staged_folder
from .subword import SubwordVocabulary
from .token_cache import cache_key, cached_splits, vocab_digest
from .vocab import EOS, UNK, Vocabulary

SPLITS = ("train", "valid", "test")

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


@dataclass(frozen=True)
class Archive:
    """A zipped single-file corpus; ``sha256`` of the archive (None: not published).

    ``sha1_of_member`` and ``alphabet`` check the extracted file, downloaded or given by path.
    """

    url: str
    member: str
    size: int
    sha256: str | None = None
    sha1_of_member: str | None = None
    alphabet: bytes | None = None  # every byte of the file is one of these


# The Hutter-prize files are published with a size and (enwik8) a SHA-1 of the extracted
# file, not a SHA-256 of the archive: the extracted file is checked against those. No
# checksum of text8 is published and none could be computed where this was written (no
# network): text8 is checked by its size and its alphabet (a-z and space only, by
# construction), which any truncation, bit flip or other file fails.
ENWIK8 = Archive(
    "https://mattmahoney.net/dc/enwik8.zip",
    "enwik8",
    100_000_000,
    sha1_of_member="57b8363b814821dc9d47aa4d41f58733519076b2",
)
TEXT8 = Archive(
    "https://mattmahoney.net/dc/text8.zip",
    "text8",
    100_000_000,
    alphabet=b" abcdefghijklmnopqrstuvwxyz",
)
WIKITEXT103_URL = "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip"
#: SHA-256 of wikitext-103-v1.zip, as pinned independently by several public loaders of the
#: data set (it was not computed here: this machine has no network access).
WIKITEXT103_SHA256 = "242ba0f20b329cfdf1ccc61e9e9e5b59becf189db7f7a81cd2a0e2fc31539590"


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


# ------------------------------------------------------------------ tokenisation


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


def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from None
    if not data.strip():
        raise DataError(f"{path} is empty; give a text file with some content")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not UTF-8 text (byte {exc.start}); use data.level=byte for binary files"
        ) from None


def _truncate(corpus: Corpus, config: DataConfig) -> Corpus:
    if config.max_train_tokens:
        corpus.train = corpus.train[: config.max_train_tokens]
    if config.max_eval_tokens:
        corpus.valid = corpus.valid[: config.max_eval_tokens]
        corpus.test = corpus.test[: config.max_eval_tokens]
    return corpus


def _split_fractions(n: int) -> tuple[int, int]:
    """Boundaries of a 90/5/5 split."""
    return int(n * 0.9), int(n * 0.95)


# ------------------------------------------------------------------ corpora


def _pydoc(config: DataConfig, vocab: Vocabulary | None) -> Corpus:
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    a, b = _split_fractions(len(text))
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
    """Fetch Mikolov's archive and extract the six PTB files, each checked by SHA-256."""
    archive = fetch(PTB_URL, None, cache_dir() / "simple-examples.tgz")
    with tarfile.open(archive) as tar, staged_folder(folder) as tmp:
        for name, digest in PTB_SHA256.items():
            member = tar.extractfile(f"./simple-examples/data/{name}") or None
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
    return read_text(path)


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
    texts = [part.decode("ascii") for part in splits]
    vocab = vocab or Vocabulary.build(texts[0], "char")
    return Corpus(archive.member, vocab, *(encode_chars(text, vocab) for text in texts))


def _enwik8_xl(config: DataConfig, vocab: Vocabulary | None, download: bool) -> Corpus:
    """enwik8 as ``prep_enwik8.py`` and the Transformer-XL ``Vocab`` read it: each split's
    bytes become whitespace-separated numbers with the line feeds as line breaks, and
    ``encode_file(..., add_eos=False)`` drops the breaks; the vocabulary counts the
    training file (no line feed, about 200 symbols)."""
    splits = [
        part.replace(b"\n", b"") for part in _hutter_splits(_hutter_file(config, download, ENWIK8))
    ]
    if vocab is None:
        counts = np.bincount(np.frombuffer(splits[0], dtype=np.uint8), minlength=256)
        seen = Counter({chr(byte): int(n) for byte, n in enumerate(counts) if n})
        vocab = Vocabulary.build(seen, "byte")
    table = symbol_table(vocab, 256)
    parts = []
    for name, part in zip(SPLITS, splits, strict=True):
        raw = np.frombuffer(part, dtype=np.uint8)
        ids = table[raw]
        if (ids < 0).any():
            byte = raw[ids < 0][0]
            raise DataError(
                f"byte {byte} of enwik8's {name} split is not in the vocabulary (it never "
                "occurs in training); use data.corpus=enwik8, which keeps all 256 bytes"
            )
        parts.append(torch.from_numpy(ids))
    return Corpus("enwik8-xl", vocab, *parts)


def check_member(archive: Archive, data: bytes, where: str) -> None:
    """The extracted corpus file against its published size, SHA-1 and alphabet."""
    if len(data) != archive.size:
        raise DataError(
            f"{where} has {len(data)} bytes, expected {archive.size}; not used (re-download it)"
        )
    if archive.sha1_of_member and hashlib.sha1(data).hexdigest() != archive.sha1_of_member:
        raise DataError(f"{where} fails its published SHA-1 check; not used (re-download it)")
    if archive.alphabet is not None and data.translate(None, archive.alphabet):
        raise DataError(
            f"{where} holds bytes outside {archive.member}'s alphabet; not used (re-download it)"
        )


def extract_archive(archive: Archive, folder: Path, zipped: Path | None = None) -> Path:
    """Extract a zipped corpus (downloaded and checked unless ``zipped`` is given); verify
    the extracted file before it is written."""
    if zipped is None:
        zipped = fetch(archive.url, archive.sha256, cache_dir() / Path(archive.url).name)
    try:
        with zipfile.ZipFile(zipped) as zf:
            data = zf.read(archive.member)
    except (zipfile.BadZipFile, KeyError, OSError) as exc:
        raise DataError(f"cannot unzip {archive.member} from {zipped}: {exc}") from None
    check_member(archive, data, f"{archive.member} from {zipped}")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / archive.member
    out.write_bytes(data)
    return out


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
    texts = {s: read_text(names[s]) for s in SPLITS}
    vocab = vocab or Vocabulary.build(count_words(texts["train"]), "word", unk=UNK, eos=EOS)
    return Corpus("wikitext-103", vocab, *(encode_words(texts[s], vocab) for s in SPLITS))


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


def _file(config: DataConfig, vocab: Vocabulary | None) -> Corpus:
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
    return Corpus("file", vocab, *(splits[s] for s in SPLITS))


def _encode_file(
    config: DataConfig, sources: list[Path], vocab: Vocabulary | None
) -> tuple[dict[str, Tensor], Vocabulary]:
    """Read, split and encode a user corpus in memory (the token cache stores the result)."""
    path = Path(config.path or "")
    if len(sources) == 3:
        raw = {s: p.read_bytes() for s, p in zip(SPLITS, sources, strict=True)}
    elif config.level != "byte":  # split decoded text: a cut never falls inside a character
        text = read_text(path)
        a, b = _split_fractions(len(text))
        parts = {"train": text[:a], "valid": text[a:b], "test": text[b:]}
        raw = {k: v.encode("utf-8") for k, v in parts.items()}
    else:
        data = path.read_bytes()
        a, b = _split_fractions(len(data))
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


CORPORA: dict[str, Callable[[DataConfig, Vocabulary | None, bool], Corpus]] = {
    "pydoc": lambda c, v, d: _pydoc(c, v),
    "ptb-word": lambda c, v, d: _ptb(c, v, d, char=False),
    "ptb-char": lambda c, v, d: _ptb(c, v, d, char=True),
    "ptb-char-rt": _ptb_char_rt,
    "enwik8": lambda c, v, d: _hutter(c, v, d, ENWIK8),
    "enwik8-xl": _enwik8_xl,
    "text8": lambda c, v, d: _hutter(c, v, d, TEXT8),
    "wikitext-103": _wikitext103,
    "file": lambda c, v, d: _file(c, v),
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
