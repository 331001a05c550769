"""Pixel-by-pixel image data: IDX reading/writing, MNIST loading (raw or gzip, checked by the
content's SHA-256) and the digits stand-in."""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from highway_transformer.data import images
from highway_transformer.data.images import (
    MNIST,
    load_digits_default,
    load_mnist,
    pixel_permutation,
    read_idx,
    read_mnist_file,
    write_idx,
)
from highway_transformer.errors import DataError

# A real MNIST copy beside the checkout (or at $HIGHWAY_MNIST), if there: optional test data.
REAL_MNIST = Path(
    os.environ.get("HIGHWAY_MNIST", Path(__file__).resolve().parents[3] / "shared/data/mnist")
)


@pytest.mark.parametrize("name", ["a.idx3-ubyte", "a.idx3-ubyte.gz"])
def test_idx_round_trip_uint8(tmp_path: Path, name: str) -> None:
    array = np.random.RandomState(0).randint(0, 256, size=(5, 4, 3)).astype(np.uint8)
    path = write_idx(tmp_path / name, array)
    raw = path.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    assert raw[:4] == bytes([0, 0, 0x08, 3])
    assert raw[4:16] == (5).to_bytes(4, "big") + (4).to_bytes(4, "big") + (3).to_bytes(4, "big")
    back = read_idx(path)
    assert back.dtype == np.uint8 and back.shape == (5, 4, 3)
    np.testing.assert_array_equal(back, array)


def test_idx_round_trip_other_types(tmp_path: Path) -> None:
    for array in (np.arange(6, dtype=np.int32).reshape(2, 3) - 3, np.linspace(0, 1, 4)):
        back = read_idx(write_idx(tmp_path / "x.idx", array))
        assert back.dtype == array.dtype
        np.testing.assert_array_equal(back, array)
    with pytest.raises(DataError, match="cannot store"):
        write_idx(tmp_path / "y.idx", np.zeros(3, dtype=np.int64))


def test_idx_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.idx"
    bad.write_bytes(bytes([1, 0, 8, 1, 0, 0, 0, 1, 7]))
    with pytest.raises(DataError, match="magic number") as info:
        read_idx(bad)
    assert "\n" not in str(info.value)
    bad.write_bytes(bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 7]))
    with pytest.raises(DataError, match="magic number"):
        read_idx(bad)
    full = write_idx(tmp_path / "full.idx", np.zeros((4, 5), dtype=np.uint8)).read_bytes()
    short = tmp_path / "short.idx"
    short.write_bytes(full[:-3])
    with pytest.raises(DataError, match="truncated"):
        read_idx(short)
    short.write_bytes(full[:6])
    with pytest.raises(DataError, match="truncated"):
        read_idx(short)
    short_gz = tmp_path / "short.idx.gz"
    short_gz.write_bytes(gzip.compress(full[:-1]))
    with pytest.raises(DataError, match="truncated"):
        read_idx(short_gz)
    cut_gz = tmp_path / "cut.idx.gz"
    cut_gz.write_bytes(gzip.compress(full)[:-6])
    with pytest.raises(DataError, match="gzip"):
        read_idx(cut_gz)


def _fake_mnist(
    root: Path, n_train: int = 12, n_test: int = 4, suffix: str = ".gz"
) -> dict[str, Path]:
    rng = np.random.RandomState(1)
    out = {}
    for part, n in (("train", n_train), ("test", n_test)):
        prefix = "train" if part == "train" else "t10k"
        pixels = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        out[f"{part}-images"] = write_idx(root / f"{prefix}-images-idx3-ubyte{suffix}", pixels)
        out[f"{part}-labels"] = write_idx(root / f"{prefix}-labels-idx1-ubyte{suffix}", labels)
    return out


def _content(path: Path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if path.suffix == ".gz" else raw


def _pin_contents(monkeypatch: pytest.MonkeyPatch, paths: dict[str, Path]) -> None:
    """Make the fake files the table's MNIST: their content's SHA-256 and size."""
    for key, path in paths.items():
        data = _content(path)
        entry = replace(
            images.MNIST[key],
            content_sha256=hashlib.sha256(data).hexdigest(),
            content_size=len(data),
        )
        monkeypatch.setitem(images.MNIST, key, entry)


@pytest.mark.parametrize("suffix", [".gz", ""])
def test_load_mnist_from_files_and_permutation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    paths = _fake_mnist(tmp_path, suffix=suffix)
    _pin_contents(monkeypatch, paths)
    splits = load_mnist(tmp_path, valid_size=2)
    x, y = splits.train
    assert x.shape == (10, 784, 1) and x.dtype == torch.float32 and y.dtype == torch.int64
    assert splits.valid[0].shape == (2, 784, 1) and splits.test[0].shape == (4, 784, 1)
    raw = read_idx(paths["train-images"])
    assert torch.allclose(x[3, :, 0], torch.from_numpy(raw[3].reshape(-1) / 255.0).float())
    assert splits.valid[1].tolist() == [0, 1]  # the last training labels (10, 11 mod 10)
    permuted = load_mnist(tmp_path, valid_size=2, permute=True, seed=5)
    perm = permuted.permutation
    assert perm is not None and torch.equal(perm, pixel_permutation(784, 5))
    for plain, shuffled in ((splits.train, permuted.train), (splits.test, permuted.test)):
        assert torch.equal(shuffled[0], plain[0][:, perm])
        assert torch.equal(shuffled[1], plain[1])
    with pytest.raises(DataError, match="download"):
        load_mnist(tmp_path / "nothing")


def test_raw_and_gzip_copies_of_one_content_both_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check is on the content: a raw copy and a re-compressed one (other gzip bytes,
    as ``gzip -n -9`` writes) of the same files load to the same tensors."""
    raw = _fake_mnist(tmp_path / "raw", suffix="")
    _pin_contents(monkeypatch, raw)
    packed = tmp_path / "packed"
    packed.mkdir()
    for path in raw.values():
        (packed / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes(), 9, mtime=1))
    a, b = load_mnist(tmp_path / "raw", valid_size=2), load_mnist(packed, valid_size=2)
    for split in ("train", "valid", "test"):
        assert torch.equal(getattr(a, split)[0], getattr(b, split)[0])
        assert torch.equal(getattr(a, split)[1], getattr(b, split)[1])


def test_load_mnist_refuses_altered_truncated_or_broken_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _fake_mnist(tmp_path, suffix="")
    _pin_contents(monkeypatch, paths)
    labels = paths["test-labels"]
    good = labels.read_bytes()
    labels.write_bytes(good[:-1] + bytes([(good[-1] + 1) % 256]))  # one label changed
    with pytest.raises(DataError, match="SHA-256 of its content") as info:
        load_mnist(tmp_path, valid_size=2)
    message = str(info.value)
    assert "\n" not in message and labels.name in message and "download" in message
    labels.write_bytes(good[:-2])
    with pytest.raises(DataError, match="truncated or not MNIST's"):
        load_mnist(tmp_path, valid_size=2)
    labels.unlink()
    packed = labels.with_name(labels.name + ".gz")
    packed.write_bytes(gzip.compress(good)[:-8])  # a cut download
    with pytest.raises(DataError, match="not a valid gzip file"):
        load_mnist(tmp_path, valid_size=2)
    packed.write_bytes(gzip.compress(good))
    assert load_mnist(tmp_path, valid_size=2).test[1].tolist() == [0, 1, 2, 3]


def test_load_mnist_download_checks_sha(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _fake_mnist(tmp_path / "server")
    _pin_contents(monkeypatch, source)
    for key, path in source.items():
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        entry = replace(images.MNIST[key], urls=(path.as_uri(),), sha256=digest)
        monkeypatch.setitem(images.MNIST, key, entry)
    splits = load_mnist(tmp_path / "cache", download=True, valid_size=0)
    assert splits.train[0].shape == (12, 784, 1) and len(splits.valid[1]) == 0
    wrong = replace(images.MNIST["test-labels"], sha256="f" * 64)
    monkeypatch.setitem(images.MNIST, "test-labels", wrong)
    with pytest.raises(DataError, match="checksum mismatch"):
        load_mnist(tmp_path / "cache2", download=True)
    # an archive that passes its own pin but unpacks to other content is refused too
    archive = hashlib.sha256(source["test-labels"].read_bytes()).hexdigest()
    other = replace(wrong, sha256=archive, content_sha256="0" * 64)
    monkeypatch.setitem(images.MNIST, "test-labels", other)
    with pytest.raises(DataError, match="SHA-256 of its content"):
        load_mnist(tmp_path / "cache3", download=True)


def test_content_table_describes_the_distributed_files() -> None:
    assert {e.name for e in MNIST.values()} == {
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
        "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte",
    }
    for entry in MNIST.values():
        assert len(entry.content_sha256) == 64 and int(entry.content_sha256, 16) >= 0
        n = 60_000 if entry.name.startswith("train") else 10_000
        header = 16 if "images" in entry.name else 8
        assert entry.content_size == header + n * (784 if "images" in entry.name else 1)


@pytest.mark.skipif(
    not REAL_MNIST.is_dir(), reason=f"no MNIST copy at {REAL_MNIST} (optional test data)"
)
def test_content_table_matches_real_mnist() -> None:
    """The table's content hashes are those of real MNIST (read from a local copy)."""
    for key, entry in MNIST.items():
        path = images._locate(REAL_MNIST, entry)
        assert path is not None, f"{entry.name} missing in {REAL_MNIST}"
        array = read_mnist_file(path, entry)  # raises DataError on any mismatch
        assert array.shape[0] == (60_000 if key.startswith("train") else 10_000)


def test_digits_default_shapes_split_and_permutation() -> None:
    pytest.importorskip("sklearn")
    a = load_digits_default()
    b = load_digits_default()
    sizes = [len(split[1]) for split in (a.train, a.valid, a.test)]
    assert sizes == [1257, 270, 270]
    for x, y in (a.train, a.valid, a.test):
        assert x.shape[1:] == (64, 1) and x.dtype == torch.float32 and y.dtype == torch.int64
        assert float(x.min()) >= 0.0 and float(x.max()) <= 1.0
    assert torch.equal(a.train[0], b.train[0]) and torch.equal(a.test[1], b.test[1])
    assert set(a.train[1].tolist()) == set(range(10))
    other = load_digits_default(split_seed=1)
    assert not torch.equal(other.test[1], a.test[1])
    p = load_digits_default(permute=True, seed=3)
    assert p.permutation is not None and sorted(p.permutation.tolist()) == list(range(64))
    assert not torch.equal(p.permutation, torch.arange(64))
    for plain, shuffled in ((a.train, p.train), (a.valid, p.valid), (a.test, p.test)):
        assert torch.equal(shuffled[0], plain[0][:, p.permutation])
