"""Downloads (``data/download.py``) and local corpus copies are checked the same way; failures
leave nothing behind."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.config import DataConfig
from highway_transformer.data import corpora, images, music
from highway_transformer.data.corpora import Archive, load_corpus
from highway_transformer.data.download import fetch, fetch_archive, sha256_of, staged_folder
from highway_transformer.data.vocab import Vocabulary
from highway_transformer.errors import DataError


def test_every_source_uses_https() -> None:
    urls = [corpora.PTB_URL, corpora.ENWIK8.url, corpora.TEXT8.url, corpora.WIKITEXT103_URL]
    urls += [url for entry in images.MNIST.values() for url in entry.urls]
    urls += [entry.url for entry in music.MUSIC_DATASETS.values()]
    assert all(url.startswith("https://") for url in urls)


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and int(value, 16) >= 0


def test_every_download_is_pinned_by_sha256() -> None:
    assert corpora.ENWIK8.sha1_of_member and corpora.TEXT8.alphabet
    digests = [corpora.ENWIK8.sha256, corpora.TEXT8.sha256, corpora.TEXT8.sha256_of_member]
    digests += [corpora.WIKITEXT103_SHA256, *corpora.PTB_SHA256.values()]
    digests += [entry.sha256 for entry in music.MUSIC_DATASETS.values()]
    digests += [entry.sha256 for entry in images.MNIST.values()]
    assert len(corpora.PTB_SHA256) == 6 and all(_is_sha256(d) for d in digests)


@pytest.mark.parametrize("digest", [None, "", "abc", "0" * 63 + "g", {}])
def test_an_unpinned_download_is_refused_before_fetching(tmp_path: Path, digest: object) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"anything")
    dest = tmp_path / "cache" / "copy.bin"
    with pytest.raises(DataError, match="^refusing to download .*not pinned by a SHA-256"):
        if isinstance(digest, dict):
            fetch_archive(source.as_uri(), digest, dest)
        else:
            fetch(source.as_uri(), digest, dest)  # type: ignore[arg-type]
    assert not dest.parent.exists()  # nothing was fetched


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_an_archive_is_pinned_by_the_members_it_is_read_for(tmp_path: Path) -> None:
    files = {"./data/a.txt": b"first", "./data/b.txt": b"second", "./other": b"unread"}
    source = _tar(tmp_path / "source.tgz", files)
    read = ("./data/a.txt", "./data/b.txt")
    pins = {name: hashlib.sha256(files[name]).hexdigest() for name in read}
    dest = tmp_path / "cache" / "archive.tgz"
    with pytest.raises(DataError, match="checksum mismatch.*2 pinned members.*discarded"):
        fetch_archive(source.as_uri(), {**pins, "./data/b.txt": "0" * 64}, dest)
    with pytest.raises(DataError, match="checksum mismatch"):  # a pinned member is missing
        fetch_archive(source.as_uri(), {**pins, "./data/c.txt": "0" * 64}, dest)
    assert list(dest.parent.iterdir()) == []
    assert fetch_archive(source.as_uri(), pins, dest) == dest
    source.unlink()  # checked and cached: not fetched again
    assert fetch_archive(source.as_uri(), pins, dest) == dest


def test_local_enwik8_of_the_wrong_size(tmp_path: Path) -> None:
    (tmp_path / "enwik8").write_bytes(b"x" * 100)
    with pytest.raises(DataError, match="expected 100000000"):
        load_corpus(DataConfig(corpus="enwik8", path=str(tmp_path)))


def _small_enwik8(monkeypatch: pytest.MonkeyPatch, folder: Path, data: bytes) -> DataConfig:
    monkeypatch.setattr(corpora, "ENWIK8", Archive(corpora.ENWIK8.url, "enwik8", len(data)))
    (folder / "enwik8").write_bytes(data)
    return DataConfig(corpus="enwik8-xl", path=str(folder))


def test_enwik8_xl_drops_line_feeds_as_the_xl_pipeline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """prep_enwik8.py turns byte 10 into line breaks and encode_file(add_eos=False) drops
    them; the split is taken on the raw bytes first (90% / 5% / 5%)."""
    data = (b"ab\ncd" * 36)[:180] + b"a\nb\ncd\n\n\n\n" + b"dcba\n" * 2
    assert len(data) == 200
    loaded = load_corpus(_small_enwik8(monkeypatch, tmp_path, data))
    parts = (data[:180], data[180:190], data[190:])
    for ids, raw in zip((loaded.train, loaded.valid, loaded.test), parts, strict=True):
        assert "".join(loaded.vocab.symbols[i] for i in ids.tolist()) == raw.replace(
            b"\n", b""
        ).decode("latin-1")
    assert sorted(loaded.vocab.symbols) == ["a", "b", "c", "d"]
    raw = load_corpus(DataConfig(corpus="enwik8", path=str(tmp_path)))
    assert raw.valid.numel() == 10 and len(raw.vocab) == 256


#: 180 training bytes of a and b; y occurs in valid only, z in test only.
ONLY_LATER = b"ab" * 90 + b"abbaabyaab" + b"abzzzzzzzz"


def test_enwik8_xl_vocabulary_counts_every_split_as_the_xl_corpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``Corpus.__init__`` counts train.txt, valid.txt and test.txt of enwik8: a byte that
    occurs only in valid or test is a symbol, ordered by its count over the three."""
    config = _small_enwik8(monkeypatch, tmp_path, ONLY_LATER)
    loaded = load_corpus(config)
    assert loaded.vocab.symbols == ["a", "b", "z", "y"]  # 96, 95, 8, 1 occurrences
    assert loaded.vocab.decode(loaded.test.tolist()) == list("abzzzzzzzz")
    every = load_corpus(DataConfig(**{**config.__dict__, "vocab_splits": "all"}))
    assert every.vocab == loaded.vocab and torch.equal(every.test, loaded.test)


def test_enwik8_xl_training_split_vocabulary_is_an_option(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """data.vocab_splits=train counts the training bytes only (earlier versions' rule): a
    byte it never saw is named; a vocabulary saved by such a run still encodes its data."""
    config = _small_enwik8(monkeypatch, tmp_path, ONLY_LATER)
    train_only = DataConfig(**{**config.__dict__, "vocab_splits": "train"})
    with pytest.raises(DataError, match="byte 121 of enwik8's valid split .*vocab_splits=all"):
        load_corpus(train_only)
    fitting = b"ab" * 90 + b"b" * 10 + b"ab" * 5  # every byte in training; more b later
    train_only = DataConfig(**{**_small_enwik8(monkeypatch, tmp_path, fitting).__dict__,
                               "vocab_splits": "train"})  # fmt: skip
    saved = tmp_path / "vocab.json"
    load_corpus(train_only).vocab.save(saved)
    old = Vocabulary.load(saved)
    assert old.symbols == ["a", "b"]  # training: 90 each (ties by symbol)
    now = load_corpus(DataConfig(corpus="enwik8-xl", path=str(tmp_path)))
    assert now.vocab.symbols == ["b", "a"]  # all three splits: 105 b, 95 a
    reloaded = load_corpus(DataConfig(corpus="enwik8-xl", path=str(tmp_path)), vocab=old)
    assert reloaded.vocab is old and old.decode(reloaded.valid.tolist()) == ["b"] * 10


def test_text8_vocabulary_counts_every_split_as_the_xl_corpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """text8: the same 27 symbols either way (the alphabet is checked); what the splits
    count decides the order of the ids."""
    data = b"a" * 150 + b"b" * 20 + b"c" * 30  # training: 150 a, 20 b, 10 c
    monkeypatch.setattr(corpora, "TEXT8", Archive(corpora.TEXT8.url, "text8", len(data)))
    (tmp_path / "text8").write_bytes(data)
    config = DataConfig(corpus="text8", path=str(tmp_path))
    assert load_corpus(config).vocab.symbols == ["a", "c", "b"]  # 150, 30, 20
    train_only = DataConfig(**{**config.__dict__, "vocab_splits": "train"})
    assert load_corpus(train_only).vocab.symbols == ["a", "b", "c"]


def test_a_local_ptb_copy_that_differs(tmp_path: Path) -> None:
    for split in ("train", "valid", "test"):
        (tmp_path / f"ptb.{split}.txt").write_text("not the treebank\n")
    with pytest.raises(DataError, match="SHA-256"):
        load_corpus(DataConfig(corpus="ptb-word", path=str(tmp_path)))


def test_a_music_file_in_the_data_folder_is_checked(tmp_path: Path) -> None:
    from scipy.io import savemat

    cells = np.empty((1, 1), dtype=object)
    cells[0, 0] = np.zeros((3, 88))
    savemat(tmp_path / "Nottingham.mat", {k: cells for k in music.SPLIT_KEYS})
    with pytest.raises(DataError, match="SHA-256"):
        music.load_music("nottingham", data_dir=tmp_path)


def test_a_checksum_mismatch_discards_the_download(tmp_path: Path) -> None:
    source = tmp_path / "source.bin"
    source.write_bytes(b"payload")
    dest = tmp_path / "cache" / "file.bin"
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch(source.as_uri(), "0" * 64, dest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    good = hashlib.sha256(b"payload").hexdigest()
    assert fetch(source.as_uri(), good, dest).read_bytes() == b"payload"


def test_a_failed_extraction_leaves_no_partial_folder(tmp_path: Path) -> None:
    target = tmp_path / "corpus"
    with pytest.raises(DataError), staged_folder(target) as tmp:
        (tmp / "half.txt").write_text("partial")
        raise DataError("interrupted")
    assert list(tmp_path.iterdir()) == []


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
        fetch((tmp_path / "missing.bin").as_uri(), "0" * 64, dest)
    assert not dest.exists()


def test_the_cache_is_the_platforms_unless_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$HIGHWAY_TRANSFORMER_CACHE`` first; else ``platformdirs``' per-user cache folder
    (on Linux ``$XDG_CACHE_HOME``), created when missing."""
    import platformdirs

    from highway_transformer.data.download import CACHE_ENV, cache_dir

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "named"))
    assert cache_dir() == tmp_path / "named" and (tmp_path / "named").is_dir()
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = Path(platformdirs.user_cache_dir("highway-transformer", appauthor=False))
    assert cache_dir() == expected and expected.is_dir()
    if sys.platform.startswith("linux"):
        assert expected == tmp_path / "xdg" / "highway-transformer"
